//! The output side of `locktop watch`: a [`PendingLines`] (the coalescing
//! [`Queue`] behind a mutex) and a thread that takes its lines and writes
//! them to stdout.
//!
//! Invariant: only the writer thread ever blocks on stdout. The loop that
//! drains the engine holds the mutex only to fold a change in, and the
//! writer never holds it while writing, so a reader that stops reading
//! stalls the writer alone. The writer takes at most [`WRITE_BATCH`]
//! lines at a time, so what it holds outside the queue is bounded too.

use std::io::Write;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};

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
}

#[derive(Debug, Default)]
struct Pending {
    queue: Queue,
    closed: bool,
}

impl PendingLines {
    fn lock(&self) -> MutexGuard<'_, Pending> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Folds a change into the queue (never blocks on stdout).
    pub fn push(&self, add: impl FnOnce(&mut Queue)) {
        add(&mut self.lock().queue);
        self.ready.notify_one();
        self.ready_async.notify_one();
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

    /// Waits for lines and takes up to [`WRITE_BATCH`] of them; `None`
    /// once closed and empty.
    fn take(&self) -> Option<Vec<Line>> {
        let mut pending = self.lock();
        while pending.queue.is_empty() && !pending.closed {
            pending = self
                .ready
                .wait(pending)
                .unwrap_or_else(PoisonError::into_inner);
        }
        take_batch(&mut pending)
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
    while let Some(batch) = outbox.take() {
        text.clear();
        for line in batch.iter().filter_map(|line| format::line(line, json)) {
            text.push_str(&line);
            text.push('\n');
        }
        out.write_all(text.as_bytes())?;
        out.flush()?;
    }
    Ok(())
}
