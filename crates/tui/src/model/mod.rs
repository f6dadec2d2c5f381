//! The model: pure state of the monitor — the engine's view folded from
//! [`Delta`]s, plus what the operator is looking at (selection, collapsed
//! nodes, filter, free-key toggle, pause). No terminal, no I/O: the one
//! question it cannot answer itself ("is PID n still alive?", to tell a
//! death from a release) is asked through a function given at creation.
//!
//! Invariants:
//! - every delta is applied to the data, paused or not; while paused the
//!   views read a frozen copy taken at the moment of pausing;
//! - the selection is an identity `(section, path)`, not a row index: it
//!   stays on the same key while rows are inserted or removed around it;
//!   only when its node stops being a row does it fall back to the row at
//!   the same index (clamped);
//! - rows (tree and holders) are re-derived by [`Model::refresh`], at most
//!   once per change of the shown data or of the view settings, never per
//!   frame and never per delta; the getters only read what the last
//!   refresh derived (debug builds assert it is current), so a view can
//!   read the model through `&self`;
//! - each list's selection and scroll live in one [`ListCursor`].

mod blocking;
mod cursor;
mod data;
mod events;
pub mod form;
pub mod history;
mod holders;
pub(crate) mod test_holder_list;
mod text_match;
mod tree;
mod verdict;
mod view;

#[cfg(test)]
pub(crate) mod fixtures;
#[cfg(test)]
mod tests;

use std::time::SystemTime;

pub use crate::operate::verdict::{MATERIALIZING_AFTER, Role, Verdict};
pub(crate) use blocking::{Attention, BlockingRow, Urgency};
pub(crate) use cursor::{KeyedCursor, ListCursor};
pub(crate) use data::RECENTLY_FREED;
pub use data::{Counts, Data};
pub(crate) use events::EventLog;
pub use events::{Event, EventKind};
pub(crate) use form::{FamilyKind, FormField, FormPurpose, HolderForm, describe_family};
pub use history::Hold;
pub(crate) use history::{Ended, History};
pub(crate) use holders::{HolderGroup, HolderRow};
pub(crate) use test_holder_list::{OwnPid, TestHolders};
pub use tree::{Lock, Section, Tree};
pub(crate) use tree::{Node, NodeId};
pub use view::Row;
pub(crate) use view::{Flat, SectionTally, Sort, ViewSettings};
#[cfg(test)]
pub(crate) use {data::FREE_LISTED, events::EVENT_LOG_CAPACITY};

use crate::engine::Delta;

/// Answers whether a PID is still a running process (`None`: nobody can
/// tell — a replay of a change the recorder did not see happen).
pub(crate) use data::PidAlive;

/// A key's identity across changes: its section and path (node ids are
/// reused once pruned).
pub(crate) type KeyIdentity = (Section, String);

/// A holders-pane row's identity: the holder's PID, and the key for a
/// key row (`None` for the process line).
pub(crate) type HolderIdentity = (u32, Option<KeyIdentity>);

/// The whole UI state, minus the terminal.
pub struct Model {
    data: Data,
    frozen: Option<Box<Data>>,
    changes_while_paused: u64,
    settings: ViewSettings,
    now: SystemTime,
    pid_alive: PidAlive,
    /// `--materializing-after`, for the verdicts the event log records.
    materializing: std::time::Duration,
    flat: Flat,
    flat_version: Option<u64>,
    selected: Option<(Section, String)>,
    /// Tree selections made through [`Model::select_row`] (by anyone),
    /// not counting the fallback when the selected key is gone.
    selections: u64,
    tree_cursor: ListCursor,
    holders_cache: Option<(u64, String, Vec<HolderGroup>, Vec<HolderRow>)>,
    holders_cursor: KeyedCursor<HolderIdentity>,
    events_cursor: ListCursor,
    /// The log indexes the events pane shows (those the filter passes),
    /// for the data version and filter they were derived for.
    events_cache: Option<(u64, String, Vec<usize>)>,
    /// The selected event's sequence number (see [`Model::events_selected`]).
    event_anchor: Option<u64>,
    blocking_cursor: KeyedCursor<KeyIdentity>,
}

