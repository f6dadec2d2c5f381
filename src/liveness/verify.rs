//! Which PIDs named by `/proc/locks` really hold a claim.
//!
//! Invariants: a PID is a holder of a claim only when its fdinfo shows an
//! exclusive flock on the claim's gate or announce ([`HeldFiles`]), or —
//! where its fdinfo may not be read — when it started before the claim was
//! taken (the announce mtime); a PID whose process is gone is kept, as
//! gone, because the lock outlived the process that took it. Each PID's
//! fdinfo and `/proc/<pid>` are read once per verifier (one batch).

use std::collections::HashMap;
use std::time::{Duration, SystemTime};

use super::fdinfo::HeldFiles;
use super::proc_locks::FileId;
use super::process::ProcessInfo;
use crate::disk::LockKey;

/// How far a process's start time may lie after the claim's announce
/// mtime and still count as "started before": the start time is derived
/// from a whole-second boot time.
const START_TIME_SLACK: Duration = Duration::from_secs(1);

/// Verifies holder PIDs for one batch, reading each PID's `/proc` once.
#[derive(Debug, Default)]
pub struct HolderVerifier {
    processes: HashMap<u32, ProcessInfo>,
    held: HashMap<u32, HeldFiles>,
    /// Whether every process's fdinfo was read (for true holders).
    scanned_all: bool,
}

impl HolderVerifier {
    /// The PIDs of `candidates` (from `/proc/locks`, for the claim made of
    /// `files`, held since `since`) that are verified holders or gone.
    pub fn holders(
        &mut self,
        candidates: Vec<u32>,
        files: &[FileId],
        since: Option<SystemTime>,
    ) -> Vec<u32> {
        candidates
            .into_iter()
            .filter(|&pid| self.holds(pid, files, since) != Some(false))
            .collect()
    }

    /// `Some(true)`: `pid` is proved to hold one of `files`; `Some(false)`:
    /// it is proved not to (a reused PID); `None`: its process is gone.
    pub fn holds(&mut self, pid: u32, files: &[FileId], since: Option<SystemTime>) -> Option<bool> {
        let held = self.held.entry(pid).or_insert_with(|| HeldFiles::of(pid));
        match held {
            HeldFiles::Known(_) => Some(held.holds_any(files)),
            HeldFiles::Gone => None,
            HeldFiles::Unreadable => Some(started_before(self.process(pid), since)),
        }
    }

    /// The processes whose fds hold one of `files`, whoever called
    /// `flock()`: for a claim whose `/proc/locks` PID is gone (a forked
    /// child kept the lock). One pass over `/proc` per verifier.
    pub fn true_holders(&mut self, files: &[FileId]) -> Vec<u32> {
        if !self.scanned_all {
            self.held.extend(HeldFiles::of_every_process());
            self.scanned_all = true;
        }
        let mut pids: Vec<u32> = self
            .held
            .iter()
            .filter(|(_, held)| held.holds_any(files))
            .map(|(&pid, _)| pid)
            .collect();
        pids.sort_unstable();
        pids
    }

    /// Reads, up front, the `/proc` of every PID in `pids` not read yet
    /// (fdinfo and process details), spread over the machine's threads:
    /// what [`Self::holds`] and [`Self::process`] would read one PID at a
    /// time. 20 holders of 100 fds each are 2,000 fdinfo files.
    pub fn prefetch(&mut self, mut pids: Vec<u32>) {
        pids.sort_unstable();
        pids.dedup();
        pids.retain(|pid| !self.held.contains_key(pid));
        let threads = std::thread::available_parallelism()
            .map_or(1, usize::from)
            .min(pids.len());
        if threads <= 1 {
            for pid in pids {
                self.held.insert(pid, HeldFiles::of(pid));
                self.process(pid);
            }
            return;
        }
        let read = |chunk: &[u32]| -> Vec<(u32, HeldFiles, ProcessInfo)> {
            chunk
                .iter()
                .map(|&pid| (pid, HeldFiles::of(pid), ProcessInfo::of(pid)))
                .collect()
        };
        let read = &read;
        let found: Vec<(u32, HeldFiles, ProcessInfo)> = std::thread::scope(|scope| {
            let workers: Vec<_> = pids
                .chunks(pids.len().div_ceil(threads))
                .map(|chunk| scope.spawn(move || read(chunk)))
                .collect();
            workers
                .into_iter()
                .filter_map(|worker| worker.join().ok())
                .flatten()
                .collect()
        });
        for (pid, held, process) in found {
            self.held.insert(pid, held);
            self.processes.insert(pid, process);
        }
    }

    /// The process behind `pid`, read once.
    pub fn process(&mut self, pid: u32) -> &ProcessInfo {
        self.processes
            .entry(pid)
            .or_insert_with(|| ProcessInfo::of(pid))
    }
}

