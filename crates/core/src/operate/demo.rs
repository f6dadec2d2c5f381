//! A simulated swarm of agents for demos: realistic AIHs
//! (`cli/daemon/<22-char id>-<response id>`, sub-agents nested under their
//! parents), bound and grouped tags, holders that come and go, one that
//! dies by SIGKILL now and then, and one long-lived holder that keeps a tag
//! — a stuck relocation.
//!
//! One of each verdict shows on the first screen: the stuck tag is
//! `contended` (and watched), an agent stopped itself, and [`verdicts`]
//! adds a spawn stuck materializing, a lock kept by an orphaned child and
//! two agents in a deadlock.
//!
//! Invariants: every swarm member is a `locktop hold` child that dies with
//! this process (parent-death signal + stdin EOF); [`Swarm::stop`] releases
//! them all and waits for them; the extras die with it too (see
//! [`verdicts`]).

pub mod verdicts;

use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::locks::Family;
use crate::operate::hold_protocol::HoldLine;
use crate::operate::signal::{signal_child, terminate_child};
use crate::operate::test_holders::child::{ChildHolder, spawn_hold_dying_by};
use nix::sys::signal::Signal;

/// The tag the stuck holder keeps.
pub(crate) const STUCK_TAG: &str = "research: v2.1";

/// The tag of the agent that stopped itself (SIGSTOP) while holding it.
pub(crate) const STOPPED_TAG: &str = "weekly digest";

/// The tag a spawn holds without ever claiming its AIH lock.
pub(crate) const MATERIALIZING_TAG: &str = "draft: q3 plan";

const TAGS: &[&str] = &[
    "triage",
    "summarize.v3",
    "code review",
    "nightly-report",
    "search:web",
    "translate fr",
    "ops/oncall",
    "billing",
];

/// A running swarm.
pub struct Swarm {
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<()>>,
}

impl Swarm {
    /// Starts the swarm on `state_dir`, spawning `exe hold …` children.
    pub fn start(exe: PathBuf, state_dir: PathBuf, seed: u64) -> Self {
        let (stop, stop_rx) = oneshot::channel();
        let task = tokio::spawn(run(exe, state_dir, seed, stop_rx));
        Self {
            stop: Some(stop),
            task: Some(task),
        }
    }

