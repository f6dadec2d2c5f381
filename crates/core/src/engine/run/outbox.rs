//! The deltas a slow consumer has not taken yet.
//!
//! The engine never waits for its consumer (a stalled terminal must not
//! stop the engine from draining inotify) and never lets memory grow with
//! the number of changes: deltas go out through a channel of
//! [`DELTA_QUEUE`] entries, and once it is full they wait here, folded
//! per key.
//!
//! Invariants:
//! - **Bounded by the keys, not the changes**: deltas wait as they come
//!   until they outnumber the keys on disk by [`FOLD_SLACK`]; then they
//!   are folded to at most one per key (and keys removed since the
//!   consumer last heard of them), plus one health, one problems and one
//!   synced delta.
//! - **Folding keeps what a consumer needs**: a key's waiting delta keeps
//!   the `previous` the consumer last heard, and takes the latest state
//!   and time; a key that appeared and vanished while waiting (the
//!   consumer never heard of it) leaves nothing; a removal followed by a
//!   re-creation is one change from the old liveness to the new state.
//!   Applying the deltas in order still gives the engine's view; only the
//!   intermediate transitions of a consumer that fell behind are lost.
//! - **Order**: nothing overtakes the outbox — while it holds anything,
//!   new deltas queue behind it; slots go out in the order they were
//!   first filled.

use std::collections::{HashMap, VecDeque};

use crate::disk::LockKey;
use crate::engine::Delta;

/// How many deltas the channel to the consumer holds before the engine
/// starts folding them here.
pub const DELTA_QUEUE: usize = 8 * 1024;

/// What one waiting delta stands for.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Slot {
    Key(LockKey),
    Health,
    Problems,
    Synced,
}

/// Deltas waiting for room in the channel, in order. They are kept as
/// they come while they are few — one copy each, no index — and folded
/// per slot ([`SlotFolds`]) whenever they outnumber the keys on disk (plus
/// [`FOLD_SLACK`]): memory stays within about twice that bound, and a
/// burst that fits (the initial scan of 100,000 keys) costs no more than
/// the deltas themselves.
#[derive(Debug, Default)]
pub(super) struct Outbox {
    queue: VecDeque<Delta>,
}

/// How many more waiting deltas than keys on disk trigger a fold.
pub const FOLD_SLACK: usize = 1024;

impl Outbox {
    /// True when nothing waits.
    pub(super) fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    /// How many deltas wait.
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.queue.len()
    }

    /// Adds a delta; folds everything waiting once there are more than
    /// `keys` (the keys on disk) + [`FOLD_SLACK`].
    pub(super) fn push(&mut self, delta: Delta, keys: usize) {
        self.queue.push_back(delta);
        if self.queue.len() > keys + FOLD_SLACK {
            let mut folder = SlotFolds::default();
            self.queue.drain(..).for_each(|delta| folder.push(delta));
            self.queue.extend(std::iter::from_fn(|| folder.pop()));
        }
    }

    /// The oldest waiting delta.
    pub(super) fn pop(&mut self) -> Option<Delta> {
        self.queue.pop_front()
    }

    /// Puts back a delta that `pop` gave and the channel refused.
    pub(super) fn push_front(&mut self, delta: Delta) {
        self.queue.push_front(delta);
    }
}

/// Deltas folded per slot, in the order each slot was first filled.
#[derive(Debug, Default)]
struct SlotFolds {
    order: VecDeque<Slot>,
    waiting: HashMap<Slot, Delta>,
}

impl SlotFolds {
    /// How many slots wait.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.order.len()
    }

    /// Adds a delta, folding it into the one waiting for the same slot.
    fn push(&mut self, delta: Delta) {
        let slot = slot_of(&delta);
        match self.waiting.remove(&slot) {
            None => {
                self.order.push_back(slot.clone());
                self.waiting.insert(slot, delta);
            }
            Some(older) => match fold(older, delta) {
                Some(folded) => {
                    self.waiting.insert(slot, folded);
                }
                None => self.order.retain(|waiting| waiting != &slot),
            },
        }
    }

    /// The delta of the slot filled first.
    fn pop(&mut self) -> Option<Delta> {
        let slot = self.order.pop_front()?;
        self.waiting.remove(&slot)
    }
}

fn slot_of(delta: &Delta) -> Slot {
    match delta {
        Delta::Key { key, .. } | Delta::Removed { key, .. } => Slot::Key(key.clone()),
        Delta::Health(_) => Slot::Health,
        Delta::Problems(_) => Slot::Problems,
        Delta::Synced { .. } => Slot::Synced,
    }
}

