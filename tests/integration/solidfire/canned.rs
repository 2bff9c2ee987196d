//! The solidfire-san driver against hand-written Element answers (the wire spec's examples
//! and real-shaped results) served over TLS on 127.0.0.1: discovery with an unknown tenant,
//! create with QoS and access groups, paging, async clone polling, error names mapped to
//! classes, HTTP 401, the busy class retried, and deletes that never touch volumes storch did
//! not make.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use storch::drivers::solidfire::SolidFireDriver;
use storch::drivers::testing::{clone_req, req};
use storch::drivers::{CommonConfig, DriverError, StorageDriver};
use storch::model::Offer;
use storch::net::RetryPolicy;
use storch::sim::http::{Handler, HttpResponse, SelfSigned, Server};

/// Answers per method, in order; the last answer of a method repeats.
type Script = HashMap<&'static str, VecDeque<(u16, Value)>>;

pub(super) struct Canned {
    server: Server,
    cert: SelfSigned,
    /// (method, params) of every request.
    requests: Arc<Mutex<Vec<(String, Value)>>>,
}

pub(super) async fn canned(answers: Vec<(&'static str, u16, Value)>) -> Canned {
    let cert = SelfSigned::generate(&[]).unwrap();
    let mut script: Script = HashMap::new();
    for (m, status, body) in answers {
        script.entry(m).or_default().push_back((status, body));
    }
    let script = Arc::new(Mutex::new(script));
    let requests = Arc::new(Mutex::new(Vec::new()));
    let (s, r) = (script.clone(), requests.clone());
    let handler: Handler = Arc::new(move |req| {
        let (s, r) = (s.clone(), r.clone());
        Box::pin(async move {
            assert_eq!(req.method, "POST");
            assert_eq!(req.path, "/json-rpc/8.0");
            assert!(req.authorization.unwrap().starts_with("Basic "));
            let body: Value = serde_json::from_slice(&req.body).unwrap();
            let method = body["method"].as_str().unwrap().to_string();
            let id = body["id"].as_u64().unwrap();
            assert!((1..=999).contains(&id));
            r.lock()
                .unwrap()
                .push((method.clone(), body["params"].clone()));
            let mut script = s.lock().unwrap();
            let answer = script.get_mut(method.as_str()).and_then(|q| {
                if q.len() > 1 {
                    q.pop_front()
                } else {
                    q.front().cloned()
                }
            });
            let (status, mut body) = answer.unwrap_or((
                200,
                json!({"error": {"code": 500, "name": "xUnknownAPIMethod",
                    "message": format!("Unknown method {method}")}}),
            ));
            if body.get("id").is_none() && status == 200 {
                body["id"] = json!(id);
            }
            HttpResponse::new(status, "application/json", body.to_string())
        })
    });
    let server = Server::start(([127, 0, 0, 1], 0).into(), Some(&cert), handler)
        .await
        .unwrap();
    Canned {
        server,
        cert,
        requests,
    }
}

pub(super) fn ok(result: Value) -> Value {
    json!({ "result": result })
}

pub(super) fn err(name: &str, message: &str) -> Value {
    json!({"error": {"code": 500, "name": name, "message": message}})
}

pub(super) fn backend(c: &Canned, extra: Value) -> Value {
    let mut doc = json!({
        "version": 1, "storageDriverName": "solidfire-san",
        "Endpoint": format!("https://admin:pw-canary@{}/json-rpc/8.0", c.server.local_addr()),
        "SVIP": "10.0.0.2:3260", "TenantName": "tenant",
        "Types": [
            {"Type": "Bronze", "Qos": {"minIOPS": 1000, "maxIOPS": 2000, "burstIOPS": 4000}},
            {"Type": "Gold", "Qos": {"minIOPS": 6000, "maxIOPS": 8000, "burstIOPS": 10000}},
        ],
        "trustedCACertificate": c.cert.cert_pem,
    });
    for (k, v) in extra.as_object().unwrap() {
        doc[k] = v.clone();
    }
    doc
}

pub(super) fn driver_with(doc: &Value, page: u32) -> SolidFireDriver {
    let common = CommonConfig::parse(doc).unwrap();
    SolidFireDriver::from_config(doc, &common)
        .unwrap()
        .tune_client(
            RetryPolicy {
                max_attempts: 3,
                base_delay: Duration::from_millis(1),
                max_delay: Duration::from_millis(5),
            },
            page,
        )
}

pub(super) fn account() -> Value {
    json!({"account": {"accountID": 7, "username": "tenant", "status": "active", "volumes": [],
        "initiatorSecret": "init-secret-1", "targetSecret": "targ-secret-1", "attributes": {}}})
}

/// A volume of account 7; `ours` puts storch's attributes on it.
pub(super) fn vol(id: i64, name: &str, ours: bool) -> Value {
    let attributes = if ours {
        json!({"docker-name": name, "storch": {"name": name, "createdBy": "storch",
            "pool": "Gold", "qos": "6000,8000,10000"}})
    } else {
        json!({"docker-name": name})
    };
    json!({"volumeID": id, "name": name, "accountID": 7, "createTime": "2016-11-22T15:40:16Z",
        "status": "active", "access": "readWrite", "enable512e": true, "blockSize": 4096,
        "totalSize": 1_000_000_000u64,
        "iqn": format!("iqn.2010-01.com.solidfire:pzsr.{name}.{id}"),
        "scsiEUIDeviceID": "707a737200000001f47acc0100000000",
        "qos": {"minIOPS": 6000, "maxIOPS": 8000, "burstIOPS": 10000, "burstTime": 60},
        "volumeAccessGroups": [], "volumePairs": [], "deleteTime": "", "purgeTime": "",
        "sliceCount": 1, "virtualVolumeID": null, "attributes": attributes})
}

pub(super) fn volumes(list: Vec<Value>) -> Value {
    ok(json!({ "volumes": list }))
}

/// The pages of `times` full listings of the account: the volumes, then the empty page that
/// ends each listing.
pub(super) fn listings(times: usize, list: Vec<Value>) -> Vec<(&'static str, u16, Value)> {
    let mut out = Vec::new();
    for _ in 0..times {
        out.push(("ListVolumes", 200, volumes(list.clone())));
        out.push(("ListVolumes", 200, volumes(vec![])));
    }
    out
}

/// The discovery answers of a tenant that exists, with a `trident` access group (id 5).
pub(super) fn discovery() -> Vec<(&'static str, u16, Value)> {
    vec![
        ("GetAccountByName", 200, ok(account())),
        (
            "GetDefaultQoS",
            200,
            ok(json!({"minIOPS": 50, "maxIOPS": 15000, "burstIOPS": 15000})),
        ),
        (
            "ListVolumeAccessGroups",
            200,
            ok(
                json!({"volumeAccessGroups": [{"volumeAccessGroupID": 5, "name": "trident",
                "initiators": [], "initiatorIDs": [], "volumes": [], "deletedVolumes": [],
                "attributes": {}}]}),
            ),
        ),
        (
            "ListVolumeAccessGroups",
            200,
            ok(json!({"volumeAccessGroups": []})),
        ),
        (
            "GetClusterHardwareInfo",
            200,
            ok(json!({"clusterHardwareInfo": {"drives": {}, "nodes": {
                "1": {"nodeID": 1, "serial": "SN-B"}, "2": {"nodeID": 2, "serial": "SN-A"}}}})),
        ),
        (
            "GetClusterCapacity",
            200,
            ok(
                json!({"clusterCapacity": {"maxProvisionedSpace": 100_000_000_000u64,
                "provisionedSpace": 40_000_000_000u64, "usedSpace": 1, "timestamp": "x"}}),
            ),
        ),
    ]
}

pub(super) fn methods(c: &Canned) -> Vec<String> {
    c.requests
        .lock()
        .unwrap()
        .iter()
        .map(|(m, _)| m.clone())
        .collect()
}

pub(super) fn params_of(c: &Canned, method: &str) -> Vec<Value> {
    c.requests
        .lock()
        .unwrap()
        .iter()
        .filter(|(m, _)| m == method)
        .map(|(_, p)| p.clone())
        .collect()
}

#[tokio::test]
async fn unknown_tenant_is_added_and_chap_is_used_without_groups() {
    let c = canned(vec![
        (
            "GetAccountByName",
            200,
            err("xUnknownAccount", "xUnknownAccount"),
        ),
        ("AddAccount", 200, ok(json!({"accountID": 7}))),
        ("GetAccountByID", 200, ok(account())),
        (
            "GetDefaultQoS",
            200,
            ok(json!({"minIOPS": 50, "maxIOPS": 15000, "burstIOPS": 15000})),
        ),
        (
            "ListVolumeAccessGroups",
            200,
            ok(json!({"volumeAccessGroups": []})),
        ),
        (
            "GetClusterCapacity",
            200,
            ok(
                json!({"clusterCapacity": {"maxProvisionedSpace": 10_000_000_000u64,
                "provisionedSpace": 0}}),
            ),
        ),
    ])
    .await;
    let d = driver_with(&backend(&c, json!({})), 100);
    let disc = d.discover().await.unwrap();
    assert_eq!(disc.backend_name, "solidfire_10.0.0.2");
    let names: Vec<&str> = disc.pools.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["Bronze", "Gold"]);
    assert_eq!(
        disc.pools[0].offers["IOPS"],
        Offer::Int {
            min: 1000,
            max: 2000
        }
    );
    assert_eq!(disc.free_bytes["Gold"], 10_000_000_000);
    assert_eq!(params_of(&c, "AddAccount"), [json!({"username": "tenant"})]);
    assert_eq!(params_of(&c, "GetAccountByID"), [json!({"accountID": 7})]);
    let ext = d.external_config();
    assert_eq!(ext["UseCHAP"], true, "no group named trident: CHAP");
    assert!(!ext.to_string().contains("canary"));
}

