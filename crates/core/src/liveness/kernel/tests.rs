//! The kernel's events for real flocks made by real processes (util-linux
//! `flock(1)`) and by this test process. They need root (or CAP_PERFMON,
//! proved apart by re-running a test as `nobody`); without it each skips
//! with one line, and fails under `LOCKTOP_REQUIRE_ALL`.
//!
//! Other processes flock on the same devices while these run (other
//! tests do): every assertion is about the test's own files, found by
//! inode, and the tests that record run one at a time.

use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::event::monotonic_now;
use super::*;
use crate::liveness::proc_locks::FileId;
use crate::liveness::verify::testing::is_root_or_skip;

/// How long any one expected event may take to show: generous, it only
/// bounds a failing test (they are read within a millisecond).
const EVENT_TIMEOUT: Duration = Duration::from_secs(20);

/// Held by each test that records: every reader sees every flock on its
/// devices, so one test's burst would flood another's rings.
static RECORDING: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Held by a test elsewhere that floods a device with flocks (a million
/// in a few seconds): a recording test beside it would lose its own
/// events in the flood (its rings overflow) and fail for that alone.
pub(crate) fn flooding() -> std::sync::MutexGuard<'static, ()> {
    RECORDING
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// `Some` (holding [`RECORDING`]) when the test may open the events: root,
/// with tracefs mounted (mounted here when missing, as the module itself
/// never does).
pub(super) fn may_open(path: &str) -> Option<std::sync::MutexGuard<'static, ()>> {
    if !is_root_or_skip(
        path,
        "recording every process's flocks through perf_event_open needs root or CAP_PERFMON",
    ) {
        return None;
    }
    let guard = RECORDING
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if !Path::new("/sys/kernel/tracing/events").is_dir() {
        let mounted = Command::new("mount")
            .args(["-t", "tracefs", "nodev", "/sys/kernel/tracing"])
            .status()
            .expect("run mount");
        assert!(mounted.success(), "could not mount tracefs");
    }
    Some(guard)
}

fn open(devices: &[(u32, u32)], options: &Options) -> KernelLockEvents {
    KernelLockEvents::open(devices, options).unwrap_or_else(|refused| panic!("{refused}"))
}

fn device_of(path: &Path) -> (u32, u32) {
    let id = FileId::of(path).expect("stat");
    (id.major, id.minor)
}

/// A temp dir and a file in it.
/// Rings big enough that the other tests' flocks on the same filesystem,
/// running beside these, cannot fill them (8 MiB a CPU; root has no
/// `mlock` limit): an exact count stays exact.
fn roomy() -> Options {
    Options {
        ring_pages: 2048,
        ..Options::default()
    }
}

fn temp_file(name: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join(name);
    File::create(&path).expect("create");
    (dir, path)
}

/// The events on `file` among `records`.
fn on(file: FileId, records: &[Record]) -> Vec<LockEvent> {
    records
        .iter()
        .filter_map(|record| match record {
            Record::Event(event) if event.file == file => Some(*event),
            _ => None,
        })
        .collect()
}

