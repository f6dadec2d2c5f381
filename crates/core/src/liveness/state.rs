//! What locktop knows about one claim: its [`Liveness`] (from a probe)
//! and, once annotated, its holders, waiters and "held since".
//! Invariant: holder details are present only for held claims, and only
//! from a `/proc/locks` read made after the probe.

use std::time::SystemTime;

use super::process::{ProcessInfo, START_TIME_SLACK};

/// The liveness of one claim, as a probe saw it.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
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
    #[serde(rename = "in-flight")]
    InFlight,
    /// Nobody holds it exclusively, but a shared flock does (not an SDK
    /// holder: e.g. util-linux `flock -s`), which blocks every agent's
    /// acquire. The shared holders are the key's holders.
    Shared,
    /// The probe itself failed (see [`KeyState::error`]).
    Error,
}

impl Liveness {
    /// Every liveness, in the order the screen lists them.
    pub const ALL: [Liveness; 6] = [
        Liveness::Live,
        Liveness::Own,
        Liveness::Free,
        Liveness::InFlight,
        Liveness::Shared,
        Liveness::Error,
    ];

    /// The word shown on screen and in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            Liveness::Live => "live",
            Liveness::Own => "own",
            Liveness::Free => "free",
            Liveness::InFlight => "in-flight",
            Liveness::Shared => "shared",
            Liveness::Error => "error",
        }
    }

    /// True when some process holds (or is taking) the claim: an SDK
    /// holder, or a shared lock that blocks agents as surely.
    pub fn is_held(self) -> bool {
        matches!(
            self,
            Liveness::Live | Liveness::Own | Liveness::InFlight | Liveness::Shared
        )
    }
}

/// Everything known about one claim after a probe.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct KeyState {
    /// What the probe found.
    pub liveness: Liveness,
    /// The OS error, when `liveness == Error`.
    pub error: Option<String>,
    /// Processes holding the gate or announce exclusively (from
    /// `/proc/locks`); empty when not held.
    pub holders: Vec<ProcessInfo>,
    /// Contenders: PIDs blocked taking the claim (exclusive `->` rows on
    /// the gate or announce: the SDK's `wait_acquire`).
    pub waiters: Vec<u32>,
    /// Watchers: PIDs blocked waiting for the claim to be released (shared
    /// `->` rows: the SDK's `wait_released`, e.g. a daemon waiting for the
    /// agent to end).
    #[serde(default)]
    pub watchers: Vec<u32>,
    /// When the claim became held: the announce file's mtime (the holder's
    /// beacon write). `None` when not held.
    #[serde(with = "crate::time_format::option")]
    pub since: Option<SystemTime>,
    /// Why a held claim lists no holder, when it lists none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub holders_note: Option<HoldersNote>,
    /// `LOCK_NB` requests refused on the claim's files in the last
    /// minute, when any was (known only from the kernel's lock events: an
    /// agent looping on `try_acquire` never blocks, so nothing else shows
    /// it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refused: Option<RefusedTries>,
    /// Every process waiting on the claim, how, and when it started: the
    /// wait-for graph's edges into this key (see
    /// [`crate::operate::wait_for`]). The PIDs of `waiters` (contenders)
    /// and `watchers` are here, and so are try loops (a PID whose
    /// exclusive `LOCK_NB` tries were refused within [`TRYING_WITHIN`]),
    /// which only the kernel's lock events tell. A PID whose process
    /// started after it was seen waiting is a reused PID, and is in none
    /// of the three lists.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub waiting: Vec<Waiting>,
}

/// A process counts as looping on `try_acquire` for a claim while its
/// last refused exclusive `LOCK_NB` try on it is at most this old (an
/// agent retrying every second or faster stays listed; one that gave up
/// leaves within this and the once-a-second re-judgement).
pub const TRYING_WITHIN: std::time::Duration = std::time::Duration::from_secs(3);

/// How a process waits on a claim.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum WaitKind {
    /// Blocked taking it (the SDK's `wait_acquire`: an exclusive flock
    /// waiter).
    Contender,
    /// Blocked waiting for its release (the SDK's `wait_released`: a
    /// shared flock waiter on the announce).
    Watcher,
    /// Looping on `try_acquire`: its exclusive `LOCK_NB` tries were
    /// refused within [`TRYING_WITHIN`]. It is not blocked in the kernel,
    /// so it may give up: a cycle through it may clear.
    Trying,
    /// Polling whether it is still held, as the seed's
    /// `wait_acquire_family` does between its all-or-nothing tries
    /// (shared `LOCK_NB` tries, every 50 ms): at least [`POLLS_MIN`] of its
    /// shared tries were refused within [`TRYING_WITHIN`]. A guess from the
    /// rate: a passive monitor probing a key that changes that often would
    /// look the same. Such a waiter holds nothing between its tries: a
    /// chain's first link, never part of a cycle.
    Polling,
}

/// How many refused shared tries within [`TRYING_WITHIN`] make a process
/// one polling for a key ([`WaitKind::Polling`]): a family waiter makes
/// about 60 in that time; a passive monitor probes a held key again only
/// when it changes.
pub const POLLS_MIN: u64 = 10;

impl WaitKind {
    /// The words a person reads: `waits to take`, `waits for the release
    /// of`, `keeps trying to take`.
    pub fn verb(self) -> &'static str {
        match self {
            WaitKind::Contender => "waits to take",
            WaitKind::Watcher => "waits for the release of",
            WaitKind::Trying => "keeps trying to take",
            WaitKind::Polling => "polls (a guess, from its rate) for",
        }
    }

    /// True when the waiter is blocked in the kernel: it cannot give up
    /// by itself (a try loop can).
    pub fn is_blocked(self) -> bool {
        matches!(self, WaitKind::Contender | WaitKind::Watcher)
    }
}

