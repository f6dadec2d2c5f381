//! Verdicts on the model's held keys (see [`crate::operate::verdict`]):
//! the role of a PID from the locks the model shows it holding.

use std::time::{Duration, SystemTime};

use crate::operate::verdict::{Role, Verdict, judge};

use super::data::Data;
use super::tree::{Lock, NodeId};

impl Data {
    /// The role of `pid`, from the locks it holds.
    pub fn role_of(&self, pid: u32) -> Role {
        let locks = self.by_pid.get(&pid).into_iter().flatten();
        Role::from_kinds(
            locks
                .filter_map(|&id| self.lock(id))
                .map(|lock| (lock.key.kind, lock.key.name.as_str())),
        )
    }

    /// The verdict on a held lock (`None` when it is not held, or held by
    /// nobody this monitor can name).
    pub fn verdict(
        &self,
        lock: &Lock,
        now: SystemTime,
        materializing: Duration,
    ) -> Option<Verdict> {
        judge(&lock.state, |pid| self.role_of(pid), now, materializing)
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
