//! The keys given a newer answer since a background job began (a periodic
//! sweep, a `/proc/locks` lookup): what the job says of them is older, and
//! must not overwrite that answer.
//!
//! Invariant: nothing is kept while no job runs.

use std::collections::HashSet;

use crate::disk::LockKey;

/// `Some` while a job runs: the keys probed, swept or removed since it
/// began.
#[derive(Debug, Default)]
pub(super) struct Newer(Option<HashSet<LockKey>>);

impl Newer {
    /// A job begins: from now on, newer answers are noted.
    pub(super) fn begin(&mut self) {
        self.0 = Some(HashSet::new());
    }

    /// Whether a job runs.
    pub(super) fn active(&self) -> bool {
        self.0.is_some()
    }

    /// Notes that `key` has an answer newer than the running job's (nothing
    /// if no job runs).
    pub(super) fn touch(&mut self, key: &LockKey) {
        if let Some(keys) = &mut self.0 {
            keys.insert(key.clone());
        }
    }

    /// Whether `key` got a newer answer since the running job began.
    pub(super) fn contains(&self, key: &LockKey) -> bool {
        self.0.as_ref().is_some_and(|keys| keys.contains(key))
    }

    /// The job is over (or disowned): the keys noted, and nothing kept.
    pub(super) fn end(&mut self) -> HashSet<LockKey> {
        self.0.take().unwrap_or_default()
    }
}
