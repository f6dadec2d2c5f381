//! Liveness from the kernel's own lock events: the event source.
//!
//! With it, the engine infers nothing. One judgement of the table begins
//! it (the first sweep's single `/proc/locks` read seeds a
//! [`LiveTable`]); from then on every flock request on the state dir's
//! filesystems arrives as an event, keeps the table current, and marks the
//! claim whose gate or announce it was on; a claim an event leaves
//! unlocked is judged from the table at once, any other [`super::COALESCE`]
//! after its own first change (its writes share the judgement), the
//! rings drained in place just before ([`Source::drain_now`]: an
//! acquisition's flocks are read then, not by a drain of their own) — no
//! `/proc/locks` read, no sweep, no confirmation window, no settle.
//! inotify still tells the tree's shape (new claims, new directories,
//! removals, problems); its opens and closes say nothing here but how
//! soon to drain.
//!
//! Invariants:
//! - every file of every known claim maps back to its claim (registered
//!   when the claim is first judged); an event on a file no claim has
//!   yet still updates the table, so a claim created after its first lock
//!   is judged right when its creation is heard;
//! - the events are drained from the kernel's rings as they come, by the
//!   reader's task on the engine's runtime, even while the engine awaits
//!   other work (a first sweep of a million keys takes seconds, off the
//!   loop): until the first judgement seeds the table they wait in the
//!   reader's channel, then are applied on top of the seed (a hold seen
//!   twice is one, an unlock of a hold the read missed changes nothing).
//!   The engine reads the stream itself, in its loop: no task between
//!   them;
//! - lost events ([`Record::Lost`]) are never a silently wrong view:
//!   the engine says so in its health and judges the whole table again
//!   (one `/proc/locks` read), then goes on from events; so is a file the
//!   kernel's filter dropped as foreign that became a claim's
//!   ([`Record::Readmitted`]);
//! - an unlock of a hold the table was seeded with (whose open file is
//!   unknown) is settled from the holder's fdinfo, or — where that may
//!   not be read (another user's process, to a monitor without
//!   privileges) — from one `/proc/locks` read, never left standing on a
//!   guess;
//! - a waiter that dies waiting leaves no event: waiters' processes are
//!   looked at once a second ([`WAITER_CHECK`]), and a dead one leaves the
//!   view.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::time::{Duration, SystemTime};

use tokio::time::Instant;

use std::path::Path;

mod events;
mod judge;

use super::judging::Judging;
use super::source::{Asks, GatedClaim, Source, TreeWatchKind};
use crate::disk::LockKey;
use crate::engine::WatcherHealth;
use crate::engine::trace::Stage;
use crate::liveness::annotate::{ClaimLstats, HolderReads, Recheck, annotate_lstated};
use crate::liveness::fdinfo::{HeldFiles, keepers_of};
use crate::liveness::kernel::live_table::{CountedFile, EventStream, LiveTable, Nudger};
use crate::liveness::kernel::{Record, quiet};
use crate::liveness::lock_free;
use crate::liveness::proc_locks::{FileId, LockIndex};
use crate::liveness::state::{POLLS_MIN, TRYING_WITHIN};
use crate::liveness::verify::{FdHints, claim_files};
use crate::liveness::{KeyState, RefusedBy, RefusedTries, WaitKind, Waiting};

/// How often waiters' processes are looked at (a waiter that dies
/// waiting leaves no event).
pub(super) const WAITER_CHECK: Duration = Duration::from_secs(1);

/// How long after a failed read of the stream it is read again (a
/// reader that fails keeps failing: each failure is a resync).
const RETRY_AFTER: Duration = Duration::from_secs(1);

/// At most this often is a claim judged again for its refused tries (an
/// agent looping on `try_acquire` is refused thousands of times a second).
pub(super) const REFUSALS_EVERY: Duration = Duration::from_secs(1);

/// The span refused tries are counted over.
pub(super) const REFUSALS_OVER: Duration = Duration::from_secs(60);

/// How long a claim whose taker runs and has closed it waits before the
/// search of every process for who keeps it (its release, heard meanwhile,
/// makes the search needless: an agent's release is heard within a few
/// ms).
pub(super) const KEEPER_WAIT: Duration = Duration::from_millis(50);

