//! How liveness and holders are learned: a probe per claim (acquire or
//! passive, through [`crate::locks`] and the SDK), holder PIDs and waiters
//! from one parse of `/proc/locks`, process details from `/proc/<pid>`,
//! claim files held though unlinked ([`unlinked`]); every flock as it
//! happens from the kernel's own tracepoint ([`kernel`]), without
//! `/proc/locks`.
//!
//! Invariants: a probe never holds a key longer than the probe itself and
//! never waits unboundedly; `/proc/locks` is read once per batch, never
//! per key (it stalls every flock on the machine while it is read).

pub mod annotate;
pub mod bulk;
pub(crate) mod claims_at;
pub mod cpu;
pub mod dir_probe;
pub mod fd_tables;
pub mod fdinfo;
pub mod kernel;
pub mod lock_free;
pub mod probe;
pub mod probe_mode;
pub mod probed;
pub mod proc_locks;
pub(crate) mod proc_read;
pub mod process;
pub mod shared_probe;
pub mod snapshot;
pub mod state;
pub mod unlinked;
pub mod verify;

pub(crate) use cpu::CpuClock;
pub use lock_free::ProbeChoice;
pub use probe::{ProbeMode, Prober};
pub use process::ProcessInfo;
pub use state::{HoldersNote, KeyState, Liveness, RefusedBy, RefusedTries, WaitKind, Waiting};
