//! `--read-only` means zero writes and no exclusive lock, the probe
//! included, proved with `strace` on the real monitor in a real terminal
//! while holders come and go: every file it opens under the state dir is
//! opened read-only, it creates, removes and renames nothing there, and it
//! never calls `flock(…, LOCK_EX…)` — and with the default lock-free
//! probe it never calls `flock` at all, nor opens a claim file.

use std::path::Path;

use crate::common::pty::{EXIT_TIMEOUT, Tui, row_of};
use crate::common::{Holder, have_program, state_in_tempdir};

/// Syscalls that write to a path, whatever their flags.
const WRITING_SYSCALLS: &[&str] = &[
    "mkdir",
    "mkdirat",
    "unlink",
    "unlinkat",
    "rmdir",
    "rename",
    "renameat",
    "renameat2",
    "truncate",
    "creat",
    "link",
    "linkat",
    "symlink",
    "symlinkat",
    "chmod",
    "fchmodat",
    "chown",
    "fchownat",
    "utimensat",
    "mknod",
    "mknodat",
];

/// Every line of the trace that writes under `state` or takes an
/// exclusive flock.
fn writes_in(trace: &str, state: &Path) -> Vec<String> {
    let state = state.to_str().expect("UTF-8 temp path");
    trace
        .lines()
        .filter(|line| {
            let call = line
                .split_once(' ')
                .map_or(*line, |(_, rest)| rest.trim_start())
                .split('(')
                .next()
                .unwrap_or_default();
            let under_state = line.contains(state);
            let opens_for_writing = matches!(call, "open" | "openat" | "openat2")
                && ["O_WRONLY", "O_RDWR", "O_CREAT", "O_TRUNC"]
                    .iter()
                    .any(|flag| line.contains(flag));
            (under_state && (opens_for_writing || WRITING_SYSCALLS.contains(&call)))
                || (call == "flock" && line.contains("LOCK_EX"))
        })
        .map(str::to_string)
        .collect()
}

/// The monitor under `strace` with `args`, its header showing `source`
/// (how liveness is learned: `kernel lock events`, `probe passive`…),
/// while holders come and go: the trace. `None`, with one line saying
/// what to install, where `strace` is not.
fn traced_monitor(
    args: &[&str],
    source: &[&str],
) -> Option<(String, std::path::PathBuf, tempfile::TempDir)> {
    if !have_program("strace", "apt-get install strace") {
        return None;
    }
    let (tmp, state) = state_in_tempdir();
    let trace = tmp.path().join("monitor.strace");
    let trace_arg = trace.to_str().expect("UTF-8 temp path");
    let early = Holder::hold(
        &state,
        &["--aih", "cli/daemon/early-1", "--tag", "early tag"],
    );
    let wrapper = [
        "strace",
        "-f",
        "-qq",
        "-o",
        trace_arg,
        "-e",
        "trace=%file,flock,ftruncate",
    ];
    let mut tui = Tui::spawn_under(&wrapper, &state, args, 120, 35);
    tui.wait_for(
        "the header says read-only and the liveness source",
        |screen| screen.contains("READ-ONLY") && source.iter().any(|said| screen.contains(said)),
    );
    let early_pid = early.pid().to_string();
    tui.wait_for("the early holder", |screen| {
        row_of(screen, "early-1").is_some_and(|row| row.contains(&early_pid))
    });
    // Holders come and go while the monitor watches: every change is probed.
    for round in 0..3 {
        let tag = format!("round {round}");
        let mut holder = Holder::hold(&state, &["--group", &tag]);
        let pid = holder.pid().to_string();
        tui.wait_for("the new holder", |screen| {
            row_of(screen, &tag).is_some_and(|row| row.contains(&pid))
        });
        holder.kill();
        tui.wait_for("the killed holder's key free", |screen| {
            row_of(screen, &tag).is_some_and(|row| row.contains("free"))
        });
    }
    tui.send(b"q");
    assert!(tui.wait_exit(EXIT_TIMEOUT).is_some(), "the monitor quit");
    drop(early);
    let trace = std::fs::read_to_string(&trace).expect("the trace");
    assert!(
        trace
            .lines()
            .any(|line| line.contains(state.to_str().unwrap())),
        "the trace shows the monitor's file calls"
    );
    Some((trace, state, tmp))
}

#[test]
fn read_only_monitor_writes_nothing_and_takes_no_lock_at_all_by_default() {
    // The default source: the kernel's lock events as root (begun by one
    // lock-free judgement), else the lock-free probe.
    let Some((trace, state, _tmp)) =
        traced_monitor(&["--read-only"], &["kernel lock events", "probe lock-free"])
    else {
        return;
    };
    let writes = writes_in(&trace, &state);
    assert!(
        writes.is_empty(),
        "--read-only wrote or locked:\n{}",
        writes.join("\n")
    );
    let locks_or_claim_opens: Vec<&str> = trace
        .lines()
        .filter(|line| {
            line.contains("flock(") || (line.contains("open") && line.contains(".lock\""))
        })
        .collect();
    assert!(
        locks_or_claim_opens.is_empty(),
        "the lock-free monitor took a lock or opened a claim file:\n{}",
        locks_or_claim_opens.join("\n")
    );
}

#[test]
fn read_only_monitor_writes_nothing_and_takes_no_exclusive_lock() {
    let Some((trace, state, _tmp)) = traced_monitor(
        &["--read-only", "--source", "inference", "--probe", "passive"],
        &["probe passive"],
    ) else {
        return;
    };
    let writes = writes_in(&trace, &state);
    assert!(
        writes.is_empty(),
        "--read-only wrote or locked:\n{}",
        writes.join("\n")
    );
}

#[test]
fn read_only_refuses_the_acquire_probe() {
    let (_tmp, state) = state_in_tempdir();
    let out = crate::common::run_locktop(&state, &["--read-only", "--probe", "acquire"]);
    assert_eq!(out.code(), 2, "{out:?}");
    assert!(out.stderr.contains("--read-only"), "{}", out.stderr);
}
