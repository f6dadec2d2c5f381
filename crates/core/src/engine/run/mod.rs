//! The engine task: one loop that owns the current view of every claim and
//! sends a [`Delta`] for each difference it observes.
//!
//! How liveness is learned is the engine's one source, a
//! [`source::Source`]: the kernel's lock events ([`kernel`]) or inference
//! from inotify and `/proc/locks` ([`inference`]); each keeps its own
//! bookkeeping behind that boundary and reaches the engine only through
//! the [`judging::Judging`] it is lent. The engine's own state is grouped
//! by job: the [`view`] (what the consumer was told), the [`tree`]'s
//! watch, the [`sweep`]s and the holders' clock ([`refresh`]).
//!
//! Invariants (under both sources):
//! - bulk judgements (initial scan, rescans, sweeps) never acquire: with
//!   the lock-free probe (the default) or the kernel's events they are one
//!   `/proc/locks` read, with the other probes passive — thousands of
//!   acquire probes would flood the inotify queue with their own echo;
//! - the periodic sweep (inference only: the kernel's events make none)
//!   runs on its own task, so a kill is still seen at once while it runs,
//!   and is merged [`sweep::MERGE_CHUNK`] keys per turn of the loop, so a
//!   change waits for one chunk at most; its findings never overwrite a
//!   key that events judged after it began;
//! - every degradation (root missing, overflow, watch limit, lost lock
//!   events) is a visible [`WatcherHealth`].
//!
//! Invariants of inference:
//! - events are coalesced per key over a short window, then probed once;
//!   a claim found in flight is probed again a window later, never waited
//!   for in place (one stuck acquisition holds up no other change);
//! - echo: an acquire probe writes (truncate + beacon), so its own events
//!   come back, however late. A key whose files still look exactly as the
//!   engine's last acquire probe left them ([`inference::echo`]) is re-probed
//!   PASSIVELY (which never writes), so an echo costs one passive probe and
//!   can never loop; a sustained echo rate is a visible health;
//! - `/proc/locks` is read off the loop ([`inference::lookup`]), by at most one
//!   lookup at a time, begun at most once per [`INDEX_MIN_INTERVAL`]
//!   (the sweep's own read aside).

mod any_source;
mod changes;
mod inference;
mod judging;
mod kernel;
mod newer;
mod outbox;
mod problems;
mod refresh;
mod source;
mod sweep;
mod tree;
mod view;

use any_source::AnySource;
use inference::Inference;
pub use outbox::{DELTA_QUEUE, FOLD_SLACK};
use source::{Source, TreeWatchKind};

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, SystemTime};

use tokio::sync::mpsc::{self, UnboundedReceiver};
use tokio::time::Instant;

use super::{Delta, EngineCommand, EngineConfig, EngineStats, KeyState, Liveness, WatcherHealth};
use crate::context::Context;
use crate::disk::key::LockKey;
use crate::disk::scan;
use crate::engine::fs_events::{self, FsChange};
use crate::engine::trace::{self, Stage};

use crate::liveness::Prober;

/// How long events are gathered before a batch is probed.
pub(crate) const COALESCE: Duration = Duration::from_millis(2);
/// Minimum time between two reads of `/proc/locks`.
pub(crate) const INDEX_MIN_INTERVAL: Duration = Duration::from_millis(100);
/// Sweep period when inotify cannot be used.
pub(crate) const POLL_EVERY: Duration = Duration::from_secs(2);
/// How often a missing locks root is looked for (besides its events),
/// and the least time between two looks at the watched root from the
/// loop's timer (its removal is an event of its own; the look is a
/// safety net, and a `stat` of a long path at every wake-up was 2 % of a
/// monitor's CPU under churn).
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
    prober: Prober,
    config: EngineConfig,
    /// This process and its test holders: never shown as foreign holders.
    own_pids: HashSet<u32>,
    /// What the consumer has been told, and how it is told more.
    view: view::View,
    /// The locks root's watch and the scans of new directories.
    tree: tree::TreeWatch,
    /// The periodic sweep and the merging of sweeps' findings.
    sweeps: sweep::Sweeps,
    /// When held keys' holders are next re-read, and their CPU time.
    holders: refresh::HolderClock,
    /// How liveness is learned, with what that way keeps.
    source: AnySource,
}

