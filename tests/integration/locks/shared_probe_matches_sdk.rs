//! locktop's passive probe answers exactly as the SDK's `try_held` does
//! (a probe of locktop's own, in place of the SDK's, stands only on such
//! a differential test).
//!
//! Random claim states — each of the gate and the announce missing, an
//! unlocked file, held exclusively, or held shared (by another open file
//! of this process: flock locks belong to open files, so they conflict
//! as another process's would), the gate empty or not — are probed by
//! `liveness::probe::passive_state` and by `try_held` (bounded the same
//! way: a claim in flight is `InFlight`, not a wait without end). They
//! must agree, and the probe must leave both files as they were (no
//! write). Non-regular files are never opened by `Prober::probe` at all.
//!
//! The directory-by-directory probe of snapshots and sweeps
//! (`liveness::dir_probe`) must answer every key a scan lists exactly as
//! the single probe `Prober::probe` does, on the same random states, many
//! keys of several directories at once — and so must the snapshot's walk
//! and probes at once (`scan_and_probe_passive`).

use std::fs::File;
use std::path::Path;
use std::time::Duration;

use locktop::context::Context;
use locktop::disk::key::LockKey;
use locktop::disk::scan::scan_root;
use locktop::engine::Liveness;
use locktop::liveness::dir_probe::{probe_passive, scan_and_probe_passive_in};
use locktop::liveness::probe::{ProbeMode, Prober, passive_state};
use locktop::locks::{agent_instance_lock, agent_tag_lock};
use nix::fcntl::{Flock, FlockArg};
use proptest::prelude::*;

use super::claim_states::{file_state, make, sdk_says, stamp};

proptest! {
    #![proptest_config(ProptestConfig { cases: crate::common::cases(256), ..ProptestConfig::default() })]

    #[test]
    fn the_passive_probe_answers_as_try_held_on_every_state(
        gate in file_state(),
        announce in file_state(),
        gate_has_content in any::<bool>(),
    ) {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let tmp = tempfile::tempdir().unwrap();
        let (dir, name) = agent_tag_lock(tmp.path(), "a tag.v1");
        std::fs::create_dir_all(&dir).unwrap();
        let key = LockKey::from_coord(tmp.path(), &dir, &name);
        let content: &[u8] = if gate_has_content { b"data" } else { b"" };
        let _gate = make(&key.gate_path(), gate, content);
        let _announce = make(&key.announce_path(), announce, b"1");
        let before = (stamp(&key.gate_path()), stamp(&key.announce_path()));

        let ours = runtime.block_on(passive_state(&key)).liveness;
        let sdk = runtime.block_on(sdk_says(&key));
        prop_assert_eq!(ours, sdk, "gate {:?}, announce {:?}", gate, announce);
        let prober = Prober::new(Context::new(tmp.path().to_path_buf()));
        let scanned = runtime.block_on(scan_root(tmp.path())).unwrap().keys;
        let by_dir = runtime.block_on(probe_passive(&prober, scanned, 1));
        for (scanned_key, state) in &by_dir {
            prop_assert_eq!(scanned_key, &key);
            let single = runtime.block_on(prober.probe(&key, ProbeMode::Passive));
            prop_assert_eq!(state, &single, "gate {:?}, announce {:?}", gate, announce);
        }
        let after = (stamp(&key.gate_path()), stamp(&key.announce_path()));
        prop_assert_eq!(before, after, "the probe changed a file");
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: crate::common::cases(64), ..ProptestConfig::default() })]

    /// Many claims of several directories (tags, and instances at two
    /// depths), each in a random state, probed at once directory by
    /// directory on two threads: every answer is the single probe's.
    #[test]
    fn the_directory_probe_answers_as_the_single_probe_for_every_key(
        states in proptest::collection::vec((file_state(), file_state(), any::<bool>()), 1..40),
    ) {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let tmp = tempfile::tempdir().unwrap();
        let prober = Prober::new(Context::new(tmp.path().to_path_buf()));
        let mut keys = Vec::new();
        let mut kept = Vec::new();
        for (i, (gate, announce, has_content)) in states.iter().enumerate() {
            let (dir, name) = match i % 3 {
                0 => agent_tag_lock(tmp.path(), &format!("tag {i}.v1")),
                1 => agent_instance_lock(tmp.path(), &format!("top{i}")),
                _ => agent_instance_lock(tmp.path(), &format!("a/b/leaf{i}")),
            };
            std::fs::create_dir_all(&dir).unwrap();
            let key = LockKey::from_coord(tmp.path(), &dir, &name);
            let content: &[u8] = if *has_content { b"data" } else { b"" };
            kept.push(make(&key.gate_path(), *gate, content));
            kept.push(make(&key.announce_path(), *announce, b"1"));
            keys.push(key);
        }
        let scanned = runtime.block_on(scan_root(tmp.path())).unwrap().keys;
        let mut listed: Vec<&LockKey> = scanned.iter().collect();
        listed.sort();
        let mut with_gate: Vec<&LockKey> =
            keys.iter().filter(|key| key.gate_path().exists()).collect();
        with_gate.sort();
        prop_assert_eq!(listed, with_gate, "the scan lists every claim with a gate");
        let by_dir = runtime.block_on(probe_passive(&prober, scanned.clone(), 2));
        prop_assert_eq!(by_dir.len(), scanned.len());
        for ((key, state), expected) in by_dir.iter().zip(&scanned) {
            prop_assert_eq!(key, expected, "out of order");
            let single = runtime.block_on(prober.probe(key, ProbeMode::Passive));
            prop_assert_eq!(state, &single, "{:?}", key);
        }
        // The walk and the probes at once (chunks of a few keys, so that
        // even 40 keys are fed in pieces): the same keys, the same
        // answers, in any order.
        let (report, mut piped) = runtime
            .block_on(scan_and_probe_passive_in(tmp.path(), &prober, 2, 3))
            .unwrap();
        prop_assert!(report.keys.is_empty(), "the keys are in the batch");
        piped.sort_by(|a, b| a.0.cmp(&b.0));
        let mut by_dir = by_dir;
        by_dir.sort_by(|a, b| a.0.cmp(&b.0));
        prop_assert_eq!(piped, by_dir);
        drop(kept);
    }
}

