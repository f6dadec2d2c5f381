//! The live engine against real holders (`locktop hold` children): its
//! view equals what the holders hold, deaths and releases arrive as `free`
//! deltas through inotify alone (no sweep runs during these tests), new
//! directories are watched, the locks root may come and go, and this
//! process's own holders read as `own`.
//!
//! Every wait is a correctness bound (see `common::engine::DELTA_TIMEOUT`),
//! never a speed assertion.

use std::collections::BTreeMap;

use crate::common;
use crate::common::engine::{
    Engine, GroundTruth, NO_SWEEP, Name, blocking, held_names, hold, instance, locks_dir,
    state_with_locks_root, tag,
};
use crate::common::{serial, state_in_tempdir};
use locktop::engine::{Delta, EngineCommand, Liveness, WatcherHealth};
use locktop::liveness::probe::ProbeMode;
use locktop::locks::{self, agent_instance_lock, agent_tag_lock};

const MODES: [ProbeMode; 3] = [ProbeMode::LockFree, ProbeMode::Acquire, ProbeMode::Passive];

/// 1. After `Synced`, the keys reported `Live` (each with its holder's PID)
///    are exactly what the live holders hold, and the keys left by gone
///    holders are `Free` — nothing more, nothing less, in both modes.
#[tokio::test(flavor = "multi_thread")]
async fn synced_view_equals_what_real_holders_hold_and_stale_keys_are_free() {
    let _serial = serial().await;
    let (_tmp, state) = state_in_tempdir();
    let truth = blocking(|| GroundTruth::build(&state));
    let expected = truth.expected_summary();
    for mode in MODES {
        let mut engine = Engine::start(&state, mode, NO_SWEEP);
        engine.synced().await;
        assert_eq!(
            engine.view.summary(),
            expected,
            "{mode:?}: the synced view differs from the holders' ground truth"
        );
        assert!(
            engine.view.problems().is_empty(),
            "{mode:?}: a tree written only by the SDK has no problems: {:?}",
            engine.view.problems()
        );
        let live_states = engine
            .view
            .keys()
            .iter()
            .map(|(_, state)| state)
            .filter(|state| state.liveness == Liveness::Live);
        for state in live_states {
            assert!(state.since.is_some(), "a held key has a `since`: {state:?}");
            assert!(state.holders.iter().all(|p| p.alive), "{state:?}");
        }
    }
    drop(truth);
}

/// 2a. SIGKILL runs no code of the holder, yet every one of its keys gets a
///     `Key` delta `live → free` (the kernel's close-write on its fds).
#[tokio::test(flavor = "multi_thread")]
async fn sigkill_of_a_holder_turns_each_of_its_keys_free() {
    let _serial = serial().await;
    for mode in MODES {
        let (_tmp, state) = state_in_tempdir();
        let mut bystander = hold(&state, &["--aih", "cli/daemon/bystander-1"]);
        let mut victim = hold(
            &state,
            &[
                "--aih",
                "cli/daemon/victim0000000000000000-1",
                "--tag",
                "victim tag.v2",
                "--tag",
                "other:tag",
            ],
        );
        let mut engine = Engine::start(&state, mode, NO_SWEEP);
        engine.synced().await;
        let names = held_names(&victim);
        for name in &names {
            assert!(
                engine.view.is(name, Liveness::Live, &[victim.pid()]),
                "{mode:?}: {name:?} is live by the victim before the kill: {:?}",
                engine.view.get(name)
            );
        }
        let sweeps = engine.sweeps();

        blocking(|| victim.kill());
        expect_each_freed(&mut engine, &names, mode).await;
        assert!(
            engine.view.is(
                &instance("cli/daemon/bystander-1"),
                Liveness::Live,
                &[bystander.pid()]
            ),
            "{mode:?}: the bystander is untouched"
        );
        assert_eq!(
            engine.sweeps(),
            sweeps,
            "{mode:?}: the deaths were seen through events, not a sweep"
        );
        blocking(|| bystander.close_stdin());
    }
}

