//! Where each pane keeps its list: its length, its selection, its scroll,
//! and what Enter does on it.
//!
//! Invariant: this is the one place that reaches into a pane's cursor by
//! matching on [`Pane`]; what the cursor selects is answered by
//! [`super::selection`], and the views dispatch on the pane to draw it.
//! Adding a pane adds one arm to each function here and there.

use crate::model::{BlockingRow, KeyIdentity, Section};

use super::action::{Action, Pane};
use super::app::App;
use super::selected::Selected;

impl App {
    /// Index of the selected row in the current pane.
    pub(crate) fn selected_index(&mut self) -> usize {
        self.follow_selections();
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
    pub(crate) fn row_count(&mut self) -> usize {
        self.model.refresh();
        match self.pane {
            Pane::Tree => self.model.rows().len(),
            Pane::Holders => self.model.holders().1.len(),
            Pane::Events => self.model.event_rows().len(),
            Pane::TestHolders => self.operator.test_holders.list().len(),
            Pane::Blocking => self.blocking_rows().len(),
        }
    }
    /// Selects row `index` (clamped) of the current pane.
    pub(crate) fn select_index(&mut self, index: usize) {
        self.mark_dirty();
        self.details_scroll = 0;
        match self.pane {
            Pane::Tree => self.model.select_row(index),
            Pane::Holders => self.model.select_holder_row(index),
            Pane::Events => self.model.select_event(index),
            Pane::TestHolders => self.operator.test_holders.select(index),
            Pane::Blocking => {
                let keys = self.blocking_identities();
                self.model.select_blocking(index, &keys);
            }
        }
    }
    /// Enter: toggles a tree node; on a key elsewhere (a holder's, an
    /// event's, a blocking row's, a test holder's first), shows it in the
    /// tree.
    pub(crate) fn toggle(&mut self) {
        match self.selected() {
            Selected::Node(_) if self.pane == Pane::Tree => self.model.toggle(),
            Selected::Node(node) | Selected::HeldKey { node, .. } => {
                let (section, path) = self.model.identity(node);
                self.reveal(section, &path);
            }
            Selected::Event(index) => {
                let event = self.model.events().get(index);
                if let Some(event) = event {
                    let (section, path) =
                        (Section::of(event.key.kind()), event.key.name().to_string());
                    self.reveal(section, &path);
                }
            }
            Selected::Process { .. } | Selected::Nothing => {}
            Selected::TestHolder(id) => {
                let family = self.operator.test_holders.get(id).map(|h| &h.spec.family);
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
    /// `.` / `,`: the next (or previous) row the filter matches, wrapping.
    /// In the tree that skips the sections and directories shown only for
    /// their descendants; elsewhere every filtered row matches.
    pub(crate) fn next_match(&mut self, forward: bool) {
        if self.model.settings().filter.is_empty() {
            self.message = Some(format!(
                "no filter: {} sets one",
                super::keymap::key_of(Action::StartFilter)
            ));
            return;
        }
        if self.pane == Pane::TestHolders {
            self.message = Some("the filter does not apply to test holders".into());
            return;
        }
        let len = self.row_count();
        let filter = crate::tui::fit::visible(&self.model.settings().filter).into_owned();
        let none = || Some(format!("no row matches the filter /{filter}"));
        if len == 0 {
            self.message = none();
            return;
        }
        let from = self.selected_index();
        let matches = |app: &Self, index: usize| match app.pane {
            Pane::Tree => {
                let (data, now) = (app.model.data(), app.model.now());
                let node = data.tree.node(app.model.rows()[index].node);
                app.model.settings().shows(node, now)
            }
            _ => true,
        };
        let step = |i: usize| match forward {
            true => (i + 1) % len,
            false => (i + len - 1) % len,
        };
        let mut index = step(from);
        while index != from && !matches(self, index) {
            index = step(index);
        }
        if !matches(self, index) {
            // Round the whole list, back where it started: nothing matches.
            self.message = none();
            return;
        }
        self.select_index(index);
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
        self.model
            .blocking_rows_shown(self.config.materializing_after)
    }

    /// The most urgent key that needs attention (own test holders'
    /// keys excluded), whatever the blocking view's sort.
    pub(crate) fn most_urgent(&self) -> Option<BlockingRow> {
        let data = self.model.data();
        let rows = data.blocking_rows(self.model.now(), self.config.materializing_after);
        rows.into_iter().find(BlockingRow::needs_attention)
    }

    /// `s`: the next order of the holders or blocking view; elsewhere it
    /// says where it works.
    /// The selected row stays selected wherever the new order puts it:
    /// it is anchored first (a cursor the operator never moved has no
    /// anchor, and would stay on the first row, another row now).
    pub(crate) fn cycle_sort(&mut self) {
        self.follow_selections();
        match self.pane {
            Pane::Blocking => {
                let keys = self.blocking_identities();
                let selected = self.model.blocking_cursor().selected(keys.len());
                self.model.select_blocking(selected, &keys);
                let sort = self.model.settings().blocking_sort.next(true);
                self.model.set_blocking_sort(sort);
            }
            Pane::Holders => {
                self.model.select_holder_row(self.model.holders_selected());
                let sort = self.model.settings().holders_sort.next(false);
                self.model.set_holders_sort(sort);
            }
            _ => {
                self.message = Some(super::hints::sort_where());
                return;
            }
        }
        self.follow_selections();
    }

    /// The blocking view's rows' identities, in order.
    pub(crate) fn blocking_identities(&self) -> Vec<KeyIdentity> {
        let rows = self.blocking_rows();
        rows.iter()
            .map(|row| self.model.identity(row.node))
            .collect()
    }
}
