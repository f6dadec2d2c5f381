//! `watch --json` with a reader that stops reading (a stalled consumer):
//! real `locktop hold` children churn a few lock families while the test
//! keeps the pipe open without reading it. Memory must stay bounded, the
//! lines that had to wait coalesce per key (with a `folded` count) and
//! still end on the truth, and SIGINT/SIGTERM flushes them — or gives up
//! after its bound when nobody reads at all.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;
use std::process::{Child, ChildStdout};
use std::time::{Duration, Instant};

use nix::fcntl::{FcntlArg, OFlag, fcntl};
use nix::sys::signal::{self, Signal};
use nix::unistd::Pid;
use serde_json::Value;

use crate::common::engine::{Name, held_names, state_with_locks_root};
use crate::common::proc::{peak_rss_kib, rss_kib, some_thread_waits_in, wait_until_idle};
use crate::common::{Holder, PROCESS_TIMEOUT, locktop_command, serial_blocking, wait_with_timeout};

/// How long `watch` must have been idle before it counts as caught up
/// with the churn (see `common::proc::wait_until_idle`: measured, so a
/// slow machine waits longer instead of failing).
const IDLE_WINDOW: Duration = Duration::from_millis(500);

/// Families churned: each an AIH and this many tags.
const FAMILIES: usize = 4;
const TAGS_PER_FAMILY: usize = 7;

/// A holder's `argv[0]` length. Every state the engine reports for a
/// held key carries its holders' command lines, so with this one each
/// delta that names a holder weighs ~100 KB: an unbounded queue shows in
/// megabytes after a few hundred transitions. (The kernel's limit for one
/// argument is 128 KiB.)
const FAT_ARG0_LEN: usize = 100_000;

/// Rounds of churn in the memory test (each: every family's holder is
/// SIGKILLed and a new one takes the family).
const MEMORY_ROUNDS: usize = 80;

/// Rounds of churn in the signal tests: enough to fill the pipe and leave
/// lines pending.
const SIGNAL_ROUNDS: usize = 15;

/// How much the RSS of a stalled `watch` may grow over the churn.
const RSS_GROWTH_BOUND_KIB: u64 = 32 * 1024;

/// Liveness word and holder PIDs, as a `watch --json` line says them.
type Said = (String, Vec<u32>);

/// A `locktop watch --json` child whose stdout the test reads only when
/// it chooses to: a one-page pipe, read without blocking.
struct StalledWatch {
    child: Child,
    stdout: ChildStdout,
    partial: Vec<u8>,
    lines: Vec<Value>,
    eof: bool,
}

impl StalledWatch {
    /// Starts `watch` (passive probe, so it never takes a lock a holder
    /// wants; no sweep, so it is quiet once caught up) and reads until it
    /// is watching.
    fn start(state: &Path) -> Self {
        let args = ["watch", "--json", "--probe", "passive", "--sweep", "3600"];
        let mut child = locktop_command(state, &args).spawn().expect("spawn watch");
        let stdout = child.stdout.take().expect("stdout");
        // One page of pipe: the writer blocks after a few dozen lines.
        fcntl(&stdout, FcntlArg::F_SETPIPE_SZ(4096)).expect("shrink the pipe");
        fcntl(&stdout, FcntlArg::F_SETFL(OFlag::O_NONBLOCK)).expect("non-blocking read end");
        let mut watch = Self {
            child,
            stdout,
            partial: Vec::new(),
            lines: Vec::new(),
            eof: false,
        };
        watch.read_until("its watching line", |lines| {
            lines.iter().any(|l| l["watcher"]["health"] == "watching")
        });
        watch
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Bytes written by `watch` and not read yet (`FIONREAD`).
    fn bytes_in_pipe(&self) -> usize {
        let mut count: libc::c_int = 0;
        let fd = std::os::fd::AsRawFd::as_raw_fd(&self.stdout);
        // SAFETY: FIONREAD writes one c_int through a valid pointer.
        let rc = unsafe { libc::ioctl(fd, libc::FIONREAD, &mut count) };
        assert_eq!(rc, 0, "FIONREAD");
        usize::try_from(count).expect("non-negative")
    }

    fn signal(&self, signal: Signal) {
        let pid = Pid::from_raw(i32::try_from(self.pid()).expect("pid fits"));
        signal::kill(pid, signal).expect("signal watch");
    }

    /// Reads whatever the pipe holds now, line by line.
    fn read_available(&mut self) {
        let mut chunk = [0u8; 65536];
        loop {
            match self.stdout.read(&mut chunk) {
                Ok(0) => {
                    self.eof = true;
                    break;
                }
                Ok(n) => self.partial.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => panic!("read watch's stdout: {e}"),
            }
        }
        while let Some(end) = self.partial.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = self.partial.drain(..=end).collect();
            let text = String::from_utf8_lossy(&line[..end]).into_owned();
            let value = serde_json::from_str(&text)
                .unwrap_or_else(|e| panic!("watch printed non-JSON {text:?}: {e}"));
            self.lines.push(value);
        }
    }