/// Drains (into nothing) until no replaced filter's events sample any
/// more: from then on only the filters last set do.
fn settle_handovers(events: &mut KernelLockEvents) {
    let deadline = Instant::now() + EVENT_TIMEOUT;
    while events.handing_over() {
        assert!(Instant::now() < deadline, "a handover never ended");
        events.drain(&mut Vec::new());
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Drains into `seen` until `done(seen)`; panics with what was seen after
/// [`EVENT_TIMEOUT`].
fn drain_until(
    events: &mut KernelLockEvents,
    seen: &mut Vec<Record>,
    what: &str,
    done: impl Fn(&[Record]) -> bool,
) {
    let deadline = Instant::now() + EVENT_TIMEOUT;
    loop {
        events.drain(seen);
        if done(seen) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "no {what} within {EVENT_TIMEOUT:?}; seen: {seen:#?}"
        );
        events.wait(Duration::from_millis(100)).expect("poll");
    }
}

/// A util-linux `flock -x FILE` holding until dropped (or `release`d),
/// in a process group of its own so nothing is left behind.
struct Holder(Child);

impl Holder {
    fn new(file: &Path) -> Self {
        let mut child = Command::new("flock")
            .arg("-x")
            .arg(file)
            .args(["-c", "echo ready; cat >/dev/null"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .process_group(0)
            .spawn()
            .expect("spawn flock(1) (util-linux)");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("piped"))
            .read_line(&mut line)
            .expect("read ready");
        assert_eq!(line.trim(), "ready", "flock(1) did not lock");
        Self(child)
    }

    fn pid(&self) -> u32 {
        self.0.id()
    }

    /// Lets go: closes its stdin, and waits until it is gone.
    fn release(&mut self) {
        drop(self.0.stdin.take());
        let status = self.0.wait().expect("wait flock(1)");
        assert!(status.success(), "flock(1) holder: {status}");
    }
}

impl Drop for Holder {
    fn drop(&mut self) {
        let group = nix::unistd::Pid::from_raw(self.0.id() as i32);
        let _ = nix::sys::signal::killpg(group, nix::sys::signal::Signal::SIGKILL);
        let _ = self.0.wait();
    }
}

/// `LOCK_EX` then `LOCK_UN` on a temp file: a `Taken { exclusive }` with
/// its inode, device and PID, then an `Unlocked` of the same owner, in
/// order, stamped with the monotonic clock between the calls' bounds.
#[test]
fn an_exclusive_flock_and_its_unlock_are_seen_in_order() {
    let Some(_recording) =
        may_open("liveness::kernel::tests::an_exclusive_flock_and_its_unlock_are_seen_in_order")
    else {
        return;
    };
    let (_dir, path) = temp_file("claim");
    let id = FileId::of(&path).expect("stat");
    let mut events = open(&[(id.major, id.minor)], &roomy());
    assert!(events.layout_from_format(), "root reads the format file");

    let file = File::open(&path).expect("open");
    let before = monotonic_now();
    file.lock().expect("flock LOCK_EX");
    let locked = monotonic_now();
    file.unlock().expect("flock LOCK_UN");
    let after = monotonic_now();

    let mut seen = Vec::new();
    drain_until(&mut events, &mut seen, "unlock", |seen| {
        on(id, seen).len() >= 2
    });
    let mine = on(id, &seen);
    let pid = std::process::id();
    assert_eq!(
        mine.iter()
            .map(|event| (event.kind, event.pid))
            .collect::<Vec<_>>(),
        [
            (LockKind::Taken { exclusive: true }, pid),
            (LockKind::Unlocked { at_close: false }, pid),
        ]
    );
    assert_eq!(
        mine[0].owner, mine[1].owner,
        "the same open file description"
    );
    assert_ne!(mine[0].owner, 0);
    assert!(
        before <= mine[0].at && mine[0].at <= locked && mine[1].at <= after,
        "CLOCK_MONOTONIC times: {before} {} {locked} {} {after}",
        mine[0].at,
        mine[1].at
    );
    assert!(events.counters().events >= 2);
}

/// A blocking flock behind a holder is `Waiting` at once (seen while it
/// still waits), then `Taken` with the same PID and owner once the holder
/// lets go; the holder's exit is a close unlock of its own owner.
#[test]
fn a_blocked_waiter_is_waiting_at_once_then_takes_it() {
    let Some(_recording) =
        may_open("liveness::kernel::tests::a_blocked_waiter_is_waiting_at_once_then_takes_it")
    else {
        return;
    };
    let (_dir, path) = temp_file("claim");
    let id = FileId::of(&path).expect("stat");
    let mut events = open(&[(id.major, id.minor)], &roomy());

    let mut holder = Holder::new(&path);
    let mut waiter = Command::new("flock")
        .arg("-x")
        .arg(&path)
        .arg("true")
        .spawn()
        .expect("spawn flock(1)");
    let waiter_pid = waiter.id();
    let mut seen = Vec::new();
    let waits = |seen: &[Record]| {
        on(id, seen)
            .iter()
            .any(|event| event.pid == waiter_pid && matches!(event.kind, LockKind::Waiting { .. }))
    };
    drain_until(&mut events, &mut seen, "Waiting", waits);
    assert!(
        waiter.try_wait().expect("try_wait").is_none(),
        "the waiter still waits when its Waiting is seen"
    );

    holder.release();
    let status = waiter.wait().expect("wait the waiter");
    assert!(status.success(), "waiter: {status}");
    let closed = |seen: &[Record]| {
        on(id, seen).iter().any(|event| {
            event.pid == waiter_pid && event.kind == (LockKind::Unlocked { at_close: true })
        })
    };
    drain_until(&mut events, &mut seen, "the waiter's close", closed);

    let mine = on(id, &seen);
    let of = |pid| -> Vec<LockEvent> {
        mine.iter()
            .filter(|event| event.pid == pid)
            .copied()
            .collect()
    };
    let (held, waited) = (of(holder.pid()), of(waiter_pid));
    let kinds = |events: &[LockEvent]| events.iter().map(|e| e.kind).collect::<Vec<_>>();
    assert_eq!(
        kinds(&held),
        [
            LockKind::Taken { exclusive: true },
            LockKind::Unlocked { at_close: true }
        ],
        "{mine:#?}"
    );
    assert_eq!(held[0].owner, held[1].owner);
    assert_eq!(
        kinds(&waited),
        [
            LockKind::Waiting { exclusive: true },
            LockKind::Taken { exclusive: true },
            LockKind::Unlocked { at_close: true }
        ],
        "{mine:#?}"
    );
    assert!(waited.iter().all(|event| event.owner == waited[0].owner));
    assert_ne!(held[0].owner, waited[0].owner);
}

/// A waiter killed while queued leaves no event for the abandoned wait;
/// its last close, while the holder still holds, is a close unlock of the
/// waiter's own owner — and it never takes the lock.
#[test]
fn a_waiter_that_dies_leaves_only_its_close() {
    let Some(_recording) =
        may_open("liveness::kernel::tests::a_waiter_that_dies_leaves_only_its_close")
    else {
        return;
    };
    let (_dir, path) = temp_file("claim");
    let id = FileId::of(&path).expect("stat");
    let mut events = open(&[(id.major, id.minor)], &roomy());
    let holder = Holder::new(&path);
    let mut waiter = Command::new("flock")
        .arg("-x")
        .arg(&path)
        .arg("true")
        .spawn()
        .expect("spawn flock(1)");
    let waiter_pid = waiter.id();
    let mut seen = Vec::new();
    drain_until(&mut events, &mut seen, "Waiting", |seen| {
        on(id, seen).iter().any(|event| event.pid == waiter_pid)
    });
    waiter.kill().expect("SIGKILL the waiter");
    waiter.wait().expect("reap the waiter");
    drain_until(&mut events, &mut seen, "the waiter's close", |seen| {
        on(id, seen)
            .iter()
            .filter(|event| event.pid == waiter_pid)
            .count()
            >= 2
    });
    let waited: Vec<LockEvent> = on(id, &seen)
        .into_iter()
        .filter(|event| event.pid == waiter_pid)
        .collect();
    assert_eq!(
        waited.iter().map(|event| event.kind).collect::<Vec<_>>(),
        [
            LockKind::Waiting { exclusive: true },
            LockKind::Unlocked { at_close: true }
        ]
    );
    assert_eq!(waited[0].owner, waited[1].owner);
    drop(holder);
}

/// The taker exits while a forked process keeps the description: no
/// unlock then; the keeper's last close is the unlock, with the keeper's
/// PID and the taker's owner.
#[test]
fn a_forked_keeper_unlocks_at_its_last_close_with_the_takers_owner() {
    let Some(_recording) = may_open(
        "liveness::kernel::tests::a_forked_keeper_unlocks_at_its_last_close_with_the_takers_owner",
    ) else {
        return;
    };
    let (_dir, path) = temp_file("claim");
    let id = FileId::of(&path).expect("stat");
    let mut events = open(&[(id.major, id.minor)], &roomy());
    let (mut keeper, takers) =
        crate::liveness::verify::testing::hold_through_flock_naming(&[&path]);
    let taker = takers[0];
    let mut seen = Vec::new();
    drain_until(&mut events, &mut seen, "the taker's lock", |seen| {
        on(id, seen).iter().any(|event| event.pid == taker)
    });
    keeper.kill().expect("SIGKILL the keeper");
    keeper.wait().expect("reap the keeper");
    let keeper_pid = keeper.id();
    drain_until(&mut events, &mut seen, "the keeper's close", |seen| {
        on(id, seen).iter().any(|event| event.pid == keeper_pid)
    });
    let mine = on(id, &seen);
    assert_eq!(mine.len(), 2, "{mine:#?}");
    assert_eq!(
        (mine[0].pid, mine[0].kind),
        (taker, LockKind::Taken { exclusive: true })
    );
    assert_eq!(
        (mine[1].pid, mine[1].kind),
        (keeper_pid, LockKind::Unlocked { at_close: true })
    );
    assert_eq!(mine[0].owner, mine[1].owner);
}

/// 100 refused `LOCK_NB` tries on a held file are exactly 100 `Refused`
/// events; the tryer's close, though it never held, is a close unlock.
#[test]
fn refused_tries_are_counted_exactly() {
    let Some(_recording) = may_open("liveness::kernel::tests::refused_tries_are_counted_exactly")
    else {
        return;
    };
    let (_dir, path) = temp_file("claim");
    let id = FileId::of(&path).expect("stat");
    let mut events = open(&[(id.major, id.minor)], &roomy());
    let _holder = Holder::new(&path);

    let file = File::open(&path).expect("open");
    for _ in 0..100 {
        assert!(
            matches!(file.try_lock(), Err(std::fs::TryLockError::WouldBlock)),
            "the holder holds"
        );
    }
    drop(file);
    let pid = std::process::id();
    let mut seen = Vec::new();
    let closed = |seen: &[Record]| {
        on(id, seen)
            .iter()
            .any(|event| event.pid == pid && event.kind == (LockKind::Unlocked { at_close: true }))
    };
    drain_until(&mut events, &mut seen, "the tryer's close", closed);
    let mine: Vec<LockEvent> = on(id, &seen)
        .into_iter()
        .filter(|event| event.pid == pid)
        .collect();
    assert_eq!(mine.len(), 101, "{mine:#?}");
    assert!(
        mine[..100]
            .iter()
            .all(|event| event.kind == LockKind::Refused { exclusive: true })
    );
    assert!(!seen.iter().any(|record| matches!(record, Record::Lost(_))));
}

/// A tmpfs directory on another device than the temp dir: `/dev/shm`.
/// Without it, one line says so (a failure under `LOCKTOP_REQUIRE_ALL`).
fn another_device(than: (u32, u32)) -> Option<tempfile::TempDir> {
    let shm = Path::new("/dev/shm");
    let is_tmpfs = nix::sys::statfs::statfs(shm)
        .is_ok_and(|fs| fs.filesystem_type() == nix::sys::statfs::TMPFS_MAGIC);
    if is_tmpfs && device_of(shm) != than {
        return Some(tempfile::tempdir_in(shm).expect("temp dir in /dev/shm"));
    }
    let line = "skipped liveness::kernel::tests::the_device_filter_drops_other_devices_until_added: \
                /dev/shm is not a tmpfs apart from the temp dir (mount one there to run it)";
    assert!(std::env::var_os("LOCKTOP_REQUIRE_ALL").is_none(), "{line}");
    let _ = std::io::stderr().write_all(format!("{line}\n").as_bytes());
    None
}

/// Keeps the calling thread on `cpu` (a test's own thread, ended with it).
fn pin_to(cpu: u32) {
    let mut set = nix::sched::CpuSet::new();
    set.set(cpu as usize).expect("a CPU");
    nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &set).expect("pin");
}

/// Flocks `path` exclusively and lets go.
fn lock_and_unlock(path: &Path) {
    let file = File::open(path).expect("open");
    file.lock().expect("flock");
    file.unlock().expect("unlock");
}

/// Flocks on a device not watched are not delivered; after
/// `set_devices` adds it, they are.
#[test]
fn the_device_filter_drops_other_devices_until_added() {
    let Some(_recording) =
        may_open("liveness::kernel::tests::the_device_filter_drops_other_devices_until_added")
    else {
        return;
    };
    let (_dir, watched) = temp_file("claim");
    let watched_id = FileId::of(&watched).expect("stat");
    let Some(shm) = another_device((watched_id.major, watched_id.minor)) else {
        return;
    };
    let other = shm.path().join("claim");
    File::create(&other).expect("create");
    let other_id = FileId::of(&other).expect("stat");
    let mut events = open(&[(watched_id.major, watched_id.minor)], &roomy());

    // The other device's flock first: were it delivered, it would be in a
    // ring before the watched one's, so the drain that sees the watched one
    // sees it too.
    lock_and_unlock(&other);
    lock_and_unlock(&watched);
    let mut seen = Vec::new();
    drain_until(
        &mut events,
        &mut seen,
        "the watched file's events",
        |seen| on(watched_id, seen).len() >= 2,
    );
    assert_eq!(on(other_id, &seen), [], "filtered out by the kernel");

    events
        .set_devices(&[
            (watched_id.major, watched_id.minor),
            (other_id.major, other_id.minor),
        ])
        .expect("set devices");
    assert_eq!(events.devices().len(), 2);
    lock_and_unlock(&other);
    drain_until(
        &mut events,
        &mut seen,
        "the added device's events",
        |seen| on(other_id, seen).len() >= 2,
    );

    // None at all: nothing is sampled.
    events.set_devices(&[]).expect("no devices");
    lock_and_unlock(&watched);
    lock_and_unlock(&other);
    events
        .set_devices(&[(other_id.major, other_id.minor)])
        .expect("set");
    lock_and_unlock(&other);
    let before = on(watched_id, &seen).len();
    drain_until(
        &mut events,
        &mut seen,
        "the re-added device's events",
        |seen| on(other_id, seen).len() >= 4,
    );
    assert_eq!(on(watched_id, &seen).len(), before, "nothing while none");
    assert_eq!(on(other_id, &seen).len(), 4, "nothing while none");
}

/// An inode the filter drops costs no sample: its flocks are not
/// delivered, another file's on the device are; readmitted, it is
/// sampled again.
#[test]
fn an_inode_the_filter_drops_is_not_sampled_until_readmitted() {
    let Some(_recording) = may_open(
        "liveness::kernel::tests::an_inode_the_filter_drops_is_not_sampled_until_readmitted",
    ) else {
        return;
    };
    let (dir, foreign) = temp_file("foreign");
    let claim = dir.path().join("claim");
    File::create(&claim).expect("create");
    let (foreign_id, claim_id) = (
        FileId::of(&foreign).expect("stat"),
        FileId::of(&claim).expect("stat"),
    );
    let device = (foreign_id.major, foreign_id.minor);
    let mut events = open(&[device], &roomy());
    assert!(
        events
            .set_dropped(device, [foreign_id.inode].into())
            .expect("a filter dropping one inode"),
        "the filter changed"
    );
    assert_eq!(events.dropped(device), [foreign_id.inode].into());
    settle_handovers(&mut events);
    // The dropped file's flock first: were it delivered, the drain that
    // sees the claim's would see it too.
    lock_and_unlock(&foreign);
    lock_and_unlock(&claim);
    let mut seen = Vec::new();
    drain_until(&mut events, &mut seen, "the claim's events", |seen| {
        on(claim_id, seen).len() >= 2
    });
    assert_eq!(on(foreign_id, &seen), [], "dropped by the kernel");
    assert!(
        !events
            .set_dropped(device, [foreign_id.inode].into())
            .expect("the same set"),
        "the same set changes nothing"
    );

    events
        .set_dropped(device, Default::default())
        .expect("readmitted");
    lock_and_unlock(&foreign);
    drain_until(
        &mut events,
        &mut seen,
        "the readmitted file's events",
        |seen| on(foreign_id, seen).len() >= 2,
    );
    assert_eq!(events.counters().refilters, 2);
}

/// A quiet file that flocks [`quiet::HOT_EVENTS`] times is dropped by
/// its device's filter at the next count, and costs no sample from then
/// on; once it is a claim's (no longer quiet), the next readmission
/// samples it again and says so with one `Readmitted` record. A quiet
/// file that flocks less stays sampled.
#[test]
fn a_busy_quiet_file_is_dropped_and_readmitted_when_it_is_a_claims() {
    let Some(_recording) = may_open(
        "liveness::kernel::tests::a_busy_quiet_file_is_dropped_and_readmitted_when_it_is_a_claims",
    ) else {
        return;
    };
    let (dir, busy) = temp_file("busy");
    let calm = dir.path().join("calm");
    File::create(&calm).expect("create");
    let (busy_id, calm_id) = (
        FileId::of(&busy).expect("stat"),
        FileId::of(&calm).expect("stat"),
    );
    let device = (busy_id.major, busy_id.minor);
    let mut events = open(&[device], &roomy());
    let quiet = quiet::QuietFiles::default();
    quiet::write(&quiet).insert(busy_id);
    quiet::write(&quiet).insert(calm_id);
    let mut dropping = quiet::Dropping::new(quiet.clone());
    let flocks = quiet::HOT_EVENTS as usize / 2;
    for _ in 0..flocks {
        lock_and_unlock(&busy);
    }
    lock_and_unlock(&calm);
    let mut seen = Vec::new();
    drain_until(&mut events, &mut seen, "the busy file's events", |seen| {
        on(busy_id, seen).len() >= 2 * flocks && on(calm_id, seen).len() >= 2
    });
    dropping.count(&seen, &mut events);
    assert_eq!(
        events.dropped(device),
        [busy_id.inode].into(),
        "only the busy one"
    );
    assert!(quiet::read(&quiet).is_dropped(&busy_id));
    settle_handovers(&mut events);

    seen.clear();
    lock_and_unlock(&busy);
    lock_and_unlock(&calm);
    drain_until(&mut events, &mut seen, "the calm file's events", |seen| {
        on(calm_id, seen).len() >= 2
    });
    assert_eq!(on(busy_id, &seen), [], "dropped by the kernel");
    assert_eq!(
        dropping.readmit(&mut events),
        None,
        "still quiet: stays dropped"
    );

    quiet::write(&quiet).remove(&busy_id);
    assert_eq!(dropping.readmit(&mut events), Some(Record::Readmitted(1)));
    assert!(events.dropped(device).is_empty());
    assert!(!quiet::read(&quiet).is_dropped(&busy_id));
    lock_and_unlock(&busy);
    drain_until(
        &mut events,
        &mut seen,
        "the readmitted file's events",
        |seen| on(busy_id, seen).len() >= 2,
    );
}

/// A device's filter drops at most [`filter::MAX_DROPPED`] files: one
/// more hot file takes the slot of the file dropped longest ago, which is
/// sampled again (still quiet, so no `Readmitted`: nothing was missed).
#[test]
fn a_full_filter_samples_again_the_file_dropped_longest_ago() {
    let Some(_recording) = may_open(
        "liveness::kernel::tests::a_full_filter_samples_again_the_file_dropped_longest_ago",
    ) else {
        return;
    };
    let dir = tempfile::tempdir().expect("temp dir");
    let files: Vec<(PathBuf, FileId)> = (0..=filter::MAX_DROPPED)
        .map(|n| {
            let path = dir.path().join(format!("foreign-{n}"));
            File::create(&path).expect("create");
            let id = FileId::of(&path).expect("stat");
            (path, id)
        })
        .collect();
    let device = (files[0].1.major, files[0].1.minor);
    let mut events = open(&[device], &roomy());
    let quiet = quiet::QuietFiles::default();
    for (_, id) in &files {
        quiet::write(&quiet).insert(*id);
    }
    let mut dropping = quiet::Dropping::new(quiet.clone());
    let make_hot = |events: &mut KernelLockEvents, which: &[(PathBuf, FileId)]| {
        for (path, _) in which {
            let file = File::open(path).expect("open");
            for _ in 0..quiet::HOT_EVENTS / 2 {
                file.lock().expect("flock");
                file.unlock().expect("unlock");
            }
        }
        let mut seen = Vec::new();
        drain_until(events, &mut seen, "the hot files' events", |seen| {
            which
                .iter()
                .all(|(_, id)| on(*id, seen).len() >= quiet::HOT_EVENTS as usize)
        });
        seen
    };
    let (first, last) = files.split_at(filter::MAX_DROPPED);
    let seen = make_hot(&mut events, first);
    dropping.count(&seen, &mut events);
    assert_eq!(events.dropped(device).len(), filter::MAX_DROPPED);
    std::thread::sleep(quiet::REFILTER_EVERY);
    let seen = make_hot(&mut events, last);
    dropping.count(&seen, &mut events);
    let dropped = events.dropped(device);
    assert_eq!(dropped.len(), filter::MAX_DROPPED);
    // Dropped together, the first batch's files are in inode order.
    let oldest = first.iter().map(|(_, id)| *id).min().expect("files");
    let newest = last[0].1;
    assert!(
        dropped.contains(&newest.inode),
        "the newest hot file is dropped"
    );
    assert!(!dropped.contains(&oldest.inode), "the oldest made room");
    let quiet_now = quiet::read(&quiet);
    assert!(!quiet_now.is_dropped(&oldest) && quiet_now.contains(&oldest));
    drop(quiet_now);
    assert_eq!(dropping.readmit(&mut events), None, "nothing to readmit");
}

/// Replacing a device's filter, again and again, while another thread
/// flocks a file of that device as fast as it can and a third opens and
/// closes other readers' events on the same tracepoint (so that a hit's
/// walk of the CPU's event list may stand on theirs while the filters
/// change places): every flock is read exactly once — none missed, none
/// read twice where both filters sampled it (the reader drops the second
/// copy, which it counts: without that rule about 1.5× the flocks are
/// read). The race the grace period closes (see `handover`) is too rare
/// to force at this pace: an earlier version of this test, replacing
/// 10,000 times a run with no grace period, missed a flock in about one
/// run of 25 beside another reader's churn.
#[test]
fn replacing_a_filter_misses_no_flock_and_repeats_none() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let Some(_recording) =
        may_open("liveness::kernel::tests::replacing_a_filter_misses_no_flock_and_repeats_none")
    else {
        return;
    };
    let (dir, busy) = temp_file("busy");
    let other = dir.path().join("other");
    File::create(&other).expect("create");
    let (busy_id, other_id) = (
        FileId::of(&busy).expect("stat"),
        FileId::of(&other).expect("stat"),
    );
    let device = (busy_id.major, busy_id.minor);
    let mut events = open(&[device], &roomy());
    const REPLACEMENTS: usize = 24;
    let stop = std::sync::Arc::new(AtomicBool::new(false));
    let flocker = {
        let (busy, stop) = (busy.clone(), stop.clone());
        std::thread::spawn(move || {
            let file = File::open(&busy).expect("open");
            let mut flocks = 0;
            while !stop.load(Ordering::Acquire) {
                file.lock().expect("flock");
                file.unlock().expect("unlock");
                flocks += 1;
            }
            flocks
        })
    };
    let churner = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut opened = 0;
            while !stop.load(Ordering::Acquire) {
                drop(open(&[device], &Options::default()));
                opened += 1;
            }
            opened
        })
    };
    let mut seen = Vec::new();
    for replaced in 0..REPLACEMENTS {
        let dropped = if replaced % 2 == 0 {
            [other_id.inode].into()
        } else {
            Default::default()
        };
        events
            .set_dropped(device, dropped)
            .expect("replace the filter");
        // Paced so that the old events overlap without the reader waiting.
        let next = Instant::now() + Duration::from_millis(30);
        while Instant::now() < next {
            events.drain(&mut seen);
            events.wait(Duration::from_millis(5)).expect("poll");
        }
    }
    stop.store(true, Ordering::Release);
    let flocks = flocker.join().expect("the flocker");
    let opened = churner.join().expect("the churner");
    drain_until(&mut events, &mut seen, "every flock", |seen| {
        on(busy_id, seen).len() >= 2 * flocks
    });
    // Past the old events' grace periods: a late copy would be here now.
    grace::wait(grace::request());
    grace::wait(grace::request());
    events.drain(&mut seen);
    assert!(
        !seen.iter().any(|record| matches!(record, Record::Lost(_))),
        "a roomy ring loses nothing"
    );
    let mine = on(busy_id, &seen);
    let taken = mine
        .iter()
        .filter(|event| matches!(event.kind, LockKind::Taken { .. }))
        .count();
    assert_eq!(
        (taken, mine.len()),
        (flocks, 2 * flocks),
        "each flock and unlock once, over {REPLACEMENTS} replacements"
    );
    assert!(opened > 0, "other readers came and went meanwhile");
    assert!(
        events.counters().duplicates > 0,
        "both filters sampled some flock (else this proves nothing)"
    );
}

