//! The engine benchmark (what the README's Performance section reports):
//! builds its own fixtures in a
//! tempdir — keys created through the SDK, a share of them held by real
//! `locktop hold` child processes — and prints every figure as an absolute
//! number AND as a ratio to a baseline measured in the same run.
//!
//! - `cargo bench --bench engine` (argv contains `--bench`): the full suite
//!   (10,000 keys, 1,000 held by 20 processes, 50 kills per probe mode,
//!   5 s idle, 100,000 keys, 3 runs of a 20 s churn at the floor).
//! - the same binary without `--bench` (what `cargo test --all-targets`
//!   runs), or with `--smoke`: a tiny version that exercises every code
//!   path in a few seconds and exits 0.
//! - `-- --only-snapshot` / `-- --only-latency` / `-- --only-interference`
//!   / `-- --only-verdicts` / `-- --only-floor`: the fixture and one section
//!   (1, 2, 5, 6 or 7) alone.
//!   Section 5 (interference) runs real `locktop watch --probe MODE`
//!   monitors; a mode the binary does not know yet prints `skipped: mode
//!   not supported by this binary` rows.
//! - Section 7, THE ENGINE AT THE FLOOR ([`support::floor`]): `locktop
//!   watch --no-connect --source kernel` and `--source inference` beside
//!   `inotifywait -m -r <state>/locks`, side by side on the same churn of
//!   `locktop hold` processes (scale's section 2 driver, 2,000 agents, ~24
//!   holds a second for 20 s): each one's CPU (every thread's time on a
//!   CPU, `/proc/PID/task/*/schedstat`, in nanoseconds), per acquisition
//!   too, its voluntary context switches per acquisition (summed over
//!   `/proc/PID/task/*/status`, and thread by thread) and its threads,
//!   each as a ratio to inotifywait's in
//!   the same run; then the kernel watch's kill → `free` p99 beside raw
//!   inotify's IN_CLOSE of the victim's files, quiet and beside one busy
//!   loop per CPU. Min / median / max of 3 runs (1 run, 1 s of churn in
//!   the smoke run). `-- --baseline-bin PATH` (this section only): the
//!   same rows for that binary's two watches in the same runs, with
//!   current / baseline. Without inotifywait its row prints `skipped:`;
//!   where the kernel's events may not be read (not root, no CAP_PERFMON,
//!   no tracefs), the kernel watches' rows do (both panic under
//!   `LOCKTOP_REQUIRE_ALL=1`).
//!
//! Targets are printed as PASS/MISS; they never fail the run. Every child
//! process is SIGKILLed on exit, panic included ([`support::Guarded`]);
//! holders also release and exit on their own when this process dies
//! (their stdin closes).
//!
//! # Where a passive snapshot's time goes (profiled 2026-11-30, stops 16-17)
//!
//! `strace -c` and `perf record -g` of `locktop snapshot --probe passive
//! --json`, 10,000 tags of which 1,000 held by 20 `hold` processes, release
//! build, 2 vCPUs:
//!
//! - **The SDK's `try_held` was 2.3-2.7x the floor by itself**: it probes
//!   both files of every claim before looking at either answer (2 opens,
//!   4 flocks, 2 closes per free claim; 38,000 flocks for 10,000 keys).
//!   `liveness::shared_probe` answers a free gate (and a fully held
//!   claim) itself, with the SDK's own shared-lock test and a
//!   differential test against `try_held`.
//! - **Probing directory by directory** (`liveness::dir_probe`, stop 17):
//!   each claim directory is opened once and every claim probed relative
//!   to it (`openat`, no path built or walked per key), and the scan's
//!   directory-entry type replaces the `lstat` per key (the scan lists a
//!   claim only when its gate is a regular file). The old per-key path
//!   (two path allocations, the escaping, an `lstat`, the async probe) is
//!   why two workers gained only 1.18x: they now gain 1.3-1.4x, and the
//!   probe phase went from 35-47 ms to 16-23 ms.
//! - **A `/proc/locks` read mostly sleeps**: each `read()` of it takes the
//!   kernel's file-lock rwsem for writing (`locks_start`:
//!   `percpu_down_write`), which first waits for an RCU grace period.
//!   Measured: a first read of 2,000 locks took 15 ms of wall time for
//!   1.9 ms of CPU; reads right after it 1.2 ms. So the annotation now
//!   reads it on a thread of its own while it `lstat`s the held claims'
//!   files, and the engine does every read off its loop
//!   (`engine::run::inference::lookup`); the row below that times one read times a
//!   warm one.
//! - **Annotating 1,000 held keys** (18-23 ms) is mostly reading every
//!   holder's `/proc/<pid>/fdinfo/*` (2,000 files for 20 holders of 100
//!   fds each) to verify the holder before naming it (a reused PID is
//!   never shown); it now runs on the machine's threads, each entry
//!   opened relative to its directory.
//! - **The scan** (readdir of 20,000 entries, unescaping, building keys)
//!   is 12-15 ms on one thread, about half of it in the kernel's ext4
//!   htree readdir; most entries are in one directory (`tags`), so a walk
//!   split by directory would gain little.
//!
//! Stop 18: the rest was serial time, not CPU, so the passive snapshot
//! now overlaps its phases (`liveness::bulk::probe_tree_passive`): the
//! walk hands keys to the probe threads 256 at a time as it reads them
//! (scan then probe 30-37 ms on the stop-17 fixture, at once 21-26 ms),
//! and the `/proc/locks` read begins before the walk, on a thread of its
//! own, so its grace period passes meanwhile (a held claim it missed is
//! read again; holders are verified after the probes, as before). The
//! breakdown row below still times each phase alone, one after the other.
//! What remains after the probes is the annotation (1,000 held keys:
//! ~3 ms of `lstat`s, ~7 ms reading 20 holders' 2,000 fdinfo files).

mod support;

use std::collections::{HashMap, HashSet};
use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use locktop::cli::source_args::{SourceArgs, SourceFlag};
use locktop::context::Context;
use locktop::disk::key::{KeyKind, LockKey};
use locktop::disk::scan::scan_root;
use locktop::engine::trace::Trace;
use locktop::engine::{self, Delta, EngineConfig, EngineHandle, KeyState, Liveness};
use locktop::liveness::annotate::annotate;
use locktop::liveness::bulk::{
    ReadLocks, TreeTimeline, probe_all, probe_all_unannotated, probe_tree_passive,
};
use locktop::liveness::dir_probe::probe_passive;
use locktop::liveness::probe::{ProbeMode, Prober};
use locktop::locks::agent_tag_lock;

use support::floor;
use support::interference::{self, SPAWNER_PAUSE_MAX_US, finish_spawner, start_spawner};
use support::killpath::{KillPath, RawInotify, tag_keys};
use support::outside::Churn;
use support::*;

/// Everything that differs between the full run and the smoke run.
struct Plan {
    name: &'static str,
    tags: usize,
    instances: usize,
    instance_parents: usize,
    holders: usize,
    keys_per_holder: usize,
    snapshot_runs: usize,
    cli_runs: usize,
    lslocks_cap: Duration,
    kills: usize,
    keys_per_kill: usize,
    /// Random wait (ms) between "seen live" and the kill.
    dwell_ms: std::ops::Range<u64>,
    poll_kills: usize,
    idle: Duration,
    /// No delta for this long = the engine has settled.
    idle_settle: Duration,
    big_tags: usize,
    big_instances: usize,
    big_parents: usize,
    big_runs: usize,
    /// How long `locktop watch` may settle after `synced:` before its
    /// peak RSS is read.
    watch_settle: Duration,
    interference: Duration,
    interference_keys: usize,
    /// Section 5 with real monitors: tries per tight-loop row.
    tight_tries: usize,
    /// Section 5 with real monitors: tries per relocation row.
    relocation_tries: usize,
    /// Section 5 with real monitors: the flock-latency window per row.
    latency_window: Duration,
    /// Section 5 with real monitors: quiet time once they are watching.
    monitor_settle: Duration,
    /// Section 5 with real monitors: how many of each mode, row by row.
    monitor_counts: &'static [usize],
    /// Keystroke + draw samples in the frame section.
    frame_samples: usize,
    /// Samples per row of the verdicts section.
    verdict_samples: usize,
    /// Section 7 (the engine at the floor).
    floor: floor::Sizes,
}

