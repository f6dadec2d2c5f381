//! Claim files held though unlinked: a live process holds the flock of a
//! gate or announce that is no longer at its path under `<state>/locks`.
//! The SDK 2.2.16 create race leaves exactly that behind
//! (`try_create_locked` unlinks a new file whose lock it lost to a process
//! that opened it in between): no probe of the key can see the lock, so the
//! key reads free (or is gone) while that process believes it holds it.
//!
//! How: `/proc/locks` (read by the caller, once) lists every flock by
//! (device, inode) and PID. A file on the locks root's device that a PID
//! holds exclusively, whose inode is no claim file the scan found, is a
//! candidate; for those PIDs only, `readlink /proc/<pid>/fd/*` looks for a
//! target `<locks root>/…/<name>.lock (deleted)`, and that fd's `stat`
//! (through the `/proc` link: the open file itself) must show the
//! candidate's inode.
//!
//! Invariants: reads only — `read_dir`, `readlink` and `stat` of `/proc`,
//! one `canonicalize` and `stat` of the root: no lock file opened, no lock
//! taken, nothing written, so it holds under `--read-only`. An fd directory
//! that cannot be read (another user's process: EACCES; a process gone) is
//! skipped silently. Cost: nothing per key; one `readlink` per fd of the
//! candidate PIDs only, never of every holder. Not seen: a lock kept by a
//! forked child after the process that took it died (`/proc/locks` names
//! the dead PID, which has no fds), and holders outside this PID namespace.

use std::collections::{HashMap, HashSet};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use crate::disk::key::{ClaimFile, LockKey, claim_named};
use crate::disk::problem::{HeldUnlinked, ScanProblem, ScanProblemKind};
use crate::liveness::proc_locks::{FileId, LockIndex};
use crate::liveness::process::ProcessInfo;
use crate::locks::locks_root;

/// What the kernel appends to an fd's link target once its file was
/// unlinked.
pub(crate) const DELETED_SUFFIX: &[u8] = b" (deleted)";

/// The inodes of the claim files on disk, as a scan found them. Invariant:
/// sorted and without duplicates (a lookup is a binary search).
#[derive(Debug, Default, Clone)]
pub struct KnownInodes(Vec<u64>);

impl KnownInodes {
    /// From a scan's [`crate::disk::ScanReport::claim_inodes`].
    pub fn new(mut inodes: Vec<u64>) -> Self {
        inodes.sort_unstable();
        inodes.dedup();
        Self(inodes)
    }

    /// True when `inode` is a claim file on disk.
    pub fn contains(&self, inode: u64) -> bool {
        self.0.binary_search(&inode).is_ok()
    }
}

/// Every claim file under `state_dir`'s locks root that a live process
/// holds exclusively though it was unlinked, as problems at the path where
/// it was (sorted). `index` is one `/proc/locks` read; `known` the claim
/// files of a scan made before it (a file created since is a candidate,
/// then dismissed: its fd target is no deleted file).
pub fn find(state_dir: &Path, index: &LockIndex, known: &KnownInodes) -> Vec<ScanProblem> {
    let root = locks_root(state_dir);
    let Ok(canonical) = std::fs::canonicalize(&root) else {
        return Vec::new();
    };
    let Ok(root_meta) = std::fs::metadata(&canonical) else {
        return Vec::new();
    };
    let device = FileId::from_metadata(&root_meta);
    let mut wanted: HashMap<u32, HashSet<FileId>> = HashMap::new();
    for (file, holders) in index.held_on(device) {
        if known.contains(file.inode) {
            continue;
        }
        for &pid in holders {
            wanted.entry(pid).or_default().insert(file);
        }
    }
    let mut found: Vec<ScanProblem> = wanted
        .into_iter()
        .flat_map(|(pid, files)| held_by(state_dir, &canonical, pid, &files))
        .collect();
    found.sort();
    found.dedup();
    found
}

/// The unlinked claim files among `files` that `pid` has open.
fn held_by(
    state_dir: &Path,
    canonical_root: &Path,
    pid: u32,
    files: &HashSet<FileId>,
) -> Vec<ScanProblem> {
    let fds = Path::new("/proc").join(pid.to_string()).join("fd");
    let Ok(entries) = std::fs::read_dir(&fds) else {
        return Vec::new();
    };
    let mut found = Vec::new();
    let mut cmdline: Option<Option<String>> = None;
    for entry in entries.flatten() {
        let link = entry.path();
        let Ok(target) = std::fs::read_link(&link) else {
            continue;
        };
        let Some((key, file, at)) = unlinked_claim(state_dir, canonical_root, &target) else {
            continue;
        };
        let Ok(open) = std::fs::metadata(&link) else {
            continue;
        };
        let id = FileId::from_metadata(&open);
        // A file really named `x.lock (deleted)` is still on disk: no claim.
        if !files.contains(&id) || FileId::of(&target).is_ok_and(|there| there == id) {
            continue;
        }
        let cmdline = cmdline
            .get_or_insert_with(|| ProcessInfo::of(pid).cmdline)
            .clone();
        found.push(ScanProblem {
            path: at,
            kind: ScanProblemKind::HeldUnlinked(HeldUnlinked {
                pid,
                cmdline,
                kind: key.kind(),
                name: key.name().to_string(),
                file,
            }),
        });
    }
    found
}

