//! The recorded state: every key's latest state and the watcher's view,
//! folded from deltas by the engine's one rule ([`crate::engine::fold`]).
//! The recorder keeps one to write checkpoints; a reader keeps one to
//! answer "what was it at this time".
//!
//! Invariant: a state folded from a checkpoint and the changes after it
//! equals the recorder's state when it wrote the last of those changes
//! (the recorder writes its checkpoints from this same fold). Free keys
//! cost their key and a null pointer ([`KeyStore`]).

use std::time::SystemTime;

use crate::disk::key::LockKey;
use crate::engine::fold::{Folder, WatcherView, fold};
use crate::engine::store::KeyStore;
use crate::engine::{Delta, KeyState, Liveness};

/// Every key's latest state and the watcher's view.
#[derive(Debug, Default, Clone)]
pub struct JournalState {
    keys: KeyStore,
    watcher: WatcherView,
}

impl Folder for JournalState {
    fn watcher_mut(&mut self) -> &mut WatcherView {
        &mut self.watcher
    }

    fn liveness_of(&self, key: &LockKey) -> Option<Liveness> {
        self.keys.get(key).map(|state| state.liveness)
    }

    fn put(&mut self, key: LockKey, state: KeyState, _: Option<Liveness>, _: SystemTime) {
        self.keys.insert(key, state);
    }

    fn remove(&mut self, key: &LockKey, _: Liveness, _: SystemTime) {
        self.keys.remove(key);
    }
}

impl JournalState {
    /// Folds one delta in.
    pub fn apply(&mut self, delta: Delta) {
        fold(self, delta);
    }

    /// Keeps `state` as `key`'s (a checkpoint's line).
    pub fn put_key(&mut self, key: LockKey, state: KeyState) {
        self.keys.insert(key, state);
    }

    /// Every key with its latest state.
    pub fn keys(&self) -> &KeyStore {
        &self.keys
    }

    /// What the deltas said of the watcher.
    pub fn watcher(&self) -> &WatcherView {
        &self.watcher
    }

    /// The watcher's view, replaced (a checkpoint's head).
    pub fn watcher_mut(&mut self) -> &mut WatcherView {
        &mut self.watcher
    }
}
