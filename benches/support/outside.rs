//! What the benches that drive the `locktop` binary from the outside
//! share (`scale` and `journal`, and section 7 of `engine`): child
//! locktops, a fixture of keys held by real `locktop hold` processes,
//! `watch`'s peak RSS, a churn of holders, `inotifywait -m -r` beside
//! them, a process's CPU from `/proc/PID/stat` and its threads' context
//! switches, and a monitor on a pseudo-terminal.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, channel};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::*;

/// A fixture's shape.
#[derive(Clone, Copy)]
pub struct Size {
    pub tags: usize,
    pub instances: usize,
    pub parents: usize,
}

impl Size {
    pub fn keys(&self) -> usize {
        self.tags + self.instances
    }
}

/// Spawns `locktop --state-dir STATE <args>`, stdin null, stdout piped,
/// stderr as asked.
pub fn spawn_locktop(bin: &Path, state: &Path, args: &[&str], stderr: Stdio) -> Guarded {
    let child = Command::new(bin)
        .arg("--state-dir")
        .arg(state)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(stderr)
        .spawn()
        .unwrap_or_else(|e| panic!("spawning {} {args:?}: {e}", bin.display()));
    Guarded::new(child)
}

/// SIGTERM, then SIGKILL if it has not exited within 5 s; reaped.
pub fn stop(child: &mut Guarded) {
    child.signal(libc::SIGTERM);
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        if child.try_wait().is_some() {
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    child.sigkill();
    child.wait();
}

/// Reads every line of `out` on a thread of its own (so the child never
/// blocks on a full pipe), counting them in `count`, and sends the time
/// of the first line `wanted` accepts (`wanted` sees every line, so it
/// may count them too).
pub fn drain_lines(
    out: impl Read + Send + 'static,
    count: Arc<AtomicUsize>,
    wanted: impl Fn(&str) -> bool + Send + 'static,
) -> (Receiver<Instant>, std::thread::JoinHandle<()>) {
    let (tx, rx) = channel();
    let thread = std::thread::spawn(move || {
        let mut sent = false;
        for line in BufReader::new(out).lines() {
            let Ok(line) = line else { break };
            count.fetch_add(1, Ordering::Relaxed);
            if wanted(&line) && !sent {
                sent = true;
                let _ = tx.send(Instant::now());
            }
        }
    });
    (rx, thread)
}

/// A peak RSS in MB.
pub fn mb(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

pub fn vm_hwm(pid: u32) -> u64 {
    vm_status_kib(pid, "VmHWM:").unwrap_or(0)
}

/// A fixture with its holders (killed when dropped).
pub struct Fixture {
    pub size: Size,
    pub state: PathBuf,
    pub held: Arc<HeldSet>,
    _holders: Vec<Holder>,
}

/// The held keys and who holds them: name → (index, kind, holder PID).
/// Names are unique across kinds in these fixtures.
pub struct HeldSet {
    pub keys: HashMap<String, (usize, &'static str, u32)>,
}

impl HeldSet {
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// True when `kind`/`name` is a held key and `liveness` + `pids` say
    /// exactly that its holder holds it; `None` when it is no held key.
    pub fn judge(
        &self,
        kind: &str,
        name: &str,
        liveness: &str,
        pids: &[u32],
    ) -> Option<(usize, bool)> {
        let (index, want_kind, pid) = *self.keys.get(name)?;
        if want_kind != kind {
            return None;
        }
        Some((index, liveness == "live" && pids == [pid]))
    }
}

/// Creates `size` free keys in `dir`, then `holders` holders of the
/// first `holders × keys_per_holder` (each `--aih <a child AIH> --tag …`).
pub fn make_fixture(
    bin: &Path,
    dir: &Path,
    size: Size,
    holders: usize,
    keys_per_holder: usize,
) -> Fixture {
    let state = dir.to_path_buf();
    let tags: Vec<String> = (0..size.tags).map(tag_name).collect();
    let aihs = instance_names(size.instances, size.parents);
    let created = create_free_keys_touch(&state, &tags, &aihs);
    let tags_per_holder = keys_per_holder - 1;
    assert!(
        size.instances >= size.parents + holders && size.tags >= holders * keys_per_holder,
        "the fixture is too small for its holders"
    );
    let spawn_start = Instant::now();
    let mut spawned = Vec::new();
    let mut keys = HashMap::new();
    let mut retries = 0;
    for h in 0..holders {
        let aih = &aihs[size.parents + h];
        let mine = &tags[h * tags_per_holder..(h + 1) * tags_per_holder];
        let mut family = vec!["--aih".to_string(), aih.clone()];
        for tag in mine {
            family.push("--tag".into());
            family.push(tag.clone());
        }
        let (holder, failed) = spawn_holder_retrying(bin, &state, &family);
        retries += failed;
        let pid = holder.pid();
        let index = keys.len();
        keys.insert(aih.clone(), (index, "instance", pid));
        for tag in mine {
            let index = keys.len();
            keys.insert(tag.clone(), (index, "tag", pid));
        }
        spawned.push(holder);
    }
    say(format!(
        "   fixture: {} keys ({} tags + {} instance AIHs under {} parents) written in {} ({} files); \
         {} held by {} `locktop hold --aih A --tag …` × {} keys (spawned in {}{})",
        thousands(size.keys()),
        thousands(size.tags),
        thousands(size.instances),
        thousands(size.parents),
        fmt_dur(created),
        thousands(2 * size.keys()),
        thousands(keys.len()),
        holders,
        keys_per_holder,
        fmt_dur(spawn_start.elapsed()),
        if retries > 0 {
            format!(", {retries} busy retries")
        } else {
            String::new()
        }
    ));
    Fixture {
        size,
        state,
        held: Arc::new(HeldSet { keys }),
        _holders: spawned,
    }
}

/// `locktop watch` until its `synced:` line (or `timeout`), then
/// `settle`, then its VmHWM; stopped with SIGTERM.
pub fn run_watch(
    bin: &Path,
    state: &Path,
    settle: Duration,
    timeout: Duration,
) -> (Option<Duration>, u64) {
    let start = Instant::now();
    let mut child = spawn_locktop(bin, state, &["watch"], Stdio::null());
    let stdout = child.child_mut().stdout.take().expect("piped");
    let (synced, reader) = drain_lines(stdout, Arc::default(), |line| line.contains(" synced: "));
    let synced = synced
        .recv_timeout(timeout)
        .ok()
        .map(|at| at.duration_since(start));
    std::thread::sleep(settle);
    let kib = vm_hwm(child.pid());
    stop(&mut child);
    let _ = reader.join();
    (synced, kib)
}

/// `inotifywait`'s version line, if it is installed.
pub fn inotifywait_version() -> Option<String> {
    let out = Command::new("inotifywait")
        .arg("--help")
        .stdin(Stdio::null())
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    Some(
        text.lines()
            .next()
            .unwrap_or("inotifywait")
            .trim()
            .to_string(),
    )
}

/// The `skipped:` line of a section that needs inotifywait where it is
/// not installed (a panic under `LOCKTOP_REQUIRE_ALL=1`).
pub fn inotifywait_missing() -> String {
    skipped("skipped: inotifywait not installed (apt install inotify-tools)".into())
}

/// `inotifywait -m -r DIR` (run without `-q` only to read its "Watches
/// established." line), its stdout drained and its lines counted.
pub struct Inotifywait {
    pub process: Guarded,
    /// Lines it printed so far.
    pub lines: Arc<AtomicUsize>,
    /// When its watches were established.
    pub ready: Receiver<Instant>,
    reader: std::thread::JoinHandle<()>,
}

impl Inotifywait {
    /// Starts it on `dir` (panics where inotifywait is not installed:
    /// ask [`inotifywait_version`] first).
    pub fn spawn(dir: &Path) -> Self {
        let mut process = Guarded::new(
            Command::new("inotifywait")
                .args(["-m", "-r"])
                .arg(dir)
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("spawn inotifywait"),
        );
        let lines = Arc::new(AtomicUsize::new(0));
        let (_, reader) = drain_lines(
            process.child_mut().stdout.take().expect("piped"),
            lines.clone(),
            |_| false,
        );
        let (ready, _) = drain_lines(
            process.child_mut().stderr.take().expect("piped"),
            Arc::default(),
            |line| line.contains("Watches established"),
        );
        Self {
            process,
            lines,
            ready,
            reader,
        }
    }

    /// Stops it ([`stop`]) and joins its reader.
    pub fn finish(mut self) {
        stop(&mut self.process);
        let _ = self.reader.join();
    }
}

/// What one thread has done so far.
#[derive(Debug, Clone, Default)]
pub struct ThreadCounts {
    /// Its name (`comm`).
    pub name: String,
    /// Its voluntary context switches (`/proc/PID/task/TID/status`).
    pub switches: u64,
    /// Its time on a CPU, in nanoseconds (`/proc/PID/task/TID/schedstat`,
    /// its first field: exact, where utime + stime count 10 ms ticks).
    pub on_cpu_ns: u64,
}

/// Each live thread of `pid` by TID, with what it has done so far (the
/// process's own `/proc/PID/status` counts its main thread's switches
/// alone). A thread that ended is no longer listed.
pub fn thread_counts(pid: u32) -> HashMap<u32, ThreadCounts> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return HashMap::new();
    };
    tasks
        .filter_map(|task| {
            let task = task.ok()?;
            let tid: u32 = task.file_name().to_str()?.parse().ok()?;
            let name = std::fs::read_to_string(task.path().join("comm")).ok()?;
            let status = std::fs::read_to_string(task.path().join("status")).ok()?;
            let switches = status
                .lines()
                .find_map(|line| line.strip_prefix("voluntary_ctxt_switches:"))?
                .trim()
                .parse()
                .ok()?;
            let schedstat = std::fs::read_to_string(task.path().join("schedstat")).ok()?;
            let on_cpu_ns = schedstat.split_whitespace().next()?.parse().ok()?;
            Some((
                tid,
                ThreadCounts {
                    name: name.trim().to_string(),
                    switches,
                    on_cpu_ns,
                },
            ))
        })
        .collect()
}

/// User + system CPU of a process (every thread, live or gone), in clock
/// ticks, from `/proc/PID/stat`.
pub fn cpu_ticks(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let fields: Vec<&str> = stat[stat.rfind(')')? + 1..].split_whitespace().collect();
    // After the command: state is field 3, utime 14, stime 15.
    Some(fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?)
}

pub fn clock_ticks_per_second() -> u64 {
    // SAFETY: plain sysconf query.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if ticks > 0 { ticks as u64 } else { 100 }
}

/// What the churn driver did.
#[derive(Default)]
pub struct ChurnStats {
    pub spawned: usize,
    pub failed: usize,
    pub sigkilled: usize,
    pub closed: usize,
    pub fresh: usize,
    /// Sum over spawns of how many holders were alive just after it.
    pub alive_sum: usize,
}

impl ChurnStats {
    /// `N holders spawned in T (r/s; F fresh AIHs), …, A alive on
    /// average`: what the driver did over a window of `elapsed`.
    pub fn describe(&self, elapsed: Duration) -> String {
        format!(
            "{} holders spawned in {} ({:.1}/s; {} fresh AIHs), {} refused (busy), {} SIGKILLed, \
             {} stdin closed, {:.1} alive on average",
            self.spawned,
            fmt_dur(elapsed),
            self.spawned as f64 / elapsed.as_secs_f64(),
            self.fresh,
            self.failed,
            self.sigkilled,
            self.closed,
            self.alive_sum as f64 / self.spawned.max(1) as f64,
        )
    }
}

/// A churn of `locktop hold` processes: about `alive` of them kept
/// alive, one spawned and the oldest ended `per_second` times a second
/// for `window`, on `agents` instance keys under `parents` parents.
#[derive(Clone, Copy)]
pub struct Churn {
    pub agents: usize,
    pub parents: usize,
    pub window: Duration,
    pub alive: usize,
    pub per_second: f64,
}

impl Churn {
    /// The churn of the full runs: 2,000 agents under 100 parents, ~6
    /// holders alive, 24 spawned (and as many ended) a second, for 20 s.
    pub const STEADY: Self = Self {
        agents: 2_000,
        parents: 100,
        window: Duration::from_secs(20),
        alive: 6,
        per_second: 24.0,
    };
    /// The smoke runs' (400 agents under 20 parents, for 1 s).
    pub const SMOKE: Self = Self {
        agents: 400,
        parents: 20,
        window: Duration::from_secs(1),
        ..Self::STEADY
    };
}

/// Runs `plan`'s churn for its window; `sample` is called at its end,
/// before any holder is stopped. Returns the driver's tally, and the
/// sample with the window's true length.
pub fn churn<T>(
    plan: &Churn,
    bin: &Path,
    state: &Path,
    aihs: &[String],
    sample: impl FnOnce() -> T,
) -> (ChurnStats, (T, Duration)) {
    use std::collections::{HashSet, VecDeque};
    let period = Duration::from_secs_f64(1.0 / plan.per_second);
    let mut stats = ChurnStats::default();
    // Alive: the holder and the existing AIH it holds (if it is one).
    let mut alive: VecDeque<(Holder, Option<usize>)> = VecDeque::new();
    let mut busy: HashSet<usize> = HashSet::new();
    let mut ending: Vec<Guarded> = Vec::new();
    let mut rng = fastrand::Rng::with_seed(7);
    let start = Instant::now();
    let mut n: u32 = 0;
    while start.elapsed() < plan.window {
        let due = start + period * n;
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        let (aih, existing) = if n.is_multiple_of(2) {
            let mut index = rng.usize(..aihs.len());
            while busy.contains(&index) {
                index = rng.usize(..aihs.len());
            }
            (aihs[index].clone(), Some(index))
        } else {
            // A fresh agent: a child of an existing one (a new directory
            // when that one had no children yet).
            stats.fresh += 1;
            let parent = &aihs[rng.usize(..aihs.len())];
            (
                format!("{parent}/{}-c{n}", agent_id(5_000_000 + u64::from(n))),
                None,
            )
        };
        let mut family = vec!["--aih".to_string(), aih];
        if n.is_multiple_of(3) {
            family.push("--tag".into());
            family.push(format!("churn tag:{}", n % 60));
        }
        match spawn_holder(bin, state, &family) {
            Ok(holder) => {
                stats.spawned += 1;
                if let Some(index) = existing {
                    busy.insert(index);
                }
                alive.push_back((holder, existing));
            }
            Err(_) => stats.failed += 1,
        }
        while alive.len() > plan.alive {
            let (holder, existing) = alive.pop_front().expect("one alive");
            if let Some(index) = existing {
                busy.remove(&index);
            }
            if (stats.sigkilled + stats.closed).is_multiple_of(2) {
                holder.process.sigkill();
                stats.sigkilled += 1;
            } else {
                stats.closed += 1;
            }
            // Its stdin closes here (a holder not killed releases and
            // exits by itself); reaped below, later.
            ending.push(holder.process);
        }
        stats.alive_sum += alive.len();
        ending.retain_mut(|process| process.try_wait().is_none());
        n += 1;
    }
    let sampled = sample();
    let elapsed = start.elapsed();
    drop(alive);
    drop(ending);
    (stats, (sampled, elapsed))
}

/// `locktop` on a pseudo-terminal, its screen kept by a vt100 parser;
/// killed and reaped when dropped.
pub struct PtyTui {
    child: Box<dyn portable_pty::Child + Send + Sync>,
    writer: Box<dyn Write + Send>,
    screen: Arc<Mutex<vt100::Parser>>,
    _master: Box<dyn portable_pty::MasterPty + Send>,
}

impl PtyTui {
    /// `bin ARGS…` on a `cols`×`rows` terminal.
    pub fn spawn(bin: &Path, args: &[&std::ffi::OsStr], rows: u16, cols: u16) -> Self {
        use portable_pty::{CommandBuilder, PtySize, native_pty_system};
        let pair = native_pty_system()
            .openpty(PtySize {
                rows,
                cols,
                pixel_width: 0,
                pixel_height: 0,
            })
            .expect("openpty");
        let mut command = CommandBuilder::new(bin);
        command.args(args);
        command.env("TERM", "xterm-256color");
        let child = pair.slave.spawn_command(command).expect("spawn the TUI");
        drop(pair.slave);
        let mut reader = pair.master.try_clone_reader().expect("pty reader");
        let writer = pair.master.take_writer().expect("pty writer");
        let nonzero = |n: u16| std::num::NonZeroU16::new(n).expect("non-zero");
        let screen = Arc::new(Mutex::new(vt100::Parser::new(
            nonzero(rows),
            nonzero(cols),
            0,
        )));
        let sink = screen.clone();
        std::thread::spawn(move || {
            let mut buffer = [0u8; 1 << 16];
            loop {
                match reader.read(&mut buffer) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => sink.lock().expect("screen").process(&buffer[..n]),
                }
            }
        });
        Self {
            child,
            writer,
            screen,
            _master: pair.master,
        }
    }

    /// Its PID.
    pub fn pid(&self) -> u32 {
        self.child.process_id().expect("the TUI's PID")
    }

    /// The screen's text.
    pub fn screen(&self) -> String {
        self.screen.lock().expect("screen").screen().contents()
    }

    /// Types `keys`.
    pub fn send(&mut self, keys: &[u8]) {
        let _ = self
            .writer
            .write_all(keys)
            .and_then(|()| self.writer.flush());
    }

    /// `q`, then SIGKILL if it has not exited within 5 s.
    pub fn quit(mut self) {
        let _ = self
            .writer
            .write_all(b"q")
            .and_then(|()| self.writer.flush());
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        // Drop kills it.
    }
}

impl Drop for PtyTui {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}
