//! Walk `<state>/locks` into claims.
//!
//! Invariants: symlinks are never followed — not even a directory
//! swapped for a symlink between its create event and its scan: every
//! directory below the root is opened component by component with
//! `O_NOFOLLOW` from the root's descriptor ([`open_below_root`]); a
//! directory whose read fails (`getdents` returning an error) ends its
//! scan as a problem, never a retry; nothing under the root is
//! silently dropped — every name that is not a well-formed gate or announce
//! becomes a [`ScanProblem`]; an unreadable directory is a problem, not an
//! error. Only a missing or unreadable locks root fails the scan.

use std::collections::HashSet;
use std::ffi::OsStr;
use std::fs::FileType;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use nix::dir::{Dir, Type};
use nix::errno::Errno;
use nix::fcntl::{OFlag, open, openat};
use nix::sys::stat::Mode;

use super::{ScanProblem, ScanProblemKind};
use crate::disk::key::{DirNamer, LockKey};
use crate::locks::escape::{ANNOUNCE_SUFFIX, GATE_SUFFIX, unescape};
use crate::locks::locks_root;

/// Called with each directory just before the walk reads it: the engine
/// adds its inotify watch there, so whatever is created in it afterwards
/// is heard, and whatever was created before is read.
pub(crate) type OnDir = std::sync::Arc<dyn Fn(&Path) + Send + Sync>;

/// Every claim and every problem found under a directory.
#[derive(Debug, Default, Clone)]
pub struct ScanReport {
    /// One entry per gate file, in walk order.
    pub keys: Vec<LockKey>,
    /// Each key's gate inode, as its directory entry gives it (no `stat`),
    /// in the order of `keys` ([`scan`] and [`scan_subtree`] only; empty
    /// when the keys were fed).
    pub gate_inodes: Vec<u64>,
    /// Everything that is not a well-formed claim.
    pub problems: Vec<ScanProblem>,
    /// The inode of every gate and announce found (from the directory
    /// entries: no `stat`), unsorted — what tells a lock on a claim file
    /// still on disk from one on a file unlinked from under the root.
    pub claim_inodes: Vec<u64>,
}

impl ScanReport {
    /// The gates of claims whose announce is no regular file (a FIFO, a
    /// directory): no agent can take them, so no probe may answer "free"
    /// for them without looking. Empty, with nothing allocated, in the
    /// usual tree.
    pub(crate) fn unfit_claims(&self) -> HashSet<PathBuf> {
        self.problems
            .iter()
            .filter(|problem| matches!(problem.kind, ScanProblemKind::NotRegular(_)))
            .filter_map(|problem| {
                let name = problem.path.file_name()?.to_str()?;
                let stem = name.strip_suffix(ANNOUNCE_SUFFIX)?;
                Some(problem.path.with_file_name(format!("{stem}{GATE_SUFFIX}")))
            })
            .collect()
    }
}

/// Scans the whole locks root of `state_dir`. Fails only if the root itself
/// cannot be read (e.g. it does not exist).
pub fn scan(state_dir: &Path, on_dir: Option<&OnDir>) -> std::io::Result<ScanReport> {
    let root = locks_root(state_dir);
    std::fs::read_dir(&root)?;
    Ok(scan_subtree(state_dir, &root, on_dir))
}

/// Scans `dir` and everything below it (a subtree of the locks root).
/// A missing `dir` yields an empty report.
pub(crate) fn scan_subtree(state_dir: &Path, dir: &Path, on_dir: Option<&OnDir>) -> ScanReport {
    if !walkable(&locks_root(state_dir), dir) {
        // Its parent's scan reports it as a problem; nothing below it is
        // a claim.
        return ScanReport::default();
    }
    let mut keys = Vec::new();
    let whole_dirs = usize::MAX;
    let mut report = walk(
        state_dir,
        dir.to_path_buf(),
        whole_dirs,
        on_dir,
        &mut |found| keys.extend(found),
    );
    report.keys = keys;
    report
}

