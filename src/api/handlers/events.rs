//! `GET /trident/v1/events`: the event log, as a list or as a live NDJSON stream.

use std::convert::Infallible;

use axum::body::{Body, Bytes};
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::Response;
use tokio::sync::mpsc;

use super::{Call, ReqCtx};
use crate::actors::{CoreError, EventRecord, RequestCtx};
use crate::api::dto::{ErrorResponse, EventExternal, EventListResponse};
use crate::api::error::{ApiError, ErrorKind, Op};
use crate::api::{AppState, Stopping, input};

/// The content type of a follow stream: one JSON object per line.
pub(crate) const CONTENT_TYPE_NDJSON: &str = "application/x-ndjson";

/// `GET /trident/v1/events?object=KIND/NAME&since=SEQ&limit=N`: `{"events":[…]}`, oldest
/// first. With `follow=true`, an `application/x-ndjson` stream instead: the matching events
/// already in the log, then each one as it commits, one object per line, until the client goes
/// away, `limit` events were sent, or the server stops. A line with an `error` key ends a
/// stream that failed.
#[utoipa::path(
    get,
    path = "/trident/v1/events",
    tag = "storch",
    params(
        ("object" = Option<String>, Query, description = "Only this object's events: `volume/NAME`, `backend/NAME` or `storageclass/NAME`"),
        ("since" = Option<u64>, Query, description = "Only events with this sequence number or later"),
        ("continue" = Option<String>, Query, description = "The `continue` of a list that `limit` cut (the sequence to go on from); not with `since`"),
        ("limit" = Option<usize>, Query, description = "At most this many events (1 to 100000; a list defaults to 10000, a follow stream to no limit)"),
        ("follow" = Option<bool>, Query, description = "Stream events as NDJSON as they commit"),
    ),
    responses(
        (status = 200, description = "The events (a list, or with follow=true one event object per line)",
            content(
                (EventListResponse = "application/json"),
                (EventExternal = "application/x-ndjson"),
            )),
        (status = 400, description = "A bad query parameter (the message names it)", body = ErrorResponse),
        (status = 503, description = "Following needs the log replayed first", body = ErrorResponse),
    ),
)]
pub(crate) async fn list(
    State(state): State<AppState>,
    ctx: ReqCtx,
    query: Result<Query<Vec<(String, String)>>, QueryRejection>,
) -> Result<Response, ApiError> {
    let call = Call::new(Op::ListEvents, ctx);
    let pairs = call.query(query)?;
    let q = call.input(input::parse_events_query(&pairs))?;
    if q.follow {
        let limit = q.filter.limit;
        let rx = call.core(state.core.follow(q.filter))?;
        return Ok(follow_response(
            rx,
            limit,
            state.stopping.clone(),
            call.ctx().clone(),
        ));
    }
    // One more than asked says whether the list was cut; the next page starts at its seq.
    let mut filter = q.filter;
    let limit = filter.limit;
    filter.limit = limit.map(|l| l + 1);
    let mut records = call.core(state.core.events(filter).await)?;
    let next = match limit {
        Some(l) if records.len() > l => {
            records.truncate(l);
            records.last().map(|r| (r.seq + 1).to_string())
        }
        _ => None,
    };
    let events = call.events(records)?;
    call.reply(StatusCode::OK, &EventListResponse { events, next })
}

struct Follow {
    rx: mpsc::Receiver<Result<EventRecord, CoreError>>,
    stopping: Stopping,
    left: Option<usize>,
    ctx: RequestCtx,
    done: bool,
}

/// The NDJSON response of a follow: each event is written (and flushed) as it arrives.
fn follow_response(
    rx: mpsc::Receiver<Result<EventRecord, CoreError>>,
    limit: Option<usize>,
    stopping: Stopping,
    ctx: RequestCtx,
) -> Response {
    let state = Follow {
        rx,
        stopping,
        left: limit,
        ctx,
        done: false,
    };
    let stream = futures::stream::unfold(state, |mut st| async move {
        if st.done || st.left == Some(0) {
            return None;
        }
        let next = tokio::select! {
            biased;
            () = st.stopping.wait() => {
                tracing::debug!(request_id = %st.ctx.request_id, "server stopping: event stream ended");
                return None;
            }
            next = st.rx.recv() => next,
        };
        let line = match next {
            None => return None,
            Some(Ok(record)) => match EventExternal::from_record(record) {
                Ok(event) => {
                    st.left = st.left.map(|n| n - 1);
                    line_of(&event)
                }
                Err(e) => {
                    st.done = true;
                    error_line(&st.ctx, ErrorKind::Encode(e.to_string()))
                }
            },
            Some(Err(e)) => {
                st.done = true;
                error_line(&st.ctx, ErrorKind::Core(e))
            }
        };
        Some((Ok::<Bytes, Infallible>(line), st))
    });
    let mut response = Response::new(Body::from_stream(stream));
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(CONTENT_TYPE_NDJSON),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}

fn line_of<T: serde::Serialize>(value: &T) -> Bytes {
    let mut bytes = serde_json::to_vec(value).unwrap_or_else(|_| b"{}".to_vec());
    bytes.push(b'\n');
    Bytes::from(bytes)
}

/// The last line of a stream that failed: `{"error":"…"}` (no internal detail; it is logged).
fn error_line(ctx: &RequestCtx, kind: ErrorKind) -> Bytes {
    let error = ApiError::new(Op::ListEvents, ctx, kind);
    tracing::warn!(
        request_id = %ctx.request_id,
        error = ?error.kind(),
        "event follow stream failed"
    );
    line_of(&ErrorResponse {
        error: error.public_message(),
    })
}
