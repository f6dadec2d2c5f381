//! The verdicts `snapshot --json` and `watch --json` give, on real
//! processes: a lock kept by a forked child after the process that took it
//! died is named by its true holder, as an orphaned child; `watch` says
//! when a verdict changes.

use super::snapshot_watch::Watch;
use crate::common::flock::{keeper, keeper_naming};
use crate::common::{Holder, run_locktop, skip_unless, sleep_with_pid, state_in_tempdir};

#[test]
fn a_lock_kept_after_its_taker_died_names_the_true_holder_as_an_orphaned_child() {
    let (_tmp, state) = state_in_tempdir();
    drop(Holder::hold(&state, &["--tag", "kept"])); // the tag's files
    let (dir, key) = locktop::locks::agent_tag_lock(&state, "kept");
    let gate = locktop::locks::escape::gate_path(&dir, &key);
    let announce = locktop::locks::escape::announce_path(&dir, &key);
    let mut keeper = keeper(&gate, &announce, "flock -x 3 && flock -x 4");

    let out = run_locktop(&state, &["snapshot", "--json", "--probe", "passive"]);
    assert_eq!(out.code(), 0, "{out:?}");
    let doc: serde_json::Value = serde_json::from_str(out.stdout.trim()).expect("JSON");
    let kept = &doc["keys"][0];
    assert_eq!(kept["name"], "kept", "{doc}");
    assert_eq!(kept["liveness"], "live", "{doc}");
    assert_eq!(
        kept["holders"][0]["pid"],
        keeper.id(),
        "the true holder first: {doc}"
    );
    assert_eq!(kept["holders"][0]["alive"], true, "{doc}");
    assert_eq!(kept["verdict"]["kind"], "orphaned_child", "{doc}");
    assert_eq!(kept["verdict"]["pid"], keeper.id(), "{doc}");
    let _ = keeper.kill();
    let _ = keeper.wait();
}

/// `watch --json` says when a key's verdict changes, on real holders: an
/// agent's keys become `agent_active`; a spawn holding a tag without an
/// AIH lock becomes `materializing_too_long` on the clock alone (a
/// lowered `--materializing-after`); a SIGSTOP makes the agent's keys
/// `stopped` and a SIGCONT makes them `agent_active` again (no filesystem
/// event: the once-a-second look at holders); its death takes the
/// verdict away (`null`).
#[test]
fn watch_json_emits_a_line_when_a_verdict_changes() {
    use nix::sys::signal::{Signal, kill};
    let _serial = crate::common::serial_blocking();
    let (_tmp, state) = state_in_tempdir();
    let mut watch = Watch::start_with(&state, &["--materializing-after", "1"]);
    watch.wait_line("waiting for the locks dir", |v| {
        v["watcher"]["health"] == "waiting_for_root"
    });
    let mut agent = Holder::hold(
        &state,
        &["--aih", "cli/daemon/judged", "--tag", "judged tag"],
    );
    let pid = agent.pid();
    let both = ["cli/daemon/judged", "judged tag"];
    for line in verdicts_of(&mut watch, &both, None, Some("agent_active")) {
        assert_eq!(line["verdict"]["pid"], pid, "{line}");
        assert_eq!(line["verdict"]["aih"], "cli/daemon/judged", "{line}");
    }
    let mut spawn = Holder::hold(&state, &["--tag", "spawned"]);
    // A spawn is `materializing` at once, a suspect past the threshold.
    verdicts_of(&mut watch, &["spawned"], None, Some("materializing"));
    let line = verdicts_of(
        &mut watch,
        &["spawned"],
        Some("materializing"),
        Some("materializing_too_long"),
    );
    assert_eq!(line[0]["verdict"]["pid"], spawn.pid(), "{line:?}");

    let raw = nix::unistd::Pid::from_raw(pid as i32);
    kill(raw, Signal::SIGSTOP).expect("SIGSTOP");
    verdicts_of(&mut watch, &both, Some("agent_active"), Some("stopped"));
    kill(raw, Signal::SIGCONT).expect("SIGCONT");
    verdicts_of(&mut watch, &both, Some("stopped"), Some("agent_active"));
    agent.kill();
    // The kill frees the AIH lock and the tag one after the other: for a
    // moment the dying pid holds a tag without an AIH lock — a spawn, by
    // the locks alone — so the tag may pass through `materializing` or
    // `materializing too long` (held past the lowered 1 s threshold) on
    // its way to none.
    let mut left: Vec<&str> = both.to_vec();
    while !left.is_empty() {
        let line = watch.wait_line(&format!("the verdicts of {left:?} gone"), |v| {
            v.get("verdict").is_some()
                && v["verdict"].is_null()
                && left.iter().any(|name| v["key"]["name"] == *name)
        });
        let from = line["verdict_from"].as_str();
        let tag = line["key"]["name"] == "judged tag";
        assert!(
            from == Some("agent_active")
                || (tag && matches!(from, Some("materializing" | "materializing_too_long"))),
            "{line}"
        );
        left.retain(|name| line["key"]["name"] != *name);
    }
    spawn.kill();
}

