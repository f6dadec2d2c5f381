//! Waiting for the kernel's lock events from async code, at as little
//! cost as possible to the processes whose flocks they are.
//!
//! Every wake-up the kernel gives the reader is paid by the process whose
//! flock made the event (the kernel queues it from inside that flock:
//! measured on a 2 vCPU VM, an unrelated process's flock+unlock on the
//! state dir's filesystem took 32 µs at the median with a wake-up at
//! every event, against 1.7 µs with no monitor and 4.5–5 µs with the
//! events written but never woken for). So the reader is told when to
//! look in other ways, and the kernel wakes it only so that a storm
//! cannot fill the rings ([`super::Options::wake_every`]):
//!
//! - a **nudge** ([`Nudge`]): the engine's inotify nudges at every event
//!   of the tree — an agent's lock, release or death opens, writes or
//!   closes a claim's files. After a close, a removal or a rename
//!   ([`Nudge::now`]) the first nudge since the last drain arms a timer,
//!   the others do nothing, and the reader drains once, [`FOLLOW_UP`]
//!   after that first nudge (a dying process's unlocks come just after
//!   its closes: that drain reads the burst). After an open, a creation
//!   or a write ([`Nudge::later`]: an acquisition, whose claim the engine
//!   judges a coalescing window after its first change) nothing is armed:
//!   the engine drains the rings itself, in place, when it judges
//!   ([`AsyncKernelLockEvents::flush_stamped`]: on the engine's thread,
//!   with the task's pacing, no wake-up of the task and no eventfd round
//!   trip) — an acquisition was four wake-ups (its first
//!   event, a drain half a millisecond later, another after the rest of
//!   its burst, then the judgement), now two, three with a tag taken
//!   after the first window. At most one wake-up of the reader per
//!   burst: draining at once and again after the follow-up woke it two
//!   or three times (a monitor under a churn of ~540 acquisitions a
//!   second: 21.5–21.9 % of a core then, 16.7–19.7 % with one drain per
//!   burst, three runs);
//! - the **drain owed** to the records handed over: one that begins a
//!   [`super::stream::REORDER_WINDOW`] after the newest of them that is
//!   not of a [`QuietFiles`] file (a foreign lock's events are owed
//!   nothing: they pass with the next drain, whenever it comes), handed
//!   over even if empty — the receiver passes on only records stamped a
//!   window before a drain began, and this one lets them pass without
//!   waiting for the next flock;
//! - a **backstop**, for what no nudge announces (a waiter granted its
//!   lock a while after the release that let it in, an unlock without a
//!   close, a flock on a file opened long before: inotify tells none of
//!   them): the rings are drained every [`BACKSTOP`] while a waiter the
//!   events told of has not been granted, refused or closed, and for
//!   [`ACTIVE_SPELL`] after a drain nobody asked for found records (of a
//!   file not quiet, or a loss): events come unannounced; otherwise every
//!   [`IDLE_BACKSTOP`]. Under a churn whose every lock comes with its
//!   inotify events the backstop thus wakes the reader once a second, not
//!   a hundred times (it did, for a second after every nudge: under
//!   steady churn, always);
//! - the kernel's own wake-up, every `wake_every` samples of a ring.
//!
//! At each wake-up, before its drain, the reader also has the filters
//! sample again the files the engine found to be a claim's, and after it
//! drops the busiest quiet files ([`super::quiet`]).
//!
//! A task on the runtime that makes the reader ([`drain_paced`]) waits:
//! no thread of its own. The rings' epoll, the nudge's eventfd and timer,
//! and a timer of the task's own (the backstop, the drain owed) are in
//! one epoll ([`Waits`]), which the runtime's reactor watches — the thread
//! that runs the engine is the one the kernel wakes, and hands nothing
//! over to another thread (a reader thread of its own cost a wake-up of
//! it, then one of the runtime's thread, per burst). The rings wake the
//! reactor only every `wake_every` samples, never at each flock; the
//! timers are `timerfd`s, to the microsecond (the runtime's own timers
//! are whole milliseconds, too coarse for the drain owed a reorder window
//! after a record). After a wake-up by the rings the task sleeps [`PACE`]
//! before it waits again, so a burst is read in batches. What a drain
//! keeps from one to the next (the drain owed, the waiters, the quiet
//! files' counts: [`Pacing`]) is one value under one lock, whoever
//! drains: the task drains and hands its batch over holding it, so a
//! drain in place, which takes the handed-over batches first, never
//! hands over records older than ones still to come; after one, the task
//! looks at its wait again.
//!
//! Invariants: every record drained is handed over, in drain order, each
//! batch with the `CLOCK_MONOTONIC` time taken just before its drain began
//! (see [`super::stream`]); a drain begins within a window (plus the
//! timer's slack) of a reorder window after the newest record handed
//! over that is not of a quiet file, and is handed over; no record waits
//! in a ring longer than [`BACKSTOP`] while a waiter waits or within
//! [`ACTIVE_SPELL`] of unannounced records, nor longer than
//! [`IDLE_BACKSTOP`] otherwise (plus a drain), while the runtime runs the
//! task; the task ends as soon as the
//! [`AsyncKernelLockEvents`] is dropped, and the rings close with it.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use nix::errno::Errno;
use nix::sys::epoll::{Epoll, EpollCreateFlags, EpollEvent, EpollFlags};
use nix::sys::eventfd::{EfdFlags, EventFd};
use nix::sys::time::TimeSpec;
use nix::sys::timerfd::{ClockId, Expiration, TimerFd, TimerFlags, TimerSetTimeFlags};
use tokio::sync::mpsc;

