//! The operator's question, answered per held key: is it stuck, why, and
//! what to do. Derived from what the locks and `/proc` say — never a guess
//! presented as a fact.
//!
//! Invariants: [`judge`] is pure (a key's state, its holder's role, a
//! clock, a threshold); the holder's role comes from the locks it holds
//! (an instance lock makes it an agent; tags without one, a spawn still
//! materializing, per the seed); every verdict says what to do.
//!
//! # One verdict per key: precedence
//!
//! Several facts may hold at once (a stopped agent someone waits on). A
//! key gets the first that applies, the one that most needs someone to
//! act, in this order:
//!
//! 0. `deadlock` — the key is waited on in a circle of waits that
//!    cannot clear by itself (the rule: [`crate::operate::wait_for::Cycle::deadlock`]);
//!    it names every process and key of the circle and the one process to
//!    signal to break it;
//! 1. `unverified holder` — the holder `/proc/locks` names cannot be
//!    verified (its open files may not be read by this user): nothing is
//!    said about that PID beyond it, since it may have been reused;
//! 2. `stopped` — the holder cannot run at all until SIGCONT or a kill;
//! 3. `orphaned child` — the process that took the lock is gone (and
//!    whoever keeps it is named when this user may see it);
//! 4. `wait cycle` — the key is waited on in a circle of waits that may
//!    still clear (young, through a try loop, an unverified holder, or a
//!    process holding for several agents): said with why;
//! 5. `blocked` — its holder itself waits on another key: the chain, hop
//!    by hop, to the root blocker (the process at its end, which waits
//!    for nothing) or to the circle it ends in — act there, not here;
//! 6. `materializing too long` — a spawn that never claimed its agent;
//! 7. `idle` — the holder has used no CPU for longer than `--idle-after`
//!    (a fact; that it is stuck is only a guess, and said as one);
//! 8. `contended` — contenders (the SDK's `wait_acquire`) or try loops
//!    (`try_acquire` refused within the last seconds) wait to take it; it
//!    carries the holder's agent and age, so it says everything `agent
//!    active` would;
//! 9. `agent active` — the normal reason a relocation fails;
//! 10. `materializing` — a spawn within its threshold, or `held` — a
//!     holder of no agent's lock: what is known, nothing wrong yet.
//!
//! Every held key whose holder locktop can name gets one of these.
//!
//! Deadlocks, wait cycles and the first three after them are suspects
//! (a glyph of their own, counted in the header), as is `materializing
//! too long` and `idle`. Contention is not a suspect: waiting for a
//! working agent is normal; nor is `blocked`: the suspect is at its
//! chain's end. Watchers (`wait_released`) do not contend: they wait for
//! the end, not for the lock. Whatever the verdict, the waiters of both
//! kinds stay listed beside it (details, blocking pane, JSON).

use std::time::{Duration, SystemTime};

use crate::disk::{KeyKind, LockKey};
use crate::liveness::{KeyState, WaitKind};
pub use crate::operate::wait_for::Hop;
use crate::operate::wait_for::{ChainEnd, Edge, MayClear, WaitGraph, chain_words, circle_words};

/// How long a spawn may hold tags without an AIH lock before it counts as
/// stuck materializing (`--materializing-after`).
pub const MATERIALIZING_AFTER: Duration = Duration::from_secs(30);

/// What a holder is, from the locks it holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Role {
    /// It holds an instance lock: a live agent, named by its AIH.
    Agent {
        /// The AIH of (one of) its instance locks.
        aih: String,
    },
    /// It holds tag locks and no instance lock: a spawn still
    /// materializing its family.
    Materializing,
    /// It holds only other locks (or none this monitor sees).
    Other,
}

