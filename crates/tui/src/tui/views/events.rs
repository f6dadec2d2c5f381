//! The event log pane: acquired / released / holder exited / killed by
//! locktop / freed, and verdicts that start or stop needing attention
//! (⚠ stopped, ◈ contended, ✓ not stopped…), newest first, with time
//! (UTC), PID and key. Invariant: only the rows in the viewport become
//! text.

use ratatui::Frame;
use ratatui::layout::{Constraint, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Cell, Row as TableRow, Table};

use crate::model::EventKind;

use super::super::fit::fit;
use super::super::theme::Theme;
use super::clock_text;
use super::list::{self, ListArea, ListFrame, fill_width};
use super::state::ViewState;

/// The fixed columns before the key's: time, event, PID.
const FIXED: [u16; 3] = [9, 19, 7];

/// Glyph + word of an event kind, and its style.
fn kind_span(theme: &Theme, kind: EventKind) -> Span<'static> {
    let (glyph, style) = match kind {
        EventKind::Acquired => ("▲", theme.live),
        EventKind::Released | EventKind::Freed => ("▽", theme.free),
        EventKind::HolderExited => ("○", theme.free),
        EventKind::KilledByLocktop => ("✖", theme.error),
        EventKind::Flagged("contended") => ("◈", theme.in_flight),
        EventKind::Flagged(_) => ("⚠", theme.error),
        EventKind::Cleared(_) => ("✓", theme.dim),
    };
    Span::styled(format!("{glyph} {}", kind.text()), style)
}

/// Draws the event log into `area`; returns where its rows went.
pub fn draw(view: &ViewState<'_>, frame: &mut Frame, area: Rect) -> ListArea {
    let theme = view.config.theme;
    let log = view.model.events();
    let shown = view.model.event_rows();
    if log.is_empty() {
        return list::empty(frame, area, &theme, "no acquire or release seen yet");
    }
    if shown.is_empty() {
        return list::empty(frame, area, &theme, "no event matches the filter");
    }
    let layout = ListFrame::new(area, &view.model.events_cursor(), shown.len());
    let room = fill_width(area.width, &FIXED).saturating_sub(9);
    let rows: Vec<TableRow> = shown[layout.window.clone()]
        .iter()
        .filter_map(|&index| log.get(index))
        .map(|event| {
            // No PID: the holder was not visible (outside this PID
            // namespace, or gone before it was looked up).
            let pid = event
                .pid
                .map_or_else(|| "?".to_string(), |pid| pid.to_string());
            TableRow::new(vec![
                Cell::from(clock_text(event.at)),
                Cell::from(kind_span(&theme, event.kind)),
                Cell::from(pid),
                Cell::from(Line::from(vec![
                    Span::styled(format!("{:<9}", event.key.kind().as_str()), theme.dim),
                    Span::raw(fit(event.key.name(), room)),
                ])),
            ])
        })
        .collect();
    let widths = [
        Constraint::Length(FIXED[0]),
        Constraint::Length(FIXED[1]),
        Constraint::Length(FIXED[2]),
        Constraint::Fill(1),
    ];
    let titles = ["TIME", "EVENT", "PID", "KEY"];
    layout.render(frame, area, Table::new(rows, widths), &titles, &theme)
}
