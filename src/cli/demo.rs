//! `locktop demo`: a temporary state dir, a simulated swarm of holders, and
//! the monitor on it. Quitting stops the swarm and removes the temp dir;
//! if this process is SIGKILLed the swarm dies with it (parent-death
//! signal + stdin EOF).
//!
//! Invariant: the demo never writes into a state dir that has anything in
//! it — its simulated locks would sit beside (and look like) real agents'
//! — so `--state-dir DIR` must name an empty or new directory, and never
//! the state dir ObjectiveAI itself would use. On quit it removes its
//! `locks/` there (the directory stays), unless a file under it is still
//! locked by a process that outlived the swarm: then it removes nothing
//! and says so.

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
    if args.monitor.connect.connect.is_some() {
        anyhow::bail!(
            "--connect: the demo's agents run in a state dir of its own, watched here; not with --connect"
        );
    }
    let thresholds = &mut args.monitor.thresholds;
    thresholds
        .materializing_after
        .get_or_insert(DEMO_MATERIALIZING_AFTER);
    let (temp, state_dir) = match state_dir {
        Some(dir) => {
            require_empty_or_new(&dir)?;
            if crate::disk::state_dir::resolve(None).is_ok_and(|real| real == dir) {
                anyhow::bail!(
                    "demo --state-dir {}: the state dir ObjectiveAI uses here — the demo's \
                     simulated agents would look like real ones; give it another directory",
                    dir.display()
                );
            }
            // A new directory is made now: the swarm's holders refuse a
            // state dir that does not exist (the first ones would fail).
            std::fs::create_dir_all(&dir)
                .map_err(|error| anyhow::anyhow!("demo --state-dir {}: {error}", dir.display()))?;
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
        super::open_monitor(state_dir.clone(), false, args.monitor).await
    };
    swarm.stop().await;
    match temp {
        Some(temp) => drop(temp),
        None => remove_locks(&state_dir),
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

/// Removes the demo's `locks/` under `dir` (empty or new when it began),
/// unless `/proc/locks` says a file under it is still locked by some
/// process 3 s after the swarm stopped: a lock outlived the swarm, and its
/// files are left as they are.
fn remove_locks(dir: &Path) {
    let locks = crate::locks::locks_root(dir);
    if !locks.exists() {
        return;
    }
    // The orphaned child ends at its pipe's EOF, a moment after the swarm.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(3);
    let mut held = still_locked_under(&locks);
    while held.is_some() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(50));
        held = still_locked_under(&locks);
    }
    if let Some(held) = held {
        say!(
            "locktop: demo: {} is still locked by a process; leaving {} as it is",
            held.display(),
            locks.display()
        );
        return;
    }
    if let Err(error) = std::fs::remove_dir_all(&locks) {
        say!(
            "locktop: demo: could not remove {}: {error}",
            locks.display()
        );
    }
}

/// A file under `root` that `/proc/locks` lists as locked, if any (when
/// `/proc/locks` cannot be read, `root` itself: nothing is removed).
fn still_locked_under(root: &Path) -> Option<PathBuf> {
    use crate::liveness::proc_locks::{FileId, LockIndex};
    let Ok(index) = LockIndex::read() else {
        return Some(root.to_path_buf());
    };
    let mut dirs = vec![root.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            match entry.file_type() {
                Ok(kind) if kind.is_dir() => dirs.push(path),
                _ => {
                    let locked = FileId::of(&path).is_ok_and(|file| index.get(&file).is_some());
                    if locked {
                        return Some(path);
                    }
                }
            }
        }
    }
    None
}
