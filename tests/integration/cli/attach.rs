//! `--connect`: `watch`, `snapshot` and `check` following a real `serve`
//! (over its unix socket, and over HTTPS with basic auth) say what a
//! private engine says at every quiet moment of a churn of real holders;
//! attached streams say `reconnecting` while the service is gone and show
//! the true state once it is back; a client that stops reading is
//! resynced, not buffered; the socket's permissions and the service's
//! authentication are what let a client in.
//!
//! Every wait is a correctness bound, never a speed assertion.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::serve::Serve;
use super::serve_tls::{PASSWORD, Pki, USER};
use crate::common::{
    self, Holder, NOBODY, binary_for_anyone, finish, skip_unless, state_in_tempdir,
};

/// How long a view may take to show a change. A correctness bound.
const SHOW_TIMEOUT: Duration = Duration::from_secs(15);

/// What a view says is held: (kind, name) → (liveness, sorted PIDs).
type Held = BTreeMap<(String, String), (String, Vec<u64>)>;

/// A `serve` with `--socket` in a directory of its own.
struct Service {
    serve: Serve,
    socket: PathBuf,
    _dir: tempfile::TempDir,
}

impl Service {
    fn start(state: &Path, extra: &[&str]) -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let socket = dir.path().join("locktop.sock");
        Self::start_at(state, dir, socket, extra)
    }

    fn start_at(state: &Path, dir: tempfile::TempDir, socket: PathBuf, extra: &[&str]) -> Self {
        let mut args = vec!["--socket", socket.to_str().expect("UTF-8")];
        args.extend_from_slice(extra);
        let serve = Serve::start_on(state, "127.0.0.1:0", &args);
        Self {
            serve,
            socket,
            _dir: dir,
        }
    }

    fn target(&self) -> String {
        format!("unix:{}", self.socket.display())
    }
}

/// The held keys of a `snapshot --json` document.
fn held_of_snapshot(doc: &Value) -> Held {
    doc["keys"]
        .as_array()
        .expect("keys")
        .iter()
        .filter(|key| key["liveness"] != "free")
        .map(|key| {
            let mut pids: Vec<u64> = key["holders"]
                .as_array()
                .expect("holders")
                .iter()
                .map(|holder| holder["pid"].as_u64().expect("pid"))
                .collect();
            pids.sort_unstable();
            (
                (
                    key["kind"].as_str().expect("kind").to_string(),
                    key["name"].as_str().expect("name").to_string(),
                ),
                (
                    key["liveness"].as_str().expect("liveness").to_string(),
                    pids,
                ),
            )
        })
        .collect()
}

/// `snapshot --json` with `args`: its held keys, or why not.
fn snapshot(state: &Path, args: &[&str], env: &[(&str, &str)]) -> Result<Held, String> {
    let mut all = vec!["snapshot", "--json"];
    all.extend_from_slice(args);
    let mut command = common::locktop_command(state, &all);
    for (name, value) in env {
        command.env(name, value);
    }
    let out = finish(command);
    if out.code() != 0 {
        return Err(format!("{out:?}"));
    }
    let doc: Value =
        serde_json::from_str(out.stdout.trim()).map_err(|e| format!("{e}: {out:?}"))?;
    Ok(held_of_snapshot(&doc))
}

/// Live holders by name, with the keys each holds: (kind, name).
type Holders = BTreeMap<String, (Holder, Vec<(String, String)>)>;

/// What the holders hold: the oracle (the SDK took these locks for them).
fn oracle(holders: &Holders) -> Held {
    let mut held = Held::new();
    for (holder, keys) in holders.values() {
        for key in keys {
            held.insert(key.clone(), ("live".into(), vec![u64::from(holder.pid())]));
        }
    }
    held
}

/// An attached `watch --json`, its key lines folded into what it says is
/// held.
struct Watch {
    child: Child,
    lines: Receiver<String>,
    held: Held,
    /// Every watcher health word it printed, in order.
    health: Vec<String>,
    /// Every key line it printed: (kind, name, to).
    changes: Vec<(String, String, String)>,
}

