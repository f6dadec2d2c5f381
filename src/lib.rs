//! locktop — a terminal monitor for ObjectiveAI agent locks.
//!
//! Library face: [`locks`] (the seed's lock module) and [`context`]. The
//! rest serves the `locktop` binary; data flows one way:
//! filesystem events → probes → model → view.

pub mod annotate;
pub mod cli;
pub mod context;
pub mod demo;
pub mod engine;
pub mod escape;
pub mod explain;
pub mod holders;
pub mod key;
pub mod locks;
pub mod model;
pub mod probe;
pub mod process;
pub mod proclocks;
pub mod scan;
pub mod state_dir;
pub mod sweep;
pub mod time_format;
pub mod tui;
pub mod watch;
