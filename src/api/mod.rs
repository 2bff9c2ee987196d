//! The REST API: Trident 18.07's routes, envelopes and status codes (trident-compat §1), over
//! axum. Only this module imports axum.
//!
//! - [`router`] builds the app for a [`Core`]; [`serve`] runs it on a listener until a
//!   shutdown future resolves.
//! - `handlers/`: one file per resource; input parsing and validation are plain functions in
//!   `input`, wire shapes in [`dto`], and the mapping of every failure to a status code and
//!   an error envelope in [`error`].
//!
//! storch's deliberate deviations from Trident: a duplicate name is 409; a known path with
//! the wrong method is a JSON 405 with `Allow`; an unknown path is a JSON 404; a body over
//! [`MAX_BODY_BYTES`] is 413 (Trident truncates at 10 KiB); 5xx bodies carry only a generic
//! message and the request id; every response has an `X-Request-Id`.

mod body;
mod core_api;
pub mod dto;
pub mod error;
mod handlers;
pub mod input;
mod middleware;
mod redact;

use std::future::Future;
use std::time::Duration;

use axum::Router;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::Response;
use axum::routing::get;
use tokio::net::TcpListener;

use crate::actors::Core;

use core_api::CoreApi;
use handlers::{backend, storage_class, volume};

pub use middleware::REQUEST_ID_HEADER;

/// The Trident version this API speaks.
pub const TRIDENT_VERSION: &str = "18.07.0";

/// The largest request body accepted (bigger: 413, and nothing past the cap is read).
pub const MAX_BODY_BYTES: usize = 1024 * 1024;

/// How long a client may take to send its body (longer: 408).
pub const BODY_READ_TIMEOUT: Duration = Duration::from_secs(60);

/// After shutdown is signalled, how long open connections may take to finish their requests
/// before [`serve`] returns anyway.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(30);

/// Trident's exact content type (Go's `json.Encoder` output).
const CONTENT_TYPE_JSON: &str = "application/json; charset=UTF-8";

/// The app: every Trident 18.07 route for `core`, with JSON 404/405 fallbacks and per-request
/// tracking. Test it with `tower::ServiceExt::oneshot`.
pub fn router(core: Core) -> Router {
    app(core)
}

/// [`router`] over any [`CoreApi`] (tests use an in-memory fake).
pub(crate) fn app<C: CoreApi>(core: C) -> Router {
    Router::new()
        .route("/trident/version", get(handlers::version))
        .route("/trident/v1/version", get(handlers::version))
        .route(
            "/trident/v1/backend",
            get(backend::list::<C>).post(backend::add::<C>),
        )
        .route(
            "/trident/v1/backend/{backend}",
            get(backend::get::<C>)
                .post(backend::update::<C>)
                .delete(backend::delete::<C>),
        )
        .route(
            "/trident/v1/volume",
            get(volume::list::<C>).post(volume::add::<C>),
        )
        .route(
            "/trident/v1/volume/{volume}",
            get(volume::get::<C>).delete(volume::delete::<C>),
        )
        .route(
            "/trident/v1/storageclass",
            get(storage_class::list::<C>).post(storage_class::add::<C>),
        )
        .route(
            "/trident/v1/storageclass/{storageClass}",
            get(storage_class::get::<C>).delete(storage_class::delete::<C>),
        )
        .fallback(handlers::unknown_path)
        .method_not_allowed_fallback(handlers::wrong_method)
        .with_state(core)
        .layer(axum::middleware::from_fn(middleware::track))
}

/// Serves the API on `listener` until `shutdown` resolves, then stops accepting, lets
/// in-flight requests finish (at most [`SHUTDOWN_GRACE`]) and returns. The caller shuts the
/// core down afterwards.
pub async fn serve(
    listener: TcpListener,
    core: Core,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    serve_app(listener, app(core), shutdown, SHUTDOWN_GRACE).await
}

pub(crate) async fn serve_app(
    listener: TcpListener,
    app: Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
    grace: Duration,
) -> std::io::Result<()> {
    let (stopping_tx, stopping_rx) = tokio::sync::oneshot::channel::<()>();
    let signal = async move {
        shutdown.await;
        tracing::info!("REST server stopping: no new connections, finishing open requests");
        let _ = stopping_tx.send(());
    };
    let server = axum::serve(listener, app)
        .with_graceful_shutdown(signal)
        .into_future();
    let deadline = async move {
        match stopping_rx.await {
            Ok(()) => tokio::time::sleep(grace).await,
            Err(_) => std::future::pending().await,
        }
    };
    tokio::select! {
        result = server => result,
        () = deadline => {
            tracing::warn!(
                grace_secs = grace.as_secs(),
                "connections still open after the shutdown grace period; closing them"
            );
            Ok(())
        }
    }
}

/// A JSON response from encoded bytes: Trident's content type and trailing newline.
fn json_bytes(status: StatusCode, mut bytes: Vec<u8>) -> Response {
    bytes.push(b'\n');
    let mut response = Response::new(axum::body::Body::from(bytes));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(CONTENT_TYPE_JSON),
    );
    response
}

#[cfg(test)]
mod tests;
