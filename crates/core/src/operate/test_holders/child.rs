//! Child-process holders: `locktop hold …` spawned from this same binary.
//!
//! Invariants: a child holder never outlives this process — it gets
//! SIGTERM when its parent dies (Linux parent-death signal) and, as a
//! second line of defence, releases when its stdin (a pipe we own) closes;
//! its progress comes only from its JSON stdout lines.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

use crate::locks::Family;

/// The path of this very binary (child holders run `hold` on it).
pub fn self_exe() -> std::io::Result<PathBuf> {
    std::env::current_exe()
}

/// The `hold` arguments naming `family`.
pub fn family_args(family: &Family) -> Vec<String> {
    let mut args = Vec::new();
    match family {
        Family::Group(tags) => {
            for tag in tags {
                args.push("--group".into());
                args.push(tag.clone());
            }
        }
        Family::Hierarchy { aih, tags } => {
            args.push("--aih".into());
            args.push(aih.clone());
            for tag in tags {
                args.push("--tag".into());
                args.push(tag.clone());
            }
        }
    }
    args
}

/// A spawned `locktop hold` child with its pipes.
pub(crate) struct ChildHolder {
    /// The process (killed on drop).
    pub child: Child,
    /// Its stdin: dropping it makes the holder release and exit (kept
    /// for that drop; nothing writes to it).
    #[allow(dead_code, reason = "held for its drop, which releases the holder")]
    pub stdin: Option<ChildStdin>,
    /// Its JSON protocol lines.
    pub lines: tokio::io::Lines<BufReader<ChildStdout>>,
}

impl ChildHolder {
    /// The child's PID (None once reaped).
    pub fn pid(&self) -> Option<u32> {
        self.child.id()
    }
}

/// Spawns `<exe> --state-dir <state> hold <family> [--wait]` that dies with
/// this process. Stderr is captured (it carries the "busy:" lines).
pub(crate) fn spawn_hold(
    exe: &Path,
    state_dir: &Path,
    family: &Family,
    wait: bool,
) -> std::io::Result<ChildHolder> {
    spawn_hold_dying_by(exe, state_dir, family, wait, libc::SIGTERM)
}

/// [`spawn_hold`] whose child gets `death_signal` when this process dies:
/// SIGKILL for a holder that will be stopped (a stopped process acts on
/// no other signal, so SIGTERM would leave it holding).
pub(crate) fn spawn_hold_dying_by(
    exe: &Path,
    state_dir: &Path,
    family: &Family,
    wait: bool,
    death_signal: libc::c_int,
) -> std::io::Result<ChildHolder> {
    let mut command = Command::new(exe);
    command
        .arg("--state-dir")
        .arg(state_dir)
        .arg("hold")
        .args(family_args(family))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    if wait {
        command.arg("--wait");
    }
    die_with_parent(&mut command, death_signal);
    let mut child = command.spawn()?;
    let stdin = child.stdin.take();
    let stdout = child
        .stdout
        .take()
        .ok_or_else(|| std::io::Error::other("child stdout was not piped"))?;
    Ok(ChildHolder {
        child,
        stdin,
        lines: BufReader::new(stdout).lines(),
    })
}

/// Makes the child receive `signal` when this process dies (Linux).
pub(crate) fn die_with_parent(command: &mut Command, signal: libc::c_int) {
    #[cfg(target_os = "linux")]
    {
        let parent = std::process::id();
        // SAFETY: prctl and getppid are async-signal-safe; nothing else runs
        // between fork and exec here.
        unsafe {
            command.pre_exec(move || {
                if libc::prctl(libc::PR_SET_PDEATHSIG, signal) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                // The parent may have died before prctl took effect.
                if libc::getppid() as u32 != parent {
                    libc::_exit(1);
                }
                Ok(())
            });
        }
    }
}
