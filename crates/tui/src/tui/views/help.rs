//! The help overlay, generated from the key map (the single source): one
//! heading per group, one line per binding, and a legend of every glyph
//! on screen. Bindings disabled by read-only mode or a replay are listed
//! as such: marked `✗` and dimmed, with the group heading saying why.
//!
//! Invariants: nothing is cut at the right — a line longer than its
//! column wraps, its continuation rows indented under its text (not
//! under its key or glyph); on a terminal wide enough for two columns,
//! the groups are split between them where the taller column is
//! shortest, in reading order; what does not fit in height scrolls (↑↓),
//! and the title says so. Drawn from a [`HelpView`], not the app.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Clear, Paragraph};

use super::super::action::Action;
use super::super::fit;
use super::super::keymap::{BINDINGS, Group};
use super::super::theme::Theme;

/// Narrowest terminal that gets the help in two columns.
const TWO_COLUMNS_FROM: u16 = 78;
/// The widest the two-column overlay grows: every line unwrapped.
const TWO_COLUMNS_MAX: u16 = 92;
/// The widest the one-column overlay grows.
const ONE_COLUMN_MAX: u16 = 48;
/// The fewest columns a line's text keeps beside its lead; narrower, the
/// lead wraps with it.
const MIN_TEXT: usize = 12;

/// What the help overlay shows: all it reads.
#[derive(Debug, Clone, Copy)]
pub struct HelpView {
    /// Colours and styles.
    pub theme: Theme,
    /// Why the bindings that write are disabled, if they are.
    pub disabled: Option<Disabled>,
    /// The operator's scroll (clamped when drawn).
    pub scroll: u16,
}

/// Why the bindings that write are disabled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Disabled {
    /// `--read-only`.
    ReadOnly,
    /// A replay: nothing in it is live (its own keys are listed).
    Replay,
}

/// One line of help before wrapping: a lead (the key, or the glyph)
/// and its text; continuation rows start under the text.
#[derive(Debug, Clone)]
struct HelpLine {
    lead: Span<'static>,
    text: String,
    style: Style,
}

impl HelpLine {
    fn heading(text: &'static str, style: Style) -> Self {
        Self {
            lead: Span::raw(""),
            text: text.to_string(),
            style,
        }
    }

    /// The whole line, unwrapped.
    #[cfg(test)]
    fn line(&self) -> Line<'static> {
        Line::from(vec![
            self.lead.clone(),
            Span::styled(self.text.clone(), self.style),
        ])
    }

    /// The line in rows of at most `width` columns (see [`super::wrap`]),
    /// continuation rows indented to its text; on a column too narrow for
    /// that, lead and text wrap together.
    fn rows(&self, width: usize) -> Vec<Line<'static>> {
        let hang = fit::width(&self.lead.content);
        if width < hang + MIN_TEXT {
            let whole = format!("{}{}", self.lead.content, self.text);
            return super::wrap(&whole, width, 0)
                .into_iter()
                .map(|row| Line::from(Span::styled(row, self.style)))
                .collect();
        }
        super::wrap(&self.text, width - hang, 0)
            .into_iter()
            .enumerate()
            .map(|(at, row)| {
                let lead = match at {
                    0 => self.lead.clone(),
                    _ => Span::raw(" ".repeat(hang)),
                };
                Line::from(vec![lead, Span::styled(row, self.style)])
            })
            .collect()
    }
}

/// Lines a column never breaks inside, and whether a blank row comes
/// before them (not at a column's top; none where the blank rows would
/// make the overlay scroll).
#[derive(Debug, Clone)]
struct Section {
    lines: Vec<HelpLine>,
    blank_before: bool,
}

