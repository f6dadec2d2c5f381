//! Who waits for whom: the wait-for graph of the held keys, its chains
//! and its cycles.
//!
//! An edge runs from a waiting process to each process holding the key it
//! waits on (a contender, a watcher, or a try loop: [`WaitKind`]).
//! Processes are their PID *and* start time, so a PID reused by another
//! process is never joined to the keys its predecessor held or waited
//! on; a process waiting on a key it holds itself draws no edge (the SDK
//! is reentrant inside a process: that is no wait on anyone). Holders are
//! the verified holders the held view lists, keeper first; an edge to an
//! unverified holder is drawn and marked so (see [`Edge::holder_verified`]).
//!
//! From the edges: each waiting process's chain (hop by hop to the
//! process at its end, which waits for nothing: the *root blocker* — or
//! to a cycle), how many processes each root blocks (transitively), and
//! the cycles (strongly connected parts of two processes or more). A
//! cycle is a fact; whether it is a *deadlock*, one that cannot clear by
//! itself, is [`Cycle::deadlock`]'s rule.
//!
//! Invariants: built in one pass over the held keys (no I/O); empty, and
//! allocation-free to build, when nobody waits; every chain ends at a
//! root or at a cycle; a process is in at most one cycle; everything is
//! ordered (by PID, then key), so the same states always give the same
//! graph.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::time::{Duration, SystemTime};

use crate::disk::{KeyKind, LockKey};
use crate::liveness::{KeyState, WaitKind};

/// How long a cycle of waits must last before it is called a deadlock
/// (PostgreSQL's `deadlock_timeout` default): the edges of one moment may
/// be a release and a grant still on their way.
pub const DEADLOCK_AFTER: Duration = Duration::from_secs(1);

/// A process: its PID and its start (`None`: unread).
type Node = (u32, Option<SystemTime>);

/// One wait: `waiter` waits (`how`) on `key`, which `holder` holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Edge {
    /// The waiting process.
    pub waiter: u32,
    /// How it waits.
    pub how: WaitKind,
    /// The key it waits on.
    pub key: LockKey,
    /// A process holding that key.
    pub holder: u32,
    /// False when that holder is only named by the lock table (its open
    /// files may not be read by this user): it may be a reused PID, so
    /// an edge to it is never part of a deadlock.
    pub holder_verified: bool,
}

/// Where a chain ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChainEnd {
    /// At a process that waits for nothing: the root blocker.
    Root(u32),
    /// At a cycle (its place in [`WaitGraph::cycles`]).
    Cycle(usize),
}

/// A waiting process's chain: the hops from it to its end, the nearest
/// end first (a shortest path; ties by PID, then key).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chain {
    /// The waits, from the process asked about onward (empty for a
    /// member of a cycle: it is its own end).
    pub hops: Vec<Edge>,
    /// Where it ends.
    pub end: ChainEnd,
}

/// A cycle of waits: a strongly connected part of the graph.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cycle {
    /// One circle through it, from its lowest PID: each hop's holder is
    /// the next hop's waiter, the last hop's the first's.
    pub hops: Vec<Edge>,
    /// Every process of the part, by PID (more than the circle's when
    /// circles interleave).
    pub members: Vec<u32>,
    /// Since when these processes have waited in a circle (carried from
    /// graph to graph while its members stay the same); `None` when it
    /// was seen in one look only ([`WaitGraph::build_once`]).
    pub since: Option<SystemTime>,
    /// The member to signal to break it: see [`WaitGraph::victim`].
    pub victim: u32,
    mayclear: Option<MayClear>,
}

/// Why a cycle may still clear by itself (the rule of
/// [`Cycle::deadlock`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "reason", rename_all = "snake_case")]
pub enum MayClear {
    /// It has lasted less than [`DEADLOCK_AFTER`].
    Young,
    /// It was seen in one look (a snapshot): how long it lasts is not
    /// known.
    OneLook,
    /// One of its waits is a try loop, which may give up.
    TryLoop {
        /// The process looping.
        pid: u32,
    },
    /// One of its holders is unverified: the edge may be a reused PID's.
    Unverified {
        /// The unverified holder.
        pid: u32,
    },
    /// A process in it holds keys of more than one agent: its holds are
    /// several tasks', and another of them may release.
    SeveralAgents {
        /// That process.
        pid: u32,
    },
}

