//! The lock-free probe: a claim's liveness read from `/proc/locks` alone,
//! matched to the claim files' inodes. It takes no lock and opens no
//! claim file, so no agent's `try_acquire` can ever fail because of it,
//! and no monitor (this one or another) sees an event of it.
//!
//! The answer is the SDK's `try_held`, computed from the kernel's table
//! instead of by flock: `try_held` takes a non-blocking SHARED flock on
//! each file, and that is refused exactly when another open file holds
//! an exclusive flock on it — a non-waiting `FLOCK … WRITE` row of
//! `/proc/locks` on the file's inode. So: gate unlocked (or missing) →
//! free; gate and announce locked → held; gate locked and announce not →
//! in flight (where `try_held` would spin). A differential test
//! (`tests/integration/locks/shared_probe_matches_sdk.rs`) compares the
//! two on random claim states, on ext4 and tmpfs.
//!
//! Complete only where `/proc/locks` lists every holder ([`choose`]):
//! the kernel leaves out locks of processes outside the PID namespace of
//! the `/proc` it is read from (and, in a nested namespace, any lock
//! whose taker is gone), and the device numbers it prints must be the
//! ones `stat` gives for the locks' files (not so on btrfs subvolumes).
//! Elsewhere the monitor falls back to the passive probe and says why.
//!
//! Reading `/proc/locks` is not free for others: each `read()` takes the
//! kernel's file-lock rwsem for writing, so other processes' lock calls
//! wait (never fail) while it is read. Callers read it once per batch,
//! never per key.
//!
//! Invariants: no claim file is opened, no lock taken, nothing written;
//! a symlink is never followed (`lstat` only); `/proc/locks` is read by
//! the caller, once for any number of claims.

use std::os::fd::BorrowedFd;
use std::path::Path;

use nix::NixPath;
use nix::errno::Errno;
use nix::fcntl::{AT_FDCWD, AtFlags};
use nix::sys::stat::{SFlag, fstatat};

use super::probe_mode::ProbeMode;
use super::probed::Probed;
use super::proc_locks::{FileId, LockIndex};
use super::{KeyState, Liveness};
use std::sync::Arc;

use crate::disk::key::{ClaimDir, LockKey};
use crate::locks::IN_FLIGHT_AFTER;
use std::time::Instant;

/// What the kernel's table says of one claim.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// The gate is not exclusively locked, or missing: not held.
    Free,
    /// Gate and announce are both exclusively locked: held.
    Held,
    /// The gate is locked and the announce is not: an acquisition or a
    /// release in flight (or a holder stopped in between).
    InFlight,
    /// The gate is not a regular file (never judged).
    GateNotRegular,
    /// The gate could not be `lstat`ed for another reason than absence.
    GateUnreadable(Errno),
    /// The announce is not a regular file (a FIFO, a directory…): no
    /// agent can take the claim, whether or not its gate is locked.
    AnnounceNotRegular,
}

impl Answer {
    /// The state this answer stands for (no holder details), as the
    /// passive probe would phrase it.
    pub fn state(self, key: &LockKey) -> KeyState {
        let error = |message: String| KeyState {
            error: Some(message),
            ..KeyState::bare(Liveness::Error)
        };
        match self {
            Answer::Free => KeyState::bare(Liveness::Free),
            Answer::Held => KeyState::bare(Liveness::Live),
            Answer::InFlight => KeyState::bare(Liveness::InFlight),
            Answer::GateNotRegular => error(format!(
                "gate {} is not a regular file",
                key.gate_path().display()
            )),
            Answer::GateUnreadable(errno) => {
                error(format!("gate {}: {errno}", key.gate_path().display()))
            }
            Answer::AnnounceNotRegular => error(format!(
                "announce {} is not a regular file",
                key.announce_path().display()
            )),
        }
    }
}

