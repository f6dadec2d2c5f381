//! Where liveness comes from (`--source`), for the monitor and every
//! command that runs the engine (`watch`, `serve`, `record`): the kernel's
//! lock events where this process may read them, else inference from
//! filesystem events and the probe.
//!
//! Invariant: which source runs is always said — the header, one stderr
//! line of a headless command, JSON — and `--source kernel` that cannot
//! run is an error (one line, exit 2), never a silent fallback.

use crate::engine::{LivenessSource, OpenEvents};
use crate::liveness::kernel::stream::OrderedEvents;
use crate::liveness::kernel::{AsyncKernelLockEvents, KernelLockEvents, Options};

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

/// The source chosen, and why it is not the one asked for.
#[derive(Clone)]
pub struct SourceChoice {
    /// What the engine runs.
    pub source: LivenessSource,
    /// Why the kernel's events are not used, when `auto` fell back.
    pub fallback: Option<String>,
}

impl SourceChoice {
    /// True when the kernel's lock events run.
    pub fn is_kernel(&self) -> bool {
        matches!(self.source, LivenessSource::KernelEvents(_))
    }

    /// `kernel` or `inference`: the word of the header and of JSON.
    pub fn word(&self) -> &'static str {
        if self.is_kernel() {
            "kernel"
        } else {
            "inference"
        }
    }

    /// One phrase for a stderr line: which source runs (`probe`: how
    /// inference probes) and why.
    pub fn describe(&self, probe: &str) -> String {
        match (&self.fallback, self.is_kernel()) {
            (_, true) => "liveness from the kernel's lock events".to_string(),
            (Some(why), false) => format!(
                "liveness inferred (probe {probe}): the kernel's lock events are unavailable: {why}"
            ),
            (None, false) => format!("liveness inferred (probe {probe})"),
        }
    }

    /// Inference, as asked.
    pub fn inference() -> Self {
        Self {
            source: LivenessSource::Inference,
            fallback: None,
        }
    }
}

impl SourceArgs {
    /// The source to run, or a one-line error (`--source kernel` where the
    /// events cannot be opened). Opening them once here is the test: the
    /// engine opens its own.
    pub fn choose(&self, state_dir: &std::path::Path) -> anyhow::Result<SourceChoice> {
        if self.source == SourceFlag::Inference {
            if self.tracepoint_id.is_some() {
                anyhow::bail!(
                    "--tracepoint-id applies to the kernel's lock events: not with --source inference"
                );
            }
            return Ok(SourceChoice::inference());
        }
        let options = Options {
            tracepoint_id: self.tracepoint_id,
            // The engine nudges its reader (inotify, a backstop timer):
            // the kernel wakes it only in storms.
            wake_every: crate::liveness::kernel::wait::WAKE_EVERY,
            ..Options::default()
        };
        // The test opens them on the state dir's filesystem (opening on
        // none would ask the kernel nothing).
        let device: Vec<(u32, u32)> = state_dir
            .ancestors()
            .find_map(|dir| std::fs::metadata(dir).ok())
            .map(|meta| crate::liveness::proc_locks::FileId::from_metadata(&meta))
            .map(|file| vec![(file.major, file.minor)])
            .unwrap_or_default();
        let test = KernelLockEvents::open(&device, &options).map(drop);
        let open: OpenEvents = std::sync::Arc::new(move || {
            let events = KernelLockEvents::open(&[], &options).map_err(|why| why.to_string())?;
            let events = AsyncKernelLockEvents::new(events).map_err(|why| why.to_string())?;
            let quiet = events.quiet_files();
            Ok(Box::new(OrderedEvents::with_quiet(events, quiet))
                as Box<
                    dyn crate::liveness::kernel::live_table::EventStream,
                >)
        });
        match (test, self.source) {
            (Ok(_), _) => Ok(SourceChoice {
                source: LivenessSource::KernelEvents(open),
                fallback: None,
            }),
            (Err(why), SourceFlag::Kernel) => {
                let why = why.to_string();
                anyhow::bail!("--source kernel: the kernel's lock events are unavailable: {why}")
            }
            (Err(why), _) => Ok(SourceChoice {
                source: LivenessSource::Inference,
                fallback: Some(why.to_string()),
            }),
        }
    }
}
