//! Hostile names through every text face: a tag an agent chose, an AIH
//! segment, a holder's command line and files dropped in the tree carry
//! ESC, BEL, CR, C1 controls, bidi overrides and invalid UTF-8; `watch`,
//! `snapshot` (`--all`, problems, `--json`), `check` (and `--json`),
//! `record`'s journal, `replay` and the monitor in a real terminal print
//! none of them as they are.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{self, Signal};
use nix::unistd::Pid;

use crate::common::pty::Tui;
use crate::common::{self, Holder, finish, locktop_command, wait_with_timeout};

/// A tag that sets the terminal's title, returns the cursor, starts a C1
/// CSI and reverses what follows it.
const HOSTILE_TAG: &str = "a\u{1b}]2;PWNED\u{7}b\r\u{9b}31m\u{202e}evil";
/// An AIH whose directory segment clears the screen and whose key ends
/// in a C1 next-line and a bidi isolate.
const HOSTILE_AIH: &str = "cli/\u{1b}[2Jseg/leaf\u{85}\u{2067}x";
/// A holder's argv[0] that would write the clipboard (OSC 52).
const HOSTILE_ARG0: &str = "agent\u{1b}]52;c;cHduZWQ=\u{7}\u{202d}";

/// The characters no text face may print as they are (`\n` ends lines
/// and is allowed): C0 but `\n`, DEL, C1, the bidi controls, the line
/// and paragraph separators.
fn forbidden(c: char) -> bool {
    (c < ' ' && c != '\n')
        || ('\u{7f}'..='\u{9f}').contains(&c)
        || matches!(
            c,
            '\u{061c}'
                | '\u{200e}'
                | '\u{200f}'
                | '\u{202a}'..='\u{202e}'
                | '\u{2066}'..='\u{2069}'
                | '\u{2028}'
                | '\u{2029}'
        )
}

/// Panics when `bytes` (all a face printed on one stream) are not UTF-8
/// or hold a forbidden character.
fn assert_inert(face: &str, bytes: &[u8]) {
    let text = std::str::from_utf8(bytes)
        .unwrap_or_else(|e| panic!("{face} printed invalid UTF-8 ({e}): {bytes:?}"));
    if let Some((at, c)) = text.char_indices().find(|&(_, c)| forbidden(c)) {
        panic!(
            "{face} printed {c:?} at byte {at}:\n{}",
            text.escape_debug()
        );
    }
}

/// Files someone dropped in the tree: a gate with a title-setting name, a
/// gate whose name is not UTF-8, a directory of instances named with
/// bidi and C1 characters.
fn drop_hostile_files(state: &Path) {
    let tags = common::engine::tags_dir(state);
    std::fs::create_dir_all(&tags).expect("tags dir");
    std::fs::write(tags.join("x\u{1b}]2;DROPPED\u{7}.lock"), b"").expect("hostile gate");
    std::fs::write(tags.join(OsStr::from_bytes(b"bad\xff\x1b[5m.lock")), b"")
        .expect("non-UTF-8 gate");
    let instances = common::engine::locks_dir(state).join("agents/instances");
    let dir = instances.join("\u{202e}dir\u{9b}");
    std::fs::create_dir_all(&dir).expect("hostile dir");
    std::fs::write(dir.join(OsStr::from_bytes(b"k\xfe.lock")), b"").expect("non-UTF-8 key");
}

/// A streaming command (`watch`, `record`) with its stdout in a file,
/// ended by SIGTERM; everything it printed.
struct Streaming {
    child: std::process::Child,
    stdout: tempfile::NamedTempFile,
    stderr: tempfile::NamedTempFile,
}

impl Streaming {
    fn start(state: &Path, args: &[&str]) -> Self {
        let stdout = tempfile::NamedTempFile::new().expect("stdout file");
        let stderr = tempfile::NamedTempFile::new().expect("stderr file");
        let mut command = locktop_command(state, args);
        command
            .stdin(Stdio::null())
            .stdout(stdout.reopen().expect("stdout"))
            .stderr(stderr.reopen().expect("stderr"));
        let child = command.spawn().expect("spawn");
        Self {
            child,
            stdout,
            stderr,
        }
    }

    fn stdout(&self) -> Vec<u8> {
        std::fs::read(self.stdout.path()).expect("read stdout")
    }

