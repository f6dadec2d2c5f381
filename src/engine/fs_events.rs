//! notify → per-path filesystem changes, classified for the engine.
//!
//! Invariants: an open is reported as [`FsChange::Opened`] only for a
//! claim's file, and never probed (every probe opens files; probing on
//! opens would make the monitor watch itself);
//! symlinks are never followed; queue overflow and the watch limit are
//! surfaced as changes of their own, never swallowed.

use std::path::{Path, PathBuf};

use notify::event::{AccessKind, CreateKind, EventKind, ModifyKind, RemoveKind};
use notify::{RecommendedWatcher, RecursiveMode, Watcher};
use tokio::sync::mpsc::UnboundedSender;

use crate::disk::key::LockKey;
use crate::locks::escape::{ANNOUNCE_SUFFIX, GATE_SUFFIX, unescape};

/// One thing that happened under the watched directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FsChange {
    /// A gate or announce file was created, written, closed after writing
    /// or removed: the claim may have changed state.
    Key(LockKey),
    /// A claim's file was opened. Every probe opens files, so this never
    /// starts a probe; on a held key it means a waiter may have arrived
    /// (a blocked `flock` opens the file and makes no other event).
    Opened(LockKey),
    /// A directory appeared: scan it (files may predate its watch).
    DirCreated(PathBuf),
    /// A directory (or the watched root itself) disappeared.
    DirRemoved(PathBuf),
    /// Some other path changed (a foreign file, a parent of the root).
    Other(PathBuf),
    /// Events were lost (inotify queue overflow): rescan everything.
    Rescan,
    /// inotify has no more watches to give.
    WatchLimit(String),
    /// Any other watcher error.
    Error(String),
}

/// A live notify watcher; dropping it stops the events.
pub struct FsWatcher {
    _watcher: RecommendedWatcher,
}

/// Watches `dir` (recursively or not) and sends classified changes to `tx`.
/// Paths are named as claims of `state_dir`.
pub fn subscribe(
    state_dir: &Path,
    dir: &Path,
    recursive: bool,
    held: HeldFiles,
    tx: UnboundedSender<FsChange>,
) -> notify::Result<FsWatcher> {
    let state_dir = state_dir.to_path_buf();
    let handler = move |result: notify::Result<notify::Event>| {
        let changes = match result {
            Ok(event) if is_open(&event) => opened(&state_dir, &held, event),
            Ok(event) => classify(&state_dir, event),
            Err(error) => vec![match error.kind {
                notify::ErrorKind::MaxFilesWatch => FsChange::WatchLimit(error.to_string()),
                _ => FsChange::Error(error.to_string()),
            }],
        };
        for change in changes {
            let _ = tx.send(change);
        }
    };
    let config = notify::Config::default().with_follow_symlinks(false);
    let mut watcher = RecommendedWatcher::new(handler, config)?;
    let mode = if recursive {
        RecursiveMode::Recursive
    } else {
        RecursiveMode::NonRecursive
    };
    watcher.watch(dir, mode)?;
    Ok(FsWatcher { _watcher: watcher })
}

/// The files of the keys the engine knows as held: an open of one of them
/// may be a waiter arriving. Shared with the watcher thread, so the many
/// opens of the engine's own probes (every key of a sweep) are dropped
/// there, with one hash lookup, instead of crossing the channel.
pub type HeldFiles = std::sync::Arc<std::sync::RwLock<std::collections::HashSet<PathBuf>>>;

fn is_open(event: &notify::Event) -> bool {
    matches!(event.kind, EventKind::Access(AccessKind::Open(_))) && !event.need_rescan()
}

/// The opens of held keys' files, as [`FsChange::Opened`]; nothing else.
fn opened(state_dir: &Path, held: &HeldFiles, event: notify::Event) -> Vec<FsChange> {
    let Ok(held) = held.read() else {
        return Vec::new();
    };
    event
        .paths
        .iter()
        .filter(|path| held.contains(*path))
        .filter_map(|path| claim_of(state_dir, path))
        .map(FsChange::Opened)
        .collect()
}

/// Turns one notify event into changes (an open of a claim's file is
/// [`FsChange::Opened`]; the watcher forwards only held keys' opens).
pub fn classify(state_dir: &Path, event: notify::Event) -> Vec<FsChange> {
    if event.need_rescan() {
        return vec![FsChange::Rescan];
    }
    match event.kind {
        EventKind::Access(AccessKind::Open(_)) => event
            .paths
            .iter()
            .filter_map(|path| claim_of(state_dir, path))
            .map(FsChange::Opened)
            .collect(),
        EventKind::Access(AccessKind::Read) => Vec::new(),
        EventKind::Create(CreateKind::Folder) => {
            event.paths.into_iter().map(FsChange::DirCreated).collect()
        }
        EventKind::Remove(RemoveKind::Folder) | EventKind::Remove(RemoveKind::Other) => {
            event.paths.into_iter().map(FsChange::DirRemoved).collect()
        }
        EventKind::Modify(ModifyKind::Name(_)) => event
            .paths
            .into_iter()
            .flat_map(|path| renamed(state_dir, path))
            .collect(),
        _ => event
            .paths
            .into_iter()
            .map(|path| file_change(state_dir, path))
            .collect(),
    }
}

