//! The live view stream: what `serve` sends on `/view` and what
//! `--connect` reads. It is the journal's own lines (a checkpoint, then
//! one change line per delta and one verdict line per verdict change),
//! framed for a connection instead of a file:
//!
//! - a hello line, `{"view":{…}}` ([`Hello`]): the format and its
//!   version, the host, the state dir, the service's source, probe and
//!   thresholds;
//! - a checkpoint: the journal's `checkpoint` head, one `ck` line per key
//!   that is not simply free, a `free` line with how many free keys there
//!   are of each kind ([`FreeCounts`]: the service counts free keys and
//!   keeps none), and `checkpoint_end`;
//! - change and verdict lines, as a journal has them;
//! - a `heartbeat` line ([`HEARTBEAT_EVERY`]) so a client can say how old
//!   its last word is when nothing changes;
//! - a `resync` line before a fresh checkpoint, when the client fell so
//!   far behind that the changes it missed were dropped.
//!
//! Invariants: a stream's state at any line is its last checkpoint with
//! the change lines after it folded in — [`Mirror`] turns it back into
//! the engine's deltas, so a client follows it through the same fold as
//! a private engine's; keys are named back through their directories as
//! a journal's are (a name that does not belong to its directory is a
//! bad line, never a key); a reader refuses a stream of a newer version.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};

use crate::disk::key::{KeyKind, LockKey};
use crate::engine::fold::WatcherView;
use crate::engine::{Delta, KeyState, Liveness, ScanProblem, WatcherHealth};
use crate::format::{self, BadLine, CheckpointEnd, Entry, Namer};
use crate::liveness::probe::ProbeMode;
use crate::operate::verdict::Verdict;
use crate::time_format;

/// The stream's name, in its hello line.
pub const FORMAT: &str = "locktop-view";
/// The stream's version: a client refuses a stream of a newer one.
pub const VERSION: u32 = 1;
/// The most keys a client reads in one checkpoint (a service lists only
/// the keys that are not simply free: held, waited on, in flight).
pub const MAX_CHECKPOINT_KEYS: usize = 1 << 20;
/// How often the service says it is still there when nothing changes.
pub const HEARTBEAT_EVERY: Duration = Duration::from_secs(1);

/// The first line of a stream: what is watched, where, by what.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Hello {
    /// [`FORMAT`].
    pub format: String,
    /// [`VERSION`] of the service.
    pub version: u32,
    /// The service's host name.
    pub host: String,
    /// The state dir the service watches (a path on its host).
    pub state_dir: PathBuf,
    /// The locktop version of the service.
    pub locktop: String,
    /// How the service learns liveness (`watch`'s `source` word).
    pub source: String,
    /// Whether its source tells refused tries (the kernel's lock events).
    pub refusals_counted: bool,
    /// The probe it runs.
    pub probe: ProbeMode,
    /// Its `--materializing-after`, in seconds: a client judges spawns by
    /// the service's threshold.
    pub materializing_after: f64,
    /// Seconds between heartbeats ([`HEARTBEAT_EVERY`]).
    pub heartbeat_every: f64,
}

/// How many free keys of each kind a checkpoint stands for.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FreeCounts {
    /// Free instance keys.
    pub instance: u64,
    /// Free tag keys.
    pub tag: u64,
    /// Free keys of neither family.
    pub other: u64,
}

impl FreeCounts {
    /// Counts one more free key of `kind`.
    pub fn add(&mut self, kind: KeyKind, count: u64) {
        match kind {
            KeyKind::Instance => self.instance += count,
            KeyKind::Tag => self.tag += count,
            KeyKind::Other => self.other += count,
        }
    }

    /// Every free key, whatever its kind.
    pub fn total(&self) -> u64 {
        self.instance + self.tag + self.other
    }
}

/// Lines that only a stream has (the rest are a journal's).
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum StreamLine {
    View(Hello),
    Free(FreeCounts),
    Heartbeat(Stamp),
    Resync(Resync),
}

