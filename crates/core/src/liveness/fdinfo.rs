//! Who really holds a lock: the `lock:` lines of `/proc/<pid>/fdinfo/*`.
//!
//! `/proc/locks` names the process that CALLED `flock()`; that PID may be
//! gone (a forked child kept the file description) and even reused by an
//! unrelated process. The kernel lists a flock in the fdinfo of every fd
//! that refers to the locked open file description, so a process whose
//! fdinfo shows the lock is a verified holder, whatever PID took it.
//!
//! Invariants: only held `FLOCK` locks count (exclusive or shared: which
//! kind a PID holds is `/proc/locks`' to say); a hold is proved only by
//! an fdinfo that shows it, however the fd was found (a hint, the few
//! newest fds by number, a search, a read of all); reading is per process
//! (one pass over its fds, a `stat` each, the fdinfo of regular files and
//! directories only), done only for PIDs `/proc/locks` already named
//! for a held key, once per batch — except [`keepers_of`], the search for
//! whoever keeps a lock whose caller is gone, which `stat`s every
//! process's fds and reads the fdinfo of those open on the claim only.

use std::collections::HashSet;
use std::ops::ControlFlow;
use std::os::fd::{AsFd, AsRawFd};

use nix::errno::Errno;
use nix::fcntl::{OFlag, open, openat};
use nix::sys::stat::{Mode, SFlag};

use super::proc_locks::{FileId, parse_row};

/// How many of a process's highest-numbered fds
/// [`HeldFiles::proved_at_top`] reads at most (a holder of an instance
/// claim and a tag has four claim files open, its newest fds).
pub const TOP_FDS: i32 = 4;

/// The files a process holds a flock on, through any of its fds (of the
/// kinds a claim can be: regular files and directories).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HeldFiles {
    /// Read from its fdinfo.
    Known(HashSet<FileId>),
    /// Some of them, proved by the fdinfo of the fds hinted
    /// ([`HeldFiles::proved_through`]); what else it holds is unknown.
    Proved(HashSet<FileId>),
    /// The process is gone.
    Gone,
    /// Its fdinfo may not be read (another user's process, without
    /// privileges): nothing can be proved either way.
    Unreadable,
}

impl HeldFiles {
    /// Reads which regular files and directories `pid` holds a flock on
    /// (what a claim can be): every fd is `stat`ed through its
    /// `/proc/<pid>/fd` link (one `fstatat` each) and only the fdinfo of
    /// those open on a regular file or a directory is read — a pipe's, a
    /// socket's or an eventfd's never lists a flock on a claim, and
    /// reading them was most of a holder's verification (a `locktop
    /// hold` has 11 fds, 2 of them its claim's files).
    pub fn of(pid: u32) -> Self {
        let info = match open_fdinfo_dir(pid) {
            Ok(info) => info,
            Err(held) => return held,
        };
        let mut files = HashSet::new();
        let mut text = Vec::with_capacity(512);
        let mut unreadable = false;
        let listed = each_fd(pid, |_, name, stat| {
            // An fd whose link may not be followed has its fdinfo read
            // all the same.
            if let Some(stat) = stat {
                let kind = SFlag::from_bits_truncate(stat.st_mode) & SFlag::S_IFMT;
                if kind != SFlag::S_IFREG && kind != SFlag::S_IFDIR {
                    return ControlFlow::Continue(());
                }
            }
            match openat(
                info.as_fd(),
                name,
                OFlag::O_RDONLY | OFlag::O_CLOEXEC,
                Mode::empty(),
            ) {
                Ok(fd) => {
                    if read_fdinfo(fd, &mut text).is_ok() {
                        files.extend(held_rows(&text));
                    }
                    ControlFlow::Continue(())
                }
                // Closed meanwhile.
                Err(Errno::ENOENT) => ControlFlow::Continue(()),
                Err(_) => {
                    unreadable = true;
                    ControlFlow::Break(())
                }
            }
        });
        match listed {
            Err(error) => gone_or_unreadable(error),
            Ok(_) if unreadable => HeldFiles::Unreadable,
            Ok(_) => HeldFiles::Known(files),
        }
    }

    /// What `pid` is proved to hold through the fds `fds` (their fdinfo
    /// read now, whatever they are open on: a lock row lists the file by
    /// device and inode, and the fdinfo of an fd lists the locks its open
    /// file description holds) — every file they show, when one of
    /// `files` is among them. `None` when none is: only a walk of all its
    /// fds can tell more.
    pub fn proved_through(pid: u32, fds: &[i32], files: &[FileId]) -> Option<Self> {
        let mut text = Vec::with_capacity(512);
        let mut proved = HashSet::new();
        for &fd in fds {
            proved.extend(fd_holds(pid, fd, &mut text));
        }
        proves_any(&proved, files).then_some(HeldFiles::Proved(proved))
    }

