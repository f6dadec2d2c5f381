//! `locktop hold`: acquire a lock family through the `locks` module and
//! hold it until SIGTERM/SIGINT or stdin closes, then release and exit 0.
//!
//! Protocol on stdout, one JSON object per line (tests and the TUI read it):
//! `{"waiting":true,"busy":[…]}` (only with `--wait`, each time the family
//! is found busy), then `{"held":true,"pid":…,"locks":[…]}` once held, then
//! `{"released":true}` after releasing. Busy without `--wait`: the busy
//! members and their holders on stderr, exit 1.
//!
//! `--then-wait-tag T` / `--then-wait-aih A`: once the family is held,
//! also wait for that one key, as an agent relocating does — to take it
//! (the SDK's `wait_acquire`), or with `--then-watch` until it is
//! released (`wait_released`) — then print `{"waited":true,…}` and hold
//! on (what took it is released with the family). Two such holders make
//! a real deadlock: the demo's, and the wait-for graph's tests.

use std::path::PathBuf;
use std::process::ExitCode;

use super::{EXIT_BUSY, FamilyArgs};
use crate::context::Context;
use crate::locks;
use crate::operate::check::{busy_line, describe_busy};
use crate::operate::hold_protocol::HoldLine;

/// Flags of `locktop hold`.
#[derive(Debug, clap::Args)]
pub struct HoldArgs {
    #[command(flatten)]
    family: FamilyArgs,
    /// Wait until the whole family is free instead of failing when busy.
    #[arg(long)]
    wait: bool,
    /// Keep holding when stdin closes (default: stdin EOF releases, so a
    /// holder dies with the process that spawned it).
    #[arg(long)]
    ignore_stdin: bool,
    /// Once the family is held, also wait to take this tag (the SDK's
    /// `wait_acquire`), holding the family meanwhile.
    #[arg(long, value_name = "TAG", conflicts_with = "then_wait_aih")]
    then_wait_tag: Option<String>,
    /// Once the family is held, also wait to take this agent's instance
    /// lock, holding the family meanwhile.
    #[arg(long, value_name = "AIH")]
    then_wait_aih: Option<String>,
    /// With --then-wait-*: wait until that key is released (the SDK's
    /// `wait_released`) instead of taking it.
    #[arg(long)]
    then_watch: bool,
    /// With --then-wait-*: hold the family this many seconds (an agent's
    /// work) before that wait begins.
    #[arg(long, value_name = "SECONDS", default_value_t = 0.0, value_parser = seconds)]
    then_wait_after: f64,
}

/// A number of seconds, zero or more, that a duration can hold.
fn seconds(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(value) if std::time::Duration::try_from_secs_f64(value).is_ok() => Ok(value),
        _ => Err(format!("{text:?} is not a number of seconds (0 or more)")),
    }
}

/// Writes one protocol line to stdout and flushes it (readers wait on it).
fn print_line_now(line: &HoldLine) {
    use std::io::Write;
    let mut stdout = std::io::stdout().lock();
    let _ = writeln!(stdout, "{}", line.to_line()).and_then(|()| stdout.flush());
}

/// Runs `locktop hold`.
pub async fn run(state_dir: PathBuf, args: HoldArgs) -> anyhow::Result<ExitCode> {
    crate::disk::state_dir::require_existing(&state_dir)?;
    let family = args.family.family()?;
    let coords = locks::family_coords(&state_dir, &family)?;
    crate::disk::confine::ensure_coords_below_root(&state_dir, &coords)?;
    ensure_descriptors_for(coords.len() + 1)?;
    let then = then_wait(&state_dir, &args)?;
    let context = Context::new(state_dir.clone());
    let held = if args.wait {
        locks::wait_acquire_family(context.agent_locks(), &state_dir, &family, |busy| {
            print_line_now(&HoldLine::waiting(describe_busy(&state_dir, busy)));
        })
        .await?
    } else {
        match locks::try_acquire_family_checked(context.agent_locks(), &state_dir, &family).await? {
            Ok(locks) => locks,
            Err(busy) => {
                for member in describe_busy(&state_dir, &busy) {
                    say!("{}", crate::text::visible(&busy_line(&member)));
                }
                return Ok(ExitCode::from(EXIT_BUSY));
            }
        }
    };
    let acquired = locks::family::partition(family, held);
    let names: Vec<String> = acquired
        .aih
        .iter()
        .map(|(aih, _)| format!("instance {aih}"))
        .chain(
            acquired
                .tags
                .iter()
                .map(|lock| format!("tag {}", lock.key())),
        )
        .collect();
    // Handlers first: a supervisor may SIGTERM the moment it reads "held".
    let stop = stop_requested(args.ignore_stdin)?;
    tokio::pin!(stop);
    print_line_now(&HoldLine::held(names));
    let mut all = acquired.into_locks();
    if let Some((dir, key, label)) = then {
        let waited = async {
            tokio::time::sleep(std::time::Duration::from_secs_f64(args.then_wait_after)).await;
            if args.then_watch {
                objectiveai_sdk::lockfile::wait_released(&dir, &key)
                    .await
                    .map(|()| None)
            } else {
                locks::wait_acquire(context.agent_locks(), &dir, &key)
                    .await
                    .map(Some)
            }
        };
        tokio::select! {
            outcome = waited => {
                let taken = outcome?;
                let word = if taken.is_some() { "taken" } else { "released" };
                all.extend(taken);
                print_line_now(&HoldLine::waited(label, word));
                (&mut stop).await;
            }
            () = &mut stop => {}
        }
    } else {
        (&mut stop).await;
    }

    // Release in reverse acquisition order: the key waited for, tags,
    // then the AIH lock.
    while let Some(lock) = all.pop() {
        lock.release()?;
    }
    print_line_now(&HoldLine::released());
    Ok(ExitCode::SUCCESS)
}

