//! What `serve` knows: the engine's view, folded from its deltas by the
//! engine's one rule ([`crate::engine::fold`]), with the tallies a scrape
//! needs kept up to date as deltas arrive.
//!
//! Invariants: the view is exactly what applying every delta in order
//! gives (as any consumer of the engine); the per-(kind, liveness) counts
//! always equal a count over `keys`, so a scrape never walks every key —
//! only the held ones, which are few.

use std::collections::{HashMap, HashSet};
use std::time::SystemTime;

use crate::disk::{KeyKind, LockKey};
use crate::engine::fold::{Folder, WatcherView, fold};
use crate::engine::{Delta, KeyState, Liveness, WatcherHealth};

/// The engine's current view, plus tallies.
#[derive(Debug, Default)]
pub struct LiveView {
    /// Every claim on disk and its state.
    pub keys: HashMap<LockKey, KeyState>,
    /// The keys of `keys` that are held.
    pub held: HashSet<LockKey>,
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
        self.keys.get(key).map(|state| state.liveness)
    }

    fn put(&mut self, key: LockKey, state: KeyState, _: Option<Liveness>, _: SystemTime) {
        self.forget(&key);
        *self.counts.entry((key.kind(), state.liveness)).or_default() += 1;
        if state.liveness.is_held() {
            self.held.insert(key.clone());
        }
        self.keys.insert(key, state);
    }

    fn remove(&mut self, key: &LockKey, _: SystemTime) {
        self.forget(key);
    }
}

impl LiveView {
    /// Folds one delta in.
    pub fn apply(&mut self, delta: &Delta) {
        fold(self, delta.clone());
    }

    fn forget(&mut self, key: &LockKey) {
        if let Some(old) = self.keys.remove(key) {
            let count = self.counts.entry((key.kind(), old.liveness)).or_default();
            *count = count.saturating_sub(1);
            self.held.remove(key);
        }
    }

    /// The held keys with their states.
    pub fn held(&self) -> impl Iterator<Item = (&LockKey, &KeyState)> {
        self.held
            .iter()
            .filter_map(|key| self.keys.get_key_value(key))
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
        /// The tallies always equal a count over the keys.
        #[test]
        fn counts_always_match_the_keys(steps in proptest::collection::vec((0..5usize, 0..4u8), 0..80)) {
            let mut view = LiveView::default();
            let livenesses = [Liveness::Free, Liveness::Live, Liveness::InFlight];
            for (k, what) in steps {
                let key = key(&format!("k{k}"));
                let previous = view.keys.get(&key).map(|s| s.liveness);
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
                view.apply(&delta);
                let mut expected: HashMap<(KeyKind, Liveness), u64> = HashMap::new();
                for (key, state) in &view.keys {
                    *expected.entry((key.kind(), state.liveness)).or_default() += 1;
                }
                view.counts.retain(|_, count| *count > 0);
                proptest::prop_assert_eq!(&view.counts, &expected);
                let held: HashSet<&LockKey> = view.keys.iter()
                    .filter(|(_, s)| s.liveness.is_held()).map(|(k, _)| k).collect();
                proptest::prop_assert_eq!(view.held.iter().collect::<HashSet<_>>(), held);
            }
        }
    }
}
