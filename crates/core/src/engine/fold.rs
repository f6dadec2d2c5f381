//! The one rule that turns the engine's [`Delta`]s into what they say
//! now: each key's latest state, the watcher's health, the scan problems,
//! how many full scans finished. The monitor's model, `serve`'s view and
//! the tests all fold deltas through [`fold`], so an operator, a scraper
//! and a test can never believe different things of one sequence of
//! deltas; each keeps the states where it needs them (a map in [`Fold`],
//! the monitor's tree) by implementing [`Folder`].
//!
//! Invariants: a `Key` delta replaces the key's state, and its `previous`
//! is the delta's own word, else the liveness the folder had for the key
//! (the engine's word wins: it saw the transition); `Removed` forgets the
//! key; `Health` and `Problems` replace; `Synced` counts a finished full
//! scan; a key or removal delta moves `last_change`.

use std::time::SystemTime;

use crate::disk::key::LockKey;

use super::store::KeyStore;
use super::{Delta, KeyState, Liveness, ScanProblem, WatcherHealth};

/// What the deltas said of the watcher.
#[derive(Debug, Clone, PartialEq)]
pub struct WatcherView {
    /// The last health.
    pub health: WatcherHealth,
    /// The last scan problems.
    pub problems: Vec<ScanProblem>,
    /// How many full scans finished (`Synced` deltas).
    pub syncs: u64,
    /// When the engine last reported a key's change or removal.
    pub last_change: Option<SystemTime>,
}

impl Default for WatcherView {
    fn default() -> Self {
        Self {
            health: WatcherHealth::Starting,
            problems: Vec::new(),
            syncs: 0,
            last_change: None,
        }
    }
}

impl WatcherView {
    /// True once the first full scan finished: until then keys are being
    /// discovered, not changing.
    pub fn synced(&self) -> bool {
        self.syncs > 0
    }
}

/// Something deltas are folded into: where it keeps key states, and its
/// [`WatcherView`].
pub trait Folder {
    /// Its view of the watcher.
    fn watcher_mut(&mut self) -> &mut WatcherView;
    /// The liveness it has for `key`, if it has the key.
    fn liveness_of(&self, key: &LockKey) -> Option<Liveness>;
    /// `key` is now in `state`, `previous` its liveness before (see the
    /// module's invariants), as observed `at`.
    fn put(&mut self, key: LockKey, state: KeyState, previous: Option<Liveness>, at: SystemTime);
    /// [`Folder::put`] with the state shared with the held view (a
    /// folder that keeps it whole keeps this one copy; by default, its
    /// own).
    fn put_shared(
        &mut self,
        key: LockKey,
        state: std::sync::Arc<KeyState>,
        previous: Option<Liveness>,
        at: SystemTime,
    ) {
        self.put(key, std::sync::Arc::unwrap_or_clone(state), previous, at);
    }
    /// `key`'s files are gone (observed `at`); it was `previous` (the
    /// engine's word).
    fn remove(&mut self, key: &LockKey, previous: Liveness, at: SystemTime);
    /// The watcher's problems were replaced (for a folder that derives
    /// something from them).
    fn problems_replaced(&mut self) {}
}

/// Folds one delta into `folder`: the rule (see the module doc).
pub fn fold(folder: &mut impl Folder, delta: Delta) {
    match delta {
        Delta::Key {
            key,
            state,
            previous,
            at,
        } => {
            folder.watcher_mut().last_change = Some(at);
            let previous = previous.or_else(|| folder.liveness_of(&key));
            folder.put(key, state, previous, at);
        }
        Delta::Removed { key, previous, at } => {
            folder.watcher_mut().last_change = Some(at);
            folder.remove(&key, previous, at);
        }
        Delta::Health(health) => folder.watcher_mut().health = health,
        Delta::Problems(problems) => {
            folder.watcher_mut().problems = problems;
            folder.problems_replaced();
        }
        Delta::Synced { .. } => folder.watcher_mut().syncs += 1,
    }
}

/// The plain fold: every key's latest state (a free one as a null
/// pointer: [`KeyStore`]) and the watcher's view. The journal's recorder
/// keeps one to write checkpoints, its reader one to answer "what was it
/// at this time", the tests one to compare with.
#[derive(Debug, Clone, Default)]
pub struct Fold {
    keys: KeyStore,
    watcher: WatcherView,
}

impl Folder for Fold {
    fn watcher_mut(&mut self) -> &mut WatcherView {
        &mut self.watcher
    }

    fn liveness_of(&self, key: &LockKey) -> Option<Liveness> {
        self.keys.get(key).map(|state| state.liveness)
    }

    fn put(&mut self, key: LockKey, state: KeyState, _: Option<Liveness>, _: SystemTime) {
        self.keys.insert(key, state);
    }

    fn put_shared(
        &mut self,
        key: LockKey,
        state: std::sync::Arc<KeyState>,
        _: Option<Liveness>,
        _: SystemTime,
    ) {
        self.keys.insert_shared(key, state);
    }

    fn remove(&mut self, key: &LockKey, _: Liveness, _: SystemTime) {
        self.keys.remove(key);
    }
}

impl Fold {
    /// Folds one delta in.
    pub fn apply(&mut self, delta: Delta) {
        fold(self, delta);
    }

