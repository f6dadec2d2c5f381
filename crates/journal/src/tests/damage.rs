//! Journals damaged as a disk, a careless copy or a second writer would:
//! the state read at any time either equals the undamaged journal's, or
//! the reader says why it cannot tell — never a third thing.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use proptest::prelude::*;

use super::{expected, files_in, read_at, recorded, times};
use crate::reader::{GapWhy, JournalSet};
use crate::writer::{Journal, Output};

/// The journal's lines, each with its newline.
fn lines_of(path: &Path) -> Vec<Vec<u8>> {
    let bytes = std::fs::read(path).unwrap();
    bytes
        .split_inclusive(|byte| *byte == b'\n')
        .map(<[u8]>::to_vec)
        .collect()
}

fn write_lines(path: &Path, lines: &[Vec<u8>]) {
    std::fs::write(path, lines.concat()).unwrap();
}

/// A change line's copy stamped `by` later (negative: earlier), its
/// number and checksum made right again: a line a careless writer could
/// have written, which only its time betrays.
fn restamped(line: &[u8], by: i64) -> Option<Vec<u8>> {
    let mut value: serde_json::Value = serde_json::from_slice(line).ok()?;
    let object = value.as_object_mut()?;
    let n = object.remove("n")?.as_u64()?;
    object.remove("crc");
    let time = humantime::parse_rfc3339(object.get("time")?.as_str()?).ok()?;
    let moved = if by >= 0 {
        time + Duration::from_millis(by as u64)
    } else {
        time.checked_sub(Duration::from_millis(by.unsigned_abs()))?
    };
    object.insert(
        "time".into(),
        crate::time_format::rfc3339(moved).to_string().into(),
    );
    let mut out = serde_json::to_vec(&value).ok()?;
    out.push(b'\n');
    crate::format::number_line(&mut out, n);
    Some(out)
}

#[derive(Debug, Clone)]
enum Harm {
    Drop(usize),
    Repeat(usize, usize),
    Move(usize, usize),
    Flip(usize, usize, u8),
    Restamp(usize, i64),
}

fn harm() -> impl Strategy<Value = Harm> {
    prop_oneof![
        any::<usize>().prop_map(Harm::Drop),
        (any::<usize>(), any::<usize>()).prop_map(|(a, b)| Harm::Repeat(a, b)),
        (any::<usize>(), any::<usize>()).prop_map(|(a, b)| Harm::Move(a, b)),
        (any::<usize>(), any::<usize>(), any::<u8>()).prop_map(|(a, b, c)| Harm::Flip(a, b, c)),
        (
            any::<usize>(),
            // Further than the whole script spans (a few seconds): a
            // shift that stays between its neighbours' times is a
            // different, consistent history no reader can tell from
            // the true one.
            prop_oneof![-3_600_000i64..-60_000, 60_000i64..3_600_000]
        )
            .prop_map(|(a, by)| Harm::Restamp(a, by)),
    ]
}

