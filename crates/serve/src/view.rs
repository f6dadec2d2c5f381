//! What `serve` knows: the engine's view, followed by the one follower
//! ([`Follower`]: the engine's one fold rule, the one held view of
//! holders, roles and verdicts that every `/events` stream, the journal
//! and each scrape read, the judgement clock), kept as what a scrape,
//! `/snapshot.json` and `/events` need — the noteworthy keys (held, in
//! flight, errors) with their states and a count of every key by kind and
//! liveness. A free key is counted, never kept: the engine has it (a full
//! `/snapshot.json?all=true` asks the engine), so a million stale keys
//! are not held twice.
//!
//! Invariants: the noteworthy keys are exactly the keys whose last state
//! is not [`KeyState::FREE`], with that state; a held key's state is kept
//! once, in the held view, and the others' in [`Tallies`]; the
//! per-(kind, liveness) counts always equal a count over every key the
//! deltas named and did not remove (the engine's `previous` says what a
//! key was), so a scrape never walks every key — only the noteworthy
//! ones, which are few.

use std::collections::HashMap;
use std::time::SystemTime;

use crate::disk::{KeyKind, LockKey};
use crate::engine::fold::{Folder, WatcherView};
use crate::engine::{Delta, KeyState, Liveness, WatcherHealth};
use crate::operate::held::HeldView;
use crate::stream::follow::{Followed, Follower, Judged};

/// What `serve` keeps beside the held view: the noteworthy keys that are
/// not held, the tallies, the watcher.
#[derive(Debug, Default)]
pub struct Tallies {
    /// Every claim whose state is more than "free" and not held, with
    /// that state (in flight, error, a free key with waiters).
    unheld: HashMap<LockKey, KeyState>,
    /// How many keys of each kind are in each liveness.
    counts: HashMap<(KeyKind, Liveness), u64>,
    /// What the deltas said of the watcher: health, problems, scans.
    watcher: WatcherView,
}

impl Folder for Tallies {
    fn watcher_mut(&mut self) -> &mut WatcherView {
        &mut self.watcher
    }

    fn liveness_of(&self, key: &LockKey) -> Option<Liveness> {
        self.unheld.get(key).map(|state| state.liveness)
    }

    fn put(&mut self, key: LockKey, state: KeyState, previous: Option<Liveness>, _: SystemTime) {
        self.recount(key.kind(), previous, state.liveness);
        if state.is_bare_free() || state.liveness.is_held() {
            self.unheld.remove(&key);
        } else {
            self.unheld.insert(key, state);
        }
    }

    fn put_shared(
        &mut self,
        key: LockKey,
        state: std::sync::Arc<KeyState>,
        previous: Option<Liveness>,
        _: SystemTime,
    ) {
        // A held state (the only kind shared): counted, and kept by the
        // held view alone.
        self.recount(key.kind(), previous, state.liveness);
        self.unheld.remove(&key);
    }

    fn remove(&mut self, key: &LockKey, previous: Liveness, _: SystemTime) {
        self.uncount(key.kind(), previous);
        self.unheld.remove(key);
    }
}

impl Tallies {
    /// A key of `kind` went from `previous` (if it was known) to `now`.
    fn recount(&mut self, kind: KeyKind, previous: Option<Liveness>, now: Liveness) {
        if let Some(previous) = previous {
            self.uncount(kind, previous);
        }
        *self.counts.entry((kind, now)).or_default() += 1;
    }

    fn uncount(&mut self, kind: KeyKind, liveness: Liveness) {
        let count = self.counts.entry((kind, liveness)).or_default();
        *count = count.saturating_sub(1);
    }
}

/// The engine's current view as `serve` keeps it, plus tallies.
#[derive(Debug)]
pub struct LiveView {
    follower: Follower<Tallies>,
}

impl LiveView {
    /// Nothing seen yet; spawns become suspects after `materializing`.
    pub fn new(materializing: std::time::Duration) -> Self {
        Self {
            follower: Follower::new(Tallies::default(), materializing),
        }
    }

    /// Folds one delta in, received now; returns what it means for the
    /// change stream (see [`Followed`]).
    pub fn apply(&mut self, delta: &Delta) -> Followed {
        self.follower
            .apply_received(delta.clone(), SystemTime::now())
    }

