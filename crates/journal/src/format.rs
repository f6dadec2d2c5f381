//! One journal line, written and read: the header, a checkpoint's lines,
//! the change lines (a `watch --json` line with the key's whole state
//! and directory added), and the end line a clean stop writes.
//! `docs/formats.md` ("Journal format") states the same schema for readers outside
//! locktop.
//!
//! Invariants: every line is one JSON object on one line (names and
//! command lines are JSON-escaped, so a newline in the file always ends
//! a line); a line names its type by its first field, so a reader
//! looking for checkpoints can tell one from the first bytes
//! ([`CHECKPOINT_PREFIX`]); what [`encode_delta`] writes,
//! [`decode`] reads back to the same delta (times to the millisecond).

use std::borrow::Cow;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde::{Deserialize, Serialize};

use crate::disk::key::{DirNamer, KeyKind, LockKey};
use crate::engine::{Delta, KeyState, Liveness, ScanProblem, WatcherHealth};
use crate::liveness::probe::ProbeMode;
use crate::operate::verdict::Verdict;
use crate::time_format;

/// The format's name, in every header.
pub const FORMAT: &str = "locktop-journal";
/// The format's version: a reader refuses a journal of a newer one.
/// Version 2 added who waits for whom (a key state's `waiting`, refused
/// tries' `last`) and the verdicts `deadlock`, `wait_cycle`, `blocked`,
/// `materializing` and `held`, which a version-1 reader cannot parse: it refuses a
/// version-2 journal with a line saying to upgrade, rather than skip
/// those lines as damaged. This reader reads both.
pub const VERSION: u32 = 2;
/// How a checkpoint's first line starts (and no other line does).
pub(crate) const CHECKPOINT_PREFIX: &[u8] = b"{\"checkpoint\":";
/// Free keys of one directory per checkpoint line.
pub(crate) const FREE_PER_LINE: usize = 1000;

/// The first line of every journal file: what was recorded, where, by
/// what.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Header {
    /// [`FORMAT`].
    pub format: String,
    /// [`VERSION`] of the writer.
    pub version: u32,
    /// The host's name.
    pub host: String,
    /// The state dir recorded.
    pub state_dir: PathBuf,
    /// The locktop version that wrote it.
    pub locktop: String,
    /// When this file was started.
    #[serde(with = "time_format::plain")]
    pub started: SystemTime,
    /// When the recording (the first file of a rotated set) was started.
    #[serde(with = "time_format::plain")]
    pub recording_started: SystemTime,
    /// This file's place in its rotated set (0: the first).
    pub part: u64,
    /// The probe the recorder ran.
    pub probe: ProbeMode,
    /// Its `--materializing-after`, in seconds: a replay judges spawns
    /// by the recorder's threshold.
    #[serde(default = "default_materializing")]
    pub materializing_after: f64,
    /// Set on the first file of a recording that took over from one
    /// whose journal could not be written (`serve --journal` after a
    /// full disk): why that one stopped. Nothing was recorded from the
    /// previous file's last line to this file's first checkpoint. Added
    /// within version 2: older readers ignore it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after_failure: Option<String>,
    /// Every line of the file, this one included, ends with its number
    /// and a CRC-32 ([`check_line`]): a line without a matching one is
    /// damaged. Added within version 2 (older files have none; older
    /// readers ignore them).
    #[serde(default)]
    pub checked_lines: bool,
}

fn default_materializing() -> f64 {
    crate::operate::verdict::MATERIALIZING_AFTER.as_secs_f64()
}

/// A checkpoint's first line: the watcher's view when it was taken, and
/// how many keys its lines list.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CheckpointHead {
    /// When.
    #[serde(with = "time_format::plain")]
    pub time: SystemTime,
    /// Keys listed by the checkpoint's lines.
    pub keys: usize,
    /// Full scans finished by then.
    pub syncs: u64,
    /// The watcher's health then.
    pub watcher: WatcherHealth,
    /// The scan problems then.
    pub problems: Vec<ScanProblem>,
}