/// How long a claim whose taker has closed it is judged again (every
/// [`super::COALESCE`], the reader asked to drain each time) before that
/// state is shown: the taker's unlock is most often on its way — written
/// a moment after its close, which was what made the judgement — and a
/// release that arrives within this is shown as the release it is, with
/// no "taker let go" in between.
pub(super) const LET_GO_GRACE: Duration = Duration::from_millis(10);

/// The longest a claim waits for its dropped file's readmission before it
/// is judged from the table anyway (the source failing to readmit it).
const READMIT_WAIT: Duration = Duration::from_secs(1);

/// How many foreign files [`Kernel`] remembers as no claim's before it
/// starts afresh.
const NOT_CLAIMS_MAX: usize = 65_536;

/// The engine's side of the event source.
pub(super) struct Kernel {
    /// The lock table the events keep current.
    table: LiveTable,
    /// The claims' files the events are mapped back to, and the files
    /// known to be no claim's.
    registry: Registry,
    /// The kernel's events as they are read.
    events: EventsIn,
    /// False until the first judgement seeded the table.
    seeded: bool,
    /// Events lost in all (the source said how many).
    lost: u64,
    /// When waiters' processes are next looked at (and refusal counts
    /// judged again as they age).
    next_waiter_check: Instant,
    /// The claims refused tries were counted on.
    refusals: Refusals,
    /// The searches for who keeps a lock its taker closed.
    keepers: Keepers,
    /// The claims changed and not judged yet.
    judge_queue: JudgeQueue,
    /// Claims judged with their taker let go and not shown so yet, since
    /// when ([`LET_GO_GRACE`]).
    let_go_since: HashMap<LockKey, Instant>,
    /// Claims' files the kernel's filter dropped as foreign, since when:
    /// their claims are not judged until the source has sampled them again
    /// and said so ([`Record::Readmitted`], then everything is judged), or
    /// [`READMIT_WAIT`] passed — the table lacks what they did meanwhile.
    readmitting: HashMap<FileId, Instant>,
    /// Asks the stream to deliver what it has now; handed to the engine's
    /// inotify, which nudges it at every event of the tree (lock events
    /// are likely waiting): at once after a close or a removal, for the
    /// judgement's drain ([`Source::drain_now`]) after an open
    /// or a write.
    pub(super) nudge: Option<Nudger>,
}

/// The registered claims: every one's files, mapped back to it, and the
/// files lock requests were made on that are no claim's.
///
/// Invariant: `files` and `claims` are each other's inverse.
struct Registry {
    /// Every registered claim file → its claim. Registered: the claims
    /// held at the first judgement, every claim written or judged since,
    /// and the claim an event's requester opened
    /// ([`Kernel::resolve_claim`]) —
    /// never every claim on disk (a million idle keys would cost hundreds
    /// of megabytes here for nothing).
    files: HashMap<FileId, LockKey>,
    /// Files lock requests were made on that are no claim's (a foreign
    /// lock on the same filesystem): not looked up again, and shared with
    /// the source as its quiet files (their events may come late; the
    /// busiest are dropped by the kernel's filter). Bounded: cleared when
    /// [`NOT_CLAIMS_MAX`] is reached, but for the dropped ones; a file
    /// that becomes a claim's leaves it (and, dropped, is readmitted: a
    /// [`Record::Readmitted`] follows, and a judgement of everything).
    not_claims: NotClaims,
    /// Each registered claim → its files (to forget them when they
    /// change or the claim goes).
    claims: HashMap<LockKey, Vec<FileId>>,
}

/// The kernel's events as the engine reads them: the ordered stream,
/// what was read of it and not taken, and the devices it samples.
struct EventsIn {
    /// The kernel's events, in order.
    stream: Box<dyn EventStream>,
    /// Records read from the stream and not taken yet (kept here, not in
    /// a read's future, which the loop may drop).
    incoming: Vec<Record>,
    /// After a failed read: not read again before this.
    retry_at: Option<Instant>,
    /// The devices asked for so far.
    watched: Vec<(u32, u32)>,
}

