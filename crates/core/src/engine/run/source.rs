//! How the engine learns liveness — the one boundary between the engine
//! and its two ways of knowing what is locked — and the bookkeeping each
//! way keeps for itself.
//!
//! The engine proper (the view, the tree's shape, problems, holders'
//! refresh, sweeps, the deltas) is the same under both; everything a
//! source needs beyond it lives in that source's variant:
//!
//! - [`Inference`]: inotify's events tell that something changed, and a
//!   probe or a `/proc/locks` read says what. Its bookkeeping is about
//!   reading too early, too often or too late: the coalescing batch, the
//!   close confirmation, claims in flight, held states waiting for a read
//!   to name their holders, the reads' rate limit and budget, opened
//!   files to look at once they settle, and the acquire probe's echo;
//! - [`Kernel`]: the kernel's own lock events keep a table of who holds
//!   and waits; each claim is judged from it a moment after its own first
//!   change (see [`super::kernel`]). None of the inference's windows,
//!   settles, budgets or fdinfo shortcuts apply.
//!
//! Invariant: the engine holds exactly one source at a time, so the
//! compiler keeps the kernel's path from reaching the inference's
//! bookkeeping (a method of one reaches the other's state only through
//! [`Source::inference_mut`] or [`Source::kernel_mut`], which answer
//! `None` under the other). The engine begins inferring and switches to
//! the kernel's events once it could open them, before its first view.

use tokio::time::Instant;

use super::inference::Inference;
use super::kernel::Kernel;
use super::lookup;
use crate::disk::LockKey;

/// What the liveness source has for the loop.
pub(super) enum Told {
    /// A batch of the kernel's lock events.
    Records(Vec<crate::liveness::kernel::Record>),
    /// A `/proc/locks` lookup's outcome (inference).
    Lookup(lookup::LookupOutcome),
}

/// The engine's way of learning liveness, with what it keeps.
pub(super) enum Source {
    /// Inotify's events and `/proc/locks` reads or probes.
    Inference(Box<Inference>),
    /// The kernel's lock events.
    Kernel(Box<Kernel>),
}

impl Source {
    /// The inference's bookkeeping, when it is the source.
    pub(super) fn inference(&self) -> Option<&Inference> {
        match self {
            Self::Inference(inference) => Some(inference),
            Self::Kernel(_) => None,
        }
    }

    /// The inference's bookkeeping, when it is the source.
    pub(super) fn inference_mut(&mut self) -> Option<&mut Inference> {
        match self {
            Self::Inference(inference) => Some(inference),
            Self::Kernel(_) => None,
        }
    }

    /// The kernel's events' side, when they are the source.
    pub(super) fn kernel(&self) -> Option<&Kernel> {
        match self {
            Self::Kernel(kernel) => Some(kernel),
            Self::Inference(_) => None,
        }
    }

    /// The kernel's events' side, when they are the source.
    pub(super) fn kernel_mut(&mut self) -> Option<&mut Kernel> {
        match self {
            Self::Kernel(kernel) => Some(kernel),
            Self::Inference(_) => None,
        }
    }

    /// The next thing the source tells: lock events with the kernel's,
    /// lookups' outcomes with inference (`None`: it has stopped).
    pub(super) async fn told(&mut self) -> Option<Told> {
        match self {
            Self::Kernel(kernel) => kernel.next().await.map(Told::Records),
            Self::Inference(inference) => inference.lookup_results.recv().await.map(Told::Lookup),
        }
    }

    /// When the source next needs the loop awake (its batch, its
    /// lookups' pace, its waiters' check), if ever.
    pub(super) fn next_due(&self) -> Option<Instant> {
        match self {
            Self::Kernel(kernel) => [kernel.waiter_check_due(), kernel.next_due()]
                .into_iter()
                .flatten()
                .min(),
            Self::Inference(inference) => {
                let mut due = inference.batch.due;
                // While a lookup runs, its answer wakes the loop.
                if !inference.lookups.running() {
                    let ready = inference.lookups.ready_at();
                    let opens = inference.opens.due.map(|due| due.max(ready));
                    let waiting = inference.waiting().then_some(ready);
                    due = [due, opens, waiting].into_iter().flatten().min();
                }
                due
            }
        }
    }

