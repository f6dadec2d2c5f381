//! Sweeps: a rescan of the whole root with a probe of every key (from
//! one `/proc/locks` read in the lock-free mode, else passive) —
//! inline for the initial sync, rescans and polling, on a thread of its
//! own for the periodic safety net (whose findings never overwrite a key
//! that events probed after it began).
//!
//! Invariants: the periodic sweep never runs on the runtime's worker
//! threads — its probes are thousands of synchronous syscalls, and two
//! chunks of them once kept both workers (and so the engine loop, and the
//! timer a probe in flight sleeps on) busy for 70+ ms; opens are muted
//! while a passive sweep probes ([`crate::engine::fs_events::EventFilter::mute_opens`]):
//! its own 2 opens per key would otherwise come back as thousands of
//! held-key rechecks and an opened-file look (a lock-free sweep opens no
//! claim file, so others' opens stay heard).

use std::collections::HashSet;
use std::hash::BuildHasher;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, SystemTime};

use tokio::time::Instant;

use tokio::sync::mpsc::{self, UnboundedReceiver, UnboundedSender};

use super::source::Source;
use super::{Engine, newer};
use crate::disk::{LockKey, ScanProblem, ScanProblemKind};
use crate::engine::fs_events::EventFilter;
use crate::engine::trace::Stage;
use crate::engine::{Delta, EngineStats, WatcherHealth};
use crate::liveness::Liveness;
use crate::liveness::annotate::{Recheck, annotate_reading};
use crate::liveness::bulk::ReadLocks;
use crate::liveness::probed::Probed;
use crate::liveness::proc_locks::LockIndex;
use crate::liveness::unlinked::{self, KnownInodes};
use crate::liveness::{KeyState, ProbeMode, Prober};
use crate::liveness::{bulk, dir_probe};

/// The periodic sweep's clock, and what a sweep's findings need while
/// they are merged.
///
/// Invariant: findings of a sweep begun before the last `generation`
/// bump are dropped; while one runs or is merged, `touched` holds the
/// keys events judged or removed since it began, which it never
/// overwrites.
pub(super) struct Sweeps {
    /// When the periodic sweep is next due (inference only).
    pub(super) next: Instant,
    /// While a background sweep runs or is merged: the keys events probed
    /// or removed since it began (its findings about them are older).
    pub(super) touched: newer::Newer,
    /// The background sweep's findings being merged, a chunk per turn.
    pub(super) merging: Option<Merge>,
    /// Bumped whenever the view is thrown away (root gone, polling), so a
    /// background sweep begun before cannot resurrect it.
    pub(super) generation: u64,
    /// Where background sweeps report, and the loop reads.
    pub(super) results_tx: UnboundedSender<Option<SweepOutcome>>,
    pub(super) results: UnboundedReceiver<Option<SweepOutcome>>,
}

impl Sweeps {
    /// None running; the first periodic one due at `next`.
    pub(super) fn new(next: Instant) -> Self {
        let (results_tx, results) = mpsc::unbounded_channel();
        Self {
            next,
            touched: newer::Newer::default(),
            merging: None,
            generation: 0,
            results_tx,
            results,
        }
    }
}

impl Engine {
    /// A background sweep still running will be ignored when it reports: the
    /// view it would merge into is gone or newer than its findings.
    pub(super) fn disown_background_sweep(&mut self) {
        self.sweeps.generation += 1;
        self.sweeps.touched.end();
        self.sweeps.merging = None;
    }

    /// Drops the whole view (the root went away, or watching gave way to
    /// polling); a background sweep still running is disowned.
    pub(super) fn forget_everything(&mut self) {
        self.disown_background_sweep();
        let keys: Vec<LockKey> = self.view.states.keys().cloned().collect();
        for key in keys {
            self.remove(&key);
        }
        self.view.replace_problems(Vec::new());
    }

