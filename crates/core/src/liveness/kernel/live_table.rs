//! The lock table kept current by the kernel's lock events: who holds and
//! who waits on each file, as `/proc/locks` would list it, learned from
//! every flock request as it happens instead of re-read (each read of
//! `/proc/locks` stalls every flock on the machine).
//!
//! Invariants:
//! - a hold is keyed by its open file description (the event's `owner`),
//!   never by PID: every process that opened a file unlocks it at its last
//!   close, holder or not (a refused tryer's close included), and only the
//!   description that holds a lock can end it;
//! - holds seeded from one `/proc/locks` read have no known description:
//!   an unlock on such a file cannot tell whose it is, and is said
//!   ([`Applied::uncertain`]) for the caller to settle from the holder's
//!   own fdinfo ([`LiveTable::settle`]), never guessed;
//! - a waiter is listed from its queued request (`ret 1`) until it gets
//!   the lock, unlocks or closes the file, or is found dead
//!   ([`LiveTable::forget_waiters`]: a waiter that dies waiting leaves no
//!   event);
//! - a refused `LOCK_NB` request changes no lock (a refused conversion
//!   releases first, as flock(2) does); an exclusive one — a try to take
//!   it — is counted per file and per PID by second
//!   ([`LiveTable::refused_since`]), a shared one (a check whether it is
//!   held: a family waiter's poll, or a passive probe) apart, as a poll
//!   ([`LiveTable::polls_since`]);
//! - the table holds only files someone locks or waits on: an emptied
//!   file is dropped, so its size follows the locks, not the tree.

use std::collections::{HashMap, HashSet, VecDeque};

use super::Record;
use super::event::{LockEvent, LockKind};
use crate::liveness::proc_locks::{FileId, FileLocks, LockIndex};

/// A source of lock events (the kernel's tracepoint; a test's script),
/// read on the engine's runtime.
pub trait EventStream: Send + 'static {
    /// Waits until records arrive, then appends them (at least one), in
    /// the order they happened. Costs nothing while none comes.
    /// Cancel-safe: dropped while it waits, it loses no record (the
    /// engine's loop polls it beside its other work).
    fn next_batch<'a>(
        &'a mut self,
        out: &'a mut Vec<Record>,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = std::io::Result<()>> + Send + 'a>>;

    /// Delivers events of files on exactly these devices (major, minor).
    fn watch_devices(&mut self, devices: &[(u32, u32)]) -> std::io::Result<()>;

    /// What asks the source to deliver what it has now (the engine calls it
    /// when inotify tells of activity in the tree); `None` when the source
    /// delivers every record as it comes.
    fn nudger(&self) -> Option<Nudger> {
        None
    }

    /// The files whose events may be delivered late (no claim's), for
    /// the engine to fill in; `None` when the source delivers every
    /// record as it comes.
    fn quiet_files(&self) -> Option<super::quiet::QuietFiles> {
        None
    }

    /// Drains what the source holds now, in place, and appends what may
    /// pass (possibly nothing): what the engine calls before it judges,
    /// so that the judgement sees every flock made up to a moment before
    /// it. A source that delivers every record as it comes has nothing
    /// to drain.
    fn drain_now<'a>(
        &'a mut self,
        _out: &'a mut Vec<Record>,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = std::io::Result<()>> + Send + 'a>> {
        Box::pin(std::future::ready(Ok(())))
    }
}

/// Asks an [`EventStream`] to deliver what it has now, and says when it
/// has begun to.
pub trait Nudges: Send + Sync {
    /// Asks for a delivery soon (a no-op while one is asked and not yet
    /// begun): what a release or a death (a close, a removal) asks for.
    fn now(&self);

    /// Says that activity began that the engine's next judgement will
    /// drain for (an open, a creation, a write: an acquisition, whose
    /// claim is judged a coalescing window after its first change): no
    /// drain of its own, but the delivery counts as asked until one
    /// begins ([`Self::answered`], [`Self::later_since`]). By default
    /// the same as [`Self::now`].
    fn later(&self) {
        self.now();
    }

    /// Since when activity announced by [`Self::later`] waits for a
    /// drain, if it does (the engine drains for it a coalescing window
    /// after).
    fn later_since(&self) -> Option<std::time::Instant> {
        None
    }

