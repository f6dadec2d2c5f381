//! Section 7, the engine at the floor: `locktop watch --source kernel`
//! (the kernel's lock events, read by the engine's own thread: inotify
//! and the perf rings on its runtime) beside `inotifywait -m -r` — about
//! the least any watcher of the locks root can do — on the same churn in
//! the same run, and beside the same watches of an older binary
//! (`--baseline-bin PATH`).
//!
//! Each run, side by side, all synced and settled before the window
//! begins: `inotifywait -m -r <state>/locks`, `locktop watch --no-connect
//! --source kernel` and `--source inference` (each one's stdout drained),
//! and the baseline binary's two watches. The window is a churn of `locktop
//! hold` processes ([`churn`], as `scale`'s section 2). Per monitor over
//! it: CPU (the time on a CPU of every thread, in nanoseconds from
//! `/proc/PID/task/*/schedstat`: utime + stime count 10 ms ticks, a tenth
//! of `inotifywait`'s CPU over a window), per acquisition too; voluntary
//! context switches per acquisition (the sum over
//! `/proc/PID/task/*/status`: a process's own status counts its main
//! thread's alone), thread by thread; both sampled every 250 ms, so that
//! a thread that ends in the window still counts what it did until its
//! last sample; its threads. Each run has a
//! state dir of its own: the churn makes the same new directories in
//! every run. Then, with the kernel
//! watches alone: SIGKILL → the watch's `→ free` line for every key of
//! the victim (read from its stdout), beside a raw inotify reader's
//! IN_CLOSE_WRITE of the victim's files ([`RawInotify`]), quiet and
//! beside one busy loop per CPU ([`cpu_hogs`]).
//!
//! Without inotifywait its row says `skipped:` (its ratios are n/a);
//! where the kernel's events may not be read, the kernel watches' rows
//! do. Both panic instead under `LOCKTOP_REQUIRE_ALL=1`.

use std::collections::{BTreeMap, HashMap};
use std::io::Read;
use std::ops::Range;
use std::path::Path;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::RecvTimeoutError;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use locktop::locks::agent_tag_lock;

use super::killpath::{RawInotify, tag_keys};
use super::outside::{
    Churn, Inotifywait, ThreadCounts, churn, drain_lines, inotifywait_missing, inotifywait_version,
    spawn_locktop, stop, thread_counts,
};
use super::{
    Guarded, Targets, cpu_hogs, create_free_keys_touch, fmt_dur, group_args, instance_names,
    kernel_refused, percentile, say, spawn_holder_retrying, thousands, verdict,
};

/// The sizes of this section (full run or smoke).
pub struct Sizes {
    /// Runs; every figure is printed as min / median / max of them.
    pub runs: usize,
    pub churn: Churn,
    /// Quiet time once every monitor is synced, before the window.
    pub settle: Duration,
    /// Kills per kill row (quiet, and beside the hogs), per run.
    pub kills: usize,
    /// Tags each victim holds.
    pub keys_per_kill: usize,
    /// Random wait (ms) between "every watch shows the victim live" and
    /// the kill.
    pub dwell_ms: Range<u64>,
}

/// The kernel watch's CPU over the churn, at most this many times
/// inotifywait's.
const CPU_RATIO: f64 = 2.0;
/// The kernel watch's kill → free p99, at most raw inotify's + this.
const KILL_MARGIN: Duration = Duration::from_millis(1);
/// How long a monitor may take to sync.
const START_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a kill may take to be reported (a kill not reported counts
/// as this long).
const KILL_TIMEOUT: Duration = Duration::from_secs(5);
/// Tags the victims hold, in turns.
const KILL_TAGS: usize = 60;

/// The monitors, in the order printed (their index in [`LABELS`]).
const INOTIFYWAIT: usize = 0;
const KERNEL: usize = 1;
const INFERENCE: usize = 2;
const BASE_KERNEL: usize = 3;
const BASE_INFERENCE: usize = 4;
/// Not a monitor: the raw inotify reader of the kill rows.
const RAW: usize = 5;
const LABELS: [&str; 6] = [
    "inotifywait -m -r",
    "kernel watch",
    "inference watch",
    "kernel watch (baseline)",
    "inference watch (baseline)",
    "raw inotify (IN_CLOSE)",
];
/// The watches' `--source`, in the order of [`LABELS`] after inotifywait.
const SOURCES: [&str; 2] = ["kernel", "inference"];

/// What the section measures, per monitor and run.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Metric {
    /// Seconds of CPU over the window.
    Cpu,
    /// µs of CPU per acquisition.
    CpuPerAcquisition,
    /// Voluntary context switches per acquisition.
    SwitchesPerAcquisition,
    /// Threads at the window's end.
    Threads,
    /// Kill → free p99 (s), quiet.
    KillQuiet,
    /// Kill → free p99 (s), beside the hogs.
    KillHogs,
}