use super::quiet::{Dropping, Quiet};
use super::{KernelLockEvents, Record};

/// The least time between two drains after a wake-up by the rings.
pub(crate) const PACE: Duration = Duration::from_millis(1);

/// The follow-up drain after a nudge: the flock after an open, a dying
/// process's unlocks after its closes, come within microseconds. Two
/// reorder windows: the records stamped up to a window after the nudge
/// pass at this one drain ([`super::stream`] passes only those stamped a
/// window before a drain began) — at one window, the burst's own records
/// were always a few microseconds too young, and a second drain was owed
/// (a wake-up more per burst, for the same moment of passing).
pub(crate) const FOLLOW_UP: Duration =
    Duration::from_micros(2 * super::stream::REORDER_WINDOW.as_micros() as u64);

/// The longest a record waits in a ring when nothing nudges, while a
/// waiter waits or within [`ACTIVE_SPELL`] of unannounced records.
pub(crate) const BACKSTOP: Duration = Duration::from_millis(10);

/// How long after a drain nobody asked for found records the backstop
/// runs every [`BACKSTOP`].
pub(crate) const ACTIVE_SPELL: Duration = Duration::from_secs(1);

/// The backstop when nothing comes unannounced and no waiter waits.
pub(crate) const IDLE_BACKSTOP: Duration = Duration::from_secs(1);

/// The most waiters [`Waiters`] keeps apart; past that it forgets them
/// and says some wait (the backstop stays short for an active spell).
const MAX_WAITERS: usize = 4_096;

/// [`super::Options::wake_every`] for a reader that is nudged: a quarter
/// of the default ring (about 2,000 samples), so a storm wakes it well
/// before the ring is full.
pub const WAKE_EVERY: u32 = 512;

pub(crate) use super::quiet::QuietFiles;

/// One drain: when it began, and what it read (never empty).
type Batch = (u64, Vec<Record>);

/// Tells the reader to drain [`FOLLOW_UP`] from now: the first
/// nudge since the last drain arms a one-shot timer, the others do
/// nothing (a burst of a thousand inotify events is one syscall, one
/// wake-up of the reader, one drain that reads the whole burst).
#[derive(Clone)]
pub struct Nudge(Arc<NudgeState>);

/// What a [`Nudge`] shares with the reader.
struct NudgeState {
    /// Readable while a drain is asked at once and not yet answered (a
    /// nudge whose timer could not be armed).
    fd: EventFd,
    /// Armed by the first nudge since the last drain; readable `delay`
    /// after it.
    timer: TimerFd,
    /// The timer is armed (not disarmed since): a drain disarms it only
    /// then (one system call less at every other drain).
    armed: AtomicBool,
    /// How long after a nudge its drain begins ([`FOLLOW_UP`]).
    delay: Duration,
    /// A drain is asked and not yet begun (the timer was armed, or the
    /// eventfd written).
    asked: AtomicBool,
    /// Since when activity waits that the engine drains for itself
    /// ([`Nudge::later`]), until a drain begins.
    later: Mutex<Option<std::time::Instant>>,
    /// Told when a drain that answers the nudges begins.
    answered: tokio::sync::Notify,
}

impl Nudge {
    /// A nudge with nothing asked yet, whose drains begin `delay` after
    /// the nudges they answer.
    fn new(delay: Duration) -> io::Result<Self> {
        let fd = EventFd::from_value_and_flags(0, EfdFlags::EFD_CLOEXEC | EfdFlags::EFD_NONBLOCK)
            .map_err(io::Error::from)?;
        let timer = TimerFd::new(
            ClockId::CLOCK_MONOTONIC,
            TimerFlags::TFD_CLOEXEC | TimerFlags::TFD_NONBLOCK,
        )
        .map_err(io::Error::from)?;
        Ok(Self(Arc::new(NudgeState {
            fd,
            timer,
            armed: AtomicBool::new(false),
            delay,
            asked: AtomicBool::new(false),
            later: Mutex::new(None),
            answered: tokio::sync::Notify::new(),
        })))
    }

    /// Asks for a drain [`FOLLOW_UP`] from now (a no-op when one is asked
    /// and not yet begun): the flock after an open, a dying process's
    /// unlocks after its closes, come within microseconds of the inotify
    /// event that nudges, so one drain reads the burst.
    pub fn now(&self) {
        if !self.0.asked.swap(true, Ordering::AcqRel) {
            self.0.armed.store(true, Ordering::Release);
            let armed = self.0.timer.set(
                Expiration::OneShot(TimeSpec::from_duration(self.0.delay)),
                TimerSetTimeFlags::empty(),
            );
            if armed.is_err() {
                // Never left unanswered: at once, then.
                let _ = self.0.fd.write(1);
            }
        }
    }

