//! Inference: liveness told by inotify's events and looked up in
//! `/proc/locks` or by probes — the engine's source where the kernel's
//! lock events cannot be read. Everything only inference keeps lives here:
//! [`Inference`] (its bookkeeping), [`judge`] (a batch of changed claims
//! probed or judged lock-free, the close confirmation, claims in flight,
//! held states waiting for their holders), [`lookup`] (the `/proc/locks`
//! reads off the loop), [`opens`] (opened files compared with the lock
//! table once they settle) and [`echo`] (the acquire probe's own events).
//!
//! Invariant: none of it runs under the kernel's events — the engine
//! reaches it through [`super::source::Source`], which it implements, and
//! holds it only while inferring.

pub(super) mod echo;
mod judge;
pub(super) mod lookup;
pub(super) mod opens;

use std::collections::{HashMap, HashSet};

use tokio::sync::mpsc::{self, UnboundedReceiver, UnboundedSender};
use tokio::time::Instant;

use super::judging::Judging;
use super::source::{Asks, GatedClaim, Source, TreeWatchKind};
use crate::disk::LockKey;
use crate::liveness::KeyState;

/// How many looks in a row a key found held right after a close may be
/// held back (the batch's `confirm_after_close`: inference's close
/// confirmation).
pub(in crate::engine::run) const CLOSE_CONFIRMS: u8 = 3;

/// A key held back after a close, while its looks are confirmed.
#[derive(Debug)]
pub(in crate::engine::run) struct Confirming {
    /// Looks that found it held so far.
    pub(in crate::engine::run) looks: u8,
    /// The held state the last of them found.
    pub(in crate::engine::run) state: KeyState,
}

/// Changed claims waiting for inference's batch, and what changed them.
///
/// Invariant: `closed` and `written` are subsets of `pending`; `due` is
/// `Some` exactly while `pending` is not empty.
#[derive(Default)]
pub(in crate::engine::run) struct Batch {
    /// Keys changed since the last batch.
    pub(in crate::engine::run) pending: HashSet<LockKey>,
    /// When the pending batch is due.
    pub(in crate::engine::run) due: Option<Instant>,
    /// Keys of `pending` whose changes include a close of a file opened
    /// for writing (see [`judge`]'s close confirmation).
    pub(in crate::engine::run) closed: HashSet<LockKey>,
    /// Keys of `pending` whose changes include something else than a
    /// close (a create, a write, a removal): someone may have taken them.
    pub(in crate::engine::run) written: HashSet<LockKey>,
}

/// Held states waiting for a `/proc/locks` read to name or confirm
/// their holders.
///
/// Invariant: a held state is never sent without holders and a reason:
/// until the read names them it waits here.
#[derive(Default)]
pub(in crate::engine::run) struct HeldWaits {
    /// Held probe results whose holders the rate-limited `/proc/locks`
    /// read has not named yet: sent once it has, with the time they were
    /// observed.
    pub(in crate::engine::run) deferred: HashMap<LockKey, (KeyState, std::time::SystemTime)>,
    /// Held keys sent with the holders of the same claim, to confirm at
    /// the next read.
    pub(in crate::engine::run) recheck: HashSet<LockKey>,
}

/// Opened claim files waiting to be compared with `/proc/locks`.
///
/// Invariant: `due` is `Some` while opens wait for their look.
#[derive(Default)]
pub(in crate::engine::run) struct Opens {
    /// Held keys whose files were opened (a contender or a watcher may be
    /// arriving): rechecked once the opens settled
    /// ([`opens::OPEN_SETTLE`]), so that the look finds the `flock`
    /// the open came before.
    pub(in crate::engine::run) held: HashSet<LockKey>,
    /// When the opened claim files are next compared with `/proc/locks`.
    pub(in crate::engine::run) due: Option<Instant>,
}

/// The acquire probe's own writes, and how often they come back.
#[derive(Default)]
pub(in crate::engine::run) struct Echoes {
    /// What each key's files looked like right after the engine's last
    /// acquire probe of it (its own writes).
    pub(in crate::engine::run) marks: HashMap<LockKey, echo::Fingerprint>,
    /// The engine's own echoes per second.
    pub(in crate::engine::run) rate: echo::EchoRate,
}

impl Batch {
    /// `key` changed: the batch is due [`super::COALESCE`] after its
    /// first change.
    pub(in crate::engine::run) fn mark(&mut self, key: LockKey) {
        self.pending.insert(key);
        self.due
            .get_or_insert_with(|| Instant::now() + super::COALESCE);
    }

    /// The batch's keys, taken, once it is due by `now`.
    pub(in crate::engine::run) fn take_due(&mut self, now: Instant) -> Vec<LockKey> {
        if self.due.is_some_and(|due| due <= now) {
            self.due = None;
            self.pending.drain().collect()
        } else {
            Vec::new()
        }
    }

    /// Forgets the changes waiting.
    fn clear(&mut self) {
        *self = Self::default();
    }
}

/// What the engine keeps only while it infers liveness.
pub(in crate::engine::run) struct Inference {
    /// Changed claims waiting for the batch.
    pub(in crate::engine::run) batch: Batch,
    /// Keys found held after a close, with how many looks confirmed it
    /// so far and the held state found last: it is sent only once a look
    /// with no close since agrees ([`CLOSE_CONFIRMS`] at most).
    pub(in crate::engine::run) confirming: HashMap<LockKey, Confirming>,
    /// Keys found in flight (gate locked, announce not), since when: they
    /// are probed again, not waited for.
    pub(in crate::engine::run) in_flight_since: HashMap<LockKey, Instant>,
    /// The `/proc/locks` lookups, which run off the loop.
    pub(in crate::engine::run) lookups: lookup::Lookups,
    /// Where a lookup's outcome is sent, and received by the loop.
    pub(in crate::engine::run) lookup_results_tx: UnboundedSender<lookup::LookupOutcome>,
    pub(in crate::engine::run) lookup_results: UnboundedReceiver<lookup::LookupOutcome>,
    /// Held states waiting for a read to name their holders.
    pub(in crate::engine::run) held_waits: HeldWaits,
    /// Opened files waiting for their look.
    pub(in crate::engine::run) opens: Opens,
    /// The acquire probe's own echo.
    pub(in crate::engine::run) echo: Echoes,
}

