//! The operator's hands: the handles through which the UI acts on the
//! world — the test-holder manager, family checks, engine commands, and
//! signals to real holder processes.
//!
//! Invariants: nothing here blocks the UI — holders and checks run as
//! tokio tasks and report on the channels of [`OpsEvents`], which the
//! event loop selects on; the holder manager and the checks use the
//! engine's own [`Context`], so in-process holders, checks and the engine's
//! probes all go through ONE in-process gate; a signal is never sent to
//! this process, to PID ≤ 1, or to a PID whose process is not the one the
//! operator was shown (its start time changed: the PID was reused).

use nix::sys::signal::Signal;
use tokio::sync::mpsc;

use crate::context::Context;
use crate::engine::EngineCommand;
use crate::liveness::process::ProcessInfo;
use crate::locks::Family;
use crate::operate::check::{self, CheckReport};
use crate::operate::test_holders::{HolderUpdate, Holders};

/// The result of one family check, tagged with the check's number.
#[derive(Debug, Clone)]
pub struct CheckOutcome {
    /// Which check (from [`Ops::check`]); a dialog shows only its own.
    pub seq: u64,
    /// The report, or the one-line reason the check could not run.
    pub result: Result<CheckReport, String>,
}

/// What the operator's actions report back, for the event loop to select
/// on and hand to the [`App`](super::App).
pub struct OpsEvents {
    /// Every test holder's progress, in order.
    pub holder_updates: mpsc::UnboundedReceiver<HolderUpdate>,
    /// Finished family checks.
    pub checks: mpsc::UnboundedReceiver<CheckOutcome>,
}

/// The handles the UI acts through.
pub struct Ops {
    context: Context,
    holders: Holders,
    engine: Option<mpsc::UnboundedSender<EngineCommand>>,
    checks: mpsc::UnboundedSender<CheckOutcome>,
    next_check: u64,
}

impl Ops {
    /// Handles on `context` (the engine's), commanding `engine` if given.
    /// Fails only when this binary's path is unknown (child holders run it).
    pub fn new(
        context: Context,
        engine: Option<mpsc::UnboundedSender<EngineCommand>>,
    ) -> std::io::Result<(Self, OpsEvents)> {
        let (holders, updates) = Holders::new(context.clone())?;
        Ok(Self::with_holders(context, holders, updates, engine))
    }

    /// Handles around an existing holder manager (e.g. one whose child
    /// holders run another `locktop` binary, for tests).
    pub fn with_holders(
        context: Context,
        holders: Holders,
        holder_updates: mpsc::UnboundedReceiver<HolderUpdate>,
        engine: Option<mpsc::UnboundedSender<EngineCommand>>,
    ) -> (Self, OpsEvents) {
        let (checks, check_rx) = mpsc::unbounded_channel();
        let ops = Self {
            context,
            holders,
            engine,
            checks,
            next_check: 1,
        };
        let events = OpsEvents {
            holder_updates,
            checks: check_rx,
        };
        (ops, events)
    }

    /// The test-holder manager.
    pub fn holders(&mut self) -> &mut Holders {
        &mut self.holders
    }

    /// Starts a family check in the background (all-or-nothing try and
    /// immediate release, or shared-lock probes when `passive`); its
    /// outcome arrives on [`OpsEvents::checks`] with the returned number.
    /// Must be called inside a tokio runtime.
    pub fn check(&mut self, family: Family, passive: bool) -> u64 {
        let seq = self.next_check;
        self.next_check += 1;
        let context = self.context.clone();
        let checks = self.checks.clone();
        tokio::spawn(async move {
            let result = check::check_family(&context, &family, passive)
                .await
                .map_err(|error| error.to_string());
            let _ = checks.send(CheckOutcome { seq, result });
        });
        seq
    }

    /// Sends `command` to the engine, if there is one.
    pub fn engine(&self, command: EngineCommand) {
        if let Some(engine) = &self.engine {
            let _ = engine.send(command);
        }
    }
}

/// Why `pid` must never be signalled from here, if it must not.
pub fn refuse_pid(pid: u32) -> Option<String> {
    if pid <= 1 {
        Some(format!("pid {pid} is never signalled"))
    } else if pid == std::process::id() {
        Some(format!(
            "pid {pid} is this locktop (in-process test holders): release them with r in 4 Test holders"
        ))
    } else {
        None
    }
}

/// Sends `signal` to the process the operator was shown, after checking
/// it is still that process: same PID and, when known, same start time.
pub fn signal_holder(shown: &ProcessInfo, signal: Signal) -> Result<(), String> {
    let pid = shown.pid;
    if let Some(reason) = refuse_pid(pid) {
        return Err(reason);
    }
    let now = ProcessInfo::of(pid);
    if !now.alive {
        return Err(format!("pid {pid} has already exited"));
    }
    let reused = match (shown.started, now.started) {
        (Some(before), Some(after)) => before != after,
        _ => shown.cmdline.is_some() && shown.cmdline != now.cmdline,
    };
    if reused {
        return Err(format!(
            "pid {pid} is now another process ({}); nothing sent",
            now.command()
        ));
    }
    let target = nix::unistd::Pid::from_raw(pid as i32);
    nix::sys::signal::kill(target, signal)
        .map_err(|error| format!("{} to {pid}: {error}", signal.as_str()))
}
