//! This process's open fds and resident memory (the engine under test
//! runs in it), sampled to show they stay flat over a chaos run.

/// One sample.
#[derive(Debug, Clone, Copy)]
pub struct Resources {
    /// Entries of `/proc/self/fd`.
    pub fds: usize,
    /// VmRSS, KiB.
    pub rss_kib: u64,
}

impl Resources {
    /// Samples now.
    pub fn now() -> Self {
        let fds = std::fs::read_dir("/proc/self/fd")
            .expect("read /proc/self/fd")
            .count();
        Self {
            fds,
            rss_kib: crate::common::proc::rss_kib(std::process::id()),
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
