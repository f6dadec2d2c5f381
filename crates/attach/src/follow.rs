//! The reader of a service's `/view` stream: its lines turned back into
//! the engine's deltas ([`Mirror`]) for the front end, its silences and
//! losses told as [`WatcherHealth::Reconnecting`], and reconnection.
//!
//! Invariants: the front end's view after a checkpoint's deltas is the
//! service's (keys it had that the service no longer lists are told
//! free); while the link is lost, the front end's watcher says
//! `Reconnecting` (its view is not complete: a snapshot or a header never
//! reads as live); on reconnection a fresh checkpoint replaces the view
//! whole; a holder whose PID the front end marked its own
//! (`AddOwnPid`: its test holders) is shown `own`, as its own engine
//! would; no line longer than [`MAX_LINE`] is kept (the link is dropped
//! and made again).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use anyhow::{anyhow, bail};
use http_body_util::BodyExt as _;
use hyper::body::Incoming;
use tokio::sync::mpsc;

use crate::client_config::ClientConfig;
use crate::engine::{
    DELTA_QUEUE, Delta, EngineCommand, EngineHandle, EngineStats, KeyState, Liveness, WatcherHealth,
};
use crate::journal::live::{Hello, Mirror, Reader, Said};
use crate::link::{Link, SILENT_AFTER};
use crate::target::Target;
use locktop_core::disk::LockKey;

/// The longest line kept from a service (a checkpoint key with a
/// thousand holders is far shorter).
pub const MAX_LINE: usize = 16 << 20;

/// The first wait before reconnecting, doubled up to [`RETRY_MAX`].
const RETRY_FIRST: Duration = Duration::from_millis(200);
/// The longest wait between two tries.
const RETRY_MAX: Duration = Duration::from_millis(500);

/// A front end's attachment: the deltas to follow, and the link.
pub struct Attached {
    /// Deltas as an engine sends them (commands: only `AddOwnPid` and
    /// `RemoveOwnPid` mean anything here; the others are the service's).
    pub handle: EngineHandle,
    /// What it is attached to, and how live.
    pub link: Arc<Link>,
}

/// Attaches to `target`: the first connection must be made (its failure
/// is the error, in one line); later losses are reconnected.
pub async fn attach(target: Target, config: ClientConfig) -> anyhow::Result<Attached> {
    let opened = open(&target, &config).await?;
    let link = Arc::new(Link::new(target.clone(), opened.hello.clone()));
    // Its PIDs are this host's only over a unix socket: a remote holder
    // with this process's PID number is no holder of ours.
    let own = if target.is_local() {
        // This process holds its in-process test holders' locks itself.
        HashSet::from([std::process::id()])
    } else {
        HashSet::new()
    };
    let (deltas, receiver) = mpsc::channel(DELTA_QUEUE);
    let (commands, orders) = mpsc::unbounded_channel();
    let follower = Following {
        target,
        config,
        link: link.clone(),
        deltas,
        orders,
        mirror: Mirror::new(),
        own,
        states: HashMap::new(),
    };
    tokio::spawn(follower.run(opened));
    Ok(Attached {
        handle: EngineHandle {
            deltas: receiver,
            commands,
            stats: Arc::new(EngineStats::default()),
        },
        link,
    })
}

/// GETs `path` from `target` whole (`snapshot` attached), at most
/// `limit` bytes; a service silent for [`SILENT_AFTER`] in the middle of
/// its answer is an error, not a wait for good.
pub async fn fetch(
    target: &Target,
    config: &ClientConfig,
    path: &str,
    limit: usize,
) -> anyhow::Result<Vec<u8>> {
    let mut body = crate::transport::get(target, config, path)
        .await?
        .into_body();
    let mut bytes = Vec::new();
    loop {
        let frame = tokio::time::timeout(SILENT_AFTER, body.frame())
            .await
            .map_err(|_| {
                anyhow!(
                    "{target} stopped answering for {} s",
                    SILENT_AFTER.as_secs()
                )
            })?;
        let Some(frame) = frame else {
            return Ok(bytes);
        };
        let frame = frame.map_err(|error| anyhow!("{target}: {error}"))?;
        if let Ok(data) = frame.into_data() {
            if bytes.len() + data.len() > limit {
                bail!("{target}: its answer is over {limit} bytes");
            }
            bytes.extend_from_slice(&data);
        }
    }
}

/// A `/view` stream just opened, its hello read.
struct Opened {
    hello: Hello,
    lines: Lines,
    reader: Reader,
}

