//! Random claim states for the differential tests of locktop's probes
//! against the SDK's `try_held`: each of a claim's two files missing, an
//! unlocked file, held exclusively, or held shared (by another open file
//! of this process: flock locks belong to open files, so they conflict
//! as another process's would).

use std::fs::File;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use locktop::disk::key::LockKey;
use locktop::engine::Liveness;
use locktop::liveness::probe::IN_FLIGHT_AFTER;
use nix::fcntl::{Flock, FlockArg};
use objectiveai_sdk::lockfile;
use proptest::prelude::*;

/// One lock file's state.
#[derive(Debug, Clone, Copy)]
pub enum FileState {
    Missing,
    Unlocked,
    Exclusive,
    Shared,
}

/// Any [`FileState`].
pub fn file_state() -> impl Strategy<Value = FileState> {
    prop_oneof![
        Just(FileState::Missing),
        Just(FileState::Unlocked),
        Just(FileState::Exclusive),
        Just(FileState::Shared),
    ]
}

/// Puts `state` at `path` with `content`; the returned guard keeps its
/// lock.
pub fn make(path: &Path, state: FileState, content: &[u8]) -> Option<Flock<File>> {
    if matches!(state, FileState::Missing) {
        return None;
    }
    std::fs::write(path, content).unwrap();
    let arg = match state {
        FileState::Exclusive => FlockArg::LockExclusiveNonblock,
        FileState::Shared => FlockArg::LockSharedNonblock,
        _ => return None,
    };
    Some(Flock::lock(File::open(path).unwrap(), arg).unwrap())
}

/// Size, mtime and ctime of a file, if it exists (what a write changes).
pub fn stamp(path: &Path) -> Option<(u64, i64, i64, i64, i64)> {
    let meta = std::fs::symlink_metadata(path).ok()?;
    Some((
        meta.len(),
        meta.mtime(),
        meta.mtime_nsec(),
        meta.ctime(),
        meta.ctime_nsec(),
    ))
}

/// What the SDK's `try_held` says of `key`, bounded as locktop's probes
/// are: a claim still in flight after [`IN_FLIGHT_AFTER`] is `InFlight`.
pub async fn sdk_says(key: &LockKey) -> Liveness {
    match tokio::time::timeout(IN_FLIGHT_AFTER, lockfile::try_held(key.dir(), key.key())).await {
        Ok(true) => Liveness::Live,
        Ok(false) => Liveness::Free,
        Err(_) => Liveness::InFlight,
    }
}
