//! "Why is this stuck?": who holds each member of a family, since when,
//! and what else those processes hold.
//!
//! Invariants: `/proc/locks` is read once per report (plus once for the
//! probe, unless it is `acquire`), the tree scanned once; the family check
//! takes the members all-or-nothing and releases them at once only with
//! the `acquire` probe — `lock-free` (the default) reads `/proc/locks` and
//! takes nothing, `passive` takes momentary shared locks; neither writes. A member a live process
//! holds through a file unlinked from its path (the SDK create race,
//! [`crate::liveness::unlinked`]) is busy: it may look free on disk, but
//! taking it would make a second holder.
//!
//! Who waits for whom: when anyone waits on a busy member or on a key its
//! holders hold, the whole tree is looked at (a snapshot, with the
//! check's probe — never the acquire probe, which would write: passive
//! then) and its wait-for graph joins the hops; when that graph has a
//! cycle, it is looked at again [`DEADLOCK_AFTER`] later, and a cycle
//! still standing then (the same processes) is judged by the deadlock
//! rule as the monitor judges it.

mod lines;
mod recorded;

pub use lines::report_lines;
pub use recorded::report_from_states;

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use crate::context::Context;
use crate::disk::scan;
use crate::disk::{ClaimFile, KeyKind, LockKey, ScanProblem, ScanProblemKind, ScanReport};
use crate::liveness::proc_locks::{FileId, LockIndex};
use crate::liveness::process::ProcessInfo;
use crate::liveness::unlinked::{self, KnownInodes};
use crate::liveness::verify::{Hold, HolderVerifier, claim_files};
use crate::liveness::{KeyState, Liveness, ProbeMode};
use crate::locks::{self, Busy, Family, LocksError};
use crate::operate::held::HeldView;
use crate::operate::verdict::{MATERIALIZING_AFTER, Role, Verdict, judge};
use crate::operate::wait_for::{DEADLOCK_AFTER, WaitGraph, WaitsDoc};

/// One busy member and who holds it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct BusyMember {
    /// instance / tag.
    pub kind: KeyKind,
    /// AIH or tag.
    pub name: String,
    /// Holders (PIDs with their command lines), possibly empty for an
    /// in-process conflict or a holder that just left.
    pub holders: Vec<ProcessInfo>,
    /// Processes holding it SHARED (not SDK holders: util-linux `flock -s`
    /// and the like), which block every acquire as surely.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub shared: Vec<ProcessInfo>,
}

/// Names the busy members of a failed attempt and their holders (one read
/// of `/proc/locks` for the whole set).
pub fn describe_busy(state_dir: &Path, busy: &Busy) -> Vec<BusyMember> {
    let index = LockIndex::read().unwrap_or_default();
    let mut verifier = HolderVerifier::default();
    busy.busy
        .iter()
        .map(|&i| {
            let (dir, key) = &busy.coords[i];
            let key = LockKey::from_coord(state_dir, dir, key);
            let (holders, shared) = verified_holders(&mut verifier, &index, &key);
            BusyMember {
                kind: key.kind(),
                name: key.name().to_string(),
                holders,
                shared,
            }
        })
        .collect()
}

/// The exclusive holders of `key` ([`HolderVerifier::resolve`]: whoever
/// keeps a lock whose taker is gone first, the gone taker after), and its
/// SHARED holders (never this process: its own probes are momentary
/// shared locks), from `index` and, where its callers are gone, a read
/// made now.
fn verified_holders(
    verifier: &mut HolderVerifier,
    index: &LockIndex,
    key: &LockKey,
) -> (Vec<ProcessInfo>, Vec<ProcessInfo>) {
    let files = claim_files(key);
    let locks = index.union(files.iter().copied());
    let mut fresh = || {
        LockIndex::read()
            .unwrap_or_default()
            .union(files.iter().copied())
            .holders
    };
    let resolved = verifier.resolve(&locks.holders, &files, key.held_since(), &mut fresh);
    let me = std::process::id();
    let not_me =
        |pids: Vec<u32>| -> Vec<u32> { pids.into_iter().filter(|&pid| pid != me).collect() };
    let mut fresh = || {
        not_me(
            LockIndex::read()
                .unwrap_or_default()
                .union(files.iter().copied())
                .shared,
        )
    };
    let shared = verifier.shared_holders(&not_me(locks.shared), &files, &mut fresh);
    (resolved.holders, shared.holders)
}