    /// Says that activity began (an open, a creation, a write) that the
    /// engine drains for itself, in place, a coalescing window later
    /// ([`super::live_table::EventStream::drain_now`]): no timer armed,
    /// no wake-up of its own — the judgement that wakes the engine then
    /// reads the rings. Until a drain begins the drain counts as asked
    /// (the inotify gate stays shut: [`Self::answered_all`]). A no-op
    /// while a drain is asked, or activity waits already.
    pub fn later(&self) {
        if self.0.asked.load(Ordering::Acquire) {
            return;
        }
        let mut later = self.0.later.lock().unwrap_or_else(PoisonError::into_inner);
        if later.is_none() {
            *later = Some(std::time::Instant::now());
        }
    }

    /// Since when activity told by [`Self::later`] waits for a drain.
    pub fn later_since(&self) -> Option<std::time::Instant> {
        *self.0.later.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The reader's side, before it drains: every nudge so far is answered
    /// by that drain; the next one writes again. (The counter is read
    /// first, when `asked_readable` says there is one: a nudge between the
    /// read and the reset found the flag set and wrote nothing, and the
    /// drain that follows answers it.)
    fn answered(&self, asked_readable: bool) {
        // Read only when it was seen readable (a read of an empty eventfd
        // is a system call for nothing); one written after it was looked
        // at wakes the reader again, for a drain more.
        if asked_readable {
            let _ = self.0.fd.read();
        }
        // Disarmed and read at once (a drain in place may answer a nudge
        // before its time: it answers that nudge too).
        if self.0.armed.swap(false, Ordering::AcqRel) {
            let _ = self.0.timer.unset();
        }
        self.0.asked.store(false, Ordering::Release);
        *self.0.later.lock().unwrap_or_else(PoisonError::into_inner) = None;
        self.0.answered.notify_waiters();
    }

    /// Resolves once no drain asked for is still to begin: at once when
    /// none is asked (nor activity waits, [`Self::later`]), else when the
    /// drain that answers it begins.
    pub async fn answered_all(&self) {
        let answered = self.0.answered.notified();
        tokio::pin!(answered);
        // Listening before the flag is read: an answer in between is heard.
        answered.as_mut().enable();
        if self.0.asked.load(Ordering::Acquire) || self.later_since().is_some() {
            answered.await;
        }
    }

    /// The eventfd and the timer the reader polls.
    fn as_fds(&self) -> [BorrowedFd<'_>; 2] {
        [self.0.fd.as_fd(), self.0.timer.as_fd()]
    }
}

/// A [`KernelLockEvents`] whose records can be awaited: drained by a task
/// on the runtime that makes it (see the module doc).
pub struct AsyncKernelLockEvents {
    reader: Arc<Mutex<KernelLockEvents>>,
    batches: mpsc::UnboundedReceiver<Batch>,
    nudge: Nudge,
    quiet: QuietFiles,
    /// What every drain keeps, the task's and one in place alike.
    pacing: Arc<Mutex<Pacing>>,
    /// Tells the task that a drain in place moved what it waits for.
    repace: Arc<tokio::sync::Notify>,
}

impl AsyncKernelLockEvents {
    /// Starts the task that drains `events`, on the current runtime
    /// (which must have its I/O and time drivers).
    pub fn new(events: KernelLockEvents) -> io::Result<Self> {
        let reader = Arc::new(Mutex::new(events));
        let nudge = Nudge::new(FOLLOW_UP)?;
        let waits = Waits::new(&reader, &nudge)?;
        let (sender, batches) = mpsc::unbounded_channel();
        let quiet = QuietFiles::default();
        let pacing = Arc::new(Mutex::new(Pacing::new(quiet.clone())));
        let repace = Arc::new(tokio::sync::Notify::new());
        let task = Task {
            reader: reader.clone(),
            nudge: nudge.clone(),
            quiet: quiet.clone(),
            pacing: pacing.clone(),
            repace: repace.clone(),
        };
        tokio::spawn(async move { drain_paced(&task, &sender, waits).await });
        Ok(Self {
            reader,
            batches,
            nudge,
            quiet,
            pacing,
            repace,
        })
    }

    /// The files whose records this reader owes no drain (see
    /// [`QuietFiles`]).
    pub fn quiet_files(&self) -> QuietFiles {
        self.quiet.clone()
    }

    /// What asks this reader to drain now.
    pub fn nudge(&self) -> Nudge {
        self.nudge.clone()
    }

    /// Waits until the rings hold records, then appends all of them to
    /// `out` (in time order across CPUs within each drain) and returns how
    /// many (at least 1).
    #[cfg(test)]
    pub(crate) async fn next_batch(&mut self, out: &mut Vec<Record>) -> io::Result<usize> {
        let before = out.len();
        self.next_batch_stamped(out).await?;
        Ok(out.len() - before)
    }

