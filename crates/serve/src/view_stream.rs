//! `/view`: the live view stream (`locktop_journal::live`'s format) — the
//! state at connection, then every change with full key states and
//! verdicts, and a heartbeat each second — what `--connect` follows.
//!
//! Invariants:
//! - a stream's first checkpoint and the changes after it never race: a
//!   stream is opened, and a resync taken, under the view's lock, and
//!   changes are published while the follower holds that lock for
//!   writing, so every change is either in the checkpoint or after it,
//!   never both nor neither;
//! - a client that stops reading never grows the server's memory past
//!   [`MAX_PENDING`] bytes of lines (plus one checkpoint of the keys that
//!   are not free): past that its lines are dropped, and when it reads
//!   again it gets a `resync` line and a fresh checkpoint instead;
//! - at most [`MAX_STREAMS`] streams at once on TCP and as many again on
//!   the unix socket (a further one gets 503): anyone on the host may
//!   reach loopback TCP, so filling its streams never locks the socket's
//!   group out.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock, Weak};
use std::time::SystemTime;

use tokio::sync::Notify;

use crate::engine::Delta;
use crate::journal::live::{Encoder, FreeCounts, HEARTBEAT_EVERY, Hello};
use crate::operate::held::Change;
use crate::view::LiveView;

/// The most `/view` streams served at once, on each of TCP and the unix
/// socket.
pub const MAX_STREAMS: usize = 64;

/// Where a stream's client came in: its places are counted apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Door {
    /// TCP (loopback or beyond).
    Tcp,
    /// The unix socket (`--socket`).
    Socket,
}

/// The most bytes of lines kept for one stream that does not read them.
pub const MAX_PENDING: usize = 1 << 20;

/// The open `/view` streams, and how their lines are written.
#[derive(Debug)]
pub struct ViewStreams {
    list: Mutex<Vec<(Door, Weak<Outbox>)>>,
    closing: AtomicBool,
    encoder: Encoder,
    hello: Hello,
}

/// One stream's lines not sent yet.
#[derive(Debug, Default)]
pub struct Outbox {
    pending: Mutex<Pending>,
    ready: Notify,
}

#[derive(Debug, Default)]
struct Pending {
    /// The hello and the first checkpoint: sent first, never dropped
    /// (a stream that fell behind before reading them still starts with
    /// its hello).
    head: Vec<u8>,
    bytes: Vec<u8>,
    /// Lines were dropped: a resync is due before anything else.
    behind: bool,
    closed: bool,
}

impl Outbox {
    fn push(&self, line: &[u8]) {
        let mut pending = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
        if pending.behind || pending.closed {
            return;
        }
        if pending.bytes.len() + line.len() > MAX_PENDING {
            // Dropped, and replaced by a fresh checkpoint when it reads.
            pending.bytes = Vec::new();
            pending.behind = true;
        } else {
            pending.bytes.extend_from_slice(line);
        }
        drop(pending);
        self.ready.notify_one();
    }
}

impl ViewStreams {
    /// No stream yet; lines for a service of `hello.state_dir`.
    pub fn new(hello: Hello) -> Self {
        Self {
            list: Mutex::default(),
            closing: AtomicBool::new(false),
            encoder: Encoder::new(&hello.state_dir),
            hello,
        }
    }

    /// A new stream for a client that came in by `door`, starting with
    /// the hello and a checkpoint of `view` (the caller holds the view's
    /// lock, so no change is published meanwhile), or `None` when
    /// [`MAX_STREAMS`] are open at that door or serving stops.
    pub fn open(&self, view: &LiveView, door: Door) -> Option<Arc<Outbox>> {
        if self.closing.load(Ordering::Acquire) {
            return None;
        }
        let mut list = self.list.lock().unwrap_or_else(PoisonError::into_inner);
        list.retain(|(_, outbox)| outbox.strong_count() > 0);
        if list.iter().filter(|(came, _)| *came == door).count() >= MAX_STREAMS {
            return None;
        }
        let mut bytes = Vec::new();
        self.encoder.hello(&mut bytes, &self.hello);
        self.checkpoint(&mut bytes, view);
        let outbox = Arc::new(Outbox {
            pending: Mutex::new(Pending {
                head: bytes,
                ..Pending::default()
            }),
            ready: Notify::new(),
        });
        list.push((door, Arc::downgrade(&outbox)));
        Some(outbox)
    }

