//! Probe many claims at once: the engine's sweeps (initial, rescans,
//! the periodic safety net) and `locktop snapshot`.
//!
//! Invariant: work is split over the runtime's worker threads in chunks
//! (probes are short synchronous syscalls), results come back in input
//! order, and `/proc/locks` is read once for the whole batch.

use std::collections::HashSet;

use super::KeyState;
use crate::disk::key::LockKey;
use crate::liveness::annotate::annotate;
use crate::liveness::probe::{ProbeMode, Prober};

/// Probes every key (in `mode`) and annotates the held ones.
pub async fn probe_all(
    prober: &Prober,
    keys: Vec<LockKey>,
    mode: ProbeMode,
    own_pids: &HashSet<u32>,
) -> Vec<(LockKey, KeyState)> {
    let mut batch = probe_all_unannotated(prober, keys, mode).await;
    annotate(&mut batch, own_pids);
    batch
}

/// Probes every key (in `mode`) one after the other, in the calling task;
/// no holder details.
pub async fn probe_each(
    prober: &Prober,
    keys: Vec<LockKey>,
    mode: ProbeMode,
) -> Vec<(LockKey, KeyState)> {
    let mut out = Vec::with_capacity(keys.len());
    for key in keys {
        let state = prober.probe(&key, mode).await;
        out.push((key, state));
    }
    out
}

/// Probes every key (in `mode`), in parallel chunks; no holder details.
/// Passive probes go directory by directory ([`super::dir_probe`]).
pub async fn probe_all_unannotated(
    prober: &Prober,
    keys: Vec<LockKey>,
    mode: ProbeMode,
) -> Vec<(LockKey, KeyState)> {
    let workers = std::thread::available_parallelism().map_or(2, usize::from);
    if mode == ProbeMode::Passive {
        return super::dir_probe::probe_passive(prober, keys, workers).await;
    }
    let chunk_len = keys.len().div_ceil(workers).max(256);
    let mut tasks = Vec::new();
    let mut keys = keys.into_iter().peekable();
    while keys.peek().is_some() {
        let chunk: Vec<LockKey> = keys.by_ref().take(chunk_len).collect();
        let prober = prober.clone();
        tasks.push(tokio::spawn(async move {
            probe_each(&prober, chunk, mode).await
        }));
    }
    let mut batch = Vec::new();
    for task in tasks {
        match task.await {
            Ok(chunk) => batch.extend(chunk),
            Err(error) => tracing::error!(%error, "probe task failed"),
        }
    }
    batch
}
