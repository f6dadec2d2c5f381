//! The holders pane — "who holds what": each holder process (oldest hold
//! first), then its keys (AIH locks first, then tags). Invariant: only
//! the rows in the viewport become text.

use ratatui::Frame;
use ratatui::layout::{Constraint, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Cell, Paragraph, Row as TableRow, Table};

use crate::model::HolderRow;

use super::super::app::App;
use super::{age_text, render_table, scroll_into_view, state_span};

/// Draws the holders pane into `area`.
pub fn draw(app: &mut App, frame: &mut Frame, area: Rect) {
    let theme = app.config.theme;
    let now = app.model.now();
    let selected = app.model.holders_selected();
    let header = area.height >= 8;
    let height = usize::from(area.height.saturating_sub(u16::from(header)));
    app.page = height.max(1);
    let (data, groups, rows) = app.model.holders_with_data();
    if rows.is_empty() {
        let empty = Paragraph::new(Line::from(Span::styled(
            "no process holds a key (or none matches the filter)",
            theme.dim,
        )));
        frame.render_widget(empty, area);
        return;
    }
    scroll_into_view(&mut app.offsets[1], selected, height, rows.len());
    let offset = app.offsets[1];
    app.hits.list = Rect {
        y: area.y + u16::from(header),
        height: area.height.saturating_sub(u16::from(header)),
        ..area
    };
    app.hits.offset = offset;
    let end = (offset + height).min(rows.len());
    let table_rows: Vec<TableRow> = rows[offset.min(end)..end]
        .iter()
        .map(|row| {
            let cells: Vec<Cell> = match *row {
                HolderRow::Process { group } => {
                    let group = &groups[group];
                    let gone = if group.process.alive {
                        ""
                    } else {
                        " (stale PID)"
                    };
                    vec![
                        Cell::from(Span::styled(format!("pid {}", group.pid), theme.key)),
                        Cell::from(Line::from(vec![
                            Span::styled(
                                format!(
                                    "{} key{}  ",
                                    group.keys.len(),
                                    if group.keys.len() == 1 { "" } else { "s" }
                                ),
                                theme.dim,
                            ),
                            Span::raw(format!("{}{gone}", group.process.command())),
                        ])),
                        Cell::from(age_text(group.oldest, now)),
                    ]
                }
                HolderRow::Key { node, .. } => {
                    let node = data.tree.node(node);
                    let Some(lock) = &node.lock else {
                        return TableRow::new(Vec::<Cell>::new());
                    };
                    vec![
                        Cell::from(Line::from(vec![
                            Span::raw("  "),
                            state_span(&theme, lock.liveness()),
                        ])),
                        Cell::from(Line::from(vec![
                            Span::styled(format!("{:<9}", lock.key.kind.as_str()), theme.dim),
                            Span::styled(node.path.clone(), theme.liveness(lock.liveness())),
                        ])),
                        Cell::from(age_text(lock.state.since, now)),
                    ]
                }
            };
            TableRow::new(cells)
        })
        .collect();
    let widths = [
        Constraint::Length(13),
        Constraint::Fill(1),
        Constraint::Length(6),
    ];
    let mut table = Table::new(table_rows, widths);
    if header {
        table = table.header(TableRow::new(["HOLDER", "KEYS / COMMAND", "AGE"]).style(theme.dim));
    }
    render_table(frame, area, table, &theme, selected.checked_sub(offset));
}
