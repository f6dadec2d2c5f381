//! Holder details for probed claims: PIDs and waiters from ONE parse of
//! `/proc/locks` per batch, process details per distinct PID, "held since"
//! from the announce file's mtime.
//!
//! Invariant: `/proc/locks` is read at most once per call and never per
//! key (it stalls every flock on the machine while it is read).

use std::collections::{HashMap, HashSet};

use super::{KeyState, Liveness};
use crate::disk::key::LockKey;
use crate::liveness::proc_locks::{FileId, LockIndex};
use crate::liveness::process::ProcessInfo;

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
    let mut processes: HashMap<u32, ProcessInfo> = HashMap::new();
    for (key, state) in batch.iter_mut() {
        if !state.liveness.is_held() {
            continue;
        }
        let mut holders: Vec<u32> = Vec::new();
        let mut waiters: Vec<u32> = Vec::new();
        for (path, is_announce) in [(key.gate_path(), false), (key.announce_path(), true)] {
            let Ok(meta) = std::fs::symlink_metadata(&path) else {
                continue;
            };
            if is_announce && state.liveness != Liveness::InFlight {
                state.since = meta.modified().ok();
            }
            if let Some(locks) = index.get(&FileId::from_metadata(&meta)) {
                push_unique(&mut holders, &locks.holders);
                push_unique(&mut waiters, &locks.waiters);
            }
        }
        if state.liveness == Liveness::Live && holders.iter().any(|pid| own_pids.contains(pid)) {
            state.liveness = Liveness::Own;
        }
        state.holders = holders
            .into_iter()
            .map(|pid| {
                processes
                    .entry(pid)
                    .or_insert_with(|| ProcessInfo::of(pid))
                    .clone()
            })
            .collect();
        state.waiters = waiters;
    }
}

fn push_unique(into: &mut Vec<u32>, from: &[u32]) {
    for pid in from {
        if !into.contains(pid) {
            into.push(*pid);
        }
    }
}
