//! The blocking pane — "what needs someone to act": every held key,
//! suspects first (stopped holder, orphaned child, spawn materializing too
//! long, idle holder), then keys someone waits on, then the rest, oldest hold first;
//! with the holder, its role and state, the age and the waiters. Enter
//! shows the key in the tree. Invariant: only the rows in the viewport
//! become text.

use ratatui::Frame;
use ratatui::layout::{Constraint, Rect};
use ratatui::text::Span;
use ratatui::widgets::{Cell, Row as TableRow, Table};

use crate::model::{Role, Verdict};

use super::super::app::App;
use super::list::{self, ListArea, ListFrame};
use super::{age_text, state_span};

/// Draws the blocking pane into `area`; returns where its rows went.
pub fn draw(app: &App, frame: &mut Frame, area: Rect) -> ListArea {
    let theme = app.config.theme;
    let now = app.model.now();
    let rows = app.blocking_rows();
    if rows.is_empty() {
        return list::empty(frame, area, &theme, "no key is held: nothing blocks anyone");
    }
    let layout = ListFrame::new(area, app.model.blocking_cursor(), rows.len());
    let data = app.model.data();
    let table_rows: Vec<TableRow> = rows[layout.window.clone()]
        .iter()
        .map(|row| {
            let Some(lock) = data.lock(row.node) else {
                return TableRow::new(Vec::<Cell>::new());
            };
            let state = match &row.verdict {
                Some(Verdict::Stopped { .. }) => Span::styled("‖ stopped", theme.error),
                Some(Verdict::OrphanedChild { .. }) => Span::styled("↯ orphan", theme.error),
                Some(Verdict::MaterializingTooLong { .. }) => Span::styled("◔ spawn", theme.error),
                Some(Verdict::Idle { .. }) => Span::styled("◌ idle", theme.error),
                _ => state_span(&theme, lock.liveness()),
            };
            let holder = lock
                .state
                .holders
                .first()
                .map_or_else(String::new, |process| {
                    let role = match data.role_of(process.pid) {
                        Role::Agent { .. } => "agent",
                        Role::Materializing => "spawn",
                        Role::Other => "",
                    };
                    let state = process.state.map_or("", |state| state.as_str());
                    format!("{} {role} {state}", process.pid)
                });
            let waiting = if row.waiting > 0 {
                format!("{} waiting", row.waiting)
            } else {
                String::new()
            };
            TableRow::new(vec![
                Cell::from(state),
                // The name only: the kind is in the details, and the name
                // needs the width.
                Cell::from(lock.key.name.clone()),
                Cell::from(holder),
                Cell::from(age_text(lock.state.since, now)),
                Cell::from(Span::styled(waiting, theme.in_flight)),
            ])
        })
        .collect();
    let widths = [
        Constraint::Length(11),
        Constraint::Fill(1),
        Constraint::Length(20),
        Constraint::Length(6),
        Constraint::Length(9),
    ];
    let titles = ["STATE", "KEY", "HOLDER", "AGE", "WAITING"];
    layout.render(frame, area, Table::new(table_rows, widths), &titles, &theme)
}