impl Default for Model {
    fn default() -> Self {
        Self::new(Box::new(|_| Some(true)))
    }
}

impl Model {
    /// An empty model; `pid_alive` tells a holder's death from a release.
    pub fn new(pid_alive: impl Fn(u32) -> Option<bool> + Send + Sync + 'static) -> Self {
        let pid_alive: PidAlive = std::sync::Arc::new(pid_alive);
        Self {
            data: Data::new(pid_alive.clone()),
            frozen: None,
            changes_while_paused: 0,
            settings: ViewSettings::default(),
            now: SystemTime::UNIX_EPOCH,
            pid_alive,
            materializing: MATERIALIZING_AFTER,
            flat: Flat::default(),
            flat_version: None,
            selected: None,
            selections: 0,
            tree_cursor: ListCursor::default(),
            holders_cache: None,
            holders_cursor: KeyedCursor::default(),
            events_cursor: ListCursor::default(),
            events_cache: None,
            event_anchor: None,
            blocking_cursor: KeyedCursor::default(),
        }
    }

    /// Forgets every key, event and watcher fact (a replay moving its
    /// cursor rebuilds them from the recording); the settings and the
    /// selected key stay, the selected event does not (events are
    /// numbered anew).
    pub(crate) fn reset_data(&mut self) {
        self.data = Data::new(self.pid_alive.clone());
        self.data.set_materializing(self.materializing);
        self.data
            .set_show_free(self.settings.show_free, &self.settings.filter, self.now);
        self.frozen = None;
        self.changes_while_paused = 0;
        self.flat_version = None;
        self.holders_cache = None;
        self.events_cache = None;
        self.event_anchor = None;
    }

    /// Folds one delta into the data (also while paused); the verdict
    /// changes it causes are logged as `watch` tells them (a holder's
    /// other keys once the burst has settled: see [`Model::settle`]).
    pub fn apply(&mut self, delta: Delta) {
        self.data.apply(delta);
        if self.frozen.is_some() {
            self.changes_while_paused += 1;
        }
    }

    /// Notes that locktop signalled `pid` (see [`EventLog::note_signalled`]).
    pub(crate) fn note_signalled(&mut self, pid: u32, started: Option<SystemTime>) {
        self.data.events.note_signalled(pid, started);
    }

    /// Asks the function given at creation whether `pid` still runs
    /// (not known: no).
    pub fn pid_alive(&self, pid: u32) -> bool {
        (self.pid_alive)(pid).unwrap_or(false)
    }

    /// The data the views show: the frozen copy while paused.
    pub fn data(&self) -> &Data {
        self.frozen.as_deref().unwrap_or(&self.data)
    }

    /// The data as of the last delta, even while paused.
    pub(crate) fn live_data(&self) -> &Data {
        &self.data
    }

    /// The clock used for ages and the recently-freed rule.
    pub fn now(&self) -> SystemTime {
        self.now
    }

    /// Moves the clock. Returns true when rows may have changed (a
    /// recently freed key aged out).
    pub(crate) fn set_now(&mut self, now: SystemTime) -> bool {
        self.now = now;
        // (Ages out of the live data only: a paused view keeps its rows.)
        self.data.age_freed(now);
        // Time alone turns some verdicts (a spawn materializing too long).
        if self.data.judge_at(now) {
            self.flat_version = None;
            return true;
        }
        if self.flat.expires.is_some_and(|at| at <= now) {
            self.flat_version = None;
            return true;
        }
        false
    }

    /// Sets `--materializing-after` (the verdicts the event log records
    /// depend on it).
    pub fn set_materializing(&mut self, materializing: std::time::Duration) {
        self.materializing = materializing;
        self.data.set_materializing(materializing);
    }

    /// When the keys the last burst of changes left unsettled are to be
    /// judged ([`crate::operate::held::SETTLE_AFTER`] after
    /// its last change); the event loop wakes then and calls
    /// [`Model::settle`].
    pub(crate) fn settle_due(&self) -> Option<SystemTime> {
        self.data.settle_due()
    }

