//! The engine task: one loop that owns the current view of every claim and
//! sends a [`Delta`] for each difference it observes.
//!
//! Invariants:
//! - events are coalesced per key over a short window, then probed once;
//!   a claim found in flight is probed again a window later, never waited
//!   for in place (one stuck acquisition holds up no other change);
//! - echo: an acquire probe writes (truncate + beacon), so its own events
//!   come back, however late. A key whose files still look exactly as the
//!   engine's last acquire probe left them ([`echo`]) is re-probed
//!   PASSIVELY (which never writes), so an echo costs one passive probe and
//!   can never loop; a sustained echo rate is a visible health;
//! - bulk probes (initial scan, rescans, sweeps) never acquire: with the
//!   lock-free probe (the default) they are one `/proc/locks` read, with
//!   the others passive — thousands of acquire probes would flood the
//!   inotify queue with their own echo;
//! - the periodic sweep runs on its own task, so a kill is still seen at
//!   once while it runs, and is merged [`sweep::MERGE_CHUNK`] keys per turn
//!   of the loop, so a change waits for one chunk at most; its findings
//!   never overwrite a key that events probed after it began;
//! - `/proc/locks` is read off the loop ([`lookup`]), by at most one
//!   lookup at a time, begun at most once per [`INDEX_MIN_INTERVAL`]
//!   (the sweep's own read aside);
//! - every degradation (root missing, overflow, watch limit) is a visible
//!   [`WatcherHealth`].

mod batch;
mod changes;
mod echo;
mod kernel;
mod lookup;
mod newer;
mod opens;
mod outbox;
mod phases;
mod problems;
mod refresh;
mod sweep;

pub use outbox::{DELTA_QUEUE, FOLD_SLACK};
use sweep::SweepOutcome;

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, SystemTime};

use tokio::sync::mpsc::error::TrySendError;
use tokio::sync::mpsc::{self, UnboundedReceiver, UnboundedSender};
use tokio::time::Instant;

use super::{Delta, EngineCommand, EngineConfig, EngineStats, KeyState, Liveness, WatcherHealth};
use crate::context::Context;
use crate::disk::key::LockKey;
use crate::disk::scan;
use crate::engine::fs_events::{self, FsChange};
use crate::engine::trace::{self, Stage};

use crate::liveness::Prober;
use crate::locks::locks_root;

/// How long events are gathered before a batch is probed.
pub const COALESCE: Duration = Duration::from_millis(2);
/// Minimum time between two reads of `/proc/locks`.
pub const INDEX_MIN_INTERVAL: Duration = Duration::from_millis(100);
/// Sweep period when inotify cannot be used.
pub const POLL_EVERY: Duration = Duration::from_secs(2);
/// How often a missing locks root is looked for (besides its events).
const ROOT_RECHECK: Duration = Duration::from_secs(1);

/// The (major, minor) device of `path`'s filesystem.
fn device_of(path: &Path) -> Option<(u32, u32)> {
    std::fs::metadata(path)
        .ok()
        .map(|meta| crate::liveness::proc_locks::FileId::from_metadata(&meta))
        .map(|file| (file.major, file.minor))
}

/// Why a watch phase ended.
enum PhaseEnd {
    /// The locks root disappeared.
    RootGone,
    /// The handle was dropped.
    Stop,
    /// inotify gave up (watch limit): continue by polling.
    Poll,
    /// Events were lost: re-create the watcher (which watches every
    /// directory that exists now, including ones whose creation event was
    /// lost) and rescan.
    Rewatch,
}

