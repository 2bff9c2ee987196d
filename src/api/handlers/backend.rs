//! `/trident/v1/backend` handlers.

use axum::body::Body;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;

use super::{Call, ReqCtx};
use crate::actors::Core;
use crate::api::body::Accepts;
use crate::api::dto::{
    BackendListResponse, BackendNameResponse, BackendResponse, BackendStateRequest, EmptyResponse,
    ErrorResponse,
};
use crate::api::error::{ApiError, Op};
use crate::api::{input, redact};

/// `POST /trident/v1/backend`: 201 `{"backend":"<name>"}`; JSON or YAML body. An existing name
/// is an update (the core decides), still 201 as in Trident. (The core logs adds and updates.)
/// Keys the config has that storch ignores are named under `warnings`.
#[utoipa::path(
    post,
    path = "/trident/v1/backend",
    tag = "trident",
    request_body(
        content = serde_json::Value,
        description = "A Trident backend config, as JSON or YAML. Secrets in it are sealed and never shown again.",
    ),
    responses(
        (status = 201, description = "Added (or, for an existing name, updated)", body = BackendNameResponse),
        (status = 400, description = "Invalid config, or the driver could not initialise", body = ErrorResponse),
        (status = 413, description = "Body over 1 MiB", body = ErrorResponse),
        (status = 415, description = "A Content-Type other than JSON or YAML", body = ErrorResponse),
    ),
)]
pub(crate) async fn add(
    State(core): State<Core>,
    ctx: ReqCtx,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let call = Call::new(Op::AddBackend, ctx);
    let (bytes, format) = call.document(&headers, body, Accepts::JsonOrYaml).await?;
    let doc = call.input(input::parse_backend_as(&bytes, format))?;
    let secrets = redact::secret_values(&doc);
    let warnings = warnings(&doc, &secrets);
    let name = call.core_scrubbed(core.add_backend(call.ctx(), doc).await, &secrets)?;
    call.reply(
        StatusCode::CREATED,
        &BackendNameResponse {
            backend: name,
            warnings,
        },
    )
}

/// `POST /trident/v1/backend/{backend}`: 200 `{"backend":"<new name>"}`.
#[utoipa::path(
    post,
    path = "/trident/v1/backend/{backend}",
    tag = "trident",
    params(("backend" = String, Path, description = "Backend name")),
    request_body(
        content = serde_json::Value,
        description = "The new config (JSON or YAML); its backendName may rename the backend.",
    ),
    responses(
        (status = 200, description = "Updated", body = BackendNameResponse),
        (status = 400, description = "Invalid config", body = ErrorResponse),
        (status = 404, description = "No such backend", body = ErrorResponse),
        (status = 409, description = "The new name is taken", body = ErrorResponse),
    ),
)]
pub(crate) async fn update(
    State(core): State<Core>,
    ctx: ReqCtx,
    path: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let call = Call::new(Op::UpdateBackend, ctx);
    let name = call.path_name("backend name", path)?;
    let (bytes, format) = call.document(&headers, body, Accepts::JsonOrYaml).await?;
    let doc = call.input(input::parse_backend_as(&bytes, format))?;
    let secrets = redact::secret_values(&doc);
    let warnings = warnings(&doc, &secrets);
    let new_name =
        call.core_scrubbed(core.update_backend(call.ctx(), &name, doc).await, &secrets)?;
    call.reply(
        StatusCode::OK,
        &BackendNameResponse {
            backend: new_name,
            warnings,
        },
    )
}

/// The answer's `warnings` for a backend config: the keys storch ignored (names only; one
/// that is also a secret value of the document is cut out all the same).
fn warnings(doc: &serde_json::Value, secrets: &[String]) -> Vec<String> {
    input::backend_warnings(doc)
        .iter()
        .map(|w| redact::scrub(w, secrets))
        .collect()
}

/// `GET /trident/v1/backend/{backend}`: `{"backend":{BackendExternal}}`.
#[utoipa::path(
    get,
    path = "/trident/v1/backend/{backend}",
    tag = "trident",
    params(("backend" = String, Path, description = "Backend name")),
    responses(
        (status = 200, description = "The backend (never its secrets)", body = BackendResponse),
        (status = 404, description = "No such backend", body = ErrorResponse),
    ),
)]
pub(crate) async fn get(
    State(core): State<Core>,
    ctx: ReqCtx,
    path: Result<Path<String>, PathRejection>,
) -> Result<Response, ApiError> {
    let call = Call::new(Op::GetBackend, ctx);
    let name = call.path_name("backend name", path)?;
    let view = call.core(core.get_backend(&name))?;
    call.reply(
        StatusCode::OK,
        &BackendResponse {
            backend: view.into(),
        },
    )
}

/// `GET /trident/v1/backend`: `{"backends":[…]}` (online backends, sorted).
#[utoipa::path(
    get,
    path = "/trident/v1/backend",
    tag = "trident",
    responses((status = 200, description = "Names of the online backends", body = BackendListResponse)),
)]
pub(crate) async fn list(State(core): State<Core>, ctx: ReqCtx) -> Result<Response, ApiError> {
    let call = Call::new(Op::ListBackends, ctx);
    let backends = call.core(core.list_backends())?;
    call.reply(StatusCode::OK, &BackendListResponse { backends })
}

/// `DELETE /trident/v1/backend/{backend}`: `{}`. A backend that still has volumes is taken
/// offline instead (no new volumes land there).
#[utoipa::path(
    delete,
    path = "/trident/v1/backend/{backend}",
    tag = "trident",
    params(("backend" = String, Path, description = "Backend name")),
    responses(
        (status = 200, description = "Deleted (or taken offline)", body = EmptyResponse),
        (status = 404, description = "No such backend", body = ErrorResponse),
    ),
)]
pub(crate) async fn delete(
    State(core): State<Core>,
    ctx: ReqCtx,
    path: Result<Path<String>, PathRejection>,
) -> Result<Response, ApiError> {
    let call = Call::new(Op::DeleteBackend, ctx);
    let name = call.path_name("backend name", path)?;
    call.core(core.delete_backend(call.ctx(), &name).await)?;
    tracing::info!(backend = %name, "backend deleted");
    call.reply(StatusCode::OK, &EmptyResponse {})
}

/// `POST /trident/v1/backend/{backend}/state`: `{"state":"suspended"}` or `"normal"`; answers
/// `{"backend":{BackendExternal}}`. A suspended backend takes no new volumes and still serves
/// its own. The state it already has again records nothing.
#[utoipa::path(
    post,
    path = "/trident/v1/backend/{backend}/state",
    tag = "storch",
    params(("backend" = String, Path, description = "Backend name")),
    request_body(content = BackendStateRequest),
    responses(
        (status = 200, description = "The backend in its new user state", body = BackendResponse),
        (status = 400, description = "A missing or bad `state` (the message names the field)", body = ErrorResponse),
        (status = 404, description = "No such backend", body = ErrorResponse),
    ),
)]
pub(crate) async fn set_state(
    State(core): State<Core>,
    ctx: ReqCtx,
    path: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let call = Call::new(Op::SetBackendState, ctx);
    let name = call.path_name("backend name", path)?;
    let bytes = call.body(&headers, body).await?;
    let state = call.input(input::parse_backend_state(&bytes))?;
    let view = call.core(core.set_backend_state(call.ctx(), &name, state).await)?;
    call.reply(
        StatusCode::OK,
        &BackendResponse {
            backend: view.into(),
        },
    )
}
