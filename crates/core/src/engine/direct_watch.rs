//! inotify read by the engine itself, on its own thread: the watcher of
//! the kernel's-events source.
//!
//! Under the kernel's lock events a burst of an agent's activity (open,
//! flock, write, close) is one wake-up of one thread: the inotify fd is
//! registered with the runtime's reactor beside the rings' reader, and
//! the engine reads it where it reads everything else. notify's watcher
//! (its own thread, a channel to the engine, and a filter shared with it
//! through atomics) stays with inference and the wait for the locks root,
//! where its opens and closes are what liveness is inferred from.
//!
//! What is told is what notify's watcher would have told the engine under
//! this source: the same [`FsChange`]s, from the same events (the masks
//! notify asks for, and closes of files opened read-only; one
//! directory's entries per watch, added by the engine's walks), and the
//! mount table's changes (watched on the reactor too: no thread), except
//! that opens and closes are not told — under the kernel's events an
//! unlock is an event of its own — but a read-only close of a claim's file
//! (the source says how soon to drain for it), and that every event of
//! the tree nudges the rings' reader
//! ([`crate::liveness::kernel::wait::Nudge`]): a close of a file opened
//! for writing, a removal or a rename asks for a drain at once (a dying
//! process's unlocks follow its closes), an open, a creation or a write
//! for the judgement's own (an acquisition's flocks are read when its
//! claim is judged, a coalescing window after its first change) — and
//! that the events after a burst's first wait for the drain it asked for,
//! which wakes the thread anyway ([`super::inotify_gate`]).
//!
//! Invariants: symlinks are never followed (`IN_DONT_FOLLOW`, and a watch
//! is only ever of a directory, `IN_ONLYDIR`); an inotify queue overflow
//! is [`FsChange::Rescan`]; changes wait in the watcher, never in a read's
//! future, so a read the engine's loop drops loses none.

use std::collections::{HashMap, VecDeque};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use inotify::{EventMask, Inotify, WatchDescriptor, WatchMask, Watches};
use tokio::io::unix::AsyncFd;

use super::fs_change::{FsChange, claim_named_here, file_change, renamed};
use super::inotify_gate::GatedInotify;
use super::trace::{self, Stage, Trace};
use crate::liveness::kernel::live_table::Nudger;

/// What each directory's watch asks for: notify's own mask (so the
/// engine hears what it heard from notify), and the close of a file
/// opened read-only (a holder that locked through one, releasing: a
/// nudge, where notify's mask left the reader to its backstop); never
/// following a symlink.
const MASK: WatchMask = WatchMask::ATTRIB
    .union(WatchMask::CREATE)
    .union(WatchMask::OPEN)
    .union(WatchMask::DELETE)
    .union(WatchMask::CLOSE_WRITE)
    .union(WatchMask::CLOSE_NOWRITE)
    .union(WatchMask::MODIFY)
    .union(WatchMask::MOVED_FROM)
    .union(WatchMask::MOVED_TO)
    .union(WatchMask::DELETE_SELF)
    .union(WatchMask::MOVE_SELF)
    .union(WatchMask::DONT_FOLLOW)
    .union(WatchMask::ONLYDIR);

/// Room for a read of many events at once (a burst is one read).
const READ_BUFFER: usize = 64 << 10;

/// How many files a read remembers having told the creation or write of
/// (a repeat is told once a read; past this many, every one is told).
const READ_MEMO: usize = 64;

/// The watches, shared with the walks that add them (on blocking-pool
/// threads): each watched directory by its descriptor.
#[derive(Clone)]
pub(crate) struct DirWatches {
    watches: Watches,
    dirs: Arc<Mutex<HashMap<WatchDescriptor, PathBuf>>>,
}

impl DirWatches {
    /// Watches `dir`'s entries (a directory already watched keeps its
    /// one watch).
    pub(crate) fn add(&self, dir: &Path) -> io::Result<()> {
        let descriptor = self.watches.clone().add(dir, MASK)?;
        self.dirs
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(descriptor, dir.to_path_buf());
        Ok(())
    }

    /// The directory a watch is of, if it is still watched.
    fn dir(&self, descriptor: &WatchDescriptor) -> Option<PathBuf> {
        self.dirs
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(descriptor)
            .cloned()
    }

