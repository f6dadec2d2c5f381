//! Every flock on the watched devices as it happens, from the kernel's
//! `filelock:flock_lock_inode` tracepoint through `perf_event_open(2)`:
//! no read of `/proc/locks` (which stalls every flock on the machine).
//!
//! # How
//!
//! [`tracepoint`] finds tracefs (`/sys/kernel/tracing`, then
//! `/sys/kernel/debug/tracing`; never mounted here — as root, `mount -t
//! tracefs nodev /sys/kernel/tracing`) and reads the event's id and, from
//! its `format` file, the offset of each field by name. [`ring`] maps one
//! ring of 1 + 2^n pages per online CPU ([`cpus`]: read once, at open).
//! [`source`] opens, for each watched device, one perf event per CPU on the
//! tracepoint for every process, sampling each hit with its
//! `CLOCK_MONOTONIC` time and raw entry into that CPU's ring; the kernel
//! drops every flock not on the device before writing it ([`filter`]:
//! `s_dev == N` in the kernel's `major << 20 | minor` encoding).
//! [`KernelLockEvents::drain`] copies out what the rings hold, typed
//! ([`event`]), merged across CPUs in time order. A device's filter is
//! replaced ([`KernelLockEvents::set_dropped`]) by new events that take
//! over its sampling ([`handover`]); the old ones close after a grace
//! period of the kernel's ([`grace`]). Closing (drop, or the process
//! dying, SIGKILL included) removes everything from the kernel.
//!
//! # Who may
//!
//! Root, or a process with `CAP_PERFMON` (without it, `EACCES`:
//! [`Refused::NotPermitted`]). The tracepoint's `id` and `format` files are
//! `0440 root`, and tracefs itself `0700`: a `CAP_PERFMON` process that is
//! not root cannot read them and must be given the id
//! ([`Options::tracepoint_id`], from something root runs). Its samples are
//! then read with the layout measured on Linux 6.18 x86_64 (`i_ino` u64 at
//! 16, `s_dev` u32 at 24, `owner` at 40, `pid` u32 at 48, `flags` u32 at 52,
//! `type` u8 at 56, `ret` i32 at 80), and only those whose raw size is the
//! measured 92 bytes; any other is counted as lost, never misread
//! ([`KernelLockEvents::layout_from_format`] says which applies). Rings
//! count against the `mlock` limit (`perf_event_mlock_kb` per CPU, then
//! `ulimit -l`); when a ring cannot be mapped for it, smaller ones are
//! tried, down to one page ([`KernelLockEvents::ring_pages`] says what was
//! got). Root is not limited.
//!
//! # What the events mean
//!
//! Measured on Linux 6.18 (the tests in `tests.rs` prove each), except
//! where the kernel's source or `flock(2)` is named.
//!
//! - Every `flock(2)` request on a watched device is one event, with the
//!   answer it got: `ret` 0 [`LockKind::Taken`]; 1 (`FILE_LOCK_DEFERRED`)
//!   [`LockKind::Waiting`], a blocking request queued behind a holder,
//!   reported at once, then a second event, [`LockKind::Taken`] with the
//!   same owner and PID, when it gets the lock (or `Waiting` again, if it
//!   was woken and beaten to it); `-EAGAIN` (-11) [`LockKind::Refused`], a
//!   `LOCK_NB` request that found it held. Re-requesting a lock already
//!   held is a `Taken` that changes nothing (kernel source).
//! - Match an unlock to its hold by [`LockEvent::owner`] (the open file
//!   description), never by PID: descriptions are shared across `fork`, and
//!   the process that unlocks or closes last need not be the taker.
//! - Every description closed for the last time while any flock is on the
//!   file emits [`LockKind::Unlocked`] `{ at_close: true }`, whether or not
//!   it held one: a refused tryer's close comes right after its refusal,
//!   while the holder still holds. An `Unlocked` for an owner that holds
//!   nothing changes nothing.
//! - A forked child that keeps the description open keeps the lock: no
//!   unlock when the taker exits; the unlock comes at the last close, with
//!   the closer's PID and the same owner.
//! - A waiter that dies (or is interrupted) while queued leaves no event
//!   for the abandoned wait; its last close, while the holder still holds,
//!   is an `Unlocked { at_close: true }` with the waiter's owner — the sign
//!   that it is gone.
//! - Converting a held lock (shared ↔ exclusive) releases it first
//!   (`flock(2)`): a `Waiting` or `Refused` from an owner that held the
//!   other kind means that hold is gone, with no `Unlocked`.
//! - An unlock wakes the waiters before its own event is written (kernel
//!   source): a waiter's `Taken` may be stamped a moment before the
//!   `Unlocked` that let it in.
//!   A `Taken { exclusive: true }` by one owner thus also ends every other
//!   owner's hold on that file.
//! - A [`Record::Lost`] means the kernel dropped samples (a full ring), or
//!   one could not be read. Each event counts its own losses (Linux 6.0
//!   on), read at a drain that found its ring may have been full: the loss
//!   is reported by the drain that follows it. (On older kernels only the
//!   kernel's lost record says so, written with the next sample that finds
//!   room on that CPU.) After one, what is known of the watched files must
//!   be learned again another way.
//!
//! Invariants: events are sampled only on the devices last set (none: not
//! at all), less the inodes each device's filter drops
//! ([`KernelLockEvents::set_dropped`]), and only after the filter is in
//! place; changing the set leaves the devices kept untouched (no gap, no
//! duplicate), and replacing a device's filter misses no flock and
//! delivers none twice; within one drain,
//! records are in time order; events that follow one another on the same
//! file (a lock and its unlock, a waiter's `Waiting` and `Taken`) come in
//! order across drains too, as each is written before the next can happen,
//! except as said above for an unlock and the waiter it wakes; `unsafe` is
//! only in [`ring`] (mmap, the ring's head and tail, copies out of it),
//! [`source`] and [`wait`] (ioctls, registration), each with its reason.

