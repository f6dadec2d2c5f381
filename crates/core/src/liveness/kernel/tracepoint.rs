//! Where the `filelock:flock_lock_inode` tracepoint is described, and what
//! its `format` file says: the event id, and the offset, size and sign of
//! each field the reader decodes.
//!
//! Invariants: nothing is written, and the host's mounts are never
//! changed — tracefs is looked for in `/sys/kernel/tracing`, then
//! `/sys/kernel/debug/tracing`; where it is mounted in neither, root
//! reads it from a tracefs mounted in a private mount namespace of a
//! thread of its own ([`Tracepoint::find_or_mount_privately`]), and
//! anyone else gets a [`Refused`] naming what is missing. Every offset comes from the
//! `format` file by field name, except [`Layout::measured`]: used only when
//! the caller supplied the id and the `format` file cannot be read (it is
//! 0440 root, like `id`: a `CAP_PERFMON` user cannot read either), and then
//! only for samples whose raw size is exactly the one measured with it.

use std::path::{Path, PathBuf};

use super::Refused;

/// Where tracefs is looked for, in order.
pub(crate) const TRACEFS_ROOTS: [&str; 2] = ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"];

/// The event's directory under a tracefs root.
const EVENT_DIR: &str = "events/filelock/flock_lock_inode";

/// One field of the raw sample: where it is and how to read it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Field {
    /// Byte offset in the raw sample.
    pub offset: usize,
    /// Size in bytes: 1, 2, 4 or 8.
    pub size: usize,
    /// Whether the kernel type is signed.
    pub signed: bool,
}

impl Field {
    /// The field's bytes as a native-endian unsigned number, or `None` if
    /// `raw` is too short.
    pub(crate) fn unsigned(&self, raw: &[u8]) -> Option<u64> {
        let bytes = raw.get(self.offset..self.offset + self.size)?;
        Some(match *bytes {
            [a] => u64::from(a),
            [a, b] => u64::from(u16::from_ne_bytes([a, b])),
            [a, b, c, d] => u64::from(u32::from_ne_bytes([a, b, c, d])),
            [a, b, c, d, e, f, g, h] => u64::from_ne_bytes([a, b, c, d, e, f, g, h]),
            _ => return None,
        })
    }

    /// The field as a signed number (sign-extended when the kernel type
    /// is signed), or `None` if `raw` is too short.
    pub fn signed(&self, raw: &[u8]) -> Option<i64> {
        let value = self.unsigned(raw)?;
        if !self.signed || self.size == 8 {
            return Some(value as i64);
        }
        let shift = 64 - 8 * self.size as u32;
        Some(((value << shift) as i64) >> shift)
    }

    /// One past the field's last byte.
    fn end(&self) -> usize {
        self.offset + self.size
    }
}

/// The fields the reader decodes, and how long a raw sample must be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    /// `i_ino`: the inode number.
    pub inode: Field,
    /// `s_dev`: the device, kernel encoding (`major << 20 | minor`).
    pub device: Field,
    /// `owner`: the open file description (the flock owner).
    pub owner: Field,
    /// `pid`: the requesting process (its thread group id).
    pub pid: Field,
    /// `flags`: `FL_*` bits.
    pub flags: Field,
    /// `type`: `F_RDLCK` 0, `F_WRLCK` 1, `F_UNLCK` 2.
    pub lock_type: Field,
    /// `ret`: what the request returned.
    pub ret: Field,
    /// Which raw sizes this layout reads.
    pub fits: Fits,
}

/// Which raw sample sizes a [`Layout`] may be applied to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fits {
    /// Any at least this long (the layout came from the `format` file).
    AtLeast(usize),
    /// Exactly this long (the measured layout, unchecked against `format`).
    Exactly(usize),
}

impl Layout {
    /// The layout measured on Linux 6.18 (x86_64), for when the `format`
    /// file cannot be read: `i_ino` u64 at 16, `s_dev` u32 at 24, `owner`
    /// ptr at 40, `pid` u32 at 48, `flags` u32 at 52, `type` u8 at 56, `ret`
    /// i32 at 80. Perf pads the 84-byte entry so the raw sample is 92
    /// bytes; a sample of any other size is not decoded with it.
    pub fn measured() -> Self {
        let field = |offset, size, signed| Field {
            offset,
            size,
            signed,
        };
        Self {
            inode: field(16, 8, false),
            device: field(24, 4, false),
            owner: field(40, 8, false),
            pid: field(48, 4, false),
            flags: field(52, 4, false),
            lock_type: field(56, 1, false),
            ret: field(80, 4, true),
            fits: Fits::Exactly(MEASURED_RAW_SIZE),
        }
    }

