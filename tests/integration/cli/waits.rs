//! Who waits for whom, on real processes holding real locks through the
//! SDK (`locktop hold … --then-wait-*`: each holds its family, then waits
//! for one more key, as a relocating agent does): a circle of two, of
//! three, one closed by a watcher's shared wait through an instance lock,
//! a chain of four whose root is stopped, and the same without the
//! closing wait. Every face is asked: `snapshot --json` (one look: a
//! cycle, never yet a deadlock), `check` (looks twice: exit 3 for a
//! deadlock), `watch --json` under the kernel's events and under
//! inference (a deadlock verdict, which ends when a member is killed,
//! and the survivor takes the key), and a monitor that is not root (the
//! holders it cannot verify make the cycle one that may clear).

use std::path::Path;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::Value;

use super::snapshot_watch::Watch;
use crate::common::{
    self, Holder, locktop_command, run_locktop, serial_blocking, skip_unless, state_in_tempdir,
};

/// How long each holder holds its family before its extra wait begins:
/// long enough for every holder of a shape to have taken its own.
const WORK: &str = "1.5";

/// A holder of `family` that then waits (`--then-wait-*` args) for one
/// more key.
fn waiting_holder(state: &Path, family: &[&str], then: &[&str]) -> Holder {
    let mut args: Vec<&str> = family.to_vec();
    args.extend_from_slice(then);
    args.extend_from_slice(&["--then-wait-after", WORK]);
    Holder::hold(state, &args)
}

