//! Inference's judgement of changed claims: gathered for
//! [`COALESCE`](crate::engine::run::COALESCE), then answered in the
//! engine's mode — lock-free: all judged from one `/proc/locks` read off
//! the loop, except a key whose holder's fdinfo shows it still holds it
//! (kept, or confirmed after a close); passive or acquire: probed one by
//! one, passively when the change is the engine's own echo or includes a
//! close. Held states are annotated from a `/proc/locks` read made after
//! the probe, and only differences are sent.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::Ordering;
use std::time::SystemTime;

use tokio::time::Instant;

use super::Inference;
use super::echo::{ECHO_ALARM_PER_SECOND, Fingerprint};
use super::lookup::Observed;
use super::{CLOSE_CONFIRMS, Confirming};
use crate::disk::LockKey;
use crate::engine::WatcherHealth;
use crate::engine::run::judging::Judging;
use crate::engine::trace::Stage;
use crate::liveness::fdinfo::HeldFiles;
use crate::liveness::probe::IN_FLIGHT_AFTER;
use crate::liveness::verify::claim_files;
use crate::liveness::{HoldersNote, KeyState, Liveness, ProbeMode};

/// True when one of `holders` (alive, verified) still shows a flock on
/// one of `files` in its fdinfo (read once per PID per batch, kept in
/// `holders_now`): it holds the claim now.
fn holds_still(
    holders: &[crate::liveness::ProcessInfo],
    files: &[crate::liveness::proc_locks::FileId],
    holders_now: &mut HashMap<u32, HeldFiles>,
) -> bool {
    holders
        .iter()
        .filter(|holder| holder.alive && !holder.unverified)
        .any(|holder| {
            holders_now
                .entry(holder.pid)
                .or_insert_with(|| HeldFiles::of(holder.pid))
                .holds_any(files)
        })
}

impl Inference {
    /// Probes changed claims (their gates are lock files): in the
    /// engine's mode, but passively when the change is the engine's own
    /// echo (the files are as its last acquire
    /// probe left them, see [`super::echo`]) or includes a close (someone
    /// released, or another monitor's probe ended: an acquire probe then
    /// would only write events for every other monitor). In the lock-free
    /// mode the whole batch is judged from one `/proc/locks` read, off the
    /// loop ([`Self::judge_lock_free`]).
    pub(in crate::engine::run) async fn infer_batch(
        &mut self,
        judging: &mut Judging<'_>,
        keys: Vec<LockKey>,
    ) {
        let mut batch = Vec::with_capacity(keys.len());
        let mut judge = Vec::new();
        let mut holders_now = HashMap::new();
        let lock_free = judging.config.probe.reads_lock_table();
        for key in keys {
            let closed = self.batch.closed.remove(&key);
            let written = self.batch.written.remove(&key);
            if lock_free {
                let settled = !written
                    && (self.confirmed_by_holder(judging, &key, &mut holders_now)
                        || closed && self.held_as_shown(judging, &key, &mut holders_now));
                if !settled {
                    judge.push((key, closed));
                }
                continue;
            }
            let echo = self.echo.marks.get(&key) == Some(&Fingerprint::of(&key));
            if echo {
                self.echo.rate.count();
            }
            let mode = if echo || closed {
                ProbeMode::Passive
            } else {
                judging.config.probe
            };
            judging.trace(&key, Stage::ProbeStart);
            let probed = judging.prober.probe_without_waiting(&key, mode).await;
            judging.view.stats.probes.fetch_add(1, Ordering::Relaxed);
            judging.sweep_touched.touch(&key);
            if mode.writes() {
                self.echo.marks.insert(key.clone(), Fingerprint::of(&key));
            }
            if let Some(state) = self.answered(judging, &key, probed, closed) {
                batch.push((key, state));
            }
        }
        self.watch_echo_rate(judging);
        if !judge.is_empty() {
            self.judge_lock_free(judging, judge);
        }
        let at = SystemTime::now();
        let batch = batch
            .into_iter()
            .map(|(key, state)| (key, state, at))
            .collect();
        self.publish(judging, batch);
    }

    /// The lock-free fast path for a key shown held whose only changes
    /// are closes (a holder letting go, or dying, closes its files;
    /// another process's probe or a contender giving up closes theirs):
    /// when one of its verified holders' fdinfo still shows the lock, it
    /// is still held by that holder — nothing changed, and no
    /// `/proc/locks` read is needed. True then. False (read it) otherwise:
    /// the holder that let go may have a successor already (a contender
    /// blocked in `wait_acquire` takes the lock the moment it is dropped,
    /// with no event until it writes), which only a read names. The fd of
    /// a closed file leaves its process's table before the close event is
    /// made, so a holder that let go never shows the lock here, even while
    /// the kernel still lists it in `/proc/locks`. `holders_now` keeps
    /// each PID's fdinfo for the batch.
    fn held_as_shown(
        &mut self,
        judging: &mut Judging<'_>,
        key: &LockKey,
        holders_now: &mut HashMap<u32, HeldFiles>,
    ) -> bool {
        let Some(state) = judging.view.states.get(key) else {
            return false;
        };
        if !matches!(state.liveness, Liveness::Live | Liveness::Own) {
            return false;
        }
        let liveness = state.liveness;
        if !holds_still(&state.holders, &claim_files(key), holders_now) {
            return false;
        }
        self.looked_by_fdinfo(judging, key, liveness);
        true
    }