/// Waits for a verdict line `from` → `to` of each of `names` (in any
/// order); returns them.
fn verdicts_of(
    watch: &mut Watch,
    names: &[&str],
    from: Option<&str>,
    to: Option<&str>,
) -> Vec<serde_json::Value> {
    let mut left: Vec<&str> = names.to_vec();
    let mut lines = Vec::new();
    while !left.is_empty() {
        let line = watch.wait_line(&format!("verdict {from:?} → {to:?} of {left:?}"), |v| {
            v.get("verdict").is_some()
                && v["verdict"]["kind"].as_str() == to
                && left.iter().any(|name| v["key"]["name"] == *name)
        });
        assert_eq!(line["verdict_from"].as_str(), from, "{line}");
        assert!(line["time"].is_string(), "{line}");
        assert!(line.get("kind").is_none(), "no top-level kind: {line}");
        left.retain(|name| line["key"]["name"] != *name);
        lines.push(line);
    }
    lines
}

/// `watch --initial` gives no verdict before its first full scan is
/// over: an agent's tag, read before its AIH lock, used to be judged
/// `materializing_too_long` (a spawn holding tags and no AIH lock) in 2
/// runs of 3, and corrected a moment later. Its first verdict line is
/// `agent_active`, and no other comes before it.
#[test]
fn watch_initial_judges_a_holder_once_all_its_keys_are_known() {
    let (_tmp, state) = state_in_tempdir();
    let agent = Holder::hold(&state, &["--aih", "cli/daemon/abc-1", "--tag", "relocated"]);
    // Held for longer than the lowered threshold: a tag alone would be
    // materializing too long.
    std::thread::sleep(std::time::Duration::from_millis(300));
    for _ in 0..3 {
        let mut watch = Watch::start_with(&state, &["--initial", "--materializing-after", "0.1"]);
        let first = watch.wait_line("a verdict line for the tag", |line| {
            line["key"]["name"] == "relocated" && line.get("verdict").is_some()
        });
        assert_eq!(
            first["verdict"]["kind"],
            "agent_active",
            "the first verdict of an agent's tag: {first}\n{}",
            watch.seen.join("\n")
        );
        assert_eq!(first["verdict"]["pid"], agent.pid(), "{first}");
    }
}

