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
use ratatui::widgets::{Cell, Row as TableRow, Table};

use crate::model::describe_family;
use crate::operate::test_holders::{HolderStatus, Placement};
use crate::time_format;

use super::super::hints;
use super::super::theme::Theme;
use super::list::{self, ListArea, ListFrame};
use super::state::ViewState;
use super::{age_text, field, text};

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

/// Draws the test-holders pane into `area`; returns where its rows went.
pub fn draw(view: &ViewState<'_>, frame: &mut Frame, area: Rect) -> ListArea {
    let theme = view.config.theme;
    let now = view.model.now();
    let test_holders = &view.operator.test_holders;
    if test_holders.list().is_empty() {
        let notice = hints::no_test_holder_yet(view.config.read_only);
        return list::empty(frame, area, &theme, &notice);
    }
    let layout = ListFrame::new(area, test_holders.cursor(), test_holders.list().len());
    let rows: Vec<TableRow> = test_holders.list()[layout.window.clone()]
        .iter()
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
    let titles = ["#", "STATE", "WHERE", "PID", "AGE", "FAMILY"];
    layout.render(frame, area, Table::new(rows, widths), &titles, &theme)
}

/// The details of the selected test holder.
pub(crate) fn detail_lines(view: &ViewState<'_>) -> Vec<Line<'static>> {
    let theme = view.config.theme;
    let now = view.model.now();
    let Some(holder) = view.operator.test_holders.selected_holder() else {
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
    let hint = hints::test_holder_keys(
        holder.status.is_over(),
        holder.spec.placement == Placement::Child,
    );
    lines.push(Line::from(Span::styled(hint, theme.dim)));
    lines
}
