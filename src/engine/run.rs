//! The engine task: one loop that owns the current view of every claim and
//! sends a [`Delta`] for each difference it observes.
//!
//! Invariants:
//! - events are coalesced per key over a short window, then probed once;
//! - echo: an acquire probe writes (truncate + beacon), so its own events
//!   come back. A key acquire-probed less than [`ECHO_WINDOW`] ago is
//!   re-probed PASSIVELY (which never writes), so an echo costs one passive
//!   probe and can never loop;
//! - bulk probes (initial scan, rescans, sweeps) are passive: thousands of
//!   acquire probes would flood the inotify queue with their own echo;
//! - the periodic sweep runs on its own task, so a kill is still seen at
//!   once while it runs; its findings never overwrite a key that events
//!   probed after it began;
//! - `/proc/locks` is read at most once per [`INDEX_MIN_INTERVAL`];
//! - every degradation (root missing, overflow, watch limit) is a visible
//!   [`WatchHealth`].

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, SystemTime};

use tokio::sync::mpsc::{self, UnboundedReceiver, UnboundedSender};
use tokio::time::Instant;

use super::{Delta, EngineCommand, EngineConfig, EngineStats, KeyState, Liveness, WatchHealth};
use crate::context::Context;
use crate::disk::key::LockKey;
use crate::disk::scan;
use crate::engine::ScanProblem;
use crate::engine::fs_events::{self, FsChange};
use crate::liveness::annotate::annotate_with;
use crate::liveness::bulk;
use crate::liveness::probe::{ProbeMode, Prober};
use crate::liveness::proc_locks::LockIndex;
use crate::locks::locks_root;

/// How long events are gathered before a batch is probed.
pub const COALESCE: Duration = Duration::from_millis(2);
/// After an acquire probe of a key, its events are treated as possible echo
/// for this long (re-probed passively).
pub const ECHO_WINDOW: Duration = Duration::from_millis(250);
/// Minimum time between two reads of `/proc/locks`.
pub const INDEX_MIN_INTERVAL: Duration = Duration::from_millis(100);
/// Sweep period when inotify cannot be used.
pub const POLL_EVERY: Duration = Duration::from_secs(2);
/// A created directory is scanned again this long after its creation
/// event: notify adds the new directory's watch only after handing us the
/// event, so a file created in between is seen by this second scan.
pub const NEW_DIR_RESCAN: Duration = Duration::from_millis(50);
/// How often a missing locks root is looked for (besides its events).
const ROOT_RECHECK: Duration = Duration::from_secs(1);

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
    states: HashMap<LockKey, KeyState>,
    problems: Vec<ScanProblem>,
    health: Option<WatchHealth>,
    deltas: UnboundedSender<Delta>,
    stats: Arc<EngineStats>,
    /// When each key was last probed with the acquire probe.
    acquired_at: HashMap<LockKey, Instant>,
    /// Keys changed since the last batch.
    pending: HashSet<LockKey>,
    /// When the pending batch is due.
    batch_due: Option<Instant>,
    /// The last `/proc/locks` read.
    index: Option<(Instant, LockIndex)>,
    /// Held keys whose holders were not in the (rate-limited) index yet.
    needs_holders: HashSet<LockKey>,
    next_sweep: Instant,
    /// Directories created recently, to scan again once their watch exists.
    new_dirs: Vec<(Instant, PathBuf)>,
    /// `Some` while a background sweep runs: the keys events probed or
    /// removed since it began (its findings about them are older).
    sweep_touched: Option<HashSet<LockKey>>,
    /// Bumped whenever the view is thrown away (root gone, polling), so a
    /// background sweep begun before cannot resurrect it.
    generation: u64,
    sweep_results_tx: UnboundedSender<Option<SweepOutcome>>,
    sweep_results: UnboundedReceiver<Option<SweepOutcome>>,
}

