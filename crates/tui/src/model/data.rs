//! The data half of the model: everything the engine told us, folded.
//!
//! Invariants: after applying deltas in order, [`Data`] holds exactly the
//! engine's view: every claim on disk is either a lock node with its last
//! state, or — free with nothing more to say, not freed in the last
//! [`RECENTLY_FREED`] and not listed — a stale key, counted (by section),
//! its name remembered for the first [`STALE_REMEMBERED`] of them (a
//! million stale keys are a count, not a million nodes or names: whether
//! a key without a node was stale is the engine's `previous`); while free
//! keys are shown, up to [`FREE_LISTED`] remembered ones are nodes. The counts
//! cover both, and every held lock node's key is in the held view
//! ([`HeldView`]: holders, roles, verdicts) with its state; `version`
//! grows on every change, so caches keyed by it are never stale. Pure: no
//! terminal, no filesystem (the "is this PID still alive" question is
//! asked through the function the caller passes).

use std::collections::{BTreeMap, HashSet, VecDeque};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use crate::disk::key::{KeyKind, LockKey};
use crate::engine::fold::{Folder, WatcherView};
use crate::engine::{Delta, KeyState, Liveness};
use crate::liveness::process::ProcessInfo;
use crate::operate::held::{Change, HeldView};
use crate::stream::follow::{Follower, Judged};

use super::events::{Event, EventKind, EventLog, classify};
use super::text_match::contains_ignore_ascii_case;
use super::tree::{Lock, NodeId, Section, Tree};

/// How long a key seen going from held to free stays visible while free
/// keys are hidden, so an operator sees the row turn free. Short: on a
/// busy host every spawned agent frees a key, and a minute of them
/// buried the held keys (the Events pane keeps the history).
pub(crate) const RECENTLY_FREED: Duration = Duration::from_secs(10);

/// The one bare free state every free node shares (a node costs no
/// allocation of its own for it).
fn free_state() -> Arc<KeyState> {
    static FREE: std::sync::LazyLock<Arc<KeyState>> =
        std::sync::LazyLock::new(|| Arc::new(KeyState::FREE));
    FREE.clone()
}

/// At most this many free keys are listed (nodes, about 500 bytes each)
/// while free keys are shown — the first by name; the rest are counted,
/// and found by filtering.
pub(crate) const FREE_LISTED: usize = 50_000;

/// The names of at most this many stale keys are remembered (to list
/// them with `a`); the rest are counted only (`snapshot --all` lists
/// every key).
pub(crate) const STALE_REMEMBERED: usize = 100_000;

/// Keys per state, as the header shows them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Instance and tag keys held by another process.
    pub live: usize,
    /// Instance and tag keys held by this process or its test holders.
    pub own: usize,
    /// Instance and tag keys nobody holds.
    pub free: usize,
    /// Instance and tag keys with an acquisition or release in flight.
    pub in_flight: usize,
    /// Instance and tag keys nobody holds exclusively but a shared lock
    /// blocks.
    pub shared: usize,
    /// Instance and tag keys whose probe failed.
    pub error: usize,
    /// Keys outside instances and tags, whatever their state.
    pub other: usize,
    /// Scan problems.
    pub problems: usize,
    /// Held instance and tag keys whose holder is stopped (SIGSTOP, a
    /// debugger): they will not be released until someone acts.
    pub stopped: usize,
}

impl Counts {
    fn bump(&mut self, kind: KeyKind, state: &KeyState, add: bool) {
        if kind != KeyKind::Other && state.halted_holder().is_some() {
            Self::adjust(&mut self.stopped, add);
        }
        let slot = if kind == KeyKind::Other {
            &mut self.other
        } else {
            match state.liveness {
                Liveness::Live => &mut self.live,
                Liveness::Own => &mut self.own,
                Liveness::Free => &mut self.free,
                Liveness::InFlight => &mut self.in_flight,
                Liveness::Shared => &mut self.shared,
                Liveness::Error => &mut self.error,
            }
        };
        Self::adjust(slot, add);
    }