/// Records in a ring of four pages wrap past its end again and again (a
/// sample is 136 bytes, not a divisor of a page), and every one is read
/// whole and in order. (Other tests' flocks on the temp dir's device share
/// the ring: a round they overflowed is told by its `Lost` and skipped. A
/// child another test forks may hold this file's description when this
/// test closes it, and its exec then closes it last: that `Unlocked` is the
/// child's, so a round counts this process's events only.)
#[test]
fn records_wrapping_a_small_ring_are_read_whole() {
    let Some(_recording) =
        may_open("liveness::kernel::tests::records_wrapping_a_small_ring_are_read_whole")
    else {
        return;
    };
    let (_dir, path) = temp_file("claim");
    let id = FileId::of(&path).expect("stat");
    let options = Options {
        ring_pages: 4,
        ..Options::default()
    };
    let mut events = open(&[(id.major, id.minor)], &options);
    assert_eq!(events.ring_pages(), RingPages { asked: 4, got: 4 });
    let mut whole_rounds = 0;
    for _ in 0..100 {
        // A round's own events: a lost round's late ones are before this.
        let start = monotonic_now();
        let this_round = |seen: &[Record]| -> Vec<LockEvent> {
            on(id, seen)
                .into_iter()
                .filter(|event| event.at >= start && event.pid == std::process::id())
                .collect()
        };
        for _ in 0..5 {
            lock_and_unlock(&path);
        }
        let mut seen = Vec::new();
        drain_until(&mut events, &mut seen, "a round's events", |seen| {
            this_round(seen).len() >= 10 || seen.iter().any(|r| matches!(r, Record::Lost(_)))
        });
        if seen.iter().any(|record| matches!(record, Record::Lost(_))) {
            continue;
        }
        let mine = this_round(&seen);
        assert_eq!(mine.len(), 10, "{mine:#?}");
        for pair in mine.chunks(2) {
            assert_eq!(pair[0].kind, LockKind::Taken { exclusive: true });
            assert_eq!(pair[1].kind, LockKind::Unlocked { at_close: false });
            assert_eq!(pair[0].owner, pair[1].owner);
            assert!(pair[0].at <= pair[1].at);
        }
        whole_rounds += 1;
    }
    assert_eq!(events.counters().unreadable, 0);
    // 1,360 bytes a round: 50 rounds are over four laps of 16 KiB.
    assert!(
        whole_rounds >= 50,
        "only {whole_rounds} rounds without a loss"
    );
}

