//! locktop — a terminal monitor for ObjectiveAI agent locks.
//!
//! Library face: [`locks`] (the seed's lock module) and [`context`]. The
//! rest serves the `locktop` binary. Modules are listed in the order data
//! flows, and each depends only on the ones above it:
//! filesystem events → probes → model → view.

pub mod context;
pub mod locks;
pub mod time_format;

pub mod cli;
pub mod disk;
pub mod engine;
pub mod liveness;
pub mod model;
pub mod operate;
pub mod tui;