impl BusyMember {
    /// `tag "x"`.
    pub fn label(&self) -> String {
        crate::disk::key::label(self.kind, &self.name)
    }
}

/// `busy: tag "x" held by pid 12 (cmd)` — one line per busy member.
pub fn busy_line(member: &BusyMember) -> String {
    let list = |processes: &[ProcessInfo]| -> String {
        let named: Vec<String> = processes
            .iter()
            .map(|p| format!("pid {} ({}){}", p.pid, p.command(), p.holder_mark()))
            .collect();
        named.join(", ")
    };
    let by = match (member.holders.is_empty(), member.shared.is_empty()) {
        (false, _) => format!("held by {}", list(&member.holders)),
        (true, false) => format!(
            "held SHARED by {} (not an SDK holder; it blocks every acquire)",
            list(&member.shared)
        ),
        (true, true) => {
            "held (holder not visible in /proc/locks: this process, or it just left)".to_string()
        }
    };
    format!("busy: {} {by}", member.label())
}

/// One holder of a busy member, with everything else it holds.
#[derive(Debug, Clone, serde::Serialize)]
pub struct HolderReport {
    /// The process.
    pub process: ProcessInfo,
    /// When it took this member (announce mtime).
    #[serde(with = "crate::time_format::option")]
    pub since: Option<SystemTime>,
    /// The other keys this PID holds (its family as seen from the locks).
    pub also_holds: Vec<String>,
    /// What it is, from every key it holds (this one included).
    #[serde(skip)]
    pub role: Role,
    /// It holds the member SHARED: not an SDK holder, but it blocks every
    /// acquire.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub shared: bool,
}

/// One member of a checked family.
#[derive(Debug, Clone, serde::Serialize)]
pub struct MemberReport {
    /// instance / tag.
    pub kind: KeyKind,
    /// AIH or tag.
    pub name: String,
    /// False when the member could be taken.
    pub busy: bool,
    /// Who holds it (empty when free).
    pub holders: Vec<HolderReport>,
    /// Why it is held and what to do (busy members whose holder locktop can
    /// name).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verdict: Option<Verdict>,
    /// Processes blocked waiting to take it (the SDK's `wait_acquire`: an
    /// exclusive flock waiter), from `/proc/locks` — waiters hold nothing,
    /// so there is no lock of theirs to verify.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub contenders: Vec<ProcessInfo>,
    /// Processes blocked waiting for it to be released (the SDK's
    /// `wait_released`: a shared flock waiter on the announce).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub watchers: Vec<ProcessInfo>,
    /// Live processes holding a file of this member that was unlinked from
    /// its path: probes cannot see that lock, yet each believes it holds
    /// the member. Any makes the member busy.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub held_unlinked: Vec<UnlinkedHolder>,
    /// `LOCK_NB` tries refused on it in the last minute, where the
    /// kernel's lock events told them (the monitor's check, a replay's):
    /// a one-shot probe cannot know past tries, and leaves it `None`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refused: Option<crate::liveness::state::RefusedTries>,
}

/// A process holding a member's file that was unlinked (the SDK create
/// race). Invariant: verified as in [`crate::liveness::unlinked::find`].
#[derive(Debug, Clone, serde::Serialize)]
pub struct UnlinkedHolder {
    /// The holder.
    pub process: ProcessInfo,
    /// Which of the member's files it holds.
    pub file: ClaimFile,
    /// Where that file was.
    #[serde(serialize_with = "crate::time_format::lossy_path")]
    pub path: PathBuf,
}

