//! Holder details for probed claims: PIDs and waiters from ONE parse of
//! `/proc/locks` per batch, process details per distinct PID, "held since"
//! from the announce file's mtime.
//!
//! Invariants: `/proc/locks` is read at most once per call and never per
//! key (it stalls every flock on the machine while it is read); a PID is
//! shown as a holder only once verified — its fdinfo shows the lock
//! ([`HeldFiles`]), or, where fdinfo may not be read, it started before
//! the claim was taken — so a reused PID is never named. A PID that is
//! gone stays listed as gone (`alive: false`): the lock outlived the
//! process that took it.

use std::collections::HashSet;

use super::{KeyState, Liveness};
use crate::disk::key::LockKey;
use crate::disk::key::held_since;
use crate::liveness::proc_locks::{FileId, FileLocks, LockIndex};
use crate::liveness::verify::HolderVerifier;

/// Fills holders, waiters and `since` of every held state in `batch`, and
/// turns `Live` into `Own` when a holder is one of `own_pids`. Reads
/// `/proc/locks` only if something in the batch is held.
pub fn annotate(batch: &mut [(LockKey, KeyState)], own_pids: &HashSet<u32>) {
    if !batch.iter().any(|(_, state)| state.liveness.is_held()) {
        return;
    }
    let index = LockIndex::read().unwrap_or_default();
    annotate_with(batch, &index, own_pids);
}

/// [`annotate`] with an already-read index.
pub fn annotate_with(
    batch: &mut [(LockKey, KeyState)],
    index: &LockIndex,
    own_pids: &HashSet<u32>,
) {
    let mut verifier = HolderVerifier::default();
    for (key, state) in batch.iter_mut() {
        if !state.liveness.is_held() {
            continue;
        }
        let gate = std::fs::symlink_metadata(key.gate_path()).ok();
        let announce = std::fs::symlink_metadata(key.announce_path()).ok();
        if state.liveness != Liveness::InFlight {
            state.since = announce.as_ref().and_then(held_since);
        }
        let files: Vec<FileId> = [gate, announce]
            .iter()
            .flatten()
            .map(FileId::from_metadata)
            .collect();
        let FileLocks { holders, waiters } = index.union(files.iter().copied());
        let holders = verifier.holders(holders, &files, state.since);
        if state.liveness == Liveness::Live && holders.iter().any(|pid| own_pids.contains(pid)) {
            state.liveness = Liveness::Own;
        }
        state.holders = holders
            .into_iter()
            .map(|pid| verifier.process(pid).clone())
            .collect();
        state.waiters = waiters;
    }
}
