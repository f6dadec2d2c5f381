//! `/proc/locks` lookups, off the loop. One read of `/proc/locks` (it
//! waits for an RCU grace period in the kernel before it reads a line:
//! 17–30 ms each on a loaded machine with the engine bench's 2,000 locks,
//! mostly asleep — see `liveness::annotate::annotate_reading`) and the
//! work that needs it — naming held
//! keys' holders (with their `/proc/<pid>/fdinfo` verification), and
//! finding which opened claim files someone locked — run on a
//! blocking-pool thread. The loop goes on taking changes meanwhile (a kill
//! is seen while a lookup runs) and merges the answer when it comes.
//!
//! Invariants:
//! - at most one lookup runs at a time, and one starts at most once per
//!   [`INDEX_MIN_INTERVAL`](crate::engine::run::INDEX_MIN_INTERVAL);
//! - a key probed, swept or removed after a lookup began keeps that newer
//!   answer: the lookup's is dropped, and the key, still waiting, is
//!   looked up by the next one — unless the newer probe found the same
//!   claim held and waits for its holders: then the lookup names them;
//! - a held state still goes out with its holders, or with the reason it
//!   has none ([`crate::liveness::HoldersNote`]), never as "held by
//!   nobody" first: until its lookup answers it waits, unsent (or keeps
//!   the holders of the same claim, see `keep_holders_if_same_claim`);
//! - a lookup begun before the view was thrown away is ignored.

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::SystemTime;

use tokio::sync::mpsc::UnboundedSender;
use tokio::time::Instant;

use super::Inference;
use crate::disk::LockKey;
use crate::engine::EngineStats;
use crate::engine::fs_events::claim_of;
use crate::engine::run::judging::Judging;
use crate::engine::trace::{self, Stage, Trace};
use crate::liveness::annotate::{Recheck, annotate_reading, annotate_with};
use crate::liveness::lock_free;
use crate::liveness::proc_locks::{FileId, LockIndex};
use crate::liveness::{KeyState, Liveness};

/// The shortest time between the starts of two lookups that judge
/// changed keys lock-free (their read IS the probe, so it cannot wait
/// [`INDEX_MIN_INTERVAL`](crate::engine::run::INDEX_MIN_INTERVAL)): each read makes
/// every lock call on the machine wait while it runs, so under a steady
/// churn reads are spaced, and the changes of the interval share one.
pub(crate) const JUDGE_MIN_INTERVAL: std::time::Duration = std::time::Duration::from_millis(5);

/// The judging reads' share of time, as its inverse: over any stretch
/// longer than [`JUDGE_BURST`], the judging reads' CPU time is at most
/// 1/this of it (so a monitor keeps the kernel's file-lock rwsem for at
/// most about a tenth of the time under a steady churn, however many
/// locks the machine holds: 2,000 locks cost about 1–2 ms a read, so
/// reads are then 10–20 ms apart; a few dozen cost 0.1 ms, and
/// [`JUDGE_MIN_INTERVAL`] applies).
pub(crate) const JUDGE_READ_SHARE_INVERSE: u32 = 10;

/// How far ahead of its budget a judging read may start: a lone change
/// after a quiet spell (a kill) is read at once, even when the last
/// read was costly; only a steady stream of reads is held to the share.
/// A bucket: each read adds its CPU time × [`JUDGE_READ_SHARE_INVERSE`],
/// time drains it, and a read may start while it holds at most this.
pub(crate) const JUDGE_BURST: std::time::Duration = std::time::Duration::from_millis(100);

/// The CPU time this thread has used (`CLOCK_THREAD_CPUTIME_ID`).
fn thread_cpu() -> std::time::Duration {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `now` is a valid timespec for the call to fill.
    if unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut now) } != 0 {
        return std::time::Duration::ZERO;
    }
    std::time::Duration::new(now.tv_sec as u64, now.tv_nsec as u32)
}

/// A probed state with the time it was observed.
pub(in crate::engine::run) type Observed = (LockKey, KeyState, SystemTime);

/// What one lookup found.
pub(in crate::engine::run) struct LookupOutcome {
    /// The engine's generation when it began.
    generation: u64,
    /// The looked-up states, annotated (holders, waiters, shared locks).
    annotated: Vec<Observed>,
    /// The keys judged lock-free from the lookup's read, annotated from
    /// it, each with whether its changes included a close.
    judged: Vec<(Observed, bool)>,
    /// The CPU time (this thread's) of the judging read, when it judged.
    read_cpu: Option<std::time::Duration>,
    /// The opened claim files that someone had locked.
    locked: Vec<PathBuf>,
}

