//! The REST API: Trident 18.07's routes, envelopes and status codes
//! (docs/trident-contract.md#rest-api), plus storch's own routes (snapshots, resize, placement
//! explanations, events, health, metrics, the OpenAPI document), over axum. Only this module
//! imports axum.
//!
//! - [`router`] builds the app for a [`Core`]; [`serve`] / [`serve_with`] run it on a
//!   listener (plain HTTP or TLS, optionally behind a bearer token) until a shutdown future
//!   resolves.
//! - `routes`: the one table of routes; the router, the request classification and the
//!   OpenAPI completeness test are all checked against it.
//! - `handlers/`: one file per resource; input parsing and validation are plain functions in
//!   `input`, wire shapes in [`dto`], and the mapping of every failure to a status code and
//!   an error envelope in [`error`].
//! - `ui`: the read-only web dashboard at `/ui/` (embedded assets) and its read endpoints
//!   under `/storch/v1/`.
//! - `server`: the accept loop (TLS handshakes, header-read timeout, graceful shutdown);
//!   [`tls`] loads certificates; `auth` checks bearer tokens; [`prometheus`] is the Prometheus
//!   recorder and exposition; [`openapi`] the generated document.
//!
//! storch's deliberate deviations from Trident: a duplicate name is 409; a known path with
//! the wrong method is a JSON 405 with `Allow`; an unknown path is a JSON 404; a body over
//! [`MAX_BODY_BYTES`] is 413 (Trident truncates at 10 KiB); 5xx bodies carry only a generic
//! message and the request id; every response has an `X-Request-Id`.

pub mod auth;
mod body;
pub mod dto;
pub mod error;
mod handlers;
pub mod input;
mod middleware;
pub mod openapi;
pub mod prometheus;
mod redact;
mod routes;
mod server;
pub mod tls;
mod ui;

use std::future::Future;
use std::time::Duration;

use axum::Router;
use axum::extract::FromRef;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::Response;
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::actors::Core;

pub use auth::AuthToken;
pub use middleware::REQUEST_ID_HEADER;
pub use routes::route_list;

/// The Trident version this API speaks.
pub const TRIDENT_VERSION: &str = "18.07.0";

/// The largest request body accepted (bigger: 413, and nothing past the cap is read).
pub const MAX_BODY_BYTES: usize = 1024 * 1024;

/// How long a client may take to send its body (longer: 408).
pub const BODY_READ_TIMEOUT: Duration = Duration::from_secs(60);

/// After shutdown is signalled, how long open connections may take to finish their requests
/// before [`serve`] returns anyway.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(30);

/// How long a client may take to send a request's headers, counted from the first byte of
/// the request (or, on a kept-alive connection, from the end of the previous response).
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(15);

/// How long a client may take to complete a TLS handshake.
pub const TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Trident's exact content type (Go's `json.Encoder` output).
const CONTENT_TYPE_JSON: &str = "application/json; charset=UTF-8";

/// What the app needs besides the core.
#[derive(Debug, Clone, Default)]
pub struct RouterOptions {
    /// When set, every route except `/livez` and `/readyz` requires
    /// `Authorization: Bearer <token>` (401 otherwise).
    pub auth: Option<AuthToken>,
}

/// How [`serve_with`] listens.
#[derive(Clone)]
pub struct ServeOptions {
    pub router: RouterOptions,
    /// Serve HTTPS with this acceptor (see [`tls::acceptor`]); plain HTTP when `None`.
    pub tls: Option<tokio_rustls::TlsAcceptor>,
    /// How long open requests may finish after shutdown is signalled.
    pub grace: Duration,
    pub header_read_timeout: Duration,
    pub tls_handshake_timeout: Duration,
}

impl Default for ServeOptions {
    fn default() -> Self {
        ServeOptions {
            router: RouterOptions::default(),
            tls: None,
            grace: SHUTDOWN_GRACE,
            header_read_timeout: HEADER_READ_TIMEOUT,
            tls_handshake_timeout: TLS_HANDSHAKE_TIMEOUT,
        }
    }
}

impl std::fmt::Debug for ServeOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServeOptions")
            .field("router", &self.router)
            .field("tls", &self.tls.is_some())
            .field("grace", &self.grace)
            .field("header_read_timeout", &self.header_read_timeout)
            .field("tls_handshake_timeout", &self.tls_handshake_timeout)
            .finish()
    }
}

/// Tells long-lived responses (event follow streams) that the server is stopping, so that a
/// graceful shutdown never waits on them.
#[derive(Debug, Clone)]
pub(crate) struct Stopping(watch::Receiver<bool>);

impl Stopping {
    /// A signal and the sender that fires it.
    fn channel() -> (watch::Sender<bool>, Stopping) {
        let (tx, rx) = watch::channel(false);
        (tx, Stopping(rx))
    }

    /// A signal that never fires (the app outside [`serve`], e.g. in tests).
    fn never() -> Stopping {
        Stopping::channel().1
    }

    /// Resolves once the server is stopping (never, if the sender is gone without firing).
    pub(crate) async fn wait(&mut self) {
        loop {
            if *self.0.borrow_and_update() {
                return;
            }
            if self.0.changed().await.is_err() {
                std::future::pending::<()>().await;
            }
        }
    }
}

/// The state every handler can reach: the core (as `State<Core>`), and the stop signal.
#[derive(Clone)]
pub(crate) struct AppState {
    pub core: Core,
    pub stopping: Stopping,
}

impl FromRef<AppState> for Core {
    fn from_ref(state: &AppState) -> Core {
        state.core.clone()
    }
}

impl FromRef<AppState> for Stopping {
    fn from_ref(state: &AppState) -> Stopping {
        state.stopping.clone()
    }
}

/// The app: every route for `core`, with JSON 404/405 fallbacks and per-request tracking, no
/// authentication. Test it with `tower::ServiceExt::oneshot`.
pub fn router(core: Core) -> Router {
    router_with(core, &RouterOptions::default())
}

/// [`router`] with options (a bearer token).
pub fn router_with(core: Core, options: &RouterOptions) -> Router {
    app(core, options, Stopping::never())
}

pub(crate) fn app(core: Core, options: &RouterOptions, stopping: Stopping) -> Router {
    prometheus::install();
    let state = AppState { core, stopping };
    let mut router = Router::new();
    for route in routes::table() {
        router = router.route(route.path, route.endpoint);
    }
    router
        .merge(ui::routes())
        .fallback(handlers::unknown_path)
        .method_not_allowed_fallback(handlers::wrong_method)
        .with_state(state)
        .layer(axum::middleware::from_fn_with_state(
            options.auth.clone(),
            auth::require,
        ))
        .layer(axum::middleware::from_fn(middleware::track))
}

/// Serves the API over plain HTTP, without a token, on `listener` until `shutdown` resolves,
/// then stops accepting, ends event streams, lets in-flight requests finish (at most
/// [`SHUTDOWN_GRACE`]) and returns. The caller shuts the core down afterwards.
pub async fn serve(
    listener: TcpListener,
    core: Core,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    serve_with(listener, core, ServeOptions::default(), shutdown).await
}

/// [`serve`] with TLS, a bearer token and timeouts from `options`.
pub async fn serve_with(
    listener: TcpListener,
    core: Core,
    options: ServeOptions,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let (stop_tx, stopping) = Stopping::channel();
    let app = app(core, &options.router, stopping);
    server::run(listener, app, stop_tx, shutdown, &options).await
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
