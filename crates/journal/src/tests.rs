//! A journal written and read back: at any time, the state read equals
//! the fold of every change recorded up to that time — across many
//! checkpoints, rotated files, a torn last line and two recordings.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use crate::disk::key::LockKey;
use crate::engine::fixtures::{STATE, free, held, instance, key_delta, tag};
use crate::engine::fold::Fold;
use crate::engine::{Delta, KeyState, Liveness, WatcherHealth};
use crate::liveness::probe::ProbeMode;

use super::reader::JournalSet;
use super::writer::{Journal, Output, Recording};

/// A script of changes from `base` on: keys taken, released, removed,
/// some at the same millisecond.
pub(crate) fn script(base: SystemTime, changes: usize, seed: u64) -> Vec<Delta> {
    let mut rng = fastrand::Rng::with_seed(seed);
    let keys: Vec<LockKey> = (0..40)
        .map(|i| tag(&format!("tag {i}")))
        .chain((0..20).map(|i| instance(&format!("team/agent-{i}"))))
        .collect();
    let mut at = base;
    (0..changes)
        .map(|_| {
            at += Duration::from_millis(rng.u64(0..3) * 7);
            let key = keys[rng.usize(..keys.len())].clone();
            match rng.u8(0..10) {
                0 => Delta::Removed {
                    key,
                    previous: Liveness::Free,
                    at,
                },
                1 => key_delta(key, KeyState::bare(Liveness::InFlight), None, at),
                2..=5 => {
                    let mut state =
                        held(Liveness::Live, rng.u32(100..200), "agent --x 'y z'", base);
                    // Tries refused on it (the kernel's lock events): in
                    // the change lines and the checkpoints alike.
                    if rng.bool() {
                        let count = rng.u64(1..500);
                        state.refused = Some(crate::liveness::state::RefusedTries {
                            last_minute: count,
                            by: vec![crate::liveness::state::RefusedBy {
                                pid: rng.u32(300..400),
                                count,
                                last: None,
                            }],
                        });
                    }
                    key_delta(key, state, Some(Liveness::Free), at)
                }
                _ => key_delta(key, free(), Some(Liveness::Live), at),
            }
        })
        .collect()
}

/// The first state (before the first `Synced`).
pub(crate) fn initial() -> Vec<Delta> {
    let base = whole_ms(SystemTime::now());
    vec![
        Delta::Health(WatcherHealth::Watching),
        key_delta(tag("tag 0"), free(), None, base),
        key_delta(
            instance("team/agent-0"),
            held(Liveness::Live, 7, "agent", base),
            None,
            base,
        ),
        Delta::Synced { keys: 2, at: base },
    ]
}

fn recording() -> Recording {
    Recording {
        state_dir: PathBuf::from(STATE),
        probe: ProbeMode::LockFree,
    }
}

/// The first state and a script of `changes` (from `seed`), recorded
/// into `j.jsonl` of a new temp dir (rotated at `max_size`, `keep`
/// files), checkpointing every `every` bytes.
fn recorded(
    changes: usize,
    seed: u64,
    max_size: Option<u64>,
    keep: usize,
    every: u64,
) -> (tempfile::TempDir, PathBuf, Vec<Delta>) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("j.jsonl");
    let mut deltas = initial();
    deltas.extend(script(base(), changes, seed));
    record(
        Output::File {
            path: path.clone(),
            max_size,
            keep,
        },
        &deltas,
        every,
    );
    (dir, path, deltas)
}

/// Records `deltas` into `output`, checkpointing every `every` bytes.
fn record(output: Output, deltas: &[Delta], every: u64) {
    let mut journal = Journal::create(output, recording())
        .unwrap()
        .with_checkpoint_every(every);
    for delta in deltas {
        journal.record(delta.clone()).unwrap();
    }
}

/// What the fold of every delta up to `time` holds.
fn expected(deltas: &[Delta], time: SystemTime) -> BTreeMap<LockKey, KeyState> {
    let mut fold = Fold::default();
    for delta in deltas {
        let at = match delta {
            Delta::Key { at, .. } | Delta::Removed { at, .. } => Some(*at),
            _ => None,
        };
        if at.is_some_and(|at| at > time) {
            break;
        }
        fold.apply(delta.clone());
    }
    fold.keys()
        .iter()
        .map(|(key, state)| (key.clone(), state.clone()))
        .collect()
}

fn read_at(set: &JournalSet, time: SystemTime) -> BTreeMap<LockKey, KeyState> {
    set.state_at(time)
        .unwrap()
        .state
        .keys()
        .iter()
        .map(|(key, state)| (key.clone(), state.clone()))
        .collect()
}

