//! The probe echo: every probe opens files and an acquire probe writes, so
//! the monitor's own probes come back as inotify events. With 1,000 keys
//! on disk, after real changes have been seen and the engine has settled,
//! it must run NO further probe: its own echo never feeds a probe loop.
//!
//! Counting probes over an idle interval is a correctness check (zero vs.
//! not zero), not a speed assertion.

use std::time::Duration;

use crate::common::engine::{Engine, NO_SWEEP, blocking, held_names, hold, instance, tag};
use crate::common::{group_args, run_locktop, serial, state_in_tempdir};
use locktop::engine::Liveness;
use locktop::liveness::probe::ProbeMode;

/// Stale keys written by one short-lived holder.
const STALE_KEYS: usize = 1000;

/// Time allowed for echo of the last change to be handled.
const SETTLE: Duration = Duration::from_secs(1);

/// The idle interval over which nothing may be probed.
const IDLE: Duration = Duration::from_secs(2);

async fn no_probe_loop_on_the_monitors_own_echo(mode: ProbeMode) {
    let (_tmp, state) = state_in_tempdir();
    let members: Vec<String> = (0..STALE_KEYS).map(|i| format!("k{i}")).collect();
    let members: Vec<&str> = members.iter().map(String::as_str).collect();
    let args = {
        let mut args = vec!["hold".to_string()];
        args.extend(group_args(&members));
        args
    };
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let done = blocking(|| run_locktop(&state, &args));
    assert_eq!(done.code(), 0, "{done:?}");

    let mut steady = hold(&state, &["--aih", "cli/daemon/steady-1", "--tag", "steady"]);
    let mut leaving = hold(&state, &["--aih", "cli/daemon/leaving-1"]);

    let mut engine = Engine::start(&state, mode, NO_SWEEP);
    engine.synced().await;
    assert_eq!(engine.view.keys().len(), STALE_KEYS + 3);

    // Real changes: a holder arrives (new directory + key, and a stale
    // key re-taken), one leaves, one dies.
    let mut arriving = hold(&state, &["--aih", "new/dir/arriving-1", "--tag", "k7"]);
    let pid = arriving.pid();
    engine
        .wait_view("the arriving holder live", |view| {
            view.is(&instance("new/dir/arriving-1"), Liveness::Live, &[pid])
                && view.is(&tag("k7"), Liveness::Live, &[pid])
        })
        .await;
    assert!(blocking(|| leaving.close_stdin()).success());
    engine
        .wait_key_to(&instance("cli/daemon/leaving-1"), Liveness::Free)
        .await;
    let names = held_names(&arriving);
    blocking(|| arriving.kill());
    engine
        .wait_view("the arriving holder's keys free", |view| {
            names
                .iter()
                .all(|n| view.liveness(n) == Some(Liveness::Free))
        })
        .await;

    tokio::time::sleep(SETTLE).await;
    let (probes, events) = (engine.probes(), engine.events());
    tokio::time::sleep(IDLE).await;
    let (probes_after, events_after) = (engine.probes(), engine.events());
    engine.drain();
    assert_eq!(
        probes_after - probes,
        0,
        "{mode:?}: the engine kept probing while nothing changed (probes {probes} → {probes_after}, events {events} → {events_after}); last deltas:\n{}",
        engine.tail()
    );
    assert_eq!(
        events_after, events,
        "{mode:?}: filesystem events kept arriving while nothing changed"
    );
    assert_eq!(engine.sweeps(), 1, "{mode:?}: only the initial sweep ran");
    assert!(
        engine.view.is(
            &instance("cli/daemon/steady-1"),
            Liveness::Live,
            &[steady.pid()]
        ),
        "{mode:?}: {:?}",
        engine.view.get(&instance("cli/daemon/steady-1"))
    );
    blocking(|| steady.close_stdin());
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "soak: seconds of load or churn; the full suite runs it (cargo test -- --include-ignored)"]
async fn acquire_mode_does_not_probe_its_own_echo_with_1000_keys() {
    let _serial = serial().await;
    no_probe_loop_on_the_monitors_own_echo(ProbeMode::Acquire).await;
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "soak: seconds of load or churn; the full suite runs it (cargo test -- --include-ignored)"]
async fn passive_mode_does_not_probe_its_own_echo_with_1000_keys() {
    let _serial = serial().await;
    no_probe_loop_on_the_monitors_own_echo(ProbeMode::Passive).await;
}

/// Keys created at once in the burst test: far past inotify's 16,384-event
/// queue once each key's files and the acquire probes' own writes count.
const BURST_KEYS: usize = 10_000;

/// How long a burst may take to be fully handled. A correctness bound:
/// an engine feeding on its own echo never gets there.
const BURST_SETTLE: Duration = Duration::from_secs(90);

/// A burst of 10,000 new keys (raw gate + announce pairs, as agents that
/// came and went leave them) under an acquire-probe engine: the queue
/// overflows, the engine rescans, and it must SETTLE — no probe of its own
/// may come back as a reason for another acquire probe, however late its
/// echo is delivered. Then nothing rewrites the lock files.
#[tokio::test(flavor = "multi_thread")]
#[ignore = "soak: seconds of load or churn; the full suite runs it (cargo test -- --include-ignored)"]
async fn a_burst_of_new_keys_settles_under_the_acquire_probe() {
    let _serial = serial().await;
    let (_tmp, state) = state_in_tempdir();
    let tags = crate::common::engine::tags_dir(&state);
    std::fs::create_dir_all(&tags).expect("tags dir");
    let mut engine = Engine::start(&state, ProbeMode::Acquire, NO_SWEEP);
    engine.synced().await;
    blocking(|| {
        for i in 0..BURST_KEYS {
            std::fs::write(tags.join(format!("burst{i}.lock")), b"").expect("gate");
            std::fs::write(tags.join(format!("burst{i}.live.lock")), b"").expect("announce");
        }
    });
    let deadline = std::time::Instant::now() + BURST_SETTLE;
    loop {
        let (events, probes) = (engine.events(), engine.probes());
        tokio::time::sleep(Duration::from_secs(1)).await;
        engine.drain();
        if engine.events() == events && engine.probes() == probes {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the engine never settled: {} events, {} probes so far",
            engine.events(),
            engine.probes()
        );
    }
    let free = engine
        .view
        .summary()
        .values()
        .filter(|(liveness, _)| *liveness == Liveness::Free)
        .count();
    assert_eq!(free, BURST_KEYS, "every burst key is seen, free");
    let mtime = |i: usize| {
        std::fs::metadata(tags.join(format!("burst{i}.live.lock")))
            .and_then(|m| m.modified())
            .expect("announce")
    };
    let before: Vec<_> = (0..BURST_KEYS).step_by(97).map(mtime).collect();
    tokio::time::sleep(SETTLE).await;
    let after: Vec<_> = (0..BURST_KEYS).step_by(97).map(mtime).collect();
    assert_eq!(before, after, "lock files are still being rewritten");
}
