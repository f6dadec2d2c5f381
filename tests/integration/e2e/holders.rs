//! Test holders driven through the real TUI in a pseudo-terminal, as an
//! operator would: the `n` form, the test-holders pane (4), release (r),
//! wait mode behind a blocker, the in-process gate refusing a second
//! holder, validation of what is typed, and no orphan after a SIGKILL.

use std::time::Duration;

use crate::common::pty::{EXIT_TIMEOUT, Tui, row_of};
use crate::common::{Holder, alive, state_in_tempdir, wait_all_gone};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

const TAB: &[u8] = b"\t";
const UP: &[u8] = b"\x1b[A";
const ENTER: &[u8] = b"\r";

/// Opens the form and fills a GROUP family `tags`; `child` / `wait` flip
/// the placement and mode choices; then submits.
pub(super) fn hold_group(tui: &mut Tui, tags: &str, child: bool, wait: bool) {
    tui.send(b"n");
    tui.wait_for("the hold form", |screen| screen.contains("Hold a family"));
    tui.send(tags.as_bytes());
    tui.send(TAB);
    if child {
        tui.send(b" ");
    }
    tui.send(TAB);
    if wait {
        tui.send(b" ");
    }
    tui.send(ENTER);
    tui.wait_for("the form to close", |screen| {
        !screen.contains("Hold a family")
    });
}

/// The PID shown on the test-holders row of `tag` in state `word`.
pub(super) fn holder_pid(tui: &Tui, tag: &str, word: &str) -> u32 {
    let screen = tui.wait_for(&format!("test holder of {tag} {word}"), |screen| {
        screen
            .lines()
            .any(|line| line.contains(tag) && line.contains(word))
    });
    let row = screen
        .lines()
        .find(|line| line.contains(tag) && line.contains(word))
        .unwrap();
    row.split_whitespace()
        .filter_map(|word| word.parse::<u32>().ok())
        .find(|pid| *pid > 1 && std::path::Path::new(&format!("/proc/{pid}")).exists())
        .unwrap_or_else(|| panic!("no live PID on the row {row:?}"))
}

#[test]
fn child_holder_from_the_form_goes_live_with_its_pid_and_release_frees_it() {
    let (_tmp, state) = state_in_tempdir();
    let mut tui = Tui::spawn(&state, &[], 100, 30);
    tui.wait_for("the tree", |screen| screen.contains("Instances"));
    hold_group(&mut tui, "alpha", true, false);

    let pid = holder_pid(&tui, "alpha", "holding");
    assert_ne!(pid, tui.pid(), "a child holder is another process");
    tui.send(b"1");
    let pid_text = pid.to_string();
    tui.wait_for("alpha held by the child, as our own", |screen| {
        row_of(screen, "alpha").is_some_and(|row| row.contains("own") && row.contains(&pid_text))
    });

    tui.send(b"4");
    tui.wait_for("the test holders pane", |screen| screen.contains("holding"));
    tui.send(b"r");
    holder_pid_gone_or_exited(&tui, "alpha");
    tui.send(b"1");
    tui.wait_for("alpha free after release", |screen| {
        row_of(screen, "alpha").is_some_and(|row| row.contains("free"))
    });
    assert!(!alive(pid), "the released child exited");

    tui.send(b"q");
    assert_eq!(tui.wait_exit(EXIT_TIMEOUT), Some(0));
}

fn holder_pid_gone_or_exited(tui: &Tui, tag: &str) {
    tui.wait_for(&format!("test holder of {tag} exited"), |screen| {
        screen
            .lines()
            .any(|line| line.contains(tag) && line.contains("exited"))
    });
}

#[test]
fn wait_mode_holder_holds_once_the_blocker_is_sigkilled() {
    let (_tmp, state) = state_in_tempdir();
    let mut blocker = Holder::hold(&state, &["--tag", "contested"]);
    let mut tui = Tui::spawn(&state, &[], 100, 30);
    tui.wait_for("the blocker", |screen| {
        row_of(screen, "contested").is_some_and(|row| row.contains("live"))
    });
    hold_group(&mut tui, "contested", true, true);

    let blocker_pid = blocker.pid().to_string();
    tui.wait_for("waiting on the blocker's PID", |screen| {
        screen.contains("waiting") && screen.contains(&blocker_pid)
    });
    blocker.kill();
    let pid = holder_pid(&tui, "contested", "holding");
    assert_ne!(pid.to_string(), blocker_pid);

    tui.send(b"q");
    assert_eq!(tui.wait_exit(EXIT_TIMEOUT), Some(0));
}

#[test]
fn a_second_in_process_holder_of_a_held_key_is_refused() {
    let (_tmp, state) = state_in_tempdir();
    let mut tui = Tui::spawn(&state, &[], 100, 30);
    tui.wait_for("the tree", |screen| screen.contains("Instances"));
    hold_group(&mut tui, "solo", false, false);
    tui.wait_for("the first in-process holder holding", |screen| {
        screen
            .lines()
            .any(|l| l.contains("solo") && l.contains("holding"))
    });
    hold_group(&mut tui, "solo", false, false);
    tui.wait_for("the second refused as busy", |screen| {
        screen
            .lines()
            .any(|l| l.contains("solo") && l.contains("failed"))
            && screen.contains("busy")
    });
    tui.send(b"q");
    assert_eq!(tui.wait_exit(EXIT_TIMEOUT), Some(0));
}

#[test]
fn dot_dot_is_refused_in_the_form_and_nothing_is_created() {
    let (tmp, state) = state_in_tempdir();
    let mut tui = Tui::spawn(&state, &[], 100, 30);
    tui.wait_for("the tree", |screen| screen.contains("Instances"));
    tui.send(b"n");
    tui.wait_for("the hold form", |screen| screen.contains("Hold a family"));
    tui.send(UP); // family kind
    tui.send(b" "); // hierarchy
    tui.send(TAB); // AIH
    tui.send(b"../x");
    tui.wait_for("the validation message", |screen| {
        screen.contains("'..' segment")
    });
    tui.send(ENTER);
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        tui.screen().contains("Hold a family"),
        "Enter must not submit"
    );
    tui.send(b"\x1b");
    tui.wait_for("the form closed", |screen| {
        !screen.contains("Hold a family")
    });
    let entries: Vec<_> = std::fs::read_dir(tmp.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(entries, vec![std::ffi::OsString::from("state")]);
    tui.send(b"q");
    assert_eq!(tui.wait_exit(EXIT_TIMEOUT), Some(0));
}

#[test]
fn sigkill_of_the_monitor_kills_its_child_holders() {
    let (_tmp, state) = state_in_tempdir();
    let mut tui = Tui::spawn(&state, &[], 100, 30);
    tui.wait_for("the tree", |screen| screen.contains("Instances"));
    hold_group(&mut tui, "orphan-check", true, false);
    let pid = holder_pid(&tui, "orphan-check", "holding");
    kill(Pid::from_raw(tui.pid() as i32), Signal::SIGKILL).unwrap();
    assert!(tui.wait_exit(EXIT_TIMEOUT).is_some());
    wait_all_gone(&[pid], EXIT_TIMEOUT);
    assert!(
        !alive(pid),
        "child holder {pid} outlived the SIGKILLed monitor"
    );
}