impl Plan {
    fn full() -> Self {
        Self {
            name: "FULL",
            tags: 8_000,
            instances: 2_000,
            instance_parents: 100,
            holders: 20,
            keys_per_holder: 50,
            snapshot_runs: 7,
            cli_runs: 3,
            lslocks_cap: Duration::from_secs(20),
            kills: 50,
            keys_per_kill: 3,
            dwell_ms: 50..300,
            poll_kills: 10,
            idle: Duration::from_secs(5),
            idle_settle: Duration::from_secs(1),
            big_tags: 80_000,
            big_instances: 20_000,
            big_parents: 200,
            big_runs: 3,
            watch_settle: Duration::from_secs(1),
            interference: Duration::from_secs(3),
            interference_keys: 20,
            tight_tries: 300,
            relocation_tries: 120,
            latency_window: Duration::from_secs(3),
            monitor_settle: Duration::from_millis(300),
            monitor_counts: &[1, 3],
            frame_samples: 200,
            verdict_samples: 30,
            floor: floor::Sizes {
                runs: 3,
                churn: Churn::STEADY,
                settle: Duration::from_secs(1),
                kills: 50,
                keys_per_kill: 3,
                dwell_ms: 50..300,
            },
        }
    }

    fn smoke() -> Self {
        Self {
            name: "SMOKE",
            tags: 160,
            instances: 40,
            instance_parents: 4,
            holders: 2,
            keys_per_holder: 10,
            snapshot_runs: 5,
            cli_runs: 1,
            lslocks_cap: Duration::from_secs(2),
            kills: 5,
            keys_per_kill: 3,
            dwell_ms: 20..60,
            poll_kills: 1,
            idle: Duration::from_secs(1),
            idle_settle: Duration::from_millis(300),
            big_tags: 1_600,
            big_instances: 400,
            big_parents: 20,
            big_runs: 1,
            watch_settle: Duration::from_millis(200),
            interference: Duration::from_millis(200),
            interference_keys: 10,
            tight_tries: 5,
            relocation_tries: 2,
            latency_window: Duration::from_millis(50),
            monitor_settle: Duration::from_millis(20),
            monitor_counts: &[1, 2],
            frame_samples: 20,
            verdict_samples: 2,
            floor: floor::Sizes {
                runs: 1,
                churn: Churn::SMOKE,
                settle: Duration::from_millis(200),
                kills: 3,
                keys_per_kill: 3,
                dwell_ms: 20..60,
            },
        }
    }

    fn keys(&self) -> usize {
        self.tags + self.instances
    }

