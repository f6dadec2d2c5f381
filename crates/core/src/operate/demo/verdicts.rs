//! The demo's members that make each verdict appear on its first screen,
//! besides the stuck tag and the stopped agent: a spawn stuck
//! materializing (a grouped tag held with no AIH lock — a suspect once the
//! demo's `--materializing-after`, 5 s unless given, has passed), a lock
//! kept by an orphaned forked child, a contender queued in the SDK's
//! `wait_acquire` on the stuck tag and a watcher in `wait_released` on the
//! stuck agent — and a real deadlock: two agents, each holding its AIH
//! lock and one of [`DEADLOCK_TAGS`], then waiting (`wait_acquire`) for
//! the other's tag. It lasts until the operator signals one of them (`K`
//! on either tag offers the one to signal); the other then takes the tag
//! it waited for.
//!
//! Invariants: every process here dies with the demo. The waiters are
//! children with a parent-death SIGKILL, killed and reaped by
//! [`Extras::stop`]. The orphaned child is by design no child of the demo
//! (its parent exited: it is re-parented) and a parent-death signal does
//! not survive its fork, so it ends on its own: it blocks reading a pipe
//! whose only writer is the demo, and exits — releasing the lock — at
//! EOF, which comes when the demo drops it or dies (even by SIGKILL).

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, ChildStdin, Command};

use crate::locks::escape::{announce_path, gate_path};
use crate::operate::test_holders::child::die_with_parent;

/// The tag kept by an orphaned forked child.
pub(crate) const ORPHAN_TAG: &str = "export: nightly";

/// The tags of the deadlocked pair: each agent holds one and waits for
/// the other.
pub(crate) const DEADLOCK_TAGS: [&str; 2] = ["deploy: blue", "deploy: green"];

/// The demo's waiters and orphan keeper.
#[derive(Default)]
pub(crate) struct Extras {
    waiters: Vec<Child>,
    /// The orphan keeper's only pipe writer: dropping it ends the keeper.
    orphan_pipe: Option<ChildStdin>,
}

impl Extras {
    /// Starts a contender on `stuck_tag` and a watcher on `stuck_aih`
    /// (`<exe> wait …`), the deadlocked pair (agents `pair`, see the
    /// module doc) and the orphaned keeper of [`ORPHAN_TAG`]. Whatever
    /// cannot start (no `sh` or util-linux `flock`) is left out.
    pub async fn start(
        exe: &Path,
        state_dir: &Path,
        stuck_tag: &str,
        stuck_aih: &str,
        pair: [&str; 2],
    ) -> Self {
        let mut extras = Self::default();
        let contender = ["wait", "--acquire", "--tag", stuck_tag];
        let watcher = ["wait", "--aih", stuck_aih];
        // Each takes its family at once and waits for the other's tag a
        // second later, when both hold theirs.
        let deadlocked = |at: usize| {
            [
                "hold",
                "--ignore-stdin",
                "--aih",
                pair[at],
                "--tag",
                DEADLOCK_TAGS[at],
                "--then-wait-tag",
                DEADLOCK_TAGS[1 - at],
                "--then-wait-after",
                "1",
            ]
        };
        let (first, second) = (deadlocked(0), deadlocked(1));
        for args in [&contender[..], &watcher[..], &first[..], &second[..]] {
            let mut command = Command::new(exe);
            command
                .arg("--state-dir")
                .arg(state_dir)
                .args(args)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .kill_on_drop(true);
            die_with_parent(&mut command, libc::SIGKILL);
            extras.waiters.extend(command.spawn().ok());
        }
        extras.orphan_pipe = orphan_keeper(state_dir).await;
        extras
    }

    /// Ends them all: the waiters killed and reaped, the orphan keeper's
    /// pipe closed (it exits at EOF).
    pub async fn stop(mut self) {
        self.orphan_pipe.take();
        for waiter in &mut self.waiters {
            let _ = waiter.start_kill();
            let _ = tokio::time::timeout(Duration::from_secs(5), waiter.wait()).await;
        }
    }
}

/// Locks [`ORPHAN_TAG`]'s gate and announce through util-linux `flock(1)`
/// (the flock callers exit at once, so the PIDs `/proc/locks` names are
/// gone), forks a subshell that keeps the locked files open, and exits: the
/// subshell is an orphaned child keeping the lock. Returns the pipe it
/// waits on.
async fn orphan_keeper(state_dir: &Path) -> Option<ChildStdin> {
    let (dir, key) = crate::locks::agent_tag_lock(state_dir, ORPHAN_TAG);
    std::fs::create_dir_all(&dir).ok()?;
    let script = r#"exec 3<>"$1" 4<>"$2" || exit 1
flock -x 3 || exit 1
flock -x 4 || exit 1
exec 5<&0
( read -r _ <&5 ) >/dev/null 2>&1 &
echo ready"#;
    let mut command = Command::new("sh");
    command
        .arg("-c")
        .arg(script)
        .arg("sh")
        .arg(gate_path(&dir, &key))
        .arg(announce_path(&dir, &key))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true);
    die_with_parent(&mut command, libc::SIGKILL);
    let mut shell = command.spawn().ok()?;
    let pipe = shell.stdin.take()?;
    let mut lines = BufReader::new(shell.stdout.take()?).lines();
    let ready = tokio::time::timeout(Duration::from_secs(5), lines.next_line()).await;
    let _ = tokio::time::timeout(Duration::from_secs(5), shell.wait()).await;
    matches!(ready, Ok(Ok(Some(line))) if line == "ready").then_some(pipe)
}
