//! Model behaviour, proved on synthetic deltas: selection stability,
//! filtering, the free-key toggle, pause, the holders view and the kinds of
//! logged events.

use crate::engine::{Delta, Liveness};

use super::fixtures::*;
use super::*;

/// The labels of the rows, indented by depth, for readable assertions.
fn row_paths(model: &mut Model) -> Vec<String> {
    model.refresh();
    let rows = model.rows().to_vec();
    rows.iter()
        .map(|row| {
            let node = model.data().tree.node(row.node);
            format!("{}{}", "  ".repeat(row.depth as usize), node.label)
        })
        .collect()
}

fn selected_path(model: &mut Model) -> String {
    model.refresh();
    let id = model.selected_node().expect("a selection");
    model.data().tree.node(id).path.clone()
}

fn select_path(model: &mut Model, section: Section, path: &str) {
    model.refresh();
    let id = model.data().tree.find(section, path).expect("node exists");
    let index = model.rows().iter().position(|r| r.node == id).expect("row");
    model.select_row(index);
}

fn live(pid: u32) -> crate::engine::KeyState {
    held(Liveness::Live, pid, "agent", t(5))
}

/// A held key's state is kept once: the tree's node and the held view
/// share it (the model used to clone it into the held view).
#[test]
fn a_held_keys_state_is_one_copy_in_the_tree_and_the_held_view() {
    let mut model = Model::default();
    model.apply(key_delta(tag("t"), live(7), None, t(5)));
    let data = model.live_data();
    let node = data.tree.find(Section::Tags, "t").expect("a node");
    let in_tree = &*data.lock(node).expect("a lock").state;
    let in_view = data.held().held_state(&tag("t")).expect("held");
    assert!(std::ptr::eq(in_tree, in_view), "one copy");
}

#[test]
fn the_tree_nests_aihs_with_directory_nodes_and_locks_that_have_children() {
    let mut model = demo_model();
    model.set_show_free(true);
    assert_eq!(
        row_paths(&mut model),
        [
            "Instances",
            "  cli",
            "    daemon",
            "      abc",
            "        sub1",
            "      new",
            "      old",
            "    tools",
            "      x9",
            "  daemon",
            "    worker",
            "      w1",
            "      w2",
            "Tags",
            "  deploy",
            "  my tag: v1.0",
            "  review",
            "Other",
            "  plugins-daemon/p",
            "Problems",
            "  /state/locks/agents/tags/notes.txt",
        ]
    );
    let tree = &model.data().tree;
    let abc = tree.node(tree.find(Section::Instances, "cli/daemon/abc").unwrap());
    assert!(abc.lock.is_some() && !abc.children.is_empty());
    let daemon = tree.node(tree.find(Section::Instances, "cli/daemon").unwrap());
    assert!(daemon.is_directory());
}

#[test]
fn selection_stays_on_its_key_when_keys_are_inserted_and_removed_above_it() {
    let mut model = Model::default();
    for aih in ["a/k1", "a/k3", "a/k5"] {
        model.apply(key_delta(instance(aih), live(1), None, t(0)));
    }
    select_path(&mut model, Section::Instances, "a/k5");
    model.refresh();
    let before = model.selected_row();

    model.apply(key_delta(instance("a/k0"), live(2), None, t(1)));
    model.apply(key_delta(instance("a/k2"), live(2), None, t(1)));
    assert_eq!(selected_path(&mut model), "a/k5");
    model.refresh();
    assert_eq!(model.selected_row(), before + 2);

    model.apply(Delta::Removed {
        key: instance("a/k1"),
        previous: Liveness::Live,
        at: t(2),
    });
    model.apply(key_delta(
        instance("a/k3"),
        free(),
        Some(Liveness::Live),
        t(2),
    ));
    model.set_now(t(1000)); // the freed key is no longer "recent": hidden
    assert_eq!(selected_path(&mut model), "a/k5");
    model.refresh();
    assert_eq!(model.selected_row(), before);
}

#[test]
fn a_vanished_selection_falls_back_to_the_row_at_the_same_index() {
    let mut model = Model::default();
    for aih in ["a/k1", "a/k2", "a/k3"] {
        model.apply(key_delta(instance(aih), live(1), None, t(0)));
    }
    select_path(&mut model, Section::Instances, "a/k2");
    model.refresh();
    let index = model.selected_row();
    model.apply(Delta::Removed {
        key: instance("a/k2"),
        previous: Liveness::Live,
        at: t(1),
    });
    model.refresh();
    assert_eq!(model.selected_row(), index);
    assert_eq!(selected_path(&mut model), "a/k3");
}