/// [`scan_subtree`] of `dir` when it is a small leaf — at most
/// `max_entries` entries, none of them a directory (or of a type the
/// filesystem does not give) — so cheap that the caller may run it in
/// place; `None` otherwise (or when it cannot be opened below the root),
/// having read at most `max_entries + 1` entries of it (its watch added
/// first, as a walk adds it). The directory is read once either way. A
/// directory just created is most often empty.
pub(crate) fn scan_small_leaf(
    state_dir: &Path,
    dir: &Path,
    max_entries: usize,
    on_dir: Option<&OnDir>,
) -> Option<ScanReport> {
    let root = locks_root(state_dir);
    if !walkable(&root, dir) {
        return None;
    }
    let flags = OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC;
    let root_fd = open(&root, flags, Mode::empty()).ok()?;
    if let Some(on_dir) = on_dir {
        on_dir(dir);
    }
    let mut entries = open_below_root(&root, root_fd.as_fd(), dir)
        .and_then(Dir::from_fd)
        .ok()?;
    let mut listed = Vec::new();
    for entry in entries.iter() {
        let entry = entry.ok()?;
        if matches!(entry.file_name().to_bytes(), b"." | b"..") {
            continue;
        }
        if listed.len() == max_entries || entry.file_type() != Some(Type::File) {
            return None;
        }
        listed.push(OwnedEntry {
            name: entry.file_name().to_owned(),
            kind: entry.file_type(),
            inode: entry.ino(),
        });
    }
    let mut report = ScanReport::default();
    let mut below = Vec::new();
    let orphans = read_entries(
        state_dir,
        dir,
        listed.iter().map(Ok),
        (&mut report, true),
        &mut below,
        &mut |_| {},
    );
    if !orphans.is_empty() {
        let names = listed
            .iter()
            .filter_map(|entry| entry.name.to_str().ok().map(str::to_string));
        report.problems.extend(orphans.name(dir, names));
    }
    Some(report)
}

/// A directory entry read and kept ([`scan_small_leaf`]).
struct OwnedEntry {
    name: std::ffi::CString,
    kind: Option<Type>,
    inode: u64,
}

impl ListedEntry for &OwnedEntry {
    fn name(&self) -> &std::ffi::CStr {
        &self.name
    }
    fn kind(&self) -> Option<Type> {
        self.kind
    }
    fn inode(&self) -> u64 {
        self.inode
    }
}

/// [`scan`], handing the keys to `feed` as they are read, `chunk` at a
/// time (fewer at the end of a directory; never two directories' keys in
/// one call), so that probes can start while the walk goes on; the
/// report comes back with no keys.
pub(crate) fn scan_feeding(
    state_dir: &Path,
    chunk: usize,
    on_dir: Option<&OnDir>,
    feed: &mut dyn FnMut(Vec<LockKey>),
) -> std::io::Result<ScanReport> {
    let root = locks_root(state_dir);
    std::fs::read_dir(&root)?;
    Ok(walk(state_dir, root, chunk, on_dir, feed))
}

/// Walks `top` and everything below it, handing the keys to `feed` as in
/// [`scan_feeding`]; the report comes back with no keys.
fn walk(
    state_dir: &Path,
    top: PathBuf,
    chunk: usize,
    on_dir: Option<&OnDir>,
    feed: &mut dyn FnMut(Vec<LockKey>),
) -> ScanReport {
    let mut report = ScanReport::default();
    let root = locks_root(state_dir);
    // A path handle: only the directories read are opened for reading.
    let flags = OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC;
    let root_fd = match open(&root, flags, Mode::empty()) {
        Ok(fd) => fd,
        Err(Errno::ENOENT) => return report,
        Err(errno) => {
            report.problems.push(ScanProblem {
                path: root,
                kind: ScanProblemKind::Unreadable(std::io::Error::from(errno).to_string()),
            });
            return report;
        }
    };
    let mut stack = vec![top];
    while let Some(dir) = stack.pop() {
        if let Some(on_dir) = on_dir {
            on_dir(&dir);
        }
        let opened = open_below_root(&root, root_fd.as_fd(), &dir);
        let mut full = |keys: &mut Vec<LockKey>| {
            if keys.len() >= chunk {
                feed(std::mem::take(keys));
            }
        };
        // Whole directories at a time: the keys stay in the report, and
        // their gates' inodes beside them.
        let record_inodes = chunk == usize::MAX;
        scan_one_dir(
            state_dir,
            &dir,
            opened,
            (&mut report, record_inodes),
            &mut stack,
            &mut full,
        );
        if !report.keys.is_empty() {
            feed(std::mem::take(&mut report.keys));
        }
    }
    report
}

/// True when `dir` is the locks root `root` or a directory below it that
/// the walk enters: every component below the root is UTF-8 and none is
/// named like a lock file ([`classify`]).
fn walkable(root: &Path, dir: &Path) -> bool {
    dir.strip_prefix(root).is_ok_and(|relative| {
        relative.components().all(|component| {
            component
                .as_os_str()
                .to_str()
                .is_some_and(|name| !name.ends_with(GATE_SUFFIX))
        })
    })
}

/// How [`open_below_root`] opens the directory it reads: never through a
/// symlink.
const READ_DIR: OFlag = OFlag::O_RDONLY
    .union(OFlag::O_DIRECTORY)
    .union(OFlag::O_NOFOLLOW)
    .union(OFlag::O_CLOEXEC);

