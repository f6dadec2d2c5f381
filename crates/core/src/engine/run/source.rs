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

use std::collections::{HashMap, HashSet};

use tokio::sync::mpsc::{self, UnboundedReceiver, UnboundedSender};
use tokio::time::Instant;

use super::kernel::Kernel;
use super::{echo, lookup};
use crate::disk::LockKey;
use crate::liveness::KeyState;

/// How many looks in a row a key found held right after a close may be
/// held back (the batch's `confirm_after_close`: inference's close
/// confirmation).
pub(super) const CLOSE_CONFIRMS: u8 = 3;

/// A key held back after a close, while its looks are confirmed.
#[derive(Debug)]
pub(super) struct Confirming {
    /// Looks that found it held so far.
    pub(super) looks: u8,
    /// The held state the last of them found.
    pub(super) state: KeyState,
}

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
                let mut due = inference.batch_due;
                // While a lookup runs, its answer wakes the loop.
                if !inference.lookups.running() {
                    let ready = inference.lookups.ready_at();
                    let opens = inference.opens_due.map(|due| due.max(ready));
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
            Self::Inference(inference) => {
                inference.pending.insert(key);
                inference
                    .batch_due
                    .get_or_insert_with(|| Instant::now() + super::COALESCE);
            }
        }
    }

    /// The changed claims due for judgement by `now` (taken).
    pub(super) fn take_due(&mut self, now: Instant) -> Vec<LockKey> {
        match self {
            Self::Kernel(kernel) => kernel.due(now),
            Self::Inference(inference) => {
                if inference.batch_due.is_some_and(|due| due <= now) {
                    inference.batch_due = None;
                    inference.pending.drain().collect()
                } else {
                    Vec::new()
                }
            }
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
            inference.written.insert(key.clone());
        }
    }

    /// A claim's file opened for writing was closed. Whether the claim
    /// is to be looked at for it: under the kernel's events a close says
    /// nothing they do not (an unlock is an event of its own).
    pub(super) fn note_closed(&mut self, key: &LockKey) -> bool {
        match self {
            Self::Inference(inference) => {
                inference.closed.insert(key.clone());
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
            inference.opened_held.insert(key);
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

/// What the engine keeps only while it infers liveness.
pub(super) struct Inference {
    /// Keys changed since the last batch.
    pub(super) pending: HashSet<LockKey>,
    /// When the pending batch is due.
    pub(super) batch_due: Option<Instant>,
    /// Keys of `pending` whose changes include a close of a file opened
    /// for writing (see [`batch`]'s close confirmation).
    pub(super) closed: HashSet<LockKey>,
    /// Keys of `pending` whose changes include something else than a
    /// close (a create, a write, a removal): someone may have taken them.
    pub(super) written: HashSet<LockKey>,
    /// Keys found held after a close, with how many looks confirmed it
    /// so far and the held state found last: it is sent only once a look
    /// with no close since agrees ([`CLOSE_CONFIRMS`] at most).
    pub(super) confirming: HashMap<LockKey, Confirming>,
    /// Keys found in flight (gate locked, announce not), since when: they
    /// are probed again, not waited for.
    pub(super) in_flight_since: HashMap<LockKey, Instant>,
    /// The `/proc/locks` lookups, which run off the loop.
    pub(super) lookups: lookup::Lookups,
    /// Where a lookup's outcome is sent, and received by the loop.
    pub(super) lookup_results_tx: UnboundedSender<lookup::LookupOutcome>,
    pub(super) lookup_results: UnboundedReceiver<lookup::LookupOutcome>,
    /// Held probe results whose holders the rate-limited `/proc/locks`
    /// read has not named yet: sent once it has (never without holders
    /// and a reason), with the time they were observed.
    pub(super) deferred: HashMap<LockKey, (KeyState, std::time::SystemTime)>,
    /// Held keys sent with the holders of the same claim, to confirm at
    /// the next read.
    pub(super) recheck: HashSet<LockKey>,
    /// Held keys whose files were opened (a contender or a watcher may be
    /// arriving): rechecked once the opens settled
    /// ([`super::opens::OPEN_SETTLE`]), so that the look finds the `flock`
    /// the open came before.
    pub(super) opened_held: HashSet<LockKey>,
    /// When the opened claim files are next compared with `/proc/locks`
    /// (`Some` while some wait).
    pub(super) opens_due: Option<Instant>,
    /// What each key's files looked like right after the engine's last
    /// acquire probe of it (its own writes).
    pub(super) echo_marks: HashMap<LockKey, echo::Fingerprint>,
    /// The engine's own echoes per second.
    pub(super) echo_rate: echo::EchoRate,
}

impl Inference {
    /// Nothing pending, waiting or remembered.
    pub(super) fn new() -> Self {
        let (lookup_results_tx, lookup_results) = mpsc::unbounded_channel();
        Self {
            pending: HashSet::new(),
            batch_due: None,
            closed: HashSet::new(),
            written: HashSet::new(),
            confirming: HashMap::new(),
            in_flight_since: HashMap::new(),
            lookups: lookup::Lookups::default(),
            lookup_results_tx,
            lookup_results,
            deferred: HashMap::new(),
            recheck: HashSet::new(),
            opened_held: HashSet::new(),
            opens_due: None,
            echo_marks: HashMap::new(),
            echo_rate: echo::EchoRate::default(),
        }
    }

    /// Forgets everything kept about `key` (removed from the view).
    pub(super) fn forget(&mut self, key: &LockKey) {
        self.echo_marks.remove(key);
        self.in_flight_since.remove(key);
        self.lookups.touch(key);
        self.pending.remove(key);
        self.closed.remove(key);
        self.written.remove(key);
        self.confirming.remove(key);
        self.deferred.remove(key);
        self.recheck.remove(key);
        self.opened_held.remove(key);
    }

    /// Drops the changes waiting for a batch and the looks held back: a
    /// judgement of every key comes, and stands for them.
    pub(super) fn clear_changes(&mut self) {
        self.pending.clear();
        self.closed.clear();
        self.written.clear();
        self.confirming.clear();
        self.batch_due = None;
    }

    /// Looks at the opened files [`super::opens::OPEN_SETTLE`] after the
    /// first open since the last look.
    fn opens_settle(&mut self) {
        self.opens_due
            .get_or_insert(Instant::now() + super::opens::OPEN_SETTLE);
    }

    /// Whether held states wait for a `/proc/locks` read (deferred, or
    /// sent with kept holders to confirm).
    pub(super) fn waiting(&self) -> bool {
        !self.deferred.is_empty() || !self.recheck.is_empty()
    }
}
