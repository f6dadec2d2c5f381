//! The operator's question, answered per held key: is it stuck, why, and
//! what to do. Derived from what the locks and `/proc` say — never a guess
//! presented as a fact.
//!
//! Invariants: [`judge`] is pure (a key's state, its holder's role, a
//! clock, a threshold); the holder's role comes from the locks it holds
//! (an instance lock makes it an agent; tags without one, a spawn still
//! materializing, per the seed); every verdict says what to do.

use std::time::{Duration, SystemTime};

use crate::disk::KeyKind;
use crate::liveness::KeyState;

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
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Verdict {
    /// Its holder is stopped (a signal or a debugger): it will hold until
    /// SIGCONT or a kill.
    Stopped {
        /// The stopped holder.
        pid: u32,
    },
    /// The process that took the lock is gone; a process that shares its
    /// open file (a forked child) keeps it.
    OrphanedChild {
        /// The process that keeps the lock.
        pid: u32,
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
}

impl Verdict {
    /// True for verdicts that need someone to act.
    pub fn is_suspect(&self) -> bool {
        matches!(
            self,
            Verdict::Stopped { .. }
                | Verdict::OrphanedChild { .. }
                | Verdict::MaterializingTooLong { .. }
        )
    }

    /// One line: what it is, and what to do.
    pub fn describe(&self, now: SystemTime) -> String {
        let age = |since: SystemTime| crate::time_format::age(since, now);
        match self {
            Verdict::Stopped { pid } => format!(
                "stopped: pid {pid} holds its locks until SIGCONT or a kill — `kill -CONT {pid}`"
            ),
            Verdict::OrphanedChild { pid, taken_by } => format!(
                "orphaned child: pid {taken_by}, which took the lock, is gone; pid {pid} \
                 (sharing its file) keeps it — SIGTERM pid {pid} with K if it should not"
            ),
            Verdict::MaterializingTooLong { pid, since } => format!(
                "materializing too long: pid {pid} has held tags without an AIH lock for {} — \
                 a spawn that never claimed its agent; SIGTERM it if it is stuck",
                age(*since)
            ),
            Verdict::AgentActive { pid, aih, since } => format!(
                "agent active: {aih} (pid {pid}) holds it{} — wait for it to end",
                since.map_or(String::new(), |since| format!(" for {}", age(since)))
            ),
        }
    }
}

impl Role {
    /// The role of a process holding keys of these kinds.
    pub fn from_kinds<'a>(kinds: impl IntoIterator<Item = (KeyKind, &'a str)>) -> Self {
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
/// (`None` when it is not held, or held by nobody locktop can name).
pub fn judge(
    state: &KeyState,
    role: impl FnOnce(u32) -> Role,
    now: SystemTime,
    materializing: Duration,
) -> Option<Verdict> {
    if !state.liveness.is_held() {
        return None;
    }
    if let Some(halted) = state.halted_holder() {
        return Some(Verdict::Stopped { pid: halted.pid });
    }
    let holder = state.holders.first()?;
    if holder.alive
        && let Some(gone) = state.holders.iter().find(|h| !h.alive)
    {
        return Some(Verdict::OrphanedChild {
            pid: holder.pid,
            taken_by: gone.pid,
        });
    }
    let since = state.since;
    match role(holder.pid) {
        Role::Agent { aih } => Some(Verdict::AgentActive {
            pid: holder.pid,
            aih,
            since,
        }),
        Role::Materializing => {
            let since = since?;
            let held_for = now.duration_since(since).unwrap_or_default();
            (held_for > materializing).then_some(Verdict::MaterializingTooLong {
                pid: holder.pid,
                since,
            })
        }
        Role::Other => None,
    }
}
