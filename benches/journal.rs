//! The journal benchmark: what recording the lock history costs, and what
//! reading it back at a time costs. The release `locktop` binary runs as
//! child processes; the 1 GiB journal of section 2 is written in-process
//! with the library's writer (`locktop::journal::Journal`), the one
//! `locktop record` uses.
//!
//! Section 1, JOURNAL BYTES AND RECORD CPU. A state dir with 2,000 agents
//! on disk (free instance keys under 100 parents) and the churn of the
//! scale bench's section 2 ([`support::outside::churn`]: about 6 `locktop
//! hold` processes alive, one spawned and the oldest ended about 24 times
//! a second, for 20 s). Side by side on it: `locktop record --out J` and
//! `locktop watch --json` (stdout drained by a thread). Both are ready
//! once record has written its first checkpoint and both have reported a
//! sentinel holder's hold; then a settle of 1 s. Reported:
//! - CPU of each = utime + stime from `/proc/PID/stat` (clock ticks), the
//!   delta over the churn window, and record / watch. Target: ≤ 1.1×.
//! - journal bytes per change = bytes J grew by over the window / the
//!   lines written in it whose first field is `time` (key changes,
//!   verdicts, the rare watcher or scan line); and the bytes of a key
//!   change line alone (the `watch --json` line plus `dir` and `state`),
//!   beside watch's own bytes per line over the same window.
//!
//! Section 2, ANSWERING --at IN A 1 GiB JOURNAL. The generator writes a
//! journal of 10,000 keys (8,000 tags + 2,000 instance AIHs under 20
//! parents), 1,000 of them held at the start by 20 holders × 50 keys (the
//! keys section 3's real holders hold), then synthetic changes until the
//! file is 1 GiB: a random free key taken (by a fresh holder: PID, a
//! 102-character command line, start time, parent) or a random held key
//! released, the held count pulled back towards 1,000, 0 to 20 ms apart
//! (10 ms on average); default checkpoints (at least 4 MiB of changes
//! apart). Journal times start three days before the run (a post-mortem
//! reads the past; the writer keeps each change's own time). Reported:
//! the generation rate, the file's make-up
//! (checkpoints' share). Then `locktop replay J --at T --json >
//! /dev/null`, a child reaped by an intermediary, wall time from spawn to
//! exit, at 10 times T spread evenly from the first checkpoint to the
//! last line and one 1 ms after the last line: each, median and max,
//! with J in the page cache (as just written) and, for information, with
//! J evicted first (`posix_fadvise(DONTNEED)` after an fsync). Target:
//! max (in cache) ≤ 200 ms. Correctness, which panics when wrong: at each
//! of these times and the middle one, the held keys of `replay --at
//! --json` (kind, name, holder PID) are exactly those of the generator's
//! own fold of its changes up to T; a note that the recording ended is
//! printed after the last line only, and no warning ever. (The timed
//! runs' stderr is replay's own: its two `note:` lines above the table
//! are that answer after the last line, in cache and evicted.)
//!
//! Section 3, PEAK RSS. `replay J --at T --json` at the middle T
//! (`ru_maxrss` through the intermediary, 3 runs) against `locktop watch`
//! (VmHWM after its `synced:` line and a 1 s settle, 3 runs) on a real
//! state dir with the journal's keys: 10,000 keys written on disk
//! ([`support::create_free_keys_touch`]), 1,000 held by 20 real `locktop
//! hold --aih A --tag …` processes × 50 keys. Target: replay's median ≤
//! watch's median.
//!
//! Plans: `cargo bench --bench journal` (argv contains `--bench`) is the
//! full run. Without `--bench` (what `cargo test --all-targets` runs) or
//! with `--smoke`: the same code paths at tiny sizes (400 agents and a
//! 1 s churn; a 16 MiB journal of 1,000 keys, 20 held, read at 4 times
//! and after the end; 1 run each in section 3). `-- --only-record` /
//! `-- --only-replay` run section 1 / sections 2 and 3; `-- --baseline
//! BIN` also times another locktop's `replay --at` on section 2's
//! journal at the same times, interleaved, and prints the ratios;
//! `-- --keep` keeps the tempdir (its journals), for profiling by hand. Targets are
//! printed as PASS/MISS at the end; they never fail the run. Every child
//! process is SIGKILLed on exit, panic included ([`support::Guarded`]);
//! holders also release and exit on their own when this process dies
//! (their stdin closes). The tempdir (journals included) is removed at
//! the end.
//!
//! # Where a replay's time goes (strace of a full run, 2026-12-02)
//!
//! Each `replay --at` of the 1 GiB journal read 23 to 36 MB of it, in 113
//! to 164 reads of 256 KiB: mostly the bisection's scans forward from a
//! midpoint to the next checkpoint (checkpoints are ~4.6 MB apart here),
//! then one checkpoint (~0.65 MB) and up to 4 MiB of changes folded. In
//! the page cache that is 25-55 ms in all, process start included; with
//! the file evicted, 70-105 ms on this machine's disk.

// engine.rs uses all of `support` but `outside`; this bench only its
// holders, fixtures, resource and formatting helpers, and `outside`.
#[allow(dead_code)]
mod support;

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant, SystemTime};

use locktop::disk::LockKey;
use locktop::engine::{Delta, KeyState, Liveness};
use locktop::journal::{Journal, Output, Recording};
use locktop::liveness::ProcessInfo;
use locktop::liveness::probe::ProbeMode;
use locktop::liveness::process::ProcState;
use locktop::locks::{agent_instance_lock, agent_tag_lock};
use locktop::time_format::rfc3339;

use support::outside::*;
use support::*;

