//! Where a kill's latency goes: the engine's trace
//! ([`locktop::engine::trace`]) of the key reported free last, stage by
//! stage, next to a raw inotify reader of the same directory in the same
//! run — the kernel's own delivery of the victim's closes, the floor no
//! watcher can beat.
//!
//! Each figure is a time since the SIGKILL was sent.

use std::collections::HashMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use inotify::{Inotify, WatchMask};
use locktop::disk::key::LockKey;
use locktop::engine::Liveness;
use locktop::engine::trace::{Record, Span, Stage};

use super::{fmt_dur, percentile};

/// A thread reading inotify itself (no notify, no engine): every
/// IN_CLOSE_WRITE in one directory, with when it was read. Stops when
/// dropped (at the next event of the directory).
pub struct RawInotify {
    closes: Arc<Mutex<Vec<(OsString, Instant)>>>,
    stop: Arc<AtomicBool>,
    dir: PathBuf,
}

impl RawInotify {
    /// Starts reading `dir`'s close-after-write events.
    pub fn start(dir: &Path) -> std::io::Result<Self> {
        let inotify = Inotify::init()?;
        inotify.watches().add(dir, WatchMask::CLOSE_WRITE)?;
        let closes = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (thread_closes, thread_stop) = (closes.clone(), stop.clone());
        std::thread::Builder::new()
            .name("raw-inotify".into())
            .spawn(move || {
                let mut inotify = inotify;
                let mut buffer = [0u8; 64 * 1024];
                while !thread_stop.load(Ordering::Relaxed) {
                    let Ok(events) = inotify.read_events_blocking(&mut buffer) else {
                        return;
                    };
                    let at = Instant::now();
                    let mut closes = thread_closes.lock().expect("raw inotify store");
                    for event in events {
                        if let Some(name) = event.name {
                            closes.push((name.to_os_string(), at));
                        }
                    }
                }
            })?;
        Ok(Self {
            closes,
            stop,
            dir: dir.to_path_buf(),
        })
    }

    /// Forgets every close read so far.
    pub fn forget(&self) {
        self.closes.lock().expect("raw inotify store").clear();
    }

    /// When the last of `keys`' files was first seen closed after `since`
    /// (`None` if one was not seen at all); forgets everything read so far.
    pub fn all_closed(&self, keys: &[LockKey], since: Instant) -> Option<Duration> {
        let closes = std::mem::take(&mut *self.closes.lock().expect("raw inotify store"));
        last_closed(&closes, keys, since)
    }

