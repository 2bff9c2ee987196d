//! The one place where failures become HTTP responses.
//!
//! Every error body is the operation's success envelope with its payload emptied, plus
//! `"error":"<message>"` (docs/trident-contract.md#response-envelopes): `{"backend":"","error":…}`
//! for POST backend, `{"backend":null,"error":…}` for GET backend, `{"backends":[],"error":…}` for
//! a list, `{"error":…}` for a delete. 5xx bodies carry no internal detail, only a generic message
//! and the request id; the detail goes to the server log, inside the request's span.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value};

use crate::actors::{CoreError, RequestCtx};

use super::TRIDENT_VERSION;
use super::input::InputError;

/// The REST operations, one per route and method (docs/trident-contract.md#routes). The operation
/// decides the shape of an error body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Version,
    AddBackend,
    UpdateBackend,
    GetBackend,
    ListBackends,
    DeleteBackend,
    AddVolume,
    GetVolume,
    ListVolumes,
    DeleteVolume,
    AddStorageClass,
    GetStorageClass,
    ListStorageClasses,
    DeleteStorageClass,
    // storch's own routes
    ResizeVolume,
    CreateSnapshot,
    ListVolumeSnapshots,
    ListSnapshots,
    GetSnapshot,
    DeleteSnapshot,
    ExplainStorageClass,
    ListEvents,
    Livez,
    Readyz,
    Metrics,
    OpenApi,
    ListOrphans,
    ImportVolume,
    ReconcileBackend,
    SetBackendState,
    /// No route matched: an unknown path, or a known path with the wrong method.
    NoRoute,
    // The dashboard's reads (`/storch/v1/…`).
    UiOverview,
    UiVolumes,
    UiVolume,
    UiStorageClasses,
    UiVerifyLog,
}

