//! One journal file on its own: its header, its first checkpoint, the
//! checkpoints found by bisecting it by byte offset, and its last time.
//!
//! Invariant: nothing here reads a file whole — a checkpoint is looked
//! for in [`SCAN_CHUNK`] reads between two offsets, the last time in a
//! window from the end that grows until a line with a time is in it.

use std::fs::File;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::Path;
use std::time::SystemTime;

use anyhow::{Context as _, bail};

use super::JournalFile;
use super::entry_time;
use crate::format::{self, CHECKPOINT_PREFIX, Entry, LineCheck, Namer, VERSION};

/// Bytes read at a time while looking for a checkpoint.
const SCAN_CHUNK: usize = 256 << 10;

/// Reads a file's header and finds its first checkpoint.
pub(super) fn open_file(path: &Path) -> anyhow::Result<JournalFile> {
    let file = File::open(path).with_context(|| format!("cannot read {}", path.display()))?;
    let meta = file.metadata()?;
    let len = meta.len();
    let identity = {
        use std::os::unix::fs::MetadataExt as _;
        (meta.dev(), meta.ino())
    };
    let mut reader = BufReader::new(file);
    let mut line = Vec::new();
    reader
        .read_until(b'\n', &mut line)
        .with_context(|| format!("cannot read {}", path.display()))?;
    if line.is_empty() {
        bail!("{}: empty, not a locktop journal", path.display());
    }
    let mut namer = Namer::new(Path::new("/"));
    let header = match format::decode(trim_newline(&line), &mut namer) {
        Ok(Entry::Header(header)) => header,
        _ => bail!("{}: not a locktop journal (no header line)", path.display()),
    };
    let check = format::check_line(trim_newline(&line));
    if check == LineCheck::Bad || (header.checked_lines && check == LineCheck::Unchecked) {
        bail!(
            "{}: its header line is damaged (its checksum does not match)",
            path.display()
        );
    }
    if header.format != format::FORMAT {
        bail!(
            "{}: not a locktop journal ({:?})",
            path.display(),
            header.format
        );
    }
    if header.version > VERSION {
        bail!(
            "{}: journal format version {} is newer than this locktop reads ({VERSION}): upgrade locktop",
            path.display(),
            header.version
        );
    }
    // The first checkpoint's head is line 1. A line moved or copied in
    // before it (a head of a later checkpoint too) is numbered otherwise:
    // the head numbered 1 is looked for one line further, and the line
    // before it is never read (its own place shows it missing).
    let mut offset = line.len() as u64;
    let mut first_checkpoint = None;
    for _ in 0..2 {
        line.clear();
        reader.read_until(b'\n', &mut line)?;
        if let Some(time) = first_head_time(&line, header.checked_lines, &mut namer) {
            first_checkpoint = Some((offset, time));
            break;
        }
        offset += line.len() as u64;
    }
    let mut file = JournalFile {
        path: path.to_path_buf(),
        end: header.started,
        header,
        len,
        identity,
        first_checkpoint,
        stopped_cleanly: false,
    };
    if let Some((end, clean)) = last_time(&file)? {
        file.end = end;
        file.stopped_cleanly = clean;
    }
    Ok(file)
}

/// The time of `line` when it is the first checkpoint's head: whole, a
/// head, and numbered 1 (or, in a file without line numbers, unchecked).
fn first_head_time(line: &[u8], checked_lines: bool, namer: &mut Namer) -> Option<SystemTime> {
    if !line.starts_with(CHECKPOINT_PREFIX) || !line.ends_with(b"\n") {
        return None;
    }
    let first = match format::check_line(trim_newline(line)) {
        LineCheck::Good(n) => n == 1,
        LineCheck::Unchecked => !checked_lines,
        LineCheck::Bad => false,
    };
    match format::decode(trim_newline(line), namer) {
        Ok(Entry::CheckpointHead(head)) if first => Some(head.time),
        _ => None,
    }
}

