//! The three ways a claim's liveness may be tested, named: a leaf, so
//! that the modules that judge claims (lock-free, passive, by directory,
//! in bulk) and the probe that dispatches among them all name the mode
//! without naming one another.

/// How to test liveness.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Default,
    clap::ValueEnum,
    serde::Serialize,
    serde::Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum ProbeMode {
    /// Read `/proc/locks` matched to the claims' inodes: no lock taken,
    /// nothing opened or written (where /proc/locks sees every holder;
    /// elsewhere locktop says so and probes passively).
    #[default]
    #[serde(rename = "lock-free")]
    LockFree,
    /// Shared-lock probe answering as the SDK's `try_held` (never writes,
    /// but a momentary shared lock makes a racing agent's acquire fail).
    Passive,
    /// Take and release the lock through `locks::try_acquire` (writes;
    /// an exclusive lock for the probe's moment).
    Acquire,
}

impl ProbeMode {
    /// True when a probe in this mode writes to the lock files (truncates
    /// the gate, writes the beacon): its own inotify events echo back, and
    /// it needs write access.
    pub fn writes(self) -> bool {
        match self {
            ProbeMode::Acquire => true,
            ProbeMode::Passive | ProbeMode::LockFree => false,
        }
    }

    /// The word shown in the header.
    pub fn as_str(self) -> &'static str {
        match self {
            ProbeMode::LockFree => "lock-free",
            ProbeMode::Acquire => "acquire",
            ProbeMode::Passive => "passive",
        }
    }

    /// True when a probe in this mode takes a flock on the claim (shared
    /// or exclusive): an agent's non-blocking acquire racing it fails.
    pub fn locks(self) -> bool {
        !self.reads_lock_table()
    }

    /// True when this mode learns liveness from the kernel's lock table
    /// (`/proc/locks`), one read for a whole batch of claims, instead of
    /// a probe per claim: callers batch the keys and read once.
    pub(crate) fn reads_lock_table(self) -> bool {
        self == ProbeMode::LockFree
    }
}
