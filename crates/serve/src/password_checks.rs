//! The bcrypt checks of basic authentication, bounded: a flood of wrong
//! passwords costs `serve` a fixed number of threads and cores, never a
//! thread per request, and leaves the rest of the CPU to clients whose
//! credentials were verified before (those skip the check: see
//! [`super::auth`]).
//!
//! Invariants: at most half the cores' worth of checks (one at least)
//! run at once, each on a blocking thread (a check keeps its turn until bcrypt
//! returns, even when its request is gone); the checks of one origin run
//! one at a time, in the order they came, so a crowd from one host queues
//! behind itself while other hosts take turns with it (each origin has at
//! most one check waiting for a turn, and turns are given in order); a
//! request whose check has not started within [`MAX_WAIT`] gets no check
//! and is told the server is busy.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::sync::{OwnedMutexGuard, Semaphore};

use super::connections::Origin;

/// How long a request may wait for its password check to start.
pub const MAX_WAIT: Duration = Duration::from_secs(10);

/// The password checks in progress and waiting.
#[derive(Debug)]
pub struct PasswordChecks {
    /// Checks that may run at once.
    running: Arc<Semaphore>,
    lines: Mutex<HashMap<Origin, Line>>,
}

/// One origin's line: its checks take the lock one at a time.
#[derive(Debug)]
struct Line {
    turn: Arc<tokio::sync::Mutex<()>>,
    /// Requests in the line, the one being checked included.
    requests: usize,
}

impl PasswordChecks {
    /// At most half the cores (one at least) check passwords at once.
    pub fn new() -> Arc<Self> {
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        Self::with_concurrency((cores / 2).max(1))
    }

    /// At most `concurrency` checks at once.
    pub fn with_concurrency(concurrency: usize) -> Arc<Self> {
        Arc::new(Self {
            running: Arc::new(Semaphore::new(concurrency)),
            lines: Mutex::new(HashMap::new()),
        })
    }

    fn lines(&self) -> MutexGuard<'_, HashMap<Origin, Line>> {
        self.lines.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Runs `check` (a bcrypt verification) for a request from `origin`
    /// on a blocking thread when its turn comes: its answer, or `None`
    /// when the turn did not come within [`MAX_WAIT`].
    pub async fn check(
        self: &Arc<Self>,
        origin: Origin,
        check: impl FnOnce() -> bool + Send + 'static,
    ) -> Option<bool> {
        let place = InLine::join(self, origin);
        let turn = place.turn.clone();
        let started = tokio::time::timeout(MAX_WAIT, async {
            let turn = turn.lock_owned().await;
            let running = self.running.clone().acquire_owned().await.ok()?;
            Some((turn, running))
        })
        .await;
        let (turn, running) = started.ok().flatten()?;
        // The turn, the permit and the place in line go with the check:
        // given back when bcrypt returns, not when the request goes.
        let held = Held {
            _running: running,
            _turn: turn,
            _place: place,
        };
        tokio::task::spawn_blocking(move || {
            let matches = check();
            drop(held);
            matches
        })
        .await
        .ok()
    }
}

/// What a running check holds, given back in this order when it ends.
struct Held {
    _running: tokio::sync::OwnedSemaphorePermit,
    _turn: OwnedMutexGuard<()>,
    _place: InLine,
}

/// A request's place in its origin's line; the line goes when its last
/// request does.
struct InLine {
    checks: Arc<PasswordChecks>,
    origin: Origin,
    turn: Arc<tokio::sync::Mutex<()>>,
}

impl InLine {
    fn join(checks: &Arc<PasswordChecks>, origin: Origin) -> Self {
        let mut lines = checks.lines();
        let line = lines.entry(origin).or_insert_with(|| Line {
            turn: Arc::default(),
            requests: 0,
        });
        line.requests += 1;
        let turn = line.turn.clone();
        drop(lines);
        Self {
            checks: checks.clone(),
            origin,
            turn,
        }
    }
}

impl Drop for InLine {
    fn drop(&mut self) {
        let mut lines = self.checks.lines();
        if let Some(line) = lines.get_mut(&self.origin) {
            line.requests -= 1;
            if line.requests == 0 {
                lines.remove(&self.origin);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::net::{IpAddr, Ipv4Addr};
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    fn origin(last: u8) -> Origin {
        Origin::of(IpAddr::V4(Ipv4Addr::new(192, 0, 2, last)))
    }

    /// A check that takes `took` and counts how many run at once.
    fn slow_check(
        took: Duration,
        now: &Arc<AtomicUsize>,
        most: &Arc<AtomicUsize>,
    ) -> impl FnOnce() -> bool + Send + 'static {
        let (now, most) = (now.clone(), most.clone());
        move || {
            let running = now.fetch_add(1, Ordering::SeqCst) + 1;
            most.fetch_max(running, Ordering::SeqCst);
            std::thread::sleep(took);
            now.fetch_sub(1, Ordering::SeqCst);
            false
        }
    }

    /// 40 checks from one origin and one from another: never more than
    /// the bound run at once, and the other origin's check is not
    /// queued behind the crowd (it is answered while the crowd still
    /// waits); the lines are gone once all is answered.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn checks_are_bounded_and_origins_take_turns() {
        let checks = PasswordChecks::with_concurrency(2);
        let (now, most) = (Arc::default(), Arc::default());
        let took = Duration::from_millis(20);
        let crowd: Vec<_> = (0..40)
            .map(|_| {
                let (checks, check) = (checks.clone(), slow_check(took, &now, &most));
                tokio::spawn(async move { checks.check(origin(2), check).await })
            })
            .collect();
        tokio::time::sleep(took).await;
        let other = checks.check(origin(1), slow_check(took, &now, &most));
        assert_eq!(other.await, Some(false));
        let waiting = crowd.iter().filter(|task| !task.is_finished()).count();
        assert!(
            waiting > 20,
            "the other origin waited for the crowd: {waiting} left"
        );
        for task in crowd {
            assert_eq!(task.await.expect("joined"), Some(false));
        }
        // One origin at a time each: the crowd and the other, at most.
        assert!(most.load(Ordering::SeqCst) <= 2, "{most:?}");
        assert!(checks.lines().is_empty());
    }

    /// A request whose turn does not come within MAX_WAIT gets no check.
    #[tokio::test(start_paused = true)]
    async fn a_check_that_waits_too_long_is_not_run() {
        let checks = PasswordChecks::with_concurrency(1);
        let _taken = checks
            .running
            .clone()
            .acquire_owned()
            .await
            .expect("permit");
        let ran = Arc::new(AtomicUsize::new(0));
        let counted = ran.clone();
        let answer = checks
            .check(origin(1), move || {
                counted.fetch_add(1, Ordering::SeqCst);
                true
            })
            .await;
        assert_eq!(answer, None);
        assert_eq!(ran.load(Ordering::SeqCst), 0);
        assert!(checks.lines().is_empty());
    }
}