pub(crate) mod cpus;
pub mod event;
pub mod filter;
pub mod grace;
pub(crate) mod handover;
pub mod live_table;
pub mod quiet;
pub mod record;
pub mod refused;
pub mod ring;
pub mod source;
pub mod stream;
pub mod tracepoint;
pub mod wait;

use std::collections::{BTreeMap, BTreeSet};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};
use std::path::Path;
use std::time::Duration;

use nix::errno::Errno;
use nix::poll::{PollFd, PollFlags, PollTimeout};
use nix::sys::epoll::{Epoll, EpollCreateFlags, EpollEvent, EpollFlags};

pub(crate) use event::{LockEvent, LockKind};
pub use refused::Refused;
pub use wait::AsyncKernelLockEvents;

use handover::Handovers;
use record::Parsed;
use ring::{CpuRing, RingError};
use source::DeviceSource;
use tracepoint::{Layout, TRACEFS_ROOTS, Tracepoint};

/// How to open the kernel's lock events.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// Data pages per CPU ring (rounded down to a power of two, at least
    /// 1): what a burst between two drains may fill before samples are lost.
    pub ring_pages: usize,
    /// The tracepoint's id, for a process that cannot read tracefs (see the
    /// module doc); `None` reads it from tracefs.
    pub tracepoint_id: Option<u64>,
    /// The kernel wakes the reader once this many samples were written
    /// into a ring (at least 1). Each wake-up is paid by the flocking
    /// process; a reader that is told when to look by other means (the
    /// engine: inotify's opens and closes, a backstop timer) sets it high
    /// and wakes only so that a storm cannot fill the rings.
    pub wake_every: u32,
}

impl Default for Options {
    /// 64 pages a CPU (256 KiB with 4 KiB pages: about 2,000 samples), the
    /// id read from tracefs, a wake-up at every sample.
    fn default() -> Self {
        Self {
            ring_pages: 64,
            tracepoint_id: None,
            wake_every: 1,
        }
    }
}