/// A time, alone.
#[derive(Debug, Serialize, Deserialize)]
struct Stamp {
    #[serde(with = "time_format::plain")]
    time: SystemTime,
}

/// Why a fresh checkpoint follows.
#[derive(Debug, Serialize, Deserialize)]
struct Resync {
    #[serde(with = "time_format::plain")]
    time: SystemTime,
    reason: String,
}

/// Writes the lines of one stream, keys named relative to the locks root
/// of the state dir it watches.
#[derive(Debug, Clone)]
pub struct Encoder {
    root: PathBuf,
}

impl Encoder {
    /// Lines for a stream of `state_dir`.
    pub fn new(state_dir: &Path) -> Self {
        Self {
            root: crate::locks::locks_root(state_dir),
        }
    }

    /// The hello line.
    pub fn hello(&self, out: &mut Vec<u8>, hello: &Hello) {
        tagged(out, &StreamLine::View(hello.clone()));
    }

    /// A whole checkpoint: the state as of `time` — the watcher, every key
    /// that is not simply free with its state, and the free keys counted.
    pub fn checkpoint<'k>(
        &self,
        out: &mut Vec<u8>,
        time: SystemTime,
        watcher: &WatcherView,
        keys: impl Iterator<Item = (&'k LockKey, &'k KeyState)>,
        free: &FreeCounts,
    ) {
        let keys: Vec<_> = keys.filter(|(_, state)| !state.is_bare_free()).collect();
        format::encode_checkpoint_head(out, time, keys.len(), watcher);
        for (key, state) in &keys {
            format::encode_checkpoint_key(out, &self.root, key, state);
        }
        tagged(out, &StreamLine::Free(free.clone()));
        format::encode_tagged(
            out,
            "checkpoint_end",
            &CheckpointEnd {
                time,
                keys: keys.len(),
            },
        );
    }

    /// The line of one delta, stamped with its own time (the health's and
    /// problems' with `now`).
    pub fn change(&self, out: &mut Vec<u8>, delta: &Delta, now: SystemTime) {
        let time = match delta {
            Delta::Synced { at, .. } => *at,
            other => other.changed_at().unwrap_or(now),
        };
        format::encode_delta(out, delta, time, None, &self.root);
    }

    /// The line of a verdict change.
    pub fn verdict(
        &self,
        out: &mut Vec<u8>,
        key: &LockKey,
        from: Option<&str>,
        to: Option<&Verdict>,
        time: SystemTime,
    ) {
        format::encode_verdict(out, key, from, to, time, &self.root);
    }

    /// A heartbeat at `time`.
    pub fn heartbeat(&self, out: &mut Vec<u8>, time: SystemTime) {
        tagged(out, &StreamLine::Heartbeat(Stamp { time }));
    }

    /// The line before a fresh checkpoint: why it comes.
    pub fn resync(&self, out: &mut Vec<u8>, time: SystemTime, reason: &str) {
        tagged(
            out,
            &StreamLine::Resync(Resync {
                time,
                reason: reason.to_string(),
            }),
        );
    }
}

fn tagged(out: &mut Vec<u8>, line: &StreamLine) {
    let _ = crate::text::write_json(&mut *out, line);
    out.push(b'\n');
}

/// A checkpoint, read whole.
#[derive(Debug, Clone, PartialEq)]
pub struct Checkpoint {
    /// The state's time.
    pub time: SystemTime,
    /// Full scans the service finished by then.
    pub syncs: u64,
    /// The service's watcher then.
    pub watcher: WatcherHealth,
    /// Its scan problems then.
    pub problems: Vec<ScanProblem>,
    /// Every key that is not simply free, with its state.
    pub keys: Vec<(LockKey, KeyState)>,
    /// The free keys, counted.
    pub free: FreeCounts,
}

