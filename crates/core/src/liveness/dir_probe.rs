//! Passive probes of many claims, directory by directory: what a snapshot
//! and a sweep spend nearly all their probing time on.
//!
//! Each claim directory is opened once, and every claim in it is probed
//! relative to that descriptor (`fstatat`, `openat`): no path is built
//! and no path is walked from the root per key. The answers are
//! [`shared_probe`]'s, mapped to states by the same function as a single
//! probe's ([`super::probe`]); whatever the fast path cannot answer (a
//! claim in flight, an announce it could not open, a directory it could
//! not open) is left to the single probe, which asks the SDK.
//!
//! The keys come from a scan that has just read their directories
//! ([`crate::disk::scan`]), which lists a claim only when its gate's
//! directory entry is a regular file: that type is the regular-file check
//! here, instead of an `lstat` per key (the single probe's). It is older
//! than the open by the time a scan takes (milliseconds), where the
//! single probe's `lstat` is older by microseconds; in both cases a FIFO
//! raced in can not make the probe block (`O_NONBLOCK`) or follow a
//! symlink (`O_NOFOLLOW`). A gate gone since the scan reads as free, as
//! `try_held` reads a missing gate.
//!
//! Invariants: as [`shared_probe`]'s — never writes, never creates,
//! shared locks only, released at once; a gate the scan did not list as
//! a regular file is never passed here; runs on blocking-pool threads,
//! never on the runtime's workers.

use std::path::Path;

use super::KeyState;
use super::probe::{ProbeMode, Prober, quick_answer};
use super::shared_probe::{self, Quick};
use crate::disk::key::LockKey;
use crate::disk::scan::{self, ScanReport};

/// Probes every key (each found by a scan, its gate a regular file: see
/// the module doc) passively, on up to `threads` blocking-pool threads
/// (keys of one directory stay together as far as the split allows);
/// results come back in input order, with no holder details.
pub async fn probe_passive(
    prober: &Prober,
    keys: Vec<LockKey>,
    threads: usize,
) -> Vec<(LockKey, KeyState)> {
    let total = keys.len();
    let chunk_len = total.div_ceil(threads.max(1)).max(256);
    let mut tasks = Vec::new();
    let mut keys = keys.into_iter().peekable();
    while keys.peek().is_some() {
        let chunk: Vec<LockKey> = keys.by_ref().take(chunk_len).collect();
        tasks.push(tokio::task::spawn_blocking(move || {
            let answers = fast_answers(&chunk);
            (chunk, answers)
        }));
    }
    let mut answered = Vec::with_capacity(tasks.len());
    for task in tasks {
        match task.await {
            Ok(done) => answered.push(done),
            Err(error) => tracing::error!(%error, "probe task failed"),
        }
    }
    settle(prober, answered, total).await
}

/// How many keys the scan hands to a probe thread at a time in
/// [`scan_and_probe_passive`]: small enough that probing starts early and
/// the threads stay evenly busy, large enough that the hand-over costs
/// nothing next to the probes.
const FEED_CHUNK: usize = 256;

/// The scan of `state_dir`'s locks root and a passive probe of every key
/// it finds, at once: `threads` threads probe the keys the walk hands
/// over ([`crate::disk::scan::scan_feeding`]) while it reads on, instead
/// of waiting for the whole walk (on a 2-vCPU machine the walk of 20,000
/// entries took 12–15 ms before the first probe). Results come back in
/// no particular order, with no holder details, and the report with no
/// keys; an error only if the root could not be read.
pub async fn scan_and_probe_passive(
    state_dir: &Path,
    prober: &Prober,
    threads: usize,
) -> std::io::Result<(ScanReport, Vec<(LockKey, KeyState)>)> {
    scan_and_probe_passive_in(state_dir, prober, threads, FEED_CHUNK).await
}

/// [`scan_and_probe_passive`], the walk handing over `chunk` keys at a
/// time (tests use small chunks, so that a few keys make several).
pub async fn scan_and_probe_passive_in(
    state_dir: &Path,
    prober: &Prober,
    threads: usize,
    chunk: usize,
) -> std::io::Result<(ScanReport, Vec<(LockKey, KeyState)>)> {
    let state_dir = state_dir.to_path_buf();
    let (report, answered) = tokio::task::spawn_blocking(move || {
        let (tx, rx) = std::sync::mpsc::channel::<Vec<LockKey>>();
        let rx = std::sync::Mutex::new(rx);
        std::thread::scope(|scope| {
            let probers: Vec<_> = (0..threads.max(1))
                .map(|_| {
                    scope.spawn(|| {
                        let mut answered = Vec::new();
                        // One thread waits for the next chunk holding the
                        // lock, the others for the lock.
                        while let Ok(chunk) = rx
                            .lock()
                            .map_err(drop)
                            .and_then(|rx| rx.recv().map_err(drop))
                        {
                            let answers = fast_answers(&chunk);
                            answered.push((chunk, answers));
                        }
                        answered
                    })
                })
                .collect();
            let report = scan::scan_feeding(&state_dir, chunk, None, &mut |chunk| {
                let _ = tx.send(chunk);
            });
            drop(tx);
            let answered: Vec<_> = probers
                .into_iter()
                .flat_map(|prober| {
                    prober.join().unwrap_or_else(|_| {
                        tracing::error!("a probe thread panicked; its keys are missing");
                        Vec::new()
                    })
                })
                .collect();
            report.map(|report| (report, answered))
        })
    })
    .await
    .map_err(std::io::Error::other)??;
    let total = answered.iter().map(|(chunk, _)| chunk.len()).sum();
    Ok((report, settle(prober, answered, total).await))
}

/// States from the fast path's answers, chunk by chunk; a key it could
/// not answer is probed by the single probe (which asks the SDK,
/// bounded).
async fn settle(
    prober: &Prober,
    answered: Vec<(Vec<LockKey>, Vec<Option<Quick>>)>,
    total: usize,
) -> Vec<(LockKey, KeyState)> {
    let mut batch = Vec::with_capacity(total);
    for (chunk, answers) in answered {
        for (key, answer) in chunk.into_iter().zip(answers) {
            let state = match answer.and_then(|quick| quick_answer(&key, quick)) {
                Some(state) => state,
                None => prober.probe(&key, ProbeMode::Passive).await,
            };
            batch.push((key, state));
        }
    }
    batch
}

/// The fast path's answer for each key, in order (a few bytes each: the
/// states are made as the results are gathered); `None` where the
/// claim's directory could not be opened.
fn fast_answers(keys: &[LockKey]) -> Vec<Option<Quick>> {
    super::claims_at::each_claim_at(keys.iter(), |_, at| {
        let (dir, gate, announce) = at?;
        Some(shared_probe::quick_at(dir, gate, announce))
    })
    .collect()
}
