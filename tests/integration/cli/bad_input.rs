//! Bad input, each answered with one clear line on stderr and exit 2 —
//! never a panic, never a wait that cannot end. Run as an unprivileged
//! user where permissions matter (root ignores file modes).

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Stdio};

use clap::CommandFactory;
use locktop::cli::Cli;
use locktop::cli::placement::{self, Refused};

use crate::common::{
    self, Finished, NOBODY, PROCESS_TIMEOUT, binary_for_anyone, finish, locktop_bin,
    state_in_tempdir, wait_with_timeout,
};

/// Runs `bin --state-dir STATE args…` as user and group `ids` (stdin
/// closed, no TTY); returns the exit code and stderr.
fn run_as(
    (uid, gid): (u32, u32),
    bin: &Path,
    state: &Path,
    args: &[&str],
    env: &[(&str, &str)],
) -> (i32, String) {
    let mut command = Command::new(bin);
    common::no_service(&mut command);
    command
        .arg("--state-dir")
        .arg(state)
        .args(args)
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    std::os::unix::process::CommandExt::uid(&mut command, uid);
    std::os::unix::process::CommandExt::gid(&mut command, gid);
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
    // Root reads everything: as root, the monitor runs as nobody on a
    // state dir only root may read; as anyone else, as itself on a state
    // dir nobody may read.
    // SAFETY: geteuid and getegid have no preconditions.
    let (euid, egid) = unsafe { (libc::geteuid(), libc::getegid()) };
    let (ids, mode) = if euid == 0 {
        ((NOBODY, NOBODY), 0o700)
    } else {
        ((euid, egid), 0o000)
    };
    let (_bin_dir, bin) = binary_for_anyone();
    let (tmp, state) = state_in_tempdir();
    std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o755)).expect("chmod");
    std::fs::set_permissions(&state, std::fs::Permissions::from_mode(mode)).expect("chmod");
    for args in [
        &["snapshot"][..],
        &["snapshot", "--json"][..],
        &["watch"][..],
        &["watch", "--json"][..],
        &["check", "--tag", "x"][..],
        &["hold", "--tag", "x"][..],
    ] {
        let outcome = run_as(ids, &bin, &state, args, &[]);
        assert_one_line_exit_2(&format!("{args:?}"), outcome, "ermission denied");
    }
    // So that the temporary directory can be removed.
    std::fs::set_permissions(&state, std::fs::Permissions::from_mode(0o755)).expect("chmod");
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
        common::no_service(&mut command);
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

/// `locktop --state-dir /tmp/typo`: a state dir named on the command
/// line that does not exist is refused by every command that watches it,
/// as `snapshot` and `check` refuse it — never an empty, healthy-looking
/// view of nothing.
#[test]
fn an_explicit_state_dir_that_does_not_exist_is_one_line_and_exit_2_for_every_command() {
    let (_tmp, state) = state_in_tempdir();
    let typo = state.join("typo");
    for args in [
        &[][..],
        &["--read-only"][..],
        &["watch"][..],
        &["watch", "--json"][..],
        &["serve", "--listen", "127.0.0.1:0"][..],
        &["record"][..],
        &["snapshot"][..],
        &["check", "--tag", "x"][..],
    ] {
        let out = finish({
            let mut command = crate::common::locktop_command(&typo, args);
            command.stdin(Stdio::null());
            command
        });
        assert_one_line_exit_2(
            &format!("{args:?}"),
            (out.code(), out.stderr),
            "does not exist",
        );
    }
    assert!(!typo.exists(), "nothing created the mistyped state dir");
}

