//! Files known to be no claim's — a foreign lock on the state dir's
//! filesystem, which the kernel's device filter cannot tell from a claim
//! — and which of them the kernel's filter drops.
//!
//! Nobody waits for a quiet file's events: they are handed over as any,
//! in drain order, but no drain is owed to them (owed one a reorder window
//! after each, a host's foreign flocks — thousands a second — kept the
//! reader draining and handing over every ~250 µs). Better still, the
//! busiest are not sampled at all: each sample costs the flocking process
//! (a process flocking a file on the state dir's filesystem every 100 µs
//! beside one monitor: p99 21–22 µs, against 4.8–4.9 µs on a filesystem
//! the filter drops), and costs every monitor a record to read.
//!
//! How a file comes to be dropped, and back ([`Dropping`], run by the
//! reader at each wake-up):
//! - a quiet file with [`HOT_EVENTS`] events within [`HOT_SPAN`] is
//!   dropped by its device's filter (replaced at most every
//!   [`REFILTER_EVERY`]); a device's filter drops at most [`MAX_DROPPED`]
//!   files, and when it is full the files dropped longest ago make room
//!   (sampled again: a foreign lock file deleted since keeps no slot);
//! - whoever learns that a file is a claim's removes it from the quiet
//!   files (an inode reused by a new claim file, a file moved into the
//!   locks root); at the reader's next wake-up the filter samples it again,
//!   and a [`super::Record::Readmitted`] after that tells the engine that
//!   what the file did meanwhile is unknown (it judges everything again).
//!
//! Invariants: `dropped` ⊆ `files` except between a removal from `files`
//! and the reader's next wake-up (files are chosen and marked under one
//! lock); a file is in a filter's dropped inodes only while it is in
//! `dropped` (added before, removed after the filter changes); whoever
//! bounds `files` keeps the dropped ones ([`Quiet::bound`]). A file
//! leaves `dropped` in two ways only: made room for (still quiet, so
//! nothing of a claim's was missed; no record), or no longer quiet — a
//! claim's, or possibly one — readmitted with a record. A file is called
//! no claim's only when the path a process opened it by is, as this
//! process sees it, that very file and its only name (a hard link of a
//! claim's file outside the locks root, or a container's path, is not).

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet, VecDeque};
use std::sync::{Arc, PoisonError, RwLock};
use std::time::{Duration, Instant};

use super::filter::MAX_DROPPED;
use super::{KernelLockEvents, Record};
use crate::liveness::proc_locks::FileId;

/// A quiet file this busy is dropped by the kernel's filter: [`HOT_EVENTS`]
/// events within [`HOT_SPAN`].
pub(crate) const HOT_EVENTS: u32 = 64;

/// See [`HOT_EVENTS`].
pub(crate) const HOT_SPAN: Duration = Duration::from_secs(1);

/// The least time between two filter replacements that drop more files
/// (a readmission does not wait); [`HOT_SPAN`] after one that had to make
/// room.
pub(crate) const REFILTER_EVERY: Duration = Duration::from_millis(100);

/// How long no file is dropped after the kernel refused a filter.
pub(crate) const REFUSED_PAUSE: Duration = Duration::from_secs(60);

/// The quiet files, shared by whoever learns of them (the engine) and the
/// reader.
pub(crate) type QuietFiles = Arc<RwLock<Quiet>>;

/// Files known to be no claim's, and which of them the filter drops.
#[derive(Debug, Default)]
pub struct Quiet {
    files: HashSet<FileId>,
    dropped: HashSet<FileId>,
}

impl Quiet {
    /// Whether `file` is known to be no claim's.
    pub fn contains(&self, file: &FileId) -> bool {
        self.files.contains(file)
    }

    /// `file` is known to be no claim's.
    pub fn insert(&mut self, file: FileId) {
        self.files.insert(file);
    }