impl Op {
    /// A short name for logs.
    pub fn as_str(self) -> &'static str {
        match self {
            Op::Version => "version",
            Op::AddBackend => "add_backend",
            Op::UpdateBackend => "update_backend",
            Op::GetBackend => "get_backend",
            Op::ListBackends => "list_backends",
            Op::DeleteBackend => "delete_backend",
            Op::AddVolume => "add_volume",
            Op::GetVolume => "get_volume",
            Op::ListVolumes => "list_volumes",
            Op::DeleteVolume => "delete_volume",
            Op::AddStorageClass => "add_storage_class",
            Op::GetStorageClass => "get_storage_class",
            Op::ListStorageClasses => "list_storage_classes",
            Op::DeleteStorageClass => "delete_storage_class",
            Op::ResizeVolume => "resize_volume",
            Op::CreateSnapshot => "create_snapshot",
            Op::ListVolumeSnapshots => "list_volume_snapshots",
            Op::ListSnapshots => "list_snapshots",
            Op::GetSnapshot => "get_snapshot",
            Op::DeleteSnapshot => "delete_snapshot",
            Op::ExplainStorageClass => "explain_storage_class",
            Op::ListEvents => "list_events",
            Op::Livez => "livez",
            Op::Readyz => "readyz",
            Op::Metrics => "metrics",
            Op::OpenApi => "openapi",
            Op::ListOrphans => "list_orphans",
            Op::ImportVolume => "import_volume",
            Op::ReconcileBackend => "reconcile_backend",
            Op::SetBackendState => "set_backend_state",
            Op::NoRoute => "no_route",
            Op::UiOverview => "ui_overview",
            Op::UiVolumes => "ui_volumes",
            Op::UiVolume => "ui_volume",
            Op::UiStorageClasses => "ui_storage_classes",
            Op::UiVerifyLog => "ui_verify_log",
        }
    }

    /// The operation a request is for, from its method and path, the same way the router
    /// decides (used for log fields and for requests that fail before a handler runs).
    pub fn classify(method: &axum::http::Method, path: &str) -> Op {
        use axum::http::Method;
        let segments: Vec<&str> = path.strip_prefix('/').unwrap_or(path).split('/').collect();
        let (get, post, delete) = (
            method == Method::GET || method == Method::HEAD,
            method == Method::POST,
            method == Method::DELETE,
        );
        match segments.as_slice() {
            ["trident", "version"] | ["trident", "v1", "version"] if get => Op::Version,
            ["trident", "v1", "backend"] if get => Op::ListBackends,
            ["trident", "v1", "backend"] if post => Op::AddBackend,
            ["trident", "v1", "backend", name] if !name.is_empty() && get => Op::GetBackend,
            ["trident", "v1", "backend", name] if !name.is_empty() && post => Op::UpdateBackend,
            ["trident", "v1", "backend", name] if !name.is_empty() && delete => Op::DeleteBackend,
            ["trident", "v1", "volume"] if get => Op::ListVolumes,
            ["trident", "v1", "volume"] if post => Op::AddVolume,
            ["trident", "v1", "volume", name] if !name.is_empty() && get => Op::GetVolume,
            ["trident", "v1", "volume", name] if !name.is_empty() && delete => Op::DeleteVolume,
            ["trident", "v1", "storageclass"] if get => Op::ListStorageClasses,
            ["trident", "v1", "storageclass"] if post => Op::AddStorageClass,
            ["trident", "v1", "storageclass", name] if !name.is_empty() && get => {
                Op::GetStorageClass
            }
            ["trident", "v1", "storageclass", name] if !name.is_empty() && delete => {
                Op::DeleteStorageClass
            }
            ["trident", "v1", "storageclass", name, "explain"] if !name.is_empty() && get => {
                Op::ExplainStorageClass
            }
            ["trident", "v1", "volume", name, "resize"] if !name.is_empty() && post => {
                Op::ResizeVolume
            }
            ["trident", "v1", "volume", name, "snapshot"] if !name.is_empty() && get => {
                Op::ListVolumeSnapshots
            }
            ["trident", "v1", "volume", name, "snapshot"] if !name.is_empty() && post => {
                Op::CreateSnapshot
            }
            ["trident", "v1", "volume", name, "snapshot", snap]
                if !name.is_empty() && !snap.is_empty() && get =>
            {
                Op::GetSnapshot
            }
            ["trident", "v1", "volume", name, "snapshot", snap]
                if !name.is_empty() && !snap.is_empty() && delete =>
            {
                Op::DeleteSnapshot
            }
            ["trident", "v1", "snapshot"] if get => Op::ListSnapshots,
            ["trident", "v1", "events"] if get => Op::ListEvents,
            ["trident", "v1", "orphan"] if get => Op::ListOrphans,
            ["trident", "v1", "volume", "import"] if post => Op::ImportVolume,
            ["trident", "v1", "backend", name, "reconcile"] if !name.is_empty() && post => {
                Op::ReconcileBackend
            }
            ["trident", "v1", "backend", name, "state"] if !name.is_empty() && post => {
                Op::SetBackendState
            }
            ["livez"] if get => Op::Livez,
            ["readyz"] if get => Op::Readyz,
            ["metrics"] if get => Op::Metrics,
            ["openapi.json"] if get => Op::OpenApi,
            ["storch", "v1", "overview"] if get => Op::UiOverview,
            ["storch", "v1", "volumes"] if get => Op::UiVolumes,
            ["storch", "v1", "volumes", name] if !name.is_empty() && get => Op::UiVolume,
            ["storch", "v1", "storageclasses"] if get => Op::UiStorageClasses,
            ["storch", "v1", "log", "verify"] if get => Op::UiVerifyLog,
            _ => Op::NoRoute,
        }
    }

    /// Creates answer a core `NotFound` (a missing storage class or clone source) with 400, as
    /// Trident does: the resource the URL names is there, the request is what is wrong.
    fn is_create(self) -> bool {
        matches!(self, Op::AddBackend | Op::AddVolume | Op::AddStorageClass)
    }

    /// The error body: this operation's envelope with an empty payload, plus `error`.
    pub fn error_body(self, message: &str) -> Value {
        let mut body = Map::new();
        let empty_payload = match self {
            Op::Version => Some(("version", Value::from(TRIDENT_VERSION))),
            Op::AddBackend | Op::UpdateBackend | Op::AddVolume => {
                Some(("backend", Value::from("")))
            }
            Op::AddStorageClass => Some(("storageClass", Value::from(""))),
            Op::GetBackend | Op::SetBackendState => Some(("backend", Value::Null)),
            Op::GetVolume | Op::ResizeVolume | Op::ImportVolume => Some(("volume", Value::Null)),
            Op::ListOrphans => Some(("orphans", Value::Array(Vec::new()))),
            Op::ReconcileBackend => Some(("reconcile", Value::Null)),
            Op::CreateSnapshot | Op::GetSnapshot => Some(("snapshot", Value::Null)),
            Op::ListVolumeSnapshots | Op::ListSnapshots => {
                Some(("snapshots", Value::Array(Vec::new())))
            }
            Op::ExplainStorageClass => Some(("explanation", Value::Null)),
            Op::ListEvents => Some(("events", Value::Array(Vec::new()))),
            Op::GetStorageClass => Some(("storageClass", Value::Null)),
            Op::ListBackends => Some(("backends", Value::Array(Vec::new()))),
            Op::ListVolumes => Some(("volumes", Value::Array(Vec::new()))),
            Op::ListStorageClasses => Some(("storageClasses", Value::Array(Vec::new()))),
            Op::UiOverview => Some(("overview", Value::Null)),
            Op::UiVolumes => Some(("volumes", Value::Array(Vec::new()))),
            Op::UiVolume => Some(("volume", Value::Null)),
            Op::UiStorageClasses => Some(("storageClasses", Value::Array(Vec::new()))),
            Op::UiVerifyLog => Some(("verification", Value::Null)),
            Op::DeleteBackend
            | Op::DeleteVolume
            | Op::DeleteStorageClass
            | Op::DeleteSnapshot
            | Op::Livez
            | Op::Readyz
            | Op::Metrics
            | Op::OpenApi
            | Op::NoRoute => None,
        };
        if let Some((key, value)) = empty_payload {
            body.insert(key.to_string(), value);
        }
        body.insert("error".to_string(), Value::from(message));
        Value::Object(body)
    }
}

