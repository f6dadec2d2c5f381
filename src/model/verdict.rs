//! The operator's question, answered per held key: is it stuck, why, and
//! what to do. Derived from what the locks and `/proc` say — never a guess
//! presented as a fact.
//!
//! Invariants: a verdict is computed from the model's data and clock alone
//! (no I/O); the holder's role comes from the locks it holds (an instance
//! lock makes it an agent; tags without one, a spawn still materializing,
//! per the seed); every verdict says what to do.

use std::time::{Duration, SystemTime};

use crate::disk::KeyKind;
use crate::liveness::ProcessInfo;

use super::data::Data;
use super::tree::{Lock, NodeId};

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
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Its holder is stopped (a signal or a debugger): it will hold until
    /// SIGCONT or a kill.
    Stopped {
        /// The stopped holder.
        pid: u32,
    },
    /// A spawn has held it, without an AIH lock, for longer than the
    /// threshold.
    MaterializingTooLong {
        /// The spawn.
        pid: u32,
        /// Since when it holds the key.
        since: SystemTime,
    },
    /// A live agent holds it: the normal reason a relocation fails.
    AgentActive {
        /// The agent's process.
        pid: u32,
        /// Its AIH.
        aih: String,
        /// Since when it holds the key, if known.
        since: Option<SystemTime>,
    },
}

impl Verdict {
    /// True for verdicts that need someone to act.
    pub fn is_suspect(&self) -> bool {
        matches!(
            self,
            Verdict::Stopped { .. } | Verdict::MaterializingTooLong { .. }
        )
    }

    /// One line: what it is, and what to do.
    pub fn describe(&self, now: SystemTime) -> String {
        let age = |since: SystemTime| crate::time_format::age(since, now);
        match self {
            Verdict::Stopped { pid } => format!(
                "stopped: pid {pid} holds its locks until SIGCONT or a kill — `kill -CONT {pid}`"
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

impl Data {
    /// The role of `pid`, from the locks it holds.
    pub fn role_of(&self, pid: u32) -> Role {
        let locks = self.by_pid.get(&pid).into_iter().flatten();
        let mut holds_tag = false;
        for lock in locks.filter_map(|&id| self.lock(id)) {
            match lock.key.kind {
                KeyKind::Instance => {
                    return Role::Agent {
                        aih: lock.key.name.clone(),
                    };
                }
                KeyKind::Tag => holds_tag = true,
                KeyKind::Other => {}
            }
        }
        if holds_tag {
            Role::Materializing
        } else {
            Role::Other
        }
    }

    /// The verdict on a held lock (`None` when it is not held, or held by
    /// nobody this monitor can name).
    pub fn verdict(
        &self,
        lock: &Lock,
        now: SystemTime,
        materializing: Duration,
    ) -> Option<Verdict> {
        if !lock.liveness().is_held() {
            return None;
        }
        if let Some(halted) = lock.state.halted_holder() {
            return Some(Verdict::Stopped { pid: halted.pid });
        }
        let holder: &ProcessInfo = lock.state.holders.first()?;
        let since = lock.state.since;
        match self.role_of(holder.pid) {
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

    /// Every held key with a suspect verdict.
    pub fn suspects(&self, now: SystemTime, materializing: Duration) -> Vec<(NodeId, Verdict)> {
        let mut ids: Vec<NodeId> = self.by_pid.values().flatten().copied().collect();
        ids.sort_unstable();
        ids.dedup();
        ids.into_iter()
            .filter_map(|id| {
                let verdict = self.verdict(self.lock(id)?, now, materializing)?;
                verdict.is_suspect().then_some((id, verdict))
            })
            .collect()
    }
}
