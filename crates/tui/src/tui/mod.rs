//! The terminal UI: a live tree of agents and tags, their holders and the
//! transitions between them, drawn from the engine's deltas.
//!
//! Data flows one way: engine [`Delta`](crate::engine::Delta)s →
//! [`crate::model::Model`] → views. Operator actions (test holders,
//! signals, family checks) go out through [`Ops`] and come back as updates
//! on channels the event loop selects on. Invariants: no lock logic here
//! (the engine probes, [`crate::operate`] takes locks and sends signals,
//! the UI only renders and asks); the terminal is restored on every exit
//! path (see [`TerminalGuard`]); logs go to a file, never to the screen;
//! test holders are released on the way out.
//!
//! Files: [`action`](Action) (what can be asked), `keymap` (the only
//! binding of keys, and `hints` built from it), `input` (events →
//! actions), `app` (the state machine; `panes` reaches each pane's
//! state, `operator_actions` runs the operator's actions through
//! `handles`, `operator` holds their side), `overlay` (forms and dialogs),
//! `views/` (drawing, read-only), `event_loop` (setup + the loop),
//! `terminal`, `theme`.

mod action;
mod app;
mod clipboard;
mod config;
mod event_loop;
pub mod fit;
mod handles;
mod hints;
mod input;
pub mod keymap;
mod operator;
mod operator_actions;
mod overlay;
mod overlay_keys;
mod panes;
pub mod replay;
mod replay_status;
mod selected;
mod selection;
mod terminal;
mod theme;
mod views;

#[cfg(test)]
mod tests;

use std::path::PathBuf;

use anyhow::Context as _;

pub use app::App;
pub use config::{AppConfig, Attachment};
pub(crate) use handles::Ops;
pub use keymap::{BINDINGS, Group};
pub use terminal::restore;
pub use theme::Theme;
#[cfg(test)]
pub(crate) use {
    action::Pane,
    event_loop::{Sources, run_main_loop},
    handles::{CheckOutcome, OpsEvents},
    overlay::Overlay,
};

/// How the TUI runs.
#[derive(Debug, Clone)]
pub struct TuiOptions {
    /// Disable every action that takes, releases or signals anything
    /// (test holders, `K`); family checks become passive probes.
    pub read_only: bool,
    /// The probe that runs, and why it is not the one asked for.
    pub probe: crate::liveness::ProbeChoice,
    /// Where liveness comes from: the kernel's lock events (the probe
    /// runs only for the first look and a resync) or inference.
    pub source: crate::engine::source_choice::SourceKind,
    /// Why the kernel's lock events are not used, when `--source auto`
    /// fell back to inference.
    pub source_fallback: Option<String>,
    /// Where logs go (`--log FILE`); `None`: no logging at all.
    pub log_file: Option<PathBuf>,
    /// How long a spawn may hold tags without an AIH lock before it is a
    /// suspect (`--materializing-after`).
    pub materializing_after: std::time::Duration,
    /// Why it follows no service though one may run here (the header
    /// says it with the fallbacks' reasons).
    pub attach_note: Option<String>,
}

/// Runs the TUI on `context`'s state dir until the operator quits or a
/// signal (SIGTERM, SIGHUP, SIGINT) arrives. Starts the engine and the
/// test-holder manager on the SAME `context` (one in-process gate);
/// restores the terminal and releases test holders on every way out.
pub async fn run(
    context: crate::context::Context,
    engine: crate::engine::EngineConfig,
    options: TuiOptions,
) -> anyhow::Result<()> {
    let probe = engine.probe;
    let handle = crate::engine::spawn(context.clone(), engine);
    run_on(context, handle, probe, options, None).await
}

/// [`run`], following a service's view (`--connect`) instead of an
/// engine of its own: `handle` gives its deltas, `attachment` what the
/// header says of it, `probe` the service's probe. Test holders and
/// signals work only where the service runs on this host.
pub async fn run_attached(
    context: crate::context::Context,
    handle: crate::engine::EngineHandle,
    probe: crate::liveness::probe::ProbeMode,
    options: TuiOptions,
    attachment: std::sync::Arc<dyn Attachment>,
) -> anyhow::Result<()> {
    run_on(context, handle, probe, options, Some(attachment)).await
}

async fn run_on(
    context: crate::context::Context,
    handle: crate::engine::EngineHandle,
    probe: crate::liveness::probe::ProbeMode,
    options: TuiOptions,
    attached: Option<std::sync::Arc<dyn Attachment>>,
) -> anyhow::Result<()> {
    // No log file unless asked for: locktop writes nothing outside
    // `<state>/locks` on its own, and never logs to the screen.
    if let Some(log_file) = &options.log_file {
        init_logging(log_file)?;
    }
    tracing::info!(state_dir = %context.state_dir().display(), "locktop TUI starting");
    let remote = attached
        .as_ref()
        .is_some_and(|attached| !attached.is_local());
    let config = AppConfig {
        state_dir: context.state_dir().to_path_buf(),
        probe,
        probe_fallback: options.probe.fallback.clone(),
        source: options.source,
        source_fallback: options.source_fallback.clone(),
        read_only: options.read_only,
        theme: Theme::from_env(),
        materializing_after: options.materializing_after,
        attached,
        attach_note: options.attach_note.clone(),
    };
    // A remote service's PIDs are not this host's: whether one still
    // runs cannot be told here.
    let model = if remote {
        crate::model::Model::new(Box::new(|_| None))
    } else {
        crate::model::Model::new(Box::new(|pid| Some(pid_alive(pid))))
    };
    let mut app = App::new(config, model);
    // A service on another host: nothing here to hold or signal.
    let ops = if remote {
        Err(anyhow::anyhow!("the service runs on another host"))
    } else {
        Ops::new(context.clone(), Some(handle.commands.clone())).map_err(anyhow::Error::from)
    };
    let events = match ops {
        Ok((ops, events)) => {
            app = app.with_ops(ops);
            Some(events)
        }
        Err(error) => {
            tracing::warn!("no holder manager: {error}");
            if !remote {
                app.set_message(format!("test holders unavailable: {error}"));
            }
            None
        }
    };
    let result = event_loop::run(app, handle, events).await;
    if let Err(error) = &result {
        tracing::error!("TUI failed: {error:#}");
    }
    result
}

/// True while `/proc/<pid>` exists and is not a zombie (see
/// [`crate::liveness::process::pid_alive`]).
pub use crate::liveness::process::pid_alive;

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