/// Why a held key is held, and whether that is a problem.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Verdict {
    /// It is waited on in a circle of waits that cannot clear by itself
    /// ([`crate::operate::wait_for::Cycle::deadlock`]).
    Deadlock {
        /// The circle, from its lowest PID: each hop's holder is the next
        /// hop's waiter, the last's the first's.
        cycle: Vec<Hop>,
        /// The process to signal to break it ([`crate::operate::wait_for`]'s rule: a
        /// verified holder of the circle holding the fewest keys, then
        /// the youngest).
        pid: u32,
        /// Since when the circle stands.
        #[serde(with = "crate::time_format::plain")]
        since: SystemTime,
    },
    /// It is waited on in a circle of waits that may still clear.
    WaitCycle {
        /// The circle, as for a deadlock.
        cycle: Vec<Hop>,
        /// The process to signal, should it not clear.
        pid: u32,
        /// Why it may clear.
        why: MayClear,
    },
    /// Its holder itself waits on another key: the chain from it.
    Blocked {
        /// The holder that waits.
        pid: u32,
        /// Its waits, hop by hop, to the chain's end.
        chain: Vec<Hop>,
        /// The root blocker at the chain's end (`None`: it ends in a
        /// circle of waits, `cycle`).
        root: Option<u32>,
        /// The circle it ends in, when it ends in one.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        cycle: Vec<Hop>,
        /// That circle is a deadlock.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        deadlock: bool,
        /// Contenders waiting to take this key, if any.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        waiters: Vec<u32>,
    },
    /// `/proc/locks` names its holder, but this user may not read that
    /// process's open files: it may be a PID reused since the lock was
    /// taken, so no fact about it is presented as the holder's.
    UnverifiedHolder {
        /// The PID `/proc/locks` names.
        pid: u32,
    },
    /// Its holder is stopped (a signal or a debugger): it will hold until
    /// SIGCONT or a kill.
    Stopped {
        /// The stopped holder.
        pid: u32,
    },
    /// The process that took the lock is gone; a process that shares its
    /// open file (a forked child) keeps it.
    OrphanedChild {
        /// The process that keeps the lock, when this user may see it.
        pid: Option<u32>,
        /// The gone process that took it.
        taken_by: u32,
    },
    /// A spawn has held it, without an AIH lock, for longer than the
    /// threshold.
    MaterializingTooLong {
        /// The spawn.
        pid: u32,
        /// Since when it holds the key.
        #[serde(with = "crate::time_format::plain")]
        since: SystemTime,
    },
    /// Its holders have used no CPU for longer than the threshold
    /// (`--idle-after`), as the once-a-second look saw.
    Idle {
        /// The (first) idle holder.
        pid: u32,
        /// Since when it has used no CPU.
        #[serde(with = "crate::time_format::plain")]
        since: SystemTime,
    },
    /// Contenders (the SDK's `wait_acquire`) wait to take it.
    Contended {
        /// Its holder, when one can be named.
        pid: Option<u32>,
        /// The holder's AIH, when it is an agent.
        aih: Option<String>,
        /// Since when it is held, if known.
        #[serde(with = "crate::time_format::option")]
        since: Option<SystemTime>,
        /// The contenders' PIDs.
        waiters: Vec<u32>,
    },
    /// A live agent holds it: the normal reason a relocation fails.
    AgentActive {
        /// The agent's process.
        pid: u32,
        /// Its AIH.
        aih: String,
        /// Since when it holds the key, if known.
        #[serde(with = "crate::time_format::option")]
        since: Option<SystemTime>,
    },
    /// A spawn holds it — tags, no AIH lock yet — within the threshold:
    /// it is claiming its agent (a suspect once past the threshold).
    Materializing {
        /// The spawn.
        pid: u32,
        /// Since when it holds the key, if known.
        #[serde(with = "crate::time_format::option")]
        since: Option<SystemTime>,
    },
    /// A process holding no agent's lock holds it (a key outside the
    /// agents' dirs, or a lock taken by hand): nothing is known of why.
    Held {
        /// The holder.
        pid: u32,
        /// Since when it holds the key, if known.
        #[serde(with = "crate::time_format::option")]
        since: Option<SystemTime>,
    },
}

impl Verdict {
    /// Every kind's word ([`Self::kind`]).
    pub const KINDS: [&'static str; 12] = [
        "deadlock",
        "wait_cycle",
        "blocked",
        "stopped",
        "orphaned_child",
        "unverified_holder",
        "materializing_too_long",
        "idle",
        "contended",
        "agent_active",
        "materializing",
        "held",
    ];

    /// True for verdicts that need someone to act.
    pub fn is_suspect(&self) -> bool {
        matches!(
            self,
            Verdict::Deadlock { .. }
                | Verdict::WaitCycle { .. }
                | Verdict::Stopped { .. }
                | Verdict::OrphanedChild { .. }
                | Verdict::MaterializingTooLong { .. }
                | Verdict::Idle { .. }
        )
    }

