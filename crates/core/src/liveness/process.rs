//! What a holder PID is: command line, start time, scheduler state and
//! parent from `/proc/<pid>`.
//! Invariant: a PID whose process is gone is reported as gone
//! (`alive == false`), never as an error. The state changes without any
//! filesystem event (a SIGSTOP makes none): [`ProcessInfo::refreshed`]
//! re-reads it from `/proc/<pid>/stat` alone.

use std::time::{Duration, SystemTime};

use super::proc_read::{self, ProcDir};

/// How far a process's start time, as read here, may lie after a file
/// time the process itself wrote (its claim's announce mtime) and still
/// count as "started before it": start times are precise to a clock tick
/// (10 ms, see [`boot_time`]), file times to the kernel's coarse clock (a
/// few ms). A process that started later than that cannot have written it.
pub const START_TIME_SLACK: Duration = Duration::from_millis(50);

/// This process's PID, asked of the kernel once (`getpid` is a system
/// call each time, and a judgement asked it per held key). A process's
/// PID never changes; locktop forks no child that runs on without `exec`.
pub(crate) fn own_pid() -> u32 {
    static OWN_PID: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    *OWN_PID.get_or_init(std::process::id)
}

/// True while `/proc/<pid>` exists and is not a zombie: a holder that
/// exited is "gone" even before its parent reaps it.
pub fn pid_alive(pid: u32) -> bool {
    match stat_of(pid) {
        Some(stat) => !matches!(stat.state, 'Z' | 'X' | 'x'),
        None => false,
    }
}

/// When `pid`'s process started, read from `/proc/<pid>/stat` alone
/// (`None` when it is gone or a zombie): with the PID, who it is — the
/// same start as a [`ProcessInfo::started`] read earlier means the same
/// process.
pub fn started_of(pid: u32) -> Option<SystemTime> {
    let stat = stat_of(pid)?;
    if matches!(stat.state, 'Z' | 'X' | 'x') {
        return None;
    }
    start_time(&stat)
}

/// How much of a holder's process a view reads: what its front end can
/// show. Either way its start time, state and parent PID are read (who
/// it is: a holder is verified by its start; what its verdicts say).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum HolderDetail {
    /// Its command line, its systemd unit and its parent's command line
    /// too: the monitor, `serve`, `record`, `snapshot`.
    #[default]
    Named,
    /// Its `stat` alone: for a front end that shows holders by PID only
    /// (`watch`). A [`ProcessInfo`] read so has no `cmdline`, `parent` or
    /// `unit`.
    PidOnly,
}

/// One process as seen right now.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ProcessInfo {
    /// The PID.
    pub pid: u32,
    /// False when the process is gone: `/proc/<pid>` is missing, or the
    /// PID now belongs to another process (which is not described here).
    /// A gone holder is the PID `/proc/locks` still names for a lock that
    /// outlived the process that took it (a forked child keeps the fd).
    pub alive: bool,
    /// True for a holder whose hold could not be verified: its fdinfo may
    /// not be read (another user's process, to a monitor without
    /// privileges), so only `/proc/locks` names it and its start time
    /// does not rule it out. It may be a PID reused since; locktop never
    /// signals it. Never set on a verified holder.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub unverified: bool,
    /// The command line, shell-quoted so it can be pasted (`--tag
    /// 'research: v2.1'`); `None` if unreadable or empty, e.g. a kernel
    /// thread or a zombie.
    pub cmdline: Option<String>,
    /// When the process started.
    #[serde(with = "crate::time_format::option")]
    pub started: Option<SystemTime>,
    /// What the scheduler says it is doing (`None` when gone or unread).
    #[serde(default)]
    pub state: Option<ProcState>,
    /// Its parent's PID (`None` when gone or unread).
    #[serde(default)]
    pub ppid: Option<u32>,
    /// Its parent's command line, when readable (who spawned it — or, once
    /// re-parented, who adopted it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
    /// The systemd unit it runs in (`foo.service`, from its cgroup), when
    /// there is one: operators think in services.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unit: Option<String>,
    /// Since when it has used no CPU, set only once that is longer than
    /// the idle threshold (`--idle-after`), and only by a watcher that
    /// looks again and again (the engine's once-a-second refresh): one
    /// look cannot tell.
    #[serde(
        default,
        with = "crate::time_format::option",
        skip_serializing_if = "Option::is_none"
    )]
    pub idle_since: Option<SystemTime>,
}

