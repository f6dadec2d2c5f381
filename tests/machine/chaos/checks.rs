//! The checks of a chaos run, each computed from the holders' own words
//! (their `held` lines, timed as they were read), what the test did to
//! them, the kernel (`/proc/locks`) and the SDK (`try_held`) — never from
//! the engine under test, except where the engine is what is checked.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;
use std::time::{Duration, Instant};

use locktop::engine::trace::{Record, Stage};
use locktop::engine::{Delta, Liveness};
use locktop::liveness::proc_locks::{FileId, LockIndex};
use locktop::locks::{agent_instance_lock, agent_tag_lock};
use objectiveai_sdk::lockfile;

use super::children::{AIHS, ChaosChild, LANE_TAGS, TAGS};
use crate::common::engine::{Name, instance, name_of, tag};

/// What the engine reported, as this test read it.
#[derive(Debug, Default)]
pub struct ReportedHolds {
    /// (claim, PID) → when a delta reporting that PID holding that claim
    /// was read.
    pub holds: HashMap<(Name, u32), Vec<Instant>>,
    /// Claim → every state reported for it (read time, liveness, PIDs,
    /// note), for failure messages.
    pub history: HashMap<Name, Vec<(Instant, String)>>,
    /// Claim → every stage the engine's trace recorded for it (when, as
    /// the monotonic clock), for failure messages: when it heard of a
    /// change, probed it, and what the probe said.
    pub trace: HashMap<Name, Vec<(Instant, Stage)>>,
}

/// A claim's state as a view summarises it.
pub type Summary = BTreeMap<Name, (Liveness, Vec<u32>)>;

/// Every claim of the pool with its SDK coordinates.
pub fn pool(state: &Path) -> Vec<(Name, std::path::PathBuf, String)> {
    let instances = AIHS.iter().map(|aih| {
        let (dir, key) = agent_instance_lock(state, aih);
        (instance(aih), dir, key)
    });
    let tags = TAGS.iter().chain(&LANE_TAGS).map(|t| {
        let (dir, key) = agent_tag_lock(state, t);
        (tag(t), dir, key)
    });
    instances.chain(tags).collect()
}

/// The truth, through the SDK and the kernel: every claim of the pool
/// whose gate exists, `Live` with the PIDs `/proc/locks` names as its
/// exclusive holders if the SDK's `try_held` says it is held (a claim in
/// flight for over a second counts as held), else `Free` with none.
pub async fn ground_truth(state: &Path) -> Summary {
    let index = LockIndex::read().expect("read /proc/locks");
    let mut out = Summary::new();
    for (name, dir, key) in pool(state) {
        let gate = locktop::locks::escape::gate_path(&dir, &key);
        if !gate.exists() {
            continue;
        }
        let held = tokio::time::timeout(Duration::from_secs(1), lockfile::try_held(&dir, &key))
            .await
            .unwrap_or(true);
        let announce = locktop::locks::escape::announce_path(&dir, &key);
        let state = if held {
            (Liveness::Live, index.claim(&gate, &announce).holders)
        } else {
            (Liveness::Free, Vec::new())
        };
        out.insert(name, state);
    }
    out
}

/// Folds `deltas` into the (claim, PID) pairs the engine reported as held
/// (`live`, `own` or `in-flight` naming that PID), with when.
pub fn fold_reported(deltas: impl IntoIterator<Item = Delta>, into: &mut ReportedHolds) {
    let read = Instant::now();
    let wall = std::time::SystemTime::now();
    for delta in deltas {
        let Delta::Key { key, state, at, .. } = delta else {
            continue;
        };
        let name = name_of(&key);
        let pids: Vec<u32> = state.holders.iter().map(|holder| holder.pid).collect();
        // When the engine observed it, as well as when the test read it:
        // a late read alone does not say the engine was late.
        let lag = wall.duration_since(at).unwrap_or_default();
        let line = format!(
            "{:?} {pids:?} {:?} (observed {lag:.1?} before this read)",
            state.liveness, state.holders_note
        );
        into.history
            .entry(name.clone())
            .or_default()
            .push((read, line));
        if matches!(
            state.liveness,
            Liveness::Live | Liveness::Own | Liveness::InFlight
        ) {
            for pid in pids {
                into.holds
                    .entry((name.clone(), pid))
                    .or_default()
                    .push(read);
            }
        }
    }
}