#[test]
fn completions_and_man_are_generated_from_the_clap_definitions() {
    let (tmp, _state) = crate::common::state_in_tempdir();
    let run = |args: &[&str]| run_bare(tmp.path(), args);
    for shell in ["bash", "zsh", "fish"] {
        let out = run(&["completions", shell]);
        assert_eq!(out.code(), 0, "{shell}: {}", out.stderr);
        for word in ["snapshot", "watch", "state-dir", "read-only"] {
            assert!(out.stdout.contains(word), "{shell} completes {word}");
        }
    }
    let man = run(&["man"]);
    assert_eq!(man.code(), 0, "{}", man.stderr);
    assert!(man.stdout.starts_with(".ie") || man.stdout.contains(".TH locktop 1"));
    assert!(man.stdout.contains("completions") && man.stdout.contains("snapshot"));
    // One page: no reference to locktop-NAME(1) pages that do not exist;
    // the name once; the sections a reader looks for.
    assert!(
        !man.stdout.contains("locktop\\-snapshot(1)"),
        "{}",
        man.stdout
    );
    assert!(
        man.stdout
            .contains("locktop \\- a live monitor for ObjectiveAI agent locks\n"),
        "{}",
        man.stdout
    );
    for section in [
        "COMMANDS",
        "KEYS",
        "\"EXIT STATUS\"",
        "ENVIRONMENT",
        "FILES",
    ] {
        assert!(man.stdout.contains(&format!(".SH {section}")), "{section}");
    }
    for (heading, detail) in [
        ("\"locktop snapshot\"", "\\-\\-json"),
        ("KEYS", "redraw the screen"),
        ("ENVIRONMENT", "OBJECTIVEAI_STATE"),
    ] {
        let after = man.stdout.split_once(heading).map(|(_, after)| after);
        assert!(
            after.is_some_and(|a| a.contains(detail)),
            "{heading}: {detail}"
        );
    }
    let wrong = run(&["completions", "tcsh"]);
    assert_eq!(wrong.code(), 2, "an unknown shell is bad input");
}

/// `locktop <args…>` with no `--state-dir` added (`completions` and `man`
/// refuse one): the state dir comes from `OBJECTIVEAI_DIR` (a temp dir).
/// Every stdio piped, stdin closed at once, within [`PROCESS_TIMEOUT`].
fn run_bare<S: AsRef<std::ffi::OsStr>>(objectiveai_dir: &Path, args: &[S]) -> Finished {
    let mut command = Command::new(locktop_bin());
    common::no_service(&mut command);
    command
        .args(args)
        .env("OBJECTIVEAI_DIR", objectiveai_dir)
        .env_remove("OBJECTIVEAI_STATE")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    finish(command)
}

/// A value `arg` parses: its first possible value, `state` for a path
/// option, else `2` (a number of seconds, or a file name never opened).
fn a_value(arg: &clap::Arg, state: &Path) -> String {
    if let Some(value) = arg.get_possible_values().first() {
        return value.get_name().to_string();
    }
    if arg.get_id() == "state_dir" {
        return state.display().to_string();
    }
    "2".to_string()
}

/// The fewest arguments `subcommand` parses with: its name and a value for
/// each argument clap requires, and for the first argument of each group
/// it requires one of (`wait`'s `--tag` or `--aih`).
fn minimal_invocation(subcommand: &clap::Command, state: &Path) -> Vec<String> {
    let mut argv = vec![subcommand.get_name().to_string()];
    let group_firsts: Vec<&clap::Id> = subcommand
        .get_groups()
        .filter(|group| group.is_required_set())
        .filter_map(|group| group.get_args().next())
        .collect();
    for arg in subcommand
        .get_arguments()
        .filter(|arg| arg.is_required_set() || group_firsts.contains(&arg.get_id()))
    {
        if let Some(long) = arg.get_long() {
            argv.push(format!("--{long}"));
        }
        argv.push(a_value(arg, state));
    }
    argv
}

/// `locktop <argv…>` parsed in this process as `main` parses it.
fn parse(argv: &[String]) -> Result<Cli, Refused> {
    placement::parse_from(std::iter::once("locktop".to_string()).chain(argv.iter().cloned()))
}

