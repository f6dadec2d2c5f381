//! Section 6 of the engine bench: what the verdicts cost and how soon they
//! come (issue 10), on the main fixture (its held keys and holders):
//!
//! - a waiter blocking → its delta (`waiters` lists it), against the floor:
//!   the same kind of waiter seen by this process busy-polling
//!   `/proc/locks` (spawn + block + one read);
//! - SIGSTOP of a holder → the `stopped` verdict on one of its keys,
//!   against a naive once-a-second poll of that PID's `/proc/<pid>/stat`;
//! - the holder facts' cost per live key: the engine's CPU over an idle
//!   window with every key's holders re-read once a second (per PID, stat
//!   only), against re-reading `/proc/<pid>` in full per key.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use locktop::disk::LockKey;
use locktop::engine::{Delta, EngineConfig, EngineHandle, KeyState};
use locktop::liveness::ProcessInfo;
use locktop::liveness::probe::ProbeMode;
use locktop::liveness::process::ProcState;
use locktop::operate::verdict::{Role, Verdict, judge};

use super::{Guarded, cpu_self, fmt_dur, median, percentile, ratio, say, verdict};

/// What section 6 needs of the bench's fixture.
pub struct Fixture<'a> {
    /// The state dir.
    pub state: &'a Path,
    /// The PIDs of the `hold` children.
    pub holders: Vec<u32>,
    /// Samples per row.
    pub samples: usize,
    /// The idle window of the cost row.
    pub idle: Duration,
}

/// Runs the section; returns the target lines.
pub async fn section(fixture: Fixture<'_>) -> Vec<String> {
    say(format!(
        "\n6. VERDICTS  on the main fixture ({} holders); engine in acquire mode, sweep off",
        fixture.holders.len()
    ));
    let config = EngineConfig {
        probe: ProbeMode::Acquire,
        sweep_every: Duration::from_secs(3600),
        ..EngineConfig::default()
    };
    let context = locktop::context::Context::new(fixture.state.to_path_buf());
    let mut handle = locktop::engine::spawn(context, config);
    let held = held_keys(&mut handle).await;
    let targets = vec![
        waiter_row(&fixture, &mut handle, &held).await,
        stop_row(&fixture, &mut handle, &held).await,
        cost_row(&fixture, &mut handle, &held).await,
    ];
    targets
}

/// Every held key the engine reported by its first `Synced` (and 1 s of
/// quiet after it).
async fn held_keys(handle: &mut EngineHandle) -> Vec<(LockKey, KeyState)> {
    let mut held = std::collections::HashMap::new();
    let mut synced = false;
    let quiet = Duration::from_secs(1);
    loop {
        let within = if synced {
            quiet
        } else {
            Duration::from_secs(120)
        };
        match tokio::time::timeout(within, handle.deltas.recv()).await {
            Ok(Some(Delta::Key { key, state, .. })) => {
                held.insert(key, state);
            }
            Ok(Some(Delta::Synced { .. })) => synced = true,
            Ok(Some(_)) => {}
            _ => break,
        }
    }
    let mut held: Vec<_> = held
        .into_iter()
        .filter(|(_, state)| state.liveness.is_held() && !state.holders.is_empty())
        .collect();
    held.sort_by(|a, b| a.0.cmp(&b.0));
    held
}

/// Waits for a delta about `key` whose state satisfies `pred`; `None` after
/// `within`.
async fn wait_key(
    handle: &mut EngineHandle,
    key: &LockKey,
    within: Duration,
    mut pred: impl FnMut(&KeyState) -> bool,
) -> Option<Instant> {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        match tokio::time::timeout_at(deadline, handle.deltas.recv()).await {
            Ok(Some(Delta::Key { key: k, state, .. })) if &k == key && pred(&state) => {
                return Some(Instant::now());
            }
            Ok(Some(_)) => {}
            _ => return None,
        }
    }
}

fn flock_waiter(gate: &Path) -> Guarded {
    let child = Command::new("flock")
        .arg("-x")
        .arg(gate)
        .arg("true")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("util-linux flock");
    Guarded::new(child)
}

/// True once `/proc/locks` lists `pid` as a blocked waiter (`->`).
fn proc_locks_lists_waiter(pid: u32) -> bool {
    let text = std::fs::read_to_string("/proc/locks").unwrap_or_default();
    let pid = format!(" {pid} ");
    text.lines()
        .any(|line| line.contains("->") && line.contains(&pid))
}

async fn waiter_row(
    fixture: &Fixture<'_>,
    handle: &mut EngineHandle,
    held: &[(LockKey, KeyState)],
) -> String {
    let mut engine = Vec::new();
    let mut floor = Vec::new();
    let mut missed = 0;
    for (i, (key, _)) in held.iter().cycle().take(fixture.samples).enumerate() {
        let start = Instant::now();
        let mut waiter = flock_waiter(&key.gate_path());
        let pid = waiter.pid();
        let seen = wait_key(handle, key, Duration::from_secs(15), |state| {
            state.waiters.contains(&pid)
        })
        .await;
        match seen {
            Some(at) => engine.push(at - start),
            None => missed += 1,
        }
        waiter.sigkill();
        waiter.wait();
        // The floor: another waiter on another held key, found by polling.
        let (other, _) = &held[(i + 1) % held.len()];
        let start = Instant::now();
        let mut waiter = flock_waiter(&other.gate_path());
        while !proc_locks_lists_waiter(waiter.pid()) && start.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_micros(200));
        }
        floor.push(start.elapsed());
        waiter.sigkill();
        waiter.wait();
        tokio::time::sleep(Duration::from_millis(150)).await;
    }
    let p99 = percentile(&engine, 99.0);
    say(format!(
        "   waiter blocking → delta listing it ({} waiters, util-linux `flock -x gate`): median {}, \
         p99 {}, max {} ({} missed in 15 s) vs the floor (busy-polling /proc/locks): median {} → {}",
        engine.len(),
        fmt_dur(median(&engine)),
        fmt_dur(p99),
        fmt_dur(percentile(&engine, 100.0)),
        missed,
        fmt_dur(median(&floor)),
        ratio(median(&engine), median(&floor))
    ));
    format!(
        "(6) waiter → delta p99 ≤ 1 s: {}  {} (aim ≤ 50 ms: {})",
        fmt_dur(p99),
        verdict(missed == 0 && p99 <= Duration::from_secs(1)),
        verdict(missed == 0 && p99 <= Duration::from_millis(50))
    )
}

