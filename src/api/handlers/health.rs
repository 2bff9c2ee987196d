//! Probes, metrics and the API description: `/livez`, `/readyz`, `/metrics`,
//! `/openapi.json`. None of them touches a backend, and none carries a secret.

use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::Response;

use super::{Call, ReqCtx};
use crate::actors::Core;
use crate::api::dto::StatusResponse;
use crate::api::error::{ApiError, Op};

/// `GET /livez`: 200 `{"status":"ok"}` whenever the process serves HTTP. Never needs a token.
#[utoipa::path(
    get,
    path = "/livez",
    tag = "operations",
    security(()),
    responses((status = 200, description = "The process is alive", body = StatusResponse)),
)]
pub(crate) async fn livez(ctx: ReqCtx) -> Result<Response, ApiError> {
    Call::new(Op::Livez, ctx).reply(
        StatusCode::OK,
        &StatusResponse {
            status: "ok",
            reasons: Vec::new(),
        },
    )
}

/// `GET /readyz`: 200 `{"status":"ok"}` when the log is open, replayed and takes writes;
/// otherwise 503 `{"status":"unavailable","reasons":[…]}`. Never needs a token.
#[utoipa::path(
    get,
    path = "/readyz",
    tag = "operations",
    security(()),
    responses(
        (status = 200, description = "Ready", body = StatusResponse),
        (status = 503, description = "Not ready, with the reasons", body = StatusResponse),
    ),
)]
pub(crate) async fn readyz(State(core): State<Core>, ctx: ReqCtx) -> Result<Response, ApiError> {
    let call = Call::new(Op::Readyz, ctx);
    let health = core.health();
    if health.ready() {
        return call.reply(
            StatusCode::OK,
            &StatusResponse {
                status: "ok",
                reasons: Vec::new(),
            },
        );
    }
    let mut reasons = Vec::new();
    let mut status = "unavailable";
    if let Some(leader) = &health.standby_of {
        status = "standby";
        reasons.push(format!(
            "this instance is an etcd standby (reads only); the leader is {leader}"
        ));
    }
    if let Some(why) = &health.degraded {
        reasons.push(why.clone());
    }
    if !health.replay_done && health.degraded.is_none() {
        reasons.push("the event log is being replayed".to_string());
    }
    if !health.log_open && health.degraded.is_none() {
        reasons.push("the event log is not open".to_string());
    }
    let mut response = call.reply(
        StatusCode::SERVICE_UNAVAILABLE,
        &StatusResponse { status, reasons },
    )?;
    response
        .headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    Ok(response)
}

/// `GET /metrics`: Prometheus text exposition.
#[utoipa::path(
    get,
    path = "/metrics",
    tag = "operations",
    responses((status = 200, description = "Prometheus text format 0.0.4", body = String, content_type = "text/plain")),
)]
pub(crate) async fn metrics(State(core): State<Core>) -> Response {
    let text = crate::api::prometheus::render(&core);
    let mut response = Response::new(axum::body::Body::from(text));
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(crate::api::prometheus::CONTENT_TYPE),
    );
    response
}

/// `GET /openapi.json`: this API's OpenAPI 3 document.
#[utoipa::path(
    get,
    path = "/openapi.json",
    tag = "operations",
    responses((status = 200, description = "The OpenAPI document", body = Object)),
)]
pub(crate) async fn openapi() -> Response {
    let mut response = Response::new(axum::body::Body::from(crate::api::openapi::document_json()));
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}
