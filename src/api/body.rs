//! Reading request bodies under a hard cap and a deadline.

use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, header};
use futures::StreamExt;

use super::error::ErrorKind;

/// Reads a whole body of at most `limit` bytes within `deadline`.
///
/// A declared `Content-Length` over the cap is refused before anything is read. Otherwise
/// frames are pulled one at a time and reading stops at the first frame that would cross the
/// cap, so a huge (e.g. chunked) body is cut off, never buffered.
pub(crate) async fn read_limited(
    headers: &HeaderMap,
    body: Body,
    limit: usize,
    deadline: Duration,
) -> Result<Bytes, ErrorKind> {
    if let Some(declared) = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
        && declared > limit as u64
    {
        return Err(ErrorKind::BodyTooLarge);
    }
    let read = async {
        let mut stream = body.into_data_stream();
        let mut buf: Vec<u8> = Vec::new();
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|e| ErrorKind::BodyRead(e.to_string()))?;
            if buf.len() + chunk.len() > limit {
                return Err(ErrorKind::BodyTooLarge);
            }
            buf.extend_from_slice(&chunk);
        }
        Ok(Bytes::from(buf))
    };
    tokio::time::timeout(deadline, read)
        .await
        .unwrap_or(Err(ErrorKind::BodyTimeout))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use axum::http::HeaderValue;

    use super::*;

    const SEC: Duration = Duration::from_secs(5);

    /// An endless body of `chunk`-byte frames that counts the bytes it hands out.
    fn endless(chunk: usize, counter: Arc<AtomicUsize>) -> Body {
        let stream = futures::stream::repeat_with(move || {
            counter.fetch_add(chunk, Ordering::SeqCst);
            Ok::<_, std::io::Error>(Bytes::from(vec![b'x'; chunk]))
        });
        Body::from_stream(stream)
    }

    #[tokio::test]
    async fn small_bodies_are_read() {
        let got = read_limited(&HeaderMap::new(), Body::from("hello"), 10, SEC)
            .await
            .unwrap();
        assert_eq!(&got[..], b"hello");
        let got = read_limited(&HeaderMap::new(), Body::from("0123456789"), 10, SEC)
            .await
            .unwrap();
        assert_eq!(got.len(), 10);
        let got = read_limited(&HeaderMap::new(), Body::empty(), 10, SEC)
            .await
            .unwrap();
        assert!(got.is_empty());
    }

    #[tokio::test]
    async fn one_byte_over_is_refused() {
        let err = read_limited(&HeaderMap::new(), Body::from("0123456789x"), 10, SEC)
            .await
            .unwrap_err();
        assert!(matches!(err, ErrorKind::BodyTooLarge));
    }

    #[tokio::test]
    async fn declared_length_over_the_cap_reads_nothing() {
        let counter = Arc::new(AtomicUsize::new(0));
        let mut headers = HeaderMap::new();
        headers.insert(header::CONTENT_LENGTH, HeaderValue::from_static("2000000"));
        let err = read_limited(&headers, endless(1024, counter.clone()), 1 << 20, SEC)
            .await
            .unwrap_err();
        assert!(matches!(err, ErrorKind::BodyTooLarge));
        assert_eq!(counter.load(Ordering::SeqCst), 0);
    }

    #[tokio::test]
    async fn endless_chunked_body_is_cut_off_at_the_cap() {
        let counter = Arc::new(AtomicUsize::new(0));
        let chunk = 8 * 1024;
        let limit = 1 << 20;
        let err = read_limited(
            &HeaderMap::new(),
            endless(chunk, counter.clone()),
            limit,
            SEC,
        )
        .await
        .unwrap_err();
        assert!(matches!(err, ErrorKind::BodyTooLarge));
        let pulled = counter.load(Ordering::SeqCst);
        assert!(pulled > limit, "{pulled}");
        assert!(
            pulled <= limit + chunk,
            "read {pulled} bytes past a cap of {limit}"
        );
    }

    #[tokio::test]
    async fn slow_bodies_time_out() {
        let stream = futures::stream::pending::<Result<Bytes, std::io::Error>>();
        let err = read_limited(
            &HeaderMap::new(),
            Body::from_stream(stream),
            10,
            Duration::from_millis(50),
        )
        .await
        .unwrap_err();
        assert!(matches!(err, ErrorKind::BodyTimeout));
    }

    #[tokio::test]
    async fn broken_bodies_are_read_errors() {
        let stream = futures::stream::iter(vec![
            Ok(Bytes::from_static(b"ab")),
            Err(std::io::Error::other("connection reset")),
        ]);
        let err = read_limited(&HeaderMap::new(), Body::from_stream(stream), 10, SEC)
            .await
            .unwrap_err();
        assert!(matches!(err, ErrorKind::BodyRead(m) if m.contains("connection reset")));
    }
}
