//! Lock families: the set of locks a live agent must hold so that NONE of
//! its tags can be relocated (`tags apply`) or have labs detached
//! (`laboratories detach`) while it is active.
//!
//! Invariant: a family resolves to coordinates in a fixed order (the AIH
//! lock FIRST for a hierarchy) and is acquired all-or-nothing.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::{
    AgentLock, AgentLockMap, Busy, LocksError, agent_instance_lock, agent_tag_lock, dedup_coords,
    is_taken, try_acquire, try_acquire_all_detailed, validate_aih, validate_tag,
};

/// How often a waiting family re-checks its busy members (passively: the
/// check never writes, so it raises no file events and holds nothing).
pub const WAIT_POLL: Duration = Duration::from_millis(50);

/// How many all-or-nothing attempts [`try_acquire_family_checked`] makes
/// while a member it failed to take keeps looking free afterwards.
pub const CHECKED_ATTEMPTS: u32 = 3;

/// How long a member stuck mid-acquisition (gate held, announce not) is
/// given before it counts as taken. The SDK's `try_held` alone would wait
/// forever on a holder stopped mid-acquisition; every probe in locktop
/// bounds it with this.
pub const IN_FLIGHT_AFTER: Duration = Duration::from_millis(25);

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
/// `Ok(None)` if any member is busy; `Err` only for invalid members. A
/// hierarchy's AIH lock is taken before any of its tags.
pub async fn try_acquire_family(
    map: &AgentLockMap,
    state_dir: &Path,
    family: Family,
) -> Result<Option<AcquiredFamily>, LocksError> {
    match try_acquire_family_detailed(map, state_dir, &family).await? {
        Ok(locks) => Ok(Some(partition(family, locks))),
        Err(_) => Ok(None),
    }
}

/// [`try_acquire_family`] that says which members were busy. Locks come
/// back in [`family_coords`] order (deduplicated). For a hierarchy the AIH
/// lock is taken FIRST and alone: only once it is held are the tags tried
/// (concurrently); if it is busy, the tags are only probed, never taken —
/// so no observer can see one of its tags held by us without its AIH.
pub async fn try_acquire_family_detailed(
    map: &AgentLockMap,
    state_dir: &Path,
    family: &Family,
) -> Result<Result<Vec<AgentLock>, Busy>, LocksError> {
    let coords = family_coords(state_dir, family)?;
    let Family::Hierarchy { .. } = family else {
        return Ok(try_acquire_all_detailed(map, &coords).await);
    };
    let ((aih_dir, aih_key), tags) = (&coords[0], &coords[1..]);
    let Some(aih) = try_acquire(map, aih_dir, aih_key).await else {
        let unique = dedup_coords(&coords);
        let mut busy = vec![0];
        for (index, (dir, key)) in unique.iter().enumerate().skip(1) {
            if is_taken(map, dir, key, IN_FLIGHT_AFTER).await {
                busy.push(index);
            }
        }
        return Ok(Err(Busy {
            coords: unique,
            busy,
        }));
    };
    Ok(match try_acquire_all_detailed(map, tags).await {
        Ok(tag_locks) => {
            let mut locks = Vec::with_capacity(tag_locks.len() + 1);
            locks.push(aih);
            locks.extend(tag_locks);
            Ok(locks)
        }
        Err(busy) => {
            // The tags were tried first: release the AIH lock last.
            drop(aih);
            let mut coords = vec![coords[0].clone()];
            coords.extend(busy.coords);
            Err(Busy {
                coords,
                busy: busy.busy.iter().map(|index| index + 1).collect(),
            })
        }
    })
}

/// [`try_acquire_family_detailed`], but a member that could not be taken
/// because something is in the way ([`obstacle`]: permissions, a file
/// where a directory should be, a FIFO at a lock path) is an
/// [`LocksError::Unavailable`] naming it — never "busy". A member found
/// free right after failing, with nothing in the way, was taken and
/// released in between (a short-lived holder, another monitor's probe):
/// the attempt is retried, and after [`CHECKED_ATTEMPTS`] it is reported
/// busy, because it was.
pub async fn try_acquire_family_checked(
    map: &AgentLockMap,
    state_dir: &Path,
    family: &Family,
) -> Result<Result<Vec<AgentLock>, Busy>, LocksError> {
    let mut attempts = 0;
    loop {
        let busy = match try_acquire_family_detailed(map, state_dir, family).await? {
            Ok(locks) => return Ok(Ok(locks)),
            Err(busy) => busy,
        };
        let Some(index) = first_busy_member(map, &busy, false).await else {
            return Ok(Err(busy));
        };
        let (dir, key) = &busy.coords[index];
        if let Some(reason) = obstacle(dir, key) {
            let member = member_name(state_dir, family, dir, key);
            return Err(LocksError::Unavailable { member, reason });
        }
        attempts += 1;
        if attempts >= CHECKED_ATTEMPTS {
            return Ok(Err(busy));
        }
    }
}

