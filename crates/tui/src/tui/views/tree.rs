//! The tree pane: Instances (AIH hierarchy), Tags, Other, Problems. Every
//! key row shows its state, name, holder PID and age; directory nodes end
//! in `/`; collapsed nodes say how many keys they hide.
//!
//! Invariants: only `rows[offset .. offset + height]` become text; a name
//! is shortened in the middle (`…`) only when the column it gets cannot
//! hold it, so a wider list never shows less of it; a problem row names
//! its path below `<state>/locks` (the common prefix is in the header);
//! below [`WIDE`] columns the state is its glyph alone and the PID column
//! stays.

use ratatui::Frame;
use ratatui::layout::{Constraint, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Cell, Row as TableRow, Table};

use crate::model::{Node, Row, Section, SectionTally, Verdict};

use super::super::fit::{fit, visible, width};
use super::super::theme::Theme;
use super::list::{ListArea, ListFrame, fill_width};
use super::state::ViewState;
use super::{age_text, narrow_state, plural, state_span, verdict_marker};

/// Narrowest list that shows the state as glyph and word, and the age.
pub(crate) const WIDE: u16 = 50;

/// The columns of one layout: fixed widths around the name, and titles.
struct Columns {
    state: u16,
    after: &'static [u16],
    titles: &'static [&'static str],
}

const WIDE_COLUMNS: Columns = Columns {
    state: 11,
    after: &[8, 6],
    titles: &["STATE", "NAME", "PID", "AGE"],
};
const NARROW_COLUMNS: Columns = Columns {
    state: 1,
    after: &[7],
    titles: &["S", "NAME", "PID"],
};

/// Draws the tree pane into `area`; returns where its rows went.
pub fn draw(view: &ViewState<'_>, frame: &mut Frame, area: Rect) -> ListArea {
    let theme = view.config.theme;
    let now = view.model.now();
    let wide = area.width >= WIDE;
    let columns = if wide { &WIDE_COLUMNS } else { &NARROW_COLUMNS };
    let mut fixed = vec![columns.state];
    fixed.extend_from_slice(columns.after);
    let name_width = fill_width(area.width, &fixed);
    let locks_root = crate::locks::locks_root(&view.config.state_dir);
    let flat = view.model.flat();
    let layout = ListFrame::new(area, view.model.tree_cursor(), flat.rows.len());
    let data = view.model.data();
    let rows: Vec<TableRow> = flat.rows[layout.window.clone()]
        .iter()
        .map(|row| {
            let node = data.tree.node(row.node);
            let verdict = node
                .lock
                .as_ref()
                .and_then(|lock| data.verdict(lock, now, view.config.materializing_after));
            let shown = RowText {
                node,
                row,
                tally: flat.tallies[node.section as usize],
                locks_root: &locks_root,
                name_width,
            };
            let mut cells = shown.cells(&theme, now, wide);
            mark_suspect(&theme, &mut cells, verdict.as_ref(), wide);
            TableRow::new(cells)
        })
        .collect();
    let mut widths = vec![Constraint::Length(columns.state), Constraint::Fill(1)];
    widths.extend(columns.after.iter().map(|&w| Constraint::Length(w)));
    let table = Table::new(rows, widths);
    layout.render(frame, area, table, columns.titles, &theme)
}

/// A key that needs attention gets its verdict's glyph and word in its
/// state cell (not colour alone); glyph only when narrow.
fn mark_suspect(theme: &Theme, cells: &mut [Cell<'_>], verdict: Option<&Verdict>, wide: bool) {
    let Some(marker) = verdict.and_then(|verdict| verdict_marker(theme, verdict)) else {
        return;
    };
    if let Some(state) = cells.first_mut() {
        *state = Cell::from(narrow_state(marker, wide));
    }
}

/// What one tree row needs to become text.
struct RowText<'a> {
    node: &'a Node,
    row: &'a Row,
    tally: SectionTally,
    locks_root: &'a std::path::Path,
    name_width: usize,
}

impl RowText<'_> {
    fn cells(&self, theme: &Theme, now: std::time::SystemTime, wide: bool) -> Vec<Cell<'static>> {
        let (node, row) = (self.node, self.row);
        let arrow = match (row.has_children, row.expanded) {
            (false, _) => "  ",
            (true, true) => "▾ ",
            (true, false) => "▸ ",
        };
        let indent = "  ".repeat(usize::from(row.depth));
        let hidden = if row.has_children && !row.expanded && !node.is_root() {
            format!("  (+{})", row.shown_keys)
        } else {
            String::new()
        };
        let room = |used: usize| self.name_width.saturating_sub(used);
        let lead = indent.len() + 2;
        let mut name = vec![Span::raw(indent), Span::styled(arrow, theme.dim)];
        let mut state = Span::raw("");
        let (mut pid, mut age) = (String::new(), String::new());
        if node.is_root() {
            let arrow = if row.expanded { "▾ " } else { "▸ " };
            let mut count = section_count(node.section, self.tally);
            if width(&count) > room(2 + width(&node.label)) {
                count = format!("  {}/{}", self.tally.shown, self.tally.total);
            }
            name = vec![
                Span::styled(arrow, theme.dim),
                Span::styled(node.label.clone(), theme.section),
                Span::styled(count, theme.dim),
            ];
        } else if let Some(problem) = &node.problem {
            state = Span::styled(if wide { "⚠ problem" } else { "⚠" }, theme.error);
            let path = std::path::Path::new(&node.path);
            let below = path.strip_prefix(self.locks_root).unwrap_or(path);
            let label = fit(&below.display().to_string(), room(lead));
            // The kind only when it fits whole (the details pane has it).
            let detail = format!("  {problem}");
            let fits = width(&detail) <= room(lead + width(&label));
            name.push(Span::raw(label));
            if fits {
                name.push(Span::styled(visible(&detail).into_owned(), theme.dim));
            }
        } else if let Some(lock) = &node.lock {
            state = narrow_state(state_span(theme, lock.liveness()), wide);
            let label = fit(&node.label, room(lead + width(&hidden)));
            name.push(Span::styled(label, theme.liveness(lock.liveness())));
            if let Some(first) = lock.state.holders.first() {
                pid = first.pid_text();
                if lock.state.holders.len() > 1 {
                    pid.push_str(&format!("+{}", lock.state.holders.len() - 1));
                }
            }
            age = age_text(lock.state.since, now);
        } else {
            state = narrow_state(Span::styled("□ dir", theme.directory), wide);
            let label = fit(&node.label, room(lead + 1 + width(&hidden)));
            name.push(Span::styled(format!("{label}/"), theme.directory));
        }
        if !hidden.is_empty() {
            name.push(Span::styled(hidden, theme.dim));
        }
        let mut cells = vec![
            Cell::from(state),
            Cell::from(Line::from(name)),
            Cell::from(pid),
        ];
        if wide {
            cells.push(Cell::from(age));
        }
        cells
    }
}

fn section_count(section: Section, tally: SectionTally) -> String {
    let noun = if section == Section::Problems {
        "problem"
    } else {
        "key"
    };
    if tally.shown == tally.total {
        format!("  {}", plural(tally.total, noun))
    } else {
        format!("  {} of {} shown", tally.shown, plural(tally.total, noun))
    }
}
