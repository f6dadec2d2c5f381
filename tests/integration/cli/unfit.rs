//! Things in the tree no agent could have made, answered once and the
//! same in every face: a FIFO in place of an announce (an error: no
//! agent can take that claim — never "free" in one face and "cannot be
//! taken" in another); directories whose names are not UTF-8 (a problem,
//! never a key — two such names can no longer print as one lossy key);
//! a directory named like a lock file (a problem, never opened).

use std::collections::BTreeSet;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::{self, locktop_command, run_locktop, state_in_tempdir};

/// Every key of `snapshot --json --all` (with `extra` flags) by name, and
/// every problem path's file name with its kind.
fn snapshot(state: &Path, extra: &[&str]) -> (Value, BTreeSet<(String, String)>) {
    let mut args = vec!["snapshot", "--json", "--all"];
    args.extend_from_slice(extra);
    let out = run_locktop(state, &args);
    assert_eq!(out.code(), 0, "{out:?}");
    let doc: Value = serde_json::from_str(out.stdout.trim()).expect("one document");
    let problems = doc["problems"]
        .as_array()
        .expect("problems")
        .iter()
        .map(|problem| {
            let path = problem["path"].as_str().expect("path");
            let name = path.rsplit('/').next().expect("a name").to_string();
            (
                name,
                problem["kind"]["problem"]
                    .as_str()
                    .expect("kind")
                    .to_string(),
            )
        })
        .collect();
    (doc, problems)
}

fn key<'a>(doc: &'a Value, name: &str) -> Option<&'a Value> {
    doc["keys"]
        .as_array()
        .expect("keys")
        .iter()
        .find(|key| key["name"] == name)
}

/// `watch --json --initial` until it says it is in sync: every key line.
fn watch_initial(state: &Path) -> Vec<Value> {
    let mut child = locktop_command(state, &["watch", "--json", "--initial"])
        .spawn()
        .expect("watch");
    let lines = common::lines_of(child.stdout.take().expect("stdout"));
    let deadline = Instant::now() + common::PROCESS_TIMEOUT;
    let mut keys = Vec::new();
    // No line tells the initial keys are all out: wait until a quiet
    // second follows the watcher's `watching` line.
    let mut watching = false;
    loop {
        match lines.recv_timeout(Duration::from_secs(1)) {
            Ok(line) => {
                let value: Value = serde_json::from_str(&line).expect("NDJSON");
                if value["watcher"]["health"] == "watching" {
                    watching = true;
                }
                if value.get("to").is_some() {
                    keys.push(value);
                }
            }
            Err(_) if watching => break,
            Err(_) => assert!(Instant::now() < deadline, "watch never started"),
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    keys
}

#[test]
fn a_fifo_announce_is_an_error_in_every_face() {
    let (_tmp, state) = state_in_tempdir();
    let tags = state.join("locks/agents/tags");
    std::fs::create_dir_all(&tags).unwrap();
    std::fs::write(tags.join("half.lock"), b"").unwrap();
    nix::unistd::mkfifo(&tags.join("half.live.lock"), nix::sys::stat::Mode::S_IRWXU).unwrap();
    for probe in [&[][..], &["--probe", "passive"][..]] {
        let (doc, problems) = snapshot(&state, probe);
        let half = key(&doc, "half").unwrap_or_else(|| panic!("{probe:?}: no key: {doc}"));
        assert_eq!(half["liveness"], "error", "{probe:?}: {doc}");
        assert!(
            half["error"]
                .as_str()
                .is_some_and(|e| e.contains("not a regular file")),
            "{probe:?}: {doc}"
        );
        assert!(
            problems.contains(&("half.live.lock".into(), "not_regular".into())),
            "{problems:?}"
        );
    }
    let table = run_locktop(&state, &["snapshot", "--all"]);
    let row = table
        .stdout
        .lines()
        .find(|line| line.contains("half"))
        .unwrap_or_else(|| panic!("{table:?}"));
    assert!(row.starts_with("error"), "{row}");
    let watched = watch_initial(&state);
    assert!(
        watched
            .iter()
            .any(|line| line["name"] == "half" && line["to"] == "error"),
        "{watched:?}"
    );
    let check = run_locktop(&state, &["check", "--tag", "half"]);
    assert_eq!(check.code(), 2, "{check:?}");
    assert!(check.stderr.contains("is a FIFO"), "{check:?}");
}

#[test]
fn directories_not_utf8_or_named_like_a_lock_file_are_problems_never_keys_nor_opened() {
    let (_tmp, state) = state_in_tempdir();
    let instances = state.join("locks/agents/instances");
    // Two names that print alike once made lossy: each held one key
    // named `cli/a�/k` before.
    for raw in [&b"a\xff"[..], &b"a\xfe"[..]] {
        let dir = instances.join("cli").join(OsStr::from_bytes(raw));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("k.lock"), b"").unwrap();
    }
    let tags = state.join("locks/agents/tags");
    let dirgate = tags.join("dirgate.lock");
    std::fs::create_dir_all(&dirgate).unwrap();
    std::fs::write(dirgate.join("inside.lock"), b"").unwrap();
    std::fs::write(tags.join("real.lock"), b"").unwrap();

    // Nothing may open the directory named like a lock file.
    let mut inotify = inotify::Inotify::init().expect("inotify");
    inotify
        .watches()
        .add(&dirgate, inotify::WatchMask::OPEN)
        .expect("watch dirgate.lock");

    let (doc, problems) = snapshot(&state, &[]);
    let names: BTreeSet<&str> = doc["keys"]
        .as_array()
        .expect("keys")
        .iter()
        .filter_map(|key| key["name"].as_str())
        .collect();
    assert_eq!(names, BTreeSet::from(["real"]), "{doc}");
    let kinds: BTreeSet<&str> = problems.iter().map(|(_, kind)| kind.as_str()).collect();
    assert!(kinds.contains("non_utf8_name"), "{problems:?}");
    assert!(
        problems.contains(&("dirgate.lock".into(), "not_regular".into())),
        "{problems:?}"
    );
    let (passive, _) = snapshot(&state, &["--probe", "passive"]);
    assert_eq!(
        passive["keys"], doc["keys"],
        "the same keys with either probe"
    );
    let watched = watch_initial(&state);
    let watched: BTreeSet<&str> = watched.iter().filter_map(|l| l["name"].as_str()).collect();
    assert_eq!(
        watched,
        BTreeSet::from(["real"]),
        "watch names the same keys"
    );

    let mut buffer = [0u8; 4096];
    let opened = match inotify.read_events(&mut buffer) {
        Ok(events) => events.count(),
        Err(error) if error.kind() == std::io::ErrorKind::WouldBlock => 0,
        Err(error) => panic!("inotify: {error}"),
    };
    assert_eq!(opened, 0, "a directory named like a lock file was opened");
}
