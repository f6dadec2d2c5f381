//! `locktop check`: exit 0 when the family could be taken now, 1 when busy
//! with an explanation naming the holder, what else it holds and since
//! when; 2 on bad input. The check itself never keeps anything.

use crate::common::{Holder, run_locktop, state_in_tempdir};

#[test]
fn a_free_family_exits_zero_and_stays_free() {
    let (_tmp, state) = state_in_tempdir();
    let out = run_locktop(&state, &["check", "--aih", "cli/daemon/a1", "--tag", "t"]);
    assert_eq!(out.code(), 0, "{}", out.stderr);
    assert!(out.stdout.contains("free"), "{}", out.stdout);
    // Nothing lingers: another process can take the same family now.
    let holder = Holder::hold(&state, &["--aih", "cli/daemon/a1", "--tag", "t"]);
    assert!(holder.pid() > 0);
}

#[test]
fn a_stuck_tag_names_its_holder_and_everything_else_it_holds() {
    let (_tmp, state) = state_in_tempdir();
    let holder = Holder::hold(
        &state,
        &[
            "--aih",
            "cli/daemon/spawn-1",
            "--tag",
            "research: v2.1",
            "--tag",
            "other",
        ],
    );
    let out = run_locktop(&state, &["check", "--tag", "research: v2.1"]);
    assert_eq!(out.code(), 1, "{}", out.stderr);
    let pid = holder.pid().to_string();
    assert!(out.stdout.contains(&format!("pid {pid}")), "{}", out.stdout);
    assert!(
        out.stdout.contains("hold"),
        "the holder's command line: {}",
        out.stdout
    );
    assert!(out.stdout.contains(" for "), "{}", out.stdout);
    assert!(
        out.stdout.contains("instance \"cli/daemon/spawn-1\"")
            && out.stdout.contains("tag \"other\""),
        "what else the holder holds: {}",
        out.stdout
    );
}

#[test]
fn json_reports_each_member_busy_or_free() {
    let (_tmp, state) = state_in_tempdir();
    let holder = Holder::hold(&state, &["--group", "g1"]);
    let out = run_locktop(
        &state,
        &["check", "--json", "--group", "g1", "--group", "g2"],
    );
    assert_eq!(out.code(), 1);
    let report: serde_json::Value = serde_json::from_str(out.stdout.trim()).unwrap();
    assert_eq!(report["free"], false);
    let members = report["members"].as_array().unwrap();
    assert_eq!(members.len(), 2);
    assert_eq!(members[0]["name"], "g1");
    assert_eq!(members[0]["busy"], true);
    assert_eq!(members[0]["holders"][0]["process"]["pid"], holder.pid());
    assert_eq!(members[1]["name"], "g2");
    assert_eq!(members[1]["busy"], false);
}

#[test]
fn passive_check_agrees_and_never_writes() {
    let (_tmp, state) = state_in_tempdir();
    let _holder = Holder::hold(&state, &["--tag", "p"]);
    let out = run_locktop(
        &state,
        &["check", "--passive", "--tag", "p", "--tag", "never-seen"],
    );
    assert_eq!(out.code(), 1);
    assert!(out.stdout.contains("busy  tag \"p\""), "{}", out.stdout);
    let never_seen = state.join("locks/agents/tags/never-seen.lock");
    assert!(
        !never_seen.exists(),
        "a passive check must not create files"
    );
}

#[test]
fn bad_input_exits_two_with_one_line() {
    let (_tmp, state) = state_in_tempdir();
    for args in [
        vec!["check", "--aih", "../x"],
        vec!["check", "--aih", "a//b"],
        vec!["check"],
        vec!["check", "--aih", "a", "--group", "g"],
        // Reported from the field: merged into one group without a word.
        vec!["check", "--tag", "a", "--group", "g"],
        vec!["check", "--group", "g", "--tag", "a"],
        // hold names families as check does (the same flags).
        vec!["hold", "--tag", "a", "--group", "g"],
    ] {
        let out = run_locktop(&state, &args);
        assert_eq!(out.code(), 2, "{args:?}: {}", out.stderr);
        let first = out.stderr.lines().next().unwrap_or_default();
        assert!(
            first.starts_with("locktop: ") || first.starts_with("error: "),
            "{args:?}: the first stderr line states the error: {}",
            out.stderr
        );
        assert!(!out.stderr.contains("panicked"), "{args:?}: {}", out.stderr);
    }
}