/// The files a claim is made of, as `/proc/locks` identifies them (the
/// gate and the announce, where they exist; never through a symlink).
pub fn claim_files(key: &LockKey) -> Vec<FileId> {
    [key.gate_path(), key.announce_path()]
        .iter()
        .filter_map(|path| FileId::of(path).ok())
        .collect()
}

/// True when `process` started before the claim was taken (`since`), as
/// far as the clocks tell; unknown times prove nothing and are refused.
fn started_before(process: &ProcessInfo, since: Option<SystemTime>) -> bool {
    match (process.started, since) {
        (Some(started), Some(since)) => started <= since + START_TIME_SLACK,
        _ => false,
    }
}

/// Real processes for tests of PID reuse.
#[cfg(test)]
pub(crate) mod testing {
    use std::io::BufRead;
    use std::path::Path;
    use std::process::{Child, Command, Stdio};

    /// Spawns `sleep 60` under PID `pid`, through
    /// `/proc/sys/kernel/ns_last_pid` (root only); retries while other
    /// forks take the PID first.
    pub(crate) fn sleep_with_pid(pid: u32) -> Child {
        for _ in 0..500 {
            std::fs::write("/proc/sys/kernel/ns_last_pid", (pid - 1).to_string())
                .expect("writing ns_last_pid (PID-reuse tests need root)");
            let mut child = Command::new("sleep")
                .arg("60")
                .spawn()
                .expect("spawn sleep");
            if child.id() == pid {
                return child;
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        panic!("could not spawn a process with pid {pid}");
    }

    /// A shell that opens `files` read-write, flocks each through
    /// util-linux `flock(1)` (so `/proc/locks` names that short-lived
    /// process, not the shell) and then becomes `sleep 60`, keeping the
    /// locked descriptions: the lock is held by a PID `/proc/locks` does not
    /// name, while the PIDs it names are gone.
    pub(crate) fn hold_through_flock(files: &[&Path]) -> Child {
        let mut script = String::new();
        for (index, _) in files.iter().enumerate() {
            let fd = 3 + index;
            let arg = index + 1;
            script.push_str(&format!("exec {fd}<>\"${arg}\" && flock -x {fd} && "));
        }
        script.push_str("echo ready && exec sleep 60");
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(script)
            .arg("sh")
            .args(files)
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawn sh");
        let mut line = String::new();
        let stdout = child.stdout.take().expect("piped");
        std::io::BufReader::new(stdout)
            .read_line(&mut line)
            .expect("read ready");
        assert_eq!(line.trim(), "ready", "the shell did not lock");
        child
    }
}

#[cfg(test)]
mod tests {
    use super::testing::{hold_through_flock, sleep_with_pid};
    use crate::disk::LockKey;
    use crate::liveness::annotate::annotate_with;
    use crate::liveness::proc_locks::LockIndex;
    use crate::liveness::{KeyState, Liveness};
    use std::collections::HashSet;

    /// The flock caller died, a forked descendant keeps the lock, and the
    /// caller's PID now belongs to an unrelated process: that process is
    /// never named as the holder (its fdinfo shows no lock).
    #[test]
    fn a_reused_pid_is_never_named_as_a_holder() {
        let state = tempfile::tempdir().unwrap();
        let key = LockKey::from_coord(state.path(), &state.path().join("locks/agents/tags"), "t");
        std::fs::create_dir_all(&key.dir).unwrap();
        let (gate, announce) = (key.gate_path(), key.announce_path());
        let mut keeper = hold_through_flock(&[&gate, &announce]);
        let index = LockIndex::read().unwrap();
        let callers = index.claim(&gate, &announce).holders;
        assert_eq!(callers.len(), 2, "one flock(1) per file: {callers:?}");
        assert!(!callers.contains(&keeper.id()));
        let mut impostor = sleep_with_pid(callers[0]);

        let mut batch = vec![(key.clone(), KeyState::bare(Liveness::Live))];
        // Re-reads are real: annotation reads again before it searches for
        // a gone caller's keeper (and the keeper still holds the lock).
        let mut reread = || LockIndex::read().unwrap_or_default();
        annotate_with(
            &mut batch,
            &index,
            &HashSet::new(),
            &mut reread,
            crate::liveness::annotate::Recheck::SharedProbe,
        );
        let holders = &batch[0].1.holders;
        assert!(
            !holders.iter().any(|p| p.pid == impostor.id()),
            "the reused PID was named: {holders:?}"
        );
        assert_eq!(
            holders.first().map(|p| p.pid),
            Some(keeper.id()),
            "the process that keeps the lock is found and named first: {holders:?}"
        );
        assert!(
            holders[1..].iter().all(|p| !p.alive),
            "then the gone flock caller, as gone: {holders:?}"
        );
        for child in [&mut keeper, &mut impostor] {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
