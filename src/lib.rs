//! locktop — a terminal monitor for ObjectiveAI agent locks.
//!
//! The workspace's crates are its layers, lowest first: `locktop-locks`
//! (the seed: [`locks`] and [`context`]), `locktop-core` ([`time_format`],
//! [`text`], [`disk`], [`liveness`], [`engine`], [`operate`]),
//! `locktop-journal` ([`journal`]), `locktop-tui` ([`model`], [`tui`]),
//! and this crate: [`cli`], the command line the binary runs. It
//! re-exports every crate below it, so every path stays `locktop::…`; the
//! compiler keeps each crate from naming one above it.
//!
//! Data flows one way: filesystem events and the kernel's lock events
//! (the default source; probes where they are not to be had) →
//! judgements → model → view.

// `say!`, the one way a line reaches stderr, for every module here.
#[macro_use]
extern crate locktop_core;

// The crates below, re-exported: `locktop::engine` and `crate::engine`
// name them as before.
pub use locktop_core::{disk, engine, liveness, operate, stream, text, time_format};
pub use locktop_journal as journal;
pub use locktop_locks::{context, locks};
pub use locktop_tui::{model, tui};

pub mod cli;