    /// Waits until stdout holds `needle` (a piece of the escaped tag).
    fn wait_for(&self, needle: &str) {
        let deadline = Instant::now() + common::PROCESS_TIMEOUT;
        while !String::from_utf8_lossy(&self.stdout()).contains(needle) {
            assert!(
                Instant::now() < deadline,
                "no {needle:?} in {:?}",
                String::from_utf8_lossy(&self.stdout())
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// SIGTERM, reaped; (stdout, stderr).
    fn stop(mut self) -> (Vec<u8>, Vec<u8>) {
        let pid = Pid::from_raw(i32::try_from(self.child.id()).expect("pid"));
        signal::kill(pid, Signal::SIGTERM).expect("SIGTERM");
        wait_with_timeout(&mut self.child, common::PROCESS_TIMEOUT).expect("exits on SIGTERM");
        let stderr = std::fs::read(self.stderr.path()).expect("read stderr");
        (self.stdout(), stderr)
    }
}

#[test]
fn every_text_face_shows_hostile_names_inert() {
    let _serial = common::serial_blocking();
    let (_tmp, state) = common::state_in_tempdir();
    drop_hostile_files(&state);
    // --initial: a holder that comes before the first view is complete is
    // in the initial state, which watch prints only when asked.
    let watch = Streaming::start(&state, &["watch", "--initial"]);
    let journal = state.parent().expect("tempdir").join("journal.jsonl");
    let journal = journal.to_str().expect("UTF-8 temp path");
    let record = Streaming::start(&state, &["record", "--out", journal]);
    let holder = Holder::hold_as(
        &state,
        &["--aih", HOSTILE_AIH, "--tag", HOSTILE_TAG],
        Some(HOSTILE_ARG0),
    );
    // The escaped tag as every text face shows it.
    let shown_tag = "a␛]2;PWNED␇b␍\\u{9b}31m\\u{202e}evil";
    watch.wait_for(shown_tag);
    let mut faces: Vec<(String, Vec<u8>)> = Vec::new();

    for args in [
        vec!["snapshot"],
        vec!["snapshot", "--all"],
        vec!["check", "--tag", HOSTILE_TAG],
        vec!["check", "--aih", HOSTILE_AIH, "--tag", HOSTILE_TAG],
        vec!["snapshot", "--json"],
        vec!["check", "--json", "--tag", HOSTILE_TAG],
    ] {
        let out = finish(locktop_command(&state, &args));
        // JSON keeps the name exactly, its hazards as \u escapes.
        let json_tag = r#"a\u001b]2;PWNED\u0007b\r\u009b31m\u202eevil"#;
        assert!(
            String::from_utf8_lossy(out.stdout.as_bytes()).contains(shown_tag)
                || args[0] == "snapshot" && out.stdout.contains("leaf")
                || args.contains(&"--json") && out.stdout.contains(json_tag),
            "{args:?} does not name the key: {out:?}"
        );
        faces.push((format!("{args:?} stdout"), out.stdout.into_bytes()));
        faces.push((format!("{args:?} stderr"), out.stderr.into_bytes()));
    }

    // The monitor, in a real terminal: the names on screen, the raw
    // bytes free of the names' sequences (its own CSI sequences are
    // legitimately there).
    let mut tui = Tui::spawn(&state, &[], 160, 40);
    tui.wait_for("the hostile tag's row", |screen| screen.contains("evil"));
    tui.send(b"q");
    tui.wait_exit(common::pty::EXIT_TIMEOUT);
    let raw = tui.raw();
    for sequence in [
        &b"\x1b]2;"[..],
        b"\x1b]52;",
        b"\x07",
        b"\x1b[2Jseg",
        "\u{202e}".as_bytes(),
        "\u{202d}".as_bytes(),
        "\u{2067}".as_bytes(),
        "\u{9b}".as_bytes(),
        "\u{85}".as_bytes(),
    ] {
        assert!(
            !raw.windows(sequence.len()).any(|w| w == sequence),
            "the monitor wrote {sequence:?} to the terminal"
        );
    }

    // `serve`: a scrape and the documents, as `curl` would print them.
    let serve = super::serve::Serve::start_on(&state, "127.0.0.1:0", &[]);
    let metrics = super::serve::wait_body(&serve.url("/metrics"), "the hostile tag", |body| {
        body.contains("locktop_tag_held_seconds{") && body.contains("evil")
    });
    // (The exposition format then doubles the stand-ins' backslashes.)
    assert!(
        metrics.contains("a␛]2;PWNED␇b␍"),
        "the tag as a label: {metrics}"
    );
    faces.push(("serve /metrics".into(), metrics.into_bytes()));
    for path in ["/snapshot.json", "/snapshot.json?all=true", "/healthz"] {
        let body = super::serve::wait_body(&serve.url(path), "an answer", |_| true);
        faces.push((format!("serve {path}"), body.into_bytes()));
    }
    drop(serve);

    drop(holder);
    watch.wait_for("→ free");
    let (out, err) = watch.stop();
    faces.push(("watch stdout".into(), out));
    faces.push(("watch stderr".into(), err));
    std::thread::sleep(Duration::from_millis(300));
    let (_, err) = record.stop();
    faces.push(("record stderr".into(), err));
    faces.push((
        "the journal record wrote".into(),
        std::fs::read(journal).expect("read the journal"),
    ));

    for args in [
        vec!["replay", journal, "--at", "-0s"],
        vec!["replay", journal, "--at", "-0s", "--all"],
        vec!["replay", journal, "--from", "-1h"],
    ] {
        let mut command = Command::new(common::locktop_bin());
        command
            .args(&args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let out = command.output().expect("replay");
        assert!(
            String::from_utf8_lossy(&out.stdout).contains(shown_tag) || args.contains(&"--at"),
            "{args:?} does not name the key: {out:?}"
        );
        faces.push((format!("{args:?} stdout"), out.stdout));
        faces.push((format!("{args:?} stderr"), out.stderr));
    }

    for (face, bytes) in &faces {
        assert_inert(face, bytes);
    }
}
