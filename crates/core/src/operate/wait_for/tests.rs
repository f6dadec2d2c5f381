//! The wait-for graph on hand-made shapes, and on random ones against a
//! reference computed by brute force (reachability by Floyd–Warshall).

use std::collections::BTreeSet;
use std::time::Duration;

use proptest::prelude::*;

use super::*;
use crate::engine::fixtures::{held, instance, t, tag, waited_by};
use crate::liveness::process::ProcessInfo;
use crate::liveness::{KeyState, Liveness, WaitKind};

fn holds(pid: u32) -> KeyState {
    held(Liveness::Live, pid, "agent", t(0))
}

fn graph(states: &[(LockKey, KeyState)], now: SystemTime) -> WaitGraph {
    WaitGraph::build(states.iter().map(|(k, s)| (k, s)), now, None)
}

/// A holds a, waits for b; B holds b, waits for a.
fn two_cycle(how_a: WaitKind, how_b: WaitKind) -> Vec<(LockKey, KeyState)> {
    vec![
        (tag("a"), waited_by(holds(1), 2, how_b)),
        (tag("b"), waited_by(holds(2), 1, how_a)),
    ]
}

#[test]
fn nobody_waiting_is_an_empty_graph() {
    let states = vec![(tag("a"), holds(1)), (tag("b"), holds(2))];
    let graph = graph(&states, t(0));
    assert!(graph.is_empty());
    assert!(graph.cycles().is_empty());
    assert_eq!(graph.longest_chain(), 0);
}

#[test]
fn two_processes_waiting_on_each_other_are_a_cycle_and_a_deadlock_after_its_timeout() {
    let states = two_cycle(WaitKind::Contender, WaitKind::Contender);
    let young = graph(&states, t(10));
    assert_eq!(young.cycles().len(), 1);
    let cycle = &young.cycles()[0];
    assert_eq!(cycle.members, [1, 2]);
    let hops: Vec<(u32, &str, u32)> = cycle
        .hops
        .iter()
        .map(|hop| (hop.waiter, hop.key.name(), hop.holder))
        .collect();
    assert_eq!(hops, [(1, "b", 2), (2, "a", 1)], "from the lowest PID");
    assert_eq!(cycle.deadlock(t(10)), Err(MayClear::Young));
    // Rebuilt a second later from the same states: the cycle keeps its
    // start, and is now a deadlock.
    let later = WaitGraph::build(states.iter().map(|(k, s)| (k, s)), t(11), Some(&young));
    assert_eq!(later.cycles()[0].since, Some(t(10)));
    assert_eq!(later.cycles()[0].deadlock(t(11)), Ok(()));
    assert_eq!(later.deadlocks(t(11)).count(), 1);
    // A fresh graph with no memory of it calls it young again.
    assert_eq!(
        graph(&states, t(11)).cycles()[0].deadlock(t(11)),
        Err(MayClear::Young)
    );
}

#[test]
fn a_cycle_with_a_watchers_shared_wait_on_one_edge_is_a_deadlock() {
    let states = two_cycle(WaitKind::Watcher, WaitKind::Contender);
    let young = graph(&states, t(0));
    let later = WaitGraph::build(states.iter().map(|(k, s)| (k, s)), t(5), Some(&young));
    assert_eq!(later.cycles()[0].deadlock(t(5)), Ok(()));
}

#[test]
fn a_cycle_through_a_try_loop_may_clear() {
    let states = two_cycle(WaitKind::Trying, WaitKind::Contender);
    let graph = graph(&states, t(0));
    assert_eq!(
        graph.cycles()[0].deadlock(t(60)),
        Err(MayClear::TryLoop { pid: 1 })
    );
}

#[test]
fn a_cycle_through_an_unverified_holder_may_clear() {
    let mut states = two_cycle(WaitKind::Contender, WaitKind::Contender);
    states[1].1.holders[0].unverified = true;
    let graph = graph(&states, t(0));
    assert_eq!(
        graph.cycles()[0].deadlock(t(60)),
        Err(MayClear::Unverified { pid: 2 })
    );
}

#[test]
fn a_cycle_through_a_process_holding_two_agents_may_clear() {
    let mut states = two_cycle(WaitKind::Contender, WaitKind::Contender);
    states.push((instance("cli/x"), holds(2)));
    states.push((instance("cli/y"), holds(2)));
    let graph = graph(&states, t(0));
    assert_eq!(
        graph.cycles()[0].deadlock(t(60)),
        Err(MayClear::SeveralAgents { pid: 2 })
    );
}