/// The claim an fd's link `target` names when it is a claim file unlinked
/// from under the locks root (`canonical_root`, as the kernel spells
/// paths): the claim, which file, and where it was — spelled under
/// `state_dir`'s locks root as every other path locktop reports. `None`
/// for a target without the ` (deleted)` suffix, outside the root, or whose
/// name is no claim file's (non-UTF-8, a malformed escape, no `.lock`).
pub(crate) fn unlinked_claim(
    state_dir: &Path,
    canonical_root: &Path,
    target: &Path,
) -> Option<(LockKey, ClaimFile, PathBuf)> {
    let bytes = target.as_os_str().as_bytes();
    let path = Path::new(OsStr::from_bytes(bytes.strip_suffix(DELETED_SUFFIX)?));
    let relative = path.strip_prefix(canonical_root).ok()?;
    if relative
        .components()
        .any(|part| !matches!(part, Component::Normal(_)))
    {
        return None;
    }
    let at = locks_root(state_dir).join(relative);
    let (key, file) = claim_named(state_dir, &at)?;
    Some((key, file, at))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::disk::key::KeyKind;
    use std::os::unix::ffi::OsStringExt;

    fn parse(target: &[u8]) -> Option<(KeyKind, String, ClaimFile, PathBuf)> {
        let target = PathBuf::from(std::ffi::OsString::from_vec(target.to_vec()));
        unlinked_claim(Path::new("/s"), Path::new("/real/s/locks"), &target)
            .map(|(key, file, at)| (key.kind(), key.name().to_string(), file, at))
    }

    #[test]
    fn a_deleted_gate_or_announce_names_its_claim_where_it_was() {
        assert_eq!(
            parse(b"/real/s/locks/agents/tags/my%20tag.lock (deleted)"),
            Some((
                KeyKind::Tag,
                "my tag".into(),
                ClaimFile::Gate,
                "/s/locks/agents/tags/my%20tag.lock".into()
            ))
        );
        assert_eq!(
            parse(b"/real/s/locks/agents/instances/a/b/c.live.lock (deleted)"),
            Some((
                KeyKind::Instance,
                "a/b/c".into(),
                ClaimFile::Announce,
                "/s/locks/agents/instances/a/b/c.live.lock".into()
            ))
        );
        let other = parse(b"/real/s/locks/plugins-daemon/main.lock (deleted)").unwrap();
        assert_eq!(
            (other.0, other.1.as_str()),
            (KeyKind::Other, "plugins-daemon/main")
        );
    }

    #[test]
    fn a_file_still_linked_is_no_unlinked_claim() {
        assert_eq!(parse(b"/real/s/locks/agents/tags/x.lock"), None);
        assert_eq!(parse(b"/real/s/locks/agents/tags/x.lock (deleted) "), None);
        assert_eq!(parse(b"/real/s/locks/agents/tags/x.lock(deleted)"), None);
    }

    #[test]
    fn paths_outside_the_locks_root_are_not_claims() {
        assert_eq!(parse(b"/tmp/x.lock (deleted)"), None);
        assert_eq!(parse(b"/real/s/locksmith/x.lock (deleted)"), None);
        assert_eq!(parse(b"/real/s/x.lock (deleted)"), None);
        assert_eq!(parse(b"/real/s/locks (deleted)"), None);
        assert_eq!(parse(b"/real/s/locks/../x.lock (deleted)"), None);
        assert_eq!(parse(b"socket:[1234]"), None);
        assert_eq!(parse(b"anon_inode:[eventfd]"), None);
    }

    #[test]
    fn names_that_are_no_claim_file_are_not_claims() {
        assert_eq!(
            parse(b"/real/s/locks/agents/tags/\xff.lock (deleted)"),
            None
        );
        assert_eq!(
            parse(b"/real/s/locks/agents/tags/bad%ZZ.lock (deleted)"),
            None
        );
        assert_eq!(parse(b"/real/s/locks/agents/tags/README (deleted)"), None);
        assert_eq!(parse(b"/real/s/locks/agents/tags/a.b.lock (deleted)"), None);
        // A non-UTF-8 directory above a valid name: named as the scan does
        // (lossily), never a panic.
        let odd = parse(b"/real/s/locks/agents/instances/\xff/k.lock (deleted)").unwrap();
        assert_eq!((odd.0, odd.1.as_str()), (KeyKind::Instance, "\u{fffd}/k"));
    }

    #[test]
    fn known_inodes_are_looked_up_exactly() {
        let known = KnownInodes::new(vec![9, 3, 3, 7]);
        assert!(known.contains(3) && known.contains(7) && known.contains(9));
        assert!(!known.contains(4) && !KnownInodes::default().contains(3));
    }

    proptest::proptest! {
        /// Any bytes: never a panic.
        #[test]
        fn any_target_parses_without_panicking(
            target in proptest::collection::vec(proptest::num::u8::ANY, 0..80),
        ) {
            let _ = parse(&target);
            let mut under = b"/real/s/locks/".to_vec();
            under.extend_from_slice(&target);
            under.extend_from_slice(DELETED_SUFFIX);
            let _ = parse(&under);
        }
    }
}
