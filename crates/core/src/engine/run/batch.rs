//! What the loop does with changed claims, whatever the source: marks
//! them, takes those due at its timers, drops the ones whose files are
//! gone, has the rest judged as the source judges
//! ([`super::source::Source::judge`]: the kernel's lock table, or
//! inference's probes and reads), and sends only differences
//! ([`super::judging::Judging::update`]).

use std::time::SystemTime;

use tokio::time::Instant;

use super::Engine;
use super::source::Source;
use crate::disk::LockKey;
use crate::engine::Delta;
use crate::liveness::KeyState;

impl Engine {
    /// `key` changed: it is judged once its source's window passed.
    pub(super) fn mark(&mut self, key: LockKey) {
        self.source.mark(key);
    }

    pub(super) async fn on_timers(&mut self) {
        let now = Instant::now();
        self.view.flush_problems();
        let due = self.source.take_due(now);
        if !due.is_empty() {
            let from = self.clock();
            let items = due.len();
            self.probe_batch(due).await;
            self.span("probe batch", from, items);
        }
        if self.sweep_due().is_some_and(|due| due <= now) {
            let from = self.clock();
            self.start_background_sweep();
            self.span("start sweep", from, 0);
        }
        if self.holder_refresh_due().is_some_and(|due| due <= now) {
            let from = self.clock();
            let items = self.view.held.len();
            self.refresh_holders();
            self.span("refresh holders", from, items);
        }
        let from = self.clock();
        let (source, mut judging) = self.split();
        source.on_timers(&mut judging, now);
        self.span("source timers", from, 0);
    }

    /// Judges changed keys as the source does (see
    /// [`super::source`]): a claim whose gate is gone or is no lock file
    /// any more is removed first (and its files looked at as problems).
    pub(super) async fn probe_batch(&mut self, keys: Vec<LockKey>) {
        let mut claims = Vec::with_capacity(keys.len());
        for key in keys {
            let (gate, announce) = (key.gate_path(), key.announce_path());
            let is_file = std::fs::symlink_metadata(&gate).is_ok_and(|m| m.is_file());
            if !is_file {
                // Gone, or replaced by something that is not a lock file
                // (a symlink is never followed, let alone written through):
                // no claim, and maybe a problem (an orphan announce, a FIFO).
                self.remove(&key);
                self.view.problems.recheck(&gate);
                self.view.problems.recheck(&announce);
                continue;
            }
            if self.view.problems.has(&announce) {
                // Its gate came back: no longer an orphan.
                self.view.problems.recheck(&announce);
            }
            claims.push(key);
        }
        let (source, mut judging) = self.split();
        source.judge(&mut judging, claims).await;
        self.view.flush_problems();
    }

    /// `key` was judged `state` at `at` (see [`super::judging::Judging::update`]).
    pub(super) fn update(&mut self, key: LockKey, state: KeyState, at: SystemTime) {
        self.split().1.update(key, state, at);
    }

    pub(super) fn remove(&mut self, key: &LockKey) {
        if self.view.held.remove(key) {
            self.view.filter.set_held(key, false);
        }
        self.sweeps.touched.touch(key);
        self.source.forget(key);
        if let Some(state) = self.view.states.remove(key) {
            self.view.send(Delta::Removed {
                key: key.clone(),
                previous: state.liveness,
                at: SystemTime::now(),
            });
        }
    }
}
