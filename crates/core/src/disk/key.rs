//! The identity of one lock on disk, as every layer names it.
//!
//! Invariant: a [`LockKey`] is exactly one SDK claim `(dir, key)` plus how
//! a person names it — the AIH for an instance, the tag for a tag, the
//! path under the locks root for anything else. Its ordering (kind, then
//! name) is the display order.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

use crate::locks::escape;
use crate::locks::{instances_root, locks_root, tags_root};

/// Which family of lock a key belongs to.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum KeyKind {
    /// Under `agents/instances`: named by its AIH.
    Instance,
    /// In `agents/tags`: named by its tag.
    Tag,
    /// Anywhere else under the locks root (e.g. `plugins-daemon`).
    Other,
}

impl std::fmt::Display for KeyKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `instance "a/b/c"` / `tag "x"` / `other "p/k"`: how messages name a
/// claim of `kind` called `name`.
pub fn label(kind: KeyKind, name: &str) -> String {
    // Quotes and backslashes escaped (the name stays one token), control
    // characters shown as every screen shows them (`␛`, `␉`), never as
    // Rust escapes: one way, in a line that also holds command lines.
    let quoted = name.replace('\\', "\\\\").replace('"', "\\\"");
    format!("{kind} \"{}\"", crate::text::visible(&quoted))
}

impl KeyKind {
    /// Every kind.
    pub const ALL: [KeyKind; 3] = [KeyKind::Instance, KeyKind::Tag, KeyKind::Other];

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
///
/// Invariant: the name is the directory's prefix followed by the key
/// (`a/b/` + `c`, `` + `tag`), so a key is two shared pointers: its name
/// (one allocation, shared by every clone) and its [`ClaimDir`] (shared by
/// every key of the directory). A million keys cost their names and
/// nothing else per key.
///
/// Equality and hashing are the derived ones in meaning, made cheap for
/// the maps every event and sweep goes through: the hash is the kind and
/// the name only (keys that differ only in `dir` merely share a bucket),
/// and equality compares the names before the directories, which are
/// usually the same `Arc`.
#[derive(Debug, Clone)]
pub struct LockKey {
    /// AIH (`a/b/c`), tag name, or path under the locks root; ends with
    /// the SDK's key.
    name: Arc<str>,
    /// The directory, its kind and the name's prefix.
    dir: Arc<ClaimDir>,
}

/// What every key of one claim directory shares: the SDK's lock dir, the
/// kind of its keys and how long the name's prefix is.
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct ClaimDir {
    kind: KeyKind,
    path: Box<Path>,
    /// Bytes of a key's name before its SDK key.
    prefix_len: usize,
}

impl PartialEq for LockKey {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name
            && (Arc::ptr_eq(&self.dir, &other.dir)
                || (self.dir.kind == other.dir.kind && self.dir.path == other.dir.path))
    }
}

impl Eq for LockKey {}

impl PartialOrd for LockKey {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

/// Kind, then name, then directory: the display order.
impl Ord for LockKey {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.dir
            .kind
            .cmp(&other.dir.kind)
            .then_with(|| self.name.cmp(&other.name))
            .then_with(|| self.dir.path.cmp(&other.dir.path))
    }
}

impl std::hash::Hash for LockKey {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.dir.kind.hash(state);
        self.name.hash(state);
    }
}

impl LockKey {
    /// Names the claim `(dir, key)` found under `state_dir`. A dir outside
    /// the instances and tags roots is `Other`.
    pub fn from_coord(state_dir: &Path, dir: &Path, key: &str) -> Self {
        DirNamer::new(state_dir, dir).key(key)
    }

    /// Instance, tag or other.
    pub fn kind(&self) -> KeyKind {
        self.dir.kind
    }

    /// AIH (`a/b/c`), tag name, or path under the locks root.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The SDK's lock dir.
    pub fn dir(&self) -> &Path {
        &self.dir.path
    }

    /// The SDK's (unescaped) key.
    pub fn key(&self) -> &str {
        &self.name[self.dir.prefix_len..]
    }

    /// The directory this key shares with its siblings.
    pub(crate) fn claim_dir(&self) -> &Arc<ClaimDir> {
        &self.dir
    }

    /// The gate file (`<dir>/<escape(key)>.lock`).
    pub fn gate_path(&self) -> PathBuf {
        escape::gate_path(self.dir(), self.key())
    }

    /// The announce file (`<dir>/<escape(key)>.live.lock`).
    pub fn announce_path(&self) -> PathBuf {
        escape::announce_path(self.dir(), self.key())
    }

    /// When the claim became held, as far as the disk tells: see
    /// [`held_since`]. Never follows a symlink.
    pub(crate) fn held_since(&self) -> Option<SystemTime> {
        held_since(&std::fs::symlink_metadata(self.announce_path()).ok()?)
    }

    /// `instance "a/b/c"` / `tag "x"` / `other "p/k"` — for messages.
    pub fn label(&self) -> String {
        label(self.kind(), self.name())
    }
}

impl ClaimDir {
    /// The SDK's lock dir.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// Which of a claim's two files a path is.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum ClaimFile {
    /// `<escape(key)>.lock`: the mutex.
    Gate,
    /// `<escape(key)>.live.lock`: the beacon, locked after the gate.
    Announce,
}

impl ClaimFile {
    /// `gate` / `announce`.
    pub fn as_str(self) -> &'static str {
        match self {
            ClaimFile::Gate => "gate",
            ClaimFile::Announce => "announce",
        }
    }
}

