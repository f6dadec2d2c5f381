//! The scale benchmark: locktop at a million keys, measured from the
//! outside. Only the release `locktop` binary is used, as child processes
//! (plus the fixture helpers of `benches/support/`): nothing here reaches
//! into the library, so the figures are what a user of the CLI gets.
//!
//! Section 1, MEMORY AND FIRST VIEW. Two fixtures, each made once per run
//! in a tempdir by writing every key's `<escape(key)>.lock` (empty) and
//! `.live.lock` (`1`) directly with SDK-identical names
//! ([`support::create_free_keys_touch`]): 1,000,000 keys (800,000 tags +
//! 200,000 instance AIHs under 2,000 parents) and 100,000 keys (80,000 +
//! 20,000 under 200), each with 1,000 keys held by 20 real `locktop hold
//! --aih A --tag …` processes × 50 keys (the same 1,000 at both sizes, so
//! that the difference between them is 900,000 free keys alone). For each
//! of the four front ends, 3 runs at each size (rounds interleaved, one
//! process at a time, default flags):
//!
//! - `snapshot --all --json > /dev/null`: wall time to exit and peak RSS
//!   (`ru_maxrss` from wait4, through a small intermediary — this binary
//!   re-executed with `--measure-child` — so that this bench's own RSS is
//!   not inherited at exec, as in `benches/engine.rs`);
//! - `watch`: time until it prints its `synced: N keys on disk` line;
//!   `watch --json --initial`, separately: time until every held key has
//!   been reported `live` with exactly the PID of the holder process that
//!   holds it (and not reported otherwise since);
//! - `serve --listen 127.0.0.1:0`: time until `/healthz` answers 200 (it
//!   answers 503 until the first full scan is done; polled every 20 ms),
//!   then the time to download `/snapshot.json?all=true` and parse it as
//!   it streams in (it must list every key, and every held key live with
//!   its holder's PID);
//! - the TUI (`locktop` on a 200×50 pseudo-terminal, read with vt100):
//!   time until its header says `watching` (no longer `first scan: N
//!   keys so far`) and counts every key — `1000 ● live` and `999000 ○
//!   free` — and a holder's PID shows in the list.
//!
//! Peak RSS of the long-running ones is their VmHWM (`/proc/PID/status`),
//! read after the first complete view and a 1 s settle, just before they
//! are stopped; serve's is read twice, before the download (its view
//! alone) and after it. Bytes per free key = (VmHWM at 1M − VmHWM at
//! 100k) / 900,000, from the medians.
//!
//! Section 2, STEADY CHURN CPU. A state dir with 2,000 agents on disk
//! (free instance keys under 100 parents); a driver keeps about 6 `locktop
//! hold` processes alive, spawning one and ending the oldest about 24
//! times a second (each holds one instance key — half of them existing,
//! half fresh AIHs, some in new directories — and every third also a tag;
//! ended by SIGKILL and by closing its stdin, in turns), for 20 s. Side by
//! side meanwhile: `inotifywait -m -r <state>/locks` (stdout drained; run
//! without `-q` only to read its "Watches established." line), `locktop
//! watch` (stdout drained) and `locktop serve`. CPU = utime + stime from
//! `/proc/PID/stat` (clock ticks), the delta over the window, once all
//! three are synced and settled; each locktop's as a ratio to
//! inotifywait's. Without `inotifywait` the section prints `skipped:` (and
//! panics when `LOCKTOP_REQUIRE_ALL=1`).
//!
//! Section 3, IDLE STEADY STATE. The big fixture again (1,000,000 keys,
//! 1,000 held, nothing changing), and for each liveness source — the
//! kernel's lock events (`--source kernel`) and the inference
//! (`--source inference`) — `watch`, `serve` and the TUI side by side:
//! once each shows its first complete view (as in section 1) and a settle,
//! CPU (utime + stime) over an idle window of two minutes, and each one's
//! RSS at its end and VmHWM. Without the kernel's events (not root, no
//! CAP_PERFMON) its rows print `skipped:` (and panic when
//! `LOCKTOP_REQUIRE_ALL=1`).
//!
//! Plans: `cargo bench --bench scale` (argv contains `--bench`) is the full
//! run. Without `--bench` (what `cargo test --all-targets` runs) or with
//! `--smoke`: the same code paths at tiny sizes (20,000 and 2,000 keys, 20
//! held, 1 run, churn 1 s, idle 2 s). `-- --only-memory` / `-- --only-churn`
//! / `-- --only-idle` run one section. Targets are printed as PASS/MISS at the end; they never fail
//! the run. Every child process is SIGKILLed on exit, panic included
//! ([`support::Guarded`], [`PtyTui`]); holders also release and exit on
//! their own when this process dies (their stdin closes).

// engine.rs uses all of `support` but `outside`; this bench only its
// fixtures, holders, resource and formatting helpers, and `outside`.
#[allow(dead_code)]
mod support;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::channel;
use std::time::{Duration, Instant, SystemTime};

use support::outside::*;
use support::*;

/// Peak RSS target at 1,000,000 keys (MB).
const BIG_MB: f64 = 250.0;
/// Peak RSS target at 100,000 keys (MB).
const SMALL_MB: f64 = 60.0;
/// `snapshot --all --json` wall time target at 1,000,000 keys.
const SNAPSHOT_TARGET: Duration = Duration::from_secs(5);
/// Every held key correct within this long of `watch`'s start.
const HELD_TARGET: Duration = Duration::from_secs(10);
/// serve's and watch's churn CPU, at most this many times inotifywait's.
const CHURN_RATIO: f64 = 2.0;
/// The TUI's terminal.
const TUI_COLS: u16 = 200;
const TUI_ROWS: u16 = 50;