pub(super) struct Engine {
    state_dir: PathBuf,
    root: PathBuf,
    prober: Prober,
    config: EngineConfig,
    own_pids: HashSet<u32>,
    states: crate::engine::store::KeyStore,
    /// The keys of `states` that are held (whose holders the clock
    /// refreshes).
    held: HashSet<LockKey>,
    /// Shared with the watcher thread: `held`'s files, the other claim
    /// files opened, and whether a change was lost.
    filter: Arc<fs_events::EventFilter>,
    /// When the opened claim files are next compared with `/proc/locks`
    /// (`Some` while some wait).
    opens_due: Option<Instant>,
    /// When held keys' holders are next re-read.
    next_holder_refresh: Instant,
    /// Held keys' holders' CPU time across refreshes (idle holders).
    cpu: crate::liveness::CpuClock,
    problems: problems::Problems,
    health: Option<WatcherHealth>,
    deltas: mpsc::Sender<Delta>,
    /// Deltas the consumer has not had room for yet, folded per key.
    outbox: outbox::Outbox,
    stats: Arc<EngineStats>,
    /// What each key's files looked like right after the engine's last
    /// acquire probe of it (its own writes).
    echo_marks: HashMap<LockKey, echo::Fingerprint>,
    /// The engine's own echoes per second.
    echo_rate: echo::EchoRate,
    /// Keys changed since the last batch.
    pending: HashSet<LockKey>,
    /// Keys of `pending` whose changes include a close of a file opened
    /// for writing (see [`batch`]'s close confirmation).
    closed: HashSet<LockKey>,
    /// Keys of `pending` whose changes include something else than a
    /// close (a create, a write, a removal): someone may have taken them.
    written: HashSet<LockKey>,
    /// Keys found held after a close, with how many looks confirmed it
    /// so far and the held state found last: it is sent only once a look
    /// with no close since agrees ([`batch::CLOSE_CONFIRMS`] at most).
    confirming: HashMap<LockKey, batch::Confirming>,
    /// Keys found in flight (gate locked, announce not), since when: they
    /// are probed again, not waited for.
    in_flight_since: HashMap<LockKey, Instant>,
    /// When the pending batch is due.
    batch_due: Option<Instant>,
    /// The `/proc/locks` lookups, which run off the loop.
    lookups: lookup::Lookups,
    lookup_results_tx: UnboundedSender<lookup::LookupOutcome>,
    lookup_results: UnboundedReceiver<lookup::LookupOutcome>,
    /// Held probe results whose holders the rate-limited `/proc/locks`
    /// read has not named yet: sent once it has (never without holders
    /// and a reason), with the time they were observed.
    deferred: HashMap<LockKey, (KeyState, SystemTime)>,
    /// Held keys sent with the holders of the same claim, to confirm at
    /// the next read.
    recheck: HashSet<LockKey>,
    /// Held keys whose files were opened (a contender or a watcher may be
    /// arriving): rechecked once the opens settled ([`opens::OPEN_SETTLE`]),
    /// so that the look finds the `flock` the open came before.
    opened_held: HashSet<LockKey>,
    next_sweep: Instant,
    /// Scans of created directories (off the loop: adding a watch waits
    /// for notify's thread, which a storm of events keeps busy).
    dir_scans_tx: UnboundedSender<crate::disk::ScanReport>,
    dir_scans: UnboundedReceiver<crate::disk::ScanReport>,
    /// While a background sweep runs or is merged: the keys events probed
    /// or removed since it began (its findings about them are older).
    sweep_touched: newer::Newer,
    /// The background sweep's findings being merged, a chunk per turn.
    merging: Option<sweep::Merge>,
    /// Bumped whenever the view is thrown away (root gone, polling), so a
    /// background sweep begun before cannot resurrect it.
    generation: u64,
    sweep_results_tx: UnboundedSender<Option<SweepOutcome>>,
    sweep_results: UnboundedReceiver<Option<SweepOutcome>>,
    /// The inotify watcher while watching: walks add directories to it.
    watcher: Option<fs_events::FsWatcher>,
    /// The kernel's lock events, when they are the liveness source.
    kernel: Option<kernel::Kernel>,
}

impl Engine {
    pub(super) fn new(
        context: Context,
        config: EngineConfig,
        deltas: mpsc::Sender<Delta>,
        stats: Arc<EngineStats>,
    ) -> Self {
        let state_dir = context.state_dir().to_path_buf();
        let (sweep_results_tx, sweep_results) = mpsc::unbounded_channel();
        let (lookup_results_tx, lookup_results) = mpsc::unbounded_channel();
        let (dir_scans_tx, dir_scans) = mpsc::unbounded_channel();
        let filter = Arc::new(fs_events::EventFilter::traced(config.trace.clone()));
        Self {
            root: locks_root(&state_dir),
            state_dir,
            prober: Prober::new(context),
            next_sweep: Instant::now() + config.sweep_every,
            config,
            own_pids: HashSet::from([std::process::id()]),
            states: Default::default(),
            held: HashSet::new(),
            filter,
            opens_due: None,
            next_holder_refresh: Instant::now() + refresh::HOLDER_REFRESH,
            cpu: crate::liveness::CpuClock::default(),
            problems: problems::Problems::default(),
            health: None,
            deltas,
            outbox: outbox::Outbox::default(),
            stats,
            echo_marks: HashMap::new(),
            echo_rate: echo::EchoRate::default(),
            pending: HashSet::new(),
            closed: HashSet::new(),
            written: HashSet::new(),
            confirming: HashMap::new(),
            in_flight_since: HashMap::new(),
            batch_due: None,
            lookups: lookup::Lookups::default(),
            lookup_results_tx,
            lookup_results,
            deferred: HashMap::new(),
            recheck: HashSet::new(),
            opened_held: HashSet::new(),
            dir_scans_tx,
            dir_scans,
            sweep_touched: newer::Newer::default(),
            merging: None,
            generation: 0,
            sweep_results_tx,
            sweep_results,
            watcher: None,
            kernel: None,
        }
    }

