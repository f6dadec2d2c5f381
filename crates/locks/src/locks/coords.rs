//! Lock coordinates: where on disk an AIH or a tag lock lives.
//!
//! Invariant: a coordinate is `(lock_dir, key)` exactly as
//! `objectiveai_sdk::lockfile` addresses a claim. Directory segments of an
//! AIH ride raw (so they must be validated before they become a path, see
//! [`validate_aih`]); the key is escaped by the SDK itself.

use std::path::{Path, PathBuf};

use super::LocksError;

/// `<state>/locks` — the root every lock of this state lives under.
pub fn locks_root(state_dir: &Path) -> PathBuf {
    state_dir.join("locks")
}

/// `<state>/locks/agents/instances` — the root of the AIH tree.
pub fn instances_root(state_dir: &Path) -> PathBuf {
    locks_root(state_dir).join("agents").join("instances")
}

/// `<state>/locks/agents/tags` — the one directory of all tag locks.
pub fn tags_root(state_dir: &Path) -> PathBuf {
    locks_root(state_dir).join("agents").join("tags")
}

/// `(lock_dir, key)` for an agent_instance_hierarchy: every segment but the
/// last is a raw subdirectory of the instances root, the last is the key.
/// A one-segment AIH is a key directly in the instances root. Does not
/// validate: callers taking operator input go through [`validate_aih`]
/// (as [`super::family_coords`] does).
pub fn agent_instance_lock(state_dir: &Path, agent_instance_hierarchy: &str) -> (PathBuf, String) {
    let mut dir = instances_root(state_dir);
    let key = match agent_instance_hierarchy.rsplit_once('/') {
        Some((parents, leaf)) => {
            for segment in parents.split('/') {
                dir.push(segment);
            }
            leaf
        }
        None => agent_instance_hierarchy,
    };
    (dir, key.to_string())
}

/// `(lock_dir, key)` for an agent tag: the tags root, keyed by the tag name
/// verbatim (the SDK escapes it on disk).
pub fn agent_tag_lock(state_dir: &Path, tag: &str) -> (PathBuf, String) {
    (tags_root(state_dir), tag.to_string())
}

/// Accepts an AIH only if [`agent_instance_lock`] maps it strictly under
/// the instances root and onto a path no other AIH's lock files use: not
/// empty, no leading `/`, no empty, `.` or `..` segment, no NUL byte, and
/// no directory segment ending in `.lock` (escaped keys never contain `.`,
/// so such a directory is the only thing that could collide with another
/// AIH's `x.lock` / `x.live.lock` file).
pub fn validate_aih(aih: &str) -> Result<(), LocksError> {
    let reject = |reason| {
        Err(LocksError::InvalidAih {
            aih: aih.to_string(),
            reason,
        })
    };
    if aih.is_empty() {
        return reject("it is empty");
    }
    if aih.contains('\0') {
        return reject("it contains a NUL byte");
    }
    if aih.starts_with('/') {
        return reject("it starts with '/'");
    }
    let segments: Vec<&str> = aih.split('/').collect();
    for (index, segment) in segments.iter().enumerate() {
        match *segment {
            "" => return reject("it has an empty segment"),
            "." => return reject("it has a '.' segment"),
            ".." => return reject("it has a '..' segment"),
            directory if index + 1 < segments.len() && directory.ends_with(".lock") => {
                return reject(
                    "a parent segment ends in '.lock' (it would collide with a lock file)",
                );
            }
            _ => {}
        }
    }
    Ok(())
}

/// Accepts any non-empty tag without a NUL byte (tags are free-form: the
/// SDK escapes everything else on disk).
pub fn validate_tag(tag: &str) -> Result<(), LocksError> {
    let reject = |reason| {
        Err(LocksError::InvalidTag {
            tag: tag.to_string(),
            reason,
        })
    };
    if tag.is_empty() {
        return reject("it is empty");
    }
    if tag.contains('\0') {
        return reject("it contains a NUL byte");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::path::Component;

    proptest! {
        /// Whatever an operator types: validation never panics, and an
        /// accepted AIH maps strictly below the instances root, through
        /// plain directory names only.
        #[test]
        fn an_accepted_aih_stays_below_the_instances_root(aih in any::<String>()) {
            let state = Path::new("/s");
            if validate_aih(&aih).is_ok() {
                let (dir, key) = agent_instance_lock(state, &aih);
                let relative = dir.strip_prefix(instances_root(state)).expect("below the root");
                prop_assert!(relative.components().all(|c| matches!(c, Component::Normal(_))));
                prop_assert!(!key.is_empty() && !key.contains('/'));
            }
        }

        /// AIHs of the shapes agents use are accepted.
        #[test]
        fn real_looking_aihs_are_accepted(
            segments in prop::collection::vec("[A-Za-z0-9_-]{1,24}", 1..6),
        ) {
            prop_assert_eq!(validate_aih(&segments.join("/")), Ok(()));
        }

        /// `..` and `.` segments are refused wherever they are.
        #[test]
        fn dot_segments_are_refused_anywhere(
            before in prop::collection::vec("[a-z]{1,5}", 0..3),
            after in prop::collection::vec("[a-z]{1,5}", 0..3),
            dots in prop::sample::select(vec![".", ".."]),
        ) {
            let mut segments = before;
            segments.push(dots.to_string());
            segments.extend(after);
            prop_assert!(validate_aih(&segments.join("/")).is_err());
        }
    }
}
