//! `/events`: the `watch --json` stream over HTTP, one NDJSON line per
//! change, for `curl` and log shippers.
//!
//! Invariants: each subscriber has its own coalescing queue (the one
//! `watch` uses: at most two pending lines per key, see
//! `crate::stream::queue`), so a subscriber that stops reading costs a
//! bounded amount of memory and never slows the engine or the others; at
//! most [`MAX_SUBSCRIBERS`] streams at once (a further one is refused
//! with 503); a stream starts with the changes after it connected (as
//! `watch` without `--initial`).

use std::sync::{Arc, Mutex, PoisonError, Weak};

use crate::engine::Delta;
use crate::operate::held::Change;
use crate::stream::writer::PendingLines;
use crate::stream::{format, push_delta, push_verdicts};

/// The most `/events` streams served at once.
pub const MAX_SUBSCRIBERS: usize = 64;

/// The open `/events` streams. The verdict changes they tell come from
/// the live view's one held view (kept from the first delta, so a stream
/// that joins late still gets verdict changes, as `watch` prints them).
#[derive(Debug, Default)]
pub struct Subscribers {
    list: Mutex<Vec<Weak<PendingLines>>>,
    closing: std::sync::atomic::AtomicBool,
}

impl Subscribers {
    /// A new stream's queue, or `None` when [`MAX_SUBSCRIBERS`] are open.
    pub fn subscribe(&self) -> Option<Arc<PendingLines>> {
        if self.is_closing() {
            return None;
        }
        let mut list = self.list.lock().unwrap_or_else(PoisonError::into_inner);
        list.retain(|outbox| outbox.strong_count() > 0);
        if list.len() >= MAX_SUBSCRIBERS {
            return None;
        }
        let outbox = Arc::new(PendingLines::default());
        list.push(Arc::downgrade(&outbox));
        Some(outbox)
    }

    /// True once shutdown has begun.
    fn is_closing(&self) -> bool {
        self.closing.load(std::sync::atomic::Ordering::Acquire)
    }

    /// Folds a delta, whether its line `repeat`s the last one and the
    /// verdict `changes` it caused ([`crate::stream::follow::Followed`]),
    /// into every open stream's queue.
    pub fn publish(&self, delta: &Delta, repeat: bool, changes: &[Change]) {
        let list = self.list.lock().unwrap_or_else(PoisonError::into_inner);
        for outbox in list.iter().filter_map(Weak::upgrade) {
            // Streams start after the initial scan: every change counts.
            let mut synced = true;
            push_delta(
                &outbox,
                delta.clone(),
                true,
                &mut synced,
                (repeat, changes.to_vec()),
            );
        }
    }

    /// Sends every stream verdict `changes` found at `now` without a
    /// delta of their own (a burst settled, the clock moved).
    pub fn publish_verdicts(&self, changes: &[Change], now: std::time::SystemTime) {
        if changes.is_empty() {
            return;
        }
        let list = self.list.lock().unwrap_or_else(PoisonError::into_inner);
        for outbox in list.iter().filter_map(Weak::upgrade) {
            push_verdicts(&outbox, changes.to_vec(), true, now);
        }
    }

    /// Ends every stream once its pending lines are sent (and refuses
    /// new ones).
    pub fn close_all(&self) {
        self.closing
            .store(true, std::sync::atomic::Ordering::Release);
        let list = self.list.lock().unwrap_or_else(PoisonError::into_inner);
        for outbox in list.iter().filter_map(Weak::upgrade) {
            outbox.close();
        }
    }
}

/// The body of one stream: NDJSON chunks until the queue is closed.
pub fn body(outbox: Arc<PendingLines>) -> axum::body::Body {
    let chunks = futures::stream::unfold(outbox, |outbox| async move {
        let batch = outbox.take_async().await?;
        let mut text = String::new();
        for line in batch.iter().filter_map(|line| format::line(line, true)) {
            text.push_str(&line);
            text.push('\n');
        }
        Some((Ok::<_, std::convert::Infallible>(text), outbox))
    });
    axum::body::Body::from_stream(chunks)
}
