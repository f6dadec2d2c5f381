//! What is on disk: where the state dir is, how a claim's files are named
//! ([`LockKey`]), and a walk of `<state>/locks` into claims and problems.
//!
//! Invariants: nothing here takes, tests or releases a lock (that is
//! [`crate::locks`] and [`crate::liveness`]); symlinks are never followed;
//! every name under the root is either a claim or a reported
//! [`ScanProblem`].

pub mod confine;
pub mod key;
pub mod mounts;
pub mod problem;
pub mod scan;
pub mod state_dir;

pub use key::{ClaimFile, DirNamer, KeyKind, LockKey};
pub use problem::{ScanProblem, ScanProblemKind};
pub use scan::{ScanReport, scan};
