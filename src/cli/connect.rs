//! `--connect`, `--connect-config`, `--no-connect`: whether a front end
//! (the monitor, `watch`, `snapshot`, `check`) follows this host's
//! `locktop serve` (or one named) instead of running an engine here —
//! one tap per host, however many look.
//!
//! The rule, in order:
//! - `--no-connect`: an engine here;
//! - `--connect TARGET`: that service, whatever it watches; `--connect`
//!   alone: this host's service ([`DEFAULT_SOCKET`], or
//!   `$LOCKTOP_SOCKET`); a service that cannot be reached is an error;
//! - neither: this host's service when its socket exists, answers, and
//!   watches the state dir this command would (else an engine here, and
//!   the header or the stderr line says why it did not attach — unless
//!   there is no socket at all, the usual case without the service).
//!
//! Invariant: every option either applies or is refused — an option
//! that shapes an engine here (`--probe`, `--source`, `--sweep`, the
//! thresholds) is refused with `--connect` (the service's apply), and
//! without `--connect` it means an engine here (no default attach).

use std::path::{Path, PathBuf};

/// This host's service's socket (the package's unit).
#[cfg(feature = "attach")]
pub const DEFAULT_SOCKET: &str = "/run/locktop/locktop.sock";

/// The environment variable naming another socket for this host's
/// service.
#[cfg(feature = "attach")]
pub const SOCKET_ENV: &str = "LOCKTOP_SOCKET";

/// The flags of attaching.
#[derive(Debug, Clone, Default, clap::Args)]
#[command(next_help_heading = "Attaching to a service")]
pub struct ConnectArgs {
    /// Follow a `locktop serve` instead of running an engine here:
    /// unix:PATH (its --socket), http://HOST:PORT or https://HOST:PORT.
    /// Alone: this host's service (unix:/run/locktop/locktop.sock, or
    /// $LOCKTOP_SOCKET), whatever state dir it watches. Without it,
    /// this host's service is followed when it watches the same state
    /// dir. Its source, probe and thresholds apply.
    #[arg(long, value_name = "TARGET", num_args = 0..=1, default_missing_value = "", conflicts_with = "no_connect")]
    pub connect: Option<String>,
    /// TLS and basic auth for --connect, YAML: tls_config (ca_file,
    /// cert_file, key_file, server_name) and basic_auth (username,
    /// password_file); or LOCKTOP_CONNECT_USERNAME and
    /// LOCKTOP_CONNECT_PASSWORD. Never on the command line.
    #[arg(long, value_name = "FILE")]
    pub connect_config: Option<PathBuf>,
    /// Run an engine here even where this host's service watches the same
    /// state dir.
    #[arg(long)]
    pub no_connect: bool,
}

/// This host's service's socket.
#[cfg(feature = "attach")]
pub fn local_socket() -> PathBuf {
    std::env::var_os(SOCKET_ENV)
        .filter(|path| !path.is_empty())
        .map_or_else(|| PathBuf::from(DEFAULT_SOCKET), PathBuf::from)
}

/// What a front end runs on.
pub enum Plan {
    /// An engine here; `why` says why it did not attach, when that is
    /// worth a word.
    Private {
        /// Why not attached (for the header or a stderr line).
        why: Option<String>,
    },
    /// A service's view.
    #[cfg(feature = "attach")]
    Attached(locktop_attach::Attached),
}

impl ConnectArgs {
    /// Decides, for a command that would watch `state_dir`, with
    /// `engine_option` the first engine-shaping option given (if any).
    pub async fn plan(
        &self,
        state_dir: &Path,
        explicit: bool,
        engine_option: Option<&str>,
    ) -> anyhow::Result<Plan> {
        if self.connect_config.is_some() && self.connect.is_none() {
            anyhow::bail!("--connect-config applies to --connect only: give --connect TARGET too");
        }
        if self.no_connect {
            return Ok(Plan::Private { why: None });
        }
        if let Some(given) = &self.connect {
            if let Some(option) = engine_option {
                anyhow::bail!(
                    "{option} shapes an engine run here; with --connect the service's applies (drop {option}, or drop --connect)"
                );
            }
            return self
                .attach_named(given, explicit.then_some(state_dir))
                .await;
        }
        if engine_option.is_some() {
            return Ok(Plan::Private { why: None });
        }
        self.attach_default(state_dir).await
    }

