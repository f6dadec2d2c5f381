//! `locktop snapshot`: scan + probe + holders once, then print a table (or
//! JSON) and exit 0. Free keys only with `--all`.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::SystemTime;

use crate::disk::key::LockKey;
use crate::engine::{KeyState, Liveness, ScanProblem};
use crate::liveness::ProcessInfo;
use crate::liveness::lock_free;
use crate::liveness::probe::ProbeMode;
use crate::liveness::snapshot::take;
use crate::operate::held::HeldView;
use crate::operate::verdict::MATERIALIZING_AFTER;
use crate::stream::snapshot::write_json;
use crate::time_format;
use crate::tui::fit::visible;

/// Flags of `locktop snapshot`.
#[derive(Debug, clap::Args)]
pub struct SnapshotArgs {
    /// Print JSON (schema in docs/formats.md) instead of a table.
    #[arg(long)]
    json: bool,
    /// Include free (stale) keys.
    #[arg(long)]
    all: bool,
    /// How to probe liveness: lock-free (default: /proc/locks, no lock
    /// taken), passive (momentary shared locks) or acquire (writes).
    #[arg(long, value_enum, default_value_t = ProbeMode::LockFree)]
    probe: ProbeMode,
    #[command(flatten)]
    connect: super::connect::ConnectArgs,
}

/// Runs `locktop snapshot`: a scan here, or the view of the service it
/// follows.
pub async fn run(
    state_dir: PathBuf,
    explicit: bool,
    args: SnapshotArgs,
) -> anyhow::Result<ExitCode> {
    if args.all && args.connect.connect.is_some() {
        anyhow::bail!(
            "--all lists free keys, which a service counts but does not send: not with --connect"
        );
    }
    let engine_option = if args.probe != ProbeMode::LockFree {
        Some("--probe")
    } else if args.all {
        // Free keys by name: a scan here.
        Some("--all")
    } else {
        None
    };
    match args
        .connect
        .plan(&state_dir, explicit, engine_option)
        .await?
    {
        super::connect::Plan::Private { why } => {
            if let Some(why) = why
                && !args.json
            {
                say!("locktop: {}", visible(&why));
            }
            scanned_here(state_dir, args).await
        }
        #[cfg(feature = "attach")]
        super::connect::Plan::Attached(attached) => {
            let view = super::connect::settled(attached).await?;
            let mut keys: Vec<(LockKey, KeyState)> = view
                .fold
                .keys()
                .iter()
                .filter(|(_, state)| !state.is_bare_free())
                .map(|(key, state)| (key.clone(), state.clone()))
                .collect();
            keys.sort_by(|a, b| a.0.cmp(&b.0));
            let hello = view.link.hello();
            if !args.json {
                say!(
                    "locktop: {}",
                    visible(&super::connect::attached_line(&view.link))
                );
            }
            let probe = lock_free::ProbeChoice::as_asked(hello.probe);
            let judged = crate::stream::snapshot::Judged {
                materializing: super::connect::service_threshold(&hello),
                now: SystemTime::now(),
                waits: None,
            };
            let shown = keys.iter().map(|(key, state)| (key, state));
            let written = print(
                &args,
                &hello.state_dir,
                &probe,
                shown,
                &view.fold.watcher().problems,
                judged,
            )
            .and_then(|()| {
                if args.json {
                    return Ok(());
                }
                let free = view.link.free().total();
                writeln!(
                    std::io::stdout(),
                    "({free} free keys when the service counted them at this connection: --no-connect lists them with --all)"
                )
            });
            finished(written)
        }
    }
}

/// A scan of `state_dir` here, printed.
async fn scanned_here(state_dir: PathBuf, args: SnapshotArgs) -> anyhow::Result<ExitCode> {
    let probe = lock_free::choose(args.probe, &state_dir);
    if probe.fallback.is_some() && !args.json {
        say!("locktop: probe {}", probe.describe());
    }
    let mut snapshot = take(&state_dir, probe.runs).await?;
    if !args.all {
        // Not listed: not sorted either (a million names).
        snapshot.keys.free.clear();
    }
    snapshot.keys.sort();
    let shown = snapshot
        .keys
        .iter_sorted()
        .filter(|(_, state)| args.all || state.liveness != Liveness::Free);
    let judged = crate::stream::snapshot::Judged {
        materializing: MATERIALIZING_AFTER,
        now: SystemTime::now(),
        waits: None,
    };
    finished(print(
        &args,
        &state_dir,
        &probe,
        shown,
        &snapshot.problems,
        judged,
    ))
}