    /// Judges (and logs) the keys the last burst left unsettled, once
    /// `now` is past [`Model::settle_due`] — paused or not, like every
    /// delta. Returns whether anything was logged.
    pub fn settle(&mut self, now: SystemTime) -> bool {
        let logged = self.data.settle(now);
        if logged && self.frozen.is_none() {
            self.flat_version = None;
        }
        logged
    }

    /// The view settings.
    pub fn settings(&self) -> &ViewSettings {
        &self.settings
    }

    // ----- pause -----------------------------------------------------

    /// Freezes (or thaws) what the views show; deltas keep being applied.
    pub(crate) fn set_paused(&mut self, paused: bool) {
        if paused == self.paused() {
            return;
        }
        self.frozen = paused.then(|| Box::new(self.data.clone()));
        self.changes_while_paused = 0;
        self.flat_version = None;
    }

    /// Whether the view is frozen.
    pub fn paused(&self) -> bool {
        self.frozen.is_some()
    }

    /// Deltas applied since the view was frozen.
    pub(crate) fn changes_while_paused(&self) -> u64 {
        self.changes_while_paused
    }

    // ----- settings --------------------------------------------------

    /// Sets the incremental filter (substring of AIH, tag or holder PID).
    pub(crate) fn set_filter(&mut self, filter: &str) {
        if self.settings.filter != filter {
            self.settings.filter = filter.to_string();
            // Free keys not listed that match are listed now.
            self.data.list_free(filter);
            if let Some(frozen) = self.frozen.as_mut() {
                frozen.list_free(filter);
            }
            self.flat_version = None;
            self.holders_cursor = KeyedCursor::default();
            if !filter.is_empty() {
                self.select_first_match();
            }
        }
    }

    /// After a filter change: a selected key or problem that still matches
    /// stays selected, anything else gives way to the first match.
    fn select_first_match(&mut self) {
        self.refresh();
        if let Some(first) = view::first_match(&self.flat, self.data(), self.selected_node()) {
            self.select_row(first);
        }
    }

    /// Orders the holders view.
    pub(crate) fn set_holders_sort(&mut self, sort: Sort) {
        self.settings.holders_sort = sort;
        self.holders_cache = None;
    }

    /// Orders the blocking view (the app sorts its rows).
    pub(crate) fn set_blocking_sort(&mut self, sort: Sort) {
        self.settings.blocking_sort = sort;
    }

    /// Shows or hides free (stale) keys.
    pub(crate) fn set_show_free(&mut self, show: bool) {
        if self.settings.show_free != show {
            self.settings.show_free = show;
            self.data
                .set_show_free(show, &self.settings.filter, self.now);
            if let Some(frozen) = self.frozen.as_mut() {
                frozen.set_show_free(show, &self.settings.filter, self.now);
            }
            self.flat_version = None;
        }
    }

    // ----- tree rows and selection -------------------------------------

    /// Re-derives the tree rows and the holder groups if the shown data or
    /// the settings changed since the last refresh (cheap when nothing
    /// did). Every getter of rows reads what this derived.
    pub fn refresh(&mut self) {
        self.refresh_holders();
        self.refresh_events();
        let version = self.data().version;
        if self.flat_version == Some(version) {
            return;
        }
        let flat = view::flatten(self.data(), &self.settings, self.now);
        self.flat = flat;
        self.flat_version = Some(version);
        let found = self.selected.as_ref().and_then(|(section, path)| {
            let id = self.data().tree.find(*section, path)?;
            self.flat.rows.iter().position(|row| row.node == id)
        });
        let len = self.flat.rows.len();
        match found {
            Some(index) => self.tree_cursor.select(index, len),
            None => self.place_row(self.tree_cursor.selected(len)),
        }
    }

