//! Claims judged from the table the events keep (no `/proc/locks`
//! read), and the once-a-second look at waiters and keepers that no event
//! tells of.
//!
//! Invariant: a judgement costs its claims' files, not the table; a
//! waiter whose process is gone, or whose PID a newer process has, is
//! none.

use super::*;

impl Kernel {
    /// Judges `claims` from the table, now: their files' stat and the
    /// table name liveness, holders and waiters (verified from fdinfo as
    /// a `/proc/locks` read's would be), with no read of `/proc/locks`.
    pub(super) fn judge_from_table(&mut self, judging: &mut Judging<'_>, claims: Vec<GatedClaim>) {
        // Each claim's files lstat'ed once (the gate by the caller, in
        // this wake-up): registered, judged and verified from these.
        let mut lstats: HashMap<LockKey, ClaimLstats> = HashMap::with_capacity(claims.len());
        let mut keys = Vec::with_capacity(claims.len());
        for GatedClaim { key, gate } in claims {
            let stats = ClaimLstats {
                gate: Ok(gate),
                announce: std::fs::symlink_metadata(key.announce_path()),
            };
            self.register_files(&key, stats.files());
            judging.sweep_touched.touch(&key);
            judging.trace(&key, Stage::ProbeStart);
            lstats.insert(key.clone(), stats);
            keys.push(key);
        }
        // A claim whose file the filter dropped waits for its readmission
        // (a judgement of everything), for at most READMIT_WAIT.
        let now = Instant::now();
        self.readmitting
            .retain(|_, since| now < *since + READMIT_WAIT);
        let (keys, waiting): (Vec<LockKey>, Vec<LockKey>) = keys.into_iter().partition(|key| {
            self.registry
                .claims
                .get(key)
                .is_none_or(|files| !files.iter().any(|file| self.readmitting.contains_key(file)))
        });
        for key in &waiting {
            self.queue(key.clone());
        }
        for key in &waiting {
            judging.trace(key, Stage::Deferred);
        }
        // A claim whose keeper is due is judged with the search; the others
        // leave it for later when their taker let go.
        let (search, defer): (Vec<LockKey>, Vec<LockKey>) = keys
            .into_iter()
            .partition(|key| self.keepers.search_keepers.remove(key));
        for key in search.iter().chain(&defer) {
            self.keepers.keepers_due.remove(key);
        }
        let mut with_lstats = |keys: Vec<LockKey>| -> Vec<(LockKey, ClaimLstats)> {
            keys.into_iter()
                .filter_map(|key| lstats.remove(&key).map(|stats| (key, stats)))
                .collect()
        };
        let (search, defer) = (with_lstats(search), with_lstats(defer));
        self.judge_from_table_with(judging, search, Recheck::ReadAgain);
        self.judge_from_table_with(judging, defer, Recheck::Table);
    }

