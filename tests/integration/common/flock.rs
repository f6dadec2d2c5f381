//! Holders made with util-linux `flock(1)`: locks through read-only
//! descriptors (no write, so no IN_CLOSE_WRITE when they let go), and
//! shells that keep a lock whose `flock(1)` caller is gone (a lock that
//! outlived the process that took it).

use std::io::BufRead;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use locktop::liveness::proc_locks::{FileId, LockIndex};

/// A `flock(1)` process group; dropping it SIGKILLs the whole group, so a
/// failing test leaves no `sleep 600` behind.
pub struct FlockGroup(Child);

impl FlockGroup {
    /// The PID of the group's leader (the first `flock`).
    pub fn pid(&self) -> u32 {
        self.0.id()
    }

    /// SIGKILLs the group and reaps its leader.
    pub fn kill_group(&mut self) {
        let _ = nix::sys::signal::killpg(
            nix::unistd::Pid::from_raw(self.0.id() as i32),
            nix::sys::signal::Signal::SIGKILL,
        );
        let _ = self.0.wait();
    }

    /// Waits until `/proc/locks` lists `file` as held (flock(1) locks
    /// right after it opens); panics after [`super::PROCESS_TIMEOUT`].
    pub fn wait_locked(self, file: &Path) -> Self {
        let deadline = std::time::Instant::now() + super::PROCESS_TIMEOUT;
        let id = FileId::of(file).expect("the locked file exists");
        let held = |index: LockIndex| {
            index
                .get(&id)
                .is_some_and(|locks| !locks.holders.is_empty())
        };
        while !held(LockIndex::read().expect("read /proc/locks")) {
            assert!(std::time::Instant::now() < deadline, "flock never locked");
            std::thread::sleep(Duration::from_millis(10));
        }
        self
    }
}

impl Drop for FlockGroup {
    fn drop(&mut self) {
        self.kill_group();
    }
}

/// `flock -x F1 flock -x F2 … sleep 600`: holds `files` through read-only
/// descriptors (as util-linux flock(1) opens them), in a process group of
/// its own.
pub fn flock_chain(files: &[PathBuf]) -> FlockGroup {
    let mut command = Command::new("flock");
    command.arg("-x").arg(&files[0]);
    for file in &files[1..] {
        command.args(["flock", "-x"]).arg(file);
    }
    command
        .args(["sleep", "600"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .map(FlockGroup)
        .expect("util-linux flock(1) is needed by this test")
}

/// A shell holding `gate` on fd 3 and `announce` on fd 4 that runs
/// `locks` (util-linux flock(1) on those fds: it takes each lock and
/// exits, so /proc/locks names a gone PID while the shell, then `sleep`,
/// keeps the locked files open), once they are taken.
pub fn keeper(gate: &Path, announce: &Path, locks: &str) -> Child {
    keeper_naming(gate, announce, locks).0
}

/// [`keeper`] with `locks` a list of fds, each taken by its own flock(1),
/// whose (gone) PIDs come back with the shell.
pub fn keeper_naming(gate: &Path, announce: &Path, locks: &str) -> (Child, Vec<u32>) {
    let locks: Vec<String> = locks
        .split(" && ")
        .map(|flock| format!("{{ {flock} & p=$!; wait $p; }} && pids=\"$pids $p\""))
        .collect();
    let mut keeper = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "pids=; exec 3<>\"$1\" 4<>\"$2\" && {} && echo ready$pids && exec sleep 60",
            locks.join(" && ")
        ))
        .arg("sh")
        .arg(gate)
        .arg(announce)
        .stdout(Stdio::piped())
        .spawn()
        .expect("sh");
    let mut ready = String::new();
    std::io::BufReader::new(keeper.stdout.take().expect("stdout"))
        .read_line(&mut ready)
        .expect("ready");
    let mut words = ready.split_whitespace();
    assert_eq!(words.next(), Some("ready"), "{ready}");
    let callers = words.map(|pid| pid.parse().expect("a PID")).collect();
    (keeper, callers)
}
