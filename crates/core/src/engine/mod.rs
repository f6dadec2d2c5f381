//! The live engine: filesystem events and the kernel's lock events (the
//! default source) → changed keys → judgements (from the lock table the
//! events keep, or probes where there are no lock events) → [`Delta`]s.
//!
//! Headless; the TUI and `locktop watch` both consume it. Data flows one
//! way: [`fs_events`] turns notify events into per-key changes,
//! [`crate::liveness`] tells their liveness and names holders, and the
//! engine sends only what changed. It re-exports the words of the layers
//! below that its consumers need ([`Liveness`], [`KeyState`],
//! [`ScanProblem`]).

pub mod delta;
mod direct_watch;
#[cfg(any(test, feature = "test-support"))]
pub mod fixtures;
pub mod fold;
pub(crate) mod fs_change;
pub(crate) mod fs_events;
mod inotify_gate;
mod run;
pub mod source_choice;
pub mod store;
pub mod trace;

use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use tokio::sync::mpsc;

pub use crate::disk::{ScanProblem, ScanProblemKind};
pub use crate::liveness::{KeyState, Liveness};
pub use delta::{Delta, WatcherHealth};
pub use run::{DELTA_QUEUE, FOLD_SLACK};

use crate::context::Context;
use crate::disk::key::LockKey;
use crate::liveness::probe::ProbeMode;
use crate::liveness::process::HolderDetail;

/// How the engine runs.
#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// How event-driven probes test liveness.
    pub probe: ProbeMode,
    /// Period of the safety-net sweep: a rescan of every key, judged from
    /// one `/proc/locks` read with the lock-free probe, passively with
    /// the others (never by acquiring).
    pub sweep_every: Duration,
    /// `Some(n)`: the periodic sweep also waits, after each sweep, `n`
    /// times as long as that sweep ran — sweeping costs at most about
    /// `1/n` of a core however large the tree (the default,
    /// [`SWEEP_STRETCH`], when `--sweep` is not given); `None`: every
    /// `sweep_every`, exactly.
    pub sweep_stretch: Option<u32>,
    /// How long a holder must have used no CPU before its `idle_since` is
    /// set (`--idle-after`): set only past it, so a holder that runs now
    /// and then makes no delta.
    pub idle_after: Duration,
    /// Where to record each change's stages ([`trace`]); `None` (the
    /// default) records nothing.
    pub trace: Option<Arc<trace::Trace>>,
    /// How liveness is learned after the first judgement: inferred from
    /// filesystem events and probes (`probe`), or told by the kernel's
    /// lock events.
    pub source: LivenessSource,
    /// How much of a holder's process is read and sent: named (the
    /// default), or its PID and `stat` alone for a front end that shows
    /// nothing more (`watch`) — then no state this engine sends carries a
    /// command line, unit or parent's command line.
    pub holder_detail: HolderDetail,
}

/// Opens a stream of the kernel's lock events (each engine run opens its
/// own), or says in one line why it cannot.
pub type OpenEvents = Arc<
    dyn Fn() -> Result<Box<dyn crate::liveness::kernel::live_table::EventStream>, String>
        + Send
        + Sync,
>;

/// Where the engine learns liveness from, once its first judgement is
/// made.
#[derive(Clone, Default)]
pub enum LivenessSource {
    /// Filesystem events, each change probed in the engine's probe mode,
    /// with periodic sweeps to catch what events cannot show.
    #[default]
    Inference,
    /// The kernel's lock events: every flock request as it happens; no
    /// probe, no `/proc/locks` read and no sweep in steady state.
    KernelEvents(OpenEvents),
}

impl std::fmt::Debug for LivenessSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            LivenessSource::Inference => "Inference",
            LivenessSource::KernelEvents(_) => "KernelEvents",
        })
    }
}

/// The default of [`EngineConfig::sweep_every`] (`--sweep`).
pub const SWEEP_EVERY: Duration = Duration::from_secs(10);

/// [`EngineConfig::sweep_stretch`] when `--sweep` is not given: sweeps
/// cost at most about 1% of a core (a million keys' sweep runs for
/// seconds).
pub const SWEEP_STRETCH: u32 = 100;

/// The default of [`EngineConfig::idle_after`] (`--idle-after`).
pub const IDLE_AFTER: Duration = Duration::from_secs(600);

impl Default for EngineConfig {
    fn default() -> Self {
        Self {
            probe: ProbeMode::LockFree,
            sweep_every: SWEEP_EVERY,
            sweep_stretch: None,
            idle_after: IDLE_AFTER,
            trace: None,
            source: LivenessSource::Inference,
            holder_detail: HolderDetail::Named,
        }
    }
}

