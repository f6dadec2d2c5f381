//! The command line: clap definitions and dispatch. Each subcommand lives
//! in its own file (`watch` in a folder: its queue and stdout writer);
//! this one only parses, resolves the state dir, runs and turns errors
//! into one line on stderr.
//!
//! Exit codes (every subcommand): 0 success, 1 "busy" (a lock could not be
//! taken now), 2 bad input or any other error; 3 is one command's own
//! (`check`: busy because of a deadlock; `replay --from/--to`: part of
//! the window is unknown).

mod check;
mod connect;
mod demo;
mod docs;
mod engine_args;
mod family_args;
mod hold;
pub mod placement;
mod record;
mod replay;
#[cfg(feature = "serve")]
mod serve;
#[cfg(not(feature = "serve"))]
#[path = "serve_unbuilt.rs"]
mod serve;
mod snapshot;
pub mod source_args;
mod thresholds;
mod wait;
mod watch;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};

use crate::liveness::probe::ProbeMode;

pub use family_args::FamilyArgs;

/// Exit code for "a member was busy".
pub const EXIT_BUSY: u8 = 1;
/// Exit code for bad input and every other error.
pub const EXIT_ERROR: u8 = 2;

/// What `--version` says: the crate's version and the commit it was built
/// from (`-dirty` when tracked files differed from it), as the build
/// script found it.
pub const VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), " (", env!("LOCKTOP_COMMIT"), ")");

/// locktop — a live monitor for ObjectiveAI agent locks.
#[derive(Debug, Parser)]
#[command(
    name = "locktop",
    version = VERSION,
    about = "a live monitor for ObjectiveAI agent locks",
    long_about = "a live monitor for ObjectiveAI agent locks. Without a command it opens \
        the monitor on the state dir: a live tree of agent instance hierarchies and tag \
        locks, who holds each (PID, command line, since when), what needs attention \
        (a stopped or orphaned holder, a spawn materializing too long, an idle holder, \
        a contended key), and test holders of any family. By default it observes \
        without taking any lock: from the kernel's own lock events where it may read \
        them (root, or CAP_PERFMON), else from /proc/locks. The commands print the same \
        facts for scripts (snapshot, watch, check, wait), serve them to Prometheus \
        (serve), or hold a family (hold). Linux only.\n\n\
        The monitor's options are also taken before a command that has an option of the \
        same name (`locktop --source kernel watch` is `locktop watch --source kernel`); \
        before one that has none, they are refused."
)]
pub struct Cli {
    /// The ObjectiveAI state dir (default: $OBJECTIVEAI_DIR/state/$OBJECTIVEAI_STATE,
    /// i.e. ~/.objectiveai/state/default).
    #[arg(long, global = true, value_name = "PATH")]
    pub state_dir: Option<PathBuf>,

    /// What to do (default: open the monitor).
    #[command(subcommand)]
    pub command: Option<Command>,

    #[command(flatten)]
    pub monitor: MonitorArgs,
}

/// Options of the monitor (the TUI), for `locktop` and `locktop demo`.
#[derive(Debug, Clone, clap::Args)]
#[command(next_help_heading = "Monitor options")]
pub struct MonitorArgs {
    /// How probes test liveness: lock-free (default: /proc/locks, no lock
    /// taken), passive (momentary shared locks) or acquire (writes; not
    /// with --read-only).
    #[arg(long, value_enum, default_value_t = ProbeMode::LockFree)]
    pub probe: ProbeMode,
    /// Seconds between safety-net sweeps (a rescan of every key: one
    /// /proc/locks read with the lock-free probe, passive probes with the
    /// others). Not given: every 10 s, stretched on a large tree so that
    /// sweeping costs at most about 1% of a core; given: exactly this.
    #[arg(long, value_name = "SECS")]
    pub sweep: Option<f64>,
    /// Write nothing and signal nothing: the probe is lock-free or passive
    /// (never acquire), and test holders and K are disabled.
    #[arg(long)]
    pub read_only: bool,
    /// Write logs to this file (default: no log; nothing is ever logged to the screen).
    #[arg(long, value_name = "FILE")]
    pub log: Option<PathBuf>,
    /// When holders become suspects.
    #[command(flatten)]
    pub thresholds: thresholds::ThresholdArgs,
    /// Where liveness comes from.
    #[command(flatten)]
    pub source: source_args::SourceArgs,
    #[command(flatten)]
    pub connect: connect::ConnectArgs,
}

