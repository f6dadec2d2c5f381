//! Lock history on disk: the journal `locktop record` (and `serve
//! --journal`) writes, and `locktop replay` reads. A crate above
//! `locktop-core` and below the front ends; `locktop` re-exports it as
//! `locktop::journal`.
//!
//! A journal is NDJSON: a header line, a checkpoint (the whole state, as
//! several lines), then one line per change in the order the engine
//! reported them — a `watch --json` line with the key's directory and
//! whole state added — and a fresh checkpoint whenever the changes since
//! the last one outgrow it; a recording stopped cleanly ends with an end
//! line (when it stopped, whatever its last change). [`format`] is the schema, [`writer`] writes
//! (checkpoints, rotation), and [`reader`] reads a set of files back in
//! time order (the state at any time, the lines after any point). Both
//! sides keep the state in the engine's own [`crate::engine::fold::Fold`],
//! so a recording and its replay can never disagree on what a sequence of
//! changes means.

// The core's modules, named from here as `crate::engine` and so on.
use locktop_core::{disk, engine, liveness, locks, operate, text, time_format};

pub mod format;
pub mod live;
pub mod reader;
pub mod recorder;
pub mod time_arg;
pub mod writer;

#[cfg(test)]
mod tests;

pub use reader::{Doubt, Gap, GapWhy, JournalSet, Position, Replayed};
pub use recorder::{JournalWriter, Recorder};
pub use writer::{Failure, Journal, Output, Recording};
