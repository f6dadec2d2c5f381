//! Writing a journal: the header, a checkpoint once the first full scan is
//! in, then one line per change, with a fresh checkpoint whenever the
//! changes since the last one outgrow it (or [`CHECKPOINT_EVERY`]) —
//! and, with a size limit, a new file when the current one reaches it.
//!
//! Invariants:
//! - every file starts with its header and a complete checkpoint, so it
//!   stands alone (rotation keeps whole files, never half a history);
//! - a reader never replays more than about one checkpoint's worth of
//!   bytes (at least [`CHECKPOINT_EVERY`]) after a checkpoint to reach any
//!   line;
//! - each [`Journal::record`] ends in one `write` of whole lines: a crash
//!   tears at most the last line, and a reader skips a torn last line;
//! - times never go backwards: a line's time is the later of its own
//!   and the previous line's; a checkpoint's is that of the last line
//!   before it (the first one's, the first scan's end), so a recording of
//!   past times keeps them;
//! - a recording stopped cleanly ends with its end line
//!   ([`Journal::finish`]), stamped when it stopped; one that ended
//!   otherwise (killed, a crash, a full disk) has none;
//! - every line ends with its number in the file (`"n"`, the header
//!   being 0) and a CRC-32 of the line (`"crc"`), so a reader tells a
//!   line dropped, repeated, moved or altered;
//! - a journal file has one writer: a recording holds `.FILE.lock`
//!   (an exclusive `flock`) from its start to its end, across every
//!   rotation, and a second recording into the same FILE — `record` or
//!   `serve --journal` — is refused at its start; files are opened to
//!   append and created exclusively, so nothing already written is ever
//!   overwritten;
//! - a journal that cannot be written stays whole up to its last whole
//!   line and keeps folding changes ([`Journal::failure`]); a writer that
//!   lives on (`serve --journal`) resumes with [`Journal::resume`]: the
//!   partly written line is cut off, and a new recording starts in a new
//!   file whose header says why the one before stopped, so a reader says
//!   nothing was recorded in between, and why;
//! - the recorder's memory is its [`Fold`] (a null pointer per
//!   free key) and one line's buffer.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use crate::disk::key::LockKey;
use crate::engine::{Delta, KeyState};
use crate::liveness::probe::ProbeMode;
use crate::operate::verdict::Verdict;

use super::format::{
    self, CheckpointEnd, CheckpointFree, CheckpointKey, FORMAT, FREE_PER_LINE, Header, KeyRef,
    RecordingEnd, VERSION,
};
use crate::engine::fold::Fold;

/// The least a checkpoint waits for, in bytes of changes after the last.
pub(crate) const CHECKPOINT_EVERY: u64 = 4 << 20;
/// Files `--keep` keeps by default (the current one and the older ones).
pub const KEEP: usize = 8;
/// Bytes of a checkpoint gathered before they are written.
const CHUNK: usize = 1 << 20;

/// Where a journal goes.
#[derive(Debug, Clone)]
pub enum Output {
    /// Standard output: one stream, never rotated.
    Stdout,
    /// A file; with a size limit, rotated into `FILE.1`, `FILE.2`, …
    File {
        /// The current file.
        path: PathBuf,
        /// Rotate once the current file reaches this many bytes.
        max_size: Option<u64>,
        /// Files kept, the current one included (at least 1).
        keep: usize,
    },
}

/// What a journal records, for its headers.
#[derive(Debug, Clone)]
pub struct Recording {
    /// The state dir.
    pub state_dir: PathBuf,
    /// The probe the engine runs.
    pub probe: ProbeMode,
}

/// Why a journal could not be written, and since when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// When the write failed.
    pub since: SystemTime,
    /// The error, one line.
    pub error: String,
}

/// Where lines go: standard output, or the current file.
enum Sink {
    Stdout(std::io::Stdout),
    File(File),
}

impl Write for Sink {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            Sink::Stdout(out) => out.write(buf),
            Sink::File(file) => file.write(buf),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Sink::Stdout(out) => out.flush(),
            Sink::File(file) => file.flush(),
        }
    }
}

