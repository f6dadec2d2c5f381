//! `locktop serve`: the live engine, headless, over HTTP — `/metrics` for
//! Prometheus, `/snapshot.json`, `/events` (the `watch --json` stream) and
//! `/healthz`. One per host: flock locks are host-local, and the
//! monitoring system operators already run does the aggregation.
//!
//! Invariants: no endpoint takes, releases or signals anything, nor
//! probes: every answer is read from the view the engine's deltas built
//! ([`view`]); the probe is lock-free unless another is asked for (a
//! daemon takes no lock and writes nothing by default); it binds
//! loopback by default; a bad `--listen` or a busy port is one line and
//! exit 2; SIGINT/SIGTERM end it cleanly (open `/events` streams get
//! their pending lines for at most [`SHUTDOWN_GRACE`]).
//!
//! A crate of its own, above the core and the journal: the binary builds
//! a [`Serving`] from its command line and calls [`run`]; a build without
//! `serve` (the monitor alone) builds none of the HTTP and TLS crates.

// The crates below, named as the rest of locktop names them.
use locktop_core::{
    context, disk, engine, liveness, locks, operate, say, stream, text, time_format,
};
use locktop_journal as journal;

mod auth;
mod connections;
mod events;
mod full_snapshot;
mod listen;
mod metrics;
mod password_checks;
mod unix_socket;
mod view;
mod view_stream;
mod web_config;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::Ordering;
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

use anyhow::Context as _;
use axum::Router;
use axum::extract::{Extension, Query, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use crate::context::Context;
use crate::engine::{EngineHandle, Liveness};
use crate::journal::JournalWriter;
use crate::liveness::lock_free::ProbeChoice;
use crate::operate::held::Change;
use crate::stream::follow::Judged;
use events::Subscribers;
use metrics::Exporter;
use view::LiveView;

/// Where `serve` listens unless told otherwise: loopback only.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:9742";

/// How long open `/events` streams may take to get their last lines
/// after SIGINT/SIGTERM.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(2);

/// Where the journal of `serve --journal` goes.
#[derive(Debug, Clone)]
pub struct JournalPlace {
    /// The directory: `journal.jsonl`, rotated into `journal.jsonl.1`, …
    pub dir: PathBuf,
    /// A new file when the current one reaches this many bytes.
    pub max_size: u64,
    /// Files kept, the current one included.
    pub keep: u64,
}

/// What `serve` is to do: where it listens, whom it answers, the engine it
/// runs and where it records.
#[derive(Debug)]
pub struct Serving {
    /// The address to listen on (a port of 0: any free one, said on
    /// stderr).
    pub addr: SocketAddr,
    /// Answer holders' command lines and PIDs on a non-loopback address
    /// to anyone (`--expose-holders-without-auth`).
    pub expose_holders_without_auth: bool,
    /// TLS and basic authentication, in the exporter web-config format.
    pub web_config: Option<PathBuf>,
    /// The engine's configuration.
    pub engine: engine::EngineConfig,
    /// The probe that runs, and why it is not the one asked for.
    pub probe: ProbeChoice,
    /// Whether the source counts refused tries (the kernel's lock events).
    pub refusals_counted: bool,
    /// How liveness is learned: `kernel` or `inference` (what `/view`
    /// tells its clients).
    pub source: &'static str,
    /// With `--socket`: a unix socket to serve on too (every endpoint,
    /// no TLS nor password: the socket file's permissions say who may).
    pub socket: Option<PathBuf>,
    /// A line to say at the start (how liveness is learned, when that is
    /// not the default).
    pub note: Option<String>,
    /// How long a spawn may hold tags without an AIH lock.
    pub materializing: Duration,
    /// With `--journal`: where.
    pub journal: Option<JournalPlace>,
    /// The version `/healthz` says: the binary's, with its commit.
    pub version: &'static str,
}

/// What the handlers share.
struct Shared {
    view: Arc<RwLock<LiveView>>,
    /// `/snapshot.json?all=true`, from the engine's own keys.
    full: full_snapshot::FullSnapshots,
    exporter: Arc<Exporter>,
    subscribers: Subscribers,
    /// The open `/view` streams.
    views: Arc<view_stream::ViewStreams>,
    state_dir: PathBuf,
    probe: ProbeChoice,
    exposure: Exposure,
    /// With `--journal`: whether it is being written.
    journal: Option<Arc<JournalHealth>>,
    /// The version `/healthz` says.
    version: &'static str,
}

/// What `serve` answers, by who can reach it. Invariant: holders'
/// command lines and PIDs (`/snapshot.json`, `/events`) are answered on
/// loopback, elsewhere to an authenticated client ([`auth::Authenticated`]:
/// a password, or a verified client certificate), or to anyone only when
/// the operator said so by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Exposure {
    /// Every endpoint, to every client.
    Everything,
    /// `/metrics`, `/healthz` and `/` to every client, the rest to
    /// authenticated ones only: a non-loopback address.
    HoldersToAuthenticated,
}

