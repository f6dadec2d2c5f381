//! `locktop serve` in a build without the `serve` feature: the command
//! is still known (so `locktop serve` is not taken for a typo), and it
//! says in one line how to get a build that has it.
//!
//! Invariant: nothing runs; whatever follows `serve` is refused with it.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;

/// Whatever was given after `serve` (refused with the command).
#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    #[arg(hide = true, trailing_var_arg = true, allow_hyphen_values = true)]
    rest: Vec<OsString>,
}

/// Refuses: this build has no `serve` (before anything else is checked).
pub fn refuse() -> anyhow::Result<ExitCode> {
    anyhow::bail!(
        "this locktop was built without `serve` (--no-default-features): \
         build it with its default features (cargo install --locked --path .) \
         or install the Debian package"
    )
}

/// As [`refuse`] (the dispatch reaches it only if the early refusal moved).
pub async fn run(_state_dir: PathBuf, _args: ServeArgs) -> anyhow::Result<ExitCode> {
    refuse()
}
