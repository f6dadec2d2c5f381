//! What a source's judgement reaches of the engine: the view it updates
//! and what an update needs (the holders' CPU times, the sweep's touched
//! keys, the trace), and what a judgement reads (the config, the prober,
//! this process's own PIDs, the state dir).
//!
//! Invariants: a source changes the view only through
//! [`Judging::update`] (which sends only differences and keeps `held`
//! and the watcher's copy of it in step) or the view's own methods; it
//! never reaches the tree's watch, the sweeps' clock or another source.

use std::collections::HashSet;
use std::path::Path;
use std::time::SystemTime;

use super::newer::Newer;
use super::view::View;
use crate::disk::LockKey;
use crate::engine::trace::{self, Stage};
use crate::engine::{Delta, EngineConfig};
use crate::liveness::process::HolderDetail;
use crate::liveness::{CpuClock, KeyState, Prober, ProcessInfo};

/// The engine as a source's judgement sees it (borrowed for one call).
pub(super) struct Judging<'a> {
    /// The engine's settings.
    pub(super) config: &'a EngineConfig,
    /// Probes claims (inference).
    pub(super) prober: &'a Prober,
    /// This process and its test holders.
    pub(super) own_pids: &'a HashSet<u32>,
    /// The state dir watched.
    pub(super) state_dir: &'a Path,
    /// What the consumer has been told.
    pub(super) view: &'a mut View,
    /// While a sweep runs or is merged, the keys judged since it began
    /// (a judgement is newer than the sweep's findings).
    pub(super) sweep_touched: &'a mut Newer,
    /// The view's generation (a lookup begun before it was thrown away
    /// answers nothing).
    pub(super) generation: u64,
    /// Holders' CPU time (a fresh judgement's holders carry none).
    pub(super) cpu: &'a mut CpuClock,
}

impl Judging<'_> {
    /// `key` was judged `state` at `at`: sent when it differs from what
    /// the consumer was told.
    pub(super) fn update(&mut self, key: LockKey, mut state: KeyState, at: SystemTime) {
        // A fresh probe's holders carry no CPU history: the refresh's is
        // theirs (so a re-probe never flips a holder's idleness).
        let idle_after = self.config.idle_after;
        self.cpu
            .stamp(&mut state.holders, SystemTime::now(), idle_after);
        if self.config.holder_detail == HolderDetail::PidOnly {
            // Whichever judgement read it (a sweep reads holders named):
            // one detail for every state sent, so none differs by it.
            state.holders.iter_mut().for_each(ProcessInfo::forget_names);
        }
        let view = &mut *self.view;
        let previous = view.states.get(&key);
        if previous == Some(&state) {
            return;
        }
        let previous = previous.map(|s| s.liveness);
        if state.liveness.is_held() {
            if view.held.insert(key.clone()) {
                view.filter.set_held(&key, true);
            }
        } else if view.held.remove(&key) {
            view.filter.set_held(&key, false);
        }
        view.states.insert(key.clone(), state.clone());
        trace::note(&self.config.trace, &key, Stage::Sent(state.liveness));
        view.send(Delta::Key {
            key,
            state,
            previous,
            at,
        });
    }

    /// Records `stage` for `key` when tracing is on.
    pub(super) fn trace(&self, key: &LockKey, stage: Stage) {
        trace::note(&self.config.trace, key, stage);
    }
}