    /// [`Self::next_batch`], and the `CLOCK_MONOTONIC` time (ns) taken
    /// just before the latest drain it hands over read the first ring:
    /// every sample stamped well before it was in a ring by then, so it
    /// is in this batch or an earlier one (see [`super::stream`]'s reorder
    /// window).
    pub(crate) async fn next_batch_stamped(&mut self, out: &mut Vec<Record>) -> io::Result<u64> {
        let Some((mut began, records)) = self.batches.recv().await else {
            return Err(io::Error::other("the kernel lock events' reader stopped"));
        };
        out.extend(records);
        // Drains that queued meanwhile: one batch (their order kept).
        while let Ok((later, records)) = self.batches.try_recv() {
            began = later;
            out.extend(records);
        }
        Ok(began)
    }

    /// Drains the rings now, in place — on the caller's thread, no
    /// wake-up of the task, no system call but the nudge's timer's
    /// disarming — appending the batches the task handed over before and
    /// then this drain's records (even none) to `out`; returns the time
    /// this drain began. Every record stamped well before that time is in
    /// `out` or was handed over before. Every nudge so far is answered.
    pub(crate) async fn flush_stamped(&mut self, out: &mut Vec<Record>) -> io::Result<u64> {
        // The task drains and hands over with this lock held: every batch
        // of a drain begun before this one is in the channel by now.
        let mut pacing = self.pacing.lock().unwrap_or_else(PoisonError::into_inner);
        while let Ok((_, records)) = self.batches.try_recv() {
            out.extend(records);
        }
        if self.batches.is_closed() && self.batches.is_empty() {
            return Err(io::Error::other("the kernel lock events' reader stopped"));
        }
        self.nudge.answered(false);
        let woke = Woke {
            nudged: true,
            ..Woke::default()
        };
        let drained = pacing.drain(&self.reader, &self.quiet, woke);
        drop(pacing);
        out.extend(drained.records);
        // The drain owed, the backstop: the task looks at them again.
        self.repace.notify_one();
        Ok(drained.began)
    }

    /// The reader (counters, devices), for as long as the guard lives:
    /// the drain waits meanwhile.
    pub fn reader(&self) -> MutexGuard<'_, KernelLockEvents> {
        self.reader.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Drop for AsyncKernelLockEvents {
    /// Ends the task at once: it finds the receiver closed.
    fn drop(&mut self) {
        self.batches.close();
    }
}

/// What the reader waits on, as one fd the runtime's reactor watches: an
/// epoll (level-triggered) of the rings' epoll, the nudge's eventfd and
/// timer, and the reader's own timer (the backstop and the drain owed).
/// The fds it names live as long as it does: it holds the reader and the
/// nudge.
struct Waits {
    /// The epoll, registered with the reactor.
    ready: tokio::io::unix::AsyncFd<WaitSet>,
    /// The reader's own timer.
    timeout: TimerFd,
    /// When the reader's own timer is set to fire, unless it has.
    armed_for: Option<std::time::Instant>,
    _nudge: Nudge,
    _reader: Arc<Mutex<KernelLockEvents>>,
}

/// The epoll of the rings, the nudge's eventfd and timer, and the
/// reader's timer, each told apart by its token: one `epoll_wait` says
/// which are readable.
struct WaitSet(Epoll);

impl AsRawFd for WaitSet {
    fn as_raw_fd(&self) -> std::os::fd::RawFd {
        self.0.0.as_raw_fd()
    }
}

impl AsFd for WaitSet {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.0.0.as_fd()
    }
}

/// The tokens of [`WaitSet`]'s fds.
const RINGS: u64 = 0;
const ASKED: u64 = 1;
const FOLLOW_UP_DUE: u64 = 2;
const TIMED_OUT: u64 = 3;

impl WaitSet {
    /// What is readable now (level-triggered: each readable fd is
    /// listed, however often it was before).
    fn readable(&self) -> Result<Woke, Errno> {
        let mut events = [EpollEvent::empty(); 4];
        let count = match self
            .0
            .wait(&mut events, nix::sys::epoll::EpollTimeout::ZERO)
        {
            Ok(count) => count,
            Err(Errno::EINTR) => 0,
            Err(errno) => return Err(errno),
        };
        let mut woke = Woke::default();
        for event in &events[..count] {
            match event.data() {
                RINGS => woke.rings = true,
                ASKED => {
                    woke.nudged = true;
                    woke.asked = true;
                }
                FOLLOW_UP_DUE => woke.nudged = true,
                _ => woke.timed_out = true,
            }
        }
        Ok(woke)
    }
}

impl Waits {
    /// Puts the rings of `reader`, the fds of `nudge` and a timer of its
    /// own in one epoll, registered with the current runtime.
    fn new(reader: &Arc<Mutex<KernelLockEvents>>, nudge: &Nudge) -> io::Result<Self> {
        let epoll = Epoll::new(EpollCreateFlags::EPOLL_CLOEXEC).map_err(io::Error::from)?;
        let timeout = TimerFd::new(
            ClockId::CLOCK_MONOTONIC,
            TimerFlags::TFD_CLOEXEC | TimerFlags::TFD_NONBLOCK,
        )
        .map_err(io::Error::from)?;
        let rings = reader
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_raw_fd();
        // SAFETY: the rings' epoll fd is open while the reader lives,
        // which `_reader` holds.
        let rings_fd = unsafe { BorrowedFd::borrow_raw(rings) };
        let [asked, follow_up] = nudge.as_fds();
        for (fd, token) in [
            (rings_fd, RINGS),
            (asked, ASKED),
            (follow_up, FOLLOW_UP_DUE),
            (timeout.as_fd(), TIMED_OUT),
        ] {
            epoll
                .add(fd, EpollEvent::new(EpollFlags::EPOLLIN, token))
                .map_err(io::Error::from)?;
        }
        // SAFETY: the AsyncFd owns the epoll: open, and the same, for as
        // long as it lives.
        let ready = unsafe {
            tokio::io::unix::AsyncFd::register_with_interest(
                WaitSet(epoll),
                tokio::io::Interest::READABLE,
            )
        }
        .map_err(io::Error::from)?;
        Ok(Self {
            ready,
            timeout,
            armed_for: None,
            _nudge: nudge.clone(),
            _reader: reader.clone(),
        })
    }