/// Why a request failed. Each variant documents its status code; [`ApiError::status`] and
/// [`ApiError::public_message`] are the only mapping.
#[derive(Debug)]
pub enum ErrorKind {
    /// Bad input caught by the handler before anything reached the core: malformed JSON or
    /// YAML, missing or bad fields, bad names in the path. **400.**
    Input(InputError),
    /// The body is larger than [`super::MAX_BODY_BYTES`]; nothing past the cap was read.
    /// **413** (Trident silently truncated at 10 KiB).
    BodyTooLarge,
    /// The client did not send its body within [`super::BODY_READ_TIMEOUT`]. **408.**
    BodyTimeout,
    /// The connection failed while the body was read. **400.**
    BodyRead(String),
    /// The body's `Content-Type` is not one the route reads (JSON; YAML too for backend
    /// configs); nothing was read. **415.** Holds the client's type, quoted.
    UnsupportedMediaType {
        given: String,
        accepted: &'static str,
    },
    /// No route has this path. **404**, JSON (Trident: a `text/plain` 404).
    UnknownPath,
    /// The path is known but not with this method. **405** with an `Allow` header (set by the
    /// router), JSON (Trident: a `text/plain` 404). Holds the method.
    MethodNotAllowed(String),
    /// A bearer token is configured and the request has none, or a wrong one. **401** with
    /// `WWW-Authenticate: Bearer`.
    Unauthorized,
    /// The handler panicked: a bug. **500**, generic message.
    Panic,
    /// Serialising the response failed: a bug. **500**, generic message.
    Encode(String),
    /// A core error:
    /// - `NotReady` → **503** with `Retry-After`, the core's fixed "initializing" message;
    /// - `Standby` → **503** with `Retry-After`, naming the leader (commands on a standby);
    /// - `Starting` → **503** with `Retry-After`, naming the backends still initialising;
    /// - `BootstrapFailed` → **500**, generic message (the cause is logged);
    /// - `NotFound` → **404**, except for creates (POST backend, volume, storage class),
    ///   where the missing thing is a referenced object: **400** as Trident;
    /// - `AlreadyExists` → **409** (Trident: 400), the core's message;
    /// - `Invalid`, `Failed` → **400**, the core's message;
    /// - `Unavailable` → **503** with `Retry-After`, generic message (the cause is logged);
    /// - `LogUnavailable` → **503** with `Retry-After`, the core's message (why the log takes
    ///   no writes, without paths);
    /// - `Internal` → **500**, generic message (the cause is logged).
    Core(CoreError),
}

