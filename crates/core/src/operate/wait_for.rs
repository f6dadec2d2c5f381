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
//! Invariants: built from the keys someone waits on alone (no I/O; what
//! each process holds besides is asked of the caller), so it costs the
//! waits, never the keys nobody waits on — the held view does not build
//! it at all while nobody waits; every chain ends at a root or at a
//! cycle, found by one search back from the ends; a process is in at
//! most one cycle; everything is ordered (by PID, then key), so the same
//! states always give the same graph.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet, VecDeque};
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
    /// was seen in one look only (a one-shot view: `HeldView::of`).
    pub since: Option<SystemTime>,
    /// The member to signal to break it (a verified holder of one of its
    /// keys holding the fewest keys, then the youngest, then the highest
    /// PID: its end frees the least besides the circle, and it has done
    /// the least work).
    pub victim: u32,
    mayclear: Option<MayClear>,
    /// Its processes with their starts: its identity from graph to graph.
    nodes: Vec<Node>,
    /// Every key waited on between two of its processes.
    keys: BTreeSet<LockKey>,
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

    /// True when `key` is waited on between two of its processes (on the
    /// circle shown or on another through the same processes).
    pub fn has_key(&self, key: &LockKey) -> bool {
        self.keys.contains(key)
    }

    /// Everything a verdict reads of it but its age.
    fn same_as(&self, other: &Cycle) -> bool {
        self.nodes == other.nodes
            && self.hops == other.hops
            && self.victim == other.victim
            && self.mayclear == other.mayclear
            && self.keys == other.keys
    }
}

/// What a process holds besides its waits, as the deadlock rule and the
/// choice of whom to signal read it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Holdings {
    /// How many keys it holds.
    pub keys: usize,
    /// How many of them are instance locks (agents).
    pub agents: usize,
}

/// One link of a waiting process's chain: its first wait on the way to
/// the nearest end, that end, and how many waits away it is.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Link {
    /// The edge taken first (`None`: a member of a cycle, its own end).
    next: Option<usize>,
    end: End,
    len: usize,
}

/// Where a chain ends, by identity (comparable between graphs).
#[derive(Debug, Clone, PartialEq, Eq)]
enum End {
    Root(Node),
    Cycle(usize),
}

/// The wait-for graph of a set of held keys.
#[derive(Debug, Clone, Default)]
pub struct WaitGraph {
    /// Every edge, by waiter, then key, then holder.
    edges: Vec<Edge>,
    /// Each edge's waiter and holder processes.
    ends: Vec<(Node, Node)>,
    /// Each waiting process's link towards its chain's end.
    links: BTreeMap<Node, Link>,
    cycles: Vec<Cycle>,
    /// Each root blocker with how many processes wait on it, directly or
    /// not.
    roots: BTreeMap<Node, usize>,
    /// Every PID of the graph.
    pids: HashSet<u32>,
}