/// A process's scheduler state (`/proc/<pid>/stat`, field 3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProcState {
    /// `R`: running or runnable.
    Running,
    /// `S`: sleeping (waiting for an event; agents idle here).
    Sleeping,
    /// `D`: uninterruptible disk wait.
    DiskWait,
    /// `T`: stopped by a signal (SIGSTOP, SIGTSTP, SIGTTIN…): it holds its
    /// locks until SIGCONT or a kill.
    Stopped,
    /// `t`: stopped by a debugger.
    Traced,
    /// `Z`: exited, not yet reaped by its parent.
    Zombie,
    /// Anything else (`I` idle kernel thread, `X` dead, …).
    Other,
}

impl ProcState {
    fn from_char(state: char) -> Self {
        match state {
            'R' => ProcState::Running,
            'S' => ProcState::Sleeping,
            'D' => ProcState::DiskWait,
            'T' => ProcState::Stopped,
            't' => ProcState::Traced,
            'Z' => ProcState::Zombie,
            _ => ProcState::Other,
        }
    }

    /// The word shown on screen.
    pub fn as_str(self) -> &'static str {
        match self {
            ProcState::Running => "running",
            ProcState::Sleeping => "sleeping",
            ProcState::DiskWait => "disk wait",
            ProcState::Stopped => "stopped",
            ProcState::Traced => "traced",
            ProcState::Zombie => "zombie",
            ProcState::Other => "other",
        }
    }

    /// True when it cannot run until someone else acts: stopped by a
    /// signal or by a debugger.
    pub fn is_halted(self) -> bool {
        matches!(self, ProcState::Stopped | ProcState::Traced)
    }
}

impl ProcessInfo {
    /// Reads `/proc/<pid>`'s `cmdline`, `stat` and `cgroup` (through one
    /// open directory: one process's, even if the PID is reused
    /// meanwhile) and the parent's `cmdline`.
    pub fn of(pid: u32) -> Self {
        Self::read(pid, HolderDetail::Named)
    }

    /// [`Self::of`], reading only what `detail` asks for: with
    /// [`HolderDetail::PidOnly`], `/proc/<pid>/stat` alone.
    pub fn read(pid: u32, detail: HolderDetail) -> Self {
        if detail == HolderDetail::PidOnly {
            return match stat_of(pid) {
                Some(stat) => Self {
                    started: start_time(&stat),
                    state: Some(ProcState::from_char(stat.state)),
                    ppid: u32::try_from(stat.ppid).ok(),
                    ..Self::unread(pid)
                },
                None => Self::gone(pid),
            };
        }
        let Ok(process) = ProcDir::open(pid) else {
            return Self::gone(pid);
        };
        let cmdline = process
            .read("cmdline")
            .ok()
            .and_then(args_of)
            .map(|args| shell_line(&args))
            .filter(|line| !line.is_empty());
        let stat = process.read("stat").ok().and_then(parse_stat);
        let started = stat.as_ref().and_then(start_time);
        Self {
            pid,
            alive: true,
            unverified: false,
            cmdline,
            started,
            state: stat.as_ref().map(|stat| ProcState::from_char(stat.state)),
            ppid: stat.as_ref().and_then(|stat| u32::try_from(stat.ppid).ok()),
            parent: stat.as_ref().and_then(parent_command),
            unit: process
                .read("cgroup")
                .ok()
                .and_then(|cgroup| String::from_utf8(cgroup).ok())
                .and_then(|cgroup| systemd_unit(&cgroup)),
            idle_since: None,
        }
    }

    /// Makes this process what [`HolderDetail::PidOnly`] reads: no
    /// command line, unit or parent's command line.
    pub fn forget_names(&mut self) {
        self.cmdline = None;
        self.parent = None;
        self.unit = None;
    }

    /// A process known only to be gone (or to have had its PID reused):
    /// nothing is read from `/proc/<pid>`, which may describe another
    /// process now.
    pub fn gone(pid: u32) -> Self {
        Self {
            alive: false,
            ..Self::unread(pid)
        }
    }

    /// A live process of which nothing has been read yet.
    pub fn unread(pid: u32) -> Self {
        Self {
            pid,
            alive: true,
            unverified: false,
            cmdline: None,
            started: None,
            state: None,
            ppid: None,
            unit: None,
            parent: None,
            idle_since: None,
        }
    }

    /// This process with its state and parent re-read from
    /// `/proc/<pid>/stat` only (the command line is kept), and the CPU
    /// time it has used (utime + stime, in clock ticks) from the same
    /// read. Gone (and no CPU time) if the PID now belongs to another
    /// process (its start time changed).
    pub(crate) fn refreshed(&self) -> (Self, Option<u64>) {
        if !self.alive {
            return (self.clone(), None);
        }
        let Some(stat) = stat_of(self.pid) else {
            return (Self::gone(self.pid), None);
        };
        if start_time(&stat) != self.started {
            return (Self::gone(self.pid), None);
        }
        let ppid = u32::try_from(stat.ppid).ok();
        // Re-parented (its parent exited): the old parent's command line
        // would be paired with the new PPID — read the new one's.
        let parent = if ppid == self.ppid {
            self.parent.clone()
        } else {
            parent_command(&stat)
        };
        let info = Self {
            state: Some(ProcState::from_char(stat.state)),
            ppid,
            parent,
            ..self.clone()
        };
        (info, Some(stat.utime + stat.stime))
    }

