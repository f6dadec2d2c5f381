//! What a scan reports besides claims: every name under the locks root
//! that is not a well-formed claim — and every claim file that was
//! unlinked from under the root while a live process still holds its lock
//! ([`ScanProblemKind::HeldUnlinked`]). Invariant: never fatal, never
//! dropped.
//!
//! Why a held unlinked file is a problem here rather than a key state: its
//! path no longer leads to the locked file, so no probe of the key can see
//! the lock (the key reads free, or is gone) — it is a fact about the tree
//! going wrong, like an orphan announce, and every consumer of problems
//! (the TUI's problems list, `snapshot --json`, `serve`) shows it with no
//! new plumbing (`watch` prints no problem of any kind yet). Unlike the
//! other kinds it is learned from `/proc` (`/proc/locks`,
//! `/proc/<pid>/fd`), not from the name at its path: see
//! [`ScanProblemKind::is_on_disk`].

use std::path::PathBuf;

use crate::disk::key::{ClaimFile, KeyKind};

/// Something under the locks root that is not a well-formed claim. Never
/// fatal, never silently dropped.
#[derive(
    Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
pub struct ScanProblem {
    /// Where.
    #[serde(serialize_with = "crate::time_format::lossy_path")]
    pub path: PathBuf,
    /// What is wrong with it.
    pub kind: ScanProblemKind,
}

/// The kinds of [`ScanProblem`].
#[derive(
    Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
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
    /// A live process holds the lock of a claim file that was unlinked
    /// from its path (the SDK's create race): the path's problem is at
    /// where the file was.
    HeldUnlinked(HeldUnlinked),
}

/// A claim file a live process holds though it is no longer at its path.
/// Invariant: every field was read from `/proc` at one sweep: `pid`'s fd
/// named `<locks root>/…/<file> (deleted)`, its inode was the one
/// `/proc/locks` showed `pid` holding exclusively.
#[derive(
    Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
pub struct HeldUnlinked {
    /// The holder (the PID `/proc/locks` names).
    pub pid: u32,
    /// Its command line (shell-quoted), when readable.
    pub cmdline: Option<String>,
    /// The claim's kind, decoded from the unlinked file's name.
    pub kind: KeyKind,
    /// The claim's name (AIH, tag, or path under the root).
    pub name: String,
    /// Which of the claim's files was unlinked.
    pub file: ClaimFile,
}

impl HeldUnlinked {
    /// The one-line explanation: only what is known.
    pub fn describe(&self) -> String {
        let command = self.cmdline.as_deref().unwrap_or("no command line");
        format!(
            "pid {} ({command}) holds the {file} of {}, which was unlinked: the key looks \
             free (no probe sees that lock), yet this process believes it holds it, and \
             another can lock a new {file} at the same path at the same time (SDK create race)",
            self.pid,
            crate::disk::key::label(self.kind, &self.name),
            file = self.file.as_str(),
        )
    }
}

impl ScanProblemKind {
    /// Short human description.
    pub fn describe(&self) -> String {
        match self {
            ScanProblemKind::ForeignFile => "foreign file".into(),
            ScanProblemKind::MalformedEscape => "malformed escape in lock name".into(),
            ScanProblemKind::NonUtf8Name => {
                "name is not UTF-8: no agent lock is named so (a directory is not scanned)".into()
            }
            ScanProblemKind::Symlink => "symlink (not followed)".into(),
            ScanProblemKind::Unreadable(error) => format!("unreadable: {error}"),
            ScanProblemKind::OrphanAnnounce => "announce file without a gate".into(),
            ScanProblemKind::NotRegular(what) => {
                format!("{what} named like a lock file (never opened)")
            }
            ScanProblemKind::HeldUnlinked(held) => held.describe(),
        }
    }

    /// True when the problem is what the name at its path is (a scan of
    /// the directory re-derives it); false for one learned from `/proc`
    /// ([`ScanProblemKind::HeldUnlinked`]), which only a sweep re-derives —
    /// an event at its path says nothing about it.
    pub(crate) fn is_on_disk(&self) -> bool {
        !matches!(self, ScanProblemKind::HeldUnlinked(_))
    }
}