    fn refresh_holders(&mut self) {
        let version = self.data().version;
        let fresh = matches!(&self.holders_cache,
            Some((v, filter, ..)) if *v == version && *filter == self.settings.filter);
        if !fresh {
            let groups = holders::holder_groups(self.data(), &self.settings);
            let rows = holders::holder_rows(&groups);
            let keys = holders::holder_identities(self.data(), &groups, &rows);
            self.holders_cursor.follow(&keys);
            self.holders_cache = Some((version, self.settings.filter.clone(), groups, rows));
        }
    }

    fn refresh_events(&mut self) {
        let version = self.data().version;
        let fresh = matches!(&self.events_cache,
            Some((v, filter, _)) if *v == version && *filter == self.settings.filter);
        if !fresh {
            let settings = &self.settings;
            let rows = (self.data().events.iter().enumerate())
                .filter(|(_, event)| settings.matches_key(event.key.name(), event.pid.into_iter()))
                .map(|(index, _)| index)
                .collect();
            self.events_cache = Some((version, self.settings.filter.clone(), rows));
        }
    }

    /// True when the rows derived by the last [`Model::refresh`] are current.
    pub(crate) fn is_fresh(&self) -> bool {
        let version = self.data().version;
        self.flat_version == Some(version)
            && matches!(&self.holders_cache,
                Some((v, filter, ..)) if *v == version && *filter == self.settings.filter)
    }

    fn assert_fresh(&self) {
        debug_assert!(
            self.is_fresh()
                && self.events_cache.as_ref().is_some_and(|(v, f, _)| {
                    *v == self.data().version && *f == self.settings.filter
                }),
            "read the model's rows before Model::refresh()"
        );
    }

    /// The tree pane's rows and tallies.
    pub fn flat(&self) -> &Flat {
        self.assert_fresh();
        &self.flat
    }

    /// The tree pane's rows.
    pub fn rows(&self) -> &[Row] {
        &self.flat().rows
    }

    /// The tree pane's cursor (its selection is the selected row's index).
    pub(crate) fn tree_cursor(&self) -> &ListCursor {
        &self.tree_cursor
    }

    /// Index of the selected row.
    pub(crate) fn selected_row(&self) -> usize {
        self.tree_cursor.selected(self.rows().len())
    }

    /// The selected node.
    pub(crate) fn selected_node(&self) -> Option<NodeId> {
        self.rows().get(self.selected_row()).map(|row| row.node)
    }

    /// The selection's identity, `(section, path)`.
    #[cfg(test)]
    pub(crate) fn selection(&self) -> Option<&(Section, String)> {
        self.selected.as_ref()
    }

    /// How many tree selections were made so far (a change means someone
    /// moved the selection since the count was read).
    pub(crate) fn selections(&self) -> u64 {
        self.selections
    }

    /// Selects row `index` (clamped).
    pub(crate) fn select_row(&mut self, index: usize) {
        self.selections += 1;
        self.place_row(index);
    }

    fn place_row(&mut self, index: usize) {
        self.refresh();
        let len = self.flat.rows.len();
        self.tree_cursor.select(index, len);
        self.selected = self
            .flat
            .rows
            .get(self.tree_cursor.selected(len))
            .map(|row| {
                let node = self.data().tree.node(row.node);
                (node.section, node.path.clone())
            });
    }

    /// Selects the row of node `id`; false (selection unchanged) when the
    /// node is not a row (filtered out, free and hidden, under a collapsed
    /// node).
    pub(crate) fn select_node(&mut self, id: NodeId) -> bool {
        self.refresh();
        match self.rows().iter().position(|row| row.node == id) {
            Some(index) => {
                self.select_row(index);
                true
            }
            None => false,
        }
    }

    /// Moves the selection by `by` rows (clamped).
    pub(crate) fn move_selection(&mut self, by: isize) {
        self.refresh();
        let row = self.selected_row();
        self.select_row(row.saturating_add_signed(by));
    }

    /// Collapses the selected node, or moves to its parent if it is
    /// already collapsed or a leaf.
    pub fn collapse(&mut self) {
        let Some(row) = self.current_row() else {
            return;
        };
        if row.expanded && row.has_children {
            self.set_expanded(row.node, false);
        } else if let Some(parent) = self.data().tree.node(row.node).parent {
            let index = self.flat.rows.iter().position(|r| r.node == parent);
            if let Some(index) = index {
                self.select_row(index);
            }
        }
    }

