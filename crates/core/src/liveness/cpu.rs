//! Whether a holder has used any CPU lately: its CPU time (utime + stime,
//! `/proc/<pid>/stat` fields 14–15) as seen by successive looks, and since
//! when it has stood still.
//!
//! Invariants: a process is told apart from a later one with its PID by
//! its start time; "still since T" means every look from T on read the
//! same CPU time — T is the first look that saw that value, so the claim
//! "no CPU tick since T" is exactly what was observed (one look alone can
//! never say a process is idle); only the PIDs the caller keeps are
//! remembered.

use std::collections::HashMap;
use std::time::{Duration, SystemTime};

use super::ProcessInfo;

/// What the last look at one PID saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Seen {
    started: Option<SystemTime>,
    ticks: u64,
    /// The first look that read `ticks`.
    since: SystemTime,
}

/// CPU time per PID across looks (one per holder refresh).
#[derive(Debug, Default)]
pub(crate) struct CpuClock {
    seen: HashMap<u32, Seen>,
}

impl CpuClock {
    /// Records that `pid` (started at `started`) had used `ticks` of CPU
    /// when looked at `now`; returns since when its CPU time has stood
    /// still (`now` when it moved or was first seen).
    pub(crate) fn observe(
        &mut self,
        pid: u32,
        started: Option<SystemTime>,
        ticks: u64,
        now: SystemTime,
    ) -> SystemTime {
        let fresh = Seen {
            started,
            ticks,
            since: now,
        };
        let seen = self.seen.entry(pid).or_insert(fresh);
        if seen.started != started || seen.ticks != ticks {
            *seen = fresh;
        }
        seen.since
    }

    /// Since when `pid` (started at `started`) has used no CPU, as far as
    /// the looks so far tell; `None` if it was never looked at.
    pub(crate) fn still_since(&self, pid: u32, started: Option<SystemTime>) -> Option<SystemTime> {
        self.seen
            .get(&pid)
            .filter(|seen| seen.started == started)
            .map(|seen| seen.since)
    }

    /// Sets each live holder's `idle_since` to when its CPU time stopped,
    /// if that is at least `idle_after` before `now` (otherwise `None`).
    pub fn stamp(&self, holders: &mut [ProcessInfo], now: SystemTime, idle_after: Duration) {
        for holder in holders {
            holder.idle_since = self
                .still_since(holder.pid, holder.started)
                .filter(|since| holder.alive && held_for(*since, now) >= idle_after);
        }
    }

    /// Forgets every PID for which `keep` is false.
    pub fn retain(&mut self, keep: impl Fn(u32) -> bool) {
        self.seen.retain(|pid, _| keep(*pid));
    }

    /// True when no PID is remembered.
    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.seen.is_empty()
    }
}

fn held_for(since: SystemTime, now: SystemTime) -> Duration {
    now.duration_since(since).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(secs)
    }

    #[test]
    fn still_since_is_the_first_look_that_saw_the_current_cpu_time() {
        let mut clock = CpuClock::default();
        let started = Some(at(1));
        assert_eq!(clock.observe(7, started, 10, at(100)), at(100));
        assert_eq!(clock.observe(7, started, 10, at(101)), at(100));
        assert_eq!(clock.observe(7, started, 10, at(160)), at(100));
        // It ran: the stillness starts again at this look.
        assert_eq!(clock.observe(7, started, 11, at(161)), at(161));
        assert_eq!(clock.still_since(7, started), Some(at(161)));
    }

    #[test]
    fn a_reused_pid_starts_afresh_and_an_unseen_one_is_unknown() {
        let mut clock = CpuClock::default();
        clock.observe(7, Some(at(1)), 10, at(100));
        assert_eq!(clock.still_since(7, Some(at(50))), None);
        assert_eq!(clock.observe(7, Some(at(50)), 10, at(120)), at(120));
        assert_eq!(clock.still_since(8, Some(at(1))), None);
        clock.retain(|pid| pid != 7);
        assert!(clock.is_empty());
    }

    #[test]
    fn stamp_marks_only_holders_still_for_the_threshold() {
        let mut clock = CpuClock::default();
        let mut idle = ProcessInfo::unread(7);
        idle.started = Some(at(1));
        let mut busy = ProcessInfo::unread(8);
        busy.started = Some(at(1));
        clock.observe(7, idle.started, 10, at(100));
        clock.observe(8, busy.started, 10, at(100));
        clock.observe(8, busy.started, 12, at(105));
        let mut holders = [idle, busy, ProcessInfo::unread(9)];
        clock.stamp(&mut holders, at(110), Duration::from_secs(10));
        assert_eq!(holders[0].idle_since, Some(at(100)));
        assert_eq!(holders[1].idle_since, None, "it ran 5 s ago");
        assert_eq!(holders[2].idle_since, None, "never looked at");
    }
}
