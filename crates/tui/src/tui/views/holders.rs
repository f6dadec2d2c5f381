//! The holders pane — "who holds what": each holder process (oldest hold
//! first) with its state when it is not running or sleeping (`‖ stopped`,
//! `○ gone`, in the error style), then its keys (AIH locks first, then
//! tags), each with its state or, when it needs attention, its verdict's
//! marker — as the tree shows them. Invariants: only the rows in the
//! viewport become text; command lines and key paths are shortened in the
//! middle, and only when their column cannot hold them.

use ratatui::Frame;
use ratatui::layout::{Constraint, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Cell, Row as TableRow, Table};

use crate::liveness::process::{ProcState, ProcessInfo};
use crate::model::HolderRow;

use super::super::fit::{fit, width};
use super::super::theme::Theme;
use super::list::{self, ListArea, ListFrame, fill_width};
use super::state::ViewState;
use super::{age_text, plural, state_span, verdict_marker};

/// The fixed columns around the keys / command column: holder, age.
const FIXED: [u16; 2] = [13, 6];

/// Draws the holders pane into `area`; returns where its rows went.
pub fn draw(view: &ViewState<'_>, frame: &mut Frame, area: Rect) -> ListArea {
    let theme = view.config.theme;
    let now = view.model.now();
    let (data, groups, rows) = view.model.holders_with_data();
    if rows.is_empty() {
        let notice = "no process holds a key (or none matches the filter)";
        return list::empty(frame, area, &theme, notice);
    }
    let layout = ListFrame::new(area, view.model.holders_cursor(), rows.len());
    let room = fill_width(area.width, &FIXED);
    let table_rows: Vec<TableRow> = rows[layout.window.clone()]
        .iter()
        .map(|row| {
            let cells: Vec<Cell> = match *row {
                HolderRow::Process { group } => {
                    let group = &groups[group];
                    let process = &group.process;
                    // `○ gone` says the PID is stale: no second mark, and
                    // no placeholder saying the process is gone.
                    let (command, mark) = if process.alive {
                        (process.command(), process.holder_mark())
                    } else {
                        (process.cmdline.as_deref().unwrap_or(""), "")
                    };
                    let keys = format!("{}  ", plural(group.keys.len(), "key"));
                    let state = process_state(&theme, process);
                    let gap = if state.width() > 0 { "  " } else { "" };
                    let used = width(&keys) + state.width() + gap.len() + width(mark);
                    let command = fit(command, room.saturating_sub(used));
                    vec![
                        Cell::from(Span::styled(format!("pid {}", group.pid), theme.key)),
                        Cell::from(Line::from(vec![
                            Span::styled(keys, theme.dim),
                            state,
                            Span::raw(format!("{gap}{command}{mark}")),
                        ])),
                        Cell::from(age_text(group.oldest, now)),
                    ]
                }
                HolderRow::Key { node, .. } => {
                    let node = data.tree.node(node);
                    let Some(lock) = &node.lock else {
                        return TableRow::new(Vec::<Cell>::new());
                    };
                    let verdict = data.verdict(lock, now, view.config.materializing_after);
                    let state = verdict
                        .as_ref()
                        .and_then(|verdict| verdict_marker(&theme, verdict))
                        .unwrap_or_else(|| state_span(&theme, lock.liveness()));
                    vec![
                        Cell::from(Line::from(vec![Span::raw("  "), state])),
                        Cell::from(Line::from(vec![
                            Span::styled(format!("{:<9}", lock.key.kind().as_str()), theme.dim),
                            Span::styled(
                                fit(&node.path, room.saturating_sub(9)),
                                theme.liveness(lock.liveness()),
                            ),
                        ])),
                        Cell::from(age_text(lock.state.since, now)),
                    ]
                }
            };
            TableRow::new(cells)
        })
        .collect();
    let widths = [
        Constraint::Length(FIXED[0]),
        Constraint::Fill(1),
        Constraint::Length(FIXED[1]),
    ];
    let titles = ["HOLDER", "KEYS / COMMAND", "AGE"];
    layout.render(frame, area, Table::new(table_rows, widths), &titles, &theme)
}

/// A holder's state when it is not simply running or sleeping: `○ gone`
/// (it exited: its PID is stale, maybe reused), `‖ stopped` / `‖ traced` (it cannot run
/// until someone acts), `zombie`; nothing otherwise, nor when unread.
fn process_state(theme: &Theme, process: &ProcessInfo) -> Span<'static> {
    match process.state {
        _ if !process.alive => Span::styled("○ gone", theme.error),
        Some(state) if state.is_halted() || state == ProcState::Zombie => {
            let glyph = if state.is_halted() { "‖ " } else { "" };
            Span::styled(format!("{glyph}{}", state.as_str()), theme.error)
        }
        _ => Span::raw(""),
    }
}
