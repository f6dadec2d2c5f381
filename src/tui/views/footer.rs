//! The status line: the filter being typed, else the last message, else
//! key hints generated from the key map.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use super::super::app::App;
use super::super::keymap::BINDINGS;

/// One line at the bottom.
pub fn draw(app: &App, frame: &mut Frame, area: Rect) {
    let theme = app.config.theme;
    let line = if let Some(text) = &app.filter_input {
        Line::from(vec![
            Span::styled("/", theme.key),
            Span::raw(text.clone()),
            Span::styled("▏", theme.key),
            Span::styled("  Enter keep · Esc clear", theme.dim),
        ])
    } else if let Some(text) = &app.time_input {
        Line::from(vec![
            Span::styled("jump to: ", theme.key),
            Span::raw(text.clone()),
            Span::styled("▏", theme.key),
            Span::styled(
                "  RFC 3339, or +/- from the cursor (-5m, +30s) · Enter go · Esc cancel",
                theme.dim,
            ),
        ])
    } else if let Some(message) = &app.message {
        Line::from(Span::styled(message.clone(), theme.in_flight))
    } else if app.replay.is_some() {
        let mut spans = Vec::new();
        for (key, hint) in [
            ("Space", "play"),
            ("<>", "step"),
            ("t", "jump"),
            ("+-", "speed"),
            ("{}", "start/end"),
            ("c", "check"),
            ("?", "help"),
            ("q", "quit"),
        ] {
            spans.push(Span::styled(key, theme.key));
            spans.push(Span::styled(format!(" {hint}  "), theme.dim));
        }
        Line::from(spans)
    } else {
        let mut spans = Vec::new();
        for binding in BINDINGS {
            if binding.writes && app.config.read_only {
                continue;
            }
            if let Some(hint) = binding.hint {
                let key = binding.shown.split(' ').next().unwrap_or(binding.shown);
                spans.push(Span::styled(key, theme.key));
                spans.push(Span::styled(format!(" {hint}  "), theme.dim));
            }
        }
        Line::from(spans)
    };
    frame.render_widget(Paragraph::new(line), area);
}
