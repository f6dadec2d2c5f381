//! The event log: acquire / release / death transitions, newest first.
//!
//! Invariants: only transitions are logged (a key first seen during the
//! initial scan is not an "acquire"); the log never holds more than
//! [`EVENT_LOG_CAPACITY`] events — the oldest are dropped first.

use std::collections::VecDeque;
use std::time::SystemTime;

use crate::disk::key::LockKey;
use crate::engine::Liveness;

/// How many events the log keeps.
pub const EVENT_LOG_CAPACITY: usize = 10_000;

/// What happened to a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventKind {
    /// It became held (live or own).
    Acquired,
    /// Its holder let go while staying alive.
    Released,
    /// It became free and its holder process is gone.
    Died,
}

impl EventKind {
    /// The word shown in the log.
    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::Acquired => "acquired",
            EventKind::Released => "released",
            EventKind::Died => "died",
        }
    }
}

/// One logged transition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// When the engine observed it.
    pub at: SystemTime,
    /// What happened.
    pub kind: EventKind,
    /// Which claim.
    pub key: LockKey,
    /// The holder involved: the new holder for an acquire, the last known
    /// holder for a release or death.
    pub pid: Option<u32>,
    /// That holder's command line, when known.
    pub command: Option<String>,
}

/// Classifies a key's transition `previous → now`. `holder_gone` answers
/// whether the last holder's process has exited (asked only for a
/// held → free transition).
pub fn classify(
    previous: Option<Liveness>,
    now: Liveness,
    initial_scan: bool,
    holder_gone: impl FnOnce() -> bool,
) -> Option<EventKind> {
    let held_before = previous.is_some_and(Liveness::is_held);
    let owned_before = matches!(previous, Some(Liveness::Live | Liveness::Own));
    match now {
        Liveness::Live | Liveness::Own if !owned_before => {
            if previous.is_none() && initial_scan {
                None
            } else {
                Some(EventKind::Acquired)
            }
        }
        Liveness::Free if held_before => Some(if holder_gone() {
            EventKind::Died
        } else {
            EventKind::Released
        }),
        _ => None,
    }
}

/// A bounded, newest-first log.
#[derive(Debug, Clone, Default)]
pub struct EventLog {
    events: VecDeque<Event>,
    total: u64,
}

impl EventLog {
    /// Logs `event` as the newest, dropping the oldest past capacity.
    pub fn push(&mut self, event: Event) {
        if self.events.len() == EVENT_LOG_CAPACITY {
            self.events.pop_back();
        }
        self.events.push_front(event);
        self.total += 1;
    }

    /// How many events are kept.
    pub fn len(&self) -> usize {
        self.events.len()
    }

    /// True when nothing was logged.
    pub fn is_empty(&self) -> bool {
        self.events.is_empty()
    }

    /// The `index`-th newest event.
    pub fn get(&self, index: usize) -> Option<&Event> {
        self.events.get(index)
    }

    /// Newest first.
    pub fn iter(&self) -> impl Iterator<Item = &Event> {
        self.events.iter()
    }

    /// How many events were ever logged (dropped ones included).
    pub fn total(&self) -> u64 {
        self.total
    }
}