/// Draws the overlay centred in `area`; returns the largest useful
/// scroll (0: it all fits).
pub fn draw(help: &HelpView, frame: &mut Frame, area: Rect) -> u16 {
    let theme = help.theme;
    let blocks = blocks(&theme, help.disabled);
    let two_columns = area.width >= TWO_COLUMNS_FROM;
    let widest = if two_columns {
        TWO_COLUMNS_MAX
    } else {
        ONE_COLUMN_MAX
    };
    let width = area.width.saturating_sub(2).min(widest);
    let inner_width = usize::from(width.saturating_sub(2));
    let laid_out = |blocks: &[Section]| -> Vec<(usize, Vec<Line<'static>>)> {
        if two_columns {
            let left_width = inner_width.saturating_sub(1) / 2;
            let right_width = inner_width.saturating_sub(1 + left_width);
            let (left, right) = split_in_two(blocks, left_width, right_width);
            vec![(left_width, left), (right_width, right)]
        } else {
            vec![(inner_width, stacked(blocks, inner_width))]
        }
    };
    let tallest = |columns: &[(usize, Vec<Line<'static>>)]| {
        columns
            .iter()
            .map(|(_, lines)| lines.len())
            .max()
            .unwrap_or(0)
    };
    let mut columns = laid_out(&blocks);
    let room = usize::from(area.height.saturating_sub(2));
    if tallest(&columns) > room {
        // Blank rows between the groups go before anything scrolls.
        let tight: Vec<Section> = blocks
            .into_iter()
            .map(|block| Section {
                blank_before: false,
                ..block
            })
            .collect();
        columns = laid_out(&tight);
    }
    let rows = tallest(&columns);
    let rows = u16::try_from(rows).unwrap_or(u16::MAX);
    let height = area.height.min(rows.saturating_add(2));
    let popup = Rect {
        x: area.x + (area.width - width) / 2,
        y: area.y + (area.height - height) / 2,
        width,
        height,
    };
    let max_scroll = rows.saturating_sub(height.saturating_sub(2));
    let scroll = help.scroll.min(max_scroll);
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
    let constraints = columns
        .iter()
        .map(|(width, _)| Constraint::Length(u16::try_from(*width).unwrap_or(u16::MAX)));
    let areas = Layout::horizontal(constraints).spacing(1).split(inner);
    for ((_, lines), area) in columns.into_iter().zip(areas.iter()) {
        frame.render_widget(Paragraph::new(lines).scroll((scroll, 0)), *area);
    }
    max_scroll
}

/// The overlay's blocks in reading order: the key groups, then the
/// legend's sections. A column may break between any two.
fn blocks(theme: &Theme, disabled: Option<Disabled>) -> Vec<Section> {
    let mut groups = vec![Group::General, Group::Navigate];
    if disabled == Some(Disabled::Replay) {
        groups.push(Group::Replay);
    }
    groups.extend([Group::View, Group::Act]);
    let mut blocks: Vec<Section> = groups
        .into_iter()
        .map(|group| Section {
            lines: group_lines(theme, group, disabled),
            blank_before: true,
        })
        .collect();
    let note = match disabled {
        Some(Disabled::Replay) => Some("c answers from the recording"),
        Some(Disabled::ReadOnly) => Some("c only probes (read-only)"),
        None => None,
    };
    if let (Some(note), Some(act)) = (note, blocks.last_mut()) {
        act.lines.push(legend_line(theme, note));
    }
    // The legend's sections follow one another without blank rows: each
    // starts with its heading.
    blocks.extend(
        legend_sections(theme)
            .into_iter()
            .enumerate()
            .map(|(at, lines)| Section {
                lines,
                blank_before: at == 0,
            }),
    );
    blocks
}

/// `blocks` one under the other, wrapped to `width`.
fn stacked(blocks: &[Section], width: usize) -> Vec<Line<'static>> {
    let mut rows = Vec::new();
    for block in blocks {
        if !rows.is_empty() && block.blank_before {
            rows.push(Line::default());
        }
        for line in &block.lines {
            rows.extend(line.rows(width));
        }
    }
    rows
}

/// The blocks in two columns, split (in reading order) where the taller
/// column is shortest.
fn split_in_two(
    blocks: &[Section],
    left_width: usize,
    right_width: usize,
) -> (Vec<Line<'static>>, Vec<Line<'static>>) {
    let best = (1..blocks.len().max(1))
        .min_by_key(|&at| {
            let left = stacked(&blocks[..at], left_width).len();
            let right = stacked(&blocks[at..], right_width).len();
            (left.max(right), at)
        })
        .unwrap_or(blocks.len());
    (
        stacked(&blocks[..best], left_width),
        stacked(&blocks[best..], right_width),
    )
}

/// A dimmed legend line: its glyph (or glyphs) first, the words after
/// the first space continuing under the words.
fn legend_line(theme: &Theme, text: &str) -> HelpLine {
    let (glyph, words) = text.split_once(' ').unwrap_or((text, ""));
    HelpLine {
        lead: Span::styled(format!("  {glyph} "), theme.dim),
        text: words.to_string(),
        style: theme.dim,
    }
}

