//! The lines of a journal set from a position on, across its files, each
//! checked against the lines before it.
//!
//! Invariants:
//! - going from one file to the next, a checkpoint of the same
//!   recording restates what the lines said and is skipped; the first
//!   checkpoint of another recording, or of a part that follows a
//!   missing one, becomes changes (its differences from the state so
//!   far), stamped with its time;
//! - a line is skipped and said when it does not parse or its checksum
//!   does not match, when its number (`"n"`) is not after the number of
//!   the line before it (repeated, or moved back), when it is numbered
//!   ahead of the line after it while that one is numbered after the
//!   line before (moved or copied forward: lines missing between those
//!   two are said at the line after), or when its time is before the time of the line before
//!   it, or after the time of the line after it while that one follows
//!   the line before (one line stamped late or early: the lines around
//!   it agree, it does not); when a line soon after it is stamped before
//!   it otherwise (before both, or after lines that agree with it), the
//!   line is taken with the state unsure: nothing tells which was
//!   stamped wrong — "the line after it", for its number as for its
//!   time, being the first after it not numbered at or before the line
//!   before (a repeat or a line moved there is skipped by its number,
//!   and says nothing of the lines around it; two such in a row, and
//!   the line is taken with the state unsure); a gap in the numbers is lines missing. A
//!   line repeated or moved loses nothing where it is skipped (a moved
//!   line's own place shows it missing); every other skip, and missing
//!   lines, make the state unsure ([`Lines::doubt`]) until the next whole
//!   checkpoint, which is then read and becomes changes (its
//!   differences from the state so far), making it sure again;
//! - damage inside a checkpoint the reader skips is said, and changes
//!   nothing when the checkpoint's end follows in its place (the lines,
//!   not the checkpoint, carry the state there); when a change line
//!   comes before any end, or the end is out of its place (numbered at
//!   or before the line before it: the lines after it may be skipped by
//!   their numbers too), the end and maybe changes are missing, and that
//!   damage makes the state unsure.

use std::fs::File;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::time::SystemTime;

use anyhow::{Context as _, bail};

use super::file::trim_newline;
use super::{Damage, Doubt, JournalSet, Mark, Position};
use crate::engine::fold::{Fold, WatcherView};
use crate::engine::{Delta, KeyState};
use crate::format::{self, CheckpointHead, Entry, LineCheck, Namer};

/// How many lines after a line that moves time on are read to judge its
/// time: a run of fewer lines stamped late together is seen by the line
/// after it that drops back (the damage model of the tests allows three);
/// a longer run, like a recorder's clock stepped forward for a while, is
/// a consistent history until it drops back.
const EVIDENCE_LINES: usize = 8;

/// The lines of a journal set from a position on, across its files.
pub struct Lines<'s> {
    set: &'s JournalSet,
    /// Where the reader is: after the line read ahead, if one is.
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
    /// What the next line must follow.
    mark: Mark,
    /// The lines after the last one taken (at most [`EVIDENCE_LINES`]),
    /// read to judge that one's time.
    ahead: std::collections::VecDeque<Item>,
    /// Between a skipped checkpoint's head and its end.
    in_checkpoint: bool,
    /// The first damage seen inside the skipped checkpoint: harmless if
    /// the checkpoint's end comes, lost changes if a change line comes
    /// first (the end, and maybe more, is missing).
    checkpoint_damage: Option<(u64, Damage)>,
    /// A checkpoint being read to make an unsure state sure again.
    restoring: Option<Restoring>,
    /// The doubt when the last entry was asked for, or the first damage
    /// found on the way to it ([`Self::doubt_before_entry`]).
    before_entry: Option<Doubt>,
}

/// One line as read, before it is judged.
struct Item {
    /// Where it starts.
    start: u64,
    got: Got,
}

