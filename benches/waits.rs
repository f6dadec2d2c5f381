//! The wait-for graph benchmark: what joining the hops costs the one
//! held view every face reads (`locktop::operate::held::HeldView`), in
//! process, on synthetic states (real processes are the tests' job:
//! `cli::waits`; how fast a waiter's state reaches the view is the kill
//! path's, in the engine bench).
//!
//! Section 1, A CYCLE NAMED. A view of 1,000 agents (each holding its
//! instance lock and one tag) in 200 chains of five (each agent but the
//! last of its chain waits to take the next one's tag) and 1,000 more
//! processes holding nothing, each waiting on a random agent's tag:
//! 1,000 holders and 1,800 waits. Then 20 times, one chain is closed (its
//! last agent starts waiting for its first one's tag): the time from the
//! closing delta to the `wait_cycle` verdict on every key of the circle
//! (its `apply`, then the `settle` that builds the graph once per burst
//! — the front ends call it 50 ms after a burst's last delta); p50 and
//! p99 (of 20: the max). Also: building the view itself (2,000 held
//! keys, 1,800 waits, one delta each, then one settle). Baseline, in the same run: the same
//! delta applied to a view where nobody else waits (the graph of that
//! one wait alone). Target: p99 ≤ 100 ms. A deadlock is named by the
//! first re-judgement at least 1 s after the circle closed (the rule's
//! timeout): the monitor's once-a-second tick, whose cost on this view
//! is reported too.
//!
//! Section 2, NOBODY WAITS. The same 1,000 agents with nobody waiting:
//! 100,000 deltas (an agent's tag re-held, its `since` moved) applied,
//! nanoseconds and heap allocations per delta; then the same deltas on
//! the view of section 1 (1,800 waits elsewhere: the graph is rebuilt
//! only when a delta touches a waited key or a process in the graph,
//! which these do not), as a ratio to nobody waiting. Target: the waits
//! elsewhere cost nothing per delta (≤ 1.1×, and no more allocations).
//!
//! `cargo bench --bench waits` is the full run. Without `--bench` (what
//! `cargo test --all-targets` runs) or with `--smoke`: the same code at
//! tiny sizes (50 agents, 3 cycles, 1,000 deltas), numbers printed, no
//! target judged.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime};

use locktop::disk::LockKey;
use locktop::engine::fixtures::{instance, t, tag};
use locktop::liveness::process::{ProcState, ProcessInfo};
use locktop::liveness::{KeyState, Liveness, WaitKind, Waiting};
use locktop::operate::held::HeldView;
use locktop::operate::verdict::Verdict;

/// Counts heap allocations (section 2).
struct Counting;

static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

// SAFETY: forwards to the system allocator; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the caller's contract, passed on.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract, passed on.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Sizes of a run.
struct Plan {
    agents: u32,
    chain: u32,
    loose_waiters: u32,
    cycles: u32,
    deltas: u32,
    judged: bool,
}

impl Plan {
    fn from_args() -> Self {
        let args: Vec<String> = std::env::args().collect();
        let full = args.iter().any(|a| a == "--bench") && !args.iter().any(|a| a == "--smoke");
        if full {
            Plan {
                agents: 1_000,
                chain: 5,
                loose_waiters: 1_000,
                cycles: 20,
                deltas: 100_000,
                judged: true,
            }
        } else {
            Plan {
                agents: 50,
                chain: 5,
                loose_waiters: 50,
                cycles: 3,
                deltas: 1_000,
                judged: false,
            }
        }
    }
}

const FIRST_PID: u32 = 10_000;
const LOOSE_PID: u32 = 500_000;

fn process(pid: u32) -> ProcessInfo {
    ProcessInfo {
        pid,
        alive: true,
        unverified: false,
        cmdline: Some(format!("objectiveai-agent run --id {pid}")),
        started: Some(t(0)),
        state: Some(ProcState::Sleeping),
        ppid: Some(1),
        parent: None,
        unit: None,
        idle_since: None,
    }
}

fn held_by(pid: u32, since: SystemTime) -> KeyState {
    KeyState {
        holders: vec![process(pid)],
        since: Some(since),
        ..KeyState::bare(Liveness::Live)
    }
}

fn waited(mut state: KeyState, pid: u32) -> KeyState {
    state.waiters.push(pid);
    state.waiting.push(Waiting {
        pid,
        how: WaitKind::Contender,
        started: Some(t(0)),
    });
    state
}

