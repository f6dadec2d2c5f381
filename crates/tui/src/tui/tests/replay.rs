//! The monitor on a recording (`locktop replay`), on a `TestBackend`: a
//! journal written by the real writer at fixed times, played, stepped,
//! jumped; every pane as live at the cursor; nothing that acts on a live
//! process is possible.

use std::path::PathBuf;
use std::time::SystemTime;

use crossterm::event::KeyCode;

use crate::engine::fixtures::{STATE, free, held, instance, key_delta, t, tag};
use crate::engine::{Delta, KeyState, Liveness, WatcherHealth};
use crate::journal::{Journal, JournalSet, Output, Recording};
use crate::liveness::probe::ProbeMode;
use crate::tui::replay::Player;
use crate::tui::{App, Theme};

use super::support::{press, render};

/// The recorder's clock: checkpoints and health lines at `t(0)`.
fn clock() -> SystemTime {
    t(0)
}

/// A recording: a/b and tag x taken by pid 7 at t(10); tag y taken by
/// pid 8 with pid 9 waiting at t(20); pid 7's keys freed (it exited) at
/// t(30). Its recorder is killed after (no end line).
fn recording(dir: &std::path::Path) -> PathBuf {
    recording_ended(dir, false)
}

/// [`recording`], its recorder stopped cleanly (an end line) when
/// `cleanly`, else killed.
fn recording_ended(dir: &std::path::Path, cleanly: bool) -> PathBuf {
    let path = dir.join("journal.jsonl");
    let mut journal = Journal::create(
        Output::File {
            path: path.clone(),
            max_size: None,
            keep: 1,
        },
        Recording {
            state_dir: PathBuf::from(STATE),
            probe: ProbeMode::LockFree,
        },
    )
    .unwrap()
    .with_clock(clock)
    .with_pid_alive(|_| false);
    let seven = |since| held(Liveness::Live, 7, "agent --aih a/b --tag x", since);
    let mut waited = held(Liveness::Live, 8, "agent --tag y", t(20));
    waited.waiters = vec![9];
    let deltas = [
        Delta::Health(WatcherHealth::Watching),
        key_delta(tag("x"), free(), None, t(0)),
        Delta::Synced { keys: 1, at: t(0) },
        key_delta(instance("a/b"), seven(t(10)), None, t(10)),
        key_delta(tag("x"), seven(t(10)), Some(Liveness::Free), t(10)),
        key_delta(tag("y"), waited, None, t(20)),
        key_delta(instance("a/b"), free(), Some(Liveness::Live), t(30)),
        key_delta(
            tag("x"),
            KeyState::bare(Liveness::Free),
            Some(Liveness::Live),
            t(30),
        ),
    ];
    for delta in deltas {
        journal.record(delta).unwrap();
    }
    if cleanly {
        journal.finish().unwrap();
    }
    path
}

fn player() -> (Player, App, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let path = recording(dir.path());
    let set = JournalSet::open(&[path]).unwrap();
    let (player, mut app) = Player::open(set, Theme::color()).unwrap();
    app.set_replay_status(player.status().clone());
    (player, app, dir)
}

fn text(app: &mut App) -> String {
    render(app, 100, 24).backend().to_string()
}

/// Presses `code` and lets the player do what it asked.
fn key(player: &mut Player, app: &mut App, code: KeyCode) {
    press(app, code);
    for request in app.take_replay_requests() {
        player.handle(app, request).unwrap();
    }
}

#[test]
fn it_opens_at_the_first_complete_view_saying_replay_and_the_time() {
    let (_player, mut app, _dir) = player();
    let screen = text(&mut app);
    assert!(screen.contains("REPLAY"), "{screen}");
    assert!(screen.contains("2023-11-14T22:13:20.000Z"), "{screen}");
    assert!(screen.contains("0 ● live"), "{screen}");
}

