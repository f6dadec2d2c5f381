//! Drawing: one function per screen region, all reading the [`App`].
//!
//! Invariants: only the rows inside the viewport are turned into text
//! (the model hands out an index list; a 100k-key tree costs a viewport's
//! worth of strings per frame); every size down to 1×1 draws without
//! panicking — below [`MIN_WIDTH`]×[`MIN_HEIGHT`] a one-line notice
//! replaces the screen; ages use the model's clock, never the system's;
//! an overlay (form, dialog) is drawn last, above everything.

mod blocking;
mod details;
mod dialog;
mod events;
mod footer;
mod form;
mod header;
pub(crate) mod help;
mod holders;
mod list;
mod state;
mod test_holders;
mod tree;

use std::time::SystemTime;

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{HighlightSpacing, Paragraph, Table, TableState, Wrap};

use crate::engine::Liveness;
use crate::operate::verdict::Verdict;
use crate::time_format;

use super::action::Pane;
use super::theme::{Theme, state_label};
pub use state::ViewState;

pub(crate) use dialog::ReportArea;

/// Narrowest terminal that gets the full screen.
pub(crate) const MIN_WIDTH: u16 = 30;
/// Lowest terminal that gets the full screen.
pub(crate) const MIN_HEIGHT: u16 = 7;
/// Lowest terminal whose header names the most urgent key on a line of
/// its own (below it, the counts still say how many need attention).
const ATTENTION_LINE_FROM: u16 = 12;

/// Where the last frame put things, for mouse hits.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HitMap {
    /// The list of the current pane (rows only, no header).
    pub list: Rect,
    /// Index of the list's first visible row.
    pub offset: usize,
    /// The tab bar line, and the x range of each tab.
    pub tabs: Rect,
    /// `(start x, end x)` per pane, in [`Pane::ALL`] order.
    pub tab_spans: [(u16, u16); Pane::ALL.len()],
}

/// What one frame laid out, for the app to keep until the next input:
/// mouse hits, the current list's page size, the report dialog's scroll
/// bounds. Drawing reads the app and returns this; it writes nothing.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Drawn {
    /// Where the list and the tabs went.
    pub hits: HitMap,
    /// Rows per page of the current list (`None` when none was drawn).
    pub page: Option<usize>,
    /// The report dialog's layout, when it is open.
    pub report: Option<ReportArea>,
    /// The largest useful scroll of the details pane (0: it all fits).
    pub details_max: u16,
    /// The largest useful scroll of the help overlay (0: closed or fits).
    pub help_max: u16,
}

/// Draws the whole screen and returns what it laid out.
pub fn draw(view: &ViewState<'_>, frame: &mut Frame) -> Drawn {
    let area = frame.area();
    if area.width < MIN_WIDTH || area.height < MIN_HEIGHT {
        let notice = Paragraph::new("locktop: terminal too small").wrap(Wrap { trim: true });
        frame.render_widget(notice, area);
        return Drawn::default();
    }
    // The held keys by urgency, once per frame: the header counts them and
    // names the first that needs attention.
    let data = view.model.data();
    let rows = data.blocking_rows(view.model.now(), view.config.materializing_after);
    let urgent = rows.iter().find(|row| row.needs_attention());
    let header_lines = 2 + u16::from(area.height >= ATTENTION_LINE_FROM && urgent.is_some());
    let [top, tabs, body, footer] = Layout::vertical([
        Constraint::Length(header_lines),
        Constraint::Length(1),
        Constraint::Fill(1),
        Constraint::Length(1),
    ])
    .areas(area);
    header::draw_header(view, frame, top, &rows);
    let tab_spans = header::draw_tabs(view, frame, tabs);
    let (list, side) = split_body(body);
    let list = match view.pane {
        Pane::Tree => tree::draw(view, frame, list),
        Pane::Holders => holders::draw(view, frame, list),
        Pane::Events => events::draw(view, frame, list),
        Pane::Blocking => blocking::draw(view, frame, list),
        Pane::TestHolders => test_holders::draw(view, frame, list),
    };
    let details_max = side.map_or(0, |side| details::draw(view, frame, side));
    footer::draw(view, frame, footer);
    let help_max = if view.help {
        let disabled = match (view.replay.is_some(), view.config.read_only) {
            (true, _) => Some(help::Disabled::Replay),
            (false, true) => Some(help::Disabled::ReadOnly),
            (false, false) => None,
        };
        let view = help::HelpView {
            theme: view.config.theme,
            disabled,
            scroll: view.help_scroll,
        };
        help::draw(&view, frame, area)
    } else {
        0
    };
    let report = dialog::draw(view, frame, area);
    Drawn {
        hits: HitMap {
            list: list.rows,
            offset: list.offset,
            tabs,
            tab_spans,
        },
        page: Some(list.page),
        report,
        details_max,
        help_max,
    }
}

/// A `width`×`height` rectangle centred in `area` (shrunk to fit).
pub(crate) fn centered(area: Rect, width: u16, height: u16) -> Rect {
    let width = width.min(area.width);
    let height = height.min(area.height);
    Rect {
        x: area.x + (area.width - width) / 2,
        y: area.y + (area.height - height) / 2,
        width,
        height,
    }
}