    /// Waits until the rings or the nudge are readable, or `timeout`
    /// passes (then nothing is said to have woken it). A backstop
    /// (`Timing::Backstop`) may end the wait up to half `timeout` early:
    /// the timer set at an earlier wait for a time in that span is left
    /// as it is (under a churn the one-second backstop, set again at
    /// every drain, was a system call per drain for nothing). A drain
    /// owed (`Timing::Exact`) never begins early: it must come a whole
    /// reorder window after its records. Never later than `timeout`.
    async fn wait(&mut self, timeout: Duration, timing: Timing) -> io::Result<Woke> {
        let now = std::time::Instant::now();
        let due = now + timeout;
        let keep = timing == Timing::Backstop
            && self
                .armed_for
                .is_some_and(|armed| armed > now && armed <= due && armed + timeout / 2 >= due);
        if !keep {
            self.timeout
                .set(
                    Expiration::OneShot(TimeSpec::from_duration(
                        timeout.max(Duration::from_nanos(1)),
                    )),
                    TimerSetTimeFlags::empty(),
                )
                .map_err(io::Error::from)?;
            self.armed_for = Some(due);
        }
        loop {
            let mut guard = self.ready.readable().await?;
            let woke = self.ready.get_ref().readable()?;
            if woke.rings || woke.nudged || woke.timed_out {
                return Ok(woke);
            }
            // Nothing readable: wait for the next wake-up (the epoll is
            // level-triggered, so whatever becomes readable makes one).
            guard.clear_ready();
        }
    }
}

/// How exactly [`Waits::wait`] keeps its timeout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Timing {
    /// A backstop: it may come up to half its wait early.
    Backstop,
    /// A drain owed: never early.
    Exact,
}

/// Why the thread woke.
#[derive(Debug, Clone, Copy, Default)]
struct Woke {
    /// The kernel woke it (a ring holds `wake_every` new samples).
    rings: bool,
    /// Someone nudged.
    nudged: bool,
    /// The nudge's eventfd was readable (a flush, or a nudge whose timer
    /// could not be armed).
    asked: bool,
    /// The reader's own timer fired.
    timed_out: bool,
}

/// What the reader's task shares with a drain in place.
struct Task {
    reader: Arc<Mutex<KernelLockEvents>>,
    nudge: Nudge,
    quiet: QuietFiles,
    pacing: Arc<Mutex<Pacing>>,
    repace: Arc<tokio::sync::Notify>,
}

/// What every drain keeps, whoever makes it (the task, or the engine in
/// place: [`AsyncKernelLockEvents::flush_stamped`]).
struct Pacing {
    /// The busiest quiet files dropped, and the claim files readmitted.
    dropping: Dropping,
    /// Until when the backstop stays short: records came unannounced.
    active_until: Option<std::time::Instant>,
    /// The waiters the events told of.
    waiters: Waiters,
    /// The drain owed to the records handed over: one that begins at
    /// least the reorder window after the newest of them
    /// (`CLOCK_MONOTONIC` ns), handed over even if empty, so that they
    /// pass without waiting for the next flock.
    owed: Option<u64>,
}

/// One drain's outcome.
struct Drained {
    /// When it began (`CLOCK_MONOTONIC` ns).
    began: u64,
    /// What it read.
    records: Vec<Record>,
    /// It pays the drain owed: handed over even if empty.
    paid: bool,
}

impl Pacing {
    fn new(quiet: QuietFiles) -> Self {
        Self {
            dropping: Dropping::new(quiet),
            active_until: None,
            waiters: Waiters::default(),
            owed: None,
        }
    }

