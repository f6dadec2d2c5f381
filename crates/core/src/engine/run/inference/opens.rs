//! Holders that make no write: a process that opens a free key's gate
//! read-only and flocks it (util-linux `flock(1)` does) makes only an
//! IN_OPEN. Probing on opens would feed on the engine's own probes (and
//! two monitors on each other's), so an open is only remembered
//! ([`crate::engine::fs_events::EventFilter`]) and, shortly after, the opened files are
//! compared with one `/proc/locks` read — which makes no filesystem event
//! and so cannot echo — made by the next lookup ([`super::lookup`]). A
//! file that turns out locked by someone while the engine thinks its key
//! is not held is probed like any changed key.
//!
//! Invariants: one `/proc/locks` read (a lookup's) per look, however many
//! files were opened; no file is opened by the look
//! itself (`lstat` only); a look finds only locks taken by the time it
//! runs ([`OPEN_SETTLE`] after the first open) — a process that opens now
//! and locks much later is found by the periodic sweep.

use std::time::Duration;

/// How long after the first open the look is made: `flock(1)` locks right
/// after it opens, and one look then stands for every open of a burst.
pub(crate) const OPEN_SETTLE: Duration = Duration::from_millis(10);