/// Keeps the engine's trace records per claim (compact: a time and a stage).
pub fn fold_trace(records: Vec<Record>, into: &mut ReportedHolds) {
    for record in records {
        into.trace
            .entry(name_of(&record.key))
            .or_default()
            .push((record.at, record.stage));
    }
}

/// Mutual exclusion from the holders' own words: no claim was in two
/// children's `[held, release or kill]` intervals at once (see `children`
/// for why these intervals are lower bounds). Returns the violations and
/// how many (claim, interval) pairs were checked.
pub fn exclusion_violations(children: &[ChaosChild]) -> (Vec<String>, usize) {
    let mut per_key: BTreeMap<&Name, Vec<(Instant, Instant, u32)>> = BTreeMap::new();
    for child in children {
        let (Some((_, names)), Some((start, end))) = (&child.held, child.hold_interval()) else {
            continue;
        };
        for name in names {
            per_key
                .entry(name)
                .or_default()
                .push((start, end, child.pid));
        }
    }
    let mut violations = Vec::new();
    let mut checked = 0;
    for (name, mut intervals) in per_key {
        intervals.sort();
        checked += intervals.len();
        let mut latest: Option<(Instant, u32)> = None;
        for (start, end, pid) in intervals {
            if let Some((until, other)) = latest
                && start < until
            {
                violations.push(format!(
                    "{name:?}: pid {pid} held it {:?} before pid {other} released it",
                    until - start
                ));
            }
            if latest.is_none_or(|(until, _)| end > until) {
                latest = Some((end, pid));
            }
        }
    }
    (violations, checked)
}

/// Children that did something no fate allows: exit 2 (bad input or
/// unavailable), exit on their own while holding, a waiter exiting busy,
/// a signal death the test did not send.
pub fn unexpected_exits(children: &[ChaosChild]) -> Vec<String> {
    let mut out = Vec::new();
    for child in children {
        let why = match (child.code(), child.exit_signal()) {
            (Some(2), _) => Some("exit 2"),
            (Some(1), _) if child.wait => Some("a waiter exited busy"),
            (Some(1), _) if child.held.is_some() => Some("exit 1 after holding"),
            (Some(0), _) if child.end_action.is_none() => Some("exit 0 unreleased"),
            (_, Some(_)) if !child.killed => Some("a signal the test did not send"),
            _ if child.held.is_some() && child.end_action.is_none() => {
                Some("ended holding with no action")
            }
            _ => None,
        };
        if let Some(why) = why {
            out.push(format!(
                "child {} (pid {}, {:?}): {why}; stderr {:?}",
                child.id, child.pid, child.keys, child.stderr
            ));
        }
    }
    out
}

/// Interference: non-blocking tries during which no other chaos child
/// naming one of their claims was alive (spawned, not yet reaped) — so
/// nothing of the chaos could be in their way — and how many of those
/// still exited busy: only a probe of the monitor can have made them fail.
#[derive(Debug, Clone, Copy)]
pub struct Interference {
    /// Non-blocking tries.
    pub tries: usize,
    /// Of which exited busy.
    pub busy: usize,
    /// Tries with no chaos child in the way.
    pub clear: usize,
    /// Clear tries that exited busy anyway.
    pub clear_busy: usize,
}

/// Counts [`Interference`] over every (reaped) child.
pub fn interference(children: &[ChaosChild]) -> Interference {
    let tries: Vec<&ChaosChild> = children.iter().filter(|c| !c.wait).collect();
    let clear: Vec<&&ChaosChild> = tries
        .iter()
        .filter(|c| {
            let (ended, _) = c.exit.expect("reaped");
            !children.iter().any(|o| {
                o.id != c.id
                    && !o.keys.is_disjoint(&c.keys)
                    && o.spawned < ended
                    && o.exit.is_none_or(|(gone, _)| gone > c.spawned)
            })
        })
        .collect();
    Interference {
        tries: tries.len(),
        busy: tries.iter().filter(|c| c.code() == Some(1)).count(),
        clear: clear.len(),
        clear_busy: clear.iter().filter(|c| c.code() == Some(1)).count(),
    }
}

