//! The lines `locktop watch` has not written yet: a coalescing queue
//! between the loop that drains the engine and the thread that writes
//! stdout. A reader that stalls slows the output down; it never makes
//! memory grow with the number of changes.
//!
//! # Invariant
//!
//! - **At most two pending lines per key.** A transition of a key that
//!   already has a pending line folds into it: the line keeps the `from`
//!   of the first transition it stands for, takes the latest `to`, state
//!   and time, and counts what it absorbed in `folded`. The one line that
//!   is never folded into a later state is a removal: a key whose files
//!   went away keeps one pending `removed` line, and its re-creation
//!   starts a new line behind it, so the reader sees the removal, then the
//!   re-creation. Another removal folds that new line into the `removed`
//!   one.
//! - **A key that appears and vanishes** while its only pending line
//!   says it is new leaves no line: the reader never heard of it, and its
//!   latest state (not on disk) is what the reader already believes.
//! - **Order.** Lines come out in the order of their latest transition (a
//!   line that absorbs one moves to the back). For one key this is the
//!   order its transitions happened, so applying the lines in order gives
//!   each key its latest state, and each line's `from` is the `to` of the
//!   key's previous line (`null` after `removed`).
//! - **Verdict lines** (a key's verdict changed): at most one pending per
//!   key, folded like a key's line (the first `from`, the latest verdict).
//!   One whose latest verdict is none, folding changes that began from
//!   none, tells the reader nothing and is dropped. Each follows the key
//!   line of the change that caused it.
//! - **Health lines** are not folded until [`MAX_PENDING_HEALTH`] of them
//!   wait; past that, the newest one absorbs the next. A `synced` line
//!   (text mode) is a count of keys on disk: only the latest waits.
//!
//! # Bound
//!
//! Pending key lines are bounded by the keys on disk, not by the number
//! of changes: one line per key on disk now, plus one `removed` line per
//! key the reader was told exists (or that was on disk when `watch`
//! started) and is gone since; one verdict line per key that has a
//! verdict now or had one when the reader was last told. On top of that at
//! most
//! [`MAX_PENDING_HEALTH`] health lines and one `synced` line. A line
//! holds a key's liveness, holder PIDs, error and refused-try count (with
//! at most [`REFUSED_BY_SHOWN`] PIDs), never the holders' command lines.

use std::collections::{BTreeMap, HashMap};
use std::time::SystemTime;

use crate::disk::LockKey;
use crate::engine::{KeyState, Liveness, WatcherHealth};
use crate::liveness::HoldersNote;
use crate::liveness::state::RefusedTries;
use crate::operate::verdict::Verdict;

#[cfg(test)]
mod tests;

/// Health lines that may wait unfolded; past this, the newest pending
/// health line absorbs the next one.
pub(crate) const MAX_PENDING_HEALTH: usize = 32;

/// What a key line says the key went to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyTo {
    /// A probed state.
    State {
        /// The liveness now.
        liveness: Liveness,
        /// Holder PIDs (empty when not held or not known yet).
        pids: Vec<u32>,
        /// The probe's error, if it failed.
        error: Option<String>,
        /// Why a held key lists no holder, when it lists none.
        holders_note: Option<HoldersNote>,
        /// `LOCK_NB` requests refused in the last minute (the kernel's
        /// lock events), with at most [`REFUSED_BY_SHOWN`] PIDs: the
        /// engine says it again at most once a second while tries go on.
        refused: Option<RefusedTries>,
    },
    /// Its files went away.
    Removed,
}

impl KeyTo {
    /// What a line needs of `state`.
    pub fn state(state: &KeyState) -> Self {
        KeyTo::State {
            liveness: state.liveness,
            pids: state.holders.iter().map(|p| p.pid).collect(),
            error: state.error.clone(),
            holders_note: state.holders_note,
            refused: state.refused.as_ref().map(|refused| RefusedTries {
                last_minute: refused.last_minute,
                by: refused.by.iter().take(REFUSED_BY_SHOWN).copied().collect(),
            }),
        }
    }
}

/// How many refusing PIDs a line names (most refused first).
pub(crate) const REFUSED_BY_SHOWN: usize = 5;