/// Prints `keys` as a table or JSON.
fn print<'a>(
    args: &SnapshotArgs,
    state_dir: &std::path::Path,
    probe: &lock_free::ProbeChoice,
    keys: impl Iterator<Item = (&'a LockKey, &'a KeyState)> + Clone,
    problems: &[ScanProblem],
    judged: crate::stream::snapshot::Judged<'_>,
) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    if args.json {
        let mut buffered = std::io::BufWriter::new(&mut out);
        write_json(&mut buffered, state_dir, probe, keys, problems, judged)
            .and_then(|()| buffered.flush())
    } else {
        write_table(&mut out, keys, problems, terminal_width(), judged)
    }
}

/// Exit 0 once written, or when the reader went away (EPIPE).
fn finished(written: std::io::Result<()>) -> anyhow::Result<ExitCode> {
    match written {
        Err(error) if error.kind() == std::io::ErrorKind::BrokenPipe => Ok(ExitCode::SUCCESS),
        other => {
            other?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// The terminal's width when stdout is one (a table is cut to it).
pub fn terminal_width() -> Option<usize> {
    use std::io::IsTerminal;
    std::io::stdout()
        .is_terminal()
        .then(|| crossterm::terminal::size().ok())
        .flatten()
        .map(|(columns, _)| usize::from(columns))
}

/// The table: one line per key with its verdict as at `now`, spawns
/// judged with `materializing` (what needs
/// attention is visible without JSON); on a terminal each line is cut to
/// its width (a long name shortened in the middle, the command line at
/// its end), piped it is whole.
pub fn write_table<'a>(
    out: &mut impl Write,
    keys: impl Iterator<Item = (&'a LockKey, &'a KeyState)> + Clone,
    problems: &[ScanProblem],
    width: Option<usize>,
    judged: crate::stream::snapshot::Judged<'_>,
) -> std::io::Result<()> {
    let now = judged.now;
    let mut held = HeldView::of(keys.clone(), judged.materializing);
    if let Some(waits) = judged.waits {
        held = held.looked_at(now, Some(waits));
    }
    let fixed = format!(
        "{:<10} {:<8} {:>7} {:>6}  {:<10} ",
        "STATE", "KIND", "PID", "AGE", "VERDICT"
    );
    // The name's column: 40 wide, less on a narrow terminal (it keeps at
    // least half of what is left; the command gets the rest).
    let room = width.map(|w| w.saturating_sub(fixed.chars().count()));
    let name_width = room.map_or(40, |room| 40.min(room / 2).max(8));
    let cut = |line: String| match width {
        Some(width) => crate::tui::fit::cut_end(&line, width),
        None => line,
    };
    writeln!(
        out,
        "{}",
        cut(format!("{fixed} {:<name_width$} COMMAND", "NAME"))
    )?;
    let mut count = 0;
    for (key, state) in keys {
        count += 1;
        let pid = state
            .holders
            .first()
            .map_or_else(|| "-".to_string(), ProcessInfo::pid_text);
        let age = state
            .since
            .map_or_else(|| "-".to_string(), |since| time_format::age(since, now));
        let verdict = held
            .judge(key, state, now)
            .map_or("-", |verdict| verdict.short_word());
        let command = match (&state.error, state.holders.first()) {
            (Some(error), _) => error.clone(),
            (None, Some(process)) => format!("{}{}", process.command(), process.holder_mark()),
            (None, None) => String::new(),
        };
        // Names and command lines are anyone's text: control characters
        // are shown, never sent to the terminal.
        let command = visible(&command).into_owned();
        let name = match width {
            Some(_) => crate::tui::fit::fit(key.name(), name_width),
            None => visible(key.name()).into_owned(),
        };
        let line = format!(
            "{:<10} {:<8} {:>7} {:>6}  {:<10}  {:<name_width$} {}",
            state.liveness.as_str(),
            key.kind().as_str(),
            pid,
            age,
            verdict,
            name,
            command
        );
        writeln!(out, "{}", cut(line))?;
    }
    if count == 0 {
        writeln!(out, "(no live keys; --all shows free ones)")?;
    }
    for problem in problems {
        let line = format!(
            "problem: {}: {}",
            problem.path.display(),
            problem.kind.describe()
        );
        writeln!(out, "{}", visible(&line))?;
    }
    Ok(())
}