/// Everything one lookup needs; it touches no engine state.
struct LookupJob {
    generation: u64,
    batch: Vec<Observed>,
    /// Keys to judge lock-free from this lookup's read (with whether
    /// their changes included a close).
    judge: Vec<(LockKey, bool)>,
    /// How a claim missing from a torn read is found still held: never
    /// by a shared-lock probe when the engine runs lock-free.
    recheck: Recheck,
    opened: Vec<PathBuf>,
    own_pids: HashSet<u32>,
    stats: Arc<EngineStats>,
    trace: Option<Arc<Trace>>,
}

impl LookupJob {
    /// One `/proc/locks` read (and the rereads a torn read or a dead
    /// caller needs), the annotation of the batch, the opened files' check.
    fn run(self) -> LookupOutcome {
        let LookupJob {
            generation,
            batch,
            judge,
            recheck,
            opened,
            own_pids,
            stats,
            trace,
        } = self;
        let read = || {
            stats.index_reads.fetch_add(1, Ordering::Relaxed);
            LockIndex::read().unwrap_or_default()
        };
        let (mut pairs, seen): (Vec<(LockKey, KeyState)>, Vec<SystemTime>) = batch
            .into_iter()
            .map(|(key, state, at)| ((key, state), at))
            .unzip();
        let looked_up = pairs.len();
        let mut read_cpu = None;
        let (index, closes) = if judge.is_empty() {
            let index = annotate_reading(&mut pairs, &own_pids, &read, recheck);
            (index, Vec::new())
        } else {
            // The read is the probe: judged first, then annotated from
            // the same read, with the states waiting for holders.
            let cpu = thread_cpu();
            let index = LockIndex::read_merged(&read);
            read_cpu = Some(thread_cpu().saturating_sub(cpu));
            let (keys, closes): (Vec<LockKey>, Vec<bool>) = judge.into_iter().unzip();
            pairs.extend(lock_free::judged(keys, &index));
            annotate_with(&mut pairs, &index, &own_pids, &mut || read(), recheck);
            (index, closes)
        };
        for (key, _) in &pairs {
            trace::note(&trace, key, Stage::Indexed);
        }
        let judged_at = SystemTime::now();
        let judged = pairs
            .split_off(looked_up)
            .into_iter()
            .zip(closes)
            .map(|((key, state), closed)| ((key, state, judged_at), closed))
            .collect();
        let annotated = pairs
            .into_iter()
            .zip(seen)
            .map(|((key, state), at)| (key, state, at))
            .collect();
        let locked = opened
            .into_iter()
            .filter(|path| {
                FileId::of(path).is_ok_and(|file| {
                    index
                        .get(&file)
                        .is_some_and(|locks| !locks.holders.is_empty() || !locks.shared.is_empty())
                })
            })
            .collect();
        LookupOutcome {
            generation,
            annotated,
            judged,
            read_cpu,
            locked,
        }
    }
}

/// The loop's side of the lookups: whether one runs, what changed since
/// it began, and where answers arrive.
#[derive(Default)]
pub(in crate::engine::run) struct Lookups {
    /// While a lookup runs: the keys given a newer answer since it began.
    touched: crate::engine::run::newer::Newer,
    /// When the last lookup began (the rate limit).
    last_start: Option<Instant>,
    /// When the judging reads' budget is spent down to nothing (the
    /// bucket of [`JUDGE_BURST`]); `None` before the first.
    budget_free_at: Option<Instant>,
}

impl Lookups {
    /// Whether a lookup runs now.
    pub(in crate::engine::run) fn running(&self) -> bool {
        self.touched.active()
    }

    /// Notes that `key` has an answer newer than a running lookup's.
    pub(in crate::engine::run) fn touch(&mut self, key: &LockKey) {
        self.touched.touch(key);
    }

    /// When the rate limit next allows a lookup to start (now, if it
    /// allows one now).
    pub(in crate::engine::run) fn ready_at(&self) -> Instant {
        self.last_start.map_or_else(Instant::now, |at| {
            at + crate::engine::run::INDEX_MIN_INTERVAL
        })
    }

    /// Whether a lookup may start at `now`: none runs, and the rate limit
    /// allows it.
    pub(in crate::engine::run) fn may_start(&self, now: Instant) -> bool {
        !self.running()
            && self
                .last_start
                .is_none_or(|at| now >= at + crate::engine::run::INDEX_MIN_INTERVAL)
    }

