//! locktop's core, below every front end: what is on disk, how liveness
//! is learned, the engine that turns both into [`engine::Delta`]s, and
//! what an operator does. Modules are declared in the order data flows,
//! and each uses only the ones declared before it (and the seed's crate,
//! re-exported here as [`locks`] and [`context`]);
//! `tests/integration/layering.rs` fails on any import against this
//! order. The front ends (`locktop`'s model, journal, TUI and commands)
//! depend on this crate; it names none of them — the compiler says so.
//!
//! | module | job |
//! |---|---|
//! | [`time_format`] | how times and paths are written for people and scripts |
//! | [`text`] | names from the watched tree made inert for a terminal (one escaping for every text face) |
//! | [`disk`] | what is on disk: the state dir, a claim's name ([`disk::LockKey`]), the scan of `<state>/locks` |
//! | [`liveness`] | how liveness and holders are learned: the kernel's lock events, probes, `/proc/locks`, `/proc/<pid>` |
//! | [`engine`] | filesystem events and lock events → coalesced changes → judgements → [`engine::Delta`]s |
//! | [`operate`] | what an operator does: test holders, family checks, signals, the demo swarm; the one held view (holders, roles, verdicts) |
//! | [`stream`] | the change stream `watch`, `serve`'s `/events`, `record` and `replay` tell: lines, their coalescing queue, text and NDJSON |

pub use locktop_locks::{context, locks};

// One declaration per layer, each apart from the next: rustfmt would sort
// a contiguous group alphabetically, and this order is the layering.
pub mod time_format;

pub mod unread;

pub mod exact_timer;

pub mod text;

pub mod disk;

pub mod liveness;

pub mod engine;

pub mod operate;

pub mod stream;
