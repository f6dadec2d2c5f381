//! Where a lock may be taken: only in a directory strictly below
//! `<state>/locks`, reached without a symlink (the SDK follows symlinks,
//! and an acquire creates and writes files wherever they point).
//! Invariant: every path that locktop itself acquires under passes
//! [`ensure_coords_below_root`] first.

use std::path::{Path, PathBuf};

use crate::locks::locks_root;

/// Why a lock dir is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unconfined {
    /// The dir is not below the locks root at all.
    #[error("{} is outside {}", dir.display(), root.display())]
    Outside {
        /// The refused dir.
        dir: PathBuf,
        /// `<state>/locks`.
        root: PathBuf,
    },
    /// A component below the root is a symlink.
    #[error("{} is a symlink; locktop never takes a lock through one", .0.display())]
    Symlink(PathBuf),
}

/// Refuses a lock dir that would lead outside the locks root: one of its
/// existing components below `<state>/locks` is a symlink (the SDK would
/// follow it, and an acquire would create and write files wherever it
/// points). Components that do not exist yet are fine: the SDK creates
/// real directories.
pub(crate) fn ensure_no_symlink_below_root(state_dir: &Path, dir: &Path) -> Result<(), Unconfined> {
    let root = locks_root(state_dir);
    let Ok(relative) = dir.strip_prefix(&root) else {
        return Err(Unconfined::Outside {
            dir: dir.to_path_buf(),
            root,
        });
    };
    let mut path = root.clone();
    for component in relative.components() {
        path.push(component);
        match std::fs::symlink_metadata(&path) {
            Ok(meta) if meta.file_type().is_symlink() => return Err(Unconfined::Symlink(path)),
            Ok(_) => {}
            Err(_) => break,
        }
    }
    Ok(())
}

/// [`ensure_no_symlink_below_root`] for every lock dir of a family.
pub fn ensure_coords_below_root(
    state_dir: &Path,
    coords: &[(PathBuf, String)],
) -> Result<(), Unconfined> {
    coords
        .iter()
        .try_for_each(|(dir, _)| ensure_no_symlink_below_root(state_dir, dir))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    #[test]
    fn a_symlinked_directory_below_the_root_is_refused() {
        let state = tempfile::tempdir().unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        let instances = state.path().join("locks/agents/instances");
        fs::create_dir_all(&instances).unwrap();
        std::os::unix::fs::symlink(elsewhere.path(), instances.join("cli")).unwrap();
        let through = instances.join("cli/daemon");
        assert!(ensure_no_symlink_below_root(state.path(), &through).is_err());
        let fine = instances.join("real/new");
        assert_eq!(ensure_no_symlink_below_root(state.path(), &fine), Ok(()));
        assert!(ensure_no_symlink_below_root(state.path(), Path::new("/etc")).is_err());
    }
}