/// How the holds were reported (see [`every_change`]).
#[derive(Debug, Default)]
pub struct Reported {
    /// Claim holds that lasted the threshold or more.
    pub long: usize,
    /// Of which reported held with the holder's PID.
    pub long_ok: usize,
    /// Shorter claim holds.
    pub short: usize,
    /// Of which reported anyway.
    pub short_ok: usize,
    /// The longest shorter hold that was not reported.
    pub longest_unreported: Duration,
    /// The long holds never reported that the engine got wrong: a probe
    /// made wholly inside the hold said free, or said held and the PID
    /// never followed, or it never heard of the hold at all (must be none).
    pub missed: Vec<String>,
    /// The long holds never reported because the engine did not probe
    /// the claim until the hold was over (its events read, but the engine
    /// behind by more than the hold: a starved machine).
    pub late: Vec<String>,
}

/// Why a long hold was never reported, from the engine's trace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Miss {
    /// A probe that began and answered inside the hold said not held.
    ProbedFree,
    /// A probe inside the hold said held, and a lookup after it finished
    /// inside the hold, yet no delta named the PID.
    Unnamed,
    /// The claim's events were read during the hold, but no probe of it
    /// began before the hold ended — or one said held and the lookup that
    /// names its holder had not finished when the hold ended (deferred
    /// by the rate limit of `/proc/locks` reads, or slow).
    Late,
    /// No event of the claim was read during the hold.
    Unheard,
}

/// Classifies a missed hold of `name` over `[start, end]` — an interval
/// inside the real hold (it begins when the holder's `held` line was read
/// and ends when it was told to go).
fn classify(name: &Name, start: Instant, end: Instant, reported: &ReportedHolds) -> Miss {
    let stages = reported.trace.get(name).map_or(&[][..], Vec::as_slice);
    let mut said = Vec::new();
    let mut began = None;
    for (at, stage) in stages {
        match stage {
            Stage::ProbeStart => began = Some(*at),
            Stage::Probed(liveness) => {
                if let Some(from) = began.take()
                    && from >= start
                    && *at <= end
                {
                    said.push((*at, *liveness));
                }
            }
            _ => {}
        }
    }
    let held = |l: &Liveness| matches!(l, Liveness::Live | Liveness::Own | Liveness::InFlight);
    if said.iter().any(|(_, l)| !held(l)) {
        return Miss::ProbedFree;
    }
    if let Some(first_held) = said.iter().map(|(at, _)| *at).min() {
        // A held result is named by a lookup after it (a `/proc/locks`
        // read the rate limit may defer: `Deferred`). One that finished
        // inside the hold and did not name the PID is a miss; none
        // before the hold ended is the engine behind, as `Late` is.
        let looked_up = stages
            .iter()
            .any(|(at, stage)| *stage == Stage::Indexed && *at > first_held && *at <= end);
        return if looked_up { Miss::Unnamed } else { Miss::Late };
    }
    let heard = stages
        .iter()
        .any(|(at, stage)| *stage == Stage::Read && *at <= end);
    if heard { Miss::Late } else { Miss::Unheard }
}

