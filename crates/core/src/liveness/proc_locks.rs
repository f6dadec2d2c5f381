//! Holder PIDs from `/proc/locks`, parsed once per batch into an index
//! keyed by (device, inode).
//!
//! Why our own parser: the `procfs` crate drops the `->` marker, so it
//! cannot tell holders from blocked waiters. Why an index: reading
//! `/proc/locks` takes the kernel's file-lock semaphore for writing, once
//! per page of it (each `read()` returns at most a page), and stalls every
//! flock on the machine meanwhile — read it once per batch, never per key.
//! Invariant: exclusive (`WRITE`) `FLOCK` rows are holders; shared (`READ`)
//! rows are kept apart — mostly momentary probes (ours or another
//! monitor's), but a lasting one (util-linux `flock -s`) blocks every
//! agent's acquire and must be shown.

use std::collections::{HashMap, HashSet};
use std::path::Path;

/// A file identity as `/proc/locks` prints it: `major:minor:inode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FileId {
    /// Device major number.
    pub major: u32,
    /// Device minor number.
    pub minor: u32,
    /// Inode number.
    pub inode: u64,
}

impl FileId {
    /// The identity of the file at `path` (follows no symlink: lockfiles
    /// are regular files).
    pub fn of(path: &Path) -> std::io::Result<Self> {
        let meta = std::fs::symlink_metadata(path)?;
        Ok(Self::from_metadata(&meta))
    }

    /// The identity from a `stat` made through `nix`.
    pub(crate) fn from_stat(stat: &nix::sys::stat::FileStat) -> Self {
        Self {
            major: libc::major(stat.st_dev),
            minor: libc::minor(stat.st_dev),
            inode: stat.st_ino,
        }
    }

    /// The identity from already-read metadata.
    pub fn from_metadata(meta: &std::fs::Metadata) -> Self {
        use std::os::unix::fs::MetadataExt;
        let dev = meta.dev();
        Self {
            major: libc::major(dev),
            minor: libc::minor(dev),
            inode: meta.ino(),
        }
    }
}

/// Who holds and who waits on each locked file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FileLocks {
    /// PIDs holding an exclusive flock.
    pub holders: Vec<u32>,
    /// PIDs blocked waiting for one (`->` rows).
    pub waiters: Vec<u32>,
    /// PIDs holding a shared flock (not an SDK holder: the SDK takes its
    /// claims exclusively and probes with momentary shared locks).
    pub shared: Vec<u32>,
    /// PIDs blocked waiting for a SHARED flock (`->` `READ` rows): on an
    /// announce, the SDK's `wait_released` (a watcher waiting for the
    /// holder to end).
    pub shared_waiters: Vec<u32>,
}

impl FileLocks {
    /// Adds the PIDs of `other` not already listed (a second read of the
    /// same files).
    pub(crate) fn absorb(&mut self, other: FileLocks) {
        push_unique(&mut self.holders, &other.holders);
        push_unique(&mut self.waiters, &other.waiters);
        push_unique(&mut self.shared, &other.shared);
        push_unique(&mut self.shared_waiters, &other.shared_waiters);
    }
}

/// One parse of `/proc/locks`: (device, inode) → holders and waiters.
///
/// Not a consistent snapshot once it is longer than a page: the kernel
/// hands `/proc/locks` out at most one page (4 KiB, ~60 locks) per
/// `read()`, each under its own lock, and finds where to resume by
/// position — a lock released between two reads shifts the lines after
/// it, and the one at the page boundary is never read. (Measured: 150
/// locks are read in three `read()`s of 4,095 + 4,043 + 328 bytes, even
/// into a 1 MiB buffer.) Callers that find a held claim with no holder
/// read it again ([`crate::liveness::annotate::annotate_with`]).
#[derive(Debug, Clone, Default)]
pub struct LockIndex {
    files: HashMap<FileId, FileLocks>,
    /// The text came in more than one `read()`: a line may be missing.
    torn: bool,
}