/// The matrix, from clap's definition (a new subcommand or option is in it
/// at once): every option of the top-level command, given before every
/// subcommand, either applies to it — `--state-dir` where a state dir is
/// read; a monitor option where the subcommand has one of its name, parsed
/// exactly as if given after the subcommand — or is refused (one line
/// naming it, the subcommand and the monitor, exit 2, before the
/// subcommand starts: `watch`, `serve`, `wait`, `hold` would not end).
/// Without a subcommand (the monitor) every option applies; that is
/// checked in process, the monitor needing a terminal.
#[test]
fn every_option_before_every_subcommand_applies_to_it_or_is_one_line_and_exit_2() {
    let (tmp, state) = state_in_tempdir();
    let definition = Cli::command();
    let options: Vec<&clap::Arg> = definition
        .get_arguments()
        .filter(|arg| arg.get_long().is_some())
        .collect();
    for long in [
        "state-dir",
        "probe",
        "sweep",
        "read-only",
        "log",
        "idle-after",
    ] {
        assert!(
            options.iter().any(|arg| arg.get_long() == Some(long)),
            "--{long} is a top-level option"
        );
    }
    let (mut refused, mut applied, mut moved) = (0, 0, 0);
    for subcommand in definition.get_subcommands() {
        let name = subcommand.get_name();
        let invocation = minimal_invocation(subcommand, &state);
        let command = match parse(&invocation) {
            Ok(cli) => cli.command.expect("a subcommand"),
            Err(Refused::Clap(error)) => panic!("{invocation:?} does not parse: {error}"),
            Err(Refused::Misplaced(misplaced)) => panic!("{invocation:?}: {misplaced}"),
        };
        for option in &options {
            let long = format!("--{}", option.get_long().expect("filtered"));
            let mut argv = vec![long.clone()];
            if option.get_action().takes_values() {
                argv.push(a_value(option, &state));
            }
            argv.extend(invocation.iter().cloned());
            if option.is_global_set() && command.reads_state_dir() {
                assert!(parse(&argv).is_ok(), "{argv:?} applies");
                applied += 1;
                continue;
            }
            if !option.is_global_set()
                && subcommand
                    .get_arguments()
                    .any(|own| own.get_long() == option.get_long())
            {
                let mut after = invocation.clone();
                after.splice(1..1, argv[..argv.len() - invocation.len()].iter().cloned());
                let (before, after) = (parse(&argv), parse(&after));
                assert!(before.is_ok(), "{argv:?} applies: {before:?}");
                assert_eq!(
                    format!("{before:?}"),
                    format!("{after:?}"),
                    "{argv:?} is {after:?}"
                );
                moved += 1;
                continue;
            }
            let out = run_bare(tmp.path(), &argv);
            let what = format!("{argv:?}");
            let named = format!("`{name}`");
            assert!(out.stderr.contains(&named), "{what} names {named}: {out:?}");
            if !option.is_global_set() {
                assert!(
                    out.stderr.contains("of the monitor"),
                    "{what} names the monitor: {out:?}"
                );
            }
            assert!(out.stdout.is_empty(), "{what} ran: {out:?}");
            assert_one_line_exit_2(&what, (out.code(), out.stderr), &long);
            refused += 1;
        }
    }
    assert!(
        refused > 0 && applied > 0 && moved > 0,
        "{refused} refused, {applied} applied, {moved} moved"
    );
    for option in &options {
        let mut argv = vec![format!("--{}", option.get_long().expect("filtered"))];
        if option.get_action().takes_values() {
            argv.push(a_value(option, &state));
        }
        match parse(&argv) {
            Ok(cli) => assert!(cli.command.is_none(), "{argv:?} is the monitor"),
            Err(Refused::Clap(error)) => panic!("{argv:?} does not parse: {error}"),
            Err(Refused::Misplaced(misplaced)) => panic!("{argv:?}: {misplaced}"),
        }
    }
}