/// Opens `dir` — the locks root `root` (open as `root_fd`, a path
/// handle or not) or a directory below it — to read it, crossing no
/// symlink below the root: one `openat2` from the root's descriptor with
/// `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS` where the kernel has it, else
/// each component below the root reached from its parent's descriptor
/// with `O_NOFOLLOW | O_DIRECTORY` ([`walk_below_root`]); either way a
/// symlink anywhere on the way, swapped in at any moment, is refused
/// (`ELOOP` or `ENOTDIR`), never followed. The walk's components on the way
/// are path handles (`O_PATH`: nothing is read, and no watcher of the
/// tree hears an open — a walk used to wake every monitor once per
/// directory on the way); only `dir` itself is opened for reading. A
/// `dir` not below the root is refused (`EXDEV`).
pub(crate) fn open_below_root(
    root: &Path,
    root_fd: BorrowedFd<'_>,
    dir: &Path,
) -> nix::Result<OwnedFd> {
    let relative = dir.strip_prefix(root).map_err(|_| Errno::EXDEV)?;
    let mut names = Vec::new();
    for component in relative.components() {
        let std::path::Component::Normal(name) = component else {
            return Err(Errno::EXDEV);
        };
        names.push(name);
    }
    let Some((last, way)) = names.split_last() else {
        return openat(root_fd, ".", READ_DIR, Mode::empty());
    };
    // One call where the kernel has `openat2`: the same refusals (a
    // symlink anywhere on the way or at the end, `ELOOP`; a file,
    // `ENOTDIR`) from one lookup instead of one open per component.
    // Without it (before Linux 5.6, or a filter refusing it), or when a
    // rename raced the lookup (`EAGAIN`), the walk below.
    let how = nix::fcntl::OpenHow::new().flags(READ_DIR).resolve(
        nix::fcntl::ResolveFlag::RESOLVE_BENEATH
            | nix::fcntl::ResolveFlag::RESOLVE_NO_SYMLINKS
            | nix::fcntl::ResolveFlag::RESOLVE_NO_MAGICLINKS,
    );
    match nix::fcntl::openat2(root_fd, relative, how) {
        Err(Errno::ENOSYS | Errno::EPERM | Errno::EAGAIN | Errno::EINVAL) => {
            walk_below_root(root_fd, way, last)
        }
        opened => opened,
    }
}

/// [`open_below_root`] one component at a time: each reached from its
/// parent's descriptor with `O_NOFOLLOW | O_DIRECTORY` (`way` as path
/// handles, `last` opened to read).
fn walk_below_root(
    root_fd: BorrowedFd<'_>,
    way: &[&std::ffi::OsStr],
    last: &std::ffi::OsStr,
) -> nix::Result<OwnedFd> {
    let on_the_way = OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    let mut at: Option<OwnedFd> = None;
    for name in way {
        let base = at.as_ref().map_or(root_fd, AsFd::as_fd);
        at = Some(openat(base, *name, on_the_way, Mode::empty())?);
    }
    let base = at.as_ref().map_or(root_fd, AsFd::as_fd);
    openat(base, last, READ_DIR, Mode::empty())
}

/// Reads one directory (`opened`: [`open_below_root`]'s answer for it)
/// into `report` (its subdirectories onto `stack`), calling `pushed`
/// after each key is added to `report.keys`.
fn scan_one_dir(
    state_dir: &Path,
    dir: &Path,
    opened: nix::Result<OwnedFd>,
    (report, record_inodes): (&mut ScanReport, bool),
    stack: &mut Vec<PathBuf>,
    pushed: &mut dyn FnMut(&mut Vec<LockKey>),
) {
    // nix's `Dir` lends each entry's name and type from the kernel's
    // buffer: `std::fs::read_dir` copies every name twice (the entry, then
    // `file_name()`), 40,000 allocations for 10,000 claims.
    let mut entries = match opened.and_then(Dir::from_fd) {
        Ok(entries) => entries,
        Err(Errno::ENOENT) => return,
        Err(Errno::ELOOP | Errno::ENOTDIR) => {
            // Swapped for a symlink (or a file) since it was listed.
            report.problems.push(ScanProblem {
                path: dir.to_path_buf(),
                kind: ScanProblemKind::Symlink,
            });
            return;
        }
        Err(errno) => {
            report.problems.push(ScanProblem {
                path: dir.to_path_buf(),
                kind: ScanProblemKind::Unreadable(std::io::Error::from(errno).to_string()),
            });
            return;
        }
    };
    let orphans = read_entries(
        state_dir,
        dir,
        entries.iter(),
        (report, record_inodes),
        stack,
        pushed,
    );
    if !orphans.is_empty() {
        // Rare (a foreign or half-removed claim): read again to name them.
        let names = entries
            .iter()
            .filter_map(Result::ok)
            .filter_map(|entry| entry.file_name().to_str().ok().map(str::to_string));
        report.problems.extend(orphans.name(dir, names));
    }
}

