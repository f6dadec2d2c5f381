//! The in-process gate: one agent lock taken at both layers.
//!
//! Invariants:
//! - acquire order: the per-key in-process mutex FIRST, then the lockfile;
//! - release order: the lockfile claim FIRST, then the in-process guard
//!   LAST — on [`AgentLock::release`] and on drop alike;
//! - a failed acquisition never leaves a guard or a claim behind;
//! - the lock files exist before the SDK is asked to lock them
//!   ([`create_missing`]): the SDK's own create path can unlink a file
//!   another process has just locked.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use dashmap::DashMap;
use objectiveai_sdk::lockfile::{self, LockClaim};
use tokio::sync::{Mutex, OwnedMutexGuard};

use super::files::{check_openable, check_writable, create_missing};

/// Per-key in-process gate for agent locks, keyed by the SAME `(dir, key)`
/// the lockfile uses. Lives on [`crate::context::Context`], shared across
/// clones. An entry exists at least as long as someone holds or waits on
/// its mutex (see [`prune_idle`]).
pub type AgentLockMap = DashMap<(PathBuf, String), Arc<Mutex<()>>>;

/// Agent locks write no content: they carry liveness, not data.
const NO_CONTENTS: &str = "";

/// A held agent lock: the in-process Mutex guard PLUS the cross-process
/// lockfile [`LockClaim`]. Release order is enforced — lockfile claim first,
/// in-process guard last — by [`AgentLock::release`] and by `Drop` (unlike
/// a bare `LockClaim`, dropping an `AgentLock` releases it).
pub struct AgentLock {
    /// `Some` until released; taken first on release.
    claim: Option<LockClaim>,
    /// `Some` until released; dropped after `claim` is released.
    guard: Option<OwnedMutexGuard<()>>,
    dir: PathBuf,
    key: String,
}

impl std::fmt::Debug for AgentLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentLock")
            .field("dir", &self.dir)
            .field("key", &self.key)
            .finish()
    }
}

impl AgentLock {
    /// The lock directory this lock was acquired under.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The (unescaped) key this lock was acquired under.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// Releases NOW: the lockfile claim first, then the in-process guard.
    /// The guard is dropped even if releasing the claim fails.
    pub fn release(mut self) -> std::io::Result<()> {
        self.release_in_order()
    }

    fn release_in_order(&mut self) -> std::io::Result<()> {
        let released = match self.claim.take() {
            Some(claim) => claim.release(),
            None => Ok(()),
        };
        drop(self.guard.take());
        released
    }
}

impl Drop for AgentLock {
    fn drop(&mut self) {
        if let Err(error) = self.release_in_order() {
            tracing::warn!(dir = %self.dir.display(), key = %self.key, %error, "releasing a dropped agent lock failed");
        }
    }
}

fn gate_mutex(map: &AgentLockMap, dir: &Path, key: &str) -> Arc<Mutex<()>> {
    map.entry((dir.to_path_buf(), key.to_string()))
        .or_insert_with(|| Arc::new(Mutex::new(())))
        .clone()
}

/// Drops the map entry of `(dir, key)` if nobody holds or waits on it, so a
/// monitor probing many keys does not grow the map without bound. Safe at
/// any time: the count is checked under the shard lock, which every
/// acquirer also takes to clone the mutex.
pub fn prune_idle(map: &AgentLockMap, dir: &Path, key: &str) {
    map.remove_if(&(dir.to_path_buf(), key.to_string()), |_, mutex| {
        Arc::strong_count(mutex) == 1
    });
}

/// Acquire an agent lock NON-BLOCKING. Returns `None` if the key is busy
/// in-process (another task holds the guard) OR held cross-process. On the
/// cross-process miss the in-process guard is dropped before returning, so
/// it never lingers. Also `None`, without opening anything, when its files
/// are not fit for an agent lock ([`check_writable`]).
pub async fn try_acquire(map: &AgentLockMap, dir: &Path, key: &str) -> Option<AgentLock> {
    check_writable(dir, key).ok()?;
    let guard = gate_mutex(map, dir, key).try_lock_owned().ok()?;
    create_missing(dir, key);
    match lockfile::try_acquire(dir, key, NO_CONTENTS).await {
        Some(claim) => Some(AgentLock {
            claim: Some(claim),
            guard: Some(guard),
            dir: dir.to_path_buf(),
            key: key.to_string(),
        }),
        None => {
            drop(guard);
            None
        }
    }
}

