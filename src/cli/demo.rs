//! `locktop demo`: a temporary state dir, a simulated swarm of holders, and
//! the monitor on it. Quitting stops the swarm and removes the temp dir;
//! if this process is SIGKILLed the swarm dies with it (parent-death
//! signal + stdin EOF).
//!
//! Invariant: the demo never writes into a state dir that has anything in
//! it — its simulated locks would sit beside (and look like) real agents'
//! — so `--state-dir DIR` must name an empty or new directory, and
//! quitting removes what the demo put there (the directory stays).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use crate::operate::demo::Swarm;
use crate::operate::test_holders::child::self_exe;

/// Flags of `locktop demo`.
#[derive(Debug, clap::Args)]
pub struct DemoArgs {
    /// Run the swarm without the monitor (prints the state dir; stops on
    /// SIGINT/SIGTERM).
    #[arg(long)]
    headless: bool,
    /// Seed of the swarm's choices.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    #[command(flatten)]
    monitor: super::MonitorArgs,
}

/// The demo's `--materializing-after` unless given: low enough that its
/// stuck spawn is a suspect within seconds of the first screen.
const DEMO_MATERIALIZING_AFTER: f64 = 5.0;

/// Runs `locktop demo`. `state_dir` is `Some` only when given explicitly.
pub async fn run(state_dir: Option<PathBuf>, mut args: DemoArgs) -> anyhow::Result<ExitCode> {
    let thresholds = &mut args.monitor.thresholds;
    thresholds
        .materializing_after
        .get_or_insert(DEMO_MATERIALIZING_AFTER);
    let (temp, state_dir) = match state_dir {
        Some(dir) => {
            require_empty_or_new(&dir)?;
            (None, dir)
        }
        None => {
            let temp = tempfile::Builder::new().prefix("locktop-demo-").tempdir()?;
            let dir = temp.path().to_path_buf();
            (Some(temp), dir)
        }
    };
    let swarm = Swarm::start(self_exe()?, state_dir.clone(), args.seed);
    let outcome = if args.headless {
        println!("{}", state_dir.display());
        super::stop_signal()?.await;
        Ok(())
    } else {
        super::open_monitor(state_dir.clone(), args.monitor).await
    };
    swarm.stop().await;
    match temp {
        Some(temp) => drop(temp),
        None => remove_contents(&state_dir),
    }
    outcome.map(|()| ExitCode::SUCCESS)
}

/// Refuses a `--state-dir` that has anything in it (a real ObjectiveAI
/// state dir, most likely).
fn require_empty_or_new(dir: &Path) -> anyhow::Result<()> {
    let empty = match std::fs::read_dir(dir) {
        Ok(mut entries) => entries.next().is_none(),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => true,
        Err(error) => anyhow::bail!("demo --state-dir {}: {error}", dir.display()),
    };
    anyhow::ensure!(
        empty,
        "demo --state-dir {}: not empty — the demo fills a state dir with simulated agents' \
         locks; give it an empty or new directory (or no --state-dir: a temporary one)",
        dir.display()
    );
    Ok(())
}

/// Removes what the demo put in `dir` (empty or new when it began).
fn remove_contents(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let removed = match entry.file_type() {
            Ok(kind) if kind.is_dir() => std::fs::remove_dir_all(&path),
            _ => std::fs::remove_file(&path),
        };
        if let Err(error) = removed {
            eprintln!(
                "locktop: demo: could not remove {}: {error}",
                path.display()
            );
        }
    }
}
