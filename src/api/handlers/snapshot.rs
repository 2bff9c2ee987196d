//! Snapshot handlers: `/trident/v1/volume/{volume}/snapshot[/{snapshot}]` and
//! `/trident/v1/snapshot`.

use axum::body::Body;
use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;

use super::{Call, ReqCtx};
use crate::actors::Core;
use crate::api::dto::{
    EmptyResponse, ErrorResponse, SnapshotListResponse, SnapshotRequest, SnapshotResponse,
};
use crate::api::error::{ApiError, Op};
use crate::api::input;

const NAMES: (&str, &str) = ("volume name", "snapshot name");

/// `POST /trident/v1/volume/{volume}/snapshot` with `{"name":"SNAP"}`: 201
/// `{"snapshot":{…}}` once the array made it and that is durable.
#[utoipa::path(
    post,
    path = "/trident/v1/volume/{volume}/snapshot",
    tag = "storch",
    params(("volume" = String, Path, description = "Volume name")),
    request_body(content = SnapshotRequest),
    responses(
        (status = 201, description = "The snapshot", body = SnapshotResponse),
        (status = 400, description = "Bad name, the volume's pool does not offer snapshots, the volume is not online, or the array refused", body = ErrorResponse),
        (status = 404, description = "No such volume", body = ErrorResponse),
        (status = 409, description = "The volume has a snapshot of this name", body = ErrorResponse),
    ),
)]
pub(crate) async fn create(
    State(core): State<Core>,
    ctx: ReqCtx,
    path: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let call = Call::new(Op::CreateSnapshot, ctx);
    let volume = call.path_name(NAMES.0, path)?;
    let bytes = call.body(&headers, body).await?;
    let request = call.input(input::parse_snapshot(&volume, &bytes))?;
    let view = call.core(core.create_snapshot(call.ctx(), &request).await)?;
    tracing::info!(volume = %volume, snapshot = %request.snapshot, "snapshot created");
    call.reply(
        StatusCode::CREATED,
        &SnapshotResponse {
            snapshot: view.into(),
        },
    )
}

/// `GET /trident/v1/volume/{volume}/snapshot/{snapshot}`: `{"snapshot":{…}}`.
#[utoipa::path(
    get,
    path = "/trident/v1/volume/{volume}/snapshot/{snapshot}",
    tag = "storch",
    params(
        ("volume" = String, Path, description = "Volume name"),
        ("snapshot" = String, Path, description = "Snapshot name"),
    ),
    responses(
        (status = 200, description = "The snapshot", body = SnapshotResponse),
        (status = 404, description = "No such volume or snapshot", body = ErrorResponse),
    ),
)]
pub(crate) async fn get(
    State(core): State<Core>,
    ctx: ReqCtx,
    path: Result<Path<(String, String)>, PathRejection>,
) -> Result<Response, ApiError> {
    let call = Call::new(Op::GetSnapshot, ctx);
    let (volume, name) = call.path_names(NAMES, path)?;
    let view = call.core(core.get_snapshot(&volume, &name))?;
    call.reply(
        StatusCode::OK,
        &SnapshotResponse {
            snapshot: view.into(),
        },
    )
}

/// `GET /trident/v1/volume/{volume}/snapshot`: `{"snapshots":[…]}`, sorted by name.
#[utoipa::path(
    get,
    path = "/trident/v1/volume/{volume}/snapshot",
    tag = "storch",
    params(
        ("volume" = String, Path, description = "Volume name"),
        ("limit" = Option<usize>, Query, description = "At most this many snapshots (1 to 10000); the answer then carries `continue` while more follow"),
        ("continue" = Option<String>, Query, description = "The `continue` of the previous page (a snapshot name): only snapshots after it"),
    ),
    responses(
        (status = 200, description = "The volume's snapshots (or one page of them)", body = SnapshotListResponse),
        (status = 400, description = "A bad `limit` or `continue`", body = ErrorResponse),
        (status = 404, description = "No such volume", body = ErrorResponse),
    ),
)]
pub(crate) async fn list_of_volume(
    State(core): State<Core>,
    ctx: ReqCtx,
    path: Result<Path<String>, PathRejection>,
    query: Result<Query<Vec<(String, String)>>, QueryRejection>,
) -> Result<Response, ApiError> {
    let call = Call::new(Op::ListVolumeSnapshots, ctx);
    let volume = call.path_name(NAMES.0, path)?;
    let pairs = call.query(query)?;
    let page = call.input(input::parse_page_query(&pairs))?;
    let snapshots = call.core(core.list_snapshots(Some(&volume)))?;
    let (snapshots, next) = super::page_sorted(snapshots, |s| s.name.clone(), &page);
    call.reply(
        StatusCode::OK,
        &SnapshotListResponse {
            snapshots: snapshots.into_iter().map(Into::into).collect(),
            next,
        },
    )
}

/// `GET /trident/v1/snapshot`: every snapshot of every volume, sorted by volume, then name.
#[utoipa::path(
    get,
    path = "/trident/v1/snapshot",
    tag = "storch",
    params(
        ("limit" = Option<usize>, Query, description = "At most this many snapshots (1 to 10000); the answer then carries `continue` while more follow"),
        ("continue" = Option<String>, Query, description = "The `continue` of the previous page (`VOLUME/SNAPSHOT`): only snapshots after it"),
    ),
    responses(
        (status = 200, description = "Every snapshot (or one page of them)", body = SnapshotListResponse),
        (status = 400, description = "A bad `limit` or `continue`", body = ErrorResponse),
    ),
)]
pub(crate) async fn list_all(
    State(core): State<Core>,
    ctx: ReqCtx,
    query: Result<Query<Vec<(String, String)>>, QueryRejection>,
) -> Result<Response, ApiError> {
    let call = Call::new(Op::ListSnapshots, ctx);
    let pairs = call.query(query)?;
    let page = call.input(input::parse_page_query(&pairs))?;
    let snapshots = call.core(core.list_snapshots(None))?;
    let (snapshots, next) =
        super::page_sorted(snapshots, |s| format!("{}/{}", s.volume, s.name), &page);
    call.reply(
        StatusCode::OK,
        &SnapshotListResponse {
            snapshots: snapshots.into_iter().map(Into::into).collect(),
            next,
        },
    )
}

/// `DELETE /trident/v1/volume/{volume}/snapshot/{snapshot}`: `{}`.
#[utoipa::path(
    delete,
    path = "/trident/v1/volume/{volume}/snapshot/{snapshot}",
    tag = "storch",
    params(
        ("volume" = String, Path, description = "Volume name"),
        ("snapshot" = String, Path, description = "Snapshot name"),
    ),
    responses(
        (status = 200, description = "Deleted", body = EmptyResponse),
        (status = 400, description = "The volume is not online, or the array refused", body = ErrorResponse),
        (status = 404, description = "No such volume or snapshot", body = ErrorResponse),
    ),
)]
pub(crate) async fn delete(
    State(core): State<Core>,
    ctx: ReqCtx,
    path: Result<Path<(String, String)>, PathRejection>,
) -> Result<Response, ApiError> {
    let call = Call::new(Op::DeleteSnapshot, ctx);
    let (volume, name) = call.path_names(NAMES, path)?;
    call.core(core.delete_snapshot(call.ctx(), &volume, &name).await)?;
    tracing::info!(volume = %volume, snapshot = %name, "snapshot deleted");
    call.reply(StatusCode::OK, &EmptyResponse {})
}
