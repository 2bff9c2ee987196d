//! The ONTAP REST client and the REST half of the drivers against hand-written answers shaped
//! like wire-protocols §5.10, served over TLS: `_links.next` paging with `max_records` and
//! `fields`, a 202 job polled to success and to failure, the error classes, 401 and 403,
//! `useREST` chosen by the array's version, and the cap on requests in flight per LIF.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use storch::drivers::ontap::OntapDriver;
use storch::drivers::ontap::api::OntapApi;
use storch::drivers::ontap::client::OntapError;
use storch::drivers::ontap::config::OntapConfig;
use storch::drivers::ontap::rest::{Req, RestClient};
use storch::drivers::{CommonConfig, DriverError, StorageDriver};
use storch::net::RetryPolicy;
use storch::sim::http::{Handler, HttpResponse, SelfSigned, Server};

const SVM_UUID: &str = "5a1e0000-0000-0000-0000-000000000001";

/// One request as the canned server saw it.
#[derive(Debug, Clone)]
struct Seen {
    method: String,
    path: String,
    query: String,
    body: Value,
}

impl Seen {
    /// A decoded query parameter.
    fn param(&self, key: &str) -> Option<String> {
        reqwest::Url::parse(&format!("https://x/?{}", self.query))
            .unwrap()
            .query_pairs()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.into_owned())
    }
}

type Answer = Box<dyn Fn(&Seen, usize) -> (u16, Value) + Send + Sync>;

/// A server answering each request with `answer(request, how many requests came before)`,
/// recording every request and the most requests it ever had in flight. With `hold > 0` each
/// request waits until `hold` are in flight at once (then none waits any more).
struct Canned {
    server: Server,
    cert: SelfSigned,
    seen: Arc<Mutex<Vec<Seen>>>,
    max_in_flight: Arc<AtomicUsize>,
}

async fn canned(hold: usize, answer: Answer) -> Canned {
    let cert = SelfSigned::generate(&[]).unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let in_flight = Arc::new(AtomicUsize::new(0));
    let max_in_flight = Arc::new(AtomicUsize::new(0));
    let released = Arc::new(AtomicBool::new(hold == 0));
    let answer = Arc::new(answer);
    let (s, i, m, r) = (
        seen.clone(),
        in_flight.clone(),
        max_in_flight.clone(),
        released.clone(),
    );
    let handler: Handler = Arc::new(move |req| {
        let (s, i, m, r, answer) = (s.clone(), i.clone(), m.clone(), r.clone(), answer.clone());
        Box::pin(async move {
            let now = i.fetch_add(1, Ordering::SeqCst) + 1;
            m.fetch_max(now, Ordering::SeqCst);
            if now >= hold {
                r.store(true, Ordering::SeqCst);
            }
            // Wait for the condition (bounded, so a broken cap fails the test, not hangs it).
            for _ in 0..30_000 {
                if r.load(Ordering::SeqCst) {
                    break;
                }
                tokio::time::sleep(std::time::Duration::from_millis(1)).await;
            }
            let (status, body) =
                if req.authorization.as_deref() != Some("Basic YWRtaW46cHctbmV2ZXItc2hvd24=") {
                    (
                        401,
                        json!({"error": {"message": "not authorized", "code": "6691623"}}),
                    )
                } else {
                    let seen = Seen {
                        method: req.method.clone(),
                        path: req.path.clone(),
                        query: req.query.clone(),
                        body: serde_json::from_slice(&req.body).unwrap_or(Value::Null),
                    };
                    let n = {
                        let mut s = s.lock().unwrap();
                        s.push(seen.clone());
                        s.len() - 1
                    };
                    answer(&seen, n)
                };
            i.fetch_sub(1, Ordering::SeqCst);
            HttpResponse::new(status, "application/hal+json", body.to_string())
        })
    });
    let server = Server::start(([127, 0, 0, 1], 0).into(), Some(&cert), handler)
        .await
        .unwrap();
    Canned {
        server,
        cert,
        seen,
        max_in_flight,
    }
}

impl Canned {
    fn doc(&self, extra: Value) -> Value {
        let mut doc = json!({
            "version": 1, "storageDriverName": "ontap-nas",
            "managementLIF": self.server.local_addr().to_string(),
            "username": "admin", "password": "pw-never-shown", "svm": "svm1",
            "trustedCACertificate": self.cert.cert_pem,
        });
        for (k, v) in extra.as_object().unwrap() {
            doc[k] = v.clone();
        }
        doc
    }