/// What one line reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Report {
    /// A key went `from` (its liveness before; `None`: it is new) `to`.
    Key {
        /// Which claim.
        key: LockKey,
        /// Its liveness before the first transition the line stands for.
        from: Option<Liveness>,
        /// Where its latest transition left it.
        to: KeyTo,
    },
    /// A key's verdict changed.
    Verdict {
        /// Which claim.
        key: LockKey,
        /// The kind of its verdict before the first change the line
        /// stands for (`None`: it had none).
        from: Option<&'static str>,
        /// Its verdict after the latest (`None`: it has none).
        to: Option<Verdict>,
    },
    /// The watcher's health changed.
    Health(WatcherHealth),
    /// A full scan found this many keys on disk.
    Synced {
        /// How many.
        keys: usize,
    },
}

/// One line for the writer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line {
    /// What it says.
    pub report: Report,
    /// When the latest transition it stands for happened.
    pub at: SystemTime,
    /// How many earlier transitions it absorbed (0: none).
    pub folded: u64,
}

/// The pending part of one key's transitions, waiting as one line.
#[derive(Debug)]
struct Run {
    from: Option<Liveness>,
    to: KeyTo,
    at: SystemTime,
    folded: u64,
}

/// A key's pending lines: its `removed` line, then its current one.
#[derive(Debug, Default)]
struct KeyLines {
    removed: Option<(u64, Run)>,
    current: Option<(u64, Run)>,
}

/// The pending verdict changes of one key, waiting as one line.
#[derive(Debug)]
struct VerdictRun {
    from: Option<&'static str>,
    to: Option<Verdict>,
    at: SystemTime,
    folded: u64,
}

/// What waits at one place of the output order.
#[derive(Debug)]
enum Slot {
    Removed(LockKey),
    Current(LockKey),
    Verdict(LockKey),
    Notice(Line),
}

/// The pending lines, in output order (see the module doc).
#[derive(Debug, Default)]
pub struct Queue {
    /// Output order: sequence number → what waits there.
    order: BTreeMap<u64, Slot>,
    next: u64,
    keys: HashMap<LockKey, KeyLines>,
    verdicts: HashMap<LockKey, (u64, VerdictRun)>,
    /// Health lines pending, and the sequence number of the newest.
    health: usize,
    newest_health: Option<u64>,
    synced: Option<u64>,
}

