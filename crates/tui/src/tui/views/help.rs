//! The help overlay, generated from the key map (the single source): one
//! heading per group, one line per binding, in two columns when the
//! terminal is wide enough. Bindings disabled by read-only mode are listed
//! as such: marked `✗` and dimmed, with the group heading saying why.
//! A legend says what every glyph on screen means. Invariant: nothing is
//! cut at the right — the overlay grows with the terminal (up to what its
//! longest line needs) and a line longer than its column wraps; what does
//! not fit in height scrolls (↑↓), and the title says so.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Clear, Paragraph, Wrap};

use super::super::app::App;
use super::super::keymap::{BINDINGS, Group};
use super::super::theme::Theme;

/// Narrowest terminal that gets the help in two columns.
const TWO_COLUMNS_FROM: u16 = 78;
/// The widest the two-column overlay grows: every line unwrapped.
const TWO_COLUMNS_MAX: u16 = 88;
/// The widest the one-column overlay grows.
const ONE_COLUMN_MAX: u16 = 48;
/// The left column of two (general and navigation keys).
const LEFT_COLUMN: u16 = 38;

/// Draws the overlay centred in `area`, scrolled by the app's help
/// scroll (clamped); returns the largest useful scroll (0: it all fits).
pub fn draw(app: &App, frame: &mut Frame, area: Rect) -> u16 {
    let theme = app.config.theme;
    let replay = app.replay.is_some();
    let disabled = match (replay, app.config.read_only) {
        (true, _) => Some(Disabled::Replay),
        (false, true) => Some(Disabled::ReadOnly),
        (false, false) => None,
    };
    let read_only = disabled.is_some();
    let mut left = group_lines(&theme, Group::General, disabled);
    left.push(Line::default());
    left.extend(group_lines(&theme, Group::Navigate, disabled));
    if replay {
        left.push(Line::default());
        left.extend(group_lines(&theme, Group::Replay, disabled));
    }
    let mut right = group_lines(&theme, Group::View, disabled);
    right.push(Line::default());
    right.extend(group_lines(&theme, Group::Act, disabled));
    if replay {
        right.push(Line::from(Span::styled(
            "  c answers from the recording",
            theme.dim,
        )));
    } else if read_only {
        right.push(Line::from(Span::styled(
            "  c only probes (read-only)",
            theme.dim,
        )));
    }
    right.push(Line::default());
    right.extend(legend_lines(&theme));
    let two_columns = area.width >= TWO_COLUMNS_FROM;
    let widest = if two_columns {
        TWO_COLUMNS_MAX
    } else {
        ONE_COLUMN_MAX
    };
    let width = area.width.saturating_sub(2).min(widest);
    let inner_width = width.saturating_sub(2);
    // Lines longer than their column wrap (never cut): the rows counted
    // are the wrapped ones, so the scroll reaches the last of them.
    let wrapped = |lines: Vec<Line<'static>>| Paragraph::new(lines).wrap(Wrap { trim: false });
    let right_width = inner_width.saturating_sub(LEFT_COLUMN + 1);
    let columns = if two_columns {
        vec![wrapped(left), wrapped(right)]
    } else {
        left.extend(right);
        vec![wrapped(left)]
    };
    let rows = match columns.as_slice() {
        [left, right] => left
            .line_count(LEFT_COLUMN)
            .max(right.line_count(right_width)),
        [all] => all.line_count(inner_width),
        _ => 0,
    };
    let height = area
        .height
        .min(u16::try_from(rows).unwrap_or(u16::MAX).saturating_add(2));
    let popup = Rect {
        x: area.x + (area.width - width) / 2,
        y: area.y + (area.height - height) / 2,
        width,
        height,
    };
    let rows = u16::try_from(rows).unwrap_or(u16::MAX);
    let max_scroll = rows.saturating_sub(height.saturating_sub(2));
    let scroll = app.help_scroll.min(max_scroll);
    let mut title = vec![Span::styled(" Help · ? or Esc closes ", theme.section)];
    if max_scroll > 0 {
        title.push(Span::styled(
            format!("↑↓ {scroll}/{max_scroll} "),
            theme.dim,
        ));
    }
    let block = Block::bordered()
        .border_style(theme.dim)
        .title(Line::from(title));
    let inner = block.inner(popup);
    frame.render_widget(Clear, popup);
    frame.render_widget(block, popup);
    let areas: Vec<Rect> = if two_columns {
        let [a, b] = Layout::horizontal([Constraint::Length(LEFT_COLUMN), Constraint::Fill(1)])
            .spacing(1)
            .areas(inner);
        vec![a, b]
    } else {
        vec![inner]
    };
    for (column, area) in columns.into_iter().zip(areas) {
        frame.render_widget(column.scroll((scroll, 0)), area);
    }
    max_scroll
}