/// Every way `check`, `check --passive`, `hold` and `hold --wait` meet a
/// lock path that is no lock file. Each must answer at once (a FIFO's open
/// would block forever), exit 2 and leave the path as it was.
fn answers_without_opening(state: &std::path::Path, tag: &str, what: &str) {
    for args in [
        &["check", "--tag", tag][..],
        &["check", "--passive", "--tag", tag][..],
        &["hold", "--tag", tag][..],
        &["hold", "--wait", "--tag", tag][..],
    ] {
        let out = run_locktop(state, args);
        assert_eq!(out.code(), 2, "{args:?}: {out:?}");
        assert!(out.stderr.contains(what), "{args:?}: {}", out.stderr);
        assert_eq!(out.stderr_lines().len(), 1, "{args:?}: one line");
    }
    let json = run_locktop(state, &["check", "--json", "--tag", tag]);
    assert_eq!(json.code(), 2, "{json:?}");
    let doc: serde_json::Value = serde_json::from_str(json.stdout.trim()).expect("one JSON doc");
    assert_eq!(doc["free"], false, "{doc}");
    assert_eq!(doc["error"]["kind"], "unavailable", "{doc}");
    assert_eq!(doc["error"]["member"], format!("tag {tag:?}"), "{doc}");
}

#[test]
fn a_fifo_a_directory_or_a_socket_at_a_lock_path_is_unavailable_never_opened() {
    let (_tmp, state) = state_in_tempdir();
    let tags = state.join("locks/agents/tags");
    std::fs::create_dir_all(tags.join("blocked.lock")).unwrap();
    let mode = nix::sys::stat::Mode::S_IRWXU;
    nix::unistd::mkfifo(&tags.join("fifo.lock"), mode).unwrap();
    // A held-looking gate whose announce is a FIFO.
    std::fs::write(tags.join("half.lock"), b"").unwrap();
    nix::unistd::mkfifo(&tags.join("half.live.lock"), mode).unwrap();
    let _socket = std::os::unix::net::UnixListener::bind(tags.join("sock.lock")).unwrap();
    answers_without_opening(&state, "blocked", "is a directory");
    answers_without_opening(&state, "fifo", "is a FIFO");
    answers_without_opening(&state, "half", "is a FIFO");
    answers_without_opening(&state, "sock", "is a socket");
    assert!(tags.join("blocked.lock").is_dir());
}

#[test]
fn a_gate_with_content_is_never_truncated() {
    let (_tmp, state) = state_in_tempdir();
    let tags = state.join("locks/agents/tags");
    std::fs::create_dir_all(&tags).unwrap();
    let gate = tags.join("data.lock");
    std::fs::write(&gate, b"not an agent lock").unwrap();
    answers_without_opening(&state, "data", "agent gates are empty");
    assert_eq!(std::fs::read(&gate).unwrap(), b"not an agent lock");
}

#[test]
fn a_state_dir_that_does_not_exist_is_an_error_and_is_not_created() {
    let (tmp, _state) = state_in_tempdir();
    let typo = tmp.path().join("no/such/state");
    for args in [&["hold", "--tag", "x"][..], &["check", "--tag", "x"][..]] {
        let out = run_locktop(&typo, args);
        assert_eq!(out.code(), 2, "{args:?}: {out:?}");
        assert!(out.stderr.contains("does not exist"), "{}", out.stderr);
        assert_eq!(out.stderr_lines().len(), 1, "{args:?}: one line");
        assert!(!tmp.path().join("no").exists(), "{args:?} created it");
    }
    let json = run_locktop(&typo, &["check", "--json", "--tag", "x"]);
    assert_eq!(json.code(), 2);
    let doc: serde_json::Value = serde_json::from_str(json.stdout.trim()).expect("one JSON doc");
    assert_eq!(doc["error"]["kind"], "bad_input", "{doc}");
}

#[test]
fn json_answers_bad_input_with_one_document_too() {
    let (_tmp, state) = state_in_tempdir();
    for (args, kind) in [
        (&["check", "--json"][..], "bad_input"),
        (&["check", "--json", "--aih", "../x"][..], "invalid_member"),
    ] {
        let out = run_locktop(&state, args);
        assert_eq!(out.code(), 2, "{args:?}: {out:?}");
        let doc: serde_json::Value =
            serde_json::from_str(out.stdout.trim()).unwrap_or_else(|e| panic!("{args:?}: {e}"));
        assert_eq!(doc["error"]["kind"], kind, "{doc}");
        assert!(doc["error"]["message"].is_string(), "{doc}");
    }
}