impl MonitorArgs {
    /// The probe asked for, or a one-line error: `--read-only` refuses
    /// a probe that writes (`--probe acquire` takes an exclusive lock).
    pub fn requested_probe(&self) -> anyhow::Result<ProbeMode> {
        if self.read_only && self.probe.writes() {
            anyhow::bail!(
                "--probe {} takes locks and writes: not with --read-only",
                self.probe.as_str()
            );
        }
        Ok(self.probe)
    }
}

impl Default for MonitorArgs {
    fn default() -> Self {
        Self {
            probe: ProbeMode::LockFree,
            sweep: None,
            read_only: false,
            log: None,
            thresholds: thresholds::ThresholdArgs::default(),
            source: source_args::SourceArgs::default(),
            connect: connect::ConnectArgs::default(),
        }
    }
}

/// The subcommands, in the order the help lists them: the monitor's own,
/// then scripting, then the service, then the shell.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// A simulated swarm of agents in a temporary state dir, with the monitor on it.
    Demo(demo::DemoArgs),
    /// Play a journal back: the monitor on it, the snapshot at a time
    /// (--at), or the changes in a window (--from/--to).
    Replay(replay::ReplayArgs),
    /// Print every live key (or all with --all) once, as a table or JSON.
    Snapshot(snapshot::SnapshotArgs),
    /// Stream liveness changes (text, or NDJSON with --json) until interrupted.
    Watch(watch::WatchArgs),
    /// Can this family be taken now? If not: who holds each member, since
    /// when, and what else they hold. Exit 0 free, 1 busy, 2 bad input.
    Check(check::CheckArgs),
    /// Block on one key as agents do, until it is released (or, with
    /// --acquire, until it could be taken). Exit 0 then, 1 if interrupted.
    Wait(wait::WaitArgs),
    /// Acquire a lock family and hold it until SIGTERM/SIGINT or stdin closes.
    Hold(hold::HoldArgs),
    /// Serve the live view over HTTP for Prometheus: /metrics, /snapshot.json,
    /// /events, /healthz (lock-free probe, loopback, read-only by default).
    Serve(serve::ServeArgs),
    /// Journal the lock history (every change, with holders and verdicts,
    /// and periodic checkpoints) to a file or stdout until interrupted.
    Record(record::RecordArgs),
    /// Print a shell completion script (bash, zsh or fish) to stdout.
    Completions(docs::CompletionsArgs),
    /// Print the man page (roff) to stdout.
    Man,
}

/// The runtime's worker threads for every command but `serve` (which
/// answers many clients at once and keeps one worker per core): one. The
/// engine, the front end and the event readers hand work to each other
/// hundreds of times a second under churn; with a second worker, each
/// hand-over may also wake that worker to steal it — a context switch for
/// nothing (one `watch --source kernel` under a churn of ~540 acquisitions
/// a second: 24.3–27.2 % of a core with two workers, 21.5–21.9 % with
/// one).
///
/// `watch` runs on the main thread alone (a current-thread runtime): the
/// engine and the front end then hand deltas over on one thread, and a
/// burst wakes it once, not it and the main thread in turn — the main
/// thread's own timers woke the worker's reactor back (measured with
/// 100 holds taken and killed: the worker woke 6.3 times per hold and the
/// main thread 2). Only its writer thread, which alone may block on
/// stdout, is woken besides. The monitor keeps its worker: its drawing
/// must not hold up the engine.
const MONITOR_WORKERS: usize = 1;

/// Parses the process arguments, runs, and maps the outcome to an exit code.
/// An option given where it does not apply is refused before anything runs
/// (one line, exit 2: see [`placement`]); clap's own errors exit as clap does.
pub fn main() -> ExitCode {
    let cli = match placement::parse_from(std::env::args_os()) {
        Ok(cli) => cli,
        Err(placement::Refused::Clap(error)) => error.exit(),
        Err(placement::Refused::Misplaced(misplaced)) => return fail(&misplaced.into()),
    };
    let mut runtime = match cli.command {
        Some(Command::Watch(_)) => tokio::runtime::Builder::new_current_thread(),
        Some(Command::Serve(_)) => tokio::runtime::Builder::new_multi_thread(),
        _ => {
            let mut runtime = tokio::runtime::Builder::new_multi_thread();
            runtime.worker_threads(MONITOR_WORKERS);
            runtime
        }
    };
    runtime.enable_all();
    let runtime = match runtime.build() {
        Ok(runtime) => runtime,
        Err(error) => return fail(&anyhow::Error::from(error)),
    };
    // On a task of the runtime, not as the future `block_on` polls: a task
    // woken from the runtime's own thread (the engine's deltas, on the
    // one-thread runtime of `watch`) is queued there, where waking
    // `block_on`'s future writes the driver's eventfd each time.
    let outcome = runtime.block_on(async {
        match tokio::spawn(run(cli)).await {
            Ok(outcome) => outcome,
            // As if it had run here: a panic goes on unwinding.
            Err(joined) if joined.is_panic() => std::panic::resume_unwind(joined.into_panic()),
            Err(joined) => Err(anyhow::anyhow!("locktop stopped: {joined}")),
        }
    });
    // Blocking readers (stdin) must not keep the process alive.
    runtime.shutdown_timeout(Duration::from_millis(100));
    match outcome {
        Ok(code) => code,
        Err(error) => fail(&error),
    }
}