/// One record out of the rings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Record {
    /// A flock request on a watched device.
    Event(LockEvent),
    /// This many events are missing here (the ring was full, or a sample
    /// could not be read): resynchronize.
    Lost(u64),
    /// This many files whose flocks the filter dropped are sampled again
    /// (one became a claim's: an inode reused, a file moved in): what
    /// they did while dropped is unknown, so resynchronize.
    Readmitted(u64),
}

/// What has been read so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    /// Events delivered.
    pub events: u64,
    /// Events the kernel dropped for want of room (reported).
    pub lost: u64,
    /// Samples that could not be read (counted in a [`Record::Lost`] too).
    pub unreadable: u64,
    /// Times a device's filter was replaced (files dropped or readmitted).
    pub refilters: u64,
    /// Records written twice while a filter was replaced, and read once.
    pub duplicates: u64,
}

/// The ring size asked for and got.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RingPages {
    /// Asked (after rounding down to a power of two).
    pub asked: usize,
    /// Got: smaller when the `mlock` limit refused the asked size.
    pub got: usize,
}

/// The kernel's flock events on a set of devices, one ring per online CPU.
/// Readable ([`AsFd`], [`KernelLockEvents::wait`],
/// [`AsyncKernelLockEvents`]'s thread) when any ring has news.
pub struct KernelLockEvents {
    rings: Vec<CpuRing>,
    /// The rings' owner fds, for one poll.
    epoll: Epoll,
    tracepoint_id: u64,
    /// Whether each event counts its lost samples (else only the kernel's
    /// lost records, written with the next sample that finds room, say so).
    count_losses: bool,
    /// [`Options::wake_every`].
    wake_every: u32,
    /// Lost samples of devices no longer watched, not yet reported.
    unreported_lost: u64,
    layout: Layout,
    layout_from_format: bool,
    sources: BTreeMap<(u32, u32), DeviceSource>,
    /// The inodes each device's filter drops.
    dropped: BTreeMap<(u32, u32), BTreeSet<u64>>,
    /// Filters being replaced: old events still sampling, and the rule
    /// that reads a flock both sampled once.
    handovers: Handovers,
    ring_pages: RingPages,
    counters: Counters,
    /// Records of one drain, before they are put in time order.
    pending: Vec<(u64, Record)>,
}

impl KernelLockEvents {
    /// Opens the events of flocks on `devices` (`(major, minor)`), or says
    /// in one line why it cannot.
    pub fn open(devices: &[(u32, u32)], options: &Options) -> Result<Self, Refused> {
        let roots = TRACEFS_ROOTS.map(Path::new);
        let tracepoint = Tracepoint::find_or_mount_privately(&roots, options.tracepoint_id)?;
        for &device in devices {
            filter::for_device(device)?;
        }
        let cpus = cpus::online()?;
        // The id and the permission are tried once, whatever the devices;
        // and whether this kernel counts each event's lost samples.
        let probe = |count_losses| {
            ring::open_event(&mut source::attr(tracepoint.id, count_losses, 1), cpus[0])
        };
        let count_losses = match probe(true) {
            Ok(_) => true,
            Err(Errno::EINVAL) => false,
            Err(errno) => return Err(refusal("perf_event_open", cpus[0], errno, tracepoint.id)),
        };
        if !count_losses {
            probe(false)
                .map_err(|errno| refusal("perf_event_open", cpus[0], errno, tracepoint.id))?;
        }
        let asked = prev_power_of_two(options.ring_pages.max(1));
        let rings = open_rings(&cpus, asked)?;
        let got = rings.first().map_or(asked, CpuRing::data_pages);
        let epoll =
            Epoll::new(EpollCreateFlags::EPOLL_CLOEXEC).map_err(|errno| Refused::Failed {
                call: "epoll_create1",
                cpu: cpus[0],
                errno,
            })?;
        for (index, ring) in rings.iter().enumerate() {
            epoll
                .add(
                    ring.fd(),
                    EpollEvent::new(EpollFlags::EPOLLIN, index as u64),
                )
                .map_err(|errno| Refused::Failed {
                    call: "epoll_ctl",
                    cpu: ring.cpu,
                    errno,
                })?;
        }
        let mut opened = Self {
            rings,
            epoll,
            tracepoint_id: tracepoint.id,
            count_losses,
            wake_every: options.wake_every.max(1),
            unreported_lost: 0,
            layout: tracepoint.layout,
            layout_from_format: tracepoint.from_format,
            sources: BTreeMap::new(),
            dropped: BTreeMap::new(),
            handovers: Handovers::default(),
            ring_pages: RingPages { asked, got },
            counters: Counters::default(),
            pending: Vec::new(),
        };
        opened.set_devices(devices)?;
        Ok(opened)
    }

