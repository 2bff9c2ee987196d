//! A fake Kubernetes API server for the k8s frontend's tests: real HTTP/1.1 on 127.0.0.1:0, so
//! a `kube::Client` talks to it exactly as to an apiserver. Generic over the resources in
//! [`RESOURCES`] (objects are `serde_json::Value`s), with the apiserver's semantics where tests
//! can observe them: one global resourceVersion counter, `Status` error bodies, optimistic
//! locking, the status subresource, finalizers, the rules on a claim's size (validation and
//! the `PersistentVolumeClaimResize` admission), list and watch with label and field selectors,
//! a compactable watch history (410 Expired), and an emulation of kube-controller-manager's
//! PV binder. Tests steer it with [`FakeKube::fail`], [`FakeKube::compact`],
//! [`FakeKube::close_watches`] and friends, and read its state directly.

use std::collections::{BTreeMap, VecDeque};
use std::convert::Infallible;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime};

use futures::StreamExt;
use futures::channel::mpsc;
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::{Bytes, Frame, Incoming};
use serde_json::{Map, Value, json};

/// One kind of object the fake serves.
#[derive(Debug, Clone, Copy)]
pub struct ResourceDef {
    /// The plural in the path: `persistentvolumeclaims`.
    pub plural: &'static str,
    /// The API group, `""` for core.
    pub group: &'static str,
    pub version: &'static str,
    pub kind: &'static str,
    pub namespaced: bool,
    /// Has a `/status` subresource: the main endpoint keeps the stored `status`, the
    /// subresource changes only `status`.
    pub status_subresource: bool,
}

const fn res(
    plural: &'static str,
    group: &'static str,
    version: &'static str,
    kind: &'static str,
    namespaced: bool,
    status_subresource: bool,
) -> ResourceDef {
    ResourceDef {
        plural,
        group,
        version,
        kind,
        namespaced,
        status_subresource,
    }
}

/// The resources served. Adding one is one line. Helpers name a resource by its plural
/// (`"leases"`) or, where two groups share a plural, `plural.group` (`"events.events.k8s.io"`);
/// the plural alone means the first row with it.
pub const RESOURCES: &[ResourceDef] = &[
    res(
        "persistentvolumeclaims",
        "",
        "v1",
        "PersistentVolumeClaim",
        true,
        true,
    ),
    res(
        "persistentvolumes",
        "",
        "v1",
        "PersistentVolume",
        false,
        true,
    ),
    res("events", "", "v1", "Event", true, false),
    res("secrets", "", "v1", "Secret", true, false),
    res("configmaps", "", "v1", "ConfigMap", true, false),
    res("pods", "", "v1", "Pod", true, true),
    res("namespaces", "", "v1", "Namespace", false, true),
    res(
        "storageclasses",
        "storage.k8s.io",
        "v1",
        "StorageClass",
        false,
        false,
    ),
    res("leases", "coordination.k8s.io", "v1", "Lease", true, false),
    res("events", "events.k8s.io", "v1", "Event", true, false),
    // What `storch install` writes.
    res("serviceaccounts", "", "v1", "ServiceAccount", true, false),
    res("services", "", "v1", "Service", true, true),
    res("deployments", "apps", "v1", "Deployment", true, true),
    res("statefulsets", "apps", "v1", "StatefulSet", true, true),
    res("daemonsets", "apps", "v1", "DaemonSet", true, true),
    res(
        "clusterroles",
        "rbac.authorization.k8s.io",
        "v1",
        "ClusterRole",
        false,
        false,
    ),
    res(
        "clusterrolebindings",
        "rbac.authorization.k8s.io",
        "v1",
        "ClusterRoleBinding",
        false,
        false,
    ),
    res(
        "roles",
        "rbac.authorization.k8s.io",
        "v1",
        "Role",
        true,
        false,
    ),
    res(
        "rolebindings",
        "rbac.authorization.k8s.io",
        "v1",
        "RoleBinding",
        true,
        false,
    ),
    res(
        "csidrivers",
        "storage.k8s.io",
        "v1",
        "CSIDriver",
        false,
        false,
    ),
    // Create-only: answered from the denials set with `FakeKube::deny`, never stored.
    res(
        "selfsubjectaccessreviews",
        "authorization.k8s.io",
        "v1",
        "SelfSubjectAccessReview",
        false,
        false,
    ),
];

/// How many changes the watch history keeps before it compacts itself.
const HISTORY_CAP: usize = 10_000;

impl ResourceDef {
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_string()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// `persistentvolumeclaims` or `events.events.k8s.io`.
    pub fn id(&self) -> String {
        if self.group.is_empty() {
            self.plural.to_string()
        } else {
            format!("{}.{}", self.plural, self.group)
        }
    }
}

fn resource_index(name: &str) -> usize {
    RESOURCES
        .iter()
        .position(|r| r.id() == name)
        .or_else(|| RESOURCES.iter().position(|r| r.plural == name))
        .unwrap_or_else(|| panic!("k8s fake: unknown resource {name:?}"))
}

/// One request the fake answered.
#[derive(Debug, Clone)]
pub struct Request {
    pub method: String,
    /// The resource's id (see [`RESOURCES`]) when the path named one.
    pub resource: Option<String>,
    pub name: Option<String>,
    /// A list or watch of a collection with `watch=true`.
    pub watch: bool,
    pub status: u16,
    /// The query string, as sent.
    pub query: String,
}