/// Applies `harm` to the lines after the header.
fn apply(lines: &mut Vec<Vec<u8>>, harm: &Harm) {
    let pick = |i: usize, lines: &Vec<Vec<u8>>| 1 + i % (lines.len() - 1);
    match *harm {
        Harm::Drop(i) => {
            let i = pick(i, lines);
            lines.remove(i);
        }
        Harm::Repeat(i, j) => {
            let (i, j) = (pick(i, lines), pick(j, lines));
            let line = lines[i].clone();
            lines.insert(j, line);
        }
        Harm::Move(i, j) => {
            let i = pick(i, lines);
            let line = lines.remove(i);
            let j = pick(j, lines);
            lines.insert(j, line);
        }
        Harm::Flip(i, at, byte) => {
            let i = pick(i, lines);
            let line = &mut lines[i];
            // Not the newline: a flipped newline is two torn lines, a
            // case of its own below.
            let at = at % (line.len() - 1);
            line[at] = if line[at] == byte { byte ^ 1 } else { byte };
            if line[at] == b'\n' {
                line[at] = b' ';
            }
        }
        Harm::Restamp(i, by) => {
            let mut i = pick(i, lines);
            // The last line stamped later than it was is what no reader
            // can tell (nothing follows it to disagree): not modelled.
            if by > 0 && i == lines.len() - 1 {
                i -= 1;
            }
            if let Some(line) = restamped(&lines[i], by) {
                lines[i] = line;
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 40, ..ProptestConfig::default() })]

    #[test]
    fn a_damaged_journal_answers_right_or_says_why_not(
        seed in 0u64..1_000,
        harms in proptest::collection::vec(harm(), 1..4),
    ) {
        let (_dir, path, deltas) = recorded(300, seed, None, 1, 2 << 10);
        let mut lines = lines_of(&path);
        for harm in &harms {
            apply(&mut lines, harm);
        }
        write_lines(&path, &lines);
        if let Some(wrong) = a_false_answer(&path, &deltas, 4) {
            prop_assert!(false, "after {:?}: {}", harms, wrong);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 20, ..ProptestConfig::default() })]

    /// The same over a rotated set (about 15 parts): one part damaged,
    /// every answer across the set checked — a reader going from part to
    /// part must carry what it found.
    #[test]
    fn a_damaged_part_of_a_rotated_set_answers_right_or_says_why_not(
        seed in 0u64..1_000,
        part in any::<usize>(),
        harms in proptest::collection::vec(harm(), 1..4),
    ) {
        let (dir, _, deltas) = recorded(600, seed, Some(24 << 10), 20, 6 << 10);
        let files = parts_in_order(dir.path());
        let file = &files[part % files.len()];
        let mut lines = lines_of(file);
        for harm in &harms {
            apply(&mut lines, harm);
        }
        write_lines(file, &lines);
        if let Some(wrong) = a_false_answer_in(&files, &deltas, 4) {
            prop_assert!(false, "{} after {:?}: {}", file.display(), harms, wrong);
        }
    }
}

/// The first answer of the journal at `path` that is neither right nor
/// said to be unsure (every `step`-th time of the script), with the
/// reader's warnings; `None` when every answer is right or said.
fn a_false_answer(path: &Path, deltas: &[crate::engine::Delta], step: usize) -> Option<String> {
    a_false_answer_in(&[path.to_path_buf()], deltas, step)
}

/// [`a_false_answer`] of the set of journal files `paths`.
fn a_false_answer_in(
    paths: &[PathBuf],
    deltas: &[crate::engine::Delta],
    step: usize,
) -> Option<String> {
    let Ok(set) = JournalSet::open(paths) else {
        // Refused, with a line: said.
        return None;
    };
    for time in times(deltas).into_iter().step_by(step) {
        let Ok(replayed) = set.state_at(time) else {
            continue;
        };
        // Said by every face: unsure, in a gap, or past the end (a
        // file cut short ends where it ends, its last millisecond
        // included, and `--at` says so).
        let past_end = set.past_end(time).unwrap();
        if replayed.doubt.is_some() || set.gap_at(time).unwrap().is_some() || past_end {
            continue;
        }
        let read: std::collections::BTreeMap<_, _> = replayed
            .state
            .keys()
            .iter()
            .map(|(key, state)| (key.clone(), state.clone()))
            .collect();
        let want = expected(deltas, time);
        if read != want {
            let wrong: Vec<_> = want
                .keys()
                .chain(read.keys())
                .filter(|key| want.get(*key) != read.get(*key))
                .map(|key| key.name())
                .collect();
            return Some(format!(
                "at {time:?} keys {wrong:?} are wrong, unsaid; warnings {:?}",
                set.take_warnings()
            ));
        }
    }
    None
}

/// The journal files of a rotated recording in `dir`, in part order:
/// FILE.1 the oldest, FILE the current one.
fn parts_in_order(dir: &Path) -> Vec<PathBuf> {
    let mut files = files_in(dir);
    files.sort_by_key(|path| {
        path.extension()
            .and_then(|ext| ext.to_str()?.parse::<u64>().ok())
            .unwrap_or(u64::MAX)
    });
    files
}

/// The indexes of the lines starting with `prefix`.
fn lines_starting(lines: &[Vec<u8>], prefix: &[u8]) -> Vec<usize> {
    (0..lines.len())
        .filter(|i| lines[*i].starts_with(prefix))
        .collect()
}

