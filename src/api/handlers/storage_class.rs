//! `/trident/v1/storageclass` handlers.

use axum::body::Body;
use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;

use super::{Call, ReqCtx};
use crate::actors::Core;
use crate::api::dto::{
    EmptyResponse, ErrorResponse, ExplanationResponse, StorageClassListResponse,
    StorageClassNameResponse, StorageClassResponse,
};
use crate::api::error::{ApiError, Op};
use crate::api::input;
use crate::api::openapi::StorageClassConfigDoc;

/// `POST /trident/v1/storageclass`: 201 `{"storageClass":"<name>"}`.
#[utoipa::path(
    post,
    path = "/trident/v1/storageclass",
    tag = "trident",
    request_body(content = StorageClassConfigDoc),
    responses(
        (status = 201, description = "Added", body = StorageClassNameResponse),
        (status = 400, description = "Invalid class (unknown attribute, bad value or pool selector)", body = ErrorResponse),
        (status = 409, description = "A class of this name exists", body = ErrorResponse),
    ),
)]
pub(crate) async fn add(
    State(core): State<Core>,
    ctx: ReqCtx,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let call = Call::new(Op::AddStorageClass, ctx);
    let bytes = call.body(&headers, body).await?;
    let (config, warnings) = call.input(input::parse_storage_class_reporting(&bytes))?;
    let name = call.core(core.add_storage_class(call.ctx(), config).await)?;
    tracing::info!(storage_class = %name, "storage class added");
    call.reply(
        StatusCode::CREATED,
        &StorageClassNameResponse {
            storage_class: name,
            warnings,
        },
    )
}

/// `GET /trident/v1/storageclass/{storageClass}`: `{"storageClass":{StorageClassExternal}}`.
#[utoipa::path(
    get,
    path = "/trident/v1/storageclass/{storageClass}",
    tag = "trident",
    params(("storageClass" = String, Path, description = "Storage class name")),
    responses(
        (status = 200, description = "The class and the pools it matches", body = StorageClassResponse),
        (status = 404, description = "No such class", body = ErrorResponse),
    ),
)]
pub(crate) async fn get(
    State(core): State<Core>,
    ctx: ReqCtx,
    path: Result<Path<String>, PathRejection>,
) -> Result<Response, ApiError> {
    let call = Call::new(Op::GetStorageClass, ctx);
    let name = call.path_name("storage class name", path)?;
    let view = call.core(core.get_storage_class(&name))?;
    call.reply(
        StatusCode::OK,
        &StorageClassResponse {
            storage_class: view.into(),
        },
    )
}

/// `GET /trident/v1/storageclass`: `{"storageClasses":[…]}`.
#[utoipa::path(
    get,
    path = "/trident/v1/storageclass",
    tag = "trident",
    responses((status = 200, description = "Names of every class, sorted", body = StorageClassListResponse)),
)]
pub(crate) async fn list(State(core): State<Core>, ctx: ReqCtx) -> Result<Response, ApiError> {
    let call = Call::new(Op::ListStorageClasses, ctx);
    let storage_classes = call.core(core.list_storage_classes())?;
    call.reply(
        StatusCode::OK,
        &StorageClassListResponse { storage_classes },
    )
}

/// `DELETE /trident/v1/storageclass/{storageClass}`: `{}`.
#[utoipa::path(
    delete,
    path = "/trident/v1/storageclass/{storageClass}",
    tag = "trident",
    params(("storageClass" = String, Path, description = "Storage class name")),
    responses(
        (status = 200, description = "Deleted", body = EmptyResponse),
        (status = 404, description = "No such class", body = ErrorResponse),
    ),
)]
pub(crate) async fn delete(
    State(core): State<Core>,
    ctx: ReqCtx,
    path: Result<Path<String>, PathRejection>,
) -> Result<Response, ApiError> {
    let call = Call::new(Op::DeleteStorageClass, ctx);
    let name = call.path_name("storage class name", path)?;
    call.core(core.delete_storage_class(call.ctx(), &name).await)?;
    tracing::info!(storage_class = %name, "storage class deleted");
    call.reply(StatusCode::OK, &EmptyResponse {})
}

/// `GET /trident/v1/storageclass/{storageClass}/explain?protocol=file|block&size=SIZE&topology=K=V`:
/// `{"explanation":{…}}`, for every pool of every backend whether a create in this class
/// would try it now, and if not, why.
#[utoipa::path(
    get,
    path = "/trident/v1/storageclass/{storageClass}/explain",
    tag = "storch",
    params(
        ("storageClass" = String, Path, description = "Storage class name"),
        ("protocol" = Option<String>, Query, description = "`file`, `block` or `any` (the default)"),
        ("size" = Option<String>, Query, description = "A volume size, e.g. `10Gi`: pools with less free space are not candidates"),
        ("topology" = Option<String>, Query, description = "A topology segment the volume must be reachable from, `KEY=VALUE[,KEY=VALUE…]` (e.g. `topology.kubernetes.io/zone=z1`): pools outside it are not candidates"),
        ("limit" = Option<usize>, Query, description = "At most this many pools (1 to 10000), sorted by backend and pool; the answer then carries `continue` while more follow"),
        ("continue" = Option<String>, Query, description = "The `continue` of the previous page (`BACKEND/POOL`): only pools after it"),
    ),
    responses(
        (status = 200, description = "Every pool with its verdict", body = ExplanationResponse),
        (status = 400, description = "A bad `protocol` or `size` (the message names it)", body = ErrorResponse),
        (status = 404, description = "No such class", body = ErrorResponse),
    ),
)]
pub(crate) async fn explain(
    State(core): State<Core>,
    ctx: ReqCtx,
    path: Result<Path<String>, PathRejection>,
    query: Result<Query<Vec<(String, String)>>, QueryRejection>,
) -> Result<Response, ApiError> {
    let call = Call::new(Op::ExplainStorageClass, ctx);
    let name = call.path_name("storage class name", path)?;
    let pairs = call.query(query)?;
    let q = call.input(input::parse_explain_query(&pairs))?;
    let e = &q.explain;
    let mut explanation =
        call.core(core.explain_in(&name, e.protocol, e.size_bytes, e.topology.as_ref()))?;
    let mut pools = std::mem::take(&mut explanation.pools);
    pools.sort_by(|a, b| (&a.backend, &a.pool).cmp(&(&b.backend, &b.pool)));
    let (pools, next) = super::page_sorted(pools, |p| format!("{}/{}", p.backend, p.pool), &q.page);
    explanation.pools = pools;
    call.reply(
        StatusCode::OK,
        &ExplanationResponse {
            explanation: explanation.into(),
            next,
        },
    )
}
