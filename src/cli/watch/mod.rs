//! `locktop watch`: stream liveness changes until SIGINT/SIGTERM — text
//! lines, or NDJSON with `--json` (`time, kind, name, from, to, pids`) —
//! and a line whenever a held key's verdict changes ([`verdicts`]).
//!
//! Invariant: a slow reader never stops the engine from being drained,
//! and never makes memory grow. The loop here only folds deltas into the
//! [`writer::PendingLines`]; a thread of its own writes stdout ([`writer`]).
//! While lines wait, each key keeps one pending line with its latest
//! state and a count of what it folded ([`queue`], which states the
//! bound). On SIGINT/SIGTERM `watch` stops receiving, flushes what is
//! pending for at most [`FLUSH_TIMEOUT`], and exits 0 whether or not the
//! reader took it. Safe in a pipe: a closed stdout (`| head`) ends the
//! command with exit 0.

pub(crate) mod format;
pub(crate) mod queue;
pub(crate) mod writer;

// The verdicts `watch` follows are the monitor's too: they live below
// both (`crate::operate::verdict::changes`); these names stay for the
// subcommands that reach them through `watch`.
pub(crate) use crate::operate::verdict::changes as verdicts;
pub(crate) use crate::operate::verdict::changes::settled;

use std::os::fd::AsFd;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use tokio::sync::oneshot;

use crate::context::Context;
use crate::engine::{self, Delta, EngineHandle, KeyState};
use queue::KeyTo;
use verdicts::Verdicts;
use writer::PendingLines;

/// How long `watch` keeps flushing pending lines after SIGINT/SIGTERM
/// before it exits anyway (a second signal ends it at once).
pub const FLUSH_TIMEOUT: Duration = Duration::from_secs(2);
/// How often held keys are judged again against the clock.
const VERDICT_CLOCK: Duration = Duration::from_secs(1);

/// Flags of `locktop watch`.
#[derive(Debug, clap::Args)]
pub struct WatchArgs {
    /// Print NDJSON instead of text.
    #[arg(long)]
    json: bool,
    /// Also print the initial state of every key (default: changes only).
    #[arg(long)]
    initial: bool,
    #[command(flatten)]
    engine: super::engine_args::EngineArgs,
}

/// What the writer thread reports when it ends.
type Written = oneshot::Receiver<std::io::Result<()>>;

/// Runs `locktop watch`.
pub async fn run(state_dir: PathBuf, args: WatchArgs) -> anyhow::Result<ExitCode> {
    let engine = args.engine.engine(&state_dir, "watch")?;
    engine.say();
    let verdicts = Verdicts::new(engine.materializing);
    let stop = super::stop_signal()?;
    let outbox = Arc::new(PendingLines::default());
    if args.json {
        // The first line says how liveness is learned (a reader that
        // cannot take it has stopped reading: the writer finds out).
        let line = serde_json::json!({
            "time": crate::time_format::rfc3339(SystemTime::now()),
            "source": engine.source.word(),
            "probe": engine.probe.runs.as_str(),
            "source_fallback": engine.source.fallback,
        });
        let _ = std::io::Write::write_all(&mut std::io::stdout(), format!("{line}\n").as_bytes());
    }
    let stdout = std::fs::File::from(std::io::stdout().as_fd().try_clone_to_owned()?);
    let mut written = writer::spawn(outbox.clone(), args.json, stdout)?;
    let handle = engine::spawn(Context::new(state_dir), engine.config);
    let drained = drain(handle, &outbox, &args, verdicts, stop, &mut written).await;
    if let Some(outcome) = drained {
        return exit_code(outcome);
    }
    // Stopped receiving (the engine is gone with its handle): flush what
    // is pending, but never wait on a reader for longer than the bound.
    outbox.close();
    let again = super::stop_signal()?;
    tokio::select! {
        outcome = &mut written => exit_code(writer_outcome(outcome)),
        () = tokio::time::sleep(FLUSH_TIMEOUT) => Ok(ExitCode::SUCCESS),
        () = again => Ok(ExitCode::SUCCESS),
    }
}