    /// Whether a raw sample of `len` bytes may be decoded with this layout.
    pub fn fits(&self, len: usize) -> bool {
        match self.fits {
            Fits::AtLeast(min) => len >= min,
            Fits::Exactly(size) => len == size,
        }
    }

    /// Parses a `format` file's text into the event id and the layout of
    /// the fields named above; `Err` says which field is missing or
    /// malformed.
    pub fn parse(format: &str) -> Result<(u64, Self), String> {
        let id = format
            .lines()
            .find_map(|line| line.strip_prefix("ID:"))
            .ok_or("no ID line")?
            .trim()
            .parse::<u64>()
            .map_err(|error| format!("bad ID line: {error}"))?;
        let fields: Vec<(&str, Field)> = format.lines().filter_map(parse_field_line).collect();
        let find = |name: &str| {
            fields
                .iter()
                .find(|(field_name, _)| *field_name == name)
                .map(|(_, field)| *field)
                .filter(|field| matches!(field.size, 1 | 2 | 4 | 8))
                .ok_or_else(|| format!("no readable field `{name}`"))
        };
        let inode = find("i_ino")?;
        let device = find("s_dev")?;
        let owner = find("owner")?;
        let pid = find("pid")?;
        let flags = find("flags")?;
        let lock_type = find("type")?;
        let ret = find("ret")?;
        let min = [inode, device, owner, pid, flags, lock_type, ret]
            .iter()
            .map(Field::end)
            .max()
            .unwrap_or(0);
        Ok((
            id,
            Self {
                inode,
                device,
                owner,
                pid,
                flags,
                lock_type,
                ret,
                fits: Fits::AtLeast(min),
            },
        ))
    }
}

/// The raw sample size measured with [`Layout::measured`].
pub(crate) const MEASURED_RAW_SIZE: usize = 92;

/// `field:TYPE NAME;\toffset:N;\tsize:N;\tsigned:N;` → (NAME, field).
fn parse_field_line(line: &str) -> Option<(&str, Field)> {
    let mut parts = line.trim().split(';').map(str::trim);
    let declaration = parts.next()?.strip_prefix("field:")?;
    let name = declaration.rsplit([' ', '*']).next()?;
    let name = name.split('[').next()?;
    let mut number = |key: &str| -> Option<usize> { parts.next()?.strip_prefix(key)?.parse().ok() };
    let offset = number("offset:")?;
    let size = number("size:")?;
    let signed = number("signed:")? != 0;
    Some((
        name,
        Field {
            offset,
            size,
            signed,
        },
    ))
}

/// Where the tracepoint was found, and what its files said.
#[derive(Debug, Clone)]
pub(crate) struct Tracepoint {
    /// The event id (`config` for `perf_event_open`).
    pub id: u64,
    /// How to read its raw samples.
    pub layout: Layout,
    /// Whether `layout` came from the `format` file (else it is
    /// [`Layout::measured`]).
    pub from_format: bool,
}

impl Tracepoint {
    /// Finds the tracepoint under the first of `roots` where tracefs is
    /// mounted and reads its id and format. With `given_id`, the `id`
    /// file is not needed: if `format` cannot be read either (or tracefs
    /// cannot be looked into), the layout is [`Layout::measured`]; if it
    /// can, its id must be `given_id`.
    pub fn find(roots: &[&Path], given_id: Option<u64>) -> Result<Self, Refused> {
        let event_dir = match locate(roots) {
            Ok(dir) => dir,
            Err(Refused::TracefsUnreadable { .. } | Refused::TracefsNotMounted)
                if given_id.is_some() =>
            {
                return Ok(Self::measured(given_id));
            }
            Err(refused) => return Err(refused),
        };
        let format_path = event_dir.join("format");
        let format = match std::fs::read_to_string(&format_path) {
            Ok(text) => text,
            Err(_) if given_id.is_some() => return Ok(Self::measured(given_id)),
            Err(error) => {
                // Without the id there is nothing to go on: say why the id
                // (the same 0440 root as `format`) cannot be read.
                let id_path = event_dir.join("id");
                let error = std::fs::read_to_string(&id_path).err().unwrap_or(error);
                return Err(Refused::IdUnreadable {
                    path: id_path,
                    error,
                });
            }
        };
        Self::from_format(&format, format_path, given_id)
    }