/// One side of a rename. A directory moved in is scanned like a new one (a
/// whole tree of claims may arrive with it); a path moved away may have
/// been a directory (nothing on disk says so any more), so whatever was
/// known below it is dropped — and, were it a claim's file, its claim is
/// re-probed.
fn renamed(state_dir: &Path, path: PathBuf) -> Vec<FsChange> {
    match std::fs::symlink_metadata(&path) {
        Ok(meta) if meta.is_dir() => vec![FsChange::DirCreated(path)],
        Ok(_) => vec![file_change(state_dir, path)],
        Err(_) => vec![
            FsChange::DirRemoved(path.clone()),
            file_change(state_dir, path),
        ],
    }
}

fn file_change(state_dir: &Path, path: PathBuf) -> FsChange {
    match claim_of(state_dir, &path) {
        Some(key) => FsChange::Key(key),
        None => FsChange::Other(path),
    }
}

/// The claim a gate or announce path belongs to, if it is one. Only a
/// regular file is a claim's file, whatever its name — a symlink, a FIFO,
/// a directory named `x.lock` are problems (it may be gone: a removed file
/// still names its claim).
pub fn claim_of(state_dir: &Path, path: &Path) -> Option<LockKey> {
    if std::fs::symlink_metadata(path).is_ok_and(|m| !m.is_file()) {
        return None;
    }
    let name = path.file_name()?.to_str()?;
    let stem = name
        .strip_suffix(ANNOUNCE_SUFFIX)
        .or_else(|| name.strip_suffix(GATE_SUFFIX))?;
    let key = unescape(stem)?;
    Some(LockKey::from_coord(state_dir, path.parent()?, &key))
}

#[cfg(test)]
mod tests {
    use super::*;
    use notify::event::{AccessMode, ModifyKind};

    fn event(kind: EventKind, path: &str) -> notify::Event {
        notify::Event::new(kind).add_path(PathBuf::from(path))
    }

    #[test]
    fn opens_are_told_apart_from_changes() {
        let kind = EventKind::Access(AccessKind::Open(AccessMode::Any));
        let opened = classify(Path::new("/s"), event(kind, "/s/locks/agents/tags/a.lock"));
        assert!(matches!(opened.as_slice(), [FsChange::Opened(key)] if key.name == "a"));
        let foreign = classify(Path::new("/s"), event(kind, "/s/locks/agents/tags/README"));
        assert!(foreign.is_empty(), "opens of other files are dropped");
    }

    #[test]
    fn gate_and_announce_writes_name_the_same_claim() {
        let state = Path::new("/s");
        let close = EventKind::Access(AccessKind::Close(AccessMode::Write));
        let modify = EventKind::Modify(ModifyKind::Any);
        let a = classify(state, event(close, "/s/locks/agents/tags/my%20tag.lock"));
        let b = classify(
            state,
            event(modify, "/s/locks/agents/tags/my%20tag.live.lock"),
        );
        assert_eq!(a, b);
        let FsChange::Key(key) = &a[0] else {
            panic!("{a:?}")
        };
        assert_eq!(key.name, "my tag");
    }

    #[test]
    fn overflow_asks_for_a_rescan() {
        let overflow = notify::Event::new(EventKind::Other).set_flag(notify::event::Flag::Rescan);
        assert_eq!(classify(Path::new("/s"), overflow), vec![FsChange::Rescan]);
    }

    proptest::proptest! {
        /// Every AIH and tag an agent can lock names back to itself, and
        /// its files name back to the same claim (the engine's event path).
        #[test]
        fn coordinates_and_file_paths_name_back_to_their_claim(
            segments in proptest::collection::vec("[^/\\x00]{1,12}", 1..5),
            tag in "[^\\x00]{1,30}",
        ) {
            let state = Path::new("/s");
            let aih = segments.join("/");
            proptest::prop_assume!(crate::locks::validate_aih(&aih).is_ok());
            for (kind, name, (dir, key)) in [
                (crate::disk::KeyKind::Instance, aih.as_str(), crate::locks::agent_instance_lock(state, &aih)),
                (crate::disk::KeyKind::Tag, tag.as_str(), crate::locks::agent_tag_lock(state, &tag)),
            ] {
                let named = crate::disk::LockKey::from_coord(state, &dir, &key);
                proptest::prop_assert_eq!((named.kind, named.name.as_str()), (kind, name));
                for path in [named.gate_path(), named.announce_path()] {
                    let from_event = claim_of(state, &path);
                    proptest::prop_assert_eq!(from_event.as_ref(), Some(&named));
                }
            }
        }
    }
}
