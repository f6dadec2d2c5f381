//! Reading journals: a set of files (one recording's rotated parts, or
//! several recordings of one state dir) put in time order, the state at
//! any time, and the lines after any point.
//!
//! Invariants:
//! - the state at a time is found from the last complete checkpoint
//!   before it and the lines after that checkpoint up to the time, never
//!   from a scan of the whole file: checkpoints are found by bisecting
//!   the file by byte offset (a checkpoint's first line is recognisable
//!   from its first bytes, and checkpoints are in time order), so a
//!   1 GB journal costs reading some tens of MB (measured: 23–36 MB in
//!   256 KiB reads, with checkpoints 4.6 MB apart);
//! - a torn last line (no newline: a crash, a full disk) is skipped with
//!   a warning ([`JournalSet::take_warnings`]); a damaged line — one that
//!   does not parse, is out of number or time order, or follows missing
//!   lines (see [`Lines`]) — is skipped with a warning too, and makes the
//!   state unsure until the next whole checkpoint: a state asked for in
//!   between carries the doubt ([`Replayed::doubt`]) and is never given
//!   as if it were sure;
//! - a file's first checkpoint is the head numbered 1 (line 1, or line 2
//!   when a line was moved or copied in before it — that line is never
//!   read, and its own place shows it missing);
//! - a checkpoint is used only when whole: its head, every key line its
//!   head counts, and its end, with nothing damaged between; otherwise
//!   the one before is (said);
//! - a gap in a recording's part numbers is a missing part: said as
//!   missing ([`JournalSet::gap_at`]), never as time nothing was
//!   recorded; two files claiming one part of one recording are refused
//!   (the same file given twice is read once);
//! - a recording ends at its end line's time (a clean stop wrote one),
//!   else at its last line's — and then its last millisecond is not known
//!   whole (a file cut short may have lost later lines stamped with it),
//!   so a time at that end is past the end as much as one after it
//!   ([`JournalSet::past_end`]), or in the gap before the next
//!   recording ([`JournalSet::gap_at`]);
//! - going from one file to the next, a checkpoint of the same recording
//!   restates what the lines said and is skipped; the first checkpoint of
//!   another recording replaces the state, as changes (the keys that
//!   changed while nothing recorded them), stamped with its time.

use std::collections::HashSet;
use std::fs::File;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use anyhow::{Context as _, bail};

use crate::engine::{Delta, KeyState};

use super::format::{Entry, Header};
use crate::engine::fold::Fold;

mod file;
mod lines;

use file::{next_checkpoint, open_file};
pub use lines::Lines;

/// One file of a journal.
#[derive(Debug, Clone)]
pub struct JournalFile {
    /// Where.
    pub path: PathBuf,
    /// Its first line.
    pub header: Header,
    /// Its size when opened (lines after it are not read).
    pub len: u64,
    /// Its device and inode: the same file by two names is one.
    identity: (u64, u64),
    /// Its first checkpoint: where it starts, and its time.
    first_checkpoint: Option<(u64, SystemTime)>,
    /// The time of its last line that carries one — its end line, after
    /// a clean stop (read once, at open).
    end: SystemTime,
    /// Whether that last line is a clean stop's end line.
    stopped_cleanly: bool,
}

/// A place in a journal set: a file and a byte offset in it, and what
/// the line there must follow (`None`: nothing known of the lines
/// before).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Position {
    /// Which file of the set.
    pub file: usize,
    /// Where in it a line starts.
    pub offset: u64,
    /// What the lines before it said.
    pub after: Option<Mark>,
}

impl Position {
    /// The line at `offset` of file `file`, nothing known before it.
    pub fn at(file: usize, offset: u64) -> Self {
        Self {
            file,
            offset,
            after: None,
        }
    }
}

/// What the lines read so far said, for the next to be checked against.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Mark {
    /// The last line's number in its file.
    pub n: Option<u64>,
    /// The last time a line carried.
    pub time: Option<SystemTime>,
    /// Damage since the last whole state.
    pub doubt: Option<Doubt>,
}

