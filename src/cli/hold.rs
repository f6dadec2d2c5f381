//! `locktop hold`: acquire a lock family through the `locks` module and
//! hold it until SIGTERM/SIGINT or stdin closes, then release and exit 0.
//!
//! Protocol on stdout, one JSON object per line (tests and the TUI read it):
//! `{"waiting":true,"busy":[…]}` (only with `--wait`, each time the family
//! is found busy), then `{"held":true,"pid":…,"locks":[…]}` once held, then
//! `{"released":true}` after releasing. Busy without `--wait`: the busy
//! members and their holders on stderr, exit 1.

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
    ensure_descriptors_for(coords.len())?;
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
                    eprintln!("{}", crate::text::visible(&busy_line(&member)));
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
    print_line_now(&HoldLine::held(names));
    stop.await;

    // Release in reverse acquisition order: tags, then the AIH lock.
    let mut all = acquired.into_locks();
    while let Some(lock) = all.pop() {
        lock.release()?;
    }
    print_line_now(&HoldLine::released());
    Ok(ExitCode::SUCCESS)
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
