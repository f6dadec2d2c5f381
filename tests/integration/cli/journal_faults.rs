//! History under faults, with real `record` and `serve --journal`
//! processes and real files: two writers started together (never both
//! running), a rotated set with each middle part deleted (said missing,
//! never "not recorded", its time never answered), a closed stderr
//! (never a panic), and `serve --journal` on a tmpfs filled and then
//! grown (seen in `/healthz` and `/metrics`, and resumed with the gap
//! said).

use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{self, Signal};
use nix::unistd::Pid;

use crate::common::{Holder, finish, locktop_command, state_in_tempdir, wait_with_timeout};

/// How long a process may take to start, refuse or stop.
const PROCESS_TIMEOUT: Duration = Duration::from_secs(15);

fn record(state: &Path, out: &Path, extra: &[&str]) -> Child {
    let mut args = vec!["record", "--out", out.to_str().expect("utf-8")];
    args.extend_from_slice(extra);
    locktop_command(state, &args)
        .stdout(Stdio::null())
        .spawn()
        .expect("spawn record")
}

fn stop(child: &mut Child) -> std::process::ExitStatus {
    signal::kill(Pid::from_raw(child.id() as i32), Signal::SIGTERM).expect("SIGTERM");
    wait_with_timeout(child, PROCESS_TIMEOUT).expect("stops after SIGTERM")
}

fn replay(files: &[PathBuf], args: &[&str]) -> crate::common::Finished {
    finish(super::journal::replay(files, args))
}

#[test]
fn two_recorders_started_together_never_both_write_one_file() {
    let (tmp, state) = state_in_tempdir();
    let _holder = Holder::hold(&state, &["--aih", "team/one", "--tag", "t"]);
    for trial in 0..crate::common::cases(20) {
        let out = tmp.path().join(format!("j{trial}.jsonl"));
        // Rotating, so that an existing file would not refuse the second
        // by itself: only the lock may.
        let extra = ["--max-size", "1M", "--keep", "5"];
        let mut first = record(&state, &out, &extra);
        let mut second = record(&state, &out, &extra);
        let deadline = Instant::now() + PROCESS_TIMEOUT;
        let (mut loser, mut winner) = loop {
            if first.try_wait().expect("try_wait").is_some() {
                break (first, second);
            }
            if second.try_wait().expect("try_wait").is_some() {
                break (second, first);
            }
            assert!(Instant::now() < deadline, "trial {trial}: both still run");
            std::thread::sleep(Duration::from_millis(10));
        };
        let refused = loser.wait_with_output_of_stderr();
        assert_eq!(refused.0, Some(2), "trial {trial}: {}", refused.1);
        assert!(
            refused.1.contains("being recorded by another locktop"),
            "trial {trial}: {}",
            refused.1
        );
        assert!(
            winner.try_wait().expect("try_wait").is_none(),
            "trial {trial}: the first writer stopped too"
        );
        super::journal::wait_first_checkpoint(&out);
        assert!(stop(&mut winner).success());
        let read = replay(&[out], &["--at", "-0s"]);
        assert_eq!(read.code(), 0, "trial {trial}: {}", read.stderr);
        assert!(
            !read.stderr.contains("warning"),
            "trial {trial}: {}",
            read.stderr
        );
        assert!(read.stdout.contains("team/one"), "{}", read.stdout);
    }
}

/// The exit code and stderr of a child that has exited.
trait StderrOf {
    fn wait_with_output_of_stderr(&mut self) -> (Option<i32>, String);
}

impl StderrOf for Child {
    fn wait_with_output_of_stderr(&mut self) -> (Option<i32>, String) {
        let status = self.wait().expect("wait");
        let mut text = String::new();
        if let Some(mut stderr) = self.stderr.take() {
            let _ = std::io::Read::read_to_string(&mut stderr, &mut text);
        }
        (status.code(), text)
    }
}

