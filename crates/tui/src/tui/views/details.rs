//! The details pane: everything about the selection of the current pane —
//! a key (AIH or tag, state, holders with command line and held-since,
//! blocked waiters, the other keys its holders hold, dir/key, gate and
//! announce paths), a directory, a section, a scan problem, a holder
//! process, a logged event, or a test holder. Most telling lines first,
//! so a short pane still answers "who holds this, since when".
//!
//! Invariants: nothing is cut — long lines wrap, and what does not fit
//! scrolls (its keys are in the title when there is more); control
//! characters are shown, never sent to the terminal.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph, Wrap};

use crate::disk::LockKey;
use crate::locks::instances_root;
use crate::model::{EventKind, Lock, Node, NodeId};
use crate::operate::verdict::{Hop, Verdict};
use crate::time_format;

use super::super::action::{Action, Pane};
use super::super::fit::visible;
use super::super::keymap::key_of;
use super::super::selected::Selected;
use super::super::theme::Theme;
use super::state::ViewState;
use super::{clock_text, field, plural, state_span, text};

/// Draws the details of the current selection into `area`, scrolled by
/// the app's details scroll (clamped); returns the largest scroll that
/// still shows something new (0: everything fits).
pub fn draw(view: &ViewState<'_>, frame: &mut Frame, area: Rect) -> u16 {
    let theme = view.config.theme;
    let lines: Vec<Line<'static>> = selection_lines(view)
        .into_iter()
        .map(|line| {
            let spans = line.spans.into_iter().map(|span| {
                let content = visible(&span.content).into_owned();
                Span::styled(content, span.style)
            });
            Line::from(spans.collect::<Vec<_>>())
        })
        .collect();
    let paragraph = Paragraph::new(lines).wrap(Wrap { trim: false });
    let total = paragraph.line_count(area.width.saturating_sub(1));
    let room = usize::from(area.height.saturating_sub(1));
    let max_scroll = u16::try_from(total.saturating_sub(room)).unwrap_or(u16::MAX);
    let scroll = view.details_scroll.min(max_scroll);
    let mut title = vec![Span::styled(" Details ", theme.section)];
    if max_scroll > 0 {
        title.push(Span::styled(
            format!(
                "{}/{} {} {} scroll ",
                scroll,
                max_scroll,
                key_of(Action::DetailsUp),
                key_of(Action::DetailsDown)
            ),
            theme.dim,
        ));
    }
    let block = Block::new()
        .borders(Borders::TOP | Borders::LEFT)
        .border_style(theme.dim)
        .title(Line::from(title));
    frame.render_widget(paragraph.block(block).scroll((scroll, 0)), area);
    max_scroll
}

