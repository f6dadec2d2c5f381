//! Modal overlays — the hold / check form, the signal and kill
//! confirmations, the check report — and the keys they take.
//!
//! Invariants: while an overlay is open every key goes to it (only Ctrl-C
//! still quits), so a letter typed into the form is text, never an action;
//! nothing is taken, released or signalled without an explicit
//! confirmation key (`y`, Enter on a valid form, or `K` in the signal
//! dialog's second stage); Esc always closes without acting.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use crate::liveness::process::ProcessInfo;
use crate::model::{FormPurpose, HolderForm};
use crate::operate::signal::{SignalError, Target};
use crate::operate::test_holders::HolderId;

use super::app::App;

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

impl App {
    /// Handles a key while an overlay is open.
    pub(crate) fn overlay_key(&mut self, key: KeyEvent) {
        self.mark_dirty();
        let control = key.modifiers.contains(KeyModifiers::CONTROL);
        if control && key.code == KeyCode::Char('c') {
            return self.quit();
        }
        let Some(overlay) = self.operator.overlay.as_mut() else {
            return;
        };
        match overlay {
            Overlay::Form(form) => match key.code {
                KeyCode::Esc => self.operator.overlay = None,
                KeyCode::Enter => self.submit_form(),
                KeyCode::Tab | KeyCode::Down => form.move_focus(true),
                KeyCode::BackTab | KeyCode::Up => form.move_focus(false),
                KeyCode::Left | KeyCode::Right if !form.focus.is_text() => form.toggle(),
                KeyCode::Char(' ') if !form.focus.is_text() => form.toggle(),
                KeyCode::Char('u') if control => form.clear_field(),
                KeyCode::Char(c) if !control => form.type_char(c),
                KeyCode::Backspace => form.backspace(),
                _ => {}
            },
            Overlay::Signal(dialog) => match (dialog.stage, key.code) {
                (_, KeyCode::Esc | KeyCode::Char('n' | 'q')) => self.operator.overlay = None,
                (SignalStage::Confirm, KeyCode::Char('y') | KeyCode::Enter) => self.send_term(),
                (SignalStage::TermSent, KeyCode::Char('K')) => self.send_kill(),
                (SignalStage::Confirm | SignalStage::TermSent, KeyCode::Char('c'))
                    if dialog.stopped() =>
                {
                    self.send_cont()
                }
                (SignalStage::TermSent | SignalStage::KillSent, KeyCode::Enter) => {
                    self.operator.overlay = None
                }
                _ => {}
            },
            Overlay::KillTestHolder(dialog) => match key.code {
                KeyCode::Char('y') => {
                    let id = dialog.id;
                    self.operator.overlay = None;
                    self.kill_test_holder(id);
                }
                KeyCode::Esc | KeyCode::Char('n' | 'q') => self.operator.overlay = None,
                _ => {}
            },
            Overlay::Report(report) => {
                let page = report.page.max(1);
                match key.code {
                    KeyCode::Esc | KeyCode::Enter | KeyCode::Char('q') => {
                        self.operator.overlay = None
                    }
                    KeyCode::Up | KeyCode::Char('k') => {
                        report.scroll = report.scroll.saturating_sub(1)
                    }
                    KeyCode::Down | KeyCode::Char('j') => report.scroll += 1,
                    KeyCode::PageUp => report.scroll = report.scroll.saturating_sub(page),
                    KeyCode::PageDown | KeyCode::Char(' ') => report.scroll += page,
                    KeyCode::Home | KeyCode::Char('g') => report.scroll = 0,
                    KeyCode::End | KeyCode::Char('G') => report.scroll = usize::MAX / 2,
                    _ => {}
                }
            }
        }
    }

    /// Enter on the form: acts only when the form is valid; otherwise the
    /// form stays open showing why.
    fn submit_form(&mut self) {
        let Some(Overlay::Form(form)) = &self.operator.overlay else {
            return;
        };
        let form = form.clone();
        if form.family().is_err() {
            return;
        }
        match form.purpose {
            FormPurpose::Hold => {
                if let Ok(spec) = form.spec() {
                    self.operator.overlay = None;
                    self.spawn_test_holder(spec);
                }
            }
            FormPurpose::Check { probe } => {
                if let Ok(family) = form.family() {
                    self.operator.overlay = None;
                    self.run_check(family, probe);
                }
            }
        }
    }
}