    fn adjust(slot: &mut usize, add: bool) {
        if add {
            *slot += 1;
        } else {
            *slot = slot.saturating_sub(1);
        }
    }
}

/// Everything known, as of the last applied delta: the data and the one
/// follower of the change stream it is kept by ([`Follower`]: the fold,
/// the held view, the judgement clock). Reads of what is shown go through
/// to [`Shown`].
#[derive(Debug, Clone)]
pub struct Data {
    follower: Follower<Shown>,
}

/// Tells a holder's death from a release: whether a PID still runs
/// (`None`: cannot tell).
pub(crate) type PidAlive = Arc<dyn Fn(u32) -> Option<bool> + Send + Sync>;

/// [`PidAlive`], kept in the data (shared with a paused copy).
#[derive(Clone)]
struct PidAliveFn(PidAlive);

impl std::fmt::Debug for PidAliveFn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PidAlive")
    }
}

impl Default for PidAliveFn {
    /// Every PID runs: a key freed is a release.
    fn default() -> Self {
        Self(Arc::new(|_| Some(true)))
    }
}

/// What the model shows, folded from the deltas: the tree of keys with
/// their states, the counts, the event log, each key's recent holders, the
/// watcher's view.
#[derive(Debug, Clone, Default)]
pub struct Shown {
    /// The node arena.
    pub tree: Tree,
    /// Counts per state.
    pub counts: Counts,
    /// Transitions, newest first.
    pub events: EventLog,
    /// Each key's recent holders.
    pub history: super::History,
    /// What the deltas said of the watcher: health, scan problems, full
    /// scans finished (until one has, keys are discovered, not acquired),
    /// the last key change.
    pub watcher: WatcherView,
    /// Bumped on every change.
    pub version: u64,
    /// Whether the verdicts as of the initial scan were noted yet (they
    /// are not events).
    verdicts_noted: bool,
    /// Tells a holder's death from a release.
    pid_alive: PidAliveFn,
    /// Free keys kept out of the tree (shared with a paused copy until
    /// the next change).
    stale: Arc<HashSet<LockKey>>,
    /// Keys freed during this session, in order: each leaves the tree for
    /// the stale set once [`RECENTLY_FREED`] has passed (unless free keys
    /// are shown).
    freed: VecDeque<(SystemTime, LockKey)>,
    /// Whether free keys are shown (then listed up to [`FREE_LISTED`]).
    show_free: bool,
    /// Free keys that are nodes.
    free_nodes: usize,
    /// The stale set's keys per section.
    stale_in: [usize; 4],
}

impl Default for Data {
    fn default() -> Self {
        Self::new(Arc::new(|_| Some(true)))
    }
}

impl std::ops::Deref for Data {
    type Target = Shown;

    fn deref(&self) -> &Shown {
        self.follower.keep()
    }
}

impl std::ops::DerefMut for Data {
    fn deref_mut(&mut self) -> &mut Shown {
        self.follower.keep_mut()
    }
}

impl Data {
    /// Nothing known yet; `pid_alive` tells a holder's death from a
    /// release.
    pub(crate) fn new(pid_alive: PidAlive) -> Self {
        let shown = Shown {
            pid_alive: PidAliveFn(pid_alive),
            ..Shown::default()
        };
        Self {
            follower: Follower::new(shown, crate::operate::verdict::MATERIALIZING_AFTER),
        }
    }

    /// Folds one delta in, through the one follower: a burst whose quiet
    /// passed first has its verdict changes logged, as of its end; then the
    /// delta's key (its events), then its own verdict change; at the end
    /// of the first full scan, the verdicts of the initial state are noted
    /// (not events), and only changes from here on are logged.
    pub fn apply(&mut self, delta: Delta) {
        self.version += 1;
        let at = delta.changed_at();
        if let Some(at) = at
            && let Some(settled) = self.follower.settle(at)
        {
            self.log_judged(settled);
        }
        let followed = self.follower.apply(delta);
        if let Some(at) = at {
            self.log_changes(followed.changes, at);
        }
        if let Some(first_state) = followed.first_state {
            self.log_judged(first_state);
            self.verdicts_noted = true;
        }
    }

