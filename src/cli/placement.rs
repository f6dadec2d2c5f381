//! Where an option stands does not change what it applies to, as in git,
//! cargo and kubectl. The monitor's options (`--probe`, `--source`,
//! `--sweep`, `--read-only`, `--log`, the thresholds, …) are the
//! top-level command's own; given before a subcommand that has an option
//! of the same name (`locktop --source kernel watch`), they are that
//! subcommand's, exactly as if given after it.
//!
//! Invariant: an option given on the command line either applies to the
//! command it is given with, or the run is refused before anything starts
//! (one line on stderr naming what the option belongs to, exit 2): a
//! top-level option before a subcommand that has no option of its name;
//! the global `--state-dir` with a subcommand that reads no state dir.
//! The options are taken from clap's definition (`Cli::command()`), so a
//! new one is covered with no list to keep here.
//!
//! How: clap parses the line once; when a top-level option stands before
//! a subcommand that has it, its words move to just after the
//! subcommand's name and clap parses again, so the subcommand's own
//! definition (its values, its help, its conflicts) judges it. Both
//! places given at once (`locktop --probe passive snapshot --probe
//! acquire`) is then clap's "cannot be used multiple times".
//!
//! Why not clap's own `args_conflicts_with_subcommands`: it refuses every
//! top-level option before a subcommand, the global `--state-dir` too;
//! and global options would put every monitor option on every
//! subcommand, `hold` too. Tests below keep both reasons true.

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
    /// An option of the monitor with a subcommand that has no option of
    /// its name.
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
            Reason::MonitorOptionOnly => format!(
                "{option} is an option of the monitor (`locktop` without a command), \
                 not of `{subcommand}`, which has no {option} (locktop {subcommand} --help)"
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

/// Parses `argv` (the program name first) as clap does, with a top-level
/// option before a subcommand that has it taken as that subcommand's;
/// then refuses the first option (in the order clap defines them) that
/// would not apply. `Ok` only when every option given applies to the
/// command that runs.
pub fn parse_from<I, T>(argv: I) -> Result<Cli, Refused>
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let argv: Vec<OsString> = argv.into_iter().map(Into::into).collect();
    let mut definition = Cli::command();
    let argv = with_optional_values_attached(&definition, argv);
    let matches = definition
        .try_get_matches_from_mut(&argv)
        .map_err(Refused::Clap)?;
    if let Some(moved) = moved_after_subcommand(&definition, &matches, &argv) {
        let matches = definition
            .try_get_matches_from_mut(&moved)
            .map_err(Refused::Clap)?;
        return judged(&mut definition, &matches);
    }
    judged(&mut definition, &matches)
}

/// The options whose value may be left out (`--connect`: alone, this
/// host's service).
const OPTIONAL_VALUE: &[&str] = &["--connect"];

/// `argv` with each option of [`OPTIONAL_VALUE`] given without a value
/// written `--opt=` (an empty value: "left out"): the next word is its
/// value only when it is neither an option nor a subcommand's name, so
/// `locktop --connect watch` is `watch` attached to this host's service,
/// never a target named "watch". Every option then takes one word of
/// value or none, as the move after the subcommand counts them.
fn with_optional_values_attached(definition: &clap::Command, argv: Vec<OsString>) -> Vec<OsString> {
    let is_subcommand = |word: &OsString| {
        let word = word.to_string_lossy();
        definition
            .get_subcommands()
            .any(|sub| sub.get_name() == word || sub.get_all_aliases().any(|alias| alias == word))
    };
    let mut out = Vec::with_capacity(argv.len());
    let mut words = argv.into_iter().peekable();
    while let Some(word) = words.next() {
        if word == "--" {
            out.push(word);
            out.extend(words);
            break;
        }
        let optional = OPTIONAL_VALUE.iter().any(|opt| word == *opt);
        let value_follows = words
            .peek()
            .is_some_and(|next| !next.to_string_lossy().starts_with('-') && !is_subcommand(next));
        if optional && !value_follows {
            let mut attached = word;
            attached.push("=");
            out.push(attached);
        } else {
            out.push(word);
        }
    }
    out
}

