//! The nexentastor-iscsi driver against hand-written NEF answers (the wire spec's examples and
//! real-shaped objects, spec/wire-protocols.md §4) served over TLS on 127.0.0.1: login and a
//! token expiring mid-run, HA failover mid-run, paging, job polling, error bodies, dynamic
//! target allocation across the `numOfLunsPerTarget` boundary, CHAP, clones through a
//! temporary snapshot, and TLS verified by default.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use storch::drivers::nexentastor::NexentaDriver;
use storch::drivers::testing::{clone_req, req};
use storch::drivers::{CommonConfig, DriverError, StorageDriver};
use storch::model::Offer;
use storch::sim::http::{Handler, HttpResponse, SelfSigned, Server};

/// Answers per `METHOD /path` (path as sent, escaped), in order; the last one repeats.
type Script = HashMap<String, VecDeque<(u16, Value)>>;

/// One request as the appliance saw it.
#[derive(Debug, Clone)]
pub(super) struct Seen {
    pub key: String,
    pub query: String,
    pub auth: Option<String>,
    pub body: Value,
}

/// One canned appliance: tokens it issued (`tok-<name>-<n>`), the requests it saw.
pub(super) struct Nef {
    server: Server,
    seen: Arc<Mutex<Vec<Seen>>>,
    valid: Arc<Mutex<HashSet<String>>>,
}

impl Nef {
    pub async fn start(name: &str, cert: &SelfSigned, answers: Vec<(&str, u16, Value)>) -> Nef {
        let mut script: Script = HashMap::new();
        for (key, status, body) in answers {
            script
                .entry(key.to_string())
                .or_default()
                .push_back((status, body));
        }
        let script = Arc::new(Mutex::new(script));
        let seen = Arc::new(Mutex::new(Vec::new()));
        let valid = Arc::new(Mutex::new(HashSet::new()));
        let issued = Arc::new(Mutex::new(0u32));
        let name = name.to_string();
        let (s, r, v) = (script.clone(), seen.clone(), valid.clone());
        let handler: Handler = Arc::new(move |req| {
            let (s, r, v, issued, name) = (
                s.clone(),
                r.clone(),
                v.clone(),
                issued.clone(),
                name.clone(),
            );
            Box::pin(async move {
                let key = format!("{} {}", req.method, req.path);
                let body: Value = serde_json::from_slice(&req.body).unwrap_or(Value::Null);
                r.lock().unwrap().push(Seen {
                    key: key.clone(),
                    query: req.query.clone(),
                    auth: req.authorization.clone(),
                    body: body.clone(),
                });
                let scripted = {
                    let mut script = s.lock().unwrap();
                    script.get_mut(&key).and_then(|q| {
                        if q.len() > 1 {
                            q.pop_front()
                        } else {
                            q.front().cloned()
                        }
                    })
                };
                let (status, answer) = match (key.as_str(), scripted) {
                    (_, Some(a)) => a,
                    ("POST /auth/login", None) => {
                        assert_eq!(
                            body,
                            json!({"username": "admin", "password": "pw-canary-1"})
                        );
                        let mut n = issued.lock().unwrap();
                        *n += 1;
                        let token = format!("tok-{name}-{n}");
                        v.lock().unwrap().insert(token.clone());
                        (200, json!({ "token": token }))
                    }
                    _ => (
                        404,
                        json!({"name": "NotFound", "code": "ENOENT",
                        "message": format!("{key} is not scripted")}),
                    ),
                };
                // Every call but the login needs a live token.
                let token = req
                    .authorization
                    .as_deref()
                    .and_then(|a| a.strip_prefix("Bearer "));
                if key != "POST /auth/login"
                    && !token.is_some_and(|t| v.lock().unwrap().contains(t))
                {
                    return HttpResponse::new(
                        401,
                        "application/json",
                        json!({"name": "AuthError", "code": "EAUTH", "message": "Not logged in"})
                            .to_string(),
                    );
                }
                let text = if answer.is_null() {
                    String::new()
                } else {
                    answer.to_string()
                };
                HttpResponse::new(status, "application/json", text)
            })
        });
        let server = Server::start(([127, 0, 0, 1], 0).into(), Some(cert), handler)
            .await
            .unwrap();
        Nef {
            server,
            seen,
            valid,
        }
    }

