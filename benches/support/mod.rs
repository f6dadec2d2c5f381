//! Plumbing for the engine benchmark: the `locktop` binary, child holders
//! (killed on drop, also on panic), fixtures, the raw floor loop, resource
//! usage and report formatting. No figure is computed here, except in
//! [`frames`], the TUI frame-render section.

/// Section 7, the engine at the floor: the kernel source's watch beside
/// `inotifywait -m -r` on the same churn, and beside an older binary's.
pub mod floor;
/// Frame render time of the TUI at 100k keys.
pub mod frames;
/// Section 5's rows with real `locktop watch` monitors: refusals of an
/// agent's tight loop and of a relocation, and an unrelated process's
/// flock latency.
pub mod interference;
/// Where a kill's latency goes, stage by stage, beside raw inotify.
pub mod killpath;
/// What the benches that run the binary alone share (scale, journal, and
/// engine's section 7): child locktops, held fixtures, a churn of
/// holders, inotifywait, CPU and context switches from /proc.
#[allow(dead_code)] // engine.rs uses a part of it
pub mod outside;
pub mod verdicts;

use std::ffi::CString;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use locktop::context::Context;
use locktop::locks::{self, agent_instance_lock, agent_tag_lock};
use locktop::operate::hold_protocol::HoldLine;

// ---------------------------------------------------------------------------
// The binary under test

/// The `locktop` binary built alongside this bench (target/<profile>/).
/// Falls back to `cargo build --bin locktop` in the same profile.
pub fn locktop_bin() -> PathBuf {
    if let Some(path) = option_env!("CARGO_BIN_EXE_locktop").map(PathBuf::from)
        && path.is_file()
    {
        return path;
    }
    let exe = std::env::current_exe().expect("current_exe");
    // target/<profile>/deps/engine-<hash> → target/<profile>/locktop
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("bench executable has no target/<profile> parent")
        .to_path_buf();
    let candidate = profile_dir.join("locktop");
    if candidate.is_file() {
        return candidate;
    }
    let release = profile_dir.file_name().is_some_and(|n| n == "release");
    eprintln!(
        "bench: {} missing; running cargo build{} --bin locktop",
        candidate.display(),
        if release { " --release" } else { "" }
    );
    let mut build = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    build
        .arg("build")
        .arg("--bin")
        .arg("locktop")
        .arg("--manifest-path")
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml"));
    if release {
        build.arg("--release");
    }
    let status = build.status().expect("spawning cargo build");
    assert!(
        status.success() && candidate.is_file(),
        "cannot find or build the locktop binary at {} (run `cargo build --release --bin locktop`)",
        candidate.display()
    );
    candidate
}

// ---------------------------------------------------------------------------
// Child processes

/// A child process that is SIGKILLed and reaped when dropped (unless it was
/// already reaped), so no fixture process outlives the bench, panic or not.
pub struct Guarded {
    child: Child,
    reaped: bool,
}

impl Guarded {
    pub fn new(child: Child) -> Self {
        Self {
            child,
            reaped: false,
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn child_mut(&mut self) -> &mut Child {
        &mut self.child
    }

    /// SIGKILL now (no reaping).
    pub fn sigkill(&self) {
        if !self.reaped {
            // SAFETY: plain syscall on a PID we spawned and have not reaped.
            unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGKILL) };
        }
    }

    /// Sends `signal` (no reaping).
    pub fn signal(&self, signal: libc::c_int) {
        if !self.reaped {
            // SAFETY: as above.
            unsafe { libc::kill(self.child.id() as libc::pid_t, signal) };
        }
    }

    /// Reaps the child, returning its exit status and resource usage
    /// (`ru_maxrss` = its peak RSS in KiB).
    pub fn wait4(&mut self) -> (i32, libc::rusage) {
        assert!(!self.reaped, "child reaped twice");
        let mut status = 0;
        // SAFETY: zeroed rusage is a valid out-parameter.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        loop {
            // SAFETY: valid out-pointers, PID of our unreaped child.
            let r =
                unsafe { libc::wait4(self.child.id() as libc::pid_t, &mut status, 0, &mut usage) };
            if r >= 0 || std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
                break;
            }
        }
        self.reaped = true;
        (status, usage)
    }

    /// Reaps the child through std (when no rusage is needed).
    pub fn wait(&mut self) -> std::process::ExitStatus {
        let status = self.child.wait().expect("wait");
        self.reaped = true;
        status
    }

    /// `Some(status)` if the child has exited (and reaps it).
    pub fn try_wait(&mut self) -> Option<std::process::ExitStatus> {
        let status = self.child.try_wait().expect("try_wait")?;
        self.reaped = true;
        Some(status)
    }
}