impl MayClear {
    /// Why, in words.
    pub fn describe(self) -> String {
        match self {
            MayClear::Young => format!(
                "formed less than {}s ago (a release may be on its way)",
                DEADLOCK_AFTER.as_secs()
            ),
            MayClear::OneLook => {
                "seen in one look, so how long it lasts is not known (`locktop check` looks \
                 twice)"
                    .to_string()
            }
            MayClear::TryLoop { pid } => {
                format!("pid {pid} loops on try_acquire and may give up")
            }
            MayClear::Unverified { pid } => format!(
                "pid {pid} is an unverified holder (it may be a PID reused since; run as root \
                 to verify)"
            ),
            MayClear::SeveralAgents { pid } => format!(
                "pid {pid} holds keys of more than one agent, from tasks that may release \
                 without the one that waits"
            ),
        }
    }
}

impl Cycle {
    /// The rule: a cycle is a deadlock once it has lasted
    /// [`DEADLOCK_AFTER`], every wait in it is blocked in the kernel (no
    /// try loop, which may give up), every holder in it is verified, and
    /// no process in it holds keys of more than one agent (a process
    /// serving several agents holds from several tasks; the one that
    /// waits may not be the one that holds). `Err` says why it may clear.
    pub fn deadlock(&self, now: SystemTime) -> Result<(), MayClear> {
        if let Some(why) = self.mayclear {
            return Err(why);
        }
        let Some(since) = self.since else {
            return Err(MayClear::OneLook);
        };
        if now.duration_since(since).unwrap_or_default() < DEADLOCK_AFTER {
            return Err(MayClear::Young);
        }
        Ok(())
    }

    /// True when `key` is waited on along the circle.
    pub fn has_key(&self, key: &LockKey) -> bool {
        self.hops.iter().any(|hop| hop.key == *key)
    }

    /// The processes of the part with their starts, the cycle's identity.
    fn identity(&self, starts: &HashMap<u32, Option<SystemTime>>) -> Vec<Node> {
        self.members
            .iter()
            .map(|pid| (*pid, starts.get(pid).copied().flatten()))
            .collect()
    }
}

/// A held key as the graph reads it.
struct HeldKey<'a> {
    key: &'a LockKey,
    state: &'a KeyState,
}

/// The wait-for graph of a set of held keys.
#[derive(Debug, Clone, Default)]
pub struct WaitGraph {
    /// Every edge, by waiter, then key, then holder.
    edges: Vec<Edge>,
    /// Each waiting process's chain.
    chains: BTreeMap<u32, Chain>,
    cycles: Vec<Cycle>,
    /// Each root blocker with how many processes wait on it, directly or
    /// not.
    roots: BTreeMap<u32, usize>,
    /// Each process of the graph with its start.
    starts: HashMap<u32, Option<SystemTime>>,
}