/// The outcome of a family check.
#[derive(Debug, Clone, serde::Serialize)]
pub struct CheckReport {
    /// True when the whole family could be taken at the time of the check
    /// and no member is held through an unlinked file.
    pub free: bool,
    /// Per member, in family order (duplicates collapsed).
    pub members: Vec<MemberReport>,
    /// Who waits for whom in the whole tree, when anyone waits on a busy
    /// member or on what its holders hold (`None`: nobody does, or the
    /// check was not of the live tree).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub waits: Option<WaitsDoc>,
}

impl CheckReport {
    /// True when a member is waited on in a deadlock, or its holder waits
    /// in one (its chain runs into it, in this family or not).
    pub fn deadlocked(&self) -> bool {
        self.members.iter().any(|member| {
            matches!(
                member.verdict,
                Some(Verdict::Deadlock { .. } | Verdict::Blocked { deadlock: true, .. })
            )
        })
    }
}

/// How a check with `probe` learns whether members are taken, in words
/// for its report (the TUI's form and dialog).
pub fn probe_words(probe: ProbeMode) -> &'static str {
    match probe {
        ProbeMode::LockFree => "lock-free: read from /proc/locks, nothing taken or opened",
        ProbeMode::Passive => "passive shared-lock probes (nothing taken)",
        ProbeMode::Acquire => "all-or-nothing try, released at once",
    }
}

/// Checks `family` with `probe`: `acquire` tries it all-or-nothing and
/// releases at once; `lock-free` judges each member from one
/// `/proc/locks` read; `passive` probes each with the SDK's shared-lock
/// probe. Then explains every busy member.
pub async fn check_family(
    context: &Context,
    family: &Family,
    probe: ProbeMode,
) -> Result<CheckReport, LocksError> {
    let coords = locks::family_coords(context.state_dir(), family)?;
    // Only probed, never taken: a family reached through a symlink (the
    // acquire would write wherever it points), and one with a member that
    // has no lock files yet (nobody can hold it; taking it would leave new,
    // never-deleted files behind — a typo must not create a stale key).
    let passive = !probe.writes()
        || coords.iter().any(|(dir, key)| {
            crate::disk::confine::ensure_no_symlink_below_root(context.state_dir(), dir).is_err()
                || std::fs::symlink_metadata(crate::locks::escape::gate_path(dir, key)).is_err()
        });
    if passive {
        // A member with no lock files is free to anyone who can create
        // them; one whose files are no agent lock (a FIFO, a gate with
        // content) is never probed, and never free.
        for (dir, key) in &coords {
            let missing =
                std::fs::symlink_metadata(crate::locks::escape::gate_path(dir, key)).is_err();
            let unfit = locks::check_writable(dir, key).is_err();
            if unfit || missing && locks::obstacle(dir, key).is_some() {
                return Err(locks::unavailable(context.state_dir(), family, dir, key));
            }
        }
    }
    let busy: Busy = if probe.reads_lock_table() {
        lock_free_busy(context, &coords).await
    } else if passive {
        let unique = locks::dedup_coords(&coords);
        // The SDK's shared-lock probe cannot see a shared holder: ask
        // /proc/locks (once) for those.
        let index = LockIndex::read().unwrap_or_default();
        let mut verifier = HolderVerifier::default();
        let mut busy = Vec::new();
        for (i, (dir, key)) in unique.iter().enumerate() {
            let key = LockKey::from_coord(context.state_dir(), dir, key);
            if locks::is_taken(
                context.agent_locks(),
                key.dir(),
                key.key(),
                locks::IN_FLIGHT_AFTER,
            )
            .await
                || !verified_holders(&mut verifier, &index, &key).1.is_empty()
            {
                busy.push(i);
            }
        }
        Busy {
            coords: unique,
            busy,
        }
    } else {
        match locks::try_acquire_family_checked(context.agent_locks(), context.state_dir(), family)
            .await?
        {
            Ok(locks) => {
                let unique = locks
                    .iter()
                    .map(|lock| (lock.dir().to_path_buf(), lock.key().to_string()))
                    .collect();
                drop(locks);
                Busy {
                    coords: unique,
                    busy: Vec::new(),
                }
            }
            Err(busy) => busy,
        }
    };
    // Synchronous on purpose: a one-shot, operator-triggered report (one
    // /proc/locks read, one scan only when something is busy).
    let (mut report, index) = explain(context.state_dir(), &busy);
    if anyone_waits_around(&report, &index) {
        let looks = if probe.writes() {
            ProbeMode::Passive
        } else {
            probe
        };
        join_waits(context.state_dir(), &mut report, looks).await;
    }
    Ok(report)
}