/// Whether `file` is exclusively locked (a holder, not a waiter) in
/// `index`: what the SDK's shared-lock test finds refused.
fn locked(index: &LockIndex, file: FileId) -> bool {
    index
        .get(&file)
        .is_some_and(|locks| !locks.holders.is_empty())
}

/// The answer for the claim whose files are `gate` and `announce` in
/// `dir` (`AT_FDCWD` with full paths, or a directory descriptor with
/// names).
pub(crate) fn answer_at<P: ?Sized + NixPath>(
    dir: BorrowedFd<'_>,
    gate: &P,
    announce: &P,
    index: &LockIndex,
) -> Answer {
    let gate = match fstatat(dir, gate, AtFlags::AT_SYMLINK_NOFOLLOW) {
        Ok(stat) if is_regular(&stat) => FileId::from_stat(&stat),
        Ok(_) => return Answer::GateNotRegular,
        Err(Errno::ENOENT) => return Answer::Free,
        Err(errno) => return Answer::GateUnreadable(errno),
    };
    let announce = fstatat(dir, announce, AtFlags::AT_SYMLINK_NOFOLLOW);
    // An announce that is no regular file (a FIFO, a directory) makes the
    // claim one no agent can take, held or not: the same answer as the
    // passive probe's and `check`'s, never "free".
    if announce.as_ref().is_ok_and(|stat| !is_regular(stat)) {
        return Answer::AnnounceNotRegular;
    }
    if !locked(index, gate) {
        return Answer::Free;
    }
    match announce {
        Ok(stat) if locked(index, FileId::from_stat(&stat)) => Answer::Held,
        _ => Answer::InFlight,
    }
}

/// The answer for a claim whose gate's and announce's `lstat`s were
/// taken already (`gate`, `announce`): the same as [`answer_at`] gives
/// from its own.
pub(crate) fn answer_of(
    gate: &std::io::Result<std::fs::Metadata>,
    announce: &std::io::Result<std::fs::Metadata>,
    index: &LockIndex,
) -> Answer {
    let gate = match gate {
        Ok(meta) if meta.file_type().is_file() => FileId::from_metadata(meta),
        Ok(_) => return Answer::GateNotRegular,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Answer::Free,
        Err(error) => {
            return Answer::GateUnreadable(Errno::from_raw(
                error.raw_os_error().unwrap_or(nix::libc::EIO),
            ));
        }
    };
    if announce
        .as_ref()
        .is_ok_and(|meta| !meta.file_type().is_file())
    {
        return Answer::AnnounceNotRegular;
    }
    if !locked(index, gate) {
        return Answer::Free;
    }
    match announce {
        Ok(meta) if locked(index, FileId::from_metadata(meta)) => Answer::Held,
        _ => Answer::InFlight,
    }
}

/// The answer for `key` (full paths).
pub fn answer(key: &LockKey, index: &LockIndex) -> Answer {
    answer_at(AT_FDCWD, &key.gate_path(), &key.announce_path(), index)
}

/// Every key with its state from one `index`, in order (no holder
/// details: [`crate::liveness::annotate`] adds them from the same
/// index). Keys of one directory are judged relative to one descriptor
/// of it; each key moves into its pair (no copy of a key, no second
/// array: what a sweep of 100,000 keys keeps at its peak).
pub fn judged(keys: Vec<LockKey>, index: &LockIndex) -> Vec<(LockKey, KeyState)> {
    judging(keys, index).collect()
}

