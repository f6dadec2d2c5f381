//! The change stream that `watch` prints, `serve`'s `/events` sends and
//! `record` and `replay` tell: each engine delta as key lines, followed
//! by the verdict changes it caused (read from the one held view,
//! [`crate::operate::held`]); the coalescing [`queue`] a slow reader
//! cannot grow; the text and NDJSON forms of a line ([`format`]); and the
//! [`writer`] thread that alone blocks on the output.
//!
//! Invariants: a line is told only once the first full scan is over (or
//! from the start, when asked), never twice for a delta that changes
//! nothing a line shows ([`DeltaLines::repeat`]); a verdict change is
//! told after the key line of the change that caused it.

pub mod format;
pub mod queue;
pub mod snapshot;
pub mod writer;

use std::time::SystemTime;

use crate::engine::{Delta, KeyState};
use crate::operate::held::{Change, HeldView};
use queue::KeyTo;
use writer::PendingLines;

/// What [`enqueue`] prints besides key changes.
#[derive(Debug, Clone, Copy)]
pub struct Show {
    /// NDJSON, not text.
    pub json: bool,
    /// Verdict changes: only once the first full scan is over — before,
    /// a holder's other keys may not have arrived yet, and a verdict
    /// resting on half its keys is not one (a spawn's tag would read
    /// `materializing too long` until its AIH lock arrived).
    pub verdicts: bool,
}

/// Adds what `delta` prints to the outbox: key changes once the initial
/// scan is over (or all of them with `--initial`), each followed by the
/// verdict changes it caused (when `show` says), removals, health, and
/// in text mode the end of each full scan. Verdicts are followed from
/// the start, printed like key changes.
pub fn enqueue(
    outbox: &PendingLines,
    delta: Delta,
    show: Show,
    synced: &mut bool,
    verdicts: &mut HeldView,
) {
    let mut lines = lines_of(&delta, verdicts);
    if !show.verdicts {
        lines.changes.clear();
    }
    push_delta(outbox, delta, show.json, synced, lines);
}

/// What a delta means for the lines.
#[derive(Debug, Clone, Default)]
pub struct DeltaLines {
    /// Its key line would say what the last one said (the same liveness,
    /// holders, error): another monitor's probe, a holder refresh. No
    /// line for a change that is not one.
    pub repeat: bool,
    /// The verdict changes it caused (its own key's; the others come
    /// with [`HeldView::settle`]).
    pub changes: Vec<Change>,
}

/// Folds `delta` into `verdicts`: whether its line repeats the last one,
/// and the verdict changes it caused.
pub fn lines_of(delta: &Delta, verdicts: &mut HeldView) -> DeltaLines {
    match delta {
        Delta::Key {
            key,
            state,
            previous,
            at,
        } => {
            let before = match verdicts.held_state(key) {
                Some(old) => KeyTo::state(old),
                None => KeyTo::state(&KeyState::bare(previous.unwrap_or(state.liveness))),
            };
            let repeat = *previous == Some(state.liveness) && before == KeyTo::state(state);
            let changes = verdicts.apply(key, Some(state), *at);
            DeltaLines { repeat, changes }
        }
        Delta::Removed { key, at, .. } => DeltaLines {
            repeat: false,
            changes: verdicts.apply(key, None, *at),
        },
        _ => DeltaLines::default(),
    }
}

/// Adds what `delta` prints, followed by the verdict `changes` it caused
/// (see [`enqueue`]).
pub fn push_delta(
    outbox: &PendingLines,
    delta: Delta,
    json: bool,
    synced: &mut bool,
    lines: DeltaLines,
) {
    let DeltaLines { repeat, changes } = lines;
    match delta {
        Delta::Key {
            key,
            state,
            previous,
            at,
        } => {
            if *synced && !repeat {
                let to = KeyTo::state(&state);
                outbox.push(|queue| queue.push_key(key, previous, to, at));
            }
            push_verdicts(outbox, changes, *synced, at);
        }
        Delta::Removed { key, previous, at } => {
            outbox.push(|queue| queue.push_key(key, Some(previous), KeyTo::Removed, at));
            push_verdicts(outbox, changes, *synced, at);
        }
        Delta::Health(health) => {
            outbox.push(|queue| queue.push_health(health, SystemTime::now()));
        }
        Delta::Synced { keys, .. } => {
            *synced = true;
            if !json {
                outbox.push(|queue| queue.push_synced(keys, SystemTime::now()));
            }
        }
        Delta::Problems(_) => {}
    }
}

/// Adds a line per verdict change, once the initial scan is over.
pub fn push_verdicts(outbox: &PendingLines, changes: Vec<Change>, synced: bool, at: SystemTime) {
    if !synced || changes.is_empty() {
        return;
    }
    outbox.push(|queue| {
        for change in changes {
            queue.push_verdict(change.key, change.from, change.to, at);
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::Liveness;
    use crate::engine::fixtures::{free, held, key_delta, t, tag};
    use std::time::Duration;

    #[test]
    fn a_delta_that_changes_nothing_a_line_shows_is_a_repeat() {
        let mut verdicts = HeldView::new(Duration::from_secs(30));
        let live = |pid| held(Liveness::Live, pid, "agent", t(0));
        let mut repeat = |state, previous| {
            lines_of(&key_delta(tag("t"), state, previous, t(1)), &mut verdicts).repeat
        };
        assert!(!repeat(live(7), None), "first seen");
        assert!(!repeat(live(7), Some(Liveness::Free)), "taken");
        assert!(
            repeat(live(7), Some(Liveness::Live)),
            "the same holder again"
        );
        let mut stopped = live(7);
        stopped.holders[0].state = Some(crate::liveness::process::ProcState::Stopped);
        assert!(
            repeat(stopped, Some(Liveness::Live)),
            "no line shows the process state"
        );
        assert!(!repeat(live(8), Some(Liveness::Live)), "another holder");
        let refused = |count| {
            let mut state = live(8);
            state.refused = Some(crate::liveness::state::RefusedTries {
                last_minute: count,
                by: vec![crate::liveness::state::RefusedBy {
                    pid: 9,
                    count,
                    last: None,
                }],
            });
            state
        };
        assert!(
            !repeat(refused(3), Some(Liveness::Live)),
            "tries refused: the line says so"
        );
        assert!(
            repeat(refused(3), Some(Liveness::Live)),
            "the same count again"
        );
        assert!(
            !repeat(refused(40), Some(Liveness::Live)),
            "more refused (the engine says it at most once a second)"
        );
        assert!(
            !repeat(live(8), Some(Liveness::Live)),
            "none refused in the last minute any more"
        );
        assert!(!repeat(free(), Some(Liveness::Live)), "released");
        assert!(repeat(free(), Some(Liveness::Free)), "free again");
    }
}