impl Watch {
    fn start(state: &Path, args: &[&str], env: &[(&str, &str)]) -> Self {
        let mut all = vec!["watch", "--json", "--initial"];
        all.extend_from_slice(args);
        let mut command = common::locktop_command(state, &all);
        for (name, value) in env {
            command.env(name, value);
        }
        command.stderr(Stdio::null());
        let mut child = command.spawn().expect("spawn watch");
        let lines = common::lines_of(child.stdout.take().expect("stdout"));
        let first = lines
            .recv_timeout(SHOW_TIMEOUT)
            .expect("watch's first line");
        let first: Value = serde_json::from_str(&first).expect("JSON");
        assert!(first["attached"].is_string(), "{first}");
        Self {
            child,
            lines,
            held: Held::new(),
            health: Vec::new(),
            changes: Vec::new(),
        }
    }

    /// Reads what came, folding key lines.
    fn read(&mut self, wait: Duration) {
        while let Ok(line) = self.lines.recv_timeout(wait) {
            let line: Value = serde_json::from_str(&line).expect("JSON line");
            if let Some(health) = line["watcher"]["health"].as_str() {
                self.health.push(health.to_string());
            }
            let (Some(kind), Some(name), Some(to)) = (
                line["kind"].as_str(),
                line["name"].as_str(),
                line["to"].as_str(),
            ) else {
                continue;
            };
            self.changes
                .push((kind.to_string(), name.to_string(), to.to_string()));
            let key = (kind.to_string(), name.to_string());
            if to == "free" || to == "removed" {
                self.held.remove(&key);
            } else {
                let mut pids: Vec<u64> = line["pids"]
                    .as_array()
                    .map(|pids| pids.iter().filter_map(Value::as_u64).collect())
                    .unwrap_or_default();
                pids.sort_unstable();
                self.held.insert(key, (to.to_string(), pids));
            }
        }
    }

    /// Waits until it says `expected` is held.
    fn wait_for(&mut self, expected: &Held, what: &str) {
        let deadline = Instant::now() + SHOW_TIMEOUT;
        loop {
            self.read(Duration::from_millis(50));
            if self.held == *expected {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "{what}: the attached watch says {:?}, the holders hold {expected:?}",
                self.held
            );
        }
    }

