//! One chaos child: a `locktop hold` process on a random family, what it
//! printed (with the time each line was read) and what was done to it.
//!
//! Times are taken so that `[held_at, end_action_at]` is a LOWER bound of
//! the time the child really held its family: `held` is printed only once
//! the whole family is held (and read after that), and nothing releases it
//! before the test closes its stdin or SIGKILLs it (both timed just before
//! they are done). Two such intervals that overlap on one key are
//! therefore a real violation of mutual exclusion, never a timing artefact.

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Read};
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Child, ChildStdin, ExitStatus};
use std::sync::mpsc::Receiver;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use locktop::operate::hold_protocol::HoldLine;
use nix::sys::signal::{self, Signal};
use nix::unistd::Pid;

use crate::common::engine::{Name, instance, tag};
use crate::common::locktop_command;

/// The AIHs of the pool: two nested chains (a node with a lock and
/// children) and a loner, so hierarchies overlap on some keys only.
pub const AIHS: [&str; 6] = [
    "chaos/a",
    "chaos/a/sub",
    "chaos/a/sub/deep",
    "chaos/b",
    "chaos/b/x",
    "chaos/c",
];

/// The tags of the pool (spaces, a colon, unicode, dots).
pub const TAGS: [&str; 6] = ["alpha", "beta two", "gamma:3", "δelta", "eps.v1", "zeta"];

/// Tags each taken by one "lane" of tries at a time, nobody else: a
/// lane's try can only fail busy because of a probe (interference), and
/// each is the retake of a tag just released, as an agent would.
pub const LANE_TAGS: [&str; 4] = ["lane.0", "lane 1", "lane:2", "lane·3"];

/// What the scheduler will do to a child next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Close its stdin once it holds (it releases and exits 0).
    Release,
    /// SIGKILL it, whatever it is doing.
    Kill,
    /// SIGSTOP it; after `for_` it is continued (then released later) or,
    /// if `then_kill`, SIGKILLed while stopped.
    Stop { for_: Duration, then_kill: bool },
    /// SIGCONT it (it was stopped).
    Cont,
}

/// A random family: its `hold` arguments and the claims it names.
pub fn random_family(rng: &mut fastrand::Rng) -> (Vec<String>, BTreeSet<Name>) {
    let mut args = Vec::new();
    let mut keys = BTreeSet::new();
    if rng.u8(0..10) < 6 {
        let aih = AIHS[rng.usize(0..AIHS.len())];
        args.extend(["--aih".to_string(), aih.to_string()]);
        keys.insert(instance(aih));
        for _ in 0..rng.usize(0..=2) {
            let t = TAGS[rng.usize(0..TAGS.len())];
            if keys.insert(tag(t)) {
                args.extend(["--tag".to_string(), t.to_string()]);
            }
        }
    } else {
        for _ in 0..rng.usize(1..=3) {
            let t = TAGS[rng.usize(0..TAGS.len())];
            if keys.insert(tag(t)) {
                args.extend(["--group".to_string(), t.to_string()]);
            }
        }
    }
    (args, keys)
}

/// A running (or finished) chaos child and everything known about it.
pub struct ChaosChild {
    /// Spawn order.
    pub id: usize,
    /// Its PID.
    pub pid: u32,
    /// The claims its family names.
    pub keys: BTreeSet<Name>,
    /// `hold --wait` (the SDK's wait), else a non-blocking try.
    pub wait: bool,
    /// When it was spawned.
    pub spawned: Instant,
    /// When its `held` line was read, and the claims it printed.
    pub held: Option<(Instant, BTreeSet<Name>)>,
    /// When the first action that can release it (stdin close, SIGKILL)
    /// was taken.
    pub end_action: Option<Instant>,
    /// Whether it was SIGKILLed.
    pub killed: bool,
    /// Whether it is stopped now.
    pub stopped: bool,
    /// How many times it was stopped.
    pub stops: usize,
    /// When its exit was observed (reaped), and how it exited.
    pub exit: Option<(Instant, ExitStatus)>,
    /// Its stderr, once it exited.
    pub stderr: String,
    /// What to do next, and when.
    pub next: Option<(Instant, Step)>,
    child: Child,
    stdin: Option<ChildStdin>,
    /// `None` once reaped (a run spawns thousands: what stays of a
    /// finished child is only its record).
    lines: Option<Receiver<(Instant, String)>>,
    stderr_reader: Option<JoinHandle<String>>,
}

impl ChaosChild {
    /// Spawns `locktop hold <family> [--wait]`.
    pub fn spawn(
        state: &Path,
        id: usize,
        family: (Vec<String>, BTreeSet<Name>),
        wait: bool,
    ) -> Self {
        let (args, keys) = family;
        let mut full = vec!["hold"];
        full.extend(args.iter().map(String::as_str));
        if wait {
            full.push("--wait");
        }
        // Before the spawn: the child may hold (and the engine report it)
        // before this thread runs again.
        let spawned = Instant::now();
        let mut child = locktop_command(state, &full).spawn().expect("spawn hold");
        let stdin = child.stdin.take();
        let lines = timed_lines(child.stdout.take().expect("piped stdout"));
        let stderr_reader = Some(read_all(child.stderr.take().expect("piped stderr")));
        Self {
            id,
            pid: child.id(),
            keys,
            wait,
            spawned,
            held: None,
            end_action: None,
            killed: false,
            stopped: false,
            stops: 0,
            exit: None,
            stderr: String::new(),
            next: None,
            child,
            stdin,
            lines: Some(lines),
            stderr_reader,
        }
    }