/// 2b. SIGTERM: `hold` releases and exits; its keys turn free.
#[tokio::test(flavor = "multi_thread")]
async fn sigterm_release_turns_each_key_free() {
    let _serial = serial().await;
    for mode in MODES {
        let (_tmp, state) = state_with_locks_root();
        let mut engine = Engine::start(&state, mode, NO_SWEEP);
        let mut holder = hold(
            &state,
            &["--group", "term.a", "--group", "term b", "--group", "ü"],
        );
        let names = held_names(&holder);
        let pid = holder.pid();
        engine
            .wait_view("the group live", |view| {
                names.iter().all(|n| view.is(n, Liveness::Live, &[pid]))
            })
            .await;
        assert!(blocking(|| holder.terminate()).success());
        expect_each_freed(&mut engine, &names, mode).await;
    }
}

/// Waits for a `live → free` delta for every name (any order).
async fn expect_each_freed(
    engine: &mut Engine,
    names: &std::collections::BTreeSet<Name>,
    mode: ProbeMode,
) {
    let mut freed: BTreeMap<Name, Option<Liveness>> = BTreeMap::new();
    while freed.len() < names.len() {
        let delta = engine
            .wait_delta("a free delta for each of the holder's keys", |d| {
                matches!(d, Delta::Key { key, state, .. }
                    if names.contains(&common::engine::name_of(key))
                        && state.liveness == Liveness::Free)
            })
            .await;
        if let Delta::Key { key, previous, .. } = delta {
            freed.insert(common::engine::name_of(&key), previous);
        }
    }
    for (name, previous) in freed {
        assert_eq!(
            previous,
            Some(Liveness::Live),
            "{mode:?}: {name:?} went free from live"
        );
        let state = engine.view.get(&name).expect("still on disk");
        assert!(
            state.holders.is_empty() && state.since.is_none(),
            "{state:?}"
        );
    }
}

/// 3. A nested AIH whose directories did not exist when the engine started:
///    the key arrives `live` — and its holder's death arrives `free`, which
///    only a watch on the NEW directory can report (no sweep runs).
#[tokio::test(flavor = "multi_thread")]
async fn a_directory_created_after_start_is_watched() {
    let _serial = serial().await;
    for mode in MODES {
        let (_tmp, state) = state_in_tempdir();
        let mut old = hold(&state, &["--aih", "x/y"]);
        let mut engine = Engine::start(&state, mode, NO_SWEEP);
        engine.synced().await;
        assert!(!locks_dir(&state).join("agents/instances/a").exists());
        let sweeps = engine.sweeps();

        let mut holder = hold(&state, &["--aih", "a/b/c/d", "--tag", "deep tag"]);
        let pid = holder.pid();
        let deep = instance("a/b/c/d");
        engine
            .wait_view("a/b/c/d live", |view| {
                view.is(&deep, Liveness::Live, &[pid])
                    && view.is(&tag("deep tag"), Liveness::Live, &[pid])
            })
            .await;

        blocking(|| holder.kill());
        let previous = engine.wait_key_to(&deep, Liveness::Free).await;
        assert_eq!(previous, Some(Liveness::Live), "{mode:?}");

        // And again, now that the directory exists: a second holder of the
        // same AIH comes and goes through the new directory's watch. (Only
        // liveness is checked: which PID is named right after a re-take is
        // `*_names_the_new_holder_of_a_key_retaken_right_after_a_death`'s job.)
        let mut again = hold(&state, &["--aih", "a/b/c/d"]);
        engine
            .wait_view("a/b/c/d live again", |view| {
                view.liveness(&deep) == Some(Liveness::Live)
            })
            .await;
        assert!(blocking(|| again.close_stdin()).success());
        engine.wait_key_to(&deep, Liveness::Free).await;
        assert_eq!(
            engine.sweeps(),
            sweeps,
            "{mode:?}: seen through events only"
        );
        blocking(|| old.close_stdin());
    }
}

