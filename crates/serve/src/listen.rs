//! The HTTP server under `serve`'s endpoints: one accept loop that holds
//! up against clients that misbehave.
//!
//! Invariants: every connection holds a place ([`super::connections`]):
//! at most [`super::connections::MAX_CONNECTIONS`] at once, a newcomer over that pushing a
//! stranger out or closed at once, so memory stays bounded however many
//! clients come and strangers cannot keep an authenticated scraper out;
//! a connection is closed when its place says so (idle past its time —
//! [`super::connections::HEADER_READ_TIMEOUT`] for headers, the TLS
//! handshake included, unless it authenticated — or pushed out), so a
//! slow or endless client cannot hold a connection, nor a scrape,
//! hostage; a request's headers take at most [`MAX_HEADER_BYTES`] in at
//! most [`MAX_HEADERS`] fields (over that: `431`, or the connection
//! closed); each request carries its connection's [`Slot`], and
//! [`Authenticated`] when its client presented a certificate the client
//! CA verified (then, unless a password is asked for too, the connection
//! is admitted at the handshake); a handler's panic ends its own
//! connection only (each runs on a task of its own); at shutdown,
//! connections get [`super::SHUTDOWN_GRACE`] to finish.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, HttpBody};
use hyper::body::{Bytes, Frame, Incoming, SizeHint};
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::{GracefulShutdown, Watcher};
use hyper_util::service::TowerToHyperService;
use tokio::net::{TcpListener, TcpStream};

use super::auth::Authenticated;
use super::connections::{Connections, Origin, Place, Serving, Slot};

/// The most bytes a request's line and headers may take.
pub const MAX_HEADER_BYTES: usize = 16 * 1024;

/// The most header fields a request may have.
pub const MAX_HEADERS: usize = 64;

/// Who authenticates on this server.
#[derive(Debug, Clone, Copy)]
pub struct Admission {
    /// A password is asked of every request ([`super::auth`]): a client
    /// certificate alone does not admit a connection.
    pub password: bool,
}

/// Serves `router` on `listener` (over TLS with `tls`) until `stop`
/// resolves, then gives open connections `grace` to end (after `closing`
/// ran: it ends the streams).
pub async fn serve(
    listener: TcpListener,
    router: Router,
    tls: Option<Arc<rustls::ServerConfig>>,
    admission: Admission,
    stop: impl Future<Output = ()>,
    closing: impl FnOnce(),
    grace: Duration,
) {
    let tls = tls.map(tokio_rustls::TlsAcceptor::from);
    let mut http = http1::Builder::new();
    // Each connection's place times its headers ([`Slot::until_closed`]).
    http.timer(TokioTimer::new())
        .header_read_timeout(None)
        .max_header_size(MAX_HEADER_BYTES)
        .max_headers(MAX_HEADERS)
        .keep_alive(true);
    let connections = Connections::new();
    let graceful = GracefulShutdown::new();
    let mut stop = std::pin::pin!(stop);
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let (stream, peer) = match accepted {
                    Ok(accepted) => accepted,
                    Err(_) => {
                        // Out of fds, or a connection reset before it was
                        // taken: wait a moment rather than spin.
                        tokio::time::sleep(Duration::from_millis(10)).await;
                        continue;
                    }
                };
                let Some(place) = connections.enter(Origin::of(peer.ip())) else {
                    // No place for it: closed at once, nothing kept for it.
                    drop(stream);
                    continue;
                };
                let connection = Connection {
                    http: http.clone(),
                    router: router.clone(),
                    watcher: graceful.watcher(),
                    admission,
                };
                tokio::spawn(connection.run(stream, tls.clone(), place));
            }
            () = &mut stop => break,
        }
    }
    drop(listener);
    closing();
    let _ = tokio::time::timeout(grace, graceful.shutdown()).await;
}

/// What one connection's task needs.
struct Connection {
    http: http1::Builder,
    router: Router,
    watcher: Watcher,
    admission: Admission,
}

impl Connection {
    /// Serves the connection until it ends or its place says to close it.
    async fn run(self, stream: TcpStream, tls: Option<tokio_rustls::TlsAcceptor>, place: Place) {
        let slot = place.slot().clone();
        let work = async {
            let service = service(self.router, slot.clone());
            match tls {
                None => {
                    let connection = self.http.serve_connection(TokioIo::new(stream), service);
                    let _ = self.watcher.watch(connection).await;
                }
                Some(acceptor) => {
                    let Ok(stream) = acceptor.accept(stream).await else {
                        return;
                    };
                    // rustls verified it by the client CA, or failed.
                    if stream.get_ref().1.peer_certificates().is_some() {
                        slot.certify();
                        if !self.admission.password {
                            slot.admit();
                        }
                    }
                    let connection = self.http.serve_connection(TokioIo::new(stream), service);
                    let _ = self.watcher.watch(connection).await;
                }
            }
        };
        tokio::select! {
            () = work => {}
            () = slot.until_closed() => {}
        }
        drop(place);
    }
}

/// `router`, each request given the connection's `slot` (and
/// [`Authenticated`] when its certificate was verified), and counted as
/// being answered until its body is sent.
fn service(
    router: Router,
    slot: Arc<Slot>,
) -> impl hyper::service::Service<
    hyper::Request<Incoming>,
    Response = hyper::Response<Body>,
    Error = Infallible,
    Future = impl Future<Output = Result<hyper::Response<Body>, Infallible>> + Send,
> {
    let router = TowerToHyperService::new(router);
    hyper::service::service_fn(move |mut request: hyper::Request<Incoming>| {
        let serving = slot.serving();
        if slot.certified() {
            request.extensions_mut().insert(Authenticated);
        }
        request.extensions_mut().insert(slot.clone());
        let answer = hyper::service::Service::call(&router, request);
        async move {
            let response = answer.await?;
            Ok(response.map(|body| Body::new(Answering { body, serving })))
        }
    })
}

/// A response body that keeps its connection counted as being answered
/// until it is sent (or dropped).
struct Answering {
    body: Body,
    #[allow(dead_code)] // held for its drop
    serving: Serving,
}

impl HttpBody for Answering {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.get_mut().body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}