#[test]
fn stepping_moves_to_each_change_and_back() {
    let (mut player, mut app, _dir) = player();
    key(&mut player, &mut app, KeyCode::Char('>'));
    assert_eq!(player.status().cursor, t(10));
    let screen = text(&mut app);
    assert!(
        screen.contains("2 ● live") && screen.contains("7"),
        "{screen}"
    );
    key(&mut player, &mut app, KeyCode::Char('>'));
    assert_eq!(player.status().cursor, t(20));
    key(&mut player, &mut app, KeyCode::Char('>'));
    assert_eq!(player.status().cursor, t(30));
    key(&mut player, &mut app, KeyCode::Char('>'));
    assert_eq!(
        player.status().cursor,
        t(30),
        "nothing after the last change"
    );
    assert!(app.message().is_some_and(|m| m.contains("last change")));
    key(&mut player, &mut app, KeyCode::Char('<'));
    assert_eq!(player.status().cursor, t(20));
    let screen = text(&mut app);
    assert!(screen.contains("3 ● live"), "{screen}");
    // The host's name is this machine's: not part of the snapshot.
    let host = player.status().host.clone();
    let screen = format!("{}", render(&mut app, 100, 24).backend())
        .replace(&format!(" {host} recorded"), " HOST recorded");
    insta::assert_snapshot!(screen);
}

#[test]
fn a_typed_time_moves_the_cursor_there_and_the_ends_are_a_key_away() {
    let (mut player, mut app, _dir) = player();
    key(&mut player, &mut app, KeyCode::Char('t'));
    for c in "+25s".chars() {
        press(&mut app, KeyCode::Char(c));
    }
    key(&mut player, &mut app, KeyCode::Enter);
    assert_eq!(player.status().cursor, t(25));
    assert!(text(&mut app).contains("3 ● live"));
    key(&mut player, &mut app, KeyCode::Char('t'));
    for c in "yesterday".chars() {
        press(&mut app, KeyCode::Char(c));
    }
    key(&mut player, &mut app, KeyCode::Enter);
    assert_eq!(player.status().cursor, t(25));
    assert!(app.message().is_some_and(|m| m.contains("RFC 3339")));
    key(&mut player, &mut app, KeyCode::Char('}'));
    assert_eq!(player.status().cursor, t(30));
    // The events pane: what happened up to the cursor, as live.
    press(&mut app, KeyCode::Char('3'));
    let screen = text(&mut app);
    assert!(screen.contains("holder exited"), "{screen}");
    key(&mut player, &mut app, KeyCode::Char('{'));
    assert_eq!(player.status().cursor, t(0));
    assert!(!text(&mut app).contains("holder exited"));
}

/// Reported from the field: `t` to a time before the recording moved
/// to its start without a word.
#[test]
fn a_typed_time_before_the_recording_moves_to_its_start_and_says_so() {
    let (mut player, mut app, _dir) = player();
    key(&mut player, &mut app, KeyCode::Char('>'));
    for typed in ["2000-01-01T01:00:00+01:00", "-1h"] {
        key(&mut player, &mut app, KeyCode::Char('t'));
        for c in typed.chars() {
            press(&mut app, KeyCode::Char(c));
        }
        key(&mut player, &mut app, KeyCode::Enter);
        assert_eq!(player.status().cursor, t(0), "{typed}");
        let screen = text(&mut app);
        assert!(
            screen.contains("before the recording: at its start, 2023-11-14T22:13:20.000Z"),
            "{typed}: {screen}"
        );
    }
    assert!(
        app.message()
            .is_some_and(|m| m.starts_with("2023-11-14T21:13:20.000Z is before")),
        "{:?}",
        app.message()
    );
    // A time inside the recording says nothing of the kind.
    key(&mut player, &mut app, KeyCode::Char('t'));
    for c in "+5s".chars() {
        press(&mut app, KeyCode::Char(c));
    }
    key(&mut player, &mut app, KeyCode::Enter);
    assert_eq!(player.status().cursor, t(5));
    assert!(!text(&mut app).contains("before the recording"));
}

