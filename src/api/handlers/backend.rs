//! `/trident/v1/backend` handlers.

use axum::body::Body;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;

use super::{Call, ReqCtx};
use crate::api::core_api::CoreApi;
use crate::api::dto::{BackendListResponse, BackendNameResponse, BackendResponse, EmptyResponse};
use crate::api::error::{ApiError, Op};
use crate::api::{input, redact};

/// `POST /trident/v1/backend`: 201 `{"backend":"<name>"}`; JSON or YAML body. An existing name
/// is an update (the core decides), still 201 as in Trident. (The core logs adds and updates.)
pub(crate) async fn add<C: CoreApi>(
    State(core): State<C>,
    ctx: ReqCtx,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let call = Call::new(Op::AddBackend, ctx);
    let bytes = call.body(&headers, body).await?;
    let doc = call.input(input::parse_backend_doc(&bytes))?;
    let secrets = redact::secret_values(&doc);
    let name = call.core_scrubbed(core.add_backend(call.ctx(), doc).await, &secrets)?;
    call.reply(StatusCode::CREATED, &BackendNameResponse { backend: name })
}

/// `POST /trident/v1/backend/{backend}`: 200 `{"backend":"<new name>"}`.
pub(crate) async fn update<C: CoreApi>(
    State(core): State<C>,
    ctx: ReqCtx,
    path: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let call = Call::new(Op::UpdateBackend, ctx);
    let name = call.path_name("backend name", path)?;
    let bytes = call.body(&headers, body).await?;
    let doc = call.input(input::parse_backend_doc(&bytes))?;
    let secrets = redact::secret_values(&doc);
    let new_name =
        call.core_scrubbed(core.update_backend(call.ctx(), &name, doc).await, &secrets)?;
    call.reply(StatusCode::OK, &BackendNameResponse { backend: new_name })
}

/// `GET /trident/v1/backend/{backend}`: `{"backend":{BackendExternal}}`.
pub(crate) async fn get<C: CoreApi>(
    State(core): State<C>,
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
pub(crate) async fn list<C: CoreApi>(
    State(core): State<C>,
    ctx: ReqCtx,
) -> Result<Response, ApiError> {
    let call = Call::new(Op::ListBackends, ctx);
    let backends = call.core(core.list_backends())?;
    call.reply(StatusCode::OK, &BackendListResponse { backends })
}

/// `DELETE /trident/v1/backend/{backend}`: `{}`.
pub(crate) async fn delete<C: CoreApi>(
    State(core): State<C>,
    ctx: ReqCtx,
    path: Result<Path<String>, PathRejection>,
) -> Result<Response, ApiError> {
    let call = Call::new(Op::DeleteBackend, ctx);
    let name = call.path_name("backend name", path)?;
    call.core(core.delete_backend(call.ctx(), &name).await)?;
    tracing::info!(backend = %name, "backend deleted");
    call.reply(StatusCode::OK, &EmptyResponse {})
}
