//! What every list pane shares: where its rows go this frame, how far it
//! is scrolled, and what it says when empty.
//!
//! Invariant: a list's layout is a pure function of its area, its cursor
//! and its length; the pane reports it back ([`ListArea`]) instead of
//! storing it, and the app keeps it for mouse hits and paging.

use std::ops::Range;

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Row as TableRow, Table};

use crate::model::ListCursor;

use super::super::theme::Theme;
use super::render_table;

/// Where one list pane put its rows this frame.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct ListArea {
    /// The rows' area (below the column header, if any).
    pub rows: Rect,
    /// Index of the first visible row.
    pub offset: usize,
    /// Rows per page (at least 1).
    pub page: usize,
}

/// A list pane's layout for this frame.
pub(crate) struct ListFrame {
    /// Whether the column header fits (8 rows or more).
    pub header: bool,
    /// Where the rows go and how far the list is scrolled.
    pub area: ListArea,
    /// The indexes of the rows in the viewport.
    pub window: Range<usize>,
    /// The selected index.
    pub selected: usize,
}

impl ListFrame {
    /// Lays out `len` rows in `area`, scrolled so `cursor`'s selection is
    /// visible.
    pub fn new(area: Rect, cursor: &ListCursor, len: usize) -> Self {
        let header = area.height >= 8;
        let rows = Rect {
            y: area.y + u16::from(header),
            height: area.height.saturating_sub(u16::from(header)),
            ..area
        };
        let height = usize::from(rows.height);
        let offset = cursor.scrolled(height, len);
        let end = (offset + height).min(len);
        Self {
            header,
            area: ListArea {
                rows,
                offset,
                page: height.max(1),
            },
            window: offset.min(end)..end,
            selected: cursor.selected(len),
        }
    }

    /// Draws `rows` (the window's) under `titles`, the selection marked.
    pub fn render(
        &self,
        frame: &mut Frame,
        area: Rect,
        table: Table,
        titles: &[&'static str],
        theme: &Theme,
    ) -> ListArea {
        let table = if self.header {
            table.header(TableRow::new(titles.to_vec()).style(theme.dim))
        } else {
            table
        };
        let marked = self.selected.checked_sub(self.area.offset);
        render_table(frame, area, table, theme, marked);
        self.area
    }
}

/// Columns a table's one `Fill` column gets in a list `area_width` wide
/// whose other columns are `fixed` wide: what is left after the `>`
/// selection column and one space between columns (ratatui's default).
pub(crate) fn fill_width(area_width: u16, fixed: &[u16]) -> usize {
    let taken: usize = fixed.iter().map(|&w| usize::from(w)).sum::<usize>() + 1 + fixed.len();
    usize::from(area_width).saturating_sub(taken)
}

/// Draws the one dim line an empty list shows instead of rows.
pub(crate) fn empty(frame: &mut Frame, area: Rect, theme: &Theme, notice: &str) -> ListArea {
    let line = Line::from(Span::styled(notice.to_string(), theme.dim));
    frame.render_widget(Paragraph::new(line), area);
    ListArea {
        page: usize::from(area.height.saturating_sub(u16::from(area.height >= 8))).max(1),
        ..ListArea::default()
    }
}