    /// Resolves once no delivery asked for is still to begin: at once
    /// when none is.
    fn answered(&self) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send + '_>>;
}

/// What the engine and its inotify nudge an [`EventStream`] through.
pub type Nudger = std::sync::Arc<dyn Nudges>;

impl Nudges for super::wait::Nudge {
    fn now(&self) {
        super::wait::Nudge::now(self);
    }

    fn later(&self) {
        super::wait::Nudge::later(self);
    }

    fn later_since(&self) -> Option<std::time::Instant> {
        super::wait::Nudge::later_since(self)
    }

    fn answered(&self) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send + '_>> {
        Box::pin(self.answered_all())
    }
}

/// What [`LiveTable::apply`] changed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Applied {
    /// Holders or waiters of the file changed.
    pub changed: bool,
    /// An unlock that matched no known description while the file has
    /// holds of unknown description (seeded): one of them may have ended;
    /// [`LiveTable::settle`] tells which from their fdinfo.
    pub uncertain: bool,
    /// An exclusive `LOCK_NB` request was refused (counted).
    pub refused: bool,
    /// A shared `LOCK_NB` request was refused (counted as a poll).
    pub polled: bool,
}

/// One hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Hold {
    /// The description; 0 when seeded from `/proc/locks` (unknown).
    owner: u64,
    pid: u32,
    exclusive: bool,
}

/// One queued request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Waiter {
    pid: u32,
    exclusive: bool,
    /// When it was queued (`CLOCK_MONOTONIC` ns; a seeded one: when the
    /// table was seeded): a process under its PID that started later is
    /// another process, which waits for nothing here.
    since: u64,
}

/// Holds and waiters of one file.
#[derive(Debug, Clone, Default)]
struct FileState {
    holds: Vec<Hold>,
    waiters: Vec<Waiter>,
}

impl FileState {
    fn is_empty(&self) -> bool {
        self.holds.is_empty() && self.waiters.is_empty()
    }

    /// As `/proc/locks` lists it.
    fn locks(&self) -> FileLocks {
        let mut locks = FileLocks::default();
        for hold in &self.holds {
            let list = if hold.exclusive {
                &mut locks.holders
            } else {
                &mut locks.shared
            };
            if !list.contains(&hold.pid) {
                list.push(hold.pid);
            }
        }
        for waiter in &self.waiters {
            let list = if waiter.exclusive {
                &mut locks.waiters
            } else {
                &mut locks.shared_waiters
            };
            if !list.contains(&waiter.pid) {
                list.push(waiter.pid);
            }
        }
        locks
    }
}

/// How long refused requests are kept, per file, in whole seconds (a
/// minute, and the second under way).
const REFUSALS_KEPT_SECONDS: u64 = 61;

/// After this many refusals, files with none kept any more are forgotten
/// (so refusals on files nobody watches cannot grow the table forever).
const REFUSALS_PRUNE_EVERY: u64 = 4_096;

const NS_PER_SECOND: u64 = 1_000_000_000;

/// Refused `LOCK_NB` requests on one file: counted per PID in one-second
/// buckets, so a loop refused a million times a minute costs a bucket a
/// second, and every refusal is counted.
#[derive(Debug, Clone, Default)]
struct Refusals {
    /// Every refusal since the table began.
    total: u64,
    /// The recent seconds, oldest first, at most
    /// [`REFUSALS_KEPT_SECONDS`]: (`CLOCK_MONOTONIC` second, (PID, count)).
    seconds: VecDeque<(u64, Vec<(u32, u64)>)>,
    /// Each PID of those seconds with the time of its last refusal
    /// (`CLOCK_MONOTONIC` ns): whether it still tries.
    last: Vec<(u32, u64)>,
}

