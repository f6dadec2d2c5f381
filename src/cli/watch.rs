//! `locktop watch`: stream liveness changes until SIGINT/SIGTERM — text
//! lines, or NDJSON with `--json` (`time, kind, name, from, to, pids`).
//! Safe in a pipe: a closed stdout (`| head`) ends the command with exit 0.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use crate::context::Context;
use crate::engine::{self, Delta, EngineConfig};
use crate::liveness::probe::ProbeMode;
use crate::time_format;

/// Flags of `locktop watch`.
#[derive(Debug, clap::Args)]
pub struct WatchArgs {
    /// Print NDJSON instead of text.
    #[arg(long)]
    json: bool,
    /// Also print the initial state of every key (default: changes only).
    #[arg(long)]
    initial: bool,
    /// How event-driven probes test liveness.
    #[arg(long, value_enum, default_value_t = ProbeMode::Acquire)]
    probe: ProbeMode,
    /// Seconds between safety-net sweeps.
    #[arg(long, default_value_t = 10.0, value_name = "SECS")]
    sweep: f64,
}

/// Runs `locktop watch`.
pub async fn run(state_dir: PathBuf, args: WatchArgs) -> anyhow::Result<ExitCode> {
    let sweep_every = super::seconds("--sweep", args.sweep)?;
    let mut handle = engine::spawn(
        Context::new(state_dir),
        EngineConfig {
            probe: args.probe,
            sweep_every,
        },
    );
    let mut synced = args.initial;
    let stop = super::stop_signal()?;
    tokio::pin!(stop);
    loop {
        let delta = tokio::select! {
            delta = handle.deltas.recv() => match delta {
                Some(delta) => delta,
                None => return Ok(ExitCode::SUCCESS),
            },
            _ = &mut stop => return Ok(ExitCode::SUCCESS),
        };
        if matches!(delta, Delta::Synced { .. }) {
            synced = true;
        }
        let line = if args.json {
            json_line(&delta, synced)
        } else {
            text_line(&delta, synced)
        };
        if let Some(line) = line {
            let mut out = std::io::stdout().lock();
            if let Err(error) = writeln!(out, "{line}").and_then(|()| out.flush()) {
                if error.kind() == std::io::ErrorKind::BrokenPipe {
                    return Ok(ExitCode::SUCCESS);
                }
                return Err(error.into());
            }
        }
    }
}

fn json_line(delta: &Delta, synced: bool) -> Option<String> {
    let value = match delta {
        Delta::Key {
            key,
            state,
            previous,
            at,
        } if synced => serde_json::json!({
            "time": time_format::rfc3339(*at),
            "kind": key.kind,
            "name": key.name,
            "from": previous.map(|l| l.as_str()),
            "to": state.liveness.as_str(),
            "pids": state.holders.iter().map(|p| p.pid).collect::<Vec<_>>(),
            "error": state.error,
        }),
        Delta::Removed { key, previous, at } => serde_json::json!({
            "time": time_format::rfc3339(*at),
            "kind": key.kind,
            "name": key.name,
            "from": previous.as_str(),
            "to": "removed",
            "pids": [],
        }),
        Delta::Health(health) => serde_json::json!({
            "time": time_format::rfc3339(std::time::SystemTime::now()),
            "watcher": health,
        }),
        _ => return None,
    };
    Some(value.to_string())
}

fn text_line(delta: &Delta, synced: bool) -> Option<String> {
    match delta {
        Delta::Key {
            key,
            state,
            previous,
            at,
        } if synced => {
            let pids: Vec<String> = state.holders.iter().map(|p| p.pid.to_string()).collect();
            Some(format!(
                "{} {:<8} {:<9} → {:<9} {:<40} {}",
                time_format::rfc3339(*at),
                key.kind.as_str(),
                previous.map_or("new", |l| l.as_str()),
                state.liveness.as_str(),
                key.name,
                if pids.is_empty() {
                    String::new()
                } else {
                    format!("pid {}", pids.join(","))
                }
            ))
        }
        Delta::Removed { key, previous, at } => Some(format!(
            "{} {:<8} {:<9} → {:<9} {}",
            time_format::rfc3339(*at),
            key.kind.as_str(),
            previous.as_str(),
            "removed",
            key.name
        )),
        Delta::Health(health) => Some(format!(
            "{} watcher: {}",
            time_format::rfc3339(std::time::SystemTime::now()),
            health.describe()
        )),
        Delta::Synced { keys, .. } => Some(format!(
            "{} synced: {keys} keys on disk",
            time_format::rfc3339(std::time::SystemTime::now())
        )),
        _ => None,
    }
    .map(|line| line.trim_end().to_string())
}