/// Two threads on two CPUs take turns flocking: one drain gives their
/// events merged across the two rings in time order.
#[test]
fn events_across_cpus_are_merged_in_time_order() {
    let path = "liveness::kernel::tests::events_across_cpus_are_merged_in_time_order";
    let Some(_recording) = may_open(path) else {
        return;
    };
    let cpus = cpus::online().expect("online CPUs");
    if cpus.len() < 2 {
        let line = format!("skipped {path}: needs two online CPUs");
        assert!(std::env::var_os("LOCKTOP_REQUIRE_ALL").is_none(), "{line}");
        let _ = std::io::stderr().write_all(format!("{line}\n").as_bytes());
        return;
    }
    let (_dir, file) = temp_file("claim");
    let id = FileId::of(&file).expect("stat");
    let mut events = open(&[(id.major, id.minor)], &roomy());

    // Each thread, pinned to its CPU, flocks when handed the turn.
    let turns = 50;
    let (to_second, second_turn) = std::sync::mpsc::channel::<()>();
    let (to_first, first_turn) = std::sync::mpsc::channel::<()>();
    std::thread::scope(|scope| {
        let second = cpus[1];
        let file = &file;
        scope.spawn(move || {
            pin_to(second);
            for _ in 0..turns {
                second_turn.recv().expect("turn");
                lock_and_unlock(file);
                to_first.send(()).expect("hand back");
            }
        });
        pin_to(cpus[0]);
        for _ in 0..turns {
            lock_and_unlock(file);
            to_second.send(()).expect("hand over");
            first_turn.recv().expect("turn back");
        }
    });

    let mut seen = Vec::new();
    events.drain(&mut seen);
    let mine = on(id, &seen);
    assert_eq!(mine.len(), 4 * turns, "all in one drain");
    assert!(
        mine.windows(2).all(|pair| pair[0].at <= pair[1].at),
        "in time order: {mine:#?}"
    );
    for pair in mine.chunks(2) {
        assert_eq!(pair[0].kind, LockKind::Taken { exclusive: true });
        assert_eq!(pair[1].kind, LockKind::Unlocked { at_close: false });
        assert_eq!(pair[0].owner, pair[1].owner);
    }
}

