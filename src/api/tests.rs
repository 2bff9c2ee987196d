//! HTTP-level tests of the router against an in-memory fake core: routes, envelopes, status
//! codes, body limits, request ids, panics, logging hygiene, and `serve` on a real socket.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, Method, Request, StatusCode, header};
use serde_json::{Value, json};
use tokio::sync::Notify;
use tower::ServiceExt;

use super::core_api::CoreApi;
use super::*;
use crate::actors::{
    BackendState, BackendView, CoreError, PoolView, RequestCtx, StorageClassView, VolumeState,
    VolumeView,
};
use crate::model::{Protocol, StorageClassConfig, VolumeConfig};

// ---------------------------------------------------------------------------------------------
// The fake core

#[derive(Default)]
struct FakeState {
    backends: BTreeMap<String, Value>,
    classes: BTreeMap<String, StorageClassConfig>,
    volumes: BTreeMap<String, VolumeConfig>,
    /// Every call returns this error when set.
    fail: Option<CoreError>,
    /// Reads panic when set.
    panic: bool,
    /// `add_volume` waits for this when set.
    gate: Option<Arc<Notify>>,
    /// (operation, request id) of every mutating call.
    calls: Vec<(String, String)>,
}

#[derive(Clone, Default)]
struct Fake(Arc<Mutex<FakeState>>);

impl Fake {
    fn with(f: impl FnOnce(&mut FakeState)) -> Fake {
        let fake = Fake::default();
        f(&mut fake.0.lock().unwrap());
        fake
    }

    fn state(&self) -> std::sync::MutexGuard<'_, FakeState> {
        self.0.lock().unwrap()
    }

    fn begin(&self, op: &str, ctx: Option<&RequestCtx>) -> Result<(), CoreError> {
        let mut s = self.state();
        if let Some(ctx) = ctx {
            s.calls.push((op.to_string(), ctx.request_id.clone()));
        }
        if s.panic {
            panic!("fake core told to panic");
        }
        match &s.fail {
            Some(e) => Err(e.clone()),
            None => Ok(()),
        }
    }
}

fn backend_name(doc: &Value) -> String {
    doc.get("backendName")
        .and_then(Value::as_str)
        .unwrap_or("fake_default")
        .to_string()
}

impl CoreApi for Fake {
    fn add_backend(
        &self,
        ctx: &RequestCtx,
        doc: Value,
    ) -> impl Future<Output = Result<String, CoreError>> + Send {
        let r = self.begin("add_backend", Some(ctx)).map(|()| {
            let name = backend_name(&doc);
            self.state().backends.insert(name.clone(), doc);
            name
        });
        async move { r }
    }

    fn update_backend(
        &self,
        ctx: &RequestCtx,
        name: &str,
        doc: Value,
    ) -> impl Future<Output = Result<String, CoreError>> + Send {
        let r = self.begin("update_backend", Some(ctx)).and_then(|()| {
            let mut s = self.state();
            if s.backends.remove(name).is_none() {
                return Err(CoreError::NotFound(format!("backend {name} was not found")));
            }
            let new = backend_name(&doc);
            s.backends.insert(new.clone(), doc);
            Ok(new)
        });
        async move { r }
    }

    fn delete_backend(
        &self,
        ctx: &RequestCtx,
        name: &str,
    ) -> impl Future<Output = Result<(), CoreError>> + Send {
        let r = self.begin("delete_backend", Some(ctx)).and_then(|()| {
            self.state()
                .backends
                .remove(name)
                .map(|_| ())
                .ok_or_else(|| CoreError::NotFound(format!("backend {name} not found")))
        });
        async move { r }
    }

    fn get_backend(&self, name: &str) -> Result<BackendView, CoreError> {
        self.begin("get_backend", None)?;
        let s = self.state();
        let doc = s
            .backends
            .get(name)
            .ok_or_else(|| CoreError::NotFound(format!("backend {name} was not found")))?;
        Ok(BackendView {
            name: name.to_string(),
            driver: "fake".into(),
            protocol: Protocol::File,
            config: json!({"version": 1, "storageDriverName": doc["storageDriverName"]}),
            pools: vec![PoolView {
                name: "pool-a".into(),
                storage_classes: s.classes.keys().cloned().collect(),
                offers: BTreeMap::new(),
                total_bytes: Some(1 << 30),
                free_bytes: Some(1 << 29),
            }],
            online: true,
            state: BackendState::Online,
            volumes: s.volumes.keys().cloned().collect(),
        })
    }

