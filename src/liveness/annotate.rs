//! Holder details for probed claims: PIDs and waiters from ONE parse of
//! `/proc/locks` per batch, process details per distinct PID, "held since"
//! from the announce file's mtime.
//!
//! Invariants: `/proc/locks` is read at most once per call and never per
//! key (it stalls every flock on the machine while it is read); a PID is
//! shown as a holder only once verified — its fdinfo shows the lock
//! ([`super::fdinfo::HeldFiles`]), or, where fdinfo may not be read, it started before
//! the claim was taken — so a reused PID is never named. A PID that is
//! gone stays listed as gone (`alive: false`): the lock outlived the
//! process that took it.

use std::collections::HashSet;

use super::{KeyState, Liveness};
use crate::disk::key::LockKey;
use crate::disk::key::held_since;
use crate::liveness::proc_locks::{FileId, FileLocks, LockIndex};
use crate::liveness::verify::HolderVerifier;

/// Fills holders, waiters and `since` of every held state in `batch`,
/// turns `Live` into `Own` when a holder is one of `own_pids`, and turns a
/// `Free` key whose gate or announce another process holds SHARED into
/// `Shared` (see [`Liveness::Shared`]). Reads `/proc/locks` once.
pub fn annotate(batch: &mut [(LockKey, KeyState)], own_pids: &HashSet<u32>) {
    if batch.is_empty() {
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
    // Shared locks are rare: look for them (one lstat per free key) only
    // if the locks' own filesystem has one.
    let look_for_shared = batch
        .first()
        .and_then(|(key, _)| std::fs::symlink_metadata(&key.dir).ok())
        .is_some_and(|dir| index.has_shared_on(FileId::from_metadata(&dir)));
    for (key, state) in batch.iter_mut() {
        let held = state.liveness.is_held();
        let maybe_shared = look_for_shared && state.liveness == Liveness::Free;
        if !(held || maybe_shared) {
            continue;
        }
        let gate = std::fs::symlink_metadata(key.gate_path()).ok();
        let announce = std::fs::symlink_metadata(key.announce_path()).ok();
        let files: Vec<FileId> = [&gate, &announce]
            .into_iter()
            .flatten()
            .map(FileId::from_metadata)
            .collect();
        let FileLocks {
            holders,
            waiters,
            shared,
            shared_waiters,
        } = index.union(files.iter().copied());
        state.watchers = shared_waiters;
        if !held {
            // Our own probes' momentary shared locks are not holders.
            let shared: Vec<u32> = shared
                .into_iter()
                .filter(|pid| !own_pids.contains(pid))
                .collect();
            let shared = verifier.holders(shared, &files, None);
            if !shared.is_empty() {
                state.liveness = Liveness::Shared;
                state.holders = shared
                    .into_iter()
                    .map(|pid| verifier.process(pid).clone())
                    .collect();
                state.waiters = waiters;
            }
            continue;
        }
        if state.liveness != Liveness::InFlight {
            state.since = announce.as_ref().and_then(held_since);
        }
        let mut holders = verifier.holders(holders, &files, state.since);
        let callers_gone =
            !holders.is_empty() && holders.iter().all(|&pid| !verifier.process(pid).alive);
        if callers_gone {
            // The lock outlived the process that took it: whoever keeps
            // it now (a forked child) comes first, the gone caller after.
            let mut keepers = verifier.true_holders(&files);
            keepers.retain(|pid| !holders.contains(pid));
            keepers.append(&mut holders);
            holders = keepers;
        }
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