#[test]
fn a_process_waiting_on_a_key_it_holds_itself_draws_no_edge() {
    let states = vec![(tag("a"), waited_by(holds(1), 1, WaitKind::Contender))];
    let graph = graph(&states, t(0));
    assert!(graph.is_empty(), "{:?}", graph.edges());
    assert!(graph.cycles().is_empty());
}

#[test]
fn a_reused_pid_is_never_joined_to_its_predecessors_keys() {
    // pid 2 waits on a (a process started at t(0)); the pid 2 holding b
    // started at t(5): another process. 1 waits on b. No cycle.
    let mut b = waited_by(holds(2), 1, WaitKind::Contender);
    b.holders[0].started = Some(t(5));
    let states = vec![
        (tag("a"), waited_by(holds(1), 2, WaitKind::Contender)),
        (tag("b"), b),
    ];
    let graph = graph(&states, t(10));
    assert!(graph.cycles().is_empty(), "{:?}", graph.cycles());
    assert_eq!(graph.edges().len(), 2);
}

#[test]
fn a_watcher_waiting_for_a_key_whose_holder_waits_for_nothing_is_a_chain() {
    let states = vec![(tag("a"), waited_by(holds(1), 2, WaitKind::Watcher))];
    let graph = graph(&states, t(0));
    assert!(graph.cycles().is_empty());
    let chain = graph.chain_of(2, Some(t(0))).expect("2 waits");
    assert_eq!(chain.end, ChainEnd::Root(1));
    assert_eq!(chain.hops.len(), 1);
    assert_eq!(graph.roots(), [(1, 1)]);
}

#[test]
fn a_chain_of_four_names_its_root_and_everyone_it_blocks() {
    // 4 waits on d (held by 3), 3 on c (held by 2), 2 on b (held by 1).
    let states = vec![
        (tag("b"), waited_by(holds(1), 2, WaitKind::Contender)),
        (tag("c"), waited_by(holds(2), 3, WaitKind::Contender)),
        (tag("d"), waited_by(holds(3), 4, WaitKind::Watcher)),
    ];
    let graph = graph(&states, t(0));
    let chain = graph.chain_of(4, Some(t(0))).unwrap();
    let hops: Vec<(u32, &str, u32)> = chain
        .hops
        .iter()
        .map(|hop| (hop.waiter, hop.key.name(), hop.holder))
        .collect();
    assert_eq!(hops, [(4, "d", 3), (3, "c", 2), (2, "b", 1)]);
    assert_eq!(chain.end, ChainEnd::Root(1));
    assert_eq!(graph.roots(), [(1, 3)]);
    assert_eq!(graph.blocked_by(1), 3);
    assert_eq!(graph.longest_chain(), 3);
    assert!(graph.chain_of(4, Some(t(9))).is_none(), "another process");
}

#[test]
fn a_chain_into_a_cycle_ends_at_the_cycle() {
    let mut states = two_cycle(WaitKind::Contender, WaitKind::Contender);
    states.push((instance("cli/x"), holds(1)));
    states[1].1 = waited_by(states[1].1.clone(), 9, WaitKind::Contender);
    let graph = graph(&states, t(0));
    let chain = graph.chain_of(9, Some(t(0))).unwrap();
    assert_eq!(chain.end, ChainEnd::Cycle(0));
    assert_eq!(graph.chain_of(1, Some(t(0))).unwrap().hops, []);
    assert!(graph.roots().is_empty(), "a cycle has no root");
}

#[test]
fn the_victim_holds_fewest_keys_then_is_youngest() {
    let mut states = two_cycle(WaitKind::Contender, WaitKind::Contender);
    // 1 holds a second key: 2 holds fewer.
    states.push((tag("extra"), holds(1)));
    assert_eq!(graph(&states, t(0)).cycles()[0].victim, 2);
    // Equal counts: the youngest (the later start).
    let mut states = two_cycle(WaitKind::Contender, WaitKind::Contender);
    for (_, state) in &mut states {
        if state.holders[0].pid == 1 {
            state.holders[0].started = Some(t(0) + Duration::from_secs(1));
        }
    }
    // Its waiting entry must say the same start to join.
    states[1].1.waiting[0].started = Some(t(0) + Duration::from_secs(1));
    assert_eq!(graph(&states, t(0)).cycles()[0].victim, 1);
}

