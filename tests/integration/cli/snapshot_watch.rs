//! The `snapshot` and `watch` commands as a user runs them: real `locktop`
//! processes against real holders. (`stalled`: `watch` with a reader
//! that stops reading.)

mod stalled;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

use crate::common;
use crate::common::engine::{GroundTruth, Name, held_names, tags_dir};
use crate::common::{
    Holder, PROCESS_TIMEOUT, locktop_bin, run_locktop, serial_blocking, state_in_tempdir,
    wait_with_timeout,
};
use locktop::engine::Liveness;
use nix::sys::signal::{self, Signal};
use nix::unistd::Pid;
use serde_json::Value;

/// How long a `watch` line may take to appear. A correctness bound.
const LINE_TIMEOUT: Duration = Duration::from_secs(10);

/// `snapshot --json` parsed to name → (liveness word, holder PIDs).
fn snapshot_json(state: &Path, args: &[&str]) -> (Value, BTreeMap<Name, (String, Vec<u32>)>) {
    let mut full = vec!["snapshot", "--json"];
    full.extend_from_slice(args);
    let done = run_locktop(state, &full);
    assert_eq!(done.code(), 0, "{done:?}");
    assert!(done.stderr_lines().is_empty(), "{done:?}");
    let doc: Value = serde_json::from_str(done.stdout.trim()).expect("one JSON document");
    let keys = doc["keys"]
        .as_array()
        .expect("keys array")
        .iter()
        .map(|key| {
            let name = (
                key["kind"].as_str().expect("kind").to_string(),
                key["name"].as_str().expect("name").to_string(),
            );
            let pids = key["holders"]
                .as_array()
                .expect("holders array")
                .iter()
                .map(|h| u32::try_from(h["pid"].as_u64().expect("pid")).expect("pid fits"))
                .collect();
            let liveness = key["liveness"].as_str().expect("liveness").to_string();
            (name, (liveness, pids))
        })
        .collect();
    (doc, keys)
}

fn word(liveness: Liveness) -> String {
    serde_json::to_value(liveness)
        .expect("serialize")
        .as_str()
        .expect("a string")
        .to_string()
}

/// 1 (CLI). `snapshot --json --all` lists exactly the holders' claims as
/// live with their PIDs and the stale ones as free, in both probe modes;
/// without `--all`, only the live ones.
#[test]
fn snapshot_json_equals_what_real_holders_hold_in_both_probe_modes() {
    let _serial = serial_blocking();
    let (_tmp, state) = state_in_tempdir();
    let truth = GroundTruth::build(&state);
    let expected: BTreeMap<Name, (String, Vec<u32>)> = truth
        .expected_summary()
        .into_iter()
        .map(|(name, (liveness, pids))| (name, (word(liveness), pids)))
        .collect();
    let expected_live: BTreeMap<Name, (String, Vec<u32>)> = truth
        .expected_live()
        .into_iter()
        .map(|(name, pid)| (name, ("live".to_string(), vec![pid])))
        .collect();
    for probe in ["acquire", "passive"] {
        let (doc, all) = snapshot_json(&state, &["--all", "--probe", probe]);
        assert_eq!(all, expected, "--probe {probe} --all");
        assert_eq!(doc["probe"], probe);
        assert_eq!(doc["problems"], serde_json::json!([]));
        let (_, live) = snapshot_json(&state, &["--probe", probe]);
        assert_eq!(live, expected_live, "--probe {probe} (live only)");
    }
    // The acquire snapshot took and released every free key: still free,
    // and the holders were never disturbed.
    let (_, all) = snapshot_json(&state, &["--all", "--probe", "passive"]);
    assert_eq!(all, expected, "after the acquire snapshots");
}