    /// Attaches to `given` (empty: this host's service); a state dir given
    /// on the command line must be the one the service watches.
    #[cfg(feature = "attach")]
    async fn attach_named(&self, given: &str, state_dir: Option<&Path>) -> anyhow::Result<Plan> {
        let target = if given.is_empty() {
            locktop_attach::Target::Unix(local_socket())
        } else {
            locktop_attach::Target::parse(given)?
        };
        let config = locktop_attach::ClientConfig::load(self.connect_config.as_deref())?;
        if let Some(refused) = config.refused_for(&target) {
            anyhow::bail!("--connect-config: {refused}");
        }
        let attached = locktop_attach::attach(target.clone(), config).await?;
        let theirs = attached.link.hello().state_dir;
        if let Some(ours) = state_dir
            && !same_dir(&theirs, ours)
        {
            anyhow::bail!(
                "--state-dir {}: the service at {target} watches {} (drop --state-dir to follow it)",
                ours.display(),
                theirs.display()
            );
        }
        Ok(Plan::Attached(attached))
    }

    #[cfg(not(feature = "attach"))]
    async fn attach_named(&self, _given: &str, _state_dir: Option<&Path>) -> anyhow::Result<Plan> {
        anyhow::bail!(
            "--connect: this locktop was built without attaching (cargo build --features attach)"
        )
    }

    #[cfg(feature = "attach")]
    async fn attach_default(&self, state_dir: &Path) -> anyhow::Result<Plan> {
        let socket = local_socket();
        if !socket.exists() {
            return Ok(Plan::Private { why: None });
        }
        let target = locktop_attach::Target::Unix(socket);
        let config = locktop_attach::ClientConfig::default();
        let attached = match locktop_attach::attach(target.clone(), config).await {
            Ok(attached) => attached,
            Err(error) => {
                return Ok(Plan::Private {
                    why: Some(format!("not attached: {error:#}")),
                });
            }
        };
        let theirs = attached.link.hello().state_dir;
        if same_dir(&theirs, state_dir) {
            Ok(Plan::Attached(attached))
        } else {
            Ok(Plan::Private {
                why: Some(format!(
                    "not attached: the service at {target} watches {}, not this state dir (--connect follows it anyway)",
                    theirs.display()
                )),
            })
        }
    }

    #[cfg(not(feature = "attach"))]
    async fn attach_default(&self, _state_dir: &Path) -> anyhow::Result<Plan> {
        Ok(Plan::Private { why: None })
    }
}

/// Whether two paths name the same directory (as resolved here; a path
/// that does not resolve compares as written).
#[cfg(feature = "attach")]
fn same_dir(a: &Path, b: &Path) -> bool {
    let resolve = |path: &Path| std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    resolve(a) == resolve(b)
}

/// The first option of `probe`, `sweep`, the thresholds and the source
/// that asks for something other than the default: an engine run here.
pub fn engine_option_given(
    probe: crate::liveness::probe::ProbeMode,
    sweep: Option<f64>,
    thresholds: &super::thresholds::ThresholdArgs,
    source: &super::source_args::SourceArgs,
) -> Option<&'static str> {
    let defaults = super::thresholds::ThresholdArgs::default();
    if probe != crate::liveness::probe::ProbeMode::LockFree {
        Some("--probe")
    } else if sweep.is_some() {
        Some("--sweep")
    } else if thresholds.materializing_after.is_some() {
        Some("--materializing-after")
    } else if thresholds.idle_after != defaults.idle_after {
        Some("--idle-after")
    } else if source.source != super::source_args::SourceFlag::Auto {
        Some("--source")
    } else if source.tracepoint_id.is_some() {
        Some("--tracepoint-id")
    } else {
        None
    }
}

/// One line for a headless command's stderr: what it follows, and how
/// that service learns liveness.
#[cfg(feature = "attach")]
pub fn attached_line(link: &locktop_attach::Link) -> String {
    let hello = link.hello();
    format!(
        "attached to {} (host {}, state dir {}, source {}, probe {}; the service's thresholds apply)",
        link.target(),
        hello.host,
        hello.state_dir.display(),
        hello.source,
        hello.probe.as_str()
    )
}

