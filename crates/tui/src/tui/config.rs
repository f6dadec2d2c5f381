//! What the monitor is told at its start, not by the engine: the state
//! dir, how liveness is learned, whether it may write, its colours and
//! thresholds. A leaf: the views read it, and it reads nothing of the UI.

use std::path::PathBuf;

use crate::liveness::probe::ProbeMode;

use super::theme::Theme;

/// What the header says about this run (not from the engine).
#[derive(Debug, Clone)]
pub struct AppConfig {
    /// The ObjectiveAI state dir being watched.
    pub state_dir: PathBuf,
    /// The engine's probe mode.
    pub probe: ProbeMode,
    /// Why the probe is not the one asked for (the lock-free probe cannot
    /// see every holder here), shown in the header.
    pub probe_fallback: Option<String>,
    /// Liveness comes from the kernel's lock events, not from probes.
    pub kernel_events: bool,
    /// Why the kernel's lock events are not used (`--source auto` fell
    /// back to inference), shown in the header.
    pub source_fallback: Option<String>,
    /// Whether actions that write are disabled.
    pub read_only: bool,
    /// Colours or NO_COLOR.
    pub theme: Theme,
    /// How long a spawn may hold tags without an AIH lock before it is a
    /// suspect.
    pub materializing_after: std::time::Duration,
}
