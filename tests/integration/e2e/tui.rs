//! The real binary in a real pseudo-terminal, read the way a person reads
//! it (a vt100 screen): holders appear with their PIDs, a SIGKILLed holder's
//! row turns free, the panes switch, and every way out restores the
//! terminal. Timeouts are correctness bounds; speed is in the benchmarks.

use std::time::Duration;

use crate::common;
use crate::common::pty::{EXIT_TIMEOUT, Tui, row_of};
use crate::common::{Holder, state_in_tempdir};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

/// Left the alternate screen, showed the cursor, released the mouse.
fn assert_terminal_restored(tui: &Tui) {
    assert!(!tui.on_alternate_screen(), "still on the alternate screen");
    let raw = String::from_utf8_lossy(&tui.raw()).into_owned();
    let left = raw.rfind("\x1b[?1049l").expect("left the alternate screen");
    let entered = raw
        .rfind("\x1b[?1049h")
        .expect("entered the alternate screen");
    assert!(
        left > entered,
        "the last alternate-screen switch was not a leave"
    );
    let shown = raw.rfind("\x1b[?25h").expect("cursor shown again");
    assert!(
        shown > entered,
        "the cursor was not shown after the TUI ran"
    );
}

#[test]
fn sigkilled_holder_turns_free_and_q_restores_the_terminal() {
    let (_tmp, state) = state_in_tempdir();
    let mut doomed = Holder::hold(
        &state,
        &["--aih", "cli/daemon/doomed-1", "--tag", "stuck tag"],
    );
    let survivor = Holder::hold(&state, &["--group", "team alpha"]);
    let mut tui = Tui::spawn(&state, &[], 80, 24);

    let doomed_pid = doomed.pid().to_string();
    let screen = tui.wait_for("both holders live with their PIDs", |screen| {
        row_of(screen, "doomed-1")
            .is_some_and(|row| row.contains("live") && row.contains(&doomed_pid))
            && row_of(screen, "team alpha")
                .is_some_and(|row| row.contains(&survivor.pid().to_string()))
    });
    assert!(
        row_of(&screen, "stuck tag").is_some_and(|row| row.contains("live")),
        "{screen}"
    );

    doomed.kill();
    tui.wait_for("the killed holder's rows turn free", |screen| {
        row_of(screen, "doomed-1").is_some_and(|row| row.contains("free"))
            && row_of(screen, "stuck tag").is_some_and(|row| row.contains("free"))
    });
    let screen = tui.screen();
    assert!(
        row_of(&screen, "team alpha").is_some_and(|row| row.contains("live")),
        "the other holder must stay live:\n{screen}"
    );

    tui.send(b"q");
    assert_eq!(tui.wait_exit(EXIT_TIMEOUT), Some(0));
    assert_terminal_restored(&tui);
}

#[test]
fn panes_switch_and_the_event_log_records_the_holders_exit() {
    let (_tmp, state) = state_in_tempdir();
    let mut doomed = Holder::hold(&state, &["--tag", "relocating"]);
    let mut tui = Tui::spawn(&state, &[], 80, 24);
    tui.wait_for("the holder", |screen| {
        row_of(screen, "relocating").is_some_and(|row| row.contains("live"))
    });
    doomed.kill();
    tui.wait_for("the row turns free", |screen| {
        row_of(screen, "relocating").is_some_and(|row| row.contains("free"))
    });

    tui.send(b"3");
    let pid = doomed.pid().to_string();
    // SIGKILLed by the test, not by locktop: locktop only knows the PID
    // is gone.
    tui.wait_for("the holder's exit in the event log", |screen| {
        row_of(screen, "relocating")
            .is_some_and(|row| row.contains("holder exited") && row.contains(&pid))
    });

    tui.send(b"?");
    tui.wait_for("the help overlay", |screen| screen.contains("Help"));
    tui.send(b"?");
    tui.send(b"q");
    assert_eq!(tui.wait_exit(EXIT_TIMEOUT), Some(0));
    assert_terminal_restored(&tui);
}

#[test]
fn sigterm_restores_the_terminal() {
    let (_tmp, state) = state_in_tempdir();
    let mut tui = Tui::spawn(&state, &[], 80, 24);
    tui.wait_for("the tree", |screen| screen.contains("Instances"));
    kill(Pid::from_raw(tui.pid() as i32), Signal::SIGTERM).unwrap();
    assert!(
        tui.wait_exit(EXIT_TIMEOUT).is_some(),
        "SIGTERM must end the monitor"
    );
    assert_terminal_restored(&tui);
}