// The reference, by brute force.

/// A random shape: `holders[k]` holds key k (one or two of them, shared);
/// `waits[p]` lists the keys process p waits on.
#[derive(Debug, Clone)]
struct Shape {
    holders: Vec<Vec<u32>>,
    waits: Vec<Vec<usize>>,
}

fn shape() -> impl Strategy<Value = Shape> {
    (2usize..7, 1usize..6).prop_flat_map(|(processes, keys)| {
        let pids = 1..=processes as u32;
        (
            proptest::collection::vec(proptest::collection::vec(pids, 1..3), keys),
            proptest::collection::vec(proptest::collection::vec(0..keys, 0..3), processes),
        )
            .prop_map(|(holders, waits)| Shape { holders, waits })
    })
}

fn states_of(shape: &Shape) -> Vec<(LockKey, KeyState)> {
    shape
        .holders
        .iter()
        .enumerate()
        .map(|(k, holders)| {
            let mut holders: Vec<u32> = holders.clone();
            holders.sort_unstable();
            holders.dedup();
            let mut state = KeyState {
                holders: holders
                    .iter()
                    .map(|&pid| ProcessInfo {
                        started: Some(t(0)),
                        ..ProcessInfo::unread(pid)
                    })
                    .collect(),
                ..KeyState::bare(Liveness::Live)
            };
            for (p, waits) in shape.waits.iter().enumerate() {
                if waits.contains(&k) {
                    state = waited_by(state, p as u32 + 1, WaitKind::Contender);
                }
            }
            (tag(&format!("k{k}")), state)
        })
        .collect()
}

/// `reach[a][b]`: the fewest waits from a to b (`None`: unreachable).
fn distances(shape: &Shape) -> Vec<Vec<Option<usize>>> {
    let n = shape.waits.len() + 1;
    let mut dist = vec![vec![None; n]; n];
    for (p, waits) in shape.waits.iter().enumerate() {
        let from = p + 1;
        for &k in waits {
            for &holder in &shape.holders[k] {
                let holders = &shape.holders[k];
                if holders.contains(&(from as u32)) {
                    continue; // waiting on a key it holds: no edge
                }
                dist[from][holder as usize] = Some(1);
            }
        }
    }
    for via in 1..n {
        for a in 1..n {
            for b in 1..n {
                if let (Some(x), Some(y)) = (dist[a][via], dist[via][b])
                    && dist[a][b].is_none_or(|d| x + y < d)
                {
                    dist[a][b] = Some(x + y);
                }
            }
        }
    }
    dist
}

proptest! {
    #[test]
    #[allow(clippy::needless_range_loop)] // PIDs index the reference's matrix
    fn cycles_chains_and_roots_match_brute_force(shape in shape()) {
        let states = states_of(&shape);
        let graph = graph(&states, t(0));
        let dist = distances(&shape);
        let n = shape.waits.len() + 1;
        let waits = |p: usize| (1..n).any(|q| dist[p][q] == Some(1));
        let in_cycle = |p: usize| dist[p][p].is_some();
        // Cycles: processes on a circle, grouped by mutual reach.
        let mut expected: BTreeSet<Vec<u32>> = BTreeSet::new();
        for p in (1..n).filter(|&p| in_cycle(p)) {
            let part: Vec<u32> = (1..n)
                .filter(|&q| q == p || (dist[p][q].is_some() && dist[q][p].is_some()))
                .map(|q| q as u32)
                .collect();
            expected.insert(part);
        }
        let found: BTreeSet<Vec<u32>> =
            graph.cycles().iter().map(|cycle| cycle.members.clone()).collect();
        prop_assert_eq!(&found, &expected);
        for cycle in graph.cycles() {
            // The circle closes, and each hop is an edge of the shape.
            prop_assert_eq!(cycle.hops.first().unwrap().waiter, cycle.hops.last().unwrap().holder);
            for pair in cycle.hops.windows(2) {
                prop_assert_eq!(pair[0].holder, pair[1].waiter);
            }
        }
        // Chains: every waiting process ends at its nearest end.
        for p in 1..n {
            let chain = graph.chain_of(p as u32, Some(t(0)));
            prop_assert_eq!(chain.is_some(), waits(p), "pid {}", p);
            let Some(chain) = chain else { continue };
            if in_cycle(p) {
                prop_assert!(chain.hops.is_empty());
                prop_assert!(matches!(chain.end, ChainEnd::Cycle(_)));
                continue;
            }
            let is_end = |q: usize| q != p && (!waits(q) || in_cycle(q));
            let nearest = (1..n).filter(|&q| is_end(q)).filter_map(|q| dist[p][q]).min();
            prop_assert_eq!(Some(chain.hops.len()), nearest, "pid {}", p);
            let end = match chain.end {
                ChainEnd::Root(root) => {
                    prop_assert!(!waits(root as usize));
                    root as usize
                }
                ChainEnd::Cycle(at) => graph.cycles()[at].members[0] as usize,
            };
            prop_assert!(dist[p][end].is_some());
        }
        // Roots: each process that waits for nothing and is waited on,
        // with how many reach it.
        for q in (1..n).filter(|&q| !waits(q)) {
            let reaching = (1..n).filter(|&p| p != q && dist[p][q].is_some()).count();
            prop_assert_eq!(graph.blocked_by(q as u32), reaching, "root {}", q);
        }
        let circles = graph.cycles().iter().map(|cycle| cycle.hops.len());
        prop_assert_eq!(
            graph.longest_chain(),
            graph
                .chains()
                .map(|(_, chain)| chain.hops.len())
                .chain(circles)
                .max()
                .unwrap_or(0)
        );
    }
}

