//! What the monitor is told at its start, not by the engine: the state
//! dir, how liveness is learned, whether it may write, its colours and
//! thresholds. A leaf: the views read it, and it reads nothing of the UI.

use std::path::PathBuf;

use crate::liveness::probe::ProbeMode;

use super::theme::Theme;

/// What the header says about this run (not from the engine).
#[derive(Debug, Clone)]
pub struct AppConfig {
    /// The ObjectiveAI state dir being watched.
    pub state_dir: PathBuf,
    /// The engine's probe mode.
    pub probe: ProbeMode,
    /// Why the probe is not the one asked for (the lock-free probe cannot
    /// see every holder here), shown in the header.
    pub probe_fallback: Option<String>,
    /// Where liveness comes from: the kernel's lock events (exact, refused
    /// tries told) or inference (probes).
    pub source: crate::engine::source_choice::SourceKind,
    /// Why the kernel's lock events are not used (`--source auto` fell
    /// back to inference), shown in the header.
    pub source_fallback: Option<String>,
    /// Whether actions that write are disabled.
    pub read_only: bool,
    /// Colours or NO_COLOR.
    pub theme: Theme,
    /// How long a spawn may hold tags without an AIH lock before it is a
    /// suspect.
    pub materializing_after: std::time::Duration,
    /// The service this monitor follows (`--connect`), if it runs no
    /// engine of its own.
    pub attached: Option<std::sync::Arc<dyn Attachment>>,
    /// Why it follows no service though one may run here (`not
    /// attached: …`), shown in the header with the fallbacks' reasons.
    pub attach_note: Option<String>,
}

/// A service the monitor follows (`--connect`), as the header and the
/// actions see it. Invariant: [`Attachment::describe`] reads as live
/// only while [`Attachment::is_live`]; everything it says is escaped.
pub trait Attachment: Send + Sync + std::fmt::Debug {
    /// One line: to what, its host and source, the age of its last word —
    /// or `RECONNECTING` and why.
    fn describe(&self) -> String;
    /// Whether what is shown is live (connected, and heard lately).
    fn is_live(&self) -> bool;
    /// Whether the service runs on this host (a unix socket): test
    /// holders and signals may be used here.
    fn is_local(&self) -> bool;
    /// Free keys, as the service last counted them (it sends none by
    /// name), with how old that count is.
    fn free_line(&self) -> String;
}

impl AppConfig {
    /// Why actions that need this machine (test holders, signals) are
    /// refused here: a service on another host.
    pub fn refuses_local_actions(&self) -> Option<String> {
        let attached = self.attached.as_ref()?;
        (!attached.is_local()).then(|| {
            "not here: this monitor follows a service on another host — test holders and \
             signals need locktop on that host"
                .to_string()
        })
    }
}
