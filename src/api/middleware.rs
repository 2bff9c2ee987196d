//! Per-request tracking: request id, tracing span, panic guard, final log line, and the HTTP
//! request metrics (`storch_http_requests_total`, `storch_http_request_duration_seconds`, by
//! route template, method and status).

use std::panic::AssertUnwindSafe;
use std::time::Instant;

use axum::extract::{MatchedPath, Request};
use axum::http::{HeaderMap, HeaderName, HeaderValue};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use futures::FutureExt;
use tracing::Instrument;

use crate::actors::RequestCtx;

use super::error::{ApiError, ErrorKind, Op};

/// The request id header, read (when safe) and always written.
pub const REQUEST_ID_HEADER: HeaderName = HeaderName::from_static("x-request-id");

/// The longest client-supplied request id accepted.
const MAX_REQUEST_ID_LEN: usize = 64;

/// The longest path written to the log.
const MAX_LOGGED_PATH: usize = 256;

/// A client's `X-Request-Id` if it is a short safe token (`[A-Za-z0-9._-]`, 1 to 64 chars):
/// request ids go into logs and events, so nothing else is taken.
pub(crate) fn incoming_request_id(headers: &HeaderMap) -> Option<String> {
    let value = headers.get(&REQUEST_ID_HEADER)?.to_str().ok()?;
    let ok = !value.is_empty()
        && value.len() <= MAX_REQUEST_ID_LEN
        && value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    ok.then(|| value.to_string())
}

/// Gives the request an id (put in its extensions as a [`RequestCtx`] and in the response's
/// `X-Request-Id`), runs it inside a span `request{request_id, method, path, op}`, turns a
/// handler panic into a 500 of the operation's envelope, and logs status and latency at the
/// end. Bodies are never logged.
pub(crate) async fn track(mut req: Request, next: Next) -> Response {
    let request_id =
        incoming_request_id(req.headers()).unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
    let op = Op::classify(req.method(), req.uri().path());
    let path = req.uri().path();
    let logged_path = match path.char_indices().nth(MAX_LOGGED_PATH) {
        Some((cut, _)) => &path[..cut],
        None => path,
    };
    let span = tracing::info_span!(
        "request",
        request_id = %request_id,
        method = %req.method(),
        path = %logged_path,
        op = op.as_str(),
    );
    let ctx = RequestCtx::new(request_id.clone());
    req.extensions_mut().insert(ctx.clone());
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map(|p| p.as_str().to_string())
        .unwrap_or_else(|| "unmatched".to_string());
    let method = method_label(req.method());
    let started = Instant::now();

    let mut response = async move {
        match AssertUnwindSafe(next.run(req)).catch_unwind().await {
            Ok(response) => response,
            Err(_) => ApiError::new(op, &ctx, ErrorKind::Panic).into_response(),
        }
    }
    .instrument(span.clone())
    .await;

    let status = response.status().as_u16();
    let elapsed = started.elapsed();
    let latency_ms = elapsed.as_micros() as f64 / 1000.0;
    let labels = [
        ("route", route),
        ("method", method.to_string()),
        ("status", status.to_string()),
    ];
    metrics::counter!("storch_http_requests_total", &labels).increment(1);
    metrics::histogram!("storch_http_request_duration_seconds", &labels)
        .record(elapsed.as_secs_f64());
    span.in_scope(|| tracing::info!(status, latency_ms, "request finished"));
    if let Ok(value) = HeaderValue::from_str(&request_id) {
        response.headers_mut().insert(REQUEST_ID_HEADER, value);
    }
    response
}

/// The method as a metric label: the standard ones by name, anything else as `other` (a
/// client must not be able to mint label values).
fn method_label(method: &axum::http::Method) -> &'static str {
    use axum::http::Method;
    match *method {
        Method::GET => "GET",
        Method::HEAD => "HEAD",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::DELETE => "DELETE",
        Method::PATCH => "PATCH",
        Method::OPTIONS => "OPTIONS",
        _ => "other",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(value: &[u8]) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(REQUEST_ID_HEADER, HeaderValue::from_bytes(value).unwrap());
        h
    }

    #[test]
    fn incoming_ids_must_be_short_safe_tokens() {
        assert_eq!(
            incoming_request_id(&with(b"abc-123_x.y")).as_deref(),
            Some("abc-123_x.y")
        );
        let uuid = uuid::Uuid::new_v4().to_string();
        assert_eq!(
            incoming_request_id(&with(uuid.as_bytes())).as_deref(),
            Some(uuid.as_str())
        );
        assert_eq!(incoming_request_id(&HeaderMap::new()), None);
        assert_eq!(incoming_request_id(&with(b"")), None);
        assert_eq!(incoming_request_id(&with(b"a b")), None);
        assert_eq!(incoming_request_id(&with(b"a/b")), None);
        assert_eq!(incoming_request_id(&with(b"a\"b")), None);
        assert_eq!(incoming_request_id(&with(b"caf\xc3\xa9")), None);
        assert_eq!(incoming_request_id(&with("x".repeat(65).as_bytes())), None);
        assert!(incoming_request_id(&with("x".repeat(64).as_bytes())).is_some());
    }
}
