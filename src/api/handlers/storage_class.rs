//! `/trident/v1/storageclass` handlers.

use axum::body::Body;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;

use super::{Call, ReqCtx};
use crate::api::core_api::CoreApi;
use crate::api::dto::{
    EmptyResponse, StorageClassListResponse, StorageClassNameResponse, StorageClassResponse,
};
use crate::api::error::{ApiError, Op};
use crate::api::input;

/// `POST /trident/v1/storageclass`: 201 `{"storageClass":"<name>"}`.
pub(crate) async fn add<C: CoreApi>(
    State(core): State<C>,
    ctx: ReqCtx,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let call = Call::new(Op::AddStorageClass, ctx);
    let bytes = call.body(&headers, body).await?;
    let config = call.input(input::parse_storage_class(&bytes))?;
    let name = call.core(core.add_storage_class(call.ctx(), config).await)?;
    tracing::info!(storage_class = %name, "storage class added");
    call.reply(
        StatusCode::CREATED,
        &StorageClassNameResponse {
            storage_class: name,
        },
    )
}

/// `GET /trident/v1/storageclass/{storageClass}`: `{"storageClass":{StorageClassExternal}}`.
pub(crate) async fn get<C: CoreApi>(
    State(core): State<C>,
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
pub(crate) async fn list<C: CoreApi>(
    State(core): State<C>,
    ctx: ReqCtx,
) -> Result<Response, ApiError> {
    let call = Call::new(Op::ListStorageClasses, ctx);
    let storage_classes = call.core(core.list_storage_classes())?;
    call.reply(
        StatusCode::OK,
        &StorageClassListResponse { storage_classes },
    )
}

/// `DELETE /trident/v1/storageclass/{storageClass}`: `{}`.
pub(crate) async fn delete<C: CoreApi>(
    State(core): State<C>,
    ctx: ReqCtx,
    path: Result<Path<String>, PathRejection>,
) -> Result<Response, ApiError> {
    let call = Call::new(Op::DeleteStorageClass, ctx);
    let name = call.path_name("storage class name", path)?;
    call.core(core.delete_storage_class(call.ctx(), &name).await)?;
    tracing::info!(storage_class = %name, "storage class deleted");
    call.reply(StatusCode::OK, &EmptyResponse {})
}
