//! The chaos scheduler: keeps [`Config::children`] `hold` children alive
//! over the key pool until the time is up, each with a random fate —
//! SIGKILLed right after spawn (possibly mid-acquisition) or at a random
//! moment, SIGSTOPped then continued or killed while stopped, or released
//! (stdin closed) once it holds. A third of them `--wait` (the SDK's wait)
//! for a busy family. Besides, one "lane" per [`LANE_TAGS`] tag retakes
//! its tag (a try, held briefly) as soon as the previous one is gone. At the end, the children that hold (running, not
//! stopped) are left holding for the convergence check; every other one is
//! killed and reaped.

use std::path::Path;
use std::time::{Duration, Instant};

use super::children::{ChaosChild, LANE_TAGS, Step, random_family};
use super::resources::Resources;
use crate::common::PROCESS_TIMEOUT;
use crate::common::engine::tag;

/// A waiter (or a slow try) not holding after this long is killed.
const NOT_HELD_CAP: Duration = Duration::from_secs(4);

/// The scheduler's period.
const TICK: Duration = Duration::from_millis(10);

/// At most this many spawns per tick (a busy try exits at once, and a
/// debug `locktop` takes a while to start on 2 cores).
const SPAWNS_PER_TICK: usize = 2;

/// How a run goes.
#[derive(Debug, Clone, Copy)]
pub struct Config {
    /// How long children keep being started.
    pub duration: Duration,
    /// The seed of every random choice.
    pub seed: u64,
    /// How many children on random families are kept alive (besides one
    /// per lane).
    pub children: usize,
}

/// What a run leaves.
pub struct Outcome {
    /// Every child that is gone (reaped).
    pub finished: Vec<ChaosChild>,
    /// Children left holding their family at the end (running, not stopped).
    pub kept: Vec<ChaosChild>,
    /// This process's fds and RSS half-way, and how many children were
    /// alive then (each costs this process 3 pipe fds).
    pub mid: (Resources, usize),
}

/// Runs the chaos on `state` (blocking: call from a blocking thread).
pub fn run(state: &Path, config: &Config) -> Outcome {
    let mut rng = fastrand::Rng::with_seed(config.seed);
    let start = Instant::now();
    let end = start + config.duration;
    let mut live: Vec<ChaosChild> = Vec::new();
    let mut finished = Vec::new();
    let mut spawned = 0;
    let mut mid = None;
    while Instant::now() < end {
        let now = Instant::now();
        for child in &mut live {
            child.poll();
            act(child, now, &mut rng);
        }
        let (gone, running): (Vec<_>, Vec<_>) = live.into_iter().partition(|c| !c.running());
        finished.extend(gone);
        live = running;
        let random = live.iter().filter(|c| !on_a_lane(c)).count();
        for _ in 0..SPAWNS_PER_TICK.min(config.children.saturating_sub(random)) {
            live.push(spawn(state, spawned, &mut rng));
            spawned += 1;
        }
        for lane in LANE_TAGS {
            if !live.iter().any(|c| c.keys.contains(&tag(lane))) {
                live.push(spawn_lane(state, spawned, lane, &mut rng));
                spawned += 1;
            }
        }
        if mid.is_none() && now >= start + config.duration / 2 {
            mid = Some((Resources::now(), live.len()));
        }
        std::thread::sleep(TICK);
    }
    let (kept, rest) = wind_down(live);
    finished.extend(rest);
    Outcome {
        finished,
        kept,
        mid: mid.expect("the run lasted past its middle"),
    }
}

/// A new child on a random family, try or wait, with a random fate.
fn spawn(state: &Path, id: usize, rng: &mut fastrand::Rng) -> ChaosChild {
    let wait = rng.u8(0..3) == 0;
    let mut child = ChaosChild::spawn(state, id, random_family(rng), wait);
    let fate = rng.u8(0..100);
    let then_kill = rng.bool();
    let mut ms = |lo: u64, hi: u64| Duration::from_millis(rng.u64(lo..hi));
    let at = child.spawned;
    let step = match fate {
        0..5 => (at, Step::Kill),
        5..25 => (at + ms(0, 1_500), Step::Kill),
        25..40 => (
            at + ms(0, 800),
            Step::Stop {
                for_: ms(100, 1_000),
                then_kill,
            },
        ),
        _ => (at + ms(20, 2_000), Step::Release),
    };
    child.next = Some(step);
    if step.1 == Step::Kill && step.0 == at {
        // Right after spawn: it may be starting, or mid-acquisition.
        child.kill();
    }
    child
}

/// Whether `child` is a lane's.
fn on_a_lane(child: &ChaosChild) -> bool {
    LANE_TAGS.iter().any(|lane| child.keys.contains(&tag(lane)))
}

/// A lane's try on its own tag, released 20–300 ms after it is spawned
/// (once it holds), or (one in ten) SIGKILLed at a random moment.
fn spawn_lane(state: &Path, id: usize, lane: &str, rng: &mut fastrand::Rng) -> ChaosChild {
    let family = (
        vec!["--group".to_string(), lane.to_string()],
        [tag(lane)].into(),
    );
    let mut child = ChaosChild::spawn(state, id, family, false);
    let later = child.spawned + Duration::from_millis(rng.u64(20..300));
    let step = if rng.u8(0..10) == 0 {
        Step::Kill
    } else {
        Step::Release
    };
    child.next = Some((later, step));
    child
}

/// Does what is due to `child`.
fn act(child: &mut ChaosChild, now: Instant, rng: &mut fastrand::Rng) {
    if !child.running() || child.end_action.is_some() {
        return;
    }
    let Some((when, step)) = child.next else {
        return;
    };
    if now < when {
        return;
    }
    match step {
        Step::Release if child.held.is_some() => {
            child.release();
            child.next = None;
        }
        Step::Release => {
            if now.duration_since(child.spawned) > NOT_HELD_CAP {
                child.kill();
                child.next = None;
            }
        }
        Step::Kill => {
            child.kill();
            child.next = None;
        }
        Step::Stop { for_, then_kill } => {
            child.stop();
            let then = if then_kill { Step::Kill } else { Step::Cont };
            child.next = Some((now + for_, then));
        }
        Step::Cont => {
            child.cont();
            let later = Duration::from_millis(rng.u64(50..800));
            child.next = Some((now + later, Step::Release));
        }
    }
}

/// Splits the children still alive at the end: those holding (running,
/// not stopped, not being released) stay; every other one is SIGKILLed
/// (or, if already released, left to exit) and reaped.
fn wind_down(mut live: Vec<ChaosChild>) -> (Vec<ChaosChild>, Vec<ChaosChild>) {
    for child in &mut live {
        child.poll();
    }
    let (kept, mut rest): (Vec<_>, Vec<_>) = live
        .into_iter()
        .partition(|c| c.running() && c.held.is_some() && !c.stopped && c.end_action.is_none());
    for child in &mut rest {
        if child.end_action.is_none() {
            child.kill();
        }
    }
    for child in &mut rest {
        child.reap(PROCESS_TIMEOUT);
    }
    (kept, rest)
}
