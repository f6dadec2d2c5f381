//! The header (what is watched, how, the counts, the watcher's health,
//! PAUSED / READ-ONLY markers) and the tab bar. Invariants: a degraded
//! watcher or a paused view is always on the first line, left, so it
//! survives the narrowest terminal; a header line never ends cut without
//! a `…`. The first line keeps the state dir whole where it can: why a
//! source or probe fell back (last on the line) gives way first, then
//! the clock (an `…` where it was), then the state dir is shortened in
//! the middle, as names in rows are.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use crate::engine::source_choice::SourceKind;
use crate::engine::{Liveness, WatcherHealth};
use crate::model::{Attention, BlockingRow, RECENTLY_FREED, Role, Urgency};
use crate::operate::verdict::Verdict;
use crate::operate::wait_for::{chain_words, circle_words};

use super::super::action::{Action, Pane};
use super::super::fit::visible;
use super::super::keymap::key_of;
use super::state::ViewState;
use super::{state_span, verdict_marker};

/// The fewest columns a fallback's reason is shown in (its start and an
/// `…`); with less room left, the probe mode alone says it.
const REASON_MIN: usize = 16;

/// Two lines: markers, title, state dir, probe, health; then counts;
/// and, when the area has a third line, the most urgent key. `rows`
/// are the held keys by urgency (this frame's blocking rows).
pub(crate) fn draw_header(
    view: &ViewState<'_>,
    frame: &mut Frame,
    area: Rect,
    rows: &[BlockingRow],
) {
    let theme = view.config.theme;
    let data = view.model.data();
    let mut first = Vec::new();
    if let Some(replay) = &view.replay {
        first.extend(replay_spans(view, replay));
    }
    if view.model.paused() {
        let changes = view.model.changes_while_paused();
        first.push(Span::styled(format!(" PAUSED +{changes} "), theme.marker));
        first.push(Span::raw(" "));
    }
    if view.config.read_only && view.replay.is_none() {
        first.push(Span::styled(" READ-ONLY ", theme.marker));
        first.push(Span::raw(" "));
    }
    let health_style = match data.watcher.health {
        WatcherHealth::Watching => theme.live,
        WatcherHealth::Starting => theme.dim,
        WatcherHealth::Reconnecting { .. } => theme.error,
        _ => theme.in_flight,
    };
    let first_scan = data.watcher.health == WatcherHealth::Watching && !data.watcher.synced();
    let health = if view.engine_stopped {
        Span::styled("engine stopped", theme.error)
    } else if first_scan {
        // Held keys come first; until the free ones are all in, the
        // counts are of the keys so far, and the screen says so.
        let c = &data.counts;
        let so_far = c.live + c.own + c.free + c.in_flight + c.shared + c.error + c.other;
        Span::styled(
            format!("watching · first scan: {so_far} keys so far"),
            theme.in_flight,
        )
    } else {
        // An attached view's health is the service's word: escaped.
        Span::styled(
            visible(&data.watcher.health.describe()).into_owned(),
            health_style,
        )
    };
    // Shortest and most important first: a long state dir (after the
    // health) is what a narrow terminal cuts off, never the probe mode
    // or the health.
    first.extend([Span::styled("locktop", theme.section)]);
    if let Some(attached) = &view.config.attached {
        // What it follows, and how old its last word is: never live
        // while the link is lost or silent.
        let style = if attached.is_live() {
            theme.dim
        } else {
            theme.error
        };
        first.push(Span::styled(format!(" · {}", attached.describe()), style));
    } else if view.config.source == SourceKind::Kernel {
        first.push(Span::styled(" · kernel lock events", theme.dim));
    } else {
        first.extend([
            Span::styled(" · probe ", theme.dim),
            Span::raw(view.config.probe.as_str()),
        ]);
    }
    first.extend([
        Span::styled(" · ", theme.dim),
        health,
        Span::styled(" · ", theme.dim),
    ]);
    let mut reasons = Vec::new();
    if let Some(note) = &view.config.attach_note {
        reasons.push(Span::styled(" · ", theme.dim));
        reasons.push(Span::styled(visible(note).into_owned(), theme.in_flight));
    }
    if view.config.source == SourceKind::Inference && view.config.attached.is_none() {
        let fallbacks = [
            ("lock-free unavailable", &view.config.probe_fallback),
            ("no kernel events", &view.config.source_fallback),
        ];
        for (what, why) in fallbacks {
            if let Some(why) = why {
                reasons.push(Span::styled(" · ", theme.dim));
                reasons.push(Span::styled(
                    format!("{what}: {}", visible(why)),
                    theme.in_flight,
                ));
            }
        }
    }
    let state_dir = visible(&view.config.state_dir.display().to_string()).into_owned();
    let mut first = first_line(first, clock_spans(view), state_dir, area.width);
    // Why the source or probe is not the one asked for (the probe mode
    // named says which runs) is long: it comes last, in the room the rest
    // leaves, cut before the clock or the state dir would be.
    let used: usize = first.iter().map(Span::width).sum();
    let room = usize::from(area.width).saturating_sub(used);
    if !reasons.is_empty() && room >= REASON_MIN {
        first.extend(cut_line(reasons, u16::try_from(room).unwrap_or(u16::MAX)).spans);
    }

    let counts = data.counts;
    let mut second = Vec::new();
    let attention = Attention::of(rows);
    // First: what needs someone to act, a deadlock above all.
    let deadlocks = data.held().waits().deadlocks(view.model.now()).count();
    if deadlocks > 0 {
        second.push(Span::styled(format!("{deadlocks} ⊗ deadlock"), theme.error));
        second.push(Span::raw("  "));
    }
    if attention.suspects > 0 {
        second.push(Span::styled(
            format!("{} ⚠ suspect", attention.suspects),
            theme.error,
        ));
        second.push(Span::raw("  "));
    }
    if attention.waited_on > 0 {
        second.push(Span::styled(
            format!("{} ◈ waited on", attention.waited_on),
            theme.in_flight,
        ));
        second.push(Span::raw("  "));
    }
    let mut count = |liveness: Liveness, n: usize, always: bool| {
        if always || n > 0 {
            second.push(Span::raw(format!("{n} ")));
            second.push(state_span(&theme, liveness));
            second.push(Span::raw("  "));
        }
    };
    count(Liveness::Live, counts.live, true);
    count(Liveness::Own, counts.own, true);
    count(Liveness::Free, counts.free, true);
    count(Liveness::InFlight, counts.in_flight, false);
    count(Liveness::Shared, counts.shared, false);
    count(Liveness::Error, counts.error, false);
    if let Some(attached) = &view.config.attached {
        // The service sends free keys as a count only.
        second.push(Span::styled(
            format!("({})", visible(&attached.free_line())),
            theme.dim,
        ));
        second.push(Span::raw("  "));
    }
    // Lock files outside agents/ (the help's legend says so): counted
    // only when there are some.
    if counts.other > 0 {
        second.push(Span::raw(format!("{} ", counts.other)));
        second.push(Span::styled("· other", theme.dim));
        second.push(Span::raw("  "));
    }
    if counts.problems > 0 {
        second.push(Span::raw(format!("{} ", counts.problems)));
        second.push(Span::styled("⚠ problems", theme.error));
        second.push(Span::raw("  "));
    }
    if attention.own_suspects > 0 {
        second.push(Span::styled(
            format!("{} suspect of own test holders", attention.own_suspects),
            theme.dim,
        ));
    }
    while second
        .last()
        .is_some_and(|span| span.content.trim().is_empty())
    {
        second.pop();
    }
    let mut lines = vec![Line::from(first), cut_line(second, area.width)];
    if area.height > 2
        && let Some(row) = rows.iter().find(|row| row.needs_attention())
    {
        lines.push(cut_line(attention_line(view, row).spans, area.width));
    }
    frame.render_widget(Paragraph::new(lines), area);
}

