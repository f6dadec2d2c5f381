//! The event log: acquire / release / exit transitions, and the start and
//! end of verdicts that need attention (stopped, contended, orphaned…),
//! newest first.
//!
//! Invariants: only transitions are logged (a key first seen during the
//! initial scan is not an "acquire"); the log never holds more than
//! [`EVENT_LOG_CAPACITY`] events — the oldest are dropped first. The word
//! of a held → free transition says only what locktop knows when it
//! folds the delta in: whether the last holder's PID still runs (one
//! `/proc/<pid>/stat` read, at that moment), and whether locktop itself
//! signalled that process — never why a process ended.

use std::collections::VecDeque;
use std::time::SystemTime;

use crate::disk::key::LockKey;
use crate::engine::Liveness;
use crate::liveness::process::ProcessInfo;

/// How many events the log keeps.
pub(crate) const EVENT_LOG_CAPACITY: usize = 10_000;

/// How many processes locktop remembers having signalled.
const SIGNALLED_CAPACITY: usize = 64;

/// What happened to a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventKind {
    /// It became held (live or own).
    Acquired,
    /// It became free and its last holder still runs: it let go.
    Released,
    /// It became free and its last holder's PID is gone (a clean exit, a
    /// crash or someone else's signal: locktop cannot tell).
    HolderExited,
    /// It became free, its last holder is gone, and locktop had signalled
    /// that process (`K`).
    KilledByLocktop,
    /// It became free and no holder PID was ever visible for it (outside
    /// this PID namespace, or gone before it was looked up).
    Freed,
    /// A held key's verdict became one that needs attention (its word).
    Flagged(&'static str),
    /// A held key's verdict that needed attention ended (its word); the
    /// key is still held.
    Cleared(&'static str),
}

impl EventKind {
    /// The words shown in the log.
    pub fn text(self) -> std::borrow::Cow<'static, str> {
        match self {
            EventKind::Acquired => "acquired".into(),
            EventKind::Released => "released".into(),
            EventKind::HolderExited => "holder exited".into(),
            EventKind::KilledByLocktop => "killed by locktop".into(),
            EventKind::Freed => "freed".into(),
            EventKind::Flagged(word) => word.into(),
            EventKind::Cleared(word) => format!("not {word}").into(),
        }
    }
}

/// The word for a held key that became free, from its last `holders`:
/// released while one still runs, else killed by locktop when locktop
/// signalled one of them, else holder exited; freed when none was known,
/// or when whether they still run cannot be told (`pid_alive` says
/// `None`).
pub fn ended(
    holders: &[ProcessInfo],
    log: &EventLog,
    pid_alive: &dyn Fn(u32) -> Option<bool>,
) -> EventKind {
    let alive: Vec<Option<bool>> = holders.iter().map(|p| pid_alive(p.pid)).collect();
    if holders.is_empty() {
        EventKind::Freed
    } else if alive.contains(&Some(true)) {
        EventKind::Released
    } else if alive.contains(&None) {
        EventKind::Freed
    } else if holders.iter().any(|p| log.was_signalled(p)) {
        EventKind::KilledByLocktop
    } else {
        EventKind::HolderExited
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

/// Classifies a key's transition `previous → now`. `ended` names a
/// held → free transition (asked only for one; see [`ended`]).
pub fn classify(
    previous: Option<Liveness>,
    now: Liveness,
    initial_scan: bool,
    ended: impl FnOnce() -> EventKind,
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
        Liveness::Free if held_before => Some(ended()),
        _ => None,
    }
}

/// A bounded, newest-first log, and the processes locktop signalled.
#[derive(Debug, Clone, Default)]
pub struct EventLog {
    events: VecDeque<Event>,
    total: u64,
    /// `(pid, start time)` of the last processes locktop signalled.
    signalled: VecDeque<(u32, Option<SystemTime>)>,
}

impl EventLog {
    /// Remembers that locktop signalled `pid` (started at `started`, when
    /// known), so its keys' ends read "killed by locktop". Bounded: the
    /// oldest of [`SIGNALLED_CAPACITY`] is forgotten first.
    pub(crate) fn note_signalled(&mut self, pid: u32, started: Option<SystemTime>) {
        if self.signalled.len() == SIGNALLED_CAPACITY {
            self.signalled.pop_front();
        }
        self.signalled.push_back((pid, started));
    }

    /// True when locktop signalled this process: same PID, and the same
    /// start time when both are known (a reused PID is another process).
    pub(crate) fn was_signalled(&self, process: &ProcessInfo) -> bool {
        self.signalled.iter().any(|&(pid, started)| {
            pid == process.pid
                && (started.is_none() || process.started.is_none() || started == process.started)
        })
    }

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
