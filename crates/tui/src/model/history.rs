//! Each key's recent holders, from the deltas: who held it (PID and
//! command), from when, until when, and how it ended — what the details
//! pane lists under the key, live and in a replay.
//!
//! Invariants: bounded — at most [`PER_KEY`] holds per key and
//! [`KEYS`] keys (the key whose history changed longest ago is forgotten
//! first); a hold opens when the key is seen held by a holder it does
//! not list open, and closes when the key stops being held (with the
//! event's word: released, holder exited, killed by locktop, freed), when
//! its files are removed, or when another holder is seen in its place
//! (how the first let go is then unknown, and said so).

use std::collections::{HashMap, VecDeque};
use std::time::SystemTime;

use crate::disk::key::LockKey;
use crate::liveness::ProcessInfo;

use super::EventKind;

/// Holds kept per key.
pub(crate) const PER_KEY: usize = 5;
/// Keys with a history kept.
pub const KEYS: usize = 10_000;

/// How a hold ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// As the event log says (released, holder exited, …).
    Event(EventKind),
    /// The key's files were removed.
    Removed,
    /// Another holder was seen holding it next, with no release between
    /// (changes folded while the screen was behind, or a missed probe).
    Replaced,
}

impl Ended {
    /// The words shown.
    pub fn text(self) -> std::borrow::Cow<'static, str> {
        match self {
            Ended::Event(kind) => kind.text(),
            Ended::Removed => "files removed".into(),
            Ended::Replaced => "another holder next (how it let go unseen)".into(),
        }
    }
}

/// One holder's hold of a key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hold {
    /// The holder.
    pub pid: u32,
    /// Its command line, when known.
    pub command: Option<String>,
    /// Since when it held the key (the key's "held since", else when
    /// the hold was first seen).
    pub from: SystemTime,
    /// When it was seen to end (`None`: it holds it still).
    pub to: Option<SystemTime>,
    /// How it ended.
    pub ended: Option<Ended>,
}

/// Recent holds of every key, bounded.
#[derive(Debug, Clone, Default)]
pub struct History {
    holds: HashMap<LockKey, VecDeque<Hold>>,
    /// Keys by last change, oldest first (with repeats; stale entries
    /// are skipped when evicting).
    order: VecDeque<(u64, LockKey)>,
    stamps: HashMap<LockKey, u64>,
    next_stamp: u64,
}

impl History {
    /// `key` is held by `holder` since `since` (seen `at`): opens a hold
    /// unless that holder's is open; another holder's open hold closes
    /// as [`Ended::Replaced`].
    pub fn held(
        &mut self,
        key: &LockKey,
        holder: &ProcessInfo,
        since: Option<SystemTime>,
        at: SystemTime,
    ) {
        let holds = self.holds.entry(key.clone()).or_default();
        if let Some(open) = holds.back_mut().filter(|hold| hold.to.is_none()) {
            if open.pid == holder.pid {
                return;
            }
            open.to = Some(at);
            open.ended = Some(Ended::Replaced);
        }
        holds.push_back(Hold {
            pid: holder.pid,
            command: holder.cmdline.clone(),
            from: since.unwrap_or(at),
            to: None,
            ended: None,
        });
        while holds.len() > PER_KEY {
            holds.pop_front();
        }
        self.touch(key);
    }

    /// `key` stopped being held `at`, as `ended` says: closes its open
    /// hold, if any.
    pub fn ended(&mut self, key: &LockKey, at: SystemTime, ended: Ended) {
        let Some(open) = self
            .holds
            .get_mut(key)
            .and_then(|holds| holds.back_mut())
            .filter(|hold| hold.to.is_none())
        else {
            return;
        };
        open.to = Some(at);
        open.ended = Some(ended);
        self.touch(key);
    }

    /// `key`'s recent holds, oldest first.
    pub fn of(&self, key: &LockKey) -> impl DoubleEndedIterator<Item = &Hold> {
        self.holds.get(key).into_iter().flatten()
    }