/// When every script starts: 2100-01-01, after any recording's start
/// (its header's time is now), and the same in every run. A journal of
/// one script is then the same lines every run but its header (its
/// time, and so its checksum's digits): the lines a damage test's harms
/// hit, and where a rotated set is cut (but for a line that ends within
/// a few bytes of the size), stay put, and a failing case replays from
/// its seed.
fn base() -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(4_102_444_800)
}

fn whole_ms(time: SystemTime) -> SystemTime {
    let millis = time
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    SystemTime::UNIX_EPOCH + Duration::from_millis(millis)
}

/// Every time the script has, and one between each two.
fn times(deltas: &[Delta]) -> Vec<SystemTime> {
    let mut times: Vec<SystemTime> = deltas
        .iter()
        .filter_map(|delta| match delta {
            Delta::Key { at, .. } | Delta::Removed { at, .. } => Some(*at),
            _ => None,
        })
        .flat_map(|at| [at, at + Duration::from_millis(3)])
        .collect();
    times.dedup();
    times
}

/// The journal files in `dir` (not the recording's lock).
fn files_in(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| !path.file_name().unwrap().to_string_lossy().starts_with('.'))
        .collect();
    files.sort();
    files
}

#[test]
fn the_state_at_any_time_is_the_fold_of_the_changes_up_to_it() {
    // A checkpoint every ~8 KiB: dozens of them to bisect between.
    let (_dir, path, deltas) = recorded(3_000, 1, None, 1, 8 << 10);
    let text = std::fs::read_to_string(&path).unwrap();
    let checkpoints = text
        .lines()
        .filter(|l| l.starts_with("{\"checkpoint\":"))
        .count();
    assert!(checkpoints > 20, "{checkpoints} checkpoints");
    let set = JournalSet::open(std::slice::from_ref(&path)).unwrap();
    let start = set.start();
    for (n, time) in times(&deltas).into_iter().enumerate() {
        if time >= start && n % 7 == 0 {
            assert_eq!(read_at(&set, time), expected(&deltas, time), "at {time:?}");
        }
    }
    assert!(set.take_warnings().is_empty());
    // Before the first checkpoint: an error, not an empty state.
    assert!(set.state_at(set.start() - Duration::from_secs(1)).is_err());
}

#[test]
fn a_rotated_set_keeps_whole_files_and_replays_what_they_hold() {
    let (dir, _, deltas) = recorded(3_000, 2, Some(64 << 10), 4, 8 << 10);
    let files = files_in(dir.path());
    assert_eq!(files.len(), 4, "{files:?}");
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        let mut lines = text.lines();
        assert!(lines.next().unwrap().starts_with("{\"journal\":"));
        assert!(lines.next().unwrap().starts_with("{\"checkpoint\":"));
    }
    // Given in any order, read in time order; the oldest kept file's
    // start is where the replay can start.
    let mut given = files.clone();
    given.reverse();
    let set = JournalSet::open(&given).unwrap();
    assert_eq!(set.files().len(), 4);
    let start = set.start();
    for (n, time) in times(&deltas).into_iter().enumerate() {
        if time >= start && n % 5 == 0 {
            assert_eq!(read_at(&set, time), expected(&deltas, time), "at {time:?}");
        }
    }
    // A directory reads as its files.
    let by_dir = JournalSet::open(&[dir.path().to_path_buf()]).unwrap();
    assert_eq!(by_dir.files().len(), 4);
}

#[test]
fn a_torn_last_line_is_skipped_with_a_warning() {
    let (_dir, path, deltas) = recorded(200, 3, None, 1, 1 << 20);
    let text = std::fs::read(&path).unwrap();
    // Cut the last line in half.
    let last_start = text[..text.len() - 1]
        .iter()
        .rposition(|b| *b == b'\n')
        .unwrap()
        + 1;
    let cut = last_start + (text.len() - last_start) / 2;
    std::fs::write(&path, &text[..cut]).unwrap();
    let set = JournalSet::open(std::slice::from_ref(&path)).unwrap();
    let end = set.end().unwrap();
    let all_but_last = &deltas[..deltas.len() - 1];
    let after = *times(&deltas).last().unwrap() + Duration::from_secs(1);
    assert_eq!(read_at(&set, after), expected(all_but_last, after));
    let warnings = set.take_warnings();
    assert!(
        warnings.len() == 1 && warnings[0].contains("torn last line"),
        "{warnings:?}"
    );
    assert!(end <= after);
}

