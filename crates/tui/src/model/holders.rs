//! "Who holds what": held keys grouped by holder process.
//!
//! Invariants: a group exists for every PID holding at least one key that
//! is live, own or in-flight and passes the filter; groups are ordered
//! oldest hold first (unknown ages last, then by PID); within a group the
//! AIH locks come first, then tags, then other keys, each oldest first.
//! Built from the held view, so its cost is the number of held keys, not
//! the number of keys on disk.

use std::time::SystemTime;

use crate::liveness::process::ProcessInfo;

use super::data::Data;
use super::text_match::contains_ignore_ascii_case;
use super::tree::{NodeId, Section};
use super::view::ViewSettings;

/// One holder process and the keys it holds.
#[derive(Debug, Clone)]
pub struct HolderGroup {
    /// Its PID.
    pub pid: u32,
    /// What the engine last said about it.
    pub process: ProcessInfo,
    /// When its oldest held key became held.
    pub oldest: Option<SystemTime>,
    /// Its keys, AIH locks first.
    pub keys: Vec<NodeId>,
}

/// One row of the holders pane.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HolderRow {
    /// The process line of group `group`.
    Process {
        /// Index into the groups.
        group: usize,
    },
    /// One key of group `group`.
    Key {
        /// Index into the groups.
        group: usize,
        /// The key's node.
        node: NodeId,
    },
}

/// Groups the held keys of `data` by holder, filtered by `settings`.
pub(crate) fn holder_groups(data: &Data, settings: &ViewSettings) -> Vec<HolderGroup> {
    let filter = settings.filter.as_str();
    let mut groups = Vec::new();
    for pid in data.held().holders() {
        let ids = data.held_by(pid);
        let pid_matches = contains_ignore_ascii_case(&pid.to_string(), filter);
        let mut process = None;
        let mut keys: Vec<(Section, Option<SystemTime>, NodeId)> = Vec::new();
        for id in ids {
            let node = data.tree.node(id);
            let Some(lock) = &node.lock else { continue };
            if !lock.liveness().is_held() {
                continue;
            }
            if !pid_matches && !contains_ignore_ascii_case(&node.path, filter) {
                continue;
            }
            if process.is_none() {
                process = lock.state.holders.iter().find(|p| p.pid == pid).cloned();
            }
            keys.push((node.section, lock.state.since, id));
        }
        if keys.is_empty() {
            continue;
        }
        keys.sort_by_key(|&(section, since, id)| (section, since.is_none(), since, id));
        let oldest = keys.iter().filter_map(|&(_, since, _)| since).min();
        groups.push(HolderGroup {
            pid,
            process: process.unwrap_or_else(|| ProcessInfo::unread(pid)),
            oldest,
            keys: keys.into_iter().map(|(_, _, id)| id).collect(),
        });
    }
    groups.sort_by_key(|group| (group.oldest.is_none(), group.oldest, group.pid));
    match settings.holders_sort {
        super::Sort::Pid => groups.sort_by_key(|group| group.pid),
        super::Sort::Name => groups.sort_by(|a, b| a.process.command().cmp(b.process.command())),
        super::Sort::Urgency | super::Sort::Age => {}
    }
    groups
}

/// Each row's identity (see [`super::HolderIdentity`]), in row order.
pub(crate) fn holder_identities(
    data: &Data,
    groups: &[HolderGroup],
    rows: &[HolderRow],
) -> Vec<super::HolderIdentity> {
    rows.iter()
        .map(|row| match *row {
            HolderRow::Process { group } => (groups[group].pid, None),
            HolderRow::Key { group, node } => {
                let node_ref = data.tree.node(node);
                let key = (node_ref.section, node_ref.path.clone());
                (groups[group].pid, Some(key))
            }
        })
        .collect()
}

/// The rows of the holders pane: each process, then its keys.
pub(crate) fn holder_rows(groups: &[HolderGroup]) -> Vec<HolderRow> {
    let mut rows = Vec::new();
    for (index, group) in groups.iter().enumerate() {
        rows.push(HolderRow::Process { group: index });
        rows.extend(
            group
                .keys
                .iter()
                .map(|&node| HolderRow::Key { group: index, node }),
        );
    }
    rows
}
