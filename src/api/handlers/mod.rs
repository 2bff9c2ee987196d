//! The request handlers: each one reads its input through [`super::input`], calls the core,
//! and answers with a [`super::dto`] envelope or an [`ApiError`].

pub(crate) mod backend;
pub(crate) mod drift;
pub(crate) mod events;
pub(crate) mod health;
pub(crate) mod snapshot;
pub(crate) mod storage_class;
pub(crate) mod volume;

use axum::body::{Body, Bytes};
use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::extract::{FromRequestParts, Path, Query};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

use crate::actors::{CoreError, EventRecord, RequestCtx};

use super::dto::VersionResponse;
use super::error::{ApiError, ErrorKind, Op};
use super::input::{self, InputError};

/// The request's [`RequestCtx`], put in the request extensions by the tracking middleware
/// (a fresh random id if the middleware did not run).
pub(crate) struct ReqCtx(pub RequestCtx);

impl<S: Send + Sync> FromRequestParts<S> for ReqCtx {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        Ok(ReqCtx(
            parts
                .extensions
                .get::<RequestCtx>()
                .cloned()
                .unwrap_or_else(RequestCtx::random),
        ))
    }
}

/// One handler invocation: its operation and request context, with helpers that turn every
/// failure into an [`ApiError`] of the right envelope.
pub(crate) struct Call {
    op: Op,
    ctx: RequestCtx,
}

impl Call {
    pub(crate) fn new(op: Op, ReqCtx(ctx): ReqCtx) -> Call {
        Call { op, ctx }
    }

    pub(crate) fn ctx(&self) -> &RequestCtx {
        &self.ctx
    }

    pub(crate) fn fail(&self, kind: ErrorKind) -> ApiError {
        ApiError::new(self.op, &self.ctx, kind)
    }

    pub(crate) fn input<T>(&self, r: Result<T, InputError>) -> Result<T, ApiError> {
        r.map_err(|e| self.fail(ErrorKind::Input(e)))
    }

    pub(crate) fn core<T>(&self, r: Result<T, CoreError>) -> Result<T, ApiError> {
        r.map_err(|e| self.fail(ErrorKind::Core(e)))
    }

    /// Like [`Call::core`], with the request's `secrets` cut out of the error message.
    pub(crate) fn core_scrubbed<T>(
        &self,
        r: Result<T, CoreError>,
        secrets: &[String],
    ) -> Result<T, ApiError> {
        r.map_err(|e| self.fail(ErrorKind::Core(super::redact::scrub_core_error(e, secrets))))
    }

    /// The name in the path, decoded and checked; `field` names it in errors.
    pub(crate) fn path_name(
        &self,
        field: &'static str,
        path: Result<Path<String>, PathRejection>,
    ) -> Result<String, ApiError> {
        let Path(raw) =
            path.map_err(|e| self.fail(ErrorKind::Input(InputError::Path(e.body_text()))))?;
        self.input(input::path_name(field, raw))
    }

    /// Two names in the path (e.g. volume and snapshot), decoded and checked.
    pub(crate) fn path_names(
        &self,
        fields: (&'static str, &'static str),
        path: Result<Path<(String, String)>, PathRejection>,
    ) -> Result<(String, String), ApiError> {
        let Path((a, b)) =
            path.map_err(|e| self.fail(ErrorKind::Input(InputError::Path(e.body_text()))))?;
        Ok((
            self.input(input::path_name(fields.0, a))?,
            self.input(input::path_name(fields.1, b))?,
        ))
    }

    /// The decoded query parameters, in order.
    pub(crate) fn query(
        &self,
        query: Result<Query<Vec<(String, String)>>, QueryRejection>,
    ) -> Result<Vec<(String, String)>, ApiError> {
        query
            .map(|Query(pairs)| pairs)
            .map_err(|e| self.fail(ErrorKind::Input(InputError::QueryString(e.body_text()))))
    }

    /// The whole JSON body, under the size cap and the read deadline, once its
    /// `Content-Type` says JSON (or says nothing).
    pub(crate) async fn body(&self, headers: &HeaderMap, body: Body) -> Result<Bytes, ApiError> {
        let (bytes, _) = self
            .document(headers, body, super::body::Accepts::Json)
            .await?;
        Ok(bytes)
    }

    /// The whole body and the language its `Content-Type` says it is in (`None`: no type),
    /// once that is one `accepts` allows (else 415, nothing read).
    pub(crate) async fn document(
        &self,
        headers: &HeaderMap,
        body: Body,
        accepts: super::body::Accepts,
    ) -> Result<(Bytes, Option<super::body::Format>), ApiError> {
        let format = super::body::body_format(headers, accepts).map_err(|k| self.fail(k))?;
        let bytes = super::body::read_limited(
            headers,
            body,
            super::MAX_BODY_BYTES,
            super::BODY_READ_TIMEOUT,
        )
        .await
        .map_err(|kind| self.fail(kind))?;
        Ok((bytes, format))
    }

