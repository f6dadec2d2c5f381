//! Chaos (issue 9, "Trust"): 20 real `locktop hold` children (16 on random
//! overlapping families of nested AIHs and tags, 4 retaking a tag of their
//! own as soon as it is released) hold for `LOCKTOP_CHAOS_SECS`
//! seconds (default 15) while the engine watches, once per probe mode —
//! the default (lock-free) one with 2,000 flocks held elsewhere on the
//! machine meanwhile ([`locks_elsewhere`]), as on a field host.
//! Children are SIGKILLed at random moments (right after spawn too, so
//! possibly mid-acquisition), SIGSTOPped then continued or killed, or
//! released; a third wait (`--wait`, the SDK's wait) behind busy
//! families. No sweep runs: the engine has only its events. It proves:
//!
//! - mutual exclusion is never violated: no claim is in two children's
//!   `[held, release]` intervals at once (the holders' own words), and no
//!   pool file ever has two exclusive holders in `/proc/locks` (sampled);
//! - the engine's view converges to the truth (the SDK's `try_held` plus
//!   `/proc/locks` holders) with holders left holding at the end, and
//!   again once every child is gone, within a correctness bound, and
//!   still equals it after quiescence;
//! - every hold that lasted [`REPORTED_AFTER`] or more was reported held
//!   with its holder's PID, for each of its claims (shorter ones may be
//!   folded: the engine reports states, not every event); with the
//!   kernel's lock events, every hold of [`KERNEL_REPORTED_AFTER`] or
//!   more, none of them over before the engine judged it;
//! - afterwards no file of the state dir is locked by anyone, this
//!   process included, and every child is reaped;
//! - this process's fds and RSS (the engine runs in it) stay flat.
//!
//! It reports (`--nocapture`), asserting nothing about them: interference
//! (tries that failed busy with no chaos child naming their claims alive,
//! i.e. only because of a probe) and the convergence times.
//! A failure prints its seed; `LOCKTOP_CHAOS_SEED=N` replays its choices.
//! As a bench: `LOCKTOP_CHAOS_SECS=60 cargo test --test machine chaos
//! -- --nocapture`.

mod checks;
mod children;
mod locks_elsewhere;
mod resources;
mod sampler;
mod scheduler;

use std::path::Path;
use std::time::Duration;

use locktop::engine::trace::Trace;
use locktop::liveness::probe::ProbeMode;
use tokio::time::Instant;

use crate::common::engine::{Engine, NO_SWEEP, blocking, state_with_locks_root};
use crate::common::{PROCESS_TIMEOUT, alive, serial};
use checks::Summary;
use children::ChaosChild;
use resources::Resources;
use sampler::Sampler;
use scheduler::{Config, Outcome};

/// Default chaos length (what CI runs), seconds.
const DEFAULT_SECS: u64 = 15;

/// Children on random families kept alive; with one per lane tag, 20.
const CHILDREN: usize = 16;

/// A hold at least this long must have been reported with its PID: above
/// the engine's 2 ms coalescing and its 100 ms `/proc/locks` interval,
/// with 150 ms of slack for a loaded machine. (Holds of up to 285 ms went
/// unnamed before the engine settled deferred states at every read; the
/// longest unnamed since is ~102 ms.)
const REPORTED_AFTER: Duration = Duration::from_millis(250);

/// The bar with the kernel's lock events (every lock is an event, judged
/// within a few milliseconds, with no `/proc/locks` interval): every hold
/// this long reported with its PID, none over before the engine judged
/// it — the engine in this (debug) process, beside two spinners.
const KERNEL_REPORTED_AFTER: Duration = Duration::from_millis(50);

/// Which holds a run must have reported with their PID.
#[derive(Debug, Clone, Copy)]
struct Bar {
    /// Holds at least this long.
    reported_after: Duration,
    /// A hold over before the engine judged it fails the run too (else it
    /// is printed, and fails only with `LOCKTOP_CHAOS_STRICT=1`).
    strict: bool,
}

impl Bar {
    fn of(kernel_events: bool) -> Self {
        if kernel_events {
            // Ten seeds in a row met it here once a shared lock's keeper
            // search waited like an exclusive one's (before: 3 of 6 runs
            // had 1-8 of ~390 holds over before their judgement).
            return Self {
                reported_after: KERNEL_REPORTED_AFTER,
                strict: true,
            };
        }
        Self {
            reported_after: REPORTED_AFTER,
            strict: std::env::var_os("LOCKTOP_CHAOS_STRICT").is_some_and(|v| v == "1"),
        }
    }
}

/// How often `/proc/locks` is sampled for two exclusive holders.
const SAMPLE_EVERY: Duration = Duration::from_millis(200);

