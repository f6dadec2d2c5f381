//! Probe many claims at once: the engine's sweeps (initial, rescans,
//! the periodic safety net) and `locktop snapshot`.
//!
//! Invariant: work is split over the runtime's worker threads in chunks
//! (probes are short synchronous syscalls), results come back in input
//! order (except [`probe_tree_passive`]'s), and `/proc/locks` is read once
//! for the whole batch (again only where [`crate::liveness::annotate`]
//! says).

use std::collections::HashSet;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::KeyState;
use crate::disk::ScanReport;
use crate::disk::key::LockKey;
use crate::disk::scan::OnDir;
use crate::liveness::annotate::{Recheck, annotate, annotate_after_early_read, annotate_with};
use crate::liveness::dir_probe;
use crate::liveness::lock_free;
use crate::liveness::probe::{ProbeMode, Prober};
// The lock-free judgement of many keys is the lock-free module's; named
// here too, where callers look for bulk work.
pub use crate::liveness::lock_free::judge_lock_free;
use crate::liveness::lock_free::judge_lock_free_split;
use crate::liveness::probed::Probed;
use crate::liveness::proc_locks::{FileId, LockIndex};

/// Reads `/proc/locks` (the caller's way: counted, or not).
pub type ReadLocks = Arc<dyn Fn() -> LockIndex + Send + Sync>;

/// What a probe of a whole locks root found.
pub struct TreeProbe {
    /// Every claim, probed and annotated, in no particular order.
    pub batch: Probed,
    /// The scan's problems and claim inodes (its keys are in `batch`).
    pub report: ScanReport,
    /// The first `/proc/locks` read (which also shows claim files held
    /// though unlinked: [`crate::liveness::unlinked`]).
    pub index: LockIndex,
    /// When each part was done, from the start.
    pub timeline: TreeTimeline,
}

/// When each part of [`probe_tree_passive`] was done, from its start
/// (where the time goes; the bench prints it).
#[derive(Debug, Clone, Copy, Default)]
pub struct TreeTimeline {
    /// The first `/proc/locks` read (begun at the start).
    pub read: Duration,
    /// The walk and every probe.
    pub probed: Duration,
    /// The holders named: the end.
    pub annotated: Duration,
}

/// Scans `state_dir`'s locks root and probes every claim passively on
/// `threads` threads while the walk goes on
/// ([`dir_probe::scan_and_probe_passive`]), then names the holders. The
/// `/proc/locks` read (`read`) begins before the scan, on a thread of its
/// own, so that its wait for an RCU grace period (most of a first read's
/// time: [`crate::liveness::annotate::annotate_reading`]) passes while
/// the claims are walked and probed
/// ([`annotate_after_early_read`] reads again for a claim it missed).
/// An error only if the root could not be read.
pub async fn probe_tree_passive(
    state_dir: &Path,
    prober: &Prober,
    own_pids: &HashSet<u32>,
    threads: usize,
    read: ReadLocks,
) -> std::io::Result<TreeProbe> {
    let start = Instant::now();
    let early = {
        let read = read.clone();
        std::thread::spawn(move || (read(), start.elapsed()))
    };
    let (report, mut batch) = dir_probe::scan_and_probe_passive(state_dir, prober, threads).await?;
    let probed = start.elapsed();
    let own_pids = own_pids.clone();
    let (batch, index, read) = tokio::task::spawn_blocking(move || {
        let (early, read_at) = early.join().unwrap_or_default();
        let index = annotate_after_early_read(&mut batch, &own_pids, early, &*read);
        (Probed::of(batch), index, read_at)
    })
    .await
    .map_err(std::io::Error::other)?;
    Ok(TreeProbe {
        batch,
        report,
        index,
        timeline: TreeTimeline {
            read,
            probed,
            annotated: start.elapsed(),
        },
    })
}

/// Scans `state_dir`'s locks root and judges every claim lock-free, then
/// names the holders, from one merged `/proc/locks` read (`read`) begun
/// before the scan, on a thread of its own, so that its wait for an RCU
/// grace period passes while the tree is walked. The snapshot is the
/// moment of that read: a claim taken after it reads free, one released
/// after it held. An error only if the root could not be read.
pub async fn probe_tree_lock_free(
    state_dir: &Path,
    own_pids: &HashSet<u32>,
    threads: usize,
    read: ReadLocks,
    on_dir: Option<OnDir>,
) -> std::io::Result<TreeProbe> {
    let start = Instant::now();
    let state_dir = state_dir.to_path_buf();
    let own_pids = own_pids.clone();
    tokio::task::spawn_blocking(move || {
        // With `on_dir` (the engine's walk adds each directory's watch as
        // it reads it), the table is read after the walk: a claim taken
        // between an early read and its directory's watch would be judged
        // free with no event to correct it. Without, it is read while the
        // tree is walked (its grace period passes meanwhile).
        let early = on_dir.is_none().then(|| {
            let read = read.clone();
            std::thread::spawn(move || (LockIndex::read_merged(&*read), start.elapsed()))
        });
        let mut report = crate::disk::scan::scan(&state_dir, on_dir.as_ref())?;
        let (index, read_at) = match early {
            Some(early) => early.join().unwrap_or_default(),
            None => (LockIndex::read_merged(&*read), start.elapsed()),
        };
        let keys = std::mem::take(&mut report.keys);
        // As the annotation decides whether to look at free claims.
        let shared_possible = std::fs::symlink_metadata(crate::locks::locks_root(&state_dir))
            .is_ok_and(|root| index.has_shared_on(FileId::from_metadata(&root), &own_pids));
        let inodes = std::mem::take(&mut report.gate_inodes);
        // Most keys are free and their gates' inodes are in no lock row:
        // told from the directory entries, with no `lstat` (a million
        // keys: seconds of path lookups).
        let (mut surely_free, mut keys) = if shared_possible || inodes.len() != keys.len() {
            (Vec::new(), keys)
        } else {
            lock_free::surely_free(keys, inodes, &index)
        };
        // A claim whose announce the walk found to be no regular file is
        // judged by its files, never surely free (it is an error, as in
        // every probe and `check`).
        let unfit = report.unfit_claims();
        if !unfit.is_empty() {
            let (judge, free): (Vec<LockKey>, Vec<LockKey>) = surely_free
                .into_iter()
                .partition(|key| unfit.contains(&key.gate_path()));
            keys.extend(judge);
            surely_free = free;
        }
        let mut batch = judge_lock_free_split(keys, &index, threads, shared_possible, &*read);
        batch.free.extend(surely_free);
        let probed = start.elapsed();
        annotate_with(
            &mut batch.rest,
            &index,
            &own_pids,
            &mut || read(),
            Recheck::ReadAgain,
        );
        Ok(TreeProbe {
            batch,
            report,
            index,
            timeline: TreeTimeline {
                read: read_at,
                probed,
                annotated: start.elapsed(),
            },
        })
    })
    .await
    .map_err(std::io::Error::other)?
}

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
pub(crate) async fn probe_each(
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
    if mode.reads_lock_table() {
        let read = || LockIndex::read().unwrap_or_default();
        return tokio::task::spawn_blocking(move || {
            let index = LockIndex::read_merged(&read);
            judge_lock_free(keys, &index, workers, &read)
        })
        .await
        .unwrap_or_default();
    }
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
