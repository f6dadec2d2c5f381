//! Cross-process exclusion: real `locktop hold` children against the
//! `locks` module in this process.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::common;
use crate::common::{
    Holder, STILL_BLOCKED, WAKE_TIMEOUT, group_args, run_locktop, state_in_tempdir, tag_args,
};
use locktop::context::Context;
use locktop::locks::{
    self, AgentLockMap, Family, agent_instance_lock, agent_tag_lock, family_coords,
};

/// `try_acquire` is refused AND the in-process guard of that key is free
/// right after (a cross-process miss must not leave the mutex taken).
async fn assert_busy_without_lingering_guard(map: &AgentLockMap, dir: &Path, key: &str) {
    assert!(
        locks::try_acquire(map, dir, key).await.is_none(),
        "{dir:?}/{key:?} is held by another process"
    );
    let mutex = map
        .get(&(dir.to_path_buf(), key.to_string()))
        .expect("the attempt created a gate entry")
        .clone();
    assert!(
        mutex.try_lock().is_ok(),
        "the in-process guard of {key:?} lingers after a cross-process miss"
    );
}

/// Spawns `wait_acquire` on `(dir, key)`, shows it stays blocked while
/// `holder` lives, SIGKILLs the holder, and requires the waiter to get the
/// lock afterwards.
async fn assert_wait_acquire_waits_for_sigkill(
    context: &Context,
    dir: PathBuf,
    key: String,
    holder: &mut Holder,
) {
    let waiter = {
        let (context, dir, key) = (context.clone(), dir.clone(), key.clone());
        tokio::spawn(async move { locks::wait_acquire(context.agent_locks(), &dir, &key).await })
    };
    tokio::time::sleep(STILL_BLOCKED).await;
    assert!(
        !waiter.is_finished(),
        "wait_acquire returned while pid {} holds {key:?}",
        holder.pid()
    );

    let status = holder.kill();
    assert!(!status.success(), "killed, not exited: {status:?}");

    let lock = tokio::time::timeout(WAKE_TIMEOUT, waiter)
        .await
        .expect("wait_acquire must return once the holder is SIGKILLed")
        .unwrap()
        .expect("wait_acquire succeeds");
    assert_eq!((lock.dir(), lock.key()), (dir.as_path(), key.as_str()));
    lock.release().unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn held_line_reports_the_child_pid_and_its_locks_in_order() {
    let (_tmp, state) = state_in_tempdir();
    let args = ["--aih", "cli/daemon/abc", "--tag", "t1", "--tag", "my tag"];
    let mut holder = Holder::hold(&state, &args);
    assert_eq!(holder.held["held"], true);
    assert_eq!(holder.held["pid"].as_u64(), Some(u64::from(holder.pid())));
    assert_eq!(
        holder.locks(),
        vec!["instance cli/daemon/abc", "tag t1", "tag my tag"]
    );
    assert!(holder.close_stdin().success());
}

#[tokio::test(flavor = "multi_thread")]
async fn tag_held_by_another_process_is_refused_and_leaves_no_guard() {
    let (_tmp, state) = state_in_tempdir();
    let context = Context::new(state.clone());
    let _holder = Holder::hold(&state, &tag_args(&["T"]));
    let (dir, key) = agent_tag_lock(&state, "T");
    assert_busy_without_lingering_guard(context.agent_locks(), &dir, &key).await;
    // Refused again, identically: the miss left nothing behind.
    assert_busy_without_lingering_guard(context.agent_locks(), &dir, &key).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn sigkill_of_tag_holder_lets_wait_acquire_through() {
    let (_tmp, state) = state_in_tempdir();
    let context = Context::new(state.clone());
    let mut holder = Holder::hold(&state, &tag_args(&["T"]));
    let (dir, key) = agent_tag_lock(&state, "T");
    assert_busy_without_lingering_guard(context.agent_locks(), &dir, &key).await;
    assert_wait_acquire_waits_for_sigkill(&context, dir, key, &mut holder).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn sigkill_of_hierarchy_holder_lets_wait_acquire_through_on_instance_and_tag() {
    let (_tmp, state) = state_in_tempdir();
    let context = Context::new(state.clone());
    let mut holder = Holder::hold(&state, &["--aih", "root/child/A", "--tag", "T"]);

    let (instance_dir, instance_key) = agent_instance_lock(&state, "root/child/A");
    let (tag_dir, tag_key) = agent_tag_lock(&state, "T");
    assert_busy_without_lingering_guard(context.agent_locks(), &instance_dir, &instance_key).await;
    assert_busy_without_lingering_guard(context.agent_locks(), &tag_dir, &tag_key).await;

    let tag_waiter = {
        let (context, dir, key) = (context.clone(), tag_dir.clone(), tag_key.clone());
        tokio::spawn(async move { locks::wait_acquire(context.agent_locks(), &dir, &key).await })
    };
    assert_wait_acquire_waits_for_sigkill(&context, instance_dir, instance_key, &mut holder).await;
    let tag = tokio::time::timeout(WAKE_TIMEOUT, tag_waiter)
        .await
        .expect("the tag waiter wakes too")
        .unwrap()
        .unwrap();
    tag.release().unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn sigkill_of_group_holder_lets_wait_acquire_through() {
    let (_tmp, state) = state_in_tempdir();
    let context = Context::new(state.clone());
    let mut holder = Holder::hold(&state, &group_args(&["a", "b"]));
    assert_eq!(holder.locks(), vec!["tag a", "tag b"]);

    for tag in ["a", "b"] {
        let (dir, key) = agent_tag_lock(&state, tag);
        assert_busy_without_lingering_guard(context.agent_locks(), &dir, &key).await;
    }
    let family = locks::try_acquire_family(
        context.agent_locks(),
        &state,
        Family::Group(vec!["b".into()]),
    )
    .await
    .unwrap();
    assert!(family.is_none(), "a family with a held member is busy");

    let (dir, key) = agent_tag_lock(&state, "b");
    assert_wait_acquire_waits_for_sigkill(&context, dir, key, &mut holder).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn closing_stdin_releases_and_exits_zero() {
    let (_tmp, state) = state_in_tempdir();
    let context = Context::new(state.clone());
    let mut holder = Holder::hold(&state, &["--aih", "x/y", "--tag", "T"]);
    let status = holder.close_stdin();
    assert_eq!(status.code(), Some(0), "stderr: {}", holder.take_stderr());
    assert_eq!(
        holder.next_line(WAKE_TIMEOUT).as_deref(),
        Some(r#"{"released":true}"#)
    );

    let coords = family_coords(
        &state,
        &Family::Hierarchy {
            aih: "x/y".into(),
            tags: vec!["T".into()],
        },
    )
    .unwrap();
    let all = locks::try_acquire_all(context.agent_locks(), &coords)
        .await
        .expect("everything is free after the holder released");
    assert_eq!(all.len(), 2);
}

#[tokio::test(flavor = "multi_thread")]
async fn sigterm_releases_and_exits_zero() {
    let (_tmp, state) = state_in_tempdir();
    let context = Context::new(state.clone());
    let mut holder = Holder::hold(&state, &tag_args(&["T"]));
    let status = holder.terminate();
    assert_eq!(status.code(), Some(0), "stderr: {}", holder.take_stderr());
    assert_eq!(
        holder.next_line(WAKE_TIMEOUT).as_deref(),
        Some(r#"{"released":true}"#)
    );
    let (dir, key) = agent_tag_lock(&state, "T");
    let lock = locks::try_acquire(context.agent_locks(), &dir, &key)
        .await
        .expect("free after SIGTERM");
    lock.release().unwrap();
}

/// A supervisor may stop a holder the moment it reads `{"held":true}`:
/// `hold` installs its SIGTERM/SIGINT handlers BEFORE printing that line,
/// so even then it releases, prints `{"released":true}` and exits 0 (it
/// once printed first and died by the default action).
#[tokio::test(flavor = "multi_thread")]
async fn sigterm_right_after_the_held_line_still_releases_and_exits_zero() {
    let (_tmp, state) = state_in_tempdir();
    for round in 0..50 {
        let mut holder = Holder::hold(&state, &tag_args(&["T"]));
        let status = holder.terminate_now();
        assert_eq!(
            status.code(),
            Some(0),
            "round {round}: SIGTERM right after the held line: {status:?}"
        );
        assert_eq!(
            holder.next_line(WAKE_TIMEOUT).as_deref(),
            Some(r#"{"released":true}"#)
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn stdin_data_does_not_release_only_eof_does() {
    let (_tmp, state) = state_in_tempdir();
    let context = Context::new(state.clone());
    let mut holder = Holder::hold(&state, &tag_args(&["T"]));
    holder.write_stdin(b"anything\n");
    tokio::time::sleep(STILL_BLOCKED).await;
    let (dir, key) = agent_tag_lock(&state, "T");
    assert_busy_without_lingering_guard(context.agent_locks(), &dir, &key).await;
    assert_eq!(holder.close_stdin().code(), Some(0));
}

#[tokio::test(flavor = "multi_thread")]
async fn ignore_stdin_keeps_holding_after_eof_until_sigterm() {
    let (_tmp, state) = state_in_tempdir();
    let context = Context::new(state.clone());
    let mut command = common::locktop_command(&state, &["hold", "--ignore-stdin", "--tag", "T"]);
    command.stdin(std::process::Stdio::null());
    let mut child = command.spawn().unwrap();
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    let stdout = child.stdout.take().unwrap();
    let line = tokio::task::spawn_blocking(move || {
        let mut line = String::new();
        std::io::BufRead::read_line(&mut std::io::BufReader::new(stdout), &mut line).unwrap();
        line
    })
    .await
    .unwrap();
    assert!(line.contains(r#""held":true"#), "{line:?}");

    tokio::time::sleep(STILL_BLOCKED).await;
    assert!(child.try_wait().unwrap().is_none(), "EOF on stdin ignored");
    let (dir, key) = agent_tag_lock(&state, "T");
    assert_busy_without_lingering_guard(context.agent_locks(), &dir, &key).await;

    common::wait_until_catches(child.id(), nix::sys::signal::Signal::SIGTERM);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
    let status =
        common::wait_with_timeout(&mut child, common::PROCESS_TIMEOUT).expect("exits on SIGTERM");
    assert_eq!(status.code(), Some(0));
}

#[tokio::test(flavor = "multi_thread")]
async fn try_acquire_all_with_one_busy_member_leaves_every_other_member_free() {
    let (_tmp, state) = state_in_tempdir();
    let context = Context::new(state.clone());
    let mut busy_holder = Holder::hold(&state, &tag_args(&["busy"]));

    let family = Family::Hierarchy {
        aih: "w/x".into(),
        tags: vec!["a".into(), "busy".into(), "c".into()],
    };
    let coords = family_coords(&state, &family).unwrap();
    assert!(
        locks::try_acquire_all(context.agent_locks(), &coords)
            .await
            .is_none(),
        "one busy member fails the whole set"
    );
    assert!(
        locks::try_acquire_family(context.agent_locks(), &state, family.clone())
            .await
            .unwrap()
            .is_none()
    );
    let busy = locks::try_acquire_all_detailed(context.agent_locks(), &coords)
        .await
        .expect_err("busy");
    assert_eq!(busy.coords, coords);
    assert_eq!(busy.busy, vec![2], "only the held tag is busy");

    // No in-process guard lingers on any member …
    for (dir, key) in &coords {
        let mutex = context
            .agent_locks()
            .get(&(dir.clone(), key.clone()))
            .unwrap()
            .clone();
        assert!(mutex.try_lock().is_ok(), "guard of {key:?} lingers");
    }
    // … and no claim: ANOTHER process takes every other member at once.
    let mut others = Holder::hold(&state, &["--aih", "w/x", "--tag", "a", "--tag", "c"]);
    assert_eq!(others.locks(), vec!["instance w/x", "tag a", "tag c"]);

    // The busy member's holder is named with its pid, exit 1.
    let refused = run_locktop(&state, &["hold", "--tag", "busy"]);
    assert_eq!(refused.code(), 1, "{refused:?}");
    let lines = refused.stderr_lines();
    assert_eq!(lines.len(), 1, "{refused:?}");
    assert!(lines[0].contains(r#"tag "busy""#), "{refused:?}");
    assert!(
        lines[0].contains(&format!("pid {}", busy_holder.pid())),
        "stderr names the holder pid {}: {refused:?}",
        busy_holder.pid()
    );
    assert!(
        !refused.stdout.contains("held"),
        "a refused hold prints no held line: {refused:?}"
    );

    assert_eq!(others.close_stdin().code(), Some(0));
    assert_eq!(busy_holder.close_stdin().code(), Some(0));
}

#[tokio::test(flavor = "multi_thread")]
async fn hold_names_every_busy_member_of_a_group() {
    let (_tmp, state) = state_in_tempdir();
    let first = Holder::hold(&state, &tag_args(&["p"]));
    let second = Holder::hold(&state, &tag_args(&["q"]));
    let refused = run_locktop(
        &state,
        &["hold", "--group", "p", "--group", "free", "--group", "q"],
    );
    assert_eq!(refused.code(), 1, "{refused:?}");
    let lines = refused.stderr_lines();
    assert_eq!(lines.len(), 2, "{refused:?}");
    assert!(lines[0].contains(r#"tag "p""#) && lines[0].contains(&format!("pid {}", first.pid())));
    assert!(lines[1].contains(r#"tag "q""#) && lines[1].contains(&format!("pid {}", second.pid())));
    // The free member was not left held by the refused process.
    let mut free = Holder::hold(&state, &tag_args(&["free"]));
    assert_eq!(free.close_stdin().code(), Some(0));
}

#[tokio::test(flavor = "multi_thread")]
async fn hold_wait_reports_the_blocker_then_holds_after_it_is_killed() {
    let (_tmp, state) = state_in_tempdir();
    let mut blocker = Holder::hold(&state, &tag_args(&["T"]));

    let mut command =
        common::locktop_command(&state, &["hold", "--wait", "--tag", "U", "--tag", "T"]);
    let mut waiter = command.spawn().unwrap();
    let _waiter_stdin = waiter.stdin.take();
    let rx = common::lines_of(waiter.stdout.take().unwrap());

    let waiting: serde_json::Value =
        serde_json::from_str(&rx.recv_timeout(common::PROCESS_TIMEOUT).unwrap()).unwrap();
    assert_eq!(waiting["waiting"], true, "{waiting}");
    assert_eq!(waiting["busy"][0]["kind"], "tag", "{waiting}");
    assert_eq!(waiting["busy"][0]["name"], "T", "{waiting}");
    assert_eq!(
        waiting["busy"][0]["holders"][0]["pid"].as_u64(),
        Some(u64::from(blocker.pid())),
        "{waiting}"
    );
    tokio::time::sleep(STILL_BLOCKED).await;
    assert!(waiter.try_wait().unwrap().is_none(), "still waiting");

    blocker.kill();
    let held = loop {
        let line = rx
            .recv_timeout(common::PROCESS_TIMEOUT)
            .expect("the waiter holds once the blocker is gone");
        let value: serde_json::Value = serde_json::from_str(&line).unwrap();
        if value["held"] == true {
            break value;
        }
    };
    assert_eq!(held["locks"], serde_json::json!(["tag U", "tag T"]));
    drop(_waiter_stdin);
    let status = common::wait_with_timeout(&mut waiter, common::PROCESS_TIMEOUT).unwrap();
    assert_eq!(status.code(), Some(0));
}

#[tokio::test(flavor = "multi_thread")]
async fn wait_acquire_family_waits_for_a_killed_holder_and_reports_busy() {
    let (_tmp, state) = state_in_tempdir();
    let context = Context::new(state.clone());
    let mut holder = Holder::hold(&state, &tag_args(&["b"]));
    let family = Family::Group(vec!["a".into(), "b".into(), "c".into()]);

    let reports = Arc::new(AtomicUsize::new(0));
    let waiter = {
        let (context, state, reports) = (context.clone(), state.clone(), reports.clone());
        tokio::spawn(async move {
            locks::wait_acquire_family(context.agent_locks(), &state, &family, |busy| {
                assert_eq!(busy.busy, vec![1]);
                reports.fetch_add(1, Ordering::SeqCst);
            })
            .await
        })
    };
    tokio::time::sleep(STILL_BLOCKED).await;
    assert!(!waiter.is_finished());
    assert!(reports.load(Ordering::SeqCst) >= 1, "on_busy was told");

    // While it waits on "b" it holds nothing: another process can take a+c.
    let mut side = Holder::hold(&state, &group_args(&["a", "c"]));
    assert_eq!(side.close_stdin().code(), Some(0));

    holder.kill();
    let all = tokio::time::timeout(WAKE_TIMEOUT, waiter)
        .await
        .expect("wakes after SIGKILL")
        .unwrap()
        .unwrap();
    let keys: Vec<&str> = all.iter().map(|l| l.key()).collect();
    assert_eq!(keys, ["a", "b", "c"]);
}