impl Refusals {
    fn add(&mut self, at: u64, pid: u32) {
        self.total += 1;
        let second = at / NS_PER_SECOND;
        if self.seconds.back().is_none_or(|(last, _)| *last < second) {
            self.seconds.push_back((second, Vec::new()));
        }
        // A late event of an earlier second counts in the latest one.
        let (_, by) = self.seconds.back_mut().expect("pushed");
        match by.iter_mut().find(|(of, _)| *of == pid) {
            Some((_, count)) => *count += 1,
            None => by.push((pid, 1)),
        }
        match self.last.iter_mut().find(|(of, _)| *of == pid) {
            Some((_, last)) => *last = (*last).max(at),
            None => self.last.push((pid, at)),
        }
        let mut dropped = false;
        while self
            .seconds
            .front()
            .is_some_and(|(first, _)| first + REFUSALS_KEPT_SECONDS <= second)
        {
            self.seconds.pop_front();
            dropped = true;
        }
        if dropped {
            let kept_from = self.seconds.front().map_or(u64::MAX, |(first, _)| *first);
            self.last
                .retain(|(_, last)| *last / NS_PER_SECOND >= kept_from);
        }
    }

    /// The last second with a refusal.
    fn latest(&self) -> Option<u64> {
        self.seconds.back().map(|(second, _)| *second)
    }
}

/// A claim's file as its refusals are counted. Once a file is deleted its
/// inode number is given to the next file made (on ext4, within seconds),
/// and the table, keyed by that number, still holds a minute of what was
/// refused on the file that had it before: that is not this file's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CountedFile {
    /// The file.
    pub file: FileId,
    /// When it was made (`CLOCK_MONOTONIC` ns), where its filesystem says:
    /// a PID whose last refusal on the inode came before was trying
    /// another file, and is not counted. `None`: every PID counts.
    pub born: Option<u64>,
}

impl From<FileId> for CountedFile {
    fn from(file: FileId) -> Self {
        Self { file, born: None }
    }
}

/// Refused requests on one file since a moment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct RefusedSince {
    /// How many (at most the recent ones kept).
    pub count: u64,
    /// By whom, each PID with its count, most first.
    pub by: Vec<(u32, u64)>,
    /// Each PID of `by` with when it was last refused (`CLOCK_MONOTONIC`
    /// ns), in `by`'s order.
    pub last: Vec<u64>,
}

/// The lock table the kernel's events keep current.
#[derive(Debug, Default)]
pub(crate) struct LiveTable {
    files: HashMap<FileId, FileState>,
    refusals: HashMap<FileId, Refusals>,
    /// Refused shared `LOCK_NB` requests per file, kept as refusals are.
    polls: HashMap<FileId, Refusals>,
    /// Refusals applied since files' stale refusals were last forgotten.
    refusals_since_prune: u64,
    /// The files some process waits on (so asking whether anyone waits,
    /// on every turn of the engine's loop, costs nothing however many
    /// locks the filesystem has).
    waited_on: HashSet<FileId>,
    /// Every event applied.
    events: u64,
}

impl LiveTable {
    /// A table starting from one `/proc/locks` read: every hold with an
    /// unknown description, every waiter as listed.
    pub(crate) fn seeded(index: &LockIndex) -> Self {
        let mut table = Self::default();
        for (file, locks) in index.files() {
            let state = table.files.entry(*file).or_default();
            let holds = locks
                .holders
                .iter()
                .map(|&pid| (pid, true))
                .chain(locks.shared.iter().map(|&pid| (pid, false)));
            for (pid, exclusive) in holds {
                state.holds.push(Hold {
                    owner: 0,
                    pid,
                    exclusive,
                });
            }
            let waiters = locks
                .waiters
                .iter()
                .map(|&pid| (pid, true))
                .chain(locks.shared_waiters.iter().map(|&pid| (pid, false)));
            let since = super::event::monotonic_now();
            for (pid, exclusive) in waiters {
                state.waiters.push(Waiter {
                    pid,
                    exclusive,
                    since,
                });
            }
        }
        table.files.retain(|_, state| !state.is_empty());
        table.waited_on = table
            .files
            .iter()
            .filter(|(_, state)| !state.waiters.is_empty())
            .map(|(file, _)| *file)
            .collect();
        table
    }