#[tokio::test]
async fn create_sends_qos_512e_and_attributes_then_joins_the_group() {
    let mut answers = discovery();
    answers.extend([
        ("ListVolumes", 200, volumes(vec![])),
        ("ListVolumes", 200, volumes(vec![vol(42, "pvc-3c9e", true)])),
        (
            "CreateVolume",
            200,
            json!({"id": 321, "result": {"volumeID": 42}}),
        ),
        ("AddVolumesToVolumeAccessGroup", 200, ok(json!({}))),
    ]);
    let c = canned(answers).await;
    let d = driver_with(&backend(&c, json!({})), 100);
    let name = d.internal_name("pvc_3c9e");
    assert_eq!(name, "pvc-3c9e");
    let info = d.create(&req(&name, "Gold", 1_000_000_000)).await.unwrap();
    assert_eq!(info.pool, "Gold");
    assert_eq!(info.size_bytes, 1_000_000_000);
    assert_eq!(
        info.access.iscsi_target_iqn,
        "iqn.2010-01.com.solidfire:pzsr.pvc-3c9e.42"
    );
    assert_eq!(info.access.iscsi_target_portal, "10.0.0.2:3260");
    assert_eq!(info.access.iscsi_lun_number, 0);
    assert_eq!(info.access.iscsi_interface, "default");
    assert_eq!(info.access.iscsi_vags, vec![5]);
    assert!(info.access.iscsi_username.is_empty());
    let create = &params_of(&c, "CreateVolume")[0];
    assert_eq!(create["name"], "pvc-3c9e");
    assert_eq!(create["accountID"], 7);
    assert_eq!(create["totalSize"], 1_000_000_000u64);
    assert_eq!(create["enable512e"], true);
    assert_eq!(
        create["qos"],
        json!({"minIOPS": 6000, "maxIOPS": 8000, "burstIOPS": 10000})
    );
    assert_eq!(create["attributes"]["storch"]["createdBy"], "storch");
    assert_eq!(create["attributes"]["storch"]["name"], "pvc-3c9e");
    assert_eq!(
        params_of(&c, "AddVolumesToVolumeAccessGroup"),
        [json!({"volumeAccessGroupID": 5, "volumes": [42]})]
    );
    // The new volume is looked for by id until it is listed.
    let lists = params_of(&c, "ListVolumes");
    assert_eq!(
        lists[1],
        json!({"accounts": [7], "startVolumeID": 42, "limit": 1})
    );
}