impl Engine {
    pub(super) fn new(
        context: Context,
        config: EngineConfig,
        deltas: mpsc::Sender<Delta>,
        stats: Arc<EngineStats>,
    ) -> Self {
        let state_dir = context.state_dir().to_path_buf();
        let filter = Arc::new(fs_events::EventFilter::traced(config.trace.clone()));
        Self {
            prober: Prober::new(context),
            sweeps: sweep::Sweeps::new(Instant::now() + config.sweep_every),
            config,
            own_pids: HashSet::from([std::process::id()]),
            view: view::View::new(filter, deltas, stats),
            tree: tree::TreeWatch::new(state_dir),
            holders: refresh::HolderClock::new(),
            source: AnySource::Inference(Box::new(Inference::new())),
        }
    }

    pub(super) async fn run(mut self, mut commands: UnboundedReceiver<EngineCommand>) {
        self.view.set_health(WatcherHealth::Starting);
        if let super::LivenessSource::KernelEvents(open) = &self.config.source {
            match open() {
                Ok(stream) => {
                    // The filesystems mounted below the root are asked for
                    // as the root's watch starts, before any judgement.
                    let devices = device_of(&self.tree.state_dir).into_iter().collect();
                    let kernel = kernel::Kernel::start(stream, devices);
                    self.source = AnySource::Kernel(Box::new(kernel));
                }
                // The caller checked it could open them; if it cannot now,
                // inference goes on, and the log says why.
                Err(why) => tracing::warn!(%why, "kernel lock events unavailable: inferring"),
            }
        }
        let mut first = true;
        loop {
            if !self.tree.root.is_dir() {
                if first {
                    // Nothing is on disk: the initial state (empty) is
                    // complete, so whatever appears from now on is a change
                    // (`watch` without `--initial` prints it).
                    let at = SystemTime::now();
                    self.view.send(Delta::Synced { keys: 0, at });
                }
                if !self.wait_for_root(&mut commands).await {
                    return;
                }
            }
            if !first && !matches!(self.view.health, Some(WatcherHealth::Rescanning { .. })) {
                self.view.set_health(WatcherHealth::Rescanning {
                    reason: "locks dir appeared".into(),
                });
            }
            first = false;
            let end = match self.subscribe() {
                Ok((watcher, rx)) => {
                    // Every filesystem mounted below the root (an empty one
                    // has no claim to name it yet), sampled before the
                    // sweep reads the lock table; later mounts come as
                    // `MountsChanged`.
                    self.source.watching(&self.tree.root);
                    // The sweep's walk watches every directory it reads.
                    self.tree.watcher = Some(watcher);
                    self.full_sweep().await;
                    let end = if self.watch_limit_reached() {
                        self.tree.watcher = None;
                        self.poll_phase(&mut commands).await
                    } else {
                        self.view.set_health(WatcherHealth::Watching);
                        self.event_phase(rx, &mut commands).await
                    };
                    self.tree.watcher = None;
                    end
                }
                Err(error) => {
                    self.view.set_health(WatcherHealth::Polling {
                        reason: format!("cannot watch {}: {error}", self.tree.root.display()),
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

    /// Watches the locks root: with notify's watcher under inference (its
    /// opens and closes are what it infers from), with an inotify instance
    /// read in this loop under the kernel's events (one thread per burst:
    /// see [`fs_events::subscribe_direct`]).
    fn subscribe(&self) -> Result<(fs_events::FsWatcher, fs_events::Changes), String> {
        let filter = self.view.filter.clone();
        if let TreeWatchKind::Direct(nudge) = self.source.tree_watch() {
            filter.leave_opens_unsorted();
            return fs_events::subscribe_direct(
                &self.tree.state_dir,
                &self.tree.root,
                filter,
                nudge,
            )
            .map_err(|error| error.to_string());
        }
        let (tx, rx) = mpsc::channel(fs_events::CHANGE_QUEUE);
        fs_events::subscribe(
            &self.tree.state_dir,
            &self.tree.root,
            filter,
            tx,
            fs_events::WatchMounts::Below,
        )
        .map(|watcher| (watcher, fs_events::Changes::Notify(rx)))
        .map_err(|error| error.to_string())
    }

    /// The source, and the engine as its judgements see it.
    fn split(&mut self) -> (&mut AnySource, judging::Judging<'_>) {
        let judging = judging::Judging {
            config: &self.config,
            prober: &self.prober,
            own_pids: &self.own_pids,
            state_dir: &self.tree.state_dir,
            view: &mut self.view,
            sweep_touched: &mut self.sweeps.touched,
            generation: self.sweeps.generation,
            cpu: &mut self.holders.cpu,
        };
        (&mut self.source, judging)
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

    /// Whether a walk could not watch a directory for want of inotify
    /// watches (then the health says polling); other failures are logged.
    fn watch_limit_reached(&mut self) -> bool {
        match self
            .tree
            .watcher
            .as_ref()
            .and_then(fs_events::FsWatcher::take_failure)
        {
            Some(FsChange::WatchLimit(error)) => {
                self.view.set_health(WatcherHealth::Polling {
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

    /// Waits until the locks root exists, watching its nearest existing
    /// ancestor. False if the engine was stopped meanwhile.
    async fn wait_for_root(&mut self, commands: &mut UnboundedReceiver<EngineCommand>) -> bool {
        loop {
            let ancestor = nearest_existing_ancestor(&self.tree.root);
            self.view.set_health(WatcherHealth::WaitingForRoot {
                ancestor: ancestor.clone(),
                state_dir_missing: !self.tree.state_dir.is_dir(),
            });
            let (tx, mut rx) = mpsc::channel(fs_events::CHANGE_QUEUE);
            let filter = self.view.filter.clone();
            let _watcher = fs_events::subscribe(
                &self.tree.state_dir,
                &ancestor,
                filter,
                tx,
                fs_events::WatchMounts::No,
            )
            .ok();
            loop {
                self.view.flush_outbox();
                tokio::select! {
                    _ = rx.recv() => {}
                    _ = tokio::time::sleep(ROOT_RECHECK) => {}
                    command = commands.recv() => match command {
                        None => return false,
                        Some(command) => self.command(command).await,
                    },
                }
                if self.tree.root.is_dir() {
                    return true;
                }
                if nearest_existing_ancestor(&self.tree.root) != ancestor {
                    break;
                }
            }
        }
    }

    async fn event_phase(
        &mut self,
        mut changes: fs_events::Changes,
        commands: &mut UnboundedReceiver<EngineCommand>,
    ) -> PhaseEnd {
        let mut root_looked_at = Instant::now();
        loop {
            let wake = self.next_wake();
            let withdrawn_by = self.source.withdrawn_by();
            let consumer = self.view.deltas.clone();
            tokio::select! {
                room = consumer.reserve(), if !self.view.outbox.is_empty() => {
                    let from = self.clock();
                    if let (Ok(room), Some(delta)) = (room, self.view.outbox.pop()) {
                        room.send(delta);
                    }
                    self.view.flush_outbox();
                    self.span("flush outbox", from, 1);
                }
                change = changes.recv() => {
                    let Some(change) = change else { return PhaseEnd::RootGone };
                    match self.take_changes(change, &mut changes).await {
                        None => {}
                        Some(PhaseEnd::Poll) => return self.poll_instead(changes, commands).await,
                        Some(end) => return end,
                    }
                }
                command = commands.recv() => match command {
                    None => return PhaseEnd::Stop,
                    Some(command) => self.command(command).await,
                },
                Some(report) = self.tree.dir_scans.recv() => {
                    let from = self.clock();
                    let items = report.keys.len();
                    if let Some(PhaseEnd::Poll) = self.on_dir_scanned(report) {
                        return self.poll_instead(changes, commands).await;
                    }
                    self.span("new dir scanned", from, items);
                }
                Some(told) = self.source.told() => {
                    let from = self.clock();
                    let items = self.on_told(told).await;
                    self.span("source told", from, items);
                }
                outcome = self.sweeps.results.recv() => {
                    let from = self.clock();
                    let mut items = 0;
                    if let Some(Some(outcome)) = outcome
                        && outcome.generation == self.sweeps.generation
                    {
                        items = outcome.len();
                        self.begin_merge(outcome);
                    }
                    self.span("begin sweep merge", from, items);
                }
                () = std::future::ready(()), if self.may_merge() => {
                    let from = self.clock();
                    let items = self.merge_some(sweep::MERGE_CHUNK);
                    self.span("apply sweep", from, items);
                }
                // The source's stream answered what the deadline waited
                // for (a drain began): the deadline is looked at again,
                // not woken for.
                () = withdrawn(withdrawn_by.as_deref()), if withdrawn_by.is_some() => {}
                _ = tokio::time::sleep_until(wake) => {
                    if root_looked_at.elapsed() >= ROOT_RECHECK {
                        root_looked_at = Instant::now();
                        if !self.tree.root.is_dir() {
                            return PhaseEnd::RootGone;
                        }
                    }
                    if let Some(told) = self.source.drain_now(Instant::now()).await {
                        let from = self.clock();
                        let items = self.on_told(told).await;
                        self.span("drain before judging", from, items);
                        // What inotify told meanwhile (its gate opens with
                        // the drain), before the judgement: a claim's
                        // writes that came since share it.
                        if let Some(change) = changes.try_recv() {
                            match self.take_changes(change, &mut changes).await {
                                None => {}
                                Some(PhaseEnd::Poll) => {
                                    return self.poll_instead(changes, commands).await;
                                }
                                Some(end) => return end,
                            }
                        }
                    }
                    self.on_timers().await;
                }
            }
        }
    }

    /// Takes `first` and every change there is now; `Some` ends the
    /// watch phase.
    async fn take_changes(
        &mut self,
        first: FsChange,
        changes: &mut fs_events::Changes,
    ) -> Option<PhaseEnd> {
        let from = self.clock();
        let mut batch = vec![first];
        while let Some(more) = changes.try_recv() {
            batch.push(more);
        }
        if self.view.filter.take_lost() {
            // The engine fell behind the watcher: what did not fit is
            // lost, as in an inotify overflow.
            batch.push(FsChange::LostInQueue);
        }
        let items = batch.len();
        for change in batch {
            if let Some(end) = self.on_change(change).await {
                return Some(end);
            }
        }
        self.view.flush_problems();
        self.span("take changes", from, items);
        None
    }

    /// Applies what the source's stream told, and does what it asks:
    /// claims judged at once, a judgement of everything. Returns how many
    /// things it was told.
    async fn on_told(&mut self, told: any_source::Told) -> usize {
        let (source, mut judging) = self.split();
        let asks = source.apply(&mut judging, told);
        if !asks.judge_now.is_empty() {
            self.probe_batch(asks.judge_now).await;
        }
        if asks.resync {
            self.resync().await;
        }
        asks.items
    }

    /// Gives up inotify (its watch limit was reached): drops the watches,
    /// sweeps, and polls from now on.
    async fn poll_instead(
        &mut self,
        changes: fs_events::Changes,
        commands: &mut UnboundedReceiver<EngineCommand>,
    ) -> PhaseEnd {
        self.tree.watcher = None;
        drop(changes);
        self.full_sweep().await;
        self.poll_phase(commands).await
    }

    async fn poll_phase(&mut self, commands: &mut UnboundedReceiver<EngineCommand>) -> PhaseEnd {
        loop {
            self.view.flush_outbox();
            let consumer = self.view.deltas.clone();
            tokio::select! {
                command = commands.recv() => match command {
                    None => return PhaseEnd::Stop,
                    Some(command) => self.command(command).await,
                },
                _ = consumer.reserve(), if !self.view.outbox.is_empty() => {}
                () = std::future::ready(()), if self.may_merge() => {
                    self.merge_some(sweep::MERGE_CHUNK);
                }
                _ = tokio::time::sleep(POLL_EVERY.min(self.config.sweep_every)) => {
                    if !self.tree.root.is_dir() {
                        return PhaseEnd::RootGone;
                    }
                    self.full_sweep().await;
                }
            }
        }
    }

    fn next_wake(&self) -> Instant {
        // Nothing due: the loop sleeps until something happens.
        let mut wake = self
            .sweep_due()
            .unwrap_or_else(|| Instant::now() + Duration::from_secs(3600));
        if let Some(due) = self.holders.due(&self.view) {
            wake = wake.min(due);
        }
        if matches!(self.view.health, Some(WatcherHealth::SelfInflicted { .. })) {
            // Quiet now? The next second's count takes the alarm back.
            wake = wake.min(Instant::now() + Duration::from_secs(1));
        }
        if let Some(due) = self.source.next_due() {
            wake = wake.min(due);
        }
        wake
    }
}

/// Resolves when `nudges` says that no drain asked for is still to
/// begin ([`Source::withdrawn_by`]); never without one.
async fn withdrawn(nudges: Option<&dyn crate::liveness::kernel::live_table::Nudges>) {
    match nudges {
        Some(nudges) => nudges.answered().await,
        None => std::future::pending().await,
    }
}

/// The nearest directory above `path` that exists (`/` at worst).
fn nearest_existing_ancestor(path: &Path) -> PathBuf {
    path.ancestors()
        .skip(1)
        .find(|dir| dir.is_dir())
        .unwrap_or(Path::new("/"))
        .to_path_buf()
}