/// Everything that differs between the full run and the smoke run.
struct Plan {
    name: &'static str,
    big: Size,
    small: Size,
    holders: usize,
    keys_per_holder: usize,
    runs: usize,
    /// After the first complete view, before VmHWM is read.
    settle: Duration,
    /// How long a first complete view may take before the run is given up
    /// (the remaining runs of that front end at that size are skipped).
    view_timeout: Duration,
    churn: Churn,
    /// Section 3's idle window.
    idle: Duration,
}

impl Plan {
    fn full() -> Self {
        Self {
            name: "FULL",
            big: Size {
                tags: 800_000,
                instances: 200_000,
                parents: 2_000,
            },
            small: Size {
                tags: 80_000,
                instances: 20_000,
                parents: 200,
            },
            holders: 20,
            keys_per_holder: 50,
            runs: 3,
            settle: Duration::from_secs(1),
            view_timeout: Duration::from_secs(300),
            churn: Churn::STEADY,
            idle: Duration::from_secs(120),
        }
    }

    fn smoke() -> Self {
        Self {
            name: "SMOKE",
            big: Size {
                tags: 16_000,
                instances: 4_000,
                parents: 40,
            },
            small: Size {
                tags: 1_600,
                instances: 400,
                parents: 4,
            },
            holders: 2,
            keys_per_holder: 10,
            runs: 1,
            settle: Duration::from_millis(200),
            view_timeout: Duration::from_secs(60),
            churn: Churn::SMOKE,
            idle: Duration::from_secs(2),
        }
    }

    fn held(&self) -> usize {
        self.holders * self.keys_per_holder
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some(MEASURE_CHILD) {
        return measure_child(&args[2..]);
    }
    let has = |flag: &str| args.iter().any(|a| a == flag);
    let full = has("--bench") && !has("--smoke");
    let plan = if full { Plan::full() } else { Plan::smoke() };
    let started = Instant::now();
    let bin = locktop_bin();
    let binary_at_start = modified(&bin);
    let tmp = tempfile::Builder::new()
        .prefix("locktop-scale-")
        .tempdir()
        .expect("tempdir");
    header(&plan, &args, &bin, tmp.path());
    let mut targets = Targets::default();
    let only = ["--only-memory", "--only-churn", "--only-idle"]
        .into_iter()
        .find(|flag| has(flag));
    let runs = |flag: &str| only.is_none_or(|only| only == flag);
    if runs("--only-memory") {
        let t = Instant::now();
        section_memory(&plan, &bin, tmp.path(), &mut targets);
        took(t);
    }
    if runs("--only-churn") {
        let t = Instant::now();
        section_churn(&plan, &bin, tmp.path(), &mut targets);
        took(t);
    }
    if runs("--only-idle") {
        let t = Instant::now();
        section_idle(&plan, &bin, tmp.path(), &mut targets);
        took(t);
    }
    targets.say(plan.name == "SMOKE", "scale");
    if modified(&bin) != binary_at_start {
        say(format!(
            "\nWARNING: {} changed while this bench ran (a build in the same target dir): \
             some figures may be of another binary",
            bin.display()
        ));
    }
    let t = Instant::now();
    remove_files(tmp.path());
    drop(tmp);
    say(format!(
        "\n{} run finished in {} (fixtures removed in {}; all children killed and reaped); load at end: {}",
        plan.name,
        fmt_dur(started.elapsed()),
        fmt_dur(t.elapsed()),
        loadavg()
    ));
}

/// Unlinks every file below `root`, directory by directory, each one's
/// files on 4 threads (the directories are left for the tempdir's own
/// removal). On this ext4 (mounted with `discard`) a single thread took 18
/// to 130 s for 100,000 files, 4 threads 3 to 6 s: an unlink mostly waits.
fn remove_files(root: &Path) {
    let mut dirs = vec![root.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        let mut files = Vec::new();
        for entry in entries.flatten() {
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                dirs.push(entry.path());
            } else {
                files.push(entry.file_name());
            }
        }
        let chunk = files.len().div_ceil(4).max(1);
        std::thread::scope(|scope| {
            for part in files.chunks(chunk) {
                let dir = &dir;
                scope.spawn(move || {
                    for name in part {
                        let _ = std::fs::remove_file(dir.join(name));
                    }
                });
            }
        });
    }
}

fn modified(path: &Path) -> Option<SystemTime> {
    std::fs::metadata(path).and_then(|m| m.modified()).ok()
}

/// `(section: 12.3 s)` — where the bench's own time goes.
fn took(start: Instant) {
    say(format!("   (section: {})", fmt_dur(start.elapsed())));
}

fn header(plan: &Plan, args: &[String], bin: &Path, tmp: &Path) {
    say(format!("locktop scale benchmark — {} run", plan.name));
    say(format!(
        "command:  {}   [argv; `cargo bench --bench scale` passes --bench → full run, \
         without it (cargo test --all-targets) or with --smoke → smoke run; \
         --only-memory / --only-churn / --only-idle: one section]",
        args.join(" ")
    ));
    say_where(bin, tmp);
}

// ===========================================================================
// 1. Memory and first view

/// Every figure of one fixture, one entry per run (a first view that never
/// came is `None`).
#[derive(Default)]
struct SizeRuns {
    snapshot_wall: Vec<Option<Duration>>,
    snapshot_kib: Vec<u64>,
    watch_synced: Vec<Option<Duration>>,
    watch_kib: Vec<u64>,
    held_correct: Vec<Option<Duration>>,
    held_kib: Vec<u64>,
    serve_healthy: Vec<Option<Duration>>,
    serve_view_kib: Vec<u64>,
    serve_download: Vec<Option<Duration>>,
    serve_kib: Vec<u64>,
    tui_view: Vec<Option<Duration>>,
    tui_kib: Vec<u64>,
}

