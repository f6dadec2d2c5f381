//! `locktop replay FILE…`: a recording (see [`crate::journal`]) played
//! back — the monitor on it, or with `--at` the snapshot at a time (in
//! `snapshot`'s format), or with `--from`/`--to` the changes in a window
//! (in `watch`'s format).
//!
//! Invariants: a replay reads the journal and nothing else (no probe, no
//! `/proc`, no state dir: the recording is the only truth it has, and the
//! host may be another); what it prints is folded by the same rule the
//! live monitor folds by; a time outside what was recorded is said so
//! (before the first complete view: an error; after the end or between
//! two recordings: a note on stderr naming what the answer is); a time
//! whose state the files cannot tell — in a missing part, or after a
//! damaged line before the next whole checkpoint — is refused, never
//! answered; a window with such time in it is printed with a note for
//! each hole and exits [`EXIT_INCOMPLETE`].

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::SystemTime;

use anyhow::bail;

use crate::engine::Liveness;
use crate::journal::JournalSet;
use crate::journal::format::Entry;
use crate::journal::reader::entry_time;
use crate::journal::reader::{Gap, GapWhy};
use crate::journal::time_arg;
use crate::liveness::lock_free::ProbeChoice;
use crate::operate::verdict::MATERIALIZING_AFTER;
use crate::time_format::rfc3339;

use crate::stream::follow::Follower;
use crate::stream::format as watch_format;
use crate::stream::queue::{Line, Report};

/// `--from/--to`'s exit status when part of the window is unknown (a
/// missing part, damaged lines): what is known is printed, each hole is
/// said on stderr.
pub const EXIT_INCOMPLETE: u8 = 3;

/// Flags of `locktop replay`.
#[derive(Debug, clap::Args)]
pub struct ReplayArgs {
    /// Journal files, or directories of them: one recording's rotated
    /// parts, or several recordings of one state dir (put in time order
    /// by their headers).
    #[arg(required = true, value_name = "FILE")]
    files: Vec<PathBuf>,
    /// Print the snapshot at TIME (RFC 3339, or a time ago: -2h) in
    /// `snapshot`'s format, and exit.
    #[arg(long, value_name = "TIME", allow_hyphen_values = true, conflicts_with_all = ["from", "to"])]
    at: Option<String>,
    /// Print the changes from T1 (default: the recording's start) in
    /// `watch`'s format, and exit.
    #[arg(long, value_name = "T1", allow_hyphen_values = true)]
    from: Option<String>,
    /// … up to T2 (default: the recording's end).
    #[arg(long, value_name = "T2", allow_hyphen_values = true)]
    to: Option<String>,
    /// JSON: `snapshot --json`'s document with --at, `watch --json`'s
    /// lines with --from/--to. Needs one of them.
    #[arg(long)]
    json: bool,
    /// With --at: include free keys (not with --from/--to: a window
    /// prints every key's changes).
    // `requires` alone is waived by clap when a given option conflicts
    // with the required one (--from with --at): refused by name instead.
    #[arg(long, requires = "at", conflicts_with_all = ["from", "to"])]
    all: bool,
}

/// Runs `locktop replay`.
pub async fn run(args: ReplayArgs) -> anyhow::Result<ExitCode> {
    let now = SystemTime::now();
    let at = args
        .at
        .as_deref()
        .map(|t| time_arg::parse(t, now))
        .transpose()?;
    let from = args
        .from
        .as_deref()
        .map(|t| time_arg::parse(t, now))
        .transpose()?;
    let to = args
        .to
        .as_deref()
        .map(|t| time_arg::parse(t, now))
        .transpose()?;
    if args.json && at.is_none() && from.is_none() && to.is_none() {
        bail!("--json needs --at or --from/--to (the monitor replays on a terminal)");
    }
    let set = tokio::task::block_in_place(|| JournalSet::open(&args.files))?;
    warn(&set);
    let result = if let Some(at) = at {
        tokio::task::block_in_place(|| print_at(&set, at, args.json, args.all))
    } else if from.is_some() || to.is_some() {
        tokio::task::block_in_place(|| print_changes(&set, from, to, args.json))
    } else {
        crate::tui::replay::run(set)
            .await
            .map(|()| ExitCode::SUCCESS)
    };
    match result {
        Err(error)
            if error
                .downcast_ref::<std::io::Error>()
                .is_some_and(|error| error.kind() == std::io::ErrorKind::BrokenPipe) =>
        {
            Ok(ExitCode::SUCCESS)
        }
        other => other,
    }
}

