//! A claim's files found from a descriptor of its directory, for every
//! judgement of claims by directory (lock-free `fstatat`s, passive
//! probes): one path handle per run of keys of one directory, the files'
//! names built in reused buffers. A leaf: the lock-free judgement and
//! the passive probes share it without naming each other.

use std::borrow::Borrow;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::Arc;

use nix::fcntl::{OFlag, open};
use nix::sys::stat::Mode;

use crate::disk::key::{ClaimDir, LockKey};
use crate::locks::escape::{ANNOUNCE_SUFFIX, GATE_SUFFIX, escape_into};

/// `answer(key, Some((dir, gate, announce)))` for each key (borrowed or
/// owned: an owned key is handed to `answer`, so a caller can pair it
/// with its answer without a copy), in order:
/// `dir` a descriptor of the key's directory (opened once for each run
/// of keys of one directory), `gate` and `announce` its files' names in
/// it (built in reused buffers, no path per key); `None` where the
/// directory could not be opened. Lazy: nothing is collected. What every
/// bulk probe of claims by directory shares.
pub(super) fn each_claim_at<K: Borrow<LockKey>, T>(
    keys: impl IntoIterator<Item = K>,
    mut answer: impl FnMut(K, Option<(BorrowedFd<'_>, &[u8], &[u8])>) -> T,
) -> impl Iterator<Item = T> {
    let mut open_dir: Option<(Arc<ClaimDir>, Option<OwnedFd>)> = None;
    let (mut gate, mut announce) = (Vec::with_capacity(128), Vec::with_capacity(128));
    keys.into_iter().map(move |owned| {
        let key: &LockKey = owned.borrow();
        if open_dir
            .as_ref()
            .is_none_or(|(dir, _)| !Arc::ptr_eq(dir, key.claim_dir()) && dir.path() != key.dir())
        {
            // A path handle, not an open: the `*at` calls work from it,
            // and inotify tells no one of it (an open and a close of the
            // directory per judgement woke every watcher of the tree —
            // this monitor's own inotify thread, and through it the lock
            // events' reader, included).
            let flags = OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC;
            let fd = open(key.dir(), flags, Mode::empty()).ok();
            open_dir = Some((key.claim_dir().clone(), fd));
        }
        let Some(dir) = open_dir.as_ref().and_then(|(_, fd)| fd.as_ref()) else {
            return answer(owned, None);
        };
        gate.clear();
        escape_into(key.key(), &mut gate);
        announce.clear();
        announce.extend_from_slice(&gate);
        gate.extend_from_slice(GATE_SUFFIX.as_bytes());
        announce.extend_from_slice(ANNOUNCE_SUFFIX.as_bytes());
        answer(owned, Some((dir.as_fd(), &gate[..], &announce[..])))
    })
}
