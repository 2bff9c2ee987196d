//! REST tests over a real socket: the real core with the `fake` driver, served by
//! `storch::api::serve` on 127.0.0.1:0 in-process, and one test against the real binary.
//!
//! Every answer goes through [`reply`], which checks what every response must have: Trident's
//! JSON content type, a body that parses as JSON and ends in `\n`, and an `X-Request-Id`.
//! Every refused request goes through [`Api::refused`], which also checks that nothing changed
//! (every list, every listed object, and the length of the event log). `bad_input` walks the
//! route table with bad input of every kind.

mod backends;
mod bad_input;
mod classes;
mod requests;
mod routing;
mod volumes;

use std::net::SocketAddr;
use std::time::Duration;

use crate::support::*;
use reqwest::Method;
use reqwest::header::HeaderMap;
use serde_json::{Map, Value, json};
use storch::actors::CoreRuntime;

const V1: &str = "/trident/v1";
const CONTENT_TYPE: &str = "application/json; charset=UTF-8";
const MANDATORY: &str = "the following fields for \"Volume\" are mandatory: name and size";

/// One answer: status, parsed JSON body, headers.
struct Reply {
    status: u16,
    json: Value,
    headers: HeaderMap,
}

/// Reads a response and checks what every response must have.
async fn reply(r: reqwest::Response, what: &str) -> Reply {
    let status = r.status().as_u16();
    let headers = r.headers().clone();
    let bytes = r.bytes().await.unwrap_or_else(|e| panic!("{what}: {e}"));
    assert_eq!(
        headers.get("content-type").and_then(|v| v.to_str().ok()),
        Some(CONTENT_TYPE),
        "{what}: content type"
    );
    let rid = headers
        .get("x-request-id")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    assert!(!rid.is_empty(), "{what}: no X-Request-Id");
    assert!(bytes.ends_with(b"\n"), "{what}: body does not end in \\n");
    let json = serde_json::from_slice(&bytes).unwrap_or_else(|e| {
        panic!(
            "{what}: body is not JSON ({e}): {}",
            String::from_utf8_lossy(&bytes)
        )
    });
    Reply {
        status,
        json,
        headers,
    }
}

/// The error message of an error body, after checking the body is exactly the operation's
/// envelope: `payload` (e.g. `("backend", "")`) if any, plus a non-empty `error`.
fn error_of(r: &Reply, payload: Option<(&str, Value)>) -> String {
    let obj = r.json.as_object().expect("an object");
    let msg = obj
        .get("error")
        .and_then(Value::as_str)
        .unwrap_or_else(|| panic!("no error in {}", r.json))
        .to_string();
    assert!(!msg.is_empty(), "{}", r.json);
    let mut want = Map::new();
    if let Some((k, v)) = payload {
        want.insert(k.to_string(), v);
    }
    want.insert("error".to_string(), Value::from(msg.clone()));
    assert_eq!(obj, &want, "error envelope");
    msg
}

/// A running API: core, server task, client.
struct Api {
    addr: SocketAddr,
    base: String,
    client: reqwest::Client,
    stop: tokio::sync::oneshot::Sender<()>,
    server: tokio::task::JoinHandle<std::io::Result<()>>,
    runtime: CoreRuntime,
    _dir: tempfile::TempDir,
}

impl Api {
    async fn start() -> Api {
        let dir = tempfile::tempdir().unwrap();
        let runtime = start(dir.path()).await;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let server = tokio::spawn(storch::api::serve(listener, runtime.core(), async move {
            let _ = stopped.await;
        }));
        let client = storch::net::client_builder()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(Duration::from_secs(30))
            .build()
            .unwrap();
        Api {
            addr,
            base: format!("http://{addr}"),
            client,
            stop,
            server,
            runtime,
            _dir: dir,
        }
    }

    /// Signals the server, waits for it, then shuts the core down.
    async fn shutdown(self) {
        drop(self.client);
        self.stop.send(()).unwrap();
        tokio::time::timeout(Duration::from_secs(10), self.server)
            .await
            .expect("serve returns promptly after the shutdown signal")
            .unwrap()
            .unwrap();
        self.runtime.shutdown().await;
    }