    /// The words a person reads for it (its `kind`, spaced).
    pub fn word(&self) -> &'static str {
        match self {
            Verdict::Deadlock { .. } => "deadlock",
            Verdict::WaitCycle { .. } => "wait cycle",
            Verdict::Blocked { .. } => "blocked",
            Verdict::Stopped { .. } => "stopped",
            Verdict::OrphanedChild { .. } => "orphaned child",
            Verdict::UnverifiedHolder { .. } => "unverified holder",
            Verdict::MaterializingTooLong { .. } => "materializing too long",
            Verdict::Idle { .. } => "idle",
            Verdict::Contended { .. } => "contended",
            Verdict::AgentActive { .. } => "agent active",
            Verdict::Materializing { .. } => "materializing",
            Verdict::Held { .. } => "held",
        }
    }

    /// One short word for a table column or a row marker (at most 10
    /// columns): stopped, orphan, spawn, idle, contended, unverified,
    /// agent.
    pub fn short_word(&self) -> &'static str {
        match self {
            Verdict::Deadlock { .. } => "deadlock",
            Verdict::WaitCycle { .. } => "cycle",
            Verdict::Blocked { .. } => "blocked",
            Verdict::Stopped { .. } => "stopped",
            Verdict::OrphanedChild { .. } => "orphan",
            Verdict::UnverifiedHolder { .. } => "unverified",
            Verdict::MaterializingTooLong { .. } => "spawn",
            Verdict::Idle { .. } => "idle",
            Verdict::Contended { .. } => "contended",
            Verdict::AgentActive { .. } => "agent",
            Verdict::Materializing { .. } => "spawning",
            Verdict::Held { .. } => "held",
        }
    }

    /// The process it is about: the holder (or the keeper of an orphaned
    /// lock), when one can be named.
    pub fn pid(&self) -> Option<u32> {
        match self {
            Verdict::Stopped { pid }
            | Verdict::UnverifiedHolder { pid }
            | Verdict::MaterializingTooLong { pid, .. }
            | Verdict::Idle { pid, .. }
            | Verdict::AgentActive { pid, .. }
            | Verdict::Materializing { pid, .. }
            | Verdict::Held { pid, .. } => Some(*pid),
            Verdict::OrphanedChild { pid, .. } | Verdict::Contended { pid, .. } => *pid,
            // The one to signal to break the circle; for a chain, its
            // root blocker (none when it ends in a circle: see that key).
            Verdict::Deadlock { pid, .. } | Verdict::WaitCycle { pid, .. } => Some(*pid),
            Verdict::Blocked { root, .. } => *root,
        }
    }

    /// True for what the Events pane logs when it starts or ends: the
    /// suspects, and a key someone waits to take.
    pub fn is_logged(&self) -> bool {
        self.is_suspect() || matches!(self, Verdict::Contended { .. } | Verdict::Blocked { .. })
    }

    /// The word `watch --json` and JSON use for it (its `kind`).
    pub fn kind(&self) -> &'static str {
        match self {
            Verdict::Deadlock { .. } => "deadlock",
            Verdict::WaitCycle { .. } => "wait_cycle",
            Verdict::Blocked { .. } => "blocked",
            Verdict::Stopped { .. } => "stopped",
            Verdict::OrphanedChild { .. } => "orphaned_child",
            Verdict::UnverifiedHolder { .. } => "unverified_holder",
            Verdict::MaterializingTooLong { .. } => "materializing_too_long",
            Verdict::Idle { .. } => "idle",
            Verdict::Contended { .. } => "contended",
            Verdict::AgentActive { .. } => "agent_active",
            Verdict::Materializing { .. } => "materializing",
            Verdict::Held { .. } => "held",
        }
    }

    /// One line: what it is, and what to do.
    pub fn describe(&self, now: SystemTime) -> String {
        let age = |since: SystemTime| crate::time_format::age(since, now);
        match self {
            Verdict::Deadlock { cycle, pid, since } => format!(
                "deadlock: {} — none of them can move (seen so for {}); break it: SIGTERM \
                 pid {pid} (locktop's pick: the one holding the fewest keys, then the \
                 youngest) — `kill {pid}`",
                circle_words(cycle),
                age(*since)
            ),
            Verdict::WaitCycle { cycle, pid, why } => format!(
                "wait cycle: {} — it may clear by itself ({}); if it lasts, SIGTERM pid {pid}",
                circle_words(cycle),
                why.describe()
            ),
            Verdict::Blocked {
                pid,
                chain,
                root,
                cycle,
                deadlock,
                waiters,
            } => {
                let waiting = if waiters.is_empty() {
                    String::new()
                } else {
                    let waiters: Vec<String> = waiters.iter().map(u32::to_string).collect();
                    format!("pid {} waits to take it; ", waiters.join(", "))
                };
                // "its holder pid 2322 waits to take tag c held by pid 2194",
                // or, its holder in the circle itself, "its holder pid 7
                // waits in a deadlock: …".
                let holder = if chain.is_empty() {
                    format!("its holder pid {pid} ")
                } else {
                    format!("its holder {}", chain_words(chain))
                };
                let end = match root {
                    Some(root) => format!(
                        " — pid {root} at the chain's end waits for nothing: act on it, not on \
                         pid {pid}"
                    ),
                    None => format!(
                        "{}waits in a {}: {}",
                        if chain.is_empty() { "" } else { ", which " },
                        if *deadlock { "deadlock" } else { "wait cycle" },
                        circle_words(cycle)
                    ),
                };
                format!("blocked: {waiting}{holder}{end}")
            }
            Verdict::Stopped { pid } => format!(
                "stopped: pid {pid} holds its locks until SIGCONT or a kill — `kill -CONT {pid}`"
            ),
            Verdict::UnverifiedHolder { pid } => format!(
                "unverified holder: /proc/locks names pid {pid}, whose open files this user \
                 may not read — it may be a PID reused since; run locktop as root (or as its \
                 user) to verify it before acting"
            ),
            Verdict::OrphanedChild {
                pid: Some(pid),
                taken_by,
            } => format!(
                "orphaned child: pid {taken_by}, which took the lock, is gone; pid {pid} \
                 (sharing its file) keeps it — SIGTERM pid {pid} if it should not"
            ),
            Verdict::OrphanedChild {
                pid: None,
                taken_by,
            } => format!(
                "orphaned child: pid {taken_by}, which took the lock, is gone; a process \
                 sharing its file keeps it, which this user may not see — run locktop as \
                 root to name it"
            ),
            Verdict::MaterializingTooLong { pid, since } => format!(
                "materializing too long: pid {pid} has held tags without an AIH lock for {} — \
                 a spawn that never claimed its agent; SIGTERM it if it is stuck",
                age(*since)
            ),
            Verdict::Idle { pid, since } => format!(
                "idle: pid {pid} has used no CPU for {} — SIGTERM it if it should not \
                 hold the key (that it waits on something that will not come is a guess: only \
                 its CPU time is known)",
                age(*since)
            ),
            Verdict::Contended {
                pid,
                aih,
                since,
                waiters,
            } => {
                let holder = match (pid, aih) {
                    (Some(pid), Some(aih)) => format!("agent {aih} (pid {pid})"),
                    (Some(pid), None) => format!("pid {pid}"),
                    (None, _) => "a holder locktop cannot name".to_string(),
                };
                let held = since.map_or(String::new(), |since| format!(", held {}", age(since)));
                let waiters: Vec<String> = waiters.iter().map(u32::to_string).collect();
                format!(
                    "contended: pid {} waits to take it from {holder}{held} — wait for the \
                     holder to end, or SIGTERM it",
                    waiters.join(", ")
                )
            }
            Verdict::Materializing { pid, since } => format!(
                "materializing: pid {pid} holds tags without an AIH lock{} — a spawn claiming \
                 its agent (a suspect once it has for longer than --materializing-after)",
                since.map_or(String::new(), |since| format!(" for {}", age(since)))
            ),
            Verdict::Held { pid, since } => format!(
                "held: pid {pid} holds it{}, and holds no agent's lock — wait for it to end, \
                 or SIGTERM it if it should not hold it",
                since.map_or(String::new(), |since| format!(" for {}", age(since)))
            ),
            Verdict::AgentActive { pid, aih, since } => format!(
                "agent active: {aih} (pid {pid}) holds it{} — wait for it to end",
                since.map_or(String::new(), |since| format!(" for {}", age(since)))
            ),
        }
    }
}