/// One directory entry as the scan reads it: its name, its type when the
/// filesystem gives one, its inode.
trait ListedEntry {
    fn name(&self) -> &std::ffi::CStr;
    fn kind(&self) -> Option<Type>;
    fn inode(&self) -> u64;
}

impl ListedEntry for nix::dir::Entry {
    fn name(&self) -> &std::ffi::CStr {
        self.file_name()
    }
    fn kind(&self) -> Option<Type> {
        self.file_type()
    }
    fn inode(&self) -> u64 {
        self.ino()
    }
}

/// [`scan_one_dir`]'s reading of `dir`'s `entries`: a failed read ends
/// it, as a problem (the next read would fail the same way, forever).
fn read_entries<E: ListedEntry>(
    state_dir: &Path,
    dir: &Path,
    entries: impl Iterator<Item = nix::Result<E>>,
    (report, record_inodes): (&mut ScanReport, bool),
    stack: &mut Vec<PathBuf>,
    pushed: &mut dyn FnMut(&mut Vec<LockKey>),
) -> Orphans {
    let namer = DirNamer::new(state_dir, dir);
    // Gates and announces are paired by a hash of their stems: 8 bytes
    // each, not a copy of every name (800,000 names in one directory).
    let mut pairing = Orphans::default();
    let mut gates: HashSet<u64, foldhash::fast::RandomState> = HashSet::default();
    let mut announces: Vec<u64> = Vec::new();
    for entry in entries {
        let entry = match entry {
            Ok(entry) => entry,
            Err(errno) => {
                // getdents failed (EACCES, EIO: a FUSE or NFS error, a
                // bind-mounted procfs dir): it would fail again, forever.
                report.problems.push(ScanProblem {
                    path: dir.to_path_buf(),
                    kind: ScanProblemKind::Unreadable(std::io::Error::from(errno).to_string()),
                });
                break;
            }
        };
        let name = OsStr::from_bytes(entry.name().to_bytes());
        if name == "." || name == ".." {
            continue;
        }
        let (problem, what) = match (entry.kind(), name.to_str()) {
            // The common cases, from the entry's type alone.
            (Some(Type::File), Some(name)) => classify_regular(name),
            (Some(Type::Directory), Some(name)) if !name.ends_with(GATE_SUFFIX) => {
                (None, Entry::Walk)
            }
            // Anything else (and a filesystem that gives no type): as the
            // entry's `lstat` says.
            _ => match std::fs::symlink_metadata(dir.join(name)) {
                Ok(meta) => classify(name, meta.file_type()),
                Err(_) => continue,
            },
        };
        if matches!(what, Entry::Gate { .. } | Entry::Announce { .. }) {
            report.claim_inodes.push(entry.inode());
        }
        if let Some(kind) = problem {
            report.problems.push(ScanProblem {
                path: dir.join(name),
                kind,
            });
        }
        match what {
            Entry::Walk => stack.push(dir.join(name)),
            Entry::Gate { stem, key } => {
                gates.insert(pairing.hash(stem));
                if record_inodes {
                    report.gate_inodes.push(entry.inode());
                }
                report.keys.push(namer.key(&key));
                pushed(&mut report.keys);
            }
            Entry::Announce { stem } => announces.push(pairing.hash(stem)),
            Entry::Skip => {}
        }
    }
    pairing
        .stems
        .extend(announces.into_iter().filter(|stem| !gates.contains(stem)));
    pairing
}

/// The announces of one directory whose gate it does not have, by a
/// hash of their stems (seeded per directory), to be named by a second
/// reading of the directory. A collision with a gate's stem (odds near
/// 10⁻¹³ per pair) would hide one orphan: the whole cost of hashing.
#[derive(Default)]
struct Orphans {
    seed: foldhash::quality::RandomState,
    stems: HashSet<u64, foldhash::fast::RandomState>,
}

impl Orphans {
    fn hash(&self, stem: &str) -> u64 {
        use std::hash::BuildHasher;
        self.seed.hash_one(stem)
    }

    fn is_empty(&self) -> bool {
        self.stems.is_empty()
    }

    /// The problems of the orphan announces among `names` (the entries of
    /// `dir`, read again).
    fn name(&self, dir: &Path, names: impl Iterator<Item = String>) -> Vec<ScanProblem> {
        names
            .filter_map(|name| {
                let stem = name.strip_suffix(ANNOUNCE_SUFFIX)?;
                if !self.stems.contains(&self.hash(stem)) {
                    return None;
                }
                let kind = if unescape(stem).is_some() {
                    ScanProblemKind::OrphanAnnounce
                } else {
                    ScanProblemKind::MalformedEscape
                };
                Some(ScanProblem {
                    path: dir.join(&name),
                    kind,
                })
            })
            .collect()
    }
}