impl LockIndex {
    /// Reads and parses `/proc/locks` once (in as many `read()`s as the
    /// kernel needs; [`Self::is_torn`] says whether it needed several).
    pub fn read() -> std::io::Result<Self> {
        use std::io::Read;
        let mut file = std::fs::File::open("/proc/locks")?;
        let (mut bytes, mut chunk) = (Vec::new(), vec![0u8; 64 * 1024]);
        let mut reads = 0;
        loop {
            match file.read(&mut chunk) {
                Ok(0) => break,
                Ok(got) => {
                    bytes.extend_from_slice(&chunk[..got]);
                    reads += 1;
                }
                Err(error) if error.kind() == std::io::ErrorKind::Interrupted => {}
                Err(error) => return Err(error),
            }
        }
        let mut index = Self::parse(&String::from_utf8_lossy(&bytes));
        index.torn = reads > 1;
        Ok(index)
    }

    /// [`Self::read`], and once more when the first read came in several
    /// pieces, the two merged: a line that slipped between the pages of
    /// one read is in the other unless its lock was taken or released in
    /// between (then either answer was true at some moment of the two
    /// reads). What a liveness read from `/proc/locks` alone needs
    /// ([`super::lock_free`]): a missed line would read a held claim free.
    pub fn read_merged(read: &dyn Fn() -> Self) -> Self {
        let mut index = read();
        if index.torn {
            index.merge(read());
        }
        index
    }

    /// Adds every row of `other` (a second read) not listed yet; the
    /// result is torn only if both were.
    pub fn merge(&mut self, other: LockIndex) {
        for (file, locks) in other.files {
            self.files.entry(file).or_default().absorb(locks);
        }
        self.torn &= other.torn;
    }

    /// True when the kernel handed the text out in several pieces, so a
    /// line may have slipped between them (never for a parsed text).
    pub(crate) fn is_torn(&self) -> bool {
        self.torn
    }

    /// Parses the text of `/proc/locks`; unknown or malformed rows are
    /// skipped (the format is the kernel's, not ours to police).
    pub fn parse(text: &str) -> Self {
        let mut files: HashMap<FileId, FileLocks> = HashMap::new();
        for line in text.lines() {
            if let Some(row) = parse_row(line) {
                let entry = files.entry(row.file).or_default();
                let list = match (row.waiting, row.exclusive) {
                    (true, true) => &mut entry.waiters,
                    (true, false) => &mut entry.shared_waiters,
                    (false, true) => &mut entry.holders,
                    (false, false) => &mut entry.shared,
                };
                if !list.contains(&row.pid) {
                    list.push(row.pid);
                }
            }
        }
        Self { files, torn: false }
    }

    /// An index of exactly `files` (a table kept by other means than a
    /// read: never torn).
    pub(crate) fn from_files(files: HashMap<FileId, FileLocks>) -> Self {
        Self { files, torn: false }
    }

    /// Every file with its holders and waiters.
    pub fn files(&self) -> impl Iterator<Item = (&FileId, &FileLocks)> {
        self.files.iter()
    }

    /// Holders and waiters of one file (empty when unlocked).
    pub fn get(&self, file: &FileId) -> Option<&FileLocks> {
        self.files.get(file)
    }

    /// Holders and waiters of a claim: the union over its gate and
    /// announce files (either may be missing).
    pub fn claim(&self, gate: &Path, announce: &Path) -> FileLocks {
        self.union(
            [gate, announce]
                .into_iter()
                .filter_map(|path| FileId::of(path).ok()),
        )
    }

    /// Holders and waiters over several files (a claim's gate and
    /// announce), each PID once, in first-seen order.
    pub(crate) fn union(&self, files: impl IntoIterator<Item = FileId>) -> FileLocks {
        let mut out = FileLocks::default();
        for locks in files.into_iter().filter_map(|id| self.get(&id)) {
            push_unique(&mut out.holders, &locks.holders);
            push_unique(&mut out.waiters, &locks.waiters);
            push_unique(&mut out.shared, &locks.shared);
            push_unique(&mut out.shared_waiters, &locks.shared_waiters);
        }
        out
    }

