//! Operator actions against the real world: signals to real child
//! processes (SIGTERM, then SIGKILL; never our own PID, PID 1 or a reused
//! PID), and a real holder manager on a temp state dir, where the
//! in-process gate refuses a second holder of a held tag.

use std::process::{Child, Command};
use std::time::Duration;

use crossterm::event::KeyCode;

use crate::context::Context;
use crate::engine::Liveness;
use crate::liveness::process::ProcessInfo;
use crate::model::fixtures::*;
use crate::model::{Model, Section};
use crate::operate::test_holders::HolderStatus;

use super::support::{app_on, press, select, text_of, type_text};
use crate::liveness::verify::testing::{hold_through_flock, sleep_with_pid};
use crate::operate::signal::verify_target;
use crate::tui::*;

#[test]
fn own_pid_and_pid_one_are_never_signalled() {
    let me = std::process::id();
    for (pid, reason) in [(me, "this locktop"), (1, "never signalled")] {
        let mut model = Model::default();
        model.apply(key_delta(
            instance("cli/daemon/me"),
            held(Liveness::Own, pid, "locktop", t(0)),
            None,
            t(0),
        ));
        let mut app = app_on(model, STATE.as_ref());
        select(&mut app, Section::Instances, "cli/daemon/me");
        press(&mut app, KeyCode::Char('K'));
        assert!(!app.has_overlay());
        assert!(app.message().unwrap().contains(reason));
        assert!(verify_target(&ProcessInfo::of(pid), &[], None).is_err());
    }
}

/// A real process that really holds `cli/daemon/victim` (its gate and
/// announce flocked on descriptions it keeps), shown in the model.
/// `ignore_term`: the victim ignores SIGTERM (only SIGKILL ends it).
fn victim(ignore_term: bool) -> (Child, App, tempfile::TempDir) {
    let state = tempfile::tempdir().unwrap();
    let (dir, key) = crate::locks::agent_instance_lock(state.path(), "cli/daemon/victim");
    std::fs::create_dir_all(&dir).unwrap();
    let key = crate::disk::LockKey::from_coord(state.path(), &dir, &key);
    let (gate, announce) = (key.gate_path(), key.announce_path());
    let lock = "exec 8<>\"$1\" 9<>\"$2\" && flock -x 8 && flock -x 9";
    let trap = if ignore_term { "trap '' TERM && " } else { "" };
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(format!("{lock} && {trap}echo ready && exec sleep 30"))
        .arg("sh")
        .args([&gate, &announce])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Locked (and the trap set) once it says so: no guessing with a sleep.
    let mut ready = String::new();
    let stdout = child.stdout.take().unwrap();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(stdout), &mut ready).unwrap();
    assert_eq!(ready.trim(), "ready");
    let holder = ProcessInfo::of(child.id());
    let mut model = Model::new(Box::new(|pid| Some(pid_alive(pid))));
    let state_of_key = crate::engine::KeyState {
        holders: vec![holder],
        ..held(Liveness::Live, 0, "", t(0))
    };
    model.apply(key_delta(key, state_of_key, None, t(0)));
    let mut app = app_on(model, state.path());
    select(&mut app, Section::Instances, "cli/daemon/victim");
    (child, app, state)
}

fn killed_by(child: &mut Child) -> Option<i32> {
    use std::os::unix::process::ExitStatusExt;
    child.wait().unwrap().signal()
}

#[test]
fn k_then_y_sends_sigterm_to_a_real_holder() {
    let (mut child, mut app, _state) = victim(false);
    press(&mut app, KeyCode::Char('K'));
    press(&mut app, KeyCode::Char('y'));
    assert_eq!(killed_by(&mut child), Some(libc::SIGTERM));
    app.tick(t(601));
    assert!(text_of(&mut app).contains("it has exited"));
    // Its key's release is logged with the word locktop can vouch for.
    let key = app
        .model()
        .data()
        .lock(app.model().selected_node().unwrap());
    let key = key.unwrap().key.clone();
    app.apply(key_delta(key, free(), Some(Liveness::Live), t(602)));
    let logged = app.model().events().get(0).map(|e| e.kind.text());
    assert_eq!(logged.as_deref(), Some("killed by locktop"));
}