    pub fn url(&self) -> String {
        self.server.url()
    }

    /// Every token issued so far stops being valid (the session expired).
    pub fn expire(&self) {
        self.valid.lock().unwrap().clear();
    }

    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }

    pub fn keys(&self) -> Vec<String> {
        self.seen().into_iter().map(|s| s.key).collect()
    }

    pub fn count(&self, key: &str) -> usize {
        self.keys().iter().filter(|k| *k == key).count()
    }

    /// The body of the first request to `key`.
    pub fn body(&self, key: &str) -> Value {
        self.seen()
            .into_iter()
            .find(|s| s.key == key)
            .map(|s| s.body)
            .unwrap_or(Value::Null)
    }

    pub async fn stop(self) {
        self.server.stop().await;
    }
}

pub(super) fn config(urls: &[String], cert: &SelfSigned, extra: Value) -> Value {
    let doc = json!({
        "version": 1, "storageDriverName": "nexentastor-iscsi", "backendName": "nx",
        "restIp": urls.join(","), "username": "admin", "password": "pw-canary-1",
        "defaultDataIp": "10.0.1.1", "defaultVolumeGroup": "tank/csi",
        "defaultTarget": "iqn.2005-07.com.nexenta:01:csi", "defaultTargetGroup": "tg1",
        "trustedCACertificate": cert.cert_pem,
    });
    storch::drivers::testing::merged(doc, extra)
}

pub(super) fn driver(doc: &Value, page: usize, job_timeout: Duration) -> NexentaDriver {
    let common = CommonConfig::parse(doc).unwrap();
    NexentaDriver::from_config(doc, &common)
        .unwrap()
        .tune_client(page, job_timeout)
}

fn data(items: Vec<Value>) -> Value {
    json!({ "data": items })
}

fn vg() -> Value {
    data(vec![
        json!({"path": "tank/csi", "bytesAvailable": 900_000_000_000u64,
        "bytesUsed": 100_000_000_000u64}),
    ])
}

fn zvol(name: &str) -> Value {
    json!({"path": format!("tank/csi/{name}"), "volumeSize": 1_073_741_824u64,
        "bytesAvailable": 1_073_741_824u64, "bytesUsed": 0})
}

fn mapping(id: &str, vol: &str, group: &str, lun: i64) -> Value {
    json!({"id": id, "volume": format!("tank/csi/{vol}"), "targetGroup": group,
        "hostGroup": "all", "lun": lun})
}

fn target(name: &str, auth: &str) -> Value {
    json!({"name": name, "state": "online", "authentication": auth, "alias": "",
        "chapSecretSet": auth == "chap", "chapUser": if auth == "chap" { "storch" } else { "" },
        "portals": [{"address": "10.0.1.1", "port": 3260}]})
}

fn job(id: &str) -> Value {
    json!({"links": [{"rel": "monitor", "href": format!("/jobStatus/{id}")}]})
}

fn err(code: &str, message: &str) -> Value {
    json!({"name": "NefError", "code": code, "message": message})
}

const IQN: &str = "iqn.2005-07.com.nexenta:01:csi";
const IQN_ESC: &str = "iqn.2005-07.com.nexenta%3A01%3Acsi";
const SLOW: Duration = Duration::from_secs(60);

/// The answers of mapping zvol `vol` as LUN `lun` to the existing target group `group` of
/// target `iqn`: no mapping yet, (for a dynamic allocation, the listing it reads,) the new
/// mapping, the target, the group, the create; then the zvol.
fn mapped(
    vol: &str,
    group: &str,
    iqn: &str,
    lun: i64,
    all: Option<Vec<Value>>,
) -> Vec<(&'static str, u16, Value)> {
    let group_key: &'static str =
        Box::leak(format!("GET /san/targetgroups/{group}").into_boxed_str());
    let mut out = vec![("GET /san/lunMappings", 200, data(vec![]))];
    if let Some(all) = all {
        out.push(("GET /san/lunMappings", 200, data(all)));
    }
    out.extend([
        (
            "GET /san/lunMappings",
            200,
            data(vec![mapping("m1", vol, group, lun)]),
        ),
        (
            "GET /san/iscsi/targets",
            200,
            data(vec![target(iqn, "none")]),
        ),
        (group_key, 200, json!({"name": group, "members": [iqn]})),
        ("POST /san/lunMappings", 201, Value::Null),
        ("GET /storage/volumes", 200, data(vec![zvol(vol)])),
    ]);
    out
}

