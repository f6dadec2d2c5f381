//! Which PIDs named by `/proc/locks` really hold a claim, and who keeps a
//! lock whose caller is gone.
//!
//! Invariants: a PID is listed as a holder only when its fdinfo shows a
//! flock on the claim's gate or announce ([`HeldFiles`]) — or, where its
//! fdinfo may not be read, marked unverified, and only when it started
//! before the claim was taken (the announce mtime, against a start time
//! precise to [`START_TIME_SLACK`]). A PID `/proc/locks` names that no
//! longer holds the lock because its process is gone, or because the PID
//! now belongs to a process started after the claim, is the lock's taker,
//! listed as gone (never with the new process's details): the lock
//! outlived it, and whoever keeps it (a forked child, found by
//! [`HolderVerifier::resolve`]) is listed first. Each PID's fdinfo and
//! `/proc/<pid>` are read once per verifier (one batch).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::SystemTime;

use super::fdinfo::{HeldFiles, keepers_of};
use super::proc_locks::FileId;
use super::process::{HolderDetail, ProcState, ProcessInfo, START_TIME_SLACK};
use crate::disk::LockKey;

/// What one PID `/proc/locks` names proves about its hold on a claim.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hold {
    /// Its fdinfo shows a flock on one of the claim's files.
    Verified,
    /// Its fdinfo may not be read; it did not start after the claim was
    /// taken, so it may hold it — or be a PID reused within the start
    /// time's precision. Listed, marked unverified; never signalled.
    Unverified,
    /// Its process started after the claim was taken: the PID was reused,
    /// and the process that took the lock is gone.
    Reused,
    /// Its fdinfo shows no flock on the claim's files, and nothing says
    /// its PID was reused: it let go (closed its fd) — not a holder.
    LetGo,
    /// Its process is gone.
    Gone,
}

impl Hold {
    /// True when the PID is listed as holding the claim now.
    pub(crate) fn is_holding(self) -> bool {
        matches!(self, Hold::Verified | Hold::Unverified)
    }

    /// True when the PID took the lock and its process is gone since.
    fn is_gone_taker(self) -> bool {
        matches!(self, Hold::Reused | Hold::Gone)
    }
}

/// Who holds one claim, as [`HolderVerifier::resolve`] found out.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Resolved {
    /// The holders: those that hold it now first (verified, or marked
    /// unverified), then the gone processes that took it.
    pub holders: Vec<ProcessInfo>,
    /// A read made after the first one lists no lock on the claim's
    /// files: it was let go meanwhile.
    pub released: bool,
    /// Every taker named has closed the claim's files (it runs and let
    /// go, or it is gone), no keeper found before still keeps it, and the
    /// search was left for later ([`HolderVerifier::deferring_keepers`]):
    /// nobody is named yet.
    pub taker_let_go: bool,
}

/// The keepers last found per claim (its files): a hint, re-verified
/// through fdinfo before use, that spares the search of every process
/// at each lookup of an orphaned lock. Bounded: cleared when full.
static KEEPER_HINTS: Mutex<Option<HashMap<Vec<FileId>, Vec<u32>>>> = Mutex::new(None);

/// Below this many PIDs per thread, [`HolderVerifier::prefetch`] reads
/// them on the calling thread.
const PIDS_PER_THREAD: usize = 8;

/// The machine's threads, asked once (each ask reads cgroup files).
fn machine_threads() -> usize {
    static THREADS: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *THREADS.get_or_init(|| std::thread::available_parallelism().map_or(1, usize::from))
}

/// How many claims [`KEEPER_HINTS`] remembers before it starts afresh.
const KEEPER_HINTS_MAX: usize = 1024;

/// Where processes' fds on claims' files were seen last: per PID, fd
/// numbers. Only a hint — a hinted fd's fdinfo proves a hold by what it
/// shows now, whatever that fd is open on; no hint, or none that proves
/// it, costs the usual walk of the process's fds.
pub(crate) type FdHints = HashMap<u32, Vec<i32>>;

