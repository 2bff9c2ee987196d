//! storch's drift routes: the orphans on every array, importing an array volume, and
//! reconciling a backend with its array now.

use axum::body::Body;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;

use super::{Call, ReqCtx};
use crate::actors::Core;
use crate::api::dto::{
    ErrorResponse, ImportVolumeRequest, OrphanListResponse, ReconcileResponse, VolumeResponse,
};
use crate::api::error::{ApiError, Op};
use crate::api::input;

/// `GET /trident/v1/orphan`: the volumes each array holds under storch's names that no storch
/// volume claims, listed now, and the backends that could not be listed.
#[utoipa::path(
    get,
    path = "/trident/v1/orphan",
    tag = "storch",
    responses(
        (status = 200, description = "Orphans, sorted by backend and internal name", body = OrphanListResponse),
        (status = 503, description = "Initializing, or a standby", body = ErrorResponse),
    ),
)]
pub(crate) async fn orphans(State(core): State<Core>, ctx: ReqCtx) -> Result<Response, ApiError> {
    let call = Call::new(Op::ListOrphans, ctx);
    let found = call.core(core.orphans().await)?;
    call.reply(
        StatusCode::OK,
        &OrphanListResponse {
            orphans: found.orphans.into_iter().map(Into::into).collect(),
            unlisted: found.unlisted,
        },
    )
}

/// `POST /trident/v1/volume/import`: 201 `{"volume":{VolumeExternal}}`. The same import again
/// answers the same.
#[utoipa::path(
    post,
    path = "/trident/v1/volume/import",
    tag = "storch",
    request_body(content = ImportVolumeRequest),
    responses(
        (status = 201, description = "Imported (or imported before by the same request)", body = VolumeResponse),
        (status = 400, description = "Bad body, or a class that does not match the volume's pool (the message names the field)", body = ErrorResponse),
        (status = 404, description = "No such backend, or no such volume on it", body = ErrorResponse),
        (status = 409, description = "The name is taken, or another storch volume owns the array volume", body = ErrorResponse),
    ),
)]
pub(crate) async fn import(
    State(core): State<Core>,
    ctx: ReqCtx,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let call = Call::new(Op::ImportVolume, ctx);
    let bytes = call.body(&headers, body).await?;
    let request = call.input(input::parse_import(&bytes))?;
    let (view, recorded) = call.core(core.import_volume(call.ctx(), request).await)?;
    if recorded {
        tracing::info!(volume = %view.config.name, backend = %view.backend, "volume imported");
    }
    call.reply(
        StatusCode::CREATED,
        &VolumeResponse {
            volume: view.into(),
        },
    )
}

/// `POST /trident/v1/backend/{backend}/reconcile`: compares the backend with its array now
/// (as the periodic reconciliation does) and answers what it found and recorded.
#[utoipa::path(
    post,
    path = "/trident/v1/backend/{backend}/reconcile",
    tag = "storch",
    params(("backend" = String, Path, description = "Backend name")),
    responses(
        (status = 200, description = "What the comparison found", body = ReconcileResponse),
        (status = 404, description = "No such backend", body = ErrorResponse),
        (status = 503, description = "The backend is not running or its listing failed: nothing changed", body = ErrorResponse),
    ),
)]
pub(crate) async fn reconcile(
    State(core): State<Core>,
    ctx: ReqCtx,
    path: Result<Path<String>, PathRejection>,
) -> Result<Response, ApiError> {
    let call = Call::new(Op::ReconcileBackend, ctx);
    let name = call.path_name("backend name", path)?;
    let report = call.core(core.reconcile_backend(&name).await)?;
    call.reply(
        StatusCode::OK,
        &ReconcileResponse {
            reconcile: report.into(),
        },
    )
}