impl Engine {
    pub(super) fn new(
        context: Context,
        config: EngineConfig,
        deltas: UnboundedSender<Delta>,
        stats: Arc<EngineStats>,
    ) -> Self {
        let state_dir = context.state_dir().to_path_buf();
        let (sweep_results_tx, sweep_results) = mpsc::unbounded_channel();
        Self {
            root: locks_root(&state_dir),
            state_dir,
            prober: Prober::new(context),
            next_sweep: Instant::now() + config.sweep_every,
            config,
            own_pids: HashSet::from([std::process::id()]),
            states: HashMap::new(),
            problems: Vec::new(),
            health: None,
            deltas,
            stats,
            acquired_at: HashMap::new(),
            pending: HashSet::new(),
            batch_due: None,
            index: None,
            needs_holders: HashSet::new(),
            new_dirs: Vec::new(),
            sweep_touched: None,
            generation: 0,
            sweep_results_tx,
            sweep_results,
        }
    }

    pub(super) async fn run(mut self, mut commands: UnboundedReceiver<EngineCommand>) {
        self.set_health(WatchHealth::Starting);
        let mut first = true;
        loop {
            if !self.root.is_dir() && !self.wait_for_root(&mut commands).await {
                return;
            }
            if !first && !matches!(self.health, Some(WatchHealth::Rescanning { .. })) {
                self.set_health(WatchHealth::Rescanning {
                    reason: "locks dir appeared".into(),
                });
            }
            first = false;
            let (tx, rx) = mpsc::unbounded_channel();
            let end = match fs_events::subscribe(&self.state_dir, &self.root, true, tx) {
                Ok(watcher) => {
                    self.full_sweep().await;
                    self.set_health(WatchHealth::Watching);
                    let end = self.watch_phase(rx, &mut commands).await;
                    drop(watcher);
                    end
                }
                Err(error) => {
                    self.set_health(WatchHealth::Polling {
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

    fn send(&self, delta: Delta) {
        let _ = self.deltas.send(delta);
    }

    fn set_health(&mut self, health: WatchHealth) {
        if self.health.as_ref() != Some(&health) {
            self.health = Some(health.clone());
            self.send(Delta::Health(health));
        }
    }

    /// Waits until the locks root exists, watching its nearest existing
    /// ancestor. False if the engine was stopped meanwhile.
    async fn wait_for_root(&mut self, commands: &mut UnboundedReceiver<EngineCommand>) -> bool {
        loop {
            let ancestor = nearest_existing_ancestor(&self.root);
            self.set_health(WatchHealth::WaitingForRoot {
                ancestor: ancestor.clone(),
            });
            let (tx, mut rx) = mpsc::unbounded_channel();
            let _watcher = fs_events::subscribe(&self.state_dir, &ancestor, false, tx).ok();
            loop {
                tokio::select! {
                    _ = rx.recv() => {}
                    _ = tokio::time::sleep(ROOT_RECHECK) => {}
                    command = commands.recv() => match command {
                        None => return false,
                        Some(command) => self.command(command).await,
                    },
                }
                if self.root.is_dir() {
                    return true;
                }
                if nearest_existing_ancestor(&self.root) != ancestor {
                    break;
                }
            }
        }
    }

    async fn watch_phase(
        &mut self,
        mut changes: UnboundedReceiver<FsChange>,
        commands: &mut UnboundedReceiver<EngineCommand>,
    ) -> PhaseEnd {
        loop {
            let wake = self.next_wake();
            tokio::select! {
                change = changes.recv() => {
                    let Some(change) = change else { return PhaseEnd::RootGone };
                    let mut batch = vec![change];
                    while let Ok(more) = changes.try_recv() {
                        batch.push(more);
                    }
                    for change in batch {
                        match self.on_change(change).await {
                            None => {}
                            Some(PhaseEnd::Poll) => {
                                drop(changes);
                                self.full_sweep().await;
                                return self.poll_phase(commands).await;
                            }
                            Some(end) => return end,
                        }
                    }
                }
                command = commands.recv() => match command {
                    None => return PhaseEnd::Stop,
                    Some(command) => self.command(command).await,
                },
                outcome = self.sweep_results.recv() => {
                    if let Some(Some(outcome)) = outcome
                        && outcome.generation == self.generation
                    {
                        let newer = self.sweep_touched.take().unwrap_or_default();
                        self.apply_sweep(outcome, &newer);
                    }
                }
                _ = tokio::time::sleep_until(wake) => {
                    if !self.root.is_dir() {
                        return PhaseEnd::RootGone;
                    }
                    self.on_timers().await;
                }
            }
        }
    }

    async fn poll_phase(&mut self, commands: &mut UnboundedReceiver<EngineCommand>) -> PhaseEnd {
        loop {
            tokio::select! {
                command = commands.recv() => match command {
                    None => return PhaseEnd::Stop,
                    Some(command) => self.command(command).await,
                },
                _ = tokio::time::sleep(POLL_EVERY.min(self.config.sweep_every)) => {
                    if !self.root.is_dir() {
                        return PhaseEnd::RootGone;
                    }
                    self.full_sweep().await;
                }
            }
        }
    }

    fn next_wake(&self) -> Instant {
        let mut wake = self.next_sweep;
        if let Some(due) = self.batch_due {
            wake = wake.min(due);
        }
        if let Some((due, _)) = self.new_dirs.first() {
            wake = wake.min(*due);
        }
        if !self.needs_holders.is_empty() {
            let ready = self
                .index
                .as_ref()
                .map_or_else(Instant::now, |(at, _)| *at + INDEX_MIN_INTERVAL);
            wake = wake.min(ready);
        }
        wake
    }

    /// Handles one change; `Some` ends the watch phase.
    async fn on_change(&mut self, change: FsChange) -> Option<PhaseEnd> {
        self.stats.events.fetch_add(1, Ordering::Relaxed);
        match change {
            FsChange::Key(key) => self.mark(key),
            FsChange::DirCreated(dir) => {
                self.scan_new_dir(dir.clone()).await;
                self.new_dirs.push((Instant::now() + NEW_DIR_RESCAN, dir));
            }
            FsChange::DirRemoved(dir) => {
                if !self.root.is_dir() {
                    return Some(PhaseEnd::RootGone);
                }
                let gone: Vec<LockKey> = self
                    .states
                    .keys()
                    .filter(|key| key.dir.starts_with(&dir))
                    .cloned()
                    .collect();
                for key in gone {
                    self.remove(&key);
                }
            }
            FsChange::Other(_) => {}
            FsChange::Rescan => {
                self.set_health(WatchHealth::Rescanning {
                    reason: "inotify queue overflowed; events were lost".into(),
                });
                return Some(PhaseEnd::Rewatch);
            }
            FsChange::WatchLimit(error) => {
                self.set_health(WatchHealth::Polling {
                    reason: format!("inotify watch limit reached ({error})"),
                });
                return Some(PhaseEnd::Poll);
            }
            FsChange::Error(error) => tracing::warn!(%error, "watcher error"),
        }
        None
    }

    /// Marks every claim under a new directory as changed.
    async fn scan_new_dir(&mut self, dir: PathBuf) {
        let state_dir = self.state_dir.clone();
        let report = tokio::task::spawn_blocking(move || scan::scan_subtree(&state_dir, &dir))
            .await
            .unwrap_or_default();
        for key in report.keys {
            if !self.states.contains_key(&key) {
                self.mark(key);
            }
        }
    }

    fn mark(&mut self, key: LockKey) {
        self.pending.insert(key);
        if self.batch_due.is_none() {
            self.batch_due = Some(Instant::now() + COALESCE);
        }
    }

    async fn on_timers(&mut self) {
        let now = Instant::now();
        while self.new_dirs.first().is_some_and(|(due, _)| *due <= now) {
            let (_, dir) = self.new_dirs.remove(0);
            self.scan_new_dir(dir).await;
        }
        if self.batch_due.is_some_and(|due| due <= now) {
            self.batch_due = None;
            let keys: Vec<LockKey> = self.pending.drain().collect();
            self.probe_batch(keys).await;
        }
        if !self.needs_holders.is_empty() && self.index_ready(now) {
            let keys: Vec<LockKey> = self.needs_holders.drain().collect();
            let batch: Vec<(LockKey, KeyState)> = keys
                .into_iter()
                .filter_map(|key| {
                    let mut state = self.states.get(&key)?.clone();
                    if !state.liveness.is_held() {
                        return None;
                    }
                    // Annotation decides Own from the PIDs it finds.
                    if state.liveness == Liveness::Own {
                        state.liveness = Liveness::Live;
                    }
                    state.holders.clear();
                    state.waiters.clear();
                    Some((key, state))
                })
                .collect();
            self.publish(batch, true);
        }
        if self.next_sweep <= now {
            self.start_background_sweep();
        }
    }

    fn index_ready(&self, now: Instant) -> bool {
        self.index
            .as_ref()
            .is_none_or(|(at, _)| now.duration_since(*at) >= INDEX_MIN_INTERVAL)
    }

    /// Probes changed keys: acquire mode unless the key is in its echo
    /// window, passive otherwise.
    async fn probe_batch(&mut self, keys: Vec<LockKey>) {
        let mut batch = Vec::with_capacity(keys.len());
        for key in keys {
            let is_file = std::fs::symlink_metadata(key.gate_path()).is_ok_and(|m| m.is_file());
            if !is_file {
                // Gone, or replaced by something that is not a lock file
                // (a symlink is never followed, let alone written through).
                self.remove(&key);
                continue;
            }
            let now = Instant::now();
            let echo = self
                .acquired_at
                .get(&key)
                .is_some_and(|at| now.duration_since(*at) < ECHO_WINDOW);
            let mode = if echo {
                ProbeMode::Passive
            } else {
                self.config.probe
            };
            let state = self.prober.probe(&key, mode).await;
            self.stats.probes.fetch_add(1, Ordering::Relaxed);
            if let Some(touched) = &mut self.sweep_touched {
                touched.insert(key.clone());
            }
            if mode.writes() {
                self.acquired_at.insert(key.clone(), Instant::now());
            }
            batch.push((key, state));
        }
        let now = Instant::now();
        self.acquired_at
            .retain(|_, at| now.duration_since(*at) < ECHO_WINDOW);
        self.publish(batch, false);
    }

    /// Annotates held keys and sends what changed. Holder PIDs come only
    /// from a `/proc/locks` read made AFTER the probe: when the rate limit
    /// forbids a read now, held keys go out without holders and are
    /// annotated by the next allowed read (an older read could still show a
    /// dead holder of the same inode).
    fn publish(&mut self, mut batch: Vec<(LockKey, KeyState)>, force_index: bool) {
        if batch.iter().any(|(_, state)| state.liveness.is_held()) {
            let now = Instant::now();
            if force_index || self.index_ready(now) {
                self.stats.index_reads.fetch_add(1, Ordering::Relaxed);
                self.index = Some((now, LockIndex::read().unwrap_or_default()));
                let index = &self.index.as_ref().expect("index read above").1;
                annotate_with(&mut batch, index, &self.own_pids);
                for (key, state) in &batch {
                    if state.liveness.is_held() && state.holders.is_empty() {
                        self.needs_holders.insert(key.clone());
                    }
                }
            } else {
                for (key, state) in &mut batch {
                    if state.liveness.is_held() {
                        self.keep_holders_if_same_claim(key, state);
                        self.needs_holders.insert(key.clone());
                    }
                }
            }
        }
        let at = SystemTime::now();
        for (key, state) in batch {
            self.update(key, state, at);
        }
    }

    /// While no fresh `/proc/locks` read is allowed: if the key was already
    /// held and its announce was not rewritten since (same "held since"),
    /// the claim is the same one, so its known holders still stand — no
    /// flicker to "held by nobody" on an echo re-probe. A re-taken claim
    /// (new announce mtime) keeps no PID: the next read names its holder —
    /// and since the key is re-annotated by that read either way, a re-take
    /// within one mtime tick shows the old PID for at most one interval.
    fn keep_holders_if_same_claim(&self, key: &LockKey, state: &mut KeyState) {
        let Some(previous) = self.states.get(key) else {
            return;
        };
        let held = |liveness| matches!(liveness, Liveness::Live | Liveness::Own);
        if !held(previous.liveness) || !held(state.liveness) || previous.holders.is_empty() {
            return;
        }
        let since = key.held_since();
        if since.is_some() && since == previous.since {
            state.liveness = previous.liveness;
            state.holders = previous.holders.clone();
            state.waiters = previous.waiters.clone();
            state.since = previous.since;
        }
    }

    fn update(&mut self, key: LockKey, state: KeyState, at: SystemTime) {
        let previous = self.states.get(&key);
        if previous == Some(&state) {
            return;
        }
        let previous = previous.map(|s| s.liveness);
        self.states.insert(key.clone(), state.clone());
        self.send(Delta::Key {
            key,
            state,
            previous,
            at,
        });
    }

    fn remove(&mut self, key: &LockKey) {
        if let Some(touched) = &mut self.sweep_touched {
            touched.insert(key.clone());
        }
        self.pending.remove(key);
        self.needs_holders.remove(key);
        if let Some(state) = self.states.remove(key) {
            self.send(Delta::Removed {
                key: key.clone(),
                previous: state.liveness,
                at: SystemTime::now(),
            });
        }
    }

    /// A background sweep still running will be ignored when it reports: the
    /// view it would merge into is gone or newer than its findings.
    fn disown_background_sweep(&mut self) {
        self.generation += 1;
        self.sweep_touched = None;
    }

    /// Drops the whole view (the root went away, or watching gave way to
    /// polling); a background sweep still running is disowned.
    fn forget_everything(&mut self) {
        self.disown_background_sweep();
        let keys: Vec<LockKey> = self.states.keys().cloned().collect();
        for key in keys {
            self.remove(&key);
        }
        if !self.problems.is_empty() {
            self.problems.clear();
            self.send(Delta::Problems(Vec::new()));
        }
    }

    /// Rescans the root and passively probes every claim, inline (the
    /// initial sync, rescans, polling): events wait until it is done.
    async fn full_sweep(&mut self) {
        self.next_sweep = Instant::now() + self.config.sweep_every;
        self.disown_background_sweep();
        let outcome = sweep_off_loop(
            self.generation,
            self.state_dir.clone(),
            self.prober.clone(),
            self.own_pids.clone(),
            self.stats.clone(),
        )
        .await;
        if let Some(outcome) = outcome {
            self.apply_sweep(outcome, &HashSet::new());
        }
    }

    /// Starts the periodic sweep on its own task, so events keep being
    /// handled while it runs; [`Self::apply_sweep`] merges its outcome.
    fn start_background_sweep(&mut self) {
        self.next_sweep = Instant::now() + self.config.sweep_every;
        if self.sweep_touched.is_some() {
            return;
        }
        self.sweep_touched = Some(HashSet::new());
        let tx = self.sweep_results_tx.clone();
        let work = sweep_off_loop(
            self.generation,
            self.state_dir.clone(),
            self.prober.clone(),
            self.own_pids.clone(),
            self.stats.clone(),
        );
        tokio::spawn(async move {
            let _ = tx.send(work.await);
        });
    }

    /// Merges a sweep's findings, except for keys in `newer`: events probed
    /// (or removed) them after the sweep began, so its view of them is older.
    fn apply_sweep(&mut self, outcome: SweepOutcome, newer: &HashSet<LockKey>) {
        let on_disk: HashSet<&LockKey> = outcome.batch.iter().map(|(key, _)| key).collect();
        let gone: Vec<LockKey> = self
            .states
            .keys()
            .filter(|key| !on_disk.contains(key) && !newer.contains(*key))
            .cloned()
            .collect();
        drop(on_disk);
        for key in gone {
            self.remove(&key);
        }
        let count = outcome.batch.len();
        let at = SystemTime::now();
        for (key, state) in outcome.batch {
            if !newer.contains(&key) {
                self.update(key, state, at);
            }
        }
        if outcome.problems != self.problems {
            self.problems = outcome.problems.clone();
            self.send(Delta::Problems(outcome.problems));
        }
        self.send(Delta::Synced { keys: count, at });
    }

    async fn command(&mut self, command: EngineCommand) {
        match command {
            EngineCommand::Reprobe(keys) => self.probe_batch(keys).await,
            EngineCommand::Rescan => self.full_sweep().await,
            EngineCommand::AddOwnPid(pid) => {
                self.own_pids.insert(pid);
                self.reclassify_own();
            }
            EngineCommand::RemoveOwnPid(pid) => {
                self.own_pids.remove(&pid);
                self.reclassify_own();
            }
        }
    }

    /// Live ↔ own for keys whose holders' ownership changed.
    fn reclassify_own(&mut self) {
        let me = std::process::id();
        let changed: Vec<(LockKey, KeyState)> = self
            .states
            .iter()
            .filter(|(_, state)| matches!(state.liveness, Liveness::Live | Liveness::Own))
            .filter(|(_, state)| !state.holders.iter().any(|p| p.pid == me))
            .filter_map(|(key, state)| {
                let own = state.holders.iter().any(|p| self.own_pids.contains(&p.pid));
                let liveness = if own { Liveness::Own } else { Liveness::Live };
                (liveness != state.liveness && !state.holders.is_empty()).then(|| {
                    let mut state = state.clone();
                    state.liveness = liveness;
                    (key.clone(), state)
                })
            })
            .collect();
        let at = SystemTime::now();
        for (key, state) in changed {
            self.update(key, state, at);
        }
    }
}

/// What one sweep found: every claim on disk, probed passively and
/// annotated, and the scan's problems (sorted).
pub(super) struct SweepOutcome {
    /// The engine's generation when the sweep began (see
    /// [`Engine::forget_everything`]).
    generation: u64,
    batch: Vec<(LockKey, KeyState)>,
    problems: Vec<ScanProblem>,
}

/// Scan + passive probe + one `/proc/locks` read; `None` if the root could
/// not be scanned. Touches no engine state, so it can run on its own task.
async fn sweep_off_loop(
    generation: u64,
    state_dir: PathBuf,
    prober: Prober,
    own_pids: HashSet<u32>,
    stats: Arc<EngineStats>,
) -> Option<SweepOutcome> {
    stats.sweeps.fetch_add(1, Ordering::Relaxed);
    let report = match bulk::scan_root(&state_dir).await {
        Ok(report) => report,
        Err(error) => {
            tracing::warn!(%error, "sweep could not scan the locks root");
            return None;
        }
    };
    stats
        .probes
        .fetch_add(report.keys.len() as u64, Ordering::Relaxed);
    let mut batch = bulk::probe_all_unannotated(&prober, report.keys, ProbeMode::Passive).await;
    if batch.iter().any(|(_, state)| state.liveness.is_held()) {
        stats.index_reads.fetch_add(1, Ordering::Relaxed);
        annotate_with(
            &mut batch,
            &LockIndex::read().unwrap_or_default(),
            &own_pids,
        );
    }
    let mut problems = report.problems;
    problems.sort();
    Some(SweepOutcome {
        generation,
        batch,
        problems,
    })
}

fn nearest_existing_ancestor(path: &Path) -> PathBuf {
    path.ancestors()
        .skip(1)
        .find(|dir| dir.is_dir())
        .unwrap_or(Path::new("/"))
        .to_path_buf()
}