impl Exposure {
    /// The exposure of a server on `addr`, `--expose-holders-without-auth`
    /// given or not.
    fn of(addr: &SocketAddr, expose_holders: bool) -> Self {
        if addr.ip().is_loopback() || expose_holders {
            Exposure::Everything
        } else {
            Exposure::HoldersToAuthenticated
        }
    }
}

/// Runs `serve` on `state_dir` until `stop` resolves (SIGINT/SIGTERM).
pub async fn run(
    state_dir: PathBuf,
    serving: Serving,
    stop: impl std::future::Future<Output = ()> + Send + 'static,
) -> anyhow::Result<ExitCode> {
    let addr = serving.addr;
    let note = serving.note.clone();
    let materializing = serving.materializing;
    let probe = serving.probe.clone();
    let web = serving
        .web_config
        .as_deref()
        .map(web_config::load)
        .transpose()?;
    let authenticated = web
        .as_ref()
        .is_some_and(web_config::WebConfig::authenticates_everyone);
    let exposure = Exposure::of(&addr, serving.expose_holders_without_auth);
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("cannot listen on {addr}"))?;
    // Bound before anything is said: once serve says where it listens,
    // both places answer.
    let socket = serving
        .socket
        .as_deref()
        .map(unix_socket::bind)
        .transpose()?;
    // The bound address (a port of 0 picks a free one), for people and
    // scripts: the one line serve writes unless something goes wrong.
    let scheme = if web.as_ref().is_some_and(|web| web.tls.is_some()) {
        "https"
    } else {
        "http"
    };
    say!(
        "locktop serve: listening on {scheme}://{}",
        listener.local_addr().context("no local address")?
    );
    if let Some(path) = &serving.socket {
        say!("locktop serve: listening on unix:{}", path.display());
    }
    if let Some(note) = note {
        say!("{note}");
    }
    let certificates_if_given = web
        .as_ref()
        .is_some_and(|web| web.client_auth == web_config::ClientAuth::VerifyClientCertIfGiven);
    if exposure == Exposure::Everything || authenticated {
        // Said below, or nothing to say.
    } else if certificates_if_given {
        say!(
            "locktop serve: {addr} is not loopback: /snapshot.json and /events (holders' \
             command lines and PIDs) answer only clients with a verified certificate; \
             /metrics and /healthz answer anyone who can reach it"
        );
    } else {
        say!(
            "locktop serve: {addr} is not loopback: only /metrics and /healthz answer; \
             /snapshot.json and /events (holders' command lines and PIDs) are refused — \
             listen on loopback behind an authenticating proxy, or pass \
             --expose-holders-without-auth"
        );
    }
    if !addr.ip().is_loopback() && serving.expose_holders_without_auth && !authenticated {
        say!(
            "locktop serve: {addr} is not loopback and --expose-holders-without-auth is set: \
             anyone who can reach it reads every holder's command line, unencrypted"
        );
    }
    if !addr.ip().is_loopback()
        && let Some(web) = &web
        && web.users.is_some()
        && web.tls.is_none()
    {
        say!(
            "locktop serve: {addr} is not loopback and --web-config has basic_auth_users \
             without tls_server_config: passwords, and holders' command lines, cross the \
             network unencrypted"
        );
    }
    let root = crate::locks::locks_root(&state_dir);
    if !root.is_dir() {
        // Likely a mistyped --state-dir: say so now, not only as a 503.
        say!(
            "locktop serve: {} does not exist (yet): waiting for it; /healthz answers 503 until it appears",
            root.display()
        );
    }
    let (journal, journal_end) = match &serving.journal {
        Some(place) => {
            let (thread, end) = JournalThread::start(journal_in(
                &place.dir,
                &state_dir,
                &probe,
                place.max_size,
                place.keep,
                materializing,
            )?)?;
            (Some(thread), Some(end))
        }
        None => (None, None),
    };
    let journal_health = journal.as_ref().map(|thread| thread.health.clone());
    // Its own thread: a hundred scrapers must not delay what it sees.
    let handle = engine::spawn_dedicated(Context::new(state_dir.clone()), serving.engine)
        .context("cannot start the engine")?;
    let view = Arc::new(RwLock::new(LiveView::new(materializing)));
    let shared = Arc::new(Shared {
        exporter: Arc::new(Exporter {
            view: view.clone(),
            stats: handle.stats.clone(),
            materializing,
            refusals_counted: serving.refusals_counted,
            journal: journal_health.clone(),
        }),
        journal: journal_health,
        view,
        full: full_snapshot::FullSnapshots::new(handle.commands.clone()),
        subscribers: Subscribers::default(),
        views: Arc::new(view_stream::ViewStreams::new(crate::journal::live::Hello {
            format: crate::journal::live::FORMAT.into(),
            version: crate::journal::live::VERSION,
            host: crate::journal::writer::host_name(),
            state_dir: state_dir.clone(),
            locktop: serving.version.into(),
            source: serving.source.into(),
            refusals_counted: serving.refusals_counted,
            probe: probe.runs,
            materializing_after: materializing.as_secs_f64(),
            heartbeat_every: crate::journal::live::HEARTBEAT_EVERY.as_secs_f64(),
        })),
        state_dir,
        probe,
        exposure,
        version: serving.version,
    });
    let follower = tokio::spawn(follow(handle, shared.clone(), journal));
    let mut app = router(shared.clone());
    let (tls, users) = web.map_or((None, None), |web| (web.tls, web.users));
    let admission = listen::Admission {
        password: users.is_some(),
    };
    if let Some(users) = users {
        let gate = auth::Gate::new(users);
        app = app.layer(axum::middleware::from_fn_with_state(gate, auth::require));
    }
    let closing = shared.clone();
    let stop = futures::FutureExt::shared(Box::pin(stop));
    let local = socket.map(|socket| {
        tokio::spawn(unix_socket::serve(
            socket,
            router(shared.clone()),
            stop.clone(),
            SHUTDOWN_GRACE,
        ))
    });
    listen::serve(
        listener,
        app,
        tls,
        admission,
        stop,
        move || {
            closing.subscribers.close_all();
            closing.views.close_all();
        },
        SHUTDOWN_GRACE,
    )
    .await;
    if let Some(local) = local {
        let _ = local.await;
    }
    follower.abort();
    // The follower's end drops the journal's queue: the journal writes
    // what is queued, then its end line.
    let _ = follower.await;
    if let Some(end) = journal_end {
        end.wait(JOURNAL_END_BOUND).await;
    }
    Ok(ExitCode::SUCCESS)
}