/// How a row of one metric compares with its reference row.
#[derive(Clone, Copy)]
enum Versus {
    Ratio,
    Difference,
}

/// One metric's rows in the table.
struct Group {
    metric: Metric,
    title: &'static str,
    show: fn(f64) -> String,
    /// The reference row (first), and how the others compare with it
    /// (`None`: they do not).
    reference: usize,
    versus: Option<Versus>,
    rows: &'static [usize],
}

const GROUPS: [Group; 6] = [
    Group {
        metric: Metric::Cpu,
        title: "CPU over the churn (time on a CPU, every thread)",
        show: seconds,
        reference: INOTIFYWAIT,
        versus: Some(Versus::Ratio),
        rows: &[INOTIFYWAIT, KERNEL, INFERENCE, BASE_KERNEL, BASE_INFERENCE],
    },
    Group {
        metric: Metric::CpuPerAcquisition,
        title: "CPU per acquisition",
        show: micros,
        reference: INOTIFYWAIT,
        versus: Some(Versus::Ratio),
        rows: &[INOTIFYWAIT, KERNEL, INFERENCE, BASE_KERNEL, BASE_INFERENCE],
    },
    Group {
        metric: Metric::SwitchesPerAcquisition,
        title: "voluntary context switches per acquisition (all threads)",
        show: hundredths,
        reference: INOTIFYWAIT,
        versus: Some(Versus::Ratio),
        rows: &[INOTIFYWAIT, KERNEL, INFERENCE, BASE_KERNEL, BASE_INFERENCE],
    },
    Group {
        metric: Metric::Threads,
        title: "threads (at the window's end)",
        show: whole,
        reference: INOTIFYWAIT,
        versus: None,
        rows: &[INOTIFYWAIT, KERNEL, INFERENCE, BASE_KERNEL, BASE_INFERENCE],
    },
    Group {
        metric: Metric::KillQuiet,
        title: "kill → free p99 (all the victim's keys), quiet",
        show: seconds,
        reference: RAW,
        versus: Some(Versus::Difference),
        rows: &[RAW, KERNEL, BASE_KERNEL],
    },
    Group {
        metric: Metric::KillHogs,
        title: "kill → free p99 (all the victim's keys), beside a busy loop per CPU",
        show: seconds,
        reference: RAW,
        versus: Some(Versus::Difference),
        rows: &[RAW, KERNEL, BASE_KERNEL],
    },
];

fn seconds(v: f64) -> String {
    fmt_dur(Duration::from_secs_f64(v.max(0.0)))
}

fn micros(v: f64) -> String {
    format!("{v:.0} µs")
}

fn hundredths(v: f64) -> String {
    format!("{v:.2}")
}

fn whole(v: f64) -> String {
    format!("{v:.0}")
}

/// Every figure of the section: (metric, row) → one value per run
/// (`None` where not measured).
struct Figures {
    runs: usize,
    values: BTreeMap<(Metric, usize), Vec<Option<f64>>>,
    /// Why a row was not measured.
    why: HashMap<usize, String>,
    /// The last run's voluntary context switches per acquisition, thread
    /// by thread, of each monitor.
    threads: HashMap<usize, String>,
}

impl Figures {
    fn set(&mut self, metric: Metric, row: usize, run: usize, value: f64) {
        self.values
            .entry((metric, row))
            .or_insert_with(|| vec![None; self.runs])[run] = Some(value);
    }

    fn get(&self, metric: Metric, row: usize) -> &[Option<f64>] {
        self.values
            .get(&(metric, row))
            .map_or(&[], |values| values.as_slice())
    }

