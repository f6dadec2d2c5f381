//! What inotify's events mean for the engine: one [`FsChange`] per thing
//! that happened under the watched directory, and how a path names its
//! claim. Shared by both watchers — notify's ([`super::fs_events`]) and
//! the one the engine reads itself ([`super::direct_watch`]) — so that
//! both tell the same changes of the same events.

use std::path::{Path, PathBuf};

use crate::disk::key::LockKey;

/// One thing that happened under the watched directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum FsChange {
    /// A gate or announce file was created, written, closed after writing
    /// or removed: the claim may have changed state.
    Key(LockKey),
    /// A gate or announce file opened for writing was closed: its holder
    /// released it or died — or another monitor's probe ended. The kernel
    /// queues this event BEFORE it removes the closed file's locks, so a
    /// look right after it may still find the lock (see the engine's
    /// close confirmation).
    Closed(LockKey),
    /// A held key's file was opened. Every probe opens files, so this
    /// never starts a probe; it means a waiter may have arrived (a blocked
    /// `flock` opens the file and makes no other event).
    Opened(LockKey),
    /// Other claim files were opened: [`EventFilter::take_opened`] says
    /// which. Sent once per batch the engine takes, not once per open.
    OthersOpened,
    /// A directory appeared: scan it (files may predate its watch).
    DirCreated(PathBuf),
    /// A directory (or the watched root itself) disappeared.
    DirRemoved(PathBuf),
    /// Some other path changed (a foreign file, a parent of the root).
    Other(PathBuf),
    /// Events were lost (inotify queue overflow): rescan everything.
    Rescan,
    /// Changes were lost between the watcher thread and the engine (the
    /// engine fell behind): rescan everything.
    LostInQueue,
    /// A filesystem was mounted or unmounted at or below the watched
    /// directory ([`MountWatch`]): inotify sees nothing inside a mount
    /// made over a watched directory, so watch and judge everything again.
    MountsChanged,
    /// inotify has no more watches to give.
    WatchLimit(String),
    /// Any other watcher error.
    Error(String),
}

/// One side of a rename. A directory moved in is scanned like a new one (a
/// whole tree of claims may arrive with it); a path moved away may have
/// been a directory (nothing on disk says so any more), so whatever was
/// known below it is dropped — and, were it a claim's file, its claim is
/// re-probed.
pub(crate) fn renamed(state_dir: &Path, path: PathBuf) -> Vec<FsChange> {
    match std::fs::symlink_metadata(&path) {
        Ok(meta) if meta.is_dir() => vec![FsChange::DirCreated(path)],
        Ok(_) => vec![file_change(state_dir, path)],
        Err(_) => vec![
            FsChange::DirRemoved(path.clone()),
            file_change(state_dir, path),
        ],
    }
}

pub(crate) fn file_change(state_dir: &Path, path: PathBuf) -> FsChange {
    match claim_of(state_dir, &path) {
        Some(key) => FsChange::Key(key),
        None => FsChange::Other(path),
    }
}

/// The claim a gate or announce path belongs to, if it is one. Only a
/// regular file is a claim's file, whatever its name — a symlink, a FIFO,
/// a directory named `x.lock` are problems (it may be gone: a removed file
/// still names its claim).
pub(crate) fn claim_of(state_dir: &Path, path: &Path) -> Option<LockKey> {
    let under_root = path.starts_with(crate::locks::coords::locks_root(state_dir));
    if !under_root || std::fs::symlink_metadata(path).is_ok_and(|m| !m.is_file()) {
        return None;
    }
    claim_named_here(state_dir, path)
}

/// The claim `path` names, by its name and place alone (the caller knows
/// it for a regular file, or gone).
pub(crate) fn claim_named_here(state_dir: &Path, path: &Path) -> Option<LockKey> {
    // A file named like a claim outside the locks root (a path read from
    // a process's fds: any `*.lock` on the filesystem) is no claim.
    if !path.starts_with(crate::locks::coords::locks_root(state_dir)) {
        return None;
    }
    crate::disk::key::claim_named(state_dir, path).map(|(key, _)| key)
}
