//! The tree pane: Instances (AIH hierarchy), Tags, Other, Problems. Every
//! key row shows glyph + word, name, holder PID and age; directory nodes
//! end in `/`; collapsed nodes say how many keys they hide.
//!
//! Invariant: only `rows[offset .. offset + height]` become text.

use ratatui::Frame;
use ratatui::layout::{Constraint, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Cell, Row as TableRow, Table};

use crate::model::{Node, Row, Section, Verdict};

use super::super::app::App;
use super::super::theme::Theme;
use super::list::{ListArea, ListFrame};
use super::{age_text, state_span};

/// Draws the tree pane into `area`; returns where its rows went.
pub fn draw(app: &App, frame: &mut Frame, area: Rect) -> ListArea {
    let theme = app.config.theme;
    let now = app.model.now();
    let wide = area.width >= 50;
    let flat = app.model.flat();
    let layout = ListFrame::new(area, app.model.tree_cursor(), flat.rows.len());
    let data = app.model.data();
    let rows: Vec<TableRow> = flat.rows[layout.window.clone()]
        .iter()
        .map(|row| {
            let node = data.tree.node(row.node);
            let tally = flat.tallies[node.section as usize];
            let verdict = node
                .lock
                .as_ref()
                .and_then(|lock| data.verdict(lock, now, app.config.materializing_after));
            let cells = row_cells(&theme, node, row, tally, now, wide);
            TableRow::new(mark_suspect(&theme, cells, verdict.as_ref()))
        })
        .collect();
    let (widths, titles): (&[Constraint], &[&str]) = if wide {
        (
            &[
                Constraint::Length(11),
                Constraint::Fill(1),
                Constraint::Length(8),
                Constraint::Length(6),
            ],
            &["STATE", "NAME", "PID", "AGE"],
        )
    } else {
        (
            &[Constraint::Length(11), Constraint::Fill(1)],
            &["STATE", "NAME"],
        )
    };
    let table = Table::new(rows, widths.to_vec());
    layout.render(frame, area, table, titles, &theme)
}

/// A suspect's state cell gets its own glyph and word (not colour alone).
fn mark_suspect<'a>(
    theme: &Theme,
    mut cells: Vec<Cell<'a>>,
    verdict: Option<&Verdict>,
) -> Vec<Cell<'a>> {
    let label = match verdict {
        Some(Verdict::Stopped { .. }) => "‖ stopped",
        Some(Verdict::MaterializingTooLong { .. }) => "◔ spawn",
        Some(Verdict::OrphanedChild { .. }) => "↯ orphan",
        Some(Verdict::Idle { .. }) => "◌ idle",
        _ => return cells,
    };
    if let Some(state) = cells.first_mut() {
        *state = Cell::from(Span::styled(label, theme.error));
    }
    cells
}

fn row_cells<'a>(
    theme: &Theme,
    node: &'a Node,
    row: &Row,
    tally: crate::model::SectionTally,
    now: std::time::SystemTime,
    wide: bool,
) -> Vec<Cell<'a>> {
    let arrow = match (row.has_children, row.expanded) {
        (false, _) => "  ",
        (true, true) => "▾ ",
        (true, false) => "▸ ",
    };
    let indent = "  ".repeat(usize::from(row.depth));
    let mut name = vec![Span::raw(indent), Span::styled(arrow, theme.dim)];
    let mut state = Span::raw("");
    let mut pid = String::new();
    let mut age = String::new();
    if node.is_root() {
        let arrow = if row.expanded { "▾ " } else { "▸ " };
        name = vec![
            Span::styled(arrow, theme.dim),
            Span::styled(node.label.as_str(), theme.section),
            Span::styled(section_count(node.section, tally), theme.dim),
        ];
    } else if let Some(problem) = &node.problem {
        state = Span::styled("⚠ problem", theme.error);
        name.push(Span::raw(node.label.as_str()));
        name.push(Span::styled(format!("  {problem}"), theme.dim));
    } else if let Some(lock) = &node.lock {
        state = state_span(theme, lock.liveness());
        name.push(Span::styled(
            node.label.as_str(),
            theme.liveness(lock.liveness()),
        ));
        if let Some(first) = lock.state.holders.first() {
            pid = first.pid.to_string();
            if lock.state.holders.len() > 1 {
                pid.push_str(&format!("+{}", lock.state.holders.len() - 1));
            }
        }
        age = age_text(lock.state.since, now);
    } else {
        state = Span::styled("□ dir", theme.directory);
        name.push(Span::styled(format!("{}/", node.label), theme.directory));
    }
    if row.has_children && !row.expanded && !node.is_root() {
        name.push(Span::styled(format!("  (+{})", row.shown_keys), theme.dim));
    }
    let mut cells = vec![Cell::from(state), Cell::from(Line::from(name))];
    if wide {
        cells.push(Cell::from(pid));
        cells.push(Cell::from(age));
    }
    cells
}

fn section_count(section: Section, tally: crate::model::SectionTally) -> String {
    let noun = if section == Section::Problems {
        "problems"
    } else {
        "keys"
    };
    if tally.shown == tally.total {
        format!("  {} {noun}", tally.total)
    } else {
        format!("  {} of {} {noun} shown", tally.shown, tally.total)
    }
}
