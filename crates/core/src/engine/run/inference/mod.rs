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
//! reaches it through [`super::source::Source`], which holds it only
//! while inferring.

pub(super) mod echo;
mod judge;
pub(super) mod lookup;
pub(super) mod opens;

use std::collections::{HashMap, HashSet};

use tokio::sync::mpsc::{self, UnboundedReceiver, UnboundedSender};
use tokio::time::Instant;

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

/// What the engine keeps only while it infers liveness.
pub(in crate::engine::run) struct Inference {
    /// Keys changed since the last batch.
    pub(in crate::engine::run) pending: HashSet<LockKey>,
    /// When the pending batch is due.
    pub(in crate::engine::run) batch_due: Option<Instant>,
    /// Keys of `pending` whose changes include a close of a file opened
    /// for writing (see [`judge`]'s close confirmation).
    pub(in crate::engine::run) closed: HashSet<LockKey>,
    /// Keys of `pending` whose changes include something else than a
    /// close (a create, a write, a removal): someone may have taken them.
    pub(in crate::engine::run) written: HashSet<LockKey>,
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
    /// Held probe results whose holders the rate-limited `/proc/locks`
    /// read has not named yet: sent once it has (never without holders
    /// and a reason), with the time they were observed.
    pub(in crate::engine::run) deferred: HashMap<LockKey, (KeyState, std::time::SystemTime)>,
    /// Held keys sent with the holders of the same claim, to confirm at
    /// the next read.
    pub(in crate::engine::run) recheck: HashSet<LockKey>,
    /// Held keys whose files were opened (a contender or a watcher may be
    /// arriving): rechecked once the opens settled
    /// ([`opens::OPEN_SETTLE`]), so that the look finds the `flock`
    /// the open came before.
    pub(in crate::engine::run) opened_held: HashSet<LockKey>,
    /// When the opened claim files are next compared with `/proc/locks`
    /// (`Some` while some wait).
    pub(in crate::engine::run) opens_due: Option<Instant>,
    /// What each key's files looked like right after the engine's last
    /// acquire probe of it (its own writes).
    pub(in crate::engine::run) echo_marks: HashMap<LockKey, echo::Fingerprint>,
    /// The engine's own echoes per second.
    pub(in crate::engine::run) echo_rate: echo::EchoRate,
}

impl Inference {
    /// Nothing pending, waiting or remembered.
    pub(in crate::engine::run) fn new() -> Self {
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
    pub(in crate::engine::run) fn forget(&mut self, key: &LockKey) {
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
    pub(in crate::engine::run) fn clear_changes(&mut self) {
        self.pending.clear();
        self.closed.clear();
        self.written.clear();
        self.confirming.clear();
        self.batch_due = None;
    }

    /// Looks at the opened files [`opens::OPEN_SETTLE`] after the
    /// first open since the last look.
    pub(in crate::engine::run) fn opens_settle(&mut self) {
        self.opens_due
            .get_or_insert(Instant::now() + opens::OPEN_SETTLE);
    }

    /// Whether held states wait for a `/proc/locks` read (deferred, or
    /// sent with kept holders to confirm).
    pub(in crate::engine::run) fn waiting(&self) -> bool {
        !self.deferred.is_empty() || !self.recheck.is_empty()
    }
}