/// Folds the engine's deltas into `outbox` until SIGINT/SIGTERM or the
/// end of the engine (`None`), or until the writer ends first (its
/// outcome). Never waits on stdout. Once a second, held keys are judged
/// again against the clock (a verdict that comes with time alone).
async fn drain(
    mut handle: EngineHandle,
    outbox: &PendingLines,
    args: &WatchArgs,
    mut verdicts: Verdicts,
    stop: impl Future<Output = ()>,
    written: &mut Written,
) -> Option<std::io::Result<()>> {
    tokio::pin!(stop);
    let mut synced = args.initial;
    let mut scanned = false;
    let mut settle_at = None;
    let mut clock = tokio::time::interval(VERDICT_CLOCK);
    clock.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            delta = handle.deltas.recv() => match delta {
                Some(delta) => {
                    let first_scan_done = !scanned && matches!(delta, Delta::Synced { .. });
                    let show = Show { json: args.json, verdicts: scanned };
                    enqueue(outbox, delta, show, &mut synced, &mut verdicts);
                    settle_at = Some(tokio::time::Instant::now() + verdicts::SETTLE_AFTER);
                    if first_scan_done {
                        scanned = true;
                        // Every key is in: judge the keys left unsettled.
                        verdicts.settle(SystemTime::now());
                        if args.initial {
                            // The verdicts of the initial state, now that
                            // every holder's keys are known.
                            push_verdicts(outbox, verdicts.current(), true, SystemTime::now());
                        }
                    }
                }
                None => return None,
            },
            () = settled(settle_at) => {
                // The deltas that came together are in: judge the other
                // keys of the holders they touched.
                settle_at = None;
                let changes = verdicts.settle(SystemTime::now());
                push_verdicts(outbox, changes, scanned, SystemTime::now());
            }
            _ = clock.tick(), if settle_at.is_none() => {
                let changes = verdicts.tick(SystemTime::now());
                push_verdicts(outbox, changes, scanned, SystemTime::now());
            }
            () = &mut stop => return None,
            outcome = &mut *written => return Some(writer_outcome(outcome)),
        }
    }
}

/// What [`enqueue`] prints besides key changes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Show {
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
pub(crate) fn enqueue(
    outbox: &PendingLines,
    delta: Delta,
    show: Show,
    synced: &mut bool,
    verdicts: &mut Verdicts,
) {
    let mut lines = lines_of(&delta, verdicts);
    if !show.verdicts {
        lines.changes.clear();
    }
    push_delta(outbox, delta, show.json, synced, lines);
}

/// What a delta means for the lines.
#[derive(Debug, Clone, Default)]
pub(crate) struct DeltaLines {
    /// Its key line would say what the last one said (the same liveness,
    /// holders, error): another monitor's probe, a holder refresh. No
    /// line for a change that is not one.
    pub repeat: bool,
    /// The verdict changes it caused (its own key's; the others come
    /// with [`Verdicts::settle`]).
    pub changes: Vec<verdicts::Change>,
}

/// Folds `delta` into `verdicts`: whether its line repeats the last one,
/// and the verdict changes it caused.
pub(crate) fn lines_of(delta: &Delta, verdicts: &mut Verdicts) -> DeltaLines {
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
pub(crate) fn push_delta(
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
pub(crate) fn push_verdicts(
    outbox: &PendingLines,
    changes: Vec<verdicts::Change>,
    synced: bool,
    at: SystemTime,
) {
    if !synced || changes.is_empty() {
        return;
    }
    outbox.push(|queue| {
        for change in changes {
            queue.push_verdict(change.key, change.from, change.to, at);
        }
    });
}

fn writer_outcome(
    outcome: Result<std::io::Result<()>, oneshot::error::RecvError>,
) -> std::io::Result<()> {
    outcome.unwrap_or_else(|_| Err(std::io::Error::other("the stdout writer stopped")))
}

/// Exit 0 when everything was written or the reader went away (EPIPE).
fn exit_code(outcome: std::io::Result<()>) -> anyhow::Result<ExitCode> {
    match outcome {
        Ok(()) => Ok(ExitCode::SUCCESS),
        Err(error) if error.kind() == std::io::ErrorKind::BrokenPipe => Ok(ExitCode::SUCCESS),
        Err(error) => Err(error.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::Liveness;
    use crate::engine::fixtures::{free, held, key_delta, t, tag};

    #[test]
    fn a_delta_that_changes_nothing_a_line_shows_is_a_repeat() {
        let mut verdicts = Verdicts::new(Duration::from_secs(30));
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
                by: vec![crate::liveness::state::RefusedBy { pid: 9, count }],
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