/// A failed request: what failed, for which operation and request.
#[derive(Debug)]
pub struct ApiError {
    op: Op,
    request_id: String,
    kind: ErrorKind,
}

/// Seconds a client should wait before retrying a 503.
const RETRY_AFTER_SECS: &str = "1";

impl ApiError {
    pub fn new(op: Op, ctx: &RequestCtx, kind: ErrorKind) -> ApiError {
        ApiError {
            op,
            request_id: ctx.request_id.clone(),
            kind,
        }
    }

    pub fn kind(&self) -> &ErrorKind {
        &self.kind
    }

    pub fn status(&self) -> StatusCode {
        match &self.kind {
            ErrorKind::Input(_) | ErrorKind::BodyRead(_) => StatusCode::BAD_REQUEST,
            ErrorKind::BodyTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            ErrorKind::BodyTimeout => StatusCode::REQUEST_TIMEOUT,
            ErrorKind::UnsupportedMediaType { .. } => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            ErrorKind::UnknownPath => StatusCode::NOT_FOUND,
            ErrorKind::MethodNotAllowed(_) => StatusCode::METHOD_NOT_ALLOWED,
            ErrorKind::Unauthorized => StatusCode::UNAUTHORIZED,
            ErrorKind::Panic | ErrorKind::Encode(_) => StatusCode::INTERNAL_SERVER_ERROR,
            ErrorKind::Core(e) => match e {
                CoreError::NotReady
                | CoreError::Standby(_)
                | CoreError::Starting(_)
                | CoreError::Unavailable(_)
                | CoreError::LogUnavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
                CoreError::BootstrapFailed(_) | CoreError::Internal(_) => {
                    StatusCode::INTERNAL_SERVER_ERROR
                }
                CoreError::NotFound(_) if self.op.is_create() => StatusCode::BAD_REQUEST,
                CoreError::NotFound(_) => StatusCode::NOT_FOUND,
                CoreError::AlreadyExists(_) => StatusCode::CONFLICT,
                CoreError::Invalid(_) | CoreError::OutOfRange(_) | CoreError::Failed(_) => {
                    StatusCode::BAD_REQUEST
                }
            },
        }
    }

    /// The message the client sees. Never internal detail for 5xx.
    pub fn public_message(&self) -> String {
        let rid = &self.request_id;
        match &self.kind {
            ErrorKind::Input(e) => e.to_string(),
            ErrorKind::BodyTooLarge => format!(
                "request body is larger than the limit of {} bytes",
                super::MAX_BODY_BYTES
            ),
            ErrorKind::BodyTimeout => format!(
                "request body not received within {} seconds",
                super::BODY_READ_TIMEOUT.as_secs()
            ),
            ErrorKind::BodyRead(e) => format!("could not read request body: {e}"),
            ErrorKind::UnsupportedMediaType { given, accepted } => {
                format!("Content-Type {given} is not accepted here; send the body as {accepted}")
            }
            ErrorKind::UnknownPath => "no such API path".to_string(),
            ErrorKind::MethodNotAllowed(method) => {
                format!("method {method} is not allowed on this path; see the Allow header")
            }
            ErrorKind::Unauthorized => {
                "missing or invalid bearer token: send the header Authorization: Bearer <token>"
                    .to_string()
            }
            ErrorKind::Panic | ErrorKind::Encode(_) => internal_message(rid),
            ErrorKind::Core(e) => match e {
                CoreError::NotReady
                | CoreError::Standby(_)
                | CoreError::Starting(_)
                | CoreError::LogUnavailable(_) => e.to_string(),
                CoreError::BootstrapFailed(_) => {
                    format!("storch initialization failed; see the server log (request id {rid})")
                }
                CoreError::Unavailable(_) => format!(
                    "storch is temporarily unavailable, please try again later (request id {rid})"
                ),
                CoreError::Internal(_) => internal_message(rid),
                CoreError::NotFound(m)
                | CoreError::AlreadyExists(m)
                | CoreError::Invalid(m)
                | CoreError::OutOfRange(m)
                | CoreError::Failed(m) => m.clone(),
            },
        }
    }

