//! Following the engine's change stream: the one [`Follower`] every front
//! end keeps — the monitor, `watch`, `record`, `serve` and `replay`.
//!
//! A follower folds each delta by the engine's one rule
//! ([`crate::engine::fold::fold`], the only place a `Delta` is taken
//! apart) into what the front end keeps of key states (its [`Folder`]),
//! and feeds the one held view ([`HeldView`]) through the same fold, in
//! the same step; it keeps the judgement clock: the keys a burst of
//! deltas left unsettled are judged [`SETTLE_AFTER`] after its last
//! delta, and while no burst settles every held key is judged again
//! every [`VERDICT_CLOCK`] (verdicts that come with time alone).
//!
//! The clock is the one the front end passes in: the wall clock for a
//! live front end, the recording's for a replay (whose cursor is its
//! now). A burst settles as of its end (its latest delta's time — or
//! receipt, live: [`Follower::apply_received`] — plus [`SETTLE_AFTER`]),
//! so a replay judges as the live front end did.
//!
//! Invariants: the held view has exactly the held keys the folder was
//! told of, with the states it was told; a key's own verdict change is
//! told with its delta, its holders' other keys' once the burst settles
//! (before the next delta's, when that comes after the quiet); the
//! first full scan's end judges every held key once ([`Followed::first_state`]);
//! a burst's end never moves back (a delta stamped before the last one
//! neither ends the burst nor shortens its quiet); a burst that never
//! quiets is judged whole a [`VERDICT_CLOCK`] after it began; at
//! [`Follower::judge`], a due time more than its period ahead of now
//! (the wall clock went back) is due.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use crate::disk::LockKey;
use crate::engine::fold::{Folder, WatcherView, fold};
use crate::engine::{Delta, KeyState, Liveness};
use crate::exact_timer::ExactTimer;
use crate::operate::held::{Change, HeldView, SETTLE_AFTER};

use super::queue::KeyTo;

/// How often held keys are judged again against the clock while no burst
/// settles.
pub const VERDICT_CLOCK: Duration = Duration::from_secs(1);

/// Verdict changes found at one time.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Judged {
    /// When they were judged: a burst's end, or the clock's now.
    pub at: Option<SystemTime>,
    /// The keys whose verdict changed.
    pub changes: Vec<Change>,
}

/// What one delta meant, in the order a front end tells it.
#[derive(Debug, Clone, Default)]
pub struct Followed {
    /// A burst whose quiet had passed unjudged when this delta came (a
    /// replay stepping, a busy reader): its keys judged as of its end —
    /// told before this delta.
    pub settled: Option<Judged>,
    /// Its key line would say what the last one said (the same liveness,
    /// holders, error): another monitor's probe, a holder refresh.
    pub repeat: bool,
    /// The verdict change of its own key.
    pub changes: Vec<Change>,
    /// It ended the first full scan: every held key judged once, now that
    /// every key is in (the first state's verdicts).
    pub first_state: Option<Judged>,
    /// Its key's state as the held view keeps it, when it is held: for a
    /// second keeping of whole states (a journal's) to share, not copy.
    pub shared: Option<Arc<KeyState>>,
}

/// A front end's following of the change stream (see the module doc):
/// its keeping of key states `F`, the held view, the judgement clock.
#[derive(Debug, Clone)]
pub struct Follower<F> {
    keep: F,
    held: HeldView,
    /// When the keys the last burst left unsettled are judged.
    settle_due: Option<SystemTime>,
    /// When the burst settling now began: one that never quiets is
    /// judged whole every [`VERDICT_CLOCK`] all the same.
    burst_began: Option<SystemTime>,
    /// When every held key is judged again (`None`: at the next look).
    tick_due: Option<SystemTime>,
    /// Whether the first full scan ended.
    scanned: bool,
}

impl<F: Folder> Follower<F> {
    /// Follows into `keep`; spawns become suspects after `materializing`.
    pub fn new(keep: F, materializing: Duration) -> Self {
        Self {
            keep,
            held: HeldView::new(materializing),
            settle_due: None,
            burst_began: None,
            tick_due: None,
            scanned: false,
        }
    }

    /// Folds `delta` into the keeping and the held view (see
    /// [`Followed`]), on the deltas' own clock: a burst's quiet is timed
    /// from its deltas' times (a replay, the monitor's model).
    pub fn apply(&mut self, delta: Delta) -> Followed {
        self.fold_in(delta, None)
    }