    fn client(&self, extra: Value) -> RestClient {
        let doc = self.doc(extra);
        let common = CommonConfig::parse(&doc).unwrap();
        let cfg = OntapConfig::parse(&doc, &common).unwrap();
        RestClient::new(&cfg).unwrap().with_retry(short_retry())
    }

    fn driver(&self, extra: Value) -> Result<OntapDriver, DriverError> {
        let doc = self.doc(extra);
        let common = CommonConfig::parse(&doc).unwrap();
        Ok(OntapDriver::from_config(&doc, &common)?.tune_client(short_retry(), 2))
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

fn short_retry() -> RetryPolicy {
    RetryPolicy {
        max_attempts: 3,
        base_delay: std::time::Duration::from_millis(1),
        max_delay: std::time::Duration::from_millis(5),
    }
}

fn svms() -> (u16, Value) {
    (
        200,
        json!({"records": [{"uuid": SVM_UUID, "name": "svm1"}], "num_records": 1}),
    )
}

fn error(status: u16, code: &str, message: &str) -> (u16, Value) {
    (
        status,
        json!({"error": {"message": message, "code": code, "target": "name"}}),
    )
}

fn job(uuid: &str) -> (u16, Value) {
    (
        202,
        json!({"job": {"uuid": uuid, "_links": {"self": {"href": format!("/api/cluster/jobs/{uuid}")}}}}),
    )
}

#[tokio::test]
async fn paging_follows_next_links_and_reads_only_the_fields_used() {
    let c = canned(
        0,
        Box::new(|s, _| match s.path.as_str() {
            "/api/svm/svms" => svms(),
            "/api/storage/volumes" if s.param("start.name").is_none() => (
                200,
                json!({"records": [
                    {"uuid": "v1", "name": "trident_a", "size": 1073741824,
                     "aggregates": [{"name": "aggr_a"}], "style": "flexvol"},
                    {"uuid": "v2", "name": "trident_b", "size": 2147483648u64,
                     "aggregates": [{"name": "aggr_a"}], "style": "flexvol"}],
                 "num_records": 2,
                 "_links": {"next": {"href": "/api/storage/volumes?start.name=trident_b&max_records=2&svm.uuid=5a1e&name=trident_*&fields=size"}}}),
            ),
            "/api/storage/volumes" => (
                200,
                json!({"records": [{"uuid": "v3", "name": "trident_c", "size": 3221225472u64,
                    "aggregates": [{"name": "aggr_b"}], "nas": {"path": "/trident_c"}}],
                 "num_records": 1, "_links": {"self": {"href": "/api/storage/volumes"}}}),
            ),
            _ => error(404, "4", "no such path"),
        }),
    )
    .await;
    let client = c.client(json!({})).with_page_size(2);
    let vols = client
        .volumes("svm1", "trident_*", Some("flexvol"))
        .await
        .unwrap();
    let names: Vec<&str> = vols.iter().map(|v| v.name.as_str()).collect();
    assert_eq!(names, ["trident_a", "trident_b", "trident_c"]);
    assert_eq!(vols[1].size, 2 << 30);
    assert_eq!(vols[2].aggregate, "aggr_b");
    assert_eq!(vols[2].junction, "/trident_c");

    let seen = c.seen();
    assert_eq!(seen.len(), 3, "{seen:?}");
    assert_eq!(seen[0].param("name").as_deref(), Some("svm1"));
    assert_eq!(seen[0].param("fields").as_deref(), Some("uuid"));
    let first = &seen[1];
    assert_eq!(first.method, "GET");
    assert_eq!(first.param("svm.uuid").as_deref(), Some(SVM_UUID));
    assert_eq!(first.param("name").as_deref(), Some("trident_*"));
    assert_eq!(first.param("style").as_deref(), Some("flexvol"));
    assert_eq!(first.param("max_records").as_deref(), Some("2"));
    let fields = first.param("fields").unwrap();
    for f in ["name", "size", "aggregates", "nas.path", "comment"] {
        assert!(fields.split(',').any(|x| x == f), "{f} in {fields}");
    }
    assert!(!fields.contains("**"));
    // The next page is the href as given, not rebuilt.
    assert_eq!(
        seen[2].query,
        "start.name=trident_b&max_records=2&svm.uuid=5a1e&name=trident_*&fields=size"
    );
    // The SVM UUID is read once.
    client.volumes("svm1", "x", None).await.unwrap();
    assert_eq!(
        c.seen()
            .iter()
            .filter(|s| s.path == "/api/svm/svms")
            .count(),
        1
    );
}

/// A page ONTAP ended early holds no records yet links on: the list goes on to the end (a
/// list that stopped there would miss volumes, e.g. in orphan and drift checks); an empty page
/// linking to itself is an error, not a loop.
#[tokio::test]
async fn empty_pages_that_link_on_are_followed_to_the_end() {
    let c = canned(
        0,
        Box::new(|s, _| {
            let page = |records: Value, next: Option<&str>| {
                let mut p = json!({"records": records,
                    "num_records": records.as_array().unwrap().len()});
                if let Some(n) = next {
                    p["_links"] = json!({"next": {"href": n}});
                }
                (200, p)
            };
            match (s.path.as_str(), s.param("start").as_deref()) {
                ("/api/svm/svms", _) => svms(),
                ("/api/storage/luns", None) if s.param("name").as_deref() == Some("/vol/loop*") => {
                    page(json!([]), Some("/api/storage/luns?start=loop"))
                }
                ("/api/storage/luns", Some("loop")) => {
                    page(json!([]), Some("/api/storage/luns?start=loop"))
                }
                ("/api/storage/luns", None) => page(json!([]), Some("/api/storage/luns?start=1")),
                ("/api/storage/luns", Some("1")) => page(
                    json!([{"name": "/vol/trident_a/lun0", "space": {"size": 5}}]),
                    Some("/api/storage/luns?start=2"),
                ),
                ("/api/storage/luns", Some("2")) => page(json!([]), None),
                _ => error(404, "4", "no such path"),
            }
        }),
    )
    .await;
    let client = c.client(json!({}));
    let luns = client.luns("svm1", "/vol/trident_*").await.unwrap();
    assert_eq!(luns.get("/vol/trident_a/lun0"), Some(&5));
    let e = client.luns("svm1", "/vol/loop*").await.unwrap_err();
    assert!(e.to_string().contains("links to itself"), "{e}");
}

/// Answers a volume create whose job reports `final_state` after one `running` poll.
fn volume_create_server(final_job: Value) -> Answer {
    let polls = Arc::new(AtomicUsize::new(0));
    Box::new(move |s, _| match (s.method.as_str(), s.path.as_str()) {
        ("GET", "/api/svm/svms") => svms(),
        ("POST", "/api/storage/volumes") => job("c0de-01"),
        ("GET", "/api/cluster/jobs/c0de-01") if s.param("fields").as_deref() == Some("state") => {
            if polls.fetch_add(1, Ordering::SeqCst) == 0 {
                (200, json!({"uuid": "c0de-01", "state": "running"}))
            } else {
                (200, json!({"uuid": "c0de-01", "state": final_job["state"]}))
            }
        }
        ("GET", "/api/cluster/jobs/c0de-01") => (200, final_job.clone()),
        ("GET", "/api/storage/volumes") => (
            200,
            json!({"records": [{"uuid": "v1", "name": "storch_pvc_7c2d"}], "num_records": 1}),
        ),
        _ => error(404, "4", "no such path"),
    })
}

fn create_spec() -> storch::drivers::ontap::wire::VolumeCreate {
    storch::drivers::ontap::wire::VolumeCreate {
        name: "storch_pvc_7c2d".into(),
        aggregates: vec!["aggr_a".into()],
        size: 2147483648,
        space_reserve: "none".into(),
        snapshot_policy: "none".into(),
        snapshot_reserve: None,
        export_policy: Some("default".into()),
        unix_permissions: Some("---rwxr-xr-x".into()),
        security_style: "unix".into(),
        encrypt: false,
        comment: String::new(),
        junction_path: Some("/storch_pvc_7c2d".into()),
        snapdir: Some(false),
    }
}

#[tokio::test]
async fn a_volume_create_job_is_polled_to_success() {
    let c = canned(
        0,
        volume_create_server(json!({"uuid": "c0de-01", "state": "success"})),
    )
    .await;
    c.client(json!({}))
        .volume_create("svm1", &create_spec(), false)
        .await
        .unwrap();
    let seen = c.seen();
    let post = seen.iter().find(|s| s.method == "POST").unwrap();
    // The example of wire-protocols §5.10, with the junction and the snapshot directory
    // carried by the create itself.
    assert_eq!(
        post.body,
        json!({"name": "storch_pvc_7c2d", "svm": {"uuid": SVM_UUID},
            "aggregates": [{"name": "aggr_a"}], "size": 2147483648u64, "style": "flexvol",
            "state": "online", "guarantee": {"type": "none"}, "snapshot_policy": {"name": "none"},
            "comment": "", "snapshot_directory_access_enabled": false,
            "nas": {"security_style": "unix", "unix_permissions": 755,
                    "export_policy": {"name": "default"}, "path": "/storch_pvc_7c2d"}})
    );
    let polls: Vec<&Seen> = seen
        .iter()
        .filter(|s| s.path == "/api/cluster/jobs/c0de-01")
        .collect();
    assert_eq!(polls.len(), 2, "running, then success: {polls:?}");
    // Then the new volume is looked up until it shows.
    assert_eq!(seen.last().unwrap().path, "/api/storage/volumes");
    // And nothing is left to set afterwards.
    let before = c.seen().len();
    c.client(json!({}))
        .volume_create_finish("svm1", &create_spec(), false)
        .await
        .unwrap();
    assert_eq!(c.seen().len(), before, "no request after the create");
    assert!(c.seen().iter().all(|s| s.method != "PATCH"));
}

#[tokio::test]
async fn a_failed_job_is_an_error_with_its_code_and_message() {
    let failed = json!({"uuid": "c0de-01", "state": "failure", "code": 917526,
        "message": "Duplicate volume name storch_pvc_7c2d.", "description": "POST /api/storage/volumes"});
    let c = canned(0, volume_create_server(failed)).await;
    let e = c
        .client(json!({}))
        .volume_create("svm1", &create_spec(), false)
        .await
        .unwrap_err();
    assert_eq!(e.rest_code(), Some(917526), "{e}");
    assert!(e.to_string().contains("Duplicate volume name"), "{e}");
    assert!(e.is_duplicate());
    assert!(matches!(e.into_driver(), DriverError::AlreadyExists(_)));
    // The final state was read in full.
    assert!(
        c.seen()
            .iter()
            .any(|s| s.param("fields").as_deref() == Some("**"))
    );
}

#[tokio::test]
async fn error_bodies_map_to_the_driver_error_classes() {
    let c = canned(
        0,
        Box::new(|s, _| {
            let code = s.path.rsplit('/').next().unwrap_or_default().to_string();
            match code.as_str() {
                "917526" => error(409, "917526", "Duplicate volume name"),
                "4" => error(404, "4", "entry doesn't exist"),
                "524615" => error(409, "524615", "volume has clones"),
                "917534" => error(400, "917534", "size too small"),
                "524486" => error(409, "524486", "volume busy"),
                "space" => error(400, "917505", "Insufficient space in aggregate aggr_a"),
                "2621462" => error(404, "2621462", "SVM svm9 does not exist"),
                "3" => error(400, "3", "operation not supported"),
                "numeric" => (400, json!({"error": {"message": "m", "code": 5374023}})),
                "500" => (500, Value::String("plain failure".into())),
                _ => (405, Value::String("plain failure".into())),
            }
        }),
    )
    .await;
    let client = c.client(json!({}));
    let class = async |code: &str| {
        let e = client
            .get(&Req::new(format!("/x/{code}")))
            .await
            .unwrap_err();
        storch::drivers::testing::class_name(&e.into_driver())
    };
    assert_eq!(class("917526").await, "exists");
    assert_eq!(class("numeric").await, "exists");
    assert_eq!(class("4").await, "not_found");
    assert_eq!(class("524615").await, "conflict");
    assert_eq!(class("space").await, "conflict");
    assert_eq!(class("917534").await, "invalid");
    assert_eq!(class("2621462").await, "invalid");
    assert_eq!(class("3").await, "unsupported");
    assert_eq!(class("other").await, "other");
    assert_eq!(class("500").await, "unavailable");
    // A read is not retried on a busy answer; a change is, then reported as unavailable.
    assert_eq!(class("524486").await, "unavailable");
    let e = client
        .change_retrying_busy(reqwest::Method::DELETE, &Req::new("/x/524486"), None)
        .await
        .unwrap_err();
    assert!(e.into_driver().is_retryable());
    let busy = |method: &str| {
        c.seen()
            .iter()
            .filter(|s| s.path == "/api/x/524486" && s.method == method)
            .count()
    };
    assert_eq!(busy("GET"), 1);
    assert_eq!(busy("DELETE"), 3, "retried up to the policy's attempts");
}

/// Per-node publish over REST against answers shaped like §5.10's duplicate igroup: an igroup
/// that exists (5374023) is taken as made, an initiator already in it (5374035) as added, and
/// a map gets the number ONTAP picks (no `logical_unit_number` sent).
#[tokio::test]
async fn igroups_and_lun_maps_as_the_spec_shows() {
    let maps_read = Arc::new(AtomicUsize::new(0));
    let c = canned(
        0,
        Box::new(move |s, _| match (s.method.as_str(), s.path.as_str()) {
            ("GET", "/api/svm/svms") => svms(),
            ("GET", "/api/protocols/san/igroups") => (
                200,
                json!({"records": [{"uuid": "ig-3", "name": "storch-node-3"}], "num_records": 1}),
            ),
            ("POST", "/api/protocols/san/igroups") => error(
                409,
                "5374023",
                "An initiator group with that name already exists.",
            ),
            ("POST", "/api/protocols/san/igroups/ig-3/initiators") => {
                error(409, "5374035", "The initiator is already in the group.")
            }
            ("GET", "/api/protocols/san/lun-maps") => {
                if maps_read.fetch_add(1, Ordering::SeqCst) == 0 {
                    (200, json!({"records": [], "num_records": 0}))
                } else {
                    (
                        200,
                        json!({"records": [{"lun": {"name": "/vol/v/lun0", "uuid": "l-1"},
                        "igroup": {"name": "storch-node-3", "uuid": "ig-3"},
                        "logical_unit_number": 1}], "num_records": 1}),
                    )
                }
            }
            ("POST", "/api/protocols/san/lun-maps") => (
                201,
                json!({"num_records": 1, "records": [{"logical_unit_number": 1}]}),
            ),
            ("DELETE", "/api/protocols/san/lun-maps/l-1/ig-3") => {
                error(404, "5374922", "The LUN map does not exist.")
            }
            ("DELETE", "/api/protocols/san/igroups/ig-3") => {
                error(409, "1254213", "The initiator group is still mapped.")
            }
            _ => error(404, "4", "no such path"),
        }),
    )
    .await;
    let client = c.client(json!({}));
    let iqn = "iqn.1993-08.org.debian:01:node3";
    client
        .igroup_add("svm1", "storch-node-3", iqn)
        .await
        .unwrap();
    assert_eq!(
        client
            .lun_map("svm1", "/vol/v/lun0", "storch-node-3")
            .await
            .unwrap(),
        1
    );
    client
        .lun_unmap("svm1", "/vol/v/lun0", "storch-node-3")
        .await
        .unwrap();
    assert!(
        !client
            .igroup_destroy_unmapped("svm1", "storch-node-3")
            .await
            .unwrap(),
        "still mapped: left in place"
    );
    let seen = c.seen();
    let add = seen
        .iter()
        .find(|s| s.path.ends_with("/initiators"))
        .unwrap();
    assert_eq!(add.body, json!({"name": iqn}));
    let post = seen
        .iter()
        .find(|s| s.method == "POST" && s.path == "/api/protocols/san/lun-maps")
        .unwrap();
    assert_eq!(post.param("return_records").as_deref(), Some("true"));
    assert_eq!(post.body["igroup"]["name"], "storch-node-3");
    assert_eq!(post.body["lun"]["name"], "/vol/v/lun0");
    assert_eq!(post.body["svm"]["uuid"], SVM_UUID);
    assert!(post.body.get("logical_unit_number").is_none());

    // An igroup that is not there yet, and exists by the time of the POST: made.
    let c = canned(
        0,
        Box::new(|s, _| match (s.method.as_str(), s.path.as_str()) {
            ("GET", "/api/svm/svms") => svms(),
            ("GET", "/api/protocols/san/igroups") => {
                (200, json!({"records": [], "num_records": 0}))
            }
            ("POST", "/api/protocols/san/igroups") => error(
                409,
                "5374023",
                "An initiator group with that name already exists.",
            ),
            _ => error(404, "4", "no such path"),
        }),
    )
    .await;
    c.client(json!({}))
        .ensure_igroup("svm1", "storch-node-3")
        .await
        .unwrap();
    let post = c.seen().into_iter().find(|s| s.method == "POST").unwrap();
    assert_eq!(
        post.body,
        json!({"name": "storch-node-3", "protocol": "iscsi", "os_type": "linux",
               "svm": {"uuid": SVM_UUID}})
    );
}

#[tokio::test]
async fn unauthorized_and_forbidden() {
    let c = canned(
        0,
        Box::new(|s, _| match s.path.as_str() {
            "/api/storage/aggregates" => (
                403,
                json!({"error": {"message": "not authorized for that command", "code": "6"}}),
            ),
            _ => error(404, "4", "no such path"),
        }),
    )
    .await;
    let bad = c.client(json!({"password": "wrong"}));
    let e = bad.cluster_version().await.unwrap_err();
    assert_eq!(e, OntapError::Unauthorized);
    assert!(!e.to_string().contains("wrong"));
    let good = c.client(json!({}));
    let e = good
        .get(&Req::new("/storage/aggregates"))
        .await
        .unwrap_err();
    assert!(matches!(e, OntapError::Forbidden { .. }), "{e}");
    assert!(matches!(e.into_driver(), DriverError::Unsupported(_)));
    // A user who may not read aggregates still gets pools, without media.
    assert!(good.aggregate_kinds("svm1").await.unwrap().is_empty());
}

/// A cluster of the given version that serves the REST reads discovery makes; ZAPI is absent.
fn cluster(version: (u32, u32, u32)) -> Answer {
    Box::new(move |s, _| match s.path.as_str() {
        "/api/cluster" => (
            200,
            json!({"version": {"generation": version.0, "major": version.1, "minor": version.2,
                "full": format!("NetApp Release {}.{}.{}", version.0, version.1, version.2)}}),
        ),
        "/api/svm/svms" => svms(),
        p if p == format!("/api/svm/svms/{SVM_UUID}") => (
            200,
            json!({"uuid": SVM_UUID, "name": "svm1",
                "aggregates": [{"name": "aggr_b"}, {"name": "aggr_a"}]}),
        ),
        "/api/storage/aggregates" => (
            200,
            json!({"records": [
                {"name": "aggr_a", "block_storage": {"storage_type": "ssd"},
                 "space": {"block_storage": {"size": 1000, "used": 400}}},
                {"name": "aggr_b", "block_storage": {"storage_type": "hdd"},
                 "space": {"block_storage": {"size": 500, "used": 0}}}],
             "num_records": 2}),
        ),
        "/api/network/ip/interfaces" => (
            200,
            json!({"records": [
                {"ip": {"address": "10.0.0.9"}, "state": "down"},
                {"ip": {"address": "10.0.0.5"}, "state": "up"}], "num_records": 2}),
        ),
        "/api/storage/volumes" => (
            200,
            json!({"records": [], "num_records": 0, "_links": {"self": {"href": "/api/storage/volumes"}}}),
        ),
        _ => error(404, "4", "no such path"),
    })
}

#[tokio::test]
async fn use_rest_is_chosen_by_the_version_as_trident_chooses_it() {
    // 9.15.1 with useREST unset: REST, and discovery runs over it.
    let c = canned(0, cluster((9, 15, 1))).await;
    let drv = c.driver(json!({})).unwrap();
    let d = drv.discover().await.unwrap();
    assert_eq!(drv.chosen_api(), Some("rest"));
    assert_eq!(drv.external_config()["api"], "rest");
    let names: Vec<&str> = d.pools.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["aggr_a", "aggr_b"]);
    assert_eq!(d.free_bytes["aggr_a"], 600);
    assert_eq!(
        d.pools[0].offers["media"],
        storch::model::Offer::strings(["ssd"])
    );
    let lifs = c
        .seen()
        .into_iter()
        .find(|s| s.path == "/api/network/ip/interfaces")
        .unwrap();
    assert_eq!(lifs.param("services").as_deref(), Some("data_nfs"));
    assert_eq!(lifs.param("fields").as_deref(), Some("ip.address,state"));
    assert_eq!(
        StorageDriver::get(&drv, "nothing").await.unwrap(),
        None,
        "an empty lookup is 200 with no records"
    );

    // 9.14.1 unset: ZAPI (this server has none, so discovery fails after the choice).
    let c = canned(0, cluster((9, 14, 1))).await;
    let drv = c.driver(json!({})).unwrap();
    assert!(drv.discover().await.is_err());
    assert_eq!(drv.chosen_api(), Some("zapi"));
    // ... unless forced.
    let drv = c.driver(json!({"useREST": true})).unwrap();
    drv.discover().await.unwrap();
    assert_eq!(drv.chosen_api(), Some("rest"));
    assert_eq!(drv.external_config()["useREST"], true);
    // 9.16.1 forced to ZAPI.
    let c = canned(0, cluster((9, 16, 1))).await;
    let drv = c.driver(json!({"useREST": "false"})).unwrap();
    assert!(drv.discover().await.is_err());
    assert_eq!(drv.chosen_api(), Some("zapi"));

    // Refusals name the field.
    let c = canned(0, cluster((9, 11, 1))).await;
    let e = c
        .driver(json!({"useREST": true}))
        .unwrap()
        .discover()
        .await
        .unwrap_err();
    assert!(
        matches!(&e, DriverError::Invalid(m) if m.contains("useREST") && m.contains("9.11.1")),
        "{e}"
    );
    let c = canned(0, cluster((10, 0, 0))).await;
    let e = c
        .driver(json!({"useREST": false}))
        .unwrap()
        .discover()
        .await
        .unwrap_err();
    assert!(
        matches!(&e, DriverError::Invalid(m) if m.contains("useREST")),
        "{e}"
    );
    let e = c.driver(json!({"useREST": "perhaps"})).unwrap_err();
    assert!(
        matches!(&e, DriverError::Invalid(m) if m.contains("useREST")),
        "{e}"
    );
    let e = c.driver(json!({"maxConcurrentRequests": 0})).unwrap_err();
    assert!(
        matches!(&e, DriverError::Invalid(m) if m.contains("maxConcurrentRequests")),
        "{e}"
    );
    // No REST at all: ZAPI, unless useREST is true.
    let c = canned(0, Box::new(|_, _| error(404, "4", "no REST here"))).await;
    let e = c
        .driver(json!({"useREST": true}))
        .unwrap()
        .discover()
        .await
        .unwrap_err();
    assert!(
        matches!(&e, DriverError::Invalid(m) if m.contains("useREST")),
        "{e}"
    );
}

/// Fires `n` requests at once through clients of one LIF and returns the most the server had
/// in flight. The server holds every request until `hold` are in flight.
async fn in_flight_peak(extra: Value, hold: usize, n: usize) -> usize {
    let c = canned(hold, Box::new(|_, _| (200, json!({"uuid": "x"})))).await;
    let a = Arc::new(c.client(extra.clone()));
    let b = Arc::new(c.client(extra));
    let calls: Vec<_> = (0..n)
        .map(|i| {
            let client = if i % 2 == 0 { a.clone() } else { b.clone() };
            tokio::spawn(async move { client.get(&Req::new("/cluster")).await })
        })
        .collect();
    for call in calls {
        call.await.unwrap().unwrap();
    }
    assert_eq!(c.seen().len(), n);
    c.max_in_flight.load(Ordering::SeqCst)
}

#[tokio::test]
async fn at_most_twenty_requests_in_flight_per_lif() {
    // The server waits for 20 at once, so 20 are reached; the cap keeps it there.
    assert_eq!(in_flight_peak(json!({}), 20, 50).await, 20);
    assert_eq!(
        in_flight_peak(json!({"maxConcurrentRequests": 4}), 4, 30).await,
        4
    );
}

#[tokio::test]
async fn a_fallback_to_zapi_is_asked_again_at_the_next_discovery() {
    // REST does not answer the first probe (as during a restart of the management LIF).
    let rest = cluster((9, 15, 1));
    let probes = AtomicUsize::new(0);
    let c = canned(
        0,
        Box::new(move |s, n| {
            if s.path == "/api/cluster" && probes.fetch_add(1, Ordering::SeqCst) == 0 {
                return error(404, "4", "not yet");
            }
            rest(s, n)
        }),
    )
    .await;
    let drv = c.driver(json!({})).unwrap();
    assert!(drv.discover().await.is_err(), "no ZAPI on this array");
    assert_eq!(drv.chosen_api(), Some("zapi"));
    drv.discover().await.unwrap();
    assert_eq!(drv.chosen_api(), Some("rest"));
    // Once REST answered, the choice stands: no more probes.
    drv.discover().await.unwrap();
    let probes = c.seen().iter().filter(|s| s.path == "/api/cluster").count();
    // Probe 1 (refused), probe 2 and its discovery's version read, then only the version
    // read of the third discovery.
    assert_eq!(probes, 4);
}