#[test]
fn filter_matches_aih_and_keeps_ancestors_visible() {
    let mut model = demo_model();
    model.set_filter("SUB1");
    assert_eq!(
        row_paths(&mut model),
        [
            "Instances",
            "  cli",
            "    daemon",
            "      abc",
            "        sub1",
            "Tags",
            "Other",
            "Problems"
        ]
    );
}

#[test]
fn filter_matches_tag_names() {
    let mut model = demo_model();
    model.set_filter("deploy");
    assert_eq!(
        row_paths(&mut model),
        ["Instances", "Tags", "  deploy", "Other", "Problems"]
    );
}

#[test]
fn filter_matches_holder_pids() {
    let mut model = demo_model();
    model.set_filter("1201");
    assert_eq!(
        row_paths(&mut model),
        [
            "Instances",
            "  cli",
            "    daemon",
            "      abc",
            "Tags",
            "  deploy",
            "Other",
            "Problems"
        ]
    );
}

#[test]
fn free_keys_are_hidden_until_toggled_except_recently_freed_ones() {
    let mut model = demo_model();
    let rows = row_paths(&mut model);
    assert!(!rows.iter().any(|r| r.trim() == "old"), "stale key hidden");
    assert!(!rows.iter().any(|r| r.trim() == "my tag: v1.0"));
    assert!(
        rows.iter().any(|r| r.trim() == "new"),
        "freed 5 s ago: shown"
    );
    assert!(
        rows.iter().any(|r| r.trim() == "w1"),
        "in-flight always shown"
    );
    assert!(rows.iter().any(|r| r.trim() == "w2"), "errors always shown");

    assert!(model.set_now(t(10_000)), "recently freed rows aged out");
    let rows = row_paths(&mut model);
    assert!(!rows.iter().any(|r| r.trim() == "new"));

    model.set_show_free(true);
    let rows = row_paths(&mut model);
    assert!(rows.iter().any(|r| r.trim() == "old"));
    assert!(rows.iter().any(|r| r.trim() == "new"));
}

#[test]
fn collapse_hides_children_and_expand_restores_them() {
    let mut model = demo_model();
    select_path(&mut model, Section::Instances, "cli");
    model.collapse();
    let rows = row_paths(&mut model);
    assert_eq!(rows[1], "  cli");
    assert_eq!(rows[2], "  daemon");
    assert_eq!(selected_path(&mut model), "cli");
    model.collapse(); // already collapsed: go to the parent
    model.refresh();
    assert_eq!(model.selected_row(), 0);
    model.move_selection(1);
    model.expand();
    assert_eq!(row_paths(&mut model)[2], "    daemon");
}

#[test]
fn events_log_acquire_release_and_death_but_not_the_initial_scan() {
    let model = demo_model();
    let kinds: Vec<(EventKind, String, Option<u32>)> = model
        .events()
        .iter()
        .map(|e| (e.kind, e.key.name().to_string(), e.pid))
        .collect();
    assert_eq!(
        kinds,
        [
            (EventKind::HolderExited, "review".to_string(), Some(4242)),
            (
                EventKind::Released,
                "cli/daemon/new".to_string(),
                Some(1500)
            ),
            (
                EventKind::Acquired,
                "cli/daemon/new".to_string(),
                Some(1500)
            ),
        ]
    );
}

#[test]
fn a_freed_key_says_released_holder_exited_killed_by_locktop_or_freed() {
    // pid 1 runs, the others are gone.
    let mut model = Model::new(Box::new(|pid| Some(pid == 1)));
    model.apply(Delta::Synced { keys: 0, at: t(0) });
    model.note_signalled(3, Some(t(0)));
    model.note_signalled(4, Some(t(99))); // the same PID, another process
    let no_holder = crate::engine::KeyState::bare(Liveness::Live);
    let holders = [
        (1, live(1)),
        (2, live(2)),
        (3, live(3)),
        (4, live(4)),
        (5, no_holder),
    ];
    for (n, state) in holders {
        let key = instance(&format!("a/{n}"));
        model.apply(key_delta(key.clone(), state, None, t(1)));
        model.apply(key_delta(key, free(), Some(Liveness::Live), t(2)));
    }
    let words: Vec<String> = model
        .events()
        .iter()
        .filter(|e| e.kind != EventKind::Acquired)
        .map(|e| e.kind.text().into_owned())
        .collect();
    assert_eq!(
        words,
        [
            "freed",
            "holder exited",
            "killed by locktop",
            "holder exited",
            "released"
        ]
    );
}