/// Verifies holder PIDs for one batch, reading each PID's `/proc` once.
#[derive(Debug, Default)]
pub(crate) struct HolderVerifier {
    processes: HashMap<u32, ProcessInfo>,
    held: HashMap<u32, HeldFiles>,
    /// Whether [`Self::resolve`] leaves the keeper search for later when
    /// every taker named runs and let go.
    defer_keepers: bool,
    /// Fds to read the fdinfo of before walking a process's fds.
    fd_hints: FdHints,
    /// How much of each process is read.
    detail: HolderDetail,
}

impl HolderVerifier {
    /// A verifier for a lock table kept current by the kernel's events:
    /// a taker that has closed the claim's files — it runs and let go, or
    /// it died — is most often releasing it (its unlock is on its way), so
    /// the search of every process for a keeper (a `stat` of every fd on
    /// the machine: tens of ms on a loaded host) is left to the caller,
    /// which asks again a moment later if the lock still stands
    /// ([`Resolved::taker_let_go`]); the keepers found before, still
    /// verified, are named at once. A PID reused since is searched for at
    /// once: its taker died long ago.
    pub(crate) fn deferring_keepers() -> Self {
        Self {
            defer_keepers: true,
            ..Self::default()
        }
    }

    /// This verifier, reading the fdinfo of the fds `hints` names for a
    /// process before it walks the process's fds.
    pub(crate) fn with_fd_hints(self, hints: FdHints) -> Self {
        Self {
            fd_hints: hints,
            ..self
        }
    }

    /// This verifier, reading of each process what `detail` asks for.
    pub(crate) fn with_detail(self, detail: HolderDetail) -> Self {
        Self { detail, ..self }
    }

    /// What is known of the files `pid` holds, enough to say whether it
    /// holds one of `files`: a hinted fd's fdinfo showing one, else one
    /// of its few newest fds' ([`HeldFiles::proved_at_top`]), else a
    /// search of its fds from the newest down that stops at one showing
    /// it ([`HeldFiles::searched`]; what each search proves adds up),
    /// else (and once for all) a read of all its fds.
    fn held_files(&mut self, pid: u32, files: &[FileId]) -> &HeldFiles {
        let known = match self.held.get(&pid) {
            Some(HeldFiles::Proved(proved)) => files.iter().any(|file| proved.contains(file)),
            Some(_) => true,
            None => false,
        };
        if !known {
            let hinted = match self.held.contains_key(&pid) {
                false => self
                    .fd_hints
                    .get(&pid)
                    .and_then(|fds| HeldFiles::proved_through(pid, fds, files)),
                true => None,
            };
            // A hint, else its newest fds read without a listing, else a
            // search of its fds from the newest down, else (no fd on
            // these files shows a lock) a read of all of them.
            let found = hinted
                .or_else(|| HeldFiles::proved_at_top(pid, files))
                .or_else(|| HeldFiles::searched(pid, files))
                .unwrap_or_else(|| HeldFiles::of(pid));
            let merged = match (self.held.remove(&pid), found) {
                (Some(HeldFiles::Proved(mut before)), HeldFiles::Proved(now)) => {
                    before.extend(now);
                    HeldFiles::Proved(before)
                }
                (_, found) => found,
            };
            self.held.insert(pid, merged);
        }
        &self.held[&pid]
    }

    /// What `pid` (named by `/proc/locks` for the claim made of `files`,
    /// held since `since`) proves about its hold on it.
    pub fn hold(&mut self, pid: u32, files: &[FileId], since: Option<SystemTime>) -> Hold {
        let held = self.held_files(pid, files);
        let proved = match held {
            HeldFiles::Known(_) | HeldFiles::Proved(_) => Some(held.holds_any(files)),
            HeldFiles::Gone => return Hold::Gone,
            HeldFiles::Unreadable => None,
        };
        // A zombie has closed every file: it holds nothing, whoever may
        // read its fdinfo. The lock it took outlived it.
        if self.process(pid).state == Some(ProcState::Zombie) {
            return Hold::Gone;
        }
        let reused = started_after(self.process(pid), since);
        match (proved, reused) {
            (Some(true), _) => Hold::Verified,
            (_, true) => Hold::Reused,
            (Some(false), false) => Hold::LetGo,
            (None, false) => Hold::Unverified,
        }
    }