    /// How long the task waits, and how exactly.
    fn wait(&self) -> (Duration, Timing) {
        let now = std::time::Instant::now();
        let mut timeout =
            if self.waiters.any() || self.active_until.is_some_and(|until| now < until) {
                BACKSTOP
            } else {
                IDLE_BACKSTOP
            };
        let mut timing = Timing::Backstop;
        if let Some(at) = self.owed {
            let wait = Duration::from_nanos(at.saturating_sub(super::event::monotonic_now()));
            timeout = timeout.min(wait);
            timing = Timing::Exact;
        }
        (timeout, timing)
    }

    /// Drains `reader` (woken as `woke` says), keeping the pacing.
    fn drain(
        &mut self,
        reader: &Mutex<KernelLockEvents>,
        quiet: &QuietFiles,
        woke: Woke,
    ) -> Drained {
        let began = super::event::monotonic_now();
        let mut records = Vec::new();
        {
            let mut reader = reader.lock().unwrap_or_else(PoisonError::into_inner);
            // Before the drain: its batch ends with the record that says
            // so, after the filter samples the file again.
            let readmitted = self.dropping.readmit(&mut reader);
            reader.drain(&mut records);
            self.dropping.count(&records, &mut reader);
            records.extend(readmitted);
        }
        let urgent = {
            let quiet = super::quiet::read(quiet);
            if self.waiters.follow(&records, &quiet) {
                self.active_until = Some(std::time::Instant::now() + ACTIVE_SPELL);
            }
            Urgent::of(&records, &quiet)
        };
        let paid = self.owed.is_some_and(|at| began >= at);
        // A drain only the backstop asked for that found records: events
        // come that no nudge announces.
        let asked = woke.nudged || woke.rings || paid;
        if urgent.any && !asked {
            self.active_until = Some(std::time::Instant::now() + ACTIVE_SPELL);
        }
        if paid {
            self.owed = None;
        }
        // Owed to the records someone waits for, not to quiet ones.
        if let Some(newest) = urgent.newest {
            let due = newest.saturating_add(super::stream::REORDER_WINDOW.as_nanos() as u64);
            if due > began {
                self.owed = Some(self.owed.map_or(due, |at| at.max(due)));
            }
        }
        Drained {
            began,
            records,
            paid,
        }
    }
}

/// The reader: wait (rings, nudge, the drain owed, or the timeout),
/// drain, hand the batch over; until the receiver is gone or the rings
/// fail. A drain in place meanwhile has it look at its wait again.
async fn drain_paced(task: &Task, sender: &mpsc::UnboundedSender<Batch>, mut waits: Waits) {
    let pacing = || task.pacing.lock().unwrap_or_else(PoisonError::into_inner);
    loop {
        let (timeout, timing) = pacing().wait();
        let woke = tokio::select! {
            biased;
            () = sender.closed() => return,
            () = task.repace.notified() => continue,
            woke = waits.wait(timeout, timing) => woke,
        };
        let woke = match woke {
            Ok(woke) => woke,
            Err(error) => {
                tracing::warn!(%error, "waiting for the kernel's lock events failed");
                return;
            }
        };
        {
            // Drained and handed over under the lock: a drain in place
            // takes what is in the channel before it drains.
            let mut pacing = pacing();
            if woke.nudged {
                task.nudge.answered(woke.asked);
            }
            let drained = pacing.drain(&task.reader, &task.quiet, woke);
            if (drained.paid || !drained.records.is_empty())
                && sender.send((drained.began, drained.records)).is_err()
            {
                return;
            }
        }
        // A storm in the rings is read in batches, PACE apart.
        if woke.rings && !woke.nudged {
            tokio::time::sleep(PACE).await;
        }
    }
}

/// The waiters the events told of (by open file description), on files
/// that are not quiet, not granted, refused nor closed yet: a grant may
/// come unannounced.
#[derive(Debug, Default)]
struct Waiters(std::collections::HashSet<u64>);

impl Waiters {
    /// Follows `records`; true when it had to forget waiters (too many,
    /// or a loss): the backstop stays short for an active spell.
    fn follow(&mut self, records: &[Record], quiet: &Quiet) -> bool {
        let mut forgot = false;
        for record in records {
            match record {
                Record::Lost(_) => {
                    forgot |= !self.0.is_empty();
                    self.0.clear();
                }
                Record::Event(event) if !quiet.contains(&event.file) => match event.kind {
                    super::event::LockKind::Waiting { .. } => {
                        if self.0.len() >= MAX_WAITERS {
                            self.0.clear();
                            forgot = true;
                        }
                        self.0.insert(event.owner);
                    }
                    super::event::LockKind::Taken { .. }
                    | super::event::LockKind::Refused { .. }
                    | super::event::LockKind::Unlocked { .. } => {
                        self.0.remove(&event.owner);
                    }
                    super::event::LockKind::Other { .. } => {}
                },
                Record::Event(_) | Record::Readmitted(_) => {}
            }
        }
        forgot
    }

    /// Whether a waiter waits.
    fn any(&self) -> bool {
        !self.0.is_empty()
    }
}

/// What in a drain someone waits for: a lost record, or an event on a
/// file that is not quiet.
#[derive(Debug, Default)]
struct Urgent {
    /// Any record is.
    any: bool,
    /// The newest such event's stamp.
    newest: Option<u64>,
}

