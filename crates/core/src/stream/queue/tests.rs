//! The coalescing queue against its invariant: folds keep the first
//! `from` and the latest state and count what they absorbed, removals
//! come out before re-creations, the size stays bounded, and a reader
//! applying the lines in order ends on the truth.

use std::collections::HashMap;
use std::path::Path;
use std::time::{Duration, SystemTime};

use proptest::prelude::*;

use super::*;

impl Queue {
    fn new() -> Self {
        Self::default()
    }

    /// Lines pending.
    fn len(&self) -> usize {
        self.order.len()
    }

    /// Keys with at least one pending line.
    fn keys(&self) -> usize {
        self.keys.len()
    }
}

fn key(i: usize) -> LockKey {
    LockKey::from_coord(
        Path::new("/state"),
        Path::new("/state/locks/agents/tags"),
        &format!("k{i}"),
    )
}

fn at(n: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(n)
}

fn to(liveness: Liveness, pids: &[u32]) -> KeyTo {
    KeyTo::State {
        liveness,
        pids: pids.to_vec(),
        error: None,
        holders_note: None,
        refused: None,
    }
}

fn key_line(k: usize, from: Option<Liveness>, to: KeyTo, t: u64, folded: u64) -> Line {
    Line {
        report: Report::Key {
            key: key(k),
            from,
            to,
        },
        at: at(t),
        folded,
    }
}

fn drain(queue: &mut Queue) -> Vec<Line> {
    std::iter::from_fn(|| queue.pop()).collect()
}

#[test]
fn a_key_that_changes_while_pending_becomes_one_line_with_the_first_from() {
    let mut queue = Queue::new();
    queue.push_key(key(0), Some(Liveness::Free), to(Liveness::Live, &[]), at(1));
    queue.push_key(
        key(0),
        Some(Liveness::Live),
        to(Liveness::Live, &[7]),
        at(2),
    );
    queue.push_key(key(0), Some(Liveness::Live), to(Liveness::Free, &[]), at(3));
    queue.push_key(
        key(0),
        Some(Liveness::Free),
        to(Liveness::Live, &[8]),
        at(4),
    );
    assert_eq!(queue.len(), 1);
    let expected = key_line(0, Some(Liveness::Free), to(Liveness::Live, &[8]), 4, 3);
    assert_eq!(drain(&mut queue), vec![expected]);
    assert_eq!(queue.keys(), 0);
}

#[test]
fn a_written_line_is_never_folded_into() {
    let mut queue = Queue::new();
    queue.push_key(key(0), None, to(Liveness::Live, &[7]), at(1));
    let first = queue.pop().expect("a line");
    assert_eq!(first.folded, 0);
    queue.push_key(key(0), Some(Liveness::Live), to(Liveness::Free, &[]), at(2));
    let expected = key_line(0, Some(Liveness::Live), to(Liveness::Free, &[]), 2, 0);
    assert_eq!(drain(&mut queue), vec![expected]);
}

#[test]
fn lines_come_out_in_the_order_of_their_latest_transition() {
    let mut queue = Queue::new();
    queue.push_key(key(0), None, to(Liveness::Live, &[]), at(1));
    queue.push_key(key(1), None, to(Liveness::Live, &[]), at(2));
    queue.push_health(WatcherHealth::Watching, at(3));
    queue.push_key(key(0), Some(Liveness::Live), to(Liveness::Free, &[]), at(4));
    let lines = drain(&mut queue);
    let ats: Vec<SystemTime> = lines.iter().map(|l| l.at).collect();
    assert_eq!(ats, vec![at(2), at(3), at(4)]);
    assert_eq!(lines[2], key_line(0, None, to(Liveness::Free, &[]), 4, 1));
}

#[test]
fn a_key_removed_and_recreated_comes_out_removed_then_new() {
    let mut queue = Queue::new();
    queue.push_key(key(0), Some(Liveness::Live), to(Liveness::Free, &[]), at(1));
    queue.push_key(key(0), Some(Liveness::Free), KeyTo::Removed, at(2));
    queue.push_key(key(0), None, to(Liveness::Live, &[]), at(3));
    queue.push_key(
        key(0),
        Some(Liveness::Live),
        to(Liveness::Live, &[9]),
        at(4),
    );
    assert_eq!(queue.len(), 2);
    assert_eq!(
        drain(&mut queue),
        vec![
            key_line(0, Some(Liveness::Live), KeyTo::Removed, 2, 1),
            key_line(0, None, to(Liveness::Live, &[9]), 4, 1),
        ]
    );
}