    /// The holders of the claim made of `files` (held since `since`),
    /// from the PIDs a `/proc/locks` read names for it (`named`): those
    /// that hold it. When none does, `fresh` names them from a read made
    /// now — a caller killed a moment ago is listed until its files are
    /// closed — and if the lock is still there, its takers are gone: whoever
    /// keeps it is searched for ([`Self::keepers`]) and listed first, the
    /// takers (named by both reads) after, as gone.
    pub fn resolve(
        &mut self,
        named: &[u32],
        files: &[FileId],
        since: Option<SystemTime>,
        fresh: &mut dyn FnMut() -> Vec<u32>,
    ) -> Resolved {
        let holds: Vec<(u32, Hold)> = named
            .iter()
            .map(|&pid| (pid, self.hold(pid, files, since)))
            .collect();
        if named.is_empty() || holds.iter().any(|(_, hold)| hold.is_holding()) {
            return Resolved {
                holders: self.listed(&holds),
                ..Resolved::default()
            };
        }
        let again = fresh();
        if again.is_empty() {
            return Resolved {
                released: true,
                ..Resolved::default()
            };
        }
        let again: Vec<(u32, Hold)> = again
            .into_iter()
            .map(|pid| (pid, self.hold(pid, files, since)))
            .collect();
        if again.iter().any(|(_, hold)| hold.is_holding()) {
            return Resolved {
                holders: self.listed(&again),
                ..Resolved::default()
            };
        }
        let keepers = if self.defer_keepers
            && again
                .iter()
                .all(|(_, hold)| matches!(hold, Hold::LetGo | Hold::Gone))
        {
            // Its release is most likely on its way (a taker that let go,
            // or died: a dying process closes every file). Only the
            // keepers found last time, still verified, are named now.
            let hinted = self.hinted_keepers(files);
            if hinted.is_empty() {
                return Resolved {
                    taker_let_go: true,
                    ..Resolved::default()
                };
            }
            hinted
        } else {
            self.keepers(files)
        };
        let takers: Vec<(u32, Hold)> = holds
            .into_iter()
            .filter(|(pid, _)| again.iter().any(|(other, _)| other == pid))
            .map(|(pid, hold)| (pid, self.judged_by_keepers(pid, hold, &keepers)))
            .collect();
        let mut holders: Vec<ProcessInfo> = keepers
            .into_iter()
            .map(|pid| self.process(pid).clone())
            .collect();
        holders.extend(self.listed(&takers));
        Resolved {
            holders,
            ..Resolved::default()
        }
    }

    /// A taker that does not hold the lock it took ([`Hold::LetGo`] by the
    /// file's times), judged again by the processes that keep the lock
    /// (`keepers`), which no file time can move: every keeper had the
    /// lock's open file before its taker died (it opened it and the taker
    /// inherited it, or the taker forked it), and a PID is reused only
    /// after its process died. So a process started after the eldest
    /// keeper, and not a keeper's child, is a PID reused since: the
    /// taker is gone.
    fn judged_by_keepers(&mut self, pid: u32, hold: Hold, keepers: &[u32]) -> Hold {
        if hold != Hold::LetGo {
            return hold;
        }
        let eldest = keepers
            .iter()
            .filter_map(|&keeper| self.process(keeper).started)
            .min();
        let process = self.process(pid);
        let a_keepers_child = process.ppid.is_some_and(|ppid| keepers.contains(&ppid));
        if !a_keepers_child && started_after(process, eldest) {
            Hold::Reused
        } else {
            hold
        }
    }