    fn list_backends(&self) -> Result<Vec<String>, CoreError> {
        self.begin("list_backends", None)?;
        Ok(self.state().backends.keys().cloned().collect())
    }

    fn add_storage_class(
        &self,
        ctx: &RequestCtx,
        config: StorageClassConfig,
    ) -> impl Future<Output = Result<String, CoreError>> + Send {
        let r = self.begin("add_storage_class", Some(ctx)).and_then(|()| {
            let mut s = self.state();
            let name = config.name.clone();
            if s.classes.contains_key(&name) {
                return Err(CoreError::AlreadyExists(format!(
                    "storage class {name} already exists"
                )));
            }
            s.classes.insert(name.clone(), config);
            Ok(name)
        });
        async move { r }
    }

    fn delete_storage_class(
        &self,
        ctx: &RequestCtx,
        name: &str,
    ) -> impl Future<Output = Result<(), CoreError>> + Send {
        let r = self
            .begin("delete_storage_class", Some(ctx))
            .and_then(|()| {
                self.state()
                    .classes
                    .remove(name)
                    .map(|_| ())
                    .ok_or_else(|| CoreError::NotFound(format!("storage class {name} not found")))
            });
        async move { r }
    }

    fn get_storage_class(&self, name: &str) -> Result<StorageClassView, CoreError> {
        self.begin("get_storage_class", None)?;
        let s = self.state();
        let config =
            s.classes.get(name).cloned().ok_or_else(|| {
                CoreError::NotFound(format!("storage class {name} was not found"))
            })?;
        let pools = s
            .backends
            .keys()
            .map(|b| (b.clone(), vec!["pool-a".to_string()]))
            .collect();
        Ok(StorageClassView { config, pools })
    }

    fn list_storage_classes(&self) -> Result<Vec<String>, CoreError> {
        self.begin("list_storage_classes", None)?;
        Ok(self.state().classes.keys().cloned().collect())
    }

    fn add_volume(
        &self,
        ctx: &RequestCtx,
        config: VolumeConfig,
    ) -> impl Future<Output = Result<VolumeView, CoreError>> + Send {
        let this = self.clone();
        let begun = self.begin("add_volume", Some(ctx));
        async move {
            begun?;
            let gate = this.state().gate.clone();
            if let Some(gate) = gate {
                gate.notified().await;
            }
            let mut s = this.state();
            if s.volumes.contains_key(&config.name) {
                return Err(CoreError::AlreadyExists(format!(
                    "volume {} already exists",
                    config.name
                )));
            }
            if !config.storage_class.is_empty() && !s.classes.contains_key(&config.storage_class) {
                return Err(CoreError::NotFound(format!(
                    "unknown storage class: {}",
                    config.storage_class
                )));
            }
            s.volumes.insert(config.name.clone(), config.clone());
            Ok(volume_view(config))
        }
    }

    fn delete_volume(
        &self,
        ctx: &RequestCtx,
        name: &str,
    ) -> impl Future<Output = Result<(), CoreError>> + Send {
        let r = self.begin("delete_volume", Some(ctx)).and_then(|()| {
            self.state()
                .volumes
                .remove(name)
                .map(|_| ())
                .ok_or_else(|| CoreError::NotFound(format!("volume {name} not found")))
        });
        async move { r }
    }

    fn get_volume(&self, name: &str) -> Result<VolumeView, CoreError> {
        self.begin("get_volume", None)?;
        self.state()
            .volumes
            .get(name)
            .cloned()
            .map(volume_view)
            .ok_or_else(|| CoreError::NotFound(format!("volume {name} was not found")))
    }

    fn list_volumes(&self) -> Result<Vec<String>, CoreError> {
        self.begin("list_volumes", None)?;
        Ok(self.state().volumes.keys().cloned().collect())
    }
}