/// The lines about the selection of the current pane.
fn selection_lines(view: &ViewState<'_>) -> Vec<Line<'static>> {
    match view.selected() {
        Selected::Node(id) | Selected::HeldKey { node: id, .. } => node_lines(view, id),
        Selected::Process { pid } => process_lines(view, pid),
        Selected::Event(index) => event_lines(view, index),
        Selected::TestHolder(_) => super::test_holders::detail_lines(view),
        Selected::Nothing => empty_lines(view),
    }
}

/// What an empty pane's details say.
fn empty_lines(view: &ViewState<'_>) -> Vec<Line<'static>> {
    let notice = match view.pane {
        Pane::Holders => "no live holder",
        Pane::Events => "no transition seen yet (keys found by the first scan are not events)",
        Pane::TestHolders => return super::test_holders::detail_lines(view),
        Pane::Tree | Pane::Blocking => return Vec::new(),
    };
    vec![Line::from(Span::styled(notice, view.config.theme.dim))]
}

fn node_lines(view: &ViewState<'_>, id: NodeId) -> Vec<Line<'static>> {
    let theme = view.config.theme;
    let node: &Node = view.model.data().tree.node(id);
    if node.is_root() {
        let hint = format!(
            "{} or {}/{} collapse/expand · {} shows free keys (those freed in the last {} s are always shown) · {} filters",
            key_of(Action::Toggle),
            key_of(Action::Collapse),
            key_of(Action::Expand),
            key_of(Action::ToggleFree),
            crate::model::RECENTLY_FREED.as_secs(),
            key_of(Action::StartFilter),
        );
        return vec![
            Line::from(Span::styled(node.label.clone(), theme.section)),
            Line::from(Span::styled(hint, theme.dim)),
        ];
    }
    if let Some(problem) = &node.problem {
        return vec![
            field(
                &theme,
                "problem",
                vec![Span::styled(problem.clone(), theme.error)],
            ),
            field(&theme, "path", vec![text(node.path.clone())]),
        ];
    }
    let Some(lock) = &node.lock else {
        let dir = instances_root(&view.config.state_dir).join(&node.path);
        return vec![
            field(&theme, "directory", vec![text(node.path.clone())]),
            field(&theme, "dir", vec![text(dir.display().to_string())]),
            Line::from(Span::styled(
                "only a directory: no lock of its own",
                theme.dim,
            )),
        ];
    };
    let mut lines = lock_state_lines(view, lock);
    lines.extend(family_lines(view, id));
    lines.extend(history_lines(view, &lock.key));
    lines.extend(lock_path_lines(&theme, &lock.key));
    lines
}

/// The key's recent holders, newest first: PID, from → to, how it
/// ended, command line (shown, never sent to the terminal).
fn history_lines(view: &ViewState<'_>, key: &LockKey) -> Vec<Line<'static>> {
    let theme = view.config.theme;
    let holds: Vec<&crate::model::Hold> = view.model.data().history.of(key).rev().collect();
    if holds.is_empty() {
        return Vec::new();
    }
    let mut lines = vec![Line::from(Span::styled(
        format!("recent holders (last {})", crate::model::history::PER_KEY),
        theme.dim,
    ))];
    for hold in holds {
        let until = match (hold.to, hold.ended) {
            (Some(to), Some(ended)) => format!("{}  {}", clock_text(to), ended.text()),
            (Some(to), None) => clock_text(to),
            (None, _) => "holds it".to_string(),
        };
        let command = hold
            .command
            .as_deref()
            .map(|command| crate::tui::fit::visible(command).into_owned())
            .unwrap_or_default();
        lines.push(Line::from(vec![
            Span::styled(format!("  pid {:<7} ", hold.pid), theme.key),
            text(format!("{} → {until}  ", clock_text(hold.from))),
            Span::styled(command, theme.dim),
        ]));
    }
    lines
}

/// Name, state (held since / freed at), error, holders and waiters.
fn lock_state_lines(view: &ViewState<'_>, lock: &Lock) -> Vec<Line<'static>> {
    let theme = view.config.theme;
    let now = view.model.now();
    let key = &lock.key;
    let mut lines = vec![Line::from(vec![
        Span::styled(format!("{:<9}", key.kind().as_str()), theme.dim),
        Span::styled(key.name().to_string(), theme.section),
    ])];
    let mut state = vec![state_span(&theme, lock.liveness())];
    if let Some(since) = lock.state.since {
        state.push(text(format!(
            " · held since {} ({})",
            time_format::rfc3339(since),
            time_format::age(since, now)
        )));
    } else if let Some(freed) = lock.freed_at {
        state.push(text(format!(" · freed at {}", clock_text(freed))));
    }
    lines.push(field(&theme, "state", state));
    if let Some(error) = &lock.state.error {
        lines.push(field(
            &theme,
            "error",
            vec![Span::styled(error.clone(), theme.error)],
        ));
    }
    for holder in &lock.state.holders {
        let gone = holder.holder_mark();
        lines.push(field(
            &theme,
            "holder",
            vec![
                Span::styled(holder.pid.to_string(), theme.key),
                text(format!(" {}{gone}", holder.command())),
            ],
        ));
        if let Some(ppid) = holder.ppid {
            let parent = holder.parent.as_deref().unwrap_or("(unreadable)");
            let adopted = if holder.is_reparented() {
                " — re-parented: whoever spawned it is gone"
            } else {
                ""
            };
            lines.push(field(
                &theme,
                "parent",
                vec![text(format!("{ppid} {parent}{adopted}"))],
            ));
        }
        if let Some(unit) = &holder.unit {
            lines.push(field(&theme, "unit", vec![text(unit.clone())]));
        }
    }
    let verdict = view
        .model
        .data()
        .verdict(lock, now, view.config.materializing_after);
    if let Some(verdict) = verdict {
        let style = if verdict.is_suspect() {
            theme.error
        } else {
            theme.dim
        };
        lines.push(field(
            &theme,
            "verdict",
            vec![Span::styled(verdict.describe(now), style)],
        ));
        lines.extend(wait_lines(view, &verdict));
    }
    if let Some(note) = lock.state.holders_note {
        lines.push(field(
            &theme,
            "holder",
            vec![Span::styled(note.describe(), theme.dim)],
        ));
    }
    if !lock.state.waiters.is_empty() {
        let waiters: Vec<String> = lock.state.waiters.iter().map(u32::to_string).collect();
        lines.push(field(
            &theme,
            "waiters",
            vec![Span::styled(waiters.join(", "), theme.in_flight)],
        ));
    }
    if !lock.state.watchers.is_empty() {
        let watchers: Vec<String> = lock.state.watchers.iter().map(u32::to_string).collect();
        lines.push(field(
            &theme,
            "watchers",
            vec![text(format!(
                "{} (waiting for it to be released)",
                watchers.join(", ")
            ))],
        ));
    }
    if let Some(refused) = &lock.state.refused {
        // Tries that never block (an agent looping on try_acquire): the
        // direct evidence of a relocation that keeps failing.
        lines.push(field(
            &theme,
            "refused",
            vec![Span::styled(refused.describe(), theme.in_flight)],
        ));
    }
    lines
}

/// A chain or a circle of waits, hop by hop: who waits, how, on which
/// key, held by whom (PID, state, command line).
fn wait_lines(view: &ViewState<'_>, verdict: &Verdict) -> Vec<Line<'static>> {
    let theme = view.config.theme;
    let (label, hops): (&str, Vec<&Hop>) = match verdict {
        Verdict::Deadlock { cycle, .. } | Verdict::WaitCycle { cycle, .. } => {
            ("cycle", cycle.iter().collect())
        }
        Verdict::Blocked { chain, cycle, .. } => ("chain", chain.iter().chain(cycle).collect()),
        _ => return Vec::new(),
    };
    let held = view.model.data().held();
    hops.into_iter()
        .map(|hop| {
            let holder = held.holder(hop.holder);
            let state = holder
                .and_then(|p| p.state)
                .map_or(String::new(), |state| format!(" ({})", state.as_str()));
            let command = holder.map_or("", |p| p.command()).to_string();
            field(
                &theme,
                label,
                vec![
                    Span::styled(format!("pid {}", hop.pid), theme.key),
                    text(format!(" {} {} ← held by ", hop.how.verb(), hop.label())),
                    Span::styled(format!("pid {}", hop.holder), theme.key),
                    text(state),
                    Span::styled(format!(" {command}"), theme.dim),
                ],
            )
        })
        .collect()
}

/// What else each holder of node `id` holds.
fn family_lines(view: &ViewState<'_>, id: NodeId) -> Vec<Line<'static>> {
    let theme = view.config.theme;
    let model = &view.model;
    let mut lines = Vec::new();
    for (pid, others) in model.held_by_same_pids(id) {
        if others.is_empty() {
            continue;
        }
        let names: Vec<String> = others
            .iter()
            .map(|&other| {
                let node = model.data().tree.node(other);
                let kind = node.lock.as_ref().map_or("", |l| l.key.kind().as_str());
                format!("{kind} {}", node.path)
            })
            .collect();
        lines.push(field(
            &theme,
            "family",
            vec![text(format!("{pid} also holds {}", names.join(", ")))],
        ));
    }
    lines
}

/// Where the claim lives: dir and key, gate and announce paths.
fn lock_path_lines(theme: &Theme, key: &LockKey) -> Vec<Line<'static>> {
    vec![
        field(
            theme,
            "dir",
            vec![
                text(key.dir().display().to_string()),
                Span::styled("  key ", theme.dim),
                text(key.key().to_string()),
            ],
        ),
        field(
            theme,
            "gate",
            vec![text(key.gate_path().display().to_string())],
        ),
        field(
            theme,
            "announce",
            vec![text(key.announce_path().display().to_string())],
        ),
    ]
}

fn process_lines(view: &ViewState<'_>, pid: u32) -> Vec<Line<'static>> {
    let (groups, _) = view.model.holders();
    let Some(group) = groups.iter().find(|group| group.pid == pid) else {
        return Vec::new();
    };
    let theme = view.config.theme;
    let now = view.model.now();
    let mut lines = vec![
        field(
            &theme,
            "pid",
            vec![Span::styled(group.pid.to_string(), theme.key)],
        ),
        field(
            &theme,
            "command",
            vec![text(group.process.command().to_string())],
        ),
    ];
    if let Some(started) = group.process.started {
        let started = format!(
            "{} ({} ago)",
            time_format::rfc3339(started),
            time_format::age(started, now)
        );
        lines.push(field(&theme, "started", vec![text(started)]));
    }
    let oldest = group
        .oldest
        .map_or("?".into(), |t| time_format::age(t, now));
    lines.push(field(
        &theme,
        "holds",
        vec![text(format!(
            "{}, oldest for {oldest}",
            plural(group.keys.len(), "key")
        ))],
    ));
    lines
}

fn event_lines(view: &ViewState<'_>, index: usize) -> Vec<Line<'static>> {
    let theme = view.config.theme;
    let Some(event) = view.model.events().get(index) else {
        return Vec::new();
    };
    let mut lines = vec![
        field(
            &theme,
            "event",
            vec![Span::styled(event.kind.text(), theme.section)],
        ),
        field(&theme, "at", vec![text(time_format::rfc3339(event.at))]),
        field(
            &theme,
            event.key.kind().as_str(),
            vec![text(event.key.name().to_string())],
        ),
    ];
    let meaning = match event.kind {
        EventKind::Acquired => "a process took the lock",
        EventKind::Released => "its holder let go and still ran when locktop looked",
        EventKind::HolderExited => "free, and its holder's PID was gone (why, locktop cannot tell)",
        EventKind::KilledByLocktop => "free, and its holder, which locktop signalled (K), is gone",
        EventKind::Freed => "free; no holder PID was ever visible for it",
        EventKind::Flagged(_) => "still held, and now needs attention: the key's details say why",
        EventKind::Cleared(_) => "still held; what needed attention is over",
    };
    lines.push(field(
        &theme,
        "meaning",
        vec![Span::styled(meaning, theme.dim)],
    ));
    if let Some(pid) = event.pid {
        let command = event.command.clone().unwrap_or_default();
        lines.push(field(
            &theme,
            "pid",
            vec![
                Span::styled(pid.to_string(), theme.key),
                text(format!(" {command}")),
            ],
        ));
    }
    lines.push(Line::from(Span::styled(
        "Enter shows the key in the tree",
        theme.dim,
    )));
    lines
}
