//! The eseries-iscsi driver against hand-written SANtricity Web Services answers (the wire
//! spec's shapes, values invented) served over TLS on 127.0.0.1: registration (new, known,
//! with a changed array password), the array's status, pools and their offers, host types,
//! the host group (found or created), the iSCSI portal of `hostDataIP`; create, the proxy's
//! "422 but created" habit on create and on map, full pools and mapping conflicts, destroy
//! (unmap then delete, already gone), expand and volume copy where the array has them and a
//! refusal before any call where it has not; 401, the wrong array password and an offline
//! array; and the certificate checks.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine;
use serde_json::{Value, json};
use storch::drivers::eseries::{EseriesDriver, eseries_internal_name};
use storch::drivers::testing::{clone_req, req};
use storch::drivers::{CommonConfig, DriverError, StorageDriver};
use storch::model::Offer;
use storch::net::RetryPolicy;
use storch::sim::http::{Handler, HttpResponse, SelfSigned, Server};

const SYS: &str = "8f5e2c10-3a4b-4c5d-9e6f-0a1b2c3d4e5f";
const POOL_A: &str = "04000000600A098000A4B28D00003E605F2E6C8A";
const POOL_B: &str = "04000000600A098000A4B28D00003E615F2E6C8B";
const POOL_X: &str = "04000000600A098000A4B28D00003E625F2E6C8C";
const POOL_OFF: &str = "04000000600A098000A4B28D00003E635F2E6C8D";
const GROUP: &str = "85000000600A098000A4B28D0000402F5F2E6D11";
const HOST: &str = "84000000600A098000A4B28D000040315F2E6D22";
const VOL: &str = "02000000600A098000A4B28D00004E7A5F2E7A01";
const VOL2: &str = "02000000600A098000A4B28D00004E7B5F2E7A02";
const MAP: &str = "88000000600A098000A4B28D00004E7C5F2E7A03";
const IQN: &str = "iqn.1992-01.com.lsi:2365.60080e50001f6e4c000000005a6b7c8d";
const GIB: u64 = 1 << 30;