/// How long a stopping `serve` waits for its journal to end cleanly (a
/// stalled disk is not waited for longer).
const JOURNAL_END_BOUND: Duration = Duration::from_secs(2);

/// What `follow` hands the journal's thread, in order.
enum ToJournal {
    /// A delta, the verdict changes it caused, and its key's state as the
    /// view's held view keeps it (the journal keeps that one copy).
    Delta(
        Box<crate::engine::Delta>,
        Vec<Change>,
        Option<Arc<crate::engine::KeyState>>,
    ),
    /// Verdict changes found at a time without a delta of their own (a
    /// burst settled, the clock moved).
    Verdicts(Vec<Change>, std::time::SystemTime),
}

/// How many of them may wait for the journal's thread.
const JOURNAL_QUEUE: usize = 8192;
/// How often a journal that cannot be written tries again.
pub const JOURNAL_RETRY: Duration = Duration::from_secs(5);

/// The journal's health, as `/healthz` and `/metrics` tell it: written
/// by the journal's thread, read by scrapes.
#[derive(Debug, Default)]
pub struct JournalHealth {
    /// Writing (not failed, not stopped).
    up: std::sync::atomic::AtomicBool,
    /// Bytes written since the start.
    bytes: std::sync::atomic::AtomicU64,
    /// The last failure: when, and why (kept once writing resumes).
    last_failure: std::sync::Mutex<Option<crate::journal::Failure>>,
    /// Stopped for good (it fell too far behind): no retry.
    stopped: std::sync::atomic::AtomicBool,
}