impl Urgent {
    /// Looks through `records`.
    fn of(records: &[Record], quiet: &Quiet) -> Self {
        let mut urgent = Self::default();
        for record in records {
            match record {
                Record::Lost(_) | Record::Readmitted(_) => urgent.any = true,
                Record::Event(event) if !quiet.contains(&event.file) => {
                    urgent.any = true;
                    urgent.newest = urgent.newest.max(Some(event.at));
                }
                Record::Event(_) => {}
            }
        }
        urgent
    }
}

#[cfg(test)]
mod tests {
    use nix::poll::{PollFd, PollFlags};

    use super::*;

    /// Activity told with `later` arms nothing (the engine's judgement
    /// drains for it) but counts as asked: the inotify gate waits for
    /// the drain that answers it, a nudge at once still arms the timer,
    /// and any drain answers both.
    #[tokio::test]
    async fn later_arms_nothing_but_waits_for_the_drain_that_answers_it() {
        let nudge = Nudge::new(Duration::from_millis(1)).expect("nudge");
        nudge.later();
        let since = nudge.later_since().expect("activity waits");
        nudge.later();
        assert_eq!(nudge.later_since(), Some(since), "the first one counts");
        assert!(nudge.0.timer.get().expect("timer").is_none(), "no timer");
        assert!(!wakes_now(&nudge), "no wake-up of its own");
        let gate = tokio::time::timeout(Duration::from_millis(20), nudge.answered_all()).await;
        assert!(gate.is_err(), "the gate waits for the drain");
        nudge.now();
        assert!(
            nudge.0.timer.get().expect("timer").is_some(),
            "at once: armed"
        );
        nudge.answered(false);
        assert_eq!(nudge.later_since(), None, "answered");
        nudge.answered_all().await;
        // Asked at once already: `later` adds nothing to wait for.
        nudge.now();
        nudge.later();
        assert_eq!(nudge.later_since(), None);
        nudge.answered(false);
    }

    /// Whether the reader's poll would wake now: the nudge's eventfd or
    /// its timer readable.
    fn wakes_now(nudge: &Nudge) -> bool {
        let [asked, timer] = nudge.as_fds();
        let mut fds = [
            PollFd::new(asked, PollFlags::POLLIN),
            PollFd::new(timer, PollFlags::POLLIN),
        ];
        nix::poll::poll(&mut fds, nix::poll::PollTimeout::ZERO).expect("poll") > 0
    }

    /// A drain's events of quiet files owe it nothing: no later drain, no
    /// active spell; any other event, or a loss, does.
    #[test]
    fn only_events_of_files_not_quiet_are_urgent() {
        use crate::liveness::kernel::event::{LockEvent, LockKind};
        use crate::liveness::proc_locks::FileId;
        let event = |inode, at| {
            Record::Event(LockEvent {
                at,
                file: FileId {
                    major: 8,
                    minor: 1,
                    inode,
                },
                pid: 1,
                owner: 1,
                kind: LockKind::Taken { exclusive: true },
            })
        };
        let mut quiet = Quiet::default();
        quiet.insert(FileId {
            major: 8,
            minor: 1,
            inode: 7,
        });
        let foreign = Urgent::of(&[event(7, 10), event(7, 30)], &quiet);
        assert!(!foreign.any && foreign.newest.is_none(), "{foreign:?}");
        let mixed = Urgent::of(&[event(7, 10), event(9, 20), event(7, 30)], &quiet);
        assert!(mixed.any);
        assert_eq!(mixed.newest, Some(20), "the newest event not quiet");
        let lost = Urgent::of(&[event(7, 10), Record::Lost(3)], &quiet);
        assert!(lost.any && lost.newest.is_none());
    }

    /// A waiter keeps the backstop short until it is granted, refused or
    /// closed; a foreign file's waiter does not; a loss or too many
    /// waiters forget them and say so.
    #[test]
    fn waiters_are_followed_until_granted_refused_or_closed() {
        use crate::liveness::kernel::event::{LockEvent, LockKind};
        use crate::liveness::proc_locks::FileId;
        let file = |inode| FileId {
            major: 8,
            minor: 1,
            inode,
        };
        let event = |inode, owner, kind| {
            Record::Event(LockEvent {
                at: 1,
                file: file(inode),
                pid: 1,
                owner,
                kind,
            })
        };
        let waiting = LockKind::Waiting { exclusive: true };
        let mut quiet = Quiet::default();
        quiet.insert(file(7));
        let mut waiters = Waiters::default();
        assert!(!waiters.follow(&[event(7, 1, waiting)], &quiet));
        assert!(!waiters.any(), "a foreign file's waiter is not followed");
        for end in [
            LockKind::Taken { exclusive: true },
            LockKind::Refused { exclusive: true },
            LockKind::Unlocked { at_close: true },
        ] {
            waiters.follow(&[event(9, 2, waiting)], &quiet);
            assert!(waiters.any());
            waiters.follow(&[event(9, 3, end)], &quiet);
            assert!(waiters.any(), "another description's {end:?}");
            waiters.follow(&[event(9, 2, end)], &quiet);
            assert!(!waiters.any(), "{end:?} ends the wait");
        }
        waiters.follow(&[event(9, 2, waiting)], &quiet);
        assert!(waiters.follow(&[Record::Lost(1)], &quiet), "a loss forgets");
        assert!(!waiters.any());
        let many: Vec<Record> = (0..=MAX_WAITERS as u64)
            .map(|owner| event(9, owner, waiting))
            .collect();
        assert!(waiters.follow(&many, &quiet), "too many: forgotten, said");
    }