/// Agent `n`'s keys and PID.
fn agent(n: u32) -> (LockKey, LockKey, u32) {
    (
        instance(&format!("cli/daemon/agent-{n:05}")),
        tag(&format!("tag-{n:05}")),
        FIRST_PID + n,
    )
}

/// Every agent holding its keys, and (with `waits`) the chains and the
/// loose waiters: (key, state) in the order a first sync would tell them.
fn states(plan: &Plan, waits: bool, rng: &mut fastrand::Rng) -> Vec<(LockKey, KeyState)> {
    let mut tags: Vec<KeyState> = (0..plan.agents)
        .map(|n| held_by(agent(n).2, t(10)))
        .collect();
    if waits {
        for n in 0..plan.agents {
            // Each agent but the last of its chain waits for the next.
            if n % plan.chain != plan.chain - 1 {
                let next = (n + 1) as usize;
                tags[next] = waited(tags[next].clone(), agent(n).2);
            }
        }
        for w in 0..plan.loose_waiters {
            let at = rng.usize(..plan.agents as usize);
            tags[at] = waited(tags[at].clone(), LOOSE_PID + w);
        }
    }
    let mut out = Vec::new();
    for (n, tag_state) in (0..plan.agents).zip(tags) {
        let (aih, tag, pid) = agent(n);
        out.push((aih, held_by(pid, t(10))));
        out.push((tag, tag_state));
    }
    out
}

fn view_of(states: &[(LockKey, KeyState)]) -> HeldView {
    let mut view = HeldView::default();
    for (key, state) in states {
        view.apply(key, Some(state), t(20));
    }
    view.settle(t(20));
    view
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let at = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[at.min(sorted.len() - 1)]
}