fn section_memory(plan: &Plan, bin: &Path, tmp: &Path, targets: &mut Targets) {
    say(format!(
        "\n1. MEMORY AND FIRST VIEW  {} then {} keys, {} held; per front end {} run(s) per size, \
         one process at a time, default flags; peak RSS = VmHWM read {} after the first complete \
         view (snapshot: ru_maxrss through an intermediary); a first view is given up after {}",
        thousands(plan.small.keys()),
        thousands(plan.big.keys()),
        thousands(plan.held()),
        plan.runs,
        fmt_dur(plan.settle),
        fmt_dur(plan.view_timeout),
    ));
    let mut results = Vec::new();
    for size in [plan.small, plan.big] {
        say(format!("\n {} KEYS", thousands(size.keys())));
        let fixture = make_fixture(
            bin,
            &tmp.join(format!("state-{}", size.keys())),
            size,
            plan.holders,
            plan.keys_per_holder,
        );
        let runs = measure_fixture(plan, bin, &fixture);
        report_fixture(plan, &fixture, &runs);
        results.push((size, runs));
        // The fixture's holders end here; its files stay until the end.
    }
    let (small, big) = (&results[0], &results[1]);
    per_free_key(big, small);
    memory_targets(plan, big, small, targets);
}

/// `plan.runs` interleaved rounds of every front end on `fixture`.
fn measure_fixture(plan: &Plan, bin: &Path, fixture: &Fixture) -> SizeRuns {
    let mut runs = SizeRuns::default();
    // A front end whose first view timed out is not run again.
    let mut gave_up = [false; 3];
    let timed_out = |v: &[Option<Duration>]| v.last().is_some_and(Option::is_none);
    for round in 1..=plan.runs {
        let mut line = Vec::new();
        let snap = run_cli_snapshot(bin, &fixture.state);
        if snap.status != 0 {
            say(format!("   snapshot exited with status {}", snap.status));
        }
        runs.snapshot_wall
            .push((snap.status == 0).then_some(snap.wall));
        runs.snapshot_kib.push(snap.maxrss_kib);
        line.push(format!(
            "snapshot {} {:.1} MB",
            fmt_dur(snap.wall),
            mb(snap.maxrss_kib)
        ));

        if !gave_up[0] {
            let (synced, kib) = run_watch(bin, &fixture.state, plan.settle, plan.view_timeout);
            runs.watch_synced.push(synced);
            runs.watch_kib.push(kib);
            gave_up[0] = timed_out(&runs.watch_synced);
            line.push(format!("watch {} {:.1} MB", fmt_opt(synced), mb(kib)));
            let (correct, kib) = run_watch_held(plan, bin, fixture);
            runs.held_correct.push(correct);
            runs.held_kib.push(kib);
            line.push(format!("held keys right {}", fmt_opt(correct)));
        }
        if !gave_up[1] {
            let serve = run_serve(plan, bin, fixture);
            runs.serve_healthy.push(serve.healthy);
            runs.serve_view_kib.push(serve.view_kib);
            runs.serve_download.push(serve.download);
            runs.serve_kib.push(serve.kib);
            gave_up[1] = timed_out(&runs.serve_healthy);
            line.push(format!(
                "serve healthy {} {:.1} MB, download {} {:.1} MB",
                fmt_opt(serve.healthy),
                mb(serve.view_kib),
                fmt_opt(serve.download),
                mb(serve.kib)
            ));
        }
        if !gave_up[2] {
            let (view, kib) = run_tui(plan, bin, fixture);
            runs.tui_view.push(view);
            runs.tui_kib.push(kib);
            gave_up[2] = timed_out(&runs.tui_view);
            line.push(format!("TUI {} {:.1} MB", fmt_opt(view), mb(kib)));
        }
        say(format!(
            "   run {round}/{}: {}",
            plan.runs,
            line.join(" · ")
        ));
    }
    runs
}

fn report_fixture(plan: &Plan, fixture: &Fixture, runs: &SizeRuns) {
    let keys = fixture.size.keys();
    let held = fixture.held.len();
    say(format!(
        "   {:<66} {:>10} {:>10} {:>10}",
        format!("{} keys, {} held", thousands(keys), thousands(held)),
        "min",
        "median",
        "max"
    ));
    let time_row = |what: &str, v: &[Option<Duration>]| {
        let [lo, mid, hi] = spread_dur(v, plan.view_timeout);
        say(format!("   {what:<66} {lo:>10} {mid:>10} {hi:>10}"));
    };
    let mb_row = |what: &str, v: &[u64]| {
        let [lo, mid, hi] = spread_mb(v);
        say(format!("   {what:<66} {lo:>10} {mid:>10} {hi:>10}"));
    };
    time_row(
        "`snapshot --all --json > /dev/null`: wall time",
        &runs.snapshot_wall,
    );
    mb_row("   peak RSS (ru_maxrss)", &runs.snapshot_kib);
    time_row("`watch`: start → `synced:` line", &runs.watch_synced);
    mb_row("   peak RSS (VmHWM)", &runs.watch_kib);
    time_row(
        &format!("`watch --json --initial`: start → all {held} held keys right"),
        &runs.held_correct,
    );
    mb_row(
        "   peak RSS then (VmHWM; it prints every key)",
        &runs.held_kib,
    );
    time_row("`serve`: start → /healthz 200", &runs.serve_healthy);
    mb_row(
        "   peak RSS then (VmHWM: the view alone)",
        &runs.serve_view_kib,
    );
    time_row(
        "   GET /snapshot.json?all=true, read and parsed",
        &runs.serve_download,
    );
    mb_row("   peak RSS after it (VmHWM)", &runs.serve_kib);
    time_row(
        "TUI: start → header `watching`, every key counted",
        &runs.tui_view,
    );
    mb_row("   peak RSS (VmHWM)", &runs.tui_kib);
}

