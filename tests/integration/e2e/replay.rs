//! `locktop replay` on the shipped demo recording, in a real
//! pseudo-terminal: it opens on the recording saying REPLAY and the
//! cursor's time, steps to the next change, goes to the end (where the
//! demo's stopped and orphaned holders are), jumps to a typed time,
//! plays, pauses, and quits restoring the terminal.

use std::path::Path;

use crate::common::pty::{EXIT_TIMEOUT, Tui};

/// The cursor's time in the header (`REPLAY  ⏸ 1× <time> · …`).
fn cursor(screen: &str) -> String {
    let header = screen.lines().next().unwrap_or("");
    header
        .split_whitespace()
        .find(|word| word.starts_with("20") && word.ends_with('Z'))
        .unwrap_or_else(|| panic!("no cursor time in {header:?}"))
        .to_string()
}

#[test]
fn the_replay_monitor_opens_steps_jumps_plays_and_quits() {
    let demo = Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/demo.jsonl");
    let mut tui = Tui::spawn_plain(&["replay", demo.to_str().expect("utf-8")], 120, 30);
    let screen = tui.wait_for("the replay's header", |s| s.contains(" REPLAY "));
    assert!(tui.on_alternate_screen());
    let start = cursor(&screen);
    // The next change.
    tui.send(b">");
    let screen = tui.wait_for("the cursor to move", |s| cursor(s) != start);
    let stepped = cursor(&screen);
    assert!(stepped > start, "{stepped} after {start}");
    // The end: the demo's stuck swarm, verdicts as they were.
    tui.send(b"}");
    let screen = tui.wait_for("the stopped agent", |s| s.contains("stopped"));
    let end = cursor(&screen);
    // A typed time, between the two.
    tui.send(b"t");
    tui.wait_for("the time prompt", |s| s.contains("jump to:"));
    let middle = "2026-12-02T05:33:20Z";
    tui.send(middle.as_bytes());
    tui.send(b"\r");
    tui.wait_for("the typed time", |s| {
        cursor(s) == "2026-12-02T05:33:20.000Z"
    });
    // Play (faster), then pause: the cursor moved on, and stays.
    tui.send(b"++ ");
    tui.wait_for("playing", |s| {
        s.contains("▶") && cursor(s).as_str() > "2026-12-02T05:33:21"
    });
    tui.send(b" ");
    let paused = tui.wait_for("paused", |s| s.contains("⏸"));
    let at = cursor(&paused);
    assert!(at.as_str() <= end.as_str());
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert_eq!(cursor(&tui.screen()), at, "a paused replay stays");
    // Nothing live: K says so.
    tui.send(b"K");
    tui.wait_for("K refused", |s| s.contains("nothing in a replay is live"));
    tui.send(b"q");
    assert_eq!(tui.wait_exit(EXIT_TIMEOUT), Some(0));
    assert!(!tui.on_alternate_screen());
}