#[test]
fn serve_journal_into_a_recorded_place_is_refused() {
    let (tmp, state) = state_in_tempdir();
    let _first = Holder::hold(&state, &["--aih", "team/first"]);
    let dir = tmp.path().join("history");
    std::fs::create_dir_all(&dir).expect("mkdir");
    let mut recorder = record(&state, &dir.join("journal.jsonl"), &[]);
    super::journal::wait_first_checkpoint(&dir.join("journal.jsonl"));
    let out = finish(locktop_command(
        &state,
        &[
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--journal",
            dir.to_str().expect("utf-8"),
        ],
    ));
    assert_eq!(out.code(), 2, "{}", out.stderr);
    assert!(out.stderr.contains("another locktop"), "{}", out.stderr);
    assert!(stop(&mut recorder).success());
}

/// The `"time"` of the first change line of `file`.
fn first_change_time(file: &Path) -> String {
    let text = std::fs::read_to_string(file).expect("read");
    let line = text
        .lines()
        .find(|line| line.starts_with("{\"time\":"))
        .expect("a change line");
    let value: serde_json::Value = serde_json::from_str(line).expect("json");
    value["time"].as_str().expect("time").to_string()
}

#[test]
fn a_deleted_middle_part_is_said_missing_by_every_face() {
    let (tmp, state) = state_in_tempdir();
    let _first = Holder::hold(&state, &["--aih", "team/first"]);
    let journal = tmp.path().join("journal.jsonl");
    let mut recorder = record(&state, &journal, &["--max-size", "4K", "--keep", "100"]);
    super::journal::wait_first_checkpoint(&journal);
    for n in 0..16 {
        let mut holder = Holder::hold(&state, &["--aih", &format!("team/a{}", n % 4)]);
        std::thread::sleep(Duration::from_millis(150));
        holder.kill();
        std::thread::sleep(Duration::from_millis(150));
    }
    assert!(stop(&mut recorder).success());
    // In part order: FILE.1 is the oldest, FILE the current one.
    let mut files: Vec<PathBuf> = std::fs::read_dir(tmp.path())
        .expect("read dir")
        .map(|entry| entry.expect("entry").path())
        .filter(|path| path.to_string_lossy().contains("journal.jsonl") && path.is_file())
        .filter(|path| !path.file_name().unwrap().to_string_lossy().starts_with('.'))
        .collect();
    files.sort_by_key(|path| {
        path.extension()
            .and_then(|ext| ext.to_str()?.parse::<u64>().ok())
            .unwrap_or(u64::MAX)
    });
    assert!(files.len() >= 4, "rotated: {files:?}");
    let whole = replay(&files, &["--from", "-1h"]);
    assert_eq!(whole.code(), 0, "{}", whole.stderr);
    for gone in 1..files.len() - 1 {
        let in_gap = first_change_time(&files[gone]);
        let kept: Vec<PathBuf> = files
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != gone)
            .map(|(_, path)| path.clone())
            .collect();
        let part = format!("part {gone} of the recording is missing");
        // The snapshot then: refused, saying which part.
        let at = replay(&kept, &["--at", &in_gap]);
        assert_eq!(at.code(), 2, "{}", at.stderr);
        assert!(at.stderr.contains(&part), "{}", at.stderr);
        assert!(!at.stderr.contains("nothing was recorded"), "{}", at.stderr);
        // A window across it: what is known, the hole said, exit 3.
        let across = replay(&kept, &["--from", "-1h"]);
        assert_eq!(across.code(), 3, "{}", across.stderr);
        assert!(across.stderr.contains(&part), "{}", across.stderr);
        // A window inside it (which may share its first millisecond with
        // the part before): the hole said, exit 3.
        let inside = replay(&kept, &["--from", &in_gap, "--to", &in_gap]);
        assert_eq!(inside.code(), 3, "{}", inside.stderr);
        assert!(inside.stderr.contains(&part), "{}", inside.stderr);
    }
    // From after the end, with no T2: said too.
    let from_after = replay(&files, &["--from", "2100-01-01T00:00:00Z"]);
    assert_eq!(from_after.code(), 0, "{}", from_after.stderr);
    assert!(
        from_after.stderr.contains("the recording ends at"),
        "{}",
        from_after.stderr
    );
    assert!(
        !from_after.stderr.contains("no change was recorded"),
        "{}",
        from_after.stderr
    );
    // After the end of a recording stopped cleanly: said, with how.
    let after = replay(
        &files,
        &[
            "--from",
            "2100-01-01T00:00:00Z",
            "--to",
            "2100-01-01T01:00:00Z",
        ],
    );
    assert_eq!(after.code(), 0, "{}", after.stderr);
    assert!(after.stdout.is_empty(), "{}", after.stdout);
    assert!(
        after.stderr.contains("the recording ends at")
            && after.stderr.contains("it was stopped then"),
        "{}",
        after.stderr
    );
}

