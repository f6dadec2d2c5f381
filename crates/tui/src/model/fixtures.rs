//! Test fixtures of the model: the demo model (every kind of row), built
//! from the engine's fixtures (re-exported here), so model tests and UI
//! snapshots are deterministic. Invariant: nothing here touches the
//! filesystem or the clock.

use std::path::Path;

use crate::engine::{Delta, KeyState, Liveness, ScanProblem, ScanProblemKind, WatcherHealth};

use super::Model;

pub use crate::engine::fixtures::*;

/// The command line of the fixture holders.
pub const HOLD: &str = "locktop hold --aih cli/daemon/abc --tag deploy";

/// A model with every kind of row: nested AIHs (a node that is a lock and
/// has children, directory-only nodes), live / own / free / in-flight /
/// error keys, tags, an other key, a scan problem, and a few events.
/// Its clock is `t(600)`.
pub(crate) fn demo_model() -> Model {
    let mut model = Model::new(Box::new(|pid| Some(pid != 4242)));
    for delta in demo_deltas() {
        model.apply(delta);
    }
    model.set_now(t(600));
    model
}

/// The deltas of [`demo_model`], in order.
pub(crate) fn demo_deltas() -> Vec<Delta> {
    let mut deltas = vec![Delta::Health(WatcherHealth::Starting)];
    let initial = [
        (
            instance("cli/daemon/abc"),
            held(Liveness::Live, 1201, HOLD, t(10)),
        ),
        (
            instance("cli/daemon/abc/sub1"),
            held(Liveness::Live, 1202, "objectiveai agents spawn", t(40)),
        ),
        (instance("cli/daemon/old"), free()),
        (
            instance("cli/tools/x9"),
            held(Liveness::Own, 777, "locktop", t(100)),
        ),
        (
            instance("daemon/worker/w1"),
            KeyState::bare(Liveness::InFlight),
        ),
        (
            instance("daemon/worker/w2"),
            KeyState {
                error: Some("Permission denied (os error 13)".into()),
                ..KeyState::bare(Liveness::Error)
            },
        ),
        (
            tag("deploy"),
            KeyState {
                waiters: vec![1300],
                ..held(Liveness::Live, 1201, HOLD, t(12))
            },
        ),
        (tag("my tag: v1.0"), free()),
        (
            tag("review"),
            held(Liveness::Live, 4242, "objectiveai tags apply", t(300)),
        ),
        (other("plugins-daemon", "p"), free()),
    ];
    for (key, state) in initial {
        deltas.push(key_delta(key, state, None, t(0)));
    }
    deltas.push(Delta::Problems(vec![ScanProblem {
        path: Path::new(STATE).join("locks/agents/tags/notes.txt"),
        kind: ScanProblemKind::ForeignFile,
    }]));
    deltas.push(Delta::Synced { keys: 10, at: t(1) });
    deltas.push(Delta::Health(WatcherHealth::Watching));
    // After the scan: one acquire, one release, one death.
    deltas.push(key_delta(
        instance("cli/daemon/new"),
        held(Liveness::Live, 1500, "objectiveai agents spawn", t(500)),
        None,
        t(500),
    ));
    deltas.push(key_delta(
        instance("cli/daemon/new"),
        free(),
        Some(Liveness::Live),
        t(595),
    ));
    deltas.push(key_delta(
        tag("review"),
        free(),
        Some(Liveness::Live),
        t(560),
    ));
    deltas
}
