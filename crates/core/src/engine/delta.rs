//! What the engine tells its consumers: one [`Delta`] per observed change.
//! Invariant: deltas are self-contained — a consumer that applies them in
//! order holds the engine's current view, and never needs to read the
//! filesystem itself.

use std::path::PathBuf;
use std::time::SystemTime;

use crate::disk::LockKey;
use crate::disk::ScanProblem;
use crate::liveness::{KeyState, Liveness};

/// How the engine is watching, shown in the header: every degradation is
/// visible.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "health", rename_all = "snake_case")]
pub enum WatcherHealth {
    /// First scan in progress.
    Starting,
    /// inotify on the whole locks root; periodic sweep as a safety net.
    Watching,
    /// The locks root does not exist yet; watching `ancestor` for it.
    WaitingForRoot {
        /// The nearest existing ancestor being watched.
        #[serde(serialize_with = "crate::time_format::lossy_path")]
        ancestor: PathBuf,
        /// The state dir itself is missing (not only its `locks/`): said
        /// plainly, since a mistyped path looks just like a quiet system.
        /// Absent from journals written before it existed (read as false).
        #[serde(default)]
        state_dir_missing: bool,
    },
    /// Events were lost (queue overflow) or the root was recreated: a full
    /// rescan is running.
    Rescanning {
        /// Why.
        reason: String,
    },
    /// Most events are the engine's own echo (its acquire probes write the
    /// lock files): at least this many per second. Never a loop (an echo is
    /// probed passively), but a doubled event load worth seeing.
    SelfInflicted {
        /// The engine's own echoes in the last second.
        per_second: u64,
    },
    /// inotify cannot be used (e.g. watch limit reached): sweeping on a
    /// short period instead.
    Polling {
        /// Why.
        reason: String,
    },
    /// An attached view (`--connect`) lost its service: what it shows is
    /// as of the last word heard, not live, until the service answers
    /// again and a fresh state replaces it. Never sent by an engine.
    Reconnecting {
        /// Why the connection was lost, or why it cannot be made.
        reason: String,
    },
}

impl WatcherHealth {
    /// One short phrase for the header.
    pub fn describe(&self) -> String {
        match self {
            WatcherHealth::Starting => "starting".into(),
            WatcherHealth::Watching => "watching".into(),
            WatcherHealth::WaitingForRoot {
                ancestor,
                state_dir_missing: true,
            } => format!(
                "NO STATE DIR yet: waiting for it to be created (watching {})",
                ancestor.display()
            ),
            WatcherHealth::WaitingForRoot {
                ancestor,
                state_dir_missing: false,
            } => format!(
                "waiting for locks dir: no agent has run here yet (watching {})",
                ancestor.display()
            ),
            WatcherHealth::Rescanning { reason } => format!("rescanning: {reason}"),
            WatcherHealth::Polling { reason } => format!("polling fallback: {reason}"),
            WatcherHealth::Reconnecting { reason } => {
                format!("RECONNECTING, not live: {reason}")
            }
            WatcherHealth::SelfInflicted { per_second } => {
                format!("{per_second}/s events of its own (acquire probe echo)")
            }
        }
    }
}

/// One change, in the order it was observed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Delta {
    /// A claim was (re)probed and its state differs from the last one sent
    /// (or it is new: `previous == None`).
    Key {
        /// Which claim.
        key: LockKey,
        /// Its state now.
        state: KeyState,
        /// Its liveness before, if it was known.
        previous: Option<Liveness>,
        /// When the change was observed.
        at: SystemTime,
    },
    /// A claim's files are gone from disk.
    Removed {
        /// Which claim.
        key: LockKey,
        /// Its liveness before.
        previous: Liveness,
        /// When.
        at: SystemTime,
    },
    /// The watcher's health changed.
    Health(WatcherHealth),
    /// The complete current set of scan problems (replaces the last one).
    Problems(Vec<ScanProblem>),
    /// A full scan finished: every key on disk has been reported.
    Synced {
        /// How many claims are on disk.
        keys: usize,
        /// When.
        at: SystemTime,
    },
}

impl Delta {
    /// When a key changed or went, for a key's delta (`None` for the
    /// watcher's).
    pub fn changed_at(&self) -> Option<SystemTime> {
        match self {
            Delta::Key { at, .. } | Delta::Removed { at, .. } => Some(*at),
            Delta::Health(_) | Delta::Problems(_) | Delta::Synced { .. } => None,
        }
    }
}