/// The circle shown through the lowest process runs through a try loop,
/// but two other processes of the same part wait on each other blocked:
/// that is a deadlock, shown by its blocked circle, and every key waited
/// on inside the part is in it.
#[test]
fn a_part_with_a_blocked_circle_beside_a_try_loop_is_a_deadlock() {
    let states = vec![
        (tag("a"), waited_by(holds(1), 2, WaitKind::Contender)),
        (
            tag("b"),
            waited_by(
                waited_by(holds(2), 1, WaitKind::Trying),
                3,
                WaitKind::Contender,
            ),
        ),
        (tag("c"), waited_by(holds(3), 2, WaitKind::Contender)),
    ];
    let young = graph(&states, t(0));
    let later = WaitGraph::build(states.iter().map(|(k, s)| (k, s)), t(2), Some(&young));
    let cycle = &later.cycles()[0];
    assert_eq!(cycle.members, [1, 2, 3]);
    assert_eq!(cycle.deadlock(t(2)), Ok(()), "{cycle:?}");
    let shown: Vec<u32> = cycle.hops.iter().map(|hop| hop.waiter).collect();
    assert_eq!(shown, [2, 3], "the blocked circle");
    for key in ["a", "b", "c"] {
        assert!(cycle.has_key(&tag(key)), "{key}");
    }
}

/// A holder whose PID a waiting process now has (another start): the
/// chain belongs to the waiting process only.
#[test]
fn a_chain_is_the_waiting_processs_own_not_its_pids() {
    // 7 (started t(0)) holds a, which 9 waits on; 7 started t(5) — another
    // process under the same PID — waits on b, held by 8.
    let mut b = waited_by(holds(8), 7, WaitKind::Contender);
    b.waiting[0].started = Some(t(5));
    let states = vec![
        (tag("a"), waited_by(holds(7), 9, WaitKind::Contender)),
        (tag("b"), b),
    ];
    let graph = graph(&states, t(10));
    assert!(
        graph.chain_of(7, Some(t(0))).is_none(),
        "the holder waits for nothing"
    );
    assert_eq!(
        graph.chain_of(7, Some(t(5))).map(|chain| chain.end),
        Some(ChainEnd::Root(8))
    );
    assert_eq!(
        graph.chain_of(9, Some(t(0))).map(|chain| chain.end),
        Some(ChainEnd::Root(7)),
        "9's chain ends at the holder 7, which waits for nothing"
    );
}

/// A family waiter polls and holds nothing between its tries: its polls
/// start a chain and never close a circle, even where its PID holds a
/// key the other waits on.
#[test]
fn polls_start_chains_and_close_no_circle() {
    let states = two_cycle(WaitKind::Polling, WaitKind::Contender);
    let graph = graph(&states, t(0));
    assert!(graph.cycles().is_empty(), "{:?}", graph.cycles());
    let chain = graph.chain_of(1, Some(t(0))).expect("1 polls for b");
    assert_eq!(chain.hops[0].how, WaitKind::Polling);
}