/// The parsed command line, or the first option in it that does not apply.
fn judged(definition: &mut clap::Command, matches: &ArgMatches) -> Result<Cli, Refused> {
    let cli =
        Cli::from_arg_matches(matches).map_err(|error| Refused::Clap(error.format(definition)))?;
    match misplaced(definition, matches, cli.command.as_ref()) {
        Some(misplaced) => Err(Refused::Misplaced(misplaced)),
        None => Ok(cli),
    }
}

/// `argv` with every top-level, non-global option that stands before the
/// subcommand and that the subcommand also has moved to just after the
/// subcommand's name (in the order given); `None` when there is none.
/// `argv` parsed already, so it is well formed.
fn moved_after_subcommand(
    definition: &clap::Command,
    matches: &ArgMatches,
    argv: &[OsString],
) -> Option<Vec<OsString>> {
    let (name, _) = matches.subcommand()?;
    let subcommand = definition.find_subcommand(name)?;
    let has_it = |arg: &Arg| {
        !arg.is_global_set()
            && arg.get_long().is_some_and(|long| {
                subcommand
                    .get_arguments()
                    .any(|own| own.get_long() == Some(long))
            })
    };
    let (mut kept, mut moved) = (vec![], vec![]);
    let mut words = argv.iter().cloned();
    kept.extend(words.next());
    while let Some(word) = words.next() {
        let text = word.to_string_lossy();
        if text == "--" || !text.starts_with('-') || text == "-" {
            // The subcommand's name: clap found one, and no top-level
            // argument is positional.
            kept.push(word);
            kept.append(&mut moved);
            kept.extend(words);
            break;
        }
        let (arg, value_attached) = top_level_arg(definition, &text)?;
        let mut option = vec![word];
        if arg.get_action().takes_values() && !value_attached {
            option.extend(words.next());
        }
        if has_it(arg) {
            moved.append(&mut option);
        } else {
            kept.append(&mut option);
        }
    }
    (kept.len() == argv.len() && kept != argv).then_some(kept)
}