/// An age comes from facts about this holder (issue: `check` on a key
/// whose gate was just taken said "held by pid N for 5m00s …
/// materializing too long … SIGTERM it", from an earlier holder's
/// announce): a claim in flight has no age, and a held claim's age never
/// exceeds its holder's own.
#[test]
fn check_never_gives_a_holder_an_age_older_than_itself() {
    let (_tmp, state) = state_in_tempdir();
    drop(Holder::hold(&state, &["--tag", "aged"])); // the tag's files
    let (dir, key) = locktop::locks::agent_tag_lock(&state, "aged");
    let gate = locktop::locks::escape::gate_path(&dir, &key);
    let announce = locktop::locks::escape::announce_path(&dir, &key);
    let ten_minutes_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(600);
    let age_announce = || {
        std::fs::File::options()
            .write(true)
            .open(&announce)
            .and_then(|file| file.set_modified(ten_minutes_ago))
            .expect("age the announce");
    };
    // A keeper shell that takes `locks` (through util-linux flock(1)) and
    // sleeps; the claim is in flight with the gate alone, held with both.
    let check = || {
        let out = run_locktop(&state, &["check", "--json", "--tag", "aged"]);
        assert_eq!(out.code(), 1, "busy: {out:?}");
        let doc: serde_json::Value = serde_json::from_str(out.stdout.trim()).expect("JSON");
        assert_ne!(
            doc["members"][0]["verdict"]["kind"], "materializing_too_long",
            "a verdict on an earlier holder's age: {doc}"
        );
        doc
    };
    // In flight: the gate alone, taken by util-linux flock(1) through a
    // shell that keeps it; the announce is an earlier holder's.
    let mut keeper = keeper(&gate, &announce, "flock -x 3");
    age_announce();
    let doc = check();
    assert!(
        doc["members"][0]["holders"][0]["since"].is_null(),
        "in flight, no age: {doc}"
    );
    let _ = keeper.kill();
    let _ = keeper.wait();
    // Held by an agent that started a moment ago, under an announce ten
    // minutes old: its age is at most its own.
    let agent = Holder::hold(&state, &["--tag", "aged"]);
    age_announce();
    let doc = check();
    let holder = &doc["members"][0]["holders"][0];
    assert_eq!(holder["process"]["pid"], agent.pid(), "{doc}");
    let since = holder["since"].as_str().expect("held: an age");
    let started = holder["process"]["started"]
        .as_str()
        .unwrap_or_else(|| panic!("a start time: {doc}"));
    assert!(since >= started, "older than its holder: {doc}");
}

/// A lock kept by a forked child after its taker died is the same story
/// in every view: `check` names the keeper, not the gone flock(1) callers
/// (it named them, and advised waiting for an "agent"), and the verdict
/// stays `orphaned_child` once the taker's PID belongs to another process
/// — in `snapshot`, in a `watch` started before the reuse and in one
/// started after (they switched to `agent_active` on the new process).
#[test]
fn an_orphaned_lock_is_its_keepers_in_every_view_and_after_pid_reuse() {
    let (_tmp, state) = state_in_tempdir();
    drop(Holder::hold(&state, &["--tag", "kept"])); // the tag's files
    let (dir, key) = locktop::locks::agent_tag_lock(&state, "kept");
    let gate = locktop::locks::escape::gate_path(&dir, &key);
    let announce = locktop::locks::escape::announce_path(&dir, &key);
    let (mut keeper, callers) = keeper_naming(&gate, &announce, "flock -x 3 && flock -x 4");
    // Taken a while ago: a process started since cannot be its taker.
    let a_minute_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(60);
    std::fs::File::options()
        .write(true)
        .open(&announce)
        .and_then(|file| file.set_modified(a_minute_ago))
        .expect("age the announce");
    let orphaned = |verdict: &serde_json::Value| {
        verdict["kind"] == "orphaned_child" && verdict["pid"] == keeper.id()
    };

    let out = run_locktop(&state, &["check", "--json", "--tag", "kept"]);
    assert_eq!(out.code(), 1, "busy: {out:?}");
    let doc: serde_json::Value = serde_json::from_str(out.stdout.trim()).expect("JSON");
    let member = &doc["members"][0];
    assert_eq!(member["holders"][0]["process"]["pid"], keeper.id(), "{doc}");
    assert!(orphaned(&member["verdict"]), "{doc}");

    let mut before = Watch::start_with(&state, &["--initial"]);
    before.wait_line("the orphan's verdict", |line| {
        line["key"]["name"] == "kept" && orphaned(&line["verdict"])
    });

    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let why = "skipped the PID-reuse half: needs root (a reuse as /proc/locks names it \
               happens in the initial PID namespace)";
    if !skip_unless(root, why) {
        let _ = keeper.kill();
        let _ = keeper.wait();
        return;
    }
    let mut impostor = sleep_with_pid(callers[0]);
    // A look at the claim (a close of its gate) makes the running watch
    // look up its holders again.
    drop(std::fs::File::open(&gate).expect("open the gate"));
    let after_reuse = before.lines_within(std::time::Duration::from_millis(1500));
    assert!(
        after_reuse
            .iter()
            .filter(|line| line["key"]["name"] == "kept" && line.get("verdict").is_some())
            .all(|line| orphaned(&line["verdict"])),
        "the running watch changed its verdict after the reuse: {after_reuse:?}"
    );
    let out = run_locktop(&state, &["snapshot", "--json"]);
    let doc: serde_json::Value = serde_json::from_str(out.stdout.trim()).expect("JSON");
    let kept = &doc["keys"][0];
    assert!(orphaned(&kept["verdict"]), "{doc}");
    let holders = kept["holders"].as_array().expect("holders");
    assert!(
        holders
            .iter()
            .filter(|holder| holder["pid"] == impostor.id())
            .all(|holder| holder["alive"] == false && holder["cmdline"].is_null()),
        "the new process behind the taker's PID is never described: {doc}"
    );
    let mut after = Watch::start_with(&state, &["--initial"]);
    after.wait_line("the orphan's verdict after the reuse", |line| {
        line["key"]["name"] == "kept" && orphaned(&line["verdict"])
    });
    for child in [&mut keeper, &mut impostor] {
        let _ = child.kill();
        let _ = child.wait();
    }
}