/// Bytes per free key of each long-running front end, from the medians.
fn per_free_key(big: &(Size, SizeRuns), small: &(Size, SizeRuns)) {
    let extra = big.0.keys() as f64 - small.0.keys() as f64;
    say(format!(
        "\n bytes per free key = (median VmHWM at {} − at {}) / {}",
        thousands(big.0.keys()),
        thousands(small.0.keys()),
        thousands(extra as usize)
    ));
    let row = |what: &str, b: &[u64], s: &[u64]| {
        if b.is_empty() || s.is_empty() {
            say(format!("   {what:<44} n/a"));
            return;
        }
        let per = (median_u64(b) as f64 - median_u64(s) as f64) * 1024.0 / extra;
        say(format!("   {what:<44} {per:>8.0} B"));
    };
    row("watch", &big.1.watch_kib, &small.1.watch_kib);
    row(
        "serve, its view alone",
        &big.1.serve_view_kib,
        &small.1.serve_view_kib,
    );
    row(
        "serve, after /snapshot.json?all=true",
        &big.1.serve_kib,
        &small.1.serve_kib,
    );
    row("TUI", &big.1.tui_kib, &small.1.tui_kib);
    row(
        "snapshot --all --json",
        &big.1.snapshot_kib,
        &small.1.snapshot_kib,
    );
}

fn memory_targets(
    plan: &Plan,
    big: &(Size, SizeRuns),
    small: &(Size, SizeRuns),
    targets: &mut Targets,
) {
    let (size, runs) = big;
    let keys = thousands(size.keys());
    let peak = |what: &str, v: &[u64], limit: f64, keys: &str| {
        let worst = v.iter().copied().max();
        format!(
            "peak RSS at {keys} keys ≤ {limit:.0} MB, {what}: {} (max of {})  {}",
            worst.map_or_else(|| "n/a".into(), |kib| format!("{:.1} MB", mb(kib))),
            v.len(),
            verdict(worst.is_some_and(|kib| mb(kib) <= limit))
        )
    };
    // A view that never came is a miss, whatever its memory.
    let complete = |v: &[Option<Duration>]| !v.is_empty() && v.iter().all(Option::is_some);
    targets.add(peak("watch", &runs.watch_kib, BIG_MB, &keys));
    let mut serve = peak(
        "serve with the full /snapshot.json?all=true served",
        &runs.serve_kib,
        BIG_MB,
        &keys,
    );
    if !complete(&runs.serve_download) {
        serve = format!("{serve} (a download failed: MISS)");
    }
    targets.add(serve);
    let mut tui = peak("TUI", &runs.tui_kib, BIG_MB, &keys);
    if !complete(&runs.tui_view) {
        tui = format!("{tui} (the view never completed: MISS)");
    }
    targets.add(tui);
    let snap = median_opt(&runs.snapshot_wall);
    targets.add(format!(
        "`snapshot --all --json` at {keys} keys ≤ {}: {} (median of {})  {}",
        fmt_dur(SNAPSHOT_TARGET),
        snap.map_or_else(|| "failed".into(), fmt_dur),
        runs.snapshot_wall.len(),
        verdict(snap.is_some_and(|t| t <= SNAPSHOT_TARGET))
    ));
    targets.add(peak(
        "snapshot --all --json",
        &runs.snapshot_kib,
        BIG_MB,
        &keys,
    ));
    let worst = worst_opt(&runs.held_correct);
    targets.add(format!(
        "every held key correct (live, its holder's PID) within {} of `watch --json --initial`'s start at {keys} keys: {} (worst of {})  {}",
        fmt_dur(HELD_TARGET),
        worst.map_or_else(
            || format!("never within {}", fmt_dur(plan.view_timeout)),
            fmt_dur
        ),
        runs.held_correct.len(),
        verdict(worst.is_some_and(|t| t <= HELD_TARGET))
    ));
    let (size, runs) = small;
    let keys = thousands(size.keys());
    for (what, v) in [
        ("watch", &runs.watch_kib),
        ("serve with /snapshot.json?all=true served", &runs.serve_kib),
        ("TUI", &runs.tui_kib),
        ("snapshot --all --json", &runs.snapshot_kib),
    ] {
        targets.add(peak(what, v, SMALL_MB, &keys));
    }
}

// ---------------------------------------------------------------------------
// snapshot

/// What one run of `locktop snapshot` cost.
/// Runs `locktop --state-dir D snapshot --all --json > /dev/null` through
/// a small intermediary (this binary, re-executed with `--measure-child`),
/// which reaps it with wait4 and reports its wall time and `ru_maxrss`.
/// Why the intermediary: a child spawned straight from this (large)
/// process inherits our RSS high-water mark at exec.
fn run_cli_snapshot(bin: &Path, state: &Path) -> CliRun {
    let mut args = vec!["--state-dir".as_ref(), state.as_os_str()];
    args.extend(["snapshot", "--all", "--json"].map(std::ffi::OsStr::new));
    run_measured(bin, &args)
}

// ---------------------------------------------------------------------------
// watch

/// The fields of a `watch --json` line this bench reads.
#[derive(serde::Deserialize)]
struct WatchLine {
    kind: Option<String>,
    name: Option<String>,
    to: Option<String>,
    #[serde(default)]
    pids: Vec<u32>,
}

/// The `name` of a `watch --json` state line, when it has no escape (a
/// quick look that spares parsing a million free keys' lines).
fn quick_name(line: &str) -> Option<&str> {
    let start = line.find("\"name\":\"")? + 8;
    let len = line[start..].find('"')?;
    let name = &line[start..start + len];
    (!name.contains('\\')).then_some(name)
}