impl Role {
    /// The word scripts and metrics use: `agent`, `materializing`,
    /// `other`.
    pub fn word(&self) -> &'static str {
        match self {
            Role::Agent { .. } => "agent",
            Role::Materializing => "materializing",
            Role::Other => "other",
        }
    }

    /// The word a table column shows: `agent`, `spawn`, or nothing.
    pub fn column_word(&self) -> &'static str {
        match self {
            Role::Agent { .. } => "agent",
            Role::Materializing => "spawn",
            Role::Other => "",
        }
    }

    /// The role of a process holding keys of these kinds.
    pub(crate) fn from_kinds<'a>(kinds: impl IntoIterator<Item = (KeyKind, &'a str)>) -> Self {
        let mut role = Role::Other;
        for (kind, name) in kinds {
            match kind {
                KeyKind::Instance => {
                    return Role::Agent {
                        aih: name.to_string(),
                    };
                }
                KeyKind::Tag => role = Role::Materializing,
                KeyKind::Other => {}
            }
        }
        role
    }
}

/// The verdict on a key in `state`, whose first holder has `role`
/// (`None` when it is not held, or when no fact applies: a holder of other
/// locks, or a spawn within its threshold, that nobody waits on). The
/// first verdict that applies wins (see the module doc).
pub fn judge(
    state: &KeyState,
    role: impl FnOnce(u32) -> Role,
    now: SystemTime,
    materializing: Duration,
) -> Option<Verdict> {
    judge_waits(state, None, role, now, materializing)
}

