//! Owning the real terminal: raw mode, alternate screen, mouse capture.
//!
//! Invariant: once [`TerminalGuard::enter`] succeeded, the terminal is
//! restored on every way out — dropping the guard (normal quit, `?` on an
//! error), and a panic (the hook installed by [`install_panic_hook`]
//! restores first, then calls the previous hook so the message lands on a
//! sane screen). Restoring twice is harmless. Signals (SIGTERM, SIGHUP,
//! SIGINT) are turned into a clean quit by the event loop, which then
//! drops the guard.

use std::io::{self, Stdout};

use crossterm::event::{DisableMouseCapture, EnableMouseCapture};
use crossterm::execute;
use crossterm::terminal::{
    EnterAlternateScreen, LeaveAlternateScreen, disable_raw_mode, enable_raw_mode,
};
use ratatui::Terminal;
use ratatui::backend::CrosstermBackend;

/// The terminal, in TUI mode for as long as this guard lives.
pub(crate) struct TerminalGuard {
    /// The ratatui terminal drawing to stdout.
    pub terminal: Terminal<CrosstermBackend<Stdout>>,
}

impl TerminalGuard {
    /// Enters raw mode, the alternate screen and mouse capture. On failure
    /// whatever was already switched is switched back.
    pub fn enter() -> io::Result<Self> {
        enable_raw_mode()?;
        let entered = execute!(io::stdout(), EnterAlternateScreen, EnableMouseCapture)
            .and_then(|()| Terminal::new(CrosstermBackend::new(io::stdout())));
        match entered {
            Ok(mut terminal) => {
                terminal.hide_cursor()?;
                Ok(Self { terminal })
            }
            Err(error) => {
                restore();
                Err(error)
            }
        }
    }
}

impl Drop for TerminalGuard {
    fn drop(&mut self) {
        restore();
    }
}

/// Leaves mouse capture, the alternate screen and raw mode, and shows the
/// cursor. Best effort and idempotent: errors are ignored because this
/// runs on the way out (drop, panic).
pub fn restore() {
    let _ = execute!(
        io::stdout(),
        DisableMouseCapture,
        LeaveAlternateScreen,
        crossterm::cursor::Show
    );
    let _ = disable_raw_mode();
}

/// Installs a panic hook that restores the terminal, then runs the hook
/// that was installed before.
pub(crate) fn install_panic_hook() {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        restore();
        previous(info);
    }));
}

/// `Some(TERM)` when `$TERM` names a terminal without cursor addressing —
/// `dumb` (Emacs shells, some CI logs), `unknown`, or unset / empty —
/// on which a full-screen UI would be garbage. Deliberately simple: no
/// terminfo lookup, just the names that mean "no screen".
pub(crate) fn without_cursor_addressing() -> Option<String> {
    let term = std::env::var("TERM").unwrap_or_default();
    matches!(term.as_str(), "" | "dumb" | "unknown").then(|| {
        if term.is_empty() {
            "(unset)".to_string()
        } else {
            term
        }
    })
}