#[test]
fn a_holder_ignoring_sigterm_gets_sigkill_on_the_second_confirmation() {
    let (mut child, mut app, _state) = victim(true);
    press(&mut app, KeyCode::Char('K'));
    press(&mut app, KeyCode::Char('y'));
    std::thread::sleep(Duration::from_millis(100));
    app.tick(t(601));
    let shown = text_of(&mut app);
    assert!(
        shown.contains("it is still running") && shown.contains("K send SIGKILL"),
        "{shown}"
    );
    press(&mut app, KeyCode::Char('K'));
    assert_eq!(killed_by(&mut child), Some(libc::SIGKILL));
}

#[test]
fn a_reused_pid_is_not_signalled() {
    let mut child = Command::new("sleep").arg("30").spawn().unwrap();
    let shown = ProcessInfo {
        started: Some(t(0)), // not when this process started
        ..ProcessInfo::of(child.id())
    };
    let refused = verify_target(&shown, &[], None).unwrap_err();
    assert!(
        refused.to_string().contains("now another process"),
        "{refused}"
    );
    assert_eq!(child.try_wait().unwrap(), None, "still running");
    child.kill().unwrap();
    child.wait().unwrap();
}

/// The dialog binds its process (a pidfd) when it opens: if the holder
/// dies and its PID is reused before the confirmation, the new process is
/// never hit.
#[test]
fn a_pid_reused_between_the_dialog_and_the_confirmation_is_never_signalled() {
    if !crate::liveness::verify::testing::may_reuse_pids(
        "tui::tests::live::a_pid_reused_between_the_dialog_and_the_confirmation_is_never_signalled",
    ) {
        return;
    }
    let (mut child, mut app, _state) = victim(false);
    let pid = child.id();
    press(&mut app, KeyCode::Char('K'));
    assert!(
        text_of(&mut app).contains("Send SIGTERM"),
        "the dialog asks"
    );
    child.kill().unwrap();
    child.wait().unwrap();
    let mut impostor = sleep_with_pid(pid);
    press(&mut app, KeyCode::Char('y'));
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(
        impostor.try_wait().unwrap(),
        None,
        "the new process was signalled"
    );
    assert!(text_of(&mut app).contains("has already exited"));
    impostor.kill().unwrap();
    impostor.wait().unwrap();
}

/// A process that holds no lock is never bound, even though `/proc/locks`
/// once named its PID.
#[test]
fn a_process_that_does_not_hold_the_lock_is_never_bound() {
    let dir = tempfile::tempdir().unwrap();
    let gate = dir.path().join("x.lock");
    let mut keeper = hold_through_flock(&[&gate]);
    let files = [crate::liveness::proc_locks::FileId::of(&gate).unwrap()];
    let mut bystander = Command::new("sleep").arg("30").spawn().unwrap();
    let shown = ProcessInfo::of(bystander.id());
    let refused = verify_target(&shown, &files, None).unwrap_err();
    assert!(
        refused.to_string().contains("does not hold the lock"),
        "{refused}"
    );
    let holder = ProcessInfo::of(keeper.id());
    assert!(verify_target(&holder, &files, None).is_ok());
    for child in [&mut keeper, &mut bystander] {
        child.kill().unwrap();
        child.wait().unwrap();
    }
}

/// Drives the app's own channels until `done` (10 s at most).
async fn until(app: &mut App, events: &mut OpsEvents, done: impl Fn(&App) -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !done(app) {
        tokio::select! {
            Some(update) = events.holder_updates.recv() => app.holder_update(update),
            Some(outcome) = events.checks.recv() => app.check_done(outcome),
            _ = tokio::time::sleep_until(deadline) => panic!("timed out"),
        }
    }
}

