//! Shared helpers for the integration tests: real `locktop` processes
//! holding real locks, and small filesystem checks.
//!
//! Every timeout here is a CORRECTNESS bound ("this must happen at all"),
//! generous on purpose so a loaded CI machine never flakes; none of them
//! asserts speed.

/// Driving the live engine (deltas, views, ground-truth fixtures).
pub mod engine;

/// util-linux `flock(1)` holders (read-only descriptors).
pub mod flock;

/// Driving the real binary in a pseudo-terminal.
pub mod pty;

/// A child's memory and activity, from `/proc`.
pub mod proc;

use locktop::operate::hold_protocol::HoldLine;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use nix::sys::signal::{self, Signal};
use nix::unistd::Pid;

static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Runs a test alone among the tests that take this guard. Every test of
/// every area runs on a thread of ONE process (and, on CI, 2 cores). The
/// guard is taken by:
///
/// - every `engine` test: each watches its engine over a time window (no
///   probe during 2 s of quiet, no flicker within 400 ms) or floods the
///   machine on purpose (the overflow test's writer threads), so two at
///   once would starve each other's engine;
/// - every `cli::snapshot_watch` test (real engines in `snapshot` and
///   `watch` children against ground truth).
///
/// This keeps a 2-core machine from being oversubscribed by them. The other
/// tests need no guard: each works in a temp dir of its own, and those that
/// read this process's locks from `/proc/locks` (an abandoned wait, an
/// `own` key) look them up by the (device, inode) of their own files, which
/// no other test can hold. The engine names holders only from a
/// `/proc/locks` read made after its probe, so an inode that another test
/// just freed and a new lockfile here reused cannot lend it a stale holder
/// (the `*_names_the_new_holder_of_a_key_retaken_right_after_a_death` tests
/// pin that down).
pub async fn serial() -> tokio::sync::MutexGuard<'static, ()> {
    SERIAL.lock().await
}

/// [`serial`] for plain `#[test]` functions.
pub fn serial_blocking() -> tokio::sync::MutexGuard<'static, ()> {
    SERIAL.blocking_lock()
}

/// How long a child may take to print its `held` line or to exit.
pub const PROCESS_TIMEOUT: Duration = Duration::from_secs(20);

/// How many times [`Holder::hold`] tries when only a probe was in the way.
const PROBE_RETRIES: u32 = 5;

/// How a `hold` attempt ended without holding.
struct Refused {
    status: Option<ExitStatus>,
    stdout: Vec<String>,
    stderr: String,
}

impl Refused {
    /// Busy (exit 1), and no `hold` process among the holders it names:
    /// a monitor's probe lock (this test process's engine, or a monitor
    /// child), or a holder that just left; worth another try.
    fn by_a_probe(&self) -> bool {
        let busy = self.status.and_then(|status| status.code()) == Some(1)
            && self.stderr.starts_with("busy:");
        busy && named_pids(&self.stderr).all(|pid| !is_a_hold_process(pid))
    }
}

/// The PIDs a `busy:` line names (`pid 12 (cmd)`).
fn named_pids(line: &str) -> impl Iterator<Item = u32> + '_ {
    line.split("pid ")
        .skip(1)
        .filter_map(|rest| rest.split(' ').next()?.parse().ok())
}

/// Whether `pid` is a `locktop … hold …` process (a test holder), read
/// from its command line; a process gone since counts as not one.
fn is_a_hold_process(pid: u32) -> bool {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|cmdline| cmdline.split(|&b| b == 0).any(|arg| arg == b"hold"))
        .unwrap_or(false)
}

/// How long an in-process acquisition may take once its blocker is gone.
pub const WAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// How long we watch something NOT happen (a waiter staying blocked).
pub const STILL_BLOCKED: Duration = Duration::from_millis(300);

/// True for the line a headless command prints when the kernel's lock
/// events cannot be read here (a user who is not root): which source runs
/// instead, and why. Tests of other stderr lines look past it.
pub fn is_source_note(line: &str) -> bool {
    line.contains(": liveness inferred (probe ")
}

/// The `locktop` binary under test.
pub fn locktop_bin() -> &'static str {
    env!("CARGO_BIN_EXE_locktop")
}

/// Where the tests' locktop looks for this host's service: nowhere, so
/// that a `locktop serve` this host may run is never attached to by
/// default (a test that attaches names its own socket).
pub const NO_SERVICE_SOCKET: &str = "/nonexistent/locktop-tests.sock";

