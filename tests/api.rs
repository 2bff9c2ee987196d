//! REST tests over a real socket: the real core with the `fake` driver, served by
//! `storch::api::serve` on 127.0.0.1:0 in-process, and one test against the real binary.
//!
//! Every answer goes through [`reply`], which checks what every response must have: Trident's
//! JSON content type, a body that parses as JSON and ends in `\n`, and an `X-Request-Id`.
//! Every refused request goes through [`Api::refused`], which also checks that nothing changed
//! (every list, and every listed object).

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use common::*;
use reqwest::Method;
use reqwest::header::HeaderMap;
use serde_json::{Map, Value, json};
use storch::actors::CoreRuntime;

const V1: &str = "/trident/v1";
const CONTENT_TYPE: &str = "application/json; charset=UTF-8";
const MANDATORY: &str = "the following fields for \"Volume\" are mandatory: name and size";

// ---------------------------------------------------------------------------------------------
// Harness

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
        let runtime = CoreRuntime::start(opts(dir.path()))
            .await
            .expect("core starts");
        wait_ready(&runtime.core()).await;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let server = tokio::spawn(storch::api::serve(listener, runtime.core(), async move {
            let _ = stopped.await;
        }));
        let client = common::client_builder()
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
        let what = format!("{method} {path}");
        let mut req = self.client.request(method, format!("{}{path}", self.base));
        if let Some(b) = body {
            req = req.body(b);
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

    /// A request that must fail with `status` and change nothing the API shows.
    async fn refused(
        &self,
        method: Method,
        path: &str,
        body: Option<Vec<u8>>,
        status: u16,
    ) -> Reply {
        let before = self.state().await;
        let shown = body
            .as_ref()
            .map(|b| String::from_utf8_lossy(&b[..b.len().min(200)]).into_owned())
            .unwrap_or_default();
        let r = self.call(method.clone(), path, body).await;
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

// ---------------------------------------------------------------------------------------------
// Version, request ids, routing

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn version_on_both_paths() {
    let api = Api::start().await;
    for path in ["/trident/version", "/trident/v1/version"] {
        let r = api.get(path).await;
        assert_eq!(r.status, 200, "{path}");
        assert_eq!(r.json["version"], "18.07.0", "{path}");
        assert!(r.json["storchVersion"].is_string(), "{}", r.json);
        assert_eq!(r.json.as_object().unwrap().len(), 2, "{}", r.json);
    }
    api.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_ids_are_made_or_echoed() {
    let api = Api::start().await;
    let a = api.get("/trident/v1/version").await;
    let b = api.get("/trident/v1/version").await;
    assert_ne!(a.headers["x-request-id"], b.headers["x-request-id"]);
    // a safe client id is echoed, on success and on error
    for path in ["/trident/v1/version", "/trident/v1/volume/nope", "/nowhere"] {
        let r = api
            .client
            .get(format!("{}{path}", api.base))
            .header("x-request-id", "client-id-42")
            .send()
            .await
            .unwrap();
        let r = reply(r, path).await;
        assert_eq!(r.headers["x-request-id"], "client-id-42", "{path}");
    }
    // an unsafe one is replaced
    let r = api
        .client
        .get(format!("{}/trident/v1/version", api.base))
        .header("x-request-id", "a b/c")
        .send()
        .await
        .unwrap();
    let r = reply(r, "unsafe id").await;
    let rid = r.headers["x-request-id"].to_str().unwrap();
    assert_ne!(rid, "a b/c");
    assert!(!rid.is_empty());
    api.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_paths_are_json_404() {
    let api = Api::start().await;
    for (method, path) in [
        (Method::GET, "/"),
        (Method::GET, "/trident"),
        (Method::GET, "/trident/v2/volume"),
        (Method::GET, "/trident/v1/volumes"),
        (Method::POST, "/trident/v1/snapshots"),
        (Method::GET, "/trident/v1/volume/a/b"),
        (Method::DELETE, "/trident/v1/backend/a/b"),
        (Method::GET, "/trident/v1/storageclass/a/b/c"),
        (Method::PUT, "/trident/v1/nodes"),
    ] {
        let r = api
            .refused(method.clone(), path, Some(b"{}".to_vec()), 404)
            .await;
        assert_eq!(
            error_of(&r, None),
            "no such API path",
            "{method} {path}: {}",
            r.json
        );
    }
    api.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trailing_slashes_redirect_to_the_path_without() {
    let api = Api::start().await;
    let r = api.get("/trident/v1/backend/").await;
    assert_eq!(r.status, 301);
    assert_eq!(r.headers["location"], "/trident/v1/backend");
    let r = api.get("/trident/v1/volume/v1/?x=1").await;
    assert_eq!(r.status, 301);
    assert_eq!(r.headers["location"], "/trident/v1/volume/v1?x=1");
    api.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_methods_are_json_405_with_allow() {
    let api = Api::start().await;
    api.ok(&format!("{V1}/backend"), &ssd_backend("nas"), 201)
        .await;
    let cases: &[(Method, &str, &[&str])] = &[
        (Method::POST, "/trident/version", &["GET"]),
        (Method::DELETE, "/trident/v1/version", &["GET"]),
        (Method::PUT, "/trident/v1/backend", &["GET", "POST"]),
        (Method::DELETE, "/trident/v1/backend", &["GET", "POST"]),
        (
            Method::PUT,
            "/trident/v1/backend/nas",
            &["GET", "POST", "DELETE"],
        ),
        (
            Method::PATCH,
            "/trident/v1/backend/nas",
            &["GET", "POST", "DELETE"],
        ),
        (Method::DELETE, "/trident/v1/volume", &["GET", "POST"]),
        (Method::PUT, "/trident/v1/volume/v1", &["GET", "DELETE"]),
        (Method::POST, "/trident/v1/volume/v1", &["GET", "DELETE"]),
        (Method::PUT, "/trident/v1/storageclass", &["GET", "POST"]),
        (
            Method::POST,
            "/trident/v1/storageclass/gold",
            &["GET", "DELETE"],
        ),
    ];
    for (method, path, allowed) in cases {
        let body = json!({"name": "v1", "size": "1G"}).to_string().into_bytes();
        let r = api.refused(method.clone(), path, Some(body), 405).await;
        let msg = error_of(&r, None);
        assert!(
            msg.contains(method.as_str()) && msg.contains("Allow"),
            "{method} {path}: {msg}"
        );
        let allow = r
            .headers
            .get("allow")
            .unwrap_or_else(|| panic!("{method} {path}: no Allow header"))
            .to_str()
            .unwrap()
            .to_string();
        let allow: Vec<&str> = allow.split(',').map(str::trim).collect();
        for m in *allowed {
            assert!(allow.contains(m), "{method} {path}: Allow {allow:?}");
        }
        assert!(
            !allow.contains(&method.as_str()),
            "{method} {path}: Allow {allow:?}"
        );
    }
    // the backend is untouched by the PUT/PATCH on its path
    assert_eq!(api.list("backend", "backends").await, ["nas"]);
    api.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn head_and_options() {
    let api = Api::start().await;
    // HEAD answers like GET, without a body
    for path in [
        "/trident/version",
        "/trident/v1/backend",
        "/trident/v1/volume",
    ] {
        let r = api
            .client
            .head(format!("{}{path}", api.base))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 200, "{path}");
        assert_eq!(r.headers()["content-type"], CONTENT_TYPE, "{path}");
        assert!(r.headers().contains_key("x-request-id"), "{path}");
        assert!(r.bytes().await.unwrap().is_empty(), "{path}");
    }
    // OPTIONS is a wrong method like any other
    let r = api
        .refused(Method::OPTIONS, "/trident/v1/volume", None, 405)
        .await;
    error_of(&r, None);
    let allow = r.headers["allow"].to_str().unwrap();
    assert!(allow.contains("GET") && allow.contains("POST"), "{allow}");
    api.shutdown().await;
}

// ---------------------------------------------------------------------------------------------
// Backends

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backend_add_get_list_update_delete() {
    let api = Api::start().await;
    let mut be = ssd_backend("nas");
    be["password"] = json!("pw-canary-5531");
    be["username"] = json!("admin");
    be["chapInitiatorSecret"] = json!("chap-canary-5532");
    be["apiToken"] = json!("token-canary-5533");
    let r = api.post_json(&format!("{V1}/backend"), &be).await;
    assert_eq!(r.status, 201, "{}", r.json);
    assert_eq!(r.json, json!({"backend": "nas"}));

    // a class so that pools show it
    api.ok(
        &format!("{V1}/storageclass"),
        &json!({"name": "gold", "attributes": {"media": "ssd"}}),
        201,
    )
    .await;

    let r = api.get(&format!("{V1}/backend/nas")).await;
    assert_eq!(r.status, 200, "{}", r.json);
    let b = &r.json["backend"];
    assert_eq!(r.json.as_object().unwrap().len(), 1);
    assert_eq!(b["name"], "nas");
    assert_eq!(b["protocol"], "file");
    assert_eq!(b["online"], true);
    assert_eq!(b["state"], "online");
    assert_eq!(b["volumes"], json!([]));
    assert_eq!(b["config"]["storageDriverName"], "fake");
    let shown = r.json.to_string();
    for canary in ["pw-canary-5531", "chap-canary-5532", "token-canary-5533"] {
        assert!(!shown.contains(canary), "a secret is shown: {shown}");
    }
    for key in b["config"].as_object().unwrap().keys() {
        let k = key.to_ascii_lowercase();
        assert!(
            !k.contains("password") && !k.contains("secret") && !k.contains("token"),
            "config shows {key}"
        );
    }
    let pools = b["storage"].as_object().unwrap();
    assert_eq!(pools.len(), 2, "{}", b["storage"]);
    let fast = &b["storage"]["fast"];
    assert_eq!(fast["name"], "fast");
    assert_eq!(fast["storageClasses"], json!(["gold"]));
    let attrs = &fast["storageAttributes"];
    assert_eq!(attrs["media"], json!({"offer": ["ssd"]}));
    assert_eq!(attrs["snapshots"], json!({"offer": true}));
    assert_eq!(attrs["IOPS"], json!({"min": 100, "max": 10000}));
    assert_eq!(
        attrs["provisioningType"]["offer"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect::<std::collections::BTreeSet<_>>(),
        ["thick", "thin"].into()
    );
    assert_eq!(attrs["backendType"], json!({"offer": ["fake"]}));
    let slow = &b["storage"]["slow"];
    assert_eq!(slow["name"], "slow");
    assert_eq!(slow["storageClasses"], json!([]));
    assert_eq!(
        slow["storageAttributes"]["snapshots"],
        json!({"offer": false})
    );
    assert_eq!(
        slow["storageAttributes"]["media"],
        json!({"offer": ["hdd"]})
    );

    // a YAML body
    let yaml = "version: 1\nstorageDriverName: fake\nbackendName: san\ninstanceName: san\n\
                protocol: block\npools:\n  p1:\n    sizeBytes: 10737418240\n    attributes:\n      \
                media: {offer: [ssd]}\n      IOPS: {min: 10, max: 20}\n";
    let r = api.post(&format!("{V1}/backend"), yaml).await;
    assert_eq!(r.status, 201, "{}", r.json);
    assert_eq!(r.json, json!({"backend": "san"}));
    let r = api.get(&format!("{V1}/backend/san")).await;
    assert_eq!(r.json["backend"]["protocol"], "block");
    assert_eq!(
        r.json["backend"]["storage"]["p1"]["storageAttributes"]["IOPS"],
        json!({"min": 10, "max": 20})
    );
    assert_eq!(
        r.json["backend"]["storage"]["p1"]["storageClasses"],
        json!(["gold"])
    );

    let backends = api.list("backend", "backends").await;
    assert_eq!(backends, ["nas", "san"]);

    // POST of an existing name is an update: 201, the new pools replace the old
    let mut be2 = ssd_backend("nas");
    be2["pools"]["extra"] = json!({"attributes": {}, "sizeBytes": 1u64 << 30});
    let r = api.post_json(&format!("{V1}/backend"), &be2).await;
    assert_eq!(r.status, 201, "{}", r.json);
    assert_eq!(r.json, json!({"backend": "nas"}));
    let r = api.get(&format!("{V1}/backend/nas")).await;
    assert_eq!(r.json["backend"]["storage"].as_object().unwrap().len(), 3);
    assert_eq!(api.list("backend", "backends").await, ["nas", "san"]);

    // POST /backend/{name}: 200; back to two pools
    let r = api
        .post_json(&format!("{V1}/backend/nas"), &ssd_backend("nas"))
        .await;
    assert_eq!(r.status, 200, "{}", r.json);
    assert_eq!(r.json, json!({"backend": "nas"}));
    let r = api.get(&format!("{V1}/backend/nas")).await;
    assert_eq!(r.json["backend"]["storage"].as_object().unwrap().len(), 2);

    // an update may rename
    let r = api
        .post_json(&format!("{V1}/backend/nas"), &ssd_backend("nas2"))
        .await;
    assert_eq!(r.status, 200, "{}", r.json);
    assert_eq!(r.json, json!({"backend": "nas2"}));
    assert_eq!(api.list("backend", "backends").await, ["nas2", "san"]);
    let r = api
        .refused(Method::GET, &format!("{V1}/backend/nas"), None, 404)
        .await;
    assert_eq!(
        error_of(&r, Some(("backend", Value::Null))),
        "backend nas was not found"
    );
    // renaming onto an existing backend is a conflict
    let r = api
        .refused_post(
            &format!("{V1}/backend/nas2"),
            ssd_backend("san").to_string(),
            409,
        )
        .await;
    assert_eq!(
        error_of(&r, Some(("backend", json!("")))),
        "backend san already exists"
    );

    // DELETE: 200 {}, then 404
    let r = api.delete(&format!("{V1}/backend/nas2")).await;
    assert_eq!(r.status, 200, "{}", r.json);
    assert_eq!(r.json, json!({}));
    assert_eq!(api.list("backend", "backends").await, ["san"]);
    let r = api
        .refused(Method::DELETE, &format!("{V1}/backend/nas2"), None, 404)
        .await;
    assert_eq!(error_of(&r, None), "backend nas2 not found");
    let r = api
        .refused(Method::GET, &format!("{V1}/backend/nas2"), None, 404)
        .await;
    assert_eq!(
        error_of(&r, Some(("backend", Value::Null))),
        "backend nas2 was not found"
    );
    // the class lost the deleted backend's pools
    let r = api.get(&format!("{V1}/storageclass/gold")).await;
    assert_eq!(r.json["storageClass"]["storage"], json!({"san": ["p1"]}));
    api.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn update_of_an_unknown_backend_is_404() {
    let api = Api::start().await;
    api.ok(&format!("{V1}/backend"), &ssd_backend("nas"), 201)
        .await;
    let r = api
        .refused_post(
            &format!("{V1}/backend/nope"),
            ssd_backend("nope").to_string(),
            404,
        )
        .await;
    assert_eq!(
        error_of(&r, Some(("backend", json!("")))),
        "backend nope was not found"
    );
    // even when the body names an existing backend
    let r = api
        .refused_post(
            &format!("{V1}/backend/nope"),
            ssd_backend("nas").to_string(),
            404,
        )
        .await;
    assert_eq!(
        error_of(&r, Some(("backend", json!("")))),
        "backend nope was not found"
    );
    api.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_backend_with_volumes_takes_it_offline() {
    let api = Api::start().await;
    api.ok(&format!("{V1}/backend"), &ssd_backend("nas"), 201)
        .await;
    api.ok(&format!("{V1}/storageclass"), &json!({"name": "any"}), 201)
        .await;
    api.ok(&format!("{V1}/volume"), &volume("v", "1Gi", "any"), 201)
        .await;

    let r = api.delete(&format!("{V1}/backend/nas")).await;
    assert_eq!(r.status, 200, "{}", r.json);
    assert_eq!(r.json, json!({}));
    assert!(
        api.list("backend", "backends").await.is_empty(),
        "offline backends are not listed"
    );
    let r = api.get(&format!("{V1}/backend/nas")).await;
    assert_eq!(r.status, 200, "offline backends can be fetched: {}", r.json);
    assert_eq!(r.json["backend"]["online"], false);
    assert_eq!(r.json["backend"]["state"], "offline");
    assert_eq!(r.json["backend"]["volumes"], json!(["v"]));
    // its volume is still listed and shown
    assert_eq!(api.list("volume", "volumes").await, ["v"]);
    let r = api.get(&format!("{V1}/volume/v")).await;
    assert_eq!(r.json["volume"]["backend"], "nas");
    // its pools left the class; no new volume can go there
    let r = api.get(&format!("{V1}/storageclass/any")).await;
    assert_eq!(r.json["storageClass"]["storage"], json!({}));
    let r = api
        .refused_post(
            &format!("{V1}/volume"),
            volume("w", "1Gi", "any").to_string(),
            400,
        )
        .await;
    error_of(&r, Some(("backend", json!(""))));
    // deleting it again is still 200, and it stays offline
    let r = api.delete(&format!("{V1}/backend/nas")).await;
    assert_eq!(r.status, 200, "{}", r.json);
    assert_eq!(r.json, json!({}));
    assert!(api.list("backend", "backends").await.is_empty());

    // adding it again brings it back online, with its volume
    let r = api
        .post_json(&format!("{V1}/backend"), &ssd_backend("nas"))
        .await;
    assert_eq!(r.status, 201, "{}", r.json);
    assert_eq!(api.list("backend", "backends").await, ["nas"]);
    let r = api.get(&format!("{V1}/backend/nas")).await;
    assert_eq!(r.json["backend"]["online"], true);
    assert_eq!(r.json["backend"]["volumes"], json!(["v"]));
    let r = api.delete(&format!("{V1}/backend/nas")).await;
    assert_eq!(r.status, 200, "{}", r.json);

    // the last volume's delete purges it
    let r = api.delete(&format!("{V1}/volume/v")).await;
    assert_eq!(r.status, 200, "{}", r.json);
    let r = api
        .refused(Method::GET, &format!("{V1}/backend/nas"), None, 404)
        .await;
    assert_eq!(
        error_of(&r, Some(("backend", Value::Null))),
        "backend nas was not found"
    );
    api.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn updating_a_fake_backend_orphans_its_volumes() {
    // trident-compat §4.11: the new fake instance knows no volumes.
    let api = Api::start().await;
    api.ok(&format!("{V1}/backend"), &ssd_backend("nas"), 201)
        .await;
    api.ok(&format!("{V1}/storageclass"), &json!({"name": "any"}), 201)
        .await;
    api.ok(&format!("{V1}/volume"), &volume("v", "1Gi", "any"), 201)
        .await;
    let r = api
        .post_json(&format!("{V1}/backend/nas"), &ssd_backend("nas"))
        .await;
    assert_eq!(r.status, 200, "{}", r.json);
    let r = api.get(&format!("{V1}/volume/v")).await;
    assert_eq!(r.json["volume"]["orphaned"], true, "{}", r.json);
    api.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_backend_bodies_are_400_and_change_nothing() {
    let api = Api::start().await;
    api.ok(&format!("{V1}/backend"), &ssd_backend("nas"), 201)
        .await;
    let base = ssd_backend("other");
    let with = |key: &str, value: Value| {
        let mut b = base.clone();
        b[key] = value;
        b.to_string()
    };
    let without = |key: &str| {
        let mut b = base.clone();
        b.as_object_mut().unwrap().remove(key);
        b.to_string()
    };
    // (body, a piece the message must contain)
    let cases: Vec<(String, &str)> = vec![
        (
            "{\"version\":1,\n\"storageDriverName\":".into(),
            "invalid config format: ",
        ),
        (
            "version: 1\nstorageDriverName: fake\n  bad: [indent\n".into(),
            "invalid config format: ",
        ),
        (
            "{\"version\": 1, \"pools\": {\"p\": }}}".into(),
            "invalid config format: ",
        ),
        ("".into(), "invalid config format: the document is empty"),
        ("[1, 2]".into(), "invalid config format: expected a mapping"),
        (
            "just words".into(),
            "invalid config format: expected a mapping",
        ),
        ("a: 1\na: 2\n".into(), "duplicate mapping key"),
        (with("version", json!("x")), "version"),
        (with("version", json!(2)), "version"),
        (with("pools", json!([1])), "pools"),
        (with("pools", json!("oops")), "pools"),
        (with("protocol", json!("nfs")), "protocol"),
        (
            with("storageDriverName", json!("nope")),
            "unknown storage driver: nope",
        ),
        (with("storageDriverName", json!(5)), "storageDriverName"),
        (without("storageDriverName"), "storage driver name"),
        (
            with("backendName", json!("a/b")),
            "backendName must not contain '/'",
        ),
        (with("backendName", json!("..")), "backendName"),
        (with("backendName", json!("x".repeat(300))), "backendName"),
        (
            with(
                "pools",
                json!({"p": {"attributes": {"colour": {"offer": ["red"]}}, "sizeBytes": 1}}),
            ),
            "colour",
        ),
        (
            with("pools", json!({"p": {"sizeBytes": 1024}})),
            "attributes",
        ),
        (
            with(
                "pools",
                json!({"p": {"attributes": {"IOPS": {"offer": true}}, "sizeBytes": 1}}),
            ),
            "IOPS",
        ),
        (with("failureRate", json!("often")), "failureRate"),
        (with("latency", json!("soon")), "latency"),
    ];
    for (body, needle) in &cases {
        for path in [format!("{V1}/backend"), format!("{V1}/backend/nas")] {
            let r = api.refused_post(&path, body.clone(), 400).await;
            let msg = error_of(&r, Some(("backend", json!(""))));
            assert!(
                msg.contains(needle),
                "POST {path} {body}: {msg:?} does not contain {needle:?}"
            );
        }
    }
    // nothing was added or renamed, the existing backend is as it was
    assert_eq!(api.list("backend", "backends").await, ["nas"]);
    api.shutdown().await;
}

// ---------------------------------------------------------------------------------------------
// Storage classes

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn storage_class_add_get_list_delete() {
    let api = Api::start().await;
    api.ok(&format!("{V1}/backend"), &ssd_backend("nas"), 201)
        .await;
    api.ok(
        &format!("{V1}/backend"),
        &fake_backend("san", "block", &[("fast", ssd())]),
        201,
    )
    .await;

    let gold = json!({"version": "1", "name": "gold",
                      "attributes": {"media": "ssd", "snapshots": "True", "IOPS": "01500"}});
    let r = api.post_json(&format!("{V1}/storageclass"), &gold).await;
    assert_eq!(r.status, 201, "{}", r.json);
    assert_eq!(r.json, json!({"storageClass": "gold"}));

    let r = api.get(&format!("{V1}/storageclass/gold")).await;
    assert_eq!(r.status, 200, "{}", r.json);
    assert_eq!(
        r.json,
        json!({"storageClass": {
            "Config": {"version": "1", "name": "gold",
                       "attributes": {"media": "ssd", "snapshots": "true", "IOPS": "1500"}},
            "storage": {"nas": ["fast"], "san": ["fast"]},
        }})
    );

    // duplicate: 409
    let r = api
        .refused_post(&format!("{V1}/storageclass"), gold.to_string(), 409)
        .await;
    assert_eq!(
        error_of(&r, Some(("storageClass", json!("")))),
        "storage class gold already exists"
    );

    // pool lists: requiredStorage is additionalStoragePools; no version defaults to "1"
    let picky = json!({"name": "picky",
                       "storagePools": {"^nas$": ["slow", "fast"]},
                       "requiredStorage": {"san": ["fast"]},
                       "excludeStoragePools": {"nas": ["fast"]}});
    api.ok(&format!("{V1}/storageclass"), &picky, 201).await;
    let r = api.get(&format!("{V1}/storageclass/picky")).await;
    assert_eq!(
        r.json["storageClass"]["Config"],
        json!({"version": "1", "name": "picky",
               "storagePools": {"^nas$": ["fast", "slow"]},
               "additionalStoragePools": {"san": ["fast"]},
               "excludeStoragePools": {"nas": ["fast"]}})
    );
    assert_eq!(
        r.json["storageClass"]["storage"],
        json!({"nas": ["slow"], "san": ["fast"]})
    );
    // both given: additionalStoragePools wins
    let both = json!({"name": "both", "additionalStoragePools": {"nas": ["slow"]},
                      "requiredStorage": {"san": ["fast"]}});
    api.ok(&format!("{V1}/storageclass"), &both, 201).await;
    let r = api.get(&format!("{V1}/storageclass/both")).await;
    assert_eq!(
        r.json["storageClass"]["Config"]["additionalStoragePools"],
        json!({"nas": ["slow"]})
    );
    assert!(
        r.json["storageClass"]["Config"]
            .get("requiredStorage")
            .is_none()
    );
    assert_eq!(r.json["storageClass"]["storage"], json!({"nas": ["slow"]}));

    // pool patterns are unanchored regexes (Go's MatchString)
    let loose = json!({"name": "loose", "storagePools": {"na": ["as"]}});
    api.ok(&format!("{V1}/storageclass"), &loose, 201).await;
    let r = api.get(&format!("{V1}/storageclass/loose")).await;
    assert_eq!(r.json["storageClass"]["storage"], json!({"nas": ["fast"]}));
    let r = api.delete(&format!("{V1}/storageclass/loose")).await;
    assert_eq!(r.status, 200, "{}", r.json);

    // an empty class matches every pool
    api.ok(&format!("{V1}/storageclass"), &json!({"name": "any"}), 201)
        .await;
    let r = api.get(&format!("{V1}/storageclass/any")).await;
    assert_eq!(
        r.json["storageClass"]["storage"],
        json!({"nas": ["fast", "slow"], "san": ["fast"]})
    );
    // pools list their classes
    let r = api.get(&format!("{V1}/backend/nas")).await;
    assert_eq!(
        r.json["backend"]["storage"]["slow"]["storageClasses"],
        json!(["any", "both", "picky"])
    );

    assert_eq!(
        api.list("storageclass", "storageClasses").await,
        ["any", "both", "gold", "picky"]
    );

    // DELETE: 200 {}, then 404 on delete and get
    let r = api.delete(&format!("{V1}/storageclass/gold")).await;
    assert_eq!(r.status, 200, "{}", r.json);
    assert_eq!(r.json, json!({}));
    let r = api
        .refused(
            Method::DELETE,
            &format!("{V1}/storageclass/gold"),
            None,
            404,
        )
        .await;
    assert_eq!(error_of(&r, None), "storage class gold not found");
    let r = api
        .refused(Method::GET, &format!("{V1}/storageclass/gold"), None, 404)
        .await;
    assert_eq!(
        error_of(&r, Some(("storageClass", Value::Null))),
        "storage class gold was not found"
    );
    assert_eq!(
        api.list("storageclass", "storageClasses").await,
        ["any", "both", "picky"]
    );
    let r = api.get(&format!("{V1}/backend/nas")).await;
    assert_eq!(
        r.json["backend"]["storage"]["fast"]["storageClasses"],
        json!(["any"])
    );
    api.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_storage_classes_are_400_and_change_nothing() {
    let api = Api::start().await;
    api.ok(&format!("{V1}/backend"), &ssd_backend("nas"), 201)
        .await;
    api.ok(&format!("{V1}/storageclass"), &json!({"name": "any"}), 201)
        .await;
    let cases: Vec<(String, &str)> = vec![
        ("{\"name\":".into(), "invalid JSON: "),
        ("".into(), "invalid JSON: "),
        ("name: gold\n".into(), "invalid JSON: "),
        ("[]".into(), "invalid JSON: "),
        (
            json!({"name": "gold", "attributes": {"snapshots": true}}).to_string(),
            "invalid JSON: unable to unmarshal map",
        ),
        (
            json!({"name": "gold", "attributes": {"IOPS": 1500}}).to_string(),
            "invalid JSON: unable to unmarshal map",
        ),
        (
            json!({"name": "gold", "attributes": {"colour": "blue"}}).to_string(),
            "invalid JSON: unrecognized storage attribute: colour",
        ),
        (
            json!({"name": "gold", "attributes": {"iops": "100"}}).to_string(),
            "unrecognized storage attribute: iops",
        ),
        (
            json!({"name": "gold", "attributes": {"IOPS": "lots"}}).to_string(),
            "IOPS",
        ),
        (
            json!({"name": "gold", "attributes": {"snapshots": "maybe"}}).to_string(),
            "snapshots",
        ),
        (
            json!({"name": "gold", "attributes": "media=ssd"}).to_string(),
            "attributes",
        ),
        (
            json!({"name": "gold", "storagePools": {"(": ["fast"]}}).to_string(),
            "storagePools",
        ),
        (
            json!({"name": "gold", "storagePools": {"nas": ["[a-"]}}).to_string(),
            "storagePools",
        ),
        (
            json!({"name": "gold", "additionalStoragePools": {"nas": ["*"]}}).to_string(),
            "additionalStoragePools",
        ),
        (
            json!({"name": "gold", "requiredStorage": {"(": ["fast"]}}).to_string(),
            "is not a valid regular expression",
        ),
        (
            json!({"name": "gold", "excludeStoragePools": {"nas": ["(?P<"]}}).to_string(),
            "excludeStoragePools",
        ),
        (
            json!({"name": "gold", "storagePools": {"nas": "fast"}}).to_string(),
            "storagePools",
        ),
        (
            json!({"name": "gold", "storagePools": {"nas": [1]}}).to_string(),
            "storagePools",
        ),
        (json!({"name": 5}).to_string(), "name"),
        (json!({"name": ""}).to_string(), "name must not be empty"),
        (
            json!({"attributes": {}}).to_string(),
            "name must not be empty",
        ),
        (
            json!({"name": "a/b"}).to_string(),
            "name must not contain '/'",
        ),
        (json!({"name": ".."}).to_string(), "name"),
        (json!({"name": "a\u{0}b"}).to_string(), "NUL"),
        (
            json!({"name": "g".repeat(300)}).to_string(),
            "longer than 253",
        ),
        (json!({"name": "gold", "version": 1}).to_string(), "version"),
    ];
    for (body, needle) in &cases {
        let r = api
            .refused_post(&format!("{V1}/storageclass"), body.clone(), 400)
            .await;
        let msg = error_of(&r, Some(("storageClass", json!(""))));
        assert!(
            msg.contains(needle),
            "{body}: {msg:?} does not contain {needle:?}"
        );
    }
    assert_eq!(api.list("storageclass", "storageClasses").await, ["any"]);
    api.shutdown().await;
}

// ---------------------------------------------------------------------------------------------
// Volumes

/// The VolumeConfig keys Trident always writes (trident-compat §2.3).
const ALWAYS_WRITTEN: &[&str] = &[
    "version",
    "name",
    "internalName",
    "size",
    "protocol",
    "spaceReserve",
    "securityStyle",
    "accessInformation",
    "blockSize",
    "fileSystem",
    "encryption",
    "cloneSourceVolume",
    "cloneSourceVolumeInternal",
    "cloneSourceSnapshot",
    "splitOnClone",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn volume_add_get_list_delete() {
    let api = Api::start().await;
    api.ok(&format!("{V1}/backend"), &ssd_backend("nas"), 201)
        .await;
    api.ok(
        &format!("{V1}/backend"),
        &fake_backend("san", "block", &[("lun", hdd())]),
        201,
    )
    .await;
    api.ok(
        &format!("{V1}/storageclass"),
        &json!({"name": "gold", "attributes": {"media": "ssd"}}),
        201,
    )
    .await;
    api.ok(
        &format!("{V1}/storageclass"),
        &json!({"name": "bronze", "attributes": {"media": "hdd"}}),
        201,
    )
    .await;

    let free_before =
        api.get(&format!("{V1}/backend/nas")).await.json["backend"]["storage"]["fast"]["freeBytes"]
            .as_u64();
    let r = api
        .post_json(
            &format!("{V1}/volume"),
            &json!({"name": "v1", "size": "1GB", "storageClass": "gold",
                    "internalName": "client-chosen", "version": "7",
                    "accessInformation": {"nfsServerIp": "203.0.113.9", "nfsPath": "/evil"},
                    "snapshotPolicy": "daily", "unixPermissions": "0755",
                    "snapshotDirectory": "true", "exportPolicy": "default",
                    "unknownKey": {"ignored": true}}),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.json);
    assert_eq!(r.json, json!({"backend": "nas"}));

    let r = api.get(&format!("{V1}/volume/v1")).await;
    assert_eq!(r.status, 200, "{}", r.json);
    assert_eq!(r.json.as_object().unwrap().len(), 1);
    let v = &r.json["volume"];
    assert!(v.get("config").is_none(), "the key is capital Config");
    let c = &v["Config"];
    for key in ALWAYS_WRITTEN {
        assert!(c.get(*key).is_some(), "Config.{key} missing: {c}");
    }
    assert_eq!(c["version"], "1");
    assert_eq!(c["name"], "v1");
    assert_eq!(c["internalName"], "trident-v1");
    assert_eq!(c["size"], "1GB", "size is kept verbatim");
    assert_eq!(c["protocol"], "file");
    assert_eq!(c["storageClass"], "gold");
    assert_eq!(
        c["accessInformation"],
        json!({"nfsServerIp": "192.0.2.1", "nfsPath": "/trident-v1"}),
        "the server fills accessInformation"
    );
    assert_eq!(c["snapshotPolicy"], "daily");
    assert_eq!(c["unixPermissions"], "0755");
    assert_eq!(c["snapshotDirectory"], "true");
    assert_eq!(c["exportPolicy"], "default");
    assert!(c.get("unknownKey").is_none());
    assert_eq!(v["backend"], "nas");
    assert_eq!(v["pool"], "fast");
    assert_eq!(v["orphaned"], false);
    assert_eq!(v["state"], "online");
    // the backend shows it and lost the capacity
    let r = api.get(&format!("{V1}/backend/nas")).await;
    assert_eq!(r.json["backend"]["volumes"], json!(["v1"]));
    if let (Some(before), Some(after)) = (
        free_before,
        r.json["backend"]["storage"]["fast"]["freeBytes"].as_u64(),
    ) {
        assert_eq!(before - after, 1_000_000_000, "1GB is SI");
    }

    // block, with an access mode, on the SAN backend
    let r = api
        .post_json(
            &format!("{V1}/volume"),
            &json!({"name": "lun1", "size": "2Gi", "storageClass": "bronze",
                    "protocol": "block", "accessMode": "ReadWriteOnce"}),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.json);
    assert_eq!(r.json, json!({"backend": "san"}));
    let r = api.get(&format!("{V1}/volume/lun1")).await;
    let c = &r.json["volume"]["Config"];
    assert_eq!(c["protocol"], "block");
    assert_eq!(c["size"], "2Gi");
    assert_eq!(c["accessMode"], "ReadWriteOnce");
    assert_eq!(c["accessInformation"]["iscsiTargetPortal"], "192.0.2.1");
    assert_eq!(
        c["accessInformation"]["iscsiTargetIqn"],
        "iqn.2017-06.com.netapp:fake"
    );
    assert_eq!(r.json["volume"]["pool"], "lun");

    // RWX with any protocol lands on file
    let r = api
        .post_json(
            &format!("{V1}/volume"),
            &json!({"name": "shared", "size": "1Mi", "accessMode": "ReadWriteMany",
                    "storageClass": "gold"}),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.json);
    let r = api.get(&format!("{V1}/volume/shared")).await;
    assert_eq!(r.json["volume"]["Config"]["protocol"], "file");

    assert_eq!(
        api.list("volume", "volumes").await,
        ["lun1", "shared", "v1"]
    );

    // duplicate: 409 with the create envelope
    let r = api
        .refused_post(
            &format!("{V1}/volume"),
            volume("v1", "5Gi", "bronze").to_string(),
            409,
        )
        .await;
    assert_eq!(
        error_of(&r, Some(("backend", json!("")))),
        "volume v1 already exists"
    );

    // DELETE: 200 {}, then 404
    let r = api.delete(&format!("{V1}/volume/v1")).await;
    assert_eq!(r.status, 200, "{}", r.json);
    assert_eq!(r.json, json!({}));
    let r = api
        .refused(Method::DELETE, &format!("{V1}/volume/v1"), None, 404)
        .await;
    assert_eq!(error_of(&r, None), "volume v1 not found");
    let r = api
        .refused(Method::GET, &format!("{V1}/volume/v1"), None, 404)
        .await;
    assert_eq!(
        error_of(&r, Some(("volume", Value::Null))),
        "volume v1 was not found"
    );
    assert_eq!(api.list("volume", "volumes").await, ["lun1", "shared"]);
    let r = api.get(&format!("{V1}/backend/nas")).await;
    assert_eq!(r.json["backend"]["volumes"], json!(["shared"]));
    // the name is free again
    api.ok(&format!("{V1}/volume"), &volume("v1", "1Gi", "gold"), 201)
        .await;
    api.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_volumes_are_400_and_change_nothing() {
    let api = Api::start().await;
    api.ok(&format!("{V1}/backend"), &ssd_backend("nas"), 201)
        .await;
    api.ok(&format!("{V1}/storageclass"), &json!({"name": "any"}), 201)
        .await;
    api.ok(&format!("{V1}/volume"), &volume("keep", "1Gi", "any"), 201)
        .await;
    let long = "n".repeat(300);
    let cases: Vec<(String, &str)> = vec![
        // mandatory fields: Trident's exact message
        (
            json!({"size": "1G", "storageClass": "any"}).to_string(),
            MANDATORY,
        ),
        (
            json!({"name": "v", "storageClass": "any"}).to_string(),
            MANDATORY,
        ),
        (json!({"name": "", "size": "1G"}).to_string(), MANDATORY),
        (json!({"name": "v", "size": ""}).to_string(), MANDATORY),
        ("{}".into(), MANDATORY),
        // malformed
        ("{\"name\":".into(), "invalid JSON: "),
        ("".into(), "invalid JSON: "),
        ("name: v\nsize: 1G\n".into(), "invalid JSON: "),
        ("[\"v\", \"1G\"]".into(), "invalid JSON: "),
        (
            format!("{} trailing", volume("v", "1G", "any")),
            "invalid JSON: ",
        ),
        // wrong types name the field
        (json!({"name": "v", "size": 5}).to_string(), "size"),
        (json!({"name": ["v"], "size": "1G"}).to_string(), "name"),
        (
            json!({"name": "v", "size": "1G", "snapshotDirectory": false}).to_string(),
            "snapshotDirectory",
        ),
        // protocol and access mode
        (
            json!({"name": "v", "size": "1G", "protocol": "nfs"}).to_string(),
            "protocol: nfs is an unsupported protocol",
        ),
        (
            json!({"name": "v", "size": "1G", "protocol": "FILE"}).to_string(),
            "protocol",
        ),
        (
            json!({"name": "v", "size": "1G", "storageClass": "any",
                   "accessMode": "ReadWriteMany", "protocol": "block"})
            .to_string(),
            "incompatible access mode (ReadWriteMany) and protocol (block)",
        ),
        (
            json!({"name": "v", "size": "1G", "accessMode": "ReadWriteSometimes"}).to_string(),
            "invalid accessMode",
        ),
        // the class must exist
        (
            volume("v", "1G", "nope").to_string(),
            "unknown storage class: nope",
        ),
        // names in the body
        (
            volume("a/b", "1G", "any").to_string(),
            "name must not contain '/'",
        ),
        (volume("..", "1G", "any").to_string(), "name must not be"),
        (volume(".", "1G", "any").to_string(), "name must not be"),
        (volume("a\u{0}b", "1G", "any").to_string(), "NUL"),
        (
            volume(&long, "1G", "any").to_string(),
            "longer than 253 bytes",
        ),
        (
            volume("v", "1G", "../any").to_string(),
            "storageClass must not contain '/'",
        ),
        (
            json!({"name": "v", "size": "1G", "cloneSourceVolume": "a/b"}).to_string(),
            "cloneSourceVolume",
        ),
    ];
    let mut cases = cases;
    for size in [
        "0",
        "-1",
        "1.5Gi",
        "abc",
        "99999999999999999999999",
        "0Gi",
        "1Q",
    ] {
        cases.push((volume("v", size, "any").to_string(), "size"));
    }
    for (body, needle) in &cases {
        let r = api
            .refused_post(&format!("{V1}/volume"), body.clone(), 400)
            .await;
        let msg = error_of(&r, Some(("backend", json!(""))));
        assert!(
            msg.contains(needle),
            "{body}: {msg:?} does not contain {needle:?}"
        );
    }
    assert_eq!(api.list("volume", "volumes").await, ["keep"]);
    api.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_sizes_name_the_field_and_the_value() {
    let api = Api::start().await;
    api.ok(&format!("{V1}/backend"), &ssd_backend("nas"), 201)
        .await;
    api.ok(&format!("{V1}/storageclass"), &json!({"name": "any"}), 201)
        .await;
    for size in ["0", "-1", "1.5Gi", "abc", "99999999999999999999999"] {
        let r = api
            .refused_post(
                &format!("{V1}/volume"),
                volume("v", size, "any").to_string(),
                400,
            )
            .await;
        let msg = error_of(&r, Some(("backend", json!(""))));
        assert!(
            msg.starts_with(&format!("invalid size \"{size}\"")),
            "{size}: {msg}"
        );
    }
    // a huge value is not echoed whole
    let huge = "9".repeat(100_000);
    let r = api
        .refused_post(
            &format!("{V1}/volume"),
            volume("v", &huge, "any").to_string(),
            400,
        )
        .await;
    let msg = error_of(&r, Some(("backend", json!(""))));
    assert!(msg.starts_with("invalid size \""), "{msg}");
    assert!(msg.len() < 400, "{} bytes", msg.len());
    api.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn all_pools_failing_names_every_pool_and_reason() {
    let api = Api::start().await;
    let mut be = fake_backend("broken", "file", &[("p1", hdd()), ("p2", hdd())]);
    be["failPools"] = json!({"p1": "p1 is on fire", "p2": "p2 is flooded"});
    api.ok(&format!("{V1}/backend"), &be, 201).await;
    api.ok(&format!("{V1}/storageclass"), &json!({"name": "any"}), 201)
        .await;
    let r = api
        .refused_post(
            &format!("{V1}/volume"),
            volume("x", "1Gi", "any").to_string(),
            400,
        )
        .await;
    let msg = error_of(&r, Some(("backend", json!(""))));
    assert!(
        msg.starts_with("encountered error(s) in creating the volume: "),
        "{msg}"
    );
    for (pool, reason) in [("p1", "p1 is on fire"), ("p2", "p2 is flooded")] {
        assert!(
            msg.contains(&format!(
                "Failed to create volume x on storage pool {pool} from backend broken: {reason}"
            )),
            "{msg}"
        );
    }
    // nothing left behind; the name is free
    let r = api
        .refused(Method::GET, &format!("{V1}/volume/x"), None, 404)
        .await;
    error_of(&r, Some(("volume", Value::Null)));
    assert!(api.list("volume", "volumes").await.is_empty());
    // a healthy backend takes the same request
    api.ok(&format!("{V1}/backend"), &ssd_backend("ok"), 201)
        .await;
    let r = api
        .post_json(&format!("{V1}/volume"), &volume("x", "1Gi", "any"))
        .await;
    assert_eq!(r.status, 201, "{}", r.json);
    assert_eq!(r.json, json!({"backend": "ok"}));
    api.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_matching_pool_is_400() {
    let api = Api::start().await;
    api.ok(&format!("{V1}/backend"), &ssd_backend("nas"), 201)
        .await;
    api.ok(
        &format!("{V1}/storageclass"),
        &json!({"name": "gold", "attributes": {"media": "ssd"}}),
        201,
    )
    .await;
    // a file-only class asked for block
    let r = api
        .refused_post(
            &format!("{V1}/volume"),
            json!({"name": "v", "size": "1Gi", "storageClass": "gold", "protocol": "block"})
                .to_string(),
            400,
        )
        .await;
    let msg = error_of(&r, Some(("backend", json!(""))));
    assert!(msg.contains("gold"), "{msg}");
    // bigger than any pool
    let r = api
        .refused_post(
            &format!("{V1}/volume"),
            volume("v", "1Pi", "gold").to_string(),
            400,
        )
        .await;
    error_of(&r, Some(("backend", json!(""))));
    api.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clone_lands_on_the_source_backend() {
    let api = Api::start().await;
    api.ok(&format!("{V1}/backend"), &ssd_backend("b1"), 201)
        .await;
    api.ok(&format!("{V1}/backend"), &ssd_backend("b2"), 201)
        .await;
    api.ok(&format!("{V1}/storageclass"), &json!({"name": "any"}), 201)
        .await;
    let r = api
        .post_json(&format!("{V1}/volume"), &volume("src", "2Gi", "any"))
        .await;
    assert_eq!(r.status, 201, "{}", r.json);
    let src_backend = r.json["backend"].as_str().unwrap().to_string();
    for i in 0..4 {
        let name = format!("copy{i}");
        let r = api
            .post_json(
                &format!("{V1}/volume"),
                &json!({"name": name, "size": "1Gi", "cloneSourceVolume": "src"}),
            )
            .await;
        assert_eq!(r.status, 201, "{}", r.json);
        assert_eq!(r.json, json!({"backend": src_backend}));
        let r = api.get(&format!("{V1}/volume/{name}")).await;
        let v = &r.json["volume"];
        assert_eq!(v["backend"], src_backend.as_str());
        assert_eq!(v["pool"], "", "Trident shows clones with an empty pool");
        assert_eq!(v["Config"]["cloneSourceVolume"], "src");
        assert_eq!(v["Config"]["cloneSourceVolumeInternal"], "trident-src");
        assert_eq!(v["Config"]["internalName"], format!("trident-{name}"));
        assert_eq!(v["Config"]["storageClass"], "any", "inherited");
    }
    // a missing source: 400 on create (the server maps a create's NotFound to 400)
    let r = api
        .refused_post(
            &format!("{V1}/volume"),
            json!({"name": "bad", "size": "1Gi", "cloneSourceVolume": "missing"}).to_string(),
            400,
        )
        .await;
    assert_eq!(
        error_of(&r, Some(("backend", json!("")))),
        "source volume not found: missing"
    );
    // a clone of an existing name: 409
    let r = api
        .refused_post(
            &format!("{V1}/volume"),
            json!({"name": "copy0", "size": "1Gi", "cloneSourceVolume": "src"}).to_string(),
            409,
        )
        .await;
    error_of(&r, Some(("backend", json!(""))));
    api.shutdown().await;
}

// ---------------------------------------------------------------------------------------------
// Names in paths

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_names_in_paths_are_refused_and_touch_nothing() {
    let api = Api::start().await;
    api.ok(&format!("{V1}/backend"), &ssd_backend("a"), 201)
        .await;
    api.ok(&format!("{V1}/storageclass"), &json!({"name": "a"}), 201)
        .await;
    api.ok(&format!("{V1}/volume"), &volume("a", "1Gi", "a"), 201)
        .await;
    let long = "x".repeat(300);
    // (encoded name, what the message says)
    let names: Vec<(String, &str)> = vec![
        ("a%2Fb".into(), "must not contain '/'"),
        ("a%2fb".into(), "must not contain '/'"),
        ("%2E%2E%2Fa".into(), "must not contain '/'"),
        ("a%00b".into(), "must not contain NUL"),
        ("a%5Cb".into(), "must not contain '\\'"),
        (long, "is longer than 253 bytes"),
    ];
    for (what, field) in [
        ("backend", "backend name"),
        ("volume", "volume name"),
        ("storageclass", "storage class name"),
    ] {
        for (name, says) in &names {
            let path = format!("{V1}/{what}/{name}");
            let mut methods = vec![Method::GET, Method::DELETE];
            if what == "backend" {
                methods.push(Method::POST);
            }
            for method in methods {
                let body = (method == Method::POST).then(|| ssd_backend("a").to_string().into());
                let r = api.refused(method.clone(), &path, body, 400).await;
                let msg = r.json["error"].as_str().unwrap();
                assert_eq!(msg, format!("{field} {says}"), "{method} {path}");
                let payload = match (what, &method) {
                    (_, &Method::DELETE) => None,
                    ("backend", &Method::POST) => Some(("backend", json!(""))),
                    ("backend", _) => Some(("backend", Value::Null)),
                    ("volume", _) => Some(("volume", Value::Null)),
                    _ => Some(("storageClass", Value::Null)),
                };
                error_of(&r, payload);
            }
        }
    }
    // percent-encoded dots are decoded to ".." and refused (URL parsing resolves "%2E%2E" as
    // "..", so this goes over a raw socket)
    for (method, what, field) in [
        ("GET", "volume", "volume name"),
        ("DELETE", "volume", "volume name"),
        ("GET", "backend", "backend name"),
        ("DELETE", "storageclass", "storage class name"),
    ] {
        for segment in ["..", "%2E%2E", "%2e."] {
            let before = api.state().await;
            let r = raw_exchange(
                api.addr,
                &raw_head(method, &format!("{V1}/{what}/{segment}"), ""),
                None,
            )
            .await;
            assert_eq!(r.status, 400, "{method} {what}/{segment}: {}", r.json);
            assert_eq!(
                r.json["error"],
                format!("{field} must not be \".\" or \"..\""),
                "{method} {what}/{segment}"
            );
            assert!(r.head.to_ascii_lowercase().contains("x-request-id"));
            assert_eq!(api.state().await, before);
        }
    }
    // the objects called "a" are all still there
    assert_eq!(api.list("backend", "backends").await, ["a"]);
    assert_eq!(api.list("volume", "volumes").await, ["a"]);
    assert_eq!(api.list("storageclass", "storageClasses").await, ["a"]);
    api.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn encoded_names_in_paths_are_decoded() {
    let api = Api::start().await;
    api.ok(&format!("{V1}/backend"), &ssd_backend("nas"), 201)
        .await;
    api.ok(&format!("{V1}/storageclass"), &json!({"name": "any"}), 201)
        .await;
    api.ok(&format!("{V1}/volume"), &volume("a b", "1Gi", "any"), 201)
        .await;
    let r = api.get(&format!("{V1}/volume/a%20b")).await;
    assert_eq!(r.status, 200, "{}", r.json);
    assert_eq!(r.json["volume"]["Config"]["name"], "a b");
    let r = api.get(&format!("{V1}/backend/n%61s")).await;
    assert_eq!(r.status, 200, "{}", r.json);
    let r = api.delete(&format!("{V1}/volume/a%20b")).await;
    assert_eq!(r.status, 200, "{}", r.json);
    assert!(api.list("volume", "volumes").await.is_empty());
    // a segment that does not decode to UTF-8: 400 with the operation's envelope
    let r = api
        .refused(Method::GET, &format!("{V1}/volume/%FF"), None, 400)
        .await;
    assert!(
        error_of(&r, Some(("volume", Value::Null))).starts_with("invalid path: "),
        "{}",
        r.json
    );
    let r = api
        .refused(Method::DELETE, &format!("{V1}/backend/%FF"), None, 400)
        .await;
    assert!(error_of(&r, None).starts_with("invalid path: "));
    let r = api
        .refused_post(
            &format!("{V1}/backend/%FF"),
            ssd_backend("nas").to_string(),
            400,
        )
        .await;
    assert!(error_of(&r, Some(("backend", json!("")))).starts_with("invalid path: "));
    api.shutdown().await;
}

// ---------------------------------------------------------------------------------------------
// Body size

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bodies_over_one_mib_are_413_and_the_server_stays_healthy() {
    let api = Api::start().await;
    api.ok(&format!("{V1}/backend"), &ssd_backend("nas"), 201)
        .await;
    api.ok(&format!("{V1}/storageclass"), &json!({"name": "any"}), 201)
        .await;
    const MIB: usize = 1024 * 1024;
    // A valid JSON document padded with spaces to `len` bytes.
    let padded = |doc: &Value, len: usize| {
        let mut s = doc.to_string();
        assert!(s.len() <= len);
        s.push_str(&" ".repeat(len - s.len()));
        s.into_bytes()
    };
    let cases = [
        (format!("{V1}/backend"), "backend"),
        (format!("{V1}/backend/nas"), "backend"),
        (format!("{V1}/volume"), "backend"),
        (format!("{V1}/storageclass"), "storageClass"),
    ];
    for (path, key) in &cases {
        for len in [2 * MIB, MIB + 1] {
            // Only the head is sent: the server refuses a declared length over the cap before
            // reading any of the body. (A client that went on writing the body could see a
            // reset instead of the answer, because the server closes without reading it.)
            let before = api.state().await;
            let r = raw_exchange(
                api.addr,
                &raw_head("POST", path, &format!("content-length: {len}\r\n")),
                None,
            )
            .await;
            assert_eq!(r.status, 413, "{path} {len}: {}", r.json);
            assert_eq!(
                r.json,
                json!({*key: "", "error": format!("request body is larger than the limit of {MIB} bytes")}),
                "{path} {len}"
            );
            assert_eq!(api.state().await, before, "{path} {len} changed the state");
        }
        // healthy afterwards
        let r = api.get("/trident/v1/version").await;
        assert_eq!(r.status, 200);
    }
    // exactly 1 MiB is read
    let r = api
        .post(
            &format!("{V1}/storageclass"),
            padded(&json!({"name": "edge"}), MIB),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.json);
    let r = api
        .post(
            &format!("{V1}/volume"),
            padded(&volume("edge", "1Gi", "any"), MIB),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.json);
    assert_eq!(api.list("volume", "volumes").await, ["edge"]);
    api.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chunked_bodies_over_one_mib_are_413() {
    let api = Api::start().await;
    api.ok(&format!("{V1}/backend"), &ssd_backend("nas"), 201)
        .await;
    api.ok(&format!("{V1}/storageclass"), &json!({"name": "any"}), 201)
        .await;
    for (path, key) in [
        (format!("{V1}/backend"), "backend"),
        (format!("{V1}/backend/nas"), "backend"),
        (format!("{V1}/volume"), "backend"),
        (format!("{V1}/storageclass"), "storageClass"),
    ] {
        let before = api.state().await;
        let r = raw_exchange(
            api.addr,
            &raw_head("POST", &path, "transfer-encoding: chunked\r\n"),
            Some(2 * 1024 * 1024),
        )
        .await;
        assert_eq!(r.status, 413, "{path}: {}", r.json);
        assert_eq!(
            r.json,
            json!({key: "", "error": "request body is larger than the limit of 1048576 bytes"}),
            "{path}"
        );
        let head = r.head.to_ascii_lowercase();
        assert!(
            head.contains("content-type: application/json; charset=utf-8"),
            "{head}"
        );
        assert!(head.contains("x-request-id"), "{head}");
        assert_eq!(api.state().await, before, "{path}");
    }
    // a small chunked body is fine
    let r = raw_exchange(
        api.addr,
        &{
            let body = json!({"name": "chunky"}).to_string();
            format!(
                "{}transfer-encoding: chunked\r\n\r\n{:x}\r\n{body}\r\n0\r\n",
                raw_head("POST", &format!("{V1}/storageclass"), ""),
                body.len()
            )
        },
        None,
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.json);
    assert_eq!(r.json, json!({"storageClass": "chunky"}));
    let r = api.get("/trident/v1/version").await;
    assert_eq!(r.status, 200);
    api.shutdown().await;
}

// ---------------------------------------------------------------------------------------------
// Concurrency

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_creates_of_one_name_are_one_201_and_the_rest_409() {
    let api = Api::start().await;
    api.ok(
        &format!("{V1}/backend"),
        &fake_backend("b", "file", &[("p1", ssd()), ("p2", ssd())]),
        201,
    )
    .await;
    api.ok(&format!("{V1}/storageclass"), &json!({"name": "any"}), 201)
        .await;
    let mut tasks = Vec::new();
    for _ in 0..16 {
        let client = api.client.clone();
        let url = format!("{}{V1}/volume", api.base);
        tasks.push(tokio::spawn(async move {
            let r = client
                .post(url)
                .body(volume("same", "1Gi", "any").to_string())
                .send()
                .await
                .unwrap();
            reply(r, "concurrent create").await
        }));
    }
    let mut created = 0;
    for t in tasks {
        let r = t.await.unwrap();
        match r.status {
            201 => {
                assert_eq!(r.json, json!({"backend": "b"}));
                created += 1;
            }
            409 => assert_eq!(
                error_of(&r, Some(("backend", json!("")))),
                "volume same already exists"
            ),
            other => panic!("unexpected {other}: {}", r.json),
        }
    }
    assert_eq!(created, 1);
    assert_eq!(api.list("volume", "volumes").await, ["same"]);
    let r = api.get(&format!("{V1}/backend/b")).await;
    assert_eq!(r.json["backend"]["volumes"], json!(["same"]));
    api.shutdown().await;
}

// ---------------------------------------------------------------------------------------------
// Bugs found (reproductions, ignored until fixed)

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_explain_endpoint_a_failed_create_points_at_exists() {
    let api = Api::start().await;
    let mut be = fake_backend("broken", "file", &[("p1", hdd())]);
    be["failPools"] = json!({"p1": "p1 is on fire"});
    api.ok(&format!("{V1}/backend"), &be, 201).await;
    api.ok(&format!("{V1}/storageclass"), &json!({"name": "any"}), 201)
        .await;
    let r = api
        .refused_post(
            &format!("{V1}/volume"),
            volume("x", "1Gi", "any").to_string(),
            400,
        )
        .await;
    let msg = error_of(&r, Some(("backend", json!(""))));
    let hint = "GET /trident/v1/storageclass/any/explain";
    assert!(msg.contains(hint), "{msg}");
    let r = api.get(&format!("{V1}/storageclass/any/explain")).await;
    assert_eq!(
        r.status, 200,
        "the error message sends users to {hint}, which answers {}",
        r.json
    );
    api.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_required_storage_regex_names_required_storage() {
    let api = Api::start().await;
    let r = api
        .refused_post(
            &format!("{V1}/storageclass"),
            json!({"name": "gold", "requiredStorage": {"(": ["fast"]}}).to_string(),
            400,
        )
        .await;
    let msg = error_of(&r, Some(("storageClass", json!(""))));
    assert!(
        msg.contains("requiredStorage") && !msg.contains("additionalStoragePools"),
        "the client sent requiredStorage, the error says: {msg}"
    );
    api.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_name_that_passes_validation_can_be_created() {
    let api = Api::start().await;
    api.ok(&format!("{V1}/backend"), &ssd_backend("nas"), 201)
        .await;
    api.ok(&format!("{V1}/storageclass"), &json!({"name": "any"}), 201)
        .await;
    let name = "v".repeat(253);
    let r = api
        .post_json(&format!("{V1}/volume"), &volume(&name, "1Gi", "any"))
        .await;
    let msg = r.json["error"].as_str().unwrap_or_default();
    assert!(
        r.status == 201 || (r.status == 400 && msg.starts_with("name ")),
        "a 253-byte name is valid for the API, so it must be created, or refused up front \
         naming the field; got {}: {msg}",
        r.status
    );
    api.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_413_says_connection_close() {
    let api = Api::start().await;
    let big = format!("{}{}", json!({"name": "big"}), " ".repeat(2 << 20));
    // The server refuses at the cap and closes the connection; its answer must say so, or a
    // pooled client sends its next request on the dying connection. A raw keep-alive request
    // (only the head, so the answer cannot be lost to a reset while the body is sent):
    let r = raw_exchange(
        api.addr,
        &format!(
            "POST {V1}/storageclass HTTP/1.1\r\nhost: localhost\r\ncontent-length: {}\r\n",
            big.len()
        ),
        None,
    )
    .await;
    assert_eq!(r.status, 413, "{}", r.json);
    let connection = r.head.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.trim()
            .eq_ignore_ascii_case("connection")
            .then(|| v.trim().to_ascii_lowercase())
    });
    // What a keep-alive client sees: some of its follow-up requests fail outright.
    let mut failed = Vec::new();
    for i in 0..50 {
        let r = api
            .client
            .post(format!("{}{V1}/storageclass", api.base))
            .body(big.clone())
            .send()
            .await;
        // The server answers before reading the whole body and closes the connection, so the
        // client may see either the 413 or a reset while it is still sending; both are fine.
        if let Ok(r) = r {
            assert_eq!(r.status().as_u16(), 413, "oversized POST {i}");
        }
        if let Err(e) = api
            .client
            .get(format!("{}{V1}/backend", api.base))
            .send()
            .await
        {
            failed.push(format!("{i}: {e:?}"));
        }
    }
    assert_eq!(
        connection.as_deref(),
        Some("close"),
        "413 without Connection: close; follow-up GETs on the pooled connection that failed: \
         {failed:#?}"
    );
    assert!(failed.is_empty(), "{failed:#?}");
    api.shutdown().await;
}

// ---------------------------------------------------------------------------------------------
// The real binary

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_real_binary_serves_the_api() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let client = common::client();
    let mut server = Server::start(&data, &[]);
    server.wait_ready(&client).await;
    let url = server.url.clone();
    let send = async |method: Method, path: &str, body: Option<Value>| {
        let mut req = client.request(method.clone(), format!("{url}{path}"));
        if let Some(b) = body {
            req = req.body(b.to_string());
        }
        let r = req.send().await.unwrap();
        reply(r, &format!("{method} {path}")).await
    };

    let r = send(Method::GET, "/trident/version", None).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.json["version"], "18.07.0");
    let r = send(
        Method::POST,
        "/trident/v1/backend",
        Some(ssd_backend("nas")),
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.json);
    assert_eq!(r.json, json!({"backend": "nas"}));
    let r = send(
        Method::POST,
        "/trident/v1/storageclass",
        Some(json!({"name": "gold", "attributes": {"media": "ssd"}})),
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.json);
    let r = send(
        Method::POST,
        "/trident/v1/volume",
        Some(volume("v1", "1Gi", "gold")),
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.json);
    assert_eq!(r.json, json!({"backend": "nas"}));
    let r = send(Method::GET, "/trident/v1/volume/v1", None).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.json["volume"]["pool"], "fast");
    assert_eq!(r.json["volume"]["Config"]["size"], "1Gi");
    let r = send(
        Method::POST,
        "/trident/v1/volume",
        Some(json!({"name": "v2"})),
    )
    .await;
    assert_eq!(r.status, 400);
    assert_eq!(r.json, json!({"backend": "", "error": MANDATORY}));
    let r = send(Method::PUT, "/trident/v1/volume/v1", None).await;
    assert_eq!(r.status, 405);
    server.stop();

    // the same data comes back after a restart
    let mut server = Server::start(&data, &[]);
    server.wait_ready(&client).await;
    let r = client
        .get(format!("{}/trident/v1/volume", server.url))
        .send()
        .await
        .unwrap();
    let r = reply(r, "list after restart").await;
    assert_eq!(r.json, json!({"volumes": ["v1"]}));
    server.stop();
}