struct Fault {
    method: String,
    resource: String,
    remaining: usize,
    code: u16,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ChangeType {
    Added,
    Modified,
    Deleted,
}

struct Change {
    rv: u64,
    res: usize,
    kind: ChangeType,
    obj: Value,
    /// The object before a modification.
    prev: Option<Value>,
}

#[derive(Clone, Default)]
struct Filter {
    namespace: Option<String>,
    labels: Vec<LabelReq>,
    fields: Vec<(String, bool, String)>,
}

#[derive(Clone)]
enum LabelReq {
    Eq(String, String),
    Ne(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    NotExists(String),
}

struct Watch {
    id: u64,
    res: usize,
    filter: Filter,
    bookmarks: bool,
    tx: mpsc::UnboundedSender<Bytes>,
}

struct State {
    rv: u64,
    objects: BTreeMap<(usize, String, String), Value>,
    history: VecDeque<Change>,
    /// Every change after this resourceVersion is in `history`.
    history_start: u64,
    watches: Vec<Watch>,
    next_watch: u64,
    requests: Vec<Request>,
    faults: Vec<Fault>,
    binder: bool,
    /// SelfSubjectAccessReviews answered `allowed: false`: (verb, group, resource, namespace).
    denials: Vec<(String, String, String, Option<String>)>,
    /// What `/version` reports: (major, minor).
    version: (String, String),
    /// Container logs: (namespace, pod, container) → text.
    logs: BTreeMap<(String, String, String), String>,
}

type Shared = Arc<Mutex<State>>;

fn lock(shared: &Shared) -> MutexGuard<'_, State> {
    shared.lock().unwrap_or_else(|e| e.into_inner())
}

type Body = UnsyncBoxBody<Bytes, Infallible>;

/// The fake API server, serving until [`FakeKube::shutdown`] or drop.
pub struct FakeKube {
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    shared: Shared,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl FakeKube {
    /// Starts the server on 127.0.0.1:0, empty, binder on.
    pub async fn start() -> FakeKube {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let shared: Shared = Arc::new(Mutex::new(State {
            rv: 1,
            objects: BTreeMap::new(),
            history: VecDeque::new(),
            history_start: 1,
            watches: Vec::new(),
            next_watch: 1,
            requests: Vec::new(),
            faults: Vec::new(),
            binder: true,
            denials: Vec::new(),
            version: ("1".into(), "33".into()),
            logs: BTreeMap::new(),
        }));
        let (stop, mut stopped) = tokio::sync::oneshot::channel::<()>();
        let serving = shared.clone();
        let task = tokio::spawn(async move {
            let mut connections = tokio::task::JoinSet::new();
            loop {
                tokio::select! {
                    _ = &mut stopped => break,
                    accepted = listener.accept() => {
                        let Ok((stream, _)) = accepted else { continue };
                        let shared = serving.clone();
                        connections.spawn(async move {
                            let service = hyper::service::service_fn(move |req| {
                                let shared = shared.clone();
                                async move { Ok::<_, Infallible>(handle(shared, req).await) }
                            });
                            let _ = hyper::server::conn::http1::Builder::new()
                                .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                                .await;
                        });
                    }
                    Some(_) = connections.join_next(), if !connections.is_empty() => {}
                }
            }
            lock(&serving).watches.clear();
            connections.abort_all();
            while connections.join_next().await.is_some() {}
        });
        FakeKube {
            url: format!("http://{addr}"),
            shared,
            stop: Some(stop),
            task: Some(task),
        }
    }

    /// A kube client for the fake, default namespace `default`.
    pub fn client(&self) -> kube::Client {
        storch::net::install_crypto_provider();
        let config = kube::Config::new(self.url.parse().unwrap());
        kube::Client::try_from(config).unwrap()
    }

    /// Writes `dir/kubeconfig` pointing at the fake (context `fake`, namespace `storch`).
    pub fn kubeconfig(&self, dir: &Path) -> PathBuf {
        let path = dir.join("kubeconfig");
        let text = format!(
            "apiVersion: v1\n\
             kind: Config\n\
             clusters:\n\
             - name: fake\n  cluster:\n    server: {url}\n\
             users:\n\
             - name: fake\n  user:\n    token: fake-token\n\
             contexts:\n\
             - name: fake\n  context:\n    cluster: fake\n    user: fake\n    namespace: storch\n\
             current-context: fake\n",
            url = self.url
        );
        std::fs::write(&path, text).unwrap();
        path
    }

    /// The stored object, if any (`namespace` is ignored for cluster-scoped resources).
    pub fn get(&self, resource: &str, namespace: Option<&str>, name: &str) -> Option<Value> {
        let res = resource_index(resource);
        let ns = scope(res, namespace.unwrap_or("default"));
        lock(&self.shared)
            .objects
            .get(&(res, ns, name.to_string()))
            .cloned()
    }

    /// Stored objects of a resource, in (namespace, name) order; `None` means all namespaces.
    pub fn list(&self, resource: &str, namespace: Option<&str>) -> Vec<Value> {
        let res = resource_index(resource);
        let filter = Filter {
            namespace: namespace
                .map(|ns| scope(res, ns))
                .filter(|ns| !ns.is_empty()),
            ..Filter::default()
        };
        lock(&self.shared).current(res, &filter)
    }

    /// Creates or replaces `obj` (namespace from its metadata, `default` if none) as another
    /// actor would, status included: bumps the resourceVersion, emits watch events, runs the
    /// binder. Returns the stored object.
    pub fn put(&self, resource: &str, obj: Value) -> Value {
        let res = resource_index(resource);
        let mut state = lock(&self.shared);
        let ns = scope(
            res,
            obj.pointer("/metadata/namespace")
                .and_then(Value::as_str)
                .unwrap_or("default"),
        );
        let name = str_at(&obj, "/metadata/name")
            .unwrap_or_else(|| panic!("k8s fake: put without metadata.name"));
        let key = (res, ns.clone(), name);
        let stored = match state.objects.get(&key).cloned() {
            None => state.create(res, &ns, obj).unwrap(),
            Some(old) => {
                let mut new = obj;
                keep_identity(&mut new, &old);
                fill_type(res, &mut new);
                set_namespace(res, &mut new, &ns);
                apply_defaults(res, &mut new);
                let stored = state.commit(key.clone(), Some(new)).unwrap_or(old);
                // The last finalizer gone from an object being deleted ends its deletion.
                let finished = stored.pointer("/metadata/deletionTimestamp").is_some()
                    && stored
                        .pointer("/metadata/finalizers")
                        .and_then(Value::as_array)
                        .is_none_or(|f| f.is_empty());
                if finished {
                    state.commit(key, None);
                }
                stored
            }
        };
        state.run_binder();
        stored
    }

    /// Deletes as `kubectl delete` would: with finalizers pending the object stays, marked
    /// with a deletionTimestamp. Returns the object as deleted or marked.
    pub fn remove(&self, resource: &str, namespace: Option<&str>, name: &str) -> Option<Value> {
        let res = resource_index(resource);
        let ns = scope(res, namespace.unwrap_or("default"));
        let mut state = lock(&self.shared);
        let out = state.delete((res, ns, name.to_string()), &Value::Null).ok();
        state.run_binder();
        out
    }

    /// Every request so far, oldest first.
    pub fn requests(&self) -> Vec<Request> {
        lock(&self.shared).requests.clone()
    }

    /// The next `times` requests with `method` (an HTTP method, `LIST`, `WATCH` or `*`) on
    /// `resource` (as for [`FakeKube::get`], or `*`) answer with a `Status` of `code`.
    pub fn fail(&self, method: &str, resource: &str, times: usize, code: u16) {
        let resource = if resource == "*" {
            "*".to_string()
        } else {
            RESOURCES[resource_index(resource)].id()
        };
        lock(&self.shared).faults.push(Fault {
            method: method.to_ascii_uppercase(),
            resource,
            remaining: times,
            code,
        });
    }

    /// Forgets every pending [`FakeKube::fail`].
    pub fn clear_failures(&self) {
        lock(&self.shared).faults.clear();
    }

    /// Drops the watch history: a watch resuming from an older resourceVersion gets 410.
    pub fn compact(&self) {
        let mut state = lock(&self.shared);
        state.history.clear();
        state.history_start = state.rv;
    }

    /// Ends every open watch stream now, as an apiserver does at a watch's timeout.
    pub fn close_watches(&self) {
        let mut state = lock(&self.shared);
        let rv = state.rv;
        for watch in std::mem::take(&mut state.watches) {
            if watch.bookmarks {
                let _ = watch.tx.unbounded_send(bookmark(watch.res, rv, false));
            }
        }
    }

    /// How many watch streams are open now (a stream the client dropped counts until the
    /// server notices its connection closed).
    pub fn open_watches(&self) -> usize {
        let mut state = lock(&self.shared);
        state.watches.retain(|w| !w.tx.is_closed());
        state.watches.len()
    }

    /// The current global resourceVersion.
    pub fn resource_version(&self) -> u64 {
        lock(&self.shared).rv
    }

    /// Turns the PV binder emulation on or off (on by default). Turning it on runs it.
    /// SelfSubjectAccessReviews for `verb` on `resource` of `group` (in `namespace`, or
    /// cluster-wide for `None`) answer `allowed: false` from now on.
    pub fn deny(&self, verb: &str, group: &str, resource: &str, namespace: Option<&str>) {
        lock(&self.shared).denials.push((
            verb.into(),
            group.into(),
            resource.into(),
            namespace.map(String::from),
        ));
    }

    /// The version `/version` reports.
    pub fn set_version(&self, major: &str, minor: &str) {
        lock(&self.shared).version = (major.into(), minor.into());
    }

    /// What `GET .../pods/POD/log?container=CONTAINER` answers (the kubelet's part).
    pub fn set_log(&self, namespace: &str, pod: &str, container: &str, text: &str) {
        lock(&self.shared).logs.insert(
            (namespace.into(), pod.into(), container.into()),
            text.into(),
        );
    }

    pub fn set_binder(&self, on: bool) {
        let mut state = lock(&self.shared);
        state.binder = on;
        state.run_binder();
    }

    /// Polls `what` every 20 ms; panics with `msg` after `timeout`.
    pub async fn wait_for(&self, what: impl Fn(&Self) -> bool, timeout: Duration, msg: &str) {
        let deadline = tokio::time::Instant::now() + timeout;
        while !what(self) {
            if tokio::time::Instant::now() >= deadline {
                panic!("k8s fake: timed out after {timeout:?} waiting for: {msg}");
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Stops the server, every connection and every watch stream.
    pub async fn shutdown(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

/// The name storch gives a stored claim's volume and PV: `<ns>-<name>-<first 5 of the uid
/// without dashes>` (docs/trident-contract.md#pv-creation), computed here independently of storch's
/// code.
pub fn claim_volume_name(kube: &FakeKube, namespace: &str, name: &str) -> String {
    let pvc = kube
        .get("persistentvolumeclaims", Some(namespace), name)
        .unwrap_or_else(|| panic!("no PVC {namespace}/{name}"));
    let uid: String = pvc["metadata"]["uid"]
        .as_str()
        .unwrap()
        .replace('-', "")
        .chars()
        .take(5)
        .collect();
    format!("{namespace}-{name}-{uid}")
}

impl Drop for FakeKube {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            task.abort();
        }
        lock(&self.shared).watches.clear();
    }
}

// ---------------------------------------------------------------------------------------------
// Errors

#[derive(Debug)]
struct ApiError {
    code: u16,
    reason: &'static str,
    message: String,
}

type ApiResult<T> = Result<T, ApiError>;

fn err(code: u16, reason: &'static str, message: impl Into<String>) -> ApiError {
    ApiError {
        code,
        reason,
        message: message.into(),
    }
}

fn not_found(res: usize, name: &str) -> ApiError {
    let r = &RESOURCES[res];
    let what = if r.group.is_empty() {
        r.plural.to_string()
    } else {
        format!("{}.{}", r.plural, r.group)
    };
    err(404, "NotFound", format!("{what} \"{name}\" not found"))
}

fn conflict(res: usize, name: &str) -> ApiError {
    err(
        409,
        "Conflict",
        format!(
            "Operation cannot be fulfilled on {} \"{name}\": the object has been modified; \
             please apply your changes to the latest version and try again",
            RESOURCES[res].id()
        ),
    )
}

fn reason_for(code: u16) -> &'static str {
    match code {
        400 => "BadRequest",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "NotFound",
        405 => "MethodNotAllowed",
        409 => "Conflict",
        410 => "Expired",
        415 => "UnsupportedMediaType",
        422 => "Invalid",
        429 => "TooManyRequests",
        503 => "ServiceUnavailable",
        504 => "Timeout",
        _ => "InternalError",
    }
}

fn status_value(e: &ApiError) -> Value {
    json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": e.message,
        "reason": e.reason,
        "code": e.code,
    })
}

// ---------------------------------------------------------------------------------------------
// Object helpers

/// The namespace key of an object: `""` for cluster-scoped resources.
fn scope(res: usize, ns: &str) -> String {
    if RESOURCES[res].namespaced {
        ns.to_string()
    } else {
        String::new()
    }
}

fn str_at(v: &Value, pointer: &str) -> Option<String> {
    v.pointer(pointer)
        .and_then(Value::as_str)
        .map(str::to_string)
}

fn meta_mut(obj: &mut Value) -> &mut Map<String, Value> {
    if !obj.is_object() {
        *obj = json!({});
    }
    let map = obj.as_object_mut().unwrap();
    let meta = map.entry("metadata").or_insert_with(|| json!({}));
    if !meta.is_object() {
        *meta = json!({});
    }
    meta.as_object_mut().unwrap()
}

fn fill_type(res: usize, obj: &mut Value) {
    let r = &RESOURCES[res];
    meta_mut(obj);
    let map = obj.as_object_mut().unwrap();
    map.insert("kind".into(), json!(r.kind));
    map.insert("apiVersion".into(), json!(r.api_version()));
}

fn set_namespace(res: usize, obj: &mut Value, ns: &str) {
    let meta = meta_mut(obj);
    if RESOURCES[res].namespaced {
        meta.insert("namespace".into(), json!(ns));
    } else {
        meta.remove("namespace");
    }
}

/// Keeps the server-owned metadata of `old` in `new`.
fn keep_identity(new: &mut Value, old: &Value) {
    let meta = meta_mut(new);
    for field in [
        "uid",
        "creationTimestamp",
        "deletionTimestamp",
        "generation",
    ] {
        match old.pointer(&format!("/metadata/{field}")) {
            Some(v) => meta.insert(field.into(), v.clone()),
            None => meta.remove(field),
        };
    }
}

fn now_rfc3339() -> String {
    humantime::format_rfc3339_seconds(SystemTime::now()).to_string()
}

fn random_suffix() -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    uuid::Uuid::new_v4().as_bytes()[..5]
        .iter()
        .map(|b| ALPHABET[*b as usize % ALPHABET.len()] as char)
        .collect()
}

/// `a` and `b` equal apart from `metadata.resourceVersion`.
fn same_content(a: &Value, b: &Value) -> bool {
    let strip = |v: &Value| {
        let mut v = v.clone();
        if let Some(meta) = v.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.remove("resourceVersion");
        }
        v
    };
    strip(a) == strip(b)
}