    /// True when its parent is PID 1: whoever spawned it is gone and init
    /// adopted it (a re-parented spawn child keeps its locks as long as it
    /// lives). A subreaper adopting it is not told apart.
    pub fn is_reparented(&self) -> bool {
        self.alive && self.ppid == Some(1)
    }

    /// What a screen adds after a holder's command: nothing for a verified
    /// holder, that a gone taker's PID is stale, that an unverified one is
    /// unverified.
    pub fn holder_mark(&self) -> &'static str {
        match (self.alive, self.unverified) {
            (false, _) => " (stale PID)",
            (true, true) => {
                " (unverified: its open files may not be read by this user, so it may be a PID \
                 reused since the lock was taken)"
            }
            (true, false) => "",
        }
    }

    /// The PID as a holder column shows it: `1234`, or `1234?` when the
    /// hold is unverified.
    pub fn pid_text(&self) -> String {
        if self.unverified {
            format!("{}?", self.pid)
        } else {
            self.pid.to_string()
        }
    }

    /// The command line, or a placeholder saying why there is none.
    pub fn command(&self) -> &str {
        match (&self.cmdline, self.alive) {
            (Some(line), _) => line,
            (None, true) => "(no command line)",
            (None, false) => "(process gone)",
        }
    }
}

/// The command line of the parent `stat` names, when readable.
fn parent_command(stat: &procfs::process::Stat) -> Option<String> {
    let ppid = u32::try_from(stat.ppid).ok().filter(|&ppid| ppid > 0)?;
    proc_read::read_file(ppid, "cmdline")
        .ok()
        .and_then(args_of)
        .map(|args| shell_line(&args))
        .filter(|line| !line.is_empty())
}

/// `/proc/<pid>/stat`, parsed (`None`: gone, or unreadable).
fn stat_of(pid: u32) -> Option<procfs::process::Stat> {
    proc_read::read_file(pid, "stat").ok().and_then(parse_stat)
}

/// A `stat` file's text, parsed.
fn parse_stat(text: Vec<u8>) -> Option<procfs::process::Stat> {
    use procfs::FromRead;
    procfs::process::Stat::from_read(text.as_slice()).ok()
}

/// A `cmdline` file's arguments (NUL-separated; empty ones dropped, as
/// procfs does); `None` when it is not UTF-8.
fn args_of(text: Vec<u8>) -> Option<Vec<String>> {
    let text = String::from_utf8(text).ok()?;
    Some(
        text.split('\0')
            .filter(|arg| !arg.is_empty())
            .map(str::to_string)
            .collect(),
    )
}

/// `args` as one shell-quoted line (`shlex`); joined by spaces in the one
/// case shlex refuses (an argument with a NUL, which argv cannot hold).
fn shell_line(args: &[String]) -> String {
    shlex::try_join(args.iter().map(String::as_str)).unwrap_or_else(|_| args.join(" "))
}

/// The innermost systemd unit (`*.service`, `*.scope`) named in the text
/// of `/proc/<pid>/cgroup`, if any.
fn systemd_unit(cgroup: &str) -> Option<String> {
    cgroup
        .lines()
        .filter_map(|line| line.splitn(3, ':').nth(2))
        .flat_map(|path| path.split('/').rev())
        .find(|segment| segment.ends_with(".service") || segment.ends_with(".scope"))
        .map(str::to_string)
}

/// When the process of `stat` started: its start in clock ticks since
/// boot, placed on the wall clock by [`boot_time`] (precise to a tick, 10
/// ms, where `/proc/stat`'s whole-second `btime` would be up to a second
/// early).
fn start_time(stat: &procfs::process::Stat) -> Option<SystemTime> {
    let ticks = procfs::ticks_per_second().max(1);
    let since_boot = Duration::from_nanos(stat.starttime.checked_mul(1_000_000_000)? / ticks);
    Some(boot_time()? + since_boot)
}