#[test]
fn a_checkpoint_without_its_end_then_a_change_copied_from_ahead_is_said() {
    // Found by the property above on a CI machine: a checkpoint's end
    // lost, and a copy of a line from far ahead in its place. The copy
    // was taken as 107 lines missing — inside the checkpoint, so not
    // doubted — and every line after it as a repeat: 107 changes lost,
    // unsaid.
    let (_dir, path, deltas) = recorded(300, 58, None, 1, 2 << 10);
    let mut lines = lines_of(&path);
    let end = lines_starting(&lines, b"{\"checkpoint_end\":")[1];
    let ahead = lines_starting(&lines, b"{\"time\":")
        .into_iter()
        .find(|i| *i > end + 100)
        .unwrap();
    lines[end] = lines[ahead].clone();
    write_lines(&path, &lines);
    assert_eq!(a_false_answer(&path, &deltas, 1), None);
    let set = JournalSet::open(std::slice::from_ref(&path)).unwrap();
    for time in times(&deltas)
        .into_iter()
        .filter(|time| *time >= set.start())
    {
        set.state_at(time).unwrap();
    }
    let warnings = set.take_warnings().join("\n");
    assert!(warnings.contains("(moved)"), "{warnings}");
    assert!(!warnings.contains("again after"), "{warnings}");
}

#[test]
fn damage_before_a_checkpoint_is_doubt_until_that_checkpoint_not_before_it() {
    // Found by the property above on CI: damage a few lines before a
    // checkpoint, the last line before it skipped too (stamped an hour
    // back), and the state asked for between the damage and the
    // checkpoint. Reading on to the checkpoint (the first line past the
    // time asked for) made the state sure again — and the answer for the
    // earlier time, which lacks the damaged change, was given as sure.
    let (_dir, path, deltas) = recorded(300, 512, None, 1, 2 << 10);
    let original = lines_of(&path);
    let heads = lines_starting(&original, b"{\"checkpoint\":");
    let changes = lines_starting(&original, b"{\"time\":");
    let mut tried = 0;
    for head in heads.iter().skip(1).take(8) {
        let before: Vec<usize> = changes
            .iter()
            .rev()
            .filter(|i| *i < head)
            .take(4)
            .copied()
            .collect();
        let [last, _, _, damaged] = before[..] else {
            continue;
        };
        let mut lines = original.clone();
        // Unreadable (its checksum no longer matches).
        lines[damaged][12] ^= 1;
        lines[last] = restamped(&lines[last], -3_600_000).unwrap();
        write_lines(&path, &lines);
        assert_eq!(
            a_false_answer(&path, &deltas, 1),
            None,
            "line {damaged} unreadable, line {last} stamped back"
        );
        tried += 1;
    }
    assert!(tried >= 4, "the journal has checkpoints to try");
}

#[test]
fn a_checkpoint_without_its_end_then_damage_is_doubt_not_nothing() {
    // The end lost and the change after it unreadable, or lost too: a
    // reader that still thinks it is inside the checkpoint would call
    // the damage harmless.
    let (_dir, path, deltas) = recorded(300, 59, None, 1, 2 << 10);
    let original = lines_of(&path);
    let end = lines_starting(&original, b"{\"checkpoint_end\":")[1];
    for harm in ["flip", "drop"] {
        let mut lines = original.clone();
        match harm {
            "flip" => lines[end + 1][12] ^= 1,
            _ => drop(lines.remove(end + 1)),
        }
        lines.remove(end);
        write_lines(&path, &lines);
        assert_eq!(a_false_answer(&path, &deltas, 1), None, "{harm}");
        let set = JournalSet::open(std::slice::from_ref(&path)).unwrap();
        let doubted = times(&deltas)
            .into_iter()
            .filter(|time| *time >= set.start())
            .any(|time| set.state_at(time).unwrap().doubt.is_some());
        assert!(doubted, "{harm}: the damage is never said");
    }
}

/// The recorded journal with line `i` (counted from 0, the header)
/// replaced by `line`, and the set opened on it.
fn with_line(path: &Path, i: usize, line: Vec<u8>) -> JournalSet {
    let mut lines = lines_of(path);
    lines[i] = line;
    write_lines(path, &lines);
    JournalSet::open(&[path.to_path_buf()]).unwrap()
}

/// The index of the first change line after the first checkpoint whose
/// time is at least `skip` changes in.
fn change_line(path: &Path, skip: usize) -> usize {
    lines_of(path)
        .iter()
        .enumerate()
        .filter(|(_, line)| line.starts_with(b"{\"time\":"))
        .nth(skip)
        .unwrap()
        .0
}

