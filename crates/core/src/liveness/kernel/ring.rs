//! One CPU's ring: an mmap ring owned by a `PERF_COUNT_SW_DUMMY` event
//! (which samples nothing itself), into which every tracepoint event on
//! that CPU ([`super::source`]) writes; and the reading of its records.
//!
//! Why a dummy owner: a tracepoint event's filter can be set only once
//! (`PERF_EVENT_IOC_SET_FILTER` again is `EEXIST`), so each watched device
//! has events of its own, added and closed alone; they all write into the
//! CPU's one ring, in the order they happen.
//!
//! Invariants: the ring is 1 + 2^n pages (the header page, then the
//! data); `data_head` is read with acquire ordering before any record
//! under it is copied, and `data_tail` written with release ordering only
//! after the records under it are copied, so the kernel never overwrites a
//! record being read; a record that wraps past the end of the data area is
//! copied in two parts. Dropping a ring unmaps it and closes its event:
//! nothing is left in the kernel (nor after a SIGKILL, which closes it too).

use std::ffi::c_void;
use std::num::NonZeroUsize;
use std::os::fd::{AsFd, BorrowedFd, FromRawFd, OwnedFd};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};

use nix::errno::Errno;
use nix::sys::mman::{MapFlags, ProtFlags};
use perf_event_open_sys::bindings::{
    PERF_COUNT_SW_DUMMY, PERF_FLAG_FD_CLOEXEC, PERF_SAMPLE_CPU, PERF_SAMPLE_IDENTIFIER,
    PERF_SAMPLE_TID, PERF_SAMPLE_TIME, PERF_TYPE_SOFTWARE, perf_event_attr, perf_event_mmap_page,
};

use super::record::{self, HEADER_SIZE, Parsed};

/// The attributes every event of this reader shares, for an event of
/// `type_`/`config`: for every process, `CLOCK_MONOTONIC` times (the clock
/// of `std::time::Instant`, and the same for all events of a ring, as the
/// kernel requires), the writing event's id, thread, time and CPU in every
/// record (`sample_id_all`, so lost records carry their time). The id
/// tells a replaced filter's records from its successor's; the CPU keeps
/// a sample 136 bytes, no divisor of a page, so records straddle the
/// ring's end and the reading of a split record is proved on the kernel's
/// own records.
pub(crate) fn attr(type_: u32, config: u64) -> perf_event_attr {
    let mut attr = perf_event_attr {
        type_,
        size: std::mem::size_of::<perf_event_attr>() as u32,
        config,
        sample_type: u64::from(
            PERF_SAMPLE_IDENTIFIER | PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_CPU,
        ),
        clockid: libc::CLOCK_MONOTONIC,
        ..Default::default()
    };
    attr.set_use_clockid(1);
    attr.set_sample_id_all(1);
    attr
}

/// `perf_event_open(attr, pid -1, cpu)`: an event counting every process
/// on `cpu`, close-on-exec.
pub(crate) fn open_event(attr: &mut perf_event_attr, cpu: u32) -> Result<OwnedFd, Errno> {
    let cpu = libc::c_int::try_from(cpu).map_err(|_| Errno::EINVAL)?;
    // SAFETY: `attr` is a whole perf_event_attr (built by `attr`, zeroed
    // past what it sets) whose `size` is its own; the kernel reads it only
    // during the call (and may write its `size` back on E2BIG).
    let fd = unsafe {
        perf_event_open_sys::perf_event_open(
            attr,
            -1,
            cpu,
            -1,
            libc::c_ulong::from(PERF_FLAG_FD_CLOEXEC),
        )
    };
    if fd < 0 {
        return Err(Errno::last());
    }
    // SAFETY: `fd` was just returned by perf_event_open and is owned by
    // nothing else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Why a ring could not be made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RingError {
    /// `perf_event_open` of its owner failed.
    Open(Errno),
    /// `mmap` failed (`EPERM`/`ENOMEM`: the `mlock` limit).
    Map(Errno),
}

/// One CPU's ring and the dummy event that owns it.
pub(crate) struct CpuRing {
    /// The CPU it is for.
    pub cpu: u32,
    owner: OwnedFd,
    mapping: Mapping,
    /// One record, copied out of the ring.
    scratch: Vec<u8>,
}

impl CpuRing {
    /// Opens the owner on `cpu` and maps `data_pages` (a power of two)
    /// data pages for it.
    pub fn open(cpu: u32, data_pages: usize) -> Result<Self, RingError> {
        let mut attr = attr(PERF_TYPE_SOFTWARE, u64::from(PERF_COUNT_SW_DUMMY));
        let owner = open_event(&mut attr, cpu).map_err(RingError::Open)?;
        let mapping = Mapping::new(owner.as_fd(), data_pages).map_err(RingError::Map)?;
        Ok(Self {
            cpu,
            owner,
            mapping,
            scratch: Vec::new(),
        })
    }

