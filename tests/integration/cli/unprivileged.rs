//! A monitor run by an unprivileged user, watching agents another user
//! (root) runs — what an operator who is not root sees. Where it may not
//! read a holder's open files it cannot verify the holder: that holder is
//! marked unverified (in JSON and on screen) and nothing else is said of
//! its PID; shared locks still show, from `/proc/locks`; an orphaned lock
//! whose keeper it cannot see is said so, never "agent active" on the
//! dead taker.
//!
//! Root drops the monitor to `nobody`; run by anyone else, these tests
//! skip with one line (failed under `LOCKTOP_REQUIRE_ALL`, as `.ci/run`
//! sets, which runs as root).

use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::Value;

use crate::common::flock::keeper;
use crate::common::{
    self, Holder, NOBODY, binary_for_anyone, finish, skip_unless, state_in_tempdir,
};

/// True when root (the tests drop to nobody); otherwise one line says
/// the test is skipped.
fn root_or_skip(test: &str) -> bool {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let line = format!("skipped {test}: needs root, to run holders nobody's monitor may not read");
    skip_unless(root, &line)
}

/// A state dir (held by root) that anyone may read.
fn readable_state() -> (tempfile::TempDir, std::path::PathBuf) {
    use std::os::unix::fs::PermissionsExt;
    let (tmp, state) = state_in_tempdir();
    for dir in [tmp.path(), &state] {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    }
    (tmp, state)
}

/// `snapshot --json --all` as nobody: the document.
fn snapshot_as_nobody(bin: &Path, state: &Path) -> Value {
    let mut command = Command::new(bin);
    common::no_service(&mut command);
    command
        .arg("--state-dir")
        .arg(state)
        .args(["snapshot", "--json", "--all"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    std::os::unix::process::CommandExt::uid(&mut command, NOBODY);
    std::os::unix::process::CommandExt::gid(&mut command, NOBODY);
    let out = finish(command);
    assert_eq!(out.code(), 0, "{out:?}");
    serde_json::from_str(out.stdout.trim()).unwrap_or_else(|e| panic!("{e}: {out:?}"))
}

fn key<'a>(doc: &'a Value, name: &str) -> &'a Value {
    doc["keys"]
        .as_array()
        .expect("keys")
        .iter()
        .find(|key| key["name"] == name)
        .unwrap_or_else(|| panic!("no key {name}: {doc}"))
}

/// An agent root runs: nobody sees it held, its PID marked unverified and
/// the verdict saying so — not "agent active", which would present a PID
/// it cannot tell from a reused one as the holder.
#[test]
fn a_holder_nobody_may_read_is_marked_unverified() {
    if !root_or_skip("a_holder_nobody_may_read_is_marked_unverified") {
        return;
    }
    let (_bin_dir, bin) = binary_for_anyone();
    let (_tmp, state) = readable_state();
    let agent = Holder::hold(&state, &["--aih", "cli/daemon/u1", "--tag", "deploy"]);
    let doc = snapshot_as_nobody(&bin, &state);
    let deploy = key(&doc, "deploy");
    assert_eq!(deploy["liveness"], "live", "{doc}");
    assert_eq!(deploy["holders"][0]["pid"], agent.pid(), "{doc}");
    assert_eq!(deploy["holders"][0]["unverified"], true, "{doc}");
    assert_eq!(deploy["verdict"]["kind"], "unverified_holder", "{doc}");
    // As root, the same holder is verified.
    let out = crate::common::run_locktop(&state, &["snapshot", "--json"]);
    let doc: Value = serde_json::from_str(out.stdout.trim()).expect("JSON");
    let deploy = key(&doc, "deploy");
    assert!(deploy["holders"][0].get("unverified").is_none(), "{doc}");
    assert_eq!(deploy["verdict"]["kind"], "agent_active", "{doc}");
}