    /// Logs verdict changes judged without a delta of their own.
    fn log_judged(&mut self, judged: Judged) -> bool {
        let at = judged.at.unwrap_or(SystemTime::UNIX_EPOCH);
        self.log_changes(judged.changes, at)
    }

    /// When the keys the last changes left unsettled are to be judged
    /// (see [`Data::settle`]).
    pub(crate) fn settle_due(&self) -> Option<SystemTime> {
        self.follower.settle_due()
    }

    /// Once `now` is past [`Data::settle_due`]: judges the keys the last
    /// burst of changes left unsettled, as of the burst's end, and logs
    /// what changed. Returns whether anything was logged.
    pub fn settle(&mut self, now: SystemTime) -> bool {
        match self.follower.settle(now) {
            Some(judged) => self.log_judged(judged),
            None => false,
        }
    }

    /// The clock moved to `now`: what is due is judged — the last burst
    /// once settled, else every held key once a second (some verdicts
    /// come with time alone: a spawn materializing too long). Returns
    /// whether anything was logged.
    pub(crate) fn judge_at(&mut self, now: SystemTime) -> bool {
        match self.follower.judge(now) {
            Some(judged) => self.log_judged(judged),
            None => false,
        }
    }

    /// Sets `--materializing-after` for the verdicts followed.
    pub fn set_materializing(&mut self, materializing: Duration) {
        self.follower.set_materializing(materializing);
    }

    /// The held view: holders, their keys and roles, verdicts.
    pub fn held(&self) -> &HeldView {
        self.follower.held()
    }

    /// The nodes of the keys `pid` holds, in key order.
    pub fn held_by(&self, pid: u32) -> Vec<NodeId> {
        self.held()
            .keys_of(pid)
            .filter_map(|key| self.node_of(key))
            .collect()
    }

    /// The nodes of every held key with a holder this monitor names,
    /// sorted, each once.
    pub(crate) fn held_nodes(&self) -> Vec<NodeId> {
        let mut nodes: Vec<NodeId> = self
            .held()
            .holders()
            .flat_map(|pid| self.held_by(pid))
            .collect();
        nodes.sort_unstable();
        nodes.dedup();
        nodes
    }
}

impl Shown {
    fn apply_key(
        &mut self,
        key: LockKey,
        state: Arc<KeyState>,
        previous: Option<Liveness>,
        at: SystemTime,
    ) {
        let pid_alive = self.pid_alive.0.clone();
        let pid_alive = &*pid_alive;
        if previous.is_some() && self.tree_lock(&key).is_none() {
            // Known, and no node: it was stale.
            self.take_stale(&key);
        }
        let freed_now = state.liveness == Liveness::Free && previous.is_some_and(Liveness::is_held);
        let listed = !state.is_bare_free()
            || freed_now
            || (self.show_free && self.free_nodes < FREE_LISTED)
            || self
                .tree_lock(&key)
                .is_some_and(|lock| lock.freed_at.is_some());
        if !listed {
            // (No event: a key that was not held becoming free is none.)
            self.remove_node(&key);
            self.keep_stale(key);
            return;
        }
        let id = self.tree.ensure_key(&key);
        let old = self.tree.lock_mut(id).take();
        if let Some(old) = &old {
            self.counts.bump(old.key.kind(), &old.state, false);
            self.free_nodes -= usize::from(old.state.liveness == Liveness::Free);
        }
        let last_holder = old
            .as_ref()
            .and_then(|old| old.state.holders.first().cloned());
        let event = classify(previous, state.liveness, !self.watcher.synced(), || {
            let holders = old.as_ref().map_or(&[][..], |old| &old.state.holders);
            super::events::ended(holders, &self.events, pid_alive)
        });
        // Held before and after by another process (no free state in
        // between: a waiter took it the moment its holder ended, as when
        // a deadlock is broken): the end of one hold and the start of the
        // next, each said.
        let handed_over = event.is_none()
            && self.watcher.synced()
            && state.liveness.is_held()
            && old.as_ref().is_some_and(|old| {
                old.state.liveness.is_held()
                    && old.state.holders.first().is_some_and(|before| {
                        !state.holders.is_empty()
                            && !state.holders.iter().any(|now| now.pid == before.pid)
                    })
            });
        let mut events: Vec<(super::EventKind, Option<ProcessInfo>)> = Vec::new();
        if handed_over {
            let holders = old.as_ref().map_or(&[][..], |old| &old.state.holders);
            let ended = super::events::ended(holders, &self.events, pid_alive);
            events.push((ended, last_holder.clone()));
            events.push((super::EventKind::Acquired, state.holders.first().cloned()));
        } else if let Some(kind) = event {
            let holder = match kind {
                super::EventKind::Acquired => state.holders.first().cloned(),
                _ => last_holder,
            };
            events.push((kind, holder));
        }
        self.note_history(&key, &state, event, at);
        for (kind, holder) in events {
            self.events.push(Event {
                at,
                kind,
                key: key.clone(),
                pid: holder.as_ref().map(|p| p.pid),
                command: holder.and_then(|p| p.cmdline),
            });
        }
        let flagged = match state.liveness.is_held() {
            true => old.as_ref().and_then(|old| old.flagged),
            false => None,
        };
        let freed_at = match state.liveness {
            Liveness::Free if freed_now => Some(at),
            Liveness::Free => old.and_then(|old| old.freed_at),
            _ => None,
        };
        if freed_now {
            self.freed.push_back((at, key.clone()));
        }
        self.counts.bump(key.kind(), &state, true);
        self.free_nodes += usize::from(state.liveness == Liveness::Free);
        *self.tree.lock_mut(id) = Some(Lock {
            key,
            state,
            freed_at,
            flagged,
        });
    }