#[test]
fn a_tiny_terminal_and_a_resize_never_break_it() {
    let (_tmp, state) = state_in_tempdir();
    let _holder = Holder::hold(&state, &["--tag", "small"]);
    let mut tui = Tui::spawn(&state, &[], 40, 10);
    tui.wait_for("the key at 40x10", |screen| screen.contains("small"));
    tui.resize(80, 24);
    tui.wait_for("a redraw at 80x24", |screen| {
        row_of(screen, "small").is_some_and(|row| row.contains("live"))
    });
    tui.resize(20, 5);
    std::thread::sleep(Duration::from_millis(300));
    tui.send(b"j");
    tui.send(b"q");
    assert_eq!(tui.wait_exit(EXIT_TIMEOUT), Some(0), "no panic at 20x5");
    assert_terminal_restored(&tui);
}

#[test]
fn a_bad_state_dir_is_a_message_not_a_crash() {
    let (tmp, _state) = state_in_tempdir();
    let file = tmp.path().join("not-a-dir");
    std::fs::write(&file, b"x").unwrap();
    let mut tui = Tui::spawn(&file, &[], 80, 24);
    // A file where the state dir should be: one line, exit 2, and the
    // terminal never switched (nothing to restore).
    assert_eq!(tui.wait_exit(EXIT_TIMEOUT), Some(2));
    let raw = String::from_utf8_lossy(&tui.raw()).into_owned();
    assert!(raw.contains("is not a directory"), "{raw}");
    assert!(!raw.contains("panicked"), "{raw}");
    assert_terminal_restored_or_never_entered(&tui);
}

fn assert_terminal_restored_or_never_entered(tui: &Tui) {
    let raw = String::from_utf8_lossy(&tui.raw()).into_owned();
    if raw.contains("\x1b[?1049h") {
        assert_terminal_restored(tui);
    }
}

#[test]
fn without_a_terminal_the_monitor_says_so_in_one_line() {
    let (_tmp, state) = state_in_tempdir();
    let out = common::run_locktop(&state, &[]);
    assert_eq!(out.code(), 2, "{}", out.stderr);
    assert_eq!(out.stderr.lines().count(), 1, "{}", out.stderr);
    assert!(out.stderr.contains("needs a terminal"), "{}", out.stderr);
    assert!(
        out.stdout.is_empty(),
        "nothing drawn on a pipe: {:?}",
        out.stdout
    );
}

/// The default state dir (no `--state-dir`) that does not exist yet —
/// ObjectiveAI never ran on this machine — is waited for, and the header
/// says so plainly: not a quiet, healthy system. When ObjectiveAI makes
/// it, and an agent takes a lock, the monitor shows the agent.
#[test]
fn a_default_state_dir_that_does_not_exist_yet_is_waited_for_and_said() {
    let _serial = common::serial_blocking();
    let tmp = tempfile::tempdir().expect("tempdir");
    let objectiveai = tmp.path().join("objectiveai");
    let objectiveai_text = objectiveai.to_str().expect("UTF-8 temp path");
    let mut tui = Tui::spawn_plain_with_env(
        &[],
        160,
        30,
        &[
            ("OBJECTIVEAI_DIR", objectiveai_text),
            ("OBJECTIVEAI_STATE", "default"),
        ],
    );
    tui.wait_for("the header saying the state dir is missing", |screen| {
        screen.contains("NO STATE DIR yet")
    });
    let state = objectiveai.join("state").join("default");
    std::fs::create_dir_all(&state).expect("ObjectiveAI makes its state dir");
    tui.wait_for("the header waiting for the locks dir", |screen| {
        screen.contains("waiting for locks dir") && !screen.contains("NO STATE DIR")
    });
    let holder = Holder::hold(&state, &["--tag", "appeared"]);
    let pid = holder.pid().to_string();
    tui.wait_for("the holder's row", |screen| {
        row_of(screen, "appeared").is_some_and(|row| row.contains("live")) && screen.contains(&pid)
    });
    tui.send(b"q");
    assert_eq!(tui.wait_exit(EXIT_TIMEOUT), Some(0));
    assert_terminal_restored(&tui);
}