/// Everything but `metadata` and `status`, for the generation.
fn spec_part(v: &Value) -> Value {
    let mut v = v.clone();
    if let Some(map) = v.as_object_mut() {
        for field in ["metadata", "status", "kind", "apiVersion"] {
            map.remove(field);
        }
    }
    v
}

/// The apiserver's defaulting for the fields storch may read back: applied on every write,
/// only where the field is absent.
fn apply_defaults(res: usize, obj: &mut Value) {
    let r = &RESOURCES[res];
    let defaults: &[(&str, &str, Value)] = match (r.group, r.kind) {
        ("", "PersistentVolumeClaim") => &[("spec", "volumeMode", json!("Filesystem"))],
        ("", "PersistentVolume") => &[
            ("spec", "volumeMode", json!("Filesystem")),
            ("spec", "persistentVolumeReclaimPolicy", json!("Retain")),
        ],
        ("storage.k8s.io", "StorageClass") => &[
            ("", "reclaimPolicy", json!("Delete")),
            ("", "volumeBindingMode", json!("Immediate")),
        ],
        _ => &[],
    };
    for (section, field, value) in defaults {
        let Some(map) = obj.as_object_mut() else {
            return;
        };
        let map = if section.is_empty() {
            map
        } else {
            let part = map.entry(*section).or_insert_with(|| json!({}));
            if !part.is_object() {
                continue;
            }
            part.as_object_mut().unwrap()
        };
        if map.get(*field).is_none_or(Value::is_null) {
            map.insert(field.to_string(), value.clone());
        }
    }
}

/// The `managedFields` of an applied object: the stored ones with `manager`'s entry (operation
/// `Apply`) replaced.
fn record_manager(patch: &mut Value, stored: &Value, manager: &str, api_version: &str) {
    let mut fields: Vec<Value> = stored
        .pointer("/metadata/managedFields")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    fields.retain(|f| f["manager"] != manager || f["operation"] != "Apply");
    fields.push(json!({
        "manager": manager, "operation": "Apply", "apiVersion": api_version,
        "time": now_rfc3339(), "fieldsType": "FieldsV1", "fieldsV1": {},
    }));
    meta_mut(patch).insert("managedFields".into(), json!(fields));
}

/// Server-side apply as far as one manager goes: when the applying manager is the only one,
/// its object replaces every field but `status` and the server's metadata (fields it dropped
/// are gone); with other managers, the applied fields are merged in.
fn apply_patch(target: &mut Value, patch: &Value) {
    let managers: Vec<&Value> = patch
        .pointer("/metadata/managedFields")
        .and_then(Value::as_array)
        .map(|f| f.iter().map(|e| &e["manager"]).collect())
        .unwrap_or_default();
    let sole = managers.windows(2).all(|w| w[0] == w[1]);
    if !sole {
        merge_patch(target, patch);
        return;
    }
    let status = target.get("status").cloned();
    let old_meta = target.get("metadata").cloned().unwrap_or(json!({}));
    let mut next = patch.clone();
    let meta = meta_mut(&mut next);
    for field in [
        "uid",
        "creationTimestamp",
        "resourceVersion",
        "generation",
        "deletionTimestamp",
        "finalizers",
    ] {
        if let Some(v) = old_meta.get(field) {
            meta.entry(field.to_string()).or_insert(v.clone());
        }
    }
    if let (Some(status), Some(map)) = (status, next.as_object_mut()) {
        map.insert("status".into(), status);
    }
    *target = next;
}

/// `GET /api/v1/namespaces/NS/pods/POD/log[?container=C]`: what [`FakeKube::set_log`] set
/// (the pod must exist, the container must be one of its spec's; without `container`, a pod of
/// one container). `None` for any other request.
fn pod_log(
    shared: &Shared,
    method: &str,
    path: &str,
    params: &BTreeMap<String, String>,
) -> Option<hyper::Response<Body>> {
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    let ["api", "v1", "namespaces", ns, "pods", pod, "log"] = segments.as_slice() else {
        return None;
    };
    if method != "GET" {
        return Some(error_response(&err(
            405,
            "MethodNotAllowed",
            "logs are read with GET",
        )));
    }
    let state = lock(shared);
    let res = resource_index("pods");
    let Some(stored) = state.objects.get(&(res, ns.to_string(), pod.to_string())) else {
        return Some(error_response(&not_found(res, pod)));
    };
    let containers: Vec<String> = stored
        .pointer("/spec/containers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|c| c["name"].as_str().map(String::from))
        .collect();
    let container = match params.get("container") {
        Some(c) => c.clone(),
        None if containers.len() == 1 => containers[0].clone(),
        None => {
            return Some(error_response(&err(
                400,
                "BadRequest",
                format!(
                    "a container name must be specified for pod {pod}, choose one of: {containers:?}"
                ),
            )));
        }
    };
    if !containers.contains(&container) {
        return Some(error_response(&err(
            400,
            "BadRequest",
            format!("container {container} is not valid for pod {pod}"),
        )));
    }
    let text = state
        .logs
        .get(&(ns.to_string(), pod.to_string(), container))
        .cloned()
        .unwrap_or_default();
    Some(
        hyper::Response::builder()
            .status(200)
            .header("content-type", "text/plain")
            .body(Full::new(Bytes::from(text)).boxed_unsync())
            .unwrap(),
    )
}

/// RFC 7386.
fn merge_patch(target: &mut Value, patch: &Value) {
    let Value::Object(patch) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = json!({});
    }
    let map = target.as_object_mut().unwrap();
    for (k, v) in patch {
        if v.is_null() {
            map.remove(k);
        } else {
            merge_patch(map.entry(k.clone()).or_insert(Value::Null), v);
        }
    }
}