    /// Stops watching `dir` (moved away), if it is watched.
    fn unwatch(&self, dir: &Path) {
        let mut dirs = self.dirs.lock().unwrap_or_else(PoisonError::into_inner);
        let watched = dirs
            .iter()
            .find(|(_, watched)| watched.as_path() == dir)
            .map(|(descriptor, _)| descriptor.clone());
        if let Some(descriptor) = watched {
            dirs.remove(&descriptor);
            // Gone already (the kernel's IGNORED follows) or not: either
            // way its events are no longer told.
            let _ = self.watches.clone().remove(descriptor);
        }
    }

    /// Forgets a watch the kernel removed (its directory went).
    fn forget(&self, descriptor: &WatchDescriptor) {
        self.dirs
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(descriptor);
    }
}

/// The inotify instance the engine reads, with the changes read and not
/// taken yet.
pub(crate) struct DirectWatch {
    inotify: GatedInotify,
    dirs: DirWatches,
    state_dir: PathBuf,
    /// Asks the rings' reader for a drain.
    nudge: Option<Nudger>,
    trace: Option<Arc<Trace>>,
    buffer: Vec<u8>,
    /// Changes read, in order, not taken yet.
    ready: VecDeque<FsChange>,
    /// The mount table below the watched directory.
    mounts: Option<MountTable>,
}

/// This process's mount table, registered with the reactor: the kernel
/// makes `/proc/self/mountinfo` ready with `POLLPRI` at every mount and
/// unmount in the namespace (no polling, no thread).
struct MountTable {
    table: AsyncFd<std::fs::File>,
    /// The directory whose mounts at or below matter.
    root: PathBuf,
    /// The mounts there as last seen (`None`: the table was unreadable).
    known: Option<Vec<(PathBuf, (u32, u32))>>,
}

impl MountTable {
    /// Watches the mounts at or below `root`, as they are now.
    fn open(root: &Path) -> io::Result<Self> {
        let table = std::fs::File::open("/proc/self/mountinfo")?;
        // SAFETY: the AsyncFd owns the file, whose fd stays open and the
        // same for as long as it lives.
        let table =
            unsafe { AsyncFd::register_with_interest(table, tokio::io::Interest::PRIORITY) }
                .map_err(io::Error::from)?;
        Ok(Self {
            table,
            known: crate::disk::mounts::mounts_at_or_below(root),
            root: root.to_path_buf(),
        })
    }

    /// Waits until the mounts at or below the root are not the ones seen
    /// last. Cancel-safe.
    async fn changed(&mut self) -> io::Result<()> {
        loop {
            let mut guard = self.table.ready(tokio::io::Interest::PRIORITY).await?;
            guard.clear_ready();
            // A table that cannot be read now says nothing; one read again
            // after a failure may hide a change: a rescan then costs less
            // than a mount missed.
            let Some(now) = crate::disk::mounts::mounts_at_or_below(&self.root) else {
                continue;
            };
            if self.known.as_ref() != Some(&now) {
                self.known = Some(now);
                return Ok(());
            }
        }
    }
}

impl DirectWatch {
    /// Watches `dir`'s entries, on the current runtime; paths are named
    /// as claims of `state_dir`. Every event calls `nudge`.
    pub(crate) fn new(
        state_dir: &Path,
        dir: &Path,
        nudge: Option<Nudger>,
        trace: Option<Arc<Trace>>,
    ) -> io::Result<(Self, DirWatches)> {
        let inotify = Inotify::init()?;
        let dirs = DirWatches {
            watches: inotify.watches(),
            dirs: Arc::default(),
        };
        dirs.add(dir)?;
        let inotify = GatedInotify::new(inotify, nudge.clone())?;
        let watch = Self {
            inotify,
            dirs: dirs.clone(),
            state_dir: state_dir.to_path_buf(),
            nudge,
            trace,
            buffer: vec![0; READ_BUFFER],
            ready: VecDeque::new(),
            mounts: None,
        };
        Ok((watch, dirs))
    }

