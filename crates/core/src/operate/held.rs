//! The one held view: every held key's state, which keys each holder
//! PID holds (so its role), and each held key's last verdict, kept from
//! the engine's deltas (see [`crate::operate::verdict`] for what a
//! verdict is). Every front end reads holders, roles and verdicts here —
//! the monitor's model, `watch`, `record`, `replay`, `serve` (its
//! `/events`, its scrapes) and the one-shot views (`snapshot`, `check`
//! of a recording, built with [`HeldView::of`]) — so they tell the same
//! roles and the same verdict changes.
//!
//! Invariants: it holds only held keys' states (few), the PIDs holding
//! them and each key's last verdict; a change of one key re-judges that
//! key at once, and every other key its holders (before and after) hold
//! — a holder's role comes from all of them — once no delta came for
//! [`SETTLE_AFTER`] ([`HeldView::settle`]): a holder releasing its family
//! frees its keys one after the other, and the keys still held in
//! between would read a role it is only dropping (a tag's `contended`
//! naming no agent, just before the tag goes free); [`HeldView::tick`]
//! re-judges every held key against the clock (`materializing too long`
//! starts without any delta). A verdict "changes" when any of it differs
//! (kind, holder, waiters, since).
//!
//! The view keeps the wait-for graph of its held keys
//! ([`crate::operate::wait_for`]): built again at [`HeldView::settle`]
//! (or [`HeldView::tick`]) when a delta of the burst changed who waits on
//! a key, or the keys of a process in it — once per burst, from the
//! waited keys alone; then the keys of every process whose chain or
//! cycle changed are re-judged (a circle closing changes the verdict of
//! every key in it). While nobody waits, the graph is empty and never
//! built.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use crate::disk::LockKey;
use crate::engine::KeyState;

use super::verdict::{MATERIALIZING_AFTER, Role, Verdict, judge_waits};
use super::wait_for::{Holdings, WaitGraph};
use crate::disk::KeyKind;

/// How long after the last delta the keys it left unsettled are judged
/// (see the module doc): a family's keys are freed within microseconds
/// of each other, but the engine sends their deltas one by one, and a
/// reader as fast as `watch` sees the channel empty in between.
pub const SETTLE_AFTER: Duration = Duration::from_millis(50);

/// Resolves at `at` (never, when `None`): when the keys a burst of
/// deltas left unsettled are judged (`at`: [`SETTLE_AFTER`] after the
/// burst's last delta).
pub async fn settled(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// One key whose verdict changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    /// Which claim.
    pub key: LockKey,
    /// The kind of its verdict before (`None`: it had none).
    pub from: Option<&'static str>,
    /// Its verdict now (`None`: it has none — freed, or no fact applies).
    pub to: Option<Verdict>,
}

/// Held keys, their holders and their last verdicts.
#[derive(Debug, Clone)]
pub struct HeldView {
    materializing: Duration,
    /// Shared with the keeping of the front end that feeds it (one copy
    /// of a held key's state: [`HeldView::apply_shared`]).
    held: HashMap<LockKey, Arc<KeyState>>,
    by_pid: HashMap<u32, BTreeSet<LockKey>>,
    verdicts: HashMap<LockKey, Verdict>,
    /// Keys whose holders' other keys changed: re-judged by `settle`.
    unsettled: BTreeSet<LockKey>,
    /// Who waits for whom among the held keys.
    waits: WaitGraph,
    /// The held keys someone waits on.
    waited: BTreeSet<LockKey>,
    /// A delta changed a wait, or the keys of a process in the graph,
    /// since it was last built.
    waits_dirty: bool,
}

impl Default for HeldView {
    /// No key yet; spawns become suspects after [`MATERIALIZING_AFTER`].
    fn default() -> Self {
        Self::new(MATERIALIZING_AFTER)
    }
}

