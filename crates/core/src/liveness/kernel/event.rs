//! One flock request as the kernel reported it, typed: which file, which
//! process and open file description, and what came of it.
//!
//! Invariant: a [`LockKind`] says only what the tracepoint's `type`,
//! `flags` and `ret` say; anything else is [`LockKind::Other`] with the
//! raw values, never guessed into a known kind.

use std::time::{Duration, Instant};

use super::filter;
use super::tracepoint::Layout;
use crate::liveness::proc_locks::FileId;

/// `F_RDLCK`: a shared lock.
const F_RDLCK: u8 = 0;
/// `F_WRLCK`: an exclusive lock.
const F_WRLCK: u8 = 1;
/// `F_UNLCK`: an unlock.
const F_UNLCK: u8 = 2;
/// `FL_CLOSE`: the unlock made at the description's last close.
const FL_CLOSE: u32 = 64;
/// `FILE_LOCK_DEFERRED`: a blocking request was queued behind a holder.
const FILE_LOCK_DEFERRED: i64 = 1;

/// One flock request on a watched device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LockEvent {
    /// When, in nanoseconds of `CLOCK_MONOTONIC` (the clock of
    /// [`std::time::Instant`] on Linux; see [`LockEvent::instant`]).
    pub at: u64,
    /// The locked file.
    pub file: FileId,
    /// The process that made the request (its thread group id, as the
    /// initial PID namespace numbers it); for a close unlock, the one that
    /// closed the description last.
    pub pid: u32,
    /// The open file description the lock belongs to (a kernel address,
    /// compared only for equality): a hold and its unlock share it, even
    /// when another process made the unlock.
    pub owner: u64,
    /// What was asked and what came of it.
    pub kind: LockKind,
}

/// What a flock request asked and what the kernel answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LockKind {
    /// The lock was granted (`ret` 0).
    Taken {
        /// `LOCK_EX` (else `LOCK_SH`).
        exclusive: bool,
    },
    /// A blocking request was queued behind a holder (`ret` 1); a later
    /// `Taken` with the same owner says when it got the lock.
    Waiting {
        /// `LOCK_EX` (else `LOCK_SH`).
        exclusive: bool,
    },
    /// A `LOCK_NB` request found it held (`ret` -EAGAIN).
    Refused {
        /// `LOCK_EX` (else `LOCK_SH`).
        exclusive: bool,
    },
    /// The owner's lock, if it had one, is gone (`F_UNLCK`, `ret` 0).
    Unlocked {
        /// Made by the kernel at the description's last close (`FL_CLOSE`),
        /// not by `LOCK_UN`; emitted for every description closed while
        /// any flock is on the file, whether or not it held one.
        at_close: bool,
    },
    /// Anything else, with the kernel's values.
    Other {
        /// `F_RDLCK` 0, `F_WRLCK` 1, `F_UNLCK` 2.
        lock_type: u8,
        /// `FL_*` bits.
        flags: u32,
        /// What the request returned.
        ret: i32,
    },
}

impl LockEvent {
    /// Decodes a raw sample taken at `at`; `None` when `raw` does not fit
    /// `layout` (its size is not one the layout reads).
    pub fn decode(layout: &Layout, at: u64, raw: &[u8]) -> Option<Self> {
        if !layout.fits(raw.len()) {
            return None;
        }
        let (major, minor) = filter::decode(layout.device.unsigned(raw)? as u32);
        let lock_type = layout.lock_type.unsigned(raw)? as u8;
        let flags = layout.flags.unsigned(raw)? as u32;
        let ret = layout.ret.signed(raw)?;
        let exclusive = lock_type == F_WRLCK;
        let locking = matches!(lock_type, F_RDLCK | F_WRLCK);
        let kind = match (lock_type, ret) {
            (F_UNLCK, 0) => LockKind::Unlocked {
                at_close: flags & FL_CLOSE != 0,
            },
            (_, 0) if locking => LockKind::Taken { exclusive },
            (_, FILE_LOCK_DEFERRED) if locking => LockKind::Waiting { exclusive },
            (_, ret) if locking && ret == -i64::from(libc::EAGAIN) => {
                LockKind::Refused { exclusive }
            }
            _ => LockKind::Other {
                lock_type,
                flags,
                ret: ret as i32,
            },
        };
        Some(Self {
            at,
            file: FileId {
                major,
                minor,
                inode: layout.inode.unsigned(raw)?,
            },
            pid: layout.pid.unsigned(raw)? as u32,
            owner: layout.owner.unsigned(raw)?,
            kind,
        })
    }