    /// Keeps `key`'s recent holders: `state` (its new one) opens a hold
    /// of its first holder; a key that is no longer held closes its open
    /// hold with the `event`'s word.
    fn note_history(
        &mut self,
        key: &LockKey,
        state: &KeyState,
        event: Option<super::EventKind>,
        at: SystemTime,
    ) {
        use super::{Ended, EventKind};
        if state.liveness == Liveness::Error {
            // A probe that failed says nothing of the holder: its hold
            // stays open.
            return;
        }
        if state.liveness.is_held() {
            if let Some(holder) = state.holders.first() {
                self.history.held(key, holder, state.since, at);
            }
            return;
        }
        let ended = match event {
            Some(
                kind @ (EventKind::Released
                | EventKind::HolderExited
                | EventKind::KilledByLocktop
                | EventKind::Freed),
            ) => kind,
            _ => EventKind::Freed,
        };
        self.history.ended(key, at, Ended::Event(ended));
    }

    /// The lock node of `key`, if it is one.
    fn tree_lock(&self, key: &LockKey) -> Option<&Lock> {
        let id = self.tree.find(Section::of(key.kind()), key.name())?;
        self.lock(id)
    }

    /// Counts `key` (free) in the stale set.
    fn keep_stale(&mut self, key: LockKey) {
        self.counts.bump(key.kind(), &KeyState::FREE, true);
        self.stale_in[Section::of(key.kind()) as usize] += 1;
        if self.stale.len() < STALE_REMEMBERED {
            Arc::make_mut(&mut self.stale).insert(key);
        }
    }

    /// Uncounts the stale key `key` (and forgets its name).
    fn take_stale(&mut self, key: &LockKey) {
        if self.stale.contains(key) {
            Arc::make_mut(&mut self.stale).remove(key);
        }
        self.counts.bump(key.kind(), &KeyState::FREE, false);
        let section = &mut self.stale_in[Section::of(key.kind()) as usize];
        *section = section.saturating_sub(1);
    }

    /// Free keys of `section` not listed.
    pub(crate) fn unlisted_in(&self, section: Section) -> usize {
        self.stale_in[section as usize]
    }

