//! The engine with the kernel's lock events as its liveness source, on
//! real holders: after one judgement, every change comes from the events
//! — holders with their PIDs, releases and kills, contenders and
//! watchers the moment they block and gone when they die waiting — with
//! no `/proc/locks` read and no sweep; and where this user may not read
//! the events, `auto` falls back to inference and says why, `kernel` is
//! an error.
//!
//! The events need root (or CAP_PERFMON): run by anyone else these tests
//! skip with one line (failed under `LOCKTOP_REQUIRE_ALL`, as `.ci/run`
//! sets, which runs as root).

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use locktop::cli::source_args::{SourceArgs, SourceFlag};
use locktop::context::Context;
use locktop::engine::EngineConfig;
use locktop::liveness::Liveness;
use locktop::liveness::process::HolderDetail;

use crate::common::engine::{Engine, Name, held_names, hold, state_with_locks_root, tag};
use crate::common::{self, NOBODY, binary_for_anyone, serial, skip_unless};

/// True when root; otherwise one line says `test` is skipped.
fn root_or_skip(test: &str) -> bool {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    skip_unless(
        root,
        &format!("skipped {test}: needs root (or CAP_PERFMON) to read the kernel's lock events"),
    )
}

/// True when `program` runs and says its version (asked with `flag`).
fn installed(program: &str, flag: &str) -> bool {
    Command::new(program)
        .arg(flag)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success())
}

/// The next NDJSON line of `lines` that `pred` accepts; panics naming
/// `what` when none came within the process timeout.
fn next_matching(
    lines: &std::sync::mpsc::Receiver<String>,
    what: &str,
    pred: &dyn Fn(&serde_json::Value) -> bool,
) -> serde_json::Value {
    let deadline = Instant::now() + common::PROCESS_TIMEOUT;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let line = match lines.recv_timeout(left) {
            Ok(line) => line,
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                panic!("no line {what} within {:?}", common::PROCESS_TIMEOUT)
            }
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                panic!("no line {what}: the output ended")
            }
        };
        let value: serde_json::Value = serde_json::from_str(&line).expect("NDJSON");
        if pred(&value) {
            return value;
        }
    }
}

/// 100 exclusive `LOCK_NB` tries by this process on held `tag`'s gate,
/// each refused, through one open file (a second description would add a
/// close unlock per try, as a real agent's does; one is enough); the file
/// is returned open.
fn refuse_100_tries(state: &std::path::Path, tag: &str) -> std::fs::File {
    refuse_tries(state, tag, 100)
}

/// [`refuse_100_tries`], `tries` times.
fn refuse_tries(state: &std::path::Path, tag: &str, tries: usize) -> std::fs::File {
    let (dir, key) = locktop::locks::agent_tag_lock(state, tag);
    let gate = locktop::locks::escape::gate_path(&dir, &key);
    let file = std::fs::File::open(&gate).expect("open the gate");
    for _ in 0..tries {
        let refused = nix::fcntl::Flock::lock(
            file.try_clone().expect("dup"),
            nix::fcntl::FlockArg::LockExclusiveNonblock,
        );
        assert!(refused.is_err(), "the tag is held: every try is refused");
    }
    file
}