/// Damage that makes the state unsure from a line on, until the next
/// whole checkpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Doubt {
    /// Which file of the set.
    pub file: usize,
    /// Where the damaged line starts.
    pub offset: u64,
    /// What was wrong.
    pub what: Damage,
    /// The time of the last line read whole before it: the state is
    /// sure up to it.
    pub known_until: Option<SystemTime>,
}

/// What was wrong with a line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Damage {
    /// It does not parse.
    Unreadable,
    /// Its number or time is out of order.
    OutOfOrder,
    /// Lines before it are missing (how many).
    Missing(u64),
}

impl std::fmt::Display for Damage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Damage::Unreadable => f.write_str("a line that does not parse"),
            Damage::OutOfOrder => f.write_str("a line out of order"),
            Damage::Missing(1) => f.write_str("a missing line"),
            Damage::Missing(n) => write!(f, "{n} missing lines"),
        }
    }
}

/// Parts of a recording that are not in the set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MissingParts {
    /// The first missing part's number.
    pub from: u64,
    /// The last one's.
    pub to: u64,
    /// The end of the part before them.
    pub after: SystemTime,
    /// The first checkpoint of the part after them.
    pub until: SystemTime,
}

impl std::fmt::Display for MissingParts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.from == self.to {
            write!(f, "part {} of the recording is missing", self.from)?;
        } else {
            write!(
                f,
                "parts {}–{} of the recording are missing",
                self.from, self.to
            )?;
        }
        write!(
            f,
            " (deleted, or not given): nothing is known from {} to {}",
            crate::time_format::rfc3339(self.after),
            crate::time_format::rfc3339(self.until)
        )
    }
}

/// Time a set of journals has no state for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gap {
    /// The last recorded time before it.
    pub from: SystemTime,
    /// The first recorded time after it.
    pub to: SystemTime,
    /// Why: parts of the recording missing, or between two recordings
    /// (nothing recorded).
    pub why: GapWhy,
}

/// Why a [`Gap`] has no state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GapWhy {
    /// Between two recordings: nothing recorded; the second one's first
    /// header may say why the first stopped.
    NotRecorded(Option<String>),
    /// Parts of one recording are missing: recorded, not here.
    Missing(MissingParts),
}

/// Journal files of one state dir, in time order.
#[derive(Debug)]
pub struct JournalSet {
    files: Vec<JournalFile>,
    warnings: Mutex<Warnings>,
}

/// What was skipped and not yet taken; each said once.
#[derive(Debug, Default)]
struct Warnings {
    new: Vec<String>,
    said: HashSet<String>,
}

/// The state at a time, and where the lines after it start.
#[derive(Debug, Clone)]
pub struct Replayed {
    /// Every key's state and the watcher's view.
    pub state: Fold,
    /// The first line after the time.
    pub next: Position,
    /// The time of the last key change folded in after the checkpoint.
    pub last_change: Option<SystemTime>,
    /// Where the checkpoint it started from starts.
    pub checkpoint_at: Position,
    /// Damage between that checkpoint and the time: the state may be
    /// wrong (see [`JournalSet::doubt_words`]).
    pub doubt: Option<Doubt>,
}

/// A checkpoint read: whole, or why not.
pub(super) enum Loaded {
    /// Its state, the line after its end, its time.
    Whole(Box<Fold>, Position, SystemTime),
    /// Not whole: why.
    NotWhole(String),
}

impl Loaded {
    pub(super) fn whole(self) -> Option<(Fold, Position, SystemTime)> {
        match self {
            Loaded::Whole(state, next, time) => Some((*state, next, time)),
            Loaded::NotWhole(_) => None,
        }
    }
}