#[tokio::test]
async fn an_existing_name_is_already_exists_and_says_whose() {
    let mut answers = discovery();
    answers.extend(listings(1, vec![vol(42, "pvc-1", true)]));
    let c = canned(answers).await;
    let d = driver_with(&backend(&c, json!({})), 100);
    match d.create(&req("pvc-1", "Gold", 1_000_000_000)).await {
        Err(DriverError::AlreadyExists(m)) => {
            assert!(m.contains("as planned"), "{m}")
        }
        other => panic!("{other:?}"),
    }
    assert!(!methods(&c).contains(&"CreateVolume".to_string()));
}

#[tokio::test]
async fn lists_page_with_start_volume_id_to_the_end() {
    let mut answers = discovery();
    let deleted = {
        let mut v = vol(4, "gone", true);
        v["status"] = json!("deleted");
        v
    };
    answers.extend([
        (
            "ListVolumes",
            200,
            volumes(vec![vol(1, "a", true), vol(2, "b", true)]),
        ),
        (
            "ListVolumes",
            200,
            volumes(vec![vol(3, "c", true), deleted]),
        ),
        // A short page is not the end (clusters cap pages): only an empty one is.
        ("ListVolumes", 200, volumes(vec![vol(9, "not-ours", false)])),
        ("ListVolumes", 200, volumes(vec![])),
    ]);
    let c = canned(answers).await;
    let d = driver_with(&backend(&c, json!({})), 2);
    let listed = d.list_volumes().await.unwrap();
    let names: Vec<&str> = listed.iter().map(|v| v.internal_name.as_str()).collect();
    assert_eq!(
        names,
        ["a", "b", "c"],
        "active volumes storch made, all pages"
    );
    assert_eq!(
        params_of(&c, "ListVolumes"),
        [
            json!({"accounts": [7], "limit": 2}),
            json!({"accounts": [7], "startVolumeID": 3, "limit": 2}),
            json!({"accounts": [7], "startVolumeID": 5, "limit": 2}),
            json!({"accounts": [7], "startVolumeID": 10, "limit": 2}),
        ]
    );
}