#[test]
fn a_line_stamped_far_ahead_is_skipped_and_time_goes_on() {
    let (_dir, path, deltas) = recorded(300, 11, None, 1, 1 << 20);
    let i = change_line(&path, 100);
    let line = restamped(&lines_of(&path)[i], 45 * 60 * 1000).unwrap();
    let set = with_line(&path, i, line);
    let all = times(&deltas);
    // Every time after the damaged line: the state is unsure (the one
    // checkpoint is before it), never frozen at the line's state.
    let after: Vec<_> = all.iter().rev().take(20).collect();
    for time in after {
        let replayed = set.state_at(*time).unwrap();
        assert!(replayed.doubt.is_some(), "at {time:?}");
    }
    // Before it: right, and sure.
    for time in all.iter().take(40) {
        if *time >= set.start() {
            assert_eq!(read_at(&set, *time), expected(&deltas, *time));
        }
    }
    let warnings = set.take_warnings().join("\n");
    assert!(warnings.contains("after the line after it"), "{warnings}");
}

#[test]
fn a_line_repeated_later_or_stamped_back_is_skipped_and_said() {
    let (_dir, path, deltas) = recorded(300, 12, None, 1, 1 << 20);
    let lines = lines_of(&path);
    let i = change_line(&path, 50);
    // The same line again 150 changes later: the numbers say it.
    let mut repeated = lines.clone();
    repeated.insert(change_line(&path, 200), lines[i].clone());
    write_lines(&path, &repeated);
    let set = JournalSet::open(std::slice::from_ref(&path)).unwrap();
    for time in times(&deltas).into_iter().filter(|t| *t >= set.start()) {
        let replayed = set.state_at(time).unwrap();
        // A repeat whole changes nothing: sure, and right.
        assert!(replayed.doubt.is_none());
        assert_eq!(read_at(&set, time), expected(&deltas, time));
    }
    assert!(set.take_warnings().join("\n").contains("again after line"));
    // A line stamped an hour back, its number and checksum right.
    write_lines(&path, &lines);
    let line = restamped(&lines[i], -3_600_000).unwrap();
    let set = with_line(&path, i, line);
    let last = *times(&deltas).last().unwrap();
    assert!(set.state_at(last).unwrap().doubt.is_some());
    assert!(
        set.take_warnings()
            .join("\n")
            .contains("before the line before it")
    );
}

#[test]
fn a_checkpoint_missing_a_key_line_is_not_used_and_the_one_before_is() {
    // Many checkpoints, so that the one before exists.
    let (_dir, path, deltas) = recorded(1_500, 13, None, 1, 4 << 10);
    let lines = lines_of(&path);
    let heads: Vec<usize> = (0..lines.len())
        .filter(|i| lines[*i].starts_with(b"{\"checkpoint\":"))
        .collect();
    assert!(heads.len() > 4);
    // A key line of the fourth checkpoint goes.
    let head = heads[3];
    let key_line = (head..lines.len())
        .find(|i| lines[*i].starts_with(b"{\"ck\":"))
        .unwrap();
    let mut damaged = lines.clone();
    damaged.remove(key_line);
    write_lines(&path, &damaged);
    let set = JournalSet::open(std::slice::from_ref(&path)).unwrap();
    for time in times(&deltas).into_iter().filter(|t| *t >= set.start()) {
        let replayed = set.state_at(time).unwrap();
        assert!(replayed.doubt.is_none());
        assert_eq!(read_at(&set, time), expected(&deltas, time), "at {time:?}");
    }
    let warnings = set.take_warnings().join("\n");
    assert!(warnings.contains("is not whole"), "{warnings}");
}