/// A journal being written.
pub struct Journal {
    output: Output,
    recording: Recording,
    root: PathBuf,
    started: SystemTime,
    sink: Sink,
    /// `.FILE.lock`, locked for the recording's life (`None` on stdout).
    _lock: Option<File>,
    part: u64,
    /// The number the next line of the current file gets.
    next_line: u64,
    /// Bytes written, all files together.
    total_written: u64,
    /// Set while the journal cannot be written.
    failure: Option<Failure>,
    /// Why the recording before this one stopped (the next header says).
    after_failure: Option<String>,
    /// Bytes written to the current file.
    written: u64,
    /// Bytes of change lines since the last checkpoint.
    since_checkpoint: u64,
    /// The last checkpoint's size.
    checkpoint_size: u64,
    /// The least bytes of changes between checkpoints.
    checkpoint_every: u64,
    /// The first full scan is in (before it, deltas are only folded: the
    /// first checkpoint states them).
    synced: bool,
    last_time: SystemTime,
    state: Fold,
    line: Vec<u8>,
    pid_alive: fn(u32) -> bool,
    clock: fn() -> SystemTime,
    materializing_after: std::time::Duration,
    /// The header is written with the first delta (after the `with_…`
    /// settings it states).
    header_due: bool,
}

impl Journal {
    /// Starts a journal of `recording` on `output` (its header is written
    /// with the first delta).
    /// An existing file is kept: rotated into the set when the output
    /// rotates, refused otherwise (a recording is never overwritten).
    /// A second recording into the same file is refused (see the module
    /// doc).
    pub fn create(output: Output, recording: Recording) -> anyhow::Result<Self> {
        let started = SystemTime::now();
        let root = crate::locks::locks_root(&recording.state_dir);
        let lock = match &output {
            Output::File { path, .. } => Some(claim(path)?),
            Output::Stdout => None,
        };
        let sink = open_first(&output)?;
        let journal = Self {
            output,
            recording,
            root,
            started,
            sink,
            _lock: lock,
            part: 0,
            next_line: 0,
            total_written: 0,
            failure: None,
            after_failure: None,
            written: 0,
            since_checkpoint: 0,
            checkpoint_size: 0,
            checkpoint_every: CHECKPOINT_EVERY,
            synced: false,
            last_time: SystemTime::UNIX_EPOCH,
            state: Fold::default(),
            line: Vec::new(),
            pid_alive: crate::liveness::process::pid_alive,
            clock: SystemTime::now,
            materializing_after: crate::operate::verdict::MATERIALIZING_AFTER,
            header_due: true,
        };
        Ok(journal)
    }

    /// Checkpoints after at least `bytes` of changes (instead of
    /// [`CHECKPOINT_EVERY`]): tests of many checkpoints.
    #[cfg(test)]
    pub(crate) fn with_checkpoint_every(mut self, bytes: u64) -> Self {
        self.checkpoint_every = bytes;
        self
    }

    /// Tells whether a holder still runs with `pid_alive` (instead of
    /// `/proc`): tests of recorded releases.
    pub fn with_pid_alive(mut self, pid_alive: fn(u32) -> bool) -> Self {
        self.pid_alive = pid_alive;
        self
    }

    /// Says in the headers of the files to come that spawns become
    /// suspects after `threshold` (`--materializing-after`).
    pub fn with_materializing_after(mut self, threshold: std::time::Duration) -> Self {
        self.materializing_after = threshold;
        self
    }

    /// Reads the time of checkpoints and of health lines from `clock`
    /// (instead of the system's): tests with fixed times.
    pub fn with_clock(mut self, clock: fn() -> SystemTime) -> Self {
        self.clock = clock;
        self
    }

    /// Records one delta: folds it in, and writes its line (once the
    /// first full scan is in; that scan's end writes the first
    /// checkpoint). May write a checkpoint or start a new file after it.
    ///
    /// While the journal cannot be written ([`Journal::failure`]) the
    /// delta is only folded in (what [`Journal::resume`] checkpoints).
    /// A failed write is said once, as the error, and makes it so.
    pub fn record(&mut self, delta: Delta) -> std::io::Result<()> {
        self.record_sharing(delta, None)
    }