#[test]
fn playing_moves_the_cursor_at_its_speed_and_stops_at_the_end() {
    let (mut player, mut app, _dir) = player();
    key(&mut player, &mut app, KeyCode::Char('+'));
    key(&mut player, &mut app, KeyCode::Char('+'));
    assert_eq!(player.status().speed, 5.0);
    key(&mut player, &mut app, KeyCode::Char(' '));
    assert!(player.status().playing);
    player
        .play_frame(&mut app, std::time::Duration::from_secs(3))
        .unwrap();
    assert_eq!(player.status().cursor, t(15));
    assert!(text(&mut app).contains("2 ● live"));
    player
        .play_frame(&mut app, std::time::Duration::from_secs(60))
        .unwrap();
    assert_eq!(player.status().cursor, t(30));
    assert!(!player.status().playing);
}

#[test]
fn at_the_end_of_a_recording_with_no_end_line_the_header_says_so_never_of_one_stopped_cleanly() {
    for cleanly in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let set = JournalSet::open(&[recording_ended(dir.path(), cleanly)]).unwrap();
        let (mut player, mut app) = Player::open(set, Theme::color()).unwrap();
        app.set_replay_status(player.status().clone());
        // Before its last line: nothing to say.
        key(&mut player, &mut app, KeyCode::Char('>'));
        key(&mut player, &mut app, KeyCode::Char('>'));
        assert_eq!(player.status().cursor, t(20));
        let screen = text(&mut app);
        assert!(!screen.contains("NO END LINE"), "{screen}");
        // At it (its millisecond may have had lines that were lost).
        key(&mut player, &mut app, KeyCode::Char('}'));
        assert_eq!(player.status().cursor, t(30));
        let screen = text(&mut app);
        let said = screen.contains("NO END LINE: what followed it is unknown");
        assert_eq!(said, !cleanly, "stopped cleanly: {cleanly}\n{screen}");
    }
}

