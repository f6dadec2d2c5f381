//! What `serve` knows: the engine's view, folded from its deltas, with
//! the tallies a scrape needs kept up to date as deltas arrive.
//!
//! Invariants: the view is exactly what applying every delta in order
//! gives (as any consumer of the engine); the per-(kind, liveness) counts
//! always equal a count over `keys`, so a scrape never walks every key —
//! only the held ones, which are few.

use std::collections::{HashMap, HashSet};

use crate::disk::{KeyKind, LockKey};
use crate::engine::{Delta, KeyState, Liveness, ScanProblem, WatcherHealth};

/// The engine's current view, plus tallies.
#[derive(Debug, Default)]
pub struct LiveView {
    /// Every claim on disk and its state.
    pub keys: HashMap<LockKey, KeyState>,
    /// The keys of `keys` that are held.
    pub held: HashSet<LockKey>,
    /// How many keys of each kind are in each liveness.
    pub counts: HashMap<(KeyKind, Liveness), u64>,
    /// The watcher's health (`None` before the engine said anything).
    pub health: Option<WatcherHealth>,
    /// The current problems under the locks root.
    pub problems: Vec<ScanProblem>,
    /// True once the first full scan is reported.
    pub synced: bool,
}

impl LiveView {
    /// Folds one delta in.
    pub fn apply(&mut self, delta: &Delta) {
        match delta {
            Delta::Key { key, state, .. } => {
                self.forget(key);
                *self.counts.entry((key.kind, state.liveness)).or_default() += 1;
                if state.liveness.is_held() {
                    self.held.insert(key.clone());
                }
                self.keys.insert(key.clone(), state.clone());
            }
            Delta::Removed { key, .. } => self.forget(key),
            Delta::Health(health) => self.health = Some(health.clone()),
            Delta::Problems(problems) => self.problems = problems.clone(),
            Delta::Synced { .. } => self.synced = true,
        }
    }

    fn forget(&mut self, key: &LockKey) {
        if let Some(old) = self.keys.remove(key) {
            let count = self.counts.entry((key.kind, old.liveness)).or_default();
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
        match &self.health {
            Some(WatcherHealth::Watching) if self.synced => Ok(()),
            Some(WatcherHealth::Watching) => Err("first scan not finished".into()),
            Some(health) => Err(health.describe()),
            None => Err("starting".into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::time::SystemTime;

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
                    *expected.entry((key.kind, state.liveness)).or_default() += 1;
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