/// True when someone waits on a busy member, or a holder of one waits
/// on anything (in `index`, the report's own `/proc/locks` read): only
/// then is the whole tree looked at for the hops.
fn anyone_waits_around(report: &CheckReport, index: &LockIndex) -> bool {
    let busy = report.members.iter().filter(|member| member.busy);
    if busy
        .clone()
        .any(|member| !member.contenders.is_empty() || !member.watchers.is_empty())
    {
        return true;
    }
    let holders: std::collections::HashSet<u32> = busy
        .flat_map(|member| &member.holders)
        .map(|holder| holder.process.pid)
        .collect();
    if holders.is_empty() {
        return false;
    }
    index.files().any(|(_, locks)| {
        locks
            .waiters
            .iter()
            .chain(&locks.shared_waiters)
            .any(|pid| holders.contains(pid))
    })
}

/// The tree's held keys, looked at once with `probe` (`None` when the
/// tree cannot be read: the report keeps its one-hop verdicts).
async fn look(state_dir: &Path, probe: ProbeMode) -> Option<HeldView> {
    let snapshot = crate::liveness::snapshot::take(state_dir, probe)
        .await
        .ok()?;
    let held: Vec<(LockKey, KeyState)> = snapshot
        .keys
        .iter_sorted()
        .filter(|(_, state)| state.liveness.is_held())
        .map(|(key, state)| (key.clone(), state.clone()))
        .collect();
    Some(HeldView::of(
        held.iter().map(|(k, s)| (k, s)),
        MATERIALIZING_AFTER,
    ))
}

/// Joins the hops: judges every busy member with the tree's wait-for
/// graph (looked at twice when it has a cycle, see the module doc), and
/// puts the graph in the report.
async fn join_waits(state_dir: &Path, report: &mut CheckReport, probe: ProbeMode) {
    let Some(mut view) = look(state_dir, probe).await else {
        return;
    };
    // One look: its cycles are never deadlocks. Only a second look,
    // DEADLOCK_AFTER later, finding the same processes in a circle dates
    // them from the first.
    if !view.waits().cycles().is_empty() {
        let first_at = SystemTime::now();
        let first = WaitGraph::build(view.held(), first_at, None);
        tokio::time::sleep(DEADLOCK_AFTER).await;
        if let Some(second) = look(state_dir, probe).await {
            view = second.looked_at(SystemTime::now(), Some(&first));
        }
    }
    if view.waits().is_empty() {
        return;
    }
    let now = SystemTime::now();
    for member in report.members.iter_mut().filter(|member| member.busy) {
        let key = view
            .held()
            .find(|(key, _)| key.kind() == member.kind && key.name() == member.name);
        let Some((key, state)) = key else {
            continue;
        };
        let verdict = view.judge(key, state, now);
        if let Some(
            verdict @ (Verdict::Deadlock { .. }
            | Verdict::WaitCycle { .. }
            | Verdict::Blocked { .. }),
        ) = verdict
        {
            member.verdict = Some(verdict);
        }
    }
    report.waits = Some(view.waits().doc(now));
}