    /// The owner's fd: readable (poll) when an event writing into the ring
    /// woke it; the target of `PERF_EVENT_IOC_SET_OUTPUT`.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.owner.as_fd()
    }

    /// Data pages in this ring.
    pub(crate) fn data_pages(&self) -> usize {
        self.mapping.area.len / page_size()
    }

    /// Passes each record the kernel has written since the last read to
    /// `each`, then hands their room back to the kernel. Returns whether
    /// the ring may have been full since the last read (so samples may have
    /// been lost): the kernel drops a sample only when the unread part
    /// leaves no room for it, and only this reader makes room — so it
    /// cannot have been full if, after the room is handed back, the head
    /// is less than a ring minus [`FULL_MARGIN`] past the old tail.
    pub fn read(&mut self, mut each: impl FnMut(Parsed<'_>)) -> bool {
        let head = self.mapping.data_head().load(Ordering::Acquire);
        let old_tail = self.mapping.data_tail().load(Ordering::Relaxed);
        let tail = read_between(
            &self.mapping.area,
            old_tail,
            head,
            &mut self.scratch,
            &mut each,
        );
        self.mapping.data_tail().store(tail, Ordering::Release);
        let reached = self.mapping.data_head().load(Ordering::Acquire);
        reached.wrapping_sub(old_tail) + FULL_MARGIN as u64 > self.mapping.area.len as u64
    }
}

/// Room (bytes) that, left unread, could not take a sample: more than any
/// record this reader asks for (a sample is 136 bytes on Linux 6.18).
pub(crate) const FULL_MARGIN: usize = 1024;

