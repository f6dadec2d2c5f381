//! The monitor attached to a real `serve` (`--connect`), read off a real
//! terminal: its header says what it follows and how old the last word
//! is; while the service is gone it says `RECONNECTING`, not live, and
//! once the service is back it shows the true state (a key released
//! meanwhile is no longer live); attached to a service over TCP, test
//! holders and signals are refused in one line.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::pty::{Tui, row_of};
use crate::common::{self, Holder, state_in_tempdir};

/// `serve --listen 127.0.0.1:0 --socket SOCKET`, once its socket answers.
fn serve(state: &Path, socket: &Path) -> Child {
    let child = Command::new(common::locktop_bin())
        .arg("--state-dir")
        .arg(state)
        .args(["serve", "--listen", "127.0.0.1:0", "--socket"])
        .arg(socket)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn serve");
    let deadline = Instant::now() + common::PROCESS_TIMEOUT;
    while std::os::unix::net::UnixStream::connect(socket).is_err() {
        assert!(Instant::now() < deadline, "serve's socket never answered");
        std::thread::sleep(Duration::from_millis(20));
    }
    child
}

fn stop(mut child: Child) {
    let _ = child.kill();
    let _ = child.wait();
}

fn socket_in(dir: &tempfile::TempDir) -> PathBuf {
    dir.path().join("locktop.sock")
}

/// Attached over the unix socket: `attached to`, then `RECONNECTING`
/// while serve is killed (a key released meanwhile still shows as it
/// was, under a header that says it is not live), then the true state
/// once serve is back.
#[test]
fn the_attached_monitor_says_reconnecting_and_shows_the_truth_once_the_service_is_back() {
    let (_tmp, state) = state_in_tempdir();
    let dir = tempfile::tempdir().expect("tempdir");
    let socket = socket_in(&dir);
    let service = serve(&state, &socket);
    let mut holder = Holder::hold(&state, &["--tag", "watched-tag"]);
    let target = format!("unix:{}", socket.display());
    let tui = Tui::spawn(&state, &["--connect", &target], 160, 30);
    tui.wait_for("the attached header and the held tag", |screen| {
        screen.contains(&format!("attached to {target}"))
            && row_of(screen, "watched-tag").is_some_and(|row| row.contains("live"))
    });
    stop(service);
    tui.wait_for("RECONNECTING", |screen| {
        screen.contains(&format!("RECONNECTING to {target}"))
    });
    holder.terminate();
    let service = serve(&state, &socket);
    tui.wait_for("attached again, and the tag no longer live", |screen| {
        screen.contains(&format!("attached to {target}"))
            && !screen.contains("RECONNECTING")
            && !row_of(screen, "watched-tag").is_some_and(|row| row.contains("live"))
    });
    stop(service);
}

/// Attached over the unix socket, the monitor's own test holders — one
/// in its process, one a child — show as its own (`own`: the service
/// cannot know them; the client marks them), with their PIDs.
#[test]
fn an_attached_monitors_own_test_holders_show_as_its_own() {
    let (_tmp, state) = state_in_tempdir();
    let dir = tempfile::tempdir().expect("tempdir");
    let socket = socket_in(&dir);
    let service = serve(&state, &socket);
    let target = format!("unix:{}", socket.display());
    let mut tui = Tui::spawn(&state, &["--connect", &target], 160, 30);
    tui.wait_for("the attached header", |screen| {
        screen.contains(&format!("attached to {target}"))
    });
    super::holders::hold_group(&mut tui, "in-process", false, false);
    super::holders::hold_group(&mut tui, "in-a-child", true, false);
    let child = super::holders::holder_pid(&tui, "in-a-child", "holding");
    assert_ne!(child, tui.pid());
    tui.send(b"1");
    for (tag, pid) in [("in-process", tui.pid()), ("in-a-child", child)] {
        let pid = pid.to_string();
        tui.wait_for(&format!("{tag} held as our own by {pid}"), |screen| {
            row_of(screen, tag).is_some_and(|row| row.contains("own") && row.contains(&pid))
        });
    }
    stop(service);
}

/// Attached to a service over TCP (as from another host): `n` (a test
/// holder) and `K` (a signal) are refused in one line, and nothing is
/// held.
#[test]
fn an_attached_monitor_of_another_host_refuses_test_holders_and_signals() {
    let (_tmp, state) = state_in_tempdir();
    let dir = tempfile::tempdir().expect("tempdir");
    let socket = socket_in(&dir);
    // Its TCP port, from the stream's hello (GET / over the socket says
    // nothing of it): ask the kernel for the service's listening port.
    let service = serve(&state, &socket);
    let port = listening_port(service.id()).expect("serve's TCP port");
    let _holder = Holder::hold(&state, &["--tag", "someone-elses"]);
    let target = format!("http://127.0.0.1:{port}");
    let mut tui = Tui::spawn(&state, &["--connect", &target], 160, 30);
    tui.wait_for("the attached header", |screen| {
        screen.contains(&format!("attached to {target}"))
            && row_of(screen, "someone-elses").is_some()
    });
    tui.send(b"n");
    tui.wait_for("the refusal of a test holder", |screen| {
        screen.contains("not here: this monitor follows a service on another host")
    });
    tui.send(b"K");
    tui.wait_for("the refusal of a signal", |screen| {
        screen.contains("not here: this monitor follows a service on another host")
    });
    stop(service);
}

/// The TCP port `pid` listens on (from `/proc/net/tcp` and its fds).
fn listening_port(pid: u32) -> Option<u16> {
    let deadline = Instant::now() + common::PROCESS_TIMEOUT;
    loop {
        let inodes: Vec<String> = std::fs::read_dir(format!("/proc/{pid}/fd"))
            .ok()?
            .flatten()
            .filter_map(|fd| std::fs::read_link(fd.path()).ok())
            .filter_map(|link| {
                let link = link.to_string_lossy().into_owned();
                link.strip_prefix("socket:[")
                    .and_then(|rest| rest.strip_suffix(']'))
                    .map(str::to_string)
            })
            .collect();
        let table = std::fs::read_to_string("/proc/net/tcp").ok()?;
        for line in table.lines().skip(1) {
            let fields: Vec<&str> = line.split_whitespace().collect();
            // local_address, state 0A = LISTEN, inode
            if fields.len() > 9 && fields[3] == "0A" && inodes.iter().any(|i| i == fields[9]) {
                let port = fields[1].rsplit_once(':')?.1;
                return u16::from_str_radix(port, 16).ok();
            }
        }
        if Instant::now() > deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}
