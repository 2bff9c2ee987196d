//! The eseries-iscsi driver against hand-written SANtricity Web Services answers (the wire
//! spec's shapes, values invented) served over TLS on 127.0.0.1, and the scripted server the
//! canned tests share: registration (new, known, with a changed array password), the array's
//! status, pools and their offers, host types, the host group (found or created), the iSCSI
//! portal of `hostDataIP`; 401, the wrong array password and an offline array; and the
//! certificate checks. Volume operations are in `canned_volumes`.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine;
use serde_json::{Value, json};
use storch::drivers::eseries::{EseriesDriver, eseries_internal_name};
use storch::drivers::{CommonConfig, DriverError, StorageDriver};
use storch::model::Offer;
use storch::net::RetryPolicy;
use storch::sim::http::{Handler, HttpResponse, SelfSigned, Server};

pub(super) const SYS: &str = "8f5e2c10-3a4b-4c5d-9e6f-0a1b2c3d4e5f";
pub(super) const POOL_A: &str = "04000000600A098000A4B28D00003E605F2E6C8A";
pub(super) const POOL_B: &str = "04000000600A098000A4B28D00003E615F2E6C8B";
pub(super) const POOL_X: &str = "04000000600A098000A4B28D00003E625F2E6C8C";
pub(super) const POOL_OFF: &str = "04000000600A098000A4B28D00003E635F2E6C8D";
pub(super) const GROUP: &str = "85000000600A098000A4B28D0000402F5F2E6D11";
pub(super) const HOST: &str = "84000000600A098000A4B28D000040315F2E6D22";
pub(super) const VOL: &str = "02000000600A098000A4B28D00004E7A5F2E7A01";
pub(super) const VOL2: &str = "02000000600A098000A4B28D00004E7B5F2E7A02";
pub(super) const MAP: &str = "88000000600A098000A4B28D00004E7C5F2E7A03";
pub(super) const IQN: &str = "iqn.1992-01.com.lsi:2365.60080e50001f6e4c000000005a6b7c8d";
pub(super) const GIB: u64 = 1 << 30;

pub(super) type Answer = (&'static str, String, u16, Value);

/// One request as the server saw it.
#[derive(Debug, Clone)]
pub(super) struct Seen {
    method: String,
    path: String,
    body: Value,
}

pub(super) struct Canned {
    server: Server,
    cert: SelfSigned,
    seen: Arc<Mutex<Vec<Seen>>>,
}

/// Answers per (method, path), in order; the last answer of a request repeats. Anything not
/// scripted is a 404 with a SANtricity body.
pub(super) async fn canned(answers: Vec<Answer>) -> Canned {
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

pub(super) fn error_body(message: &str, retcode: &str, code_type: &str) -> Value {
    json!({"errorMessage": message, "localizedMessage": message, "retcode": retcode,
        "codeType": code_type})
}

pub(super) fn p(rest: &str) -> String {
    format!("/devmgr/v2/storage-systems/{SYS}{rest}")
}

pub(super) fn backend(c: &Canned, extra: Value) -> Value {
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

pub(super) fn driver(c: &Canned, extra: Value) -> EseriesDriver {
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

pub(super) fn system(password_status: &str, status: &str) -> Value {
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

pub(super) fn pool(r: &str, label: &str, media: &str, free: u64, offline: bool) -> Value {
    json!({"volumeGroupRef": r, "id": r, "label": label, "name": label, "sequenceNum": 1,
        "offline": offline, "raidLevel": "raid6", "worldWideName": "600A098000A4B28D",
        "state": "complete", "raidStatus": "optimal", "securityType": "none",
        "drivePhysicalType": "sas", "driveMediaType": media, "diskPool": false,
        "protectionInformationCapable": false, "freeSpace": free.to_string(),
        "usedSpace": "0", "totalRaidedSpace": (4 * GIB * 1024).to_string(),
        "largestFreeExtentSize": free.to_string(),
        "volumeGroupData": {"type": "unknown", "diskPoolData": null}})
}

pub(super) fn pools() -> Value {
    json!([
        pool(POOL_A, "pool_a", "ssd", 100 * GIB, false),
        pool(POOL_B, "pool_b", "hdd", 50 * GIB, false),
        pool(POOL_X, "other", "ssd", 10 * GIB, false),
        pool(POOL_OFF, "pool_off", "ssd", 10 * GIB, true),
    ])
}

/// The fresh read of pool_a a create makes (100 GiB free).
pub(super) fn pool_a_read() -> Answer {
    let body = pool(POOL_A, "pool_a", "ssd", 100 * GIB, false);
    ("GET", p(&format!("/storage-pools/{POOL_A}")), 200, body)
}

pub(super) fn host_types() -> Value {
    json!([
        {"index": 0, "code": "FactoryDefault", "name": "Factory Default", "used": false},
        {"index": 10, "code": "W2KNETNCL", "name": "Windows", "used": false},
        {"index": 28, "code": "LnxALUA", "name": "Linux (ALUA)", "used": true},
    ])
}

pub(super) fn group() -> Value {
    json!({"clusterRef": GROUP, "id": GROUP, "label": "trident", "name": "trident",
        "isSAControlled": false, "confirmLUNMappingCreation": false, "protectionInformationCapableAccessMethod": true,
        "isLun0Restricted": false})
}

pub(super) fn target() -> Value {
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
pub(super) fn discovery() -> Vec<Answer> {
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

pub(super) fn with(mut answers: Vec<Answer>, more: Vec<Answer>) -> Vec<Answer> {
    answers.extend(more);
    answers
}

pub(super) fn ours(name: &str) -> Value {
    json!([{"key": "createdBy", "value": "storch"}, {"key": "storchName", "value": name}])
}

pub(super) fn mapping(volume: &str, lun: i32) -> Value {
    json!({"lunMappingRef": MAP, "lun": lun, "ssid": 1, "perms": 15, "volumeRef": volume,
        "type": "cluster", "mapRef": GROUP})
}

pub(super) fn vol(
    r: &str,
    label: &str,
    pool: &str,
    capacity: u64,
    tags: Value,
    mappings: Value,
) -> Value {
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

pub(super) fn seen(c: &Canned) -> Vec<Seen> {
    c.seen.lock().unwrap().clone()
}

pub(super) fn calls(c: &Canned) -> Vec<String> {
    seen(c)
        .iter()
        .map(|s| format!("{} {}", s.method, s.path.replace(&p(""), "")))
        .collect()
}

pub(super) fn bodies(c: &Canned, method: &str, path: &str) -> Vec<Value> {
    seen(c)
        .into_iter()
        .filter(|s| s.method == method && s.path == path)
        .map(|s| s.body)
        .collect()
}

pub(super) fn name(v: &str) -> String {
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
