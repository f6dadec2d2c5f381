//! What the engine does with what arrives: a filesystem change, a newly
//! created directory, an operator's command (own PIDs), its timers — and
//! with the claims they changed, whatever the source: marks them, takes
//! those due at its timers, drops the ones whose files are gone, has the
//! rest judged as the source judges ([`super::source::Source::judge`]:
//! the kernel's lock table, or inference's probes and reads), and sends
//! only differences ([`super::judging::Judging::update`]).
//!
//! Invariant: a change only marks keys (or scans a new directory: in
//! place when it is a small leaf, else on the blocking pool);
//! judging waits for the source's window ([`Engine::on_timers`]).

use super::source::{GatedClaim, Source};
use super::*;

/// The most entries a new directory may have to be read in place, on the
/// engine's loop (see [`Engine::scan_new_dir`]).
const SMALL_DIR_ENTRIES: usize = 64;

impl Engine {
    /// Handles one change; `Some` ends the watch phase.
    pub(super) async fn on_change(&mut self, change: FsChange) -> Option<PhaseEnd> {
        self.view.stats.events.fetch_add(1, Ordering::Relaxed);
        match change {
            FsChange::Key(key) => {
                self.trace(&key, Stage::Dequeued);
                self.source.note_written(&key);
                self.mark(key);
            }
            // With the kernel's lock events, opens and closes say nothing
            // they do not (the watcher's thread drops them; a close of a
            // new claim's file follows its creation or a write, each a
            // change of its own): the source says whether to look.
            FsChange::Closed(key) => {
                if self.source.note_closed(&key) {
                    self.trace(&key, Stage::Dequeued);
                    self.mark(key);
                }
            }
            FsChange::DirCreated(dir) => {
                self.view.problems.recheck(&dir);
                if let Some(end) = self.scan_new_dir(dir) {
                    return Some(end);
                }
            }
            FsChange::DirRemoved(dir) => {
                if !self.tree.root.is_dir() {
                    return Some(PhaseEnd::RootGone);
                }
                let gone: Vec<LockKey> = self
                    .view
                    .states
                    .keys()
                    .filter(|key| key.dir().starts_with(&dir))
                    .cloned()
                    .collect();
                for key in gone {
                    self.remove(&key);
                }
                if let Some(merge) = self.sweeps.merging.as_mut() {
                    merge.dir_removed(dir.clone());
                }
                self.view.problems.forget_under(&dir);
            }
            FsChange::Other(path) => self.view.problems.recheck(&path),
            FsChange::Opened(key) => {
                // No probe: under inference, only a /proc/locks re-read
                // (rate-limited) for a held key, where a new waiter would
                // show — once the open settled: read at once, it could
                // come between the open and the blocked flock, and nothing
                // else would tell.
                if self.view.held.contains(&key) {
                    self.source.note_held_opened(key);
                }
            }
            FsChange::OthersOpened => self.source.note_others_opened(),
            FsChange::Rescan => {
                self.view.set_health(WatcherHealth::Rescanning {
                    reason: "inotify queue overflowed; events were lost".into(),
                });
                return Some(PhaseEnd::Rewatch);
            }
            FsChange::MountsChanged => {
                // The root itself unmounted (and gone): as its removal.
                if !self.tree.root.is_dir() {
                    return Some(PhaseEnd::RootGone);
                }
                // The rewatch asks the kernel's events for the new
                // devices before its sweep reads the lock table.
                self.view.set_health(WatcherHealth::Rescanning {
                    reason: "a filesystem was mounted or unmounted below the locks root".into(),
                });
                return Some(PhaseEnd::Rewatch);
            }
            FsChange::LostInQueue => {
                self.view.set_health(WatcherHealth::Rescanning {
                    reason: "events came faster than they could be handled; some were lost".into(),
                });
                return Some(PhaseEnd::Rewatch);
            }
            FsChange::WatchLimit(error) => {
                self.view.set_health(WatcherHealth::Polling {
                    reason: format!("inotify watch limit reached ({error})"),
                });
                return Some(PhaseEnd::Poll);
            }
            FsChange::Error(error) => tracing::warn!(%error, "watcher error"),
        }
        None
    }

    /// Scans a new directory off the loop, watching it and every
    /// directory below it before reading it (so nothing created in them
    /// goes unseen: what was there is read, what comes after is heard);
    /// [`Self::on_dir_scanned`] takes the answer.
    pub(super) fn scan_new_dir(&mut self, dir: PathBuf) -> Option<PhaseEnd> {
        let state_dir = self.tree.state_dir.clone();
        let hook = self.tree.dir_hook();
        // A new directory is most often empty or nearly: read in place
        // (no hand-off to a thread and back, two wake-ups); anything
        // larger off the loop, so that no move of a big tree stalls it.
        if let Some(report) =
            scan::scan_small_leaf(&state_dir, &dir, SMALL_DIR_ENTRIES, hook.as_ref())
        {
            return self.on_dir_scanned(report);
        }
        let scanned = self.tree.dir_scans_tx.clone();
        tokio::task::spawn_blocking(move || {
            let _ = scanned.send(scan::scan_subtree(&state_dir, &dir, hook.as_ref()));
        });
        None
    }