/// The busy members of `coords` judged lock-free: from one merged
/// `/proc/locks` read (again while one is in flight, bounded), a member
/// held or in flight, held by a verified shared lock, or whose
/// in-process gate a task of this process holds.
async fn lock_free_busy(context: &Context, coords: &[(PathBuf, String)]) -> Busy {
    let unique = locks::dedup_coords(coords);
    let state_dir = context.state_dir().to_path_buf();
    let keys: Vec<LockKey> = unique
        .iter()
        .map(|(dir, key)| LockKey::from_coord(&state_dir, dir, key))
        .collect();
    let judged = tokio::task::spawn_blocking(move || {
        let read = || LockIndex::read().unwrap_or_default();
        let index = LockIndex::read_merged(&read);
        let mut verifier = HolderVerifier::default();
        let shared: Vec<bool> = keys
            .iter()
            .map(|key| !verified_holders(&mut verifier, &index, key).1.is_empty())
            .collect();
        let judged = crate::liveness::bulk::judge_lock_free(keys, &index, 1, &read);
        judged
            .into_iter()
            .zip(shared)
            .map(|((_, state), shared)| state.liveness.is_held() || shared)
            .collect::<Vec<bool>>()
    })
    .await
    .unwrap_or_default();
    let map = context.agent_locks();
    let busy = unique
        .iter()
        .enumerate()
        .filter(|(at, (dir, key))| {
            judged.get(*at).copied().unwrap_or(true)
                || map
                    .get(&(dir.clone(), key.clone()))
                    .is_some_and(|mutex| mutex.try_lock().is_err())
        })
        .map(|(at, _)| at)
        .collect();
    Busy {
        coords: unique,
        busy,
    }
}

/// Builds the report for an attempt: one `/proc/locks` read (returned
/// with it), one scan of the tree (only if something is busy) to find
/// what else holders hold.
fn explain(state_dir: &Path, attempt: &Busy) -> (CheckReport, LockIndex) {
    let index = LockIndex::read().unwrap_or_default();
    let report = scan::scan(state_dir, None).unwrap_or_default();
    let unlinked = unlinked::find(
        state_dir,
        &index,
        &KnownInodes::new(report.claim_inodes.clone()),
    );
    let held = if attempt.busy.is_empty() {
        Vec::new()
    } else {
        held_keys(&report, &index)
    };
    let mut verifier = HolderVerifier::default();
    let members: Vec<MemberReport> = attempt
        .coords
        .iter()
        .enumerate()
        .map(|(i, (dir, key))| {
            let key = LockKey::from_coord(state_dir, dir, key);
            let busy = attempt.busy.contains(&i);
            let held_unlinked = unlinked_holders(&unlinked, &key);
            let holders = if busy {
                let (exclusive, shared) = verified_holders(&mut verifier, &index, &key);
                // Held since the announce was written — unless the claim is
                // in flight (gate locked, announce not: its announce is an
                // earlier holder's), and never before the holder started.
                let in_flight = matches!(
                    crate::liveness::lock_free::answer(&key, &index),
                    crate::liveness::lock_free::Answer::InFlight
                );
                let since = if in_flight {
                    None
                } else {
                    crate::liveness::state::held_since_by(key.held_since(), &exclusive)
                };
                let tagged = exclusive.into_iter().map(|process| (process, false));
                tagged
                    .chain(shared.into_iter().map(|process| (process, true)))
                    .map(|(process, shared)| {
                        let others = also_holds(&mut verifier, &held, &process, &key);
                        let mine = std::iter::once((key.kind(), key.name()));
                        let kinds = others.iter().map(|(kind, name)| (*kind, name.as_str()));
                        HolderReport {
                            role: Role::from_kinds(kinds.chain(mine)),
                            also_holds: others
                                .iter()
                                .map(|(kind, name)| crate::disk::key::label(*kind, name))
                                .collect(),
                            since: if shared || !process.alive {
                                None
                            } else {
                                since
                            },
                            process,
                            shared,
                        }
                    })
                    .collect()
            } else {
                Vec::new()
            };
            // Contenders (blocked in wait_acquire) make it contended.
            let locks = if busy {
                index.claim(&key.gate_path(), &key.announce_path())
            } else {
                Default::default()
            };
            let mut processes = |pids: &[u32]| -> Vec<ProcessInfo> {
                pids.iter()
                    .map(|&pid| verifier.process(pid).clone())
                    .collect()
            };
            let (contenders, watchers) =
                (processes(&locks.waiters), processes(&locks.shared_waiters));
            let verdict = member_verdict(&holders, locks.waiters);
            MemberReport {
                kind: key.kind(),
                name: key.name().to_string(),
                busy: busy || !held_unlinked.is_empty(),
                holders,
                verdict,
                contenders,
                watchers,
                held_unlinked,
                refused: None,
            }
        })
        .collect();
    let report = CheckReport {
        free: members.iter().all(|member| !member.busy),
        members,
        waits: None,
    };
    (report, index)
}

