//! `/trident/v1/volume` handlers.

use axum::body::Body;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;

use super::{Call, ReqCtx};
use crate::api::core_api::CoreApi;
use crate::api::dto::{BackendNameResponse, EmptyResponse, VolumeListResponse, VolumeResponse};
use crate::api::error::{ApiError, Op};
use crate::api::input;

/// `POST /trident/v1/volume`: 201 `{"backend":"<backend>"}` once the outcome is durable. The
/// body is validated here (trident-compat §1.4) before the core sees it.
pub(crate) async fn add<C: CoreApi>(
    State(core): State<C>,
    ctx: ReqCtx,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let call = Call::new(Op::AddVolume, ctx);
    let bytes = call.body(&headers, body).await?;
    let config = call.input(input::parse_volume(&bytes))?;
    let view = call.core(core.add_volume(call.ctx(), config).await)?;
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
        },
    )
}

/// `GET /trident/v1/volume/{volume}`: `{"volume":{VolumeExternal}}`.
pub(crate) async fn get<C: CoreApi>(
    State(core): State<C>,
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

/// `GET /trident/v1/volume`: `{"volumes":[…]}`.
pub(crate) async fn list<C: CoreApi>(
    State(core): State<C>,
    ctx: ReqCtx,
) -> Result<Response, ApiError> {
    let call = Call::new(Op::ListVolumes, ctx);
    let volumes = call.core(core.list_volumes())?;
    call.reply(StatusCode::OK, &VolumeListResponse { volumes })
}

/// `DELETE /trident/v1/volume/{volume}`: `{}`.
pub(crate) async fn delete<C: CoreApi>(
    State(core): State<C>,
    ctx: ReqCtx,
    path: Result<Path<String>, PathRejection>,
) -> Result<Response, ApiError> {
    let call = Call::new(Op::DeleteVolume, ctx);
    let name = call.path_name("volume name", path)?;
    call.core(core.delete_volume(call.ctx(), &name).await)?;
    tracing::info!(volume = %name, "volume deleted");
    call.reply(StatusCode::OK, &EmptyResponse {})
}