/// Refused tries and polls, per claim.
#[derive(Default)]
struct Refusals {
    /// Claims with refused tries in the last minute, with when each was
    /// last judged for one: judged again at most once a
    /// [`REFUSALS_EVERY`], and once a second until none is left.
    refused: HashMap<LockKey, Instant>,
    /// Claims with refused tries or polls in the last minute, with when
    /// the last was seen: judged again once a second until a minute has
    /// passed since.
    last_refusal: HashMap<LockKey, Instant>,
}

/// Who keeps a lock whose taker closed it: what is searched for, and
/// when.
#[derive(Default)]
struct Keepers {
    /// Claims held while their taker, running, has closed them: when each
    /// is judged again, searching every process for who keeps it.
    keepers_due: HashMap<LockKey, Instant>,
    /// Files locked by a requester that had closed them by the time its
    /// event was read, no claim's yet, with that requester and when every
    /// process is searched for one that keeps the lock ([`KEEPER_WAIT`]
    /// after it was first read: most often the requester's unlock comes
    /// meanwhile, and no search is needed — a search reads every
    /// process's fds, tens of milliseconds on a busy host, which the
    /// engine must not spend inside a batch of events). Bounded like
    /// `not_claims`.
    files_to_search: HashMap<FileId, (u32, Instant)>,
    /// The fds of the processes whose requests named files no claim has
    /// yet, as last seen: a program that locks thousands of files one
    /// by one costs a `stat` per new fd, not a walk of all its fds per
    /// file.
    fd_tables: crate::liveness::fd_tables::FdTables,
    /// Claims whose next judgement searches for their keeper (their
    /// [`KEEPER_WAIT`] passed).
    search_keepers: std::collections::HashSet<LockKey>,
}

/// Claims changed and not judged yet, in the order they are due.
#[derive(Default)]
struct JudgeQueue {
    /// Claims changed and not judged yet, each due [`super::COALESCE`]
    /// after its own first change — a lock event's own time, an inotify
    /// event's reading — in the order they are due: a hold that ends
    /// sooner is judged once, free, at its release — never held by a
    /// batch that happened to fall due in between.
    queue: std::collections::VecDeque<(Instant, LockKey)>,
    /// The claims in `queue` still to be judged (one judged meanwhile
    /// is left in `queue`, skipped when it comes up).
    queued: std::collections::HashSet<LockKey>,
}

impl Kernel {
    /// Reads `stream` for events on `devices`, in the engine's loop.
    pub(super) fn start(mut stream: Box<dyn EventStream>, devices: Vec<(u32, u32)>) -> Self {
        if let Err(error) = stream.watch_devices(&devices) {
            tracing::warn!(%error, "the lock events' device filter was refused");
        }
        let nudge = stream.nudger();
        let not_claims = NotClaims(stream.quiet_files().unwrap_or_default());
        Self {
            nudge,
            table: LiveTable::default(),
            registry: Registry {
                files: HashMap::new(),
                not_claims,
                claims: HashMap::new(),
            },
            events: EventsIn {
                stream,
                incoming: Vec::new(),
                retry_at: None,
                watched: devices,
            },
            seeded: false,
            lost: 0,
            next_waiter_check: Instant::now() + WAITER_CHECK,
            refusals: Refusals::default(),
            keepers: Keepers::default(),
            judge_queue: JudgeQueue::default(),
            let_go_since: HashMap::new(),
            readmitting: HashMap::new(),
        }
    }

    /// The next batch of records, once the table is seeded (never before:
    /// they wait in the reader's channel). A read that failed is a loss
    /// (a resync), and the next read waits [`RETRY_AFTER`]. Cancel-safe.
    pub(super) async fn next(&mut self) -> Option<Vec<Record>> {
        if !self.seeded {
            return std::future::pending().await;
        }
        if let Some(at) = self.events.retry_at {
            tokio::time::sleep_until(at).await;
            self.events.retry_at = None;
        }
        let read = self
            .events
            .stream
            .next_batch(&mut self.events.incoming)
            .await;
        Some(self.take_read(read))
    }

    /// What the last read (or drain) of the stream appended, taken; a
    /// read that failed adds a loss (a resync), and the next read waits
    /// [`RETRY_AFTER`].
    fn take_read(&mut self, read: std::io::Result<()>) -> Vec<Record> {
        if let Err(error) = read {
            tracing::warn!(%error, "reading the kernel's lock events failed");
            self.events.incoming.push(Record::Lost(0));
            self.events.retry_at = Some(Instant::now() + RETRY_AFTER);
        }
        std::mem::take(&mut self.events.incoming)
    }

