//! Signals sent by locktop: SIGTERM to its own children (test holders, the
//! demo swarm), and SIGTERM/SIGKILL to a real holder the operator chose.
//!
//! Invariants: a real holder is signalled only through a [`Target`]: a
//! pidfd opened BEFORE checking that the process is the one the operator
//! was shown (same start time) and that it holds the lock (its fdinfo shows
//! it, see [`crate::liveness::verify`]; a holder whose fdinfo may not be
//! read is never verified) — so the signal reaches that very
//! process or nobody, even if its PID is reused in between. PID ≤ 1 and
//! this process are never targets.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::Arc;
use std::time::SystemTime;

use nix::sys::signal::Signal;
use nix::unistd::Pid;

use crate::liveness::ProcessInfo;
use crate::liveness::proc_locks::FileId;
use crate::liveness::verify::{Hold, HolderVerifier};

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
    /// The process runs but is not proved to hold the lock (a reused PID).
    #[error("pid {0} does not hold the lock (its PID was reused?); nothing sent")]
    NotAHolder(u32),
    /// Its open files may not be read by this user, so its hold cannot be
    /// verified: never signalled.
    #[error(
        "pid {0}'s open files may not be read by this user: its hold is unverified; nothing \
         sent (run locktop as root or as its user)"
    )]
    Unverified(u32),
    /// This target was never bound to a process (see [`Target::detached`]).
    #[error("pid {0} is not bound to a process here; nothing sent")]
    Detached(u32),
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

/// A holder verified for signalling: the process the operator was shown,
/// and a pidfd on it opened before the verification.
#[derive(Debug, Clone)]
pub struct Target {
    /// The process, as shown.
    pub process: ProcessInfo,
    pidfd: Option<Arc<OwnedFd>>,
}

impl Target {
    /// A target bound to no process: [`signal_target`] always refuses it.
    /// For drawing a dialog without a live process (tests, fixtures).
    pub fn detached(process: ProcessInfo) -> Self {
        Self {
            process,
            pidfd: None,
        }
    }
}

/// Binds `shown` for signalling: refuses PID ≤ 1 and this process, opens a
/// pidfd, then checks the process is the one shown (same start time) and
/// holds one of `files` (a claim's gate or announce; `since`, the claim's
/// announce mtime, tells a reused PID) as its fdinfo shows.
pub fn verify_target(
    shown: &ProcessInfo,
    files: &[FileId],
    since: Option<SystemTime>,
) -> Result<Target, SignalError> {
    let pid = shown.pid;
    if let Some(refusal) = refuse_pid(pid) {
        return Err(refusal);
    }
    let pidfd = pidfd_open(pid).map_err(|_| SignalError::Exited(pid))?;
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
    match HolderVerifier::default().hold(pid, files, since) {
        Hold::Verified => Ok(Target {
            process: shown.clone(),
            pidfd: Some(Arc::new(pidfd)),
        }),
        Hold::Unverified => Err(SignalError::Unverified(pid)),
        Hold::Reused | Hold::LetGo => Err(SignalError::NotAHolder(pid)),
        Hold::Gone => Err(SignalError::Exited(pid)),
    }
}

/// Sends `signal` through the target's pidfd: to the verified process, or
/// to nobody if it has exited (its PID may belong to another process now).
pub fn signal_target(target: &Target, signal: Signal) -> Result<(), SignalError> {
    let pid = target.process.pid;
    let Some(pidfd) = &target.pidfd else {
        return Err(SignalError::Detached(pid));
    };
    // SAFETY: a valid pidfd for the duration of the call; no siginfo.
    let sent = unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            pidfd.as_raw_fd(),
            signal as libc::c_int,
            std::ptr::null::<libc::siginfo_t>(),
            0,
        )
    };
    if sent == 0 {
        return Ok(());
    }
    match nix::errno::Errno::last() {
        nix::errno::Errno::ESRCH => Err(SignalError::Exited(pid)),
        errno => Err(SignalError::Failed {
            signal: signal.as_str(),
            pid,
            errno,
        }),
    }
}

fn pidfd_open(pid: u32) -> std::io::Result<OwnedFd> {
    // SAFETY: pidfd_open takes a pid and flags and returns a new fd.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: the syscall returned a new, owned file descriptor.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// SIGTERM to a child this process spawned and still owns (a `locktop
/// hold` test holder or demo member): it releases its locks and exits.
pub(crate) fn terminate_child(pid: u32) -> nix::Result<()> {
    signal_child(pid, Signal::SIGTERM)
}

/// `signal` to a child this process spawned and still owns (the demo's
/// stopped agent: SIGSTOP, then SIGCONT before it is released).
pub(crate) fn signal_child(pid: u32, signal: Signal) -> nix::Result<()> {
    send(pid, signal)
}

fn send(pid: u32, signal: Signal) -> nix::Result<()> {
    nix::sys::signal::kill(Pid::from_raw(pid as i32), signal)
}