/// `locktop watch --json --source kernel` on `state`, and its lines.
fn kernel_watch(
    state: &std::path::Path,
) -> (std::process::Child, std::sync::mpsc::Receiver<String>) {
    let mut watch = common::locktop_command(state, &["watch", "--json", "--source", "kernel"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("locktop watch");
    let lines = common::lines_of(watch.stdout.take().expect("stdout"));
    (watch, lines)
}

/// A child process SIGKILLed and reaped when dropped, a panicking test's
/// included (SIGKILL ends a stopped process too).
struct KilledOnDrop(std::process::Child);

impl Drop for KilledOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A filesystem mounted here, unmounted (lazily) when dropped, panic
/// included.
struct Mounted(std::path::PathBuf);

impl Drop for Mounted {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

/// An engine whose liveness source is the kernel's lock events.
fn kernel_engine(state: &std::path::Path) -> Engine {
    let args = SourceArgs {
        source: SourceFlag::Kernel,
        tracepoint_id: None,
    };
    let choice = args
        .choose(state)
        .expect("the kernel's lock events open as root");
    assert!(choice.is_kernel());
    let config = EngineConfig {
        source: choice.source,
        ..EngineConfig::default()
    };
    Engine::start_config(Context::new(state.to_path_buf()), config)
}

#[tokio::test(flavor = "multi_thread")]
async fn holders_come_and_go_from_events_with_no_proc_locks_read_nor_sweep() {
    if !root_or_skip(
        "engine::kernel::holders_come_and_go_from_events_with_no_proc_locks_read_nor_sweep",
    ) {
        return;
    }
    let _serial = serial().await;
    let (_tmp, state) = state_with_locks_root();
    let mut engine = kernel_engine(&state);
    engine.synced().await;
    let (reads, sweeps) = (engine.index_reads(), engine.sweeps());
    assert_eq!(sweeps, 1, "one first judgement");
    for round in 0..5 {
        let mut holder = hold(
            &state,
            &["--aih", &format!("cli/daemon/k{round}"), "--tag", "k tag"],
        );
        let names = held_names(&holder);
        let pid = holder.pid();
        engine
            .wait_view("the holder live with its PID", |view| {
                names
                    .iter()
                    .all(|name| view.is(name, Liveness::Live, &[pid]))
            })
            .await;
        if round % 2 == 0 {
            holder.kill();
        } else {
            holder.close_stdin();
        }
        engine
            .wait_view("its keys free", |view| {
                names
                    .iter()
                    .all(|name| view.liveness(name) == Some(Liveness::Free))
            })
            .await;
    }
    assert_eq!(
        engine.index_reads(),
        reads,
        "no /proc/locks read after the first judgement"
    );
    assert_eq!(
        engine.sweeps(),
        sweeps,
        "no sweep after the first judgement"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_contender_shows_at_once_and_leaves_the_view_when_killed_waiting() {
    if !root_or_skip(
        "engine::kernel::a_contender_shows_at_once_and_leaves_the_view_when_killed_waiting",
    ) {
        return;
    }
    let _serial = serial().await;
    let (_tmp, state) = state_with_locks_root();
    let mut engine = kernel_engine(&state);
    engine.synced().await;
    let holder = hold(&state, &["--tag", "busy"]);
    let name = tag("busy");
    let pid = holder.pid();
    engine
        .wait_view("the tag held", |view| {
            view.is(&name, Liveness::Live, &[pid])
        })
        .await;
    let mut waiter = common::locktop_command(&state, &["wait", "--acquire", "--tag", "busy"])
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .stdout(Stdio::null())
        .spawn()
        .expect("locktop wait --acquire");
    let waiter_pid = waiter.id();
    engine
        .wait_view("the contender listed", |view| {
            view.get(&name)
                .is_some_and(|state| state.waiters.contains(&waiter_pid))
        })
        .await;
    let _ = waiter.kill();
    let _ = waiter.wait();
    engine
        .wait_view("the dead contender gone", |view| {
            view.get(&name)
                .is_some_and(|state| state.waiters.is_empty() && state.liveness == Liveness::Live)
        })
        .await;
    drop(holder);
}

/// An engine asked for holders by PID only (`watch`'s) reads each
/// holder's `stat`, not its command line: every state it sends — from the
/// first judgement (a sweep, which reads holders named) and from the
/// kernel's events — names the verified PID and its start, and carries no
/// command line, unit or parent's command line; an engine as the monitor
/// runs it names them.
#[tokio::test(flavor = "multi_thread")]
async fn a_pid_only_engine_sends_verified_pids_and_no_names() {
    if !root_or_skip("engine::kernel::a_pid_only_engine_sends_verified_pids_and_no_names") {
        return;
    }
    let _serial = serial().await;
    let (_tmp, state) = state_with_locks_root();
    let before = hold(&state, &["--tag", "found at start"]);
    let source = SourceArgs {
        source: SourceFlag::Kernel,
        tracepoint_id: None,
    }
    .choose(&state)
    .expect("the kernel's lock events open as root")
    .source;
    let pid_only = EngineConfig {
        source: source.clone(),
        holder_detail: HolderDetail::PidOnly,
        ..EngineConfig::default()
    };
    let mut bare = Engine::start_config(Context::new(state.clone()), pid_only);
    let mut named = kernel_engine(&state);
    bare.synced().await;
    named.synced().await;
    let after = hold(&state, &["--tag", "taken later"]);
    for (holder, name) in [
        (&before, tag("found at start")),
        (&after, tag("taken later")),
    ] {
        let pid = holder.pid();
        for engine in [&mut bare, &mut named] {
            engine
                .wait_view("the tag live with its PID", |view| {
                    view.is(&name, Liveness::Live, &[pid])
                })
                .await;
        }
        let shown = &bare.view.get(&name).expect("a state").holders[0];
        let full = &named.view.get(&name).expect("a state").holders[0];
        assert!(full.cmdline.is_some(), "{full:?}");
        assert_eq!(shown.started, full.started, "the same process");
        assert!(shown.started.is_some() && !shown.unverified, "{shown:?}");
        assert_eq!(
            (&shown.cmdline, &shown.parent, &shown.unit),
            (&None, &None, &None),
            "{shown:?}"
        );
    }
}

/// `watch --json`'s first line says which source runs: `kernel` as root;
/// as nobody (no CAP_PERFMON) `inference`, with the reason, and one
/// stderr line; `--source kernel` as nobody is one line and exit 2.
#[test]
fn the_source_is_said_and_a_refused_kernel_source_is_an_error() {
    if !root_or_skip("engine::kernel::the_source_is_said_and_a_refused_kernel_source_is_an_error") {
        return;
    }
    let (_bin_dir, bin) = binary_for_anyone();
    let (tmp, state) = common::state_in_tempdir();
    for dir in [tmp.path(), &state] {
        std::fs::set_permissions(dir, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .expect("chmod");
    }
    let first_line = |as_nobody: bool, extra: &[&str]| {
        let mut command = Command::new(&bin);
        common::no_service(&mut command);
        command
            .arg("--state-dir")
            .arg(&state)
            .args(["watch", "--json"])
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if as_nobody {
            std::os::unix::process::CommandExt::uid(&mut command, NOBODY);
            std::os::unix::process::CommandExt::gid(&mut command, NOBODY);
        }
        let mut child = command.spawn().expect("watch");
        let lines = common::lines_of(child.stdout.take().expect("stdout"));
        let first = lines.recv_timeout(common::PROCESS_TIMEOUT).ok();
        let _ = child.kill();
        let status = child.wait().expect("reap");
        let mut stderr = String::new();
        std::io::Read::read_to_string(&mut child.stderr.take().expect("stderr"), &mut stderr)
            .expect("stderr");
        (first, status, stderr)
    };
    let (first, _, _) = first_line(false, &[]);
    let first: serde_json::Value = serde_json::from_str(&first.expect("a line")).expect("JSON");
    assert_eq!(first["source"], "kernel", "{first}");
    let (first, _, stderr) = first_line(true, &[]);
    let first: serde_json::Value = serde_json::from_str(&first.expect("a line")).expect("JSON");
    assert_eq!(first["source"], "inference", "{first}");
    assert!(
        first["source_fallback"]
            .as_str()
            .is_some_and(|why| why.contains("root")),
        "{first}"
    );
    assert_eq!(stderr.lines().count(), 1, "one line says why: {stderr:?}");
    assert!(
        stderr.contains("kernel's lock events are unavailable"),
        "{stderr}"
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    let (first, status, stderr) = first_line(true, &["--source", "kernel"]);
    assert!(Instant::now() < deadline);
    assert_eq!(first, None, "nothing on stdout: {first:?}");
    assert_eq!(status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr:?}");
    assert!(stderr.contains("--source kernel"), "{stderr}");
}

/// Whether the `CAP_PERFMON` runs can be made here (root, `setpriv`);
/// otherwise one line says `test` is skipped.
fn capped_runs_or_skip(test: &str) -> bool {
    root_or_skip(test)
        && skip_unless(
            common::have_program("setpriv", "util-linux (apt-get install util-linux)"),
            &format!("skipped {test}: no setpriv"),
        )
}

/// `watch --json --source kernel [extra]` on `state` as nobody with only
/// `CAP_PERFMON` and the tracepoint's id (which only root may read), its
/// first line said to be the kernel source: the child and its lines.
/// `state` and its parent are made readable by anyone.
fn capped_watch(
    tmp: &std::path::Path,
    state: &std::path::Path,
    bin: &std::path::Path,
    extra: &[&str],
) -> (std::process::Child, std::sync::mpsc::Receiver<String>) {
    let id = std::fs::read_to_string("/sys/kernel/tracing/events/filelock/flock_lock_inode/id")
        .expect("root reads the tracepoint id");
    for dir in [tmp, state] {
        std::fs::set_permissions(dir, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .expect("chmod");
    }
    let mut watch = Command::new("setpriv")
        .env("LOCKTOP_SOCKET", common::NO_SERVICE_SOCKET)
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "--inh-caps=+perfmon",
            "--ambient-caps=+perfmon",
        ])
        .arg(bin)
        .arg("--state-dir")
        .arg(state)
        .args([
            "watch",
            "--json",
            "--source",
            "kernel",
            "--tracepoint-id",
            id.trim(),
        ])
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("setpriv");
    let lines = common::lines_of(watch.stdout.take().expect("stdout"));
    let first = next_matching(&lines, "saying the source", &|v| v.get("source").is_some());
    assert_eq!(first["source"], "kernel", "{first}");
    (watch, lines)
}

/// A monitor run as an unprivileged user with only `CAP_PERFMON` (as the
/// systemd unit grants it) and the tracepoint's id (which only root may
/// read) learns liveness from the kernel's events: a root agent's tag
/// shows live, then free when the agent is killed.
#[test]
fn an_unprivileged_user_with_cap_perfmon_and_the_id_reads_the_events() {
    if !capped_runs_or_skip(
        "engine::kernel::an_unprivileged_user_with_cap_perfmon_and_the_id_reads_the_events",
    ) {
        return;
    }
    let (_bin_dir, bin) = binary_for_anyone();
    let (tmp, state) = common::state_in_tempdir();
    drop(hold(&state, &["--tag", "capped"])); // its files, readable by anyone
    let (mut watch, lines) = capped_watch(tmp.path(), &state, &bin, &[]);
    let next =
        |what: &str, pred: &dyn Fn(&serde_json::Value) -> bool| next_matching(&lines, what, pred);
    next("watching", &|v| v["watcher"]["health"] == "watching");
    let mut agent = hold(&state, &["--tag", "capped"]);
    let pid = u64::from(agent.pid());
    let live = next("the tag live", &|v| {
        v["name"] == "capped" && v["to"] == "live"
    });
    assert_eq!(live["pids"][0], pid, "{live}");
    agent.kill();
    next("the tag free", &|v| {
        v["name"] == "capped" && v["to"] == "free"
    });
    let _ = watch.kill();
    let _ = watch.wait();
}

/// A hold the unprivileged monitor found in place (its table seeded from
/// `/proc/locks`, which does not say which open file holds it — as after
/// every resync) ends with its root holder killed and not reaped yet: the
/// unlock cannot be settled from that holder's fdinfo, which a monitor
/// without privileges may not read, and `/proc/locks` says the lock is
/// gone — the tag goes free. It stayed live for good before (CI, after a
/// resync under load).
#[test]
fn an_unprivileged_monitor_frees_a_found_hold_whose_killed_holder_is_not_reaped() {
    if !capped_runs_or_skip(
        "engine::kernel::an_unprivileged_monitor_frees_a_found_hold_whose_killed_holder_is_not_reaped",
    ) {
        return;
    }
    let (_bin_dir, bin) = binary_for_anyone();
    let (tmp, state) = common::state_in_tempdir();
    let agent = hold(&state, &["--tag", "found"]);
    let pid = agent.pid();
    let (mut watch, lines) = capped_watch(tmp.path(), &state, &bin, &["--initial"]);
    let next =
        |what: &str, pred: &dyn Fn(&serde_json::Value) -> bool| next_matching(&lines, what, pred);
    let live = next("the tag live", &|v| {
        v["name"] == "found" && v["to"] == "live"
    });
    assert_eq!(live["pids"][0], u64::from(pid), "{live}");
    // Killed, and left a zombie until the tag is free.
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(i32::try_from(pid).expect("pid")),
        nix::sys::signal::Signal::SIGKILL,
    )
    .expect("SIGKILL");
    next("the tag free", &|v| {
        v["name"] == "found" && v["to"] == "free"
    });
    drop(agent);
    let _ = watch.kill();
    let _ = watch.wait();
}

/// A tag claim `name` on disk, free, and a kernel-source engine whose
/// view shows it free (so it is judged, not indexed as held): the
/// engine, the claim's name and its gate and announce paths.
async fn free_tag_watched(
    state: &std::path::Path,
    name: &str,
) -> (Engine, Name, std::path::PathBuf, std::path::PathBuf) {
    let (dir, key) = locktop::locks::agent_tag_lock(state, name);
    std::fs::create_dir_all(&dir).expect("the tags dir");
    let (gate, announce) = (
        locktop::locks::escape::gate_path(&dir, &key),
        locktop::locks::escape::announce_path(&dir, &key),
    );
    std::fs::write(&gate, b"").expect("the gate");
    std::fs::write(&announce, b"1").expect("the announce");
    let mut engine = kernel_engine(state);
    engine.synced().await;
    let name = tag(name);
    engine
        .wait_view("the claim free", |view| {
            view.liveness(&name) == Some(Liveness::Free)
        })
        .await;
    (engine, name, gate, announce)
}

/// A claim free at the first judgement is not indexed (a million idle
/// keys would cost hundreds of megabytes): when a process that opened it
/// without writing (util-linux `flock`, whose opens and closes the kernel
/// source does not listen to) locks it, the claim is found from that
/// process's own fd and judged held with its PID — no sweep, no
/// `/proc/locks` read.
#[tokio::test(flavor = "multi_thread")]
async fn a_claim_free_at_start_locked_without_a_write_is_found_from_the_locker() {
    if !root_or_skip(
        "engine::kernel::a_claim_free_at_start_locked_without_a_write_is_found_from_the_locker",
    ) {
        return;
    }
    let _serial = serial().await;
    let (_tmp, state) = state_with_locks_root();
    let (mut engine, name, gate, announce) = free_tag_watched(&state, "quiet").await;
    let (reads, sweeps) = (engine.index_reads(), engine.sweeps());
    // flock(1) opens each file (no write), locks it, and runs the next.
    let mut locker = Command::new("flock")
        .arg("-x")
        .arg(&gate)
        .args(["flock", "-x"])
        .arg(&announce)
        .args(["sleep", "60"])
        .spawn()
        .expect("spawn flock (util-linux)");
    engine
        .wait_view("the claim held, with the lockers' PIDs", |view| {
            view.get(&name).is_some_and(|state| {
                state.liveness == Liveness::Live
                    && state.holders.iter().any(|holder| holder.pid == locker.id())
            })
        })
        .await;
    assert_eq!(engine.index_reads(), reads, "no /proc/locks read");
    assert_eq!(engine.sweeps(), sweeps, "no sweep");
    let _ = locker.kill();
    let _ = locker.wait();
}

/// A claim free at the first judgement, locked by processes that exit at
/// once while the shell whose files they locked keeps the locks
/// (`flock N` on the shell's fds): the requesters' fds are gone by the
/// time their events are read, so the claim is found from the process
/// that keeps the lock — searched for once the short wait for a release
/// has passed, never inside the batch of events (a search of every
/// process stalled the engine for ~150 ms there under the chaos test's
/// load, and its judgements lagged the events) — and named.
#[tokio::test(flavor = "multi_thread")]
async fn a_claim_locked_by_requesters_that_exit_is_found_from_its_keeper() {
    if !root_or_skip(
        "engine::kernel::a_claim_locked_by_requesters_that_exit_is_found_from_its_keeper",
    ) {
        return;
    }
    let _serial = serial().await;
    let (_tmp, state) = state_with_locks_root();
    let (mut engine, name, gate, announce) = free_tag_watched(&state, "kept").await;
    let reads = engine.index_reads();
    // Each flock(1) locks the shell's description and exits; the shell
    // becomes sleep, keeping both.
    let mut keeper = Command::new("sh")
        .arg("-c")
        .arg("exec 8<\"$1\" 9<\"$2\"; flock -x 8 && flock -x 9 && exec sleep 60")
        .arg("sh")
        .arg(&gate)
        .arg(&announce)
        .spawn()
        .expect("spawn sh");
    engine
        .wait_view("the claim held, with its keeper's PID", |view| {
            view.get(&name).is_some_and(|state| {
                state.liveness == Liveness::Live
                    && state.holders.iter().any(|holder| holder.pid == keeper.id())
            })
        })
        .await;
    assert_eq!(engine.index_reads(), reads, "no /proc/locks read");
    let _ = keeper.kill();
    let _ = keeper.wait();
}

/// A lock whose taker runs on but has handed it to a forked child (the
/// child shares the lock's open file; the taker closed its own fd): no
/// unlock comes, so the process that keeps it is searched for — once the
/// short wait for a release has passed — and named, with no
/// `/proc/locks` read.
#[tokio::test(flavor = "multi_thread")]
async fn a_lock_its_running_taker_handed_to_a_child_names_the_child() {
    if !root_or_skip("engine::kernel::a_lock_its_running_taker_handed_to_a_child_names_the_child") {
        return;
    }
    let _serial = serial().await;
    let (_tmp, state) = state_with_locks_root();
    let (dir, key) = locktop::locks::agent_tag_lock(&state, "handed");
    std::fs::create_dir_all(&dir).expect("the tags dir");
    let open = |path: std::path::PathBuf| {
        std::fs::File::options()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .expect("open a claim file")
    };
    let gate = open(locktop::locks::escape::gate_path(&dir, &key));
    let announce = open(locktop::locks::escape::announce_path(&dir, &key));
    let mut engine = kernel_engine(&state);
    engine.synced().await;
    let reads = engine.index_reads();
    gate.lock().expect("lock the gate");
    announce.lock().expect("lock the announce");
    // The child's stdin and stdout are the locked descriptions; this
    // process (the taker) closes its own fds and runs on.
    let mut child = Command::new("sleep")
        .arg("60")
        .stdin(Stdio::from(gate))
        .stdout(Stdio::from(announce))
        .spawn()
        .expect("spawn sleep");
    let keeper = child.id();
    let name = tag("handed");
    engine
        .wait_view("the child named as the holder", |view| {
            view.is(&name, Liveness::Live, &[keeper])
        })
        .await;
    assert_eq!(engine.index_reads(), reads, "no /proc/locks read");
    let _ = child.kill();
    let _ = child.wait();
    engine
        .wait_view("free once the child is gone", |view| {
            view.liveness(&name) == Some(Liveness::Free)
        })
        .await;
}

/// An agent that loops on `try_acquire` never blocks, so no lock table
/// shows it: the kernel's events count its refused tries. 100 refused
/// `LOCK_NB` requests on a held tag are 100 on the tag's state, by that
/// process, and 100 on the engine's count of tries refused on tags (the
/// `serve` counter's).
#[tokio::test(flavor = "multi_thread")]
async fn refused_tries_on_a_held_key_are_counted_by_pid() {
    if !root_or_skip("engine::kernel::refused_tries_on_a_held_key_are_counted_by_pid") {
        return;
    }
    let _serial = serial().await;
    let (_tmp, state) = state_with_locks_root();
    let mut engine = kernel_engine(&state);
    engine.synced().await;
    let holder = hold(&state, &["--tag", "wanted"]);
    let name = tag("wanted");
    let pid = holder.pid();
    engine
        .wait_view("the tag held", |view| {
            view.is(&name, Liveness::Live, &[pid])
        })
        .await;
    let file = refuse_100_tries(&state, "wanted");
    let me = std::process::id();
    engine
        .wait_view("100 refused tries by this process", |view| {
            view.get(&name).is_some_and(|state| {
                state.refused.as_ref().is_some_and(|refused| {
                    refused.last_minute == 100
                        && refused
                            .by
                            .first()
                            .is_some_and(|by| by.pid == me && by.count == 100)
                })
            })
        })
        .await;
    let counted = &engine.stats().refused_tries;
    assert_eq!(
        (
            counted.tag.load(std::sync::atomic::Ordering::Relaxed),
            counted.instance.load(std::sync::atomic::Ordering::Relaxed),
        ),
        (100, 0),
        "refused tries counted by kind"
    );
    drop(file);
    drop(holder);
}

/// `watch --json` says the refused tries on the key's line (at most once
/// a second while they go on): 100 refused `LOCK_NB` requests on a held
/// tag end as a line counting 100, by this process.
#[test]
fn watch_says_the_tries_refused_on_a_held_key() {
    if !root_or_skip("engine::kernel::watch_says_the_tries_refused_on_a_held_key") {
        return;
    }
    let _serial = common::serial_blocking();
    let (_tmp, state) = state_with_locks_root();
    let (mut watch, lines) = kernel_watch(&state);
    let next =
        |what: &str, pred: &dyn Fn(&serde_json::Value) -> bool| next_matching(&lines, what, pred);
    next("watching", &|v| v["watcher"]["health"] == "watching");
    let holder = hold(&state, &["--tag", "wanted"]);
    next("the tag live", &|v| {
        v["name"] == "wanted" && v["to"] == "live"
    });
    let file = refuse_100_tries(&state, "wanted");
    let me = u64::from(std::process::id());
    let line = next("counting 100 refused tries", &|v| {
        v["name"] == "wanted" && v["refused"]["last_minute"] == 100
    });
    assert_eq!(line["to"], "live", "{line}");
    assert_eq!(line["refused"]["by"][0]["pid"], me, "{line}");
    assert_eq!(line["refused"]["by"][0]["count"], 100, "{line}");
    drop(file);
    drop(holder);
    let _ = watch.kill();
    let _ = watch.wait();
}

/// A tag claim's gate and announce paths, its directory made.
fn tag_claim_paths(
    state: &std::path::Path,
    name: &str,
) -> (std::path::PathBuf, std::path::PathBuf) {
    let (dir, key) = locktop::locks::agent_tag_lock(state, name);
    std::fs::create_dir_all(&dir).expect("the tags dir");
    (
        locktop::locks::escape::gate_path(&dir, &key),
        locktop::locks::escape::announce_path(&dir, &key),
    )
}

/// One round of a busy flocker: 100 flock pairs through `file`, then one
/// flock of the foreign file `pulse` (whose batch has the engine count
/// the files the filter drops), then 20 ms.
async fn flock_round(file: &std::fs::File, pulse: &std::path::Path) {
    for _ in 0..100 {
        file.lock().expect("flock");
        file.unlock().expect("unlock");
    }
    let pulse = std::fs::File::open(pulse).expect("open");
    pulse.lock().expect("flock");
    drop(pulse);
    tokio::time::sleep(Duration::from_millis(20)).await;
}

/// How many files the engine's kernel filter drops now.
fn foreign_dropped(engine: &Engine) -> u64 {
    engine
        .stats()
        .foreign_dropped
        .load(std::sync::atomic::Ordering::Relaxed)
}

/// A foreign file on the state dir's filesystem that flocks often is
/// dropped by the kernel's filter (it costs no sample from then on); when
/// it becomes a claim's file — here moved into the locks root while a
/// process holds it, as a reused inode would be — its events missed
/// while dropped are not taken for "free": the file is sampled again and
/// everything judged once more, and the claim's gate is held by that
/// process.
#[tokio::test(flavor = "multi_thread")]
async fn a_dropped_foreign_file_that_becomes_a_claims_is_judged_again() {
    if !root_or_skip("engine::kernel::a_dropped_foreign_file_that_becomes_a_claims_is_judged_again")
    {
        return;
    }
    let _serial = serial().await;
    let (_tmp, state) = state_with_locks_root();
    let (gate, announce) = tag_claim_paths(&state, "moved");
    let foreign = state.join("moved.gate");
    let pulse = state.join("pulse.lock");
    std::fs::write(&foreign, b"").expect("the foreign file");
    std::fs::write(&pulse, b"").expect("a second foreign file");
    let mut engine = kernel_engine(&state);
    engine.synced().await;
    // Flocked through a file kept open: the engine learns from this
    // process's fds that it is no claim's, then the reader that it is busy.
    let file = std::fs::File::open(&foreign).expect("open");
    let deadline = Instant::now() + common::PROCESS_TIMEOUT;
    while foreign_dropped(&engine) == 0 {
        assert!(
            Instant::now() < deadline,
            "the busy foreign file was never dropped"
        );
        flock_round(&file, &pulse).await;
    }
    drop(file);
    let mut holder = Command::new("flock")
        .arg("-x")
        .arg(&foreign)
        .args(["sleep", "60"])
        .spawn()
        .expect("spawn flock");
    let probe = std::fs::File::open(&foreign).expect("open");
    while probe.try_lock().is_ok() {
        probe.unlock().expect("unlock");
        assert!(Instant::now() < deadline, "flock never took the file");
        std::thread::sleep(Duration::from_millis(5));
    }
    drop(probe);
    std::fs::write(&announce, b"1").expect("the announce");
    std::fs::rename(&foreign, &gate).expect("move the held file in as the gate");
    let name = tag("moved");
    // Its gate locked, its announce not: a taker between the two, named.
    // (Without the readmission the gate's lock, never sampled, is not in
    // the table: the claim stays free.)
    engine
        .wait_view("the moved-in claim in flight, by flock's process", |view| {
            view.is(&name, Liveness::InFlight, &[holder.id()])
        })
        .await;
    assert!(
        engine
            .stats()
            .readmissions
            .load(std::sync::atomic::Ordering::Relaxed)
            >= 1,
        "the file was readmitted"
    );
    let _ = holder.kill();
    let _ = holder.wait();
}

/// Anyone who may write the state dir's filesystem can hard-link a free
/// claim's gate outside the locks root and flock it there as often as
/// they like: the file is never taken for a foreign one (a path that is
/// not its only name proves nothing), so the kernel's filter never drops
/// it, and an agent's lock on it is seen.
#[tokio::test(flavor = "multi_thread")]
async fn a_claims_file_flocked_through_a_hard_link_outside_the_root_is_never_dropped() {
    if !root_or_skip(
        "engine::kernel::a_claims_file_flocked_through_a_hard_link_outside_the_root_is_never_dropped",
    ) {
        return;
    }
    let _serial = serial().await;
    let (_tmp, state) = state_with_locks_root();
    let (gate, announce) = tag_claim_paths(&state, "linked");
    std::fs::write(&gate, b"").expect("the gate");
    std::fs::write(&announce, b"1").expect("the announce");
    let link = state.join("linked.gate");
    std::fs::hard_link(&gate, &link).expect("hard-link the gate outside the root");
    let pulse = state.join("pulse.lock");
    std::fs::write(&pulse, b"").expect("a foreign file");
    let mut engine = kernel_engine(&state);
    engine.synced().await;
    let through_link = std::fs::File::open(&link).expect("open the link");
    for _ in 0..10 {
        flock_round(&through_link, &pulse).await;
    }
    assert_eq!(
        foreign_dropped(&engine),
        0,
        "a claim's file, hard-linked, is no foreign file"
    );
    let mut holder = Command::new("flock")
        .arg("-x")
        .arg(&gate)
        .args(["sleep", "60"])
        .spawn()
        .expect("spawn flock");
    let name = tag("linked");
    engine
        .wait_view("the claim's gate held by flock's process", |view| {
            view.is(&name, Liveness::InFlight, &[holder.id()])
        })
        .await;
    drop(through_link);
    let _ = holder.kill();
    let _ = holder.wait();
}

/// A foreign lock whose taker is gone by the time its event is read
/// waits for a search of who keeps it; when another process's try names
/// the file first (no claim's), that search is dropped. Left due, it made
/// the engine's next wake-up due at once, forever: every monitor on the
/// kernel's events burned a core once other programs flocked this way on
/// its filesystem (found as a test that waits for an idle `watch` failing
/// beside other tests).
#[test]
fn a_foreign_lock_named_before_its_keeper_search_leaves_the_monitor_idle() {
    if !root_or_skip(
        "engine::kernel::a_foreign_lock_named_before_its_keeper_search_leaves_the_monitor_idle",
    ) || !common::have_program("flock", "util-linux")
    {
        return;
    }
    let _serial = common::serial_blocking();
    let (tmp, state) = state_with_locks_root();
    // Outside the locks root, on the state dir's filesystem.
    let foreign = tmp.path().join("foreign.lock");
    std::fs::write(&foreign, b"").expect("write the foreign file");
    let (mut watch, lines) = kernel_watch(&state);
    next_matching(&lines, "watching", &|v| {
        v["watcher"]["health"] == "watching"
    });
    // The shell keeps the open file; flock(1), its child, takes the lock
    // on it and exits.
    let mut keeper = Command::new("sh")
        .arg("-c")
        .arg("exec 9>>\"$1\"; flock -x 9; echo locked; read _")
        .arg("sh")
        .arg(&foreign)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("sh");
    let mut said = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(keeper.stdout.take().expect("stdout")),
        &mut said,
    )
    .expect("read");
    assert_eq!(said.trim(), "locked");
    // A file made in the tree has the monitor read its rings at once
    // (inotify tells it): the lock's event is read with its taker gone,
    // and a search for its keeper is due a moment later.
    std::fs::write(state.join("locks").join("nudge"), b"").expect("write in the tree");
    std::thread::sleep(Duration::from_millis(20));
    // This process tries it with the file open, before that search: its
    // path says the file is no claim's.
    let file = std::fs::File::open(&foreign).expect("open");
    let refused = nix::fcntl::Flock::lock(
        file.try_clone().expect("dup"),
        nix::fcntl::FlockArg::LockExclusiveNonblock,
    );
    assert!(refused.is_err(), "the shell holds it");
    // Both events read (an idle monitor drains its rings at least once a
    // second) and the keeper search's wait passed.
    std::thread::sleep(Duration::from_millis(1500));
    let before = common::proc::cpu_run_ns(watch.id());
    std::thread::sleep(Duration::from_secs(1));
    let ran = Duration::from_nanos(common::proc::cpu_run_ns(watch.id()) - before);
    assert!(
        ran < Duration::from_millis(250),
        "watch ran {ran:?} of the last second with nothing to do"
    );
    drop(file);
    drop(keeper.stdin.take());
    let _ = keeper.wait();
    let _ = watch.kill();
    let _ = watch.wait();
}

/// A monitor stopped (SIGSTOP) while its rings overflow — 20,000 refused
/// tries on a held claim, a holder releasing, another taking a new tag,
/// a third coming and going — and then continued: it says that events
/// were lost and it judged everything again, and ends with the true
/// view (the released tag free, the new one held by its taker, the
/// short-lived one not held). 10 s stopped; 2 s in the quick tier.
#[test]
fn a_monitor_stopped_through_a_burst_says_it_resynced_and_ends_true() {
    if !root_or_skip(
        "engine::kernel::a_monitor_stopped_through_a_burst_says_it_resynced_and_ends_true",
    ) {
        return;
    }
    let _serial = common::serial_blocking();
    let (_tmp, state) = state_with_locks_root();
    let (watch, lines) = kernel_watch(&state);
    let watch = KilledOnDrop(watch);
    let next =
        |what: &str, pred: &dyn Fn(&serde_json::Value) -> bool| next_matching(&lines, what, pred);
    next("watching", &|v| v["watcher"]["health"] == "watching");
    let before = hold(&state, &["--tag", "before"]);
    next("the first tag live", &|v| {
        v["name"] == "before" && v["to"] == "live"
    });
    let monitor = nix::unistd::Pid::from_raw(watch.0.id() as i32);
    nix::sys::signal::kill(monitor, nix::sys::signal::Signal::SIGSTOP).expect("SIGSTOP");
    let during = hold(&state, &["--tag", "during"]);
    // On one CPU, so that they overflow its ring however many CPUs share
    // the rest (a ring holds a few thousand records).
    let tries = std::thread::scope(|scope| {
        scope
            .spawn(|| {
                let mut one = nix::sched::CpuSet::new();
                one.set(0).expect("CPU 0");
                nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &one)
                    .expect("pin to CPU 0");
                refuse_tries(&state, "during", 20_000)
            })
            .join()
            .expect("the tries")
    });
    drop(before);
    drop(hold(&state, &["--tag", "gone"]));
    let quick = std::env::var_os("LOCKTOP_QUICK").is_some_and(|v| v != "0");
    std::thread::sleep(Duration::from_secs(if quick { 2 } else { 10 }));
    nix::sys::signal::kill(monitor, nix::sys::signal::Signal::SIGCONT).expect("SIGCONT");
    // From SIGCONT on: the latest line of each tag, and whether the
    // health said the events were lost, until both hold.
    let mut latest: std::collections::HashMap<String, serde_json::Value> = Default::default();
    let mut said_lost = None;
    let during_pid = u64::from(during.pid());
    let truth = |latest: &std::collections::HashMap<String, serde_json::Value>| {
        let to = |name: &str| latest.get(name).map(|v| v["to"].clone());
        to("before") == Some("free".into())
            && latest.get("during").is_some_and(|v| {
                v["to"] == "live"
                    && v["pids"]
                        .as_array()
                        .is_some_and(|p| p.contains(&during_pid.into()))
            })
    };
    let deadline = Instant::now() + common::PROCESS_TIMEOUT;
    let mut seen = Vec::new();
    while said_lost.is_none() || !truth(&latest) {
        let left = deadline.saturating_duration_since(Instant::now());
        let Ok(line) = lines.recv_timeout(left) else {
            panic!("no resync said, or the view never became the true one: {seen:#?}");
        };
        let value: serde_json::Value = serde_json::from_str(&line).expect("NDJSON");
        if let Some(name) = value["name"].as_str() {
            latest.insert(name.to_string(), value.clone());
        }
        if value["watcher"]["health"] == "rescanning" {
            said_lost = Some(value.clone());
        }
        seen.push(value);
    }
    let said_lost = said_lost.unwrap_or_default();
    let reason = said_lost["watcher"]["reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains("kernel lock events were lost"),
        "{said_lost}"
    );
    assert!(
        latest.get("gone").is_none_or(|v| v["to"] != "live"),
        "a holder gone while the monitor was stopped still shown: {latest:?}"
    );
    drop(tries);
    drop(during);
    drop(watch);
}

/// Two kernel monitors at once, while `perf record` samples the same
/// tracepoint with a filter of its own: each monitor sees a holder with
/// its PID and its SIGKILL as the other does — another user of the
/// tracepoint, or a second locktop replacing its own filter, takes
/// nothing from either.
#[test]
fn two_monitors_and_perf_on_the_same_tracepoint_each_see_every_holder() {
    if !root_or_skip(
        "engine::kernel::two_monitors_and_perf_on_the_same_tracepoint_each_see_every_holder",
    ) {
        return;
    }
    if !skip_unless(
        installed("perf", "--version"),
        "skipped engine::kernel::two_monitors_and_perf_on_the_same_tracepoint_each_see_every_holder: \
         needs perf (install linux-perf)",
    ) {
        return;
    }
    let _serial = common::serial_blocking();
    let (tmp, state) = state_with_locks_root();
    let perf_data = tmp.path().join("perf.data");
    let perf = Command::new("perf")
        .args(["record", "-q", "-a", "-e", "filelock:flock_lock_inode"])
        .args(["--filter", "ret == 0", "-o"])
        .arg(&perf_data)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("perf record");
    let mut perf = KilledOnDrop(perf);
    // perf writes its file's header once its events are open.
    let deadline = Instant::now() + common::PROCESS_TIMEOUT;
    while std::fs::metadata(&perf_data).map_or(0, |meta| meta.len()) == 0 {
        assert!(
            perf.0.try_wait().expect("perf").is_none(),
            "perf record ended before it sampled"
        );
        assert!(
            Instant::now() < deadline,
            "perf record never started sampling"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let monitors = [kernel_watch(&state), kernel_watch(&state)];
    let monitors = monitors.map(|(watch, lines)| (KilledOnDrop(watch), lines));
    for (_, lines) in &monitors {
        next_matching(lines, "watching", &|v| v["watcher"]["health"] == "watching");
    }
    assert!(
        perf.0.try_wait().expect("perf").is_none(),
        "perf record ended: the test needs it sampling beside the monitors"
    );
    for round in 0..3 {
        let name = format!("seen by both {round}");
        let mut holder = hold(&state, &["--tag", &name]);
        let pid = u64::from(holder.pid());
        for (i, (_, lines)) in monitors.iter().enumerate() {
            next_matching(lines, &format!("monitor {i}: {name} live"), &|v| {
                v["name"] == name.as_str()
                    && v["to"] == "live"
                    && v["pids"]
                        .as_array()
                        .is_some_and(|p| p.contains(&pid.into()))
            });
        }
        holder.kill();
        for (i, (_, lines)) in monitors.iter().enumerate() {
            next_matching(lines, &format!("monitor {i}: {name} free"), &|v| {
                v["name"] == name.as_str() && v["to"] == "free"
            });
        }
    }
    drop(monitors);
    drop(perf);
}

/// A tmpfs mounted over a directory below the locks root (the way an
/// operator bind-mounts one agent family elsewhere) is another device
/// than the root's: its claims are still seen from the events — an
/// agent there live with its PID, then free after its SIGKILL, one whose
/// directory is made on it later too. One mounted while the monitor
/// runs (inotify sees nothing inside it) is said in the health and
/// watched after one rescan: its agent too is live, then free.
#[test]
fn claims_on_a_filesystem_mounted_below_the_root_are_seen_from_events() {
    if !root_or_skip(
        "engine::kernel::claims_on_a_filesystem_mounted_below_the_root_are_seen_from_events",
    ) {
        return;
    }
    let _serial = common::serial_blocking();
    let (_tmp, state) = state_with_locks_root();
    let below = state.join("locks/agents/instances/elsewhere");
    std::fs::create_dir_all(&below).expect("the directory to mount over");
    let mounted = Command::new("mount")
        .args(["-t", "tmpfs", "locktop-test", "-o", "size=4m"])
        .arg(&below)
        .status()
        .expect("mount");
    assert!(mounted.success(), "mount a tmpfs as root");
    let _mounted = Mounted(below.clone());
    let later = state.join("locks/agents/instances/later");
    std::fs::create_dir_all(&later).expect("the directory mounted over later");
    use std::os::unix::fs::MetadataExt;
    let dev = |p: &std::path::Path| std::fs::metadata(p).expect("stat").dev();
    assert_ne!(dev(&below), dev(&state.join("locks")), "another device");
    let (watch, lines) = kernel_watch(&state);
    let watch = KilledOnDrop(watch);
    let next =
        |what: &str, pred: &dyn Fn(&serde_json::Value) -> bool| next_matching(&lines, what, pred);
    next("watching", &|v| v["watcher"]["health"] == "watching");
    let mut _later = None;
    for aih in [
        "elsewhere/agent-1",
        "elsewhere/made-later/agent-2",
        "later/agent-3",
    ] {
        if aih.starts_with("later/") {
            let mounted = Command::new("mount")
                .args(["-t", "tmpfs", "locktop-test", "-o", "size=4m"])
                .arg(&later)
                .status()
                .expect("mount");
            assert!(mounted.success(), "mount a tmpfs while the monitor runs");
            _later = Some(Mounted(later.clone()));
            next("the health saying a filesystem was mounted", &|v| {
                v["watcher"]["health"] == "rescanning"
                    && v["watcher"]["reason"]
                        .as_str()
                        .is_some_and(|why| why.contains("mounted"))
            });
        }
        let mut holder = hold(&state, &["--aih", aih]);
        let pid = u64::from(holder.pid());
        let key = aih.rsplit('/').next().expect("a key");
        next(&format!("{aih} live with its PID"), &|v| {
            v["name"].as_str().is_some_and(|name| name.ends_with(key))
                && v["to"] == "live"
                && v["pids"]
                    .as_array()
                    .is_some_and(|p| p.contains(&pid.into()))
        });
        holder.kill();
        next(&format!("{aih} free after SIGKILL"), &|v| {
            v["name"].as_str().is_some_and(|name| name.ends_with(key)) && v["to"] == "free"
        });
    }
    drop(watch);
}

/// A deleted file's inode number is given to the next file made, and the
/// kernel's events name files by number: a claim made on the number of a
/// file refused a moment before shows none of that file's tries, only
/// those on itself, by their PID. On a fresh ext4 (loop-mounted, nothing
/// else writing there) the lowest free number is given first, so the
/// claim's gate takes the number of the file deleted just before.
#[test]
fn a_claim_on_a_reused_inode_shows_none_of_the_tries_refused_on_the_file_before() {
    if !root_or_skip(
        "engine::kernel::a_claim_on_a_reused_inode_shows_none_of_the_tries_refused_on_the_file_before",
    ) {
        return;
    }
    if !skip_unless(
        installed("mkfs.ext4", "-V"),
        "skipped engine::kernel::a_claim_on_a_reused_inode_shows_none_of_the_tries_refused_on_the_file_before: \
         needs mkfs.ext4 (apt install e2fsprogs)",
    ) {
        return;
    }
    use std::os::unix::fs::MetadataExt;
    let _serial = common::serial_blocking();
    let tmp = tempfile::tempdir().expect("tempdir");
    let image = tmp.path().join("ext4.img");
    let made = Command::new("mkfs.ext4")
        .args(["-q", "-F", "-b", "1024"])
        .arg(&image)
        .arg("8M")
        .stdout(Stdio::null())
        .status()
        .expect("mkfs.ext4 (e2fsprogs)");
    assert!(made.success(), "mkfs.ext4 an 8 MiB image");
    let fs = tmp.path().join("fs");
    std::fs::create_dir(&fs).expect("the mount point");
    let mounted = Command::new("mount")
        .args(["-o", "loop"])
        .arg(&image)
        .arg(&fs)
        .status()
        .expect("mount");
    assert!(mounted.success(), "mount a loop device as root");
    let _mounted = Mounted(fs.clone());
    let state = fs.join("state");
    let (tags, key) = locktop::locks::agent_tag_lock(&state, "reused");
    std::fs::create_dir_all(&tags).expect("the tags directory");
    let elsewhere = fs.join("elsewhere");
    std::fs::create_dir(&elsewhere).expect("a directory beside the state dir");
    let (watch, lines) = kernel_watch(&state);
    let _watch = KilledOnDrop(watch);
    let next =
        |what: &str, pred: &dyn Fn(&serde_json::Value) -> bool| next_matching(&lines, what, pred);
    next("watching", &|v| v["watcher"]["health"] == "watching");

    // The file before, on the same filesystem: held here, refused to
    // another process, unlocked and deleted.
    let before = elsewhere.join("before");
    let number = {
        let file = std::fs::File::create(&before).expect("create");
        let number = file.metadata().expect("fstat").ino();
        let held = nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusiveNonblock)
            .expect("lock it");
        let refused = Command::new("flock")
            .arg("-n")
            .arg(&before)
            .arg("true")
            .status()
            .expect("flock (util-linux)");
        assert!(!refused.success(), "held here: flock -n is refused");
        drop(held);
        number
    };
    std::fs::remove_file(&before).expect("delete it");

    // A claim on its number, then tried by this process.
    let _holder = hold(&state, &["--tag", "reused"]);
    let gate = locktop::locks::escape::gate_path(&tags, &key);
    let announce = locktop::locks::escape::announce_path(&tags, &key);
    let numbers: Vec<u64> = [&gate, &announce]
        .iter()
        .map(|path| std::fs::metadata(path).expect("stat").ino())
        .collect();
    assert!(
        numbers.contains(&number),
        "the claim's files took {numbers:?}, not {number}: this filesystem gave no number again"
    );
    drop(refuse_tries(&state, "reused", 3));
    let me = std::process::id();
    let line = next("the tries on the claim, by this process", &|v| {
        v["name"] == "reused"
            && v["refused"]["by"]
                .as_array()
                .is_some_and(|by| by.iter().any(|by| by["pid"] == me))
    });
    assert_eq!(line["refused"]["last_minute"], 3, "{line}");
    assert_eq!(
        line["refused"]["by"].as_array().map(Vec::len),
        Some(1),
        "only this process tried the claim: {line}"
    );
}
