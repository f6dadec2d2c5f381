//! The flags of every command that runs the engine headless (`watch`,
//! `serve`, `record`): how it probes, how often it sweeps, and when a
//! holder becomes a suspect — parsed once, into the engine's config.
//!
//! Invariant: a probe that cannot run here (lock-free where `/proc/locks`
//! does not see every holder) is replaced as the monitor replaces it, and
//! the command says so in one stderr line.

use std::path::Path;
use std::time::Duration;

use crate::engine::EngineConfig;
use crate::liveness::lock_free::{self, ProbeChoice};
use crate::liveness::probe::ProbeMode;
use crate::liveness::process::HolderDetail;

/// Flags of a command that runs the engine.
#[derive(Debug, clap::Args)]
pub struct EngineArgs {
    /// How probes test liveness: lock-free (default: /proc/locks, no lock
    /// taken), passive (momentary shared locks) or acquire (writes).
    #[arg(long, value_enum, default_value_t = ProbeMode::LockFree)]
    probe: ProbeMode,
    /// Seconds between safety-net sweeps (a rescan of every key: one
    /// /proc/locks read with the lock-free probe, passive probes with the
    /// others). Not given: every 10 s, stretched on a large tree so that
    /// sweeping costs at most about 1% of a core; given: exactly this.
    #[arg(long, value_name = "SECS")]
    sweep: Option<f64>,
    /// When holders become suspects (verdict lines).
    #[command(flatten)]
    thresholds: super::thresholds::ThresholdArgs,
    /// Where liveness comes from.
    #[command(flatten)]
    source: super::source_args::SourceArgs,
}

/// What the flags resolve to.
pub struct Engine {
    /// The probe that runs, and why it is not the one asked for.
    pub probe: ProbeChoice,
    /// The liveness source that runs, and why it is not the one asked for.
    pub source: super::source_args::SourceChoice,
    /// The stderr line that says so when what runs is not what was asked
    /// ([`Engine::say`] prints it, when the command is ready to).
    pub note: Option<String>,
    /// The engine's configuration.
    pub config: EngineConfig,
    /// `--materializing-after`.
    pub materializing: Duration,
}

impl Engine {
    /// Prints [`Engine::note`], if any: once the command has started (a
    /// command refused for bad input says only why).
    pub fn say(&self) {
        if let Some(note) = &self.note {
            say!("{note}");
        }
    }
}

impl EngineArgs {
    /// The first flag given that asks for an engine run here (see
    /// [`super::connect::engine_option_given`]).
    pub fn option_given(&self) -> Option<&'static str> {
        super::connect::engine_option_given(self.probe, self.sweep, &self.thresholds, &self.source)
    }

    /// The engine for `state_dir`, or a one-line error (a bad number);
    /// `command` names the command in the fallback's stderr line.
    pub fn engine(&self, state_dir: &Path, command: &str) -> anyhow::Result<Engine> {
        let (sweep_every, sweep_stretch) = super::sweep_period(self.sweep)?;
        let materializing = self.thresholds.materializing_after()?;
        let idle_after = self.thresholds.idle_after()?;
        let probe = lock_free::choose(self.probe, state_dir);
        let source = self.source.choose(state_dir)?;
        // Said when something is not what was asked (JSON and the header
        // say the source either way).
        let note = (!source.is_kernel() && (source.fallback.is_some() || probe.fallback.is_some()))
            .then(|| format!("locktop {command}: {}", source.describe(&probe.describe())));
        Ok(Engine {
            config: EngineConfig {
                probe: probe.runs,
                sweep_every,
                sweep_stretch,
                idle_after,
                trace: None,
                source: source.source.clone(),
                holder_detail: HolderDetail::Named,
            },
            probe,
            source,
            note,
            materializing,
        })
    }
}
