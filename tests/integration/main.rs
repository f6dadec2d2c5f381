//! The integration tests: ONE binary with a module per area — `locks`,
//! `engine`, `cli`, `e2e` — so the helpers in `common` compile once.
//!
//! The tests run on parallel threads of one process; those that must not
//! overlap take `common::serial` (see there for which and why).

mod common;

mod locks;

mod engine;

mod cli;

mod e2e;

mod layering;

mod guarantees;