fn volume_view(mut config: VolumeConfig) -> VolumeView {
    config.version = "1".into();
    config.internal_name = format!("trident_{}", config.name);
    VolumeView {
        config,
        backend: "b1".into(),
        pool: "pool-a".into(),
        orphaned: false,
        state: VolumeState::Online,
        last_error: None,
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

const BACKEND: &str = r#"{"version":1,"storageDriverName":"fake","backendName":"b1",
    "protocol":"file","password":"canary-pw-8472"}"#;

// ---------------------------------------------------------------------------------------------
// Version, request ids, fallbacks

#[tokio::test]
async fn version_on_both_paths() {
    let app = app(Fake::default());
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
}

#[tokio::test]
async fn request_ids_are_made_echoed_and_passed_to_the_core() {
    let fake = Fake::default();
    let app = app(fake.clone());
    let r = get(&app, "/trident/v1/version").await;
    let id = r.headers[REQUEST_ID_HEADER].to_str().unwrap();
    assert!(uuid::Uuid::parse_str(id).is_ok(), "{id}");

    let req = Request::post("/trident/v1/backend")
        .header("x-request-id", "client-id-42")
        .body(Body::from(BACKEND))
        .unwrap();
    let r = call(&app, req).await;
    assert_eq!(r.status, StatusCode::CREATED);
    assert_eq!(r.headers[REQUEST_ID_HEADER], "client-id-42");
    assert_eq!(
        fake.state().calls.last().unwrap(),
        &("add_backend".to_string(), "client-id-42".to_string())
    );

    let req = Request::post("/trident/v1/backend")
        .header("x-request-id", "not safe/../x")
        .body(Body::from(BACKEND))
        .unwrap();
    let r = call(&app, req).await;
    let id = r.headers[REQUEST_ID_HEADER].to_str().unwrap().to_string();
    assert!(uuid::Uuid::parse_str(&id).is_ok(), "{id}");
    assert_eq!(fake.state().calls.last().unwrap().1, id);
}

#[tokio::test]
async fn unknown_paths_are_json_404() {
    let app = app(Fake::default());
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
}

#[tokio::test]
async fn trailing_slashes_redirect() {
    let app = app(Fake::default());
    let r = get(&app, "/trident/v1/backend/").await;
    assert_eq!(r.status, StatusCode::MOVED_PERMANENTLY);
    assert_eq!(r.headers[header::LOCATION], "/trident/v1/backend");
    let r = get(&app, "//evil.example/").await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn wrong_methods_are_json_405_with_allow() {
    let app = app(Fake::default());
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
}

// ---------------------------------------------------------------------------------------------
// Backends

#[tokio::test]
async fn backend_lifecycle_json() {
    let fake = Fake::default();
    let app = app(fake.clone());
    let r = post(&app, "/trident/v1/backend", BACKEND).await;
    assert_eq!(r.status, StatusCode::CREATED);
    assert_json(&r);
    assert_eq!(r.json, json!({"backend": "b1"}));
    assert_eq!(fake.state().backends["b1"]["password"], "canary-pw-8472");

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
    assert_eq!(b["storage"]["pool-a"]["storageAttributes"], json!({}));
    assert_eq!(b["volumes"], json!([]));

    let r = post(
        &app,
        "/trident/v1/backend/b1",
        r#"{"version":1,"storageDriverName":"fake","backendName":"b2"}"#,
    )
    .await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(r.json, json!({"backend": "b2"}));

    let r = delete(&app, "/trident/v1/backend/b2").await;
    assert_eq!(r.status, StatusCode::OK);
    assert_json(&r);
    assert_eq!(r.json, json!({}));
}

#[tokio::test]
async fn backend_yaml_body() {
    let fake = Fake::default();
    let app = app(fake.clone());
    let yaml =
        "version: 1\nstorageDriverName: fake\nbackendName: y1\npools:\n  a:\n    sizeBytes: 10\n";
    let r = post(&app, "/trident/v1/backend", yaml).await;
    assert_eq!(r.status, StatusCode::CREATED);
    assert_eq!(r.json, json!({"backend": "y1"}));
    assert_eq!(fake.state().backends["y1"]["pools"]["a"]["sizeBytes"], 10);
}

#[tokio::test]
async fn backend_errors_use_the_envelopes() {
    let fake = Fake::default();
    let app = app(fake.clone());

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
        fake.state().calls.is_empty(),
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
}

#[tokio::test]
async fn bad_names_in_paths_are_refused_before_the_core() {
    let fake = Fake::default();
    let app = app(fake.clone());
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
    assert!(fake.state().calls.is_empty());
}

// ---------------------------------------------------------------------------------------------
// Volumes

#[tokio::test]
async fn volume_lifecycle() {
    let fake = Fake::default();
    let app = app(fake.clone());
    let body = r#"{"name":"v1","size":"1GB","protocol":"file"}"#;
    let r = post(&app, "/trident/v1/volume", body).await;
    assert_eq!(r.status, StatusCode::CREATED);
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
    assert_eq!(v["Config"]["internalName"], "trident_v1");
    assert_eq!(v["backend"], "b1");
    assert_eq!(v["pool"], "pool-a");
    assert_eq!(v["orphaned"], false);
    assert_eq!(v["state"], "online");

    let r = delete(&app, "/trident/v1/volume/v1").await;
    assert_eq!(r.status, StatusCode::OK);
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
}

#[tokio::test]
async fn volume_validation_happens_before_the_core() {
    let fake = Fake::default();
    let app = app(fake.clone());
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
    assert!(fake.state().calls.is_empty());
}

#[tokio::test]
async fn volume_with_unknown_class_is_400_not_404() {
    let app = app(Fake::default());
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
}

// ---------------------------------------------------------------------------------------------
// Storage classes

#[tokio::test]
async fn storage_class_lifecycle() {
    let fake = Fake::default();
    let app = app(fake.clone());
    post(&app, "/trident/v1/backend", BACKEND).await;
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
}

#[tokio::test]
async fn storage_class_bad_bodies() {
    let fake = Fake::default();
    let app = app(fake.clone());
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
    assert!(fake.state().calls.is_empty());
}

// ---------------------------------------------------------------------------------------------
// Core error classes over HTTP

#[tokio::test]
async fn not_ready_is_503_with_retry_after() {
    let app = app(Fake::with(|s| s.fail = Some(CoreError::NotReady)));
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
        let app = app(Fake::with(|s| s.fail = Some(err.clone())));
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

#[tokio::test]
async fn invalid_and_failed_are_400_with_the_core_message() {
    for err in [
        CoreError::Invalid("unknown storage driver: x".into()),
        CoreError::Failed("problem initializing storage driver 'fake': boom".into()),
    ] {
        let app = app(Fake::with(|s| s.fail = Some(err.clone())));
        let r = post(&app, "/trident/v1/backend", BACKEND).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST);
        assert_eq!(r.json, json!({"backend": "", "error": err.to_string()}));
    }
}

#[tokio::test]
async fn handler_panics_become_500_envelopes() {
    let app = app(Fake::with(|s| s.panic = true));
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
    let r = delete(&app, "/trident/v1/volume/v").await;
    assert_eq!(r.status, StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(r.json.as_object().unwrap().len(), 1);
}

// ---------------------------------------------------------------------------------------------
// Body limits

#[tokio::test]
async fn bodies_over_the_cap_are_413() {
    let fake = Fake::default();
    let app = app(fake.clone());
    let big = format!(
        r#"{{"name":"v","size":"1G","pad":"{}"}}"#,
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
    let prefix = r#"{"name":"v","size":"1G","pad":""#;
    let pad = MAX_BODY_BYTES - prefix.len() - 2;
    let exact = format!("{prefix}{}\"}}", "x".repeat(pad));
    assert_eq!(exact.len(), MAX_BODY_BYTES);
    let r = post(&app, "/trident/v1/volume", &exact).await;
    assert_eq!(r.status, StatusCode::CREATED);

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
    assert_eq!(fake.state().calls.len(), 1, "only the exact-cap volume");
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

#[tokio::test]
async fn logs_carry_request_ids_but_never_bodies() {
    let buf = LogBuf::default();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_writer(buf.clone())
        .with_ansi(false)
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);

    let app = app(Fake::default());
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
}

// ---------------------------------------------------------------------------------------------
// serve() on a real socket

async fn start_server(
    fake: Fake,
    grace: std::time::Duration,
) -> (
    std::net::SocketAddr,
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<std::io::Result<()>>,
) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(serve_app(
        listener,
        app(fake),
        async move {
            let _ = stop_rx.await;
        },
        grace,
    ));
    (addr, stop_tx, server)
}

async fn wait_for_a_call(fake: &Fake) {
    for _ in 0..1000 {
        if !fake.state().calls.is_empty() {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    panic!("the request never reached the core");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_answers_and_stops_gracefully() {
    let gate = Arc::new(Notify::new());
    let fake = Fake::with(|s| s.gate = Some(gate.clone()));
    let (addr, stop, server) = start_server(fake.clone(), std::time::Duration::from_secs(10)).await;
    let client = reqwest::Client::new();
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
                .body(r#"{"name":"v1","size":"1G"}"#)
                .send()
                .await
        }
    });
    wait_for_a_call(&fake).await;
    stop.send(()).unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    assert!(!server.is_finished(), "must wait for the in-flight request");
    gate.notify_one();
    let r = in_flight.await.unwrap().unwrap();
    assert_eq!(r.status().as_u16(), 201);
    tokio::time::timeout(std::time::Duration::from_secs(5), server)
        .await
        .expect("serve returns after the drain")
        .unwrap()
        .unwrap();
    assert!(tokio::net::TcpStream::connect(addr).await.is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_gives_up_on_stuck_requests_after_the_grace_period() {
    let gate = Arc::new(Notify::new());
    let fake = Fake::with(|s| s.gate = Some(gate.clone()));
    let (addr, stop, server) =
        start_server(fake.clone(), std::time::Duration::from_millis(200)).await;
    let _stuck = tokio::spawn(async move {
        reqwest::Client::new()
            .post(format!("http://{addr}/trident/v1/volume"))
            .body(r#"{"name":"v1","size":"1G"}"#)
            .send()
            .await
    });
    wait_for_a_call(&fake).await;
    stop.send(()).unwrap();
    tokio::time::timeout(std::time::Duration::from_secs(5), server)
        .await
        .expect("serve returns after the grace period")
        .unwrap()
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn huge_chunked_upload_is_cut_off_on_the_socket() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    let (addr, stop, server) =
        start_server(Fake::default(), std::time::Duration::from_secs(5)).await;
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
    let read = tokio::time::timeout(std::time::Duration::from_secs(20), async {
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
    let sent = tokio::time::timeout(std::time::Duration::from_secs(20), writer)
        .await
        .expect("the server stops reading, so the writer fails")
        .unwrap();
    assert!(sent.is_err(), "the whole 256 MiB was accepted: {sent:?}");
    stop.send(()).unwrap();
    server.await.unwrap().unwrap();
}

// ---------------------------------------------------------------------------------------------
// The real core, through `router`

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_core_smoke() {
    use crate::actors::{CoreOptions, CoreRuntime, Readiness};

    let dir = tempfile::tempdir().unwrap();
    let runtime = CoreRuntime::start(CoreOptions {
        data_dir: dir.path().to_path_buf(),
        ..CoreOptions::default()
    })
    .await
    .unwrap();
    let core = runtime.core();
    for _ in 0..500 {
        if core.readiness() == Readiness::Ready {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    let app = router(core);

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
    assert_eq!(r.json["volume"]["Config"]["size"], "1GiB");
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
    runtime.shutdown().await;
}

#[tokio::test]
async fn backend_errors_never_echo_the_request_secrets() {
    let app = app(Fake::with(|s| {
        s.fail = Some(CoreError::Invalid(
            "unknown storage driver: canary-pw-8472".into(),
        ))
    }));
    let r = post(&app, "/trident/v1/backend", BACKEND).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert_eq!(
        r.json,
        json!({"backend": "", "error": "unknown storage driver: <redacted>"})
    );
    let r = post(&app, "/trident/v1/backend/b1", BACKEND).await;
    assert_eq!(r.json["error"], "unknown storage driver: <redacted>");
}
