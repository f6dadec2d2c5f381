//! Event-driven probing: changed keys are gathered for [`COALESCE`],
//! probed once (acquire mode unless the key is in its echo window), then
//! annotated from a `/proc/locks` read made after the probe, and only
//! differences are sent.

use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::time::SystemTime;

use tokio::time::Instant;

use super::echo::{ECHO_ALARM_PER_SECOND, Fingerprint};
use super::{COALESCE, Engine, INDEX_MIN_INTERVAL};
use crate::disk::LockKey;
use crate::engine::trace::Stage;
use crate::engine::{Delta, WatcherHealth};
use crate::liveness::annotate::annotate_with;
use crate::liveness::probe::IN_FLIGHT_AFTER;
use crate::liveness::proc_locks::LockIndex;
use crate::liveness::{HoldersNote, KeyState, Liveness, ProbeMode};

impl Engine {
    pub(super) fn mark(&mut self, key: LockKey) {
        self.pending.insert(key);
        if self.batch_due.is_none() {
            self.batch_due = Some(Instant::now() + COALESCE);
        }
    }

    pub(super) async fn on_timers(&mut self) {
        let now = Instant::now();
        let from = self.clock();
        while self.new_dirs.first().is_some_and(|(due, _)| *due <= now) {
            let (_, dir) = self.new_dirs.remove(0);
            self.scan_new_dir(dir).await;
        }
        self.flush_problems();
        self.span("scan new dirs", from, 0);
        if self.batch_due.is_some_and(|due| due <= now) {
            let from = self.clock();
            self.batch_due = None;
            let keys: Vec<LockKey> = self.pending.drain().collect();
            let items = keys.len();
            self.probe_batch(keys).await;
            self.span("probe batch", from, items);
        }
        if self.waiting() && self.index_ready(now) {
            let from = self.clock();
            let batch = self.take_waiting(&HashSet::new());
            let items = batch.len();
            self.publish(batch, true);
            self.span("name deferred holders", from, items);
        }
        if self.next_sweep <= now {
            let from = self.clock();
            self.start_background_sweep();
            self.span("start sweep", from, 0);
        }
        if self.holder_refresh_due().is_some_and(|due| due <= now) {
            let from = self.clock();
            let items = self.held.len();
            self.refresh_holders();
            self.span("refresh holders", from, items);
        }
        if self.opens_due.is_some_and(|due| due <= now) && self.index_ready(now) {
            let from = self.clock();
            let items = self.look_at_opened_files(now);
            self.span("look at opened files", from, items);
        }
        self.watch_echo_rate();
    }

    /// Whether held states wait for a `/proc/locks` read (deferred, or
    /// sent with kept holders to confirm).
    fn waiting(&self) -> bool {
        !self.deferred.is_empty() || !self.recheck.is_empty()
    }

    /// The held states waiting for a `/proc/locks` read (except the keys
    /// in `skip`, which a newer probe result stands for), made ready to be
    /// annotated afresh.
    fn take_waiting(&mut self, skip: &HashSet<LockKey>) -> Vec<(LockKey, KeyState, SystemTime)> {
        let deferred: Vec<LockKey> = self
            .deferred
            .keys()
            .filter(|key| !skip.contains(*key))
            .cloned()
            .collect();
        let mut batch: Vec<(LockKey, KeyState, SystemTime)> = deferred
            .into_iter()
            .filter_map(|key| {
                let (state, at) = self.deferred.remove(&key)?;
                Some((key, state, at))
            })
            .collect();
        let at = SystemTime::now();
        let recheck: Vec<LockKey> = self
            .recheck
            .iter()
            .filter(|key| !skip.contains(*key))
            .cloned()
            .collect();
        for key in recheck {
            self.recheck.remove(&key);
            if let Some(state) = self.states.get(&key) {
                batch.push((key, state.clone(), at));
            }
        }
        for (_, state, _) in &mut batch {
            // Annotation decides Own, the holders and the note afresh.
            if state.liveness == Liveness::Own {
                state.liveness = Liveness::Live;
            }
            state.holders.clear();
            state.waiters.clear();
            state.watchers.clear();
            state.holders_note = None;
        }
        batch
    }

    pub(super) fn index_ready(&self, now: Instant) -> bool {
        self.index
            .as_ref()
            .is_none_or(|(at, _)| now.duration_since(*at) >= INDEX_MIN_INTERVAL)
    }