/// [`judged`], split ([`Probed`]): a bare free key is kept as its key
/// alone (a million stale keys cost their keys, not their states).
/// With `shared_possible` (someone holds a shared lock on the claims'
/// filesystem), a free claim either of whose files has a row in `index`
/// is kept with its state, for the annotation to name (a shared holder
/// turns it [`Liveness::Shared`]).
pub(crate) fn judged_split(keys: Vec<LockKey>, index: &LockIndex, shared_possible: bool) -> Probed {
    let mut probed = Probed::default();
    let judging = super::claims_at::each_claim_at(keys, |key, at| {
        let (answer, rows) = match at {
            Some((dir, gate, announce)) => {
                let answer = answer_at(dir, gate, announce, index);
                let rows = shared_possible
                    && answer == Answer::Free
                    && [gate, announce]
                        .into_iter()
                        .any(|file| has_rows(dir, file, index));
                (answer, rows)
            }
            None => (answer(&key, index), shared_possible),
        };
        (answer.state(&key), key, rows)
    });
    for (state, key, rows) in judging {
        if rows {
            probed.rest.push((key, state));
        } else {
            probed.push(key, state);
        }
    }
    probed
}

/// Splits `keys` — with their gates' inodes as the directory entries gave
/// them (`inodes`, in the same order) — into the keys `index` surely says
/// free (no row at all on the gate's inode: no `lstat` needed) and the
/// rest, to be judged by [`judged_split`]. A directory's entries are
/// trusted only once the `lstat` of its first gate agrees with its entry
/// (device and inode: an overlay filesystem may give entries other inode
/// numbers than `stat`), and only on a filesystem known to number its
/// entries as `stat` does ([`entries_are_inodes`]); the keys of a
/// directory that is not are all judged the usual way.
pub(crate) fn surely_free(
    keys: Vec<LockKey>,
    inodes: Vec<u64>,
    index: &LockIndex,
) -> (Vec<LockKey>, Vec<LockKey>) {
    let mut free = Vec::with_capacity(keys.len());
    let mut rest = Vec::new();
    // The directory last looked at, and its device if its entries agree
    // with `lstat`.
    let mut trusted: Option<(Arc<ClaimDir>, Option<Device>)> = None;
    for (key, inode) in keys.into_iter().zip(inodes) {
        let same_dir = trusted
            .as_ref()
            .is_some_and(|(dir, _)| Arc::ptr_eq(dir, key.claim_dir()));
        if !same_dir {
            let device = entries_are_inodes(key.dir())
                .then(|| std::fs::symlink_metadata(key.gate_path()).ok())
                .flatten()
                .map(|meta| FileId::from_metadata(&meta))
                .filter(|gate| gate.inode == inode)
                .map(|gate| (gate.major, gate.minor));
            trusted = Some((key.claim_dir().clone(), device));
        }
        let device = trusted.as_ref().and_then(|(_, device)| *device);
        let surely = device.is_some_and(|(major, minor)| {
            index
                .get(&FileId {
                    major,
                    minor,
                    inode,
                })
                .is_none()
        });
        if surely {
            free.push(key);
        } else {
            rest.push(key);
        }
    }
    (free, rest)
}

/// A device's (major, minor).
type Device = (u32, u32);

/// Whether `dir` is on a filesystem whose directory entries carry the
/// inode numbers `stat` and `/proc/locks` give (ext2/3/4, XFS, Btrfs,
/// tmpfs). Elsewhere — an overlay mixing layers, a FUSE or network
/// filesystem — entries are not trusted at all.
fn entries_are_inodes(dir: &Path) -> bool {
    use nix::sys::statfs::{BTRFS_SUPER_MAGIC, EXT4_SUPER_MAGIC, TMPFS_MAGIC, XFS_SUPER_MAGIC};
    nix::sys::statfs::statfs(dir).is_ok_and(|fs| {
        [
            EXT4_SUPER_MAGIC,
            XFS_SUPER_MAGIC,
            BTRFS_SUPER_MAGIC,
            TMPFS_MAGIC,
        ]
        .contains(&fs.filesystem_type())
    })
}

/// Whether the file `name` in `dir` has any row (holder or waiter) in
/// `index`.
fn has_rows(dir: BorrowedFd<'_>, name: &[u8], index: &LockIndex) -> bool {
    fstatat(dir, name, AtFlags::AT_SYMLINK_NOFOLLOW)
        .is_ok_and(|stat| index.get(&FileId::from_stat(&stat)).is_some())
}

