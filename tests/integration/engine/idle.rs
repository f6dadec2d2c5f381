//! Idle holders, on real processes: a holder that sleeps (a `locktop hold`
//! child waiting for its stdin) gets `idle_since` — and the `idle` verdict
//! — once it has used no CPU for the (test-lowered) threshold; one that
//! spins (a perl process that took both flocks itself) never does; one
//! that sleeps, then spins, is idle, then is not. Seen by the
//! once-a-second look at holders alone: no probe, no `/proc/locks` read.
//!
//! Every wait is a liveness bound, never a speed assertion.

use std::io::BufRead;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crate::common::engine::{Engine, NO_SWEEP, blocking, hold, tag};
use crate::common::{Holder, serial, state_in_tempdir};
use locktop::context::Context;
use locktop::engine::{Delta, EngineConfig, Liveness};
use locktop::liveness::probe::ProbeMode;
use locktop::operate::verdict::{Role, Verdict, judge};

/// The test's idle threshold (the default is 10 minutes).
const IDLE_AFTER: Duration = Duration::from_secs(2);

/// Takes the tag `name`'s gate and announce flocks in a perl process that
/// then sleeps `sleep_first` seconds and spins forever (the flock caller
/// itself: `/proc/locks` names it).
fn spinning_holder(state: &std::path::Path, name: &str, sleep_first: u32) -> Spinner {
    drop(Holder::hold(state, &["--tag", name])); // the claim's files
    let (dir, key) = locktop::locks::agent_tag_lock(state, name);
    let script = r#"use Fcntl qw(:flock);
        open(my $g, "+<", $ARGV[0]) or die "gate: $!";
        open(my $a, "+<", $ARGV[1]) or die "announce: $!";
        flock($g, LOCK_EX) or die; flock($a, LOCK_EX) or die;
        $| = 1; print "ready\n"; sleep $ARGV[2]; 1 while 1;"#;
    let mut child = Command::new("perl")
        .arg("-e")
        .arg(script)
        .arg(locktop::locks::escape::gate_path(&dir, &key))
        .arg(locktop::locks::escape::announce_path(&dir, &key))
        .arg(sleep_first.to_string())
        .stdout(Stdio::piped())
        .spawn()
        .expect("perl");
    let mut ready = String::new();
    std::io::BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut ready)
        .expect("ready");
    assert_eq!(ready.trim(), "ready", "perl did not lock");
    Spinner(child)
}

/// A spinning perl holder, SIGKILLed and reaped when dropped — also when
/// the test fails (a plain `Child` would be left spinning forever,
/// re-parented to init: that happened, and loaded the machine for an
/// hour).
struct Spinner(Child);

impl Spinner {
    fn id(&self) -> u32 {
        self.0.id()
    }
}

impl Drop for Spinner {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "soak: seconds of load or churn; the full suite runs it (cargo test -- --include-ignored)"]
async fn a_sleeping_holder_becomes_idle_and_a_spinning_one_never_does() {
    let _serial = serial().await;
    let (_tmp, state) = state_in_tempdir();
    let spinner = blocking(|| spinning_holder(&state, "busy", 0));
    let waker = blocking(|| spinning_holder(&state, "wakes", 8));
    let config = EngineConfig {
        probe: ProbeMode::Passive,
        sweep_every: NO_SWEEP,
        idle_after: IDLE_AFTER,
        ..EngineConfig::default()
    };
    let mut engine = Engine::start_config(Context::new(state.clone()), config);
    engine.synced().await;
    let mut sleeper = hold(&state, &["--tag", "sleepy"]);
    let (sleepy, busy, wakes) = (tag("sleepy"), tag("busy"), tag("wakes"));
    let spinner_pid = spinner.id();
    engine
        .wait_view("all three held", |view| {
            view.is(&sleepy, Liveness::Live, &[sleeper.pid()])
                && view.is(&busy, Liveness::Live, &[spinner_pid])
                && view.is(&wakes, Liveness::Live, &[waker.id()])
        })
        .await;
    let idle_now = |view: &crate::common::engine::View, name| {
        view.get(name)
            .is_some_and(|state: &locktop::engine::KeyState| state.holders[0].idle_since.is_some())
    };
    // The holders' own acquisition events settle first (their probes are
    // not the idle look's).
    engine.quiesce().await;
    let reads = engine.handle.stats.index_reads.load(Ordering::Relaxed);
    let probes = engine.probes();
    engine
        .wait_view("the sleeping holders idle", |view| {
            idle_now(view, &sleepy) && idle_now(view, &wakes)
        })
        .await;
    let state = engine.view.get(&sleepy).unwrap().clone();
    let now = std::time::SystemTime::now();
    let verdict = judge(&state, |_| Role::Materializing, now, Duration::MAX);
    assert_eq!(
        verdict,
        Some(Verdict::Idle {
            pid: sleeper.pid(),
            since: state.holders[0].idle_since.unwrap()
        })
    );
    // The spinner has been held as long: it would be idle by now, and
    // stays not idle for as long again.
    let until = Instant::now() + 2 * IDLE_AFTER;
    while Instant::now() < until {
        engine.recv_until(until.into()).await;
    }
    let spun = engine.view.get(&busy).expect("busy reported");
    assert_eq!(spun.holders[0].idle_since, None, "{spun:?}");
    let spinner_idle = |delta: &Delta| {
        matches!(delta, Delta::Key { state, .. }
            if state.holders.iter().any(|h| h.pid == spinner_pid && h.idle_since.is_some()))
    };
    assert!(
        !engine.log.iter().any(spinner_idle),
        "the spinning holder was never reported idle"
    );
    assert_eq!(
        engine.probes(),
        probes,
        "no probe: nothing touched the files"
    );
    assert_eq!(
        engine.handle.stats.index_reads.load(Ordering::Relaxed),
        reads,
        "no /proc/locks read"
    );
    // The holder that slept starts spinning: idle no more.
    engine
        .wait_view("the waking holder not idle", |view| !idle_now(view, &wakes))
        .await;
    blocking(|| {
        sleeper.terminate();
        drop(spinner);
        drop(waker);
    });
}
