//! Event-driven probing: changed keys are gathered for [`COALESCE`],
//! probed once (acquire mode unless the key is in its echo window), then
//! annotated from a `/proc/locks` read made after the probe, and only
//! differences are sent.

use std::sync::atomic::Ordering;
use std::time::SystemTime;

use tokio::time::Instant;

use super::echo::{ECHO_ALARM_PER_SECOND, Fingerprint};
use super::{COALESCE, Engine, INDEX_MIN_INTERVAL};
use crate::disk::LockKey;
use crate::engine::{Delta, WatcherHealth};
use crate::liveness::annotate::annotate_with;
use crate::liveness::proc_locks::LockIndex;
use crate::liveness::{KeyState, Liveness, ProbeMode};

impl Engine {
    pub(super) fn mark(&mut self, key: LockKey) {
        self.pending.insert(key);
        if self.batch_due.is_none() {
            self.batch_due = Some(Instant::now() + COALESCE);
        }
    }

    pub(super) async fn on_timers(&mut self) {
        let now = Instant::now();
        while self.new_dirs.first().is_some_and(|(due, _)| *due <= now) {
            let (_, dir) = self.new_dirs.remove(0);
            self.scan_new_dir(dir).await;
        }
        self.flush_problems();
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
        self.watch_echo_rate();
    }

    pub(super) fn index_ready(&self, now: Instant) -> bool {
        self.index
            .as_ref()
            .is_none_or(|(at, _)| now.duration_since(*at) >= INDEX_MIN_INTERVAL)
    }

    /// Probes changed keys: in the engine's mode, but passively when the
    /// change is the engine's own echo (the files are as its last acquire
    /// probe left them, see [`super::echo`]).
    pub(super) async fn probe_batch(&mut self, keys: Vec<LockKey>) {
        let mut batch = Vec::with_capacity(keys.len());
        for key in keys {
            let (gate, announce) = (key.gate_path(), key.announce_path());
            let is_file = std::fs::symlink_metadata(&gate).is_ok_and(|m| m.is_file());
            if !is_file {
                // Gone, or replaced by something that is not a lock file
                // (a symlink is never followed, let alone written through):
                // no claim, and maybe a problem (an orphan announce, a FIFO).
                self.remove(&key);
                self.recheck_problem(&gate);
                self.recheck_problem(&announce);
                continue;
            }
            if self.problems.has(&announce) {
                // Its gate came back: no longer an orphan.
                self.recheck_problem(&announce);
            }
            let echo = self.echo_marks.get(&key) == Some(&Fingerprint::of(&key));
            if echo {
                self.echo_rate.count();
            }
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
                self.echo_marks.insert(key.clone(), Fingerprint::of(&key));
            }
            batch.push((key, state));
        }
        self.watch_echo_rate();
        self.publish(batch, false);
        self.flush_problems();
    }

    /// Annotates held keys and sends what changed. Holder PIDs come only
    /// from a `/proc/locks` read made AFTER the probe: when the rate limit
    /// forbids a read now, held keys go out without holders and are
    /// annotated by the next allowed read (an older read could still show a
    /// dead holder of the same inode).
    pub(super) fn publish(&mut self, mut batch: Vec<(LockKey, KeyState)>, force_index: bool) {
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
    pub(super) fn keep_holders_if_same_claim(&self, key: &LockKey, state: &mut KeyState) {
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

    pub(super) fn update(&mut self, key: LockKey, state: KeyState, at: SystemTime) {
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

    /// Shows a sustained rate of the engine's own echo in its health (and
    /// takes it back once the rate falls).
    pub(super) fn watch_echo_rate(&mut self) {
        if !self.echo_rate.roll() {
            return;
        }
        let per_second = self.echo_rate.last_second;
        match (&self.health, per_second >= ECHO_ALARM_PER_SECOND) {
            (Some(WatcherHealth::Watching), true) => {
                self.set_health(WatcherHealth::SelfInflicted { per_second })
            }
            (Some(WatcherHealth::SelfInflicted { .. }), false) => {
                self.set_health(WatcherHealth::Watching)
            }
            _ => {}
        }
    }

    pub(super) fn remove(&mut self, key: &LockKey) {
        self.echo_marks.remove(key);
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
}