/// The legend's sections: what the glyphs on screen mean — states, the
/// verdicts that need attention (a test checks every marker of
/// `verdict_marker` is here), the header's counts, the holders pane's
/// marks and the PID column's.
fn legend_sections(theme: &Theme) -> Vec<Vec<HelpLine>> {
    let heading = |text: &'static str| HelpLine::heading(text, theme.section);
    let dim = |text: &str| legend_line(theme, text);
    vec![
        vec![
            heading("States"),
            dim("● live  ◆ own  ○ free  ◑ shared"),
            dim("◐ in-flight  ✖ error  □ dir"),
            dim("○ gone  holder exited; its PID is stale"),
            dim("N · other  lock files outside agents/"),
        ],
        vec![
            heading("Needs attention"),
            dim("⊗ deadlock (a circle that cannot clear)"),
            dim("↻ cycle (a circle of waits that may clear)"),
            dim("⇢ blocked (its holder waits on another key)"),
            dim("‖ stopped or traced (runs when resumed)"),
            dim("↯ orphan (kept by a child)"),
            dim("◔ spawn (materializing too long)"),
            dim("◌ idle"),
            dim("◈ contended (a contender waits to take it)"),
            dim("header: N ⚠ suspect, N ◈ waited on"),
        ],
        vec![
            heading("Not verified"),
            dim("? unverified holder: maybe a reused PID"),
            dim("1234?  the same, in the PID column"),
            dim("1234+2 1234 and 2 more share it"),
        ],
        vec![
            heading("Events"),
            dim("▲ acquired  ▽ released / freed"),
            dim("○ holder exited  ✖ killed by locktop"),
            dim("⚠ a verdict began  ✓ it ended"),
            dim("⚠ problems (header): scan problems"),
        ],
    ]
}

/// The legend's lines, unwrapped (for tests that read every word).
#[cfg(test)]
pub(crate) fn legend_lines(theme: &Theme) -> Vec<Line<'static>> {
    legend_sections(theme)
        .into_iter()
        .flatten()
        .map(|help| help.line())
        .collect()
}

/// The lines of one group, the bindings that write marked `disabled`.
fn group_lines(theme: &Theme, group: Group, disabled: Option<Disabled>) -> Vec<HelpLine> {
    let bindings = BINDINGS.iter().filter(|b| b.group == group);
    let mut heading = HelpLine {
        lead: Span::styled(group.title(), theme.section),
        text: String::new(),
        style: theme.dim,
    };
    if let Some(why) = disabled
        && bindings.clone().any(|b| b.writes)
    {
        let why = match why {
            Disabled::ReadOnly => "read-only",
            Disabled::Replay => "a replay",
        };
        heading.text = format!(" · ✗ disabled: {why}");
    }
    let mut lines = vec![heading];
    for binding in bindings {
        // In a replay, Space plays and pauses the recording.
        let description = match (disabled, binding.action) {
            (Some(Disabled::Replay), Action::TogglePause) => "play / pause the replay",
            _ => binding.description,
        };
        let key = format!("{:<9}", binding.shown);
        lines.push(if binding.writes && disabled.is_some() {
            HelpLine {
                lead: Span::styled(format!("✗ {key}"), theme.dim),
                text: description.to_string(),
                style: theme.dim,
            }
        } else {
            HelpLine {
                lead: Span::styled(format!("  {key}"), theme.key),
                text: description.to_string(),
                style: Style::default(),
            }
        });
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(lines: &[Line<'_>]) -> Vec<String> {
        lines.iter().map(ToString::to_string).collect()
    }

    /// A wrapped line's continuation rows start under its text.
    #[test]
    fn a_wrapped_line_hangs_under_its_text() {
        let theme = Theme::color();
        let line = legend_line(&theme, "⊗ deadlock (a circle that cannot clear)");
        assert_eq!(
            texts(&line.rows(20)),
            ["  ⊗ deadlock (a", "    circle that", "    cannot clear)"]
        );
        let binding = &group_lines(&theme, Group::View, None)[1];
        let rows = texts(&binding.rows(24));
        assert!(rows.len() > 1, "{rows:?}");
        for row in &rows[1..] {
            assert!(row.starts_with(&" ".repeat(11)), "{rows:?}");
        }
    }

    /// Two columns split where the taller one is shortest.
    #[test]
    fn the_columns_are_balanced() {
        let theme = Theme::color();
        let blocks = blocks(&theme, None);
        let (left, right) = split_in_two(&blocks, 44, 45);
        let all = stacked(&blocks, 44).len();
        assert!(
            left.len().max(right.len()) <= all / 2 + 8,
            "{} and {} of {all}",
            left.len(),
            right.len()
        );
    }
}