#[tokio::test]
async fn clone_from_a_snapshot_waits_for_the_async_handle() {
    let mut answers = discovery();
    answers.extend(listings(2, vec![vol(42, "src", true)]));
    answers.extend([
        ("ListVolumes", 200, volumes(vec![vol(43, "copy", true)])),
        (
            "ListSnapshots",
            200,
            ok(
                json!({"snapshots": [{"snapshotID": 11, "volumeID": 42, "name": "snap1",
                "checksum": "0x0", "status": "done", "totalSize": 1_000_000_000u64,
                "groupID": 0, "createTime": "2016-11-22T15:40:16Z", "attributes": {}}]}),
            ),
        ),
        // Answered while the source settles: retried, as Trident does.
        (
            "CloneVolume",
            200,
            err("xInvalidParameter", "slices not ready"),
        ),
        (
            "CloneVolume",
            200,
            ok(json!({"cloneID": 1, "volumeID": 43, "asyncHandle": 99})),
        ),
        (
            "GetAsyncResult",
            200,
            ok(json!({"status": "running", "resultType": "Clone"})),
        ),
        (
            "GetAsyncResult",
            200,
            ok(json!({"status": "running", "resultType": "Clone"})),
        ),
        (
            "GetAsyncResult",
            200,
            ok(json!({"status": "complete", "resultType": "Clone",
                "result": {"cloneID": 1, "volumeID": 43}})),
        ),
        ("AddVolumesToVolumeAccessGroup", 200, ok(json!({}))),
    ]);
    let c = canned(answers).await;
    let d = driver_with(&backend(&c, json!({})), 100);
    let info = d
        .clone_volume(&clone_req("copy", "src", Some("snap1")))
        .await
        .unwrap();
    assert_eq!(info.internal_name, "copy");
    let clones = params_of(&c, "CloneVolume");
    assert_eq!(clones.len(), 2);
    let clone = &clones[1];
    assert_eq!(clone["volumeID"], 42);
    assert_eq!(clone["snapshotID"], 11);
    assert_eq!(clone["name"], "copy");
    assert_eq!(clone["attributes"]["storch"]["createdBy"], "storch");
    assert_eq!(
        params_of(&c, "GetAsyncResult"),
        vec![json!({"asyncHandle": 99}); 3]
    );
}

#[tokio::test]
async fn clone_of_a_missing_snapshot_is_not_found_and_makes_nothing() {
    let mut answers = discovery();
    answers.extend(listings(1, vec![vol(42, "src", true)]));
    answers.push(("ListSnapshots", 200, ok(json!({"snapshots": []}))));
    let c = canned(answers).await;
    let d = driver_with(&backend(&c, json!({})), 100);
    match d
        .clone_volume(&clone_req("copy", "src", Some("nope")))
        .await
    {
        Err(DriverError::NotFound(m)) => assert!(m.contains("nope"), "{m}"),
        other => panic!("{other:?}"),
    }
    assert!(!methods(&c).contains(&"CloneVolume".to_string()));
}