fn pointer_tokens(path: &str) -> ApiResult<Vec<String>> {
    if path.is_empty() {
        return Ok(Vec::new());
    }
    let Some(rest) = path.strip_prefix('/') else {
        return Err(err(422, "Invalid", format!("bad JSON pointer {path:?}")));
    };
    Ok(rest
        .split('/')
        .map(|t| t.replace("~1", "/").replace("~0", "~"))
        .collect())
}

fn json_patch_add(doc: &mut Value, path: &str, value: Value) -> ApiResult<()> {
    let mut tokens = pointer_tokens(path)?;
    let Some(last) = tokens.pop() else {
        *doc = value;
        return Ok(());
    };
    let bad = || {
        err(
            422,
            "Invalid",
            format!("json patch: cannot add at {path:?}"),
        )
    };
    let parent = navigate(doc, &tokens).ok_or_else(bad)?;
    match parent {
        Value::Object(map) => {
            map.insert(last, value);
        }
        Value::Array(items) => {
            let index = if last == "-" {
                items.len()
            } else {
                last.parse::<usize>().map_err(|_| bad())?
            };
            if index > items.len() {
                return Err(bad());
            }
            items.insert(index, value);
        }
        _ => return Err(bad()),
    }
    Ok(())
}

fn json_patch_remove(doc: &mut Value, path: &str) -> ApiResult<Value> {
    let mut tokens = pointer_tokens(path)?;
    let bad = || {
        err(
            422,
            "Invalid",
            format!("json patch: nothing to remove at {path:?}"),
        )
    };
    let last = tokens.pop().ok_or_else(bad)?;
    match navigate(doc, &tokens).ok_or_else(bad)? {
        Value::Object(map) => map.remove(&last).ok_or_else(bad),
        Value::Array(items) => {
            let index = last.parse::<usize>().map_err(|_| bad())?;
            if index >= items.len() {
                return Err(bad());
            }
            Ok(items.remove(index))
        }
        _ => Err(bad()),
    }
}

fn navigate<'a>(doc: &'a mut Value, tokens: &[String]) -> Option<&'a mut Value> {
    let mut at = doc;
    for t in tokens {
        at = match at {
            Value::Object(map) => map.get_mut(t)?,
            Value::Array(items) => items.get_mut(t.parse::<usize>().ok()?)?,
            _ => return None,
        };
    }
    Some(at)
}

/// RFC 6902: add, remove, replace, move, copy, test.
fn json_patch(doc: &mut Value, patch: &Value) -> ApiResult<()> {
    let ops = patch
        .as_array()
        .ok_or_else(|| err(400, "BadRequest", "json patch must be an array"))?;
    for op in ops {
        let name = op.get("op").and_then(Value::as_str).unwrap_or("");
        let path = op.get("path").and_then(Value::as_str).unwrap_or("");
        let value = || {
            op.get("value")
                .cloned()
                .ok_or_else(|| err(422, "Invalid", format!("json patch {name}: no value")))
        };
        let from = || {
            op.get("from")
                .and_then(Value::as_str)
                .ok_or_else(|| err(422, "Invalid", format!("json patch {name}: no from")))
        };
        match name {
            "add" => json_patch_add(doc, path, value()?)?,
            "remove" => {
                json_patch_remove(doc, path)?;
            }
            "replace" => {
                json_patch_remove(doc, path)?;
                json_patch_add(doc, path, value()?)?;
            }
            "move" => {
                let moved = json_patch_remove(doc, from()?)?;
                json_patch_add(doc, path, moved)?;
            }
            "copy" => {
                let copied = doc
                    .pointer(from()?)
                    .cloned()
                    .ok_or_else(|| err(422, "Invalid", "json patch copy: no source"))?;
                json_patch_add(doc, path, copied)?;
            }
            "test" => {
                if doc.pointer(path) != Some(&value()?) {
                    return Err(err(
                        422,
                        "Invalid",
                        format!("json patch test failed at {path:?}"),
                    ));
                }
            }
            other => {
                return Err(err(
                    422,
                    "Invalid",
                    format!("json patch: unknown op {other:?}"),
                ));
            }
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Selectors

fn split_top_level(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut depth = 0;
    let mut current = String::new();
    for c in s.chars() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(std::mem::take(&mut current));
                continue;
            }
            _ => {}
        }
        current.push(c);
    }
    out.push(current);
    out.into_iter()
        .map(|t| t.trim().to_string())
        .filter(|t| !t.is_empty())
        .collect()
}

fn parse_labels(s: &str) -> ApiResult<Vec<LabelReq>> {
    let mut reqs = Vec::new();
    for term in split_top_level(s) {
        let set = |rest: &str| -> Vec<String> {
            rest.trim()
                .trim_start_matches('(')
                .trim_end_matches(')')
                .split(',')
                .map(|v| v.trim().to_string())
                .collect()
        };
        let req = if let Some((k, v)) = term.split_once("!=") {
            LabelReq::Ne(k.trim().into(), v.trim().into())
        } else if let Some((k, v)) = term.split_once("==") {
            LabelReq::Eq(k.trim().into(), v.trim().into())
        } else if let Some((k, v)) = term.split_once('=') {
            LabelReq::Eq(k.trim().into(), v.trim().into())
        } else if let Some((k, rest)) = term.split_once(" notin ") {
            LabelReq::NotIn(k.trim().into(), set(rest))
        } else if let Some((k, rest)) = term.split_once(" in ") {
            LabelReq::In(k.trim().into(), set(rest))
        } else if let Some(k) = term.strip_prefix('!') {
            LabelReq::NotExists(k.trim().into())
        } else if term.contains(char::is_whitespace) || term.contains('(') {
            return Err(err(
                400,
                "BadRequest",
                format!("unable to parse requirement: {term:?}"),
            ));
        } else {
            LabelReq::Exists(term)
        };
        reqs.push(req);
    }
    Ok(reqs)
}

fn parse_fields(s: &str) -> ApiResult<Vec<(String, bool, String)>> {
    let mut out = Vec::new();
    for term in s.split(',').map(str::trim).filter(|t| !t.is_empty()) {
        let (k, eq, v) = if let Some((k, v)) = term.split_once("!=") {
            (k, false, v)
        } else if let Some((k, v)) = term.split_once("==") {
            (k, true, v)
        } else if let Some((k, v)) = term.split_once('=') {
            (k, true, v)
        } else {
            return Err(err(
                400,
                "BadRequest",
                format!("invalid field selector {term:?}"),
            ));
        };
        out.push((k.trim().to_string(), eq, v.trim().to_string()));
    }
    Ok(out)
}

impl Filter {
    fn matches(&self, obj: &Value) -> bool {
        if let Some(ns) = &self.namespace
            && obj.pointer("/metadata/namespace").and_then(Value::as_str) != Some(ns)
        {
            return false;
        }
        let label = |k: &str| {
            obj.pointer("/metadata/labels")
                .and_then(|l| l.get(k))
                .and_then(Value::as_str)
        };
        let labels_ok = self.labels.iter().all(|req| match req {
            LabelReq::Eq(k, v) => label(k) == Some(v),
            LabelReq::Ne(k, v) => label(k) != Some(v),
            LabelReq::In(k, vs) => label(k).is_some_and(|l| vs.iter().any(|v| v == l)),
            LabelReq::NotIn(k, vs) => !label(k).is_some_and(|l| vs.iter().any(|v| v == l)),
            LabelReq::Exists(k) => label(k).is_some(),
            LabelReq::NotExists(k) => label(k).is_none(),
        });
        labels_ok
            && self.fields.iter().all(|(path, eq, want)| {
                let pointer = format!("/{}", path.replace('.', "/"));
                let got = match obj.pointer(&pointer) {
                    Some(Value::String(s)) => s.clone(),
                    Some(Value::Null) | None => String::new(),
                    Some(other) => other.to_string(),
                };
                (got == *want) == *eq
            })
    }
}

// ---------------------------------------------------------------------------------------------
// The store

