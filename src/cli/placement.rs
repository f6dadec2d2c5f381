//! Where an option stands decides what it applies to. The monitor's
//! options (`--probe`, `--sweep`, `--read-only`, `--log`, the thresholds)
//! are the top-level command's own, so clap also takes them before a
//! subcommand, where nothing reads them.
//!
//! Invariant: an option given on the command line either applies to the
//! command it is given with, or the run is refused before anything starts
//! (one line on stderr, exit 2): any top-level option that is not global,
//! given before a subcommand; and the global `--state-dir` with a
//! subcommand that reads no state dir. The options are taken from clap's
//! definition (`Cli::command()`), so a new one is covered with no list to
//! keep here.
//!
//! Why not clap's own `args_conflicts_with_subcommands`: it refuses every
//! top-level option before a subcommand, the global `--state-dir` too, so
//! `locktop --state-dir D watch` (how scripts and the benches call it)
//! would stop working; and its refusal is several lines of usage. A test
//! below keeps that reason true.

use std::ffi::OsString;

use clap::parser::ValueSource;
use clap::{Arg, ArgAction, ArgMatches, CommandFactory, FromArgMatches};

use super::{Cli, Command};

/// An option given where it does not apply; its `Display` is the one line
/// the refusal prints (after `locktop: `).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", self.line())]
pub struct Misplaced {
    /// The option as typed: `--name`.
    pub option: String,
    /// The subcommand it was given with.
    pub subcommand: String,
    /// Why it does not apply there.
    pub reason: Reason,
}

/// Why a [`Misplaced`] option does not apply to its subcommand.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    /// An option of the monitor before a subcommand that has an option of
    /// the same name: it belongs after the subcommand.
    MonitorOptionGiveItAfter,
    /// An option of the monitor before a subcommand that has no such option.
    MonitorOptionOnly,
    /// `--state-dir` with a subcommand that reads no state dir.
    NoStateDir,
}

impl Misplaced {
    fn line(&self) -> String {
        let Self {
            option,
            subcommand,
            reason,
        } = self;
        match reason {
            Reason::MonitorOptionGiveItAfter => format!(
                "{option} is an option of the monitor, not of `{subcommand}`; \
                 give it after the subcommand: locktop {subcommand} {option} …"
            ),
            Reason::MonitorOptionOnly => format!(
                "{option} is an option of the monitor, not of `{subcommand}`, \
                 which has no {option} (locktop {subcommand} --help)"
            ),
            Reason::NoStateDir => format!(
                "{option} does not apply to `{subcommand}`, which reads no state dir \
                 (locktop {subcommand} --help)"
            ),
        }
    }
}

/// Why a command line is not run.
#[derive(Debug)]
pub enum Refused {
    /// clap's own error (or help, or version): print it and exit as clap does.
    Clap(clap::Error),
    /// An option given where it does not apply.
    Misplaced(Misplaced),
}

/// Parses `argv` (the program name first) as clap does, then refuses the
/// first option (in the order clap defines them) that would not apply.
/// `Ok` only when every option given applies to the command that runs.
pub fn parse_from<I, T>(argv: I) -> Result<Cli, Refused>
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let mut definition = Cli::command();
    let matches = definition
        .try_get_matches_from_mut(argv)
        .map_err(Refused::Clap)?;
    let cli = Cli::from_arg_matches(&matches)
        .map_err(|error| Refused::Clap(error.format(&mut definition)))?;
    match misplaced(&definition, &matches, cli.command.as_ref()) {
        Some(misplaced) => Err(Refused::Misplaced(misplaced)),
        None => Ok(cli),
    }
}