    /// What `pid` is proved to hold through its newest fds (every file
    /// the fds read show, when one of `files` is among them),
    /// found without listing them: `stat` tells the size of its fd
    /// directory as how many fds it has open (Linux 6.2 on; 0 before),
    /// and a process's fds are most often numbered from 0 without gaps,
    /// so its newest — where a holder most often has its claim's files —
    /// are just below that count. Reads the fdinfo of at most
    /// [`TOP_FDS`] of them, from the top, and stops at the first that
    /// shows a held flock on one of `files`. `None` when none does (gaps
    /// in its fd numbers, a kernel that does not count, a file opened
    /// long before, a process gone or unreadable): only a search of its
    /// fds ([`Self::searched`]) can tell more. Listing `/proc/<pid>/fd`
    /// makes the kernel build a dentry and an inode for every fd listed;
    /// this builds one per fdinfo read.
    pub fn proved_at_top(pid: u32, files: &[FileId]) -> Option<Self> {
        let count = nix::sys::stat::stat(format!("/proc/{pid}/fd").as_str())
            .ok()?
            .st_size;
        let top = i32::try_from(count).ok()?.checked_sub(1)?;
        let mut text = Vec::with_capacity(512);
        let mut proved = HashSet::new();
        for fd in (top.saturating_sub(TOP_FDS - 1).max(0)..=top).rev() {
            proved.extend(fd_holds(pid, fd, &mut text));
            if proves_any(&proved, files) {
                return Some(HeldFiles::Proved(proved));
            }
        }
        None
    }

    /// Which of `files` `pid` is proved to hold, found by searching its
    /// fds from the newest (the highest number) down and stopping at the
    /// first whose fdinfo shows a held flock on one of them: a holder most
    /// often opened its claim's files last, so the search `stat`s a few
    /// fds, not all. `Some(Proved)`; `Some(Gone)` or `Some(Unreadable)` as
    /// [`Self::of`] says them (an fdinfo that may not be read makes the
    /// process unreadable); `None` when no fd on `files` shows one — only
    /// [`Self::of`] can then say what it holds.
    pub fn searched(pid: u32, files: &[FileId]) -> Option<Self> {
        let info = match open_fdinfo_dir(pid) {
            Ok(info) => info,
            Err(held) => return Some(held),
        };
        let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC;
        let fds = match open(format!("/proc/{pid}/fd").as_str(), flags, Mode::empty()) {
            Ok(fds) => fds,
            Err(error) => return Some(gone_or_unreadable(error)),
        };
        let gone = |error: rustix::io::Errno| {
            Some(gone_or_unreadable(Errno::from_raw(error.raw_os_error())))
        };
        // rustix's listing reads the entries with `getdents64` alone (no
        // `fstat`, `fcntl`s and `lseek` around it, as `fdopendir` makes).
        let mut listing = match rustix::fs::Dir::new(fds) {
            Ok(listing) => listing,
            Err(error) => return gone(error),
        };
        let mut numbers: Vec<i32> = Vec::new();
        while let Some(entry) = listing.read() {
            match entry {
                Ok(entry) => numbers.extend(
                    entry
                        .file_name()
                        .to_str()
                        .ok()
                        .and_then(|name| name.parse::<i32>().ok()),
                ),
                Err(error) => return gone(error),
            }
        }
        numbers.sort_unstable_by(|a, b| b.cmp(a));
        let dir = match listing.fd() {
            Ok(dir) => dir,
            Err(error) => return gone(error),
        };
        let mut text = Vec::with_capacity(512);
        for number in numbers {
            let name = number.to_string();
            // An fd whose link may not be followed has its fdinfo read
            // all the same (as `of` does).
            let stat = nix::sys::stat::fstatat(dir, name.as_str(), nix::fcntl::AtFlags::empty());
            if stat.is_ok_and(|stat| !files.contains(&FileId::from_stat(&stat))) {
                continue;
            }
            match openat(
                info.as_fd(),
                name.as_str(),
                OFlag::O_RDONLY | OFlag::O_CLOEXEC,
                Mode::empty(),
            ) {
                Ok(fd) => {
                    if read_fdinfo(fd, &mut text).is_ok() {
                        let proved: HashSet<FileId> = held_rows(&text)
                            .filter(|file| files.contains(file))
                            .collect();
                        if !proved.is_empty() {
                            return Some(HeldFiles::Proved(proved));
                        }
                    }
                }
                // Closed meanwhile.
                Err(Errno::ENOENT) => {}
                Err(_) => return Some(HeldFiles::Unreadable),
            }
        }
        None
    }