#[test]
fn a_missing_part_is_said_missing_and_its_time_is_not_answered() {
    let (dir, _, deltas) = recorded(1_200, 14, Some(24 << 10), 20, 6 << 10);
    let files = parts_in_order(dir.path());
    assert!(files.len() >= 5, "{files:?}");
    // Each middle part deleted in turn.
    for gone in 1..files.len() - 1 {
        let given: Vec<PathBuf> = files
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != gone)
            .map(|(_, path)| path.clone())
            .collect();
        let set = JournalSet::open(&given).unwrap();
        let mut said = 0;
        let all = times(&deltas);
        // Every time around the gap, and every 7th elsewhere.
        let gap = all.iter().find_map(|time| set.gap_at(*time).unwrap());
        let near = |time: &SystemTime| {
            gap.as_ref().is_some_and(|gap| {
                *time + Duration::from_millis(50) >= gap.from
                    && *time <= gap.to + Duration::from_millis(50)
            })
        };
        let sampled = all
            .iter()
            .enumerate()
            .filter(|(n, time)| **time >= set.start() && (n % 7 == 0 || near(time)))
            .map(|(_, time)| *time);
        for time in sampled {
            match set.gap_at(time).unwrap() {
                Some(gap) => {
                    assert!(matches!(gap.why, GapWhy::Missing(_)), "{gap:?}");
                    said += 1;
                }
                None => {
                    let replayed = set.state_at(time).unwrap();
                    assert!(replayed.doubt.is_none());
                    assert_eq!(read_at(&set, time), expected(&deltas, time));
                }
            }
        }
        assert!(said > 0, "part {gone}: no time in its gap");
        // Reading across: said, and the state after it is right.
        let start = set.at_start().unwrap();
        let mut state = start.state.clone();
        let mut lines = set.lines_from(start.next).unwrap();
        while let Some(entry) = lines.next_entry(&state).unwrap() {
            if let crate::format::Entry::Change { delta, .. } = entry {
                state.apply(delta);
            }
        }
        assert!(
            set.take_warnings()
                .iter()
                .any(|warning| warning.contains("is missing")),
        );
    }
}

#[test]
fn two_copies_of_one_part_are_refused_and_one_file_twice_is_read_once() {
    let (dir, path, _) = recorded(200, 15, None, 1, 1 << 20);
    let copy = dir.path().join("copy.jsonl");
    std::fs::copy(&path, &copy).unwrap();
    let error = JournalSet::open(&[path.clone(), copy]).unwrap_err();
    assert!(error.to_string().contains("are both part 0"), "{error}");
    let link = dir.path().join("link.jsonl");
    std::fs::hard_link(&path, &link).unwrap();
    let set = JournalSet::open(&[path, link]).unwrap();
    assert_eq!(set.files().len(), 1);
}

#[test]
fn a_second_recording_into_one_file_is_refused_while_the_first_lives() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("j.jsonl");
    let output = || Output::File {
        path: path.clone(),
        max_size: Some(1 << 20),
        keep: 5,
    };
    let first = Journal::create(output(), super::recording()).unwrap();
    let Err(error) = Journal::create(output(), super::recording()) else {
        panic!("a second writer was let in");
    };
    assert!(error.to_string().contains("another locktop"), "{error}");
    drop(first);
    // Once the first is gone, a new recording may start (rotating).
    assert!(Journal::create(output(), super::recording()).is_ok());
}

#[test]
fn every_line_carries_its_number_and_a_checksum() {
    let (_dir, path, _) = recorded(100, 16, None, 1, 1 << 20);
    for (i, line) in lines_of(&path).iter().enumerate() {
        let line = line.strip_suffix(b"\n").unwrap();
        assert_eq!(
            crate::format::check_line(line),
            crate::format::LineCheck::Good(i as u64)
        );
    }
}

