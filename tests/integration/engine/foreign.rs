//! Foreign names under the locks root: junk files, malformed escapes,
//! symlinks, non-UTF-8 names, orphan announces. They are reported as
//! problems (never dropped, never a crash), the engine keeps working, and
//! nothing is ever followed through a symlink.

use std::collections::BTreeSet;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use crate::common;
use crate::common::engine::{Engine, NO_SWEEP, blocking, held_names, hold, locks_dir, tags_dir};
use crate::common::{serial, state_in_tempdir};
use locktop::engine::{Delta, EngineCommand, Liveness, ScanProblem, ScanProblemKind};
use locktop::liveness::probe::ProbeMode;

fn touch(path: &Path) {
    std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    std::fs::write(path, b"").expect("write");
}

/// Plants one of each foreign name; returns the problems they must cause.
fn plant_foreign_names(state: &Path, suffix: &str) -> BTreeSet<ScanProblem> {
    let tags = tags_dir(state);
    let instances = locks_dir(state).join("agents/instances/cli");
    let problem = |path: PathBuf, kind| ScanProblem { path, kind };
    let junk = tags.join(format!("README{suffix}.txt"));
    let notes = instances.join(format!("notes{suffix}"));
    let bad = tags.join(format!("bad%ZZ{suffix}.lock"));
    let orphan = tags.join(format!("lonely{suffix}.live.lock"));
    let link = tags.join(format!("link{suffix}"));
    let mut raw = b"\xff\xfe".to_vec();
    raw.extend_from_slice(suffix.as_bytes());
    raw.extend_from_slice(b".lock");
    let non_utf8 = tags.join(OsStr::from_bytes(&raw));
    for path in [&junk, &notes, &bad, &orphan, &non_utf8] {
        touch(path);
    }
    std::os::unix::fs::symlink("/etc", &link).expect("symlink");
    BTreeSet::from([
        problem(junk, ScanProblemKind::ForeignFile),
        problem(notes, ScanProblemKind::ForeignFile),
        problem(bad, ScanProblemKind::MalformedEscape),
        problem(orphan, ScanProblemKind::OrphanAnnounce),
        problem(link, ScanProblemKind::Symlink),
        problem(non_utf8, ScanProblemKind::NonUtf8Name),
    ])
}

/// 6. Problems present at start are listed by `Delta::Problems`; more
///    appearing while watching neither crash the engine nor stop it seeing
///    a holder, and a rescan lists them too.
#[tokio::test(flavor = "multi_thread")]
async fn foreign_names_are_listed_as_problems_and_the_engine_keeps_working() {
    let _serial = serial().await;
    for mode in [ProbeMode::LockFree, ProbeMode::Acquire, ProbeMode::Passive] {
        let (_tmp, state) = state_in_tempdir();
        let mut stale = hold(&state, &["--aih", "cli/daemon/x-1", "--tag", "real tag"]);
        blocking(|| stale.close_stdin());
        touch(&locks_dir(&state).join("plugins-daemon/main.lock"));
        let mut expected = plant_foreign_names(&state, "");

        let mut engine = Engine::start(&state, mode, NO_SWEEP);
        engine.synced().await;
        let problems: BTreeSet<ScanProblem> = engine.view.problems().iter().cloned().collect();
        assert_eq!(problems, expected, "{mode:?}");
        let mut names: Vec<_> = engine.view.summary().into_iter().collect();
        names.sort();
        assert_eq!(
            names,
            vec![
                (
                    ("instance".into(), "cli/daemon/x-1".into()),
                    (Liveness::Free, vec![])
                ),
                (
                    ("other".into(), "plugins-daemon/main".into()),
                    (Liveness::Free, vec![])
                ),
                (("tag".into(), "real tag".into()), (Liveness::Free, vec![])),
            ],
            "{mode:?}: only well-formed claims are keys"
        );

        // More foreign names while watching, then a real holder.
        expected.extend(plant_foreign_names(&state, "-later"));
        let mut holder = hold(
            &state,
            &["--aih", "cli/daemon/after-junk", "--tag", "real tag"],
        );
        let names = held_names(&holder);
        let pid = holder.pid();
        engine
            .wait_view("the holder after the junk live", |view| {
                names.iter().all(|n| view.is(n, Liveness::Live, &[pid]))
            })
            .await;

        engine
            .handle
            .commands
            .send(EngineCommand::Rescan)
            .expect("engine running");
        engine.synced().await;
        let problems: BTreeSet<ScanProblem> = engine.view.problems().iter().cloned().collect();
        assert_eq!(problems, expected, "{mode:?}: after a rescan");
        assert!(
            names
                .iter()
                .all(|n| engine.view.is(n, Liveness::Live, &[pid])),
            "{mode:?}: the rescan agrees"
        );
        blocking(|| holder.kill());
        engine
            .wait_view("the holder's keys free", |view| {
                names
                    .iter()
                    .all(|n| view.liveness(n) == Some(Liveness::Free))
            })
            .await;
    }
}