#[test]
fn in_flight_to_live_is_an_acquire_and_live_to_own_is_not() {
    let mut model = Model::default();
    model.apply(Delta::Synced { keys: 0, at: t(0) });
    let key = instance("a/b");
    let in_flight = crate::engine::KeyState::bare(Liveness::InFlight);
    model.apply(key_delta(key.clone(), in_flight, None, t(1)));
    model.apply(key_delta(
        key.clone(),
        live(9),
        Some(Liveness::InFlight),
        t(2),
    ));
    let own = held(Liveness::Own, 9, "agent", t(5));
    model.apply(key_delta(key, own, Some(Liveness::Live), t(3)));
    let kinds: Vec<EventKind> = model.events().iter().map(|e| e.kind).collect();
    assert_eq!(kinds, [EventKind::Acquired]);
}

#[test]
fn the_event_log_is_bounded() {
    let mut model = Model::default();
    model.apply(Delta::Synced { keys: 0, at: t(0) });
    let key = instance("a/b");
    for i in 0..(EVENT_LOG_CAPACITY as u64 / 2 + 10) {
        model.apply(key_delta(key.clone(), live(1), Some(Liveness::Free), t(i)));
        model.apply(key_delta(key.clone(), free(), Some(Liveness::Live), t(i)));
    }
    assert_eq!(model.events().len(), EVENT_LOG_CAPACITY);
    assert_eq!(model.events().total(), EVENT_LOG_CAPACITY as u64 + 20);
}

#[test]
fn pause_freezes_the_rows_while_data_keeps_being_applied() {
    let mut model = demo_model();
    let before = row_paths(&mut model);
    model.set_paused(true);
    model.apply(key_delta(instance("zzz/new"), live(5), None, t(601)));
    assert_eq!(row_paths(&mut model), before);
    assert_eq!(model.changes_while_paused(), 1);
    assert_eq!(model.live_data().counts.live, model.data().counts.live + 1);
    model.set_paused(false);
    assert!(row_paths(&mut model).iter().any(|r| r.trim() == "zzz"));
}

#[test]
fn holders_group_keys_by_pid_oldest_first_aih_before_tags() {
    let mut model = demo_model();
    model.refresh();
    let (groups, rows) = model.holders();
    let (groups, rows) = (groups.to_vec(), rows.len());
    let pids: Vec<u32> = groups.iter().map(|g| g.pid).collect();
    assert_eq!(pids, [1201, 1202, 777]);
    assert_eq!(rows, 3 + 4);
    let first: Vec<String> = groups[0]
        .keys
        .iter()
        .map(|&id| model.data().tree.node(id).path.clone())
        .collect();
    assert_eq!(first, ["cli/daemon/abc", "deploy"]);
}

#[test]
fn counts_follow_every_transition() {
    let model = demo_model();
    let counts = model.data().counts;
    assert_eq!(
        (
            counts.live,
            counts.own,
            counts.free,
            counts.in_flight,
            counts.error
        ),
        (3, 1, 4, 1, 1)
    );
    assert_eq!((counts.other, counts.problems), (1, 1));
}

#[test]
fn other_keys_held_by_the_same_pid_are_its_family() {
    let mut model = demo_model();
    let abc = model
        .data()
        .tree
        .find(Section::Instances, "cli/daemon/abc")
        .unwrap();
    let family = model.held_by_same_pids(abc);
    assert_eq!(family.len(), 1);
    let (pid, others) = &family[0];
    assert_eq!(*pid, 1201);
    let names: Vec<&str> = others
        .iter()
        .map(|&id| model.data().tree.node(id).path.as_str())
        .collect();
    assert_eq!(names, ["deploy"]);
    model.refresh();
    let _ = model.rows();
}

