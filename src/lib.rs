//! locktop — a terminal monitor for ObjectiveAI agent locks.
//!
//! The workspace's crates are its layers, lowest first: `locktop-locks`
//! (the seed: [`locks`] and [`context`]), `locktop-core` ([`time_format`],
//! [`text`], [`disk`], [`liveness`], [`engine`], [`operate`]),
//! `locktop-journal` ([`journal`]), and this crate, the front ends,
//! re-exporting them all so every path stays `locktop::…`. Its own
//! modules are declared in the order data flows, and each uses only the
//! ones declared before it;
//! `tests/integration/layering.rs` fails on any import against this
//! order, in code and tests alike:
//!
//! | module | job |
//! |---|---|
//! | [`model`] | pure view state folded from deltas |
//! | [`tui`] | the terminal UI: key map, views, event loop |
//! | [`cli`] | clap definitions, one module per subcommand |
//!
//! Data flows one way: filesystem events → probes → model → view.

// The seed, the core and the journal are crates of their own
// (`crates/locks`, `crates/core`, `crates/journal`), below all of these:
// re-exported, so `locktop::engine` and `crate::engine` name them as
// before.
pub use locktop_core::{disk, engine, liveness, operate, text, time_format};
pub use locktop_journal as journal;
pub use locktop_locks::{context, locks};

// One declaration per layer, each apart from the next: rustfmt would sort
// a contiguous group alphabetically, and this order is the layering.
pub mod model;

pub mod tui;

pub mod cli;
