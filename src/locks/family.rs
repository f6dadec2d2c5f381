//! Lock families: the set of locks a live agent must hold so that NONE of
//! its tags can be relocated (`tags apply`) or have labs detached
//! (`laboratories detach`) while it is active.
//!
//! Invariant: a family resolves to coordinates in a fixed order (the AIH
//! lock FIRST for a hierarchy) and is acquired all-or-nothing.

use std::path::{Path, PathBuf};

use super::{
    AgentLock, AgentLockMap, LocksError, agent_instance_lock, agent_tag_lock, try_acquire_all,
    validate_aih, validate_tag,
};

/// The lock "family" of an agent target. Members are supplied by the
/// caller (ObjectiveAI reads them from its database; locktop from the
/// operator).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Family {
    /// A GROUPED (un-upgraded) tag: the lock of every tag in the group —
    /// they upgrade together.
    Group(Vec<String>),
    /// A bound tag or an instance: the AIH lock, then a lock per tag bound
    /// to that AIH.
    Hierarchy {
        /// The agent_instance_hierarchy, `/`-separated.
        aih: String,
        /// The tags bound to it.
        tags: Vec<String>,
    },
}

/// Resolve a Family to its lock coordinates. Group → a tag lock per group
/// member; Hierarchy → the AIH instance lock FIRST, then a tag lock per
/// bound tag. Every member is validated first, so no coordinate can point
/// outside `<state>/locks`.
pub fn family_coords(
    state_dir: &Path,
    family: &Family,
) -> Result<Vec<(PathBuf, String)>, LocksError> {
    let tags = match family {
        Family::Group(tags) => tags,
        Family::Hierarchy { aih, tags } => {
            validate_aih(aih)?;
            tags
        }
    };
    for tag in tags {
        validate_tag(tag)?;
    }
    let mut coords = Vec::with_capacity(tags.len() + 1);
    if let Family::Hierarchy { aih, .. } = family {
        coords.push(agent_instance_lock(state_dir, aih));
    }
    coords.extend(tags.iter().map(|tag| agent_tag_lock(state_dir, tag)));
    Ok(coords)
}

/// An acquired lock [`Family`], partitioned for the registry: the AIH lock
/// (a hierarchy's, with its AIH) split out from the tag locks.
#[derive(Debug)]
pub struct AcquiredFamily {
    /// The AIH and its instance lock; `None` for a group.
    pub aih: Option<(String, AgentLock)>,
    /// One lock per distinct tag, in the family's order.
    pub tags: Vec<AgentLock>,
}

impl AcquiredFamily {
    /// Every lock, the AIH lock first (the acquisition order).
    pub fn into_locks(self) -> Vec<AgentLock> {
        let mut locks = Vec::with_capacity(self.tags.len() + 1);
        if let Some((_, lock)) = self.aih {
            locks.push(lock);
        }
        locks.extend(self.tags);
        locks
    }
}

/// Resolve + acquire a whole Family NON-BLOCKING, all-or-nothing, and
/// partition it for the registry (AIH lock split out from the tag locks).
/// `Ok(None)` if any member is busy; `Err` only for invalid members.
pub async fn try_acquire_family(
    map: &AgentLockMap,
    state_dir: &Path,
    family: Family,
) -> Result<Option<AcquiredFamily>, LocksError> {
    let coords = family_coords(state_dir, &family)?;
    let Some(locks) = try_acquire_all(map, &coords).await else {
        return Ok(None);
    };
    Ok(Some(partition(family, locks)))
}

/// Splits acquired locks (in [`family_coords`] order, deduplicated) into
/// the AIH lock and the tag locks.
pub fn partition(family: Family, locks: Vec<AgentLock>) -> AcquiredFamily {
    let mut locks = locks.into_iter();
    let aih = match family {
        Family::Group(_) => None,
        Family::Hierarchy { aih, .. } => locks.next().map(|lock| (aih, lock)),
    };
    AcquiredFamily {
        aih,
        tags: locks.collect(),
    }
}
