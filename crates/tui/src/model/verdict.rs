//! Verdicts on the model's held keys (see [`crate::operate::verdict`]):
//! the role of a PID from the locks the held view has it holding, and
//! who waits for whom from the held view's wait-for graph.

use std::time::{Duration, SystemTime};

use crate::operate::verdict::{Role, Verdict};

use super::data::Data;
use super::tree::Lock;

impl Data {
    /// The role of `pid`, from the locks it holds.
    pub fn role_of(&self, pid: u32) -> Role {
        self.held().role_of(pid)
    }

    /// The verdict on a held lock (`None` when it is not held, or held by
    /// nobody this monitor can name).
    pub fn verdict(
        &self,
        lock: &Lock,
        now: SystemTime,
        materializing: Duration,
    ) -> Option<Verdict> {
        self.held()
            .judge_with(&lock.key, &lock.state, now, materializing)
    }
}
