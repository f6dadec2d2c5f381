//! Telling the engine's own writes from everyone else's.
//!
//! An acquire probe writes the lock files (the SDK truncates the gate and
//! writes the announce beacon), and those writes come back as inotify
//! events — possibly much later, after a queue overflow and a rescan. A
//! time window cannot tell them apart from an agent's writes; what the
//! probe left on disk can. Right after each acquire probe the engine
//! records the claim's [`Fingerprint`]; a later event on that key whose
//! files still carry the same fingerprint is the probe's own echo, and is
//! probed passively (which writes nothing, so it cannot echo again).
//!
//! Invariant: an acquire probe runs only on a key whose files changed
//! since the engine's own last write to them — so the engine can never
//! feed on its own echo, however late the echo is delivered. (Should an
//! agent write within the same coarse timestamp tick, the key is probed
//! passively: the answer is still the truth, only not through the lock.)

use std::os::unix::fs::MetadataExt;
use std::time::Instant;

use crate::disk::LockKey;

/// What one claim's files look like on disk: identity, size and times of
/// the gate and the announce (`None` where a file is missing).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::engine::run) struct Fingerprint {
    gate: Option<FileStamp>,
    announce: Option<FileStamp>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FileStamp {
    inode: u64,
    len: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl Fingerprint {
    /// Reads both files' metadata (`lstat`: never through a symlink).
    pub(in crate::engine::run) fn of(key: &LockKey) -> Self {
        let stamp = |path: std::path::PathBuf| {
            std::fs::symlink_metadata(path).ok().map(|meta| FileStamp {
                inode: meta.ino(),
                len: meta.len(),
                mtime: (meta.mtime(), meta.mtime_nsec()),
                ctime: (meta.ctime(), meta.ctime_nsec()),
            })
        };
        Self {
            gate: stamp(key.gate_path()),
            announce: stamp(key.announce_path()),
        }
    }
}

/// How many of the engine's own echoes in one second make its event rate
/// "self-inflicted" on the header.
pub(in crate::engine::run) const ECHO_ALARM_PER_SECOND: u64 = 1000;

/// Counts echoes per second, to make a sustained self-inflicted event rate
/// visible.
#[derive(Debug)]
pub(in crate::engine::run) struct EchoRate {
    second_began: Instant,
    this_second: u64,
    /// Echoes counted in the last full second.
    pub(in crate::engine::run) last_second: u64,
}

impl Default for EchoRate {
    fn default() -> Self {
        Self {
            second_began: Instant::now(),
            this_second: 0,
            last_second: 0,
        }
    }
}

impl EchoRate {
    /// Counts one echo.
    pub(in crate::engine::run) fn count(&mut self) {
        self.roll();
        self.this_second += 1;
    }

    /// Closes the current second if it is over; returns true when the
    /// last full second's count changed which side of the alarm it is on.
    pub(in crate::engine::run) fn roll(&mut self) -> bool {
        let elapsed = self.second_began.elapsed().as_secs();
        if elapsed == 0 {
            return false;
        }
        let was = self.last_second >= ECHO_ALARM_PER_SECOND;
        self.last_second = if elapsed == 1 { self.this_second } else { 0 };
        self.this_second = 0;
        self.second_began = Instant::now();
        was != (self.last_second >= ECHO_ALARM_PER_SECOND)
    }
}