/// Passes each record in `[tail, head)` of `area` to `each` and returns
/// the new tail (`head`). A header that cannot be a record's (shorter than
/// a header, reaching past `head` or larger than the ring) is passed as [`Parsed::Malformed`]
/// and the rest up to `head` skipped.
fn read_between(
    area: &Area,
    mut tail: u64,
    head: u64,
    scratch: &mut Vec<u8>,
    each: &mut impl FnMut(Parsed<'_>),
) -> u64 {
    while tail != head {
        let available = head.wrapping_sub(tail);
        area.copy_out(tail, HEADER_SIZE.min(available as usize), scratch);
        let size = record::size_of_record(scratch).unwrap_or(0);
        if size < HEADER_SIZE || size as u64 > available || size > area.len {
            each(Parsed::Malformed);
            return head;
        }
        area.copy_out(tail, size, scratch);
        each(record::parse(scratch));
        tail = tail.wrapping_add(size as u64);
    }
    tail
}

/// The data area of a ring: `len` bytes (a power of two) readable at `ptr`.
struct Area {
    ptr: NonNull<u8>,
    len: usize,
}

impl Area {
    /// Copies `count` bytes starting at ring position `at` (taken modulo
    /// the length, wrapping past the end) into `into`, replacing it.
    fn copy_out(&self, at: u64, count: usize, into: &mut Vec<u8>) {
        assert!(count <= self.len, "a record is never larger than its ring");
        let start = (at % self.len as u64) as usize;
        let first = count.min(self.len - start);
        into.clear();
        into.reserve(count);
        // SAFETY: `ptr` is readable for `len` bytes while `self` lives (see
        // `Mapping::new`); `start + first <= len` and `count - first <=
        // start`, so both ranges lie inside it. The kernel does not write
        // there: it is below `data_head` (read with acquire) and above
        // `data_tail`, which is not yet moved past it. `into` has room for
        // `count` bytes and is set to that length once they are written.
        unsafe {
            let to = into.as_mut_ptr();
            std::ptr::copy_nonoverlapping(self.ptr.as_ptr().add(start), to, first);
            std::ptr::copy_nonoverlapping(self.ptr.as_ptr(), to.add(first), count - first);
            into.set_len(count);
        }
    }
}

/// A ring's mapping: the header page, then the data area.
struct Mapping {
    base: NonNull<c_void>,
    map_len: usize,
    area: Area,
}

// SAFETY: the mapping belongs to this value alone and has no tie to the
// thread that made it; the kernel's concurrent writes go through atomics
// (head) or land only where the reader does not read.
unsafe impl Send for Mapping {}

impl Mapping {
    /// Maps 1 + `data_pages` pages of the event `fd`, read-write (so the
    /// kernel waits for `data_tail` and never overwrites unread records).
    fn new(fd: BorrowedFd<'_>, data_pages: usize) -> Result<Self, Errno> {
        let page = page_size();
        let data_len = data_pages.checked_mul(page).ok_or(Errno::ENOMEM)?;
        let map_len = NonZeroUsize::new(data_len + page).ok_or(Errno::EINVAL)?;
        // SAFETY: a fresh shared mapping of a perf event, referenced by
        // nothing else; it is only touched through `Area` (below the head)
        // and the header's atomics, and unmapped once, in `drop`.
        let base = unsafe {
            nix::sys::mman::mmap(
                None,
                map_len,
                ProtFlags::PROT_READ | ProtFlags::PROT_WRITE,
                MapFlags::MAP_SHARED,
                fd,
                0,
            )?
        };
        // SAFETY: `page` is inside the mapping just made (`map_len` is
        // `page + data_len`).
        let data = unsafe { base.byte_add(page) }.cast::<u8>();
        Ok(Self {
            base,
            map_len: map_len.get(),
            area: Area {
                ptr: data,
                len: data_len,
            },
        })
    }

    /// The header page's `data_head`: where the kernel has written up to.
    fn data_head(&self) -> &AtomicU64 {
        self.header_word(std::mem::offset_of!(perf_event_mmap_page, data_head))
    }

    /// The header page's `data_tail`: where the reader has read up to.
    fn data_tail(&self) -> &AtomicU64 {
        self.header_word(std::mem::offset_of!(perf_event_mmap_page, data_tail))
    }

    fn header_word(&self, offset: usize) -> &AtomicU64 {
        // SAFETY: the header page is the first page of the mapping, which
        // lives as long as `self`; `offset` is a u64 field's offset in
        // `perf_event_mmap_page`, 8-aligned in a page-aligned mapping. The
        // kernel and this reader share it only through atomic accesses.
        unsafe { &*self.base.byte_add(offset).cast::<AtomicU64>().as_ptr() }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: `base`/`map_len` are exactly what mmap returned and took;
        // no reference into the mapping outlives `self`.
        let _ = unsafe { nix::sys::mman::munmap(self.base, self.map_len) };
    }
}

/// The size of a page (the unit of ring sizes).
pub(crate) fn page_size() -> usize {
    nix::unistd::sysconf(nix::unistd::SysconfVar::PAGE_SIZE)
        .ok()
        .flatten()
        .and_then(|size| usize::try_from(size).ok())
        .unwrap_or(4096)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::liveness::kernel::record::build;

    /// Reads `[tail, head)` of a ring laid out in `buffer`.
    fn read(buffer: &mut [u8], tail: u64, head: u64) -> (u64, Vec<String>) {
        let area = Area {
            ptr: NonNull::new(buffer.as_mut_ptr()).expect("non-null"),
            len: buffer.len(),
        };
        let mut seen = Vec::new();
        let mut scratch = Vec::new();
        let tail = read_between(&area, tail, head, &mut scratch, &mut |parsed| {
            seen.push(match parsed {
                Parsed::Sample { time, raw, .. } => format!("sample {time} {}", raw[0]),
                Parsed::Lost { time, count } => format!("lost {time} {count}"),
                other => format!("{other:?}"),
            })
        });
        (tail, seen)
    }

    /// Writes `record` into `buffer` at ring position `at`, wrapping.
    fn write(buffer: &mut [u8], at: u64, record: &[u8]) {
        let len = buffer.len();
        for (index, byte) in record.iter().enumerate() {
            buffer[(at as usize + index) % len] = *byte;
        }
    }

    /// A record that runs past the end of the data area continues at its
    /// start, and is read whole; positions past the first lap (as the
    /// kernel's head and tail grow forever) read the same.
    #[test]
    fn a_record_that_wraps_is_read_whole() {
        let mut buffer = vec![0u8; 512];
        let first = build::sample(10, &[1u8; 92]); // 136 bytes
        let second = build::sample(20, &[2u8; 92]);
        let lost = build::lost(30, 5); // 56 bytes
        let lap = 512 * 7;
        let start = lap + 346; // the second sample straddles the end (482..618)
        write(&mut buffer, start, &first);
        write(&mut buffer, start + 136, &second);
        write(&mut buffer, start + 272, &lost);
        let head = start + 328;
        let (tail, seen) = read(&mut buffer, start, head);
        assert_eq!(tail, head);
        assert_eq!(seen, ["sample 10 1", "sample 20 2", "lost 30 5"]);
    }

    /// A header too short or too long for what was written is malformed,
    /// and reading moves on to the head rather than looping or overreading.
    #[test]
    fn a_corrupt_header_is_malformed_and_skipped() {
        let mut buffer = vec![0u8; 256];
        let mut record = build::sample(10, &[1u8; 92]);
        record[6..8].copy_from_slice(&200u16.to_ne_bytes());
        write(&mut buffer, 0, &record);
        let (tail, seen) = read(&mut buffer, 0, 120);
        assert_eq!((tail, seen), (120, vec!["Malformed".to_owned()]));
        let (tail, seen) = read(&mut vec![0u8; 256], 0, 64);
        assert_eq!((tail, seen), (64, vec!["Malformed".to_owned()]));
    }
}
