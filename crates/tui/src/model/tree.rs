//! The arena of nodes every list on screen is drawn from: four section
//! roots (Instances, Tags, Other, Problems) and, under Instances, the AIH
//! hierarchy split on `/`.
//!
//! Invariants: a node exists iff it is a root, holds a lock, holds a scan
//! problem, or has children — removing the last of these prunes it and
//! every ancestor left empty. A node may hold a lock AND have children
//! (`a/b` beside `a/b/c`); a non-root node with no lock and no problem is a
//! directory node. A [`NodeId`] stays valid until its node is pruned; ids of
//! pruned nodes are reused, so identity across changes is the node's
//! `(section, path)`, never its id.

use std::collections::BTreeMap;
use std::time::SystemTime;

use crate::disk::key::{KeyKind, LockKey};
use crate::engine::{KeyState, Liveness};

/// The top-level groups of the tree, in display order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Section {
    /// Instance locks, as the AIH hierarchy.
    Instances,
    /// Tag locks, flat.
    Tags,
    /// Anything else under the locks root.
    Other,
    /// Scan problems (foreign files, unreadable dirs…).
    Problems,
}

impl Section {
    /// Every section, in display order.
    pub const ALL: [Section; 4] = [
        Section::Instances,
        Section::Tags,
        Section::Other,
        Section::Problems,
    ];

    /// The title shown on the section's row.
    pub fn title(self) -> &'static str {
        match self {
            Section::Instances => "Instances",
            Section::Tags => "Tags",
            Section::Other => "Other",
            Section::Problems => "Problems",
        }
    }

    /// The section a key of `kind` is listed in.
    pub fn of(kind: KeyKind) -> Self {
        match kind {
            KeyKind::Instance => Section::Instances,
            KeyKind::Tag => Section::Tags,
            KeyKind::Other => Section::Other,
        }
    }
}

/// Index of a node in the arena; valid until the node is pruned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeId(pub(crate) u32);

/// One claim as the model knows it.
#[derive(Debug, Clone)]
pub struct Lock {
    /// Which claim.
    pub key: LockKey,
    /// Its last probed state (a held one shared with the held view: kept
    /// once).
    pub state: std::sync::Arc<KeyState>,
    /// When it went from held to free during this session (`None` if it
    /// was never seen held, or is held now).
    pub freed_at: Option<SystemTime>,
    /// The word of its verdict that needs attention, as last logged (see
    /// `Data::log_changes`), with the process it was about; `None` when
    /// free.
    pub flagged: Option<(&'static str, Option<u32>)>,
}

impl Lock {
    /// Shorthand for `self.state.liveness`.
    pub fn liveness(&self) -> Liveness {
        self.state.liveness
    }
}

/// One row-able thing: a section root, a directory, a lock, a problem.
#[derive(Debug, Clone)]
pub struct Node {
    /// The section it is listed in.
    pub section: Section,
    /// Identity within the section: `""` for the root, the AIH (prefix)
    /// for instances, the tag or other name, the problem's path.
    pub path: String,
    /// What the row shows: the last AIH segment, else the whole name.
    pub label: String,
    /// The parent node (`None` for a section root).
    pub parent: Option<NodeId>,
    /// Children by label, in display order.
    pub children: BTreeMap<String, NodeId>,
    /// 0 for a section root.
    pub depth: u16,
    /// The claim at this node, if any.
    pub lock: Option<Lock>,
    /// The scan problem at this node (Problems section only).
    pub problem: Option<String>,
}

impl Node {
    /// True for a section root.
    pub(crate) fn is_root(&self) -> bool {
        self.parent.is_none()
    }

    /// True for a node that is only a directory (no lock, no problem).
    #[cfg(test)]
    pub(crate) fn is_directory(&self) -> bool {
        !self.is_root() && self.lock.is_none() && self.problem.is_none()
    }
}

/// The arena. Cloning it is how a paused view freezes the data.
#[derive(Debug, Clone)]
pub struct Tree {
    nodes: Vec<Option<Node>>,
    vacant: Vec<u32>,
}

impl Default for Tree {
    fn default() -> Self {
        Self::new()
    }
}

impl Tree {
    /// Four empty section roots.
    pub fn new() -> Self {
        let mut tree = Self {
            nodes: Vec::new(),
            vacant: Vec::new(),
        };
        for section in Section::ALL {
            tree.alloc(Node {
                section,
                path: String::new(),
                label: section.title().to_string(),
                parent: None,
                children: BTreeMap::new(),
                depth: 0,
                lock: None,
                problem: None,
            });
        }
        tree
    }