#[tokio::test]
async fn discovery_logs_in_and_reads_the_volume_groups() {
    let cert = SelfSigned::generate(&[]).unwrap();
    let a = Nef::start("a", &cert, vec![("GET /storage/volumeGroups", 200, vg())]).await;
    let d = driver(
        &config(&[a.url()], &cert, json!({"zone": "zone-1"})),
        100,
        SLOW,
    );
    let disc = d.discover().await.unwrap();
    assert_eq!(disc.backend_name, "nx");
    let pool = &disc.pools[0];
    assert_eq!(pool.name, "tank/csi");
    assert_eq!(pool.total_bytes, Some(1_000_000_000_000));
    assert_eq!(
        pool.offers["backendType"],
        Offer::strings(["nexentastor-iscsi"])
    );
    assert_eq!(
        pool.offers["provisioningType"],
        Offer::strings(["thin", "thick"])
    );
    assert_eq!(pool.offers["snapshots"], Offer::Bool(true));
    assert_eq!(pool.offers["zone"], Offer::strings(["zone-1"]));
    assert_eq!(disc.free_bytes["tank/csi"], 900_000_000_000);
    let seen = a.seen();
    assert_eq!(seen[0].key, "POST /auth/login");
    assert_eq!(seen[1].key, "GET /storage/volumeGroups");
    assert_eq!(seen[1].auth.as_deref(), Some("Bearer tok-a-1"));
    assert!(
        seen[1].query.contains("path=tank%2Fcsi"),
        "{}",
        seen[1].query
    );
    a.stop().await;

    // A volume group the appliance does not have: an error naming the key; never created.
    let b = Nef::start(
        "b",
        &cert,
        vec![("GET /storage/volumeGroups", 200, data(vec![]))],
    )
    .await;
    let d = driver(&config(&[b.url()], &cert, json!({})), 100, SLOW);
    match d.discover().await {
        Err(DriverError::Invalid(msg)) => {
            assert!(
                msg.contains("defaultVolumeGroup") && msg.contains("tank/csi"),
                "{msg}"
            )
        }
        other => panic!("{other:?}"),
    }
    assert!(b.keys().iter().all(|k| !k.starts_with("POST /storage")));
    b.stop().await;
}

