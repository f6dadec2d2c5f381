//! Reading small `/proc` files whole, with the fewest system calls: one
//! `openat`, `read`s into a buffer with room for the file (a page, grown
//! while it fills), the `read` that sees the end, one `close`.
//! `std::fs::read` and procfs' readers add an `fstat` and an `lseek` per
//! file and begin with 32-byte reads (a `/proc` file's size is 0); under
//! churn a monitor reads a few such files per new holder, and those calls
//! were a tenth of its system calls.
//!
//! Invariant: the files of one process are read relative to one open
//! `/proc/<pid>` directory ([`ProcDir`]), so they describe the same
//! process even if the PID is reused meanwhile (reads of a directory
//! whose process is gone fail, they never read the new one's).

use std::os::fd::{AsFd, OwnedFd};

use nix::errno::Errno;
use nix::fcntl::{OFlag, open, openat};
use nix::sys::stat::Mode;

/// An open `/proc/<pid>` directory.
pub(crate) struct ProcDir(OwnedFd);

impl ProcDir {
    /// Opens `/proc/<pid>` (`O_PATH`: nothing is read yet).
    pub(crate) fn open(pid: u32) -> nix::Result<Self> {
        let flags = OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC;
        open(format!("/proc/{pid}").as_str(), flags, Mode::empty()).map(Self)
    }

    /// The whole of its file `name` (`stat`, `cmdline`, `cgroup`, …).
    pub(crate) fn read(&self, name: &str) -> nix::Result<Vec<u8>> {
        let file = openat(
            self.0.as_fd(),
            name,
            OFlag::O_RDONLY | OFlag::O_CLOEXEC,
            Mode::empty(),
        )?;
        read_whole(file)
    }
}

/// The whole of `/proc/<pid>/<name>`, opened by its path (one file of a
/// process: nothing to keep consistent with another).
pub(crate) fn read_file(pid: u32, name: &str) -> nix::Result<Vec<u8>> {
    let path = format!("/proc/{pid}/{name}");
    let file = open(
        path.as_str(),
        OFlag::O_RDONLY | OFlag::O_CLOEXEC,
        Mode::empty(),
    )?;
    read_whole(file)
}

/// Reads `file` to its end (a `read` that returns nothing).
fn read_whole(file: OwnedFd) -> nix::Result<Vec<u8>> {
    let mut buffer = vec![0u8; 4096];
    let mut len = 0;
    loop {
        if len == buffer.len() {
            buffer.resize(len * 2, 0);
        }
        match nix::unistd::read(&file, &mut buffer[len..]) {
            Ok(0) => break,
            Ok(got) => len += got,
            Err(Errno::EINTR) => {}
            Err(error) => return Err(error),
        }
    }
    buffer.truncate(len);
    Ok(buffer)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_longer_than_a_page_is_read_whole() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("long");
        let text: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
        std::fs::write(&path, &text).unwrap();
        let file = open(&path, OFlag::O_RDONLY | OFlag::O_CLOEXEC, Mode::empty()).unwrap();
        assert_eq!(read_whole(file).unwrap(), text);
    }

    #[test]
    fn a_process_file_reads_as_std_reads_it() {
        let me = std::process::id();
        let dir = ProcDir::open(me).unwrap();
        let cmdline = std::fs::read(format!("/proc/{me}/cmdline")).unwrap();
        assert_eq!(dir.read("cmdline").unwrap(), cmdline);
        assert_eq!(read_file(me, "cmdline").unwrap(), cmdline);
    }

    #[test]
    fn a_gone_process_is_an_error() {
        assert!(ProcDir::open(u32::MAX - 7).is_err());
        assert!(read_file(u32::MAX - 7, "stat").is_err());
    }
}
