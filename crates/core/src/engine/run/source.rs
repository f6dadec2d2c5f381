//! How the engine learns liveness: the one boundary between the engine
//! and its ways of knowing what is locked. A source is told what the
//! engine saw (a claim's file written, closed, opened by others; a sweep
//! beginning; a key gone) and asked what it knows (what is due, judge
//! these claims, what its own stream said). Its implementations:
//!
//! - [`super::inference::Inference`]: inotify's events tell that something
//!   changed, and a probe or a `/proc/locks` read says what;
//! - [`super::kernel::Kernel`]: the kernel's own lock events keep a table
//!   of who holds and waits, and each claim is judged from it.
//!
//! The engine proper (the view, the tree's shape, problems, holders'
//! refresh, sweeps, the deltas) is the same under both; a source reaches
//! it only through the [`Judging`] it is lent for one call, and asks the
//! rest of the engine (judge these at once, judge everything again) by
//! what it returns ([`Asks`]).
//!
//! Invariants: the engine holds exactly one source at a time
//! ([`super::any_source::AnySource`]); nothing outside that dispatch
//! names a source's kind. A third source is a third implementation and
//! a variant there.

use std::path::Path;

use tokio::time::Instant;

use super::judging::Judging;
use crate::disk::LockKey;
use crate::liveness::kernel::live_table::Nudger;
use crate::liveness::proc_locks::LockIndex;

/// What a source asks of the engine after it was told something.
#[derive(Default)]
pub(super) struct Asks {
    /// Claims to judge at once (removed first when their files are gone).
    pub(super) judge_now: Vec<LockKey>,
    /// A judgement of everything (events were lost): the view says
    /// rescanning until it is done.
    pub(super) resync: bool,
    /// How many things it was told (for the trace).
    pub(super) items: usize,
}

/// How the locks root is watched for a source.
pub(super) enum TreeWatchKind {
    /// notify's watcher, opens and closes included (what inference
    /// infers from).
    Notify,
    /// An inotify instance read in the engine's own loop, its opens and
    /// closes dropped; `nudge` is called on every claim event (the source
    /// drains its stream at once).
    Direct(Option<Nudger>),
}

/// A claim to judge, with the `lstat` of its gate that found it a
/// regular file, taken in the same wake-up: a source that needs the
/// gate's identity takes it from here instead of asking again.
pub(super) struct GatedClaim {
    pub key: LockKey,
    pub gate: std::fs::Metadata,
}

/// A way of learning liveness, with what it keeps.
pub(super) trait Source {
    /// What its own stream tells the loop.
    type Told;

    /// How the locks root is to be watched for it.
    fn tree_watch(&self) -> TreeWatchKind;

    /// The root's watch starts: the filesystems mounted at or below
    /// `root` now are to be seen before any judgement.
    fn watching(&mut self, _root: &Path) {}

    /// `key` changed: judged once the source's window passed.
    fn mark(&mut self, key: LockKey);

    /// A claim's file was created, written or removed: someone may have
    /// taken or left it.
    fn note_written(&mut self, _key: &LockKey) {}

    /// A claim's file opened for writing was closed. Whether the claim is
    /// to be looked at for it.
    fn note_closed(&mut self, key: &LockKey) -> bool;

    /// A file of `key`, which the view shows held, was opened: a waiter
    /// may be arriving.
    fn note_held_opened(&mut self, _key: LockKey) {}

    /// Other claims' files were opened.
    fn note_others_opened(&mut self) {}

    /// Forgets everything kept about `key` (it left the view).
    fn forget(&mut self, key: &LockKey);

    /// A judgement of every key begins (a sweep): it stands for every
    /// change waiting, and for every open seen.
    fn sweep_begins(&mut self);

    /// A judgement of every key read `index`; `held` are the claims it
    /// did not find free, `all` every claim it found.
    fn judged_everything<'a>(
        &mut self,
        _index: &LockIndex,
        _held: impl Iterator<Item = &'a LockKey>,
        _all: impl Iterator<Item = &'a LockKey>,
    ) {
    }

    /// A sweep's finding for `key` was merged into the view.
    fn merged(&mut self, _key: &LockKey) {}

    /// Whether the periodic sweep runs (a safety net for what the
    /// source cannot see).
    fn sweeps(&self) -> bool;

    /// Whether a judgement of every key reads `/proc/locks` whatever the
    /// probe mode (the source begins from that read).
    fn seeds_from_lock_table(&self) -> bool;

    /// When the source next needs the loop awake, if ever.
    fn next_due(&self) -> Option<Instant>;

    /// While a deadline of [`Self::next_due`] may be withdrawn by the
    /// source's own stream (a drain that begins before it answers it),
    /// what tells the loop that it was: the loop then looks at its
    /// deadline again rather than waking for nothing. `None` when no
    /// such deadline stands.
    fn withdrawn_by(&self) -> Option<Nudger> {
        None
    }

    /// The changed claims due for judgement by `now` (taken).
    fn take_due(&mut self, now: Instant) -> Vec<LockKey>;

    /// The loop woke for its timers at `now`: the source's own clock work.
    fn on_timers(&mut self, judging: &mut Judging<'_>, now: Instant);

    /// Judges changed claims (their gates are lock files, each `lstat`ed
    /// just now: [`GatedClaim`]).
    async fn judge(&mut self, judging: &mut Judging<'_>, claims: Vec<GatedClaim>);

    /// The next thing its own stream tells (`None`: it has stopped).
    async fn told(&mut self) -> Option<Self::Told>;

    /// What its stream holds now, taken in place before the loop judges
    /// at `now` (claims due, or activity waiting for a drain): `None`
    /// when there is nothing to take first.
    async fn drain_now(&mut self, _now: Instant) -> Option<Self::Told> {
        None
    }

    /// Takes what its stream told.
    fn apply(&mut self, judging: &mut Judging<'_>, told: Self::Told) -> Asks;
}
