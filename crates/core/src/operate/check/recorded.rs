//! A family check answered from recorded states (a replay's state at its
//! cursor) instead of the live locks: the same [`CheckReport`], built
//! from what the recording says each key's state was.
//!
//! Invariants: nothing is read from the filesystem or `/proc` (the host
//! may be another, the processes long gone); a member is busy exactly
//! when its recorded state is held; a holder's other keys are the held
//! keys the recording names it for; contenders and watchers are named by
//! PID only (the recording keeps no more of them).

use std::path::Path;
use std::time::SystemTime;

use crate::disk::{LockKey, ScanProblem, ScanProblemKind};
use crate::liveness::process::ProcessInfo;
use crate::liveness::{KeyState, Liveness};
use crate::locks::{self, Family, LocksError};
use crate::operate::held::HeldView;
use crate::operate::wait_for::WaitGraph;

use super::{CheckReport, HolderReport, MemberReport, UnlinkedHolder};

/// The check of `family` against `held` (every held key with its
/// recorded state) and the recorded scan `problems`, as at `now`, spawns
/// judged with the recorder's `materializing` threshold; a cycle of waits
/// that `waits` (the replayed view's graph) already had stands since it
/// did there.
pub fn report_from_states<'a>(
    state_dir: &Path,
    family: &Family,
    held: impl Iterator<Item = (&'a LockKey, &'a KeyState)>,
    problems: &[ScanProblem],
    now: SystemTime,
    materializing: std::time::Duration,
    waits: &WaitGraph,
) -> Result<CheckReport, LocksError> {
    let coords = locks::family_coords(state_dir, family)?;
    let unique = locks::dedup_coords(&coords);
    let view = HeldView::of(held, materializing).looked_at(now, Some(waits));
    let members: Vec<MemberReport> = unique
        .iter()
        .map(|(dir, key)| {
            let key = LockKey::from_coord(state_dir, dir, key);
            let state = view.held_state(&key);
            let held_unlinked = unlinked(problems, &key);
            let Some(state) = state else {
                return MemberReport {
                    kind: key.kind(),
                    name: key.name().to_string(),
                    busy: !held_unlinked.is_empty(),
                    holders: Vec::new(),
                    verdict: None,
                    contenders: Vec::new(),
                    watchers: Vec::new(),
                    held_unlinked,
                    refused: None,
                };
            };
            let shared = state.liveness == Liveness::Shared;
            let holders = state
                .holders
                .iter()
                .map(|process| HolderReport {
                    process: process.clone(),
                    since: if shared || !process.alive {
                        None
                    } else {
                        state.since
                    },
                    also_holds: view
                        .keys_of(process.pid)
                        .filter(|other| (other.kind(), other.name()) != (key.kind(), key.name()))
                        .map(LockKey::label)
                        .collect(),
                    role: view.role_of(process.pid),
                    shared,
                })
                .collect();
            MemberReport {
                kind: key.kind(),
                name: key.name().to_string(),
                busy: true,
                holders,
                verdict: view.judge(&key, state, now),
                contenders: state.waiters.iter().map(|&pid| by_pid(pid)).collect(),
                watchers: state.watchers.iter().map(|&pid| by_pid(pid)).collect(),
                held_unlinked,
                refused: state.refused.clone(),
            }
        })
        .collect();
    Ok(CheckReport {
        free: members.iter().all(|member| !member.busy),
        members,
        waits: (!view.waits().is_empty()).then(|| view.waits().doc(now)),
    })
}

/// A process the recording names by PID only.
fn by_pid(pid: u32) -> ProcessInfo {
    ProcessInfo::unread(pid)
}

/// The recorded holders of `key`'s unlinked files.
fn unlinked(problems: &[ScanProblem], key: &LockKey) -> Vec<UnlinkedHolder> {
    problems
        .iter()
        .filter_map(|problem| match &problem.kind {
            ScanProblemKind::HeldUnlinked(held)
                if held.kind == key.kind() && held.name == key.name() =>
            {
                Some(UnlinkedHolder {
                    process: ProcessInfo {
                        cmdline: held.cmdline.clone(),
                        ..by_pid(held.pid)
                    },
                    file: held.file,
                    path: problem.path.clone(),
                })
            }
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::fixtures::{STATE, held, instance, t, tag};
    use crate::operate::verdict::MATERIALIZING_AFTER;

    #[test]
    fn a_recorded_holder_is_named_with_what_else_it_held() {
        let state = held(Liveness::Live, 7, "agent", t(0));
        let keys = [
            (instance("a/b"), state.clone()),
            (tag("research: v2.1"), state),
        ];
        let family = Family::Group(vec!["research: v2.1".into(), "other".into()]);
        let report = report_from_states(
            Path::new(STATE),
            &family,
            keys.iter().map(|(key, state)| (key, state)),
            &[],
            t(60),
            MATERIALIZING_AFTER,
            &WaitGraph::default(),
        )
        .unwrap();
        assert!(!report.free);
        let busy = &report.members[0];
        assert!(busy.busy && busy.holders[0].process.pid == 7);
        assert_eq!(busy.holders[0].also_holds, [r#"instance "a/b""#]);
        assert_eq!(
            busy.verdict.as_ref().map(|v| v.kind()),
            Some("agent_active")
        );
        assert!(!report.members[1].busy);
    }
}
