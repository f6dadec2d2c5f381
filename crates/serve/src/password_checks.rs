//! The bcrypt checks of basic authentication, bounded: a flood of wrong
//! passwords costs `serve` a fixed number of threads and cores, never a
//! thread per request, and leaves the rest of the CPU to clients whose
//! credentials were verified before (those skip the check: see
//! [`super::auth`]) — and a flood from a scraper's own address (a second
//! process on its host, clients behind its NAT) does not keep the
//! scraper's own check waiting.
//!
//! Invariants: at most half the cores' worth of checks (one at least)
//! run at once, each on a blocking thread (a check keeps its turn until
//! bcrypt returns, even when its request is gone); the checks of one
//! origin run one at a time, and origins take turns in the order they
//! became ready (one waiting, none running), so a crowd from one host
//! cannot hold up another host beyond one check of its own. Within an
//! origin's line, a request's [`Standing`] gives its place: one from a
//! connection that authenticated before goes first, never behind an
//! unverified check (only behind the one running), then the one whose
//! connection has been refused the fewest times, then the first come —
//! so turns go fairly per connection, and a connection retrying wrong
//! passwords is served after every fresh one. An origin's line holds at
//! most [`LINE_MAX`] waiting requests: a request that comes to a full
//! line takes the place of the last-placed one if it stands before it
//! (that one is put out of line), else is put out of line itself — a
//! flood sheds its own requests instead of making the line [`MAX_WAIT`]
//! deep. A request put out of line, or whose check has not started
//! within [`MAX_WAIT`], gets no check, and is told the server is busy
//! [`MAX_WAIT`] after it came: not at once, which would have its client
//! ask again at once (a flood told at once asks many times as often,
//! and its TLS handshakes and answers cost more CPU than the waits; a
//! wait costs a timer, on a connection that holds a place anyway). (A
//! flood that opens a new connection for every wrong password stands as
//! a scraper's first request does: the scraper's check then waits for
//! at most [`LINE_MAX`] others, or gets none.)

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::sync::oneshot;

use super::connections::Origin;

/// How long a request may wait for its password check to start.
pub const MAX_WAIT: Duration = Duration::from_secs(10);

/// The most requests of one origin waiting for a check's turn at once
/// (the one being checked not counted).
pub const LINE_MAX: usize = 8;

/// Where a request stands in its origin's line: the lesser goes first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Standing {
    /// Its connection authenticated before (its credentials were
    /// forgotten, or are new): before any stranger.
    Admitted,
    /// Its connection has not authenticated; `refusals` of its requests
    /// asked for a check and were not let through.
    Stranger {
        /// Requests on its connection refused, or told the server is
        /// busy, so far.
        refusals: u32,
    },
}

/// The password checks in progress and waiting.
#[derive(Debug)]
pub struct PasswordChecks {
    /// Checks that may run at once.
    concurrency: usize,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    /// Checks running.
    running: usize,
    lines: HashMap<Origin, Line>,
    /// Counts requests and turns, for the order they came in.
    next: u64,
}

