//! The blocking view's rows (pg_activity's running / waiting / blocking is
//! the model): every held key, those that need someone to act first
//! (suspects), then those someone waits on (contended), then the rest;
//! the oldest hold first within each.
//!
//! Invariant: derived from the data and the clock alone, per draw; its
//! size is the number of held keys (few), never the number of keys.

use std::time::{Duration, SystemTime};

use crate::operate::verdict::Verdict;

use super::data::Data;
use super::tree::NodeId;

/// One held key in the blocking view.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockingRow {
    /// The key's node.
    pub node: NodeId,
    /// Why it is held, if locktop can say.
    pub verdict: Option<Verdict>,
    /// Processes blocked on it: contenders and watchers.
    pub waiting: usize,
}

impl Data {
    /// Every held key, in the blocking view's order.
    pub fn blocking_rows(&self, now: SystemTime, materializing: Duration) -> Vec<BlockingRow> {
        let mut ids: Vec<NodeId> = self.by_pid.values().flatten().copied().collect();
        ids.sort_unstable();
        ids.dedup();
        let mut rows: Vec<(u8, Option<SystemTime>, BlockingRow)> = ids
            .into_iter()
            .filter_map(|node| {
                let lock = self.lock(node)?;
                let verdict = self.verdict(lock, now, materializing);
                let waiting = lock.state.waiters.len() + lock.state.watchers.len();
                let rank = match (&verdict, waiting) {
                    (Some(verdict), _) if verdict.is_suspect() => 0,
                    (_, 1..) => 1,
                    _ => 2,
                };
                let row = BlockingRow {
                    node,
                    verdict,
                    waiting,
                };
                Some((rank, lock.state.since, row))
            })
            .collect();
        rows.sort_by(|a, b| {
            (a.0, a.1.is_none(), a.1, a.2.node).cmp(&(b.0, b.1.is_none(), b.1, b.2.node))
        });
        rows.into_iter().map(|(_, _, row)| row).collect()
    }
}