    /// Marks every claim a new directory's scan found as changed; `Some`
    /// when its watches ran out (polling from now on).
    pub(super) fn on_dir_scanned(&mut self, report: crate::disk::ScanReport) -> Option<PhaseEnd> {
        self.view.problems.add(report.problems);
        for key in report.keys {
            if !self.view.states.contains_key(&key) {
                // Created before its directory was watched: no event told
                // its creation, so the scan does (its taker's lock may
                // follow at once).
                self.source.note_written(&key);
                self.mark(key);
            }
        }
        self.view.flush_problems();
        self.watch_limit_reached().then_some(PhaseEnd::Poll)
    }

    pub(super) async fn command(&mut self, command: EngineCommand) {
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
            EngineCommand::Everything(answer) => {
                let mut keys = crate::liveness::probed::Probed::default();
                keys.free
                    .reserve(self.view.states.len() - self.view.states.held_len());
                for (key, state) in self.view.states.iter() {
                    keys.push(key.clone(), state.clone());
                }
                let problems = self.view.problems.set.iter().cloned().collect();
                let _ = answer.send(crate::engine::Everything { keys, problems });
            }
        }
    }

    /// Live ↔ own for keys whose holders' ownership changed.
    pub(super) fn reclassify_own(&mut self) {
        let me = crate::liveness::process::own_pid();
        let changed: Vec<(LockKey, KeyState)> = self
            .view
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

    /// `key` changed: it is judged once its source's window passed.
    pub(super) fn mark(&mut self, key: LockKey) {
        self.source.mark(key);
    }

    pub(super) async fn on_timers(&mut self) {
        let now = Instant::now();
        self.view.flush_problems();
        let due = self.source.take_due(now);
        if !due.is_empty() {
            let from = self.clock();
            let items = due.len();
            self.probe_batch(due).await;
            self.span("probe batch", from, items);
        }
        if self.sweep_due().is_some_and(|due| due <= now) {
            let from = self.clock();
            self.start_background_sweep();
            self.span("start sweep", from, 0);
        }
        if self.holders.due(&self.view).is_some_and(|due| due <= now) {
            let from = self.clock();
            let items = self.view.held.len();
            self.refresh_holders();
            self.span("refresh holders", from, items);
        }
        let from = self.clock();
        let (source, mut judging) = self.split();
        source.on_timers(&mut judging, now);
        self.span("source timers", from, 0);
    }

    /// Re-reads held keys' holders ([`super::refresh::HolderClock::refresh`]): sends the
    /// keys whose holders changed, and has those whose holder exited
    /// judged again.
    fn refresh_holders(&mut self) {
        let idle_after = self.config.idle_after;
        let found = self.holders.refresh(&self.view, idle_after);
        self.view
            .stats
            .holder_refreshes
            .fetch_add(found.read as u64, Ordering::Relaxed);
        for (key, state) in found.changed {
            self.update(key, state, found.at);
        }
        for key in found.exited {
            self.mark(key);
        }
    }

    /// Judges changed keys as the source does (see
    /// [`super::source`]): a claim whose gate is gone or is no lock file
    /// any more is removed first (and its files looked at as problems).
    pub(super) async fn probe_batch(&mut self, keys: Vec<LockKey>) {
        let mut claims = Vec::with_capacity(keys.len());
        for key in keys {
            let (gate, announce) = (key.gate_path(), key.announce_path());
            let gate_lstat = std::fs::symlink_metadata(&gate)
                .ok()
                .filter(|m| m.is_file());
            let Some(gate_lstat) = gate_lstat else {
                // Gone, or replaced by something that is not a lock file
                // (a symlink is never followed, let alone written through):
                // no claim, and maybe a problem (an orphan announce, a FIFO).
                self.remove(&key);
                self.view.problems.recheck(&gate);
                self.view.problems.recheck(&announce);
                continue;
            };
            if self.view.problems.has(&announce) {
                // Its gate came back: no longer an orphan.
                self.view.problems.recheck(&announce);
            }
            claims.push(GatedClaim {
                key,
                gate: gate_lstat,
            });
        }
        let (source, mut judging) = self.split();
        source.judge(&mut judging, claims).await;
        self.view.flush_problems();
    }

    /// `key` was judged `state` at `at` (see [`super::judging::Judging::update`]).
    pub(super) fn update(&mut self, key: LockKey, state: KeyState, at: SystemTime) {
        self.split().1.update(key, state, at);
    }

    pub(super) fn remove(&mut self, key: &LockKey) {
        if self.view.held.remove(key) {
            self.view.filter.set_held(key, false);
        }
        self.sweeps.touched.touch(key);
        self.source.forget(key);
        if let Some(state) = self.view.states.remove(key) {
            self.view.send(Delta::Removed {
                key: key.clone(),
                previous: state.liveness,
                at: SystemTime::now(),
            });
        }
    }
}