impl JournalSet {
    /// Opens `paths` (files, or directories whose journal files are
    /// read): one line of error for a file that is not a journal, is of
    /// a newer format, or records another state dir or host.
    pub fn open(paths: &[PathBuf]) -> anyhow::Result<Self> {
        let mut files = Vec::new();
        let set = Self {
            files: Vec::new(),
            warnings: Mutex::new(Warnings::default()),
        };
        for path in paths {
            if path.is_dir() {
                let mut entries: Vec<PathBuf> = std::fs::read_dir(path)
                    .with_context(|| format!("cannot read {}", path.display()))?
                    .flatten()
                    .map(|entry| entry.path())
                    .filter(|path| path.is_file())
                    .collect();
                entries.sort();
                let before = files.len();
                for entry in entries {
                    // A directory may hold other files: only journals
                    // count, and a journal that cannot be read is said.
                    match open_file(&entry) {
                        Ok(file) => files.push(file),
                        Err(error) if error.to_string().contains("journal format version") => {
                            set.warn(format!("skipped: {error:#}"));
                        }
                        Err(_) => {}
                    }
                }
                if files.len() == before {
                    bail!("{}: no locktop journal in this directory", path.display());
                }
            } else {
                files.push(open_file(path)?);
            }
        }
        let Some(first) = files.first() else {
            bail!("no journal given");
        };
        let (state_dir, host) = (first.header.state_dir.clone(), first.header.host.clone());
        for file in &files {
            if file.header.state_dir != state_dir || file.header.host != host {
                bail!(
                    "{} records {} on {}, {} records {} on {}: replay one state dir at a time",
                    first.path.display(),
                    state_dir.display(),
                    host,
                    file.path.display(),
                    file.header.state_dir.display(),
                    file.header.host
                );
            }
        }
        files.sort_by_key(|file| {
            (
                file.header.recording_started,
                file.header.part,
                file.header.started,
            )
        });
        // The same file given twice (by two names, a link) is read once;
        // two files claiming one part of one recording are refused.
        let mut seen = HashSet::new();
        files.retain(|file| seen.insert(file.identity));
        for pair in files.windows(2) {
            let (a, b) = (&pair[0], &pair[1]);
            if a.header.recording_started == b.header.recording_started
                && a.header.part == b.header.part
            {
                bail!(
                    "{} and {} are both part {} of the recording started at {}: two copies of one file, or one altered; give one",
                    a.path.display(),
                    b.path.display(),
                    a.header.part,
                    crate::time_format::rfc3339(a.header.recording_started)
                );
            }
        }
        let mut warnings = set.warnings.into_inner().unwrap_or_default();
        files.retain(|file| {
            let complete = file.first_checkpoint.is_some();
            if !complete {
                warnings.new.push(format!(
                    "{}: no complete checkpoint (the recorder stopped before its first scan ended): skipped",
                    file.path.display()
                ));
            }
            complete
        });
        if files.is_empty() {
            bail!("no journal with a complete checkpoint: nothing to replay");
        }
        // Two recorders at once (say `serve --journal` and a `record`)
        // would interleave two histories: refused, not merged.
        for pair in files.windows(2) {
            let (before, after) = (&pair[0], &pair[1]);
            let other_recording = after.header.recording_started != before.header.recording_started;
            if let Some((_, starts)) = after.first_checkpoint
                && other_recording
                && starts < before.end
            {
                bail!(
                    "{} and {} overlap in time ({} began before {} ended): two recordings made at once; replay them one at a time",
                    before.path.display(),
                    after.path.display(),
                    crate::time_format::rfc3339(starts),
                    crate::time_format::rfc3339(before.end)
                );
            }
        }
        Ok(Self {
            files,
            warnings: Mutex::new(warnings),
        })
    }

    /// The files, in time order.
    pub fn files(&self) -> &[JournalFile] {
        &self.files
    }

    /// The first file's header.
    pub fn header(&self) -> &Header {
        &self.files[0].header
    }

    /// What was skipped since the last call, one line each.
    pub fn take_warnings(&self) -> Vec<String> {
        std::mem::take(&mut self.warnings.lock().unwrap_or_else(|e| e.into_inner()).new)
    }