#[test]
fn a_closed_stderr_never_makes_replay_panic() {
    let (tmp, state) = state_in_tempdir();
    let _first = Holder::hold(&state, &["--aih", "team/first"]);
    let journal = tmp.path().join("journal.jsonl");
    let mut recorder = record(&state, &journal, &[]);
    super::journal::wait_first_checkpoint(&journal);
    assert!(stop(&mut recorder).success());
    // Thousands of damaged lines: thousands of warnings.
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(&journal)
        .expect("open");
    for n in 0..5000 {
        std::io::Write::write_all(&mut file, format!("garbage {n}\n").as_bytes()).expect("write");
    }
    let mut child = std::process::Command::new(crate::common::locktop_bin())
        .args(["replay", journal.to_str().expect("utf-8"), "--from", "-1h"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn replay");
    // As `2>&1 | head -1` does: read a line, then close.
    let mut stderr = std::io::BufReader::new(child.stderr.take().expect("stderr"));
    let mut first = String::new();
    std::io::BufRead::read_line(&mut stderr, &mut first).expect("a line");
    drop(stderr);
    let status = wait_with_timeout(&mut child, PROCESS_TIMEOUT).expect("replay ends");
    assert_ne!(status.code(), Some(101), "replay panicked: {status:?}");
    assert!(status.code().is_some(), "killed by a signal: {status:?}");
}

/// A tmpfs of `size` mounted on a new directory, unmounted when dropped.
struct Tmpfs {
    dir: tempfile::TempDir,
}

impl Tmpfs {
    fn mount(size: &str) -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let status = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir.path())
            .status()
            .expect("mount");
        assert!(status.success(), "mount tmpfs");
        Self { dir }
    }

    fn grow(&self, size: &str) {
        let status = std::process::Command::new("mount")
            .args(["-o", &format!("remount,size={size}")])
            .arg(self.dir.path())
            .status()
            .expect("remount");
        assert!(status.success(), "remount tmpfs");
    }

    /// Fills it to the last byte.
    fn fill(&self) {
        let mut filler = std::fs::File::create(self.dir.path().join("filler")).expect("filler");
        let block = vec![0u8; 4096];
        while std::io::Write::write_all(&mut filler, &block).is_ok() {}
        let _ = std::io::Write::write_all(&mut filler, &[0u8]);
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(self.dir.path())
            .status();
    }
}

