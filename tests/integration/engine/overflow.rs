//! A real inotify queue overflow (no sysctl touched): producer threads
//! rewrite foreign files under the locks root, alternating between files so
//! the kernel cannot merge consecutive events, until the 16,384-event queue
//! overflows. The engine must say so (`Rescanning`), rescan, and end up
//! equal to the ground truth — including a holder that arrived and one that
//! died while events were being lost.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::common::engine::{
    DELTA_TIMEOUT, Engine, NO_SWEEP, Name, blocking, held_names, hold, instance, locks_dir,
};
use crate::common::{serial, state_in_tempdir};
use locktop::engine::{Delta, Liveness, WatcherHealth};
use locktop::liveness::probe::ProbeMode;

/// Foreign files the burst rewrites, round-robin.
const NOISE_FILES: usize = 16;
/// Producer threads (more than the cores of a small CI machine, so the
/// watcher thread cannot keep up).
const PRODUCERS: usize = 3;
/// The burst stops by itself after this long, overflow or not.
const BURST_LIMIT: Duration = Duration::from_secs(10);
/// How long the test waits for the overflow (within the burst).
const OVERFLOW_WAIT: Duration = Duration::from_secs(8);

/// A long name: every inotify event about the file carries it, so the
/// watcher's reads (1 KiB buffers) return only a few events each and fall
/// behind the writers for sure.
fn noise_name(i: usize) -> String {
    format!("noise-{i:02}-{}.txt", "n".repeat(200))
}

struct Burst {
    stop: Arc<AtomicBool>,
    writes: Arc<AtomicU64>,
    threads: Vec<JoinHandle<()>>,
}

impl Burst {
    fn start(dir: &Path) -> Self {
        std::fs::create_dir_all(dir).expect("mkdir noise");
        let files: Vec<Arc<File>> = (0..NOISE_FILES)
            .map(|i| Arc::new(File::create(dir.join(noise_name(i))).expect("create")))
            .collect();
        let stop = Arc::new(AtomicBool::new(false));
        let writes = Arc::new(AtomicU64::new(0));
        let threads = (0..PRODUCERS)
            .map(|t| {
                let files = files.clone();
                let stop = stop.clone();
                let writes = writes.clone();
                std::thread::spawn(move || {
                    let started = Instant::now();
                    let mut i = t;
                    while !stop.load(Ordering::Relaxed) && started.elapsed() < BURST_LIMIT {
                        for _ in 0..1024 {
                            // One IN_MODIFY per write; consecutive writes hit
                            // different files so none is merged.
                            let _ = files[i % files.len()].write_at(b"x", 0);
                            i += PRODUCERS;
                        }
                        writes.fetch_add(1024, Ordering::Relaxed);
                    }
                })
            })
            .collect();
        Self {
            stop,
            writes,
            threads,
        }
    }

    fn stop(self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        for thread in self.threads {
            thread.join().expect("producer");
        }
        self.writes.load(Ordering::Relaxed)
    }
}

impl Burst {
    /// Starts a burst under the locks root and waits until the engine
    /// reports an overflow. Panics (stopping the burst) if none comes.
    async fn until_overflow(state: &Path, engine: &mut Engine) -> Self {
        let burst = Burst::start(&locks_dir(state).join("noise"));
        burst.wait_overflow(engine).await
    }

    /// Waits until the engine reports an overflow. Panics (stopping the
    /// burst) if none comes.
    async fn wait_overflow(self, engine: &mut Engine) -> Self {
        let overflowed = tokio::time::timeout(
            OVERFLOW_WAIT,
            engine.wait_health(
                "Rescanning after an overflow",
                |h| matches!(h, WatcherHealth::Rescanning { reason } if reason.contains("overflow")),
            ),
        )
        .await;
        if overflowed.is_err() {
            let writes = blocking(|| self.stop());
            panic!("no inotify overflow after {writes} writes: cannot test the rescan path here");
        }
        self
    }

    /// Lets the queue keep overflowing a little longer, stops, and waits
    /// until the engine has handled the backlog of the storm.
    async fn finish(self, engine: &mut Engine) {
        tokio::time::sleep(Duration::from_millis(300)).await;
        let writes = blocking(|| self.stop());
        engine.quiesce().await;
        eprintln!(
            "burst: {writes} writes, {} overflow rescans so far, {} events received",
            overflow_rescans(engine),
            engine.events()
        );
    }
}

fn overflow_rescans(engine: &Engine) -> usize {
    engine
        .log
        .iter()
        .filter(|d| matches!(d, Delta::Health(WatcherHealth::Rescanning { .. })))
        .count()
}

