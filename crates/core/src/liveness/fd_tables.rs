//! The path a process opened a locked file by, found without walking all
//! of its fds for every file.
//!
//! The kernel's lock events name a file by device and inode and the
//! process that asked; the claim it belongs to is found from the path of
//! that process's fd on it (`/proc/<pid>/fd/N`, a magic link). Finding the
//! fd means a `stat` through every fd's link until one names the file: a
//! process that takes flocks on thousands of files one after another (a
//! foreign program on the state dir's filesystem) costs a walk of all its
//! fds per new file — quadratic. So each process's fds are remembered as
//! last seen (fd number → file), and a search `stat`s only the fds it has
//! not seen, then (only when the file is still not found: the process
//! closed it, or reused an fd number for it) every fd again.
//!
//! Invariants: an answer is always checked now (the fd named is `stat`ed
//! again and must still be on the file before its link is read), so a
//! stale memory can cost a walk but never give a wrong path; the memory
//! is bounded: at most [`MAX_PROCESSES`] processes (the least recently
//! searched is forgotten first) and the fds each had open.

use std::collections::{HashMap, VecDeque};
use std::os::fd::{AsRawFd, BorrowedFd};
use std::path::PathBuf;

use nix::fcntl::{AtFlags, OFlag};
use nix::sys::stat::Mode;

use super::proc_locks::FileId;

/// How many processes' fds are remembered.
pub const MAX_PROCESSES: usize = 64;

/// What the fds of the processes searched last were open on.
#[derive(Debug, Default)]
pub struct FdTables {
    /// Each process's fds, by number.
    by_pid: HashMap<u32, HashMap<i32, FileId>>,
    /// The processes remembered, least recently searched first.
    order: VecDeque<u32>,
    /// How many fds were `stat`ed, over every search (for tests).
    #[cfg(test)]
    stats: u64,
}

/// One process's fd directory, open for a search.
struct FdDir {
    dir: nix::dir::Dir,
    /// How many fds this search `stat`ed (for tests).
    #[cfg(test)]
    stats: std::cell::Cell<u64>,
}

impl FdDir {
    fn open(pid: u32) -> Option<Self> {
        let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC;
        let dir = nix::dir::Dir::open(format!("/proc/{pid}/fd").as_str(), flags, Mode::empty());
        dir.ok().map(|dir| Self {
            dir,
            #[cfg(test)]
            stats: std::cell::Cell::new(0),
        })
    }

    fn fd(&self) -> BorrowedFd<'_> {
        // SAFETY: the directory stays open as long as `self` lives.
        unsafe { BorrowedFd::borrow_raw(self.dir.as_raw_fd()) }
    }

    /// The fd numbers open now — but this directory's own, when a
    /// process reads its own fds (closed after the search, its number is
    /// the next file's).
    fn numbers(&mut self, own: bool) -> Vec<i32> {
        let mine = self.dir.as_raw_fd();
        self.dir
            .iter()
            .flatten()
            .filter_map(|entry| entry.file_name().to_str().ok()?.parse().ok())
            .filter(|&number| !(own && number == mine))
            .collect()
    }

    /// The file fd `number` is open on now (following its magic link).
    fn file_of(&self, number: i32) -> Option<FileId> {
        #[cfg(test)]
        self.stats.set(self.stats.get() + 1);
        nix::sys::stat::fstatat(self.fd(), number.to_string().as_str(), AtFlags::empty())
            .ok()
            .map(|stat| FileId::from_stat(&stat))
    }

    /// The path fd `number`'s link names.
    fn path_of(&self, number: i32) -> Option<PathBuf> {
        nix::fcntl::readlinkat(self.fd(), number.to_string().as_str())
            .ok()
            .map(PathBuf::from)
    }
}

impl FdTables {
    /// The path `pid` opened `file` by, as its fd's link names it — in
    /// `pid`'s own mount namespace and root: the caller compares it with
    /// what it sees at that path before trusting it. `None` when `pid` has
    /// no fd open on `file` now (or is gone, or its fds may not be read).
    pub fn path_of(&mut self, pid: u32, file: FileId) -> Option<PathBuf> {
        let Some(mut dir) = FdDir::open(pid) else {
            self.forget(pid);
            return None;
        };
        self.touch(pid);
        let fds = self.by_pid.entry(pid).or_default();
        // An fd remembered on it, still on it.
        let known: Vec<i32> = fds
            .iter()
            .filter(|(_, id)| **id == file)
            .map(|(number, _)| *number)
            .collect();
        for number in known {
            match dir.file_of(number) {
                Some(id) if id == file => {
                    if let Some(path) = dir.path_of(number) {
                        return Some(path);
                    }
                }
                Some(id) => {
                    fds.insert(number, id);
                }
                None => {
                    fds.remove(&number);
                }
            }
        }
        // The fds opened since the last search.
        let open = dir.numbers(pid == crate::liveness::process::own_pid());
        let still: std::collections::HashSet<i32> = open.iter().copied().collect();
        fds.retain(|number, _| still.contains(number));
        let mut found = None;
        for &number in &open {
            if fds.contains_key(&number) {
                continue;
            }
            if let Some(id) = dir.file_of(number) {
                fds.insert(number, id);
                if id == file && found.is_none() {
                    found = Some(number);
                }
            }
        }
        // Every fd again: a number seen before may have been closed and
        // opened again on this file since.
        if found.is_none() {
            for (&number, id) in fds.iter_mut() {
                if let Some(now) = dir.file_of(number) {
                    *id = now;
                    if now == file && found.is_none() {
                        found = Some(number);
                    }
                }
            }
        }
        #[cfg(test)]
        {
            self.stats += dir.stats.get();
        }
        found.and_then(|number| dir.path_of(number))
    }

