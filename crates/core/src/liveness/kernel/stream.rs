//! The kernel's lock events as the engine's [`EventStream`], as the paced
//! reader of [`super::wait`] drains them (no wake-up while no flock
//! happens, at most one a [`super::wait::PACE`] while many do), in the
//! order the events happened.
//!
//! Order: one drain reads the CPUs' rings one after the other, so an event
//! written to an earlier ring just after that ring was read comes in the
//! next drain, after a later event of another CPU that this drain got —
//! two events on one file (an unlock, then another process's lock) would
//! be applied the wrong way round. So records are held back for
//! [`REORDER_WINDOW`]: a drain passes on only the events stamped at least
//! that long before it began (every one of those was in its ring by then,
//! so none can come later), merged in time order with those held from
//! before; the rest wait for the next drain, at most one window later —
//! one is asked for if none comes by then (never for the events of
//! [`QuietFiles`], files known to be no claim's: they wait for the next
//! drain, whenever it comes). A pass is judged by a drain's
//! start, never by the clock: an event older than the held ones may still
//! sit in a ring that no drain has read since.
//!
//! Invariants: every event passes, once, in time order — or, drained
//! after a newer one passed (written to its ring later than the window
//! allows for), as a lost record; a lost record passes at once (the table
//! is resynchronized either way).

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use super::event::LockEvent;
use super::quiet::QuietFiles;
use super::{AsyncKernelLockEvents, Record};
use crate::liveness::kernel::live_table::EventStream;

/// How long before a drain an event must be stamped to pass: more than
/// the kernel takes from stamping a sample to writing it (microseconds,
/// with interrupts off). An event that comes later than that anyway is
/// never applied out of order: it is reported lost
/// ([`OrderedEvents`]), and the table judged again.
pub(crate) const REORDER_WINDOW: Duration = Duration::from_micros(250);

/// How long held events wait for the drain the reader owes them before
/// one is asked for (the reader starved).
pub(crate) const FLUSH_AFTER: Duration = Duration::from_millis(1);

/// Drains of the rings as they are handed over, each with the time it
/// began: what [`OrderedEvents`] puts in order. A drain dropped while it
/// waits loses nothing: what it appended to `out` stays there.
pub trait Drains: Send {
    /// Waits for the next drain's records (appended to `out`) and returns
    /// when it began: every record stamped well before then has been
    /// handed over, by this drain or an earlier one.
    fn next_drain<'a>(
        &'a mut self,
        out: &'a mut Vec<Record>,
    ) -> Pin<Box<dyn Future<Output = std::io::Result<u64>> + Send + 'a>>;

    /// Asks for a drain now and waits for it, as [`Self::next_drain`]
    /// does, its batch handed over even if it read nothing.
    fn flush<'a>(
        &'a mut self,
        out: &'a mut Vec<Record>,
    ) -> Pin<Box<dyn Future<Output = std::io::Result<u64>> + Send + 'a>>;
}

impl Drains for AsyncKernelLockEvents {
    fn next_drain<'a>(
        &'a mut self,
        out: &'a mut Vec<Record>,
    ) -> Pin<Box<dyn Future<Output = std::io::Result<u64>> + Send + 'a>> {
        Box::pin(self.next_batch_stamped(out))
    }

    fn flush<'a>(
        &'a mut self,
        out: &'a mut Vec<Record>,
    ) -> Pin<Box<dyn Future<Output = std::io::Result<u64>> + Send + 'a>> {
        Box::pin(self.flush_stamped(out))
    }
}

/// The kernel's events in time order across drains.
pub struct OrderedEvents<D = AsyncKernelLockEvents> {
    events: D,
    /// Events drained but too recent to pass yet, in time order.
    held: Vec<LockEvent>,
    /// The stamp of the newest event passed: one older than it, drained
    /// since, would be applied out of order.
    passed: u64,
    /// Files whose held events wait for the next drain, however late,
    /// with no drain asked for them (see [`QuietFiles`]).
    quiet: QuietFiles,
    /// Records drained and not sorted yet: kept here, not in the
    /// future, so that a read dropped while it waits (the engine's loop
    /// has other things to do) loses none.
    drained: Vec<Record>,
}

impl<D: Drains> OrderedEvents<D> {
    /// Reads `events` in order.
    pub fn new(events: D) -> Self {
        Self::with_quiet(events, QuietFiles::default())
    }

    /// Reads `events` in order, asking no drain for held events of
    /// `quiet` files.
    pub fn with_quiet(events: D, quiet: QuietFiles) -> Self {
        Self {
            events,
            held: Vec::new(),
            passed: 0,
            quiet,
            drained: Vec::new(),
        }
    }