impl WaitGraph {
    /// The graph of `held` (every held key with its state; free ones are
    /// skipped; what each process holds is counted from them) at `now`;
    /// a cycle with the same processes as one of `before` keeps its
    /// `since`.
    pub fn build<'a>(
        held: impl IntoIterator<Item = (&'a LockKey, &'a KeyState)>,
        now: SystemTime,
        before: Option<&WaitGraph>,
    ) -> Self {
        let now = Some(now);
        let held: Vec<(&LockKey, &KeyState)> = held
            .into_iter()
            .filter(|(_, state)| state.liveness.is_held())
            .collect();
        if held.iter().all(|(_, state)| state.waiting.is_empty()) {
            return Self::default();
        }
        let mut holdings: HashMap<u32, Holdings> = HashMap::new();
        for (key, state) in &held {
            for holder in state.holders.iter().filter(|h| h.alive) {
                let entry = holdings.entry(holder.pid).or_default();
                entry.keys += 1;
                entry.agents += usize::from(key.kind() == KeyKind::Instance);
            }
        }
        let waited = held.iter().filter(|(_, state)| !state.waiting.is_empty());
        Self::of_waited(
            waited.copied(),
            &|pid| holdings.get(&pid).copied().unwrap_or_default(),
            now,
            before,
        )
    }

    /// The graph of the `waited` keys (held keys someone waits on, with
    /// their states; others are skipped), what each process holds told by
    /// `holdings`, at `now` (`None`: one look); a cycle with the same
    /// processes as one of `before` keeps its `since`. Costs the waits,
    /// never the keys nobody waits on.
    pub fn of_waited<'a>(
        waited: impl IntoIterator<Item = (&'a LockKey, &'a KeyState)>,
        holdings: &dyn Fn(u32) -> Holdings,
        now: Option<SystemTime>,
        before: Option<&WaitGraph>,
    ) -> Self {
        // The edges, between processes (a waiter is the process holding
        // under its PID only with the same start).
        let mut edges: Vec<(Node, Node, Edge)> = Vec::new();
        for (key, state) in waited {
            if !state.liveness.is_held() {
                continue;
            }
            let holders: Vec<_> = state.holders.iter().filter(|h| h.alive).collect();
            for waiting in &state.waiting {
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
                            key: key.clone(),
                            holder: holder.pid,
                            holder_verified: !holder.unverified,
                        },
                    ));
                }
            }
        }
        if edges.is_empty() {
            return Self::default();
        }
        edges.sort_by(|a, b| (a.0, &a.2.key, a.1, a.2.how).cmp(&(b.0, &b.2.key, b.1, b.2.how)));
        edges.dedup_by(|a, b| a.0 == b.0 && a.1 == b.1 && a.2.key == b.2.key);
        let mut out: BTreeMap<Node, Vec<usize>> = BTreeMap::new();
        let mut into: BTreeMap<Node, Vec<usize>> = BTreeMap::new();
        for (at, (from, to, _)) in edges.iter().enumerate() {
            out.entry(*from).or_default().push(at);
            into.entry(*to).or_default().push(at);
        }
        let unverified: BTreeSet<Node> = edges
            .iter()
            .filter(|(_, _, edge)| !edge.holder_verified)
            .map(|(_, to, _)| *to)
            .collect();
        // A poller holds nothing between its tries: it starts a chain, and
        // its polls close no circle.
        let mut graph = Graph::default();
        for (from, to, edge) in &edges {
            if edge.how != WaitKind::Polling {
                graph.add(*from, *to);
            }
        }
        // Cycles: each part of two processes or more.
        let mut cycle_of: BTreeMap<Node, usize> = BTreeMap::new();
        let mut cycles = Vec::new();
        for part in graph
            .strongly_connected()
            .into_iter()
            .filter(|part| part.len() >= 2)
        {
            let members: BTreeSet<Node> = part.iter().copied().collect();
            for node in &members {
                cycle_of.insert(*node, cycles.len());
            }
            cycles.push(cycle_of_part(
                &members,
                &edges,
                &out,
                holdings,
                &unverified,
                now,
            ));
        }
        if let Some(before) = before {
            for cycle in &mut cycles {
                if let Some(old) = before.cycles.iter().find(|old| old.nodes == cycle.nodes) {
                    cycle.since = old.since.or(cycle.since);
                }
            }
        }
        // Chains: from every end (a process waiting for nothing, or a
        // cycle's member), back along the waits, breadth first: each
        // waiting process's first step towards its nearest end.
        let mut links: BTreeMap<Node, Link> = BTreeMap::new();
        let mut queue = VecDeque::new();
        for (node, &cycle) in &cycle_of {
            links.insert(
                *node,
                Link {
                    next: None,
                    end: End::Cycle(cycle),
                    len: 0,
                },
            );
            queue.push_back(*node);
        }
        // A root waits for nothing but polls, if that: a poller is not
        // blocked.
        let blocking = |node: &Node| {
            out.get(node)
                .is_some_and(|ats| ats.iter().any(|&at| edges[at].2.how != WaitKind::Polling))
        };
        let mut roots: BTreeMap<Node, usize> = BTreeMap::new();
        for node in into.keys().filter(|node| !blocking(node)) {
            roots.insert(*node, 0);
            queue.push_back(*node);
        }
        let end_of = |node: &Node, links: &BTreeMap<Node, Link>| match links.get(node) {
            Some(link) => link.end.clone(),
            None => End::Root(*node),
        };
        let len_of =
            |node: &Node, links: &BTreeMap<Node, Link>| links.get(node).map_or(0, |l| l.len);
        while let Some(node) = queue.pop_front() {
            let (end, len) = (end_of(&node, &links), len_of(&node, &links));
            for &at in into.get(&node).into_iter().flatten() {
                let waiter = edges[at].0;
                if edges[at].2.how == WaitKind::Polling
                    || links.contains_key(&waiter)
                    || roots.contains_key(&waiter)
                {
                    continue;
                }
                links.insert(
                    waiter,
                    Link {
                        next: Some(at),
                        end: end.clone(),
                        len: len + 1,
                    },
                );
                queue.push_back(waiter);
            }
        }
        // A process that only polls starts its chain with its nearest poll.
        let pollers: Vec<Node> = out
            .keys()
            .filter(|node| !links.contains_key(node) && !blocking(node))
            .copied()
            .collect();
        for poller in pollers {
            let best = out[&poller]
                .iter()
                .map(|&at| (len_of(&edges[at].1, &links), at))
                .min();
            if let Some((len, at)) = best {
                let end = end_of(&edges[at].1, &links);
                links.insert(
                    poller,
                    Link {
                        next: Some(at),
                        end,
                        len: len + 1,
                    },
                );
            }
        }
        // Roots: how many processes wait on each, directly or not.
        for (root, count) in &mut roots {
            *count = reaching(*root, &into, &edges).len();
        }
        let pids = edges
            .iter()
            .flat_map(|(from, to, _)| [from.0, to.0])
            .collect();
        let ends = edges.iter().map(|(from, to, _)| (*from, *to)).collect();
        WaitGraph {
            edges: edges.into_iter().map(|(_, _, edge)| edge).collect(),
            ends,
            links,
            cycles,
            roots,
            pids,
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

    /// The chain of the process `pid` started at `started` (a PID reused
    /// by another process has none), when it waits.
    pub fn chain_of(&self, pid: u32, started: Option<SystemTime>) -> Option<Chain> {
        self.chain_from(&(pid, started))
    }

    fn chain_from(&self, node: &Node) -> Option<Chain> {
        let link = self.links.get(node)?;
        let mut hops = Vec::with_capacity(link.len);
        let mut next = link.next;
        // `len` hops exactly: a poller's chain may come back through it.
        while let Some(at) = next.filter(|_| hops.len() < link.len) {
            hops.push(self.edges[at].clone());
            next = self.links.get(&self.ends[at].1).and_then(|link| link.next);
        }
        let end = match &link.end {
            End::Root(root) => ChainEnd::Root(root.0),
            End::Cycle(at) => ChainEnd::Cycle(*at),
        };
        Some(Chain { hops, end })
    }

    /// Every waiting process with its chain, by PID.
    pub fn chains(&self) -> impl Iterator<Item = (u32, Chain)> + '_ {
        self.links
            .keys()
            .filter_map(|node| Some((node.0, self.chain_from(node)?)))
    }

    /// The cycle `key` is waited on in, if any.
    pub fn cycle_with_key(&self, key: &LockKey) -> Option<&Cycle> {
        self.cycles.iter().find(|cycle| cycle.has_key(key))
    }

    /// Every root blocker with how many processes wait on it, directly
    /// or not: most blocking first, then by PID.
    pub fn roots(&self) -> Vec<(u32, usize)> {
        let mut roots: Vec<(u32, usize)> =
            self.roots.iter().map(|(node, n)| (node.0, *n)).collect();
        roots.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        roots
    }

    /// How many processes wait on `pid`, directly or not (0 when it is no
    /// root blocker).
    pub fn blocked_by(&self, pid: u32) -> usize {
        self.roots
            .iter()
            .filter(|(node, _)| node.0 == pid)
            .map(|(_, n)| *n)
            .max()
            .unwrap_or_default()
    }

    /// The most waits in a row: the most hops of any chain, or of any
    /// cycle's circle (whose members wait on each other in turn); 0 when
    /// nobody waits.
    pub fn longest_chain(&self) -> usize {
        let chains = self.links.values().map(|link| link.len);
        let circles = self.cycles.iter().map(|cycle| cycle.hops.len());
        chains.chain(circles).max().unwrap_or_default()
    }

    /// The cycles that are deadlocks at `now` ([`Cycle::deadlock`]).
    pub fn deadlocks(&self, now: SystemTime) -> impl Iterator<Item = &Cycle> {
        self.cycles
            .iter()
            .filter(move |cycle| cycle.deadlock(now).is_ok())
    }

    /// The PIDs whose chain or cycle differs between `self` and `other`
    /// (each process's first wait, its end, its distance; each cycle's
    /// processes, circle, victim and reason), and the keys of the cycles
    /// that differ: what a verdict reads of the graph, but the clock.
    /// Empty when nothing any verdict reads changed.
    pub fn changes_from(&self, other: &WaitGraph) -> (BTreeSet<u32>, BTreeSet<LockKey>) {
        let mut pids = BTreeSet::new();
        let mut keys = BTreeSet::new();
        fn link_of<'g>(graph: &'g WaitGraph, node: &Node) -> Option<LinkView<'g>> {
            graph.links.get(node).map(|link| {
                let next = link.next.map(|at| (&graph.edges[at], graph.ends[at]));
                let end = match &link.end {
                    End::Root(root) => (Some(*root), None),
                    End::Cycle(at) => (None, Some(&graph.cycles[*at].nodes)),
                };
                (next, end, link.len)
            })
        }
        for node in self.links.keys().chain(other.links.keys()) {
            if link_of(self, node) != link_of(other, node) {
                pids.insert(node.0);
            }
        }
        let same = |cycle: &Cycle, graph: &WaitGraph| {
            graph.cycles.iter().any(|other| other.same_as(cycle))
        };
        for (cycle, graph) in self
            .cycles
            .iter()
            .map(|cycle| (cycle, other))
            .chain(other.cycles.iter().map(|cycle| (cycle, self)))
        {
            if !same(cycle, graph) {
                pids.extend(cycle.members.iter().copied());
                keys.extend(cycle.keys.iter().cloned());
            }
        }
        (pids, keys)
    }

    /// True when `pid` waits or is waited on in the graph.
    pub fn involves(&self, pid: u32) -> bool {
        self.pids.contains(&pid)
    }
}

