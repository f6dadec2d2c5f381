//! Driving the live engine from a test: start it on a state dir, apply its
//! deltas to a local view (as any consumer would), and wait — within a
//! generous CORRECTNESS bound, never a speed bound — for a delta or a view
//! that matches. Plus the ground-truth fixture shared by the engine and
//! the `snapshot` tests.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::time::Duration;

use locktop::context::Context;
use locktop::disk::key::LockKey;
use locktop::engine::fold::Fold;
use locktop::engine::{
    self, Delta, EngineConfig, EngineHandle, KeyState, Liveness, ScanProblem, WatcherHealth,
};
use locktop::liveness::probe::ProbeMode;
use tokio::time::Instant;

use super::Holder;

/// How long a change may take to show up as a delta. A correctness bound.
pub const DELTA_TIMEOUT: Duration = Duration::from_secs(10);

/// A sweep period long enough that no safety-net sweep runs during a
/// test: whatever the engine reports came from events.
pub const NO_SWEEP: Duration = Duration::from_secs(3600);

/// How a person names a claim: (`instance`/`tag`/`other`, AIH or tag).
pub type Name = (String, String);

/// `("instance", aih)`.
pub fn instance(aih: &str) -> Name {
    ("instance".into(), aih.into())
}

/// `("tag", tag)`.
pub fn tag(tag: &str) -> Name {
    ("tag".into(), tag.into())
}

/// The name of a key as the engine reports it.
pub fn name_of(key: &LockKey) -> Name {
    (key.kind().as_str().to_string(), key.name().to_string())
}

/// The claims a holder printed in its `held` line (`instance a/b`,
/// `tag t`), as names.
pub fn held_names(holder: &Holder) -> BTreeSet<Name> {
    holder
        .locks()
        .iter()
        .map(|lock| {
            let (kind, name) = lock
                .split_once(' ')
                .unwrap_or_else(|| panic!("lock name {lock:?} has no kind"));
            (kind.to_string(), name.to_string())
        })
        .collect()
}

/// Runs blocking test code (spawning, signalling, reaping children) on a
/// multi-thread runtime without starving the engine's tasks.
pub fn blocking<T>(f: impl FnOnce() -> T) -> T {
    tokio::task::block_in_place(f)
}

/// [`Holder::hold`] from async code.
pub fn hold<S: AsRef<str>>(state_dir: &Path, args: &[S]) -> Holder {
    blocking(|| Holder::hold(state_dir, args))
}

/// What a consumer knows after applying every delta so far: the
/// engine's one fold ([`Fold`]), read by claim name.
#[derive(Debug, Default)]
pub struct View {
    fold: Fold,
}

impl View {
    fn apply(&mut self, delta: &Delta) {
        self.fold.apply(delta.clone());
    }

    /// Every claim the engine reported and has not removed.
    pub fn keys(&self) -> &locktop::engine::store::KeyStore {
        self.fold.keys()
    }

    /// The last health.
    pub fn health(&self) -> &WatcherHealth {
        &self.fold.watcher().health
    }

    /// The last problem list.
    pub fn problems(&self) -> &[ScanProblem] {
        &self.fold.watcher().problems
    }

    /// The state of the claim named `name`, if reported.
    pub fn get(&self, name: &Name) -> Option<&KeyState> {
        self.keys()
            .iter()
            .find(|(key, _)| &name_of(key) == name)
            .map(|(_, state)| state)
    }

    /// The liveness of `name`, if reported.
    pub fn liveness(&self, name: &Name) -> Option<Liveness> {
        self.get(name).map(|state| state.liveness)
    }

    /// True when `name` is `liveness` and held by exactly `pids`.
    pub fn is(&self, name: &Name, liveness: Liveness, pids: &[u32]) -> bool {
        self.get(name).is_some_and(|state| {
            state.liveness == liveness
                && state.holders.iter().map(|p| p.pid).collect::<Vec<_>>() == pids
        })
    }

