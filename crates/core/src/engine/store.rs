//! Every claim's state, kept small: a bare free claim
//! ([`KeyState::FREE`]) costs its key and a null pointer, any other state
//! is boxed. On a host whose locks root holds a million stale keys and a
//! few held ones, that is the difference between tens and hundreds of
//! megabytes.
//!
//! Invariant: [`KeyStore::get`] returns exactly the state last
//! [`KeyStore::insert`]ed for the key (a free one as
//! [`KeyState::free_ref`]); [`KeyStore::held_len`] counts the stored
//! states that are held.

use std::collections::HashMap;
use std::sync::Arc;

use crate::disk::key::LockKey;
use crate::liveness::KeyState;

/// A map from claims to their states, compact for free ones.
#[derive(Debug, Default, Clone)]
pub struct KeyStore {
    /// `None`: [`KeyState::FREE`].
    states: HashMap<LockKey, Option<Arc<KeyState>>>,
    held: usize,
}

impl KeyStore {
    /// `key`'s state, if the key is known.
    pub fn get(&self, key: &LockKey) -> Option<&KeyState> {
        self.states.get(key).map(Self::state_of)
    }

    /// Whether `key` is known.
    pub fn contains_key(&self, key: &LockKey) -> bool {
        self.states.contains_key(key)
    }

    /// Keeps `state` as `key`'s.
    pub fn insert(&mut self, key: LockKey, state: KeyState) {
        self.insert_shared(key, Arc::new(state));
    }

    /// Keeps `state` as `key`'s, shared with whoever else keeps it (the
    /// held view).
    pub fn insert_shared(&mut self, key: LockKey, state: Arc<KeyState>) {
        let held = state.liveness.is_held();
        let stored = (!state.is_bare_free()).then_some(state);
        if let Some(old) = self.states.insert(key, stored)
            && old.is_some_and(|old| old.liveness.is_held())
        {
            self.held -= 1;
        }
        self.held += usize::from(held);
    }

    /// Forgets `key`; its last state, if it was known.
    pub fn remove(&mut self, key: &LockKey) -> Option<KeyState> {
        let state = self
            .states
            .remove(key)?
            .map_or(KeyState::FREE, Arc::unwrap_or_clone);
        self.held -= usize::from(state.liveness.is_held());
        Some(state)
    }

    /// Room for `more` keys without growing (a sweep's findings are
    /// merged into a table sized once).
    pub(crate) fn reserve(&mut self, more: usize) {
        self.states.reserve(more);
    }

    /// How many keys.
    pub fn len(&self) -> usize {
        self.states.len()
    }

    /// True when no key is known.
    pub fn is_empty(&self) -> bool {
        self.states.is_empty()
    }

    /// How many of them are held.
    pub(crate) fn held_len(&self) -> usize {
        self.held
    }

    /// Every key.
    pub fn keys(&self) -> impl Iterator<Item = &LockKey> {
        self.states.keys()
    }

    /// Every key with its state.
    pub fn iter(&self) -> impl Iterator<Item = (&LockKey, &KeyState)> {
        self.states
            .iter()
            .map(|(key, state)| (key, Self::state_of(state)))
    }

    fn state_of(stored: &Option<Arc<KeyState>>) -> &KeyState {
        stored.as_deref().unwrap_or(KeyState::free_ref())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::fixtures::{held, t, tag};
    use crate::liveness::Liveness;

    /// What goes in comes out, free or not, and the held count follows
    /// every insert and removal.
    #[test]
    fn a_store_gives_back_what_it_was_given_and_counts_the_held() {
        let mut store = KeyStore::default();
        let live = held(Liveness::Live, 7, "agent", t(1));
        store.insert(tag("a"), KeyState::FREE);
        store.insert(tag("b"), live.clone());
        store.insert(tag("c"), KeyState::bare(Liveness::Error));
        assert_eq!(store.get(&tag("a")), Some(&KeyState::FREE));
        assert_eq!(store.get(&tag("b")), Some(&live));
        assert_eq!((store.len(), store.held_len()), (3, 1));
        store.insert(tag("b"), KeyState::FREE);
        assert_eq!(store.held_len(), 0);
        store.insert(tag("a"), live.clone());
        assert_eq!(store.held_len(), 1);
        assert_eq!(store.remove(&tag("a")), Some(live));
        assert_eq!(store.remove(&tag("a")), None);
        assert_eq!(store.remove(&tag("b")), Some(KeyState::FREE));
        assert_eq!((store.len(), store.held_len()), (1, 0));
        let noteworthy: Vec<&str> = store
            .iter()
            .filter(|(_, state)| !state.is_bare_free())
            .map(|(key, _)| key.name())
            .collect();
        assert_eq!(noteworthy, ["c"]);
    }
}