    /// Takes `key`'s node out of the tree (uncounted), if it
    /// has one.
    fn remove_node(&mut self, key: &LockKey) {
        let Some(id) = self.tree.find(Section::of(key.kind()), key.name()) else {
            return;
        };
        if let Some(old) = self.tree.lock_mut(id).take() {
            self.counts.bump(old.key.kind(), &old.state, false);
            self.free_nodes -= usize::from(old.state.liveness == Liveness::Free);
        }
        self.tree.prune(id);
    }

    /// Free keys not listed: counted, and found by filtering.
    pub(crate) fn unlisted_free(&self) -> usize {
        self.stale_in.iter().sum()
    }

    /// Moves keys freed more than [`RECENTLY_FREED`] before `now` from
    /// the tree to the stale set (unless free keys are shown). Returns
    /// whether any moved.
    pub(crate) fn age_freed(&mut self, now: SystemTime) -> bool {
        let mut moved = false;
        while let Some((at, _)) = self.freed.front() {
            if now.duration_since(*at).unwrap_or_default() < RECENTLY_FREED {
                break;
            }
            let Some((at, key)) = self.freed.pop_front() else {
                break;
            };
            if self.show_free {
                continue;
            }
            let still_that_free = self
                .tree_lock(&key)
                .is_some_and(|lock| lock.state.is_bare_free() && lock.freed_at == Some(at));
            if still_that_free {
                self.remove_node(&key);
                self.keep_stale(key);
                moved = true;
            }
        }
        if moved {
            self.version += 1;
        }
        moved
    }

    /// Shows free keys (listing up to [`FREE_LISTED`], those matching
    /// `filter` — a substring of the name, ASCII case ignored — first) or
    /// hides them (every free key not freed recently leaves the tree).
    pub(crate) fn set_show_free(&mut self, show: bool, filter: &str, now: SystemTime) {
        self.show_free = show;
        self.version += 1;
        if show {
            return self.list_free(filter);
        }
        let hidden: Vec<LockKey> = self
            .tree
            .locks()
            .filter(|(_, lock)| lock.state.is_bare_free())
            .filter(|(_, lock)| {
                lock.freed_at
                    .is_none_or(|at| now.duration_since(at).unwrap_or_default() >= RECENTLY_FREED)
            })
            .map(|(_, lock)| lock.key.clone())
            .collect();
        for key in hidden {
            self.remove_node(&key);
            self.keep_stale(key);
        }
    }

    /// While free keys are shown: lists stale keys matching `filter` as
    /// nodes, the first by kind and name, up to [`FREE_LISTED`] free
    /// nodes.
    pub(crate) fn list_free(&mut self, filter: &str) {
        if !self.show_free || self.free_nodes >= FREE_LISTED {
            return;
        }
        let room = FREE_LISTED - self.free_nodes;
        let mut listed: Vec<LockKey> = self
            .stale
            .iter()
            .filter(|key| contains_ignore_ascii_case(key.name(), filter))
            .cloned()
            .collect();
        if listed.len() > room {
            listed.select_nth_unstable(room);
            listed.truncate(room);
        }
        if listed.is_empty() {
            return;
        }
        self.version += 1;
        for key in listed {
            self.take_stale(&key);
            let id = self.tree.ensure_key(&key);
            self.counts.bump(key.kind(), &KeyState::FREE, true);
            self.free_nodes += 1;
            *self.tree.lock_mut(id) = Some(Lock {
                key,
                state: free_state(),
                freed_at: None,
                flagged: None,
            });
        }
    }