/// A burst larger than a one-page ring is reported, by the very next
/// drain, as a `Lost` record that accounts for every sample not delivered;
/// never silently nothing.
#[test]
fn a_burst_beyond_a_tiny_ring_is_reported_lost() {
    let Some(_recording) =
        may_open("liveness::kernel::tests::a_burst_beyond_a_tiny_ring_is_reported_lost")
    else {
        return;
    };
    let (_dir, path) = temp_file("claim");
    let id = FileId::of(&path).expect("stat");
    let options = Options {
        ring_pages: 1,
        ..Options::default()
    };
    let mut events = open(&[(id.major, id.minor)], &options);
    // 4,000 samples of 136 bytes; one page holds 30.
    for _ in 0..2000 {
        lock_and_unlock(&path);
    }
    let mut seen = Vec::new();
    events.drain(&mut seen);
    let lost: u64 = seen
        .iter()
        .map(|record| match record {
            Record::Lost(count) => *count,
            Record::Event(_) | Record::Readmitted(_) => 0,
        })
        .sum();
    let delivered = on(id, &seen).len() as u64;
    assert!(lost > 0, "no Lost record: {seen:#?}");
    assert!(
        matches!(seen.last(), Some(Record::Lost(_))),
        "the loss comes after what was read"
    );
    assert_eq!(events.counters().lost, lost);
    // Other processes' flocks on this device may be lost too.
    assert!(
        delivered + lost >= 4000,
        "every one of ours is delivered or counted lost: {delivered} + {lost}"
    );
    assert!(delivered < 4000, "a page cannot hold them all");
}