/// `locktop watch --json --initial`: the time from spawn until every held
/// key's latest line says `live` with exactly its holder's PID; then the
/// settle and its VmHWM.
fn run_watch_held(plan: &Plan, bin: &Path, fixture: &Fixture) -> (Option<Duration>, u64) {
    let start = Instant::now();
    let mut child = spawn_locktop(
        bin,
        &fixture.state,
        &["watch", "--json", "--initial"],
        Stdio::null(),
    );
    let stdout = child.child_mut().stdout.take().expect("piped");
    let held = fixture.held.clone();
    let (tx, rx) = channel();
    let reader = std::thread::spawn(move || {
        let mut right = vec![false; held.len()];
        let mut count = 0;
        let mut sent = false;
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if sent {
                continue;
            }
            // A line that names no held key is skipped unparsed.
            if let Some(name) = quick_name(&line)
                && !held.keys.contains_key(name)
            {
                continue;
            }
            let Ok(parsed) = serde_json::from_str::<WatchLine>(&line) else {
                continue;
            };
            let (Some(kind), Some(name), Some(to)) = (&parsed.kind, &parsed.name, &parsed.to)
            else {
                continue;
            };
            if let Some((index, ok)) = held.judge(kind, name, to, &parsed.pids) {
                if ok != right[index] {
                    right[index] = ok;
                    if ok {
                        count += 1;
                    } else {
                        count -= 1;
                    }
                }
                if count == held.len() {
                    sent = true;
                    let _ = tx.send(Instant::now());
                }
            }
        }
    });
    let correct = rx
        .recv_timeout(plan.view_timeout)
        .ok()
        .map(|at| at.duration_since(start));
    std::thread::sleep(plan.settle);
    let kib = vm_hwm(child.pid());
    stop(&mut child);
    let _ = reader.join();
    (correct, kib)
}

// ---------------------------------------------------------------------------
// serve

struct ServeRun {
    healthy: Option<Duration>,
    /// VmHWM once healthy (and settled), before any download.
    view_kib: u64,
    download: Option<Duration>,
    /// VmHWM after the download.
    kib: u64,
}

fn agent(timeout: Duration) -> ureq::Agent {
    ureq::Agent::config_builder()
        .timeout_global(Some(timeout))
        .build()
        .into()
}

/// `locktop serve --listen 127.0.0.1:0` until `/healthz` answers 200;
/// settle, VmHWM; `/snapshot.json?all=true` read and checked; VmHWM again.
fn run_serve(plan: &Plan, bin: &Path, fixture: &Fixture) -> ServeRun {
    let start = Instant::now();
    let (mut child, base) = start_serve(bin, &fixture.state);
    let healthy = wait_healthy(&base, start, plan.view_timeout);
    let mut run = ServeRun {
        healthy,
        view_kib: 0,
        download: None,
        kib: 0,
    };
    std::thread::sleep(plan.settle);
    run.view_kib = vm_hwm(child.pid());
    if healthy.is_some() {
        let t = Instant::now();
        match download_snapshot(&base, plan.view_timeout) {
            Ok(summary) => {
                let took = t.elapsed();
                let right = summary
                    .held
                    .iter()
                    .filter(|k| {
                        fixture
                            .held
                            .judge(&k.kind, &k.name, &k.liveness, &k.pids)
                            .is_some_and(|(_, ok)| ok)
                    })
                    .count();
                if summary.count == fixture.size.keys() && right == fixture.held.len() {
                    run.download = Some(took);
                } else {
                    say(format!(
                        "   /snapshot.json?all=true listed {} keys (want {}), {} held keys right of {}",
                        thousands(summary.count),
                        thousands(fixture.size.keys()),
                        right,
                        fixture.held.len()
                    ));
                }
            }
            Err(error) => say(format!("   /snapshot.json?all=true failed: {error}")),
        }
        std::thread::sleep(plan.settle);
        run.kib = vm_hwm(child.pid());
    } else {
        run.kib = run.view_kib;
    }
    stop(&mut child);
    run
}

/// Spawns `serve` on a free loopback port; the child and its base URL.
fn start_serve(bin: &Path, state: &Path) -> (Guarded, String) {
    start_serve_with(bin, state, &[])
}

/// [`start_serve`] with `flags` added (the lines serve says on stderr
/// before it listens, such as its liveness source, are passed over).
fn start_serve_with(bin: &Path, state: &Path, flags: &[&str]) -> (Guarded, String) {
    let args = [&["serve", "--listen", "127.0.0.1:0"][..], flags].concat();
    let mut child = spawn_locktop(bin, state, &args, Stdio::piped());
    drop(child.child_mut().stdout.take());
    let stderr = child.child_mut().stderr.take().expect("piped");
    let mut stderr = BufReader::new(stderr);
    let mut said = Vec::new();
    let base = loop {
        let mut line = String::new();
        let read = stderr.read_line(&mut line).expect("serve's stderr");
        if let Some(base) = line.trim().strip_prefix("locktop serve: listening on ") {
            break base.to_string();
        }
        said.push(line);
        assert!(read > 0 && said.len() < 5, "serve said {said:?}");
    };
    // Whatever else it says on stderr, read so it never blocks.
    std::thread::spawn(move || {
        let _ = std::io::copy(&mut stderr, &mut std::io::sink());
    });
    (child, base)
}

