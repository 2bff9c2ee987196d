//! Probes, metrics and the API description: `/livez`, `/readyz`, `/metrics`,
//! `/openapi.json`. None of them touches a backend, and none carries a secret.

use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::Response;

use super::{Call, ReqCtx};
use crate::actors::{Core, Health};
use crate::api::dto::{ErrorResponse, StatusResponse};
use crate::api::error::{ApiError, Op};
use crate::api::input;

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

/// `GET /readyz`: 200 `{"status":"ok"}` when the log is open, replayed and takes writes, the
/// config file is applied and every backend has come up or failed;
/// otherwise 503 `{"status":"unavailable"|"standby","reasons":[…]}`. With `?standby=ok`
/// (Vault's `standbyok`), a caught-up etcd standby is 200 `{"status":"standby",…}` too: it
/// is healthy and counts as Ready for Kubernetes, while the Service reaches only the leader
/// through the pod role label. Never needs a token.
#[utoipa::path(
    get,
    path = "/readyz",
    tag = "operations",
    security(()),
    params(
        ("standby" = Option<String>, Query, description = "`ok`: a caught-up etcd standby is ready too (200 with status `standby`)"),
    ),
    responses(
        (status = 200, description = "Ready (or, with `standby=ok`, a caught-up standby)", body = StatusResponse),
        (status = 400, description = "A bad query parameter (the message names it)", body = ErrorResponse),
        (status = 503, description = "Not ready, with the reasons", body = StatusResponse),
    ),
)]
pub(crate) async fn readyz(
    State(core): State<Core>,
    ctx: ReqCtx,
    query: Result<Query<Vec<(String, String)>>, QueryRejection>,
) -> Result<Response, ApiError> {
    let call = Call::new(Op::Readyz, ctx);
    let standby_ok = call.input(input::parse_readyz_query(&call.query(query)?))?;
    let (status, body) = readiness(&core.health(), standby_ok);
    let mut response = call.reply(status, &body)?;
    if status != StatusCode::OK {
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    }
    Ok(response)
}

/// `/readyz`'s answer for `health`; `standby_ok` makes a caught-up standby (replayed, log
/// open, nothing degraded) a 200.
pub(crate) fn readiness(health: &Health, standby_ok: bool) -> (StatusCode, StatusResponse) {
    if health.ready() {
        let body = StatusResponse {
            status: "ok",
            reasons: Vec::new(),
        };
        return (StatusCode::OK, body);
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
    reasons.extend(health.starting.iter().cloned());
    let caught_up_standby = health.standby_of.is_some()
        && health.log_open
        && health.replay_done
        && health.degraded.is_none();
    let code = if standby_ok && caught_up_standby {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (code, StatusResponse { status, reasons })
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