/// What happened around a symlink NAMED like a gate (`evil.lock`, aimed
/// at a file outside the tree) that appeared while the engine watched.
struct SymlinkGate {
    /// The target's bytes afterwards (it started as `precious bytes`).
    target: Vec<u8>,
    /// `Key` deltas that named the symlink as a claim.
    claims: Vec<Delta>,
    /// Whether a probe created `evil.live.lock` beside the symlink.
    announce_created: bool,
}

async fn symlink_gate_appears(mode: ProbeMode) -> SymlinkGate {
    let (tmp, state) = state_in_tempdir();
    let target = tmp.path().join("precious.txt");
    std::fs::write(&target, b"precious bytes").expect("write target");
    let mut first = hold(&state, &["--group", "first"]);
    let mut engine = Engine::start(&state, mode, NO_SWEEP);
    engine.synced().await;

    std::os::unix::fs::symlink(&target, tags_dir(&state).join("evil.lock")).expect("symlink");
    // Events are handled in order: once this later holder is seen, the
    // symlink's creation has been handled too.
    let mut later = hold(&state, &["--group", "later"]);
    let pid = later.pid();
    engine
        .wait_view("the later holder live", |view| {
            view.is(&common::engine::tag("later"), Liveness::Live, &[pid])
        })
        .await;
    blocking(|| {
        first.close_stdin();
        later.close_stdin();
    });
    SymlinkGate {
        target: std::fs::read(&target).expect("read target"),
        claims: engine
            .log
            .iter()
            .filter(|d| matches!(d, Delta::Key { key, .. } if key.name() == "evil"))
            .cloned()
            .collect(),
        announce_created: tags_dir(&state).join("evil.live.lock").exists(),
    }
}

/// The acquire probe opens a gate read-write, TRUNCATES it and locks it:
/// done through a symlink, it destroys the link's target. Symlinks are
/// never followed — an event naming one must not be probed through.
#[tokio::test(flavor = "multi_thread")]
async fn an_acquire_probe_never_writes_through_a_symlink_named_like_a_gate() {
    let _serial = serial().await;
    let seen = symlink_gate_appears(ProbeMode::Acquire).await;
    assert_eq!(
        String::from_utf8_lossy(&seen.target),
        "precious bytes",
        "the symlink's target was written through"
    );
    assert!(
        !seen.announce_created,
        "a probe created an announce beside the symlink"
    );
}

/// The scan calls a symlink a problem, never a claim; the event path must
/// agree (in both modes) rather than report a claim the next sweep drops.
#[tokio::test(flavor = "multi_thread")]
async fn a_symlink_named_like_a_gate_is_not_reported_as_a_claim() {
    let _serial = serial().await;
    for mode in [ProbeMode::LockFree, ProbeMode::Passive, ProbeMode::Acquire] {
        let seen = symlink_gate_appears(mode).await;
        assert!(
            seen.claims.is_empty(),
            "{mode:?}: a symlink was reported as a claim: {:?}",
            seen.claims
        );
    }
}