fn event_line(kind: &str, obj: &Value) -> Vec<u8> {
    let mut line = serde_json::to_vec(&json!({"type": kind, "object": obj})).unwrap();
    line.push(b'\n');
    line
}

fn bookmark(res: usize, rv: u64, initial_end: bool) -> Bytes {
    let r = &RESOURCES[res];
    let mut meta = json!({"resourceVersion": rv.to_string()});
    if initial_end {
        meta["annotations"] = json!({"k8s.io/initial-events-end": "true"});
    }
    let obj = json!({"kind": r.kind, "apiVersion": r.api_version(), "metadata": meta});
    Bytes::from(event_line("BOOKMARK", &obj))
}

/// The line a watch with `filter` sees for `change`, if any (an object moving out of a
/// selector is DELETED for that watch, moving in is ADDED).
fn render(change: &Change, filter: &Filter) -> Option<Vec<u8>> {
    let now = filter.matches(&change.obj);
    let kind = match change.kind {
        ChangeType::Added => now.then_some("ADDED")?,
        ChangeType::Deleted => now.then_some("DELETED")?,
        ChangeType::Modified => {
            let before = change.prev.as_ref().is_some_and(|p| filter.matches(p));
            match (before, now) {
                (true, true) => "MODIFIED",
                (false, true) => "ADDED",
                (true, false) => "DELETED",
                (false, false) => return None,
            }
        }
    };
    Some(event_line(kind, &change.obj))
}

type Key = (usize, String, String);

impl State {
    fn current(&self, res: usize, filter: &Filter) -> Vec<Value> {
        self.objects
            .range((res, String::new(), String::new())..(res + 1, String::new(), String::new()))
            .map(|(_, v)| v)
            .filter(|v| filter.matches(v))
            .cloned()
            .collect()
    }

    /// Stores (or with `None` removes) the object at `key`: bumps the resourceVersion,
    /// records the change and tells the watches. Returns the stored object, `None` when
    /// nothing changed (or nothing was there to remove).
    fn commit(&mut self, key: Key, new: Option<Value>) -> Option<Value> {
        let old = self.objects.get(&key).cloned();
        let (kind, mut obj) = match (&old, new) {
            (None, None) => return None,
            (Some(old), None) => (ChangeType::Deleted, old.clone()),
            (None, Some(new)) => (ChangeType::Added, new),
            (Some(old), Some(new)) => {
                if same_content(old, &new) {
                    return None;
                }
                (ChangeType::Modified, new)
            }
        };
        if kind == ChangeType::Modified {
            let old = old.as_ref().unwrap();
            let generation = old
                .pointer("/metadata/generation")
                .and_then(Value::as_i64)
                .unwrap_or(1);
            let bump = spec_part(old) != spec_part(&obj);
            meta_mut(&mut obj).insert(
                "generation".into(),
                json!(if bump { generation + 1 } else { generation }),
            );
        }
        self.rv += 1;
        meta_mut(&mut obj).insert("resourceVersion".into(), json!(self.rv.to_string()));
        match kind {
            ChangeType::Deleted => {
                self.objects.remove(&key);
            }
            _ => {
                self.objects.insert(key.clone(), obj.clone());
            }
        }
        let change = Change {
            rv: self.rv,
            res: key.0,
            kind,
            obj: obj.clone(),
            prev: old,
        };
        self.watches.retain(|w| {
            if w.res != change.res {
                return true;
            }
            match render(&change, &w.filter) {
                Some(line) => w.tx.unbounded_send(Bytes::from(line)).is_ok(),
                None => !w.tx.is_closed(),
            }
        });
        self.history.push_back(change);
        while self.history.len() > HISTORY_CAP {
            let dropped = self.history.pop_front().unwrap();
            self.history_start = dropped.rv;
        }
        Some(obj)
    }

    fn create(&mut self, res: usize, ns: &str, mut obj: Value) -> ApiResult<Value> {
        let r = &RESOURCES[res];
        if !obj.is_object() {
            return Err(err(400, "BadRequest", "the body must be a JSON object"));
        }
        let ns = scope(res, ns);
        if r.namespaced
            && let Some(body_ns) = str_at(&obj, "/metadata/namespace")
            && !body_ns.is_empty()
            && body_ns != ns
        {
            return Err(err(
                400,
                "BadRequest",
                "the namespace of the provided object does not match the namespace sent on the request",
            ));
        }
        let mut name = str_at(&obj, "/metadata/name").unwrap_or_default();
        if name.is_empty() {
            match str_at(&obj, "/metadata/generateName").filter(|p| !p.is_empty()) {
                Some(prefix) => name = format!("{prefix}{}", random_suffix()),
                None => {
                    return Err(err(
                        422,
                        "Invalid",
                        format!(
                            "{} \"\" is invalid: metadata.name: Required value: name or generateName is required",
                            r.kind
                        ),
                    ));
                }
            }
        }
        let key = (res, ns.clone(), name.clone());
        if self.objects.contains_key(&key) {
            return Err(err(
                409,
                "AlreadyExists",
                format!("{} \"{name}\" already exists", r.id()),
            ));
        }
        fill_type(res, &mut obj);
        set_namespace(res, &mut obj, &ns);
        apply_defaults(res, &mut obj);
        let meta = meta_mut(&mut obj);
        meta.insert("name".into(), json!(name));
        meta.insert("uid".into(), json!(uuid::Uuid::new_v4().to_string()));
        meta.insert("creationTimestamp".into(), json!(now_rfc3339()));
        meta.insert("generation".into(), json!(1));
        meta.remove("deletionTimestamp");
        meta.remove("resourceVersion");
        let initial_phase = match r.kind {
            "PersistentVolumeClaim" if r.group.is_empty() => Some("Pending"),
            "PersistentVolume" if r.group.is_empty() => Some("Available"),
            "Namespace" if r.group.is_empty() => Some("Active"),
            _ => None,
        };
        if let Some(phase) = initial_phase
            && obj.pointer("/status/phase").is_none()
        {
            merge_patch(&mut obj, &json!({"status": {"phase": phase}}));
        }
        Ok(self.commit(key, Some(obj)).unwrap())
    }

    /// Writes `new` over the object at `key` as a client update: server-owned metadata kept,
    /// `resourceVersion` in `new` as a precondition, the status rule of the subresource, and
    /// the end of a deletion when the last finalizer goes.
    fn update(&mut self, key: Key, mut new: Value, status: bool) -> ApiResult<Value> {
        let res = key.0;
        let r = &RESOURCES[res];
        let old = self
            .objects
            .get(&key)
            .cloned()
            .ok_or_else(|| not_found(res, &key.2))?;
        if !new.is_object() {
            return Err(err(400, "BadRequest", "the body must be a JSON object"));
        }
        if let Some(name) = str_at(&new, "/metadata/name")
            && name != key.2
        {
            return Err(err(
                400,
                "BadRequest",
                format!(
                    "the name of the object ({name}) does not match the name on the URL ({})",
                    key.2
                ),
            ));
        }
        if r.namespaced
            && let Some(ns) = str_at(&new, "/metadata/namespace")
            && !ns.is_empty()
            && ns != key.1
        {
            return Err(err(
                400,
                "BadRequest",
                "the namespace of the provided object does not match the namespace sent on the request",
            ));
        }
        if let Some(rv) = str_at(&new, "/metadata/resourceVersion")
            && !rv.is_empty()
            && Some(rv) != str_at(&old, "/metadata/resourceVersion")
        {
            return Err(conflict(res, &key.2));
        }
        if status {
            let mut next = old.clone();
            match new.get("status") {
                Some(s) => next["status"] = s.clone(),
                None => {
                    next.as_object_mut().unwrap().remove("status");
                }
            }
            new = next;
        } else {
            if r.status_subresource {
                match old.get("status") {
                    Some(s) => new["status"] = s.clone(),
                    None => {
                        new.as_object_mut().unwrap().remove("status");
                    }
                }
            }
            apply_defaults(res, &mut new);
            if r.kind == "PersistentVolumeClaim" && r.group.is_empty() {
                check_pvc_spec(&old, &new)?;
                check_pvc_resize(&old, &new)?;
                self.admit_pvc_resize(&old, &new)?;
            }
        }
        keep_identity(&mut new, &old);
        fill_type(res, &mut new);
        set_namespace(res, &mut new, &key.1);
        meta_mut(&mut new).insert("name".into(), json!(key.2));
        let finishing = new.pointer("/metadata/deletionTimestamp").is_some()
            && new
                .pointer("/metadata/finalizers")
                .and_then(Value::as_array)
                .is_none_or(|f| f.is_empty());
        if finishing {
            let mut last = self.commit(key.clone(), Some(new)).unwrap_or(old);
            if let Some(gone) = self.commit(key, None) {
                last = gone;
            }
            return Ok(last);
        }
        Ok(self.commit(key, Some(new)).unwrap_or(old))
    }

