//! The identity of one lock on disk, as every layer names it.
//!
//! Invariant: a [`LockKey`] is exactly one SDK claim `(dir, key)` plus how
//! a person names it — the AIH for an instance, the tag for a tag, the
//! path under the locks root for anything else. Its ordering (kind, then
//! name) is the display order.

use std::path::{Path, PathBuf};

use crate::escape;
use crate::locks::{instances_root, locks_root, tags_root};

/// Which family of lock a key belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum KeyKind {
    /// Under `agents/instances`: named by its AIH.
    Instance,
    /// In `agents/tags`: named by its tag.
    Tag,
    /// Anywhere else under the locks root (e.g. `plugins-daemon`).
    Other,
}

impl KeyKind {
    /// The word used in tables and JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            KeyKind::Instance => "instance",
            KeyKind::Tag => "tag",
            KeyKind::Other => "other",
        }
    }
}

/// One claim `(dir, key)` and its human name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LockKey {
    /// Instance, tag or other.
    pub kind: KeyKind,
    /// AIH (`a/b/c`), tag name, or path under the locks root.
    pub name: String,
    /// The SDK's lock dir.
    pub dir: PathBuf,
    /// The SDK's (unescaped) key.
    pub key: String,
}

impl LockKey {
    /// Names the claim `(dir, key)` found under `state_dir`. A dir outside
    /// the instances and tags roots is `Other`.
    pub fn from_coord(state_dir: &Path, dir: &Path, key: &str) -> Self {
        let instances = instances_root(state_dir);
        if let Ok(relative) = dir.strip_prefix(&instances) {
            let mut name = String::new();
            for segment in relative.components() {
                name.push_str(&segment.as_os_str().to_string_lossy());
                name.push('/');
            }
            name.push_str(key);
            return Self::new(KeyKind::Instance, name, dir, key);
        }
        if dir == tags_root(state_dir) {
            return Self::new(KeyKind::Tag, key.to_string(), dir, key);
        }
        let relative = dir
            .strip_prefix(locks_root(state_dir))
            .unwrap_or(dir)
            .join(key);
        Self::new(
            KeyKind::Other,
            relative.to_string_lossy().into_owned(),
            dir,
            key,
        )
    }

    fn new(kind: KeyKind, name: String, dir: &Path, key: &str) -> Self {
        Self {
            kind,
            name,
            dir: dir.to_path_buf(),
            key: key.to_string(),
        }
    }

    /// The gate file (`<dir>/<escape(key)>.lock`).
    pub fn gate_path(&self) -> PathBuf {
        escape::gate_path(&self.dir, &self.key)
    }

    /// The announce file (`<dir>/<escape(key)>.live.lock`).
    pub fn announce_path(&self) -> PathBuf {
        escape::announce_path(&self.dir, &self.key)
    }

    /// `instance "a/b/c"` / `tag "x"` / `other "p/k"` — for messages.
    pub fn label(&self) -> String {
        format!("{} {:?}", self.kind.as_str(), self.name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::locks::{agent_instance_lock, agent_tag_lock};

    #[test]
    fn instance_coords_name_back_to_their_aih() {
        let state = Path::new("/s");
        for aih in ["a", "a/b", "cli/daemon/x-y", "a/b/c/d.e"] {
            let (dir, key) = agent_instance_lock(state, aih);
            let named = LockKey::from_coord(state, &dir, &key);
            assert_eq!((named.kind, named.name.as_str()), (KeyKind::Instance, aih));
        }
    }

    #[test]
    fn tag_coords_name_back_to_their_tag() {
        let state = Path::new("/s");
        let (dir, key) = agent_tag_lock(state, "my tag: v1.0");
        let named = LockKey::from_coord(state, &dir, &key);
        assert_eq!(named.kind, KeyKind::Tag);
        assert_eq!(named.name, "my tag: v1.0");
        assert_eq!(
            named.gate_path(),
            Path::new("/s/locks/agents/tags/my%20tag%3A%20v1%2E0.lock")
        );
    }

    #[test]
    fn anything_else_is_other_named_by_its_path() {
        let state = Path::new("/s");
        let named = LockKey::from_coord(state, Path::new("/s/locks/plugins-daemon"), "p");
        assert_eq!(
            (named.kind, named.name.as_str()),
            (KeyKind::Other, "plugins-daemon/p")
        );
    }
}