/// `command` (a locktop, or a wrapper that runs one) made hermetic: it
/// never attaches to this host's service by default.
pub fn no_service(command: &mut Command) -> &mut Command {
    command.env("LOCKTOP_SOCKET", NO_SERVICE_SOCKET)
}

/// A `locktop --state-dir STATE <args…>` command with every stdio piped.
pub fn locktop_command(state_dir: &Path, args: &[&str]) -> Command {
    let mut command = Command::new(locktop_bin());
    command
        .arg("--state-dir")
        .arg(state_dir)
        .args(args)
        // Hermetic (see `no_service`).
        .env("LOCKTOP_SOCKET", NO_SERVICE_SOCKET)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    command
}

/// `["--tag", t]` for every tag.
pub fn tag_args(tags: &[&str]) -> Vec<String> {
    tags.iter()
        .flat_map(|tag| ["--tag".to_string(), tag.to_string()])
        .collect()
}

/// `["--group", t]` for every tag.
pub fn group_args(tags: &[&str]) -> Vec<String> {
    tags.iter()
        .flat_map(|tag| ["--group".to_string(), tag.to_string()])
        .collect()
}

/// What a finished `locktop` run left behind.
#[derive(Debug)]
pub struct Finished {
    /// How it exited.
    pub status: ExitStatus,
    /// Everything it printed on stdout.
    pub stdout: String,
    /// Everything it printed on stderr.
    pub stderr: String,
}

impl Finished {
    /// The exit code (panics if it was killed by a signal).
    pub fn code(&self) -> i32 {
        self.status
            .code()
            .unwrap_or_else(|| panic!("locktop died by a signal: {self:?}"))
    }

    /// Non-empty stderr lines.
    pub fn stderr_lines(&self) -> Vec<&str> {
        self.stderr.lines().filter(|l| !l.is_empty()).collect()
    }
}

/// Runs `locktop --state-dir STATE <args…>` to completion with stdin closed
/// at once (so a successful `hold` releases immediately), within
/// [`PROCESS_TIMEOUT`].
pub fn run_locktop(state_dir: &Path, args: &[&str]) -> Finished {
    finish(locktop_command(state_dir, args))
}

/// Runs `command` (every stdio piped, as [`locktop_command`] makes it)
/// as [`run_locktop`] does.
pub fn finish(mut command: Command) -> Finished {
    let mut child = command.spawn().expect("spawn locktop");
    drop(child.stdin.take());
    let stdout = drain(child.stdout.take().expect("piped stdout"));
    let stderr = drain(child.stderr.take().expect("piped stderr"));
    let status = match wait_with_timeout(&mut child, PROCESS_TIMEOUT) {
        Some(status) => status,
        None => {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{command:?} did not exit within {PROCESS_TIMEOUT:?}");
        }
    };
    Finished {
        status,
        stdout: stdout.join().expect("stdout reader"),
        stderr: stderr.join().expect("stderr reader"),
    }
}

fn drain(mut pipe: impl Read + Send + 'static) -> JoinHandle<String> {
    std::thread::spawn(move || {
        let mut text = String::new();
        let _ = pipe.read_to_string(&mut text);
        text
    })
}

/// Polls `try_wait` until the child exits or `timeout` passes.
pub fn wait_with_timeout(child: &mut Child, timeout: Duration) -> Option<ExitStatus> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            return Some(status);
        }
        if Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The lines a child prints on `stdout`, read on a thread as they come.
pub fn lines_of(stdout: impl Read + Send + 'static) -> Receiver<String> {
    let (tx, lines) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    lines
}

/// A `locktop hold` child process. Its stdin stays open for as long as the
/// `Holder` lives (stdin EOF makes `hold` release and exit). Dropping a
/// `Holder` SIGKILLs and reaps the child, so a failing test never leaks one.
pub struct Holder {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    stderr: Option<JoinHandle<String>>,
    /// The `{"held":true,…}` line as printed (tests check its bytes).
    pub held: serde_json::Value,
    status: Option<ExitStatus>,
}

impl Holder {
    /// Spawns `locktop --state-dir STATE hold <args…>` and waits for its
    /// `held` line. Panics (with the child's exit, stdout and stderr) if it
    /// exits or stays silent instead.
    pub fn hold<S: AsRef<str>>(state_dir: &Path, args: &[S]) -> Self {
        Self::hold_as(state_dir, args, None)
    }