    /// [`Self::judge_from_table`] for `keys` (registered, each with its
    /// files' `lstat`s), searching for a keeper at once
    /// ([`Recheck::ReadAgain`]) or later ([`Recheck::Table`]).
    pub(super) fn judge_from_table_with(
        &mut self,
        judging: &mut Judging<'_>,
        keys: Vec<(LockKey, ClaimLstats)>,
        recheck: Recheck,
    ) {
        if keys.is_empty() {
            return;
        }
        let (keys, lstats): (Vec<LockKey>, Vec<ClaimLstats>) = keys.into_iter().unzip();
        // The judged claims' files only (registered just above, from a
        // fresh lstat): a judgement costs its claims, not the table.
        let index = self.table.index_of(
            keys.iter()
                .filter_map(|key| self.registry.claims.get(key))
                .flatten(),
        );
        judging
            .view
            .stats
            .probes
            .fetch_add(keys.len() as u64, Ordering::Relaxed);
        let mut pairs: Vec<(LockKey, KeyState)> = keys
            .into_iter()
            .zip(&lstats)
            .map(|(key, stats)| {
                let state = lock_free::answer_of(&stats.gate, &stats.announce, &index).state(&key);
                (key, state)
            })
            .collect();
        // Each claim's files with when they were made, read before the
        // lstats go to the holders' reading.
        let made = (
            SystemTime::now(),
            crate::liveness::kernel::event::monotonic_now(),
        );
        let counted: Vec<Vec<CountedFile>> = lstats
            .iter()
            .map(|stats| counted_files(stats, made))
            .collect();
        let holders = HolderReads {
            fd_hints: self.fd_hints(&lstats, &index),
            detail: judging.config.holder_detail,
        };
        annotate_lstated(
            &mut pairs,
            lstats,
            &index,
            judging.own_pids,
            &mut || index.clone(),
            recheck,
            holders,
        );
        let at = SystemTime::now();
        let mono_now = crate::liveness::kernel::event::monotonic_now();
        let since = mono_now.saturating_sub(REFUSALS_OVER.as_nanos() as u64);
        // A monotonic stamp on the wall clock (the gap to now, back from now).
        let wall = |mono: u64| at.checked_sub(Duration::from_nanos(mono_now.saturating_sub(mono)));
        let clock = Clocks::now();
        for ((key, state), counted) in pairs.iter_mut().zip(&counted) {
            let files = self.registry.claims.get(key).map_or(&[][..], Vec::as_slice);
            // A waiter whose PID is now a process started after it was
            // queued is none (the table forgets it at its next check).
            let reused: Vec<u32> = state
                .waiting
                .iter()
                .filter(|waiting| {
                    self.table
                        .waiter_since(files, waiting.pid)
                        .is_some_and(|since| clock.started_after(waiting.started, since))
                })
                .map(|waiting| waiting.pid)
                .collect();
            if !reused.is_empty() {
                state
                    .waiting
                    .retain(|waiting| !reused.contains(&waiting.pid));
                state.waiters.retain(|pid| !reused.contains(pid));
                state.watchers.retain(|pid| !reused.contains(pid));
            }
            let refused = self.table.refused_since(counted, since);
            state.refused = (refused.count > 0).then(|| RefusedTries {
                last_minute: refused.count,
                by: refused
                    .by
                    .iter()
                    .zip(&refused.last)
                    .map(|(&(pid, count), &last)| RefusedBy {
                        pid,
                        count,
                        last: wall(last),
                    })
                    .collect(),
            });
            if state.liveness.is_held() {
                let tries: Vec<(u32, u64, Option<SystemTime>)> = state
                    .refused
                    .iter()
                    .flat_map(|refused| &refused.by)
                    .map(|by| (by.pid, by.count, by.last))
                    .collect();
                name_recent(state, WaitKind::Trying, 1, tries, at);
                let polls = self.table.polls_since(
                    counted,
                    mono_now.saturating_sub(TRYING_WITHIN.as_nanos() as u64),
                );
                let polls = polls
                    .by
                    .iter()
                    .zip(&polls.last)
                    .map(|(&(pid, count), &last)| (pid, count, wall(last)));
                name_recent(state, WaitKind::Polling, POLLS_MIN, polls, at);
            }
        }
        let now = Instant::now();
        for (key, mut state) in pairs {
            {
                if state.holders_note == Some(crate::liveness::HoldersNote::TakerLetGo) {
                    let since = *self.let_go_since.entry(key.clone()).or_insert(now);
                    if now < since + LET_GO_GRACE {
                        // Its unlock is most likely in a ring: drain, and
                        // judge again in a moment, showing nothing yet.
                        if let Some(nudge) = &self.nudge {
                            nudge.now();
                        }
                        self.queue(key.clone());
                        judging.trace(&key, Stage::Deferred);
                        continue;
                    }
                    self.keepers
                        .keepers_due
                        .insert(key.clone(), since + KEEPER_WAIT);
                } else {
                    self.let_go_since.remove(&key);
                }
            }
            judging.trace(&key, Stage::Probed(state.liveness));
            if state.liveness.is_held() && state.holders.is_empty() {
                state
                    .holders_note
                    .get_or_insert(crate::liveness::HoldersNote::NotVisible);
            }
            judging.update(key, state, at);
        }
    }

    /// Where the holders `index` names for the claims' files (`lstats`)
    /// were seen to have them open, when their requests were resolved:
    /// their holds are proved through those fds first.
    fn fd_hints(&self, lstats: &[ClaimLstats], index: &LockIndex) -> FdHints {
        let mut hints = FdHints::new();
        for file in lstats.iter().flat_map(ClaimLstats::files) {
            let Some(locks) = index.get(&file) else {
                continue;
            };
            for &pid in locks.holders.iter().chain(&locks.shared) {
                let fds = hints.entry(pid).or_default();
                fds.extend(self.keepers.fd_tables.fds_on(pid, file));
                if fds.is_empty() {
                    hints.remove(&pid);
                }
            }
        }
        hints
    }