    fn checkpoint(&self, out: &mut Vec<u8>, view: &LiveView) {
        // Every key is counted by its liveness; those free keys with more
        // to say than "free" (waiters) are listed instead.
        let mut free = FreeCounts::default();
        for ((kind, liveness), count) in view.counts() {
            if *liveness == crate::engine::Liveness::Free {
                let listed = view
                    .noteworthy()
                    .filter(|(key, state)| {
                        key.kind() == *kind && state.liveness == crate::engine::Liveness::Free
                    })
                    .count() as u64;
                free.add(*kind, count.saturating_sub(listed));
            }
        }
        self.encoder.checkpoint(
            out,
            SystemTime::now(),
            view.watcher(),
            view.noteworthy(),
            &free,
        );
    }

    /// Sends every stream a delta's line and the verdict changes it
    /// caused (the caller holds the view's lock for writing).
    pub fn publish(&self, delta: &Delta, changes: &[Change]) {
        let now = SystemTime::now();
        let mut line = Vec::new();
        self.encoder.change(&mut line, delta, now);
        self.verdict_lines(&mut line, changes, delta.changed_at().unwrap_or(now));
        self.send(&line);
    }

    /// Sends every stream verdict changes found at `at` without a delta
    /// of their own.
    pub fn publish_verdicts(&self, changes: &[Change], at: SystemTime) {
        if changes.is_empty() {
            return;
        }
        let mut lines = Vec::new();
        self.verdict_lines(&mut lines, changes, at);
        self.send(&lines);
    }

    fn verdict_lines(&self, out: &mut Vec<u8>, changes: &[Change], at: SystemTime) {
        for change in changes {
            self.encoder
                .verdict(out, &change.key, change.from, change.to.as_ref(), at);
        }
    }

    fn send(&self, lines: &[u8]) {
        if lines.is_empty() {
            return;
        }
        let list = self.list.lock().unwrap_or_else(PoisonError::into_inner);
        for outbox in list.iter().filter_map(|(_, outbox)| outbox.upgrade()) {
            outbox.push(lines);
        }
    }

    /// Ends every stream once its pending lines are sent (and refuses
    /// new ones).
    pub fn close_all(&self) {
        self.closing.store(true, Ordering::Release);
        let list = self.list.lock().unwrap_or_else(PoisonError::into_inner);
        for outbox in list.iter().filter_map(|(_, outbox)| outbox.upgrade()) {
            outbox
                .pending
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .closed = true;
            outbox.ready.notify_one();
        }
    }

    /// The next bytes for `outbox`: its pending lines, a resync with a
    /// fresh checkpoint of `view` when it fell behind, or a heartbeat
    /// when a heartbeat's time passed with nothing to send. `None` once
    /// it is closed and drained.
    async fn next(&self, outbox: &Outbox, view: &RwLock<LiveView>) -> Option<Vec<u8>> {
        loop {
            {
                let mut pending = outbox
                    .pending
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner);
                if !pending.head.is_empty() {
                    return Some(std::mem::take(&mut pending.head));
                }
            }
            let woken = tokio::time::timeout(HEARTBEAT_EVERY, outbox.ready.notified()).await;
            {
                let pending = outbox
                    .pending
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner);
                if pending.behind && !pending.closed {
                    drop(pending);
                    // The view's lock first, as the follower takes it:
                    // nothing is published while the checkpoint is taken,
                    // and everything dropped before is in it.
                    let view = view.read().unwrap_or_else(PoisonError::into_inner);
                    let mut pending = outbox
                        .pending
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner);
                    let mut bytes = Vec::new();
                    self.encoder.resync(
                        &mut bytes,
                        SystemTime::now(),
                        "this client fell behind: the changes it missed were dropped",
                    );
                    self.checkpoint(&mut bytes, &view);
                    pending.behind = false;
                    pending.bytes = Vec::new();
                    return Some(bytes);
                }
            }
            let mut pending = outbox
                .pending
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            if !pending.bytes.is_empty() {
                return Some(std::mem::take(&mut pending.bytes));
            }
            if pending.closed {
                return None;
            }
            if woken.is_err() {
                let mut bytes = Vec::new();
                self.encoder.heartbeat(&mut bytes, SystemTime::now());
                return Some(bytes);
            }
        }
    }
}

