//! The verdicts' thresholds, shared by the monitor (and `demo`) and
//! `watch`: the flags and their checked durations.
//! Invariant: every threshold is a positive, finite number of seconds
//! (checked by [`super::seconds`]), with one default for every command.

use std::time::Duration;

use crate::operate::verdict::MATERIALIZING_AFTER;

/// `--idle-after`'s default, in seconds: the engine's own.
const IDLE_SECS: f64 = crate::engine::IDLE_AFTER.as_secs_f64();

/// How long before a holder is a suspect.
#[derive(Debug, Clone, clap::Args)]
pub struct ThresholdArgs {
    /// Seconds a spawn may hold tags without an AIH lock before it is shown
    /// as a suspect ("materializing too long") [default: 30; demo: 5].
    #[arg(long, value_name = "SECS")]
    pub materializing_after: Option<f64>,
    /// Seconds a holder may use no CPU at all before it is shown as a
    /// suspect ("idle"; seen by the once-a-second look at holders).
    #[arg(long, default_value_t = IDLE_SECS, value_name = "SECS")]
    pub idle_after: f64,
}

impl Default for ThresholdArgs {
    fn default() -> Self {
        Self {
            materializing_after: None,
            idle_after: IDLE_SECS,
        }
    }
}

impl ThresholdArgs {
    /// `--materializing-after`, checked (its default when not given).
    pub fn materializing_after(&self) -> anyhow::Result<Duration> {
        let secs = self
            .materializing_after
            .unwrap_or(MATERIALIZING_AFTER.as_secs_f64());
        super::seconds("--materializing-after", secs)
    }

    /// `--idle-after`, checked.
    pub fn idle_after(&self) -> anyhow::Result<Duration> {
        super::seconds("--idle-after", self.idle_after)
    }
}