fn fail(error: &anyhow::Error) -> ExitCode {
    // An error may quote a path or a name from the watched tree.
    say!("locktop: {}", crate::text::visible(&format!("{error:#}")));
    ExitCode::from(EXIT_ERROR)
}

async fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match &cli.command {
        Some(Command::Completions(args)) => return docs::completions(args),
        Some(Command::Man) => return docs::man(),
        // Before the state dir is looked at: its problems are not the
        // reason this build cannot serve.
        #[cfg(not(feature = "serve"))]
        Some(Command::Serve(_)) => return serve::refuse(),
        _ => {}
    }
    if let Some(Command::Demo(args)) = cli.command {
        if let Some(dir) = &cli.state_dir {
            ensure_watchable(dir)?;
        }
        return demo::run(cli.state_dir, args).await;
    }
    if let Some(Command::Replay(args)) = cli.command {
        return replay::run(args).await;
    }
    if let Some(Command::Check(args)) = cli.command {
        let explicit = cli.state_dir.is_some();
        return check::run(
            crate::disk::state_dir::resolve(cli.state_dir),
            explicit,
            args,
        )
        .await;
    }
    let explicit = cli.state_dir.is_some();
    let state_dir = crate::disk::state_dir::resolve(cli.state_dir)?;
    if matches!(
        cli.command,
        Some(Command::Serve(_)) | Some(Command::Record(_))
    ) {
        watchable(&state_dir, explicit)?;
    }
    match cli.command {
        Some(Command::Hold(args)) => hold::run(state_dir, args).await,
        Some(Command::Snapshot(args)) => snapshot::run(state_dir, explicit, args).await,
        Some(Command::Watch(args)) => watch::run(state_dir, explicit, args).await,
        Some(Command::Serve(args)) => serve::run(state_dir, args).await,
        Some(Command::Wait(args)) => wait::run(state_dir, args).await,
        Some(Command::Record(args)) => record::run(state_dir, args).await,
        Some(
            Command::Check(_)
            | Command::Demo(_)
            | Command::Completions(_)
            | Command::Man
            | Command::Replay(_),
        ) => {
            anyhow::bail!("dispatched above")
        }
        None => open_monitor(state_dir, explicit, cli.monitor)
            .await
            .map(|()| ExitCode::SUCCESS),
    }
}

/// A positive, finite number of seconds from a flag, or a one-line error.
pub(crate) fn seconds(flag: &str, value: f64) -> anyhow::Result<Duration> {
    if value.is_finite() && value > 0.0 && value < 1e9 {
        Ok(Duration::from_secs_f64(value))
    } else {
        anyhow::bail!("{flag} must be a positive number of seconds, got {value}")
    }
}

/// The sweep's period and stretch from `--sweep`: given, exactly that
/// period; not given, the default period stretched on a large tree
/// ([`crate::engine::SWEEP_STRETCH`]).
pub(crate) fn sweep_period(sweep: Option<f64>) -> anyhow::Result<(Duration, Option<u32>)> {
    match sweep {
        Some(secs) => Ok((seconds("--sweep", secs)?, None)),
        None => Ok((
            crate::engine::SWEEP_EVERY,
            Some(crate::engine::SWEEP_STRETCH),
        )),
    }
}

/// Resolves on the first SIGINT or SIGTERM.
pub(crate) fn stop_signal() -> std::io::Result<impl std::future::Future<Output = ()>> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut terminate = signal(SignalKind::terminate())?;
    let mut interrupt = signal(SignalKind::interrupt())?;
    Ok(async move {
        tokio::select! {
            _ = terminate.recv() => {}
            _ = interrupt.recv() => {}
        }
    })
}

