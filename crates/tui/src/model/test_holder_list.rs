//! The test holders the operator started (pane 4): what each was asked to
//! hold, where, and where it is in its life, folded from the holder
//! manager's [`HolderUpdate`]s.
//!
//! Invariants: rows keep the order holders were started in and are never
//! dropped (a failed or exited holder stays, with its reason); a child
//! holder's PID is announced as "own" exactly once, when first known, and
//! withdrawn exactly once, when the holder is over — this process's own
//! PID (in-process holders) is never withdrawn. Pure: no I/O.

use std::time::SystemTime;

use super::{KeyedCursor, ListCursor};
use crate::operate::test_holders::{HolderId, HolderSpec, HolderStatus, HolderUpdate, Placement};

/// One test holder as the UI knows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TestHolder {
    /// The manager's id (`#n` on screen).
    pub id: HolderId,
    /// What it was asked to hold, where and how.
    pub spec: HolderSpec,
    /// Its process, once known (this process for in-process holders).
    pub pid: Option<u32>,
    /// Where it is in its life.
    pub status: HolderStatus,
    /// When it was started.
    pub started: SystemTime,
    /// When it began holding, if it did.
    pub holding_since: Option<SystemTime>,
    /// When its status last changed.
    pub changed: SystemTime,
    /// Whether its PID was announced to the engine as own.
    own_announced: bool,
}

/// A change to the engine's set of own PIDs caused by an update.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OwnPid {
    /// Treat this child's keys as own.
    Add(u32),
    /// This child is over: stop treating its PID as own.
    Remove(u32),
}

/// Every test holder of this run, oldest first, and the selection.
#[derive(Debug, Clone, Default)]
pub struct TestHolders {
    list: Vec<TestHolder>,
    cursor: KeyedCursor<HolderId>,
}

impl TestHolders {
    /// Records a holder just started (before any of its updates).
    pub fn add(&mut self, id: HolderId, spec: HolderSpec, at: SystemTime) {
        self.list.push(TestHolder {
            id,
            spec,
            pid: None,
            status: HolderStatus::Starting,
            started: at,
            holding_since: None,
            changed: at,
            own_announced: false,
        });
        self.cursor.follow(&self.ids());
    }

    fn ids(&self) -> Vec<HolderId> {
        self.list.iter().map(|h| h.id).collect()
    }

    /// Folds one update in. Returns the own-PID change it implies (for a
    /// child holder only). Updates of unknown ids are ignored.
    pub fn apply(&mut self, update: &HolderUpdate) -> Option<OwnPid> {
        let holder = self.list.iter_mut().find(|h| h.id == update.id)?;
        if update.pid.is_some() {
            holder.pid = update.pid;
        }
        if update.status == HolderStatus::Holding && holder.holding_since.is_none() {
            holder.holding_since = Some(update.at);
        }
        holder.status = update.status.clone();
        holder.changed = update.at;
        if holder.spec.placement != Placement::Child {
            return None;
        }
        let pid = holder.pid?;
        if holder.status.is_over() {
            return std::mem::take(&mut holder.own_announced).then_some(OwnPid::Remove(pid));
        }
        (!std::mem::replace(&mut holder.own_announced, true)).then_some(OwnPid::Add(pid))
    }

    /// Every holder, oldest first.
    pub fn list(&self) -> &[TestHolder] {
        &self.list
    }

    /// The holder with this id.
    pub fn get(&self, id: HolderId) -> Option<&TestHolder> {
        self.list.iter().find(|h| h.id == id)
    }

    /// How many holders are not over yet.
    pub fn running(&self) -> usize {
        self.list.iter().filter(|h| !h.status.is_over()).count()
    }

    /// The list's cursor.
    pub fn cursor(&self) -> &ListCursor {
        self.cursor.cursor()
    }

    /// Records where the last frame scrolled the list.
    pub(crate) fn set_offset(&mut self, offset: usize) {
        self.cursor.set_offset(offset);
    }

    /// Index of the selected row (clamped): the anchored holder's row.
    pub fn selected(&self) -> usize {
        self.cursor.cursor().selected(self.list.len())
    }

    /// The selected holder.
    pub(crate) fn selected_holder(&self) -> Option<&TestHolder> {
        self.list.get(self.selected())
    }

    /// Selects row `index` (clamped).
    pub fn select(&mut self, index: usize) {
        self.cursor.select(index, &self.ids());
    }

    /// Removes holder `id` from the list if it is over (failed or exited);
    /// true when it was removed. A running holder is never dropped: its
    /// updates (and its own PID) are still to come.
    pub(crate) fn remove_over(&mut self, id: HolderId) -> bool {
        let before = self.list.len();
        self.list.retain(|h| h.id != id || !h.status.is_over());
        let removed = self.list.len() < before;
        if removed {
            self.cursor.follow(&self.ids());
        }
        removed
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::locks::Family;
    use crate::model::fixtures::t;
    use crate::operate::test_holders::HoldMode;

    fn spec(placement: Placement) -> HolderSpec {
        HolderSpec {
            family: Family::Group(vec!["t".into()]),
            placement,
            mode: HoldMode::Wait,
        }
    }

    fn update(id: HolderId, pid: Option<u32>, status: HolderStatus, at: u64) -> HolderUpdate {
        HolderUpdate {
            id,
            pid,
            status,
            at: t(at),
        }
    }

    #[test]
    fn a_child_pid_is_own_from_first_sight_until_it_is_over() {
        let mut holders = TestHolders::default();
        holders.add(1, spec(Placement::Child), t(0));
        assert_eq!(
            holders.apply(&update(1, None, HolderStatus::Starting, 0)),
            None
        );
        let waiting = HolderStatus::Waiting(vec![]);
        assert_eq!(
            holders.apply(&update(1, Some(50), waiting, 1)),
            Some(OwnPid::Add(50))
        );
        assert_eq!(
            holders.apply(&update(1, Some(50), HolderStatus::Holding, 2)),
            None
        );
        assert_eq!(holders.get(1).unwrap().holding_since, Some(t(2)));
        let exited = HolderStatus::Exited("killed by SIGKILL".into());
        assert_eq!(
            holders.apply(&update(1, Some(50), exited.clone(), 3)),
            Some(OwnPid::Remove(50))
        );
        assert_eq!(holders.apply(&update(1, Some(50), exited, 4)), None);
        assert_eq!(holders.running(), 0);
    }

    #[test]
    fn an_in_process_holder_never_touches_the_own_pids() {
        let mut holders = TestHolders::default();
        holders.add(7, spec(Placement::InProcess), t(0));
        let me = Some(std::process::id());
        assert_eq!(
            holders.apply(&update(7, me, HolderStatus::Holding, 1)),
            None
        );
        let exited = HolderStatus::Exited("released".into());
        assert_eq!(holders.apply(&update(7, me, exited, 2)), None);
        assert_eq!(
            holders.apply(&update(99, me, HolderStatus::Holding, 2)),
            None
        );
        assert_eq!(holders.list().len(), 1, "unknown ids are ignored");
    }
}