/// One origin's line; gone when nothing of it waits or runs.
#[derive(Debug)]
struct Line {
    /// One of its checks runs.
    running: bool,
    /// Since when it has been ready for a turn (as counted by
    /// [`State::next`]): the least ready gets the next turn.
    ready_since: u64,
    /// Its requests waiting, by standing then by arrival: each is sent
    /// its turn, or dropped to be told the server is busy.
    waiting: BTreeMap<(Standing, u64), oneshot::Sender<Turn>>,
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
            concurrency,
            state: Mutex::default(),
        })
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Runs `check` (a bcrypt verification) for a request from `origin`
    /// standing as `standing` on a blocking thread when its turn comes:
    /// its answer, or `None` [`MAX_WAIT`] after it came when the turn did
    /// not come (its line was full, it was put out of it, or the wait was
    /// too long).
    pub async fn check(
        self: &Arc<Self>,
        origin: Origin,
        standing: Standing,
        check: impl FnOnce() -> bool + Send + 'static,
    ) -> Option<bool> {
        let deadline = tokio::time::Instant::now() + MAX_WAIT;
        let turn = match self.join(origin, standing) {
            Some((_waiting, turn)) => tokio::time::timeout_at(deadline, turn)
                .await
                .ok()
                .and_then(Result::ok),
            None => None,
        };
        let Some(turn) = turn else {
            // Not at once: out of line, it waits as it would have in it.
            tokio::time::sleep_until(deadline).await;
            return None;
        };
        // The turn goes with the check: given back when bcrypt returns,
        // not when the request goes.
        tokio::task::spawn_blocking(move || {
            let matches = check();
            drop(turn);
            matches
        })
        .await
        .ok()
    }

    /// Puts a request in its origin's line (see the module's doc), or
    /// `None` when the line is full and it stands no better than the
    /// last of it.
    fn join(
        self: &Arc<Self>,
        origin: Origin,
        standing: Standing,
    ) -> Option<(Waiting, oneshot::Receiver<Turn>)> {
        let mut state = self.state();
        let arrival = state.next;
        state.next += 1;
        let line = state.lines.entry(origin).or_insert_with(|| Line {
            running: false,
            ready_since: arrival,
            waiting: BTreeMap::new(),
        });
        let key = (standing, arrival);
        if line.waiting.len() >= LINE_MAX {
            let last = line.waiting.last_key_value().map(|(last, _)| *last)?;
            if key > last {
                return None;
            }
            // Dropping its sender tells it the server is busy.
            line.waiting.remove(&last);
        }
        let (sender, turn) = oneshot::channel();
        line.waiting.insert(key, sender);
        let given = self.give_turns(&mut state);
        drop(state);
        deliver(given);
        let waiting = Waiting {
            checks: self.clone(),
            origin,
            key,
        };
        Some((waiting, turn))
    }

    /// Gives turns while checks may start: to the first waiting request
    /// of the ready origin that has been ready the longest. The turns are
    /// taken from `state`; they are sent with [`deliver`] once its lock
    /// is let go (a turn not received is given back by its drop, which
    /// takes the lock).
    fn give_turns(self: &Arc<Self>, state: &mut State) -> Vec<(oneshot::Sender<Turn>, Turn)> {
        let mut given = Vec::new();
        while state.running < self.concurrency {
            let Some(origin) = state
                .lines
                .iter()
                .filter(|(_, line)| !line.running && !line.waiting.is_empty())
                .min_by_key(|(_, line)| line.ready_since)
                .map(|(origin, _)| *origin)
            else {
                break;
            };
            let Some(line) = state.lines.get_mut(&origin) else {
                break;
            };
            let Some((_, sender)) = line.waiting.pop_first() else {
                break;
            };
            line.running = true;
            state.running += 1;
            let turn = Turn {
                checks: self.clone(),
                origin,
            };
            given.push((sender, turn));
        }
        given
    }
}

/// Sends each turn to its request; one whose request is gone is dropped,
/// which gives it back.
fn deliver(given: Vec<(oneshot::Sender<Turn>, Turn)>) {
    for (sender, turn) in given {
        let _ = sender.send(turn);
    }
}

/// Removes `origin`'s line when nothing of it waits or runs.
fn tidy(state: &mut State, origin: Origin) {
    if state
        .lines
        .get(&origin)
        .is_some_and(|line| !line.running && line.waiting.is_empty())
    {
        state.lines.remove(&origin);
    }
}

/// A check's turn: given back, and the next turns given, when dropped.
#[derive(Debug)]
struct Turn {
    checks: Arc<PasswordChecks>,
    origin: Origin,
}

impl Drop for Turn {
    fn drop(&mut self) {
        let mut state = self.checks.state();
        state.running -= 1;
        let now = state.next;
        state.next += 1;
        if let Some(line) = state.lines.get_mut(&self.origin) {
            line.running = false;
            line.ready_since = now;
        }
        tidy(&mut state, self.origin);
        let given = self.checks.give_turns(&mut state);
        drop(state);
        deliver(given);
    }
}