    /// [`RawInotify::all_closed`], but waiting until `deadline` for the
    /// reader to see them (its thread may run after the watcher it is
    /// compared with, e.g. beside CPU hogs); forgets nothing.
    pub fn wait_closed(
        &self,
        keys: &[LockKey],
        since: Instant,
        deadline: Instant,
    ) -> Option<Duration> {
        loop {
            let closes = self.closes.lock().expect("raw inotify store");
            if let Some(last) = last_closed(&closes, keys, since) {
                return Some(last);
            }
            drop(closes);
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

/// When the last of `keys`' files was first seen closed in `closes` after
/// `since` (`None` if one was not).
fn last_closed(
    closes: &[(OsString, Instant)],
    keys: &[LockKey],
    since: Instant,
) -> Option<Duration> {
    let mut last = Duration::ZERO;
    for key in keys {
        for path in [key.gate_path(), key.announce_path()] {
            let name = path.file_name()?;
            let first = closes
                .iter()
                .filter(|(closed, at)| closed == name && *at >= since)
                .map(|(_, at)| at.duration_since(since))
                .min()?;
            last = last.max(first);
        }
    }
    Some(last)
}

impl Drop for RawInotify {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        // Wake the reader: one close in its directory.
        let _ = tempfile::tempfile_in(&self.dir);
    }
}

/// The keys of tags `names` under `state`: a victim's, for
/// [`RawInotify::all_closed`].
pub fn tag_keys(state: &Path, names: &[String]) -> Vec<LockKey> {
    names
        .iter()
        .map(|name| {
            let (dir, key) = locktop::locks::agent_tag_lock(state, name);
            LockKey::from_coord(state, &dir, &key)
        })
        .collect()
}

/// One kill's way through the engine, for the key reported free last:
/// each stage as a time since the kill (`None` where it did not happen,
/// e.g. a free state found by a sweep, not by a probe).
#[derive(Debug, Clone, Default)]
pub struct KillPath {
    /// The kernel's delivery: the raw reader saw every file of every
    /// victim key closed.
    pub raw_all_closed: Option<Duration>,
    /// The watcher thread was first handed an event of the key.
    pub first_read: Option<Duration>,
    /// The watcher thread was handed the event that led to the free probe.
    pub read: Option<Duration>,
    /// The engine loop took that change from its queue.
    pub dequeued: Option<Duration>,
    /// The free probe began.
    pub probe_start: Option<Duration>,
    /// The free probe answered.
    pub probed: Option<Duration>,
    /// The free delta was sent.
    pub sent: Option<Duration>,
    /// This bench received it.
    pub received: Duration,
    /// Probes of the key after the kill, with their answers, in order.
    pub probes: Vec<Liveness>,
    /// Deltas sent for the key after the kill, in order.
    pub sent_states: Vec<Liveness>,
    /// The engine loop's own work between the kill and the free probe
    /// (what it was doing instead): what, begun when, for how long.
    pub busy: Vec<(&'static str, usize, Duration, Duration)>,
}

impl KillPath {
    /// The path of `key` (reported free to this bench at `received`) from
    /// the trace `records` (taken after the kill at `t0`).
    pub fn of(
        key: &LockKey,
        records: &[Record],
        spans: &[Span],
        t0: Instant,
        received: Instant,
    ) -> Self {
        let mine: Vec<&Record> = records
            .iter()
            .filter(|r| r.at >= t0 && &r.key == key)
            .collect();
        let since = |at: Instant| at.duration_since(t0);
        let last_before = |limit: Instant, want: &dyn Fn(Stage) -> bool| {
            mine.iter()
                .rev()
                .find(|r| r.at <= limit && want(r.stage))
                .map(|r| r.at)
        };
        let sent = last_before(received, &|s| s == Stage::Sent(Liveness::Free));
        let probe_start = sent.and_then(|at| last_before(at, &|s| s == Stage::ProbeStart));
        let probed = probe_start.and_then(|start| {
            mine.iter()
                .find(|r| r.at >= start && matches!(r.stage, Stage::Probed(_)))
                .map(|r| r.at)
        });
        let dequeued = probe_start.and_then(|at| last_before(at, &|s| s == Stage::Dequeued));
        let read = dequeued.and_then(|at| last_before(at, &|s| s == Stage::Read));
        let until = probe_start.unwrap_or(received);
        let busy = spans
            .iter()
            .filter(|span| span.to >= t0 && span.from <= until)
            .map(|span| {
                let from = span.from.max(t0);
                (
                    span.what,
                    span.items,
                    since(from),
                    span.to.duration_since(from),
                )
            })
            .collect();
        Self {
            busy,
            raw_all_closed: None,
            first_read: mine
                .iter()
                .find(|r| r.stage == Stage::Read)
                .map(|r| since(r.at)),
            read: read.map(since),
            dequeued: dequeued.map(since),
            probe_start: probe_start.map(since),
            probed: probed.map(since),
            sent: sent.map(since),
            received: since(received),
            probes: mine
                .iter()
                .filter_map(|r| match r.stage {
                    Stage::Probed(liveness) => Some(liveness),
                    _ => None,
                })
                .collect(),
            sent_states: mine
                .iter()
                .filter_map(|r| match r.stage {
                    Stage::Sent(liveness) => Some(liveness),
                    _ => None,
                })
                .collect(),
        }
    }

    /// One line: every stage's time since the kill.
    pub fn line(&self) -> String {
        let at = |d: Option<Duration>| d.map_or_else(|| "—".to_string(), fmt_dur);
        let words = |states: &[Liveness]| {
            states
                .iter()
                .map(|l| l.as_str())
                .collect::<Vec<_>>()
                .join(",")
        };
        let busy = self
            .busy
            .iter()
            .map(|(what, items, from, took)| {
                format!(
                    "{what} ({items}) at {} for {}",
                    fmt_dur(*from),
                    fmt_dur(*took)
                )
            })
            .collect::<Vec<_>>()
            .join(", ");
        format!(
            "raw inotify all closed {} · engine: first event read {} · free's event read {} · \
             dequeued {} · probe {}–{} · sent {} · received {} (probes after the kill: [{}]; sent: [{}]; \
             the loop's own work meanwhile: [{busy}])",
            at(self.raw_all_closed),
            at(self.first_read),
            at(self.read),
            at(self.dequeued),
            at(self.probe_start),
            at(self.probed),
            at(self.sent),
            fmt_dur(self.received),
            words(&self.probes),
            words(&self.sent_states),
        )
    }
}

/// Median and p99 of each stage over `paths`, one line each, and the
/// path of the slowest kill.
pub fn report(paths: &[KillPath]) -> Vec<String> {
    if paths.is_empty() {
        return vec!["no kill traced".into()];
    }
    let stage = |name: &str, of: &dyn Fn(&KillPath) -> Option<Duration>| {
        let samples: Vec<Duration> = paths.iter().filter_map(of).collect();
        format!(
            "{name:<34} median {:>8}  p99 {:>8}  (n={})",
            fmt_dur(percentile(&samples, 50.0)),
            fmt_dur(percentile(&samples, 99.0)),
            samples.len()
        )
    };
    let mut lines = vec![
        stage("raw inotify: all victim files closed", &|p| {
            p.raw_all_closed
        }),
        stage("engine: first event of the key read", &|p| p.first_read),
        stage("engine: the free probe's event read", &|p| p.read),
        stage("engine: dequeued", &|p| p.dequeued),
        stage("engine: probe started", &|p| p.probe_start),
        stage("engine: probe answered", &|p| p.probed),
        stage("engine: delta sent", &|p| p.sent),
        stage("bench: delta received", &|p| Some(p.received)),
    ];
    let mut by_count: HashMap<usize, usize> = HashMap::new();
    for path in paths {
        *by_count.entry(path.probes.len()).or_default() += 1;
    }
    let mut counts: Vec<(usize, usize)> = by_count.into_iter().collect();
    counts.sort();
    lines.push(format!(
        "probes of that key after the kill (count: kills): {}",
        counts
            .iter()
            .map(|(probes, kills)| format!("{probes}: {kills}"))
            .collect::<Vec<_>>()
            .join(", ")
    ));
    if let Some(slowest) = paths.iter().max_by_key(|p| p.received) {
        lines.push(format!("slowest: {}", slowest.line()));
    }
    // What kept the loop from the kills over 20 ms.
    let slow: Vec<&KillPath> = paths
        .iter()
        .filter(|p| p.received > Duration::from_millis(20))
        .collect();
    let mut blamed: HashMap<&'static str, (usize, Duration)> = HashMap::new();
    for path in &slow {
        for (what, _, _, took) in &path.busy {
            let entry = blamed.entry(what).or_default();
            entry.0 += 1;
            entry.1 = entry.1.max(*took);
        }
    }
    let mut blamed: Vec<_> = blamed.into_iter().collect();
    blamed.sort_by_key(|(_, (count, longest))| {
        (std::cmp::Reverse(*count), std::cmp::Reverse(*longest))
    });
    lines.push(format!(
        "kills over 20 ms: {} of {}; the loop's own work during them (kills: longest): {}",
        slow.len(),
        paths.len(),
        if blamed.is_empty() {
            "none over 1 ms".to_string()
        } else {
            blamed
                .iter()
                .map(|(what, (count, longest))| format!("{what} ({count}: {})", fmt_dur(*longest)))
                .collect::<Vec<_>>()
                .join(", ")
        }
    ));
    for path in slow.iter().take(5) {
        lines.push(format!("over 20 ms: {}", path.line()));
    }
    lines
}