/// Samples a device lost before it was unwatched are still reported, by
/// the next drain.
#[test]
fn losses_of_a_device_unwatched_are_still_reported() {
    let Some(_recording) =
        may_open("liveness::kernel::tests::losses_of_a_device_unwatched_are_still_reported")
    else {
        return;
    };
    let (_dir, path) = temp_file("claim");
    let id = FileId::of(&path).expect("stat");
    let options = Options {
        ring_pages: 1,
        ..Options::default()
    };
    let mut events = open(&[(id.major, id.minor)], &options);
    for _ in 0..2000 {
        lock_and_unlock(&path);
    }
    events.set_devices(&[]).expect("unwatch");
    let mut seen = Vec::new();
    events.drain(&mut seen);
    let delivered = on(id, &seen).len() as u64;
    let Some(Record::Lost(lost)) = seen.last().copied() else {
        panic!("no Lost record last: {seen:#?}");
    };
    assert!(delivered + lost >= 4000, "{delivered} + {lost}");
    assert_eq!(events.counters().lost, lost);
}

/// Where events cannot count their losses (before Linux 6.0), the
/// kernel's own lost records report them, each with the next sample that
/// finds room on its CPU: flocks on every CPU bring them all.
#[test]
fn lost_records_report_losses_where_events_cannot_count_them() {
    let Some(_recording) = may_open(
        "liveness::kernel::tests::lost_records_report_losses_where_events_cannot_count_them",
    ) else {
        return;
    };
    let (_dir, path) = temp_file("claim");
    let id = FileId::of(&path).expect("stat");
    let options = Options {
        ring_pages: 1,
        ..Options::default()
    };
    let mut events = open(&[(id.major, id.minor)], &options);
    events.count_losses = false;
    for _ in 0..2000 {
        lock_and_unlock(&path);
    }
    let cpus = events.cpus();
    let mut seen = Vec::new();
    let deadline = Instant::now() + EVENT_TIMEOUT;
    loop {
        events.drain(&mut seen);
        let lost: u64 = seen
            .iter()
            .map(|record| match record {
                Record::Lost(count) => *count,
                Record::Event(_) | Record::Readmitted(_) => 0,
            })
            .sum();
        let delivered = on(id, &seen).len() as u64;
        if delivered + lost >= 4000 {
            assert_eq!(events.counters().lost, lost);
            break;
        }
        assert!(
            Instant::now() < deadline,
            "not all accounted for: {delivered} + {lost}"
        );
        // One flock on each CPU, for its ring's lost record to be written.
        std::thread::scope(|scope| {
            for &cpu in &cpus {
                let path = &path;
                scope.spawn(move || {
                    pin_to(cpu);
                    lock_and_unlock(path);
                });
            }
        });
    }
}

