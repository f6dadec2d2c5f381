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
pub mod queue;
pub mod snapshot;
pub mod writer;

use std::time::SystemTime;

use crate::engine::Delta;
use crate::operate::held::Change;
use queue::KeyTo;
use writer::PendingLines;

/// Adds what `delta` prints to the outbox: its key change once the
/// initial scan is over (`synced`, or from the start with `--initial`),
/// unless it `repeat`s the last line, followed by the verdict `changes`
/// it caused; removals; health; in text mode the end of each full scan.
/// `changes` are the ones to tell: a front end clears them until its
/// first full scan is over (a verdict resting on half a holder's keys is
/// not one).
pub fn push_delta(
    outbox: &PendingLines,
    delta: Delta,
    json: bool,
    synced: &mut bool,
    (repeat, changes): (bool, Vec<Change>),
) {
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
