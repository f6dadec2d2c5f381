//! `locktop demo`: a temporary state dir, a simulated swarm of holders, and
//! the monitor on it. Quitting stops the swarm and removes the temp dir
//! (`--state-dir` keeps it); if this process is SIGKILLed the swarm dies
//! with it (parent-death signal + stdin EOF).

use std::path::PathBuf;
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
        Some(dir) => (None, dir),
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
        super::open_monitor(state_dir, args.monitor).await
    };
    swarm.stop().await;
    drop(temp);
    outcome.map(|()| ExitCode::SUCCESS)
}
