//! Monitors must never make an agent's `objectiveai_sdk::lockfile::try_acquire`
//! fail, nor leave a tag looking held once its agent let it go. Real
//! processes throughout: three `locktop watch --json` monitors on one
//! state dir, and agents in child processes (the SDK is reentrant inside
//! one process, so an agent in this test process would never meet a
//! monitor's lock). No timing is asserted: refusals are counted.
//!
//! The agents are this test binary run again as a child: the ignored test
//! [`agent_child`], selected by its exact name and switched on by the
//! [`CHILD_STATE`] / [`CHILD_TAG`] environment variables (without them it
//! does nothing, so `cargo test -- --ignored` passes it). It reads
//! commands on stdin and answers each on one stdout line prefixed with
//! [`REPLY`] (libtest prints lines of its own around them).

use std::io::{BufRead, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use crate::common::{PROCESS_TIMEOUT, lines_of, locktop_command, run_locktop, serial_blocking};
use locktop::locks::agent_tag_lock;

/// The state dir of an agent child (set only for the child).
const CHILD_STATE: &str = "LOCKTOP_TEST_AGENT_STATE";
/// The tag an agent child works on (set only for the child).
const CHILD_TAG: &str = "LOCKTOP_TEST_AGENT_TAG";
/// What an agent child's answer lines start with.
const REPLY: &str = "agent> ";
/// The tag of the tight loop (nobody else ever holds it).
const TIGHT_TAG: &str = "agent loop";
/// The tag of the relocation pattern.
const RELOCATED_TAG: &str = "relocated tag";
/// Tries of the tight loop: `try_acquire`, hold [`HOLD`], release, again.
const TIGHT_TRIES: usize = 300;
/// How long the tight loop holds the tag it took.
const HOLD: Duration = Duration::from_millis(1);
/// Tries of the relocation pattern.
const RELOCATION_TRIES: usize = 20;
/// The relocation waiter's delays are spread over [`MIN_DELAY`]..=this.
const MAX_DELAY: Duration = Duration::from_millis(8);
/// The shortest relocation delay. Not 0: `wait_released` wakes when the
/// holder unlocks its announce, and the holder unlocks its gate a moment
/// after — a try at once can meet the holder's own gate, monitor or not
/// (the bench measured one such refusal with no monitor running).
const MIN_DELAY: Duration = Duration::from_millis(1);
/// How many monitors watch at once.
const MONITORS: usize = 3;
/// How long the monitors get, after the last release, to report it.
const AFTER_LAST_RELEASE: Duration = Duration::from_secs(1);

/// The agent child (run by [`Agent::spawn`], never on its own): on the
/// tag [`CHILD_TAG`] of the state dir [`CHILD_STATE`], one command per
/// stdin line, one [`REPLY`] line per command:
///
/// - `tight TRIES HOLD_MICROS`: `try_acquire`, hold, release, at once
///   again, TRIES times; answers `TRIES REFUSED`;
/// - `hold`: `wait_acquire` (a monitor's momentary lock only delays it);
///   answers `held`; `release` releases it; answers `released`;
/// - `relocate DELAY_MICROS`: answers `waiting`, blocks in the SDK's
///   `wait_released` (as a daemon relocating the tag does), sleeps DELAY,
///   tries ONCE (released at once when taken); answers `ok` or `refused`.
///
/// Exits at EOF on stdin.
#[test]
#[ignore = "an agent child of the interference tests: run by them, with its environment"]
fn agent_child() {
    let (Ok(state), Ok(tag)) = (std::env::var(CHILD_STATE), std::env::var(CHILD_TAG)) else {
        return;
    };
    let (dir, key) = agent_tag_lock(Path::new(&state), &tag);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let micros =
        |word: Option<&str>| Duration::from_micros(word.expect("arg").parse().expect("µs"));
    let say = |line: &str| {
        let mut out = std::io::stdout().lock();
        writeln!(out, "{REPLY}{line}").expect("stdout");
        out.flush().expect("stdout");
    };
    runtime.block_on(async {
        let mut held = None;
        for line in std::io::stdin().lock().lines() {
            let line = line.expect("stdin");
            let mut words = line.split_whitespace();
            match words.next() {
                Some("tight") => {
                    let tries: usize = words.next().expect("tries").parse().expect("tries");
                    let hold = micros(words.next());
                    let mut refused = 0;
                    for _ in 0..tries {
                        match objectiveai_sdk::lockfile::try_acquire(&dir, &key, "").await {
                            Some(claim) => {
                                std::thread::sleep(hold);
                                claim.release().expect("release");
                            }
                            None => refused += 1,
                        }
                    }
                    say(&format!("{tries} {refused}"));
                }
                Some("hold") => {
                    let claim = objectiveai_sdk::lockfile::wait_acquire(&dir, &key, "")
                        .await
                        .expect("wait_acquire");
                    held = Some(claim);
                    say("held");
                }
                Some("release") => {
                    held.take()
                        .expect("release without hold")
                        .release()
                        .expect("release");
                    say("released");
                }
                Some("relocate") => {
                    let delay = micros(words.next());
                    say("waiting");
                    objectiveai_sdk::lockfile::wait_released(&dir, &key)
                        .await
                        .expect("wait_released");
                    std::thread::sleep(delay);
                    match objectiveai_sdk::lockfile::try_acquire(&dir, &key, "").await {
                        Some(claim) => {
                            claim.release().expect("release");
                            say("ok");
                        }
                        None => say("refused"),
                    }
                }
                other => panic!("agent child: unknown command {other:?}"),
            }
        }
    });
}

/// An agent child (this binary running [`agent_child`]); SIGKILLed and
/// reaped on drop.
struct Agent {
    child: Child,
    stdin: ChildStdin,
    lines: Receiver<String>,
}

impl Agent {
    fn spawn(state: &Path, tag: &str) -> Self {
        // The test's name inside the binary: its module path minus the
        // crate's name.
        let module = module_path!()
            .split_once("::")
            .map_or(module_path!(), |(_, rest)| rest);
        let mut child = Command::new(std::env::current_exe().expect("current_exe"))
            .args(["--ignored", "--exact", "--nocapture", "--test-threads=1"])
            .arg(format!("{module}::agent_child"))
            .env(CHILD_STATE, state)
            .env(CHILD_TAG, tag)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn the agent child");
        let stdin = child.stdin.take().expect("piped");
        let lines = lines_of(child.stdout.take().expect("piped"));
        Self {
            child,
            stdin,
            lines,
        }
    }

    fn send(&mut self, command: &str) {
        writeln!(self.stdin, "{command}").expect("write to the agent child");
        self.stdin.flush().expect("flush the agent child");
    }

    /// Its next answer (libtest's own lines skipped).
    fn reply(&mut self) -> String {
        let deadline = Instant::now() + PROCESS_TIMEOUT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = self
                .lines
                .recv_timeout(left)
                .unwrap_or_else(|e| panic!("agent child {} did not answer: {e}", self.child.id()));
            // libtest may print `test … ... ` on the same line first.
            if let Some((_, answer)) = line.split_once(REPLY) {
                return answer.trim().to_string();
            }
        }
    }

    fn ask(&mut self, command: &str) -> String {
        self.send(command);
        self.reply()
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A `locktop watch --json [extra…]` child; its stdout is read on a
/// thread as it comes. SIGKILLed and reaped on drop.
struct Monitor {
    child: Child,
    lines: Receiver<String>,
    seen: Vec<String>,
}

impl Monitor {
    fn start(state: &Path, extra: &[&str]) -> Self {
        let mut args = vec!["watch", "--json"];
        args.extend_from_slice(extra);
        let mut command = locktop_command(state, &args);
        command.stdin(Stdio::null()).stderr(Stdio::inherit());
        let mut child = command.spawn().expect("spawn locktop watch");
        let lines = lines_of(child.stdout.take().expect("piped"));
        Self {
            child,
            lines,
            seen: Vec::new(),
        }
    }

    /// Waits for its `watching` health line.
    fn wait_watching(&mut self) {
        let deadline = Instant::now() + PROCESS_TIMEOUT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    let watching = serde_json::from_str::<serde_json::Value>(&line)
                        .is_ok_and(|v| v["watcher"]["health"] == "watching");
                    self.seen.push(line);
                    if watching {
                        return;
                    }
                }
                Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => panic!(
                    "locktop watch {} never said watching; lines:\n{}",
                    self.child.id(),
                    self.seen.join("\n")
                ),
            }
        }
    }

    /// Every line it printed so far.
    fn lines(&mut self) -> &[String] {
        self.seen.extend(self.lines.try_iter());
        &self.seen
    }

    /// The `to` of its last state line for tag `name` (`None`: it printed
    /// none), and how many state lines it printed for it.
    fn last_state(&mut self, name: &str) -> (Option<String>, usize) {
        let mut last = None;
        let mut count = 0;
        for line in self.lines() {
            let Ok(value) = serde_json::from_str::<serde_json::Value>(line) else {
                panic!("watch printed non-JSON {line:?}");
            };
            // State lines have a top-level kind and name (verdict lines
            // nest theirs under "key", health lines have "watcher").
            if value["kind"] == "tag" && value["name"] == name {
                count += 1;
                last = value["to"].as_str().map(str::to_string);
            }
        }
        (last, count)
    }
}