#[test]
fn a_second_recording_replaces_the_state_with_its_checkpoint() {
    let dir = tempfile::tempdir().unwrap();
    let first = dir.path().join("a.jsonl");
    let second = dir.path().join("b.jsonl");
    record(
        Output::File {
            path: first.clone(),
            max_size: None,
            keep: 1,
        },
        &initial(),
        1 << 20,
    );
    std::thread::sleep(Duration::from_millis(20));
    // Meanwhile agent-0 ended and a tag was taken.
    let base = whole_ms(SystemTime::now());
    let later = vec![
        key_delta(tag("tag 0"), free(), None, base),
        key_delta(instance("team/agent-0"), free(), None, base),
        key_delta(
            tag("tag 9"),
            held(Liveness::Live, 9, "agent 9", base),
            None,
            base,
        ),
        Delta::Synced { keys: 2, at: base },
    ];
    record(
        Output::File {
            path: second.clone(),
            max_size: None,
            keep: 1,
        },
        &later,
        1 << 20,
    );
    let set = JournalSet::open(&[second, first]).unwrap();
    // Between the first recording's end (20 ms before `base`) and the
    // second's first checkpoint (`base`).
    let gap_time = base - Duration::from_millis(10);
    assert!(set.gap_at(gap_time).unwrap().is_some());
    assert!(set.gap_at(base).unwrap().is_none());
    // Read across the boundary: the second checkpoint's differences
    // arrive as changes.
    let start = set.state_at(set.start()).unwrap();
    let mut state = start.state.clone();
    let mut lines = set.lines_from(start.next).unwrap();
    let mut changed = Vec::new();
    while let Some(entry) = lines.next_entry(&state).unwrap() {
        if let super::format::Entry::Change { delta, .. } = entry {
            if let Delta::Key { key, .. } | Delta::Removed { key, .. } = &delta {
                changed.push(key.name().to_string());
            }
            state.apply(delta);
        }
    }
    changed.sort();
    assert_eq!(changed, ["tag 9", "team/agent-0"]);
    let end = read_at(&set, SystemTime::now());
    assert_eq!(end.len(), 3);
    assert_eq!(
        end[&tag("tag 9")].holders.first().map(|holder| holder.pid),
        Some(9)
    );
}

#[test]
fn a_recording_of_past_times_keeps_them() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("j.jsonl");
    let past = whole_ms(SystemTime::now() - Duration::from_secs(3 * 86_400));
    let mut deltas = vec![
        key_delta(tag("tag 0"), free(), None, past),
        Delta::Synced { keys: 1, at: past },
    ];
    deltas.extend(script(past + Duration::from_secs(1), 2_000, 4));
    record(
        Output::File {
            path: path.clone(),
            max_size: None,
            keep: 1,
        },
        &deltas,
        8 << 10,
    );
    let set = JournalSet::open(std::slice::from_ref(&path)).unwrap();
    assert_eq!(set.start(), past);
    for (n, time) in times(&deltas).into_iter().enumerate() {
        if n % 11 == 0 {
            assert_eq!(read_at(&set, time), expected(&deltas, time), "at {time:?}");
        }
    }
    // Every line's time is its change's: the file says three days ago.
    let text = std::fs::read_to_string(&path).unwrap();
    let last = text.lines().last().unwrap();
    assert!(
        !last.contains(&crate::time_format::rfc3339(SystemTime::now())[..10]),
        "{last}"
    );
}

#[test]
fn the_previous_change_is_found_across_checkpoints() {
    let (_dir, path, deltas) = recorded(1_500, 5, None, 1, 8 << 10);
    let set = JournalSet::open(std::slice::from_ref(&path)).unwrap();
    let start = set.start();
    let changes: Vec<SystemTime> = deltas
        .iter()
        .filter_map(|delta| match delta {
            Delta::Key { at, .. } | Delta::Removed { at, .. } => Some(*at),
            _ => None,
        })
        .collect();
    for (n, time) in times(&deltas).into_iter().enumerate() {
        if time <= start || n % 3 != 0 {
            continue;
        }
        let expected = changes.iter().copied().filter(|at| *at < time).max();
        // What the first checkpoint states is the recording's start, not
        // a change.
        let expected = expected.filter(|at| *at > start);
        let found = set.previous_change(time).unwrap();
        assert_eq!(found, expected, "before {time:?}");
    }
}

