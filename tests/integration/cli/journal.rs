//! `locktop record` and `locktop replay` as an operator runs them, against
//! real holders: a churn is recorded while the truth is sampled through
//! the SDK at quiet moments, and `replay --at` each moment says exactly
//! that truth (keys, liveness, holder PIDs) — from a rotated set, and
//! with a torn last line; `serve --journal` records what it serves; the
//! shipped demo recording replays with its verdicts.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use objectiveai_sdk::lockfile;

use crate::common::{Holder, finish, locktop_command, state_in_tempdir};

/// How long after the last change a moment counts as quiet: the
/// recorder has long seen it.
const QUIET: Duration = Duration::from_millis(800);

/// Key name → holder PID, for every key held.
type Truth = BTreeMap<String, u32>;

/// The families the churn takes: an AIH and its tags.
fn family(n: usize) -> (String, Vec<String>) {
    (
        format!("team/agent-{}", n % 5),
        vec![format!("tag {}", n % 3), format!("tag x{}", n % 4)],
    )
}

/// Every key of the families, with its SDK coordinates.
fn every_key(state: &Path) -> Vec<(String, PathBuf, String)> {
    let mut keys = Vec::new();
    for n in 0..20 {
        let (aih, tags) = family(n);
        let (dir, key) = locktop::locks::agent_instance_lock(state, &aih);
        keys.push((aih, dir, key));
        for tag in tags {
            let (dir, key) = locktop::locks::agent_tag_lock(state, &tag);
            keys.push((tag, dir, key));
        }
    }
    keys.sort();
    keys.dedup();
    keys
}

/// The truth now: each key the SDK says is held, with the PID of the
/// holder process this test started for it (a held key no holder of
/// ours holds fails the test).
fn sdk_truth(state: &Path, holders: &[(u32, Vec<String>)]) -> Truth {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let mut truth = Truth::new();
    for (name, dir, key) in every_key(state) {
        if !locktop::locks::escape::gate_path(&dir, &key).exists() {
            continue;
        }
        let held = runtime.block_on(lockfile::try_held(&dir, &key));
        if held {
            let pid = holders
                .iter()
                .find(|(_, keys)| keys.contains(&name))
                .map(|(pid, _)| *pid)
                .unwrap_or_else(|| panic!("{name} is held, by none of this test's holders"));
            truth.insert(name, pid);
        }
    }
    truth
}

/// What `replay FILES --at time --json` says is held: key name → the
/// first holder's PID (and every held key must be `live`).
fn replayed(files: &[PathBuf], time: SystemTime) -> Truth {
    let at = locktop::time_format::rfc3339(time);
    let out = finish(replay(files, &["--at", &at, "--json"]));
    assert_eq!(out.code(), 0, "replay --at {at}: {}", out.stderr);
    let doc: serde_json::Value = serde_json::from_str(out.stdout.trim()).expect("JSON");
    // The time asked for, or the recording's end when after it.
    let taken_at = doc["taken_at"].as_str().expect("taken_at");
    assert!(taken_at <= at.as_str(), "{taken_at} after {at}");
    doc["keys"]
        .as_array()
        .expect("keys")
        .iter()
        .map(|key| {
            assert_eq!(key["liveness"], "live", "{key}");
            let pid = key["holders"][0]["pid"].as_u64().expect("a holder") as u32;
            (key["name"].as_str().expect("name").to_string(), pid)
        })
        .collect()
}

/// `locktop replay FILES… ARGS…`, every stdio piped.
pub(super) fn replay(files: &[PathBuf], args: &[&str]) -> std::process::Command {
    let mut command = std::process::Command::new(crate::common::locktop_bin());
    command
        .arg("replay")
        .args(files)
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    command
}

