//! The event log pane: acquire / release / death transitions, newest
//! first, with time (UTC), PID and key. Invariant: only the rows in the
//! viewport become text.

use ratatui::Frame;
use ratatui::layout::{Constraint, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Cell, Paragraph, Row as TableRow, Table};

use crate::model::EventKind;

use super::super::app::App;
use super::super::theme::Theme;
use super::{clock_text, render_table, scroll_into_view};

/// Glyph + word of an event kind, and its style.
fn kind_span(theme: &Theme, kind: EventKind) -> Span<'static> {
    let (glyph, style) = match kind {
        EventKind::Acquired => ("▲", theme.live),
        EventKind::Released => ("▽", theme.free),
        EventKind::Died => ("✖", theme.error),
    };
    Span::styled(format!("{glyph} {}", kind.as_str()), style)
}

/// Draws the event log into `area`.
pub fn draw(app: &mut App, frame: &mut Frame, area: Rect) {
    let theme = app.config.theme;
    let selected = app.model.events_selected();
    let header = area.height >= 8;
    let height = usize::from(area.height.saturating_sub(u16::from(header)));
    app.page = height.max(1);
    let log = app.model.events();
    if log.is_empty() {
        let empty = Paragraph::new(Line::from(Span::styled(
            "no acquire, release or death seen yet",
            theme.dim,
        )));
        frame.render_widget(empty, area);
        return;
    }
    scroll_into_view(&mut app.offsets[2], selected, height, log.len());
    let offset = app.offsets[2];
    app.hits.list = Rect {
        y: area.y + u16::from(header),
        height: area.height.saturating_sub(u16::from(header)),
        ..area
    };
    app.hits.offset = offset;
    let log = app.model.events();
    let rows: Vec<TableRow> = log
        .iter()
        .skip(offset)
        .take(height)
        .map(|event| {
            let pid = event.pid.map_or_else(String::new, |pid| pid.to_string());
            TableRow::new(vec![
                Cell::from(clock_text(event.at)),
                Cell::from(kind_span(&theme, event.kind)),
                Cell::from(pid),
                Cell::from(Line::from(vec![
                    Span::styled(format!("{:<9}", event.key.kind.as_str()), theme.dim),
                    Span::raw(event.key.name.clone()),
                ])),
            ])
        })
        .collect();
    let widths = [
        Constraint::Length(9),
        Constraint::Length(10),
        Constraint::Length(7),
        Constraint::Fill(1),
    ];
    let mut table = Table::new(rows, widths);
    if header {
        table = table.header(TableRow::new(["TIME", "EVENT", "PID", "KEY"]).style(theme.dim));
    }
    render_table(frame, area, table, &theme, selected.checked_sub(offset));
}