    /// True when the process is proved to hold one of `files`.
    pub fn holds_any(&self, files: &[FileId]) -> bool {
        match self {
            HeldFiles::Known(held) | HeldFiles::Proved(held) => {
                files.iter().any(|file| held.contains(file))
            }
            HeldFiles::Gone | HeldFiles::Unreadable => false,
        }
    }
}

/// `pid`'s fdinfo directory, opened for reading (not `O_PATH`: a monitor
/// that may list the fds but not read their fdinfo — in a user namespace
/// of its own — learns it here, as unreadable, never as holding nothing);
/// `Err` says the process is gone or may not be read.
fn open_fdinfo_dir(pid: u32) -> Result<std::os::fd::OwnedFd, HeldFiles> {
    let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC;
    open(format!("/proc/{pid}/fdinfo").as_str(), flags, Mode::empty()).map_err(gone_or_unreadable)
}

/// Whether `proved` holds one of `files`.
fn proves_any(proved: &HashSet<FileId>, files: &[FileId]) -> bool {
    files.iter().any(|file| proved.contains(file))
}

/// The files the fdinfo of `pid`'s fd `fd` shows a held flock on, read
/// now into `text` (none when it cannot be opened: closed, gone or not
/// ours to read). Every one is proved, asked for or not: a holder's
/// instance and tag are judged in one batch, and the fd read for one
/// proves the other without a read of its own.
fn fd_holds(pid: u32, fd: i32, text: &mut Vec<u8>) -> HashSet<FileId> {
    let path = format!("/proc/{pid}/fdinfo/{fd}");
    let Ok(info) = open(
        path.as_str(),
        OFlag::O_RDONLY | OFlag::O_CLOEXEC,
        Mode::empty(),
    ) else {
        return HashSet::new();
    };
    if read_fdinfo(info, text).is_err() {
        return HashSet::new();
    }
    held_rows(text).collect()
}

/// What an error reading `/proc/<pid>` says of the process.
fn gone_or_unreadable(error: Errno) -> HeldFiles {
    match error {
        Errno::ENOENT | Errno::ESRCH => HeldFiles::Gone,
        _ => HeldFiles::Unreadable,
    }
}

/// The processes that hold a flock on one of `files` through an fd of
/// their own, whoever called `flock()`: the keepers of a lock whose caller
/// is gone (a forked child kept the file description). Bounded by what it
/// reads: every process's fds are `stat`ed through their `/proc/<pid>/fd`
/// links (one `fstatat` each), and only an fd open on one of `files` has
/// its fdinfo read — so locks held elsewhere on the machine (thousands of
/// them) cost a `stat` per fd, not a read and a parse each. Processes
/// whose fds may not be read are skipped: nothing is proved of them.
pub(crate) fn keepers_of(files: &[FileId]) -> Vec<u32> {
    let Ok(proc_dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut keepers: Vec<u32> = proc_dir
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| keeps_any(pid, files))
        .collect();
    keepers.sort_unstable();
    keepers
}

/// True when one of `pid`'s fds is open on one of `files` and its fdinfo
/// shows a held flock on that file.
fn keeps_any(pid: u32, files: &[FileId]) -> bool {
    let mut text = Vec::new();
    find_fd_on(pid, files, |_, name, id| {
        let path = format!("/proc/{pid}/fdinfo/{}", name.to_string_lossy());
        let Ok(fd) = open(
            path.as_str(),
            OFlag::O_RDONLY | OFlag::O_CLOEXEC,
            Mode::empty(),
        ) else {
            return false;
        };
        read_fdinfo(fd, &mut text).is_ok() && held_rows(&text).any(|file| file == id)
    })
}

/// The path `pid` opened `file` by, as its fd's link names it — in
/// `pid`'s own mount namespace and root: a caller compares it with what it
/// sees at that path before trusting it. `None` when `pid` has no fd open
/// on `file` (or is gone, or its fds may not be read).
pub(crate) fn path_of_open_file(pid: u32, file: FileId) -> Option<std::path::PathBuf> {
    let mut found = None;
    find_fd_on(pid, &[file], |dir, name, _| {
        found = nix::fcntl::readlinkat(dir, name)
            .ok()
            .map(std::path::PathBuf::from);
        found.is_some()
    });
    found
}

