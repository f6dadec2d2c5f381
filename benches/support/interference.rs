//! Section 5's rows with real monitors: `locktop watch --json` children of
//! the binary under test (with each liveness source), against an agent's own access
//! pattern, in child processes of this bench (the SDK is reentrant
//! in-process, so an in-process agent would never meet a monitor's lock):
//!
//! - **tight loop**: ONE tag nobody else holds; `try_acquire`, hold 1 ms,
//!   release, try again at once (and the same with 3 ms pauses). Every
//!   refused try is a monitor's flock in the agent's way;
//! - **relocation**: a holder holds a tag; a second process waits for its
//!   release with the SDK's `wait_released` (as a daemon relocating the
//!   tag does) and, the moment it wakes, tries ONCE after 0–8 ms (spread
//!   over the tries). A refused try is interference;
//! - **flock latency**: what monitors cost a process that has nothing to
//!   do with them: it takes and drops a flock on its own file (outside
//!   the locks root, same filesystem) while a churn child acquires and
//!   releases tags under the locks root, so the monitors keep working.
//!   A `/proc/locks` read takes the kernel's file-lock rwsem for writing,
//!   so every flock call on the machine can wait behind it.
//!
//! Each row set runs with no monitor (the baseline, in the same run), then
//! with a lone `inotifywait -m -r` on the locks root (what merely hearing
//! the tree's events costs), then 1 and 3 monitors of each kind: the
//! kernel's lock events (`--source kernel`), and inference with the
//! lock-free and the passive probe. A kind the binary does not know (clap
//! refuses the flag), or the kernel source where this process may not
//! read the kernel's events, prints why instead of its rows.
//!
//! Throughout, a child of its own holds [`FOREIGN_FLOCKS`] flocks on files
//! outside the locks root (on the same filesystem): an ordinary host has
//! other locked files, and every `/proc/locks` read formats all of them
//! while every flock call on the machine waits.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::{ChildStdin, ChildStdout, Command, Stdio};
use std::sync::mpsc::RecvTimeoutError;
use std::time::{Duration, Instant};

use locktop::locks::agent_tag_lock;
use nix::sys::resource::{Resource, getrlimit, setrlimit};

use super::{
    Guarded, Targets, create_free_keys_sdk, fmt_dur, kernel_refused, percentile, ratio, say,
    thousands, verdict,
};

/// Argument that turns the bench binary into an agent child:
/// `--agent-child STATE TAG`, driven by commands on its stdin (see
/// [`agent_child`]).
pub const AGENT_CHILD: &str = "--agent-child";
/// Argument that turns the bench binary into the flock-latency child:
/// `--flock-latency-child FILE MILLIS PAUSE_MICROS` (see
/// [`flock_latency_child`]).
pub const FLOCK_LATENCY_CHILD: &str = "--flock-latency-child";

/// Argument that turns the bench binary into the spawner child:
/// `--interference-child STATE MILLIS HOLD_MICROS TAG…` (see
/// [`spawner_child`]).
pub const SPAWNER_CHILD: &str = "--interference-child";
/// The spawner child pauses a uniformly random 0..=this many µs between
/// two acquire attempts (so it does not phase-lock with the monitor).
pub const SPAWNER_PAUSE_MAX_US: u64 = 1000;
/// A kind of monitor: its label and the `locktop watch --json` flags
/// that choose it.
pub struct Kind {
    pub label: &'static str,
    pub flags: &'static [&'static str],
}

/// The monitors measured, in the order printed (the default first).
pub const KINDS: [Kind; 3] = [
    Kind {
        label: "kernel",
        flags: &["--source", "kernel"],
    },
    Kind {
        label: "lock-free",
        flags: &["--source", "inference", "--probe", "lock-free"],
    },
    Kind {
        label: "passive",
        flags: &["--source", "inference", "--probe", "passive"],
    },
];

/// Flocks held elsewhere on the machine throughout the rows.
pub const FOREIGN_FLOCKS: usize = 2_000;
/// Argument that turns the bench binary into the foreign-flocks child:
/// `--foreign-flocks-child DIR COUNT` (see [`foreign_flocks_child`]).
pub const FOREIGN_FLOCKS_CHILD: &str = "--foreign-flocks-child";
/// How long an agent holds the tag it took in the tight loop.
const HOLD: Duration = Duration::from_millis(1);
/// The pause between tries in the paced tight-loop variant.
const PACED: Duration = Duration::from_millis(3);
/// The relocation delays are spread over 0..=this.
const MAX_DELAY: Duration = Duration::from_millis(8);
/// How long the holder keeps the tag once the mover waits on it (the
/// mover is then blocked in `wait_released`, and the monitors have
/// probed the acquisition).
const HOLD_BEFORE_RELEASE: Duration = Duration::from_millis(3);
/// The pause between two flock pairs of the latency child: it measures
/// waits, not CPU contention, so it mostly sleeps.
const LATENCY_PAUSE: Duration = Duration::from_micros(100);
/// Tags the churn child acquires and releases during the latency rows.
const CHURN_TAGS: usize = 4;
/// How long the monitors may take to print `watching`.
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// The sizes of these rows (full run or smoke).
pub struct Sizes {
    /// Tries of each tight-loop row.
    pub tight_tries: usize,
    /// Tries of each relocation row.
    pub relocation_tries: usize,
    /// How long each flock-latency row samples.
    pub latency_window: Duration,
    /// Quiet time after the monitors said `watching`, before a row set.
    pub settle: Duration,
    /// How many monitors of each mode run at once, row by row (growing:
    /// each row adds monitors to those of the row before).
    pub monitor_counts: &'static [usize],
}