/// What the scan does with one directory entry.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Entry<'a> {
    /// A directory: walk it.
    Walk,
    /// A claim's gate.
    Gate {
        /// The escaped key.
        stem: &'a str,
        /// The key.
        key: String,
    },
    /// An announce; whether its gate exists is decided with the others.
    Announce {
        /// The escaped key.
        stem: &'a str,
    },
    /// Nothing to walk or name.
    Skip,
}

/// One entry, from its name and type alone (no `stat`, nothing opened):
/// the problem it is, if any, and what to do with it. A directory with a
/// problem (a non-UTF-8 name, a `.lock` name) is a problem and is not
/// walked: no agent lock can be below it (an AIH is UTF-8 and no parent
/// segment of one ends in `.lock`), so whatever is there is no claim —
/// and a path named like a lock file is never opened.
fn classify(name: &OsStr, file_type: FileType) -> (Option<ScanProblemKind>, Entry<'_>) {
    if file_type.is_symlink() {
        return (Some(ScanProblemKind::Symlink), Entry::Skip);
    }
    let Some(name) = name.to_str() else {
        return (Some(ScanProblemKind::NonUtf8Name), Entry::Skip);
    };
    if name.ends_with(GATE_SUFFIX) && !file_type.is_file() {
        // A FIFO would block the SDK's open; a directory cannot be a
        // claim (AIH segments never end in `.lock`).
        let what = crate::locks::files::describe(file_type).to_string();
        return (Some(ScanProblemKind::NotRegular(what)), Entry::Skip);
    }
    if file_type.is_dir() {
        return (None, Entry::Walk);
    }
    classify_regular(name)
}

/// [`classify`] for a regular file (or, as before, anything that is not
/// a directory, a symlink or a non-regular file named like a gate).
fn classify_regular(name: &str) -> (Option<ScanProblemKind>, Entry<'_>) {
    if let Some(stem) = name.strip_suffix(ANNOUNCE_SUFFIX) {
        return (None, Entry::Announce { stem });
    }
    match name.strip_suffix(GATE_SUFFIX) {
        Some(stem) => match unescape(stem) {
            Some(key) => (None, Entry::Gate { stem, key }),
            None => (Some(ScanProblemKind::MalformedEscape), Entry::Skip),
        },
        None => (Some(ScanProblemKind::ForeignFile), Entry::Skip),
    }
}

/// The problem the path is right now, as a scan of its directory would
/// report it (`None`: it is a claim's file, a directory, or gone). One
/// `lstat` (two for an announce, whose gate must exist); opens nothing.
/// For the engine, which reports problems when their events arrive.
pub(crate) fn problem_at(path: &Path) -> Option<ScanProblemKind> {
    let meta = std::fs::symlink_metadata(path).ok()?;
    let (problem, entry) = classify(path.file_name()?, meta.file_type());
    match entry {
        Entry::Announce { stem } => {
            let gate = path.with_file_name(format!("{stem}{GATE_SUFFIX}"));
            let gate_is_file = std::fs::symlink_metadata(gate).is_ok_and(|m| m.is_file());
            match (gate_is_file, unescape(stem)) {
                (true, Some(_)) => None,
                (false, Some(_)) => Some(ScanProblemKind::OrphanAnnounce),
                (_, None) => Some(ScanProblemKind::MalformedEscape),
            }
        }
        _ => problem,
    }
}

/// [`scan`] off the async threads (a scan of 100k keys takes a while).
pub async fn scan_root(state_dir: &Path) -> std::io::Result<ScanReport> {
    scan_root_watching(state_dir, None).await
}