/// How a key is written: its kind and name (as `watch` writes them) and
/// its directory under the locks root, which names it back exactly.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyRef<'a> {
    /// Instance, tag or other.
    pub kind: KeyKind,
    /// AIH, tag or path under the root.
    #[serde(borrow)]
    pub name: Cow<'a, str>,
    /// The SDK lock dir, relative to the locks root.
    #[serde(borrow)]
    pub dir: Cow<'a, str>,
}

/// A key of a checkpoint that is not simply free.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct CheckpointKey<'a> {
    /// Which.
    #[serde(flatten, borrow)]
    pub key: KeyRef<'a>,
    /// Its state.
    pub state: KeyState,
}

/// Free keys of one directory in a checkpoint: their SDK keys.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct CheckpointFree<'a> {
    /// Their kind.
    pub kind: KeyKind,
    /// Their directory, relative to the locks root.
    #[serde(borrow)]
    pub dir: Cow<'a, str>,
    /// The SDK keys.
    #[serde(borrow)]
    pub keys: Vec<Cow<'a, str>>,
}

/// The line that closes a checkpoint: a reader trusts a checkpoint only
/// once it read this.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CheckpointEnd {
    /// The checkpoint's time.
    #[serde(with = "time_format::plain")]
    pub time: SystemTime,
    /// Keys it listed.
    pub keys: usize,
}

/// The last line of a recording stopped cleanly (SIGINT/SIGTERM): it
/// went on until `time`, whatever its last change. Added within version
/// 1: a reader that predates it skips it as a line it does not know.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RecordingEnd {
    /// When the recorder stopped.
    #[serde(with = "time_format::plain")]
    pub time: SystemTime,
}

/// Every field any line has: one struct, so a line is parsed once
/// whatever its type (see the module doc for which fields go together).
#[derive(Debug, Default, Deserialize)]
struct Raw<'a> {
    journal: Option<Header>,
    checkpoint: Option<CheckpointHead>,
    #[serde(borrow)]
    ck: Option<CheckpointKey<'a>>,
    #[serde(borrow)]
    cf: Option<CheckpointFree<'a>>,
    checkpoint_end: Option<CheckpointEnd>,
    end: Option<RecordingEnd>,
    #[serde(borrow)]
    time: Option<Cow<'a, str>>,
    kind: Option<KeyKind>,
    #[serde(borrow)]
    name: Option<Cow<'a, str>>,
    #[serde(borrow)]
    dir: Option<Cow<'a, str>>,
    from: Option<Liveness>,
    #[serde(borrow)]
    to: Option<Cow<'a, str>>,
    state: Option<KeyState>,
    holder_alive: Option<bool>,
    #[serde(borrow)]
    key: Option<KeyRef<'a>>,
    verdict_from: Option<Cow<'a, str>>,
    verdict: Option<Verdict>,
    watcher: Option<WatcherHealth>,
    problems: Option<Vec<ScanProblem>>,
    synced: Option<usize>,
    n: Option<u64>,
}

/// One line, read.
#[derive(Debug, Clone, PartialEq)]
pub enum Entry {
    /// A file's first line.
    Header(Header),
    /// A checkpoint begins.
    CheckpointHead(CheckpointHead),
    /// A key of the checkpoint, with its state.
    CheckpointKey(LockKey, KeyState),
    /// Free keys of the checkpoint.
    CheckpointFree(Vec<LockKey>),
    /// The checkpoint is complete.
    CheckpointEnd(CheckpointEnd),
    /// A change the engine reported (a key, a removal, the watcher's
    /// health, the problems, a finished scan).
    Change {
        /// The change.
        delta: Delta,
        /// The line's time (a key's, removal's or scan's is also the
        /// delta's `at`).
        time: SystemTime,
        /// For a key that went from held to not held: whether one of its
        /// holders still ran then (released, not exited), as the
        /// recorder saw at that moment.
        holder_alive: Option<bool>,
    },
    /// A held key's verdict changed, as the recorder judged it.
    Verdict {
        /// Which key.
        key: LockKey,
        /// The kind of its verdict before (`None`: none).
        from: Option<&'static str>,
        /// Its verdict now (`None`: none).
        to: Option<Verdict>,
        /// When.
        at: SystemTime,
    },
    /// The recorder stopped cleanly: the recording ends here.
    End(RecordingEnd),
}

