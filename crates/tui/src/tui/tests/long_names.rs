//! Long names at every size: a deeply nested AIH, a long shell-quoted
//! command line and a tag with a control character, drawn at 120×35,
//! 80×24 and 40×10 in every pane that names them (insta snapshots), and
//! the promise that a wider terminal never shows less of a name.

use crossterm::event::KeyCode;

use crate::engine::{Delta, Liveness};
use crate::model::Section;
use crate::model::fixtures::*;
use crate::tui::App;
use crate::tui::fit::ELLIPSIS;

use super::support::{demo_app, press, render, select};

/// A 22-char agent id + response id, as real AIH segments are.
const ROOT_AGENT: &str = "3Bk4hBIOrMDdNaDL3atd1b-F1LTN4MMGSB1wpHXF";
/// Its nested sub-agent's leaf.
const LEAF: &str = "7QzWv2LmXn8RtYu1PoIkJh-AaBbCcDdEeFfGgHh";
/// A spawn's command line, already shell-quoted as `/proc` reading does.
const COMMAND: &str = "/home/operator/.local/bin/objectiveai agents spawn --state-dir /home/operator/.objectiveai/state/default --aih cli/daemon/3Bk4hBIOrMDdNaDL3atd1b-F1LTN4MMGSB1wpHXF --tag 'research: v2.1'";

fn nested_aih() -> String {
    format!("cli/daemon/{ROOT_AGENT}/{LEAF}")
}

/// The demo app plus one holder (pid 2001) of a nested AIH pair and of a
/// tag whose name holds a tab.
fn long_names_app() -> App {
    with_long_names(demo_app())
}

/// `app` plus the long names of [`long_names_app`].
fn with_long_names(mut app: App) -> App {
    let root = format!("cli/daemon/{ROOT_AGENT}");
    let keys = [instance(&root), instance(&nested_aih()), tag("ta\tb")];
    for key in keys {
        let state = held(Liveness::Live, 2001, COMMAND, t(200));
        app.apply(key_delta(key, state, None, t(200)));
    }
    app.apply(Delta::Synced { keys: 13, at: t(1) });
    app.model_mut().set_now(t(600));
    app
}

/// Snapshots one screen at the three sizes.
fn at_every_size(app: &mut App, name: &str) {
    for (width, height) in [(120, 35), (80, 24), (40, 10)] {
        let terminal = render(app, width, height);
        insta::assert_snapshot!(format!("{name}_{width}x{height}"), terminal.backend());
    }
}

#[test]
fn tree_with_a_nested_aih_a_long_command_and_a_tab_in_a_tag() {
    let mut app = long_names_app();
    select(&mut app, Section::Instances, &nested_aih());
    at_every_size(&mut app, "tree");
    select(&mut app, Section::Tags, "ta\tb");
    let screen = render(&mut app, 120, 35).backend().to_string();
    assert!(screen.contains("ta␉b"), "the tab is shown: {screen}");
}

#[test]
fn holders_pane_tells_nested_aihs_apart() {
    let mut app = long_names_app();
    press(&mut app, KeyCode::Char('2'));
    at_every_size(&mut app, "holders");
}

#[test]
fn blocking_pane_with_long_names() {
    let mut app = long_names_app();
    press(&mut app, KeyCode::Char('5'));
    at_every_size(&mut app, "blocking");
}

#[test]
fn problems_rows_show_the_path_below_the_locks_root() {
    let mut app = long_names_app();
    press(&mut app, KeyCode::Char('G'));
    at_every_size(&mut app, "problems");
    let screen = render(&mut app, 80, 24).backend().to_string();
    assert!(screen.contains("agents/tags/notes.txt"), "{screen}");
}

#[test]
fn details_scroll_shows_every_line_of_a_long_command() {
    let mut app = long_names_app();
    select(&mut app, Section::Instances, &nested_aih());
    let first = render(&mut app, 80, 24).backend().to_string();
    assert!(first.contains("[ ] scroll"), "{first}");
    for _ in 0..30 {
        press(&mut app, KeyCode::Char(']'));
    }
    let scrolled = render(&mut app, 80, 24).backend().to_string();
    assert!(
        scrolled.contains("announce"),
        "the last line is reached: {scrolled}"
    );
    assert!(
        !scrolled.contains("held since"),
        "the first lines scrolled away"
    );
    press(&mut app, KeyCode::Down);
    let moved = render(&mut app, 80, 24).backend().to_string();
    assert!(
        moved.contains("0/"),
        "a new selection starts at its top: {moved}"
    );
}

/// How much of the nested AIH's leaf the selected tree row shows.
fn leaf_shown(app: &mut App, width: u16) -> usize {
    let screen = render(app, width, 35).backend().to_string();
    let row = screen
        .lines()
        .find(|line| line.starts_with("\">"))
        .expect("a selected row")
        .to_string();
    let token = row
        .split_whitespace()
        .find(|word| word.starts_with("7QzW"))
        .unwrap_or_else(|| panic!("the leaf's head is shown at {width}: {row}"));
    token.chars().filter(|&c| c != ELLIPSIS).count()
}