/// The holders of `key`'s unlinked files among what
/// [`unlinked::find`] found.
fn unlinked_holders(found: &[ScanProblem], key: &LockKey) -> Vec<UnlinkedHolder> {
    found
        .iter()
        .filter_map(|problem| match &problem.kind {
            ScanProblemKind::HeldUnlinked(held)
                if held.kind == key.kind() && held.name == key.name() =>
            {
                Some(UnlinkedHolder {
                    process: ProcessInfo::of(held.pid),
                    file: held.file,
                    path: problem.path.clone(),
                })
            }
            _ => None,
        })
        .collect()
}

/// The verdict on a busy member held by `holders` (exclusive first) with
/// `waiters` (contenders) queued on it, its holder's role read from the
/// other keys it holds.
fn member_verdict(holders: &[HolderReport], waiters: Vec<u32>) -> Option<Verdict> {
    let exclusive: Vec<&HolderReport> = holders.iter().filter(|h| !h.shared).collect();
    let state = KeyState {
        holders: exclusive.iter().map(|h| h.process.clone()).collect(),
        waiters,
        since: exclusive.first().and_then(|h| h.since),
        ..KeyState::bare(Liveness::Live)
    };
    let role = |pid| {
        let holder = exclusive.iter().find(|h| h.process.pid == pid);
        holder.map_or(Role::Other, |holder| holder.role.clone())
    };
    judge(&state, role, SystemTime::now(), MATERIALIZING_AFTER)
}

/// The other keys `holder` holds, by kind and name: those its fdinfo
/// shows it holding (whoever called `flock()` — a keeper too), or, where
/// that may not be read, those `/proc/locks` names it for. None for a
/// gone taker: it holds nothing now.
fn also_holds(
    verifier: &mut HolderVerifier,
    held: &[HeldKey],
    holder: &ProcessInfo,
    key: &LockKey,
) -> Vec<(KeyKind, String)> {
    if !holder.alive {
        return Vec::new();
    }
    held.iter()
        .filter(|other| other.key != *key)
        .filter(
            |other| match verifier.hold(holder.pid, &other.files, other.key.held_since()) {
                Hold::Verified => true,
                Hold::Unverified => other.named.contains(&holder.pid),
                _ => false,
            },
        )
        .map(|other| (other.key.kind(), other.key.name().to_string()))
        .collect()
}

/// A claim of the tree that `/proc/locks` lists as held.
pub struct HeldKey {
    /// The claim.
    pub key: LockKey,
    /// Its gate and announce, as `/proc/locks` identifies them.
    pub files: Vec<FileId>,
    /// The PIDs `/proc/locks` names as its holders (callers of `flock()`).
    pub named: Vec<u32>,
}

/// Every claim of `report` (a scan) that `index` lists as exclusively
/// held, sorted.
pub fn held_keys(report: &ScanReport, index: &LockIndex) -> Vec<HeldKey> {
    let mut held: Vec<HeldKey> = report
        .keys
        .iter()
        .filter_map(|key| {
            let files = claim_files(key);
            let named = index.union(files.iter().copied()).holders;
            (!named.is_empty()).then(|| HeldKey {
                key: key.clone(),
                files,
                named,
            })
        })
        .collect();
    held.sort_by(|a, b| a.key.cmp(&b.key));
    held
}
