//! Modal overlays — the hold / check form, the signal and kill
//! confirmations, the check report — and the keys they take.
//!
//! Invariants: while an overlay is open every key goes to it (only Ctrl-C
//! still quits), so a letter typed into the form is text, never an action;
//! nothing is taken, released or signalled without an explicit
//! confirmation key (`y`, Enter on a valid form, or `K` in the signal
//! dialog's second stage); Esc always closes without acting.

use crate::liveness::process::ProcessInfo;
use crate::model::HolderForm;
use crate::operate::signal::{SignalError, Target};
use crate::operate::test_holders::HolderId;

/// The overlay shown above the panes, if any.
#[derive(Debug, Clone)]
pub(crate) enum Overlay {
    /// Hold a family, or check one.
    Form(HolderForm),
    /// Signal a real holder process (boxed: it carries a whole process).
    Signal(Box<SignalDialog>),
    /// SIGKILL a child test holder?
    KillTestHolder(KillTestHolder),
    /// A family check's report.
    Report(ReportDialog),
}

/// How far the signal dialog has gone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SignalStage {
    /// Asking: send SIGTERM?
    Confirm,
    /// SIGTERM sent; `K` now sends SIGKILL.
    TermSent,
    /// SIGKILL sent; only closing is left.
    KillSent,
}

/// The dialog that signals a real holder: SIGTERM, then SIGKILL.
#[derive(Debug, Clone)]
pub(crate) struct SignalDialog {
    /// The process as the operator was shown it.
    pub process: ProcessInfo,
    /// The selected key it was opened from (`None` from a process line).
    pub from: Option<String>,
    /// The process bound for signalling when the dialog opened (a pidfd,
    /// verified to hold the lock), or why it could not be: then nothing
    /// can be sent from this dialog.
    pub target: Result<Target, SignalError>,
    /// The keys it holds, as labels.
    pub holds: Vec<String>,
    /// Where the dialog is.
    pub stage: SignalStage,
    /// The outcome of the last attempt, if it failed.
    pub error: Option<String>,
    /// Seen gone since a signal was sent.
    pub exited: bool,
    /// SIGCONT was sent from this dialog (to a stopped process).
    pub continued: bool,
}

impl SignalDialog {
    /// True while the process is stopped by a signal (`T`), as last seen,
    /// and not continued from here: a SIGTERM stays pending until it runs
    /// again, so the dialog offers SIGCONT.
    pub fn stopped(&self) -> bool {
        self.process.state == Some(crate::liveness::process::ProcState::Stopped) && !self.exited
    }
}

/// The confirmation before SIGKILLing a child test holder.
#[derive(Debug, Clone)]
pub(crate) struct KillTestHolder {
    /// Which holder.
    pub id: HolderId,
    /// Its PID, if known yet.
    pub pid: Option<u32>,
    /// Its family, in one line.
    pub family: String,
}

/// A family check's report, scrollable.
#[derive(Debug, Clone)]
pub(crate) struct ReportDialog {
    /// The check it shows (outcomes of other checks are ignored).
    pub seq: u64,
    /// The family, in one line.
    pub family: String,
    /// How the check learned whether members are taken, in words (the
    /// probe's, or the recording's time).
    pub how: String,
    /// The report's lines; `None` while the check runs.
    pub lines: Option<Vec<String>>,
    /// First shown (wrapped) line.
    pub scroll: usize,
    /// Lines per page at the last draw.
    pub page: usize,
}
