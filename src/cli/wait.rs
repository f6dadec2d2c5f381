//! `locktop wait`: block on ONE key the way agents do, until it can be
//! had — as a watcher (the SDK's `wait_released`: a shared flock waiting
//! on the announce, e.g. a daemon waiting for an agent to end) or, with
//! `--acquire`, as a contender (the SDK's `wait_acquire`: an exclusive
//! flock queued on the gate; taken, then released at once).
//!
//! Invariants: exactly one member (a family of one key), below the locks
//! root, in an existing state dir; nothing is held after it exits;
//! SIGINT/SIGTERM end the wait (exit 0 once released, 1 when stopped
//! first, 2 on bad input).

use std::path::PathBuf;
use std::process::ExitCode;

use crate::context::Context;
use crate::locks;

use super::{EXIT_BUSY, FamilyArgs};

/// Flags of `locktop wait`.
#[derive(Debug, clap::Args)]
pub struct WaitArgs {
    /// The key: `--tag T` or `--aih A` (one member only).
    #[command(flatten)]
    family: FamilyArgs,
    /// Contend: wait to take it (the SDK's `wait_acquire`), then release
    /// it at once. Default: wait until it is released (`wait_released`).
    #[arg(long)]
    acquire: bool,
}

/// Runs `locktop wait`.
pub async fn run(state_dir: PathBuf, args: WaitArgs) -> anyhow::Result<ExitCode> {
    crate::disk::state_dir::require_existing(&state_dir)?;
    let family = args.family.family()?;
    let coords = locks::family_coords(&state_dir, &family)?;
    crate::disk::confine::ensure_coords_below_root(&state_dir, &coords)?;
    let [(dir, key)] = coords.as_slice() else {
        anyhow::bail!("wait takes one key: --tag TAG or --aih AIH alone");
    };
    let stop = super::stop_signal()?;
    let context = Context::new(state_dir.clone());
    let waited = async {
        if args.acquire {
            locks::wait_acquire(context.agent_locks(), dir, key)
                .await?
                .release()
        } else {
            objectiveai_sdk::lockfile::wait_released(dir, key).await
        }
    };
    tokio::select! {
        outcome = waited => {
            outcome?;
            println!(r#"{{"released":true}}"#);
            Ok(ExitCode::SUCCESS)
        }
        () = stop => Ok(ExitCode::from(EXIT_BUSY)),
    }
}
