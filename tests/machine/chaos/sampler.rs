//! Mutual exclusion as the kernel sees it: `/proc/locks`, sampled on a
//! thread of its own while the chaos runs. No gate or announce file of the
//! pool may ever have two exclusive flock holders at once (no chaos child
//! forks, so two PIDs are two owners) — as their fdinfo confirms: with
//! other locks on the machine, a read spans pages that are not one
//! snapshot.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use locktop::liveness::fdinfo::HeldFiles;
use locktop::liveness::proc_locks::{FileId, LockIndex};
use locktop::locks::escape::{announce_path, gate_path};

use super::checks::pool;

/// What the sampler saw.
#[derive(Debug, Default)]
pub struct Sampled {
    /// `/proc/locks` reads.
    pub samples: usize,
    /// The most pool files exclusively held in one sample.
    pub max_held_files: usize,
    /// Files seen with two exclusive holders, and who.
    pub violations: Vec<String>,
}

/// A running sampler.
pub struct Sampler {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<Sampled>,
}

impl Sampler {
    /// Starts sampling the pool's files under `state` every `every`.
    pub fn start(state: PathBuf, every: Duration) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut sampled = Sampled::default();
            while !flag.load(Ordering::Relaxed) {
                sample(&state, &mut sampled);
                std::thread::sleep(every);
            }
            sampled
        });
        Self { stop, thread }
    }

    /// Stops it and returns what it saw.
    pub fn finish(self) -> Sampled {
        self.stop.store(true, Ordering::Relaxed);
        self.thread
            .join()
            .expect("the /proc/locks sampler panicked")
    }
}

fn sample(state: &std::path::Path, sampled: &mut Sampled) {
    let files: Vec<(String, FileId)> = pool(state)
        .into_iter()
        .flat_map(|(name, dir, key)| {
            [
                ("gate", gate_path(&dir, &key)),
                ("announce", announce_path(&dir, &key)),
            ]
            .into_iter()
            .filter_map(move |(which, path)| {
                Some((format!("{name:?} {which}"), FileId::of(&path).ok()?))
            })
        })
        .collect();
    let index = LockIndex::read().expect("read /proc/locks");
    sampled.samples += 1;
    let mut held = 0;
    for (what, id) in files {
        let Some(locks) = index.get(&id) else {
            continue;
        };
        held += usize::from(!locks.holders.is_empty());
        // A read longer than a page is not a snapshot: a lock released
        // and another taken between two pages are both listed. Two
        // holders count only when both fdinfos show the lock now.
        let holding: Vec<u32> = locks
            .holders
            .iter()
            .copied()
            .filter(|&pid| HeldFiles::of(pid).holds_any(&[id]))
            .collect();
        if holding.len() > 1 {
            sampled
                .violations
                .push(format!("{what}: exclusive holders {holding:?}"));
        }
    }
    sampled.max_held_files = sampled.max_held_files.max(held);
}
