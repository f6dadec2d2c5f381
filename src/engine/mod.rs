//! The live engine: filesystem events → changed keys → probes → [`Delta`]s.
//!
//! Headless; the TUI and `locktop watch` both consume it. Data flows one
//! way: [`fs_events`] turns notify events into per-key changes,
//! [`crate::liveness`] tells their liveness and names holders, and the
//! engine sends only what changed. It re-exports the words of the layers
//! below that its consumers need ([`Liveness`], [`KeyState`],
//! [`ScanProblem`]).

pub mod delta;
pub mod fs_events;
mod run;

use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use tokio::sync::mpsc;

pub use crate::disk::{ScanProblem, ScanProblemKind};
pub use crate::liveness::{KeyState, Liveness};
pub use delta::{Delta, WatcherHealth};

use crate::context::Context;
use crate::disk::key::LockKey;
use crate::liveness::probe::ProbeMode;

/// How the engine runs.
#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// How event-driven probes test liveness.
    pub probe: ProbeMode,
    /// Period of the safety-net sweep (rescan + passive probe of every key).
    pub sweep_every: Duration,
    /// How long a holder must have used no CPU before its `idle_since` is
    /// set (`--idle-after`): set only past it, so a holder that runs now
    /// and then makes no delta.
    pub idle_after: Duration,
}

/// The default of [`EngineConfig::idle_after`] (`--idle-after`).
pub const IDLE_AFTER: Duration = Duration::from_secs(600);

impl Default for EngineConfig {
    fn default() -> Self {
        Self {
            probe: ProbeMode::Acquire,
            sweep_every: Duration::from_secs(10),
            idle_after: IDLE_AFTER,
        }
    }
}

/// Requests to a running engine.
#[derive(Debug, Clone)]
pub enum EngineCommand {
    /// Probe these keys now (e.g. after an action of the UI).
    Reprobe(Vec<LockKey>),
    /// Rescan and reprobe everything now.
    Rescan,
    /// Treat holders with this PID as this process's own (test holders).
    AddOwnPid(u32),
    /// Stop treating this PID as own.
    RemoveOwnPid(u32),
}

/// Counters of what the engine did (for tests, benchmarks and the log).
#[derive(Debug, Default)]
pub struct EngineStats {
    /// Liveness probes run (event-driven and sweeps).
    pub probes: AtomicU64,
    /// Filesystem changes received (after dropping opens).
    pub events: AtomicU64,
    /// Reads of `/proc/locks`.
    pub index_reads: AtomicU64,
    /// Full sweeps (initial, rescans, periodic).
    pub sweeps: AtomicU64,
    /// Holder processes re-read by the once-a-second refresh of held keys
    /// (`/proc/<pid>/stat`; never `/proc/locks`).
    pub holder_refreshes: AtomicU64,
}

/// A running engine: its deltas and a way to command it. Dropping the
/// handle stops the engine.
pub struct EngineHandle {
    /// Every change, in order.
    pub deltas: mpsc::UnboundedReceiver<Delta>,
    /// Requests to the engine.
    pub commands: mpsc::UnboundedSender<EngineCommand>,
    /// What the engine has done so far.
    pub stats: Arc<EngineStats>,
}

/// Starts the engine on `context`'s state dir. Must be called inside a
/// tokio runtime. The first deltas describe the initial scan, ending with
/// [`Delta::Synced`].
pub fn spawn(context: Context, config: EngineConfig) -> EngineHandle {
    let (delta_tx, deltas) = mpsc::unbounded_channel();
    let (commands, command_rx) = mpsc::unbounded_channel();
    let stats = Arc::new(EngineStats::default());
    let engine = run::Engine::new(context, config, delta_tx, stats.clone());
    tokio::spawn(engine.run(command_rx));
    EngineHandle {
        deltas,
        commands,
        stats,
    }
}
