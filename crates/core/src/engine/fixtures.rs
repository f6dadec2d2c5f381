//! Test fixtures of the engine's vocabulary: synthetic keys, holders,
//! states and deltas at fixed times, for every layer's tests from the
//! engine up (the model's demo model is built from them). Invariant:
//! nothing here touches the filesystem or the clock.

use std::path::Path;
use std::time::{Duration, SystemTime};

use crate::disk::key::LockKey;
use crate::engine::{Delta, KeyState, Liveness};
use crate::liveness::process::{ProcState, ProcessInfo};
use crate::liveness::{WaitKind, Waiting};
use crate::locks::{agent_instance_lock, agent_tag_lock, locks_root};

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
        refused: None,
        waiting: Vec::new(),
    }
}

/// `state` with `pid` (a process started at `t(0)`, as [`process`]'s)
/// waiting on it `how`, listed where `/proc/locks` would list it too.
pub fn waited_by(mut state: KeyState, pid: u32, how: WaitKind) -> KeyState {
    match how {
        WaitKind::Contender => state.waiters.push(pid),
        WaitKind::Watcher => state.watchers.push(pid),
        WaitKind::Trying | WaitKind::Polling => {}
    }
    state.waiting.push(Waiting {
        pid,
        how,
        started: Some(t(0)),
    });
    state
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