    /// [`Holder::hold`] with `argv[0]` set to `arg0` when given: its
    /// command line (which the engine reads into every state it reports
    /// for the holder's keys) is then as long as the test needs.
    ///
    /// A `hold` refused as busy by a holder that `/proc/locks` does not
    /// show is tried again, a few times: that holder is a monitor's
    /// momentary probe lock (the interference the README measures), which
    /// every real agent can meet too, and no test here is about it. A
    /// refusal that names a visible holder fails at once.
    pub fn hold_as<S: AsRef<str>>(state_dir: &Path, args: &[S], arg0: Option<&str>) -> Self {
        let args: Vec<&str> = args.iter().map(AsRef::as_ref).collect();
        let mut attempt = 1;
        loop {
            match Self::try_hold_as(state_dir, &args, arg0) {
                Ok(holder) => return holder,
                Err(refused) if refused.by_a_probe() && attempt < PROBE_RETRIES => {
                    attempt += 1;
                    std::thread::sleep(Duration::from_millis(20));
                }
                Err(refused) => panic!(
                    "locktop hold {args:?} did not hold (attempt {attempt}): exit {:?}, stdout {:?}, stderr {:?}",
                    refused.status, refused.stdout, refused.stderr
                ),
            }
        }
    }

    /// One `hold` attempt: the holder once it printed its `held` line, or
    /// how it ended instead (exited, or silent past [`PROCESS_TIMEOUT`]).
    fn try_hold_as(state_dir: &Path, args: &[&str], arg0: Option<&str>) -> Result<Self, Refused> {
        let mut full = vec!["hold"];
        full.extend_from_slice(args);
        let mut command = locktop_command(state_dir, &full);
        if let Some(arg0) = arg0 {
            std::os::unix::process::CommandExt::arg0(&mut command, arg0);
        }
        let mut child = command.spawn().expect("spawn locktop hold");
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().expect("piped stdout");
        let stderr = drain(child.stderr.take().expect("piped stderr"));
        let lines = lines_of(stdout);
        let mut holder = Holder {
            child,
            stdin,
            lines,
            stderr: Some(stderr),
            held: serde_json::Value::Null,
            status: None,
        };
        let mut seen = Vec::new();
        let deadline = Instant::now() + PROCESS_TIMEOUT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match holder.lines.recv_timeout(left) {
                Ok(line) => {
                    if let Some(HoldLine::Held { .. }) = HoldLine::parse(&line) {
                        holder.held = serde_json::from_str(&line).expect("a held line is JSON");
                        return Ok(holder);
                    }
                    seen.push(line);
                }
                Err(RecvTimeoutError::Disconnected) | Err(RecvTimeoutError::Timeout) => {
                    // stdout closed (it exited) or it stayed silent.
                    let status = wait_with_timeout(&mut holder.child, Duration::from_secs(2));
                    if status.is_none() {
                        let _ = holder.child.kill();
                        let _ = holder.child.wait();
                    }
                    holder.status = Some(holder.child.wait().expect("reap"));
                    return Err(Refused {
                        status,
                        stdout: seen,
                        stderr: holder.take_stderr(),
                    });
                }
            }
        }
    }

    /// The child's PID (also what it printed as `"pid"`).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The lock names it printed (`instance a/b`, `tag t`, …).
    pub fn locks(&self) -> Vec<String> {
        match serde_json::from_value(self.held.clone()) {
            Ok(HoldLine::Held { locks, .. }) => locks,
            other => panic!("not a held line: {other:?}"),
        }
    }

    /// The next stdout line within `timeout`, `None` on EOF or timeout.
    pub fn next_line(&self, timeout: Duration) -> Option<String> {
        self.lines.recv_timeout(timeout).ok()
    }

    fn signal(&mut self, signal: Signal) -> ExitStatus {
        if let Some(status) = self.status {
            return status;
        }
        let pid = Pid::from_raw(i32::try_from(self.pid()).expect("pid fits i32"));
        signal::kill(pid, signal).expect("signal the holder");
        self.wait()
    }

    /// SIGKILL: the kernel drops its flocks; nothing of ours runs.
    pub fn kill(&mut self) -> ExitStatus {
        self.signal(Signal::SIGKILL)
    }

    /// SIGTERM: `hold` releases and exits 0. Sent only once the child
    /// has installed its SIGTERM handler (see [`wait_until_catches`]):
    /// `hold` prints its `held` line before it starts listening for
    /// signals, so an immediate SIGTERM would kill it with the default
    /// action instead.
    pub fn terminate(&mut self) -> ExitStatus {
        if self.status.is_none() {
            wait_until_catches(self.pid(), Signal::SIGTERM);
        }
        self.signal(Signal::SIGTERM)
    }

    /// SIGTERM right now, without waiting for the handler.
    pub fn terminate_now(&mut self) -> ExitStatus {
        self.signal(Signal::SIGTERM)
    }

    /// Closes its stdin: `hold` releases and exits 0.
    pub fn close_stdin(&mut self) -> ExitStatus {
        drop(self.stdin.take());
        self.wait()
    }

    /// Writes to its stdin (which `hold` must ignore apart from EOF).
    pub fn write_stdin(&mut self, bytes: &[u8]) {
        let stdin = self.stdin.as_mut().expect("stdin still open");
        stdin.write_all(bytes).expect("write stdin");
        stdin.flush().expect("flush stdin");
    }

    /// Waits (within [`PROCESS_TIMEOUT`]) for it to exit and reaps it.
    pub fn wait(&mut self) -> ExitStatus {
        if let Some(status) = self.status {
            return status;
        }
        let status = wait_with_timeout(&mut self.child, PROCESS_TIMEOUT)
            .unwrap_or_else(|| panic!("holder {} did not exit", self.pid()));
        self.status = Some(status);
        status
    }

    /// Everything it printed on stderr (waits for it to have exited).
    pub fn take_stderr(&mut self) -> String {
        self.stderr
            .take()
            .map(|h| h.join().expect("stderr reader"))
            .unwrap_or_default()
    }
}

