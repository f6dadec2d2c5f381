//! Waiting for the kernel's lock events on tokio: the reader's one fd (an
//! epoll of the per-CPU rings) registered with tokio's reactor.
//!
//! Invariant: [`AsyncKernelLockEvents::next_batch`] drains everything the
//! rings hold after each wake-up before it clears the readiness, so no
//! wake-up is lost (tokio keeps a readiness that arrived meanwhile).

use std::io;

use tokio::io::unix::AsyncFd;

use super::{KernelLockEvents, Record};

/// A [`KernelLockEvents`] whose records can be awaited.
pub struct AsyncKernelLockEvents {
    inner: AsyncFd<KernelLockEvents>,
}

impl AsyncKernelLockEvents {
    /// Registers `events` with the current tokio runtime (panics outside
    /// one, as tokio does).
    pub fn new(events: KernelLockEvents) -> io::Result<Self> {
        // SAFETY: `as_raw_fd` is the reader's epoll fd, which it owns, opens
        // once and closes only when dropped, so it stays the same open fd
        // for as long as the `AsyncFd` holds the reader.
        let inner = unsafe { AsyncFd::register(events) }.map_err(io::Error::from)?;
        Ok(Self { inner })
    }

    /// Waits until the rings hold records, then appends all of them to
    /// `out` (in time order across CPUs) and returns how many (at least 1).
    pub async fn next_batch(&mut self, out: &mut Vec<Record>) -> io::Result<usize> {
        loop {
            let mut guard = self.inner.readable_mut().await?;
            let appended = guard.get_inner_mut().drain(out);
            guard.clear_ready();
            if appended > 0 {
                return Ok(appended);
            }
        }
    }

    /// [`Self::next_batch`], and the `CLOCK_MONOTONIC` time (ns) taken
    /// just before the drain read the first ring: every sample stamped
    /// well before it was in a ring by then, so it is in this drain or an
    /// earlier one (see [`super::stream`]'s reorder window).
    pub async fn next_batch_stamped(&mut self, out: &mut Vec<Record>) -> io::Result<u64> {
        loop {
            let mut guard = self.inner.readable_mut().await?;
            let began = super::event::monotonic_now();
            let appended = guard.get_inner_mut().drain(out);
            guard.clear_ready();
            if appended > 0 {
                return Ok(began);
            }
        }
    }

    /// The reader (counters, devices).
    pub fn get_ref(&self) -> &KernelLockEvents {
        self.inner.get_ref()
    }

    /// The reader, to change its devices.
    pub fn get_mut(&mut self) -> &mut KernelLockEvents {
        self.inner.get_mut()
    }

    /// The reader, no longer registered.
    pub fn into_inner(self) -> KernelLockEvents {
        self.inner.into_inner()
    }
}