impl WaitGraph {
    /// The graph of `held` (every held key with its state; free ones are
    /// skipped) at `now`; a cycle with the same processes as one of
    /// `before` keeps its `since`.
    pub fn build<'a>(
        held: impl IntoIterator<Item = (&'a LockKey, &'a KeyState)>,
        now: SystemTime,
        before: Option<&WaitGraph>,
    ) -> Self {
        Self::built(held, Some(now), before)
    }

    /// The graph of `held` seen in one look: its cycles' `since` is
    /// unknown, so none is a deadlock yet ([`MayClear::OneLook`]).
    pub fn build_once<'a>(held: impl IntoIterator<Item = (&'a LockKey, &'a KeyState)>) -> Self {
        Self::built(held, None, None)
    }

    fn built<'a>(
        held: impl IntoIterator<Item = (&'a LockKey, &'a KeyState)>,
        now: Option<SystemTime>,
        before: Option<&WaitGraph>,
    ) -> Self {
        let held: Vec<HeldKey<'a>> = held
            .into_iter()
            .filter(|(_, state)| state.liveness.is_held())
            .map(|(key, state)| HeldKey { key, state })
            .collect();
        if held.iter().all(|held| held.state.waiting.is_empty()) {
            return Self::default();
        }
        // Who holds what: each process (PID and start) and its keys.
        let mut holding: BTreeMap<Node, Holding> = BTreeMap::new();
        for held in &held {
            for holder in held.state.holders.iter().filter(|h| h.alive) {
                let entry = holding.entry((holder.pid, holder.started)).or_default();
                entry.keys.insert(held.key.clone());
                entry.unverified |= holder.unverified;
            }
        }
        // The edges, between processes (a waiter is the process holding
        // under its PID only with the same start).
        let mut edges: Vec<(Node, Node, Edge)> = Vec::new();
        for held in &held {
            let holders: Vec<_> = held.state.holders.iter().filter(|h| h.alive).collect();
            for waiting in &held.state.waiting {
                if holders.iter().any(|holder| holder.pid == waiting.pid) {
                    continue;
                }
                for holder in &holders {
                    edges.push((
                        (waiting.pid, waiting.started),
                        (holder.pid, holder.started),
                        Edge {
                            waiter: waiting.pid,
                            how: waiting.how,
                            key: held.key.clone(),
                            holder: holder.pid,
                            holder_verified: !holder.unverified,
                        },
                    ));
                }
            }
        }
        edges.sort_by(|a, b| (a.0, &a.2.key, a.1, a.2.how).cmp(&(b.0, &b.2.key, b.1, b.2.how)));
        edges.dedup_by(|a, b| a.0 == b.0 && a.1 == b.1 && a.2.key == b.2.key);
        let mut graph = Graph::default();
        for (from, to, _) in &edges {
            graph.add(*from, *to);
        }
        let parts = graph.strongly_connected();
        let mut out: BTreeMap<Node, Vec<usize>> = BTreeMap::new();
        for (at, (from, _, _)) in edges.iter().enumerate() {
            out.entry(*from).or_default().push(at);
        }
        let mut starts: HashMap<u32, Option<SystemTime>> = HashMap::new();
        for (from, to, _) in &edges {
            starts.entry(from.0).or_insert(from.1);
            starts.entry(to.0).or_insert(to.1);
        }
        // Cycles: each part of two processes or more, one circle through
        // its lowest member.
        let mut cycle_of: BTreeMap<Node, usize> = BTreeMap::new();
        let mut cycles = Vec::new();
        for part in parts.iter().filter(|part| part.len() >= 2) {
            let members: BTreeSet<Node> = part.iter().copied().collect();
            let first = *members.first().expect("two or more");
            let circle = circle_through(first, &members, &out, &edges);
            let hops: Vec<Edge> = circle.iter().map(|&at| edges[at].2.clone()).collect();
            for node in &members {
                cycle_of.insert(*node, cycles.len());
            }
            let mayclear = mayclear(&hops, &members, &holding);
            cycles.push(Cycle {
                victim: victim(&members, &holding),
                members: members.iter().map(|node| node.0).collect(),
                hops,
                since: now,
                mayclear,
            });
        }
        if let Some(before) = before {
            for cycle in &mut cycles {
                let identity = cycle.identity(&starts);
                if let Some(old) = before
                    .cycles
                    .iter()
                    .find(|old| old.identity(&before.starts) == identity)
                {
                    cycle.since = old.since.or(cycle.since);
                }
            }
        }
        // Chains: from every waiting process, the nearest end (a process
        // waiting for nothing, or a cycle), breadth first.
        let mut chains = BTreeMap::new();
        for &from in out.keys() {
            let chain = match cycle_of.get(&from) {
                Some(&cycle) => Chain {
                    hops: Vec::new(),
                    end: ChainEnd::Cycle(cycle),
                },
                None => nearest_end(from, &out, &edges, &cycle_of),
            };
            chains.insert(from.0, chain);
        }
        // Roots: how many processes wait on each, directly or not.
        let mut roots: BTreeMap<u32, usize> = BTreeMap::new();
        let mut into: BTreeMap<Node, Vec<Node>> = BTreeMap::new();
        for (from, to, _) in &edges {
            into.entry(*to).or_default().push(*from);
        }
        for root in into.keys().filter(|node| !out.contains_key(node)) {
            roots.insert(root.0, reaching(*root, &into).len());
        }
        WaitGraph {
            edges: edges.into_iter().map(|(_, _, edge)| edge).collect(),
            chains,
            cycles,
            roots,
            starts,
        }
    }

    /// True when nobody waits on any held key.
    pub fn is_empty(&self) -> bool {
        self.edges.is_empty()
    }

    /// Every edge, by waiter, then key.
    pub fn edges(&self) -> &[Edge] {
        &self.edges
    }

    /// The cycles, by their lowest PID.
    pub fn cycles(&self) -> &[Cycle] {
        &self.cycles
    }

    /// The chain of `pid` (as the process started at `started`: a PID
    /// reused by another process has none), when it waits.
    pub fn chain_of(&self, pid: u32, started: Option<SystemTime>) -> Option<&Chain> {
        if self.starts.get(&pid).is_some_and(|known| *known != started) {
            return None;
        }
        self.chains.get(&pid)
    }

    /// Every waiting process with its chain, by PID.
    pub fn chains(&self) -> impl Iterator<Item = (u32, &Chain)> {
        self.chains.iter().map(|(pid, chain)| (*pid, chain))
    }

    /// The cycle `key` is waited on in, if any.
    pub fn cycle_with_key(&self, key: &LockKey) -> Option<&Cycle> {
        self.cycles.iter().find(|cycle| cycle.has_key(key))
    }

    /// Every root blocker with how many processes wait on it, directly
    /// or not: most blocking first, then by PID.
    pub fn roots(&self) -> Vec<(u32, usize)> {
        let mut roots: Vec<(u32, usize)> = self.roots.iter().map(|(p, n)| (*p, *n)).collect();
        roots.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        roots
    }

    /// How many processes wait on `pid`, directly or not (0 when it is no
    /// root blocker).
    pub fn blocked_by(&self, pid: u32) -> usize {
        self.roots.get(&pid).copied().unwrap_or_default()
    }

    /// The most hops of any chain (0 when nobody waits).
    pub fn longest_chain(&self) -> usize {
        self.chains
            .values()
            .map(|chain| chain.hops.len())
            .max()
            .unwrap_or_default()
    }

    /// The cycles that are deadlocks at `now` ([`Cycle::deadlock`]).
    pub fn deadlocks(&self, now: SystemTime) -> impl Iterator<Item = &Cycle> {
        self.cycles
            .iter()
            .filter(move |cycle| cycle.deadlock(now).is_ok())
    }

    /// True when the same processes wait in the same circles and
    /// chains, the same edges: nothing any verdict reads changed.
    pub fn same_waits(&self, other: &WaitGraph) -> bool {
        self.edges == other.edges && self.starts == other.starts
    }

    /// True when `pid` waits or is waited on in the graph.
    pub fn involves(&self, pid: u32) -> bool {
        self.starts.contains_key(&pid)
    }

    /// Every PID of the graph, waiting or holding.
    pub fn pids(&self) -> impl Iterator<Item = u32> + '_ {
        self.starts.keys().copied()
    }
}

