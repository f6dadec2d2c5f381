//! A selection is a key, not a row number: in every pane, rows inserted
//! above the selection, or re-sorted around it, leave `K`, `y`, `c` and
//! Enter acting on the same key, holder, event or test holder.

use crossterm::event::KeyCode;

use crate::engine::Liveness;
use crate::locks::Family;
use crate::model::fixtures::{held, key_delta, t, tag};
use crate::model::{HolderRow, Section};
use crate::operate::test_holders::{HoldMode, HolderSpec, HolderStatus, HolderUpdate, Placement};
use crate::tui::App;
use crate::tui::overlay::Overlay;

use super::support::{demo_app, press, select, text_of};

/// The demo model plus tags `ccc` (held by 300 since t(200)) and `zzz`
/// (held by 310 since t(250)).
fn app_with_tags() -> App {
    let mut app = demo_app();
    for (name, pid, since) in [("ccc", 300, 200), ("zzz", 310, 250)] {
        let state = held(Liveness::Live, pid, &format!("agent-{pid}"), t(since));
        app.apply(key_delta(tag(name), state, None, t(since)));
    }
    app
}

/// Rows arrive that sort before everything selected so far: a new
/// holder of tags `abd` and `aaa`, holding since before every other
/// hold (so it is first by age, by name and in the holders' groups).
fn insert_rows_above(app: &mut App) {
    for name in ["abd", "aaa"] {
        let state = held(Liveness::Live, 400, "agent-400", t(1));
        app.apply(key_delta(tag(name), state, None, t(590)));
    }
}

/// What `K`, `y` and `c` act on now: the signal dialog's PID and the key
/// it names, the PID `y` copies, and the family `c` pre-fills.
fn acted_on(app: &mut App) -> (u32, Option<String>, String, Family) {
    press(app, KeyCode::Char('K'));
    let (pid, from) = match &app.operator.overlay {
        Some(Overlay::Signal(dialog)) => (dialog.process.pid, dialog.from.clone()),
        other => panic!("K opened {other:?}; message {:?}", app.message()),
    };
    press(app, KeyCode::Esc);
    press(app, KeyCode::Char('y'));
    let copied = app.take_clipboard().expect("y copied something");
    press(app, KeyCode::Char('c'));
    let family = match &app.operator.overlay {
        Some(Overlay::Form(form)) => form.family().expect("c pre-fills a valid family"),
        other => panic!("c opened {other:?}; message {:?}", app.message()),
    };
    press(app, KeyCode::Esc);
    (pid, from, copied, family)
}

fn on_tag_ccc() -> (u32, Option<String>, String, Family) {
    (
        300,
        Some(tag("ccc").label()),
        "300".into(),
        Family::Group(vec!["ccc".into()]),
    )
}

#[test]
fn the_tree_keeps_its_key_when_rows_are_inserted_above() {
    let mut app = app_with_tags();
    select(&mut app, Section::Tags, "ccc");
    text_of(&mut app);
    insert_rows_above(&mut app);
    text_of(&mut app);
    assert_eq!(acted_on(&mut app), on_tag_ccc());
}

#[test]
fn the_blocking_view_sorted_by_name_keeps_its_key_when_rows_are_inserted_above() {
    let mut app = app_with_tags();
    press(&mut app, KeyCode::Char('5'));
    for _ in 0..3 {
        press(&mut app, KeyCode::Char('s'));
    }
    assert!(text_of(&mut app).contains("by name"));
    let index = row_of(&app, "ccc");
    app.select_index(index);
    text_of(&mut app);
    insert_rows_above(&mut app);
    let shown = text_of(&mut app);
    assert_ne!(row_of(&app, "ccc"), index, "the rows moved:\n{shown}");
    assert_eq!(acted_on(&mut app), on_tag_ccc());
    // Re-sorting keeps it too.
    press(&mut app, KeyCode::Char('s'));
    assert_eq!(acted_on(&mut app), on_tag_ccc());
    press(&mut app, KeyCode::Enter);
    assert_eq!(
        app.model().selection(),
        Some(&(Section::Tags, "ccc".into()))
    );
}

/// The blocking row of tag `name`.
fn row_of(app: &App, name: &str) -> usize {
    let data = app.model().data();
    app.blocking_rows()
        .iter()
        .position(|row| data.lock(row.node).is_some_and(|l| l.key.name() == name))
        .expect("a blocking row")
}