    /// When the activity inotify told of is drained for, in place
    /// ([`Source::drain_now`]): a coalescing window after the
    /// first of it, as a claim it changed is judged.
    pub(super) fn burst_due(&self) -> Option<Instant> {
        // Not while a failed read waits for its retry: the drain would
        // not be tried, and the loop would wake for it at once, forever.
        if !self.seeded || self.events.retry_at.is_some() {
            return None;
        }
        let since = self.nudge.as_ref()?.later_since()?;
        Some(Instant::from_std(since) + super::COALESCE)
    }

    /// When waiters are next looked at, if any waits (or refusals are
    /// counted on some claim), or a claim is next judged for its keeper,
    /// whichever comes first.
    pub(super) fn waiter_check_due(&self) -> Option<Instant> {
        let waiters = (!self.refusals.refused.is_empty() || self.table.has_waiters())
            .then_some(self.next_waiter_check);
        let keepers = self.keepers.keepers_due.values().min().copied();
        let files = self
            .keepers
            .files_to_search
            .values()
            .map(|(_, due)| *due)
            .min();
        waiters.into_iter().chain(keepers).chain(files).min()
    }

    /// Queues `key` for judgement [`super::COALESCE`] after now, unless
    /// it is queued already (its first change sets when).
    pub(super) fn queue(&mut self, key: LockKey) {
        self.queue_changed_at(key, Instant::now());
    }

    /// Queues `key` for judgement [`super::COALESCE`] after `changed` (no
    /// later than now: when its event happened, which a drain may read a
    /// while after), unless it is queued already. The queue stays in the
    /// order of when each claim is due.
    pub(super) fn queue_changed_at(&mut self, key: LockKey, changed: Instant) {
        if self.judge_queue.queued.insert(key.clone()) {
            let at = changed.min(Instant::now()) + super::COALESCE;
            let queue = &mut self.judge_queue.queue;
            let place = queue.partition_point(|(due, _)| *due <= at);
            queue.insert(place, (at, key));
        }
    }

    /// Takes `key` out of the queue (judged now).
    pub(super) fn unqueue(&mut self, key: &LockKey) {
        self.judge_queue.queued.remove(key);
    }

    /// Empties the queue (a judgement of everything comes).
    pub(super) fn clear_queue(&mut self) {
        self.judge_queue.queue.clear();
        self.judge_queue.queued.clear();
    }

    /// The queued claims due by `now`, in the order they were queued.
    pub(super) fn due(&mut self, now: Instant) -> Vec<LockKey> {
        let mut due = Vec::new();
        while let Some((at, _)) = self.judge_queue.queue.front() {
            if *at > now {
                break;
            }
            let Some((_, key)) = self.judge_queue.queue.pop_front() else {
                break;
            };
            if self.judge_queue.queued.remove(&key) {
                due.push(key);
            }
        }
        due
    }

    /// When the first queued claim is due.
    pub(super) fn queue_due(&self) -> Option<Instant> {
        self.judge_queue
            .queue
            .iter()
            .find(|(_, key)| self.judge_queue.queued.contains(key))
            .map(|(at, _)| *at)
    }

    /// Asks the stream for the devices of `files` it does not watch yet
    /// (a bind mount below the root), in one message.
    fn watch_devices_of(&mut self, files: &[FileId]) {
        self.watch_devices(files.iter().map(|file| (file.major, file.minor)));
    }

    /// Has the stream sample `devices` it does not watch yet too: their
    /// flocks are sampled once this returns (or the request was refused,
    /// and the log says why).
    fn watch_devices(&mut self, devices: impl IntoIterator<Item = (u32, u32)>) {
        let mut new_device = false;
        for device in devices {
            if !self.events.watched.contains(&device) {
                self.events.watched.push(device);
                new_device = true;
            }
        }
        if new_device && let Err(error) = self.events.stream.watch_devices(&self.events.watched) {
            tracing::warn!(%error, "the lock events' device filter was refused");
        }
    }
}