#[tokio::test]
async fn a_failed_async_clone_keeps_the_element_error() {
    let mut answers = discovery();
    answers.extend(listings(2, vec![vol(42, "src", true)]));
    answers.extend([
        (
            "CloneVolume",
            200,
            ok(json!({"cloneID": 1, "volumeID": 43, "asyncHandle": 5})),
        ),
        (
            "GetAsyncResult",
            200,
            ok(
                json!({"status": "complete", "error": {"code": 500, "name": "xExceededLimit",
                "message": "clone limit"}}),
            ),
        ),
    ]);
    let c = canned(answers).await;
    let d = driver_with(&backend(&c, json!({})), 100);
    match d.clone_volume(&clone_req("copy", "src", None)).await {
        Err(DriverError::Conflict(m)) => assert!(m.contains("xExceededLimit"), "{m}"),
        other => panic!("{other:?}"),
    }
    assert!(params_of(&c, "CloneVolume")[0].get("snapshotID").is_none());
}

#[tokio::test]
async fn delete_then_purge_and_gone_is_deleted() {
    let mut answers = discovery();
    answers.extend(listings(1, vec![vol(42, "a", true)]));
    answers.extend(listings(1, vec![vol(43, "b", true)]));
    answers.extend([
        ("DeleteVolume", 200, ok(json!({}))),
        (
            "DeleteVolume",
            200,
            json!({"id": 17, "error": {"code": 500, "name": "xVolumeIDDoesNotExist",
                "message": "VolumeID 43 does not exist."}}),
        ),
        ("PurgeDeletedVolume", 200, ok(json!({}))),
    ]);
    let c = canned(answers).await;
    let d = driver_with(&backend(&c, json!({})), 100);
    d.destroy("a").await.unwrap();
    d.destroy("b").await.unwrap();
    d.destroy("never-there").await.unwrap();
    assert_eq!(
        params_of(&c, "DeleteVolume"),
        [json!({"volumeID": 42}), json!({"volumeID": 43})]
    );
    assert_eq!(
        params_of(&c, "PurgeDeletedVolume"),
        [json!({"volumeID": 42})]
    );
}

#[tokio::test]
async fn a_volume_storch_did_not_make_is_invisible_and_never_deleted() {
    let mut answers = discovery();
    answers.extend(listings(4, vec![vol(42, "theirs", false)]));
    let c = canned(answers).await;
    let d = driver_with(&backend(&c, json!({})), 100);
    assert_eq!(d.get("theirs").await.unwrap(), None, "never adopted");
    d.destroy("theirs").await.unwrap();
    match d.create(&req("theirs", "Gold", 1_000_000_000)).await {
        Err(DriverError::AlreadyExists(m)) => assert!(m.contains("did not make"), "{m}"),
        other => panic!("{other:?}"),
    }
    match d.resize("theirs", 2_000_000_000).await {
        Err(DriverError::NotFound(_)) => {}
        other => panic!("{other:?}"),
    }
    for m in ["DeleteVolume", "CreateVolume", "ModifyVolume"] {
        assert!(!methods(&c).contains(&m.to_string()), "{m}");
    }
}