/// util-linux `flock -s` on a tag's gate: not an SDK holder, yet every
/// agent's acquire fails. It is shown (`shared`, with its PID), and a check
/// calls the tag busy — in both probe modes — instead of "nobody holds it".
#[test]
fn a_shared_lock_is_busy_and_named_not_nobody() {
    let (_tmp, state) = state_in_tempdir();
    drop(Holder::hold(&state, &["--tag", "t"])); // leaves the tag's files
    let (dir, key) = locktop::locks::agent_tag_lock(&state, "t");
    let gate = locktop::locks::escape::gate_path(&dir, &key);
    // Its own process group: flock(1) and its `sleep` go together.
    let mut flock = std::os::unix::process::CommandExt::process_group(
        std::process::Command::new("flock")
            .arg("-s")
            .arg(&gate)
            .args(["sleep", "60"]),
        0,
    )
    .spawn()
    .expect("util-linux flock");
    let pid = flock.id();
    let deadline = std::time::Instant::now() + crate::common::PROCESS_TIMEOUT;
    let doc = loop {
        let out = run_locktop(
            &state,
            &["snapshot", "--json", "--all", "--probe", "passive"],
        );
        let doc: serde_json::Value = serde_json::from_str(out.stdout.trim()).expect("JSON");
        if doc["keys"][0]["liveness"] == "shared" || std::time::Instant::now() > deadline {
            break doc;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    assert_eq!(doc["keys"][0]["liveness"], "shared", "{doc}");
    assert_eq!(doc["keys"][0]["holders"][0]["pid"], pid, "{doc}");
    for args in [
        &["check", "--tag", "t"][..],
        &["check", "--passive", "--tag", "t"][..],
    ] {
        let out = run_locktop(&state, args);
        assert_eq!(out.code(), 1, "{args:?}: {out:?}");
        assert!(out.stdout.contains("SHARED"), "{args:?}: {}", out.stdout);
        assert!(
            out.stdout.contains(&pid.to_string()),
            "{args:?}: {}",
            out.stdout
        );
    }
    let group = nix::unistd::Pid::from_raw(-(pid as i32));
    let _ = nix::sys::signal::kill(group, nix::sys::signal::Signal::SIGKILL);
    let _ = flock.wait();
}

/// "Why can't I relocate this tag?" in one answer: the verdict names the
/// agent (its AIH) and says what to do; a stopped holder's says how to
/// continue it; `--json` carries the same verdict.
#[test]
fn check_gives_the_verdict_agent_active_or_stopped() {
    let (_tmp, state) = state_in_tempdir();
    let holder = Holder::hold(
        &state,
        &["--aih", "cli/daemon/worker-1", "--tag", "busy tag"],
    );
    let out = run_locktop(&state, &["check", "--tag", "busy tag"]);
    assert_eq!(out.code(), 1, "{out:?}");
    assert!(
        out.stdout
            .contains("verdict: agent active: cli/daemon/worker-1"),
        "{}",
        out.stdout
    );
    let pid = nix::unistd::Pid::from_raw(holder.pid() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGSTOP).expect("SIGSTOP");
    let out = run_locktop(&state, &["check", "--json", "--tag", "busy tag"]);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGCONT).expect("SIGCONT");
    let doc: serde_json::Value = serde_json::from_str(out.stdout.trim()).expect("JSON");
    let verdict = &doc["members"][0]["verdict"];
    assert_eq!(verdict["kind"], "stopped", "{doc}");
    assert_eq!(verdict["pid"], holder.pid(), "{doc}");
    assert_eq!(
        doc["members"][0]["holders"][0]["process"]["state"], "stopped",
        "{doc}"
    );
}

/// `locktop wait` blocks as agents do: `--acquire` queues in the SDK's
/// `wait_acquire` (a contender: `check` then says the key is contended,
/// naming it), plain `wait` in `wait_released` (a watcher, which does not
/// contend). Both return 0 once the holder is gone; neither keeps
/// anything.
#[test]
fn wait_contends_or_watches_and_check_says_contended() {
    use std::time::{Duration, Instant};
    let (_tmp, state) = state_in_tempdir();
    let mut holder = Holder::hold(&state, &["--aih", "cli/daemon/held-1", "--tag", "queued"]);
    let spawn_wait = |extra: &[&str]| {
        let mut args = vec!["wait", "--tag", "queued"];
        args.extend_from_slice(extra);
        crate::common::locktop_command(&state, &args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("spawn wait")
    };
    let mut contender = spawn_wait(&["--acquire"]);
    let mut watcher = spawn_wait(&[]);
    let deadline = Instant::now() + Duration::from_secs(10);
    let member = loop {
        let out = run_locktop(&state, &["check", "--json", "--tag", "queued"]);
        let doc: serde_json::Value = serde_json::from_str(out.stdout.trim()).expect("JSON");
        let member = doc["members"][0].clone();
        let both = member["verdict"]["kind"] == "contended"
            && member["watchers"][0]["pid"] == watcher.id();
        if both || Instant::now() > deadline {
            break member;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    // The waiters by kind, with their command lines.
    assert_eq!(member["contenders"][0]["pid"], contender.id(), "{member}");
    assert_eq!(member["watchers"][0]["pid"], watcher.id(), "{member}");
    assert!(
        member["watchers"][0]["cmdline"]
            .as_str()
            .is_some_and(|c| c.contains("wait")),
        "{member}"
    );
    let text = run_locktop(&state, &["check", "--tag", "queued"]).stdout;
    assert!(
        text.contains(&format!("pid {} waits to take it", contender.id()))
            && text.contains(&format!("pid {} waits for its release", watcher.id())),
        "{text}"
    );
    let verdict = member["verdict"].clone();
    assert_eq!(verdict["kind"], "contended", "{verdict}");
    assert_eq!(
        verdict["waiters"],
        serde_json::json!([contender.id()]),
        "{verdict}"
    );
    assert_eq!(verdict["aih"], "cli/daemon/held-1", "{verdict}");
    assert_eq!(verdict["pid"], holder.pid(), "{verdict}");
    holder.terminate();
    for (child, outcome, said) in [
        (&mut contender, "taken", "waiting to take tag"),
        (
            &mut watcher,
            "released",
            "waiting until it is released: tag",
        ),
    ] {
        let status = crate::common::wait_with_timeout(child, Duration::from_secs(10));
        assert_eq!(
            status.and_then(|s| s.code()),
            Some(0),
            "a waiter did not end"
        );
        let read = |pipe: &mut dyn std::io::Read| {
            let mut text = String::new();
            pipe.read_to_string(&mut text).unwrap();
            text
        };
        let (stdout, stderr) = (
            read(child.stdout.as_mut().unwrap()),
            read(child.stderr.as_mut().unwrap()),
        );
        let doc: serde_json::Value = serde_json::from_str(stdout.trim()).expect("JSON");
        assert_eq!(doc["outcome"], outcome, "{stdout}");
        assert!(
            stderr.contains(said) && stderr.contains("held now"),
            "it says what it waits on while it waits: {stderr}"
        );
    }
    let out = run_locktop(&state, &["check", "--tag", "queued"]);
    assert_eq!(out.code(), 0, "nothing kept: {out:?}");
    // A key that is free when asked: at once, and not "released".
    let free = run_locktop(&state, &["wait", "--tag", "never-held"]);
    assert_eq!(free.code(), 0, "{free:?}");
    let doc: serde_json::Value = serde_json::from_str(free.stdout.trim()).expect("JSON");
    assert_eq!(doc["outcome"], "free", "{}", free.stdout);
}

/// `wait` refuses a lock path that is not a regular file, as `check`
/// does, before it opens anything: it used to block forever opening a
/// FIFO announce (the SDK's `wait_released` opens it without
/// `O_NONBLOCK`), and to answer `{"released":true}` at once for a
/// directory (a directory takes a flock). Its `--help` offers only the
/// flags it takes.
#[test]
fn wait_refuses_a_fifo_or_a_directory_and_offers_only_its_own_flags() {
    let (_tmp, state) = state_in_tempdir();
    let tags = state.join("locks/agents/tags");
    std::fs::create_dir_all(&tags).unwrap();
    let mode = nix::sys::stat::Mode::S_IRWXU;
    std::fs::write(tags.join("piped.lock"), b"").unwrap();
    nix::unistd::mkfifo(&tags.join("piped.live.lock"), mode).unwrap();
    std::fs::write(tags.join("dir.lock"), b"").unwrap();
    std::fs::create_dir(tags.join("dir.live.lock")).unwrap();
    for (tag, what) in [("piped", "is a FIFO"), ("dir", "is a directory")] {
        for extra in [&[][..], &["--acquire"][..]] {
            let mut args = vec!["wait", "--tag", tag];
            args.extend_from_slice(extra);
            let out = run_locktop(&state, &args);
            assert_eq!(out.code(), 2, "{args:?}: {out:?}");
            assert!(out.stdout.is_empty(), "{args:?}: {}", out.stdout);
            assert_eq!(out.stderr_lines().len(), 1, "{args:?}: {}", out.stderr);
            assert!(out.stderr.contains(what), "{args:?}: {}", out.stderr);
        }
    }
    let help = run_locktop(&state, &["wait", "--help"]);
    assert_eq!(help.code(), 0, "{help:?}");
    assert!(
        help.stdout.contains("--tag") && help.stdout.contains("--aih"),
        "{}",
        help.stdout
    );
    assert!(!help.stdout.contains("--group"), "{}", help.stdout);
    let both = run_locktop(&state, &["wait", "--tag", "a", "--aih", "b/c"]);
    assert_eq!(both.code(), 2, "one key at a time: {both:?}");
}
