//! The dashboard's read endpoints. Each answers one page from one core read; none changes
//! anything, and all of them answer on an etcd standby too.

use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::Response;

use super::dto::VolumeDetailExternal;
use super::dto::{
    ClassOverviewExternal, ClassOverviewResponse, OverviewResponse, VerifyResponse,
    VolumeDetailResponse, VolumeTableResponse,
};
use crate::actors::{Core, CoreError, EventFilter};
use crate::api::dto::ErrorResponse;
use crate::api::error::{ApiError, Op};
use crate::api::handlers::{Call, ReqCtx};

/// `GET /storch/v1/overview`: backends (state, last error, pools with capacity, attributes
/// and usage), totals and alerts.
#[utoipa::path(
    get,
    path = "/storch/v1/overview",
    tag = "storch",
    responses(
        (status = 200, description = "The overview", body = OverviewResponse),
        (status = 503, description = "Initializing", body = ErrorResponse),
    ),
)]
pub(crate) async fn overview(State(core): State<Core>, ctx: ReqCtx) -> Result<Response, ApiError> {
    answer(Op::UiOverview, ctx, core.overview(), |o| OverviewResponse {
        overview: o.into(),
    })
}

/// `GET /storch/v1/volumes`: one page of the volume table, filtered and sorted.
#[utoipa::path(
    get,
    path = "/storch/v1/volumes",
    tag = "storch",
    params(
        ("name" = Option<String>, Query, description = "Only volumes whose name contains this"),
        ("class" = Option<String>, Query, description = "Only this storage class"),
        ("backend" = Option<String>, Query, description = "Only this backend"),
        ("pool" = Option<String>, Query, description = "Only this pool"),
        ("state" = Option<String>, Query, description = "`creating`, `online`, `deleting` or `missing`"),
        ("protocol" = Option<String>, Query, description = "`file` or `block`"),
        ("sort" = Option<String>, Query, description = "`name` (default), `class`, `backend`, `pool`, `size`, `state`, `protocol` or `created` (not yet created first); `-` before it for descending"),
        ("offset" = Option<usize>, Query, description = "Rows to skip (default 0)"),
        ("limit" = Option<usize>, Query, description = "Rows in the page, 1 to 1000 (default 50)"),
    ),
    responses(
        (status = 200, description = "The page", body = VolumeTableResponse),
        (status = 400, description = "A bad query parameter (the message names it)", body = ErrorResponse),
        (status = 503, description = "Initializing", body = ErrorResponse),
    ),
)]
pub(crate) async fn volumes(
    State(core): State<Core>,
    ctx: ReqCtx,
    query: Result<Query<Vec<(String, String)>>, QueryRejection>,
) -> Result<Response, ApiError> {
    let call = Call::new(Op::UiVolumes, ctx);
    let pairs = call.query(query)?;
    let q = call.input(super::query::parse_volume_table(&pairs))?;
    let page = call.core(core.volume_table(&q))?;
    call.reply(
        StatusCode::OK,
        &VolumeTableResponse::new(page, q.offset, q.limit),
    )
}

/// `GET /storch/v1/volumes/{volume}`: the volume with its placement plan and failed attempts,
/// snapshots, clones and whole history.
#[utoipa::path(
    get,
    path = "/storch/v1/volumes/{volume}",
    tag = "storch",
    params(("volume" = String, Path, description = "Volume name")),
    responses(
        (status = 200, description = "The volume", body = VolumeDetailResponse),
        (status = 404, description = "No such volume", body = ErrorResponse),
    ),
)]
pub(crate) async fn volume(
    State(core): State<Core>,
    ctx: ReqCtx,
    path: Result<Path<String>, PathRejection>,
) -> Result<Response, ApiError> {
    let call = Call::new(Op::UiVolume, ctx);
    let name = call.path_name("volume name", path)?;
    let detail = call.core(core.volume_detail(&name))?;
    let history = call.core(
        core.events(EventFilter {
            object: Some(format!("volume/{name}")),
            ..EventFilter::default()
        })
        .await,
    )?;
    let mut volume: VolumeDetailExternal = detail.into();
    volume.history = call.events(history)?;
    call.reply(StatusCode::OK, &VolumeDetailResponse { volume })
}

/// `GET /storch/v1/storageclasses`: every class with every pool's verdict and its volumes'
/// spread.
#[utoipa::path(
    get,
    path = "/storch/v1/storageclasses",
    tag = "storch",
    responses(
        (status = 200, description = "The classes", body = ClassOverviewResponse),
        (status = 503, description = "Initializing", body = ErrorResponse),
    ),
)]
pub(crate) async fn storage_classes(
    State(core): State<Core>,
    ctx: ReqCtx,
) -> Result<Response, ApiError> {
    answer(Op::UiStorageClasses, ctx, core.class_overview(), |c| {
        ClassOverviewResponse {
            storage_classes: c.into_iter().map(ClassOverviewExternal::from).collect(),
        }
    })
}

/// `GET /storch/v1/log/verify`: walks the event log's hash chain from the first record.
#[utoipa::path(
    get,
    path = "/storch/v1/log/verify",
    tag = "storch",
    responses(
        (status = 200, description = "The verification (ok, or the first bad record)", body = VerifyResponse),
        (status = 503, description = "Initializing", body = ErrorResponse),
    ),
)]
pub(crate) async fn verify_log(
    State(core): State<Core>,
    ctx: ReqCtx,
) -> Result<Response, ApiError> {
    answer(Op::UiVerifyLog, ctx, core.verify_log().await, |r| {
        VerifyResponse {
            verification: r.into(),
        }
    })
}

/// The answer of a read without input: its result in its response shape (200), or its error.
fn answer<T, B: serde::Serialize>(
    op: Op,
    ctx: ReqCtx,
    read: Result<T, CoreError>,
    shape: impl FnOnce(T) -> B,
) -> Result<Response, ApiError> {
    let call = Call::new(op, ctx);
    let value = call.core(read)?;
    call.reply(StatusCode::OK, &shape(value))
}
