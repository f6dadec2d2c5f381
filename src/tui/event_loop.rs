//! The event loop: one `select!` over terminal input, engine deltas, a
//! 1 s clock tick (ages only) and termination signals.
//!
//! Invariants: every queued delta is applied before drawing (bursts
//! coalesce into one frame; a 30 ms budget keeps a flood from starving
//! the screen); a frame is drawn only when the app is dirty, so an idle
//! monitor with nothing aging on screen draws nothing; SIGTERM, SIGHUP and
//! SIGINT end the loop like `q` does, and the terminal guard restores the
//! screen on every return path.

use std::time::{Duration, Instant, SystemTime};

use anyhow::Context as _;
use crossterm::event::EventStream;
use futures::StreamExt;
use tokio::signal::unix::{SignalKind, signal};
use tokio::time::MissedTickBehavior;

use crate::engine::EngineHandle;

use super::app::App;
use super::terminal::{TerminalGuard, install_panic_hook};

/// How long one burst of deltas may be applied before a frame is drawn.
const DRAIN_BUDGET: Duration = Duration::from_millis(30);

/// Runs `app` on the real terminal until it quits.
pub async fn run(mut app: App, mut engine: EngineHandle) -> anyhow::Result<()> {
    let mut terminate = signal(SignalKind::terminate()).context("SIGTERM handler")?;
    let mut hangup = signal(SignalKind::hangup()).context("SIGHUP handler")?;
    let mut interrupt = signal(SignalKind::interrupt()).context("SIGINT handler")?;
    install_panic_hook();
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
            _ = tick.tick() => app.tick(SystemTime::now()),
            _ = terminate.recv() => app.quit(),
            _ = hangup.recv() => app.quit(),
            _ = interrupt.recv() => app.quit(),
        }
    }
    drop(guard);
    tracing::info!("locktop TUI stopped");
    Ok(())
}
