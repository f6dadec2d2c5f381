//! `locktop --connect`: a front end follows a `locktop serve`'s live view
//! (its `/view` stream, over the service's unix socket or HTTP(S))
//! instead of running an engine of its own — one tap per host, however
//! many monitors look.
//!
//! [`attach`] gives what [`locktop_core::engine::spawn`] gives (an
//! [`EngineHandle`](locktop_core::engine::EngineHandle) whose deltas the
//! front end follows as its own engine's) and a [`Link`] saying what it
//! is attached to and how old its last word is. A crate of its own: a
//! build of the monitor alone builds none of the HTTP and TLS crates.

use locktop_core::{engine, text};
use locktop_journal as journal;

// In the order data flows: what is named, how to reach it, one request,
// what the header says, the reader that uses them all.
pub mod client_config;
mod follow;
pub mod link;
pub mod target;
pub mod transport;

pub use client_config::ClientConfig;
pub use follow::{Attached, attach, fetch};
pub use link::Link;
pub use target::Target;
