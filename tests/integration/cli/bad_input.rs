//! Bad input, each answered with one clear line on stderr and exit 2 —
//! never a panic, never a wait that cannot end. Run as an unprivileged
//! user where permissions matter (root ignores file modes).

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::common::{PROCESS_TIMEOUT, locktop_bin, state_in_tempdir, wait_with_timeout};

/// `nobody`: an unprivileged user for the permission cases.
const NOBODY: u32 = 65534;

/// A copy of the binary any user may run (the build dir may sit below a
/// directory only root may enter), in a temp dir kept by the caller.
fn binary_for_anyone() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let bin = dir.path().join("locktop");
    std::fs::copy(locktop_bin(), &bin).expect("copy the binary");
    std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    (dir, bin)
}

/// Runs `bin --state-dir STATE args…` as `uid` (stdin closed, no TTY);
/// returns the exit code and stderr.
fn run_as(
    uid: u32,
    bin: &Path,
    state: &Path,
    args: &[&str],
    env: &[(&str, &str)],
) -> (i32, String) {
    let mut command = Command::new(bin);
    command
        .arg("--state-dir")
        .arg(state)
        .args(args)
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    std::os::unix::process::CommandExt::uid(&mut command, uid);
    std::os::unix::process::CommandExt::gid(&mut command, uid);
    let mut child = command.spawn().expect("spawn");
    let status = wait_with_timeout(&mut child, PROCESS_TIMEOUT).unwrap_or_else(|| {
        let _ = child.kill();
        panic!("{args:?} did not exit: it waits on something it cannot read");
    });
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().expect("stderr"), &mut stderr)
        .expect("stderr");
    (status.code().expect("exited, not killed"), stderr)
}

fn assert_one_line_exit_2(what: &str, (code, stderr): (i32, String), needle: &str) {
    assert_eq!(code, 2, "{what}: {stderr}");
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.is_empty()).collect();
    assert_eq!(lines.len(), 1, "{what}: one line: {stderr:?}");
    assert!(lines[0].contains(needle), "{what}: {stderr:?}");
    assert!(!stderr.contains("panicked"), "{what}: {stderr:?}");
}

#[test]
fn a_state_dir_the_user_may_not_read_is_one_line_and_exit_2_for_every_command() {
    // SAFETY: geteuid has no preconditions.
    let euid = unsafe { libc::geteuid() };
    assert_eq!(euid, 0, "this test runs as root, to drop to nobody");
    let (_bin_dir, bin) = binary_for_anyone();
    let (tmp, state) = state_in_tempdir();
    std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o755)).expect("chmod");
    std::fs::set_permissions(&state, std::fs::Permissions::from_mode(0o700)).expect("chmod");
    for args in [
        &["snapshot"][..],
        &["snapshot", "--json"][..],
        &["watch"][..],
        &["watch", "--json"][..],
        &["check", "--tag", "x"][..],
        &["hold", "--tag", "x"][..],
    ] {
        let outcome = run_as(NOBODY, &bin, &state, args, &[]);
        assert_one_line_exit_2(&format!("{args:?}"), outcome, "ermission denied");
    }
}

#[test]
fn an_invalid_objectiveai_state_is_one_line_and_exit_2_for_every_command() {
    let (_tmp, state) = state_in_tempdir();
    for args in [
        &["snapshot"][..],
        &["watch"][..],
        &["check", "--tag", "x"][..],
        &["hold", "--tag", "x"][..],
    ] {
        let mut command = Command::new(locktop_bin());
        command
            .args(args)
            .env("OBJECTIVEAI_DIR", &state)
            .env("OBJECTIVEAI_STATE", "../escape")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let out = command.output().expect("run");
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        let code = out.status.code().expect("exited");
        assert_one_line_exit_2(&format!("{args:?}"), (code, stderr), "OBJECTIVEAI_STATE");
    }
}

#[test]
fn completions_and_man_are_generated_from_the_clap_definitions() {
    let (_tmp, state) = crate::common::state_in_tempdir();
    for shell in ["bash", "zsh", "fish"] {
        let out = crate::common::run_locktop(&state, &["completions", shell]);
        assert_eq!(out.code(), 0, "{shell}: {}", out.stderr);
        for word in ["snapshot", "watch", "state-dir", "read-only"] {
            assert!(out.stdout.contains(word), "{shell} completes {word}");
        }
    }
    let man = crate::common::run_locktop(&state, &["man"]);
    assert_eq!(man.code(), 0, "{}", man.stderr);
    assert!(man.stdout.starts_with(".ie") || man.stdout.contains(".TH locktop 1"));
    assert!(man.stdout.contains("completions") && man.stdout.contains("snapshot"));
    let wrong = crate::common::run_locktop(&state, &["completions", "tcsh"]);
    assert_eq!(wrong.code(), 2, "an unknown shell is bad input");
}
