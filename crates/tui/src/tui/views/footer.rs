//! The status line: the filter being typed, else the last message, else
//! key hints generated from the key map. Invariant: a hint is shown whole
//! or not at all — hints are spaced closer when they do not fit, and the
//! last ones give way only when even that is too wide.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use super::super::action::Action;
use super::super::keymap::{BINDINGS, key_of};
use super::super::theme::Theme;
use super::state::ViewState;

/// One line at the bottom.
pub fn draw(view: &ViewState<'_>, frame: &mut Frame, area: Rect) {
    let theme = view.config.theme;
    let line = if let Some(text) = &view.filter_input {
        Line::from(vec![
            Span::styled("/", theme.key),
            Span::raw(text.clone()),
            Span::styled("▏", theme.key),
            Span::styled("  Enter keep · Esc clear", theme.dim),
        ])
    } else if let Some(text) = &view.time_input {
        Line::from(vec![
            Span::styled("jump to: ", theme.key),
            Span::raw(text.clone()),
            Span::styled("▏", theme.key),
            Span::styled(
                "  RFC 3339, or +/- from the cursor (-5m, +30s) · Enter go · Esc cancel",
                theme.dim,
            ),
        ])
    } else if let Some(message) = &view.message {
        Line::from(Span::styled(message.clone(), theme.in_flight))
    } else if view.replay.is_some() {
        let hints = [
            ("Space", "play"),
            ("<>", "step"),
            ("t", "jump"),
            ("+-", "speed"),
            ("{}", "start/end"),
            (key_of(Action::FollowUrgent), "urgent"),
            ("c", "check"),
            ("?", "help"),
            ("q", "quit"),
        ];
        hint_line(&theme, &hints, area.width)
    } else {
        let hints: Vec<(&str, &str)> = BINDINGS
            .iter()
            .filter(|binding| !(binding.writes && view.config.read_only))
            .filter_map(|binding| {
                let key = binding.shown.split(' ').next().unwrap_or(binding.shown);
                binding.hint.map(|hint| (key, hint))
            })
            .collect();
        hint_line(&theme, &hints, area.width)
    };
    frame.render_widget(Paragraph::new(line), area);
}

/// `key hint` pairs in one line of `width` columns: two spaces apart,
/// one when that does not fit, and as many as fit, first first.
fn hint_line(theme: &Theme, hints: &[(&str, &str)], width: u16) -> Line<'static> {
    let columns = |gap: usize| -> usize {
        let text: usize = hints
            .iter()
            .map(|(key, hint)| super::super::fit::width(key) + 1 + super::super::fit::width(hint))
            .sum();
        text + gap * hints.len().saturating_sub(1)
    };
    let gap = if columns(2) <= usize::from(width) {
        2
    } else {
        1
    };
    let mut spans = Vec::new();
    let mut used = 0;
    for (index, (key, hint)) in hints.iter().enumerate() {
        let lead = if index == 0 { 0 } else { gap };
        let own = super::super::fit::width(key) + 1 + super::super::fit::width(hint);
        if used + lead + own > usize::from(width) {
            break;
        }
        spans.push(Span::raw(" ".repeat(lead)));
        spans.push(Span::styled(key.to_string(), theme.key));
        spans.push(Span::styled(format!(" {hint}"), theme.dim));
        used += lead + own;
    }
    Line::from(spans)
}