pub(super) fn trim_newline(line: &[u8]) -> &[u8] {
    line.strip_suffix(b"\n").unwrap_or(line)
}

/// The first checkpoint starting at or after `from` and before `limit`:
/// its offset and time. Reads forward in chunks, looking for a newline
/// followed by the checkpoint prefix.
pub(super) fn next_checkpoint(
    file: &mut File,
    from: u64,
    limit: u64,
) -> anyhow::Result<Option<(u64, SystemTime)>> {
    let mut needle = vec![b'\n'];
    needle.extend_from_slice(CHECKPOINT_PREFIX);
    let finder = memchr::memmem::Finder::new(&needle);
    // Start one byte early: a line starting exactly at `from` counts.
    let mut at = from.saturating_sub(1);
    let mut buffer = vec![0u8; SCAN_CHUNK + needle.len()];
    while at < limit {
        file.seek(SeekFrom::Start(at))?;
        let want = ((limit - at) as usize + needle.len()).min(buffer.len());
        let read = read_fully(file, &mut buffer[..want])?;
        if read == 0 {
            return Ok(None);
        }
        if let Some(found) = finder.find(&buffer[..read]) {
            let offset = at + found as u64 + 1;
            if offset >= limit {
                return Ok(None);
            }
            return Ok(checkpoint_time(file, offset)?.map(|time| (offset, time)));
        }
        if read < want {
            return Ok(None);
        }
        at += (read - needle.len()) as u64;
    }
    Ok(None)
}

/// The time of the checkpoint head at `offset`, if its line is whole.
pub(super) fn checkpoint_time(file: &mut File, offset: u64) -> anyhow::Result<Option<SystemTime>> {
    file.seek(SeekFrom::Start(offset))?;
    let mut line = Vec::new();
    BufReader::new(&mut *file).read_until(b'\n', &mut line)?;
    if !line.ends_with(b"\n") || format::check_line(trim_newline(&line)) == LineCheck::Bad {
        return Ok(None);
    }
    Ok(
        match format::decode(trim_newline(&line), &mut Namer::new(Path::new("/"))) {
            Ok(Entry::CheckpointHead(head)) => Some(head.time),
            _ => None,
        },
    )
}

pub(super) fn read_fully(file: &mut File, buffer: &mut [u8]) -> std::io::Result<usize> {
    let mut read = 0;
    while read < buffer.len() {
        match file.read(&mut buffer[read..])? {
            0 => break,
            n => read += n,
        }
    }
    Ok(read)
}

/// The time of the last whole line of `file` that carries one, and
/// whether that line is a clean stop's end line.
pub(super) fn last_time(file: &JournalFile) -> anyhow::Result<Option<(SystemTime, bool)>> {
    let mut reader =
        File::open(&file.path).with_context(|| format!("cannot read {}", file.path.display()))?;
    let mut window = 64u64 << 10;
    let mut namer = Namer::new(&file.header.state_dir);
    loop {
        let start = file.len.saturating_sub(window);
        reader.seek(SeekFrom::Start(start))?;
        let mut tail = vec![0u8; (file.len - start) as usize];
        let read = read_fully(&mut reader, &mut tail)?;
        tail.truncate(read);
        let whole = match tail.iter().rposition(|b| *b == b'\n') {
            Some(end) => &tail[..end],
            None => &[][..],
        };
        let mut lines: Vec<&[u8]> = whole.split(|b| *b == b'\n').collect();
        if start > 0 && !lines.is_empty() {
            // The first piece may be the end of a line cut by the window.
            lines.remove(0);
        }
        for line in lines.iter().rev() {
            if line.starts_with(b"{\"ck\":")
                || line.starts_with(b"{\"cf\":")
                || format::check_line(line) == LineCheck::Bad
            {
                continue;
            }
            if let Ok(entry) = format::decode(line, &mut namer)
                && let Some(time) = entry_time(&entry)
            {
                return Ok(Some((time, matches!(entry, Entry::End(_)))));
            }
        }
        if start == 0 {
            return Ok(None);
        }
        window *= 4;
    }
}