/// Files known to be no claim's, in a set the source reads too
/// ([`crate::liveness::kernel::wait::QuietFiles`]).
struct NotClaims(crate::liveness::kernel::wait::QuietFiles);

impl NotClaims {
    fn contains(&self, file: &FileId) -> bool {
        quiet::read(&self.0).contains(file)
    }

    /// Adds `file`, starting afresh at [`NOT_CLAIMS_MAX`] (but for the
    /// files the kernel's filter drops: only a claim readmits them).
    fn insert(&self, file: FileId) {
        let mut set = quiet::write(&self.0);
        set.bound(NOT_CLAIMS_MAX);
        set.insert(file);
    }

    /// Forgets `files` (a claim's now): the reader samples them again if
    /// its filter dropped them, and says so with a
    /// [`Record::Readmitted`]. Returns the ones it dropped.
    fn remove(&self, files: &[FileId]) -> Vec<FileId> {
        let mut set = quiet::write(&self.0);
        for file in files {
            set.remove(file);
        }
        files
            .iter()
            .filter(|file| set.is_dropped(file))
            .copied()
            .collect()
    }

    /// How many files the kernel's filter drops.
    fn dropped(&self) -> usize {
        quiet::read(&self.0).dropped_count()
    }
}

impl Source for Kernel {
    type Told = Vec<Record>;

    fn tree_watch(&self) -> TreeWatchKind {
        TreeWatchKind::Direct(self.nudge.clone())
    }

    fn watching(&mut self, root: &Path) {
        self.watch_mounted_devices(root);
    }

    /// Judged [`super::COALESCE`] after its own first change (a batch is
    /// no `/proc/locks` read to share).
    fn mark(&mut self, key: LockKey) {
        self.queue(key);
    }

    /// A claim created or written is registered at once (unless both its
    /// files are): the flocks of its taker, which follow within
    /// microseconds, then name it from the registry — not from a walk of
    /// the taker's fds to learn the path it opened.
    fn note_written(&mut self, key: &LockKey) {
        if self
            .registry
            .claims
            .get(key)
            .is_none_or(|files| files.len() < 2)
        {
            self.register(key);
        }
    }

    /// A close says nothing the events do not (an unlock is an event of
    /// its own), but how soon to drain for them: at once when a file of
    /// the claim is locked (its holder or a waiter may be letting go),
    /// else with the next judgement (a probe's close, a file's creation).
    fn note_closed(&mut self, key: &LockKey) -> bool {
        if let Some(nudge) = &self.nudge {
            let locked = self
                .registry
                .claims
                .get(key)
                .is_some_and(|files| files.iter().any(|file| !self.table.is_unlocked(file)));
            if locked {
                nudge.now();
            } else {
                nudge.later();
            }
        }
        false
    }

    fn forget(&mut self, key: &LockKey) {
        self.unqueue(key);
        self.unregister(key);
    }

    /// The events wait until the sweep's read seeds the table again.
    fn sweep_begins(&mut self) {
        self.clear_queue();
        self.unseed();
    }

