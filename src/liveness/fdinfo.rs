//! Who really holds a lock: the `lock:` lines of `/proc/<pid>/fdinfo/*`.
//!
//! `/proc/locks` names the process that CALLED `flock()`; that PID may be
//! gone (a forked child kept the file description) and even reused by an
//! unrelated process. The kernel lists a flock in the fdinfo of every fd
//! that refers to the locked open file description, so a process whose
//! fdinfo shows the lock is a verified holder, whatever PID took it.
//!
//! Invariants: only held `FLOCK` locks count (exclusive or shared: which
//! kind a PID holds is `/proc/locks`' to say); reading is per process
//! (one pass over its fds), done only for PIDs `/proc/locks` already named
//! for a held key, once per batch.

use std::collections::HashSet;
use std::io::ErrorKind;
use std::os::fd::AsFd;
use std::os::unix::ffi::OsStrExt;

use nix::errno::Errno;
use nix::fcntl::{OFlag, open, openat};
use nix::sys::stat::Mode;

use super::proc_locks::{FileId, parse_row};

/// The files a process holds a flock on, through any of its fds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HeldFiles {
    /// Read from its fdinfo.
    Known(HashSet<FileId>),
    /// The process is gone.
    Gone,
    /// Its fdinfo may not be read (another user's process, without
    /// privileges): nothing can be proved either way.
    Unreadable,
}

impl HeldFiles {
    /// Reads `/proc/<pid>/fdinfo/*` once: each entry opened relative to
    /// the directory (no walk of `/proc/<pid>` per fd) into one buffer.
    pub fn of(pid: u32) -> Self {
        let path = format!("/proc/{pid}/fdinfo");
        let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC;
        let (entries, dir) = match (
            std::fs::read_dir(&path),
            open(path.as_str(), flags, Mode::empty()),
        ) {
            (Ok(entries), Ok(dir)) => (entries, dir),
            (Err(error), _) if error.kind() == ErrorKind::NotFound => return HeldFiles::Gone,
            (_, Err(Errno::ENOENT | Errno::ESRCH)) => return HeldFiles::Gone,
            _ => return HeldFiles::Unreadable,
        };
        let mut files = HashSet::new();
        let mut text = Vec::with_capacity(512);
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Ok(fd) = openat(
                dir.as_fd(),
                name.as_bytes(),
                OFlag::O_RDONLY | OFlag::O_CLOEXEC,
                Mode::empty(),
            ) else {
                continue;
            };
            if read_fdinfo(fd, &mut text).is_err() {
                continue;
            }
            files.extend(
                text.split(|&b| b == b'\n')
                    .filter_map(|line| line.strip_prefix(b"lock:"))
                    .filter_map(|row| parse_row(std::str::from_utf8(row).ok()?.trim_start()))
                    .filter(|row| !row.waiting)
                    .map(|row| row.file),
            );
        }
        HeldFiles::Known(files)
    }

    /// Every readable process's held files, from one pass over `/proc`
    /// (costly: only for a lock whose `flock()` caller is gone, once per
    /// batch, never per key in a loop).
    pub fn of_every_process() -> Vec<(u32, HeldFiles)> {
        let Ok(all) = procfs::process::all_processes() else {
            return Vec::new();
        };
        all.flatten()
            .filter_map(|process| u32::try_from(process.pid).ok())
            .map(|pid| (pid, HeldFiles::of(pid)))
            .filter(|(_, held)| matches!(held, HeldFiles::Known(files) if !files.is_empty()))
            .collect()
    }

    /// True when the process is proved to hold one of `files`.
    pub fn holds_any(&self, files: &[FileId]) -> bool {
        matches!(self, HeldFiles::Known(held) if files.iter().any(|f| held.contains(f)))
    }
}

/// Reads the whole of an fdinfo file into `text` (cleared first) with
/// plain `read`s: `File::read_to_end` adds an `fstat` and an `lseek` per
/// file to size its buffer, and a last `read` to see the end. An fdinfo
/// file is one record made at once (`single_open` in the kernel's
/// `fs/proc/fd.c`), which a `read` with room for it returns whole, so a
/// read that does not fill the buffer was the end; a longer one (an epoll
/// or inotify fd's) is read on until a `read` returns nothing.
fn read_fdinfo(fd: std::os::fd::OwnedFd, text: &mut Vec<u8>) -> nix::Result<()> {
    text.clear();
    let mut chunk = [0u8; 4096];
    loop {
        match nix::unistd::read(&fd, &mut chunk) {
            Ok(got) => {
                text.extend_from_slice(&chunk[..got]);
                if got < chunk.len() {
                    return Ok(());
                }
            }
            Err(Errno::EINTR) => {}
            Err(error) => return Err(error),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    #[test]
    fn this_processs_own_flock_shows_in_its_fdinfo() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.lock");
        let file = std::fs::File::create(&path).unwrap();
        let id = FileId::of(&path).unwrap();
        assert!(!HeldFiles::of(std::process::id()).holds_any(&[id]));
        // SAFETY: a valid open fd for the duration of the call.
        assert_eq!(unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) }, 0);
        assert!(HeldFiles::of(std::process::id()).holds_any(&[id]));
    }

    /// An fdinfo longer than the buffer (an inotify fd with 200 watches:
    /// one line each) is read whole, as a plain read of the file reads
    /// it: a lock line after the first 4 KiB would not be lost.
    #[test]
    fn a_long_fdinfo_is_read_to_its_end() {
        let dir = tempfile::tempdir().unwrap();
        let inotify = inotify::Inotify::init().unwrap();
        for i in 0..200 {
            let watched = dir.path().join(format!("w{i}"));
            std::fs::create_dir(&watched).unwrap();
            let mask = inotify::WatchMask::CREATE;
            inotify.watches().add(&watched, mask).unwrap();
        }
        let path = format!("/proc/self/fdinfo/{}", inotify.as_raw_fd());
        let fd = open(path.as_str(), OFlag::O_RDONLY, Mode::empty()).unwrap();
        let mut text = Vec::new();
        read_fdinfo(fd, &mut text).unwrap();
        assert!(text.len() > 4096, "{} bytes: not long enough", text.len());
        assert_eq!(text, std::fs::read(&path).unwrap());
    }

    #[test]
    fn a_pid_that_does_not_exist_holds_nothing() {
        assert_eq!(HeldFiles::of(u32::MAX - 7), HeldFiles::Gone);
    }
}
