//! What an operator does with locks: hold a family on purpose (test
//! holders, in this process or a `locktop hold` child), ask "why is this
//! stuck?" (a family check naming every holder), and run the demo swarm.
//!
//! Invariants: every lock is taken through [`crate::locks`] (AIH lock
//! first, all-or-nothing); a check never creates a lock file for a member
//! that has none; a child holder never outlives this process.

pub mod check;
pub mod demo;
pub mod held;
pub mod hold_protocol;
pub mod signal;
pub mod test_holders;
pub mod verdict;
pub mod wait_for;