    /// Adds a warning, unless it was said before (the same line is read
    /// again by each look at the same time).
    fn warn(&self, warning: String) {
        let mut warnings = self.warnings.lock().unwrap_or_else(|e| e.into_inner());
        if warnings.said.insert(warning.clone()) {
            warnings.new.push(warning);
        }
    }

    /// Counts `warning` as said already (a face that said it in its own
    /// words first): it is not given again by [`JournalSet::take_warnings`].
    pub fn mark_said(&self, warning: String) {
        let mut warnings = self.warnings.lock().unwrap_or_else(|e| e.into_inner());
        warnings.said.insert(warning);
    }

    /// Says what makes a state unsure, and when the state is known:
    /// until the damage, and again from the next whole checkpoint.
    pub fn doubt_words(&self, doubt: &Doubt) -> String {
        let file = &self.files[doubt.file];
        let mut words = format!(
            "{} at byte {} of {}",
            doubt.what,
            doubt.offset,
            file.path.display()
        );
        if let Some(until) = doubt.known_until {
            words.push_str(&format!(
                "; the state is known up to {}",
                crate::time_format::rfc3339(until)
            ));
        }
        match self.checkpoint_after(doubt) {
            Some(time) => words.push_str(&format!(
                " and again from the checkpoint at {}",
                crate::time_format::rfc3339(time)
            )),
            None => words.push_str(", and not again in this file"),
        }
        words
    }

    /// The time of the first checkpoint after the damage, in its file.
    fn checkpoint_after(&self, doubt: &Doubt) -> Option<SystemTime> {
        let file = &self.files[doubt.file];
        let mut reader = File::open(&file.path).ok()?;
        next_checkpoint(&mut reader, doubt.offset + 1, file.len)
            .ok()
            .flatten()
            .map(|(_, time)| time)
    }

    /// The time of the first complete view: the first checkpoint.
    pub fn start(&self) -> SystemTime {
        self.files[0]
            .first_checkpoint
            .map_or(self.files[0].header.started, |(_, t)| t)
    }

    /// When the recording stopped: the end line's time (a clean stop), or
    /// that of its last line (of the last file).
    pub fn end(&self) -> anyhow::Result<SystemTime> {
        let last = &self.files[self.files.len() - 1];
        Ok(last.end.max(self.start()))
    }

    /// Whether nothing the recording kept can tell the state at `time`
    /// beyond its last state: `time` is after its end, or at it when it
    /// was not stopped cleanly (lines stamped with its last millisecond
    /// may follow the last one kept, lost with the file's cut end, as a
    /// missing part may hold its predecessor's). A face answering for
    /// such a time says it is the last state recorded.
    pub fn past_end(&self, time: SystemTime) -> anyhow::Result<bool> {
        let end = self.end()?;
        Ok(time > end || (time == end && !self.stopped_cleanly()))
    }

    /// Whether the recording was stopped cleanly (its last file ends with
    /// an end line), rather than killed, crashed or cut short.
    pub fn stopped_cleanly(&self) -> bool {
        self.files[self.files.len() - 1].stopped_cleanly
    }

    /// When `time` falls between two files (after one's last line,
    /// before the next one's first checkpoint): that gap, and why. The
    /// last line's own millisecond is in the gap when lines of it may be
    /// missing: a missing part, or a recording with no end line before
    /// another recording.
    pub fn gap_at(&self, time: SystemTime) -> anyhow::Result<Option<Gap>> {
        for pair in self.files.windows(2) {
            let Some((_, next_start)) = pair[1].first_checkpoint else {
                continue;
            };
            if time >= next_start {
                continue;
            }
            let gap = gap_between(&pair[0], &pair[1], next_start);
            let inside = if holds_its_first_instant(&pair[0], &pair[1], &gap) {
                time >= gap.from
            } else {
                time > gap.from
            };
            return Ok(inside.then_some(gap));
        }
        Ok(None)
    }