    /// [`Follower::apply`] for a delta `received` now (a live front end):
    /// the quiet that ends a burst is timed from the later of its time and
    /// its receipt, so a delta stamped earlier (a sweep's, one the engine
    /// held back) neither ends the burst nor makes it settle at once.
    pub fn apply_received(&mut self, delta: Delta, received: SystemTime) -> Followed {
        self.fold_in(delta, Some(received))
    }

    fn fold_in(&mut self, delta: Delta, received: Option<SystemTime>) -> Followed {
        let mut followed = Followed::default();
        let changed_at = delta
            .changed_at()
            .map(|at| received.map_or(at, |received| at.max(received)));
        let synced_at = match &delta {
            Delta::Synced { at, .. } => Some(*at),
            _ => None,
        };
        if let Some(at) = changed_at {
            followed.settled = self.settle(at);
        }
        fold(
            &mut Feeding {
                keep: &mut self.keep,
                held: &mut self.held,
                followed: &mut followed,
            },
            delta,
        );
        if let Some(at) = changed_at
            && (self.settle_due.is_some() || self.held.unsettled())
        {
            // Never earlier than a due time already set: deltas are not
            // always in time order. A burst that left nothing to settle
            // (every key its holders hold told with its own delta) sets
            // no clock: nothing would be judged at it.
            let due = at + SETTLE_AFTER;
            if self.settle_due.is_none() {
                self.burst_began = Some(at);
            }
            self.settle_due = Some(self.settle_due.map_or(due, |set| set.max(due)));
        }
        if let Some(at) = synced_at
            && !self.scanned
        {
            self.scanned = true;
            self.settle_due = None;
            self.burst_began = None;
            self.tick_due = Some(at + VERDICT_CLOCK);
            followed.first_state = Some(Judged {
                at: Some(at),
                changes: self.held.tick(at),
            });
        }
        followed
    }

    /// When [`Follower::judge`] next has something to do: the burst's
    /// settle (or, for a burst that has not quieted, a clock's period
    /// after it began), else the clock's tick (`None`: at once).
    pub fn due(&self) -> Option<SystemTime> {
        match (self.settle_due, self.burst_began) {
            (Some(due), Some(began)) => Some(due.min(began + VERDICT_CLOCK)),
            (Some(due), None) => Some(due),
            (None, _) => self.tick_due,
        }
    }

    /// The judgement due at `now`: the last burst's keys, judged as of its
    /// end, or — no burst settling — every held key at `now`. `None`
    /// when none is due.
    pub fn judge(&mut self, now: SystemTime) -> Option<Judged> {
        if let Some(due) = self.settle_due {
            if is_due(due, now, SETTLE_AFTER) {
                self.tick_due = Some(now + VERDICT_CLOCK);
                return Some(self.settled(due));
            }
            // Deltas closer than the quiet, for a whole period: judged
            // whole now all the same, or churn would hold back every
            // verdict that comes with time (and every held key's).
            let unquiet = self
                .burst_began
                .is_some_and(|began| is_due(began + VERDICT_CLOCK, now, VERDICT_CLOCK));
            if !unquiet {
                return None;
            }
            self.settle_due = None;
            self.burst_began = None;
        }
        if self
            .tick_due
            .is_some_and(|due| !is_due(due, now, VERDICT_CLOCK))
        {
            return None;
        }
        self.tick_due = Some(now + VERDICT_CLOCK);
        Some(Judged {
            at: Some(now),
            changes: self.held.tick(now),
        })
    }

    /// When the keys the last burst left unsettled are judged (`None`:
    /// no burst is settling).
    pub fn settle_due(&self) -> Option<SystemTime> {
        self.settle_due
    }

    /// The last burst's keys judged as of its end, when its quiet has
    /// passed by `now` — `now` on the deltas' clock: an earlier time is
    /// not taken for a clock set back (nothing else: the clock's tick is
    /// [`Follower::judge`]'s).
    pub fn settle(&mut self, now: SystemTime) -> Option<Judged> {
        let due = self.settle_due.filter(|&due| due <= now)?;
        Some(self.settled(due))
    }

