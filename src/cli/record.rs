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

use crate::context::Context;
use crate::engine;
use crate::journal::{Journal, Output, Recording};

use crate::journal::recorder::{JournalWriter, Recorder};
use crate::stream::follow::{Follower, HeldOnly};

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
