//! What the current pane has selected: an identity, as the details pane
//! draws it and the operator's actions act on it (the answer is
//! [`super::selection`]'s).

use std::time::Duration;

use crate::model::{HolderRow, Model, NodeId, TestHolders};
use crate::operate::test_holders::HolderId;

use super::action::Pane;

/// What the current pane has selected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Selected {
    /// Nothing: the pane's list is empty.
    Nothing,
    /// A node of the tree (a key, a directory, a section, a problem), or a
    /// key of the blocking view.
    Node(NodeId),
    /// A key row of the holders pane: `node`, as held by `pid`.
    HeldKey {
        /// The key's node.
        node: NodeId,
        /// The holder whose group the row is in.
        pid: u32,
    },
    /// A process line of the holders pane.
    Process {
        /// Its PID.
        pid: u32,
    },
    /// The `index`-th newest logged event.
    Event(usize),
    /// A test holder started from this monitor.
    TestHolder(HolderId),
}

/// What `pane` has selected, as of the model's last follow (spawns are
/// suspects after `materializing`, which orders the blocking view).
pub(crate) fn selected_in(
    pane: Pane,
    model: &Model,
    test_holders: &TestHolders,
    materializing: Duration,
) -> Selected {
    let found = match pane {
        Pane::Tree => model.selected_node().map(Selected::Node),
        Pane::Blocking => {
            let rows = model.blocking_rows_shown(materializing);
            let index = model.blocking_cursor().selected(rows.len());
            rows.get(index).map(|row| Selected::Node(row.node))
        }
        Pane::Holders => {
            let (groups, rows) = model.holders();
            rows.get(model.holders_selected()).map(|row| match *row {
                HolderRow::Process { group } => Selected::Process {
                    pid: groups[group].pid,
                },
                HolderRow::Key { group, node } => Selected::HeldKey {
                    node,
                    pid: groups[group].pid,
                },
            })
        }
        Pane::Events => model.selected_event().map(Selected::Event),
        Pane::TestHolders => test_holders
            .selected_holder()
            .map(|holder| Selected::TestHolder(holder.id)),
    };
    found.unwrap_or(Selected::Nothing)
}