// ---------------------------------------------------------------------------
// The children

/// The agent child: `--agent-child STATE TAG`. Reads one command per line
/// on stdin and answers each with one line on stdout:
///
/// - `tight TRIES HOLD_MICROS PAUSE_MICROS`: `try_acquire` the tag, hold
///   it, release it, pause, TRIES times; answers
///   `{"tries":…,"refused":…}`;
/// - `hold`: `wait_acquire` (a monitor's momentary lock only delays it);
///   answers `held`;
/// - `release`: releases what `hold` took; answers `released`;
/// - `relocate DELAY_MICROS`: answers `waiting`, blocks in
///   `wait_released`, sleeps DELAY, tries ONCE (released at once if it
///   got it); answers `ok` or `refused`.
///
/// Exits at EOF on stdin.
pub fn agent_child(args: &[String]) {
    let state = PathBuf::from(&args[0]);
    let (dir, key) = agent_tag_lock(&state, &args[1]);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let micros =
        |word: Option<&str>| Duration::from_micros(word.expect("arg").parse().expect("µs"));
    runtime.block_on(async {
        let mut held = None;
        for line in std::io::stdin().lock().lines() {
            let line = line.expect("stdin");
            let mut words = line.split_whitespace();
            let reply = match words.next() {
                Some("tight") => {
                    let tries: u64 = words.next().expect("tries").parse().expect("tries");
                    let (hold, pause) = (micros(words.next()), micros(words.next()));
                    let mut refused = 0u64;
                    for _ in 0..tries {
                        match objectiveai_sdk::lockfile::try_acquire(&dir, &key, "").await {
                            Some(claim) => {
                                std::thread::sleep(hold);
                                claim.release().expect("release");
                            }
                            None => refused += 1,
                        }
                        if !pause.is_zero() {
                            std::thread::sleep(pause);
                        }
                    }
                    format!("{{\"tries\":{tries},\"refused\":{refused}}}")
                }
                Some("hold") => {
                    let claim = objectiveai_sdk::lockfile::wait_acquire(&dir, &key, "")
                        .await
                        .expect("wait_acquire");
                    held = Some(claim);
                    "held".into()
                }
                Some("release") => {
                    held.take()
                        .expect("release without hold")
                        .release()
                        .expect("release");
                    "released".into()
                }
                Some("relocate") => {
                    let delay = micros(words.next());
                    println!("waiting");
                    objectiveai_sdk::lockfile::wait_released(&dir, &key)
                        .await
                        .expect("wait_released");
                    std::thread::sleep(delay);
                    match objectiveai_sdk::lockfile::try_acquire(&dir, &key, "").await {
                        Some(claim) => {
                            claim.release().expect("release");
                            "ok".into()
                        }
                        None => "refused".into(),
                    }
                }
                other => panic!("agent child: unknown command {other:?}"),
            };
            println!("{reply}");
        }
    });
}

/// The flock-latency child: `--flock-latency-child FILE MILLIS
/// PAUSE_MICROS`. For MILLIS ms, times `flock(LOCK_EX)` + `flock(LOCK_UN)`
/// on FILE (its own; nobody else locks it), pausing between pairs, and
/// prints `{"pairs":…,"p50_ns":…,"p99_ns":…,"p999_ns":…,"max_ns":…}`.
pub fn flock_latency_child(args: &[String]) {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&args[0])
        .expect("latency file");
    let window = Duration::from_millis(args[1].parse().expect("millis"));
    let pause = Duration::from_micros(args[2].parse().expect("pause"));
    let fd = file.as_raw_fd();
    let mut samples = Vec::with_capacity(64 * 1024);
    let deadline = Instant::now() + window;
    while Instant::now() < deadline {
        let start = Instant::now();
        // SAFETY: `fd` is open for as long as `file` lives.
        let locked = unsafe { libc::flock(fd, libc::LOCK_EX) };
        // SAFETY: as above.
        let unlocked = unsafe { libc::flock(fd, libc::LOCK_UN) };
        samples.push(start.elapsed());
        assert!(locked == 0 && unlocked == 0, "flock on the latency file");
        std::thread::sleep(pause);
    }
    let ns = |p: f64| percentile(&samples, p).as_nanos();
    println!(
        "{{\"pairs\":{},\"p50_ns\":{},\"p99_ns\":{},\"p999_ns\":{},\"max_ns\":{}}}",
        samples.len(),
        ns(50.0),
        ns(99.0),
        ns(99.9),
        ns(100.0)
    );
}

