//! What the engine tells its consumers: one [`Delta`] per observed change.
//! Invariant: deltas are self-contained — a consumer that applies them in
//! order holds the engine's current view, and never needs to read the
//! filesystem itself.

use std::path::PathBuf;
use std::time::SystemTime;

use crate::key::LockKey;
use crate::process::ProcessInfo;

/// The liveness of one claim, as a probe saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Liveness {
    /// Held by another live process.
    Live,
    /// Held by this process (its in-process holders) or by one of its
    /// own test holder children.
    Own,
    /// Files left by a dead or finished holder: nobody holds it.
    Free,
    /// Gate held, announce not: an acquisition or release in flight — or a
    /// holder stopped mid-acquisition (the probe's wait is bounded).
    InFlight,
    /// The probe itself failed (see [`KeyState::error`]).
    Error,
}

impl Liveness {
    /// The word shown on screen and in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            Liveness::Live => "live",
            Liveness::Own => "own",
            Liveness::Free => "free",
            Liveness::InFlight => "in-flight",
            Liveness::Error => "error",
        }
    }

    /// True when some process holds (or is taking) the claim.
    pub fn is_held(self) -> bool {
        matches!(self, Liveness::Live | Liveness::Own | Liveness::InFlight)
    }
}

/// Everything known about one claim after a probe.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct KeyState {
    /// What the probe found.
    pub liveness: Liveness,
    /// The OS error, when `liveness == Error`.
    pub error: Option<String>,
    /// Processes holding the gate or announce exclusively (from
    /// `/proc/locks`); empty when not held.
    pub holders: Vec<ProcessInfo>,
    /// PIDs blocked waiting on the gate or announce (`->` rows).
    pub waiters: Vec<u32>,
    /// When the claim became held: the announce file's mtime (the holder's
    /// beacon write). `None` when not held.
    #[serde(with = "crate::time_format::option")]
    pub since: Option<SystemTime>,
}

impl KeyState {
    /// A state with no holder details (probe result only).
    pub fn bare(liveness: Liveness) -> Self {
        Self {
            liveness,
            error: None,
            holders: Vec::new(),
            waiters: Vec::new(),
            since: None,
        }
    }
}

/// How the engine is watching, shown in the header: every degradation is
/// visible.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "health", rename_all = "snake_case")]
pub enum WatchHealth {
    /// First scan in progress.
    Starting,
    /// inotify on the whole locks root; periodic sweep as a safety net.
    Watching,
    /// The locks root does not exist yet; watching `ancestor` for it.
    WaitingForRoot {
        /// The nearest existing ancestor being watched.
        #[serde(serialize_with = "crate::time_format::lossy_path")]
        ancestor: PathBuf,
    },
    /// Events were lost (queue overflow) or the root was recreated: a full
    /// rescan is running.
    Rescanning {
        /// Why.
        reason: String,
    },
    /// inotify cannot be used (e.g. watch limit reached): sweeping on a
    /// short period instead.
    Polling {
        /// Why.
        reason: String,
    },
}

impl WatchHealth {
    /// One short phrase for the header.
    pub fn describe(&self) -> String {
        match self {
            WatchHealth::Starting => "starting".into(),
            WatchHealth::Watching => "watching".into(),
            WatchHealth::WaitingForRoot { ancestor } => {
                format!("waiting for locks dir (watching {})", ancestor.display())
            }
            WatchHealth::Rescanning { reason } => format!("rescanning: {reason}"),
            WatchHealth::Polling { reason } => format!("polling fallback: {reason}"),
        }
    }
}

/// Something under the locks root that is not a well-formed claim. Never
/// fatal, never silently dropped.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
pub struct ScanProblem {
    /// Where.
    #[serde(serialize_with = "crate::time_format::lossy_path")]
    pub path: PathBuf,
    /// What is wrong with it.
    pub kind: ScanProblemKind,
}

/// The kinds of [`ScanProblem`].
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(tag = "problem", content = "detail", rename_all = "snake_case")]
pub enum ScanProblemKind {
    /// A file that is neither a gate nor an announce.
    ForeignFile,
    /// A `*.lock` name whose escape does not decode.
    MalformedEscape,
    /// A name that is not UTF-8.
    NonUtf8Name,
    /// A symlink (never followed).
    Symlink,
    /// A directory that could not be read, with the OS error.
    Unreadable(String),
    /// An announce file without its gate.
    OrphanAnnounce,
}

impl ScanProblemKind {
    /// Short human description.
    pub fn describe(&self) -> String {
        match self {
            ScanProblemKind::ForeignFile => "foreign file".into(),
            ScanProblemKind::MalformedEscape => "malformed escape in lock name".into(),
            ScanProblemKind::NonUtf8Name => "name is not UTF-8".into(),
            ScanProblemKind::Symlink => "symlink (not followed)".into(),
            ScanProblemKind::Unreadable(error) => format!("unreadable: {error}"),
            ScanProblemKind::OrphanAnnounce => "announce file without a gate".into(),
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
    Health(WatchHealth),
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