    /// The tracepoint a `format` file (read from `path`) describes; its
    /// id must be `given_id`, when one is given.
    fn from_format(format: &str, path: PathBuf, given_id: Option<u64>) -> Result<Self, Refused> {
        let (id, layout) =
            Layout::parse(format).map_err(|why| Refused::FormatUnexpected { path, why })?;
        if let Some(given) = given_id
            && given != id
        {
            return Err(Refused::WrongId { given, actual: id });
        }
        Ok(Self {
            id,
            layout,
            from_format: true,
        })
    }

    fn measured(given_id: Option<u64>) -> Self {
        Self {
            id: given_id.unwrap_or_default(),
            layout: Layout::measured(),
            from_format: false,
        }
    }
}

impl Tracepoint {
    /// [`Tracepoint::find`] in `roots`; where tracefs is mounted in none
    /// of them, read from a tracefs this process mounts where no one else
    /// sees it ([`format_from_a_private_tracefs`]) — for root (or
    /// `CAP_SYS_ADMIN`). Anyone else, or a kernel that refuses, gets
    /// [`Refused::TracefsNotMounted`], which says how to mount it.
    pub fn find_or_mount_privately(
        roots: &[&Path],
        given_id: Option<u64>,
    ) -> Result<Self, Refused> {
        let refused = match Self::find(roots, given_id) {
            Err(Refused::TracefsNotMounted) => Refused::TracefsNotMounted,
            found => return found,
        };
        let Some(mount_point) = roots.iter().find(|root| root.is_dir()) else {
            return Err(refused);
        };
        let Ok(format) = format_from_a_private_tracefs(mount_point) else {
            return Err(refused);
        };
        Self::from_format(
            &format,
            mount_point.join(EVENT_DIR).join("format"),
            given_id,
        )
    }
}

/// The tracepoint's `format` file, read from a tracefs mounted on
/// `mount_point` in a mount namespace of a thread of this process's own:
/// the thread leaves the host's namespace, makes every mount in its copy
/// private first (systemd makes `/` shared, and a mount under a shared
/// one would appear on the host), mounts tracefs, reads, and ends — its
/// namespace, and the mount, end with it. The host's mount table is
/// never changed, and nothing is written anywhere. Needs root (or
/// `CAP_SYS_ADMIN`); the perf events opened afterwards need only the id.
pub(crate) fn format_from_a_private_tracefs(mount_point: &Path) -> std::io::Result<String> {
    use nix::mount::{MsFlags, mount};
    use nix::sched::{CloneFlags, unshare};
    let mount_point = mount_point.to_path_buf();
    std::thread::Builder::new()
        .name("locktop-tracefs".into())
        .spawn(move || -> std::io::Result<String> {
            unshare(CloneFlags::CLONE_NEWNS)?;
            let none: Option<&str> = None;
            mount(none, "/", none, MsFlags::MS_REC | MsFlags::MS_PRIVATE, none)?;
            mount(
                Some("nodev"),
                &mount_point,
                Some("tracefs"),
                MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC,
                none,
            )?;
            std::fs::read_to_string(mount_point.join(EVENT_DIR).join("format"))
        })?
        .join()
        .unwrap_or_else(|_| Err(std::io::Error::other("the tracefs thread panicked")))
}