/// The threshold a service judges spawns by (its hello's), or the
/// default where the number cannot be one.
#[cfg(feature = "attach")]
pub fn service_threshold(hello: &crate::journal::live::Hello) -> std::time::Duration {
    std::time::Duration::try_from_secs_f64(hello.materializing_after)
        .unwrap_or(crate::operate::verdict::MATERIALIZING_AFTER)
}

/// A service's view once it is complete: its first full scan is in, and
/// the link is up.
#[cfg(feature = "attach")]
pub struct Settled {
    /// Every key the service listed, and its watcher.
    pub fold: crate::engine::fold::Fold,
    /// The link, for what it says of the service.
    pub link: std::sync::Arc<locktop_attach::Link>,
    /// The rest of its deltas.
    handle: crate::engine::EngineHandle,
}

#[cfg(feature = "attach")]
impl Settled {
    /// The held keys, with their states.
    pub fn held(&self) -> impl Iterator<Item = (&crate::disk::LockKey, &crate::engine::KeyState)> {
        self.fold
            .keys()
            .iter()
            .filter(|(_, state)| state.liveness.is_held())
    }

    /// Folds in what the service says for `window` more; an error when the
    /// view stops being complete meanwhile.
    pub async fn follow_for(&mut self, window: std::time::Duration) -> anyhow::Result<()> {
        let deadline = tokio::time::Instant::now() + window;
        while let Ok(Some(delta)) =
            tokio::time::timeout_at(deadline, self.handle.deltas.recv()).await
        {
            self.fold.apply(delta);
        }
        if complete(self.fold.watcher()) {
            Ok(())
        } else {
            anyhow::bail!(
                "{}: its view stopped being complete ({})",
                self.link.target(),
                crate::text::visible(&self.fold.watcher().health.describe())
            )
        }
    }
}

/// Whether a service's view can be answered from: its first scan done,
/// and not rescanning (events were lost), starting, nor lost. (Waiting
/// for a locks root that does not exist yet is a complete view: nothing
/// is held; polling is a slower watch, not a partial one.)
#[cfg(feature = "attach")]
fn complete(watcher: &crate::engine::fold::WatcherView) -> bool {
    use crate::engine::WatcherHealth;
    watcher.synced()
        && !matches!(
            watcher.health,
            WatcherHealth::Starting
                | WatcherHealth::Rescanning { .. }
                | WatcherHealth::Reconnecting { .. }
        )
}

/// How long a one-shot command waits for a service's view to be complete.
#[cfg(feature = "attach")]
pub const SETTLE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// Follows `attached` until its view is complete (the service finished
/// its first scan, and the link is not lost): a one-shot answer never
/// answers from a view that is not complete yet.
#[cfg(feature = "attach")]
pub async fn settled(attached: locktop_attach::Attached) -> anyhow::Result<Settled> {
    let locktop_attach::Attached { mut handle, link } = attached;
    let mut fold = crate::engine::fold::Fold::default();
    let waited = tokio::time::timeout(SETTLE_TIMEOUT, async {
        while let Some(delta) = handle.deltas.recv().await {
            fold.apply(delta);
            if complete(fold.watcher()) && handle.deltas.is_empty() {
                return true;
            }
        }
        false
    })
    .await;
    match waited {
        Ok(true) => Ok(Settled { fold, link, handle }),
        Ok(false) => anyhow::bail!("{}: the link ended", link.target()),
        Err(_) => anyhow::bail!(
            "{}: its view is not complete after {} s ({})",
            link.target(),
            SETTLE_TIMEOUT.as_secs(),
            crate::text::visible(&fold.watcher().health.describe())
        ),
    }
}

/// The link as the monitor's header sees it.
#[cfg(feature = "attach")]
#[derive(Debug)]
pub struct LinkView(pub std::sync::Arc<locktop_attach::Link>);

#[cfg(feature = "attach")]
impl crate::tui::Attachment for LinkView {
    fn describe(&self) -> String {
        self.0.describe()
    }

    fn is_live(&self) -> bool {
        self.0.is_live()
    }

    fn is_local(&self) -> bool {
        self.0.target().is_local()
    }

    fn free_line(&self) -> String {
        self.0.free_line()
    }
}
