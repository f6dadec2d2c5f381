//! The in-process gate: two tasks of ONE process exclude each other on an
//! agent key, although the SDK lockfile underneath is reentrant.

use std::time::Duration;

use crate::common;
use crate::common::{Holder, STILL_BLOCKED, WAKE_TIMEOUT, state_in_tempdir, tag_args};
use locktop::context::Context;
use locktop::locks::{self, agent_instance_lock, agent_tag_lock};
use objectiveai_sdk::lockfile;

#[tokio::test(flavor = "multi_thread")]
async fn second_task_is_refused_while_first_holds_and_succeeds_after_release() {
    let (_tmp, state) = state_in_tempdir();
    let context = Context::new(state.clone());
    let (dir, key) = agent_tag_lock(&state, "t");

    let first = {
        let (context, dir, key) = (context.clone(), dir.clone(), key.clone());
        tokio::spawn(async move { locks::try_acquire(context.agent_locks(), &dir, &key).await })
            .await
            .unwrap()
            .expect("first task acquires a free key")
    };

    let second = {
        let (context, dir, key) = (context.clone(), dir.clone(), key.clone());
        tokio::spawn(async move { locks::try_acquire(context.agent_locks(), &dir, &key).await })
            .await
            .unwrap()
    };
    assert!(
        second.is_none(),
        "a second task of the same process must not get a held key"
    );

    first.release().unwrap();

    let third = {
        let (context, dir, key) = (context.clone(), dir.clone(), key.clone());
        tokio::spawn(async move { locks::try_acquire(context.agent_locks(), &dir, &key).await })
            .await
            .unwrap()
    };
    let third = third.expect("after release the key is free again");
    assert_eq!((third.dir(), third.key()), (dir.as_path(), "t"));
    third.release().unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn raw_sdk_lockfile_is_reentrant_in_process_which_is_why_the_gate_exists() {
    let (_tmp, state) = state_in_tempdir();
    let (dir, key) = agent_tag_lock(&state, "reentrant");

    let one = lockfile::try_acquire(&dir, &key, "")
        .await
        .expect("first SDK claim");
    let two = lockfile::try_acquire(&dir, &key, "")
        .await
        .expect("the SDK lets the same process claim the same key twice");

    // Both claims count: after releasing one, the key is still held
    // cross-process.
    one.release().unwrap();
    let busy = common::run_locktop(&state, &["hold", "--tag", "reentrant"]);
    assert_eq!(busy.code(), 1, "still held after one release: {busy:?}");

    two.release().unwrap();
    let free = common::run_locktop(&state, &["hold", "--tag", "reentrant"]);
    assert_eq!(free.code(), 0, "free after both releases: {free:?}");
    assert!(free.stdout.contains(r#""held":true"#), "{free:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn wait_acquire_blocks_until_the_first_lock_is_dropped() {
    let (_tmp, state) = state_in_tempdir();
    let context = Context::new(state.clone());
    let (dir, key) = agent_instance_lock(&state, "root/worker");

    let first = locks::try_acquire(context.agent_locks(), &dir, &key)
        .await
        .expect("free key");

    let waiter = {
        let (context, dir, key) = (context.clone(), dir.clone(), key.clone());
        tokio::spawn(async move { locks::wait_acquire(context.agent_locks(), &dir, &key).await })
    };
    tokio::time::sleep(STILL_BLOCKED).await;
    assert!(
        !waiter.is_finished(),
        "wait_acquire must block while another task holds the key"
    );

    drop(first); // Drop, not release().

    let second = tokio::time::timeout(WAKE_TIMEOUT, waiter)
        .await
        .expect("dropping the first lock must wake the waiter")
        .unwrap()
        .expect("wait_acquire succeeds");
    assert_eq!(second.key(), "worker");
    drop(second);

    // Both locks were only dropped: if Drop had left a claim behind (a bare
    // SDK claim leaks until process death), another process could not
    // take the instance now.
    let mut other = Holder::hold(&state, &["--aih", "root/worker"]);
    assert_eq!(other.locks(), vec!["instance root/worker".to_string()]);
    assert!(other.close_stdin().success());
}

#[tokio::test(flavor = "multi_thread")]
async fn dropping_an_agent_lock_releases_its_claim_for_other_processes() {
    let (_tmp, state) = state_in_tempdir();
    let context = Context::new(state.clone());
    let (dir, key) = agent_tag_lock(&state, "dropped");

    let lock = locks::try_acquire(context.agent_locks(), &dir, &key)
        .await
        .expect("free key");
    let busy = common::run_locktop(&state, &["hold", "--tag", "dropped"]);
    assert_eq!(busy.code(), 1, "held while the AgentLock lives: {busy:?}");

    drop(lock);

    let mut other = Holder::hold(&state, &tag_args(&["dropped"]));
    assert_eq!(other.pid(), other.held["pid"].as_u64().unwrap() as u32);
    // And our in-process gate is free too: the other process holds it now,
    // so we are refused by the lockfile, not by a lingering guard.
    assert!(
        locks::try_acquire(context.agent_locks(), &dir, &key)
            .await
            .is_none()
    );
    let entry = context
        .agent_locks()
        .get(&(dir.clone(), key.clone()))
        .expect("the gate entry exists")
        .clone();
    assert!(entry.try_lock().is_ok(), "no guard lingers after a miss");
    assert!(other.close_stdin().success());
}

#[tokio::test(flavor = "multi_thread")]
async fn clones_of_a_context_share_one_gate() {
    let (_tmp, state) = state_in_tempdir();
    let context = Context::new(state.clone());
    let clone = context.clone();
    let (dir, key) = agent_tag_lock(&state, "shared");

    let held = locks::try_acquire(context.agent_locks(), &dir, &key)
        .await
        .expect("free key");
    assert!(
        locks::try_acquire(clone.agent_locks(), &dir, &key)
            .await
            .is_none(),
        "a clone sees the original's guard"
    );
    held.release().unwrap();
    let again = locks::try_acquire(clone.agent_locks(), &dir, &key)
        .await
        .expect("free after release");
    again.release().unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn many_wait_acquire_tasks_on_one_key_take_turns() {
    let (_tmp, state) = state_in_tempdir();
    let context = Context::new(state.clone());
    let (dir, key) = agent_tag_lock(&state, "turns");
    let owners = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));

    let tasks: Vec<_> = (0..8)
        .map(|_| {
            let (context, dir, key) = (context.clone(), dir.clone(), key.clone());
            let owners = owners.clone();
            tokio::spawn(async move {
                for _ in 0..10 {
                    let lock = locks::wait_acquire(context.agent_locks(), &dir, &key)
                        .await
                        .unwrap();
                    let before = owners.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    assert_eq!(before, 0, "two owners of one key");
                    tokio::task::yield_now().await;
                    owners.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
                    lock.release().unwrap();
                }
            })
        })
        .collect();
    tokio::time::timeout(Duration::from_secs(60), futures::future::join_all(tasks))
        .await
        .expect("no deadlock")
        .into_iter()
        .for_each(|r| r.unwrap());
}