/// Waits until `path` holds a complete checkpoint (the recorder's first
/// scan is in).
pub(super) fn wait_first_checkpoint(path: &Path) {
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    while !std::fs::read_to_string(path).is_ok_and(|text| text.contains("\"checkpoint_end\"")) {
        assert!(
            std::time::Instant::now() < deadline,
            "no checkpoint in {}",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Every file of a rotated journal: the current one and `FILE.N`.
fn journal_files(path: &Path) -> Vec<PathBuf> {
    let dir = path.parent().expect("dir");
    let name = path
        .file_name()
        .expect("name")
        .to_string_lossy()
        .to_string();
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("read dir")
        .map(|entry| entry.expect("entry").path())
        .filter(|file| {
            file.file_name()
                .is_some_and(|f| f.to_string_lossy().starts_with(&name))
        })
        .collect();
    files.sort();
    files
}

#[test]
fn replay_at_each_quiet_moment_says_what_the_sdk_said_then() {
    let (tmp, state) = state_in_tempdir();
    let journal = tmp.path().join("journal.jsonl");
    // Small files: the churn rotates through several, all kept.
    let mut recorder = locktop_command(
        &state,
        &[
            "record",
            "--out",
            journal.to_str().expect("utf-8"),
            "--max-size",
            "8K",
            "--keep",
            "100",
        ],
    )
    .spawn()
    .expect("spawn record");
    wait_first_checkpoint(&journal);
    let mut rng = fastrand::Rng::with_seed(7);
    // Each holder with the names of the keys it holds.
    let mut running: Vec<(Holder, Vec<String>)> = Vec::new();
    let mut moments: Vec<(SystemTime, Truth)> = Vec::new();
    for round in 0..8 {
        // A few holders end (killed, terminated, or their stdin closed)…
        while !running.is_empty() && rng.u8(0..3) > 0 {
            let (mut holder, _) = running.remove(rng.usize(..running.len()));
            match rng.u8(0..3) {
                0 => holder.kill(),
                1 => holder.terminate(),
                _ => holder.close_stdin(),
            };
        }
        // …and a few families are taken, when free.
        for _ in 0..rng.usize(1..4) {
            let (aih, tags) = family(round * 3 + rng.usize(0..20));
            let busy = running
                .iter()
                .any(|(_, keys)| keys.contains(&aih) || tags.iter().any(|tag| keys.contains(tag)));
            if busy {
                continue;
            }
            let mut args = vec!["--aih".to_string(), aih.clone()];
            args.extend(crate::common::tag_args(
                &tags.iter().map(String::as_str).collect::<Vec<_>>(),
            ));
            let mut names = tags;
            names.push(aih);
            running.push((Holder::hold(&state, &args), names));
        }
        std::thread::sleep(QUIET);
        let holders: Vec<(u32, Vec<String>)> = running
            .iter()
            .map(|(holder, names)| (holder.pid(), names.clone()))
            .collect();
        let before = sdk_truth(&state, &holders);
        let moment = SystemTime::now();
        assert_eq!(before, sdk_truth(&state, &holders), "not a quiet moment");
        moments.push((moment, before));
    }
    for (mut holder, _) in running {
        holder.kill();
    }
    std::thread::sleep(QUIET);
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(recorder.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .expect("SIGINT");
    let status = recorder.wait().expect("wait record");
    assert!(status.success(), "record: {status:?}");
    let files = journal_files(&journal);
    assert!(files.len() > 2, "rotated: {files:?}");
    assert!(moments.iter().any(|(_, truth)| !truth.is_empty()));
    for (moment, truth) in &moments {
        assert_eq!(&replayed(&files, *moment), truth, "at {moment:?}");
    }
    // A torn last line (a crash mid-write) is skipped with a warning; the
    // moments before it read the same.
    let mut current = std::fs::OpenOptions::new()
        .append(true)
        .open(&journal)
        .expect("open");
    std::io::Write::write_all(
        &mut current,
        br#"{"time":"2026-12-02T03:12:00.000Z","kind":"ta"#,
    )
    .expect("tear");
    // Read to the end (every holder was killed: nothing held), then a
    // moment before it.
    let out = finish(replay(&files, &["--at", "-0s", "--json"]));
    assert_eq!(out.code(), 0, "{}", out.stderr);
    assert!(out.stderr.contains("torn last line"), "{}", out.stderr);
    assert!(replayed(&files, SystemTime::now()).is_empty());
    let (moment, truth) = moments.last().expect("moments");
    assert_eq!(&replayed(&files, *moment), truth);
}

#[test]
fn serve_journal_records_what_it_serves() {
    let (tmp, state) = state_in_tempdir();
    let dir = tmp.path().join("history");
    let mut serve = locktop_command(
        &state,
        &[
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--journal",
            dir.to_str().expect("utf-8"),
        ],
    )
    .spawn()
    .expect("spawn serve");
    let journal = dir.join("journal.jsonl");
    wait_first_checkpoint(&journal);
    let mut holder = Holder::hold(&state, &["--aih", "ops/pager", "--tag", "oncall"]);
    std::thread::sleep(QUIET);
    let moment = SystemTime::now();
    holder.kill();
    std::thread::sleep(QUIET);
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(serve.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .expect("SIGTERM");
    assert!(serve.wait().expect("wait serve").success());
    // Stopped by a signal: a clean stop, its end line written.
    let text = std::fs::read_to_string(&journal).expect("read");
    let last = text.lines().last().expect("lines");
    assert!(last.starts_with(r#"{"end":"#), "{last}");
    let held = replayed(std::slice::from_ref(&dir), moment);
    let expected: Truth = [
        ("oncall".to_string(), holder.pid()),
        ("ops/pager".to_string(), holder.pid()),
    ]
    .into();
    assert_eq!(held, expected);
    assert!(replayed(&[dir], SystemTime::now()).is_empty());
}

#[test]
fn the_shipped_demo_recording_replays_with_its_verdicts() {
    let demo = Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/demo.jsonl");
    let demo = [demo];
    let out = finish(replay(&demo, &["--at", "2100-01-01T00:00:00Z", "--json"]));
    assert_eq!(out.code(), 0, "{}", out.stderr);
    assert!(
        out.stderr.contains("the recording ends at"),
        "{}",
        out.stderr
    );
    let doc: serde_json::Value = serde_json::from_str(out.stdout.trim()).expect("JSON");
    // Past the end, the last recorded state as of the recording's end:
    // no age or verdict grows in time nobody recorded.
    let taken_at = doc["taken_at"].as_str().expect("taken_at");
    assert!(taken_at.starts_with("2026-12-02T05:33:5"), "{taken_at}");
    let verdicts: std::collections::BTreeSet<&str> = doc["keys"]
        .as_array()
        .expect("keys")
        .iter()
        .filter_map(|key| key["verdict"]["kind"].as_str())
        .collect();
    for kind in [
        "stopped",
        "orphaned_child",
        "materializing_too_long",
        "idle",
        "agent_active",
    ] {
        assert!(verdicts.contains(kind), "{kind} not in {verdicts:?}");
    }
    // The window in watch's format: the swarm coming up.
    let out = finish(replay(&demo, &["--from", "2000-01-01T00:00:00Z"]));
    assert_eq!(out.code(), 0, "{}", out.stderr);
    for word in [
        "new       → live",
        "→ contended",
        "→ stopped",
        "→ orphaned_child",
        "→ materializing_too_long",
    ] {
        assert!(out.stdout.contains(word), "{word}:\n{}", out.stdout);
    }
}

/// One line on stderr, exit 2, no panic.
fn assert_refused(what: &str, out: &crate::common::Finished, needle: &str) {
    assert_eq!(out.code(), 2, "{what}: {}", out.stderr);
    let lines: Vec<&str> = out.stderr.lines().filter(|l| !l.is_empty()).collect();
    assert!(
        lines.len() <= 2 && lines.iter().any(|line| line.contains(needle)),
        "{what}: {:?}",
        out.stderr
    );
    assert!(!out.stderr.contains("panicked"), "{what}: {}", out.stderr);
}

#[test]
fn bad_journals_times_and_options_are_one_line_and_exit_2() {
    let (tmp, state) = state_in_tempdir();
    let not_journal = tmp.path().join("notes.txt");
    std::fs::write(&not_journal, "hello\n").expect("write");
    let empty = tmp.path().join("empty.jsonl");
    std::fs::write(&empty, "").expect("write");
    let newer = tmp.path().join("newer.jsonl");
    std::fs::write(
        &newer,
        "{\"journal\":{\"format\":\"locktop-journal\",\"version\":99,\"host\":\"h\",\"state_dir\":\"/s\",\"locktop\":\"9\",\"started\":\"2026-01-01T00:00:00Z\",\"recording_started\":\"2026-01-01T00:00:00Z\",\"part\":0,\"probe\":\"lock-free\"}}\n",
    )
    .expect("write");
    let demo = Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/demo.jsonl");
    let missing = tmp.path().join("missing.jsonl");
    let cases: Vec<(&str, Vec<PathBuf>, Vec<&str>, &str)> = vec![
        (
            "not a journal",
            vec![not_journal],
            vec!["--at", "-1h"],
            "not a locktop journal",
        ),
        ("empty", vec![empty], vec!["--at", "-1h"], "empty"),
        (
            "newer format",
            vec![newer],
            vec!["--at", "-1h"],
            "newer than this locktop reads",
        ),
        ("missing", vec![missing], vec!["--at", "-1h"], "cannot read"),
        (
            "bad time",
            vec![demo.clone()],
            vec!["--at", "yesterday"],
            "RFC 3339",
        ),
        (
            "before the start",
            vec![demo.clone()],
            vec!["--at", "2000-01-01T00:00:00Z"],
            "before the recording's first complete view",
        ),
        (
            "to before from",
            vec![demo.clone()],
            vec!["--from", "-1h", "--to", "-2h"],
            "before the window's start",
        ),
        (
            "json without a mode",
            vec![demo.clone()],
            vec!["--json"],
            "--json needs --at",
        ),
    ];
    for (what, files, args, needle) in cases {
        let out = finish(replay(&files, &args));
        assert_refused(what, &out, needle);
    }
    // Options that do not apply are refused by clap, never ignored.
    for (what, args, needle) in [
        (
            "--all without --at",
            vec!["replay", demo.to_str().expect("utf-8"), "--all"],
            "--at",
        ),
        (
            "--keep without --max-size",
            vec!["record", "--out", "x", "--keep", "3"],
            "--max-size",
        ),
        (
            "--max-size without --out",
            vec!["record", "--max-size", "1M"],
            "--out",
        ),
        (
            "a tiny --max-size",
            vec!["record", "--out", "x", "--max-size", "10"],
            "at least 4K",
        ),
        (
            "--max-size without --journal",
            vec!["serve", "--max-size", "1M"],
            "--journal",
        ),
    ] {
        let out = finish(locktop_command(&state, &args));
        assert_eq!(out.code(), 2, "{what}: {}", out.stderr);
        assert!(out.stderr.contains(needle), "{what}: {}", out.stderr);
    }
    // Reported from the field: clap waives `requires = "at"` when a
    // given option conflicts with --at, so --all with --from was ignored.
    for args in [["--all", "--from", "-1h"], ["--to", "-1h", "--all"]] {
        let out = finish(replay(std::slice::from_ref(&demo), &args));
        assert_eq!(out.code(), 2, "{args:?}: {}", out.stderr);
        let first = out.stderr.lines().next().unwrap_or_default();
        assert!(
            first.contains("cannot be used with") && first.contains("'--all'"),
            "{args:?}: {}",
            out.stderr
        );
        assert!(out.stdout.is_empty(), "{args:?}: printed {}", out.stdout);
    }
    let out = finish(locktop_command(
        &state,
        &["replay", demo.to_str().expect("utf-8"), "--at", "-1h"],
    ));
    assert_refused("--state-dir with replay", &out, "reads no state dir");
    // A recording is never overwritten.
    let existing = tmp.path().join("kept.jsonl");
    std::fs::write(&existing, "precious\n").expect("write");
    let out = finish(locktop_command(
        &state,
        &["record", "--out", existing.to_str().expect("utf-8")],
    ));
    assert_refused("an existing --out", &out, "never overwritten");
    let out = finish(locktop_command(
        &state,
        &[
            "record",
            "--out",
            existing.to_str().expect("utf-8"),
            "--max-size",
            "4K",
            "--keep",
            "1",
        ],
    ));
    assert_refused("an existing --out with --keep 1", &out, "would delete it");
    assert_eq!(
        std::fs::read_to_string(&existing).expect("read"),
        "precious\n"
    );
}

#[test]
fn a_recorder_whose_reader_stopped_reading_still_ends_on_sigint() {
    let (_tmp, state) = state_in_tempdir();
    // Enough keys for a first checkpoint larger than a pipe's buffer.
    let (dir, _) = locktop::locks::agent_tag_lock(&state, "t");
    std::fs::create_dir_all(&dir).expect("mkdir");
    for n in 0..6_000 {
        let (dir, key) = locktop::locks::agent_tag_lock(&state, &format!("a tag named {n:05}"));
        std::fs::write(locktop::locks::escape::gate_path(&dir, &key), "").expect("gate");
        std::fs::write(locktop::locks::escape::announce_path(&dir, &key), "1").expect("announce");
    }
    // stdout piped and never read.
    let mut recorder = locktop_command(&state, &["record"]).spawn().expect("spawn");
    std::thread::sleep(Duration::from_secs(2));
    assert!(
        recorder.try_wait().expect("try_wait").is_none(),
        "still recording"
    );
    let asked = std::time::Instant::now();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(recorder.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .expect("SIGINT");
    let status = crate::common::wait_with_timeout(&mut recorder, Duration::from_secs(10))
        .expect("record ends on SIGINT though nobody reads its output");
    assert!(status.success(), "{status:?}");
    // Correctness bound only: the flush is given 2 s.
    assert!(asked.elapsed() < Duration::from_secs(10));
}

/// Reported from the field: a recording stopped cleanly ended, for
/// `replay`, at its last change ("the recording ends at" up to 10 s
/// early). Stopped by SIGTERM after a quiet spell, it ends when it
/// stopped: its last line is the end line, and `replay` reads it without
/// a warning.
#[test]
fn a_recording_stopped_by_a_signal_ends_when_it_stopped() {
    let (tmp, state) = state_in_tempdir();
    let _holder = Holder::hold(&state, &["--tag", "kept"]);
    let path = tmp.path().join("journal.jsonl");
    let mut recorder = locktop_command(&state, &["record", "--out", path.to_str().expect("utf-8")])
        .spawn()
        .expect("spawn");
    wait_first_checkpoint(&path);
    // Nothing changes from here on: the last change is the checkpoint's.
    std::thread::sleep(Duration::from_millis(1500));
    let stopped = SystemTime::now();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(recorder.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .expect("SIGTERM");
    let status = crate::common::wait_with_timeout(&mut recorder, Duration::from_secs(10))
        .expect("record ends on SIGTERM");
    assert!(status.success(), "{status:?}");
    let text = std::fs::read_to_string(&path).expect("read");
    let last = text.lines().last().expect("lines");
    assert!(last.starts_with(r#"{"end":{"time":""#), "{last}");

    let files = [path];
    let out = finish(replay(&files, &["--at", "2100-01-01T00:00:00Z", "--json"]));
    assert_eq!(out.code(), 0, "{}", out.stderr);
    let ends_at = out
        .stderr
        .split_once("the recording ends at ")
        .and_then(|(_, rest)| rest.split_once(' '))
        .map(|(time, _)| time)
        .unwrap_or_else(|| panic!("no end said: {}", out.stderr));
    let ends_at = humantime::parse_rfc3339(ends_at).expect("RFC 3339");
    // Journal times are to the millisecond: not before `stopped`'s.
    assert!(
        ends_at + Duration::from_millis(1) > stopped,
        "the recording ends at {ends_at:?}, before it was stopped at {stopped:?}"
    );
    let doc: serde_json::Value = serde_json::from_str(out.stdout.trim()).expect("JSON");
    assert_eq!(doc["keys"][0]["name"], "kept", "{doc}");
    let out = finish(replay(&files, &["--from", "2000-01-01T00:00:00Z"]));
    assert_eq!(out.code(), 0, "{}", out.stderr);
    assert!(!out.stderr.contains("warning"), "{}", out.stderr);
}
