//! Which nodes are rows: flattening the tree under the view settings
//! (collapsed nodes, text filter, free keys shown or hidden).
//!
//! Invariants: a row list is a plain list of node ids in display order —
//! no strings are built here, so flattening 100k keys is one walk and
//! drawing builds text only for the rows in the viewport. A node is a row
//! iff every ancestor is expanded and it is shown itself or has a shown
//! descendant (so a filter match keeps its ancestors visible). Section
//! roots of Instances, Tags and Other are always rows; Problems only when
//! there is one.

use std::cell::Cell;
use std::collections::HashSet;
use std::time::SystemTime;

use crate::engine::Liveness;

use super::data::{Data, RECENTLY_FREED};
use super::text_match::contains_ignore_ascii_case;
use super::tree::{Node, NodeId, Section};

/// One row of the tree pane.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Row {
    /// The node drawn on this row.
    pub node: NodeId,
    /// Indentation level (0 for a section root).
    pub depth: u16,
    /// Whether the node has shown descendants (so it can expand).
    pub has_children: bool,
    /// Whether its children are rows.
    pub expanded: bool,
    /// Shown keys below it (its own key not counted).
    pub shown_keys: usize,
}

/// The user's view settings.
#[derive(Debug, Clone, Default)]
pub struct ViewSettings {
    /// Collapsed node paths, per section (indexed by `Section as usize`).
    pub collapsed: [HashSet<String>; 4],
    /// The incremental filter, as typed.
    pub filter: String,
    /// Whether free (stale) keys are rows.
    pub show_free: bool,
    /// How the holders view orders its processes (never by urgency).
    pub holders_sort: Sort,
    /// How the blocking view orders its keys: apart from the holders'
    /// order, so sorting one never reorders the other.
    pub blocking_sort: Sort,
}

/// How the holders and blocking views order their rows.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Sort {
    /// Blocking: suspects first, then contended, then oldest; holders:
    /// oldest hold first.
    #[default]
    Urgency,
    /// Oldest hold first.
    Age,
    /// By holder PID, ascending.
    Pid,
    /// By name: the key's (blocking), the command line (holders).
    Name,
}

impl Sort {
    /// The next order (`Urgency` is skipped where it equals `Age`).
    pub fn next(self, has_urgency: bool) -> Self {
        match self {
            Sort::Urgency if has_urgency => Sort::Age,
            Sort::Urgency | Sort::Age => Sort::Pid,
            Sort::Pid => Sort::Name,
            Sort::Name if has_urgency => Sort::Urgency,
            Sort::Name => Sort::Age,
        }
    }

    /// How the header names it.
    pub fn label(self, has_urgency: bool) -> &'static str {
        match self {
            Sort::Urgency if has_urgency => "by urgency",
            Sort::Urgency | Sort::Age => "by age",
            Sort::Pid => "by PID",
            Sort::Name => "by name",
        }
    }
}

impl ViewSettings {
    /// Whether `node`'s children are rows.
    pub(crate) fn is_expanded(&self, node: &Node) -> bool {
        !self.collapsed[node.section as usize].contains(node.path.as_str())
    }

    /// Whether `node` itself passes the free toggle and the filter (a
    /// directory or root never does: it is shown for its descendants).
    pub fn shows(&self, node: &Node, now: SystemTime) -> bool {
        if let Some(problem) = &node.problem {
            return self.matches_text(&node.path) || self.matches_text(problem);
        }
        let Some(lock) = &node.lock else { return false };
        if lock.liveness() == Liveness::Free && !self.show_free {
            let recent = lock
                .freed_at
                .is_some_and(|at| now.duration_since(at).unwrap_or_default() < RECENTLY_FREED);
            if !recent {
                return false;
            }
        }
        self.filter.is_empty()
            || self.matches_text(&node.path)
            || lock
                .state
                .holders
                .iter()
                .any(|holder| self.matches_text(&holder.pid.to_string()))
    }

    fn matches_text(&self, haystack: &str) -> bool {
        contains_ignore_ascii_case(haystack, &self.filter)
    }

