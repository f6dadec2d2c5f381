//! The connections `serve` holds, and who gets a place when every place
//! is taken: a client that authenticated keeps its place, and a newcomer
//! may push out only a stranger — of its own origin, or of an origin that
//! holds more places than its own — so strangers, whether from another
//! host or from the scraper's own address (a second process on its host,
//! clients behind its NAT), cannot keep a scraper out.
//!
//! Invariants: at most [`MAX_CONNECTIONS`] connections hold a place at
//! once. A connection that authenticated ([`Slot::admit`]) is never
//! pushed out, and is kept open [`ADMITTED_IDLE`] between requests (a
//! scraper reuses one connection instead of asking for a place at every
//! scrape). Any other connection has [`HEADER_READ_TIMEOUT`] from its
//! accept, and from the end of each answer, to send a request's headers
//! (the TLS handshake included), then is closed. A connection with a
//! request being answered (other than a wait for a password check) is
//! never pushed out either. When every place is taken, a newcomer from
//! origin A takes the place of an *evictable stranger* — not admitted,
//! and nothing on it but a wait for headers or for a password check — of
//! A itself or of an origin B holding at least two more stranger places
//! than A (so a crowd from one host never pushes out a smaller host's
//! connections, only its own, and the share only gets fairer). Among
//! those, an idle one (no request on it: it has not sent its headers, or
//! was answered and sent nothing since) goes before one waiting for a
//! password check; then one of the origin with the most stranger places;
//! then the longest idle. With no evictable stranger there, the newcomer
//! is closed at once. So a scraper gets a place as long as a stranger of
//! its own host, or of a more crowded one, sits idle; behind a flood from
//! its own address, its connection lives as many newcomers as its origin
//! holds places before it is the longest-idle, time enough to send its
//! headers, after which it goes only once no idle stranger of its origin
//! is left.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

/// How many connections hold a place at once (open `/events` streams,
/// capped apart at 64, count among them).
pub const MAX_CONNECTIONS: usize = 512;

/// How long a connection that has not authenticated may take to send a
/// request's headers, from its accept (the TLS handshake included) or
/// from the end of the previous answer.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(5);

/// How long a connection that authenticated is kept open between
/// requests: longer than any usual scrape interval (15 s to 1 min), so
/// that a scraper keeps its connection, and its place.
pub const ADMITTED_IDLE: Duration = Duration::from_secs(120);

/// Where a connection comes from, for sharing places fairly: an IPv4
/// address, or an IPv6 /64 (what one host is usually given).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Origin {
    /// An IPv4 address (IPv4-mapped IPv6 ones included).
    V4(Ipv4Addr),
    /// The first 64 bits of an IPv6 address.
    V6(u64),
}

impl Origin {
    /// The origin of a peer at `ip`.
    pub fn of(ip: IpAddr) -> Self {
        match ip.to_canonical() {
            IpAddr::V4(v4) => Origin::V4(v4),
            IpAddr::V6(v6) => Origin::V6((u128::from(v6) >> 64) as u64),
        }
    }
}

/// One connection's place: who it is and what it is doing, shared by
/// its task, the accept loop and the requests on it.
#[derive(Debug)]
pub struct Slot {
    id: u64,
    origin: Origin,
    state: Mutex<SlotState>,
    /// Woken when the slot is pushed out or its requests end.
    wake: Notify,
}

#[derive(Debug)]
struct SlotState {
    /// Authenticated: never pushed out, and kept [`ADMITTED_IDLE`].
    admitted: bool,
    /// Its client presented a certificate the client CA verified.
    certified: bool,
    /// Requests whose answer is not finished.
    serving: u32,
    /// Of those, the ones waiting for a password check.
    checking: u32,
    /// When its last answer ended (or it was accepted).
    idle_since: Instant,
    /// Pushed out for a newcomer: its task closes it.
    evicted: bool,
    /// Its requests that asked for a password check and were not let
    /// through.
    refusals: u32,
}

impl Slot {
    fn new(id: u64, origin: Origin) -> Self {
        Self {
            id,
            origin,
            state: Mutex::new(SlotState {
                admitted: false,
                certified: false,
                serving: 0,
                checking: 0,
                idle_since: Instant::now(),
                evicted: false,
                refusals: 0,
            }),
            wake: Notify::new(),
        }
    }

    fn state(&self) -> MutexGuard<'_, SlotState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Where its client connects from.
    pub fn origin(&self) -> Origin {
        self.origin
    }