/// The one key `--then-wait-*` names, its label, checked as `wait`
/// checks its key (below the root, openable); `None` without one.
fn then_wait(
    state_dir: &std::path::Path,
    args: &HoldArgs,
) -> anyhow::Result<Option<(PathBuf, String, String)>> {
    let family = match (&args.then_wait_aih, &args.then_wait_tag) {
        (Some(aih), _) => locks::Family::Hierarchy {
            aih: aih.clone(),
            tags: Vec::new(),
        },
        (None, Some(tag)) => locks::Family::Group(vec![tag.clone()]),
        (None, None) if args.then_watch || args.then_wait_after > 0.0 => {
            anyhow::bail!(
                "--then-watch and --then-wait-after need the key: --then-wait-tag or --then-wait-aih"
            )
        }
        (None, None) => return Ok(None),
    };
    let coords = locks::family_coords(state_dir, &family)?;
    crate::disk::confine::ensure_coords_below_root(state_dir, &coords)?;
    let Some((dir, key)) = coords.into_iter().next() else {
        anyhow::bail!("--then-wait-* names one key");
    };
    if locks::check_openable(&dir, &key).is_err()
        && std::fs::symlink_metadata(locks::escape::gate_path(&dir, &key)).is_ok()
    {
        return Err(locks::unavailable(state_dir, &family, &dir, &key).into());
    }
    let label = crate::disk::LockKey::from_coord(state_dir, &dir, &key).label();
    // Its own family's key would be waited for on this process's own gate
    // forever, where no monitor can see it.
    let family = args.family.family()?;
    if locks::family_coords(state_dir, &family)?.contains(&(dir.clone(), key.clone())) {
        anyhow::bail!("--then-wait-* names {label}, which this holder's family already holds");
    }
    Ok(Some((dir, key, label)))
}

/// Descriptors a holder needs besides its claims' (stdio, the runtime,
/// a check's probes).
const DESCRIPTOR_SLACK: u64 = 64;

/// Makes sure this process may keep `claims` claims open — two
/// descriptors each (gate and announce), held until release — raising its
/// soft open-file limit up to the hard one when needed. Past the hard
/// limit the SDK's opens would fail with EMFILE part-way through, which it
/// reports as "not acquired": every member after that would read busy,
/// though nobody holds it. So that is an error before anything is taken.
fn ensure_descriptors_for(claims: usize) -> anyhow::Result<()> {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    let needed = 2 * claims as u64 + DESCRIPTOR_SLACK;
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE)?;
    if needed <= soft {
        return Ok(());
    }
    if needed <= hard {
        setrlimit(Resource::RLIMIT_NOFILE, needed, hard)?;
        return Ok(());
    }
    anyhow::bail!(
        "{claims} locks need about {needed} open files, and this process may open at most {hard} (ulimit -Hn): hold fewer at once"
    )
}

/// Installs the SIGTERM/SIGINT handlers and (unless ignored) the stdin
/// reader NOW, and returns a future that resolves on the first of them.
fn stop_requested(ignore_stdin: bool) -> std::io::Result<impl std::future::Future<Output = ()>> {
    let signals = super::stop_signal()?;
    let (eof_tx, eof_rx) = tokio::sync::oneshot::channel::<()>();
    if !ignore_stdin {
        // A plain thread: a blocking stdin read must never delay exit.
        std::thread::spawn(move || {
            let mut sink = [0u8; 256];
            let mut stdin = std::io::stdin().lock();
            while std::io::Read::read(&mut stdin, &mut sink).is_ok_and(|n| n > 0) {}
            let _ = eof_tx.send(());
        });
    }
    Ok(async move {
        let stdin_closed = async {
            match eof_rx.await {
                Ok(()) => {}
                Err(_) => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = signals => {}
            _ = stdin_closed => {}
        }
    })
}
