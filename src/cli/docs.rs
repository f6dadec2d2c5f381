//! `locktop completions SHELL` and `locktop man`: shell completions and a
//! roff man page, generated from the clap definitions (clap's own
//! companion crates), so they never drift from the flags.
//!
//! Invariant: both write to stdout only and touch no state dir.

use std::io::Write;
use std::process::ExitCode;

use clap::CommandFactory;
use roff::{Roff, bold, roman};

/// Arguments of `completions`.
#[derive(Debug, clap::Args)]
pub struct CompletionsArgs {
    /// The shell to complete for.
    #[arg(value_enum)]
    pub shell: Shell,
}

/// Shells `completions` writes for.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum Shell {
    /// bash (source it, or put it in bash-completion's directory).
    Bash,
    /// zsh (put it on $fpath as `_locktop`).
    Zsh,
    /// fish (put it in ~/.config/fish/completions/).
    Fish,
}

/// Writes the completion script of `args.shell` to stdout.
pub fn completions(args: &CompletionsArgs) -> anyhow::Result<ExitCode> {
    let shell = match args.shell {
        Shell::Bash => clap_complete::Shell::Bash,
        Shell::Zsh => clap_complete::Shell::Zsh,
        Shell::Fish => clap_complete::Shell::Fish,
    };
    let mut command = super::Cli::command();
    let mut script = Vec::new();
    // Into memory first: clap_complete panics on a write error (`| head`).
    clap_complete::generate(shell, &mut command, "locktop", &mut script);
    print(&script)
}

/// Writes the man page (roff) to stdout: clap_mangen's title, name,
/// synopsis, description and options, then sections of locktop's own —
/// every subcommand with its options on this one page (clap_mangen would
/// point to `locktop-NAME(1)` pages that are never generated), the
/// monitor's keys (from the key map, like its help), exit status,
/// environment and files.
pub fn man() -> anyhow::Result<ExitCode> {
    let command = super::Cli::command();
    let man = clap_mangen::Man::new(command.clone());
    let mut page = Vec::new();
    man.render_title(&mut page)?;
    man.render_name_section(&mut page)?;
    man.render_synopsis_section(&mut page)?;
    man.render_description_section(&mut page)?;
    man.render_options_section(&mut page)?;
    subcommands_section(&command, &mut page)?;
    page.extend(own_sections().render().into_bytes());
    man.render_version_section(&mut page)?;
    print(&page)
}

/// Every subcommand on this page: `locktop NAME`, what it does, its own
/// options (as clap_mangen renders a command's options, under a
/// subsection instead of a section).
fn subcommands_section(command: &clap::Command, page: &mut Vec<u8>) -> std::io::Result<()> {
    page.extend(
        Roff::new()
            .control("SH", ["COMMANDS"])
            .render()
            .into_bytes(),
    );
    for sub in command.get_subcommands().filter(|sub| !sub.is_hide_set()) {
        if sub.get_name() == "help" {
            continue;
        }
        let mut head = Roff::new();
        head.control("SS", [format!("locktop {}", sub.get_name()).as_str()]);
        if let Some(about) = sub.get_about() {
            head.text([roman(about.to_string())]);
        }
        page.extend(head.render().into_bytes());
        let mut options = Vec::new();
        clap_mangen::Man::new(sub.clone()).render_options_section(&mut options)?;
        let options = String::from_utf8_lossy(&options);
        page.extend(options.replacen(".SH OPTIONS\n", "", 1).into_bytes());
    }
    Ok(())
}

/// KEYS, EXIT STATUS, ENVIRONMENT and FILES.
fn own_sections() -> Roff {
    let mut roff = Roff::new();
    roff.control("SH", ["KEYS"]);
    roff.text([roman(
        "In the monitor (the same list as its ? help, from one key map):",
    )]);
    for binding in crate::tui::keymap::BINDINGS {
        term(&mut roff, binding.shown, binding.description);
    }
    for (title, terms) in [
        ("EXIT STATUS", &EXIT_STATUS[..]),
        ("ENVIRONMENT", &ENVIRONMENT[..]),
        ("FILES", &FILES[..]),
    ] {
        roff.control("SH", [title]);
        for (name, meaning) in terms {
            term(&mut roff, name, meaning);
        }
    }
    roff
}

/// Writes `bytes` to stdout; a reader that stopped early (`| head`) is
/// not an error.
fn print(bytes: &[u8]) -> anyhow::Result<ExitCode> {
    let mut stdout = std::io::stdout().lock();
    match stdout.write_all(bytes).and_then(|()| stdout.flush()) {
        Err(error) if error.kind() != std::io::ErrorKind::BrokenPipe => Err(error.into()),
        _ => Ok(ExitCode::SUCCESS),
    }
}

/// One tagged paragraph: `name` in bold, `meaning` below it.
fn term(roff: &mut Roff, name: &str, meaning: &str) {
    roff.control("TP", []);
    roff.text([bold(name)]);
    roff.text([roman(meaning)]);
}

/// The man page's EXIT STATUS: code, meaning.
const EXIT_STATUS: [(&str, &str); 3] = [
    (
        "0",
        "done: the monitor quit, a snapshot was printed, a family is free (check), a key was released or taken (wait), a holder released",
    ),
    (
        "1",
        "busy: a member of the family is held (check, hold), or a wait was interrupted",
    ),
    (
        "2",
        "bad input or an error: a state dir that is missing or not a directory, a flag the command does not take, a lock path that is not a regular file, a busy or refused --listen address",
    ),
];

/// The man page's ENVIRONMENT: variable, meaning.
const ENVIRONMENT: [(&str, &str); 5] = [
    (
        "OBJECTIVEAI_DIR",
        "the ObjectiveAI directory (default ~/.objectiveai); the state dir is $OBJECTIVEAI_DIR/state/$OBJECTIVEAI_STATE unless --state-dir is given",
    ),
    ("OBJECTIVEAI_STATE", "the state's name (default: default)"),
    (
        "HOME",
        "where ~/.objectiveai is, when OBJECTIVEAI_DIR is not set",
    ),
    (
        "NO_COLOR",
        "when set (to anything), the monitor draws without colour; every state keeps its glyph and word",
    ),
    (
        "TERM",
        "TERM=dumb is refused by the monitor (use snapshot or watch)",
    ),
];

/// The man page's FILES: path, meaning.
const FILES: [(&str, &str); 1] = [(
    "<state>/locks",
    "the lock files locktop watches: agents/instances/<AIH>.lock and .live.lock per agent instance, agents/tags/<tag>.lock and .live.lock per tag. locktop writes nowhere else, and with the default lock-free probe (or --read-only) nowhere at all.",
)];