impl JournalHealth {
    /// Whether the journal is being written.
    pub fn up(&self) -> bool {
        self.up.load(Ordering::Relaxed)
    }

    /// Bytes written since the start.
    pub fn bytes(&self) -> u64 {
        self.bytes.load(Ordering::Relaxed)
    }

    /// The last failure, if any.
    pub fn last_failure(&self) -> Option<crate::journal::Failure> {
        self.last_failure
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// `/healthz`'s journal line.
    pub fn line(&self) -> String {
        let failure = self.last_failure();
        match (self.up(), failure) {
            (true, None) => format!("journal: writing ({} bytes written)", self.bytes()),
            (true, Some(failure)) => format!(
                "journal: writing ({} bytes written; it could not be written from {}: {})",
                self.bytes(),
                crate::time_format::rfc3339(failure.since),
                crate::text::visible(&failure.error)
            ),
            (false, failure) => {
                let (since, error) = failure.map_or_else(
                    || ("the start".to_string(), "not started".to_string()),
                    |failure| {
                        (
                            crate::time_format::rfc3339(failure.since),
                            crate::text::visible(&failure.error).into_owned(),
                        )
                    },
                );
                let next = if self.stopped.load(Ordering::Relaxed) {
                    "stopped for good; restart serve".to_string()
                } else {
                    format!("tried again every {} s", JOURNAL_RETRY.as_secs())
                };
                format!("journal: NOT WRITING since {since}: {error} ({next})")
            }
        }
    }

    fn failed(&self, failure: crate::journal::Failure) {
        self.up.store(false, Ordering::Relaxed);
        *self
            .last_failure
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(failure);
    }
}

/// The journal of `serve --journal`: its own thread writes, so a slow or
/// stalled disk never holds up the view, the scrapes or `/events`; what
/// it has not written yet waits in a bounded queue. A journal that
/// cannot be written (a full disk) keeps folding the changes and tries
/// again every [`JOURNAL_RETRY`]: it resumes with a new recording whose
/// first checkpoint is the state then, and whose header says why nothing
/// was recorded in between. One that falls [`JOURNAL_QUEUE`] behind
/// stops for good (its state would miss the changes it dropped) rather
/// than grow memory or stall serving. Each is said once on stderr and
/// in [`JournalHealth`].
struct JournalThread {
    queue: std::sync::mpsc::SyncSender<ToJournal>,
    health: Arc<JournalHealth>,
}

/// The journal's thread, to wait for at shutdown: once every sender is
/// gone it writes what is queued and the end line (a clean stop).
struct JournalEnd(std::thread::JoinHandle<()>);

impl JournalEnd {
    /// Waits up to `bound` for the journal to end cleanly.
    async fn wait(self, bound: Duration) {
        let joined = tokio::task::spawn_blocking(move || {
            let _ = self.0.join();
        });
        let _ = tokio::time::timeout(bound, joined).await;
    }
}

impl JournalThread {
    fn start(mut writer: JournalWriter) -> anyhow::Result<(Self, JournalEnd)> {
        let (queue, work) = std::sync::mpsc::sync_channel(JOURNAL_QUEUE);
        let health = Arc::new(JournalHealth::default());
        health.up.store(true, Ordering::Relaxed);
        let shared = health.clone();
        let thread = std::thread::Builder::new()
            .name("locktop-journal".into())
            .spawn(move || {
                let mut retry_at = None;
                loop {
                    let message = match work.recv_timeout(JOURNAL_RETRY) {
                        Ok(message) => Some(message),
                        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => None,
                        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                            // Serving stopped: the recording ends here.
                            if writer.failure().is_none() {
                                let _ = writer.finish();
                            }
                            return;
                        }
                    };
                    let written = match message {
                        Some(ToJournal::Delta(delta, changes, shared)) => {
                            writer.record_sharing(*delta, changes, shared)
                        }
                        Some(ToJournal::Verdicts(changes, at)) => {
                            writer.record_verdicts(changes, at)
                        }
                        None => Ok(()),
                    };
                    if let (Err(error), Some(failure)) = (written, writer.failure()) {
                        say!(
                            "locktop serve: the journal stopped: {error}; tried again every {} s",
                            JOURNAL_RETRY.as_secs()
                        );
                        shared.failed(failure.clone());
                        retry_at = Some(std::time::Instant::now() + JOURNAL_RETRY);
                    }
                    if retry_at.is_some_and(|at| std::time::Instant::now() >= at) {
                        match writer.resume() {
                            Ok(()) => {
                                say!("locktop serve: the journal resumed, in a new file");
                                shared.up.store(true, Ordering::Relaxed);
                                retry_at = None;
                            }
                            Err(_) => {
                                if let Some(failure) = writer.failure() {
                                    shared.failed(failure.clone());
                                }
                                retry_at = Some(std::time::Instant::now() + JOURNAL_RETRY);
                            }
                        }
                    }
                    shared
                        .bytes
                        .store(writer.bytes_written(), Ordering::Relaxed);
                }
            })
            .context("cannot start the journal's thread")?;
        Ok((Self { queue, health }, JournalEnd(thread)))
    }
}

