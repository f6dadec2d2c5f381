//! `locktop check`: can this family be taken right now, and if not, who is
//! in the way? Exit 0 when it could be taken, 1 when busy (with the
//! explanation), 2 on bad input, 3 when busy because of a deadlock (a
//! member is waited on in one, or its holder waits in one: it will never
//! be free until a process of it is signalled). `--json` for scripts.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::SystemTime;

use super::family_args::FamilyArgsError;
use super::{EXIT_BUSY, EXIT_ERROR, FamilyArgs};

/// `check`'s exit status when the family is busy because of a deadlock.
pub const EXIT_DEADLOCK: u8 = 3;
use crate::context::Context;
use crate::disk::state_dir::StateDirError;
use crate::liveness::lock_free::{self, ProbeChoice};
use crate::liveness::probe::ProbeMode;
use crate::locks::LocksError;
use crate::operate::check;
use crate::operate::check::CheckReport;

/// Flags of `locktop check`.
#[derive(Debug, clap::Args)]
pub struct CheckArgs {
    #[command(flatten)]
    family: FamilyArgs,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
    /// How members are probed: lock-free (default: /proc/locks, nothing
    /// taken), passive (momentary shared locks) or acquire (the family
    /// taken all-or-nothing for an instant, then released).
    #[arg(long, value_enum, default_value_t = ProbeMode::LockFree)]
    probe: ProbeMode,
    /// The same as `--probe passive` (kept for scripts).
    #[arg(long, conflicts_with = "probe")]
    passive: bool,
    #[command(flatten)]
    connect: super::connect::ConnectArgs,
}

impl CheckArgs {
    /// The probe asked for (`--passive` is `--probe passive`).
    fn requested_probe(&self) -> ProbeMode {
        if self.passive {
            ProbeMode::Passive
        } else {
            self.probe
        }
    }
}

/// The report as printed by `--json`: which probe ran (and why, if not
/// the one asked for), then the report's fields.
#[derive(serde::Serialize)]
struct JsonReport<'a> {
    #[serde(flatten)]
    probe: &'a ProbeChoice,
    #[serde(flatten)]
    report: &'a CheckReport,
}

/// Runs `locktop check` on the resolved state dir (or the reason none
/// could be resolved: with `--json` that too is a JSON answer).
pub async fn run(
    state_dir: Result<PathBuf, StateDirError>,
    explicit: bool,
    args: CheckArgs,
) -> anyhow::Result<ExitCode> {
    let (report, probe) = match checked(state_dir, explicit, &args).await {
        Ok(checked) => checked,
        Err(error) if args.json => {
            println!("{}", crate::text::to_json(&JsonFailure::from(&error))?);
            return Ok(ExitCode::from(EXIT_ERROR));
        }
        Err(error) => return Err(error.into()),
    };
    if args.json {
        let json = JsonReport {
            probe: &probe,
            report: &report,
        };
        println!("{}", crate::text::to_json(&json)?);
    } else {
        if let Some(why) = &probe.fallback {
            say!("locktop: probe {} ({why})", probe.runs.as_str());
        }
        for line in check::report_lines(&report, SystemTime::now()) {
            println!("{line}");
        }
    }
    Ok(if report.free {
        ExitCode::SUCCESS
    } else if report.deadlocked() {
        ExitCode::from(EXIT_DEADLOCK)
    } else {
        ExitCode::from(EXIT_BUSY)
    })
}

/// Why a check gave no report.
#[derive(Debug, thiserror::Error)]
enum CheckFailed {
    /// No usable state dir.
    #[error(transparent)]
    StateDir(#[from] StateDirError),
    /// The flags name no family.
    #[error(transparent)]
    NoFamily(#[from] FamilyArgsError),
    /// A member is invalid, or cannot be taken though nobody holds it.
    #[error(transparent)]
    Locks(#[from] LocksError),
    /// The service named by `--connect` cannot be followed.
    #[error(transparent)]
    Attach(anyhow::Error),
}

async fn checked(
    state_dir: Result<PathBuf, StateDirError>,
    explicit: bool,
    args: &CheckArgs,
) -> Result<(CheckReport, ProbeChoice), CheckFailed> {
    let state_dir = state_dir?;
    let engine_option = (args.requested_probe() != ProbeMode::LockFree).then_some("--probe");
    match args
        .connect
        .plan(&state_dir, explicit, engine_option)
        .await
        .map_err(CheckFailed::Attach)?
    {
        super::connect::Plan::Private { why } => {
            if let Some(why) = why
                && !args.json
            {
                say!("locktop: {}", crate::text::visible(&why));
            }
            crate::disk::state_dir::require_existing(&state_dir)?;
            let family = args.family.family()?;
            let probe = lock_free::choose(args.requested_probe(), &state_dir);
            let context = Context::new(state_dir);
            let report = check::check_family(&context, &family, probe.runs).await?;
            Ok((report, probe))
        }
        #[cfg(feature = "attach")]
        super::connect::Plan::Attached(attached) => {
            let family = args.family.family()?;
            let view = super::connect::settled(attached)
                .await
                .map_err(CheckFailed::Attach)?;
            let hello = view.link.hello();
            if !args.json {
                say!(
                    "locktop: {}",
                    crate::text::visible(&super::connect::attached_line(&view.link))
                );
            }
            let materializing = super::connect::service_threshold(&hello);
            // As a check here: one look's circle of waits is no deadlock
            // yet; the same circle DEADLOCK_AFTER later is, dated from
            // the first look.
            let first_at = SystemTime::now();
            let first = crate::operate::held::HeldView::of(view.held(), materializing)
                .looked_at(first_at, None);
            let mut view = view;
            let before = if first.waits().cycles().is_empty() {
                crate::operate::wait_for::WaitGraph::default()
            } else {
                let before = first.waits().clone();
                view.follow_for(crate::operate::wait_for::DEADLOCK_AFTER)
                    .await
                    .map_err(CheckFailed::Attach)?;
                before
            };
            let report = check::report_from_states(
                &hello.state_dir,
                &family,
                view.held(),
                &view.fold.watcher().problems,
                SystemTime::now(),
                materializing,
                &before,
            )?;
            Ok((report, ProbeChoice::as_asked(hello.probe)))
        }
    }
}

/// `check --json` when there is no report: `{"free":false,"error":{…}}`.
#[derive(serde::Serialize)]
struct JsonFailure {
    free: bool,
    error: JsonError,
}

#[derive(serde::Serialize)]
struct JsonError {
    /// `unavailable`, `invalid_member`, `bad_input` or `unattached` (the
    /// service `--connect` names cannot be followed).
    kind: &'static str,
    /// The member concerned (unavailable only).
    #[serde(skip_serializing_if = "Option::is_none")]
    member: Option<String>,
    /// The one-line reason, as printed without `--json`.
    message: String,
}

impl From<&CheckFailed> for JsonFailure {
    fn from(failure: &CheckFailed) -> Self {
        let (kind, member) = match failure {
            CheckFailed::Locks(LocksError::Unavailable { member, .. }) => {
                ("unavailable", Some(member.clone()))
            }
            CheckFailed::Locks(_) => ("invalid_member", None),
            CheckFailed::StateDir(_) | CheckFailed::NoFamily(_) => ("bad_input", None),
            CheckFailed::Attach(_) => ("unattached", None),
        };
        JsonFailure {
            free: false,
            error: JsonError {
                kind,
                member,
                message: failure.to_string(),
            },
        }
    }
}