/// An option of the monitor before a subcommand that has it runs as if
/// given after it; before one that has none, the refusal names what it
/// belongs to.
#[test]
fn a_monitor_option_runs_before_its_subcommand_or_says_whose_it_is() {
    let (tmp, state) = state_in_tempdir();
    let state_arg = state.display().to_string();
    let before = run_bare(
        tmp.path(),
        &[
            "--probe",
            "passive",
            "snapshot",
            "--json",
            "--state-dir",
            state_arg.as_str(),
        ],
    );
    assert_eq!(before.code(), 0, "{before:?}");
    assert!(before.stdout.contains("\"keys\""), "{before:?}");
    // On an existing state dir: run, this `hold` would take a real lock.
    let hold = [
        "--read-only",
        "hold",
        "--tag",
        "t",
        "--state-dir",
        state_arg.as_str(),
    ];
    let out = run_bare(tmp.path(), &hold);
    assert_eq!(out.code(), 2, "{out:?}");
    assert_eq!(
        out.stderr_lines(),
        [
            "locktop: --read-only is an option of the monitor (`locktop` without a command), \
          not of `hold`, which has no --read-only (locktop hold --help)"
        ]
    );
    assert!(!state.join("locks").exists(), "no lock taken");
    let out = run_bare(tmp.path(), &["man", "--state-dir", "x"]);
    assert_eq!(out.code(), 2, "{out:?}");
    assert_eq!(
        out.stderr_lines(),
        [
            "locktop: --state-dir does not apply to `man`, which reads no state dir \
          (locktop man --help)"
        ]
    );
}

/// Given after the subcommand, its own options still apply.
#[test]
fn options_after_the_subcommand_still_apply() {
    let (tmp, state) = state_in_tempdir();
    let state_arg = state.display().to_string();
    let out = run_bare(
        tmp.path(),
        &[
            "snapshot",
            "--probe",
            "passive",
            "--state-dir",
            state_arg.as_str(),
        ],
    );
    assert_eq!(out.code(), 0, "{out:?}");
    assert!(out.stderr.is_empty(), "{out:?}");
    let demo = ["demo", "--sweep", "2", "--headless"].map(String::from);
    assert!(
        matches!(
            parse(&demo),
            Ok(Cli {
                command: Some(locktop::cli::Command::Demo(_)),
                ..
            })
        ),
        "{demo:?} parses"
    );
    let watch = ["watch", "--sweep", "2", "--probe", "passive"].map(String::from);
    assert!(matches!(
        parse(&watch),
        Ok(Cli {
            command: Some(locktop::cli::Command::Watch(_)),
            ..
        })
    ));
}

/// Every text of the command line: each command's about, each option's
/// help, with where it is (for the failure message).
fn help_texts(cli: &clap::Command) -> Vec<(String, &clap::Arg, String)> {
    let mut texts = Vec::new();
    for command in std::iter::once(cli).chain(cli.get_subcommands()) {
        for arg in command.get_arguments() {
            for help in [arg.get_help(), arg.get_long_help()].into_iter().flatten() {
                texts.push((
                    format!("{} --{}", command.get_name(), arg.get_id()),
                    arg,
                    help.to_string(),
                ));
            }
        }
    }
    texts
}

/// Where `word` stands in `text` as a word of its own: not part of a
/// longer word (`passively`, `wait_acquire`) nor an option's name
/// (`--acquire`).
fn word_at(text: &str, word: &str) -> Option<usize> {
    let part = |c: char| c.is_alphanumeric() || c == '_' || c == '-';
    text.match_indices(word).map(|(at, _)| at).find(|&at| {
        !text[..at].chars().next_back().is_some_and(part)
            && !text[at + word.len()..].chars().next().is_some_and(part)
    })
}