    /// Rescans the root and probes every claim, inline (the initial sync,
    /// rescans, polling): events wait until the scan is done. Its findings
    /// are then merged like a periodic sweep's, a chunk per turn of the
    /// loop and only as fast as the consumer takes the deltas (so a
    /// million keys never wait in the outbox), held keys first; events
    /// heard meanwhile are newer and win.
    pub(super) async fn full_sweep(&mut self) {
        self.sweeps.next = Instant::now() + self.config.sweep_every;
        // The sweep probes every key after the changes that marked these,
        // and looks at every file opened: its answer is newer (and
        // passive, so after an overflow it cannot start a storm of acquire
        // probes of its own).
        self.source.sweep_begins();
        self.disown_background_sweep();
        self.view.filter.take_opened();
        let outcome = self.sweep_job(Workers::Runtime).run().await;
        if let Some(outcome) = outcome {
            self.sweeps.touched.begin();
            self.begin_merge(outcome);
        }
    }

    /// Judges everything again from one `/proc/locks` read and goes on
    /// from events (its source lost some): the view says rescanning until
    /// it is done.
    pub(super) async fn resync(&mut self) {
        self.full_sweep().await;
        if matches!(self.view.health, Some(WatcherHealth::Rescanning { .. })) {
            self.view.set_health(WatcherHealth::Watching);
        }
    }

    /// When the periodic sweep is next due, if the source makes one.
    pub(super) fn sweep_due(&self) -> Option<Instant> {
        self.source.sweeps().then_some(self.sweeps.next)
    }

    /// Whether the next chunk of a sweep's findings may be merged: one is
    /// being merged, and the consumer took every delta sent so far.
    pub(super) fn may_merge(&self) -> bool {
        self.sweeps.merging.is_some() && self.view.outbox.is_empty()
    }

    /// Starts the periodic sweep on its own task, so events keep being
    /// handled while it runs; [`Self::begin_merge`] merges its outcome.
    pub(super) fn start_background_sweep(&mut self) {
        self.sweeps.next = Instant::now() + self.config.sweep_every;
        if self.sweeps.touched.active() {
            return;
        }
        self.sweeps.touched.begin();
        let tx = self.sweeps.results_tx.clone();
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
            generation: self.sweeps.generation,
            state_dir: self.tree.state_dir.clone(),
            prober: self.prober.clone(),
            own_pids: self.own_pids.clone(),
            stats: self.view.stats.clone(),
            filter: self.view.filter.clone(),
            workers,
            lock_free: self.config.probe.reads_lock_table() || self.source.seeds_from_lock_table(),
            // With nothing known yet (the initial sync), nothing can be
            // gone: no set of found keys to build (19 MB at a million).
            find_gone: !self.view.states.is_empty(),
            // The inline sweeps watch the tree they walk; the periodic
            // one leaves the watches as events keep them.
            on_dir: match workers {
                Workers::Runtime => self.tree.dir_hook(),
                Workers::OneThread => None,
            },
        }
    }

    /// Begins merging a sweep's findings: the keys it did not find on disk
    /// are removed at once — but a key below a directory the sweep could
    /// not read is not known to be gone: it becomes an error saying so
    /// (unreadable is a problem, not a removal); the others are merged by [`Self::merge_some`],
    /// a chunk per turn of the loop. A key events probed or removed since
    /// the sweep began (in `sweeps.touched`, until the merge ends) keeps
    /// the newer answer.
    pub(super) fn begin_merge(&mut self, outcome: SweepOutcome) {
        let SweepOutcome {
            batch,
            found,
            problems,
            index,
            took,
            ..
        } = outcome;
        if let Some(stretch) = self.config.sweep_stretch {
            // The next periodic sweep waits `stretch` times as long as
            // this one ran: sweeping costs at most about 1/stretch of a
            // core, however many keys the tree holds.
            let later = Instant::now() + took.saturating_mul(stretch);
            self.sweeps.next = self.sweeps.next.max(later);
        }
        if let Some(index) = &index {
            let held = batch.rest.iter().map(|(key, _)| key);
            self.source.judged_everything(index, held, batch.keys());
        }
        let gone: Vec<LockKey> = match &found {
            // Nothing was known when the sweep began: every key known now
            // came after it (events), and none is gone.
            None => Vec::new(),
            Some(found) => self
                .view
                .states
                .keys()
                .filter(|key| !found.contains(key) && !self.sweeps.touched.contains(key))
                .cloned()
                .collect(),
        };
        drop(found);
        let unreadable: Vec<(PathBuf, String)> = problems
            .iter()
            .filter_map(|problem| match &problem.kind {
                ScanProblemKind::Unreadable(why) => Some((problem.path.clone(), why.clone())),
                _ => None,
            })
            .collect();
        let at = SystemTime::now();
        for key in gone {
            match unreadable
                .iter()
                .find(|(dir, _)| key.dir().starts_with(dir))
            {
                Some((dir, why)) => {
                    let state = KeyState {
                        error: Some(format!(
                            "cannot tell: its directory {} cannot be read ({why})",
                            dir.display()
                        )),
                        ..KeyState::bare(Liveness::Error)
                    };
                    self.update(key, state, at);
                }
                None => self.remove(&key),
            }
        }
        // One table for every key found: no growth (two tables at once)
        // while a million are merged.
        self.view
            .states
            .reserve(batch.len().saturating_sub(self.view.states.len()));
        self.sweeps.merging = Some(Merge {
            count: batch.len(),
            batch: Box::new(batch.into_iter_rest_first()),
            problems,
            at: SystemTime::now(),
            gone_dirs: Vec::new(),
        });
    }

    /// Merges up to `most` more keys of the sweep being merged; after the
    /// last, its problems and the `Synced` mark go out and the sweep is
    /// over. Returns how many keys it looked at.
    pub(super) fn merge_some(&mut self, most: usize) -> usize {
        // Taken out while merging (`update` needs `self`), put back unless
        // done: the findings are moved one by one, never copied whole.
        let Some(mut merge) = self.sweeps.merging.take() else {
            return 0;
        };
        let mut items = 0;
        for (key, state) in merge.batch.by_ref().take(most) {
            items += 1;
            if self.sweeps.touched.contains(&key) {
                continue;
            }
            if merge.gone_dirs.iter().any(|dir| key.dir().starts_with(dir)) {
                continue;
            }
            self.trace(&key, Stage::Swept(state.liveness));
            self.source.merged(&key);
            self.update(key, state, merge.at);
        }
        if merge.batch.len() > 0 {
            self.sweeps.merging = Some(merge);
            return items;
        }
        self.sweeps.touched.end();
        self.view.replace_problems(merge.problems);
        self.view.send(Delta::Synced {
            keys: merge.count,
            at: merge.at,
        });
        items
    }
}