    /// Marks for judgement, with a search for who keeps them, the claims
    /// whose [`KEEPER_WAIT`] passed; once a [`WAITER_CHECK`], drops the
    /// waiters whose processes are gone and judges again the claims they
    /// waited on.
    pub(super) fn check_waiters(&mut self, state_dir: &Path) {
        let now = Instant::now();
        let mut keys: Vec<LockKey> = Vec::new();
        self.keepers.keepers_due.retain(|key, due| {
            let waits = *due > now;
            if !waits {
                keys.push(key.clone());
            }
            waits
        });
        self.keepers.search_keepers.extend(keys.iter().cloned());
        let files: Vec<(FileId, u32)> = self
            .keepers
            .files_to_search
            .iter()
            .filter(|(_, (_, due))| *due <= now)
            .map(|(file, (pid, _))| (*file, *pid))
            .collect();
        for (file, pid) in files {
            keys.extend(self.resolve_claim(state_dir, file, pid));
        }
        if now < self.next_waiter_check {
            for key in keys {
                self.queue(key);
            }
            return;
        }
        self.next_waiter_check = now + WAITER_CHECK;
        // A waiter is forgotten once its process is gone — or its PID
        // belongs to a process started after it was queued: the new
        // process waits for nothing.
        let clock = Clocks::now();
        let changed = self
            .table
            .forget_waiters(|pid, since| !clock.gone_or_reused(pid, since));
        keys.extend(
            changed
                .iter()
                .filter_map(|file| self.registry.files.get(file).cloned()),
        );
        // Refusal counts age, and a process stops trying or polling:
        // judged again once a second until none is left in the last
        // minute (the judgement then clears it) — from the last refusal,
        // not from the last judgement, which would keep it forever.
        self.refusals
            .last_refusal
            .retain(|_, last| now < *last + REFUSALS_OVER + WAITER_CHECK);
        let last_refusal = &self.refusals.last_refusal;
        self.refusals
            .refused
            .retain(|key, _| last_refusal.contains_key(key));
        keys.extend(self.refusals.last_refusal.keys().cloned());
        for key in keys {
            self.queue(key);
        }
    }
}

/// The wall clock and the monotonic clock read together: a lock event's
/// monotonic stamp placed on the wall clock, to compare with a process's
/// start.
struct Clocks {
    wall: SystemTime,
    monotonic: u64,
}

impl Clocks {
    pub(super) fn now() -> Self {
        Self {
            wall: SystemTime::now(),
            monotonic: crate::liveness::kernel::event::monotonic_now(),
        }
    }

    /// True when a process that `started` then started after the event
    /// stamped `at` (beyond the start time's precision).
    pub(super) fn started_after(&self, started: Option<SystemTime>, at: u64) -> bool {
        let at = self
            .wall
            .checked_sub(Duration::from_nanos(self.monotonic.saturating_sub(at)));
        matches!((started, at), (Some(started), Some(at))
            if started > at + crate::liveness::process::START_TIME_SLACK)
    }

    /// True when `pid` is gone, or is a process started after `at`.
    pub(super) fn gone_or_reused(&self, pid: u32, at: u64) -> bool {
        match crate::liveness::process::started_of(pid) {
            None => true,
            started => self.started_after(started, at),
        }
    }
}

/// Adds to `state.waiting`, as waiting `how`, every PID of `refused`
/// (PID, refusals counted, the last one) refused at least `min_count`
/// times, the last within [`TRYING_WITHIN`] of `now` — a try loop
/// ([`WaitKind::Trying`]: exclusive tries) or a poller
/// ([`WaitKind::Polling`]: shared ones, [`POLLS_MIN`]) — that still runs
/// as the process that was refused (started before its last refusal), is
/// not this process, and neither waits there already nor holds the key.
fn name_recent(
    state: &mut KeyState,
    how: WaitKind,
    min_count: u64,
    refused: impl IntoIterator<Item = (u32, u64, Option<SystemTime>)>,
    now: SystemTime,
) {
    let me = crate::liveness::process::own_pid();
    let found: Vec<Waiting> = refused
        .into_iter()
        .filter(|&(pid, count, _)| count >= min_count && pid != me)
        .filter_map(|(pid, _, last)| Some((pid, last?)))
        .filter(|(_, last)| now.duration_since(*last).unwrap_or_default() <= TRYING_WITHIN)
        .filter(|(pid, _)| !state.waiting.iter().any(|waiting| waiting.pid == *pid))
        .filter(|(pid, _)| !state.holders.iter().any(|holder| holder.pid == *pid))
        .filter_map(|(pid, last)| {
            let started = crate::liveness::process::started_of(pid)?;
            let reused = started > last + crate::liveness::process::START_TIME_SLACK;
            (!reused).then_some(Waiting {
                pid,
                how,
                started: Some(started),
            })
        })
        .collect();
    state.waiting.extend(found);
}

/// A claim's files with when each was made, on the events' clock
/// (`CLOCK_MONOTONIC` ns), from their `lstat`'s birth time and `now`, one
/// instant read on both clocks (`None` where the filesystem keeps no
/// birth time). A birth after `now` (the wall clock set back since) is
/// taken as now: every refusal before it is then left out, never one
/// of a file deleted before counted.
fn counted_files(stats: &ClaimLstats, now: (SystemTime, u64)) -> Vec<CountedFile> {
    let (wall, mono) = now;
    stats
        .existing()
        .map(|meta| CountedFile {
            file: FileId::from_metadata(meta),
            born: meta.created().ok().map(|made| {
                let ago = wall.duration_since(made).unwrap_or_default();
                mono.saturating_sub(ago.as_nanos() as u64)
            }),
        })
        .collect()
}