    /// `file` is a claim's (or may be): its events are waited for again,
    /// and, if the filter drops it, the reader readmits it.
    pub fn remove(&mut self, file: &FileId) {
        self.files.remove(file);
    }

    /// Forgets every quiet file that is not dropped (the dropped ones stay:
    /// only a claim may readmit them).
    pub fn clear(&mut self) {
        let dropped = &self.dropped;
        self.files.retain(|file| dropped.contains(file));
    }

    /// [`Self::clear`] once there are `max` files or more.
    pub fn bound(&mut self, max: usize) {
        if self.files.len() >= max {
            self.clear();
        }
    }

    /// Whether the kernel's filter drops `file`.
    pub(crate) fn is_dropped(&self, file: &FileId) -> bool {
        self.dropped.contains(file)
    }

    /// How many files the filter drops.
    pub(crate) fn dropped_count(&self) -> usize {
        self.dropped.len()
    }
}

/// Reads a [`QuietFiles`] (a poisoned lock is read as it stands).
pub fn read(quiet: &QuietFiles) -> std::sync::RwLockReadGuard<'_, Quiet> {
    quiet.read().unwrap_or_else(PoisonError::into_inner)
}

/// Writes a [`QuietFiles`] (a poisoned lock is written as it stands).
pub fn write(quiet: &QuietFiles) -> std::sync::RwLockWriteGuard<'_, Quiet> {
    quiet.write().unwrap_or_else(PoisonError::into_inner)
}

/// The reader's side: which quiet files are hot, and the filters
/// that drop them.
#[derive(Debug)]
pub struct Dropping {
    quiet: QuietFiles,
    /// Events of each quiet file not dropped, since `counted_since`.
    events: HashMap<FileId, u32>,
    counted_since: Instant,
    /// Hot files not dropped yet (waiting for [`REFILTER_EVERY`]).
    hot: BTreeSet<FileId>,
    /// The dropped files, oldest first.
    order: VecDeque<FileId>,
    next_refilter: Instant,
    /// A filter was refused: none is tried again before this (the
    /// device's filter stands as it was).
    refused_until: Option<Instant>,
}

impl Dropping {
    /// Nothing dropped, nothing counted yet.
    pub fn new(quiet: QuietFiles) -> Self {
        let now = Instant::now();
        Self {
            quiet,
            events: HashMap::new(),
            counted_since: now,
            hot: BTreeSet::new(),
            order: VecDeque::new(),
            next_refilter: now,
            refused_until: None,
        }
    }

    /// Before a drain: readmits every dropped file that is no longer
    /// quiet (its filter no longer drops it); returns the record that
    /// says so, to hand over after the drain's (`None` when none was).
    pub(crate) fn readmit(&mut self, reader: &mut KernelLockEvents) -> Option<Record> {
        let gone: Vec<FileId> = {
            let quiet = read(&self.quiet);
            quiet
                .dropped
                .iter()
                .filter(|file| !quiet.files.contains(file))
                .copied()
                .collect()
        };
        if gone.is_empty() {
            return None;
        }
        let mut readmitted: Vec<FileId> = Vec::new();
        for (device, inodes) in by_device(&gone) {
            let kept = reader
                .dropped(device)
                .difference(&inodes)
                .copied()
                .collect();
            match reader.set_dropped(device, kept) {
                Ok(_) => readmitted.extend(
                    gone.iter()
                        .filter(|file| (file.major, file.minor) == device),
                ),
                // The old filter still drops them: they stay dropped, and
                // are tried again at the next wake-up (each device on its
                // own: one that failed holds up no other).
                Err(error) => tracing::warn!(
                    %error,
                    "the lock events' filter could not readmit a claim's file"
                ),
            }
        }
        if readmitted.is_empty() {
            return None;
        }
        let mut quiet = write(&self.quiet);
        for file in &readmitted {
            quiet.dropped.remove(file);
        }
        self.order.retain(|file| !readmitted.contains(file));
        Some(Record::Readmitted(readmitted.len() as u64))
    }