// One lives at a time, per line read: boxing the entry would cost an
// allocation per line for nothing.
#[allow(clippy::large_enum_variant)]
enum Got {
    /// A line read: its entry and number.
    Entry(Entry, Option<u64>),
    /// A checkpoint's line skipped unread: its number, and whether it is
    /// the checkpoint's end.
    Skipped(Option<u64>, bool),
    /// A line that does not parse: why.
    Bad(String),
    /// A last line without its newline: its length.
    Torn(usize),
    /// The end of the file.
    End,
}

impl Item {
    /// Its number, when read.
    fn n(&self) -> Option<u64> {
        match self.got {
            Got::Entry(_, n) | Got::Skipped(n, _) => n,
            _ => None,
        }
    }
}

/// A checkpoint read after damage, until its end.
struct Restoring {
    head: CheckpointHead,
    state: Fold,
    listed: usize,
    start: u64,
}

impl<'s> Lines<'s> {
    pub(super) fn open(set: &'s JournalSet, position: Position) -> anyhow::Result<Self> {
        let path = &set.files[position.file].path;
        let mut file =
            File::open(path).with_context(|| format!("cannot read {}", path.display()))?;
        file.seek(SeekFrom::Start(position.offset))?;
        Ok(Self {
            set,
            position: Position {
                after: None,
                ..position
            },
            reader: BufReader::with_capacity(256 << 10, file),
            namer: Namer::new(&set.files[0].header.state_dir),
            line: Vec::new(),
            raw_checkpoints: false,
            pending: std::collections::VecDeque::new(),
            mark: position.after.unwrap_or_default(),
            ahead: std::collections::VecDeque::new(),
            in_checkpoint: false,
            checkpoint_damage: None,
            restoring: None,
            before_entry: None,
        })
    }

    /// Where the next line starts, with what it must follow (a reader
    /// opened there goes on checking as this one would).
    pub fn position(&self) -> Position {
        Position {
            file: self.position.file,
            offset: self
                .ahead
                .front()
                .map_or(self.position.offset, |item| item.start),
            after: Some(self.mark),
        }
    }

    /// Damage since the last whole state: the state the lines lead to
    /// may be wrong from there on, until the next whole checkpoint.
    pub fn doubt(&self) -> Option<Doubt> {
        self.mark.doubt
    }

    /// The doubt over the state the entries before the last one returned
    /// lead to: what was doubted when it was asked for, or damage found
    /// on the way to it — even when a whole checkpoint read on the way
    /// made the state sure again, which holds only from that checkpoint's
    /// time on. What a reader that stops before the last entry (it is
    /// past the time asked for) must say of the state it has.
    pub fn doubt_before_entry(&self) -> Option<Doubt> {
        self.before_entry
    }

    /// The next entry; `state` is the state the entries so far lead to
    /// (what another recording's checkpoint is compared with). `None` at
    /// the end of the last file.
    pub fn next_entry(&mut self, state: &Fold) -> anyhow::Result<Option<Entry>> {
        self.before_entry = self.mark.doubt;
        loop {
            if let Some(entry) = self.pending.pop_front() {
                return Ok(Some(entry));
            }
            let item = match self.ahead.pop_front() {
                Some(item) => item,
                None => self.read()?,
            };
            let start = item.start;
            match item.got {
                Got::End => {
                    if self.raw_checkpoints || self.position.file + 1 >= self.set.files.len() {
                        return Ok(None);
                    }
                    self.next_file(state)?;
                }
                Got::Torn(length) => self.set.warn(format!(
                    "{}: skipped a torn last line at byte {start} ({length} bytes without a newline)",
                    self.path()
                )),
                Got::Bad(error) => {
                    self.set.warn(format!(
                        "{}: skipped line at byte {start}: {error}",
                        self.path()
                    ));
                    self.damaged(start, Damage::Unreadable);
                }
                Got::Skipped(n, end) => {
                    // An end out of its place (a repeat, or moved) does
                    // not end the checkpoint: the lines after it may be
                    // skipped by their numbers, and the damage kept aside
                    // is then doubt.
                    if self.numbered(n, start)? && end {
                        self.in_checkpoint = false;
                        self.checkpoint_damage = None;
                    }
                }
                Got::Entry(entry, n) => {
                    self.end_unended_checkpoint();
                    if !self.numbered(n, start)? {
                        continue;
                    }
                    if let Some(time) = super::entry_time(&entry)
                        && !self.in_time(time, start, &entry)?
                    {
                        continue;
                    }
                    if let Some(entry) = self.taken(entry, state, start) {
                        return Ok(Some(entry));
                    }
                }
            }
        }
    }

