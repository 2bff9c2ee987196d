//! HTTP-level tests of the router against the real core (started on a temp dir with fake
//! backends): routes, envelopes, status codes, body limits, request ids, panics, logging
//! hygiene, and the server on a real socket.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, Method, Request, StatusCode, header};
use serde_json::{Value, json};
use tower::ServiceExt;

use super::*;
use crate::actors::{
    CoreError, CoreOptions, CoreRuntime, EventFilter, EventRecord, Readiness, RequestCtx,
};

// ---------------------------------------------------------------------------------------------
// The real core on a temp dir

struct Harness {
    dir: tempfile::TempDir,
    runtime: CoreRuntime,
    core: Core,
}

impl Harness {
    /// A core on a fresh temp dir, ready.
    async fn start() -> Harness {
        let h = Harness::start_replaying().await;
        for _ in 0..500 {
            match h.core.readiness() {
                Readiness::Ready => return h,
                Readiness::Failed(e) => panic!("core failed to start: {e}"),
                Readiness::Replaying | Readiness::Standby { .. } => {
                    tokio::time::sleep(Duration::from_millis(10)).await
                }
            }
        }
        panic!("core not ready after 5 s");
    }

    /// A core on a fresh temp dir, returned as soon as it started (replay runs in the
    /// background, so on a current-thread runtime it has not begun yet).
    async fn start_replaying() -> Harness {
        Harness::start_in(tempfile::tempdir().unwrap()).await
    }

    /// A core on `dir`, returned at once (not waiting for replay).
    async fn start_in(dir: tempfile::TempDir) -> Harness {
        let runtime = CoreRuntime::start(CoreOptions {
            data_dir: dir.path().to_path_buf(),
            ..CoreOptions::default()
        })
        .await
        .unwrap();
        let core = runtime.core();
        Harness { dir, runtime, core }
    }

    fn app(&self) -> Router {
        router(self.core.clone())
    }

    /// Every event in the log.
    async fn events(&self) -> Vec<EventRecord> {
        self.core.events(EventFilter::default()).await.unwrap()
    }

    /// The events of one object (`volume/v1`).
    async fn events_of(&self, object: &str) -> Vec<EventRecord> {
        self.core
            .events(EventFilter {
                object: Some(object.to_string()),
                ..EventFilter::default()
            })
            .await
            .unwrap()
    }

    async fn stop(self) {
        self.runtime.shutdown().await;
    }

    /// Shuts the core down and hands back its data dir.
    async fn stop_keeping_dir(self) -> tempfile::TempDir {
        self.runtime.shutdown().await;
        self.dir
    }
}

// ---------------------------------------------------------------------------------------------
// Helpers

struct Reply {
    status: StatusCode,
    headers: HeaderMap,
    raw: Bytes,
    json: Value,
}

async fn call(app: &Router, req: Request<Body>) -> Reply {
    let response = app.clone().oneshot(req).await.unwrap();
    let status = response.status();
    let headers = response.headers().clone();
    let raw = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .unwrap();
    let json = serde_json::from_slice(&raw).unwrap_or(Value::Null);
    Reply {
        status,
        headers,
        raw,
        json,
    }
}

async fn send(app: &Router, method: Method, uri: &str, body: impl Into<Body>) -> Reply {
    let req = Request::builder()
        .method(method)
        .uri(uri)
        .body(body.into())
        .unwrap();
    call(app, req).await
}

async fn get(app: &Router, uri: &str) -> Reply {
    send(app, Method::GET, uri, Body::empty()).await
}

async fn post(app: &Router, uri: &str, body: &str) -> Reply {
    send(app, Method::POST, uri, body.to_string()).await
}

async fn delete(app: &Router, uri: &str) -> Reply {
    send(app, Method::DELETE, uri, Body::empty()).await
}

fn assert_json(r: &Reply) {
    assert_eq!(
        r.headers[header::CONTENT_TYPE],
        "application/json; charset=UTF-8"
    );
    assert!(r.raw.ends_with(b"\n"), "{:?}", r.raw);
    assert!(r.headers.contains_key(REQUEST_ID_HEADER));
}

/// A fake backend `b1` with one pool, `pool-a`, and a canary password.
const BACKEND: &str = r#"{"version":1,"storageDriverName":"fake","backendName":"b1",
    "protocol":"file","password":"canary-pw-8472",
    "pools":{"pool-a":{"sizeBytes":10737418240,"attributes":{}}}}"#;

/// `b1` again, its pool offering snapshots.
const BACKEND_SNAPSHOTS: &str = r#"{"version":1,"storageDriverName":"fake","backendName":"b1",
    "protocol":"file",
    "pools":{"pool-a":{"sizeBytes":10737418240,"attributes":{"snapshots":{"offer":true}}}}}"#;

/// A class every pool matches.
const CLASS_ANY: &str = r#"{"version":"1","name":"gold"}"#;

/// A router with the real middleware around one route that answers `handler`.
fn mini_app<H, T>(method: Method, path: &str, handler: H) -> Router
where
    H: axum::handler::Handler<T, ()>,
    T: 'static,
{
    let filter = axum::routing::MethodFilter::try_from(method).unwrap();
    Router::new()
        .route(path, axum::routing::on(filter, handler))
        .layer(axum::middleware::from_fn(middleware::track))
}