    pub(super) async fn run(mut self, mut commands: UnboundedReceiver<EngineCommand>) {
        self.set_health(WatcherHealth::Starting);
        if let super::LivenessSource::KernelEvents(open) = &self.config.source {
            match open() {
                Ok(stream) => {
                    let devices = device_of(&self.state_dir).into_iter().collect();
                    let kernel = kernel::Kernel::start(stream, devices);
                    self.filter.told_by_kernel(kernel.nudge.clone());
                    self.kernel = Some(kernel);
                }
                // The caller checked it could open them; if it cannot now,
                // inference goes on, and the log says why.
                Err(why) => tracing::warn!(%why, "kernel lock events unavailable: inferring"),
            }
        }
        let mut first = true;
        loop {
            if !self.root.is_dir() {
                if first {
                    // Nothing is on disk: the initial state (empty) is
                    // complete, so whatever appears from now on is a change
                    // (`watch` without `--initial` prints it).
                    let at = SystemTime::now();
                    self.send(Delta::Synced { keys: 0, at });
                }
                if !self.wait_for_root(&mut commands).await {
                    return;
                }
            }
            if !first && !matches!(self.health, Some(WatcherHealth::Rescanning { .. })) {
                self.set_health(WatcherHealth::Rescanning {
                    reason: "locks dir appeared".into(),
                });
            }
            first = false;
            let (tx, rx) = mpsc::channel(fs_events::CHANGE_QUEUE);
            let filter = self.filter.clone();
            let end = match fs_events::subscribe(&self.state_dir, &self.root, filter, tx) {
                Ok(watcher) => {
                    // The sweep's walk watches every directory it reads.
                    self.watcher = Some(watcher);
                    self.full_sweep().await;
                    let end = if self.watch_limit_reached() {
                        self.watcher = None;
                        self.poll_phase(&mut commands).await
                    } else {
                        self.set_health(WatcherHealth::Watching);
                        self.event_phase(rx, &mut commands).await
                    };
                    self.watcher = None;
                    end
                }
                Err(error) => {
                    self.set_health(WatcherHealth::Polling {
                        reason: format!("cannot watch {}: {error}", self.root.display()),
                    });
                    self.full_sweep().await;
                    self.poll_phase(&mut commands).await
                }
            };
            match end {
                PhaseEnd::Stop => return,
                PhaseEnd::Rewatch => {}
                PhaseEnd::RootGone | PhaseEnd::Poll => self.forget_everything(),
            }
        }
    }

    /// Sends a delta, or keeps it in the outbox (folded) while the
    /// consumer has no room: the engine never waits for its consumer.
    fn send(&mut self, delta: Delta) {
        if !self.outbox.is_empty() {
            return self.outbox.push(delta, self.states.len());
        }
        if let Err(TrySendError::Full(delta)) = self.deltas.try_send(delta) {
            self.outbox.push(delta, self.states.len());
        }
    }

    /// Records `stage` for `key` when tracing is on.
    fn trace(&self, key: &LockKey, stage: Stage) {
        trace::note(&self.config.trace, key, stage);
    }

    /// Now, when tracing is on: the start of a [`Self::span`].
    fn clock(&self) -> Option<std::time::Instant> {
        self.config
            .trace
            .as_ref()
            .map(|_| std::time::Instant::now())
    }

    /// Records the loop's work `what` (on `items` things) begun at `from`
    /// (see [`Self::clock`]).
    fn span(&self, what: &'static str, from: Option<std::time::Instant>, items: usize) {
        if let (Some(trace), Some(from)) = (&self.config.trace, from) {
            trace.span(what, from, items);
        }
    }

    /// Moves what the channel has room for from the outbox to it.
    fn flush_outbox(&mut self) {
        while let Some(delta) = self.outbox.pop() {
            match self.deltas.try_send(delta) {
                Ok(()) => {}
                Err(TrySendError::Full(delta)) => return self.outbox.push_front(delta),
                Err(TrySendError::Closed(_)) => return self.outbox = outbox::Outbox::default(),
            }
        }
    }

    /// Whether a walk could not watch a directory for want of inotify
    /// watches (then the health says polling); other failures are logged.
    fn watch_limit_reached(&mut self) -> bool {
        match self
            .watcher
            .as_ref()
            .and_then(fs_events::FsWatcher::take_failure)
        {
            Some(FsChange::WatchLimit(error)) => {
                self.set_health(WatcherHealth::Polling {
                    reason: format!("inotify watch limit reached ({error})"),
                });
                true
            }
            Some(failure) => {
                tracing::warn!(?failure, "a directory could not be watched");
                false
            }
            None => false,
        }
    }

    /// The hook that watches each directory a walk reads, while watching.
    fn dir_hook(&self) -> Option<crate::disk::scan::OnDir> {
        self.watcher.as_ref().map(fs_events::FsWatcher::dir_hook)
    }

    fn set_health(&mut self, health: WatcherHealth) {
        if self.health.as_ref() != Some(&health) {
            self.health = Some(health.clone());
            self.send(Delta::Health(health));
        }
    }
}