#[test]
fn serve_journal_on_a_full_disk_is_seen_and_resumes_when_it_can() {
    if !crate::common::skip_unless(
        // SAFETY: geteuid has no preconditions.
        unsafe { libc::geteuid() } == 0,
        "skipped: a full disk is made with a tmpfs, which needs root to mount (run the tests as root)",
    ) {
        return;
    }
    let (_tmp, state) = state_in_tempdir();
    let _first = Holder::hold(&state, &["--aih", "team/first"]);
    let disk = Tmpfs::mount("256k");
    let dir = disk.dir.path().join("history");
    let serve = super::serve::Serve::start_on(
        &state,
        "127.0.0.1:0",
        &["--journal", dir.to_str().expect("utf-8")],
    );
    super::journal::wait_first_checkpoint(&dir.join("journal.jsonl"));
    let healthy = super::serve::wait_body(&serve.url("/healthz"), "the journal writing", |body| {
        body.contains("journal: writing")
    });
    assert!(healthy.starts_with("ok: watching"), "{healthy}");
    disk.fill();
    // Changes the journal cannot write: until the last page the file
    // had is full too.
    let deadline = Instant::now() + PROCESS_TIMEOUT;
    let mut round = 0;
    let failing = loop {
        let mut gone = Holder::hold(&state, &["--aih", &format!("team/gone{round}")]);
        std::thread::sleep(Duration::from_millis(100));
        gone.kill();
        round += 1;
        let body = super::serve::wait_body(&serve.url("/healthz"), "an answer", |_| true);
        if body.contains("journal: NOT WRITING") {
            break body;
        }
        assert!(
            Instant::now() < deadline,
            "the journal never failed: {body}"
        );
    };
    let mut holder = Holder::hold(&state, &["--aih", "team/kept", "--tag", "kept"]);
    assert!(failing.contains("No space left on device"), "{failing}");
    super::serve::wait_body(&serve.url("/metrics"), "locktop_journal_up 0", |body| {
        body.contains("locktop_journal_up 0")
            && body.lines().any(|line| {
                line.starts_with("locktop_journal_last_error_timestamp_seconds ")
                    && !line.ends_with(" 0")
            })
    });
    disk.grow("8m");
    super::serve::wait_body(&serve.url("/healthz"), "the journal resumed", |body| {
        body.contains("journal: writing")
    });
    let scrape = super::serve::wait_body(&serve.url("/metrics"), "locktop_journal_up 1", |body| {
        body.contains("locktop_journal_up 1")
    });
    assert!(
        scrape.contains("locktop_journal_written_bytes_total "),
        "{scrape}"
    );
    if crate::common::have_program("promtool", super::serve::PROMETHEUS_PACKAGE) {
        let (ok, said) = super::serve::promtool_check_metrics(&scrape);
        assert!(ok, "promtool check metrics: {said}");
    }
    assert!(
        serve.stderr().contains("the journal stopped"),
        "{}",
        serve.stderr()
    );
    // The history says the gap and why, and the state after it is right.
    std::thread::sleep(Duration::from_millis(500));
    let now = replay(std::slice::from_ref(&dir), &["--at", "-0s", "--json"]);
    assert_eq!(now.code(), 0, "{}", now.stderr);
    assert!(now.stdout.contains("team/kept"), "{}", now.stdout);
    assert!(!now.stdout.contains("team/gone"), "{}", now.stdout);
    let window = replay(std::slice::from_ref(&dir), &["--from", "-1h"]);
    assert!(
        window
            .stderr
            .contains("the journal could not be written from"),
        "{}",
        window.stderr
    );
    holder.kill();
    drop(serve);
}

/// `line` (a change line, with its newline) stamped `by` later, its
/// number and checksum made right again.
fn restamped(line: &str, by: Duration) -> String {
    let mut value: serde_json::Value = serde_json::from_str(line).expect("json");
    let object = value.as_object_mut().expect("object");
    let n = object.remove("n").and_then(|n| n.as_u64()).expect("n");
    object.remove("crc");
    let time = humantime::parse_rfc3339(object["time"].as_str().expect("time")).expect("time");
    object.insert(
        "time".into(),
        humantime::format_rfc3339_millis(time + by)
            .to_string()
            .into(),
    );
    let mut out = serde_json::to_vec(&value).expect("json");
    out.push(b'\n');
    locktop::journal::format::number_line(&mut out, n);
    String::from_utf8(out).expect("utf-8")
}

