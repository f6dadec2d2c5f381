//! Test holders: families held on purpose by the operator, in this process
//! (through the shared `Context`'s `AgentLockMap`) or in a child process
//! (`locktop hold`, which dies with us).
//!
//! Invariants: every holder reports its progress as [`HolderUpdate`]s on
//! one channel, in order, ending with `Failed` or `Exited`; releasing an
//! in-process holder releases through the `locks` module (claim first,
//! guard last); a child holder is released with SIGTERM and killed only
//! on an explicit [`Holders::kill`].

pub mod child;

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::SystemTime;

use tokio::sync::{mpsc, oneshot};

use crate::context::Context;
use crate::locks::{self, Family};
use crate::operate::check::{BusyMember, describe_busy};
use crate::operate::hold_protocol::HoldLine;
use crate::operate::signal::terminate_child;

/// Identifies one test holder for the life of the monitor.
pub type HolderId = u64;

/// Where a test holder lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum Placement {
    /// In this process, through the shared in-process gate.
    InProcess,
    /// In a `locktop hold` child process.
    Child,
}

impl Placement {
    /// The one word for it, everywhere it is shown.
    pub fn word(self) -> &'static str {
        match self {
            Placement::InProcess => "in-process",
            Placement::Child => "child",
        }
    }
}

/// What to do when the family is busy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum HoldMode {
    /// All-or-nothing now; fail (saying who is in the way) if busy.
    Try,
    /// Queue until the whole family is free, then hold.
    Wait,
}

impl HoldMode {
    /// The one word for it, everywhere it is shown.
    pub fn word(self) -> &'static str {
        match self {
            HoldMode::Try => "try",
            HoldMode::Wait => "wait",
        }
    }
}

/// What the operator asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HolderSpec {
    /// The family to hold.
    pub family: Family,
    /// In-process or child.
    pub placement: Placement,
    /// Try or wait.
    pub mode: HoldMode,
}

/// Where a test holder is in its life.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HolderStatus {
    /// Being started.
    Starting,
    /// Waiting for the family; these members were busy last time.
    Waiting(Vec<BusyMemberSummary>),
    /// Holding the whole family.
    Holding,
    /// Could not hold it (busy in try mode, or an error).
    Failed(String),
    /// Released or killed; the detail says which.
    Exited(String),
}

impl HolderStatus {
    /// One word for tables.
    pub fn word(&self) -> &'static str {
        match self {
            HolderStatus::Starting => "starting",
            HolderStatus::Waiting(_) => "waiting",
            HolderStatus::Holding => "holding",
            HolderStatus::Failed(_) => "failed",
            HolderStatus::Exited(_) => "exited",
        }
    }

    /// True once the holder can no longer hold anything.
    pub fn is_over(&self) -> bool {
        matches!(self, HolderStatus::Failed(_) | HolderStatus::Exited(_))
    }
}

/// A busy member as shown in "waiting on …" and failure messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BusyMemberSummary {
    /// `tag "x"` / `instance "a/b"`.
    pub label: String,
    /// Who holds it.
    pub pids: Vec<u32>,
}

impl BusyMemberSummary {
    fn from_member(member: &BusyMember) -> Self {
        Self {
            label: member.label(),
            pids: member.holders.iter().map(|p| p.pid).collect(),
        }
    }

    /// `tag "x" (pid 12, 13)`.
    pub fn describe(&self) -> String {
        if self.pids.is_empty() {
            self.label.clone()
        } else {
            let pids: Vec<String> = self.pids.iter().map(u32::to_string).collect();
            format!("{} (pid {})", self.label, pids.join(", "))
        }
    }
}

/// A change in one holder's life.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HolderUpdate {
    /// Which holder.
    pub id: HolderId,
    /// Its process (this process for in-process holders), once known.
    pub pid: Option<u32>,
    /// Its new status.
    pub status: HolderStatus,
    /// When.
    pub at: SystemTime,
}

/// Why a test holder could not be released or killed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StopError {
    /// No holder has this id.
    #[error("no test holder #{0}")]
    Unknown(HolderId),
    /// A release or kill was already sent.
    #[error("test holder #{0} is already stopping")]
    AlreadyStopping(HolderId),
    /// It is gone already.
    #[error("test holder #{0} has already exited")]
    AlreadyExited(HolderId),
    /// In-process holders hold through this process: they can only be
    /// released.
    #[error("an in-process holder cannot be killed; only released")]
    InProcessKill,
}