/// Hands `message` to the journal's thread, if there is one; a journal
/// that fell [`JOURNAL_QUEUE`] behind is dropped (said once).
fn record(journal: &mut Option<JournalThread>, message: ToJournal) {
    let Some(thread) = journal else { return };
    match thread.queue.try_send(message) {
        Ok(()) => {}
        Err(std::sync::mpsc::TrySendError::Full(_)) => {
            say!(
                "locktop serve: the journal stopped for good: the disk did not keep up ({JOURNAL_QUEUE} changes waiting)"
            );
            thread.health.stopped.store(true, Ordering::Relaxed);
            thread.health.failed(crate::journal::Failure {
                since: std::time::SystemTime::now(),
                error: format!("the disk did not keep up ({JOURNAL_QUEUE} changes waiting)"),
            });
            *journal = None;
        }
        Err(std::sync::mpsc::TrySendError::Disconnected(_)) => *journal = None,
    }
}

/// The recorder of `serve --journal DIR`: `DIR/journal.jsonl`, rotated.
fn journal_in(
    dir: &std::path::Path,
    state_dir: &std::path::Path,
    probe: &ProbeChoice,
    max_size: u64,
    keep: u64,
    materializing: Duration,
) -> anyhow::Result<JournalWriter> {
    std::fs::create_dir_all(dir)
        .with_context(|| format!("--journal: cannot create {}", dir.display()))?;
    let journal = crate::journal::Journal::create(
        crate::journal::Output::File {
            path: dir.join(JOURNAL_FILE),
            max_size: Some(max_size),
            keep: keep as usize,
        },
        crate::journal::Recording {
            state_dir: state_dir.to_path_buf(),
            probe: probe.runs,
        },
    )?
    .with_materializing_after(materializing);
    Ok(JournalWriter::new(journal))
}

/// The current journal file's name in `serve --journal DIR`.
pub const JOURNAL_FILE: &str = "journal.jsonl";

