//! `cargo bench --bench attach`: what monitors attached to `serve`
//! (`--connect`) cost the host, against monitors with an engine of their
//! own (`cargo test` runs a smoke pass). One `serve --socket` (the
//! kernel's lock events where this user may read them) runs throughout.
//!
//! 1. An unrelated `flock` pair (`LOCK_EX` + `LOCK_UN` on a file of the
//!    state dir's filesystem that no monitor watches), p99, in turns:
//!    the service alone; the service and three attached `watch`es; the
//!    service and three `watch --no-connect` (a tap each, where the
//!    kernel source runs). Printed: min / median / max of the rounds'
//!    p99, and each row's ratio to the service alone (target for the
//!    attached row: ≤ 1.05×).
//! 2. SIGKILL of a holder → its `free` line: on the service's own
//!    `/events` and in an attached `watch`, p50 / p99 (target: the
//!    attached watch ≤ the service's own + 2 ms at p99).
//! 3. CPU under churn (tags taken and released through the SDK, in
//!    process): one attached `watch` and one `watch --no-connect`, side
//!    by side on the same churn, on-CPU time from `/proc/PID/schedstat`;
//!    min / median / max over the rounds and the ratio (target: attached
//!    ≤ private).
//! 4. The service killed and started again with three attached `watch`es,
//!    a key released while it was gone: from the moment its socket
//!    accepts again to each watch's `free` line for that key (the
//!    service's first scan, the watches' reconnect and the fresh
//!    checkpoint), the slowest watch of each round; min / median / max
//!    (target: ≤ 1 s — meanwhile each says `reconnecting`, not live).

use std::io::{BufRead, BufReader, Read, Write};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use locktop::locks::agent_tag_lock;

/// How a run is sized.
struct Plan {
    name: &'static str,
    /// Rounds of row 1 (each: every condition once, in turns).
    rounds: usize,
    /// How long one condition's flock pairs are timed.
    window: Duration,
    /// Kills of row 2.
    kills: usize,
    /// Rounds of row 3, and how long each churns.
    churn_rounds: usize,
    churn: Duration,
    /// Rounds of row 4.
    back_rounds: usize,
}

impl Plan {
    fn full() -> Self {
        Self {
            name: "full",
            rounds: 5,
            window: Duration::from_secs(3),
            kills: 40,
            churn_rounds: 3,
            churn: Duration::from_secs(5),
            back_rounds: 5,
        }
    }

