//! What an attached front end knows of its link to the service: to what,
//! the service's own word on itself (its hello), how old the last word
//! heard is, and whether it is live at all.
//!
//! Invariant: [`Link::describe`] never reads as live while the link is
//! lost, nor while its last word is older than [`SILENT_AFTER`] (the
//! reader then drops the connection and reconnects); everything it says
//! of the service is escaped for a terminal.

use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::journal::live::{FreeCounts, HEARTBEAT_EVERY, Hello};
use crate::target::Target;

/// How long without a word (heartbeats come every second) before the
/// link counts as lost.
pub const SILENT_AFTER: Duration = Duration::from_secs(3 * HEARTBEAT_EVERY.as_secs());

/// The link to a service, as its reader keeps it and front ends read it.
#[derive(Debug)]
pub struct Link {
    to: Target,
    state: Mutex<LinkState>,
}

#[derive(Debug)]
struct LinkState {
    hello: Hello,
    /// When the last line was heard (`None`: lost).
    last_word: Option<Instant>,
    /// Why it was lost, and since when.
    lost: Option<(String, Instant)>,
    /// Fresh checkpoints after falling behind.
    resyncs: u64,
    /// Reconnections after a loss.
    reconnects: u64,
    /// Free keys, as the last checkpoint counted them, and when.
    free: FreeCounts,
    counted_at: Option<Instant>,
}

impl Link {
    /// A link to `to` just made, whose service said `hello`.
    pub fn new(to: Target, hello: Hello) -> Self {
        Self {
            to,
            state: Mutex::new(LinkState {
                hello,
                last_word: Some(Instant::now()),
                lost: None,
                resyncs: 0,
                reconnects: 0,
                free: FreeCounts::default(),
                counted_at: None,
            }),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, LinkState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Where it attaches.
    pub fn target(&self) -> &Target {
        &self.to
    }

    /// The service's hello (its source, probe, thresholds, state dir).
    pub fn hello(&self) -> Hello {
        self.state().hello.clone()
    }

    /// Free keys, as the service last counted them.
    pub fn free(&self) -> FreeCounts {
        self.state().free.clone()
    }

    /// Whether what it shows is live: connected, and heard from lately.
    pub fn is_live(&self) -> bool {
        let state = self.state();
        state.lost.is_none()
            && state
                .last_word
                .is_some_and(|at| at.elapsed() < SILENT_AFTER)
    }

    /// Fresh checkpoints taken after falling behind.
    pub fn resyncs(&self) -> u64 {
        self.state().resyncs
    }

    /// A line was heard.
    pub(crate) fn heard(&self) {
        self.state().last_word = Some(Instant::now());
    }

    /// A checkpoint counted `free` keys.
    pub(crate) fn counted(&self, free: FreeCounts) {
        let mut state = self.state();
        state.free = free;
        state.counted_at = Some(Instant::now());
    }

    /// The free keys as the header says them: the service's count and
    /// how old it is (it is counted at each checkpoint, not kept up by
    /// later changes).
    pub fn free_line(&self) -> String {
        let state = self.state();
        match state.counted_at {
            Some(at) => format!(
                "+{} free, the service's count of {:.0} s ago",
                state.free.total(),
                at.elapsed().as_secs_f64()
            ),
            None => "free keys not counted yet".to_string(),
        }
    }

    /// The service sent a fresh checkpoint: this client fell behind.
    pub(crate) fn resynced(&self) {
        self.state().resyncs += 1;
    }

    /// The link is lost, for `why`.
    pub(crate) fn lost(&self, why: String) {
        let mut state = self.state();
        let since = state
            .lost
            .as_ref()
            .map_or_else(Instant::now, |(_, since)| *since);
        state.lost = Some((why, since));
        state.last_word = None;
    }

    /// Connected again, to a service that said `hello`.
    pub(crate) fn back(&self, hello: Hello) {
        let mut state = self.state();
        state.hello = hello;
        state.lost = None;
        state.last_word = Some(Instant::now());
        state.reconnects += 1;
    }

    /// One line for a header: attached to what, the service's source and
    /// host, the age of the last word — or `RECONNECTING` and why.
    pub fn describe(&self) -> String {
        let state = self.state();
        let hello = &state.hello;
        let host = crate::text::visible(&hello.host);
        let source = crate::text::visible(&hello.source);
        if let Some((why, since)) = &state.lost {
            return format!(
                "RECONNECTING to {} for {:.0} s, not live: {}",
                self.to,
                since.elapsed().as_secs_f64(),
                crate::text::visible(why)
            );
        }
        let age = state
            .last_word
            .map_or(f64::INFINITY, |at| at.elapsed().as_secs_f64());
        let silent = if age >= SILENT_AFTER.as_secs_f64() {
            " — SILENT, not live"
        } else {
            ""
        };
        let resyncs = match state.resyncs {
            0 => String::new(),
            n => format!(" · resynced {n}× (fell behind)"),
        };
        format!(
            "attached to {} (host {host}, source {source}; the service's thresholds) · last word {age:.1} s ago{silent}{resyncs}",
            self.to
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hello() -> Hello {
        Hello {
            format: crate::journal::live::FORMAT.into(),
            version: crate::journal::live::VERSION,
            host: "h\u{1b}[31m".into(),
            state_dir: "/s".into(),
            locktop: "test".into(),
            source: "kernel".into(),
            refusals_counted: true,
            probe: locktop_core::liveness::probe::ProbeMode::LockFree,
            materializing_after: 10.0,
            heartbeat_every: 1.0,
        }
    }

    /// Live while heard from; `RECONNECTING, not live` once lost, and
    /// live again only once back; a client resynced says so; the
    /// service's words reach the header escaped.
    #[test]
    fn the_header_line_is_live_only_while_heard_and_says_resyncs() {
        let link = Link::new(Target::Unix("/run/locktop/locktop.sock".into()), hello());
        assert!(link.is_live());
        let line = link.describe();
        assert!(
            line.starts_with("attached to unix:/run/locktop/locktop.sock"),
            "{line}"
        );
        assert!(!line.contains('\u{1b}'), "{line}");
        link.resynced();
        assert!(link.describe().contains("resynced 1× (fell behind)"));
        link.lost("the service ended the stream".into());
        assert!(!link.is_live());
        let line = link.describe();
        assert!(line.starts_with("RECONNECTING to unix:"), "{line}");
        assert!(line.contains("not live"), "{line}");
        link.back(hello());
        assert!(link.is_live());
        assert!(link.describe().starts_with("attached to"));
    }
}