/// Acquire an agent lock, BLOCKING at both layers: the in-process Mutex
/// first, then the cross-process lockfile. On error nothing is held; files
/// not fit for an agent lock ([`check_writable`]) are an error at once.
pub async fn wait_acquire(map: &AgentLockMap, dir: &Path, key: &str) -> std::io::Result<AgentLock> {
    check_writable(dir, key).map_err(std::io::Error::other)?;
    let guard = gate_mutex(map, dir, key).lock_owned().await;
    create_missing(dir, key);
    let claim = lockfile::wait_acquire(dir, key, NO_CONTENTS).await?;
    Ok(AgentLock {
        claim: Some(claim),
        guard: Some(guard),
        dir: dir.to_path_buf(),
        key: key.to_string(),
    })
}

/// True when `(dir, key)` is taken right now, judged without taking it: a
/// task of this process holds its in-process gate, or the SDK's shared-lock
/// probe finds it held (a claim stuck mid-acquisition for longer than
/// `in_flight_after` counts as taken). Files that cannot be opened safely
/// ([`check_openable`]) are never probed and count as not taken (what is in
/// the way is the caller's to report, see `obstacle`).
pub async fn is_taken(
    map: &AgentLockMap,
    dir: &Path,
    key: &str,
    in_flight_after: std::time::Duration,
) -> bool {
    let gate_busy = map
        .get(&(dir.to_path_buf(), key.to_string()))
        .is_some_and(|mutex| mutex.try_lock().is_err());
    gate_busy
        || check_openable(dir, key).is_ok()
            && tokio::time::timeout(in_flight_after, lockfile::try_held(dir, key))
                .await
                .unwrap_or(true)
}

/// The members of an all-or-nothing attempt that were busy, as indexes
/// into the DEDUPLICATED coordinate list returned alongside.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Busy {
    /// The coordinates tried, duplicates collapsed, first occurrence first.
    pub coords: Vec<(PathBuf, String)>,
    /// Indexes into `coords` of the members that could not be taken.
    pub busy: Vec<usize>,
}

/// `coords` with duplicates collapsed, first occurrence first: the order
/// every all-or-nothing attempt takes (and reports) its members in.
pub fn dedup_coords(coords: &[(PathBuf, String)]) -> Vec<(PathBuf, String)> {
    let mut unique: Vec<(PathBuf, String)> = Vec::with_capacity(coords.len());
    for coord in coords {
        if !unique.contains(coord) {
            unique.push(coord.clone());
        }
    }
    unique
}

/// Like [`try_acquire_all`], but on failure says which members were busy.
/// On success the locks are in the order of the deduplicated coordinates.
pub async fn try_acquire_all_detailed(
    map: &AgentLockMap,
    coords: &[(PathBuf, String)],
) -> Result<Vec<AgentLock>, Busy> {
    let unique = dedup_coords(coords);
    let attempts =
        futures::future::join_all(unique.iter().map(|(dir, key)| try_acquire(map, dir, key))).await;
    let busy: Vec<usize> = attempts
        .iter()
        .enumerate()
        .filter_map(|(index, attempt)| attempt.is_none().then_some(index))
        .collect();
    if busy.is_empty() {
        Ok(attempts.into_iter().flatten().collect())
    } else {
        // Every acquired leg drops here, releasing claim then guard.
        drop(attempts);
        Err(Busy {
            coords: unique,
            busy,
        })
    }
}

/// Acquire EVERY coord NON-BLOCKING, all-or-nothing, concurrently. `None`
/// if any coord is busy (in-process guard taken OR cross-process held) —
/// the ones that were acquired drop here, releasing them. Duplicate coords
/// collapse to one lock. Deadlock-free: every leg is a non-blocking try, so
/// acquisition order never matters.
pub async fn try_acquire_all(
    map: &AgentLockMap,
    coords: &[(PathBuf, String)],
) -> Option<Vec<AgentLock>> {
    try_acquire_all_detailed(map, coords).await.ok()
}