#[test]
fn a_line_inside_a_checkpoint_or_appended_last_is_skipped_and_said() {
    let (_dir, path, deltas) = recorded(1_500, 17, None, 1, 4 << 10);
    let lines = lines_of(&path);
    let heads: Vec<usize> = (0..lines.len())
        .filter(|i| lines[*i].starts_with(b"{\"checkpoint\":"))
        .collect();
    assert!(heads.len() > 4);
    // Inside a checkpoint: a later change line moved between its key
    // lines. Its neighbours tell it moved (the checkpoint stays whole);
    // its own place shows a line missing; every answer is right or
    // unsure.
    let inside = (heads[2]..lines.len())
        .find(|i| lines[*i].starts_with(b"{\"ck\":"))
        .unwrap();
    let later = change_line(&path, 900);
    let mut damaged = lines.clone();
    let moved = damaged.remove(later);
    damaged.insert(inside + 1, moved);
    write_lines(&path, &damaged);
    let set = JournalSet::open(std::slice::from_ref(&path)).unwrap();
    let mut sure = 0;
    for (n, time) in times(&deltas).into_iter().enumerate() {
        if time < set.start() || n % 3 != 0 {
            continue;
        }
        let replayed = set.state_at(time).unwrap();
        if replayed.doubt.is_none() {
            sure += 1;
            assert_eq!(read_at(&set, time), expected(&deltas, time), "at {time:?}");
        }
    }
    assert!(sure > 100, "{sure} sure answers");
    let warnings = set.take_warnings().join("\n");
    assert!(warnings.contains("(moved)"), "{warnings}");
    assert!(warnings.contains("missing"), "{warnings}");
    // Last: an early change line appended again (re-inserted later, as
    // it was): skipped, said, nothing changed.
    let mut appended = lines.clone();
    appended.push(lines[change_line(&path, 10)].clone());
    write_lines(&path, &appended);
    let set = JournalSet::open(std::slice::from_ref(&path)).unwrap();
    let last = *times(&deltas).last().unwrap();
    let replayed = set.state_at(last + Duration::from_secs(1)).unwrap();
    assert!(replayed.doubt.is_none());
    assert_eq!(
        read_at(&set, last + Duration::from_secs(1)),
        expected(&deltas, last + Duration::from_secs(1))
    );
    assert!(set.take_warnings().join("\n").contains("again after line"));
}

#[test]
fn a_line_restamped_later_before_a_moved_line_is_said() {
    // Found by the property above on this machine (seed 279): a line
    // moved from far back to just after a line stamped 48 minutes later
    // than it was. The restamped line was judged by the moved one after
    // it — itself out of order, so no evidence — and taken: the key it
    // changed read wrong at its true time, with no doubt said. The moved
    // line is skipped by its number; the line after it is the evidence.
    let (_dir, path, deltas) = recorded(300, 279, None, 1, 2 << 10);
    let mut lines = lines_of(&path);
    let pick = |i: usize, len: usize| 1 + i % (len - 1);
    let line = lines.remove(pick(701_773, lines.len()));
    let to = pick(10_388_313_594_257_418_804, lines.len());
    lines.insert(to, line);
    lines[to - 1] = restamped(&lines[to - 1], 2_923_498).expect("a change line");
    write_lines(&path, &lines);
    assert_eq!(a_false_answer(&path, &deltas, 1), None);
}

/// The time a change line is stamped with.
fn time_of(line: &[u8]) -> SystemTime {
    let value: serde_json::Value = serde_json::from_slice(line).unwrap();
    humantime::parse_rfc3339(value["time"].as_str().unwrap()).unwrap()
}

#[test]
fn a_file_cut_inside_its_last_millisecond_is_past_its_end_at_that_millisecond() {
    // Found by the property above on CI (seed 665): the last line lost,
    // the one before it stamped with the same millisecond. The state at
    // that millisecond was answered as sure — and the lost change, a tag
    // taken then, was not in it.
    let (_dir, path, deltas) = recorded(300, 665, None, 1, 2 << 10);
    let mut lines = lines_of(&path);
    let lost = lines.pop().unwrap();
    let kept = lines.last().unwrap();
    assert_eq!(
        time_of(&lost),
        time_of(kept),
        "two changes in one millisecond"
    );
    write_lines(&path, &lines);
    assert_eq!(a_false_answer(&path, &deltas, 1), None);
    let set = JournalSet::open(std::slice::from_ref(&path)).unwrap();
    assert!(!set.stopped_cleanly());
    let end = set.end().unwrap();
    assert_eq!(end, time_of(kept));
    assert!(set.past_end(end).unwrap(), "its last millisecond");
    assert!(!set.past_end(end - Duration::from_millis(1)).unwrap());
}

#[test]
fn a_line_stamped_late_before_one_stamped_early_makes_the_state_unsure() {
    // Found by the property above, run longer on this machine (seed
    // 104): one line stamped a minute late, the line after it a minute
    // early. The line after is before both it and the line before, so
    // it was no evidence, and the late line was taken as sure: the state
    // at its true time, asked before its stamp, lacked its change and
    // said no doubt. Which of the two is wrong nothing here tells: the
    // late one is taken, the state unsure from it.
    let (_dir, path, deltas) = recorded(300, 104, None, 1, 2 << 10);
    let mut lines = lines_of(&path);
    let changes = lines_starting(&lines, b"{\"time\":");
    let (late, early) = (changes[40], changes[40] + 1);
    assert!(
        lines[early].starts_with(b"{\"time\":"),
        "two change lines in a row"
    );
    let true_time = time_of(&lines[late]);
    lines[late] = restamped(&lines[late], 60_000).unwrap();
    lines[early] = restamped(&lines[early], -60_002).unwrap();
    said_unsure_at(&path, &lines, &deltas, true_time, "the late line");
}