    /// Reads what it printed so far and reaps it if it exited.
    pub fn poll(&mut self) {
        let Some(lines) = &self.lines else {
            return;
        };
        while let Ok((at, line)) = lines.try_recv() {
            if let Some(HoldLine::Held { pid, locks, .. }) = HoldLine::parse(&line) {
                assert_eq!(pid, self.pid, "a holder prints its own PID");
                self.held = Some((at, locks.iter().map(|l| name_of_lock(l)).collect()));
            }
        }
        if self.exit.is_none()
            && let Some(status) = self.child.try_wait().expect("try_wait")
        {
            self.exit = Some((Instant::now(), status));
            self.stdin = None;
            if let Some(reader) = self.stderr_reader.take() {
                let stderr = reader.join().expect("stderr reader");
                // A busy try's stderr (who was in the way) is expected and
                // never read: keep only what a failure message may show.
                if self.wait || status.code() != Some(1) {
                    self.stderr = stderr;
                }
            }
            // Lines printed before the exit are all in the pipe by now.
            self.drain_lines_after_exit();
        }
    }

    fn drain_lines_after_exit(&mut self) {
        let Some(lines) = self.lines.take() else {
            return;
        };
        while let Ok((at, line)) = lines.recv_timeout(Duration::from_secs(5)) {
            if let Some(HoldLine::Held { locks, .. }) = HoldLine::parse(&line) {
                self.held = Some((at, locks.iter().map(|l| name_of_lock(l)).collect()));
            }
        }
    }

    /// True while it has not been reaped.
    pub fn running(&self) -> bool {
        self.exit.is_none()
    }

    /// Closes its stdin: it releases and exits 0.
    pub fn release(&mut self) {
        self.end_action.get_or_insert_with(Instant::now);
        self.stdin = None;
    }

    /// SIGKILL (works on a stopped child too).
    pub fn kill(&mut self) {
        if self.exit.is_some() {
            return;
        }
        self.end_action.get_or_insert_with(Instant::now);
        self.killed = true;
        self.signal(Signal::SIGKILL);
    }

    /// SIGSTOP.
    pub fn stop(&mut self) {
        self.stopped = true;
        self.stops += 1;
        self.signal(Signal::SIGSTOP);
    }

    /// SIGCONT.
    pub fn cont(&mut self) {
        self.stopped = false;
        self.signal(Signal::SIGCONT);
    }

    fn signal(&self, signal: Signal) {
        // Only our own child, not yet reaped: its PID cannot have been reused.
        if self.exit.is_none() {
            let pid = Pid::from_raw(i32::try_from(self.pid).expect("pid fits i32"));
            let _ = signal::kill(pid, signal);
        }
    }

    /// Waits (bounded) until it exits, and reaps it.
    pub fn reap(&mut self, within: Duration) {
        let deadline = Instant::now() + within;
        while self.running() {
            self.poll();
            if Instant::now() > deadline {
                panic!("chaos child {} (pid {}) never exited", self.id, self.pid);
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// The exit code, `None` when it died by a signal.
    pub fn code(&self) -> Option<i32> {
        self.exit.and_then(|(_, status)| status.code())
    }

    /// The signal that ended it, if any.
    pub fn exit_signal(&self) -> Option<i32> {
        self.exit.and_then(|(_, status)| status.signal())
    }

    /// `[held_at, end_action_at]`: a lower bound of its real hold (see the
    /// module doc). `None` if it never printed `held`.
    pub fn hold_interval(&self) -> Option<(Instant, Instant)> {
        let (held_at, _) = self.held.as_ref()?;
        // A child that exited with no action of ours is reported by the
        // checks; its observed exit bounds its hold from above, not below.
        let end = self
            .end_action
            .or(self.exit.map(|(at, _)| at))
            .unwrap_or_else(Instant::now);
        Some((*held_at, end.max(*held_at)))
    }
}

impl Drop for ChaosChild {
    fn drop(&mut self) {
        if self.exit.is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// `instance a/b` / `tag t` (a `held` line's lock) as a name.
pub fn name_of_lock(lock: &str) -> Name {
    let (kind, name) = lock.split_once(' ').expect("`kind name`");
    (kind.to_string(), name.to_string())
}

fn timed_lines(stdout: impl Read + Send + 'static) -> Receiver<(Instant, String)> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send((Instant::now(), line)).is_err() {
                break;
            }
        }
    });
    rx
}

fn read_all(mut pipe: impl Read + Send + 'static) -> JoinHandle<String> {
    std::thread::spawn(move || {
        let mut text = String::new();
        let _ = pipe.read_to_string(&mut text);
        text
    })
}