    /// Row `row`'s value compared with row `than`'s, run by run.
    fn versus(&self, metric: Metric, row: usize, than: usize, versus: Versus) -> Vec<Option<f64>> {
        let (mine, theirs) = (self.get(metric, row), self.get(metric, than));
        mine.iter()
            .zip(theirs)
            .map(|(a, b)| match (a, b, versus) {
                (Some(a), Some(b), Versus::Ratio) if *b > 0.0 => Some(a / b),
                (Some(a), Some(b), Versus::Difference) => Some(a - b),
                _ => None,
            })
            .collect()
    }

    /// The median over runs of `versus` (what the targets judge).
    fn median_versus(&self, metric: Metric, row: usize, than: usize, v: Versus) -> Option<f64> {
        spread(&self.versus(metric, row, than, v)).map(|[_, median, _]| median)
    }
}

/// min / median / max of the values measured.
fn spread(values: &[Option<f64>]) -> Option<[f64; 3]> {
    let mut measured: Vec<f64> = values.iter().flatten().copied().collect();
    if measured.is_empty() {
        return None;
    }
    measured.sort_by(f64::total_cmp);
    Some([
        measured[0],
        measured[(measured.len() - 1) / 2],
        measured[measured.len() - 1],
    ])
}

/// A tag's change read from a watch's text line (tag, to free rather than
/// live, when read), and a condition variable rung at each.
type Seen = Arc<(Mutex<Vec<(String, bool, Instant)>>, Condvar)>;

/// `TIME tag FROM → TO NAME …`: (NAME, whether TO is free) for a tag's
/// change to live or free.
fn transition(line: &str) -> Option<(String, bool)> {
    let words: Vec<&str> = line.split_whitespace().take(6).collect();
    match words[..] {
        [_, "tag", _, "→", to @ ("live" | "free"), name] => {
            Some((name.to_string(), to == "free"))
        }
        _ => None,
    }
}

/// A synced `locktop watch --no-connect --source S` child; a thread reads
/// its stdout (text lines) as they come and notes its tags' changes.
struct Watch {
    process: Guarded,
    seen: Seen,
    lines: Arc<AtomicUsize>,
    reader: JoinHandle<()>,
    stderr: JoinHandle<String>,
}

impl Watch {
    /// Starts it and waits for its `synced:` line. `Err` with the
    /// `skipped:` row where `--source kernel` is refused here.
    fn start(bin: &Path, state: &Path, source: &str) -> Result<Self, String> {
        let args = ["watch", "--no-connect", "--source", source];
        let mut process = spawn_locktop(bin, state, &args, Stdio::piped());
        let stdout = process.child_mut().stdout.take().expect("piped");
        let mut stderr = process.child_mut().stderr.take().expect("piped");
        let seen = Seen::default();
        let lines = Arc::new(AtomicUsize::new(0));
        let sink = seen.clone();
        let (synced, reader) = drain_lines(stdout, lines.clone(), move |line| {
            if let Some((name, free)) = transition(line) {
                let (list, rung) = &*sink;
                list.lock()
                    .expect("seen")
                    .push((name, free, Instant::now()));
                rung.notify_all();
            }
            line.contains(" synced: ")
        });
        let stderr = std::thread::spawn(move || {
            let mut text = String::new();
            let _ = stderr.read_to_string(&mut text);
            text
        });
        match synced.recv_timeout(START_TIMEOUT) {
            Ok(_) => Ok(Self {
                process,
                seen,
                lines,
                reader,
                stderr,
            }),
            Err(RecvTimeoutError::Disconnected) => {
                let status = process.wait();
                let text = stderr.join().unwrap_or_default();
                let _ = reader.join();
                kernel_refused(&text).map_or_else(
                    || {
                        panic!(
                            "{} {args:?} exited ({status}) before it synced: {text}",
                            bin.display()
                        )
                    },
                    Err,
                )
            }
            Err(RecvTimeoutError::Timeout) => {
                panic!(
                    "{} {args:?} not synced after {START_TIMEOUT:?}",
                    bin.display()
                )
            }
        }
    }

    fn pid(&self) -> u32 {
        self.process.pid()
    }

