//! Where a change's time goes on its way through the engine: an opt-in
//! record of each stage a key passed, with when it passed it. The
//! benchmark's kill rows break their latency down with it, and the chaos
//! suite prints it for a hold the engine never reported.
//!
//! Invariants: off unless [`super::EngineConfig::trace`] is set (then each
//! stage costs one branch); bounded — past [`Trace::CAPACITY`] records it
//! counts what it drops instead of growing; recording never waits on the
//! reader for longer than one `Vec::push`.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use crate::disk::LockKey;
use crate::liveness::Liveness;

/// A point on a change's way from the filesystem to the consumer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// The watcher thread was handed a filesystem event naming the key
    /// (notify's read of the inotify queue).
    Read,
    /// The engine loop took that change from its queue.
    Dequeued,
    /// The key's probe began (after the coalescing window).
    ProbeStart,
    /// The probe answered.
    Probed(Liveness),
    /// The key's holders were looked up: a `/proc/locks` read and the
    /// verification of the PIDs it names finished.
    Indexed,
    /// A held result waits for a `/proc/locks` read the rate limit forbids now.
    Deferred,
    /// A periodic sweep's finding about the key was applied.
    Swept(Liveness),
    /// A delta for the key went to the consumer (its channel or outbox).
    Sent(Liveness),
}

/// One stage one key passed, and when.
#[derive(Debug, Clone)]
pub struct Record {
    /// The claim.
    pub key: LockKey,
    /// The stage.
    pub stage: Stage,
    /// When (the monotonic clock, comparable with the caller's
    /// `Instant::now()`).
    pub at: Instant,
}

/// A stretch of the engine loop's own work (not tied to one key), kept
/// when it lasted at least [`Trace::SPAN_MIN`]: while it runs, no change
/// is dequeued and no probe begins.
#[derive(Debug, Clone)]
pub struct Span {
    /// What the loop was doing (`"apply sweep"`, `"probe batch"`, …).
    pub what: &'static str,
    /// When it began.
    pub from: Instant,
    /// When it ended.
    pub to: Instant,
    /// How many things it handled (keys, changes, files).
    pub items: usize,
}

/// The records of one engine, shared with whoever reads them.
#[derive(Debug, Default)]
pub struct Trace {
    records: Mutex<Vec<Record>>,
    spans: Mutex<Vec<Span>>,
    dropped: AtomicU64,
}

impl Trace {
    /// Records (and, apart, spans) kept at most until [`Trace::take`]
    /// and [`Trace::take_spans`] empty the store.
    pub(crate) const CAPACITY: usize = 1 << 20;

    /// The shortest loop work kept as a [`Span`].
    pub(crate) const SPAN_MIN: std::time::Duration = std::time::Duration::from_millis(1);

    /// Records that the loop did `what` (to `items` things) from `from`
    /// until now (if it took at least [`Trace::SPAN_MIN`]).
    pub fn span(&self, what: &'static str, from: Instant, items: usize) {
        let to = Instant::now();
        if to.duration_since(from) < Self::SPAN_MIN {
            return;
        }
        self.keep(
            &self.spans,
            Span {
                what,
                from,
                to,
                items,
            },
        );
    }

    /// Every span so far, oldest first; the store starts empty again.
    pub fn take_spans(&self) -> Vec<Span> {
        take_all(&self.spans)
    }

    /// Records that `key` passed `stage` now.
    pub fn record(&self, key: &LockKey, stage: Stage) {
        let at = Instant::now();
        let record = Record {
            key: key.clone(),
            stage,
            at,
        };
        self.keep(&self.records, record);
    }

    /// Every record so far, oldest first; the store starts empty again.
    pub fn take(&self) -> Vec<Record> {
        take_all(&self.records)
    }

    /// Adds `item` to `store`, or counts it dropped once the store holds
    /// [`Trace::CAPACITY`] items.
    fn keep<T>(&self, store: &Mutex<Vec<T>>, item: T) {
        let Ok(mut kept) = store.lock() else {
            return;
        };
        if kept.len() >= Self::CAPACITY {
            self.dropped.fetch_add(1, Ordering::Relaxed);
            return;
        }
        kept.push(item);
    }

    /// Records and spans not kept because the store was full.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }
}

/// Empties `store`, returning what it held.
fn take_all<T>(store: &Mutex<Vec<T>>) -> Vec<T> {
    store
        .lock()
        .map(|mut kept| std::mem::take(&mut *kept))
        .unwrap_or_default()
}

/// Records `stage` for `key` when tracing is on.
pub(crate) fn note(trace: &Option<std::sync::Arc<Trace>>, key: &LockKey, stage: Stage) {
    if let Some(trace) = trace {
        trace.record(key, stage);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn keeps_records_in_order_up_to_its_capacity_and_counts_the_rest() {
        let trace = Trace::default();
        let key = LockKey::from_coord(Path::new("/s"), Path::new("/s/locks/agents/tags"), "t");
        trace.record(&key, Stage::Read);
        trace.record(&key, Stage::Sent(Liveness::Free));
        let records = trace.take();
        assert_eq!(records.len(), 2);
        assert_eq!(records[0].stage, Stage::Read);
        assert!(records[0].at <= records[1].at);
        assert!(trace.take().is_empty(), "take empties the store");
        {
            let mut full = trace.records.lock().unwrap();
            full.resize(Trace::CAPACITY, records[0].clone());
        }
        trace.record(&key, Stage::Read);
        assert_eq!(trace.dropped(), 1);
        assert_eq!(trace.take().len(), Trace::CAPACITY);
    }

    #[test]
    fn keeps_only_loop_work_long_enough_to_delay_a_change() {
        let trace = Trace::default();
        trace.span("quick", Instant::now(), 1);
        let long_ago = Instant::now() - Trace::SPAN_MIN * 2;
        trace.span("slow", long_ago, 1);
        let spans = trace.take_spans();
        assert_eq!(spans.len(), 1);
        assert_eq!(spans[0].what, "slow");
        assert!(spans[0].to.duration_since(spans[0].from) >= Trace::SPAN_MIN);
    }
}
