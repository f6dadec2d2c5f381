//! One request to a service: a connection (unix socket, TCP, or TLS over
//! TCP), HTTP/1.1, basic authentication where configured.
//!
//! Invariants: a request whose answer's head has not come within
//! [`ANSWER_TIMEOUT`] of its start (the connection, its TLS handshake
//! and the service's answer: a service stopped with SIGSTOP accepts on
//! its socket and says nothing) is an error; a password is sent only over TLS or a unix socket
//! (refused in one line over plain HTTP; never sent over a unix socket,
//! whose permissions are the authentication); every failure is one line
//! saying what to do (a refused socket names the group to join, a 401
//! names where credentials come from).

use std::time::Duration;

use anyhow::{Context as _, anyhow, bail};
use base64::Engine as _;
use http_body_util::BodyExt as _;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite};

use crate::client_config::{ClientConfig, PASSWORD_ENV, USERNAME_ENV};
use crate::target::Target;

/// How long a request may wait for its answer's head, from the start
/// of its connection (the TLS handshake included).
pub const ANSWER_TIMEOUT: Duration = Duration::from_secs(5);

/// The most bytes of an error answer read to say why.
const MAX_ERROR_BODY: usize = 4096;

trait Io: AsyncRead + AsyncWrite + Send + Unpin {}
impl<T: AsyncRead + AsyncWrite + Send + Unpin> Io for T {}

/// GETs `path` from `target`; the answer's body streams on. Any status
/// but 200 is an error saying what the service said.
pub async fn get(
    target: &Target,
    config: &ClientConfig,
    path: &str,
) -> anyhow::Result<hyper::Response<Incoming>> {
    tokio::time::timeout(ANSWER_TIMEOUT, answer_head(target, config, path))
        .await
        .map_err(|_| {
            anyhow!(
                "{target} did not answer within {} s (is the service stopped?)",
                ANSWER_TIMEOUT.as_secs()
            )
        })?
}

/// [`get`], with no bound on how long it takes.
async fn answer_head(
    target: &Target,
    config: &ClientConfig,
    path: &str,
) -> anyhow::Result<hyper::Response<Incoming>> {
    let (io, host) = connect(target, config).await?;
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(io))
        .await
        .with_context(|| format!("cannot speak HTTP with {target}"))?;
    tokio::spawn(async move {
        let _ = connection.await;
    });
    let mut request = hyper::Request::get(path)
        .header(hyper::header::HOST, host)
        .header(hyper::header::USER_AGENT, "locktop");
    if let Some((user, password)) = &config.basic_auth
        && !target.is_local()
    {
        // Over a unix socket its permissions are the authentication: a
        // password is never sent there (the socket may be anyone's).
        if matches!(target, Target::Http { tls: false, .. }) {
            bail!(
                "--connect {target}: a password is never sent over plain HTTP; use https:// (serve --web-config with tls_server_config)"
            );
        }
        let token = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
        request = request.header(hyper::header::AUTHORIZATION, format!("Basic {token}"));
    }
    let request = request
        .body(http_body_util::Empty::<hyper::body::Bytes>::new())
        .context("request")?;
    let answer = sender
        .send_request(request)
        .await
        .with_context(|| format!("{target} did not answer"))?;
    let status = answer.status();
    if status == hyper::StatusCode::OK {
        return Ok(answer);
    }
    let said = said(answer).await;
    match status {
        hyper::StatusCode::UNAUTHORIZED => bail!(
            "{target} asks for credentials (401): give basic_auth in --connect-config, or {USERNAME_ENV} and {PASSWORD_ENV}"
        ),
        hyper::StatusCode::FORBIDDEN => bail!("{target} refused (403): {said}"),
        hyper::StatusCode::NOT_FOUND => {
            bail!("{target} has no {path} (404): is it a locktop serve of this version or newer?")
        }
        other => bail!("{target} answered {other}: {said}"),
    }
}

/// The first line of an error answer, made safe to print.
async fn said(answer: hyper::Response<Incoming>) -> String {
    let body = http_body_util::Limited::new(answer.into_body(), MAX_ERROR_BODY)
        .collect()
        .await
        .map(|collected| collected.to_bytes())
        .unwrap_or_default();
    let text = String::from_utf8_lossy(&body);
    crate::text::visible(text.lines().next().unwrap_or("").trim()).into_owned()
}

/// A connection to `target`, and the `Host` its requests name.
async fn connect(target: &Target, config: &ClientConfig) -> anyhow::Result<(Box<dyn Io>, String)> {
    match target {
        Target::Unix(path) => {
            let stream = tokio::net::UnixStream::connect(path).await.map_err(|error| {
                match error.kind() {
                    std::io::ErrorKind::PermissionDenied => anyhow!(
                        "cannot connect to {target}: permission denied — the socket's group may (e.g. `sudo usermod -aG locktop $USER`, then log in again)"
                    ),
                    std::io::ErrorKind::NotFound | std::io::ErrorKind::ConnectionRefused => anyhow!(
                        "cannot connect to {target}: no service there (is `locktop serve --socket` running?)"
                    ),
                    _ => anyhow!("cannot connect to {target}: {error}"),
                }
            })?;
            Ok((Box::new(stream), "localhost".to_string()))
        }
        Target::Http { tls, host, port } => {
            let bare = host.trim_start_matches('[').trim_end_matches(']');
            let stream = tokio::net::TcpStream::connect((bare, *port))
                .await
                .with_context(|| format!("cannot connect to {target}"))?;
            let _ = stream.set_nodelay(true);
            let host_header = format!("{host}:{port}");
            if !tls {
                return Ok((Box::new(stream), host_header));
            }
            let tls_config = config
                .tls
                .clone()
                .ok_or_else(|| anyhow!("{target}: no TLS configuration"))?;
            let name = config.server_name.as_deref().unwrap_or(bare).to_string();
            let server_name = rustls::pki_types::ServerName::try_from(name.clone())
                .map_err(|_| anyhow!("{target}: {name:?} is not a server name"))?;
            let stream = tokio_rustls::TlsConnector::from(tls_config)
                .connect(server_name, stream)
                .await
                .with_context(|| format!("cannot connect to {target}: TLS"))?;
            Ok((Box::new(stream), host_header))
        }
    }
}