impl Drop for Holder {
    fn drop(&mut self) {
        if self.status.is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Whether process `pid` has a handler installed for `signal`
/// (`SigCgt` in `/proc/<pid>/status`). `None` if it is gone.
pub fn catches(pid: u32, signal: Signal) -> Option<bool> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let mask = status
        .lines()
        .find_map(|line| line.strip_prefix("SigCgt:"))
        .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())?;
    Some(mask & (1u64 << (signal as i32 - 1)) != 0)
}

/// Waits (within [`PROCESS_TIMEOUT`]) until `pid` catches `signal`.
pub fn wait_until_catches(pid: u32, signal: Signal) {
    let deadline = Instant::now() + PROCESS_TIMEOUT;
    while catches(pid, signal) != Some(true) {
        assert!(
            Instant::now() < deadline,
            "pid {pid} never installed a {signal} handler"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Whether process `pid` exists and is not a zombie.
pub fn alive(pid: u32) -> bool {
    procfs::process::Process::new(pid as i32)
        .and_then(|p| p.stat())
        .is_ok_and(|stat| stat.state != 'Z')
}

/// Waits (within `timeout`) until none of `pids` is [`alive`]; the ones
/// still alive at the deadline.
pub fn wait_all_gone(pids: &[u32], timeout: Duration) -> Vec<u32> {
    let deadline = Instant::now() + timeout;
    loop {
        let left: Vec<u32> = pids.iter().copied().filter(|pid| alive(*pid)).collect();
        if left.is_empty() || Instant::now() > deadline {
            return left;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Every path under `root` (files and directories), relative, sorted.
pub fn tree(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries {
            let path = entry.expect("dir entry").path();
            out.push(path.strip_prefix(root).expect("under root").to_path_buf());
            if path.is_dir() {
                stack.push(path);
            }
        }
    }
    out.sort();
    out
}

/// A fresh temp dir with an (empty) `state` dir inside: `(tmp, tmp/state)`.
pub fn state_in_tempdir() -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().expect("tempdir");
    let state = tmp.path().join("state");
    std::fs::create_dir(&state).expect("mkdir state");
    (tmp, state)
}

/// Whether `program` is on the `PATH`. When it is not, one line says
/// what is skipped and how to get it (`install`), and the caller skips
/// what needs it — except under `LOCKTOP_REQUIRE_ALL=1` (`.ci/run`, which
/// installs everything), where a missing program fails the test: CI
/// proves every guarantee.
pub fn have_program(program: &str, install: &str) -> bool {
    use std::os::unix::fs::PermissionsExt;
    let found = std::env::var_os("PATH").is_some_and(|path| {
        std::env::split_paths(&path).any(|dir| {
            std::fs::metadata(dir.join(program))
                .is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
        })
    });
    skip_unless(
        found,
        &format!("skipped: `{program}` is not installed ({install})"),
    )
}

/// `ok`; when false, `line` (what is skipped and why) is printed past the
/// test harness's capture — seen even when the test passes — for the
/// caller to skip, except under `LOCKTOP_REQUIRE_ALL=1` (`.ci/run`,
/// which installs everything and runs as root), where it fails the test:
/// CI proves every guarantee.
pub fn skip_unless(ok: bool, line: &str) -> bool {
    if !ok {
        assert!(
            std::env::var_os("LOCKTOP_REQUIRE_ALL").is_none(),
            "{line}, and LOCKTOP_REQUIRE_ALL is set"
        );
        let _ = std::io::Write::write_all(&mut std::io::stderr(), format!("{line}\n").as_bytes());
    }
    ok
}

/// Raises this process's soft limit on open files to `wanted` (its
/// children — the `serve` under test — inherit it), for a test that
/// opens hundreds of sockets beside the others running in parallel (a
/// user's default soft limit is often 1,024); false, with one line saying
/// what to raise, when the hard limit is lower.
pub fn open_files_or_skip(test: &str, wanted: u64) -> bool {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE) else {
        return skip_unless(false, &format!("skipped {test}: cannot read RLIMIT_NOFILE"));
    };
    if soft >= wanted {
        return true;
    }
    if hard < wanted {
        return skip_unless(
            false,
            &format!(
                "skipped {test}: needs {wanted} open files, the hard limit is {hard} (ulimit -Hn {wanted}, as root or in limits.conf)"
            ),
        );
    }
    // The whole test process's: only ever raised, never lowered.
    setrlimit(Resource::RLIMIT_NOFILE, wanted, hard).is_ok()
        || skip_unless(
            false,
            &format!("skipped {test}: could not raise RLIMIT_NOFILE"),
        )
}

/// `full` cases (proptest cases, race trials), or a tenth of them (at
/// least 8) in the quick tier (`LOCKTOP_QUICK=1`): a differential sweep
/// that still runs, only shorter.
pub fn cases(full: u32) -> u32 {
    let quick = std::env::var_os("LOCKTOP_QUICK").is_some_and(|v| v != "0");
    assert!(
        !quick || std::env::var_os("LOCKTOP_REQUIRE_ALL").is_none(),
        "LOCKTOP_QUICK shortens runs, and LOCKTOP_REQUIRE_ALL is set"
    );
    if quick {
        (full / 10).max(8).min(full)
    } else {
        full
    }
}

/// Spawns `sleep 60` under PID `pid` (root only: through
/// `/proc/sys/kernel/ns_last_pid`), retrying while other forks take the
/// PID first: a PID reused by an unrelated process.
pub fn sleep_with_pid(pid: u32) -> Child {
    for _ in 0..500 {
        std::fs::write("/proc/sys/kernel/ns_last_pid", (pid - 1).to_string())
            .expect("writing ns_last_pid (PID reuse needs root)");
        let mut child = Command::new("sleep")
            .arg("60")
            .spawn()
            .expect("spawn sleep");
        if child.id() == pid {
            return child;
        }
        let _ = child.kill();
        let _ = child.wait();
    }
    panic!("could not spawn a process with pid {pid}");
}

/// `nobody`: an unprivileged user for the permission cases.
pub const NOBODY: u32 = 65534;

/// A copy of the binary any user may run (the build dir may sit below a
/// directory only root may enter), in a temp dir kept by the caller.
pub fn binary_for_anyone() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::set_permissions(
        dir.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .expect("chmod");
    let bin = dir.path().join("locktop");
    // Copied by another process: a file this process had open for writing
    // is inherited by every child another test thread forks meanwhile, and
    // exec of it fails with ETXTBSY ("Text file busy") until they exec.
    let copied = Command::new("cp")
        .arg(locktop_bin())
        .arg(&bin)
        .status()
        .expect("run cp");
    assert!(copied.success(), "cp of the binary: {copied}");
    std::fs::set_permissions(&bin, std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .expect("chmod");
    (dir, bin)
}