    /// Watches `devices` instead of the ones before (none: samples
    /// nothing). A device kept is untouched: none of its events is missed
    /// or repeated. An added one is sampled from before this returns; a
    /// removed one's samples already in the rings are still drained. On
    /// `Err`, nothing changed.
    pub(crate) fn set_devices(&mut self, devices: &[(u32, u32)]) -> Result<(), Refused> {
        let wanted: BTreeSet<(u32, u32)> = devices.iter().copied().collect();
        let mut added = Vec::new();
        for &device in wanted
            .iter()
            .filter(|device| !self.sources.contains_key(device))
        {
            added.push((device, self.open_source(&filter::for_device(device)?)?));
        }
        let unreported = &mut self.unreported_lost;
        let handovers = &mut self.handovers;
        self.dropped.retain(|device, _| wanted.contains(device));
        self.sources.retain(|device, source| {
            let kept = wanted.contains(device);
            if !kept {
                source.disable();
                *unreported += source.take_all_lost();
                *unreported += handovers.close_device(*device);
            }
            kept
        });
        self.sources.extend(added);
        Ok(())
    }

    /// One device's events, filtered by `filter`, writing into the rings,
    /// enabled; or why the kernel refused them.
    fn open_source(&self, filter: &str) -> Result<DeviceSource, Refused> {
        DeviceSource::open(
            self.tracepoint_id,
            filter,
            &self.rings,
            self.count_losses,
            self.wake_every,
        )
        .map_err(|(call, cpu, errno)| match call {
            "PERF_EVENT_IOC_SET_FILTER" => Refused::FilterRejected {
                filter: filter.to_string(),
                errno,
            },
            call => refusal(call, cpu, errno, self.tracepoint_id),
        })
    }

    /// The devices watched, as last set, in order.
    pub fn devices(&self) -> Vec<(u32, u32)> {
        self.sources.keys().copied().collect()
    }

    /// Drops the flocks on `inodes` of watched `device` in the kernel's
    /// filter from now on, instead of the ones dropped before (at most
    /// [`filter::MAX_DROPPED`]; the first in order are named). `Ok(false)`
    /// when nothing changed (the same set, or a device not watched).
    ///
    /// The kernel takes an event's filter once, so the device's events
    /// are opened again with the new filter and enabled; the old ones keep
    /// sampling until the kernel's grace period says no flock can be
    /// missed by both, then close at a drain ([`handover`]: no flock
    /// missed, one sampled by both read once). Blocks only when
    /// [`handover::MAX_OVERLAPPING`] old sources of the device still
    /// sample, for the oldest's grace period (milliseconds). On `Err`,
    /// the old filter stays.
    pub(crate) fn set_dropped(
        &mut self,
        device: (u32, u32),
        inodes: BTreeSet<u64>,
    ) -> Result<bool, Refused> {
        if !self.sources.contains_key(&device) {
            return Ok(false);
        }
        let inodes: BTreeSet<u64> = inodes.into_iter().take(filter::MAX_DROPPED).collect();
        if self
            .dropped
            .get(&device)
            .map_or(inodes.is_empty(), |now| *now == inodes)
        {
            return Ok(false);
        }
        let source = self.open_source(&filter::for_device_dropping(
            device,
            inodes.iter().copied(),
        )?)?;
        let new_ids = source.ids();
        if let Some(old) = self.sources.insert(device, source) {
            self.unreported_lost += self.handovers.begin(device, old, new_ids);
        }
        self.counters.refilters += 1;
        if inodes.is_empty() {
            self.dropped.remove(&device);
        } else {
            self.dropped.insert(device, inodes);
        }
        Ok(true)
    }

