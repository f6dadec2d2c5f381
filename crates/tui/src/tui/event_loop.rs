//! The event loop: one `select!` over terminal input, engine deltas, test
//! holder updates, finished family checks, a 1 s clock tick (ages only),
//! the moment a burst of deltas has settled (its holders' other keys are
//! judged then, as `watch` judges them) and termination signals. [`run`] owns the setup (signals, TTY check,
//! terminal guard); [`run_main_loop`] is the loop itself, generic over the
//! backend so tests drive the real loop on a `TestBackend`.
//!
//! Invariants: every queued delta is applied before drawing (bursts
//! coalesce into one frame; a 30 ms budget keeps a flood from starving
//! the screen); a frame is drawn only when the app is dirty, so an idle
//! monitor with nothing aging on screen draws nothing; SIGTERM, SIGHUP and
//! SIGINT end the loop like `q` does, and the terminal guard restores the
//! screen on every return path. On the way out every test holder is
//! released and given at most [`RELEASE_GRACE`] to report its exit
//! (children also die with us: parent-death signal, stdin EOF).

use std::time::{Duration, Instant, SystemTime};

use std::future::Future;

use anyhow::Context as _;
use crossterm::event::{Event, EventStream};
use futures::{Stream, StreamExt};
use ratatui::Terminal;
use ratatui::backend::Backend;
use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::mpsc::UnboundedReceiver;
use tokio::time::MissedTickBehavior;

use crate::engine::{Delta, EngineHandle};
use crate::operate::held::settled;
use crate::operate::test_holders::HolderUpdate;

use super::app::App;
use super::handles::OpsEvents;
use super::terminal::{TerminalGuard, install_panic_hook};

/// How long one burst of deltas may be applied before a frame is drawn.
const DRAIN_BUDGET: Duration = Duration::from_millis(30);

/// How long quitting waits for test holders to report their release.
pub(crate) const RELEASE_GRACE: Duration = Duration::from_secs(2);

/// The next message of an optional channel; pends forever once it is
/// gone (closed channels are set to `None` by the caller).
async fn next<T>(rx: &mut Option<UnboundedReceiver<T>>) -> Option<T> {
    match rx {
        Some(rx) => rx.recv().await,
        None => std::future::pending().await,
    }
}

/// Everything the main loop listens to besides the terminal's input.
pub(crate) struct Sources<Stop> {
    /// The engine's deltas.
    pub deltas: tokio::sync::mpsc::Receiver<Delta>,
    /// What the operator's actions report back (absent without a holder
    /// manager).
    pub ops: Option<OpsEvents>,
    /// Resolves when the process is asked to stop (SIGTERM, SIGHUP, SIGINT).
    pub stop: Stop,
}

/// Runs `app` on the real terminal until it quits: sets up the signal
/// handlers, the panic hook and the terminal (refusing to start without a
/// TTY), runs [`run_main_loop`], and restores the terminal on every way
/// out.
pub async fn run(app: App, engine: EngineHandle, ops: Option<OpsEvents>) -> anyhow::Result<()> {
    let stop = stop_signals()?;
    install_panic_hook();
    require_terminal()?;
    let mut guard = TerminalGuard::enter().context("cannot set up the terminal")?;
    let sources = Sources {
        deltas: engine.deltas,
        ops,
        stop,
    };
    let result = run_main_loop(&mut guard.terminal, app, EventStream::new(), sources).await;
    drop(guard);
    tracing::info!("locktop TUI stopped");
    result
}

/// Resolves on the first SIGTERM, SIGHUP or SIGINT (handlers installed
/// now, so a signal from here on is not lost).
pub(crate) fn stop_signals() -> anyhow::Result<impl Future<Output = ()>> {
    let mut terminate = signal(SignalKind::terminate()).context("SIGTERM handler")?;
    let mut hangup = signal(SignalKind::hangup()).context("SIGHUP handler")?;
    let mut interrupt = signal(SignalKind::interrupt()).context("SIGINT handler")?;
    Ok(async move {
        tokio::select! {
            _ = terminate.recv() => {}
            _ = hangup.recv() => {}
            _ = interrupt.recv() => {}
        }
    })
}