/// The graph as data (`snapshot --json`, `check --json`, `/snapshot.json`):
/// its cycles, each waiting process's chain, and the root blockers.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct WaitsDoc {
    /// Every cycle of waits, by its lowest PID.
    pub cycles: Vec<CycleDoc>,
    /// Every waiting process with its chain, by PID.
    pub chains: Vec<ChainDoc>,
    /// Every root blocker with how many processes wait on it, directly
    /// or not, most first.
    pub roots: Vec<RootDoc>,
    /// The most hops of any chain.
    pub longest_chain: usize,
}

/// One cycle as data.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CycleDoc {
    /// One circle through it (see [`Cycle::hops`]).
    pub hops: Vec<Hop>,
    /// Every process of it.
    pub members: Vec<u32>,
    /// True when it is a deadlock by [`Cycle::deadlock`]'s rule.
    pub deadlock: bool,
    /// Why it may clear, when it is no deadlock.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub may_clear: Option<MayClear>,
    /// Since when it stands (`null`: seen in one look).
    #[serde(with = "crate::time_format::option")]
    pub since: Option<SystemTime>,
    /// The process to signal to break it.
    pub signal: u32,
}

/// One waiting process's chain as data.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ChainDoc {
    /// The waiting process.
    pub pid: u32,
    /// Its waits, hop by hop (empty for a member of a cycle).
    pub hops: Vec<Hop>,
    /// The root blocker it ends at, if it ends at one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub root: Option<u32>,
    /// The cycle it ends in (its place in `cycles`), if it ends in one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cycle: Option<usize>,
}