/// A request's place in its origin's line, left when dropped (its turn
/// given, or not coming).
struct Waiting {
    checks: Arc<PasswordChecks>,
    origin: Origin,
    key: (Standing, u64),
}

impl Drop for Waiting {
    fn drop(&mut self) {
        let mut state = self.checks.state();
        if let Some(line) = state.lines.get_mut(&self.origin) {
            line.waiting.remove(&self.key);
        }
        tidy(&mut state, self.origin);
    }
}

#[cfg(test)]
mod tests {
    use std::net::{IpAddr, Ipv4Addr};
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

    use super::*;

    fn origin(last: u8) -> Origin {
        Origin::of(IpAddr::V4(Ipv4Addr::new(192, 0, 2, last)))
    }

    const FRESH: Standing = Standing::Stranger { refusals: 0 };

    /// A check that counts how many run at once, notes `name` in `ran`
    /// when it starts, and returns once `held` is false.
    fn held_check(
        name: &'static str,
        ran: &Arc<Mutex<Vec<&'static str>>>,
        held: &Arc<AtomicBool>,
        (now, most): (&Arc<AtomicUsize>, &Arc<AtomicUsize>),
    ) -> impl FnOnce() -> bool + Send + 'static {
        let (ran, held, now, most) = (ran.clone(), held.clone(), now.clone(), most.clone());
        move || {
            let running = now.fetch_add(1, Ordering::SeqCst) + 1;
            most.fetch_max(running, Ordering::SeqCst);
            ran.lock().expect("ran").push(name);
            while held.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(1));
            }
            now.fetch_sub(1, Ordering::SeqCst);
            false
        }
    }

    /// Lets the spawned requests take their places in line.
    async fn settle() {
        for _ in 0..50 {
            tokio::task::yield_now().await;
        }
    }

    /// A crowd of checks from one origin and one from another: never more
    /// than the bound run at once, the other origin's check is not queued
    /// behind the crowd (it is answered while every check of the crowd is
    /// held), and the lines are gone once all is answered.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn checks_are_bounded_and_origins_take_turns() {
        let checks = PasswordChecks::with_concurrency(2);
        let (ran, held) = (Arc::default(), Arc::new(AtomicBool::new(true)));
        let (now, most) = (Arc::default(), Arc::default());
        let crowd: Vec<_> = (0..=LINE_MAX)
            .map(|_| {
                let check = held_check("crowd", &ran, &held, (&now, &most));
                let checks = checks.clone();
                tokio::spawn(async move { checks.check(origin(2), FRESH, check).await })
            })
            .collect();
        // One of the crowd checked, the rest in line.
        tokio::time::timeout(Duration::from_secs(60), async {
            while waiting(&checks, origin(2)) < LINE_MAX {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        })
        .await
        .expect("the crowd in line");
        let free = Arc::new(AtomicBool::new(false));
        let other = held_check("other", &ran, &free, (&now, &most));
        assert_eq!(checks.check(origin(1), FRESH, other).await, Some(false));
        assert!(crowd.iter().all(|task| !task.is_finished()));
        held.store(false, Ordering::SeqCst);
        for task in crowd {
            assert_eq!(task.await.expect("joined"), Some(false));
        }
        // One origin at a time each: the crowd and the other, at most.
        assert!(most.load(Ordering::SeqCst) <= 2, "{most:?}");
        assert!(checks.state().lines.is_empty());
        assert_eq!(checks.state().running, 0);
    }

    /// How many requests of `origin` wait in line.
    fn waiting(checks: &PasswordChecks, origin: Origin) -> usize {
        checks
            .state()
            .lines
            .get(&origin)
            .map_or(0, |line| line.waiting.len())
    }

    /// Issue 52, item 6: a flood of wrong passwords from a scraper's own
    /// address made its line 10 s deep, and the scraper's first scrape
    /// waited in it for 503. Now a fresh connection's request goes before
    /// those of connections refused already (one from a connection that
    /// authenticated before goes before both), right after the check
    /// running; the flood past the line's bound gets no check, and is
    /// told so MAX_WAIT after it came.
    #[tokio::test(start_paused = true)]
    async fn a_flood_from_ones_own_origin_does_not_hold_up_a_fresh_or_admitted_connection() {
        let checks = PasswordChecks::with_concurrency(1);
        let (ran, held) = (Arc::default(), Arc::new(AtomicBool::new(true)));
        let (now, most) = (Arc::default(), Arc::default());
        let localhost = Origin::of(IpAddr::V4(Ipv4Addr::LOCALHOST));
        let ask = |name, standing| {
            let check = held_check(name, &ran, &held, (&now, &most));
            let checks = checks.clone();
            tokio::spawn(async move {
                let came = tokio::time::Instant::now();
                let answer = checks.check(localhost, standing, check).await;
                (answer, came.elapsed())
            })
        };
        let flood: Vec<_> = (0..3 * LINE_MAX)
            .map(|_| ask("flood", Standing::Stranger { refusals: 3 }))
            .collect();
        settle().await;
        // One check of the flood runs (held), LINE_MAX wait.
        assert_eq!(waiting(&checks, localhost), LINE_MAX);
        let fresh = ask("fresh", FRESH);
        settle().await;
        let admitted = ask("admitted", Standing::Admitted);
        settle().await;
        // The two took the places of the flood's last two in line.
        let line: Vec<_> = checks.state().lines[&localhost]
            .waiting
            .keys()
            .map(|(standing, _)| *standing)
            .collect();
        assert_eq!(line.len(), LINE_MAX);
        assert_eq!(line[..2], [Standing::Admitted, FRESH]);
        held.store(false, Ordering::SeqCst);
        assert_eq!(admitted.await.expect("joined").0, Some(false));
        assert_eq!(fresh.await.expect("joined").0, Some(false));
        let mut answers = Vec::new();
        for task in flood {
            answers.push(task.await.expect("joined"));
        }
        let ran = ran.lock().expect("ran").clone();
        assert_eq!(ran.len(), LINE_MAX + 1);
        assert_eq!(
            ran[..3],
            ["flood", "admitted", "fresh"],
            "right after the check that was running"
        );
        let checked = answers.iter().filter(|(answer, _)| answer.is_some());
        assert_eq!(checked.count(), LINE_MAX - 1);
        let out_of_line: Vec<_> = answers
            .iter()
            .filter(|(answer, _)| answer.is_none())
            .collect();
        assert_eq!(out_of_line.len(), 2 * LINE_MAX + 1);
        assert!(out_of_line.iter().all(|(_, took)| *took == MAX_WAIT));
        assert_eq!(most.load(Ordering::SeqCst), 1);
        assert!(checks.state().lines.is_empty());
    }

    /// A request whose turn does not come within MAX_WAIT gets no check,
    /// and leaves no trace.
    #[tokio::test(start_paused = true)]
    async fn a_check_that_waits_too_long_is_not_run() {
        let checks = PasswordChecks::with_concurrency(1);
        // Every check's turn taken.
        checks.state().running = 1;
        let ran = Arc::new(AtomicUsize::new(0));
        let counted = ran.clone();
        let began = tokio::time::Instant::now();
        let answer = checks
            .check(origin(1), FRESH, move || {
                counted.fetch_add(1, Ordering::SeqCst);
                true
            })
            .await;
        assert_eq!(answer, None);
        assert_eq!(began.elapsed(), MAX_WAIT);
        assert_eq!(ran.load(Ordering::SeqCst), 0);
        assert!(checks.state().lines.is_empty());
    }

    #[test]
    fn an_admitted_connection_stands_first_then_the_least_refused() {
        let mut standings = [
            Standing::Stranger { refusals: 2 },
            FRESH,
            Standing::Admitted,
            Standing::Stranger { refusals: 1 },
        ];
        standings.sort();
        assert_eq!(
            standings,
            [
                Standing::Admitted,
                FRESH,
                Standing::Stranger { refusals: 1 },
                Standing::Stranger { refusals: 2 },
            ]
        );
    }
}
