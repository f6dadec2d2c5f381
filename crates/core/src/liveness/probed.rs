//! A batch of probe answers kept small: a claim that is bare free (no
//! holder, no waiter, no error: [`KeyState::FREE`]) is its key alone, so
//! a million stale keys cost their keys, not a million states.
//!
//! Invariant: `free` holds exactly the keys whose answer was
//! [`KeyState::FREE`]; `rest` every other answer.

use super::KeyState;
use crate::disk::key::LockKey;

/// Probe answers, split by whether there is more to say than the key.
#[derive(Debug, Default, Clone)]
pub struct Probed {
    /// Keys answered [`KeyState::FREE`].
    pub free: Vec<LockKey>,
    /// Every other answer (held, in flight, errors…).
    pub rest: Vec<(LockKey, KeyState)>,
}

impl Probed {
    /// Keeps `key`'s answer `state`.
    pub fn push(&mut self, key: LockKey, state: KeyState) {
        if state.is_bare_free() {
            self.free.push(key);
        } else {
            self.rest.push((key, state));
        }
    }

    /// Moves every answer of `other` in.
    pub fn append(&mut self, other: &mut Probed) {
        self.free.append(&mut other.free);
        self.rest.append(&mut other.rest);
    }

    /// The split of `states`.
    pub fn of(states: Vec<(LockKey, KeyState)>) -> Self {
        let mut probed = Self::default();
        for (key, state) in states {
            probed.push(key, state);
        }
        probed
    }

    /// How many keys.
    pub fn len(&self) -> usize {
        self.free.len() + self.rest.len()
    }

    /// True when there is no key.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every key, `rest` first.
    pub fn keys(&self) -> impl Iterator<Item = &LockKey> + Clone {
        self.rest.iter().map(|(key, _)| key).chain(&self.free)
    }

    /// Every answer by value, `rest` first: what a merge moves in.
    pub(crate) fn into_iter_rest_first(self) -> impl ExactSizeIterator<Item = (LockKey, KeyState)> {
        RestFirst {
            rest: self.rest.into_iter(),
            free: self.free.into_iter(),
        }
    }

    /// Every answer as a plain list (`rest` first), for the callers that
    /// probe a handful of keys.
    pub fn into_states(self) -> Vec<(LockKey, KeyState)> {
        self.into_iter_rest_first().collect()
    }

    /// Sorts both halves by key (the display order).
    pub fn sort(&mut self) {
        self.free.sort_unstable();
        self.rest.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    }

    /// Every answer in key order, for a [`Self::sort`]ed batch: the two
    /// halves merged.
    pub fn iter_sorted(&self) -> impl Iterator<Item = (&LockKey, &KeyState)> + Clone {
        Sorted {
            rest: self.rest.iter().peekable(),
            free: self.free.iter().peekable(),
        }
    }
}

/// [`Probed::into_iter_rest_first`].
struct RestFirst {
    rest: std::vec::IntoIter<(LockKey, KeyState)>,
    free: std::vec::IntoIter<LockKey>,
}

impl Iterator for RestFirst {
    type Item = (LockKey, KeyState);

    fn next(&mut self) -> Option<Self::Item> {
        self.rest
            .next()
            .or_else(|| Some((self.free.next()?, KeyState::FREE)))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let len = self.rest.len() + self.free.len();
        (len, Some(len))
    }
}

impl ExactSizeIterator for RestFirst {}

/// [`Probed::iter_sorted`].
#[derive(Clone)]
struct Sorted<'a> {
    rest: std::iter::Peekable<std::slice::Iter<'a, (LockKey, KeyState)>>,
    free: std::iter::Peekable<std::slice::Iter<'a, LockKey>>,
}

impl<'a> Iterator for Sorted<'a> {
    type Item = (&'a LockKey, &'a KeyState);

    fn next(&mut self) -> Option<Self::Item> {
        let rest_first = match (self.rest.peek(), self.free.peek()) {
            (Some((held, _)), Some(free)) => held <= *free,
            (Some(_), None) => true,
            (None, _) => false,
        };
        if rest_first {
            self.rest.next().map(|(key, state)| (key, state))
        } else {
            Some((self.free.next()?, KeyState::free_ref()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::liveness::Liveness;
    use std::path::Path;

    fn tag(name: &str) -> LockKey {
        LockKey::from_coord(Path::new("/s"), Path::new("/s/locks/agents/tags"), name)
    }

    #[test]
    fn bare_free_answers_are_keys_alone_and_come_back_in_order() {
        let mut probed = Probed::default();
        for (name, state) in [
            ("d", KeyState::FREE),
            ("b", KeyState::bare(Liveness::Live)),
            ("a", KeyState::FREE),
            ("c", KeyState::bare(Liveness::Error)),
        ] {
            probed.push(tag(name), state);
        }
        assert_eq!((probed.free.len(), probed.rest.len()), (2, 2));
        probed.sort();
        let names: Vec<&str> = probed.iter_sorted().map(|(key, _)| key.name()).collect();
        assert_eq!(names, ["a", "b", "c", "d"]);
        let free: Vec<bool> = probed
            .iter_sorted()
            .map(|(_, state)| state.liveness == Liveness::Free)
            .collect();
        assert_eq!(free, [true, false, false, true]);
        let moved: Vec<String> = probed
            .clone()
            .into_iter_rest_first()
            .map(|(key, _)| key.name().to_string())
            .collect();
        assert_eq!(moved, ["b", "c", "a", "d"]);
        assert_eq!(probed.len(), 4);
    }
}
