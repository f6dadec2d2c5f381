//! What the loop does with changed claims, whatever the source: marks
//! them, takes those due at its timers, drops the ones whose files are
//! gone, has the rest judged as the source judges
//! ([`Engine::judge_changed`]: the kernel's lock table, or inference's
//! probes and reads, [`super::inference`]), and sends only differences
//! ([`Engine::update`]).

use std::time::SystemTime;

use tokio::time::Instant;

use super::Engine;
use crate::disk::LockKey;
use crate::engine::Delta;
use crate::engine::trace::Stage;
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
        if self.source.waiters_due(now) {
            self.check_waiters();
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
        if self
            .source
            .inference()
            .is_some_and(|inference| inference.lookups.may_start(now))
        {
            let from = self.clock();
            self.start_waiting_lookup(now);
            self.span("start lookup", from, 0);
        }
        self.watch_echo_rate();
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
        self.judge_changed(claims).await;
        self.view.flush_problems();
    }

    pub(super) fn update(&mut self, key: LockKey, mut state: KeyState, at: SystemTime) {
        // A fresh probe's holders carry no CPU history: the refresh's is
        // theirs (so a re-probe never flips a holder's idleness).
        let idle_after = self.config.idle_after;
        self.holders
            .cpu
            .stamp(&mut state.holders, SystemTime::now(), idle_after);
        let previous = self.view.states.get(&key);
        if previous == Some(&state) {
            return;
        }
        let previous = previous.map(|s| s.liveness);
        if state.liveness.is_held() {
            if self.view.held.insert(key.clone()) {
                self.share_held(&key, true);
            }
        } else if self.view.held.remove(&key) {
            self.share_held(&key, false);
        }
        self.view.states.insert(key.clone(), state.clone());
        self.trace(&key, Stage::Sent(state.liveness));
        self.view.send(Delta::Key {
            key,
            state,
            previous,
            at,
        });
    }

    /// Keeps the watcher thread's copy of held keys' files in step.
    fn share_held(&self, key: &LockKey, held: bool) {
        self.view.filter.set_held(key, held);
    }

    pub(super) fn remove(&mut self, key: &LockKey) {
        self.unregister(key);
        if self.view.held.remove(key) {
            self.share_held(key, false);
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