    /// The root of `section`.
    pub fn root(&self, section: Section) -> NodeId {
        NodeId(section as u32)
    }

    /// The node `id`. Panics on a pruned id (a bug: rows are rebuilt on
    /// every change).
    pub fn node(&self, id: NodeId) -> &Node {
        self.nodes[id.0 as usize].as_ref().expect("live node id")
    }

    fn node_mut(&mut self, id: NodeId) -> &mut Node {
        self.nodes[id.0 as usize].as_mut().expect("live node id")
    }

    /// The node at `(section, path)`, if it exists.
    pub fn find(&self, section: Section, path: &str) -> Option<NodeId> {
        let root = self.root(section);
        if path.is_empty() {
            return Some(root);
        }
        if section != Section::Instances {
            return self.node(root).children.get(path).copied();
        }
        let mut at = root;
        for segment in path.split('/') {
            at = *self.node(at).children.get(segment)?;
        }
        Some(at)
    }

    /// The node of `key`, creating it (and its directory ancestors).
    pub(crate) fn ensure_key(&mut self, key: &LockKey) -> NodeId {
        let section = Section::of(key.kind());
        match section {
            Section::Instances => {
                let mut at = self.root(section);
                let mut path = String::new();
                for segment in key.name().split('/') {
                    if !path.is_empty() {
                        path.push('/');
                    }
                    path.push_str(segment);
                    at = self.ensure_child(at, segment, &path);
                }
                at
            }
            _ => self.ensure_child(self.root(section), key.name(), key.name()),
        }
    }

    /// The problem node for `path`, created under Problems.
    pub(crate) fn ensure_problem(&mut self, path: &str) -> NodeId {
        self.ensure_child(self.root(Section::Problems), path, path)
    }

    fn ensure_child(&mut self, parent: NodeId, label: &str, path: &str) -> NodeId {
        if let Some(&child) = self.node(parent).children.get(label) {
            return child;
        }
        let (section, depth) = {
            let node = self.node(parent);
            (node.section, node.depth + 1)
        };
        let id = self.alloc(Node {
            section,
            path: path.to_string(),
            label: label.to_string(),
            parent: Some(parent),
            children: BTreeMap::new(),
            depth,
            lock: None,
            problem: None,
        });
        self.node_mut(parent).children.insert(label.to_string(), id);
        id
    }

    /// Every node holding a lock, with it.
    pub fn locks(&self) -> impl Iterator<Item = (NodeId, &Lock)> {
        self.nodes
            .iter()
            .enumerate()
            .filter_map(|(at, node)| Some((NodeId(at as u32), node.as_ref()?.lock.as_ref()?)))
    }

    /// Mutable access to the lock slot of `id`.
    pub(crate) fn lock_mut(&mut self, id: NodeId) -> &mut Option<Lock> {
        &mut self.node_mut(id).lock
    }

    /// Sets the problem text of `id`.
    pub(crate) fn set_problem(&mut self, id: NodeId, problem: Option<String>) {
        self.node_mut(id).problem = problem;
    }

    /// Prunes `id` and every ancestor left with nothing to show.
    pub fn prune(&mut self, mut id: NodeId) {
        loop {
            let node = self.node(id);
            let Some(parent) = node.parent else { return };
            if node.lock.is_some() || node.problem.is_some() || !node.children.is_empty() {
                return;
            }
            let label = node.label.clone();
            self.node_mut(parent).children.remove(&label);
            self.nodes[id.0 as usize] = None;
            self.vacant.push(id.0);
            id = parent;
        }
    }

    fn alloc(&mut self, node: Node) -> NodeId {
        if let Some(slot) = self.vacant.pop() {
            self.nodes[slot as usize] = Some(node);
            NodeId(slot)
        } else {
            self.nodes.push(Some(node));
            NodeId(self.nodes.len() as u32 - 1)
        }
    }
}