    fn held(&self) -> usize {
        self.holders * self.keys_per_holder
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    match args.get(1).map(String::as_str) {
        Some(interference::SPAWNER_CHILD) => return interference::spawner_child(&args[2..]),
        Some(MEASURE_CHILD) => return measure_child(&args[2..]),
        Some(interference::AGENT_CHILD) => return interference::agent_child(&args[2..]),
        Some(interference::FLOCK_LATENCY_CHILD) => {
            return interference::flock_latency_child(&args[2..]);
        }
        Some(interference::FOREIGN_FLOCKS_CHILD) => {
            return interference::foreign_flocks_child(&args[2..]);
        }
        _ => {}
    }
    let full = args.iter().any(|a| a == "--bench") && !args.iter().any(|a| a == "--smoke");
    let plan = if full { Plan::full() } else { Plan::smoke() };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let started = Instant::now();
    runtime.block_on(run(&plan, &args));
    runtime.shutdown_timeout(Duration::from_millis(200));
    say(format!(
        "\n{} run finished in {} (all children killed and reaped); load at end: {}",
        plan.name,
        fmt_dur(started.elapsed()),
        loadavg()
    ));
}

async fn run(plan: &Plan, args: &[String]) {
    let bin = locktop_bin();
    let tmp = tempfile::Builder::new()
        .prefix("locktop-bench-")
        .tempdir()
        .expect("tempdir");
    header(plan, args, &bin, tmp.path());
    let mut targets = Targets::default();

    // ---- Fixture: N keys through the SDK, a share held by children.
    let state = tmp.path().join("state-main");
    let tags: Vec<String> = (0..plan.tags).map(tag_name).collect();
    let aihs = instance_names(plan.instances, plan.instance_parents);
    let created = create_free_keys_sdk(&state, &tags, &aihs).await;
    let tags_per_holder = plan.keys_per_holder - 1;
    let spawn_start = Instant::now();
    let mut holders = Vec::new();
    for h in 0..plan.holders {
        let aih = &aihs[plan.instance_parents + h];
        let mine = &tags[h * tags_per_holder..(h + 1) * tags_per_holder];
        let mut family = vec!["--aih".to_string(), aih.clone()];
        for tag in mine {
            family.push("--tag".into());
            family.push(tag.clone());
        }
        let (holder, _) = spawn_holder_retrying(&bin, &state, &family);
        holders.push(holder);
    }
    let spawned = spawn_start.elapsed();
    let held_tag_end = plan.holders * tags_per_holder;
    let interference_tags: Vec<String> = tags[plan.tags - plan.interference_keys..].to_vec();
    let kill_pool: Vec<String> = tags[held_tag_end..plan.tags - plan.interference_keys].to_vec();
    say(format!(
        "\nFIXTURE  {} keys on disk in {}: {} tags (`bench tag:NNNNNN.v1`, escaped on disk) + {} \
         instance AIHs (`cli/daemon/<22-char id>-rN`, {} with nested children), created through \
         the SDK (locktop::locks::try_acquire + release, in-process) in {}; {} of them held by {} \
         `locktop hold --aih A --tag …` child processes × {} keys (spawned in {}).",
        thousands(plan.keys()),
        fs_type(tmp.path()),
        thousands(plan.tags),
        thousands(plan.instances),
        plan.instance_parents,
        fmt_dur(created),
        thousands(plan.held()),
        plan.holders,
        plan.keys_per_holder,
        fmt_dur(spawned),
    ));

    // `--only-verdicts`, `--only-latency`, `--only-interference`,
    // `--only-snapshot`, `--only-floor`: the fixture and section 6, 2, 5,
    // 1 or 7 alone.
    if args.iter().any(|a| a == "--only-floor") {
        let t = Instant::now();
        section_floor(plan, &bin, tmp.path(), args, &mut targets);
        took(t);
        targets.say(plan.name == "SMOKE", "engine");
        return;
    }
    if args.iter().any(|a| a == "--only-snapshot") {
        let t = Instant::now();
        section_snapshot(plan, &bin, &state, &mut targets).await;
        took(t);
        targets.say(plan.name == "SMOKE", "engine");
        return;
    }
    if args.iter().any(|a| a == "--only-interference") {
        let t = Instant::now();
        section_interference(plan, &bin, &state, &interference_tags, &mut targets).await;
        took(t);
        targets.say(plan.name == "SMOKE", "engine");
        return;
    }
    if args.iter().any(|a| a == "--only-latency") {
        let t = Instant::now();
        section_latency(plan, &bin, &state, &kill_pool, &mut targets).await;
        took(t);
        targets.say(plan.name == "SMOKE", "engine");
        return;
    }
    let all = !args.iter().any(|a| a == "--only-verdicts");
    if all {
        other_sections(
            plan,
            &bin,
            &state,
            tmp.path(),
            &kill_pool,
            &interference_tags,
            &mut targets,
        )
        .await;
    }
    let t = Instant::now();
    let fixture = support::verdicts::Fixture {
        state: &state,
        holders: holders.iter().map(Holder::pid).collect(),
        samples: plan.verdict_samples,
        idle: plan.idle,
    };
    for line in support::verdicts::section(fixture).await {
        targets.add(line);
    }
    took(t);
    if all {
        let t = Instant::now();
        section_floor(plan, &bin, tmp.path(), args, &mut targets);
        took(t);
    }

    targets.say(plan.name == "SMOKE", "engine");
    drop(holders);
}

/// Sections 1–5 and the frame section (all but section 6).
async fn other_sections(
    plan: &Plan,
    bin: &Path,
    state: &Path,
    tmp: &Path,
    kill_pool: &[String],
    interference_tags: &[String],
    targets: &mut Targets,
) {
    let t = Instant::now();
    section_snapshot(plan, bin, state, targets).await;
    took(t);
    let t = Instant::now();
    section_latency(plan, bin, state, kill_pool, targets).await;
    took(t);
    let t = Instant::now();
    section_idle(plan, state, targets).await;
    took(t);
    let t = Instant::now();
    section_big(plan, bin, tmp, targets).await;
    took(t);
    let t = Instant::now();
    section_interference(plan, bin, state, interference_tags, targets).await;
    took(t);
    let t = Instant::now();
    support::frames::section_frames(plan.big_tags + plan.big_instances, plan.frame_samples);
    took(t);
}

/// Section 7 ([`floor::section`]), beside `--baseline-bin PATH`'s
/// watches when given.
fn section_floor(plan: &Plan, bin: &Path, tmp: &Path, args: &[String], targets: &mut Targets) {
    let baseline = args
        .iter()
        .position(|a| a == "--baseline-bin")
        .map(|i| {
            args.get(i + 1)
                .expect("--baseline-bin takes a path")
                .as_str()
        })
        .or_else(|| args.iter().find_map(|a| a.strip_prefix("--baseline-bin=")))
        .map(Path::new);
    floor::section(bin, baseline, tmp, &plan.floor, targets);
}

/// `(section: 12.3 s)` — where the bench's own time goes.
fn took(start: Instant) {
    say(format!("   (section: {})", fmt_dur(start.elapsed())));
}

fn header(plan: &Plan, args: &[String], bin: &Path, tmp: &Path) {
    say(format!("locktop engine benchmark — {} run", plan.name));
    say(format!(
        "command:  {}   [argv; `cargo bench --bench engine` passes --bench → full run, \
         without it (cargo test --all-targets) or with --smoke → smoke run]",
        args.join(" ")
    ));
    say_where(bin, tmp);
}

// ===========================================================================
// 1. Full snapshot vs the floor and lslocks

/// One full snapshot as `locktop snapshot` takes it: scan, probes in
/// `mode` and holder PIDs (one `/proc/locks` read). Passive: the walk and
/// the probes at once, the read begun before them (`probe_tree_passive`).
async fn snapshot(state: &Path, mode: ProbeMode) -> (Duration, Vec<(LockKey, KeyState)>) {
    let (took, batch, _) = snapshot_timed(state, mode).await;
    (took, batch)
}

/// [`snapshot`], with the passive one's timeline.
async fn snapshot_timed(
    state: &Path,
    mode: ProbeMode,
) -> (Duration, Vec<(LockKey, KeyState)>, Option<TreeTimeline>) {
    let own = HashSet::from([std::process::id()]);
    let start = Instant::now();
    let prober = Prober::new(Context::new(state.to_path_buf()));
    let (batch, timeline) = match mode {
        ProbeMode::LockFree => {
            let read: ReadLocks =
                Arc::new(|| locktop::liveness::proc_locks::LockIndex::read().unwrap_or_default());
            let tree =
                locktop::liveness::bulk::probe_tree_lock_free(state, &own, nproc(), read, None)
                    .await
                    .expect("scan the fixture");
            (tree.batch, Some(tree.timeline))
        }
        ProbeMode::Passive => {
            let read: ReadLocks =
                Arc::new(|| locktop::liveness::proc_locks::LockIndex::read().unwrap_or_default());
            let tree = probe_tree_passive(state, &prober, &own, nproc(), read)
                .await
                .expect("scan the fixture");
            (tree.batch, Some(tree.timeline))
        }
        ProbeMode::Acquire => {
            let report = scan_root(state).await.expect("scan the fixture");
            let batch = probe_all(&prober, report.keys, mode, &own).await;
            (locktop::liveness::probed::Probed::of(batch), None)
        }
    };
    // Timed as a snapshot is (split); handed back as a plain list.
    (start.elapsed(), batch.into_states(), timeline)
}

struct Counts {
    keys: usize,
    held: usize,
    with_pids: usize,
    other: usize,
}

fn counts(batch: &[(LockKey, KeyState)]) -> Counts {
    let held = batch
        .iter()
        .filter(|(_, s)| s.liveness == Liveness::Live)
        .count();
    let with_pids = batch
        .iter()
        .filter(|(_, s)| s.liveness == Liveness::Live && !s.holders.is_empty())
        .count();
    let other = batch
        .iter()
        .filter(|(_, s)| !matches!(s.liveness, Liveness::Live | Liveness::Free))
        .count();
    Counts {
        keys: batch.len(),
        held,
        with_pids,
        other,
    }
}

async fn section_snapshot(plan: &Plan, bin: &Path, state: &Path, targets: &mut Targets) {
    let runs = plan.snapshot_runs;
    say(format!(
        "\n1. FULL SNAPSHOT  {} keys, {} held — median of {runs} interleaved rounds after 1 warm-up \
         round; probe_all uses {} worker threads, the floor 1 thread",
        thousands(plan.keys()),
        thousands(plan.held()),
        nproc()
    ));
    let report = scan_root(state).await.expect("scan");
    let gates = c_paths(report.keys.iter().map(LockKey::gate_path));

    // Interleaved: one of each per round, so load changes on the machine
    // hit every variant alike. Round 0 is the warm-up.
    let own = HashSet::from([std::process::id()]);
    let prober = Prober::new(Context::new(state.to_path_buf()));
    let mut floor = Vec::new();
    let mut floor_busy = 0;
    let mut floor_two = Vec::new();
    let mut sdk = Vec::new();
    let modes = [ProbeMode::LockFree, ProbeMode::Passive, ProbeMode::Acquire];
    let mut times: [Vec<Duration>; 3] = Default::default();
    let mut last: [Option<Counts>; 3] = Default::default();
    let (mut t_scan, mut t_probe, mut t_annotate) = (Vec::new(), Vec::new(), Vec::new());
    let mut t_probe_one = Vec::new();
    let mut timelines = Vec::new();
    for round in 0..=runs {
        let keep = round > 0;
        let (t, busy) = floor_loop(&gates);
        floor_busy = busy;
        if keep {
            floor.push(t);
        }
        // The same loop split over two threads of this process: what a
        // second probe worker can gain at best.
        let start = Instant::now();
        let (left, right) = gates.split_at(gates.len() / 2);
        std::thread::scope(|scope| {
            scope.spawn(|| floor_loop(left));
            floor_loop(right);
        });
        if keep {
            floor_two.push(start.elapsed());
        }
        // The SDK's own probe, sequentially: the least any SDK-based
        // monitor can spend per key (locktop may not re-implement it).
        let start = Instant::now();
        let mut held = 0;
        for key in &report.keys {
            if objectiveai_sdk::lockfile::try_held(key.dir(), key.key()).await {
                held += 1;
            }
        }
        if keep {
            sdk.push(start.elapsed());
        }
        assert_eq!(held, plan.held(), "try_held saw every held key");
        for (i, mode) in modes.iter().enumerate() {
            let (t, batch, timeline) = snapshot_timed(state, *mode).await;
            if keep {
                times[i].push(t);
                if *mode == ProbeMode::Passive {
                    timelines.extend(timeline);
                }
            }
            last[i] = Some(counts(&batch));
        }
        // Where the passive time goes.
        let t = Instant::now();
        let scanned = scan_root(state).await.expect("scan");
        let scan_t = t.elapsed();
        let t = Instant::now();
        let one_task = probe_passive(&prober, scanned.keys.clone(), 1).await;
        let probe_one_t = t.elapsed();
        drop(one_task);
        let t = Instant::now();
        let mut batch = probe_all_unannotated(&prober, scanned.keys, ProbeMode::Passive).await;
        let probe_t = t.elapsed();
        let t = Instant::now();
        annotate(&mut batch, &own);
        if keep {
            t_scan.push(scan_t);
            t_probe.push(probe_t);
            t_probe_one.push(probe_one_t);
            t_annotate.push(t.elapsed());
        }
    }
    let floor = median(&floor);
    let sdk = median(&sdk);
    let mut results = Vec::new();
    for (i, mode) in modes.into_iter().enumerate() {
        let c = last[i].take().expect("at least one run");
        assert_eq!(c.keys, plan.keys(), "{mode:?} snapshot saw every key");
        assert_eq!(c.held, plan.held(), "{mode:?} snapshot saw every held key");
        results.push((mode, median(&times[i]), c));
    }

    let t = Instant::now();
    let index = locktop::liveness::proc_locks::LockIndex::read().expect("/proc/locks");
    let t_index = t.elapsed();

    // The real binary end to end (process start, scan, probe, PIDs, JSON).
    let mut cli = Vec::new();
    for _ in 0..plan.cli_runs {
        let run = run_cli_snapshot(bin, state, "passive", true);
        assert_eq!(run.status, 0, "locktop snapshot exit status");
        cli.push(run.wall);
    }
    let cli = median(&cli);

    let lslocks = run_lslocks(plan.lslocks_cap, &state.with_extension("lslocks.json"));

    let per_key = |d: Duration| {
        format!(
            "{:.2} µs/key",
            d.as_secs_f64() * 1e6 / plan.keys().max(1) as f64
        )
    };
    say(format!(
        "   {:<58} {:>9}  {:>13}  {:>11}",
        "", "median", "", "vs floor"
    ));
    say(format!(
        "   {:<58} {:>9}  {:>13}  {:>11}",
        "floor: open+flock(SH|NB)+close per gate (libc, 1 thread)",
        fmt_dur(floor),
        per_key(floor),
        "1.00×"
    ));
    let floor_two = median(&floor_two);
    say(format!(
        "   {:<58} {:>9}  {:>13}  {:>11}",
        "the floor's loop split over 2 threads of one process",
        fmt_dur(floor_two),
        per_key(floor_two),
        ratio(floor_two, floor)
    ));
    say(format!(
        "   {:<58} {:>9}  {:>13}  {:>11}",
        "SDK floor: lockfile::try_held per key (1 task, sequential)",
        fmt_dur(sdk),
        per_key(sdk),
        ratio(sdk, floor)
    ));
    for (mode, t, c) in &results {
        say(format!(
            "   {:<58} {:>9}  {:>13}  {:>11}   ({} live, {} with PIDs, {} other)",
            format!("locktop {} (scan, probes, PIDs)", mode.as_str()),
            fmt_dur(*t),
            per_key(*t),
            ratio(*t, floor),
            c.held,
            c.with_pids,
            c.other
        ));
    }
    let at = |part: fn(&TreeTimeline) -> Duration| {
        fmt_dur(median(&timelines.iter().map(part).collect::<Vec<_>>()))
    };
    say(format!(
        "     passive, as it runs (medians from its start): walk + probes done {} · the first \
         /proc/locks read (begun at the start) done {} · holders named {}",
        at(|t| t.probed),
        at(|t| t.read),
        at(|t| t.annotated),
    ));
    say(format!(
        "     passive breakdown, each part alone: scan {} · probe {} (the same probes on 1 thread: {}) · annotate {} \
         (one /proc/locks read: {} for {} locked files)",
        fmt_dur(median(&t_scan)),
        fmt_dur(median(&t_probe)),
        fmt_dur(median(&t_probe_one)),
        fmt_dur(median(&t_annotate)),
        fmt_dur(t_index),
        index.len()
    ));
    say(format!(
        "   {:<58} {:>9}  {:>13}  {:>11}   (median of {}; process start + JSON to /dev/null)",
        "`locktop snapshot --all --json --probe passive` (binary)",
        fmt_dur(cli),
        per_key(cli),
        ratio(cli, floor),
        plan.cli_runs
    ));
    let lock_free = results[0].1;
    let passive = results[1].1;
    match lslocks {
        None => say("   lslocks --json: not installed (util-linux) — skipped"),
        Some(LslocksRun {
            wall,
            hit_cap,
            entries,
        }) => {
            let shown = if hit_cap {
                format!("> {}", fmt_dur(plan.lslocks_cap))
            } else {
                fmt_dur(wall)
            };
            let vs = if hit_cap {
                format!(
                    "locktop passive ≥ {} faster",
                    ratio(plan.lslocks_cap, passive)
                )
            } else {
                format!(
                    "locktop passive {} faster; lslocks listed {} locks (whole machine)",
                    ratio(wall, passive),
                    entries.map_or_else(|| "?".into(), thousands)
                )
            };
            say(format!(
                "   {:<58} {:>9}  {:>13}  {:>11}   (cap {}{}; {vs})",
                "lslocks --json (1 run)",
                shown,
                "",
                if hit_cap {
                    format!("> {}", ratio(plan.lslocks_cap, floor))
                } else {
                    ratio(wall, floor)
                },
                fmt_dur(plan.lslocks_cap),
                if hit_cap { ", HIT" } else { ", not hit" },
            ));
        }
    }
    say(format!(
        "   sanity: the floor found {} exclusively locked gates (expected {})",
        thousands(floor_busy),
        thousands(plan.held())
    ));
    say(format!(
        "   passive snapshot vs the SDK floor: {} (scan + PIDs + locktop's per-key checks on top of try_held)",
        ratio(passive, sdk)
    ));
    targets.add(format!(
        "(1) lock-free snapshot (the default) ≤ 2× floor: {} = {} / {}  {}",
        ratio(lock_free, floor),
        fmt_dur(lock_free),
        fmt_dur(floor),
        verdict(lock_free.as_secs_f64() <= 2.0 * floor.as_secs_f64()),
    ));
    targets.add(format!(
        "(1) passive snapshot ≤ 2× floor: {} = {} / {}  {}   (vs SDK try_held loop: {})",
        ratio(passive, floor),
        fmt_dur(passive),
        fmt_dur(floor),
        verdict(passive.as_secs_f64() <= 2.0 * floor.as_secs_f64()),
        ratio(passive, sdk)
    ));
    // Not in the smoke run (`cargo test` runs it beside other tests):
    // emptying a machine's caches is for a bench run of its own.
    if plan.name != "SMOKE" {
        cold_cache_row(bin, state, &gates).await;
    }
}

/// Empties the page, dentry and inode caches (`echo 3 >
/// /proc/sys/vm/drop_caches`, after a sync); false where the bench may not.
fn drop_caches() -> bool {
    // SAFETY: sync(2) takes no arguments and cannot fail.
    unsafe { libc::sync() };
    std::fs::write("/proc/sys/vm/drop_caches", b"3").is_ok()
}

/// The first snapshot on a cold box (operators run `snapshot` once): the
/// floor, the in-process snapshot and the binary end to end (its own 90+
/// MB of code read back from disk included), each right after the caches
/// were emptied. One run each: a cold run cannot be repeated warm.
async fn cold_cache_row(bin: &Path, state: &Path, gates: &[std::ffi::CString]) {
    if !drop_caches() {
        say(
            "   cold cache: skipped (cannot write /proc/sys/vm/drop_caches: not root, or a read-only /proc)",
        );
        return;
    }
    let (floor, _) = floor_loop(gates);
    drop_caches();
    let (in_process, _) = snapshot(state, ProbeMode::Passive).await;
    drop_caches();
    let cli = run_cli_snapshot(bin, state, "passive", true);
    say(format!(
        "   cold cache (each right after sync + drop_caches, one run each): floor {} · passive snapshot \
         in-process {} ({}) · `locktop snapshot --all --json` binary {} (exit {})",
        fmt_dur(floor),
        fmt_dur(in_process),
        ratio(in_process, floor),
        fmt_dur(cli.wall),
        cli.status
    ));
}

/// What one run of the `locktop` binary cost.
/// Runs `locktop --state-dir D snapshot --all [--json] --probe MODE >
/// /dev/null` through a small intermediary (this binary, re-executed with
/// `--measure-child`), which reaps it with wait4 and reports its wall time
/// and `ru_maxrss`. Why the intermediary: a child spawned straight from
/// this (large) process inherits our RSS high-water mark at exec (vfork +
/// exec records the old mm's peak into the child's `ru_maxrss`).
fn run_cli_snapshot(bin: &Path, state: &Path, probe: &str, json: bool) -> CliRun {
    let mut args = vec!["--state-dir".as_ref(), state.as_os_str()];
    args.extend(["snapshot", "--all", "--probe", probe].map(std::ffi::OsStr::new));
    if json {
        args.push("--json".as_ref());
    }
    run_measured(bin, &args)
}

struct LslocksRun {
    wall: Duration,
    hit_cap: bool,
    entries: Option<usize>,
}

/// `lslocks --json > file`, killed at `cap`. `None` when not installed.
fn run_lslocks(cap: Duration, out: &Path) -> Option<LslocksRun> {
    let installed = Command::new("lslocks")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !installed {
        return None;
    }
    let file = std::fs::File::create(out).expect("lslocks output file");
    let start = Instant::now();
    let child = Command::new("lslocks")
        .arg("--json")
        .stdin(Stdio::null())
        .stdout(file)
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let mut child = Guarded::new(child);
    let hit_cap = loop {
        if child.try_wait().is_some() {
            break false;
        }
        if start.elapsed() >= cap {
            child.sigkill();
            child.wait();
            break true;
        }
        std::thread::sleep(Duration::from_millis(2));
    };
    let wall = start.elapsed();
    let entries = (!hit_cap)
        .then(|| std::fs::read_to_string(out).ok())
        .flatten()
        .and_then(|text| serde_json::from_str::<serde_json::Value>(&text).ok())
        .and_then(|doc| doc.get("locks")?.as_array().map(Vec::len));
    Some(LslocksRun {
        wall,
        hit_cap,
        entries,
    })
}

// ===========================================================================
// 2. SIGKILL → Delta latency

/// Next delta before `deadline`, or `None` at the deadline.
async fn next_delta(handle: &mut EngineHandle, deadline: tokio::time::Instant) -> Option<Delta> {
    tokio::time::timeout_at(deadline, handle.deltas.recv())
        .await
        .ok()
        .flatten()
}

/// Starts an engine and waits for its first `Synced`, then for `quiet` with
/// no delta. Returns the handle and the time to the first `Synced`.
async fn start_engine(
    state: &Path,
    config: EngineConfig,
    quiet: Duration,
) -> (EngineHandle, Duration) {
    let start = Instant::now();
    let mut handle = engine::spawn(Context::new(state.to_path_buf()), config);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    let synced = loop {
        match next_delta(&mut handle, deadline).await {
            Some(Delta::Synced { .. }) => break start.elapsed(),
            Some(_) => {}
            None => panic!("engine did not sync within 120 s"),
        }
    };
    settle(&mut handle, quiet, Duration::from_secs(20)).await;
    (handle, synced)
}

/// Drains deltas until none arrived for `quiet` (at most `max`).
async fn settle(handle: &mut EngineHandle, quiet: Duration, max: Duration) -> usize {
    let end = tokio::time::Instant::now() + max;
    let mut drained = 0;
    loop {
        let deadline = (tokio::time::Instant::now() + quiet).min(end);
        match next_delta(handle, deadline).await {
            Some(_) => drained += 1,
            None => return drained,
        }
    }
}

fn tag_names(pool: &[String], start: usize, count: usize) -> Vec<String> {
    (0..count)
        .map(|i| pool[(start + i) % pool.len()].clone())
        .collect()
}

struct KillRun {
    /// Kill → first of the holder's keys reported free.
    first: Vec<Duration>,
    /// Kill → all of its keys reported free.
    all: Vec<Duration>,
    /// `all` of the kills during which a periodic sweep ended (a
    /// `Delta::Synced` arrived while waiting or right after the last Free):
    /// a sweep overlapping the kill (it runs off the engine loop, but it
    /// competes for the same two cores).
    during_sweep: Vec<Duration>,
    /// The slowest kill and the deltas of its keys, timed from the kill.
    slowest: Option<(Duration, Vec<String>)>,
    missed: usize,
    no_pids: usize,
    respawns: u32,
    sweeps: u64,
    probes: u64,
    /// `/proc/locks` reads from the first kill to the last (the steady
    /// state: the first view is behind).
    index_reads: u64,
    /// Each kill's way through the engine (its last key to go free).
    paths: Vec<support::killpath::KillPath>,
}

async fn kill_latency(
    plan: &Plan,
    bin: &Path,
    state: &Path,
    pool: &[String],
    config: EngineConfig,
) -> KillRun {
    let stages = Arc::new(Trace::default());
    let config = EngineConfig {
        trace: Some(stages.clone()),
        ..config
    };
    let (mut handle, _) = start_engine(state, config, Duration::from_millis(300)).await;
    let tags_dir = agent_tag_lock(state, "any").0;
    let raw = RawInotify::start(&tags_dir).expect("a raw inotify reader of the tags dir");
    let sweeps0 = handle.stats.sweeps.load(Ordering::Relaxed);
    let probes0 = handle.stats.probes.load(Ordering::Relaxed);
    let reads0 = handle.stats.index_reads.load(Ordering::Relaxed);
    let mut run = KillRun {
        first: Vec::new(),
        all: Vec::new(),
        during_sweep: Vec::new(),
        slowest: None,
        missed: 0,
        no_pids: 0,
        respawns: 0,
        sweeps: 0,
        probes: 0,
        index_reads: 0,
        paths: Vec::new(),
    };
    for k in 0..plan.kills {
        let names = tag_names(pool, k * plan.keys_per_kill, plan.keys_per_kill);
        let (mut holder, respawns) = spawn_holder_retrying(bin, state, &group_args(&names));
        run.respawns += respawns;
        // Wait until the engine shows every key live with this holder's PID.
        let pid = holder.pid();
        let mut live: HashSet<String> = HashSet::new();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(3);
        while live.len() < names.len() {
            match next_delta(&mut handle, deadline).await {
                Some(Delta::Key { key, state, .. })
                    if key.kind() == KeyKind::Tag
                        && names.iter().any(|name| name == key.name()) =>
                {
                    if state.liveness.is_held() && state.holders.iter().any(|p| p.pid == pid) {
                        live.insert(key.name().to_string());
                    }
                }
                Some(_) => {}
                None => break,
            }
        }
        if live.len() < names.len() {
            run.no_pids += 1;
        }
        // A random dwell, so kills do not align with the engine's timers.
        let dwell = Duration::from_millis(fastrand::u64(plan.dwell_ms.clone()));
        settle(&mut handle, dwell, dwell).await;

        stages.take();
        stages.take_spans();
        raw.forget();
        let t0 = Instant::now();
        holder.process.sigkill();
        let mut received: HashMap<String, Instant> = HashMap::new();
        let mut free: HashSet<String> = HashSet::new();
        let mut first = None;
        let mut swept = false;
        let mut trace: Vec<String> = Vec::new();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        while free.len() < names.len() {
            match next_delta(&mut handle, deadline).await {
                Some(Delta::Synced { .. }) => swept = true,
                Some(Delta::Key { key, state, .. })
                    if key.kind() == KeyKind::Tag
                        && names.iter().any(|name| name == key.name()) =>
                {
                    trace.push(format!(
                        "{} {} → {}",
                        fmt_dur(t0.elapsed()),
                        key.name(),
                        state.liveness.as_str()
                    ));
                    if state.liveness == Liveness::Free {
                        first.get_or_insert_with(|| t0.elapsed());
                        received.insert(key.name().to_string(), Instant::now());
                        free.insert(key.name().to_string());
                    }
                }
                Some(_) => {}
                None => break,
            }
        }
        let all = t0.elapsed();
        let victims = tag_keys(state, &names);
        let last = victims
            .iter()
            .filter_map(|key| Some((key, *received.get(key.name())?)))
            .max_by_key(|(_, at)| *at);
        if let Some((key, at)) = last {
            let mut path = KillPath::of(key, &stages.take(), &stages.take_spans(), t0, at);
            path.raw_all_closed = raw.all_closed(&victims, t0);
            run.paths.push(path);
        }
        if run
            .slowest
            .as_ref()
            .is_none_or(|(slowest, _)| all > *slowest)
        {
            run.slowest = Some((all, trace));
        }
        // A sweep that probed these keys itself sends its Synced right
        // after their Free deltas: look for it too.
        let deadline = tokio::time::Instant::now() + Duration::from_millis(5);
        while let Some(delta) = next_delta(&mut handle, deadline).await {
            if matches!(delta, Delta::Synced { .. }) {
                swept = true;
            }
        }
        holder.process.wait();
        match first {
            Some(first) if free.len() == names.len() => {
                run.first.push(first);
                run.all.push(all);
                if swept {
                    run.during_sweep.push(all);
                }
            }
            _ => run.missed += 1,
        }
    }
    run.sweeps = handle.stats.sweeps.load(Ordering::Relaxed) - sweeps0;
    run.probes = handle.stats.probes.load(Ordering::Relaxed) - probes0;
    run.index_reads = handle.stats.index_reads.load(Ordering::Relaxed) - reads0;
    run
}

/// The baseline: a loop doing a full passive snapshot every 1 s; the kill
/// is detected when a snapshot shows all of the holder's keys free.
async fn poll_latency(
    plan: &Plan,
    bin: &Path,
    state: &Path,
    pool: &[String],
) -> (Vec<Duration>, Vec<Duration>) {
    type Seen = Option<(Instant, Arc<HashMap<String, Liveness>>)>;
    let (tx, mut rx) = tokio::sync::watch::channel::<Seen>(None);
    let (snap_tx, mut snap_rx) = tokio::sync::mpsc::unbounded_channel();
    let poll_state = state.to_path_buf();
    let poller = AbortOnDrop(tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            let (took, batch) = snapshot(&poll_state, ProbeMode::Passive).await;
            let _ = snap_tx.send(took);
            let seen: HashMap<String, Liveness> = batch
                .into_iter()
                .filter(|(key, _)| key.kind() == KeyKind::Tag)
                .map(|(key, state)| (key.name().to_string(), state.liveness))
                .collect();
            if tx.send(Some((Instant::now(), Arc::new(seen)))).is_err() {
                return;
            }
        }
    }));
    let all_are = |seen: &Seen, names: &[String], want: fn(Liveness) -> bool| {
        seen.as_ref()
            .is_some_and(|(_, map)| names.iter().all(|n| map.get(n).copied().is_some_and(want)))
    };
    let mut latencies = Vec::new();
    // Keys not used by the engine runs (they start where those ended).
    let offset = plan.kills * plan.keys_per_kill;
    for k in 0..plan.poll_kills {
        let names = tag_names(pool, offset + k * plan.keys_per_kill, plan.keys_per_kill);
        let (mut holder, _) = spawn_holder_retrying(bin, state, &group_args(&names));
        // Seen live by a poll first.
        let _ = tokio::time::timeout(Duration::from_secs(5), async {
            loop {
                if all_are(&rx.borrow_and_update(), &names, Liveness::is_held) {
                    return;
                }
                if rx.changed().await.is_err() {
                    return;
                }
            }
        })
        .await;
        // Uniform phase against the 1 s tick.
        tokio::time::sleep(Duration::from_millis(fastrand::u64(0..1000))).await;
        let t0 = Instant::now();
        holder.process.sigkill();
        let detected = tokio::time::timeout(Duration::from_secs(5), async {
            loop {
                if rx.changed().await.is_err() {
                    return None;
                }
                let seen = rx.borrow_and_update().clone();
                if all_are(&seen, &names, |l| l == Liveness::Free) {
                    return seen.map(|(at, _)| at);
                }
            }
        })
        .await;
        holder.process.wait();
        if let Ok(Some(at)) = detected {
            latencies.push(at.saturating_duration_since(t0));
        }
    }
    drop(poller);
    let mut snaps = Vec::new();
    while let Ok(t) = snap_rx.try_recv() {
        snaps.push(t);
    }
    (latencies, snaps)
}

struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Where the kills' time went (the engine's trace of each kill's last
/// key), beside raw inotify's delivery of the same closes.
fn say_kill_paths(paths: &[KillPath]) {
    say("            where the time went (time since SIGKILL, last key of each kill):");
    for line in support::killpath::report(paths) {
        say(format!("              {line}"));
    }
}

/// How an in-process engine of the bench learns liveness.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Learning {
    /// The kernel's lock events (`--source kernel`).
    Kernel,
    /// Inference from filesystem events, each change probed in this mode.
    Inferred(ProbeMode),
}

/// The engine configurations of the kill rows, in the order printed.
const LEARNINGS: [Learning; 4] = [
    Learning::Kernel,
    Learning::Inferred(ProbeMode::LockFree),
    Learning::Inferred(ProbeMode::Acquire),
    Learning::Inferred(ProbeMode::Passive),
];

impl Learning {
    fn label(self) -> &'static str {
        match self {
            Learning::Kernel => "kernel",
            Learning::Inferred(mode) => mode.as_str(),
        }
    }

    /// The engine's config (default otherwise), or why the kernel's lock
    /// events cannot be read by this process. Under
    /// `LOCKTOP_REQUIRE_ALL=1` an unavailable kernel source panics.
    fn config(self, state: &Path) -> Result<EngineConfig, String> {
        match self {
            Learning::Inferred(probe) => Ok(EngineConfig {
                probe,
                ..EngineConfig::default()
            }),
            Learning::Kernel => {
                let args = SourceArgs {
                    source: SourceFlag::Kernel,
                    tracepoint_id: None,
                };
                match args.choose(state) {
                    Ok(choice) => Ok(EngineConfig {
                        source: choice.source,
                        ..EngineConfig::default()
                    }),
                    Err(why) => Err(skipped(format!(
                        "skipped: {why:#} (run the bench as root, or give it CAP_PERFMON, with tracefs mounted)"
                    ))),
                }
            }
        }
    }
}