/// Names keys back from their directories: one [`DirNamer`] per
/// directory (keys of one directory share it, as the engine's do).
#[derive(Debug)]
pub struct Namer {
    state_dir: PathBuf,
    root: PathBuf,
    dirs: std::collections::HashMap<String, DirNamer>,
}

impl Namer {
    /// Names keys of `state_dir`.
    pub fn new(state_dir: &Path) -> Self {
        Self {
            state_dir: state_dir.to_path_buf(),
            root: crate::locks::locks_root(state_dir),
            dirs: std::collections::HashMap::new(),
        }
    }

    fn namer(&mut self, dir: &str) -> &DirNamer {
        if !self.dirs.contains_key(dir) {
            let namer = DirNamer::new(&self.state_dir, &self.root.join(dir));
            self.dirs.insert(dir.to_string(), namer);
        }
        &self.dirs[dir]
    }

    /// The key `reference` names; `None` when its name does not belong to
    /// its directory (a line not written by locktop).
    pub fn key(&mut self, reference: &KeyRef) -> Option<LockKey> {
        if !below_the_root(&reference.dir) {
            return None;
        }
        self.namer(&reference.dir).named(&reference.name)
    }

    /// The key `key` of `dir`.
    fn sdk_key(&mut self, dir: &str, key: &str) -> LockKey {
        self.namer(dir).key(key)
    }
}

/// Whether `dir` names a directory under the locks root: relative, with
/// no `..` (a line naming any other place names no key of this state
/// dir).
fn below_the_root(dir: &str) -> bool {
    Path::new(dir)
        .components()
        .all(|part| matches!(part, std::path::Component::Normal(_)))
}

/// `key`'s directory relative to `root` (the locks root).
pub(crate) fn relative_dir<'k>(root: &Path, key: &'k LockKey) -> Cow<'k, str> {
    key.dir()
        .strip_prefix(root)
        .unwrap_or(key.dir())
        .to_string_lossy()
}