async fn stop_row(
    fixture: &Fixture<'_>,
    handle: &mut EngineHandle,
    held: &[(LockKey, KeyState)],
) -> String {
    let mut engine = Vec::new();
    let mut naive = Vec::new();
    let mut missed = 0;
    let stopped = |state: &KeyState| {
        matches!(
            judge(
                state,
                |_| Role::Other,
                std::time::SystemTime::now(),
                Duration::MAX
            ),
            Some(Verdict::Stopped { .. })
        )
    };
    for i in 0..fixture.samples.min(fixture.holders.len() * 2) {
        let pid = fixture.holders[i % fixture.holders.len()];
        let Some((key, _)) = held
            .iter()
            .find(|(_, state)| state.holders.first().is_some_and(|h| h.pid == pid))
        else {
            continue;
        };
        // A random phase against the engine's 1 s clock.
        tokio::time::sleep(Duration::from_millis(fastrand::u64(..1000))).await;
        let start = Instant::now();
        // SAFETY: a PID this bench spawned (a `hold` child it has not reaped).
        unsafe { libc::kill(pid as libc::pid_t, libc::SIGSTOP) };
        match wait_key(handle, key, Duration::from_secs(5), stopped).await {
            Some(at) => engine.push(at - start),
            None => missed += 1,
        }
        // SAFETY: as above.
        unsafe { libc::kill(pid as libc::pid_t, libc::SIGCONT) };
        wait_key(handle, key, Duration::from_secs(5), |s| !stopped(s)).await;
        // The naive poller: /proc/<pid>/stat every second, random phase.
        let phase = Duration::from_millis(fastrand::u64(..1000));
        let start = Instant::now();
        // SAFETY: as above.
        unsafe { libc::kill(pid as libc::pid_t, libc::SIGSTOP) };
        tokio::time::sleep(phase).await;
        while ProcessInfo::of(pid).state != Some(ProcState::Stopped) {
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        naive.push(start.elapsed());
        // SAFETY: as above.
        unsafe { libc::kill(pid as libc::pid_t, libc::SIGCONT) };
        wait_key(handle, key, Duration::from_secs(5), |s| !stopped(s)).await;
    }
    let p99 = percentile(&engine, 99.0);
    say(format!(
        "   SIGSTOP → `stopped` verdict ({} stops of `hold` children): median {}, p99 {}, max {} \
         ({} missed in 5 s) vs a naive 1 s poll of /proc/<pid>/stat: median {} → {}",
        engine.len(),
        fmt_dur(median(&engine)),
        fmt_dur(p99),
        fmt_dur(percentile(&engine, 100.0)),
        missed,
        fmt_dur(median(&naive)),
        ratio(median(&engine), median(&naive))
    ));
    format!(
        "(6) SIGSTOP → stopped p99 ≤ 2 s (the tests' bound): {}  {}",
        fmt_dur(p99),
        verdict(missed == 0 && p99 <= Duration::from_secs(2))
    )
}

async fn cost_row(
    fixture: &Fixture<'_>,
    handle: &mut EngineHandle,
    held: &[(LockKey, KeyState)],
) -> String {
    let refreshes0 = handle
        .stats
        .holder_refreshes
        .load(std::sync::atomic::Ordering::Relaxed);
    let cpu0 = cpu_self();
    tokio::time::sleep(fixture.idle).await;
    let engine_cpu = cpu_self() - cpu0;
    while handle.deltas.try_recv().is_ok() {}
    let pid_reads = handle
        .stats
        .holder_refreshes
        .load(std::sync::atomic::Ordering::Relaxed)
        - refreshes0;
    // Baseline: what a per-key refresh would cost — /proc/<pid> read in
    // full (command line, stat, parent, cgroup) for every held key.
    let pids: Vec<u32> = held
        .iter()
        .filter_map(|(_, state)| state.holders.first().map(|h| h.pid))
        .collect();
    let start = Instant::now();
    for pid in &pids {
        std::hint::black_box(ProcessInfo::of(*pid));
    }
    let per_key_full = start.elapsed();
    let refreshes = (pid_reads / fixture.holders.len().max(1) as u64).max(1) as u32;
    let ours = engine_cpu / refreshes;
    let keys = held.len().max(1) as u32;
    say(format!(
        "   holder facts: the engine's CPU over {} idle ({} PID reads = {} refreshes × {} holders, \
         {} held keys): {} per refresh = {} per live key vs a full /proc/<pid> read per key: {} \
         per pass = {} per key → {}",
        fmt_dur(fixture.idle),
        pid_reads,
        refreshes,
        fixture.holders.len(),
        held.len(),
        fmt_dur(ours),
        fmt_dur(ours / keys),
        fmt_dur(per_key_full),
        fmt_dur(per_key_full / keys),
        ratio(ours, per_key_full)
    ));
    format!(
        "(6) holder facts per live key ≤ a full /proc read per key: {} vs {}  {}",
        fmt_dur(ours / keys),
        fmt_dur(per_key_full / keys),
        verdict(ours <= per_key_full)
    )
}