fn main() {
    let plan = Plan::from_args();
    let mut rng = fastrand::Rng::with_seed(49);
    println!(
        "waits bench: {} agents in chains of {}, {} loose waiters ({} plan)",
        plan.agents,
        plan.chain,
        plan.loose_waiters,
        if plan.judged { "full" } else { "smoke" }
    );
    let waiting_states = states(&plan, true, &mut rng);
    let idle_states = states(&plan, false, &mut rng);

    // Section 1: a cycle named.
    let mut named = Vec::new();
    let mut settled = Vec::new();
    let mut baseline = Vec::new();
    let start = Instant::now();
    let mut view = view_of(&waiting_states);
    println!(
        "   the view built from {} deltas, 1 settle: {:?}",
        waiting_states.len(),
        start.elapsed()
    );
    let chains = plan.agents / plan.chain;
    for c in 0..plan.cycles {
        let chain = (c * (chains / plan.cycles.max(1))).min(chains - 1);
        let (first, last) = (chain * plan.chain, chain * plan.chain + plan.chain - 1);
        let (_, first_tag, _) = agent(first);
        let state = view.held_state(&first_tag).cloned().expect("held");
        let closing = waited(state, agent(last).2);
        let at = t(30 + u64::from(c));
        let start = Instant::now();
        view.apply(&first_tag, Some(&closing), at);
        let took = start.elapsed();
        let rest = view.settle(at);
        let took_all = start.elapsed();
        assert!(
            rest.iter()
                .filter(|c| matches!(c.to, Some(Verdict::WaitCycle { .. })))
                .count() as u32
                >= plan.chain,
            "every key of the circle judged at the settle: {rest:?}"
        );
        named.push(took);
        settled.push(took_all);
        // Baseline: the same delta on a view where nobody else waits.
        let mut quiet = view_of(&idle_states);
        let state = quiet.held_state(&first_tag).cloned().expect("held");
        let one_wait = waited(state, agent(last).2);
        let start = Instant::now();
        quiet.apply(&first_tag, Some(&one_wait), at);
        quiet.settle(at);
        baseline.push(start.elapsed());
    }
    for list in [&mut named, &mut settled, &mut baseline] {
        list.sort();
    }
    let p99 = percentile(&settled, 0.99);
    println!(
        "1. cycle named on every key of it (apply + the settle that builds the graph): p50 {:?} \
         p99 {:?} (the apply alone p50 {:?}); baseline (one wait, nobody else) p50 {:?} — \
         {:.1}× at p50",
        percentile(&settled, 0.5),
        p99,
        percentile(&named, 0.5),
        percentile(&baseline, 0.5),
        percentile(&settled, 0.5).as_secs_f64()
            / percentile(&baseline, 0.5).as_secs_f64().max(1e-9)
    );
    let start = Instant::now();
    let ticked = view.tick(t(30 + u64::from(plan.cycles) + 1));
    let tick_took = start.elapsed();
    let _ = ticked;
    // (Earlier circles became deadlocks at a later closing's settle, once
    // their second had passed; the last one at this tick.)
    let deadlocks = view
        .held()
        .filter(|(key, _)| matches!(view.verdict(key), Some(Verdict::Deadlock { .. })))
        .count();
    println!(
        "   deadlocks named by the first judgement ≥ 1 s after each closed: {deadlocks} keys in \
         {} circles; the tick re-judged {} keys in {tick_took:?}",
        view.waits().cycles().len(),
        2 * plan.agents
    );
    assert_eq!(deadlocks as u32, plan.cycles * plan.chain);
    if plan.judged {
        println!(
            "   target p99 ≤ 100 ms: {}",
            if p99 <= Duration::from_millis(100) {
                "met"
            } else {
                "MISSED"
            }
        );
    }

    // Section 2: nobody waits.
    let deltas: Vec<(LockKey, KeyState)> = (0..plan.deltas)
        .map(|i| {
            let n = rng.u32(..plan.agents);
            let (_, tag, pid) = agent(n);
            (tag, held_by(pid, t(40 + u64::from(i % 1000))))
        })
        .collect();
    let measure = |view: &mut HeldView| {
        let allocations = ALLOCATIONS.load(Ordering::Relaxed);
        let start = Instant::now();
        for (i, (key, state)) in deltas.iter().enumerate() {
            view.apply(key, Some(state), t(2_000 + i as u64));
        }
        let took = start.elapsed();
        let allocated = ALLOCATIONS.load(Ordering::Relaxed) - allocations;
        (
            took.as_nanos() as f64 / f64::from(plan.deltas),
            allocated as f64 / f64::from(plan.deltas),
        )
    };
    let mut nobody = view_of(&idle_states);
    let (quiet_ns, quiet_allocs) = measure(&mut nobody);
    // In the chains view every agent waits or is waited on, so the same
    // number of deltas goes to spare tags held by processes outside the
    // graph, as most of a host's keys are.
    let mut elsewhere = view_of(&waiting_states);
    let spare: Vec<(LockKey, KeyState)> = (0..plan.agents)
        .map(|n| {
            let pid = FIRST_PID + 100_000 + n;
            (tag(&format!("spare-{n:05}")), held_by(pid, t(10)))
        })
        .collect();
    for (key, state) in &spare {
        elsewhere.apply(key, Some(state), t(20));
    }
    elsewhere.settle(t(20));
    let spare_deltas: Vec<(LockKey, KeyState)> = deltas
        .iter()
        .enumerate()
        .map(|(i, _)| {
            let (key, state) = &spare[i % spare.len()];
            let mut state = state.clone();
            state.since = Some(t(40 + (i % 1000) as u64));
            (key.clone(), state)
        })
        .collect();
    let allocations = ALLOCATIONS.load(Ordering::Relaxed);
    let start = Instant::now();
    for (i, (key, state)) in spare_deltas.iter().enumerate() {
        elsewhere.apply(key, Some(state), t(2_000 + i as u64));
    }
    let busy_ns = start.elapsed().as_nanos() as f64 / f64::from(plan.deltas);
    let busy_allocs =
        (ALLOCATIONS.load(Ordering::Relaxed) - allocations) as f64 / f64::from(plan.deltas);
    assert!(
        !elsewhere.waits().is_empty() && elsewhere.waits().cycles().is_empty(),
        "the waits view has its chains and no cycle"
    );
    println!(
        "2. nobody waits: {quiet_ns:.0} ns and {quiet_allocs:.2} allocations per delta; \
         with {} waits elsewhere: {busy_ns:.0} ns ({:.2}×) and {busy_allocs:.2} allocations",
        plan.agents - plan.agents / plan.chain + plan.loose_waiters,
        busy_ns / quiet_ns.max(1.0)
    );
    if plan.judged {
        let met = busy_ns <= 1.1 * quiet_ns && busy_allocs <= quiet_allocs;
        println!(
            "   target ≤ 1.1× and no more allocations: {}",
            if met { "met" } else { "MISSED" }
        );
    }
}
