//! The output side of `locktop watch`: a [`PendingLines`] (the coalescing
//! [`Queue`] behind a mutex) and a thread that takes its lines and writes
//! them to stdout — or, where a write cannot block ([`DirectOut`]: a pipe
//! with room for the lines, `/dev/null`, a regular file), the loop writes
//! them itself ([`PendingLines::flush`]): under churn the writer's
//! hand-offs were a sixth of a monitor's wake-ups.
//!
//! Invariants: only the writer thread ever blocks on stdout. The loop that
//! drains the engine holds the mutex only to fold a change in, or to
//! write what cannot block; the writer never holds it while writing, so a
//! reader that stops reading stalls the writer alone. Lines go out in
//! the order they were queued: the loop writes only while the writer
//! holds nothing, and what it could not write whole is the writer's next
//! text. The writer takes at most [`WRITE_BATCH`] lines at a time, so
//! what it holds outside the queue is bounded too.

use std::io::Write;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, PoisonError};

use tokio::sync::oneshot;

use super::format;
use super::queue::{Line, Queue};

/// The most lines the writer takes out of the queue at once.
pub(crate) const WRITE_BATCH: usize = 256;

/// The pending lines, shared by the loop that adds them and the writer.
#[derive(Debug, Default)]
pub struct PendingLines {
    state: Mutex<Pending>,
    ready: Condvar,
    /// The same wake-up for async readers (`serve`'s `/events`).
    ready_async: tokio::sync::Notify,
    /// Where the loop writes itself when that cannot block (set once, by
    /// [`Self::write_directly`]); then [`Self::flush`] wakes the writer.
    direct: OnceLock<Direct>,
}

#[derive(Debug, Default)]
struct Pending {
    queue: Queue,
    closed: bool,
    /// The writer holds lines it took and has not written yet.
    writing: bool,
    /// Text the loop took and could not write whole: the writer's next.
    carried: Option<String>,
}

/// The loop's own way to stdout.
#[derive(Debug)]
struct Direct {
    out: DirectOut,
    json: bool,
}

impl PendingLines {
    fn lock(&self) -> MutexGuard<'_, Pending> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Folds a change into the queue (never blocks on stdout). With a
    /// direct way out, the writer is woken by [`Self::flush`] only.
    pub fn push(&self, add: impl FnOnce(&mut Queue)) {
        add(&mut self.lock().queue);
        if self.direct.get().is_none() {
            self.ready.notify_one();
        }
        self.ready_async.notify_one();
    }

    /// From now on the loop writes to `out` itself when that cannot
    /// block (NDJSON when `json`), calling [`Self::flush`] after its
    /// pushes; ignored when a way was set already.
    pub fn write_directly(&self, out: DirectOut, json: bool) {
        let _ = self.direct.set(Direct { out, json });
    }

    /// Writes what is queued to the direct way out when the writer holds
    /// nothing and the write cannot block; else (or for what a write left)
    /// wakes the writer. Nothing without a direct way out (`push` woke it).
    pub fn flush(&self) {
        let Some(direct) = self.direct.get() else {
            return;
        };
        let mut pending = self.lock();
        if !pending.writing && pending.carried.is_none() && !pending.queue.is_empty() {
            let mut text = String::new();
            for line in std::iter::from_fn(|| pending.queue.pop()).take(WRITE_BATCH) {
                if let Some(line) = format::line(&line, direct.json) {
                    text.push_str(&line);
                    text.push('\n');
                }
            }
            let written = if direct.out.room() >= text.len() {
                direct.out.write(text.as_bytes())
            } else {
                0
            };
            if written < text.len() {
                pending.carried = Some(text.split_off(written));
            }
        }
        let wake = pending.carried.is_some() || !pending.queue.is_empty();
        drop(pending);
        if wake {
            self.ready.notify_one();
        }
    }

    /// No more lines will come: the writer ends once it has written the
    /// pending ones.
    pub fn close(&self) {
        self.lock().closed = true;
        self.ready.notify_one();
        self.ready_async.notify_one();
    }

    /// [`Self::take`] for async readers: waits without blocking a thread.
    pub async fn take_async(&self) -> Option<Vec<Line>> {
        loop {
            let notified = self.ready_async.notified();
            {
                let mut pending = self.lock();
                if !pending.queue.is_empty() || pending.closed {
                    return take_batch(&mut pending);
                }
            }
            notified.await;
        }
    }

