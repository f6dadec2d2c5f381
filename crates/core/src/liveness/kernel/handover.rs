//! A device's sampling handed from one filter's events to the next, with
//! no flock missed and none read twice.
//!
//! The kernel takes an event's filter once, so a new filter is new events.
//! They are enabled first; the old ones stay enabled until a kernel grace
//! period ([`grace`]) that began after that has ended, so every tracepoint
//! hit whose walk of the CPU's event list began before the new events were
//! there is sampled by the old ones. (Closing the old ones at once missed
//! a flock now and then while other readers opened and closed events of
//! the tracepoint — measured, runs of about 10,000 handovers each: a miss
//! in 5 of 120 runs beside another reader's churn, in none of 60 with
//! `/proc/locks` readers and CPU hogs alone. A walk standing on another
//! reader's event when the old one is unlinked behind it ends there, and
//! began too early to see the new one.)
//!
//! While both sample, a flock is written twice. The kernel runs a CPU's
//! events of the tracepoint newest first, and each hit on a CPU finishes
//! before the next begins there, so on each ring: an old record before the
//! new events' first is of a flock they did not sample; one after it is
//! of a flock they sampled too, or one their filter drops. Those are the
//! repeats [`Handovers::is_repeat`] names. After the old events are
//! closed, a hit already walking may still write one of their records:
//! the rule is kept until a second grace period has ended and a drain has
//! read the rings after it.
//!
//! Invariants: an old source is closed only once its grace period has
//! passed ([`Handovers::close_due`]), or when its device is no longer
//! watched; at most [`MAX_OVERLAPPING`] old sources of a device sample at
//! once (the oldest is waited for, blocking, past that); a handover's rule
//! is forgotten only at the end of a drain that began after its second
//! grace period ended.

use super::grace::{self, Ticket};
use super::source::DeviceSource;

/// Old sources of one device still sampling, at most: each doubles the
/// cost of every flock on the device while it does.
pub(crate) const MAX_OVERLAPPING: usize = 4;

/// The handovers in progress, oldest first.
#[derive(Default)]
pub(crate) struct Handovers {
    list: Vec<Handover>,
}

struct Handover {
    device: (u32, u32),
    /// The old and new events' ids, by ring.
    old_ids: Vec<u64>,
    new_ids: Vec<u64>,
    /// Whether a ring has held a record of the new events.
    new_seen: Vec<bool>,
    stage: Stage,
}

enum Stage {
    /// Both sample; the old source is closed once `until` has passed.
    Overlapping { old: DeviceSource, until: Ticket },
    /// The old source is closed; the rule stands until `forget` passed
    /// (and, once it has, `forgettable`, to the end of the next drain).
    Closed { forget: Ticket, forgettable: bool },
}

impl Handovers {
    /// Hands `device` from `old` to the already enabled events `new_ids`.
    /// Returns the samples lost by old sources that had to be closed to
    /// keep within [`MAX_OVERLAPPING`] (after waiting for their grace).
    pub(crate) fn begin(
        &mut self,
        device: (u32, u32),
        old: DeviceSource,
        new_ids: Vec<u64>,
    ) -> u64 {
        let old_ids = old.ids();
        self.list.push(Handover {
            device,
            new_seen: vec![false; new_ids.len()],
            old_ids,
            new_ids,
            stage: Stage::Overlapping {
                old,
                until: grace::request(),
            },
        });
        let mut lost = 0;
        while self.overlapping(device) > MAX_OVERLAPPING {
            let Some(oldest) = self.list.iter_mut().find(|handover| {
                handover.device == device && matches!(handover.stage, Stage::Overlapping { .. })
            }) else {
                break;
            };
            if let Stage::Overlapping { until, .. } = oldest.stage {
                grace::wait(until);
            }
            lost += oldest.close();
        }
        lost
    }

    /// The old sources of `device` still sampling.
    pub fn overlapping(&self, device: (u32, u32)) -> usize {
        self.list
            .iter()
            .filter(|handover| {
                handover.device == device && matches!(handover.stage, Stage::Overlapping { .. })
            })
            .count()
    }

    /// Whether any old source still samples.
    pub(crate) fn any_overlapping(&self) -> bool {
        self.list
            .iter()
            .any(|handover| matches!(handover.stage, Stage::Overlapping { .. }))
    }

    /// Closes every old source whose grace period has passed; returns the
    /// samples they lost.
    pub(crate) fn close_due(&mut self) -> u64 {
        self.list
            .iter_mut()
            .filter(|handover| {
                matches!(handover.stage, Stage::Overlapping { until, .. } if grace::passed(until))
            })
            .map(Handover::close)
            .sum()
    }

    /// Closes `device`'s old sources now (it is no longer watched: what
    /// it does next is not wanted); returns the samples they lost.
    pub(crate) fn close_device(&mut self, device: (u32, u32)) -> u64 {
        self.list
            .iter_mut()
            .filter(|handover| {
                handover.device == device && matches!(handover.stage, Stage::Overlapping { .. })
            })
            .map(Handover::close)
            .sum()
    }

    /// The samples ring `index`'s old sources lost since last asked.
    pub(crate) fn take_lost(&mut self, index: usize) -> u64 {
        self.list
            .iter_mut()
            .map(|handover| match &mut handover.stage {
                Stage::Overlapping { old, .. } => old.take_lost(index),
                Stage::Closed { .. } => 0,
            })
            .sum()
    }

    /// At a drain's start: the rules whose second grace period has passed
    /// are forgotten at its end ([`Handovers::forget_marked`]).
    pub(crate) fn mark_forgettable(&mut self) {
        for handover in &mut self.list {
            if let Stage::Closed {
                forget,
                forgettable,
            } = &mut handover.stage
            {
                *forgettable = grace::passed(*forget);
            }
        }
    }

    /// At a drain's end: forgets the rules marked at its start.
    pub(crate) fn forget_marked(&mut self) {
        self.list.retain(|handover| {
            !matches!(
                handover.stage,
                Stage::Closed {
                    forgettable: true,
                    ..
                }
            )
        });
    }

    /// Whether a sample by event `id` read from ring `index`, in ring
    /// order, repeats one already read (see the module doc).
    pub(crate) fn is_repeat(&mut self, index: usize, id: u64) -> bool {
        let mut repeat = false;
        for handover in &mut self.list {
            let (Some(&old), Some(&new)) =
                (handover.old_ids.get(index), handover.new_ids.get(index))
            else {
                continue;
            };
            if id == new {
                handover.new_seen[index] = true;
            } else if id == old && handover.new_seen[index] {
                repeat = true;
            }
        }
        repeat
    }
}

impl Handover {
    /// Stops and closes the old source (if still open); returns the
    /// samples it lost.
    fn close(&mut self) -> u64 {
        let Stage::Overlapping { old, .. } = &mut self.stage else {
            return 0;
        };
        // Stopped before its losses are read: none comes after.
        old.disable();
        let lost = old.take_all_lost();
        self.stage = Stage::Closed {
            forget: grace::request(),
            forgettable: false,
        };
        lost
    }
}
