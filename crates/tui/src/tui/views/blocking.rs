//! The blocking pane — "what needs someone to act": every held key in
//! the order of [`crate::model::BlockingRow`]'s urgency (deadlocks first,
//! then wait cycles, keys someone waits on whose holder is a suspect,
//! contended keys, other suspects, watched keys, the rest; the holder
//! blocking the most processes first within each), with the holder, its
//! role and state, the age and who waits (`2 take 1 end`: two want to take
//! it, one waits for its release). Enter
//! shows the key in the tree. Invariants: only the rows in the viewport
//! become text; a key's name is shortened in the middle only when its
//! column cannot hold it.

use ratatui::Frame;
use ratatui::layout::{Constraint, Rect};
use ratatui::text::Span;
use ratatui::widgets::{Cell, Row as TableRow, Table};

use crate::model::BlockingRow;

use super::super::fit::fit;
use super::list::{self, ListArea, ListFrame, fill_width};
use super::state::ViewState;

/// The fixed columns around the key's: state, holder, age, waiting.
const FIXED: [u16; 4] = [11, 20, 6, 12];
/// Below this width: the state's glyph, the key, the holder's PID, age.
const WIDE: u16 = 60;
/// The narrow layout's fixed columns: state glyph, PID, age.
const NARROW_FIXED: [u16; 3] = [1, 7, 6];
use super::{age_text, narrow_state, state_span, verdict_marker};

/// Draws the blocking pane into `area`; returns where its rows went.
pub fn draw(view: &ViewState<'_>, frame: &mut Frame, area: Rect) -> ListArea {
    let theme = view.config.theme;
    let rows = view.blocking_rows();
    if rows.is_empty() {
        let notice = match view.model.settings().filter.is_empty() {
            true => "no key is held: nothing blocks anyone",
            false => "no held key matches the filter",
        };
        return list::empty(frame, area, &theme, notice);
    }
    let layout = ListFrame::new(area, view.model.blocking_cursor(), rows.len());
    let wide = area.width >= WIDE;
    let fixed: &[u16] = if wide { &FIXED } else { &NARROW_FIXED };
    let room = fill_width(area.width, fixed);
    let table_rows: Vec<TableRow> = rows[layout.window.clone()]
        .iter()
        .map(|row| TableRow::new(row_cells(view, row, room, wide)))
        .collect();
    let mut widths = vec![Constraint::Length(fixed[0]), Constraint::Fill(1)];
    widths.extend(fixed[1..].iter().map(|&w| Constraint::Length(w)));
    let titles: &[&str] = if wide {
        &["STATE", "KEY", "HOLDER", "AGE", "WAITING"]
    } else {
        &["S", "KEY", "PID", "AGE"]
    };
    layout.render(frame, area, Table::new(table_rows, widths), titles, &theme)
}

/// One row's cells: state, key, holder, age (and waiting when wide).
fn row_cells(
    view: &ViewState<'_>,
    row: &BlockingRow,
    room: usize,
    wide: bool,
) -> Vec<Cell<'static>> {
    let (theme, now, data) = (view.config.theme, view.model.now(), view.model.data());
    let Some(lock) = data.lock(row.node) else {
        return Vec::new();
    };
    let marker = row.verdict.as_ref().and_then(|v| verdict_marker(&theme, v));
    let state = marker.unwrap_or_else(|| state_span(&theme, lock.liveness()));
    let state = narrow_state(state, wide);
    let holder = lock
        .state
        .holders
        .first()
        .map_or_else(String::new, |process| {
            if !wide {
                return process.pid_text();
            }
            let role = data.role_of(process.pid).column_word();
            let state = process.state.map_or("", |state| state.as_str());
            format!("{} {role} {state}", process.pid_text())
        });
    let mut cells = vec![
        Cell::from(state),
        // The name only: the kind is in the details, and the name needs
        // the width.
        Cell::from(fit(lock.key.name(), room)),
        Cell::from(holder),
        Cell::from(age_text(lock.state.since, now)),
    ];
    if wide && row.waiting.total() > 0 {
        let waiting = row.waiting.short();
        cells.push(Cell::from(Span::styled(waiting, theme.in_flight)));
    }
    cells
}
