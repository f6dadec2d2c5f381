//! A tag whose gate was unlinked while a live process holds it (the SDK
//! create race): `snapshot --json` lists a `held_unlinked` problem naming
//! the PID and the claim, and `check` reports the member busy (exit 1),
//! though the path alone reads free — in text, in `--json`, and with
//! `--passive`. Once the holder is gone the tag is free again (exit 0).

use crate::common::{Holder, run_locktop, state_in_tempdir};
use locktop::locks::agent_tag_lock;
use locktop::locks::escape::gate_path;

#[test]
fn snapshot_and_check_name_the_holder_of_an_unlinked_gate() {
    let (_tmp, state) = state_in_tempdir();
    let mut holder = Holder::hold(&state, &["--tag", "x y"]);
    let pid = u64::from(holder.pid());
    let (dir, key) = agent_tag_lock(&state, "x y");
    let gate = gate_path(&dir, &key);
    std::fs::remove_file(&gate).unwrap();

    let out = run_locktop(&state, &["snapshot", "--json"]);
    assert_eq!(out.code(), 0, "{}", out.stderr);
    let doc: serde_json::Value = serde_json::from_str(out.stdout.trim()).unwrap();
    let problems = doc["problems"].as_array().unwrap();
    let held: Vec<&serde_json::Value> = problems
        .iter()
        .filter(|p| p["kind"]["problem"] == "held_unlinked")
        .collect();
    assert_eq!(held.len(), 1, "{}", out.stdout);
    assert_eq!(held[0]["path"], gate.to_str().unwrap());
    let detail = &held[0]["kind"]["detail"];
    assert_eq!(
        (
            &detail["pid"],
            &detail["kind"],
            &detail["name"],
            &detail["file"]
        ),
        (
            &serde_json::json!(pid),
            &serde_json::json!("tag"),
            &serde_json::json!("x y"),
            &serde_json::json!("gate")
        ),
        "{}",
        out.stdout
    );
    assert!(
        detail["cmdline"].as_str().unwrap().contains("hold"),
        "{detail}"
    );

    for passive in [false, true] {
        let mut args = vec!["check", "--json", "--tag", "x y"];
        if passive {
            args.push("--passive");
        }
        let out = run_locktop(&state, &args);
        assert_eq!(out.code(), 1, "busy: {}\n{}", out.stdout, out.stderr);
        let report: serde_json::Value = serde_json::from_str(out.stdout.trim()).unwrap();
        assert_eq!(report["free"], false, "{report}");
        let member = &report["members"][0];
        assert_eq!(member["busy"], true, "{report}");
        assert_eq!(
            member["held_unlinked"][0]["process"]["pid"], pid,
            "{report}"
        );
        assert_eq!(member["held_unlinked"][0]["file"], "gate", "{report}");
        assert_eq!(
            member["held_unlinked"][0]["path"],
            gate.to_str().unwrap(),
            "{report}"
        );
    }
    let out = run_locktop(&state, &["check", "--tag", "x y"]);
    assert_eq!(out.code(), 1, "{}", out.stderr);
    assert!(
        out.stdout.contains(&format!(
            "tag \"x y\" looks free, but pid {pid} holds its gate"
        )),
        "{}",
        out.stdout
    );

    holder.kill();
    let out = run_locktop(&state, &["check", "--tag", "x y"]);
    assert_eq!(
        out.code(),
        0,
        "free once the holder is gone: {}",
        out.stdout
    );
    let out = run_locktop(&state, &["snapshot", "--json"]);
    assert!(!out.stdout.contains("held_unlinked"), "{}", out.stdout);
}