    /// Marks it authenticated: it keeps its place from now on.
    pub fn admit(&self) {
        self.state().admitted = true;
        self.wake.notify_one();
    }

    /// True when it authenticated ([`Slot::admit`]).
    pub fn admitted(&self) -> bool {
        self.state().admitted
    }

    /// Counts a request on it that asked for a password check and was not
    /// let through (a wrong password, or a check that got no turn).
    pub fn refuse(&self) {
        let mut state = self.state();
        state.refusals = state.refusals.saturating_add(1);
    }

    /// How many of its requests asked for a password check and were not
    /// let through ([`Slot::refuse`]).
    pub fn refusals(&self) -> u32 {
        self.state().refusals
    }

    /// Marks its client as one that presented a verified certificate.
    pub fn certify(&self) {
        self.state().certified = true;
    }

    /// True when its client presented a certificate the CA verified.
    pub fn certified(&self) -> bool {
        self.state().certified
    }

    /// A request is being answered on it until the guard is dropped.
    pub fn serving(self: &Arc<Self>) -> Serving {
        self.state().serving += 1;
        Serving(self.clone())
    }

    /// A request on it waits for a password check until the guard is
    /// dropped (it may be pushed out meanwhile).
    pub fn checking(self: &Arc<Self>) -> Checking {
        self.state().checking += 1;
        Checking(self.clone())
    }

    /// Resolves when the connection is to be closed: pushed out, or idle
    /// past its time.
    pub async fn until_closed(&self) {
        loop {
            let deadline = {
                let state = self.state();
                if state.evicted {
                    return;
                }
                (state.serving == 0).then(|| {
                    let limit = if state.admitted {
                        ADMITTED_IDLE
                    } else {
                        HEADER_READ_TIMEOUT
                    };
                    state.idle_since + limit
                })
            };
            match deadline {
                Some(deadline) if deadline <= Instant::now() => return,
                Some(deadline) => {
                    tokio::select! {
                        () = tokio::time::sleep_until(deadline) => {}
                        () = self.wake.notified() => {}
                    }
                }
                None => self.wake.notified().await,
            }
        }
    }
}

/// A request in progress on a [`Slot`]; dropped when its answer ends.
#[derive(Debug)]
pub struct Serving(Arc<Slot>);

impl Drop for Serving {
    fn drop(&mut self) {
        let mut state = self.0.state();
        state.serving -= 1;
        if state.serving == 0 {
            state.idle_since = Instant::now();
        }
        drop(state);
        self.0.wake.notify_one();
    }
}

/// A request on a [`Slot`] waiting for a password check.
#[derive(Debug)]
pub struct Checking(Arc<Slot>);

impl Drop for Checking {
    fn drop(&mut self) {
        self.0.state().checking -= 1;
    }
}

/// Every connection holding a place.
#[derive(Debug, Default)]
pub struct Connections {
    slots: Mutex<HashMap<u64, Arc<Slot>>>,
    next_id: AtomicU64,
}

/// A connection's place; dropping it gives the place back.
#[derive(Debug)]
pub struct Place {
    slot: Arc<Slot>,
    connections: Arc<Connections>,
}

impl Place {
    /// The connection's slot.
    pub fn slot(&self) -> &Arc<Slot> {
        &self.slot
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        self.connections.slots().remove(&self.slot.id);
    }
}

impl Connections {
    /// No connection yet.
    pub fn new() -> Arc<Self> {
        Arc::default()
    }

    fn slots(&self) -> MutexGuard<'_, HashMap<u64, Arc<Slot>>> {
        self.slots.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A place for a connection from `origin`, pushing a stranger out
    /// when every place is taken (see the module's doc), or `None`: the
    /// newcomer is to be closed at once.
    pub fn enter(self: &Arc<Self>, origin: Origin) -> Option<Place> {
        let mut slots = self.slots();
        if slots.len() >= MAX_CONNECTIONS {
            let victim = victim(slots.values().map(Arc::as_ref), origin)?;
            let slot = slots.remove(&victim)?;
            slot.state().evicted = true;
            slot.wake.notify_one();
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let slot = Arc::new(Slot::new(id, origin));
        slots.insert(id, slot.clone());
        Some(Place {
            slot,
            connections: self.clone(),
        })
    }

    /// How many connections hold a place.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.slots().len()
    }
}

