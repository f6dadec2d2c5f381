//! The one answer to "what is selected?": `K`, `y`, `c`, Enter and the
//! details pane all ask [`App::selected`], so they act on what the
//! operator sees highlighted, in every pane.
//!
//! Invariants: a selection is an identity (a key's `(section, path)`, a
//! holder's PID, an event's sequence number, a test holder's id), kept by
//! each pane's cursor across inserts, removals and re-sorts (see
//! [`crate::model::KeyedCursor`]); [`App::follow_selections`] puts every
//! cursor back on its identity and runs before each draw and each action,
//! so the row drawn highlighted and the thing acted on are the same.
//! Until the operator moves a selection, the tree follows the most urgent
//! key (through a replay's moves too); `u` makes it follow again.

use crate::disk::LockKey;
use crate::liveness::process::ProcessInfo;
use crate::operate::verdict::Verdict;

use super::action::Pane;
use super::app::App;
use super::selected::Selected;

impl App {
    /// Puts every pane's cursor back on its identity (rows may have moved
    /// since the last draw or action).
    pub(crate) fn follow_selections(&mut self) {
        self.model.refresh();
        self.follow_most_urgent();
        let keys = self.blocking_identities();
        self.model.follow_blocking(&keys);
    }

    /// Until the operator moves a selection (a key, a click) or anything
    /// selects a row, the tree's selection — and so the details pane — is
    /// on the most urgent key, so the first screen answers "what is
    /// stuck?".
    fn follow_most_urgent(&mut self) {
        let Some(seen) = self.following_urgent else {
            return;
        };
        if self.model.selections() != seen {
            self.following_urgent = None;
            return;
        }
        let Some(urgent) = self.most_urgent() else {
            return;
        };
        if self.model.selected_node() != Some(urgent.node) {
            self.model.select_node(urgent.node);
            self.following_urgent = Some(self.model.selections());
        }
    }

    /// `u`: the tree selects the most urgent key and follows it again,
    /// whatever the operator moved since; with none, it says so (and
    /// selects the first one that comes).
    pub(crate) fn follow_urgent_again(&mut self) {
        self.pane = Pane::Tree;
        self.following_urgent = Some(self.model.selections());
        self.follow_most_urgent();
        if self.most_urgent().is_none() {
            self.message =
                Some("no key needs attention now: the tree will select the first that does".into());
        }
    }

    /// What the current pane has selected, as of the last
    /// [`App::follow_selections`].
    pub(crate) fn selected(&self) -> Selected {
        super::selected::selected_in(
            self.pane,
            &self.model,
            &self.operator.test_holders,
            self.config.materializing_after,
        )
    }

    /// The lock key the selection is about: a key row, or an event's key.
    pub(crate) fn selected_key(&self) -> Option<LockKey> {
        match self.selected() {
            Selected::Node(node) | Selected::HeldKey { node, .. } => {
                self.model.data().lock(node).map(|lock| lock.key.clone())
            }
            Selected::Event(index) => self.model.events().get(index).map(|e| e.key.clone()),
            _ => None,
        }
    }

    /// The holder process the selection points at: a held key's holder
    /// (the row's own holder in the holders pane), or a holder's process
    /// line. `None` on a free key, an event or a test holder.
    pub(crate) fn selected_holder(&self) -> Option<ProcessInfo> {
        let data = self.model.data();
        match self.selected() {
            Selected::Node(node) => {
                let lock = data.lock(node)?;
                if !lock.liveness().is_held() {
                    return None;
                }
                // A key waited on in a cycle offers the process to signal
                // to break it (a holder of one of the cycle's keys, which
                // the dialog verifies before any signal).
                let now = self.model.now();
                let verdict = data.verdict(lock, now, self.config.materializing_after);
                if let Some(Verdict::Deadlock { pid, .. } | Verdict::WaitCycle { pid, .. }) =
                    verdict
                    && let Some(victim) = data.held().holder(pid)
                {
                    return Some(victim.clone());
                }
                lock.state.holders.first().cloned()
            }
            Selected::HeldKey { pid, .. } | Selected::Process { pid } => {
                let (groups, _) = self.model.holders();
                groups
                    .iter()
                    .find(|group| group.pid == pid)
                    .map(|group| group.process.clone())
            }
            _ => None,
        }
    }
}