/// One process waiting on a claim.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Waiting {
    /// The waiting process.
    pub pid: u32,
    /// How it waits.
    pub how: WaitKind,
    /// When it started (`None`: it is gone, or its start could not be
    /// read): with the PID, who it is — a holder of another key is the
    /// same process only with the same start.
    #[serde(default, with = "crate::time_format::option")]
    pub started: Option<SystemTime>,
}

/// Refused `LOCK_NB` requests on one claim over the last minute.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RefusedTries {
    /// How many (at least 1).
    pub last_minute: u64,
    /// By whom: each PID with its count, most first.
    pub by: Vec<RefusedBy>,
}

/// One process's refused requests.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RefusedBy {
    /// The process that asked.
    pub pid: u32,
    /// How many times it was refused.
    pub count: u64,
    /// When it was last refused (`None` in journals written before it
    /// was kept).
    #[serde(
        default,
        with = "crate::time_format::option",
        skip_serializing_if = "Option::is_none"
    )]
    pub last: Option<SystemTime>,
}

impl RefusedTries {
    /// One phrase: `refused 340× in the last minute, by pid 7 (300), 9 (40)`.
    pub fn describe(&self) -> String {
        let by: Vec<String> = self
            .by
            .iter()
            .take(5)
            .map(|by| format!("{} ({})", by.pid, by.count))
            .collect();
        let more = if self.by.len() > 5 { ", …" } else { "" };
        format!(
            "refused {}× in the last minute, by pid {}{more}",
            self.last_minute,
            by.join(", ")
        )
    }
}

/// Why a held claim lists no holder: locktop says what it knows, never
/// "nobody".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HoldersNote {
    /// `/proc/locks`, read after the probe, names no verified process: the
    /// holder runs outside this PID namespace, or the PID that took the
    /// lock now belongs to another process.
    NotVisible,
    /// It was released before its holder could be looked up (the lookup
    /// is rate-limited; the hold itself was seen).
    ReleasedBeforeLookup,
    /// The process that took it runs and has closed it, and no release was
    /// heard yet: either the release is on its way, or a process it
    /// shared the lock's open file with (a forked child) keeps it — looked
    /// for if the lock still stands a moment later.
    TakerLetGo,
}

impl HoldersNote {
    /// One phrase for screens and text output.
    pub fn describe(self) -> &'static str {
        match self {
            HoldersNote::NotVisible => {
                "holder not visible (outside this PID namespace, or its PID was reused)"
            }
            HoldersNote::ReleasedBeforeLookup => "released before its holder could be looked up",
            HoldersNote::TakerLetGo => {
                "its taker closed it; released, or kept by a process that shares it (looking)"
            }
        }
    }
}

/// "Held since" for a claim whose announce was last written at
/// `announce` and whose holders are `holders` (the first alive one is
/// the one named): never earlier than that holder's own start (beyond
/// [`START_TIME_SLACK`]) — an announce written by an
/// earlier holder must not give this one an age it cannot have.
pub(crate) fn held_since_by(
    announce: Option<SystemTime>,
    holders: &[ProcessInfo],
) -> Option<SystemTime> {
    let started = holders
        .iter()
        .find(|holder| holder.alive)
        .and_then(|holder| holder.started);
    match (announce, started) {
        // Within the start time's precision the announce is this
        // holder's own write.
        (Some(since), Some(started)) if started > since + START_TIME_SLACK => Some(started),
        (since, _) => since,
    }
}

/// [`KeyState::FREE`], for references.
static FREE_STATE: KeyState = KeyState::FREE;

impl KeyState {
    /// A free claim with nothing more to say — what almost every key on
    /// a long-running host is. It owns no allocation.
    pub const FREE: KeyState = KeyState::bare(Liveness::Free);

    /// [`Self::FREE`] as a `'static` reference.
    pub(crate) fn free_ref() -> &'static KeyState {
        &FREE_STATE
    }

    /// True for exactly [`Self::FREE`]: a state that is only its key's.
    pub fn is_bare_free(&self) -> bool {
        *self == Self::FREE
    }

    /// A holder of this held claim that cannot run until someone else acts
    /// (stopped by a signal or a debugger): it will not let go by itself.
    pub fn halted_holder(&self) -> Option<&ProcessInfo> {
        if !self.liveness.is_held() {
            return None;
        }
        self.holders
            .iter()
            .find(|holder| holder.state.is_some_and(|state| state.is_halted()))
    }

    /// A state with no holder details (probe result only).
    pub const fn bare(liveness: Liveness) -> Self {
        Self {
            liveness,
            error: None,
            holders: Vec::new(),
            waiters: Vec::new(),
            watchers: Vec::new(),
            since: None,
            holders_note: None,
            refused: None,
            waiting: Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refused_tries_name_the_most_refused_pids_first_and_at_most_five() {
        let by = (1..=7)
            .map(|pid| RefusedBy {
                pid,
                count: 10 - u64::from(pid),
                last: None,
            })
            .collect();
        let refused = RefusedTries {
            last_minute: 42,
            by,
        };
        assert_eq!(
            refused.describe(),
            "refused 42× in the last minute, by pid 1 (9), 2 (8), 3 (7), 4 (6), 5 (5), …"
        );
    }

    #[test]
    fn json_spells_every_liveness_as_the_screen_does() {
        for liveness in Liveness::ALL {
            let json = serde_json::to_string(&liveness).unwrap();
            assert_eq!(json, format!("\"{}\"", liveness.as_str()));
        }
    }
}