async fn open(target: &Target, config: &ClientConfig) -> anyhow::Result<Opened> {
    let answer = crate::transport::get(target, config, "/view").await?;
    let mut lines = Lines::new(answer.into_body());
    let mut reader = Reader::new();
    let first = tokio::time::timeout(SILENT_AFTER, lines.next())
        .await
        .map_err(|_| anyhow!("{target} said nothing for {} s", SILENT_AFTER.as_secs()))??
        .ok_or_else(|| anyhow!("{target} ended the stream at once"))?;
    match reader
        .line(&first)
        .map_err(|error| anyhow!("{target}: {error}"))?
    {
        Said::Hello(hello) => Ok(Opened {
            hello: *hello,
            lines,
            reader,
        }),
        _ => bail!("{target}: the stream did not start with its hello"),
    }
}

/// The lines of a body.
struct Lines {
    body: Incoming,
    buffer: Vec<u8>,
    start: usize,
}

impl Lines {
    fn new(body: Incoming) -> Self {
        Self {
            body,
            buffer: Vec::new(),
            start: 0,
        }
    }

    /// The next line (without its newline), `None` at the body's end.
    async fn next(&mut self) -> anyhow::Result<Option<Vec<u8>>> {
        loop {
            if let Some(end) = self.buffer[self.start..].iter().position(|b| *b == b'\n') {
                let line = self.buffer[self.start..self.start + end].to_vec();
                self.start += end + 1;
                if self.start == self.buffer.len() {
                    self.buffer.clear();
                    self.start = 0;
                }
                return Ok(Some(line));
            }
            if self.buffer.len() - self.start > MAX_LINE {
                bail!("a line longer than {} MiB", MAX_LINE >> 20);
            }
            let Some(frame) = self.body.frame().await else {
                return Ok(None);
            };
            let frame = frame.map_err(|error| anyhow!("the connection broke: {error}"))?;
            if let Ok(data) = frame.into_data() {
                if self.start > 0 {
                    self.buffer.drain(..self.start);
                    self.start = 0;
                }
                self.buffer.extend_from_slice(&data);
            }
        }
    }
}

/// The reader's task.
struct Following {
    target: Target,
    config: ClientConfig,
    link: Arc<Link>,
    deltas: mpsc::Sender<Delta>,
    orders: mpsc::UnboundedReceiver<EngineCommand>,
    mirror: Mirror,
    /// PIDs the front end marked its own.
    own: HashSet<u32>,
    /// What the front end was told of keys that are not simply free.
    states: HashMap<LockKey, KeyState>,
}

/// Why following a stream stopped.
enum Stopped {
    /// The front end is gone: the task ends.
    Gone,
    /// The link was lost, for this reason.
    Lost(String),
}

impl Following {
    async fn run(mut self, first: Opened) {
        let mut opened = Some(first);
        let mut wait = RETRY_FIRST;
        loop {
            if let Some(stream) = opened.take() {
                match self.follow(stream).await {
                    Stopped::Gone => return,
                    Stopped::Lost(why) => {
                        self.link.lost(why.clone());
                        if !self.tell_lost(&why).await {
                            return;
                        }
                        wait = RETRY_FIRST;
                    }
                }
            }
            let slept = tokio::time::sleep(wait);
            tokio::pin!(slept);
            loop {
                tokio::select! {
                    () = &mut slept => break,
                    order = self.orders.recv() => match order {
                        Some(order) => {
                            if !self.obey(order).await {
                                return;
                            }
                        }
                        None => return,
                    },
                }
            }
            if self.deltas.is_closed() {
                return;
            }
            match open(&self.target, &self.config).await {
                Ok(stream) => match self.changed(&stream.hello) {
                    None => {
                        self.link.back(stream.hello.clone());
                        opened = Some(stream);
                    }
                    Some(why) => {
                        self.link.lost(why.clone());
                        if !self.tell_lost(&why).await {
                            return;
                        }
                        wait = RETRY_MAX;
                    }
                },
                Err(error) => {
                    let why = error.to_string();
                    self.link.lost(why.clone());
                    if !self.tell_lost(&why).await {
                        return;
                    }
                    wait = (wait * 2).min(RETRY_MAX);
                }
            }
        }
    }

    /// Why a service that answered again is not the one followed: it
    /// watches another state dir, or runs on another host.
    fn changed(&self, hello: &Hello) -> Option<String> {
        let followed = self.link.hello();
        if hello.state_dir != followed.state_dir {
            Some(format!(
                "the service now watches {}, not {} (start this view again to follow it)",
                hello.state_dir.display(),
                followed.state_dir.display()
            ))
        } else if hello.host != followed.host {
            Some(format!(
                "the service now runs on host {}, not {}",
                hello.host, followed.host
            ))
        } else {
            None
        }
    }