    /// Waits for lines and takes the text the loop left, then up to
    /// [`WRITE_BATCH`] lines; `None` once closed and empty. The writer
    /// holds them until [`Self::written`].
    fn take(&self) -> Option<(Option<String>, Vec<Line>)> {
        let mut pending = self.lock();
        while pending.queue.is_empty() && pending.carried.is_none() && !pending.closed {
            pending = self
                .ready
                .wait(pending)
                .unwrap_or_else(PoisonError::into_inner);
        }
        let carried = pending.carried.take();
        let batch = take_batch(&mut pending).unwrap_or_default();
        if carried.is_none() && batch.is_empty() {
            return None;
        }
        pending.writing = true;
        Some((carried, batch))
    }

    /// The writer wrote what it took.
    fn written(&self) {
        self.lock().writing = false;
    }
}

/// Up to [`WRITE_BATCH`] lines; `None` when there are none.
fn take_batch(pending: &mut Pending) -> Option<Vec<Line>> {
    let batch: Vec<Line> = std::iter::from_fn(|| pending.queue.pop())
        .take(WRITE_BATCH)
        .collect();
    (!batch.is_empty()).then_some(batch)
}

/// Starts the writer thread: it writes every line of `outbox` to `out`
/// (NDJSON when `json`) until the outbox is closed and empty, then
/// reports `Ok`; or until a write fails, and reports the error (a reader
/// that went away is `BrokenPipe`).
pub fn spawn(
    outbox: Arc<PendingLines>,
    json: bool,
    mut out: impl Write + Send + 'static,
) -> std::io::Result<oneshot::Receiver<std::io::Result<()>>> {
    let (done, written) = oneshot::channel();
    std::thread::Builder::new()
        .name("watch-writer".into())
        .spawn(move || {
            let _ = done.send(write_all(&outbox, json, &mut out));
        })?;
    Ok(written)
}

fn write_all(outbox: &PendingLines, json: bool, out: &mut impl Write) -> std::io::Result<()> {
    let mut text = String::new();
    while let Some((carried, batch)) = outbox.take() {
        text.clear();
        text.push_str(carried.as_deref().unwrap_or_default());
        for line in batch.iter().filter_map(|line| format::line(line, json)) {
            text.push_str(&line);
            text.push('\n');
        }
        out.write_all(text.as_bytes())?;
        out.flush()?;
        outbox.written();
    }
    Ok(())
}

/// A stdout a write to which cannot block: a pipe while it has room for
/// the text, `/dev/null`, a regular file (its writes wait for the disk,
/// never for a reader). A terminal, a socket (journald's) or a pipe in
/// packet mode is none: the writer thread writes to those. The pipe's
/// room is checked just before the write: a second process writing to
/// the same pipe in between (`(locktop watch; other) | reader`) could
/// make that one write wait for the reader.
#[derive(Debug)]
pub struct DirectOut {
    fd: OwnedFd,
    kind: DirectKind,
}

#[derive(Debug, Clone, Copy)]
enum DirectKind {
    /// A pipe of this many bytes.
    Pipe(usize),
    /// `/dev/null` or a regular file.
    Never,
}

/// The most a pipe buffer's page holds.
const PIPE_PAGE: usize = 4096;

impl DirectOut {
    /// `out` (a copy of its descriptor), when a write to it cannot block.
    pub fn of(out: &impl AsFd) -> Option<Self> {
        use nix::sys::stat::{SFlag, fstat};
        let fd = out.as_fd().try_clone_to_owned().ok()?;
        let stat = fstat(&fd).ok()?;
        let kind = match SFlag::from_bits_truncate(stat.st_mode) & SFlag::S_IFMT {
            SFlag::S_IFREG => DirectKind::Never,
            SFlag::S_IFCHR if stat.st_rdev == nix::sys::stat::makedev(1, 3) => DirectKind::Never,
            SFlag::S_IFIFO => {
                let flags = nix::fcntl::fcntl(&fd, nix::fcntl::FcntlArg::F_GETFL).ok()?;
                let flags = nix::fcntl::OFlag::from_bits_truncate(flags);
                if flags.contains(nix::fcntl::OFlag::O_DIRECT) {
                    return None;
                }
                let size = nix::fcntl::fcntl(&fd, nix::fcntl::FcntlArg::F_GETPIPE_SZ).ok()?;
                DirectKind::Pipe(usize::try_from(size).ok()?)
            }
            _ => return None,
        };
        Some(Self { fd, kind })
    }

    /// How many bytes one write may hold without blocking now: in a
    /// pipe, the pages no unread byte can be in (its unread bytes may
    /// straddle one page more at each end); anything elsewhere.
    fn room(&self) -> usize {
        match self.kind {
            DirectKind::Never => usize::MAX,
            DirectKind::Pipe(size) => {
                let Ok(unread) = crate::unread::unread_bytes(self.fd.as_fd()) else {
                    return 0;
                };
                let unread_pages = unread.div_ceil(PIPE_PAGE);
                (size / PIPE_PAGE)
                    .saturating_sub(unread_pages + 2)
                    .saturating_mul(PIPE_PAGE)
            }
        }
    }

