//! Holders no write reports, and the periodic sweep: a holder that opened
//! the lock files read-only, as util-linux `flock(1)` does, makes only an
//! IN_OPEN when it locks and an IN_CLOSE_NOWRITE (which notify does not
//! watch) when it lets go. The engine compares opened files with
//! `/proc/locks` and re-probes a key whose holder exited; the sweep stays
//! the net for the rest, and runs off the engine loop, so events are still
//! handled while a sweep is under way.

use std::time::Duration;

use crate::common::engine::{Engine, NO_SWEEP, blocking, hold, tag};
use crate::common::flock::{FlockGroup, flock_chain};
use crate::common::{serial, state_in_tempdir};
use locktop::disk::LockKey;
use locktop::engine::trace::Stage;
use locktop::engine::{EngineCommand, Liveness};
use locktop::liveness::probe::ProbeMode;
use locktop::locks::agent_tag_lock;
use locktop::locks::escape::{announce_path, gate_path};

/// Both files of a claim held through read-only descriptors.
fn flock_holder(state: &std::path::Path, tag_name: &str) -> FlockGroup {
    let (dir, key) = agent_tag_lock(state, tag_name);
    flock_chain(&[gate_path(&dir, &key), announce_path(&dir, &key)])
}

#[tokio::test(flavor = "multi_thread")]
async fn a_read_only_holder_is_seen_at_its_open_and_gone_at_its_exit_without_a_sweep() {
    let _serial = serial().await;
    for mode in [ProbeMode::LockFree, ProbeMode::Passive, ProbeMode::Acquire] {
        let (_tmp, state) = state_in_tempdir();
        // Make the claim's files exist (a holder that came and went).
        drop(blocking(|| hold(&state, &["--tag", "ro"])));
        let mut engine = Engine::start(&state, mode, NO_SWEEP);
        engine.synced().await;
        engine
            .wait_view("ro free", |view| {
                view.liveness(&tag("ro")) == Some(Liveness::Free)
            })
            .await;

        // Its only event is an IN_OPEN per file: the engine compares the
        // opened files with /proc/locks.
        let mut holder = flock_holder(&state, "ro");
        let pid = holder.pid();
        engine
            .wait_view("ro live, held by flock(1), seen at its open", |view| {
                // The outer flock holds the gate, its child the announce.
                view.get(&tag("ro")).is_some_and(|state| {
                    state.liveness == Liveness::Live && state.holders.iter().any(|p| p.pid == pid)
                })
            })
            .await;

        // Its release is an IN_CLOSE_NOWRITE, which notify does not watch:
        // the once-a-second holder refresh sees the holder gone.
        holder.kill_group();
        engine
            .wait_view("ro free again after the read-only holder exited", |view| {
                view.liveness(&tag("ro")) == Some(Liveness::Free)
            })
            .await;
        assert_eq!(engine.sweeps(), 1, "{mode:?}: only the initial sweep ran");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn events_are_handled_while_background_sweeps_run() {
    let _serial = serial().await;
    let (_tmp, state) = state_in_tempdir();
    // Sweeping all the time: every event below lands during or between
    // background sweeps, and must still be reported (and not undone by an
    // older sweep's findings).
    let mut engine = Engine::start(&state, ProbeMode::Acquire, Duration::from_millis(1));
    for round in 0..5 {
        let name = format!("busy-{round}");
        let mut holder = blocking(|| hold(&state, &["--tag", name.as_str()]));
        let pid = holder.pid();
        engine
            .wait_view("the new holder live with its PID", |view| {
                view.is(&tag(&name), Liveness::Live, &[pid])
            })
            .await;
        blocking(|| holder.kill());
        engine
            .wait_view("the killed holder's key free", |view| {
                view.liveness(&tag(&name)) == Some(Liveness::Free)
            })
            .await;
    }
    assert!(
        engine.sweeps() > 5,
        "sweeps ran meanwhile: {}",
        engine.sweeps()
    );
}

/// The gate held, the announce never taken — a holder stopped
/// mid-acquisition, as far as any probe can tell.
fn gate_only_holder(state: &std::path::Path, tag_name: &str) -> FlockGroup {
    let (dir, key) = agent_tag_lock(state, tag_name);
    flock_chain(&[gate_path(&dir, &key)])
}

#[tokio::test(flavor = "multi_thread")]
async fn a_claim_stuck_mid_acquisition_reads_in_flight_in_both_modes() {
    let _serial = serial().await;
    let (_tmp, state) = state_in_tempdir();
    drop(blocking(|| hold(&state, &["--tag", "stuck"])));
    let holder = gate_only_holder(&state, "stuck");
    let pid = holder.pid();
    // flock(1)'s acquire makes no event the engine keeps (only IN_OPEN), so
    // the engine must find it at its initial sync: wait until it is taken.
    let (dir, key) = agent_tag_lock(&state, "stuck");
    let gate = gate_path(&dir, &key);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !locktop::liveness::proc_locks::LockIndex::read()
        .unwrap()
        .claim(&gate, &announce_path(&dir, &key))
        .holders
        .contains(&pid)
    {
        assert!(
            std::time::Instant::now() < deadline,
            "flock(1) never took the gate"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    for mode in [ProbeMode::LockFree, ProbeMode::Acquire, ProbeMode::Passive] {
        // The SDK's try_held alone would spin forever here; the engine's
        // probe is bounded and says in-flight, with the gate's holder.
        let mut engine = Engine::start(&state, mode, Duration::from_secs(3600));
        engine.synced().await;
        engine
            .wait_view("stuck in-flight with the gate holder's PID", |view| {
                view.get(&tag("stuck")).is_some_and(|state| {
                    state.liveness == Liveness::InFlight
                        && state.holders.iter().any(|p| p.pid == pid)
                })
            })
            .await;
    }
    drop(holder);
}

/// A claim found in flight by an event-driven probe is probed again a
/// coalescing window later, not waited for in place: one stuck
/// acquisition must not hold up every change behind it for the whole
/// in-flight bound. The trace shows it as several probes of the key (a
/// probe waiting in place is one).
#[tokio::test(flavor = "multi_thread")]
async fn a_claim_in_flight_is_probed_again_not_waited_for() {
    let _serial = serial().await;
    let (_tmp, state) = state_in_tempdir();
    drop(blocking(|| hold(&state, &["--tag", "stuck"])));
    let (dir, key) = agent_tag_lock(&state, "stuck");
    let holder = gate_only_holder(&state, "stuck").wait_locked(&gate_path(&dir, &key));
    let stuck = LockKey::from_coord(&state, &dir, &key);
    for mode in [ProbeMode::LockFree, ProbeMode::Acquire, ProbeMode::Passive] {
        let (mut engine, trace) = Engine::start_traced(&state, mode, NO_SWEEP);
        engine.synced().await;
        trace.take();
        engine
            .handle
            .commands
            .send(EngineCommand::Reprobe(vec![stuck.clone()]))
            .unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        let mut probes = 0;
        while probes < 2 {
            assert!(
                std::time::Instant::now() < deadline,
                "{mode:?}: the in-flight claim was probed {probes} time(s) in 10 s: waited for in place"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
            probes += trace
                .take()
                .iter()
                .filter(|r| r.key == stuck && matches!(r.stage, Stage::Probed(_)))
                .count();
        }
    }
    drop(holder);
}
