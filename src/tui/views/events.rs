//! The event log pane: acquire / release / death transitions, newest
//! first, with time (UTC), PID and key. Invariant: only the rows in the
//! viewport become text.

use ratatui::Frame;
use ratatui::layout::{Constraint, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Cell, Row as TableRow, Table};

use crate::model::EventKind;

use super::super::app::App;
use super::super::theme::Theme;
use super::clock_text;
use super::list::{self, ListArea, ListFrame};

/// Glyph + word of an event kind, and its style.
fn kind_span(theme: &Theme, kind: EventKind) -> Span<'static> {
    let (glyph, style) = match kind {
        EventKind::Acquired => ("▲", theme.live),
        EventKind::Released => ("▽", theme.free),
        EventKind::Died => ("✖", theme.error),
    };
    Span::styled(format!("{glyph} {}", kind.as_str()), style)
}

/// Draws the event log into `area`; returns where its rows went.
pub fn draw(app: &App, frame: &mut Frame, area: Rect) -> ListArea {
    let theme = app.config.theme;
    let log = app.model.events();
    if log.is_empty() {
        return list::empty(frame, area, &theme, "no acquire, release or death seen yet");
    }
    let layout = ListFrame::new(area, app.model.events_cursor(), log.len());
    let rows: Vec<TableRow> = log
        .iter()
        .skip(layout.window.start)
        .take(layout.window.len())
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
    let titles = ["TIME", "EVENT", "PID", "KEY"];
    layout.render(frame, area, Table::new(rows, widths), &titles, &theme)
}