/// Calls `each` with `pid`'s fd directory, an fd's name and its file for
/// every fd of `pid` open on one of `files` (one `fstatat` per fd, through
/// its magic link), until `each` says true; true when it did.
fn find_fd_on(
    pid: u32,
    files: &[FileId],
    mut each: impl FnMut(std::os::fd::BorrowedFd<'_>, &std::ffi::CStr, FileId) -> bool,
) -> bool {
    let found = each_fd(pid, |dir, name, stat| {
        let Some(id) = stat.map(|stat| FileId::from_stat(&stat)) else {
            return ControlFlow::Continue(());
        };
        if files.contains(&id) && each(dir, name, id) {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    });
    matches!(found, Ok(ControlFlow::Break(())))
}

/// Calls `each` with `pid`'s fd directory, each fd's name and the open
/// file's `stat` through its magic link (`None` when it may not be
/// followed, or the fd closed meanwhile), until `each` breaks; whether it
/// did. An error when the fd directory may not be listed.
fn each_fd(
    pid: u32,
    mut each: impl FnMut(
        std::os::fd::BorrowedFd<'_>,
        &std::ffi::CStr,
        Option<nix::sys::stat::FileStat>,
    ) -> ControlFlow<()>,
) -> Result<ControlFlow<()>, Errno> {
    let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC;
    let mut fds = nix::dir::Dir::open(format!("/proc/{pid}/fd").as_str(), flags, Mode::empty())?;
    let dir = fds.as_raw_fd();
    for entry in fds.iter().flatten() {
        let name = entry.file_name();
        if name.to_bytes().starts_with(b".") {
            continue;
        }
        // SAFETY: `dir` is the directory being iterated, open for the loop.
        let dir = unsafe { std::os::fd::BorrowedFd::borrow_raw(dir) };
        // Follows the fd's magic link to the open file itself.
        let stat = nix::sys::stat::fstatat(dir, name, nix::fcntl::AtFlags::empty()).ok();
        if each(dir, name, stat).is_break() {
            return Ok(ControlFlow::Break(()));
        }
    }
    Ok(ControlFlow::Continue(()))
}

/// The files of the held (not waiting) flocks an fdinfo text lists.
fn held_rows(text: &[u8]) -> impl Iterator<Item = FileId> + '_ {
    text.split(|&b| b == b'\n')
        .filter_map(|line| line.strip_prefix(b"lock:"))
        .filter_map(|row| parse_row(std::str::from_utf8(row).ok()?.trim_start()))
        .filter(|row| !row.waiting)
        .map(|row| row.file)
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

    /// A search proves a hold through the fd on the file whose fdinfo
    /// shows it, among fds opened before and after it; finds nothing for
    /// a file opened but not locked, nor for one not open at all; says a
    /// gone process is gone.
    #[test]
    fn a_search_of_the_fds_proves_what_an_fd_on_the_file_shows() {
        let dir = tempfile::tempdir().unwrap();
        let open_file = |name: &str| {
            let path = dir.path().join(name);
            let file = std::fs::File::create(&path).unwrap();
            (file, FileId::of(&path).unwrap())
        };
        let (_before, _) = open_file("before");
        let (locked, locked_id) = open_file("locked");
        let (_unlocked, unlocked_id) = open_file("unlocked");
        let (_after, _) = open_file("after");
        // SAFETY: a valid open fd for the duration of the call.
        assert_eq!(unsafe { libc::flock(locked.as_raw_fd(), libc::LOCK_EX) }, 0);
        let me = std::process::id();
        let found = HeldFiles::searched(me, &[unlocked_id, locked_id]);
        assert_eq!(found, Some(HeldFiles::Proved(HashSet::from([locked_id]))));
        assert_eq!(HeldFiles::searched(me, &[unlocked_id]), None);
        let elsewhere = FileId::of(dir.path()).unwrap();
        assert_eq!(HeldFiles::searched(me, &[elsewhere]), None);
        assert_eq!(
            HeldFiles::searched(u32::MAX - 7, &[locked_id]),
            Some(HeldFiles::Gone)
        );
    }

    /// A holder whose fds are numbered without gaps has its newest proved
    /// from the top, with no listing: each of its locked files, the
    /// first and the last it opened. A file it has not locked is not
    /// proved; nor is a lock held through an fd above a gap (fds 0–2 and
    /// 9: three fds below the top are read, none on the file), which only
    /// the search finds.
    #[test]
    fn the_newest_fds_prove_a_hold_without_a_listing_but_not_past_a_gap() {
        use crate::liveness::verify::testing::hold_through_flock;
        let dir = tempfile::tempdir().unwrap();
        let paths: Vec<std::path::PathBuf> =
            ["a", "b", "free"].map(|name| dir.path().join(name)).into();
        for path in &paths {
            std::fs::write(path, b"").unwrap();
        }
        let id = |path: &std::path::Path| FileId::of(path).unwrap();
        let mut holder = hold_through_flock(&[&paths[0], &paths[1]]);
        let pid = holder.id();
        let both = HashSet::from([id(&paths[0]), id(&paths[1])]);
        // The newest fd (b's) proves b alone; a is proved one fd below,
        // and what was read on the way (b) is proved with it.
        assert_eq!(
            HeldFiles::proved_at_top(pid, &[id(&paths[1])]),
            Some(HeldFiles::Proved(HashSet::from([id(&paths[1])])))
        );
        assert_eq!(
            HeldFiles::proved_at_top(pid, &[id(&paths[0])]),
            Some(HeldFiles::Proved(both))
        );
        assert_eq!(HeldFiles::proved_at_top(pid, &[id(&paths[2])]), None);
        holder.kill().unwrap();
        holder.wait().unwrap();

        let mut gapped = std::process::Command::new("sh")
            .arg("-c")
            .arg("exec 9<>\"$1\" && flock -x 9 && echo ready && exec sleep 60")
            .arg("sh")
            .arg(&paths[0])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut ready = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(gapped.stdout.take().unwrap()),
            &mut ready,
        )
        .unwrap();
        assert_eq!(ready.trim(), "ready");
        let pid = gapped.id();
        assert_eq!(HeldFiles::proved_at_top(pid, &[id(&paths[0])]), None);
        assert_eq!(
            HeldFiles::searched(pid, &[id(&paths[0])]),
            Some(HeldFiles::Proved(HashSet::from([id(&paths[0])])))
        );
        gapped.kill().unwrap();
        gapped.wait().unwrap();
        assert_eq!(
            HeldFiles::proved_at_top(u32::MAX - 7, &[id(&paths[0])]),
            None
        );
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

    /// A hinted fd proves a hold only by what its fdinfo shows now: the
    /// lock its open file description holds on one of the files asked
    /// about — through a duplicate of the fd too — and nothing through an
    /// fd on another file, a closed one, or one whose number now names
    /// another file (hints go stale).
    #[test]
    fn a_hinted_fd_proves_only_the_lock_its_fdinfo_shows_now() {
        let me = std::process::id();
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a.lock"), dir.path().join("b.lock"));
        let locked = std::fs::File::create(&a).unwrap();
        let other = std::fs::File::create(&b).unwrap();
        let (id_a, id_b) = (FileId::of(&a).unwrap(), FileId::of(&b).unwrap());
        // SAFETY: a valid open fd for the duration of the call.
        assert_eq!(unsafe { libc::flock(locked.as_raw_fd(), libc::LOCK_EX) }, 0);
        let (fd_a, fd_b) = (locked.as_raw_fd(), other.as_raw_fd());
        assert_eq!(
            HeldFiles::proved_through(me, &[fd_b, fd_a], &[id_a, id_b]),
            Some(HeldFiles::Proved(HashSet::from([id_a])))
        );
        assert_eq!(HeldFiles::proved_through(me, &[fd_b], &[id_a]), None);
        assert_eq!(HeldFiles::proved_through(me, &[fd_a], &[id_b]), None);
        let dup = locked.try_clone().unwrap();
        assert!(
            HeldFiles::proved_through(me, &[dup.as_raw_fd()], &[id_a])
                .is_some_and(|held| held.holds_any(&[id_a]))
        );
        drop(dup);
        drop(locked);
        assert_eq!(
            HeldFiles::proved_through(me, &[fd_a], &[id_a]),
            None,
            "closed"
        );
        // The number most likely taken by another file now (the lowest
        // free fd; a parallel test may take it instead: either way it
        // proves nothing of `a`).
        let _reused = std::fs::File::open(&b).unwrap();
        assert_eq!(
            HeldFiles::proved_through(me, &[fd_a], &[id_a]),
            None,
            "stale"
        );
    }

    #[test]
    fn a_pid_that_does_not_exist_holds_nothing() {
        assert_eq!(HeldFiles::of(u32::MAX - 7), HeldFiles::Gone);
    }
}
