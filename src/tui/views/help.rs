//! The help overlay, generated from the key map (the single source): one
//! heading per group, one line per binding, in two columns when the
//! terminal is wide enough. Bindings disabled by read-only mode are listed
//! as such: marked `✗` and dimmed, with the group heading saying why.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Clear, Paragraph};

use super::super::app::App;
use super::super::keymap::{BINDINGS, Group};
use super::super::theme::Theme;

/// Draws the overlay centred in `area`.
pub fn draw(app: &App, frame: &mut Frame, area: Rect) {
    let theme = app.config.theme;
    let read_only = app.config.read_only;
    let mut left = group_lines(&theme, Group::General, read_only);
    left.push(Line::default());
    left.extend(group_lines(&theme, Group::Navigate, read_only));
    let mut right = group_lines(&theme, Group::View, read_only);
    right.push(Line::default());
    right.extend(group_lines(&theme, Group::Act, read_only));
    if read_only {
        right.push(Line::from(Span::styled(
            "  c only probes (read-only)",
            theme.dim,
        )));
    }
    right.push(Line::default());
    right.push(Line::from(Span::styled("States", theme.section)));
    for state in ["● live  ◆ own  ○ free", "◐ in-flight  ✖ error  □ dir"] {
        right.push(Line::from(Span::styled(format!("  {state}"), theme.dim)));
    }
    let two_columns = area.width >= 78;
    let (width, rows) = if two_columns {
        (76, left.len().max(right.len()))
    } else {
        (40, left.len() + right.len())
    };
    let width = area.width.saturating_sub(2).min(width);
    let height = area.height.min(rows as u16 + 2);
    let popup = Rect {
        x: area.x + (area.width - width) / 2,
        y: area.y + (area.height - height) / 2,
        width,
        height,
    };
    let block = Block::bordered()
        .border_style(theme.dim)
        .title(Span::styled(" Help · ? or Esc closes ", theme.section));
    let inner = block.inner(popup);
    frame.render_widget(Clear, popup);
    frame.render_widget(block, popup);
    if two_columns {
        let [a, b] = Layout::horizontal([Constraint::Length(38), Constraint::Fill(1)])
            .spacing(1)
            .areas(inner);
        frame.render_widget(Paragraph::new(left), a);
        frame.render_widget(Paragraph::new(right), b);
    } else {
        left.extend(right);
        frame.render_widget(Paragraph::new(left), inner);
    }
}

fn group_lines(theme: &Theme, group: Group, read_only: bool) -> Vec<Line<'static>> {
    let bindings = BINDINGS.iter().filter(|b| b.group == group);
    let mut heading = vec![Span::styled(group.title(), theme.section)];
    if read_only && bindings.clone().any(|b| b.writes) {
        heading.push(Span::styled(" · ✗ disabled: read-only", theme.dim));
    }
    let mut lines = vec![Line::from(heading)];
    for binding in bindings {
        let line = if binding.writes && read_only {
            Line::from(Span::styled(
                format!("✗ {:<9}{}", binding.shown, binding.description),
                theme.dim,
            ))
        } else {
            Line::from(vec![
                Span::styled(format!("  {:<9}", binding.shown), theme.key),
                Span::raw(binding.description),
            ])
        };
        lines.push(line);
    }
    lines
}