impl Drop for Guarded {
    fn drop(&mut self) {
        if !self.reaped {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// A `locktop hold` child holding a family until killed (stdin is kept
/// open: closing it would make the holder release and exit).
pub struct Holder {
    pub process: Guarded,
    _stdin: ChildStdin,
    _stdout: BufReader<ChildStdout>,
}

impl Holder {
    pub fn pid(&self) -> u32 {
        self.process.pid()
    }
}

/// Spawns `locktop --state-dir D hold <family args>` and waits for its
/// `{"held":true…}` line. `Err` with the reason when it could not hold
/// (busy: exit 1, e.g. a monitor's acquire probe raced it).
pub fn spawn_holder(
    bin: &Path,
    state_dir: &Path,
    family_args: &[String],
) -> Result<Holder, String> {
    let mut child = Command::new(bin)
        .arg("--state-dir")
        .arg(state_dir)
        .arg("hold")
        .args(family_args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("spawning {}: {e}", bin.display()))?;
    let stdin = child.stdin.take().expect("piped stdin");
    let stdout = child.stdout.take().expect("piped stdout");
    let mut process = Guarded::new(child);
    let mut stdout = BufReader::new(stdout);
    let mut line = String::new();
    let read = stdout.read_line(&mut line);
    let held = matches!(
        HoldLine::parse(line.trim_end()),
        Some(HoldLine::Held { .. })
    );
    if matches!(read, Ok(n) if n > 0) && held {
        // Nothing reads stderr later; a holder that is killed writes none.
        drop(process.child_mut().stderr.take());
        return Ok(Holder {
            process,
            _stdin: stdin,
            _stdout: stdout,
        });
    }
    let mut err = String::new();
    if let Some(mut stderr) = process.child_mut().stderr.take() {
        let _ = std::io::Read::read_to_string(&mut stderr, &mut err);
    }
    let status = process.wait();
    Err(format!("{status}: {}{}", line.trim(), err.trim()))
}

/// [`spawn_holder`], retried a few times when the family was busy (a
/// momentary probe). Returns the holder and how many attempts failed.
pub fn spawn_holder_retrying(
    bin: &Path,
    state_dir: &Path,
    family_args: &[String],
) -> (Holder, u32) {
    let mut failures = 0;
    loop {
        match spawn_holder(bin, state_dir, family_args) {
            Ok(holder) => return (holder, failures),
            Err(error) => {
                failures += 1;
                assert!(
                    failures < 20,
                    "locktop hold {family_args:?} kept failing: {error}"
                );
                std::thread::sleep(Duration::from_millis(5));
            }
        }
    }
}

/// One busy loop (`sh -c 'while :; do :; done'`) per CPU: a busy host.
/// Killed when dropped.
pub fn cpu_hogs() -> Vec<Guarded> {
    (0..nproc())
        .map(|_| {
            Guarded::new(
                Command::new("sh")
                    .args(["-c", "while :; do :; done"])
                    .stdin(Stdio::null())
                    .spawn()
                    .expect("spawn a CPU hog"),
            )
        })
        .collect()
}

/// `line`, a `skipped: …` row to print instead of a section's or a row's
/// figures; a panic instead under `LOCKTOP_REQUIRE_ALL=1`.
pub fn skipped(line: String) -> String {
    if std::env::var("LOCKTOP_REQUIRE_ALL").is_ok_and(|v| v == "1") {
        panic!("{line}, and LOCKTOP_REQUIRE_ALL=1");
    }
    line
}

/// The `skipped:` row of a front end that refused `--source kernel` here
/// (not root, no CAP_PERFMON, no tracefs), from what it said on stderr
/// ([`skipped`]: a panic under `LOCKTOP_REQUIRE_ALL=1`); `None` when it
/// said something else.
pub fn kernel_refused(stderr: &str) -> Option<String> {
    stderr.contains("--source kernel:").then(|| {
        skipped(format!(
            "skipped: {} (run the bench as root, or give it CAP_PERFMON, with tracefs mounted)",
            stderr.trim()
        ))
    })
}

/// `--group T …` for a set of tags.
pub fn group_args(tags: &[String]) -> Vec<String> {
    tags.iter()
        .flat_map(|t| ["--group".to_string(), t.clone()])
        .collect()
}

// ---------------------------------------------------------------------------
// Fixtures

/// A deterministic 22-char base62 "agent id" (the shape of real AIH leaves).
pub fn agent_id(n: u64) -> String {
    const B62: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
    let mut x = n.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0xD1B5_4A32_D192_ED03;
    (0..22)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            B62[(x % 62) as usize] as char
        })
        .collect()
}

/// Tag `i`: free-form names with a space, a colon and dots (all escaped on
/// disk).
pub fn tag_name(i: usize) -> String {
    format!("bench tag:{i:06}.v1")
}

/// Instance AIHs: `parents` roots `cli/daemon/<id>-r<p>` and the rest as
/// their children `cli/daemon/<id>-r<p>/<id>-r<i>` (a node with both a
/// lock and children, like real spawn trees).
pub fn instance_names(count: usize, parents: usize) -> Vec<String> {
    let parents = parents.clamp(1, count.max(1));
    let roots: Vec<String> = (0..parents)
        .map(|p| format!("cli/daemon/{}-r{p}", agent_id(p as u64)))
        .collect();
    let mut out = roots.clone();
    for i in parents..count {
        let root = &roots[i % parents];
        out.push(format!("{root}/{}-r{i}", agent_id(1_000_000 + i as u64)));
    }
    out.truncate(count);
    out
}

/// Creates every key through the SDK (`locktop::locks::try_acquire`, as a
/// holder would) and releases it at once: real names, real escapes, files
/// left behind as a dead agent's would be. Returns the time it took.
pub async fn create_free_keys_sdk(state_dir: &Path, tags: &[String], aihs: &[String]) -> Duration {
    let context = Context::new(state_dir.to_path_buf());
    let start = Instant::now();
    let coords = aihs
        .iter()
        .map(|aih| agent_instance_lock(state_dir, aih))
        .chain(tags.iter().map(|tag| agent_tag_lock(state_dir, tag)));
    for (dir, key) in coords {
        let lock = locks::try_acquire(context.agent_locks(), &dir, &key)
            .await
            .unwrap_or_else(|| panic!("fixture key {key:?} in {} is busy", dir.display()));
        lock.release().expect("releasing a fixture key");
    }
    start.elapsed()
}

/// Creates every key's gate (empty) and announce (`1`) directly, with the
/// SDK's escaping (`locktop::locks::escape`, tested byte-for-byte against the SDK),
/// on 4 threads (file creation on a busy disk is slow). Returns the time.
pub fn create_free_keys_touch(state_dir: &Path, tags: &[String], aihs: &[String]) -> Duration {
    let start = Instant::now();
    let coords: Vec<(PathBuf, String)> = aihs
        .iter()
        .map(|aih| agent_instance_lock(state_dir, aih))
        .chain(tags.iter().map(|tag| agent_tag_lock(state_dir, tag)))
        .collect();
    let mut dirs: Vec<&PathBuf> = coords.iter().map(|(dir, _)| dir).collect();
    dirs.sort();
    dirs.dedup();
    for dir in dirs {
        std::fs::create_dir_all(dir).expect("create fixture dir");
    }
    let chunk = coords.len().div_ceil(4).max(1);
    std::thread::scope(|scope| {
        for part in coords.chunks(chunk) {
            scope.spawn(move || {
                for (dir, key) in part {
                    std::fs::write(locktop::locks::escape::gate_path(dir, key), b"").expect("gate");
                    std::fs::write(locktop::locks::escape::announce_path(dir, key), b"1")
                        .expect("announce");
                }
            });
        }
    });
    start.elapsed()
}

// ---------------------------------------------------------------------------
// The raw floor

/// Every gate file's path as a C string (built outside the timed loop).
pub fn c_paths(paths: impl IntoIterator<Item = PathBuf>) -> Vec<CString> {
    paths
        .into_iter()
        .map(|p| CString::new(p.as_os_str().as_bytes()).expect("no NUL in path"))
        .collect()
}

/// The floor: open + flock(LOCK_SH|LOCK_NB) + close per file, one thread,
/// libc directly. Returns the time and how many were exclusively held.
pub fn floor_loop(paths: &[CString]) -> (Duration, usize) {
    let start = Instant::now();
    let mut busy = 0;
    for path in paths {
        // SAFETY: valid NUL-terminated path; fd closed below.
        let fd = unsafe { libc::open(path.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
        if fd < 0 {
            continue;
        }
        // SAFETY: fd is open.
        if unsafe { libc::flock(fd, libc::LOCK_SH | libc::LOCK_NB) } != 0 {
            busy += 1;
        }
        // SAFETY: fd is open and ours.
        unsafe { libc::close(fd) };
    }
    (start.elapsed(), busy)
}

// ---------------------------------------------------------------------------
// Resource usage and the machine

/// User + system CPU time of this process so far.
pub fn cpu_self() -> Duration {
    // SAFETY: zeroed rusage is a valid out-parameter.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: valid out-pointer.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    rusage_cpu(&usage)
}

pub fn rusage_cpu(usage: &libc::rusage) -> Duration {
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

/// A `Vm…:` field (`VmHWM:` = peak RSS, `VmRSS:`) of a live process, in KiB.
pub fn vm_status_kib(pid: u32, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// `Linux 6.x … x86_64`, from uname(2).
pub fn uname() -> String {
    // SAFETY: zeroed utsname is a valid out-parameter.
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    // SAFETY: valid out-pointer.
    if unsafe { libc::uname(&mut u) } != 0 {
        return "unknown".into();
    }
    let field = |f: &[libc::c_char]| {
        let bytes: Vec<u8> = f
            .iter()
            .take_while(|c| **c != 0)
            .map(|c| *c as u8)
            .collect();
        String::from_utf8_lossy(&bytes).into_owned()
    };
    format!(
        "{} {} {} {}",
        field(&u.sysname),
        field(&u.release),
        field(&u.version),
        field(&u.machine)
    )
}

/// `/proc/loadavg` (the machine may be shared with other work).
pub fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg").map_or_else(|_| "?".into(), |l| l.trim().to_string())
}

pub fn nproc() -> usize {
    std::thread::available_parallelism().map_or(1, usize::from)
}

/// The model name of the first CPU, if `/proc/cpuinfo` says.
pub fn cpu_model() -> Option<String> {
    let info = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    info.lines()
        .find_map(|l| l.strip_prefix("model name"))
        .map(|l| l.trim_start_matches([' ', '\t', ':']).to_string())
}

/// The filesystem type of `path` (from /proc/mounts, longest prefix).
pub fn fs_type(path: &Path) -> String {
    let mounts = std::fs::read_to_string("/proc/mounts").unwrap_or_default();
    let path = path.canonicalize().unwrap_or_else(|_| path.to_path_buf());
    mounts
        .lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let (_dev, mount, kind) = (f.next()?, f.next()?, f.next()?);
            path.starts_with(mount)
                .then(|| (mount.len(), kind.to_string()))
        })
        .max()
        .map_or_else(|| "?".into(), |(_, kind)| kind)
}

// ---------------------------------------------------------------------------
// Statistics and formatting

pub fn median(samples: &[Duration]) -> Duration {
    percentile(samples, 50.0)
}

/// Nearest-rank percentile (p99 of 50 samples is the maximum).
pub fn percentile(samples: &[Duration], p: f64) -> Duration {
    if samples.is_empty() {
        return Duration::ZERO;
    }
    let mut sorted = samples.to_vec();
    sorted.sort();
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// `845 µs`, `12.3 ms`, `1.24 s`.
pub fn fmt_dur(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s >= 1.0 {
        format!("{s:.2} s")
    } else if s >= 0.01 {
        format!("{:.1} ms", s * 1e3)
    } else if s >= 0.001 {
        format!("{:.2} ms", s * 1e3)
    } else {
        format!("{:.0} µs", s * 1e6)
    }
}

/// `a / b` as `1.63×`.
pub fn ratio(a: Duration, b: Duration) -> String {
    if b.is_zero() {
        return "n/a".into();
    }
    let r = a.as_secs_f64() / b.as_secs_f64();
    if r >= 100.0 {
        format!("{r:.0}×")
    } else {
        format!("{r:.2}×")
    }
}

/// `10,000`.
pub fn thousands(n: usize) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

pub fn verdict(pass: bool) -> &'static str {
    if pass { "PASS" } else { "MISS" }
}

/// Prints a line and flushes (the report is read while it runs).
pub fn say(line: impl AsRef<str>) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{}", line.as_ref());
    let _ = out.flush();
}

// ---------------------------------------------------------------------------
// Peak RSS of a short-lived command

/// The argument that turns a bench binary into the measuring
/// intermediary ([`measure_child`]).
pub const MEASURE_CHILD: &str = "--measure-child";

/// One measured run of a command.
pub struct CliRun {
    pub wall: Duration,
    /// Peak RSS of the command alone (KiB).
    pub maxrss_kib: u64,
    pub status: i32,
}

/// Runs `bin args… > /dev/null` through a small intermediary (this bench
/// binary, re-executed with [`MEASURE_CHILD`]), which reaps it with wait4
/// and reports its wall time and `ru_maxrss`. Why the intermediary: a
/// child spawned straight from this (large) process inherits our RSS
/// high-water mark at exec (vfork + exec records the old mm's peak into
/// the child's `ru_maxrss`).
pub fn run_measured(bin: &Path, args: &[&std::ffi::OsStr]) -> CliRun {
    let exe = std::env::current_exe().expect("current_exe");
    let out = Command::new(exe)
        .arg(MEASURE_CHILD)
        .arg(bin)
        .args(args)
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .expect("spawn the measuring intermediary");
    let text = String::from_utf8_lossy(&out.stdout);
    let doc: serde_json::Value = serde_json::from_str(text.trim())
        .unwrap_or_else(|e| panic!("measure-child said {text:?}: {e}"));
    CliRun {
        wall: Duration::from_nanos(doc["wall_ns"].as_u64().unwrap_or(0)),
        maxrss_kib: doc["maxrss_kib"].as_u64().unwrap_or(0),
        status: doc["status"].as_i64().unwrap_or(-1) as i32,
    }
}

/// The intermediary: `--measure-child PROG ARG…` runs PROG (stdout to
/// /dev/null), reaps it with wait4 and prints
/// `{"status":…,"wall_ns":…,"maxrss_kib":…}`.
pub fn measure_child(args: &[String]) {
    let start = Instant::now();
    let child = Command::new(&args[0])
        .args(&args[1..])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn the measured child");
    let mut child = Guarded::new(child);
    let (status, usage) = child.wait4();
    let wall = start.elapsed();
    let code = if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        -1
    };
    println!(
        "{{\"status\":{code},\"wall_ns\":{},\"maxrss_kib\":{}}}",
        wall.as_nanos(),
        usage.ru_maxrss
    );
}

