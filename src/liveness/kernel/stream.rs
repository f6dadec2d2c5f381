//! The kernel's lock events as the engine's [`EventStream`]: each record
//! typed as the [`crate::liveness::live_table`] takes it, read on the
//! engine's runtime (woken by the rings' epoll descriptor: no thread, no
//! timer, nothing done while no flock happens).
//!
//! Invariant: every event the table can use passes, in the order it
//! came; an event of no use to it ([`LockKind::Other`]) is dropped; a
//! lost record stays a lost record.

use std::future::Future;
use std::pin::Pin;

use super::event::LockKind;
use super::{AsyncKernelLockEvents, Record};
use crate::liveness::live_table::{self, EventRecord, EventStream, LockOp};

impl EventStream for AsyncKernelLockEvents {
    fn next_batch<'a>(
        &'a mut self,
        out: &'a mut Vec<EventRecord>,
    ) -> Pin<Box<dyn Future<Output = std::io::Result<()>> + Send + 'a>> {
        Box::pin(async move {
            let mut records = Vec::new();
            AsyncKernelLockEvents::next_batch(self, &mut records).await?;
            out.extend(records.into_iter().filter_map(record));
            Ok(())
        })
    }

    fn watch_devices(&mut self, devices: &[(u32, u32)]) -> std::io::Result<()> {
        self.get_mut()
            .set_devices(devices)
            .map_err(std::io::Error::other)
    }
}

/// `record` as the table takes it (`None`: of no use to it).
fn record(record: Record) -> Option<EventRecord> {
    let event = match record {
        Record::Lost(count) => return Some(EventRecord::Lost(count)),
        Record::Event(event) => event,
    };
    let op = match event.kind {
        LockKind::Taken { exclusive } => LockOp::Taken { exclusive },
        LockKind::Waiting { exclusive } => LockOp::Waiting { exclusive },
        LockKind::Refused { exclusive } => LockOp::Refused { exclusive },
        LockKind::Unlocked { .. } => LockOp::Unlocked,
        LockKind::Other { .. } => return None,
    };
    Some(EventRecord::Event(live_table::LockEvent {
        file: event.file,
        pid: event.pid,
        owner: event.owner,
        op,
        at: event.instant(),
    }))
}