/// [`judged`]'s answers, one at a time.
fn judging(keys: Vec<LockKey>, index: &LockIndex) -> impl Iterator<Item = (LockKey, KeyState)> {
    super::claims_at::each_claim_at(keys, |key, at| {
        let state = match at {
            Some((dir, gate, announce)) => answer_at(dir, gate, announce, index).state(&key),
            // The directory is gone or unreadable: by full paths.
            None => answer(&key, index).state(&key),
        };
        (key, state)
    })
}

fn is_regular(stat: &nix::sys::stat::FileStat) -> bool {
    SFlag::from_bits_truncate(stat.st_mode) & SFlag::S_IFMT == SFlag::S_IFREG
}

/// The probe a monitor runs, and why it is not the one asked for.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ProbeChoice {
    /// The mode asked for (`--probe`, or the default).
    #[serde(skip)]
    pub requested: ProbeMode,
    /// The mode that runs.
    #[serde(rename = "probe")]
    pub runs: ProbeMode,
    /// Why `runs` is not `requested` (`None` when it is).
    #[serde(rename = "probe_fallback", skip_serializing_if = "Option::is_none")]
    pub fallback: Option<String>,
}

impl ProbeChoice {
    /// The mode asked for runs as asked.
    pub fn as_asked(mode: ProbeMode) -> Self {
        Self {
            requested: mode,
            runs: mode,
            fallback: None,
        }
    }

    /// One phrase for a header or a status line: the mode, and the
    /// reason of a fallback.
    pub fn describe(&self) -> String {
        match &self.fallback {
            None => self.runs.as_str().to_string(),
            Some(why) => format!(
                "{} ({} unavailable: {why})",
                self.runs.as_str(),
                self.requested.as_str()
            ),
        }
    }
}

/// The probe to run for `requested` on the locks under `state_dir`: the
/// lock-free probe only where `/proc/locks` sees every holder
/// ([`lock_free_blind_spot`]), else the passive probe, with the reason.
pub fn choose(requested: ProbeMode, state_dir: &Path) -> ProbeChoice {
    if requested != ProbeMode::LockFree {
        return ProbeChoice::as_asked(requested);
    }
    match lock_free_blind_spot(state_dir) {
        None => ProbeChoice::as_asked(requested),
        Some(why) => ProbeChoice {
            requested,
            runs: ProbeMode::Passive,
            fallback: Some(why),
        },
    }
}

/// Why `/proc/locks` may not list every holder of a lock under
/// `state_dir`, or `None` when it lists them all:
/// - it cannot be read;
/// - this process is not in the initial PID namespace (the kernel lists
///   only locks of processes visible from the `/proc` it is read from;
///   `/proc/self/ns/pid` names the initial one by a fixed inode);
/// - the device numbers `/proc/locks` prints for the locks' filesystem
///   (its superblock's, as `/proc/self/mountinfo` shows them) differ
///   from the ones `stat` gives its files (btrfs subvolumes).
pub fn lock_free_blind_spot(state_dir: &Path) -> Option<String> {
    if let Err(error) = std::fs::File::open("/proc/locks") {
        return Some(format!("/proc/locks cannot be read: {error}"));
    }
    match std::fs::read_link("/proc/self/ns/pid") {
        Ok(link) if link.as_os_str() == INITIAL_PID_NAMESPACE => {}
        Ok(_) => {
            return Some(
                "a nested PID namespace: /proc/locks does not list holders outside it".into(),
            );
        }
        Err(error) => return Some(format!("/proc/self/ns/pid cannot be read: {error}")),
    }
    let on = nearest_existing(state_dir)?;
    match (stat_device(&on), mount_device(&on)) {
        (Some(stat), Some(mount)) if stat != mount => Some(format!(
            "{} reports device {}:{} but its locks are listed under {}:{} (btrfs?)",
            on.display(),
            stat.0,
            stat.1,
            mount.0,
            mount.1
        )),
        _ => None,
    }
}