    /// Also tells [`FsChange::MountsChanged`] when a filesystem is
    /// mounted or unmounted at or below `root` (inotify sees nothing
    /// inside a mount made over a watched directory). Where the mount
    /// table cannot be watched, says so in the log: such a mount is seen
    /// at the next rescan.
    pub(crate) fn with_mounts_below(mut self, root: &Path) -> Self {
        match MountTable::open(root) {
            Ok(table) => self.mounts = Some(table),
            Err(error) => {
                tracing::warn!(%error, "the mount table cannot be watched: a mount below the root is seen at the next rescan")
            }
        }
        self
    }

    /// The next change, waiting for one as long as needed. Cancel-safe.
    /// `None`: inotify cannot be read any more.
    pub(crate) async fn recv(&mut self) -> Option<FsChange> {
        loop {
            if let Some(change) = self.ready.pop_front() {
                return Some(change);
            }
            let table = &mut self.mounts;
            let mounts = async move {
                match table {
                    Some(table) => table.changed().await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                changed = mounts => match changed {
                    Ok(()) => return Some(FsChange::MountsChanged),
                    Err(error) => {
                        tracing::warn!(%error, "waiting on the mount table failed: a mount below the root is seen at the next rescan");
                        self.mounts = None;
                    }
                },
                readable = self.inotify.readable() => {
                    if let Err(error) = readable {
                        tracing::warn!(%error, "waiting on inotify failed");
                        return None;
                    }
                    let reading = Reading {
                        dirs: &self.dirs,
                        state_dir: &self.state_dir,
                        nudge: self.nudge.as_ref(),
                        trace: &self.trace,
                    };
                    match read(self.inotify.inotify(), &mut self.buffer, &mut self.ready, &reading) {
                        Ok(()) => {}
                        Err(error) if error.kind() == io::ErrorKind::WouldBlock => {}
                        Err(error) => {
                            tracing::warn!(%error, "reading inotify failed");
                            return None;
                        }
                    }
                }
            }
        }
    }

    /// A change read already, or readable now without waiting.
    pub(crate) fn try_recv(&mut self) -> Option<FsChange> {
        if self.ready.is_empty() {
            let reading = Reading {
                dirs: &self.dirs,
                state_dir: &self.state_dir,
                nudge: self.nudge.as_ref(),
                trace: &self.trace,
            };
            let _ = read(
                self.inotify.inotify(),
                &mut self.buffer,
                &mut self.ready,
                &reading,
            );
        }
        self.ready.pop_front()
    }
}

/// What turning events into changes needs.
struct Reading<'a> {
    dirs: &'a DirWatches,
    state_dir: &'a Path,
    nudge: Option<&'a Nudger>,
    trace: &'a Option<Arc<Trace>>,
}

/// Reads what inotify has (`WouldBlock` when nothing) and appends its
/// changes to `ready`.
fn read(
    inotify: &mut Inotify,
    buffer: &mut [u8],
    ready: &mut VecDeque<FsChange>,
    reading: &Reading<'_>,
) -> io::Result<()> {
    let events = inotify.read_events(buffer)?;
    // The files whose creation or write this read told already: an
    // agent's burst creates, truncates and writes the same few files, and
    // each told once a read is enough (each costs an `lstat` and a mark).
    let mut told: Vec<(WatchDescriptor, std::ffi::OsString)> = Vec::new();
    for event in events {
        let written = EventMask::CREATE | EventMask::MODIFY | EventMask::ATTRIB;
        if written.contains(event.mask)
            && let Some(name) = event.name
        {
            if told
                .iter()
                .any(|(wd, seen)| *wd == event.wd && seen == name)
            {
                if let Some(nudge) = reading.nudge {
                    nudge.later();
                }
                continue;
            }
            if told.len() < READ_MEMO {
                told.push((event.wd.clone(), name.to_os_string()));
            }
        } else if event
            .mask
            .intersects(EventMask::DELETE | EventMask::MOVED_FROM | EventMask::MOVED_TO)
            && let Some(name) = event.name
        {
            // Removed or renamed: what comes next at that name is new.
            told.retain(|(wd, seen)| !(*wd == event.wd && seen == name));
        }
        let before = ready.len();
        changes_of(&event, reading, ready);
        for change in ready.range(before..) {
            if let FsChange::Key(key) = change {
                trace::note(reading.trace, key, Stage::Read);
            }
        }
    }
    Ok(())
}