    fn judged_everything<'a>(
        &mut self,
        index: &LockIndex,
        held: impl Iterator<Item = &'a LockKey>,
        all: impl Iterator<Item = &'a LockKey>,
    ) {
        self.seed_from(index, held, all);
    }

    /// Never: the events tell every change (a resync is asked for when
    /// some were lost).
    fn sweeps(&self) -> bool {
        false
    }

    fn seeds_from_lock_table(&self) -> bool {
        true
    }

    /// Besides the waiters' check and the claims queued: the drain that
    /// activity the tree's inotify told of waits for
    /// ([`Self::burst_due`]).
    fn next_due(&self) -> Option<Instant> {
        [self.waiter_check_due(), self.queue_due(), self.burst_due()]
            .into_iter()
            .flatten()
            .min()
    }

    /// The drain that activity waits for ([`Self::burst_due`]) may begin
    /// before the loop's judgement takes it in place: the reader's own,
    /// asked by a close meanwhile, answers it too.
    fn withdrawn_by(&self) -> Option<Nudger> {
        self.burst_due().and(self.nudge.clone())
    }

    fn take_due(&mut self, now: Instant) -> Vec<LockKey> {
        self.due(now)
    }

    /// Waiters' processes looked at (a waiter that dies waiting leaves no
    /// event), and keepers searched for, when due.
    fn on_timers(&mut self, judging: &mut Judging<'_>, now: Instant) {
        if self.waiter_check_due().is_some_and(|due| due <= now) {
            self.check_waiters(judging.state_dir);
        }
    }

    /// From the table the events keep.
    async fn judge(&mut self, judging: &mut Judging<'_>, claims: Vec<GatedClaim>) {
        if !claims.is_empty() {
            self.judge_from_table(judging, claims);
        }
    }

    async fn told(&mut self) -> Option<Vec<Record>> {
        self.next().await
    }

    /// The rings drained in place when claims are due by `now` (their
    /// flocks are in the rings: nothing drains for an acquisition's opens
    /// and writes, [`crate::liveness::kernel::live_table::Nudges::later`])
    /// or the activity inotify told of has waited its window
    /// ([`Kernel::burst_due`]); `None` when neither, before the table is
    /// seeded, or while a failed read waits to be retried. A failed drain
    /// is a loss, as a failed read is ([`Kernel::next`]).
    async fn drain_now(&mut self, now: Instant) -> Option<Vec<Record>> {
        if !self.seeded || self.events.retry_at.is_some() {
            return None;
        }
        let due = |at: Option<Instant>| at.is_some_and(|at| at <= now);
        if !due(self.queue_due()) && !due(self.burst_due()) {
            return None;
        }
        let drained = self
            .events
            .stream
            .drain_now(&mut self.events.incoming)
            .await;
        Some(self.take_read(drained))
    }

    fn apply(&mut self, judging: &mut Judging<'_>, records: Vec<Record>) -> Asks {
        let items = records.len();
        Asks {
            items,
            ..self.on_records(judging, records)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::locks::agent_tag_lock;

    /// Nudges counted: at once, and activity waiting for the judgement's
    /// drain (since when).
    #[derive(Default)]
    struct Nudged {
        at_once: std::sync::atomic::AtomicUsize,
        later: std::sync::Mutex<Option<std::time::Instant>>,
    }

    impl crate::liveness::kernel::live_table::Nudges for Nudged {
        fn now(&self) {
            self.at_once.fetch_add(1, Ordering::Relaxed);
        }

        fn later(&self) {
            self.later
                .lock()
                .unwrap()
                .get_or_insert_with(std::time::Instant::now);
        }

        fn later_since(&self) -> Option<std::time::Instant> {
            *self.later.lock().unwrap()
        }

        fn answered(&self) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send + '_>> {
            Box::pin(std::future::ready(()))
        }
    }

    /// A stream that delivers nothing by itself: what it holds comes only
    /// when drained in place (which answers the activity waiting).
    struct InPlace {
        nudge: std::sync::Arc<Nudged>,
        held: Vec<Record>,
    }

    impl InPlace {
        /// A stream with nothing to tell.
        fn silent() -> Box<Self> {
            Box::new(Self {
                nudge: std::sync::Arc::default(),
                held: Vec::new(),
            })
        }
    }

    impl EventStream for InPlace {
        fn next_batch<'a>(
            &'a mut self,
            _out: &'a mut Vec<Record>,
        ) -> std::pin::Pin<Box<dyn std::future::Future<Output = std::io::Result<()>> + Send + 'a>>
        {
            Box::pin(std::future::pending())
        }

        fn watch_devices(&mut self, _devices: &[(u32, u32)]) -> std::io::Result<()> {
            Ok(())
        }

        fn nudger(&self) -> Option<crate::liveness::kernel::live_table::Nudger> {
            Some(self.nudge.clone())
        }

        fn drain_now<'a>(
            &'a mut self,
            out: &'a mut Vec<Record>,
        ) -> std::pin::Pin<Box<dyn std::future::Future<Output = std::io::Result<()>> + Send + 'a>>
        {
            out.append(&mut self.held);
            *self.nudge.later.lock().unwrap() = None;
            Box::pin(std::future::ready(Ok(())))
        }
    }

    fn taken(file: FileId) -> Record {
        Record::Event(crate::liveness::kernel::LockEvent {
            at: crate::liveness::kernel::event::monotonic_now(),
            file,
            pid: 1,
            owner: 7,
            kind: crate::liveness::kernel::LockKind::Taken { exclusive: true },
        })
    }

    /// Nothing drains for an acquisition's opens and writes but the
    /// judgement: a claim due, or activity that waited its window, has
    /// the rings drained in place first (what they hold is judged with
    /// it); before either, and before the table is seeded, nothing is.
    #[tokio::test]
    async fn a_judgement_drains_the_rings_in_place_first() {
        let state = tempfile::tempdir().expect("tempdir");
        let (tags, name) = agent_tag_lock(state.path(), "build");
        std::fs::create_dir_all(&tags).expect("tags");
        let key = LockKey::from_coord(state.path(), &tags, &name);
        std::fs::write(key.gate_path(), b"").expect("gate");
        let gate = FileId::of(&key.gate_path()).expect("lstat");
        let nudge = std::sync::Arc::new(Nudged::default());
        let stream = InPlace {
            nudge: nudge.clone(),
            held: vec![taken(gate)],
        };
        let mut kernel = Kernel::start(Box::new(stream), Vec::new());
        let now = Instant::now();

        // Activity told, a claim changed: not due yet, and nothing before
        // the table is seeded.
        kernel.nudge.as_ref().expect("nudger").later();
        kernel.queue(key.clone());
        let window = now + super::super::COALESCE + Duration::from_millis(50);
        assert!(kernel.drain_now(window).await.is_none(), "unseeded");
        assert_eq!(
            kernel.next_due(),
            kernel.waiter_check_due().or(kernel.queue_due())
        );
        kernel.seeded = true;
        let burst = kernel.burst_due().expect("activity waits");
        assert!(burst >= now + super::super::COALESCE);
        assert!(kernel.next_due() <= Some(burst));
        assert!(kernel.drain_now(now).await.is_none(), "not due yet");

        // Due: drained in place, the records handed over, the activity
        // answered.
        let drained = kernel.drain_now(window).await.expect("drained");
        assert!(matches!(drained[..], [Record::Event(ref event)] if event.file == gate));
        assert_eq!(kernel.burst_due(), None, "answered");
        // Nothing due any more (the claim judged): no drain.
        assert_eq!(kernel.due(window), vec![key]);
        assert!(kernel.drain_now(window).await.is_none());
    }

    /// A claim a lock event changed is due a coalescing window after the
    /// event happened, not after the drain that read it (a tag taken
    /// while its instance's window ran is judged with the instance, in
    /// one wake-up), and the queue stays in the order claims are due.
    #[tokio::test]
    async fn a_claim_is_due_a_window_after_its_lock_event_not_after_its_reading() {
        let state = tempfile::tempdir().expect("tempdir");
        let (tags, _) = agent_tag_lock(state.path(), "early");
        std::fs::create_dir_all(&tags).expect("tags");
        let [early, late] = ["early", "late"].map(|name| {
            let key =
                LockKey::from_coord(state.path(), &tags, &agent_tag_lock(state.path(), name).1);
            std::fs::write(key.gate_path(), b"").expect("gate");
            key
        });
        let mut kernel = Kernel::start(InPlace::silent(), Vec::new());
        kernel.seeded = true;
        kernel.register(&early);
        // Read first: due a window after now.
        kernel.queue(late.clone());
        let late_due = kernel.queue_due().expect("queued");
        // Taken 1.5 ms before its drain read it.
        let mut record = taken(FileId::of(&early.gate_path()).expect("lstat"));
        if let Record::Event(event) = &mut record {
            event.at -= Duration::from_micros(1_500).as_nanos() as u64;
        }
        let (tx, _deltas) = tokio::sync::mpsc::channel(16);
        let mut engine = super::super::Engine::new(
            crate::context::Context::new(state.path().to_path_buf()),
            crate::engine::EngineConfig::default(),
            tx,
            Default::default(),
        );
        engine.source = super::super::any_source::AnySource::Kernel(Box::new(kernel));
        let (source, mut judging) = engine.split();
        let super::super::any_source::AnySource::Kernel(kernel) = source else {
            unreachable!("the kernel source was set just above");
        };
        let asks = kernel.on_records(&mut judging, vec![record]);
        assert!(asks.judge_now.is_empty(), "held: judged after its window");

        let early_due = kernel.queue_due().expect("queued");
        assert!(early_due < late_due, "due before the claim read earlier");
        assert!(
            early_due <= Instant::now() + super::super::COALESCE - Duration::from_millis(1),
            "a window after the event, not after its reading"
        );
        assert_eq!(kernel.due(early_due), vec![early]);
        assert_eq!(kernel.queue_due(), Some(late_due));
        assert_eq!(kernel.due(late_due), vec![late]);
    }

    /// While activity waits for the judgement's drain, the loop is told
    /// when a drain that answers it begins (the reader's own, asked by a
    /// close meanwhile): it then looks at its deadline again instead of
    /// waking for a drain already made. Nothing is told otherwise.
    #[test]
    fn the_burst_deadline_can_be_withdrawn_only_while_activity_waits() {
        let nudge = std::sync::Arc::new(Nudged::default());
        let stream = InPlace {
            nudge: nudge.clone(),
            held: Vec::new(),
        };
        let mut kernel = Kernel::start(Box::new(stream), Vec::new());
        kernel.seeded = true;
        assert!(kernel.withdrawn_by().is_none(), "nothing waits");
        kernel.nudge.as_ref().expect("nudger").later();
        assert!(kernel.withdrawn_by().is_some(), "activity waits");
        *nudge.later.lock().unwrap() = None;
        assert!(kernel.withdrawn_by().is_none(), "answered");
    }

    /// A read-only close of a claim's file asks for a drain at once only
    /// when one of its files is locked (a release may follow); else the
    /// judgement's drain serves (a probe's close, a file's creation).
    #[test]
    fn a_read_only_close_drains_at_once_only_where_a_lock_stands() {
        let state = tempfile::tempdir().expect("tempdir");
        let (tags, name) = agent_tag_lock(state.path(), "build");
        std::fs::create_dir_all(&tags).expect("tags");
        let key = LockKey::from_coord(state.path(), &tags, &name);
        std::fs::write(key.gate_path(), b"").expect("gate");
        std::fs::write(key.announce_path(), b"").expect("announce");
        let nudge = std::sync::Arc::new(Nudged::default());
        let stream = InPlace {
            nudge: nudge.clone(),
            held: Vec::new(),
        };
        let mut kernel = Kernel::start(Box::new(stream), Vec::new());
        kernel.register(&key);

        assert!(!kernel.note_closed(&key), "a close marks nothing");
        assert_eq!(nudge.at_once.load(Ordering::Relaxed), 0);
        assert!(
            nudge.later.lock().unwrap().is_some(),
            "the judgement's drain"
        );

        let Record::Event(event) = taken(FileId::of(&key.gate_path()).expect("lstat")) else {
            unreachable!()
        };
        kernel.table.apply(&event);
        assert!(!kernel.note_closed(&key));
        assert_eq!(nudge.at_once.load(Ordering::Relaxed), 1, "locked: at once");
    }

    /// A claim written is registered at once — its gate first, its
    /// announce when that comes — so its taker's flocks, heard a moment
    /// later, name it from the registry (no walk of the taker's fds).
    #[test]
    fn a_claim_written_is_registered_before_its_flocks_are_heard() {
        let state = tempfile::tempdir().expect("tempdir");
        let (tags, name) = agent_tag_lock(state.path(), "build");
        std::fs::create_dir_all(&tags).expect("tags");
        let key = LockKey::from_coord(state.path(), &tags, &name);
        let mut kernel = Kernel::start(InPlace::silent(), Vec::new());
        let file = |path: std::path::PathBuf| FileId::of(&path).expect("lstat");

        std::fs::write(key.gate_path(), b"").expect("gate");
        kernel.note_written(&key);
        let gate = file(key.gate_path());
        assert_eq!(kernel.registry.files.get(&gate), Some(&key));

        std::fs::write(key.announce_path(), b"").expect("announce");
        kernel.note_written(&key);
        let announce = file(key.announce_path());
        assert_eq!(kernel.registry.files.get(&announce), Some(&key));
        assert_eq!(
            kernel.registry.claims.get(&key),
            Some(&vec![gate, announce])
        );
    }
}
