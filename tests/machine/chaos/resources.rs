//! Open fds and resident memory — of this process (the engine under test
//! runs in it, beside the test's own records) and of a separate monitor
//! process watching the same run — sampled to show they stay flat.

/// One sample.
#[derive(Debug, Clone, Copy)]
pub struct Resources {
    /// Entries of `/proc/self/fd`.
    pub fds: usize,
    /// VmRSS, KiB.
    pub rss_kib: u64,
}

impl Resources {
    /// Samples this process now.
    pub fn now() -> Self {
        Self::of(std::process::id())
    }

    /// Samples process `pid` now.
    pub fn of(pid: u32) -> Self {
        let fds = std::fs::read_dir(format!("/proc/{pid}/fd"))
            .expect("read /proc/<pid>/fd")
            .count();
        Self {
            fds,
            rss_kib: crate::common::proc::rss_kib(pid),
        }
    }
}

impl std::fmt::Display for Resources {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} fds, {:.1} MB",
            self.fds,
            self.rss_kib as f64 / 1024.0
        )
    }
}