/// Flatness bounds (growth from start to end, and to the middle on top of
/// the 3 pipe fds each child alive then costs this process).
const FD_GROWTH: usize = 64;
const RSS_GROWTH_KIB: u64 = 64 * 1024;

/// A child of the chaos tests holding locks elsewhere on the machine
/// ([`locks_elsewhere`]); does nothing unless run by them.
#[test]
#[ignore = "a child of the chaos tests: run by them, with its environment"]
fn locks_elsewhere_child() {
    let (Ok(dir), Ok(count)) = (
        std::env::var(locks_elsewhere::CHILD_DIR),
        std::env::var(locks_elsewhere::CHILD_COUNT),
    ) else {
        return;
    };
    locks_elsewhere::hold_in_child(Path::new(&dir), count.parse().expect("a count"));
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "soak: seconds of load or churn; the full suite runs it (cargo test -- --include-ignored)"]
async fn chaos_with_the_acquire_probe_keeps_exclusion_and_converges() {
    chaos(ProbeMode::Acquire, false).await;
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "soak: seconds of load or churn; the full suite runs it (cargo test -- --include-ignored)"]
async fn chaos_with_the_lock_free_probe_keeps_exclusion_and_converges() {
    chaos(ProbeMode::LockFree, false).await;
}

/// The same chaos, two CPU-bound loops beside it, with liveness from the
/// kernel's lock events (begun by a lock-free judgement): no inference,
/// so every hold the checks ask for is seen as it happens.
#[tokio::test(flavor = "multi_thread")]
#[ignore = "soak: seconds of load or churn; the full suite runs it (cargo test -- --include-ignored)"]
async fn chaos_with_the_kernel_events_keeps_exclusion_and_converges() {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let why = "skipped chaos with the kernel events: needs root (or CAP_PERFMON) to read them";
    if !crate::common::skip_unless(root, why) {
        return;
    }
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let hogs: Vec<_> = (0..2)
        .map(|_| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut spin = 0u64;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    spin = std::hint::black_box(spin.wrapping_add(1));
                }
            })
        })
        .collect();
    chaos(ProbeMode::LockFree, true).await;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for hog in hogs {
        let _ = hog.join();
    }
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "soak: seconds of load or churn; the full suite runs it (cargo test -- --include-ignored)"]
async fn chaos_with_the_passive_probe_keeps_exclusion_and_converges() {
    chaos(ProbeMode::Passive, false).await;
}

fn config() -> Config {
    let env = |name: &str| std::env::var(name).ok().and_then(|v| v.parse::<u64>().ok());
    Config {
        duration: Duration::from_secs(env("LOCKTOP_CHAOS_SECS").unwrap_or(DEFAULT_SECS)),
        seed: env("LOCKTOP_CHAOS_SEED").unwrap_or_else(|| fastrand::u64(..)),
        children: CHILDREN,
    }
}

/// What the run measured, for the report.
struct Measured {
    start: Resources,
    end: Resources,
    converge_held: Duration,
    converge_free: Duration,
    kept: usize,
    deltas: usize,
}