/// A one-line error unless stdin and stdout are a terminal with cursor
/// addressing.
pub(crate) fn require_terminal() -> anyhow::Result<()> {
    use std::io::IsTerminal;
    if !std::io::stdin().is_terminal() || !std::io::stdout().is_terminal() {
        anyhow::bail!(
            "the monitor needs a terminal (stdin and stdout must be a TTY); \
             for pipes and scripts use `locktop snapshot` or `locktop watch` \
             (a recording: `locktop replay FILE --at TIME` or `--from T1 --to T2`)"
        );
    }
    if let Some(term) = super::terminal::without_cursor_addressing() {
        anyhow::bail!(
            "the monitor needs a terminal with cursor addressing (TERM={term}); \
             use `locktop snapshot` or `locktop watch` instead"
        );
    }
    Ok(())
}

/// The main loop, on any backend (the real terminal, or a `TestBackend`
/// in tests): draws when the app is dirty, then waits for the next input,
/// delta, holder update, check outcome, clock tick or stop request. On the
/// way out every test holder is released and given at most
/// [`RELEASE_GRACE`] to report its exit.
pub(crate) async fn run_main_loop<B, Input, Stop>(
    terminal: &mut Terminal<B>,
    mut app: App,
    mut input: Input,
    sources: Sources<Stop>,
) -> anyhow::Result<()>
where
    B: Backend + super::clipboard::Clipboard,
    B::Error: Send + Sync + 'static,
    Input: Stream<Item = std::io::Result<Event>> + Unpin,
    Stop: Future<Output = ()>,
{
    let Sources {
        mut deltas,
        ops,
        stop,
    } = sources;
    let (mut updates, mut checks) = match ops {
        Some(ops) => (Some(ops.holder_updates), Some(ops.checks)),
        None => (None, None),
    };
    tokio::pin!(stop);
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut engine_open = true;
    app.tick(SystemTime::now());
    loop {
        if let Some(text) = app.take_clipboard() {
            // Through the backend, between frames: never mid-frame.
            if let Err(error) = terminal.backend_mut().copy(&text) {
                app.set_message(format!("cannot write to the clipboard: {error}"));
            }
        }
        if app.take_clear_screen() {
            terminal.clear().context("cannot clear the screen")?;
            app.mark_dirty();
        }
        if app.take_dirty() {
            terminal
                .draw(|frame| app.draw(frame))
                .context("cannot draw")?;
        }
        if app.should_quit() {
            break;
        }
        let settle_due = app.model().settle_due();
        let settle_at = settle_due.map(|due| {
            let wait = due.duration_since(SystemTime::now()).unwrap_or_default();
            tokio::time::Instant::now() + wait
        });
        tokio::select! {
            event = input.next() => match event {
                Some(Ok(event)) => app.handle_event(event),
                Some(Err(error)) => return Err(error).context("cannot read terminal input"),
                None => app.quit(),
            },
            // Judged as of the burst's end (it has come: the wall clock
            // may lag the monotonic one by a hair, never re-arm for it).
            () = settled(settle_at) => {
                let now = SystemTime::now();
                app.settle(settle_due.map_or(now, |due| due.max(now)));
            }
            delta = deltas.recv(), if engine_open => match delta {
                Some(delta) => {
                    app.apply(delta);
                    let started = Instant::now();
                    while started.elapsed() < DRAIN_BUDGET {
                        let Ok(delta) = deltas.try_recv() else { break };
                        app.apply(delta);
                    }
                    app.tick(SystemTime::now());
                }
                None => {
                    engine_open = false;
                    tracing::warn!("engine channel closed");
                    app.engine_stopped();
                }
            },
            update = next(&mut updates) => match update {
                Some(update) => app.holder_update(update),
                None => updates = None,
            },
            outcome = next(&mut checks) => match outcome {
                Some(outcome) => app.check_done(outcome),
                None => checks = None,
            },
            _ = tick.tick() => app.tick(SystemTime::now()),
            _ = &mut stop => app.quit(),
        }
    }
    release_test_holders(terminal, &mut app, &mut updates).await;
    Ok(())
}

/// Releases every test holder still running and waits (at most
/// [`RELEASE_GRACE`]) for their exits, saying so on screen.
async fn release_test_holders<B: Backend>(
    terminal: &mut Terminal<B>,
    app: &mut App,
    updates: &mut Option<UnboundedReceiver<HolderUpdate>>,
) {
    let running = app.release_all_test_holders();
    if running == 0 {
        return;
    }
    app.set_message(format!("releasing {running} test holder(s)…"));
    let _ = terminal.draw(|frame| app.draw(frame));
    let deadline = tokio::time::Instant::now() + RELEASE_GRACE;
    while app.test_holders_running() > 0 {
        match tokio::time::timeout_at(deadline, next(updates)).await {
            Ok(Some(update)) => app.holder_update(update),
            _ => break,
        }
    }
    tracing::info!(left = app.test_holders_running(), "test holders released");
}