    /// A nudge asks for a drain its delay later, never at once (that
    /// drain reads the flock after the open that nudged); the nudges
    /// before it begins do not move it; a flush asks at once.
    #[test]
    fn a_nudge_asks_for_one_drain_its_delay_later() {
        let nudge = Nudge::new(Duration::from_secs(3600)).expect("nudge");
        nudge.now();
        assert!(
            !wakes_now(&nudge),
            "a nudge does not wake the reader at once"
        );
        let armed = nudge.0.timer.get().expect("timer").expect("armed");
        std::thread::sleep(Duration::from_millis(20));
        nudge.now();
        let still = nudge.0.timer.get().expect("timer").expect("armed");
        let left = |expiration| match expiration {
            Expiration::OneShot(left) => Duration::from(left),
            other => panic!("a one-shot timer, not {other:?}"),
        };
        assert!(left(still) < left(armed), "a later nudge did not re-arm");
        nudge.answered(false);
        assert!(!wakes_now(&nudge), "answered: nothing asked any more");
        assert!(nudge.0.timer.get().expect("timer").is_none(), "disarmed");

        let soon = Nudge::new(Duration::from_millis(1)).expect("nudge");
        soon.now();
        let mut fds = [PollFd::new(soon.as_fds()[1], PollFlags::POLLIN)];
        let ready = nix::poll::poll(&mut fds, nix::poll::PollTimeout::from(10_000u16));
        assert_eq!(ready, Ok(1), "the drain is asked once the delay passed");
        soon.answered(false);
        assert!(!wakes_now(&soon), "answered: nothing asked any more");
    }

    /// One look says which of the reader's fds are readable, each by its
    /// token: the nudge's timer once its delay passed, its eventfd once a
    /// flush is asked, the reader's own timer once its timeout passed —
    /// and nothing when none is.
    #[test]
    fn one_look_tells_each_readable_fd_apart() {
        let Some(_recording) = super::super::tests::may_open(
            "liveness::kernel::wait::tests::one_look_tells_each_readable_fd_apart",
        ) else {
            return;
        };
        let events = KernelLockEvents::open(&[], &super::super::Options::default())
            .unwrap_or_else(|refused| panic!("{refused}"));
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let _entered = runtime.enter();
        let reader = Arc::new(Mutex::new(events));
        let nudge = Nudge::new(Duration::from_millis(1)).expect("nudge");
        let mut waits = Waits::new(&reader, &nudge).expect("waits");
        let look = || waits.ready.get_ref().readable().expect("epoll_wait");
        let woke = look();
        assert!(!woke.nudged && !woke.asked && !woke.timed_out, "{woke:?}");
        nudge.now();
        std::thread::sleep(Duration::from_millis(20));
        let woke = look();
        assert!(woke.nudged && !woke.asked && !woke.timed_out, "{woke:?}");
        nudge.answered(woke.asked);
        // The eventfd, written when a nudge's timer cannot be armed.
        nudge.0.fd.write(1).expect("eventfd");
        let woke = look();
        assert!(woke.nudged && woke.asked, "{woke:?}");
        nudge.answered(woke.asked);
        let woke = look();
        assert!(!woke.nudged && !woke.asked, "{woke:?}");
        let timed = runtime
            .block_on(tokio::time::timeout(
                Duration::from_secs(5),
                waits.wait(Duration::from_millis(2), Timing::Exact),
            ))
            .expect("the timeout wakes it")
            .expect("waited");
        assert!(timed.timed_out && !timed.nudged, "{timed:?}");
    }

    /// Whoever waits for the drain a nudge asked for (the engine's
    /// inotify gate) is told when it begins, and at once when nothing is
    /// asked.
    #[tokio::test(flavor = "current_thread")]
    async fn the_drain_asked_for_is_told_when_it_begins() {
        let nudge = Nudge::new(Duration::from_secs(3600)).expect("nudge");
        let at_once = tokio::time::timeout(Duration::from_secs(5), nudge.answered_all()).await;
        assert!(at_once.is_ok(), "nothing asked: answered at once");
        nudge.now();
        let waits = nudge.answered_all();
        tokio::pin!(waits);
        let early = tokio::time::timeout(Duration::from_millis(20), waits.as_mut()).await;
        assert!(early.is_err(), "asked and not begun: still waiting");
        let drain = nudge.clone();
        tokio::spawn(async move { drain.answered(false) });
        tokio::time::timeout(Duration::from_secs(5), waits)
            .await
            .expect("told when the drain begins");
    }
}
