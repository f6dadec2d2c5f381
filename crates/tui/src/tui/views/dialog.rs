//! The overlays above the panes: the form (see [`super::form`]), the
//! signal dialog for a real holder, the SIGKILL confirmation for a child
//! test holder, and the scrollable report of a family check.
//!
//! Invariants: every dialog names what it would act on (PID and command
//! line, or holder number and family) and the exact keys that act or
//! cancel; the report is wrapped to the box and only its visible slice is
//! drawn, with the scroll clamped so the last line stays reachable.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Clear, Paragraph};

use crate::time_format;

use super::super::overlay::{KillTestHolder, Overlay, ReportDialog, SignalDialog, SignalStage};
use super::super::theme::Theme;
use super::state::ViewState;
use super::{centered, field, form, text, wrap};

/// How the report dialog laid out its text this frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ReportArea {
    /// The furthest it can scroll (the last line stays reachable).
    pub max_scroll: usize,
    /// Lines per page.
    pub page: usize,
}

/// Draws the open overlay, if any, centred in `area`; returns the report
/// dialog's layout when that is what is open.
pub fn draw(view: &ViewState<'_>, frame: &mut Frame, area: Rect) -> Option<ReportArea> {
    let theme = view.config.theme;
    match view.operator.overlay.as_ref() {
        Some(Overlay::Form(state)) => form::draw(&theme, state, frame, area),
        Some(Overlay::Signal(dialog)) => draw_signal(&theme, dialog, frame, area),
        Some(Overlay::KillTestHolder(dialog)) => draw_kill_test_holder(&theme, dialog, frame, area),
        Some(Overlay::Report(report)) => return Some(draw_report(&theme, report, frame, area)),
        None => {}
    }
    None
}

/// A bordered box of `width` (at most) centred in `area`, just tall
/// enough for `lines` (already wrapped to `width - 2`), with a title and a
/// key line at the bottom.
fn boxed(
    theme: &Theme,
    frame: &mut Frame,
    area: Rect,
    width: u16,
    title: String,
    keys: String,
    lines: Vec<Line<'static>>,
) {
    let popup = centered(area, width, lines.len() as u16 + 2);
    let block = Block::bordered()
        .border_style(theme.dim)
        .title(Span::styled(title, theme.section))
        .title_bottom(Span::styled(keys, theme.key));
    frame.render_widget(Clear, popup);
    frame.render_widget(Paragraph::new(lines).block(block), popup);
}

/// The text width inside a box of `width` in `area`.
fn inner_width(area: Rect, width: u16) -> usize {
    usize::from(width.min(area.width).saturating_sub(2))
}

/// A `label  value` field whose value wraps under itself.
fn long_field(theme: &Theme, label: &'static str, value: &str, width: usize) -> Vec<Line<'static>> {
    wrap(value, width.saturating_sub(9), 0)
        .into_iter()
        .enumerate()
        .map(|(index, part)| field(theme, if index == 0 { label } else { "" }, vec![text(part)]))
        .collect()
}

/// A sentence wrapped to `width`, in `style`.
fn sentence(text: &str, width: usize, style: Style) -> Vec<Line<'static>> {
    wrap(text, width, 0)
        .into_iter()
        .map(|part| Line::from(Span::styled(part, style)))
        .collect()
}

