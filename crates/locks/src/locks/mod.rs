//! Lock coordinates for the per-agent lockfiles, and the in-process gate
//! that makes them mutually exclusive inside one process too.
//!
//! Two families, both under the per-state locks root and both held through
//! [`objectiveai_sdk::lockfile`] (contents are always empty — these locks
//! carry liveness, not data):
//!
//! - **Per-instance**: `<state>/locks/agents/instances/<…>` — the
//!   agent_instance_hierarchy (AIH) is split on `/`; every segment but the
//!   last becomes a literal subdirectory, the last segment is the lockfile
//!   key (the SDK escapes the key; directory segments ride raw). A held
//!   instance lock ⇔ a live process owns that agent.
//! - **Per-tag**: `<state>/locks/agents/tags` keyed by the tag name — held
//!   while a spawn is materializing an un-upgraded (GROUPED) tag, released
//!   once the spawn claims its minted AIH lock.
//!
//! No `create_dir_all` here — the SDK's acquire functions create the
//! directory chain themselves.
//!
//! # In-process gate
//!
//! `objectiveai_sdk::lockfile` is a cross-PROCESS mutex that is REENTRANT
//! in-process (its HELD map refcounts per process), so two concurrent
//! in-process tasks acquiring the SAME agent key both succeed reentrantly
//! instead of mutually excluding. [`AgentLock`] closes that gap: every
//! agent lock is taken through [`try_acquire`]/[`wait_acquire`] here, which
//! lock a per-key in-process [`tokio::sync::Mutex`] (the [`AgentLockMap`]
//! on [`crate::context::Context`]) FIRST, then the lockfile — and release
//! the lockfile claim FIRST, then the in-process guard LAST. The in-process
//! lock both precedes and succeeds the cross-process one.
//!
//! Files: [`coords`] (paths and validation), [`gate`] (one lock, both
//! layers), [`family`] (all-or-nothing sets), [`error`].

pub mod coords;
pub mod error;
pub mod escape;
pub mod family;
pub mod files;
pub mod gate;

pub use coords::{
    agent_instance_lock, agent_tag_lock, instances_root, locks_root, tags_root, validate_aih,
    validate_tag,
};
pub use error::LocksError;
pub use family::{
    AcquiredFamily, Family, IN_FLIGHT_AFTER, WAIT_POLL, family_coords, obstacle,
    try_acquire_family, try_acquire_family_checked, try_acquire_family_detailed, unavailable,
    wait_acquire_family,
};
pub use files::{Unfit, check_openable, check_writable};
pub use gate::{
    AgentLock, AgentLockMap, Busy, dedup_coords, is_taken, prune_idle, try_acquire,
    try_acquire_all, try_acquire_all_detailed, wait_acquire,
};