    /// Expands the selected node, or moves to its first child if it is
    /// already expanded.
    pub(crate) fn expand(&mut self) {
        let Some(row) = self.current_row() else {
            return;
        };
        if !row.expanded {
            self.set_expanded(row.node, true);
        } else if row.has_children {
            self.move_selection(1);
        }
    }

    /// Toggles the selected node's expansion.
    pub(crate) fn toggle(&mut self) {
        let Some(row) = self.current_row() else {
            return;
        };
        self.set_expanded(row.node, !row.expanded);
    }

    fn current_row(&mut self) -> Option<Row> {
        self.refresh();
        self.rows().get(self.selected_row()).copied()
    }

    fn set_expanded(&mut self, id: NodeId, expanded: bool) {
        let node = self.data().tree.node(id);
        let (section, path) = (node.section, node.path.clone());
        let set = &mut self.settings.collapsed[section as usize];
        if expanded {
            set.remove(&path);
        } else {
            set.insert(path);
        }
        self.flat_version = None;
    }

    // ----- holders and events ----------------------------------------

    /// The holder groups and rows for the shown data and filter.
    pub fn holders(&self) -> (&[HolderGroup], &[HolderRow]) {
        let (_, groups, rows) = self.holders_with_data();
        (groups, rows)
    }

    /// [`Model::holders`] plus the shown data the groups index into.
    pub(crate) fn holders_with_data(&self) -> (&Data, &[HolderGroup], &[HolderRow]) {
        self.assert_fresh();
        let (_, _, groups, rows) = self.holders_cache.as_ref().expect("filled by refresh");
        (self.data(), groups, rows)
    }

    /// The holders pane's cursor (on the selected row's identity since
    /// the last refresh).
    pub(crate) fn holders_cursor(&self) -> &ListCursor {
        self.holders_cursor.cursor()
    }

    /// Index of the selected holders row (clamped to the rows).
    pub(crate) fn holders_selected(&self) -> usize {
        self.holders_cursor
            .cursor()
            .selected(self.holders().1.len())
    }

    /// Moves the holders selection to `index` (clamped) and anchors it on
    /// that row's process or key.
    pub(crate) fn select_holder_row(&mut self, index: usize) {
        self.refresh();
        let (data, groups, rows) = self.holders_with_data();
        let keys = holders::holder_identities(data, groups, rows);
        self.holders_cursor.select(index, &keys);
    }

    /// The event log of the shown data, newest first.
    pub fn events(&self) -> &EventLog {
        &self.data().events
    }

    /// The events pane's rows: indexes into [`Model::events`] of the
    /// events the filter passes, newest first.
    pub(crate) fn event_rows(&self) -> &[usize] {
        self.assert_fresh();
        let (_, _, rows) = self.events_cache.as_ref().expect("filled by refresh");
        rows
    }

    /// The event log's cursor (0 = newest row), on the selected event.
    pub(crate) fn events_cursor(&self) -> ListCursor {
        let mut cursor = self.events_cursor;
        cursor.select(self.events_selected(), self.event_rows().len());
        cursor
    }

    /// The row of the selected event (0 = newest): the anchored event's
    /// row while the log has it and the filter passes it, whatever arrived
    /// since (events are only added at the front and dropped from the
    /// back, so the `n`-th event ever logged is at index `total - 1 - n`);
    /// else the last row, clamped.
    pub(crate) fn events_selected(&self) -> usize {
        let (log, rows) = (self.events(), self.event_rows());
        let (total, len) = (log.total(), log.len() as u64);
        let anchored = match self.event_anchor {
            Some(seq) if seq < total && total - seq <= len => Some((total - 1 - seq) as usize),
            _ => None,
        };
        match anchored.and_then(|index| rows.binary_search(&index).ok()) {
            Some(row) => row,
            None => self.events_cursor.selected(rows.len()),
        }
    }

    /// The log index of the selected event, if any row is shown.
    pub(crate) fn selected_event(&self) -> Option<usize> {
        self.event_rows().get(self.events_selected()).copied()
    }