/// Foreign files, symlinks, FIFOs, sockets and directories named like a
/// lock file are filesystem events like any other: they are listed as
/// problems when they appear and dropped when they go, with no sweep in
/// between (the sweep is off; only the initial one ran).
#[tokio::test(flavor = "multi_thread")]
async fn problems_come_and_go_with_their_events_not_with_the_sweep() {
    let _serial = serial().await;
    for mode in [ProbeMode::LockFree, ProbeMode::Acquire, ProbeMode::Passive] {
        let (_tmp, state) = state_in_tempdir();
        let mut first = hold(&state, &["--group", "first"]);
        let mut engine = Engine::start(&state, mode, NO_SWEEP);
        engine.synced().await;
        let sweeps = engine.sweeps();

        let mut expected = plant_foreign_names(&state, "-evented");
        let tags = tags_dir(&state);
        let problem = |name: &str, what: &str| ScanProblem {
            path: tags.join(name),
            kind: ScanProblemKind::NotRegular(what.into()),
        };
        let mode_bits = nix::sys::stat::Mode::S_IRWXU;
        nix::unistd::mkfifo(&tags.join("fifo.lock"), mode_bits).expect("mkfifo");
        std::fs::create_dir(tags.join("blocked.lock")).expect("mkdir");
        let socket = std::os::unix::net::UnixListener::bind(tags.join("sock.lock")).expect("bind");
        expected.extend([
            problem("fifo.lock", "a FIFO"),
            problem("blocked.lock", "a directory"),
            problem("sock.lock", "a socket"),
        ]);
        engine
            .wait_view("every new problem listed", |view| {
                view.problems().iter().cloned().collect::<BTreeSet<_>>() == expected
            })
            .await;

        drop(socket);
        for problem in &expected {
            let path = &problem.path;
            let meta = std::fs::symlink_metadata(path).expect("planted");
            if meta.is_dir() {
                std::fs::remove_dir(path).expect("rmdir");
            } else {
                std::fs::remove_file(path).expect("rm");
            }
        }
        engine
            .wait_view("every problem gone", |view| view.problems().is_empty())
            .await;
        assert_eq!(engine.sweeps(), sweeps, "{mode:?}: no sweep ran");
        assert!(
            engine.view.is(
                &common::engine::tag("first"),
                Liveness::Live,
                &[first.pid()]
            ),
            "{mode:?}: the engine kept its view"
        );
        blocking(|| first.close_stdin());
    }
}

/// Agent gates are empty. A gate with content is not an agent lock, and the
/// acquire probe (which truncates the gate) never touches it: it is probed
/// passively, whatever the engine's mode.
#[tokio::test(flavor = "multi_thread")]
async fn the_acquire_probe_never_truncates_a_gate_with_content() {
    let _serial = serial().await;
    let (_tmp, state) = state_in_tempdir();
    let mut engine = Engine::start(&state, ProbeMode::Acquire, NO_SWEEP);
    engine.synced().await;
    let tags = tags_dir(&state);
    std::fs::create_dir_all(&tags).expect("tags dir");
    let gate = tags.join("huge.lock");
    let content = vec![b'x'; 1 << 20];
    std::fs::write(&gate, &content).expect("write gate");
    // Rewrite it: every write is another event, another chance to probe.
    std::fs::write(&gate, &content).expect("rewrite gate");
    engine
        .wait_view("the gate seen as a free key", |view| {
            view.liveness(&common::engine::tag("huge")) == Some(Liveness::Free)
        })
        .await;
    engine.quiesce().await;
    assert!(engine.probes() > 0);
    assert_eq!(std::fs::metadata(&gate).expect("gate").len(), 1 << 20);
    assert!(
        !tags.join("huge.live.lock").exists(),
        "an acquire probe wrote the beacon"
    );
}
