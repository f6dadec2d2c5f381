//! What `serve` knows: the engine's view, folded from its deltas by the
//! engine's one rule ([`crate::engine::fold`]), kept as what a scrape,
//! `/snapshot.json` and `/events` need — the noteworthy keys (held, in
//! flight, errors) with their states, the one held view (holders, roles,
//! verdicts: [`HeldView`]) that every `/events` stream, the journal and
//! each scrape read, and a count of every key by kind and liveness. A
//! free key is counted, never kept: the engine has it (a full
//! `/snapshot.json?all=true` asks the engine), so a million stale keys
//! are not held twice.
//!
//! Invariants: `noteworthy` is exactly the keys whose last state is not
//! [`KeyState::FREE`], with that state; `held` is fed every key delta
//! `noteworthy` is, in the same order; the per-(kind, liveness) counts
//! always equal a count over every key the deltas named and did not
//! remove (the engine's `previous` says what a key was), so a scrape
//! never walks every key — only the held ones, which are few.

use std::collections::HashMap;
use std::time::SystemTime;

use crate::disk::{KeyKind, LockKey};
use crate::engine::fold::{Folder, WatcherView, fold};
use crate::engine::{Delta, KeyState, Liveness, WatcherHealth};
use crate::operate::held::HeldView;
use crate::stream::{DeltaLines, lines_of};

/// The engine's current view as `serve` keeps it, plus tallies.
#[derive(Debug)]
pub struct LiveView {
    /// Every claim whose state is more than "free", with that state.
    pub noteworthy: HashMap<LockKey, KeyState>,
    /// The held keys' holders, roles and verdicts.
    pub held: HeldView,
    /// How many keys of each kind are in each liveness.
    pub counts: HashMap<(KeyKind, Liveness), u64>,
    /// What the deltas said of the watcher: health, problems, scans.
    pub watcher: WatcherView,
}

impl Folder for LiveView {
    fn watcher_mut(&mut self) -> &mut WatcherView {
        &mut self.watcher
    }

    fn liveness_of(&self, key: &LockKey) -> Option<Liveness> {
        self.noteworthy.get(key).map(|state| state.liveness)
    }

    fn put(&mut self, key: LockKey, state: KeyState, previous: Option<Liveness>, _: SystemTime) {
        if let Some(previous) = previous {
            self.uncount(key.kind(), previous);
        }
        *self.counts.entry((key.kind(), state.liveness)).or_default() += 1;
        if state.is_bare_free() {
            self.noteworthy.remove(&key);
        } else {
            self.noteworthy.insert(key, state);
        }
    }

    fn remove(&mut self, key: &LockKey, previous: Liveness, _: SystemTime) {
        self.uncount(key.kind(), previous);
        self.noteworthy.remove(key);
    }
}

impl LiveView {
    /// Nothing seen yet; spawns become suspects after `materializing`.
    pub fn new(materializing: std::time::Duration) -> Self {
        Self {
            noteworthy: HashMap::new(),
            held: HeldView::new(materializing),
            counts: HashMap::new(),
            watcher: WatcherView::default(),
        }
    }

    /// Folds one delta in; returns what it means for the change stream
    /// (its own key's verdict change; see [`lines_of`]).
    pub fn apply(&mut self, delta: &Delta) -> DeltaLines {
        let lines = lines_of(delta, &mut self.held);
        fold(self, delta.clone());
        lines
    }

    fn uncount(&mut self, kind: KeyKind, liveness: Liveness) {
        let count = self.counts.entry((kind, liveness)).or_default();
        *count = count.saturating_sub(1);
    }

    /// True while the watcher is healthy enough to trust the view.
    pub fn healthy(&self) -> Result<(), String> {
        match &self.watcher.health {
            WatcherHealth::Watching if self.watcher.synced() => Ok(()),
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
                view.counts.retain(|_, count| *count > 0);
                proptest::prop_assert_eq!(&view.counts, &expected);
                let noteworthy: HashMap<LockKey, KeyState> = truth.iter()
                    .filter(|(_, s)| !s.is_bare_free())
                    .map(|(k, s)| (k.clone(), s.clone()))
                    .collect();
                proptest::prop_assert_eq!(&view.noteworthy, &noteworthy);
                let held: HashMap<LockKey, KeyState> = view.held.held()
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