/// Turns one event into changes, keeping the watches' bookkeeping: a
/// watch the kernel removed is forgotten, and a watched directory moved
/// away is no longer watched (its events would come with its old path;
/// moved within the tree it is scanned, and watched, at its new one).
fn changes_of(
    event: &inotify::Event<&std::ffi::OsStr>,
    reading: &Reading<'_>,
    ready: &mut VecDeque<FsChange>,
) {
    if event.mask.contains(EventMask::IGNORED) {
        if let Some(nudge) = reading.nudge {
            nudge_for(event.mask, nudge);
        }
        reading.dirs.forget(&event.wd);
        return;
    }
    let path = reading.dirs.dir(&event.wd).map(|dir| match event.name {
        Some(name) => dir.join(name),
        None => dir,
    });
    if event.mask.contains(EventMask::CLOSE_NOWRITE)
        && event.name.is_some()
        && let Some(key) = path
            .as_deref()
            .and_then(|path| claim_named_here(reading.state_dir, path))
    {
        // Who closed a claim's file opened read-only is no agent's taker
        // as a rule (a probe, a file's creation): the source says
        // whether a release may follow (its files locked), and how soon
        // to drain.
        ready.push_back(FsChange::Closed(key));
        return;
    }
    if let Some(nudge) = reading.nudge {
        nudge_for(event.mask, nudge);
    }
    if event.mask.contains(EventMask::MOVED_FROM)
        && let Some(path) = &path
    {
        reading.dirs.unwatch(path);
    }
    ready.extend(changes_for(event.mask, path, reading.state_dir));
}

/// Asks the rings' reader for the drain an event with `mask` calls for:
/// at once after a close of a file opened for writing, a removal, a
/// rename, an overflow — a release or a death, which an operator waits
/// for; after an open, a creation, a write or a read-only close that is
/// no claim's (an acquisition, judged a coalescing window after its
/// first change anyway; a directory listed) the judgement's own drain
/// ([`crate::liveness::kernel::live_table::Nudges::later`]).
fn nudge_for(mask: EventMask, nudge: &Nudger) {
    let at_once = EventMask::CLOSE_WRITE
        | EventMask::DELETE
        | EventMask::DELETE_SELF
        | EventMask::MOVED_FROM
        | EventMask::MOVED_TO
        | EventMask::MOVE_SELF
        | EventMask::IGNORED
        | EventMask::Q_OVERFLOW;
    if mask.intersects(at_once) {
        nudge.now();
    } else {
        nudge.later();
    }
}