/// The header's third line: the most urgent key, named — `deadlock`
/// with whom to signal, then every process and key of the circle; `wait
/// cycle` with the circle and why it may clear; `stuck` when someone waits on it (each kind of waiter said),
/// with the root blocker when its holder itself waits; `suspect`
/// otherwise — with its verdict's marker, how long it is held and by
/// whom, and how many processes that holder blocks down its chains.
fn attention_line(view: &ViewState<'_>, row: &BlockingRow) -> Line<'static> {
    let theme = view.config.theme;
    let (data, now) = (view.model.data(), view.model.now());
    let Some(lock) = data.lock(row.node) else {
        return Line::default();
    };
    let word = match row.urgency {
        Urgency::Deadlock => "deadlock",
        Urgency::WaitCycle => "wait cycle",
        Urgency::StuckOnSuspect | Urgency::Contended => "stuck",
        Urgency::Suspect => "suspect",
        Urgency::Watched | Urgency::Held => "waited on",
    };
    let mut spans = vec![Span::styled(format!("{word}: "), theme.error)];
    match &row.verdict {
        Some(Verdict::Deadlock { cycle, pid, .. }) => {
            // Whom to signal first: a narrow line still says it.
            spans.push(Span::raw(format!(
                "signal pid {pid} to break it ({} on its key) — ",
                key_of(Action::Kill)
            )));
            spans.push(Span::raw(visible(&circle_words(cycle)).into_owned()));
            return Line::from(spans);
        }
        Some(Verdict::WaitCycle { cycle, why, .. }) => {
            spans.push(Span::raw(visible(&circle_words(cycle)).into_owned()));
            spans.push(Span::raw(format!(" — may clear: {}", why.describe())));
            return Line::from(spans);
        }
        _ => {}
    }
    spans.push(Span::styled(
        format!("{} {}", lock.key.kind().as_str(), visible(lock.key.name())),
        theme.section,
    ));
    spans.push(Span::raw(" — "));
    if let Some(marker) = row.verdict.as_ref().and_then(|v| verdict_marker(&theme, v)) {
        spans.push(marker);
        spans.push(Span::raw(": "));
    }
    let mut what = Vec::new();
    if row.waiting.total() > 0 {
        what.push(row.waiting.describe());
    }
    if let Some(refused) = &lock.state.refused {
        if row.waiting.trying > 0 {
            what.push(refused.describe());
        } else {
            // Tries by processes that stopped trying: history.
            what.push(format!("{} (none trying now)", refused.describe()));
        }
    }
    let mut held = String::from("held");
    if let Some(since) = lock.state.since {
        held.push_str(&format!(" {}", crate::time_format::age(since, now)));
    }
    // The process the verdict is about (an orphaned lock's keeper, not
    // its gone taker), else the first holder; a chain's root blocker is
    // said apart.
    let pid = match &row.verdict {
        Some(Verdict::Blocked { .. }) => None,
        verdict => verdict.as_ref().and_then(Verdict::pid),
    };
    let holder = match pid {
        Some(pid) => lock.state.holders.iter().find(|p| p.pid == pid),
        None => lock.state.holders.iter().find(|p| p.alive),
    };
    if let Some(holder) = holder {
        let role = match data.role_of(holder.pid) {
            Role::Agent { aih } => format!(" (agent {})", visible(&aih)),
            Role::Materializing => " (spawn)".into(),
            Role::Other => String::new(),
        };
        held.push_str(&format!(" by pid {}{role}", holder.pid_text()));
    }
    what.push(held);
    if let Some(Verdict::Blocked {
        pid, chain, root, ..
    }) = &row.verdict
    {
        let end = match root {
            Some(root) => format!(
                "root blocker pid {root} ({} waiting on it)",
                data.held().waits().blocked_by(*root)
            ),
            None => "the chain ends in a cycle of waits".to_string(),
        };
        what.push(format!(
            "pid {pid} itself waits: {} — {end}",
            visible(&chain_words(chain))
        ));
    } else if row.blocks > row.waiting.total() {
        what.push(format!(
            "{} processes wait on its holder, down chains",
            row.blocks
        ));
    }
    spans.push(Span::raw(what.join(", ")));
    Line::from(spans)
}

/// The tab bar, with the filter and the free-key toggle on the right;
/// returns the x range of each tab, in [`Pane::ALL`] order.
pub(crate) fn draw_tabs(
    view: &ViewState<'_>,
    frame: &mut Frame,
    area: Rect,
) -> [(u16, u16); Pane::ALL.len()] {
    let mut tab_spans = [(0, 0); Pane::ALL.len()];
    let theme = view.config.theme;
    let mut spans = Vec::new();
    let mut x = area.x;
    for (index, pane) in Pane::ALL.into_iter().enumerate() {
        let label = format!(" {} {} ", index + 1, pane.title());
        let width = label.chars().count() as u16;
        let style = if pane == view.pane {
            theme.tab_active
        } else {
            theme.dim
        };
        tab_spans[index] = (x, x.saturating_add(width));
        x = x.saturating_add(width + 1);
        spans.push(Span::styled(label, style));
        spans.push(Span::raw(" "));
    }
    let settings = view.model.settings();
    // Shown only where it applies (test holders are not filtered).
    if !settings.filter.is_empty() && view.filter_input.is_none() && view.pane != Pane::TestHolders
    {
        spans.push(Span::styled("· filter ", theme.dim));
        spans.push(Span::styled(
            format!("/{}", visible(&settings.filter)),
            theme.key,
        ));
        spans.push(Span::raw(" "));
    }
    if matches!(view.pane, Pane::Holders | Pane::Blocking) {
        let sort = match view.pane {
            Pane::Blocking => settings.blocking_sort.label(true),
            _ => settings.holders_sort.label(false),
        };
        spans.push(Span::styled(format!("· {sort} "), theme.dim));
        spans.push(Span::styled(
            format!("({})", key_of(Action::CycleSort)),
            theme.key,
        ));
    }
    if view.pane == Pane::Tree {
        let used: usize = spans.iter().map(|span| span.width()).sum();
        let room = usize::from(area.width).saturating_sub(used);
        let unlisted = view.model.data().unlisted_free();
        spans.push(Span::styled(
            free_note(settings.show_free, unlisted, room),
            theme.dim,
        ));
    }
    frame.render_widget(Paragraph::new(Line::from(spans)), area);
    tab_spans
}

/// What the tree shows of free keys, in the longest wording that fits in
/// `room` columns: hidden free keys still show for [`RECENTLY_FREED`]
/// after they were freed, and the screen says so; shown, at most
/// [`crate::model::FREE_LISTED`] are listed, and the screen says how many
/// are not (the filter lists those that match).
fn free_note(show_free: bool, unlisted: usize, room: usize) -> String {
    if show_free {
        if unlisted == 0 {
            return "· free keys shown".into();
        }
        let wordings = [
            format!(
                "· free keys shown: {unlisted} more not listed (/ filters; snapshot --all lists all)"
            ),
            format!("· free shown, {unlisted} not listed (/)"),
            format!("· {unlisted} free unlisted"),
            format!("· {unlisted} unlisted"),
        ];
        let fits = wordings.iter().find(|w| w.chars().count() <= room);
        return fits.unwrap_or(&wordings[3]).clone();
    }
    let secs = RECENTLY_FREED.as_secs();
    let wordings = [
        format!("· free keys hidden, recently freed shown {secs} s"),
        format!("· free hidden, freed shown {secs} s"),
        "· free hidden".to_string(),
    ];
    let fits = wordings.iter().find(|w| w.chars().count() <= room);
    fits.unwrap_or(&wordings[2]).clone()
}

/// `22:23Z · last change 22:22:40Z · `: the model's clock to the minute
/// (so a quiet screen visibly lives, at one redraw a minute) and when the
/// engine last reported a change.
/// ` REPLAY ` ▶/⏸, the speed, the cursor's time, what the files cannot
/// tell there (a gap, a recording cut short, damage) and the recording's
/// span: first on the line, so a replay is never taken for live nor an
/// unsure state for a sure one.
fn replay_spans(
    view: &ViewState<'_>,
    replay: &super::super::replay_status::ReplayStatus,
) -> Vec<Span<'static>> {
    let theme = view.config.theme;
    let playing = if replay.playing { "▶" } else { "⏸" };
    let mut spans = vec![
        Span::styled(" REPLAY ", theme.marker),
        Span::raw(format!(" {playing} {}× ", replay.speed)),
        Span::styled(crate::time_format::rfc3339(replay.cursor), theme.section),
        Span::styled(" · ", theme.dim),
    ];
    // What the files cannot tell at the cursor comes first after it:
    // on a narrow terminal the span recorded is what is cut.
    if let Some(gap) = &replay.gap {
        let (end, next) = (super::clock_text(gap.from), super::clock_text(gap.to));
        let words = match &gap.why {
            crate::journal::GapWhy::Missing(missing) if missing.from == missing.to => format!(
                " PART {} MISSING: nothing known from {end} to {next}; the state at {end} ",
                missing.from
            ),
            crate::journal::GapWhy::Missing(missing) => format!(
                " PARTS {}–{} MISSING: nothing known from {end} to {next}; the state at {end} ",
                missing.from, missing.to
            ),
            crate::journal::GapWhy::NotRecorded(_) => {
                format!(" NOT RECORDED from {end} to {next}: the state at {end} ")
            }
        };
        spans.push(Span::styled(words, theme.marker));
        spans.push(Span::styled(" · ", theme.dim));
    }
    if replay.cut_short {
        spans.push(Span::styled(
            " NO END LINE: what followed it is unknown (cut short, or still recording) ",
            theme.marker,
        ));
        spans.push(Span::styled(" · ", theme.dim));
    }
    if let Some(doubt) = &replay.doubt {
        spans.push(Span::styled(
            format!(" UNSURE: {} ", crate::text::visible(doubt)),
            theme.marker,
        ));
        spans.push(Span::styled(" · ", theme.dim));
    }
    spans.push(Span::styled(
        format!(
            "{} recorded {} · ",
            crate::text::visible(&replay.host),
            span_text(replay.start, replay.end)
        ),
        theme.dim,
    ));
    spans
}

