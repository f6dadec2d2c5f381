//! The event loop: one `select!` over terminal input, engine deltas, test
//! holder updates, finished family checks, a 1 s clock tick (ages only)
//! and termination signals.
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

use anyhow::Context as _;
use crossterm::event::EventStream;
use futures::StreamExt;
use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::mpsc::UnboundedReceiver;
use tokio::time::MissedTickBehavior;

use crate::engine::EngineHandle;

use super::app::App;
use super::ops::OpsEvents;
use super::terminal::{TerminalGuard, install_panic_hook};

/// How long one burst of deltas may be applied before a frame is drawn.
const DRAIN_BUDGET: Duration = Duration::from_millis(30);

/// How long quitting waits for test holders to report their release.
pub const RELEASE_GRACE: Duration = Duration::from_secs(2);

/// The next message of an optional channel; pends forever once it is
/// gone (closed channels are set to `None` by the caller).
async fn next<T>(rx: &mut Option<UnboundedReceiver<T>>) -> Option<T> {
    match rx {
        Some(rx) => rx.recv().await,
        None => std::future::pending().await,
    }
}

/// Runs `app` on the real terminal until it quits. `ops` carries what the
/// operator's actions report back (absent without a holder manager).
pub async fn run(
    mut app: App,
    mut engine: EngineHandle,
    ops: Option<OpsEvents>,
) -> anyhow::Result<()> {
    let (mut updates, mut checks) = match ops {
        Some(ops) => (Some(ops.holder_updates), Some(ops.checks)),
        None => (None, None),
    };
    let mut terminate = signal(SignalKind::terminate()).context("SIGTERM handler")?;
    let mut hangup = signal(SignalKind::hangup()).context("SIGHUP handler")?;
    let mut interrupt = signal(SignalKind::interrupt()).context("SIGINT handler")?;
    install_panic_hook();
    {
        use std::io::IsTerminal;
        if !std::io::stdin().is_terminal() || !std::io::stdout().is_terminal() {
            anyhow::bail!(
                "the monitor needs a terminal (stdin and stdout must be a TTY); \
                 for pipes and scripts use `locktop snapshot` or `locktop watch`"
            );
        }
    }
    let mut guard = TerminalGuard::enter().context("cannot set up the terminal")?;
    let mut input = EventStream::new();
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut engine_open = true;
    app.tick(SystemTime::now());
    loop {
        if app.take_dirty() {
            guard
                .terminal
                .draw(|frame| app.draw(frame))
                .context("cannot draw")?;
        }
        if app.should_quit() {
            break;
        }
        tokio::select! {
            event = input.next() => match event {
                Some(Ok(event)) => app.handle_event(event),
                Some(Err(error)) => return Err(error).context("cannot read terminal input"),
                None => app.quit(),
            },
            delta = engine.deltas.recv(), if engine_open => match delta {
                Some(delta) => {
                    app.apply(delta);
                    let started = Instant::now();
                    while started.elapsed() < DRAIN_BUDGET {
                        let Ok(delta) = engine.deltas.try_recv() else { break };
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
            _ = terminate.recv() => app.quit(),
            _ = hangup.recv() => app.quit(),
            _ = interrupt.recv() => app.quit(),
        }
    }
    let running = app.release_all_test_holders();
    if running > 0 {
        app.set_message(format!("releasing {running} test holder(s)…"));
        let _ = guard.terminal.draw(|frame| app.draw(frame));
        let deadline = tokio::time::Instant::now() + RELEASE_GRACE;
        while app.test_holders_running() > 0 {
            match tokio::time::timeout_at(deadline, next(&mut updates)).await {
                Ok(Some(update)) => app.holder_update(update),
                _ => break,
            }
        }
        tracing::info!(left = app.test_holders_running(), "test holders released");
    }
    drop(guard);
    tracing::info!("locktop TUI stopped");
    Ok(())
}
