//! The accept loop: one task per connection (TLS handshake under a deadline, then HTTP/1.1
//! with a header-read timeout), and a graceful stop: stop accepting, end event streams, let
//! open requests finish within the grace period, then cut what is left.

use std::future::Future;
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::{GracefulShutdown, Watcher};
use hyper_util::service::TowerToHyperService;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinSet;

use super::ServeOptions;

/// Pause after an accept error that is not about one connection (e.g. out of file
/// descriptors), so the loop does not spin.
const ACCEPT_ERROR_PAUSE: Duration = Duration::from_millis(100);

pub(crate) async fn run(
    listener: TcpListener,
    app: Router,
    stop_streams: watch::Sender<bool>,
    shutdown: impl Future<Output = ()> + Send + 'static,
    options: &ServeOptions,
) -> std::io::Result<()> {
    let graceful = GracefulShutdown::new();
    let mut connections = JoinSet::new();
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let accepted = tokio::select! {
            () = &mut shutdown => break,
            Some(_) = connections.join_next(), if !connections.is_empty() => continue,
            accepted = listener.accept() => accepted,
        };
        let (tcp, _peer) = match accepted {
            Ok(conn) => conn,
            Err(e) if is_per_connection(&e) => continue,
            Err(e) => {
                tracing::warn!(error = %e, "accepting a connection failed");
                tokio::time::sleep(ACCEPT_ERROR_PAUSE).await;
                continue;
            }
        };
        connections.spawn(connection(
            tcp,
            app.clone(),
            graceful.watcher(),
            options.clone(),
        ));
    }
    drop(listener);
    tracing::info!("REST server stopping: no new connections, finishing open requests");
    let _ = stop_streams.send(true);
    if tokio::time::timeout(options.grace, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!(
            grace_secs = options.grace.as_secs(),
            "connections still open after the shutdown grace period; closing them"
        );
    }
    connections.shutdown().await;
    Ok(())
}

/// Accept errors that concern only the connection being accepted.
fn is_per_connection(e: &std::io::Error) -> bool {
    use std::io::ErrorKind::*;
    matches!(
        e.kind(),
        ConnectionRefused | ConnectionAborted | ConnectionReset
    )
}

async fn connection(tcp: TcpStream, app: Router, watcher: Watcher, options: ServeOptions) {
    let _ = tcp.set_nodelay(true);
    match &options.tls {
        None => http(TokioIo::new(tcp), app, watcher, &options).await,
        Some(acceptor) => {
            match tokio::time::timeout(options.tls_handshake_timeout, acceptor.accept(tcp)).await {
                Ok(Ok(stream)) => http(TokioIo::new(stream), app, watcher, &options).await,
                Ok(Err(e)) => tracing::debug!(error = %e, "TLS handshake failed"),
                Err(_) => tracing::debug!("TLS handshake timed out"),
            }
        }
    }
}

async fn http<I>(io: I, app: Router, watcher: Watcher, options: &ServeOptions)
where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(options.header_read_timeout);
    let conn = builder.serve_connection(io, TowerToHyperService::new(app));
    if let Err(e) = watcher.watch(conn).await {
        tracing::debug!(error = %e, "connection ended with an error");
    }
}