/// 6 (CLI). Foreign names become `problem:` lines in the table (and
/// entries in the JSON), and the command still succeeds.
#[test]
fn snapshot_prints_problem_lines_for_foreign_names_and_exits_0() {
    let _serial = serial_blocking();
    let (_tmp, state) = state_in_tempdir();
    let mut holder = Holder::hold(&state, &["--group", "real"]);
    let tags = tags_dir(&state);
    std::fs::write(tags.join("junk.txt"), b"").expect("junk");
    std::fs::write(tags.join("bad%ZZ.lock"), b"").expect("bad escape");
    std::os::unix::fs::symlink("/etc", tags.join("link")).expect("symlink");
    let (doc, _) = snapshot_json(&state, &["--all"]);
    let kinds: Vec<&str> = doc["problems"]
        .as_array()
        .expect("problems")
        .iter()
        .map(|p| p["kind"]["problem"].as_str().expect("problem kind"))
        .collect();
    assert_eq!(
        kinds.iter().copied().collect::<BTreeSet<_>>(),
        BTreeSet::from(["foreign_file", "malformed_escape", "symlink"]),
        "{doc}"
    );
    // (Non-UTF-8 names in JSON: `snapshot_json_survives_non_utf8_names`.)
    use std::os::unix::ffi::OsStrExt;
    std::fs::write(tags.join(std::ffi::OsStr::from_bytes(b"\xff.lock")), b"").expect("non-UTF-8");

    let done = run_locktop(&state, &["snapshot"]);
    assert_eq!(done.code(), 0, "{done:?}");
    let problems: Vec<&str> = done
        .stdout
        .lines()
        .filter(|l| l.starts_with("problem: "))
        .collect();
    assert_eq!(problems.len(), 4, "{}", done.stdout);
    for (needle, what) in [
        ("junk.txt", "foreign file"),
        ("bad%ZZ.lock", "malformed escape"),
        ("link", "symlink"),
        (".lock: name is not UTF-8", "not UTF-8"),
    ] {
        assert!(
            problems
                .iter()
                .any(|l| l.contains(needle) && l.contains(what)),
            "no problem line for {needle} ({what}): {problems:#?}"
        );
    }
    assert!(
        done.stdout
            .lines()
            .any(|l| l.starts_with("live") && l.contains(&holder.pid().to_string())),
        "the real holder is still listed:\n{}",
        done.stdout
    );

    holder.close_stdin();
}

/// Non-UTF-8 names (a foreign file, and a directory holding a claim) in
/// `snapshot --json`: still one JSON document and exit 0, not a panic.
#[test]
fn snapshot_json_survives_non_utf8_names() {
    let _serial = serial_blocking();
    use std::os::unix::ffi::OsStrExt;
    let (_tmp, state) = state_in_tempdir();
    let mut holder = Holder::hold(&state, &["--group", "real"]);
    let tags = tags_dir(&state);
    std::fs::write(tags.join(std::ffi::OsStr::from_bytes(b"\xff.lock")), b"")
        .expect("non-UTF-8 file");
    let odd_dir = tags
        .parent()
        .expect("agents")
        .join("instances")
        .join(std::ffi::OsStr::from_bytes(b"caf\xe9"));
    std::fs::create_dir_all(&odd_dir).expect("non-UTF-8 dir");
    std::fs::write(odd_dir.join("agent-1.lock"), b"").expect("gate");

    let done = run_locktop(&state, &["snapshot", "--json", "--all"]);
    assert_eq!(done.code(), 0, "{done:?}");
    assert!(!done.stderr.contains("panic"), "{done:?}");
    let doc: Value = serde_json::from_str(done.stdout.trim()).expect("one JSON document");
    assert!(
        !doc["problems"].as_array().expect("problems").is_empty(),
        "{doc}"
    );
    holder.close_stdin();
}

/// A bad state dir: exit 2 and exactly one line on stderr.
#[test]
fn snapshot_of_a_missing_state_dir_exits_2_with_one_line() {
    let _serial = serial_blocking();
    let done = run_locktop(Path::new("/nonexistent"), &["snapshot"]);
    assert_eq!(done.code(), 2, "{done:?}");
    assert_eq!(done.stderr_lines().len(), 1, "{done:?}");
    assert!(done.stderr.starts_with("locktop: "), "{done:?}");
    assert!(done.stdout.is_empty(), "{done:?}");
}