/// Applies the engine's deltas to the view and the `/events` streams
/// (and the journal, with `--journal`); judges held keys again when a
/// burst settles and once a second against the clock (a verdict that
/// comes with time alone), as `watch` does. A journal that cannot be
/// written is said once on stderr and stops; serving goes on.
async fn follow(mut handle: EngineHandle, shared: Arc<Shared>, mut journal: Option<JournalThread>) {
    // Streams hear a change while the view's lock is held for writing:
    // a `/view` stream opened meanwhile (under the lock) has it in its
    // checkpoint or after it, never both nor neither.
    let tell_judged = |journal: &mut Option<JournalThread>, judged: Judged| {
        let at = judged.at.unwrap_or_else(std::time::SystemTime::now);
        shared.subscribers.publish_verdicts(&judged.changes, at);
        shared.views.publish_verdicts(&judged.changes, at);
        if !judged.changes.is_empty() {
            record(journal, ToJournal::Verdicts(judged.changes, at));
        }
    };
    let mut clock = crate::stream::follow::DueTimer::new();
    loop {
        let due = shared
            .view
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .due();
        tokio::select! {
            delta = handle.deltas.recv() => {
                let Some(delta) = delta else { return };
                let mut view = shared.view.write().unwrap_or_else(PoisonError::into_inner);
                let followed = view.apply(&delta);
                if let Some(settled) = followed.settled {
                    tell_judged(&mut journal, settled);
                }
                shared.subscribers.publish(&delta, followed.repeat, &followed.changes);
                shared.views.publish(&delta, &followed.changes);
                if let Some(first_state) = followed.first_state {
                    // Every key is in: the first state's verdicts. A
                    // stream hears them; the journal's checkpoint tells
                    // them.
                    let at = first_state.at.unwrap_or_else(std::time::SystemTime::now);
                    shared.subscribers.publish_verdicts(&first_state.changes, at);
                    shared.views.publish_verdicts(&first_state.changes, at);
                }
                drop(view);
                record(
                    &mut journal,
                    ToJournal::Delta(Box::new(delta), followed.changes, followed.shared),
                );
            }
            () = clock.until(due) => {
                let mut view = shared.view.write().unwrap_or_else(PoisonError::into_inner);
                if let Some(judged) = view.judge(std::time::SystemTime::now()) {
                    tell_judged(&mut journal, judged);
                }
            }
        }
    }
}

fn router(shared: Arc<Shared>) -> Router {
    Router::new()
        .route("/", get(index))
        .route("/metrics", get(metrics))
        .route("/snapshot.json", get(snapshot))
        .route("/events", get(events))
        .route("/view", get(view_stream))
        .route("/healthz", get(healthz))
        .fallback(not_found)
        .with_state(shared)
}

async fn not_found() -> Response {
    (
        StatusCode::NOT_FOUND,
        "not found: locktop serve answers /metrics, /snapshot.json, /events, /view, /healthz (see /)\n",
    )
        .into_response()
}

/// Whether a request's client authenticated ([`auth::Authenticated`]).
type ByWhom = Option<Extension<auth::Authenticated>>;

/// The answer for holders' details to a client this server does not
/// expose them to (see [`Exposure`]), or `None` when it does.
fn refused_holders(shared: &Shared, by: &ByWhom) -> Option<Response> {
    let refused = shared.exposure == Exposure::HoldersToAuthenticated && by.is_none();
    refused.then(|| {
        (
            StatusCode::FORBIDDEN,
            "forbidden: this server listens beyond loopback; holders' command lines and PIDs \
             are served here only to authenticated clients (see `locktop serve --help`)\n",
        )
            .into_response()
    })
}

async fn index() -> &'static str {
    "locktop serve: /metrics (OpenMetrics), /snapshot.json (?all=true for free keys too), \
     /events (NDJSON, as watch --json), /view (the live view stream --connect follows), /healthz\n"
}

async fn metrics(State(shared): State<Arc<Shared>>, headers: axum::http::HeaderMap) -> Response {
    let accept = headers
        .get(header::ACCEPT)
        .and_then(|value| value.to_str().ok());
    let format = metrics::Format::from_accept(accept);
    let text = shared.exporter.render(format);
    ([(header::CONTENT_TYPE, format.content_type())], text).into_response()
}

/// `?all=true`: free keys too, as `snapshot --all`.
#[derive(Debug, serde::Deserialize)]
struct SnapshotQuery {
    #[serde(default)]
    all: bool,
}

/// How long a client is told to wait before asking again for a view
/// that is not complete yet.
const RETRY_AFTER_SECS: &str = "1";

