//! Waiting for the kernel's lock events from async code, without a
//! wake-up per event.
//!
//! Each event written into a ring wakes whoever waits on the rings' epoll.
//! A tokio reactor waiting on it would be woken once per flock on the
//! filesystem — thousands of times a second on a busy host, most of them
//! for files that are not claims — and each of those wake-ups is CPU the
//! flocking processes compete with. So a thread of its own waits instead,
//! and paces itself: after each drain it sleeps [`PACE`] before it waits
//! again. While it sleeps nobody waits on the epoll, the kernel wakes
//! nobody, and a burst's events gather in the rings to be read as one
//! batch. An event after a quiet spell is read at once; under a storm a
//! batch is at most [`PACE`] older than it would be, and the reader wakes
//! at most `1 s / PACE` times a second however many events come.
//!
//! Invariants: every record drained is handed over, in drain order, each
//! batch with the `CLOCK_MONOTONIC` time taken just before its drain began
//! (see [`super::stream`]); the thread ends within [`POLL_TIMEOUT`] of the
//! [`AsyncKernelLockEvents`] being dropped, and the rings close with it.

use std::io;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::sync::mpsc;

use super::{KernelLockEvents, Record};

/// The least time between two drains.
pub const PACE: Duration = Duration::from_millis(1);

/// How long the thread waits on the rings before it looks whether it is
/// still wanted.
pub const POLL_TIMEOUT: Duration = Duration::from_millis(250);

/// One drain: when it began, and what it read (never empty).
type Batch = (u64, Vec<Record>);

/// A [`KernelLockEvents`] whose records can be awaited: drained by a
/// thread of its own, paced (see the module doc).
pub struct AsyncKernelLockEvents {
    reader: Arc<Mutex<KernelLockEvents>>,
    batches: mpsc::UnboundedReceiver<Batch>,
}

impl AsyncKernelLockEvents {
    /// Starts the thread that drains `events`.
    pub fn new(events: KernelLockEvents) -> io::Result<Self> {
        let reader = Arc::new(Mutex::new(events));
        let (sender, batches) = mpsc::unbounded_channel();
        let drained = reader.clone();
        std::thread::Builder::new()
            .name("locktop-lock-events".into())
            .spawn(move || drain_paced(&drained, &sender))?;
        Ok(Self { reader, batches })
    }

    /// Waits until the rings hold records, then appends all of them to
    /// `out` (in time order across CPUs within each drain) and returns how
    /// many (at least 1).
    pub async fn next_batch(&mut self, out: &mut Vec<Record>) -> io::Result<usize> {
        let before = out.len();
        self.next_batch_stamped(out).await?;
        Ok(out.len() - before)
    }

    /// [`Self::next_batch`], and the `CLOCK_MONOTONIC` time (ns) taken
    /// just before the latest drain it hands over read the first ring:
    /// every sample stamped well before it was in a ring by then, so it
    /// is in this batch or an earlier one (see [`super::stream`]'s reorder
    /// window).
    pub async fn next_batch_stamped(&mut self, out: &mut Vec<Record>) -> io::Result<u64> {
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

    /// The reader (counters, devices), for as long as the guard lives:
    /// the drain waits meanwhile.
    pub fn reader(&self) -> MutexGuard<'_, KernelLockEvents> {
        self.reader.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The thread: wait on the rings, drain them, hand the batch over, sleep
/// [`PACE`]; until the receiver is gone or the rings fail.
fn drain_paced(reader: &Mutex<KernelLockEvents>, sender: &mpsc::UnboundedSender<Batch>) {
    let lock = || reader.lock().unwrap_or_else(PoisonError::into_inner);
    // The epoll fd stays open for as long as `reader` lives, which this
    // thread's Arc guarantees; waiting needs no lock (a device change may
    // run meanwhile).
    let epoll = std::os::fd::AsRawFd::as_raw_fd(&*lock());
    loop {
        if sender.is_closed() {
            return;
        }
        // SAFETY: `epoll` is the reader's epoll fd, which it opens once and
        // closes only when dropped; `reader` (borrowed from this thread's
        // Arc) outlives this loop.
        let fd = unsafe { std::os::fd::BorrowedFd::borrow_raw(epoll) };
        match super::wait_on(fd, POLL_TIMEOUT) {
            Ok(false) => continue,
            Ok(true) => {}
            Err(errno) => {
                tracing::warn!(%errno, "waiting for the kernel's lock events failed");
                return;
            }
        }
        let began = super::event::monotonic_now();
        let mut records = Vec::new();
        lock().drain(&mut records);
        if !records.is_empty() && sender.send((began, records)).is_err() {
            return;
        }
        std::thread::sleep(PACE);
    }
}
