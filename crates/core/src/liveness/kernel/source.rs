//! The tracepoint's events for one watched device: one per CPU, each
//! filtered by the kernel to that device and writing into that CPU's ring.
//!
//! Invariants: an event is opened disabled and enabled only once its
//! filter is set and its output is the CPU's ring, so it never writes an
//! unfiltered sample, nor one anywhere else; a source's events are enabled
//! only once every CPU's is opened and its id known, so a source that
//! fails to open wrote nothing; each samples every hit (a period of one)
//! with its raw entry and wakes the ring's poller every `wake_every`
//! samples; it counts the samples it lost where the kernel can (Linux 6.0
//! on), so a loss is known at the drain that follows it, not only at the
//! next sample. Dropping a source closes its events: the device's samples
//! stop, those already in the rings stay to be read.

use std::ffi::CString;
use std::os::fd::{AsRawFd, OwnedFd};

use nix::errno::Errno;
use perf_event_open_sys::bindings::{PERF_FORMAT_LOST, PERF_SAMPLE_RAW, PERF_TYPE_TRACEPOINT};
use perf_event_open_sys::ioctls;

use super::ring::{self, CpuRing};

/// One device's events, one per ring (in the rings' order).
pub(crate) struct DeviceSource {
    events: Vec<SourceEvent>,
}

/// One CPU's event for a device, and how many of its lost samples were
/// already reported.
struct SourceEvent {
    fd: OwnedFd,
    reported_lost: u64,
}

impl DeviceSource {
    /// Opens tracepoint `id` on each ring's CPU, filtered by `filter`
    /// (`s_dev == N`), writing into that ring, then enables them all; with
    /// `count_losses`, each counts the samples it lost (`PERF_FORMAT_LOST`).
    /// `Err` names the call that failed, and the CPU; what was opened is
    /// closed again, having written nothing (a CPU's event that cannot say
    /// its id fails it too: the id tells its records from another's).
    pub fn open(
        id: u64,
        filter: &str,
        rings: &[CpuRing],
        count_losses: bool,
        wake_every: u32,
    ) -> Result<Self, (&'static str, u32, Errno)> {
        let filter = CString::new(filter).map_err(|_| ("filter", 0, Errno::EINVAL))?;
        let mut events = Vec::with_capacity(rings.len());
        for ring in rings {
            let fd = open_one(id, &filter, ring, count_losses, wake_every)
                .map_err(|(call, errno)| (call, ring.cpu, errno))?;
            events.push(SourceEvent {
                fd,
                reported_lost: 0,
            });
        }
        let source = Self { events };
        for (ring, id) in rings.iter().zip(source.ids()) {
            if id == 0 {
                return Err(("PERF_EVENT_IOC_ID", ring.cpu, Errno::EINVAL));
            }
        }
        for (ring, event) in rings.iter().zip(&source.events) {
            // SAFETY: `event.fd` is an open perf event fd of this source;
            // ENABLE takes no pointer.
            let done = unsafe { ioctls::ENABLE(event.fd.as_raw_fd(), 0) };
            Errno::result(done).map_err(|errno| ("PERF_EVENT_IOC_ENABLE", ring.cpu, errno))?;
        }
        Ok(source)
    }

    /// Stops every event of this source (a disabled event writes nothing
    /// more), so that what it lost can be read once and for all before it
    /// is dropped.
    pub(crate) fn disable(&self) {
        for event in &self.events {
            // SAFETY: `event.fd` is an open perf event fd of this source;
            // DISABLE takes no pointer.
            let _ = unsafe { ioctls::DISABLE(event.fd.as_raw_fd(), 0) };
        }
    }

    /// Samples lost by this device's event on ring `index` since the last
    /// call (0 when they cannot be counted; see `open`).
    pub(crate) fn take_lost(&mut self, index: usize) -> u64 {
        let Some(event) = self.events.get_mut(index) else {
            return 0;
        };
        // read_format LOST: { u64 value; u64 lost; }.
        let mut counts = [0u8; 16];
        match nix::unistd::read(&event.fd, &mut counts) {
            Ok(16) => {
                let lost = u64::from_ne_bytes(counts[8..].try_into().expect("8 bytes"));
                let new = lost.saturating_sub(event.reported_lost);
                event.reported_lost = lost;
                new
            }
            _ => 0,
        }
    }

    /// The kernel's id of each ring's event (`PERF_EVENT_IOC_ID`), in the
    /// rings' order: the `id` of the samples it writes. 0 where the kernel
    /// would not say (no sample carries 0).
    pub fn ids(&self) -> Vec<u64> {
        self.events
            .iter()
            .map(|event| {
                let mut id = 0u64;
                // SAFETY: `event.fd` is an open perf event fd; the kernel
                // writes one u64 through the pointer, which lives for the
                // call.
                let done = unsafe { ioctls::ID(event.fd.as_raw_fd(), &mut id) };
                if done < 0 { 0 } else { id }
            })
            .collect()
    }

    /// Samples lost on every ring since the last count.
    pub(crate) fn take_all_lost(&mut self) -> u64 {
        (0..self.events.len())
            .map(|index| self.take_lost(index))
            .sum()
    }
}

/// Tracepoint `id` on `ring`'s CPU, filtered, writing into `ring`, still
/// disabled.
pub(crate) fn open_one(
    id: u64,
    filter: &CString,
    ring: &CpuRing,
    count_losses: bool,
    wake_every: u32,
) -> Result<OwnedFd, (&'static str, Errno)> {
    let mut attr = attr(id, count_losses, wake_every);
    let event =
        ring::open_event(&mut attr, ring.cpu).map_err(|errno| ("perf_event_open", errno))?;
    let fd = event.as_raw_fd();
    // SAFETY: `fd` is the event just opened; `filter` is a NUL-terminated
    // string alive for the call, which the kernel copies and does not write.
    let done = unsafe { ioctls::SET_FILTER(fd, filter.as_ptr().cast_mut()) };
    Errno::result(done).map_err(|errno| ("PERF_EVENT_IOC_SET_FILTER", errno))?;
    // SAFETY: both are perf event fds of this reader, on the same CPU and
    // clock; SET_OUTPUT takes the target fd by value.
    let done = unsafe { ioctls::SET_OUTPUT(fd, ring.fd().as_raw_fd()) };
    Errno::result(done).map_err(|errno| ("PERF_EVENT_IOC_SET_OUTPUT", errno))?;
    Ok(event)
}

/// The tracepoint event's attributes: disabled, every hit sampled with its
/// raw entry, a wake-up every `wake_every` samples of its ring; with
/// `count_losses`, a `read` gives the samples it lost (Linux 6.0 and
/// later).
pub(crate) fn attr(
    id: u64,
    count_losses: bool,
    wake_every: u32,
) -> perf_event_open_sys::bindings::perf_event_attr {
    let mut attr = ring::attr(PERF_TYPE_TRACEPOINT, id);
    attr.sample_type |= u64::from(PERF_SAMPLE_RAW);
    if count_losses {
        attr.read_format = u64::from(PERF_FORMAT_LOST);
    }
    attr.__bindgen_anon_1.sample_period = 1;
    attr.__bindgen_anon_2.wakeup_events = wake_every.max(1);
    attr.set_disabled(1);
    attr
}
