//! The operator's hands: the handles through which the UI acts on the
//! world — the test-holder manager, family checks, engine commands, and
//! signals to real holder processes.
//!
//! Invariants: nothing here blocks the UI — holders and checks run as
//! tokio tasks and report on the channels of [`OpsEvents`], which the
//! event loop selects on; the holder manager and the checks use the
//! engine's own [`Context`], so in-process holders, checks and the engine's
//! probes all go through ONE in-process gate. Signals to real holders go
//! through [`crate::operate::signal`], which verifies the target first.

use tokio::sync::mpsc;

use crate::context::Context;
use crate::engine::EngineCommand;
use crate::locks::{Family, LocksError};
use crate::operate::check::{self, CheckReport};
use crate::operate::test_holders::{HolderUpdate, Holders};

/// The result of one family check, tagged with the check's number.
#[derive(Debug, Clone)]
pub(crate) struct CheckOutcome {
    /// Which check (from [`Ops::check`]); a dialog shows only its own.
    pub seq: u64,
    /// The report, or the one-line reason the check could not run.
    pub result: Result<CheckReport, LocksError>,
}

/// What the operator's actions report back, for the event loop to select
/// on and hand to the [`App`](super::App).
pub(crate) struct OpsEvents {
    /// Every test holder's progress, in order.
    pub holder_updates: mpsc::UnboundedReceiver<HolderUpdate>,
    /// Finished family checks.
    pub checks: mpsc::UnboundedReceiver<CheckOutcome>,
}

/// The handles the UI acts through.
pub(crate) struct Ops {
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
    pub(crate) fn with_holders(
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

    /// Starts a family check in the background (probed with `probe`: an
    /// all-or-nothing try and immediate release only for `acquire`); its
    /// outcome arrives on [`OpsEvents::checks`] with the returned number.
    /// Must be called inside a tokio runtime.
    pub fn check(&mut self, family: Family, probe: crate::liveness::ProbeMode) -> u64 {
        let seq = self.next_check;
        self.next_check += 1;
        let context = self.context.clone();
        let checks = self.checks.clone();
        tokio::spawn(async move {
            let result = check::check_family(&context, &family, probe).await;
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