    /// Applies one event.
    pub fn apply(&mut self, event: &LockEvent) -> Applied {
        self.events += 1;
        let mut applied = Applied::default();
        match event.kind {
            LockKind::Other { .. } => return applied,
            LockKind::Refused { exclusive } => {
                // Converting a held lock releases it first (flock(2)): a
                // refused conversion leaves its owner holding nothing.
                applied.changed = self.drop_hold_of(event.file, event.owner);
                // A refused shared request is someone checking whether it
                // is held (the SDK's try_held: a family waiter's poll, or a
                // passive probe), not a try to take it: counted apart, as
                // polls.
                if exclusive {
                    applied.refused = true;
                    self.refusals
                        .entry(event.file)
                        .or_default()
                        .add(event.at, event.pid);
                } else {
                    applied.polled = true;
                    self.polls
                        .entry(event.file)
                        .or_default()
                        .add(event.at, event.pid);
                }
                self.refusals_since_prune += 1;
                if self.refusals_since_prune >= REFUSALS_PRUNE_EVERY {
                    self.refusals_since_prune = 0;
                    let now = event.at / NS_PER_SECOND;
                    let recent = |refusals: &Refusals| {
                        refusals
                            .latest()
                            .is_some_and(|latest| latest + REFUSALS_KEPT_SECONDS > now)
                    };
                    self.refusals.retain(|_, refusals| recent(refusals));
                    self.polls.retain(|_, polls| recent(polls));
                }
            }
            LockKind::Taken { exclusive } => {
                let state = self.files.entry(event.file).or_default();
                // It got what it waited for; a conversion replaces the
                // description's lock; a seeded hold of the same PID is
                // this description's (a process re-taking its own lock).
                state.waiters.retain(|waiter| waiter.pid != event.pid);
                // An exclusive grant means nobody else holds the file (a
                // waiter woken by an unlock may be told before that unlock
                // is); a shared one, that no one holds it exclusively.
                state.holds.retain(|hold| {
                    let same =
                        hold.owner == event.owner || (hold.owner == 0 && hold.pid == event.pid);
                    !same && !exclusive && !hold.exclusive
                });
                state.holds.push(Hold {
                    owner: event.owner,
                    pid: event.pid,
                    exclusive,
                });
                applied.changed = true;
            }
            LockKind::Waiting { exclusive } => {
                // A conversion releases first: its owner holds nothing now.
                applied.changed = self.drop_hold_of(event.file, event.owner);
                let state = self.files.entry(event.file).or_default();
                let queued = state
                    .waiters
                    .iter()
                    .any(|waiter| waiter.pid == event.pid && waiter.exclusive == exclusive);
                if !queued {
                    state.waiters.push(Waiter {
                        pid: event.pid,
                        exclusive,
                        since: event.at,
                    });
                    applied.changed = true;
                }
            }
            LockKind::Unlocked { .. } => {
                let Some(state) = self.files.get_mut(&event.file) else {
                    return applied;
                };
                let before = (state.holds.len(), state.waiters.len());
                state.holds.retain(|hold| hold.owner != event.owner);
                // A process closing the file waits on it no more (an
                // interrupted waiter lets go of its description).
                state.waiters.retain(|waiter| waiter.pid != event.pid);
                applied.changed = before != (state.holds.len(), state.waiters.len());
                applied.uncertain =
                    before.0 == state.holds.len() && state.holds.iter().any(|hold| hold.owner == 0);
            }
        }
        self.finish(event.file, applied)
    }

    /// The end of [`Self::apply`] on `file`.
    fn finish(&mut self, file: FileId, applied: Applied) -> Applied {
        self.note_waiters(file);
        applied
    }

    /// Keeps [`Self::waited_on`] right for `file`, and forgets it when
    /// nothing is left on it.
    fn note_waiters(&mut self, file: FileId) {
        match self.files.get(&file) {
            Some(state) if !state.waiters.is_empty() => {
                self.waited_on.insert(file);
            }
            Some(state) if state.is_empty() => {
                self.files.remove(&file);
                self.waited_on.remove(&file);
            }
            _ => {
                self.waited_on.remove(&file);
            }
        }
    }

    /// Drops `owner`'s hold on `file`, if any; true when there was one.
    fn drop_hold_of(&mut self, file: FileId, owner: u64) -> bool {
        let Some(state) = self.files.get_mut(&file) else {
            return false;
        };
        let before = state.holds.len();
        state.holds.retain(|hold| hold.owner != owner);
        state.holds.len() != before
    }