#[tokio::test]
async fn an_expired_token_is_renewed_once() {
    let cert = SelfSigned::generate(&[]).unwrap();
    let a = Nef::start("a", &cert, vec![("GET /storage/volumeGroups", 200, vg())]).await;
    let d = driver(&config(&[a.url()], &cert, json!({})), 100, SLOW);
    d.discover().await.unwrap();
    a.expire();
    d.discover().await.unwrap();
    assert_eq!(a.count("POST /auth/login"), 2);
    let last = a.seen().pop().unwrap();
    assert_eq!(last.auth.as_deref(), Some("Bearer tok-a-2"));
    a.stop().await;

    // An appliance that refuses every session: one re-login, then a clear error.
    let b = Nef::start(
        "b",
        &cert,
        vec![(
            "GET /storage/volumeGroups",
            401,
            err("EAUTH", "Token is invalid"),
        )],
    )
    .await;
    let d = driver(&config(&[b.url()], &cert, json!({})), 100, SLOW);
    match d.discover().await {
        Err(DriverError::Invalid(msg)) => assert!(msg.contains("Token is invalid"), "{msg}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(b.count("POST /auth/login"), 2);
    assert_eq!(b.count("GET /storage/volumeGroups"), 2);
    b.stop().await;

    // Wrong credentials: the login's 401, never the password.
    let c = Nef::start(
        "c",
        &cert,
        vec![("POST /auth/login", 401, err("EAUTH", "Bad credentials"))],
    )
    .await;
    let d = driver(&config(&[c.url()], &cert, json!({})), 100, SLOW);
    match d.discover().await {
        Err(DriverError::Invalid(msg)) => {
            assert!(
                msg.contains("rejected the login") && !msg.contains("pw-canary"),
                "{msg}"
            )
        }
        other => panic!("{other:?}"),
    }
    c.stop().await;
}

#[tokio::test]
async fn create_polls_the_job_and_maps_the_lun() {
    let cert = SelfSigned::generate(&[]).unwrap();
    let mut answers = vec![
        ("POST /storage/volumes", 202, job("2d1f4c")),
        ("GET /jobStatus/2d1f4c", 202, job("2d1f4c")),
        ("GET /jobStatus/2d1f4c", 202, job("2d1f4c")),
        ("GET /jobStatus/2d1f4c", 201, Value::Null),
    ];
    answers.extend(mapped("v1", "tg1", IQN, 3, None));
    let a = Nef::start("a", &cert, answers).await;
    let d = driver(&config(&[a.url()], &cert, json!({})), 100, SLOW);
    let v = d.create(&req("v1", "tank/csi", 1 << 30)).await.unwrap();
    assert_eq!(
        (v.internal_name.as_str(), v.pool.as_str()),
        ("v1", "tank/csi")
    );
    assert_eq!(v.size_bytes, 1 << 30);
    assert_eq!(v.access.iscsi_target_iqn, IQN);
    assert_eq!(v.access.iscsi_target_portal, "10.0.1.1:3260");
    assert_eq!(v.access.iscsi_lun_number, 3);
    assert!(v.access.iscsi_username.is_empty());
    assert_eq!(
        a.body("POST /storage/volumes"),
        json!({"path": "tank/csi/v1", "volumeSize": 1u64 << 30, "sparseVolume": true,
            "volumeBlockSize": 8192})
    );
    assert_eq!(a.count("GET /jobStatus/2d1f4c"), 3);
    assert_eq!(
        a.body("POST /san/lunMappings"),
        json!({"hostGroup": "all", "volume": "tank/csi/v1", "targetGroup": "tg1"})
    );
    // The fixed target and group exist: nothing created or changed.
    assert_eq!(a.count("POST /san/iscsi/targets"), 0);
    assert_eq!(a.count("POST /san/targetgroups"), 0);
    a.stop().await;
}

#[tokio::test]
async fn a_job_that_fails_or_never_ends() {
    let cert = SelfSigned::generate(&[]).unwrap();
    let a = Nef::start(
        "a",
        &cert,
        vec![
            ("POST /storage/volumes", 202, job("j1")),
            ("GET /jobStatus/j1", 202, job("j1")),
            (
                "GET /jobStatus/j1",
                422,
                err("EINVAL", "volumeSize exceeds the volume group"),
            ),
        ],
    )
    .await;
    let d = driver(&config(&[a.url()], &cert, json!({})), 100, SLOW);
    match d.create(&req("v1", "tank/csi", 1 << 30)).await {
        Err(DriverError::Invalid(msg)) => {
            assert!(msg.contains("volumeSize exceeds the volume group"), "{msg}")
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(a.count("POST /san/lunMappings"), 0);
    a.stop().await;

    let b = Nef::start(
        "b",
        &cert,
        vec![
            ("POST /storage/volumes", 202, job("j2")),
            ("GET /jobStatus/j2", 202, job("j2")),
        ],
    )
    .await;
    let d = driver(
        &config(&[b.url()], &cert, json!({})),
        100,
        Duration::from_millis(50),
    );
    match d.create(&req("v1", "tank/csi", 1 << 30)).await {
        Err(DriverError::Unavailable(msg)) => assert!(msg.contains("did not finish"), "{msg}"),
        other => panic!("{other:?}"),
    }
    b.stop().await;
}

#[tokio::test]
async fn error_bodies_become_classes_keeping_the_message() {
    let cert = SelfSigned::generate(&[]).unwrap();
    let a = Nef::start(
        "a",
        &cert,
        vec![
            (
                "POST /storage/volumes",
                400,
                err("EEXIST", "Volume tank/csi/v1 already exists"),
            ),
            ("GET /storage/volumes", 200, data(vec![zvol("v1")])),
            (
                "PUT /storage/volumes/tank%2Fcsi%2Fv1",
                400,
                err("EINVAL", "volumeSize must be a multiple of volumeBlockSize"),
            ),
            (
                "POST /storage/snapshots",
                500,
                err("EBUSY", "dataset is busy"),
            ),
            (
                "DELETE /storage/snapshots/tank%2Fcsi%2Fv1%40s1",
                404,
                err("ENOENT", "no such snapshot"),
            ),
        ],
    )
    .await;
    let d = driver(&config(&[a.url()], &cert, json!({})), 100, SLOW);
    match d.create(&req("v1", "tank/csi", 1 << 30)).await {
        Err(DriverError::AlreadyExists(msg)) => assert!(msg.contains("already exists"), "{msg}"),
        other => panic!("{other:?}"),
    }
    match d.resize("v1", (1 << 30) + 1).await {
        Err(DriverError::Invalid(msg)) => {
            assert!(msg.contains("multiple of volumeBlockSize"), "{msg}")
        }
        other => panic!("{other:?}"),
    }
    match d.resize("v1", 1 << 20).await {
        Err(DriverError::Invalid(msg)) => assert!(msg.contains("shrink"), "{msg}"),
        other => panic!("{other:?}"),
    }
    match d.create_snapshot("v1", "s1").await {
        Err(DriverError::Conflict(msg)) => assert!(msg.contains("dataset is busy"), "{msg}"),
        other => panic!("{other:?}"),
    }
    // A snapshot already gone counts as deleted; the 500 EBUSY was an answer, not a failover.
    d.delete_snapshot("v1", "s1").await.unwrap();
    assert_eq!(a.count("POST /storage/snapshots"), 1);
    a.stop().await;

    // A volume already gone counts as destroyed: nothing is deleted.
    let b = Nef::start(
        "b",
        &cert,
        vec![("GET /storage/volumes", 200, data(vec![]))],
    )
    .await;
    let d = driver(&config(&[b.url()], &cert, json!({})), 100, SLOW);
    d.destroy("v9").await.unwrap();
    assert!(
        b.keys().iter().all(|k| !k.starts_with("DELETE")),
        "{:?}",
        b.keys()
    );
    assert_eq!(d.get("v9").await.unwrap(), None);
    b.stop().await;
}

#[tokio::test]
async fn paging_follows_limit_offset_and_next_links() {
    let cert = SelfSigned::generate(&[]).unwrap();
    let next = |offset: u32| json!([{"rel": "next", "href": format!("/storage/volumes?offset={offset}&limit=2")}]);
    let a = Nef::start(
        "a",
        &cert,
        vec![
            (
                "GET /storage/volumes",
                200,
                json!({"data": [zvol("v1"), zvol("v2")], "links": next(2)}),
            ),
            (
                "GET /storage/volumes",
                200,
                json!({"data": [zvol("v3"), zvol("v4")], "links": next(4)}),
            ),
            (
                "GET /storage/volumes",
                200,
                json!({"data": [zvol("v5")], "links": []}),
            ),
            ("GET /san/lunMappings", 200, data(vec![])),
        ],
    )
    .await;
    let d = driver(&config(&[a.url()], &cert, json!({})), 2, SLOW);
    let vols = d.list_volumes().await.unwrap();
    let names: Vec<&str> = vols.iter().map(|v| v.internal_name.as_str()).collect();
    assert_eq!(names, ["v1", "v2", "v3", "v4", "v5"]);
    let queries: Vec<String> = a
        .seen()
        .into_iter()
        .filter(|s| s.key == "GET /storage/volumes")
        .map(|s| s.query)
        .collect();
    assert_eq!(queries.len(), 3);
    for (q, offset) in queries.iter().zip([0, 2, 4]) {
        assert!(
            q.contains("parent=tank%2Fcsi")
                && q.contains("limit=2")
                && q.contains(&format!("offset={offset}")),
            "{q}"
        );
    }
    a.stop().await;
}

#[tokio::test]
async fn failover_mid_run_moves_on_and_remembers() {
    let cert = SelfSigned::generate(&[]).unwrap();
    let a = Nef::start("a", &cert, vec![("GET /storage/volumeGroups", 200, vg())]).await;
    let b = Nef::start("b", &cert, vec![("GET /storage/volumeGroups", 200, vg())]).await;
    let (url_a, url_b) = (a.url(), b.url());
    let d = driver(
        &config(&[url_a.clone(), url_b.clone()], &cert, json!({})),
        100,
        SLOW,
    );
    d.discover().await.unwrap();
    assert_eq!(
        b.seen().len(),
        0,
        "the second endpoint is not asked while the first answers"
    );
    // The first appliance goes away mid-run.
    a.stop().await;
    d.discover().await.unwrap();
    assert_eq!(d.active_endpoint(), url_b);
    assert_eq!(b.keys(), ["POST /auth/login", "GET /storage/volumeGroups"]);
    d.discover().await.unwrap();
    assert_eq!(b.count("POST /auth/login"), 1, "the session on b is kept");
    b.stop().await;
    // Nobody answers: unavailable, naming both.
    match d.discover().await {
        Err(DriverError::Unavailable(msg)) => {
            assert!(
                msg.contains("no endpoint answered")
                    && msg.contains(&url_a)
                    && msg.contains(&url_b),
                "{msg}"
            )
        }
        other => panic!("{other:?}"),
    }

    // A 5xx without the appliance's own code moves on too; the answer's endpoint is kept.
    let c = Nef::start(
        "c",
        &cert,
        vec![("GET /storage/volumeGroups", 503, Value::Null)],
    )
    .await;
    let e = Nef::start("e", &cert, vec![("GET /storage/volumeGroups", 200, vg())]).await;
    let d = driver(&config(&[c.url(), e.url()], &cert, json!({})), 100, SLOW);
    d.discover().await.unwrap();
    d.discover().await.unwrap();
    assert_eq!(c.count("GET /storage/volumeGroups"), 1);
    assert_eq!(e.count("GET /storage/volumeGroups"), 2);
    assert_eq!(d.active_endpoint(), e.url());
    c.stop().await;
    e.stop().await;
}

#[tokio::test]
async fn dynamic_targets_fill_up_to_num_of_luns_per_target() {
    let cert = SelfSigned::generate(&[]).unwrap();
    let dynamic = json!({"dynamicTargetLunAllocation": true, "numOfLunsPerTarget": 2,
        "defaultTarget": "iqn.2005-07.com.nexenta:01:dyn", "defaultTargetGroup": "dyn-tg"});
    let t0 = "iqn.2005-07.com.nexenta:01:dyn-0";
    let t1 = "iqn.2005-07.com.nexenta:01:dyn-1";
    // Below the boundary: dyn-tg-0 has one LUN, so the next goes there too.
    let mut answers = vec![("POST /storage/volumes", 201, Value::Null)];
    let all = vec![mapping("m0", "v1", "dyn-tg-0", 0)];
    answers.extend(mapped("v2", "dyn-tg-0", t0, 1, Some(all)));
    let a = Nef::start("a", &cert, answers).await;
    let d = driver(&config(&[a.url()], &cert, dynamic.clone()), 100, SLOW);
    let v = d.create(&req("v2", "tank/csi", 1 << 30)).await.unwrap();
    assert_eq!(v.access.iscsi_target_iqn, t0);
    assert_eq!(v.access.iscsi_lun_number, 1);
    assert_eq!(a.body("POST /san/lunMappings")["targetGroup"], "dyn-tg-0");
    assert_eq!(a.count("POST /san/iscsi/targets"), 0);
    a.stop().await;

    // At the boundary: dyn-tg-0 is full, so storch makes dyn-1 and dyn-tg-1.
    let b = Nef::start(
        "b",
        &cert,
        vec![
            ("POST /storage/volumes", 201, Value::Null),
            ("GET /san/lunMappings", 200, data(vec![])),
            (
                "GET /san/lunMappings",
                200,
                data(vec![
                    mapping("m1", "v1", "dyn-tg-0", 0),
                    mapping("m2", "v2", "dyn-tg-0", 1),
                ]),
            ),
            (
                "GET /san/lunMappings",
                200,
                data(vec![mapping("m3", "v3", "dyn-tg-1", 0)]),
            ),
            ("GET /san/iscsi/targets", 200, data(vec![])),
            (
                "GET /san/iscsi/targets",
                200,
                data(vec![target(t1, "none")]),
            ),
            ("POST /san/iscsi/targets", 201, Value::Null),
            (
                "GET /san/targetgroups/dyn-tg-1",
                404,
                err("ENOENT", "no such target group"),
            ),
            (
                "GET /san/targetgroups/dyn-tg-1",
                200,
                json!({"name": "dyn-tg-1", "members": [t1]}),
            ),
            ("POST /san/targetgroups", 201, Value::Null),
            ("POST /san/lunMappings", 201, Value::Null),
            ("GET /storage/volumes", 200, data(vec![zvol("v3")])),
        ],
    )
    .await;
    let d = driver(&config(&[b.url()], &cert, dynamic.clone()), 100, SLOW);
    let v = d.create(&req("v3", "tank/csi", 1 << 30)).await.unwrap();
    assert_eq!(v.access.iscsi_target_iqn, t1);
    assert_eq!(v.access.iscsi_lun_number, 0);
    assert_eq!(
        b.body("POST /san/iscsi/targets"),
        json!({"name": t1, "portals": [{"address": "10.0.1.1", "port": 3260}]})
    );
    assert_eq!(
        b.body("POST /san/targetgroups"),
        json!({"name": "dyn-tg-1", "members": [t1]})
    );
    assert_eq!(
        b.body("POST /san/lunMappings"),
        json!({"hostGroup": "all", "volume": "tank/csi/v3", "targetGroup": "dyn-tg-1"})
    );
    b.stop().await;

    // Destroying the last LUN of dyn-tg-1: unmap, delete the zvol, then the empty pair.
    let c = Nef::start(
        "c",
        &cert,
        vec![
            ("GET /storage/volumes", 200, data(vec![zvol("v3")])),
            (
                "GET /san/lunMappings",
                200,
                data(vec![mapping("m3", "v3", "dyn-tg-1", 0)]),
            ),
            ("GET /san/lunMappings", 200, data(vec![])),
            ("DELETE /san/lunMappings/m3", 200, Value::Null),
            ("DELETE /storage/volumes/tank%2Fcsi%2Fv3", 202, job("j3")),
            ("GET /jobStatus/j3", 200, Value::Null),
            ("DELETE /san/targetgroups/dyn-tg-1", 200, Value::Null),
            (
                "DELETE /san/iscsi/targets/iqn.2005-07.com.nexenta%3A01%3Adyn-1",
                200,
                Value::Null,
            ),
            ("GET /storage/snapshots", 200, data(vec![])),
        ],
    )
    .await;
    let d = driver(&config(&[c.url()], &cert, dynamic), 100, SLOW);
    d.destroy("v3").await.unwrap();
    let deletes: Vec<Seen> = c
        .seen()
        .into_iter()
        .filter(|s| s.key.starts_with("DELETE"))
        .collect();
    let keys: Vec<&str> = deletes.iter().map(|s| s.key.as_str()).collect();
    assert_eq!(
        keys,
        [
            "DELETE /san/lunMappings/m3",
            "DELETE /storage/volumes/tank%2Fcsi%2Fv3",
            "DELETE /san/targetgroups/dyn-tg-1",
            "DELETE /san/iscsi/targets/iqn.2005-07.com.nexenta%3A01%3Adyn-1",
        ]
    );
    assert_eq!(deletes[1].query, "snapshots=true");
    c.stop().await;
}

#[tokio::test]
async fn chap_is_set_on_the_target() {
    let cert = SelfSigned::generate(&[]).unwrap();
    let mut answers = vec![
        ("POST /storage/volumes", 201, Value::Null),
        (
            "GET /san/iscsi/targets",
            200,
            data(vec![target(IQN, "none")]),
        ),
        (
            "GET /san/iscsi/targets",
            200,
            data(vec![target(IQN, "chap")]),
        ),
        (
            "PUT /san/iscsi/targets/iqn.2005-07.com.nexenta%3A01%3Acsi",
            200,
            Value::Null,
        ),
    ];
    answers.extend(
        mapped("v1", "tg1", IQN, 3, None)
            .into_iter()
            .filter(|(k, _, _)| *k != "GET /san/iscsi/targets"),
    );
    let a = Nef::start("a", &cert, answers).await;
    let chap = json!({"useChapAuth": true, "chapUser": "storch", "chapSecret": "chap-canary-123"});
    let d = driver(&config(&[a.url()], &cert, chap), 100, SLOW);
    let v = d.create(&req("v1", "tank/csi", 1 << 30)).await.unwrap();
    assert_eq!(
        a.body(&format!("PUT /san/iscsi/targets/{IQN_ESC}")),
        json!({"authentication": "chap", "chapUser": "storch", "chapSecret": "chap-canary-123"})
    );
    assert_eq!(v.access.iscsi_username, "storch");
    assert_eq!(v.access.iscsi_initiator_secret, "chap-canary-123");
    // Read back later, the access info carries the same.
    let again = d.access_info("v1").await.unwrap();
    assert_eq!(again.iscsi_username, "storch");
    assert_eq!(again.iscsi_initiator_secret, "chap-canary-123");
    assert!(!format!("{d:?}").contains("chap-canary"));
    a.stop().await;
}

#[tokio::test]
async fn a_clone_of_a_volume_goes_through_a_snapshot_removed_with_it() {
    let cert = SelfSigned::generate(&[]).unwrap();
    let snap = "tank/csi/v1@storch-clone-c1";
    let snap_esc = "tank%2Fcsi%2Fv1%40storch-clone-c1";
    let snap_obj = json!({"path": snap, "name": "storch-clone-c1", "parent": "tank/csi/v1",
        "creationTime": "2026-01-02T03:04:05.000Z", "clones": ["tank/csi/c1"]});
    let clone_key = format!("POST /storage/snapshots/{snap_esc}/clone");
    let get_snap = format!("GET /storage/snapshots/{snap_esc}");
    let del_snap = format!("DELETE /storage/snapshots/{snap_esc}");
    let mut answers = vec![
        ("GET /storage/volumes", 200, data(vec![zvol("v1")])),
        ("GET /storage/volumes", 200, data(vec![zvol("c1")])),
        ("GET /storage/volumes", 200, data(vec![zvol("v1")])),
        ("GET /storage/volumes", 200, data(vec![zvol("c1")])),
        ("POST /storage/snapshots", 201, Value::Null),
        (get_snap.as_str(), 200, snap_obj.clone()),
        (clone_key.as_str(), 202, job("j9")),
        ("GET /jobStatus/j9", 201, Value::Null),
        ("DELETE /san/lunMappings/m1", 200, Value::Null),
        ("DELETE /storage/volumes/tank%2Fcsi%2Fc1", 200, Value::Null),
        ("GET /storage/snapshots", 200, data(vec![snap_obj])),
        (del_snap.as_str(), 200, Value::Null),
    ];
    answers.extend(mapped("c1", "tg1", IQN, 4, None));
    let a = Nef::start("a", &cert, answers).await;
    let d = driver(&config(&[a.url()], &cert, json!({})), 100, SLOW);
    let v = d.clone_volume(&clone_req("c1", "v1", None)).await.unwrap();
    assert_eq!(v.internal_name, "c1");
    assert_eq!(v.access.iscsi_lun_number, 4);
    assert_eq!(a.body("POST /storage/snapshots"), json!({"path": snap}));
    assert_eq!(a.body(&clone_key), json!({"targetPath": "tank/csi/c1"}));
    // The temporary snapshot is not one of the source's snapshots.
    assert!(d.list_snapshots("v1").await.unwrap().is_empty());
    d.destroy("c1").await.unwrap();
    assert_eq!(a.count(&del_snap), 1);
    let listing = a
        .seen()
        .into_iter()
        .rfind(|s| s.key == "GET /storage/snapshots")
        .unwrap();
    assert!(
        listing.query.contains("recursive=true"),
        "{}",
        listing.query
    );
    a.stop().await;
}

#[tokio::test]
async fn tls_is_verified_by_default() {
    let cert = SelfSigned::generate(&[]).unwrap();
    let a = Nef::start("a", &cert, vec![("GET /storage/volumeGroups", 200, vg())]).await;
    let mut doc = config(&[a.url()], &cert, json!({}));
    doc.as_object_mut().unwrap().remove("trustedCACertificate");
    let d = driver(&doc, 100, SLOW);
    match d.discover().await {
        Err(DriverError::Unavailable(msg)) => assert!(msg.contains("certificate"), "{msg}"),
        other => panic!("{other:?}"),
    }
    assert!(
        a.seen().is_empty(),
        "no request passes an unverified TLS handshake"
    );
    // insecureSkipVerify: true skips the check.
    doc["insecureSkipVerify"] = json!(true);
    driver(&doc, 100, SLOW).discover().await.unwrap();
    a.stop().await;
}
