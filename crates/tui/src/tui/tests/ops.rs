//! Operator actions, proved without a terminal: snapshots (80×24, fixed
//! clock) of the hold form, the test-holders pane, the signal dialog and
//! the check report, read-only mode, and no-panic sweeps over small sizes.
//! Nothing here signals a process or takes a lock (see `tests_live`).

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::Terminal;
use ratatui::backend::TestBackend;

use crate::context::Context;
use crate::disk::KeyKind;
use crate::liveness::ProbeMode;
use crate::locks::{Family, LocksError};
use crate::model::Section;
use crate::model::fixtures::*;
use crate::operate::check::{CheckReport, HolderReport, MemberReport};
use crate::operate::test_holders::{
    BusyMemberSummary, HoldMode, HolderSpec, HolderStatus, HolderUpdate, Placement,
};

use super::support::{demo_app, press, screen, select, text_of, type_text};
use crate::tui::views::wrap;
use crate::tui::*;

fn spec(family: Family, placement: Placement, mode: HoldMode) -> HolderSpec {
    HolderSpec {
        family,
        placement,
        mode,
    }
}

fn update(id: u64, pid: Option<u32>, status: HolderStatus, at: u64) -> HolderUpdate {
    HolderUpdate {
        id,
        pid,
        status,
        at: t(at),
    }
}

/// One test holder in every state, built from hand-made updates.
fn app_with_test_holders() -> App {
    let mut app = demo_app();
    add_test_holders(&mut app);
    app
}