    /// [`Journal::record`], its key's state kept as `shared` (the same
    /// state, as the recorder's held view keeps it: one copy, not two).
    pub fn record_sharing(
        &mut self,
        delta: Delta,
        shared: Option<std::sync::Arc<crate::engine::KeyState>>,
    ) -> std::io::Result<()> {
        if self.failure.is_some() {
            if let Delta::Key { at, .. } | Delta::Removed { at, .. } | Delta::Synced { at, .. } =
                &delta
            {
                self.stamp(*at);
            }
            self.synced |= matches!(delta, Delta::Synced { .. });
            self.state.apply_sharing(delta, shared);
            return Ok(());
        }
        let result = self.record_line(delta, shared);
        self.failed_if(result)
    }

    fn record_line(
        &mut self,
        delta: Delta,
        shared: Option<std::sync::Arc<crate::engine::KeyState>>,
    ) -> std::io::Result<()> {
        if self.header_due {
            self.header_due = false;
            self.write_header().map_err(std::io::Error::other)?;
        }
        if !self.synced {
            let first_sync = match delta {
                Delta::Synced { at, .. } => Some(at),
                _ => None,
            };
            self.state.apply_sharing(delta, shared);
            if let Some(at) = first_sync {
                // The first checkpoint is the state when the scan ended.
                self.synced = true;
                self.stamp(at);
                self.write_checkpoint()?;
            }
            return Ok(());
        }
        let time = self.stamp(match &delta {
            Delta::Key { at, .. } | Delta::Removed { at, .. } | Delta::Synced { at, .. } => *at,
            Delta::Health(_) | Delta::Problems(_) => (self.clock)(),
        });
        let holder_alive = self.holder_alive(&delta);
        self.line.clear();
        format::encode_delta(&mut self.line, &delta, time, holder_alive, &self.root);
        self.state.apply_sharing(delta, shared);
        self.write_line()?;
        self.after_change()
    }

    /// Records a verdict change (`watch`'s line), once the first scan is
    /// in.
    pub fn record_verdict(
        &mut self,
        key: &LockKey,
        from: Option<&str>,
        to: Option<&Verdict>,
        at: SystemTime,
    ) -> std::io::Result<()> {
        if !self.synced || self.failure.is_some() {
            return Ok(());
        }
        let time = self.stamp(at);
        self.line.clear();
        format::encode_verdict(&mut self.line, key, from, to, time, &self.root);
        let result = self.write_line().and_then(|()| self.after_change());
        self.failed_if(result)
    }

    /// Why the journal cannot be written, while it cannot.
    pub fn failure(&self) -> Option<&Failure> {
        self.failure.as_ref()
    }

    /// Bytes written so far, every file together.
    pub fn bytes_written(&self) -> u64 {
        self.total_written
    }

    /// Writes again after a failure: the current file is cut back to its
    /// last whole line and rotated (or reused when nothing of it was
    /// written whole), and a new recording starts there — its header
    /// says why the one before stopped, its first checkpoint is the
    /// state now (every change seen meanwhile folded in). An error
    /// leaves the journal failed, to try again later. Nothing to do
    /// when it is not failed, or on standard output (a pipe that failed
    /// is gone).
    pub fn resume(&mut self) -> std::io::Result<()> {
        let Some(failure) = self.failure.clone() else {
            return Ok(());
        };
        if matches!(self.output, Output::Stdout) {
            return Err(std::io::Error::other(failure.error));
        }
        let result = self.start_after_failure(&failure);
        if let Err(error) = &result {
            self.failure = Some(Failure {
                since: failure.since,
                error: error.to_string(),
            });
        }
        result
    }