#[test]
fn a_line_stamped_45_minutes_ahead_is_said_and_never_freezes_time() {
    let (tmp, state) = state_in_tempdir();
    let _first = Holder::hold(&state, &["--aih", "team/first"]);
    let journal = tmp.path().join("journal.jsonl");
    let mut recorder = record(&state, &journal, &[]);
    super::journal::wait_first_checkpoint(&journal);
    for n in 0..6 {
        let mut holder = Holder::hold(&state, &["--aih", &format!("team/a{n}")]);
        std::thread::sleep(Duration::from_millis(150));
        holder.kill();
        std::thread::sleep(Duration::from_millis(150));
    }
    assert!(stop(&mut recorder).success());
    let text = std::fs::read_to_string(&journal).expect("read");
    let mut lines: Vec<String> = text.split_inclusive('\n').map(str::to_string).collect();
    let changes: Vec<usize> = (0..lines.len())
        .filter(|i| lines[*i].starts_with("{\"time\":") && lines[*i].contains("\"kind\""))
        .collect();
    assert!(changes.len() > 8, "{text}");
    // What the window prints of the undamaged journal: a change line that
    // moves no liveness nor verdict (a key's refused tries, say) is in the
    // file and prints nothing, so the lines are counted, not assumed.
    let whole = replay(std::slice::from_ref(&journal), &["--from", "-1h"]);
    assert_eq!(whole.code(), 0, "{}", whole.stderr);
    let printed_whole = whole.stdout.lines().count();
    let damaged = changes[2];
    let after =
        serde_json::from_str::<serde_json::Value>(&lines[changes[6]]).expect("json")["time"]
            .as_str()
            .expect("time")
            .to_string();
    lines[damaged] = restamped(&lines[damaged], Duration::from_secs(45 * 60));
    std::fs::write(&journal, lines.concat()).expect("write");
    let files = [journal];
    // A time after it: not answered as sure, and why.
    let at = replay(&files, &["--at", &after]);
    assert_eq!(at.code(), 2, "{}", at.stderr);
    assert!(
        at.stderr.contains("cannot tell the state at"),
        "{}",
        at.stderr
    );
    assert!(
        at.stderr.contains("after the line after it"),
        "{}",
        at.stderr
    );
    // The window: every other change printed, the hole said, exit 3.
    let window = replay(&files, &["--from", "-1h"]);
    assert_eq!(window.code(), 3, "{}", window.stderr);
    assert!(
        window.stdout.lines().count() + 1 >= printed_whole,
        "{} lines of the whole journal's {printed_whole}:\n{}",
        window.stdout.lines().count(),
        window.stdout
    );
    assert!(
        window.stderr.contains("after the line after it"),
        "{}",
        window.stderr
    );
}

#[test]
fn the_last_millisecond_of_a_recording_cut_short_is_said_to_be_its_last_state() {
    // The shipped demo recording has no end line: its recorder did not
    // stop cleanly, so lines stamped with its last line's millisecond
    // may have followed and been lost. `--at` that millisecond is the
    // last state recorded, and says so, as after it.
    let demo = Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/demo.jsonl");
    let text = std::fs::read_to_string(&demo).expect("read");
    let last = text.lines().last().expect("lines");
    assert!(!last.starts_with(r#"{"end":"#), "{last}");
    let value: serde_json::Value = serde_json::from_str(last).expect("json");
    let end = value["time"].as_str().expect("time").to_string();
    let demo = [demo];
    let at = replay(&demo, &["--at", &end]);
    assert_eq!(at.code(), 0, "{}", at.stderr);
    assert!(
        at.stderr.contains(&format!("the recording ends at {end}"))
            && at.stderr.contains("not stopped cleanly"),
        "{}",
        at.stderr
    );
    // A millisecond before it: an answer of its own, no note.
    let time = humantime::parse_rfc3339(&end).expect("time");
    let before = humantime::format_rfc3339_millis(time - Duration::from_millis(1)).to_string();
    let earlier = replay(&demo, &["--at", &before]);
    assert_eq!(earlier.code(), 0, "{}", earlier.stderr);
    assert!(
        !earlier.stderr.contains("the recording ends at"),
        "{}",
        earlier.stderr
    );
}