#[test]
fn another_removal_folds_the_recreation_into_the_removed_line() {
    let mut queue = Queue::new();
    queue.push_key(key(0), Some(Liveness::Free), KeyTo::Removed, at(1));
    queue.push_key(key(0), None, to(Liveness::Live, &[]), at(2));
    queue.push_key(key(0), Some(Liveness::Live), to(Liveness::Free, &[]), at(3));
    queue.push_key(key(0), Some(Liveness::Free), KeyTo::Removed, at(4));
    let expected = key_line(0, Some(Liveness::Free), KeyTo::Removed, 4, 3);
    assert_eq!(drain(&mut queue), vec![expected]);
}

#[test]
fn a_key_that_appears_and_vanishes_while_pending_leaves_no_line() {
    let mut queue = Queue::new();
    queue.push_key(key(0), None, to(Liveness::Live, &[]), at(1));
    queue.push_key(key(0), Some(Liveness::Live), to(Liveness::Free, &[]), at(2));
    queue.push_key(key(0), Some(Liveness::Free), KeyTo::Removed, at(3));
    assert!(queue.is_empty());
    assert_eq!(queue.keys(), 0);
}

#[test]
fn health_lines_wait_unfolded_up_to_the_cap_then_the_newest_absorbs() {
    let mut queue = Queue::new();
    let extra = 5;
    for n in 0..(MAX_PENDING_HEALTH + extra) {
        let reason = format!("r{n}");
        queue.push_health(WatcherHealth::Rescanning { reason }, at(n as u64));
    }
    assert_eq!(queue.len(), MAX_PENDING_HEALTH);
    let lines = drain(&mut queue);
    let folded: Vec<u64> = lines.iter().map(|l| l.folded).collect();
    let mut expected = vec![0; MAX_PENDING_HEALTH - 1];
    expected.push(extra as u64);
    assert_eq!(folded, expected);
    let last = MAX_PENDING_HEALTH + extra - 1;
    assert_eq!(
        lines.last().map(|l| &l.report),
        Some(&Report::Health(WatcherHealth::Rescanning {
            reason: format!("r{last}")
        }))
    );
    // Once written, the cap is free again.
    queue.push_health(WatcherHealth::Watching, at(100));
    assert_eq!(queue.pop().map(|l| l.folded), Some(0));
}

#[test]
fn only_the_latest_synced_count_waits() {
    let mut queue = Queue::new();
    queue.push_synced(3, at(1));
    queue.push_key(key(0), None, to(Liveness::Live, &[]), at(2));
    queue.push_synced(4, at(3));
    let lines = drain(&mut queue);
    assert_eq!(lines.len(), 2);
    assert_eq!(lines[1].report, Report::Synced { keys: 4 });
    assert_eq!(lines[1].folded, 1);
}

const KEYS: usize = 4;

#[derive(Debug, Clone)]
enum Op {
    /// The engine probes key `.0`: liveness `.1`, holder `.2` if held.
    Set(usize, Liveness, u32),
    Remove(usize),
    Health(u8),
    /// The writer takes up to this many lines.
    Pop(usize),
}

fn op() -> impl Strategy<Value = Op> {
    let liveness = prop::sample::select(vec![Liveness::Live, Liveness::Free, Liveness::InFlight]);
    prop_oneof![
        6 => (0..KEYS, liveness, 1..3u32).prop_map(|(k, l, p)| Op::Set(k, l, p)),
        1 => (0..KEYS).prop_map(Op::Remove),
        1 => (0..3u8).prop_map(Op::Health),
        3 => (0..4usize).prop_map(Op::Pop),
    ]
}

/// What a reader of the lines believes; checks each line as it applies it.
#[derive(Default)]
struct Reader {
    keys: HashMap<LockKey, KeyTo>,
    last_at: Option<SystemTime>,
    transitions: u64,
    health: Option<WatcherHealth>,
    health_transitions: u64,
}