/// A link as compared between graphs: its first edge and processes, its
/// end (a root, or a cycle's processes), its length.
type LinkView<'g> = (
    Option<(&'g Edge, (Node, Node))>,
    (Option<Node>, Option<&'g Vec<Node>>),
    usize,
);

/// The cycle of the strongly connected part `members`: a deadlock when
/// the blocked waits between verified holders alone still make a circle
/// (a part of its own) through processes that each hold for one agent —
/// then that circle is the one shown; otherwise one circle through its
/// lowest process, with why it may clear.
fn cycle_of_part(
    members: &BTreeSet<Node>,
    edges: &[(Node, Node, Edge)],
    out: &BTreeMap<Node, Vec<usize>>,
    holdings: &dyn Fn(u32) -> Holdings,
    unverified: &BTreeSet<Node>,
    now: Option<SystemTime>,
) -> Cycle {
    let inside =
        |at: &usize| members.contains(&edges[*at].1) && edges[*at].2.how != WaitKind::Polling;
    let strict = |at: &usize| {
        let edge = &edges[*at].2;
        inside(at) && edge.how.is_blocked() && edge.holder_verified
    };
    let several = |node: &Node| holdings(node.0).agents > 1;
    let mut strict_graph = Graph::default();
    for node in members {
        for at in out.get(node).into_iter().flatten().filter(|at| strict(at)) {
            strict_graph.add(*node, edges[*at].1);
        }
    }
    let strict_parts: Vec<Vec<Node>> = strict_graph
        .strongly_connected()
        .into_iter()
        .filter(|part| part.len() >= 2)
        .collect();
    let capable = strict_parts
        .iter()
        .find(|part| !part.iter().any(several))
        .map(|part| part.iter().copied().collect::<BTreeSet<Node>>());
    let (hops, mayclear) = match &capable {
        Some(part) => {
            let first = *part.first().expect("two or more");
            let circle = circle_through(first, part, out, edges, &strict);
            (circle, None)
        }
        None => {
            let first = *members.first().expect("two or more");
            let circle = circle_through(first, members, out, edges, &inside);
            let hops: Vec<&Edge> = circle.iter().map(|&at| &edges[at].2).collect();
            let why = if let Some(node) = strict_parts.iter().flatten().find(|n| several(n)) {
                MayClear::SeveralAgents { pid: node.0 }
            } else if let Some(hop) = hops.iter().find(|hop| !hop.how.is_blocked()) {
                MayClear::TryLoop { pid: hop.waiter }
            } else if let Some(hop) = hops.iter().find(|hop| !hop.holder_verified) {
                MayClear::Unverified { pid: hop.holder }
            } else if let Some(node) = members.iter().find(|node| several(node)) {
                MayClear::SeveralAgents { pid: node.0 }
            } else {
                // Every wait of the circle shown is strict, so some strict
                // part exists; it was ruled out above for several agents.
                MayClear::SeveralAgents {
                    pid: members.first().map_or(0, |node| node.0),
                }
            };
            (circle, Some(why))
        }
    };
    let keys = members
        .iter()
        .flat_map(|node| out.get(node).into_iter().flatten())
        .filter(|at| inside(at))
        .map(|&at| edges[at].2.key.clone())
        .collect();
    Cycle {
        hops: hops.iter().map(|&at| edges[at].2.clone()).collect(),
        members: members.iter().map(|node| node.0).collect(),
        since: now,
        victim: victim(members, holdings, unverified),
        mayclear,
        nodes: members.iter().copied().collect(),
        keys,
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
    /// The most waits in a row, along a chain or around a cycle
    /// ([`WaitGraph::longest_chain`]).
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
                .chains()
                .map(|(pid, chain)| ChainDoc {
                    pid,
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

/// The member to signal to break a cycle: a verified holder holding the
/// fewest keys (its end frees the least besides the cycle), then the
/// youngest (it has done the least work), then the highest PID.
/// PostgreSQL breaks a deadlock by cancelling one transaction; here
/// locktop only offers, and the operator signals.
fn victim(
    members: &BTreeSet<Node>,
    holdings: &dyn Fn(u32) -> Holdings,
    unverified: &BTreeSet<Node>,
) -> u32 {
    members
        .iter()
        .filter(|node| !unverified.contains(node))
        .min_by(|a, b| {
            holdings(a.0)
                .keys
                .cmp(&holdings(b.0).keys)
                .then(b.1.cmp(&a.1))
                .then(b.0.cmp(&a.0))
        })
        .or_else(|| members.first())
        .map_or(0, |node| node.0)
}

/// One circle from `first` back to it inside `members`, over the edges
/// `usable` accepts: the shortest, breadth first over the edges in order.
fn circle_through(
    first: Node,
    members: &BTreeSet<Node>,
    out: &BTreeMap<Node, Vec<usize>>,
    edges: &[(Node, Node, Edge)],
    usable: &dyn Fn(&usize) -> bool,
) -> Vec<usize> {
    let mut came_by: BTreeMap<Node, usize> = BTreeMap::new();
    let mut queue = VecDeque::from([first]);
    while let Some(node) = queue.pop_front() {
        for &at in out.get(&node).into_iter().flatten().filter(|at| usable(at)) {
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

/// Every process that reaches `to` (itself not counted), over the edges
/// into each process.
fn reaching(
    to: Node,
    into: &BTreeMap<Node, Vec<usize>>,
    edges: &[(Node, Node, Edge)],
) -> BTreeSet<Node> {
    let mut seen = BTreeSet::new();
    let mut stack = vec![to];
    while let Some(node) = stack.pop() {
        for &at in into.get(&node).into_iter().flatten() {
            let from = edges[at].0;
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
    let (Some(first), Some(last)) = (cycle.first(), cycle.last()) else {
        return String::new();
    };
    let before_last = &cycle[..cycle.len() - 1];
    let closing = format!("{} {}", last.how.verb(), last.label());
    let waits = if before_last.is_empty() {
        closing
    } else {
        format!("{}, which {closing}", hop_words(before_last))
    };
    format!("pid {} holds {}, {waits}", first.pid, last.label())
}

/// A chain in words: `pid 2 waits to take tag "c" held by pid 3, which
/// waits to take tag "d" held by pid 4`.
pub fn chain_words(chain: &[Hop]) -> String {
    match chain.first() {
        Some(first) => format!("pid {} {}", first.pid, hop_words(chain)),
        None => String::new(),
    }
}

/// `waits to take tag "c" held by pid 3, which waits to take …`.
fn hop_words(hops: &[Hop]) -> String {
    let words: Vec<String> = hops
        .iter()
        .map(|hop| {
            format!(
                "{} {} held by pid {}",
                hop.how.verb(),
                hop.label(),
                hop.holder
            )
        })
        .collect();
    words.join(", which ")
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