    /// Logs each of `changes` that starts or ends a verdict needing
    /// attention (see [`crate::model::Verdict::is_logged`]) as of `at`,
    /// and notes it on its key. Nothing is logged before the initial
    /// scan's verdicts were noted (those are not events). Returns whether
    /// anything was logged.
    fn log_changes(&mut self, changes: Vec<Change>, at: SystemTime) -> bool {
        let log = self.verdicts_noted;
        let mut logged = false;
        for change in changes {
            let Some(id) = self
                .tree
                .find(Section::of(change.key.kind()), change.key.name())
            else {
                continue;
            };
            let Some(lock) = self.lock(id) else { continue };
            let verdict = change.to.filter(super::Verdict::is_logged);
            let word = verdict.as_ref().map(super::Verdict::word);
            if word == lock.flagged.map(|(word, _)| word) {
                continue;
            }
            let pid = verdict.as_ref().and_then(super::Verdict::pid);
            let pid = pid.or_else(|| lock.state.holders.first().map(|p| p.pid));
            // One verdict giving way to another ends the first (said of
            // the process it was about), then begins the second.
            let kinds: Vec<(EventKind, Option<u32>)> = lock
                .flagged
                .map(|(word, about)| (EventKind::Cleared(word), about))
                .into_iter()
                .chain(word.map(|word| (EventKind::Flagged(word), pid)))
                .collect();
            let command_of = |pid: Option<u32>| {
                lock.state
                    .holders
                    .iter()
                    .find(|p| Some(p.pid) == pid)
                    .and_then(|p| p.cmdline.clone())
            };
            let kinds: Vec<(EventKind, Option<u32>, Option<String>)> = kinds
                .into_iter()
                .map(|(kind, pid)| (kind, pid, command_of(pid)))
                .collect();
            let key = lock.key.clone();
            if let Some(lock) = self.tree.lock_mut(id).as_mut() {
                lock.flagged = word.map(|word| (word, pid));
            }
            if log {
                for (kind, pid, command) in kinds {
                    self.events.push(Event {
                        at,
                        kind,
                        key: key.clone(),
                        pid,
                        command,
                    });
                    logged = true;
                }
            }
        }
        if logged {
            self.version += 1;
        }
        logged
    }

    fn remove_key(&mut self, key: &LockKey) {
        if self.tree_lock(key).is_some() {
            self.remove_node(key);
        } else {
            self.take_stale(key);
        }
    }

    fn rebuild_problems(&mut self) {
        let root = self.tree.root(Section::Problems);
        let old: Vec<NodeId> = self.tree.node(root).children.values().copied().collect();
        for id in old {
            self.tree.set_problem(id, None);
            self.tree.prune(id);
        }
        let mut by_path: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for problem in &self.watcher.problems {
            by_path
                .entry(problem.path.display().to_string())
                .or_default()
                .push(problem.kind.describe());
        }
        for (path, descriptions) in by_path {
            let id = self.tree.ensure_problem(&path);
            self.tree.set_problem(id, Some(descriptions.join("; ")));
        }
        self.counts.problems = self.watcher.problems.len();
    }

    /// The node of `key`, when it has one.
    fn node_of(&self, key: &LockKey) -> Option<NodeId> {
        self.tree.find(Section::of(key.kind()), key.name())
    }

    /// The lock at `id`, if the node holds one.
    pub fn lock(&self, id: NodeId) -> Option<&Lock> {
        self.tree.node(id).lock.as_ref()
    }
}

/// The model's data folds the deltas into its tree (with counts, the
/// event log and the holders' history kept beside them).
impl Folder for Shown {
    fn watcher_mut(&mut self) -> &mut WatcherView {
        &mut self.watcher
    }

    fn liveness_of(&self, key: &LockKey) -> Option<Liveness> {
        let id = self.tree.find(Section::of(key.kind()), key.name())?;
        self.lock(id).map(Lock::liveness)
    }

    fn put(&mut self, key: LockKey, state: KeyState, previous: Option<Liveness>, at: SystemTime) {
        let state = match state.is_bare_free() {
            true => free_state(),
            false => Arc::new(state),
        };
        self.apply_key(key, state, previous, at);
    }

    fn put_shared(
        &mut self,
        key: LockKey,
        state: Arc<KeyState>,
        previous: Option<Liveness>,
        at: SystemTime,
    ) {
        self.apply_key(key, state, previous, at);
    }

    fn remove(&mut self, key: &LockKey, _: Liveness, at: SystemTime) {
        // (Its own verdict goes with its node: nothing to log.)
        self.history.ended(key, at, super::Ended::Removed);
        self.remove_key(key);
    }

    fn problems_replaced(&mut self) {
        self.rebuild_problems();
    }
}