/// record's churn CPU, at most this many times watch --json's.
const CPU_RATIO: f64 = 1.1;
/// The slowest `replay --at` in the 1 GiB journal.
const REPLAY_TARGET: Duration = Duration::from_millis(200);
/// The AIH leaf of the holder both recorders must report before the window.
const SENTINEL: &str = "journal-bench-sentinel";
/// How a line whose first field is `time` starts.
const TIME_FIRST: &[u8] = b"{\"time\":\"";

/// Everything that differs between the full run and the smoke run.
struct Plan {
    name: &'static str,
    churn: Churn,
    /// After both recorders are ready, before the window; after `watch`'s
    /// `synced:`, before its VmHWM.
    settle: Duration,
    /// How long a recorder may take to be ready before the run panics.
    view_timeout: Duration,
    /// The journal's keys (and section 3's state dir).
    keys: Size,
    holders: usize,
    keys_per_holder: usize,
    /// The journal is written until it is this large.
    journal_bytes: u64,
    /// Times T spread from the first checkpoint to the last line.
    samples: usize,
    /// Runs of each in section 3.
    rss_runs: usize,
}

impl Plan {
    fn full() -> Self {
        Self {
            name: "FULL",
            churn: Churn::STEADY,
            settle: Duration::from_secs(1),
            view_timeout: Duration::from_secs(120),
            keys: Size {
                tags: 8_000,
                instances: 2_000,
                parents: 20,
            },
            holders: 20,
            keys_per_holder: 50,
            journal_bytes: 1 << 30,
            samples: 10,
            rss_runs: 3,
        }
    }