/// How many keys of a periodic sweep are merged per turn of the loop: a
/// change waits for one such chunk at most, not for the whole sweep
/// (merging 10,000 keys at once held the loop for 36 ms on a loaded
/// machine, the slowest kill of a bench run).
pub(super) const MERGE_CHUNK: usize = 1_024;

/// A sweep's findings being merged, a chunk per turn of the loop.
pub(super) struct Merge {
    /// Held (and otherwise noteworthy) keys first: they are what a view
    /// needs before the million free ones.
    batch: Box<dyn ExactSizeIterator<Item = (LockKey, KeyState)> + Send>,
    /// How many keys the sweep found.
    count: usize,
    problems: Vec<ScanProblem>,
    /// When the merge began (the time of its deltas).
    at: SystemTime,
    /// Directories removed since the merge began: their keys still in
    /// `batch` are gone, not merged (a removal event names only the
    /// directory).
    gone_dirs: Vec<PathBuf>,
}

impl Merge {
    /// The directory `dir` (and everything below it) was removed.
    pub(super) fn dir_removed(&mut self, dir: PathBuf) {
        self.gone_dirs.push(dir);
    }
}

/// What one sweep found: every claim on disk, probed passively and
/// annotated, and the scan's problems (sorted).
pub(super) struct SweepOutcome {
    /// The engine's generation when the sweep began (see
    /// [`Engine::forget_everything`]).
    pub(super) generation: u64,
    batch: Probed,
    /// The keys of `batch`, for the gone-key pass on the loop (`None`
    /// when nothing was known as the sweep began).
    found: Option<FoundKeys>,
    problems: Vec<ScanProblem>,
    /// The lock-free sweep's `/proc/locks` read (what seeds the event
    /// source's table).
    index: Option<LockIndex>,
    /// How long the sweep ran (its walk and judgement, not the merge).
    took: Duration,
}

