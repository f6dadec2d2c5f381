//! What htop / k9s users reach for, in the real binary on a real
//! pseudo-terminal: sorting the holders view, F-keys, copying with OSC 52
//! (the escape sequence reaches the terminal), and `TERM=dumb` refused in
//! one line instead of a broken screen.

use crate::common::pty::{EXIT_TIMEOUT, Tui, row_of};
use crate::common::{Holder, state_in_tempdir};

/// The holders pane's process rows' PIDs, top to bottom.
fn holder_pids(screen: &str) -> Vec<String> {
    screen
        .lines()
        .filter_map(|line| line.trim_start_matches(['>', ' ']).strip_prefix("pid "))
        .filter_map(|rest| rest.split_whitespace().next().map(str::to_string))
        .collect()
}

#[test]
fn s_sorts_the_holders_view_by_pid_and_the_tab_bar_says_so() {
    let (_tmp, state) = state_in_tempdir();
    // Two holders: the PID order is asserted after `s` (the unit tests
    // cover orders that differ from the age order).
    let first = Holder::hold(&state, &["--tag", "first"]);
    let second = Holder::hold(&state, &["--tag", "second"]);
    let mut tui = Tui::spawn(&state, &[], 100, 30);
    tui.wait_for("both holders", |s| {
        s.contains("first") && s.contains("second")
    });
    tui.send(b"2");
    tui.wait_for("the age order", |s| {
        s.contains("by age") && holder_pids(s).len() == 2
    });
    tui.send(b"s");
    let screen = tui.wait_for("the PID order", |s| s.contains("by PID"));
    let mut expected = [first.pid(), second.pid()];
    expected.sort_unstable();
    let expected: Vec<String> = expected.iter().map(u32::to_string).collect();
    assert_eq!(holder_pids(&screen), expected, "{screen}");
    tui.send(b"q");
    assert_eq!(tui.wait_exit(EXIT_TIMEOUT), Some(0));
}

#[test]
fn f_keys_open_help_filter_and_quit_like_htop() {
    let (_tmp, state) = state_in_tempdir();
    let _holder = Holder::hold(&state, &["--tag", "fkeys"]);
    let mut tui = Tui::spawn(&state, &[], 80, 24);
    tui.wait_for("the holder", |s| s.contains("fkeys"));
    tui.send(b"\x1bOP"); // F1
    tui.wait_for("the help", |s| s.contains("Help"));
    tui.send(b"\x1bOP");
    tui.send(b"\x1bOR"); // F3
    tui.wait_for("the filter prompt", |s| {
        s.contains("Enter keep · Esc clear")
    });
    tui.send(b"\x1b");
    tui.wait_for("the filter closed", |s| !s.contains("Enter keep"));
    tui.send(b"\x1b[21~"); // F10
    assert_eq!(tui.wait_exit(EXIT_TIMEOUT), Some(0));
}

#[test]
fn y_copies_the_selected_pid_with_osc_52_and_says_so() {
    let (_tmp, state) = state_in_tempdir();
    let holder = Holder::hold(&state, &["--tag", "copied"]);
    let mut tui = Tui::spawn(&state, &[], 100, 30);
    tui.wait_for("the holder", |s| s.contains("copied"));
    tui.send(b"5"); // blocking: the held key is the first row
    tui.wait_for("the blocking row", |s| {
        row_of(s, "copied").is_some_and(|r| r.starts_with('>'))
    });
    tui.send(b"y");
    tui.wait_for("the footer confirmation", |s| {
        s.contains("copied PID to the clipboard")
    });
    // OSC 52 ; c ; base64(pid) ST — what terminals and tmux turn into a
    // clipboard write.
    let pid = holder.pid().to_string();
    let sequence = format!("\x1b]52;c;{}\x1b\\", base64(pid.as_bytes()));
    let raw = String::from_utf8_lossy(&tui.raw()).into_owned();
    assert!(raw.contains(&sequence), "no {sequence:?} in the output");
    tui.send(b"q");
    assert_eq!(tui.wait_exit(EXIT_TIMEOUT), Some(0));
}

#[test]
fn term_dumb_is_refused_in_one_line_pointing_to_snapshot_and_watch() {
    let (_tmp, state) = state_in_tempdir();
    let mut tui = Tui::spawn_with_env(&state, &[], 80, 24, &[("TERM", "dumb")]);
    let code = tui.wait_exit(EXIT_TIMEOUT);
    assert_eq!(code, Some(2));
    let screen = tui.screen();
    let said: Vec<&str> = screen.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(said.len(), 1, "one line: {screen}");
    assert!(said[0].contains("TERM=dumb") && said[0].contains("locktop snapshot"));
    let raw = String::from_utf8_lossy(&tui.raw()).into_owned();
    assert!(
        !raw.contains("\x1b[?1049h"),
        "never entered the full screen"
    );
}

/// Standard base64 (RFC 4648, padded), for the expected sequence.
fn base64(bytes: &[u8]) -> String {
    const ABC: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, &b)| n | u32::from(b) << (16 - 8 * i));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ABC[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}