    /// The SHARED holders of a claim made of `files` among `pids` (from
    /// `/proc/locks`, which needs no privilege), resolved as
    /// [`Self::resolve`] resolves exclusive ones (`fresh` names the shared
    /// holders a read made now lists): verified, or marked unverified
    /// where fdinfo may not be read; a caller gone with its lock released
    /// is no holder, one whose lock outlived it is listed after its keeper
    /// — or, for a verifier [`Self::deferring_keepers`], noted
    /// [`Resolved::taker_let_go`] with the search left for later.
    pub(crate) fn shared_holders(
        &mut self,
        pids: &[u32],
        files: &[FileId],
        fresh: &mut dyn FnMut() -> Vec<u32>,
    ) -> Resolved {
        self.resolve(pids, files, None, fresh)
    }

    /// `holds` as listed: holding first (unverified ones marked), then the
    /// gone takers — never the process a reused PID names now.
    fn listed(&mut self, holds: &[(u32, Hold)]) -> Vec<ProcessInfo> {
        let holding = holds.iter().filter(|(_, hold)| hold.is_holding());
        let gone = holds.iter().filter(|(_, hold)| hold.is_gone_taker());
        holding
            .chain(gone)
            .map(|&(pid, hold)| match hold {
                // A reused PID's process is not the taker; a zombie taker
                // has exited: neither is described as running.
                Hold::Reused | Hold::Gone => ProcessInfo::gone(pid),
                Hold::Unverified => ProcessInfo {
                    unverified: true,
                    ..self.process(pid).clone()
                },
                _ => self.process(pid).clone(),
            })
            .collect()
    }

    /// The processes whose own fds hold one of `files`, whoever called
    /// `flock()` (a forked child kept the lock): the ones found last time
    /// for these files if their fdinfo still shows it, else a search of
    /// every process ([`keepers_of`]: a `stat` per fd, an fdinfo read
    /// only for fds open on the claim).
    pub(crate) fn keepers(&mut self, files: &[FileId]) -> Vec<u32> {
        let still = self.hinted_keepers(files);
        if !still.is_empty() {
            return still;
        }
        let found = keepers_of(files);
        if let Ok(mut hints) = KEEPER_HINTS.lock() {
            let hints = hints.get_or_insert_with(HashMap::new);
            if hints.len() >= KEEPER_HINTS_MAX {
                hints.clear();
            }
            hints.insert(files.to_vec(), found.clone());
        }
        found
    }

    /// The keepers found last time for `files` whose fdinfo still shows
    /// the lock (no search).
    fn hinted_keepers(&mut self, files: &[FileId]) -> Vec<u32> {
        let hinted = KEEPER_HINTS
            .lock()
            .ok()
            .and_then(|hints| hints.as_ref()?.get(files).cloned())
            .unwrap_or_default();
        hinted
            .into_iter()
            .filter(|&pid| self.hold(pid, files, None) == Hold::Verified)
            .collect()
    }

