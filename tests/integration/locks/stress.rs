//! Many tasks, overlapping families, one process: no key ever has two
//! owners, nothing deadlocks, and a key held by another process is never
//! handed out in this one.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use crate::common::{Holder, state_in_tempdir, tag_args};
use locktop::context::Context;
use locktop::locks::{self, AgentLock, Family, agent_tag_lock, family_coords};

const TASKS: usize = 16;
const ROUNDS_PER_TASK: usize = 300;
const TAGS: &[&str] = &["t0", "t1", "t2", "t3", "t4", "t5"];
const AIHS: &[&str] = &["agent/a", "agent/b/c"];
/// Held by a child process for the whole test.
const FOREIGN_TAG: &str = "foreign";

type Coord = (PathBuf, String);

struct Shared {
    context: Context,
    owners: HashMap<Coord, AtomicUsize>,
    acquisitions: HashMap<Coord, AtomicUsize>,
    families_won: AtomicUsize,
    families_busy: AtomicUsize,
    waits_won: AtomicUsize,
}

impl Shared {
    /// Marks every lock owned by us, asserting nobody else owned it.
    fn enter(&self, locks: &[AgentLock]) {
        for lock in locks {
            let coord = (lock.dir().to_path_buf(), lock.key().to_string());
            let before = self.owners[&coord].fetch_add(1, Ordering::SeqCst);
            assert_eq!(before, 0, "two owners of {coord:?} at once");
            self.acquisitions[&coord].fetch_add(1, Ordering::SeqCst);
        }
    }

    fn leave(&self, locks: &[AgentLock]) {
        for lock in locks {
            let coord = (lock.dir().to_path_buf(), lock.key().to_string());
            let before = self.owners[&coord].fetch_sub(1, Ordering::SeqCst);
            assert_eq!(before, 1, "owner count of {coord:?} corrupted");
        }
    }
}

fn random_family(rng: &mut fastrand::Rng) -> Family {
    let mut tags: Vec<String> = (0..rng.usize(0..=3))
        .map(|_| TAGS[rng.usize(..TAGS.len())].to_string())
        .collect();
    if rng.u8(..20) == 0 {
        tags.push(FOREIGN_TAG.to_string());
    }
    if rng.bool() {
        Family::Hierarchy {
            aih: AIHS[rng.usize(..AIHS.len())].to_string(),
            tags,
        }
    } else {
        if tags.is_empty() {
            tags.push(TAGS[rng.usize(..TAGS.len())].to_string());
        }
        Family::Group(tags)
    }
}

async fn worker(shared: Arc<Shared>, seed: u64) {
    let mut rng = fastrand::Rng::with_seed(seed);
    let state = shared.context.state_dir().to_path_buf();
    let map = shared.context.agent_locks();
    for _ in 0..ROUNDS_PER_TASK {
        if rng.u8(..8) == 0 {
            // Blocking path on a single (non-foreign) key, holding nothing.
            let family = Family::Group(vec![TAGS[rng.usize(..TAGS.len())].to_string()]);
            let (dir, key) = family_coords(&state, &family).unwrap().remove(0);
            let lock = locks::wait_acquire(map, &dir, &key).await.unwrap();
            let held = [lock];
            shared.enter(&held);
            tokio::task::yield_now().await;
            shared.leave(&held);
            let [lock] = held;
            lock.release().unwrap();
            shared.waits_won.fetch_add(1, Ordering::Relaxed);
            continue;
        }
        let family = random_family(&mut rng);
        match locks::try_acquire_family(map, &state, family)
            .await
            .unwrap()
        {
            Some(acquired) => {
                let locks = acquired.into_locks();
                shared.enter(&locks);
                tokio::task::yield_now().await;
                shared.leave(&locks);
                if rng.bool() {
                    for lock in locks {
                        lock.release().unwrap();
                    }
                } else {
                    drop(locks); // Drop must release just as well.
                }
                shared.families_won.fetch_add(1, Ordering::Relaxed);
            }
            None => {
                shared.families_busy.fetch_add(1, Ordering::Relaxed);
                tokio::task::yield_now().await;
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn overlapping_families_never_give_a_key_two_owners() {
    let (_tmp, state) = state_in_tempdir();
    let mut foreign = Holder::hold(&state, &tag_args(&[FOREIGN_TAG]));
    let context = Context::new(state.clone());

    let mut coords: Vec<Coord> = family_coords(
        &state,
        &Family::Group(TAGS.iter().map(|t| t.to_string()).collect()),
    )
    .unwrap();
    for aih in AIHS {
        coords.extend(
            family_coords(
                &state,
                &Family::Hierarchy {
                    aih: aih.to_string(),
                    tags: vec![],
                },
            )
            .unwrap(),
        );
    }
    coords.push(agent_tag_lock(&state, FOREIGN_TAG));
    let shared = Arc::new(Shared {
        context,
        owners: coords
            .iter()
            .map(|c| (c.clone(), AtomicUsize::new(0)))
            .collect(),
        acquisitions: coords
            .iter()
            .map(|c| (c.clone(), AtomicUsize::new(0)))
            .collect(),
        families_won: AtomicUsize::new(0),
        families_busy: AtomicUsize::new(0),
        waits_won: AtomicUsize::new(0),
    });

    let base_seed = fastrand::u64(..);
    let tasks: Vec<_> = (0..TASKS as u64)
        .map(|i| tokio::spawn(worker(shared.clone(), base_seed.wrapping_add(i))))
        .collect();
    let results = tokio::time::timeout(Duration::from_secs(120), futures::future::join_all(tasks))
        .await
        .unwrap_or_else(|_| panic!("deadlock (seed {base_seed})"));
    for result in results {
        if let Err(error) = result {
            std::panic::resume_unwind(error.into_panic());
        }
    }

    let won = shared.families_won.load(Ordering::SeqCst);
    let busy = shared.families_busy.load(Ordering::SeqCst);
    let waits = shared.waits_won.load(Ordering::SeqCst);
    eprintln!("seed {base_seed}: {won} families won, {busy} busy, {waits} waits");
    assert!(won > 0, "some family was acquired");
    assert!(waits > 0, "some wait_acquire completed");
    assert_eq!(
        won + busy + waits,
        TASKS * ROUNDS_PER_TASK,
        "every round finished"
    );
    let foreign_coord = agent_tag_lock(&state, FOREIGN_TAG);
    assert_eq!(
        shared.acquisitions[&foreign_coord].load(Ordering::SeqCst),
        0,
        "a key held by another process was handed out here"
    );
    for (coord, owners) in &shared.owners {
        assert_eq!(owners.load(Ordering::SeqCst), 0, "{coord:?} still owned");
    }

    // Everything was released: the whole key set (minus the foreign tag)
    // is free for another process now …
    let mut args: Vec<String> = vec!["--aih".into(), AIHS[0].into()];
    args.extend(tag_args(TAGS));
    let mut after = Holder::hold(&state, &args);
    assert_eq!(after.close_stdin().code(), Some(0));
    let mut after = Holder::hold(&state, &["--aih", AIHS[1]]);
    assert_eq!(after.close_stdin().code(), Some(0));
    // … and no in-process guard lingers.
    for entry in shared.context.agent_locks().iter() {
        assert!(
            entry.value().try_lock().is_ok(),
            "{:?} guard lingers",
            entry.key()
        );
    }
    assert_eq!(foreign.close_stdin().code(), Some(0));
}