/// 5. While the queue overflows, one holder arrives and one dies; after the
///    storm the view equals the ground truth, and events work again.
#[tokio::test(flavor = "multi_thread")]
async fn a_real_queue_overflow_is_reported_rescanned_and_the_view_stays_correct() {
    let _serial = serial().await;
    let (_tmp, state) = state_in_tempdir();
    let mut dying = hold(
        &state,
        &["--aih", "cli/daemon/dying-1", "--tag", "dying tag"],
    );
    let mut steady = hold(&state, &["--group", "steady.a", "--group", "steady b"]);
    let mut engine = Engine::start(&state, ProbeMode::Acquire, NO_SWEEP);
    engine.synced().await;
    let sweeps_before = engine.sweeps();

    let burst = Burst::until_overflow(&state, &mut engine).await;
    // While the queue keeps overflowing: one holder arrives (in directories
    // that already exist), one dies.
    let mut arriving = hold(
        &state,
        &["--aih", "cli/daemon/arriving-1", "--tag", "burst tag"],
    );
    let dying_names = held_names(&dying);
    blocking(|| dying.kill());
    burst.finish(&mut engine).await;

    let arriving_names = held_names(&arriving);
    let (arriving_pid, steady_pid) = (arriving.pid(), steady.pid());
    let steady_names = held_names(&steady);
    engine
        .wait_view("the ground truth after the burst", |view| {
            *view.health() == WatcherHealth::Watching
                && arriving_names
                    .iter()
                    .all(|n| view.is(n, Liveness::Live, &[arriving_pid]))
                && steady_names
                    .iter()
                    .all(|n| view.is(n, Liveness::Live, &[steady_pid]))
                && dying_names.iter().all(|n| view.is(n, Liveness::Free, &[]))
        })
        .await;
    let held: Vec<_> = engine
        .view
        .summary()
        .into_iter()
        .filter(|(_, (liveness, _))| *liveness != Liveness::Free)
        .map(|(name, _)| name)
        .collect();
    let mut expected: Vec<_> = arriving_names.iter().cloned().chain(steady_names).collect();
    expected.sort();
    assert_eq!(held, expected, "nothing else is held");
    assert!(
        engine.sweeps() > sweeps_before,
        "the overflow triggered a full rescan"
    );

    // Events work again after the storm (no sweep runs in this test).
    engine.quiesce().await;
    let sweeps_after = engine.sweeps();
    blocking(|| arriving.kill());
    engine
        .wait_view("the arriving holder free after the storm", |view| {
            arriving_names
                .iter()
                .all(|n| view.liveness(n) == Some(Liveness::Free))
        })
        .await;
    assert_eq!(engine.sweeps(), sweeps_after, "seen through events");
    blocking(|| steady.close_stdin());
}

/// Directories created while events were being lost: the rescan finds what
/// is in them, but unless the watcher also learns about them, nothing
/// that happens in them later is ever reported (until a periodic sweep).
/// Here 40 directories are created during the storm; afterwards a gate
/// file appears in each, and each must be reported through events.
#[tokio::test(flavor = "multi_thread")]
async fn directories_created_while_events_were_lost_are_watched_after_the_rescan() {
    let _serial = serial().await;
    const DIRS: usize = 40;
    let (_tmp, state) = state_in_tempdir();
    let mut steady = hold(&state, &["--aih", "steady/agent-1"]);
    let mut engine = Engine::start(&state, ProbeMode::Acquire, NO_SWEEP);
    engine.synced().await;

    // The kernel queue is full within milliseconds of the burst's start;
    // the directories are created while it overflows.
    let burst = Burst::start(&locks_dir(&state).join("noise"));
    tokio::time::sleep(Duration::from_millis(100)).await;
    // Directly in a watched directory: each new directory's watch hangs on
    // its own IN_CREATE (a lost parent would let notify add its whole
    // subtree later in one walk).
    let lost = locks_dir(&state).join("agents/instances");
    for i in 0..DIRS {
        std::fs::create_dir_all(lost.join(format!("d{i}"))).expect("mkdir");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let burst = burst.wait_overflow(&mut engine).await;
    burst.finish(&mut engine).await;
    // The rescan's walk watches each directory before it reads it, and
    // adding a watch waits for notify's thread, which the storm's backlog
    // keeps busy a little after the storm (the new watcher's own queue may
    // overflow once more meanwhile): the engine is back to watching once
    // that is read, not at once.
    loop {
        if *engine.view.health() != WatcherHealth::Watching {
            engine
                .wait_health("watching again after the storm", |h| {
                    *h == WatcherHealth::Watching
                })
                .await;
        }
        engine.quiesce().await;
        if *engine.view.health() == WatcherHealth::Watching {
            break;
        }
    }
    let sweeps = engine.sweeps();

    for i in 0..DIRS {
        std::fs::write(lost.join(format!("d{i}/agent-{i}.lock")), b"").expect("gate");
    }
    let names: Vec<Name> = (0..DIRS)
        .map(|i| instance(&format!("d{i}/agent-{i}")))
        .collect();
    let deadline = tokio::time::Instant::now() + DELTA_TIMEOUT;
    let missing = |engine: &Engine| -> Vec<Name> {
        names
            .iter()
            .filter(|n| engine.view.get(n).is_none())
            .cloned()
            .collect()
    };
    while !missing(&engine).is_empty() && engine.recv_until(deadline).await.is_some() {}
    let missing = missing(&engine);
    assert!(
        missing.is_empty(),
        "{} of {DIRS} directories created during the storm are not watched: no event for a gate created in {missing:?}",
        missing.len()
    );
    assert_eq!(engine.sweeps(), sweeps, "seen through events");
    blocking(|| steady.close_stdin());
}