/// Reported from the field: `serve --help` and the man page (made from
/// the same texts) said "passive probe … by default", and `--sweep`
/// "passive rescans", where the probe that runs by default is lock-free.
/// Every text that names probe modes names first the one that runs
/// unless told otherwise: `--probe`'s default, which is the code's
/// (`ProbeMode::default()`, the engine's).
#[test]
fn help_names_first_the_probe_that_runs_by_default() {
    use clap::ValueEnum;
    use locktop::liveness::probe::ProbeMode;
    let default = ProbeMode::default();
    assert_eq!(locktop::engine::EngineConfig::default().probe, default);
    let modes: Vec<&str> = ProbeMode::value_variants()
        .iter()
        .map(|mode| mode.as_str())
        .collect();
    let cli = Cli::command();
    let mut texts: Vec<(String, String)> = std::iter::once(&cli)
        .chain(cli.get_subcommands())
        .flat_map(|command| {
            [command.get_about(), command.get_long_about()]
                .into_iter()
                .flatten()
                .map(|about| (format!("{} (about)", command.get_name()), about.to_string()))
        })
        .collect();
    for (place, arg, help) in help_texts(&cli) {
        if arg.get_id() == "probe" {
            let defaults: Vec<_> = arg.get_default_values().iter().collect();
            assert_eq!(defaults, [default.as_str()], "{place}");
        }
        // An option named after a mode (`check --passive`) names it.
        if !modes.contains(&arg.get_id().as_str()) {
            texts.push((place, help));
        }
    }
    let mut naming = 0;
    for (place, text) in texts {
        let first = modes
            .iter()
            .filter_map(|mode| Some((word_at(&text, mode)?, *mode)))
            .min();
        if let Some((_, first)) = first {
            naming += 1;
            assert_eq!(first, default.as_str(), "{place}: {text}");
        }
    }
    // serve's about, --sweep and --probe of several commands, --read-only.
    assert!(naming >= 10, "{naming} texts name a probe mode");
}

/// A default an option's help states in words (`(default 8)`) is the one
/// the code applies: clap's own default for the option (which it also
/// shows as `[default: …]`), or for `--materializing-after` (whose
/// default is the demo's or the engine's) the engine's.
#[test]
fn a_default_stated_in_words_is_the_one_applied() {
    let materializing = locktop::operate::verdict::MATERIALIZING_AFTER
        .as_secs()
        .to_string();
    let cli = Cli::command();
    let mut stated = 0;
    for (place, arg, help) in help_texts(&cli) {
        let Some((_, after)) = help.split_once("default") else {
            continue;
        };
        let number: String = after
            .trim_start_matches([':', ' '])
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        if number.is_empty() {
            continue;
        }
        stated += 1;
        let applied: Vec<String> = arg
            .get_default_values()
            .iter()
            .map(|value| value.to_string_lossy().into_owned())
            .collect();
        if arg.get_id() == "materializing_after" {
            assert_eq!(number, materializing, "{place}: {help}");
        } else {
            assert_eq!(
                applied,
                std::slice::from_ref(&number),
                "{place} states default {number} in words: let clap apply it (default_value_t) — {help}"
            );
        }
    }
    assert!(stated >= 1, "--materializing-after states its default");
}

/// `--version` names the version and the commit the binary was built
/// from (`-dirty` when tracked files differed from it), and the man page
/// says the same: a report of a bug names the build that had it.
#[test]
fn the_version_names_the_commit_it_was_built_from() {
    let (tmp, _state) = crate::common::state_in_tempdir();
    let version = run_bare(tmp.path(), &["--version"]);
    assert_eq!(version.code(), 0, "{}", version.stderr);
    let line = version.stdout.trim_end();
    let head = std::process::Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()
        .filter(|out| out.status.success())
        .map(|out| String::from_utf8_lossy(&out.stdout).trim().to_string());
    let expected = format!("locktop {} (", env!("CARGO_PKG_VERSION"));
    assert!(line.starts_with(&expected), "{line}");
    match head {
        Some(head) => {
            let commit = line[expected.len()..].trim_end_matches(')');
            assert!(
                commit == head || commit == format!("{head}-dirty"),
                "{line} is not built from HEAD {head}"
            );
        }
        None => assert!(line.ends_with("(unknown commit)"), "{line}"),
    }
    let man = run_bare(tmp.path(), &["man"]);
    let said = line.trim_start_matches("locktop ");
    assert!(man.stdout.contains(said), "the man page names {said}");
}
