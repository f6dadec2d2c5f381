//! What a child process is doing, read from `/proc`: its memory (VmRSS,
//! VmHWM) and whether it has gone idle.
//!
//! "Idle" is measured, not guessed: the wait ends only once no thread of
//! the process has run or waited for a CPU during a whole window, so a
//! slow machine makes the wait longer, never wrong.

use std::path::Path;
use std::time::{Duration, Instant};

/// One `kB` field of `/proc/<pid>/status` (`VmRSS`, `VmHWM`), in KiB.
pub fn status_kib(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_else(|e| panic!("read /proc/{pid}/status: {e}"));
    status
        .lines()
        .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|value| value.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("no {field} in /proc/{pid}/status"))
}

/// The resident memory of `pid` now, in KiB.
pub fn rss_kib(pid: u32) -> u64 {
    status_kib(pid, "VmRSS")
}

/// The peak resident memory of `pid` over its life so far, in KiB.
pub fn peak_rss_kib(pid: u32) -> u64 {
    status_kib(pid, "VmHWM")
}

/// Each thread of `pid`: its name and the nanoseconds it has run
/// (`/proc/<pid>/task/*/{comm,schedstat}`, the latter's first field).
fn thread_runs(pid: u32) -> Vec<(String, u64)> {
    let tasks = Path::new("/proc").join(pid.to_string()).join("task");
    let entries = std::fs::read_dir(&tasks).unwrap_or_else(|e| panic!("{tasks:?}: {e}"));
    entries
        .filter_map(|entry| {
            let path = entry.ok()?.path();
            let ran = std::fs::read_to_string(path.join("schedstat")).ok()?;
            let ns = ran.split_whitespace().next()?.parse().ok()?;
            let name = std::fs::read_to_string(path.join("comm")).unwrap_or_default();
            Some((name.trim().to_string(), ns))
        })
        .collect()
}

/// Nanoseconds the threads of `pid` have run.
pub fn cpu_run_ns(pid: u32) -> u64 {
    thread_runs(pid).iter().map(|(_, ns)| ns).sum()
}

/// The share of a window a process may run and still count as idle: a
/// monitor on the kernel's lock events wakes for every flock on its
/// filesystem (the events are filtered by device), so beside other tests
/// flocking in their own temporary dirs it is never quite still; those
/// wake-ups cost it a few milliseconds a second.
const IDLE_SHARE: u32 = 50;

/// Waits until the threads of `pid` ran less than 1/[`IDLE_SHARE`] of a
/// whole `window`: everything it had to do with what happened before
/// (events queued in the kernel, its own short timers) is done. Panics
/// after `timeout`.
pub fn wait_until_idle(pid: u32, window: Duration, timeout: Duration) {
    let deadline = Instant::now() + timeout;
    let allowed = (window / IDLE_SHARE).as_nanos() as u64;
    let mut samples = std::collections::VecDeque::from([(Instant::now(), cpu_run_ns(pid))]);
    let mut least = u64::MAX;
    loop {
        std::thread::sleep(Duration::from_millis(50));
        let now = (Instant::now(), cpu_run_ns(pid));
        samples.push_back(now);
        while samples.len() > 1 && now.0.duration_since(samples[1].0) >= window {
            samples.pop_front();
        }
        let (since, ran_then) = samples[0];
        if now.0.duration_since(since) >= window {
            if now.1 - ran_then < allowed {
                return;
            }
            least = least.min(now.1 - ran_then);
        }
        assert!(
            Instant::now() < deadline,
            "pid {pid} never stayed idle for {window:?} within {timeout:?} \
             (it ran at least {:?} in every window; its threads: {})",
            Duration::from_nanos(least),
            thread_runs(pid)
                .iter()
                .map(|(name, ns)| format!("{name} {:?}", Duration::from_nanos(*ns)))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
}

/// Whether a thread of `pid` sleeps in a kernel function whose name
/// contains `wchan` (`/proc/<pid>/task/*/wchan`; `pipe_write`, or
/// `anon_pipe_write` on newer kernels: blocked writing a full pipe).
/// `None` when the kernel does not tell (every wchan reads `0`).
pub fn some_thread_waits_in(pid: u32, wchan: &str) -> Option<bool> {
    let tasks = Path::new("/proc").join(pid.to_string()).join("task");
    let entries = std::fs::read_dir(&tasks).unwrap_or_else(|e| panic!("{tasks:?}: {e}"));
    let wchans: Vec<String> = entries
        .filter_map(|entry| std::fs::read_to_string(entry.ok()?.path().join("wchan")).ok())
        .collect();
    if wchans
        .iter()
        .all(|w| w.trim() == "0" || w.trim().is_empty())
    {
        return None;
    }
    Some(wchans.iter().any(|w| w.contains(wchan)))
}