/// The id of the slot a newcomer from `newcomer` pushes out, if any (see
/// the module's doc): among the evictable strangers of the newcomer's
/// own origin and of the origins holding at least two more stranger
/// places than it, an idle one before one waiting for a password check,
/// then one of the most crowded origin, then the longest idle.
fn victim<'a>(slots: impl Iterator<Item = &'a Slot>, newcomer: Origin) -> Option<u64> {
    /// An evictable stranger: its origin, whether it is idle (no request
    /// on it, only waits for a password check otherwise), idle since.
    struct Candidate {
        origin: Origin,
        idle: bool,
        since: Instant,
        id: u64,
    }
    let mut strangers: HashMap<Origin, usize> = HashMap::new();
    let mut candidates = Vec::new();
    for slot in slots {
        let state = slot.state();
        if state.admitted {
            continue;
        }
        *strangers.entry(slot.origin).or_default() += 1;
        // Only waiting for headers, or for a password check.
        if !state.evicted && state.serving == state.checking {
            candidates.push(Candidate {
                origin: slot.origin,
                idle: state.serving == 0,
                since: state.idle_since,
                id: slot.id,
            });
        }
    }
    let own = strangers.get(&newcomer).copied().unwrap_or(0);
    candidates
        .into_iter()
        .filter_map(|candidate| {
            let crowd = strangers[&candidate.origin];
            (candidate.origin == newcomer || crowd >= own + 2).then_some((crowd, candidate))
        })
        .max_by(|(crowd_a, a), (crowd_b, b)| {
            a.idle
                .cmp(&b.idle)
                .then(crowd_a.cmp(crowd_b))
                .then(b.since.cmp(&a.since))
                .then(b.id.cmp(&a.id))
        })
        .map(|(_, candidate)| candidate.id)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn origin(last: u8) -> Origin {
        Origin::of(IpAddr::V4(Ipv4Addr::new(192, 0, 2, last)))
    }

    /// Fills every place with connections from `from`.
    fn full_of(connections: &Arc<Connections>, from: Origin) -> Vec<Place> {
        (0..MAX_CONNECTIONS)
            .map(|_| connections.enter(from).expect("a place"))
            .collect()
    }

    #[tokio::test]
    async fn a_newcomer_pushes_out_the_longest_idle_stranger_of_the_most_crowded_origin() {
        let connections = Connections::new();
        let strangers = full_of(&connections, origin(2));
        let place = connections.enter(origin(1)).expect("the scraper gets in");
        assert_eq!(connections.len(), MAX_CONNECTIONS);
        let first = strangers[0].slot();
        assert!(first.state().evicted, "the longest-idle stranger goes");
        // Its task sees it at once.
        tokio::time::timeout(Duration::from_secs(1), first.until_closed())
            .await
            .expect("an evicted connection closes at once");
        assert!(!place.slot().state().evicted);
    }

    #[tokio::test]
    async fn a_crowd_pushes_out_its_own_never_a_smaller_origin() {
        let connections = Connections::new();
        let mut strangers = full_of(&connections, origin(2));
        strangers.pop();
        let scraper = connections.enter(origin(1)).expect("a place");
        // The crowd's next connection takes the place of its own
        // longest-idle one, not the scraper's.
        let newcomer = connections.enter(origin(2)).expect("a place");
        assert!(!scraper.slot().state().evicted);
        assert!(strangers[0].slot().state().evicted);
        assert!(
            strangers[1..]
                .iter()
                .all(|place| !place.slot().state().evicted)
        );
        assert!(!newcomer.slot().state().evicted);
        assert_eq!(connections.len(), MAX_CONNECTIONS);
    }

    /// Issue 52, item 6: 520 idle connections from the scraper's own
    /// address left it no place (a newcomer could push out only a
    /// stranger of an origin holding two more places than its own).
    #[tokio::test(start_paused = true)]
    async fn a_newcomer_of_the_strangers_own_address_pushes_out_the_longest_idle_of_them() {
        let localhost = Origin::of(IpAddr::V4(Ipv4Addr::LOCALHOST));
        let connections = Connections::new();
        let strangers = full_of(&connections, localhost);
        // The first was answered (a 401, say) a moment ago: the second
        // has been idle the longest.
        tokio::time::advance(Duration::from_secs(1)).await;
        drop(strangers[0].slot().serving());
        let scraper = connections
            .enter(localhost)
            .expect("the scraper gets in beside its own address's strangers");
        assert_eq!(connections.len(), MAX_CONNECTIONS);
        let evicted: Vec<_> = strangers
            .iter()
            .enumerate()
            .filter(|(_, place)| place.slot().state().evicted)
            .map(|(index, _)| index)
            .collect();
        assert_eq!(evicted, [1], "only the longest-idle stranger goes");
        // The scraper authenticates: the strangers' newcomers now take
        // each other's places, never its own.
        scraper.slot().admit();
        let mut newcomers = Vec::new();
        for _ in 0..2 * MAX_CONNECTIONS {
            tokio::time::advance(Duration::from_millis(1)).await;
            newcomers.push(connections.enter(localhost).expect("a place"));
            assert_eq!(connections.len(), MAX_CONNECTIONS);
        }
        assert!(!scraper.slot().state().evicted);
    }

    #[tokio::test(start_paused = true)]
    async fn an_idle_stranger_goes_before_one_waiting_for_its_password_check() {
        let localhost = Origin::of(IpAddr::V4(Ipv4Addr::LOCALHOST));
        let connections = Connections::new();
        let places = full_of(&connections, localhost);
        // All but the last sent a request that waits for its check; the
        // last, the newest, sent nothing.
        let (last, waiting) = places.split_last().expect("places");
        let requests: Vec<_> = waiting
            .iter()
            .map(|place| (place.slot().serving(), place.slot().checking()))
            .collect();
        tokio::time::advance(Duration::from_secs(1)).await;
        let newcomer = connections.enter(localhost).expect("a place");
        assert!(last.slot().state().evicted, "the idle one goes");
        assert!(waiting.iter().all(|place| !place.slot().state().evicted));
        // The newcomer's request is being answered; with no idle one
        // left, the one waiting longest for its check goes.
        let answering = newcomer.slot().serving();
        let _next = connections.enter(localhost).expect("a place");
        assert!(waiting[0].slot().state().evicted);
        assert!(
            waiting[1..]
                .iter()
                .all(|place| !place.slot().state().evicted)
        );
        assert!(!newcomer.slot().state().evicted, "being answered");
        drop((requests, answering));
    }

    #[tokio::test]
    async fn admitted_and_busy_connections_are_never_pushed_out() {
        let connections = Connections::new();
        let places = full_of(&connections, origin(2));
        for place in &places {
            place.slot().admit();
        }
        assert!(connections.enter(origin(1)).is_none(), "all admitted");
        assert!(connections.enter(origin(2)).is_none(), "not by their own");
        assert!(places.iter().all(|place| !place.slot().state().evicted));
        drop(places);

        let places = full_of(&connections, origin(2));
        let busy: Vec<_> = places.iter().map(|place| place.slot().serving()).collect();
        assert!(connections.enter(origin(1)).is_none(), "all answering");
        assert!(connections.enter(origin(2)).is_none(), "not by their own");
        // Waiting for a password check is not being answered.
        let checking: Vec<_> = places.iter().map(|place| place.slot().checking()).collect();
        assert!(connections.enter(origin(1)).is_some());
        drop((busy, checking));
    }

    #[tokio::test(start_paused = true)]
    async fn strangers_get_the_header_timeout_and_admitted_ones_their_idle_time() {
        let connections = Connections::new();
        let stranger = connections.enter(origin(2)).expect("a place");
        let admitted = connections.enter(origin(1)).expect("a place");
        admitted.slot().admit();
        let began = Instant::now();
        stranger.slot().until_closed().await;
        assert_eq!(began.elapsed(), HEADER_READ_TIMEOUT);
        let answer = admitted.slot().serving();
        tokio::time::sleep(ADMITTED_IDLE * 2).await;
        drop(answer);
        let answered = Instant::now();
        admitted.slot().until_closed().await;
        assert_eq!(
            answered.elapsed(),
            ADMITTED_IDLE,
            "idle from the answer's end"
        );
    }

    #[test]
    fn an_ipv6_host_is_its_slash_64() {
        let a: IpAddr = "2001:db8:1:2::1".parse().unwrap();
        let b: IpAddr = "2001:db8:1:2:ffff::9".parse().unwrap();
        let c: IpAddr = "2001:db8:1:3::1".parse().unwrap();
        assert_eq!(Origin::of(a), Origin::of(b));
        assert_ne!(Origin::of(a), Origin::of(c));
        let mapped: IpAddr = "::ffff:192.0.2.7".parse().unwrap();
        assert_eq!(Origin::of(mapped), origin(7));
    }
}
