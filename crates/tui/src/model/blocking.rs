//! The blocking view's rows (pg_activity's running / waiting / blocking is
//! the model), and the answer to "what is stuck?": every held key, those
//! waited on in a deadlock first, then in a wait cycle that may clear,
//! then those someone waits on whose holder needs someone to act, then
//! the other keys someone waits to take (a contender blocked in
//! `wait_acquire`, or a process still looping on `try_acquire`: refused
//! within the last seconds), then the other suspects, then those only
//! watchers wait to see released (a daemon waiting for an agent to end:
//! normal), then the rest. Within each, the key whose holder blocks the
//! most processes (directly or down a chain) first, then the oldest hold.
//! Tries refused earlier in the minute by processes no longer trying are
//! history: shown, and said as such, but they make nothing urgent. Keys
//! held by this monitor's own test holders come after every other key:
//! the operator made them, they are not news.
//!
//! Invariant: derived from the data and the clock alone, per draw; its
//! size is the number of held keys (few), never the number of keys.

use std::time::{Duration, SystemTime};

use crate::engine::Liveness;
use crate::liveness::WaitKind;
use crate::operate::verdict::Verdict;

use super::data::Data;
use super::tree::NodeId;

/// How badly a held key needs someone, most urgent first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Urgency {
    /// It is waited on in a deadlock.
    Deadlock,
    /// It is waited on in a cycle of waits that may still clear.
    WaitCycle,
    /// Someone waits on it, and its holder is a suspect.
    StuckOnSuspect,
    /// Contenders wait to take it (the SDK's `wait_acquire`), or a
    /// process still tries to (`try_acquire` refused within the last
    /// seconds).
    Contended,
    /// Its holder is a suspect; nobody waits yet.
    Suspect,
    /// Only watchers wait for it to be released (`wait_released`).
    Watched,
    /// Held, nothing known to be wrong.
    Held,
}

/// One held key in the blocking view.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BlockingRow {
    /// The key's node.
    pub node: NodeId,
    /// Why it is held, if locktop can say.
    pub verdict: Option<Verdict>,
    /// Processes waiting on it, by kind.
    pub waiting: WaitCounts,
    /// `LOCK_NB` tries refused on it in the last minute (0 when none, or
    /// when the source cannot tell), by processes trying now or not.
    pub refused: u64,
    /// How many processes wait on its holder, directly or down a chain
    /// (0 when none, or when its holder itself waits).
    pub blocks: usize,
    /// How urgent it is.
    pub urgency: Urgency,
    /// Held by this monitor's own test holder.
    pub own: bool,
}

/// The processes waiting on one key, by how they wait.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct WaitCounts {
    /// Blocked taking it (`wait_acquire`).
    pub contenders: usize,
    /// Blocked until it is released (`wait_released`).
    pub watchers: usize,
    /// Looping on `try_acquire`, refused within the last seconds.
    pub trying: usize,
    /// Polling for it (a family waiter, by the rate of its shared tries:
    /// a guess).
    pub polling: usize,
}

impl WaitCounts {
    /// All of them.
    pub fn total(self) -> usize {
        self.contenders + self.watchers + self.trying + self.polling
    }

    /// Those who want to take it (not watchers).
    pub fn takers(self) -> usize {
        self.contenders + self.trying + self.polling
    }

    /// `1 waiting to take it, 1 waiting for its release, 2 trying`: each
    /// kind said (nothing when nobody waits).
    pub fn describe(self) -> String {
        let mut parts = Vec::new();
        if self.contenders > 0 {
            parts.push(format!("{} waiting to take it", self.contenders));
        }
        if self.trying > 0 {
            parts.push(format!("{} trying to take it", self.trying));
        }
        if self.polling > 0 {
            parts.push(format!(
                "{} polling for it (a guess, from its rate)",
                self.polling
            ));
        }
        if self.watchers > 0 {
            parts.push(format!("{} waiting for its release", self.watchers));
        }
        parts.join(", ")
    }

