//! The precedence of verdicts (the module doc's list), one fact at a time
//! and several at once.

use std::time::Duration;

use super::*;
use crate::engine::fixtures::{held, t};
use crate::liveness::Liveness;
use crate::liveness::process::ProcState;

const SPAWN_LIMIT: Duration = Duration::from_secs(30);

fn agent(_: u32) -> Role {
    Role::Agent {
        aih: "cli/daemon/a".into(),
    }
}

fn spawn(_: u32) -> Role {
    Role::Materializing
}

fn held_by_7() -> KeyState {
    held(Liveness::Live, 7, "agent", t(0))
}

#[test]
fn an_agent_nobody_waits_on_is_agent_active() {
    let verdict = judge(&held_by_7(), agent, t(60), SPAWN_LIMIT);
    assert_eq!(
        verdict,
        Some(Verdict::AgentActive {
            pid: 7,
            aih: "cli/daemon/a".into(),
            since: Some(t(0)),
        })
    );
}

#[test]
fn contenders_make_it_contended_and_keep_the_agent_and_its_age() {
    let mut state = held_by_7();
    state.waiters = vec![9, 10];
    state.watchers = vec![11];
    let verdict = judge(&state, agent, t(60), SPAWN_LIMIT).unwrap();
    assert_eq!(
        verdict,
        Verdict::Contended {
            pid: Some(7),
            aih: Some("cli/daemon/a".into()),
            since: Some(t(0)),
            waiters: vec![9, 10],
        }
    );
    assert!(
        !verdict.is_suspect(),
        "waiting for a working agent is normal"
    );
    let text = verdict.describe(t(60));
    assert!(text.contains("pid 9, 10 waits"), "{text}");
    assert!(text.contains("cli/daemon/a (pid 7), held 1m"), "{text}");
}

#[test]
fn watchers_alone_do_not_contend() {
    let mut state = held_by_7();
    state.watchers = vec![11];
    let verdict = judge(&state, agent, t(60), SPAWN_LIMIT);
    assert!(matches!(verdict, Some(Verdict::AgentActive { .. })));
}

#[test]
fn a_spawn_within_its_limit_is_materializing_unless_contended() {
    let mut state = held_by_7();
    assert_eq!(
        judge(&state, spawn, t(10), SPAWN_LIMIT),
        Some(Verdict::Materializing {
            pid: 7,
            since: Some(t(0))
        })
    );
    // A holder of no agent's lock at all: held, by whom.
    assert_eq!(
        judge(&state, |_| Role::Other, t(10), SPAWN_LIMIT),
        Some(Verdict::Held {
            pid: 7,
            since: Some(t(0))
        })
    );
    state.waiters = vec![9];
    let verdict = judge(&state, spawn, t(10), SPAWN_LIMIT);
    assert!(
        matches!(
            verdict,
            Some(Verdict::Contended {
                pid: Some(7),
                aih: None,
                ..
            })
        ),
        "{verdict:?}"
    );
}

#[test]
fn idle_outranks_contended_and_needs_every_live_holder_idle() {
    let mut state = held_by_7();
    state.waiters = vec![9];
    state.holders[0].idle_since = Some(t(5));
    let verdict = judge(&state, agent, t(700), SPAWN_LIMIT).unwrap();
    assert_eq!(
        verdict,
        Verdict::Idle {
            pid: 7,
            since: t(5)
        }
    );
    assert!(verdict.is_suspect());
    assert!(verdict.describe(t(700)).contains("a guess"));
    // A second (shared) holder that runs: the key is not idle.
    let mut busy = state.holders[0].clone();
    busy.pid = 8;
    busy.idle_since = None;
    state.holders.push(busy);
    assert!(matches!(
        judge(&state, agent, t(700), SPAWN_LIMIT),
        Some(Verdict::Contended { .. })
    ));
}

#[test]
fn stopped_outranks_everything_then_materializing_outranks_idle() {
    let mut state = held_by_7();
    state.waiters = vec![9];
    state.holders[0].idle_since = Some(t(5));
    let late = t(700);
    assert!(matches!(
        judge(&state, spawn, late, SPAWN_LIMIT),
        Some(Verdict::MaterializingTooLong { pid: 7, .. })
    ));
    state.holders[0].state = Some(ProcState::Stopped);
    assert_eq!(
        judge(&state, spawn, late, SPAWN_LIMIT),
        Some(Verdict::Stopped { pid: 7 })
    );
}

#[test]
fn a_held_key_nobody_can_name_is_contended_only_when_someone_waits() {
    let mut state = KeyState::bare(Liveness::Live);
    assert_eq!(judge(&state, agent, t(0), SPAWN_LIMIT), None);
    state.waiters = vec![9];
    let verdict = judge(&state, agent, t(0), SPAWN_LIMIT).unwrap();
    assert!(
        verdict
            .describe(t(0))
            .contains("a holder locktop cannot name")
    );
    assert_eq!(
        serde_json::to_string(&verdict).unwrap(),
        r#"{"kind":"contended","pid":null,"aih":null,"since":null,"waiters":[9]}"#
    );
}

#[test]
fn every_kind_is_spelled_as_json_spells_it() {
    for verdict in super::one_of_each() {
        let json = serde_json::to_value(&verdict).unwrap();
        assert_eq!(json["kind"], verdict.kind());
    }
}

/// A lock kept by a forked child after its taker died: the holders list
/// the keeper first (alive), then the gone taker — as annotation lists
/// them. The verdict names both; without a visible keeper, only the
/// taker.
#[test]
fn a_lock_kept_after_its_taker_died_is_an_orphaned_child_named_by_its_keeper() {
    let mut state = held(Liveness::Live, 50, "sh -c 'flock …'", t(0));
    let mut gone = crate::engine::fixtures::process(40, "agent");
    gone.alive = false;
    state.holders.push(gone);
    assert_eq!(
        judge(&state, agent, t(60), SPAWN_LIMIT),
        Some(Verdict::OrphanedChild {
            pid: Some(50),
            taken_by: 40
        })
    );
    state.holders.remove(0);
    assert_eq!(
        judge(&state, agent, t(60), SPAWN_LIMIT),
        Some(Verdict::OrphanedChild {
            pid: None,
            taken_by: 40
        })
    );
}

#[test]
fn every_verdicts_kind_is_one_of_the_kinds() {
    // one_of_each fails to compile when a kind is added without it.
    let every = one_of_each();
    let mut kinds: Vec<&str> = every.iter().map(Verdict::kind).collect();
    let mut known = Verdict::KINDS.to_vec();
    kinds.sort_unstable();
    known.sort_unstable();
    assert_eq!(kinds, known, "Verdict::KINDS lists every kind, once");
}
