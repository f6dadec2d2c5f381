//! What the engine does with one filesystem change, a newly created
//! directory, and an operator's command (own PIDs).
//!
//! Invariant: a change only marks keys pending (or rescans a new
//! directory); probing waits for the batch (see [`super::batch`]).

use super::*;

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
                self.scan_new_dir(dir);
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
    pub(super) fn scan_new_dir(&mut self, dir: PathBuf) {
        let state_dir = self.tree.state_dir.clone();
        let hook = self.tree.dir_hook();
        let scanned = self.tree.dir_scans_tx.clone();
        tokio::task::spawn_blocking(move || {
            let _ = scanned.send(scan::scan_subtree(&state_dir, &dir, hook.as_ref()));
        });
    }

    /// Marks every claim a new directory's scan found as changed; `Some`
    /// when its watches ran out (polling from now on).
    pub(super) fn on_dir_scanned(&mut self, report: crate::disk::ScanReport) -> Option<PhaseEnd> {
        self.view.problems.add(report.problems);
        for key in report.keys {
            if !self.view.states.contains_key(&key) {
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
        let me = std::process::id();
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
}