    /// Every gap that overlaps `from..=to`, in time order.
    pub fn gaps_within(&self, from: SystemTime, to: SystemTime) -> Vec<Gap> {
        self.files
            .windows(2)
            .filter_map(|pair| {
                let (_, next_start) = pair[1].first_checkpoint?;
                let gap = gap_between(&pair[0], &pair[1], next_start);
                let starts_by = if holds_its_first_instant(&pair[0], &pair[1], &gap) {
                    gap.from <= to
                } else {
                    gap.from < to && gap.from < gap.to
                };
                (gap.to > from && starts_by).then_some(gap)
            })
            .collect()
    }

    /// Parts of the first recording that came before the first file
    /// given (rotated away, or not given): their numbers.
    pub fn parts_before(&self) -> Option<std::ops::Range<u64>> {
        let part = self.files[0].header.part;
        (part > 0).then_some(0..part)
    }

    /// The state the recording starts with: its first checkpoint, none of
    /// the lines after it folded in (not even those of its millisecond).
    pub fn at_start(&self) -> anyhow::Result<Replayed> {
        let Some((offset, _)) = self.files[0].first_checkpoint else {
            bail!("{}: no checkpoint", self.files[0].path.display());
        };
        let at = Position::at(0, offset);
        match self.load_checkpoint(at)? {
            Loaded::Whole(state, next, _) => Ok(Replayed {
                state: *state,
                next,
                last_change: None,
                checkpoint_at: at,
                doubt: None,
            }),
            // Not whole: the earliest full state is later.
            Loaded::NotWhole(why) => {
                self.not_whole(at, &why);
                self.state_at(self.start())
            }
        }
    }

    /// The state at `time`, and where the lines after it start. An error
    /// before the first complete view.
    pub fn state_at(&self, time: SystemTime) -> anyhow::Result<Replayed> {
        let start = self.start();
        if time < start {
            let before = match self.parts_before() {
                Some(parts) => format!(
                    "; part(s) {}–{} of the recording, before it, are not here (rotated away, or not given)",
                    parts.start,
                    parts.end - 1
                ),
                None => String::new(),
            };
            bail!(
                "{} is before the recording's first complete view ({}){before}",
                crate::time_format::rfc3339(time),
                crate::time_format::rfc3339(start)
            );
        }
        let mut file = self
            .files
            .iter()
            .rposition(|file| file.first_checkpoint.is_some_and(|(_, t)| t <= time))
            .unwrap_or(0);
        let mut limit = self.files[file].len;
        loop {
            let Some(offset) = self.checkpoint_before(file, time, limit)? else {
                // No usable checkpoint in this file (its first is not
                // whole): the file before, if any, tells the state then.
                if file == 0 {
                    bail!(
                        "{}: no whole checkpoint before {}",
                        self.files[file].path.display(),
                        crate::time_format::rfc3339(time)
                    );
                }
                file -= 1;
                limit = self.files[file].len;
                continue;
            };
            let at = Position::at(file, offset);
            match self.load_checkpoint(at)? {
                Loaded::Whole(state, next, _) => return self.fold_until(*state, next, time, at),
                Loaded::NotWhole(why) => {
                    self.not_whole(at, &why);
                    limit = offset;
                }
            }
        }
    }

    /// Says a checkpoint is not used, and why.
    fn not_whole(&self, at: Position, why: &str) {
        self.warn(format!(
            "{}: the checkpoint at byte {} is not whole ({why}): the one before is used",
            self.files[at.file].path.display(),
            at.offset
        ));
    }

