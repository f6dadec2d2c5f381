//! The kernel's lock events as the engine's [`EventStream`], as the paced
//! reader thread of [`super::wait`] drains them (no wake-up while no flock
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
//! before; the rest wait for the next drain, at most one window later.
//!
//! Invariants: every event passes, once, in time order; a lost record
//! passes at once (the table is resynchronized either way).

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use super::event::LockEvent;
use super::{AsyncKernelLockEvents, Record};
use crate::liveness::live_table::EventStream;

/// How long before a drain an event must be stamped to pass: more than
/// the kernel takes from stamping a sample to writing it (microseconds).
pub const REORDER_WINDOW: Duration = Duration::from_millis(1);

/// The kernel's events in time order across drains.
pub struct OrderedEvents {
    events: AsyncKernelLockEvents,
    /// Events drained but too recent to pass yet, in time order.
    held: Vec<LockEvent>,
}

impl OrderedEvents {
    /// Reads `events` in order.
    pub fn new(events: AsyncKernelLockEvents) -> Self {
        Self {
            events,
            held: Vec::new(),
        }
    }

    /// The records that may pass now, waiting for them as long as needed.
    async fn next_in_order(&mut self, out: &mut Vec<Record>) -> std::io::Result<()> {
        let window = REORDER_WINDOW.as_nanos() as u64;
        loop {
            let mut records = Vec::new();
            let began = if self.held.is_empty() {
                self.events.next_batch_stamped(&mut records).await?
            } else {
                // Held events pass once the window has gone by, with what
                // came meanwhile.
                match tokio::time::timeout(
                    REORDER_WINDOW,
                    self.events.next_batch_stamped(&mut records),
                )
                .await
                {
                    Ok(began) => began?,
                    Err(_) => super::event::monotonic_now(),
                }
            };
            for record in records {
                match record {
                    Record::Lost(count) => out.push(Record::Lost(count)),
                    Record::Event(event) => self.held.push(event),
                }
            }
            self.held.sort_by_key(|event| event.at);
            let ready = self
                .held
                .partition_point(|event| event.at.saturating_add(window) <= began);
            out.extend(self.held.drain(..ready).map(Record::Event));
            if !out.is_empty() {
                return Ok(());
            }
        }
    }
}

impl EventStream for OrderedEvents {
    fn next_batch<'a>(
        &'a mut self,
        out: &'a mut Vec<Record>,
    ) -> Pin<Box<dyn Future<Output = std::io::Result<()>> + Send + 'a>> {
        Box::pin(self.next_in_order(out))
    }

    fn nudger(&self) -> Option<crate::liveness::live_table::Nudger> {
        let nudge = self.events.nudge();
        Some(std::sync::Arc::new(move || nudge.now()))
    }

    fn watch_devices(&mut self, devices: &[(u32, u32)]) -> std::io::Result<()> {
        self.events
            .reader()
            .set_devices(devices)
            .map_err(std::io::Error::other)
    }
}