/// One root blocker as data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RootDoc {
    /// The process at the end of chains, waiting for nothing.
    pub pid: u32,
    /// How many processes wait on it, directly or not.
    pub waiting: usize,
}

impl WaitGraph {
    /// The graph as data, its cycles judged at `now`.
    pub fn doc(&self, now: SystemTime) -> WaitsDoc {
        let hops = |edges: &[Edge]| edges.iter().map(Hop::of).collect();
        WaitsDoc {
            cycles: self
                .cycles
                .iter()
                .map(|cycle| CycleDoc {
                    hops: hops(&cycle.hops),
                    members: cycle.members.clone(),
                    deadlock: cycle.deadlock(now).is_ok(),
                    may_clear: cycle.deadlock(now).err(),
                    since: cycle.since,
                    signal: cycle.victim,
                })
                .collect(),
            chains: self
                .chains
                .iter()
                .map(|(pid, chain)| ChainDoc {
                    pid: *pid,
                    hops: hops(&chain.hops),
                    root: match chain.end {
                        ChainEnd::Root(root) => Some(root),
                        ChainEnd::Cycle(_) => None,
                    },
                    cycle: match chain.end {
                        ChainEnd::Root(_) => None,
                        ChainEnd::Cycle(at) => Some(at),
                    },
                })
                .collect(),
            roots: self
                .roots()
                .into_iter()
                .map(|(pid, waiting)| RootDoc { pid, waiting })
                .collect(),
            longest_chain: self.longest_chain(),
        }
    }
}

/// What one process holds.
#[derive(Debug, Default)]
struct Holding {
    keys: BTreeSet<LockKey>,
    unverified: bool,
}

impl Holding {
    /// How many agents' instance locks it holds.
    fn agents(&self) -> usize {
        self.keys
            .iter()
            .filter(|key| key.kind() == KeyKind::Instance)
            .count()
    }
}

/// The cycle rule's "may clear" for a circle `hops` through the part
/// `members` ([`Cycle::deadlock`], less the clock).
fn mayclear(
    hops: &[Edge],
    members: &BTreeSet<Node>,
    holding: &BTreeMap<Node, Holding>,
) -> Option<MayClear> {
    if let Some(hop) = hops.iter().find(|hop| !hop.how.is_blocked()) {
        return Some(MayClear::TryLoop { pid: hop.waiter });
    }
    if let Some(hop) = hops.iter().find(|hop| !hop.holder_verified) {
        return Some(MayClear::Unverified { pid: hop.holder });
    }
    members
        .iter()
        .find(|node| holding.get(node).is_some_and(|held| held.agents() > 1))
        .map(|node| MayClear::SeveralAgents { pid: node.0 })
}

/// The member to signal to break a cycle: a verified holder of one of
/// its keys, holding the fewest keys (its end frees the least besides the
/// cycle), then the youngest (it has done the least work), then the
/// highest PID. PostgreSQL breaks a deadlock by cancelling one
/// transaction; here locktop only offers, and the operator signals.
fn victim(members: &BTreeSet<Node>, holding: &BTreeMap<Node, Holding>) -> u32 {
    members
        .iter()
        .filter_map(|node| Some((node, holding.get(node)?)))
        .filter(|(_, held)| !held.unverified)
        .min_by(|(a, held_a), (b, held_b)| {
            held_a
                .keys
                .len()
                .cmp(&held_b.keys.len())
                .then(b.1.cmp(&a.1))
                .then(b.0.cmp(&a.0))
        })
        .map_or_else(
            || members.first().map_or(0, |node| node.0),
            |(node, _)| node.0,
        )
}