/// A state dir no agent has used yet (no `locks/` below it) holds
/// nothing: an empty snapshot, exit 0 — as `check` calls its keys free —
/// and nothing is created.
#[test]
fn snapshot_of_a_state_dir_without_a_locks_dir_is_empty_not_an_error() {
    let _serial = serial_blocking();
    let tmp = tempfile::tempdir().unwrap();
    let table = run_locktop(tmp.path(), &["snapshot"]);
    assert_eq!(table.code(), 0, "{table:?}");
    assert!(table.stderr.is_empty(), "{table:?}");
    let json = run_locktop(tmp.path(), &["snapshot", "--json", "--all"]);
    assert_eq!(json.code(), 0, "{json:?}");
    let document: Value = serde_json::from_str(json.stdout.trim()).expect("one JSON document");
    assert_eq!(document["keys"], serde_json::json!([]), "{document}");
    assert_eq!(
        std::fs::read_dir(tmp.path()).unwrap().count(),
        0,
        "created something"
    );
}

/// A `locktop watch --json` child and its stdout lines.
pub(super) struct Watch {
    pub(super) child: Child,
    lines: Receiver<String>,
    pub(super) seen: Vec<String>,
}

impl Watch {
    fn start(state: &Path) -> Self {
        Self::start_with(state, &[])
    }

    /// `watch --json` with `extra` flags.
    pub(super) fn start_with(state: &Path, extra: &[&str]) -> Self {
        let mut args = vec!["watch", "--json"];
        args.extend_from_slice(extra);
        Self::spawn(common::locktop_command(state, &args))
    }

    /// SIGTERM; the watch must exit 0.
    fn terminate_expecting_0(&mut self) {
        let raw = Pid::from_raw(i32::try_from(self.child.id()).expect("pid"));
        signal::kill(raw, Signal::SIGTERM).expect("SIGTERM watch");
        let status = wait_with_timeout(&mut self.child, PROCESS_TIMEOUT).expect("watch exits");
        assert_eq!(status.code(), Some(0), "{status:?}");
    }

    /// Runs `command` (a `watch --json` in some wrapper) as the watch.
    fn spawn(mut command: Command) -> Self {
        let mut child = command.spawn().expect("spawn watch");
        let stdout = child.stdout.take().expect("stdout");
        let lines = common::lines_of(stdout);
        Self {
            child,
            lines,
            seen: Vec::new(),
        }
    }