/// The changes an event with `mask` on `path` (`None`: of a watch no
/// longer known) tells: what notify's watcher made of it, but opens and
/// closes, which only nudge.
fn changes_for(mask: EventMask, path: Option<PathBuf>, state_dir: &Path) -> Vec<FsChange> {
    let mut changes = Vec::new();
    if mask.contains(EventMask::Q_OVERFLOW) {
        changes.push(FsChange::Rescan);
        return changes;
    }
    let Some(path) = path else {
        return changes;
    };
    let is_dir = mask.contains(EventMask::ISDIR);
    if mask.intersects(EventMask::MOVED_FROM | EventMask::MOVED_TO | EventMask::MOVE_SELF) {
        changes.extend(renamed(state_dir, path.clone()));
    }
    if mask.contains(EventMask::CREATE) {
        changes.push(if is_dir {
            FsChange::DirCreated(path.clone())
        } else {
            file_change(state_dir, path.clone())
        });
    }
    if mask.contains(EventMask::DELETE) {
        changes.push(if is_dir {
            FsChange::DirRemoved(path.clone())
        } else {
            file_change(state_dir, path.clone())
        });
    }
    if mask.contains(EventMask::DELETE_SELF) {
        // Only directories are watched.
        changes.push(FsChange::DirRemoved(path.clone()));
    }
    if mask.intersects(EventMask::MODIFY | EventMask::ATTRIB) {
        changes.push(file_change(state_dir, path));
    }
    changes
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use super::*;
    use crate::disk::key::LockKey;
    use crate::locks::{agent_tag_lock, locks_root};

    /// Counts nudges, at once (`0`) and for the judgement's drain (`1`);
    /// a drain asked for has always begun.
    #[derive(Default)]
    struct Counting(AtomicUsize, AtomicUsize);

    impl crate::liveness::kernel::live_table::Nudges for Counting {
        fn now(&self) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }

        fn later(&self) {
            self.1.fetch_add(1, Ordering::Relaxed);
        }

        fn answered(&self) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send + '_>> {
            Box::pin(std::future::ready(()))
        }
    }

    /// The next change, within a few seconds.
    async fn next(watch: &mut DirectWatch) -> FsChange {
        tokio::time::timeout(Duration::from_secs(5), watch.recv())
            .await
            .expect("a change within 5 s")
            .expect("inotify readable")
    }

    /// Each event's changes, as notify's watcher told them (opens and
    /// closes aside): an overflow is a rescan, a watched directory's own
    /// removal its removal, a directory created a scan, a claim's write
    /// its claim; an event of a watch no longer known tells nothing.
    #[test]
    fn events_tell_what_notify_told_but_opens_and_closes() {
        let state = tempfile::tempdir().expect("tempdir");
        let (tags, key) = agent_tag_lock(state.path(), "build");
        std::fs::create_dir_all(&tags).expect("tags");
        let claim = LockKey::from_coord(state.path(), &tags, &key);
        std::fs::write(claim.gate_path(), b"").expect("gate");
        let at = |mask, path: &Path| changes_for(mask, Some(path.to_path_buf()), state.path());
        assert_eq!(
            changes_for(EventMask::Q_OVERFLOW, None, state.path()),
            [FsChange::Rescan]
        );
        assert_eq!(
            at(EventMask::DELETE_SELF, &tags),
            [FsChange::DirRemoved(tags.clone())]
        );
        let sub = tags.join("team");
        assert_eq!(
            at(EventMask::CREATE | EventMask::ISDIR, &sub),
            [FsChange::DirCreated(sub.clone())]
        );
        assert_eq!(
            at(EventMask::DELETE | EventMask::ISDIR, &sub),
            [FsChange::DirRemoved(sub.clone())]
        );
        for written in [
            EventMask::MODIFY,
            EventMask::ATTRIB,
            EventMask::CREATE,
            EventMask::DELETE,
        ] {
            assert_eq!(
                at(written, &claim.gate_path()),
                [FsChange::Key(claim.clone())],
                "{written:?}"
            );
        }
        for quiet in [
            EventMask::OPEN,
            EventMask::CLOSE_WRITE,
            EventMask::CLOSE_NOWRITE,
        ] {
            assert!(at(quiet, &claim.gate_path()).is_empty(), "{quiet:?}");
        }
        assert!(changes_for(EventMask::MODIFY, None, state.path()).is_empty());
    }

    /// A file created and written again and again before a read is told
    /// once; removed and made again (a FIFO now) in the same read, it is
    /// told again, as what it is now.
    #[tokio::test(flavor = "current_thread")]
    async fn a_file_written_many_times_in_one_read_is_told_once() {
        let state = tempfile::tempdir().expect("tempdir");
        let (tags, key) = agent_tag_lock(state.path(), "build");
        std::fs::create_dir_all(&tags).expect("tags dir");
        let claim = LockKey::from_coord(state.path(), &tags, &key);
        let (mut watch, _dirs) = DirectWatch::new(state.path(), &tags, None, None).expect("watch");
        for round in 0..5 {
            std::fs::write(claim.gate_path(), format!("{round}")).expect("write");
        }
        let mut told = vec![next(&mut watch).await];
        while let Some(change) = watch.try_recv() {
            told.push(change);
        }
        assert_eq!(told, [FsChange::Key(claim.clone())]);

        std::fs::write(claim.announce_path(), b"1").expect("announce");
        std::fs::remove_file(claim.announce_path()).expect("remove");
        nix::unistd::mkfifo(&claim.announce_path(), nix::sys::stat::Mode::S_IRWXU).expect("fifo");
        let mut told = vec![next(&mut watch).await];
        tokio::time::sleep(Duration::from_millis(50)).await;
        while let Some(change) = watch.try_recv() {
            told.push(change);
        }
        assert_eq!(
            told.last(),
            Some(&FsChange::Other(claim.announce_path())),
            "the FIFO made at the name is told: {told:?}"
        );
    }

    /// What the engine hears from its own inotify under the kernel's
    /// events: a claim's write names its claim, a directory's creation
    /// and removal are told, an open only nudges the rings' reader (for
    /// the judgement's drain) and a close of a file opened for writing
    /// asks for a drain at once, a read-only close of a claim's file is
    /// told (the source says how soon to drain), a symlinked directory
    /// is never watched, and a dropped read loses nothing.
    #[tokio::test(flavor = "current_thread")]
    async fn the_engines_own_inotify_tells_the_tree_and_nudges_at_every_event() {
        let state = tempfile::tempdir().expect("tempdir");
        let (tags, key) = agent_tag_lock(state.path(), "build");
        std::fs::create_dir_all(&tags).expect("tags dir");
        let claim = LockKey::from_coord(state.path(), &tags, &key);
        std::fs::write(claim.gate_path(), b"").expect("gate");
        let counting = Arc::new(Counting::default());
        let (at_once, later) = (&counting.0, &counting.1);
        let nudge: Nudger = counting.clone();
        let (mut watch, dirs) =
            DirectWatch::new(state.path(), &tags, Some(nudge), None).expect("watch");

        std::fs::write(claim.announce_path(), b"1").expect("announce");
        let mut told = vec![next(&mut watch).await];
        // The rest of the burst (create, write, close).
        tokio::time::sleep(Duration::from_millis(50)).await;
        while let Some(change) = watch.try_recv() {
            told.push(change);
        }
        assert!(
            told.iter()
                .all(|change| matches!(change, FsChange::Key(key) if *key == claim)),
            "{told:?}"
        );
        let (closes, writes) = (
            at_once.load(Ordering::Relaxed),
            later.load(Ordering::Relaxed),
        );
        assert!(closes >= 1, "the close after the write: {closes} at once");
        assert!(writes >= 2, "create, write: {writes} for the judgement");

        // An open and a read-only close: a nudge for the judgement's
        // drain, and the close told (no nudge at once).
        drop(std::fs::File::open(claim.gate_path()).expect("open"));
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(watch.try_recv(), Some(FsChange::Closed(claim.clone())));
        assert_eq!(watch.try_recv(), None, "an open is not a change");
        assert!(
            later.load(Ordering::Relaxed) > writes,
            "the open nudged the reader"
        );
        assert_eq!(at_once.load(Ordering::Relaxed), closes, "nothing at once");

        let sub = tags.join("team");
        std::fs::create_dir(&sub).expect("mkdir");
        assert_eq!(next(&mut watch).await, FsChange::DirCreated(sub.clone()));
        std::fs::remove_dir(&sub).expect("rmdir");
        assert_eq!(next(&mut watch).await, FsChange::DirRemoved(sub.clone()));

        // A read dropped while it waits loses nothing.
        let dropped = tokio::time::timeout(Duration::from_millis(20), watch.recv()).await;
        assert!(dropped.is_err(), "nothing to tell yet: {dropped:?}");
        std::fs::write(claim.gate_path(), b"").expect("truncate");
        assert_eq!(next(&mut watch).await, FsChange::Key(claim.clone()));

        // A watched directory moved away is watched no longer: what
        // happens in it is not told under its old path.
        let moved = tags.join("moved");
        std::fs::create_dir(&moved).expect("mkdir");
        assert_eq!(next(&mut watch).await, FsChange::DirCreated(moved.clone()));
        dirs.add(&moved).expect("watch it");
        let away = tempfile::tempdir().expect("away");
        std::fs::rename(&moved, away.path().join("moved")).expect("move away");
        let mut told = vec![next(&mut watch).await];
        std::fs::write(away.path().join("moved").join("x.lock"), b"").expect("write there");
        tokio::time::sleep(Duration::from_millis(50)).await;
        while let Some(change) = watch.try_recv() {
            told.push(change);
        }
        assert!(
            told.iter().all(|change| matches!(
                change,
                FsChange::DirRemoved(path) | FsChange::Other(path) if *path == moved
            )),
            "{told:?}"
        );

        // A symlink to a directory is not followed.
        let elsewhere = tempfile::tempdir().expect("elsewhere");
        let link = tags.join("link");
        std::os::unix::fs::symlink(elsewhere.path(), &link).expect("symlink");
        assert!(dirs.add(&link).is_err(), "a symlink is never watched");
        let _ = locks_root(state.path());
    }
}