/// One circle from `first` back to it inside `members`: the shortest,
/// breadth first over the edges in order.
fn circle_through(
    first: Node,
    members: &BTreeSet<Node>,
    out: &BTreeMap<Node, Vec<usize>>,
    edges: &[(Node, Node, Edge)],
) -> Vec<usize> {
    let mut came_by: BTreeMap<Node, usize> = BTreeMap::new();
    let mut queue = VecDeque::from([first]);
    while let Some(node) = queue.pop_front() {
        for &at in out.get(&node).into_iter().flatten() {
            let next = edges[at].1;
            if !members.contains(&next) {
                continue;
            }
            if next == first {
                let mut path = vec![at];
                let mut back = node;
                while back != first {
                    let by = came_by[&back];
                    path.push(by);
                    back = edges[by].0;
                }
                path.reverse();
                return path;
            }
            if let std::collections::btree_map::Entry::Vacant(entry) = came_by.entry(next) {
                entry.insert(at);
                queue.push_back(next);
            }
        }
    }
    Vec::new()
}

/// The chain from `from` (in no cycle) to its nearest end.
fn nearest_end(
    from: Node,
    out: &BTreeMap<Node, Vec<usize>>,
    edges: &[(Node, Node, Edge)],
    cycle_of: &BTreeMap<Node, usize>,
) -> Chain {
    let mut came_by: BTreeMap<Node, usize> = BTreeMap::new();
    let mut queue = VecDeque::from([from]);
    let path_to = |mut node: Node, came_by: &BTreeMap<Node, usize>| {
        let mut path = Vec::new();
        while node != from {
            let by = came_by[&node];
            path.push(edges[by].2.clone());
            node = edges[by].0;
        }
        path.reverse();
        path
    };
    while let Some(node) = queue.pop_front() {
        if node != from {
            if let Some(&cycle) = cycle_of.get(&node) {
                return Chain {
                    hops: path_to(node, &came_by),
                    end: ChainEnd::Cycle(cycle),
                };
            }
            if !out.contains_key(&node) {
                return Chain {
                    hops: path_to(node, &came_by),
                    end: ChainEnd::Root(node.0),
                };
            }
        }
        for &at in out.get(&node).into_iter().flatten() {
            let next = edges[at].1;
            if next != from && !came_by.contains_key(&next) {
                came_by.insert(next, at);
                queue.push_back(next);
            }
        }
    }
    // Every path leads back to `from` without a cycle through it: not
    // possible (that would be a cycle), so this is unreachable in
    // practice; answer with the waiter itself as its end.
    Chain {
        hops: Vec::new(),
        end: ChainEnd::Root(from.0),
    }
}

/// Every process that reaches `to` (itself not counted), over `into`.
fn reaching(to: Node, into: &BTreeMap<Node, Vec<Node>>) -> BTreeSet<Node> {
    let mut seen = BTreeSet::new();
    let mut stack = vec![to];
    while let Some(node) = stack.pop() {
        for &from in into.get(&node).into_iter().flatten() {
            if from != to && seen.insert(from) {
                stack.push(from);
            }
        }
    }
    seen
}

/// One wait of a chain or circle: `pid` waits (`how`) on a key, held by
/// `holder`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Hop {
    /// The waiting process.
    pub pid: u32,
    /// How it waits.
    pub how: WaitKind,
    /// The key's kind.
    pub kind: KeyKind,
    /// The key's name (AIH or tag).
    pub key: String,
    /// The process holding it.
    pub holder: u32,
}

impl Hop {
    /// The hop of `edge`.
    pub fn of(edge: &Edge) -> Self {
        Hop {
            pid: edge.waiter,
            how: edge.how,
            kind: edge.key.kind(),
            key: edge.key.name().to_string(),
            holder: edge.holder,
        }
    }