async fn section_latency(
    plan: &Plan,
    bin: &Path,
    state: &Path,
    pool: &[String],
    targets: &mut Targets,
) {
    say(format!(
        "\n2. SIGKILL → Delta::Key{{Free}}  engine on the {}-key fixture (default config: sweep every {}), \
         {} kills per source; each victim is a fresh `locktop hold --group` child of {} keys, killed after \
         the engine showed it live with its PID + a random {}–{} ms dwell; p99 is nearest-rank \
         (= the maximum for n ≤ 100); latency = SIGKILL sent → Delta received. kernel = the kernel's \
         lock events (`--source kernel`); the others infer (`--source inference --probe MODE`)",
        thousands(plan.keys()),
        fmt_dur(EngineConfig::default().sweep_every),
        plan.kills,
        plan.keys_per_kill,
        plan.dwell_ms.start,
        plan.dwell_ms.end
    ));
    let mut acquire_p99 = None;
    let mut acquire_median = Duration::ZERO;
    let mut quiet_p99 = Vec::new();
    for learning in LEARNINGS {
        let config = match learning.config(state) {
            Ok(config) => config,
            Err(skipped) => {
                say(format!("   {:<8} {skipped}", learning.label()));
                continue;
            }
        };
        let run = kill_latency(plan, bin, state, pool, config).await;
        say(format!(
            "   {:<8} all keys free: median {:>8}  p99 {:>8}  max {:>8} │ first key: median {:>8}  p99 {:>8}",
            learning.label(),
            fmt_dur(median(&run.all)),
            fmt_dur(percentile(&run.all, 99.0)),
            fmt_dur(percentile(&run.all, 100.0)),
            fmt_dur(median(&run.first)),
            fmt_dur(percentile(&run.first, 99.0)),
        ));
        let sweeps = if run.during_sweep.is_empty() {
            "none".to_string()
        } else {
            run.during_sweep
                .iter()
                .map(|d| fmt_dur(*d))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let quiet: Vec<Duration> = run
            .all
            .iter()
            .filter(|d| !run.during_sweep.contains(d))
            .copied()
            .collect();
        say(format!(
            "            kills overlapping a periodic sweep (a Delta::Synced arrived by the last Free): {sweeps}; \
             without them: n={} median {} p99 {}",
            quiet.len(),
            fmt_dur(median(&quiet)),
            fmt_dur(percentile(&quiet, 99.0))
        ));
        if let Some((took, trace)) = &run.slowest {
            say(format!(
                "            slowest kill ({}): {}",
                fmt_dur(*took),
                trace.join(" · ")
            ));
        }
        say_kill_paths(&run.paths);
        say(format!(
            "            n={} (missed within 5 s: {}; not seen live with PID before the kill: {}; \
             holder respawns after a busy probe race: {}; sweeps during the run: {}; engine probes: {}; \
             /proc/locks reads during the run: {})",
            run.all.len(),
            run.missed,
            run.no_pids,
            run.respawns,
            run.sweeps,
            thousands(run.probes as usize),
            thousands(run.index_reads as usize)
        ));
        if learning == Learning::Kernel {
            kernel_targets(&run, "", targets);
        }
        if learning == Learning::Inferred(ProbeMode::Acquire) && !run.all.is_empty() {
            acquire_p99 = Some(percentile(&run.all, 99.0));
            acquire_median = median(&run.all);
        }
        if learning != Learning::Inferred(ProbeMode::Acquire) && !run.all.is_empty() {
            quiet_p99.push((learning, percentile(&run.all, 99.0)));
        }
    }
    // Under load: one spinning process per CPU beside the engine (a busy
    // agent host), same kills.
    let burners = cpu_hogs();
    let mut loaded_p99 = Vec::new();
    for learning in LEARNINGS {
        let Ok(config) = learning.config(state) else {
            continue;
        };
        let run = kill_latency(plan, bin, state, pool, config).await;
        say(format!(
            "   {:<8} UNDER LOAD ({} spinning processes, load {}): median {:>8}  p99 {:>8}  max {:>8}  (n={}, missed {}, /proc/locks reads {})",
            learning.label(),
            burners.len(),
            loadavg(),
            fmt_dur(median(&run.all)),
            fmt_dur(percentile(&run.all, 99.0)),
            fmt_dur(percentile(&run.all, 100.0)),
            run.all.len(),
            run.missed,
            thousands(run.index_reads as usize)
        ));
        if let Some((took, trace)) = &run.slowest {
            say(format!(
                "            slowest kill under load ({}): {}",
                fmt_dur(*took),
                trace.join(" · ")
            ));
        }
        say_kill_paths(&run.paths);
        if learning == Learning::Kernel {
            kernel_targets(&run, " under load", targets);
        }
        if !run.all.is_empty() {
            loaded_p99.push((learning, percentile(&run.all, 99.0)));
        }
    }
    drop(burners);
    for (learning, p99) in loaded_p99 {
        targets.add(format!(
            "(2b) kill → Delta p99 ≤ 20 ms under load ({}, all keys): {}  {}",
            learning.label(),
            fmt_dur(p99),
            verdict(p99 <= Duration::from_millis(20))
        ));
    }
    let (polled, snaps) = poll_latency(plan, bin, state, pool).await;
    let snap = median(&snaps);
    say(format!(
        "   baseline: a loop doing a full passive snapshot every 1 s — measured over {} kills at a uniform \
         random phase: median {}  max {}  (expected ≈ 0.5 s + one snapshot ({}) = {})",
        polled.len(),
        fmt_dur(median(&polled)),
        fmt_dur(percentile(&polled, 100.0)),
        fmt_dur(snap),
        fmt_dur(Duration::from_millis(500) + snap)
    ));
    if let Some(p99) = acquire_p99 {
        say(format!(
            "   engine (acquire) vs 1 s polling: median {} faster",
            ratio(median(&polled), acquire_median)
        ));
        targets.add(format!(
            "(2) kill → Delta p99 ≤ 20 ms (acquire, all keys): {}  {}",
            fmt_dur(p99),
            verdict(p99 <= Duration::from_millis(20))
        ));
    } else {
        targets.add("(2) kill → Delta p99 ≤ 20 ms: no sample  MISS".into());
    }
    for (learning, p99) in quiet_p99 {
        targets.add(format!(
            "(2) kill → Delta p99 ≤ 20 ms ({}, all keys): {}  {}",
            learning.label(),
            fmt_dur(p99),
            verdict(p99 <= Duration::from_millis(20))
        ));
    }
}

/// The kernel source's own targets: its p99 within 1 ms of raw
/// inotify's delivery of the same kills' closes, and no `/proc/locks`
/// read after the first view.
fn kernel_targets(run: &KillRun, load: &str, targets: &mut Targets) {
    let raw: Vec<Duration> = run.paths.iter().filter_map(|p| p.raw_all_closed).collect();
    if run.all.is_empty() || raw.is_empty() {
        targets.add(format!(
            "(2k) kill → Delta p99 ≤ raw inotify's + 1 ms (kernel{load}): no sample  MISS"
        ));
    } else {
        let (p99, raw_p99) = (percentile(&run.all, 99.0), percentile(&raw, 99.0));
        targets.add(format!(
            "(2k) kill → Delta p99 ≤ raw inotify's + 1 ms (kernel{load}): {} vs raw inotify {}  {}",
            fmt_dur(p99),
            fmt_dur(raw_p99),
            verdict(p99 <= raw_p99 + Duration::from_millis(1))
        ));
    }
    targets.add(format!(
        "(2k) /proc/locks reads in steady state (kernel{load}, {} kills): {}  {}",
        run.all.len() + run.missed,
        run.index_reads,
        verdict(run.index_reads == 0)
    ));
}

// ===========================================================================
// 3. Idle

async fn section_idle(plan: &Plan, state: &Path, targets: &mut Targets) {
    let idle = plan.idle;
    say(format!(
        "\n3. IDLE  {} with nothing changing on the {}-key fixture ({} held); engine in acquire mode \
         with sweep_every = 3600 s (no periodic sweep in the window); CPU = getrusage(RUSAGE_SELF) user+sys",
        fmt_dur(idle),
        thousands(plan.keys()),
        thousands(plan.held())
    ));
    // Baseline: this process, idle, no engine.
    let cpu0 = cpu_self();
    tokio::time::sleep(idle).await;
    let base_cpu = cpu_self() - cpu0;

    let config = EngineConfig {
        probe: ProbeMode::Acquire,
        sweep_every: Duration::from_secs(3600),
        ..EngineConfig::default()
    };
    let cpu_start = cpu_self();
    let (mut handle, synced) = start_engine(state, config, plan.idle_settle).await;
    let startup_cpu = cpu_self() - cpu_start;
    let stats = handle.stats.clone();
    let read = || {
        (
            stats.probes.load(Ordering::Relaxed),
            stats.events.load(Ordering::Relaxed),
            stats.index_reads.load(Ordering::Relaxed),
            stats.sweeps.load(Ordering::Relaxed),
        )
    };
    let before = read();
    let cpu0 = cpu_self();
    tokio::time::sleep(idle).await;
    let engine_cpu = cpu_self() - cpu0;
    let after = read();
    let mut deltas = 0;
    while handle.deltas.try_recv().is_ok() {
        deltas += 1;
    }
    drop(handle);
    say(format!(
        "   start: first Synced after {} ({} CPU), initial sweep = {} passive probes, {} sweep(s), {} index read(s)",
        fmt_dur(synced),
        fmt_dur(startup_cpu),
        thousands(before.0 as usize),
        before.3,
        before.2
    ));
    say(format!(
        "   in the idle window: probes +{}  events +{}  /proc/locks reads +{}  sweeps +{}  deltas {}",
        after.0 - before.0,
        after.1 - before.1,
        after.2 - before.2,
        after.3 - before.3,
        deltas
    ));
    say(format!(
        "   CPU over {}: engine running {} vs idle baseline (same process, no engine) {} → +{} ({:.3}% of one core)",
        fmt_dur(idle),
        fmt_dur(engine_cpu),
        fmt_dur(base_cpu),
        fmt_dur(engine_cpu.saturating_sub(base_cpu)),
        engine_cpu.saturating_sub(base_cpu).as_secs_f64() * 100.0 / idle.as_secs_f64()
    ));
    let extra = after.0 - before.0;
    targets.add(format!(
        "(3) zero probes beyond the sweep while idle: {} probes in {} (initial sweep {} excluded)  {}",
        extra,
        fmt_dur(idle),
        thousands(before.0 as usize),
        verdict(extra == 0)
    ));
}

// ===========================================================================
// 4. 100,000 keys

async fn section_big(plan: &Plan, bin: &Path, tmp: &Path, targets: &mut Targets) {
    let keys = plan.big_tags + plan.big_instances;
    let state = tmp.join("state-big");
    let tags: Vec<String> = (0..plan.big_tags).map(tag_name).collect();
    let aihs = instance_names(plan.big_instances, plan.big_parents);
    let created = create_free_keys_touch(&state, &tags, &aihs);
    say(format!(
        "\n4. {} KEYS  all free: {} tags + {} instance AIHs under {} parents; created by writing each \
         `<escape(key)>.lock` (empty) and `.live.lock` (`1`) directly with locktop::locks::escape \
         (SDK-identical names; nothing holds them; 4 threads) in {}; median of {} runs after 1 warm-up",
        thousands(keys),
        thousands(plan.big_tags),
        thousands(plan.big_instances),
        plan.big_parents,
        fmt_dur(created),
        plan.big_runs
    ));
    let report = scan_root(&state).await.expect("scan");
    assert_eq!(report.keys.len(), keys, "every big key scanned");
    let gates = c_paths(report.keys.iter().map(LockKey::gate_path));
    drop(report);
    let mut floor = Vec::new();
    let mut snaps = Vec::new();
    for i in 0..=plan.big_runs {
        let (t, _) = floor_loop(&gates);
        let (s, batch) = snapshot(&state, ProbeMode::Passive).await;
        assert_eq!(batch.len(), keys);
        if i > 0 {
            floor.push(t);
            snaps.push(s);
        }
    }
    drop(gates);
    let floor = median(&floor);
    let snap = median(&snaps);
    let row = |what: &str, t: Duration, extra: String| {
        say(format!(
            "   {:<62} {:>9}  {:>8}{extra}",
            what,
            fmt_dur(t),
            ratio(t, floor)
        ));
    };
    say(format!("   {:<62} {:>9}  {:>8}", "", "median", "vs floor"));
    row(
        "floor: open+flock(SH|NB)+close per gate (libc, 1 thread)",
        floor,
        String::new(),
    );
    row(
        "locktop passive snapshot in-process (scan, probes, PIDs)",
        snap,
        String::new(),
    );
    let mut peaks = Vec::new();
    for json in [true, false] {
        let mut walls = Vec::new();
        let mut rss = 0;
        for _ in 0..plan.big_runs {
            let run = run_cli_snapshot(bin, &state, "passive", json);
            assert_eq!(run.status, 0, "locktop snapshot exit status");
            walls.push(run.wall);
            rss = rss.max(run.maxrss_kib);
        }
        let what = if json {
            "`locktop snapshot --all --json --probe passive > /dev/null`"
        } else {
            "`locktop snapshot --all --probe passive > /dev/null` (table)"
        };
        row(
            what,
            median(&walls),
            format!(
                "   peak RSS {:.1} MB (ru_maxrss, max of {})",
                rss as f64 / 1024.0,
                plan.big_runs
            ),
        );
        peaks.push(rss as f64 / 1024.0);
    }
    let watch = watch_memory(bin, &state, plan.watch_settle);
    match &watch {
        Some(w) => row(
            "`locktop watch --sweep 3600` (the engine) until `synced:`",
            w.synced,
            format!(
                "   peak RSS {:.1} MB (VmHWM, {} after sync), {:.1} MB resident then",
                w.hwm_kib as f64 / 1024.0,
                fmt_dur(plan.watch_settle),
                w.rss_kib as f64 / 1024.0
            ),
        ),
        None => say("   `locktop watch`: did not report `synced:` within 120 s"),
    }
    say(
        "   (peak RSS of `snapshot` is measured through a small intermediary process so that this \
         bench's own RSS is not inherited at exec; `watch` by its own /proc/PID/status VmHWM)",
    );
    let watch_mb = watch.as_ref().map(|w| w.hwm_kib as f64 / 1024.0);
    let mb = |v: Option<f64>| v.map_or_else(|| "n/a".into(), |mb| format!("{mb:.1} MB"));
    targets.add(format!(
        "(4) peak RSS at {} keys < 100 MB: watch (engine) {} {} · snapshot --json {:.1} MB {} · snapshot table {:.1} MB {}",
        thousands(keys),
        mb(watch_mb),
        verdict(watch_mb.is_some_and(|mb| mb < 100.0)),
        peaks[0],
        verdict(peaks[0] < 100.0),
        peaks[1],
        verdict(peaks[1] < 100.0),
    ));
}

struct WatchRun {
    synced: Duration,
    hwm_kib: u64,
    rss_kib: u64,
}

/// Runs `locktop --state-dir D watch --sweep 3600` until it prints
/// `synced:`, lets it settle, reads its VmHWM / VmRSS, then SIGTERMs it.
fn watch_memory(bin: &Path, state: &Path, settle: Duration) -> Option<WatchRun> {
    let start = Instant::now();
    let mut child = Command::new(bin)
        .arg("--state-dir")
        .arg(state)
        .args(["watch", "--sweep", "3600"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn locktop watch");
    let stdout = child.stdout.take().expect("piped");
    let mut child = Guarded::new(child);
    let (tx, rx) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if line.contains("synced:") {
                let _ = tx.send(());
            }
        }
    });
    let synced = rx
        .recv_timeout(Duration::from_secs(120))
        .ok()
        .map(|()| start.elapsed());
    std::thread::sleep(settle);
    let hwm = vm_status_kib(child.pid(), "VmHWM:").unwrap_or(0);
    let rss = vm_status_kib(child.pid(), "VmRSS:").unwrap_or(0);
    child.signal(libc::SIGTERM);
    child.wait();
    let _ = reader.join();
    synced.map(|synced| WatchRun {
        synced,
        hwm_kib: hwm,
        rss_kib: rss,
    })
}

