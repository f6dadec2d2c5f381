//! The change stream that `watch` prints, `serve`'s `/events` sends and
//! `record` and `replay` tell: each engine delta as key lines, followed
//! by the verdict changes it caused (read from the one held view,
//! [`crate::operate::held`], that the one [`follow::Follower`] of every
//! front end keeps); the coalescing [`queue`] a slow reader
//! cannot grow; the text and NDJSON forms of a line ([`format`]); and the
//! [`writer`] thread that alone blocks on the output.
//!
//! Invariants: a line is told only once the first full scan is over (or
//! from the start, when asked), never twice for a delta that changes
//! nothing a line shows ([`DeltaLines::repeat`]); a verdict change is
//! told after the key line of the change that caused it.

pub mod follow;
pub mod format;
pub mod pump;
pub mod queue;
pub mod snapshot;
pub mod writer;

use std::time::SystemTime;

use crate::engine::Delta;
use crate::operate::held::Change;
use queue::{KeyTo, Report};
use writer::PendingLines;

/// The line `delta` makes, as `watch` prints it (`None`: none — a key
/// change that `repeat`s the last line, or the scan problems), and when
/// it happened (a key's change; the watcher's are stamped when told).
/// The one place a delta becomes a line: `watch`, `/events` and `replay`
/// all tell deltas through it.
pub fn report_of(delta: Delta, repeat: bool) -> Option<(Report, Option<SystemTime>)> {
    match delta {
        Delta::Key {
            key,
            state,
            previous,
            at,
        } => (!repeat).then(|| {
            let to = KeyTo::state(&state);
            (
                Report::Key {
                    key,
                    from: previous,
                    to,
                },
                Some(at),
            )
        }),
        Delta::Removed { key, previous, at } => Some((
            Report::Key {
                key,
                from: Some(previous),
                to: KeyTo::Removed,
            },
            Some(at),
        )),
        Delta::Health(health) => Some((Report::Health(health), None)),
        Delta::Synced { keys, .. } => Some((Report::Synced { keys }, None)),
        Delta::Problems(_) => None,
    }
}

/// Adds what `delta` prints to the outbox ([`report_of`]): a key change
/// once the initial scan is over (`synced`, or from the start with
/// `--initial`), unless it `repeat`s the last line; a removal; health; in
/// text mode the end of each full scan; then the verdict `changes` it
/// caused. `changes` are the ones to tell: a front end clears them until
/// its first full scan is over (a verdict resting on half a holder's keys
/// is not one).
pub fn push_delta(
    outbox: &PendingLines,
    delta: Delta,
    json: bool,
    synced: &mut bool,
    (repeat, changes): (bool, Vec<Change>),
) {
    let at = delta.changed_at();
    match report_of(delta, repeat) {
        Some((Report::Key { key, from, to }, Some(at))) => {
            if *synced || to == KeyTo::Removed {
                outbox.push(|queue| queue.push_key(key, from, to, at));
            }
        }
        Some((Report::Health(health), _)) => {
            outbox.push(|queue| queue.push_health(health, SystemTime::now()));
        }
        Some((Report::Synced { keys }, _)) => {
            *synced = true;
            if !json {
                outbox.push(|queue| queue.push_synced(keys, SystemTime::now()));
            }
        }
        Some((Report::Key { .. } | Report::Verdict { .. }, _)) | None => {}
    }
    if let Some(at) = at {
        push_verdicts(outbox, changes, *synced, at);
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