    /// The last burst's keys, judged as of its end `due`.
    fn settled(&mut self, due: SystemTime) -> Judged {
        self.settle_due = None;
        self.burst_began = None;
        Judged {
            at: Some(due),
            changes: self.held.settle(due),
        }
    }

    /// Whether the first full scan ended: until then keys are discovered,
    /// and a verdict resting on half a holder's keys is not told.
    pub fn scanned(&self) -> bool {
        self.scanned
    }

    /// The held keys' holders, roles and verdicts.
    pub fn held(&self) -> &HeldView {
        &self.held
    }

    /// Spawns become suspects after `materializing` from now on.
    pub fn set_materializing(&mut self, materializing: Duration) {
        self.held.set_materializing(materializing);
    }

    /// What the front end keeps.
    pub fn keep(&self) -> &F {
        &self.keep
    }

    /// What the front end keeps, to change what is not a key's state
    /// (its own settings, its derived caches).
    pub fn keep_mut(&mut self) -> &mut F {
        &mut self.keep
    }
}

impl Follower<crate::engine::fold::Fold> {
    /// Follows on from a whole state (a journal's checkpoint, folded up
    /// to `at`): its held keys judged as of `at`, its first scan over
    /// when the state says so.
    pub fn resumed(
        fold: crate::engine::fold::Fold,
        materializing: Duration,
        at: SystemTime,
    ) -> Self {
        let mut held = HeldView::new(materializing);
        for (key, state) in fold.keys().iter() {
            if state.liveness.is_held() {
                held.apply(key, Some(state), at);
            }
        }
        held.settle(at);
        let scanned = fold.watcher().synced();
        Self {
            keep: fold,
            held,
            settle_due: None,
            burst_began: None,
            tick_due: None,
            scanned,
        }
    }
}

/// A keeping of no key state beyond the held view's (`watch`, `record`):
/// the watcher's view alone, so a million free keys cost it nothing.
#[derive(Debug, Clone, Default)]
pub struct HeldOnly {
    watcher: WatcherView,
}

impl HeldOnly {
    /// What the deltas said of the watcher.
    pub fn watcher(&self) -> &WatcherView {
        &self.watcher
    }
}

impl Folder for HeldOnly {
    fn watcher_mut(&mut self) -> &mut WatcherView {
        &mut self.watcher
    }

    fn liveness_of(&self, _: &LockKey) -> Option<Liveness> {
        None
    }

    fn put(&mut self, _: LockKey, _: KeyState, _: Option<Liveness>, _: SystemTime) {}

    fn put_shared(&mut self, _: LockKey, _: Arc<KeyState>, _: Option<Liveness>, _: SystemTime) {}

    fn remove(&mut self, _: &LockKey, _: Liveness, _: SystemTime) {}
}

/// Resolves when `due` comes on the wall clock (`None`: at once), as the
/// runtime's monotonic clock counts from now; never later than
/// [`VERDICT_CLOCK`] from now (a wall clock set back).
pub async fn until(due: Option<SystemTime>) {
    let wait = due.map_or(Duration::ZERO, |due| {
        due.duration_since(SystemTime::now())
            .unwrap_or_default()
            .min(VERDICT_CLOCK)
    });
    tokio::time::sleep(wait).await;
}

/// [`until`] to the microsecond, on an [`ExactTimer`] (one wake-up, at
/// the due time — tokio's timer wheel wakes a runtime up to twice for
/// a deadline past its current 64 ms block, and the follower's settle
/// is moved later by every delta of a burst). The wall-clock due time is
/// put on the monotonic clock once per due time asked, so a due time
/// asked again sets no timer. Falls back to [`until`] when no timer can
/// be made (out of file descriptors).
pub struct DueTimer {
    timer: Option<ExactTimer>,
    /// The last due time asked, and when it is on the monotonic clock.
    mapped: Option<(SystemTime, Instant)>,
}

impl DueTimer {
    /// A timer registered with the current runtime.
    pub fn new() -> Self {
        let timer = ExactTimer::new()
            .map_err(|error| tracing::debug!(%error, "no exact timer: the runtime's, then"))
            .ok();
        Self {
            timer,
            mapped: None,
        }
    }

