//! `locktop snapshot`: scan + probe + holders once, then print a table (or
//! JSON) and exit 0. Free keys only with `--all`.

use std::collections::{HashMap, HashSet};
use std::io::{ErrorKind, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::SystemTime;

use anyhow::Context as _;

use crate::context::Context;
use crate::disk::key::{KeyKind, LockKey};
use crate::engine::{KeyState, Liveness, ScanProblem};
use crate::liveness::annotate::annotate_reading;
use crate::liveness::bulk;
use crate::liveness::probe::{ProbeMode, Prober};
use crate::liveness::proc_locks::LockIndex;
use crate::liveness::unlinked::{self, KnownInodes};
use crate::operate::verdict::{MATERIALIZING_AFTER, Role, Verdict, judge};
use crate::time_format;

/// Flags of `locktop snapshot`.
#[derive(Debug, clap::Args)]
pub struct SnapshotArgs {
    /// Print JSON (schema in the README) instead of a table.
    #[arg(long)]
    json: bool,
    /// Include free (stale) keys.
    #[arg(long)]
    all: bool,
    /// How to probe liveness.
    #[arg(long, value_enum, default_value_t = ProbeMode::Acquire)]
    probe: ProbeMode,
}

/// One claim in the JSON output.
#[derive(serde::Serialize)]
struct JsonKey<'a> {
    kind: KeyKind,
    name: &'a str,
    #[serde(serialize_with = "crate::time_format::lossy_path")]
    dir: &'a Path,
    key: &'a str,
    #[serde(flatten)]
    state: &'a KeyState,
    /// Why it is held and what to do (held keys only).
    verdict: Option<Verdict>,
}

/// The JSON document (schema in the README).
#[derive(serde::Serialize)]
struct JsonSnapshot<'a> {
    state_dir: std::borrow::Cow<'a, str>,
    taken_at: String,
    probe: &'static str,
    keys: Vec<JsonKey<'a>>,
    problems: &'a [ScanProblem],
}

/// A whole snapshot: keys (and problems) at one moment.
pub struct Snapshot {
    /// Every claim with its probed state, sorted by kind then name.
    pub keys: Vec<(LockKey, KeyState)>,
    /// Everything under the root that is not a claim.
    pub problems: Vec<ScanProblem>,
}

/// Takes a snapshot of `state_dir` (scan + probe in `mode` + holders): an
/// error if the state dir is missing, empty if its locks dir is.
pub async fn take(state_dir: &Path, mode: ProbeMode) -> anyhow::Result<Snapshot> {
    crate::disk::state_dir::require_existing(state_dir)?;
    let root = crate::locks::locks_root(state_dir);
    if std::fs::symlink_metadata(&root).is_err_and(|error| error.kind() == ErrorKind::NotFound) {
        // No agent has taken a lock under this state dir yet: nothing is
        // held, which is an answer, not an error (`check` says "free",
        // `watch` waits for the dir).
        return Ok(Snapshot {
            keys: Vec::new(),
            problems: Vec::new(),
        });
    }
    let report = crate::disk::scan::scan_root(state_dir)
        .await
        .with_context(|| {
            format!(
                "cannot read locks dir {}",
                crate::locks::locks_root(state_dir).display()
            )
        })?;
    let prober = Prober::new(Context::new(state_dir.to_path_buf()));
    let own = HashSet::from([std::process::id()]);
    let known = KnownInodes::new(report.claim_inodes);
    let mut keys = bulk::probe_all_unannotated(&prober, report.keys, mode).await;
    // One `/proc/locks` read names the holders and finds claim files held
    // though unlinked, which no key leads to.
    let index = annotate_reading(&mut keys, &own, &|| LockIndex::read().unwrap_or_default());
    keys.sort_by(|a, b| a.0.cmp(&b.0));
    let mut problems = report.problems;
    problems.extend(unlinked::find(state_dir, &index, &known));
    problems.sort();
    Ok(Snapshot { keys, problems })
}