async fn chaos(mode: ProbeMode, kernel_events: bool) {
    let _serial = serial().await;
    let config = config();
    println!(
        "chaos {mode:?}: seed {} (replay with LOCKTOP_CHAOS_SEED={}), {:?}",
        config.seed, config.seed, config.duration
    );
    // Thousands of flocks held elsewhere on the machine, as on a field
    // host: every /proc/locks read spans pages (see locks_elsewhere) — for
    // the default probe. The opt-in probes take flocks of their own, on
    // the engine loop, and each stalls behind every page of every
    // /proc/locks read on the machine: with these locks they name 1-2 of
    // ~175 long holds too late here (measured; the README says so).
    let _elsewhere =
        (mode == ProbeMode::LockFree).then(|| blocking(locks_elsewhere::LocksElsewhere::hold));
    let began = Instant::now();
    let (_tmp, state) = state_with_locks_root();
    let (mut engine, trace) = if kernel_events {
        let source = locktop::cli::source_args::SourceArgs {
            source: locktop::cli::source_args::SourceFlag::Kernel,
            tracepoint_id: None,
        }
        .choose(&state)
        .expect("the kernel's lock events open as root");
        println!("chaos {mode:?}: liveness from the kernel's lock events");
        Engine::start_traced_from(&state, mode, NO_SWEEP, source.source)
    } else {
        Engine::start_traced(&state, mode, NO_SWEEP)
    };
    engine.synced().await;
    // The engine's own share of memory, apart from the test's records: a
    // real `locktop watch` process on the same run (passive: it takes no
    // exclusive lock, so it cannot add interference of its own kind).
    let mut monitor = blocking(|| {
        crate::common::locktop_command(&state, &["watch", "--json", "--probe", "passive"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("spawn the monitor process")
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    let monitor_start = Resources::of(monitor.id());
    let start = Resources::now();
    let sampler = Sampler::start(state.clone(), SAMPLE_EVERY);
    let mut reported = checks::ReportedHolds::default();
    let mut deltas = 0;
    let Outcome {
        mut finished,
        mut kept,
        mid,
    } = drive(
        &mut engine,
        &trace,
        &mut reported,
        &mut deltas,
        &state,
        config,
    )
    .await;

    let converge_held = converge(&mut engine, &state, Some(&kept)).await;
    blocking(|| {
        kept.iter_mut().for_each(ChaosChild::release);
        kept.iter_mut().for_each(|c| c.reap(PROCESS_TIMEOUT));
    });
    let kept_count = kept.len();
    finished.append(&mut kept);
    let converge_free = converge(&mut engine, &state, None).await;
    let sampled = sampler.finish();
    deltas += engine.log.len();
    checks::fold_reported(engine.log.clone(), &mut reported);
    checks::fold_trace(trace.take(), &mut reported);
    let end = Resources::now();
    let monitor_end = Resources::of(monitor.id());
    let monitor_peak_kib = crate::common::proc::peak_rss_kib(monitor.id());
    let _ = monitor.kill();
    let _ = monitor.wait();
    println!(
        "chaos {mode:?}: the monitor process (watch --json, passive): {monitor_start} -> end {monitor_end} \
         (peak {:.1} MB)",
        monitor_peak_kib as f64 / 1024.0
    );
    assert!(
        monitor_end.fds <= monitor_start.fds + 2
            && monitor_end.rss_kib <= monitor_start.rss_kib + RSS_GROWTH_KIB / 2,
        "the monitor process grew: {monitor_start} -> {monitor_end}"
    );
    let measured = Measured {
        start,
        end,
        converge_held,
        converge_free,
        kept: kept_count,
        deltas,
    };
    let bar = Bar::of(kernel_events);
    report(mode, bar, &finished, &reported, &sampled, mid, &measured);
    verify(&state, bar, &finished, &reported, &sampled, mid, &measured);
    println!("chaos {mode:?}: done in {:?}", began.elapsed());
}

/// Runs the scheduler on a blocking thread while this task keeps reading
/// the engine's deltas (folded into `reported` as they come, so the test
/// itself does not grow with the run).
async fn drive(
    engine: &mut Engine,
    trace: &Trace,
    reported: &mut checks::ReportedHolds,
    deltas: &mut usize,
    state: &Path,
    config: Config,
) -> Outcome {
    let state = state.to_path_buf();
    let task = tokio::task::spawn_blocking(move || scheduler::run(&state, &config));
    while !task.is_finished() {
        engine
            .recv_until(Instant::now() + Duration::from_millis(100))
            .await;
        engine.drain();
        let fold = engine.log.len().saturating_sub(40);
        *deltas += fold;
        checks::fold_reported(engine.log.drain(..fold), reported);
        checks::fold_trace(trace.take(), reported);
    }
    task.await.expect("the chaos scheduler panicked")
}

/// Waits (within the engines tests' correctness bound) until the view
/// equals the truth, measured from now (the last change: every child that
/// was to go is reaped); then checks it still does after quiescence.
/// With `kept`, the truth must also be what those holders printed.
async fn converge(engine: &mut Engine, state: &Path, kept: Option<&[ChaosChild]>) -> Duration {
    let since = Instant::now();
    let truth: Summary = checks::ground_truth(state).await;
    if let Some(kept) = kept {
        assert_eq!(
            truth,
            checks::expected_from_holders(&truth, kept),
            "the SDK's truth and what the kept holders printed differ"
        );
    }
    let what = format!("the truth {truth:#?}");
    engine
        .wait_view(&what, |view| view.summary() == truth)
        .await;
    let took = since.elapsed();
    engine.quiesce().await;
    assert_eq!(
        engine.view.summary(),
        truth,
        "after quiescence the view differs from the truth; last deltas:\n{}",
        engine.tail()
    );
    assert_eq!(checks::ground_truth(state).await, truth, "nothing changed");
    took
}

fn report(
    mode: ProbeMode,
    bar: Bar,
    children: &[ChaosChild],
    reported: &checks::ReportedHolds,
    sampled: &sampler::Sampled,
    mid: (Resources, usize),
    m: &Measured,
) {
    let count = |f: &dyn Fn(&ChaosChild) -> bool| children.iter().filter(|c| f(c)).count();
    let held = count(&|c| c.held.is_some());
    let released = count(&|c| c.code() == Some(0));
    let killed = count(&|c| c.killed);
    let killed_unheld = count(&|c| c.killed && c.held.is_none());
    let stopped = count(&|c| c.stops > 0);
    let stopped_killed = count(&|c| c.stops > 0 && c.killed);
    let waits = count(&|c| c.wait);
    let interference = checks::interference(children);
    let (violations, holds) = checks::exclusion_violations(children);
    let r = checks::every_change(children, reported, bar.reported_after);
    println!(
        "chaos {mode:?}: {} children ({waits} --wait), {held} held, {released} released, \
         {killed} SIGKILLed ({killed_unheld} before holding), {stopped} SIGSTOPped \
         ({stopped_killed} then killed), {} left holding at the end; {} deltas",
        children.len(),
        m.kept,
        m.deltas
    );
    println!(
        "chaos {mode:?}: exclusion: {} violations over {holds} claim holds; /proc/locks: {} samples, \
         {} with two holders, up to {} pool files held at once",
        violations.len(),
        sampled.samples,
        sampled.violations.len(),
        sampled.max_held_files
    );
    println!(
        "chaos {mode:?}: reported: {}/{} claim holds of {:?}+, \
         {} too late for the engine on this machine, \
         {}/{} shorter ones (longest not reported: {:?}); interference: {} of {} tries with no chaos holder \
         in the way failed busy ({} tries, {} busy)",
        r.long_ok,
        r.long,
        bar.reported_after,
        r.late.len(),
        r.short_ok,
        r.short,
        r.longest_unreported,
        interference.clear_busy,
        interference.clear,
        interference.tries,
        interference.busy
    );
    println!(
        "chaos {mode:?}: convergence {:?} with holders, {:?} all free; \
         this process: {} -> mid {} ({} children) -> end {}",
        m.converge_held, m.converge_free, m.start, mid.0, mid.1, m.end
    );
}

fn verify(
    state: &Path,
    bar: Bar,
    children: &[ChaosChild],
    reported: &checks::ReportedHolds,
    sampled: &sampler::Sampled,
    mid: (Resources, usize),
    m: &Measured,
) {
    let unexpected = checks::unexpected_exits(children);
    assert!(unexpected.is_empty(), "unexpected exits: {unexpected:#?}");
    let (violations, _) = checks::exclusion_violations(children);
    assert!(violations.is_empty(), "mutual exclusion: {violations:#?}");
    assert!(
        sampled.violations.is_empty(),
        "/proc/locks: {:#?}",
        sampled.violations
    );
    let reported_holds = checks::every_change(children, reported, bar.reported_after);
    // A long hold the engine got wrong fails the run: a probe inside it
    // said free, its PID never followed a held probe and a lookup after
    // it, or its events were never read. (Both causes found so far were of the first kind: a
    // holder's line slipping between the pages of one /proc/locks read,
    // and the SDK unlinking a gate a waiter had just locked.)
    assert!(
        reported_holds.missed.is_empty(),
        "holds never reported: {:#?}",
        reported_holds.missed
    );
    // A hold the engine was too late for — it read the events, but did
    // not probe before the hold ended — is a starved machine, not a lie:
    // printed, and failed only where asked (LOCKTOP_CHAOS_STRICT=1).
    if !reported_holds.late.is_empty() {
        eprintln!(
            "LATE — holds over before the engine probed them: {:#?}",
            reported_holds.late
        );
        assert!(
            !bar.strict,
            "holds never reported in time: {:#?}",
            reported_holds.late
        );
    }
    let left = checks::locks_left(state);
    assert!(left.is_empty(), "locks left on the state dir: {left:#?}");
    let running: Vec<u32> = children
        .iter()
        .filter(|c| c.running() || alive(c.pid))
        .map(|c| c.pid)
        .collect();
    assert!(running.is_empty(), "children left behind: {running:?}");
    let (mid, mid_children) = mid;
    assert!(
        m.end.fds <= m.start.fds + FD_GROWTH
            && mid.fds <= m.start.fds + FD_GROWTH + 3 * mid_children,
        "fds grew: {} -> {} -> {}",
        m.start.fds,
        mid.fds,
        m.end.fds
    );
    assert!(
        m.end.rss_kib <= m.start.rss_kib + RSS_GROWTH_KIB
            && mid.rss_kib <= m.start.rss_kib + RSS_GROWTH_KIB,
        "RSS grew: {} -> {} -> {}",
        m.start,
        mid,
        m.end
    );
}
