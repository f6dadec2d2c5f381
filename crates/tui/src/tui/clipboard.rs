//! Copying to the operator's clipboard with OSC 52, the escape sequence
//! terminals (and tmux, and ssh sessions through them) turn into a
//! clipboard write; and what `y` copies from the selection.
//!
//! Invariants: the sequence is written through the terminal backend
//! (crossterm's `CopyToClipboard`), in the event loop, between frames —
//! never printed from anywhere else; `y` copies, press after press on
//! the same selection, its PID, then its command line, then its path
//! (whichever exist), and the footer says what was copied and what the
//! next press copies.

use std::io;

use crossterm::clipboard::CopyToClipboard;
use ratatui::backend::{CrosstermBackend, TestBackend};

use super::action::Action;
use super::app::App;
use super::keymap::key_of;
use super::selected::Selected;

/// A backend that can put text on the terminal's clipboard.
pub(crate) trait Clipboard {
    /// Writes the OSC 52 sequence carrying `text` (no-op where there is
    /// no terminal).
    fn copy(&mut self, text: &str) -> io::Result<()>;
}

impl<W: io::Write> Clipboard for CrosstermBackend<W> {
    fn copy(&mut self, text: &str) -> io::Result<()> {
        crossterm::execute!(self, CopyToClipboard::to_clipboard_from(text))
    }
}

impl Clipboard for TestBackend {
    fn copy(&mut self, _text: &str) -> io::Result<()> {
        Ok(())
    }
}

impl App {
    /// `y`: queues the next piece of the selection for the clipboard and
    /// says so on the footer.
    pub(crate) fn copy_selection(&mut self) {
        let pieces = self.copy_pieces();
        if pieces.is_empty() {
            self.message = Some("nothing to copy here: select a key, a holder or an event".into());
            return;
        }
        let index = self.copy_press % pieces.len();
        let (what, text) = pieces[index].clone();
        let next = &pieces[(index + 1) % pieces.len()].0;
        self.message = Some(format!(
            "copied {what} to the clipboard (OSC 52): {text} · {} again: {next}",
            key_of(Action::Copy)
        ));
        self.clipboard = Some(text);
        self.copy_press = index + 1;
    }

    /// What is waiting to be written to the clipboard (taken once).
    pub(crate) fn take_clipboard(&mut self) -> Option<String> {
        self.clipboard.take()
    }

    /// The selection's PID, command line and path, those that exist.
    fn copy_pieces(&mut self) -> Vec<(&'static str, String)> {
        let (mut pid, mut command, mut path) = (None, None, None);
        let holder = self.selected_holder();
        match self.selected() {
            Selected::Node(id) | Selected::HeldKey { node: id, .. } => {
                let node = self.model.data().tree.node(id);
                path = Some(match &node.lock {
                    Some(lock) => lock.key.gate_path().display().to_string(),
                    None => node.path.clone(),
                });
            }
            Selected::Event(index) => {
                let event = self.model.events().get(index);
                pid = event.and_then(|e| e.pid);
                command = event.and_then(|e| e.command.clone());
                path = event.map(|e| e.key.gate_path().display().to_string());
            }
            Selected::TestHolder(id) => {
                pid = self.operator.test_holders.get(id).and_then(|h| h.pid)
            }
            Selected::Process { .. } | Selected::Nothing => {}
        }
        if let Some(holder) = holder {
            pid = Some(holder.pid);
            command = holder.cmdline;
        }
        let mut pieces = Vec::new();
        pieces.extend(pid.map(|pid| ("PID", pid.to_string())));
        pieces.extend(command.map(|c| ("command line", c)));
        pieces.extend(path.map(|p| ("path", p)));
        pieces
    }
}