    /// Whether a lookup that judges changed keys lock-free may start at
    /// `now`: none runs, the last began [`JUDGE_MIN_INTERVAL`] ago, and
    /// the read budget allows it ([`JUDGE_BURST`]).
    pub(in crate::engine::run) fn may_judge(&self, now: Instant) -> bool {
        !self.running() && self.judge_allowed_at().is_none_or(|at| now >= at)
    }

    /// When a judging lookup may next start, if none runs.
    pub(in crate::engine::run) fn judge_ready_at(&self) -> Instant {
        self.judge_allowed_at().unwrap_or_else(Instant::now)
    }

    /// The earliest time a judging read may start (if none runs):
    /// [`JUDGE_MIN_INTERVAL`] after the last start, and once the budget
    /// holds at most [`JUDGE_BURST`].
    fn judge_allowed_at(&self) -> Option<Instant> {
        let spaced = self.last_start.map(|at| at + JUDGE_MIN_INTERVAL);
        let budget = self
            .budget_free_at
            .map(|free| free.checked_sub(JUDGE_BURST).unwrap_or(free));
        spaced.max(budget)
    }

    /// Charges a judging read begun at the last start that took `cpu`.
    fn charge(&mut self, cpu: std::time::Duration) {
        let began = self.last_start.unwrap_or_else(Instant::now);
        let from = self.budget_free_at.map_or(began, |free| free.max(began));
        self.budget_free_at = Some(from + cpu * JUDGE_READ_SHARE_INVERSE);
    }
}

impl Inference {
    /// Starts a lookup of `batch` (annotated afresh) and of the opened
    /// claim files `opened`, on a blocking-pool thread; its outcome comes
    /// back through `lookup_results` ([`Self::apply_lookup`]).
    pub(in crate::engine::run) fn start_lookup(
        &mut self,
        judging: &mut Judging<'_>,
        batch: Vec<Observed>,
        opened: Vec<PathBuf>,
    ) {
        self.start_lookup_judging(judging, batch, Vec::new(), opened);
    }

    /// [`Self::start_lookup`], also judging the keys of `judge` lock-free
    /// from the lookup's read (each with whether its changes included a
    /// close).
    fn start_lookup_judging(
        &mut self,
        judging: &mut Judging<'_>,
        batch: Vec<Observed>,
        judge: Vec<(LockKey, bool)>,
        opened: Vec<PathBuf>,
    ) {
        self.lookups.touched.begin();
        self.lookups.last_start = Some(Instant::now());
        let tx: UnboundedSender<LookupOutcome> = self.lookup_results_tx.clone();
        let job = LookupJob {
            generation: judging.generation,
            batch,
            judge,
            recheck: if judging.config.probe.locks() {
                Recheck::SharedProbe
            } else {
                Recheck::ReadAgain
            },
            opened,
            own_pids: judging.own_pids.clone(),
            stats: judging.view.stats.clone(),
            trace: judging.config.trace.clone(),
        };
        tokio::task::spawn_blocking(move || {
            let _ = tx.send(job.run());
        });
    }

    /// Starts a lookup for what waits for one — held states not yet named
    /// or to confirm, and opened files once they settled — if the rate
    /// limit allows and anything waits.
    pub(in crate::engine::run) fn start_waiting_lookup(
        &mut self,
        judging: &mut Judging<'_>,
        now: Instant,
    ) {
        if !self.lookups.may_start(now) {
            return;
        }
        let opened = if self.opens.due.is_some_and(|due| due <= now) {
            self.opens.due = None;
            let held = std::mem::take(&mut self.opens.held);
            self.held_waits.recheck.extend(
                held.into_iter()
                    .filter(|key| judging.view.held.contains(key)),
            );
            judging.view.filter.take_opened().into_iter().collect()
        } else {
            Vec::new()
        };
        let batch = self.waiting_states(judging, &HashSet::new());
        if !batch.is_empty() || !opened.is_empty() {
            self.start_lookup(judging, batch, opened);
        }
    }