impl Reader {
    fn apply(&mut self, line: Line) {
        assert!(self.last_at < Some(line.at), "out of order: {line:?}");
        self.last_at = Some(line.at);
        match line.report {
            Report::Key { key, from, to } => {
                let before = self.keys.get(&key).map(|to| match to {
                    KeyTo::State { liveness, .. } => *liveness,
                    KeyTo::Removed => unreachable!("removed keys are not kept"),
                });
                assert_eq!(from, before, "from of {key:?} is what the reader last saw");
                self.transitions += line.folded + 1;
                match to {
                    KeyTo::Removed => self.keys.remove(&key),
                    to => self.keys.insert(key, to),
                };
            }
            Report::Health(health) => {
                self.health_transitions += line.folded + 1;
                self.health = Some(health);
            }
            Report::Synced { .. } | Report::Verdict { .. } => {}
        }
    }
}

#[test]
fn verdict_lines_fold_per_key_and_one_that_ends_where_it_began_at_none_is_dropped() {
    use crate::operate::verdict::Verdict;
    let mut queue = Queue::new();
    let stopped = Some(Verdict::Stopped { pid: 7 });
    queue.push_key(
        key(1),
        Some(Liveness::Free),
        to(Liveness::Live, &[7]),
        at(1),
    );
    queue.push_verdict(
        key(1),
        None,
        Some(Verdict::Idle {
            pid: 7,
            since: at(0),
        }),
        at(1),
    );
    queue.push_verdict(key(1), Some("idle"), stopped.clone(), at(2));
    queue.push_verdict(key(2), None, stopped.clone(), at(3));
    queue.push_verdict(key(2), Some("stopped"), None, at(4));
    assert_eq!(queue.len(), 2, "one line per key, key 2's dropped");
    assert!(matches!(queue.pop().unwrap().report, Report::Key { .. }));
    let line = queue.pop().unwrap();
    assert_eq!(
        line.report,
        Report::Verdict {
            key: key(1),
            from: None,
            to: stopped,
        }
    );
    assert_eq!((line.at, line.folded), (at(2), 1));
    assert!(queue.is_empty());
}

proptest! {
    #[test]
    fn a_reader_of_the_lines_ends_on_the_truth_with_bounded_memory(
        ops in prop::collection::vec(op(), 0..200)
    ) {
        let mut queue = Queue::new();
        let mut reader = Reader::default();
        let mut truth: HashMap<LockKey, KeyTo> = HashMap::new();
        let (mut pushed, mut health_pushed, mut removals) = (0u64, 0u64, 0usize);
        let mut last_health = None;
        for (n, op) in ops.into_iter().enumerate() {
            let now = at(n as u64);
            match op {
                Op::Set(k, liveness, pid) => {
                    let pids = if liveness.is_held() { vec![pid] } else { vec![] };
                    let state = to(liveness, &pids);
                    let before = truth.get(&key(k)).cloned();
                    if before.as_ref() == Some(&state) {
                        continue; // the engine sends only differences
                    }
                    let from = before.map(|to| match to {
                        KeyTo::State { liveness, .. } => liveness,
                        KeyTo::Removed => unreachable!(),
                    });
                    truth.insert(key(k), state.clone());
                    queue.push_key(key(k), from, state, now);
                    pushed += 1;
                }
                Op::Remove(k) => {
                    let Some(KeyTo::State { liveness, .. }) = truth.remove(&key(k)) else {
                        continue;
                    };
                    queue.push_key(key(k), Some(liveness), KeyTo::Removed, now);
                    pushed += 1;
                    removals += 1;
                }
                Op::Health(h) => {
                    let health = WatcherHealth::Rescanning { reason: h.to_string() };
                    last_health = Some(health.clone());
                    queue.push_health(health, now);
                    health_pushed += 1;
                }
                Op::Pop(count) => {
                    for line in std::iter::from_fn(|| queue.pop()).take(count) {
                        reader.apply(line);
                    }
                }
            }
            prop_assert!(queue.keys() <= KEYS);
            prop_assert!(queue.len() <= 2 * KEYS + MAX_PENDING_HEALTH);
        }
        for line in drain(&mut queue) {
            reader.apply(line);
        }
        prop_assert_eq!(&reader.keys, &truth);
        prop_assert_eq!(reader.health, last_health);
        prop_assert_eq!(reader.health_transitions, health_pushed);
        // Folds are counted; only a key that came and went unseen drops
        // its transitions.
        prop_assert!(reader.transitions <= pushed);
        if removals == 0 {
            prop_assert_eq!(reader.transitions, pushed);
        }
        prop_assert_eq!(queue.keys(), 0);
    }
}
