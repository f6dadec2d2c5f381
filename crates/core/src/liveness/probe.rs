//! The liveness of one claim, in one of three modes.
//!
//! - `lock-free` (the default): read from `/proc/locks`, matched to the
//!   claim files' inodes ([`super::lock_free`]); takes no lock and opens
//!   no claim file, so it can never make an agent's acquire fail. Batch
//!   callers read `/proc/locks` once for many keys; [`Prober::probe`]
//!   reads it once per call (a one-shot use, never a loop).
//! - `acquire`: `locks::try_acquire` through the monitor's `Context`,
//!   released at once. Writes (empty gate contents, the announce beacon),
//!   so it echoes as inotify events; used only for keys that changed.
//! - `passive`: a shared-lock probe (never writes): [`super::shared_probe`]
//!   answers a free gate, or both files held, in half the SDK's syscalls;
//!   every other case is the SDK's `try_held`, bounded.
//!
//! Invariants: a probe never holds a key longer than the probe itself; it
//! never waits unboundedly on a holder stopped mid-acquisition (in-flight);
//! it never creates a file for a key whose gate is gone.

pub use super::probe_mode::ProbeMode;

use objectiveai_sdk::lockfile;

use super::shared_probe::{self, Quick};
use super::{KeyState, Liveness};
use crate::context::Context;
use crate::disk::key::{KeyKind, LockKey};
use crate::locks;

/// How long a probe waits on a claim whose gate is held but announce is
/// not before calling it in-flight (one bound for every probe in locktop).
pub use crate::locks::IN_FLIGHT_AFTER;

/// Probes claims through one `Context` (so an acquire probe can never take a
/// key one of this process's own holders has: the in-process gate refuses).
/// Whether a held key is this process's own is decided from holder PIDs
/// (see [`crate::liveness::annotate`]), not here.
#[derive(Clone, Debug)]
pub struct Prober {
    context: Context,
}

impl Prober {
    /// A prober sharing `context`'s agent lock map.
    pub fn new(context: Context) -> Self {
        Self { context }
    }

    /// The liveness of `key` (no holder details: see [`crate::liveness::annotate`]).
    /// `Other` keys, and any key whose gate has content, are always probed
    /// passively: an acquire probe would truncate the gate.
    pub async fn probe(&self, key: &LockKey, mode: ProbeMode) -> KeyState {
        self.probe_with(key, mode, Patience::Bounded)
            .await
            .unwrap_or_else(|| KeyState::bare(Liveness::InFlight))
    }

    /// [`Self::probe`], except that a claim found in flight (gate locked,
    /// announce not) is `None` at once instead of a wait of up to
    /// [`IN_FLIGHT_AFTER`]: the caller looks again later (the engine does,
    /// so one claim in flight never holds up the changes behind it).
    pub(crate) async fn probe_without_waiting(
        &self,
        key: &LockKey,
        mode: ProbeMode,
    ) -> Option<KeyState> {
        self.probe_with(key, mode, Patience::None).await
    }

    async fn probe_with(
        &self,
        key: &LockKey,
        mode: ProbeMode,
        patience: Patience,
    ) -> Option<KeyState> {
        if mode == ProbeMode::LockFree {
            return lock_free_with(key, patience).await;
        }
        let gate = key.gate_path();
        let gate_len = match std::fs::symlink_metadata(&gate) {
            Err(error) => return Some(gate_unreadable(key, &error)),
            Ok(meta) if !meta.is_file() => return Some(gate_not_regular(key)),
            Ok(meta) => meta.len(),
        };
        if mode == ProbeMode::Passive || key.kind() == KeyKind::Other || gate_len > 0 {
            // The passive probe checks the announce itself, and only when
            // it has to open it (a free gate ends the probe).
            return passive_with(key, patience).await;
        }
        let announce = key.announce_path();
        if std::fs::symlink_metadata(&announce).is_ok_and(|meta| !meta.is_file()) {
            // The SDK would open (and an acquire would write) through it.
            return Some(error_state(format!(
                "announce {} is not a regular file",
                announce.display()
            )));
        }
        let read_write = nix::unistd::AccessFlags::R_OK | nix::unistd::AccessFlags::W_OK;
        if let Err(errno) = nix::unistd::access(&gate, read_write) {
            if nix::unistd::access(&gate, nix::unistd::AccessFlags::R_OK).is_ok() {
                // Read-only access (another user's agents): fall back to
                // the passive probe rather than report an error.
                return passive_with(key, patience).await;
            }
            return Some(error_state(format!("gate {}: {errno}", gate.display())));
        }
        self.acquire(key, patience).await
    }