async fn snapshot(
    State(shared): State<Arc<Shared>>,
    by: ByWhom,
    Query(query): Query<SnapshotQuery>,
) -> Response {
    if let Some(refused) = refused_holders(&shared, &by) {
        return refused;
    }
    let synced = {
        let view = shared.view.read().unwrap_or_else(PoisonError::into_inner);
        view.watcher().synced()
    };
    if !synced {
        // Before the first full scan the view is not the state dir's:
        // an empty list would read as "nothing held".
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            [(header::RETRY_AFTER, RETRY_AFTER_SECS)],
            "not ready: the first scan is not finished\n",
        )
            .into_response();
    }
    if query.all {
        let (state_dir, probe) = (shared.state_dir.clone(), shared.probe.clone());
        let waits = {
            let view = shared.view.read().unwrap_or_else(PoisonError::into_inner);
            view.held().waits().clone()
        };
        let materializing = shared.exporter.materializing;
        return shared
            .full
            .respond(move |out, everything| {
                let mut out = out;
                crate::stream::snapshot::write_json(
                    &mut out,
                    &state_dir,
                    &probe,
                    everything.keys.iter_sorted(),
                    &everything.problems,
                    crate::stream::snapshot::Judged {
                        materializing,
                        now: std::time::SystemTime::now(),
                        waits: Some(&waits),
                    },
                )
            })
            .await;
    }
    let (mut keys, problems, waits) = {
        let view = shared.view.read().unwrap_or_else(PoisonError::into_inner);
        let keys: Vec<_> = view
            .noteworthy()
            .filter(|(_, state)| state.liveness != Liveness::Free)
            .map(|(key, state)| (key.clone(), state.clone()))
            .collect();
        (
            keys,
            view.watcher().problems.clone(),
            view.held().waits().clone(),
        )
    };
    keys.sort_by(|a, b| a.0.cmp(&b.0));
    let mut body = Vec::new();
    let written = crate::stream::snapshot::write_json(
        &mut body,
        &shared.state_dir,
        &shared.probe,
        keys.iter().map(|(key, state)| (key, state)),
        &problems,
        crate::stream::snapshot::Judged {
            materializing: shared.exporter.materializing,
            now: std::time::SystemTime::now(),
            waits: Some(&waits),
        },
    );
    match written {
        Ok(()) => ([(header::CONTENT_TYPE, "application/json")], body).into_response(),
        Err(error) => (StatusCode::INTERNAL_SERVER_ERROR, error.to_string()).into_response(),
    }
}

async fn events(State(shared): State<Arc<Shared>>, by: ByWhom) -> Response {
    if let Some(refused) = refused_holders(&shared, &by) {
        return refused;
    }
    match shared.subscribers.subscribe() {
        Some(outbox) => (
            [(header::CONTENT_TYPE, "application/x-ndjson")],
            events::body(outbox),
        )
            .into_response(),
        None => (
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "too many /events streams (at most {})\n",
                events::MAX_SUBSCRIBERS
            ),
        )
            .into_response(),
    }
}

async fn view_stream(
    State(shared): State<Arc<Shared>>,
    by: ByWhom,
    door: Option<Extension<view_stream::Door>>,
) -> Response {
    if let Some(refused) = refused_holders(&shared, &by) {
        return refused;
    }
    let door = door.map_or(view_stream::Door::Tcp, |Extension(door)| door);
    let opened = {
        let view = shared.view.read().unwrap_or_else(PoisonError::into_inner);
        shared.views.open(&view, door)
    };
    match opened {
        Some(outbox) => (
            [(header::CONTENT_TYPE, "application/x-ndjson")],
            view_stream::body(shared.views.clone(), outbox, shared.view.clone()),
        )
            .into_response(),
        None => (
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "too many /view streams here (at most {} on TCP and {} on the socket)\n",
                view_stream::MAX_STREAMS,
                view_stream::MAX_STREAMS
            ),
        )
            .into_response(),
    }
}

