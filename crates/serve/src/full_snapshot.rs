//! `/snapshot.json?all=true`: every key, free ones too, streamed. `serve`
//! keeps only the noteworthy keys ([`super::view`]); the whole list is
//! the engine's, asked for at the moment of the request
//! ([`EngineCommand::Everything`]), sorted off the async threads and
//! written to the client as it is serialized.
//!
//! Invariants: one full snapshot is built at a time (a second request
//! meanwhile gets 503 and `Retry-After`: each costs a pointer per key);
//! memory beyond the key list is a few chunks in flight; a client that
//! stops reading for [`SEND_TIMEOUT`], or is still reading after
//! [`BODY_DEADLINE`], has its body ended early (truncated JSON, never a
//! stuck thread).

use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use tokio::sync::{Semaphore, mpsc, oneshot};

use crate::engine::{EngineCommand, Everything};

/// How long the engine may take to hand its keys over.
const ENGINE_ANSWER: Duration = Duration::from_secs(10);
/// How long one chunk may wait for the client to read the last ones.
pub const SEND_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a whole body may take: a client that reads a chunk now and
/// then must not keep the one full snapshot for hours.
pub const BODY_DEADLINE: Duration = Duration::from_secs(300);
/// Bytes per chunk of the body.
const CHUNK: usize = 64 * 1024;
/// Chunks in flight between the writer and the client.
const CHUNKS_IN_FLIGHT: usize = 4;

/// What a full snapshot needs from `serve`.
pub struct FullSnapshots {
    /// Requests to the engine.
    pub commands: mpsc::UnboundedSender<EngineCommand>,
    /// One full snapshot at a time.
    pub one_at_a_time: Arc<Semaphore>,
}

impl FullSnapshots {
    /// A full snapshot source on the engine behind `commands`.
    pub fn new(commands: mpsc::UnboundedSender<EngineCommand>) -> Self {
        Self {
            commands,
            one_at_a_time: Arc::new(Semaphore::new(1)),
        }
    }

    /// The response: the `snapshot --all --json` document of the engine's
    /// keys now, written by `write` (given the sorted keys and problems).
    pub async fn respond(
        &self,
        write: impl FnOnce(&mut dyn Write, &Everything) -> std::io::Result<()> + Send + 'static,
    ) -> Response {
        let Ok(permit) = self.one_at_a_time.clone().try_acquire_owned() else {
            return busy("another full snapshot is being sent; one at a time");
        };
        let (answer, answered) = oneshot::channel();
        if self
            .commands
            .send(EngineCommand::Everything(answer))
            .is_err()
        {
            return busy("the engine has stopped");
        }
        let Ok(Ok(mut everything)) = tokio::time::timeout(ENGINE_ANSWER, answered).await else {
            return busy("the engine did not answer in time");
        };
        let (chunks, body) = mpsc::channel::<std::io::Result<Bytes>>(CHUNKS_IN_FLIGHT);
        let runtime = tokio::runtime::Handle::current();
        tokio::task::spawn_blocking(move || {
            let _permit = permit;
            everything.keys.sort();
            let mut out = ChunkWriter {
                buffer: Vec::with_capacity(CHUNK),
                chunks,
                runtime,
                deadline: std::time::Instant::now() + BODY_DEADLINE,
            };
            // A failed write is a client gone or stalled: its body ends.
            let _ = write(&mut out, &everything).and_then(|()| out.flush());
        });
        let stream = futures::stream::unfold(body, |mut body| async move {
            body.recv().await.map(|chunk| (chunk, body))
        });
        (
            [(header::CONTENT_TYPE, "application/json")],
            Body::from_stream(stream),
        )
            .into_response()
    }
}

/// 503 with a retry hint and the reason.
fn busy(why: &str) -> Response {
    (
        StatusCode::SERVICE_UNAVAILABLE,
        [(header::RETRY_AFTER, "1")],
        format!("not now: {why}\n"),
    )
        .into_response()
}

/// Hands what is written to the body a chunk at a time, waiting at most
/// [`SEND_TIMEOUT`] for the client to take each.
struct ChunkWriter {
    buffer: Vec<u8>,
    chunks: mpsc::Sender<std::io::Result<Bytes>>,
    runtime: tokio::runtime::Handle,
    /// When the whole body must be sent by.
    deadline: std::time::Instant,
}

impl ChunkWriter {
    fn send(&mut self) -> std::io::Result<()> {
        if self.buffer.is_empty() {
            return Ok(());
        }
        let chunk = Bytes::from(std::mem::replace(
            &mut self.buffer,
            Vec::with_capacity(CHUNK),
        ));
        let left = self
            .deadline
            .saturating_duration_since(std::time::Instant::now());
        let sent = self.runtime.block_on(tokio::time::timeout(
            SEND_TIMEOUT.min(left),
            self.chunks.send(Ok(chunk)),
        ));
        match sent {
            Ok(Ok(())) => Ok(()),
            Ok(Err(_)) => Err(std::io::ErrorKind::BrokenPipe.into()),
            Err(_) => Err(std::io::ErrorKind::TimedOut.into()),
        }
    }
}

impl Write for ChunkWriter {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.buffer.extend_from_slice(bytes);
        if self.buffer.len() >= CHUNK {
            self.send()?;
        }
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.send()
    }
}