/// [`judge`] of `key` in `state`, with what the wait-for graph `waits`
/// says of it (`None`: no graph — nobody waits, as far as the caller
/// knows): a circle it is waited on in, and its holder's own waits.
pub fn judge_waits(
    state: &KeyState,
    waits: Option<(&LockKey, &WaitGraph)>,
    role: impl FnOnce(u32) -> Role,
    now: SystemTime,
    materializing: Duration,
) -> Option<Verdict> {
    if !state.liveness.is_held() {
        return None;
    }
    let cycle = waits.and_then(|(key, graph)| graph.cycle_with_key(key));
    let hops = |hops: &[Edge]| hops.iter().map(Hop::of).collect::<Vec<_>>();
    let mut wait_cycle = None;
    if let Some(cycle) = cycle {
        match cycle.deadlock(now) {
            Ok(()) => {
                return Some(Verdict::Deadlock {
                    cycle: hops(&cycle.hops),
                    pid: cycle.victim,
                    since: cycle.since.unwrap_or(now),
                });
            }
            Err(why) => {
                wait_cycle = Some(Verdict::WaitCycle {
                    cycle: hops(&cycle.hops),
                    pid: cycle.victim,
                    why,
                });
            }
        }
    }
    // Holders are listed holding first, then the gone processes that
    // took the lock: the first alive one is the holder.
    let holder = state.holders.iter().find(|holder| holder.alive);
    if let Some(holder) = holder.filter(|holder| holder.unverified) {
        return Some(Verdict::UnverifiedHolder { pid: holder.pid });
    }
    if let Some(halted) = state.halted_holder() {
        return Some(Verdict::Stopped { pid: halted.pid });
    }
    if let Some(gone) = state.holders.iter().find(|h| !h.alive) {
        return Some(Verdict::OrphanedChild {
            pid: holder.map(|holder| holder.pid),
            taken_by: gone.pid,
        });
    }
    if wait_cycle.is_some() {
        return wait_cycle;
    }
    let chain = waits.zip(holder).and_then(|((_, graph), holder)| {
        Some((
            graph,
            holder.pid,
            graph.chain_of(holder.pid, holder.started)?,
        ))
    });
    if let Some((graph, pid, chain)) = chain {
        let (root, cycle, deadlock) = match chain.end {
            ChainEnd::Root(root) => (Some(root), Vec::new(), false),
            ChainEnd::Cycle(at) => {
                let cycle = &graph.cycles()[at];
                (None, hops(&cycle.hops), cycle.deadlock(now).is_ok())
            }
        };
        return Some(Verdict::Blocked {
            pid,
            chain: hops(&chain.hops),
            root,
            cycle,
            deadlock,
            waiters: state.waiters.clone(),
        });
    }
    let role = holder.map(|holder| (holder.pid, role(holder.pid)));
    let since = state.since;
    if let Some((pid, Role::Materializing)) = role
        && let Some(since) = since
        && now.duration_since(since).unwrap_or_default() > materializing
    {
        return Some(Verdict::MaterializingTooLong { pid, since });
    }
    if let Some(idle) = idle(state) {
        return Some(idle);
    }
    let spawn = matches!(role, Some((_, Role::Materializing)));
    let (pid, aih) = match role {
        Some((pid, Role::Agent { aih })) => (Some(pid), Some(aih)),
        Some((pid, _)) => (Some(pid), None),
        None => (None, None),
    };
    let mut contenders = state.waiters.clone();
    contenders.extend(
        state
            .waiting
            .iter()
            .filter(|waiting| matches!(waiting.how, WaitKind::Trying | WaitKind::Polling))
            .map(|waiting| waiting.pid),
    );
    if !contenders.is_empty() {
        return Some(Verdict::Contended {
            pid,
            aih,
            since,
            waiters: contenders,
        });
    }
    let pid = pid?;
    Some(match aih {
        Some(aih) => Verdict::AgentActive { pid, aih, since },
        None if spawn => Verdict::Materializing { pid, since },
        None => Verdict::Held { pid, since },
    })
}