    /// Counts and traces a look at `key` answered from a holder's fdinfo
    /// (`liveness`), no `/proc/locks` read: a probe like any other for the
    /// stats, the trace and the sweep merge.
    fn looked_by_fdinfo(&mut self, judging: &mut Judging<'_>, key: &LockKey, liveness: Liveness) {
        judging.view.stats.probes.fetch_add(1, Ordering::Relaxed);
        judging.trace(key, Stage::ProbeStart);
        judging.trace(key, Stage::Probed(liveness));
        judging.sweep_touched.touch(key);
    }

    /// The lock-free confirmation of a key held back after a close
    /// ([`Self::confirm_after_close`]), looked at again (a coalescing
    /// window later, closes since or not): when a verified holder of the
    /// held state found then still shows the lock in its fdinfo, that
    /// look agrees — it held the claim then and holds it now, longer than
    /// another monitor's momentary probe does, and a holder that let go
    /// before the close event never shows it (its fd left its table
    /// first). The state is sent with no `/proc/locks` read: a read can
    /// cost a hundred milliseconds on a machine with thousands of locks,
    /// and with closes coming all the time (every contender's failed
    /// try makes one) a hold shorter than a few of them was never named.
    /// True when sent.
    fn confirmed_by_holder(
        &mut self,
        judging: &mut Judging<'_>,
        key: &LockKey,
        holders_now: &mut HashMap<u32, HeldFiles>,
    ) -> bool {
        let Some(confirming) = self.confirming.get(key) else {
            return false;
        };
        if !holds_still(&confirming.state.holders, &claim_files(key), holders_now) {
            return false;
        }
        let Some(Confirming { state, .. }) = self.confirming.remove(key) else {
            return false;
        };
        self.lookups.touch(key);
        self.looked_by_fdinfo(judging, key, state.liveness);
        self.settle(judging, key.clone(), state, SystemTime::now(), true);
        true
    }

    /// A probe's answer for `key` (`None`: found in flight), or `None`
    /// when the key is to be looked at again after the coalescing window
    /// (marked), while the rest of the batch goes on: a claim in flight
    /// until it settles ([`Self::settle_in_flight`]), a held one right
    /// after a close until a look confirms it ([`Self::confirm_after_close`]).
    pub(in crate::engine::run) fn answered(
        &mut self,
        judging: &mut Judging<'_>,
        key: &LockKey,
        probed: Option<KeyState>,
        closed: bool,
    ) -> Option<KeyState> {
        let Some(state) = self.settle_in_flight(key, probed) else {
            judging.trace(key, Stage::Probed(Liveness::InFlight));
            self.batch.mark(key.clone());
            return None;
        };
        judging.trace(key, Stage::Probed(state.liveness));
        (!self.confirm_after_close(judging, key, &state, closed)).then_some(state)
    }

    /// The close confirmation: true (and the key marked to be looked at
    /// again) when `state` is held and the key's changes included a close
    /// (`closed`) — the kernel queues the close event before it drops the
    /// closed file's locks, so a look right after it can still find the
    /// lock of a holder that just let go, or the momentary lock of
    /// another monitor's probe. The held state is sent once a look made
    /// with no close since agrees, or after [`CLOSE_CONFIRMS`] looks if
    /// closes keep coming (then it stays held through all of them).
    pub(in crate::engine::run) fn confirm_after_close(
        &mut self,
        judging: &mut Judging<'_>,
        key: &LockKey,
        state: &KeyState,
        closed: bool,
    ) -> bool {
        if !state.liveness.is_held() || !closed {
            self.confirming.remove(key);
            return false;
        }
        let confirming = self
            .confirming
            .entry(key.clone())
            .or_insert_with(|| Confirming {
                looks: 0,
                state: state.clone(),
            });
        confirming.looks += 1;
        confirming.state = state.clone();
        if confirming.looks > CLOSE_CONFIRMS {
            self.confirming.remove(key);
            return false;
        }
        judging.trace(key, Stage::Deferred);
        self.batch.mark(key.clone());
        true
    }