    /// Marks `key` as changed now; forgets the keys changed longest ago
    /// past [`KEYS`].
    fn touch(&mut self, key: &LockKey) {
        self.next_stamp += 1;
        self.stamps.insert(key.clone(), self.next_stamp);
        self.order.push_back((self.next_stamp, key.clone()));
        while self.holds.len() > KEYS {
            let Some((stamp, old)) = self.order.pop_front() else {
                break;
            };
            if self.stamps.get(&old) == Some(&stamp) {
                self.stamps.remove(&old);
                self.holds.remove(&old);
            }
        }
        // Repeats of keys changed again are dropped as they surface.
        if self.order.len() > 4 * KEYS {
            let stamps = &self.stamps;
            self.order
                .retain(|(stamp, key)| stamps.get(key) == Some(stamp));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::fixtures::{free, held, key_delta, process, t, tag};
    use crate::engine::{Delta, Liveness};

    /// From the deltas, as the monitor folds them: a release (the holder
    /// still runs), an exit (it does not), and the files removed.
    #[test]
    fn the_model_keeps_each_keys_holders_and_how_they_let_go() {
        let mut data = super::super::Data::new(std::sync::Arc::new(|pid| Some(pid == 7)));
        let key = tag("x");
        data.apply(Delta::Synced { keys: 0, at: t(0) });
        let steps = [
            key_delta(key.clone(), held(Liveness::Live, 7, "a", t(1)), None, t(1)),
            key_delta(key.clone(), free(), Some(Liveness::Live), t(2)),
            key_delta(
                key.clone(),
                held(Liveness::Live, 8, "b", t(3)),
                Some(Liveness::Free),
                t(3),
            ),
            key_delta(key.clone(), free(), Some(Liveness::Live), t(4)),
            key_delta(
                key.clone(),
                held(Liveness::Live, 9, "c", t(5)),
                Some(Liveness::Free),
                t(5),
            ),
            Delta::Removed {
                key: key.clone(),
                previous: Liveness::Live,
                at: t(6),
            },
        ];
        for delta in steps {
            data.apply(delta);
        }
        let seen: Vec<(u32, SystemTime, Option<SystemTime>, String)> = data
            .history
            .of(&key)
            .map(|hold| {
                let ended = hold.ended.map_or(String::new(), |e| e.text().into_owned());
                (hold.pid, hold.from, hold.to, ended)
            })
            .collect();
        assert_eq!(
            seen,
            [
                (7, t(1), Some(t(2)), "released".to_string()),
                (8, t(3), Some(t(4)), "holder exited".to_string()),
                (9, t(5), Some(t(6)), "files removed".to_string()),
            ]
        );
    }

    #[test]
    fn holds_open_close_and_are_bounded() {
        let mut history = History::default();
        let key = tag("x");
        history.held(&key, &process(7, "a"), Some(t(1)), t(2));
        history.held(&key, &process(7, "a"), Some(t(1)), t(3));
        history.ended(&key, t(4), Ended::Event(EventKind::Released));
        history.held(&key, &process(8, "b"), None, t(5));
        history.held(&key, &process(9, "c"), None, t(6));
        let holds: Vec<_> = history.of(&key).collect();
        assert_eq!(holds.len(), 3);
        assert_eq!(
            (holds[0].pid, holds[0].from, holds[0].to),
            (7, t(1), Some(t(4)))
        );
        assert_eq!(holds[0].ended, Some(Ended::Event(EventKind::Released)));
        assert_eq!(holds[1].ended, Some(Ended::Replaced));
        assert_eq!((holds[2].pid, holds[2].to), (9, None));
        for pid in 10..30 {
            history.held(&key, &process(pid, "d"), None, t(7));
        }
        assert_eq!(history.of(&key).count(), PER_KEY);
        for n in 0..KEYS + 10 {
            history.held(&tag(&format!("k{n}")), &process(1, "e"), None, t(8));
        }
        assert_eq!(history.holds.len(), KEYS);
        assert!(
            history.of(&key).next().is_none(),
            "the oldest key went first"
        );
    }
}