    /// True when a held event is of a file that is not quiet.
    fn holds_urgent(&self) -> bool {
        let quiet = self
            .quiet
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        self.held.iter().any(|event| !quiet.contains(&event.file))
    }

    /// The records that may pass now, waiting for them as long as needed.
    /// Cancel-safe: dropped while it waits, it loses no record (drained
    /// ones wait in `drained`, held ones in `held`, and `out` is only
    /// filled once it is done).
    async fn next_in_order(&mut self, out: &mut Vec<Record>) -> std::io::Result<()> {
        loop {
            let began = if !self.holds_urgent() {
                self.events.next_drain(&mut self.drained).await?
            } else {
                // Held events pass once a drain that began a window after
                // them has read every ring: the next one if it comes
                // within the window, else one asked for now. (A drain's
                // time, never the clock's: an older event may still sit
                // in a ring no drain has read since.)
                match tokio::time::timeout(FLUSH_AFTER, self.events.next_drain(&mut self.drained))
                    .await
                {
                    Ok(began) => began?,
                    Err(_) => self.events.flush(&mut self.drained).await?,
                }
            };
            self.pass(began, out);
            if !out.is_empty() {
                return Ok(());
            }
        }
    }

    /// Asks for a drain now, waits for it (on this runtime: no wake-up
    /// of its own) and appends what may pass — possibly nothing: what a
    /// judgement takes first. The records stamped within a window of
    /// the drain wait, as any (the drain owed to them follows).
    async fn drain_in_place(&mut self, out: &mut Vec<Record>) -> std::io::Result<()> {
        let began = self.events.flush(&mut self.drained).await?;
        self.pass(began, out);
        Ok(())
    }

    /// Sorts the records drained into what passes — every event stamped
    /// a window before `began` (when the latest drain began), in time
    /// order, and every loss — appended to `out`, and what is held.
    fn pass(&mut self, began: u64, out: &mut Vec<Record>) {
        let window = REORDER_WINDOW.as_nanos() as u64;
        for record in std::mem::take(&mut self.drained) {
            match record {
                Record::Lost(_) | Record::Readmitted(_) => out.push(record),
                // Later than the window allows for: said as lost (the
                // table is judged again), never applied out of order.
                Record::Event(event) if event.at < self.passed => out.push(Record::Lost(1)),
                Record::Event(event) => self.held.push(event),
            }
        }
        self.held.sort_by_key(|event| event.at);
        let ready = self
            .held
            .partition_point(|event| event.at.saturating_add(window) <= began);
        if let Some(newest) = ready.checked_sub(1).map(|last| self.held[last].at) {
            self.passed = newest;
        }
        out.extend(self.held.drain(..ready).map(Record::Event));
    }
}