enum Stop {
    Release,
    Kill,
}

struct Entry {
    placement: Placement,
    stop: Option<oneshot::Sender<Stop>>,
}

/// Starts, releases and kills test holders.
pub struct Holders {
    context: Context,
    exe: PathBuf,
    next_id: HolderId,
    updates: mpsc::UnboundedSender<HolderUpdate>,
    entries: HashMap<HolderId, Entry>,
}

impl Holders {
    /// A manager holding through `context`; updates arrive on the receiver.
    pub fn new(context: Context) -> std::io::Result<(Self, mpsc::UnboundedReceiver<HolderUpdate>)> {
        let (updates, rx) = mpsc::unbounded_channel();
        Ok((
            Self {
                context,
                exe: child::self_exe()?,
                next_id: 1,
                updates,
                entries: HashMap::new(),
            },
            rx,
        ))
    }

    /// Starts a holder; its progress arrives as updates. Must be called
    /// inside a tokio runtime, from a thread that lives as long as the
    /// holder — a runtime worker or the thread running `block_on` (the
    /// TUI's event loop), never a `spawn_blocking` thread: a child's
    /// parent-death signal is tied to the spawning thread.
    pub fn spawn(&mut self, spec: HolderSpec) -> HolderId {
        let id = self.next_id;
        self.next_id += 1;
        let (stop_tx, stop_rx) = oneshot::channel();
        self.entries.insert(
            id,
            Entry {
                placement: spec.placement,
                stop: Some(stop_tx),
            },
        );
        let updates = self.updates.clone();
        let send = move |pid: Option<u32>, status: HolderStatus| {
            let _ = updates.send(HolderUpdate {
                id,
                pid,
                status,
                at: SystemTime::now(),
            });
        };
        send(None, HolderStatus::Starting);
        match spec.placement {
            Placement::InProcess => {
                tokio::spawn(run_in_process(self.context.clone(), spec, stop_rx, send));
            }
            Placement::Child => {
                match child::spawn_hold(
                    &self.exe,
                    self.context.state_dir(),
                    &spec.family,
                    spec.mode == HoldMode::Wait,
                ) {
                    Ok(holder) => {
                        tokio::spawn(run_child(holder, stop_rx, send));
                    }
                    Err(error) => {
                        send(None, HolderStatus::Failed(format!("cannot spawn: {error}")))
                    }
                }
            }
        }
        id
    }

    /// Releases a holder (SIGTERM for a child: it releases cleanly).
    pub fn release(&mut self, id: HolderId) -> Result<(), StopError> {
        self.stop(id, Stop::Release)
    }

    /// SIGKILLs a child holder. In-process holders can only be released.
    pub fn kill(&mut self, id: HolderId) -> Result<(), StopError> {
        match self.entries.get(&id) {
            Some(entry) if entry.placement == Placement::InProcess => Err(StopError::InProcessKill),
            _ => self.stop(id, Stop::Kill),
        }
    }

    fn stop(&mut self, id: HolderId, how: Stop) -> Result<(), StopError> {
        let entry = self.entries.get_mut(&id).ok_or(StopError::Unknown(id))?;
        let stop = entry.stop.take().ok_or(StopError::AlreadyStopping(id))?;
        stop.send(how).map_err(|_| StopError::AlreadyExited(id))
    }

    /// Releases every holder still running (on quit).
    pub fn release_all(&mut self) {
        let ids: Vec<HolderId> = self.entries.keys().copied().collect();
        for id in ids {
            let _ = self.stop(id, Stop::Release);
        }
    }
}

