//! The engine's view: what it has told its consumer of every claim, of
//! the watch's health and of the problems on disk, and the way deltas
//! reach the consumer.
//!
//! Invariants: `held` is exactly the keys of `states` whose liveness is
//! held, and the watcher's filter knows the same keys' files; a delta is
//! sent only for a difference from what the consumer was told; the engine
//! never waits for its consumer (deltas it has no room for wait in the
//! [`Outbox`], folded per key).

use std::collections::HashSet;
use std::sync::Arc;

use tokio::sync::mpsc::{self, error::TrySendError};

use super::outbox::Outbox;
use super::problems::Problems;
use crate::disk::{LockKey, ScanProblem};
use crate::engine::fs_events::EventFilter;
use crate::engine::store::KeyStore;
use crate::engine::{Delta, EngineStats, WatcherHealth};

/// What the consumer has been told, and how it is told more.
pub(super) struct View {
    /// Every claim's state as last sent.
    pub(super) states: KeyStore,
    /// The keys of `states` that are held (whose holders the clock
    /// refreshes).
    pub(super) held: HashSet<LockKey>,
    /// Shared with the watcher: `held`'s files, the other claim files
    /// opened, and whether a change was lost.
    pub(super) filter: Arc<EventFilter>,
    /// The problems on disk, as last sent.
    pub(super) problems: Problems,
    /// The watch's health, as last sent.
    pub(super) health: Option<WatcherHealth>,
    /// The consumer's channel.
    pub(super) deltas: mpsc::Sender<Delta>,
    /// Deltas the consumer has not had room for yet, folded per key.
    pub(super) outbox: Outbox,
    /// Counters the front ends read.
    pub(super) stats: Arc<EngineStats>,
}

impl View {
    /// An empty view that sends to `deltas`.
    pub(super) fn new(
        filter: Arc<EventFilter>,
        deltas: mpsc::Sender<Delta>,
        stats: Arc<EngineStats>,
    ) -> Self {
        Self {
            states: Default::default(),
            held: HashSet::new(),
            filter,
            problems: Problems::default(),
            health: None,
            deltas,
            outbox: Outbox::default(),
            stats,
        }
    }

    /// Sends a delta, or keeps it in the outbox (folded) while the
    /// consumer has no room: the engine never waits for its consumer.
    pub(super) fn send(&mut self, delta: Delta) {
        if !self.outbox.is_empty() {
            return self.outbox.push(delta, self.states.len());
        }
        if let Err(TrySendError::Full(delta)) = self.deltas.try_send(delta) {
            self.outbox.push(delta, self.states.len());
        }
    }

    /// Moves what the channel has room for from the outbox to it.
    pub(super) fn flush_outbox(&mut self) {
        while let Some(delta) = self.outbox.pop() {
            match self.deltas.try_send(delta) {
                Ok(()) => {}
                Err(TrySendError::Full(delta)) => return self.outbox.push_front(delta),
                Err(TrySendError::Closed(_)) => return self.outbox = Outbox::default(),
            }
        }
    }

    /// Sends the watch's health when it changed.
    pub(super) fn set_health(&mut self, health: WatcherHealth) {
        if self.health.as_ref() != Some(&health) {
            self.health = Some(health.clone());
            self.send(Delta::Health(health));
        }
    }

    /// Replaces every problem with a full scan's (sorted) findings, and
    /// sends them if they changed.
    pub(super) fn replace_problems(&mut self, found: Vec<ScanProblem>) {
        self.problems.replace(found);
        self.flush_problems();
    }

    /// Sends the whole list if it changed since the last flush.
    pub(super) fn flush_problems(&mut self) {
        if let Some(list) = self.problems.take_changed() {
            self.send(Delta::Problems(list));
        }
    }
}
