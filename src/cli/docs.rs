//! `locktop completions SHELL` and `locktop man`: shell completions and a
//! roff man page, generated from the clap definitions (clap's own
//! companion crates), so they never drift from the flags.
//!
//! Invariant: both write to stdout only and touch no state dir.

use std::io::Write;
use std::process::ExitCode;

use clap::CommandFactory;

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

/// Writes the man page (roff) to stdout.
pub fn man() -> anyhow::Result<ExitCode> {
    let mut page = Vec::new();
    clap_mangen::Man::new(super::Cli::command()).render(&mut page)?;
    print(&page)
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