    /// Releases every member (SIGTERM) and waits for them to exit.
    pub async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

/// A 22-character base62 agent id, as ObjectiveAI mints them.
fn base62(rng: &mut fastrand::Rng, len: usize) -> String {
    const ALPHABET: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
    (0..len)
        .map(|_| ALPHABET[rng.usize(..ALPHABET.len())] as char)
        .collect()
}

/// `<22-char agent id>-<response id>`.
fn leaf(rng: &mut fastrand::Rng) -> String {
    format!("{}-{}", base62(rng, 22), base62(rng, 17))
}

struct Member {
    holder: ChildHolder,
    aih: Option<String>,
}

async fn start_member(exe: &Path, state_dir: &Path, family: Family) -> Option<Member> {
    start_member_dying_by(exe, state_dir, family, libc::SIGTERM).await
}

async fn start_member_dying_by(
    exe: &Path,
    state_dir: &Path,
    family: Family,
    death_signal: libc::c_int,
) -> Option<Member> {
    let aih = match &family {
        Family::Hierarchy { aih, .. } => Some(aih.clone()),
        Family::Group(_) => None,
    };
    let mut holder = spawn_hold_dying_by(exe, state_dir, &family, false, death_signal).ok()?;
    // Wait for "held"; a busy family exits 1 and is simply skipped.
    let held = tokio::time::timeout(Duration::from_secs(5), holder.lines.next_line()).await;
    match held {
        Ok(Ok(Some(line))) if matches!(HoldLine::parse(&line), Some(HoldLine::Held { .. })) => {
            Some(Member { holder, aih })
        }
        _ => None,
    }
}

fn terminate(member: &Member) {
    if let Some(pid) = member.holder.pid() {
        let _ = terminate_child(pid);
    }
}

async fn run(exe: PathBuf, state_dir: PathBuf, seed: u64, mut stop: oneshot::Receiver<()>) {
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut members: Vec<Member> = Vec::new();

    let Fixed {
        stopped,
        spawn,
        extras,
    } = start_fixed(&exe, &state_dir, &mut rng, &mut members).await;

    let mut tick: u64 = 0;
    loop {
        // Reap members that died meanwhile (an operator's K, for one), so
        // they neither linger as zombies nor count as alive.
        members.retain_mut(|member| !matches!(member.holder.child.try_wait(), Ok(Some(_))));
        // Keep 6–10 agents alive, some with sub-agents and bound tags.
        let live_agents = members.iter().filter(|m| m.aih.is_some()).count();
        if live_agents < 6 || (live_agents < 10 && rng.bool()) {
            let parent = members
                .iter()
                .skip(1)
                .filter_map(|m| m.aih.clone())
                .nth(rng.usize(..live_agents.max(1)));
            let aih = match parent {
                Some(parent) if rng.u8(..3) == 0 => format!("{parent}/{}", leaf(&mut rng)),
                _ => format!("cli/daemon/{}", leaf(&mut rng)),
            };
            let tags = if rng.bool() {
                vec![TAGS[rng.usize(..TAGS.len())].to_string()]
            } else {
                vec![]
            };
            members.extend(start_member(&exe, &state_dir, Family::Hierarchy { aih, tags }).await);
        } else if members.len() > 3 {
            // Release one (never the stuck holder, index 0).
            let index = 1 + rng.usize(..members.len() - 1);
            let member = members.remove(index);
            if tick % 7 == 6 {
                let mut member = member;
                let _ = member.holder.child.start_kill();
                let _ = member.holder.child.wait().await;
            } else {
                terminate(&member);
                let mut member = member;
                let _ = member.holder.child.wait().await;
            }
        }
        tick += 1;
        let pause = Duration::from_millis(700 + rng.u64(..900));
        tokio::select! {
            _ = tokio::time::sleep(pause) => {}
            _ = &mut stop => break,
        }
    }
    if let Some(pid) = stopped.as_ref().and_then(|m| m.holder.pid()) {
        // Continued first: a stopped process would not act on SIGTERM.
        let _ = signal_child(pid, Signal::SIGCONT);
    }
    members.extend(stopped);
    members.extend(spawn);
    extras.stop().await;
    for member in &members {
        terminate(member);
    }
    for mut member in members {
        let _ = tokio::time::timeout(Duration::from_secs(5), member.holder.child.wait()).await;
    }
}

/// The members kept out of the churn (besides the stuck holder, first in
/// `members`).
struct Fixed {
    stopped: Option<Member>,
    spawn: Option<Member>,
    extras: verdicts::Extras,
}

/// Leaves stale keys behind, then starts the stuck holder and the grouped
/// family (into `members`) and the fixed members.
async fn start_fixed(
    exe: &Path,
    state_dir: &Path,
    rng: &mut fastrand::Rng,
    members: &mut Vec<Member>,
) -> Fixed {
    // Stale keys: agents that came and went before the monitor started.
    for _ in 0..4 {
        let family = Family::Hierarchy {
            aih: format!("cli/daemon/{}", leaf(rng)),
            tags: vec![],
        };
        if let Some(member) = start_member(exe, state_dir, family).await {
            terminate(&member);
            let mut member = member;
            let _ = member.holder.child.wait().await;
        }
    }
    // The stuck relocation: a long-lived spawn child keeping a bound tag.
    let stuck = Family::Hierarchy {
        aih: format!("cli/daemon/{}", leaf(rng)),
        tags: vec![STUCK_TAG.to_string()],
    };
    let stuck_aih = match &stuck {
        Family::Hierarchy { aih, .. } => aih.clone(),
        Family::Group(_) => unreachable!("a hierarchy"),
    };
    members.extend(start_member(exe, state_dir, stuck).await);
    let pair = [
        format!("cli/daemon/{}", leaf(rng)),
        format!("cli/daemon/{}", leaf(rng)),
    ];
    let pair = [pair[0].as_str(), pair[1].as_str()];
    let extras = verdicts::Extras::start(exe, state_dir, STUCK_TAG, &stuck_aih, pair).await;
    // A spawn that never claims its agent: kept out of the churn below.
    let spawn = Family::Group(vec![MATERIALIZING_TAG.to_string()]);
    let spawn = start_member(exe, state_dir, spawn).await;
    // A grouped (un-upgraded) tag family.
    let group = Family::Group(vec!["team alpha".into(), "team beta".into()]);
    members.extend(start_member(exe, state_dir, group).await);
    // An agent backgrounded from a shell that stopped itself (`Stopped
    // (tty input)`): it holds its family until SIGCONT or a kill. Kept out
    // of the churn below.
    let stopped_family = Family::Hierarchy {
        aih: format!("cli/daemon/{}", leaf(rng)),
        tags: vec![STOPPED_TAG.to_string()],
    };
    // SIGKILL if this process dies: a stopped holder acts on no SIGTERM.
    let stopped = start_member_dying_by(exe, state_dir, stopped_family, libc::SIGKILL).await;
    if let Some(pid) = stopped.as_ref().and_then(|m| m.holder.pid()) {
        let _ = signal_child(pid, Signal::SIGSTOP);
    }

    Fixed {
        stopped,
        spawn,
        extras,
    }
}