    /// The time of the last key change before `time` (`None`: none since
    /// the recording's start). Changes folded into a checkpoint are found
    /// before it; the first checkpoint of another recording counts as a
    /// change (what changed while nothing recorded).
    pub fn previous_change(&self, time: SystemTime) -> anyhow::Result<Option<SystemTime>> {
        let Some(probe) = time.checked_sub(Duration::from_millis(1)) else {
            return Ok(None);
        };
        if probe < self.start() {
            return Ok(None);
        }
        let replayed = self.state_at(probe)?;
        if let Some(change) = replayed.last_change {
            return Ok(Some(change));
        }
        // The changes before the checkpoint the answer came from.
        let mut at = replayed.checkpoint_at;
        loop {
            let file = &self.files[at.file];
            if let Some((first, stamp)) = file.first_checkpoint
                && first == at.offset
            {
                let starts_a_recording = at.file > 0
                    && self.files[at.file - 1].header.recording_started
                        != file.header.recording_started;
                if starts_a_recording {
                    return Ok(Some(stamp.min(probe)));
                }
                if at.file == 0 {
                    return Ok(None);
                }
                at = Position::at(at.file - 1, self.files[at.file - 1].len);
                continue;
            }
            let Some(offset) = self.checkpoint_before(at.file, probe, at.offset)? else {
                return Ok(None);
            };
            let before = Position::at(at.file, offset);
            if let Some((state, next, _)) = self.load_checkpoint(before)?.whole()
                && let Some(change) = self.last_change_between(&state, next, at, probe)?
            {
                return Ok(Some(change));
            }
            at = before;
        }
    }

    /// The time of the last key change from `from` up to (not including)
    /// `until`, in one file, at most `probe`.
    fn last_change_between(
        &self,
        state: &Fold,
        from: Position,
        until: Position,
        probe: SystemTime,
    ) -> anyhow::Result<Option<SystemTime>> {
        let mut lines = self.lines_from(from)?;
        let mut last = None;
        loop {
            let here = lines.position();
            if here.file != until.file || here.offset >= until.offset {
                return Ok(last);
            }
            let Some(entry) = lines.next_entry(state)? else {
                return Ok(last);
            };
            if let Entry::Change {
                delta: Delta::Key { .. } | Delta::Removed { .. },
                time,
                ..
            } = entry
                && time <= probe
            {
                last = Some(time);
            }
        }
    }

    /// Folds the lines from `next` whose time is at most `time` into
    /// `state`.
    fn fold_until(
        &self,
        mut state: Fold,
        next: Position,
        time: SystemTime,
        checkpoint_at: Position,
    ) -> anyhow::Result<Replayed> {
        let mut last_change = None;
        let mut lines = self.lines_from(next)?;
        let mut next = lines.position();
        while let Some(entry) = lines.next_entry(&state)? {
            let Some(at) = entry_time(&entry) else {
                next = lines.position();
                continue;
            };
            if at > time {
                // A whole checkpoint read on the way to this entry makes
                // the state sure from its time on, not at `time`.
                return Ok(Replayed {
                    state,
                    next,
                    last_change,
                    checkpoint_at,
                    doubt: lines.doubt_before_entry(),
                });
            }
            if let Entry::Change { delta, .. } = entry {
                if matches!(delta, Delta::Key { .. } | Delta::Removed { .. }) {
                    last_change = Some(at);
                }
                state.apply(delta);
            }
            next = lines.position();
        }
        Ok(Replayed {
            state,
            next,
            last_change,
            checkpoint_at,
            doubt: lines.doubt(),
        })
    }

