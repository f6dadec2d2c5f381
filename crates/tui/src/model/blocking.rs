//! The blocking view's rows (pg_activity's running / waiting / blocking is
//! the model), and the answer to "what is stuck?": every held key, those
//! someone waits on whose holder needs someone to act first, then the
//! other keys contenders wait to take (contended: someone is blocked, or
//! was refused a `LOCK_NB` try in the last minute — a process looping on
//! `try_acquire` never blocks, but it wants the key as much),
//! then the other suspects, then those only watchers wait to see released
//! (a daemon waiting for an agent to end: normal), then the rest; the
//! oldest hold first within each. Keys held by this
//! monitor's own test holders come after every other key: the operator
//! made them, they are not news.
//!
//! Invariant: derived from the data and the clock alone, per draw; its
//! size is the number of held keys (few), never the number of keys.

use std::time::{Duration, SystemTime};

use crate::engine::Liveness;
use crate::operate::verdict::Verdict;

use super::data::Data;
use super::tree::NodeId;

/// How badly a held key needs someone, most urgent first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Urgency {
    /// Someone waits on it, and its holder is a suspect.
    StuckOnSuspect,
    /// Contenders wait to take it (the SDK's `wait_acquire`), or tries
    /// to take it were refused in the last minute (`try_acquire`).
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
    /// Processes blocked on it: contenders and watchers.
    pub waiting: usize,
    /// `LOCK_NB` tries refused on it in the last minute (0 when none, or
    /// when the source cannot tell).
    pub refused: u64,
    /// How urgent it is.
    pub urgency: Urgency,
    /// Held by this monitor's own test holder.
    pub own: bool,
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
                    attention.waited_on += usize::from(row.waiting > 0 || row.refused > 0);
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
                let waiting = lock.state.waiters.len() + lock.state.watchers.len();
                let refused = lock.state.refused.as_ref().map_or(0, |r| r.last_minute);
                let suspect = verdict.as_ref().is_some_and(Verdict::is_suspect);
                let urgency = match (suspect, &lock.state) {
                    (true, _) if waiting > 0 || refused > 0 => Urgency::StuckOnSuspect,
                    (_, state) if !state.waiters.is_empty() || refused > 0 => Urgency::Contended,
                    (_, state) if !state.watchers.is_empty() => Urgency::Watched,
                    (true, _) => Urgency::Suspect,
                    (false, _) => Urgency::Held,
                };
                let row = BlockingRow {
                    node,
                    verdict,
                    waiting,
                    refused,
                    urgency,
                    own: lock.liveness() == Liveness::Own,
                };
                Some((lock.state.since, row))
            })
            .collect();
        rows.sort_by(|(a_since, a), (b_since, b)| {
            let key = |since: &Option<SystemTime>, row: &BlockingRow| {
                (row.own, row.urgency, since.is_none(), *since, row.node)
            };
            key(a_since, a).cmp(&key(b_since, b))
        });
        rows.into_iter().map(|(_, row)| row).collect()
    }
}
