//! The `snapshot --json` document (its schema: docs/formats.md), as
//! `locktop snapshot`, `serve`'s `/snapshot.json` and `replay --at` write
//! it: streamed from borrowed keys, each held key with its verdict.

use std::io::Write;
use std::path::Path;
use std::time::SystemTime;

use crate::disk::key::{KeyKind, LockKey};
use crate::engine::{KeyState, ScanProblem};
use crate::liveness::lock_free::ProbeChoice;
use crate::operate::held::HeldView;
use crate::operate::verdict::Verdict;
use crate::operate::wait_for::{WaitGraph, WaitsDoc};
use crate::time_format;

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

/// The JSON document (schema in docs/formats.md).
#[derive(serde::Serialize)]
struct JsonSnapshot<'a, K> {
    state_dir: std::borrow::Cow<'a, str>,
    taken_at: String,
    #[serde(flatten)]
    probe: &'a ProbeChoice,
    keys: K,
    problems: &'a [ScanProblem],
    /// Who waits for whom among the held keys: cycles, chains, roots.
    waits: WaitsDoc,
}

/// The keys of a [`JsonSnapshot`], written one by one as the iterator
/// yields them: a million keys are never a million values in memory.
struct JsonKeys<I>(I);

impl<'a, I: Iterator<Item = JsonKey<'a>> + Clone> serde::Serialize for JsonKeys<I> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.0.clone())
    }
}

/// How a document's held keys are judged: spawns by `materializing`, at
/// `now`; a cycle of waits that `waits` (a live view's graph) already had
/// stands since it did there — without it, the keys are one look, whose
/// cycles are never called deadlocks.
#[derive(Debug, Clone, Copy)]
pub struct Judged<'a> {
    /// Spawns become suspects after this.
    pub materializing: std::time::Duration,
    /// When they are judged (the document's `taken_at`).
    pub now: SystemTime,
    /// The live view's wait-for graph, if there is one.
    pub waits: Option<&'a WaitGraph>,
}

/// Writes the `snapshot --json` document (schema in docs/formats.md) for
/// `keys` as they are at `judged.now` (verdicts judged then, `taken_at`),
/// one line. Streamed from borrowed data: no JSON value tree of every
/// key. `locktop serve` writes the same document from the live view,
/// `locktop replay --at` from a recording.
pub fn write_json<'a>(
    out: &mut impl Write,
    state_dir: &Path,
    probe: &ProbeChoice,
    keys: impl Iterator<Item = (&'a LockKey, &'a KeyState)> + Clone,
    problems: &[ScanProblem],
    judged: Judged<'_>,
) -> std::io::Result<()> {
    let Judged {
        materializing,
        now,
        waits,
    } = judged;
    let mut held = HeldView::of(keys.clone(), materializing);
    if let Some(waits) = waits {
        held = held.looked_at(now, Some(waits));
    }
    let waits = held.waits().doc(now);
    let keys = JsonKeys(keys.map(|(key, state)| JsonKey {
        kind: key.kind(),
        name: key.name(),
        dir: key.dir(),
        key: key.key(),
        state,
        verdict: held.judge(key, state, now),
    }));
    let doc = JsonSnapshot {
        state_dir: state_dir.to_string_lossy(),
        taken_at: time_format::rfc3339(now),
        probe,
        keys,
        problems,
        waits,
    };
    crate::text::write_json(&mut *out, &doc).map_err(std::io::Error::from)?;
    writeln!(out)
}