    async fn call(&self, method: Method, path: &str, body: Option<Vec<u8>>) -> Reply {
        self.call_typed(method, path, body, None).await
    }

    /// A request with a `Content-Type` header (or none).
    async fn call_typed(
        &self,
        method: Method,
        path: &str,
        body: Option<Vec<u8>>,
        content_type: Option<&str>,
    ) -> Reply {
        let what = format!("{method} {path}");
        let mut req = self.client.request(method, format!("{}{path}", self.base));
        if let Some(b) = body {
            req = req.body(b);
        }
        if let Some(t) = content_type {
            req = req.header("content-type", t);
        }
        let r = req.send().await.unwrap_or_else(|e| panic!("{what}: {e}"));
        reply(r, &what).await
    }

    async fn get(&self, path: &str) -> Reply {
        self.call(Method::GET, path, None).await
    }

    async fn delete(&self, path: &str) -> Reply {
        self.call(Method::DELETE, path, None).await
    }

    async fn post(&self, path: &str, body: impl Into<Vec<u8>>) -> Reply {
        self.call(Method::POST, path, Some(body.into())).await
    }

    async fn post_json(&self, path: &str, body: &Value) -> Reply {
        self.post(path, body.to_string()).await
    }

    /// POST that must succeed with `status`; returns the body.
    async fn ok(&self, path: &str, body: &Value, status: u16) -> Value {
        let r = self.post_json(path, body).await;
        assert_eq!(r.status, status, "POST {path} {body}: {}", r.json);
        r.json
    }

    /// A name list (`backends`, `volumes`, `storageClasses`).
    async fn list(&self, what: &str, key: &str) -> Vec<String> {
        let r = self.get(&format!("{V1}/{what}")).await;
        assert_eq!(r.status, 200, "{}", r.json);
        assert_eq!(r.json.as_object().unwrap().len(), 1, "{}", r.json);
        serde_json::from_value(r.json[key].clone()).unwrap()
    }

    /// How many events the log holds.
    async fn log_len(&self) -> usize {
        let r = self.get(&format!("{V1}/events?limit=100000")).await;
        assert_eq!(r.status, 200, "{}", r.json);
        r.json["events"].as_array().expect("an event list").len()
    }

    /// Everything the API shows: the three lists and every listed object.
    async fn state(&self) -> Value {
        let mut out = Map::new();
        for (what, key) in [
            ("backend", "backends"),
            ("volume", "volumes"),
            ("storageclass", "storageClasses"),
        ] {
            let names = self.list(what, key).await;
            for name in &names {
                let r = self.get(&format!("{V1}/{what}/{name}")).await;
                assert_eq!(r.status, 200, "{what} {name}: {}", r.json);
                out.insert(format!("{what}/{name}"), r.json);
            }
            out.insert(key.to_string(), json!(names));
        }
        Value::Object(out)
    }

    /// A request that must fail with `status` and change nothing the API shows, nor record
    /// anything.
    async fn refused(
        &self,
        method: Method,
        path: &str,
        body: Option<Vec<u8>>,
        status: u16,
    ) -> Reply {
        self.refused_typed(method, path, body, None, status).await
    }

    /// A create that fails after placement tried pools: it must fail with `status` and change
    /// nothing the API shows, but its attempts are recorded (that is the audit trail).
    async fn failed_post(&self, path: &str, body: impl Into<Vec<u8>>, status: u16) -> Reply {
        self.refused_checked(Method::POST, path, Some(body.into()), None, status, false)
            .await
    }

    /// [`Api::refused`] with a `Content-Type`.
    async fn refused_typed(
        &self,
        method: Method,
        path: &str,
        body: Option<Vec<u8>>,
        content_type: Option<&str>,
        status: u16,
    ) -> Reply {
        self.refused_checked(method, path, body, content_type, status, true)
            .await
    }