    /// Whether a replaced filter's events still sample beside their
    /// successors' (until their grace period has passed and a drain
    /// closed them): till then a file newly dropped may still be read.
    pub fn handing_over(&self) -> bool {
        self.handovers.any_overlapping()
    }

    /// The inodes `device`'s filter drops.
    pub fn dropped(&self, device: (u32, u32)) -> BTreeSet<u64> {
        self.dropped.get(&device).cloned().unwrap_or_default()
    }

    /// Appends every record the rings hold to `out`, in time order across
    /// CPUs, and returns how many it appended. Never blocks. Samples lost
    /// since the last drain are one [`Record::Lost`] at the end of this
    /// drain (they were dropped after every record of their ring), where
    /// the kernel counts them per event (Linux 6.0 on; else a `Lost` stands
    /// where the kernel's lost record was written, with the next sample
    /// that found room on that CPU).
    pub fn drain(&mut self, out: &mut Vec<Record>) -> usize {
        let Self {
            rings,
            sources,
            layout,
            counters,
            pending,
            count_losses,
            unreported_lost,
            handovers,
            ..
        } = self;
        pending.clear();
        *unreported_lost += handovers.close_due();
        handovers.mark_forgettable();
        // Lost by sources since closed (counted when they were).
        let mut lost_at_end = std::mem::take(unreported_lost);
        counters.lost += lost_at_end;
        for (index, ring) in rings.iter_mut().enumerate() {
            let mut last = 0;
            let mut lost_record = false;
            let may_have_lost = ring.read(|parsed| {
                let (at, record) = match parsed {
                    Parsed::Sample { id, time, raw } => {
                        if handovers.is_repeat(index, id) {
                            counters.duplicates += 1;
                            return;
                        }
                        match LockEvent::decode(layout, time, raw) {
                            Some(event) => {
                                counters.events += 1;
                                (time, Record::Event(event))
                            }
                            None => {
                                counters.unreadable += 1;
                                (time, Record::Lost(1))
                            }
                        }
                    }
                    // Counted from the events instead, where they can be.
                    Parsed::Lost { .. } if *count_losses => {
                        lost_record = true;
                        return;
                    }
                    Parsed::Lost { time, count } => {
                        counters.lost += count;
                        (time, Record::Lost(count))
                    }
                    Parsed::Malformed => {
                        counters.unreadable += 1;
                        (last, Record::Lost(1))
                    }
                    Parsed::Skipped => return,
                };
                last = at;
                pending.push((at, record));
            });
            if *count_losses && (may_have_lost || lost_record) {
                let lost: u64 = sources
                    .values_mut()
                    .map(|source| source.take_lost(index))
                    .sum::<u64>()
                    + handovers.take_lost(index);
                counters.lost += lost;
                lost_at_end += lost;
            }
        }
        handovers.forget_marked();
        // Stable: each ring's records are already in order, ties keep it.
        pending.sort_by_key(|(at, _)| *at);
        let appended = pending.len() + usize::from(lost_at_end > 0);
        out.extend(pending.drain(..).map(|(_, record)| record));
        if lost_at_end > 0 {
            // After every record read: the losses came after their ring's.
            out.push(Record::Lost(lost_at_end));
        }
        appended
    }