/// How every hold was reported: holds that lasted at least `threshold`
/// must have been reported held with the holder's PID, for each of their
/// claims (by a delta read after it was spawned: PIDs are reused; a
/// delta's own `at` cannot tell, as a spell held by one process then
/// another with no free probe between keeps its first time); shorter
/// ones may be folded away (the engine reports states,
/// coalescing per claim, and names holders from a `/proc/locks` read made
/// at most every 100 ms).
pub fn every_change(
    children: &[ChaosChild],
    reported: &ReportedHolds,
    threshold: Duration,
) -> Reported {
    let mut out = Reported::default();
    for child in children {
        let (Some((_, names)), Some((start, end))) = (&child.held, child.hold_interval()) else {
            continue;
        };
        for name in names {
            let seen = reported
                .holds
                .get(&(name.clone(), child.pid))
                .is_some_and(|times| times.iter().any(|read| *read >= child.spawned));
            let lasted = end - start;
            if lasted >= threshold {
                out.long += 1;
                out.long_ok += usize::from(seen);
                if !seen {
                    let line = missed(child, name, start, lasted, reported);
                    match classify(name, start, end, reported) {
                        Miss::Late => out.late.push(line),
                        miss => out.missed.push(format!("{miss:?}: {line}")),
                    }
                }
            } else {
                out.short += 1;
                out.short_ok += usize::from(seen);
                if !seen {
                    out.longest_unreported = out.longest_unreported.max(lasted);
                }
            }
        }
    }
    out
}

/// A long hold never reported: who, when (relative to its spawn), and
/// every state the engine reported for that claim around it.
fn missed(
    child: &ChaosChild,
    name: &Name,
    start: Instant,
    lasted: Duration,
    reported: &ReportedHolds,
) -> String {
    let from = child.spawned;
    let until = start + lasted + Duration::from_secs(1);
    let before: Vec<&(Instant, String)> = reported
        .history
        .get(name)
        .into_iter()
        .flatten()
        .filter(|(read, _)| *read <= until)
        .collect();
    // The states read up to a second after the hold, and the last few
    // before it (the state it may have been hidden behind).
    let around: Vec<String> = before[before.len().saturating_sub(12)..]
        .iter()
        .map(|(read, line)| format!("read {}: {line}", offset(from, *read)))
        .collect();
    // What the engine heard and did about the claim meanwhile.
    let traced: Vec<String> = reported
        .trace
        .get(name)
        .into_iter()
        .flatten()
        .filter(|(at, _)| *at + Duration::from_secs(1) >= start && *at <= until)
        .map(|(at, stage)| format!("{} {stage:?}", offset(from, *at)))
        .collect();
    format!(
        "{name:?} held by pid {} (wait {}, stops {}, killed {}) from +{:?} for {lasted:?}, \
         never reported with it; the engine's states of it (read times after its spawn):\n  {}\n\
         the engine's trace of it from a second before the hold to a second after:\n  {}",
        child.pid,
        child.wait,
        child.stops,
        child.killed,
        start - from,
        around.join("\n  "),
        traced.join("\n  ")
    )
}

/// `at` as a signed offset from `from` (`+1.2s`, `-30ms`).
fn offset(from: Instant, at: Instant) -> String {
    at.checked_duration_since(from).map_or_else(
        || format!("-{:?}", from - at),
        |after| format!("+{after:?}"),
    )
}

/// The flocks anyone holds, waits for or shares on a file under `state`
/// (every child is gone by then, so any is a leak — this process's first).
pub fn locks_left(state: &Path) -> Vec<String> {
    let index = LockIndex::read().expect("read /proc/locks");
    let me = std::process::id();
    let mut out = Vec::new();
    for path in crate::common::tree(state) {
        let path = state.join(path);
        let Ok(id) = FileId::of(&path) else { continue };
        if let Some(locks) = index.get(&id) {
            let mine = [&locks.holders, &locks.waiters, &locks.shared]
                .iter()
                .any(|pids| pids.contains(&me));
            out.push(format!("{path:?}: {locks:?} (this process: {mine})"));
        }
    }
    out
}

/// The kept children's claims as a view should show them: `Live` with
/// their PID, every other claim on disk `Free` (from `truth`'s key set).
pub fn expected_from_holders(truth: &Summary, kept: &[ChaosChild]) -> Summary {
    let mut out: Summary = truth
        .keys()
        .map(|name| (name.clone(), (Liveness::Free, Vec::new())))
        .collect();
    for child in kept {
        let names: &BTreeSet<Name> = &child.held.as_ref().expect("kept ones hold").1;
        for name in names {
            out.insert(name.clone(), (Liveness::Live, vec![child.pid]));
        }
    }
    out
}
