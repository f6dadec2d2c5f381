//! The verdict on every held key, kept from the engine's deltas, so a
//! reader can say when a key's verdict changes (see
//! [`crate::operate::verdict`] for what a verdict is): one mechanism for
//! `watch`, `serve`, `record`, `replay --from` and the monitor's event
//! log, so they tell the same changes.
//!
//! Invariants: it holds only held keys' states (few), the PIDs holding
//! them and each key's last verdict; a change of one key re-judges that
//! key at once, and every other key its holders (before and after) hold
//! — a holder's role comes from all of them — once no delta came for
//! [`SETTLE_AFTER`] ([`Verdicts::settle`]): a holder releasing its family
//! frees its keys one after the other, and the keys still held in
//! between would read a role it is only dropping (a tag's `contended`
//! naming no agent, just before the tag goes free); [`Verdicts::tick`]
//! re-judges every held key against the clock (`materializing too long`
//! starts without any delta). A verdict "changes" when any of it differs
//! (kind, holder, waiters, since).

use std::collections::{BTreeSet, HashMap};
use std::time::{Duration, SystemTime};

use crate::disk::LockKey;
use crate::engine::KeyState;

use super::{MATERIALIZING_AFTER, Role, Verdict, judge};

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

/// Held keys and their last verdicts.
#[derive(Debug, Clone)]
pub struct Verdicts {
    materializing: Duration,
    held: HashMap<LockKey, KeyState>,
    by_pid: HashMap<u32, BTreeSet<LockKey>>,
    verdicts: HashMap<LockKey, Verdict>,
    /// Keys whose holders' other keys changed: re-judged by `settle`.
    unsettled: BTreeSet<LockKey>,
}

impl Default for Verdicts {
    /// No key yet; spawns become suspects after [`MATERIALIZING_AFTER`].
    fn default() -> Self {
        Self::new(MATERIALIZING_AFTER)
    }
}

impl Verdicts {
    /// No key yet; spawns become suspects after `materializing`.
    pub fn new(materializing: Duration) -> Self {
        Self {
            materializing,
            held: HashMap::new(),
            by_pid: HashMap::new(),
            verdicts: HashMap::new(),
            unsettled: BTreeSet::new(),
        }
    }

    /// Spawns become suspects after `materializing` from now on.
    pub fn set_materializing(&mut self, materializing: Duration) {
        self.materializing = materializing;
    }

    /// The state `key` had as of the last delta, when it was held.
    pub fn held_state(&self, key: &LockKey) -> Option<&KeyState> {
        self.held.get(key)
    }

    /// Folds in `key`'s new state (`None`: its files are gone); returns
    /// `key`'s verdict change, if any. The other keys of its holders wait
    /// for [`Verdicts::settle`].
    pub fn apply(
        &mut self,
        key: &LockKey,
        state: Option<&KeyState>,
        now: SystemTime,
    ) -> Vec<Change> {
        let mut touched = BTreeSet::from([key.clone()]);
        if let Some(old) = self.held.remove(key) {
            self.unindex(key, &old, &mut touched);
        }
        if let Some(state) = state.filter(|state| state.liveness.is_held()) {
            for holder in &state.holders {
                let keys = self.by_pid.entry(holder.pid).or_default();
                touched.extend(keys.iter().cloned());
                keys.insert(key.clone());
            }
            self.held.insert(key.clone(), state.clone());
        }
        touched.remove(key);
        self.unsettled.remove(key);
        self.unsettled.extend(touched);
        self.rejudge(key, now).into_iter().collect()
    }

    /// Re-judges the keys whose holders' other keys changed since the
    /// last call (see the module doc); returns those that changed.
    pub fn settle(&mut self, now: SystemTime) -> Vec<Change> {
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
        self.unsettled.clear();
        let mut keys: Vec<LockKey> = self.held.keys().cloned().collect();
        keys.sort();
        keys.iter()
            .filter_map(|key| self.rejudge(key, now))
            .collect()
    }

    fn unindex(&mut self, key: &LockKey, old: &KeyState, touched: &mut BTreeSet<LockKey>) {
        for holder in &old.holders {
            if let Some(keys) = self.by_pid.get_mut(&holder.pid) {
                keys.remove(key);
                touched.extend(keys.iter().cloned());
                if keys.is_empty() {
                    self.by_pid.remove(&holder.pid);
                }
            }
        }
    }

    fn role_of(&self, pid: u32) -> Role {
        let keys = self.by_pid.get(&pid).into_iter().flatten();
        Role::from_kinds(keys.map(|key| (key.kind(), key.name())))
    }

    fn rejudge(&mut self, key: &LockKey, now: SystemTime) -> Option<Change> {
        let verdict = self
            .held
            .get(key)
            .and_then(|state| judge(state, |pid| self.role_of(pid), now, self.materializing));
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
        let mut verdicts = Verdicts::new(LIMIT);
        let spawn = held(Liveness::Live, 7, "spawn", t(0));
        assert_eq!(verdicts.apply(&tag("t"), Some(&spawn), t(1)), vec![]);
        assert_eq!(verdicts.tick(t(10)), vec![]);
        let late = verdicts.tick(t(31));
        assert_eq!(late.len(), 1);
        assert_eq!(late[0].from, None);
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
        let mut verdicts = Verdicts::new(LIMIT);
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
        let mut verdicts = Verdicts::new(LIMIT);
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
}