    /// A JSON answer.
    /// Events as the API shows them (a summary each).
    pub(crate) fn events(
        &self,
        records: Vec<EventRecord>,
    ) -> Result<Vec<super::dto::EventExternal>, ApiError> {
        records
            .into_iter()
            .map(super::dto::EventExternal::from_record)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| self.fail(ErrorKind::Encode(e.to_string())))
    }

    pub(crate) fn reply<T: Serialize>(
        &self,
        status: StatusCode,
        body: &T,
    ) -> Result<Response, ApiError> {
        let bytes =
            serde_json::to_vec(body).map_err(|e| self.fail(ErrorKind::Encode(e.to_string())))?;
        Ok(super::json_bytes(status, bytes))
    }
}

/// The Trident version this API speaks, and storch's.
#[utoipa::path(
    get,
    path = "/trident/v1/version",
    tag = "trident",
    responses((status = 200, description = "The versions", body = VersionResponse)),
)]
pub(crate) async fn version(ctx: ReqCtx) -> Result<Response, ApiError> {
    Call::new(Op::Version, ctx).reply(StatusCode::OK, &VersionResponse::current())
}

/// The same as `/trident/v1/version` (Trident serves both).
#[utoipa::path(
    get,
    path = "/trident/version",
    tag = "trident",
    responses((status = 200, description = "The versions", body = VersionResponse)),
)]
pub(crate) async fn version_legacy(ctx: ReqCtx) -> Result<Response, ApiError> {
    version(ctx).await
}

/// Unknown paths: a JSON 404. A `/trident/…` path with a trailing slash is redirected to the
/// path without it (Trident's router does the same with a 301).
pub(crate) async fn unknown_path(ctx: ReqCtx, uri: Uri) -> Response {
    if let Some(location) = strip_trailing_slash(&uri) {
        let mut response = super::json_bytes(StatusCode::MOVED_PERMANENTLY, b"{}".to_vec());
        response.headers_mut().insert(header::LOCATION, location);
        return response;
    }
    Call::new(Op::NoRoute, ctx)
        .fail(ErrorKind::UnknownPath)
        .into_response()
}

/// A known path with a method it does not have: JSON 405 (the router adds `Allow`).
pub(crate) async fn wrong_method(ctx: ReqCtx, method: Method) -> Response {
    Call::new(Op::NoRoute, ctx)
        .fail(ErrorKind::MethodNotAllowed(method.to_string()))
        .into_response()
}

/// `/trident/…/` → `/trident/…` (query kept). Only under `/trident/`, so the redirect can never
/// point at another host (`//evil.example/`).
fn strip_trailing_slash(uri: &Uri) -> Option<HeaderValue> {
    let path = uri.path();
    if !path.starts_with("/trident/") || !path.ends_with('/') {
        return None;
    }
    let trimmed = path.trim_end_matches('/');
    if trimmed.len() <= "/trident".len() {
        return None;
    }
    let location = match uri.query() {
        Some(q) => format!("{trimmed}?{q}"),
        None => trimmed.to_string(),
    };
    HeaderValue::from_str(&location).ok()
}

/// One page of a list sorted by `key`: the items after `page.after`, at most `page.limit` of
/// them, and the `continue` token (the last item's key) when more follow.
pub(crate) fn page_sorted<T>(
    items: Vec<T>,
    key: impl Fn(&T) -> String,
    page: &crate::api::input::PageQuery,
) -> (Vec<T>, Option<String>) {
    let mut rest: Vec<T> = match &page.after {
        Some(after) => items.into_iter().filter(|i| key(i) > *after).collect(),
        None => items,
    };
    match page.limit {
        Some(limit) if rest.len() > limit => {
            rest.truncate(limit);
            let next = rest.last().map(&key);
            (rest, next)
        }
        _ => (rest, None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trailing_slash_redirects_stay_on_this_server() {
        let loc = |s: &str| strip_trailing_slash(&s.parse::<Uri>().unwrap());
        assert_eq!(loc("/trident/v1/backend/").unwrap(), "/trident/v1/backend");
        assert_eq!(
            loc("/trident/v1/backend///?x=1").unwrap(),
            "/trident/v1/backend?x=1"
        );
        assert!(loc("/trident/v1/backend").is_none());
        assert!(loc("//evil.example/").is_none());
        assert!(loc("/trident/").is_none());
        assert!(loc("/trident//").is_none());
        assert!(loc("/other/").is_none());
    }
}
