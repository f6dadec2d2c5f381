//! Walk `<state>/locks` into claims.
//!
//! Invariants: symlinks are never followed; nothing under the root is
//! silently dropped — every name that is not a well-formed gate or announce
//! becomes a [`ScanProblem`]; an unreadable directory is a problem, not an
//! error. Only a missing or unreadable locks root fails the scan.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use super::{ScanProblem, ScanProblemKind};
use crate::disk::key::{DirNamer, LockKey};
use crate::locks::escape::{ANNOUNCE_SUFFIX, GATE_SUFFIX, unescape};
use crate::locks::locks_root;

/// Every claim and every problem found under a directory.
#[derive(Debug, Default, Clone)]
pub struct ScanReport {
    /// One entry per gate file, in walk order.
    pub keys: Vec<LockKey>,
    /// Everything that is not a well-formed claim.
    pub problems: Vec<ScanProblem>,
}

/// Scans the whole locks root of `state_dir`. Fails only if the root itself
/// cannot be read (e.g. it does not exist).
pub fn scan(state_dir: &Path) -> std::io::Result<ScanReport> {
    let root = locks_root(state_dir);
    std::fs::read_dir(&root)?;
    Ok(scan_subtree(state_dir, &root))
}

/// Scans `dir` and everything below it (a subtree of the locks root).
/// A missing `dir` yields an empty report.
pub fn scan_subtree(state_dir: &Path, dir: &Path) -> ScanReport {
    let mut report = ScanReport::default();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(dir) = stack.pop() {
        scan_one_dir(state_dir, &dir, &mut report, &mut stack);
    }
    report
}

fn scan_one_dir(state_dir: &Path, dir: &Path, report: &mut ScanReport, stack: &mut Vec<PathBuf>) {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return,
        Err(error) => {
            report.problems.push(ScanProblem {
                path: dir.to_path_buf(),
                kind: ScanProblemKind::Unreadable(error.to_string()),
            });
            return;
        }
    };
    let namer = DirNamer::new(state_dir, dir);
    let mut gates: HashSet<String> = HashSet::new();
    let mut announces: Vec<(String, PathBuf)> = Vec::new();
    for entry in entries {
        let Ok(entry) = entry else { continue };
        let path = entry.path();
        let problem = |kind| ScanProblem {
            path: path.clone(),
            kind,
        };
        let Ok(file_type) = entry.file_type() else {
            continue;
        };
        if file_type.is_symlink() {
            report.problems.push(problem(ScanProblemKind::Symlink));
            continue;
        }
        if file_type.is_dir() {
            if entry.file_name().to_str().is_none() {
                // Reported, and still walked: the claims inside are real,
                // only their names are shown lossily.
                report.problems.push(problem(ScanProblemKind::NonUtf8Name));
            }
            stack.push(path);
            continue;
        }
        let Some(name) = entry.file_name().to_str().map(str::to_owned) else {
            report.problems.push(problem(ScanProblemKind::NonUtf8Name));
            continue;
        };
        if let Some(stem) = name.strip_suffix(ANNOUNCE_SUFFIX) {
            announces.push((stem.to_string(), path));
        } else if let Some(stem) = name.strip_suffix(GATE_SUFFIX) {
            match unescape(stem) {
                Some(key) => {
                    gates.insert(stem.to_string());
                    report.keys.push(namer.key(&key));
                }
                None => report
                    .problems
                    .push(problem(ScanProblemKind::MalformedEscape)),
            }
        } else {
            report.problems.push(problem(ScanProblemKind::ForeignFile));
        }
    }
    for (stem, path) in announces {
        if !gates.contains(&stem) {
            let kind = if unescape(&stem).is_some() {
                ScanProblemKind::OrphanAnnounce
            } else {
                ScanProblemKind::MalformedEscape
            };
            report.problems.push(ScanProblem { path, kind });
        }
    }
}

/// [`scan`] off the async threads (a scan of 100k keys takes a while).
pub async fn scan_root(state_dir: &Path) -> std::io::Result<ScanReport> {
    let state_dir = state_dir.to_path_buf();
    tokio::task::spawn_blocking(move || scan(&state_dir))
        .await
        .map_err(std::io::Error::other)?
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::disk::key::KeyKind;
    use std::fs;

    fn touch(path: &Path) {
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, b"").unwrap();
    }

    fn names(report: &ScanReport) -> Vec<(KeyKind, String)> {
        let mut names: Vec<_> = report
            .keys
            .iter()
            .map(|k| (k.kind, k.name.clone()))
            .collect();
        names.sort();
        names
    }

    #[test]
    fn instances_tags_and_other_are_named() {
        let state = tempfile::tempdir().unwrap();
        let locks = state.path().join("locks");
        touch(&locks.join("agents/instances/cli/daemon/abc-1.lock"));
        touch(&locks.join("agents/instances/cli/daemon/abc-1.live.lock"));
        touch(&locks.join("agents/instances/cli/daemon.lock"));
        touch(&locks.join("agents/instances/solo.lock"));
        touch(&locks.join("agents/tags/my%20tag%2Ev1.lock"));
        touch(&locks.join("plugins-daemon/main.lock"));
        let report = scan(state.path()).unwrap();
        assert_eq!(
            names(&report),
            vec![
                (KeyKind::Instance, "cli/daemon".into()),
                (KeyKind::Instance, "cli/daemon/abc-1".into()),
                (KeyKind::Instance, "solo".into()),
                (KeyKind::Tag, "my tag.v1".into()),
                (KeyKind::Other, "plugins-daemon/main".into()),
            ]
        );
        assert!(report.problems.is_empty(), "{:?}", report.problems);
    }

    #[test]
    fn foreign_names_are_reported_not_dropped() {
        let state = tempfile::tempdir().unwrap();
        let tags = state.path().join("locks/agents/tags");
        touch(&tags.join("README.txt"));
        touch(&tags.join("bad%ZZ.lock"));
        touch(&tags.join("a.b.lock"));
        touch(&tags.join("lonely.live.lock"));
        std::os::unix::fs::symlink("/etc", tags.join("link")).unwrap();
        use std::os::unix::ffi::OsStrExt;
        touch(&tags.join(std::ffi::OsStr::from_bytes(b"\xff.lock")));
        let report = scan(state.path()).unwrap();
        assert!(report.keys.is_empty());
        let mut kinds: Vec<_> = report.problems.iter().map(|p| p.kind.clone()).collect();
        kinds.sort();
        assert_eq!(
            kinds,
            vec![
                ScanProblemKind::ForeignFile,
                ScanProblemKind::MalformedEscape,
                ScanProblemKind::MalformedEscape,
                ScanProblemKind::NonUtf8Name,
                ScanProblemKind::Symlink,
                ScanProblemKind::OrphanAnnounce,
            ]
        );
    }

    #[test]
    fn a_missing_root_is_an_error_but_a_missing_subtree_is_empty() {
        let state = tempfile::tempdir().unwrap();
        assert!(scan(state.path()).is_err());
        assert!(
            scan_subtree(state.path(), &state.path().join("nope"))
                .keys
                .is_empty()
        );
    }
}