    fn start_after_failure(&mut self, failure: &Failure) -> std::io::Result<()> {
        if let Sink::File(file) = &self.sink {
            // What was written whole stays; a line cut by the failure goes.
            file.set_len(self.written)?;
        }
        let reuse = self.written == 0;
        self.sink = open_next(&self.output, reuse).map_err(std::io::Error::other)?;
        self.written = 0;
        self.next_line = 0;
        self.part = 0;
        self.started = (self.clock)();
        self.after_failure = Some(format!(
            "the journal could not be written from {}: {}",
            crate::time_format::rfc3339(failure.since),
            failure.error
        ));
        self.header_due = false;
        self.write_header().map_err(std::io::Error::other)?;
        self.after_failure = None;
        if self.synced {
            // The state now: every change folded in while nothing was
            // written.
            let now = (self.clock)();
            self.stamp(now);
            self.write_checkpoint()?;
        }
        self.failure = None;
        Ok(())
    }

    /// Marks the journal failed on an error (the first one's time and
    /// words are kept).
    fn failed_if(&mut self, result: std::io::Result<()>) -> std::io::Result<()> {
        if let Err(error) = &result
            && self.failure.is_none()
        {
            self.failure = Some(Failure {
                since: (self.clock)(),
                error: error.to_string(),
            });
        }
        result
    }

    /// Ends the recording: its end line, stamped now (never earlier than
    /// the line before), says it went on until then — not only until its
    /// last change. Nothing is written to a journal that has no header
    /// yet (it recorded nothing), and nothing can be recorded after.
    pub fn finish(mut self) -> std::io::Result<()> {
        if self.header_due || self.failure.is_some() {
            return Ok(());
        }
        let time = self.stamp((self.clock)());
        self.line.clear();
        format::encode_tagged(&mut self.line, "end", &RecordingEnd { time });
        self.write_line()
    }

    /// For a key that stops being held: whether one of its holders still
    /// runs (released, not exited).
    fn holder_alive(&self, delta: &Delta) -> Option<bool> {
        let (key, now_held) = match delta {
            Delta::Key { key, state, .. } => (key, state.liveness.is_held()),
            Delta::Removed { key, .. } => (key, false),
            _ => return None,
        };
        let before = self.state.keys().get(key)?;
        if now_held || !before.liveness.is_held() || before.holders.is_empty() {
            return None;
        }
        Some(
            before
                .holders
                .iter()
                .any(|holder| (self.pid_alive)(holder.pid)),
        )
    }

    fn stamp(&mut self, time: SystemTime) -> SystemTime {
        self.last_time = self.last_time.max(time);
        self.last_time
    }

    fn write_line(&mut self) -> std::io::Result<()> {
        format::number_line(&mut self.line, self.next_line);
        self.sink.write_all(&self.line)?;
        self.sink.flush()?;
        self.next_line += 1;
        let bytes = self.line.len() as u64;
        self.written += bytes;
        self.total_written += bytes;
        self.since_checkpoint += bytes;
        Ok(())
    }

    /// A checkpoint when the changes since the last one outgrew it; a new
    /// file when this one is full.
    fn after_change(&mut self) -> std::io::Result<()> {
        if let Output::File {
            max_size: Some(max_size),
            ..
        } = self.output
            && self.written >= max_size
        {
            return self.rotate();
        }
        if self.since_checkpoint >= self.checkpoint_every.max(self.checkpoint_size) {
            self.write_checkpoint()?;
        }
        Ok(())
    }

    fn rotate(&mut self) -> std::io::Result<()> {
        self.sink.flush()?;
        self.sink = open_next(&self.output, false).map_err(std::io::Error::other)?;
        self.part += 1;
        self.written = 0;
        self.next_line = 0;
        self.write_header().map_err(std::io::Error::other)?;
        self.write_checkpoint()
    }

    fn write_header(&mut self) -> anyhow::Result<()> {
        let header = Header {
            format: FORMAT.to_string(),
            version: VERSION,
            host: host_name(),
            state_dir: self.recording.state_dir.clone(),
            locktop: env!("CARGO_PKG_VERSION").to_string(),
            started: (self.clock)().max(self.last_time),
            recording_started: self.started,
            part: self.part,
            probe: self.recording.probe,
            materializing_after: self.materializing_after.as_secs_f64(),
            after_failure: self.after_failure.clone(),
            checked_lines: true,
        };
        self.line.clear();
        format::encode_tagged(&mut self.line, "journal", &header);
        format::number_line(&mut self.line, 0);
        self.sink.write_all(&self.line)?;
        self.sink.flush()?;
        self.next_line = 1;
        self.written += self.line.len() as u64;
        self.total_written += self.line.len() as u64;
        Ok(())
    }