/// The engine's reader options: woken by the kernel only in storms.
fn nudged() -> Options {
    Options {
        wake_every: wait::WAKE_EVERY,
        ..roomy()
    }
}

/// A claim file in a directory of its own, the kernel's events of its
/// device read with `options`, and a runtime to await them on.
fn claim_and_reader(
    options: &Options,
) -> (
    tempfile::TempDir,
    PathBuf,
    FileId,
    KernelLockEvents,
    tokio::runtime::Runtime,
) {
    let (dir, path) = temp_file("claim");
    let id = FileId::of(&path).expect("stat");
    let events = open(&[(id.major, id.minor)], options);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    (dir, path, id, events, runtime)
}

/// A tokio task awaiting the reader wakes when a flock happens.
#[test]
fn the_reader_wakes_a_tokio_task() {
    let Some(_recording) = may_open("liveness::kernel::tests::the_reader_wakes_a_tokio_task")
    else {
        return;
    };
    let (_dir, path, id, events, runtime) = claim_and_reader(&roomy());
    let seen = runtime.block_on(async move {
        let mut events = AsyncKernelLockEvents::new(events).expect("registered");
        let flocker = std::thread::spawn(move || lock_and_unlock(&path));
        let mut seen = Vec::new();
        while on(id, &seen).len() < 2 {
            tokio::time::timeout(EVENT_TIMEOUT, events.next_batch(&mut seen))
                .await
                .expect("woken within the timeout")
                .expect("drained");
        }
        flocker.join().expect("flocker");
        assert!(events.reader().counters().events >= 2);
        seen
    });
    assert_eq!(on(id, &seen).len(), 2);
}

/// A reader the kernel wakes only every [`wait::WAKE_EVERY`] samples (as
/// the engine's) still hands over a lone flock's two events: it
/// drains on a nudge, and with none (within a second of the last
/// activity) at the backstop.
#[test]
fn a_reader_woken_only_in_storms_gets_lone_events_by_nudge_and_backstop() {
    let Some(_recording) = may_open(
        "liveness::kernel::tests::a_reader_woken_only_in_storms_gets_lone_events_by_nudge_and_backstop",
    ) else {
        return;
    };
    let (_dir, path, id, events, runtime) = claim_and_reader(&nudged());
    runtime.block_on(async move {
        let mut events = AsyncKernelLockEvents::new(events).expect("started");
        for nudged in [true, false] {
            lock_and_unlock(&path);
            if nudged {
                events.nudge().now();
            }
            let mut seen = Vec::new();
            while on(id, &seen).len() < 2 {
                tokio::time::timeout(EVENT_TIMEOUT, events.next_batch(&mut seen))
                    .await
                    .unwrap_or_else(|_| panic!("the pair handed over (nudged: {nudged})"))
                    .expect("drained");
            }
            assert_eq!(on(id, &seen).len(), 2, "nudged: {nudged}");
        }
    });
}

/// A flush is answered by a drain begun after it was asked, handed over
/// even when the rings are empty, with the records stamped before it: a
/// flock made before the flush is in its answer (or handed over before).
#[test]
fn a_flush_is_answered_by_a_later_drain_even_an_empty_one() {
    let Some(_recording) =
        may_open("liveness::kernel::tests::a_flush_is_answered_by_a_later_drain_even_an_empty_one")
    else {
        return;
    };
    let (_dir, path, id, events, runtime) = claim_and_reader(&nudged());
    runtime.block_on(async move {
        let mut events = AsyncKernelLockEvents::new(events).expect("started");
        let asked = monotonic_now();
        let mut seen = Vec::new();
        let began = tokio::time::timeout(EVENT_TIMEOUT, events.flush_stamped(&mut seen))
            .await
            .expect("an empty ring's flush is answered")
            .expect("drained");
        assert!(began >= asked, "answered by a drain begun after the ask");
        assert!(on(id, &seen).is_empty());
        lock_and_unlock(&path);
        let asked = monotonic_now();
        let began = tokio::time::timeout(EVENT_TIMEOUT, events.flush_stamped(&mut seen))
            .await
            .expect("answered")
            .expect("drained");
        assert!(began >= asked);
        let counters = events.reader().counters();
        assert_eq!(
            on(id, &seen).len(),
            2,
            "the pair made before the flush ({} records seen; {counters:?})",
            seen.len()
        );
    });
}

/// Set in a test re-run as `nobody`: what to do there.
const CHILD: &str = "LOCKTOP_KERNEL_TEST_CHILD";