    /// Settles a file whose unlock was [`Applied::uncertain`]: each hold
    /// of unknown description is kept only if `still_holds(pid)` says its
    /// PID still holds the file (its fdinfo shows the lock) or cannot
    /// tell (`None`). True when a hold was dropped.
    pub fn settle(
        &mut self,
        file: FileId,
        mut still_holds: impl FnMut(u32) -> Option<bool>,
    ) -> bool {
        let Some(state) = self.files.get_mut(&file) else {
            return false;
        };
        let before = state.holds.len();
        state
            .holds
            .retain(|hold| hold.owner != 0 || still_holds(hold.pid) != Some(false));
        let dropped = state.holds.len() != before;
        if state.is_empty() {
            self.files.remove(&file);
        }
        dropped
    }

    /// Drops the waiters `alive` says are gone — given each one's PID and
    /// when it was queued: a process that dies waiting leaves no event,
    /// and its PID may be another process's by now; the files whose
    /// waiters changed.
    pub(crate) fn forget_waiters(
        &mut self,
        mut alive: impl FnMut(u32, u64) -> bool,
    ) -> Vec<FileId> {
        let mut changed = Vec::new();
        let waited_on: Vec<FileId> = self.waited_on.iter().copied().collect();
        for file in waited_on {
            if let Some(state) = self.files.get_mut(&file) {
                let before = state.waiters.len();
                state
                    .waiters
                    .retain(|waiter| alive(waiter.pid, waiter.since));
                if state.waiters.len() != before {
                    changed.push(file);
                }
            }
            self.note_waiters(file);
        }
        changed
    }

    /// When `pid` was queued on any of `files` (`CLOCK_MONOTONIC` ns, the
    /// earliest), if it waits on one.
    pub(crate) fn waiter_since(&self, files: &[FileId], pid: u32) -> Option<u64> {
        files
            .iter()
            .filter_map(|file| self.files.get(file))
            .flat_map(|state| &state.waiters)
            .filter(|waiter| waiter.pid == pid)
            .map(|waiter| waiter.since)
            .min()
    }

    /// True when some process waits on some file (asked on every turn of
    /// the engine's loop: no allocation).
    pub(crate) fn has_waiters(&self) -> bool {
        !self.waited_on.is_empty()
    }