    /// The whole state, as lines: the head, each key that is not simply
    /// free with its state, the free keys by directory, the end.
    fn write_checkpoint(&mut self) -> std::io::Result<()> {
        // The state it states is that of the last line written.
        let time = self.last_time;
        let watcher = self.state.watcher();
        let keys = self.state.keys();
        let mut out = Vec::with_capacity(CHUNK);
        let mut size = 0u64;
        let mut flush = |out: &mut Vec<u8>, sink: &mut Sink| {
            size += out.len() as u64;
            let result = sink.write_all(out);
            out.clear();
            result
        };
        let mut n = self.next_line;
        let mut numbered = |out: &mut Vec<u8>| {
            format::number_line(out, n);
            n += 1;
        };
        format::encode_checkpoint_head(&mut out, time, keys.len(), watcher);
        numbered(&mut out);
        let mut free: std::collections::BTreeMap<&Path, (crate::disk::KeyKind, Vec<&str>)> =
            std::collections::BTreeMap::new();
        for (key, state) in keys.iter() {
            if state.is_bare_free() {
                free.entry(key.dir())
                    .or_insert_with(|| (key.kind(), Vec::new()))
                    .1
                    .push(key.key());
                continue;
            }
            format::encode_tagged(&mut out, "ck", &checkpoint_key(&self.root, key, state));
            numbered(&mut out);
            if out.len() >= CHUNK {
                flush(&mut out, &mut self.sink)?;
            }
        }
        for (dir, (kind, names)) in free {
            let dir = dir
                .strip_prefix(&self.root)
                .unwrap_or(dir)
                .to_string_lossy();
            for chunk in names.chunks(FREE_PER_LINE) {
                let line = CheckpointFree {
                    kind,
                    dir: dir.clone(),
                    keys: chunk.iter().map(|key| (*key).into()).collect(),
                };
                format::encode_tagged(&mut out, "cf", &line);
                numbered(&mut out);
                if out.len() >= CHUNK {
                    flush(&mut out, &mut self.sink)?;
                }
            }
        }
        format::encode_tagged(
            &mut out,
            "checkpoint_end",
            &CheckpointEnd {
                time,
                keys: keys.len(),
            },
        );
        numbered(&mut out);
        flush(&mut out, &mut self.sink)?;
        self.sink.flush()?;
        self.next_line = n;
        self.written += size;
        self.total_written += size;
        self.checkpoint_size = size;
        self.since_checkpoint = 0;
        Ok(())
    }
}

fn checkpoint_key<'a>(root: &Path, key: &'a LockKey, state: &KeyState) -> CheckpointKey<'a> {
    CheckpointKey {
        key: KeyRef {
            kind: key.kind(),
            name: key.name().into(),
            dir: format::relative_dir(root, key),
        },
        state: state.clone(),
    }
}

/// `.FILE.lock` beside FILE: what a recording into FILE holds for its
/// life. Hidden, so that `FILE*` (how a rotated set is given to
/// `replay`) does not name it.
pub fn lock_path(path: &Path) -> PathBuf {
    let mut name = std::ffi::OsString::from(".");
    name.push(path.file_name().unwrap_or(path.as_os_str()));
    name.push(".lock");
    path.with_file_name(name)
}

/// Takes `.FILE.lock` (an exclusive `flock`, never waited for): a
/// recording already writing FILE — another `record`, or `serve
/// --journal` — makes this one refused.
fn claim(path: &Path) -> anyhow::Result<File> {
    let lock_path = lock_path(path);
    let lock = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(|error| anyhow::anyhow!("cannot write {}: {error}", lock_path.display()))?;
    match lock.try_lock() {
        Ok(()) => Ok(lock),
        Err(std::fs::TryLockError::WouldBlock) => anyhow::bail!(
            "{} is being recorded by another locktop (record, or serve --journal: it holds {}): a journal has one writer",
            path.display(),
            lock_path.display()
        ),
        Err(std::fs::TryLockError::Error(error)) => {
            anyhow::bail!("cannot lock {}: {error}", lock_path.display())
        }
    }
}