    /// Logs the failure where it is handled (inside the request span, which carries the
    /// request id): server faults at `error`, unavailability at `warn`, client errors at `debug`.
    fn log(&self, status: StatusCode) {
        let op = self.op.as_str();
        match &self.kind {
            ErrorKind::Panic => tracing::error!(op, "handler panicked"),
            ErrorKind::Encode(detail) => {
                tracing::error!(op, error = %detail, "could not encode the response")
            }
            ErrorKind::Core(CoreError::Internal(detail)) => {
                tracing::error!(op, error = %detail, "internal error")
            }
            ErrorKind::Core(CoreError::BootstrapFailed(detail)) => {
                tracing::error!(op, error = %detail, "refused: initialization failed")
            }
            ErrorKind::Core(CoreError::Unavailable(detail)) => {
                tracing::warn!(op, error = %detail, "refused: core unavailable")
            }
            // The log says once why it takes no writes (and again when it takes them again),
            // not once per refused request.
            ErrorKind::Core(CoreError::LogUnavailable(why)) => {
                tracing::debug!(op, %why, "refused: the event log takes no writes")
            }
            ErrorKind::Core(CoreError::NotReady) => tracing::info!(op, "refused: not ready"),
            ErrorKind::Core(CoreError::Starting(why)) => {
                tracing::info!(op, %why, "refused for now: a backend is initialising")
            }
            ErrorKind::Core(CoreError::Standby(leader)) => {
                tracing::info!(op, %leader, "refused: this instance is a standby")
            }
            ErrorKind::Unauthorized => {
                tracing::info!(op, "refused: missing or invalid bearer token")
            }
            _ => tracing::debug!(
                op,
                status = status.as_u16(),
                error = %self.public_message(),
                "request rejected"
            ),
        }
    }
}

fn internal_message(request_id: &str) -> String {
    format!("internal error; see the server log (request id {request_id})")
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = self.status();
        self.log(status);
        let body = self.op.error_body(&self.public_message());
        let mut response = super::json_bytes(status, encode(&body));
        if status == StatusCode::SERVICE_UNAVAILABLE {
            response.headers_mut().insert(
                header::RETRY_AFTER,
                HeaderValue::from_static(RETRY_AFTER_SECS),
            );
        }
        if status == StatusCode::PAYLOAD_TOO_LARGE {
            // The rest of the body is never read, so the connection cannot be reused: say so,
            // or a keep-alive client sends its next request into a closing socket.
            response
                .headers_mut()
                .insert(header::CONNECTION, HeaderValue::from_static("close"));
        }
        if status == StatusCode::UNAUTHORIZED {
            response.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Bearer realm=\"storch\""),
            );
        }
        response
    }
}