/// The body of one stream: its lines until it is closed.
pub fn body(
    streams: Arc<ViewStreams>,
    outbox: Arc<Outbox>,
    view: Arc<RwLock<LiveView>>,
) -> axum::body::Body {
    let chunks = futures::stream::unfold(
        (streams, outbox, view),
        |(streams, outbox, view)| async move {
            let bytes = streams.next(&outbox, &view).await?;
            Some((
                Ok::<_, std::convert::Infallible>(bytes),
                (streams, outbox, view),
            ))
        },
    );
    axum::body::Body::from_stream(chunks)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A stream nobody reads keeps at most [`MAX_PENDING`] bytes: past
    /// that its lines are dropped and it is marked behind (a resync is
    /// due), and nothing more is kept until it reads.
    #[test]
    fn an_unread_stream_keeps_at_most_its_bound_then_waits_for_a_resync() {
        let outbox = Outbox::default();
        let line = vec![b'x'; 1000];
        for _ in 0..(MAX_PENDING / line.len()) {
            outbox.push(&line);
        }
        assert!(!outbox.pending.lock().unwrap().behind);
        for _ in 0..10_000 {
            outbox.push(&line);
            let pending = outbox.pending.lock().unwrap();
            assert!(pending.bytes.len() <= MAX_PENDING);
        }
        let pending = outbox.pending.lock().unwrap();
        assert!(pending.behind);
        assert!(
            pending.bytes.is_empty(),
            "{} bytes kept",
            pending.bytes.len()
        );
    }

    /// A service's hello, for tests of the stream and of the server.
    pub(crate) fn hello() -> crate::journal::live::Hello {
        crate::journal::live::Hello {
            format: crate::journal::live::FORMAT.into(),
            version: crate::journal::live::VERSION,
            host: "h".into(),
            state_dir: "/s".into(),
            locktop: "test".into(),
            source: "kernel".into(),
            refusals_counted: true,
            probe: crate::liveness::probe::ProbeMode::LockFree,
            materializing_after: 10.0,
            heartbeat_every: 1.0,
        }
    }

    /// A stream that falls behind before its first read still starts with
    /// its hello and first checkpoint, at once (not at the heartbeat),
    /// then a resync and a fresh checkpoint.
    #[tokio::test(start_paused = true)]
    async fn a_stream_behind_before_its_first_read_starts_with_its_hello_at_once() {
        let streams = ViewStreams::new(hello());
        let view = RwLock::new(LiveView::new(std::time::Duration::from_secs(10)));
        let outbox = streams
            .open(&view.read().unwrap(), Door::Socket)
            .expect("opened");
        let line = vec![b'x'; 1000];
        for _ in 0..(2 * MAX_PENDING / line.len()) {
            outbox.push(&line);
        }
        let started = tokio::time::Instant::now();
        let first = streams.next(&outbox, &view).await.expect("bytes");
        assert_eq!(
            started.elapsed(),
            std::time::Duration::ZERO,
            "waited for the hello"
        );
        assert!(
            first.starts_with(b"{\"view\":"),
            "{}",
            String::from_utf8_lossy(&first)
        );
        assert!(first.windows(14).any(|w| w == b"{\"checkpoint\":"));
        let second = streams.next(&outbox, &view).await.expect("bytes");
        assert!(
            second.starts_with(b"{\"resync\":"),
            "{}",
            String::from_utf8_lossy(&second)
        );
        assert!(second.windows(14).any(|w| w == b"{\"checkpoint\":"));
    }

    /// A stream with nothing to say says it is there once a heartbeat's
    /// time passed, and not before: a client times the service's silence
    /// from its last word.
    #[tokio::test(start_paused = true)]
    async fn a_quiet_stream_sends_a_heartbeat_each_heartbeat_time() {
        let streams = ViewStreams::new(hello());
        let view = RwLock::new(LiveView::new(std::time::Duration::from_secs(10)));
        let outbox = streams
            .open(&view.read().unwrap(), Door::Socket)
            .expect("opened");
        let first = streams.next(&outbox, &view).await.expect("bytes");
        assert!(first.starts_with(b"{\"view\":"));
        for _ in 0..3 {
            let asked = tokio::time::Instant::now();
            let said = streams.next(&outbox, &view).await.expect("bytes");
            assert_eq!(asked.elapsed(), HEARTBEAT_EVERY);
            assert!(
                said.starts_with(b"{\"heartbeat\":"),
                "{}",
                String::from_utf8_lossy(&said)
            );
        }
        // A line pushed meanwhile goes at once, heartbeat or not.
        outbox.push(b"{\"x\":1}\n");
        let asked = tokio::time::Instant::now();
        let said = streams.next(&outbox, &view).await.expect("bytes");
        assert_eq!(asked.elapsed(), std::time::Duration::ZERO);
        assert_eq!(said, b"{\"x\":1}\n");
    }

    /// TCP's streams full (anyone on the host may reach loopback): the
    /// socket's group still gets one.
    #[test]
    fn full_tcp_streams_leave_the_sockets_places_free() {
        let streams = ViewStreams::new(hello());
        let view = LiveView::new(std::time::Duration::from_secs(10));
        let taken: Vec<_> = (0..MAX_STREAMS)
            .map(|_| streams.open(&view, Door::Tcp).expect("a TCP place"))
            .collect();
        assert!(streams.open(&view, Door::Tcp).is_none());
        assert!(streams.open(&view, Door::Socket).is_some());
        drop(taken);
        assert!(streams.open(&view, Door::Tcp).is_some());
    }
}