    /// Writes what one `write` takes of `text`; how much that was (0 on an
    /// error: the writer meets it again and reports it).
    fn write(&self, text: &[u8]) -> usize {
        loop {
            match nix::unistd::write(&self.fd, text) {
                Ok(written) => return written,
                Err(nix::errno::Errno::EINTR) => {}
                Err(_) => return 0,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::Read;
    use std::time::Duration;

    use super::*;
    use crate::engine::fixtures::{t, tag};
    use crate::liveness::{KeyState, Liveness};

    /// Queues a key line per name (each its own key: nothing folds).
    fn push_lines(outbox: &PendingLines, names: &[&str]) {
        outbox.push(|queue| {
            for name in names {
                let to = super::super::queue::KeyTo::state(&KeyState::bare(Liveness::Free));
                queue.push_key(tag(name), Some(Liveness::Live), to, t(1));
            }
        });
    }

    /// The names of the keys of the NDJSON lines in `text`.
    fn names_in(text: &str) -> Vec<String> {
        text.lines()
            .map(|line| serde_json::from_str::<serde_json::Value>(line).expect("JSON"))
            .map(|value| value["name"].as_str().expect("a key line").to_string())
            .collect()
    }

    /// The names of the next `count` key lines read from `read` (blank
    /// lines skipped). The outbox keeps a copy of the write end: no end
    /// of file comes while it lives.
    fn read_names(read: &mut std::fs::File, count: usize) -> Vec<String> {
        let mut text = String::new();
        let mut chunk = [0u8; 4096];
        while text.lines().filter(|line| !line.is_empty()).count() < count || !text.ends_with('\n')
        {
            let got = read.read(&mut chunk).expect("read");
            assert!(got > 0, "the pipe ended after {text:?}");
            text.push_str(std::str::from_utf8(&chunk[..got]).expect("UTF-8"));
        }
        let lines: Vec<&str> = text.lines().filter(|line| !line.is_empty()).collect();
        names_in(&lines.join("\n"))
    }

    /// A pipe: its read end, and its write end as a file.
    fn pipe() -> (std::fs::File, std::fs::File) {
        let (read, write) = nix::unistd::pipe().expect("pipe");
        (std::fs::File::from(read), std::fs::File::from(write))
    }

    #[test]
    fn the_loop_writes_a_pipe_with_room_itself_in_order() {
        let (mut read, write) = pipe();
        let outbox = Arc::new(PendingLines::default());
        outbox.write_directly(DirectOut::of(&write).expect("a pipe is direct"), true);
        push_lines(&outbox, &["a", "b", "c"]);
        outbox.flush();
        // No writer thread runs: the lines are in the pipe already.
        let pending = outbox.lock();
        assert!(pending.queue.is_empty() && pending.carried.is_none());
        drop(pending);
        assert_eq!(read_names(&mut read, 3), ["a", "b", "c"]);
    }

    #[test]
    fn a_full_pipe_is_the_writers_and_lines_keep_their_order() {
        let (mut read, write) = pipe();
        // Filled so that no line fits: a write would block.
        let size = nix::fcntl::fcntl(&write, nix::fcntl::FcntlArg::F_GETPIPE_SZ).expect("size");
        let filler = vec![b'\n'; usize::try_from(size).expect("size")];
        (&write).write_all(&filler).expect("fill");
        let outbox = Arc::new(PendingLines::default());
        outbox.write_directly(DirectOut::of(&write).expect("a pipe is direct"), true);
        let written = spawn(outbox.clone(), true, write.try_clone().expect("dup")).expect("writer");
        drop(write);
        // The loop never blocks on the full pipe: both flushes return.
        let (done_tx, done) = std::sync::mpsc::channel();
        let pushing = outbox.clone();
        std::thread::spawn(move || {
            push_lines(&pushing, &["first", "second"]);
            pushing.flush();
            push_lines(&pushing, &["third"]);
            pushing.flush();
            pushing.close();
            done_tx.send(()).expect("send");
        });
        done.recv_timeout(Duration::from_secs(30))
            .expect("flush returned while stdout was full");
        assert_eq!(read_names(&mut read, 3), ["first", "second", "third"]);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime");
        runtime
            .block_on(written)
            .expect("writer ended")
            .expect("wrote");
    }

    #[test]
    fn a_socket_is_no_direct_way_out_and_dev_null_is() {
        let (socket, _) = std::os::unix::net::UnixStream::pair().expect("socketpair");
        assert!(DirectOut::of(&socket).is_none());
        let null = std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/null")
            .expect("null");
        assert!(DirectOut::of(&null).is_some());
    }
}