/// What one line (or, for a checkpoint, its last line) said.
#[derive(Debug, Clone, PartialEq)]
pub enum Said {
    /// The stream's hello.
    Hello(Box<Hello>),
    /// A whole checkpoint (after its end line).
    Checkpoint(Box<Checkpoint>),
    /// A fresh checkpoint follows: the client fell behind.
    Resync {
        /// The service's reason.
        reason: String,
    },
    /// A change.
    Change(Delta),
    /// A verdict changed, as the service judged it (a client judges its
    /// own from the same changes and thresholds).
    Verdict,
    /// The service is there, as of this time.
    Heartbeat(SystemTime),
    /// A line of a checkpoint not yet complete.
    Partial,
}

/// Why a stream cannot be read on.
#[derive(Debug, thiserror::Error)]
pub enum BadStream {
    /// A line that is no line of this format.
    #[error("the service sent a line that is not a view stream line: {0}")]
    Line(#[from] BadLine),
    /// The first line is not a hello.
    #[error("the service did not start with a view stream hello (is it locktop serve?)")]
    NoHello,
    /// A stream of a newer version, or of another format.
    #[error(
        "the service speaks {format} version {version}; this locktop reads {FORMAT} version {VERSION} — upgrade locktop"
    )]
    Newer {
        /// Its format.
        format: String,
        /// Its version.
        version: u32,
    },
    /// A checkpoint whose lines do not add up.
    #[error("the service sent a broken checkpoint: {0}")]
    Checkpoint(&'static str),
}

/// Reads a stream line by line.
#[derive(Debug, Default)]
pub struct Reader {
    namer: Option<Namer>,
    open: Option<Checkpoint>,
}

impl Reader {
    /// Nothing read yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Reads one line (without its newline).
    pub fn line(&mut self, line: &[u8]) -> Result<Said, BadStream> {
        if line.starts_with(b"{\"view\":")
            || line.starts_with(b"{\"free\":")
            || line.starts_with(b"{\"heartbeat\":")
            || line.starts_with(b"{\"resync\":")
        {
            let said: StreamLine = serde_json::from_slice(line).map_err(BadLine::from)?;
            return self.stream_line(said);
        }
        let Some(namer) = self.namer.as_mut() else {
            return Err(BadStream::NoHello);
        };
        match format::decode(line, namer)? {
            Entry::CheckpointHead(head) => {
                self.open = Some(Checkpoint {
                    time: head.time,
                    syncs: head.syncs,
                    watcher: head.watcher,
                    problems: head.problems,
                    keys: Vec::with_capacity(head.keys.min(1 << 16)),
                    free: FreeCounts::default(),
                });
                Ok(Said::Partial)
            }
            Entry::CheckpointKey(key, state) => {
                let open = self
                    .open
                    .as_mut()
                    .ok_or(BadStream::Checkpoint("a key outside a checkpoint"))?;
                if open.keys.len() >= MAX_CHECKPOINT_KEYS {
                    return Err(BadStream::Checkpoint("more keys than any service keeps"));
                }
                open.keys.push((key, state));
                Ok(Said::Partial)
            }
            Entry::CheckpointEnd(end) => {
                let open = self
                    .open
                    .take()
                    .ok_or(BadStream::Checkpoint("an end without a head"))?;
                if open.keys.len() != end.keys {
                    return Err(BadStream::Checkpoint(
                        "fewer or more keys than its head said",
                    ));
                }
                Ok(Said::Checkpoint(Box::new(open)))
            }
            Entry::Change { delta, .. } => Ok(Said::Change(delta)),
            Entry::Verdict { .. } => Ok(Said::Verdict),
            Entry::Header(_) | Entry::CheckpointFree(_) | Entry::End(_) => Err(BadStream::Line(
                BadLine::Shape("a journal line the stream does not send"),
            )),
        }
    }