    /// Whether the periodic sweep runs: with inference (a safety net for
    /// what events cannot show), never with the kernel's events, which
    /// tell every change (a resync is asked for when some were lost).
    pub(super) fn sweeps(&self) -> bool {
        matches!(self, Self::Inference(_))
    }

    /// Whether a full judgement reads `/proc/locks` whatever the probe
    /// mode: the kernel's events begin from (and resync by) that read.
    pub(super) fn seeds_from_lock_table(&self) -> bool {
        matches!(self, Self::Kernel(_))
    }

    /// Whether waiters' processes are due to be looked at (the kernel's
    /// events: a waiter that dies waiting leaves no event).
    pub(super) fn waiters_due(&self, now: Instant) -> bool {
        match self {
            Self::Kernel(kernel) => kernel.waiter_check_due().is_some_and(|due| due <= now),
            Self::Inference(_) => false,
        }
    }

    /// `key` changed: judged once the source's window passed — with the
    /// kernel's events [`super::COALESCE`] after its own first change (a
    /// batch is no `/proc/locks` read to share), with inference in the
    /// batch due `COALESCE` after the batch's first change.
    pub(super) fn mark(&mut self, key: LockKey) {
        match self {
            Self::Kernel(kernel) => kernel.queue(key),
            Self::Inference(inference) => inference.batch.mark(key),
        }
    }

    /// The changed claims due for judgement by `now` (taken).
    pub(super) fn take_due(&mut self, now: Instant) -> Vec<LockKey> {
        match self {
            Self::Kernel(kernel) => kernel.due(now),
            Self::Inference(inference) => inference.batch.take_due(now),
        }
    }

    /// Forgets everything kept about `key` (removed from the view).
    pub(super) fn forget(&mut self, key: &LockKey) {
        match self {
            Self::Inference(inference) => inference.forget(key),
            Self::Kernel(kernel) => kernel.unqueue(key),
        }
    }

    /// Drops the changes waiting for judgement: a judgement of every key
    /// comes, and stands for them.
    pub(super) fn clear_changes(&mut self) {
        match self {
            Self::Inference(inference) => inference.clear_changes(),
            Self::Kernel(kernel) => kernel.clear_queue(),
        }
    }

    /// A claim's file was created, written or removed: someone may have
    /// taken or left it (inference keeps that apart from a close).
    pub(super) fn note_written(&mut self, key: &LockKey) {
        if let Self::Inference(inference) = self {
            inference.batch.written.insert(key.clone());
        }
    }

    /// A claim's file opened for writing was closed. Whether the claim
    /// is to be looked at for it: under the kernel's events a close says
    /// nothing they do not (an unlock is an event of its own).
    pub(super) fn note_closed(&mut self, key: &LockKey) -> bool {
        match self {
            Self::Inference(inference) => {
                inference.batch.closed.insert(key.clone());
                true
            }
            Self::Kernel(_) => false,
        }
    }

    /// A file of `key`, which the view shows held, was opened: a waiter
    /// may be arriving. Never a probe: inference looks at `/proc/locks`
    /// once the opens settled; the kernel's events tell a waiter
    /// themselves.
    pub(super) fn note_held_opened(&mut self, key: LockKey) {
        if let Self::Inference(inference) = self {
            inference.opens.held.insert(key);
            inference.opens_settle();
        }
    }

    /// Other claims' files were opened: inference compares them with
    /// `/proc/locks` once the opens settled (a holder that does not
    /// write shows no other way); the kernel's events need nothing.
    pub(super) fn note_others_opened(&mut self) {
        if let Self::Inference(inference) = self {
            inference.opens_settle();
        }
    }
}

impl super::Engine {
    /// Judges changed claims as the source does: from the lock table the
    /// kernel's events keep, or by inference (probes, or one
    /// `/proc/locks` read in the lock-free mode). The one place the
    /// engine's judgement of a change depends on its source.
    pub(super) async fn judge_changed(&mut self, claims: Vec<LockKey>) {
        match self.source {
            Source::Kernel(_) if claims.is_empty() => {}
            Source::Kernel(_) => self.judge_from_table(claims),
            // Even with none left: a lookup the held states wait for may
            // start now.
            Source::Inference(_) => self.infer_batch(claims).await,
        }
    }
}