/// The top-level argument a word before the subcommand names (`--name`,
/// `--name=value`, `-x`), and whether its value is in the word itself.
fn top_level_arg<'a>(definition: &'a clap::Command, word: &str) -> Option<(&'a Arg, bool)> {
    if let Some(long) = word.strip_prefix("--") {
        let (name, value) = match long.split_once('=') {
            Some((name, _)) => (name, true),
            None => (long, false),
        };
        let arg = definition
            .get_arguments()
            .find(|arg| arg.get_long() == Some(name))?;
        return Some((arg, value));
    }
    let mut shorts = word.strip_prefix('-')?.chars();
    let first = shorts.next()?;
    let arg = definition
        .get_arguments()
        .find(|arg| arg.get_short() == Some(first))?;
    Some((arg, shorts.next().is_some()))
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
            } else {
                // Had the subcommand an option of this name, it would
                // have been moved to it.
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

    /// Global options would put every monitor option on every subcommand:
    /// `hold --read-only` would parse, and `hold --help` list it.
    #[test]
    fn global_monitor_options_would_land_on_every_subcommand() {
        let mut definition = Cli::command();
        let read_only = definition
            .get_arguments()
            .find(|arg| arg.get_long() == Some("read-only"))
            .expect("--read-only")
            .clone()
            .global(true);
        definition = definition.mut_arg("read_only", |_| read_only);
        assert!(
            definition
                .try_get_matches_from(["locktop", "hold", "--tag", "t", "--read-only"])
                .is_ok(),
            "a global --read-only is taken by hold"
        );
    }

    /// Every top-level option takes one word of value or none: the move
    /// after the subcommand counts its words so (an option whose value
    /// may be left out is written `--opt=` first: [`OPTIONAL_VALUE`]).
    #[test]
    fn every_top_level_option_takes_one_value_or_none() {
        for arg in Cli::command().get_arguments().filter(|arg| is_option(arg)) {
            let values = arg.get_num_args().unwrap_or_default();
            let long = format!("--{}", arg.get_long().unwrap_or_default());
            let optional = values.min_values() == 0 && values.max_values() == 1;
            assert!(
                !arg.get_action().takes_values()
                    || (values.min_values() == 1 && values.max_values() == 1)
                    || (optional && OPTIONAL_VALUE.contains(&long.as_str())),
                "{long} takes {values:?}"
            );
        }
    }

    /// `--connect` alone before a subcommand, or before another option,
    /// attaches to this host's service; with a value, that value.
    #[test]
    fn connect_without_a_value_never_takes_the_next_word() {
        let connect = |argv: &[&str]| -> Option<String> {
            let cli = parse_from(argv.iter().copied()).unwrap_or_else(|_| panic!("{argv:?}"));
            match cli.command {
                Some(super::super::Command::Watch(args)) => args.connect_target(),
                None => cli.monitor.connect.connect,
                _ => panic!("{argv:?}"),
            }
        };
        assert_eq!(
            connect(&["locktop", "--connect", "watch"]),
            Some(String::new())
        );
        assert_eq!(
            connect(&["locktop", "--connect", "--read-only"]),
            Some(String::new())
        );
        assert_eq!(connect(&["locktop", "--connect"]), Some(String::new()));
        assert_eq!(
            connect(&["locktop", "--connect", "unix:/s", "watch"]),
            Some("unix:/s".into())
        );
        assert_eq!(
            connect(&["locktop", "watch", "--connect", "https://h:1"]),
            Some("https://h:1".into())
        );
    }

    #[test]
    fn each_reason_is_one_line_naming_the_option_and_the_subcommand() {
        for reason in [Reason::MonitorOptionOnly, Reason::NoStateDir] {
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

    /// A monitor option before a subcommand that has it is the
    /// subcommand's, in any spelling; before one that has not, refused.
    #[test]
    fn an_option_before_a_subcommand_that_has_it_is_the_subcommands() {
        let refused = |argv: &[&str]| match parse_from(argv) {
            Err(Refused::Misplaced(misplaced)) => Some(misplaced.reason),
            Err(Refused::Clap(error)) => panic!("{argv:?}: {error}"),
            Ok(_) => None,
        };
        assert_eq!(
            refused(&["locktop", "--read-only", "snapshot"]),
            Some(Reason::MonitorOptionOnly)
        );
        assert_eq!(
            refused(&["locktop", "--probe", "passive", "--read-only", "snapshot"]),
            Some(Reason::MonitorOptionOnly)
        );
        assert_eq!(
            refused(&["locktop", "completions", "bash", "--state-dir", "x"]),
            Some(Reason::NoStateDir)
        );
        assert_eq!(refused(&["locktop", "--state-dir", "x", "snapshot"]), None);
        assert_eq!(refused(&["locktop", "--read-only", "--sweep", "2"]), None);
        assert_eq!(refused(&["locktop", "demo", "--read-only"]), None);

        // The same parse as with the option after the subcommand.
        let parsed = |argv: &[&str]| format!("{:?}", parse_from(argv).expect("parses"));
        let after = parsed(&["locktop", "snapshot", "--probe", "passive"]);
        assert!(after.contains("Passive"), "{after}");
        for before in [
            &["locktop", "--probe", "passive", "snapshot"][..],
            &["locktop", "--probe=passive", "snapshot"],
        ] {
            assert_eq!(parsed(before), after, "{before:?}");
        }
        assert_eq!(
            parsed(&[
                "locktop",
                "--source",
                "kernel",
                "--state-dir",
                "d",
                "watch",
                "--json"
            ]),
            parsed(&[
                "locktop",
                "--state-dir",
                "d",
                "watch",
                "--source",
                "kernel",
                "--json"
            ]),
        );
        // Given in both places: clap's own error, as for one given twice.
        let twice = parse_from([
            "locktop", "--probe", "passive", "snapshot", "--probe", "acquire",
        ]);
        assert!(
            matches!(&twice, Err(Refused::Clap(error)) if error.kind() == clap::error::ErrorKind::ArgumentConflict),
            "{twice:?}"
        );
        // A value the subcommand refuses is refused by its own definition.
        assert!(matches!(
            parse_from(["locktop", "--sweep", "x", "watch"]),
            Err(Refused::Clap(_))
        ));
    }
}