    fn path(&self) -> std::path::Display<'_> {
        self.set.files[self.position.file].path.display()
    }

    /// Reads the next line of the current file.
    fn read(&mut self) -> anyhow::Result<Item> {
        let file = &self.set.files[self.position.file];
        let start = self.position.offset;
        self.line.clear();
        let read = if start >= file.len {
            0
        } else {
            (&mut self.reader)
                .take(file.len - start)
                .read_until(b'\n', &mut self.line)?
        };
        if read == 0 {
            return Ok(Item {
                start,
                got: Got::End,
            });
        }
        self.position.offset += read as u64;
        if !self.line.ends_with(b"\n") {
            return Ok(Item {
                start,
                got: Got::Torn(read),
            });
        }
        let line = trim_newline(&self.line);
        let n = match format::check_line(line) {
            LineCheck::Good(n) => Some(n),
            LineCheck::Bad => {
                return Ok(Item {
                    start,
                    got: Got::Bad("its checksum does not match".into()),
                });
            }
            LineCheck::Unchecked if file.header.checked_lines => {
                return Ok(Item {
                    start,
                    got: Got::Bad("it has no checksum".into()),
                });
            }
            LineCheck::Unchecked => None,
        };
        let unread = !self.raw_checkpoints
            && self.restoring.is_none()
            && (line.starts_with(b"{\"ck\":")
                || line.starts_with(b"{\"cf\":")
                || line.starts_with(b"{\"checkpoint_end\":"));
        if unread {
            let end = line.starts_with(b"{\"checkpoint_end\":");
            return Ok(Item {
                start,
                got: Got::Skipped(n, end),
            });
        }
        let got = match format::decode_numbered(line, &mut self.namer) {
            Ok((entry, written)) => Got::Entry(entry, n.or(written)),
            Err(error) => Got::Bad(error.to_string()),
        };
        Ok(Item { start, got })
    }

    /// Whether a line numbered `n` follows the line before it. A line
    /// numbered at or before the last one is skipped (said): a repeat
    /// changes nothing, and a line moved back was already missed where it
    /// belonged. A line numbered ahead while the line after it follows
    /// the last one is a line moved forward: skipped (said; its own
    /// place shows it missing); so is one numbered ahead of the line
    /// after it when that one is numbered after the last (a copy or a
    /// move forward: what is missing before the line after is said
    /// there) — the line after it being the first not numbered at or
    /// before the last ([`Self::peek_evidence`]). Any other jump is
    /// lines missing: said, and the state is unsure.
    fn numbered(&mut self, n: Option<u64>, start: u64) -> anyhow::Result<bool> {
        let (Some(n), Some(last)) = (n, self.mark.n) else {
            if n.is_some() {
                self.mark.n = n;
            }
            return Ok(true);
        };
        if n <= last {
            self.set.warn(format!(
                "{}: skipped line at byte {start}: line {n} again after line {last} (repeated or moved)",
                self.path()
            ));
            return Ok(false);
        }
        if n > last + 1 {
            // The line after it that says something of its place: one
            // numbered at or before the last is skipped by its number
            // (a repeat, or a line moved back) and tells nothing.
            if let Some(next) = self.peek_evidence()?.and_then(Item::n)
                && next > last
                && next < n
            {
                self.set.warn(format!(
                    "{}: skipped line at byte {start}: line {n} between lines {last} and {next} (moved)",
                    self.path(),
                ));
                return Ok(false);
            }
            let missing = n - last - 1;
            self.set.warn(format!(
                "{}: {missing} line(s) missing before byte {start} (line {n} follows line {last})",
                self.path()
            ));
            self.damaged(start, Damage::Missing(missing));
        }
        self.mark.n = Some(n);
        Ok(true)
    }

    /// The line after the one being judged (read once, kept for the next
    /// call).
    fn peek(&mut self) -> anyhow::Result<&Item> {
        if self.ahead.is_empty() {
            let item = self.read()?;
            self.ahead.push_back(item);
        }
        Ok(self.ahead.front().expect("filled above"))
    }

    /// The line after the one being judged that says something of its
    /// time: the next one — or, when that one is numbered at or before
    /// it (a repeat, or a line moved here: skipped when its turn comes,
    /// its time is no evidence), the one after. `None` when that one is
    /// numbered so too, or the file ends first.
    fn peek_evidence(&mut self) -> anyhow::Result<Option<&Item>> {
        let last = self.mark.n;
        let skipped = |item: &Item| item.n().zip(last).is_some_and(|(n, last)| n <= last);
        if !skipped(self.peek()?) {
            return Ok(self.ahead.front());
        }
        if self.ahead.len() < 2 {
            if matches!(self.ahead.front().map(|item| &item.got), Some(Got::End)) {
                return Ok(None);
            }
            let item = self.read()?;
            self.ahead.push_back(item);
        }
        let second = &self.ahead[1];
        Ok((!skipped(second)).then_some(second))
    }

    /// Whether a line stamped `time` is in time order: not before the
    /// line before it, and — when it moves time on — not after the line
    /// after it while that one is in order with the line before.
    fn in_time(&mut self, time: SystemTime, start: u64, entry: &Entry) -> anyhow::Result<bool> {
        if !self.raw_checkpoints && matches!(entry, Entry::CheckpointHead(_)) {
            // A checkpoint restates the lines: its time is theirs, and a
            // skipped one's time moves nothing (one read to restore is
            // checked where it is used).
            return Ok(true);
        }
        if let Some(last) = self.mark.time
            && time < last
        {
            self.out_of_time(start, time, "before the line before it", last);
            return Ok(false);
        }
        let moves_on = self.mark.time.is_none_or(|last| time > last);
        if moves_on && !self.raw_checkpoints {
            let Some(next) = self.peek_evidence()? else {
                // Two lines after it numbered before it: nothing tells
                // whether this one was stamped later than it was. It is
                // taken, and the state is unsure from the time before it.
                let damaged_at = self.peek()?.start;
                self.damaged(damaged_at, Damage::OutOfOrder);
                self.mark.time = Some(time);
                return Ok(true);
            };
            if matches!(next.got, Got::Bad(_)) {
                // The line after it is damaged: nothing tells whether this
                // one was stamped later than it was, and a reader that
                // stops at this line's time would never reach the damage.
                // It is taken, and the state is unsure from the time
                // before it: the damage is noted now.
                let damaged_at = next.start;
                self.damaged(damaged_at, Damage::Unreadable);
                return Ok(true);
            }
            let next_time = match &next.got {
                Got::Entry(next, _) => super::entry_time(next),
                _ => None,
            };
            if let Some(next) = next_time
                && next < time
                && self.mark.time.is_none_or(|last| next >= last)
            {
                self.out_of_time(start, time, "after the line after it", next);
                return Ok(false);
            }
            // A line soon after it stamped before it — the next one,
            // before the line before too, or one after lines that agree
            // with this one (a run stamped late together, or one line
            // stamped early): which is wrong nothing here tells. It is
            // taken, and the state is unsure from the time before it: a
            // reader that stops at this line's time must not answer as
            // sure a time this line may belong before.
            if let Some(early) = self.stamped_before_soon_after(time)? {
                self.damaged(early, Damage::OutOfOrder);
            }
        }
        self.mark.time = Some(time);
        Ok(true)
    }

    /// Where the first of the [`EVIDENCE_LINES`] lines after the one
    /// being judged that is stamped before `time` starts — lines numbered
    /// at or before it are skipped by their number and say nothing; none
    /// past the file's end.
    fn stamped_before_soon_after(&mut self, time: SystemTime) -> anyhow::Result<Option<u64>> {
        let last = self.mark.n;
        for i in 0..EVIDENCE_LINES {
            let Some(item) = self.ahead_item(i)? else {
                return Ok(None);
            };
            let renumbered = item.n().zip(last).is_some_and(|(n, last)| n <= last);
            if let Got::Entry(entry, _) = &item.got
                && !renumbered
                && super::entry_time(entry).is_some_and(|at| at < time)
            {
                return Ok(Some(item.start));
            }
        }
        Ok(None)
    }

    /// The `i`-th line after the one being judged (0: the next), read
    /// ahead and kept for its turn; `None` past the file's end or past a
    /// checkpoint's head: whether that checkpoint's lines are read or
    /// skipped is decided when its head is taken, and a line is sorted
    /// so when it is read.
    fn ahead_item(&mut self, i: usize) -> anyhow::Result<Option<&Item>> {
        while self.ahead.len() <= i {
            let stop = self.ahead.back().is_some_and(|item| {
                matches!(item.got, Got::End | Got::Entry(Entry::CheckpointHead(_), _))
            });
            if stop {
                return Ok(None);
            }
            let item = self.read()?;
            self.ahead.push_back(item);
        }
        Ok(Some(&self.ahead[i]))
    }

    /// Says the line at `start`, stamped `time`, is skipped for being
    /// `place` (the other line stamped `other`), and notes the damage.
    fn out_of_time(&mut self, start: u64, time: SystemTime, place: &str, other: SystemTime) {
        self.set.warn(format!(
            "{}: skipped line at byte {start}: stamped {}, {place} ({})",
            self.path(),
            crate::time_format::rfc3339(time),
            crate::time_format::rfc3339(other)
        ));
        self.damaged(start, Damage::OutOfOrder);
    }

    /// Notes damage at `start`: the state is unsure from here on (the
    /// first damage since the last whole state is the one kept). Inside
    /// a checkpoint being skipped it is kept aside: harmless if the
    /// checkpoint's end comes, made doubt if a change line comes first.
    fn damaged(&mut self, start: u64, what: Damage) {
        if self.restoring.take().is_some() {
            self.set.warn(format!(
                "{}: the checkpoint being read is not whole (damage at byte {start})",
                self.path()
            ));
        }
        if self.in_checkpoint && !self.raw_checkpoints {
            self.checkpoint_damage.get_or_insert((start, what));
            return;
        }
        if self.mark.doubt.is_none() {
            self.mark.doubt = Some(Doubt {
                file: self.position.file,
                offset: start,
                what,
                known_until: self.mark.time,
            });
        }
        self.before_entry = self.before_entry.or(self.mark.doubt);
    }

    /// A line read whole that is not a checkpoint's key or end, met
    /// while a skipped checkpoint is unended: the checkpoint ended
    /// without its end line, so what was missing or damaged since its
    /// head may have been changes, and the state is unsure from there.
    fn end_unended_checkpoint(&mut self) {
        if !std::mem::take(&mut self.in_checkpoint) {
            return;
        }
        if let Some((start, what)) = self.checkpoint_damage.take() {
            self.damaged(start, what);
        }
    }

    /// What a judged line gives: the entry to return, or `None` for a
    /// line that is not returned (a header, a checkpoint skipped or being
    /// read).
    fn taken(&mut self, entry: Entry, state: &Fold, start: u64) -> Option<Entry> {
        if self.raw_checkpoints {
            return (!matches!(entry, Entry::Header(_))).then_some(entry);
        }
        match entry {
            Entry::Header(_) => None,
            Entry::CheckpointHead(head) => {
                let in_order = self.mark.time.is_none_or(|last| head.time >= last);
                if self.mark.doubt.is_some() && in_order {
                    let mut restored = Fold::default();
                    restored.set_watcher(WatcherView {
                        health: head.watcher.clone(),
                        problems: head.problems.clone(),
                        syncs: head.syncs,
                        last_change: None,
                    });
                    self.restoring = Some(Restoring {
                        head,
                        state: restored,
                        listed: 0,
                        start,
                    });
                } else {
                    self.in_checkpoint = true;
                }
                None
            }
            Entry::CheckpointKey(key, key_state) => {
                if let Some(restoring) = &mut self.restoring {
                    restoring.state.put_key(key, key_state);
                    restoring.listed += 1;
                }
                None
            }
            Entry::CheckpointFree(keys) => {
                if let Some(restoring) = &mut self.restoring {
                    restoring.listed += keys.len();
                    for key in keys {
                        restoring.state.put_key(key, KeyState::FREE);
                    }
                }
                None
            }
            Entry::CheckpointEnd(end) => {
                self.in_checkpoint = false;
                if let Some(restoring) = self.restoring.take() {
                    let whole = restoring.listed == restoring.head.keys
                        && end.keys == restoring.head.keys
                        && end.time == restoring.head.time;
                    if whole {
                        self.set.warn(format!(
                            "{}: the state is whole again at the checkpoint at byte {} ({})",
                            self.path(),
                            restoring.start,
                            crate::time_format::rfc3339(restoring.head.time)
                        ));
                        self.pending.extend(differences(
                            state,
                            &restoring.state,
                            restoring.head.time,
                        ));
                        self.mark.doubt = None;
                    } else {
                        self.set.warn(format!(
                            "{}: the checkpoint at byte {} is not whole ({} keys read, its lines say {} and {})",
                            self.path(),
                            restoring.start,
                            restoring.listed,
                            restoring.head.keys,
                            end.keys
                        ));
                    }
                }
                None
            }
            entry => {
                if self.restoring.take().is_some() {
                    self.set.warn(format!(
                        "{}: the checkpoint being read has no end",
                        self.path()
                    ));
                }
                self.in_checkpoint = false;
                Some(entry)
            }
        }
    }

    /// Moves to the next file; when it starts another recording, or
    /// follows a missing part, its first checkpoint's differences from
    /// `state` become pending changes (and the state is sure again).
    fn next_file(&mut self, state: &Fold) -> anyhow::Result<()> {
        // Damage found on the way to the entry being asked for stays
        // found when the reader moves on to the next file: a reader that
        // stops at that file's first entry must still say it.
        let before_entry = self.before_entry;
        self.open_next_file(state)?;
        self.before_entry = self.before_entry.or(before_entry);
        Ok(())
    }

    /// [`Self::next_file`]'s move: the reader reopened at the next
    /// file's first checkpoint.
    fn open_next_file(&mut self, state: &Fold) -> anyhow::Result<()> {
        let previous = &self.set.files[self.position.file];
        let index = self.position.file + 1;
        let next = &self.set.files[index];
        let same_recording = next.header.recording_started == previous.header.recording_started;
        let follows = same_recording && next.header.part == previous.header.part + 1;
        let Some((offset, _)) = next.first_checkpoint else {
            bail!("{}: no checkpoint", next.path.display());
        };
        let mut mark = Mark {
            n: None,
            ..self.mark
        };
        if same_recording && !follows {
            self.set.warn(format!(
                "{}",
                super::MissingParts {
                    from: previous.header.part + 1,
                    to: next.header.part - 1,
                    after: previous.end,
                    until: next
                        .first_checkpoint
                        .map_or(next.header.started, |(_, t)| t),
                }
            ));
        }
        if (!follows || mark.doubt.is_some())
            && let Some((checkpoint, after, time)) = self
                .set
                .load_checkpoint(Position::at(index, offset))?
                .whole()
        {
            let pending = differences(state, &checkpoint, time);
            mark.doubt = None;
            mark.time = Some(mark.time.map_or(time, |last| last.max(time)));
            mark.n = after.after.and_then(|after| after.n);
            *self = Self::open(
                self.set,
                Position {
                    after: Some(mark),
                    ..after
                },
            )?;
            self.pending.extend(pending);
            return Ok(());
        }
        *self = Self::open(
            self.set,
            Position {
                after: Some(mark),
                ..Position::at(index, offset)
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