    /// Judges changed keys lock-free: one `/proc/locks` read, off the
    /// loop, names their liveness and their holders at once (with the
    /// held states that wait for a lookup). While a lookup runs, or while
    /// [`Lookups::may_judge`] says the reads' spacing or budget forbid
    /// one, the keys wait in the pending set: the next read takes them all.
    pub(in crate::engine::run) fn judge_lock_free(
        &mut self,
        judging: &mut Judging<'_>,
        keys: Vec<(LockKey, bool)>,
    ) {
        let now = Instant::now();
        if !self.lookups.may_judge(now) {
            for (key, closed) in keys {
                if closed {
                    self.batch.closed.insert(key.clone());
                }
                self.batch.pending.insert(key);
            }
            // A running lookup's answer wakes the loop (see apply_lookup).
            let lookups = &self.lookups;
            self.batch.due = (!lookups.running()).then(|| lookups.judge_ready_at());
            return;
        }
        judging
            .view
            .stats
            .probes
            .fetch_add(keys.len() as u64, Ordering::Relaxed);
        for (key, _) in &keys {
            judging.trace(key, Stage::ProbeStart);
            judging.sweep_touched.touch(key);
        }
        let newer: HashSet<LockKey> = keys.iter().map(|(key, _)| key.clone()).collect();
        let waiting = self.waiting_states(judging, &newer);
        self.start_lookup_judging(judging, waiting, keys, Vec::new());
    }

    /// Settles the keys a lookup judged lock-free: a claim in flight is
    /// looked at again (until [`crate::liveness::probe::IN_FLIGHT_AFTER`]),
    /// a held one right after a close is confirmed first
    /// ([`Self::confirm_after_close`]), the rest goes out annotated.
    fn settle_judged(
        &mut self,
        judging: &mut Judging<'_>,
        judged: Vec<(Observed, bool)>,
        touched: &HashSet<LockKey>,
    ) {
        for ((key, state, at), closed) in judged {
            if touched.contains(&key) {
                // Removed, or answered by a sweep, since the read began.
                continue;
            }
            let probed = (state.liveness != Liveness::InFlight).then_some(state);
            let Some(state) = self.answered(judging, &key, probed, closed) else {
                continue;
            };
            {
                self.held_waits.recheck.remove(&key);
            }
            self.settle(judging, key, state, at, true);
        }
        if !self.batch.pending.is_empty() {
            // Changes that came while the read ran: the next read — but a
            // key held back to confirm is looked at after the coalescing
            // window, from its holder's fdinfo, with no read to wait for.
            let now = Instant::now();
            let confirming = self
                .batch
                .pending
                .iter()
                .any(|key| self.confirming.contains_key(key));
            let due = if confirming {
                now + crate::engine::run::COALESCE
            } else {
                self.lookups.judge_ready_at().max(now)
            };
            self.batch.due = Some(due);
        }
    }

    /// Merges a lookup's answer: each state whose key got no newer answer
    /// since is settled as annotated; each opened file someone locked
    /// while the view does not show its key held is probed.
    pub(in crate::engine::run) fn apply_lookup(
        &mut self,
        judging: &mut Judging<'_>,
        outcome: LookupOutcome,
    ) -> usize {
        let touched = self.lookups.touched.end();
        if outcome.generation != judging.generation {
            return 0;
        }
        let items = outcome.annotated.len() + outcome.judged.len() + outcome.locked.len();
        if let Some(cpu) = outcome.read_cpu {
            self.lookups.charge(cpu);
        }
        self.settle_judged(judging, outcome.judged, &touched);
        for (key, state, at) in outcome.annotated {
            if touched.contains(&key) && !self.same_claim_still_waiting(&key, &state) {
                continue;
            }
            {
                self.held_waits.recheck.remove(&key);
            }
            self.settle(judging, key, state, at, true);
        }
        for path in outcome.locked {
            if let Some(key) = claim_of(judging.state_dir, &path)
                && !judging.view.held.contains(&key)
            {
                self.batch.mark(key);
            }
        }
        items
    }

    /// Whether a lookup's answer `state` for `key`, probed again since the
    /// lookup began, still stands: the newer probe found it held too and
    /// waits for its holders (deferred), and the claim is the same one
    /// (its announce not rewritten since: the rule of
    /// `keep_holders_if_same_claim`). Without this, a held key whose files
    /// keep making events (waiters, watchers) was probed again during
    /// every lookup, and no lookup ever named its holder: the chaos test
    /// caught a 280 ms hold never reported.
    fn same_claim_still_waiting(&self, key: &LockKey, state: &KeyState) -> bool {
        state.liveness.is_held()
            && state.liveness != Liveness::InFlight
            && self
                .held_waits
                .deferred
                .get(key)
                .is_some_and(|(waiting, _)| waiting.liveness.is_held())
            && state.since.is_some()
            && state.since == key.held_since()
    }