    fn smoke() -> Self {
        Self {
            name: "SMOKE",
            churn: Churn::SMOKE,
            settle: Duration::from_millis(200),
            view_timeout: Duration::from_secs(60),
            keys: Size {
                tags: 800,
                instances: 200,
                parents: 2,
            },
            holders: 2,
            keys_per_holder: 10,
            journal_bytes: 16 << 20,
            // A debug build's replay takes up to 300 ms here.
            samples: 4,
            rss_runs: 1,
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
    let tmp = tempfile::Builder::new()
        .prefix("locktop-journal-")
        .tempdir()
        .expect("tempdir");
    header(&plan, &args, &bin, tmp.path());
    let mut targets = Targets::default();
    if !has("--only-replay") {
        let t = Instant::now();
        section_record(&plan, &bin, tmp.path(), &mut targets);
        took(t);
    }
    if !has("--only-record") {
        let t = Instant::now();
        // `--baseline BIN`: another locktop's `replay --at` timed on the
        // same journal, at the same times, in the same run.
        let baseline = args
            .iter()
            .position(|a| a == "--baseline")
            .and_then(|i| args.get(i + 1))
            .map(PathBuf::from);
        let generated = section_replay(&plan, &bin, baseline.as_deref(), tmp.path(), &mut targets);
        took(t);
        let t = Instant::now();
        section_rss(&plan, &bin, tmp.path(), &generated, &mut targets);
        took(t);
    }
    targets.say(!full, "journal");
    let t = Instant::now();
    if has("--keep") {
        // For profiling by hand: the journals stay.
        say(format!("kept: {}", tmp.keep().display()));
    } else {
        drop(tmp);
    }
    say(format!(
        "\n{} run finished in {} (tempdir removed in {}; all children killed and reaped); load at end: {}",
        plan.name,
        fmt_dur(started.elapsed()),
        fmt_dur(t.elapsed()),
        loadavg()
    ));
}

/// `(section: 12.3 s)` — where the bench's own time goes.
fn took(start: Instant) {
    say(format!("   (section: {})", fmt_dur(start.elapsed())));
}

fn header(plan: &Plan, args: &[String], bin: &Path, tmp: &Path) {
    say(format!("locktop journal benchmark — {} run", plan.name));
    say(format!(
        "command:  {}   [argv; `cargo bench --bench journal` passes --bench → full run, \
         without it (cargo test --all-targets) or with --smoke → smoke run; \
         --only-record / --only-replay: section 1 / sections 2 and 3]",
        args.join(" ")
    ));
    say_where(bin, tmp);
}

/// Polls `done` every 20 ms until it is true (`false`: not within
/// `timeout`).
fn wait_until(timeout: Duration, mut done: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < timeout {
        if done() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    done()
}

fn file_len(path: &Path) -> u64 {
    std::fs::metadata(path).map_or(0, |meta| meta.len())
}

fn file_contains(path: &Path, needle: &[u8]) -> bool {
    std::fs::read(path).is_ok_and(|text| memchr::memmem::find(&text, needle).is_some())
}

fn mib(bytes: u64) -> String {
    if bytes >= 1 << 30 {
        format!("{:.2} GiB", bytes as f64 / f64::from(1u32 << 30))
    } else {
        format!("{:.1} MiB", bytes as f64 / f64::from(1u32 << 20))
    }
}

// ===========================================================================
// Journal lines

/// What a journal line is, from its first bytes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum LineKind {
    Header,
    /// A checkpoint's head, keys, free keys or end.
    Checkpoint,
    /// `{"time":…,"kind":…}`: a key's change.
    KeyChange,
    /// `{"time":…,"key":{…},"verdict_from":…}`: a verdict change.
    Verdict,
    /// Another line whose first field is `time` (watcher, synced).
    OtherTimed,
    Unknown,
}

fn line_kind(line: &[u8]) -> LineKind {
    if let Some(rest) = line.strip_prefix(TIME_FIRST) {
        // {"time":"…","<second field>":
        let second = rest
            .iter()
            .position(|b| *b == b'"')
            .and_then(|close| rest[close + 1..].strip_prefix(b",\""));
        return match second {
            Some(field) if field.starts_with(b"kind\"") => LineKind::KeyChange,
            Some(field) if field.starts_with(b"key\"") => LineKind::Verdict,
            _ => LineKind::OtherTimed,
        };
    }
    let checkpoint = [
        &b"{\"checkpoint\":"[..],
        b"{\"ck\":",
        b"{\"cf\":",
        b"{\"checkpoint_end\":",
    ];
    if checkpoint.iter().any(|prefix| line.starts_with(prefix)) {
        LineKind::Checkpoint
    } else if line.starts_with(b"{\"journal\":") {
        LineKind::Header
    } else {
        LineKind::Unknown
    }
}

/// Lines and bytes of a stretch of journal, by kind.
#[derive(Default)]
struct Tally {
    bytes: u64,
    /// Lines and bytes, indexed by `LineKind as usize`.
    lines: [(usize, u64); 6],
    /// Checkpoint heads (one per checkpoint).
    checkpoints: usize,
}

impl Tally {
    fn add(&mut self, line: &[u8]) {
        let entry = &mut self.lines[line_kind(line) as usize];
        entry.0 += 1;
        entry.1 += line.len() as u64;
        self.bytes += line.len() as u64;
        if line.starts_with(b"{\"checkpoint\":") {
            self.checkpoints += 1;
        }
    }

    fn count(&self, kind: LineKind) -> usize {
        self.lines[kind as usize].0
    }

    fn bytes_of(&self, kind: LineKind) -> u64 {
        self.lines[kind as usize].1
    }

    /// Lines whose first field is `time`.
    fn timed(&self) -> usize {
        self.count(LineKind::KeyChange)
            + self.count(LineKind::Verdict)
            + self.count(LineKind::OtherTimed)
    }

    /// Bytes `from..to` of `path` (both at line starts), line by line.
    fn of_range(path: &Path, from: u64, to: u64) -> Self {
        let mut file = File::open(path).expect("open the journal");
        if from > 0 {
            let mut before = [0u8];
            file.seek(SeekFrom::Start(from - 1)).expect("seek");
            file.read_exact(&mut before).expect("read");
            assert_eq!(
                before[0], b'\n',
                "byte {from} of the journal is no line start"
            );
        }
        file.seek(SeekFrom::Start(from)).expect("seek");
        let mut tally = Self::default();
        let mut reader = BufReader::with_capacity(1 << 20, file.take(to - from));
        let mut line = Vec::new();
        loop {
            line.clear();
            match reader
                .read_until(b'\n', &mut line)
                .expect("read the journal")
            {
                0 => break,
                _ => {
                    assert!(
                        line.ends_with(b"\n"),
                        "a torn line at the end of the window"
                    );
                    tally.add(&line);
                }
            }
        }
        tally
    }
}

// ===========================================================================
// 1. Journal bytes and record CPU

fn section_record(plan: &Plan, bin: &Path, tmp: &Path, targets: &mut Targets) {
    let churn_plan = &plan.churn;
    say(format!(
        "\n1. JOURNAL BYTES AND RECORD CPU  {} agents on disk (free instance keys under {} parents); a driver keeps \
         ~{} `locktop hold` alive, spawning one and ending the oldest ~{} times a second (scale's churn) for {}; \
         meanwhile `locktop record --out J` and `locktop watch --json` (stdout drained), both ready (record's first \
         checkpoint written, a sentinel hold reported by both) and settled {}; CPU = utime+stime from /proc/PID/stat \
         over the window",
        thousands(churn_plan.agents),
        churn_plan.parents,
        churn_plan.alive,
        churn_plan.per_second,
        fmt_dur(churn_plan.window),
        fmt_dur(plan.settle),
    ));
    let state = tmp.join("state-churn");
    let aihs = instance_names(churn_plan.agents, churn_plan.parents);
    let created = create_free_keys_touch(&state, &[], &aihs);
    say(format!(
        "   {} keys written in {}",
        thousands(aihs.len()),
        fmt_dur(created)
    ));

    let journal = tmp.join("churn.journal");
    let out = journal.to_str().expect("a UTF-8 tempdir");
    let mut record = spawn_locktop(bin, &state, &["record", "--out", out], Stdio::inherit());
    drop(record.child_mut().stdout.take());
    let watch_lines = Arc::new(AtomicUsize::new(0));
    let watch_bytes = Arc::new(AtomicUsize::new(0));
    let mut watch = spawn_locktop(bin, &state, &["watch", "--json"], Stdio::inherit());
    let counted = watch_bytes.clone();
    let (sentinel_seen, reader) = drain_lines(
        watch.child_mut().stdout.take().expect("piped"),
        watch_lines.clone(),
        move |line| {
            counted.fetch_add(line.len() + 1, Ordering::Relaxed);
            line.contains(SENTINEL) && line.contains("\"to\":\"live\"")
        },
    );
    assert!(
        wait_until(plan.view_timeout, || file_contains(
            &journal,
            b"{\"checkpoint_end\":"
        )),
        "locktop record wrote no checkpoint within {}",
        fmt_dur(plan.view_timeout)
    );
    let sentinel_args = ["--aih".to_string(), format!("cli/daemon/{SENTINEL}")];
    let (sentinel, _) = spawn_holder_retrying(bin, &state, &sentinel_args);
    assert!(
        sentinel_seen.recv_timeout(plan.view_timeout).is_ok(),
        "watch --json never reported the sentinel's hold"
    );
    assert!(
        wait_until(plan.view_timeout, || file_contains(
            &journal,
            SENTINEL.as_bytes()
        )),
        "locktop record never journaled the sentinel's hold"
    );
    drop(sentinel);
    std::thread::sleep(plan.settle);

    let pids = [record.pid(), watch.pid()];
    let sample = || {
        (
            pids.map(|pid| cpu_ticks(pid).unwrap_or(0)),
            file_len(&journal),
            [
                watch_lines.load(Ordering::Relaxed),
                watch_bytes.load(Ordering::Relaxed),
            ],
        )
    };
    let before = sample();
    let (stats, (after, elapsed)) = churn(churn_plan, bin, &state, &aihs, sample);
    let alive = [record.try_wait(), watch.try_wait()];
    assert!(
        alive.iter().all(Option::is_none),
        "a recorder exited during the churn: record, watch = {alive:?}"
    );
    stop(&mut record);
    stop(&mut watch);
    let _ = reader.join();

    let window = Tally::of_range(&journal, before.1, after.1);
    let watch_window = [after.2[0] - before.2[0], after.2[1] - before.2[1]];
    assert!(
        window.count(LineKind::KeyChange) > 0 && watch_window[0] > 0,
        "no change recorded over the churn: journal {} key lines, watch {} lines",
        window.count(LineKind::KeyChange),
        watch_window[0]
    );
    assert_eq!(
        window.count(LineKind::Unknown) + window.count(LineKind::Header),
        0,
        "lines of an unknown kind in the journal"
    );
    let hz = clock_ticks_per_second();
    let used = [0, 1].map(|i| after.0[i].saturating_sub(before.0[i]));
    let cpu = |ticks: u64| Duration::from_secs_f64(ticks as f64 / hz as f64);
    say(format!("   churn: {}", stats.describe(elapsed)));
    let share = |ticks: u64| cpu(ticks).as_secs_f64() * 100.0 / elapsed.as_secs_f64();
    let ratio = (used[1] > 0).then(|| used[0] as f64 / used[1] as f64);
    say(format!(
        "   {:<28} CPU {:>9} ({:>4} ticks, {:.2}% of one core)  = {} watch --json",
        "locktop record --out J",
        fmt_dur(cpu(used[0])),
        used[0],
        share(used[0]),
        ratio.map_or_else(|| "n/a ×".into(), |r| format!("{r:.2}×"))
    ));
    say(format!(
        "   {:<28} CPU {:>9} ({:>4} ticks, {:.2}% of one core)",
        "locktop watch --json",
        fmt_dur(cpu(used[1])),
        used[1],
        share(used[1]),
    ));
    let timed = window.timed();
    say(format!(
        "   journal over the window: {} bytes; {} lines with `time` first ({} key changes, {} verdicts, {} other); \
         {} checkpoint(s) ({} bytes)",
        thousands(window.bytes as usize),
        thousands(timed),
        thousands(window.count(LineKind::KeyChange)),
        thousands(window.count(LineKind::Verdict)),
        thousands(window.count(LineKind::OtherTimed)),
        window.checkpoints,
        thousands(window.bytes_of(LineKind::Checkpoint) as usize),
    ));
    say(format!(
        "     = {:.0} B per change (bytes / lines with `time` first); a key change line {:.0} B; \
         watch --json meanwhile: {} lines, {:.0} B each",
        window.bytes as f64 / timed.max(1) as f64,
        window.bytes_of(LineKind::KeyChange) as f64
            / window.count(LineKind::KeyChange).max(1) as f64,
        thousands(watch_window[0]),
        watch_window[1] as f64 / watch_window[0].max(1) as f64,
    ));
    targets.add(format!(
        "churn CPU, record ≤ {CPU_RATIO:.1}× watch --json: {} ({} vs {} over {})  {}",
        ratio.map_or_else(|| "n/a".into(), |r| format!("{r:.2}×")),
        fmt_dur(cpu(used[0])),
        fmt_dur(cpu(used[1])),
        fmt_dur(elapsed),
        verdict(ratio.is_some_and(|r| r <= CPU_RATIO))
    ));
}

// ===========================================================================
// 2. Answering --at in a 1 GiB journal

/// One synthetic change: when (ms after the generator's base), which
/// key, taken or released. The taker's PID is [`pid_of`] its index.
#[derive(Clone, Copy)]
struct Change {
    at_ms: u32,
    key: u16,
    take: bool,
}

/// The PID of the holder that took a key in change `index`.
fn pid_of(index: usize) -> u32 {
    10_000 + (index % 4_000_000) as u32
}

/// The PID of fixture holder `h` (the keys held at the start).
fn initial_pid(h: usize) -> u32 {
    2_000 + h as u32
}

/// The journal's keys, in the order of the real fixture's: instances,
/// then tags; and the holder of each key held at the start (section 3's
/// `make_fixture` holds the same ones: holder h holds instance
/// `parents + h` and tags `h × (k − 1) .. (h + 1) × (k − 1)`).
struct KeySet {
    keys: Vec<LockKey>,
    initial: Vec<Option<u32>>,
}

impl KeySet {
    fn new(plan: &Plan, state: &Path) -> Self {
        let size = plan.keys;
        let aihs = instance_names(size.instances, size.parents);
        let keys: Vec<LockKey> = aihs
            .iter()
            .map(|aih| agent_instance_lock(state, aih))
            .chain((0..size.tags).map(|i| agent_tag_lock(state, &tag_name(i))))
            .map(|(dir, key)| LockKey::from_coord(state, &dir, &key))
            .collect();
        assert!(keys.len() < usize::from(u16::MAX), "key indices are u16");
        let mut initial = vec![None; keys.len()];
        let tags_per_holder = plan.keys_per_holder - 1;
        for h in 0..plan.holders {
            initial[size.parents + h] = Some(initial_pid(h));
            for t in h * tags_per_holder..(h + 1) * tags_per_holder {
                initial[size.instances + t] = Some(initial_pid(h));
            }
        }
        Self { keys, initial }
    }
}

/// A live holder as the engine describes one.
fn held_state(pid: u32, at: SystemTime) -> KeyState {
    KeyState {
        liveness: Liveness::Live,
        error: None,
        holders: vec![ProcessInfo {
            pid,
            alive: true,
            unverified: false,
            cmdline: Some(format!(
                "/usr/local/bin/objectiveai-agent run --profile research --workdir /srv/agents/{pid:07} --log-level=info"
            )),
            started: Some(at - Duration::from_millis(40 + u64::from(pid % 5_000))),
            state: Some(ProcState::Sleeping),
            ppid: Some(1_000 + pid % 97),
            parent: Some("/usr/local/bin/objectiveai daemon".into()),
            unit: None,
            idle_since: None,
        }],
        waiters: Vec::new(),
        watchers: Vec::new(),
        since: Some(at),
        holders_note: None,
        refused: None,
        waiting: Vec::new(),
    }
}

fn whole_ms(time: SystemTime) -> SystemTime {
    let millis = time
        .duration_since(SystemTime::UNIX_EPOCH)
        .expect("after 1970")
        .as_millis() as u64;
    SystemTime::UNIX_EPOCH + Duration::from_millis(millis)
}

/// A generated journal and the generator's own record of it.
struct Generated {
    path: PathBuf,
    /// The first checkpoint's time (where a replay can start).
    start: SystemTime,
    /// Change times are `base + at_ms`.
    base: SystemTime,
    /// The last change's time.
    end: SystemTime,
    bytes: u64,
    took: Duration,
    changes: Vec<Change>,
}

impl Generated {
    fn at(&self, change: &Change) -> SystemTime {
        self.base + Duration::from_millis(u64::from(change.at_ms))
    }

    /// What the generator's fold says is held at `time`: key index →
    /// holder PID.
    fn held_at(&self, keys: &KeySet, time: SystemTime) -> BTreeMap<u16, u32> {
        let mut held: BTreeMap<u16, u32> = keys
            .initial
            .iter()
            .enumerate()
            .filter_map(|(k, pid)| Some((k as u16, (*pid)?)))
            .collect();
        for (index, change) in self.changes.iter().enumerate() {
            if self.at(change) > time {
                break;
            }
            if change.take {
                held.insert(change.key, pid_of(index));
            } else {
                held.remove(&change.key);
            }
        }
        held
    }
}

/// Writes the journal with the library's writer until it is
/// `plan.journal_bytes` large.
fn generate(plan: &Plan, keys: &KeySet, state: &Path, path: &Path) -> Generated {
    let started = Instant::now();
    let mut journal = Journal::create(
        Output::File {
            path: path.to_path_buf(),
            max_size: None,
            keep: 1,
        },
        Recording {
            state_dir: state.to_path_buf(),
            probe: ProbeMode::LockFree,
        },
    )
    .expect("create the journal");
    let write = |journal: &mut Journal, delta| journal.record(delta).expect("write the journal");
    // The first scan, three days ago (a post-mortem reads the past):
    // every key, then Synced (the first checkpoint).
    let now = whole_ms(SystemTime::now() - Duration::from_secs(3 * 86_400));
    let mut holder: Vec<Option<u32>> = keys.initial.clone();
    let mut held: Vec<u16> = Vec::new();
    let mut place: Vec<Option<usize>> = vec![None; keys.keys.len()];
    for (k, key) in keys.keys.iter().enumerate() {
        let state = match holder[k] {
            Some(pid) => {
                place[k] = Some(held.len());
                held.push(k as u16);
                held_state(pid, now - Duration::from_secs(600))
            }
            None => KeyState::bare(Liveness::Free),
        };
        let delta = Delta::Key {
            key: key.clone(),
            state,
            previous: None,
            at: now,
        };
        write(&mut journal, delta);
    }
    write(
        &mut journal,
        Delta::Synced {
            keys: keys.keys.len(),
            at: now,
        },
    );
    // The changes: 1 s after the first checkpoint on, 0-20 ms apart.
    let base = now + Duration::from_secs(1);
    let target_held = plan.held().max(1);
    let mut rng = fastrand::Rng::with_seed(11);
    let mut changes: Vec<Change> = Vec::new();
    let mut at_ms: u32 = 0;
    let mut bytes = file_len(path);
    while bytes < plan.journal_bytes {
        at_ms += rng.u32(0..=20);
        let at = base + Duration::from_millis(u64::from(at_ms));
        let index = changes.len();
        // P(take) = 1 − held / (2 × target): the held count stays near it.
        let take = held.is_empty() || rng.usize(..2 * target_held) >= held.len();
        let (k, state, previous) = if take {
            let mut k = rng.usize(..keys.keys.len());
            while holder[k].is_some() {
                k = rng.usize(..keys.keys.len());
            }
            holder[k] = Some(pid_of(index));
            place[k] = Some(held.len());
            held.push(k as u16);
            (k, held_state(pid_of(index), at), Liveness::Free)
        } else {
            let k = usize::from(held.swap_remove(rng.usize(..held.len())));
            let slot = place[k].take().expect("a held key has a place");
            if let Some(moved) = held.get(slot) {
                place[usize::from(*moved)] = Some(slot);
            }
            holder[k] = None;
            (k, KeyState::bare(Liveness::Free), Liveness::Live)
        };
        let delta = Delta::Key {
            key: keys.keys[k].clone(),
            state,
            previous: Some(previous),
            at,
        };
        write(&mut journal, delta);
        changes.push(Change {
            at_ms,
            key: k as u16,
            take,
        });
        if changes.len().is_multiple_of(1024) {
            bytes = file_len(path);
        }
    }
    drop(journal);
    let took = started.elapsed();
    let end = base + Duration::from_millis(u64::from(at_ms));
    Generated {
        path: path.to_path_buf(),
        start: first_checkpoint_time(path),
        base,
        end,
        bytes: file_len(path),
        took,
        changes,
    }
}

/// The time of the journal's first checkpoint (its second line).
fn first_checkpoint_time(path: &Path) -> SystemTime {
    let mut reader = BufReader::new(File::open(path).expect("open the journal"));
    let mut line = String::new();
    for _ in 0..2 {
        line.clear();
        reader.read_line(&mut line).expect("read the journal");
    }
    let head: serde_json::Value = serde_json::from_str(&line).expect("a checkpoint head");
    let time = head["checkpoint"]["time"]
        .as_str()
        .unwrap_or_else(|| panic!("the second line is no checkpoint head: {line}"));
    humantime::parse_rfc3339(time).expect("an RFC 3339 time")
}

/// Drops the file's pages from the page cache (it was fsynced).
fn evict(path: &Path) {
    let file = File::open(path).expect("open the journal");
    // SAFETY: plain syscall on an open fd.
    let r = unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    assert_eq!(r, 0, "posix_fadvise(DONTNEED) failed");
}

fn replay_args<'a>(journal: &'a Path, at: &'a str) -> Vec<&'a std::ffi::OsStr> {
    vec![
        "replay".as_ref(),
        journal.as_os_str(),
        "--at".as_ref(),
        at.as_ref(),
        "--json".as_ref(),
    ]
}

/// One replay at `at`, timed through the intermediary.
fn replay_measured(bin: &Path, journal: &Path, at: SystemTime) -> CliRun {
    let at = rfc3339(at);
    let run = run_measured(bin, &replay_args(journal, &at));
    assert_eq!(run.status, 0, "replay --at {at} failed");
    run
}

/// A time to sample, and how the report names it.
struct Sample {
    label: String,
    at: SystemTime,
}

/// The times: `n` spread evenly from the first checkpoint to the last
/// line, and one just after the last line.
fn sample_times(generated: &Generated, n: usize) -> Vec<Sample> {
    let span = generated
        .end
        .duration_since(generated.start)
        .expect("the last line after the first checkpoint");
    let n = n.max(2);
    let mut times: Vec<Sample> = (0..n)
        .map(|k| Sample {
            label: match k {
                0 => format!("first checkpoint ({k}/{})", n - 1),
                _ if k == n - 1 => format!("last line ({k}/{})", n - 1),
                _ => format!("{k}/{} of the span", n - 1),
            },
            at: whole_ms(generated.start + span.mul_f64(k as f64 / (n - 1) as f64)),
        })
        .collect();
    times.push(Sample {
        label: "1 ms after the last line".into(),
        at: generated.end + Duration::from_millis(1),
    });
    times
}

/// The middle of the journal's span.
fn middle(generated: &Generated) -> SystemTime {
    let span = generated
        .end
        .duration_since(generated.start)
        .expect("the last line after the first checkpoint");
    whole_ms(generated.start + span / 2)
}

/// Checks `replay --at --json`'s held keys against the generator's fold
/// at `at` (panics on any difference); the number of held keys.
fn check_held(
    bin: &Path,
    generated: &Generated,
    keys: &KeySet,
    at: SystemTime,
    after_end: bool,
) -> usize {
    let stamp = rfc3339(at);
    let out = Command::new(bin)
        .args(replay_args(&generated.path, &stamp))
        .stdin(Stdio::null())
        .output()
        .expect("spawn locktop replay");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "replay --at {stamp}: {}: {stderr}",
        out.status
    );
    assert!(
        !stderr.contains("warning"),
        "replay --at {stamp} warned: {stderr}"
    );
    assert_eq!(
        stderr.contains("the recording ends at"),
        after_end,
        "replay --at {stamp}: the end note (stderr {stderr:?})"
    );
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("replay's JSON");
    let mut got: BTreeMap<(String, String), (String, Vec<u64>)> = BTreeMap::new();
    for key in doc["keys"].as_array().expect("a keys array") {
        let field = |name: &str| key[name].as_str().unwrap_or_default().to_string();
        let pids = key["holders"]
            .as_array()
            .map(|holders| holders.iter().filter_map(|h| h["pid"].as_u64()).collect())
            .unwrap_or_default();
        got.insert((field("kind"), field("name")), (field("liveness"), pids));
    }
    let want: BTreeMap<(String, String), (String, Vec<u64>)> = generated
        .held_at(keys, at)
        .into_iter()
        .map(|(k, pid)| {
            let key = &keys.keys[usize::from(k)];
            (
                (key.kind().as_str().to_string(), key.name().to_string()),
                ("live".to_string(), vec![u64::from(pid)]),
            )
        })
        .collect();
    if got != want {
        let missing: Vec<_> = want
            .iter()
            .filter(|(k, v)| got.get(*k) != Some(*v))
            .take(3)
            .collect();
        let extra: Vec<_> = got
            .iter()
            .filter(|(k, v)| want.get(*k) != Some(*v))
            .take(3)
            .collect();
        panic!(
            "replay --at {stamp}: {} held keys, the generator's fold {}; wanted but not so: {missing:?}; \
             listed but not wanted so: {extra:?}",
            got.len(),
            want.len()
        );
    }
    got.len()
}

fn section_replay(
    plan: &Plan,
    bin: &Path,
    baseline: Option<&Path>,
    tmp: &Path,
    targets: &mut Targets,
) -> Generated {
    let size = plan.keys;
    say(format!(
        "\n2. ANSWERING --at IN A {} JOURNAL  {} keys ({} tags + {} instance AIHs under {} parents), {} held at the \
         start by {} holders × {} keys; synthetic take/release changes 0-20 ms apart (a fresh holder per take: PID, \
         102-char command line, start, parent), held count kept near {}, written with the library's Journal \
         (default checkpoints) until the file reaches {}; then `replay J --at T --json > /dev/null` (a child, wall \
         time from spawn to exit) at {} times from the first checkpoint to the last line and 1 ms after it",
        mib(plan.journal_bytes),
        thousands(size.keys()),
        thousands(size.tags),
        thousands(size.instances),
        size.parents,
        thousands(plan.held()),
        plan.holders,
        plan.keys_per_holder,
        thousands(plan.held()),
        mib(plan.journal_bytes),
        plan.samples,
    ));
    let state = tmp.join("state-keys");
    let path = tmp.join("big.journal");
    let keys = KeySet::new(plan, &state);
    let generated = generate(plan, &keys, &state, &path);
    let t = Instant::now();
    File::open(&path)
        .and_then(|file| file.sync_all())
        .expect("fsync the journal");
    let synced = t.elapsed();
    let t = Instant::now();
    let tally = Tally::of_range(&path, 0, generated.bytes);
    let scanned = t.elapsed();
    assert_eq!(
        tally.count(LineKind::KeyChange),
        generated.changes.len(),
        "the journal's change lines are not the changes written"
    );
    assert_eq!(
        tally.timed(),
        generated.changes.len(),
        "lines the generator did not write"
    );
    assert_eq!(
        tally.count(LineKind::Unknown),
        0,
        "lines of an unknown kind"
    );
    let span = generated
        .end
        .duration_since(generated.start)
        .unwrap_or_default();
    say(format!(
        "   generated: {} ({} bytes), {} changes in {} = {:.1} MiB/s, {} changes/s; {} checkpoints ({}, {:.1}% of the \
         file); key change lines {:.0} B on average; journal time {} → {} ({:.1} h); fsync {}, read back and \
         counted in {}",
        mib(generated.bytes),
        thousands(generated.bytes as usize),
        thousands(generated.changes.len()),
        fmt_dur(generated.took),
        generated.bytes as f64 / f64::from(1u32 << 20) / generated.took.as_secs_f64(),
        thousands((generated.changes.len() as f64 / generated.took.as_secs_f64()) as usize),
        tally.checkpoints,
        mib(tally.bytes_of(LineKind::Checkpoint)),
        tally.bytes_of(LineKind::Checkpoint) as f64 * 100.0 / generated.bytes as f64,
        tally.bytes_of(LineKind::KeyChange) as f64 / tally.count(LineKind::KeyChange).max(1) as f64,
        rfc3339(generated.start),
        rfc3339(generated.end),
        span.as_secs_f64() / 3600.0,
        fmt_dur(synced),
        fmt_dur(scanned),
    ));

    let samples = sample_times(&generated, plan.samples);
    // One run first, not counted: the binary's pages, not the journal's.
    let _ = replay_measured(bin, &path, middle(&generated));
    let warm: Vec<Duration> = samples
        .iter()
        .map(|sample| replay_measured(bin, &path, sample.at).wall)
        .collect();
    let cold: Vec<Duration> = samples
        .iter()
        .map(|sample| {
            evict(&path);
            replay_measured(bin, &path, sample.at).wall
        })
        .collect();
    say(format!(
        "   {:<32} {:<26} {:>10} {:>12}",
        "T", "", "in cache", "J evicted"
    ));
    for (i, sample) in samples.iter().enumerate() {
        say(format!(
            "   {:<32} {:<26} {:>10} {:>12}",
            sample.label,
            rfc3339(sample.at),
            fmt_dur(warm[i]),
            fmt_dur(cold[i])
        ));
    }
    let worst = warm.iter().copied().max().unwrap_or_default();
    say(format!(
        "   in cache: median {}, max {}; J evicted first (posix_fadvise DONTNEED after the fsync): median {}, max {}",
        fmt_dur(median(&warm)),
        fmt_dur(worst),
        fmt_dur(median(&cold)),
        fmt_dur(cold.iter().copied().max().unwrap_or_default()),
    ));
    if let Some(baseline) = baseline {
        // Interleaved, this binary then the baseline at each time, so
        // that drift in the machine's load falls on both alike.
        // The best of 3 at each time: one wall time of a 50 ms process is
        // mostly the machine's noise.
        let _ = replay_measured(baseline, &path, middle(&generated));
        let (mut ours, mut theirs) = (Vec::new(), Vec::new());
        for sample in &samples {
            let (mut best_ours, mut best_theirs) = (Duration::MAX, Duration::MAX);
            for _ in 0..3 {
                best_ours = best_ours.min(replay_measured(bin, &path, sample.at).wall);
                best_theirs = best_theirs.min(replay_measured(baseline, &path, sample.at).wall);
            }
            ours.push(best_ours);
            theirs.push(best_theirs);
        }
        say(format!(
            "   baseline {} on the same journal, interleaved, best of 3 at each time, in cache: median {} vs this \
             binary's {} ({:.2}×), max {} vs {} ({:.2}×)",
            baseline.display(),
            fmt_dur(median(&theirs)),
            fmt_dur(median(&ours)),
            median(&ours).as_secs_f64() / median(&theirs).as_secs_f64().max(1e-9),
            fmt_dur(theirs.iter().copied().max().unwrap_or_default()),
            fmt_dur(ours.iter().copied().max().unwrap_or_default()),
            ours.iter().copied().max().unwrap_or_default().as_secs_f64()
                / theirs
                    .iter()
                    .copied()
                    .max()
                    .unwrap_or_default()
                    .as_secs_f64()
                    .max(1e-9),
        ));
    }
    let mut checked = 0;
    let mut held_sum = 0;
    for sample in &samples {
        // The generated journal has no end line (as a recorder killed
        // would leave it): its last line's millisecond is already past
        // its end (lines stamped with it may be lost), and said so.
        let after_end = sample.at >= generated.end;
        held_sum += check_held(bin, &generated, &keys, sample.at, after_end);
        checked += 1;
    }
    held_sum += check_held(bin, &generated, &keys, middle(&generated), false);
    checked += 1;
    say(format!(
        "   held keys (kind, name, holder PID) of `replay --at --json` = the generator's fold at all {checked} times \
         checked (the {} above and the middle), {:.0} held on average; no warning; the end note only after the end",
        samples.len(),
        held_sum as f64 / checked as f64
    ));
    targets.add(format!(
        "`replay --at T --json` in a {} journal ≤ {} at every T (J in the page cache, process start included): \
         max {} of {} (median {})  {}",
        mib(generated.bytes),
        fmt_dur(REPLAY_TARGET),
        fmt_dur(worst),
        warm.len(),
        fmt_dur(median(&warm)),
        verdict(worst <= REPLAY_TARGET)
    ));
    generated
}

// ===========================================================================
// 3. Peak RSS

fn section_rss(plan: &Plan, bin: &Path, tmp: &Path, generated: &Generated, targets: &mut Targets) {
    say(format!(
        "\n3. PEAK RSS  `replay J --at T --json` at the middle T (ru_maxrss through an intermediary) against \
         `locktop watch` (VmHWM {} after its `synced:` line) on a real state dir of the journal's keys, {} held by \
         real holders; {} run(s) each",
        fmt_dur(plan.settle),
        thousands(plan.held()),
        plan.rss_runs,
    ));
    let mid = middle(generated);
    let replay: Vec<u64> = (0..plan.rss_runs)
        .map(|_| replay_measured(bin, &generated.path, mid).maxrss_kib)
        .collect();
    let fixture = make_fixture(
        bin,
        &tmp.join("state-keys"),
        plan.keys,
        plan.holders,
        plan.keys_per_holder,
    );
    let watch: Vec<u64> = (0..plan.rss_runs)
        .map(|_| {
            let (synced, kib) = run_watch(bin, &fixture.state, plan.settle, plan.view_timeout);
            assert!(
                synced.is_some(),
                "watch never said `synced:` within {}",
                fmt_dur(plan.view_timeout)
            );
            kib
        })
        .collect();
    let row = |what: &str, v: &[u64]| {
        let mut sorted = v.to_vec();
        sorted.sort();
        let show = |kib: u64| format!("{:.1} MB", mb(kib));
        say(format!(
            "   {what:<52} min {:>9}  median {:>9}  max {:>9}",
            show(sorted[0]),
            show(sorted[(sorted.len() - 1) / 2]),
            show(sorted[sorted.len() - 1])
        ));
        sorted[(sorted.len() - 1) / 2]
    };
    let replay_mid = row(
        &format!(
            "replay --at {} --json ({})",
            rfc3339(mid),
            mib(generated.bytes)
        ),
        &replay,
    );
    let watch_mid = row(
        &format!(
            "watch ({} keys, {} held)",
            thousands(fixture.size.keys()),
            thousands(fixture.held.len())
        ),
        &watch,
    );
    let monitor: Vec<u64> = (0..plan.rss_runs)
        .map(|_| replay_monitor_rss(plan, bin, generated, mid))
        .collect();
    let live: Vec<u64> = (0..plan.rss_runs)
        .map(|_| live_monitor_rss(plan, bin, &fixture.state))
        .collect();
    let monitor_mid = row(
        "replay monitor (PTY: start, end, jump to the middle)",
        &monitor,
    );
    let live_mid = row("the live monitor on the same state dir (PTY)", &live);
    drop(fixture);
    targets.add(format!(
        "peak RSS, replay --at ≤ watch on the same {} keys: {:.1} MB vs {:.1} MB (medians of {})  {}",
        thousands(plan.keys.keys()),
        mb(replay_mid),
        mb(watch_mid),
        plan.rss_runs,
        verdict(replay_mid <= watch_mid)
    ));
    targets.add(format!(
        "peak RSS, the replay monitor ≤ watch on the same {} keys: {:.1} MB vs {:.1} MB (the live monitor: {:.1} MB)  {}",
        thousands(plan.keys.keys()),
        mb(monitor_mid),
        mb(watch_mid),
        mb(live_mid),
        verdict(monitor_mid <= watch_mid)
    ));
}

/// The monitor's terminal.
const PTY_ROWS: u16 = 50;
const PTY_COLS: u16 = 200;

/// Waits until `tui`'s screen satisfies `done`; panics with the screen
/// past `timeout`.
fn wait_screen(tui: &PtyTui, what: &str, timeout: Duration, done: impl Fn(&str) -> bool) {
    if !wait_until(timeout, || done(&tui.screen())) {
        panic!(
            "{what}: not within {}; screen:\n{}",
            fmt_dur(timeout),
            tui.screen()
        );
    }
}

/// `locktop replay J` on a pseudo-terminal: opened, sent to the end, then
/// to `mid` with `t`; its VmHWM after a settle.
fn replay_monitor_rss(plan: &Plan, bin: &Path, generated: &Generated, mid: SystemTime) -> u64 {
    let mut tui = PtyTui::spawn(
        bin,
        &["replay".as_ref(), generated.path.as_os_str()],
        PTY_ROWS,
        PTY_COLS,
    );
    wait_screen(&tui, "the replay's header", plan.view_timeout, |s| {
        s.contains(" REPLAY ")
    });
    tui.send(b"}");
    let end = rfc3339(generated.end);
    wait_screen(&tui, "the replay at its end", plan.view_timeout, |s| {
        s.lines().next().is_some_and(|l| l.contains(&end))
    });
    let mid = rfc3339(mid);
    tui.send(format!("t{mid}\r").as_bytes());
    wait_screen(&tui, "the replay at the middle", plan.view_timeout, |s| {
        s.lines().next().is_some_and(|l| l.contains(&mid))
    });
    std::thread::sleep(plan.settle);
    let kib = vm_hwm(tui.pid());
    tui.quit();
    kib
}

/// The live monitor on `state` until its first scan is done; its VmHWM
/// after a settle.
fn live_monitor_rss(plan: &Plan, bin: &Path, state: &Path) -> u64 {
    let tui = PtyTui::spawn(
        bin,
        &["--state-dir".as_ref(), state.as_os_str()],
        PTY_ROWS,
        PTY_COLS,
    );
    wait_screen(&tui, "the monitor's first view", plan.view_timeout, |s| {
        s.lines()
            .next()
            .is_some_and(|l| l.contains("watching") && !l.contains("so far"))
    });
    std::thread::sleep(plan.settle);
    let kib = vm_hwm(tui.pid());
    tui.quit();
    kib
}
