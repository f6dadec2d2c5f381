//! Test fixtures: synthetic keys and deltas at fixed times, so model tests
//! and UI snapshots are deterministic. Invariant: nothing here touches the
//! filesystem or the clock.

use std::path::Path;
use std::time::{Duration, SystemTime};

use crate::disk::key::LockKey;
use crate::engine::{Delta, KeyState, Liveness, ScanProblem, ScanProblemKind, WatcherHealth};
use crate::liveness::process::{ProcState, ProcessInfo};
use crate::locks::{agent_instance_lock, agent_tag_lock, locks_root};

use super::Model;

/// The state dir every fixture key lives under.
pub const STATE: &str = "/state";

/// A fixed instant `secs` after an arbitrary epoch.
pub fn t(secs: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000 + secs)
}

/// The instance key of `aih`.
pub fn instance(aih: &str) -> LockKey {
    let state = Path::new(STATE);
    let (dir, key) = agent_instance_lock(state, aih);
    LockKey::from_coord(state, &dir, &key)
}

/// The tag key of `tag`.
pub fn tag(name: &str) -> LockKey {
    let state = Path::new(STATE);
    let (dir, key) = agent_tag_lock(state, name);
    LockKey::from_coord(state, &dir, &key)
}

/// A key under `<locks>/<dir>`.
pub fn other(dir: &str, key: &str) -> LockKey {
    let state = Path::new(STATE);
    LockKey::from_coord(state, &locks_root(state).join(dir), key)
}

/// A live process.
pub fn process(pid: u32, command: &str) -> ProcessInfo {
    ProcessInfo {
        pid,
        alive: true,
        unverified: false,
        cmdline: Some(command.to_string()),
        started: Some(t(0)),
        state: Some(ProcState::Sleeping),
        ppid: None,
        unit: None,
        idle_since: None,
        parent: None,
    }
}

/// A state held by `pid` since `since`.
pub fn held(liveness: Liveness, pid: u32, command: &str, since: SystemTime) -> KeyState {
    KeyState {
        liveness,
        error: None,
        holders: vec![process(pid, command)],
        waiters: Vec::new(),
        watchers: Vec::new(),
        since: Some(since),
        holders_note: None,
    }
}

/// A free state.
pub fn free() -> KeyState {
    KeyState::bare(Liveness::Free)
}

/// A key delta.
pub fn key_delta(
    key: LockKey,
    state: KeyState,
    previous: Option<Liveness>,
    at: SystemTime,
) -> Delta {
    Delta::Key {
        key,
        state,
        previous,
        at,
    }
}

/// The command line of the fixture holders.
pub const HOLD: &str = "locktop hold --aih cli/daemon/abc --tag deploy";

/// A model with every kind of row: nested AIHs (a node that is a lock and
/// has children, directory-only nodes), live / own / free / in-flight /
/// error keys, tags, an other key, a scan problem, and a few events.
/// Its clock is `t(600)`.
pub fn demo_model() -> Model {
    let mut model = Model::new(Box::new(|pid| pid != 4242));
    for delta in demo_deltas() {
        model.apply(delta);
    }
    model.set_now(t(600));
    model
}

/// The deltas of [`demo_model`], in order.
pub fn demo_deltas() -> Vec<Delta> {
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