type Answer = (&'static str, String, u16, Value);

/// One request as the server saw it.
#[derive(Debug, Clone)]
struct Seen {
    method: String,
    path: String,
    body: Value,
}

struct Canned {
    server: Server,
    cert: SelfSigned,
    seen: Arc<Mutex<Vec<Seen>>>,
}

/// Answers per (method, path), in order; the last answer of a request repeats. Anything not
/// scripted is a 404 with a SANtricity body.
async fn canned(answers: Vec<Answer>) -> Canned {
    let cert = SelfSigned::generate(&[]).unwrap();
    let mut script: HashMap<(String, String), VecDeque<(u16, Value)>> = HashMap::new();
    for (method, path, status, body) in answers {
        script
            .entry((method.to_string(), path))
            .or_default()
            .push_back((status, body));
    }
    let script = Arc::new(Mutex::new(script));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let (s, r) = (script.clone(), seen.clone());
    let handler: Handler = Arc::new(move |req| {
        let (s, r) = (s.clone(), r.clone());
        Box::pin(async move {
            let expected = base64::engine::general_purpose::STANDARD.encode("rw:proxy-canary");
            assert_eq!(req.authorization, Some(format!("Basic {expected}")));
            let body = if req.body.is_empty() {
                Value::Null
            } else {
                serde_json::from_slice(&req.body).unwrap()
            };
            r.lock().unwrap().push(Seen {
                method: req.method.clone(),
                path: req.path.clone(),
                body,
            });
            let answer = s
                .lock()
                .unwrap()
                .get_mut(&(req.method.clone(), req.path.clone()))
                .and_then(|q| {
                    if q.len() > 1 {
                        q.pop_front()
                    } else {
                        q.front().cloned()
                    }
                });
            let (status, body) = answer.unwrap_or_else(|| {
                (
                    404,
                    error_body("The requested resource was not found", "", "webservice"),
                )
            });
            HttpResponse::new(status, "application/json", body.to_string())
        })
    });
    let server = Server::start(([127, 0, 0, 1], 0).into(), Some(&cert), handler)
        .await
        .unwrap();
    Canned { server, cert, seen }
}

fn error_body(message: &str, retcode: &str, code_type: &str) -> Value {
    json!({"errorMessage": message, "localizedMessage": message, "retcode": retcode,
        "codeType": code_type})
}

fn p(rest: &str) -> String {
    format!("/devmgr/v2/storage-systems/{SYS}{rest}")
}

fn backend(c: &Canned, extra: Value) -> Value {
    let mut doc = json!({
        "version": 1, "storageDriverName": "eseries-iscsi",
        "webProxyHostname": "127.0.0.1", "webProxyPort": c.server.local_addr().port().to_string(),
        "username": "rw", "password": "proxy-canary",
        "controllerA": "10.0.0.5", "controllerB": "10.0.0.6", "passwordArray": "array-canary",
        "hostDataIP": "10.0.0.101", "poolNameSearchPattern": "^pool_",
        "trustedCACertificate": c.cert.cert_pem,
    });
    for (k, v) in extra.as_object().unwrap() {
        if v.is_null() {
            doc.as_object_mut().unwrap().remove(k);
        } else {
            doc[k] = v.clone();
        }
    }
    doc
}

fn driver(c: &Canned, extra: Value) -> EseriesDriver {
    let doc = backend(c, extra);
    let common = CommonConfig::parse(&doc).unwrap();
    EseriesDriver::from_config(&doc, &common)
        .unwrap()
        .tune_client(RetryPolicy {
            max_attempts: 3,
            base_delay: Duration::from_millis(1),
            max_delay: Duration::from_millis(5),
        })
}

fn system(password_status: &str, status: &str) -> Value {
    json!({"id": SYS, "name": "array-1", "wwn": "60080E50001F6E4C000000005A6B7C8D",
        "passwordStatus": password_status, "passwordSet": true, "status": status,
        "ip1": "10.0.0.5", "ip2": "10.0.0.6", "managementPaths": ["10.0.0.5", "10.0.0.6"],
        "controllers": [], "driveCount": 24, "trayCount": 1, "traceEnabled": false,
        "types": "", "model": "2806", "metaTags": [], "hotSpareSize": "0",
        "usedPoolSpace": "4398046511104", "freePoolSpace": 8796093022208u64,
        "freePoolSpaceAsString": "8796093022208", "unconfiguredSpace": "0",
        "driveTypes": ["sas"], "hostSpareCountInStandby": 0, "hotSpareCount": 0,
        "hostSparesUsed": 0, "bootTime": "2026-11-30T10:00:00.000+0000",
        "fwVersion": "08.40.10.02", "appVersion": "08.40.10.02", "bootVersion": "08.40.10.02",
        "nvsramVersion": "N2806-840834-001", "chassisSerialNumber": "021633000000",
        "accessVolume": {}, "unconfiguredSpaceAsStrings": "0", "asupEnabled": false})
}

fn pool(r: &str, label: &str, media: &str, free: u64, offline: bool) -> Value {
    json!({"volumeGroupRef": r, "id": r, "label": label, "name": label, "sequenceNum": 1,
        "offline": offline, "raidLevel": "raid6", "worldWideName": "600A098000A4B28D",
        "state": "complete", "raidStatus": "optimal", "securityType": "none",
        "drivePhysicalType": "sas", "driveMediaType": media, "diskPool": false,
        "protectionInformationCapable": false, "freeSpace": free.to_string(),
        "usedSpace": "0", "totalRaidedSpace": (4 * GIB * 1024).to_string(),
        "largestFreeExtentSize": free.to_string(),
        "volumeGroupData": {"type": "unknown", "diskPoolData": null}})
}

fn pools() -> Value {
    json!([
        pool(POOL_A, "pool_a", "ssd", 100 * GIB, false),
        pool(POOL_B, "pool_b", "hdd", 50 * GIB, false),
        pool(POOL_X, "other", "ssd", 10 * GIB, false),
        pool(POOL_OFF, "pool_off", "ssd", 10 * GIB, true),
    ])
}

/// The fresh read of pool_a a create makes (100 GiB free).
fn pool_a_read() -> Answer {
    let body = pool(POOL_A, "pool_a", "ssd", 100 * GIB, false);
    ("GET", p(&format!("/storage-pools/{POOL_A}")), 200, body)
}

fn host_types() -> Value {
    json!([
        {"index": 0, "code": "FactoryDefault", "name": "Factory Default", "used": false},
        {"index": 10, "code": "W2KNETNCL", "name": "Windows", "used": false},
        {"index": 28, "code": "LnxALUA", "name": "Linux (ALUA)", "used": true},
    ])
}

fn group() -> Value {
    json!({"clusterRef": GROUP, "id": GROUP, "label": "trident", "name": "trident",
        "isSAControlled": false, "confirmLUNMappingCreation": false, "protectionInformationCapableAccessMethod": true,
        "isLun0Restricted": false})
}

fn target() -> Value {
    let portal = |ip: &str| {
        json!({"groupTag": 1, "ipAddress": {"addressType": "ipv4", "ipv4Address": ip},
            "tcpListenPort": 3260})
    };
    json!({"targetRef": "90000000600A098000A4B28D00004E7D5F2E7A04",
        "nodeName": {"ioInterfaceType": "iscsi", "iscsiNodeName": IQN, "remoteNodeWWN": null},
        "alias": {"ioInterfaceType": "iscsi", "iscsiAlias": "array-1"},
        "configuredAuthMethods": {"authMethodData": [{"authMethod": "none", "chapSecret": null}]},
        "portals": [portal("10.0.0.100"), portal("10.0.0.101")]})
}

/// The answers of a discovery against a known array whose host group exists.
fn discovery() -> Vec<Answer> {
    vec![
        (
            "POST",
            "/devmgr/v2/storage-systems".into(),
            201,
            json!({"id": SYS, "alreadyExists": false}),
        ),
        ("GET", p(""), 200, system("valid", "optimal")),
        ("GET", p("/storage-pools"), 200, pools()),
        ("GET", p("/host-types"), 200, host_types()),
        ("GET", p("/host-groups"), 200, json!([group()])),
        (
            "GET",
            p("/hosts"),
            200,
            json!([{"hostRef": HOST, "clusterRef": GROUP, "label": "node1", "hostTypeIndex": 28,
                "isSAControlled": false, "initiators": [], "hostSidePorts": [
                    {"type": "iscsi", "address": "iqn.1993-08.org.debian:01:node1", "label": "node1"}]}]),
        ),
        ("GET", p("/iscsi/target-settings"), 200, target()),
        ("GET", p("/volume-copy-jobs"), 200, json!([])),
    ]
}

fn with(mut answers: Vec<Answer>, more: Vec<Answer>) -> Vec<Answer> {
    answers.extend(more);
    answers
}

fn ours(name: &str) -> Value {
    json!([{"key": "createdBy", "value": "storch"}, {"key": "storchName", "value": name}])
}

fn mapping(volume: &str, lun: i32) -> Value {
    json!({"lunMappingRef": MAP, "lun": lun, "ssid": 1, "perms": 15, "volumeRef": volume,
        "type": "cluster", "mapRef": GROUP})
}

fn vol(r: &str, label: &str, pool: &str, capacity: u64, tags: Value, mappings: Value) -> Value {
    let mapped = mappings.as_array().is_some_and(|m| !m.is_empty());
    json!({"volumeRef": r, "id": r, "label": label, "name": label,
        "worldWideName": "600A098000A4B28D00004E7A5F2E7A01", "wwn": "600A098000A4B28D00004E7A5F2E7A01",
        "capacity": capacity.to_string(), "totalSizeInBytes": capacity.to_string(),
        "segmentSize": 131072, "volumeGroupRef": pool, "raidLevel": "raid6", "blkSize": 512,
        "status": "optimal", "offline": false, "mapped": mapped, "listOfMappings": mappings,
        "metadata": tags, "action": "none", "preferredControllerId": "070000000000000000000001",
        "currentManager": "070000000000000000000001", "dataAssurance": false,
        "thinProvisioned": false, "objectType": "volume", "perms": {"mapToLUN": true},
        "cache": {"readCacheEnable": true, "writeCacheEnable": true}})
}

fn seen(c: &Canned) -> Vec<Seen> {
    c.seen.lock().unwrap().clone()
}

fn calls(c: &Canned) -> Vec<String> {
    seen(c)
        .iter()
        .map(|s| format!("{} {}", s.method, s.path.replace(&p(""), "")))
        .collect()
}

fn bodies(c: &Canned, method: &str, path: &str) -> Vec<Value> {
    seen(c)
        .into_iter()
        .filter(|s| s.method == method && s.path == path)
        .map(|s| s.body)
        .collect()
}

fn name(v: &str) -> String {
    eseries_internal_name("trident_", v)
}

#[tokio::test]
async fn discovery_registers_the_array_and_offers_tridents_pools() {
    let mut answers = discovery();
    answers[4] = ("GET", p("/host-groups"), 200, json!([]));
    answers.push(("POST", p("/host-groups"), 201, group()));
    let c = canned(answers).await;
    let d = driver(&c, json!({}));
    let disc = d.discover().await.unwrap();
    assert_eq!(disc.backend_name, "eseries_10.0.0.101");
    let names: Vec<&str> = disc.pools.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(
        names,
        ["pool_a", "pool_b"],
        "matching and online pools only"
    );
    assert_eq!(disc.pools[0].offers["media"], Offer::strings(["ssd"]));
    assert_eq!(disc.pools[1].offers["media"], Offer::strings(["hdd"]));
    assert_eq!(disc.pools[0].offers["clones"], Offer::Bool(false));
    assert_eq!(
        disc.pools[0].offers["provisioningType"],
        Offer::strings(["thick"])
    );
    assert_eq!(disc.free_bytes["pool_a"], 100 * GIB);
    assert_eq!(disc.free_bytes["pool_b"], 50 * GIB);
    assert_eq!(
        bodies(&c, "POST", "/devmgr/v2/storage-systems"),
        [json!({"controllerAddresses": ["10.0.0.5", "10.0.0.6"], "password": "array-canary"})]
    );
    assert_eq!(
        bodies(&c, "POST", &p("/host-groups")),
        [json!({"name": "trident", "hosts": []})],
        "the missing host group is created"
    );
    let ext = d.external_config();
    assert_eq!(ext["serialNumbers"], json!(["021633000000"]));
    assert_eq!(ext["HostDataIP"], "10.0.0.101");
    assert!(!ext.to_string().contains("canary"));
}

#[tokio::test]
async fn a_known_array_with_a_changed_password_gets_the_new_one() {
    let mut answers = discovery();
    answers[0].2 = 200;
    answers[0].3 = json!({"id": SYS, "alreadyExists": true});
    answers[1] = ("GET", p(""), 200, system("invalid", "optimal"));
    answers.insert(2, ("GET", p(""), 200, system("valid", "optimal")));
    answers.push(("POST", p(""), 200, system("valid", "optimal")));
    let c = canned(answers).await;
    let d = driver(&c, json!({}));
    d.discover().await.unwrap();
    assert_eq!(
        bodies(&c, "POST", &p("")),
        [json!({"storedPassword": "array-canary"})]
    );
}

#[tokio::test]
async fn a_wrong_array_password_is_named() {
    // Refused at registration: 422 with SYMbol's authFailPassword.
    let c = canned(vec![(
        "POST",
        "/devmgr/v2/storage-systems".into(),
        422,
        error_body("The password is invalid", "authFailPassword", "symbol"),
    )])
    .await;
    match driver(&c, json!({})).discover().await {
        Err(DriverError::Invalid(m)) => {
            assert!(
                m.contains("passwordArray") && m.contains("The password is invalid"),
                "{m}"
            );
            assert!(!m.contains("canary"), "{m}");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(calls(&c).len(), 1, "not retried");
    // Still invalid after the proxy got the configured one.
    let mut answers = discovery();
    answers[1] = ("GET", p(""), 200, system("invalid", "optimal"));
    answers.push(("POST", p(""), 200, json!({})));
    let c = canned(answers).await;
    match driver(&c, json!({})).discover().await {
        Err(DriverError::Invalid(m)) => assert!(m.contains("rejects passwordArray"), "{m}"),
        other => panic!("{other:?}"),
    }
    // No password configured for an array that needs one.
    let c = canned(vec![
        (
            "POST",
            "/devmgr/v2/storage-systems".into(),
            200,
            json!({"id": SYS, "alreadyExists": true}),
        ),
        ("GET", p(""), 200, system("invalid", "optimal")),
    ])
    .await;
    match driver(&c, json!({"passwordArray": null})).discover().await {
        Err(DriverError::Invalid(m)) => assert!(m.contains("set passwordArray"), "{m}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        bodies(&c, "POST", "/devmgr/v2/storage-systems"),
        [json!({"controllerAddresses": ["10.0.0.5", "10.0.0.6"]})]
    );
}

#[tokio::test]
async fn wrong_proxy_credentials_are_invalid_and_not_retried() {
    let c = canned(vec![(
        "POST",
        "/devmgr/v2/storage-systems".into(),
        401,
        json!({}),
    )])
    .await;
    match driver(&c, json!({})).discover().await {
        Err(DriverError::Invalid(m)) => {
            assert!(
                m.contains("401") && m.contains("username and password"),
                "{m}"
            );
            assert!(!m.contains("canary"), "{m}");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(calls(&c).len(), 1);
}

#[tokio::test]
async fn an_offline_array_is_unavailable() {
    // The proxy answers 424 while it cannot reach the array: reads are retried, then the
    // error is of the retryable class.
    let mut answers = discovery();
    answers[2] = (
        "GET",
        p("/storage-pools"),
        424,
        error_body("The storage-system is offline", "", "webservice"),
    );
    let c = canned(answers).await;
    match driver(&c, json!({})).discover().await {
        Err(e @ DriverError::Unavailable(_)) => {
            assert!(e.is_retryable());
            assert!(e.to_string().contains("storage-system is offline"), "{e}");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(bodies(&c, "GET", &p("/storage-pools")).len(), 3, "retried");
    // The system's own status says so too.
    let mut answers = discovery();
    answers[1] = ("GET", p(""), 200, system("valid", "neverContacted"));
    let c = canned(answers).await;
    match driver(&c, json!({})).discover().await {
        Err(DriverError::Unavailable(m)) => assert!(m.contains("neverContacted"), "{m}"),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn discovery_errors_name_the_field() {
    let c = canned(discovery()).await;
    for (extra, field) in [
        (
            json!({"poolNameSearchPattern": "^gold"}),
            "poolNameSearchPattern",
        ),
        (json!({"hostDataIP": "10.0.0.77"}), "hostDataIP"),
        (json!({"hostType": "vmware"}), "hostType"),
    ] {
        match driver(&c, extra.clone()).discover().await {
            Err(DriverError::Invalid(m)) => assert!(m.contains(field), "{extra}: {m}"),
            other => panic!("{extra}: {other:?}"),
        }
    }
    match driver(&c, json!({"poolNameSearchPattern": "^gold"}))
        .discover()
        .await
    {
        Err(DriverError::Invalid(m)) => {
            assert!(
                m.contains("(pools: pool_a, pool_b, other, pool_off)"),
                "{m}"
            )
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn create_sends_kib_segment_size_and_tags_then_maps_to_the_group() {
    let n = name("pvc-1");
    let c = canned(with(
        discovery(),
        vec![
            ("GET", p("/volumes"), 200, json!([])),
            pool_a_read(),
            (
                "POST",
                p("/volumes"),
                200,
                vol(VOL, &n, POOL_A, GIB, ours("pvc-1"), json!([])),
            ),
            ("POST", p("/volume-mappings"), 200, mapping(VOL, 7)),
        ],
    ))
    .await;
    let d = driver(&c, json!({}));
    let mut r = req(&n, "pool_a", GIB);
    r.config.name = "pvc-1".into();
    r.config.file_system = "xfs".into();
    let info = d.create(&r).await.unwrap();
    assert_eq!(info.internal_name, n);
    assert_eq!(info.pool, "pool_a");
    assert_eq!(info.size_bytes, GIB);
    assert_eq!(info.access.iscsi_target_iqn, IQN);
    assert_eq!(info.access.iscsi_target_portal, "10.0.0.101:3260");
    assert_eq!(info.access.iscsi_lun_number, 7, "the LUN the array chose");
    assert_eq!(
        bodies(&c, "POST", &p("/volumes")),
        [
            json!({"poolId": POOL_A, "name": n, "sizeUnit": "kb", "size": 1048576, "segSize": 128,
            "metaTags": [{"key": "createdBy", "value": "storch"},
                {"key": "storchName", "value": "pvc-1"}, {"key": "fstype", "value": "xfs"}]})
        ]
    );
    assert_eq!(
        bodies(&c, "POST", &p("/volume-mappings")),
        [json!({"mappableObjectId": VOL, "targetId": GROUP})],
        "no LUN: the array picks"
    );
}

#[tokio::test]
async fn a_422_create_that_made_the_volume_with_our_tags_is_adopted() {
    let n = name("pvc-2");
    let made = vol(VOL, &n, POOL_A, GIB, ours(&n), json!([]));
    let c = canned(with(
        discovery(),
        vec![
            ("GET", p("/volumes"), 200, json!([])),
            ("GET", p("/volumes"), 200, json!([made.clone()])),
            pool_a_read(),
            (
                "POST",
                p("/volumes"),
                422,
                error_body("An error occurred", "error", "symbol"),
            ),
            // The mapping answers 422 too, and was made.
            (
                "POST",
                p("/volume-mappings"),
                422,
                error_body("An error occurred", "error", "symbol"),
            ),
            (
                "GET",
                p(&format!("/volumes/{VOL}")),
                200,
                vol(VOL, &n, POOL_A, GIB, ours(&n), json!([mapping(VOL, 3)])),
            ),
        ],
    ))
    .await;
    let d = driver(&c, json!({}));
    let info = d.create(&req(&n, "pool_a", GIB)).await.unwrap();
    assert_eq!(info.access.iscsi_lun_number, 3);
    assert!(
        !calls(&c).iter().any(|c| c.starts_with("DELETE")),
        "{:?}",
        calls(&c)
    );
}

#[tokio::test]
async fn a_422_create_without_our_tags_is_reported_and_nothing_is_touched() {
    let n = name("pvc-3");
    let theirs = vol(
        VOL,
        &n,
        POOL_A,
        GIB,
        json!([{"key": "createdBy", "value": "storch"}]),
        json!([]),
    );
    let c = canned(with(
        discovery(),
        vec![
            ("GET", p("/volumes"), 200, json!([])),
            ("GET", p("/volumes"), 200, json!([theirs])),
            pool_a_read(),
            (
                "POST",
                p("/volumes"),
                422,
                error_body("The operation failed", "error", "symbol"),
            ),
        ],
    ))
    .await;
    let d = driver(&c, json!({}));
    match d.create(&req(&n, "pool_a", GIB)).await {
        Err(e) => assert!(
            e.to_string().contains("422") && e.to_string().contains("The operation failed"),
            "{e}"
        ),
        other => panic!("{other:?}"),
    }
    let calls = calls(&c);
    assert!(
        !calls
            .iter()
            .any(|c| c.starts_with("DELETE") || c.contains("volume-mappings")),
        "{calls:?}"
    );
}

#[tokio::test]
async fn a_full_pool_is_a_conflict_before_any_create() {
    let n = name("pvc-4");
    let c = canned(with(
        discovery(),
        vec![
            ("GET", p("/volumes"), 200, json!([])),
            (
                "GET",
                p(&format!("/storage-pools/{POOL_B}")),
                200,
                pool(POOL_B, "pool_b", "hdd", GIB - 1, false),
            ),
        ],
    ))
    .await;
    let d = driver(&c, json!({}));
    match d.create(&req(&n, "pool_b", GIB)).await {
        Err(DriverError::Conflict(m)) => assert!(m.contains("pool_b") && m.contains("free"), "{m}"),
        other => panic!("{other:?}"),
    }
    assert!(bodies(&c, "POST", &p("/volumes")).is_empty());
    // Below the minimum, a bad filesystem, an unknown pool: refused before any call.
    let before = calls(&c).len();
    for (r, want) in [
        (req(&n, "pool_b", (1 << 20) - 1), "minimum"),
        (
            {
                let mut r = req(&n, "pool_b", GIB);
                r.config.file_system = "ntfs".into();
                r
            },
            "fileSystem",
        ),
        (req(&n, "other", GIB), "not a pool of this backend"),
        (
            req("a-name-that-is-longer-than-thirty", "pool_b", GIB),
            "30",
        ),
    ] {
        match d.create(&r).await {
            Err(DriverError::Invalid(m)) => assert!(m.contains(want), "{m}"),
            other => panic!("{want}: {other:?}"),
        }
    }
    assert_eq!(calls(&c).len(), before);
}

#[tokio::test]
async fn a_mapping_conflict_is_reported_and_the_new_volume_removed() {
    let n = name("pvc-5");
    let c = canned(with(
        discovery(),
        vec![
            ("GET", p("/volumes"), 200, json!([])),
            pool_a_read(),
            (
                "POST",
                p("/volumes"),
                200,
                vol(VOL, &n, POOL_A, GIB, ours(&n), json!([])),
            ),
            (
                "POST",
                p("/volume-mappings"),
                422,
                error_body("The LUN is already in use", "lunInUse", "symbol"),
            ),
            (
                "GET",
                p(&format!("/volumes/{VOL}")),
                200,
                vol(VOL, &n, POOL_A, GIB, ours(&n), json!([])),
            ),
            ("DELETE", p(&format!("/volumes/{VOL}")), 204, Value::Null),
        ],
    ))
    .await;
    let d = driver(&c, json!({}));
    match d.create(&req(&n, "pool_a", GIB)).await {
        Err(DriverError::Conflict(m)) => assert!(m.contains("LUN is already in use"), "{m}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        bodies(&c, "DELETE", &p(&format!("/volumes/{VOL}"))).len(),
        1
    );
}

#[tokio::test]
async fn existing_names_are_refused_and_adopted_only_when_ours_as_planned() {
    let n = name("pvc-6");
    let as_planned = vol(
        VOL,
        &n,
        POOL_A,
        GIB,
        ours("pvc-6"),
        json!([mapping(VOL, 2)]),
    );
    let otherwise = vol(
        VOL,
        &n,
        POOL_B,
        GIB,
        ours("pvc-6"),
        json!([mapping(VOL, 2)]),
    );
    let theirs = vol(VOL, &n, POOL_A, GIB, json!([]), json!([]));
    let c = canned(with(
        discovery(),
        vec![
            ("GET", p("/volumes"), 200, json!([as_planned])),
            ("GET", p("/volumes"), 200, json!([otherwise])),
            ("GET", p("/volumes"), 200, json!([theirs])),
        ],
    ))
    .await;
    let d = driver(&c, json!({}));
    match d.create(&req(&n, "pool_a", GIB)).await {
        Err(DriverError::AlreadyExists(m)) => assert!(m.contains("as planned"), "{m}"),
        other => panic!("{other:?}"),
    }
    match d.create(&req(&n, "pool_a", GIB)).await {
        Err(DriverError::Conflict(m)) => assert!(m.contains("not adopted"), "{m}"),
        other => panic!("{other:?}"),
    }
    match d.create(&req(&n, "pool_a", GIB)).await {
        Err(DriverError::AlreadyExists(m)) => assert!(m.contains("did not make"), "{m}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(d.get(&n).await.unwrap(), None, "never adopted");
    d.destroy(&n).await.unwrap();
    let calls = calls(&c);
    assert!(
        !calls
            .iter()
            .any(|c| c.starts_with("POST /volumes") || c.starts_with("DELETE")),
        "{calls:?}"
    );
}

#[tokio::test]
async fn destroy_unmaps_then_deletes_and_gone_is_deleted() {
    let (a, b) = (name("pvc-7"), name("pvc-8"));
    let c = canned(with(
        discovery(),
        vec![
            (
                "GET",
                p("/volumes"),
                200,
                json!([vol(
                    VOL,
                    &a,
                    POOL_A,
                    GIB,
                    ours("pvc-7"),
                    json!([mapping(VOL, 4)])
                )]),
            ),
            (
                "GET",
                p("/volumes"),
                200,
                json!([vol(VOL2, &b, POOL_A, GIB, ours("pvc-8"), json!([]))]),
            ),
            ("GET", p("/volumes"), 200, json!([])),
            (
                "DELETE",
                p(&format!("/volume-mappings/{MAP}")),
                204,
                Value::Null,
            ),
            ("DELETE", p(&format!("/volumes/{VOL}")), 200, json!({})),
            // Answered 422 and gone: deleted.
            (
                "DELETE",
                p(&format!("/volumes/{VOL2}")),
                422,
                error_body("An error occurred", "error", "symbol"),
            ),
            (
                "GET",
                p(&format!("/volumes/{VOL2}")),
                404,
                error_body("Volume not found", "", "webservice"),
            ),
        ],
    ))
    .await;
    let d = driver(&c, json!({}));
    d.destroy(&a).await.unwrap();
    d.destroy(&b).await.unwrap();
    d.destroy(&name("never-there")).await.unwrap();
    let deletes: Vec<String> = calls(&c)
        .into_iter()
        .filter(|c| c.starts_with("DELETE"))
        .collect();
    assert_eq!(
        deletes,
        [
            format!("DELETE /volume-mappings/{MAP}"),
            format!("DELETE /volumes/{VOL}"),
            format!("DELETE /volumes/{VOL2}"),
        ]
    );
}

#[tokio::test]
async fn a_422_delete_of_a_volume_still_there_is_reported() {
    let a = name("pvc-9");
    let v = vol(VOL, &a, POOL_A, GIB, ours("pvc-9"), json!([]));
    let c = canned(with(
        discovery(),
        vec![
            ("GET", p("/volumes"), 200, json!([v.clone()])),
            (
                "DELETE",
                p(&format!("/volumes/{VOL}")),
                422,
                error_body("The volume is busy with a copy", "volumeInUse", "symbol"),
            ),
            ("GET", p(&format!("/volumes/{VOL}")), 200, v),
        ],
    ))
    .await;
    match driver(&c, json!({})).destroy(&a).await {
        Err(DriverError::Conflict(m)) => assert!(m.contains("busy with a copy"), "{m}"),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn expand_where_the_array_can_and_a_refusal_where_it_cannot() {
    let a = name("pvc-10");
    let v = vol(
        VOL,
        &a,
        POOL_A,
        GIB,
        ours("pvc-10"),
        json!([mapping(VOL, 1)]),
    );
    let expand = p(&format!("/volumes/{VOL}/expand"));
    let c = canned(with(
        discovery(),
        vec![
            ("GET", p("/volumes"), 200, json!([v])),
            (
                "GET",
                expand.clone(),
                200,
                json!({"percentComplete": 100, "timeToCompletion": 0, "action": "none"}),
            ),
            (
                "GET",
                expand.clone(),
                200,
                json!({"percentComplete": 40, "timeToCompletion": 5, "action": "initializing"}),
            ),
            (
                "GET",
                expand.clone(),
                200,
                json!({"percentComplete": 100, "timeToCompletion": 0, "action": "none"}),
            ),
            pool_a_read(),
            ("POST", expand.clone(), 200, json!({})),
            (
                "GET",
                p(&format!("/volumes/{VOL}")),
                200,
                vol(
                    VOL,
                    &a,
                    POOL_A,
                    2 * GIB,
                    ours("pvc-10"),
                    json!([mapping(VOL, 1)]),
                ),
            ),
        ],
    ))
    .await;
    let d = driver(&c, json!({}));
    d.resize(&a, 2 * GIB).await.unwrap();
    assert_eq!(
        bodies(&c, "POST", &expand),
        [json!({"expansionSize": 2 * 1048576, "sizeUnit": "kb"})]
    );
    assert_eq!(
        bodies(&c, "GET", &expand).len(),
        3,
        "waited for the expansion to end"
    );
    match d.resize(&a, GIB / 2).await {
        Err(DriverError::Invalid(m)) => assert!(m.contains("shrink"), "{m}"),
        other => panic!("{other:?}"),
    }
    // The size asked for before the array rounded it up to a KiB: nothing to do.
    d.resize(&a, GIB - 512).await.unwrap();
    assert_eq!(bodies(&c, "POST", &expand).len(), 1);
    match d.resize(&name("missing"), 2 * GIB).await {
        Err(DriverError::NotFound(_)) => {}
        other => panic!("{other:?}"),
    }

    // An array without expansion: refused before any change.
    let v = vol(
        VOL,
        &a,
        POOL_A,
        GIB,
        ours("pvc-10"),
        json!([mapping(VOL, 1)]),
    );
    let c = canned(with(
        discovery(),
        vec![("GET", p("/volumes"), 200, json!([v]))],
    ))
    .await;
    match driver(&c, json!({})).resize(&a, 2 * GIB).await {
        Err(DriverError::Unsupported(m)) => {
            assert!(m.contains("not supported by this array"), "{m}")
        }
        other => panic!("{other:?}"),
    }
    assert!(
        !calls(&c)
            .iter()
            .any(|c| c.starts_with("POST") && c.contains("expand"))
    );
}

#[tokio::test]
async fn clones_run_a_volume_copy_job_where_the_array_can() {
    let (src, copy) = (name("src"), name("copy"));
    let source = vol(
        VOL,
        &src,
        POOL_A,
        GIB,
        ours("src"),
        json!([mapping(VOL, 1)]),
    );
    let mut target_tags = ours(&copy);
    target_tags
        .as_array_mut()
        .unwrap()
        .push(json!({"key": "storchCloneSource", "value": src}));
    let target = vol(VOL2, &copy, POOL_A, GIB, target_tags.clone(), json!([]));
    let job = |status: &str| {
        json!({"volcopyRef": "18000000600A098000A4B28D00004E7E5F2E7A05", "status": status,
            "sourceVolume": VOL, "targetVolume": VOL2, "copyPriority": "priority2",
            "copyStartTime": "1764640000", "copyCompleteTime": "0"})
    };
    let job_path = p("/volume-copy-jobs/18000000600A098000A4B28D00004E7E5F2E7A05");
    let c = canned(with(
        discovery(),
        vec![
            ("GET", p("/volumes"), 200, json!([source.clone()])),
            pool_a_read(),
            ("POST", p("/volumes"), 200, target.clone()),
            ("POST", p("/volume-copy-jobs"), 200, job("inProgress")),
            ("GET", job_path.clone(), 200, job("inProgress")),
            ("GET", job_path.clone(), 200, job("complete")),
            ("DELETE", job_path.clone(), 204, Value::Null),
            ("GET", p(&format!("/volumes/{VOL2}")), 200, target),
            ("POST", p("/volume-mappings"), 200, mapping(VOL2, 5)),
        ],
    ))
    .await;
    let d = driver(&c, json!({}));
    let info = d.clone_volume(&clone_req(&copy, &src, None)).await.unwrap();
    assert_eq!(info.internal_name, copy);
    assert_eq!(info.pool, "pool_a");
    assert_eq!(info.access.iscsi_lun_number, 5);
    assert_eq!(
        bodies(&c, "POST", &p("/volume-copy-jobs")),
        [
            json!({"sourceId": VOL, "targetId": VOL2, "copyPriority": "priority2",
            "targetWriteProtected": false, "onlineCopy": false})
        ]
    );
    let create = &bodies(&c, "POST", &p("/volumes"))[0];
    assert_eq!(create["size"], 1048576);
    assert_eq!(create["metaTags"], target_tags);
    assert_eq!(
        bodies(&c, "DELETE", &job_path).len(),
        1,
        "the finished job is removed"
    );
    match d.clone_volume(&clone_req(&copy, &src, Some("snap"))).await {
        Err(DriverError::Unsupported(m)) => assert!(m.contains("snapshots"), "{m}"),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn a_failed_copy_removes_the_clone_and_an_unable_array_refuses_first() {
    let (src, copy) = (name("src"), name("copy"));
    let source = vol(VOL, &src, POOL_A, GIB, ours("src"), json!([]));
    let c = canned(with(
        discovery(),
        vec![
            ("GET", p("/volumes"), 200, json!([source.clone()])),
            pool_a_read(),
            (
                "POST",
                p("/volumes"),
                200,
                vol(VOL2, &copy, POOL_A, GIB, ours(&copy), json!([])),
            ),
            (
                "POST",
                p("/volume-copy-jobs"),
                200,
                json!({"volcopyRef": "18AA", "status": "inProgress"}),
            ),
            (
                "GET",
                p("/volume-copy-jobs/18AA"),
                200,
                json!({"volcopyRef": "18AA", "status": "failed"}),
            ),
            ("DELETE", p("/volume-copy-jobs/18AA"), 204, Value::Null),
            ("DELETE", p(&format!("/volumes/{VOL2}")), 204, Value::Null),
        ],
    ))
    .await;
    match driver(&c, json!({}))
        .clone_volume(&clone_req(&copy, &src, None))
        .await
    {
        Err(DriverError::Other(m)) => assert!(m.contains("failed"), "{m}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        bodies(&c, "DELETE", &p(&format!("/volumes/{VOL2}"))).len(),
        1
    );
    assert!(bodies(&c, "POST", &p("/volume-mappings")).is_empty());

    // No copy jobs on this array (404): refused before any call after discovery.
    let mut answers = discovery();
    answers.pop();
    let c = canned(answers).await;
    let d = driver(&c, json!({}));
    d.discover().await.unwrap();
    let before = calls(&c).len();
    match d.clone_volume(&clone_req(&copy, &src, None)).await {
        Err(DriverError::Unsupported(m)) => {
            assert!(m.contains("not supported by this array"), "{m}")
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(calls(&c).len(), before);
}

#[tokio::test]
async fn snapshots_are_trident_s_none() {
    let a = name("pvc-11");
    let c = canned(with(
        discovery(),
        vec![(
            "GET",
            p("/volumes"),
            200,
            json!([vol(
                VOL,
                &a,
                POOL_A,
                GIB,
                ours("pvc-11"),
                json!([mapping(VOL, 1)])
            )]),
        )],
    ))
    .await;
    let d = driver(&c, json!({}));
    assert!(d.list_snapshots(&a).await.unwrap().is_empty());
    assert!(matches!(
        d.create_snapshot(&a, "s").await,
        Err(DriverError::Unsupported(_))
    ));
    assert!(matches!(
        d.list_snapshots(&name("missing")).await,
        Err(DriverError::NotFound(_))
    ));
    d.delete_snapshot(&a, "s").await.unwrap();
    let listed = d.list_volumes().await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].access.iscsi_lun_number, 1);
}

#[tokio::test]
async fn the_proxy_certificate_is_checked_when_asked() {
    let c = canned(discovery()).await;
    // Trident's default (nothing said): not checked.
    driver(&c, json!({"trustedCACertificate": null}))
        .discover()
        .await
        .unwrap();
    // Asked to verify against the system roots: a self-signed proxy is refused, clearly.
    match driver(
        &c,
        json!({"trustedCACertificate": null, "webProxyVerifyTLS": true}),
    )
    .discover()
    .await
    {
        Err(DriverError::Invalid(m)) => assert!(m.contains("trustedCACertificate"), "{m}"),
        other => panic!("{other:?}"),
    }
    // Trusting the proxy's certificate: verified.
    driver(&c, json!({"webProxyVerifyTLS": true}))
        .discover()
        .await
        .unwrap();
}