    /// After a drain: counts the events of quiet files in `records`, and
    /// drops the hot ones when a filter may be replaced.
    pub fn count(&mut self, records: &[Record], reader: &mut KernelLockEvents) {
        let now = Instant::now();
        if now.duration_since(self.counted_since) >= HOT_SPAN {
            self.events.clear();
            self.counted_since = now;
        }
        {
            let quiet = read(&self.quiet);
            for record in records {
                let Record::Event(event) = record else {
                    continue;
                };
                if !quiet.files.contains(&event.file) || quiet.dropped.contains(&event.file) {
                    continue;
                }
                let seen = self.events.entry(event.file).or_default();
                *seen += 1;
                if *seen == HOT_EVENTS {
                    self.hot.insert(event.file);
                }
            }
        }
        if self.refused_until.is_some_and(|until| now < until) {
            return;
        }
        if self.hot.is_empty() || now < self.next_refilter {
            return;
        }
        self.next_refilter = now + REFILTER_EVERY;
        self.drop_hot(reader);
    }

    /// Drops the hot files still quiet; where a device's filter is full,
    /// its files dropped longest ago make room (sampled again, still
    /// quiet: no claim's, so nothing was missed).
    fn drop_hot(&mut self, reader: &mut KernelLockEvents) {
        // Chosen and marked under one lock: a file the engine finds to be
        // a claim's (or forgets) meanwhile is either not chosen, or
        // readmitted at the next wake-up.
        let mut quiet = write(&self.quiet);
        let hot: Vec<FileId> = std::mem::take(&mut self.hot)
            .into_iter()
            .filter(|file| quiet.files.contains(file))
            .collect();
        for (device, inodes) in by_device(&hot) {
            let file = |inode| FileId {
                major: device.0,
                minor: device.1,
                inode,
            };
            let now = reader.dropped(device);
            let added: Vec<u64> = inodes
                .into_iter()
                .filter(|inode| !now.contains(inode))
                .take(MAX_DROPPED)
                .collect();
            if added.is_empty() {
                continue;
            }
            let overflow = (now.len() + added.len()).saturating_sub(MAX_DROPPED);
            let evicted: Vec<FileId> = self
                .order
                .iter()
                .filter(|old| (old.major, old.minor) == device)
                .take(overflow)
                .copied()
                .collect();
            let mut next = now;
            for old in &evicted {
                next.remove(&old.inode);
            }
            next.extend(&added);
            // Marked before the filter drops them: a claim that takes one
            // meanwhile is readmitted at the next wake-up.
            for &inode in &added {
                quiet.dropped.insert(file(inode));
            }
            if let Err(error) = reader.set_dropped(device, next) {
                tracing::warn!(%error, "the lock events' filter refused to drop foreign files; they stay sampled for a while");
                self.refused_until = Some(Instant::now() + REFUSED_PAUSE);
                for &inode in &added {
                    quiet.dropped.remove(&file(inode));
                }
                return;
            }
            if !evicted.is_empty() {
                // More busy foreign files than slots: replace no more
                // than once a span, whoever makes them.
                self.next_refilter = Instant::now() + HOT_SPAN;
            }
            // Unmarked once the filter samples them again.
            for old in &evicted {
                quiet.dropped.remove(old);
            }
            self.order.retain(|old| !evicted.contains(old));
            self.order.extend(added.into_iter().map(file));
        }
    }
}

/// `files` grouped by device, as inode sets.
fn by_device(files: &[FileId]) -> BTreeMap<(u32, u32), BTreeSet<u64>> {
    let mut devices: BTreeMap<(u32, u32), BTreeSet<u64>> = BTreeMap::new();
    for file in files {
        devices
            .entry((file.major, file.minor))
            .or_default()
            .insert(file.inode);
    }
    devices
}
