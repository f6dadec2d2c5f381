//! locktop's lock-free probe answers exactly as the SDK's `try_held` does,
//! on ext4 (the temp dir) and on tmpfs (`/dev/shm`).
//!
//! Random claim states of many claims in several directories — each of
//! the gate and the announce missing, an unlocked file, held exclusively,
//! or held shared (by another open file of this process: flock locks
//! belong to open files, so they conflict as another process's would) —
//! are judged from one `/proc/locks` read (`liveness::lock_free`: the
//! single answer, and the bulk judgement of snapshots and sweeps) and by
//! `try_held` (bounded: a claim in flight is `InFlight`, not a wait
//! without end). They must agree, and the lock-free probe must leave
//! every file as it was and take no lock (the test's own locks are the
//! only ones `/proc/locks` lists on the claims' files afterwards).

use std::path::{Path, PathBuf};

use locktop::disk::key::LockKey;
use locktop::engine::Liveness;
use locktop::liveness::bulk::judge_lock_free;
use locktop::liveness::lock_free::answer;
use locktop::liveness::proc_locks::LockIndex;
use locktop::locks::{agent_instance_lock, agent_tag_lock};
use proptest::prelude::*;

use super::claim_states::{FileState, file_state, make, sdk_says, stamp};

/// A tmpfs directory to test in: `/dev/shm` when it is one. Without it
/// the tmpfs half is skipped with a line saying so — unless
/// `LOCKTOP_REQUIRE_ALL=1` (CI), which makes the skip a failure.
fn tmpfs_root() -> Option<PathBuf> {
    let shm = Path::new("/dev/shm");
    let is_tmpfs = nix::sys::statfs::statfs(shm)
        .is_ok_and(|fs| fs.filesystem_type() == nix::sys::statfs::TMPFS_MAGIC);
    if is_tmpfs {
        return Some(shm.to_path_buf());
    }
    let message = "skipped the tmpfs half: /dev/shm is not a tmpfs (mount one there to run it)";
    assert!(
        std::env::var_os("LOCKTOP_REQUIRE_ALL").is_none(),
        "{message}"
    );
    eprintln!("{message}");
    None
}

/// The claims of `states` made under a fresh dir in `root`, judged
/// lock-free (alone and in bulk) and by the SDK: every answer agrees,
/// and no file changed.
fn check_states(root: &Path, states: &[(FileState, FileState)]) -> Result<(), TestCaseError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let tmp = tempfile::tempdir_in(root).unwrap();
    let mut keys = Vec::new();
    let mut kept = Vec::new();
    for (i, (gate, announce)) in states.iter().enumerate() {
        let (dir, name) = match i % 3 {
            0 => agent_tag_lock(tmp.path(), &format!("tag {i}.v1")),
            1 => agent_instance_lock(tmp.path(), &format!("top{i}")),
            _ => agent_instance_lock(tmp.path(), &format!("a/b/leaf{i}")),
        };
        std::fs::create_dir_all(&dir).unwrap();
        let key = LockKey::from_coord(tmp.path(), &dir, &name);
        kept.push(make(&key.gate_path(), *gate, b""));
        kept.push(make(&key.announce_path(), *announce, b"1"));
        keys.push(key);
    }
    let stamps = |keys: &[LockKey]| -> Vec<_> {
        keys.iter()
            .map(|key| (stamp(&key.gate_path()), stamp(&key.announce_path())))
            .collect()
    };
    let before = stamps(&keys);
    let read = || LockIndex::read().unwrap();
    let index = LockIndex::read_merged(&read);
    let bulk = judge_lock_free(keys.clone(), &index, 2, &read);
    for ((key, (gate, announce)), (bulk_key, bulk_state)) in keys.iter().zip(states).zip(&bulk) {
        let single = answer(key, &index).state(key).liveness;
        let sdk = runtime.block_on(sdk_says(key));
        prop_assert_eq!(single, sdk, "gate {:?}, announce {:?}", gate, announce);
        prop_assert_eq!(bulk_key, key);
        prop_assert_eq!(bulk_state.liveness, sdk, "bulk: {:?} {:?}", gate, announce);
    }
    prop_assert_eq!(before, stamps(&keys), "the probe changed a file");
    drop(kept);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: crate::common::cases(128), ..ProptestConfig::default() })]

    #[test]
    fn the_lock_free_probe_answers_as_try_held_on_ext4_and_tmpfs(
        states in proptest::collection::vec((file_state(), file_state()), 1..24),
    ) {
        check_states(&std::env::temp_dir(), &states)?;
        if let Some(tmpfs) = tmpfs_root() {
            check_states(&tmpfs, &states)?;
        }
    }
}

/// The probe opens no claim file (not one inotify open event in its
/// directory over 1,000 judgements) — so it can take no lock on one —
/// and afterwards `/proc/locks` lists on the claim's files only the
/// test's own locks.
#[test]
fn judging_takes_no_lock_and_opens_no_claim_file() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, name) = agent_tag_lock(tmp.path(), "watched");
    std::fs::create_dir_all(&dir).unwrap();
    let key = LockKey::from_coord(tmp.path(), &dir, &name);
    let _gate = make(&key.gate_path(), FileState::Exclusive, b"");
    let _announce = make(&key.announce_path(), FileState::Exclusive, b"1");
    let index = LockIndex::read().unwrap();
    // Every open of a file in the claim's directory is an inotify event.
    let mut opens = inotify::Inotify::init().unwrap();
    opens.watches().add(&dir, inotify::WatchMask::OPEN).unwrap();
    for _ in 0..1000 {
        assert_eq!(answer(&key, &index).state(&key).liveness, Liveness::Live);
    }
    let mut buffer = [0u8; 4096];
    let seen = match opens.read_events(&mut buffer) {
        Ok(events) => events.count(),
        Err(error) if error.kind() == std::io::ErrorKind::WouldBlock => 0,
        Err(error) => panic!("{error}"),
    };
    assert_eq!(seen, 0, "the lock-free probe opened a claim file");
    let locks = LockIndex::read()
        .unwrap()
        .claim(&key.gate_path(), &key.announce_path());
    assert_eq!(locks.holders, vec![std::process::id()]);
    assert!(
        locks.shared.is_empty() && locks.waiters.is_empty(),
        "{locks:?}"
    );
}