    /// A probe's answer, or `None` to look again: a claim found in flight
    /// (gate locked, announce not) is re-probed until it settles, and is
    /// `InFlight` once it has stayed so for [`IN_FLIGHT_AFTER`] since it
    /// was first found — what a probe waiting in place would answer, but
    /// without holding up every change behind it for that long.
    fn settle_in_flight(&mut self, key: &LockKey, probed: Option<KeyState>) -> Option<KeyState> {
        let in_flight_since = &mut self.in_flight_since;
        if let Some(state) = probed {
            in_flight_since.remove(key);
            return Some(state);
        }
        let since = *in_flight_since
            .entry(key.clone())
            .or_insert_with(Instant::now);
        if since.elapsed() < IN_FLIGHT_AFTER {
            return None;
        }
        in_flight_since.remove(key);
        Some(KeyState::bare(Liveness::InFlight))
    }

    /// Sends what a batch of probes changed. Holder PIDs come only from a
    /// `/proc/locks` read made AFTER the probe (an older read could still
    /// show a dead holder of the same inode), by a lookup off the loop
    /// ([`super::lookup`]): a held state keeps the holders of the same
    /// claim until it answers (rechecked then), or waits for it, unsent —
    /// a held state goes out with its holders, or with the reason it has
    /// none ([`HoldersNote`]), never as "held by nobody" first and named
    /// later. A state that is not held is sent at once. A lookup also
    /// takes every held state still waiting for one: under a steady stream
    /// of batches, each lookup the rate limit allows is started by a
    /// batch, so waiting for one of their own could starve them for as
    /// long as the stream lasts.
    pub(in crate::engine::run) fn publish(
        &mut self,
        judging: &mut Judging<'_>,
        batch: Vec<Observed>,
    ) {
        for (key, _, _) in &batch {
            self.lookups.touch(key);
        }
        let any_held = batch.iter().any(|(_, state, _)| state.liveness.is_held());
        if (any_held || self.waiting()) && self.lookups.may_start(Instant::now()) {
            let newer: HashSet<LockKey> = batch.iter().map(|(key, _, _)| key.clone()).collect();
            let mut lookup = batch.clone();
            lookup.extend(self.waiting_states(judging, &newer));
            self.start_lookup(judging, lookup, Vec::new());
        }
        for (key, state, at) in batch {
            self.settle(judging, key, state, at, false);
        }
    }

    /// Sends one probed state, or holds it back until its holders are known.
    pub(in crate::engine::run) fn settle(
        &mut self,
        judging: &mut Judging<'_>,
        key: LockKey,
        mut state: KeyState,
        at: SystemTime,
        annotated: bool,
    ) {
        if !state.liveness.is_held() {
            self.held_waits.recheck.remove(&key);
            if let Some((mut spell, seen)) = self.held_waits.deferred.remove(&key) {
                // The hold was seen; its holder was never read: say so.
                spell.holders_note = Some(HoldersNote::ReleasedBeforeLookup);
                judging.update(key.clone(), spell, seen);
            }
            return judging.update(key, state, at);
        }
        if annotated {
            self.held_waits.deferred.remove(&key);
            if state.holders.is_empty() {
                state.holders_note.get_or_insert(HoldersNote::NotVisible);
            }
            return judging.update(key, state, at);
        }
        self.keep_holders_if_same_claim(judging, &key, &mut state);
        if state.holders.is_empty() {
            judging.trace(&key, Stage::Deferred);
            {
                let first_seen = self
                    .held_waits
                    .deferred
                    .get(&key)
                    .map_or(at, |(_, seen)| *seen);
                self.held_waits.deferred.insert(key, (state, first_seen));
            }
        } else {
            {
                self.held_waits.recheck.insert(key.clone());
            }
            judging.update(key, state, at);
        }
    }

    /// While no fresh `/proc/locks` read is allowed: if the key was already
    /// held and its announce was not rewritten since (same "held since"),
    /// the claim is the same one, so its known holders still stand — no
    /// flicker to "held by nobody" on an echo re-probe. A re-taken claim
    /// (new announce mtime) keeps no PID: the next read names its holder —
    /// and since the key is re-annotated by that read either way, a re-take
    /// within one mtime tick shows the old PID for at most one interval.
    pub(in crate::engine::run) fn keep_holders_if_same_claim(
        &self,
        judging: &Judging<'_>,
        key: &LockKey,
        state: &mut KeyState,
    ) {
        let Some(previous) = judging.view.states.get(key) else {
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

    /// Shows a sustained rate of the engine's own echo in its health (and
    /// takes it back once the rate falls).
    pub(in crate::engine::run) fn watch_echo_rate(&mut self, judging: &mut Judging<'_>) {
        let echo_rate = &mut self.echo.rate;
        if !echo_rate.roll() {
            return;
        }
        let per_second = echo_rate.last_second;
        match (&judging.view.health, per_second >= ECHO_ALARM_PER_SECOND) {
            (Some(WatcherHealth::Watching), true) => judging
                .view
                .set_health(WatcherHealth::SelfInflicted { per_second }),
            (Some(WatcherHealth::SelfInflicted { .. }), false) => {
                judging.view.set_health(WatcherHealth::Watching)
            }
            _ => {}
        }
    }
}