impl Drop for Monitor {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What [`run_pattern`] saw.
#[derive(Debug)]
struct Outcome {
    /// The tight loop's refused tries (of [`TIGHT_TRIES`]).
    tight_refused: usize,
    /// The relocation's refused tries, with their delays (of
    /// [`RELOCATION_TRIES`]).
    relocation_refused: Vec<Duration>,
    /// Per monitor: `(tag, last state, state lines)` for each tag whose
    /// last state line is not `free` (a tag left looking held).
    stale: Vec<(usize, &'static str, Option<String>, usize)>,
    /// Per monitor: how many state lines it printed for the tight tag.
    tight_lines: Vec<usize>,
}

/// Three monitors (`locktop watch --json` plus `monitor_args`) on one
/// state dir; then a tight loop and a relocation pattern in agent
/// children; then, [`AFTER_LAST_RELEASE`] after the last release, each
/// monitor's last state line for both tags.
fn run_pattern(monitor_args: &[&str]) -> Outcome {
    let (_tmp, state) = crate::common::state_in_tempdir();
    // The tags (and the locks root) exist before the monitors start.
    let made = run_locktop(
        &state,
        &["hold", "--group", TIGHT_TAG, "--group", RELOCATED_TAG],
    );
    assert_eq!(made.code(), 0, "{made:?}");
    let mut monitors: Vec<Monitor> = (0..MONITORS)
        .map(|_| Monitor::start(&state, monitor_args))
        .collect();
    for monitor in &mut monitors {
        monitor.wait_watching();
    }
    std::thread::sleep(Duration::from_millis(300));

    let mut agent = Agent::spawn(&state, TIGHT_TAG);
    let answer = agent.ask(&format!("tight {TIGHT_TRIES} {}", HOLD.as_micros()));
    let (tries, refused) = answer.split_once(' ').expect("TRIES REFUSED");
    assert_eq!(tries, TIGHT_TRIES.to_string());
    let tight_refused: usize = refused.parse().expect("refused");
    drop(agent);

    let mut holder = Agent::spawn(&state, RELOCATED_TAG);
    let mut mover = Agent::spawn(&state, RELOCATED_TAG);
    let mut relocation_refused = Vec::new();
    for i in 0..RELOCATION_TRIES {
        let spread = MAX_DELAY - MIN_DELAY;
        let delay = MIN_DELAY + spread.mul_f64(i as f64 / (RELOCATION_TRIES - 1) as f64);
        assert_eq!(holder.ask("hold"), "held");
        assert_eq!(
            mover.ask(&format!("relocate {}", delay.as_micros())),
            "waiting"
        );
        // The mover blocks in wait_released meanwhile.
        std::thread::sleep(Duration::from_millis(3));
        assert_eq!(holder.ask("release"), "released");
        match mover.reply().as_str() {
            "ok" => {}
            "refused" => relocation_refused.push(delay),
            other => panic!("the mover said {other:?}"),
        }
    }
    drop((holder, mover));

    std::thread::sleep(AFTER_LAST_RELEASE);
    let mut stale = Vec::new();
    let mut tight_lines = Vec::new();
    for (i, monitor) in monitors.iter_mut().enumerate() {
        for tag in [TIGHT_TAG, RELOCATED_TAG] {
            let (last, count) = monitor.last_state(tag);
            if tag == TIGHT_TAG {
                tight_lines.push(count);
            }
            if last.is_some() && last.as_deref() != Some("free") {
                stale.push((i, tag, last, count));
            }
        }
    }
    Outcome {
        tight_refused,
        relocation_refused,
        stale,
        tight_lines,
    }
}

/// Runs [`run_pattern`] with `monitor_args`, prints what it saw, and
/// checks: the tight loop and the relocation were refused 0 times, every
/// monitor saw the tight loop (at least one state line for its tag: it
/// was watching), and none reports either tag held after the last
/// release.
fn check_monitors_never_interfere(what: &str, monitor_args: &[&str]) {
    let outcome = run_pattern(monitor_args);
    println!(
        "{what}: tight loop refused {}/{TIGHT_TRIES}; relocation refused {}/{RELOCATION_TRIES} \
         (delays {:?}); state lines per monitor for the tight tag {:?}; stale {:?}",
        outcome.tight_refused,
        outcome.relocation_refused.len(),
        outcome.relocation_refused,
        outcome.tight_lines,
        outcome.stale
    );
    assert!(
        outcome.tight_refused == 0
            && outcome.relocation_refused.is_empty()
            && outcome.stale.is_empty()
            && outcome.tight_lines.iter().all(|&n| n > 0),
        "{MONITORS} monitors ({what}) got in an agent's way or left a tag held: {outcome:?}"
    );
}

/// With 3 monitors in their DEFAULT mode (`locktop watch --json`, no
/// `--probe`), an agent's tight loop (300 tries, hold 1 ms, no pause) on
/// one tag and a relocation pattern (20 tries, `wait_released` then one
/// try after 1–8 ms) are refused 0 times, and no monitor reports either
/// tag held after the last release.
#[test]
fn monitors_in_the_default_mode_never_refuse_an_agent_nor_leave_its_tag_held() {
    let _serial = serial_blocking();
    check_monitors_never_interfere("default probe", &[]);
}
