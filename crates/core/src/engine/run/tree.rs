//! The locks root's watch: where it is, the watcher while one runs, and
//! the scans of directories created under it.
//!
//! Invariants: `root` is `state_dir`'s locks root; `watcher` is `Some`
//! only while a watch phase runs (walks then add every directory they read
//! to it); a new directory is scanned off the loop, its report coming
//! back on `dir_scans` (adding a watch waits for the watcher, which a
//! storm of events keeps busy).

use std::path::PathBuf;

use tokio::sync::mpsc::{self, UnboundedReceiver, UnboundedSender};

use crate::disk::ScanReport;
use crate::engine::fs_events::FsWatcher;
use crate::locks::locks_root;

/// The root's watch and the scans of new directories.
pub(super) struct TreeWatch {
    /// The state dir watched.
    pub(super) state_dir: PathBuf,
    /// Its locks root.
    pub(super) root: PathBuf,
    /// The watcher while watching: walks add directories to it.
    pub(super) watcher: Option<FsWatcher>,
    /// Where scans of created directories report, and the loop reads.
    pub(super) dir_scans_tx: UnboundedSender<ScanReport>,
    pub(super) dir_scans: UnboundedReceiver<ScanReport>,
}

impl TreeWatch {
    /// Not watching yet.
    pub(super) fn new(state_dir: PathBuf) -> Self {
        let (dir_scans_tx, dir_scans) = mpsc::unbounded_channel();
        Self {
            root: locks_root(&state_dir),
            state_dir,
            watcher: None,
            dir_scans_tx,
            dir_scans,
        }
    }

    /// The hook that watches each directory a walk reads, while watching.
    pub(super) fn dir_hook(&self) -> Option<crate::disk::scan::OnDir> {
        self.watcher.as_ref().map(FsWatcher::dir_hook)
    }
}