impl Inference {
    /// Nothing pending, waiting or remembered.
    pub(in crate::engine::run) fn new() -> Self {
        let (lookup_results_tx, lookup_results) = mpsc::unbounded_channel();
        Self {
            batch: Batch::default(),
            confirming: HashMap::new(),
            in_flight_since: HashMap::new(),
            lookups: lookup::Lookups::default(),
            lookup_results_tx,
            lookup_results,
            held_waits: HeldWaits::default(),
            opens: Opens::default(),
            echo: Echoes::default(),
        }
    }

    /// Forgets everything kept about `key` (removed from the view).
    pub(in crate::engine::run) fn forget(&mut self, key: &LockKey) {
        self.echo.marks.remove(key);
        self.in_flight_since.remove(key);
        self.lookups.touch(key);
        self.batch.pending.remove(key);
        self.batch.closed.remove(key);
        self.batch.written.remove(key);
        self.confirming.remove(key);
        self.held_waits.deferred.remove(key);
        self.held_waits.recheck.remove(key);
        self.opens.held.remove(key);
    }

    /// Drops the changes waiting for a batch and the looks held back: a
    /// judgement of every key comes, and stands for them.
    pub(in crate::engine::run) fn clear_changes(&mut self) {
        self.batch.clear();
        self.confirming.clear();
    }

    /// Looks at the opened files [`opens::OPEN_SETTLE`] after the
    /// first open since the last look.
    pub(in crate::engine::run) fn opens_settle(&mut self) {
        self.opens
            .due
            .get_or_insert(Instant::now() + opens::OPEN_SETTLE);
    }

    /// Whether held states wait for a `/proc/locks` read (deferred, or
    /// sent with kept holders to confirm).
    pub(in crate::engine::run) fn waiting(&self) -> bool {
        !self.held_waits.deferred.is_empty() || !self.held_waits.recheck.is_empty()
    }
}

impl Source for Inference {
    type Told = lookup::LookupOutcome;

    /// notify's watcher: opens and closes are what inference infers from.
    fn tree_watch(&self) -> TreeWatchKind {
        TreeWatchKind::Notify
    }

    /// In the batch due [`super::COALESCE`] after the batch's first change.
    fn mark(&mut self, key: LockKey) {
        self.batch.mark(key);
    }

    fn note_written(&mut self, key: &LockKey) {
        self.batch.written.insert(key.clone());
    }

    /// Always: a close may be a release.
    fn note_closed(&mut self, key: &LockKey) -> bool {
        self.batch.closed.insert(key.clone());
        true
    }

    /// Never a probe: `/proc/locks` is looked at once the opens settled.
    fn note_held_opened(&mut self, key: LockKey) {
        self.opens.held.insert(key);
        self.opens_settle();
    }

    /// Compared with `/proc/locks` once the opens settled (a holder that
    /// does not write shows no other way).
    fn note_others_opened(&mut self) {
        self.opens_settle();
    }

    fn forget(&mut self, key: &LockKey) {
        Inference::forget(self, key);
    }

    fn sweep_begins(&mut self) {
        self.clear_changes();
        self.opens = Opens::default();
    }

    fn merged(&mut self, key: &LockKey) {
        self.lookups.touch(key);
    }

    /// A safety net for what events cannot show.
    fn sweeps(&self) -> bool {
        true
    }

    fn seeds_from_lock_table(&self) -> bool {
        false
    }

    /// Its batch, its lookups' pace, the held states and opens waiting.
    fn next_due(&self) -> Option<Instant> {
        let mut due = self.batch.due;
        // While a lookup runs, its answer wakes the loop.
        if !self.lookups.running() {
            let ready = self.lookups.ready_at();
            let opens = self.opens.due.map(|due| due.max(ready));
            let waiting = self.waiting().then_some(ready);
            due = [due, opens, waiting].into_iter().flatten().min();
        }
        due
    }

    fn take_due(&mut self, now: Instant) -> Vec<LockKey> {
        self.batch.take_due(now)
    }

    /// A lookup for what waits for one, when the rate limit allows; the
    /// echo's rate rolled.
    fn on_timers(&mut self, judging: &mut Judging<'_>, now: Instant) {
        self.start_waiting_lookup(judging, now);
        self.watch_echo_rate(judging);
    }

    /// Probes, or one `/proc/locks` read in the lock-free mode (even with
    /// no claim: a lookup the held states wait for may start now).
    async fn judge(&mut self, judging: &mut Judging<'_>, claims: Vec<GatedClaim>) {
        let keys = claims.into_iter().map(|claim| claim.key).collect();
        self.infer_batch(judging, keys).await;
    }

    async fn told(&mut self) -> Option<lookup::LookupOutcome> {
        self.lookup_results.recv().await
    }

    fn apply(&mut self, judging: &mut Judging<'_>, outcome: lookup::LookupOutcome) -> Asks {
        let items = self.apply_lookup(judging, outcome);
        Asks {
            items,
            ..Asks::default()
        }
    }
}
