//! A timer that wakes its task once, at the moment asked: a `timerfd`
//! in the runtime's reactor, for a deadline that moves with every event.
//!
//! tokio's timers sit in a hierarchical wheel whose second level has
//! 64 ms slots: a deadline past the current 64 ms block wakes the driver
//! at its slot's start, to move it one level down, then again at the
//! deadline. The follower's settle — due 50 ms after the last delta, so
//! moved later by every delta of a churn — thus woke `watch` at nearly
//! every block boundary to do nothing (36 of its 222 wake-ups under a
//! churn of 72 holds). A `timerfd` set to the deadline fires only at it,
//! to the microsecond, and moving it is one `timerfd_settime`; setting it
//! sooner than the runtime's next wake-up writes no eventfd either.
//!
//! Invariants: [`ExactTimer::until`] resolves no sooner than its deadline
//! on the monotonic clock (`CLOCK_MONOTONIC`, which [`Instant`] reads),
//! and within the kernel's timer slack after it while the runtime runs
//! the task; it is cancel-safe (a deadline asked again is not set again);
//! the timer is set only when the deadline asked differs from the one it
//! is set to. Not for code under tokio's paused test clock: this timer
//! follows the real one.

use std::io;
use std::os::fd::{AsFd, AsRawFd, RawFd};
use std::time::{Duration, Instant};

use nix::sys::time::TimeSpec;
use nix::sys::timerfd::{ClockId, Expiration, TimerFd, TimerFlags, TimerSetTimeFlags};
use tokio::io::unix::AsyncFd;

/// The timerfd as the reactor sees it.
struct TimerSource(TimerFd);

impl AsRawFd for TimerSource {
    fn as_raw_fd(&self) -> RawFd {
        self.0.as_fd().as_raw_fd()
    }
}

/// One deadline at a time, woken for exactly once.
pub struct ExactTimer {
    fd: AsyncFd<TimerSource>,
    /// The deadline the timer is set to (`None`: unset, or fired and
    /// read).
    set_to: Option<Instant>,
    /// How many times the timer was set (each a `timerfd_settime`).
    #[cfg(test)]
    pub(crate) sets: usize,
}

impl ExactTimer {
    /// An unset timer, registered with the current runtime's reactor (an
    /// error, never a panic, outside a runtime with I/O enabled).
    pub fn new() -> io::Result<Self> {
        tokio::runtime::Handle::try_current().map_err(io::Error::other)?;
        let timer = TimerFd::new(
            ClockId::CLOCK_MONOTONIC,
            TimerFlags::TFD_CLOEXEC | TimerFlags::TFD_NONBLOCK,
        )
        .map_err(io::Error::from)?;
        // SAFETY: the AsyncFd owns the timerfd, whose fd stays open and
        // the same for as long as it lives.
        let fd = unsafe {
            AsyncFd::register_with_interest(TimerSource(timer), tokio::io::Interest::READABLE)
        }?;
        Ok(Self {
            fd,
            set_to: None,
            #[cfg(test)]
            sets: 0,
        })
    }

    /// Resolves at `at` (at once when it has passed). Sets the timer only
    /// when `at` is not what it is set to already. A timer that cannot be
    /// set or read (never seen) leaves the wait to the runtime's timer.
    pub async fn until(&mut self, at: Instant) {
        loop {
            let now = Instant::now();
            if at <= now {
                return;
            }
            if self.set_to != Some(at) {
                if self.set(at - now).is_err() {
                    return tokio::time::sleep_until(at.into()).await;
                }
                self.count_set();
                self.set_to = Some(at);
            }
            let Ok(mut ready) = self.fd.readable().await else {
                return tokio::time::sleep_until(at.into()).await;
            };
            // The expiry count (8 bytes): read, it clears the readiness.
            let mut count = [0u8; 8];
            match nix::unistd::read(ready.get_inner().0.as_fd(), &mut count) {
                Ok(_) => self.set_to = None,
                // Set again since it fired: not due yet.
                Err(nix::errno::Errno::EAGAIN) => ready.clear_ready(),
                Err(_) => return tokio::time::sleep_until(at.into()).await,
            }
        }
    }

    /// Counts a setting, for tests (nothing otherwise).
    fn count_set(&mut self) {
        #[cfg(test)]
        {
            self.sets += 1;
        }
    }

    /// Sets the timer to fire `after` from now (never zero: that would
    /// disarm it).
    fn set(&self, after: Duration) -> nix::Result<()> {
        let after = after.max(Duration::from_nanos(1));
        self.fd.get_ref().0.set(
            Expiration::OneShot(TimeSpec::from_duration(after)),
            TimerSetTimeFlags::empty(),
        )
    }
}

/// Polls `future` once (so what it waits on is set) and drops it, as a
/// `select!` whose other branch won would: true when it was pending.
/// What a test of cancellation uses instead of racing a short timeout,
/// which a descheduled test thread loses.
#[cfg(test)]
pub(crate) async fn pending_once(future: impl std::future::Future<Output = ()>) -> bool {
    let mut future = std::pin::pin!(future);
    tokio::select! {
        biased;
        () = &mut future => false,
        () = std::future::ready(()) => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn it_resolves_no_sooner_than_its_deadline() {
        let mut timer = ExactTimer::new().unwrap();
        for wait in [1u64, 3, 7] {
            let at = Instant::now() + Duration::from_millis(wait);
            timer.until(at).await;
            assert!(Instant::now() >= at, "woke before {wait} ms");
        }
    }

    /// A deadline `timer` was asked for and dropped before it fired: the
    /// first of 5 ms, 50 ms, … from now still pending when polled once
    /// (a test thread descheduled past one finds it due, and tries the
    /// next: nothing here depends on how fast the machine is).
    async fn asked_and_dropped(timer: &mut ExactTimer) -> Instant {
        let mut margin = Duration::from_millis(5);
        loop {
            let at = Instant::now() + margin;
            if pending_once(timer.until(at)).await {
                return at;
            }
            margin *= 10;
        }
    }

    #[tokio::test]
    async fn a_deadline_moved_later_is_not_woken_for_at_the_old_one() {
        let mut timer = ExactTimer::new().unwrap();
        let early = asked_and_dropped(&mut timer).await;
        let later = early + Duration::from_millis(20);
        timer.until(later).await;
        assert!(Instant::now() >= later, "woke at the old deadline");
    }

    #[tokio::test]
    async fn a_deadline_asked_again_after_a_cancel_still_fires() {
        let mut timer = ExactTimer::new().unwrap();
        let at = asked_and_dropped(&mut timer).await;
        let sets = timer.sets;
        // Not set again (the same deadline), and it fires all the same.
        tokio::time::timeout(Duration::from_secs(5), timer.until(at))
            .await
            .expect("the deadline set before the cancel fired");
        assert!(Instant::now() >= at);
        assert_eq!(timer.sets, sets, "not set again for the same deadline");
    }

    #[test]
    fn outside_a_runtime_it_is_an_error_not_a_panic() {
        assert!(ExactTimer::new().is_err());
    }

    #[tokio::test]
    async fn a_passed_deadline_resolves_at_once() {
        let mut timer = ExactTimer::new().unwrap();
        let passed = Instant::now();
        // Bounded only so that a timer that never fires fails the test
        // instead of hanging it; how soon is not measured here.
        tokio::time::timeout(Duration::from_secs(5), timer.until(passed))
            .await
            .expect("a passed deadline resolves");
    }
}
