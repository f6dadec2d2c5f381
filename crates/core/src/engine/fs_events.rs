//! The engine's watchers of the tree: notify's (under inference, and
//! while the locks root does not exist yet) → per-path filesystem
//! changes, classified for the engine ([`FsChange`]); and, under the
//! kernel's events, the inotify instance the engine reads itself
//! ([`subscribe_direct`], [`super::direct_watch`]). Either way the engine
//! takes them through [`Changes`] and adds directories' watches through
//! [`FsWatcher`].
//!
//! Invariants:
//! - an open is never probed (every probe opens files; probing on opens
//!   would make the monitor watch itself, or two monitors each other): an
//!   open of a held key's file is [`FsChange::Opened`] (a waiter may have
//!   arrived); an open of any other claim file is only remembered, in a
//!   set bounded by [`MAX_OPENED`], for the engine to compare with
//!   `/proc/locks` — which makes no filesystem event, so it cannot echo;
//! - memory is bounded whatever the event rate: changes cross to the
//!   engine through a channel of [`CHANGE_QUEUE`] entries, and a change
//!   that does not fit is counted as lost, which the engine handles like
//!   an inotify queue overflow (a rescan);
//! - symlinks are never followed; queue overflow and the watch limit are
//!   surfaced as changes of their own, never swallowed.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use notify::event::{AccessKind, CreateKind, EventKind, ModifyKind, RemoveKind};
use notify::{RecommendedWatcher, RecursiveMode, Watcher};
use tokio::sync::mpsc::Sender;
use tokio::sync::mpsc::error::TrySendError;

pub(crate) use super::fs_change::{FsChange, claim_of};
use super::fs_change::{file_change, renamed};
use crate::disk::key::LockKey;
use crate::engine::trace::{self, Stage, Trace};
use crate::locks::escape::GATE_SUFFIX;

/// A live notify watcher; dropping it stops the events.
///
/// A recursive watch is one watch per directory, added by the engine's
/// own walks ([`FsWatcher::dir_hook`]) just before each directory is read
/// — not by notify's recursive mode, which `lstat`s every entry of the
/// tree before the first event (2 million claim files: 9 s of a first
/// view spent before a single key was read).
#[derive(Clone)]
pub(crate) struct FsWatcher {
    watcher: Adder,
    /// Sends [`FsChange::MountsChanged`] while any clone lives (`None`:
    /// the mount table could not be watched).
    _mounts: Option<Arc<MountWatch>>,
    /// The first failure to add a directory's watch that matters (the
    /// watch limit), for the engine to act on.
    failure: Arc<Mutex<Option<FsChange>>>,
}

/// What adds a directory's watch: notify's watcher, or the inotify
/// instance the engine reads itself ([`super::direct_watch`]).
#[derive(Clone)]
enum Adder {
    Notify(Arc<Mutex<RecommendedWatcher>>),
    Direct(super::direct_watch::DirWatches),
}

impl FsWatcher {
    /// Adds (or keeps) the watch of `dir`, its entries only. A directory
    /// gone meanwhile is no failure (its removal is an event of its own).
    pub(crate) fn watch_dir(&self, dir: &Path) {
        let failure = match &self.watcher {
            Adder::Notify(watcher) => {
                let Ok(mut watcher) = watcher.lock() else {
                    return;
                };
                match watcher.watch(dir, RecursiveMode::NonRecursive) {
                    Ok(()) => return,
                    Err(error) => match error.kind {
                        notify::ErrorKind::MaxFilesWatch => FsChange::WatchLimit(error.to_string()),
                        notify::ErrorKind::PathNotFound => return,
                        notify::ErrorKind::Io(ref io) if is_gone(io) => return,
                        _ => FsChange::Error(format!("cannot watch {}: {error}", dir.display())),
                    },
                }
            }
            Adder::Direct(dirs) => match dirs.add(dir) {
                Ok(()) => return,
                Err(error) if error.raw_os_error() == Some(libc::ENOSPC) => {
                    FsChange::WatchLimit(format!("inotify watch limit reached: {error}"))
                }
                Err(error) if is_gone(&error) => return,
                Err(error) => FsChange::Error(format!("cannot watch {}: {error}", dir.display())),
            },
        };
        if let Ok(mut first) = self.failure.lock() {
            let limit = matches!(failure, FsChange::WatchLimit(_));
            if first.is_none() || limit {
                *first = Some(failure);
            }
        }
    }