/// Prints what the reader skipped, one line each.
fn warn(set: &JournalSet) {
    for warning in set.take_warnings() {
        say!(
            "locktop replay: warning: {}",
            crate::text::visible(&warning.to_string())
        );
    }
}

/// How the recording ended, for a note past its end.
fn how_it_ended(set: &JournalSet) -> &'static str {
    if set.stopped_cleanly() {
        "it was stopped then"
    } else {
        "its last line; no end line follows it: not stopped cleanly (killed, a crash, a full disk), or still recording"
    }
}

/// What a gap's note says: why nothing is known in it.
fn gap_words(gap: &Gap) -> String {
    match &gap.why {
        GapWhy::Missing(missing) => missing.to_string(),
        GapWhy::NotRecorded(why) => format!(
            "nothing was recorded from {} to {}{}",
            rfc3339(gap.from),
            rfc3339(gap.to),
            why.as_deref()
                .map(|why| format!(" ({})", crate::text::visible(why)))
                .unwrap_or_default()
        ),
    }
}

/// `--at`: the snapshot at `at`.
fn print_at(set: &JournalSet, at: SystemTime, json: bool, all: bool) -> anyhow::Result<ExitCode> {
    let replayed = set.state_at(at)?;
    warn(set);
    if let Some(doubt) = replayed.doubt {
        bail!(
            "cannot tell the state at {}: {}",
            rfc3339(at),
            set.doubt_words(&doubt)
        );
    }
    // Past what was recorded, the state is the last one recorded, judged
    // (ages, verdicts, `taken_at`) as of then: time nobody recorded makes
    // no verdict.
    let end = set.end()?;
    let judged_at = if set.past_end(at)? {
        say!(
            "locktop replay: note: the recording ends at {} ({}); this is the last state it recorded, as of then",
            rfc3339(end),
            how_it_ended(set)
        );
        end
    } else if let Some(gap) = set.gap_at(at)? {
        if let GapWhy::Missing(missing) = gap.why {
            bail!("cannot tell the state at {}: {missing}", rfc3339(at));
        }
        say!(
            "locktop replay: note: {}; this is the state at {}",
            gap_words(&gap),
            rfc3339(gap.from)
        );
        gap.from
    } else {
        at
    };
    // A cycle of waits is judged as the live monitor judged it: looked at
    // once the rule's timeout before, and again now (one look alone
    // could not tell a deadlock).
    let earlier = judged_at
        .checked_sub(crate::operate::wait_for::DEADLOCK_AFTER)
        .and_then(|before| Some((before, set.state_at(before).ok()?)));
    let earlier = earlier.map(|(before, replayed)| {
        let held = replayed
            .state
            .keys()
            .iter()
            .filter(|(_, s)| s.liveness.is_held());
        crate::operate::wait_for::WaitGraph::build(held, before, None)
    });
    let judged = |materializing| crate::stream::snapshot::Judged {
        materializing,
        now: judged_at,
        waits: earlier.as_ref(),
    };
    let state = &replayed.state;
    let mut keys: Vec<_> = state
        .keys()
        .iter()
        .filter(|(_, state)| all || state.liveness != Liveness::Free)
        .collect();
    keys.sort_unstable_by(|a, b| a.0.cmp(b.0));
    let header = set.header();
    let materializing = materializing_of(header);
    let problems = &state.watcher().problems;
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    if json {
        let probe = ProbeChoice {
            requested: header.probe,
            runs: header.probe,
            fallback: None,
        };
        crate::stream::snapshot::write_json(
            &mut out,
            &header.state_dir,
            &probe,
            keys.iter().copied(),
            problems,
            judged(materializing),
        )?;
    } else {
        super::snapshot::write_table(
            &mut out,
            keys.iter().copied(),
            problems,
            super::snapshot::terminal_width(),
            judged(materializing),
        )?;
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

/// `--from`/`--to`: the changes in the window, as `watch` prints them.
fn print_changes(
    set: &JournalSet,
    from: Option<SystemTime>,
    to: Option<SystemTime>,
    json: bool,
) -> anyhow::Result<ExitCode> {
    let start_time = set.start();
    if let Some(asked) = from
        && asked < start_time
    {
        say!(
            "locktop replay: note: the recording starts at {}; the changes are from then",
            rfc3339(start_time)
        );
    }
    let from = from.unwrap_or(start_time).max(start_time);
    let asked_to = to;
    let to = to.unwrap_or(SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1 << 40));
    if to < from {
        bail!(
            "--to {} is before the window's start {} (--from, or the recording's start)",
            rfc3339(to),
            rfc3339(from)
        );
    }
    // The state just before the window: its first millisecond's changes
    // are printed, not folded in.
    let before = from
        .checked_sub(std::time::Duration::from_millis(1))
        .filter(|before| *before >= start_time);
    let start = match before {
        Some(before) => set.state_at(before)?,
        None => set.at_start()?,
    };
    // Every hole in the window is said before its lines; past the end,
    // why nothing follows.
    let mut incomplete = start.doubt.is_some();
    if let Some(doubt) = start.doubt {
        say!(
            "locktop replay: note: the state at the window's start is unsure: {}",
            crate::text::visible(&set.doubt_words(&doubt))
        );
    }
    for gap in set.gaps_within(from, to) {
        if let GapWhy::Missing(missing) = &gap.why {
            incomplete = true;
            // Said here, before the lines: not again as the reader's
            // warning when it crosses the gap.
            set.mark_said(missing.to_string());
        }
        say!("locktop replay: note: {}", gap_words(&gap));
    }
    let end = set.end()?;
    if set.past_end(asked_to.unwrap_or(from))? {
        say!(
            "locktop replay: note: the recording ends at {} ({}); nothing after it was recorded",
            rfc3339(end),
            how_it_ended(set)
        );
    }
    // Followed as `watch` follows, from the state at the start.
    let mut follower = Follower::resumed(start.state, materializing_of(set.header()), from);
    let mut lines = set.lines_from(start.next)?;
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let mut printed = 0usize;
    while let Some(entry) = lines.next_entry(follower.keep())? {
        // Damage found on the way to this entry counts even when a whole
        // checkpoint on the way made the state sure again.
        incomplete |= lines.doubt_before_entry().is_some();
        let Some(at) = entry_time(&entry) else {
            continue;
        };
        if at > to {
            break;
        }
        if at < from {
            // Before the window (the start's own millisecond): folded,
            // not printed.
            if let Entry::Change { delta, .. } = entry {
                follower.apply(delta);
            }
            continue;
        }
        let report = match entry {
            Entry::Change { delta, .. } => {
                let repeat = follower.apply(delta.clone()).repeat;
                crate::stream::report_of(delta, repeat).map(|(report, _)| report)
            }
            Entry::Verdict { key, from, to, .. } => Some(Report::Verdict { key, from, to }),
            _ => None,
        };
        let Some(report) = report else { continue };
        let line = Line {
            report,
            at,
            folded: 0,
        };
        if let Some(text) = watch_format::line(&line, json) {
            writeln!(out, "{text}")?;
            printed += 1;
        }
    }
    out.flush()?;
    warn(set);
    if printed == 0 && !incomplete && from <= end {
        say!(
            "locktop replay: note: no change was recorded from {} to {}",
            rfc3339(from),
            rfc3339(to.min(end))
        );
    }
    if incomplete {
        say!(
            "locktop replay: note: part of the window is unknown (said above): the changes printed are those the files hold"
        );
        return Ok(ExitCode::from(EXIT_INCOMPLETE));
    }
    Ok(ExitCode::SUCCESS)
}

/// The recorder's `--materializing-after`.
fn materializing_of(header: &crate::journal::format::Header) -> std::time::Duration {
    std::time::Duration::try_from_secs_f64(header.materializing_after)
        .unwrap_or(MATERIALIZING_AFTER)
}