    /// Folds one delta in, keeping `shared` as its key's state instead of
    /// the delta's own copy of it (the same state, kept once with the
    /// held view that made it: [`crate::stream::follow::Followed::shared`]).
    pub fn apply_sharing(&mut self, delta: Delta, shared: Option<std::sync::Arc<KeyState>>) {
        match shared {
            Some(shared) => fold(&mut Sharing { fold: self, shared }, delta),
            None => fold(self, delta),
        }
    }

    /// Every key reported and not removed, with its latest state.
    pub fn keys(&self) -> &KeyStore {
        &self.keys
    }

    /// Keeps `state` as `key`'s, as a whole state says it (a journal's
    /// checkpoint).
    pub fn put_key(&mut self, key: LockKey, state: KeyState) {
        self.keys.insert(key, state);
    }

    /// Replaces what is known of the watcher (a journal's checkpoint).
    pub fn set_watcher(&mut self, watcher: WatcherView) {
        self.watcher = watcher;
    }

    /// `key`'s latest state, if it was reported and not removed.
    pub fn state(&self, key: &LockKey) -> Option<&KeyState> {
        self.keys.get(key)
    }

    /// What the deltas said of the watcher.
    pub fn watcher(&self) -> &WatcherView {
        &self.watcher
    }
}

/// A [`Fold`] folding one delta whose key's state is kept shared.
struct Sharing<'a> {
    fold: &'a mut Fold,
    shared: std::sync::Arc<KeyState>,
}

impl Folder for Sharing<'_> {
    fn watcher_mut(&mut self) -> &mut WatcherView {
        self.fold.watcher_mut()
    }

    fn liveness_of(&self, key: &LockKey) -> Option<Liveness> {
        self.fold.liveness_of(key)
    }

    fn put(&mut self, key: LockKey, _: KeyState, previous: Option<Liveness>, at: SystemTime) {
        self.fold.put_shared(key, self.shared.clone(), previous, at);
    }

    fn remove(&mut self, key: &LockKey, previous: Liveness, at: SystemTime) {
        self.fold.remove(key, previous, at);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::fixtures::{free, held, key_delta, t, tag};
    use std::collections::HashMap;

    /// What a folder was told: each put's previous liveness.
    #[derive(Default)]
    struct Told {
        watcher: WatcherView,
        states: HashMap<LockKey, Liveness>,
        previous: Vec<Option<Liveness>>,
    }

    impl Folder for Told {
        fn watcher_mut(&mut self) -> &mut WatcherView {
            &mut self.watcher
        }
        fn liveness_of(&self, key: &LockKey) -> Option<Liveness> {
            self.states.get(key).copied()
        }
        fn put(
            &mut self,
            key: LockKey,
            state: KeyState,
            previous: Option<Liveness>,
            _: SystemTime,
        ) {
            self.previous.push(previous);
            self.states.insert(key, state.liveness);
        }
        fn remove(&mut self, key: &LockKey, _: Liveness, _: SystemTime) {
            self.states.remove(key);
        }
    }

    /// A shared state is kept as the one copy it is.
    #[test]
    fn a_shared_state_is_kept_not_copied() {
        let mut fold = Fold::default();
        let live = std::sync::Arc::new(held(Liveness::Live, 7, "agent", t(0)));
        let delta = key_delta(tag("a"), (*live).clone(), None, t(1));
        fold.apply_sharing(delta, Some(live.clone()));
        let kept = fold.state(&tag("a")).expect("kept");
        assert!(std::ptr::eq(kept, &*live), "the shared copy");
        fold.apply(key_delta(tag("a"), free(), None, t(2)));
        assert_eq!(std::sync::Arc::strong_count(&live), 1, "released");
    }

    #[test]
    fn previous_is_the_engines_word_else_what_the_folder_had() {
        let mut told = Told::default();
        let live = held(Liveness::Live, 7, "agent", t(0));
        fold(&mut told, key_delta(tag("a"), live.clone(), None, t(1)));
        fold(&mut told, key_delta(tag("a"), free(), None, t(2)));
        fold(
            &mut told,
            key_delta(tag("a"), live, Some(Liveness::InFlight), t(3)),
        );
        assert_eq!(
            told.previous,
            [None, Some(Liveness::Live), Some(Liveness::InFlight)]
        );
        assert_eq!(told.watcher.last_change, Some(t(3)));
    }

    #[test]
    fn a_fold_keeps_the_latest_state_forgets_removed_keys_and_counts_scans() {
        let mut fold = Fold::default();
        let live = held(Liveness::Live, 7, "agent", t(0));
        fold.apply(key_delta(tag("a"), live, None, t(1)));
        fold.apply(key_delta(tag("b"), free(), None, t(1)));
        fold.apply(Delta::Synced { keys: 2, at: t(1) });
        fold.apply(key_delta(tag("a"), free(), Some(Liveness::Live), t(2)));
        fold.apply(Delta::Removed {
            key: tag("b"),
            previous: Liveness::Free,
            at: t(3),
        });
        fold.apply(Delta::Health(WatcherHealth::Watching));
        assert_eq!(fold.keys().len(), 1);
        assert_eq!(
            fold.state(&tag("a")).map(|s| s.liveness),
            Some(Liveness::Free)
        );
        assert_eq!(fold.watcher().syncs, 1);
        assert!(fold.watcher().synced());
        assert_eq!(fold.watcher().health, WatcherHealth::Watching);
        assert_eq!(fold.watcher().last_change, Some(t(3)));
    }
}