/// Splits `text` into lines of at most `width` characters, breaking at
/// spaces when it can; continuation lines are indented by `indent`.
pub(crate) fn wrap(text: &str, width: usize, indent: usize) -> Vec<String> {
    let width = width.max(1);
    let indent = if indent * 2 < width { indent } else { 0 };
    let mut lines = Vec::new();
    let mut rest: Vec<char> = text.chars().collect();
    let mut room = width;
    while rest.len() > room {
        let cut = rest[..=room]
            .iter()
            .rposition(|&c| c == ' ')
            .filter(|&at| at > indent)
            .unwrap_or(room);
        let head: String = rest[..cut].iter().collect();
        lines.push(head.trim_end().to_string());
        let skip = usize::from(rest.get(cut) == Some(&' '));
        rest = rest[cut + skip..].to_vec();
        rest.splice(0..0, std::iter::repeat_n(' ', indent));
        room = width;
    }
    lines.push(rest.into_iter().collect());
    lines
}

/// Width the list keeps when the details pane goes beside it: what an
/// 80-column terminal gives it, so a wider terminal never shows less.
pub(crate) const SIDE_BY_SIDE_LIST: u16 = 80;

/// The list and, when there is room, the details pane (beside the list on
/// wide terminals — the list keeping at least [`SIDE_BY_SIDE_LIST`]
/// columns —, below it otherwise).
fn split_body(body: Rect) -> (Rect, Option<Rect>) {
    if body.width >= SIDE_BY_SIDE_LIST + 40 {
        let list = (body.width * 11 / 20).max(SIDE_BY_SIDE_LIST);
        let [list, side] =
            Layout::horizontal([Constraint::Length(list), Constraint::Fill(1)]).areas(body);
        (list, Some(side))
    } else if body.height >= 14 {
        let side = (body.height * 9 / 20).clamp(7, 12);
        let [list, side] =
            Layout::vertical([Constraint::Fill(1), Constraint::Length(side)]).areas(body);
        (list, Some(side))
    } else {
        (body, None)
    }
}

/// Renders a table of viewport rows with the selection marked by the
/// theme's style AND a `>` column (visible without colour).
pub(crate) fn render_table(
    frame: &mut Frame,
    area: Rect,
    table: Table,
    theme: &Theme,
    selected_in_window: Option<usize>,
) {
    let table = table
        .row_highlight_style(theme.selected)
        .highlight_symbol(">")
        .highlight_spacing(HighlightSpacing::Always);
    let mut state = TableState::new().with_selected(selected_in_window);
    frame.render_stateful_widget(table, area, &mut state);
}

/// The glyph and word a held key's row shows for a verdict that needs
/// attention (not colour alone), in its style; `None` for a key that is
/// simply held. The one place these markers are chosen: the tree, the
/// blocking view and the header use it, and the help's legend must list
/// every one (a test checks).
pub(crate) fn verdict_marker(theme: &Theme, verdict: &Verdict) -> Option<Span<'static>> {
    let (glyph, style) = match verdict {
        Verdict::Deadlock { .. } => ("⊗", theme.error),
        Verdict::WaitCycle { .. } => ("↻", theme.error),
        Verdict::Blocked { .. } => ("⇢", theme.in_flight),
        Verdict::Stopped { .. } => ("‖", theme.error),
        Verdict::OrphanedChild { .. } => ("↯", theme.error),
        Verdict::MaterializingTooLong { .. } => ("◔", theme.error),
        Verdict::Idle { .. } => ("◌", theme.error),
        Verdict::Contended { .. } => ("◈", theme.in_flight),
        Verdict::UnverifiedHolder { .. } => ("?", theme.dim),
        Verdict::AgentActive { .. } | Verdict::Materializing { .. } | Verdict::Held { .. } => {
            return None;
        }
    };
    let label = format!("{glyph} {}", verdict.short_word());
    Some(Span::styled(label, style))
}

/// The glyph of a `glyph word` state span when the list is narrow; the
/// span as it is when wide.
pub(crate) fn narrow_state(span: Span<'static>, wide: bool) -> Span<'static> {
    if wide {
        return span;
    }
    let glyph: String = span.content.chars().take_while(|&c| c != ' ').collect();
    Span::styled(glyph, span.style)
}

/// `● live`-style span of a liveness.
pub(crate) fn state_span(theme: &Theme, liveness: Liveness) -> Span<'static> {
    let (glyph, word) = state_label(liveness);
    Span::styled(format!("{glyph} {word}"), theme.liveness(liveness))
}

/// The age of `since` at `now`, or empty.
pub(crate) fn age_text(since: Option<SystemTime>, now: SystemTime) -> String {
    since.map_or_else(String::new, |since| time_format::age(since, now))
}

/// `HH:MM:SSZ` of a time (UTC).
pub(crate) fn clock_text(time: SystemTime) -> String {
    let stamp = time_format::rfc3339(time);
    stamp
        .get(11..19)
        .map_or(stamp.clone(), |hms| format!("{hms}Z"))
}

/// A `label  value` line for the details pane.
pub(crate) fn field<'a>(theme: &Theme, label: &'a str, value: Vec<Span<'a>>) -> Line<'a> {
    // At least one space after the label, however long it is.
    let mut spans = vec![Span::styled(format!("{label:<8} "), theme.dim)];
    spans.extend(value);
    Line::from(spans)
}

/// `1 key`, `2 keys`: a count and its noun, plural when it is not one.
pub(crate) fn plural(count: usize, noun: &str) -> String {
    if count == 1 {
        format!("{count} {noun}")
    } else {
        format!("{count} {noun}s")
    }
}

/// A plain span.
pub(crate) fn text<'a>(value: impl Into<std::borrow::Cow<'a, str>>) -> Span<'a> {
    Span::styled(value, Style::new())
}