    /// Waits until it printed the watcher health `word` after its first
    /// `after` health lines.
    fn wait_for_health(&mut self, word: &str, after: usize) {
        let deadline = Instant::now() + SHOW_TIMEOUT;
        while !self.health.iter().skip(after).any(|said| said == word) {
            assert!(
                Instant::now() < deadline,
                "no {word:?} health line; said {:?}",
                self.health
            );
            self.read(Duration::from_millis(50));
        }
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Polls until `look` says `expected`.
fn wait_until_equal(what: &str, expected: &Held, look: impl Fn() -> Result<Held, String>) {
    let deadline = Instant::now() + SHOW_TIMEOUT;
    loop {
        let seen = look();
        if seen.as_ref() == Ok(expected) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: says {seen:?}, the holders hold {expected:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// `snapshot --connect TARGET --connect-config CONFIG`, run to its end.
fn snapshot_with(state: &Path, target: &str, config: &Path) -> common::Finished {
    common::run_locktop(
        state,
        &[
            "snapshot",
            "--connect",
            target,
            "--connect-config",
            config.to_str().expect("UTF-8"),
        ],
    )
}

/// A connect config for `pki`'s service: its CA and, when `password`,
/// the basic-auth user and a password file.
fn connect_config(pki: &Pki, password: bool) -> PathBuf {
    let dir = pki.dir.path();
    let mut text = "tls_config:\n  ca_file: ca.crt\n".to_string();
    if password {
        std::fs::write(dir.join("password"), format!("{PASSWORD}\n")).expect("write");
        text.push_str(&format!(
            "basic_auth:\n  username: {USER}\n  password_file: password\n"
        ));
    }
    let path = dir.join(if password {
        "connect.yml"
    } else {
        "connect-ca.yml"
    });
    std::fs::write(&path, text).expect("write the connect config");
    path
}

/// Over a churn of real holders (taken, released, SIGKILLed), at every
/// quiet moment: attached `watch`es (unix socket; HTTPS with basic
/// auth, which is told the holders' command lines), an attached
/// `snapshot` over the unix socket and over HTTPS with basic auth, and
/// the default attach, each say exactly what the holders hold — and what
/// a private `snapshot` says; `check` attached answers as a private one.
#[test]
fn attached_views_equal_a_private_one_at_every_quiet_moment_of_a_churn() {
    let (_tmp, state) = state_in_tempdir();
    let local = Service::start(&state, &[]);
    let pki = Pki::new();
    let web = pki.good_config();
    let remote = Serve::start_on(
        &state,
        "127.0.0.1:0",
        &["--web-config", web.to_str().expect("UTF-8")],
    );
    assert!(remote.base.starts_with("https://"), "{}", remote.base);
    let config = connect_config(&pki, true);
    let config = config.to_str().expect("UTF-8");
    let socket = local.socket.to_str().expect("UTF-8").to_string();
    let default_env = [("LOCKTOP_SOCKET", socket.as_str())];
    let mut watch = Watch::start(&state, &["--connect", &local.target()], &[]);
    let mut https_watch = Watch::start(
        &state,
        &["--connect", &remote.base, "--connect-config", config],
        &[],
    );
    let mut rng = fastrand::Rng::with_seed(52);
    let mut holders = Holders::new();
    for step in 0..10 {
        // Take a few families, release or kill a few.
        for _ in 0..2 {
            let name = format!("h{}", rng.u8(0..6));
            if let Some((mut holder, _)) = holders.remove(&name) {
                if rng.bool() {
                    holder.kill();
                } else {
                    holder.terminate();
                }
            } else {
                let tag = format!("tag-{name}");
                let aih = format!("team/{name}");
                let holder = Holder::hold(&state, &["--aih", &aih, "--tag", &tag]);
                holders.insert(
                    name,
                    (holder, vec![("instance".into(), aih), ("tag".into(), tag)]),
                );
            }
        }
        let expected = oracle(&holders);
        let what = format!("step {step}");
        watch.wait_for(&expected, &format!("{what}, watch over the socket"));
        https_watch.wait_for(&expected, &format!("{what}, watch over HTTPS"));
        wait_until_equal(&format!("{what}, private snapshot"), &expected, || {
            snapshot(&state, &["--no-connect"], &[])
        });
        // The service's view is there (the attached watch shows it): an
        // attached snapshot's first answer is it, never an early one.
        assert_eq!(
            snapshot(&state, &["--connect", &local.target()], &[]),
            Ok(expected.clone()),
            "{what}, snapshot over the socket"
        );
        assert_eq!(
            snapshot(&state, &[], &default_env),
            Ok(expected.clone()),
            "{what}, the default attach"
        );
        wait_until_equal(&format!("{what}, snapshot over HTTPS"), &expected, || {
            snapshot(
                &state,
                &["--connect", &remote.base, "--connect-config", config],
                &[],
            )
        });
        // A family that is held and one that is free: check attached
        // answers as check here.
        for tag in ["tag-h0", "tag-h5"] {
            let private = common::run_locktop(&state, &["check", "--tag", tag, "--no-connect"]);
            let attached = common::run_locktop(
                &state,
                &["check", "--tag", tag, "--connect", &local.target()],
            );
            assert_eq!(
                private.code(),
                attached.code(),
                "{what}, check --tag {tag}: {private:?} / {attached:?}"
            );
        }
    }
    // An authenticated client is told the holders' command lines.
    let out = finish(common::locktop_command(
        &state,
        &[
            "snapshot",
            "--json",
            "--connect",
            &remote.base,
            "--connect-config",
            config,
        ],
    ));
    let doc: Value = serde_json::from_str(out.stdout.trim()).expect("JSON");
    let commands: Vec<&str> = doc["keys"]
        .as_array()
        .expect("keys")
        .iter()
        .flat_map(|key| key["holders"].as_array().into_iter().flatten())
        .filter_map(|holder| holder["cmdline"].as_str())
        .collect();
    assert!(
        !holders.is_empty() && commands.len() >= holders.len(),
        "{commands:?}"
    );
    assert!(
        commands.iter().all(|command| command.contains(" hold ")),
        "{commands:?}"
    );
    // The default attach says what it follows; another state dir is not
    // attached to, and that is said.
    let out = finish({
        let mut command = common::locktop_command(&state, &["snapshot"]);
        command.env("LOCKTOP_SOCKET", &socket);
        command
    });
    assert!(out.stderr.contains("attached to unix:"), "{out:?}");
    let (_other_tmp, other) = state_in_tempdir();
    let out = finish({
        let mut command = common::locktop_command(&other, &["snapshot"]);
        command.env("LOCKTOP_SOCKET", &socket);
        command
    });
    assert_eq!(out.code(), 0, "{out:?}");
    assert!(
        out.stderr.contains("not attached: the service at unix:"),
        "{out:?}"
    );
}

/// Three attached `watch`es while the service is killed and started
/// again: each says `reconnecting`, and once the service is back each
/// shows what the holders hold now — a key released meanwhile is free, a
/// key taken meanwhile is held.
#[test]
fn attached_streams_say_reconnecting_and_resync_when_the_service_is_back() {
    let (_tmp, state) = state_in_tempdir();
    let dir = tempfile::tempdir().expect("tempdir");
    let socket = dir.path().join("locktop.sock");
    let mut service = Service::start_at(
        &state,
        tempfile::tempdir().expect("tempdir"),
        socket.clone(),
        &[],
    );
    let target = service.target();
    let mut before = Holder::hold(&state, &["--tag", "before"]);
    let kept = Holder::hold(&state, &["--tag", "kept"]);
    let kept_entry = (
        ("tag".to_string(), "kept".to_string()),
        ("live".to_string(), vec![u64::from(kept.pid())]),
    );
    let expected_before: Held = [
        (
            ("tag".to_string(), "before".to_string()),
            ("live".to_string(), vec![u64::from(before.pid())]),
        ),
        kept_entry.clone(),
    ]
    .into();
    let mut watches: Vec<Watch> = (0..3)
        .map(|_| Watch::start(&state, &["--connect", &target], &[]))
        .collect();
    for watch in &mut watches {
        watch.wait_for(&expected_before, "before the service is killed");
    }
    let _ = service.serve.child.kill();
    let _ = service.serve.child.wait();
    let said_before: Vec<usize> = watches.iter().map(|watch| watch.health.len()).collect();
    for watch in &mut watches {
        watch.wait_for_health("reconnecting", 0);
    }
    // While it is gone: one key released, one taken.
    before.terminate();
    let after = Holder::hold(&state, &["--tag", "after"]);
    let expected_after: Held = [
        (
            ("tag".to_string(), "after".to_string()),
            ("live".to_string(), vec![u64::from(after.pid())]),
        ),
        kept_entry,
    ]
    .into();
    // Started again on the same path (the dead one's socket is stale).
    service = Service::start_at(&state, dir, socket, &[]);
    for (watch, said) in watches.iter_mut().zip(said_before) {
        watch.wait_for(&expected_after, "after the service is back");
        watch.wait_for_health("watching", said);
        // A key held all along is never told free: not while the service
        // was gone, nor while it scanned again.
        let freed_kept: Vec<_> = watch
            .changes
            .iter()
            .filter(|(_, name, to)| name == "kept" && to != "live")
            .collect();
        assert!(freed_kept.is_empty(), "{freed_kept:?}");
    }
    drop(service);
    drop(kept);
}

/// A `/view` client that stops reading while thousands of changes pass
/// (several MiB of lines) is not buffered for: when it reads again it
/// gets a `resync` line and a fresh checkpoint, not every line it missed
/// (the bound on what is kept meanwhile is the serve crate's unit test).
#[test]
fn a_client_that_stops_reading_gets_a_resync_not_a_growing_buffer() {
    let (_tmp, state) = state_in_tempdir();
    let service = Service::start(&state, &[]);
    let mut stream =
        std::os::unix::net::UnixStream::connect(&service.socket).expect("connect the socket");
    stream
        .write_all(b"GET /view HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .expect("request");
    std::thread::sleep(Duration::from_millis(500));
    // About 40,000 changes (each key appears, then goes): several MiB of
    // lines, far past what a stream keeps for a client.
    let other = state.join("locks").join("other");
    std::fs::create_dir_all(&other).expect("mkdir");
    for i in 0..20_000 {
        std::fs::write(other.join(format!("k{i}")), b"").expect("write");
    }
    std::thread::sleep(Duration::from_secs(2));
    for i in 0..20_000 {
        std::fs::remove_file(other.join(format!("k{i}"))).expect("remove");
    }
    std::thread::sleep(Duration::from_secs(2));
    stream
        .set_read_timeout(Some(Duration::from_millis(200)))
        .expect("timeout");
    let mut seen = Vec::new();
    let deadline = Instant::now() + SHOW_TIMEOUT;
    let mut chunk = [0u8; 65536];
    let mut total = 0;
    while Instant::now() < deadline && !seen.windows(10).any(|w| w == b"{\"resync\":") {
        match stream.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => {
                total += n;
                seen.extend_from_slice(&chunk[..n]);
            }
            Err(_) => {}
        }
    }
    let text = String::from_utf8_lossy(&seen);
    assert!(
        text.contains("{\"resync\":"),
        "no resync after {} bytes",
        seen.len()
    );
    // Fewer bytes than the lines it missed: they were dropped.
    assert!(total < 3 << 20, "{total} bytes sent before the resync");
    let after = &text[text.find("{\"resync\":").expect("resync")..];
    assert!(
        after.contains("{\"checkpoint\":"),
        "{}",
        &after[..after.len().min(400)]
    );
}

/// The socket says who may attach: a user outside its group gets one
/// line saying what to do (exit 2); without credentials an HTTPS
/// service answers 401, said in one line; a password is never sent over
/// plain HTTP.
#[test]
fn who_may_attach_is_the_sockets_and_the_services_word() {
    let (_tmp, state) = state_in_tempdir();
    let service = Service::start(&state, &[]);
    let root = unsafe { libc::geteuid() } == 0;
    if skip_unless(
        root,
        "skipped the socket permission part: needs root, to run as nobody",
    ) {
        let (_bin_dir, bin) = binary_for_anyone();
        let dir = service.socket.parent().expect("dir");
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        let mode = std::fs::metadata(&service.socket)
            .expect("socket")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o660, "the socket's mode");
        let mut command = Command::new(&bin);
        command
            .arg("--state-dir")
            .arg(&state)
            .args(["snapshot", "--connect", &service.target()])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        std::os::unix::process::CommandExt::uid(&mut command, NOBODY);
        std::os::unix::process::CommandExt::gid(&mut command, NOBODY);
        let out = finish(command);
        assert_eq!(out.code(), 2, "{out:?}");
        assert!(out.stderr.contains("permission denied"), "{out:?}");
        assert!(out.stderr.contains("usermod -aG locktop"), "{out:?}");
        assert_eq!(out.stderr.lines().count(), 1, "{out:?}");
    }
    let pki = Pki::new();
    let web = pki.good_config();
    let remote = Serve::start_on(
        &state,
        "127.0.0.1:0",
        &["--web-config", web.to_str().expect("UTF-8")],
    );
    let ca_only = connect_config(&pki, false);
    let out = snapshot_with(&state, &remote.base, &ca_only);
    assert_eq!(out.code(), 2, "{out:?}");
    assert!(out.stderr.contains("(401)"), "{out:?}");
    // Credentials from the environment.
    let mut command = common::locktop_command(
        &state,
        &[
            "snapshot",
            "--connect",
            &remote.base,
            "--connect-config",
            ca_only.to_str().expect("UTF-8"),
        ],
    );
    command
        .env("LOCKTOP_CONNECT_USERNAME", USER)
        .env("LOCKTOP_CONNECT_PASSWORD", PASSWORD);
    let out = finish(command);
    assert_eq!(out.code(), 0, "{out:?}");
    // Never a password over plain HTTP.
    let plain = Serve::start_on(&state, "127.0.0.1:0", &[]);
    let mut command = common::locktop_command(&state, &["snapshot", "--connect", &plain.base]);
    command
        .env("LOCKTOP_CONNECT_USERNAME", USER)
        .env("LOCKTOP_CONNECT_PASSWORD", PASSWORD);
    let out = finish(command);
    assert_eq!(out.code(), 2, "{out:?}");
    assert!(out.stderr.contains("never sent over plain HTTP"), "{out:?}");
}

/// Options that shape an engine here are refused with `--connect` (the
/// service's apply), each in one line; `--connect-config` needs
/// `--connect`; a bad target is one line naming the accepted forms.
#[test]
fn every_option_applies_or_is_refused_with_connect() {
    let (_tmp, state) = state_in_tempdir();
    for (args, named) in [
        (
            &["watch", "--connect", "unix:/x", "--probe", "passive"][..],
            "--probe",
        ),
        (&["snapshot", "--connect", "unix:/x", "--all"][..], "--all"),
        (
            &[
                "check",
                "--tag",
                "t",
                "--connect",
                "unix:/x",
                "--probe",
                "acquire",
            ][..],
            "--probe",
        ),
        (
            &["watch", "--connect", "unix:/x", "--source", "inference"][..],
            "--source",
        ),
        (&["--connect", "unix:/x", "demo"][..], "--connect"),
        (&["--connect", "--probe", "passive", "watch"][..], "--probe"),
        (&["watch", "--connect", "ftp://x:1"][..], "unix:PATH"),
    ] {
        let out = common::run_locktop(&state, args);
        assert_eq!(out.code(), 2, "{args:?}: {out:?}");
        assert_eq!(out.stderr.trim().lines().count(), 1, "{args:?}: {out:?}");
        assert!(out.stderr.contains(named), "{args:?}: {out:?}");
    }
    let out = common::run_locktop(&state, &["watch", "--connect-config", "/x"]);
    assert_eq!(out.code(), 2, "{out:?}");
    assert!(
        out.stderr
            .contains("--connect-config applies to --connect only"),
        "{out:?}"
    );
}

/// A service that accepts on its socket and never answers (stopped with
/// SIGSTOP: the kernel still accepts connections for it) holds up no
/// one for good: `--connect` to it is one line and a non-zero exit, and
/// plain `snapshot`, whose default would attach to it, answers from an
/// engine of its own and says why it did not attach.
#[test]
fn a_stopped_service_is_said_not_waited_for() {
    use nix::sys::signal::{Signal, kill};
    use nix::unistd::Pid;
    let (_tmp, state) = state_in_tempdir();
    let service = Service::start(&state, &[]);
    let target = service.target();
    let socket = service.socket.to_str().expect("UTF-8").to_string();
    let holder = Holder::hold(&state, &["--tag", "held"]);
    let service_pid = Pid::from_raw(service.serve.child.id() as i32);
    kill(service_pid, Signal::SIGSTOP).expect("SIGSTOP");
    // Continued however this test ends, so that its drop can end it.
    struct Continued(Pid);
    impl Drop for Continued {
        fn drop(&mut self) {
            let _ = kill(self.0, Signal::SIGCONT);
        }
    }
    let _continued = Continued(service_pid);
    let attached = finish(common::locktop_command(
        &state,
        &["--connect", &target, "snapshot", "--json"],
    ));
    assert_eq!(attached.code(), 2, "{attached:?}");
    assert_eq!(attached.stderr.trim().lines().count(), 1, "{attached:?}");
    assert!(attached.stderr.contains("did not answer"), "{attached:?}");
    let expected: Held = [(
        ("tag".to_string(), "held".to_string()),
        ("live".to_string(), vec![u64::from(holder.pid())]),
    )]
    .into();
    assert_eq!(
        snapshot(&state, &[], &[("LOCKTOP_SOCKET", &socket)]),
        Ok(expected)
    );
    // In text, it says why it did not attach.
    let mut command = common::locktop_command(&state, &["snapshot"]);
    command.env("LOCKTOP_SOCKET", &socket);
    let text = finish(command);
    assert_eq!(text.code(), 0, "{text:?}");
    assert!(
        text.stderr.contains("not attached") && text.stderr.contains("did not answer"),
        "{text:?}"
    );
}

/// A service that asks for a client certificate (mTLS, no password) is
/// attached to with the certificate `--connect-config` names, and
/// refuses a client without one, said in one line; TLS settings or a
/// password for a unix socket are refused by name, as is `--state-dir`
/// naming a state dir the service does not watch.
#[test]
fn a_client_certificate_attaches_and_what_does_not_apply_is_refused() {
    let (_tmp, state) = state_in_tempdir();
    let pki = Pki::new();
    let dir = pki.dir.path();
    let web = dir.join("mtls.yml");
    std::fs::write(
        &web,
        "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n  \
         client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: ca.crt\n",
    )
    .expect("write");
    let remote = Serve::start_on(
        &state,
        "127.0.0.1:0",
        &["--web-config", web.to_str().expect("UTF-8")],
    );
    let holder = Holder::hold(&state, &["--tag", "by certificate"]);
    let expected: Held = [(
        ("tag".to_string(), "by certificate".to_string()),
        ("live".to_string(), vec![u64::from(holder.pid())]),
    )]
    .into();
    let with_cert = dir.join("with-cert.yml");
    std::fs::write(
        &with_cert,
        "tls_config:\n  ca_file: ca.crt\n  cert_file: client.crt\n  key_file: client.key\n",
    )
    .expect("write");
    let with_cert = with_cert.to_str().expect("UTF-8");
    wait_until_equal("snapshot with a client certificate", &expected, || {
        snapshot(
            &state,
            &["--connect", &remote.base, "--connect-config", with_cert],
            &[],
        )
    });
    let ca_only = connect_config(&pki, false);
    let out = snapshot_with(&state, &remote.base, &ca_only);
    assert_eq!(out.code(), 2, "{out:?}");
    assert_eq!(out.stderr.trim().lines().count(), 1, "{out:?}");
    // What a unix socket does not take.
    let local = Service::start(&state, &[]);
    let with_password = connect_config(&pki, true);
    for (config, named) in [
        (with_cert, "tls_config applies to https://"),
        (
            with_password.to_str().expect("UTF-8"),
            "tls_config applies to https://",
        ),
    ] {
        let out = snapshot_with(&state, &local.target(), Path::new(config));
        assert_eq!(out.code(), 2, "{out:?}");
        assert_eq!(out.stderr.trim().lines().count(), 1, "{out:?}");
        assert!(out.stderr.contains(named), "{out:?}");
    }
    let password_only = dir.join("password-only.yml");
    std::fs::write(
        &password_only,
        format!("basic_auth:\n  username: {USER}\n  password_file: password\n"),
    )
    .expect("write");
    let out = snapshot_with(&state, &local.target(), &password_only);
    assert_eq!(out.code(), 2, "{out:?}");
    assert!(
        out.stderr.contains("basic auth is sent only over https://"),
        "{out:?}"
    );
    // --state-dir must be the service's own.
    let (_other_tmp, other) = state_in_tempdir();
    let out = common::run_locktop(&other, &["snapshot", "--connect", &local.target()]);
    assert_eq!(out.code(), 2, "{out:?}");
    assert_eq!(out.stderr.trim().lines().count(), 1, "{out:?}");
    assert!(out.stderr.contains("--state-dir"), "{out:?}");
}