    /// True when some file has a shared holder other than `except`, on
    /// any device ([`Self::has_shared_on`] is false wherever this is).
    pub(crate) fn has_shared_except(&self, except: &HashSet<u32>) -> bool {
        self.files
            .values()
            .any(|locks| locks.shared.iter().any(|pid| !except.contains(pid)))
    }

    /// True when some file on the same device as `on` has a shared holder
    /// other than `except` (shared locks elsewhere on the machine say
    /// nothing about the locks root; this process's own probes hold
    /// theirs for a moment, and a read made while they run lists them).
    pub(crate) fn has_shared_on(&self, on: FileId, except: &HashSet<u32>) -> bool {
        self.files.iter().any(|(file, locks)| {
            (file.major, file.minor) == (on.major, on.minor)
                && locks.shared.iter().any(|pid| !except.contains(pid))
        })
    }

    /// Every file on the device of `on` that some PID holds exclusively,
    /// with those PIDs (unordered).
    pub(crate) fn held_on(&self, on: FileId) -> impl Iterator<Item = (FileId, &[u32])> + '_ {
        self.files.iter().filter_map(move |(file, locks)| {
            let same_device = (file.major, file.minor) == (on.major, on.minor);
            (same_device && !locks.holders.is_empty()).then_some((*file, &locks.holders[..]))
        })
    }

    /// How many distinct files have holders or waiters.
    pub fn len(&self) -> usize {
        self.files.len()
    }

    /// True when no file is exclusively locked or waited on.
    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }
}

fn push_unique(into: &mut Vec<u32>, from: &[u32]) {
    for pid in from {
        if !into.contains(pid) {
            into.push(*pid);
        }
    }
}

/// One exclusive `FLOCK` row of `/proc/locks` (or of a `lock:` line of
/// `/proc/<pid>/fdinfo/<fd>`, which prints the same format).
pub(super) struct Row {
    /// The locked file.
    pub file: FileId,
    /// The PID that called `flock()` (it may be gone since).
    pub pid: u32,
    /// A blocked waiter, not a holder.
    pub waiting: bool,
    /// `WRITE` (exclusive), not `READ` (shared).
    pub exclusive: bool,
}