impl EventStream for OrderedEvents<AsyncKernelLockEvents> {
    fn next_batch<'a>(
        &'a mut self,
        out: &'a mut Vec<Record>,
    ) -> Pin<Box<dyn Future<Output = std::io::Result<()>> + Send + 'a>> {
        Box::pin(self.next_in_order(out))
    }

    fn drain_now<'a>(
        &'a mut self,
        out: &'a mut Vec<Record>,
    ) -> Pin<Box<dyn Future<Output = std::io::Result<()>> + Send + 'a>> {
        Box::pin(self.drain_in_place(out))
    }

    fn nudger(&self) -> Option<crate::liveness::kernel::live_table::Nudger> {
        Some(std::sync::Arc::new(self.events.nudge()))
    }

    fn quiet_files(&self) -> Option<QuietFiles> {
        Some(self.quiet.clone())
    }

    fn watch_devices(&mut self, devices: &[(u32, u32)]) -> std::io::Result<()> {
        self.events
            .reader()
            .set_devices(devices)
            .map_err(std::io::Error::other)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::liveness::kernel::event::{LockKind, monotonic_now};
    use crate::liveness::proc_locks::FileId;

    /// Drains scripted by a test: `next` hands over what it queued (a
    /// drain that never comes when empty), `flush` the next scripted
    /// flush, begun at the time the test gives.
    struct Scripted {
        next: Vec<(u64, Vec<Record>)>,
        flushes: Vec<(u64, Vec<Record>)>,
    }

    impl Drains for Scripted {
        fn next_drain<'a>(
            &'a mut self,
            out: &'a mut Vec<Record>,
        ) -> Pin<Box<dyn Future<Output = std::io::Result<u64>> + Send + 'a>> {
            Box::pin(async move {
                if self.next.is_empty() {
                    return std::future::pending().await;
                }
                let (began, records) = self.next.remove(0);
                out.extend(records);
                Ok(began)
            })
        }

        fn flush<'a>(
            &'a mut self,
            out: &'a mut Vec<Record>,
        ) -> Pin<Box<dyn Future<Output = std::io::Result<u64>> + Send + 'a>> {
            Box::pin(async move {
                let (began, records) = self.flushes.remove(0);
                out.extend(records);
                Ok(began)
            })
        }
    }

    fn taken(at: u64, pid: u32) -> Record {
        Record::Event(LockEvent {
            at,
            file: FileId {
                major: 8,
                minor: 1,
                inode: 7,
            },
            pid,
            owner: u64::from(pid),
            kind: LockKind::Taken { exclusive: true },
        })
    }

    fn pids(records: &[Record]) -> Vec<u32> {
        records
            .iter()
            .map(|record| match record {
                Record::Event(event) => event.pid,
                Record::Lost(_) | Record::Readmitted(_) => 0,
            })
            .collect()
    }

    /// An event of one CPU written to its ring just after the drain read
    /// that ring comes with the next drain, after a later event of another
    /// CPU: when no drain comes within the window, the held later event
    /// must not pass by the clock alone (the older one still sits in its
    /// ring); a drain asked for then brings the older one, and both pass
    /// in the order they happened.
    #[tokio::test]
    async fn a_held_event_waits_for_a_drain_not_the_clock() {
        let window = REORDER_WINDOW.as_nanos() as u64;
        let start = monotonic_now();
        // The first drain began just after the later event was stamped:
        // it is held. Its clock passes the window long before any other
        // drain comes.
        let later = taken(start, 2);
        let older = taken(start - 1, 1);
        let mut ordered = OrderedEvents::new(Scripted {
            next: vec![(start + 10, vec![later])],
            flushes: vec![(start + 2 * window, vec![older])],
        });
        let mut out = Vec::new();
        ordered.next_in_order(&mut out).await.expect("scripted");
        assert_eq!(pids(&out), [1, 2], "the older event first");
    }

    /// An event drained after a newer one passed is never applied out of
    /// order: it comes as a lost record (the table is judged again).
    #[tokio::test]
    async fn an_event_later_than_the_window_is_reported_lost() {
        let window = REORDER_WINDOW.as_nanos() as u64;
        let start = monotonic_now();
        let newer = taken(start, 2);
        let late = taken(start - 1, 1);
        let mut ordered = OrderedEvents::new(Scripted {
            next: vec![
                (start + window, vec![newer]),
                (start + 2 * window, vec![late]),
            ],
            flushes: Vec::new(),
        });
        let mut out = Vec::new();
        ordered.next_in_order(&mut out).await.expect("scripted");
        assert_eq!(pids(&out), [2]);
        out.clear();
        ordered.next_in_order(&mut out).await.expect("scripted");
        assert!(matches!(out[..], [Record::Lost(1)]), "{out:?}");
    }

    /// A held event of a quiet file (no claim's) asks for no drain: it
    /// waits for the next one, however late (a host's foreign flocks would
    /// otherwise ask for one every [`FLUSH_AFTER`]); held with an event of
    /// another file, it passes as any.
    #[tokio::test]
    async fn a_quiet_files_held_event_asks_for_no_drain() {
        let start = monotonic_now();
        let quiet = QuietFiles::default();
        let foreign = taken(start, 1);
        let Record::Event(event) = &foreign else {
            unreachable!()
        };
        quiet.write().unwrap().insert(event.file);
        // No flush scripted: one asked for would panic.
        let mut ordered = OrderedEvents::with_quiet(
            Scripted {
                next: vec![(start + 10, vec![foreign])],
                flushes: Vec::new(),
            },
            quiet.clone(),
        );
        let mut out = Vec::new();
        let waited = tokio::time::timeout(10 * FLUSH_AFTER, ordered.next_in_order(&mut out)).await;
        assert!(waited.is_err(), "held, no drain asked: {out:?}");
        quiet.write().unwrap().clear();
        let window = REORDER_WINDOW.as_nanos() as u64;
        let mut ordered = OrderedEvents::with_quiet(
            Scripted {
                next: vec![(start + 10, vec![taken(start, 1)])],
                flushes: vec![(start + 2 * window, Vec::new())],
            },
            quiet,
        );
        ordered.next_in_order(&mut out).await.expect("scripted");
        assert_eq!(pids(&out), [1], "not quiet: a drain is asked for it");
    }
}