    fn smoke() -> Self {
        Self {
            name: "SMOKE",
            rounds: 1,
            window: Duration::from_millis(400),
            kills: 3,
            churn_rounds: 1,
            churn: Duration::from_millis(800),
            back_rounds: 1,
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let full = args.iter().any(|a| a == "--bench") && !args.iter().any(|a| a == "--smoke");
    let plan = if full { Plan::full() } else { Plan::smoke() };
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    println!(
        "locktop attach bench ({}); {}; load at start: {}",
        plan.name,
        if root {
            "root: the service and the private watches read the kernel's lock events"
        } else {
            "not root: the service and the private watches infer (no tap to compare)"
        },
        loadavg()
    );
    let tmp = tempfile::Builder::new()
        .prefix("locktop-attach-bench-")
        .tempdir()
        .expect("tempdir");
    let state = tmp.path().join("state");
    std::fs::create_dir_all(state.join("locks").join("agents").join("tags")).expect("mkdir");
    let socket = tmp.path().join("locktop.sock");
    let service = Service::start(&state, &socket);
    let target = format!("unix:{}", socket.display());
    flock_tax(&plan, tmp.path(), &state, &target);
    kill_to_free(&plan, &state, &service, &target);
    cpu_under_churn(&plan, &state, &target);
    back_to_true(&plan, &state, service, &target);
}

/// Row 4: the service killed and started again; how long after it
/// accepts again the slowest of three attached watches tells a key
/// released meanwhile free.
fn back_to_true(plan: &Plan, state: &Path, mut service: Service, target: &str) {
    let watches: Vec<Watch> = (0..3)
        .map(|_| Watch::start(state, &["--connect", target]))
        .collect();
    let mut slowest = Vec::new();
    for round in 0..plan.back_rounds {
        let tag = format!("back-{round}");
        let mut holder = hold(state, &tag);
        for watch in &watches {
            wait_for(&watch.lines, &tag, "\"to\":\"live\"");
        }
        let socket = service.socket.clone();
        drop(service);
        for watch in &watches {
            wait_for_line(&watch.lines, "reconnecting");
        }
        let _ = holder.kill();
        let _ = holder.wait();
        let (again, back) = Service::listening(state, &socket);
        service = again;
        let told: Vec<Instant> = watches
            .iter()
            .map(|watch| wait_for(&watch.lines, &tag, "\"to\":\"free\""))
            .collect();
        let last = told.into_iter().max().expect("three watches");
        slowest.push(last.saturating_duration_since(back));
    }
    let (min, med, max) = spread(&slowest);
    println!(
        "\n4. The service back → a key released meanwhile free in the slowest of 3 attached watches ({} rounds):",
        plan.back_rounds
    );
    println!(
        "   min {:>7.1} ms  median {:>7.1} ms  max {:>7.1} ms; target ≤ 1 s: {}",
        millis(min),
        millis(med),
        millis(max),
        verdict(max <= Duration::from_secs(1))
    );
}

/// Waits (20 s at most) for a line containing `what`.
fn wait_for_line(lines: &mpsc::Receiver<(Instant, String)>, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let (_, line) = lines
            .recv_timeout(left)
            .unwrap_or_else(|_| panic!("no line with {what}"));
        if line.contains(what) {
            return;
        }
    }
}

/// Row 1: the p99 of an unrelated flock pair beside the service alone,
/// beside three attached watches, beside three private ones.
fn flock_tax(plan: &Plan, tmp: &Path, state: &Path, target: &str) {
    let file = tmp.join("unrelated.lock");
    let conditions: [(&str, Option<&[&str]>); 3] = [
        ("service alone", None),
        ("service + 3 attached watches", Some(&["--connect", target])),
        ("service + 3 private watches", Some(&["--no-connect"])),
    ];
    let mut p99s: Vec<Vec<Duration>> = vec![Vec::new(); conditions.len()];
    for _ in 0..plan.rounds {
        for (i, (_, watch_args)) in conditions.iter().enumerate() {
            let watches: Vec<Watch> = watch_args
                .map(|args| (0..3).map(|_| Watch::start(state, args)).collect())
                .unwrap_or_default();
            let mut samples = flock_pairs(&file, plan.window);
            samples.sort_unstable();
            p99s[i].push(percentile(&samples, 99.0));
            drop(watches);
        }
    }
    println!(
        "\n1. an unrelated flock pair's p99 ({} rounds of {:?} each):",
        plan.rounds, plan.window
    );
    let alone = median(&p99s[0]);
    for (i, (label, _)) in conditions.iter().enumerate() {
        let (min, med, max) = spread(&p99s[i]);
        println!(
            "   {label:<32} p99 min {:>7.1} µs  median {:>7.1} µs  max {:>7.1} µs  ({:.2}× alone)",
            micros(min),
            micros(med),
            micros(max),
            med.as_secs_f64() / alone.as_secs_f64().max(1e-9)
        );
    }
    let attached = median(&p99s[1]).as_secs_f64() / alone.as_secs_f64().max(1e-9);
    println!(
        "   target: three attached watches ≤ 1.05× the service alone: {}",
        verdict(attached <= 1.05)
    );
}

/// Row 2: SIGKILL of a holder → `free` on the service's `/events` and in
/// an attached `watch`.
fn kill_to_free(plan: &Plan, state: &Path, service: &Service, target: &str) {
    let watch = Watch::start(state, &["--connect", target]);
    let events = service.events();
    let mut own = Vec::new();
    let mut attached = Vec::new();
    for i in 0..plan.kills {
        let tag = format!("kill-{i}");
        let mut holder = hold(state, &tag);
        wait_for(&watch.lines, &tag, "\"to\":\"live\"");
        wait_for(&events, &tag, "\"to\":\"live\"");
        let killed = Instant::now();
        let _ = holder.kill();
        let _ = holder.wait();
        let at_service = wait_for(&events, &tag, "\"to\":\"free\"");
        let at_watch = wait_for(&watch.lines, &tag, "\"to\":\"free\"");
        own.push(at_service.saturating_duration_since(killed));
        attached.push(at_watch.saturating_duration_since(killed));
    }
    own.sort_unstable();
    attached.sort_unstable();
    println!(
        "\n2. SIGKILL of a holder → its free line ({} kills):",
        plan.kills
    );
    for (label, samples) in [
        ("the service's /events", &own),
        ("an attached watch", &attached),
    ] {
        println!(
            "   {label:<32} p50 {:>7.2} ms  p99 {:>7.2} ms",
            millis(percentile(samples, 50.0)),
            millis(percentile(samples, 99.0))
        );
    }
    let behind = millis(percentile(&attached, 99.0)) - millis(percentile(&own, 99.0));
    println!(
        "   attached − service at p99: {behind:+.2} ms; target ≤ +2 ms: {}",
        verdict(behind <= 2.0)
    );
}

/// Row 3: on-CPU time of an attached watch and a private one, side by
/// side, while tags are taken and released through the SDK.
fn cpu_under_churn(plan: &Plan, state: &Path, target: &str) {
    let mut attached = Vec::new();
    let mut private = Vec::new();
    let mut acquisitions = 0;
    // Lines each printed: the same changes, or the CPU compares nothing.
    let mut lines = (0, 0);
    for _ in 0..plan.churn_rounds {
        let a = Watch::start(state, &["--connect", target]);
        let p = Watch::start(state, &["--no-connect"]);
        std::thread::sleep(Duration::from_millis(300));
        let _ = (a.lines.try_iter().count(), p.lines.try_iter().count());
        let (a0, p0) = (on_cpu(a.pid()), on_cpu(p.pid()));
        acquisitions += churn(state, plan.churn);
        // Let both drain what the churn's end sent.
        std::thread::sleep(Duration::from_millis(300));
        attached.push(on_cpu(a.pid()).saturating_sub(a0));
        private.push(on_cpu(p.pid()).saturating_sub(p0));
        lines.0 += a.lines.try_iter().count();
        lines.1 += p.lines.try_iter().count();
    }
    println!(
        "\n3. CPU under churn ({} acquisitions in {} rounds of {:?}):",
        acquisitions, plan.churn_rounds, plan.churn
    );
    for (label, samples, printed) in [
        ("an attached watch", &attached, lines.0),
        ("a private watch", &private, lines.1),
    ] {
        let (min, med, max) = spread(samples);
        println!(
            "   {label:<32} on CPU min {:>7.1} ms  median {:>7.1} ms  max {:>7.1} ms  ({printed} lines printed)",
            millis(min),
            millis(med),
            millis(max)
        );
    }
    let ratio = median(&attached).as_secs_f64() / median(&private).as_secs_f64().max(1e-9);
    println!(
        "   attached / private (medians): {ratio:.3}×; target ≤ 1×: {}",
        verdict(ratio <= 1.0)
    );
}

/// Takes and releases 8 tags through the SDK for `window`; how many
/// acquisitions.
fn churn(state: &Path, window: Duration) -> u64 {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let coords: Vec<_> = (0..8)
        .map(|i| agent_tag_lock(state, &format!("churn-{i}")))
        .collect();
    runtime.block_on(async {
        let deadline = Instant::now() + window;
        let mut taken = 0;
        while Instant::now() < deadline {
            for (dir, key) in &coords {
                if let Some(claim) = objectiveai_sdk::lockfile::try_acquire(dir, key, "").await {
                    taken += 1;
                    std::thread::sleep(Duration::from_millis(2));
                    claim.release().expect("release");
                }
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        taken
    })
}

/// Times flock pairs on `file` for `window`, a 200 µs pause between two.
fn flock_pairs(file: &Path, window: Duration) -> Vec<Duration> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(file)
        .expect("the unrelated file");
    let fd = file.as_raw_fd();
    let mut samples = Vec::with_capacity(16 * 1024);
    let deadline = Instant::now() + window;
    while Instant::now() < deadline {
        let start = Instant::now();
        // SAFETY: `fd` is open for as long as `file` lives.
        let locked = unsafe { libc::flock(fd, libc::LOCK_EX) };
        // SAFETY: as above.
        let unlocked = unsafe { libc::flock(fd, libc::LOCK_UN) };
        samples.push(start.elapsed());
        assert!(locked == 0 && unlocked == 0, "flock on the unrelated file");
        std::thread::sleep(Duration::from_micros(200));
    }
    samples
}

/// On-CPU time of `pid`, all its threads (`/proc/PID/task/*/schedstat`'s
/// first field; threads that ended are not counted, so the watches are
/// read while they run).
fn on_cpu(pid: u32) -> Duration {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Duration::ZERO;
    };
    let ns: u64 = tasks
        .flatten()
        .filter_map(|task| std::fs::read_to_string(task.path().join("schedstat")).ok())
        .filter_map(|text| text.split_whitespace().next()?.parse::<u64>().ok())
        .sum();
    Duration::from_nanos(ns)
}

/// The `serve` the rows attach to; killed on drop.
struct Service {
    child: Child,
    socket: PathBuf,
}

impl Service {
    fn start(state: &Path, socket: &Path) -> Self {
        let (service, _) = Self::listening(state, socket);
        // Its first scan.
        std::thread::sleep(Duration::from_millis(300));
        service
    }