/// `/proc/self/ns/pid` of a process in the initial PID namespace (its
/// inode is fixed: `PROC_PID_INIT_INO`).
const INITIAL_PID_NAMESPACE: &str = "pid:[4026531836]";

fn nearest_existing(path: &Path) -> Option<std::path::PathBuf> {
    let locks = crate::locks::locks_root(path);
    locks
        .ancestors()
        .find(|dir| std::fs::symlink_metadata(dir).is_ok())
        .map(Path::to_path_buf)
}

/// (major, minor) of `path`'s `st_dev`.
fn stat_device(path: &Path) -> Option<(u32, u32)> {
    let stat = nix::sys::stat::lstat(path).ok()?;
    Some((libc::major(stat.st_dev), libc::minor(stat.st_dev)))
}

/// (major, minor) of the superblock `path` lives on, from the mount
/// table line of its mount (`statx`'s mount id).
fn mount_device(path: &Path) -> Option<(u32, u32)> {
    let mount_id = mount_id(path)?;
    let table = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    table.lines().find_map(|line| {
        let mut fields = line.split_whitespace();
        let id: u64 = fields.next()?.parse().ok()?;
        let _parent = fields.next()?;
        let (major, minor) = fields.next()?.split_once(':')?;
        (id == mount_id).then_some((major.parse().ok()?, minor.parse().ok()?))
    })
}

fn mount_id(path: &Path) -> Option<u64> {
    use std::os::unix::ffi::OsStrExt;
    let path = std::ffi::CString::new(path.as_os_str().as_bytes()).ok()?;
    let mut out = std::mem::MaybeUninit::<libc::statx>::zeroed();
    // SAFETY: `path` is a NUL-terminated string and `out` a buffer of the
    // size statx(2) writes, both alive for the call.
    let done = unsafe {
        libc::statx(
            libc::AT_FDCWD,
            path.as_ptr(),
            libc::AT_SYMLINK_NOFOLLOW,
            libc::STATX_MNT_ID,
            out.as_mut_ptr(),
        )
    };
    if done != 0 {
        return None;
    }
    // SAFETY: statx returned 0, so it filled the buffer.
    let out = unsafe { out.assume_init() };
    (out.stx_mask & libc::STATX_MNT_ID != 0).then_some(out.stx_mnt_id)
}

/// How long a lock-free judgement waits before it reads `/proc/locks`
/// again for a claim in flight (each read delays every lock call on the
/// machine a little: never a tight loop).
pub(crate) const IN_FLIGHT_REREAD: std::time::Duration = std::time::Duration::from_millis(5);

/// The lock-free state of every key from one `index` (a merged read:
/// [`LockIndex::read_merged`]), judged on up to `threads` threads (keys
/// of one directory stay together as far as the split allows), in input
/// order, no holder details. Claims found in flight are judged again from
/// a fresh read (`read`) every [`IN_FLIGHT_REREAD`] until they settle or
/// [`IN_FLIGHT_AFTER`] has passed (then they are in flight). Blocking:
/// call it from a blocking-pool thread.
pub fn judge_lock_free(
    keys: Vec<LockKey>,
    index: &LockIndex,
    threads: usize,
    read: &(dyn Fn() -> LockIndex + Sync),
) -> Vec<(LockKey, KeyState)> {
    let mut batch = Vec::with_capacity(keys.len());
    for mut chunk in in_chunks(keys, threads, |chunk| judged(chunk, index)) {
        batch.append(&mut chunk);
    }
    settle_in_flight(&mut batch, read);
    batch
}