// ---------------------------------------------------------------------------------------------
// Version, request ids, fallbacks

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn version_on_both_paths() {
    let h = Harness::start().await;
    let app = h.app();
    for path in ["/trident/version", "/trident/v1/version"] {
        let r = get(&app, path).await;
        assert_eq!(r.status, StatusCode::OK);
        assert_json(&r);
        assert_eq!(r.json["version"], "18.07.0");
        assert_eq!(r.json["storchVersion"], env!("CARGO_PKG_VERSION"));
    }
    let r = send(&app, Method::HEAD, "/trident/v1/version", Body::empty()).await;
    assert_eq!(r.status, StatusCode::OK);
    assert!(r.raw.is_empty());
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_ids_are_made_echoed_and_passed_to_the_core() {
    let h = Harness::start().await;
    let app = h.app();
    let r = get(&app, "/trident/v1/version").await;
    let id = r.headers[REQUEST_ID_HEADER].to_str().unwrap();
    assert!(uuid::Uuid::parse_str(id).is_ok(), "{id}");

    let req = Request::post("/trident/v1/backend")
        .header("x-request-id", "client-id-42")
        .body(Body::from(BACKEND))
        .unwrap();
    let r = call(&app, req).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.json);
    assert_eq!(r.headers[REQUEST_ID_HEADER], "client-id-42");
    let events = h.events_of("backend/b1").await;
    assert_eq!(events.last().unwrap().request_id, "client-id-42");

    // An unsafe request id is replaced by a new one; posting the same backend again records
    // nothing.
    let req = Request::post("/trident/v1/backend")
        .header("x-request-id", "not safe/../x")
        .body(Body::from(BACKEND))
        .unwrap();
    let r = call(&app, req).await;
    let id = r.headers[REQUEST_ID_HEADER].to_str().unwrap().to_string();
    assert!(uuid::Uuid::parse_str(&id).is_ok(), "{id}");
    let after = h.events_of("backend/b1").await;
    assert_eq!(
        after.len(),
        events.len(),
        "an identical re-post records nothing"
    );
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_paths_are_json_404() {
    let h = Harness::start().await;
    let app = h.app();
    for path in [
        "/",
        "/trident",
        "/trident/v2/backend",
        "/trident/v1/nodes",
        "/x/y/z",
    ] {
        let r = get(&app, path).await;
        assert_eq!(r.status, StatusCode::NOT_FOUND, "{path}");
        assert_json(&r);
        assert_eq!(r.json, json!({"error": "no such API path"}));
    }
    let r = get(&app, "/trident/v1/volume/a/b").await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trailing_slashes_redirect() {
    let h = Harness::start().await;
    let app = h.app();
    let r = get(&app, "/trident/v1/backend/").await;
    assert_eq!(r.status, StatusCode::MOVED_PERMANENTLY);
    assert_eq!(r.headers[header::LOCATION], "/trident/v1/backend");
    let r = get(&app, "//evil.example/").await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_methods_are_json_405_with_allow() {
    let h = Harness::start().await;
    let app = h.app();
    let cases = [
        (Method::PUT, "/trident/v1/volume/v", "GET,HEAD,DELETE"),
        (Method::POST, "/trident/v1/volume/v", "GET,HEAD,DELETE"),
        (Method::DELETE, "/trident/v1/backend", "GET,HEAD,POST"),
        (
            Method::PATCH,
            "/trident/v1/backend/b",
            "GET,HEAD,POST,DELETE",
        ),
        (Method::POST, "/trident/v1/version", "GET,HEAD"),
        (Method::DELETE, "/trident/v1/storageclass", "GET,HEAD,POST"),
        (Method::GET, "/trident/v1/volume/v/resize", "POST"),
        (
            Method::PUT,
            "/trident/v1/volume/v/snapshot",
            "GET,HEAD,POST",
        ),
        (Method::POST, "/trident/v1/snapshot", "GET,HEAD"),
        (Method::DELETE, "/trident/v1/events", "GET,HEAD"),
    ];
    for (method, path, allow) in cases {
        let r = send(&app, method.clone(), path, Body::empty()).await;
        assert_eq!(r.status, StatusCode::METHOD_NOT_ALLOWED, "{method} {path}");
        assert_json(&r);
        let got: Vec<&str> = r.headers[header::ALLOW]
            .to_str()
            .unwrap()
            .split(',')
            .collect();
        let mut got = got.into_iter().map(str::trim).collect::<Vec<_>>();
        let mut want = allow.split(',').collect::<Vec<_>>();
        got.sort();
        want.sort();
        assert_eq!(got, want, "{method} {path}");
        assert_eq!(
            r.json["error"],
            format!("method {method} is not allowed on this path; see the Allow header")
        );
    }
    h.stop().await;
}

// ---------------------------------------------------------------------------------------------
// Backends

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backend_lifecycle_json() {
    let h = Harness::start().await;
    let app = h.app();
    let r = post(&app, "/trident/v1/backend", BACKEND).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.json);
    assert_json(&r);
    assert_eq!(r.json, json!({"backend": "b1"}));
    // The password reached the core, which sealed it.
    let added = serde_json::to_value(&h.events_of("backend/b1").await[0].event).unwrap();
    assert_eq!(added["event"]["secrets"], "<sealed>");
    assert!(!added.to_string().contains("canary-pw-8472"));

    let r = get(&app, "/trident/v1/backend").await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(r.json, json!({"backends": ["b1"]}));

    let r = get(&app, "/trident/v1/backend/b1").await;
    assert_eq!(r.status, StatusCode::OK);
    let b = &r.json["backend"];
    assert_eq!(b["name"], "b1");
    assert_eq!(b["protocol"], "file");
    assert_eq!(b["online"], true);
    assert_eq!(b["state"], "online");
    assert_eq!(b["config"]["storageDriverName"], "fake");
    assert_eq!(b["storage"]["pool-a"]["name"], "pool-a");
    assert_eq!(
        b["storage"]["pool-a"]["storageAttributes"],
        json!({"backendType": {"offer": ["fake"]}})
    );
    assert_eq!(b["volumes"], json!([]));
    assert!(!String::from_utf8_lossy(&r.raw).contains("canary-pw-8472"));

    let r = post(
        &app,
        "/trident/v1/backend/b1",
        r#"{"version":1,"storageDriverName":"fake","backendName":"b2"}"#,
    )
    .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.json);
    assert!(
        r.json["error"]
            .as_str()
            .unwrap()
            .contains("does not rename")
    );
    let r = post(
        &app,
        "/trident/v1/backend/b1",
        r#"{"version":1,"storageDriverName":"fake"}"#,
    )
    .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.json);
    assert_eq!(r.json, json!({"backend": "b1"}));

    let r = delete(&app, "/trident/v1/backend/b1").await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.json);
    assert_json(&r);
    assert_eq!(r.json, json!({}));
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backend_yaml_body() {
    let h = Harness::start().await;
    let app = h.app();
    let yaml = "version: 1\nstorageDriverName: fake\nbackendName: y1\npools:\n  a:\n    sizeBytes: 10\n    attributes: {}\n";
    let r = post(&app, "/trident/v1/backend", yaml).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.json);
    assert_eq!(r.json, json!({"backend": "y1"}));
    let r = get(&app, "/trident/v1/backend/y1").await;
    assert_eq!(r.json["backend"]["storage"]["a"]["totalBytes"], 10);
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backend_errors_use_the_envelopes() {
    let h = Harness::start().await;
    let app = h.app();

    let r = post(&app, "/trident/v1/backend", "{\"version\":").await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert_json(&r);
    assert_eq!(r.json["backend"], "");
    assert!(
        r.json["error"]
            .as_str()
            .unwrap()
            .starts_with("invalid config format: ")
    );
    assert!(
        h.events().await.is_empty(),
        "bad input must not reach the core"
    );

    let r = get(&app, "/trident/v1/backend/nope").await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    assert_eq!(
        r.json,
        json!({"backend": null, "error": "backend nope was not found"})
    );

    let r = post(&app, "/trident/v1/backend/nope", BACKEND).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    assert_eq!(
        r.json,
        json!({"backend": "", "error": "backend nope was not found"})
    );

    let r = delete(&app, "/trident/v1/backend/nope").await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    assert_eq!(r.json, json!({"error": "backend nope not found"}));
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_names_in_paths_are_refused_before_the_core() {
    let h = Harness::start().await;
    let app = h.app();
    let long = "x".repeat(254);
    let cases = [
        ("%2E%2E", "must not be \".\" or \"..\""),
        ("a%2Fb", "must not contain '/'"),
        ("a%5Cb", "must not contain '\\'"),
        ("a%00b", "must not contain NUL"),
        ("a%0Ab", "must not contain control characters"),
        (long.as_str(), "is longer than 253 bytes"),
    ];
    for (name, want) in cases {
        let r = get(&app, &format!("/trident/v1/backend/{name}")).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{name}");
        assert_eq!(r.json["backend"], Value::Null);
        assert_eq!(r.json["error"], format!("backend name {want}"), "{name}");

        let r = delete(&app, &format!("/trident/v1/volume/{name}")).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{name}");
        assert_eq!(r.json, json!({"error": format!("volume name {want}")}));

        let r = get(&app, &format!("/trident/v1/storageclass/{name}")).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{name}");
        assert_eq!(r.json["storageClass"], Value::Null);
        assert_eq!(r.json["error"], format!("storage class name {want}"));

        let r = post(&app, &format!("/trident/v1/backend/{name}"), BACKEND).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{name}");
        assert_eq!(r.json["backend"], "");

        let r = delete(&app, &format!("/trident/v1/volume/v/snapshot/{name}")).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{name}");
        assert_eq!(r.json, json!({"error": format!("snapshot name {want}")}));
    }
    let r = get(&app, "/trident/v1/volume/%FF").await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert!(
        r.json["error"]
            .as_str()
            .unwrap()
            .starts_with("invalid path: "),
        "{}",
        r.json
    );
    assert!(h.events().await.is_empty());
    h.stop().await;
}

// ---------------------------------------------------------------------------------------------
// Volumes

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn volume_lifecycle() {
    let h = Harness::start().await;
    let app = h.app();
    assert_eq!(post(&app, "/trident/v1/backend", BACKEND).await.status, 201);
    assert_eq!(
        post(&app, "/trident/v1/storageclass", CLASS_ANY)
            .await
            .status,
        201
    );
    let body = r#"{"name":"v1","size":"1GB","protocol":"file","storageClass":"gold"}"#;
    let r = post(&app, "/trident/v1/volume", body).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.json);
    assert_json(&r);
    assert_eq!(r.json, json!({"backend": "b1"}));

    let r = post(&app, "/trident/v1/volume", body).await;
    assert_eq!(r.status, StatusCode::CONFLICT);
    assert_eq!(
        r.json,
        json!({"backend": "", "error": "volume v1 already exists"})
    );

    let r = get(&app, "/trident/v1/volume").await;
    assert_eq!(r.json, json!({"volumes": ["v1"]}));

    let r = get(&app, "/trident/v1/volume/v1").await;
    assert_eq!(r.status, StatusCode::OK);
    let v = &r.json["volume"];
    assert_eq!(v["Config"]["name"], "v1");
    assert_eq!(v["Config"]["size"], "1GB");
    assert_eq!(v["Config"]["internalName"], "trident-v1");
    assert_eq!(v["backend"], "b1");
    assert_eq!(v["pool"], "pool-a");
    assert_eq!(v["orphaned"], false);
    assert_eq!(v["state"], "online");

    let r = delete(&app, "/trident/v1/volume/v1").await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.json);
    assert_eq!(r.json, json!({}));
    let r = get(&app, "/trident/v1/volume/v1").await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    assert_eq!(
        r.json,
        json!({"volume": null, "error": "volume v1 was not found"})
    );
    let r = delete(&app, "/trident/v1/volume/v1").await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    assert_eq!(r.json, json!({"error": "volume v1 not found"}));
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn volume_validation_happens_before_the_core() {
    let h = Harness::start().await;
    let app = h.app();
    let cases = [
        (
            r#"{"size":"1G"}"#,
            "the following fields for \"Volume\" are mandatory: name and size",
        ),
        (r#"{"name":"a/b","size":"1G"}"#, "name must not contain '/'"),
        (
            r#"{"name":"v","size":"0"}"#,
            "invalid size \"0\": size must be greater than zero",
        ),
        (
            r#"{"name":"v","size":"1G","accessMode":"ReadWriteMany","protocol":"block"}"#,
            "incompatible access mode (ReadWriteMany) and protocol (block)",
        ),
    ];
    for (body, want) in cases {
        let r = post(&app, "/trident/v1/volume", body).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{body}");
        assert_eq!(r.json, json!({"backend": "", "error": want}));
    }
    let r = post(&app, "/trident/v1/volume", "{nope").await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert!(
        r.json["error"]
            .as_str()
            .unwrap()
            .starts_with("invalid JSON: ")
    );
    let r = post(&app, "/trident/v1/volume", r#"{"name":"v","size":-1}"#).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert!(
        r.json["error"]
            .as_str()
            .unwrap()
            .starts_with("invalid JSON: size: invalid type"),
        "{}",
        r.json
    );
    assert!(h.events().await.is_empty());
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn volume_with_unknown_class_is_400_not_404() {
    let h = Harness::start().await;
    let app = h.app();
    let r = post(
        &app,
        "/trident/v1/volume",
        r#"{"name":"v","size":"1G","storageClass":"gold"}"#,
    )
    .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert_eq!(
        r.json,
        json!({"backend": "", "error": "unknown storage class: gold"})
    );
    h.stop().await;
}

// ---------------------------------------------------------------------------------------------
// Storage classes

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn storage_class_lifecycle() {
    let h = Harness::start().await;
    let app = h.app();
    assert_eq!(
        post(&app, "/trident/v1/backend", BACKEND_SNAPSHOTS)
            .await
            .status,
        201
    );
    let body = r#"{"version":"1","name":"gold","attributes":{"snapshots":"true"}}"#;
    let r = post(&app, "/trident/v1/storageclass", body).await;
    assert_eq!(r.status, StatusCode::CREATED);
    assert_json(&r);
    assert_eq!(r.json, json!({"storageClass": "gold"}));

    let r = post(&app, "/trident/v1/storageclass", body).await;
    assert_eq!(r.status, StatusCode::CONFLICT);
    assert_eq!(
        r.json,
        json!({"storageClass": "", "error": "storage class gold already exists"})
    );

    let r = get(&app, "/trident/v1/storageclass").await;
    assert_eq!(r.json, json!({"storageClasses": ["gold"]}));

    let r = get(&app, "/trident/v1/storageclass/gold").await;
    assert_eq!(r.status, StatusCode::OK);
    let sc = &r.json["storageClass"];
    assert_eq!(sc["Config"]["name"], "gold");
    assert_eq!(sc["Config"]["attributes"]["snapshots"], "true");
    assert_eq!(sc["storage"], json!({"b1": ["pool-a"]}));

    let r = delete(&app, "/trident/v1/storageclass/gold").await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(r.json, json!({}));
    let r = get(&app, "/trident/v1/storageclass/gold").await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    assert_eq!(
        r.json,
        json!({"storageClass": null, "error": "storage class gold was not found"})
    );
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn storage_class_bad_bodies() {
    let h = Harness::start().await;
    let app = h.app();
    let r = post(&app, "/trident/v1/storageclass", "{").await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert_eq!(r.json["storageClass"], "");
    assert!(
        r.json["error"]
            .as_str()
            .unwrap()
            .starts_with("invalid JSON: ")
    );
    let r = post(&app, "/trident/v1/storageclass", r#"{"name":"../x"}"#).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert_eq!(
        r.json,
        json!({"storageClass": "", "error": "name must not contain '/'"})
    );
    assert!(h.events().await.is_empty());
    h.stop().await;
}

// ---------------------------------------------------------------------------------------------
// Core error classes over HTTP

/// On a current-thread runtime the core's replay task cannot run before this test yields, and
/// nothing on these request paths yields: the core is deterministically still replaying.
#[tokio::test(flavor = "current_thread")]
async fn not_ready_is_503_with_retry_after() {
    let h = Harness::start_replaying().await;
    assert_eq!(h.core.readiness(), Readiness::Replaying);
    let app = h.app();
    let r = get(&app, "/trident/v1/backend").await;
    assert_eq!(r.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_json(&r);
    assert_eq!(r.headers[header::RETRY_AFTER], "1");
    assert_eq!(
        r.json,
        json!({"backends": [], "error": "storch is initializing, please try again later"})
    );
    let r = post(&app, "/trident/v1/volume", r#"{"name":"v","size":"1G"}"#).await;
    assert_eq!(r.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(r.json["backend"], "");

    // The probes: alive, not ready, and why.
    let r = get(&app, "/livez").await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(r.json, json!({"status": "ok"}));
    let r = get(&app, "/readyz").await;
    assert_eq!(r.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(r.headers[header::RETRY_AFTER], "1");
    assert_eq!(
        r.json,
        json!({"status": "unavailable", "reasons": ["the event log is being replayed"]})
    );
    // A replaying instance is not ready even when standbys count.
    let r = get(&app, "/readyz?standby=ok").await;
    assert_eq!(r.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(r.json["status"], "unavailable");
    assert_eq!(h.core.readiness(), Readiness::Replaying, "the premise held");
    h.stop().await;
}

/// A core whose boot failed (a corrupt log): every operation is a 500 without detail, the
/// process is alive but not ready.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_boot_is_500_without_detail_and_not_ready() {
    let h = Harness::start().await;
    assert_eq!(
        post(&h.app(), "/trident/v1/backend", BACKEND).await.status,
        201
    );
    let dir = h.stop_keeping_dir().await;
    {
        let log =
            crate::log::EventLog::open(&dir.path().join("log"), crate::log::Durability::Flush)
                .unwrap();
        // Drop the last event and the shutdown checkpoint, then damage the first record.
        log.truncate_after(1).await.unwrap();
        log.corrupt_for_tests(1, |raw| {
            let i = raw.len() - 33;
            raw[i] ^= 0x01;
        });
        log.shutdown().await.unwrap();
    }
    let h = Harness::start_in(dir).await;
    for _ in 0..500 {
        if matches!(h.core.readiness(), Readiness::Failed(_)) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(matches!(h.core.readiness(), Readiness::Failed(_)));
    let app = h.app();
    let r = get(&app, "/trident/v1/backend").await;
    assert_eq!(r.status, StatusCode::INTERNAL_SERVER_ERROR);
    assert_json(&r);
    assert_eq!(r.json["backends"], json!([]));
    let msg = r.json["error"].as_str().unwrap();
    let rid = r.headers[REQUEST_ID_HEADER].to_str().unwrap();
    assert_eq!(
        msg,
        format!("storch initialization failed; see the server log (request id {rid})")
    );
    let r = get(&app, "/livez").await;
    assert_eq!(r.status, StatusCode::OK);
    let r = get(&app, "/readyz?standby=ok").await;
    assert_eq!(
        r.status,
        StatusCode::SERVICE_UNAVAILABLE,
        "failed is never ready"
    );
    let r = get(&app, "/readyz").await;
    assert_eq!(r.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(r.json["status"], "unavailable");
    let reasons = r.json["reasons"].as_array().unwrap();
    assert_eq!(reasons.len(), 1, "{reasons:?}");
    assert!(
        reasons[0]
            .as_str()
            .unwrap()
            .contains("storch events verify"),
        "{reasons:?}"
    );
    h.stop().await;
}

/// `/readyz` for each state an instance can be in, plain and with `?standby=ok`: only a
/// caught-up standby answers differently (200, status `standby`, still naming the leader).
#[test]
fn readyz_counts_a_caught_up_standby_only_with_standby_ok() {
    use crate::actors::Health;
    use crate::api::handlers::health::readiness;
    let health = |replay_done, degraded: Option<&str>, standby_of: Option<&str>| Health {
        log_open: true,
        replay_done,
        degraded: degraded.map(String::from),
        standby_of: standby_of.map(String::from),
        starting: Vec::new(),
    };
    let leader = health(true, None, None);
    let starting = Health {
        starting: vec!["backends still initialising: a".into()],
        ..leader.clone()
    };
    let standby = health(true, None, Some("storch-0"));
    let replaying_standby = health(false, None, Some("storch-0"));
    let poisoned_standby = health(true, Some("event log poisoned: x"), Some("storch-0"));
    let failed = health(false, Some("boot failed"), None);
    let closed = Health {
        log_open: false,
        ..standby.clone()
    };
    for (h, plain, standby_ok, status) in [
        (&leader, 200, 200, "ok"),
        (&standby, 503, 200, "standby"),
        (&replaying_standby, 503, 503, "standby"),
        (&poisoned_standby, 503, 503, "standby"),
        (&closed, 503, 503, "standby"),
        (&failed, 503, 503, "unavailable"),
        (&starting, 503, 503, "unavailable"),
    ] {
        for (ok, code) in [(false, plain), (true, standby_ok)] {
            let (got, body) = readiness(h, ok);
            assert_eq!(got.as_u16(), code, "{h:?} standby_ok={ok}");
            assert_eq!(body.status, status, "{h:?}");
        }
    }
    let (_, body) = readiness(&standby, true);
    assert_eq!(
        body.reasons,
        ["this instance is an etcd standby (reads only); the leader is storch-0"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readyz_refuses_a_bad_query_naming_the_parameter() {
    let h = Harness::start().await;
    let app = h.app();
    assert_eq!(get(&app, "/readyz?standby=ok").await.status, StatusCode::OK);
    for (uri, needle) in [
        (
            "/readyz?standby=yes",
            "invalid query parameter standby: \"yes\" is not accepted",
        ),
        (
            "/readyz?standbyok=true",
            "invalid query parameter \"standbyok\"",
        ),
        (
            "/readyz?standby=ok&standby=ok",
            "standby: given more than once",
        ),
    ] {
        let r = get(&app, uri).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{uri}");
        let msg = r.json["error"].as_str().unwrap_or_default();
        assert!(msg.contains(needle), "{uri}: {msg}");
    }
    h.stop().await;
}

#[tokio::test]
async fn server_errors_hide_their_detail() {
    for (err, status) in [
        (CoreError::Internal("disk on fire at /secret".into()), 500),
        (
            CoreError::BootstrapFailed("disk on fire at /secret".into()),
            500,
        ),
        (
            CoreError::Unavailable("disk on fire at /secret".into()),
            503,
        ),
    ] {
        let e = err.clone();
        let app = mini_app(
            Method::GET,
            "/trident/v1/volume/{volume}",
            move |ctx: handlers::ReqCtx| async move {
                handlers::Call::new(error::Op::GetVolume, ctx).core::<()>(Err(e))
            },
        );
        let r = get(&app, "/trident/v1/volume/v").await;
        assert_eq!(r.status.as_u16(), status, "{err:?}");
        assert_json(&r);
        assert_eq!(r.json["volume"], Value::Null);
        let msg = r.json["error"].as_str().unwrap();
        assert!(!msg.contains("secret"), "{msg}");
        let rid = r.headers[REQUEST_ID_HEADER].to_str().unwrap();
        assert!(msg.contains(rid), "{msg}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_and_failed_are_400_with_the_core_message() {
    let h = Harness::start().await;
    let app = h.app();
    // Invalid: an unknown driver.
    let r = post(
        &app,
        "/trident/v1/backend",
        r#"{"version":1,"storageDriverName":"x","backendName":"b1"}"#,
    )
    .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert_eq!(
        r.json,
        json!({"backend": "", "error": "unknown storage driver: x"})
    );
    // Failed: a valid request that cannot be carried out (no pool for the class).
    assert_eq!(
        post(&app, "/trident/v1/storageclass", CLASS_ANY)
            .await
            .status,
        201
    );
    let r = post(
        &app,
        "/trident/v1/volume",
        r#"{"name":"v","size":"1G","storageClass":"gold"}"#,
    )
    .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert_eq!(r.json.as_object().unwrap().len(), 2, "{}", r.json);
    assert_eq!(r.json["backend"], "");
    let msg = r.json["error"].as_str().unwrap();
    assert!(
        msg.starts_with("no available backends for storage class gold"),
        "{msg}"
    );
    h.stop().await;
}

#[tokio::test]
async fn handler_panics_become_500_envelopes() {
    async fn boom() -> &'static str {
        panic!("told to panic")
    }
    let app = mini_app(Method::GET, "/trident/v1/backend/{backend}", boom);
    let r = get(&app, "/trident/v1/backend/b1").await;
    assert_eq!(r.status, StatusCode::INTERNAL_SERVER_ERROR);
    assert_json(&r);
    assert_eq!(r.json["backend"], Value::Null);
    assert!(
        r.json["error"]
            .as_str()
            .unwrap()
            .starts_with("internal error")
    );
    let app = mini_app(Method::DELETE, "/trident/v1/volume/{volume}", boom);
    let r = delete(&app, "/trident/v1/volume/v").await;
    assert_eq!(r.status, StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(r.json.as_object().unwrap().len(), 1);
}

// ---------------------------------------------------------------------------------------------
// Body limits

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bodies_over_the_cap_are_413() {
    let h = Harness::start().await;
    let app = h.app();
    assert_eq!(post(&app, "/trident/v1/backend", BACKEND).await.status, 201);
    assert_eq!(
        post(&app, "/trident/v1/storageclass", CLASS_ANY)
            .await
            .status,
        201
    );
    let setup = h.events().await.len();

    let big = format!(
        r#"{{"name":"v","size":"1G","storageClass":"gold","pad":"{}"}}"#,
        "x".repeat(MAX_BODY_BYTES)
    );
    let r = post(&app, "/trident/v1/volume", &big).await;
    assert_eq!(r.status, StatusCode::PAYLOAD_TOO_LARGE);
    assert_json(&r);
    assert_eq!(
        r.json,
        json!({"backend": "", "error": "request body is larger than the limit of 1048576 bytes"})
    );

    // Exactly at the cap is fine (and parsed).
    let prefix = r#"{"name":"v","size":"1G","storageClass":"gold","pad":""#;
    let pad = MAX_BODY_BYTES - prefix.len() - 2;
    let exact = format!("{prefix}{}\"}}", "x".repeat(pad));
    assert_eq!(exact.len(), MAX_BODY_BYTES);
    let r = post(&app, "/trident/v1/volume", &exact).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.json);

    // A streamed body without a length: cut off at the cap.
    let pulled = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = pulled.clone();
    let stream = futures::stream::repeat_with(move || {
        counter.fetch_add(4096, std::sync::atomic::Ordering::SeqCst);
        Ok::<_, std::io::Error>(Bytes::from(vec![b' '; 4096]))
    });
    let r = send(
        &app,
        Method::POST,
        "/trident/v1/backend",
        Body::from_stream(stream),
    )
    .await;
    assert_eq!(r.status, StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(r.json["backend"], "");
    let pulled = pulled.load(std::sync::atomic::Ordering::SeqCst);
    assert!(pulled <= MAX_BODY_BYTES + 4096, "{pulled}");

    // A declared length over the cap: refused up front.
    let req = Request::post("/trident/v1/storageclass")
        .header(header::CONTENT_LENGTH, "999999999")
        .body(Body::from("{}"))
        .unwrap();
    let r = call(&app, req).await;
    assert_eq!(r.status, StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(r.json["storageClass"], "");

    // Only the exact-cap volume reached the core.
    let after: Vec<String> = h
        .events()
        .await
        .into_iter()
        .skip(setup)
        .map(|e| e.stream)
        .collect();
    assert!(!after.is_empty());
    assert!(after.iter().all(|s| s == "volume/v"), "{after:?}");
    h.stop().await;
}

// ---------------------------------------------------------------------------------------------
// Logs never carry bodies

#[derive(Clone, Default)]
struct LogBuf(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for LogBuf {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for LogBuf {
    type Writer = LogBuf;
    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logs_carry_request_ids_but_never_bodies() {
    let h = Harness::start().await;
    let buf = LogBuf::default();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_writer(buf.clone())
        .with_ansi(false)
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);

    let app = h.app();
    let req = Request::post("/trident/v1/backend")
        .header("x-request-id", "trace-me-1")
        .body(Body::from(BACKEND))
        .unwrap();
    assert_eq!(call(&app, req).await.status, StatusCode::CREATED);
    let bad_yaml = "username: admin\npassword: canary-pw-8472\nsvm: [unclosed\n";
    assert_eq!(
        post(&app, "/trident/v1/backend", bad_yaml).await.status,
        StatusCode::BAD_REQUEST
    );
    let bad_json = r#"{"password":"canary-pw-8472", "x": "#;
    assert_eq!(
        post(&app, "/trident/v1/backend/b1", bad_json).await.status,
        StatusCode::BAD_REQUEST
    );

    let logs = String::from_utf8(buf.0.lock().unwrap().clone()).unwrap();
    assert!(logs.contains("trace-me-1"), "{logs}");
    assert!(logs.contains("request finished"), "{logs}");
    assert!(logs.contains("status=201"), "{logs}");
    assert!(logs.contains("op=\"add_backend\""), "{logs}");
    assert!(!logs.contains("canary-pw-8472"), "{logs}");
    drop(_guard);
    h.stop().await;
}

// ---------------------------------------------------------------------------------------------
// The server on a real socket

async fn start_server(
    core: Core,
    grace: Duration,
) -> (
    std::net::SocketAddr,
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<std::io::Result<()>>,
) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let options = ServeOptions {
        grace,
        ..ServeOptions::default()
    };
    let server = tokio::spawn(serve_with(listener, core, options, async move {
        let _ = stop_rx.await;
    }));
    (addr, stop_tx, server)
}

/// A core with backend `b1` whose every array call takes `latency`, and class `gold`.
async fn slow_core(latency: &str) -> Harness {
    let h = Harness::start().await;
    let app = h.app();
    let backend = format!(
        r#"{{"version":1,"storageDriverName":"fake","backendName":"b1","latency":"{latency}",
            "pools":{{"pool-a":{{"sizeBytes":10737418240,"attributes":{{}}}}}}}}"#
    );
    let r = post(&app, "/trident/v1/backend", &backend).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.json);
    assert_eq!(
        post(&app, "/trident/v1/storageclass", CLASS_ANY)
            .await
            .status,
        201
    );
    h
}

/// Waits until the core recorded the intent of volume `name` (the request is in flight).
async fn wait_for_intent(h: &Harness, name: &str) {
    for _ in 0..1000 {
        if !h.events_of(&format!("volume/{name}")).await.is_empty() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    panic!("the request never reached the core");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_answers_and_stops_gracefully() {
    let h = slow_core("1s").await;
    let (addr, stop, server) = start_server(h.core.clone(), Duration::from_secs(10)).await;
    let client = crate::net::client();
    let base = format!("http://{addr}");

    let r = client
        .get(format!("{base}/trident/v1/version"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    assert!(r.headers().contains_key("x-request-id"));
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["version"], "18.07.0");

    // A create in flight when shutdown starts still completes.
    let in_flight = tokio::spawn({
        let client = client.clone();
        let url = format!("{base}/trident/v1/volume");
        async move {
            client
                .post(url)
                .body(r#"{"name":"v1","size":"1G","storageClass":"gold"}"#)
                .send()
                .await
        }
    });
    wait_for_intent(&h, "v1").await;
    stop.send(()).unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(!server.is_finished(), "must wait for the in-flight request");
    let r = in_flight.await.unwrap().unwrap();
    assert_eq!(r.status().as_u16(), 201);
    tokio::time::timeout(Duration::from_secs(5), server)
        .await
        .expect("serve returns after the drain")
        .unwrap()
        .unwrap();
    assert!(tokio::net::TcpStream::connect(addr).await.is_err());
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_gives_up_on_stuck_requests_after_the_grace_period() {
    let h = slow_core("2s").await;
    let (addr, stop, server) = start_server(h.core.clone(), Duration::from_millis(200)).await;
    let stuck = tokio::spawn(async move {
        crate::net::client()
            .post(format!("http://{addr}/trident/v1/volume"))
            .body(r#"{"name":"v1","size":"1G","storageClass":"gold"}"#)
            .send()
            .await
    });
    wait_for_intent(&h, "v1").await;
    stop.send(()).unwrap();
    tokio::time::timeout(Duration::from_secs(5), server)
        .await
        .expect("serve returns after the grace period")
        .unwrap()
        .unwrap();
    // The stuck request was cut, not answered.
    let outcome = stuck.await.unwrap();
    assert!(outcome.is_err(), "{outcome:?}");
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn huge_chunked_upload_is_cut_off_on_the_socket() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    let h = Harness::start().await;
    let (addr, stop, server) = start_server(h.core.clone(), Duration::from_secs(5)).await;
    let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (mut rd, mut wr) = stream.into_split();
    // Up to 256 MiB of chunks; the server must answer and stop reading long before.
    let writer = tokio::spawn(async move {
        let head =
            "POST /trident/v1/backend HTTP/1.1\r\nhost: x\r\ntransfer-encoding: chunked\r\n\r\n";
        wr.write_all(head.as_bytes()).await?;
        let chunk = vec![b' '; 64 * 1024];
        let mut sent: usize = 0;
        while sent < 256 << 20 {
            wr.write_all(format!("{:x}\r\n", chunk.len()).as_bytes())
                .await?;
            wr.write_all(&chunk).await?;
            wr.write_all(b"\r\n").await?;
            sent += chunk.len();
        }
        Ok::<usize, std::io::Error>(sent)
    });
    let mut response = Vec::new();
    let mut buf = [0u8; 4096];
    let read = tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            match rd.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    response.extend_from_slice(&buf[..n]);
                    if response.windows(4).any(|w| w == b"\r\n\r\n")
                        && response.ends_with(b"\n")
                        && response.len() > 20
                    {
                        break;
                    }
                }
            }
        }
    })
    .await;
    assert!(read.is_ok(), "no response within 20 s");
    let text = String::from_utf8_lossy(&response);
    assert!(text.starts_with("HTTP/1.1 413"), "{text}");
    assert!(
        text.contains("request body is larger than the limit"),
        "{text}"
    );
    drop(rd);
    let sent = tokio::time::timeout(Duration::from_secs(20), writer)
        .await
        .expect("the server stops reading, so the writer fails")
        .unwrap();
    assert!(sent.is_err(), "the whole 256 MiB was accepted: {sent:?}");
    stop.send(()).unwrap();
    server.await.unwrap().unwrap();
    h.stop().await;
}

// ---------------------------------------------------------------------------------------------
// The real core, through `router`

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_core_smoke() {
    let h = Harness::start().await;
    let app = h.app();

    let yaml = concat!(
        "version: 1\n",
        "storageDriverName: fake\n",
        "backendName: nas1\n",
        "instanceName: nas1\n",
        "protocol: file\n",
        "password: canary-pw-8472\n",
        "pools:\n",
        "  p1:\n",
        "    sizeBytes: 10737418240\n",
        "    attributes:\n",
        "      media: {offer: [ssd]}\n",
    );
    let r = post(&app, "/trident/v1/backend", yaml).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.json);
    assert_eq!(r.json, json!({"backend": "nas1"}));
    let r = get(&app, "/trident/v1/backend/nas1").await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(r.json["backend"]["storage"]["p1"]["name"], "p1");
    assert!(!String::from_utf8_lossy(&r.raw).contains("canary-pw-8472"));

    let class = r#"{"version":"1","name":"gold","attributes":{"media":"ssd"}}"#;
    let r = post(&app, "/trident/v1/storageclass", class).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.json);
    let r = post(&app, "/trident/v1/storageclass", class).await;
    assert_eq!(r.status, StatusCode::CONFLICT, "{}", r.json);

    let vol = r#"{"name":"v1","size":"1GiB","storageClass":"gold"}"#;
    let r = post(&app, "/trident/v1/volume", vol).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.json);
    assert_eq!(r.json, json!({"backend": "nas1"}));
    let r = post(&app, "/trident/v1/volume", vol).await;
    assert_eq!(r.status, StatusCode::CONFLICT, "{}", r.json);
    let r = get(&app, "/trident/v1/volume/v1").await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(
        r.json["volume"]["Config"]["size"], "1Gi",
        "stored canonical"
    );
    assert_eq!(r.json["volume"]["pool"], "p1");
    assert_eq!(r.json["volume"]["state"], "online");

    let r = delete(&app, "/trident/v1/volume/v1").await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.json);
    let r = delete(&app, "/trident/v1/volume/v1").await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.json);
    let r = get(&app, "/trident/v1/backend/nope").await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.json);
    assert_eq!(r.json["backend"], Value::Null);

    drop(app);
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backend_errors_never_echo_the_request_secrets() {
    let h = Harness::start().await;
    let app = h.app();
    let canary = r#"{"version":1,"storageDriverName":"canary-pw-8472","backendName":"b1",
        "password":"canary-pw-8472"}"#;
    let r = post(&app, "/trident/v1/backend", canary).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert_eq!(
        r.json,
        json!({"backend": "", "error": "unknown storage driver: <redacted>"})
    );
    assert_eq!(post(&app, "/trident/v1/backend", BACKEND).await.status, 201);
    let r = post(&app, "/trident/v1/backend/b1", canary).await;
    assert_eq!(r.json["error"], "unknown storage driver: <redacted>");
    h.stop().await;
}

#[tokio::test]
async fn request_ctx_defaults_when_the_middleware_did_not_run() {
    let app: Router = Router::new().route(
        "/x",
        axum::routing::get(|ctx: handlers::ReqCtx| async move {
            let RequestCtx { request_id } = ctx.0;
            request_id
        }),
    );
    let r = get(&app, "/x").await;
    let id = String::from_utf8(r.raw.to_vec()).unwrap();
    assert!(uuid::Uuid::parse_str(&id).is_ok(), "{id}");
}
