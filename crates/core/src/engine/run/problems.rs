//! Scan problems kept current between sweeps: a foreign file, a symlink, a
//! FIFO or directory named like a lock file, an orphan announce is reported
//! when its event arrives, not only at the next sweep.
//!
//! Invariants: a path's problem is re-derived from the disk
//! ([`problem_at`]: `lstat` only, nothing opened) — except a claim file
//! held though unlinked, learned from `/proc` by a sweep and changed only
//! by the next one (an event at the path where it was, such as a new gate
//! created there, says nothing about the unlinked file); consumers get the whole
//! sorted list in one [`crate::engine::Delta::Problems`] per batch of changes, never one
//! per event (a burst of 10,000 foreign files is one delta).

use std::collections::BTreeSet;
use std::path::Path;

use crate::disk::scan::problem_at;
use crate::disk::{ScanProblem, ScanProblemKind};

/// The problems the engine knows, in the order consumers see them.
#[derive(Debug, Default)]
pub(super) struct Problems {
    pub(super) set: BTreeSet<ScanProblem>,
    /// Changed since the list was last taken ([`Problems::take_changed`]).
    dirty: bool,
}

impl Problems {
    /// True when a problem is recorded at `path`.
    pub(super) fn has(&self, path: &Path) -> bool {
        self.at(path).next().is_some()
    }

    /// The problems at `path` that its name makes ([`ScanProblemKind::is_on_disk`]).
    fn at<'a>(&'a self, path: &'a Path) -> impl Iterator<Item = &'a ScanProblem> + 'a {
        let first = ScanProblem {
            path: path.to_path_buf(),
            kind: ScanProblemKind::ForeignFile,
        };
        self.set
            .range(first..)
            .take_while(move |problem| problem.path == path)
            .filter(|problem| problem.kind.is_on_disk())
    }
}

impl Problems {
    /// Re-derives the problem at `path` (one that appeared, changed or went
    /// away).
    pub(super) fn recheck(&mut self, path: &Path) {
        let now = problem_at(path);
        let before: Vec<ScanProblem> = self.at(path).cloned().collect();
        if before.len() == usize::from(now.is_some())
            && before.first().map(|p| &p.kind) == now.as_ref()
        {
            return;
        }
        for problem in before {
            self.set.remove(&problem);
        }
        if let Some(kind) = now {
            let path = path.to_path_buf();
            self.set.insert(ScanProblem { path, kind });
        }
        self.dirty = true;
    }

    /// Records problems a partial scan (a new directory) found.
    pub(super) fn add(&mut self, found: Vec<ScanProblem>) {
        for problem in found {
            self.dirty |= self.set.insert(problem);
        }
    }

    /// Drops every problem at or below `dir` (it was removed).
    pub(super) fn forget_under(&mut self, dir: &Path) {
        let before = self.set.len();
        self.set
            .retain(|problem| !problem.path.starts_with(dir) || !problem.kind.is_on_disk());
        self.dirty |= self.set.len() != before;
    }

    /// Replaces every problem with a full scan's (sorted) findings.
    pub(super) fn replace(&mut self, found: Vec<ScanProblem>) {
        let found: BTreeSet<ScanProblem> = found.into_iter().collect();
        if found != self.set {
            self.set = found;
            self.dirty = true;
        }
    }

    /// The whole sorted list, if it changed since it was last taken.
    pub(super) fn take_changed(&mut self) -> Option<Vec<ScanProblem>> {
        std::mem::take(&mut self.dirty).then(|| self.set.iter().cloned().collect())
    }
}