/// [`scan_root`], calling `on_dir` before each directory is read.
pub(crate) async fn scan_root_watching(
    state_dir: &Path,
    on_dir: Option<OnDir>,
) -> std::io::Result<ScanReport> {
    let state_dir = state_dir.to_path_buf();
    tokio::task::spawn_blocking(move || scan(&state_dir, on_dir.as_ref()))
        .await
        .map_err(std::io::Error::other)?
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::disk::key::KeyKind;
    use std::fs;

    fn touch(path: &Path) {
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, b"").unwrap();
    }

    /// A scan opens for reading only the directories it reads: the ones
    /// on the way from the root are path handles, so their watchers (every
    /// monitor of the tree) hear nothing.
    #[test]
    fn a_scan_opens_only_what_it_reads() {
        let state = tempfile::tempdir().unwrap();
        let root = locks_root(state.path());
        let agents = root.join("agents");
        let leaf = agents.join("instances/parent");
        fs::create_dir_all(&leaf).unwrap();
        let mut inotify = inotify::Inotify::init().unwrap();
        let mask = inotify::WatchMask::OPEN | inotify::WatchMask::CLOSE_NOWRITE;
        for dir in [&root, &agents] {
            inotify.watches().add(dir, mask).unwrap();
        }
        let report = scan_subtree(state.path(), &leaf, None);
        assert!(report.problems.is_empty(), "{:?}", report.problems);
        let mut buffer = [0; 4096];
        let heard: Vec<String> = match inotify.read_events(&mut buffer) {
            Ok(events) => events.map(|event| format!("{event:?}")).collect(),
            Err(error) if error.kind() == std::io::ErrorKind::WouldBlock => Vec::new(),
            Err(error) => panic!("{error}"),
        };
        assert!(heard.is_empty(), "the way was opened: {heard:?}");
    }

    /// A small leaf (empty, or a few files) is scanned as
    /// `scan_subtree` scans it; one with a subdirectory, more entries than
    /// allowed, or swapped for a symlink is left to the full scan.
    #[test]
    fn only_a_small_leaf_is_scanned_in_place() {
        let state = tempfile::tempdir().unwrap();
        let root = locks_root(state.path());
        let instances = root.join("agents/instances");
        let leaf = instances.join("parent");
        fs::create_dir_all(&leaf).unwrap();
        let empty = scan_small_leaf(state.path(), &leaf, 4, None).expect("empty: a small leaf");
        assert!(empty.keys.is_empty() && empty.problems.is_empty());
        touch(&leaf.join("a.lock"));
        touch(&leaf.join("a.live.lock"));
        // Read once: one open of the leaf heard from its parent's watch.
        let mut inotify = inotify::Inotify::init().unwrap();
        inotify
            .watches()
            .add(&instances, inotify::WatchMask::OPEN)
            .unwrap();
        let small = scan_small_leaf(state.path(), &leaf, 4, None).expect("two files");
        let mut buffer = [0; 4096];
        let opens = inotify.read_events(&mut buffer).map_or(0, Iterator::count);
        assert_eq!(opens, 1, "the leaf is read once");
        let whole = scan_subtree(state.path(), &leaf, None);
        assert_eq!(names(&small), names(&whole));
        assert_eq!(small.gate_inodes, whole.gate_inodes);
        assert_eq!(small.claim_inodes.len(), 2);
        assert_eq!(small.keys.len(), 1);
        touch(&leaf.join("b.lock"));
        touch(&leaf.join("b.live.lock"));
        touch(&leaf.join("c.lock"));
        assert!(
            scan_small_leaf(state.path(), &leaf, 4, None).is_none(),
            "5 > 4"
        );
        let nested = instances.join("nested");
        fs::create_dir_all(nested.join("child")).unwrap();
        assert!(
            scan_small_leaf(state.path(), &nested, 4, None).is_none(),
            "a subdirectory"
        );
        let elsewhere = tempfile::tempdir().unwrap();
        let link = instances.join("link");
        std::os::unix::fs::symlink(elsewhere.path(), &link).unwrap();
        assert!(
            scan_small_leaf(state.path(), &link, 4, None).is_none(),
            "a symlink"
        );
    }

    fn names(report: &ScanReport) -> Vec<(KeyKind, String)> {
        let mut names: Vec<_> = report
            .keys
            .iter()
            .map(|k| (k.kind(), k.name().to_string()))
            .collect();
        names.sort();
        names
    }

    #[test]
    fn instances_tags_and_other_are_named() {
        let state = tempfile::tempdir().unwrap();
        let locks = state.path().join("locks");
        touch(&locks.join("agents/instances/cli/daemon/abc-1.lock"));
        touch(&locks.join("agents/instances/cli/daemon/abc-1.live.lock"));
        touch(&locks.join("agents/instances/cli/daemon.lock"));
        touch(&locks.join("agents/instances/solo.lock"));
        touch(&locks.join("agents/tags/my%20tag%2Ev1.lock"));
        touch(&locks.join("plugins-daemon/main.lock"));
        let report = scan(state.path(), None).unwrap();
        assert_eq!(
            names(&report),
            vec![
                (KeyKind::Instance, "cli/daemon".into()),
                (KeyKind::Instance, "cli/daemon/abc-1".into()),
                (KeyKind::Instance, "solo".into()),
                (KeyKind::Tag, "my tag.v1".into()),
                (KeyKind::Other, "plugins-daemon/main".into()),
            ]
        );
        assert!(report.problems.is_empty(), "{:?}", report.problems);
    }

    #[test]
    fn foreign_names_are_reported_not_dropped() {
        let state = tempfile::tempdir().unwrap();
        let tags = state.path().join("locks/agents/tags");
        touch(&tags.join("README.txt"));
        touch(&tags.join("bad%ZZ.lock"));
        touch(&tags.join("a.b.lock"));
        touch(&tags.join("lonely.live.lock"));
        std::os::unix::fs::symlink("/etc", tags.join("link")).unwrap();
        use std::os::unix::ffi::OsStrExt;
        touch(&tags.join(std::ffi::OsStr::from_bytes(b"\xff.lock")));
        let report = scan(state.path(), None).unwrap();
        assert!(report.keys.is_empty());
        let mut kinds: Vec<_> = report.problems.iter().map(|p| p.kind.clone()).collect();
        kinds.sort();
        assert_eq!(
            kinds,
            vec![
                ScanProblemKind::ForeignFile,
                ScanProblemKind::MalformedEscape,
                ScanProblemKind::MalformedEscape,
                ScanProblemKind::NonUtf8Name,
                ScanProblemKind::Symlink,
                ScanProblemKind::OrphanAnnounce,
            ]
        );
    }

    #[test]
    fn non_regular_files_named_like_lock_files_are_problems_not_claims() {
        let state = tempfile::tempdir().unwrap();
        let tags = state.path().join("locks/agents/tags");
        fs::create_dir_all(tags.join("blocked.lock")).unwrap();
        nix::unistd::mkfifo(&tags.join("fifo.lock"), nix::sys::stat::Mode::S_IRWXU).unwrap();
        nix::unistd::mkfifo(&tags.join("ok.live.lock"), nix::sys::stat::Mode::S_IRWXU).unwrap();
        touch(&tags.join("ok.lock"));
        let _socket = std::os::unix::net::UnixListener::bind(tags.join("sock.lock")).unwrap();
        let report = scan(state.path(), None).unwrap();
        let names: Vec<_> = report.keys.iter().map(|k| k.name()).collect();
        assert_eq!(names, ["ok"]);
        let mut problems: Vec<_> = report
            .problems
            .iter()
            .map(|p| (p.path.file_name().unwrap().to_owned(), p.kind.clone()))
            .collect();
        problems.sort();
        let not_regular = |what: &str| ScanProblemKind::NotRegular(what.into());
        assert_eq!(
            problems,
            vec![
                ("blocked.lock".into(), not_regular("a directory")),
                ("fifo.lock".into(), not_regular("a FIFO")),
                ("ok.live.lock".into(), not_regular("a FIFO")),
                ("sock.lock".into(), not_regular("a socket")),
            ]
        );
    }

    /// Fed a few at a time, the walk finds what [`scan`] finds: every
    /// key once, no chunk larger than asked or spanning two directories,
    /// the same problems and claim inodes.
    #[test]
    fn a_fed_scan_hands_over_every_key_in_small_chunks_of_one_directory() {
        let state = tempfile::tempdir().unwrap();
        let locks = state.path().join("locks");
        for i in 0..7 {
            touch(&locks.join(format!("agents/tags/t{i}.lock")));
            touch(&locks.join(format!("agents/instances/a/i{i}.lock")));
        }
        touch(&locks.join("agents/instances/solo.lock"));
        touch(&locks.join("agents/tags/stray.txt"));
        let whole = scan(state.path(), None).unwrap();
        let mut chunks = Vec::new();
        let fed = scan_feeding(state.path(), 3, None, &mut |chunk| chunks.push(chunk)).unwrap();
        assert!(fed.keys.is_empty());
        for chunk in &chunks {
            assert!((1..=3).contains(&chunk.len()), "{chunk:?}");
            assert!(
                chunk.iter().all(|key| key.dir() == chunk[0].dir()),
                "{chunk:?}"
            );
        }
        let mut fed_keys: Vec<LockKey> = chunks.into_iter().flatten().collect();
        let mut keys = whole.keys.clone();
        fed_keys.sort();
        keys.sort();
        assert_eq!(fed_keys, keys);
        assert_eq!(fed.problems, whole.problems);
        let sorted = |mut inodes: Vec<u64>| {
            inodes.sort_unstable();
            inodes
        };
        assert_eq!(sorted(fed.claim_inodes), sorted(whole.claim_inodes));
    }

    #[test]
    fn a_missing_root_is_an_error_but_a_missing_subtree_is_empty() {
        let state = tempfile::tempdir().unwrap();
        assert!(scan(state.path(), None).is_err());
        assert!(
            scan_subtree(state.path(), &state.path().join("nope"), None)
                .keys
                .is_empty()
        );
    }

    /// A directory swapped for a symlink after its create event (`mkdir
    /// B; rmdir B; ln -s /elsewhere B`): the scan of B, and of anything
    /// below a symlinked component, lists none of the keys it points to
    /// — another state dir's, or `/` — and reports the symlink.
    #[test]
    fn a_directory_swapped_for_a_symlink_is_never_followed() {
        let state = tempfile::tempdir().unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        touch(&elsewhere.path().join("deep/stolen.lock"));
        touch(&elsewhere.path().join("deep/stolen.live.lock"));
        touch(&elsewhere.path().join("taken.lock"));
        let instances = state.path().join("locks/agents/instances");
        fs::create_dir_all(&instances).unwrap();
        let swapped = instances.join("b");
        fs::create_dir(&swapped).unwrap();
        fs::remove_dir(&swapped).unwrap();
        std::os::unix::fs::symlink(elsewhere.path(), &swapped).unwrap();

        let report = scan_subtree(state.path(), &swapped, None);
        assert!(report.keys.is_empty(), "followed: {:?}", report.keys);
        assert_eq!(report.problems.len(), 1, "{:?}", report.problems);
        assert_eq!(report.problems[0].kind, ScanProblemKind::Symlink);
        let below = scan_subtree(state.path(), &swapped.join("deep"), None);
        assert!(below.keys.is_empty(), "followed: {:?}", below.keys);
        let whole = scan(state.path(), None).unwrap();
        assert!(whole.keys.is_empty(), "followed: {:?}", whole.keys);
    }

    /// The one-call open (`openat2`) and the walk it falls back to agree:
    /// each opens a directory below the root, and each refuses a symlink
    /// on the way or at the end (`ELOOP` or `ENOTDIR`), never following
    /// it.
    #[test]
    fn the_one_call_open_and_the_walk_refuse_the_same_symlinks() {
        use std::os::fd::AsFd;
        let state = tempfile::tempdir().unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        fs::create_dir_all(elsewhere.path().join("deep")).unwrap();
        let root = state.path().join("locks");
        fs::create_dir_all(root.join("a/b")).unwrap();
        std::os::unix::fs::symlink(elsewhere.path(), root.join("a/link")).unwrap();
        let root_fd = nix::fcntl::open(
            &root,
            OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
            Mode::empty(),
        )
        .unwrap();
        let inode = |fd: &OwnedFd| nix::sys::stat::fstat(fd).unwrap().st_ino;
        let walked = |dir: &str| {
            let names: Vec<&std::ffi::OsStr> = Path::new(dir).iter().collect();
            let (last, way) = names.split_last().unwrap();
            walk_below_root(root_fd.as_fd(), way, last)
        };
        let one_call = |dir: &str| open_below_root(&root, root_fd.as_fd(), &root.join(dir));

        let b = fs::metadata(root.join("a/b")).unwrap();
        assert_eq!(
            inode(&one_call("a/b").unwrap()),
            std::os::unix::fs::MetadataExt::ino(&b)
        );
        assert_eq!(
            inode(&walked("a/b").unwrap()),
            std::os::unix::fs::MetadataExt::ino(&b)
        );
        for dir in ["a/link", "a/link/deep"] {
            let refused =
                |answer: nix::Result<OwnedFd>| matches!(answer, Err(Errno::ELOOP | Errno::ENOTDIR));
            assert!(refused(one_call(dir)), "one call followed {dir}");
            assert!(refused(walked(dir)), "the walk followed {dir}");
        }
    }

    /// A directory whose read fails ends its scan as a problem: the
    /// failing read is not retried forever (it was: 100 % CPU, on a
    /// `getdents` that fails with EACCES or EIO — a bind-mounted procfs
    /// directory, a FUSE or NFS error — whose every retry fails again).
    /// glibc reads a failing `getdents` with ENOENT as the end, so the
    /// failure is a directory whose every read fails with EIO.
    #[test]
    fn a_directory_whose_read_fails_is_a_problem_not_a_loop() {
        struct Never;
        impl ListedEntry for Never {
            fn name(&self) -> &std::ffi::CStr {
                c"never"
            }
            fn kind(&self) -> Option<Type> {
                None
            }
            fn inode(&self) -> u64 {
                0
            }
        }
        let state = tempfile::tempdir().unwrap();
        let dir = state.path().join("locks/agents/instances/failing");
        let (tx, rx) = std::sync::mpsc::channel();
        let state_dir = state.path().to_path_buf();
        std::thread::spawn(move || {
            let (mut report, mut stack) = (ScanReport::default(), Vec::new());
            let failing = std::iter::repeat_with(|| Err::<Never, _>(Errno::EIO));
            read_entries(
                &state_dir,
                &dir,
                failing,
                (&mut report, false),
                &mut stack,
                &mut |_| {},
            );
            let _ = tx.send(report);
        });
        let report = rx
            .recv_timeout(std::time::Duration::from_secs(10))
            .expect("the scan of an unreadable directory never ended");
        assert!(report.keys.is_empty());
        assert!(
            matches!(&report.problems[..], [problem] if matches!(&problem.kind, ScanProblemKind::Unreadable(why) if why.contains("Input/output"))),
            "{:?}",
            report.problems
        );
    }
}