#[test]
fn verdict_changes_are_logged_and_what_the_first_scan_found_is_not() {
    use crate::liveness::process::ProcState;
    let words = |model: &Model| -> Vec<String> {
        let events = model.events().iter();
        events
            .map(|e| format!("{} {}", e.kind.text(), e.key.name()))
            .collect()
    };
    let mut model = Model::new(Box::new(|_| Some(true)));
    model.set_materializing(std::time::Duration::from_secs(30));
    let mut stopped = held(Liveness::Live, 10, "agent", t(0));
    stopped.holders[0].state = Some(ProcState::Stopped);
    model.apply(key_delta(tag("found"), stopped.clone(), None, t(0)));
    model.apply(Delta::Synced { keys: 1, at: t(1) });
    model.set_now(t(2));
    assert_eq!(
        words(&model),
        Vec::<String>::new(),
        "found so: not an event"
    );

    // Stopped, then continued: both logged, with the holder's PID.
    model.apply(key_delta(
        instance("a/20"),
        held(Liveness::Live, 20, "agent", t(3)),
        None,
        t(3),
    ));
    model.apply(key_delta(
        tag("agent"),
        held(Liveness::Live, 20, "agent", t(3)),
        None,
        t(3),
    ));
    let mut state = held(Liveness::Live, 20, "agent", t(3));
    state.holders[0].state = Some(ProcState::Stopped);
    model.apply(key_delta(
        tag("agent"),
        state.clone(),
        Some(Liveness::Live),
        t(4),
    ));
    state.holders[0].state = Some(ProcState::Running);
    model.apply(key_delta(
        tag("agent"),
        state.clone(),
        Some(Liveness::Live),
        t(5),
    ));
    // A contender comes, and goes.
    state.waiters = vec![30];
    model.apply(key_delta(
        tag("agent"),
        state.clone(),
        Some(Liveness::Live),
        t(6),
    ));
    state.waiters.clear();
    model.apply(key_delta(tag("agent"), state, Some(Liveness::Live), t(7)));
    // Time alone: a spawn (tags, no AIH) past --materializing-after.
    model.apply(key_delta(
        tag("spawn"),
        held(Liveness::Live, 40, "spawn", t(8)),
        None,
        t(8),
    ));
    model.set_now(t(20));
    assert!(!words(&model).iter().any(|w| w.contains("materializing")));
    assert!(model.set_now(t(40)), "the clock turned a verdict: redraw");
    assert_eq!(
        words(&model),
        [
            "materializing too long spawn",
            "acquired spawn",
            "not contended agent",
            "contended agent",
            "not stopped agent",
            "stopped agent",
            "acquired agent",
            "acquired a/20",
        ]
    );
    assert_eq!(model.events().get(0).and_then(|e| e.pid), Some(40));
    assert_eq!(model.events().get(5).and_then(|e| e.pid), Some(20));
    // Freed: the release is the event, the verdict ends silently.
    model.apply(key_delta(tag("spawn"), free(), Some(Liveness::Live), t(41)));
    assert_eq!(words(&model)[0], "released spawn");
    assert_eq!(words(&model)[1], "materializing too long spawn");
}

/// A free key with nothing more to say is counted, not a node: the tree
/// holds what is held and what was freed in the last `RECENTLY_FREED`;
/// shown, free keys are listed up to `FREE_LISTED`, the first by name,
/// and the filter lists the ones that match; hidden again, they leave.
#[test]
fn stale_keys_are_counted_not_nodes_and_listed_only_when_shown() {
    let mut model = Model::default();
    let count_nodes = |model: &Model| model.data().tree.locks().count();
    for i in 0..5 {
        model.apply(key_delta(tag(&format!("stale {i}")), free(), None, t(0)));
    }
    model.apply(key_delta(tag("busy"), live(7), None, t(0)));
    model.apply(Delta::Synced { keys: 6, at: t(0) });
    assert_eq!(count_nodes(&model), 1, "only the held key is a node");
    assert_eq!((model.data().counts.free, model.data().counts.live), (5, 1));
    assert_eq!(model.data().unlisted_in(Section::Tags), 5);
    model.refresh();
    assert_eq!(model.flat().tallies[Section::Tags as usize].total, 6);

    // Freed: listed (a node) for RECENTLY_FREED, then stale.
    model.apply(key_delta(tag("busy"), free(), Some(Liveness::Live), t(10)));
    assert_eq!(count_nodes(&model), 1, "recently freed stays");
    model.set_now(t(10) + RECENTLY_FREED + std::time::Duration::from_secs(1));
    assert_eq!(count_nodes(&model), 0, "aged out of the tree");
    assert_eq!(model.data().counts.free, 6);

    // Shown: every free key listed (fewer than FREE_LISTED), by name.
    model.set_show_free(true);
    assert_eq!(count_nodes(&model), 6);
    assert_eq!(model.data().unlisted_free(), 0);
    assert_eq!(
        model.data().counts.free,
        6,
        "listing moves, never counts twice"
    );
    model.set_show_free(false);
    assert_eq!(count_nodes(&model), 0);

    // Removed while stale: uncounted.
    model.apply(Delta::Removed {
        key: tag("stale 0"),
        previous: Liveness::Free,
        at: t(30),
    });
    assert_eq!(model.data().counts.free, 5);
    assert_eq!(model.data().unlisted_in(Section::Tags), 5);
}

