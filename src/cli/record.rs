//! `locktop record`: journal a state dir's lock history (see
//! [`crate::journal`]) until SIGINT/SIGTERM — to a file, rotated by size
//! with `--max-size`, or to standard output.
//!
//! Invariants: one engine, probing as every monitor does (lock-free by
//! default: it takes no lock and writes nothing under the state dir);
//! the journal is written by the thread that drains the engine, one
//! `write` per change, so a reader that stalls (a full pipe, a slow disk)
//! holds the engine's deltas back, where the engine folds them per key:
//! memory stays bounded as `watch`'s does. SIGINT/SIGTERM are heard
//! whatever the reader does: the thread is asked to stop after its line,
//! and given at most [`super::watch::FLUSH_TIMEOUT`] (a second signal
//! ends it at once); a recording so stopped ends with its end line (the
//! time it stopped, whatever its last change). Verdict changes are judged as
//! `watch` judges them (the one follower, [`Follower`]) and recorded after the change that
//! caused them.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime};

use crate::context::Context;
use crate::engine::{self, Delta, EngineHandle};
use crate::journal::{Journal, Output, Recording};

use crate::operate::held::Change;
use crate::stream::follow::{Follower, HeldOnly, Judged};

/// How often the recording thread looks whether it is asked to stop.
const STOP_POLL: Duration = Duration::from_millis(100);

/// Flags of `locktop record`.
#[derive(Debug, clap::Args)]
pub struct RecordArgs {
    /// Write the journal to FILE (default: standard output). An existing
    /// FILE is never overwritten: refused, or with --max-size rotated
    /// into the set.
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
    /// Start a new file when the current one reaches SIZE (bytes, or with
    /// K, M, G: 100M); the old one becomes FILE.1, FILE.2, … Needs --out.
    #[arg(long, value_name = "SIZE", value_parser = parse_size, requires = "out")]
    max_size: Option<u64>,
    /// Files to keep when rotating, the current one included. Needs
    /// --max-size.
    #[arg(long, value_name = "N", requires = "max_size", default_value_t = crate::journal::writer::KEEP as u64, value_parser = clap::value_parser!(u64).range(1..))]
    keep: u64,
    #[command(flatten)]
    engine: super::engine_args::EngineArgs,
}

/// Reads a size: bytes, or a number with K, M or G (powers of 1024).
pub fn parse_size(text: &str) -> Result<u64, String> {
    let text = text.trim();
    let (number, unit) = match text.char_indices().find(|(_, c)| c.is_ascii_alphabetic()) {
        Some((at, _)) => text.split_at(at),
        None => (text, ""),
    };
    let shift = match unit.to_ascii_uppercase().trim_end_matches(['B', 'I']) {
        "" => 0,
        "K" => 10,
        "M" => 20,
        "G" => 30,
        _ => return Err(format!("bad size {text:?}: give bytes or K, M, G (100M)")),
    };
    let number: u64 = number
        .trim()
        .parse()
        .map_err(|_| format!("bad size {text:?}: give bytes or K, M, G (100M)"))?;
    number
        .checked_mul(1 << shift)
        .filter(|size| *size >= 4096)
        .ok_or_else(|| format!("bad size {text:?}: at least 4K"))
}

/// Runs `locktop record`.
pub async fn run(state_dir: PathBuf, args: RecordArgs) -> anyhow::Result<ExitCode> {
    let engine = args.engine.engine(&state_dir, "record")?;
    engine.say();
    let follower = Follower::new(HeldOnly::default(), engine.materializing);
    let output = match args.out {
        Some(path) => Output::File {
            path,
            max_size: args.max_size,
            keep: args.keep as usize,
        },
        None => Output::Stdout,
    };
    let journal = Journal::create(
        output,
        Recording {
            state_dir: state_dir.clone(),
            probe: engine.probe.runs,
        },
    )?
    .with_materializing_after(engine.materializing);
    let stop = super::stop_signal()?;
    let handle = engine::spawn(Context::new(state_dir), engine.config);
    let recorder = Recorder::new(JournalWriter::new(journal), follower);
    let stopping = Arc::new(AtomicBool::new(false));
    let (done, finished) = tokio::sync::oneshot::channel();
    let runtime = tokio::runtime::Handle::current();
    let flag = stopping.clone();
    // The journal is written by a thread of its own: a reader that stops
    // reading (a full pipe) blocks that thread, never the signal below.
    std::thread::Builder::new()
        .name("locktop-record".into())
        .spawn(move || {
            let mut recorder = recorder;
            let recorded = recorder
                .drain(handle, &runtime, &flag)
                .and_then(|()| recorder.finish());
            let _ = done.send(recorded);
        })?;
    tokio::pin!(finished);
    let outcome = tokio::select! {
        outcome = &mut finished => outcome,
        () = stop => {
            // Let the line being written end whole, if the reader takes
            // it; never wait on a reader for longer than the bound.
            stopping.store(true, Ordering::Relaxed);
            let again = super::stop_signal()?;
            tokio::select! {
                outcome = &mut finished => outcome,
                () = tokio::time::sleep(super::watch::FLUSH_TIMEOUT) => Ok(Ok(())),
                () = again => Ok(Ok(())),
            }
        }
    };
    let outcome =
        outcome.unwrap_or_else(|_| Err(std::io::Error::other("the recording thread stopped")));
    match outcome {
        Err(error) if error.kind() == std::io::ErrorKind::BrokenPipe => Ok(ExitCode::SUCCESS),
        Err(error) => Err(anyhow::anyhow!("cannot write the journal: {error}")),
        Ok(()) => Ok(ExitCode::SUCCESS),
    }
}

