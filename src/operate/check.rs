//! "Why is this stuck?": who holds each member of a family, since when,
//! and what else those processes hold.
//!
//! Invariants: `/proc/locks` is read once per report; the family check
//! takes the members all-or-nothing and releases them at once (or, with
//! `passive`, only probes them and never writes).

use std::collections::HashMap;
use std::path::Path;
use std::time::SystemTime;

use crate::context::Context;
use crate::disk::scan;
use crate::disk::{KeyKind, LockKey};
use crate::liveness::proc_locks::{FileId, LockIndex};
use crate::liveness::process::ProcessInfo;
use crate::liveness::verify::{HolderVerifier, claim_files};
use crate::locks::{self, Busy, Family, LocksError};

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
            let holders = verified_holders(&mut verifier, &index, &key);
            BusyMember {
                kind: key.kind,
                name: key.name,
                holders: holders
                    .into_iter()
                    .map(|pid| verifier.process(pid).clone())
                    .collect(),
            }
        })
        .collect()
}

/// The verified holders of `key` among the PIDs `/proc/locks` names.
fn verified_holders(verifier: &mut HolderVerifier, index: &LockIndex, key: &LockKey) -> Vec<u32> {
    let files = claim_files(key);
    let candidates = index.union(files.iter().copied()).holders;
    verifier.holders(candidates, &files, key.held_since())
}

impl BusyMember {
    /// `tag "x"`.
    pub fn label(&self) -> String {
        crate::disk::key::label(self.kind, &self.name)
    }
}

/// `busy: tag "x" held by pid 12 (cmd)` — one line per busy member.
pub fn busy_line(member: &BusyMember) -> String {
    let holders: Vec<String> = member
        .holders
        .iter()
        .map(|p| format!("pid {} ({})", p.pid, p.command()))
        .collect();
    let by = if holders.is_empty() {
        "held (holder not visible in /proc/locks: this process, or it just left)".to_string()
    } else {
        format!("held by {}", holders.join(", "))
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
}

/// The outcome of a family check.
#[derive(Debug, Clone, serde::Serialize)]
pub struct CheckReport {
    /// True when the whole family could be taken at the time of the check.
    pub free: bool,
    /// Per member, in family order (duplicates collapsed).
    pub members: Vec<MemberReport>,
}

/// Tries `family` all-or-nothing and releases at once (or, if `passive`,
/// probes each member with the SDK's shared-lock probe), then explains
/// every busy member.
pub async fn check_family(
    context: &Context,
    family: &Family,
    passive: bool,
) -> Result<CheckReport, LocksError> {
    let coords = locks::family_coords(context.state_dir(), family)?;
    // Only probed, never taken: a family reached through a symlink (the
    // acquire would write wherever it points), and one with a member that
    // has no lock files yet (nobody can hold it; taking it would leave new,
    // never-deleted files behind — a typo must not create a stale key).
    let passive = passive
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
    let busy: Busy = if passive {
        let unique = locks::dedup_coords(&coords);
        let mut busy = Vec::new();
        for (index, (dir, key)) in unique.iter().enumerate() {
            if locks::is_taken(context.agent_locks(), dir, key, locks::IN_FLIGHT_AFTER).await {
                busy.push(index);
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
    let report = explain(context.state_dir(), &busy);
    Ok(report)
}

/// Builds the report for an attempt: one `/proc/locks` read, one scan of
/// the tree (only if something is busy) to find what else holders hold.
fn explain(state_dir: &Path, attempt: &Busy) -> CheckReport {
    let index = if attempt.busy.is_empty() {
        LockIndex::default()
    } else {
        LockIndex::read().unwrap_or_default()
    };
    let held_by = if attempt.busy.is_empty() {
        HashMap::new()
    } else {
        keys_by_holder(state_dir, &index)
    };
    let mut verifier = HolderVerifier::default();
    let members = attempt
        .coords
        .iter()
        .enumerate()
        .map(|(i, (dir, key))| {
            let key = LockKey::from_coord(state_dir, dir, key);
            let busy = attempt.busy.contains(&i);
            let holders = if busy {
                let since = key.held_since();
                verified_holders(&mut verifier, &index, &key)
                    .into_iter()
                    .map(|pid| {
                        let others = held_by.get(&pid).into_iter().flatten();
                        let also_holds = others
                            .filter(|other| **other != key)
                            .filter(|other| {
                                let files = claim_files(other);
                                verifier.holds(pid, &files, other.held_since()) != Some(false)
                            })
                            .map(LockKey::label)
                            .collect();
                        HolderReport {
                            process: verifier.process(pid).clone(),
                            since,
                            also_holds,
                        }
                    })
                    .collect()
            } else {
                Vec::new()
            };
            MemberReport {
                kind: key.kind,
                name: key.name,
                busy,
                holders,
            }
        })
        .collect();
    CheckReport {
        free: attempt.busy.is_empty(),
        members,
    }
}

/// Every claim on disk grouped by the PIDs holding its gate.
pub fn keys_by_holder(state_dir: &Path, index: &LockIndex) -> HashMap<u32, Vec<LockKey>> {
    let mut by_pid: HashMap<u32, Vec<LockKey>> = HashMap::new();
    let Ok(report) = scan::scan(state_dir) else {
        return by_pid;
    };
    for key in report.keys {
        let Ok(id) = FileId::of(&key.gate_path()) else {
            continue;
        };
        if let Some(locks) = index.get(&id) {
            for pid in &locks.holders {
                by_pid.entry(*pid).or_default().push(key.clone());
            }
        }
    }
    for keys in by_pid.values_mut() {
        keys.sort();
    }
    by_pid
}

/// Human lines for a report (the `check` command and the TUI dialog).
pub fn report_lines(report: &CheckReport, now: SystemTime) -> Vec<String> {
    let mut lines = vec![if report.free {
        "free: the whole family could be taken now".to_string()
    } else {
        "busy: the family cannot be taken now".to_string()
    }];
    for member in &report.members {
        let label = crate::disk::key::label(member.kind, &member.name);
        if !member.busy {
            lines.push(format!("  free  {label}"));
            continue;
        }
        if member.holders.is_empty() {
            lines.push(format!(
                "  busy  {label} (holder not visible: in this process, or it just left)"
            ));
        }
        for holder in &member.holders {
            let held_for = holder.since.map_or_else(
                || "for an unknown time".to_string(),
                |since| format!("for {}", crate::time_format::age(since, now)),
            );
            lines.push(format!(
                "  busy  {label} held by pid {} {} — {}",
                holder.process.pid,
                held_for,
                holder.process.command()
            ));
            if !holder.also_holds.is_empty() {
                lines.push(format!(
                    "        pid {} also holds: {}",
                    holder.process.pid,
                    holder.also_holds.join(", ")
                ));
            }
        }
    }
    lines
}