    /// Resolves when `due` comes, as [`until`] does (`None`: at once).
    /// Cancel-safe.
    pub async fn until(&mut self, due: Option<SystemTime>) {
        let (Some(timer), Some(due)) = (&mut self.timer, due) else {
            return until(due).await;
        };
        let at = match self.mapped {
            Some((mapped, at)) if mapped == due => at,
            _ => {
                let wait = due
                    .duration_since(SystemTime::now())
                    .unwrap_or_default()
                    .min(VERDICT_CLOCK);
                let at = Instant::now() + wait;
                self.mapped = Some((due, at));
                at
            }
        };
        timer.until(at).await;
    }
}

impl Default for DueTimer {
    fn default() -> Self {
        Self::new()
    }
}

/// Whether `due` has come at `now`: reached, or more than `period`
/// ahead (the clock went back since it was set).
fn is_due(due: SystemTime, now: SystemTime, period: Duration) -> bool {
    due <= now || due > now + period
}

/// The fold's folder while following: each key's state goes to the
/// keeping and the held view in one step.
struct Feeding<'a, F> {
    keep: &'a mut F,
    held: &'a mut HeldView,
    followed: &'a mut Followed,
}

impl<F: Folder> Folder for Feeding<'_, F> {
    fn watcher_mut(&mut self) -> &mut WatcherView {
        self.keep.watcher_mut()
    }

    fn liveness_of(&self, key: &LockKey) -> Option<Liveness> {
        self.held
            .held_state(key)
            .map(|state| state.liveness)
            .or_else(|| self.keep.liveness_of(key))
    }

    fn put(&mut self, key: LockKey, state: KeyState, previous: Option<Liveness>, at: SystemTime) {
        let before = match self.held.held_state(&key) {
            Some(old) => KeyTo::state(old),
            None => KeyTo::state(&KeyState::bare(previous.unwrap_or(state.liveness))),
        };
        self.followed.repeat = previous == Some(state.liveness) && before == KeyTo::state(&state);
        if state.liveness.is_held() {
            // One copy, shared by the held view and a keeping that keeps
            // states whole.
            let state = Arc::new(state);
            self.followed.changes = self.held.apply_shared(&key, Some(state.clone()), at);
            self.followed.shared = Some(state.clone());
            self.keep.put_shared(key, state, previous, at);
        } else {
            self.followed.changes = self.held.apply_shared(&key, None, at);
            self.keep.put(key, state, previous, at);
        }
    }

    fn remove(&mut self, key: &LockKey, previous: Liveness, at: SystemTime) {
        self.followed.changes = self.held.apply(key, None, at);
        self.keep.remove(key, previous, at);
    }

    fn problems_replaced(&mut self) {
        self.keep.problems_replaced();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_due_time_asked_again_sets_no_timer() {
        use crate::exact_timer::pending_once;
        let mut clock = DueTimer::new();
        // The first of 30 ms, 300 ms, … from now still pending when asked
        // (a test thread descheduled past one finds it due).
        let mut margin = Duration::from_millis(30);
        let due = loop {
            let due = SystemTime::now() + margin;
            if pending_once(clock.until(Some(due))).await {
                break due;
            }
            margin *= 10;
        };
        // Each turn of a loop asks again, and is cancelled by a delta: it
        // may find it due only once it is.
        for _ in 0..4 {
            let pending = pending_once(clock.until(Some(due))).await;
            assert!(
                pending || SystemTime::now() >= due - Duration::from_millis(1),
                "resolved before its due time"
            );
        }
        clock.until(Some(due)).await;
        assert!(SystemTime::now() >= due - Duration::from_millis(1));
        let timer = clock.timer.as_ref().expect("a timer could be made");
        assert_eq!(timer.sets, 1, "one timerfd_settime for one due time");
    }
    use crate::engine::fixtures::{free, held, key_delta, t, tag};
    use crate::engine::fold::Fold;

    fn follower() -> Follower<Fold> {
        Follower::new(Fold::default(), Duration::from_secs(30))
    }

    fn synced(at: SystemTime) -> Delta {
        Delta::Synced { keys: 0, at }
    }

    /// The keeping and the held view are told the same states.
    #[test]
    fn the_held_view_has_the_held_keys_the_keeping_has() {
        let mut follower = follower();
        let live = held(Liveness::Live, 7, "agent", t(0));
        follower.apply(key_delta(tag("a"), live.clone(), None, t(1)));
        follower.apply(key_delta(tag("b"), free(), None, t(1)));
        assert_eq!(follower.held().held_state(&tag("a")), Some(&live));
        assert_eq!(follower.keep().state(&tag("a")), Some(&live));
        assert!(follower.held().held_state(&tag("b")).is_none());
        assert!(follower.keep().state(&tag("b")).is_some());
        follower.apply(Delta::Removed {
            key: tag("a"),
            previous: Liveness::Live,
            at: t(2),
        });
        assert!(follower.held().held_state(&tag("a")).is_none());
        assert!(follower.keep().state(&tag("a")).is_none());
    }

    /// A held key's state is one copy, the keeping's and the held view's.
    #[test]
    fn a_held_state_is_kept_once() {
        let mut follower = follower();
        let live = held(Liveness::Live, 7, "agent", t(0));
        follower.apply(key_delta(tag("a"), live, None, t(1)));
        let in_view = follower.held().held_state(&tag("a")).expect("held");
        let kept = follower.keep().state(&tag("a")).expect("kept");
        assert!(std::ptr::eq(in_view, kept), "one copy");
    }

    /// A burst settles SETTLE_AFTER after its last delta, as of then; no
    /// tick while it settles; then every VERDICT_CLOCK.
    #[test]
    fn a_burst_settles_after_its_quiet_then_the_clock_ticks() {
        let mut follower = follower();
        follower.apply(synced(t(0)));
        assert_eq!(follower.due(), Some(t(0) + VERDICT_CLOCK));
        let live = held(Liveness::Live, 7, "agent", t(0));
        follower.apply(key_delta(tag("a"), live, None, t(5)));
        let end = t(5) + SETTLE_AFTER;
        assert_eq!(follower.due(), Some(end));
        assert_eq!(follower.judge(t(5)), None, "still settling");
        let judged = follower.judge(t(6)).expect("settled");
        assert_eq!(judged.at, Some(end), "as of the burst's end");
        assert_eq!(follower.due(), Some(t(6) + VERDICT_CLOCK));
        assert_eq!(follower.judge(t(6)), None);
        assert_eq!(follower.judge(t(7)).and_then(|j| j.at), Some(t(7)));
    }

    /// A burst that leaves nothing to settle (a holder of nothing else
    /// lets its one key go) sets no settle clock: the next judgement is
    /// the clock's tick, and no wake-up comes for nothing.
    #[test]
    fn a_burst_with_nothing_to_settle_sets_no_clock() {
        let mut follower = follower();
        follower.apply(synced(t(0)));
        let live = held(Liveness::Live, 7, "agent", t(0));
        follower.apply(key_delta(tag("a"), live, None, t(5)));
        assert!(follower.settle_due().is_some(), "a new holder settles");
        let settled = follower.judge(t(6)).expect("settled");
        assert_eq!(settled.at, Some(t(5) + SETTLE_AFTER));
        follower.apply(key_delta(tag("a"), free(), Some(Liveness::Live), t(8)));
        assert_eq!(follower.settle_due(), None, "nothing left to settle");
        assert_eq!(follower.due(), Some(t(6) + VERDICT_CLOCK));
    }

    /// A delta after an unjudged quiet settles the burst before it first.
    #[test]
    fn a_delta_after_the_quiet_settles_the_burst_first() {
        let mut follower = follower();
        follower.apply(synced(t(0)));
        let live = held(Liveness::Live, 7, "agent", t(0));
        follower.apply(key_delta(tag("a"), live.clone(), None, t(5)));
        let followed = follower.apply(key_delta(tag("b"), live, None, t(9)));
        assert_eq!(
            followed.settled.and_then(|j| j.at),
            Some(t(5) + SETTLE_AFTER)
        );
        let followed = follower.apply(key_delta(tag("c"), free(), None, t(9)));
        assert!(followed.settled.is_none(), "within the quiet");
    }

    /// The first scan's end judges once; a second sync does not.
    #[test]
    fn the_first_scan_judges_every_held_key_once() {
        let mut follower = follower();
        let live = held(Liveness::Live, 7, "agent", t(0));
        follower.apply(key_delta(tag("a"), live, None, t(1)));
        assert!(!follower.scanned());
        let first = follower.apply(synced(t(2)));
        assert_eq!(first.first_state.and_then(|j| j.at), Some(t(2)));
        assert!(follower.scanned());
        assert!(follower.apply(synced(t(3))).first_state.is_none());
    }

    /// A delta stamped before the burst's last neither ends the burst nor
    /// brings its end forward.
    #[test]
    fn a_delta_stamped_earlier_does_not_end_the_burst() {
        let mut follower = follower();
        follower.apply(synced(t(0)));
        let live = held(Liveness::Live, 7, "agent", t(0));
        follower.apply(key_delta(tag("a"), live.clone(), None, t(5)));
        let followed = follower.apply(key_delta(tag("b"), live, None, t(3)));
        assert!(followed.settled.is_none(), "not ended by an earlier stamp");
        assert_eq!(follower.settle_due(), Some(t(5) + SETTLE_AFTER));
    }

    /// Live, a delta stamped long before its receipt (a sweep's) is timed
    /// from its receipt: the burst does not settle at once.
    #[test]
    fn a_stale_delta_received_now_settles_after_the_quiet_from_now() {
        let mut follower = follower();
        follower.apply_received(synced(t(0)), t(0));
        let live = held(Liveness::Live, 7, "agent", t(0));
        let stale = key_delta(tag("a"), live, None, t(2));
        follower.apply_received(stale, t(9));
        assert_eq!(follower.settle_due(), Some(t(9) + SETTLE_AFTER));
        assert_eq!(follower.judge(t(9)), None, "still settling");
    }

    /// Deltas closer than the quiet never settle a burst; every held key
    /// is judged all the same once the burst has gone on for a clock's
    /// period — not before.
    #[test]
    fn a_burst_that_never_quiets_is_judged_every_period() {
        let mut follower = follower();
        follower.apply(synced(t(0)));
        let began = t(10);
        let mut judged = Vec::new();
        for step in 0..60u64 {
            let at = began + Duration::from_millis(30 * step);
            let live = held(Liveness::Live, 7 + step as u32 % 2, "agent", t(0));
            follower.apply(key_delta(tag("a"), live, Some(Liveness::Live), at));
            assert!(follower.due().is_some_and(|due| due <= at + VERDICT_CLOCK));
            if let Some(done) = follower.judge(at) {
                judged.push(done.at.expect("a time"));
            }
        }
        assert_eq!(
            judged.first().copied(),
            Some(began + Duration::from_millis(30 * 34)),
            "first at the first delta a period after the burst began: {judged:?}"
        );
        assert!(judged.len() <= 2, "once a period: {judged:?}");
    }

    /// A clock that went back does not hold a judgement back.
    #[test]
    fn a_clock_that_went_back_judges_at_once() {
        let mut follower = follower();
        follower.apply(synced(t(100)));
        assert!(follower.judge(t(10)).is_some());
    }

    #[test]
    fn a_delta_that_changes_nothing_a_line_shows_is_a_repeat() {
        let mut follower = follower();
        let live = |pid| held(Liveness::Live, pid, "agent", t(0));
        let mut repeat = |state, previous| {
            follower
                .apply(key_delta(tag("t"), state, previous, t(1)))
                .repeat
        };
        assert!(!repeat(live(7), None), "first seen");
        assert!(!repeat(live(7), Some(Liveness::Free)), "taken");
        assert!(
            repeat(live(7), Some(Liveness::Live)),
            "the same holder again"
        );
        let mut stopped = live(7);
        stopped.holders[0].state = Some(crate::liveness::process::ProcState::Stopped);
        assert!(
            repeat(stopped, Some(Liveness::Live)),
            "no line shows the process state"
        );
        assert!(!repeat(live(8), Some(Liveness::Live)), "another holder");
        let refused = |count| {
            let mut state = live(8);
            state.refused = Some(crate::liveness::state::RefusedTries {
                last_minute: count,
                by: vec![crate::liveness::state::RefusedBy {
                    pid: 9,
                    count,
                    last: None,
                }],
            });
            state
        };
        assert!(
            !repeat(refused(3), Some(Liveness::Live)),
            "tries refused: the line says so"
        );
        assert!(
            repeat(refused(3), Some(Liveness::Live)),
            "the same count again"
        );
        assert!(
            !repeat(refused(40), Some(Liveness::Live)),
            "more refused (the engine says it at most once a second)"
        );
        assert!(
            !repeat(live(8), Some(Liveness::Live)),
            "none refused in the last minute any more"
        );
        assert!(!repeat(free(), Some(Liveness::Live)), "released");
        assert!(repeat(free(), Some(Liveness::Free)), "free again");
    }
}