    async fn acquire(&self, key: &LockKey, patience: Patience) -> Option<KeyState> {
        let map = self.context.agent_locks();
        let taken = locks::try_acquire(map, key.dir(), key.key()).await;
        let state = match taken {
            Some(lock) => Some(match lock.release() {
                Ok(()) => KeyState::bare(Liveness::Free),
                Err(error) => error_state(format!("releasing the probe: {error}")),
            }),
            // Busy: held by another process, by this one (a test holder:
            // its PID in /proc/locks makes it `Own` when annotated), or
            // released in between. The passive probe settles which, bounded
            // for in-flight claims. A busy in-process gate alone says
            // nothing: a task waiting in `wait_acquire` holds it too.
            None => passive_with(key, patience).await,
        };
        locks::prune_idle(map, key.dir(), key.key());
        state
    }
}

/// The lock-free answer for `key`, as the bulk judgement gives it (one
/// merged `/proc/locks` read; with `Patience::Bounded`, read again while
/// the claim is in flight, up to [`IN_FLIGHT_AFTER`]); with
/// `Patience::None`, `None` at once for a claim in flight.
async fn lock_free_with(key: &LockKey, patience: Patience) -> Option<KeyState> {
    let key = key.clone();
    let judged = tokio::task::spawn_blocking(move || {
        let read = || super::proc_locks::LockIndex::read().unwrap_or_default();
        let index = super::proc_locks::LockIndex::read_merged(&read);
        match patience {
            Patience::Bounded => super::lock_free::judge_lock_free(vec![key], &index, 1, &read),
            Patience::None => super::lock_free::judged(vec![key], &index),
        }
    })
    .await
    .ok()?;
    let (_, state) = judged.into_iter().next()?;
    (state.liveness != Liveness::InFlight || patience == Patience::Bounded).then_some(state)
}

/// The passive answer for `key`: what the SDK's `try_held` says (held →
/// `Live`, not held → `Free`), except that a claim still in flight after
/// [`IN_FLIGHT_AFTER`] is `InFlight` instead of a wait without end, and
/// that a gate this process may not open, or an announce that is not a
/// regular file, is an error (`try_held` would call the first free and
/// open the second). The common answers come from [`shared_probe`] (a
/// free gate; both files held), the rest from `try_held` itself. Never
/// writes; takes only shared locks, released at once. The caller has
/// checked that the gate is a regular file ([`Prober::probe`] does).
pub async fn passive_state(key: &LockKey) -> KeyState {
    passive_with(key, Patience::Bounded)
        .await
        .unwrap_or_else(|| KeyState::bare(Liveness::InFlight))
}

/// How long a probe waits for a claim in flight.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Patience {
    /// Up to [`IN_FLIGHT_AFTER`], then `InFlight`.
    Bounded,
    /// Not at all: `None`.
    None,
}

async fn passive_with(key: &LockKey, patience: Patience) -> Option<KeyState> {
    let quick = shared_probe::quick(&key.gate_path(), &key.announce_path());
    if let Some(state) = quick_answer(key, quick) {
        return Some(state);
    }
    if quick == Quick::InFlight && patience == Patience::None {
        return None;
    }
    let liveness =
        match tokio::time::timeout(IN_FLIGHT_AFTER, lockfile::try_held(key.dir(), key.key())).await
        {
            Ok(true) => Liveness::Live,
            Ok(false) => Liveness::Free,
            Err(_) => Liveness::InFlight,
        };
    Some(KeyState::bare(liveness))
}

/// The state [`shared_probe`]'s answer `quick` stands for, or `None`
/// where only the SDK's `try_held` (bounded) may answer: a claim in
/// flight, an announce the fast path could not open.
pub(super) fn quick_answer(key: &LockKey, quick: Quick) -> Option<KeyState> {
    match quick {
        Quick::Free => Some(KeyState::bare(Liveness::Free)),
        Quick::Held => Some(KeyState::bare(Liveness::Live)),
        // Not for `try_held` either: it would call an unreadable gate
        // free, and follow a symlink raced in since the caller's lstat.
        Quick::GateUnopenable(errno) => Some(error_state(format!(
            "gate {}: {errno}",
            key.gate_path().display()
        ))),
        Quick::AnnounceNotRegular => Some(error_state(format!(
            "announce {} is not a regular file",
            key.announce_path().display()
        ))),
        Quick::InFlight | Quick::AskTheSdk => None,
    }
}

/// The state of a claim whose gate could not be `lstat`ed.
pub(super) fn gate_unreadable(key: &LockKey, error: &std::io::Error) -> KeyState {
    error_state(format!("gate {}: {error}", key.gate_path().display()))
}

/// The state of a claim whose gate is not a regular file (never opened).
pub(super) fn gate_not_regular(key: &LockKey) -> KeyState {
    error_state(format!(
        "gate {} is not a regular file",
        key.gate_path().display()
    ))
}

fn error_state(message: String) -> KeyState {
    KeyState {
        error: Some(message),
        ..KeyState::bare(Liveness::Error)
    }
}