/// Requests to a running engine.
#[derive(Debug)]
pub enum EngineCommand {
    /// Probe these keys now (e.g. after an action of the UI).
    Reprobe(Vec<LockKey>),
    /// Rescan and reprobe everything now.
    Rescan,
    /// Treat holders with this PID as this process's own (test holders).
    AddOwnPid(u32),
    /// Stop treating this PID as own.
    RemoveOwnPid(u32),
    /// Send every key the engine knows, with its state, and the scan
    /// problems, as they are now: for a consumer that keeps only what is
    /// held (`serve`'s full snapshot). Costs the loop one pass over its
    /// keys (a million: tens of milliseconds) and the answer one pointer
    /// per free key (names are shared, not copied).
    Everything(tokio::sync::oneshot::Sender<Everything>),
}

/// Every key the engine knows and the scan problems, at one moment
/// ([`EngineCommand::Everything`]).
#[derive(Debug, Default)]
pub struct Everything {
    /// Every key with its state (free ones as keys alone), unsorted.
    pub keys: crate::liveness::probed::Probed,
    /// The current scan problems, sorted.
    pub problems: Vec<ScanProblem>,
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
    /// `LOCK_NB` requests refused on claims' files, by the claim's kind
    /// (told by the kernel's lock events: always 0 under inference).
    pub refused_tries: RefusedTryCounts,
    /// Files the kernel's filter drops now: foreign files on the state
    /// dir's filesystem that flock often (0 under inference).
    pub foreign_dropped: AtomicU64,
    /// Dropped files that became a claim's, each readmission a judgement
    /// of everything (0 under inference).
    pub readmissions: AtomicU64,
}

/// Refused `LOCK_NB` requests by the kind of claim they were refused on.
#[derive(Debug, Default)]
pub struct RefusedTryCounts {
    /// On tag claims.
    pub tag: AtomicU64,
    /// On instance claims.
    pub instance: AtomicU64,
    /// On other claims under the locks root.
    pub other: AtomicU64,
}

impl RefusedTryCounts {
    /// The counter of `kind`.
    pub fn of(&self, kind: crate::disk::key::KeyKind) -> &AtomicU64 {
        match kind {
            crate::disk::key::KeyKind::Tag => &self.tag,
            crate::disk::key::KeyKind::Instance => &self.instance,
            crate::disk::key::KeyKind::Other => &self.other,
        }
    }
}

/// A running engine: its deltas and a way to command it. Dropping the
/// handle stops the engine.
pub struct EngineHandle {
    /// Every change, in order; a consumer that falls [`DELTA_QUEUE`]
    /// behind gets the rest folded per key (its view stays right, only
    /// intermediate transitions are lost).
    pub deltas: mpsc::Receiver<Delta>,
    /// Requests to the engine.
    pub commands: mpsc::UnboundedSender<EngineCommand>,
    /// What the engine has done so far.
    pub stats: Arc<EngineStats>,
}

/// Starts the engine on `context`'s state dir. Must be called inside a
/// tokio runtime. The first deltas describe the initial scan, ending with
/// [`Delta::Synced`].
pub fn spawn(context: Context, config: EngineConfig) -> EngineHandle {
    start(context, config).0
}

/// [`spawn`] on a thread and a runtime of its own, for a consumer whose
/// runtime may be busy (`serve` under a hundred scrapers): the engine's
/// wake-ups then never queue behind the consumer's tasks, and the OS
/// shares the CPU between them. The thread ends with the engine, when the
/// handle is dropped.
pub fn spawn_dedicated(context: Context, config: EngineConfig) -> std::io::Result<EngineHandle> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let (handed, handle) = std::sync::mpsc::sync_channel(1);
    std::thread::Builder::new()
        .name("locktop-engine".into())
        .spawn(move || {
            runtime.block_on(async move {
                let (handle, task) = start(context, config);
                let _ = handed.send(handle);
                let _ = task.await;
            });
        })?;
    handle
        .recv()
        .map_err(|_| std::io::Error::other("the engine thread ended before it started"))
}

/// Starts the engine task on the current runtime.
fn start(context: Context, config: EngineConfig) -> (EngineHandle, tokio::task::JoinHandle<()>) {
    let (delta_tx, deltas) = mpsc::channel(DELTA_QUEUE);
    let (commands, command_rx) = mpsc::unbounded_channel();
    let stats = Arc::new(EngineStats::default());
    let engine = run::Engine::new(context, config, delta_tx, stats.clone());
    let task = tokio::spawn(engine.run(command_rx));
    let handle = EngineHandle {
        deltas,
        commands,
        stats,
    };
    (handle, task)
}