fn status(app: &App, id: u64) -> HolderStatus {
    app.test_holders().get(id).unwrap().status.clone()
}

fn report_lines_of(app: &App) -> Option<Vec<String>> {
    match &app.operator.overlay {
        Some(Overlay::Report(report)) => report.lines.clone(),
        _ => None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_in_process_holder_of_a_held_tag_is_refused_with_who_holds_it() {
    let dir = tempfile::tempdir().unwrap();
    let context = Context::new(dir.path().to_path_buf());
    let (engine_tx, mut engine_rx) = tokio::sync::mpsc::unbounded_channel();
    let (ops, mut events) = Ops::new(context, Some(engine_tx)).unwrap();
    let me = std::process::id();
    let mut model = Model::default();
    let own = held(Liveness::Own, me, "locktop", t(0));
    model.apply(key_delta(tag("T"), own, None, t(0)));
    let mut app = app_on(model, dir.path()).with_ops(ops);

    press(&mut app, KeyCode::Char('n'));
    type_text(&mut app, "T");
    press(&mut app, KeyCode::Enter);
    assert_eq!(app.pane(), Pane::TestHolders);
    until(&mut app, &mut events, |app| {
        status(app, 1) == HolderStatus::Holding
    })
    .await;
    assert_eq!(app.test_holders().get(1).unwrap().pid, Some(me));

    press(&mut app, KeyCode::Char('n'));
    type_text(&mut app, "T");
    press(&mut app, KeyCode::Enter);
    until(&mut app, &mut events, |app| status(app, 2).is_over()).await;
    let HolderStatus::Failed(reason) = status(&app, 2) else {
        panic!("{:?}", status(&app, 2));
    };
    assert!(
        reason.starts_with(r#"busy: tag "T""#) && reason.contains(&me.to_string()),
        "{reason}"
    );
    assert!(app.message().unwrap().contains("#2 failed: busy"));

    // "Why is this stuck?" on T names this process as the holder.
    press(&mut app, KeyCode::Char('1'));
    select(&mut app, Section::Tags, "T");
    press(&mut app, KeyCode::Char('c'));
    press(&mut app, KeyCode::Enter);
    until(&mut app, &mut events, |app| report_lines_of(app).is_some()).await;
    let lines = report_lines_of(&app).unwrap();
    assert!(lines[0].starts_with("busy"), "{lines:?}");
    assert!(
        lines
            .iter()
            .any(|l| l.contains(&format!("held by pid {me}"))),
        "{lines:?}"
    );
    press(&mut app, KeyCode::Esc);

    // Read-only: the check still runs, passively.
    app.config.read_only = true;
    press(&mut app, KeyCode::Char('c'));
    press(&mut app, KeyCode::Enter);
    until(&mut app, &mut events, |app| report_lines_of(app).is_some()).await;
    assert!(report_lines_of(&app).unwrap()[0].starts_with("busy"));
    assert!(matches!(&app.operator.overlay, Some(Overlay::Report(r)) if r.how.contains("passive")));
    press(&mut app, KeyCode::Esc);
    app.config.read_only = false;

    // r releases holder #1; then T can be held again.
    press(&mut app, KeyCode::Char('4'));
    app.select_index(0);
    press(&mut app, KeyCode::Char('r'));
    until(&mut app, &mut events, |app| status(app, 1).is_over()).await;
    assert_eq!(status(&app, 1), HolderStatus::Exited("released".into()));
    press(&mut app, KeyCode::Char('n'));
    type_text(&mut app, "T");
    press(&mut app, KeyCode::Enter);
    until(&mut app, &mut events, |app| {
        status(app, 3) == HolderStatus::Holding
    })
    .await;

    assert_eq!(app.release_all_test_holders(), 1);
    until(&mut app, &mut events, |app| app.test_holders_running() == 0).await;
    assert!(
        engine_rx.try_recv().is_err(),
        "in-process holders never touch own PIDs"
    );
}