/// The set of keys a sweep found, built on the sweep's thread so that
/// the engine loop only looks keys up in it: each key is kept as a 64-bit
/// hash of its identity (`dir` and `key`), with a seed of its own per
/// sweep. Looking up the loop's 10,000 keys in a set of the keys
/// themselves took 1.3–3 ms on a quiet machine and 16.9 ms on a loaded
/// one (the slowest kill of a bench run waited behind it); hashes make
/// it a pass over small integers.
///
/// Invariant: never says a found key was not found. A gone key whose
/// hash equals a found key's (odds near 10⁻¹¹ at 10,000 keys) would be
/// kept until a later sweep or event; that is the whole cost of a
/// collision.
pub(super) struct FoundKeys {
    seed: foldhash::quality::RandomState,
    hashes: HashSet<u64, foldhash::fast::RandomState>,
}

impl FoundKeys {
    /// The set of `batch`'s keys.
    pub(super) fn of(batch: &Probed) -> Self {
        let seed = foldhash::quality::RandomState::default();
        let mut hashes =
            HashSet::with_capacity_and_hasher(batch.len(), foldhash::fast::RandomState::default());
        hashes.extend(batch.keys().map(|key| Self::hash(&seed, key)));
        Self { seed, hashes }
    }

    /// Whether `key` is (as far as its hash tells) one the sweep found.
    pub(super) fn contains(&self, key: &LockKey) -> bool {
        self.hashes.contains(&Self::hash(&self.seed, key))
    }

    fn hash(seed: &foldhash::quality::RandomState, key: &LockKey) -> u64 {
        use std::os::unix::ffi::OsStrExt;
        seed.hash_one((key.dir().as_os_str().as_bytes(), key.key().as_bytes()))
    }
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
    /// Judge every claim from the sweep's `/proc/locks` read (no probe
    /// opens a claim file) instead of probing passively.
    lock_free: bool,
    /// Whether the engine knew keys as the sweep began (else none can be
    /// gone, and the found keys' set is not built).
    find_gone: bool,
    /// Watches each directory before the walk reads it (while watching:
    /// the initial walk is what watches the tree; later ones keep it so).
    on_dir: Option<crate::disk::scan::OnDir>,
}

impl SweepJob {
    /// Scan + passive probe + one `/proc/locks` read (holders, and claim
    /// files held though unlinked); `None` if the root could not be
    /// scanned.
    async fn run(self) -> Option<SweepOutcome> {
        let began = std::time::Instant::now();
        let mut outcome = self.run_untimed().await?;
        outcome.took = began.elapsed();
        Some(outcome)
    }

