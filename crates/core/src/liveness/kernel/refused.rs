//! Why the kernel's lock events cannot be read: one typed reason per
//! cause, each shown as one line that names what is missing and, where
//! there is one, what would make it work.
//!
//! Invariant: every `Display` is a single line (no newline), fit for one
//! line on stderr or on screen.

use std::path::PathBuf;

use nix::errno::Errno;

/// The reason [`super::KernelLockEvents`] could not be opened, or could
/// not take a new device filter.
#[derive(Debug, thiserror::Error)]
pub enum Refused {
    /// Neither tracefs location holds an `events` directory.
    #[error(
        "tracefs is not mounted (no events in /sys/kernel/tracing nor /sys/kernel/debug/tracing); \
         as root: mount -t tracefs nodev /sys/kernel/tracing"
    )]
    TracefsNotMounted,
    /// tracefs could not be looked into (it is root's alone, mode 0700).
    #[error(
        "cannot look in {}: {error} (needs root, or pass the tracepoint id)",
        path.display()
    )]
    TracefsUnreadable {
        /// The directory that refused.
        path: PathBuf,
        /// Why.
        error: std::io::Error,
    },
    /// tracefs is there, the tracepoint is not (a kernel built without it).
    #[error(
        "this kernel has no filelock:flock_lock_inode tracepoint ({} is missing)",
        path.display()
    )]
    TracepointMissing {
        /// The event directory that should be there.
        path: PathBuf,
    },
    /// The tracepoint's `id` file could not be read (it is 0440 root).
    #[error(
        "cannot read the tracepoint id from {}: {error} (needs root, or pass the id)",
        path.display()
    )]
    IdUnreadable {
        /// The `id` file.
        path: PathBuf,
        /// Why.
        error: std::io::Error,
    },
    /// The `format` file lacks a field the reader needs, or says it badly.
    #[error("{} is not the flock_lock_inode format expected: {why}", path.display())]
    FormatUnexpected {
        /// The `format` file.
        path: PathBuf,
        /// What is wrong with it.
        why: String,
    },
    /// The id given is another tracepoint's.
    #[error("tracepoint id {given} is not filelock:flock_lock_inode's (its id is {actual})")]
    WrongId {
        /// The id the caller gave.
        given: u64,
        /// The id tracefs says.
        actual: u64,
    },
    /// `perf_event_open` knows no tracepoint by this id.
    #[error("the kernel has no tracepoint with id {id}")]
    NoSuchTracepoint {
        /// The id asked for.
        id: u64,
    },
    /// `perf_event_open` said EACCES or EPERM.
    #[error(
        "not permitted to record kernel events (perf_event_open: {errno}): needs root or CAP_PERFMON"
    )]
    NotPermitted {
        /// EACCES or EPERM.
        errno: Errno,
    },
    /// The online CPU list could not be read or understood.
    #[error("cannot learn the online CPUs from {}: {why}", path.display())]
    CpusUnknown {
        /// The file read.
        path: PathBuf,
        /// What went wrong.
        why: String,
    },
    /// The kernel's `dev_t` holds a 12-bit major and a 20-bit minor.
    #[error(
        "device {major}:{minor} cannot be filtered on (the kernel's dev_t has majors below 4096 and minors below 1048576)"
    )]
    DeviceOutOfRange {
        /// Device major number.
        major: u32,
        /// Device minor number.
        minor: u32,
    },
    /// `PERF_EVENT_IOC_SET_FILTER` failed.
    #[error("the kernel rejected the device filter \"{filter}\": {errno}")]
    FilterRejected {
        /// The filter text.
        filter: String,
        /// What the ioctl said.
        errno: Errno,
    },
    /// Not even a one-page ring could be mapped.
    #[error(
        "no ring buffer could be mapped for CPU {cpu}, not even one page: {errno} \
         (raise `ulimit -l` or /proc/sys/kernel/perf_event_mlock_kb)"
    )]
    RingUnavailable {
        /// The CPU whose ring failed.
        cpu: u32,
        /// What mmap said.
        errno: Errno,
    },
    /// Any other failure of a system call, named.
    #[error("{call} failed on CPU {cpu}: {errno}")]
    Failed {
        /// The call that failed.
        call: &'static str,
        /// The CPU it was for.
        cpu: u32,
        /// What it said.
        errno: Errno,
    },
}