impl HeldView {
    /// No key yet; spawns become suspects after `materializing`.
    pub fn new(materializing: Duration) -> Self {
        Self {
            materializing,
            held: HashMap::new(),
            by_pid: HashMap::new(),
            verdicts: HashMap::new(),
            unsettled: BTreeSet::new(),
            waits: WaitGraph::default(),
            waited: BTreeSet::new(),
            waits_dirty: false,
        }
    }

    /// Spawns become suspects after `materializing` from now on.
    pub fn set_materializing(&mut self, materializing: Duration) {
        self.materializing = materializing;
    }

    /// The view of the held keys among `keys`, as one-shot views
    /// (`snapshot`, a recording's `check`) read roles: indexed, not yet
    /// judged (judge with [`HeldView::judge`], or [`HeldView::tick`]).
    pub fn of<'a>(
        keys: impl IntoIterator<Item = (&'a LockKey, &'a KeyState)>,
        materializing: Duration,
    ) -> Self {
        let mut view = Self::new(materializing);
        for (key, state) in keys {
            let held = state.liveness.is_held().then(|| Arc::new(state.clone()));
            view.index(key, held, None);
        }
        view.waits = view.graph(None, None);
        view
    }

    /// This view with its wait-for graph looked at at `now`: its cycles
    /// stand since `before`'s did, when `before` (an earlier look) had
    /// them, else since `now` — a one-shot view that looks twice
    /// (`check`) can tell a cycle that lasts.
    pub fn looked_at(mut self, now: SystemTime, before: Option<&WaitGraph>) -> Self {
        self.waits = self.graph(Some(now), before);
        self
    }

    /// The wait-for graph of the waited keys at `now` (`None`: one look).
    fn graph(&self, now: Option<SystemTime>, before: Option<&WaitGraph>) -> WaitGraph {
        if self.waited.is_empty() {
            return WaitGraph::default();
        }
        let waited = self
            .waited
            .iter()
            .filter_map(|key| self.held.get_key_value(key))
            .map(|(key, state)| (key, &**state));
        WaitGraph::of_waited(waited, &|pid| self.holdings_of(pid), now, before)
    }

    /// Who waits for whom among the held keys (empty while nobody waits).
    pub fn waits(&self) -> &WaitGraph {
        &self.waits
    }

    /// The state `key` had as of the last delta, when it was held.
    pub fn held_state(&self, key: &LockKey) -> Option<&KeyState> {
        self.held.get(key).map(|state| &**state)
    }

    /// Every held key with its state, in no order.
    pub fn held(&self) -> impl Iterator<Item = (&LockKey, &KeyState)> {
        self.held.iter().map(|(key, state)| (key, &**state))
    }

    /// The keys `pid` holds, in key order (none when it holds none).
    pub fn keys_of(&self, pid: u32) -> impl Iterator<Item = &LockKey> {
        self.by_pid.get(&pid).into_iter().flatten()
    }

    /// Every PID holding a key, in no order.
    pub fn holders(&self) -> impl Iterator<Item = u32> + '_ {
        self.by_pid.keys().copied()
    }

    /// What is known of holder `pid` (from the first key it holds), when
    /// it holds a key.
    pub fn holder(&self, pid: u32) -> Option<&crate::liveness::ProcessInfo> {
        let key = self.keys_of(pid).next()?;
        self.held.get(key)?.holders.iter().find(|p| p.pid == pid)
    }

    /// The role of `pid`, from every key it holds.
    pub fn role_of(&self, pid: u32) -> Role {
        Role::from_kinds(self.keys_of(pid).map(|key| (key.kind(), key.name())))
    }

    /// The verdict `key` got when it was last judged (`None`: not held,
    /// or no fact applies).
    pub fn verdict(&self, key: &LockKey) -> Option<&Verdict> {
        self.verdicts.get(key)
    }

    /// The verdict on `state` at `now`, its holders' roles read here:
    /// judged afresh, nothing kept (a scrape, a frame, a one-shot view).
    pub fn judge(&self, key: &LockKey, state: &KeyState, now: SystemTime) -> Option<Verdict> {
        self.judge_with(key, state, now, self.materializing)
    }

    /// [`HeldView::judge`] with spawns judged by `materializing`.
    pub fn judge_with(
        &self,
        key: &LockKey,
        state: &KeyState,
        now: SystemTime,
        materializing: Duration,
    ) -> Option<Verdict> {
        let waits = (!self.waits.is_empty()).then_some((key, &self.waits));
        judge_waits(state, waits, |pid| self.role_of(pid), now, materializing)
    }

    /// Folds in `key`'s new state (`None`: its files are gone); returns
    /// `key`'s verdict change, if any. The other keys of its holders wait
    /// for [`HeldView::settle`].
    pub fn apply(
        &mut self,
        key: &LockKey,
        state: Option<&KeyState>,
        now: SystemTime,
    ) -> Vec<Change> {
        let held = state
            .filter(|state| state.liveness.is_held())
            .map(|state| Arc::new(state.clone()));
        self.apply_shared(key, held, now)
    }

    /// [`HeldView::apply`] with the state shared with the caller's own
    /// keeping (the monitor's tree): a held key's state is kept once.
    pub fn apply_shared(
        &mut self,
        key: &LockKey,
        state: Option<Arc<KeyState>>,
        now: SystemTime,
    ) -> Vec<Change> {
        let mut touched = BTreeSet::from([key.clone()]);
        // (No allocation: nobody waiting, this is two empty-set lookups.)
        let in_graph = |view: &Self| {
            !view.waits.is_empty()
                && view.held.get(key).is_some_and(|state| {
                    state
                        .holders
                        .iter()
                        .any(|holder| view.waits.involves(holder.pid))
                })
        };
        let mut waits_changed = self.waited.contains(key) || in_graph(self);
        self.index(key, state, Some(&mut touched));
        waits_changed |= self.waited.contains(key) || in_graph(self);
        // The graph is built again once the burst is in (at the settle or
        // the tick), not per delta: a first sync of a thousand waits is
        // one build, not a thousand.
        self.waits_dirty |= waits_changed;
        touched.remove(key);
        self.unsettled.remove(key);
        self.unsettled.extend(touched);
        // A key newly held by a process seen holding nothing else yet is a
        // spawn or a holder of no agent's lock only until the rest of its
        // burst is in (an agent's tag may come before its AIH lock): that
        // first verdict waits for the settle, and is never told as a role
        // the process does not have.
        let provisional = !self.verdicts.contains_key(key)
            && self.held.get(key).is_some_and(|state| {
                matches!(
                    self.judge(key, state, now),
                    Some(Verdict::Materializing { .. } | Verdict::Held { .. })
                )
            });
        if provisional {
            self.unsettled.insert(key.clone());
            return Vec::new();
        }
        self.rejudge(key, now).into_iter().collect()
    }

    /// Builds the wait-for graph again when a delta since the last build
    /// changed a wait or the keys of a process in it; the keys whose
    /// verdict that may change wait to be judged ([`Self::rebuild_waits`]).
    fn build_waits_if_dirty(&mut self, now: SystemTime) {
        if std::mem::take(&mut self.waits_dirty) {
            let mut touched = std::mem::take(&mut self.unsettled);
            self.rebuild_waits(now, &mut touched);
            self.unsettled = touched;
        }
    }

    /// Builds the wait-for graph again, from the waited keys alone; adds
    /// to `touched` the keys whose verdict it may change: every key of a
    /// process whose chain or cycle changed, and the keys of a cycle that
    /// changed.
    fn rebuild_waits(&mut self, now: SystemTime, touched: &mut BTreeSet<LockKey>) {
        let waits = if self.waited.is_empty() {
            WaitGraph::default()
        } else {
            let waited = self
                .waited
                .iter()
                .filter_map(|key| self.held.get_key_value(key))
                .map(|(key, state)| (key, &**state));
            WaitGraph::of_waited(
                waited,
                &|pid| self.holdings_of(pid),
                Some(now),
                Some(&self.waits),
            )
        };
        let (pids, keys) = waits.changes_from(&self.waits);
        for pid in pids {
            touched.extend(self.keys_of(pid).cloned());
        }
        touched.extend(keys);
        self.waits = waits;
    }

    /// What `pid` holds, as the wait-for graph reads it.
    fn holdings_of(&self, pid: u32) -> Holdings {
        let keys = self.by_pid.get(&pid);
        Holdings {
            keys: keys.map_or(0, BTreeSet::len),
            agents: keys.map_or(0, |keys| {
                keys.iter()
                    .filter(|key| key.kind() == KeyKind::Instance)
                    .count()
            }),
        }
    }

    /// Whether [`HeldView::settle`] has anything to do: keys whose
    /// holders' other keys changed, or a wait-for graph to build again.
    pub fn unsettled(&self) -> bool {
        !self.unsettled.is_empty() || self.waits_dirty
    }

    /// Re-judges the keys whose holders' other keys changed since the
    /// last call (see the module doc); returns those that changed.
    pub fn settle(&mut self, now: SystemTime) -> Vec<Change> {
        self.build_waits_if_dirty(now);
        let keys = std::mem::take(&mut self.unsettled);
        keys.iter()
            .filter_map(|key| self.rejudge(key, now))
            .collect()
    }

    /// The verdict of every held key that has one, as a change from none
    /// (the initial state's verdicts), in key order.
    pub fn current(&self) -> Vec<Change> {
        let mut keys: Vec<&LockKey> = self.verdicts.keys().collect();
        keys.sort();
        keys.into_iter()
            .map(|key| Change {
                key: key.clone(),
                from: None,
                to: self.verdicts.get(key).cloned(),
            })
            .collect()
    }

    /// Re-judges every held key at `now`; returns those that changed.
    pub fn tick(&mut self, now: SystemTime) -> Vec<Change> {
        self.build_waits_if_dirty(now);
        self.unsettled.clear();
        let mut keys: Vec<LockKey> = self.held.keys().cloned().collect();
        keys.sort();
        keys.iter()
            .filter_map(|key| self.rejudge(key, now))
            .collect()
    }

    /// Puts `key`'s new state (`None`: gone) in the index; adds to
    /// `touched` (when given: a one-shot view judges nothing later) every
    /// other key its holders (before and after) hold.
    fn index(
        &mut self,
        key: &LockKey,
        state: Option<Arc<KeyState>>,
        mut touched: Option<&mut BTreeSet<LockKey>>,
    ) {
        if let Some(old) = self.held.remove(key) {
            self.unindex(key, &old, touched.as_deref_mut());
        }
        if let Some(state) = state.filter(|state| state.liveness.is_held()) {
            for holder in &state.holders {
                let keys = self.by_pid.entry(holder.pid).or_default();
                if let Some(touched) = touched.as_deref_mut() {
                    touched.extend(keys.iter().cloned());
                }
                keys.insert(key.clone());
            }
            self.held.insert(key.clone(), state);
        }
        match self.held.get(key) {
            Some(state) if !state.waiting.is_empty() => {
                self.waited.insert(key.clone());
            }
            _ => {
                self.waited.remove(key);
            }
        }
    }

    fn unindex(
        &mut self,
        key: &LockKey,
        old: &KeyState,
        mut touched: Option<&mut BTreeSet<LockKey>>,
    ) {
        for holder in &old.holders {
            if let Some(keys) = self.by_pid.get_mut(&holder.pid) {
                keys.remove(key);
                if let Some(touched) = touched.as_deref_mut() {
                    touched.extend(keys.iter().cloned());
                }
                if keys.is_empty() {
                    self.by_pid.remove(&holder.pid);
                }
            }
        }
    }

    fn rejudge(&mut self, key: &LockKey, now: SystemTime) -> Option<Change> {
        let verdict = self
            .held
            .get(key)
            .and_then(|state| self.judge(key, state, now));
        let old = match &verdict {
            Some(verdict) => self.verdicts.insert(key.clone(), verdict.clone()),
            None => self.verdicts.remove(key),
        };
        (old != verdict).then(|| Change {
            key: key.clone(),
            from: old.as_ref().map(Verdict::kind),
            to: verdict,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::fixtures::{free, held, instance, t, tag};
    use crate::liveness::Liveness;

    const LIMIT: Duration = Duration::from_secs(30);

    #[test]
    fn a_spawn_becomes_materializing_too_long_on_the_clock_and_an_agent_when_it_claims_its_aih() {
        let mut verdicts = HeldView::new(LIMIT);
        let spawn = held(Liveness::Live, 7, "spawn", t(0));
        // Its first verdict waits for the burst to settle (an agent's tag
        // may come before its AIH lock).
        assert_eq!(verdicts.apply(&tag("t"), Some(&spawn), t(1)), vec![]);
        let first = verdicts.settle(t(1));
        assert_eq!(first.len(), 1);
        assert_eq!(
            first[0].to.as_ref().map(Verdict::kind),
            Some("materializing")
        );
        assert_eq!(verdicts.tick(t(10)), vec![]);
        let late = verdicts.tick(t(31));
        assert_eq!(late.len(), 1);
        assert_eq!(late[0].from, Some("materializing"));
        assert_eq!(
            late[0].to.as_ref().map(Verdict::kind),
            Some("materializing_too_long")
        );
        assert_eq!(verdicts.tick(t(32)), vec![], "no change, no line");
        // It claims its AIH: the tag's verdict changes with no delta of
        // the tag's own.
        let agent = held(Liveness::Live, 7, "spawn", t(31));
        let mut changes = verdicts.apply(&instance("cli/a/b"), Some(&agent), t(33));
        changes.extend(verdicts.settle(t(33)));
        let kinds: Vec<_> = changes
            .iter()
            .map(|c| (c.key.name(), c.from, c.to.as_ref().map(Verdict::kind)))
            .collect();
        assert_eq!(
            kinds,
            vec![
                ("cli/a/b", None, Some("agent_active")),
                ("t", Some("materializing_too_long"), Some("agent_active")),
            ]
        );
    }

    /// A holder releasing its family frees its AIH lock, then its tag: in
    /// between, the tag (still held, contended) would name no agent. The
    /// deltas come together, so the tag is judged again only once they
    /// are in — by then it is free, and no such line is told.
    #[test]
    fn a_family_released_key_by_key_tells_no_role_it_is_only_dropping() {
        let mut verdicts = HeldView::new(LIMIT);
        let agent = held(Liveness::Live, 7, "agent", t(0));
        let contended = KeyState {
            waiters: vec![9],
            ..agent.clone()
        };
        verdicts.apply(&instance("cli/a/b"), Some(&agent), t(1));
        verdicts.apply(&tag("t"), Some(&contended), t(1));
        verdicts.settle(t(1));
        let aih = verdicts.apply(&instance("cli/a/b"), Some(&free()), t(2));
        assert_eq!(aih.len(), 1, "the AIH lock's own change only: {aih:?}");
        let tag_freed = verdicts.apply(&tag("t"), Some(&free()), t(2));
        assert_eq!(tag_freed[0].from, Some("contended"));
        assert_eq!(tag_freed[0].to, None);
        assert_eq!(verdicts.settle(t(2)), vec![], "nothing in between");
    }

    #[test]
    fn freeing_or_removing_a_key_takes_its_verdict_away() {
        let mut verdicts = HeldView::new(LIMIT);
        let agent = held(Liveness::Live, 7, "agent", t(0));
        verdicts.apply(&instance("cli/a/b"), Some(&agent), t(1));
        let freed = verdicts.apply(&instance("cli/a/b"), Some(&free()), t(2));
        assert_eq!(freed[0].from, Some("agent_active"));
        assert_eq!(freed[0].to, None);
        assert!(verdicts.held.is_empty());
        verdicts.apply(&instance("cli/a/b"), Some(&agent), t(3));
        let removed = verdicts.apply(&instance("cli/a/b"), None, t(4));
        assert_eq!(removed[0].to, None);
        assert!(verdicts.by_pid.is_empty());
    }

    /// Two agents each hold a tag and wait for the other's: once the
    /// burst that closes the circle settles, both keys are a wait cycle; a
    /// second later the tick calls both a deadlock; the end of one of them
    /// (its keys freed) ends it on both.
    #[test]
    fn a_circle_of_waits_is_a_wait_cycle_then_a_deadlock_and_ends_with_a_member() {
        use crate::engine::fixtures::waited_by;
        use crate::liveness::WaitKind;
        let kinds = |changes: &[Change]| -> Vec<(String, Option<&'static str>)> {
            changes
                .iter()
                .map(|c| (c.key.name().to_string(), c.to.as_ref().map(Verdict::kind)))
                .collect()
        };
        let mut view = HeldView::new(LIMIT);
        let (a, b) = (tag("a"), tag("b"));
        view.apply(
            &instance("cli/one"),
            Some(&held(Liveness::Live, 1, "one", t(0))),
            t(0),
        );
        view.apply(
            &instance("cli/two"),
            Some(&held(Liveness::Live, 2, "two", t(0))),
            t(0),
        );
        view.apply(&a, Some(&held(Liveness::Live, 1, "one", t(0))), t(0));
        view.apply(&b, Some(&held(Liveness::Live, 2, "two", t(0))), t(0));
        view.settle(t(0));
        // 1 waits for b: a chain, b contended.
        let b_waited = waited_by(held(Liveness::Live, 2, "two", t(0)), 1, WaitKind::Contender);
        let first = view.apply(&b, Some(&b_waited), t(1));
        assert_eq!(kinds(&first), [("b".into(), Some("contended"))]);
        let settled = view.settle(t(1));
        assert!(
            kinds(&settled).contains(&("a".into(), Some("blocked"))),
            "1 holds a and waits: {settled:?}"
        );
        // 2 waits for a: the circle closes.
        let a_waited = waited_by(held(Liveness::Live, 1, "one", t(0)), 2, WaitKind::Contender);
        // The delta itself is judged with the graph as it was (a now has
        // a contender); the burst settled, the graph built again names the
        // circle on both keys.
        let closed = view.apply(&a, Some(&a_waited), t(2));
        assert_eq!(kinds(&closed), [("a".into(), Some("blocked"))]);
        let settled = view.settle(t(2));
        for key in ["a", "b"] {
            assert!(
                kinds(&settled).contains(&(key.into(), Some("wait_cycle"))),
                "{key}: {settled:?}"
            );
        }
        assert!(
            view.verdict(&instance("cli/one"))
                .is_some_and(|v| v.kind() == "blocked")
        );
        assert_eq!(view.waits().cycles().len(), 1);
        // A second later: a deadlock, naming the circle and whom to signal.
        let ticked = view.tick(t(3));
        assert!(kinds(&ticked).contains(&("a".into(), Some("deadlock"))));
        assert!(kinds(&ticked).contains(&("b".into(), Some("deadlock"))));
        let words = view.verdict(&a).unwrap().describe(t(3));
        assert!(
            words.starts_with(
                "deadlock: pid 1 holds tag \"a\", waits to take tag \"b\" held by pid 2, \
                 which waits to take tag \"a\""
            ),
            "{words}"
        );
        // 2 is killed: its keys are freed; 1 takes b.
        view.apply(&instance("cli/two"), Some(&free()), t(4));
        view.apply(&a, Some(&held(Liveness::Live, 1, "one", t(0))), t(4));
        let took = view.apply(&b, Some(&held(Liveness::Live, 1, "one", t(4))), t(4));
        view.settle(t(4));
        assert!(view.waits().is_empty());
        assert!(
            !took
                .iter()
                .any(|c| c.to.as_ref().is_some_and(|v| v.kind() == "deadlock"))
        );
        for key in [&a, &b, &instance("cli/one")] {
            let kind = view.verdict(key).map(Verdict::kind);
            assert_eq!(kind, Some("agent_active"), "{}", key.name());
        }
    }

    /// A deadlocked member takes a second agent's instance lock (a key
    /// nobody waits on): the circle may clear now, and its keys say so at
    /// the settle — the graph is rebuilt for a key of a process in it.
    #[test]
    fn a_member_taking_a_second_agent_makes_its_deadlock_a_cycle_that_may_clear() {
        use crate::engine::fixtures::waited_by;
        use crate::liveness::WaitKind;
        let mut view = HeldView::new(LIMIT);
        let one = held(Liveness::Live, 1, "one", t(0));
        let two = held(Liveness::Live, 2, "two", t(0));
        view.apply(&instance("cli/one"), Some(&one), t(0));
        view.apply(&instance("cli/two"), Some(&two), t(0));
        view.apply(
            &tag("a"),
            Some(&waited_by(one, 2, WaitKind::Contender)),
            t(0),
        );
        view.apply(
            &tag("b"),
            Some(&waited_by(two, 1, WaitKind::Contender)),
            t(0),
        );
        view.settle(t(0));
        view.tick(t(2));
        assert_eq!(view.verdict(&tag("a")).map(Verdict::kind), Some("deadlock"));
        let again = held(Liveness::Live, 1, "one", t(2));
        view.apply(&instance("cli/third"), Some(&again), t(3));
        view.settle(t(3));
        assert_eq!(
            view.verdict(&tag("a")).map(Verdict::kind),
            Some("wait_cycle"),
            "{:?}",
            view.verdict(&tag("a"))
        );
    }

    /// A one-shot view of a set of states reads the same holders, roles
    /// and verdicts as a view kept from the deltas that led there.
    #[test]
    fn a_view_of_states_reads_as_the_view_kept_from_their_deltas() {
        let agent = held(Liveness::Live, 7, "agent", t(0));
        let spawn = held(Liveness::Live, 8, "spawn", t(0));
        let states = [
            (instance("cli/a/b"), agent.clone()),
            (tag("t1"), agent),
            (tag("t2"), spawn),
            (tag("gone"), free()),
        ];
        let mut kept = HeldView::new(LIMIT);
        for (key, state) in &states {
            kept.apply(key, Some(state), t(1));
        }
        kept.settle(t(1));
        let once = HeldView::of(states.iter().map(|(key, state)| (key, state)), LIMIT);
        for view in [&kept, &once] {
            assert_eq!(
                view.role_of(7),
                Role::Agent {
                    aih: "cli/a/b".into()
                }
            );
            assert_eq!(view.role_of(8), Role::Materializing);
            assert_eq!(view.role_of(9), Role::Other, "holds nothing");
            let names: Vec<&str> = view.keys_of(7).map(LockKey::name).collect();
            assert_eq!(names, ["cli/a/b", "t1"], "kind, then name");
            let mut holders: Vec<u32> = view.holders().collect();
            holders.sort_unstable();
            assert_eq!(holders, [7, 8]);
            assert!(view.held_state(&tag("gone")).is_none(), "free is not held");
        }
        for (key, state) in &states[..3] {
            assert_eq!(
                kept.verdict(key),
                once.judge(key, state, t(1)).as_ref(),
                "{}",
                key.name()
            );
        }
        let late = once
            .judge(&states[2].0, &states[2].1, t(31))
            .map(|v| v.kind());
        assert_eq!(
            late,
            Some("materializing_too_long"),
            "judged at the time asked"
        );
    }
}
