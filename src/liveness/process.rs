//! What a holder PID is: command line and start time from `/proc/<pid>`.
//! Invariant: a PID whose process is gone is reported as gone
//! (`alive == false`), never as an error.

use std::time::{Duration, SystemTime};

/// One process as seen right now.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ProcessInfo {
    /// The PID.
    pub pid: u32,
    /// False when `/proc/<pid>` is missing: the PID in `/proc/locks` is
    /// stale (a forked child may still hold the fd).
    pub alive: bool,
    /// The command line, arguments joined by spaces (`None` if unreadable
    /// or empty, e.g. a kernel thread or a zombie).
    pub cmdline: Option<String>,
    /// When the process started.
    #[serde(with = "crate::time_format::option")]
    pub started: Option<SystemTime>,
}

impl ProcessInfo {
    /// Reads `/proc/<pid>` (cheap: two small files).
    pub fn of(pid: u32) -> Self {
        let Ok(process) = procfs::process::Process::new(pid as i32) else {
            return Self {
                pid,
                alive: false,
                cmdline: None,
                started: None,
            };
        };
        let cmdline = process
            .cmdline()
            .ok()
            .map(|args| args.join(" "))
            .filter(|line| !line.is_empty());
        let started = process.stat().ok().and_then(|stat| {
            let boot = procfs::boot_time_secs().ok()?;
            let ticks = procfs::ticks_per_second().max(1);
            let since_boot = Duration::from_millis(stat.starttime * 1000 / ticks);
            Some(SystemTime::UNIX_EPOCH + Duration::from_secs(boot) + since_boot)
        });
        Self {
            pid,
            alive: true,
            cmdline,
            started,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_alive_with_a_command_line() {
        let me = ProcessInfo::of(std::process::id());
        assert!(me.alive);
        assert!(me.cmdline.is_some());
        let started = me.started.expect("start time");
        assert!(started <= SystemTime::now());
    }

    #[test]
    fn a_pid_that_does_not_exist_is_gone_not_an_error() {
        let gone = ProcessInfo::of(u32::MAX - 7);
        assert!(!gone.alive);
        assert_eq!(gone.command(), "(process gone)");
    }
}