/// [`judge_lock_free`], split ([`Probed`]: a bare free key is its key
/// alone) and in no particular order: what the whole-tree probes use.
pub(crate) fn judge_lock_free_split(
    keys: Vec<LockKey>,
    index: &LockIndex,
    threads: usize,
    shared_possible: bool,
    read: &(dyn Fn() -> LockIndex + Sync),
) -> Probed {
    let mut probed = Probed::default();
    let judge = |chunk| judged_split(chunk, index, shared_possible);
    for mut chunk in in_chunks(keys, threads, judge) {
        probed.append(&mut chunk);
    }
    settle_in_flight(&mut probed.rest, read);
    probed
}

/// `judge` of `keys` split into up to `threads` runs of at least 1,024
/// (keys of one directory stay together as far as the split allows),
/// one thread each; the answers in input order.
fn in_chunks<T: Send + Default>(
    keys: Vec<LockKey>,
    threads: usize,
    judge: impl Fn(Vec<LockKey>) -> T + Sync,
) -> Vec<T> {
    let chunk_len = keys.len().div_ceil(threads.max(1)).max(1024);
    if keys.len() <= chunk_len {
        return vec![judge(keys)];
    }
    let mut keys = keys.into_iter();
    let chunks: Vec<Vec<LockKey>> = std::iter::from_fn(|| {
        let chunk: Vec<LockKey> = keys.by_ref().take(chunk_len).collect();
        (!chunk.is_empty()).then_some(chunk)
    })
    .collect();
    let judge = &judge;
    std::thread::scope(|scope| {
        let judging: Vec<_> = chunks
            .into_iter()
            .map(|chunk| scope.spawn(move || judge(chunk)))
            .collect();
        judging
            .into_iter()
            .map(|chunk| chunk.join().unwrap_or_default())
            .collect()
    })
}

