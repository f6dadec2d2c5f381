//! What a scan reports besides claims: every name under the locks root
//! that is not a well-formed claim. Invariant: never fatal, never dropped.

use std::path::PathBuf;

/// Something under the locks root that is not a well-formed claim. Never
/// fatal, never silently dropped.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
pub struct ScanProblem {
    /// Where.
    #[serde(serialize_with = "crate::time_format::lossy_path")]
    pub path: PathBuf,
    /// What is wrong with it.
    pub kind: ScanProblemKind,
}

/// The kinds of [`ScanProblem`].
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(tag = "problem", content = "detail", rename_all = "snake_case")]
pub enum ScanProblemKind {
    /// A file that is neither a gate nor an announce.
    ForeignFile,
    /// A `*.lock` name whose escape does not decode.
    MalformedEscape,
    /// A name that is not UTF-8.
    NonUtf8Name,
    /// A symlink (never followed).
    Symlink,
    /// A directory that could not be read, with the OS error.
    Unreadable(String),
    /// An announce file without its gate.
    OrphanAnnounce,
    /// Something other than a regular file named like a gate or announce
    /// (`a FIFO`, `a directory`, …): never opened, never a claim.
    NotRegular(String),
}

impl ScanProblemKind {
    /// Short human description.
    pub fn describe(&self) -> String {
        match self {
            ScanProblemKind::ForeignFile => "foreign file".into(),
            ScanProblemKind::MalformedEscape => "malformed escape in lock name".into(),
            ScanProblemKind::NonUtf8Name => "name is not UTF-8".into(),
            ScanProblemKind::Symlink => "symlink (not followed)".into(),
            ScanProblemKind::Unreadable(error) => format!("unreadable: {error}"),
            ScanProblemKind::OrphanAnnounce => "announce file without a gate".into(),
            ScanProblemKind::NotRegular(what) => format!("{what} named like a lock file"),
        }
    }
}