#[test]
fn a_run_of_lines_stamped_late_together_makes_the_state_unsure() {
    // Found by the property above, run longer on this machine (seed
    // 537): the first two changes after a checkpoint stamped 17 and 42
    // minutes late. Each agreed with the line after it, so the first
    // was taken as sure, and the state at its true time (before its
    // stamp) lacked its change, unsaid. The line after the run, stamped
    // before it, is now seen while the run's first line is judged.
    for run in 2..=3 {
        let (_dir, path, deltas) = recorded(300, 537, None, 1, 2 << 10);
        let mut lines = lines_of(&path);
        let changes = lines_starting(&lines, b"{\"time\":");
        let first = changes[60];
        assert_eq!(
            changes[60 + run],
            first + run,
            "{run} change lines in a row"
        );
        let true_time = time_of(&lines[first]);
        for (i, line) in lines[first..first + run].iter_mut().enumerate() {
            *line = restamped(line, 1_000_000 + 1_000_000 * i as i64).unwrap();
        }
        said_unsure_at(
            &path,
            &lines,
            &deltas,
            true_time,
            &format!("a run of {run}"),
        );
    }
}

/// Writes `lines` as the journal at `path`, then checks that it gives no
/// false answer and says the state at `time` (`what`'s true time) unsure.
fn said_unsure_at(
    path: &Path,
    lines: &[Vec<u8>],
    deltas: &[crate::engine::Delta],
    time: SystemTime,
    what: &str,
) {
    write_lines(path, lines);
    assert_eq!(a_false_answer(path, deltas, 1), None, "{what}");
    let set = JournalSet::open(&[path.to_path_buf()]).unwrap();
    let replayed = set.state_at(time).unwrap();
    assert!(
        replayed.doubt.is_some(),
        "{what}: its true time is said unsure"
    );
}

#[test]
fn damage_at_the_end_of_a_part_is_said_by_a_reader_that_stops_in_the_next_part() {
    // Found by the property above run over rotated sets: a part's last
    // line unreadable, the time asked just before it. The reader went on
    // into the next part, whose first checkpoint made the state sure
    // again, and forgot the damage it met on the way: the state at a time
    // the unreadable line may belong to was said sure. In the middle of a
    // part the same damage is said.
    let (dir, _, _) = recorded(600, 499, Some(24 << 10), 20, 6 << 10);
    let files = parts_in_order(dir.path());
    assert!(files.len() >= 5, "{files:?}");
    let mut tried = 0;
    for file in &files[1..files.len() - 1] {
        let original = lines_of(file);
        let changes = lines_starting(&original, b"{\"time\":");
        let [.., before, last] = changes[..] else {
            continue;
        };
        let asked = time_of(&original[before]);
        if last != original.len() - 1 || asked == time_of(&original[last]) {
            continue;
        }
        let mut lines = original.clone();
        lines[last][0] ^= 1;
        write_lines(file, &lines);
        let set = JournalSet::open(&files).unwrap();
        let replayed = set.state_at(asked).unwrap();
        assert!(
            replayed.doubt.is_some(),
            "{}: its last line unreadable, the state just before it said sure",
            file.display()
        );
        write_lines(file, &original);
        tried += 1;
    }
    assert!(tried >= 3, "{tried} parts end with two changes apart");
}