    async fn refused_checked(
        &self,
        method: Method,
        path: &str,
        body: Option<Vec<u8>>,
        content_type: Option<&str>,
        status: u16,
        log_unchanged: bool,
    ) -> Reply {
        let before = self.state().await;
        let log_before = self.log_len().await;
        let shown = body
            .as_ref()
            .map(|b| String::from_utf8_lossy(&b[..b.len().min(200)]).into_owned())
            .unwrap_or_default();
        let r = self
            .call_typed(method.clone(), path, body, content_type)
            .await;
        assert_eq!(
            r.status, status,
            "{method} {path} {shown}: unexpected answer {}",
            r.json
        );
        assert!(
            r.json["error"].as_str().is_some_and(|e| !e.is_empty()),
            "{method} {path}: no error in {}",
            r.json
        );
        let after = self.state().await;
        assert_eq!(after, before, "{method} {path} {shown} changed the state");
        if log_unchanged {
            assert_eq!(
                self.log_len().await,
                log_before,
                "{method} {path} {shown} recorded events"
            );
        }
        r
    }

    async fn refused_post(&self, path: &str, body: impl Into<Vec<u8>>, status: u16) -> Reply {
        self.refused(Method::POST, path, Some(body.into()), status)
            .await
    }
}

/// A raw HTTP/1.1 answer.
struct RawReply {
    status: u16,
    head: String,
    json: Value,
}

/// Splits a raw response once it is complete (head and `Content-Length` bytes of body).
fn parse_raw(buf: &[u8]) -> Option<RawReply> {
    let end = buf.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = String::from_utf8_lossy(&buf[..end]).into_owned();
    let len: usize = head
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("content-length")
                .then(|| v.trim().parse().ok())?
        })
        .expect("a content-length");
    let body = buf.get(end + 4..end + 4 + len)?;
    let status = head.split(' ').nth(1)?.parse().ok()?;
    let json = serde_json::from_slice(body).unwrap_or_else(|e| {
        panic!(
            "raw body is not JSON ({e}): {}",
            String::from_utf8_lossy(body)
        )
    });
    Some(RawReply { status, head, json })
}

/// Sends `head` (a whole request head, without the final blank line) and then `chunks` of a
/// chunked body, at most `total` bytes, while reading the answer; stops writing as soon as the
/// answer is complete. For what `reqwest` cannot send (literal `..` path segments, which URL
/// parsing resolves) or cannot stream (this build has no `stream` feature).
async fn raw_exchange(addr: SocketAddr, head: &str, chunked_total: Option<usize>) -> RawReply {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (mut rd, mut wr) = stream.into_split();
    let head = format!("{head}\r\n");
    let writer = tokio::spawn(async move {
        wr.write_all(head.as_bytes()).await?;
        let mut sent = 0usize;
        if let Some(total) = chunked_total {
            let chunk = vec![b' '; 64 * 1024];
            while sent < total {
                wr.write_all(format!("{:x}\r\n", chunk.len()).as_bytes())
                    .await?;
                wr.write_all(&chunk).await?;
                wr.write_all(b"\r\n").await?;
                sent += chunk.len();
            }
            wr.write_all(b"0\r\n\r\n").await?;
        }
        wr.flush().await?;
        // Keep the write half open until the answer is read: the server closes a connection
        // whose client half-closes.
        std::future::pending::<()>().await;
        Ok::<usize, std::io::Error>(sent)
    });
    let mut buf = Vec::new();
    let mut scratch = [0u8; 8192];
    let answer = tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            if let Some(r) = parse_raw(&buf) {
                return r;
            }
            match rd.read(&mut scratch).await {
                Ok(0) => panic!(
                    "connection closed before a whole answer: {}",
                    String::from_utf8_lossy(&buf)
                ),
                Ok(n) => buf.extend_from_slice(&scratch[..n]),
                Err(e) => panic!("read failed ({e}) after {}", String::from_utf8_lossy(&buf)),
            }
        }
    })
    .await
    .expect("an answer within 20 s");
    writer.abort();
    answer
}

/// A request head for `raw_exchange`.
fn raw_head(method: &str, target: &str, extra: &str) -> String {
    format!("{method} {target} HTTP/1.1\r\nhost: localhost\r\nconnection: close\r\n{extra}")
}

fn ssd_backend(name: &str) -> Value {
    fake_backend(name, "file", &[("fast", ssd()), ("slow", hdd())])
}

fn volume(name: &str, size: &str, class: &str) -> Value {
    json!({"name": name, "size": size, "storageClass": class})
}