/// The claim a gate or announce path names, from its name alone (no
/// `stat`: the file may be gone, or unlinked while still open). `None`
/// unless the name is UTF-8, ends in `.lock` and its escape decodes.
/// Invariant: names exactly as [`crate::disk::scan`] names what it finds.
pub(crate) fn claim_named(state_dir: &Path, path: &Path) -> Option<(LockKey, ClaimFile)> {
    let name = path.file_name()?.to_str()?;
    let (stem, file) = match name.strip_suffix(escape::ANNOUNCE_SUFFIX) {
        Some(stem) => (stem, ClaimFile::Announce),
        None => (name.strip_suffix(escape::GATE_SUFFIX)?, ClaimFile::Gate),
    };
    let key = escape::unescape(stem)?;
    Some((LockKey::from_coord(state_dir, path.parent()?, &key), file))
}

/// "Held since": the mtime of a claim's announce file (`announce`, read
/// without following symlinks), i.e. the moment its holder wrote the
/// beacon. Meaningful only while the claim is held.
pub(crate) fn held_since(announce: &std::fs::Metadata) -> Option<SystemTime> {
    announce.modified().ok()
}

/// Names every claim of one directory: the kind, the name prefix and the
/// shared [`ClaimDir`] are worked out once per directory, not once per key
/// (a scan of a million keys).
#[derive(Debug, Clone)]
pub struct DirNamer {
    prefix: String,
    dir: Arc<ClaimDir>,
}

impl DirNamer {
    /// The namer of `dir` under `state_dir`.
    pub fn new(state_dir: &Path, dir: &Path) -> Self {
        let (kind, prefix) = if let Ok(relative) = dir.strip_prefix(instances_root(state_dir)) {
            let mut prefix = String::new();
            for segment in relative.components() {
                prefix.push_str(&segment.as_os_str().to_string_lossy());
                prefix.push('/');
            }
            (KeyKind::Instance, prefix)
        } else if dir == tags_root(state_dir) {
            (KeyKind::Tag, String::new())
        } else {
            let relative = dir.strip_prefix(locks_root(state_dir)).unwrap_or(dir);
            let mut prefix = relative.to_string_lossy().into_owned();
            if !prefix.is_empty() {
                prefix.push('/');
            }
            (KeyKind::Other, prefix)
        };
        Self {
            dir: Arc::new(ClaimDir {
                kind,
                path: dir.into(),
                prefix_len: prefix.len(),
            }),
            prefix,
        }
    }

    /// The claim of this directory named `name` (its prefix, then its
    /// SDK key); `None` when `name` is not one of this directory's.
    pub fn named(&self, name: &str) -> Option<LockKey> {
        let key = name.strip_prefix(self.prefix.as_str())?;
        Some(LockKey {
            name: Arc::from(name),
            dir: self.dir.clone(),
        })
        .filter(|_| !key.is_empty() || self.prefix.is_empty())
    }

    /// The claim `key` of this directory. One allocation: the name is
    /// put together in a buffer the thread reuses, then copied once.
    pub fn key(&self, key: &str) -> LockKey {
        thread_local! {
            static NAME: std::cell::RefCell<String> = const { std::cell::RefCell::new(String::new()) };
        }
        let name = NAME.with_borrow_mut(|name| {
            name.clear();
            name.push_str(&self.prefix);
            name.push_str(key);
            Arc::<str>::from(name.as_str())
        });
        LockKey {
            name,
            dir: self.dir.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::locks::{agent_instance_lock, agent_tag_lock};

    /// Equality means the same `(dir, key)` and name, whether or not the
    /// `dir` is shared, and equal keys hash alike; a key of another state
    /// dir with the same name is another key.
    #[test]
    fn equal_keys_are_the_same_claim_and_hash_alike() {
        use std::hash::BuildHasher;
        let hasher = std::collections::hash_map::RandomState::new();
        let (dir, key) = agent_tag_lock(Path::new("/s"), "t");
        let one = LockKey::from_coord(Path::new("/s"), &dir, &key);
        let again = LockKey::from_coord(Path::new("/s"), &dir, &key);
        assert!(!Arc::ptr_eq(one.claim_dir(), again.claim_dir()));
        assert_eq!(one, again);
        assert_eq!(hasher.hash_one(&one), hasher.hash_one(&again));
        let (other_dir, key) = agent_tag_lock(Path::new("/other"), "t");
        let elsewhere = LockKey::from_coord(Path::new("/other"), &other_dir, &key);
        assert_eq!(elsewhere.name(), one.name());
        assert_ne!(elsewhere, one);
        let (_, other_key) = agent_tag_lock(Path::new("/s"), "u");
        assert_ne!(LockKey::from_coord(Path::new("/s"), &dir, &other_key), one);
    }

    #[test]
    fn instance_coords_name_back_to_their_aih() {
        let state = Path::new("/s");
        for aih in ["a", "a/b", "cli/daemon/x-y", "a/b/c/d.e"] {
            let (dir, key) = agent_instance_lock(state, aih);
            let named = LockKey::from_coord(state, &dir, &key);
            assert_eq!((named.kind(), named.name()), (KeyKind::Instance, aih));
        }
    }

    #[test]
    fn tag_coords_name_back_to_their_tag() {
        let state = Path::new("/s");
        let (dir, key) = agent_tag_lock(state, "my tag: v1.0");
        let named = LockKey::from_coord(state, &dir, &key);
        assert_eq!(named.kind(), KeyKind::Tag);
        assert_eq!(named.name(), "my tag: v1.0");
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
            (named.kind(), named.name()),
            (KeyKind::Other, "plugins-daemon/p")
        );
    }
}
