//! Which lock files may be opened, and which may be written, as an agent
//! lock — decided from `lstat` alone, before the SDK opens anything.
//!
//! Invariants: a path at a gate or announce that is not a regular file (a
//! FIFO, whose open would block; a directory; a socket; a symlink, which
//! the SDK would follow) is never opened; a gate with content is never
//! written (agent gates are empty, and the SDK's acquire truncates the
//! gate). A missing file is fit, and is created by [`create_missing`]
//! before the SDK acquires — never by the SDK itself, see there.

use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};

use super::escape::{announce_path, gate_path};

/// Why a claim's files are not fit to be used as an agent lock.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unfit {
    /// Something other than a regular file sits at a lock path.
    #[error("{} is {what}, not a lock file (locktop never opens it)", path.display())]
    NotRegular {
        /// The gate or announce path.
        path: PathBuf,
        /// `a FIFO`, `a directory`, …
        what: &'static str,
    },
    /// The gate has content: not an agent lock.
    #[error("{} holds {len} bytes; agent gates are empty, so locktop never writes it", path.display())]
    HasContent {
        /// The gate path.
        path: PathBuf,
        /// Its size.
        len: u64,
    },
}

/// `Ok` when neither lock file of `(dir, key)` exists as anything but a
/// regular file: opening them (read-only, for a shared-lock probe) cannot
/// block or follow a link.
pub fn check_openable(dir: &Path, key: &str) -> Result<(), Unfit> {
    for path in [gate_path(dir, key), announce_path(dir, key)] {
        if let Ok(meta) = std::fs::symlink_metadata(&path)
            && !meta.is_file()
        {
            let what = describe(meta.file_type());
            return Err(Unfit::NotRegular { path, what });
        }
    }
    Ok(())
}

/// [`check_openable`], and the gate (if it exists) is empty: acquiring
/// `(dir, key)` would write only what an agent lock contains.
pub fn check_writable(dir: &Path, key: &str) -> Result<(), Unfit> {
    check_openable(dir, key)?;
    let path = gate_path(dir, key);
    match std::fs::symlink_metadata(&path) {
        Ok(meta) if meta.len() > 0 => Err(Unfit::HasContent {
            path,
            len: meta.len(),
        }),
        _ => Ok(()),
    }
}

/// Creates `(dir, key)`'s directory and whichever of its two lock files is
/// missing (empty, mode 0644 before the umask, as the SDK makes them),
/// without truncating, writing or locking anything.
///
/// Why: the SDK (2.2.16) creates a missing lock file with `O_EXCL`, then
/// locks it non-blocking, and when that lock fails it REMOVES the file.
/// Between its create and its lock, another process can open the new file
/// — an agent in `wait_acquire`, or any probe — and win the lock; the
/// creator then unlinks the path under the winner, who goes on "holding"
/// a file nobody else can see: the next acquirer creates a fresh gate
/// (locking it, though it then fails at the announce the winner holds),
/// and a monitor sees the key free while the winner believes it holds it.
/// (The chaos suite caught it: a `hold --wait` child held a tag for 1.2 s
/// while every probe found it free.) With both files already there, the
/// SDK always takes its open-existing path, which never removes anything.
/// Best effort: an error here is left for the SDK's own open to report.
pub fn create_missing(dir: &Path, key: &str) {
    use nix::fcntl::{OFlag, open};
    use nix::sys::stat::Mode;
    if std::fs::create_dir_all(dir).is_err() {
        return;
    }
    // Read-only + O_CREAT: no write, so its close makes no IN_CLOSE_WRITE
    // (no probe is woken for nothing); O_NONBLOCK | O_NOFOLLOW: a FIFO or
    // a symlink raced in after the lstat check cannot block or redirect.
    let flags =
        OFlag::O_RDONLY | OFlag::O_CREAT | OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC;
    let mode = Mode::from_bits_truncate(0o644);
    for path in [gate_path(dir, key), announce_path(dir, key)] {
        if std::fs::symlink_metadata(&path).is_ok() {
            continue;
        }
        if let Err(errno) = open(&path, flags, mode).map(drop) {
            tracing::debug!(path = %path.display(), %errno, "creating a lock file");
        }
    }
}

/// `a FIFO`, `a directory`, … — what a non-regular file is, for messages.
pub fn describe(file_type: std::fs::FileType) -> &'static str {
    if file_type.is_dir() {
        "a directory"
    } else if file_type.is_fifo() {
        "a FIFO"
    } else if file_type.is_socket() {
        "a socket"
    } else if file_type.is_symlink() {
        "a symlink"
    } else if file_type.is_block_device() || file_type.is_char_device() {
        "a device"
    } else {
        "not a regular file"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_and_empty_files_are_fit() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(check_writable(dir.path(), "k"), Ok(()));
        std::fs::write(gate_path(dir.path(), "k"), b"").unwrap();
        assert_eq!(check_writable(dir.path(), "k"), Ok(()));
    }

    #[test]
    fn a_fifo_a_directory_or_a_symlink_is_never_opened() {
        let dir = tempfile::tempdir().unwrap();
        nix::unistd::mkfifo(
            &gate_path(dir.path(), "fifo"),
            nix::sys::stat::Mode::S_IRWXU,
        )
        .unwrap();
        std::fs::create_dir(announce_path(dir.path(), "dir")).unwrap();
        std::os::unix::fs::symlink("/etc/passwd", gate_path(dir.path(), "link")).unwrap();
        for (key, what) in [
            ("fifo", "a FIFO"),
            ("dir", "a directory"),
            ("link", "a symlink"),
        ] {
            match check_openable(dir.path(), key) {
                Err(Unfit::NotRegular { what: found, .. }) => assert_eq!(found, what),
                other => panic!("{key}: {other:?}"),
            }
        }
    }

    #[test]
    fn a_gate_with_content_may_be_probed_but_never_written() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(gate_path(dir.path(), "data"), b"payload").unwrap();
        assert_eq!(check_openable(dir.path(), "data"), Ok(()));
        assert!(matches!(
            check_writable(dir.path(), "data"),
            Err(Unfit::HasContent { len: 7, .. })
        ));
    }
}
