//! `locktop watch`: stream liveness changes until SIGINT/SIGTERM — text
//! lines, or NDJSON with `--json` (`time, kind, name, from, to, pids`) —
//! and a line whenever a held key's verdict changes ([`verdicts`]).
//!
//! Invariant: a slow reader never stops the engine from being drained,
//! and never makes memory grow. The loop here only folds deltas into the
//! [`writer::PendingLines`]; a thread of its own writes stdout ([`writer`]).
//! While lines wait, each key keeps one pending line with its latest
//! state and a count of what it folded ([`queue`], which states the
//! bound). On SIGINT/SIGTERM `watch` stops receiving, flushes what is
//! pending for at most [`FLUSH_TIMEOUT`], and exits 0 whether or not the
//! reader took it. Safe in a pipe: a closed stdout (`| head`) ends the
//! command with exit 0.

use std::os::fd::AsFd;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use tokio::sync::oneshot;

use crate::context::Context;
use crate::engine;
use crate::liveness::process::HolderDetail;
use crate::stream::follow::{Follower, HeldOnly};
use crate::stream::pump::{Telling, pump};
use crate::stream::writer::{self, PendingLines};

/// How long `watch` keeps flushing pending lines after SIGINT/SIGTERM
/// before it exits anyway (a second signal ends it at once).
pub const FLUSH_TIMEOUT: Duration = Duration::from_secs(2);

/// Flags of `locktop watch`.
#[derive(Debug, clap::Args)]
pub struct WatchArgs {
    /// Print NDJSON instead of text.
    #[arg(long)]
    json: bool,
    /// Also print the initial state of every key (default: changes only).
    #[arg(long)]
    initial: bool,
    #[command(flatten)]
    engine: super::engine_args::EngineArgs,
    #[command(flatten)]
    connect: super::connect::ConnectArgs,
}

impl WatchArgs {
    /// `--connect`'s value, if given (empty: this host's service).
    pub fn connect_target(&self) -> Option<String> {
        self.connect.connect.clone()
    }
}

/// Runs `locktop watch`: on this host's engine, or following a service.
pub async fn run(state_dir: PathBuf, explicit: bool, args: WatchArgs) -> anyhow::Result<ExitCode> {
    let plan = args
        .connect
        .plan(&state_dir, explicit, args.engine.option_given())
        .await?;
    let (handle, follower, first_line) = match plan {
        super::connect::Plan::Private { why } => {
            super::watchable(&state_dir, explicit)?;
            if let Some(why) = why {
                say!("locktop watch: {}", crate::text::visible(&why));
            }
            let mut engine = args.engine.engine(&state_dir, "watch")?;
            // watch shows holders by PID only: their command lines,
            // units and parents are not read.
            engine.config.holder_detail = HolderDetail::PidOnly;
            engine.say();
            let follower = Follower::new(HeldOnly::default(), engine.materializing);
            let first_line = serde_json::json!({
                "time": crate::time_format::rfc3339(SystemTime::now()),
                "source": engine.source.word(),
                "probe": engine.probe.runs.as_str(),
                "source_fallback": engine.source.fallback,
            });
            let handle = engine::spawn(Context::new(state_dir), engine.config);
            (handle, follower, first_line)
        }
        #[cfg(feature = "attach")]
        super::connect::Plan::Attached(attached) => {
            let hello = attached.link.hello();
            say!(
                "locktop watch: {}",
                crate::text::visible(&super::connect::attached_line(&attached.link))
            );
            let follower = Follower::new(
                HeldOnly::default(),
                super::connect::service_threshold(&hello),
            );
            let first_line = serde_json::json!({
                "time": crate::time_format::rfc3339(SystemTime::now()),
                "source": hello.source,
                "probe": hello.probe.as_str(),
                "source_fallback": null,
                "attached": attached.link.target().to_string(),
                "state_dir": hello.state_dir,
            });
            (attached.handle, follower, first_line)
        }
    };
    let stop = super::stop_signal()?;
    let outbox = Arc::new(PendingLines::default());
    if args.json {
        // The first line says how liveness is learned (a reader that
        // cannot take it has stopped reading: the writer finds out).
        let _ =
            std::io::Write::write_all(&mut std::io::stdout(), format!("{first_line}\n").as_bytes());
    }
    let stdout = std::fs::File::from(std::io::stdout().as_fd().try_clone_to_owned()?);
    if let Some(direct) = writer::DirectOut::of(&stdout) {
        outbox.write_directly(direct, args.json);
    }
    let mut written = writer::spawn(outbox.clone(), args.json, stdout)?;
    let telling = Telling {
        json: args.json,
        initial: args.initial,
    };
    let drained = pump(handle, &outbox, telling, follower, stop, &mut written).await;
    if let Some(outcome) = drained {
        return exit_code(outcome);
    }
    // Stopped receiving (the engine is gone with its handle): flush what
    // is pending, but never wait on a reader for longer than the bound.
    outbox.close();
    let again = super::stop_signal()?;
    tokio::select! {
        outcome = &mut written => exit_code(writer_outcome(outcome)),
        () = tokio::time::sleep(FLUSH_TIMEOUT) => Ok(ExitCode::SUCCESS),
        () = again => Ok(ExitCode::SUCCESS),
    }
}

fn writer_outcome(
    outcome: Result<std::io::Result<()>, oneshot::error::RecvError>,
) -> std::io::Result<()> {
    outcome.unwrap_or_else(|_| Err(std::io::Error::other("the stdout writer stopped")))
}

/// Exit 0 when everything was written or the reader went away (EPIPE).
fn exit_code(outcome: std::io::Result<()>) -> anyhow::Result<ExitCode> {
    match outcome {
        Ok(()) => Ok(ExitCode::SUCCESS),
        Err(error) if error.kind() == std::io::ErrorKind::BrokenPipe => Ok(ExitCode::SUCCESS),
        Err(error) => Err(error.into()),
    }
}