// ===========================================================================
// 5. Interference

/// Section 5: how often a monitor makes an agent's `try_acquire` fail
/// (every refusal counted should have succeeded: nobody else holds the
/// tags). First an in-process engine (and back-to-back snapshots) against
/// a spawner child on the main fixture; then real `locktop watch`
/// monitors (none, inotifywait, then 1 and 3 of each kind) against an agent's tight loop and
/// a relocation, and what they cost an unrelated process's flock calls
/// ([`interference::section`]).
async fn section_interference(
    plan: &Plan,
    bin: &Path,
    state: &Path,
    tags: &[String],
    targets: &mut Targets,
) {
    let d = plan.interference;
    say(format!(
        "\n5. INTERFERENCE  how often monitors make an agent's objectiveai_sdk::lockfile::try_acquire fail \
         (nobody else holds the tags: every refusal counted should have succeeded). First a spawner child loops \
         try_acquire + release over {} free tags (a uniform 0–{} pause between attempts) for {} per row, while an \
         in-process engine (or back-to-back snapshots) runs; then real `locktop watch` monitors (none, {} × \
         {}) against (a) an agent's tight loop on one tag, (b) a relocation (wait_released, then one try), \
         refused/tries, and (c) the flock latency of an unrelated process (p50/p99/p99.9/max, ratio to no monitor)",
        tags.len(),
        fmt_dur(Duration::from_micros(SPAWNER_PAUSE_MAX_US)),
        fmt_dur(d),
        plan.monitor_counts
            .iter()
            .map(usize::to_string)
            .collect::<Vec<_>>()
            .join(", "),
        interference::KINDS
            .iter()
            .map(|kind| kind.label)
            .collect::<Vec<_>>()
            .join("/"),
    ));
    let row = |what: &str, attempts: u64, failures: u64, extra: String| {
        say(format!(
            "   {:<52} attempts {:>7}  failed {:>5}  ({:.3}%){extra}",
            what,
            thousands(attempts as usize),
            thousands(failures as usize),
            failures as f64 * 100.0 / attempts.max(1) as f64
        ));
    };
    // Baseline: nothing else probing.
    let (attempts, failures) = finish_spawner(start_spawner(state, d, Duration::ZERO, tags));
    row("baseline: no monitor", attempts, failures, String::new());

    for mode in [ProbeMode::Acquire, ProbeMode::Passive] {
        let config = EngineConfig {
            probe: mode,
            ..EngineConfig::default()
        };
        let (mut handle, _) = start_engine(state, config, Duration::from_millis(300)).await;
        let probes0 = handle.stats.probes.load(Ordering::Relaxed);
        let spawner = start_spawner(state, d, Duration::ZERO, tags);
        // Block this (non-worker) thread; the engine runs on the workers.
        let (attempts, failures) = finish_spawner(spawner);
        let probes = handle.stats.probes.load(Ordering::Relaxed) - probes0;
        while handle.deltas.try_recv().is_ok() {}
        drop(handle);
        row(
            &format!("engine, {} probe (event-driven)", mode.as_str()),
            attempts,
            failures,
            format!(
                "  — engine probes in the window: {}",
                thousands(probes as usize)
            ),
        );
    }
    // 1 ms pacing: each acquired tag is held 1 ms, then released, then a
    // 0–1 ms pause — an agent churn the event-driven probe keeps up with,
    // so its probes land while the spawner holds or is about to acquire.
    let hold = Duration::from_millis(1);
    let (attempts, failures) = finish_spawner(start_spawner(state, d, hold, tags));
    row(
        "1 ms holds, baseline: no monitor",
        attempts,
        failures,
        String::new(),
    );
    for mode in [ProbeMode::Acquire, ProbeMode::Passive] {
        let config = EngineConfig {
            probe: mode,
            ..EngineConfig::default()
        };
        let (mut handle, _) = start_engine(state, config, Duration::from_millis(300)).await;
        let (attempts, failures) = finish_spawner(start_spawner(state, d, hold, tags));
        while handle.deltas.try_recv().is_ok() {}
        drop(handle);
        row(
            &format!("1 ms holds, engine, {} probe", mode.as_str()),
            attempts,
            failures,
            String::new(),
        );
    }
    for mode in [ProbeMode::Passive, ProbeMode::Acquire] {
        let mut spawner = start_spawner(state, d, Duration::ZERO, tags);
        let mut snapshots = 0;
        while spawner.process.try_wait().is_none() {
            let _ = snapshot(state, mode).await;
            snapshots += 1;
        }
        // Already reaped by try_wait: read its output.
        let mut text = String::new();
        spawner
            .stdout
            .read_to_string(&mut text)
            .expect("spawner output");
        let doc: serde_json::Value = serde_json::from_str(text.trim()).expect("spawner JSON");
        row(
            &format!("back-to-back full snapshots, {} probe", mode.as_str()),
            doc["attempts"].as_u64().unwrap_or(0),
            doc["failures"].as_u64().unwrap_or(0),
            format!(
                "  — {snapshots} snapshots of {} keys",
                thousands(plan.keys())
            ),
        );
    }
    let scratch = state
        .parent()
        .expect("the state dir is in the bench's tempdir");
    let sizes = interference::Sizes {
        tight_tries: plan.tight_tries,
        relocation_tries: plan.relocation_tries,
        latency_window: plan.latency_window,
        settle: plan.monitor_settle,
        monitor_counts: plan.monitor_counts,
    };
    interference::section(bin, scratch, &sizes, targets).await;
}
