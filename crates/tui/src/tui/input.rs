//! Turning terminal input into actions on the [`App`]: keys through the
//! key map, text while the filter is being typed, mouse wheel and clicks
//! through the hit map of the last frame.
//!
//! Invariants: while the filter is typed, printable keys are text (so `q`
//! types a q); only Esc, Enter, Backspace, arrows and Ctrl-C act. While an
//! overlay (form, dialog) is open it takes every key and the mouse does
//! nothing. A key bound to an action disabled by read-only mode says so
//! on the status line instead of doing nothing silently.

use crossterm::event::{
    Event, KeyCode, KeyEvent, KeyEventKind, KeyModifiers, MouseButton, MouseEvent, MouseEventKind,
};

use super::action::{Action, Pane};
use super::app::App;
use super::keymap;

/// What a key did to a line being typed.
enum Edit {
    /// Ctrl-C: quit.
    Quit,
    /// The text changed (a character, Backspace, Ctrl-U).
    Typed,
    /// Enter.
    Enter,
    /// Esc.
    Esc,
    /// Anything else (the text is unchanged).
    Other,
}

/// Applies `key` to `text`, a line being typed: printable characters are
/// text (so `q` types a q), Backspace and Ctrl-U delete.
fn edit(text: &mut String, key: KeyEvent) -> Edit {
    let control = key.modifiers.contains(KeyModifiers::CONTROL);
    match key.code {
        KeyCode::Char('c') if control => Edit::Quit,
        KeyCode::Char('u') if control => {
            text.clear();
            Edit::Typed
        }
        KeyCode::Char(c) if !control => {
            text.push(c);
            Edit::Typed
        }
        KeyCode::Backspace => {
            text.pop();
            Edit::Typed
        }
        KeyCode::Enter => Edit::Enter,
        KeyCode::Esc => Edit::Esc,
        _ => Edit::Other,
    }
}

/// Rows moved by one wheel step.
const WHEEL_STEP: isize = 3;

impl App {
    /// Handles one terminal event.
    pub(crate) fn handle_event(&mut self, event: Event) {
        match event {
            Event::Key(key) => self.handle_key(key),
            Event::Mouse(mouse) => self.handle_mouse(mouse),
            Event::Resize(..) => self.mark_dirty(),
            _ => {}
        }
    }

    /// Handles one key press.
    pub fn handle_key(&mut self, key: KeyEvent) {
        if key.kind == KeyEventKind::Release {
            return;
        }
        if self.operator.overlay.is_some() {
            return self.overlay_key(key);
        }
        if self.filter_input.is_some() {
            self.type_filter(key);
            return;
        }
        if self.time_input.is_some() {
            self.type_time(key);
            return;
        }
        // A message answers the key before; the next key clears it.
        if self.message.take().is_some() {
            self.mark_dirty();
        }
        let Some(action) = keymap::action_for(key, self.config.read_only) else {
            match keymap::binding_for(key) {
                Some(binding) => self.set_message(format!(
                    "{} ({}) is disabled: {}",
                    binding.shown,
                    binding.description,
                    if self.replay.is_some() {
                        "nothing in a replay is live"
                    } else {
                        "locktop runs --read-only"
                    }
                )),
                None if !self.unknown_key_hinted && !is_modifier(key) => {
                    self.unknown_key_hinted = true;
                    self.set_message(super::hints::unknown_key());
                }
                None => {}
            }
            return;
        };
        if self.help {
            return self.help_key(action);
        }
        self.perform(action);
    }

    /// A key while the help is open: it scrolls, closes, quits or
    /// redraws; anything else waits for the help to close.
    fn help_key(&mut self, action: Action) {
        let scroll = &mut self.help_scroll;
        match action {
            Action::Up => *scroll = scroll.saturating_sub(1),
            Action::Down => *scroll = scroll.saturating_add(1),
            Action::PageUp => *scroll = scroll.saturating_sub(5),
            Action::PageDown => *scroll = scroll.saturating_add(5),
            Action::Top => *scroll = 0,
            Action::Bottom => *scroll = u16::MAX,
            Action::ToggleHelp | Action::Escape | Action::Quit | Action::Redraw => {
                return self.perform(action);
            }
            _ => return,
        }
        self.mark_dirty();
    }

    fn type_filter(&mut self, key: KeyEvent) {
        self.mark_dirty();
        let Some(text) = self.filter_input.as_mut() else {
            return;
        };
        match edit(text, key) {
            Edit::Quit => self.quit(),
            Edit::Typed => {
                let text = text.clone();
                self.model.set_filter(&text);
            }
            Edit::Enter => self.filter_input = None,
            Edit::Esc => {
                self.filter_input = None;
                self.model.set_filter("");
            }
            Edit::Other => match key.code {
                KeyCode::Up => self.perform(Action::Up),
                KeyCode::Down => self.perform(Action::Down),
                _ => {}
            },
        }
    }

    /// A key while a replay's jump time is typed: Enter asks the player
    /// to jump, Esc gives up.
    fn type_time(&mut self, key: KeyEvent) {
        self.mark_dirty();
        let Some(text) = self.time_input.as_mut() else {
            return;
        };
        match edit(text, key) {
            Edit::Quit => self.quit(),
            Edit::Enter => {
                let text = self.time_input.take().unwrap_or_default();
                self.replay_requests
                    .push(super::replay_status::ReplayRequest::Jump(text));
            }
            Edit::Esc => self.time_input = None,
            Edit::Typed | Edit::Other => {}
        }
    }

    /// Handles one mouse event: wheel scrolls the current list, a left
    /// click selects a row or a tab.
    pub(crate) fn handle_mouse(&mut self, mouse: MouseEvent) {
        if self.help || self.operator.overlay.is_some() {
            return;
        }
        match mouse.kind {
            MouseEventKind::ScrollDown => self.scroll(WHEEL_STEP),
            MouseEventKind::ScrollUp => self.scroll(-WHEEL_STEP),
            MouseEventKind::Down(MouseButton::Left) => self.click(mouse.column, mouse.row),
            _ => {}
        }
    }

    fn scroll(&mut self, by: isize) {
        let index = self.selected_index();
        self.select_index(index.saturating_add_signed(by));
    }

    fn click(&mut self, x: u16, y: u16) {
        let hits = self.hits;
        if y == hits.tabs.y && hits.tabs.height > 0 {
            let tab = hits.tab_spans.iter().position(|&(a, b)| x >= a && x < b);
            if let Some(tab) = tab {
                self.perform(Action::Show(Pane::ALL[tab]));
            }
            return;
        }
        let list = hits.list;
        let inside = x >= list.x && x < list.right() && y >= list.y && y < list.bottom();
        let index = hits.offset + usize::from(y.saturating_sub(list.y));
        if inside && index < self.row_count() {
            self.select_index(index);
        }
    }
}

/// A key that is only a modifier (Shift, Ctrl… alone, with the kitty
/// protocol): never "unknown".
fn is_modifier(key: KeyEvent) -> bool {
    matches!(key.code, KeyCode::Modifier(_))
}