impl Queue {
    /// True when no line is pending.
    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }

    /// A transition of `key`: `from` its liveness before (`None`: new)
    /// `to` a state or its removal, observed `at`.
    pub(crate) fn push_key(
        &mut self,
        key: LockKey,
        from: Option<Liveness>,
        to: KeyTo,
        at: SystemTime,
    ) {
        match to {
            KeyTo::Removed => self.push_removal(key, from, at),
            to => self.push_change(key, from, to, at),
        }
    }

    fn push_change(&mut self, key: LockKey, from: Option<Liveness>, to: KeyTo, at: SystemTime) {
        let seq = self.bump();
        let lines = self.keys.entry(key.clone()).or_default();
        let run = match lines.current.take() {
            Some((old, mut run)) => {
                self.order.remove(&old);
                run.to = to;
                run.at = at;
                run.folded += 1;
                run
            }
            None => Run {
                from,
                to,
                at,
                folded: 0,
            },
        };
        lines.current = Some((seq, run));
        self.order.insert(seq, Slot::Current(key));
    }

    fn push_removal(&mut self, key: LockKey, from: Option<Liveness>, at: SystemTime) {
        let seq = self.bump();
        let lines = self.keys.entry(key.clone()).or_default();
        let mut take = |slot: &mut Option<(u64, Run)>| {
            slot.take().map(|(old, run)| {
                self.order.remove(&old);
                run
            })
        };
        let current = take(&mut lines.current);
        let removed = take(&mut lines.removed);
        let run = match (removed, current) {
            (Some(mut run), current) => {
                // Everything since the first pending removal, then this one.
                run.folded += 1 + current.map_or(0, |c| c.folded + 1);
                run.at = at;
                Some(run)
            }
            // Appeared and vanished while pending: nothing to tell.
            (None, Some(current)) if current.from.is_none() => None,
            (None, Some(current)) => Some(Run {
                from: current.from,
                to: KeyTo::Removed,
                at,
                folded: current.folded + 1,
            }),
            (None, None) => Some(Run {
                from,
                to: KeyTo::Removed,
                at,
                folded: 0,
            }),
        };
        match run {
            Some(run) => {
                lines.removed = Some((seq, run));
                self.order.insert(seq, Slot::Removed(key));
            }
            None => {
                self.keys.remove(&key);
            }
        }
    }

    /// `key`'s verdict changed `at`, `from` a kind `to` a verdict.
    pub(crate) fn push_verdict(
        &mut self,
        key: LockKey,
        from: Option<&'static str>,
        to: Option<Verdict>,
        at: SystemTime,
    ) {
        let seq = self.bump();
        let run = match self.verdicts.remove(&key) {
            Some((old, mut run)) => {
                self.order.remove(&old);
                run.to = to;
                run.at = at;
                run.folded += 1;
                run
            }
            None => VerdictRun {
                from,
                to,
                at,
                folded: 0,
            },
        };
        if run.from.is_none() && run.to.is_none() {
            return; // none, then none: nothing to tell
        }
        self.verdicts.insert(key.clone(), (seq, run));
        self.order.insert(seq, Slot::Verdict(key));
    }

    /// The watcher's health changed `at`.
    pub(crate) fn push_health(&mut self, health: WatcherHealth, at: SystemTime) {
        let report = Report::Health(health);
        let seq = match self.newest_health {
            Some(newest) if self.health >= MAX_PENDING_HEALTH => {
                self.fold_notice(newest, report, at)
            }
            _ => {
                self.health += 1;
                self.insert_notice(report, at)
            }
        };
        self.newest_health = Some(seq);
    }

    /// A full scan found `keys` keys on disk `at`.
    pub(crate) fn push_synced(&mut self, keys: usize, at: SystemTime) {
        let report = Report::Synced { keys };
        let seq = match self.synced {
            Some(old) => self.fold_notice(old, report, at),
            None => self.insert_notice(report, at),
        };
        self.synced = Some(seq);
    }

    /// The oldest pending line, if any.
    pub fn pop(&mut self) -> Option<Line> {
        loop {
            let (seq, slot) = self.order.pop_first()?;
            let line = match slot {
                Slot::Notice(line) => {
                    self.forget_notice(seq, &line.report);
                    Some(line)
                }
                Slot::Removed(key) => self.take_key_line(key, |lines| lines.removed.take()),
                Slot::Current(key) => self.take_key_line(key, |lines| lines.current.take()),
                Slot::Verdict(key) => self.verdicts.remove(&key).map(|(_, run)| Line {
                    report: Report::Verdict {
                        key,
                        from: run.from,
                        to: run.to,
                    },
                    at: run.at,
                    folded: run.folded,
                }),
            };
            if line.is_some() {
                return line;
            }
        }
    }

    fn take_key_line(
        &mut self,
        key: LockKey,
        slot: impl FnOnce(&mut KeyLines) -> Option<(u64, Run)>,
    ) -> Option<Line> {
        let lines = self.keys.get_mut(&key)?;
        let taken = slot(lines);
        if lines.removed.is_none() && lines.current.is_none() {
            self.keys.remove(&key);
        }
        let (_, run) = taken?;
        Some(Line {
            report: Report::Key {
                key,
                from: run.from,
                to: run.to,
            },
            at: run.at,
            folded: run.folded,
        })
    }

    fn forget_notice(&mut self, seq: u64, report: &Report) {
        match report {
            Report::Health(_) => {
                self.health = self.health.saturating_sub(1);
                if self.newest_health == Some(seq) {
                    self.newest_health = None;
                }
            }
            Report::Synced { .. } if self.synced == Some(seq) => self.synced = None,
            _ => {}
        }
    }

    fn insert_notice(&mut self, report: Report, at: SystemTime) -> u64 {
        let seq = self.bump();
        let line = Line {
            report,
            at,
            folded: 0,
        };
        self.order.insert(seq, Slot::Notice(line));
        seq
    }

    /// Moves the pending notice at `old` to the back, absorbing `report`.
    fn fold_notice(&mut self, old: u64, report: Report, at: SystemTime) -> u64 {
        let folded = match self.order.remove(&old) {
            Some(Slot::Notice(line)) => line.folded + 1,
            _ => 0,
        };
        let seq = self.bump();
        let line = Line { report, at, folded };
        self.order.insert(seq, Slot::Notice(line));
        seq
    }

    fn bump(&mut self) -> u64 {
        self.next += 1;
        self.next
    }
}