    /// Forgets every change read so far.
    fn forget(&self) {
        self.seen.0.lock().expect("seen").clear();
    }

    /// When the last of `names` was first read turned free (or live),
    /// since the last [`Watch::forget`]; `None` at `deadline`.
    fn all(&self, names: &[String], free: bool, deadline: Instant) -> Option<Instant> {
        let (list, rung) = &*self.seen;
        let mut seen = list.lock().expect("seen");
        loop {
            let firsts: Option<Vec<Instant>> = names
                .iter()
                .map(|name| {
                    seen.iter()
                        .find(|(tag, to_free, _)| tag == name && *to_free == free)
                        .map(|(_, _, at)| *at)
                })
                .collect();
            if let Some(firsts) = firsts {
                return firsts.into_iter().max();
            }
            let left = deadline.checked_duration_since(Instant::now())?;
            seen = rung.wait_timeout(seen, left).expect("seen").0;
        }
    }

    /// SIGTERM (SIGKILL after 5 s), its readers joined.
    fn finish(mut self) {
        stop(&mut self.process);
        let _ = self.reader.join();
        let _ = self.stderr.join();
    }
}

/// One process's threads over a window, by TID.
#[derive(Default)]
struct Threads {
    /// At the window's start.
    start: HashMap<u32, ThreadCounts>,
    /// When last seen in the window (a thread that ended in it: its last
    /// sample).
    last: HashMap<u32, ThreadCounts>,
    /// Alive at the window's end.
    alive: usize,
}

/// How often [`ThreadWatch`] samples every thread.
const SAMPLE_EVERY: Duration = Duration::from_millis(250);

/// The threads of some processes over a window, sampled every
/// [`SAMPLE_EVERY`] on a thread of its own, so that a thread that ends in
/// the window (a runtime's blocking thread, say) keeps what it did until
/// its last sample.
struct ThreadWatch {
    pids: Vec<u32>,
    stop: Arc<AtomicBool>,
    sampler: JoinHandle<Vec<Threads>>,
}

impl ThreadWatch {
    fn start(pids: Vec<u32>) -> Self {
        let mut threads: Vec<Threads> = pids
            .iter()
            .map(|pid| {
                let now = thread_counts(*pid);
                Threads {
                    start: now.clone(),
                    alive: now.len(),
                    last: now,
                }
            })
            .collect();
        let stop = Arc::new(AtomicBool::new(false));
        let (flag, sampled) = (stop.clone(), pids.clone());
        let sampler = std::thread::spawn(move || {
            loop {
                std::thread::park_timeout(SAMPLE_EVERY);
                if flag.load(Ordering::Relaxed) {
                    return threads;
                }
                sample(&sampled, &mut threads);
            }
        });
        Self {
            pids,
            stop,
            sampler,
        }
    }

    /// The window's end: a last sample, taken now.
    fn finish(self) -> Vec<Threads> {
        self.stop.store(true, Ordering::Relaxed);
        self.sampler.thread().unpark();
        let mut threads = self.sampler.join().expect("the thread sampler");
        sample(&self.pids, &mut threads);
        threads
    }
}

fn sample(pids: &[u32], threads: &mut [Threads]) {
    for (pid, threads) in pids.iter().zip(threads) {
        let now = thread_counts(*pid);
        threads.alive = now.len();
        threads.last.extend(now);
    }
}