/// No line for a change that is not one: other monitors' probes
/// (`snapshot --probe passive`, `check`) open the claim files and made
/// `watch` print `live → live` lines with the same PIDs; and a holder
/// releasing its family (AIH lock, then tag) made the contended tag read
/// `contended` with no agent (`aih: null`) just before it went free.
/// Watches in the lock-free and the passive mode, side by side.
#[test]
#[ignore = "soak: seconds of load or churn; the full suite runs it (cargo test -- --include-ignored)"]
fn watch_prints_no_line_for_a_change_that_is_not_one() {
    use nix::sys::signal::{Signal, kill};
    use std::time::Duration;
    let _serial = crate::common::serial_blocking();
    let (_tmp, state) = state_in_tempdir();
    let agent = Holder::hold(&state, &["--aih", "cli/daemon/quiet", "--tag", "queued"]);
    let mut watches: Vec<Watch> = ["lock-free", "passive", "acquire"]
        .iter()
        .map(|mode| Watch::start_with(&state, &["--probe", mode]))
        .collect();
    for watch in &mut watches {
        watch.wait_line("the initial scan", |v| v["watcher"]["health"] == "watching");
    }
    let mut contender =
        crate::common::locktop_command(&state, &["wait", "--acquire", "--tag", "queued"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("spawn a contender");
    for watch in &mut watches {
        watch.wait_line("the tag contended", |v| {
            v["key"]["name"] == "queued" && v["verdict"]["kind"] == "contended"
        });
    }
    for _ in 0..3 {
        for args in [
            &["snapshot", "--probe", "passive"][..],
            &["check", "--tag", "queued"][..],
            &["check", "--aih", "cli/daemon/quiet"][..],
            &["check", "--probe", "acquire", "--tag", "queued"][..],
            &["snapshot", "--probe", "acquire"][..],
        ] {
            let _ = run_locktop(&state, args);
        }
    }
    for watch in &mut watches {
        let probed = watch.lines_within(Duration::from_secs(2));
        // With the kernel's lock events, the acquire probes' refused
        // tries are tries to take the key, refused: that is news, said
        // with `refused` (the passive ones only check, and are not).
        let repeats: Vec<_> = probed
            .iter()
            .filter(|v| v.get("to").is_some() && v["from"] == v["to"])
            .filter(|v| v.get("refused").is_none())
            .collect();
        assert!(repeats.is_empty(), "lines that change nothing: {repeats:?}");
    }

    kill(
        nix::unistd::Pid::from_raw(agent.pid() as i32),
        Signal::SIGTERM,
    )
    .expect("SIGTERM");
    let status = crate::common::wait_with_timeout(&mut contender, Duration::from_secs(10));
    assert_eq!(
        status.and_then(|s| s.code()),
        Some(0),
        "the contender took it"
    );
    for watch in &mut watches {
        let released = watch.lines_within(Duration::from_secs(2));
        let agentless: Vec<_> = released
            .iter()
            .filter(|v| v["verdict"]["kind"] == "contended" && v["verdict"]["aih"].is_null())
            .collect();
        assert!(
            agentless.is_empty(),
            "a contended line naming no agent on release: {agentless:?}\n{}",
            watch.seen.join("\n")
        );
    }
}