/// Encodes a `serde_json::Value`, which cannot fail.
fn encode(body: &Value) -> Vec<u8> {
    serde_json::to_vec(body).unwrap_or_else(|_| b"{}".to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::Method;
    use serde_json::json;

    fn err(op: Op, kind: ErrorKind) -> ApiError {
        ApiError::new(op, &RequestCtx::new("rid-1"), kind)
    }

    #[test]
    fn error_envelopes_follow_the_operation() {
        assert_eq!(
            Op::AddBackend.error_body("x"),
            json!({"backend": "", "error": "x"})
        );
        assert_eq!(
            Op::UpdateBackend.error_body("x"),
            json!({"backend": "", "error": "x"})
        );
        assert_eq!(
            Op::GetBackend.error_body("x"),
            json!({"backend": null, "error": "x"})
        );
        assert_eq!(
            Op::ListBackends.error_body("x"),
            json!({"backends": [], "error": "x"})
        );
        assert_eq!(Op::DeleteBackend.error_body("x"), json!({"error": "x"}));
        assert_eq!(
            Op::AddVolume.error_body("x"),
            json!({"backend": "", "error": "x"})
        );
        assert_eq!(
            Op::GetVolume.error_body("x"),
            json!({"volume": null, "error": "x"})
        );
        assert_eq!(
            Op::ListVolumes.error_body("x"),
            json!({"volumes": [], "error": "x"})
        );
        assert_eq!(Op::DeleteVolume.error_body("x"), json!({"error": "x"}));
        assert_eq!(
            Op::AddStorageClass.error_body("x"),
            json!({"storageClass": "", "error": "x"})
        );
        assert_eq!(
            Op::GetStorageClass.error_body("x"),
            json!({"storageClass": null, "error": "x"})
        );
        assert_eq!(
            Op::ListStorageClasses.error_body("x"),
            json!({"storageClasses": [], "error": "x"})
        );
        assert_eq!(
            Op::DeleteStorageClass.error_body("x"),
            json!({"error": "x"})
        );
        assert_eq!(
            Op::Version.error_body("x"),
            json!({"version": "18.07.0", "error": "x"})
        );
        assert_eq!(Op::NoRoute.error_body("x"), json!({"error": "x"}));
        assert_eq!(
            Op::ResizeVolume.error_body("x"),
            json!({"volume": null, "error": "x"})
        );
        for op in [Op::CreateSnapshot, Op::GetSnapshot] {
            assert_eq!(op.error_body("x"), json!({"snapshot": null, "error": "x"}));
        }
        for op in [Op::ListSnapshots, Op::ListVolumeSnapshots] {
            assert_eq!(op.error_body("x"), json!({"snapshots": [], "error": "x"}));
        }
        assert_eq!(
            Op::ExplainStorageClass.error_body("x"),
            json!({"explanation": null, "error": "x"})
        );
        assert_eq!(
            Op::ListEvents.error_body("x"),
            json!({"events": [], "error": "x"})
        );
        for op in [
            Op::DeleteSnapshot,
            Op::Livez,
            Op::Readyz,
            Op::Metrics,
            Op::OpenApi,
        ] {
            assert_eq!(op.error_body("x"), json!({"error": "x"}));
        }
    }

    #[test]
    fn core_errors_map_to_status_codes() {
        use CoreError::*;
        let cases = [
            (Op::GetBackend, NotReady, 503),
            (Op::GetBackend, BootstrapFailed("disk".into()), 500),
            (
                Op::GetBackend,
                NotFound("backend b was not found".into()),
                404,
            ),
            (Op::DeleteVolume, NotFound("volume v not found".into()), 404),
            (
                Op::UpdateBackend,
                NotFound("backend b was not found".into()),
                404,
            ),
            (
                Op::AddVolume,
                NotFound("unknown storage class: gold".into()),
                400,
            ),
            (Op::AddStorageClass, NotFound("x".into()), 400),
            (Op::AddBackend, NotFound("x".into()), 400),
            (
                Op::AddVolume,
                AlreadyExists("volume v already exists".into()),
                409,
            ),
            (Op::AddVolume, Invalid("size: bad".into()), 400),
            (Op::AddVolume, Failed("no pool".into()), 400),
            (Op::AddVolume, Unavailable("log refuses writes".into()), 503),
            (Op::ListVolumes, Internal("actor gone".into()), 500),
        ];
        for (op, e, status) in cases {
            let api = err(op, ErrorKind::Core(e.clone()));
            assert_eq!(api.status().as_u16(), status, "{op:?} {e:?}");
        }
    }

    #[test]
    fn server_errors_carry_no_detail() {
        for e in [
            CoreError::Internal("secret-detail".into()),
            CoreError::BootstrapFailed("secret-detail".into()),
            CoreError::Unavailable("secret-detail".into()),
        ] {
            let msg = err(Op::AddBackend, ErrorKind::Core(e)).public_message();
            assert!(!msg.contains("secret-detail"), "{msg}");
            assert!(msg.contains("rid-1"), "{msg}");
        }
        for kind in [ErrorKind::Panic, ErrorKind::Encode("secret-detail".into())] {
            let msg = err(Op::GetVolume, kind).public_message();
            assert!(!msg.contains("secret-detail"), "{msg}");
            assert!(msg.contains("rid-1"), "{msg}");
        }
    }

    #[test]
    fn client_errors_keep_the_core_message() {
        let msg = err(
            Op::GetBackend,
            ErrorKind::Core(CoreError::NotFound("backend b was not found".into())),
        )
        .public_message();
        assert_eq!(msg, "backend b was not found");
        let msg = err(Op::GetBackend, ErrorKind::Core(CoreError::NotReady)).public_message();
        assert_eq!(msg, "storch is initializing, please try again later");
    }

    #[test]
    fn other_kinds_map_to_status_codes() {
        let cases = [
            (ErrorKind::Input(InputError::VolumeMandatory), 400),
            (ErrorKind::BodyTooLarge, 413),
            (ErrorKind::BodyTimeout, 408),
            (ErrorKind::BodyRead("reset".into()), 400),
            (ErrorKind::UnknownPath, 404),
            (ErrorKind::MethodNotAllowed("PUT".into()), 405),
            (ErrorKind::Unauthorized, 401),
            (ErrorKind::Panic, 500),
        ];
        for (kind, status) in cases {
            assert_eq!(err(Op::AddVolume, kind).status().as_u16(), status);
        }
    }

    #[test]
    fn classify_matches_the_routes() {
        let cases = [
            (Method::GET, "/trident/version", Op::Version),
            (Method::GET, "/trident/v1/version", Op::Version),
            (Method::HEAD, "/trident/v1/version", Op::Version),
            (Method::POST, "/trident/v1/backend", Op::AddBackend),
            (Method::GET, "/trident/v1/backend", Op::ListBackends),
            (Method::POST, "/trident/v1/backend/b", Op::UpdateBackend),
            (Method::GET, "/trident/v1/backend/b", Op::GetBackend),
            (Method::DELETE, "/trident/v1/backend/b", Op::DeleteBackend),
            (Method::POST, "/trident/v1/volume", Op::AddVolume),
            (Method::GET, "/trident/v1/volume", Op::ListVolumes),
            (Method::GET, "/trident/v1/volume/v", Op::GetVolume),
            (Method::DELETE, "/trident/v1/volume/v", Op::DeleteVolume),
            (
                Method::POST,
                "/trident/v1/storageclass",
                Op::AddStorageClass,
            ),
            (
                Method::GET,
                "/trident/v1/storageclass",
                Op::ListStorageClasses,
            ),
            (
                Method::GET,
                "/trident/v1/storageclass/s",
                Op::GetStorageClass,
            ),
            (
                Method::DELETE,
                "/trident/v1/storageclass/s",
                Op::DeleteStorageClass,
            ),
            (
                Method::POST,
                "/trident/v1/volume/v/snapshot",
                Op::CreateSnapshot,
            ),
            (
                Method::DELETE,
                "/trident/v1/volume/v/snapshot/s",
                Op::DeleteSnapshot,
            ),
            (Method::GET, "/trident/v1/snapshot", Op::ListSnapshots),
            (Method::GET, "/trident/v1/events", Op::ListEvents),
            (Method::GET, "/livez", Op::Livez),
            (
                Method::POST,
                "/trident/v1/volume/v/resize",
                Op::ResizeVolume,
            ),
            (Method::GET, "/trident/v1/volume/v/resize", Op::NoRoute),
            (Method::GET, "/trident/v1/volume//snapshot", Op::NoRoute),
            (Method::POST, "/trident/v1/snapshot", Op::NoRoute),
            (Method::PUT, "/trident/v1/volume/v", Op::NoRoute),
            (Method::POST, "/trident/v1/volume/v", Op::NoRoute),
            (Method::DELETE, "/trident/v1/volume", Op::NoRoute),
            (Method::GET, "/trident/v1/volume/", Op::NoRoute),
            (Method::GET, "/trident/v1/volume/a/b", Op::NoRoute),
            (Method::GET, "/", Op::NoRoute),
            (Method::GET, "", Op::NoRoute),
        ];
        for (method, path, op) in cases {
            assert_eq!(Op::classify(&method, path), op, "{method} {path}");
        }
    }
}