/// Why a line could not be read.
#[derive(Debug, thiserror::Error)]
pub enum BadLine {
    /// Not JSON, or JSON of the wrong shape.
    #[error("not a journal line: {0}")]
    Json(#[from] serde_json::Error),
    /// JSON, but no line type this reader knows.
    #[error("not a journal line: {0}")]
    Shape(&'static str),
    /// A time that is not RFC 3339.
    #[error("bad time {0:?}")]
    Time(String),
}

/// Reads one line (without its newline).
pub fn decode(line: &[u8], namer: &mut Namer) -> Result<Entry, BadLine> {
    decode_numbered(line, namer).map(|(entry, _)| entry)
}

/// Reads one line (without its newline), and its number in its file
/// (`None`: a line written before lines were numbered).
pub fn decode_numbered(line: &[u8], namer: &mut Namer) -> Result<(Entry, Option<u64>), BadLine> {
    let raw: Raw = serde_json::from_slice(line)?;
    let n = raw.n;
    Ok((entry_of(raw, namer)?, n))
}

/// What a line's last fields say of it (`…,"n":12,"crc":C}`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LineCheck {
    /// No number or checksum: a line written before lines carried them.
    Unchecked,
    /// Its checksum matches: its number in its file.
    Good(u64),
    /// A checksum that does not match, or a malformed tail.
    Bad,
}

/// Checks a line (without its newline) against the CRC-32 it ends with,
/// reading its last bytes alone — what a reader skipping a checkpoint's
/// lines unparsed still does. JSON escapes every quote inside a string,
/// so `,"crc":` and `,"n":` can only be the line's own fields.
pub fn check_line(line: &[u8]) -> LineCheck {
    let Some(body) = line.strip_suffix(b"}") else {
        return LineCheck::Unchecked;
    };
    let Some(at) = memchr::memmem::rfind(body, b",\"crc\":") else {
        return LineCheck::Unchecked;
    };
    let (Some(crc), Some(n)) = (
        digits(&body[at + 7..]),
        memchr::memmem::rfind(&body[..at], b",\"n\":").and_then(|n| digits(&body[n + 5..at])),
    ) else {
        return LineCheck::Bad;
    };
    if u64::from(crc32fast::hash(&body[..at])) == crc {
        LineCheck::Good(n)
    } else {
        LineCheck::Bad
    }
}

fn digits(text: &[u8]) -> Option<u64> {
    if text.is_empty() || text.len() > 20 || !text.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(text).ok()?.parse().ok()
}

/// Ends the line just written into `out` (`{…}` and a newline, after
/// any lines before it) with its number in its file and the CRC-32 of
/// everything before the checksum: `{…,"n":N,"crc":C}`. Every line of a
/// file carries them (the header is line 0), so a reader tells a line
/// dropped, repeated, moved or altered.
pub fn number_line(out: &mut Vec<u8>, n: u64) {
    debug_assert!(out.ends_with(b"}\n"));
    out.truncate(out.len() - 2);
    let begin = out
        .iter()
        .rposition(|byte| *byte == b'\n')
        .map_or(0, |newline| newline + 1);
    out.extend_from_slice(format!(",\"n\":{n}").as_bytes());
    let crc = crc32fast::hash(&out[begin..]);
    out.extend_from_slice(format!(",\"crc\":{crc}}}\n").as_bytes());
}

fn entry_of(raw: Raw<'_>, namer: &mut Namer) -> Result<Entry, BadLine> {
    if let Some(header) = raw.journal {
        return Ok(Entry::Header(header));
    }
    if let Some(head) = raw.checkpoint {
        return Ok(Entry::CheckpointHead(head));
    }
    if let Some(ck) = raw.ck {
        let key = namer
            .key(&ck.key)
            .ok_or(BadLine::Shape("key outside its dir"))?;
        return Ok(Entry::CheckpointKey(key, ck.state));
    }
    if let Some(cf) = raw.cf {
        let keys = cf
            .keys
            .iter()
            .map(|key| namer.sdk_key(&cf.dir, key))
            .collect();
        return Ok(Entry::CheckpointFree(keys));
    }
    if let Some(end) = raw.checkpoint_end {
        return Ok(Entry::CheckpointEnd(end));
    }
    if let Some(end) = raw.end {
        return Ok(Entry::End(end));
    }
    let time = raw.time.ok_or(BadLine::Shape("no time"))?;
    let at = humantime::parse_rfc3339(&time).map_err(|_| BadLine::Time(time.into_owned()))?;
    if let Some(health) = raw.watcher {
        return Ok(change(Delta::Health(health), at, None));
    }
    if let Some(problems) = raw.problems {
        return Ok(change(Delta::Problems(problems), at, None));
    }
    if let Some(keys) = raw.synced {
        return Ok(change(Delta::Synced { keys, at }, at, None));
    }
    if let Some(reference) = raw.key {
        let key = namer
            .key(&reference)
            .ok_or(BadLine::Shape("key outside its dir"))?;
        let from = raw.verdict_from.as_deref().and_then(verdict_kind);
        return Ok(Entry::Verdict {
            key,
            from,
            to: raw.verdict,
            at,
        });
    }
    let (Some(kind), Some(name), Some(dir), Some(to)) = (raw.kind, raw.name, raw.dir, raw.to)
    else {
        return Err(BadLine::Shape("no line type"));
    };
    let key = namer
        .key(&KeyRef { kind, name, dir })
        .ok_or(BadLine::Shape("key outside its dir"))?;
    if to == "removed" {
        let previous = raw.from.ok_or(BadLine::Shape("removal without from"))?;
        return Ok(change(
            Delta::Removed { key, previous, at },
            at,
            raw.holder_alive,
        ));
    }
    let state = match raw.state {
        Some(state) => state,
        None => KeyState::bare(
            Liveness::ALL
                .into_iter()
                .find(|liveness| liveness.as_str() == to)
                .ok_or(BadLine::Shape("unknown liveness"))?,
        ),
    };
    Ok(change(
        Delta::Key {
            key,
            state,
            previous: raw.from,
            at,
        },
        at,
        raw.holder_alive,
    ))
}

fn change(delta: Delta, time: SystemTime, holder_alive: Option<bool>) -> Entry {
    Entry::Change {
        delta,
        time,
        holder_alive,
    }
}

/// The `&'static` kind word of a verdict kind read from a line.
fn verdict_kind(kind: &str) -> Option<&'static str> {
    Verdict::KINDS.into_iter().find(|known| *known == kind)
}