    /// The walks' hook: watch each directory before it is read.
    pub(crate) fn dir_hook(&self) -> crate::disk::scan::OnDir {
        let watcher = self.clone();
        Arc::new(move |dir: &Path| watcher.watch_dir(dir))
    }

    /// The failure to watch a directory since the last call, if any.
    pub(crate) fn take_failure(&self) -> Option<FsChange> {
        self.failure.lock().ok()?.take()
    }
}

/// A directory that is gone, or is no directory (any more): its removal
/// is an event of its own.
fn is_gone(error: &std::io::Error) -> bool {
    matches!(
        error.raw_os_error(),
        Some(libc::ENOENT | libc::ENOTDIR | libc::ELOOP)
    )
}

/// Where the engine takes its changes from: notify's watcher (through a
/// channel) or the inotify instance it reads itself.
pub(crate) enum Changes {
    Notify(tokio::sync::mpsc::Receiver<FsChange>),
    Direct(Box<super::direct_watch::DirectWatch>),
}

impl Changes {
    /// The next change, as long as it takes. Cancel-safe. `None`: no
    /// change can come any more.
    pub(crate) async fn recv(&mut self) -> Option<FsChange> {
        match self {
            Self::Notify(changes) => changes.recv().await,
            Self::Direct(watch) => watch.recv().await,
        }
    }

    /// A change that is there now, if any.
    pub(crate) fn try_recv(&mut self) -> Option<FsChange> {
        match self {
            Self::Notify(changes) => changes.try_recv().ok(),
            Self::Direct(watch) => watch.try_recv(),
        }
    }
}

/// How many changes may wait for the engine; one more is lost (and the
/// engine rescans), as inotify itself does with its own queue.
pub(crate) const CHANGE_QUEUE: usize = 16 * 1024;

/// How many distinct opened claim files are remembered between two looks
/// of the engine; past that, the opens are dropped (a burst that large is
/// the engine's own sweep or an agent storm, whose keys are probed anyway;
/// the periodic sweep covers the rest).
pub(crate) const MAX_OPENED: usize = 4096;

/// What the watcher thread needs to sort and bound events, shared with
/// the engine.
#[derive(Debug, Default)]
pub(crate) struct EventFilter {
    /// The files of the keys the engine knows as held: an open of one of
    /// them may be a waiter arriving.
    held: RwLock<HashSet<PathBuf>>,
    /// Other claim files opened since the engine last took them.
    opened: Mutex<HashSet<PathBuf>>,
    /// A change did not fit in the queue.
    lost: AtomicBool,
    /// Where events are recorded as read, when tracing is on.
    trace: Option<Arc<Trace>>,
    /// While set, opens are dropped: a sweep is opening every claim file,
    /// and its own read of `/proc/locks` (made after it) stands for them.
    opens_muted: AtomicBool,
    /// Set when no watcher sorts opens through this filter (the direct
    /// watch of the kernel's source, which never [`Self::opened`]): the
    /// held keys' files are then not kept.
    opens_unsorted: AtomicBool,
}

/// Opens stay muted (see [`EventFilter::mute_opens`]) while this lives.
pub(crate) struct MutedOpens(Arc<EventFilter>);

impl Drop for MutedOpens {
    fn drop(&mut self) {
        self.0.opens_muted.store(false, Ordering::Release);
    }
}

impl EventFilter {
    /// A filter that records each claim's event as [`Stage::Read`] in
    /// `trace` (when given).
    pub fn traced(trace: Option<Arc<Trace>>) -> Self {
        Self {
            trace,
            ..Self::default()
        }
    }

    /// Adds or removes a held key's files (the engine keeps this in step
    /// with its view); nothing once opens go unsorted.
    pub(crate) fn set_held(&self, key: &LockKey, held: bool) {
        if self.opens_unsorted.load(Ordering::Acquire) {
            return;
        }
        let Ok(mut files) = self.held.write() else {
            return;
        };
        for path in [key.gate_path(), key.announce_path()] {
            if held {
                files.insert(path);
            } else {
                files.remove(&path);
            }
        }
    }

    /// Says that no watcher sorts opens through this filter from now on
    /// (the engine's source never switches back): the held keys' files
    /// are dropped and no longer kept — under churn, two path inserts and
    /// removals per hold for nobody.
    pub(crate) fn leave_opens_unsorted(&self) {
        self.opens_unsorted.store(true, Ordering::Release);
        if let Ok(mut files) = self.held.write() {
            files.clear();
        }
    }