    /// Whether a key named `name`, involving processes `pids`, passes the
    /// filter (a substring of the name or of a PID; all pass when empty):
    /// the one rule every pane the filter applies to uses.
    pub(crate) fn matches_key(&self, name: &str, mut pids: impl Iterator<Item = u32>) -> bool {
        self.filter.is_empty()
            || self.matches_text(name)
            || pids.any(|pid| self.matches_text(&pid.to_string()))
    }
}

/// Per section: keys shown and keys in total (for the section row).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SectionTally {
    /// Keys that pass the view settings.
    pub shown: usize,
    /// Keys in the section.
    pub total: usize,
}

/// The rows of the tree pane and the per-section tallies.
#[derive(Debug, Clone, Default)]
pub struct Flat {
    /// Rows in display order.
    pub rows: Vec<Row>,
    /// Per section (indexed by `Section as usize`).
    pub tallies: [SectionTally; 4],
    /// When the first recently-freed row ages out (rows must be rebuilt).
    pub expires: Option<SystemTime>,
}

/// Flattens `data` under `settings` at `now` (for the recently-freed rule).
pub fn flatten(data: &Data, settings: &ViewSettings, now: SystemTime) -> Flat {
    let mut flat = Flat::default();
    let walk = Walk {
        data,
        settings,
        now,
        expires: Cell::new(None),
    };
    for section in Section::ALL {
        let root = data.tree.root(section);
        let start = flat.rows.len();
        let (shown, total) = walk.visit(root, true, &mut flat.rows);
        let total = total + data.unlisted_in(section);
        flat.tallies[section as usize] = SectionTally { shown, total };
        let empty = data.tree.node(root).children.is_empty();
        if flat.rows.len() == start && !(section == Section::Problems && empty) {
            // Keep the section header even when nothing under it is shown.
            flat.rows.push(Row {
                node: root,
                depth: 0,
                has_children: false,
                expanded: settings.is_expanded(data.tree.node(root)),
                shown_keys: 0,
            });
        }
    }
    flat.expires = walk.expires.get();
    flat
}

struct Walk<'a> {
    data: &'a Data,
    settings: &'a ViewSettings,
    now: SystemTime,
    expires: Cell<Option<SystemTime>>,
}

impl Walk<'_> {
    /// Pushes `id` (if `emit`) and its shown descendants; returns how many
    /// keys (or problems) are shown at or below it, and how many exist.
    /// Truncates its own row back out when nothing is shown.
    fn visit(&self, id: NodeId, emit: bool, rows: &mut Vec<Row>) -> (usize, usize) {
        let node = self.data.tree.node(id);
        let expanded = self.settings.is_expanded(node);
        let index = rows.len();
        if emit {
            rows.push(Row {
                node: id,
                depth: node.depth,
                has_children: false,
                expanded,
                shown_keys: 0,
            });
        }
        let own = usize::from(self.settings.shows(node, self.now));
        if own == 1 && !self.settings.show_free {
            let freed = node
                .lock
                .as_ref()
                .filter(|l| l.liveness() == Liveness::Free);
            if let Some(at) = freed.and_then(|l| l.freed_at) {
                let until = at + RECENTLY_FREED;
                let earliest = self.expires.get().map_or(until, |e| e.min(until));
                self.expires.set(Some(earliest));
            }
        }
        let mut total = usize::from(node.lock.is_some() || node.problem.is_some());
        let mut child_shown = 0;
        for &child in node.children.values() {
            let (shown, count) = self.visit(child, emit && expanded, rows);
            child_shown += shown;
            total += count;
        }
        let shown = own + child_shown;
        if emit {
            if shown == 0 {
                rows.truncate(index);
            } else {
                rows[index].has_children = child_shown > 0;
                rows[index].shown_keys = child_shown;
            }
        }
        (shown, total)
    }
}

/// The row a new filter should select: `None` when the `selected` node is
/// a key or problem still shown (it stays), else the first key or problem
/// row — never a section header or a directory, which match nothing.
pub(super) fn first_match(flat: &Flat, data: &Data, selected: Option<NodeId>) -> Option<usize> {
    let is_match = |id: NodeId| {
        let node = data.tree.node(id);
        node.lock.is_some() || node.problem.is_some()
    };
    if selected.is_some_and(is_match) {
        return None;
    }
    flat.rows.iter().position(|row| is_match(row.node))
}
