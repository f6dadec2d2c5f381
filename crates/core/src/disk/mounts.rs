//! The filesystems mounted at or below a directory, from this process's
//! mount table (`/proc/self/mountinfo`, read through `procfs`): each is
//! another device than the state dir's, whose flocks the kernel's lock
//! events are asked for by device.
//!
//! Invariants: only reads; a mount point is compared as a path, with the
//! table's octal escapes (`\040` for a space) undone and `dir` resolved
//! (`canonicalize`) first, so a state dir reached through a symlink
//! finds its mounts; a table that cannot be read yields nothing.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// The (major, minor) device of every filesystem mounted at or below
/// `dir` (the superblock's, as the kernel's lock events name it), each
/// once, in the table's order; empty when `dir` or the table cannot be
/// read.
pub fn devices_at_or_below(dir: &Path) -> Vec<(u32, u32)> {
    let mut devices = Vec::new();
    for (_, device) in mounts_at_or_below(dir) {
        if !devices.contains(&device) {
            devices.push(device);
        }
    }
    devices
}

/// Every mount at or below `dir`: its mount point and device, in the
/// table's order (a mount point mounted over twice is listed twice);
/// empty when `dir` or the table cannot be read.
pub fn mounts_at_or_below(dir: &Path) -> Vec<(PathBuf, (u32, u32))> {
    let Ok(dir) = std::fs::canonicalize(dir) else {
        return Vec::new();
    };
    let Ok(table) = procfs::process::Process::myself().and_then(|me| me.mountinfo()) else {
        return Vec::new();
    };
    let mut mounts = Vec::new();
    for mount in table.iter() {
        let point = PathBuf::from(OsStr::from_bytes(&unescape(
            mount.mount_point.as_os_str().as_bytes(),
        )));
        if !point.starts_with(&dir) {
            continue;
        }
        let device = mount
            .majmin
            .split_once(':')
            .and_then(|(major, minor)| Some((major.parse().ok()?, minor.parse().ok()?)));
        if let Some(device) = device {
            mounts.push((point, device));
        }
    }
    mounts
}

/// A mount table path with its `\ooo` octal escapes undone (the kernel
/// escapes space, tab, newline and backslash so); anything else as is.
fn unescape(raw: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(raw.len());
    let mut i = 0;
    while i < raw.len() {
        let octal = raw
            .get(i + 1..i + 4)
            .filter(|digits| raw[i] == b'\\' && digits.iter().all(|d| (b'0'..=b'7').contains(d)))
            .map(|d| (d[0] - b'0') * 64 + (d[1] - b'0') * 8 + (d[2] - b'0'));
        match octal {
            Some(byte) => {
                out.push(byte);
                i += 4;
            }
            None => {
                out.push(raw[i]);
                i += 1;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_the_kernel_writes_are_undone_and_others_kept() {
        assert_eq!(
            unescape(br"/srv/agent\040state/a\134b\011c\012"),
            b"/srv/agent state/a\\b\tc\n"
        );
        assert_eq!(unescape(br"/plain/\9x\04"), br"/plain/\9x\04");
    }

    #[test]
    fn the_root_filesystem_is_at_or_below_slash_and_nothing_below_a_missing_dir() {
        let root = devices_at_or_below(Path::new("/"));
        assert!(!root.is_empty(), "/ is a mount point");
        assert!(devices_at_or_below(Path::new("/nonexistent/locktop")).is_empty());
    }
}