    /// The claim files (not held keys') opened since the last call.
    pub(crate) fn take_opened(&self) -> HashSet<PathBuf> {
        self.opened
            .lock()
            .map(|mut opened| std::mem::take(&mut *opened))
            .unwrap_or_default()
    }

    /// Drops every open event until the guard is dropped: a sweep opens
    /// all claim files (thousands of events of its own, each a held key's
    /// recheck or an entry in the opened set), and the `/proc/locks` read
    /// it makes after its probes — drop the guard right before it — sees
    /// every lock those opens could have revealed.
    pub(crate) fn mute_opens(self: &Arc<Self>) -> MutedOpens {
        self.opens_muted.store(true, Ordering::Release);
        MutedOpens(self.clone())
    }

    /// True (once) when a change was lost since the last call.
    pub(crate) fn take_lost(&self) -> bool {
        self.lost.swap(false, Ordering::AcqRel)
    }

    /// Sorts one open event: held keys' opens as [`FsChange::Opened`];
    /// other claim files into the opened set, with one
    /// [`FsChange::OthersOpened`] when the set was empty.
    fn opened(&self, state_dir: &Path, event: notify::Event) -> Vec<FsChange> {
        let mut changes = Vec::new();
        if self.opens_muted.load(Ordering::Acquire) {
            return changes;
        }
        let (Ok(held), Ok(mut opened)) = (self.held.read(), self.opened.lock()) else {
            return changes;
        };
        for path in event.paths {
            if held.contains(&path) {
                changes.extend(claim_of(state_dir, &path).map(FsChange::Opened));
            } else if is_claim_file_name(&path) && opened.len() < MAX_OPENED {
                if opened.is_empty() {
                    changes.push(FsChange::OthersOpened);
                }
                opened.insert(path);
            }
        }
        changes
    }
}

/// Whether [`subscribe`] also watches the mount table below its
/// directory ([`MountWatch`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WatchMounts {
    /// The locks root: a mount below it changes what is watched.
    Below,
    /// An ancestor waited on until the root appears: no mount matters.
    No,
}

/// Watches `dir`'s entries and sends classified changes to `tx` (the
/// directories below it are added by walks through
/// [`FsWatcher::dir_hook`]). Paths are named as claims of `state_dir`.
pub fn subscribe(
    state_dir: &Path,
    dir: &Path,
    filter: Arc<EventFilter>,
    tx: Sender<FsChange>,
    mounts: WatchMounts,
) -> notify::Result<FsWatcher> {
    let state_dir = state_dir.to_path_buf();
    let mounts_tx = tx.clone();
    let mounts_filter = Arc::clone(&filter);
    let handler = move |result: notify::Result<notify::Event>| {
        let changes = match result {
            Ok(event) if is_open(&event) => filter.opened(&state_dir, event),
            Ok(event) => classify(&state_dir, event),
            Err(error) => vec![match error.kind {
                notify::ErrorKind::MaxFilesWatch => FsChange::WatchLimit(error.to_string()),
                _ => FsChange::Error(error.to_string()),
            }],
        };
        for change in changes {
            if let FsChange::Key(key) | FsChange::Closed(key) = &change {
                trace::note(&filter.trace, key, Stage::Read);
            }
            if let Err(TrySendError::Full(_)) = tx.try_send(change) {
                filter.lost.store(true, Ordering::Release);
            }
        }
    };
    let config = notify::Config::default().with_follow_symlinks(false);
    let mut watcher = RecommendedWatcher::new(handler, config)?;
    watcher.watch(dir, RecursiveMode::NonRecursive)?;
    let mounts = match mounts {
        WatchMounts::No => None,
        WatchMounts::Below => {
            match MountWatch::start(dir.to_path_buf(), mounts_tx, mounts_filter) {
                Ok(mounts) => Some(Arc::new(mounts)),
                Err(error) => {
                    tracing::warn!(%error, "the mount table cannot be watched: a mount below the root is seen at the next rescan");
                    None
                }
            }
        }
    };
    Ok(FsWatcher {
        watcher: Adder::Notify(Arc::new(Mutex::new(watcher))),
        _mounts: mounts,
        failure: Arc::default(),
    })
}