#[test]
fn the_holders_view_keeps_its_key_row_when_a_group_is_inserted_above() {
    let mut app = app_with_tags();
    press(&mut app, KeyCode::Char('2'));
    text_of(&mut app);
    let (_, rows) = app.model().holders();
    let index = rows
        .iter()
        .position(|row| match row {
            HolderRow::Key { node, .. } => app.model().identity(*node).1 == "ccc",
            HolderRow::Process { .. } => false,
        })
        .expect("ccc is a holders row");
    app.select_index(index);
    insert_rows_above(&mut app);
    text_of(&mut app);
    assert_ne!(app.model().holders_selected(), index, "the rows moved");
    assert_eq!(acted_on(&mut app), on_tag_ccc());
    // Re-sorted by PID, then by name: still the same row.
    press(&mut app, KeyCode::Char('s'));
    assert_eq!(acted_on(&mut app), on_tag_ccc());
    press(&mut app, KeyCode::Char('s'));
    assert_eq!(acted_on(&mut app), on_tag_ccc());
}

#[test]
fn the_holders_view_keeps_a_process_line_and_acts_on_that_process() {
    let mut app = app_with_tags();
    press(&mut app, KeyCode::Char('2'));
    text_of(&mut app);
    let (groups, rows) = app.model().holders();
    let index = rows
        .iter()
        .position(|row| matches!(row, HolderRow::Process { group } if groups[*group].pid == 310))
        .expect("310's process line");
    app.select_index(index);
    insert_rows_above(&mut app);
    text_of(&mut app);
    press(&mut app, KeyCode::Char('K'));
    match &app.operator.overlay {
        Some(Overlay::Signal(dialog)) => {
            assert_eq!((dialog.process.pid, &dialog.from), (310, &None));
        }
        other => panic!("K opened {other:?}"),
    }
    press(&mut app, KeyCode::Esc);
    press(&mut app, KeyCode::Char('y'));
    assert_eq!(app.take_clipboard().as_deref(), Some("310"));
}

#[test]
fn the_event_log_keeps_its_event_as_new_ones_arrive_and_after_a_pause() {
    let mut app = app_with_tags();
    press(&mut app, KeyCode::Char('3'));
    text_of(&mut app);
    let index = (0..app.model().events().len())
        .find(|&i| app.model().events().get(i).unwrap().pid == Some(300))
        .expect("ccc's acquire was logged");
    app.select_index(index);
    press(&mut app, KeyCode::Char('p'));
    insert_rows_above(&mut app);
    press(&mut app, KeyCode::Char('p'));
    text_of(&mut app);
    assert_ne!(app.model().events_selected(), index, "the rows moved");
    press(&mut app, KeyCode::Char('y'));
    assert_eq!(app.take_clipboard().as_deref(), Some("300"));
    press(&mut app, KeyCode::Char('c'));
    match &app.operator.overlay {
        Some(Overlay::Form(form)) => {
            assert_eq!(form.family().unwrap(), Family::Group(vec!["ccc".into()]))
        }
        other => panic!("c on an event opened {other:?}"),
    }
}

#[test]
fn the_test_holders_list_keeps_its_holder_when_an_earlier_one_is_removed() {
    let mut app = app_with_tags();
    for (id, name) in [(1, "one"), (2, "two"), (3, "three")] {
        let spec = HolderSpec {
            family: Family::Group(vec![name.into()]),
            placement: Placement::Child,
            mode: HoldMode::Wait,
        };
        app.operator.test_holders.add(id, spec, t(500));
        app.holder_update(HolderUpdate {
            id,
            pid: Some(9000 + id as u32),
            status: HolderStatus::Holding,
            at: t(501),
        });
    }
    app.holder_update(HolderUpdate {
        id: 1,
        pid: Some(9001),
        status: HolderStatus::Exited("released".into()),
        at: t(502),
    });
    press(&mut app, KeyCode::Char('4'));
    app.select_index(1);
    app.operator.test_holders.remove_over(1);
    text_of(&mut app);
    press(&mut app, KeyCode::Char('y'));
    assert_eq!(app.take_clipboard().as_deref(), Some("9002"));
    press(&mut app, KeyCode::Char('K'));
    match &app.operator.overlay {
        Some(Overlay::KillTestHolder(dialog)) => assert_eq!(dialog.id, 2),
        other => panic!("K opened {other:?}"),
    }
}

#[test]
fn k_on_a_stopped_holder_says_the_signal_is_pending_and_offers_sigcont() {
    let mut app = app_with_stopped();
    select(&mut app, Section::Tags, "stuck");
    press(&mut app, KeyCode::Char('K'));
    let shown = text_of(&mut app);
    assert!(shown.contains("It is stopped (T)"), "{shown}");
    assert!(shown.contains("c send SIGCONT"), "{shown}");
    assert!(!shown.contains("still running"), "{shown}");
}

fn app_with_stopped() -> App {
    let mut app = demo_app();
    let mut state = held(Liveness::Live, 600, "agent-600", t(100));
    state.holders[0].state = Some(crate::liveness::process::ProcState::Stopped);
    app.apply(key_delta(tag("stuck"), state, None, t(100)));
    app
}
