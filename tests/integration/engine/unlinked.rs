//! A claim file unlinked while a live process holds it (what the SDK
//! 2.2.16 create race does: `try_create_locked` unlinks a new gate another
//! process locked in between): the path reads free, yet that process
//! believes it holds the key. The periodic sweep reports it as a
//! `held_unlinked` problem naming the PID and the claim, for as long as
//! that process lives — and never a lock on an unlinked file that is no
//! claim file under the locks root.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::common::engine::{Engine, View, hold, tag};
use crate::common::flock::{FlockGroup, flock_chain};
use crate::common::{serial, state_in_tempdir};
use locktop::disk::{ClaimFile, KeyKind};
use locktop::engine::{Liveness, ScanProblemKind};
use locktop::liveness::probe::ProbeMode;
use locktop::locks::agent_tag_lock;
use locktop::locks::escape::gate_path;

/// Short enough that a test waits a few sweeps, long enough not to starve
/// a 2-core machine.
const SWEEP: Duration = Duration::from_millis(400);

/// The `held_unlinked` problems of the view: (path, pid, kind, name, file).
fn unlinked(view: &View) -> Vec<(PathBuf, u32, KeyKind, String, ClaimFile)> {
    view.problems()
        .iter()
        .filter_map(|problem| match &problem.kind {
            ScanProblemKind::HeldUnlinked(held) => Some((
                problem.path.clone(),
                held.pid,
                held.kind,
                held.name.clone(),
                held.file,
            )),
            _ => None,
        })
        .collect()
}

/// The gate of tag `name` under `state`.
fn tag_gate(state: &Path, name: &str) -> PathBuf {
    let (dir, key) = agent_tag_lock(state, name);
    gate_path(&dir, &key)
}

#[tokio::test(flavor = "multi_thread")]
async fn an_unlinked_gate_its_holder_keeps_is_reported_until_the_holder_exits() {
    let _serial = serial().await;
    let (_tmp, state) = state_in_tempdir();
    let mut engine = Engine::start(&state, ProbeMode::Acquire, SWEEP);
    engine.synced().await;
    let mut holder = hold(&state, &["--tag", "x"]);
    let pid = holder.pid();
    engine
        .wait_view("x held by the child", |view| {
            view.is(&tag("x"), Liveness::Live, &[pid])
        })
        .await;

    // What the SDK's create race leaves: the holder keeps a gate that is
    // no longer at its path.
    let gate = tag_gate(&state, "x");
    std::fs::remove_file(&gate).unwrap();
    let expected = vec![(
        gate.clone(),
        pid,
        KeyKind::Tag,
        "x".to_string(),
        ClaimFile::Gate,
    )];
    engine
        .wait_view("the unlinked gate reported with its holder", |view| {
            unlinked(view) == expected
        })
        .await;
    // Found by a sweep (the wait is bounded by the common correctness
    // timeout, 25 periods), while the key reads the truth about its path:
    // not held (here: gone, its gate is).
    assert!(
        !engine
            .view
            .liveness(&tag("x"))
            .is_some_and(Liveness::is_held),
        "the path is not held: {:?}",
        engine.view.get(&tag("x"))
    );
    let described = engine
        .view
        .problems()
        .iter()
        .find(|p| matches!(p.kind, ScanProblemKind::HeldUnlinked(_)))
        .unwrap()
        .kind
        .describe();
    assert!(
        described.contains(&format!("pid {pid} "))
            && described.contains("tag \"x\"")
            && described.contains("unlinked"),
        "{described}"
    );

    // It lasts as long as the holder: it goes at a sweep after (no event
    // touches it: the exit's events are on the announce).
    crate::common::engine::blocking(|| holder.kill());
    engine
        .wait_view("the problem gone with its holder", |view| {
            unlinked(view).is_empty()
        })
        .await;
}

/// Decision: a lock on an unlinked file that is no claim file under the
/// locks root — named like a gate but outside the root, or under the root
/// but not named like a claim — is not reported at all (not even as
/// foreign): it is no SDK claim, and once unlinked it is nowhere in the
/// tree. The real claim beside them is reported, so the check ran.
#[tokio::test(flavor = "multi_thread")]
async fn a_lock_on_an_unlinked_file_that_is_no_claim_file_is_not_reported() {
    let _serial = serial().await;
    let (tmp, state) = state_in_tempdir();
    let tags = tag_gate(&state, "y").parent().unwrap().to_path_buf();
    std::fs::create_dir_all(&tags).unwrap();
    let foreign = [
        tmp.path().join("x.lock"),
        state.join("x.lock"),
        tags.join("notes.txt"),
        tags.join("bad%ZZ.lock"),
    ];
    let flocks: Vec<FlockGroup> = foreign
        .iter()
        .map(|file| {
            std::fs::write(file, b"").unwrap();
            let flock = flock_chain(std::slice::from_ref(file)).wait_locked(file);
            std::fs::remove_file(file).unwrap();
            flock
        })
        .collect();
    let holder = hold(&state, &["--tag", "y"]);
    let gate = tag_gate(&state, "y");
    std::fs::remove_file(&gate).unwrap();

    let mut engine = Engine::start(&state, ProbeMode::Passive, SWEEP);
    engine.synced().await;
    let expected = vec![(
        gate,
        holder.pid(),
        KeyKind::Tag,
        "y".to_string(),
        ClaimFile::Gate,
    )];
    engine
        .wait_view("only the claim's unlinked gate", |view| {
            unlinked(view) == expected
        })
        .await;
    // And still only it after more sweeps.
    let sweeps = engine.sweeps();
    while engine.sweeps() < sweeps + 2 {
        engine.recv_until(tokio::time::Instant::now() + SWEEP).await;
    }
    engine.drain();
    assert_eq!(
        unlinked(&engine.view),
        expected,
        "{:#?}",
        engine.view.problems()
    );
    drop(flocks);
}