/// A `flock -s` by root blocks every agent's acquire: nobody sees the key
/// shared, with root's PID marked unverified (it read free: the shared
/// holder was dropped as unproven).
#[test]
fn a_shared_lock_nobody_may_verify_still_shows() {
    if !root_or_skip("a_shared_lock_nobody_may_verify_still_shows") {
        return;
    }
    let (_bin_dir, bin) = binary_for_anyone();
    let (_tmp, state) = readable_state();
    drop(Holder::hold(&state, &["--tag", "sh"])); // the tag's files
    let (dir, name) = locktop::locks::agent_tag_lock(&state, "sh");
    let gate = locktop::locks::escape::gate_path(&dir, &name);
    let mut shared = Command::new("flock")
        .arg("-s")
        .arg(&gate)
        .args(["sleep", "60"])
        .spawn()
        .expect("flock -s");
    let id = locktop::liveness::proc_locks::FileId::of(&gate).expect("gate");
    let deadline = std::time::Instant::now() + crate::common::PROCESS_TIMEOUT;
    while locktop::liveness::proc_locks::LockIndex::read()
        .expect("/proc/locks")
        .get(&id)
        .is_none_or(|locks| locks.shared.is_empty())
    {
        assert!(
            std::time::Instant::now() < deadline,
            "flock -s never locked"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let doc = snapshot_as_nobody(&bin, &state);
    let sh = key(&doc, "sh");
    assert_eq!(sh["liveness"], "shared", "{doc}");
    assert_eq!(sh["holders"][0]["pid"], shared.id(), "{doc}");
    assert_eq!(sh["holders"][0]["unverified"], true, "{doc}");
    let _ = shared.kill();
    let _ = shared.wait();
}

/// A lock root's forked child keeps after its taker died: nobody cannot
/// see the keeper, and says so — the verdict is `orphaned_child` with no
/// keeper named, never `agent_active` on the dead taker.
#[test]
fn an_orphan_whose_keeper_nobody_may_see_is_said_so() {
    if !root_or_skip("an_orphan_whose_keeper_nobody_may_see_is_said_so") {
        return;
    }
    let (_bin_dir, bin) = binary_for_anyone();
    let (_tmp, state) = readable_state();
    drop(Holder::hold(&state, &["--aih", "cli/daemon/o1"])); // its files
    let (dir, name) = locktop::locks::agent_instance_lock(&state, "cli/daemon/o1");
    let gate = locktop::locks::escape::gate_path(&dir, &name);
    let announce = locktop::locks::escape::announce_path(&dir, &name);
    let mut keeper = keeper(&gate, &announce, "flock -x 3 && flock -x 4");
    let doc = snapshot_as_nobody(&bin, &state);
    let kept = key(&doc, "cli/daemon/o1");
    assert_eq!(kept["liveness"], "live", "{doc}");
    assert_eq!(kept["verdict"]["kind"], "orphaned_child", "{doc}");
    assert!(kept["verdict"]["pid"].is_null(), "{doc}");
    assert!(
        kept["holders"]
            .as_array()
            .expect("holders")
            .iter()
            .all(|holder| holder["alive"] == false),
        "only the gone takers: {doc}"
    );
    let _ = keeper.kill();
    let _ = keeper.wait();
}

/// The takers of an orphaned lock are zombies (their parent, which keeps
/// the lock's files open, has not reaped them): a zombie has closed every
/// file, so nobody never names one as the holder, though it may not read
/// its fdinfo — the takers are listed gone and the verdict is
/// `orphaned_child`.
#[test]
fn a_zombie_taker_is_never_named_as_the_holder() {
    use std::os::fd::AsRawFd;
    use std::os::unix::process::CommandExt;
    use std::time::{Duration, Instant};
    if !root_or_skip("a_zombie_taker_is_never_named_as_the_holder") {
        return;
    }
    let (_bin_dir, bin) = binary_for_anyone();
    let (_tmp, state) = readable_state();
    drop(Holder::hold(&state, &["--aih", "cli/daemon/z1"])); // its files
    let (dir, name) = locktop::locks::agent_instance_lock(&state, "cli/daemon/z1");
    // This test keeps the files open (the keeper, root's) and has
    // flock(1) lock each through the shared description; it never reaps
    // the flock(1)s, which stay zombies while the locks live on.
    let files: Vec<std::fs::File> = [
        locktop::locks::escape::gate_path(&dir, &name),
        locktop::locks::escape::announce_path(&dir, &name),
    ]
    .iter()
    .map(|path| {
        std::fs::File::options()
            .read(true)
            .write(true)
            .open(path)
            .expect("open")
    })
    .collect();
    let mut takers: Vec<std::process::Child> = files
        .iter()
        .map(|file| {
            let fd = file.as_raw_fd();
            let mut command = Command::new("flock");
            command.args(["-x", "3"]).stdin(Stdio::null());
            // SAFETY: dup2 is async-signal-safe; `fd` stays open in the
            // parent until the child has exec'd.
            unsafe {
                command.pre_exec(move || {
                    // fd 3 for flock(1), open across exec (dup2 onto
                    // itself would keep its close-on-exec flag).
                    let done = if fd == 3 {
                        libc::fcntl(3, libc::F_SETFD, 0)
                    } else {
                        libc::dup2(fd, 3)
                    };
                    if done < 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
            command.spawn().expect("util-linux flock(1)")
        })
        .collect();
    let zombie = |pid: u32| {
        std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
            stat.rsplit(')')
                .next()
                .is_some_and(|rest| rest.trim_start().starts_with('Z'))
        })
    };
    let deadline = Instant::now() + crate::common::PROCESS_TIMEOUT;
    while !takers.iter().all(|taker| zombie(taker.id())) {
        assert!(Instant::now() < deadline, "the flock(1)s never exited");
        std::thread::sleep(Duration::from_millis(20));
    }
    let doc = snapshot_as_nobody(&bin, &state);
    let kept = key(&doc, "cli/daemon/z1");
    assert_eq!(kept["liveness"], "live", "{doc}");
    let holders = kept["holders"].as_array().expect("holders");
    assert!(
        holders.iter().all(|holder| holder["alive"] == false),
        "a zombie is no holder: {doc}"
    );
    assert_eq!(kept["verdict"]["kind"], "orphaned_child", "{doc}");
    drop(files);
    for taker in &mut takers {
        let _ = taker.wait();
    }
}

/// A non-root `watch` whose view of a held tag's directory is taken away
/// (`chmod 000` while root's agent holds the tag): the tag is not
/// `removed` — nothing says it is gone — but an error saying its
/// directory cannot be read; once readable again, it is live again with
/// its holder, a change from that error (not a new key).
#[test]
fn an_unreadable_directory_makes_its_held_keys_errors_not_removals() {
    use std::os::unix::fs::PermissionsExt;
    use std::time::{Duration, Instant};
    if !root_or_skip("an_unreadable_directory_makes_its_held_keys_errors_not_removals") {
        return;
    }
    let (_bin_dir, bin) = binary_for_anyone();
    let (_tmp, state) = readable_state();
    let agent = Holder::hold(&state, &["--aih", "cli/daemon/u7", "--tag", "deploy"]);
    let mut command = Command::new(&bin);
    common::no_service(&mut command);
    command
        .arg("--state-dir")
        .arg(&state)
        .args(["watch", "--json", "--initial", "--sweep", "0.2"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    std::os::unix::process::CommandExt::uid(&mut command, NOBODY);
    std::os::unix::process::CommandExt::gid(&mut command, NOBODY);
    let mut watch = command.spawn().expect("spawn watch");
    let lines = crate::common::lines_of(watch.stdout.take().expect("stdout"));
    let deploy_lines = |until: &dyn Fn(&Value) -> bool| -> Vec<Value> {
        let deadline = Instant::now() + crate::common::PROCESS_TIMEOUT;
        let mut seen = Vec::new();
        while let Ok(line) = lines.recv_timeout(deadline.saturating_duration_since(Instant::now()))
        {
            let value: Value = serde_json::from_str(&line).expect("NDJSON");
            if value["name"] == "deploy" {
                seen.push(value.clone());
                if until(&value) {
                    return seen;
                }
            }
        }
        panic!("watch never printed the awaited deploy line; deploy lines: {seen:?}");
    };
    deploy_lines(&|v| v["to"] == "live");
    let tags = state.join("locks/agents/tags");
    std::fs::set_permissions(&tags, std::fs::Permissions::from_mode(0o000)).expect("chmod 000");
    let hidden = deploy_lines(&|v| v["to"] != "live");
    std::thread::sleep(Duration::from_millis(600));
    std::fs::set_permissions(&tags, std::fs::Permissions::from_mode(0o755)).expect("chmod 755");
    let back = deploy_lines(&|v| v["to"] == "live");
    let _ = watch.kill();
    let _ = watch.wait();
    let last = hidden.last().expect("a line");
    assert_eq!(
        last["to"], "error",
        "unreadable is not a removal: {hidden:?}"
    );
    assert!(
        last["error"]
            .as_str()
            .is_some_and(|e| e.contains("cannot be read")),
        "{last}"
    );
    let live = back.last().expect("a line");
    assert_eq!(live["from"], "error", "{back:?}");
    assert_eq!(live["pids"][0], agent.pid(), "{live}");
}
