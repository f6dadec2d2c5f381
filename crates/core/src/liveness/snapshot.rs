//! One snapshot of a whole state dir: scan + probe + holders, once — what
//! `locktop snapshot` prints, and what the engine bench times.
//!
//! Invariants: as the probes' and the annotation's (a lock-free snapshot
//! takes no lock and opens no claim file; a passive one never writes and
//! never takes an exclusive lock); nothing is created,
//! not even a missing locks dir.

use std::collections::HashSet;
use std::io::ErrorKind;
use std::path::Path;
use std::sync::Arc;

use anyhow::Context as _;

use crate::context::Context;
use crate::disk::problem::ScanProblem;
use crate::liveness::annotate::{Recheck, annotate_reading};
use crate::liveness::bulk::{self, ReadLocks};
use crate::liveness::probe::{ProbeMode, Prober};
use crate::liveness::probed::Probed;
use crate::liveness::proc_locks::LockIndex;
use crate::liveness::unlinked::{self, KnownInodes};

/// A whole snapshot: keys (and problems) at one moment.
pub struct Snapshot {
    /// Every claim with its probed state, unsorted ([`Probed::sort`] and
    /// [`Probed::iter_sorted`] list them by kind then name).
    pub keys: Probed,
    /// Everything under the root that is not a claim.
    pub problems: Vec<ScanProblem>,
}

/// Takes a snapshot of `state_dir` (scan + probe in `mode` + holders): an
/// error if the state dir is missing, empty if its locks dir is.
pub async fn take(state_dir: &Path, mode: ProbeMode) -> anyhow::Result<Snapshot> {
    crate::disk::state_dir::require_existing(state_dir)?;
    let root = crate::locks::locks_root(state_dir);
    if std::fs::symlink_metadata(&root).is_err_and(|error| error.kind() == ErrorKind::NotFound) {
        // No agent has taken a lock under this state dir yet: nothing is
        // held, which is an answer, not an error (`check` says "free",
        // `watch` waits for the dir).
        return Ok(Snapshot {
            keys: Probed::default(),
            problems: Vec::new(),
        });
    }
    let cannot_read = || format!("cannot read locks dir {}", root.display());
    let prober = Prober::new(Context::new(state_dir.to_path_buf()));
    let own = HashSet::from([std::process::id()]);
    // One `/proc/locks` read names the holders and finds claim files held
    // though unlinked, which no key leads to.
    let read: ReadLocks = Arc::new(|| LockIndex::read().unwrap_or_default());
    let threads = std::thread::available_parallelism().map_or(2, usize::from);
    let (keys, report, index) = match mode {
        ProbeMode::LockFree => {
            let tree = bulk::probe_tree_lock_free(state_dir, &own, threads, read, None)
                .await
                .with_context(cannot_read)?;
            (tree.batch, tree.report, tree.index)
        }
        ProbeMode::Passive => {
            let tree = bulk::probe_tree_passive(state_dir, &prober, &own, threads, read)
                .await
                .with_context(cannot_read)?;
            (tree.batch, tree.report, tree.index)
        }
        ProbeMode::Acquire => {
            let mut report = crate::disk::scan::scan_root(state_dir)
                .await
                .with_context(cannot_read)?;
            let keys = std::mem::take(&mut report.keys);
            let mut keys = bulk::probe_all_unannotated(&prober, keys, mode).await;
            let index = annotate_reading(&mut keys, &own, &*read, Recheck::SharedProbe);
            (Probed::of(keys), report, index)
        }
    };
    let known = KnownInodes::new(report.claim_inodes);
    // (Sorted by the caller: a million free keys only when it lists them.)
    let mut problems = report.problems;
    problems.extend(unlinked::find(state_dir, &index, &known));
    problems.sort();
    Ok(Snapshot { keys, problems })
}
