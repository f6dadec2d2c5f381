//! The command line: clap definitions and dispatch. Each subcommand lives
//! in its own file; this one only parses, resolves the state dir, runs
//! and turns errors into one line on stderr.
//!
//! Exit codes (every subcommand): 0 success, 1 "busy" (a lock could not be
//! taken now), 2 bad input or any other error.

mod family_args;
mod hold;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};

pub use family_args::FamilyArgs;

/// Exit code for "a member was busy".
pub const EXIT_BUSY: u8 = 1;
/// Exit code for bad input and every other error.
pub const EXIT_ERROR: u8 = 2;

/// locktop — a live monitor for ObjectiveAI agent locks.
#[derive(Debug, Parser)]
#[command(name = "locktop", version, about, long_about = None)]
pub struct Cli {
    /// The ObjectiveAI state dir (default: $OBJECTIVEAI_DIR/state/$OBJECTIVEAI_STATE,
    /// i.e. ~/.objectiveai/state/default).
    #[arg(long, global = true, value_name = "PATH")]
    pub state_dir: Option<PathBuf>,

    /// What to do (default: open the monitor).
    #[command(subcommand)]
    pub command: Option<Command>,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Acquire a lock family and hold it until SIGTERM/SIGINT or stdin closes.
    Hold(hold::HoldArgs),
}

/// Parses the process arguments, runs, and maps the outcome to an exit code.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => return fail(&anyhow::Error::from(error)),
    };
    let outcome = runtime.block_on(run(cli));
    // Blocking readers (stdin) must not keep the process alive.
    runtime.shutdown_timeout(Duration::from_millis(100));
    match outcome {
        Ok(code) => code,
        Err(error) => fail(&error),
    }
}

fn fail(error: &anyhow::Error) -> ExitCode {
    eprintln!("locktop: {error:#}");
    ExitCode::from(EXIT_ERROR)
}

async fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    let state_dir = crate::state_dir::resolve(cli.state_dir)?;
    match cli.command {
        Some(Command::Hold(args)) => hold::run(state_dir, args).await,
        None => anyhow::bail!("the monitor is not built yet; try `locktop hold --help`"),
    }
}
