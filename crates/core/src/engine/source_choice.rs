//! Which liveness source an engine runs, decided once for a front end:
//! the kernel's lock events where this process may read them, else
//! inference from filesystem events and the probe — and, when it fell
//! back, why.
//!
//! Invariants: `Kernel` asked for and unavailable is an error, never a
//! silent fallback; `Auto` falls back to inference with the reason
//! kept; whether the events may be read is tested by opening them once
//! on the state dir's filesystem (the engine opens its own); front ends
//! learn what runs from one value, [`SourceKind`] (its name, and whether
//! it tells refused tries), never from a bool of their own.

use std::path::Path;

use crate::engine::{LivenessSource, OpenEvents};
use crate::liveness::kernel::stream::OrderedEvents;
use crate::liveness::kernel::{AsyncKernelLockEvents, KernelLockEvents, Options};

/// The source asked for (`--source`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum SourceAsked {
    /// The kernel's lock events where they may be read, else inference.
    #[default]
    Auto,
    /// The kernel's lock events, or an error.
    Kernel,
    /// Inference from filesystem events and the probe.
    Inference,
}

/// What kind of source runs: what the header, `watch --json` and
/// `serve` say of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceKind {
    /// The kernel's lock events: exact, and refused tries are told.
    Kernel,
    /// Inference: probes and sweeps; refused tries are not seen.
    Inference,
}

impl SourceKind {
    /// `kernel` or `inference`: the word of the header and of JSON.
    pub fn word(self) -> &'static str {
        match self {
            SourceKind::Kernel => "kernel",
            SourceKind::Inference => "inference",
        }
    }

    /// The kind a word names (a service's hello), if any.
    pub fn from_word(word: &str) -> Option<Self> {
        [SourceKind::Kernel, SourceKind::Inference]
            .into_iter()
            .find(|kind| kind.word() == word)
    }

    /// Whether it tells refused `LOCK_NB` tries.
    pub fn counts_refusals(self) -> bool {
        self == SourceKind::Kernel
    }
}

/// The source chosen, and why it is not the one asked for.
#[derive(Clone)]
pub struct SourceChoice {
    /// What the engine runs.
    pub source: LivenessSource,
    /// Why the kernel's events are not used, when `Auto` fell back.
    pub fallback: Option<String>,
}

impl SourceChoice {
    /// What kind of source runs.
    pub fn kind(&self) -> SourceKind {
        match self.source {
            LivenessSource::KernelEvents(_) => SourceKind::Kernel,
            LivenessSource::Inference => SourceKind::Inference,
        }
    }

    /// True when the kernel's lock events run.
    pub fn is_kernel(&self) -> bool {
        self.kind() == SourceKind::Kernel
    }

    /// `kernel` or `inference`: the word of the header and of JSON.
    pub fn word(&self) -> &'static str {
        self.kind().word()
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

/// Why no source could be chosen as asked.
#[derive(Debug, thiserror::Error)]
pub enum SourceRefused {
    /// A tracepoint id given for inference, which reads none.
    #[error("--tracepoint-id applies to the kernel's lock events: not with --source inference")]
    TracepointWithInference,
    /// The kernel's events asked for by name, and unavailable.
    #[error("--source kernel: the kernel's lock events are unavailable: {0}")]
    KernelUnavailable(String),
}

/// The source to run on `state_dir` for `asked` (with the tracepoint's
/// id when this user may not read tracefs).
pub fn choose(
    asked: SourceAsked,
    tracepoint_id: Option<u64>,
    state_dir: &Path,
) -> Result<SourceChoice, SourceRefused> {
    if asked == SourceAsked::Inference {
        if tracepoint_id.is_some() {
            return Err(SourceRefused::TracepointWithInference);
        }
        return Ok(SourceChoice::inference());
    }
    let options = Options {
        tracepoint_id,
        // The engine nudges its reader (inotify, a backstop timer): the
        // kernel wakes it only in storms.
        wake_every: crate::liveness::kernel::wait::WAKE_EVERY,
        ..Options::default()
    };
    // The test opens them on the state dir's filesystem (opening on none
    // would ask the kernel nothing).
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
    match (test, asked) {
        (Ok(()), _) => Ok(SourceChoice {
            source: LivenessSource::KernelEvents(open),
            fallback: None,
        }),
        (Err(why), SourceAsked::Kernel) => Err(SourceRefused::KernelUnavailable(why.to_string())),
        (Err(why), _) => Ok(SourceChoice {
            source: LivenessSource::Inference,
            fallback: Some(why.to_string()),
        }),
    }
}