/// Polls `/healthz` every 20 ms until it answers 200 (`None`: not within
/// `timeout`); the time since `start`.
fn wait_healthy(base: &str, start: Instant, timeout: Duration) -> Option<Duration> {
    let agent = agent(Duration::from_secs(10));
    let url = format!("{base}/healthz");
    while start.elapsed() < timeout {
        if agent.get(&url).call().is_ok() {
            return Some(start.elapsed());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    None
}

/// A `snapshot --json` document's keys: how many, and the ones not free.
struct KeysSummary {
    count: usize,
    held: Vec<SlimKey>,
}

#[derive(serde::Deserialize)]
struct SlimKey {
    kind: String,
    name: String,
    liveness: String,
    #[serde(default)]
    holders: Vec<SlimHolder>,
    #[serde(skip)]
    pids: Vec<u32>,
}

#[derive(serde::Deserialize)]
struct SlimHolder {
    pid: u32,
}

#[derive(serde::Deserialize)]
struct SnapshotDoc {
    keys: KeysSummary,
}

impl<'de> serde::Deserialize<'de> for KeysSummary {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Keys;
        impl<'de> serde::de::Visitor<'de> for Keys {
            type Value = KeysSummary;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an array of keys")
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<KeysSummary, A::Error> {
                let mut summary = KeysSummary {
                    count: 0,
                    held: Vec::new(),
                };
                while let Some(mut key) = seq.next_element::<SlimKey>()? {
                    summary.count += 1;
                    if key.liveness != "free" {
                        key.pids = key.holders.iter().map(|h| h.pid).collect();
                        summary.held.push(key);
                    }
                }
                Ok(summary)
            }
        }
        deserializer.deserialize_seq(Keys)
    }
}

/// GET `/snapshot.json?all=true`, parsed as it streams in (no copy of the
/// whole body here).
fn download_snapshot(base: &str, timeout: Duration) -> Result<KeysSummary, String> {
    let mut response = agent(timeout)
        .get(&format!("{base}/snapshot.json?all=true"))
        .call()
        .map_err(|e| e.to_string())?;
    let reader = BufReader::with_capacity(1 << 16, response.body_mut().as_reader());
    let doc: SnapshotDoc = serde_json::from_reader(reader).map_err(|e| e.to_string())?;
    Ok(doc.keys)
}

// ---------------------------------------------------------------------------
// The TUI

/// The first complete view: the header's first line says `watching`, its
/// second counts every key (`N ● live`, `M ○ free`), and a holder's PID
/// shows below the tab bar.
fn tui_complete(screen: &str, live: usize, free: usize, pids: &[String]) -> bool {
    let mut lines = screen.lines();
    let (Some(first), Some(second)) = (lines.next(), lines.next()) else {
        return false;
    };
    first.contains("watching")
        && !first.contains("so far")
        && second.contains(&format!("{live} ● live"))
        && second.contains(&format!("{free} ○ free"))
        && lines
            .skip_while(|line| !line.contains(" 1 Tree "))
            .skip(1)
            .any(|line| pids.iter().any(|pid| line.contains(pid.as_str())))
}

/// The TUI until its first complete view ([`tui_complete`], polled every
/// 50 ms), then the settle and its VmHWM; quit with `q`.
fn run_tui(plan: &Plan, bin: &Path, fixture: &Fixture) -> (Option<Duration>, u64) {
    let start = Instant::now();
    let tui = PtyTui::spawn(
        bin,
        &["--state-dir".as_ref(), fixture.state.as_os_str()],
        TUI_ROWS,
        TUI_COLS,
    );
    let view = tui_view(&tui, fixture, start, plan.view_timeout);
    std::thread::sleep(plan.settle);
    let kib = vm_hwm(tui.pid());
    tui.quit();
    (view, kib)
}

/// Polls `tui`'s screen every 50 ms until its first complete view of
/// `fixture` ([`tui_complete`]): the time since `start`, or `None` (its
/// screen said) when it did not come within `timeout`.
fn tui_view(
    tui: &PtyTui,
    fixture: &Fixture,
    start: Instant,
    timeout: Duration,
) -> Option<Duration> {
    let live = fixture.held.len();
    let free = fixture.size.keys() - live;
    let mut pids: Vec<String> = fixture
        .held
        .keys
        .values()
        .map(|(_, _, pid)| pid.to_string())
        .collect();
    pids.sort();
    pids.dedup();
    loop {
        if tui_complete(&tui.screen(), live, free, &pids) {
            return Some(start.elapsed());
        }
        if start.elapsed() > timeout {
            say(format!(
                "   the TUI never showed its complete view; its screen:\n{}",
                tui.screen()
            ));
            return None;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

// ===========================================================================
// 2. Steady churn CPU

fn section_churn(plan: &Plan, bin: &Path, tmp: &Path, targets: &mut Targets) {
    say(format!(
        "\n2. STEADY CHURN CPU  {} agents on disk (free instance keys under {} parents); a driver keeps \
         ~{} `locktop hold` alive, spawning one and ending the oldest ~{} times a second (half \
         existing AIHs, half fresh ones, every third with a tag; SIGKILL and stdin close in turns) \
         for {}; meanwhile `inotifywait -m -r <state>/locks`, `locktop watch` and `locktop serve`; \
         CPU = utime+stime from /proc/PID/stat over the window",
        thousands(plan.churn.agents),
        plan.churn.parents,
        plan.churn.alive,
        plan.churn.per_second,
        fmt_dur(plan.churn.window)
    ));
    let Some(version) = inotifywait_version() else {
        say(format!("   {}", inotifywait_missing()));
        return;
    };
    let state = tmp.join("state-churn");
    let aihs = instance_names(plan.churn.agents, plan.churn.parents);
    let created = create_free_keys_touch(&state, &[], &aihs);
    say(format!(
        "   {} keys written in {}; baseline: {version}",
        thousands(aihs.len()),
        fmt_dur(created)
    ));

    // inotifywait, ready once it says "Watches established.".
    let inotify = Inotifywait::spawn(&state.join("locks"));
    let watch_lines = Arc::new(AtomicUsize::new(0));
    let start = Instant::now();
    let mut watch = spawn_locktop(bin, &state, &["watch"], Stdio::null());
    let (watch_synced, watch_reader) = drain_lines(
        watch.child_mut().stdout.take().expect("piped"),
        watch_lines.clone(),
        |line| line.contains(" synced: "),
    );
    let (mut serve, base) = start_serve(bin, &state);
    let ready = [
        inotify.ready.recv_timeout(plan.view_timeout).is_ok(),
        watch_synced.recv_timeout(plan.view_timeout).is_ok(),
        wait_healthy(&base, start, plan.view_timeout).is_some(),
    ];
    assert!(
        ready.iter().all(|r| *r),
        "not ready in {}: inotifywait, watch, serve = {ready:?}",
        fmt_dur(plan.view_timeout)
    );
    std::thread::sleep(plan.settle);
    let pids = [inotify.process.pid(), watch.pid(), serve.pid()];
    let before = pids.map(|pid| cpu_ticks(pid).unwrap_or(0));
    let lines_before = [
        inotify.lines.load(Ordering::Relaxed),
        watch_lines.load(Ordering::Relaxed),
    ];
    let (stats, window) = churn(&plan.churn, bin, &state, &aihs, || {
        pids.map(|pid| cpu_ticks(pid).unwrap_or(0))
    });
    let (after, elapsed) = window;
    let lines = [
        inotify.lines.load(Ordering::Relaxed) - lines_before[0],
        watch_lines.load(Ordering::Relaxed) - lines_before[1],
    ];
    stop(&mut serve);
    stop(&mut watch);
    inotify.finish();
    let _ = watch_reader.join();

    let hz = clock_ticks_per_second();
    let used: Vec<u64> = (0..3).map(|i| after[i].saturating_sub(before[i])).collect();
    say(format!(
        "   churn: {}; lines meanwhile: inotifywait {}, watch {}",
        stats.describe(elapsed),
        thousands(lines[0]),
        thousands(lines[1]),
    ));
    let cpu = |ticks: u64| Duration::from_secs_f64(ticks as f64 / hz as f64);
    let ratio_of = |ticks: u64| (used[0] > 0).then(|| ticks as f64 / used[0] as f64);
    for (i, what) in ["inotifywait -m -r", "locktop watch", "locktop serve"]
        .iter()
        .enumerate()
    {
        say(format!(
            "   {what:<20} CPU {:>9} ({:>4} ticks, {:.2}% of one core){}",
            fmt_dur(cpu(used[i])),
            used[i],
            cpu(used[i]).as_secs_f64() * 100.0 / elapsed.as_secs_f64(),
            if i == 0 {
                String::new()
            } else {
                ratio_of(used[i]).map_or_else(
                    || "  (inotifywait used no tick: no ratio)".into(),
                    |r| format!("  = {r:.2}× inotifywait"),
                )
            }
        ));
    }
    for (i, what) in [(2, "serve"), (1, "watch")] {
        let r = ratio_of(used[i]);
        targets.add(format!(
            "churn CPU, {what} ≤ {CHURN_RATIO:.0}× inotifywait -m -r: {} ({} vs {} over {})  {}",
            r.map_or_else(|| "n/a".into(), |r| format!("{r:.2}×")),
            fmt_dur(cpu(used[i])),
            fmt_dur(cpu(used[0])),
            fmt_dur(elapsed),
            verdict(r.is_some_and(|r| r <= CHURN_RATIO))
        ));
    }
}

// ===========================================================================
// 3. Idle steady state

/// Steady-state RSS target of every front end at the big size (MB).
const IDLE_MB: f64 = 250.0;
/// Steady-state CPU target of every front end at the big size (% of one
/// core).
const IDLE_CORE_PERCENT: f64 = 1.0;

/// The liveness sources section 3 compares: label and flags.
const IDLE_SOURCES: [(&str, &[&str]); 2] = [
    ("kernel events", &["--source", "kernel"]),
    ("inference", &["--source", "inference"]),
];

fn section_idle(plan: &Plan, bin: &Path, tmp: &Path, targets: &mut Targets) {
    say(format!(
        "\n3. IDLE STEADY STATE  {} keys, {} held, nothing changing; per liveness source, `watch`, \
         `serve` and the TUI side by side: after each one's first complete view and a settle of \
         {}, CPU = utime+stime over {}, RSS at its end, VmHWM",
        thousands(plan.big.keys()),
        thousands(plan.held()),
        fmt_dur(plan.settle),
        fmt_dur(plan.idle),
    ));
    let fixture = make_fixture(
        bin,
        &tmp.join(format!("state-{}", plan.big.keys())),
        plan.big,
        plan.holders,
        plan.keys_per_holder,
    );
    for (source, flags) in IDLE_SOURCES {
        say(format!("\n {source} ({})", flags.join(" ")));
        match idle_rows(plan, bin, &fixture, flags) {
            Ok(rows) => {
                for row in rows {
                    row.report(source, plan.idle, targets);
                }
            }
            Err(why) => say(format!("   {}", skipped(format!("skipped: {why}")))),
        }
    }
}

/// One front end's idle figures.
struct IdleRow {
    what: &'static str,
    /// CPU ticks over the idle window.
    ticks: u64,
    rss_kib: u64,
    hwm_kib: u64,
}

impl IdleRow {
    fn report(&self, source: &str, window: Duration, targets: &mut Targets) {
        let hz = clock_ticks_per_second();
        let core = self.ticks as f64 / hz as f64 * 100.0 / window.as_secs_f64();
        say(format!(
            "   {:<8} CPU {:>5.2}% of one core ({} ticks)   RSS {:>6.1} MB   VmHWM {:>6.1} MB",
            self.what,
            core,
            self.ticks,
            mb(self.rss_kib),
            mb(self.hwm_kib)
        ));
        targets.add(format!(
            "idle at 1M keys, {source}, {} ≤ {IDLE_MB:.0} MB and ≤ {IDLE_CORE_PERCENT:.0}% of a core: \
             VmHWM {:.1} MB, {core:.2}%  {}",
            self.what,
            mb(self.hwm_kib),
            verdict(mb(self.hwm_kib) <= IDLE_MB && core <= IDLE_CORE_PERCENT)
        ));
    }
}

/// `watch`, `serve` and the TUI with `flags` on `fixture`, side by side,
/// until each one's first complete view, then the idle window. `Err` with
/// what a front end said when it refused the flags (the kernel's events
/// not granted to this user).
fn idle_rows(
    plan: &Plan,
    bin: &Path,
    fixture: &Fixture,
    flags: &[&str],
) -> Result<Vec<IdleRow>, String> {
    let start = Instant::now();
    let mut watch = spawn_locktop(
        bin,
        &fixture.state,
        &[&["watch"][..], flags].concat(),
        Stdio::piped(),
    );
    let (synced, watch_reader) = drain_lines(
        watch.child_mut().stdout.take().expect("piped"),
        Arc::default(),
        |line| line.contains(" synced: "),
    );
    let stderr = watch.child_mut().stderr.take().expect("piped");
    let refused = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = std::io::Read::read_to_string(&mut BufReader::new(stderr), &mut text);
        text
    });
    if synced.recv_timeout(plan.view_timeout).is_err() {
        stop(&mut watch);
        let said = refused.join().unwrap_or_default();
        return Err(format!("watch {} said: {}", flags.join(" "), said.trim()));
    }
    let (mut serve, base) = start_serve_with(bin, &fixture.state, flags);
    let tui_args: Vec<&std::ffi::OsStr> = ["--state-dir".as_ref(), fixture.state.as_os_str()]
        .into_iter()
        .chain(flags.iter().map(std::ffi::OsStr::new))
        .collect();
    let tui = PtyTui::spawn(bin, &tui_args, TUI_ROWS, TUI_COLS);
    let views = [
        wait_healthy(&base, start, plan.view_timeout).is_some(),
        tui_view(&tui, fixture, start, plan.view_timeout).is_some(),
    ];
    assert!(
        views.iter().all(|v| *v),
        "no first complete view in {}: serve, TUI = {views:?}",
        fmt_dur(plan.view_timeout)
    );
    say(format!(
        "   all three showing their first complete view after {}",
        fmt_dur(start.elapsed())
    ));
    std::thread::sleep(plan.settle);
    let pids = [
        ("watch", watch.pid()),
        ("serve", serve.pid()),
        ("TUI", tui.pid()),
    ];
    let before = pids.map(|(_, pid)| cpu_ticks(pid).unwrap_or(0));
    std::thread::sleep(plan.idle);
    let rows = pids
        .iter()
        .zip(before)
        .map(|(&(what, pid), before)| IdleRow {
            what,
            ticks: cpu_ticks(pid).unwrap_or(0).saturating_sub(before),
            rss_kib: vm_status_kib(pid, "VmRSS:").unwrap_or(0),
            hwm_kib: vm_hwm(pid),
        })
        .collect();
    tui.quit();
    stop(&mut serve);
    stop(&mut watch);
    let _ = (watch_reader.join(), refused.join());
    Ok(rows)
}

// ===========================================================================
// Statistics

fn fmt_opt(d: Option<Duration>) -> String {
    d.map_or_else(|| "never".into(), fmt_dur)
}

/// min / median / max of runs, a run that never completed counting as
/// longer than any (shown as `> timeout`).
fn spread_dur(v: &[Option<Duration>], timeout: Duration) -> [String; 3] {
    if v.is_empty() {
        return ["n/a".into(), "n/a".into(), "n/a".into()];
    }
    let mut sorted: Vec<Option<Duration>> = v.to_vec();
    sorted.sort_by_key(|d| d.unwrap_or(Duration::MAX));
    let show = |d: Option<Duration>| d.map_or_else(|| format!("> {}", fmt_dur(timeout)), fmt_dur);
    [
        show(sorted[0]),
        show(sorted[(sorted.len() - 1) / 2]),
        show(sorted[sorted.len() - 1]),
    ]
}

fn spread_mb(v: &[u64]) -> [String; 3] {
    if v.is_empty() {
        return ["n/a".into(), "n/a".into(), "n/a".into()];
    }
    let mut sorted = v.to_vec();
    sorted.sort();
    let show = |kib: u64| format!("{:.1} MB", mb(kib));
    [
        show(sorted[0]),
        show(sorted[(sorted.len() - 1) / 2]),
        show(sorted[sorted.len() - 1]),
    ]
}

fn median_u64(v: &[u64]) -> u64 {
    let mut sorted = v.to_vec();
    sorted.sort();
    sorted[(sorted.len() - 1) / 2]
}

/// The median of runs that all completed (`None` if one did not).
fn median_opt(v: &[Option<Duration>]) -> Option<Duration> {
    let all: Option<Vec<Duration>> = v.iter().copied().collect();
    all.filter(|v| !v.is_empty()).map(|v| median(&v))
}

/// The slowest run (`None` if one never completed, or none ran).
fn worst_opt(v: &[Option<Duration>]) -> Option<Duration> {
    let all: Option<Vec<Duration>> = v.iter().copied().collect();
    all.and_then(|v| v.into_iter().max())
}