    /// The column's short form: `2 take 1 end`.
    pub fn short(self) -> String {
        let mut parts = Vec::new();
        if self.takers() > 0 {
            parts.push(format!("{} take", self.takers()));
        }
        if self.watchers > 0 {
            parts.push(format!("{} end", self.watchers));
        }
        parts.join(" ")
    }
}

impl BlockingRow {
    /// True when it needs attention and is not the operator's own.
    pub(crate) fn needs_attention(&self) -> bool {
        !self.own && self.urgency < Urgency::Held
    }
}

/// What the header counts: suspects and keys waited on, apart from the
/// operator's own test holders.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Attention {
    /// Keys with a suspect verdict, own keys excluded.
    pub suspects: usize,
    /// Keys someone waits on or was refused, own keys excluded.
    pub waited_on: usize,
    /// Own test holders' keys with a suspect verdict.
    pub own_suspects: usize,
}

impl Attention {
    /// Counts `rows`.
    pub fn of(rows: &[BlockingRow]) -> Self {
        let mut attention = Attention::default();
        for row in rows {
            let suspect = row.verdict.as_ref().is_some_and(Verdict::is_suspect);
            match row.own {
                true => attention.own_suspects += usize::from(suspect),
                false => {
                    attention.suspects += usize::from(suspect);
                    attention.waited_on += usize::from(row.waiting.total() > 0);
                }
            }
        }
        attention
    }
}

impl Data {
    /// Every held key with a named holder, in the blocking view's order
    /// (the most urgent first: see the module doc).
    pub(crate) fn blocking_rows(
        &self,
        now: SystemTime,
        materializing: Duration,
    ) -> Vec<BlockingRow> {
        let ids = self.held_nodes();
        let mut rows: Vec<(Option<SystemTime>, BlockingRow)> = ids
            .into_iter()
            .filter_map(|node| {
                let lock = self.lock(node)?;
                let verdict = self.verdict(lock, now, materializing);
                let waiting = WaitCounts {
                    contenders: lock.state.waiters.len(),
                    watchers: lock.state.watchers.len(),
                    trying: lock
                        .state
                        .waiting
                        .iter()
                        .filter(|waiting| waiting.how == WaitKind::Trying)
                        .count(),
                    polling: lock
                        .state
                        .waiting
                        .iter()
                        .filter(|waiting| waiting.how == WaitKind::Polling)
                        .count(),
                };
                let refused = lock.state.refused.as_ref().map_or(0, |r| r.last_minute);
                let suspect = verdict.as_ref().is_some_and(Verdict::is_suspect);
                let urgency = match &verdict {
                    Some(Verdict::Deadlock { .. }) => Urgency::Deadlock,
                    Some(Verdict::WaitCycle { .. }) => Urgency::WaitCycle,
                    _ if suspect && waiting.total() > 0 => Urgency::StuckOnSuspect,
                    _ if waiting.takers() > 0 => Urgency::Contended,
                    _ if suspect => Urgency::Suspect,
                    _ if waiting.watchers > 0 => Urgency::Watched,
                    _ => Urgency::Held,
                };
                let waits = self.held().waits();
                let blocks = lock
                    .state
                    .holders
                    .iter()
                    .filter(|holder| holder.alive)
                    .map(|holder| waits.blocked_by(holder.pid))
                    .max()
                    .unwrap_or_default();
                let row = BlockingRow {
                    node,
                    verdict,
                    waiting,
                    refused,
                    blocks,
                    urgency,
                    own: lock.liveness() == Liveness::Own,
                };
                Some((lock.state.since, row))
            })
            .collect();
        rows.sort_by(|(a_since, a), (b_since, b)| {
            let key = |since: &Option<SystemTime>, row: &BlockingRow| {
                let blocks = std::cmp::Reverse(row.blocks);
                (
                    row.own,
                    row.urgency,
                    blocks,
                    since.is_none(),
                    *since,
                    row.node,
                )
            };
            key(a_since, a).cmp(&key(b_since, b))
        });
        rows.into_iter().map(|(_, row)| row).collect()
    }
}