    /// The judgement due at `now` (see [`Follower::judge`]).
    pub fn judge(&mut self, now: SystemTime) -> Option<Judged> {
        self.follower.judge(now)
    }

    /// When [`LiveView::judge`] next has something to do.
    pub fn due(&self) -> Option<SystemTime> {
        self.follower.due()
    }

    /// The held keys' holders, roles and verdicts.
    pub fn held(&self) -> &HeldView {
        self.follower.held()
    }

    /// What the deltas said of the watcher: health, problems, scans.
    pub fn watcher(&self) -> &WatcherView {
        &self.follower.keep().watcher
    }

    /// How many keys of each kind are in each liveness.
    pub fn counts(&self) -> &HashMap<(KeyKind, Liveness), u64> {
        &self.follower.keep().counts
    }

    /// Every claim whose state is more than "free", with that state, in
    /// no order: the held ones, then the others.
    pub fn noteworthy(&self) -> impl Iterator<Item = (&LockKey, &KeyState)> {
        self.held().held().chain(&self.follower.keep().unheld)
    }

    /// True while the watcher is healthy enough to trust the view.
    pub fn healthy(&self) -> Result<(), String> {
        let watcher = self.watcher();
        match &watcher.health {
            WatcherHealth::Watching if watcher.synced() => Ok(()),
            WatcherHealth::Watching => Err("first scan not finished".into()),
            health => Err(health.describe()),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    fn key(name: &str) -> LockKey {
        LockKey::from_coord(Path::new("/s"), Path::new("/s/locks/agents/tags"), name)
    }

    proptest::proptest! {
        /// The tallies always equal a count over the keys, and the held view
        /// holds exactly the held ones.
        #[test]
        fn counts_always_match_the_keys(steps in proptest::collection::vec((0..5usize, 0..4u8), 0..80)) {
            let mut view = LiveView::new(std::time::Duration::from_secs(30));
            // What the engine knows (and so says as `previous`).
            let mut truth: HashMap<LockKey, KeyState> = HashMap::new();
            let livenesses = [Liveness::Free, Liveness::Live, Liveness::InFlight];
            for (k, what) in steps {
                let key = key(&format!("k{k}"));
                let previous = truth.get(&key).map(|s| s.liveness);
                let delta = match (what, previous) {
                    (3, Some(previous)) => Delta::Removed { key, previous, at: SystemTime::UNIX_EPOCH },
                    (3, None) => continue,
                    (l, _) => Delta::Key {
                        key,
                        state: KeyState::bare(livenesses[l as usize]),
                        previous,
                        at: SystemTime::UNIX_EPOCH,
                    },
                };
                match &delta {
                    Delta::Key { key, state, .. } => truth.insert(key.clone(), state.clone()),
                    Delta::Removed { key, .. } => truth.remove(key),
                    _ => None,
                };
                view.apply(&delta);
                let mut expected: HashMap<(KeyKind, Liveness), u64> = HashMap::new();
                for (key, state) in &truth {
                    *expected.entry((key.kind(), state.liveness)).or_default() += 1;
                }
                let mut counts = view.counts().clone();
                counts.retain(|_, count| *count > 0);
                proptest::prop_assert_eq!(&counts, &expected);
                let noteworthy: HashMap<LockKey, KeyState> = truth.iter()
                    .filter(|(_, s)| !s.is_bare_free())
                    .map(|(k, s)| (k.clone(), s.clone()))
                    .collect();
                let kept: HashMap<LockKey, KeyState> = view.noteworthy()
                    .map(|(k, s)| (k.clone(), s.clone()))
                    .collect();
                proptest::prop_assert_eq!(kept.len(), view.noteworthy().count(), "each kept once");
                proptest::prop_assert_eq!(&kept, &noteworthy);
                let held: HashMap<LockKey, KeyState> = view.held().held()
                    .map(|(k, s)| (k.clone(), s.clone()))
                    .collect();
                let truly_held: HashMap<LockKey, KeyState> = noteworthy.into_iter()
                    .filter(|(_, s)| s.liveness.is_held())
                    .collect();
                proptest::prop_assert_eq!(held, truly_held);
            }
        }
    }
}