    /// Reads lines until one matches `pred`; panics after [`LINE_TIMEOUT`].
    pub(super) fn wait_line(&mut self, what: &str, mut pred: impl FnMut(&Value) -> bool) -> Value {
        let deadline = Instant::now() + LINE_TIMEOUT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let Ok(line) = self.lines.recv_timeout(left) else {
                panic!(
                    "no watch line {what}; lines so far:\n{}",
                    self.seen.join("\n")
                );
            };
            let value: Value = serde_json::from_str(&line)
                .unwrap_or_else(|e| panic!("watch printed non-JSON {line:?}: {e}"));
            self.seen.push(line);
            if pred(&value) {
                return value;
            }
        }
    }

    /// Every line printed within `span` from now (none is waited for).
    pub(super) fn lines_within(&mut self, span: Duration) -> Vec<Value> {
        let deadline = Instant::now() + span;
        let mut got = Vec::new();
        while let Ok(line) = self
            .lines
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
        {
            got.push(serde_json::from_str(&line).expect("JSON"));
            self.seen.push(line);
        }
        got
    }

    /// Waits for a `to` line for every name, each with `pids` (and `from`,
    /// when given).
    fn wait_each(&mut self, names: &BTreeSet<Name>, from: Option<&str>, to: &str, pids: &[u32]) {
        let mut left = names.clone();
        while !left.is_empty() {
            let line = self.wait_line(&format!("to {to:?} for each of {left:?}"), |v| {
                v["to"] == to
                    && v["pids"] == serde_json::json!(pids)
                    && left.contains(&(
                        v["kind"].as_str().unwrap_or_default().to_string(),
                        v["name"].as_str().unwrap_or_default().to_string(),
                    ))
            });
            if let Some(from) = from {
                assert_eq!(line["from"], from, "{line}");
            }
            assert!(line["time"].is_string(), "{line}");
            left.remove(&(
                line["kind"].as_str().expect("kind").to_string(),
                line["name"].as_str().expect("name").to_string(),
            ));
        }
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// 8. `watch --json` streams NDJSON: `to: "live"` with the holder's PID
///    when it starts, `to: "free"` after its SIGKILL; SIGTERM ends it with
///    exit 0 and nothing on stderr.
#[test]
fn watch_json_streams_live_then_free_with_the_holders_pid() {
    let _serial = serial_blocking();
    let (_tmp, state) = state_in_tempdir();
    let mut before = Holder::hold(&state, &["--group", "already there"]);
    let mut watch = Watch::start(&state);
    watch.wait_line("watching", |v| v["watcher"]["health"] == "watching");

    let mut holder = Holder::hold(
        &state,
        &["--aih", "cli/daemon/watched-1", "--tag", "watched tag"],
    );
    let names = held_names(&holder);
    let pid = holder.pid();
    // A live line may come first without PIDs (holder details are
    // rate-limited); one with the PID must follow.
    watch.wait_each(&names, None, "live", &[pid]);
    assert!(
        !watch.seen.iter().any(|l| l.contains("already there")),
        "keys present at start are not streamed without --initial"
    );

    holder.kill();
    watch.wait_each(&names, Some("live"), "free", &[]);

    watch.terminate_expecting_0();
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut watch.child.stderr.take().expect("stderr"), &mut stderr)
        .expect("read stderr");
    assert!(
        stderr.lines().all(common::is_source_note),
        "nothing but the source's note (not root): {stderr}"
    );
    before.close_stdin();
}

/// `locktop watch | head -1`: once `head` is gone, the next write hits
/// EPIPE and `watch` ends quietly with exit 0 — no panic message.
#[test]
fn watch_into_a_closed_pipe_exits_quietly() {
    let _serial = serial_blocking();
    let (_tmp, state) = state_in_tempdir();
    let script = r#"{ "$0" --state-dir "$1" watch; echo "locktop-exit=$?" >&2; } | head -1"#;
    let mut sh = Command::new("sh")
        .env("LOCKTOP_SOCKET", common::NO_SERVICE_SOCKET)
        .arg("-c")
        .arg(script)
        .arg(locktop_bin())
        .arg(&state)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn sh");
    // `head` exits after the first line, but `watch` only notices at its
    // next write: cause changes until the pipeline is over.
    let deadline = Instant::now() + PROCESS_TIMEOUT;
    let mut round = 0;
    let status = loop {
        if let Some(status) = sh.try_wait().expect("try_wait") {
            break status;
        }
        assert!(Instant::now() < deadline, "the pipeline never ended");
        let mut holder = Holder::hold(&state, &["--group", &format!("pipe{round}")]);
        holder.close_stdin();
        round += 1;
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut stdout = String::new();
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut sh.stdout.take().expect("stdout"), &mut stdout)
        .expect("stdout");
    std::io::Read::read_to_string(&mut sh.stderr.take().expect("stderr"), &mut stderr)
        .expect("stderr");
    assert!(status.success(), "{status:?} {stderr}");
    assert_eq!(
        stdout.lines().count(),
        1,
        "head printed one line: {stdout:?}"
    );
    assert!(stdout.contains("watcher"), "{stdout:?}");
    assert!(!stderr.contains("panic"), "{stderr}");
    let stderr: Vec<&str> = stderr
        .lines()
        .filter(|line| !common::is_source_note(line))
        .collect();
    assert_eq!(stderr, ["locktop-exit=0"], "{stderr:?}");
}

