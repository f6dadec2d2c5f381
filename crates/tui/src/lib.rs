//! locktop's terminal UI, above the core and the journal: [`model`], the
//! view state folded from the engine's deltas (pure: no I/O), and [`tui`],
//! the monitor drawn from it (key map, views, event loop, the replay
//! monitor). `locktop` re-exports both as `locktop::model` and
//! `locktop::tui`. `model` is declared first and never uses `tui`
//! (`tests/integration/layering.rs` checks the order).

// The crates below, named from here as `crate::engine` and so on.
use locktop_core::{context, disk, engine, liveness, locks, operate, stream, text, time_format};
use locktop_journal as journal;

// One declaration per layer, apart: this order is the layering.
pub mod model;

pub mod tui;
