//! Reading request bodies under a hard cap and a deadline, after checking their
//! `Content-Type`.

use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, header};
use futures::StreamExt;

use super::error::ErrorKind;

/// What a route reads from its body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Accepts {
    /// JSON only (`application/json` or a `+json` type).
    Json,
    /// JSON, or YAML when the type says YAML (backend configs, as Trident).
    JsonOrYaml,
}

/// The language a body is written in, from its `Content-Type`.
pub(crate) use super::input::Language as Format;

const YAML_TYPES: [&str; 4] = [
    "application/yaml",
    "application/x-yaml",
    "text/yaml",
    "text/x-yaml",
];

/// The format of a body from its `Content-Type`: JSON types, YAML types where the route takes
/// YAML, and `None` when there is no header (JSON; a backend config is read as JSON, else as
/// YAML, as Trident reads it). Anything else — including a form or `text/plain`, which a
/// browser may send across origins, and a charset other than UTF-8 — is 415 before the body
/// is read.
pub(crate) fn body_format(
    headers: &HeaderMap,
    accepts: Accepts,
) -> Result<Option<Format>, ErrorKind> {
    let accepted = match accepts {
        Accepts::Json => "application/json",
        Accepts::JsonOrYaml => "application/json or application/yaml",
    };
    let Some(value) = headers.get(header::CONTENT_TYPE) else {
        return Ok(None);
    };
    let refuse = || {
        let shown = String::from_utf8_lossy(value.as_bytes());
        ErrorKind::UnsupportedMediaType {
            given: crate::model::quote(&shown),
            accepted,
        }
    };
    let text = value.to_str().map_err(|_| refuse())?.to_ascii_lowercase();
    let mut parts = text.split(';');
    let essence = parts.next().unwrap_or_default().trim();
    for param in parts {
        let (name, val) = param.split_once('=').unwrap_or((param, ""));
        if name.trim() == "charset" && val.trim().trim_matches('"') != "utf-8" {
            return Err(refuse());
        }
    }
    let json = essence == "application/json"
        || (essence.starts_with("application/") && essence.ends_with("+json"));
    if json {
        Ok(Some(Format::Json))
    } else if accepts == Accepts::JsonOrYaml && YAML_TYPES.contains(&essence) {
        Ok(Some(Format::Yaml))
    } else {
        Err(refuse())
    }
}

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

    fn typed(value: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_str(value).unwrap());
        headers
    }

    #[test]
    fn content_types() {
        use Accepts::*;
        assert_eq!(body_format(&HeaderMap::new(), Json).unwrap(), None);
        for json in [
            "application/json",
            "Application/JSON; charset=UTF-8",
            "application/json;charset=\"utf-8\"",
            "application/merge-patch+json",
        ] {
            assert_eq!(body_format(&typed(json), Json).unwrap(), Some(Format::Json));
            assert_eq!(
                body_format(&typed(json), JsonOrYaml).unwrap(),
                Some(Format::Json)
            );
        }
        for yaml in ["application/yaml", "text/x-yaml; charset=utf-8"] {
            assert_eq!(
                body_format(&typed(yaml), JsonOrYaml).unwrap(),
                Some(Format::Yaml)
            );
            assert!(matches!(
                body_format(&typed(yaml), Json),
                Err(ErrorKind::UnsupportedMediaType { .. })
            ));
        }
        for bad in [
            "text/plain",
            "application/x-www-form-urlencoded",
            "multipart/form-data; boundary=x",
            "application/json; charset=latin1",
            "",
        ] {
            match body_format(&typed(bad), JsonOrYaml) {
                Err(ErrorKind::UnsupportedMediaType { given, accepted }) => {
                    assert_eq!(given, format!("{bad:?}"));
                    assert!(accepted.contains("yaml"));
                }
                other => panic!("{bad}: {other:?}"),
            }
        }
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