/// `watch` started before the locks dir exists: the initial state is
/// empty, so every key that appears afterwards is a change and gets its
/// `from: null` line (without `--initial` too).
#[test]
fn watch_without_initial_reports_keys_of_a_locks_dir_that_appears_later() {
    let _serial = serial_blocking();
    let (_tmp, state) = state_in_tempdir();
    assert!(!state.join("locks").exists());
    let mut watch = Watch::start(&state);
    watch.wait_line("waiting for the root", |v| {
        v["watcher"]["health"] == "waiting_for_root"
    });
    let holder = Holder::hold(&state, &["--aih", "i/a/b/c", "--tag", "x"]);
    let names = held_names(&holder);
    let pid = holder.pid();
    watch.wait_each(&names, None, "live", &[pid]);
    let first: Vec<&String> = watch
        .seen
        .iter()
        .filter(|line| line.contains("\"name\":\"x\""))
        .collect();
    assert!(
        first
            .first()
            .is_some_and(|line| line.contains("\"from\":null")),
        "tag x's first line is its appearance: {first:?}"
    );
}

/// One spelling of each liveness everywhere: `snapshot --json` says
/// `in-flight` (as `watch --json`, the screen and the README do).
#[test]
fn snapshot_json_spells_in_flight_as_watch_does() {
    let (_tmp, state) = state_in_tempdir();
    let (dir, key) = locktop::locks::agent_tag_lock(&state, "half taken");
    std::fs::create_dir_all(&dir).expect("tags dir");
    let gate = locktop::locks::escape::gate_path(&dir, &key);
    std::fs::write(&gate, b"").expect("gate");
    std::fs::write(locktop::locks::escape::announce_path(&dir, &key), b"").expect("announce");
    // A claim stopped mid-acquisition: the gate is locked, the announce not.
    let gate_file = std::fs::File::open(&gate).expect("open gate");
    nix::fcntl::Flock::lock(gate_file, nix::fcntl::FlockArg::LockExclusiveNonblock)
        .map(|locked| {
            let out = run_locktop(&state, &["snapshot", "--json", "--probe", "passive"]);
            assert_eq!(out.code(), 0, "{out:?}");
            let doc: Value = serde_json::from_str(out.stdout.trim()).expect("JSON");
            assert_eq!(doc["keys"][0]["liveness"], "in-flight", "{doc}");
            drop(locked);
        })
        .expect("flock the gate");
}