/// The event directory under the first root that has tracefs mounted.
fn locate(roots: &[&Path]) -> Result<PathBuf, Refused> {
    for root in roots {
        let events = root.join("events");
        match std::fs::metadata(&events) {
            Ok(meta) if meta.is_dir() => {
                let dir = root.join(EVENT_DIR);
                return if dir.is_dir() {
                    Ok(dir)
                } else {
                    Err(Refused::TracepointMissing { path: dir })
                };
            }
            Err(error) if error.kind() == std::io::ErrorKind::PermissionDenied => {
                return Err(Refused::TracefsUnreadable {
                    path: root.to_path_buf(),
                    error,
                });
            }
            _ => {}
        }
    }
    Err(Refused::TracefsNotMounted)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The format file as this kernel (6.18) prints it.
    const FORMAT: &str = "name: flock_lock_inode
ID: 1125
format:
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;
\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;
\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;

\tfield:struct file_lock * fl;\toffset:8;\tsize:8;\tsigned:0;
\tfield:unsigned long i_ino;\toffset:16;\tsize:8;\tsigned:0;
\tfield:dev_t s_dev;\toffset:24;\tsize:4;\tsigned:0;
\tfield:struct file_lock_core * blocker;\toffset:32;\tsize:8;\tsigned:0;
\tfield:fl_owner_t owner;\toffset:40;\tsize:8;\tsigned:0;
\tfield:unsigned int pid;\toffset:48;\tsize:4;\tsigned:0;
\tfield:unsigned int flags;\toffset:52;\tsize:4;\tsigned:0;
\tfield:unsigned char type;\toffset:56;\tsize:1;\tsigned:0;
\tfield:loff_t fl_start;\toffset:64;\tsize:8;\tsigned:1;
\tfield:loff_t fl_end;\toffset:72;\tsize:8;\tsigned:1;
\tfield:int ret;\toffset:80;\tsize:4;\tsigned:1;

print fmt: \"fl=%p dev=0x%x:0x%x ino=0x%lx\", REC->fl
";

    /// Parsed by name, the real format gives the measured layout (so the
    /// fallback is the kernel's own, where it was measured).
    #[test]
    fn the_format_file_parses_to_the_measured_layout() {
        let (id, layout) = Layout::parse(FORMAT).expect("parses");
        assert_eq!(id, 1125);
        let measured = Layout::measured();
        assert_eq!(
            Layout {
                fits: measured.fits,
                ..layout.clone()
            },
            measured
        );
        assert_eq!(layout.fits, Fits::AtLeast(84));
        assert!(layout.ret.signed && !layout.owner.signed);
    }

    /// Offsets follow the file, not the measurement: a field moved is read
    /// where the file says.
    #[test]
    fn offsets_are_read_by_field_name() {
        let moved = FORMAT.replace("int ret;\toffset:80", "int ret;\toffset:88");
        let (_, layout) = Layout::parse(&moved).expect("parses");
        assert_eq!(layout.ret.offset, 88);
        assert_eq!(layout.fits, Fits::AtLeast(92));
    }

    #[test]
    fn a_missing_field_is_named() {
        let without = FORMAT.replace("fl_owner_t owner;", "fl_owner_t holder;");
        assert_eq!(
            Layout::parse(&without).unwrap_err(),
            "no readable field `owner`"
        );
    }

    #[test]
    fn signed_fields_are_sign_extended() {
        let ret = Field {
            offset: 0,
            size: 4,
            signed: true,
        };
        assert_eq!(ret.signed(&(-11i32).to_ne_bytes()), Some(-11));
        assert_eq!(ret.signed(&[0, 0]), None, "too short");
        let flags = Field {
            signed: false,
            ..ret
        };
        assert_eq!(
            flags.signed(&u32::MAX.to_ne_bytes()),
            Some(i64::from(u32::MAX))
        );
    }

    /// A root with no `events` is tracefs not mounted; with `events` but
    /// not the event, the tracepoint is missing; each says so in one line.
    #[test]
    fn missing_tracefs_and_missing_tracepoint_are_told_apart() {
        let root = tempfile::tempdir().expect("temp dir");
        let refused = Tracepoint::find(&[root.path()], None).unwrap_err();
        assert!(matches!(refused, Refused::TracefsNotMounted), "{refused}");
        assert!(refused.to_string().contains("mount -t tracefs"));

        std::fs::create_dir(root.path().join("events")).expect("mkdir");
        let refused = Tracepoint::find(&[root.path()], None).unwrap_err();
        assert!(
            matches!(refused, Refused::TracepointMissing { .. }),
            "{refused}"
        );
        for refused in [refused, Refused::TracefsNotMounted] {
            assert!(!refused.to_string().contains('\n'), "one line: {refused}");
        }
    }

    /// With the format readable, a given id must be the tracepoint's.
    #[test]
    fn a_given_id_is_checked_against_the_format() {
        let root = tempfile::tempdir().expect("temp dir");
        let dir = root.path().join(EVENT_DIR);
        std::fs::create_dir_all(&dir).expect("mkdir");
        std::fs::write(dir.join("format"), FORMAT).expect("write");
        let found = Tracepoint::find(&[root.path()], Some(1125)).expect("found");
        assert!(found.from_format);
        let refused = Tracepoint::find(&[root.path()], Some(7)).unwrap_err();
        assert!(
            matches!(
                refused,
                Refused::WrongId {
                    given: 7,
                    actual: 1125
                }
            ),
            "{refused}"
        );
    }
}
