//! The terminal UI: a live tree of agents and tags, their holders and the
//! transitions between them, drawn from the engine's deltas.
//!
//! Data flows one way: engine [`Delta`](crate::engine::Delta)s →
//! [`crate::model::Model`] → views. Invariants: no lock logic here (the
//! engine probes, the UI only renders); the terminal is restored on every
//! exit path (see [`terminal`]); logs go to a file, never to the screen.

mod action;
mod app;
mod event_loop;
mod input;
mod keymap;
mod terminal;
mod theme;
mod views;

#[cfg(test)]
mod tests;

use std::path::PathBuf;

use anyhow::Context as _;

pub use action::{Action, Pane};
pub use app::{App, AppConfig, HitMap};
pub use keymap::{BINDINGS, Binding, Group, action_for};
pub use terminal::{TerminalGuard, install_panic_hook, restore};
pub use theme::{Theme, state_label};

/// How the TUI runs.
#[derive(Debug, Clone, Default)]
pub struct TuiOptions {
    /// Disable every action that would write (none yet besides probes,
    /// which the engine config governs).
    pub read_only: bool,
    /// Where logs go; default `<temp dir>/locktop-<pid>.log`.
    pub log_file: Option<PathBuf>,
}

/// Runs the TUI on `context`'s state dir until the operator quits or a
/// signal (SIGTERM, SIGHUP, SIGINT) arrives. Starts the engine; restores
/// the terminal on every way out.
pub async fn run(
    context: crate::context::Context,
    engine: crate::engine::EngineConfig,
    options: TuiOptions,
) -> anyhow::Result<()> {
    let log_file = options.log_file.clone().unwrap_or_else(|| {
        std::env::temp_dir().join(format!("locktop-{}.log", std::process::id()))
    });
    init_logging(&log_file)?;
    tracing::info!(state_dir = %context.state_dir().display(), "locktop TUI starting");
    let config = AppConfig {
        state_dir: context.state_dir().to_path_buf(),
        probe: engine.probe,
        read_only: options.read_only,
        theme: Theme::from_env(),
    };
    let handle = crate::engine::spawn(context.clone(), engine);
    let model = crate::model::Model::new(Box::new(pid_alive));
    let app = App::new(config, model);
    let result = event_loop::run(app, handle).await;
    if let Err(error) = &result {
        tracing::error!("TUI failed: {error:#}");
    }
    result
}

/// True while `/proc/<pid>` exists and is not a zombie: a holder that
/// exited is "gone" even before its parent reaps it.
pub fn pid_alive(pid: u32) -> bool {
    match procfs::process::Process::new(pid as i32).and_then(|p| p.stat()) {
        Ok(stat) => !matches!(stat.state, 'Z' | 'X' | 'x'),
        Err(_) => false,
    }
}

/// Sends `tracing` output to `path` (appending). A second call in the same
/// process keeps the first subscriber.
fn init_logging(path: &std::path::Path) -> anyhow::Result<()> {
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .with_context(|| format!("cannot open log file {}", path.display()))?;
    let _ = tracing_subscriber::fmt()
        .with_writer(std::sync::Mutex::new(file))
        .with_ansi(false)
        .with_max_level(tracing::Level::INFO)
        .try_init();
    Ok(())
}