/// A key released by one holder and re-taken by another right away must
/// name the NEW holder. `/proc/locks` is read at most every 100 ms; the
/// re-acquisition lands within that window of the read that saw the OLD
/// holder on the very same inodes, and nothing asks for a fresh read.
async fn a_key_retaken_right_after_a_death_names_the_new_holder(mode: ProbeMode) {
    let (_tmp, state) = state_with_locks_root();
    let mut engine = Engine::start(&state, mode, NO_SWEEP);
    engine.synced().await;
    let name = instance("cli/daemon/retaken-1");
    for round in 0..5 {
        let mut first = hold(&state, &["--aih", "cli/daemon/retaken-1"]);
        let first_pid = first.pid();
        engine
            .wait_view("the first holder live", |view| {
                view.is(&name, Liveness::Live, &[first_pid])
            })
            .await;
        let mut second = blocking(|| {
            first.kill();
            common::Holder::hold(&state, &["--aih", "cli/daemon/retaken-1"])
        });
        let second_pid = second.pid();
        let what = format!(
            "{mode:?} round {round}: the key live by the new holder {second_pid}, not the dead {first_pid}"
        );
        engine
            .wait_view(&what, |view| view.is(&name, Liveness::Live, &[second_pid]))
            .await;
        blocking(|| second.kill());
        engine.wait_key_to(&name, Liveness::Free).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn acquire_mode_names_the_new_holder_of_a_key_retaken_right_after_a_death() {
    let _serial = serial().await;
    a_key_retaken_right_after_a_death_names_the_new_holder(ProbeMode::Acquire).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn lock_free_mode_names_the_new_holder_of_a_key_retaken_right_after_a_death() {
    let _serial = serial().await;
    a_key_retaken_right_after_a_death_names_the_new_holder(ProbeMode::LockFree).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn passive_mode_names_the_new_holder_of_a_key_retaken_right_after_a_death() {
    let _serial = serial().await;
    a_key_retaken_right_after_a_death_names_the_new_holder(ProbeMode::Passive).await;
}

/// 7. A state dir without `locks`: the engine waits for it (visible health),
///    picks it up when a holder creates it, survives `rm -rf` of the whole
///    root (keys removed, waiting again) and its re-creation.
#[tokio::test(flavor = "multi_thread")]
async fn the_locks_root_may_be_missing_deleted_and_recreated() {
    let _serial = serial().await;
    let (_tmp, state) = state_in_tempdir();
    let root = locks_dir(&state);
    let mut engine = Engine::start(&state, ProbeMode::Acquire, NO_SWEEP);
    let health = engine
        .wait_health("waiting for the root", |h| {
            matches!(h, WatcherHealth::WaitingForRoot { .. })
        })
        .await;
    assert_eq!(
        health,
        WatcherHealth::WaitingForRoot {
            ancestor: state.clone(),
            state_dir_missing: false,
        }
    );

    let mut first = hold(&state, &["--aih", "cli/daemon/first-1", "--tag", "t 1"]);
    let names = held_names(&first);
    let pid = first.pid();
    engine
        .wait_view("the first holder live, watching", |view| {
            *view.health() == WatcherHealth::Watching
                && names.iter().all(|n| view.is(n, Liveness::Live, &[pid]))
        })
        .await;

    blocking(|| first.kill());
    engine
        .wait_view("the first holder's keys free", |view| {
            names
                .iter()
                .all(|n| view.liveness(n) == Some(Liveness::Free))
        })
        .await;
    std::fs::remove_dir_all(&root).expect("rm -rf locks");
    engine
        .wait_view("every key removed, waiting for the root again", |view| {
            view.keys().is_empty() && matches!(view.health(), WatcherHealth::WaitingForRoot { .. })
        })
        .await;
    let removed: std::collections::BTreeSet<Name> = engine
        .log
        .iter()
        .filter_map(|d| match d {
            Delta::Removed { key, previous, .. } => {
                assert_eq!(*previous, Liveness::Free, "{key:?}");
                Some(common::engine::name_of(key))
            }
            _ => None,
        })
        .collect();
    assert_eq!(removed, names, "a Removed delta for each key");

    // (Liveness only: the re-created files may reuse the deleted inodes, and
    // which PID is named then is the `*_retaken_right_after_a_death` bug.)
    let mut second = hold(&state, &["--group", "after rm"]);
    engine
        .wait_view("the re-created root watched", |view| {
            *view.health() == WatcherHealth::Watching
                && view.liveness(&tag("after rm")) == Some(Liveness::Live)
        })
        .await;
    // Events (not a rescan) still work in the re-created tree.
    blocking(|| second.kill());
    engine.wait_key_to(&tag("after rm"), Liveness::Free).await;
}

/// 9a. A key held in-process through the SAME context the engine probes
///     with reads `own` — found by the initial sweep and by an event-driven
///     probe, in both modes — and `free` once released.
#[tokio::test(flavor = "multi_thread")]
async fn a_key_held_in_process_through_the_engines_context_is_own() {
    let _serial = serial().await;
    for mode in MODES {
        let (_tmp, state) = state_in_tempdir();
        let context = locktop::context::Context::new(state.clone());
        let (dir, key) = agent_instance_lock(&state, "cli/daemon/inproc-1");
        let before = locks::try_acquire(context.agent_locks(), &dir, &key)
            .await
            .expect("acquire in-process");
        let mut engine = Engine::start_with(context.clone(), mode, NO_SWEEP);
        engine.synced().await;
        let me = std::process::id();
        let early = instance("cli/daemon/inproc-1");
        assert!(
            engine.view.is(&early, Liveness::Own, &[me]),
            "{mode:?}: found by the sweep as own: {:?}",
            engine.view.get(&early)
        );

        let (tdir, tkey) = agent_tag_lock(&state, "in process tag");
        let later = locks::try_acquire(context.agent_locks(), &tdir, &tkey)
            .await
            .expect("acquire in-process");
        let name = tag("in process tag");
        engine
            .wait_view("the in-process tag own", |view| {
                view.is(&name, Liveness::Own, &[me])
            })
            .await;

        later.release().expect("release");
        engine.wait_key_to(&name, Liveness::Free).await;
        before.release().expect("release");
        engine.wait_key_to(&early, Liveness::Free).await;
    }
}

/// 9b. A holder child named with `AddOwnPid` turns `own`, and back to
///     `live` with `RemoveOwnPid`.
#[tokio::test(flavor = "multi_thread")]
async fn a_holder_child_announced_as_own_reads_own() {
    let _serial = serial().await;
    for mode in MODES {
        let (_tmp, state) = state_with_locks_root();
        let mut engine = Engine::start(&state, mode, NO_SWEEP);
        engine.synced().await;
        let mut child = hold(&state, &["--aih", "own/child-1", "--tag", "own tag"]);
        let names = held_names(&child);
        let pid = child.pid();
        engine
            .wait_view("the child's keys live", |view| {
                names.iter().all(|n| view.is(n, Liveness::Live, &[pid]))
            })
            .await;

        engine
            .handle
            .commands
            .send(EngineCommand::AddOwnPid(pid))
            .expect("engine running");
        engine
            .wait_view("the child's keys own", |view| {
                names.iter().all(|n| view.is(n, Liveness::Own, &[pid]))
            })
            .await;

        engine
            .handle
            .commands
            .send(EngineCommand::RemoveOwnPid(pid))
            .expect("engine running");
        engine
            .wait_view("the child's keys live again", |view| {
                names.iter().all(|n| view.is(n, Liveness::Live, &[pid]))
            })
            .await;
        blocking(|| child.close_stdin());
    }
}

/// 10. Once a key is shown live with its holder's PID, the echo of the
///     engine's own acquire probe never blanks that PID again while the
///     same holder keeps it (no live → live-without-PID flicker).
#[tokio::test(flavor = "multi_thread")]
async fn a_held_key_never_flickers_to_no_holder_on_the_probes_echo() {
    let _serial = serial().await;
    let (_tmp, state) = state_with_locks_root();
    let mut engine = Engine::start(&state, ProbeMode::Acquire, NO_SWEEP);
    engine.synced().await;
    for round in 0..5 {
        let name = format!("steady-{round}");
        let holder = blocking(|| hold(&state, &["--tag", name.as_str()]));
        let pid = holder.pid();
        engine
            .wait_view("live with its PID", |view| {
                view.is(&tag(&name), Liveness::Live, &[pid])
            })
            .await;
        // Let every echo of the acquire probe come and go.
        let settle = tokio::time::Instant::now() + std::time::Duration::from_millis(400);
        while let Some(delta) = engine.recv_until(settle).await {
            if let Delta::Key { key, state, .. } = &delta
                && key.name() == name
            {
                assert!(
                    state.liveness == Liveness::Live && state.holders.iter().any(|p| p.pid == pid),
                    "round {round}: after live with pid {pid}, got {state:?}"
                );
            }
        }
        drop(holder);
    }
}

/// Under churn the `/proc/locks` read is rate-limited; a held state still
/// never goes out as "held by nobody": each names its holders or says why
/// it cannot ([`locktop::liveness::HoldersNote`]), and each holder that
/// stays is eventually named.
#[tokio::test(flavor = "multi_thread")]
async fn every_held_delta_names_its_holders_or_says_why_not() {
    let _serial = serial().await;
    for mode in [ProbeMode::Acquire, ProbeMode::Passive] {
        let (_tmp, state) = state_in_tempdir();
        let mut engine = Engine::start(&state, mode, NO_SWEEP);
        engine.synced().await;
        let mut holders = Vec::new();
        for round in 0..4 {
            // Several holds within one rate-limit interval, some released
            // at once: the lookup cannot keep up with every one.
            let batch: Vec<_> = (0..6)
                .map(|i| hold(&state, &["--group", &format!("churn {round}-{i}")]))
                .collect();
            for (i, mut holder) in batch.into_iter().enumerate() {
                if i % 2 == 0 {
                    blocking(|| holder.kill());
                } else {
                    holders.push(holder);
                }
            }
        }
        let pids: Vec<u32> = holders.iter().map(|h| h.pid()).collect();
        engine
            .wait_view("every remaining holder named", |view| {
                pids.iter().all(|pid| {
                    view.summary().values().any(|(liveness, held_by)| {
                        *liveness == Liveness::Live && held_by == &[*pid]
                    })
                })
            })
            .await;
        let nameless: Vec<&Delta> = engine
            .log
            .iter()
            .filter(|delta| {
                matches!(delta, Delta::Key { state, .. }
                    if state.liveness.is_held()
                        && state.holders.is_empty()
                        && state.holders_note.is_none())
            })
            .collect();
        assert!(
            nameless.is_empty(),
            "{mode:?}: held with no holder and no reason: {nameless:?}"
        );
        for mut holder in holders {
            blocking(|| holder.kill());
        }
    }
}

/// A directory moved into the tree from outside (a rename, no create
/// event per file) brings its claims with it: they are seen through the
/// rename's event, not at the next sweep; moved out again, they are gone.
#[tokio::test(flavor = "multi_thread")]
async fn a_directory_moved_in_or_out_is_seen_at_once() {
    let _serial = serial().await;
    for mode in MODES {
        let (tmp, state) = state_in_tempdir();
        let mut anchor = hold(&state, &["--aih", "x/y"]);
        let mut engine = Engine::start(&state, mode, NO_SWEEP);
        engine.synced().await;
        let sweeps = engine.sweeps();

        // Built outside the watched tree: an agent holding m/n/held, and a
        // stale key m/n/stale.
        let outside = tmp.path().join("elsewhere");
        std::fs::create_dir(&outside).expect("mkdir");
        let mut holder = hold(&outside, &["--aih", "m/n/held"]);
        drop(hold(&outside, &["--aih", "m/n/stale"]));
        let instances = locks_dir(&state).join("agents/instances");
        std::fs::rename(
            outside.join("locks/agents/instances/m"),
            instances.join("m"),
        )
        .expect("move the tree in");
        let pid = holder.pid();
        engine
            .wait_view("the moved-in claims", |view| {
                view.is(&instance("m/n/held"), Liveness::Live, &[pid])
                    && view.liveness(&instance("m/n/stale")) == Some(Liveness::Free)
            })
            .await;

        std::fs::rename(instances.join("m"), tmp.path().join("gone-m")).expect("move it out");
        engine
            .wait_view("the moved-out claims gone", |view| {
                view.get(&instance("m/n/held")).is_none()
                    && view.get(&instance("m/n/stale")).is_none()
            })
            .await;
        assert_eq!(
            engine.sweeps(),
            sweeps,
            "{mode:?}: seen through events only"
        );
        blocking(|| {
            holder.kill();
            anchor.close_stdin();
        });
    }
}

/// A holder stopped by a signal makes no filesystem event; the once-a-
/// second refresh of held keys' holders shows it stopped within 2 s, and
/// running again after SIGCONT — without a single probe or `/proc/locks`
/// read (only `/proc/<pid>/stat`, counted apart).
#[tokio::test(flavor = "multi_thread")]
async fn a_stopped_holder_is_seen_stopped_and_continued_without_a_probe() {
    use locktop::liveness::process::ProcState;
    use nix::sys::signal::{Signal, kill};
    let _serial = serial().await;
    let (_tmp, state) = state_in_tempdir();
    let mut engine = Engine::start(&state, ProbeMode::Passive, NO_SWEEP);
    engine.synced().await;
    let mut holder = hold(&state, &["--aih", "cli/daemon/sleepy", "--tag", "parked"]);
    let pid = holder.pid();
    let parked = tag("parked");
    engine
        .wait_view("the holder live", |view| {
            view.is(&parked, Liveness::Live, &[pid])
        })
        .await;
    engine.quiesce().await;
    let stats = &engine.handle.stats;
    let reads = stats.index_reads.load(std::sync::atomic::Ordering::Relaxed);
    let (probes, refreshes_before) = (
        engine.probes(),
        stats
            .holder_refreshes
            .load(std::sync::atomic::Ordering::Relaxed),
    );
    let state_of = |view: &common::engine::View| {
        view.get(&parked)
            .and_then(|state| state.holders.first())
            .and_then(|holder| holder.state)
    };
    let nix_pid = nix::unistd::Pid::from_raw(pid as i32);
    kill(nix_pid, Signal::SIGSTOP).expect("SIGSTOP");
    engine
        .wait_view("the holder stopped", |view| {
            state_of(view) == Some(ProcState::Stopped)
        })
        .await;
    kill(nix_pid, Signal::SIGCONT).expect("SIGCONT");
    engine
        .wait_view("the holder running again", |view| {
            state_of(view).is_some_and(|state| !state.is_halted())
        })
        .await;
    let stats = &engine.handle.stats;
    assert_eq!(
        engine.probes(),
        probes,
        "no probe: nothing touched the lock files"
    );
    assert_eq!(
        stats.index_reads.load(std::sync::atomic::Ordering::Relaxed),
        reads,
        "no /proc/locks read"
    );
    assert!(
        stats
            .holder_refreshes
            .load(std::sync::atomic::Ordering::Relaxed)
            > refreshes_before
    );
    blocking(|| holder.kill());
}

/// Waiters by kind: a contender blocked taking the claim (exclusive, on the
/// gate: the SDK's `wait_acquire`) and a watcher blocked until it is
/// released (shared, on the announce: `wait_released`). A blocked `flock`
/// makes no event but its open; that open (never a probe) makes the engine
/// re-read `/proc/locks`, so both show without a sweep.
#[tokio::test(flavor = "multi_thread")]
async fn contenders_and_watchers_show_without_a_sweep() {
    let _serial = serial().await;
    for mode in MODES {
        let (_tmp, state) = state_in_tempdir();
        let mut engine = Engine::start(&state, mode, NO_SWEEP);
        engine.synced().await;
        let mut holder = hold(&state, &["--group", "wanted"]);
        let pid = holder.pid();
        let wanted = tag("wanted");
        engine
            .wait_view("held", |view| view.is(&wanted, Liveness::Live, &[pid]))
            .await;
        let sweeps = engine.sweeps();
        let (dir, key) = agent_tag_lock(&state, "wanted");
        let spawn_flock = |mode: &str, path: std::path::PathBuf| {
            std::process::Command::new("flock")
                .arg(mode)
                .arg(path)
                .arg("true")
                .spawn()
                .expect("util-linux flock")
        };
        let mut contender = spawn_flock("-x", locktop::locks::escape::gate_path(&dir, &key));
        let mut watcher = spawn_flock("-s", locktop::locks::escape::announce_path(&dir, &key));
        let (contender_pid, watcher_pid) = (contender.id(), watcher.id());
        engine
            .wait_view(
                &format!("{mode:?}: the contender and the watcher"),
                |view| {
                    view.get(&wanted).is_some_and(|state| {
                        state.waiters.contains(&contender_pid)
                            && state.watchers.contains(&watcher_pid)
                    })
                },
            )
            .await;
        assert_eq!(engine.sweeps(), sweeps, "{mode:?}: seen without a sweep");
        blocking(|| holder.kill());
        for child in [&mut contender, &mut watcher] {
            let _ = child.wait();
        }
    }
}

/// The lock-free engine keeps a key whose holder still holds it through
/// others' closes from that holder's fdinfo alone — no judgement from a
/// `/proc/locks` read for a close that changed nothing (every probe and
/// every contender giving up makes one) — but judges a let-go key from a
/// read: the holder that let go may have a successor already (it used to
/// be sent free from the fdinfo alone, while a `wait_acquire` contender
/// had taken it: the chaos test caught it with foreign locks slowing
/// every read), and the next holder is named.
#[tokio::test(flavor = "multi_thread")]
async fn lock_free_mode_reads_proc_locks_only_when_a_close_may_have_changed_the_holder() {
    use locktop::engine::trace::Stage;
    let _serial = serial().await;
    let (_tmp, state) = state_with_locks_root();
    let (mut engine, trace) = Engine::start_traced(&state, ProbeMode::LockFree, NO_SWEEP);
    engine.synced().await;
    let name = tag("let go");
    let mut first = blocking(|| hold(&state, &["--tag", "let go"]));
    let pid = first.pid();
    engine
        .wait_view("held by the first holder", |view| {
            view.is(&name, Liveness::Live, &[pid])
        })
        .await;
    engine.quiesce().await;
    trace.take();
    let (dir, key) = locktop::locks::agent_tag_lock(&state, "let go");
    let gate = locktop::locks::escape::gate_path(&dir, &key);
    for _ in 0..5 {
        // Someone else's look at the claim: an open for writing (as the
        // SDK's contenders open it) and a close.
        let file = std::fs::OpenOptions::new().write(true).open(&gate);
        drop(file.expect("open the gate"));
        tokio::time::sleep(std::time::Duration::from_millis(30)).await;
    }
    engine.quiesce().await;
    // A look judged from a read has its read (`Indexed`) between its
    // start and its answer; one from the holder's fdinfo has none.
    let looks = |stages: &[Stage]| -> Vec<bool> {
        let mut read = Vec::new();
        for (at, stage) in stages.iter().enumerate() {
            if *stage == Stage::ProbeStart {
                let rest = &stages[at..];
                let answer = rest.iter().position(|s| matches!(s, Stage::Probed(_)));
                read.push(rest[..answer.unwrap_or(rest.len())].contains(&Stage::Indexed));
            }
        }
        read
    };
    let stages: Vec<Stage> = trace.take().into_iter().map(|r| r.stage).collect();
    let after_closes = looks(&stages);
    assert!(
        !after_closes.is_empty(),
        "the closes were looked at: {stages:?}"
    );
    assert!(
        after_closes.iter().all(|read| !read),
        "a close that changed nothing was judged from a read: {stages:?}"
    );
    assert!(
        engine.view.is(&name, Liveness::Live, &[pid]),
        "{:?}",
        engine.view.summary()
    );
    blocking(|| first.kill());
    engine
        .wait_view("free", |view| view.liveness(&name) == Some(Liveness::Free))
        .await;
    let stages: Vec<Stage> = trace.take().into_iter().map(|r| r.stage).collect();
    assert!(
        looks(&stages).contains(&true),
        "a let-go key is judged from a read: {stages:?}"
    );
    let second = blocking(|| hold(&state, &["--tag", "let go"]));
    let pid = second.pid();
    engine
        .wait_view("held by the second holder", |view| {
            view.is(&name, Liveness::Live, &[pid])
        })
        .await;
}
