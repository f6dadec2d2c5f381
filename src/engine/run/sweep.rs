//! Sweeps: a rescan of the whole root with a passive probe of every key —
//! inline for the initial sync, rescans and polling, on a thread of its
//! own for the periodic safety net (whose findings never overwrite a key
//! that events probed after it began).
//!
//! Invariants: the periodic sweep never runs on the runtime's worker
//! threads — its probes are thousands of synchronous syscalls, and two
//! chunks of them once kept both workers (and so the engine loop, and the
//! timer a probe in flight sleeps on) busy for 70+ ms; opens are muted
//! while a sweep probes ([`crate::engine::fs_events::EventFilter::mute_opens`]):
//! its own 2 opens per key would otherwise come back as thousands of
//! held-key rechecks and an opened-file look.

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::SystemTime;

use tokio::time::Instant;

use super::Engine;
use crate::disk::{LockKey, ScanProblem};
use crate::engine::fs_events::EventFilter;
use crate::engine::trace::Stage;
use crate::engine::{Delta, EngineStats};
use crate::liveness::annotate::annotate_reading;
use crate::liveness::proc_locks::LockIndex;
use crate::liveness::unlinked::{self, KnownInodes};
use crate::liveness::{KeyState, ProbeMode, Prober};
use crate::liveness::{bulk, dir_probe};

impl Engine {
    /// A background sweep still running will be ignored when it reports: the
    /// view it would merge into is gone or newer than its findings.
    pub(super) fn disown_background_sweep(&mut self) {
        self.generation += 1;
        self.sweep_touched = None;
    }

    /// Drops the whole view (the root went away, or watching gave way to
    /// polling); a background sweep still running is disowned.
    pub(super) fn forget_everything(&mut self) {
        self.disown_background_sweep();
        let keys: Vec<LockKey> = self.states.keys().cloned().collect();
        for key in keys {
            self.remove(&key);
        }
        self.replace_problems(Vec::new());
    }

    /// Rescans the root and passively probes every claim, inline (the
    /// initial sync, rescans, polling): events wait until it is done.
    pub(super) async fn full_sweep(&mut self) {
        self.next_sweep = Instant::now() + self.config.sweep_every;
        self.disown_background_sweep();
        // The sweep probes every key after the changes that marked these:
        // its answer is newer (and passive, so after an overflow it cannot
        // start a storm of acquire probes of its own).
        self.pending.clear();
        self.batch_due = None;
        self.forget_opened_files();
        let outcome = self.sweep_job(Workers::Runtime).run().await;
        if let Some(outcome) = outcome {
            self.apply_sweep(outcome, &HashSet::new());
        }
    }

    /// Starts the periodic sweep on its own task, so events keep being
    /// handled while it runs; [`Self::apply_sweep`] merges its outcome.
    pub(super) fn start_background_sweep(&mut self) {
        self.next_sweep = Instant::now() + self.config.sweep_every;
        if self.sweep_touched.is_some() {
            return;
        }
        self.sweep_touched = Some(HashSet::new());
        let tx = self.sweep_results_tx.clone();
        let job = self.sweep_job(Workers::OneThread);
        let runtime = tokio::runtime::Handle::current();
        // A blocking-pool thread: the OS shares the CPU between it and the
        // engine loop, which keeps both runtime workers to itself.
        tokio::task::spawn_blocking(move || {
            let _ = tx.send(runtime.block_on(job.run()));
        });
    }

    fn sweep_job(&self, workers: Workers) -> SweepJob {
        SweepJob {
            generation: self.generation,
            state_dir: self.state_dir.clone(),
            prober: self.prober.clone(),
            own_pids: self.own_pids.clone(),
            stats: self.stats.clone(),
            filter: self.filter.clone(),
            workers,
        }
    }

