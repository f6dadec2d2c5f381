//! Recording the engine's change stream into a journal: the
//! [`JournalWriter`] `record` and `serve --journal` write through, and
//! the [`Recorder`] loop of `record` (the engine's deltas, judged by the
//! one follower, into a journal on a thread of its own).
//!
//! Invariants: verdict changes are recorded only once the first full scan
//! is in the journal (those of the first state are its checkpoint's to
//! tell), each after the change that caused it; the recorder wakes for
//! the follower's next judgement, and at least every [`STOP_POLL`] to see
//! whether it is asked to stop.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime};

use locktop_core::engine::{Delta, EngineHandle, KeyState};
use locktop_core::operate::held::Change;
use locktop_core::stream::follow::{Follower, HeldOnly, Judged};

use crate::Journal;

/// How often the recording thread looks whether it is asked to stop.
pub const STOP_POLL: Duration = Duration::from_millis(100);

/// A journal, and whether the first full scan is in it: what `record`
/// and `serve --journal` write through. Verdict changes are recorded
/// only once it is (those of the first state are the checkpoint's to
/// tell: a replay judges them from it).
pub struct JournalWriter {
    journal: Journal,
    scanned: bool,
}

impl JournalWriter {
    /// Writes into `journal`, from its start.
    pub fn new(journal: Journal) -> Self {
        Self {
            journal,
            scanned: false,
        }
    }

    /// Records one delta and the verdict `changes` it caused (its own
    /// key's: [`locktop_core::stream::follow::Followed::changes`]).
    pub fn record(&mut self, delta: Delta, changes: Vec<Change>) -> std::io::Result<()> {
        self.record_sharing(delta, changes, None)
    }

    /// [`JournalWriter::record`], the delta's key's state kept as
    /// `shared` (see [`Journal::record_sharing`]).
    pub fn record_sharing(
        &mut self,
        delta: Delta,
        changes: Vec<Change>,
        shared: Option<Arc<KeyState>>,
    ) -> std::io::Result<()> {
        let first_scan_done = matches!(delta, Delta::Synced { .. });
        let at = match &delta {
            Delta::Key { at, .. } | Delta::Removed { at, .. } => *at,
            _ => SystemTime::now(),
        };
        self.journal.record_sharing(delta, shared)?;
        self.record_verdicts(changes, at)?;
        self.scanned |= first_scan_done;
        Ok(())
    }

    /// Records verdict `changes` found `at` without a delta of their own
    /// (a burst settled, the clock moved).
    pub fn record_verdicts(&mut self, changes: Vec<Change>, at: SystemTime) -> std::io::Result<()> {
        if !self.scanned {
            return Ok(());
        }
        for change in changes {
            self.journal
                .record_verdict(&change.key, change.from, change.to.as_ref(), at)?;
        }
        Ok(())
    }

    /// Why the journal cannot be written, while it cannot.
    pub fn failure(&self) -> Option<&crate::Failure> {
        self.journal.failure()
    }

    /// Writes again after a failure (see [`Journal::resume`]).
    pub fn resume(&mut self) -> std::io::Result<()> {
        self.journal.resume()
    }

    /// Bytes written so far.
    pub fn bytes_written(&self) -> u64 {
        self.journal.bytes_written()
    }

    /// Ends the journal with its end line: the recording went on until
    /// now (a clean stop; see [`Journal::finish`]).
    pub fn finish(self) -> std::io::Result<()> {
        self.journal.finish()
    }
}

/// `record`'s journal and the follower it judges verdicts with.
pub struct Recorder {
    writer: JournalWriter,
    follower: Follower<HeldOnly>,
}

impl Recorder {
    /// Records into `writer`, judging verdicts with `follower`.
    pub fn new(writer: JournalWriter, follower: Follower<HeldOnly>) -> Self {
        Self { writer, follower }
    }

    /// Records the engine's deltas until `stopping` is set or the engine
    /// ends, on the calling (non-async) thread, waiting on `runtime`;
    /// judges held keys again when a burst settles and once a second.
    pub fn drain(
        &mut self,
        mut handle: EngineHandle,
        runtime: &tokio::runtime::Handle,
        stopping: &AtomicBool,
    ) -> std::io::Result<()> {
        while !stopping.load(Ordering::Relaxed) {
            if let Some(judged) = self.follower.judge(SystemTime::now()) {
                self.record_judged(judged)?;
            }
            // Wake for the next judgement, and at least every STOP_POLL
            // to see `stopping`.
            let until_due = self.follower.due().map_or(Duration::ZERO, |due| {
                due.duration_since(SystemTime::now()).unwrap_or_default()
            });
            let wake = tokio::time::Instant::now() + until_due.min(STOP_POLL);
            let next = runtime
                .block_on(async { tokio::time::timeout_at(wake, handle.deltas.recv()).await });
            match next {
                Ok(Some(delta)) => self.delta(delta)?,
                Ok(None) => return Ok(()),
                Err(_) => {}
            }
        }
        Ok(())
    }

    /// Ends the journal with its end line (a clean stop).
    pub fn finish(self) -> std::io::Result<()> {
        self.writer.finish()
    }

    /// Records one delta and the verdict changes it caused. The verdicts
    /// of the first state are the checkpoint's to tell (a replay judges
    /// them from it).
    fn delta(&mut self, delta: Delta) -> std::io::Result<()> {
        let followed = self
            .follower
            .apply_received(delta.clone(), SystemTime::now());
        if let Some(settled) = followed.settled {
            self.record_judged(settled)?;
        }
        self.writer
            .record_sharing(delta, followed.changes, followed.shared)
    }

    /// Records verdict changes judged without a delta of their own.
    fn record_judged(&mut self, judged: Judged) -> std::io::Result<()> {
        let at = judged.at.unwrap_or_else(SystemTime::now);
        self.writer.record_verdicts(judged.changes, at)
    }
}
