//! The keys an open overlay takes (see [`super::overlay`] for the
//! overlays and their invariants): while one is open every key goes to
//! it, only Ctrl-C still quits.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use crate::model::FormPurpose;

use super::app::App;
use super::overlay::{Overlay, SignalStage};

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
