//! Where each pane keeps its list: its length, its selection, its scroll,
//! and what Enter does on it.
//!
//! Invariant: this is the one place that reaches into a pane's state by
//! matching on [`Pane`] (the views dispatch on it in `views/mod.rs` and
//! `views/details.rs`); adding a pane adds one arm to each function here.

use crate::model::{BlockingRow, HolderRow, NodeId, Section, Sort};

use super::action::Pane;
use super::app::App;

impl App {
    /// Index of the selected row in the current pane.
    pub fn selected_index(&mut self) -> usize {
        self.model.refresh();
        match self.pane {
            Pane::Tree => self.model.selected_row(),
            Pane::Holders => self.model.holders_selected(),
            Pane::Events => self.model.events_selected(),
            Pane::TestHolders => self.operator.test_holders.selected(),
            Pane::Blocking => {
                let len = self.blocking_rows().len();
                self.model.blocking_cursor().selected(len)
            }
        }
    }
    /// How many rows the current pane has.
    pub fn row_count(&mut self) -> usize {
        self.model.refresh();
        match self.pane {
            Pane::Tree => self.model.rows().len(),
            Pane::Holders => self.model.holders().1.len(),
            Pane::Events => self.model.events().len(),
            Pane::TestHolders => self.operator.test_holders.list().len(),
            Pane::Blocking => self.blocking_rows().len(),
        }
    }
    /// Selects row `index` (clamped) of the current pane.
    pub fn select_index(&mut self, index: usize) {
        self.mark_dirty();
        self.details_scroll = 0;
        match self.pane {
            Pane::Tree => self.model.select_row(index),
            Pane::Holders => self.model.select_holder_row(index),
            Pane::Events => self.model.select_event(index),
            Pane::TestHolders => self.operator.test_holders.select(index),
            Pane::Blocking => {
                let len = self.blocking_rows().len();
                self.model.select_blocking(index, len);
            }
        }
    }
    /// Enter: toggles a tree node; on a holder's key, shows it in the tree.
    pub(crate) fn toggle(&mut self) {
        match self.pane {
            Pane::Tree => self.model.toggle(),
            Pane::Holders => {
                let index = self.model.holders_selected();
                let row = self.model.holders().1.get(index).copied();
                if let Some(HolderRow::Key { node, .. }) = row {
                    let tree = &self.model.data().tree;
                    let node = tree.node(node);
                    let (section, path) = (node.section, node.path.clone());
                    self.reveal(section, &path);
                }
            }
            Pane::Events => {
                let event = self.model.events().get(self.model.events_selected());
                if let Some(event) = event {
                    let (section, path) = (Section::of(event.key.kind), event.key.name.clone());
                    self.reveal(section, &path);
                }
            }
            Pane::Blocking => {
                if let Some(id) = self.blocking_selected() {
                    let node = self.model.data().tree.node(id);
                    let (section, path) = (node.section, node.path.clone());
                    self.reveal(section, &path);
                }
            }
            Pane::TestHolders => {
                let family = self
                    .operator
                    .test_holders
                    .selected_holder()
                    .map(|h| &h.spec.family);
                let first = match family {
                    Some(crate::locks::Family::Hierarchy { aih, .. }) => {
                        Some((Section::Instances, aih.clone()))
                    }
                    Some(crate::locks::Family::Group(tags)) => {
                        tags.first().map(|tag| (Section::Tags, tag.clone()))
                    }
                    None => None,
                };
                if let Some((section, path)) = first {
                    self.reveal(section, &path);
                }
            }
        }
    }
    /// Switches to the tree and selects `(section, path)` if it is a row.
    fn reveal(&mut self, section: Section, path: &str) {
        let id = self.model.data().tree.find(section, path);
        match id.is_some_and(|id| self.model.select_node(id)) {
            true => self.pane = Pane::Tree,
            false => {
                self.message = Some(format!(
                    "{path} is not a row of the tree (hidden by the filter, free keys or a collapsed node)"
                ));
            }
        }
    }

    /// Records where the last frame scrolled the current pane's list.
    pub(crate) fn record_offset(&mut self, offset: usize) {
        match self.pane {
            Pane::Tree => self.model.set_tree_offset(offset),
            Pane::Holders => self.model.set_holders_offset(offset),
            Pane::Events => self.model.set_events_offset(offset),
            Pane::TestHolders => self.operator.test_holders.set_offset(offset),
            Pane::Blocking => self.model.set_blocking_offset(offset),
        }
    }

    /// The blocking view's rows, now (few: one per held key), in the
    /// chosen order (stable: ties keep the urgency order).
    pub(crate) fn blocking_rows(&self) -> Vec<BlockingRow> {
        let materializing = self.config.materializing_after;
        let data = self.model.data();
        let mut rows = data.blocking_rows(self.model.now(), materializing);
        let lock = |row: &BlockingRow| data.lock(row.node);
        match self.model.settings().sort {
            Sort::Urgency => {}
            Sort::Age => rows.sort_by_key(|row| {
                let since = lock(row).and_then(|l| l.state.since);
                (since.is_none(), since)
            }),
            Sort::Pid => rows
                .sort_by_key(|row| lock(row).and_then(|l| l.state.holders.first().map(|p| p.pid))),
            Sort::Name => rows.sort_by_key(|row| lock(row).map(|l| l.key.name.clone())),
        }
        rows
    }

    /// `s`: the next order of the holders or blocking view; elsewhere it
    /// says where it works.
    pub(crate) fn cycle_sort(&mut self) {
        let urgency = match self.pane {
            Pane::Blocking => true,
            Pane::Holders => false,
            _ => {
                self.message = Some(super::hints::sort_where());
                return;
            }
        };
        let sort = self.model.settings().sort.next(urgency);
        self.model.set_sort(sort);
        self.select_index(0);
    }

    /// The key selected in the blocking view.
    pub(crate) fn blocking_selected(&self) -> Option<NodeId> {
        let rows = self.blocking_rows();
        let index = self.model.blocking_cursor().selected(rows.len());
        rows.get(index).map(|row| row.node)
    }
}
