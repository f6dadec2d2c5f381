//! The tree pane: Instances (AIH hierarchy), Tags, Other, Problems. Every
//! key row shows glyph + word, name, holder PID and age; directory nodes
//! end in `/`; collapsed nodes say how many keys they hide.
//!
//! Invariant: only `rows[offset .. offset + height]` become text.

use ratatui::Frame;
use ratatui::layout::{Constraint, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Cell, Row as TableRow, Table};

use crate::model::{Node, Row, Section};

use super::super::app::App;
use super::super::theme::Theme;
use super::{age_text, render_table, scroll_into_view, state_span};

/// Draws the tree pane into `area`.
pub fn draw(app: &mut App, frame: &mut Frame, area: Rect) {
    let theme = app.config.theme;
    let now = app.model.now();
    let selected = app.model.selected_row();
    let wide = area.width >= 50;
    let header = area.height >= 8;
    let list_height = usize::from(area.height.saturating_sub(u16::from(header)));
    let flat = app.model.flat();
    let tallies = flat.tallies;
    let window = window(&flat.rows, &mut app.offsets[0], selected, list_height);
    app.page = list_height.max(1);
    app.hits.list = Rect {
        y: area.y + u16::from(header),
        height: area.height.saturating_sub(u16::from(header)),
        ..area
    };
    app.hits.offset = app.offsets[0];

    let data = app.model.data();
    let rows: Vec<TableRow> = window
        .iter()
        .map(|row| {
            let node = data.tree.node(row.node);
            let cells = row_cells(&theme, node, row, tallies[node.section as usize], now, wide);
            TableRow::new(cells)
        })
        .collect();
    let widths: &[Constraint] = if wide {
        &[
            Constraint::Length(11),
            Constraint::Fill(1),
            Constraint::Length(8),
            Constraint::Length(6),
        ]
    } else {
        &[Constraint::Length(11), Constraint::Fill(1)]
    };
    let mut table = Table::new(rows, widths.to_vec());
    if header {
        let titles: &[&str] = if wide {
            &["STATE", "NAME", "PID", "AGE"]
        } else {
            &["STATE", "NAME"]
        };
        table = table.header(TableRow::new(titles.to_vec()).style(theme.dim));
    }
    let marked = selected.checked_sub(app.offsets[0]);
    render_table(frame, area, table, &theme, marked);
}

/// The rows in the viewport, after scrolling the selection into view.
fn window(rows: &[Row], offset: &mut usize, selected: usize, height: usize) -> Vec<Row> {
    scroll_into_view(offset, selected, height, rows.len());
    let end = (*offset + height).min(rows.len());
    rows[(*offset).min(end)..end].to_vec()
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