#[test]
fn a_later_checkpoint_moved_before_a_parts_first_is_not_taken_for_it() {
    // Found by the property above run over rotated sets (seed 299): a
    // later checkpoint's head moved to line 1 of a part. It was taken for
    // the part's first checkpoint, the reader started there, and every
    // line after it was "again after line 76": the whole part skipped as
    // repeats, its changes lost, unsaid.
    let (dir, _, deltas) = recorded(600, 299, Some(24 << 10), 20, 6 << 10);
    let files = parts_in_order(dir.path());
    let mut tried = 0;
    for file in &files[1..files.len() - 1] {
        if tried == 4 {
            break;
        }
        let original = lines_of(file);
        let heads = lines_starting(&original, b"{\"checkpoint\":");
        let [first, later, ..] = heads[..] else {
            continue;
        };
        assert_eq!(first, 1, "{}", file.display());
        let mut lines = original.clone();
        let moved = lines.remove(later);
        lines.insert(1, moved);
        write_lines(file, &lines);
        assert_eq!(
            a_false_answer_in(&files, &deltas, 1),
            None,
            "{}: a later head at line 1",
            file.display()
        );
        write_lines(file, &original);
        tried += 1;
    }
    assert!(tried >= 3, "{tried} parts with two checkpoints");
}

#[test]
fn a_line_copied_from_ahead_before_a_line_moved_back_is_not_taken_for_lines_missing() {
    // Found by the property over rotated sets (seed 670): inside a
    // checkpoint's key lines, line 12 moved after line 13, and a copy of
    // a key line from the next checkpoint (line 80) put between them.
    // The copy was judged by the line after it, 12 — numbered before
    // the last, so no evidence — and taken for 66 lines missing; then
    // every line up to 80 was skipped as "again after line 80", the
    // changes after the checkpoint with them, and the checkpoint's end
    // made the damage harmless: 43 changes lost, unsaid. The line after
    // a line is the first one not numbered at or before the last: the
    // copy is skipped as moved, and the key lines lose nothing.
    let (_dir, path, deltas) = recorded(300, 670, None, 1, 2 << 10);
    let original = lines_of(&path);
    let heads = lines_starting(&original, b"{\"checkpoint\":");
    let mut tried = 0;
    for (&head, &next_head) in heads.iter().zip(&heads[1..]).skip(1).take(4) {
        let moved = head + 4;
        if !original[moved + 1].starts_with(b"{\"ck\":") {
            continue;
        }
        let mut lines = original.clone();
        let line = lines.remove(moved);
        // After the line that followed it: a copy of the next
        // checkpoint's first key line, then the moved line.
        lines.insert(moved + 1, original[next_head + 1].clone());
        lines.insert(moved + 2, line);
        write_lines(&path, &lines);
        assert_eq!(
            a_false_answer(&path, &deltas, 1),
            None,
            "line {moved} moved back behind a copy of line {}",
            next_head + 1
        );
        // And nothing is lost: a key line of a checkpoint the reader
        // skips, moved or copied, leaves every time sure.
        let set = JournalSet::open(std::slice::from_ref(&path)).unwrap();
        for time in times(&deltas) {
            assert!(
                set.state_at(time).unwrap().doubt.is_none(),
                "line {moved} moved back behind a copy: unsure at {time:?}"
            );
        }
        tried += 1;
    }
    assert!(tried >= 3, "{tried} checkpoints with six key lines");
}

#[test]
fn a_checkpoints_end_out_of_its_place_does_not_make_the_damage_before_it_harmless() {
    // Two key lines of the next checkpoint copied before a checkpoint's
    // end: the first is taken for lines missing (the second follows it),
    // and the end, numbered before them, is "again". Taken as the end
    // anyway, it made that damage harmless, and the changes after it,
    // numbered before the copies too, were skipped as repeats, unsaid.
    // An end out of its place ends nothing: the damage is doubt.
    let (_dir, path, deltas) = recorded(300, 670, None, 1, 2 << 10);
    let original = lines_of(&path);
    let heads = lines_starting(&original, b"{\"checkpoint\":");
    let ends = lines_starting(&original, b"{\"checkpoint_end\":");
    let mut tried = 0;
    for &end in ends.iter().skip(1) {
        let Some(&next_head) = heads.iter().find(|head| **head > end) else {
            break;
        };
        if tried == 4 {
            break;
        }
        if !original[next_head + 2].starts_with(b"{\"ck\":") {
            continue;
        }
        let mut lines = original.clone();
        lines.insert(end, original[next_head + 2].clone());
        lines.insert(end, original[next_head + 1].clone());
        write_lines(&path, &lines);
        assert_eq!(
            a_false_answer(&path, &deltas, 1),
            None,
            "lines {} and {} copied before the end at line {end}",
            next_head + 1,
            next_head + 2
        );
        tried += 1;
    }
    assert!(tried >= 3, "{tried} checkpoints followed by another");
}
