//! The test-holders pane (4): every holder started from this monitor —
//! number, state (glyph + word), placement, PID, age, family and, when it
//! waits or failed, why — and its details for the details pane.
//!
//! Invariants: a state is told by glyph AND word (readable without
//! colour); only the rows in the viewport become text; ages use the
//! model's clock.

use ratatui::Frame;
use ratatui::layout::{Constraint, Rect};
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Cell, Paragraph, Row as TableRow, Table};

use crate::model::describe_family;
use crate::operate::test_holders::{HolderStatus, Placement};
use crate::time_format;

use super::super::app::App;
use super::super::theme::Theme;
use super::{age_text, field, render_table, scroll_into_view, text};

/// Glyph + word of a test holder's status, and its style.
pub(crate) fn status_span(theme: &Theme, status: &HolderStatus) -> Span<'static> {
    let (glyph, style): (&str, Style) = match status {
        HolderStatus::Starting => ("…", theme.in_flight),
        HolderStatus::Waiting(_) => ("◐", theme.in_flight),
        HolderStatus::Holding => ("◆", theme.own),
        HolderStatus::Failed(_) => ("✖", theme.error),
        HolderStatus::Exited(_) => ("○", theme.free),
    };
    Span::styled(format!("{glyph} {}", status.word()), style)
}

/// Why a holder is where it is, in one line (empty when holding).
fn status_detail(status: &HolderStatus) -> String {
    match status {
        HolderStatus::Waiting(members) => {
            let members: Vec<String> = members.iter().map(|m| m.describe()).collect();
            format!("waiting on {}", members.join("; "))
        }
        HolderStatus::Failed(reason) => reason.clone(),
        HolderStatus::Exited(detail) => detail.clone(),
        HolderStatus::Starting | HolderStatus::Holding => String::new(),
    }
}

/// Draws the test-holders pane into `area`.
pub fn draw(app: &mut App, frame: &mut Frame, area: Rect) {
    let theme = app.config.theme;
    let now = app.model.now();
    let selected = app.test_holders.selected();
    let header = area.height >= 8;
    let height = usize::from(area.height.saturating_sub(u16::from(header)));
    app.page = height.max(1);
    let list = app.test_holders.list();
    if list.is_empty() {
        let hint = if app.config.read_only {
            "no test holder (read-only: n is disabled)"
        } else {
            "no test holder yet: n holds a family, in this process or in a child"
        };
        frame.render_widget(Paragraph::new(Span::styled(hint, theme.dim)), area);
        return;
    }
    scroll_into_view(&mut app.offsets[3], selected, height, list.len());
    let offset = app.offsets[3];
    app.hits.list = Rect {
        y: area.y + u16::from(header),
        height: area.height.saturating_sub(u16::from(header)),
        ..area
    };
    app.hits.offset = offset;
    let rows: Vec<TableRow> = app
        .test_holders
        .list()
        .iter()
        .skip(offset)
        .take(height)
        .map(|holder| {
            let pid = holder.pid.map_or_else(String::new, |pid| pid.to_string());
            let mut family = vec![Span::raw(describe_family(&holder.spec.family))];
            let detail = status_detail(&holder.status);
            if !detail.is_empty() {
                family.push(Span::styled(format!(" — {detail}"), theme.dim));
            }
            TableRow::new(vec![
                Cell::from(format!("#{}", holder.id)),
                Cell::from(status_span(&theme, &holder.status)),
                Cell::from(holder.spec.placement.word()),
                Cell::from(pid),
                Cell::from(age_text(Some(holder.started), now)),
                Cell::from(Line::from(family)),
            ])
        })
        .collect();
    let widths = [
        Constraint::Length(3),
        Constraint::Length(10),
        Constraint::Length(10),
        Constraint::Length(7),
        Constraint::Length(6),
        Constraint::Fill(1),
    ];
    let mut table = Table::new(rows, widths);
    if header {
        let titles = ["#", "STATE", "WHERE", "PID", "AGE", "FAMILY"];
        table = table.header(TableRow::new(titles).style(theme.dim));
    }
    render_table(frame, area, table, &theme, selected.checked_sub(offset));
}

/// The details of the selected test holder.
pub fn detail_lines(app: &App) -> Vec<Line<'static>> {
    let theme = app.config.theme;
    let now = app.model.now();
    let Some(holder) = app.test_holders.selected_holder() else {
        return vec![Line::from(Span::styled(
            "test holders hold a family on purpose: to see a key turn own, to make a check busy, or to queue behind an agent",
            theme.dim,
        ))];
    };
    let (placement, mode) = (holder.spec.placement.word(), holder.spec.mode.word());
    let mut lines = vec![
        field(
            &theme,
            "holder",
            vec![
                Span::styled(format!("#{}", holder.id), theme.key),
                text(format!(" · {placement} · {mode}")),
            ],
        ),
        field(
            &theme,
            "family",
            vec![text(describe_family(&holder.spec.family))],
        ),
    ];
    if let Some(pid) = holder.pid {
        let whose = if pid == std::process::id() {
            " (this locktop)"
        } else {
            ""
        };
        lines.push(field(
            &theme,
            "pid",
            vec![Span::styled(pid.to_string(), theme.key), text(whose)],
        ));
    }
    let mut state = vec![status_span(&theme, &holder.status)];
    if let HolderStatus::Failed(reason) | HolderStatus::Exited(reason) = &holder.status {
        state.push(text(format!(": {reason}")));
    }
    if let Some(since) = holder.holding_since {
        let until = if holder.status.is_over() {
            holder.changed
        } else {
            now
        };
        state.push(text(format!(
            " · held for {}",
            time_format::age(since, until)
        )));
    }
    lines.push(field(&theme, "state", state));
    if let HolderStatus::Waiting(members) = &holder.status {
        for member in members {
            lines.push(field(
                &theme,
                "waits on",
                vec![Span::styled(member.describe(), theme.in_flight)],
            ));
        }
    }
    lines.push(field(
        &theme,
        "started",
        vec![text(format!(
            "{} ({} ago)",
            time_format::rfc3339(holder.started),
            time_format::age(holder.started, now)
        ))],
    ));
    let hint = super::super::hints::test_holder_keys(
        holder.status.is_over(),
        holder.spec.placement == Placement::Child,
    );
    lines.push(Line::from(Span::styled(hint, theme.dim)));
    lines
}