    /// Reads, up front, the `/proc` of every PID in `pids` not read yet
    /// (fdinfo and process details), spread over the machine's threads,
    /// when there are enough of them to be worth threads: what
    /// [`Self::hold`] and [`Self::process`] would read one PID at a time
    /// (20 holders of 100 fds each are 2,000 fdinfo files). A few are read
    /// when asked, only as far as asked.
    pub(crate) fn prefetch(&mut self, mut pids: Vec<u32>) {
        pids.sort_unstable();
        pids.dedup();
        // A hinted PID is read when asked: its hint most often proves its
        // hold through one fdinfo, with no walk of its fds.
        pids.retain(|pid| !self.held.contains_key(pid) && !self.fd_hints.contains_key(pid));
        // A thread costs more than reading a few PIDs (under churn, a
        // lookup names a handful): threads only for many.
        let threads = machine_threads().min(pids.len() / PIDS_PER_THREAD);
        if threads <= 1 {
            // Read when asked, as much as asked: a search of a holder's
            // fds most often stops at its newest few.
            return;
        }
        let detail = self.detail;
        let read = |chunk: &[u32]| -> Vec<(u32, HeldFiles, ProcessInfo)> {
            chunk
                .iter()
                .map(|&pid| (pid, HeldFiles::of(pid), ProcessInfo::read(pid, detail)))
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
            .or_insert_with(|| ProcessInfo::read(pid, self.detail))
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

/// True when `process` started after the claim was taken (`since`), as
/// far as the clocks tell: then it cannot be the process that took it.
/// Unknown times prove nothing.
fn started_after(process: &ProcessInfo, since: Option<SystemTime>) -> bool {
    match (process.started, since) {
        (Some(started), Some(since)) => started > since + START_TIME_SLACK,
        _ => false,
    }
}

/// Real processes for tests of PID reuse.
#[cfg(any(test, feature = "test-support"))]
pub mod testing {
    use std::io::BufRead;
    use std::path::Path;
    use std::process::{Child, Command, Stdio};

    /// True when this test may make PIDs reused (write
    /// `/proc/sys/kernel/ns_last_pid`: root, or root of its own PID
    /// namespace). Otherwise runs the test `path` again, in a user and PID
    /// namespace of its own (util-linux `unshare`), where it may; false
    /// then, for the caller to return — the test passed in there, or this
    /// panics with its output. Without `unshare`, one line says what to
    /// install, and the test is skipped (failed under
    /// `LOCKTOP_REQUIRE_ALL`, as `.ci/run` sets).
    pub fn may_reuse_pids(path: &str) -> bool {
        // Opening is allowed to anyone; the write checks the capability.
        // Writing back the value read changes nothing that matters.
        let knob = "/proc/sys/kernel/ns_last_pid";
        let writable = std::fs::read_to_string(knob)
            .and_then(|last| std::fs::write(knob, last.trim()))
            .is_ok();
        if writable {
            return true;
        }
        assert!(
            std::env::var_os(IN_OWN_NAMESPACE).is_none(),
            "ns_last_pid is not writable in this test's own PID namespace"
        );
        let exe = std::env::current_exe().expect("the test binary");
        let ran = Command::new("unshare")
            .args([
                "--user",
                "--map-root-user",
                "--pid",
                "--fork",
                "--mount-proc",
            ])
            .arg(exe)
            .args(["--exact", path, "--test-threads=1", "--nocapture"])
            .env(IN_OWN_NAMESPACE, "1")
            .output();
        match ran {
            // `--exact` with a wrong path runs nothing, and succeeds.
            Ok(out)
                if out.status.success()
                    && String::from_utf8_lossy(&out.stdout).contains(" 1 passed") =>
            {
                false
            }
            Ok(out) => panic!(
                "{path}, run in a PID namespace of its own, failed:\n{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ),
            Err(error) => {
                let line = format!(
                    "skipped {path}: not root, and no util-linux `unshare` to make a PID \
                     namespace ({error}); install util-linux (apt-get install util-linux)"
                );
                assert!(std::env::var_os("LOCKTOP_REQUIRE_ALL").is_none(), "{line}");
                // Past the test harness's capture: shown even when the test passes.
                let _ = std::io::Write::write_all(
                    &mut std::io::stderr(),
                    format!("{line}\n").as_bytes(),
                );
                false
            }
        }
    }

    /// True when this process is root; otherwise one line says that `path`
    /// is skipped and `why` it needs root (failed under
    /// `LOCKTOP_REQUIRE_ALL`, as `.ci/run` sets, which runs as root).
    #[cfg(test)]
    pub(crate) fn is_root_or_skip(path: &str, why: &str) -> bool {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } == 0 {
            return true;
        }
        let line = format!("skipped {path}: needs root — {why}");
        assert!(std::env::var_os("LOCKTOP_REQUIRE_ALL").is_none(), "{line}");
        // Past the test harness's capture: shown even when the test passes.
        let _ = std::io::Write::write_all(&mut std::io::stderr(), format!("{line}\n").as_bytes());
        false
    }

    /// Set in a test re-run by [`may_reuse_pids`] in its own namespace.
    const IN_OWN_NAMESPACE: &str = "LOCKTOP_TEST_IN_OWN_PID_NAMESPACE";

    /// Spawns `sleep 60` under PID `pid`, through
    /// `/proc/sys/kernel/ns_last_pid` (see [`may_reuse_pids`]); retries
    /// while other forks take the PID first.
    pub fn sleep_with_pid(pid: u32) -> Child {
        for _ in 0..500 {
            std::fs::write("/proc/sys/kernel/ns_last_pid", (pid - 1).to_string())
                .expect("writing ns_last_pid (see may_reuse_pids)");
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
    pub fn hold_through_flock(files: &[&Path]) -> Child {
        hold_through_flock_naming(files).0
    }

    /// [`hold_through_flock`], with the PIDs of the gone `flock(1)`
    /// callers, one per file (inside a PID namespace of its own,
    /// `/proc/locks` hides the locks of gone callers, so it cannot name
    /// them).
    pub(crate) fn hold_through_flock_naming(files: &[&Path]) -> (Child, Vec<u32>) {
        let mut script = String::from("pids=; ");
        for (index, _) in files.iter().enumerate() {
            let fd = 3 + index;
            let arg = index + 1;
            script.push_str(&format!(
                "exec {fd}<>\"${arg}\" && {{ flock -x {fd} & p=$!; wait $p; }} && pids=\"$pids $p\" && "
            ));
        }
        script.push_str("echo ready$pids && exec sleep 60");
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
        let mut words = line.split_whitespace();
        assert_eq!(words.next(), Some("ready"), "the shell did not lock");
        let callers = words.map(|pid| pid.parse().expect("a PID")).collect();
        (child, callers)
    }
}

#[cfg(test)]
mod tests {
    use super::testing::{hold_through_flock, hold_through_flock_naming, sleep_with_pid};
    use super::{HolderDetail, HolderVerifier, START_TIME_SLACK};
    use crate::disk::LockKey;
    use crate::liveness::annotate::annotate_with;
    use crate::liveness::proc_locks::LockIndex;
    use crate::liveness::{KeyState, Liveness};
    use std::collections::HashSet;
    use std::io::BufRead;
    use std::process::{Command, Stdio};

    /// A verifier asked for PIDs only reads no process's names, whether
    /// it reads a process on its own or prefetches many.
    #[test]
    fn a_pid_only_verifier_reads_no_names() {
        let me = std::process::id();
        let mut one = HolderVerifier::default().with_detail(HolderDetail::PidOnly);
        let mut many = HolderVerifier::default().with_detail(HolderDetail::PidOnly);
        many.prefetch((0..64).map(|_| me).chain([1]).collect());
        for verifier in [&mut one, &mut many] {
            let process = verifier.process(me).clone();
            assert!(process.alive && process.started.is_some(), "{process:?}");
            assert_eq!(process.cmdline, None, "{process:?}");
        }
        assert!(HolderVerifier::default().process(me).cmdline.is_some());
    }

    /// The fds read to prove one claim prove every lock they show: a
    /// holder's other claim (its tag, judged in the same batch as its
    /// instance) is answered from what was read for the first — here
    /// after the holder is gone, so nothing could have been read again.
    #[test]
    fn the_fds_read_for_one_claim_prove_the_holders_other_claims() {
        use super::Hold;
        use crate::liveness::proc_locks::FileId;
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a.lock"), dir.path().join("b.lock"));
        for path in [&a, &b] {
            std::fs::write(path, b"").unwrap();
        }
        let (id_a, id_b) = (FileId::of(&a).unwrap(), FileId::of(&b).unwrap());
        let mut holder = hold_through_flock(&[&a, &b]);
        let pid = holder.id();
        let mut verifier = HolderVerifier::default();
        assert_eq!(verifier.hold(pid, &[id_a], None), Hold::Verified);
        holder.kill().unwrap();
        holder.wait().unwrap();
        assert_eq!(verifier.hold(pid, &[id_b], None), Hold::Verified);
        assert_eq!(
            HolderVerifier::default().hold(pid, &[id_b], None),
            Hold::Gone
        );
    }

    /// A hint that names the fd the lock is held through proves the hold;
    /// a stale one (an fd on another file) costs the walk and proves it
    /// all the same; a process holding nothing is never proved by a
    /// hint. Asked about a second claim the hint did not prove, the
    /// verifier walks the fds then.
    #[test]
    fn fd_hints_prove_holds_and_a_stale_one_costs_only_the_walk() {
        use super::{FdHints, Hold, HolderVerifier};
        use crate::liveness::proc_locks::FileId;
        use std::os::fd::AsRawFd;
        let me = std::process::id();
        let dir = tempfile::tempdir().unwrap();
        let (a, b, c) = (
            dir.path().join("a.lock"),
            dir.path().join("b.lock"),
            dir.path().join("c.lock"),
        );
        let locked = std::fs::File::create(&a).unwrap();
        let other = std::fs::File::create(&b).unwrap();
        let also = std::fs::File::create(&c).unwrap();
        for file in [&locked, &also] {
            // SAFETY: a valid open fd for the duration of the call.
            assert_eq!(unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) }, 0);
        }
        let id = |path| FileId::of(path).unwrap();
        let (id_a, id_b, id_c) = (id(&a), id(&b), id(&c));
        let verify = |hint: i32, files: &[FileId]| {
            let hints = FdHints::from([(me, vec![hint])]);
            HolderVerifier::default()
                .with_fd_hints(hints)
                .hold(me, files, None)
        };
        assert_eq!(verify(locked.as_raw_fd(), &[id_a]), Hold::Verified);
        assert_eq!(verify(other.as_raw_fd(), &[id_a]), Hold::Verified, "stale");
        assert_eq!(verify(locked.as_raw_fd(), &[id_b]), Hold::LetGo);
        let mut verifier = HolderVerifier::default()
            .with_fd_hints(FdHints::from([(me, vec![locked.as_raw_fd()])]));
        assert_eq!(verifier.hold(me, &[id_a], None), Hold::Verified);
        assert_eq!(verifier.hold(me, &[id_c], None), Hold::Verified, "walked");
        assert_eq!(verifier.hold(me, &[id_b], None), Hold::LetGo);
    }

    /// The flock caller died, a forked descendant keeps the lock, and the
    /// caller's PID now belongs to an unrelated process: that process is
    /// never named as the holder (its fdinfo shows no lock, and it started
    /// after the claim was taken), the keeper is, and the caller stays
    /// listed as the gone process that took it — so the verdict stays
    /// "orphaned child" after the reuse.
    #[test]
    fn a_reused_pid_is_never_named_as_a_holder() {
        a_reused_pid_is_never_named(false);
    }

    /// [`a_reused_pid_is_never_named_as_a_holder`] after a `touch` of the
    /// announce once the PID was reused: the file's times move, the
    /// answer does not (the keeper, which had the lock before its taker
    /// died, is older than any process a reused PID names).
    #[test]
    fn a_reused_pid_is_never_named_whatever_the_files_times_say() {
        a_reused_pid_is_never_named(true);
    }

    fn a_reused_pid_is_never_named(touched: bool) {
        // In a PID namespace of its own a reused PID is not the one
        // `/proc/locks` names: it shows a lock under its caller's PID in
        // the initial namespace, hidden once that caller is gone.
        if !super::testing::is_root_or_skip(
            "liveness::verify::tests::a_reused_pid_is_never_named_as_a_holder",
            "a PID reused as /proc/locks names it is a reuse in the initial PID namespace",
        ) {
            return;
        }
        let state = tempfile::tempdir().unwrap();
        let key = LockKey::from_coord(state.path(), &state.path().join("locks/agents/tags"), "t");
        std::fs::create_dir_all(key.dir()).unwrap();
        let (gate, announce) = (key.gate_path(), key.announce_path());
        let (mut keeper, callers) = hold_through_flock_naming(&[&gate, &announce]);
        // Taken ten seconds ago, as far as the claim's files tell.
        let taken = std::time::SystemTime::now() - std::time::Duration::from_secs(10);
        let file = std::fs::File::options()
            .write(true)
            .open(&announce)
            .unwrap();
        file.set_modified(taken).unwrap();
        assert_eq!(callers.len(), 2, "one flock(1) per file: {callers:?}");
        assert!(!callers.contains(&keeper.id()));
        // A PID is reused long after its process started (the kernel
        // cycles through every PID first): past the start times' slack.
        std::thread::sleep(START_TIME_SLACK * 2);
        let mut impostor = sleep_with_pid(callers[0]);
        if touched {
            // `touch` on the announce: its mtime says the claim was taken
            // after the impostor started. File times are anyone's to set.
            std::thread::sleep(std::time::Duration::from_millis(50));
            file.set_modified(std::time::SystemTime::now()).unwrap();
        }
        let index = LockIndex::read().unwrap();

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
        assert_eq!(
            holders.first().map(|p| p.pid),
            Some(keeper.id()),
            "the process that keeps the lock is found and named first: {holders:?}"
        );
        assert!(
            holders[1..].iter().all(|p| !p.alive && p.cmdline.is_none()),
            "then the gone flock callers, as gone, never with the impostor's details: \
             {holders:?}"
        );
        let taken_by: Vec<u32> = holders[1..].iter().map(|p| p.pid).collect();
        assert!(taken_by.contains(&impostor.id()), "{holders:?}");
        for child in [&mut keeper, &mut impostor] {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// A shared lock whose taker is gone, kept by the shell it was taken
    /// through: a verifier for the kernel's events leaves the search of
    /// every process for later (noted, nobody named), as it does for an
    /// exclusive one; any other verifier searches at once and names the
    /// keeper, then the gone taker.
    #[test]
    fn a_deferring_verifier_leaves_a_shared_locks_keeper_for_later() {
        let state = tempfile::tempdir().unwrap();
        let file = state.path().join("shared.lock");
        let mut keeper = Command::new("sh")
            .arg("-c")
            .arg("exec 3<>\"$1\" && { flock -s 3 & p=$!; wait $p; } && echo ready $p && exec sleep 60")
            .arg("sh")
            .arg(&file)
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawn sh");
        let mut line = String::new();
        std::io::BufReader::new(keeper.stdout.take().expect("piped"))
            .read_line(&mut line)
            .expect("read ready");
        let taker: u32 = line
            .strip_prefix("ready ")
            .and_then(|pid| pid.trim().parse().ok())
            .expect("the shell's flock caller");
        let files = [crate::liveness::proc_locks::FileId::of(&file).unwrap()];

        let deferred = super::HolderVerifier::deferring_keepers().shared_holders(
            &[taker],
            &files,
            &mut || vec![taker],
        );
        assert!(deferred.taker_let_go, "{deferred:?}");
        assert!(deferred.holders.is_empty(), "{deferred:?}");

        let searched =
            super::HolderVerifier::default().shared_holders(&[taker], &files, &mut || vec![taker]);
        assert!(!searched.taker_let_go);
        let named: Vec<(u32, bool)> = searched.holders.iter().map(|p| (p.pid, p.alive)).collect();
        assert_eq!(named, [(keeper.id(), true), (taker, false)]);
        let _ = keeper.kill();
        let _ = keeper.wait();
    }

    /// The keeper search finds a forked child's lock however many other
    /// locks the machine holds, and names nobody for a file nobody locks.
    #[test]
    fn keepers_are_found_by_the_claim_files_alone() {
        let state = tempfile::tempdir().unwrap();
        let (gate, other) = (state.path().join("g.lock"), state.path().join("o.lock"));
        let mut keeper = hold_through_flock(&[&gate]);
        std::fs::write(&other, b"").unwrap();
        let gate_id = crate::liveness::proc_locks::FileId::of(&gate).unwrap();
        let other_id = crate::liveness::proc_locks::FileId::of(&other).unwrap();
        let mut verifier = super::HolderVerifier::default();
        assert_eq!(verifier.keepers(&[gate_id]), vec![keeper.id()]);
        // Again, from the hint: still verified through fdinfo.
        assert_eq!(verifier.keepers(&[gate_id]), vec![keeper.id()]);
        assert_eq!(verifier.keepers(&[other_id]), Vec::<u32>::new());
        let _ = keeper.kill();
        let _ = keeper.wait();
        let mut verifier = super::HolderVerifier::default();
        assert_eq!(
            verifier.keepers(&[gate_id]),
            Vec::<u32>::new(),
            "a hint whose process is gone is not trusted"
        );
    }
}