    /// Every reported claim: name → (liveness, holder PIDs).
    pub fn summary(&self) -> BTreeMap<Name, (Liveness, Vec<u32>)> {
        self.keys()
            .iter()
            .map(|(key, state)| {
                let pids = state.holders.iter().map(|p| p.pid).collect();
                (name_of(key), (state.liveness, pids))
            })
            .collect()
    }
}

/// A running engine plus the view its deltas built.
pub struct Engine {
    /// The engine's handle (deltas are read through [`Engine::recv`]).
    pub handle: EngineHandle,
    /// What the deltas so far say.
    pub view: View,
    /// Every delta received, for failure messages.
    pub log: Vec<Delta>,
}

impl Engine {
    /// Starts an engine on `state_dir` with a fresh context.
    pub fn start(state_dir: &Path, probe: ProbeMode, sweep_every: Duration) -> Self {
        Self::start_with(Context::new(state_dir.to_path_buf()), probe, sweep_every)
    }

    /// Starts an engine on `context` (to share its agent lock map).
    pub fn start_with(context: Context, probe: ProbeMode, sweep_every: Duration) -> Self {
        let config = EngineConfig {
            probe,
            sweep_every,
            ..EngineConfig::default()
        };
        Self::start_config(context, config)
    }

    /// Starts an engine on `state_dir` with its trace on
    /// ([`locktop::engine::trace`]), and that trace.
    pub fn start_traced(
        state_dir: &Path,
        probe: ProbeMode,
        sweep_every: Duration,
    ) -> (Self, std::sync::Arc<locktop::engine::trace::Trace>) {
        Self::start_traced_from(
            state_dir,
            probe,
            sweep_every,
            locktop::engine::LivenessSource::Inference,
        )
    }

    /// [`Engine::start_traced`] with liveness from `source`.
    pub fn start_traced_from(
        state_dir: &Path,
        probe: ProbeMode,
        sweep_every: Duration,
        source: locktop::engine::LivenessSource,
    ) -> (Self, std::sync::Arc<locktop::engine::trace::Trace>) {
        let trace = std::sync::Arc::new(locktop::engine::trace::Trace::default());
        let config = EngineConfig {
            probe,
            sweep_every,
            trace: Some(trace.clone()),
            source,
            ..EngineConfig::default()
        };
        let engine = Self::start_config(Context::new(state_dir.to_path_buf()), config);
        (engine, trace)
    }

    /// Starts an engine on `context` with every setting given.
    pub fn start_config(context: Context, config: EngineConfig) -> Self {
        let handle = engine::spawn(context, config);
        Self {
            handle,
            view: View::default(),
            log: Vec::new(),
        }
    }

    /// The next delta before `deadline` (applied to the view), `None` on
    /// timeout. Panics if the engine stopped.
    pub async fn recv_until(&mut self, deadline: Instant) -> Option<Delta> {
        match tokio::time::timeout_at(deadline, self.handle.deltas.recv()).await {
            Ok(Some(delta)) => {
                self.view.apply(&delta);
                self.log.push(delta.clone());
                Some(delta)
            }
            Ok(None) => panic!("the engine stopped; last deltas:\n{}", self.tail()),
            Err(_) => None,
        }
    }

    /// Applies every delta already queued, without waiting.
    pub fn drain(&mut self) {
        while let Ok(delta) = self.handle.deltas.try_recv() {
            self.apply_and_log(delta);
        }
    }

    /// Applies one delta read by the test itself.
    pub fn apply_and_log(&mut self, delta: Delta) {
        self.view.apply(&delta);
        self.log.push(delta);
    }

    /// Waits for a delta matching `pred` (every delta before it is applied
    /// too). Panics after [`DELTA_TIMEOUT`] naming `what`.
    pub async fn wait_delta(&mut self, what: &str, mut pred: impl FnMut(&Delta) -> bool) -> Delta {
        let deadline = Instant::now() + DELTA_TIMEOUT;
        loop {
            match self.recv_until(deadline).await {
                Some(delta) if pred(&delta) => return delta,
                Some(_) => {}
                None => panic!(
                    "no delta {what} within {DELTA_TIMEOUT:?}; view:\n{:#?}\nlast deltas:\n{}",
                    self.view.summary(),
                    self.tail()
                ),
            }
        }
    }

