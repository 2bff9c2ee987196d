//! `/trident/v1/volume` handlers.

use axum::body::Body;
use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;

use super::{Call, ReqCtx};
use crate::actors::Core;
use crate::api::dto::{
    BackendNameResponse, EmptyResponse, ErrorResponse, ResizeRequest, VolumeListResponse,
    VolumeResponse,
};
use crate::api::error::{ApiError, Op};
use crate::api::input;
use crate::api::openapi::VolumeConfigDoc;

/// `POST /trident/v1/volume`: 201 `{"backend":"<backend>"}` once the outcome is durable. The
/// body is validated here (docs/trident-contract.md#status-codes) before the core sees it. With
/// `cloneSourceVolume` (and optionally `cloneSourceSnapshot`) the volume is a clone.
#[utoipa::path(
    post,
    path = "/trident/v1/volume",
    tag = "trident",
    request_body(content = VolumeConfigDoc, description = "The volume's config; name and size are mandatory (a clone takes its size from the source)."),
    responses(
        (status = 201, description = "Created on this backend", body = BackendNameResponse),
        (status = 400, description = "Invalid config, unknown class or clone source, or no pool could take it (the message gives each pool's reason)", body = ErrorResponse),
        (status = 409, description = "A volume of this name exists", body = ErrorResponse),
        (status = 503, description = "Initializing, or the log refuses writes", body = ErrorResponse),
    ),
)]
pub(crate) async fn add(
    State(core): State<Core>,
    ctx: ReqCtx,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let call = Call::new(Op::AddVolume, ctx);
    let bytes = call.body(&headers, body).await?;
    let (request, warnings) = call.input(input::parse_volume_reporting(&bytes))?;
    let view = call.core(core.add_volume(call.ctx(), request).await)?;
    tracing::info!(
        volume = %view.config.name,
        backend = %view.backend,
        pool = %view.pool,
        "volume added"
    );
    call.reply(
        StatusCode::CREATED,
        &BackendNameResponse {
            backend: view.backend,
            warnings,
        },
    )
}

/// `GET /trident/v1/volume/{volume}`: `{"volume":{VolumeExternal}}`.
#[utoipa::path(
    get,
    path = "/trident/v1/volume/{volume}",
    tag = "trident",
    params(("volume" = String, Path, description = "Volume name")),
    responses(
        (status = 200, description = "The volume", body = VolumeResponse),
        (status = 404, description = "No such volume", body = ErrorResponse),
    ),
)]
pub(crate) async fn get(
    State(core): State<Core>,
    ctx: ReqCtx,
    path: Result<Path<String>, PathRejection>,
) -> Result<Response, ApiError> {
    let call = Call::new(Op::GetVolume, ctx);
    let name = call.path_name("volume name", path)?;
    let view = call.core(core.get_volume(&name))?;
    call.reply(
        StatusCode::OK,
        &VolumeResponse {
            volume: view.into(),
        },
    )
}

/// `GET /trident/v1/volume[?limit=N&continue=TOKEN]`: `{"volumes":[…]}`, plus `"continue"`
/// when a `limit` cut the list (the token is the page's last name).
#[utoipa::path(
    get,
    path = "/trident/v1/volume",
    tag = "trident",
    params(
        ("limit" = Option<usize>, Query, description = "At most this many names (1 to 10000); the answer then carries `continue` while more follow"),
        ("continue" = Option<String>, Query, description = "The `continue` of the previous page: only names after it"),
    ),
    responses(
        (status = 200, description = "Names of every volume (or of one page), sorted", body = VolumeListResponse),
        (status = 400, description = "A bad `limit` or `continue` (the message names it)", body = ErrorResponse),
    ),
)]
pub(crate) async fn list(
    State(core): State<Core>,
    ctx: ReqCtx,
    query: Result<Query<Vec<(String, String)>>, QueryRejection>,
) -> Result<Response, ApiError> {
    let call = Call::new(Op::ListVolumes, ctx);
    let pairs = call.query(query)?;
    let page = call.input(input::parse_page_query(&pairs))?;
    let (volumes, more) = call.core(core.list_volumes_page(page.after.as_deref(), page.limit))?;
    let next = more.then(|| volumes.last().cloned()).flatten();
    call.reply(StatusCode::OK, &VolumeListResponse { volumes, next })
}

/// `DELETE /trident/v1/volume/{volume}`: `{}`.
#[utoipa::path(
    delete,
    path = "/trident/v1/volume/{volume}",
    tag = "trident",
    params(("volume" = String, Path, description = "Volume name")),
    responses(
        (status = 200, description = "Deleted", body = EmptyResponse),
        (status = 404, description = "No such volume", body = ErrorResponse),
    ),
)]
pub(crate) async fn delete(
    State(core): State<Core>,
    ctx: ReqCtx,
    path: Result<Path<String>, PathRejection>,
) -> Result<Response, ApiError> {
    let call = Call::new(Op::DeleteVolume, ctx);
    let name = call.path_name("volume name", path)?;
    call.core(core.delete_volume(call.ctx(), &name).await)?;
    tracing::info!(volume = %name, "volume deleted");
    call.reply(StatusCode::OK, &EmptyResponse {})
}

/// `POST /trident/v1/volume/{volume}/resize` with `{"size":"2Gi"}`: 200
/// `{"volume":{VolumeExternal}}` once the array grew it. Volumes only grow; the same size is a
/// no-op.
#[utoipa::path(
    post,
    path = "/trident/v1/volume/{volume}/resize",
    tag = "storch",
    params(("volume" = String, Path, description = "Volume name")),
    request_body(content = ResizeRequest),
    responses(
        (status = 200, description = "The volume at its new size", body = VolumeResponse),
        (status = 400, description = "Bad size, a shrink, the volume is not online, or the array refused", body = ErrorResponse),
        (status = 404, description = "No such volume", body = ErrorResponse),
    ),
)]
pub(crate) async fn resize(
    State(core): State<Core>,
    ctx: ReqCtx,
    path: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let call = Call::new(Op::ResizeVolume, ctx);
    let name = call.path_name("volume name", path)?;
    let bytes = call.body(&headers, body).await?;
    let request = call.input(input::parse_resize(&name, &bytes))?;
    let view = call.core(core.resize_volume(call.ctx(), &request).await)?;
    tracing::info!(volume = %name, size = %request.size.as_str(), "volume resized");
    call.reply(
        StatusCode::OK,
        &VolumeResponse {
            volume: view.into(),
        },
    )
}