/// `05:33:12Z–05:33:52Z` within a day, else both dates and times.
fn span_text(start: std::time::SystemTime, end: std::time::SystemTime) -> String {
    let (a, b) = (
        crate::time_format::rfc3339(start),
        crate::time_format::rfc3339(end),
    );
    if a.get(..10) == b.get(..10) {
        format!("{}–{}", super::clock_text(start), super::clock_text(end))
    } else {
        let seconds = |text: &str| format!("{}Z", text.get(..19).unwrap_or(text));
        format!("{}–{}", seconds(&a), seconds(&b))
    }
}

fn clock_spans(view: &ViewState<'_>) -> Vec<Span<'static>> {
    let theme = view.config.theme;
    let now = super::clock_text(view.model.now());
    let minute = format!("{}Z", now.get(..5).unwrap_or(&now));
    let mut spans = vec![Span::raw(minute)];
    if let Some(at) = view.model.data().watcher.last_change {
        spans.push(Span::styled(" · last change ", theme.dim));
        spans.push(Span::raw(super::clock_text(at)));
    }
    spans.push(Span::styled(" · ", theme.dim));
    spans
}

/// Narrowest the state dir is shortened to before the whole first line
/// is cut at its end instead.
const STATE_DIR_MIN: usize = 12;

/// The first line in `width` columns: `lead` (markers, probe, health,
/// ending in a separator), the clock, the state dir. What gives way, in
/// order: the last change, the clock (each leaves an `…`), then the state
/// dir's middle, then — below [`STATE_DIR_MIN`] columns for it — the
/// line's end.
fn first_line(
    lead: Vec<Span<'static>>,
    clock: Vec<Span<'static>>,
    state_dir: String,
    width: u16,
) -> Vec<Span<'static>> {
    let width = usize::from(width);
    let columns = |spans: &[Span]| spans.iter().map(Span::width).sum::<usize>();
    let gap = Span::raw("… · ");
    let mut clocks = vec![clock.clone()];
    if let Some(minute) = clock.first() {
        // The minute alone, then nothing: an ellipsis where the rest was.
        clocks.push(vec![minute.clone(), Span::raw(" · "), gap.clone()]);
    }
    clocks.push(vec![gap.clone()]);
    let dir_width = unicode_width::UnicodeWidthStr::width(state_dir.as_str());
    for clock in &clocks {
        if columns(&lead) + columns(clock) + dir_width <= width {
            let mut line = lead;
            line.extend(clock.iter().cloned());
            line.push(Span::raw(state_dir));
            return line;
        }
    }
    let room = width.saturating_sub(columns(&lead) + gap.width());
    let mut line = lead;
    if room >= STATE_DIR_MIN.min(dir_width) {
        line.push(gap);
        line.push(Span::raw(
            crate::tui::fit::middle(&state_dir, room).into_owned(),
        ));
        return line;
    }
    line.push(Span::raw(state_dir));
    cut_line(line, u16::try_from(width).unwrap_or(u16::MAX)).spans
}

/// `spans` as one line of at most `width` columns: as they are when they
/// fit, else cut at the end, the last column an `…`.
fn cut_line(spans: Vec<Span<'static>>, width: u16) -> Line<'static> {
    let width = usize::from(width);
    if spans.iter().map(Span::width).sum::<usize>() <= width {
        return Line::from(spans);
    }
    if width == 0 {
        return Line::default();
    }
    let mut kept = Vec::new();
    let mut used = 0;
    for span in spans {
        let own = span.width();
        if used + own < width {
            used += own;
            kept.push(span);
            continue;
        }
        // The span that reaches the edge (with more after it): its head,
        // then the ellipsis in the last column.
        let room = width - used - 1;
        let mut head = String::new();
        let mut taken = 0;
        for c in span.content.chars() {
            let w = unicode_width::UnicodeWidthChar::width(c).unwrap_or(0);
            if taken + w > room {
                break;
            }
            taken += w;
            head.push(c);
        }
        head.push(crate::tui::fit::ELLIPSIS);
        kept.push(Span::styled(head, span.style));
        break;
    }
    Line::from(kept)
}