async fn healthz(State(shared): State<Arc<Shared>>) -> Response {
    let health = shared
        .view
        .read()
        .unwrap_or_else(PoisonError::into_inner)
        .healthy();
    // The journal's line: its failing does not stop the watching (the
    // status stays the view's), but it is said here and in /metrics.
    let journal = shared
        .journal
        .as_ref()
        .map(|journal| format!("{}\n", journal.line()))
        .unwrap_or_default();
    match health {
        Ok(()) => (
            StatusCode::OK,
            format!(
                "ok: watching\n{journal}version: locktop {}\n",
                shared.version
            ),
        )
            .into_response(),
        Err(reason) => (
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "unhealthy: {}\n{journal}version: locktop {}\n",
                crate::text::visible(&reason),
                shared.version
            ),
        )
            .into_response(),
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::time::SystemTime;

    use super::*;
    use crate::disk::LockKey;
    use crate::engine::{Delta, KeyState, WatcherHealth};

    /// A server's shared state whose view has seen one held tag, and
    /// (when `synced`) the end of the first full scan.
    fn shared_with_one_held_tag(synced: bool) -> Arc<Shared> {
        let mut view = LiveView::new(crate::operate::verdict::MATERIALIZING_AFTER);
        let key = LockKey::from_coord(Path::new("/s"), Path::new("/s/locks/agents/tags"), "t");
        let at = SystemTime::now();
        view.apply(&Delta::Health(WatcherHealth::Watching));
        view.apply(&Delta::Key {
            key,
            state: KeyState::bare(Liveness::Live),
            previous: None,
            at,
        });
        if synced {
            view.apply(&Delta::Synced { keys: 1, at });
        }
        let view = Arc::new(RwLock::new(view));
        let materializing = crate::operate::verdict::MATERIALIZING_AFTER;
        Arc::new(Shared {
            exporter: Arc::new(Exporter {
                view: view.clone(),
                stats: Arc::default(),
                materializing,
                refusals_counted: true,
                journal: None,
            }),
            view,
            // No engine: a full snapshot answers 503.
            full: full_snapshot::FullSnapshots::new(tokio::sync::mpsc::unbounded_channel().0),
            subscribers: Subscribers::default(),
            views: Arc::new(view_stream::ViewStreams::new(view_stream::tests::hello())),
            state_dir: "/s".into(),
            probe: ProbeChoice::as_asked(crate::liveness::probe::ProbeMode::LockFree),
            exposure: Exposure::Everything,
            journal: None,
            version: "test",
        })
    }

    /// Until the first full scan is done, the view is not the state
    /// dir's: `/snapshot.json` answers 503 with `Retry-After` (not 200
    /// with the keys seen so far, which read as "nothing held" at a
    /// restart), and `/metrics` has no key series at all (absent, not
    /// 0) — but still says the watcher is not healthy yet.
    #[tokio::test]
    async fn before_the_first_scan_no_answer_pretends_to_be_complete() {
        let early = shared_with_one_held_tag(false);
        let answer = snapshot(
            State(early.clone()),
            None,
            Query(SnapshotQuery { all: true }),
        )
        .await;
        assert_eq!(answer.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert!(answer.headers().contains_key(header::RETRY_AFTER));
        let scrape = early.exporter.render(metrics::Format::PrometheusText);
        assert!(!scrape.contains("locktop_keys"), "{scrape}");
        assert!(!scrape.contains("locktop_tag_held_seconds"), "{scrape}");
        assert!(scrape.contains("locktop_watcher_healthy 0"), "{scrape}");

        let ready = shared_with_one_held_tag(true);
        // (`?all=true` asks the engine: the integration tests' part.)
        let answer = snapshot(
            State(ready.clone()),
            None,
            Query(SnapshotQuery { all: false }),
        )
        .await;
        assert_eq!(answer.status(), StatusCode::OK);
        let scrape = ready.exporter.render(metrics::Format::PrometheusText);
        assert!(scrape.contains("locktop_keys{"), "{scrape}");
        assert!(scrape.contains("locktop_tag_held_seconds{"), "{scrape}");
        assert!(scrape.contains("locktop_watcher_healthy 1"), "{scrape}");
    }

    /// Refused tries are a counter by the claim's kind, with the kernel's
    /// lock events only: under inference nobody counts them, and the
    /// series is absent rather than a 0 that reads as "none refused".
    #[test]
    fn refused_tries_are_counted_by_kind_only_where_the_kernel_tells_them() {
        let scrape = |counted: bool| {
            let stats = Arc::new(crate::engine::EngineStats::default());
            stats
                .refused_tries
                .tag
                .store(7, std::sync::atomic::Ordering::Relaxed);
            Arc::new(Exporter {
                view: Arc::new(RwLock::new(LiveView::new(
                    crate::operate::verdict::MATERIALIZING_AFTER,
                ))),
                stats,
                materializing: crate::operate::verdict::MATERIALIZING_AFTER,
                refusals_counted: counted,
                journal: None,
            })
            .render(metrics::Format::PrometheusText)
        };
        let counted = scrape(true);
        assert!(
            counted.contains("locktop_refused_tries_total{kind=\"tag\"} 7"),
            "{counted}"
        );
        assert!(
            counted.contains("locktop_refused_tries_total{kind=\"instance\"} 0"),
            "{counted}"
        );
        let inferred = scrape(false);
        assert!(!inferred.contains("locktop_refused_tries"), "{inferred}");
    }
}