    /// When the rate limit next allows a `/proc/locks` read (now, if it
    /// allows one now).
    pub(super) fn index_ready_at(&self) -> Instant {
        self.index
            .as_ref()
            .map_or_else(Instant::now, |(at, _)| *at + INDEX_MIN_INTERVAL)
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
            self.trace(&key, Stage::ProbeStart);
            let probed = self.prober.probe_without_waiting(&key, mode).await;
            self.stats.probes.fetch_add(1, Ordering::Relaxed);
            if let Some(touched) = &mut self.sweep_touched {
                touched.insert(key.clone());
            }
            if mode.writes() {
                self.echo_marks.insert(key.clone(), Fingerprint::of(&key));
            }
            let Some(state) = self.settle_in_flight(&key, probed) else {
                // In flight: looked at again after the coalescing window,
                // while the rest of the batch goes on.
                self.trace(&key, Stage::Probed(Liveness::InFlight));
                self.mark(key);
                continue;
            };
            self.trace(&key, Stage::Probed(state.liveness));
            batch.push((key, state));
        }
        self.watch_echo_rate();
        let at = SystemTime::now();
        let batch = batch
            .into_iter()
            .map(|(key, state)| (key, state, at))
            .collect();
        self.publish(batch, false);
        self.flush_problems();
    }

    /// A probe's answer, or `None` to look again: a claim found in flight
    /// (gate locked, announce not) is re-probed until it settles, and is
    /// `InFlight` once it has stayed so for [`IN_FLIGHT_AFTER`] since it
    /// was first found — what a probe waiting in place would answer, but
    /// without holding up every change behind it for that long.
    fn settle_in_flight(&mut self, key: &LockKey, probed: Option<KeyState>) -> Option<KeyState> {
        if let Some(state) = probed {
            self.in_flight_since.remove(key);
            return Some(state);
        }
        let since = *self
            .in_flight_since
            .entry(key.clone())
            .or_insert_with(Instant::now);
        if since.elapsed() < IN_FLIGHT_AFTER {
            return None;
        }
        self.in_flight_since.remove(key);
        Some(KeyState::bare(Liveness::InFlight))
    }

    /// Annotates held keys and sends what changed. Holder PIDs come only
    /// from a `/proc/locks` read made AFTER the probe (an older read could
    /// still show a dead holder of the same inode). When the rate limit
    /// forbids a read now, a held key keeps the holders of the same claim
    /// (rechecked at the next read) or waits for that read, unsent: a held
    /// state goes out with its holders, or with the reason it has none
    /// ([`HoldersNote`]), never as "held by nobody" first and named later.
    /// A read also settles every held state still waiting for one: under
    /// a steady stream of batches, each read the rate limit allows is
    /// taken by a batch, so waiting for a read of their own (the timer)
    /// could starve them for as long as the stream lasts.
    pub(super) fn publish(&mut self, mut batch: Vec<(LockKey, KeyState, SystemTime)>, force: bool) {
        let any_held = batch.iter().any(|(_, state, _)| state.liveness.is_held());
        let now = Instant::now();
        let annotated = (any_held || self.waiting()) && (force || self.index_ready(now));
        if annotated {
            let newer: HashSet<LockKey> = batch.iter().map(|(key, _, _)| key.clone()).collect();
            batch.extend(self.take_waiting(&newer));
            self.stats.index_reads.fetch_add(1, Ordering::Relaxed);
            let index = LockIndex::read().unwrap_or_default();
            for (key, _, _) in &batch {
                self.trace(key, Stage::Indexed);
            }
            let mut pairs: Vec<(LockKey, KeyState)> = batch
                .iter_mut()
                .map(|(key, state, _)| {
                    (
                        key.clone(),
                        std::mem::replace(state, KeyState::bare(Liveness::Free)),
                    )
                })
                .collect();
            let stats = self.stats.clone();
            annotate_with(&mut pairs, &index, &self.own_pids, &mut || {
                stats.index_reads.fetch_add(1, Ordering::Relaxed);
                LockIndex::read().unwrap_or_default()
            });
            for ((_, state, _), (_, annotated_state)) in batch.iter_mut().zip(pairs) {
                *state = annotated_state;
            }
            self.index = Some((now, index));
        }
        for (key, state, at) in batch {
            self.settle(key, state, at, annotated);
        }
    }

    /// Sends one probed state, or holds it back until its holders are known.
    fn settle(&mut self, key: LockKey, mut state: KeyState, at: SystemTime, annotated: bool) {
        if !state.liveness.is_held() {
            self.recheck.remove(&key);
            if let Some((mut spell, seen)) = self.deferred.remove(&key) {
                // The hold was seen; its holder was never read: say so.
                spell.holders_note = Some(HoldersNote::ReleasedBeforeLookup);
                self.update(key.clone(), spell, seen);
            }
            return self.update(key, state, at);
        }
        if annotated {
            self.deferred.remove(&key);
            if state.holders.is_empty() {
                state.holders_note = Some(HoldersNote::NotVisible);
            }
            return self.update(key, state, at);
        }
        self.keep_holders_if_same_claim(&key, &mut state);
        if state.holders.is_empty() {
            self.trace(&key, Stage::Deferred);
            let first_seen = self.deferred.get(&key).map_or(at, |(_, seen)| *seen);
            self.deferred.insert(key, (state, first_seen));
        } else {
            self.recheck.insert(key.clone());
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
            state.watchers = previous.watchers.clone();
            state.since = previous.since;
        }
    }

    pub(super) fn update(&mut self, key: LockKey, mut state: KeyState, at: SystemTime) {
        // A fresh probe's holders carry no CPU history: the refresh's is
        // theirs (so a re-probe never flips a holder's idleness).
        let idle_after = self.config.idle_after;
        self.cpu
            .stamp(&mut state.holders, SystemTime::now(), idle_after);
        let previous = self.states.get(&key);
        if previous == Some(&state) {
            return;
        }
        let previous = previous.map(|s| s.liveness);
        if state.liveness.is_held() {
            if self.held.insert(key.clone()) {
                self.share_held(&key, true);
            }
        } else if self.held.remove(&key) {
            self.share_held(&key, false);
        }
        self.states.insert(key.clone(), state.clone());
        self.trace(&key, Stage::Sent(state.liveness));
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

    /// Keeps the watcher thread's copy of held keys' files in step.
    fn share_held(&self, key: &LockKey, held: bool) {
        self.filter.set_held(key, held);
    }

    pub(super) fn remove(&mut self, key: &LockKey) {
        if self.held.remove(key) {
            self.share_held(key, false);
        }
        self.echo_marks.remove(key);
        self.in_flight_since.remove(key);
        if let Some(touched) = &mut self.sweep_touched {
            touched.insert(key.clone());
        }
        self.pending.remove(key);
        self.deferred.remove(key);
        self.recheck.remove(key);
        if let Some(state) = self.states.remove(key) {
            self.send(Delta::Removed {
                key: key.clone(),
                previous: state.liveness,
                at: SystemTime::now(),
            });
        }
    }
}