/// Watches `dir` (the locks root) for the kernel's-events source: with an
/// inotify instance the engine reads itself, on the current runtime
/// ([`super::direct_watch`]), and the mount table below it. Every event
/// calls `nudge`; `filter` gives only its trace.
pub(crate) fn subscribe_direct(
    state_dir: &Path,
    dir: &Path,
    filter: Arc<EventFilter>,
    nudge: Option<crate::liveness::kernel::live_table::Nudger>,
) -> std::io::Result<(FsWatcher, Changes)> {
    let (watch, dirs) =
        super::direct_watch::DirectWatch::new(state_dir, dir, nudge, filter.trace.clone())?;
    let watcher = FsWatcher {
        watcher: Adder::Direct(dirs),
        _mounts: None,
        failure: Arc::default(),
    };
    let watch = watch.with_mounts_below(dir);
    Ok((watcher, Changes::Direct(Box::new(watch))))
}

/// notify's companion (under inference): a thread that waits on this
/// process's mount table (the kernel makes
/// `/proc/self/mountinfo` readable with `POLLPRI` at every mount and
/// unmount in the namespace) and sends [`FsChange::MountsChanged`] when
/// the mounts at or below `root` are not the ones it saw last. It wakes
/// only for mount changes, and ends when dropped (or the engine is gone).
pub(crate) struct MountWatch {
    stop: Arc<nix::sys::eventfd::EventFd>,
}

impl MountWatch {
    /// Starts the thread; the mounts at or below `root` now are the ones
    /// it compares with.
    fn start(
        root: PathBuf,
        tx: Sender<FsChange>,
        filter: Arc<EventFilter>,
    ) -> std::io::Result<Self> {
        use nix::sys::eventfd::{EfdFlags, EventFd};
        let table = std::fs::File::open("/proc/self/mountinfo")?;
        let stop = Arc::new(
            EventFd::from_value_and_flags(0, EfdFlags::EFD_CLOEXEC | EfdFlags::EFD_NONBLOCK)
                .map_err(std::io::Error::from)?,
        );
        let stopped = Arc::clone(&stop);
        let mut known = crate::disk::mounts::mounts_at_or_below(&root);
        std::thread::Builder::new()
            .name("locktop-mounts".into())
            .spawn(move || {
                use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
                use std::os::fd::AsFd;
                loop {
                    let mut fds = [
                        PollFd::new(table.as_fd(), PollFlags::POLLPRI),
                        PollFd::new(stopped.as_fd(), PollFlags::POLLIN),
                    ];
                    match poll(&mut fds, PollTimeout::NONE) {
                        Ok(_) | Err(nix::errno::Errno::EINTR) => {}
                        Err(errno) => {
                            tracing::warn!(%errno, "waiting on the mount table failed: a mount below the root is seen at the next rescan");
                            return;
                        }
                    }
                    let stop = fds[1].revents().is_some_and(|r| !r.is_empty());
                    if stop || tx.is_closed() {
                        return;
                    }
                    let changed = fds[0]
                        .revents()
                        .is_some_and(|r| r.intersects(PollFlags::POLLPRI | PollFlags::POLLERR));
                    if !changed {
                        continue;
                    }
                    // A table that cannot be read now says nothing; one
                    // read again after a failure may hide a change: a
                    // rescan then costs less than a mount missed.
                    let Some(now) = crate::disk::mounts::mounts_at_or_below(&root) else {
                        continue;
                    };
                    if known.as_ref() == Some(&now) {
                        continue;
                    }
                    known = Some(now);
                    // Never blocks (a full queue is a loss, which ends in
                    // the same rescan): the stop must always be heard.
                    match tx.try_send(FsChange::MountsChanged) {
                        Ok(()) => {}
                        Err(TrySendError::Full(_)) => filter.lost.store(true, Ordering::Release),
                        Err(TrySendError::Closed(_)) => return,
                    }
                }
            })?;
        Ok(Self { stop })
    }
}

impl Drop for MountWatch {
    fn drop(&mut self) {
        let _ = self.stop.write(1);
    }
}

fn is_open(event: &notify::Event) -> bool {
    matches!(event.kind, EventKind::Access(AccessKind::Open(_))) && !event.need_rescan()
}

/// Named like a gate or an announce (both end in the gate suffix).
fn is_claim_file_name(path: &Path) -> bool {
    path.file_name()
        .and_then(|name| name.to_str())
        .is_some_and(|name| name.ends_with(GATE_SUFFIX))
}

