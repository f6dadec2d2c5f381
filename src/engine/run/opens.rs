//! Holders that make no write: a process that opens a free key's gate
//! read-only and flocks it (util-linux `flock(1)` does) makes only an
//! IN_OPEN. Probing on opens would feed on the engine's own probes (and
//! two monitors on each other's), so an open is only remembered
//! ([`crate::engine::fs_events::EventFilter`]) and, shortly after, the opened files are
//! compared with one `/proc/locks` read — which makes no filesystem event
//! and so cannot echo. A file that turns out locked by someone while the
//! engine thinks its key is not held is probed like any changed key.
//!
//! Invariants: one `/proc/locks` read (rate-limited like every other) per
//! look, however many files were opened; no file is opened by the look
//! itself (`lstat` only); a look finds only locks taken by the time it
//! runs ([`OPEN_SETTLE`] after the first open) — a process that opens now
//! and locks much later is found by the periodic sweep.

use std::time::Duration;

use tokio::time::Instant;

use super::Engine;
use crate::engine::fs_events::claim_of;
use crate::liveness::proc_locks::{FileId, LockIndex};

/// How long after the first open the look is made: `flock(1)` locks right
/// after it opens, and one look then stands for every open of a burst.
pub const OPEN_SETTLE: Duration = Duration::from_millis(10);

impl Engine {
    /// Compares the claim files opened since the last look with a fresh
    /// `/proc/locks` read; marks the keys locked by someone the view
    /// does not show as holding them. Returns how many files it looked at.
    pub(super) fn look_at_opened_files(&mut self, now: Instant) -> usize {
        self.opens_due = None;
        let opened = self.filter.take_opened();
        let count = opened.len();
        if opened.is_empty() {
            return 0;
        }
        self.stats
            .index_reads
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let index = LockIndex::read().unwrap_or_default();
        for path in opened {
            let Ok(file) = FileId::of(&path) else {
                continue;
            };
            let locked = index
                .get(&file)
                .is_some_and(|locks| !locks.holders.is_empty() || !locks.shared.is_empty());
            if !locked {
                continue;
            }
            let Some(key) = claim_of(&self.state_dir, &path) else {
                continue;
            };
            if !self.held.contains(&key) {
                self.mark(key);
            }
        }
        self.index = Some((now, index));
        count
    }

    /// Forgets the opens remembered so far: a full sweep probes every key
    /// after this, which stands for them.
    pub(super) fn forget_opened_files(&mut self) {
        self.opens_due = None;
        self.filter.take_opened();
    }
}
