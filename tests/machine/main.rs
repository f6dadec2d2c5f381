//! The tests that need the machine to themselves: latency soaks whose
//! verdict is a bound on time on a busy host they make themselves (the
//! chaos runs: every hold of 250 ms or more reported, on a machine with
//! 2,000 foreign flocks and 20 churning holders; this process's fds and
//! RSS flat, the engine running in it).
//!
//! They are a test binary of their own so that nothing else runs beside
//! them: cargo runs test binaries one after the other (this one after
//! `integration`), and within this one each test takes
//! `common::serial`, whatever the thread count. Every other test runs
//! side by side with its neighbours (`tests/integration`), and is robust
//! to them for what it measures.

#[allow(dead_code, unused_imports)]
#[path = "../integration/common/mod.rs"]
mod common;

mod chaos;
