//! The HTTP server under `serve`'s endpoints: one accept loop that holds
//! up against clients that misbehave.
//!
//! Invariants: at most [`MAX_CONNECTIONS`] connections are served at
//! once (one over that is closed at once, so memory stays bounded however
//! many clients come); a client has [`HEADER_READ_TIMEOUT`] to send a
//! request's headers, at most [`MAX_HEADER_BYTES`] of them in at most
//! [`MAX_HEADERS`] fields (over that: `431`, or the connection closed),
//! so a slow or endless client cannot hold a connection, nor a scrape,
//! hostage — with TLS, the handshake has the same time; a handler's
//! panic ends its own connection only (hyper runs each on a task of its
//! own); at shutdown, connections get [`super::SHUTDOWN_GRACE`] to
//! finish.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

/// How many connections are served at once (open `/events` streams,
/// capped apart at 64, count among them).
pub const MAX_CONNECTIONS: usize = 512;

/// How long a client may take to send a request's headers.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(5);

/// The most bytes a request's line and headers may take.
pub const MAX_HEADER_BYTES: usize = 16 * 1024;

/// The most header fields a request may have.
pub const MAX_HEADERS: usize = 64;

/// Serves `router` on `listener` (over TLS with `tls`) until `stop`
/// resolves, then gives open connections `grace` to end (after `closing`
/// ran: it ends the streams).
pub async fn serve(
    listener: TcpListener,
    router: Router,
    tls: Option<Arc<rustls::ServerConfig>>,
    stop: impl Future<Output = ()>,
    closing: impl FnOnce(),
    grace: Duration,
) {
    let tls = tls.map(tokio_rustls::TlsAcceptor::from);
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(HEADER_READ_TIMEOUT)
        .max_header_size(MAX_HEADER_BYTES)
        .max_headers(MAX_HEADERS)
        .keep_alive(true);
    let service = TowerToHyperService::new(router);
    let permits = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let graceful = GracefulShutdown::new();
    let mut stop = std::pin::pin!(stop);
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let stream = match accepted {
                    Ok((stream, _)) => stream,
                    Err(_) => {
                        // Out of fds, or a connection reset before it was
                        // taken: wait a moment rather than spin.
                        tokio::time::sleep(Duration::from_millis(10)).await;
                        continue;
                    }
                };
                let Ok(permit) = permits.clone().try_acquire_owned() else {
                    // Over the cap: closed at once, nothing kept for it.
                    drop(stream);
                    continue;
                };
                match tls.clone() {
                    None => {
                        let connection = http.serve_connection(TokioIo::new(stream), service.clone());
                        let connection = graceful.watch(connection);
                        tokio::spawn(async move {
                            let _ = connection.await;
                            drop(permit);
                        });
                    }
                    Some(acceptor) => {
                        let (http, service) = (http.clone(), service.clone());
                        let watcher = graceful.watcher();
                        tokio::spawn(async move {
                            // The handshake has the headers' time: a client
                            // that stalls in it is dropped like a slow one.
                            let handshake = tokio::time::timeout(HEADER_READ_TIMEOUT, acceptor.accept(stream));
                            if let Ok(Ok(stream)) = handshake.await {
                                let connection = http.serve_connection(TokioIo::new(stream), service);
                                let _ = watcher.watch(connection).await;
                            }
                            drop(permit);
                        });
                    }
                }
            }
            () = &mut stop => break,
        }
    }
    drop(listener);
    closing();
    let _ = tokio::time::timeout(grace, graceful.shutdown()).await;
}