/// `idle` when every live holder has used no CPU past the threshold (the
/// engine sets `idle_since` only then); named by the first, since the
/// latest of their stillnesses (true of all of them).
fn idle(state: &KeyState) -> Option<Verdict> {
    let mut alive = state.holders.iter().filter(|holder| holder.alive);
    let first = alive.next()?;
    let mut since = first.idle_since?;
    for holder in alive {
        since = since.max(holder.idle_since?);
    }
    Some(Verdict::Idle {
        pid: first.pid,
        since,
    })
}

/// One verdict of every kind, for tests that must cover them all (a
/// `match` here fails to compile when a kind is added).
#[cfg(any(test, feature = "test-support"))]
pub fn one_of_each() -> Vec<Verdict> {
    let since = SystemTime::UNIX_EPOCH;
    let hop = Hop {
        pid: 1,
        how: WaitKind::Contender,
        kind: KeyKind::Tag,
        key: "b".into(),
        holder: 2,
    };
    let all = vec![
        Verdict::Deadlock {
            cycle: vec![hop.clone()],
            pid: 2,
            since,
        },
        Verdict::WaitCycle {
            cycle: vec![hop.clone()],
            pid: 2,
            why: MayClear::Young,
        },
        Verdict::Blocked {
            pid: 1,
            chain: vec![hop],
            root: Some(2),
            cycle: Vec::new(),
            deadlock: false,
            waiters: vec![3],
        },
        Verdict::UnverifiedHolder { pid: 1 },
        Verdict::Stopped { pid: 1 },
        Verdict::OrphanedChild {
            pid: None,
            taken_by: 1,
        },
        Verdict::MaterializingTooLong { pid: 1, since },
        Verdict::Idle { pid: 1, since },
        Verdict::Contended {
            pid: None,
            aih: None,
            since: None,
            waiters: vec![2],
        },
        Verdict::AgentActive {
            pid: 1,
            aih: "a/b".into(),
            since: None,
        },
        Verdict::Materializing {
            pid: 1,
            since: None,
        },
        Verdict::Held {
            pid: 1,
            since: None,
        },
    ];
    for verdict in &all {
        match verdict {
            Verdict::Deadlock { .. }
            | Verdict::WaitCycle { .. }
            | Verdict::Blocked { .. }
            | Verdict::UnverifiedHolder { .. }
            | Verdict::Stopped { .. }
            | Verdict::OrphanedChild { .. }
            | Verdict::MaterializingTooLong { .. }
            | Verdict::Idle { .. }
            | Verdict::Contended { .. }
            | Verdict::AgentActive { .. }
            | Verdict::Materializing { .. }
            | Verdict::Held { .. } => {}
        }
    }
    all
}

#[cfg(test)]
mod tests;
