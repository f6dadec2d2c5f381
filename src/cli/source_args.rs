//! Where liveness comes from (`--source`), for the monitor and every
//! command that runs the engine (`watch`, `serve`, `record`): the flags.
//! The choice itself — the kernel's lock events where this process may
//! read them, else inference, and why — is the core's
//! ([`crate::engine::source_choice`]).
//!
//! Invariant: which source runs is always said — the header, one stderr
//! line of a headless command, JSON — and `--source kernel` that cannot
//! run is an error (one line, exit 2), never a silent fallback.

pub use crate::engine::source_choice::SourceChoice;
use crate::engine::source_choice::{self, SourceAsked};

/// The `--source` values.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum SourceFlag {
    /// The kernel's lock events where they may be read, else inference.
    #[default]
    Auto,
    /// The kernel's lock events, or an error.
    Kernel,
    /// Inference from filesystem events and the probe (`--probe`).
    Inference,
}

/// The flags that choose the liveness source.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct SourceArgs {
    /// Where liveness comes from: auto (default: the kernel's lock events
    /// where this user may read them — root, or CAP_PERFMON — else
    /// inference), kernel (an error where unavailable), or inference
    /// (filesystem events, each change probed with --probe, periodic
    /// sweeps).
    #[arg(long, value_enum, default_value_t = SourceFlag::Auto)]
    pub source: SourceFlag,
    /// The id of the tracepoint filelock:flock_lock_inode, for a user with
    /// CAP_PERFMON who may not read tracefs (root can: `cat
    /// /sys/kernel/tracing/events/filelock/flock_lock_inode/id`).
    #[arg(long, value_name = "ID")]
    pub tracepoint_id: Option<u64>,
}

impl SourceArgs {
    /// The source to run, or a one-line error (`--source kernel` where the
    /// events cannot be opened). Opening them once here is the test: the
    /// engine opens its own.
    pub fn choose(&self, state_dir: &std::path::Path) -> anyhow::Result<SourceChoice> {
        let asked = match self.source {
            SourceFlag::Auto => SourceAsked::Auto,
            SourceFlag::Kernel => SourceAsked::Kernel,
            SourceFlag::Inference => SourceAsked::Inference,
        };
        Ok(source_choice::choose(asked, self.tracepoint_id, state_dir)?)
    }
}