/// The section: `runs` runs, then one table of every figure.
pub fn section(
    bin: &Path,
    baseline: Option<&Path>,
    scratch: &Path,
    sizes: &Sizes,
    targets: &mut Targets,
) {
    let churning = &sizes.churn;
    say(format!(
        "\n7. THE ENGINE AT THE FLOOR  {} agents on disk (free instance keys under {} parents); per run, \
         side by side, each synced and settled ({}) before the window: `inotifywait -m -r <state>/locks`, \
         `locktop watch --no-connect --source kernel` and `--source inference` (stdout drained){}. Window: \
         a driver keeps ~{} `locktop hold` alive, spawning one and ending the oldest ~{} times a second \
         for {} (an acquisition = a hold that held: an instance key, every third also a tag). CPU = \
         the time on a CPU of every thread (/proc/PID/task/*/schedstat, ns); voluntary context switches = \
         the sum over /proc/PID/task/*/status (both sampled every {}: a thread that ended in the window \
         counts until its last sample). Then the kernel watches alone: {} kills quiet and {} beside a busy \
         loop per CPU, each victim a fresh `locktop hold --group` of {} tags, killed {}–{} ms after every \
         watch printed them live; latency = SIGKILL → the watch's last `→ free` line read from its stdout, \
         beside a raw inotify reader's IN_CLOSE_WRITE of the victim's files (p99 nearest-rank: the maximum \
         for n ≤ 100). Every figure: min / median / max of {} run{}; each ratio is taken run by run",
        thousands(churning.agents),
        churning.parents,
        fmt_dur(sizes.settle),
        baseline.map_or_else(String::new, |path| format!(
            ", and the same two watches of {}",
            path.display()
        )),
        churning.alive,
        churning.per_second,
        fmt_dur(churning.window),
        fmt_dur(SAMPLE_EVERY),
        sizes.kills,
        sizes.kills,
        sizes.keys_per_kill,
        sizes.dwell_ms.start,
        sizes.dwell_ms.end,
        sizes.runs,
        if sizes.runs == 1 { "" } else { "s" },
    ));
    if let Some(path) = baseline {
        assert!(
            path.is_file(),
            "--baseline-bin {}: no such file",
            path.display()
        );
    }
    let version = inotifywait_version();
    say(format!(
        "   each run on a state dir of its own (its churn creates the same new directories); {}",
        version.as_deref().unwrap_or("no inotifywait")
    ));
    let mut figures = Figures {
        runs: sizes.runs,
        values: BTreeMap::new(),
        why: HashMap::new(),
        threads: HashMap::new(),
    };
    if version.is_none() {
        figures.why.insert(INOTIFYWAIT, inotifywait_missing());
    }
    let bins: Vec<&Path> = std::iter::once(bin).chain(baseline).collect();
    for run in 0..sizes.runs {
        one_run(run, &bins, scratch, sizes, &mut figures);
    }
    report(&figures, baseline.is_some());
    add_targets(&figures, targets);
}