    async fn run_untimed(self) -> Option<SweepOutcome> {
        let SweepJob {
            generation,
            state_dir,
            prober,
            own_pids,
            stats,
            filter,
            workers,
            lock_free,
            on_dir,
            find_gone,
        } = self;
        stats.sweeps.fetch_add(1, Ordering::Relaxed);
        if lock_free {
            return Self::run_lock_free(
                generation, state_dir, own_pids, stats, workers, on_dir, find_gone,
            )
            .await;
        }
        let muted = filter.mute_opens();
        let mut report = match crate::disk::scan::scan_root_watching(&state_dir, on_dir).await {
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
        // (A passive sweep holds every state until annotated; the
        // lock-free one, the default, never does.)
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
        let index = annotate_reading(&mut batch, &own_pids, &read, Recheck::SharedProbe);
        let batch = Probed::of(batch);
        Some(
            outcome(
                generation,
                batch,
                report.problems,
                state_dir,
                index,
                known,
                find_gone,
            )
            .await,
        )
    }
}

/// A sweep's outcome: its claims, and its scan's problems with the claim
/// files held though unlinked (from its `/proc/locks` read, `index`;
/// `known`: the inodes of the claim files it found), sorted.
async fn outcome(
    generation: u64,
    batch: Probed,
    mut problems: Vec<ScanProblem>,
    state_dir: PathBuf,
    index: LockIndex,
    known: KnownInodes,
    find_gone: bool,
) -> SweepOutcome {
    let (index, unlinked) = tokio::task::spawn_blocking(move || {
        let unlinked = unlinked::find(&state_dir, &index, &known);
        (index, unlinked)
    })
    .await
    .unwrap_or_default();
    problems.extend(unlinked);
    problems.sort();
    SweepOutcome {
        generation,
        found: find_gone.then(|| FoundKeys::of(&batch)),
        batch,
        problems,
        index: Some(index),
        took: Duration::ZERO,
    }
}

impl SweepJob {
    /// The lock-free sweep: a snapshot's walk and judgement
    /// ([`bulk::probe_tree_lock_free`]: one merged `/proc/locks` read,
    /// begun before the walk, names liveness and holders; nothing
    /// opened), then the claim files held though unlinked.
    async fn run_lock_free(
        generation: u64,
        state_dir: PathBuf,
        own_pids: HashSet<u32>,
        stats: Arc<EngineStats>,
        workers: Workers,
        on_dir: Option<crate::disk::scan::OnDir>,
        find_gone: bool,
    ) -> Option<SweepOutcome> {
        let threads = match workers {
            Workers::Runtime => std::thread::available_parallelism().map_or(2, usize::from),
            Workers::OneThread => 1,
        };
        let counted = stats.clone();
        let read: ReadLocks = Arc::new(move || {
            counted.index_reads.fetch_add(1, Ordering::Relaxed);
            LockIndex::read().unwrap_or_default()
        });
        let tree =
            match bulk::probe_tree_lock_free(&state_dir, &own_pids, threads, read, on_dir).await {
                Ok(tree) => tree,
                Err(error) => {
                    tracing::warn!(%error, "sweep could not scan the locks root");
                    return None;
                }
            };
        let bulk::TreeProbe {
            batch,
            mut report,
            index,
            ..
        } = tree;
        stats
            .probes
            .fetch_add(batch.len() as u64, Ordering::Relaxed);
        let known = KnownInodes::new(std::mem::take(&mut report.claim_inodes));
        Some(
            outcome(
                generation,
                batch,
                report.problems,
                state_dir,
                index,
                known,
                find_gone,
            )
            .await,
        )
    }
}

#[cfg(test)]
mod tests {
    use tokio::sync::mpsc;

    use super::*;
    use crate::context::Context;
    use crate::engine::EngineConfig;
    use crate::liveness::Liveness;

    /// A sweep that ran for a second puts the next periodic one at least
    /// `stretch` seconds away when the period is stretched (the default),
    /// and leaves an exact period (`--sweep` given) as it is.
    #[tokio::test]
    async fn a_long_sweep_pushes_the_next_one_back_only_when_stretched() {
        for (stretch, pushed) in [(Some(100), true), (None, false)] {
            let tmp = tempfile::tempdir().unwrap();
            let (tx, _deltas) = mpsc::channel(16);
            let config = EngineConfig {
                sweep_stretch: stretch,
                ..EngineConfig::default()
            };
            let mut engine = Engine::new(
                Context::new(tmp.path().to_path_buf()),
                config,
                tx,
                Default::default(),
            );
            let before = Instant::now();
            engine.sweeps.next = before + crate::engine::SWEEP_EVERY;
            engine.begin_merge(SweepOutcome {
                index: None,
                generation: engine.sweeps.generation,
                found: None,
                batch: Probed::default(),
                problems: Vec::new(),
                took: Duration::from_secs(1),
            });
            let wait = engine.sweeps.next - before;
            if pushed {
                assert!(wait >= Duration::from_secs(100), "{wait:?}");
            } else {
                assert_eq!(wait, crate::engine::SWEEP_EVERY);
            }
        }
    }

    /// A directory removed while a sweep's findings are being merged (a
    /// removal event names the directory only): its keys not merged yet
    /// are gone, never merged in as if they were on disk.
    #[tokio::test]
    async fn keys_of_a_directory_removed_during_the_merge_are_not_merged() {
        let tmp = tempfile::tempdir().unwrap();
        let (tx, _deltas) = mpsc::channel(16_384);
        let context = Context::new(tmp.path().to_path_buf());
        let mut engine = Engine::new(context, EngineConfig::default(), tx, Default::default());
        let instances = tmp.path().join("locks/agents/instances");
        let (gone_dir, kept_dir) = (instances.join("gone"), instances.join("kept"));
        let mut batch = Probed::default();
        for i in 0..10 {
            for dir in [&gone_dir, &kept_dir] {
                let key = LockKey::from_coord(tmp.path(), dir, &format!("a{i}"));
                batch.push(key, KeyState::FREE);
            }
        }
        engine.begin_merge(SweepOutcome {
            index: None,
            generation: engine.sweeps.generation,
            found: None,
            batch,
            problems: Vec::new(),
            took: Duration::ZERO,
        });
        engine
            .sweeps
            .merging
            .as_mut()
            .unwrap()
            .dir_removed(gone_dir.clone());
        engine.merge_some(usize::MAX);
        assert_eq!(engine.view.states.len(), 10);
        assert!(engine.view.states.keys().all(|key| key.dir() == kept_dir));
    }