    /// `tag "b"`.
    pub fn label(&self) -> String {
        crate::disk::key::label(self.kind, &self.key)
    }
}

/// A circle in words: `pid 1 holds tag "a", waits to take tag "b" held
/// by pid 2, which waits to take tag "a"`.
pub fn circle_words(cycle: &[Hop]) -> String {
    let Some(first) = cycle.first() else {
        return String::new();
    };
    let holds = cycle.last().map(Hop::label).unwrap_or_default();
    let mut words = format!(
        "pid {} holds {holds}, {} {} held by pid {}",
        first.pid,
        first.how.verb(),
        first.label(),
        first.holder
    );
    for (at, hop) in cycle.iter().enumerate().skip(1) {
        if at + 1 == cycle.len() {
            words.push_str(&format!(", which {} {}", hop.how.verb(), hop.label()));
        } else {
            words.push_str(&format!(
                ", which {} {} held by pid {}",
                hop.how.verb(),
                hop.label(),
                hop.holder
            ));
        }
    }
    words
}

/// A chain in words: `pid 2 waits to take tag "c" held by pid 3, which
/// waits to take tag "d" held by pid 4`.
pub fn chain_words(chain: &[Hop]) -> String {
    let mut words = String::new();
    for (at, hop) in chain.iter().enumerate() {
        if at == 0 {
            words.push_str(&format!("pid {} ", hop.pid));
        } else {
            words.push_str(", which ");
        }
        words.push_str(&format!(
            "{} {} held by pid {}",
            hop.how.verb(),
            hop.label(),
            hop.holder
        ));
    }
    words
}

/// Adjacency by node, for the strongly connected parts.
#[derive(Default)]
struct Graph {
    nodes: Vec<Node>,
    at: HashMap<Node, usize>,
    next: Vec<Vec<usize>>,
}

impl Graph {
    fn node(&mut self, node: Node) -> usize {
        if let Some(&at) = self.at.get(&node) {
            return at;
        }
        self.nodes.push(node);
        self.next.push(Vec::new());
        self.at.insert(node, self.nodes.len() - 1);
        self.nodes.len() - 1
    }

    fn add(&mut self, from: Node, to: Node) {
        let (from, to) = (self.node(from), self.node(to));
        self.next[from].push(to);
    }

    /// Tarjan's strongly connected parts, iteratively (a chain of a
    /// thousand waiters must not recurse a thousand frames deep).
    fn strongly_connected(&self) -> Vec<Vec<Node>> {
        let count = self.nodes.len();
        let mut index = vec![usize::MAX; count];
        let mut low = vec![0; count];
        let mut on_stack = vec![false; count];
        let mut stack = Vec::new();
        let mut parts = Vec::new();
        let mut next_index = 0;
        for start in 0..count {
            if index[start] != usize::MAX {
                continue;
            }
            // (node, position in its successors)
            let mut work = vec![(start, 0usize)];
            index[start] = next_index;
            low[start] = next_index;
            next_index += 1;
            stack.push(start);
            on_stack[start] = true;
            while let Some(&mut (node, ref mut at)) = work.last_mut() {
                if let Some(&succ) = self.next[node].get(*at) {
                    *at += 1;
                    if index[succ] == usize::MAX {
                        index[succ] = next_index;
                        low[succ] = next_index;
                        next_index += 1;
                        stack.push(succ);
                        on_stack[succ] = true;
                        work.push((succ, 0));
                    } else if on_stack[succ] {
                        low[node] = low[node].min(index[succ]);
                    }
                    continue;
                }
                work.pop();
                if let Some(&(parent, _)) = work.last() {
                    low[parent] = low[parent].min(low[node]);
                }
                if low[node] == index[node] {
                    let mut part = Vec::new();
                    while let Some(member) = stack.pop() {
                        on_stack[member] = false;
                        part.push(self.nodes[member]);
                        if member == node {
                            break;
                        }
                    }
                    part.sort();
                    parts.push(part);
                }
            }
        }
        parts
    }
}

#[cfg(test)]
mod tests;
