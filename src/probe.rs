//! The liveness of one claim, in one of two modes.
//!
//! - `acquire`: `locks::try_acquire` through the monitor's `Context`,
//!   released at once. Writes (empty gate contents, the announce beacon),
//!   so it echoes as inotify events; used only for keys that changed.
//! - `passive`: the SDK's `try_held` (a shared-lock probe; never writes).
//!
//! Invariants: a probe never holds a key longer than the probe itself; it
//! never waits unboundedly on a holder stopped mid-acquisition (in-flight);
//! it never creates a file for a key whose gate is gone.

/// How to test liveness.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ProbeMode {
    /// Take and release the lock through `locks::try_acquire` (writes).
    #[default]
    Acquire,
    /// Shared-lock probe through the SDK's `try_held` (never writes).
    Passive,
}

impl ProbeMode {
    /// The word shown in the header.
    pub fn as_str(self) -> &'static str {
        match self {
            ProbeMode::Acquire => "acquire",
            ProbeMode::Passive => "passive",
        }
    }
}
