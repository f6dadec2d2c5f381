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

/// Nanoseconds the threads of `pid` have run plus waited on a run queue
/// (`/proc/<pid>/task/*/schedstat`): unchanged ⇔ none was running or
/// runnable in between.
fn cpu_activity_ns(pid: u32) -> u64 {
    let tasks = Path::new("/proc").join(pid.to_string()).join("task");
    let entries = std::fs::read_dir(&tasks).unwrap_or_else(|e| panic!("{tasks:?}: {e}"));
    entries
        .filter_map(|entry| std::fs::read_to_string(entry.ok()?.path().join("schedstat")).ok())
        .map(|line| {
            line.split_whitespace()
                .take(2)
                .filter_map(|field| field.parse::<u64>().ok())
                .sum::<u64>()
        })
        .sum()
}

/// Waits until no thread of `pid` has run (or waited to run) for a whole
/// `window`: everything it had to do with what happened before (events
/// queued in the kernel, its own short timers) is done. Panics after
/// `timeout`.
pub fn wait_until_idle(pid: u32, window: Duration, timeout: Duration) {
    let deadline = Instant::now() + timeout;
    let mut last = cpu_activity_ns(pid);
    let mut quiet_since = Instant::now();
    loop {
        std::thread::sleep(Duration::from_millis(50));
        let now = cpu_activity_ns(pid);
        if now != last {
            last = now;
            quiet_since = Instant::now();
        } else if quiet_since.elapsed() >= window {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "pid {pid} never stayed idle for {window:?} within {timeout:?}"
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