/// One run: every monitor over the churn, then the kernel watches' kills.
fn one_run(run: usize, bins: &[&Path], scratch: &Path, sizes: &Sizes, figures: &mut Figures) {
    let state = &scratch.join(format!("state-floor-{}", run + 1));
    let aihs = instance_names(sizes.churn.agents, sizes.churn.parents);
    let pool: Vec<String> = (0..KILL_TAGS)
        .map(|i| format!("floor-kill-{i:03}"))
        .collect();
    let created = create_free_keys_touch(state, &pool, &aihs);
    let inotifywait =
        (!figures.why.contains_key(&INOTIFYWAIT)).then(|| Inotifywait::spawn(&state.join("locks")));
    let mut watches: Vec<(usize, Watch)> = Vec::new();
    for (b, bin) in bins.iter().enumerate() {
        for (s, source) in SOURCES.iter().enumerate() {
            let row = KERNEL + 2 * b + s;
            match Watch::start(bin, state, source) {
                Ok(watch) => watches.push((row, watch)),
                Err(why) => {
                    figures.why.insert(row, why);
                }
            }
        }
    }
    if let Some(inotifywait) = &inotifywait {
        assert!(
            inotifywait.ready.recv_timeout(START_TIMEOUT).is_ok(),
            "inotifywait: no \"Watches established.\" within {START_TIMEOUT:?}"
        );
    }
    std::thread::sleep(sizes.settle);
    let mut pids: Vec<(usize, u32)> = inotifywait
        .iter()
        .map(|i| (INOTIFYWAIT, i.process.pid()))
        .collect();
    pids.extend(watches.iter().map(|(row, watch)| (*row, watch.pid())));
    let lines = || {
        let mut counts: Vec<usize> = inotifywait
            .iter()
            .map(|i| i.lines.load(Ordering::Relaxed))
            .collect();
        counts.extend(watches.iter().map(|(_, w)| w.lines.load(Ordering::Relaxed)));
        counts
    };
    let lines_before = lines();
    let threads = ThreadWatch::start(pids.iter().map(|(_, pid)| *pid).collect());
    let (stats, (threads, elapsed)) =
        churn(&sizes.churn, bins[0], state, &aihs, || threads.finish());
    let lines_read: Vec<String> = pids
        .iter()
        .zip(lines().iter().zip(&lines_before))
        .map(|((row, _), (after, before))| {
            format!("{} {}", LABELS[*row], thousands(after - before))
        })
        .collect();
    say(format!(
        "   run {}: {} keys written in {}; churn: {}; lines printed meanwhile: {}",
        run + 1,
        thousands(aihs.len() + pool.len()),
        fmt_dur(created),
        stats.describe(elapsed),
        lines_read.join(" · ")
    ));
    let acquisitions = stats.spawned.max(1) as f64;
    for ((row, _), threads) in pids.iter().zip(&threads) {
        // Thread by thread (one that began in the window from 0).
        let since_start = |tid: &u32, count: fn(&ThreadCounts) -> u64, now: &ThreadCounts| {
            count(now).saturating_sub(threads.start.get(tid).map_or(0, count))
        };
        let on_cpu_ns: u64 = threads
            .last
            .iter()
            .map(|(tid, now)| since_start(tid, |t| t.on_cpu_ns, now))
            .sum();
        let cpu = on_cpu_ns as f64 / 1e9;
        figures.set(Metric::Cpu, *row, run, cpu);
        figures.set(
            Metric::CpuPerAcquisition,
            *row,
            run,
            cpu * 1e6 / acquisitions,
        );
        let mut each: Vec<(&str, u64)> = threads
            .last
            .iter()
            .map(|(tid, now)| (now.name.as_str(), since_start(tid, |t| t.switches, now)))
            .collect();
        each.sort_by(|a, b| a.0.cmp(b.0).then(b.1.cmp(&a.1)));
        let total: u64 = each.iter().map(|(_, switches)| switches).sum();
        figures.set(
            Metric::SwitchesPerAcquisition,
            *row,
            run,
            total as f64 / acquisitions,
        );
        figures.set(Metric::Threads, *row, run, threads.alive as f64);
        let began = threads
            .last
            .keys()
            .filter(|tid| !threads.start.contains_key(tid))
            .count();
        let ended = threads.last.len() - threads.alive;
        let mut line: Vec<String> = each
            .iter()
            .map(|(name, switches)| format!("{name} {:.2}", *switches as f64 / acquisitions))
            .collect();
        if began + ended > 0 {
            line.push(format!(
                "(threads begun in the window: {began}, ended: {ended})"
            ));
        }
        figures.threads.insert(*row, line.join(", "));
    }
    // The kills: the kernel watches alone.
    if let Some(inotifywait) = inotifywait {
        inotifywait.finish();
    }
    let (kernels, others): (Vec<_>, Vec<_>) = watches
        .into_iter()
        .partition(|(row, _)| matches!(*row, KERNEL | BASE_KERNEL));
    others.into_iter().for_each(|(_, watch)| watch.finish());
    if !kernels.is_empty() {
        let raw = RawInotify::start(&agent_tag_lock(state, "any").0)
            .expect("a raw inotify reader of the tags dir");
        for (metric, hogs) in [(Metric::KillQuiet, false), (Metric::KillHogs, true)] {
            let hogs = hogs.then(cpu_hogs);
            let kills = kill_row(bins[0], state, &pool, sizes, &kernels, &raw);
            say(format!(
                "   run {}, kills {}: {}",
                run + 1,
                hogs.as_ref().map_or_else(
                    || "(quiet)".to_string(),
                    |hogs| format!("beside {} busy loops", hogs.len())
                ),
                kills.describe(&kernels)
            ));
            drop(hogs);
            if !kills.raw.is_empty() {
                figures.set(metric, RAW, run, percentile(&kills.raw, 99.0).as_secs_f64());
            }
            for ((row, _), times) in kernels.iter().zip(&kills.watches) {
                figures.set(metric, *row, run, percentile(times, 99.0).as_secs_f64());
            }
        }
    }
    kernels.into_iter().for_each(|(_, watch)| watch.finish());
}

