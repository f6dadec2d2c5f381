//! The filesystems mounted at or below a directory, from this process's
//! mount table (`/proc/self/mountinfo`): each is another device than the
//! state dir's, whose flocks the kernel's lock events are asked for by
//! device.
//!
//! The table is read as bytes, line by line, and only the two fields
//! used are taken from each line (the device, the mount point): a mount
//! point anywhere on the machine that is not UTF-8 (a Latin-1 label) must
//! not make the whole table unreadable, as a parser of text lines does.
//!
//! Invariants: only reads; a mount point is compared as a path, whole
//! components, with the table's octal escapes (`\040` for a space)
//! undone and `dir` resolved (`canonicalize`) first, so a state dir
//! reached through a symlink finds its mounts; a table or a `dir` that
//! cannot be read is `None`, never an empty list that reads as "nothing
//! mounted".

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// The (major, minor) device of every filesystem mounted at or below
/// `dir` (the superblock's, as the kernel's lock events name it), each
/// once, in the table's order; `None` when `dir` or the table cannot be
/// read.
pub fn devices_at_or_below(dir: &Path) -> Option<Vec<(u32, u32)>> {
    let mut devices = Vec::new();
    for (_, device) in mounts_at_or_below(dir)? {
        if !devices.contains(&device) {
            devices.push(device);
        }
    }
    Some(devices)
}

/// Every mount at or below `dir`: its mount point and device, in the
/// table's order (a mount point mounted over twice is listed twice);
/// `None` when `dir` or the table cannot be read.
pub fn mounts_at_or_below(dir: &Path) -> Option<Vec<(PathBuf, (u32, u32))>> {
    let dir = std::fs::canonicalize(dir).ok()?;
    let table = std::fs::read("/proc/self/mountinfo").ok()?;
    Some(
        table
            .split(|&byte| byte == b'\n')
            .filter_map(parse_line)
            .filter(|(point, _)| point.starts_with(&dir))
            .collect(),
    )
}

/// A mountinfo line's mount point and device (`ID PARENT MAJOR:MINOR
/// ROOT MOUNT_POINT …`); `None` for a line that is not one.
fn parse_line(line: &[u8]) -> Option<(PathBuf, (u32, u32))> {
    let mut fields = line.split(|&byte| byte == b' ');
    let _id = fields.next()?;
    let _parent = fields.next()?;
    let device = std::str::from_utf8(fields.next()?).ok()?;
    let _root = fields.next()?;
    let point = unescape(fields.next()?)?;
    let (major, minor) = device.split_once(':')?;
    Some((
        PathBuf::from(OsStr::from_bytes(&point)),
        (major.parse().ok()?, minor.parse().ok()?),
    ))
}

/// A mount table path with its `\ooo` octal escapes undone (the kernel
/// escapes space, tab, newline and backslash so); a backslash not
/// followed by three octal digits is kept as is; `None` for an escape
/// beyond a byte (`\400` and up), which the kernel never writes.
fn unescape(raw: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(raw.len());
    let mut i = 0;
    while i < raw.len() {
        let octal = raw
            .get(i + 1..i + 4)
            .filter(|digits| raw[i] == b'\\' && digits.iter().all(|d| (b'0'..=b'7').contains(d)))
            .map(|d| {
                d.iter()
                    .fold(0u16, |value, digit| value * 8 + u16::from(digit - b'0'))
            });
        match octal {
            Some(value) => {
                out.push(u8::try_from(value).ok()?);
                i += 4;
            }
            None => {
                out.push(raw[i]);
                i += 1;
            }
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_the_kernel_writes_are_undone_and_others_kept() {
        assert_eq!(
            unescape(br"/srv/agent\040state/a\134b\011c\012").as_deref(),
            Some(&b"/srv/agent state/a\\b\tc\n"[..])
        );
        assert_eq!(
            unescape(br"/plain/\9x\04").as_deref(),
            Some(&br"/plain/\9x\04"[..])
        );
        assert_eq!(unescape(br"/beyond/\777"), None);
    }

    /// A mount point that is not UTF-8 is read like any other, and
    /// spoils no other line.
    #[test]
    fn lines_are_read_as_bytes_and_a_bad_line_spoils_no_other() {
        let table: &[u8] = b"22 1 254:0 / / rw - ext4 /dev/vda rw\n\
            40 22 0:51 / /mnt/\xe9t\xe9 rw - tmpfs x rw\n\
            garbage\n\
            41 22 0:52 / /srv/locks\\040dir rw - tmpfs y rw\n";
        let lines: Vec<_> = table
            .split(|&b| b == b'\n')
            .filter_map(parse_line)
            .collect();
        assert_eq!(lines.len(), 3, "{lines:?}");
        assert_eq!(lines[1].0.as_os_str().as_bytes(), b"/mnt/\xe9t\xe9");
        assert_eq!(lines[1].1, (0, 51));
        assert_eq!(lines[2], (PathBuf::from("/srv/locks dir"), (0, 52)));
    }

    #[test]
    fn the_root_filesystem_is_at_or_below_slash_and_a_missing_dir_is_unknown() {
        let root = devices_at_or_below(Path::new("/")).expect("the mount table");
        assert!(!root.is_empty(), "/ is a mount point");
        assert_eq!(devices_at_or_below(Path::new("/nonexistent/locktop")), None);
    }
}
