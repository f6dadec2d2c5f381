//! The pump from the engine into the change stream (`watch`): each delta
//! through the one follower into the outbox a writer thread drains, then
//! the verdict changes it caused; a burst's once it settles, the clock's
//! once a second.
//!
//! Invariant: it never waits on the output — only the writer thread
//! blocks on stdout (see [`super::writer`]; the pump writes a turn's
//! lines itself only where that cannot block), and the outbox's queue
//! folds what a slow reader has not taken.

use std::future::Future;
use std::time::SystemTime;

use tokio::sync::oneshot;

use crate::engine::EngineHandle;

use super::follow::{self, Follower, HeldOnly};
use super::writer::PendingLines;
use super::{push_delta, push_verdicts};

/// What the writer thread reports when it ends.
pub type Written = oneshot::Receiver<std::io::Result<()>>;

/// How the pump tells the stream.
#[derive(Debug, Clone, Copy)]
pub struct Telling {
    /// NDJSON, not text.
    pub json: bool,
    /// Key lines from the start, not only once the first scan is over.
    pub initial: bool,
}

/// Folds the engine's deltas into `outbox` until SIGINT/SIGTERM or the
/// end of the engine (`None`), or until the writer ends first (its
/// outcome). Never waits on stdout. Verdict changes are told once the
/// first full scan is over: a burst's when it settles, and the clock's
/// (a verdict that comes with time alone) once a second.
pub async fn pump(
    mut handle: EngineHandle,
    outbox: &PendingLines,
    telling: Telling,
    mut follower: Follower<HeldOnly>,
    stop: impl Future<Output = ()>,
    written: &mut Written,
) -> Option<std::io::Result<()>> {
    tokio::pin!(stop);
    let mut synced = telling.initial;
    let mut clock = follow::DueTimer::new();
    loop {
        tokio::select! {
            delta = handle.deltas.recv() => match delta {
                Some(delta) => {
                    // This delta and every one the engine's turn sent with
                    // it, then one write for all their lines.
                    let mut next = Some(delta);
                    let mut taken = 0;
                    while let Some(delta) = next {
                        follow_delta(&mut follower, outbox, telling, &mut synced, delta);
                        taken += 1;
                        next = (taken < DELTAS_PER_WRITE)
                            .then(|| handle.deltas.try_recv().ok())
                            .flatten();
                    }
                }
                None => return None,
            },
            () = clock.until(follower.due()) => {
                if let Some(judged) = follower.judge(SystemTime::now()) {
                    push_judged(outbox, judged, follower.scanned());
                }
            }
            () = &mut stop => return None,
            outcome = &mut *written => return Some(outcome.unwrap_or_else(|_| {
                Err(std::io::Error::other("the stdout writer stopped"))
            })),
        }
        // What this turn queued: written now where that cannot block, or
        // handed to the writer.
        outbox.flush();
    }
}

/// The most deltas folded before their lines are written (a turn of
/// the engine sends a few; a first scan, up to the channel's size).
const DELTAS_PER_WRITE: usize = 64;

/// Folds `delta` through the follower into `outbox`: the verdicts of a
/// burst it found settled first, then its own line, then — at the first
/// scan's end — the initial state's verdicts.
fn follow_delta(
    follower: &mut Follower<HeldOnly>,
    outbox: &PendingLines,
    telling: Telling,
    synced: &mut bool,
    delta: crate::engine::Delta,
) {
    let scanned = follower.scanned();
    let followed = follower.apply_received(delta.clone(), SystemTime::now());
    if let Some(settled) = followed.settled {
        push_judged(outbox, settled, scanned);
    }
    let changes = if scanned {
        followed.changes
    } else {
        Vec::new()
    };
    push_delta(
        outbox,
        delta,
        telling.json,
        synced,
        (followed.repeat, changes),
    );
    if followed.first_state.is_some() && telling.initial {
        // The verdicts of the initial state, now that every holder's keys
        // are known.
        push_verdicts(outbox, follower.held().current(), true, SystemTime::now());
    }
}

/// Adds the lines of verdict changes judged without a delta of their own
/// (a burst settled, the clock moved), once the first scan is over.
fn push_judged(outbox: &PendingLines, judged: follow::Judged, scanned: bool) {
    let at = judged.at.unwrap_or_else(SystemTime::now);
    push_verdicts(outbox, judged.changes, scanned, at);
}