/// Opens the output for the journal's first file: an existing file is
/// moved into the rotated set when the output rotates; an unrotated
/// existing recording is refused.
fn open_first(output: &Output) -> anyhow::Result<Sink> {
    let Output::File {
        path,
        max_size,
        keep,
    } = output
    else {
        return Ok(Sink::Stdout(std::io::stdout()));
    };
    let exists = std::fs::metadata(path).is_ok_and(|meta| meta.len() > 0);
    if exists {
        if max_size.is_none() {
            anyhow::bail!(
                "{} exists: a recording is never overwritten (choose another --out, or rotate with --max-size)",
                path.display()
            );
        }
        if *keep <= 1 {
            anyhow::bail!(
                "{} exists, and --keep 1 would delete it: a recording is never overwritten (keep 2 or more, or choose another --out)",
                path.display()
            );
        }
    }
    open_next(output, false)
}

/// Opens the next file of the journal: the current one is moved into
/// the rotated set first when it holds anything (unless `reuse`: it
/// holds nothing whole, and is emptied). Only the recording holding the
/// lock calls this, so the file it creates is new: created exclusively,
/// opened to append.
fn open_next(output: &Output, reuse: bool) -> anyhow::Result<Sink> {
    let Output::File { path, keep, .. } = output else {
        return Ok(Sink::Stdout(std::io::stdout()));
    };
    let whole = std::fs::metadata(path).is_ok_and(|meta| meta.is_file() && meta.len() > 0);
    if whole && !reuse {
        rotate_files(path, *keep)?;
    }
    // Gone (rotated, or never there): created exclusively. Still there
    // (empty, a device such as /dev/stdout): appended to.
    let mut options = File::options();
    match std::fs::symlink_metadata(path) {
        Err(_) => options.create_new(true).append(true),
        Ok(_) => options.append(true),
    };
    let file = options
        .open(path)
        .map_err(|error| anyhow::anyhow!("cannot write {}: {error}", path.display()))?;
    Ok(Sink::File(file))
}

/// Moves `path` to `path.N` (N one more than the highest there), and
/// deletes the oldest rotated files past `keep` files in all.
fn rotate_files(path: &Path, keep: usize) -> anyhow::Result<()> {
    let mut rotated = rotated_files(path);
    let next = rotated.last().map_or(1, |(n, _)| n + 1);
    let target = numbered(path, next);
    std::fs::rename(path, &target).map_err(|error| {
        anyhow::anyhow!(
            "cannot rotate {} to {}: {error}",
            path.display(),
            target.display()
        )
    })?;
    rotated.push((next, target));
    // `keep` files in all: the new current one and keep - 1 rotated.
    let excess = rotated.len().saturating_sub(keep.max(1) - 1);
    for (_, old) in rotated.into_iter().take(excess) {
        let _ = std::fs::remove_file(old);
    }
    Ok(())
}

/// `path.N`.
fn numbered(path: &Path, n: u64) -> PathBuf {
    let mut name = path.as_os_str().to_os_string();
    name.push(format!(".{n}"));
    PathBuf::from(name)
}

/// The rotated files of `path` (`path.N`), oldest (lowest N) first.
fn rotated_files(path: &Path) -> Vec<(u64, PathBuf)> {
    let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
        return Vec::new();
    };
    let dir = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    let name = name.to_string_lossy();
    let mut found: Vec<(u64, PathBuf)> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let file = entry.file_name();
            let n = file
                .to_str()?
                .strip_prefix(name.as_ref())?
                .strip_prefix('.')?
                .parse()
                .ok()?;
            Some((n, numbered(path, n)))
        })
        .collect();
    found.sort();
    found
}

/// This host's name (`/proc/sys/kernel/hostname`), or `unknown`.
pub fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|name| name.trim().to_string())
        .ok()
        .filter(|name| !name.is_empty())
        .unwrap_or_else(|| "unknown".to_string())
}