/// The wall-clock time of boot, to the nanosecond: the realtime clock
/// minus the boot-time clock, read back to back. Both advance together
/// (NTP slews them alike, suspend counts in both), so the difference
/// moves only when the wall clock is stepped; it is read once per process
/// so that start times compare equal from read to read.
fn boot_time() -> Option<SystemTime> {
    static BOOT: std::sync::OnceLock<Option<SystemTime>> = std::sync::OnceLock::new();
    *BOOT.get_or_init(|| {
        // The two clocks are read one after the other; a thread preempted
        // between the reads would put the boot (and every start time) late
        // by as long as it waited. So read the wall clock on both sides,
        // a few times, and keep the tightest pair's midpoint.
        (0..8)
            .filter_map(|_| {
                let before = SystemTime::now();
                let since_boot = since_boot()?;
                let after = SystemTime::now();
                let window = after.duration_since(before).ok()?;
                Some((window, (before + window / 2).checked_sub(since_boot)?))
            })
            .min_by_key(|&(window, _)| window)
            .map(|(_, boot)| boot)
    })
}

/// `CLOCK_BOOTTIME` now: the clock `/proc/<pid>/stat`'s start times count.
fn since_boot() -> Option<Duration> {
    use nix::time::{ClockId, clock_gettime};
    let since_boot = clock_gettime(ClockId::CLOCK_BOOTTIME).ok()?;
    Some(Duration::new(
        u64::try_from(since_boot.tv_sec()).ok()?,
        u32::try_from(since_boot.tv_nsec()).ok()?,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Read for PIDs only, a process is the same one (start, state,
    /// parent PID as a named read says) with no name read.
    #[test]
    fn a_pid_only_read_is_the_same_process_with_no_names() {
        let me = std::process::id();
        let named = ProcessInfo::of(me);
        let bare = ProcessInfo::read(me, HolderDetail::PidOnly);
        assert!(named.cmdline.is_some());
        let mut forgotten = named.clone();
        forgotten.forget_names();
        assert_eq!(bare, forgotten);
        assert!(bare.alive && bare.started.is_some() && bare.ppid.is_some());
        assert!(bare.cmdline.is_none() && bare.parent.is_none() && bare.unit.is_none());
        let gone = ProcessInfo::read(u32::MAX - 7, HolderDetail::PidOnly);
        assert_eq!(gone, ProcessInfo::gone(u32::MAX - 7));
    }

    #[test]
    fn this_process_is_alive_with_a_command_line() {
        let me = ProcessInfo::of(std::process::id());
        assert!(me.alive);
        assert!(me.cmdline.is_some());
        let started = me.started.expect("start time");
        assert!(started <= SystemTime::now());
    }

    /// Start times are precise to a clock tick, not to the second a
    /// whole-second boot time would give: a PID reused half a second after
    /// a claim was taken must read as started after it.
    #[test]
    fn a_start_time_is_precise_to_a_tick() {
        for _ in 0..5 {
            let before = SystemTime::now();
            let mut child = std::process::Command::new("sleep")
                .arg("5")
                .spawn()
                .unwrap();
            let after = SystemTime::now();
            let started = ProcessInfo::of(child.id()).started.expect("start time");
            let _ = child.kill();
            let _ = child.wait();
            let tick = Duration::from_millis(20);
            assert!(
                started + tick >= before && started <= after + tick,
                "started {started:?}, spawned between {before:?} and {after:?}"
            );
        }
    }

    #[test]
    fn a_command_line_is_shell_quoted_so_it_can_be_pasted() {
        let args = [
            "locktop",
            "hold",
            "--tag",
            "research: v2.1",
            "--aih",
            "cli/x",
        ];
        let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        let line = shell_line(&args);
        assert_eq!(line, "locktop hold --tag 'research: v2.1' --aih cli/x");
        assert_eq!(shlex::split(&line).unwrap(), args);
    }

    #[test]
    fn the_parent_is_named_and_this_process_is_not_re_parented() {
        let me = ProcessInfo::of(std::process::id());
        assert_eq!(me.ppid, Some(std::os::unix::process::parent_id()));
        assert!(
            me.parent.is_some(),
            "the test runner's parent has a command line"
        );
        assert!(!me.is_reparented());
        assert!(matches!(
            me.state,
            Some(ProcState::Running | ProcState::Sleeping)
        ));
    }

    #[test]
    fn the_systemd_unit_is_read_from_the_cgroup_path() {
        let v2 = "0::/system.slice/objectiveai-daemon.service\n";
        assert_eq!(
            systemd_unit(v2).as_deref(),
            Some("objectiveai-daemon.service")
        );
        let user = "0::/user.slice/user-1000.slice/user@1000.service/app.slice/run-r1.scope\n";
        assert_eq!(systemd_unit(user).as_deref(), Some("run-r1.scope"));
        assert_eq!(systemd_unit("0::/\n4:memory:/process_api/8f7b\n"), None);
    }

    #[test]
    fn a_pid_that_does_not_exist_is_gone_not_an_error() {
        let gone = ProcessInfo::of(u32::MAX - 7);
        assert!(!gone.alive);
        assert_eq!(gone.command(), "(process gone)");
    }
}