/// Puts something that is not a regular file at a path.
type PutAt = fn(&Path);

#[tokio::test]
async fn non_regular_files_are_never_opened_and_never_block() {
    let tmp = tempfile::tempdir().unwrap();
    let prober = Prober::new(Context::new(tmp.path().to_path_buf()));
    let (dir, _) = agent_tag_lock(tmp.path(), "x");
    std::fs::create_dir_all(&dir).unwrap();
    let cases: [(&str, PutAt); 3] = [
        ("fifo", |path| {
            nix::unistd::mkfifo(path, nix::sys::stat::Mode::S_IRWXU).unwrap()
        }),
        ("dir", |path| std::fs::create_dir(path).unwrap()),
        ("link", |path| {
            std::os::unix::fs::symlink("/etc/passwd", path).unwrap()
        }),
    ];
    for (name, put) in cases {
        for at_announce in [false, true] {
            let tag = format!("{name}-{at_announce}");
            let (dir, escaped) = agent_tag_lock(tmp.path(), &tag);
            let key = LockKey::from_coord(tmp.path(), &dir, &escaped);
            let probe = || async {
                let single = tokio::time::timeout(
                    Duration::from_secs(2),
                    prober.probe(&key, ProbeMode::Passive),
                )
                .await?;
                // The scan lists a claim only when its gate is a regular
                // file; what it lists, the directory probe answers as the
                // single probe does.
                let scanned = scan_root(tmp.path()).await.unwrap().keys;
                let listed = scanned.iter().any(|k| k == &key);
                assert_eq!(listed, at_announce, "{key:?}: listed by the scan");
                let by_dir = tokio::time::timeout(
                    Duration::from_secs(2),
                    probe_passive(&prober, scanned, 1),
                )
                .await?;
                if let Some((_, state)) = by_dir.iter().find(|(k, _)| k == &key) {
                    assert_eq!(state, &single, "{key:?}: the two probes disagree");
                }
                Ok::<_, tokio::time::error::Elapsed>(single)
            };
            if !at_announce {
                put(&key.gate_path());
                let state = probe().await.expect("the probe blocked");
                assert_eq!(state.liveness, Liveness::Error, "{tag}: {state:?}");
                continue;
            }
            std::fs::write(key.gate_path(), b"").unwrap();
            put(&key.announce_path());
            // A claim whose announce is no regular file is none an agent
            // can take: an error with its gate free (`lstat` only, never
            // opened) as with its gate locked — never "free".
            let state = probe().await.expect("the probe blocked");
            assert_eq!(state.liveness, Liveness::Error, "{tag}: {state:?}");
            let gate = Flock::lock(
                File::open(key.gate_path()).unwrap(),
                FlockArg::LockExclusiveNonblock,
            )
            .unwrap();
            let state = probe().await.expect("the probe blocked");
            assert_eq!(state.liveness, Liveness::Error, "{tag}: {state:?}");
            drop(gate);
        }
    }
}