/// An agent child, driven line by line (killed on drop).
struct Agent {
    process: Guarded,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Agent {
    fn spawn(state: &Path, tag: &str) -> Self {
        let mut child = Command::new(std::env::current_exe().expect("current_exe"))
            .arg(AGENT_CHILD)
            .arg(state)
            .arg(tag)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn an agent child");
        let stdin = child.stdin.take().expect("piped");
        let stdout = BufReader::new(child.stdout.take().expect("piped"));
        Self {
            process: Guarded::new(child),
            stdin,
            stdout,
        }
    }

    fn send(&mut self, command: &str) {
        writeln!(self.stdin, "{command}").expect("write to the agent child");
        self.stdin.flush().expect("flush the agent child");
    }

    fn reply(&mut self) -> String {
        let mut line = String::new();
        let read = self
            .stdout
            .read_line(&mut line)
            .expect("agent child stdout");
        assert!(
            read > 0,
            "agent child {} exited (see its stderr)",
            self.process.pid()
        );
        line.trim().to_string()
    }

    fn ask(&mut self, command: &str) -> String {
        self.send(command);
        self.reply()
    }
}

// ---------------------------------------------------------------------------
// The monitors

/// A `locktop watch --json --probe MODE` child that said `watching`; a
/// thread drains its stdout for as long as it runs (so it never blocks on
/// a full pipe). SIGKILLed and reaped on drop.
struct Monitor {
    process: Guarded,
}

impl Monitor {
    /// Its CPU time so far (user + system, from `/proc/<pid>/stat`).
    fn cpu(&self) -> Duration {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.process.pid()))
            .unwrap_or_default();
        // After the command's closing parenthesis: state is field 3, utime
        // and stime are fields 14 and 15.
        let fields: Vec<&str> = stat
            .rsplit_once(')')
            .map_or(Vec::new(), |(_, rest)| rest.split_whitespace().collect());
        let ticks: u64 = [11, 12]
            .iter()
            .filter_map(|&i| fields.get(i)?.parse::<u64>().ok())
            .sum();
        // SAFETY: sysconf has no preconditions.
        let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
        Duration::from_nanos(ticks * 1_000_000_000 / hz)
    }
}

/// Starts `count` monitors at once and waits until each said `watching`.
/// `Err(why)` when the binary does not know the kind's flags (clap's
/// `invalid value` or `unexpected argument`) or the kind cannot run here
/// (`--source kernel` refused: its one line); panics on any other failure.
fn start_monitors(
    bin: &Path,
    state: &Path,
    kind: &Kind,
    count: usize,
) -> Result<Vec<Monitor>, String> {
    let mode = kind.label;
    let mut pending = Vec::new();
    for _ in 0..count {
        let mut child = Command::new(bin)
            .arg("--state-dir")
            .arg(state)
            .args(["watch", "--json"])
            .args(kind.flags)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn locktop watch");
        let stdout = child.stdout.take().expect("piped");
        let stderr = child.stderr.take().expect("piped");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let watching = serde_json::from_str::<serde_json::Value>(&line)
                    .is_ok_and(|v| v["watcher"]["health"] == "watching");
                if watching {
                    let _ = tx.send(());
                }
            }
        });
        let errors = std::thread::spawn(move || {
            let mut stderr = stderr;
            let mut text = String::new();
            let _ = std::io::Read::read_to_string(&mut stderr, &mut text);
            text
        });
        pending.push((Guarded::new(child), rx, errors));
    }
    let deadline = Instant::now() + START_TIMEOUT;
    let mut monitors = Vec::new();
    for (mut process, watching, errors) in pending {
        match watching.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            Ok(()) => monitors.push(Monitor { process }),
            Err(RecvTimeoutError::Disconnected) => {
                let status = process.wait();
                let text = errors.join().unwrap_or_default();
                if text.contains("invalid value") || text.contains("unexpected argument") {
                    return Err(SKIPPED.into());
                }
                if let Some(line) = kernel_refused(&text) {
                    return Err(line);
                }
                panic!("locktop watch ({mode}) exited ({status}) before watching: {text}");
            }
            Err(RecvTimeoutError::Timeout) => {
                panic!("locktop watch ({mode}) not watching after {START_TIMEOUT:?}")
            }
        }
    }
    Ok(monitors)
}