/// One delta standing for `older` then `newer` (same slot); `None` when
/// together they change nothing the consumer knows of.
fn fold(older: Delta, newer: Delta) -> Option<Delta> {
    let heard = match &older {
        Delta::Key { previous, .. } => *previous,
        Delta::Removed { previous, .. } => Some(*previous),
        _ => return Some(newer),
    };
    match newer {
        Delta::Key { key, state, at, .. } => Some(Delta::Key {
            key,
            state,
            previous: heard,
            at,
        }),
        Delta::Removed { key, at, .. } => {
            heard.map(|previous| Delta::Removed { key, previous, at })
        }
        other => Some(other),
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::time::SystemTime;

    use super::*;
    use crate::engine::{KeyState, Liveness, WatcherHealth};

    fn key(name: &str) -> LockKey {
        LockKey::from_coord(Path::new("/s"), Path::new("/s/locks/agents/tags"), name)
    }

    fn changed(name: &str, from: Option<Liveness>, to: Liveness) -> Delta {
        Delta::Key {
            key: key(name),
            state: KeyState::bare(to),
            previous: from,
            at: SystemTime::UNIX_EPOCH,
        }
    }

    fn removed(name: &str, from: Liveness) -> Delta {
        Delta::Removed {
            key: key(name),
            previous: from,
            at: SystemTime::UNIX_EPOCH,
        }
    }

    fn drain(outbox: &mut SlotFolds) -> Vec<Delta> {
        std::iter::from_fn(|| outbox.pop()).collect()
    }

    #[test]
    fn a_key_keeps_what_the_consumer_heard_and_takes_the_latest_state() {
        let mut outbox = SlotFolds::default();
        outbox.push(changed("a", Some(Liveness::Free), Liveness::Live));
        outbox.push(changed("b", None, Liveness::Free));
        outbox.push(changed("a", Some(Liveness::Live), Liveness::Free));
        outbox.push(changed("a", Some(Liveness::Free), Liveness::Live));
        assert_eq!(outbox.len(), 2);
        assert_eq!(
            drain(&mut outbox),
            vec![
                changed("a", Some(Liveness::Free), Liveness::Live),
                changed("b", None, Liveness::Free),
            ]
        );
    }

    #[test]
    fn removals_fold_without_inventing_or_losing_a_key() {
        let mut outbox = SlotFolds::default();
        // Never heard of, gone again: nothing.
        outbox.push(changed("new", None, Liveness::Live));
        outbox.push(removed("new", Liveness::Live));
        // Heard of, gone: a removal from what was heard.
        outbox.push(changed("old", Some(Liveness::Free), Liveness::Live));
        outbox.push(removed("old", Liveness::Live));
        // Gone and back: one change from the old liveness.
        outbox.push(removed("back", Liveness::Live));
        outbox.push(changed("back", None, Liveness::Free));
        assert_eq!(
            drain(&mut outbox),
            vec![
                removed("old", Liveness::Free),
                changed("back", Some(Liveness::Live), Liveness::Free),
            ]
        );
    }

    #[test]
    fn health_problems_and_synced_keep_the_latest_and_nothing_overtakes() {
        let mut outbox = SlotFolds::default();
        outbox.push(Delta::Health(WatcherHealth::Starting));
        outbox.push(changed("a", None, Liveness::Free));
        outbox.push(Delta::Health(WatcherHealth::Watching));
        let first = outbox.pop().unwrap();
        assert_eq!(first, Delta::Health(WatcherHealth::Watching));
        assert_eq!(outbox.pop(), Some(changed("a", None, Liveness::Free)));
        assert_eq!(outbox.pop(), None);
    }

    #[test]
    fn deltas_wait_as_they_come_and_fold_once_they_outnumber_the_keys() {
        let mut outbox = Outbox::default();
        let livenesses = [Liveness::Free, Liveness::Live];
        let mut last: HashMap<String, Liveness> = HashMap::new();
        for i in 0..5_000 {
            let name = format!("k{}", i % 5);
            let to = livenesses[(i / 5) % 2];
            let from = last.insert(name.clone(), to);
            outbox.push(changed(&name, from, to), 5);
            assert!(
                outbox.len() <= 5 + FOLD_SLACK + 1,
                "{} waiting",
                outbox.len()
            );
        }
        let mut few = Outbox::default();
        few.push(changed("a", None, Liveness::Live), 0);
        few.push(changed("a", Some(Liveness::Live), Liveness::Free), 0);
        assert_eq!(few.len(), 2, "below the bound nothing is folded");
        let mut heard: HashMap<String, Liveness> = HashMap::new();
        while let Some(delta) = outbox.pop() {
            if let Delta::Key {
                key,
                state,
                previous,
                ..
            } = delta
            {
                assert_eq!(heard.get(key.name()).copied(), previous);
                heard.insert(key.name().to_string(), state.liveness);
            }
        }
        assert_eq!(heard, last, "the folded queue ends at the truth");
    }

    proptest::proptest! {
        /// Applying the folded deltas gives the same view as applying
        /// every delta, and at most one delta per key waits.
        #[test]
        fn folding_never_changes_the_final_view(
            steps in proptest::collection::vec((0..4usize, 0..4u8), 0..60),
        ) {
            let mut outbox = SlotFolds::default();
            let mut truth: HashMap<String, Liveness> = HashMap::new();
            let mut heard = truth.clone();
            let livenesses = [Liveness::Free, Liveness::Live, Liveness::InFlight];
            for (k, what) in steps {
                let name = format!("k{k}");
                let before = truth.get(&name).copied();
                let delta = match (what, before) {
                    (3, Some(previous)) => {
                        truth.remove(&name);
                        removed(&name, previous)
                    }
                    (3, None) => continue,
                    (l, _) => {
                        let to = livenesses[l as usize];
                        truth.insert(name.clone(), to);
                        changed(&name, before, to)
                    }
                };
                outbox.push(delta);
            }
            proptest::prop_assert!(outbox.len() <= 4);
            for delta in drain(&mut outbox) {
                match delta {
                    Delta::Key { key, state, previous, .. } => {
                        proptest::prop_assert_eq!(heard.get(key.name()).copied(), previous);
                        heard.insert(key.name().to_string(), state.liveness);
                    }
                    Delta::Removed { key, previous, .. } => {
                        proptest::prop_assert_eq!(heard.remove(key.name()), Some(previous));
                    }
                    _ => {}
                }
            }
            proptest::prop_assert_eq!(heard, truth);
        }
    }
}