    /// Merges a sweep's findings, except for keys in `newer`: events probed
    /// (or removed) them after the sweep began, so its view of them is older.
    pub(super) fn apply_sweep(&mut self, outcome: SweepOutcome, newer: &HashSet<LockKey>) {
        let on_disk: HashSet<&LockKey> = outcome.batch.iter().map(|(key, _)| key).collect();
        let gone: Vec<LockKey> = self
            .states
            .keys()
            .filter(|key| !on_disk.contains(key) && !newer.contains(*key))
            .cloned()
            .collect();
        drop(on_disk);
        for key in gone {
            self.remove(&key);
        }
        let count = outcome.batch.len();
        let at = SystemTime::now();
        for (key, state) in outcome.batch {
            if !newer.contains(&key) {
                self.trace(&key, Stage::Swept(state.liveness));
                self.lookups.touch(&key);
                self.update(key, state, at);
            }
        }
        self.replace_problems(outcome.problems);
        self.send(Delta::Synced { keys: count, at });
    }
}

/// What one sweep found: every claim on disk, probed passively and
/// annotated, and the scan's problems (sorted).
pub(super) struct SweepOutcome {
    /// The engine's generation when the sweep began (see
    /// [`Engine::forget_everything`]).
    pub(super) generation: u64,
    batch: Vec<(LockKey, KeyState)>,
    problems: Vec<ScanProblem>,
}

impl SweepOutcome {
    /// How many claims it found.
    pub(super) fn len(&self) -> usize {
        self.batch.len()
    }
}

/// Where a sweep's probes run.
#[derive(Debug, Clone, Copy)]
enum Workers {
    /// Over as many threads as the machine has (inline sweeps: the loop
    /// waits for them anyway).
    Runtime,
    /// On one blocking-pool thread (the periodic sweep: the other core is
    /// left to the engine loop).
    OneThread,
}

/// Everything one sweep needs; it touches no engine state, so it can run
/// anywhere.
struct SweepJob {
    generation: u64,
    state_dir: PathBuf,
    prober: Prober,
    own_pids: HashSet<u32>,
    stats: Arc<EngineStats>,
    filter: Arc<EventFilter>,
    workers: Workers,
}

impl SweepJob {
    /// Scan + passive probe + one `/proc/locks` read (holders, and claim
    /// files held though unlinked); `None` if the root could not be
    /// scanned.
    async fn run(self) -> Option<SweepOutcome> {
        let SweepJob {
            generation,
            state_dir,
            prober,
            own_pids,
            stats,
            filter,
            workers,
        } = self;
        stats.sweeps.fetch_add(1, Ordering::Relaxed);
        let muted = filter.mute_opens();
        let mut report = match crate::disk::scan::scan_root(&state_dir).await {
            Ok(report) => report,
            Err(error) => {
                tracing::warn!(%error, "sweep could not scan the locks root");
                return None;
            }
        };
        stats
            .probes
            .fetch_add(report.keys.len() as u64, Ordering::Relaxed);
        let known = KnownInodes::new(std::mem::take(&mut report.claim_inodes));
        let mut batch = match workers {
            Workers::Runtime => {
                bulk::probe_all_unannotated(&prober, report.keys, ProbeMode::Passive).await
            }
            Workers::OneThread => dir_probe::probe_passive(&prober, report.keys, 1).await,
        };
        // Opens from here on are not the sweep's: the read below sees what
        // the sweep's own opens could have revealed.
        drop(muted);
        // Once per sweep, even with no key on disk: a lasting shared lock
        // (which no probe sees) and a claim file held though unlinked
        // (which no key leads to) show only here.
        let read = || {
            stats.index_reads.fetch_add(1, Ordering::Relaxed);
            LockIndex::read().unwrap_or_default()
        };
        let index = annotate_reading(&mut batch, &own_pids, &read);
        let mut problems = report.problems;
        let unlinked_dir = state_dir.clone();
        problems.extend(
            tokio::task::spawn_blocking(move || unlinked::find(&unlinked_dir, &index, &known))
                .await
                .unwrap_or_default(),
        );
        problems.sort();
        Some(SweepOutcome {
            generation,
            batch,
            problems,
        })
    }
}