#[tokio::test]
async fn storch_volume_made_otherwise_is_not_adopted() {
    let mut answers = discovery();
    answers.extend(listings(1, vec![vol(42, "pvc-1", true)]));
    let c = canned(answers).await;
    let d = driver_with(&backend(&c, json!({})), 100);
    // The array's volume has Gold's QoS and 1e9 bytes; the plan is Bronze.
    match d.create(&req("pvc-1", "Bronze", 1_000_000_000)).await {
        Err(DriverError::Conflict(m)) => assert!(m.contains("not adopted"), "{m}"),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn element_error_names_become_classes() {
    let mut answers = discovery();
    answers.extend(listings(5, vec![vol(42, "a", true)]));
    answers.extend([
        (
            "ModifyVolume",
            200,
            err("xExceededLimit", "Exceeded max provisioned space"),
        ),
        ("ListSnapshots", 200, ok(json!({"snapshots": []}))),
        (
            "ListSnapshots",
            200,
            ok(
                json!({"snapshots": [{"snapshotID": 12, "volumeID": 42, "name": "s1",
                "totalSize": 1, "createTime": "2016-11-22T15:40:16Z"}]}),
            ),
        ),
        (
            "CreateSnapshot",
            200,
            err("xMaxSnapshotsPerVolumeExceeded", "too many"),
        ),
        (
            "DeleteSnapshot",
            200,
            err("xSnapshotIDDoesNotExist", "gone"),
        ),
    ]);
    let c = canned(answers).await;
    let d = driver_with(&backend(&c, json!({})), 100);
    match d.resize("a", 2_000_000_000).await {
        Err(DriverError::Conflict(m)) => {
            assert!(
                m.contains("xExceededLimit") && m.contains("Exceeded max"),
                "{m}"
            )
        }
        other => panic!("{other:?}"),
    }
    match d.resize("a", 500_000_000).await {
        Err(DriverError::Invalid(m)) => assert!(m.contains("shrink"), "{m}"),
        other => panic!("{other:?}"),
    }
    match d.create_snapshot("a", "s1").await {
        Err(DriverError::Conflict(m)) => assert!(m.contains("xMaxSnapshots"), "{m}"),
        other => panic!("{other:?}"),
    }
    // A snapshot already gone is deleted.
    d.delete_snapshot("a", "s1").await.unwrap();
    assert_eq!(params_of(&c, "DeleteSnapshot"), [json!({"snapshotID": 12})]);
    match d.resize("missing", 2_000_000_000).await {
        Err(DriverError::NotFound(_)) => {}
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn an_older_element_without_a_method_needs_a_newer_one() {
    let c = canned(vec![
        ("GetAccountByName", 200, ok(account())),
        (
            "GetDefaultQoS",
            200,
            err("xUnknownAPIMethod", "Unknown method"),
        ),
        (
            "ListVolumeAccessGroups",
            200,
            ok(json!({"volumeAccessGroups": []})),
        ),
        (
            "GetClusterCapacity",
            200,
            err("xUnknownAPIMethod", "Unknown method"),
        ),
    ])
    .await;
    let d = driver_with(&backend(&c, json!({})), 100);
    match d.discover().await {
        Err(DriverError::Unsupported(m)) => {
            assert!(
                m.contains("GetClusterCapacity") && m.contains("needs Element"),
                "{m}"
            )
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn wrong_password_is_invalid_and_not_retried() {
    let c = canned(vec![("GetAccountByName", 401, json!({}))]).await;
    let d = driver_with(&backend(&c, json!({})), 100);
    match d.discover().await {
        Err(DriverError::Invalid(m)) => {
            assert!(m.contains("401") && m.contains("EndPoint"), "{m}");
            assert!(!m.contains("canary"), "{m}");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(methods(&c), ["GetAccountByName"]);
}

#[tokio::test]
async fn the_busy_class_is_retried() {
    let mut answers = vec![
        ("GetAccountByName", 200, err("xDBConnectionLoss", "busy")),
        ("GetAccountByName", 200, ok(account())),
    ];
    answers.extend(discovery().into_iter().skip(1));
    let c = canned(answers).await;
    let d = driver_with(&backend(&c, json!({})), 100);
    d.discover().await.unwrap();
    assert_eq!(params_of(&c, "GetAccountByName").len(), 2);
}

#[tokio::test]
async fn chap_access_carries_the_account_secrets() {
    let mut answers = discovery();
    answers.extend(listings(1, vec![vol(42, "a", true)]));
    let c = canned(answers).await;
    let d = driver_with(&backend(&c, json!({"UseCHAP": true})), 100);
    let a = d.access_info("a").await.unwrap();
    assert_eq!(a.iscsi_username, "tenant");
    assert_eq!(a.iscsi_initiator_secret, "init-secret-1");
    assert_eq!(a.iscsi_target_secret, "targ-secret-1");
    assert!(a.iscsi_vags.is_empty());
    assert!(!methods(&c).contains(&"ListVolumeAccessGroups".to_string()));
    assert_eq!(
        d.external_config()["serialNumbers"],
        json!(["SN-A", "SN-B"])
    );
}

#[tokio::test]
async fn a_configured_access_group_must_exist() {
    let c = canned(discovery()).await;
    let d = driver_with(&backend(&c, json!({"AccessGroups": [6]})), 100);
    let found = d.discover().await;
    assert_eq!(
        params_of(&c, "ListVolumeAccessGroups"),
        [
            json!({"limit": 100}),
            json!({"limit": 100, "startVolumeAccessGroupID": 6}),
        ],
        "groups are paged to an empty page"
    );
    match found {
        Err(DriverError::Invalid(m)) => {
            assert!(m.contains("AccessGroups") && m.contains('6'), "{m}")
        }
        other => panic!("{other:?}"),
    }
}
