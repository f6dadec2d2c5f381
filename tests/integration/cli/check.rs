//! `locktop check`: exit 0 when the family could be taken now, 1 when busy
//! with an explanation naming the holder, what else it holds and since
//! when; 2 on bad input. The check itself never keeps anything.

use crate::common::{Holder, run_locktop, state_in_tempdir};

#[test]
fn a_free_family_exits_zero_and_stays_free() {
    let (_tmp, state) = state_in_tempdir();
    let out = run_locktop(&state, &["check", "--aih", "cli/daemon/a1", "--tag", "t"]);
    assert_eq!(out.code(), 0, "{}", out.stderr);
    assert!(out.stdout.contains("free"), "{}", out.stdout);
    // Nothing lingers: another process can take the same family now.
    let holder = Holder::hold(&state, &["--aih", "cli/daemon/a1", "--tag", "t"]);
    assert!(holder.pid() > 0);
}

#[test]
fn a_stuck_tag_names_its_holder_and_everything_else_it_holds() {
    let (_tmp, state) = state_in_tempdir();
    let holder = Holder::hold(
        &state,
        &[
            "--aih",
            "cli/daemon/spawn-1",
            "--tag",
            "research: v2.1",
            "--tag",
            "other",
        ],
    );
    let out = run_locktop(&state, &["check", "--tag", "research: v2.1"]);
    assert_eq!(out.code(), 1, "{}", out.stderr);
    let pid = holder.pid().to_string();
    assert!(out.stdout.contains(&format!("pid {pid}")), "{}", out.stdout);
    assert!(
        out.stdout.contains("hold"),
        "the holder's command line: {}",
        out.stdout
    );
    assert!(out.stdout.contains(" for "), "{}", out.stdout);
    assert!(
        out.stdout.contains("instance \"cli/daemon/spawn-1\"")
            && out.stdout.contains("tag \"other\""),
        "what else the holder holds: {}",
        out.stdout
    );
}

#[test]
fn json_reports_each_member_busy_or_free() {
    let (_tmp, state) = state_in_tempdir();
    let holder = Holder::hold(&state, &["--group", "g1"]);
    let out = run_locktop(
        &state,
        &["check", "--json", "--group", "g1", "--group", "g2"],
    );
    assert_eq!(out.code(), 1);
    let report: serde_json::Value = serde_json::from_str(out.stdout.trim()).unwrap();
    assert_eq!(report["free"], false);
    let members = report["members"].as_array().unwrap();
    assert_eq!(members.len(), 2);
    assert_eq!(members[0]["name"], "g1");
    assert_eq!(members[0]["busy"], true);
    assert_eq!(members[0]["holders"][0]["process"]["pid"], holder.pid());
    assert_eq!(members[1]["name"], "g2");
    assert_eq!(members[1]["busy"], false);
}

#[test]
fn passive_check_agrees_and_never_writes() {
    let (_tmp, state) = state_in_tempdir();
    let _holder = Holder::hold(&state, &["--tag", "p"]);
    let out = run_locktop(
        &state,
        &["check", "--passive", "--tag", "p", "--tag", "never-seen"],
    );
    assert_eq!(out.code(), 1);
    assert!(out.stdout.contains("busy  tag \"p\""), "{}", out.stdout);
    let never_seen = state.join("locks/agents/tags/never-seen.lock");
    assert!(
        !never_seen.exists(),
        "a passive check must not create files"
    );
}

#[test]
fn bad_input_exits_two_with_one_line() {
    let (_tmp, state) = state_in_tempdir();
    for args in [
        vec!["check", "--aih", "../x"],
        vec!["check", "--aih", "a//b"],
        vec!["check"],
        vec!["check", "--aih", "a", "--group", "g"],
    ] {
        let out = run_locktop(&state, &args);
        assert_eq!(out.code(), 2, "{args:?}: {}", out.stderr);
        let first = out.stderr.lines().next().unwrap_or_default();
        assert!(
            first.starts_with("locktop: ") || first.starts_with("error: "),
            "{args:?}: the first stderr line states the error: {}",
            out.stderr
        );
        assert!(!out.stderr.contains("panicked"), "{args:?}: {}", out.stderr);
    }
}