/// One kill row's samples.
struct Kills {
    /// Raw inotify: every file of every victim key closed (kills it saw).
    raw: Vec<Duration>,
    /// Each kernel watch's last `→ free` line (a kill it did not report
    /// within [`KILL_TIMEOUT`] counts as that long).
    watches: Vec<Vec<Duration>>,
    /// Per watch: kills not reported within [`KILL_TIMEOUT`].
    missed: Vec<usize>,
    /// Kills whose victim not every watch showed live within 3 s.
    not_live: usize,
}

impl Kills {
    fn describe(&self, kernels: &[(usize, Watch)]) -> String {
        let mut parts = vec![format!(
            "raw inotify median {} p99 {} (n={})",
            fmt_dur(percentile(&self.raw, 50.0)),
            fmt_dur(percentile(&self.raw, 99.0)),
            self.raw.len()
        )];
        for (((row, _), times), missed) in kernels.iter().zip(&self.watches).zip(&self.missed) {
            parts.push(format!(
                "{} median {} p99 {} max {} (missed {missed})",
                LABELS[*row],
                fmt_dur(percentile(times, 50.0)),
                fmt_dur(percentile(times, 99.0)),
                fmt_dur(percentile(times, 100.0)),
            ));
        }
        if self.not_live > 0 {
            parts.push(format!("not seen live first: {}", self.not_live));
        }
        parts.join(" · ")
    }
}

/// `sizes.kills` kills, each of a fresh holder of `keys_per_kill` tags
/// once every kernel watch printed them live, timed to each watch's last
/// `→ free` line and to raw inotify's closes.
fn kill_row(
    bin: &Path,
    state: &Path,
    pool: &[String],
    sizes: &Sizes,
    kernels: &[(usize, Watch)],
    raw: &RawInotify,
) -> Kills {
    let mut kills = Kills {
        raw: Vec::new(),
        watches: vec![Vec::new(); kernels.len()],
        missed: vec![0; kernels.len()],
        not_live: 0,
    };
    for k in 0..sizes.kills {
        let names: Vec<String> = (0..sizes.keys_per_kill)
            .map(|i| pool[(k * sizes.keys_per_kill + i) % pool.len()].clone())
            .collect();
        for (_, watch) in kernels {
            watch.forget();
        }
        let (mut holder, _) = spawn_holder_retrying(bin, state, &group_args(&names));
        let live_by = Instant::now() + Duration::from_secs(3);
        if !kernels
            .iter()
            .all(|(_, watch)| watch.all(&names, false, live_by).is_some())
        {
            kills.not_live += 1;
        }
        std::thread::sleep(Duration::from_millis(fastrand::u64(sizes.dwell_ms.clone())));
        for (_, watch) in kernels {
            watch.forget();
        }
        raw.forget();
        let t0 = Instant::now();
        holder.process.sigkill();
        let deadline = t0 + KILL_TIMEOUT;
        for (i, (_, watch)) in kernels.iter().enumerate() {
            match watch.all(&names, true, deadline) {
                Some(at) => kills.watches[i].push(at.duration_since(t0)),
                None => {
                    kills.missed[i] += 1;
                    kills.watches[i].push(KILL_TIMEOUT);
                }
            }
        }
        kills
            .raw
            .extend(raw.wait_closed(&tag_keys(state, &names), t0, deadline));
        holder.process.wait();
    }
    kills
}