/// Acquire a whole Family, waiting until all of it can be held at once.
/// Deadlock-free and cancel-safe: between all-or-nothing tries
/// ([`try_acquire_family_checked`]) it holds nothing and only polls its
/// busy members passively every [`WAIT_POLL`] — no blocked `flock` is left
/// behind when the future is dropped. `on_busy` is told each time the set
/// of busy members changes. A member nobody holds that still cannot be
/// taken ends the wait with [`LocksError::Unavailable`].
pub async fn wait_acquire_family(
    map: &AgentLockMap,
    state_dir: &Path,
    family: &Family,
    mut on_busy: impl FnMut(&Busy),
) -> Result<Vec<AgentLock>, LocksError> {
    let mut told: Option<Vec<usize>> = None;
    loop {
        let busy = match try_acquire_family_checked(map, state_dir, family).await? {
            Ok(locks) => return Ok(locks),
            Err(busy) => busy,
        };
        if told.as_ref() != Some(&busy.busy) {
            on_busy(&busy);
            told = Some(busy.busy.clone());
        }
        wait_until_free(map, &busy).await;
    }
}

/// Polls (passively) until every busy member of `busy` looks free.
async fn wait_until_free(map: &AgentLockMap, busy: &Busy) {
    loop {
        tokio::time::sleep(WAIT_POLL).await;
        if first_busy_member(map, busy, true).await.is_none() {
            return;
        }
    }
}

/// The first member reported busy in `busy` that is (`taken`) or is no
/// longer (`!taken`) taken right now, judged passively ([`is_taken`]).
async fn first_busy_member(map: &AgentLockMap, busy: &Busy, taken: bool) -> Option<usize> {
    for &index in &busy.busy {
        let (dir, key) = &busy.coords[index];
        if is_taken(map, dir, key, IN_FLIGHT_AFTER).await == taken {
            return Some(index);
        }
    }
    None
}

/// Why a free member of `family` could not be taken, as far as the
/// filesystem tells.
pub fn unavailable(state_dir: &Path, family: &Family, dir: &Path, key: &str) -> LocksError {
    LocksError::Unavailable {
        member: member_name(state_dir, family, dir, key),
        reason: obstacle(dir, key)
            .unwrap_or_else(|| "it could not be taken, though nobody holds it".into()),
    }
}

/// How an error names the member of `family` at `(dir, key)`, in the
/// family's own words: `instance "a/b"` for a hierarchy's AIH lock,
/// `tag "x"` for every other member.
fn member_name(state_dir: &Path, family: &Family, dir: &Path, key: &str) -> String {
    if let Family::Hierarchy { aih, .. } = family {
        let (aih_dir, aih_key) = agent_instance_lock(state_dir, aih);
        if aih_dir == dir && aih_key == key {
            return format!("instance {aih:?}");
        }
    }
    format!("tag {key:?}")
}

/// What on disk keeps `(dir, key)` from being taken by this process, if
/// anything: lock files unfit for an agent lock (not regular files, a gate
/// with content), an ancestor that is not a directory, no permission to
/// create the directory or its files, or a gate this process may not open
/// for writing. `None` when nothing visible is in the way.
pub fn obstacle(dir: &Path, key: &str) -> Option<String> {
    use nix::unistd::{AccessFlags, access};
    if let Err(unfit) = super::check_writable(dir, key) {
        return Some(unfit.to_string());
    }
    let wx = AccessFlags::W_OK | AccessFlags::X_OK;
    for ancestor in dir.ancestors() {
        let Ok(meta) = std::fs::metadata(ancestor) else {
            continue;
        };
        if !meta.is_dir() {
            return Some(format!("{} is not a directory", ancestor.display()));
        }
        if ancestor != dir {
            return access(ancestor, wx)
                .err()
                .map(|errno| format!("cannot create {}: {errno}", dir.display()));
        }
        let gate = super::escape::gate_path(dir, key);
        return match access(&gate, AccessFlags::R_OK | AccessFlags::W_OK) {
            Err(nix::errno::Errno::ENOENT) => access(dir, wx)
                .err()
                .map(|errno| format!("cannot create files in {}: {errno}", dir.display())),
            Err(errno) => Some(format!("{}: {errno}", gate.display())),
            Ok(()) => None,
        };
    }
    None
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