/// Opens the monitor on `state_dir` until the operator quits.
/// Whether an engine may watch `state_dir` here: one named on the command
/// line (`explicit`) must exist — a typo would otherwise look like a
/// quiet, healthy system — while the default one may not exist yet
/// (ObjectiveAI never ran here: it is waited for, and the header says
/// so); what exists must be a readable directory. Checked only for an
/// engine here: an attached view reads nothing of it.
pub(crate) fn watchable(state_dir: &std::path::Path, explicit: bool) -> anyhow::Result<()> {
    if explicit {
        crate::disk::state_dir::require_existing(state_dir)?;
    }
    ensure_watchable(state_dir)
}

pub(crate) async fn open_monitor(
    state_dir: PathBuf,
    explicit: bool,
    args: MonitorArgs,
) -> anyhow::Result<()> {
    let (sweep_every, sweep_stretch) = sweep_period(args.sweep)?;
    let requested = args.requested_probe()?;
    let engine_option =
        connect::engine_option_given(requested, args.sweep, &args.thresholds, &args.source);
    let attach_note = match args
        .connect
        .plan(&state_dir, explicit, engine_option)
        .await?
    {
        connect::Plan::Private { why } => {
            watchable(&state_dir, explicit)?;
            why
        }
        #[cfg(feature = "attach")]
        connect::Plan::Attached(attached) => return monitor_attached(attached, args).await,
    };
    let probe = crate::liveness::lock_free::choose(requested, &state_dir);
    let source = args.source.choose(&state_dir)?;
    let context = crate::context::Context::new(state_dir);
    crate::tui::run(
        context,
        crate::engine::EngineConfig {
            probe: probe.runs,
            sweep_every,
            sweep_stretch,
            idle_after: args.thresholds.idle_after()?,
            trace: None,
            source: source.source.clone(),
            holder_detail: crate::liveness::process::HolderDetail::Named,
        },
        crate::tui::TuiOptions {
            read_only: args.read_only,
            source: source.kind(),
            source_fallback: source.fallback.clone(),
            probe,
            log_file: args.log,
            materializing_after: args.thresholds.materializing_after()?,
            attach_note,
        },
    )
    .await
}

/// The monitor on a service's view: its state dir, probe and thresholds.
#[cfg(feature = "attach")]
async fn monitor_attached(
    attached: locktop_attach::Attached,
    args: MonitorArgs,
) -> anyhow::Result<()> {
    let hello = attached.link.hello();
    let context = crate::context::Context::new(hello.state_dir.clone());
    crate::tui::run_attached(
        context,
        attached.handle,
        hello.probe,
        crate::tui::TuiOptions {
            read_only: args.read_only,
            source: crate::engine::source_choice::SourceKind::from_word(&hello.source)
                .unwrap_or(crate::engine::source_choice::SourceKind::Inference),
            source_fallback: None,
            probe: crate::liveness::lock_free::ProbeChoice::as_asked(hello.probe),
            log_file: args.log,
            materializing_after: Duration::try_from_secs_f64(hello.materializing_after)
                .unwrap_or(crate::operate::verdict::MATERIALIZING_AFTER),
            attach_note: None,
        },
        std::sync::Arc::new(connect::LinkView(attached.link)),
    )
    .await
}

fn ensure_watchable(state_dir: &std::path::Path) -> anyhow::Result<()> {
    for dir in [state_dir.to_path_buf(), crate::locks::locks_root(state_dir)] {
        if !dir.exists() {
            continue;
        }
        if !dir.is_dir() {
            anyhow::bail!("{} is not a directory", dir.display());
        }
        if let Err(error) = std::fs::read_dir(&dir) {
            anyhow::bail!("cannot read {}: {error}", dir.display());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::sweep_period;
    use std::time::Duration;

    /// `--sweep` given is exactly that period; not given, the default one,
    /// stretched on a large tree; a bad number is refused.
    #[test]
    fn sweep_given_is_exact_and_its_default_is_stretched() {
        assert_eq!(
            sweep_period(Some(2.0)).unwrap(),
            (Duration::from_secs(2), None)
        );
        assert_eq!(
            sweep_period(None).unwrap(),
            (
                crate::engine::SWEEP_EVERY,
                Some(crate::engine::SWEEP_STRETCH)
            )
        );
        assert!(sweep_period(Some(-1.0)).is_err());
    }
}