/// `inotifywait -m -r -q` on the locks root, its output discarded: the
/// cost of merely hearing the tree's events. `None` (with a line) when
/// inotifywait is not installed.
fn start_inotifywait(state: &Path) -> Option<Monitor> {
    let child = Command::new("inotifywait")
        .args(["-m", "-r", "-q"])
        .arg(state.join("locks"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn();
    match child {
        Ok(child) => {
            // Its watches are set up once it printed nothing yet; give it
            // the time a recursive watch of a small tree takes.
            std::thread::sleep(Duration::from_millis(200));
            Some(Monitor {
                process: Guarded::new(child),
            })
        }
        Err(why) => {
            if std::env::var("LOCKTOP_REQUIRE_ALL").is_ok_and(|v| v == "1") {
                panic!("inotifywait: {why} (install inotify-tools), and LOCKTOP_REQUIRE_ALL=1");
            }
            say(format!(
                "      inotifywait: {why} — its row is skipped (install inotify-tools)"
            ));
            None
        }
    }
}

/// The foreign-flocks child: `--foreign-flocks-child DIR COUNT`. Creates
/// COUNT files in DIR, takes an exclusive flock on each, prints `held`,
/// and keeps them until its stdin closes.
pub fn foreign_flocks_child(args: &[String]) {
    let dir = PathBuf::from(&args[0]);
    let count: usize = args[1].parse().expect("count");
    // Its soft limit on open files raised to what it keeps open (a user's
    // is often 1,024); the section checked the hard limit allows it.
    let wanted = open_files_for(count);
    if let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE)
        && soft < wanted
    {
        setrlimit(Resource::RLIMIT_NOFILE, wanted.min(hard), hard).expect("raise RLIMIT_NOFILE");
    }
    std::fs::create_dir_all(&dir).expect("foreign flocks dir");
    let files: Vec<std::fs::File> = (0..count)
        .map(|i| {
            let file = std::fs::File::create(dir.join(format!("foreign-{i}.lock")))
                .expect("foreign flock file");
            // SAFETY: the fd is open for as long as `file` lives.
            let locked = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
            assert_eq!(locked, 0, "flock a foreign file");
            file
        })
        .collect();
    println!("held");
    let _ = std::io::stdout().flush();
    let mut sink = Vec::new();
    let _ = std::io::stdin().read_to_end(&mut sink);
    drop(files);
}

/// Open files the foreign-flocks child needs to hold `count` flocks.
fn open_files_for(count: usize) -> u64 {
    count as u64 + 64
}

/// The `skipped:` line of this section when the hard limit on open files
/// is too low for the foreign-flocks child ([`super::skipped`]).
fn open_files_refused(count: usize) -> Option<String> {
    let wanted = open_files_for(count);
    let (_, hard) = getrlimit(Resource::RLIMIT_NOFILE).ok()?;
    (hard < wanted).then(|| {
        super::skipped(format!(
            "   skipped: the real monitors' rows hold {} foreign flocks and need {wanted} open files; \
             the hard limit is {hard} (ulimit -Hn {wanted}, as root or in limits.conf)",
            thousands(count)
        ))
    })
}

/// The foreign-flocks child, running (its flocks held until dropped).
struct ForeignFlocks {
    _process: Guarded,
    _stdin: ChildStdin,
}

fn hold_foreign_flocks(dir: &Path, count: usize) -> ForeignFlocks {
    let mut child = Command::new(std::env::current_exe().expect("current_exe"))
        .arg(FOREIGN_FLOCKS_CHILD)
        .arg(dir)
        .arg(count.to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn the foreign-flocks child");
    let stdin = child.stdin.take().expect("piped");
    let mut stdout = BufReader::new(child.stdout.take().expect("piped"));
    let mut line = String::new();
    stdout.read_line(&mut line).expect("foreign-flocks child");
    assert_eq!(
        line.trim(),
        "held",
        "the foreign-flocks child said {line:?}"
    );
    ForeignFlocks {
        _process: Guarded::new(child),
        _stdin: stdin,
    }
}

// ---------------------------------------------------------------------------
// The rows

/// The tags of these rows (in a state dir of their own).
struct Tags {
    tight: String,
    relocation: String,
    churn: Vec<String>,
}

/// One tight-loop row: (tries, refused) without pause, then with
/// [`PACED`] pauses.
struct TightRow {
    tight: (u64, u64),
    paced: (u64, u64),
}

/// One relocation row: tries, and the delays of the refused ones.
struct RelocationRow {
    tries: usize,
    refused_at: Vec<Duration>,
}

/// One flock-latency row: the latency child's figures, the churn's
/// (tries, refused), and the monitors' CPU over the window as a share of
/// one core.
struct LatencyRow {
    pairs: u64,
    p50: Duration,
    p99: Duration,
    p999: Duration,
    max: Duration,
    churn: (u64, u64),
    monitor_cpu: f64,
}

/// What one configuration (no monitor, or N monitors of a kind) gave.
struct Rows {
    label: String,
    /// The kind's label (`None`: no locktop monitor) and how many run.
    kind: Option<(&'static str, usize)>,
    /// `Err`: why the configuration could not run here.
    measured: Result<(TightRow, RelocationRow, LatencyRow), String>,
}

fn tight_row(state: &Path, tags: &Tags, sizes: &Sizes) -> TightRow {
    let mut agent = Agent::spawn(state, &tags.tight);
    let mut run = |pause: Duration| {
        let reply = agent.ask(&format!(
            "tight {} {} {}",
            sizes.tight_tries,
            HOLD.as_micros(),
            pause.as_micros()
        ));
        let doc: serde_json::Value = serde_json::from_str(&reply).expect("tight JSON");
        (
            doc["tries"].as_u64().unwrap_or(0),
            doc["refused"].as_u64().unwrap_or(0),
        )
    };
    TightRow {
        tight: run(Duration::ZERO),
        paced: run(PACED),
    }
}

/// The delay of relocation try `i` of `tries`: spread evenly over
/// 0..=[`MAX_DELAY`].
fn delay(i: usize, tries: usize) -> Duration {
    if tries < 2 {
        return Duration::ZERO;
    }
    MAX_DELAY.mul_f64(i as f64 / (tries - 1) as f64)
}

fn relocation_row(state: &Path, tags: &Tags, sizes: &Sizes) -> RelocationRow {
    let mut holder = Agent::spawn(state, &tags.relocation);
    let mut mover = Agent::spawn(state, &tags.relocation);
    let mut refused_at = Vec::new();
    for i in 0..sizes.relocation_tries {
        assert_eq!(holder.ask("hold"), "held");
        let wait = delay(i, sizes.relocation_tries);
        assert_eq!(
            mover.ask(&format!("relocate {}", wait.as_micros())),
            "waiting"
        );
        std::thread::sleep(HOLD_BEFORE_RELEASE);
        assert_eq!(holder.ask("release"), "released");
        match mover.reply().as_str() {
            "ok" => {}
            "refused" => refused_at.push(wait),
            other => panic!("mover said {other:?}"),
        }
    }
    RelocationRow {
        tries: sizes.relocation_tries,
        refused_at,
    }
}

fn latency_row(
    state: &Path,
    scratch: &Path,
    tags: &Tags,
    sizes: &Sizes,
    monitors: &[Monitor],
) -> LatencyRow {
    let cpu = || monitors.iter().map(Monitor::cpu).sum::<Duration>();
    // The churn runs before, during and after the window.
    let lead =
        (sizes.latency_window / 10).clamp(Duration::from_millis(20), Duration::from_millis(200));
    let churn = start_spawner(state, sizes.latency_window + 2 * lead, HOLD, &tags.churn);
    std::thread::sleep(lead);
    let (cpu0, start) = (cpu(), Instant::now());
    let out = Command::new(std::env::current_exe().expect("current_exe"))
        .arg(FLOCK_LATENCY_CHILD)
        .arg(scratch.join("unrelated.flock"))
        .arg(sizes.latency_window.as_millis().to_string())
        .arg(LATENCY_PAUSE.as_micros().to_string())
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .expect("run the flock-latency child");
    let monitor_cpu = (cpu() - cpu0).as_secs_f64() / start.elapsed().as_secs_f64();
    let churn = finish_spawner(churn);
    let text = String::from_utf8_lossy(&out.stdout);
    let doc: serde_json::Value = serde_json::from_str(text.trim())
        .unwrap_or_else(|e| panic!("flock-latency child said {text:?}: {e}"));
    let ns = |field: &str| Duration::from_nanos(doc[field].as_u64().unwrap_or(0));
    LatencyRow {
        pairs: doc["pairs"].as_u64().unwrap_or(0),
        p50: ns("p50_ns"),
        p99: ns("p99_ns"),
        p999: ns("p999_ns"),
        max: ns("max_ns"),
        churn,
        monitor_cpu,
    }
}

/// The three rows of one configuration (the `monitors` that run, if any).
fn measure(
    state: &Path,
    scratch: &Path,
    tags: &Tags,
    sizes: &Sizes,
    monitors: &[Monitor],
) -> (TightRow, RelocationRow, LatencyRow) {
    (
        tight_row(state, tags, sizes),
        relocation_row(state, tags, sizes),
        latency_row(state, scratch, tags, sizes, monitors),
    )
}

/// The rows with real monitors (section 5, after the in-process rows).
/// `scratch` is a directory on the same filesystem as the state dirs; the
/// monitors watch `scratch/state-interference`, made here with only the
/// tags of these rows (so each monitor's start is quick; per-event probes
/// do not depend on how many other keys there are).
///
/// Blocks the thread it runs on (as the rest of section 5 does): call it
/// from the runtime's `block_on` thread, not from a worker.
pub async fn section(bin: &Path, scratch: &Path, sizes: &Sizes, targets: &mut Targets) {
    let state = scratch.join("state-interference");
    let tags = Tags {
        tight: "agent loop".into(),
        relocation: "relocated tag".into(),
        churn: (0..CHURN_TAGS).map(|i| format!("churn {i}")).collect(),
    };
    let mut all: Vec<String> = vec![tags.tight.clone(), tags.relocation.clone()];
    all.extend(tags.churn.iter().cloned());
    // The keys (and the locks root) exist before any monitor starts.
    create_free_keys_sdk(&state, &all, &[]).await;
    if let Some(line) = open_files_refused(FOREIGN_FLOCKS) {
        say(line);
        return;
    }
    let foreign = hold_foreign_flocks(&scratch.join("foreign-flocks"), FOREIGN_FLOCKS);

    say(format!(
        "   real monitors (`locktop watch --json` children of {}, each settled: its `watching` line, \
         then {}) on a state dir of their own ({} tags), while another process holds {} flocks outside \
         the locks root (same filesystem); the agents are child processes (SDK calls):",
        bin.display(),
        fmt_dur(sizes.settle),
        all.len(),
        thousands(FOREIGN_FLOCKS)
    ));
    let mut results = vec![Rows {
        label: "no monitor (baseline)".into(),
        kind: None,
        measured: Ok(measure(&state, scratch, &tags, sizes, &[])),
    }];
    let reference = start_inotifywait(&state);
    results.push(Rows {
        label: "inotifywait -m -r".into(),
        kind: Some(("inotifywait", 1)),
        measured: match &reference {
            Some(watcher) => Ok(measure(
                &state,
                scratch,
                &tags,
                sizes,
                std::slice::from_ref(watcher),
            )),
            None => Err("skipped: inotifywait is not installed (install inotify-tools)".into()),
        },
    });
    drop(reference);
    for kind in &KINDS {
        let mut monitors = Vec::new();
        for &count in sizes.monitor_counts {
            let label = format!(
                "{count} {} monitor{}",
                kind.label,
                if count == 1 { "" } else { "s" }
            );
            let measured = start_monitors(bin, &state, kind, count - monitors.len()).map(|more| {
                monitors.extend(more);
                std::thread::sleep(sizes.settle);
                measure(&state, scratch, &tags, sizes, &monitors)
            });
            results.push(Rows {
                label,
                kind: Some((kind.label, count)),
                measured,
            });
        }
        drop(monitors);
    }
    results.push(tracepoint_floor(bin, &state, scratch, &tags, sizes));
    drop(foreign);
    report(&results, sizes);
    add_targets(&results, sizes, targets);
}

/// The label of [`tracepoint_floor`]'s row.
const FLOOR: &str = "kernel, other filesystem";

/// The cost of the tracepoint itself: as many kernel monitors as the
/// last row, each watching an empty state dir on another filesystem
/// (tmpfs, `/dev/shm`), so the kernel's filter drops every flock the
/// rows make before any monitor sees it — and none of them has anything
/// to do. What this row costs the unrelated process is what any
/// `perf_event_open` monitor of the tracepoint costs it, however little
/// work it does; the rows above add locktop's own work to it.
fn tracepoint_floor(bin: &Path, state: &Path, scratch: &Path, tags: &Tags, sizes: &Sizes) -> Rows {
    use std::os::unix::fs::MetadataExt;
    let most = sizes.monitor_counts.iter().copied().max().unwrap_or(1);
    let label = format!("{most} {FLOOR}");
    let kind = Some((FLOOR, most));
    let elsewhere = tempfile::Builder::new()
        .prefix("locktop-bench-floor")
        .tempdir_in("/dev/shm");
    let device = |path: &Path| std::fs::metadata(path).map(|meta| meta.dev()).ok();
    let measured = match elsewhere {
        Ok(dir) if device(dir.path()).is_some() && device(dir.path()) != device(state) => {
            let other = dir.path().join("state");
            std::fs::create_dir_all(other.join("locks/agents/tags")).expect("the other state dir");
            start_monitors(bin, &other, &KINDS[0], most).map(|monitors| {
                std::thread::sleep(sizes.settle);
                measure(state, scratch, tags, sizes, &monitors)
            })
        }
        Ok(_) => Err("skipped: /dev/shm is on the state dir's filesystem".into()),
        Err(error) => Err(format!("skipped: no tmpfs at /dev/shm ({error})")),
    };
    Rows {
        label,
        kind,
        measured,
    }
}

/// The kernel source's targets: with the most monitors, no relocation
/// refused, an unrelated flock's p99 within 1.2× of no monitor, and one
/// monitor's CPU over the churn no more than a lone inotifywait's.
fn add_targets(results: &[Rows], sizes: &Sizes, targets: &mut Targets) {
    let most = sizes.monitor_counts.iter().copied().max().unwrap_or(1);
    let find = |kind: &str, count: usize| {
        results
            .iter()
            .find(|rows| rows.kind == Some((kind, count)))
            .and_then(|rows| rows.measured.as_ref().ok())
    };
    let base = results.first().and_then(|rows| rows.measured.as_ref().ok());
    let (Some((_, _, base_latency)), Some((_, relocation, latency))) = (base, find("kernel", most))
    else {
        targets.add(format!(
            "(5k) {most} kernel monitors: not measured here  MISS"
        ));
        return;
    };
    targets.add(format!(
        "(5k) relocations refused with {most} kernel monitors and {} foreign flocks = 0: {}/{}  {}",
        thousands(FOREIGN_FLOCKS),
        relocation.refused_at.len(),
        relocation.tries,
        verdict(relocation.refused_at.is_empty())
    ));
    let limit = base_latency.p99.mul_f64(1.2);
    let floor = match find(FLOOR, most) {
        Some((_, _, floor)) => format!(
            "; the tracepoint alone, monitors on another filesystem: {} ({})",
            fine(floor.p99),
            ratio(floor.p99, base_latency.p99)
        ),
        None => String::new(),
    };
    targets.add(format!(
        "(5k) an unrelated flock pair's p99 with {most} kernel monitors ≤ 1.2× none: {} vs {} ({}){floor}  {}",
        fine(latency.p99),
        fine(base_latency.p99),
        ratio(latency.p99, base_latency.p99),
        verdict(latency.p99 <= limit)
    ));
    match (find("kernel", 1), find("inotifywait", 1)) {
        (Some((_, _, kernel)), Some((_, _, inotifywait))) => targets.add(format!(
            "(5k) one kernel monitor's CPU over the churn ≤ inotifywait -m -r's: {:.1}% vs {:.1}% of a core  {}",
            kernel.monitor_cpu * 100.0,
            inotifywait.monitor_cpu * 100.0,
            verdict(kernel.monitor_cpu <= inotifywait.monitor_cpu)
        )),
        _ => targets.add("(5k) kernel monitor CPU vs inotifywait: not measured here  MISS".into()),
    }
}

const SKIPPED: &str = "skipped: not supported by this binary";

/// `  13/300 (4.3%)`.
fn refused(tries: u64, refused: u64) -> String {
    format!(
        "{:>4}/{:<5} ({:.1}%)",
        thousands(refused as usize),
        thousands(tries as usize),
        refused as f64 * 100.0 / tries.max(1) as f64
    )
}

/// `1.23 µs` below 10 µs (a flock pair is about 1 µs), else [`fmt_dur`].
fn fine(d: Duration) -> String {
    if d < Duration::from_micros(10) {
        format!("{:.2} µs", d.as_secs_f64() * 1e6)
    } else {
        fmt_dur(d)
    }
}

fn report(results: &[Rows], sizes: &Sizes) {
    let tries = sizes.tight_tries;
    say(format!(
        "   a. tight loop on one tag nobody else holds: try_acquire, hold {}, release, again at once, {} tries \
         | the same with {} pauses — refused/tries",
        fmt_dur(HOLD),
        thousands(tries),
        fmt_dur(PACED)
    ));
    for rows in results {
        match &rows.measured {
            Ok((tight, _, _)) => say(format!(
                "      {:<26} refused {}   with {} pauses: refused {}",
                rows.label,
                refused(tight.tight.0, tight.tight.1),
                fmt_dur(PACED),
                refused(tight.paced.0, tight.paced.1)
            )),
            Err(why) => say(format!("      {:<26} {why}", rows.label)),
        }
    }
    say(format!(
        "   b. relocation: a holder releases a tag; a waiter blocked in wait_released wakes and tries ONCE after \
         a delay spread over 0–{} ({} tries) — refused/tries, and the delays of the refused tries",
        fmt_dur(MAX_DELAY),
        thousands(sizes.relocation_tries)
    ));
    for rows in results {
        match &rows.measured {
            Ok((_, relocation, _)) => {
                let at: Vec<String> = relocation
                    .refused_at
                    .iter()
                    .take(12)
                    .map(|d| format!("{:.1}", d.as_secs_f64() * 1e3))
                    .collect();
                let more = relocation.refused_at.len().saturating_sub(at.len());
                say(format!(
                    "      {:<26} refused {}{}",
                    rows.label,
                    refused(relocation.tries as u64, relocation.refused_at.len() as u64),
                    if at.is_empty() {
                        String::new()
                    } else {
                        format!(
                            "   at {} ms{}",
                            at.join(", "),
                            if more > 0 {
                                format!(" (+{more})")
                            } else {
                                String::new()
                            }
                        )
                    }
                ));
            }
            Err(why) => say(format!("      {:<26} {why}", rows.label)),
        }
    }
    say(format!(
        "   c. what monitors cost an unrelated process: flock(LOCK_EX)+flock(LOCK_UN) on its own file (outside the \
         locks root, same filesystem), {} apart, for {}, while a churn child acquires/releases {} tags (hold {}, \
         0–1 ms pauses) under the locks root — per pair, and the ratio to the baseline; the monitors' CPU over the \
         window",
        fmt_dur(LATENCY_PAUSE),
        fmt_dur(sizes.latency_window),
        CHURN_TAGS,
        fmt_dur(HOLD)
    ));
    let base = results
        .first()
        .and_then(|rows| rows.measured.as_ref().ok())
        .map(|(_, _, latency)| latency);
    for (i, rows) in results.iter().enumerate() {
        match &rows.measured {
            Ok((_, _, latency)) => {
                // `1.49 ms (539×)`, the ratio column blank on the baseline.
                let cell = |pick: fn(&LatencyRow) -> Duration| {
                    let vs = match base {
                        Some(base) if i > 0 => format!("({})", ratio(pick(latency), pick(base))),
                        _ => String::new(),
                    };
                    format!("{:>8} {vs:<8}", fine(pick(latency)))
                };
                say(format!(
                    "      {:<26} pairs {:>7}  p50 {}  p99 {}  p99.9 {}  max {}  churn refused {}  monitors' CPU {:>3.0}% of a core",
                    rows.label,
                    thousands(latency.pairs as usize),
                    cell(|l| l.p50),
                    cell(|l| l.p99),
                    cell(|l| l.p999),
                    cell(|l| l.max),
                    refused(latency.churn.0, latency.churn.1),
                    latency.monitor_cpu * 100.0
                ));
            }
            Err(why) => say(format!("      {:<26} {why}", rows.label)),
        }
    }
}

/// The spawner child: `--interference-child STATE MILLIS TAG…`. Loops
/// `objectiveai_sdk::lockfile::try_acquire` + release over the tags (which
/// nobody holds) for MILLIS ms, then prints `{"attempts":…,"failures":…}`.
/// A separate process: the SDK is reentrant in-process, so an in-process
/// spawner would never see the monitor's probe.
pub fn spawner_child(args: &[String]) {
    let state = PathBuf::from(&args[0]);
    let millis: u64 = args[1].parse().expect("millis");
    let hold = Duration::from_micros(args[2].parse().expect("hold micros"));
    let coords: Vec<(PathBuf, String)> = args[3..]
        .iter()
        .map(|tag| agent_tag_lock(&state, tag))
        .collect();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let (attempts, failures) = runtime.block_on(async {
        let deadline = Instant::now() + Duration::from_millis(millis);
        let (mut attempts, mut failures) = (0u64, 0u64);
        while Instant::now() < deadline {
            for (dir, key) in &coords {
                attempts += 1;
                match objectiveai_sdk::lockfile::try_acquire(dir, key, "").await {
                    Some(claim) => {
                        if !hold.is_zero() {
                            std::thread::sleep(hold);
                        }
                        claim.release().expect("release")
                    }
                    None => failures += 1,
                }
                std::thread::sleep(Duration::from_micros(fastrand::u64(
                    0..=SPAWNER_PAUSE_MAX_US,
                )));
            }
        }
        (attempts, failures)
    });
    println!("{{\"attempts\":{attempts},\"failures\":{failures}}}");
}

/// A running spawner child ([`start_spawner`]).
pub struct Spawner {
    pub process: Guarded,
    pub stdout: std::process::ChildStdout,
}

/// A spawner child that holds each acquired tag for `hold` before it
/// releases it (zero: releases at once).
pub fn start_spawner(state: &Path, duration: Duration, hold: Duration, tags: &[String]) -> Spawner {
    let exe = std::env::current_exe().expect("current_exe");
    let mut child = Command::new(exe)
        .arg(SPAWNER_CHILD)
        .arg(state)
        .arg(duration.as_millis().to_string())
        .arg(hold.as_micros().to_string())
        .args(tags)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn the spawner child");
    let stdout = child.stdout.take().expect("piped");
    Spawner {
        process: Guarded::new(child),
        stdout,
    }
}

/// Waits for the spawner (blocking) and returns (attempts, failures).
pub fn finish_spawner(mut spawner: Spawner) -> (u64, u64) {
    let mut text = String::new();
    spawner
        .stdout
        .read_to_string(&mut text)
        .expect("spawner output");
    if !spawner.process.wait().success() {
        panic!("spawner child failed: {text}");
    }
    let doc: serde_json::Value = serde_json::from_str(text.trim()).expect("spawner JSON");
    (
        doc["attempts"].as_u64().unwrap_or(0),
        doc["failures"].as_u64().unwrap_or(0),
    )
}