    /// Moves the event selection to row `index` (clamped) and anchors it
    /// on that event.
    pub(crate) fn select_event(&mut self, index: usize) {
        self.refresh();
        let len = self.event_rows().len();
        self.events_cursor.select(index, len);
        let row = self.events_cursor.selected(len);
        let total = self.events().total();
        // The newest row follows the newest event (the log tails); any
        // other row stays on its event as new ones arrive.
        self.event_anchor = match row {
            0 => None,
            _ => self
                .event_rows()
                .get(row)
                .map(|&index| total - 1 - index as u64),
        };
    }

    /// The blocking view's cursor.
    pub(crate) fn blocking_cursor(&self) -> &ListCursor {
        self.blocking_cursor.cursor()
    }

    /// Keeps the blocking view's selection on its key among `keys` (the
    /// rows' identities, in order).
    pub(crate) fn follow_blocking(&mut self, keys: &[KeyIdentity]) {
        self.blocking_cursor.follow(keys);
    }

    /// Selects row `index` (clamped) of the blocking view whose rows'
    /// identities are `keys`.
    pub(crate) fn select_blocking(&mut self, index: usize, keys: &[KeyIdentity]) {
        self.blocking_cursor.select(index, keys);
    }

    /// Records where the last frame scrolled the blocking view.
    pub(crate) fn set_blocking_offset(&mut self, offset: usize) {
        self.blocking_cursor.set_offset(offset);
    }

    /// Records where the last frame scrolled the tree.
    pub(crate) fn set_tree_offset(&mut self, offset: usize) {
        self.tree_cursor.set_offset(offset);
    }

    /// Records where the last frame scrolled the holders list.
    pub(crate) fn set_holders_offset(&mut self, offset: usize) {
        self.holders_cursor.set_offset(offset);
    }

    /// Records where the last frame scrolled the event log.
    pub(crate) fn set_events_offset(&mut self, offset: usize) {
        self.events_cursor.set_offset(offset);
    }

    /// A key's identity across changes.
    pub fn identity(&self, id: NodeId) -> KeyIdentity {
        let node = self.data().tree.node(id);
        (node.section, node.path.clone())
    }

    /// Other held keys of the holders of `id` ("its family as seen from
    /// the locks"), by PID.
    pub(crate) fn held_by_same_pids(&self, id: NodeId) -> Vec<(u32, Vec<NodeId>)> {
        let data = self.data();
        let Some(lock) = data.lock(id) else {
            return Vec::new();
        };
        lock.state
            .holders
            .iter()
            .map(|holder| {
                let others = data
                    .held_by(holder.pid)
                    .into_iter()
                    .filter(|&o| o != id)
                    .collect();
                (holder.pid, others)
            })
            .collect()
    }
}

impl Model {
    /// The blocking view's rows, now (few: one per held key) — those the
    /// filter passes, in the chosen order (stable: ties keep the urgency
    /// order); spawns are suspects after `materializing`.
    pub(crate) fn blocking_rows_shown(
        &self,
        materializing: std::time::Duration,
    ) -> Vec<BlockingRow> {
        let data = self.data();
        let mut rows = data.blocking_rows(self.now(), materializing);
        let settings = self.settings();
        rows.retain(|row| {
            data.lock(row.node).is_some_and(|lock| {
                let pids = lock.state.holders.iter().map(|p| p.pid);
                settings.matches_key(lock.key.name(), pids)
            })
        });
        let lock = |row: &BlockingRow| data.lock(row.node);
        match settings.blocking_sort {
            Sort::Urgency => {}
            Sort::Age => rows.sort_by_key(|row| {
                let since = lock(row).and_then(|l| l.state.since);
                (since.is_none(), since)
            }),
            Sort::Pid => rows
                .sort_by_key(|row| lock(row).and_then(|l| l.state.holders.first().map(|p| p.pid))),
            Sort::Name => rows.sort_by_key(|row| lock(row).map(|l| l.key.name().to_string())),
        }
        rows
    }
}