    /// A SelfSubjectAccessReview: allowed unless a denial matches.
    fn access_review(&self, mut review: Value) -> ApiResult<Value> {
        let attrs = review
            .pointer("/spec/resourceAttributes")
            .cloned()
            .ok_or_else(|| err(400, "BadRequest", "spec.resourceAttributes is required"))?;
        let field = |k: &str| attrs[k].as_str().unwrap_or("").to_string();
        let namespace = Some(field("namespace")).filter(|n| !n.is_empty());
        let denied = self.denials.iter().any(|(verb, group, resource, ns)| {
            *verb == field("verb")
                && *group == field("group")
                && *resource == field("resource")
                && (ns.is_none() || *ns == namespace)
        });
        fill_type(resource_index("selfsubjectaccessreviews"), &mut review);
        review["status"] = if denied {
            json!({"allowed": false, "reason": "denied by the test"})
        } else {
            json!({"allowed": true})
        };
        Ok(review)
    }

    fn delete(&mut self, key: Key, options: &Value) -> ApiResult<Value> {
        let res = key.0;
        if RESOURCES[res].kind == "Namespace" && self.objects.contains_key(&key) {
            // The namespace controller's part: what is in it goes with it.
            let inside: Vec<Key> = self
                .objects
                .keys()
                .filter(|(r, ns, _)| RESOURCES[*r].namespaced && *ns == key.2)
                .cloned()
                .collect();
            for k in inside {
                self.commit(k, None);
            }
        }
        let old = self
            .objects
            .get(&key)
            .cloned()
            .ok_or_else(|| not_found(res, &key.2))?;
        for (field, pointer) in [
            ("uid", "/metadata/uid"),
            ("resourceVersion", "/metadata/resourceVersion"),
        ] {
            if let Some(want) = options
                .pointer(&format!("/preconditions/{field}"))
                .and_then(Value::as_str)
                && Some(want) != old.pointer(pointer).and_then(Value::as_str)
            {
                return Err(err(
                    409,
                    "Conflict",
                    format!(
                        "Precondition failed: {field} in precondition: {want}, {field} in object meta: {}",
                        old.pointer(pointer).and_then(Value::as_str).unwrap_or("")
                    ),
                ));
            }
        }
        let pending = old
            .pointer("/metadata/finalizers")
            .and_then(Value::as_array)
            .is_some_and(|f| !f.is_empty());
        if pending {
            if old.pointer("/metadata/deletionTimestamp").is_some() {
                return Ok(old);
            }
            let mut marked = old.clone();
            let meta = meta_mut(&mut marked);
            meta.insert("deletionTimestamp".into(), json!(now_rfc3339()));
            meta.insert("deletionGracePeriodSeconds".into(), json!(0));
            return Ok(self.commit(key, Some(marked)).unwrap_or(old));
        }
        Ok(self.commit(key, None).unwrap_or(old))
    }

    /// The admission plugin `PersistentVolumeClaimResize`: a claim's request may grow only
    /// when its StorageClass (the beta annotation, else `spec.storageClassName`) exists and
    /// has `allowVolumeExpansion: true`.
    fn admit_pvc_resize(&self, old: &Value, new: &Value) -> ApiResult<()> {
        let (Some(before), Some(after)) = (requested_bytes(old), requested_bytes(new)) else {
            return Ok(());
        };
        if after <= before {
            return Ok(());
        }
        let class = str_at(
            new,
            "/metadata/annotations/volume.beta.kubernetes.io~1storage-class",
        )
        .filter(|c| !c.is_empty())
        .or_else(|| str_at(new, "/spec/storageClassName"))
        .unwrap_or_default();
        let key = (
            resource_index("storageclasses"),
            String::new(),
            class.clone(),
        );
        let allowed = !class.is_empty()
            && self
                .objects
                .get(&key)
                .and_then(|sc| sc.get("allowVolumeExpansion"))
                .and_then(Value::as_bool)
                == Some(true);
        if allowed {
            return Ok(());
        }
        Err(err(
            403,
            "Forbidden",
            format!(
                "persistentvolumeclaims \"{}\" is forbidden: only dynamically provisioned pvc \
                 can be resized and the storageclass that provisions the pvc must support resize",
                str_at(new, "/metadata/name").unwrap_or_default()
            ),
        ))
    }

    /// kube-controller-manager's PV binder, enough of it: binds pre-bound PVs to their
    /// claims, releases PVs whose claim is gone, loses claims whose volume is gone.
    fn run_binder(&mut self) {
        if !self.binder {
            return;
        }
        let pvc_res = resource_index("persistentvolumeclaims");
        let pv_res = resource_index("persistentvolumes");
        for _ in 0..100 {
            let mut changed = false;
            let pvs = self.current(pv_res, &Filter::default());
            for pv in &pvs {
                let pv_name = str_at(pv, "/metadata/name").unwrap_or_default();
                let pv_key = (pv_res, String::new(), pv_name.clone());
                let phase = str_at(pv, "/status/phase").unwrap_or_default();
                let Some(claim_name) = str_at(pv, "/spec/claimRef/name") else {
                    continue;
                };
                let claim_ns = str_at(pv, "/spec/claimRef/namespace").unwrap_or_default();
                let claim_uid = str_at(pv, "/spec/claimRef/uid");
                let claim_key = (pvc_res, claim_ns, claim_name);
                let claim = self.objects.get(&claim_key).cloned();
                let claim_matches = claim.as_ref().is_some_and(|c| {
                    claim_uid.is_none() || str_at(c, "/metadata/uid") == claim_uid
                });
                match phase.as_str() {
                    "Available" | "Pending" | "" if claim_matches => {
                        let mut claim = claim.unwrap();
                        let volume = str_at(&claim, "/spec/volumeName").unwrap_or_default();
                        let claim_phase = str_at(&claim, "/status/phase").unwrap_or_default();
                        if !(volume.is_empty() || volume == pv_name) || claim_phase == "Bound" {
                            continue;
                        }
                        if claim.pointer("/metadata/deletionTimestamp").is_some() {
                            continue;
                        }
                        merge_patch(
                            &mut claim,
                            &json!({
                                "metadata": {"annotations": {"pv.kubernetes.io/bind-completed": "yes"}},
                                "spec": {"volumeName": pv_name},
                                "status": {
                                    "phase": "Bound",
                                    "capacity": pv.pointer("/spec/capacity").cloned().unwrap_or(Value::Null),
                                    "accessModes": pv.pointer("/spec/accessModes").cloned().unwrap_or(Value::Null),
                                },
                            }),
                        );
                        let mut bound = pv.clone();
                        merge_patch(&mut bound, &json!({"status": {"phase": "Bound"}}));
                        if claim_uid.is_none() {
                            bound["spec"]["claimRef"]["uid"] =
                                json!(str_at(&claim, "/metadata/uid").unwrap_or_default());
                        }
                        self.commit(claim_key, Some(claim));
                        self.commit(pv_key, Some(bound));
                        changed = true;
                    }
                    "Bound" if !claim_matches => {
                        let mut released = pv.clone();
                        merge_patch(&mut released, &json!({"status": {"phase": "Released"}}));
                        self.commit(pv_key, Some(released));
                        changed = true;
                    }
                    _ => {}
                }
            }
            for pvc in self.current(pvc_res, &Filter::default()) {
                let volume = str_at(&pvc, "/spec/volumeName").unwrap_or_default();
                if volume.is_empty()
                    || str_at(&pvc, "/status/phase").as_deref() != Some("Bound")
                    || self
                        .objects
                        .contains_key(&(pv_res, String::new(), volume.clone()))
                {
                    continue;
                }
                let key = (
                    pvc_res,
                    str_at(&pvc, "/metadata/namespace").unwrap_or_default(),
                    str_at(&pvc, "/metadata/name").unwrap_or_default(),
                );
                let mut lost = pvc.clone();
                merge_patch(&mut lost, &json!({"status": {"phase": "Lost"}}));
                self.commit(key, Some(lost));
                changed = true;
            }
            if !changed {
                return;
            }
        }
    }
}

/// A claim's `spec.resources.requests.storage` in bytes (`None` without one).
fn requested_bytes(pvc: &Value) -> Option<u128> {
    quantity(pvc.pointer("/spec/resources/requests/storage")?.as_str()?)
}

