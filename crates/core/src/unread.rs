//! How many bytes wait unread in a pipe, a socket or an inotify fd.

use std::os::fd::{AsRawFd, BorrowedFd};

/// The bytes queued on `fd` and not read yet (`FIONREAD`).
pub(crate) fn unread_bytes(fd: BorrowedFd<'_>) -> std::io::Result<usize> {
    let mut unread: libc::c_int = 0;
    // SAFETY: FIONREAD writes one c_int through the pointer, which lives
    // for the call.
    if unsafe { libc::ioctl(fd.as_raw_fd(), libc::FIONREAD, &mut unread) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(usize::try_from(unread).unwrap_or(0))
}