    /// A service started, and when its socket first accepted.
    fn listening(state: &Path, socket: &Path) -> (Self, Instant) {
        let child = Command::new(locktop_bin())
            .arg("--state-dir")
            .arg(state)
            .args(["serve", "--listen", "127.0.0.1:0", "--socket"])
            .arg(socket)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn serve");
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::os::unix::net::UnixStream::connect(socket).is_err() {
            assert!(Instant::now() < deadline, "serve's socket never answered");
            std::thread::sleep(Duration::from_millis(5));
        }
        let accepted = Instant::now();
        let service = Self {
            child,
            socket: socket.to_path_buf(),
        };
        (service, accepted)
    }

    /// Its `/events` lines over the socket, each with when it was read.
    fn events(&self) -> mpsc::Receiver<(Instant, String)> {
        let mut stream =
            std::os::unix::net::UnixStream::connect(&self.socket).expect("connect the socket");
        stream
            .write_all(b"GET /events HTTP/1.1\r\nHost: localhost\r\n\r\n")
            .expect("request");
        lines_of(stream)
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A `watch --json` child; killed on drop.
struct Watch {
    child: Child,
    lines: mpsc::Receiver<(Instant, String)>,
}

impl Watch {
    /// A watch whose lines are read as they come (with when).
    fn start(state: &Path, args: &[&str]) -> Self {
        let mut child = Command::new(locktop_bin())
            .arg("--state-dir")
            .arg(state)
            .args(["watch", "--json"])
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn watch");
        let lines = lines_of(child.stdout.take().expect("stdout"));
        // Its first line says it started; the first scan follows.
        let _ = lines.recv_timeout(Duration::from_secs(20));
        std::thread::sleep(Duration::from_millis(300));
        Self { child, lines }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A `locktop hold --tag TAG` child, once it holds.
fn hold(state: &Path, tag: &str) -> Child {
    let mut child = Command::new(locktop_bin())
        .arg("--state-dir")
        .arg(state)
        .args(["hold", "--tag", tag])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn hold");
    let mut line = String::new();
    BufReader::new(child.stdout.as_mut().expect("stdout"))
        .read_line(&mut line)
        .expect("hold's line");
    assert!(line.contains("\"held\":true"), "{line}");
    child
}

/// Waits (20 s at most) for a line naming `tag` and containing `what`;
/// when it was read.
fn wait_for(lines: &mpsc::Receiver<(Instant, String)>, tag: &str, what: &str) -> Instant {
    let name = format!("\"name\":\"{tag}\"");
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let (at, line) = lines
            .recv_timeout(left)
            .unwrap_or_else(|_| panic!("no line with {name} and {what}"));
        if line.contains(&name) && line.contains(what) {
            return at;
        }
    }
}

/// The lines of `reader` on a thread, each with when it was read.
fn lines_of(reader: impl Read + Send + 'static) -> mpsc::Receiver<(Instant, String)> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(reader).lines() {
            let Ok(line) = line else { break };
            if tx.send((Instant::now(), line)).is_err() {
                break;
            }
        }
    });
    rx
}

fn locktop_bin() -> PathBuf {
    option_env!("CARGO_BIN_EXE_locktop")
        .map(PathBuf::from)
        .filter(|path| path.is_file())
        .expect("the locktop binary (built with the bench)")
}

fn verdict(met: bool) -> &'static str {
    if met { "PASS" } else { "MISS" }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let index = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
    sorted[index.min(sorted.len() - 1)]
}

fn spread(samples: &[Duration]) -> (Duration, Duration, Duration) {
    let mut sorted = samples.to_vec();
    sorted.sort_unstable();
    (
        sorted.first().copied().unwrap_or_default(),
        median(&sorted),
        sorted.last().copied().unwrap_or_default(),
    )
}

fn median(samples: &[Duration]) -> Duration {
    let mut sorted = samples.to_vec();
    sorted.sort_unstable();
    sorted.get(sorted.len() / 2).copied().unwrap_or_default()
}

fn micros(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1e6
}

fn millis(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1e3
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .trim()
        .to_string()
}