    /// Blocks until some ring has news or `timeout` passes; `true` if one
    /// has (it may hold nothing new when an earlier drain took it).
    pub fn wait(&self, timeout: Duration) -> Result<bool, Errno> {
        wait_on(self.epoll.0.as_fd(), timeout)
    }

    /// What has been read so far.
    pub fn counters(&self) -> Counters {
        self.counters
    }

    /// The ring size asked for and got, in data pages per CPU.
    pub fn ring_pages(&self) -> RingPages {
        self.ring_pages
    }

    /// The CPUs with a ring.
    pub fn cpus(&self) -> Vec<u32> {
        self.rings.iter().map(|ring| ring.cpu).collect()
    }

    /// Whether the samples are read with offsets from the `format` file
    /// (else with the measured layout, as for a process given the id).
    pub fn layout_from_format(&self) -> bool {
        self.layout_from_format
    }
}

// The engine moves the reader into its tokio tasks.
const _: () = {
    const fn sendable<T: Send>() {}
    sendable::<KernelLockEvents>()
};

/// The fd to wait on (an epoll of the per-CPU rings): readable when a
/// ring has news ([`AsyncKernelLockEvents`]'s task waits on it); drain
/// after each wake-up.
impl AsFd for KernelLockEvents {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.epoll.0.as_fd()
    }
}

impl AsRawFd for KernelLockEvents {
    fn as_raw_fd(&self) -> RawFd {
        self.epoll.0.as_raw_fd()
    }
}

/// Blocks until the rings' epoll `fd` is readable or `timeout` passes
/// (`true`: readable); a signal is a `false`.
fn wait_on(fd: BorrowedFd<'_>, timeout: Duration) -> Result<bool, Errno> {
    let timeout = PollTimeout::try_from(timeout).unwrap_or(PollTimeout::MAX);
    let mut fds = [PollFd::new(fd, PollFlags::POLLIN)];
    match nix::poll::poll(&mut fds, timeout) {
        Ok(ready) => Ok(ready > 0),
        Err(Errno::EINTR) => Ok(false),
        Err(errno) => Err(errno),
    }
}

/// A ring of `pages` for every CPU, halving the size for all while the
/// `mlock` limit refuses it (`EPERM`, `ENOMEM`), down to one page.
fn open_rings(cpus: &[u32], mut pages: usize) -> Result<Vec<CpuRing>, Refused> {
    'sizes: loop {
        let mut rings = Vec::with_capacity(cpus.len());
        for &cpu in cpus {
            match CpuRing::open(cpu, pages) {
                Ok(ring) => rings.push(ring),
                Err(RingError::Map(Errno::EPERM | Errno::ENOMEM)) if pages > 1 => {
                    // Unmap what was mapped (giving its pages back) and retry.
                    drop(rings);
                    pages /= 2;
                    continue 'sizes;
                }
                Err(RingError::Map(errno)) => return Err(Refused::RingUnavailable { cpu, errno }),
                Err(RingError::Open(errno)) => {
                    return Err(refusal("perf_event_open", cpu, errno, 0));
                }
            }
        }
        return Ok(rings);
    }
}

/// The refusal for `call` failing with `errno` on `cpu` (for tracepoint `id`).
fn refusal(call: &'static str, cpu: u32, errno: Errno, id: u64) -> Refused {
    match (call, errno) {
        ("perf_event_open", Errno::EACCES | Errno::EPERM) => Refused::NotPermitted { errno },
        ("perf_event_open", Errno::ENOENT) => Refused::NoSuchTracepoint { id },
        (call, errno) => Refused::Failed { call, cpu, errno },
    }
}

/// The largest power of two not above `n` (`n >= 1`).
fn prev_power_of_two(n: usize) -> usize {
    1 << (usize::BITS - 1 - n.leading_zeros())
}

#[cfg(test)]
pub(crate) mod tests;