/// Runs test `path` again as `nobody` (uid and gid 65534, no groups),
/// with `caps` (setpriv's `+perfmon` form) inherited and ambient, the
/// tracepoint id in the environment; returns its stdout.
fn as_nobody(path: &str, caps: Option<&str>, id: u64) -> String {
    let mut command = Command::new("setpriv");
    command.args(["--reuid=65534", "--regid=65534", "--clear-groups"]);
    if let Some(caps) = caps {
        command.args([
            format!("--inh-caps={caps}"),
            format!("--ambient-caps={caps}"),
        ]);
    }
    let out = command
        .arg(std::env::current_exe().expect("the test binary"))
        .args(["--exact", path, "--test-threads=1", "--nocapture"])
        .env(CHILD, id.to_string())
        .env_remove("LOCKTOP_REQUIRE_ALL")
        .current_dir("/")
        .output()
        .expect("run setpriv (util-linux)");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success() && stdout.contains(" 1 passed"),
        "{path} as nobody failed:\n{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// What the child printed after `prefix`, to the end of that line (the
/// harness prints the test's name before it, on the same line).
fn child_line<'a>(out: &'a str, prefix: &str) -> &'a str {
    let (_, after) = out
        .split_once(prefix)
        .unwrap_or_else(|| panic!("no {prefix:?} in:\n{out}"));
    after.lines().next().unwrap_or_default()
}

/// The tracepoint id, read as root.
fn tracepoint_id() -> u64 {
    let roots = TRACEFS_ROOTS.map(Path::new);
    Tracepoint::find(&roots, None).expect("as root").id
}

/// Refusals are typed and one line: an id that is not the tracepoint's;
/// a user without CAP_PERFMON, even given the id.
#[test]
fn a_refusal_is_typed_and_one_line() {
    let path = "liveness::kernel::tests::a_refusal_is_typed_and_one_line";
    if let Some(id) = std::env::var_os(CHILD) {
        let options = Options {
            tracepoint_id: Some(id.to_string_lossy().parse().expect("an id")),
            ..Options::default()
        };
        let refused = KernelLockEvents::open(&[(0, 1)], &options)
            .err()
            .expect("refused");
        println!("child refused: {refused:?} | {refused}");
        return;
    }
    let Some(_recording) = may_open(path) else {
        return;
    };
    let wrong = Options {
        tracepoint_id: Some(u64::from(u32::MAX)),
        ..Options::default()
    };
    let refused = KernelLockEvents::open(&[(0, 1)], &wrong)
        .err()
        .expect("refused");
    assert!(matches!(refused, Refused::WrongId { .. }), "{refused}");
    assert!(!refused.to_string().contains('\n'));

    let out = as_nobody(path, None, tracepoint_id());
    let line = child_line(&out, "child refused: ");
    assert!(line.starts_with("NotPermitted"), "{line}");
    assert!(line.contains("needs root or CAP_PERFMON"), "{line}");
}

/// `nobody` with CAP_PERFMON, given the id (it cannot read tracefs), reads
/// events with the measured layout; a ring beyond its `mlock` limit is
/// made smaller, and says so.
#[test]
fn cap_perfmon_with_the_id_reads_events_in_a_smaller_ring() {
    let path = "liveness::kernel::tests::cap_perfmon_with_the_id_reads_events_in_a_smaller_ring";
    if let Some(id) = std::env::var_os(CHILD) {
        // Bounded whatever the caller's limit: lowering is always allowed.
        let memlock = nix::sys::resource::Resource::RLIMIT_MEMLOCK;
        nix::sys::resource::setrlimit(memlock, 8 << 20, 8 << 20).expect("setrlimit");
        let (_dir, path) = temp_file("claim");
        let id_file = FileId::of(&path).expect("stat");
        let options = Options {
            ring_pages: 1 << 16,
            tracepoint_id: Some(id.to_string_lossy().parse().expect("an id")),
            ..Options::default()
        };
        let mut events = open(&[(id_file.major, id_file.minor)], &options);
        lock_and_unlock(&path);
        let mut seen = Vec::new();
        drain_until(&mut events, &mut seen, "events", |seen| {
            on(id_file, seen).len() >= 2
        });
        let kinds: Vec<LockKind> = on(id_file, &seen).iter().map(|e| e.kind).collect();
        println!(
            "child read: {kinds:?} format={} pages={:?} pid-ok={}",
            events.layout_from_format(),
            events.ring_pages(),
            on(id_file, &seen)[0].pid == std::process::id()
        );
        return;
    }
    let Some(_recording) = may_open(path) else {
        return;
    };
    let out = as_nobody(path, Some("+perfmon"), tracepoint_id());
    let line = child_line(&out, "child read: ");
    assert!(
        line.starts_with("[Taken { exclusive: true }, Unlocked { at_close: false }] format=false"),
        "{line}"
    );
    assert!(line.ends_with("pid-ok=true"), "{line}");
    assert!(line.contains("asked: 65536, got: "), "{line}");
    assert!(!line.contains("got: 65536"), "made smaller: {line}");
}

/// Where tracefs is mounted nowhere it is looked for, root still gets the
/// tracepoint: from a tracefs mounted in a private mount namespace of a
/// thread of its own. The host's mount table is the same afterwards, and
/// the id is the one the host's tracefs says.
#[test]
fn root_reads_the_tracepoint_from_a_private_tracefs_and_the_hosts_mounts_stay() {
    let path = "liveness::kernel::tests::root_reads_the_tracepoint_from_a_private_tracefs";
    let Some(_recording) = may_open(path) else {
        return;
    };
    let host_mounts = || std::fs::read_to_string("/proc/self/mountinfo").expect("mountinfo");
    let before = host_mounts();
    // A root with no tracefs in it: where the module looks finds nothing.
    let empty = tempfile::tempdir().expect("tempdir");
    let refused = Tracepoint::find(&[empty.path()], None).expect_err("nothing mounted there");
    assert!(matches!(refused, Refused::TracefsNotMounted), "{refused}");
    let found = Tracepoint::find_or_mount_privately(&[empty.path()], None).expect("as root");
    assert_eq!(host_mounts(), before, "the host's mount table is unchanged");
    assert!(
        std::fs::read_dir(empty.path())
            .expect("read")
            .next()
            .is_none(),
        "nothing is left mounted or written where it was mounted"
    );
    let roots = tracepoint::TRACEFS_ROOTS.map(Path::new);
    let on_the_host = Tracepoint::find(&roots, None).expect("the host's tracefs");
    assert_eq!(found.id, on_the_host.id);
    assert_eq!(found.layout, on_the_host.layout);
}