/// `1: FLOCK  ADVISORY  WRITE 10192 fe:00:10059777 0 EOF`, or with `->`
/// after the ordinal for a blocked waiter.
pub(super) fn parse_row(line: &str) -> Option<Row> {
    let mut fields = line.split_whitespace();
    fields.next()?.strip_suffix(':')?;
    let mut kind = fields.next()?;
    let waiting = kind == "->";
    if waiting {
        kind = fields.next()?;
    }
    if kind != "FLOCK" {
        return None;
    }
    let _advisory = fields.next()?;
    let exclusive = match fields.next()? {
        "WRITE" => true,
        "READ" => false,
        _ => return None,
    };
    let pid: u32 = fields.next()?.parse().ok()?;
    let mut id = fields.next()?.split(':');
    let major = u32::from_str_radix(id.next()?, 16).ok()?;
    let minor = u32::from_str_radix(id.next()?, 16).ok()?;
    let inode: u64 = id.next()?.parse().ok()?;
    Some(Row {
        file: FileId {
            major,
            minor,
            inode,
        },
        pid,
        waiting,
        exclusive,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "\
1: FLOCK  ADVISORY  WRITE 10192 fe:00:10059777 0 EOF
1: -> FLOCK  ADVISORY  WRITE 10193 fe:00:10059777 0 EOF
1:  -> FLOCK  ADVISORY  WRITE 10194 fe:00:10059777 0 EOF
2: FLOCK  ADVISORY  READ 777 fe:00:42 0 EOF
3: POSIX  ADVISORY  WRITE 555 fe:00:43 0 EOF
4: OFDLCK ADVISORY  READ -1 00:05:1 0 EOF
5: FLOCK  ADVISORY  WRITE 9 103:0a:12345678901 0 EOF
garbage
";

    fn id(major: u32, minor: u32, inode: u64) -> FileId {
        FileId {
            major,
            minor,
            inode,
        }
    }

    #[test]
    fn holders_and_waiters_are_told_apart() {
        let index = LockIndex::parse(SAMPLE);
        let locks = index.get(&id(0xfe, 0, 10059777)).unwrap();
        assert_eq!(locks.holders, vec![10192]);
        assert_eq!(locks.waiters, vec![10193, 10194]);
    }

    #[test]
    fn shared_posix_and_malformed_rows_are_not_holders() {
        let index = LockIndex::parse(SAMPLE);
        let shared = index.get(&id(0xfe, 0, 42)).unwrap();
        assert!(shared.holders.is_empty(), "a shared lock is no holder");
        assert_eq!(shared.shared, vec![777], "but it is kept apart");
        assert!(index.get(&id(0xfe, 0, 43)).is_none());
        assert_eq!(index.len(), 3);
        assert!(index.has_shared_except(&HashSet::new()));
    }

    #[test]
    fn device_numbers_are_hex_and_inode_decimal() {
        let index = LockIndex::parse(SAMPLE);
        let locks = index.get(&id(0x103, 0x0a, 12345678901)).unwrap();
        assert_eq!(locks.holders, vec![9]);
    }

    proptest::proptest! {
        /// Any text: the parser never panics (the format is the kernel's).
        #[test]
        fn any_text_parses_without_panicking(text in ".{0,400}") {
            let _ = LockIndex::parse(&text);
        }

        /// Rows as the kernel prints them come back exactly: holder or
        /// waiter, exclusive or shared, hex device numbers, decimal inode.
        #[test]
        fn kernel_rows_parse_back(
            rows in proptest::collection::vec(
                (1u32..500, 0usize..4, proptest::bool::ANY, proptest::bool::ANY,
                 1u32..1_000_000, 0u32..0xfff, 0u32..0xff, 1u64..u64::MAX / 2),
                1..20,
            ),
        ) {
            let mut text = String::new();
            for &(ordinal, depth, waiting, exclusive, pid, major, minor, inode) in &rows {
                let arrow = if waiting { format!("{}-> ", " ".repeat(depth)) } else { String::new() };
                let mode = if exclusive { "WRITE" } else { "READ " };
                text.push_str(&format!(
                    "{ordinal}: {arrow}FLOCK  ADVISORY  {mode} {pid} {major:02x}:{minor:02x}:{inode} 0 EOF\n"
                ));
            }
            let index = LockIndex::parse(&text);
            for &(_, _, waiting, exclusive, pid, major, minor, inode) in &rows {
                let locks = index.get(&id(major, minor, inode)).expect("indexed");
                let list = match (waiting, exclusive) {
                    (true, true) => &locks.waiters,
                    (true, false) => &locks.shared_waiters,
                    (false, true) => &locks.holders,
                    (false, false) => &locks.shared,
                };
                proptest::prop_assert!(list.contains(&pid));
            }
        }
    }

    #[test]
    fn a_real_flock_of_this_process_is_indexed_by_its_file_id() {
        use std::os::fd::AsRawFd;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.lock");
        let file = std::fs::File::create(&path).unwrap();
        // SAFETY: a valid open fd for the duration of the call.
        assert_eq!(unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) }, 0);
        // A read that took several pages may miss a line while other
        // processes lock and unlock (the suite's other tests, another
        // build): read again, as the engine does, but only then.
        let id = FileId::of(&path).unwrap();
        let mut index = LockIndex::read().unwrap();
        for _ in 0..crate::liveness::annotate::MAX_REREADS {
            if index.get(&id).is_some() || !index.is_torn() {
                break;
            }
            index = LockIndex::read().unwrap();
        }
        let locks = index.get(&id).expect("our flock is listed");
        assert_eq!(locks.holders, vec![std::process::id()]);
    }
}
