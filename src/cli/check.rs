//! `locktop check`: can this family be taken right now, and if not, who is
//! in the way? Exit 0 when it could be taken, 1 when busy (with the
//! explanation), 2 on bad input. `--json` for scripts.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::SystemTime;

use super::{EXIT_BUSY, FamilyArgs};
use crate::context::Context;
use crate::operate::check;

/// Flags of `locktop check`.
#[derive(Debug, clap::Args)]
pub struct CheckArgs {
    #[command(flatten)]
    family: FamilyArgs,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
    /// Only probe (shared-lock, never writes) instead of taking the family
    /// for an instant.
    #[arg(long)]
    passive: bool,
}

/// Runs `locktop check`.
pub async fn run(state_dir: PathBuf, args: CheckArgs) -> anyhow::Result<ExitCode> {
    let family = args.family.family()?;
    let context = Context::new(state_dir);
    let report = check::check_family(&context, &family, args.passive).await?;
    if args.json {
        println!("{}", serde_json::to_string(&report)?);
    } else {
        for line in check::report_lines(&report, SystemTime::now()) {
            println!("{line}");
        }
    }
    Ok(if report.free {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_BUSY)
    })
}