/// The table: per metric, a row per monitor (min / median / max), its
/// comparison with the reference row, and the current binary's with the
/// baseline's; then each monitor's context switches thread by thread.
fn report(figures: &Figures, with_baseline: bool) {
    let runs = figures.runs;
    say(format!(
        "\n   {:<28} {:>9} {:>9} {:>9}   {:<33} {}",
        format!("(min / median / max of {runs})"),
        "min",
        "median",
        "max",
        "vs the first row, run by run",
        if with_baseline {
            "current / baseline, run by run"
        } else {
            ""
        }
    ));
    for group in &GROUPS {
        say(format!("   {}", group.title));
        for &row in group.rows {
            if !with_baseline && matches!(row, BASE_KERNEL | BASE_INFERENCE) {
                continue;
            }
            let Some([min, median, max]) = spread(figures.get(group.metric, row)) else {
                let why = figures.why.get(&row).map_or("not measured", String::as_str);
                say(format!("     {:<28} {why}", LABELS[row]));
                continue;
            };
            let show = group.show;
            let versus = match group.versus {
                Some(versus) if row != group.reference => compare(
                    &figures.versus(group.metric, row, group.reference, versus),
                    versus,
                    show,
                ),
                _ => String::new(),
            };
            let current = match row {
                KERNEL => Some(BASE_KERNEL),
                INFERENCE => Some(BASE_INFERENCE),
                _ => None,
            };
            let against_baseline = match current {
                Some(base) if with_baseline => compare(
                    &figures.versus(group.metric, row, base, Versus::Ratio),
                    Versus::Ratio,
                    show,
                ),
                _ => String::new(),
            };
            say(format!(
                "     {:<28} {:>9} {:>9} {:>9}   {versus:<33} {against_baseline}",
                LABELS[row],
                show(min),
                show(median),
                show(max),
            ));
        }
    }
    say(
        "   voluntary context switches per acquisition, thread by thread (last run; by thread name):",
    );
    for row in [INOTIFYWAIT, KERNEL, INFERENCE, BASE_KERNEL, BASE_INFERENCE] {
        if let Some(line) = figures.threads.get(&row) {
            say(format!("     {:<28} {line}", LABELS[row]));
        }
    }
}

/// `1.10× 1.20× 1.31×`, or `+0.2 ms +0.3 ms +0.5 ms` (min, median, max
/// of the run-by-run comparison); `n/a` where no run compares.
fn compare(values: &[Option<f64>], versus: Versus, show: fn(f64) -> String) -> String {
    let Some(three) = spread(values) else {
        return "n/a".into();
    };
    three
        .iter()
        .map(|v| match versus {
            Versus::Ratio => format!("{v:.2}×"),
            Versus::Difference if *v < 0.0 => format!("−{}", show(-v)),
            Versus::Difference => format!("+{}", show(*v)),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The kernel watch's targets (medians over the runs).
fn add_targets(figures: &Figures, targets: &mut Targets) {
    let median =
        |metric: Metric, row: usize| spread(figures.get(metric, row)).map(|[_, median, _]| median);
    let cpu = figures.median_versus(Metric::Cpu, KERNEL, INOTIFYWAIT, Versus::Ratio);
    targets.add(format!(
        "(7) kernel watch CPU over the churn ≤ {CPU_RATIO:.0}× inotifywait -m -r's: {} (median of runs; \
         {} vs {})  {}",
        cpu.map_or_else(|| "n/a".into(), |r| format!("{r:.2}×")),
        median(Metric::Cpu, KERNEL).map_or_else(|| "n/a".into(), seconds),
        median(Metric::Cpu, INOTIFYWAIT).map_or_else(|| "n/a".into(), seconds),
        verdict(cpu.is_some_and(|r| r <= CPU_RATIO))
    ));
    let switches = figures.median_versus(
        Metric::SwitchesPerAcquisition,
        KERNEL,
        INOTIFYWAIT,
        Versus::Ratio,
    );
    targets.add(format!(
        "(7) kernel watch voluntary context switches per acquisition ≤ inotifywait's: {} vs {} ({}, \
         median of runs)  {}",
        median(Metric::SwitchesPerAcquisition, KERNEL).map_or_else(|| "n/a".into(), hundredths),
        median(Metric::SwitchesPerAcquisition, INOTIFYWAIT)
            .map_or_else(|| "n/a".into(), hundredths),
        switches.map_or_else(|| "n/a".into(), |r| format!("{r:.2}×")),
        verdict(switches.is_some_and(|r| r <= 1.0))
    ));
    for (metric, what) in [
        (Metric::KillQuiet, "quiet"),
        (Metric::KillHogs, "beside a busy loop per CPU"),
    ] {
        let over = figures.median_versus(metric, KERNEL, RAW, Versus::Difference);
        targets.add(format!(
            "(7) kernel watch kill → free p99 ≤ raw inotify's + {} ({what}): {} vs {} (medians of runs)  {}",
            fmt_dur(KILL_MARGIN),
            median(metric, KERNEL).map_or_else(|| "n/a".into(), seconds),
            median(metric, RAW).map_or_else(|| "n/a".into(), seconds),
            verdict(over.is_some_and(|d| d <= KILL_MARGIN.as_secs_f64()))
        ));
    }
}