    /// [`LockEvent::at`] as an [`Instant`] (an event from before this
    /// process's clock could express saturates to now minus its age).
    pub fn instant(&self) -> Instant {
        instant_of(self.at)
    }
}

/// A time in nanoseconds of `CLOCK_MONOTONIC` (an event's stamp) as an
/// [`Instant`]; one this process's clock cannot express saturates to now.
pub(crate) fn instant_of(at: u64) -> Instant {
    let now = Instant::now();
    let age = monotonic_now().saturating_sub(at);
    now.checked_sub(Duration::from_nanos(age)).unwrap_or(now)
}

/// Now, in nanoseconds of `CLOCK_MONOTONIC`: the clock of [`LockEvent::at`].
pub(crate) fn monotonic_now() -> u64 {
    let now = nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC)
        .expect("CLOCK_MONOTONIC is always readable");
    now.tv_sec() as u64 * 1_000_000_000 + now.tv_nsec() as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A raw sample in the measured layout.
    fn raw(lock_type: u8, flags: u32, ret: i32) -> Vec<u8> {
        let mut raw = vec![0u8; 92];
        raw[16..24].copy_from_slice(&4242u64.to_ne_bytes());
        raw[24..28].copy_from_slice(&(254u32 << 20 | 1).to_ne_bytes());
        raw[40..48].copy_from_slice(&0xffff_8888_0000_1000u64.to_ne_bytes());
        raw[48..52].copy_from_slice(&77u32.to_ne_bytes());
        raw[52..56].copy_from_slice(&flags.to_ne_bytes());
        raw[56] = lock_type;
        raw[80..84].copy_from_slice(&ret.to_ne_bytes());
        raw
    }

    fn kind(lock_type: u8, flags: u32, ret: i32) -> LockKind {
        LockEvent::decode(&Layout::measured(), 5, &raw(lock_type, flags, ret))
            .expect("fits")
            .kind
    }

    #[test]
    fn kinds_follow_type_flags_and_ret() {
        assert_eq!(kind(1, 2, 0), LockKind::Taken { exclusive: true });
        assert_eq!(kind(0, 2, 0), LockKind::Taken { exclusive: false });
        assert_eq!(kind(1, 130, 1), LockKind::Waiting { exclusive: true });
        assert_eq!(kind(1, 2, -11), LockKind::Refused { exclusive: true });
        assert_eq!(kind(2, 2, 0), LockKind::Unlocked { at_close: false });
        assert_eq!(kind(2, 66, 0), LockKind::Unlocked { at_close: true });
        assert_eq!(
            kind(1, 2, -12),
            LockKind::Other {
                lock_type: 1,
                flags: 2,
                ret: -12
            }
        );
    }

    #[test]
    fn fields_decode_where_the_layout_says() {
        let event = LockEvent::decode(&Layout::measured(), 5, &raw(1, 2, 0)).expect("fits");
        assert_eq!(
            event.file,
            FileId {
                major: 254,
                minor: 1,
                inode: 4242
            }
        );
        assert_eq!(
            (event.pid, event.owner, event.at),
            (77, 0xffff_8888_0000_1000, 5)
        );
    }

    /// The measured layout reads only samples of the measured size.
    #[test]
    fn the_measured_layout_refuses_another_size() {
        let mut longer = raw(1, 2, 0);
        longer.extend([0; 8]);
        assert_eq!(LockEvent::decode(&Layout::measured(), 5, &longer), None);
    }

    /// `instant` maps the monotonic clock onto `Instant`s. The margin is
    /// generous (a second): it only catches a wrong clock or unit.
    #[test]
    fn the_clock_is_instants() {
        let margin = Duration::from_secs(1);
        let before = Instant::now();
        let event =
            LockEvent::decode(&Layout::measured(), monotonic_now(), &raw(1, 2, 0)).expect("fits");
        let after = Instant::now();
        let at = event.instant();
        assert!(
            before - margin <= at && at <= after + margin,
            "{before:?} {at:?} {after:?}"
        );
    }
}
