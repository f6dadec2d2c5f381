//! Locks held elsewhere on the machine during a chaos run: 2,000 flocks
//! on files of a directory of their own, held by four child processes
//! (this binary running [`super::locks_elsewhere_child`]). They make every
//! `/proc/locks` read ~27 pages long — each page a write-lock cycle of the
//! kernel's file-lock semaphore — and give the search for a gone caller's
//! keeper thousands of foreign fds to pass over. Field hosts look like
//! that; the chaos runs must hold up there.

use std::io::BufRead;
use std::process::{Child, Command, Stdio};

use crate::common::PROCESS_TIMEOUT;

/// How many flocks, over how many processes (each stays under a default
/// soft limit of 1,024 open files).
pub const LOCKS: usize = 2_000;
const PROCESSES: usize = 4;

/// The child's switches: the directory and how many files it locks.
pub const CHILD_DIR: &str = "LOCKTOP_CHAOS_ELSEWHERE_DIR";
pub const CHILD_COUNT: &str = "LOCKTOP_CHAOS_ELSEWHERE_COUNT";

/// What a child prints once every lock is taken.
pub const READY: &str = "locks elsewhere: ready";

/// The holders; killed and reaped on drop.
pub struct LocksElsewhere {
    children: Vec<Child>,
    _dir: tempfile::TempDir,
}

impl LocksElsewhere {
    /// Takes [`LOCKS`] flocks in a temporary directory; returns once all
    /// are held.
    pub fn hold() -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let module = module_path!()
            .split_once("::")
            .map_or(module_path!(), |(_, rest)| rest);
        let parent = module
            .rsplit_once("::")
            .map_or(module, |(parent, _)| parent);
        let mut children = Vec::new();
        for index in 0..PROCESSES {
            let own = dir.path().join(index.to_string());
            std::fs::create_dir(&own).expect("mkdir");
            let mut child = Command::new(std::env::current_exe().expect("current_exe"))
                .args(["--ignored", "--exact", "--nocapture", "--test-threads=1"])
                .arg(format!("{parent}::locks_elsewhere_child"))
                .env(CHILD_DIR, &own)
                .env(CHILD_COUNT, (LOCKS / PROCESSES).to_string())
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit())
                .spawn()
                .expect("spawn a locks-elsewhere child");
            let stdout = child.stdout.take().expect("piped");
            let ready = std::thread::spawn(move || {
                std::io::BufReader::new(stdout)
                    .lines()
                    .map_while(Result::ok)
                    .any(|line| line.ends_with(READY))
            });
            let deadline = std::time::Instant::now() + PROCESS_TIMEOUT;
            while !ready.is_finished() {
                assert!(
                    std::time::Instant::now() < deadline,
                    "locks elsewhere not taken"
                );
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            assert!(
                ready.join().expect("reader"),
                "a locks-elsewhere child failed"
            );
            children.push(child);
        }
        Self {
            children,
            _dir: dir,
        }
    }
}

impl Drop for LocksElsewhere {
    fn drop(&mut self) {
        for child in &mut self.children {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// The child's work: locks `count` files of `dir`, says [`READY`], and
/// holds them until its stdin closes.
pub fn hold_in_child(dir: &std::path::Path, count: usize) {
    let mut files = Vec::with_capacity(count);
    for index in 0..count {
        let file = std::fs::File::create(dir.join(format!("{index}.lock"))).expect("create");
        nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusiveNonblock)
            .map(|locked| files.push(locked))
            .unwrap_or_else(|(_, errno)| panic!("flock: {errno}"));
    }
    println!("{READY}");
    let mut line = String::new();
    while std::io::stdin().read_line(&mut line).is_ok_and(|n| n > 0) {
        line.clear();
    }
    drop(files);
}