/// The first option given on the command line that does not apply to
/// `command` (`None`: the monitor, to which every option applies).
fn misplaced(
    definition: &clap::Command,
    matches: &ArgMatches,
    command: Option<&Command>,
) -> Option<Misplaced> {
    let command = command?;
    let (name, _) = matches.subcommand()?;
    let subcommand = definition.find_subcommand(name)?;
    definition
        .get_arguments()
        .filter(|arg| is_option(arg))
        .filter(|arg| matches.value_source(arg.get_id().as_str()) == Some(ValueSource::CommandLine))
        .find_map(|arg| {
            let long = arg.get_long()?;
            let reason = if arg.is_global_set() {
                // `--state-dir` is the only global option (a unit test
                // below keeps it so): it applies where a state dir is read.
                if command.reads_state_dir() {
                    return None;
                }
                Reason::NoStateDir
            } else if subcommand
                .get_arguments()
                .any(|own| own.get_long() == Some(long))
            {
                Reason::MonitorOptionGiveItAfter
            } else {
                Reason::MonitorOptionOnly
            };
            Some(Misplaced {
                option: format!("--{long}"),
                subcommand: name.to_string(),
                reason,
            })
        })
}

/// An option the user sets (not clap's `--help`/`--version`, which act at once).
fn is_option(arg: &Arg) -> bool {
    !arg.is_positional()
        && !matches!(
            arg.get_action(),
            ArgAction::Help | ArgAction::HelpShort | ArgAction::HelpLong | ArgAction::Version
        )
}

impl Command {
    /// Whether this subcommand reads a state dir, so that `--state-dir`
    /// applies to it. Exhaustive: a new subcommand must say.
    pub fn reads_state_dir(&self) -> bool {
        match self {
            Command::Hold(_)
            | Command::Snapshot(_)
            | Command::Check(_)
            | Command::Demo(_)
            | Command::Watch(_)
            | Command::Serve(_)
            | Command::Wait(_)
            | Command::Record(_) => true,
            Command::Completions(_) | Command::Man | Command::Replay(_) => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_only_global_option_is_the_state_dir() {
        let globals: Vec<String> = Cli::command()
            .get_arguments()
            .filter(|arg| is_option(arg) && arg.is_global_set())
            .map(|arg| arg.get_id().to_string())
            .collect();
        assert_eq!(
            globals,
            ["state_dir"],
            "say where a new global option applies"
        );
    }

    /// Were clap's setting ever to take the global option before a
    /// subcommand, this module could give way to it.
    #[test]
    fn clap_refuses_the_state_dir_before_a_subcommand_under_its_conflict_setting() {
        let error = Cli::command()
            .args_conflicts_with_subcommands(true)
            .try_get_matches_from(["locktop", "--state-dir", "x", "snapshot"])
            .expect_err("clap refuses it");
        assert_eq!(error.kind(), clap::error::ErrorKind::ArgumentConflict);
        assert!(parse_from(["locktop", "--state-dir", "x", "snapshot"]).is_ok());
    }

    #[test]
    fn each_reason_is_one_line_naming_the_option_and_the_subcommand() {
        for reason in [
            Reason::MonitorOptionGiveItAfter,
            Reason::MonitorOptionOnly,
            Reason::NoStateDir,
        ] {
            let line = Misplaced {
                option: "--probe".into(),
                subcommand: "snapshot".into(),
                reason,
            }
            .to_string();
            assert!(!line.contains('\n'), "{line}");
            assert!(
                line.contains("--probe") && line.contains("`snapshot`"),
                "{line}"
            );
        }
    }

    #[test]
    fn an_option_of_the_monitor_is_refused_before_a_subcommand_and_taken_after_it() {
        let refused = |argv: &[&str]| match parse_from(argv) {
            Err(Refused::Misplaced(misplaced)) => Some(misplaced.reason),
            Err(Refused::Clap(error)) => panic!("{argv:?}: {error}"),
            Ok(_) => None,
        };
        assert_eq!(
            refused(&["locktop", "--probe", "passive", "snapshot"]),
            Some(Reason::MonitorOptionGiveItAfter)
        );
        assert_eq!(
            refused(&["locktop", "--read-only", "snapshot"]),
            Some(Reason::MonitorOptionOnly)
        );
        assert_eq!(
            refused(&["locktop", "completions", "bash", "--state-dir", "x"]),
            Some(Reason::NoStateDir)
        );
        assert_eq!(
            refused(&["locktop", "snapshot", "--probe", "passive"]),
            None
        );
        assert_eq!(refused(&["locktop", "--state-dir", "x", "snapshot"]), None);
        assert_eq!(refused(&["locktop", "--read-only", "--sweep", "2"]), None);
        assert_eq!(refused(&["locktop", "demo", "--read-only"]), None);
    }
}
