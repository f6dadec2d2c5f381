//! The once-a-second look at held keys' holders: a SIGSTOP, a debugger
//! attaching, a parent dying make no filesystem event, so their state and
//! parent are re-read from `/proc/<pid>/stat` on a clock.
//!
//! Invariants: only holders of held keys are read, each PID once per
//! refresh; with no held key nothing is read and no timer is armed; a
//! holder whose state changed is sent as a changed key (a `Delta`), like
//! any other change; a key whose holder is found gone is probed again,
//! and not sent until the probe answers (a state whose holder is gone is a
//! claim about the lock only a look at the lock may make) — a
//! holder that locked through a read-only descriptor (util-linux
//! `flock(1)`) releases with no event inotify reports, so its exit is
//! the only sign. The same read gives the holder's CPU time, kept per
//! PID ([`crate::liveness::CpuClock`]) to tell idle holders.

use std::collections::HashMap;
use std::time::{Duration, SystemTime};

use tokio::time::Instant;

use super::view::View;
use crate::disk::LockKey;
use crate::liveness::KeyState;
use crate::liveness::ProcessInfo;
use crate::liveness::process::ProcState;

/// How often held keys' holders are re-read.
pub(crate) const HOLDER_REFRESH: Duration = Duration::from_secs(1);

/// When held keys' holders are next re-read, and what their CPU time
/// was (to tell idle holders).
pub(super) struct HolderClock {
    /// When the next refresh is due (armed only while a key is held).
    pub(super) next_refresh: Instant,
    /// Held keys' holders' CPU time across refreshes.
    pub(super) cpu: crate::liveness::CpuClock,
}

impl HolderClock {
    /// The first refresh due a period from now.
    pub(super) fn new() -> Self {
        Self {
            next_refresh: Instant::now() + HOLDER_REFRESH,
            cpu: crate::liveness::CpuClock::default(),
        }
    }
}

/// What a refresh found.
pub(super) struct Refreshed {
    /// Held keys whose holders changed, with their new state.
    pub(super) changed: Vec<(LockKey, KeyState)>,
    /// Held keys a holder of which exited: to be judged again (never
    /// sent as they are).
    pub(super) exited: Vec<LockKey>,
    /// How many processes were read.
    pub(super) read: usize,
    /// When.
    pub(super) at: SystemTime,
}

impl HolderClock {
    /// When the next refresh is due, if any key of `view` is held.
    pub(super) fn due(&self, view: &View) -> Option<Instant> {
        (!view.held.is_empty()).then_some(self.next_refresh)
    }

    /// Re-reads every held key's holders' state, parent and CPU time (one
    /// `/proc/<pid>/stat` read per PID); answers the keys whose holders
    /// changed — a holder that became idle (no CPU for `idle_after`) or
    /// ran again is such a change — and those a holder of which exited.
    pub(super) fn refresh(&mut self, view: &View, idle_after: Duration) -> Refreshed {
        self.next_refresh = Instant::now() + HOLDER_REFRESH;
        let now = SystemTime::now();
        let mut fresh: HashMap<u32, ProcessInfo> = HashMap::new();
        let mut changed = Vec::new();
        let mut exited = Vec::new();
        for key in &view.held {
            let Some(state) = view.states.get(key) else {
                continue;
            };
            let mut holders: Vec<ProcessInfo> = state
                .holders
                .iter()
                .map(|holder| {
                    fresh
                        .entry(holder.pid)
                        .or_insert_with(|| {
                            let (info, ticks) = holder.refreshed();
                            if let Some(ticks) = ticks {
                                self.cpu.observe(info.pid, info.started, ticks, now);
                            }
                            info
                        })
                        .clone()
                })
                .collect();
            // Gone, or a zombie (an exited process not reaped yet: its
            // files, and so its locks, are closed).
            let ended =
                |holder: &ProcessInfo| !holder.alive || holder.state == Some(ProcState::Zombie);
            let was_running = |pid: u32| {
                state
                    .holders
                    .iter()
                    .any(|h| h.pid == pid && h.alive && h.state != Some(ProcState::Zombie))
            };
            if holders
                .iter()
                .any(|holder| ended(holder) && was_running(holder.pid))
            {
                // Not sent as is: a holder gone with its key still shown
                // held would read as an orphaned lock for as long as the
                // probe takes. The probe says what became of the key.
                exited.push(key.clone());
                continue;
            }
            self.cpu.stamp(&mut holders, now, idle_after);
            if holders != state.holders {
                let mut state = state.clone();
                state.holders = holders;
                changed.push((key.clone(), state));
            }
        }
        self.cpu.retain(|pid| fresh.contains_key(&pid));
        Refreshed {
            changed,
            exited,
            read: fresh.len(),
            at: now,
        }
    }
}