// Lines are structs, not `json!` maps: their fields come out in the
// order the schema gives (the first names the line's type) whatever
// serde_json's features.

/// A verdict line: `watch --json`'s, with the key's `dir`.
#[derive(Serialize)]
struct VerdictLine<'a> {
    time: &'a str,
    key: KeyRef<'a>,
    verdict_from: Option<&'a str>,
    verdict: Option<&'a Verdict>,
}

/// A watcher health line.
#[derive(Serialize)]
struct HealthLine<'a> {
    time: &'a str,
    watcher: &'a WatcherHealth,
}

/// The scan problems, the whole current set.
#[derive(Serialize)]
struct ProblemsLine<'a> {
    time: &'a str,
    problems: &'a [ScanProblem],
}

/// A full scan finished.
#[derive(Serialize)]
struct SyncedLine<'a> {
    time: &'a str,
    synced: usize,
}

/// A change line as `watch --json` writes it, plus `dir` and `state`.
#[derive(Serialize)]
struct KeyLine<'a> {
    time: &'a str,
    kind: KeyKind,
    name: &'a str,
    from: Option<Liveness>,
    to: &'a str,
    pids: Vec<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<&'a str>,
    dir: &'a str,
    /// Omitted for a state that is its liveness alone.
    #[serde(skip_serializing_if = "Option::is_none")]
    state: Option<&'a KeyState>,
    /// Only when the key stopped being held.
    #[serde(skip_serializing_if = "Option::is_none")]
    holder_alive: Option<bool>,
}

/// Writes the line for `delta`, stamped `time` (never earlier than the
/// line before: see [`crate::writer`]), with `holder_alive` for
/// a key that stopped being held, ending in a newline.
pub(crate) fn encode_delta(
    out: &mut Vec<u8>,
    delta: &Delta,
    time: SystemTime,
    holder_alive: Option<bool>,
    root: &Path,
) {
    let stamp = time_format::rfc3339(time);
    let written = match delta {
        Delta::Key {
            key,
            state,
            previous,
            ..
        } => {
            let bare = *state == KeyState::bare(state.liveness);
            crate::text::write_json(
                &mut *out,
                &KeyLine {
                    time: &stamp,
                    kind: key.kind(),
                    name: key.name(),
                    from: *previous,
                    to: state.liveness.as_str(),
                    pids: state.holders.iter().map(|holder| holder.pid).collect(),
                    error: state.error.as_deref(),
                    dir: &relative_dir(root, key),
                    state: (!bare).then_some(state),
                    holder_alive,
                },
            )
        }
        Delta::Removed { key, previous, .. } => crate::text::write_json(
            &mut *out,
            &KeyLine {
                time: &stamp,
                kind: key.kind(),
                name: key.name(),
                from: Some(*previous),
                to: "removed",
                pids: Vec::new(),
                error: None,
                dir: &relative_dir(root, key),
                state: None,
                holder_alive,
            },
        ),
        Delta::Health(watcher) => crate::text::write_json(
            &mut *out,
            &HealthLine {
                time: &stamp,
                watcher,
            },
        ),
        Delta::Problems(problems) => crate::text::write_json(
            &mut *out,
            &ProblemsLine {
                time: &stamp,
                problems,
            },
        ),
        Delta::Synced { keys, .. } => crate::text::write_json(
            &mut *out,
            &SyncedLine {
                time: &stamp,
                synced: *keys,
            },
        ),
    };
    // Serializing owned, well-formed values into a Vec cannot fail.
    debug_assert!(written.is_ok());
    out.push(b'\n');
}

/// Writes a verdict line (`watch --json`'s, with the key's `dir`).
pub(crate) fn encode_verdict(
    out: &mut Vec<u8>,
    key: &LockKey,
    from: Option<&str>,
    to: Option<&Verdict>,
    time: SystemTime,
    root: &Path,
) {
    let line = VerdictLine {
        time: &time_format::rfc3339(time),
        key: KeyRef {
            kind: key.kind(),
            name: key.name().into(),
            dir: relative_dir(root, key),
        },
        verdict_from: from,
        verdict: to,
    };
    let _ = crate::text::write_json(&mut *out, &line);
    out.push(b'\n');
}