/// A whole-number quantity in bytes (`5Gi`, `500M`, `1073741824`), enough for the tests; the
/// apiserver's own parser, not storch's.
fn quantity(q: &str) -> Option<u128> {
    let split = q.find(|c: char| !c.is_ascii_digit()).unwrap_or(q.len());
    let (digits, suffix) = q.split_at(split);
    let factor: u128 = match suffix {
        "" => 1,
        "k" => 1000,
        "M" => 1000u128.pow(2),
        "G" => 1000u128.pow(3),
        "T" => 1000u128.pow(4),
        "Ki" => 1 << 10,
        "Mi" => 1 << 20,
        "Gi" => 1 << 30,
        "Ti" => 1 << 40,
        _ => return None,
    };
    Some(digits.parse::<u128>().ok()? * factor)
}

/// The apiserver's validation of a claim's size change: only a Bound claim's request may
/// change, and it may go down only while it stays above `status.capacity` (the recovery from
/// a failed expansion; Kubernetes never shrinks a volume).
fn check_pvc_resize(old: &Value, new: &Value) -> ApiResult<()> {
    let (before, after) = (requested_bytes(old), requested_bytes(new));
    if before == after {
        return Ok(());
    }
    if str_at(new, "/status/phase").as_deref() != Some("Bound") {
        return Err(err(
            422,
            "Invalid",
            "PersistentVolumeClaim is invalid: spec: Forbidden: spec is immutable after creation \
             except resources.requests and volumeAttributesClassName for bound claims",
        ));
    }
    let capacity = new
        .pointer("/status/capacity/storage")
        .and_then(Value::as_str)
        .and_then(quantity);
    if let (Some(before), Some(after)) = (before, after)
        && after < before
        && capacity.is_some_and(|c| after <= c)
    {
        return Err(err(
            422,
            "Invalid",
            "PersistentVolumeClaim is invalid: spec.resources.requests.storage: Forbidden: \
             field can not be less than status.capacity",
        ));
    }
    Ok(())
}

/// The apiserver's PVC rule: after creation only `resources.requests`,
/// `volumeAttributesClassName` and an unset `volumeName` may change in the spec.
fn check_pvc_spec(old: &Value, new: &Value) -> ApiResult<()> {
    let normal = |v: &Value, keep_volume: Option<&Value>| {
        let mut spec = v.get("spec").cloned().unwrap_or(json!({}));
        if let Some(map) = spec.as_object_mut() {
            map.remove("volumeAttributesClassName");
            if let Some(res) = map.get_mut("resources").and_then(Value::as_object_mut) {
                res.remove("requests");
            }
            if let Some(volume) = keep_volume {
                map.insert("volumeName".into(), volume.clone());
            }
        }
        spec
    };
    let old_volume = old
        .pointer("/spec/volumeName")
        .filter(|v| v.as_str() != Some(""));
    // An unset volumeName may be set once.
    let new_spec = if old_volume.is_none() {
        normal(new, Some(&Value::Null))
    } else {
        normal(new, None)
    };
    let old_spec = if old_volume.is_none() {
        normal(old, Some(&Value::Null))
    } else {
        normal(old, None)
    };
    if new_spec != old_spec {
        return Err(err(
            422,
            "Invalid",
            "PersistentVolumeClaim is invalid: spec: Forbidden: spec is immutable after creation \
             except resources.requests and volumeAttributesClassName for bound claims",
        ));
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// HTTP

struct Target {
    res: usize,
    namespace: Option<String>,
    name: Option<String>,
    status: bool,
}

fn parse_path(path: &str) -> Option<Target> {
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (group, version, rest) = match segments.as_slice() {
        ["api", version, rest @ ..] => ("", *version, rest),
        ["apis", group, version, rest @ ..] => (*group, *version, rest),
        _ => return None,
    };
    let find = |plural: &str| {
        RESOURCES
            .iter()
            .position(|r| r.group == group && r.version == version && r.plural == plural)
    };
    let namespaced = |plural: &str| find(plural).filter(|i| RESOURCES[*i].namespaced);
    let target = |res, namespace: Option<&str>, name: Option<&str>, status| {
        Some(Target {
            res,
            namespace: namespace.map(str::to_string),
            name: name.map(str::to_string),
            status,
        })
    };
    match rest {
        ["namespaces", ns, plural] if namespaced(plural).is_some() => {
            target(namespaced(plural)?, Some(ns), None, false)
        }
        ["namespaces", ns, plural, name] if namespaced(plural).is_some() => {
            target(namespaced(plural)?, Some(ns), Some(name), false)
        }
        ["namespaces", ns, plural, name, "status"] => {
            let res = namespaced(plural).filter(|i| RESOURCES[*i].status_subresource)?;
            target(res, Some(ns), Some(name), true)
        }
        [plural] => target(find(plural)?, None, None, false),
        [plural, name] => {
            let res = find(plural).filter(|i| !RESOURCES[*i].namespaced)?;
            target(res, None, Some(name), false)
        }
        [plural, name, "status"] => {
            let res = find(plural)
                .filter(|i| !RESOURCES[*i].namespaced && RESOURCES[*i].status_subresource)?;
            target(res, None, Some(name), true)
        }
        _ => None,
    }
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let hex = |b: u8| (b as char).to_digit(16).map(|d| d as u8);
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => match (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                (Some(hi), Some(lo)) => {
                    out.push(hi * 16 + lo);
                    i += 2;
                }
                _ => out.push(b'%'),
            },
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn parse_query(query: &str) -> BTreeMap<String, String> {
    query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (percent_decode(k), percent_decode(v))
        })
        .collect()
}

fn json_response(code: u16, value: &Value) -> hyper::Response<Body> {
    hyper::Response::builder()
        .status(code)
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(serde_json::to_vec(value).unwrap())).boxed_unsync())
        .unwrap()
}

fn error_response(e: &ApiError) -> hyper::Response<Body> {
    json_response(e.code, &status_value(e))
}

async fn handle(shared: Shared, req: hyper::Request<Incoming>) -> hyper::Response<Body> {
    let method = req.method().as_str().to_string();
    let path = req.uri().path().to_string();
    let query = req.uri().query().unwrap_or("").to_string();
    let header = |name: &str| {
        req.headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    };
    let content_type = header("content-type").unwrap_or_default();
    let body = match req.into_body().collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(_) => Bytes::new(),
    };
    let params = parse_query(&query);
    let target = parse_path(&path);
    let watch = target.as_ref().is_some_and(|t| t.name.is_none())
        && method == "GET"
        && matches!(params.get("watch").map(String::as_str), Some("true" | "1"));
    let mut record = Request {
        method: method.clone(),
        resource: target.as_ref().map(|t| RESOURCES[t.res].id()),
        name: target.as_ref().and_then(|t| t.name.clone()),
        watch,
        status: 0,
        query: query.clone(),
    };
    let response = respond(
        &shared,
        &method,
        &path,
        target,
        &params,
        &content_type,
        &body,
        watch,
    );
    record.status = response.status().as_u16();
    lock(&shared).requests.push(record);
    response
}

#[allow(clippy::too_many_arguments)]
fn respond(
    shared: &Shared,
    method: &str,
    path: &str,
    target: Option<Target>,
    params: &BTreeMap<String, String>,
    content_type: &str,
    body: &[u8],
    watch: bool,
) -> hyper::Response<Body> {
    if method == "GET" && path == "/version" {
        let (major, minor) = lock(shared).version.clone();
        return json_response(
            200,
            &json!({
                "major": major, "minor": minor,
                "gitVersion": format!("v{major}.{minor}.0-storch-fake"),
                "gitCommit": "0000000000000000000000000000000000000000", "gitTreeState": "clean",
                "buildDate": "2025-01-01T00:00:00Z", "goVersion": "go1.24", "compiler": "gc",
                "platform": "linux/amd64",
            }),
        );
    }
    if let Some(response) = pod_log(shared, method, path, params) {
        return response;
    }
    let Some(target) = target else {
        return error_response(&err(
            404,
            "NotFound",
            format!("the server could not find the requested resource ({method} {path})"),
        ));
    };
    let mut state = lock(shared);
    let id = RESOURCES[target.res].id();
    let list = method == "GET" && target.name.is_none() && !watch;
    if let Some(fault) = state.faults.iter_mut().find(|f| {
        f.remaining > 0
            && (f.resource == "*" || f.resource == id)
            && (f.method == "*"
                || f.method == method
                || (f.method == "WATCH" && watch)
                || (f.method == "LIST" && list))
    }) {
        fault.remaining -= 1;
        let code = fault.code;
        state.faults.retain(|f| f.remaining > 0);
        return error_response(&err(
            code,
            reason_for(code),
            format!("injected failure {code} for {method} {path}"),
        ));
    }
    if watch {
        return match start_watch(shared, &mut state, &target, params) {
            Ok(response) => response,
            Err(e) => error_response(&e),
        };
    }
    let result = serve(&mut state, &target, method, params, content_type, body);
    if matches!(method, "POST" | "PUT" | "PATCH" | "DELETE") {
        state.run_binder();
    }
    match result {
        Ok((code, value)) => json_response(code, &value),
        Err(e) => error_response(&e),
    }
}

