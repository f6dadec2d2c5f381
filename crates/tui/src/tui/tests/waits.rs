//! Who waits for whom on the first screen: a deadlock named on the
//! header's third line with every process and key of it and whom to
//! signal, its keys first in the blocking pane, the circle hop by hop in
//! the details, and `K` offering exactly the process to signal; a chain
//! whose root blocker is stopped, named at its root.

use crossterm::event::KeyCode;

use crate::engine::Liveness;
use crate::liveness::WaitKind;
use crate::liveness::process::ProcState;
use crate::model::Section;
use crate::model::fixtures::*;

use super::support::{app_with, press, render, select};
use crate::tui::*;

fn line_with<'a>(screen: &'a str, needle: &str) -> &'a str {
    screen
        .lines()
        .find(|line| line.contains(needle))
        .unwrap_or_else(|| panic!("no line with {needle:?} in\n{screen}"))
}

/// Agent 5001 holds tag alpha and waits to take beta; agent 5002 holds
/// beta and waits to take alpha — since t(590).
fn deadlocked_app() -> App {
    let mut model = demo_model();
    for (pid, aih, holds) in [
        (5001, "cli/daemon/one", "alpha"),
        (5002, "cli/daemon/two", "beta"),
    ] {
        let state = held(Liveness::Live, pid, "agent", t(580));
        model.apply(key_delta(instance(aih), state.clone(), None, t(590)));
        let other = if pid == 5001 { 5002 } else { 5001 };
        let waited = waited_by(state, other, WaitKind::Contender);
        model.apply(key_delta(tag(holds), waited, None, t(590)));
    }
    model.settle(t(590));
    model.set_now(t(600));
    app_with(Theme::monochrome(), model, STATE.as_ref())
}

#[test]
fn a_deadlock_is_named_on_the_first_screen_with_every_process_and_key_and_whom_to_signal() {
    let mut app = deadlocked_app();
    let screen = render(&mut app, 160, 30).backend().to_string();
    assert!(
        line_with(&screen, "⊗ deadlock").contains("1 ⊗ deadlock"),
        "counted first: {screen}"
    );
    let third = line_with(&screen, "deadlock: signal");
    assert!(
        third.contains(
            "deadlock: signal pid 5002 to break it (K on its key) — pid 5001 holds tag \"alpha\", \
             waits to take tag \"beta\" held by pid 5002, which waits to take tag \"alpha\""
        ),
        "{third}"
    );
    // The blocking pane: both keys first, marked.
    press(&mut app, KeyCode::Char('5'));
    let screen = render(&mut app, 160, 30).backend().to_string();
    let first_row = screen
        .lines()
        .position(|line| line.contains("STATE") && line.contains("KEY"))
        .unwrap();
    let lines: Vec<&str> = screen.lines().collect();
    assert!(lines[first_row + 1].contains("⊗ deadlock"), "{screen}");
    assert!(lines[first_row + 2].contains("⊗ deadlock"), "{screen}");
    insta::assert_snapshot!(render(&mut app, 120, 30).backend());
}

#[test]
fn k_on_a_deadlocked_key_offers_the_process_to_signal_to_break_it() {
    let mut app = deadlocked_app();
    // alpha is held by 5001, but the one to signal is 5002.
    select(&mut app, Section::Tags, "alpha");
    press(&mut app, KeyCode::Char('K'));
    let screen = render(&mut app, 120, 30).backend().to_string();
    assert!(app.has_overlay(), "{screen}");
    assert!(screen.contains("5002"), "{screen}");
}

/// 2393 waits to take d, held by 2322, which waits to take c, held by
/// the stopped 2194: the stopped key is the stuck one, the blocked key's
/// details show the chain hop by hop to its root.
#[test]
fn a_chain_with_a_stopped_root_is_named_at_its_root_and_shown_hop_by_hop() {
    let mut model = demo_model();
    let mut root = held(Liveness::Live, 2194, "agent --tag c", t(500));
    root.holders[0].state = Some(ProcState::Stopped);
    model.apply(key_delta(
        instance("cli/daemon/root"),
        root.clone(),
        None,
        t(590),
    ));
    let c = waited_by(root, 2322, WaitKind::Contender);
    model.apply(key_delta(tag("c"), c, None, t(590)));
    let middle = held(Liveness::Live, 2322, "agent --tag d", t(550));
    model.apply(key_delta(
        instance("cli/daemon/mid"),
        middle.clone(),
        None,
        t(590),
    ));
    let d = waited_by(middle, 2393, WaitKind::Contender);
    model.apply(key_delta(tag("d"), d, None, t(590)));
    model.settle(t(590));
    model.set_now(t(600));
    let mut app = app_with(Theme::monochrome(), model, STATE.as_ref());
    let screen = render(&mut app, 160, 30).backend().to_string();
    let third = line_with(&screen, "stuck:");
    assert!(
        third.contains(
            "\"stuck: tag c — ‖ stopped: 1 waiting to take it, held 1m40s by pid 2194 \
             (agent cli/daemon/root), 2 processes wait on its holder, down chains"
        ),
        "{third}"
    );
    select(&mut app, Section::Tags, "d");
    let screen = render(&mut app, 160, 40).backend().to_string();
    let verdict = line_with(&screen, "verdict");
    assert!(
        verdict.contains("blocked: pid 2393 waits to take it; its holder pid 2322 waits"),
        "{screen}"
    );
    let chain = line_with(&screen, "chain    pid");
    assert!(
        chain.contains("pid 2322 waits to take tag \"c\" ← held by pid 2194 (stopped)"),
        "{screen}"
    );
}