    /// The lines from `position` on (a line start), across files.
    pub fn lines_from(&self, position: Position) -> anyhow::Result<Lines<'_>> {
        Lines::open(self, position)
    }

    /// The offset of the last complete-looking checkpoint of `file`
    /// whose time is at most `time` and which starts before `limit`.
    fn checkpoint_before(
        &self,
        file: usize,
        time: SystemTime,
        limit: u64,
    ) -> anyhow::Result<Option<u64>> {
        let journal = &self.files[file];
        let Some((first, first_time)) = journal.first_checkpoint else {
            return Ok(None);
        };
        if first >= limit || first_time > time {
            return Ok(None);
        }
        let mut reader = File::open(&journal.path)
            .with_context(|| format!("cannot read {}", journal.path.display()))?;
        let mut best = first;
        let (mut low, mut high) = (first + 1, limit);
        while low < high {
            let middle = low + (high - low) / 2;
            match next_checkpoint(&mut reader, middle, high)? {
                Some((offset, at)) if at <= time => {
                    best = offset;
                    low = offset + 1;
                }
                _ => high = middle,
            }
        }
        Ok(Some(best))
    }

    /// Reads the checkpoint at `position`: whole (its head, as many
    /// keys as its head and end count, its end, nothing damaged between)
    /// or not.
    pub(super) fn load_checkpoint(&self, position: Position) -> anyhow::Result<Loaded> {
        let mut lines = Lines::open(self, position)?;
        lines.raw_checkpoints = true;
        let mut state = Fold::default();
        let Some(Entry::CheckpointHead(head)) = lines.next_entry(&state)? else {
            return Ok(Loaded::NotWhole("no head".into()));
        };
        state.set_watcher(crate::engine::fold::WatcherView {
            health: head.watcher,
            problems: head.problems,
            syncs: head.syncs,
            last_change: None,
        });
        let mut listed = 0usize;
        loop {
            match lines.next_entry(&state)? {
                Some(Entry::CheckpointKey(key, key_state)) => {
                    state.put_key(key, key_state);
                    listed += 1;
                }
                Some(Entry::CheckpointFree(keys)) => {
                    listed += keys.len();
                    for key in keys {
                        state.put_key(key, KeyState::FREE);
                    }
                }
                Some(Entry::CheckpointEnd(end)) if lines.position().file == position.file => {
                    let why = if let Some(doubt) = lines.doubt() {
                        format!("{} at byte {}", doubt.what, doubt.offset)
                    } else if listed != head.keys || end.keys != head.keys {
                        format!(
                            "its head counts {} keys, its end {}, and {listed} were read",
                            head.keys, end.keys
                        )
                    } else if end.time != head.time {
                        "its end's time is not its head's".to_string()
                    } else {
                        return Ok(Loaded::Whole(Box::new(state), lines.position(), head.time));
                    };
                    return Ok(Loaded::NotWhole(why));
                }
                _ => return Ok(Loaded::NotWhole("no end".into())),
            }
        }
    }
}

/// Whether `gap` (after `before`, before `after`) starts at its first
/// instant, the millisecond of `before`'s last line: lines stamped with
/// it may be missing from `before` — in a missing part, or lost when a
/// recording with no end line was cut short (killed, a crash, a full
/// disk). A rotation within one recording carries on in the next part,
/// so time nothing recorded starts after that millisecond there.
fn holds_its_first_instant(before: &JournalFile, after: &JournalFile, gap: &Gap) -> bool {
    match gap.why {
        GapWhy::Missing(_) => true,
        GapWhy::NotRecorded(_) => {
            let same = before.header.recording_started == after.header.recording_started;
            !same && !before.stopped_cleanly
        }
    }
}

/// The gap between two files that follow each other, `to` the second
/// one's first checkpoint.
fn gap_between(before: &JournalFile, after: &JournalFile, to: SystemTime) -> Gap {
    let same = before.header.recording_started == after.header.recording_started;
    let why = if same && after.header.part > before.header.part + 1 {
        GapWhy::Missing(MissingParts {
            from: before.header.part + 1,
            to: after.header.part - 1,
            after: before.end,
            until: to,
        })
    } else {
        GapWhy::NotRecorded(after.header.after_failure.clone().filter(|_| !same))
    };
    Gap {
        from: before.end,
        to,
        why,
    }
}

/// The time a line carries (checkpoint lines but the head have none).
pub fn entry_time(entry: &Entry) -> Option<SystemTime> {
    match entry {
        Entry::Change { time: at, .. } | Entry::Verdict { at, .. } => Some(*at),
        Entry::CheckpointHead(head) => Some(head.time),
        Entry::CheckpointEnd(end) => Some(end.time),
        Entry::End(end) => Some(end.time),
        Entry::Header(_) | Entry::CheckpointKey(..) | Entry::CheckpointFree(_) => None,
    }
}