/// An exhausted inotify watch budget: in a user namespace of its own
/// (`unshare -Ur`, so the machine-wide limit and the other tests are
/// untouched) whose `max_inotify_watches` is 4, below the state dir's
/// directories. `watch` must say it is polling, and still report a holder
/// arriving and leaving.
#[test]
#[ignore = "soak: seconds of load or churn; the full suite runs it (cargo test -- --include-ignored)"]
fn watch_polls_when_the_inotify_watch_budget_is_spent_and_still_sees_holders() {
    let _serial = serial_blocking();
    let (_tmp, state) = state_in_tempdir();
    for i in 0..6 {
        drop(Holder::hold(
            &state,
            &["--aih", &format!("budget{i}/b/c-1")],
        ));
    }
    let mut command = Command::new("unshare");
    common::no_service(&mut command);
    command
        .args(["-Ur", "sh", "-c"])
        .arg(r#"echo 4 > /proc/sys/user/max_inotify_watches && exec "$0" --state-dir "$1" watch --json"#)
        .arg(locktop_bin())
        .arg(&state)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut watch = Watch::spawn(command);
    let polling = watch.wait_line("polling", |v| {
        v.get("watcher").is_some() && v["watcher"]["health"] != "starting"
    });
    assert_eq!(polling["watcher"]["health"], "polling", "{polling}");
    let reason = polling["watcher"]["reason"].as_str().unwrap_or_default();
    assert!(reason.contains("limit"), "{reason}");

    let mut holder = Holder::hold(&state, &["--tag", "budget"]);
    let pid = holder.pid();
    let names = held_names(&holder);
    watch.wait_each(&names, None, "live", &[pid]);
    holder.kill();
    watch.wait_each(&names, Some("live"), "free", &[]);

    watch.terminate_expecting_0();
}

/// `--state-dir` relative to the working directory: inotify reports
/// absolute paths, and every key an event found used to be an unnamed
/// `other` key (`"kind":"other","name":"/tmp/…/x-1"`).
#[test]
fn a_relative_state_dir_names_keys_found_by_events() {
    let _serial = serial_blocking();
    let (tmp, state) = state_in_tempdir();
    let relative = state
        .strip_prefix(tmp.path())
        .expect("state below its tempdir");
    drop(Holder::hold(&state, &["--tag", "seed"]));
    let mut command = common::locktop_command(relative, &["watch", "--json"]);
    command.current_dir(tmp.path());
    let mut watch = Watch::spawn(command);
    watch.wait_line("watching", |v| v["watcher"]["health"] == "watching");
    let mut holder = Holder::hold(&state, &["--aih", "cli/daemon/rel-1", "--tag", "rel"]);
    let names = held_names(&holder);
    watch.wait_each(&names, None, "live", &[holder.pid()]);
    holder.kill();
    assert!(
        !watch
            .seen
            .iter()
            .any(|line| line.contains(r#""kind":"other""#)),
        "{}",
        watch.seen.join("\n")
    );
}

/// In a nested PID namespace with its own `/proc` (`unshare -Urpf
/// --mount-proc`), `/proc/locks` lists no lock of a process outside it:
/// the lock-free probe would read every held key free. `snapshot` falls
/// back to the passive probe, says why in its JSON (and on stderr for the
/// table), and still reads the outside holder's tag held — with no PID,
/// and the reason none is named.
#[test]
fn in_a_nested_pid_namespace_the_probe_falls_back_and_says_why() {
    let (_tmp, state) = state_in_tempdir();
    let holder = Holder::hold(&state, &["--tag", "outside"]);
    let run = |json: bool| {
        let mut command = Command::new("unshare");
        common::no_service(&mut command);
        command
            .args(["-Urpf", "--mount-proc"])
            .arg(locktop_bin())
            .arg("--state-dir")
            .arg(&state)
            .arg("snapshot")
            .args(json.then_some("--json"))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        common::finish(command)
    };
    let out = run(true);
    assert_eq!(out.code(), 0, "{}", out.stderr);
    let doc: Value = serde_json::from_str(&out.stdout).expect("one JSON document");
    assert_eq!(doc["probe"], "passive", "{doc}");
    let why = doc["probe_fallback"].as_str().unwrap_or_default();
    assert!(why.contains("nested PID namespace"), "{doc}");
    let tag = doc["keys"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|key| key["name"] == "outside")
        .unwrap_or_else(|| panic!("the outside holder's tag is listed: {doc}"));
    assert_eq!(tag["liveness"], "live", "{tag}");
    assert_eq!(tag["holders_note"], "not_visible", "{tag}");

    let table = run(false);
    assert_eq!(table.code(), 0, "{}", table.stderr);
    let lines: Vec<&str> = table.stderr.lines().collect();
    assert!(
        matches!(&lines[..], [line] if line.contains("passive") && line.contains("nested PID namespace")),
        "one stderr line says which probe runs and why: {lines:?}"
    );
    drop(holder);
}

/// Outside any nested namespace the default is the lock-free probe, and
/// the JSON says so with no fallback.
#[test]
fn snapshot_json_names_the_lock_free_probe_by_default() {
    let (_tmp, state) = state_in_tempdir();
    let holder = Holder::hold(&state, &["--tag", "seen"]);
    let out = run_locktop(&state, &["snapshot", "--json"]);
    assert_eq!(out.code(), 0, "{}", out.stderr);
    let doc: Value = serde_json::from_str(&out.stdout).expect("one JSON document");
    assert_eq!(doc["probe"], "lock-free", "{doc}");
    assert!(doc.get("probe_fallback").is_none(), "{doc}");
    let pid = holder.pid();
    let tag = doc["keys"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|key| key["name"] == "seen")
        .unwrap_or_else(|| panic!("the tag is listed: {doc}"));
    assert_eq!(tag["liveness"], "live", "{tag}");
    assert_eq!(tag["holders"][0]["pid"], pid, "{tag}");
}

/// Four monitors on one state dir, of every probe mode (`watch --json
/// --probe lock-free|passive|acquire|acquire`): a holder comes and is SIGTERMed,
/// and each monitor reports the tag live, then free — and after that,
/// for 3 s, nothing more about it. Before the close confirmation, the
/// acquire monitors' probe writes were taken by the others for an
/// agent's: the freed tag flipped free ↔ live about 10 times a second.
#[test]
#[ignore = "soak: seconds of load or churn; the full suite runs it (cargo test -- --include-ignored)"]
fn monitors_in_every_mode_never_feed_each_other() {
    let _serial = serial_blocking();
    let (_tmp, state) = state_in_tempdir();
    std::fs::create_dir_all(tags_dir(&state)).unwrap();
    // Two acquire monitors: each one's probe writes are what the other
    // used to take for an agent's (one alone has only its own echo).
    let mut monitors: Vec<(&str, Watch)> = ["lock-free", "passive", "acquire", "acquire"]
        .into_iter()
        .map(|mode| (mode, Watch::start_with(&state, &["--probe", mode])))
        .collect();
    for (_, monitor) in &mut monitors {
        monitor.wait_line("watching", |v| v["watcher"]["health"] == "watching");
    }
    let mut holder = Holder::hold(&state, &["--tag", "relocated"]);
    let pid = holder.pid();
    let is_tag = |v: &Value| v["kind"] == "tag" && v["name"] == "relocated";
    for (mode, monitor) in &mut monitors {
        let live = monitor.wait_line("the tag live", |v| is_tag(v) && v["to"] == "live");
        assert_eq!(live["pids"], serde_json::json!([pid]), "{mode}: {live}");
    }
    holder.terminate();
    for (_, monitor) in &mut monitors {
        monitor.wait_line("the tag free", |v| is_tag(v) && v["to"] == "free");
    }
    // Every monitor's lines of the next 3 s (they run in parallel).
    let after: Vec<(&str, Vec<Value>)> = std::thread::scope(|scope| {
        let reading: Vec<_> = monitors
            .iter_mut()
            .map(|(mode, monitor)| {
                scope.spawn(move || (*mode, monitor.lines_within(Duration::from_secs(3))))
            })
            .collect();
        reading.into_iter().map(|r| r.join().unwrap()).collect()
    });
    for (mode, lines) in after {
        let about_the_tag: Vec<&Value> = lines.iter().filter(|v| is_tag(v)).collect();
        assert!(
            about_the_tag.is_empty(),
            "{mode}: the freed tag was reported again (phantom or flapping): {about_the_tag:?}"
        );
    }
}

/// A shared lock (util-linux `flock -s`) watched by monitors of every
/// probe mode, each with a 2 s sweep: each says `shared` with the
/// holder's PID once and `free` once it exits — nothing between and
/// nothing after. Seen before: the default monitor flapping `shared` ↔
/// `shared` with no PID (`released_before_lookup`) while a passive
/// monitor's probes came and went, and every monitor flashing
/// `orphaned_child` on the exited `flock` for as long as its probe took.
#[test]
#[ignore = "soak: seconds of load or churn; the full suite runs it (cargo test -- --include-ignored)"]
fn a_shared_holder_reads_shared_for_its_whole_life_in_every_mode() {
    let _serial = serial_blocking();
    let (_tmp, state) = state_in_tempdir();
    drop(Holder::hold(&state, &["--tag", "sh"])); // the tag's files
    let (dir, key) = locktop::locks::agent_tag_lock(&state, "sh");
    let gate = locktop::locks::escape::gate_path(&dir, &key);
    let mut monitors: Vec<(&str, Watch)> = ["lock-free", "passive", "acquire"]
        .into_iter()
        .map(|mode| {
            let watch = Watch::start_with(&state, &["--probe", mode, "--sweep", "2"]);
            (mode, watch)
        })
        .collect();
    for (_, monitor) in &mut monitors {
        monitor.wait_line("watching", |v| v["watcher"]["health"] == "watching");
    }
    let mut shared = std::process::Command::new("flock")
        .arg("-s")
        .arg(&gate)
        .args(["sleep", "4"])
        .spawn()
        .expect("flock -s");
    let pid = shared.id();
    let is_tag = |v: &Value| v["kind"] == "tag" && v["name"] == "sh";
    let lines: Vec<(&str, Vec<Value>)> = std::thread::scope(|scope| {
        let reading: Vec<_> = monitors
            .iter_mut()
            .map(|(mode, monitor)| {
                scope.spawn(move || (*mode, monitor.lines_within(Duration::from_secs(7))))
            })
            .collect();
        reading.into_iter().map(|r| r.join().unwrap()).collect()
    });
    let _ = shared.wait();
    for (mode, lines) in lines {
        let about: Vec<(String, Value, Option<Value>)> = lines
            .iter()
            .filter(|v| is_tag(v) || v["key"]["name"] == "sh")
            .map(|v| {
                let to = v["to"].as_str().map_or("verdict", |to| to).to_string();
                (to, v["pids"].clone(), v.get("verdict").cloned())
            })
            .collect();
        let states: Vec<(&str, &Value)> = about
            .iter()
            .filter(|(to, _, _)| to != "verdict")
            .map(|(to, pids, _)| (to.as_str(), pids))
            .collect();
        assert_eq!(
            states,
            vec![
                ("shared", &serde_json::json!([pid])),
                ("free", &serde_json::json!([]))
            ],
            "{mode}: {lines:?}"
        );
        assert!(
            about.iter().all(|(_, _, verdict)| verdict
                .as_ref()
                .is_none_or(|v| v.is_null() || v["kind"] != "orphaned_child")),
            "{mode}: an exited holder read as an orphan: {lines:?}"
        );
    }
}

/// `snapshot`'s table names each held key's verdict (a suspect is visible
/// without JSON), piped it prints lines whole, and on a terminal it cuts
/// every line to the terminal's width.
#[test]
fn the_snapshot_table_names_verdicts_and_fits_the_terminal() {
    let _serial = serial_blocking();
    let (_tmp, state) = state_in_tempdir();
    let long = "cli/daemon/an-agent-whose-instance-name-is-far-too-long-for-any-table";
    let holder = Holder::hold(&state, &["--aih", long, "--tag", "stuck"]);
    let pid = Pid::from_raw(holder.pid() as i32);
    signal::kill(pid, Signal::SIGSTOP).expect("SIGSTOP");
    let table = run_locktop(&state, &["snapshot"]);
    let mut tui = crate::common::pty::Tui::spawn(&state, &["snapshot"], 60, 20);
    assert_eq!(tui.wait_exit(Duration::from_secs(15)), Some(0));
    let (tty, raw) = (
        tui.screen(),
        String::from_utf8_lossy(&tui.raw()).into_owned(),
    );
    signal::kill(pid, Signal::SIGCONT).expect("SIGCONT");
    assert_eq!(table.code(), 0, "{table:?}");
    let header = table.stdout.lines().next().unwrap_or_default();
    assert!(header.contains("VERDICT"), "{}", table.stdout);
    let stuck = table.stdout.lines().find(|l| l.contains("stuck"));
    assert!(
        stuck.is_some_and(|line| line.contains("stopped")),
        "{}",
        table.stdout
    );
    assert!(
        table.stdout.contains(long),
        "piped: whole lines\n{}",
        table.stdout
    );
    assert!(tty.contains("VERDICT") && tty.contains("stopped"), "{tty}");
    assert!(tty.contains('…'), "cut on a 60-column terminal:\n{tty}");
    assert!(!raw.contains(long), "{raw}");
    assert!(
        raw.lines()
            .all(|line| line.trim_end().chars().count() <= 60),
        "{raw}"
    );
}