fn add_test_holders(app: &mut App) {
    let group = |tag: &str| Family::Group(vec![tag.to_string()]);
    let holders = [
        (spec(group("deploy"), Placement::Child, HoldMode::Wait), 500),
        (
            spec(
                Family::Hierarchy {
                    aih: "cli/daemon/t1".into(),
                    tags: vec!["review".into()],
                },
                Placement::InProcess,
                HoldMode::Try,
            ),
            520,
        ),
        (
            spec(group("deploy"), Placement::InProcess, HoldMode::Try),
            540,
        ),
        (
            spec(group("research: v2.1"), Placement::Child, HoldMode::Try),
            300,
        ),
        (
            spec(
                Family::Hierarchy {
                    aih: "cli/daemon/new".into(),
                    tags: vec![],
                },
                Placement::Child,
                HoldMode::Try,
            ),
            595,
        ),
    ];
    for (index, (spec, at)) in holders.into_iter().enumerate() {
        app.operator.test_holders.add(index as u64 + 1, spec, t(at));
    }
    let waiting = HolderStatus::Waiting(vec![BusyMemberSummary {
        label: r#"tag "deploy""#.into(),
        pids: vec![1201],
    }]);
    let busy = HolderStatus::Failed(r#"busy: tag "deploy" (pid 1201)"#.into());
    for update in [
        update(1, Some(4321), waiting, 501),
        update(2, Some(777), HolderStatus::Holding, 521),
        update(3, Some(777), busy, 541),
        update(4, Some(4400), HolderStatus::Holding, 301),
        update(
            4,
            Some(4400),
            HolderStatus::Exited("killed by SIGKILL".into()),
            420,
        ),
        update(5, None, HolderStatus::Starting, 595),
    ] {
        app.holder_update(update);
    }
}

#[test]
fn hold_form_refuses_a_parent_segment_as_typed_and_enter_does_not_submit() {
    let mut app = demo_app();
    press(&mut app, KeyCode::Char('n'));
    press(&mut app, KeyCode::Up); // tags → family
    press(&mut app, KeyCode::Right); // group → hierarchy
    press(&mut app, KeyCode::Down); // → AIH
    type_text(&mut app, "../x");
    let terminal = screen(&mut app);
    let shown = terminal.backend().to_string();
    assert!(shown.contains(r#"invalid agent instance hierarchy "../x": it has a '..' segment"#));
    insta::assert_snapshot!(terminal.backend());
    press(&mut app, KeyCode::Enter);
    assert!(app.has_overlay(), "an invalid form stays open");
    assert!(app.test_holders().list().is_empty());
    app.handle_key(KeyEvent::new(KeyCode::Char('u'), KeyModifiers::CONTROL));
    type_text(&mut app, "a/b");
    assert!(text_of(&mut app).contains("✓ Enter holds aih a/b (in-process, try)"));
    press(&mut app, KeyCode::Enter);
    assert!(!app.has_overlay());
    assert!(
        app.message().unwrap().contains("not available"),
        "no manager here"
    );
    press(&mut app, KeyCode::Char('n'));
    press(&mut app, KeyCode::Esc);
    assert!(!app.has_overlay(), "Esc cancels");
}

#[test]
fn test_holders_pane_shows_each_state_with_pid_age_and_reason() {
    let mut app = app_with_test_holders();
    press(&mut app, KeyCode::Char('4'));
    app.operator.test_holders.select(0); // the waiting one: details list its blockers
    let terminal = screen(&mut app);
    let shown = terminal.backend().to_string();
    for word in [
        "◐ waiting",
        "◆ holding",
        "✖ failed",
        "○ exited",
        "… starting",
    ] {
        assert!(shown.contains(word), "{word}\n{shown}");
    }
    insta::assert_snapshot!(terminal.backend());
}

#[test]
fn a_child_test_holder_pid_is_announced_own_only_while_it_lives() {
    let context = Context::new(STATE.into());
    let (engine_tx, mut engine_rx) = tokio::sync::mpsc::unbounded_channel();
    let (ops, _events) = Ops::new(context, Some(engine_tx)).unwrap();
    let mut app = demo_app().with_ops(ops);
    add_test_holders(&mut app);
    let sent: Vec<String> = std::iter::from_fn(|| engine_rx.try_recv().ok())
        .map(|command| format!("{command:?}"))
        .collect();
    assert_eq!(
        sent,
        ["AddOwnPid(4321)", "AddOwnPid(4400)", "RemoveOwnPid(4400)"]
    );
    let list = app.test_holders().list();
    assert_eq!(list[0].pid, Some(4321));
    assert_eq!(list[3].holding_since, Some(t(301)));
    assert_eq!(app.test_holders_running(), 3);
    assert_eq!(
        app.message(),
        Some("test holder #4 exited: killed by SIGKILL")
    );
}

#[test]
fn k_on_a_live_key_asks_before_sigterm_showing_pid_and_command_line() {
    let mut app = demo_app();
    select(&mut app, Section::Instances, "cli/daemon/abc");
    press(&mut app, KeyCode::Char('K'));
    let terminal = screen(&mut app);
    let shown = terminal.backend().to_string();
    assert!(shown.contains("1201") && shown.contains("locktop hold --aih cli/daemon/abc"));
    insta::assert_snapshot!(terminal.backend());
    press(&mut app, KeyCode::Char('K')); // not a confirmation at this stage
    press(&mut app, KeyCode::Char('n'));
    assert!(!app.has_overlay(), "n cancels without sending anything");
}

#[test]
fn k_on_test_holders_confirms_a_child_kill_refuses_an_in_process_one_and_c_checks_it() {
    let mut app = app_with_test_holders();
    press(&mut app, KeyCode::Char('4'));
    app.operator.test_holders.select(0);
    press(&mut app, KeyCode::Char('K'));
    let shown = text_of(&mut app);
    assert!(
        shown.contains("Kill test holder #1") && shown.contains("4321"),
        "{shown}"
    );
    press(&mut app, KeyCode::Esc);
    app.operator.test_holders.select(1);
    press(&mut app, KeyCode::Char('K'));
    assert!(!app.has_overlay());
    assert!(
        app.message()
            .unwrap()
            .contains("cannot be killed; release it (r)")
    );
    // A failed holder is over: r removes it from the list (a running one
    // would be released instead).
    app.operator.test_holders.select(2);
    press(&mut app, KeyCode::Char('r'));
    assert_eq!(
        app.message(),
        Some("test holder #3 (failed) removed from the list")
    );
    let ids: Vec<u64> = app.test_holders().list().iter().map(|h| h.id).collect();
    assert_eq!(ids, [1, 2, 4, 5]);
    app.operator.test_holders.select(1);
    press(&mut app, KeyCode::Char('c'));
    assert!(text_of(&mut app).contains("✓ Enter checks aih cli/daemon/t1 + review"));
}

#[test]
fn c_prefills_the_check_form_with_the_selected_key() {
    let mut app = demo_app();
    select(&mut app, Section::Tags, "deploy");
    press(&mut app, KeyCode::Char('c'));
    type_text(&mut app, ", review");
    let terminal = screen(&mut app);
    assert!(
        terminal
            .backend()
            .to_string()
            .contains("✓ Enter checks group deploy, review")
    );
    insta::assert_snapshot!(terminal.backend());
}

fn report(members: usize) -> CheckReport {
    let mut list = vec![
        MemberReport {
            kind: KeyKind::Tag,
            name: "deploy".into(),
            busy: true,
            holders: vec![HolderReport {
                process: process(1201, HOLD),
                since: Some(t(12)),
                also_holds: vec![r#"instance "cli/daemon/abc""#.into()],
                role: crate::operate::verdict::Role::Agent {
                    aih: "cli/daemon/abc".into(),
                },
                shared: false,
            }],
            verdict: None,
            contenders: vec![],
            watchers: vec![],
            held_unlinked: vec![],
            refused: None,
        },
        MemberReport {
            kind: KeyKind::Tag,
            name: "review".into(),
            busy: false,
            holders: vec![],
            verdict: None,
            contenders: vec![],
            watchers: vec![],
            held_unlinked: vec![],
            refused: None,
        },
    ];
    for i in 2..members {
        list.push(MemberReport {
            kind: KeyKind::Tag,
            name: format!("extra {i}"),
            busy: false,
            holders: vec![],
            verdict: None,
            contenders: vec![],
            watchers: vec![],
            held_unlinked: vec![],
            refused: None,
        });
    }
    CheckReport {
        free: false,
        members: list,
        waits: None,
    }
}

#[test]
fn check_report_dialog_names_each_busy_member_its_holder_and_what_else_it_holds() {
    let mut app = demo_app();
    let family = Family::Group(vec!["deploy".into(), "review".into()]);
    app.open_report(1, &family, ProbeMode::Acquire);
    assert!(text_of(&mut app).contains("checking…"));
    app.check_done(CheckOutcome {
        seq: 2,
        result: Err(LocksError::InvalidTag {
            tag: String::new(),
            reason: "another check",
        }),
    });
    assert!(
        text_of(&mut app).contains("checking…"),
        "other checks are ignored"
    );
    app.check_done(CheckOutcome {
        seq: 1,
        result: Ok(report(2)),
    });
    let terminal = screen(&mut app);
    let shown = terminal.backend().to_string();
    assert!(shown.contains("held by pid 1201 for 9m48s"), "{shown}");
    assert!(shown.contains(r#"also holds: instance "cli/daemon/abc""#));
    insta::assert_snapshot!(terminal.backend());
}

/// A probe cannot know past tries: the monitor's check adds the tries
/// its kernel lock events saw refused on a busy member in the last minute.
#[test]
fn the_monitors_check_says_who_was_refused_a_busy_member() {
    let mut app = demo_app();
    let mut state = held(crate::engine::Liveness::Live, 1201, HOLD, t(12));
    state.refused = Some(crate::liveness::state::RefusedTries {
        last_minute: 340,
        by: vec![crate::liveness::state::RefusedBy {
            pid: 9,
            count: 340,
            last: None,
        }],
    });
    app.apply(key_delta(tag("deploy"), state, None, t(600)));
    app.open_report(1, &Family::Group(vec!["deploy".into()]), ProbeMode::Passive);
    app.check_done(CheckOutcome {
        seq: 1,
        result: Ok(report(2)),
    });
    let shown = text_of(&mut app);
    assert!(
        shown.contains("refused 340× in the last minute, by pid 9 (340)"),
        "{shown}"
    );
}

#[test]
fn a_long_report_scrolls_and_its_last_line_stays_reachable() {
    let mut app = demo_app();
    app.open_report(1, &Family::Group(vec!["deploy".into()]), ProbeMode::Passive);
    app.check_done(CheckOutcome {
        seq: 1,
        result: Ok(report(40)),
    });
    let first = text_of(&mut app);
    assert!(first.contains("passive") && !first.contains("extra 39"));
    press(&mut app, KeyCode::End);
    let last = text_of(&mut app);
    assert!(
        last.contains("extra 39") && !last.contains("probe:"),
        "{last}"
    );
    press(&mut app, KeyCode::Down);
    assert_eq!(text_of(&mut app), last, "clamped at the end");
    press(&mut app, KeyCode::Char('g'));
    assert!(text_of(&mut app).contains("probe:"));
    press(&mut app, KeyCode::Esc);
    assert!(!app.has_overlay());
}

#[test]
fn read_only_disables_n_r_and_k_says_so_and_makes_c_passive() {
    let mut app = demo_app();
    app.config.read_only = true;
    for key in ['n', 'r', 'K'] {
        press(&mut app, KeyCode::Char(key));
        assert!(!app.has_overlay());
        let message = app.message().unwrap();
        assert!(
            message.contains("disabled") && message.contains("--read-only"),
            "{message}"
        );
    }
    press(&mut app, KeyCode::Char('?'));
    let terminal = screen(&mut app);
    let help = terminal.backend().to_string();
    assert!(help.contains("✗ n") && help.contains("✗ K") && help.contains("disabled: read-only"));
    assert!(
        help.contains("  c        why stuck?"),
        "c stays enabled\n{help}"
    );
    insta::assert_snapshot!(terminal.backend());
    press(&mut app, KeyCode::Esc);
    select(&mut app, Section::Tags, "deploy");
    press(&mut app, KeyCode::Char('c'));
    assert!(text_of(&mut app).contains("passive shared-lock probes (nothing taken)"));
}

#[test]
fn new_screens_draw_at_every_small_size_without_panicking() {
    let mut app = app_with_test_holders();
    let opens: [&dyn Fn(&mut App); 5] = [
        &|app| press(app, KeyCode::Char('4')),
        &|app| press(app, KeyCode::Char('n')),
        &|app| {
            press(app, KeyCode::Char('1'));
            select(app, Section::Instances, "cli/daemon/abc");
            press(app, KeyCode::Char('K'));
        },
        &|app| {
            app.open_report(9, &Family::Group(vec!["deploy".into()]), ProbeMode::Acquire);
            app.check_done(CheckOutcome {
                seq: 9,
                result: Ok(report(30)),
            });
        },
        &|app| {
            press(app, KeyCode::Char('4'));
            app.operator.test_holders.select(0);
            press(app, KeyCode::Char('K'));
        },
    ];
    for open in opens {
        open(&mut app);
        for width in (1..=130).step_by(super::support::size_step(9)) {
            for height in 1..=26 {
                let mut terminal = Terminal::new(TestBackend::new(width, height)).unwrap();
                terminal.draw(|frame| app.draw(frame)).unwrap();
            }
        }
        press(&mut app, KeyCode::Esc);
    }
}

#[test]
fn wrap_breaks_at_spaces_and_never_loses_text() {
    assert_eq!(wrap("aaa bbb ccc", 7, 2), ["aaa bbb", "  ccc"]);
    assert_eq!(wrap("abcdefghij", 4, 0), ["abcd", "efgh", "ij"]);
    let long = "busy  tag \"x\" held by pid 1 since 3s ago — /usr/bin/a-very-long-command";
    for width in 1..40 {
        let joined: String = wrap(long, width, 8).concat().split_whitespace().collect();
        assert_eq!(
            joined,
            long.split_whitespace().collect::<String>(),
            "width {width}"
        );
    }
}
