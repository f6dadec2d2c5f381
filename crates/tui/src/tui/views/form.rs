//! The hold / check form: one line per field (the focused one marked with
//! `>` and a cursor), each choice shown as `(•) chosen  ( ) other`, the
//! validation result under the fields and the keys at the bottom.
//!
//! Invariants: the message shown is exactly what [`HolderForm::family`]
//! says, recomputed on every frame, so the form never claims an input is
//! valid that submitting would refuse; readable without colour (markers,
//! not colours, say what is focused and chosen).

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Clear, Paragraph};

use crate::model::{FamilyKind, FormField, FormPurpose, HolderForm, describe_family};
use crate::operate::test_holders::{HoldMode, Placement};

use super::super::theme::Theme;
use super::{centered, wrap};

/// Draws `form` in a box centred in `area`.
pub fn draw(theme: &Theme, form: &HolderForm, frame: &mut Frame, area: Rect) {
    let width = usize::from(WIDTH.min(area.width).saturating_sub(2));
    let mut lines = Vec::new();
    for field in form.fields() {
        lines.push(field_line(theme, form, field, width));
        if field == FormField::Tags {
            let hint = match form.kind {
                FamilyKind::Group => "the group's tag names, comma-separated",
                FamilyKind::Hierarchy => "tags bound to the AIH, comma-separated (optional)",
            };
            lines.push(Line::from(Span::styled(
                format!("{:LABEL$}{hint}", ""),
                theme.dim,
            )));
        }
    }
    if let FormPurpose::Check { probe } = form.purpose {
        let probe = crate::operate::check::probe_words(probe);
        lines.push(Line::from(vec![
            Span::styled(format!("{:LABEL$}", "  probe"), theme.dim),
            Span::raw(probe),
        ]));
    }
    lines.push(Line::default());
    let (verdict, style) = match (form.family(), form.purpose) {
        (Err(reason), _) => (format!("✖ {reason}"), theme.error),
        (Ok(family), FormPurpose::Hold) => {
            let (placement, mode) = (form.placement.word(), form.mode.word());
            let family = describe_family(&family);
            (
                format!("✓ Enter holds {family} ({placement}, {mode})"),
                theme.live,
            )
        }
        (Ok(family), FormPurpose::Check { .. }) => (
            format!("✓ Enter checks {}", describe_family(&family)),
            theme.live,
        ),
    };
    for part in wrap(&verdict, width, 2) {
        lines.push(Line::from(Span::styled(part, style)));
    }
    let (title, submit) = match form.purpose {
        FormPurpose::Hold => (" Hold a family (test holder) ", "hold"),
        FormPurpose::Check { .. } => (" Check a family: why is it stuck? ", "check"),
    };
    let keys = format!(" Tab ↑↓ field · ←→ Space choose · Enter {submit} · Esc cancel ");
    let block = Block::bordered()
        .border_style(theme.dim)
        .title(Span::styled(title, theme.section))
        .title_bottom(Span::styled(keys, theme.dim));
    let popup = centered(area, WIDTH, lines.len() as u16 + 2);
    frame.render_widget(Clear, popup);
    frame.render_widget(Paragraph::new(lines).block(block), popup);
}

/// The form's width (shrunk to fit the terminal).
const WIDTH: u16 = 72;

/// Columns taken by the marker and the label.
const LABEL: usize = 13;

fn field_line(theme: &Theme, form: &HolderForm, field: FormField, width: usize) -> Line<'static> {
    let focused = form.focus == field;
    let label = match field {
        FormField::Kind => "family",
        FormField::Aih => "AIH",
        FormField::Tags => "tags",
        FormField::Placement => "placement",
        FormField::Mode => "mode",
    };
    let marker = if focused { "> " } else { "  " };
    let label_style = if focused { theme.key } else { theme.dim };
    let mut spans = vec![Span::styled(
        format!("{marker}{label:<pad$}", pad = LABEL - 2),
        label_style,
    )];
    let choice = |chosen: bool, word: &'static str| -> Vec<Span<'static>> {
        let mark = if chosen { "(•) " } else { "( ) " };
        let style = if chosen { theme.section } else { theme.dim };
        vec![Span::styled(format!("{mark}{word}   "), style)]
    };
    match field {
        FormField::Kind => {
            spans.extend(choice(form.kind == FamilyKind::Group, "group"));
            spans.extend(choice(form.kind == FamilyKind::Hierarchy, "hierarchy"));
        }
        FormField::Placement => {
            spans.extend(choice(
                form.placement == Placement::InProcess,
                Placement::InProcess.word(),
            ));
            spans.extend(choice(
                form.placement == Placement::Child,
                Placement::Child.word(),
            ));
        }
        FormField::Mode => {
            spans.extend(choice(form.mode == HoldMode::Try, "try now"));
            spans.extend(choice(form.mode == HoldMode::Wait, "wait until free"));
        }
        FormField::Aih | FormField::Tags => {
            let value = if field == FormField::Aih {
                &form.aih
            } else {
                &form.tags
            };
            // Long input: show its end, where the cursor is.
            let value: Vec<char> = value.replace('\0', "␀").chars().collect();
            let room = width.saturating_sub(LABEL + 1).max(1);
            let shown: String = if value.len() > room {
                let tail = &value[value.len() + 1 - room..];
                std::iter::once('…').chain(tail.iter().copied()).collect()
            } else {
                value.into_iter().collect()
            };
            spans.push(Span::raw(shown));
            if focused {
                spans.push(Span::styled("▏", theme.key));
            }
        }
    }
    Line::from(spans)
}