/// Judges the claims of `batch` found in flight again from fresh reads,
/// as [`judge_lock_free`] says.
fn settle_in_flight(batch: &mut [(LockKey, KeyState)], read: &(dyn Fn() -> LockIndex + Sync)) {
    let start = Instant::now();
    loop {
        let in_flight: Vec<usize> = (0..batch.len())
            .filter(|&at| batch[at].1.liveness == Liveness::InFlight)
            .collect();
        if in_flight.is_empty() || start.elapsed() >= IN_FLIGHT_AFTER {
            return;
        }
        std::thread::sleep(IN_FLIGHT_REREAD);
        let index = LockIndex::read_merged(read);
        for at in in_flight {
            let (key, state) = &mut batch[at];
            *state = answer(key, &index).state(key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    /// Judging keys makes no inotify event in their directory (each
    /// event wakes every watcher of the tree, a monitor's own included):
    /// the directory is reached by a path handle, never opened.
    #[test]
    fn judging_keys_makes_no_inotify_event() {
        use notify::Watcher;
        let tmp = tempfile::tempdir().unwrap();
        let namer = crate::disk::key::DirNamer::new(tmp.path(), tmp.path());
        let keys: Vec<LockKey> = ["a", "b"].iter().map(|name| namer.key(name)).collect();
        let held = std::fs::File::create(keys[0].gate_path()).unwrap();
        std::fs::File::create(keys[0].announce_path()).unwrap();
        flock(&held, libc::LOCK_EX);
        let (tx, rx) = std::sync::mpsc::channel();
        let mut watcher = notify::recommended_watcher(tx).unwrap();
        watcher
            .watch(tmp.path(), notify::RecursiveMode::NonRecursive)
            .unwrap();
        let index = LockIndex::read().unwrap();
        let states = judged(keys.clone(), &index);
        assert_eq!(states.len(), 2);
        assert_eq!(judged_split(keys, &index, true).len(), 2);
        // The last event: whatever the judgements made came before it.
        let sentinel = tmp.path().join("sentinel");
        std::fs::File::create(&sentinel).unwrap();
        let mut before = Vec::new();
        loop {
            let event = rx
                .recv_timeout(std::time::Duration::from_secs(10))
                .expect("the sentinel's event")
                .unwrap();
            if event.paths.contains(&sentinel) {
                break;
            }
            before.push(event);
        }
        assert!(before.is_empty(), "judging made events: {before:?}");
    }

    /// From `lstat`s taken by the caller, the answer is the one the
    /// judgement's own would give, in every shape a claim can take: held,
    /// in flight, free, gate missing, gate or announce no regular file.
    #[test]
    fn an_answer_from_given_lstats_is_the_judgements_own() {
        let tmp = tempfile::tempdir().unwrap();
        let namer = crate::disk::key::DirNamer::new(tmp.path(), tmp.path());
        let key = |name: &str| namer.key(name);
        let (held, in_flight, free, missing, gate_dir, fifo) = (
            key("held"),
            key("inflight"),
            key("free"),
            key("missing"),
            key("gatedir"),
            key("fifo"),
        );
        let mut open = Vec::new();
        for claim in [&held, &in_flight, &free, &fifo] {
            open.push(std::fs::File::create(claim.gate_path()).unwrap());
        }
        for claim in [&held, &in_flight, &free] {
            open.push(std::fs::File::create(claim.announce_path()).unwrap());
        }
        flock(&open[0], libc::LOCK_EX);
        flock(&open[4], libc::LOCK_EX);
        flock(&open[1], libc::LOCK_EX);
        flock(&open[3], libc::LOCK_EX);
        std::fs::create_dir(gate_dir.gate_path()).unwrap();
        nix::unistd::mkfifo(&fifo.announce_path(), nix::sys::stat::Mode::S_IRWXU).unwrap();
        let index = LockIndex::read().unwrap();
        let answers: Vec<(Answer, Answer)> = [&held, &in_flight, &free, &missing, &gate_dir, &fifo]
            .into_iter()
            .map(|claim| {
                let gate = std::fs::symlink_metadata(claim.gate_path());
                let announce = std::fs::symlink_metadata(claim.announce_path());
                (answer_of(&gate, &announce, &index), answer(claim, &index))
            })
            .collect();
        let given: Vec<Answer> = answers.iter().map(|(given, _)| *given).collect();
        assert_eq!(
            given,
            [
                Answer::Held,
                Answer::InFlight,
                Answer::Free,
                Answer::Free,
                Answer::GateNotRegular,
                Answer::AnnounceNotRegular
            ]
        );
        for (given, own) in answers {
            assert_eq!(given, own);
        }
    }

    fn flock(file: &std::fs::File, how: libc::c_int) {
        // SAFETY: a valid open descriptor for the duration of the call.
        assert_eq!(unsafe { libc::flock(file.as_raw_fd(), how) }, 0);
    }

    /// Told from directory entries: a key whose gate's inode has no row
    /// is surely free; a locked gate (held, or only shared-locked) is
    /// judged the usual way; a directory whose entries disagree with
    /// `lstat` (as an overlay's may) is judged the usual way whole.
    #[test]
    fn entries_tell_surely_free_keys_and_leave_the_rest_to_judging() {
        use std::os::unix::fs::MetadataExt;
        let tmp = tempfile::tempdir().unwrap();
        // As a scan names them: one namer (one shared dir) per directory.
        let namer = crate::disk::key::DirNamer::new(tmp.path(), tmp.path());
        let keys: Vec<LockKey> = ["a", "b", "c", "d"]
            .iter()
            .map(|name| namer.key(name))
            .collect();
        let files: Vec<std::fs::File> = keys
            .iter()
            .map(|key| {
                std::fs::File::create(key.announce_path()).unwrap();
                std::fs::File::create(key.gate_path()).unwrap()
            })
            .collect();
        flock(&files[1], libc::LOCK_EX);
        flock(&files[2], libc::LOCK_SH);
        let inodes: Vec<u64> = keys
            .iter()
            .map(|key| std::fs::metadata(key.gate_path()).unwrap().ino())
            .collect();
        // A read torn between its pages may miss a row (other tests hold
        // locks meanwhile): the index judged lists the two this test holds.
        let held_here = [&keys[1], &keys[2]].map(|key| FileId::of(&key.gate_path()).unwrap());
        let index = (0..100)
            .map(|_| LockIndex::read().unwrap())
            .find(|index| held_here.iter().all(|file| index.get(file).is_some()))
            .expect("a whole read of /proc/locks");
        let names = |keys: &[LockKey]| keys.iter().map(|k| k.key().to_string()).collect::<Vec<_>>();
        let (free, rest) = surely_free(keys.clone(), inodes.clone(), &index);
        if !entries_are_inodes(tmp.path()) {
            // (An overlay or a network filesystem: nothing is trusted.)
            assert!(free.is_empty(), "{free:?}");
            return;
        }
        assert_eq!(
            (names(&free), names(&rest)),
            (vec!["a".into(), "d".into()], vec!["b".into(), "c".into()])
        );
        let mut wrong = inodes;
        wrong[0] += 1_000_000;
        let (free, rest) = surely_free(keys, wrong, &index);
        assert!(
            free.is_empty(),
            "entries that disagree with lstat are not trusted"
        );
        assert_eq!(rest.len(), 4);
    }

    /// The four claim states the SDK knows, judged from one read each.
    #[test]
    fn free_held_and_in_flight_claims_read_as_the_kernel_lists_them() {
        let tmp = tempfile::tempdir().unwrap();
        let key = LockKey::from_coord(tmp.path(), tmp.path(), "k");
        let read = || LockIndex::read().unwrap();
        assert_eq!(answer(&key, &read()), Answer::Free, "no files");
        let gate = std::fs::File::create(key.gate_path()).unwrap();
        let announce = std::fs::File::create(key.announce_path()).unwrap();
        assert_eq!(answer(&key, &read()), Answer::Free);
        flock(&gate, libc::LOCK_EX);
        assert_eq!(answer(&key, &read()), Answer::InFlight);
        flock(&announce, libc::LOCK_EX);
        assert_eq!(answer(&key, &read()), Answer::Held);
        flock(&gate, libc::LOCK_UN);
        assert_eq!(answer(&key, &read()), Answer::Free, "announce alone");
        flock(&gate, libc::LOCK_SH);
        assert_eq!(answer(&key, &read()), Answer::Free, "shared is no holder");
    }

    #[test]
    fn a_symlink_at_the_gate_is_never_followed() {
        let tmp = tempfile::tempdir().unwrap();
        let key = LockKey::from_coord(tmp.path(), tmp.path(), "k");
        let target = tmp.path().join("elsewhere");
        let held = std::fs::File::create(&target).unwrap();
        flock(&held, libc::LOCK_EX);
        std::os::unix::fs::symlink(&target, key.gate_path()).unwrap();
        let index = LockIndex::read().unwrap();
        assert_eq!(answer(&key, &index), Answer::GateNotRegular);
        assert_eq!(judged(vec![key], &index)[0].1.liveness, Liveness::Error);
    }

    #[test]
    fn this_machine_sees_every_holder_from_its_initial_namespace() {
        // The test runs in the initial PID namespace on CI; elsewhere the
        // blind spot must say which.
        let tmp = tempfile::tempdir().unwrap();
        let choice = choose(ProbeMode::LockFree, tmp.path());
        let nested = std::fs::read_link("/proc/self/ns/pid")
            .is_ok_and(|link| link.as_os_str() != INITIAL_PID_NAMESPACE);
        assert_eq!(choice.fallback.is_some(), nested, "{choice:?}");
        assert_eq!(
            choose(ProbeMode::Passive, tmp.path()),
            ProbeChoice::as_asked(ProbeMode::Passive)
        );
    }
}
