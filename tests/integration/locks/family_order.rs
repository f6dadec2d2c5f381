//! Families beyond all-or-nothing: a hierarchy's AIH lock is taken before
//! any of its tags (when the AIH is busy its tags are never even written
//! to), an abandoned wait leaves nothing behind in the kernel, and a
//! member that nobody holds but that cannot be taken is reported as such —
//! never as "busy".

use std::time::Duration;

use crate::common::{Holder, run_locktop, state_in_tempdir};
use locktop::context::Context;
use locktop::liveness::proc_locks::LockIndex;
use locktop::locks::escape::{announce_path, gate_path};
use locktop::locks::{self, Family, LocksError, agent_instance_lock, agent_tag_lock};
use notify::{EventKind, RecursiveMode, Watcher};

/// Every write-ish event on the files of `tag` while `during` runs.
async fn writes_to_tag_during<F: std::future::Future>(
    state: &std::path::Path,
    tag: &str,
    during: F,
) -> (F::Output, Vec<notify::Event>) {
    let (dir, key) = agent_tag_lock(state, tag);
    let files = [gate_path(&dir, &key), announce_path(&dir, &key)];
    let (tx, rx) = std::sync::mpsc::channel();
    let mut watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
        if let Ok(event) = event {
            let _ = tx.send(event);
        }
    })
    .unwrap();
    watcher.watch(&dir, RecursiveMode::NonRecursive).unwrap();
    let output = during.await;
    // inotify delivers asynchronously: give the watcher thread a moment.
    tokio::time::sleep(Duration::from_millis(300)).await;
    drop(watcher);
    let writes = rx
        .try_iter()
        .filter(|event| {
            matches!(
                event.kind,
                EventKind::Modify(_) | EventKind::Access(notify::event::AccessKind::Close(_))
            ) && event.paths.iter().any(|path| files.contains(path))
        })
        .collect();
    (output, writes)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_busy_aih_means_its_tags_are_only_probed_never_taken() {
    let (_tmp, state) = state_in_tempdir();
    // The tag's files exist (a previous holder), the AIH is held elsewhere.
    drop(Holder::hold(&state, &["--tag", "bound"]));
    let _aih_holder = Holder::hold(&state, &["--aih", "cli/daemon/busy"]);
    let context = Context::new(state.clone());
    let family = Family::Hierarchy {
        aih: "cli/daemon/busy".into(),
        tags: vec!["bound".into()],
    };
    let (outcome, writes) = writes_to_tag_during(
        &state,
        "bound",
        locks::try_acquire_family_detailed(context.agent_locks(), &state, &family),
    )
    .await;
    let busy = outcome.unwrap().expect_err("the AIH is busy");
    assert_eq!(busy.busy, vec![0], "only the AIH is busy");
    assert!(
        writes.is_empty(),
        "the tag was taken (written) although its AIH was busy: {writes:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_free_hierarchy_comes_back_aih_lock_first_then_its_tags_in_order() {
    let (_tmp, state) = state_in_tempdir();
    let context = Context::new(state.clone());
    let family = Family::Hierarchy {
        aih: "cli/daemon/a1".into(),
        tags: vec!["t1".into(), "t2".into(), "t1".into()],
    };
    let locks = locks::try_acquire_family_detailed(context.agent_locks(), &state, &family)
        .await
        .unwrap()
        .unwrap();
    let keys: Vec<&str> = locks.iter().map(|lock| lock.key()).collect();
    assert_eq!(keys, ["a1", "t1", "t2"]);
    let (aih_dir, _) = agent_instance_lock(&state, "cli/daemon/a1");
    assert_eq!(locks[0].dir(), aih_dir.as_path());
}

#[tokio::test(flavor = "multi_thread")]
async fn an_abandoned_wait_leaves_no_blocked_flock_behind() {
    let (_tmp, state) = state_in_tempdir();
    let mut holder = Holder::hold(&state, &["--tag", "contested"]);
    let context = Context::new(state.clone());
    let family = Family::Group(vec!["contested".into()]);
    let waiting = {
        let (context, state, family) = (context.clone(), state.clone(), family.clone());
        tokio::spawn(async move {
            locks::wait_acquire_family(context.agent_locks(), &state, &family, |_| {}).await
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    waiting.abort();
    let _ = waiting.await;

    let (dir, key) = agent_tag_lock(&state, "contested");
    let me = std::process::id();
    let claim = LockIndex::read()
        .unwrap()
        .claim(&gate_path(&dir, &key), &announce_path(&dir, &key));
    assert!(
        !claim.waiters.contains(&me),
        "a blocked flock of ours is left: {claim:?}"
    );
    holder.kill();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let claim = LockIndex::read()
        .unwrap()
        .claim(&gate_path(&dir, &key), &announce_path(&dir, &key));
    assert!(
        !claim.holders.contains(&me),
        "the abandoned wait took the lock: {claim:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_member_nobody_holds_but_nobody_can_take_is_unavailable_not_busy() {
    let (tmp, _state) = state_in_tempdir();
    // A state dir that is a file: nothing can ever be created below it.
    let file = tmp.path().join("a-file");
    std::fs::write(&file, b"").unwrap();
    let context = Context::new(file.clone());
    let family = Family::Group(vec!["t".into()]);
    match locks::try_acquire_family_checked(context.agent_locks(), &file, &family).await {
        Err(LocksError::Unavailable { member, reason }) => {
            assert_eq!(member, "tag \"t\"");
            assert!(reason.contains("not a directory"), "{reason}");
        }
        other => panic!(
            "expected Unavailable, got {:?}",
            other.map(|r| r.map(|l| l.len()))
        ),
    }
    for args in [&["hold", "--tag", "t"][..], &["check", "--tag", "t"][..]] {
        let out = run_locktop(&file, args);
        assert_eq!(out.code(), 2, "{args:?}: {}", out.stderr);
        assert!(
            out.stderr.contains("not a directory"),
            "{args:?}: {}",
            out.stderr
        );
    }
}

#[test]
fn check_of_a_key_never_seen_creates_no_files() {
    let (_tmp, state) = state_in_tempdir();
    drop(Holder::hold(&state, &["--tag", "exists"]));
    let out = run_locktop(&state, &["check", "--tag", "exists", "--tag", "typo"]);
    assert_eq!(out.code(), 0, "{}", out.stderr);
    let (dir, key) = agent_tag_lock(&state, "typo");
    assert!(!gate_path(&dir, &key).exists(), "check created a stale key");
}