    /// Tells the front end its view is not live; false when it is gone.
    async fn tell_lost(&mut self, why: &str) -> bool {
        let health = WatcherHealth::Reconnecting {
            reason: format!("{}: {why}", self.target),
        };
        self.deltas.send(Delta::Health(health)).await.is_ok()
    }

    /// Follows one stream until it ends, breaks, falls silent, or the
    /// front end goes.
    async fn follow(&mut self, mut stream: Opened) -> Stopped {
        // Silent from the last line heard, whatever the front end orders
        // meanwhile (an order does not restart the clock).
        let mut silent_at = tokio::time::Instant::now() + SILENT_AFTER;
        loop {
            let line = tokio::select! {
                line = tokio::time::timeout_at(silent_at, stream.lines.next()) => line,
                order = self.orders.recv() => {
                    let alive = match order {
                        Some(order) => self.obey(order).await,
                        None => false,
                    };
                    if !alive {
                        return Stopped::Gone;
                    }
                    continue;
                }
            };
            let line = match line {
                Err(_) => {
                    return Stopped::Lost(format!("no word for {} s", SILENT_AFTER.as_secs()));
                }
                Ok(Err(error)) => return Stopped::Lost(error.to_string()),
                Ok(Ok(None)) => return Stopped::Lost("the service ended the stream".into()),
                Ok(Ok(Some(line))) => line,
            };
            silent_at = tokio::time::Instant::now() + SILENT_AFTER;
            self.link.heard();
            let said = match stream.reader.line(&line) {
                Ok(said) => said,
                Err(error) => return Stopped::Lost(error.to_string()),
            };
            let deltas = match said {
                Said::Checkpoint(checkpoint) => {
                    if self.mirror.synced() && checkpoint.syncs == 0 {
                        // A service started again, its first scan not
                        // done: its checkpoint lacks keys still held.
                        // Not followed (the view stays "reconnecting")
                        // until it has scanned.
                        return Stopped::Lost("the service's first scan is not finished".into());
                    }
                    self.link.counted(checkpoint.free.clone());
                    self.mirror.checkpoint(*checkpoint)
                }
                Said::Change(delta) => vec![self.mirror.change(delta)],
                Said::Resync { .. } => {
                    self.link.resynced();
                    // Said before the fresh checkpoint, whose health
                    // (the service's) ends it: what is shown until then
                    // missed changes.
                    let reason = format!(
                        "fell behind {}'s stream: changes were missed, a fresh state follows",
                        self.target
                    );
                    vec![Delta::Health(WatcherHealth::Rescanning { reason })]
                }
                Said::Hello(_) | Said::Verdict | Said::Heartbeat(_) | Said::Partial => Vec::new(),
            };
            for delta in deltas {
                let delta = self.as_own(delta);
                if self.deltas.send(delta).await.is_err() {
                    return Stopped::Gone;
                }
            }
        }
    }

    /// Marks the front end's own holders `own` in `delta`, and keeps what
    /// it tells.
    fn as_own(&mut self, mut delta: Delta) -> Delta {
        match &mut delta {
            Delta::Key { key, state, .. } => {
                if state.liveness == Liveness::Live
                    && state
                        .holders
                        .iter()
                        .any(|holder| self.own.contains(&holder.pid))
                {
                    state.liveness = Liveness::Own;
                }
                if state.is_bare_free() {
                    self.states.remove(key);
                } else {
                    self.states.insert(key.clone(), state.clone());
                }
            }
            Delta::Removed { key, .. } => {
                self.states.remove(key);
            }
            Delta::Health(_) | Delta::Problems(_) | Delta::Synced { .. } => {}
        }
        delta
    }