fn draw_signal(theme: &Theme, dialog: &SignalDialog, frame: &mut Frame, area: Rect) {
    let process = &dialog.process;
    let pid = process.pid;
    let width = inner_width(area, 72);
    let mut lines = Vec::new();
    if let Some(from) = &dialog.from {
        lines.extend(long_field(theme, "selected", from, width));
    }
    lines.push(field(
        theme,
        "pid",
        vec![Span::styled(pid.to_string(), theme.key)],
    ));
    lines.extend(long_field(theme, "command", process.command(), width));
    if let Some(state) = process.state {
        lines.push(field(
            theme,
            "state",
            vec![text(state.as_str().to_string())],
        ));
    }
    if let Some(started) = process.started {
        lines.push(field(
            theme,
            "started",
            vec![text(time_format::rfc3339(started))],
        ));
    }
    if !dialog.holds.is_empty() {
        lines.extend(long_field(theme, "holds", &dialog.holds.join(", "), width));
    }
    lines.push(Line::default());
    let stopped = dialog.stopped();
    let gone = if dialog.exited {
        "; it has exited"
    } else if stopped && dialog.continued {
        "; SIGCONT sent, but it still read stopped at the last look (once a second)"
    } else if stopped {
        "; it is stopped, so SIGTERM stays pending until it runs again"
    } else {
        "; it is still running"
    };
    let (question, keys) = match (&dialog.target, dialog.stage) {
        (Err(error), SignalStage::Confirm) => {
            (format!("✖ cannot be signalled: {error}"), " Esc close ")
        }
        (_, SignalStage::Confirm) if stopped => (
            format!(
                "Send SIGTERM to {pid}? It is stopped (T): SIGTERM stays pending until it continues. c sends SIGCONT."
            ),
            " y send SIGTERM · c send SIGCONT · n or Esc cancel ",
        ),
        (_, SignalStage::Confirm) => (
            format!("Send SIGTERM to {pid}? It may exit and release its locks."),
            " y send SIGTERM · n or Esc cancel ",
        ),
        (_, SignalStage::TermSent) if dialog.exited => {
            (format!("sent SIGTERM to {pid}{gone}."), " Esc close ")
        }
        (_, SignalStage::TermSent) if stopped => (
            format!(
                "sent SIGTERM to {pid}{gone}. c sends SIGCONT; K sends SIGKILL (works on a stopped process)."
            ),
            " c send SIGCONT · K send SIGKILL · Esc close ",
        ),
        (_, SignalStage::TermSent) => (
            format!("sent SIGTERM to {pid}{gone}. K sends SIGKILL (cannot be caught)."),
            " K send SIGKILL · Esc close ",
        ),
        (_, SignalStage::KillSent) => (format!("sent SIGKILL to {pid}{gone}."), " Esc close "),
    };
    lines.extend(sentence(&question, width, theme.section));
    if let Some(error) = &dialog.error {
        lines.extend(sentence(
            &format!("✖ not sent: {error}"),
            width,
            theme.error,
        ));
    }
    boxed(
        theme,
        frame,
        area,
        72,
        format!(" Signal holder {pid} "),
        keys.to_string(),
        lines,
    );
}

fn draw_kill_test_holder(theme: &Theme, dialog: &KillTestHolder, frame: &mut Frame, area: Rect) {
    let pid = dialog
        .pid
        .map_or_else(|| "not known yet".into(), |p| p.to_string());
    let width = inner_width(area, 64);
    let mut lines = vec![field(theme, "pid", vec![Span::styled(pid, theme.key)])];
    lines.extend(long_field(theme, "family", &dialog.family, width));
    lines.push(Line::default());
    lines.extend(sentence(
        "SIGKILL this child holder? It cannot release cleanly; the kernel frees its locks.",
        width,
        theme.section,
    ));
    boxed(
        theme,
        frame,
        area,
        64,
        format!(" Kill test holder #{} ", dialog.id),
        " y send SIGKILL · n or Esc cancel ".into(),
        lines,
    );
}

fn draw_report(theme: &Theme, report: &ReportDialog, frame: &mut Frame, area: Rect) -> ReportArea {
    let popup = centered(area, 76, area.height.saturating_sub(2).max(8));
    let inner_width = usize::from(popup.width.saturating_sub(2));
    let height = usize::from(popup.height.saturating_sub(2));
    let probe = report.how.clone();
    let mut lines: Vec<Line<'static>> = wrap(&probe, inner_width, 7)
        .into_iter()
        .map(|line| Line::from(Span::styled(line, theme.dim)))
        .collect();
    match &report.lines {
        None => lines.push(Line::from(Span::styled("checking…", theme.in_flight))),
        Some(report_lines) => {
            for (index, line) in report_lines.iter().enumerate() {
                let style = if index > 0 {
                    Style::new()
                } else if line.starts_with("free") {
                    theme.live
                } else {
                    theme.error
                };
                for part in wrap(line, inner_width, 8) {
                    lines.push(Line::from(Span::styled(part, style)));
                }
            }
        }
    }
    let max_scroll = lines.len().saturating_sub(height);
    let scroll = report.scroll.min(max_scroll);
    let shown = lines.len().min(height);
    let more = if max_scroll > 0 {
        format!(
            " {}–{} of {} · ↑↓ PgUp PgDn scroll · Esc close ",
            scroll + 1,
            scroll + shown,
            lines.len()
        )
    } else {
        " Esc close ".into()
    };
    let visible: Vec<Line<'static>> = lines.into_iter().skip(scroll).take(height).collect();
    let popup = centered(area, popup.width, shown as u16 + 2);
    let block = Block::bordered()
        .border_style(theme.dim)
        .title(Span::styled(
            format!(" Check: {} ", report.family),
            theme.section,
        ))
        .title_bottom(Span::styled(more, theme.key));
    frame.render_widget(Clear, popup);
    frame.render_widget(Paragraph::new(visible).block(block), popup);
    ReportArea {
        max_scroll,
        page: height.max(1),
    }
}
