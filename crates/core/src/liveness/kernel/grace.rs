//! When every tracepoint hit in flight at a moment has finished: the
//! kernel's read-side grace period, waited for on a thread of its own
//! (never on the runtime that reads the events).
//!
//! A hit of the tracepoint walks the CPU's list of perf events with
//! preemption disabled. A walk that began before an event was added does
//! not see it, and one that stands on a neighbour of an event removed
//! meanwhile may not reach the events after it: so an event may be closed
//! without losing a flock only once every walk that began before its
//! successor was added is over. The kernel offers that wait as an RCU grace
//! period, which `membarrier(MEMBARRIER_CMD_GLOBAL)` waits for from user
//! space (on an idle 2-vCPU VM a median 8 ms, at most 22 ms over 20
//! calls; longer while CPUs are busy). One thread per process
//! runs the barriers, back to back while anyone waits, so the reader never
//! blocks on one.
//!
//! Where the kernel refuses the barrier (`nohz_full` CPUs, a seccomp
//! filter), [`FALLBACK`] stands in for it: a walk is a few microseconds of
//! kernel code, and one held off for a second would be a stall the kernel
//! itself reports.
//!
//! Invariant: [`passed`] of a [`Ticket`] is true only once a barrier that
//! began after [`request`] returned it has ended.

use std::sync::{Condvar, Mutex, MutexGuard, OnceLock};
use std::time::Duration;

/// Stands in for a barrier the kernel refuses.
pub(crate) const FALLBACK: Duration = Duration::from_secs(1);

/// A grace period asked for: [`passed`] once it has ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Ticket(u64);

/// Asks for a grace period that begins now or later.
pub fn request() -> Ticket {
    clock().request()
}

/// Whether the grace period of `ticket` has ended.
pub fn passed(ticket: Ticket) -> bool {
    clock().passed(ticket)
}

/// Blocks until the grace period of `ticket` has ended.
pub fn wait(ticket: Ticket) {
    clock().wait(ticket)
}

/// The process's clock, its thread started at first use.
fn clock() -> &'static Clock {
    static CLOCK: OnceLock<&'static Clock> = OnceLock::new();
    CLOCK.get_or_init(|| Clock::start(kernel_barrier))
}

/// One RCU grace period of the kernel, or [`FALLBACK`] where refused.
fn kernel_barrier() {
    // MEMBARRIER_CMD_GLOBAL (1 << 0): returns after `synchronize_rcu()`.
    const MEMBARRIER_CMD_GLOBAL: libc::c_long = 1;
    // SAFETY: membarrier takes integers only (command, flags, CPU).
    let done = unsafe { libc::syscall(libc::SYS_membarrier, MEMBARRIER_CMD_GLOBAL, 0, 0) };
    if done != 0 {
        std::thread::sleep(FALLBACK);
    }
}

/// Tickets handed out and barriers ended, with the thread that runs them.
struct Clock {
    state: Mutex<State>,
    changed: Condvar,
}

#[derive(Default)]
struct State {
    /// The last ticket handed out.
    requested: u64,
    /// Every ticket up to this one has passed.
    ended: u64,
}

impl Clock {
    /// A clock whose thread runs `barrier` while a ticket waits.
    fn start(barrier: fn()) -> &'static Self {
        let clock: &'static Self = Box::leak(Box::new(Self {
            state: Mutex::new(State::default()),
            changed: Condvar::new(),
        }));
        std::thread::Builder::new()
            .name("locktop-grace".into())
            .spawn(move || clock.run(barrier))
            .expect("a thread for the kernel's grace periods");
        clock
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn request(&self) -> Ticket {
        let mut state = self.lock();
        state.requested += 1;
        self.changed.notify_all();
        Ticket(state.requested)
    }

    fn passed(&self, ticket: Ticket) -> bool {
        self.lock().ended >= ticket.0
    }

    fn wait(&self, ticket: Ticket) {
        let mut state = self.lock();
        while state.ended < ticket.0 {
            state = self
                .changed
                .wait(state)
                .unwrap_or_else(|poisoned| poisoned.into_inner());
        }
    }

    /// Runs a barrier for the tickets handed out before it began, again
    /// and again while there are any.
    fn run(&self, barrier: fn()) {
        loop {
            let covered = {
                let mut state = self.lock();
                while state.requested == state.ended {
                    state = self
                        .changed
                        .wait(state)
                        .unwrap_or_else(|poisoned| poisoned.into_inner());
                }
                state.requested
            };
            barrier();
            self.lock().ended = covered;
            self.changed.notify_all();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};

    static BARRIERS_BEGUN: AtomicU64 = AtomicU64::new(0);
    static RELEASED: Mutex<u64> = Mutex::new(0);
    static RELEASE: Condvar = Condvar::new();

    /// A barrier that ends when the test releases it.
    fn held_barrier() {
        let number = BARRIERS_BEGUN.fetch_add(1, Ordering::SeqCst) + 1;
        let mut released = RELEASED.lock().expect("lock");
        while *released < number {
            released = RELEASE.wait(released).expect("wait");
        }
    }

    fn release_one() {
        *RELEASED.lock().expect("lock") += 1;
        RELEASE.notify_all();
    }

    fn begun(count: u64) {
        while BARRIERS_BEGUN.load(Ordering::SeqCst) < count {
            std::thread::yield_now();
        }
    }

    /// A ticket asked for while a barrier runs is not passed by that
    /// barrier's end, only by the next one's; a ticket asked for before a
    /// barrier began is passed by its end.
    #[test]
    fn a_ticket_passes_only_with_a_barrier_begun_after_it() {
        let clock = Clock::start(held_barrier);
        let first = clock.request();
        begun(1);
        let second = clock.request();
        assert!(!clock.passed(first), "the barrier has not ended");
        release_one();
        clock.wait(first);
        assert!(
            !clock.passed(second),
            "asked for after the first barrier began"
        );
        begun(2);
        release_one();
        clock.wait(second);
        assert!(clock.passed(second) && clock.passed(first));
    }

    /// The kernel's barrier returns (or the fallback's second passes).
    #[test]
    fn the_kernels_barrier_ends() {
        let ticket = request();
        wait(ticket);
        assert!(passed(ticket));
    }
}
