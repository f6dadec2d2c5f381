//! `locktop wait`: block on ONE key the way agents do, until it can be
//! had — as a watcher (the SDK's `wait_released`: a shared flock waiting
//! on the announce, e.g. a daemon waiting for an agent to end) or, with
//! `--acquire`, as a contender (the SDK's `wait_acquire`: an exclusive
//! flock queued on the gate; taken, then released at once).
//!
//! Invariants: exactly one key (`--tag T` or `--aih A`, nothing else is
//! offered), below the locks root, in an existing state dir; a lock path
//! that is not a regular file (a FIFO, a directory, a socket) is
//! refused before anything is opened, as `check` refuses it — the SDK
//! would block forever opening a FIFO, and a directory takes a flock;
//! nothing is held after it exits; SIGINT/SIGTERM end the wait (exit 0
//! once released, 1 when stopped first, 2 on bad input). What it waits
//! on is said on stderr when the wait begins (from `/proc/locks`, which
//! takes no lock), and stdout says how it ended — a key that was free
//! when asked is `{"outcome":"free"}` at once, never "released".

use std::path::PathBuf;
use std::process::ExitCode;

use crate::context::Context;
use crate::locks::{self, Family};

use super::EXIT_BUSY;

/// Flags of `locktop wait`.
#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("key").required(true).args(["tag", "aih"])))]
pub struct WaitArgs {
    /// The tag lock to wait on.
    #[arg(long, value_name = "TAG")]
    tag: Option<String>,
    /// The instance lock of this agent_instance_hierarchy (a/b/c) to wait on.
    #[arg(long, value_name = "AIH")]
    aih: Option<String>,
    /// Contend: wait to take it (the SDK's `wait_acquire`), then release
    /// it at once. Default: wait until it is released (`wait_released`).
    #[arg(long)]
    acquire: bool,
}

/// Runs `locktop wait`.
pub async fn run(state_dir: PathBuf, args: WaitArgs) -> anyhow::Result<ExitCode> {
    crate::disk::state_dir::require_existing(&state_dir)?;
    let family = match (args.aih, args.tag) {
        (Some(aih), _) => Family::Hierarchy {
            aih,
            tags: Vec::new(),
        },
        (None, Some(tag)) => Family::Group(vec![tag]),
        (None, None) => anyhow::bail!("name the key: --tag TAG or --aih AIH"),
    };
    let coords = locks::family_coords(&state_dir, &family)?;
    crate::disk::confine::ensure_coords_below_root(&state_dir, &coords)?;
    let [(dir, key)] = coords.as_slice() else {
        anyhow::bail!("wait takes one key: --tag TAG or --aih AIH alone");
    };
    if locks::check_openable(dir, key).is_err() {
        return Err(locks::unavailable(&state_dir, &family, dir, key).into());
    }
    let lock_key = crate::disk::LockKey::from_coord(&state_dir, dir, key);
    let name = lock_key.label();
    let started = std::time::Instant::now();
    let what = if args.acquire {
        "to take"
    } else {
        "until it is released:"
    };
    match (seen_now(&state_dir, &lock_key), args.acquire) {
        (Seen::Free, false) => {
            println!(r#"{{"outcome":"free","waited_s":0.0}}"#);
            return Ok(ExitCode::SUCCESS);
        }
        (Seen::Free, true) => say(&format!("taking {name} (free now), then releasing it")),
        (Seen::Held(holders), _) => say(&format!("waiting {what} {name} — held now{holders}")),
        (Seen::Unknown(why), _) => say(&format!(
            "waiting {what} {name} (whether it is held now, {why})"
        )),
    }
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
            let word = if args.acquire { "taken" } else { "released" };
            let waited = started.elapsed().as_secs_f64();
            println!(r#"{{"outcome":"{word}","waited_s":{waited:.3}}}"#);
            Ok(ExitCode::SUCCESS)
        }
        () = stop => Ok(ExitCode::from(EXIT_BUSY)),
    }
}

/// What `/proc/locks` says of a key when the wait begins.
enum Seen {
    /// Nobody holds it: there is nothing to wait for.
    Free,
    /// Held, or being taken or released; " (/proc/locks names pid …)"
    /// when it names holders (PIDs as the kernel's table lists them, not
    /// verified).
    Held(String),
    /// `/proc/locks` cannot tell here (why): the wait is the SDK's alone.
    Unknown(String),
}

/// What `/proc/locks` says of `key` now — only where it sees every holder
/// (the lock-free probe's own rule); elsewhere "free" could be a holder
/// it cannot see, so nothing is concluded.
fn seen_now(state_dir: &std::path::Path, key: &crate::disk::LockKey) -> Seen {
    use crate::liveness::lock_free::{Answer, answer, lock_free_blind_spot};
    use crate::liveness::proc_locks::LockIndex;
    if let Some(why) = lock_free_blind_spot(state_dir) {
        return Seen::Unknown(format!("/proc/locks cannot tell here: {why}"));
    }
    let index = match LockIndex::read() {
        Ok(index) => index,
        Err(error) => return Seen::Unknown(format!("/proc/locks cannot be read: {error}")),
    };
    if answer(key, &index) == Answer::Free {
        return Seen::Free;
    }
    let pids = index.claim(&key.gate_path(), &key.announce_path()).holders;
    let pids: Vec<String> = pids.iter().map(u32::to_string).collect();
    Seen::Held(match pids.as_slice() {
        [] => String::new(),
        pids => format!(" (/proc/locks names pid {})", pids.join(", ")),
    })
}

/// One stderr line: names and holders' command lines are anyone's text.
fn say(line: &str) {
    say!("locktop: {}", crate::text::visible(line));
}