    /// Waits until the view satisfies `pred` (checked now and after every
    /// delta). Panics after [`DELTA_TIMEOUT`] naming `what`.
    pub async fn wait_view(&mut self, what: &str, mut pred: impl FnMut(&View) -> bool) {
        let deadline = Instant::now() + DELTA_TIMEOUT;
        self.drain();
        while !pred(&self.view) {
            if self.recv_until(deadline).await.is_none() {
                panic!(
                    "the view never showed {what} within {DELTA_TIMEOUT:?}; view:\n{:#?}\nhealth: {:?}\nlast deltas:\n{}",
                    self.view.summary(),
                    self.view.health(),
                    self.tail()
                );
            }
        }
    }

    /// Waits for the next `Synced`.
    pub async fn synced(&mut self) {
        self.wait_delta("Synced", |d| matches!(d, Delta::Synced { .. }))
            .await;
    }

    /// Waits for a `Health` delta matching `pred`.
    pub async fn wait_health(
        &mut self,
        what: &str,
        mut pred: impl FnMut(&WatcherHealth) -> bool,
    ) -> WatcherHealth {
        match self
            .wait_delta(what, |d| matches!(d, Delta::Health(h) if pred(h)))
            .await
        {
            Delta::Health(health) => health,
            _ => unreachable!(),
        }
    }

    /// Waits for a `Key` delta about `name` that moves it to `to`; returns
    /// its `previous` liveness.
    pub async fn wait_key_to(&mut self, name: &Name, to: Liveness) -> Option<Liveness> {
        let what = format!("{name:?} → {to:?}");
        match self
            .wait_delta(&what, |d| {
                matches!(d, Delta::Key { key, state, .. }
                    if &name_of(key) == name && state.liveness == to)
            })
            .await
        {
            Delta::Key { previous, .. } => previous,
            _ => unreachable!(),
        }
    }

    /// Waits until the engine has handled everything queued so far: no new
    /// filesystem change for a while and every delta applied. For tests
    /// that flood the engine; bounded by [`DELTA_TIMEOUT`].
    pub async fn quiesce(&mut self) {
        let deadline = Instant::now() + DELTA_TIMEOUT;
        loop {
            let (events, probes) = (self.events(), self.probes());
            tokio::time::sleep(Duration::from_millis(300)).await;
            self.drain();
            if self.events() == events && self.probes() == probes {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "the engine never went quiet; last deltas:\n{}",
                self.tail()
            );
        }
    }

    /// Probes run so far.
    pub fn probes(&self) -> u64 {
        self.handle.stats.probes.load(Ordering::Relaxed)
    }

    /// Filesystem changes received so far.
    pub fn events(&self) -> u64 {
        self.handle.stats.events.load(Ordering::Relaxed)
    }

    /// Reads of `/proc/locks` so far.
    pub fn index_reads(&self) -> u64 {
        self.handle.stats.index_reads.load(Ordering::Relaxed)
    }

    /// The engine's counters (refused tries by kind, …).
    pub fn stats(&self) -> &locktop::engine::EngineStats {
        &self.handle.stats
    }

    /// Full sweeps so far.
    pub fn sweeps(&self) -> u64 {
        self.handle.stats.sweeps.load(Ordering::Relaxed)
    }

