//! The seed's library face of locktop: where an ObjectiveAI agent's locks
//! are ([`locks::agent_instance_lock`], [`locks::agent_tag_lock`]), the
//! in-process gate in front of them ([`locks::AgentLockMap`] on
//! [`context::Context`]), and families of locks taken all or nothing
//! ([`locks::try_acquire_family`]).
//!
//! Its own crate, below everything else of locktop: the compiler keeps it
//! from naming the monitor (it depends on the SDK and nothing of
//! locktop's). The `locktop` crate re-exports both modules as
//! `locktop::locks` and `locktop::context`.

pub mod context;
pub mod locks;