#[test]
fn nothing_live_can_be_done_and_a_check_answers_from_the_recording() {
    let (mut player, mut app, _dir) = player();
    key(&mut player, &mut app, KeyCode::Char('>'));
    for code in [KeyCode::Char('n'), KeyCode::Char('K'), KeyCode::Char('r')] {
        press(&mut app, code);
        assert!(
            app.message().is_some_and(|m| m.contains("replay")),
            "{:?}",
            app.message()
        );
        assert!(!app.has_overlay());
    }
    // The tag x row: busy, held by pid 7 (who also held a/b), from the
    // recording at the cursor.
    press(&mut app, KeyCode::Char('/'));
    for c in "x".chars() {
        press(&mut app, KeyCode::Char(c));
    }
    press(&mut app, KeyCode::Enter);
    press(&mut app, KeyCode::Char('c'));
    let screen = render(&mut app, 120, 30).backend().to_string();
    assert!(
        screen.contains("from the recording at 2023-11-14T22:13:30"),
        "{screen}"
    );
    assert!(
        screen.contains("busy") && screen.contains("pid 7"),
        "{screen}"
    );
    assert!(screen.contains(r#"instance "a/b""#), "{screen}");
    press(&mut app, KeyCode::Esc);
    press(&mut app, KeyCode::Char('?'));
    let help = render(&mut app, 100, 40).backend().to_string();
    for binding in crate::tui::BINDINGS
        .iter()
        .filter(|b| b.group == crate::tui::Group::Replay)
    {
        assert!(help.contains(binding.description), "{help}");
    }
}

/// The key the tree's selection is on.
fn selected(app: &App) -> Option<(crate::model::Section, String)> {
    app.model().selection().cloned()
}

/// `}` moves the cursor, not the selection: the tree still follows the
/// most urgent key, so the details pane is on the stuck tag the header
/// names at the end; once the operator moves away, `u` comes back to it.
#[test]
fn after_the_end_key_the_details_are_on_the_stuck_tag_and_u_follows_it_again() {
    use crate::model::Section;
    let (mut player, mut app, _dir) = player();
    text(&mut app);
    key(&mut player, &mut app, KeyCode::Char('}'));
    let screen = text(&mut app);
    assert!(screen.contains("stuck: tag y"), "{screen}");
    assert_eq!(
        selected(&app),
        Some((Section::Tags, "y".into())),
        "{screen}"
    );
    assert!(
        screen.contains("│holder   8 agent --tag y"),
        "the details are on it:\n{screen}"
    );
    key(&mut player, &mut app, KeyCode::Char('g'));
    text(&mut app);
    assert_ne!(selected(&app), Some((Section::Tags, "y".into())));
    key(&mut player, &mut app, KeyCode::Char('{'));
    key(&mut player, &mut app, KeyCode::Char('}'));
    text(&mut app);
    assert_ne!(
        selected(&app),
        Some((Section::Tags, "y".into())),
        "moved away: the selection stays where the operator put it"
    );
    assert!(
        text(&mut app).contains("u urgent"),
        "the footer names the key"
    );
    key(&mut player, &mut app, KeyCode::Char('u'));
    text(&mut app);
    assert_eq!(selected(&app), Some((Section::Tags, "y".into())));
    // It follows again: back at the start nothing is urgent, and at the
    // end the stuck tag is selected with no key pressed in between.
    key(&mut player, &mut app, KeyCode::Char('{'));
    text(&mut app);
    key(&mut player, &mut app, KeyCode::Char('}'));
    text(&mut app);
    assert_eq!(selected(&app), Some((Section::Tags, "y".into())));
}

/// The recording's lines (each with its newline).
fn lines_of(path: &std::path::Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap()
        .split_inclusive('\n')
        .map(str::to_string)
        .collect()
}

#[test]
fn a_missing_line_makes_the_header_say_unsure_never_a_sure_state() {
    let dir = tempfile::tempdir().unwrap();
    let path = recording(dir.path());
    // Tag y's line (t(20)) is lost: the lines after it follow a gap.
    let lines: Vec<String> = lines_of(&path)
        .into_iter()
        .filter(|line| !line.contains("\"name\":\"y\""))
        .collect();
    std::fs::write(&path, lines.concat()).unwrap();
    let set = JournalSet::open(&[path]).unwrap();
    let (mut player, mut app) = Player::open(set, Theme::color()).unwrap();
    app.set_replay_status(player.status().clone());
    // Before the loss (at the start): sure. (At t(10) it is not: the
    // lost line may be of t(10) too.)
    assert_eq!(player.status().cursor, t(0));
    assert!(player.status().doubt.is_none());
    assert!(!text(&mut app).contains("UNSURE"));
    // After it: said, with where and up to when the state is known.
    key(&mut player, &mut app, KeyCode::Char('}'));
    let doubt = player
        .status()
        .doubt
        .clone()
        .expect("unsure after the loss");
    assert!(doubt.contains("missing line"), "{doubt}");
    let screen = render(&mut app, 200, 24).backend().to_string();
    assert!(screen.contains("UNSURE: a missing line"), "{screen}");
}

#[test]
fn a_crafted_host_shows_its_control_characters_as_symbols() {
    let dir = tempfile::tempdir().unwrap();
    let path = recording(dir.path());
    let mut lines = lines_of(&path);
    // An unchecked header (as an older writer's) naming a hostile host.
    let mut header: serde_json::Value = serde_json::from_str(&lines[0]).unwrap();
    header["journal"]["host"] = "evil\u{1b}[2Jhost".into();
    header["journal"]["checked_lines"] = false.into();
    let object = header.as_object_mut().unwrap();
    object.remove("n");
    object.remove("crc");
    lines[0] = format!("{}\n", serde_json::to_string(&header).unwrap());
    std::fs::write(&path, lines.concat()).unwrap();
    let set = JournalSet::open(&[path]).unwrap();
    let (player, mut app) = Player::open(set, Theme::color()).unwrap();
    app.set_replay_status(player.status().clone());
    let screen = render(&mut app, 160, 24).backend().to_string();
    assert!(screen.contains("evil␛[2Jhost"), "{screen}");
}