#[test]
fn two_recordings_made_at_once_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let first = dir.path().join("a.jsonl");
    let second = dir.path().join("b.jsonl");
    let base = base();
    let mut long = initial();
    long.extend(script(base, 200, 6));
    let mut overlapping = initial();
    overlapping.extend(script(base, 50, 7));
    for (path, deltas) in [(&first, &long), (&second, &overlapping)] {
        record(
            Output::File {
                path: path.clone(),
                max_size: None,
                keep: 1,
            },
            deltas,
            1 << 20,
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    let error = JournalSet::open(&[first, second]).unwrap_err().to_string();
    assert!(error.contains("overlap in time"), "{error}");
}

/// The recorder's clock in [`a_clean_stop_ends_the_recording_when_it_stopped`]:
/// it stops long after its last change.
fn stopped_late() -> SystemTime {
    crate::engine::fixtures::t(100)
}

/// Reported from the field: a recording stopped cleanly (SIGINT) ended,
/// for `replay`, at its last change — seconds early. Its end line says
/// when it stopped; one without (a crash) still ends at its last line,
/// and that line's millisecond is not known whole (past the end, or in
/// the gap before the next recording).
#[test]
fn a_clean_stop_ends_the_recording_when_it_stopped() {
    use crate::engine::fixtures::t;
    let dir = tempfile::tempdir().unwrap();
    let deltas = [
        key_delta(tag("x"), free(), None, t(0)),
        Delta::Synced { keys: 1, at: t(0) },
        key_delta(
            tag("x"),
            held(Liveness::Live, 7, "agent", t(10)),
            None,
            t(10),
        ),
        key_delta(tag("x"), free(), Some(Liveness::Live), t(30)),
    ];
    let write = |name: &str, stop: bool| {
        let path = dir.path().join(name);
        let mut journal = Journal::create(
            Output::File {
                path: path.clone(),
                max_size: None,
                keep: 1,
            },
            recording(),
        )
        .unwrap()
        .with_clock(stopped_late);
        for delta in &deltas {
            journal.record(delta.clone()).unwrap();
        }
        if stop {
            journal.finish().unwrap();
        }
        path
    };
    let stopped = write("stopped.jsonl", true);
    let crashed = write("crashed.jsonl", false);
    let text = std::fs::read_to_string(&stopped).unwrap();
    let last = text.lines().last().unwrap();
    assert!(
        last.starts_with(r#"{"end":{"time":"2023-11-14T22:15:00.000Z"},"n":6,"crc":"#),
        "{last}"
    );
    let set = JournalSet::open(std::slice::from_ref(&stopped)).unwrap();
    assert_eq!(set.end().unwrap(), t(100));
    // Read through to the end: the end line is a line the reader knows.
    let mut lines = set.lines_from(set.at_start().unwrap().next).unwrap();
    let mut last_time = None;
    while let Some(entry) = lines.next_entry(&Fold::default()).unwrap() {
        last_time = super::reader::entry_time(&entry);
    }
    assert_eq!(last_time, Some(t(100)));
    assert_eq!(read_at(&set, t(100)), read_at(&set, t(30)));
    assert!(set.take_warnings().is_empty(), "{:?}", set.take_warnings());
    let set = JournalSet::open(std::slice::from_ref(&stopped)).unwrap();
    assert!(!set.past_end(t(100)).unwrap());
    assert!(set.past_end(t(100) + Duration::from_millis(1)).unwrap());
    let set = JournalSet::open(std::slice::from_ref(&crashed)).unwrap();
    assert_eq!(set.end().unwrap(), t(30));
    // Its last millisecond may have had lines after the last one kept.
    assert!(set.past_end(t(30)).unwrap());
    assert!(!set.past_end(t(30) - Duration::from_millis(1)).unwrap());
    // So, when another recording follows, that millisecond is in the
    // gap before it; after a clean stop, the gap starts after it.
    for (first, last, ends) in [(&crashed, t(30), "crashed"), (&stopped, t(100), "stopped")] {
        std::thread::sleep(Duration::from_millis(5));
        let next = dir.path().join(format!("after-{ends}.jsonl"));
        let mut journal = Journal::create(
            Output::File {
                path: next.clone(),
                max_size: None,
                keep: 1,
            },
            recording(),
        )
        .unwrap()
        .with_clock(|| t(200));
        for delta in [
            key_delta(tag("x"), free(), None, t(200)),
            Delta::Synced {
                keys: 1,
                at: t(200),
            },
        ] {
            journal.record(delta).unwrap();
        }
        let set = JournalSet::open(&[first.clone(), next]).unwrap();
        assert_ne!(
            set.files()[0].header.recording_started,
            set.files()[1].header.recording_started
        );
        let gap = set.gap_at(last).unwrap();
        assert_eq!(gap.is_some(), ends == "crashed", "{ends}: {gap:?}");
        assert!(
            set.gap_at(last + Duration::from_millis(1))
                .unwrap()
                .is_some()
        );
        assert!(set.gap_at(t(200)).unwrap().is_none());
        let within = set.gaps_within(last - Duration::from_secs(1), last);
        assert_eq!(within.len(), usize::from(ends == "crashed"), "{ends}");
    }
}

mod damage;