/// `snapshot --json`, polled until `done` accepts its document (the
/// holders' waits begin after [`WORK`]); panics with the last one.
fn snapshot_until(state: &Path, what: &str, done: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let out = run_locktop(state, &["snapshot", "--json"]);
        assert_eq!(out.code(), 0, "{out:?}");
        let doc: Value = serde_json::from_str(out.stdout.trim()).expect("JSON");
        if done(&doc) {
            return doc;
        }
        assert!(Instant::now() < deadline, "no snapshot {what}: {doc:#}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn members(cycle: &Value) -> Vec<u64> {
    cycle["members"]
        .as_array()
        .expect("members")
        .iter()
        .map(|pid| pid.as_u64().expect("pid"))
        .collect()
}

fn sorted(mut pids: Vec<u32>) -> Vec<u64> {
    pids.sort_unstable();
    pids.into_iter().map(u64::from).collect()
}

/// The next `watch --json` verdict line of tag `tag` whose verdict kind
/// `accept` takes (`None`: the verdict went away).
fn verdict_line(watch: &mut Watch, tag: &str, accept: impl Fn(Option<&str>) -> bool) -> Value {
    watch.wait_line(&format!("a verdict of tag {tag}"), |v| {
        v["key"]["kind"] == "tag" && v["key"]["name"] == tag && v.get("verdict").is_some() && {
            let kind = v["verdict"]["kind"].as_str();
            accept(kind)
        }
    })
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// Two agents, each holding its AIH lock and a tag and then waiting to
/// take the other's tag: one look calls it a cycle (never yet a
/// deadlock), `check` a deadlock (exit 3, naming both), and both kinds of
/// monitor a deadlock on both tags; killing one member ends it in every
/// face, and the other takes the tag it waited for.
#[test]
fn two_agents_waiting_on_each_other_are_a_deadlock_in_every_face_until_one_is_killed() {
    let _serial = serial_blocking();
    let (_tmp, state) = state_in_tempdir();
    // The tags' files exist before any monitor starts.
    drop(Holder::hold(
        &state,
        &["--group", "alpha", "--group", "beta"],
    ));
    let kernel = skip_unless(
        is_root(),
        "kernel source part of two_agents_waiting_on_each_other…: needs root (or CAP_PERFMON)",
    );
    let mut watches = vec![(
        "inference",
        Watch::start_with(&state, &["--source", "inference"]),
    )];
    if kernel {
        watches.push(("kernel", Watch::start_with(&state, &["--source", "kernel"])));
    }
    let mut one = waiting_holder(
        &state,
        &["--aih", "cli/daemon/one", "--tag", "alpha"],
        &["--then-wait-tag", "beta"],
    );
    let mut two = waiting_holder(
        &state,
        &["--aih", "cli/daemon/two", "--tag", "beta"],
        &["--then-wait-tag", "alpha"],
    );
    let pids = sorted(vec![one.pid(), two.pid()]);

    let doc = snapshot_until(&state, "with a cycle", |doc| {
        doc["waits"]["cycles"]
            .as_array()
            .is_some_and(|c| c.len() == 1)
    });
    let cycle = &doc["waits"]["cycles"][0];
    assert_eq!(members(cycle), pids, "{doc:#}");
    assert_eq!(cycle["deadlock"], false, "one look cannot tell: {doc:#}");
    assert_eq!(cycle["may_clear"]["reason"], "one_look", "{doc:#}");
    assert_eq!(cycle["hops"].as_array().map(Vec::len), Some(2), "{doc:#}");

    let check = run_locktop(&state, &["check", "--tag", "alpha"]);
    assert_eq!(
        check.code(),
        3,
        "a deadlock is its own exit status: {check:?}"
    );
    let said = format!(
        "verdict: deadlock: pid {} holds tag \"alpha\", waits to take tag \"beta\" held by pid {}, \
         which waits to take tag \"alpha\"",
        one.pid(),
        two.pid()
    );
    assert!(check.stdout.contains(&said), "{said}\n{check:?}");
    let json = run_locktop(&state, &["check", "--tag", "beta", "--json"]);
    assert_eq!(json.code(), 3, "{json:?}");
    let doc: Value = serde_json::from_str(json.stdout.trim()).expect("JSON");
    assert_eq!(doc["waits"]["cycles"][0]["deadlock"], true, "{doc:#}");
    assert_eq!(doc["members"][0]["verdict"]["kind"], "deadlock", "{doc:#}");
    let signal = doc["waits"]["cycles"][0]["signal"]
        .as_u64()
        .expect("signal");
    assert!(pids.contains(&signal), "a member to signal: {doc:#}");

    for (source, watch) in &mut watches {
        for tag in ["alpha", "beta"] {
            let line = verdict_line(watch, tag, |kind| kind == Some("deadlock"));
            assert_eq!(
                line["verdict"]["pid"].as_u64(),
                Some(signal),
                "{source}: the same process to signal: {line}"
            );
        }
    }

    // The process to signal is killed: the deadlock ends on both tags in
    // every monitor, and the survivor takes the tag it waited for.
    let (victim, survivor) = if u64::from(one.pid()) == signal {
        (&mut one, &mut two)
    } else {
        (&mut two, &mut one)
    };
    let killed = Instant::now();
    victim.kill();
    for (source, watch) in &mut watches {
        let line = verdict_line(watch, "alpha", |kind| kind != Some("deadlock"));
        eprintln!(
            "{source}: the deadlock on alpha ended {:?} after the kill",
            killed.elapsed()
        );
        assert_eq!(line["verdict_from"], "deadlock", "{source}: {line}");
    }
    let taken = survivor
        .next_line(Duration::from_secs(10))
        .expect("the survivor says its wait ended");
    let taken: Value = serde_json::from_str(&taken).expect("JSON");
    assert_eq!(taken["waited"], true, "{taken}");
    assert_eq!(taken["outcome"], "taken", "{taken}");
    let doc = snapshot_until(&state, "without a cycle", |doc| {
        doc["waits"]["cycles"].as_array().is_some_and(Vec::is_empty)
    });
    assert_eq!(doc["waits"]["chains"], serde_json::json!([]), "{doc:#}");
}

/// A circle of three; a circle closed by a watcher: an agent holding its
/// instance lock waits for a tag to be released (`wait_released`) whose
/// holder waits to take that instance; and a chain of four whose root is
/// stopped, which is no cycle: `check` names its root and exits 1.
#[test]
fn a_circle_of_three_one_through_a_watchers_wait_and_a_chain_of_four_are_told_apart() {
    let _serial = serial_blocking();
    let (_tmp, state) = state_in_tempdir();
    let three: Vec<Holder> = [("t1", "t2"), ("t2", "t3"), ("t3", "t1")]
        .into_iter()
        .map(|(holds, waits)| {
            waiting_holder(&state, &["--tag", holds], &["--then-wait-tag", waits])
        })
        .collect();
    let relocating = waiting_holder(
        &state,
        &["--aih", "cli/daemon/reloc"],
        &["--then-wait-tag", "w", "--then-watch"],
    );
    let tag_holder = waiting_holder(
        &state,
        &["--tag", "w"],
        &["--then-wait-aih", "cli/daemon/reloc"],
    );
    // The chain: root holds c0 and is stopped; p1 holds c1 and waits for
    // c0; p2 holds c2, waits for c1; p3 holds c3, waits for c2.
    let root = Holder::hold(&state, &["--tag", "c0"]);
    kill(Pid::from_raw(root.pid() as i32), Signal::SIGSTOP).expect("SIGSTOP");
    let chain: Vec<Holder> = [("c1", "c0"), ("c2", "c1"), ("c3", "c2")]
        .into_iter()
        .map(|(holds, waits)| {
            waiting_holder(&state, &["--tag", holds], &["--then-wait-tag", waits])
        })
        .collect();

    // The circle of three alone makes `longest_chain` 3: the chain is
    // seen when its root blocks all three of it.
    let doc = snapshot_until(&state, "with two cycles and the chain", |doc| {
        doc["waits"]["cycles"]
            .as_array()
            .is_some_and(|c| c.len() == 2)
            && doc["waits"]["roots"][0]["waiting"] == 3
    });
    let mut cycles: Vec<Vec<u64>> = doc["waits"]["cycles"]
        .as_array()
        .unwrap()
        .iter()
        .map(members)
        .collect();
    cycles.sort();
    let mut expected = vec![
        sorted(three.iter().map(Holder::pid).collect()),
        sorted(vec![relocating.pid(), tag_holder.pid()]),
    ];
    expected.sort();
    assert_eq!(cycles, expected, "{doc:#}");
    let watched = doc["waits"]["cycles"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| members(c).contains(&u64::from(relocating.pid())))
        .unwrap();
    let hows: Vec<&str> = watched["hops"]
        .as_array()
        .unwrap()
        .iter()
        .map(|hop| hop["how"].as_str().unwrap())
        .collect();
    assert!(hows.contains(&"watcher"), "{watched:#}");
    // The chain: its root blocks all three; nothing of it is a cycle.
    assert_eq!(
        doc["waits"]["roots"],
        serde_json::json!([{"pid": root.pid(), "waiting": 3}]),
        "{doc:#}"
    );
    let last = doc["waits"]["chains"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["pid"] == chain[2].pid())
        .unwrap();
    assert_eq!(last["root"], root.pid(), "{last:#}");
    assert_eq!(last["hops"].as_array().map(Vec::len), Some(3), "{last:#}");

    // check: the watcher's circle is a deadlock (two looks), the chain is
    // not; its key says who is at the root.
    let reloc = run_locktop(&state, &["check", "--aih", "cli/daemon/reloc"]);
    assert_eq!(reloc.code(), 3, "{reloc:?}");
    let c3 = run_locktop(&state, &["check", "--tag", "c3", "--json"]);
    assert_eq!(c3.code(), 1, "a chain is busy, no deadlock: {c3:?}");
    let doc: Value = serde_json::from_str(c3.stdout.trim()).expect("JSON");
    let verdict = &doc["members"][0]["verdict"];
    assert_eq!(verdict["kind"], "blocked", "{doc:#}");
    assert_eq!(verdict["root"], root.pid(), "{doc:#}");
    kill(Pid::from_raw(root.pid() as i32), Signal::SIGCONT).expect("SIGCONT");
    drop((three, relocating, tag_holder, chain, root));
}

/// A monitor that is not root sees root's waits (`/proc/locks` lists
/// them to anyone) but cannot verify root's holders: the circle is shown,
/// and never called a deadlock — it may clear, for all that user knows.
#[test]
fn a_monitor_that_is_not_root_shows_the_cycle_as_one_that_may_clear() {
    use crate::common::{NOBODY, binary_for_anyone, finish};
    use std::os::unix::fs::PermissionsExt;
    if !skip_unless(
        is_root(),
        "skipped a_monitor_that_is_not_root…: needs root, to run holders nobody's monitor may not read",
    ) {
        return;
    }
    let _serial = serial_blocking();
    let (tmp, state) = state_in_tempdir();
    for dir in [tmp.path(), state.as_path()] {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    }
    let _one = waiting_holder(&state, &["--tag", "a"], &["--then-wait-tag", "b"]);
    let _two = waiting_holder(&state, &["--tag", "b"], &["--then-wait-tag", "a"]);
    snapshot_until(&state, "with a cycle", |doc| {
        doc["waits"]["cycles"]
            .as_array()
            .is_some_and(|c| c.len() == 1)
    });
    let (_bin_dir, bin) = binary_for_anyone();
    let mut command = std::process::Command::new(&bin);
    common::no_service(&mut command);
    command
        .arg("--state-dir")
        .arg(&state)
        .args(["check", "--tag", "a", "--json"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    std::os::unix::process::CommandExt::uid(&mut command, NOBODY);
    std::os::unix::process::CommandExt::gid(&mut command, NOBODY);
    let out = finish(command);
    assert_eq!(out.code(), 1, "busy, and no deadlock it can prove: {out:?}");
    let doc: Value = serde_json::from_str(out.stdout.trim()).expect("JSON");
    let cycle = &doc["waits"]["cycles"][0];
    assert_eq!(cycle["deadlock"], false, "{doc:#}");
    assert_eq!(cycle["may_clear"]["reason"], "unverified", "{doc:#}");
    // The key's verdict says first that its holder is unverified: nothing
    // is said about that PID beyond it.
    assert_eq!(
        doc["members"][0]["verdict"]["kind"], "unverified_holder",
        "{doc:#}"
    );
}

/// A deadlock recorded by `record` replays as it was live: the journal's
/// verdict lines say `deadlock`, and `replay --at` a moment after it
/// formed — which looks at the recording a second before as well, as the
/// rule asks — calls its cycle a deadlock, table and JSON alike.
#[test]
fn a_recorded_deadlock_replays_as_a_deadlock() {
    let _serial = serial_blocking();
    let (tmp, state) = state_in_tempdir();
    let journal = tmp.path().join("journal.jsonl");
    let journal_arg = journal.to_str().expect("utf-8");
    let mut recorder = locktop_command(&state, &["record", "--out", journal_arg])
        .spawn()
        .expect("spawn record");
    let deadline = Instant::now() + Duration::from_secs(20);
    let read = |what: &str| {
        while Instant::now() < deadline {
            let text = std::fs::read_to_string(&journal).unwrap_or_default();
            if text.contains(what) {
                return text;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!("the journal never said {what:?}");
    };
    read("checkpoint_end");
    let one = waiting_holder(&state, &["--tag", "a"], &["--then-wait-tag", "b"]);
    let two = waiting_holder(&state, &["--tag", "b"], &["--then-wait-tag", "a"]);
    read("\"kind\":\"deadlock\"");
    let at = locktop::time_format::rfc3339(std::time::SystemTime::now());
    let replay_at = |json: bool| {
        let mut command = std::process::Command::new(crate::common::locktop_bin());
        command.args(["replay", journal_arg, "--at", &at]);
        if json {
            command.arg("--json");
        }
        command
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        crate::common::finish(command)
    };
    let replay = replay_at(true);
    assert_eq!(replay.code(), 0, "{replay:?}");
    let doc: Value = serde_json::from_str(replay.stdout.trim()).expect("JSON");
    let cycle = &doc["waits"]["cycles"][0];
    assert_eq!(
        members(cycle),
        sorted(vec![one.pid(), two.pid()]),
        "{doc:#}"
    );
    assert_eq!(cycle["deadlock"], true, "{doc:#}");
    let table = replay_at(false);
    assert_eq!(table.code(), 0, "{table:?}");
    assert!(
        table
            .stdout
            .lines()
            .filter(|l| l.contains(" deadlock "))
            .count()
            == 2,
        "both tags: {table:?}"
    );
    let _ = kill(Pid::from_raw(recorder.id() as i32), Signal::SIGTERM);
    let _ = recorder.wait();
}

/// A family waiter (`hold --wait`: the seed's `wait_acquire_family`)
/// holds nothing while it waits and polls its busy member with shared
/// tries every 50 ms: under the kernel's events it is one of the key's
/// contenders, found by the rate of its polls; a passive monitor watching
/// beside it, whose probes are the same request, is not.
#[test]
fn a_family_waiter_polling_is_a_contender_and_a_passive_monitor_beside_it_is_not() {
    if !skip_unless(
        is_root(),
        "skipped a_family_waiter_polling…: needs root (or CAP_PERFMON) to read the kernel's lock events",
    ) {
        return;
    }
    let _serial = serial_blocking();
    let (_tmp, state) = state_in_tempdir();
    let _holder = Holder::hold(&state, &["--tag", "busy"]);
    let passive = Watch::start_with(&state, &["--source", "inference", "--probe", "passive"]);
    let mut kernel = Watch::start_with(&state, &["--source", "kernel"]);
    let mut waiter = locktop_command(&state, &["hold", "--wait", "--tag", "busy"])
        .spawn()
        .expect("spawn a family waiter");
    let line = verdict_line(&mut kernel, "busy", |kind| kind == Some("contended"));
    let waiters: Vec<u64> = line["verdict"]["waiters"]
        .as_array()
        .expect("waiters")
        .iter()
        .filter_map(Value::as_u64)
        .collect();
    assert!(waiters.contains(&u64::from(waiter.id())), "{line}");
    assert!(
        !waiters.contains(&u64::from(passive.child.id())),
        "a passive monitor is no waiter: {line}"
    );
    let _ = waiter.kill();
    let _ = waiter.wait();
}
