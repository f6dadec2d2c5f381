//! locktop — a terminal monitor for ObjectiveAI agent locks.
//!
//! Library face: [`locks`] (the seed's lock module) and [`context`]. The
//! rest serves the `locktop` binary. Modules are declared in the order
//! data flows, and each uses only the ones declared before it (`context`
//! and `locks` are one layer); `tests/integration/layering.rs` fails on
//! any import against this order, in code and tests alike:
//!
//! | module | job |
//! |---|---|
//! | [`context`], [`locks`] | the seed: coordinates, the in-process gate, families — nothing else of the crate below them |
//! | [`time_format`] | how times and paths are written for people and scripts |
//! | [`text`] | names from the watched tree made inert for a terminal (one escaping for every text face) |
//! | [`disk`] | what is on disk: the state dir, a claim's name ([`disk::LockKey`]), the scan of `<state>/locks` |
//! | [`liveness`] | how liveness and holders are learned: probes, `/proc/locks`, `/proc/<pid>` |
//! | [`engine`] | filesystem events → coalesced changes → probes → [`engine::Delta`]s |
//! | [`operate`] | what an operator does: test holders, family checks, signals, the demo swarm |
//! | [`model`] | pure view state folded from deltas |
//! | [`journal`] | lock history on disk: the journal `record` writes and `replay` reads |
//! | [`tui`] | the terminal UI: key map, views, event loop |
//! | [`cli`] | clap definitions, one module per subcommand |
//!
//! Data flows one way: filesystem events → probes → model → view.

// The seed is a crate of its own (`crates/locks`), below all of these:
// re-exported, so `locktop::locks` and `crate::locks` name it as before.
pub use locktop_locks::{context, locks};

// One declaration per layer, each apart from the next: rustfmt would sort
// a contiguous group alphabetically, and this order is the layering.

pub mod time_format;

pub mod text;

pub mod disk;

pub mod liveness;

pub mod engine;

pub mod operate;

pub mod model;

pub mod journal;

pub mod tui;

pub mod cli;