    /// The held states waiting for a lookup (deferred, or sent with kept
    /// holders to confirm), except the keys in `skip` (a newer probe
    /// result stands for them), made ready to be annotated afresh. They
    /// stay waiting until the lookup's answer settles them.
    pub(in crate::engine::run) fn waiting_states(
        &self,
        judging: &Judging<'_>,
        skip: &HashSet<LockKey>,
    ) -> Vec<Observed> {
        let at = SystemTime::now();
        let deferred = self
            .held_waits
            .deferred
            .iter()
            .filter(|(key, _)| !skip.contains(*key))
            .map(|(key, (state, seen))| (key.clone(), state.clone(), *seen));
        let recheck = self
            .held_waits
            .recheck
            .iter()
            .filter(|key| !skip.contains(*key) && !self.held_waits.deferred.contains_key(*key))
            .filter_map(|key| Some((key.clone(), judging.view.states.get(key)?.clone(), at)));
        deferred
            .chain(recheck)
            .map(|(key, mut state, seen)| {
                // Annotation decides Own, the holders and the note afresh.
                if state.liveness == Liveness::Own {
                    state.liveness = Liveness::Live;
                }
                state.holders.clear();
                state.waiters.clear();
                state.watchers.clear();
                state.holders_note = None;
                (key, state, seen)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use tokio::sync::mpsc;

    use super::*;
    use crate::context::Context;
    use crate::engine::run::Engine;
    use crate::engine::{Delta, EngineConfig};

    impl Engine {
        /// The inference's bookkeeping (these tests' engines infer).
        fn inference(&self) -> &super::super::Inference {
            self.source.inference().expect("the engine infers")
        }

        fn inference_mut(&mut self) -> &mut super::super::Inference {
            self.source.inference_mut().expect("the engine infers")
        }

        /// Inference's `publish`, as the engine lends it its judging.
        fn publish(&mut self, batch: Vec<Observed>) {
            let (source, mut judging) = self.split();
            let inference = source.inference_mut().expect("the engine infers");
            inference.publish(&mut judging, batch);
        }

        /// Inference's `apply_lookup`, as the engine lends it its judging.
        fn apply_lookup(&mut self, outcome: LookupOutcome) -> usize {
            let (source, mut judging) = self.split();
            let inference = source.inference_mut().expect("the engine infers");
            inference.apply_lookup(&mut judging, outcome)
        }
    }

    /// An engine (its loop not running) on a fresh state dir, the deltas it
    /// sends, and a claim `t` whose gate this process holds.
    fn engine_with_a_claim() -> (
        tempfile::TempDir,
        Engine,
        mpsc::Receiver<Delta>,
        LockKey,
        std::fs::File,
    ) {
        let tmp = tempfile::tempdir().unwrap();
        let tags = tmp.path().join("locks/agents/tags");
        std::fs::create_dir_all(&tags).unwrap();
        let key = LockKey::from_coord(tmp.path(), &tags, "t");
        let gate = std::fs::File::create(key.gate_path()).unwrap();
        gate.lock().unwrap();
        std::fs::write(key.announce_path(), b"1").unwrap();
        let (tx, rx) = mpsc::channel(64);
        let context = Context::new(tmp.path().to_path_buf());
        let engine = Engine::new(context, EngineConfig::default(), tx, Default::default());
        (tmp, engine, rx, key, gate)
    }

    fn observed(key: &LockKey, liveness: Liveness) -> Vec<Observed> {
        vec![(key.clone(), KeyState::bare(liveness), SystemTime::now())]
    }

    /// The key states sent so far, in order.
    fn sent(deltas: &mut mpsc::Receiver<Delta>, key: &LockKey) -> Vec<KeyState> {
        std::iter::from_fn(|| deltas.try_recv().ok())
            .filter_map(|delta| match delta {
                Delta::Key { key: k, state, .. } if &k == key => Some(state),
                _ => None,
            })
            .collect()
    }

    async fn next_answer(engine: &mut Engine) -> LookupOutcome {
        tokio::time::timeout(
            Duration::from_secs(10),
            engine.inference_mut().lookup_results.recv(),
        )
        .await
        .expect("a lookup answers")
        .expect("the channel is open")
    }

    /// A held probe result waits, unsent, for its lookup, which names the
    /// holder (this process: `Own`).
    #[tokio::test]
    async fn a_held_state_goes_out_once_its_lookup_names_the_holder() {
        let (_tmp, mut engine, mut deltas, key, _gate) = engine_with_a_claim();
        engine.publish(observed(&key, Liveness::Live));
        assert!(engine.inference().lookups.running());
        assert!(
            sent(&mut deltas, &key).is_empty(),
            "sent before it was named"
        );
        let answer = next_answer(&mut engine).await;
        engine.apply_lookup(answer);
        let states = sent(&mut deltas, &key);
        let me = std::process::id();
        assert!(
            matches!(&states[..], [state] if state.liveness == Liveness::Own
                && state.holders.iter().map(|p| p.pid).eq([me])),
            "{states:?}"
        );
        assert!(!engine.inference().waiting());
    }

    /// The key is released (probed free) while its lookup runs: the
    /// lookup's answer is older than that and is dropped — the key stays
    /// free, and the hold that was seen but never named says so.
    #[tokio::test]
    async fn an_answer_older_than_the_keys_last_probe_is_dropped() {
        let (_tmp, mut engine, mut deltas, key, gate) = engine_with_a_claim();
        engine.publish(observed(&key, Liveness::Live));
        assert!(engine.inference().lookups.running());
        drop(gate);
        engine.publish(observed(&key, Liveness::Free));
        let answer = next_answer(&mut engine).await;
        engine.apply_lookup(answer);
        let states = sent(&mut deltas, &key);
        let kinds: Vec<(Liveness, Option<crate::liveness::HoldersNote>)> = states
            .iter()
            .map(|state| (state.liveness, state.holders_note))
            .collect();
        assert_eq!(
            kinds,
            [
                (
                    Liveness::Live,
                    Some(crate::liveness::HoldersNote::ReleasedBeforeLookup)
                ),
                (Liveness::Free, None)
            ]
        );
        assert_eq!(
            engine.view.states.get(&key).unwrap().liveness,
            Liveness::Free
        );
    }

    /// A key probed held again while its lookup runs — the same claim, its
    /// files busy with events — is named by that lookup, not left waiting
    /// for one that no newer probe overtakes.
    #[tokio::test]
    async fn a_key_probed_held_again_during_its_lookup_is_named_by_it() {
        let (_tmp, mut engine, mut deltas, key, _gate) = engine_with_a_claim();
        engine.publish(observed(&key, Liveness::Live));
        engine.publish(observed(&key, Liveness::Live));
        assert!(engine.inference().waiting());
        let answer = next_answer(&mut engine).await;
        engine.apply_lookup(answer);
        let states = sent(&mut deltas, &key);
        assert!(
            matches!(&states[..], [state] if state.liveness == Liveness::Own
                && !state.holders.is_empty()),
            "{states:?}"
        );
        assert!(!engine.inference().waiting());
    }

    /// One lookup at a time: a key found held while one runs waits for
    /// the next, which the rate limit starts [`INDEX_MIN_INTERVAL`] after
    /// the first began.
    #[tokio::test]
    async fn a_key_held_while_a_lookup_runs_is_named_by_the_next() {
        let (tmp, mut engine, mut deltas, first, _gate) = engine_with_a_claim();
        let second = LockKey::from_coord(tmp.path(), first.dir(), "u");
        let second_gate = std::fs::File::create(second.gate_path()).unwrap();
        second_gate.lock().unwrap();
        std::fs::write(second.announce_path(), b"1").unwrap();

        engine.publish(observed(&first, Liveness::Live));
        engine.publish(observed(&second, Liveness::Live));
        let answer = next_answer(&mut engine).await;
        engine.apply_lookup(answer);
        assert_eq!(sent(&mut deltas, &first).len(), 1);
        assert!(sent(&mut deltas, &second).is_empty());
        assert!(
            engine.inference().waiting(),
            "the second key no longer waits"
        );

        let ready = engine.inference().lookups.ready_at();
        let (source, mut judging) = engine.split();
        let inference = source.inference_mut().expect("the engine infers");
        inference.start_waiting_lookup(&mut judging, ready);
        assert!(engine.inference().lookups.running());
        let answer = next_answer(&mut engine).await;
        engine.apply_lookup(answer);
        let states = sent(&mut deltas, &second);
        assert!(
            matches!(&states[..], [state] if state.liveness == Liveness::Own),
            "{states:?}"
        );
        assert!(!engine.inference().waiting());
    }
}
