//! `locktop serve`'s command line: its flags, and the wiring from them
//! to the serve crate ([`locktop_serve`], which does the serving).
//!
//! Invariant: a bad `--listen` is refused in one line (exit 2) before
//! the engine starts; every other flag is handed over as given.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use locktop_serve::{DEFAULT_LISTEN, JournalPlace, Serving};

/// Flags of `locktop serve`.
#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// Address to listen on, IP:PORT. On loopback (the default) every
    /// endpoint answers; on any other address only /metrics and /healthz
    /// do, but to clients that authenticated (--web-config) —
    /// /snapshot.json and /events carry holders' command lines and PIDs —
    /// unless --expose-holders-without-auth.
    #[arg(long, default_value = DEFAULT_LISTEN, value_name = "ADDR")]
    listen: String,
    /// Answer /snapshot.json and /events (holders' full command lines and
    /// PIDs) on a non-loopback --listen address, to anyone who can reach
    /// it: no authentication, no encryption.
    #[arg(long)]
    expose_holders_without_auth: bool,
    /// Also listen on a unix socket at PATH (mode 0660: the owner and the
    /// process's group may connect; the package's unit uses
    /// /run/locktop/locktop.sock, group locktop). Every endpoint answers
    /// there, without TLS or password: the file's permissions say who
    /// may. `locktop --connect unix:PATH` attaches to it.
    #[arg(long, value_name = "PATH")]
    socket: Option<PathBuf>,
    /// TLS and basic authentication, in the exporter web-config format
    /// (node_exporter's --web.config.file: tls_server_config with
    /// cert_file, key_file, client_auth_type, client_ca_file, min_version;
    /// basic_auth_users with bcrypt hashes). An authenticated client (the
    /// password, or a client certificate the client CA verified) gets
    /// every endpoint on any address.
    #[arg(long, value_name = "FILE")]
    web_config: Option<PathBuf>,
    #[command(flatten)]
    engine: super::engine_args::EngineArgs,
    /// Also record the lock history into DIR (journal.jsonl, rotated into
    /// journal.jsonl.1, .2, …) from the same engine: `locktop replay DIR`
    /// reads it back.
    #[arg(long, value_name = "DIR")]
    journal: Option<PathBuf>,
    /// Start a new journal file when the current one reaches SIZE (bytes,
    /// or with K, M, G). Needs --journal.
    #[arg(long, value_name = "SIZE", value_parser = super::record::parse_size, requires = "journal", default_value = "100M")]
    max_size: u64,
    /// Journal files to keep, the current one included. Needs --journal.
    #[arg(long, value_name = "N", requires = "journal", default_value_t = crate::journal::writer::KEEP as u64, value_parser = clap::value_parser!(u64).range(1..))]
    keep: u64,
}

/// Runs `locktop serve` until SIGINT/SIGTERM.
pub async fn run(state_dir: PathBuf, args: ServeArgs) -> anyhow::Result<ExitCode> {
    let addr: SocketAddr = args.listen.parse().map_err(|_| {
        anyhow::anyhow!(
            "--listen: {:?} is not an IP:PORT address: {DEFAULT_LISTEN} (this host only), \
             127.0.0.1:0 (any free port, named on stderr) or 0.0.0.0:9742 (every interface: \
             see --web-config)",
            args.listen
        )
    })?;
    let engine = args.engine.engine(&state_dir, "serve")?;
    let stop = super::stop_signal()?;
    let serving = Serving {
        addr,
        expose_holders_without_auth: args.expose_holders_without_auth,
        web_config: args.web_config,
        refusals_counted: engine.source.kind().counts_refusals(),
        source: engine.source.word(),
        socket: args.socket,
        engine: engine.config,
        probe: engine.probe,
        note: engine.note,
        materializing: engine.materializing,
        journal: args.journal.map(|dir| JournalPlace {
            dir,
            max_size: args.max_size,
            keep: args.keep,
        }),
        version: super::VERSION,
    };
    locktop_serve::run(state_dir, serving, stop).await
}