async fn run_in_process(
    context: Context,
    spec: HolderSpec,
    mut stop: oneshot::Receiver<Stop>,
    send: impl Fn(Option<u32>, HolderStatus),
) {
    let me = Some(std::process::id());
    let state_dir = context.state_dir().to_path_buf();
    if let Err(error) = crate::disk::state_dir::require_existing(&state_dir) {
        return send(me, HolderStatus::Failed(error.to_string()));
    }
    let coords = match locks::family_coords(&state_dir, &spec.family) {
        Ok(coords) => coords,
        Err(error) => return send(me, HolderStatus::Failed(error.to_string())),
    };
    if let Err(error) = crate::disk::confine::ensure_coords_below_root(&state_dir, &coords) {
        return send(me, HolderStatus::Failed(error.to_string()));
    }
    let map = context.agent_locks();
    let held = match spec.mode {
        HoldMode::Try => {
            match locks::try_acquire_family_checked(map, &state_dir, &spec.family).await {
                Err(error) => return send(me, HolderStatus::Failed(error.to_string())),
                Ok(Ok(held)) => held,
                Ok(Err(busy)) => {
                    let members: Vec<String> = describe_busy(&state_dir, &busy)
                        .iter()
                        .map(|m| BusyMemberSummary::from_member(m).describe())
                        .collect();
                    return send(
                        me,
                        HolderStatus::Failed(format!("busy: {}", members.join("; "))),
                    );
                }
            }
        }
        HoldMode::Wait => {
            let waiting = locks::wait_acquire_family(map, &state_dir, &spec.family, |busy| {
                let members = describe_busy(&state_dir, busy)
                    .iter()
                    .map(BusyMemberSummary::from_member)
                    .collect();
                send(me, HolderStatus::Waiting(members));
            });
            tokio::select! {
                held = waiting => match held {
                    Ok(held) => held,
                    Err(error) => return send(me, HolderStatus::Failed(error.to_string())),
                },
                _ = &mut stop => return send(me, HolderStatus::Exited("cancelled while waiting".into())),
            }
        }
    };
    send(me, HolderStatus::Holding);
    let _ = stop.await;
    let mut failures = Vec::new();
    for lock in held.into_iter().rev() {
        if let Err(error) = lock.release() {
            failures.push(error.to_string());
        }
    }
    if failures.is_empty() {
        send(me, HolderStatus::Exited("released".into()));
    } else {
        send(
            me,
            HolderStatus::Exited(format!("released with errors: {}", failures.join("; "))),
        );
    }
}

async fn run_child(
    mut holder: child::ChildHolder,
    mut stop: oneshot::Receiver<Stop>,
    send: impl Fn(Option<u32>, HolderStatus),
) {
    let pid = holder.pid();
    let mut held = false;
    let mut stop_open = true;
    loop {
        tokio::select! {
            line = holder.lines.next_line() => match line {
                Ok(Some(line)) => {
                    match HoldLine::parse(&line) {
                        Some(HoldLine::Held { .. }) => {
                            held = true;
                            send(pid, HolderStatus::Holding);
                        }
                        Some(HoldLine::Waiting { busy, .. }) => {
                            let members = busy.iter().map(BusyMemberSummary::from_member).collect();
                            send(pid, HolderStatus::Waiting(members));
                        }
                        // Test holders hold their family alone.
                        Some(HoldLine::Waited { .. } | HoldLine::Released { .. }) | None => {}
                    }
                }
                _ => break,
            },
            how = &mut stop, if stop_open => {
                stop_open = false;
                match how {
                    Ok(Stop::Kill) => { let _ = holder.child.start_kill(); }
                    Ok(Stop::Release) | Err(_) => {
                        if let Some(pid) = pid {
                            let _ = terminate_child(pid);
                        }
                    }
                }
            }
        }
    }
    let mut stderr = String::new();
    if let Some(mut err) = holder.child.stderr.take() {
        use tokio::io::AsyncReadExt;
        let _ = err.read_to_string(&mut stderr).await;
    }
    let status = holder.child.wait().await;
    let status = match status {
        Err(error) => HolderStatus::Failed(format!("wait failed: {error}")),
        Ok(status) => {
            use std::os::unix::process::ExitStatusExt;
            let stderr = stderr.trim().replace('\n', "; ");
            match (status.code(), status.signal(), held) {
                (Some(0), _, _) => HolderStatus::Exited("released (exit 0)".into()),
                (_, Some(signal), _) => HolderStatus::Exited(format!(
                    "killed by {}",
                    nix::sys::signal::Signal::try_from(signal)
                        .map_or_else(|_| signal.to_string(), |s| s.as_str().to_string())
                )),
                (Some(code), _, false) => HolderStatus::Failed(if stderr.is_empty() {
                    format!("exit {code}")
                } else {
                    stderr
                }),
                (Some(code), _, true) => HolderStatus::Exited(format!("exit {code}: {stderr}")),
                (None, None, _) => HolderStatus::Exited("exited".into()),
            }
        }
    };
    send(pid, status);
}
