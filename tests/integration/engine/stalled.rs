//! A consumer that stops reading: the engine must neither wait for it nor
//! queue one delta per change. Real locks through the SDK (in-process, so
//! thousands of transitions take a second) flip 200 tags 50 times while
//! nobody reads; afterwards the queued deltas are bounded by the channel
//! plus one per key, and applying them gives the true view.

use std::time::Duration;

use crate::common::engine::{Engine, NO_SWEEP, tag};
use crate::common::{serial, state_in_tempdir};
use locktop::context::Context;
use locktop::engine::{DELTA_QUEUE, Delta, FOLD_SLACK, Liveness};
use locktop::liveness::probe::ProbeMode;
use locktop::locks::{Family, try_acquire_family};

const TAGS: usize = 200;
const FLIPS: usize = 50;

#[tokio::test(flavor = "multi_thread")]
#[ignore = "soak: seconds of load or churn; the full suite runs it (cargo test -- --include-ignored)"]
async fn a_consumer_that_stops_reading_gets_a_bounded_folded_stream() {
    let _serial = serial().await;
    let (_tmp, state) = state_in_tempdir();
    let names: Vec<String> = (0..TAGS).map(|i| format!("flip-{i}")).collect();
    let holder = Context::new(state.clone());
    // The files exist before the engine starts.
    drop(
        try_acquire_family(holder.agent_locks(), &state, Family::Group(names.clone()))
            .await
            .unwrap()
            .expect("free"),
    );
    let mut engine = Engine::start(&state, ProbeMode::Passive, NO_SWEEP);
    engine.synced().await;
    engine.drain();
    let probes_before = engine.probes();

    // Nobody reads from here on: 2 × TAGS × FLIPS transitions.
    for _ in 0..FLIPS {
        let held = acquire_despite_probes(&holder, &state, &names).await;
        tokio::time::sleep(Duration::from_millis(30)).await;
        drop(held);
        tokio::time::sleep(Duration::from_millis(30)).await;
    }
    // The engine kept working meanwhile (it never waits for its consumer):
    // it probes every flip until it is quiet.
    let mut probes = engine.probes();
    loop {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let now = engine.probes();
        if now == probes {
            break;
        }
        probes = now;
    }
    let transitions = 2 * TAGS * FLIPS;
    assert!(
        probes - probes_before >= transitions as u64 / 2,
        "the engine stalled with its consumer: {} probes for {transitions} transitions",
        probes - probes_before
    );

    let first_unread = engine.log.len();
    let mut received = 0;
    while let Ok(delta) = engine.handle.deltas.try_recv() {
        received += 1;
        engine.apply_and_log(delta);
    }
    // Once the channel has room the outbox moves on; take what follows.
    tokio::time::sleep(Duration::from_millis(500)).await;
    while let Ok(delta) = engine.handle.deltas.try_recv() {
        received += 1;
        engine.apply_and_log(delta);
    }
    assert!(
        received <= DELTA_QUEUE + TAGS + FOLD_SLACK + 3,
        "{received} deltas queued for a consumer that read none of {transitions} transitions"
    );
    assert!(received > 0);
    for name in &names {
        assert_eq!(
            engine.view.liveness(&tag(name)),
            Some(Liveness::Free),
            "{name}: the folded stream still ends at the truth"
        );
    }
    assert!(
        engine.log[first_unread..]
            .iter()
            .all(|delta| !matches!(delta, Delta::Key { previous: None, .. })),
        "no key was announced as new: each folded delta names what the consumer had heard"
    );
}

/// Takes every tag of the group. The engine's probe of the flip just
/// before is a momentary shared lock, so a non-blocking acquire can fail
/// while it lasts (the interference the README measures): try again.
async fn acquire_despite_probes(
    holder: &Context,
    state: &std::path::Path,
    names: &[String],
) -> locktop::locks::AcquiredFamily {
    for _ in 0..100 {
        let family = Family::Group(names.to_vec());
        if let Some(held) = try_acquire_family(holder.agent_locks(), state, family)
            .await
            .expect("valid family")
        {
            return held;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    panic!("a tag stayed busy for 100 tries though only probes touch it");
}
