//! The engine's one source, whichever it is: the only place a source's
//! kind is matched on (each method hands the call to the source that
//! runs).
//!
//! Invariant: exactly one source at a time; the engine begins inferring
//! and switches to the kernel's events once it could open them, before
//! its first view — what one source was told is never applied by the
//! other.

use std::path::Path;

use tokio::time::Instant;

use super::inference::Inference;
use super::inference::lookup::LookupOutcome;
use super::judging::Judging;
use super::kernel::Kernel;
use super::source::{Asks, GatedClaim, Source, TreeWatchKind};
use crate::disk::LockKey;
use crate::liveness::kernel::Record;
use crate::liveness::kernel::live_table::Nudger;
use crate::liveness::proc_locks::LockIndex;

/// The source that runs.
pub(super) enum AnySource {
    /// Inotify's events and `/proc/locks` reads or probes.
    Inference(Box<Inference>),
    /// The kernel's lock events.
    Kernel(Box<Kernel>),
}

/// What the running source's stream told.
pub(super) enum Told {
    /// A `/proc/locks` lookup's outcome (inference).
    Inference(LookupOutcome),
    /// A batch of the kernel's lock events.
    Kernel(Vec<Record>),
}

/// Hands `$call` to the source that runs, as `$source`.
macro_rules! each {
    ($self:expr, $source:ident => $call:expr) => {
        match $self {
            AnySource::Inference($source) => $call,
            AnySource::Kernel($source) => $call,
        }
    };
}

#[cfg(test)]
impl AnySource {
    /// The inference's bookkeeping, when it runs.
    pub(super) fn inference(&self) -> Option<&Inference> {
        match self {
            Self::Inference(inference) => Some(inference),
            Self::Kernel(_) => None,
        }
    }

    /// The inference's bookkeeping, when it runs.
    pub(super) fn inference_mut(&mut self) -> Option<&mut Inference> {
        match self {
            Self::Inference(inference) => Some(inference),
            Self::Kernel(_) => None,
        }
    }
}

impl Source for AnySource {
    type Told = Told;

    fn tree_watch(&self) -> TreeWatchKind {
        each!(self, source => source.tree_watch())
    }

    fn watching(&mut self, root: &Path) {
        each!(self, source => source.watching(root))
    }

    fn mark(&mut self, key: LockKey) {
        each!(self, source => source.mark(key))
    }

    fn note_written(&mut self, key: &LockKey) {
        each!(self, source => source.note_written(key))
    }

    fn note_closed(&mut self, key: &LockKey) -> bool {
        each!(self, source => source.note_closed(key))
    }

    fn note_held_opened(&mut self, key: LockKey) {
        each!(self, source => source.note_held_opened(key))
    }

    fn note_others_opened(&mut self) {
        each!(self, source => source.note_others_opened())
    }

    fn forget(&mut self, key: &LockKey) {
        each!(self, source => source.forget(key))
    }

    fn sweep_begins(&mut self) {
        each!(self, source => source.sweep_begins())
    }

    fn judged_everything<'a>(
        &mut self,
        index: &LockIndex,
        held: impl Iterator<Item = &'a LockKey>,
        all: impl Iterator<Item = &'a LockKey>,
    ) {
        each!(self, source => source.judged_everything(index, held, all))
    }

    fn merged(&mut self, key: &LockKey) {
        each!(self, source => source.merged(key))
    }

    fn sweeps(&self) -> bool {
        each!(self, source => source.sweeps())
    }

    fn seeds_from_lock_table(&self) -> bool {
        each!(self, source => source.seeds_from_lock_table())
    }

    fn next_due(&self) -> Option<Instant> {
        each!(self, source => source.next_due())
    }

    fn withdrawn_by(&self) -> Option<Nudger> {
        each!(self, source => source.withdrawn_by())
    }

    fn take_due(&mut self, now: Instant) -> Vec<LockKey> {
        each!(self, source => source.take_due(now))
    }

    fn on_timers(&mut self, judging: &mut Judging<'_>, now: Instant) {
        each!(self, source => source.on_timers(judging, now))
    }

    async fn judge(&mut self, judging: &mut Judging<'_>, claims: Vec<GatedClaim>) {
        each!(self, source => source.judge(judging, claims).await)
    }

    async fn told(&mut self) -> Option<Told> {
        match self {
            Self::Inference(inference) => inference.told().await.map(Told::Inference),
            Self::Kernel(kernel) => kernel.told().await.map(Told::Kernel),
        }
    }

    async fn drain_now(&mut self, now: Instant) -> Option<Told> {
        match self {
            Self::Inference(inference) => inference.drain_now(now).await.map(Told::Inference),
            Self::Kernel(kernel) => kernel.drain_now(now).await.map(Told::Kernel),
        }
    }

    fn apply(&mut self, judging: &mut Judging<'_>, told: Told) -> Asks {
        match (self, told) {
            (Self::Inference(inference), Told::Inference(outcome)) => {
                inference.apply(judging, outcome)
            }
            (Self::Kernel(kernel), Told::Kernel(records)) => kernel.apply(judging, records),
            // Told by a source that no longer runs: nothing to apply.
            _ => Asks::default(),
        }
    }
}