/// Past `FREE_LISTED`, showing free keys lists the first ones by name and
/// the rest stay counted; filtering lists the ones that match.
#[test]
fn past_the_listing_cap_the_filter_finds_a_free_key() {
    let mut model = Model::default();
    let total = FREE_LISTED + 10;
    for i in 0..total {
        model.apply(key_delta(tag(&format!("k{i:06}")), free(), None, t(0)));
    }
    model.set_show_free(true);
    assert_eq!(model.data().unlisted_free(), 10);
    let listed = |model: &Model, name: &str| model.data().tree.find(Section::Tags, name).is_some();
    assert!(listed(&model, "k000000"), "the first by name are listed");
    assert!(
        !listed(&model, &format!("k{:06}", total - 1)),
        "the last is not"
    );
    model.set_show_free(false);
    model.set_show_free(true);
    model.set_filter(&format!("k{:06}", total - 1));
    model.set_show_free(false);
    model.set_show_free(true);
    assert!(
        listed(&model, &format!("k{:06}", total - 1)),
        "shown with a filter, the match is listed first"
    );
}

/// Past `STALE_REMEMBERED`, stale keys are counted, not named: the
/// counts stay exact as an unnamed one is taken, freed and removed (the
/// engine's `previous` says it was stale).
#[test]
fn stale_keys_past_the_remembered_ones_are_counted_exactly() {
    let mut model = Model::default();
    let total = super::data::STALE_REMEMBERED + 10;
    for i in 0..total {
        model.apply(key_delta(tag(&format!("k{i:06}")), free(), None, t(0)));
    }
    model.apply(Delta::Synced {
        keys: total,
        at: t(0),
    });
    assert_eq!(model.data().counts.free, total);
    let last = tag(&format!("k{:06}", total - 1));
    model.apply(key_delta(last.clone(), live(9), Some(Liveness::Free), t(1)));
    assert_eq!(
        (model.data().counts.free, model.data().counts.live),
        (total - 1, 1)
    );
    model.apply(key_delta(last.clone(), free(), Some(Liveness::Live), t(2)));
    model.set_now(t(2) + RECENTLY_FREED + std::time::Duration::from_secs(1));
    assert_eq!(model.data().tree.locks().count(), 0);
    model.apply(Delta::Removed {
        key: last,
        previous: Liveness::Free,
        at: t(20),
    });
    assert_eq!(model.data().counts.free, total - 1);
    assert_eq!(model.data().unlisted_free(), total - 1);
}

/// The verdict events of `model`, newest first, as `kind key`.
fn verdict_words(model: &Model) -> Vec<String> {
    model
        .events()
        .iter()
        .filter(|e| matches!(e.kind, EventKind::Flagged(_) | EventKind::Cleared(_)))
        .map(|e| format!("{} {}", e.kind.text(), e.key.name()))
        .collect()
}

/// An agent (instance + tag, held for minutes) exits: the engine frees
/// its instance, then its tag, one delta after the other, with the
/// monitor's clock ticking in between. Between the two the tag's holder
/// holds tags and no AIH — a spawn, for one delta — but that is a role it
/// is only dropping: as `watch` does, the tag is judged again only once
/// the burst has settled, and by then it is free. No `⚠ materializing
/// too long` is logged for a suspect that never was.
#[test]
fn an_agent_exiting_with_an_instance_and_a_tag_logs_no_materializing_suspect() {
    let ms = |n| std::time::Duration::from_millis(n);
    let mut model = Model::new(Box::new(|_| Some(false)));
    model.set_materializing(std::time::Duration::from_secs(30));
    let agent = held(Liveness::Live, 7, "agent --aih cli/a --tag t", t(0));
    model.apply(key_delta(instance("cli/a"), agent.clone(), None, t(0)));
    model.apply(key_delta(tag("t"), agent, None, t(0)));
    model.apply(Delta::Synced { keys: 2, at: t(1) });
    model.set_now(t(180));
    let freed = crate::engine::KeyState::bare(Liveness::Free);
    let exit = t(180) + ms(1);
    model.apply(key_delta(
        instance("cli/a"),
        freed.clone(),
        Some(Liveness::Live),
        exit,
    ));
    // The event loop draws between bursts: the clock moves here.
    model.set_now(exit + ms(1));
    model.apply(key_delta(
        tag("t"),
        freed,
        Some(Liveness::Live),
        exit + ms(2),
    ));
    model.set_now(exit + ms(100));
    model.set_now(t(200));
    assert_eq!(verdict_words(&model), Vec::<String>::new());
    let words: Vec<String> = model
        .events()
        .iter()
        .map(|e| e.kind.text().into())
        .collect();
    assert_eq!(words, ["holder exited", "holder exited"], "only the exits");
}