/// Within one layout (narrow tree, details below, details beside) a
/// wider terminal never shows less of a name, and 120 columns (details
/// beside) never less than 80 (details below) — the list keeps 80.
#[test]
fn a_wider_terminal_never_shows_less_of_a_name() {
    let mut app = long_names_app();
    select(&mut app, Section::Instances, &nested_aih());
    for layout in [30..50, 50..120, 120..201] {
        let mut before = 0;
        for width in layout {
            let shown = leaf_shown(&mut app, width);
            assert!(shown >= before, "{width} columns show {shown} < {before}");
            before = shown;
        }
    }
    let (at_80, at_120) = (leaf_shown(&mut app, 80), leaf_shown(&mut app, 120));
    assert!(at_120 >= at_80, "120 columns: {at_120} < {at_80} at 80");
    assert!(
        leaf_shown(&mut app, 50) < LEAF.len(),
        "the test needs a cut"
    );
}

/// The header lines at `width` (a 35-row screen: all three are drawn).
fn header_at(app: &mut App, width: u16) -> Vec<String> {
    let screen = render(app, width, 35).backend().to_string();
    let lines = screen.lines().take(3);
    lines
        .map(|line| line.trim_matches('"').trim_end().to_string())
        .collect()
}

/// No header line is cut without an `…`, at any width; the first keeps
/// the state dir — whole at 80 columns (the clock gives way), shortened
/// in the middle, both ends kept, when narrower.
#[test]
fn header_lines_are_shortened_with_an_ellipsis_and_keep_the_state_dir() {
    let state_dir = "/home/operator/.objectiveai";
    let demo = crate::model::fixtures::demo_model();
    let mut app = with_long_names(super::support::app_on(demo, state_dir.as_ref()));
    let wide = header_at(&mut app, 400);
    assert!(wide[0].ends_with(state_dir), "{wide:?}");
    for width in (30..=130).step_by(super::support::size_step(1)) {
        let lines = header_at(&mut app, width);
        for (line, whole) in lines.iter().zip(&wide) {
            assert!(
                line == whole || line.contains(ELLIPSIS),
                "cut without an ellipsis at {width}: {line:?} (whole: {whole:?})"
            );
        }
        let first = &lines[0];
        if width >= 50 {
            assert!(
                first.starts_with("locktop · probe acquire · watching · "),
                "{first:?}"
            );
        }
        if width >= 80 {
            assert!(first.ends_with(state_dir), "at {width}: {first:?}");
        } else if width >= 56 && !first.ends_with(state_dir) {
            let (head, tail) = first.rsplit_once(" · ").unwrap();
            let (a, b) = tail.split_once(ELLIPSIS).expect("shortened in the middle");
            assert!(
                state_dir.starts_with(a) && state_dir.ends_with(b),
                "{first:?}"
            );
            assert!(
                a.len() > 3 && b.len() > 3,
                "both ends kept: {first:?} ({head})"
            );
        }
    }
    insta::assert_snapshot!(render(&mut app, 80, 24).backend());
}

/// Why the kernel's events (or the lock-free probe) are not used is a
/// long phrase: it comes last on the first line, in the room the rest
/// leaves, so a missing state dir and the state dir itself are said at
/// any width where they fit, and the reason is cut (or left out) first.
#[test]
fn the_health_and_state_dir_are_shown_before_a_long_fallback_reason() {
    use crate::engine::{Delta, WatcherHealth};
    let state_dir = "/home/operator/.objectiveai/state/default";
    let mut model = crate::model::Model::default();
    model.apply(Delta::Health(WatcherHealth::WaitingForRoot {
        ancestor: "/home/operator/.objectiveai".into(),
        state_dir_missing: true,
    }));
    let mut app = super::support::app_on(model, state_dir.as_ref());
    app.config.probe = crate::liveness::probe::ProbeMode::LockFree;
    let why = "cannot look in /sys/kernel/tracing: Permission denied (os error 13) \
               (needs root, or pass the tracepoint id)";
    app.config.source_fallback = Some(why.into());
    for width in [60, 100, 160, 400] {
        let first = &header_at(&mut app, width)[0];
        assert!(
            first.starts_with("locktop · probe lock-free · NO STATE DIR"),
            "at {width}: {first:?}"
        );
        if width >= 160 {
            assert!(first.contains("state/default"), "at {width}: {first:?}");
        }
    }
    app.apply(Delta::Health(WatcherHealth::Watching));
    let first = &header_at(&mut app, 160)[0];
    assert!(
        first.starts_with("locktop · probe lock-free · watching · ")
            && first.contains(&format!("{state_dir} · no kernel events: cannot"))
            && first.ends_with('…'),
        "{first:?}"
    );
    let wide = &header_at(&mut app, 400)[0];
    assert!(
        wide.ends_with(&format!("{state_dir} · no kernel events: {why}")),
        "{wide:?}"
    );
}
