//! The passive probe's fast path: whether a lock file is exclusively
//! locked, learned the way the SDK's `try_held` learns it — a
//! non-blocking SHARED flock, released at once — but with half the
//! syscalls on the common answers.
//!
//! The SDK's `try_held` opens and probes BOTH files of a claim before
//! looking at either answer (8 syscalls per free claim: 2 opens, 4
//! flocks, 2 closes). Here the gate is probed first, and a free gate
//! ends the probe (open, flock, close: what the benchmark's floor does;
//! the close releases the shared lock); the announce is probed only when
//! the gate is locked. A gate locked and an announce not (an acquisition
//! or release in flight), or an announce it cannot open, is left to the
//! SDK's own `try_held` by the caller; a gate it cannot open is an error
//! there (`try_held` would call it free).
//!
//! Invariants: opens read-only with `O_NOFOLLOW | O_NONBLOCK` (no write,
//! no symlink followed, no FIFO open can block), takes only `LOCK_SH |
//! LOCK_NB`, held no longer than until its descriptor's close a few
//! instructions later, and never creates a file.
//! Differential test: `tests/integration/locks/shared_probe_matches_sdk.rs`
//! compares it with `try_held` on random claim states.

use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd};
use std::path::Path;

use nix::NixPath;
use nix::errno::Errno;
use nix::fcntl::{AT_FDCWD, AtFlags, OFlag, openat};
use nix::sys::stat::{Mode, SFlag, fstatat};

/// What a non-blocking shared lock found on one file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FileLock {
    /// The shared lock was granted (and released): no exclusive holder.
    Unlocked,
    /// The shared lock was refused: someone holds the file exclusively.
    Locked,
    /// No file at the path (the SDK reads this as "not locked").
    Missing,
    /// The file could not be opened for another reason (permissions, a
    /// symlink, …): not for this fast path to judge.
    Unopenable(Errno),
}

/// Probes `path` with a non-blocking shared flock (see the module doc).
#[cfg(test)]
pub(crate) fn file_lock(path: &Path) -> FileLock {
    file_lock_at(AT_FDCWD, path)
}

/// [`file_lock`] of `name` relative to the directory `dir` (no path walk
/// from the root: what a bulk probe of one directory's claims uses).
pub(crate) fn file_lock_at<P: ?Sized + NixPath>(dir: BorrowedFd<'_>, name: &P) -> FileLock {
    let flags = OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC;
    let fd: OwnedFd = match openat(dir, name, flags, Mode::empty()) {
        Ok(fd) => fd,
        Err(Errno::ENOENT) => return FileLock::Missing,
        Err(errno) => return FileLock::Unopenable(errno),
    };
    // SAFETY: `fd` is an open descriptor this function owns until the
    // end of the function; flock(2) reads no memory of ours.
    let refused = unsafe { libc::flock(fd.as_raw_fd(), libc::LOCK_SH | libc::LOCK_NB) } != 0;
    // Closing `fd` (its only descriptor: opened here, never duplicated)
    // releases a granted shared lock: no LOCK_UN call needed.
    drop(fd);
    if refused {
        // As the SDK: any refusal of the shared lock reads as locked.
        FileLock::Locked
    } else {
        FileLock::Unlocked
    }
}

/// Whether `name` in `dir` exists and is not a regular file (`lstat`:
/// a symlink counts as not regular, and is not followed).
pub(crate) fn exists_not_regular<P: ?Sized + NixPath>(dir: BorrowedFd<'_>, name: &P) -> bool {
    fstatat(dir, name, AtFlags::AT_SYMLINK_NOFOLLOW)
        .is_ok_and(|stat| SFlag::from_bits_truncate(stat.st_mode) & SFlag::S_IFMT != SFlag::S_IFREG)
}

/// The answer of the fast path for a claim, when it has one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Quick {
    /// The gate is not exclusively locked (or missing): not held, as
    /// `try_held` says at once in that case.
    Free,
    /// Gate and announce are both exclusively locked: held.
    Held,
    /// The gate could not be opened (permissions, a symlink raced in, …).
    GateUnopenable(Errno),
    /// The gate is locked and the announce is not a regular file: never
    /// opened.
    AnnounceNotRegular,
    /// The gate is locked and the announce is not (unlocked or missing):
    /// an acquisition or a release in flight, which `try_held` waits out.
    InFlight,
    /// The announce could not be opened for another reason: ask the SDK.
    AskTheSdk,
}

/// The fast path for the claim whose files are `gate` and `announce`. The
/// caller has made sure the gate is a regular file; the announce is
/// `lstat`ed here, before it is opened (only when the gate is locked),
/// and when the gate is free (a FIFO announce is never a free claim).
pub fn quick(gate: &Path, announce: &Path) -> Quick {
    quick_at(AT_FDCWD, gate, announce)
}

/// [`quick`] for the files `gate` and `announce` of the directory `dir`.
pub(crate) fn quick_at<P: ?Sized + NixPath>(dir: BorrowedFd<'_>, gate: &P, announce: &P) -> Quick {
    match file_lock_at(dir, gate) {
        // A claim whose announce is no regular file is none an agent can
        // take, locked gate or not: never "free" (as `check` says).
        FileLock::Unlocked if exists_not_regular(dir, announce) => Quick::AnnounceNotRegular,
        FileLock::Unlocked | FileLock::Missing => Quick::Free,
        FileLock::Unopenable(errno) => Quick::GateUnopenable(errno),
        FileLock::Locked => {
            if exists_not_regular(dir, announce) {
                return Quick::AnnounceNotRegular;
            }
            match file_lock_at(dir, announce) {
                FileLock::Locked => Quick::Held,
                FileLock::Unlocked | FileLock::Missing => Quick::InFlight,
                FileLock::Unopenable(_) => Quick::AskTheSdk,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nix::fcntl::{Flock, FlockArg};

    #[test]
    fn a_free_a_missing_and_a_locked_file_read_as_such() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("g.lock");
        assert_eq!(file_lock(&path), FileLock::Missing);
        std::fs::write(&path, b"").unwrap();
        assert_eq!(file_lock(&path), FileLock::Unlocked);
        let held = Flock::lock(
            std::fs::File::open(&path).unwrap(),
            FlockArg::LockExclusiveNonblock,
        )
        .unwrap();
        assert_eq!(file_lock(&path), FileLock::Locked);
        drop(held);
        let shared = Flock::lock(
            std::fs::File::open(&path).unwrap(),
            FlockArg::LockSharedNonblock,
        )
        .unwrap();
        assert_eq!(
            file_lock(&path),
            FileLock::Unlocked,
            "a shared lock is no holder"
        );
        drop(shared);
    }

    #[test]
    fn a_fifo_never_blocks_and_a_symlink_is_never_followed() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("f.lock");
        nix::unistd::mkfifo(&fifo, Mode::S_IRWXU).unwrap();
        // O_NONBLOCK: a reader's open of a FIFO returns at once.
        assert!(matches!(
            file_lock(&fifo),
            FileLock::Unlocked | FileLock::Locked | FileLock::Unopenable(_)
        ));
        let link = dir.path().join("l.lock");
        std::os::unix::fs::symlink("/etc/passwd", &link).unwrap();
        assert_eq!(file_lock(&link), FileLock::Unopenable(Errno::ELOOP));
    }
}
