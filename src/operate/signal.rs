//! Signals sent by locktop: SIGTERM to its own children (test holders, the
//! demo swarm), and SIGTERM/SIGKILL to a real holder the operator chose.
//!
//! Invariants: a real holder is signalled only after checking it is still
//! the process the operator was shown (same PID and start time); PID ≤ 1
//! and this process are never signalled through [`signal_holder`].

use nix::sys::signal::Signal;
use nix::unistd::Pid;

use crate::liveness::ProcessInfo;

/// Why a signal was not sent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SignalError {
    /// PID 0 or 1: never signalled.
    #[error("pid {0} is never signalled")]
    Protected(u32),
    /// This very process (its in-process test holders hold its locks).
    #[error("pid {0} is this locktop (in-process test holders)")]
    ThisProcess(u32),
    /// The process is gone.
    #[error("pid {0} has already exited")]
    Exited(u32),
    /// The PID now belongs to another process.
    #[error("pid {pid} is now another process ({command}); nothing sent")]
    Reused {
        /// The PID shown.
        pid: u32,
        /// What runs under it now.
        command: String,
    },
    /// `kill(2)` failed.
    #[error("{signal} to {pid}: {errno}")]
    Failed {
        /// The signal's name.
        signal: &'static str,
        /// The target.
        pid: u32,
        /// Why.
        errno: nix::errno::Errno,
    },
}

/// Why `pid` must never be signalled by the operator, if it must not.
pub fn refuse_pid(pid: u32) -> Option<SignalError> {
    if pid <= 1 {
        Some(SignalError::Protected(pid))
    } else if pid == std::process::id() {
        Some(SignalError::ThisProcess(pid))
    } else {
        None
    }
}

/// Sends `signal` to the process the operator was shown, after checking
/// it is still that process: same PID and, when known, same start time.
pub fn signal_holder(shown: &ProcessInfo, signal: Signal) -> Result<(), SignalError> {
    let pid = shown.pid;
    if let Some(refusal) = refuse_pid(pid) {
        return Err(refusal);
    }
    let now = ProcessInfo::of(pid);
    if !now.alive {
        return Err(SignalError::Exited(pid));
    }
    let reused = match (shown.started, now.started) {
        (Some(before), Some(after)) => before != after,
        _ => shown.cmdline.is_some() && shown.cmdline != now.cmdline,
    };
    if reused {
        return Err(SignalError::Reused {
            pid,
            command: now.command().to_string(),
        });
    }
    send(pid, signal).map_err(|errno| SignalError::Failed {
        signal: signal.as_str(),
        pid,
        errno,
    })
}

/// SIGTERM to a child this process spawned and still owns (a `locktop
/// hold` test holder or demo member): it releases its locks and exits.
pub fn terminate_child(pid: u32) -> nix::Result<()> {
    send(pid, Signal::SIGTERM)
}

fn send(pid: u32, signal: Signal) -> nix::Result<()> {
    nix::sys::signal::kill(Pid::from_raw(pid as i32), signal)
}