/// Turns one notify event into changes (an open of a claim's file is
/// [`FsChange::Opened`]; the watcher forwards only held keys' opens).
pub fn classify(state_dir: &Path, event: notify::Event) -> Vec<FsChange> {
    if event.need_rescan() {
        return vec![FsChange::Rescan];
    }
    match event.kind {
        EventKind::Access(AccessKind::Open(_)) => event
            .paths
            .iter()
            .filter_map(|path| claim_of(state_dir, path))
            .map(FsChange::Opened)
            .collect(),
        EventKind::Access(AccessKind::Read) => Vec::new(),
        EventKind::Access(AccessKind::Close(_)) => event
            .paths
            .into_iter()
            .map(|path| match claim_of(state_dir, &path) {
                Some(key) => FsChange::Closed(key),
                None => FsChange::Other(path),
            })
            .collect(),
        EventKind::Create(CreateKind::Folder) => {
            event.paths.into_iter().map(FsChange::DirCreated).collect()
        }
        EventKind::Remove(RemoveKind::Folder) | EventKind::Remove(RemoveKind::Other) => {
            event.paths.into_iter().map(FsChange::DirRemoved).collect()
        }
        EventKind::Modify(ModifyKind::Name(_)) => event
            .paths
            .into_iter()
            .flat_map(|path| renamed(state_dir, path))
            .collect(),
        _ => event
            .paths
            .into_iter()
            .map(|path| file_change(state_dir, path))
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use notify::event::{AccessMode, ModifyKind};

    fn event(kind: EventKind, path: &str) -> notify::Event {
        notify::Event::new(kind).add_path(PathBuf::from(path))
    }

    #[test]
    fn opens_are_told_apart_from_changes() {
        let kind = EventKind::Access(AccessKind::Open(AccessMode::Any));
        let opened = classify(Path::new("/s"), event(kind, "/s/locks/agents/tags/a.lock"));
        assert!(matches!(opened.as_slice(), [FsChange::Opened(key)] if key.name() == "a"));
        let foreign = classify(Path::new("/s"), event(kind, "/s/locks/agents/tags/README"));
        assert!(foreign.is_empty(), "opens of other files are dropped");
    }

    fn open_of(paths: &[PathBuf]) -> notify::Event {
        let kind = EventKind::Access(AccessKind::Open(AccessMode::Any));
        paths.iter().fold(notify::Event::new(kind), |event, path| {
            event.add_path(path.clone())
        })
    }

    #[test]
    fn held_keys_opens_cross_and_other_opens_wait_in_a_bounded_set() {
        let state = Path::new("/s");
        let filter = EventFilter::default();
        let held = LockKey::from_coord(state, Path::new("/s/locks/agents/tags"), "held");
        filter.set_held(&held, true);
        let tags = Path::new("/s/locks/agents/tags");
        let others: Vec<PathBuf> = (0..MAX_OPENED + 10)
            .map(|i| tags.join(format!("t{i}.lock")))
            .collect();

        let first = filter.opened(state, open_of(&[held.gate_path(), others[0].clone()]));
        assert_eq!(first.len(), 2, "{first:?}");
        assert!(matches!(&first[0], FsChange::Opened(key) if key.name() == "held"));
        assert_eq!(first[1], FsChange::OthersOpened);
        let rest = filter.opened(state, open_of(&others));
        assert!(rest.is_empty(), "one wake-up per batch taken: {rest:?}");
        let foreign = filter.opened(state, open_of(&[tags.join("README")]));
        assert!(foreign.is_empty());

        let taken = filter.take_opened();
        assert_eq!(taken.len(), MAX_OPENED, "bounded, whatever the opens");
        assert!(taken.contains(&others[0]) && !taken.contains(&held.gate_path()));
        let again = filter.opened(state, open_of(&others[..1]));
        assert_eq!(
            again,
            vec![FsChange::OthersOpened],
            "a new batch wakes again"
        );

        filter.set_held(&held, false);
        let released = filter.opened(state, open_of(&[held.gate_path()]));
        assert!(released.is_empty(), "joins the waiting set: {released:?}");
    }

    /// Once no watcher sorts opens (the kernel's source), the held keys'
    /// files are dropped and no longer kept.
    #[test]
    fn held_files_are_kept_only_while_opens_are_sorted() {
        let filter = EventFilter::default();
        let held = LockKey::from_coord(Path::new("/s"), Path::new("/s/locks/agents/tags"), "held");
        filter.set_held(&held, true);
        assert_eq!(filter.held.read().unwrap().len(), 2, "gate and announce");
        filter.leave_opens_unsorted();
        assert!(filter.held.read().unwrap().is_empty(), "dropped");
        filter.set_held(&held, true);
        assert!(filter.held.read().unwrap().is_empty(), "not kept");
    }

    #[test]
    fn a_sweep_mutes_opens_until_its_guard_is_dropped() {
        let state = Path::new("/s");
        let filter = Arc::new(EventFilter::default());
        let held = LockKey::from_coord(state, Path::new("/s/locks/agents/tags"), "held");
        let other = LockKey::from_coord(state, Path::new("/s/locks/agents/tags"), "other");
        filter.set_held(&held, true);
        let muted = filter.mute_opens();
        let during = filter.opened(state, open_of(&[held.gate_path(), other.gate_path()]));
        assert!(during.is_empty(), "{during:?}");
        assert!(filter.take_opened().is_empty());
        drop(muted);
        let after = filter.opened(state, open_of(&[held.gate_path(), other.gate_path()]));
        assert_eq!(after.len(), 2, "{after:?}");
    }

    #[test]
    fn a_change_that_does_not_fit_is_lost_and_said_so() {
        let dir = tempfile::tempdir().unwrap();
        let filter = Arc::new(EventFilter::default());
        let (tx, mut rx) = tokio::sync::mpsc::channel(1);
        let watcher = subscribe(
            dir.path(),
            dir.path(),
            filter.clone(),
            tx,
            WatchMounts::Below,
        )
        .unwrap();
        for i in 0..20 {
            std::fs::create_dir(dir.path().join(format!("d{i}"))).unwrap();
        }
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !filter.lost.load(Ordering::Acquire) {
            assert!(std::time::Instant::now() < deadline, "never lost a change");
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        drop(watcher);
        assert!(rx.try_recv().is_ok(), "the queue kept what fitted");
        assert!(filter.take_lost(), "the engine is told");
        assert!(!filter.take_lost(), "once");
    }

    /// A path read from a process's fds names a claim only under the
    /// locks root: a `*.lock` elsewhere (the state dir itself, another
    /// program's lock on the same filesystem) is none.
    #[test]
    fn only_files_under_the_locks_root_are_claims() {
        let state = Path::new("/s");
        assert!(claim_of(state, Path::new("/s/foreign.lock")).is_none());
        assert!(claim_of(state, Path::new("/var/lib/x/agents/tags/t.lock")).is_none());
        assert!(claim_of(state, Path::new("/s/locks/agents/tags/t.lock")).is_some());
    }

    #[test]
    fn gate_and_announce_writes_name_the_same_claim() {
        let state = Path::new("/s");
        let close = EventKind::Access(AccessKind::Close(AccessMode::Write));
        let modify = EventKind::Modify(ModifyKind::Any);
        let a = classify(state, event(close, "/s/locks/agents/tags/my%20tag.lock"));
        let b = classify(
            state,
            event(modify, "/s/locks/agents/tags/my%20tag.live.lock"),
        );
        let (FsChange::Closed(closed), FsChange::Key(modified)) = (&a[0], &b[0]) else {
            panic!("{a:?} {b:?}")
        };
        assert_eq!(closed, modified);
        assert_eq!(closed.name(), "my tag");
    }

    #[test]
    fn overflow_asks_for_a_rescan() {
        let overflow = notify::Event::new(EventKind::Other).set_flag(notify::event::Flag::Rescan);
        assert_eq!(classify(Path::new("/s"), overflow), vec![FsChange::Rescan]);
    }

    proptest::proptest! {
        /// Every AIH and tag an agent can lock names back to itself, and
        /// its files name back to the same claim (the engine's event path).
        #[test]
        fn coordinates_and_file_paths_name_back_to_their_claim(
            segments in proptest::collection::vec("[^/\\x00]{1,12}", 1..5),
            tag in "[^\\x00]{1,30}",
        ) {
            let state = Path::new("/s");
            let aih = segments.join("/");
            proptest::prop_assume!(crate::locks::validate_aih(&aih).is_ok());
            for (kind, name, (dir, key)) in [
                (crate::disk::KeyKind::Instance, aih.as_str(), crate::locks::agent_instance_lock(state, &aih)),
                (crate::disk::KeyKind::Tag, tag.as_str(), crate::locks::agent_tag_lock(state, &tag)),
            ] {
                let named = crate::disk::LockKey::from_coord(state, &dir, &key);
                proptest::prop_assert_eq!((named.kind(), named.name()), (kind, name));
                for path in [named.gate_path(), named.announce_path()] {
                    let from_event = claim_of(state, &path);
                    proptest::prop_assert_eq!(from_event.as_ref(), Some(&named));
                }
            }
        }
    }
}
