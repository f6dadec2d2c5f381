//! The verdicts `snapshot --json` gives, on real processes: a lock kept by
//! a forked child after the process that took it died is named by its true
//! holder, as an orphaned child.

use std::io::BufRead;
use std::process::{Command, Stdio};

use crate::common::{Holder, run_locktop, state_in_tempdir};

#[test]
fn a_lock_kept_after_its_taker_died_names_the_true_holder_as_an_orphaned_child() {
    let (_tmp, state) = state_in_tempdir();
    drop(Holder::hold(&state, &["--tag", "kept"])); // the tag's files
    let (dir, key) = locktop::locks::agent_tag_lock(&state, "kept");
    let gate = locktop::locks::escape::gate_path(&dir, &key);
    let announce = locktop::locks::escape::announce_path(&dir, &key);
    // util-linux flock(1) takes each lock and exits: /proc/locks names it,
    // gone; the shell (then `sleep`) keeps the locked files open.
    let mut keeper = Command::new("sh")
        .arg("-c")
        .arg("exec 3<>\"$1\" 4<>\"$2\" && flock -x 3 && flock -x 4 && echo ready && exec sleep 60")
        .arg("sh")
        .arg(&gate)
        .arg(&announce)
        .stdout(Stdio::piped())
        .spawn()
        .expect("sh");
    let mut ready = String::new();
    std::io::BufReader::new(keeper.stdout.take().expect("stdout"))
        .read_line(&mut ready)
        .expect("ready");
    assert_eq!(ready.trim(), "ready");

    let out = run_locktop(&state, &["snapshot", "--json", "--probe", "passive"]);
    assert_eq!(out.code(), 0, "{out:?}");
    let doc: serde_json::Value = serde_json::from_str(out.stdout.trim()).expect("JSON");
    let kept = &doc["keys"][0];
    assert_eq!(kept["name"], "kept", "{doc}");
    assert_eq!(kept["liveness"], "live", "{doc}");
    assert_eq!(
        kept["holders"][0]["pid"],
        keeper.id(),
        "the true holder first: {doc}"
    );
    assert_eq!(kept["holders"][0]["alive"], true, "{doc}");
    assert_eq!(kept["verdict"]["kind"], "orphaned_child", "{doc}");
    assert_eq!(kept["verdict"]["pid"], keeper.id(), "{doc}");
    let _ = keeper.kill();
    let _ = keeper.wait();
}