    /// A background sweep's 3,000 findings are merged a chunk per turn:
    /// a known key the sweep did not find is removed at once, unless an
    /// event probed it since the sweep began; after one turn only the
    /// first chunk is in and no `Synced` went out; a key an event probed
    /// meanwhile keeps that newer answer; the last chunk sends `Synced`
    /// and ends the sweep.
    #[tokio::test]
    async fn a_sweep_is_merged_a_chunk_per_turn_and_newer_answers_win() {
        let tmp = tempfile::tempdir().unwrap();
        let tags = tmp.path().join("locks/agents/tags");
        let (tx, mut deltas) = mpsc::channel(16_384);
        let context = Context::new(tmp.path().to_path_buf());
        let mut engine = Engine::new(context, EngineConfig::default(), tx, Default::default());
        let keys: Vec<LockKey> = (0..3_000)
            .map(|i| LockKey::from_coord(tmp.path(), &tags, &format!("k{i}")))
            .collect();
        let batch: Vec<(LockKey, KeyState)> = keys
            .iter()
            .map(|key| (key.clone(), KeyState::bare(Liveness::Free)))
            .collect();
        // Known before the sweep and found by it (kept); known, not found:
        // one untouched (gone), one an event probed after the sweep began
        // (kept).
        let (gone, probed) = (
            LockKey::from_coord(tmp.path(), &tags, "gone"),
            LockKey::from_coord(tmp.path(), &tags, "probed"),
        );
        for key in [&keys[0], &gone, &probed] {
            let live = KeyState::bare(Liveness::Live);
            engine.update(key.clone(), live, SystemTime::now());
        }
        engine.sweeps.touched.begin();
        engine.sweeps.touched.touch(&probed);
        while deltas.try_recv().is_ok() {}
        let batch = Probed::of(batch);
        engine.begin_merge(SweepOutcome {
            index: None,
            generation: engine.sweeps.generation,
            found: Some(FoundKeys::of(&batch)),
            batch,
            problems: Vec::new(),
            took: Duration::ZERO,
        });

        assert!(!engine.view.states.contains_key(&gone));
        assert!(matches!(
            deltas.try_recv(),
            Ok(Delta::Removed { key, .. }) if key == gone
        ));
        assert!(engine.view.states.contains_key(&probed));
        assert!(engine.view.states.contains_key(&keys[0]));
        assert!(
            deltas.try_recv().is_err(),
            "one key removed, no other delta"
        );

        assert_eq!(engine.merge_some(MERGE_CHUNK), MERGE_CHUNK);
        assert_eq!(engine.view.states.len(), MERGE_CHUNK + 1);
        // An event's probe of a key not merged yet: its answer is newer.
        let late = keys[2_999].clone();
        engine.sweeps.touched.touch(&late);
        engine.update(
            late.clone(),
            KeyState::bare(Liveness::Live),
            SystemTime::now(),
        );
        let sent: Vec<Delta> = std::iter::from_fn(|| deltas.try_recv().ok()).collect();
        assert!(!sent.iter().any(|d| matches!(d, Delta::Synced { .. })));

        while engine.sweeps.merging.is_some() {
            engine.merge_some(MERGE_CHUNK);
        }
        assert_eq!(engine.view.states.len(), 3_001);
        assert_eq!(
            engine.view.states.get(&late).unwrap().liveness,
            Liveness::Live
        );
        assert!(!engine.sweeps.touched.active(), "the sweep is over");
        let sent: Vec<Delta> = std::iter::from_fn(|| deltas.try_recv().ok()).collect();
        assert!(matches!(
            sent.last(),
            Some(Delta::Synced { keys: 3_000, .. })
        ));
    }
}