/// What the glyphs on screen mean: states, the verdicts that need
/// attention (a test checks every marker of `verdict_marker` is here),
/// and the PID column's marks.
pub(crate) fn legend_lines(theme: &Theme) -> Vec<Line<'static>> {
    let dim = |text: &str| Line::from(Span::styled(format!("  {text}"), theme.dim));
    vec![
        Line::from(Span::styled("States", theme.section)),
        dim("● live  ◆ own  ○ free  ◑ shared"),
        dim("◐ in-flight  ✖ error  □ dir"),
        Line::from(Span::styled("Needs attention", theme.section)),
        dim("⊗ deadlock (a circle that cannot clear)"),
        dim("↻ cycle (a circle of waits that may clear)"),
        dim("⇢ blocked (its holder waits on another key)"),
        dim("‖ stopped"),
        dim("↯ orphan (kept by a child)"),
        dim("◔ spawn (materializing too long)"),
        dim("◌ idle"),
        dim("◈ contended (a contender waits to take it)"),
        dim("header: N ⚠ suspect, N ◈ waited on"),
        Line::from(Span::styled("Not verified", theme.section)),
        dim("? unverified holder: maybe a reused PID"),
        dim("1234?    the same, in the PID column"),
        dim("1234+2   1234 and 2 more share it"),
        Line::from(Span::styled("Events", theme.section)),
        dim("▲ acquired  ▽ released / freed"),
        dim("○ holder exited  ✖ killed by locktop"),
        dim("⚠ a verdict began  ✓ it ended"),
        dim("⚠ problems (header): scan problems"),
    ]
}

/// Why the bindings that write are disabled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Disabled {
    /// `--read-only`.
    ReadOnly,
    /// A replay: nothing in it is live.
    Replay,
}

/// The lines of one group, the bindings that write marked `disabled`.
fn group_lines(theme: &Theme, group: Group, disabled: Option<Disabled>) -> Vec<Line<'static>> {
    let bindings = BINDINGS.iter().filter(|b| b.group == group);
    let mut heading = vec![Span::styled(group.title(), theme.section)];
    let read_only = disabled.is_some();
    if let Some(why) = disabled
        && bindings.clone().any(|b| b.writes)
    {
        let why = match why {
            Disabled::ReadOnly => "read-only",
            Disabled::Replay => "a replay",
        };
        heading.push(Span::styled(format!(" · ✗ disabled: {why}"), theme.dim));
    }
    let mut lines = vec![Line::from(heading)];
    for binding in bindings {
        // In a replay, Space plays and pauses the recording.
        let description = match (disabled, binding.action) {
            (Some(Disabled::Replay), super::super::action::Action::TogglePause) => {
                "play / pause the replay"
            }
            _ => binding.description,
        };
        let line = if binding.writes && read_only {
            Line::from(Span::styled(
                format!("✗ {:<9}{}", binding.shown, description),
                theme.dim,
            ))
        } else {
            Line::from(vec![
                Span::styled(format!("  {:<9}", binding.shown), theme.key),
                Span::raw(description),
            ])
        };
        lines.push(line);
    }
    lines
}