    /// Reads until `done(every line so far)`; panics after
    /// [`PROCESS_TIMEOUT`] (a correctness bound) or at EOF.
    fn read_until(&mut self, what: &str, done: impl Fn(&[Value]) -> bool) {
        let deadline = Instant::now() + PROCESS_TIMEOUT;
        loop {
            self.read_available();
            if done(&self.lines) {
                return;
            }
            assert!(
                !self.eof && Instant::now() < deadline,
                "no {what} (eof: {}); last lines:\n{}",
                self.eof,
                self.tail()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Reads until `watch` closes its stdout; panics after
    /// [`PROCESS_TIMEOUT`].
    fn read_to_eof(&mut self) {
        let deadline = Instant::now() + PROCESS_TIMEOUT;
        loop {
            self.read_available();
            if self.eof {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "no EOF; last lines:\n{}",
                self.tail()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// The last lines read, for failure messages.
    fn tail(&self) -> String {
        let from = self.lines.len().saturating_sub(40);
        self.lines[from..]
            .iter()
            .map(Value::to_string)
            .collect::<Vec<_>>()
            .join("\n")
    }
}

impl Drop for StalledWatch {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `FAMILIES` families (`--aih churn/fI --tag "churn fI tJ"…`), each
/// held by one `locktop hold` child at a time, with a long `argv[0]`.
struct Churn<'a> {
    state: &'a Path,
    arg0: String,
    holders: Vec<Option<Holder>>,
    /// Every key a holder printed, and its family.
    names: BTreeMap<Name, usize>,
    rounds: usize,
}

impl<'a> Churn<'a> {
    fn new(state: &'a Path) -> Self {
        Self {
            state,
            arg0: format!("locktop-{}", "x".repeat(FAT_ARG0_LEN)),
            holders: (0..FAMILIES).map(|_| None).collect(),
            names: BTreeMap::new(),
            rounds: 0,
        }
    }

    fn family_args(family: usize) -> Vec<String> {
        let mut args = vec!["--wait".into(), "--aih".into(), format!("churn/f{family}")];
        for tag in 0..TAGS_PER_FAMILY {
            args.extend(["--tag".into(), format!("churn f{family} t{tag}")]);
        }
        args
    }

    /// One round: each family's holder is SIGKILLed (its keys go free) and
    /// a new holder takes the family (they go live again).
    fn round(&mut self) {
        for family in 0..FAMILIES {
            if let Some(mut old) = self.holders[family].take() {
                old.kill();
            }
            let args = Self::family_args(family);
            let holder = Holder::hold_as(self.state, &args, Some(&self.arg0));
            for name in held_names(&holder) {
                self.names.insert(name, family);
            }
            self.holders[family] = Some(holder);
        }
        self.rounds += 1;
    }

    /// Ends the churn: family 0 stays held, the others are SIGKILLed.
    /// Returns the truth every key must end on.
    fn settle(&mut self) -> BTreeMap<Name, Said> {
        for holder in self.holders.iter_mut().skip(1).flatten() {
            holder.kill();
        }
        let live_pid = self.holders[0].as_ref().expect("family 0 is held").pid();
        self.names
            .iter()
            .map(|(name, family)| {
                let said = if *family == 0 {
                    ("live".to_string(), vec![live_pid])
                } else {
                    ("free".to_string(), vec![])
                };
                (name.clone(), said)
            })
            .collect()
    }
}

/// `(kind, name)` of a key line; `None` for a watcher line.
fn key_name(line: &Value) -> Option<Name> {
    Some((
        line["kind"].as_str()?.to_string(),
        line["name"].as_str()?.to_string(),
    ))
}

/// The last line of each key: name → what it said.
fn last_per_key(lines: &[Value]) -> BTreeMap<Name, Said> {
    let mut last = BTreeMap::new();
    for line in lines {
        if let Some(name) = key_name(line) {
            let pids = line["pids"]
                .as_array()
                .expect("pids")
                .iter()
                .map(|pid| u32::try_from(pid.as_u64().expect("pid")).expect("pid fits"))
                .collect();
            let to = line["to"].as_str().expect("to").to_string();
            last.insert(name, (to, pids));
        }
    }
    last
}

/// Every key's lines chain: a line's `from` is what the key's previous
/// line said it went `to` (`null` after `removed`), so a folded line is
/// still a true summary of the transitions it stands for.
fn assert_lines_chain(lines: &[Value]) {
    let mut last_to: BTreeMap<Name, Value> = BTreeMap::new();
    for line in lines {
        let Some(name) = key_name(line) else { continue };
        if let Some(to) = last_to.get(&name) {
            let expected = if to == "removed" { &Value::Null } else { to };
            assert_eq!(&line["from"], expected, "{line} does not follow {to}");
        }
        last_to.insert(name, line["to"].clone());
    }
}

/// Lines that stand for more than one transition.
fn folded_lines(lines: &[Value]) -> usize {
    lines
        .iter()
        .filter(|l| l["folded"].as_u64().is_some_and(|n| n > 0))
        .count()
}

/// Transitions the lines stand for (each line one, plus what it folded).
fn transitions(lines: &[Value]) -> u64 {
    lines
        .iter()
        .filter(|l| key_name(l).is_some())
        .map(|l| 1 + l["folded"].as_u64().unwrap_or(0))
        .sum()
}

/// Churns `rounds` rounds, settles, and waits until `watch` has taken in
/// every change (idle), with its stdout still unread and full. Returns
/// the truth (`churn` keeps family 0 held) and the largest RSS sampled.
fn churn_while_stalled(
    watch: &StalledWatch,
    churn: &mut Churn,
    rounds: usize,
) -> (BTreeMap<Name, Said>, u64) {
    let mut max_kib = rss_kib(watch.pid());
    for _ in 0..rounds {
        churn.round();
        max_kib = max_kib.max(rss_kib(watch.pid()));
    }
    let truth = churn.settle();
    wait_until_idle(watch.pid(), IDLE_WINDOW, PROCESS_TIMEOUT);
    // The stall is real: watch's stdout is full and a thread of it is
    // blocked writing to it (when the kernel tells).
    assert!(watch.bytes_in_pipe() > 0, "watch wrote nothing");
    assert_ne!(
        some_thread_waits_in(watch.pid(), "pipe_write"),
        Some(false),
        "no thread of watch is blocked on its stdout"
    );
    (truth, max_kib.max(rss_kib(watch.pid())))
}

/// A stalled reader: thousands of transitions over 32 keys (hundreds of
/// them naming a holder with a ~100 KB command line) while nothing reads.
/// `watch`'s memory stays bounded (an unbounded queue of deltas grows by
/// ~100 KB per transition), and once the reader reads again the lines
/// chain, some say what they folded, and each key ends on the truth.
#[test]
#[ignore = "soak: seconds of load or churn; the full suite runs it (cargo test -- --include-ignored)"]
fn watch_with_a_stalled_reader_stays_bounded_and_ends_on_the_truth() {
    let _serial = serial_blocking();
    let (_tmp, state) = state_with_locks_root();
    let mut watch = StalledWatch::start(&state);
    let start_kib = rss_kib(watch.pid());
    let mut churn = Churn::new(&state);
    let (truth, max_kib) = churn_while_stalled(&watch, &mut churn, MEMORY_ROUNDS);
    let peak_kib = peak_rss_kib(watch.pid()).max(max_kib);
    eprintln!(
        "stalled watch RSS: {start_kib} KiB at start, max sampled {max_kib} KiB, \
         peak (VmHWM or sampled) {peak_kib} KiB, over {MEMORY_ROUNDS} rounds of {FAMILIES} holders"
    );
    assert!(
        peak_kib <= start_kib + RSS_GROWTH_BOUND_KIB,
        "watch grew from {start_kib} KiB to a peak of {peak_kib} KiB while its reader stalled"
    );

    watch.read_until("the final state of every churned key", |lines| {
        last_per_key(lines) == truth
    });
    eprintln!(
        "{} lines read, standing for {} key transitions ({} of them folded lines)",
        watch.lines.len(),
        transitions(&watch.lines),
        folded_lines(&watch.lines)
    );
    assert_lines_chain(&watch.lines);
    assert!(
        folded_lines(&watch.lines) > 0,
        "a stalled reader gets coalesced lines that say what they folded:\n{}",
        watch.tail()
    );
}

/// SIGINT while the reader is stalled and lines are pending: once the
/// reader reads again, every pending line arrives — each key's last one
/// is its final state — and `watch` exits 0. (The test reads right
/// after the signal: what is pending is a few KiB, far inside watch's
/// 2 s flush bound.)
#[test]
fn sigint_flushes_the_lines_a_stalled_reader_had_not_read_and_exits_0() {
    let _serial = serial_blocking();
    let (_tmp, state) = state_with_locks_root();
    let mut watch = StalledWatch::start(&state);
    let mut churn = Churn::new(&state);
    let (truth, _) = churn_while_stalled(&watch, &mut churn, SIGNAL_ROUNDS);

    watch.signal(Signal::SIGINT);
    watch.read_to_eof();
    let status = wait_with_timeout(&mut watch.child, PROCESS_TIMEOUT).expect("watch exits");
    assert_eq!(status.code(), Some(0), "{status:?}");
    assert_eq!(last_per_key(&watch.lines), truth, "{}", watch.tail());
    assert_lines_chain(&watch.lines);
    assert!(folded_lines(&watch.lines) > 0, "{}", watch.tail());
}

/// SIGTERM while nobody ever reads again: `watch` cannot flush, gives up
/// after its bound and exits 0 instead of hanging on the full pipe.
#[test]
#[ignore = "soak: seconds of load or churn; the full suite runs it (cargo test -- --include-ignored)"]
fn sigterm_with_a_reader_that_never_reads_again_still_exits_0() {
    let _serial = serial_blocking();
    let (_tmp, state) = state_with_locks_root();
    let mut watch = StalledWatch::start(&state);
    let mut churn = Churn::new(&state);
    churn_while_stalled(&watch, &mut churn, SIGNAL_ROUNDS);

    watch.signal(Signal::SIGTERM);
    let status = wait_with_timeout(&mut watch.child, PROCESS_TIMEOUT)
        .expect("watch exits although nobody reads its stdout");
    assert_eq!(status.code(), Some(0), "{status:?}");
}