/// `MemTotal` of `/proc/meminfo`, in GB.
pub fn mem_total() -> String {
    let info = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    info.lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.split_whitespace().next()?.parse::<f64>().ok())
        .map_or_else(
            || "memory ?".into(),
            |kib| format!("{:.1} GB RAM", kib / 1024.0 / 1024.0),
        )
}

/// The machine, the run's load, binary, tempdir (and its filesystem) and
/// source commit: the lines every bench prints under its title.
pub fn say_where(bin: &Path, tmp: &Path) {
    say(format!(
        "machine:  nproc={} · {} · {} · {}",
        nproc(),
        cpu_model().unwrap_or_else(|| "cpu ?".into()),
        mem_total(),
        uname()
    ));
    say(format!("load:     {} (/proc/loadavg at start)", loadavg()));
    say(format!(
        "binary:   {}   tempdir: {} ({})",
        bin.display(),
        tmp.display(),
        fs_type(tmp)
    ));
    if let Ok(out) = Command::new("git")
        .args([
            "-C",
            env!("CARGO_MANIFEST_DIR"),
            "describe",
            "--always",
            "--dirty",
        ])
        .output()
        && out.status.success()
    {
        say(format!(
            "source:   {}",
            String::from_utf8_lossy(&out.stdout).trim()
        ));
    }
}

/// Target lines, filled in as a bench's sections run, printed at the end
/// as PASS / MISS (never enforced).
#[derive(Default)]
pub struct Targets {
    lines: Vec<String>,
}

impl Targets {
    pub fn add(&mut self, line: String) {
        self.lines.push(line);
    }

    /// Prints the lines; a smoke run says its sizes are not the targets'
    /// (`cargo bench --bench <bench>` is).
    pub fn say(&self, smoke: bool, bench: &str) {
        say("\nTARGETS (printed, never enforced)");
        if smoke {
            say(format!(
                "  (smoke sizes: these verdicts are NOT the targets' fixture; run `cargo bench --bench {bench}`)"
            ));
        }
        for line in &self.lines {
            say(format!("  {line}"));
        }
    }
}