/// Runs `locktop snapshot`.
pub async fn run(state_dir: PathBuf, args: SnapshotArgs) -> anyhow::Result<ExitCode> {
    let snapshot = take(&state_dir, args.probe).await?;
    let shown = snapshot
        .keys
        .iter()
        .filter(|(_, state)| args.all || state.liveness != Liveness::Free);
    let mut out = std::io::stdout().lock();
    let written = if args.json {
        let mut buffered = std::io::BufWriter::new(&mut out);
        write_json(
            &mut buffered,
            &state_dir,
            args.probe,
            shown,
            &snapshot.problems,
            MATERIALIZING_AFTER,
        )
        .and_then(|()| buffered.flush())
    } else {
        write_table(&mut out, shown, &snapshot.problems)
    };
    match written {
        Err(error) if error.kind() == std::io::ErrorKind::BrokenPipe => Ok(ExitCode::SUCCESS),
        other => {
            other?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// Writes the `snapshot --json` document (schema in the README) for
/// `keys`, one line. Streamed from borrowed data: no JSON value tree of
/// every key. `locktop serve` writes the same document from the live view.
pub fn write_json<'a>(
    out: &mut impl Write,
    state_dir: &Path,
    probe: ProbeMode,
    keys: impl Iterator<Item = &'a (LockKey, KeyState)> + Clone,
    problems: &[ScanProblem],
    materializing: std::time::Duration,
) -> std::io::Result<()> {
    let held: Vec<&(LockKey, KeyState)> = keys
        .clone()
        .filter(|(_, state)| state.liveness.is_held())
        .collect();
    let roles = roles(held.iter().map(|(key, state)| (key, state)));
    let now = SystemTime::now();
    let keys: Vec<JsonKey> = keys
        .map(|(key, state)| JsonKey {
            kind: key.kind,
            name: &key.name,
            dir: &key.dir,
            key: &key.key,
            state,
            verdict: judge(state, |pid| role(&roles, pid), now, materializing),
        })
        .collect();
    let doc = JsonSnapshot {
        state_dir: state_dir.to_string_lossy(),
        taken_at: time_format::rfc3339(now),
        probe: probe.as_str(),
        keys,
        problems,
    };
    serde_json::to_writer(&mut *out, &doc).map_err(std::io::Error::from)?;
    writeln!(out)
}

/// The keys each held PID holds, by kind and name (roles come from them).
pub fn roles<'a>(
    keys: impl Iterator<Item = (&'a LockKey, &'a KeyState)>,
) -> HashMap<u32, Vec<(KeyKind, &'a str)>> {
    let mut by_pid: HashMap<u32, Vec<(KeyKind, &str)>> = HashMap::new();
    for (key, state) in keys.filter(|(_, state)| state.liveness.is_held()) {
        for holder in &state.holders {
            by_pid
                .entry(holder.pid)
                .or_default()
                .push((key.kind, &key.name));
        }
    }
    by_pid
}

/// The role of `pid`, from what [`roles`] found it holds.
pub fn role(roles: &HashMap<u32, Vec<(KeyKind, &str)>>, pid: u32) -> Role {
    Role::from_kinds(roles.get(&pid).into_iter().flatten().copied())
}

fn write_table<'a>(
    out: &mut impl Write,
    keys: impl Iterator<Item = &'a (LockKey, KeyState)>,
    problems: &[ScanProblem],
) -> std::io::Result<()> {
    let now = SystemTime::now();
    writeln!(
        out,
        "{:<10} {:<8} {:>7} {:>6}  {:<40} COMMAND",
        "STATE", "KIND", "PID", "AGE", "NAME"
    )?;
    let mut count = 0;
    for (key, state) in keys {
        count += 1;
        let pid = state
            .holders
            .first()
            .map_or_else(|| "-".to_string(), |p| p.pid.to_string());
        let age = state
            .since
            .map_or_else(|| "-".to_string(), |since| time_format::age(since, now));
        let command = match (&state.error, state.holders.first()) {
            (Some(error), _) => error.clone(),
            (None, Some(process)) => process.command().to_string(),
            (None, None) => String::new(),
        };
        writeln!(
            out,
            "{:<10} {:<8} {:>7} {:>6}  {:<40} {}",
            state.liveness.as_str(),
            key.kind.as_str(),
            pid,
            age,
            key.name,
            command
        )?;
    }
    if count == 0 {
        writeln!(out, "(no live keys; --all shows free ones)")?;
    }
    for problem in problems {
        writeln!(
            out,
            "problem: {}: {}",
            problem.path.display(),
            problem.kind.describe()
        )?;
    }
    Ok(())
}