    /// The last deltas received, one per line.
    pub fn tail(&self) -> String {
        let skip = self.log.len().saturating_sub(40);
        self.log[skip..]
            .iter()
            .map(|d| format!("  {d:?}"))
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// Holder families that exercise every naming case, with real holders:
/// a real-looking AIH, one nested below its leaf (a directory beside its
/// parent's `.lock`), a node that has both a lock and children, bound tags
/// with spaces, dots and a colon, and a grouped family with unicode.
pub const LIVE_FAMILIES: &[&[&str]] = &[
    &[
        "--aih",
        "cli/daemon/3Bk4hBIOrMDdNaDL3atd1b-F1LTN4MMGSB1wpHXF",
        "--tag",
        "release v1.2.3",
        "--tag",
        "team: infra",
    ],
    &[
        "--aih",
        "cli/daemon/3Bk4hBIOrMDdNaDL3atd1b-F1LTN4MMGSB1wpHXF/sub",
    ],
    &["--aih", "cli/daemon"],
    &[
        "--group",
        "grouped.one",
        "--group",
        "grouped two",
        "--group",
        "δ unicode.tag",
    ],
    &[
        "--aih",
        "daemon/7Zz9yYxXwWvVuUtTsSrRqQ-r2",
        "--tag",
        "solo.tag",
    ],
];

/// Families whose holders leave (closing stdin, SIGKILL, SIGTERM) before
/// anything is checked: their files stay on disk as stale keys.
pub const STALE_FAMILIES: &[&[&str]] = &[
    &[
        "--aih",
        "cli/daemon/oldAgent00000000000000-dead",
        "--tag",
        "stale tag",
    ],
    &["--group", "stale.group.a", "--group", "stale group b"],
    &[
        "--aih",
        "cli/daemon/3Bk4hBIOrMDdNaDL3atd1b-F1LTN4MMGSB1wpHXF/sub/deeper",
    ],
];

/// Real holders of [`LIVE_FAMILIES`] plus the stale keys of
/// [`STALE_FAMILIES`], on one state dir.
pub struct GroundTruth {
    /// Holders alive for the whole test.
    pub live: Vec<Holder>,
    /// Names left behind by holders that are gone.
    pub stale: BTreeSet<Name>,
}

impl GroundTruth {
    /// Starts the stale holders and makes each leave a different way, then
    /// starts the live ones.
    pub fn build(state_dir: &Path) -> Self {
        let mut stale = BTreeSet::new();
        for (i, family) in STALE_FAMILIES.iter().enumerate() {
            let mut holder = Holder::hold(state_dir, family);
            stale.extend(held_names(&holder));
            match i % 3 {
                0 => assert!(holder.close_stdin().success()),
                1 => {
                    holder.kill();
                }
                _ => assert!(holder.terminate().success()),
            }
        }
        let live: Vec<Holder> = LIVE_FAMILIES
            .iter()
            .map(|family| Holder::hold(state_dir, family))
            .collect();
        let truth = Self { live, stale };
        assert_eq!(
            truth.expected_live().len(),
            10,
            "the fixture's families name 10 distinct live claims"
        );
        truth
    }

    /// Live name → the PID of its holder.
    pub fn expected_live(&self) -> BTreeMap<Name, u32> {
        let mut out = BTreeMap::new();
        for holder in &self.live {
            for name in held_names(holder) {
                assert!(out.insert(name, holder.pid()).is_none(), "held twice");
            }
        }
        out
    }

    /// What a complete, correct view says: every live name `Live` with its
    /// holder's PID, every stale one `Free` with no holder.
    pub fn expected_summary(&self) -> BTreeMap<Name, (Liveness, Vec<u32>)> {
        let mut out: BTreeMap<Name, (Liveness, Vec<u32>)> = self
            .stale
            .iter()
            .map(|name| (name.clone(), (Liveness::Free, Vec::new())))
            .collect();
        for (name, pid) in self.expected_live() {
            out.insert(name, (Liveness::Live, vec![pid]));
        }
        out
    }
}

/// A fresh state dir whose (empty) `locks` root exists, so an engine
/// started on it syncs at once instead of waiting for the root.
pub fn state_with_locks_root() -> (tempfile::TempDir, PathBuf) {
    let (tmp, state) = super::state_in_tempdir();
    std::fs::create_dir(locks_dir(&state)).expect("mkdir locks");
    (tmp, state)
}

/// `<state>/locks`.
pub fn locks_dir(state_dir: &Path) -> PathBuf {
    state_dir.join("locks")
}

/// `<state>/locks/agents/tags`.
pub fn tags_dir(state_dir: &Path) -> PathBuf {
    locks_dir(state_dir).join("agents").join("tags")
}