    /// The table as one `/proc/locks` read would give it (never torn), for
    /// `files` alone: what judging their claims needs,
    /// at the cost of those files — never of every lock on the filesystem
    /// (a host with thousands of foreign locks would pay for all of them
    /// at each change of a claim).
    pub(crate) fn index_of<'a>(&self, files: impl IntoIterator<Item = &'a FileId>) -> LockIndex {
        LockIndex::from_files(
            files
                .into_iter()
                .filter_map(|file| Some((*file, self.files.get(file)?.locks())))
                .collect(),
        )
    }

    /// True when nobody holds `file` or waits for it.
    pub(crate) fn is_unlocked(&self, file: &FileId) -> bool {
        self.files
            .get(file)
            .is_none_or(|state| state.holds.is_empty() && state.waiters.is_empty())
    }

    /// Holders and waiters of `file`, as `/proc/locks` lists them.
    pub fn locks(&self, file: &FileId) -> FileLocks {
        self.files
            .get(file)
            .map(FileState::locks)
            .unwrap_or_default()
    }

    /// The refused requests on `files` since `since` (`CLOCK_MONOTONIC`
    /// ns, as events are stamped), by PID — to the second: the second
    /// `since` (or a file's birth) falls in counts whole, but a PID last
    /// refused on a file before its birth is not counted on it.
    pub(crate) fn refused_since(&self, files: &[CountedFile], since: u64) -> RefusedSince {
        Self::counted_since(&self.refusals, files, since)
    }

    /// The refused shared requests (polls) on `files` since `since`, as
    /// [`Self::refused_since`] counts tries.
    pub(crate) fn polls_since(&self, files: &[CountedFile], since: u64) -> RefusedSince {
        Self::counted_since(&self.polls, files, since)
    }

    fn counted_since(
        counts: &HashMap<FileId, Refusals>,
        files: &[CountedFile],
        since: u64,
    ) -> RefusedSince {
        // Each PID: (count, last refusal).
        let mut counted: HashMap<u32, (u64, u64)> = HashMap::new();
        for CountedFile { file, born } in files {
            let Some(refusals) = counts.get(file) else {
                continue;
            };
            let born = born.unwrap_or(0);
            let from = since.max(born) / NS_PER_SECOND;
            // A PID's last refusal on this file, when that came after the
            // file was made (the list is a few PIDs: no map is built).
            let tried_here = |pid: u32| {
                refusals
                    .last
                    .iter()
                    .find(|(of, _)| *of == pid)
                    .map(|(_, last)| *last)
                    .filter(|last| *last >= born)
            };
            for (second, pids) in refusals.seconds.iter().rev() {
                if *second < from {
                    break;
                }
                for &(pid, count) in pids {
                    if let Some(last) = tried_here(pid) {
                        let entry = counted.entry(pid).or_default();
                        entry.0 += count;
                        entry.1 = entry.1.max(last);
                    }
                }
            }
        }
        let mut counted: Vec<(u32, (u64, u64))> = counted.into_iter().collect();
        counted.sort_unstable_by(|a, b| b.1.0.cmp(&a.1.0).then(a.0.cmp(&b.0)));
        let by: Vec<(u32, u64)> = counted
            .iter()
            .map(|(pid, (count, _))| (*pid, *count))
            .collect();
        let last = counted.iter().map(|(_, (_, last))| *last).collect();
        RefusedSince {
            count: by.iter().map(|(_, count)| count).sum(),
            by,
            last,
        }
    }

    /// Every refusal on `file` since the table began.
    #[cfg(test)]
    pub(crate) fn refused_total(&self, file: &FileId) -> u64 {
        self.refusals.get(file).map_or(0, |refusals| refusals.total)
    }

    /// True when no file is locked or waited on.
    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::liveness::kernel::event::monotonic_now;

    const GATE: FileId = FileId {
        major: 8,
        minor: 1,
        inode: 10,
    };
    const ANNOUNCE: FileId = FileId {
        major: 8,
        minor: 1,
        inode: 11,
    };

    fn event(file: FileId, pid: u32, owner: u64, kind: LockKind) -> LockEvent {
        LockEvent {
            file,
            pid,
            owner,
            kind,
            at: monotonic_now(),
        }
    }

    const EX: LockKind = LockKind::Taken { exclusive: true };
    const UNLOCKED: LockKind = LockKind::Unlocked { at_close: true };

    #[test]
    fn a_refused_tryers_close_does_not_end_the_holders_lock() {
        let mut table = LiveTable::default();
        table.apply(&event(GATE, 100, 0xa, EX));
        table.apply(&event(
            GATE,
            200,
            0xb,
            LockKind::Refused { exclusive: true },
        ));
        let applied = table.apply(&event(GATE, 200, 0xb, UNLOCKED));
        assert_eq!(
            applied,
            Applied::default(),
            "nothing changed, nothing uncertain"
        );
        assert_eq!(table.locks(&GATE).holders, vec![100]);
        table.apply(&event(GATE, 100, 0xa, UNLOCKED));
        assert!(table.is_empty(), "the holder's own close ends it");
    }

    #[test]
    fn a_waiter_is_listed_until_it_gets_the_lock() {
        let mut table = LiveTable::default();
        table.apply(&event(GATE, 100, 0xa, EX));
        table.apply(&event(
            GATE,
            300,
            0xc,
            LockKind::Waiting { exclusive: true },
        ));
        assert_eq!(table.locks(&GATE).waiters, vec![300]);
        table.apply(&event(GATE, 100, 0xa, UNLOCKED));
        table.apply(&event(GATE, 300, 0xc, EX));
        let locks = table.locks(&GATE);
        assert_eq!((locks.holders, locks.waiters), (vec![300], vec![]));
    }

    #[test]
    fn refused_shared_tries_are_counted_as_polls_apart_from_tries() {
        let mut table = LiveTable::default();
        table.apply(&event(GATE, 100, 0xa, EX));
        for _ in 0..3 {
            let applied = table.apply(&event(
                GATE,
                300,
                0xc,
                LockKind::Refused { exclusive: false },
            ));
            assert!(applied.polled && !applied.refused, "{applied:?}");
        }
        let start = monotonic_now().saturating_sub(NS_PER_SECOND);
        let polls = table.polls_since(&[GATE.into()], start);
        assert_eq!(polls.by, vec![(300, 3)]);
        assert_eq!(
            table.refused_since(&[GATE.into()], start).count,
            0,
            "no try"
        );
        assert_eq!(table.locks(&GATE).holders, vec![100], "no lock changed");
    }

    #[test]
    fn a_watcher_waits_shared_and_a_dead_waiter_is_forgotten() {
        let mut table = LiveTable::default();
        table.apply(&event(ANNOUNCE, 100, 0xa, EX));
        table.apply(&event(
            ANNOUNCE,
            400,
            0xd,
            LockKind::Waiting { exclusive: false },
        ));
        assert_eq!(table.locks(&ANNOUNCE).shared_waiters, vec![400]);
        assert!(table.has_waiters());
        // When it was queued is kept, for whoever asks whether its PID is
        // still the process that queued (and told to the forgetting).
        let since = table.waiter_since(&[GATE, ANNOUNCE], 400).expect("queued");
        assert!(since > 0 && since <= monotonic_now());
        assert_eq!(table.waiter_since(&[GATE, ANNOUNCE], 100), None, "a holder");
        assert_eq!(
            table.forget_waiters(|pid, queued| pid != 400 || queued != since),
            vec![ANNOUNCE]
        );
        assert!(table.locks(&ANNOUNCE).shared_waiters.is_empty());
        assert!(!table.has_waiters());
    }

    #[test]
    fn a_seeded_hold_is_settled_from_its_holders_files_never_guessed() {
        let index = LockIndex::parse("1: FLOCK  ADVISORY  WRITE 100 08:01:10 0 EOF\n");
        let mut table = LiveTable::seeded(&index);
        assert_eq!(table.locks(&GATE).holders, vec![100]);
        // Someone's close: whose, the table cannot tell.
        let applied = table.apply(&event(GATE, 200, 0xb, UNLOCKED));
        assert!(applied.uncertain && !applied.changed, "{applied:?}");
        assert!(!table.settle(GATE, |_| None), "unknown: kept");
        assert!(!table.settle(GATE, |_| Some(true)), "still holds: kept");
        assert!(table.settle(GATE, |_| Some(false)), "let go: dropped");
        assert!(table.is_empty());
    }

    #[test]
    fn a_seeded_holder_taking_its_lock_again_is_one_hold() {
        let index = LockIndex::parse("1: FLOCK  ADVISORY  WRITE 100 08:01:10 0 EOF\n");
        let mut table = LiveTable::seeded(&index);
        table.apply(&event(GATE, 100, 0xa, LockKind::Taken { exclusive: false }));
        let locks = table.locks(&GATE);
        assert_eq!((locks.holders, locks.shared), (vec![], vec![100]));
    }

    #[test]
    fn an_exclusive_grant_ends_every_other_hold_and_a_conversion_releases_first() {
        let mut table = LiveTable::default();
        table.apply(&event(GATE, 100, 0xa, EX));
        // A waiter woken by the holder's unlock may be told first.
        table.apply(&event(GATE, 300, 0xc, EX));
        assert_eq!(table.locks(&GATE).holders, vec![300]);
        table.apply(&event(GATE, 100, 0xa, UNLOCKED));
        assert_eq!(
            table.locks(&GATE).holders,
            vec![300],
            "the late unlock ends nothing"
        );
        // 300 asks to convert to shared while 400 waits: released first.
        table.apply(&event(
            GATE,
            300,
            0xc,
            LockKind::Refused { exclusive: false },
        ));
        assert!(table.locks(&GATE).holders.is_empty());
    }

    #[test]
    fn refusals_are_counted_per_pid_and_by_time() {
        let mut table = LiveTable::default();
        let start = monotonic_now();
        for pid in [7, 7, 8] {
            table.apply(&event(
                GATE,
                pid,
                0x1,
                LockKind::Refused { exclusive: true },
            ));
        }
        let refused = table.refused_since(&[GATE.into(), ANNOUNCE.into()], start);
        assert_eq!(refused.count, 3);
        assert_eq!(refused.by, vec![(7, 2), (8, 1)]);
        let later = table.refused_since(&[GATE.into()], monotonic_now() + 2_000_000_000);
        assert_eq!(later.count, 0);
        assert_eq!(table.refused_total(&GATE), 3);
        assert!(table.is_empty(), "a refusal locks nothing");
        // Someone checking whether it is held (LOCK_SH|LOCK_NB: try_held,
        // a passive probe) is not trying to take it.
        let checked = table.apply(&event(GATE, 9, 0x2, LockKind::Refused { exclusive: false }));
        assert!(!checked.refused);
        assert_eq!(table.refused_total(&GATE), 3);
    }

    /// An inode number is given again once its file is deleted: the PIDs
    /// refused on the file that had it before are not counted on the
    /// file made since, nor their tries; a PID refused after it was made
    /// is, with its last refusal on it.
    #[test]
    fn refusals_on_a_reused_inode_before_its_file_was_made_are_not_its() {
        let mut table = LiveTable::default();
        let second = |s: u64| 1_000 * NS_PER_SECOND + s * NS_PER_SECOND;
        let refuse = |table: &mut LiveTable, at, pid| {
            table.apply(&LockEvent {
                at,
                file: GATE,
                pid,
                owner: 0x1,
                kind: LockKind::Refused { exclusive: true },
            });
        };
        // The file before: refused by 7, twice, and by 8, in second 3.
        refuse(&mut table, second(3), 7);
        refuse(&mut table, second(3) + 100, 7);
        refuse(&mut table, second(3) + 200, 8);
        // Deleted; the file made at 3.5 s has its number; 8 tries it.
        let born = second(3) + NS_PER_SECOND / 2;
        refuse(&mut table, born + 1_000, 8);
        refuse(&mut table, second(5), 8);
        let now_made = CountedFile {
            file: GATE,
            born: Some(born),
        };
        let refused = table.refused_since(&[now_made], second(0));
        // 8 counts whole in the second it was made (3 tries, one of them
        // on the file before: to the second), 7 not at all.
        assert_eq!(refused.by, vec![(8, 3)]);
        assert_eq!(refused.last, vec![second(5)]);
        // Made after every refusal: none is its.
        let later = CountedFile {
            file: GATE,
            born: Some(second(6)),
        };
        assert_eq!(table.refused_since(&[later], second(0)).count, 0);
        // Its birth unknown: every refusal counts, as before.
        assert_eq!(table.refused_since(&[GATE.into()], second(0)).count, 5);
    }

    /// A loop refused far more often than any list could keep is counted
    /// whole, by second, for a minute; then forgotten, file and all.
    #[test]
    fn every_refusal_of_a_minute_counts_and_older_ones_are_forgotten() {
        let mut table = LiveTable::default();
        let second = |s: u64| 1_000 * NS_PER_SECOND + s * NS_PER_SECOND;
        let refuse = |table: &mut LiveTable, file, at, pid| {
            table.apply(&LockEvent {
                at,
                file,
                pid,
                owner: 0x1,
                kind: LockKind::Refused { exclusive: true },
            });
        };
        for i in 0..100_000u64 {
            refuse(
                &mut table,
                GATE,
                second(0) + i * 600_000,
                7 + (i % 2) as u32,
            );
        }
        let minute = table.refused_since(&[GATE.into()], second(0));
        assert_eq!(minute.count, 100_000);
        assert_eq!(minute.by, vec![(7, 50_000), (8, 50_000)]);
        // Two minutes on, on another file: the gate's seconds are all
        // older than kept, and a prune forgets the file.
        for i in 0..REFUSALS_PRUNE_EVERY {
            refuse(&mut table, ANNOUNCE, second(180) + i, 9);
        }
        assert_eq!(table.refused_since(&[GATE.into()], second(0)).count, 0);
        assert!(!table.refusals.contains_key(&GATE), "forgotten");
        assert_eq!(
            table.refused_since(&[ANNOUNCE.into()], second(179)).count,
            REFUSALS_PRUNE_EVERY
        );
    }
}
