//! `serve --socket PATH`: the same endpoints on a unix socket, for the
//! clients on this host (`locktop --connect unix:PATH`, and plain
//! `locktop` where the service's socket serves its state dir).
//!
//! Invariants: who may connect is what the socket file's permissions say
//! ([`SOCKET_MODE`]: owner and group read and write, no one else; the
//! group is the process's, `locktop` under the unit), so every request on
//! it is answered as an authenticated one — no TLS, no password; a path
//! where a server still answers is refused (one line, exit 2), a stale
//! socket file left by a server that died is replaced, and any other
//! file is never touched; at most [`MAX_CONNECTIONS`] connections at
//! once (a further one is closed at once), each given
//! [`HEADER_READ_TIMEOUT`] to send a request's headers; the socket file
//! is removed when serving stops.

use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use axum::Router;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::UnixListener;
use tokio::sync::Semaphore;

use crate::auth::Authenticated;

/// The socket file's mode: read and write for its owner and group.
pub const SOCKET_MODE: u32 = 0o660;

/// The most connections on the socket at once.
pub const MAX_CONNECTIONS: usize = 256;

/// How long a connection may take to send a request's headers.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(5);

/// A bound socket, removed when dropped.
pub struct BoundSocket {
    listener: UnixListener,
    path: PathBuf,
    /// Its inode: removed at the end only if the path is still it.
    inode: u64,
}

impl Drop for BoundSocket {
    fn drop(&mut self) {
        let still_ours = std::fs::symlink_metadata(&self.path)
            .is_ok_and(|meta| meta.file_type().is_socket() && meta.ino() == self.inode);
        if still_ours {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// Binds `path` with [`SOCKET_MODE`], replacing a stale socket file (one
/// that refuses connections); a live server there, a socket that cannot
/// be tried, or a file that is not a socket, is an error.
pub fn bind(path: &Path) -> anyhow::Result<BoundSocket> {
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_socket() => {
            // Stale only when nobody listens (a refused connection); a
            // socket this user may not even try is not ours to remove.
            match std::os::unix::net::UnixStream::connect(path) {
                Err(error) if error.kind() == std::io::ErrorKind::ConnectionRefused => {}
                Ok(_) => anyhow::bail!(
                    "--socket {}: another server answers there (stop it, or pick another path)",
                    path.display()
                ),
                Err(error) => anyhow::bail!(
                    "--socket {}: a socket is there and cannot be tried ({error}): not touched",
                    path.display()
                ),
            }
            std::fs::remove_file(path).with_context(|| {
                format!(
                    "--socket {}: cannot remove the stale socket",
                    path.display()
                )
            })?;
        }
        Ok(_) => anyhow::bail!(
            "--socket {}: exists and is not a socket (not touched)",
            path.display()
        ),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
        Err(error) => {
            return Err(error).with_context(|| format!("--socket {}", path.display()));
        }
    }
    // Made with its mode: no moment with the umask's, and no chmod that
    // a path swapped for a symlink could redirect.
    let listener = {
        // SAFETY: umask only swaps the process's file mode mask; serve
        // creates no other file while it is narrowed (before the engine
        // and the journal start).
        let before = unsafe { libc::umask(0o777 & !SOCKET_MODE) };
        let bound = UnixListener::bind(path);
        // SAFETY: as above.
        unsafe { libc::umask(before) };
        bound.with_context(|| format!("--socket {}: cannot listen there", path.display()))?
    };
    let inode = std::fs::symlink_metadata(path)
        .with_context(|| format!("--socket {}", path.display()))?
        .ino();
    Ok(BoundSocket {
        listener,
        path: path.to_path_buf(),
        inode,
    })
}

/// Serves `router` on `socket` until `stop` resolves, then gives open
/// connections `grace` to end.
pub async fn serve(
    socket: BoundSocket,
    router: Router,
    stop: impl std::future::Future<Output = ()>,
    grace: Duration,
) {
    let mut http = http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(HEADER_READ_TIMEOUT)
        .max_header_size(crate::listen::MAX_HEADER_BYTES)
        .max_headers(crate::listen::MAX_HEADERS)
        .keep_alive(true);
    let places = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let graceful = GracefulShutdown::new();
    let mut stop = std::pin::pin!(stop);
    loop {
        tokio::select! {
            accepted = socket.listener.accept() => {
                let Ok((stream, _)) = accepted else {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                };
                let Ok(place) = places.clone().try_acquire_owned() else {
                    drop(stream);
                    continue;
                };
                let router = TowerToHyperService::new(router.clone());
                let service = hyper::service::service_fn(move |mut request: hyper::Request<hyper::body::Incoming>| {
                    // The socket's permissions admitted it.
                    request.extensions_mut().insert(Authenticated);
                    request.extensions_mut().insert(crate::view_stream::Door::Socket);
                    hyper::service::Service::call(&router, request)
                });
                let connection = http.serve_connection(TokioIo::new(stream), service);
                let watched = graceful.watch(connection);
                tokio::spawn(async move {
                    let _ = watched.await;
                    drop(place);
                });
            }
            () = &mut stop => break,
        }
    }
    drop(socket);
    let _ = tokio::time::timeout(grace, graceful.shutdown()).await;
}