    /// Carries out a front end's order; false when it is gone.
    async fn obey(&mut self, order: EngineCommand) -> bool {
        let (pid, own) = match order {
            EngineCommand::AddOwnPid(pid) => (pid, true),
            EngineCommand::RemoveOwnPid(pid) => (pid, false),
            // The service probes, rescans and answers snapshots itself.
            EngineCommand::Reprobe(_) | EngineCommand::Rescan | EngineCommand::Everything(_) => {
                return true;
            }
        };
        if own {
            self.own.insert(pid);
        } else {
            self.own.remove(&pid);
        }
        let at = SystemTime::now();
        let changed: Vec<Delta> = self
            .states
            .iter()
            .filter(|(_, state)| state.holders.iter().any(|holder| holder.pid == pid))
            .filter_map(|(key, state)| {
                let liveness = match (state.liveness, own) {
                    (Liveness::Live, true) => Liveness::Own,
                    (Liveness::Own, false) => Liveness::Live,
                    _ => return None,
                };
                let mut state = state.clone();
                let previous = state.liveness;
                state.liveness = liveness;
                Some(Delta::Key {
                    key: key.clone(),
                    state,
                    previous: Some(previous),
                    at,
                })
            })
            .collect();
        for delta in changed {
            let delta = self.as_own(delta);
            if self.deltas.send(delta).await.is_err() {
                return false;
            }
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use locktop_core::engine::fixtures::{self, STATE};
    use locktop_core::engine::fold::WatcherView;
    use locktop_core::liveness::probe::ProbeMode;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;
    use crate::journal::live::{Encoder, FORMAT, FreeCounts, VERSION};

    fn hello() -> Hello {
        Hello {
            format: FORMAT.into(),
            version: VERSION,
            host: "h".into(),
            state_dir: STATE.into(),
            locktop: "test".into(),
            source: "kernel".into(),
            refusals_counted: true,
            probe: ProbeMode::LockFree,
            materializing_after: 10.0,
            heartbeat_every: 1.0,
        }
    }

    /// A service's stream that falls behind: its hello, a checkpoint with
    /// a tag held, a resync, a fresh checkpoint in which the tag is free.
    fn behind_stream() -> Vec<u8> {
        let encoder = Encoder::new(Path::new(STATE));
        let watching = WatcherView {
            health: WatcherHealth::Watching,
            syncs: 1,
            ..WatcherView::default()
        };
        let key = fixtures::tag("t");
        let state = fixtures::held(Liveness::Live, 7, "agent", fixtures::t(1));
        let mut out = b"HTTP/1.1 200 OK\r\ncontent-type: application/x-ndjson\r\n\r\n".to_vec();
        encoder.hello(&mut out, &hello());
        let now = SystemTime::now();
        let free = FreeCounts::default();
        encoder.checkpoint(
            &mut out,
            now,
            &watching,
            [(&key, &state)].into_iter(),
            &free,
        );
        encoder.resync(&mut out, now, "behind");
        encoder.checkpoint(&mut out, now, &watching, std::iter::empty(), &free);
        out
    }

    /// A client the service resyncs says so — its view missed changes —
    /// before the fresh state, whose health ends it; the fresh state's
    /// changes follow (the key released meanwhile is told free).
    #[tokio::test]
    async fn a_resync_is_said_before_the_fresh_state() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("s.sock");
        let listener = tokio::net::UnixListener::bind(&path).expect("bind");
        let service = tokio::spawn(async move {
            let (mut socket, _) = listener.accept().await.expect("accept");
            let mut request = Vec::new();
            let mut byte = [0u8; 1];
            while !request.ends_with(b"\r\n\r\n") {
                socket.read_exact(&mut byte).await.expect("request");
                request.push(byte[0]);
            }
            socket.write_all(&behind_stream()).await.expect("stream");
            // Open, silent: the client reads what was sent.
            tokio::time::sleep(Duration::from_secs(60)).await;
        });
        let mut attached = attach(Target::Unix(path), ClientConfig::default())
            .await
            .expect("attached");
        let mut said = Vec::new();
        while said.len() < 9 {
            let delta =
                tokio::time::timeout(Duration::from_secs(10), attached.handle.deltas.recv())
                    .await
                    .expect("a delta in time")
                    .expect("a delta");
            said.push(match delta {
                Delta::Key { state, .. } => format!("key {}", state.liveness.as_str()),
                Delta::Health(health) => format!("health {}", health.describe()),
                Delta::Problems(_) => "problems".into(),
                Delta::Synced { .. } => "synced".into(),
                Delta::Removed { .. } => "removed".into(),
            });
        }
        let rescanning = said
            .iter()
            .position(|line| line.starts_with("health rescanning: fell behind"))
            .unwrap_or_else(|| panic!("no resync said: {said:?}"));
        assert_eq!(
            said[..rescanning],
            ["key live", "problems", "health watching", "synced"],
            "{said:?}"
        );
        assert_eq!(
            said[rescanning + 1..],
            ["key free", "problems", "health watching", "synced"],
            "{said:?}"
        );
        assert_eq!(attached.link.resyncs(), 1);
        service.abort();
    }
}
