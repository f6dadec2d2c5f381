//! The lines of a journal set from a position on, across its files.
//!
//! Invariant: going from one file to the next, a checkpoint of the same
//! recording restates what the lines said and is skipped; the first
//! checkpoint of another recording becomes changes (its differences from
//! the state so far), stamped with its time.

use std::fs::File;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::time::SystemTime;

use anyhow::{Context as _, bail};

use super::file::trim_newline;
use super::{JournalSet, Position};
use crate::engine::Delta;
use crate::engine::fold::Fold;
use crate::format::{self, Entry, Namer};

/// The lines of a journal set from a position on, across its files.
pub struct Lines<'s> {
    set: &'s JournalSet,
    position: Position,
    reader: BufReader<File>,
    namer: Namer,
    line: Vec<u8>,
    /// Return checkpoint lines as they are (loading a checkpoint);
    /// otherwise a checkpoint of the same recording is skipped and one
    /// of another recording becomes changes.
    pub(super) raw_checkpoints: bool,
    /// Changes waiting to be returned (another recording's checkpoint).
    pending: std::collections::VecDeque<Entry>,
}

impl<'s> Lines<'s> {
    pub(super) fn open(set: &'s JournalSet, position: Position) -> anyhow::Result<Self> {
        let path = &set.files[position.file].path;
        let mut file =
            File::open(path).with_context(|| format!("cannot read {}", path.display()))?;
        file.seek(SeekFrom::Start(position.offset))?;
        Ok(Self {
            set,
            position,
            reader: BufReader::with_capacity(256 << 10, file),
            namer: Namer::new(&set.files[0].header.state_dir),
            line: Vec::new(),
            raw_checkpoints: false,
            pending: std::collections::VecDeque::new(),
        })
    }

    /// Where the next line starts.
    pub fn position(&self) -> Position {
        self.position
    }

    /// The next entry; `state` is the state the entries so far lead to
    /// (what another recording's checkpoint is compared with). `None` at
    /// the end of the last file.
    pub fn next_entry(&mut self, state: &Fold) -> anyhow::Result<Option<Entry>> {
        if let Some(entry) = self.pending.pop_front() {
            return Ok(Some(entry));
        }
        loop {
            let file = &self.set.files[self.position.file];
            self.line.clear();
            let read = if self.position.offset >= file.len {
                0
            } else {
                (&mut self.reader)
                    .take(file.len - self.position.offset)
                    .read_until(b'\n', &mut self.line)?
            };
            if read == 0 {
                if self.raw_checkpoints || self.position.file + 1 >= self.set.files.len() {
                    return Ok(None);
                }
                self.next_file(state)?;
                if let Some(entry) = self.pending.pop_front() {
                    return Ok(Some(entry));
                }
                continue;
            }
            let start = self.position.offset;
            self.position.offset += read as u64;
            if !self.line.ends_with(b"\n") {
                self.set.warn(format!(
                    "{}: skipped a torn last line at byte {start} ({read} bytes without a newline)",
                    file.path.display()
                ));
                continue;
            }
            let line = trim_newline(&self.line);
            if !self.raw_checkpoints
                && (line.starts_with(b"{\"ck\":")
                    || line.starts_with(b"{\"cf\":")
                    || line.starts_with(b"{\"checkpoint_end\":"))
            {
                continue;
            }
            match format::decode(line, &mut self.namer) {
                Ok(Entry::CheckpointHead(_)) if !self.raw_checkpoints => continue,
                Ok(Entry::Header(_)) => continue,
                Ok(entry) => return Ok(Some(entry)),
                Err(error) => self.set.warn(format!(
                    "{}: skipped line at byte {start}: {error}",
                    file.path.display()
                )),
            }
        }
    }

    /// Moves to the next file; when it starts another recording, its
    /// first checkpoint's differences from `state` become pending
    /// changes.
    fn next_file(&mut self, state: &Fold) -> anyhow::Result<()> {
        let previous = &self.set.files[self.position.file].header;
        let index = self.position.file + 1;
        let next = &self.set.files[index];
        let same_recording = next.header.recording_started == previous.recording_started
            && next.header.part == previous.part + 1;
        let Some((offset, _)) = next.first_checkpoint else {
            bail!("{}: no checkpoint", next.path.display());
        };
        if !same_recording
            && let Some((checkpoint, after, time)) = self.set.load_checkpoint(Position {
                file: index,
                offset,
            })?
        {
            let pending = differences(state, &checkpoint, time);
            *self = Self::open(self.set, after)?;
            self.pending.extend(pending);
            return Ok(());
        }
        *self = Self::open(
            self.set,
            Position {
                file: index,
                offset,
            },
        )?;
        Ok(())
    }
}

/// The changes that take `from` to `to`, stamped `time`.
fn differences(from: &Fold, to: &Fold, time: SystemTime) -> Vec<Entry> {
    let mut changes = Vec::new();
    for (key, state) in to.keys().iter() {
        let before = from.keys().get(key);
        if before != Some(state) {
            changes.push(Entry::Change {
                delta: Delta::Key {
                    key: key.clone(),
                    state: state.clone(),
                    previous: before.map(|state| state.liveness),
                    at: time,
                },
                time,
                holder_alive: None,
            });
        }
    }
    for (key, state) in from.keys().iter() {
        if !to.keys().contains_key(key) {
            changes.push(Entry::Change {
                delta: Delta::Removed {
                    key: key.clone(),
                    previous: state.liveness,
                    at: time,
                },
                time,
                holder_alive: None,
            });
        }
    }
    if to.watcher().health != from.watcher().health {
        changes.push(Entry::Change {
            delta: Delta::Health(to.watcher().health.clone()),
            time,
            holder_alive: None,
        });
    }
    if to.watcher().problems != from.watcher().problems {
        changes.push(Entry::Change {
            delta: Delta::Problems(to.watcher().problems.clone()),
            time,
            holder_alive: None,
        });
    }
    changes
}