fn filter_from(target: &Target, params: &BTreeMap<String, String>) -> ApiResult<Filter> {
    Ok(Filter {
        namespace: target.namespace.clone(),
        labels: parse_labels(params.get("labelSelector").map_or("", String::as_str))?,
        fields: parse_fields(params.get("fieldSelector").map_or("", String::as_str))?,
    })
}

fn parse_body(body: &[u8]) -> ApiResult<Value> {
    serde_json::from_slice(body)
        .map_err(|e| err(400, "BadRequest", format!("the body is not JSON: {e}")))
}

fn serve(
    state: &mut State,
    target: &Target,
    method: &str,
    params: &BTreeMap<String, String>,
    content_type: &str,
    body: &[u8],
) -> ApiResult<(u16, Value)> {
    let res = target.res;
    let r = &RESOURCES[res];
    let ns = scope(res, target.namespace.as_deref().unwrap_or(""));
    let Some(name) = &target.name else {
        return match method {
            "GET" => {
                let filter = filter_from(target, params)?;
                Ok((
                    200,
                    json!({
                        "kind": format!("{}List", r.kind),
                        "apiVersion": r.api_version(),
                        "metadata": {"resourceVersion": state.rv.to_string()},
                        "items": state.current(res, &filter),
                    }),
                ))
            }
            "POST" if r.kind == "SelfSubjectAccessReview" => {
                Ok((201, state.access_review(parse_body(body)?)?))
            }
            "POST" => {
                if r.namespaced && target.namespace.is_none() {
                    return Err(err(
                        405,
                        "MethodNotAllowed",
                        "create needs a namespace in the path",
                    ));
                }
                Ok((201, state.create(res, &ns, parse_body(body)?)?))
            }
            _ => Err(err(
                405,
                "MethodNotAllowed",
                format!("{method} is not allowed on a collection"),
            )),
        };
    };
    if r.namespaced && target.namespace.is_none() {
        return Err(err(
            404,
            "NotFound",
            "a namespaced item needs a namespace in the path",
        ));
    }
    let key = (res, ns.clone(), name.clone());
    let stored = state.objects.get(&key).cloned();
    match method {
        "GET" => stored.map(|o| (200, o)).ok_or_else(|| not_found(res, name)),
        "PUT" => Ok((200, state.update(key, parse_body(body)?, target.status)?)),
        "DELETE" => {
            let options = if body.is_empty() {
                Value::Null
            } else {
                parse_body(body)?
            };
            Ok((200, state.delete(key, &options)?))
        }
        "PATCH" => {
            let mut patch = parse_body(body)?;
            let media = content_type.split(';').next().unwrap_or("").trim();
            let apply = media == "application/apply-patch+yaml";
            if apply {
                // Server-side apply: a field manager is required, and recorded.
                let Some(manager) = params.get("fieldManager").filter(|m| !m.is_empty()) else {
                    return Err(err(
                        400,
                        "BadRequest",
                        "PATCH, application/apply-patch+yaml: fieldManager is required",
                    ));
                };
                let previous = stored.as_ref().map_or(Value::Null, |s| s.clone());
                record_manager(&mut patch, &previous, manager, &r.api_version());
            }
            let Some(stored) = stored else {
                if apply && !target.status {
                    let mut obj = patch;
                    meta_mut(&mut obj).insert("name".into(), json!(name));
                    return Ok((201, state.create(res, &ns, obj)?));
                }
                return Err(not_found(res, name));
            };
            let mut patched = stored.clone();
            match media {
                "application/apply-patch+yaml" => apply_patch(&mut patched, &patch),
                "application/merge-patch+json" | "application/strategic-merge-patch+json" => {
                    merge_patch(&mut patched, &patch)
                }
                "application/json-patch+json" => json_patch(&mut patched, &patch)?,
                other => {
                    return Err(err(
                        415,
                        "UnsupportedMediaType",
                        format!("the body of the request was in an unknown format ({other:?})"),
                    ));
                }
            }
            // A resourceVersion the patch brought in is a precondition; the stored one is not.
            if str_at(&patched, "/metadata/resourceVersion")
                != str_at(&stored, "/metadata/resourceVersion")
                && str_at(&patched, "/metadata/resourceVersion").is_some()
            {
                return Err(conflict(res, name));
            }
            meta_mut(&mut patched).remove("resourceVersion");
            Ok((200, state.update(key, patched, target.status)?))
        }
        _ => Err(err(
            405,
            "MethodNotAllowed",
            format!("{method} is not allowed"),
        )),
    }
}

/// Registers a watch and answers with its stream: first the backlog (synthetic ADDED for
/// "now", or the history after the given resourceVersion), then live changes, until
/// `timeoutSeconds`, [`FakeKube::close_watches`], shutdown or the client going away.
fn start_watch(
    shared: &Shared,
    state: &mut State,
    target: &Target,
    params: &BTreeMap<String, String>,
) -> ApiResult<hyper::Response<Body>> {
    let res = target.res;
    let filter = filter_from(target, params)?;
    let bookmarks = params.get("allowWatchBookmarks").map(String::as_str) == Some("true");
    let initial_events = params.get("sendInitialEvents").map(String::as_str) == Some("true");
    let rv = params
        .get("resourceVersion")
        .map(String::as_str)
        .unwrap_or("");
    let mut backlog = Vec::new();
    let mut expired = false;
    if rv.is_empty() || rv == "0" || initial_events {
        for obj in state.current(res, &filter) {
            backlog.extend(event_line("ADDED", &obj));
        }
        if initial_events {
            backlog.extend(bookmark(res, state.rv, true));
        }
    } else {
        let from: u64 = rv.parse().map_err(|_| {
            err(
                400,
                "BadRequest",
                format!("invalid resource version {rv:?}"),
            )
        })?;
        if from < state.history_start {
            expired = true;
            let e = err(
                410,
                "Expired",
                format!("too old resource version: {from} ({})", state.history_start),
            );
            backlog.extend(event_line("ERROR", &status_value(&e)));
        } else {
            for change in state.history.iter().filter(|c| c.res == res && c.rv > from) {
                if let Some(line) = render(change, &filter) {
                    backlog.extend(line);
                }
            }
        }
    }
    let (tx, rx) = mpsc::unbounded();
    let id = state.next_watch;
    state.next_watch += 1;
    if !backlog.is_empty() {
        tx.unbounded_send(Bytes::from(backlog)).unwrap();
    }
    if !expired {
        state.watches.push(Watch {
            id,
            res,
            filter,
            bookmarks,
            tx,
        });
    }
    let timeout = params
        .get("timeoutSeconds")
        .and_then(|t| t.parse::<u64>().ok())
        .filter(|t| *t > 0)
        .unwrap_or(1800);
    let deadline = Box::pin(tokio::time::sleep(Duration::from_secs(timeout)));
    let stream = futures::stream::unfold(
        Some((rx, deadline, shared.clone())),
        move |step: Option<WatchStep>| async move {
            let (mut rx, mut deadline, shared) = step?;
            tokio::select! {
                item = rx.next() => item.map(|bytes| (bytes, Some((rx, deadline, shared)))),
                _ = &mut deadline => {
                    // The apiserver's timeout: no more events, a last bookmark, the end.
                    let mut state = lock(&shared);
                    let mut last = Vec::new();
                    let mine = state.watches.iter().position(|w| w.id == id);
                    let watch = mine.map(|index| state.watches.remove(index));
                    while let Ok(bytes) = rx.try_recv() {
                        last.extend_from_slice(&bytes);
                    }
                    if watch.is_some_and(|w| w.bookmarks) {
                        last.extend_from_slice(&bookmark(res, state.rv, false));
                    }
                    (!last.is_empty()).then(|| (Bytes::from(last), None))
                }
            }
        },
    );
    let body = StreamBody::new(stream.map(|bytes| Ok::<_, Infallible>(Frame::data(bytes))));
    Ok(hyper::Response::builder()
        .status(200)
        .header("content-type", "application/json")
        .body(body.boxed_unsync())
        .unwrap())
}

type WatchStep = (
    mpsc::UnboundedReceiver<Bytes>,
    Pin<Box<tokio::time::Sleep>>,
    Shared,
);
