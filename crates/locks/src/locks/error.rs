//! Errors of the `locks` module: every variant names the offending input
//! and why it was refused, in one human line.

/// Why a family member could not become a lock coordinate.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LocksError {
    /// The agent_instance_hierarchy would not map to a path strictly under
    /// the instances root.
    #[error("invalid agent instance hierarchy {aih:?}: {reason}")]
    InvalidAih {
        /// The AIH as given.
        aih: String,
        /// Which rule it broke.
        reason: &'static str,
    },
    /// A member is not held by anyone, yet cannot be taken (no write
    /// access, a file where a directory should be, …).
    #[error("{member} cannot be taken: {reason}")]
    Unavailable {
        /// `tag "x"` / `instance "a/b"`.
        member: String,
        /// What is in the way, as found on disk.
        reason: String,
    },
    /// The tag name cannot be a lockfile key.
    #[error("invalid tag {tag:?}: {reason}")]
    InvalidTag {
        /// The tag as given.
        tag: String,
        /// Which rule it broke.
        reason: &'static str,
    },
}