    /// The fds `pid` had open on `file` when its fds were last looked at
    /// (a hint: they may have been closed, or reused, since).
    pub fn fds_on(&self, pid: u32, file: FileId) -> impl Iterator<Item = i32> + '_ {
        self.by_pid
            .get(&pid)
            .into_iter()
            .flatten()
            .filter(move |(_, on)| **on == file)
            .map(|(number, _)| *number)
    }

    /// Forgets `pid`'s fds (it is gone).
    fn forget(&mut self, pid: u32) {
        if self.by_pid.remove(&pid).is_some() {
            self.order.retain(|&seen| seen != pid);
        }
    }

    /// Makes `pid` the most recently searched, forgetting the least
    /// recently searched past [`MAX_PROCESSES`].
    fn touch(&mut self, pid: u32) {
        if let Some(at) = self.order.iter().position(|&seen| seen == pid) {
            self.order.remove(at);
        }
        self.order.push_back(pid);
        while self.order.len() > MAX_PROCESSES {
            if let Some(oldest) = self.order.pop_front() {
                self.by_pid.remove(&oldest);
            }
        }
    }

    /// How many fds are remembered, over every process (for tests).
    #[cfg(test)]
    fn remembered(&self) -> usize {
        self.by_pid.values().map(HashMap::len).sum()
    }
}

#[cfg(test)]
mod tests {
    use std::fs::File;
    use std::os::unix::fs::MetadataExt;

    use super::*;

    fn id_of(file: &File) -> FileId {
        FileId::from_metadata(&file.metadata().expect("metadata"))
    }

    /// A process that opens files one after another (a shell here, so
    /// that no other test's fds are among its own), each searched for
    /// as it is locked: every fd is `stat`ed about once, not once per
    /// file (a walk of every fd per file would be about 300 × 150
    /// stats).
    #[test]
    fn files_opened_one_by_one_cost_a_stat_each_not_a_walk_each() {
        use std::io::{BufRead, Write};
        let dir = tempfile::tempdir().expect("tempdir");
        let mut shell = std::process::Command::new("bash")
            .arg("-c")
            .arg(r#"while read n; do exec {fd}>"$0/f$n"; echo ok; done"#)
            .arg(dir.path())
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("bash");
        let pid = shell.id();
        let mut input = shell.stdin.take().expect("stdin");
        let mut output = std::io::BufReader::new(shell.stdout.take().expect("stdout")).lines();
        let mut tables = FdTables::default();
        const FILES: u64 = 300;
        for i in 0..FILES {
            writeln!(input, "{i}").expect("ask");
            assert_eq!(output.next().expect("a line").expect("read"), "ok");
            let path = dir.path().join(format!("f{i}"));
            let id = FileId::from_metadata(&std::fs::metadata(&path).expect("stat"));
            assert_eq!(tables.path_of(pid, id), Some(path), "file {i}");
        }
        drop(input);
        let _ = shell.wait();
        // The shell's own few fds once, then one stat per new file.
        assert!(tables.stats < 2 * FILES + 50, "{} stats", tables.stats);
    }

    /// Files opened one after another are each found, by the path they
    /// were opened by; one closed is not, and one opened again on a
    /// reused fd number is found again.
    #[test]
    fn each_new_file_is_found_by_its_path_and_a_closed_one_is_not() {
        let dir = tempfile::tempdir().expect("tempdir");
        let me = std::process::id();
        let mut tables = FdTables::default();
        let mut open = Vec::new();
        for i in 0..50 {
            let path = dir.path().join(format!("f{i}"));
            let file = File::create(&path).expect("create");
            let id = id_of(&file);
            assert_eq!(tables.path_of(me, id), Some(path.clone()), "file {i}");
            open.push((path, file, id));
        }
        assert!(tables.remembered() >= 50, "{}", tables.remembered());
        let (_, closed, closed_id) = open.remove(10);
        drop(closed);
        assert_eq!(tables.path_of(me, closed_id), None, "closed: no fd on it");
        // Its fd number is likely reused by the next open.
        let path = dir.path().join("again");
        let again = File::create(&path).expect("create");
        assert_eq!(tables.path_of(me, id_of(&again)), Some(path));
        // The ones remembered are still found.
        for (path, file, id) in &open {
            assert_eq!(tables.path_of(me, *id), Some(path.clone()));
            assert_eq!(file.metadata().expect("metadata").ino(), id.inode);
        }
    }

    #[test]
    fn a_gone_process_is_forgotten_and_the_memory_is_bounded() {
        let mut tables = FdTables::default();
        let file = tempfile::tempfile().expect("tempfile");
        let id = id_of(&file);
        // PID 0 has no /proc entry.
        assert_eq!(tables.path_of(0, id), None);
        assert!(tables.by_pid.is_empty());
        for pid in 0..(MAX_PROCESSES as u32 + 10) {
            tables.touch(pid);
            tables.by_pid.entry(pid).or_default();
        }
        assert_eq!(tables.order.len(), MAX_PROCESSES);
        assert_eq!(tables.by_pid.len(), MAX_PROCESSES);
        assert_eq!(tables.order.front(), Some(&10), "the oldest went first");
    }
}