/// A journal, and whether the first full scan is in it: what `record`
/// and `serve --journal` write through. Verdict changes are recorded
/// only once it is (those of the first state are the checkpoint's to
/// tell: a replay judges them from it).
pub struct JournalWriter {
    journal: Journal,
    scanned: bool,
}

impl JournalWriter {
    /// Writes into `journal`, from its start.
    pub fn new(journal: Journal) -> Self {
        Self {
            journal,
            scanned: false,
        }
    }

    /// Records one delta and the verdict `changes` it caused (its own
    /// key's: [`crate::stream::follow::Followed::changes`]).
    pub fn record(&mut self, delta: Delta, changes: Vec<Change>) -> std::io::Result<()> {
        let first_scan_done = matches!(delta, Delta::Synced { .. });
        let at = match &delta {
            Delta::Key { at, .. } | Delta::Removed { at, .. } => *at,
            _ => SystemTime::now(),
        };
        self.journal.record(delta)?;
        self.record_verdicts(changes, at)?;
        self.scanned |= first_scan_done;
        Ok(())
    }

    /// Records verdict `changes` found `at` without a delta of their own
    /// (a burst settled, the clock moved).
    pub fn record_verdicts(&mut self, changes: Vec<Change>, at: SystemTime) -> std::io::Result<()> {
        if !self.scanned {
            return Ok(());
        }
        for change in changes {
            self.journal
                .record_verdict(&change.key, change.from, change.to.as_ref(), at)?;
        }
        Ok(())
    }

    /// Why the journal cannot be written, while it cannot.
    #[cfg(feature = "serve")]
    pub fn failure(&self) -> Option<&crate::journal::Failure> {
        self.journal.failure()
    }

    /// Writes again after a failure (see [`Journal::resume`]).
    #[cfg(feature = "serve")]
    pub fn resume(&mut self) -> std::io::Result<()> {
        self.journal.resume()
    }

    /// Bytes written so far.
    #[cfg(feature = "serve")]
    pub fn bytes_written(&self) -> u64 {
        self.journal.bytes_written()
    }

    /// Ends the journal with its end line: the recording went on until
    /// now (a clean stop; see [`Journal::finish`]).
    pub fn finish(self) -> std::io::Result<()> {
        self.journal.finish()
    }
}

/// `record`'s journal and the follower it judges verdicts with.
struct Recorder {
    writer: JournalWriter,
    follower: Follower<HeldOnly>,
}

impl Recorder {
    /// Records into `writer`, judging verdicts with `follower`.
    fn new(writer: JournalWriter, follower: Follower<HeldOnly>) -> Self {
        Self { writer, follower }
    }

    /// Records the engine's deltas until `stopping` is set or the engine
    /// ends, on the calling (non-async) thread, waiting on `runtime`;
    /// judges held keys again when a burst settles and once a second.
    fn drain(
        &mut self,
        mut handle: EngineHandle,
        runtime: &tokio::runtime::Handle,
        stopping: &AtomicBool,
    ) -> std::io::Result<()> {
        while !stopping.load(Ordering::Relaxed) {
            if let Some(judged) = self.follower.judge(SystemTime::now()) {
                self.record_judged(judged)?;
            }
            // Wake for the next judgement, and at least every STOP_POLL
            // to see `stopping`.
            let until_due = self.follower.due().map_or(Duration::ZERO, |due| {
                due.duration_since(SystemTime::now()).unwrap_or_default()
            });
            let wake = tokio::time::Instant::now() + until_due.min(STOP_POLL);
            let next = runtime
                .block_on(async { tokio::time::timeout_at(wake, handle.deltas.recv()).await });
            match next {
                Ok(Some(delta)) => self.delta(delta)?,
                Ok(None) => return Ok(()),
                Err(_) => {}
            }
        }
        Ok(())
    }

    fn finish(self) -> std::io::Result<()> {
        self.writer.finish()
    }

    /// Records one delta and the verdict changes it caused. The verdicts
    /// of the first state are the checkpoint's to tell (a replay judges
    /// them from it).
    fn delta(&mut self, delta: Delta) -> std::io::Result<()> {
        let followed = self.follower.apply(delta.clone());
        if let Some(settled) = followed.settled {
            self.record_judged(settled)?;
        }
        self.writer.record(delta, followed.changes)
    }

    /// Records verdict changes judged without a delta of their own.
    fn record_judged(&mut self, judged: Judged) -> std::io::Result<()> {
        let at = judged.at.unwrap_or_else(SystemTime::now);
        self.writer.record_verdicts(judged.changes, at)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_are_bytes_or_binary_units() {
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("100M"), Ok(100 << 20));
        assert_eq!(parse_size("1G"), Ok(1 << 30));
        assert_eq!(parse_size("64k"), Ok(64 << 10));
        assert_eq!(parse_size("2MiB"), Ok(2 << 20));
        for bad in ["", "M", "12X", "1K", "-5M", "1.5G"] {
            assert!(parse_size(bad).is_err(), "{bad}");
        }
    }
}