/// The other side of settling: a change a burst does cause to its
/// holder's other keys is logged once the burst has settled — when the
/// clock passes [`SETTLE_AFTER`] after it, or when the next change comes
/// later than that, whichever is first (so a replay, which moves the
/// clock only to each change, logs the same).
#[test]
fn a_spawn_claiming_its_aih_ends_its_tags_verdict_once_the_burst_has_settled() {
    use crate::operate::held::SETTLE_AFTER;
    let ms = |n| std::time::Duration::from_millis(n);
    for by_clock in [true, false] {
        let mut model = Model::new(Box::new(|_| Some(true)));
        model.set_materializing(std::time::Duration::from_secs(30));
        let spawn = held(Liveness::Live, 7, "spawn --tag t", t(0));
        model.apply(key_delta(tag("t"), spawn, None, t(0)));
        model.apply(Delta::Synced { keys: 1, at: t(1) });
        model.set_now(t(40));
        assert_eq!(verdict_words(&model), ["materializing too long t"]);
        let agent = held(Liveness::Live, 7, "spawn --tag t", t(50));
        model.apply(key_delta(instance("cli/a"), agent, None, t(50)));
        model.set_now(t(50) + ms(10));
        assert_eq!(verdict_words(&model).len(), 1, "still settling");
        assert_eq!(model.settle_due(), Some(t(50) + SETTLE_AFTER));
        if by_clock {
            assert!(model.settle(t(50) + SETTLE_AFTER));
        } else {
            let other = held(Liveness::Live, 8, "agent", t(60));
            model.apply(key_delta(tag("other"), other, None, t(60)));
        }
        assert_eq!(
            verdict_words(&model),
            ["not materializing too long t", "materializing too long t"],
            "by the clock: {by_clock}"
        );
        let ended = model
            .events()
            .iter()
            .find(|e| e.kind == EventKind::Cleared("materializing too long"));
        assert_eq!(ended.map(|e| e.at), Some(t(50) + SETTLE_AFTER));
    }
}

/// A stopped holder is killed while another process waits for its tag,
/// which takes it at once (one delta: held by the one, then by the
/// other): the log says the first hold ended and the second began, and
/// the `stopped` verdict that ended is said of the process that was
/// stopped — not of the new holder, which never was.
#[test]
fn a_tag_handed_over_by_a_killed_stopped_holder_logs_its_end_and_the_new_hold() {
    use crate::liveness::WaitKind;
    use crate::liveness::process::ProcState;
    let mut model = Model::new(Box::new(|pid| Some(pid != 2194)));
    let mut stopped = held(Liveness::Live, 2194, "agent --tag c", t(0));
    stopped.holders[0].state = Some(ProcState::Stopped);
    let waited = waited_by(stopped, 2322, WaitKind::Contender);
    model.apply(key_delta(tag("c"), waited, None, t(0)));
    model.apply(Delta::Synced { keys: 1, at: t(1) });
    model.settle(t(1));
    let taken = held(Liveness::Live, 2322, "agent --tag d", t(5));
    model.apply(key_delta(tag("c"), taken, Some(Liveness::Live), t(5)));
    model.settle(t(5));
    let events: Vec<String> = model
        .events()
        .iter()
        .map(|e| format!("{} {:?} {}", e.kind.text(), e.pid, e.key.name()))
        .collect();
    assert!(
        events.contains(&"holder exited Some(2194) c".to_string()),
        "{events:?}"
    );
    assert!(
        events.contains(&"acquired Some(2322) c".to_string()),
        "{events:?}"
    );
    assert!(
        events.contains(&"not stopped Some(2194) c".to_string()),
        "{events:?}"
    );
}