/// Writes a checkpoint's head: its time, how many key lines follow, and
/// the watcher's view then.
pub(crate) fn encode_checkpoint_head(
    out: &mut Vec<u8>,
    time: SystemTime,
    keys: usize,
    watcher: &crate::engine::fold::WatcherView,
) {
    encode_tagged(
        out,
        "checkpoint",
        &CheckpointHead {
            time,
            keys,
            syncs: watcher.syncs,
            watcher: watcher.health.clone(),
            problems: watcher.problems.clone(),
        },
    );
}

/// Writes a checkpoint's line for `key` (a `ck` line): its kind, name,
/// directory and whole state.
pub(crate) fn encode_checkpoint_key(
    out: &mut Vec<u8>,
    root: &Path,
    key: &LockKey,
    state: &KeyState,
) {
    let line = CheckpointKey {
        key: KeyRef {
            kind: key.kind(),
            name: key.name().into(),
            dir: relative_dir(root, key),
        },
        state: state.clone(),
    };
    encode_tagged(out, "ck", &line);
}

/// Writes any other line: `{"<field>": value}` and a newline.
pub(crate) fn encode_tagged(out: &mut Vec<u8>, field: &str, value: &impl Serialize) {
    let mut map = serde_json::Map::new();
    map.insert(
        field.to_string(),
        serde_json::to_value(value).unwrap_or(serde_json::Value::Null),
    );
    let _ = crate::text::write_json(&mut *out, &map);
    out.push(b'\n');
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::fixtures::{free, held, t};

    fn round_trip(delta: Delta, state_dir: &Path) -> Entry {
        let mut out = Vec::new();
        encode_delta(
            &mut out,
            &delta,
            t(5),
            None,
            &crate::locks::locks_root(state_dir),
        );
        assert_eq!(out.last(), Some(&b'\n'));
        assert_eq!(out.iter().filter(|b| **b == b'\n').count(), 1);
        decode(&out[..out.len() - 1], &mut Namer::new(state_dir)).unwrap()
    }

    #[test]
    fn every_delta_reads_back_as_written() {
        let state = Path::new("/s");
        let (dir, key) = crate::locks::agent_instance_lock(state, "a/b/c d\nnewline");
        let instance = LockKey::from_coord(state, &dir, &key);
        let (dir, key) = crate::locks::agent_tag_lock(state, "research: v2.1");
        let tag = LockKey::from_coord(state, &dir, &key);
        let other = LockKey::from_coord(state, &state.join("locks/plugins-daemon"), "p/q");
        let deltas = [
            Delta::Key {
                key: instance.clone(),
                state: held(Liveness::Live, 7, "agent --x 'y'", t(1)),
                previous: Some(Liveness::Free),
                at: t(5),
            },
            Delta::Key {
                key: tag.clone(),
                state: free(),
                previous: None,
                at: t(5),
            },
            Delta::Key {
                key: other.clone(),
                state: free(),
                previous: Some(Liveness::Live),
                at: t(5),
            },
            Delta::Removed {
                key: tag.clone(),
                previous: Liveness::Free,
                at: t(5),
            },
            Delta::Synced { keys: 3, at: t(5) },
            Delta::Health(WatcherHealth::Rescanning {
                reason: "overflow".into(),
            }),
        ];
        for delta in deltas {
            assert_eq!(round_trip(delta.clone(), state), change(delta, t(5), None));
        }
    }

    #[test]
    fn a_checkpoints_first_line_and_only_it_starts_with_the_prefix() {
        let mut out = Vec::new();
        encode_tagged(
            &mut out,
            "checkpoint",
            &CheckpointHead {
                time: t(1),
                keys: 0,
                syncs: 1,
                watcher: WatcherHealth::Watching,
                problems: Vec::new(),
            },
        );
        assert!(out.starts_with(CHECKPOINT_PREFIX));
        let mut line = Vec::new();
        encode_delta(
            &mut line,
            &Delta::Synced { keys: 1, at: t(1) },
            t(1),
            None,
            Path::new("/s/locks"),
        );
        assert!(!line.starts_with(CHECKPOINT_PREFIX));
    }
}