    fn stream_line(&mut self, said: StreamLine) -> Result<Said, BadStream> {
        match said {
            StreamLine::View(hello) => {
                if hello.format != FORMAT || hello.version > VERSION {
                    return Err(BadStream::Newer {
                        format: hello.format,
                        version: hello.version,
                    });
                }
                self.namer = Some(Namer::new(&hello.state_dir));
                Ok(Said::Hello(Box::new(hello)))
            }
            _ if self.namer.is_none() => Err(BadStream::NoHello),
            StreamLine::Free(free) => {
                let open = self
                    .open
                    .as_mut()
                    .ok_or(BadStream::Checkpoint("free counts outside a checkpoint"))?;
                open.free = free;
                Ok(Said::Partial)
            }
            StreamLine::Heartbeat(stamp) => Ok(Said::Heartbeat(stamp.time)),
            StreamLine::Resync(resync) => Ok(Said::Resync {
                reason: resync.reason,
            }),
        }
    }
}

/// Turns what a stream says back into the engine's deltas, for a front
/// end that follows them as it follows its own engine's.
///
/// Invariant: after the deltas of a checkpoint, the keys the consumer was
/// told are not simply free are exactly the checkpoint's (a key it had
/// that the checkpoint lacks is told free: the service counts it free or
/// it is gone); after a change's delta, they are what the service's are.
#[derive(Debug, Default)]
pub struct Mirror {
    /// What the consumer was told of each key that is not simply free.
    told: HashMap<LockKey, Liveness>,
    /// Full scans the consumer was told of.
    syncs: u64,
}

impl Mirror {
    /// Told nothing yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// The deltas that bring the consumer to `checkpoint`'s state: the
    /// keys that changed, those no longer noteworthy (as free), the
    /// problems, the health, and a finished scan when the service has
    /// finished one.
    pub fn checkpoint(&mut self, checkpoint: Checkpoint) -> Vec<Delta> {
        let at = checkpoint.time;
        let mut deltas = Vec::with_capacity(checkpoint.keys.len() + 3);
        let mut now: HashMap<LockKey, Liveness> = HashMap::with_capacity(checkpoint.keys.len());
        let listed = checkpoint.keys.len() as u64;
        for (key, state) in checkpoint.keys {
            now.insert(key.clone(), state.liveness);
            let previous = self.told.get(&key).copied();
            deltas.push(Delta::Key {
                key,
                state,
                previous,
                at,
            });
        }
        let mut gone: Vec<_> = self
            .told
            .iter()
            .filter(|(key, _)| !now.contains_key(*key))
            .map(|(key, liveness)| (key.clone(), *liveness))
            .collect();
        gone.sort();
        for (key, previous) in gone {
            deltas.push(Delta::Key {
                key,
                state: KeyState::bare(Liveness::Free),
                previous: Some(previous),
                at,
            });
        }
        self.told = now;
        deltas.push(Delta::Problems(checkpoint.problems));
        deltas.push(Delta::Health(checkpoint.watcher));
        if checkpoint.syncs > 0 {
            self.syncs = checkpoint.syncs;
            deltas.push(Delta::Synced {
                keys: (listed + checkpoint.free.total()) as usize,
                at,
            });
        }
        deltas
    }

    /// A change's delta, as the consumer gets it.
    pub fn change(&mut self, delta: Delta) -> Delta {
        match &delta {
            Delta::Key { key, state, .. } => {
                if state.is_bare_free() {
                    self.told.remove(key);
                } else {
                    self.told.insert(key.clone(), state.liveness);
                }
            }
            Delta::Removed { key, .. } => {
                self.told.remove(key);
            }
            Delta::Synced { .. } => self.syncs += 1,
            Delta::Health(_) | Delta::Problems(_) => {}
        }
        delta
    }

    /// Whether the consumer was told of a finished scan.
    pub fn synced(&self) -> bool {
        self.syncs > 0
    }
}

#[cfg(test)]
mod tests;
