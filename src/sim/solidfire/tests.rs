//! Unit tests of the SolidFire simulator: every method through `rpc` (the JSON-RPC layer under
//! the HTTP server), and the HTTP layer itself on 127.0.0.1.

use serde_json::{Value, json};

use super::*;

const GB: u64 = 1 << 30;

fn opts() -> SimOptions {
    SimOptions {
        cluster: ClusterSpec {
            capacity: 10 * GB,
            max_iops: 20_000,
            ..SimOptions::default().cluster
        },
        tuning: Tuning {
            page_cap: 2,
            clone_polls: 2,
            create_polls: 0,
        },
        ..SimOptions::default()
    }
}

fn sim() -> Shared {
    shared(&opts()).unwrap()
}

fn send(sh: &Shared, version: &str, method: &str, params: Value) -> Value {
    let body = json!({"method": method, "params": params, "id": 7});
    rpc(
        sh,
        &format!("/json-rpc/{version}"),
        body.to_string().as_bytes(),
    )
}

/// The result of a call that must succeed.
fn ok(sh: &Shared, method: &str, params: Value) -> Value {
    let r = send(sh, "8.0", method, params);
    assert_eq!(r["id"], 7, "{r}");
    assert!(r.get("error").is_none(), "{method}: {r}");
    r["result"].clone()
}

/// The error name (and message) of a call that must fail, checking the envelope.
fn err(sh: &Shared, method: &str, params: Value) -> (String, String) {
    let r = send(sh, "8.0", method, params);
    assert!(r.get("result").is_none(), "{method} should fail: {r}");
    assert_eq!(r["error"]["code"], 500, "{r}");
    (
        r["error"]["name"].as_str().unwrap().to_string(),
        r["error"]["message"].as_str().unwrap().to_string(),
    )
}

fn err_name(sh: &Shared, method: &str, params: Value) -> String {
    err(sh, method, params).0
}

fn account(sh: &Shared, name: &str) -> u64 {
    ok(sh, "AddAccount", json!({"username": name}))["accountID"]
        .as_u64()
        .unwrap()
}

/// A volume the way Trident 18.07 asks for one (empty qos, attributes always present).
fn volume(sh: &Shared, acct: u64, name: &str, size: u64) -> u64 {
    ok(
        sh,
        "CreateVolume",
        json!({"name": name, "accountID": acct, "totalSize": size, "enable512e": true,
               "qos": {}, "attributes": {"docker-name": name, "fstype": "ext4"}}),
    )["volumeID"]
        .as_u64()
        .unwrap()
}

fn ids(result: &Value, key: &str, id: &str) -> Vec<u64> {
    result[key]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v[id].as_u64().unwrap())
        .collect()
}

fn vol_ids(result: &Value) -> Vec<u64> {
    ids(result, "volumes", "volumeID")
}

#[test]
fn envelope_ids_versions_and_unknown_methods() {
    let sh = sim();
    let r = rpc(
        &sh,
        "/json-rpc/8.0",
        br#"{"method":"GetDefaultQoS","params":{}}"#,
    );
    assert_eq!(r["id"], Value::Null);
    assert_eq!(r["result"]["minIOPS"], 50);
    let r = rpc(
        &sh,
        "/json-rpc/7.0/",
        br#"{"method":"GetDefaultQoS","id":"a"}"#,
    );
    assert_eq!(
        r["id"], "a",
        "a trailing slash (Cinder) and a missing params: {r}"
    );
    let r = send(&sh, "4.0", "GetDefaultQoS", json!({}));
    assert_eq!(r["error"]["name"], "xUnknownAPIVersion");
    assert_eq!(r["id"], 7);
    let r = send(&sh, "7.0", "ListVolumes", json!({}));
    assert_eq!(
        r["error"]["name"], "xUnknownAPIMethod",
        "ListVolumes is v8+"
    );
    assert_eq!(
        err_name(&sh, "FrobnicateVolume", json!({})),
        "xUnknownAPIMethod"
    );
    let r = rpc(&sh, "/json-rpc/8.0", b"not json");
    assert_eq!(r["error"]["name"], "xInvalidRequest");
    assert_eq!(r["error"]["code"], 500);
    let (name, msg) = err(&sh, "GetDefaultQoS", json!({"verbose": true}));
    assert_eq!(name, "xInvalidParameter");
    assert!(msg.contains("verbose"), "{msg}");
    let r = send(&sh, "8.0", "GetDefaultQoS", json!([1]));
    assert_eq!(r["error"]["name"], "xInvalidParameter");
}

#[test]
fn accounts_with_generated_secrets() {
    let sh = sim();
    let (name, msg) = err(&sh, "GetAccountByName", json!({"username": "trident"}));
    assert_eq!(
        (name.as_str(), msg.as_str()),
        ("xUnknownAccount", "xUnknownAccount")
    );
    let r = ok(&sh, "AddAccount", json!({"username": "trident"}));
    let id = r["accountID"].as_u64().unwrap();
    let a = ok(&sh, "GetAccountByName", json!({"username": "trident"}))["account"].clone();
    assert_eq!(a["accountID"], id);
    assert_eq!(a["status"], "active");
    for s in ["initiatorSecret", "targetSecret"] {
        let s = a[s].as_str().unwrap();
        assert!((12..=16).contains(&s.len()), "{s}");
    }
    assert_eq!(
        ok(&sh, "GetAccountByID", json!({"accountID": id}))["account"],
        a
    );
    assert_eq!(
        err_name(&sh, "AddAccount", json!({"username": "trident"})),
        "xDuplicateUsername"
    );
    assert_eq!(
        err_name(&sh, "GetAccountByID", json!({"accountID": 99})),
        "xUnknownAccount"
    );
    let given = ok(
        &sh,
        "AddAccount",
        json!({"username": "t2", "initiatorSecret": "abcdefghijkl", "attributes": {"k": 1}}),
    );
    assert_eq!(given["account"]["initiatorSecret"], "abcdefghijkl");
    assert_eq!(given["account"]["attributes"], json!({"k": 1}));
    let (name, msg) = err(
        &sh,
        "AddAccount",
        json!({"username": "t3", "targetSecret": "short"}),
    );
    assert_eq!(name, "xInvalidParameter");
    assert!(msg.contains("targetSecret"), "{msg}");
    let (_, msg) = err(&sh, "AddAccount", json!({}));
    assert!(msg.contains("username"), "{msg}");
    let (_, msg) = err(&sh, "GetAccountByID", json!({"accountID": "1"}));
    assert!(msg.contains("accountID"), "wrong type: {msg}");
    assert_eq!(sh.cluster.lock().unwrap().accounts.len(), 2);
}

#[test]
fn create_volume_keeps_what_it_was_given() {
    let sh = sim();
    let acct = account(&sh, "trident");
    let id = volume(&sh, acct, "pvc-3c9e", 1_000_000_000);
    let v = ok(&sh, "ListVolumesForAccount", json!({"accountID": acct}))["volumes"][0].clone();
    assert_eq!(v["volumeID"], id);
    assert_eq!(
        v["totalSize"], 1_000_341_504u64,
        "rounded up to a whole MiB"
    );
    assert_eq!(v["enable512e"], true);
    assert_eq!(v["status"], "active");
    assert_eq!(v["access"], "readWrite");
    assert_eq!(
        v["attributes"],
        json!({"docker-name": "pvc-3c9e", "fstype": "ext4"})
    );
    assert_eq!(v["qos"]["minIOPS"], 50, "an empty qos takes the default");
    assert_eq!(v["qos"]["maxIOPS"], 15000);
    let uid = ok(&sh, "GetClusterInfo", json!({}))["clusterInfo"]["uniqueID"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(
        v["iqn"],
        format!("iqn.2010-01.com.solidfire:{uid}.pvc-3c9e.{id}")
    );
    assert_eq!(
        v["scsiNAADeviceID"],
        format!("6f47acc100000000{}{id:08x}", hex::encode(&uid))
    );
    let again = volume(&sh, acct, "pvc-3c9e", GB);
    assert_ne!(again, id, "names are not unique");
    let q = ok(
        &sh,
        "CreateVolume",
        json!({"name": "Gold", "accountID": acct, "totalSize": GB, "enable512e": false,
               "qos": {"minIOPS": 1000, "maxIOPS": 5000, "burstIOPS": 8000}, "attributes": {}}),
    )["volume"]
        .clone();
    assert_eq!(q["qos"]["burstIOPS"], 8000);
    assert_eq!(q["enable512e"], false);
    assert!(q["iqn"].as_str().unwrap().contains(".gold."), "lower-cased");
}

#[test]
fn create_volume_refusals_change_nothing() {
    let sh = sim();
    let acct = account(&sh, "trident");
    let base = json!({"name": "v", "accountID": acct, "totalSize": GB, "enable512e": true,
                      "qos": {}, "attributes": {}});
    let with = |k: &str, v: Value| {
        let mut p = base.clone();
        p[k] = v;
        p
    };
    let without = |k: &str| {
        let mut p = base.clone();
        p.as_object_mut().unwrap().remove(k);
        p
    };
    let cases = [
        (without("accountID"), "xInvalidParameter", "accountID"),
        (without("totalSize"), "xInvalidParameter", "totalSize"),
        (without("enable512e"), "xInvalidParameter", "enable512e"),
        (with("color", json!("red")), "xInvalidParameter", "color"),
        (
            with("totalSize", json!("1Gi")),
            "xInvalidParameter",
            "totalSize",
        ),
        (
            with("totalSize", json!(1000)),
            "xInvalidParameter",
            "totalSize",
        ),
        (with("name", json!("a_b")), "xInvalidParameter", "name"),
        (with("accountID", json!(42)), "xUnknownAccount", "42"),
        (
            with("qos", json!({"minIOPS": 10})),
            "xInvalidParameter",
            "minIOPS",
        ),
        (
            with("qos", json!({"maxIOPS": 30000, "burstIOPS": 30000})),
            "xInvalidParameter",
            "maxIOPS",
        ),
        (
            with("qos", json!({"minIOPS": 6000, "maxIOPS": 5000})),
            "xInvalidParameter",
            "minIOPS",
        ),
        (
            with("qos", json!({"maxIOPS": 9000, "burstIOPS": 8000})),
            "xInvalidParameter",
            "burstIOPS",
        ),
        (
            with("qos", json!({"fastest": 1})),
            "xInvalidParameter",
            "qos.fastest",
        ),
        (
            with("attributes", json!([])),
            "xInvalidParameter",
            "attributes",
        ),
        (
            with("attributes", json!({"x": "y".repeat(1000)})),
            "xInvalidParameter",
            "attributes",
        ),
        (
            with("access", json!("everyone")),
            "xInvalidParameter",
            "access",
        ),
        (
            with("totalSize", json!(11 * GB)),
            "xInsufficientSpace",
            "free",
        ),
    ];
    for (params, name, needle) in cases {
        let (n, m) = err(&sh, "CreateVolume", params.clone());
        assert_eq!(n, name, "{params}: {m}");
        assert!(m.contains(needle), "{params}: {m}");
    }
    assert!(sh.cluster.lock().unwrap().volumes.is_empty());
}

#[test]
fn lists_page_by_start_volume_id_and_limit() {
    let sh = sim();
    let a = account(&sh, "a");
    let b = account(&sh, "b");
    let v: Vec<u64> = (0..5)
        .map(|i| volume(&sh, if i == 2 { b } else { a }, "v", GB))
        .collect();
    // Trident's lookup of one id: the first volume at or after it, of the account.
    let r = ok(
        &sh,
        "ListVolumes",
        json!({"accounts": [a], "startVolumeID": v[2], "limit": 1}),
    );
    assert_eq!(vol_ids(&r), [v[3]], "the next volume of the account");
    // The page size caps what a page holds, so a reader has to page.
    let mut seen = Vec::new();
    let mut start = 0;
    loop {
        let page = vol_ids(&ok(
            &sh,
            "ListActiveVolumes",
            json!({"startVolumeID": start}),
        ));
        assert!(page.len() <= 2);
        let Some(last) = page.last() else { break };
        start = last + 1;
        seen.extend(page);
    }
    assert_eq!(seen, v);
    let r = ok(&sh, "ListVolumesForAccount", json!({"accountID": a}));
    assert_eq!(vol_ids(&r).len(), 4, "not capped by the page size");
    let r = ok(
        &sh,
        "ListVolumes",
        json!({"volumeIDs": [v[0], v[4]], "limit": 100}),
    );
    assert_eq!(vol_ids(&r), [v[0], v[4]], "filtered, then paged");
    let r = ok(&sh, "ListVolumes", json!({"volumeName": "none"}));
    assert!(vol_ids(&r).is_empty());
    assert_eq!(
        err_name(&sh, "ListVolumes", json!({"limit": 0})),
        "xInvalidParameter"
    );
    assert_eq!(
        err_name(&sh, "ListVolumes", json!({"volumeStatus": "gone"})),
        "xInvalidParameter"
    );
    assert_eq!(
        err_name(&sh, "ListVolumesForAccount", json!({"accountID": 9})),
        "xUnknownAccount"
    );
}

#[test]
fn modify_grows_and_changes_qos() {
    let sh = sim();
    let a = account(&sh, "a");
    let id = volume(&sh, a, "v", GB);
    let r = ok(
        &sh,
        "ModifyVolume",
        json!({"volumeID": id, "totalSize": 2 * GB, "qos": {"minIOPS": 500, "maxIOPS": 600, "burstIOPS": 700}}),
    );
    assert_eq!(r["volume"]["totalSize"], 2 * GB);
    assert_eq!(r["volume"]["qos"]["minIOPS"], 500);
    assert_eq!(r["volume"]["attributes"]["docker-name"], "v", "kept");
    let r = ok(
        &sh,
        "ModifyVolume",
        json!({"volumeID": id, "qos": {"maxIOPS": 650}}),
    );
    assert_eq!(
        r["volume"]["qos"]["minIOPS"], 500,
        "partial qos keeps the rest"
    );
    let (n, m) = err(
        &sh,
        "ModifyVolume",
        json!({"volumeID": id, "totalSize": GB}),
    );
    assert_eq!(n, "xInvalidParameter");
    assert!(m.contains("totalSize"), "{m}");
    assert_eq!(
        err_name(
            &sh,
            "ModifyVolume",
            json!({"volumeID": id, "totalSize": 20 * GB})
        ),
        "xInsufficientSpace"
    );
    assert_eq!(
        err_name(
            &sh,
            "ModifyVolume",
            json!({"volumeID": id, "qos": {"minIOPS": 700}})
        ),
        "xInvalidParameter"
    );
    assert_eq!(
        err_name(&sh, "ModifyVolume", json!({"volumeID": 99, "qos": {}})),
        "xVolumeIDDoesNotExist"
    );
    let c = sh.cluster.lock().unwrap();
    assert_eq!(c.volumes[&id].total_size, 2 * GB);
    assert_eq!(c.volumes[&id].qos.max, 650);
}

#[test]
fn delete_keeps_the_volume_until_purged() {
    let sh = sim();
    let a = account(&sh, "a");
    let id = volume(&sh, a, "v", 6 * GB);
    assert_eq!(
        err_name(&sh, "PurgeDeletedVolume", json!({"volumeID": id})),
        "xVolumeNotDeleted"
    );
    let r = ok(&sh, "DeleteVolume", json!({"volumeID": id}));
    assert_eq!(r["volume"]["status"], "deleted");
    let listed = ok(&sh, "ListVolumesForAccount", json!({"accountID": a}));
    assert_eq!(listed["volumes"][0]["status"], "deleted", "still listed");
    assert!(vol_ids(&ok(&sh, "ListActiveVolumes", json!({}))).is_empty());
    assert_eq!(vol_ids(&ok(&sh, "ListDeletedVolumes", json!({}))), [id]);
    assert_eq!(
        err_name(
            &sh,
            "CreateVolume",
            json!({"name": "w", "accountID": a, "totalSize": 6 * GB,
            "enable512e": true, "qos": {}, "attributes": {}})
        ),
        "xInsufficientSpace",
        "a deleted volume still counts against the capacity"
    );
    assert_eq!(
        err_name(
            &sh,
            "ModifyVolume",
            json!({"volumeID": id, "totalSize": 7 * GB})
        ),
        "xVolumeIDDoesNotExist"
    );
    ok(&sh, "DeleteVolume", json!({"volumeID": id}));
    ok(&sh, "PurgeDeletedVolume", json!({"volumeID": id}));
    assert!(vol_ids(&ok(&sh, "ListVolumesForAccount", json!({"accountID": a}))).is_empty());
    assert_eq!(
        err_name(&sh, "DeleteVolume", json!({"volumeID": id})),
        "xVolumeIDDoesNotExist"
    );
    assert_eq!(
        err_name(&sh, "PurgeDeletedVolume", json!({"volumeID": id})),
        "xVolumeIDDoesNotExist"
    );
    volume(&sh, a, "w", 6 * GB);
}

#[test]
fn snapshots_create_list_delete() {
    let sh = sim();
    let a = account(&sh, "a");
    let v = volume(&sh, a, "v", GB);
    let r = ok(
        &sh,
        "CreateSnapshot",
        json!({"volumeID": v, "name": "s1", "snapshotID": 0, "retention": "",
               "enableRemoteReplication": false, "attributes": {"k": "v"}}),
    );
    let s1 = r["snapshotID"].as_u64().unwrap();
    assert!(r["checksum"].is_string());
    let unnamed = ok(
        &sh,
        "CreateSnapshot",
        json!({"volumeID": v, "retention": "01:00:00"}),
    );
    assert!(unnamed["snapshot"]["name"].as_str().unwrap().ends_with('Z'));
    let list = ok(&sh, "ListSnapshots", json!({"volumeID": v}));
    assert_eq!(list["snapshots"][0]["name"], "s1");
    assert_eq!(list["snapshots"][0]["status"], "done");
    assert_eq!(list["snapshots"][0]["totalSize"], GB);
    assert_eq!(list["snapshots"][0]["attributes"], json!({"k": "v"}));
    assert_eq!(ids(&list, "snapshots", "snapshotID").len(), 2);
    assert_eq!(
        err_name(
            &sh,
            "CreateSnapshot",
            json!({"volumeID": v, "retention": "1 hour"})
        ),
        "xInvalidParameter"
    );
    assert_eq!(
        err_name(&sh, "CreateSnapshot", json!({"volumeID": 99})),
        "xVolumeIDDoesNotExist"
    );
    assert_eq!(
        err_name(&sh, "ListSnapshots", json!({"volumeID": 99})),
        "xVolumeIDDoesNotExist"
    );
    let r = ok(
        &sh,
        "RollbackToSnapshot",
        json!({"volumeID": v, "snapshotID": s1, "saveCurrentState": true, "name": "before"}),
    );
    assert_eq!(r["snapshot"]["name"], "before");
    let r = ok(
        &sh,
        "RollbackToSnapshot",
        json!({"volumeID": v, "snapshotID": s1, "saveCurrentState": false}),
    );
    assert_eq!(r["snapshotID"], 0);
    assert_eq!(
        err_name(
            &sh,
            "RollbackToSnapshot",
            json!({"volumeID": v, "snapshotID": s1})
        ),
        "xInvalidParameter",
        "saveCurrentState is required"
    );
    ok(&sh, "DeleteSnapshot", json!({"snapshotID": s1}));
    assert_eq!(
        err_name(&sh, "DeleteSnapshot", json!({"snapshotID": s1})),
        "xSnapshotIDDoesNotExist"
    );
    for _ in 2..32 {
        ok(&sh, "CreateSnapshot", json!({"volumeID": v}));
    }
    assert_eq!(
        err_name(&sh, "CreateSnapshot", json!({"volumeID": v})),
        "xMaxSnapshotsPerVolumeExceeded"
    );
    ok(&sh, "DeleteVolume", json!({"volumeID": v}));
    ok(&sh, "PurgeDeletedVolume", json!({"volumeID": v}));
    assert!(
        sh.cluster.lock().unwrap().snapshots.is_empty(),
        "purged with the volume"
    );
}

#[test]
fn clones_are_async_and_become_visible_after_polls() {
    let sh = sim();
    let a = account(&sh, "a");
    let src = volume(&sh, a, "src", GB);
    ok(
        &sh,
        "ModifyVolume",
        json!({"volumeID": src, "qos": {"minIOPS": 300, "maxIOPS": 400, "burstIOPS": 500}}),
    );
    let r = ok(
        &sh,
        "CloneVolume",
        json!({"volumeID": src, "name": "copy", "snapshotID": 0, "attributes": {"docker-name": "copy"}}),
    );
    let (clone, handle) = (r["volumeID"].as_u64().unwrap(), r["asyncHandle"].clone());
    assert!(r["cloneID"].is_u64());
    let visible = |sh: &Shared| {
        vol_ids(&ok(
            sh,
            "ListVolumes",
            json!({"accounts": [a], "startVolumeID": clone, "limit": 1}),
        )) == [clone]
    };
    assert!(!visible(&sh), "poll 1");
    let j = ok(&sh, "GetAsyncResult", json!({"asyncHandle": handle}));
    assert_eq!(j["status"], "running", "poll 2");
    assert_eq!(j["resultType"], "Clone");
    assert!(visible(&sh));
    let j = ok(
        &sh,
        "GetAsyncResult",
        json!({"asyncHandle": handle, "keepResult": true}),
    );
    assert_eq!(j["status"], "complete");
    assert_eq!(j["result"]["volumeID"], clone);
    ok(&sh, "GetAsyncResult", json!({"asyncHandle": handle}));
    let (n, m) = err(&sh, "GetAsyncResult", json!({"asyncHandle": handle}));
    assert_eq!(n, "xAsyncHandleDoesNotExist", "not kept");
    assert!(m.contains("does not exist"), "{m}");
    let c = sh.cluster.lock().unwrap().volumes[&clone].clone();
    assert_eq!(
        (c.qos.min, c.total_size, c.enable512e),
        (300, GB, true),
        "from the source"
    );
    // From a snapshot, bigger; and the refusals.
    let s = ok(&sh, "CreateSnapshot", json!({"volumeID": src}))["snapshotID"].clone();
    let r = ok(
        &sh,
        "CloneVolume",
        json!({"volumeID": src, "name": "c2", "snapshotID": s, "newSize": 2 * GB}),
    );
    assert_eq!(r["volume"]["totalSize"], 2 * GB);
    let cases = [
        (
            json!({"volumeID": src, "name": "c3", "snapshotID": 999}),
            "xSnapshotIDDoesNotExist",
        ),
        (
            json!({"volumeID": 999, "name": "c3", "snapshotID": 0}),
            "xVolumeIDDoesNotExist",
        ),
        (
            json!({"volumeID": src, "name": "c3", "newSize": 9 * GB}),
            "xInsufficientSpace",
        ),
        (
            json!({"volumeID": src, "name": "c3", "newAccountID": 77}),
            "xUnknownAccount",
        ),
        (json!({"volumeID": src}), "xInvalidParameter"),
        (
            json!({"volumeID": clone, "name": "c3", "snapshotID": s}),
            "xInvalidParameter",
        ),
    ];
    for (p, name) in cases {
        assert_eq!(err_name(&sh, "CloneVolume", p.clone()), name, "{p}");
    }
    assert_eq!(
        err_name(&sh, "GetAsyncResult", json!({"asyncHandle": 999999999})),
        "xAsyncHandleDoesNotExist"
    );
}

#[test]
fn access_groups() {
    let sh = sim();
    let a = account(&sh, "a");
    let v1 = volume(&sh, a, "v1", GB);
    let v2 = volume(&sh, a, "v2", GB);
    let r = ok(&sh, "ListVolumeAccessGroups", json!({}));
    assert_eq!(r["volumeAccessGroups"][0]["name"], "trident");
    let g = ok(
        &sh,
        "CreateVolumeAccessGroup",
        json!({"name": "hosts", "initiators": ["iqn.1993-08.org.debian:01:abc"], "volumes": [v1]}),
    )["volumeAccessGroupID"]
        .as_u64()
        .unwrap();
    let r = ok(
        &sh,
        "ListVolumeAccessGroups",
        json!({"startVolumeAccessGroupID": g, "limit": 1}),
    );
    assert_eq!(ids(&r, "volumeAccessGroups", "volumeAccessGroupID"), [g]);
    assert_eq!(r["volumeAccessGroups"][0]["volumes"], json!([v1]));
    assert_eq!(
        err_name(
            &sh,
            "AddVolumesToVolumeAccessGroup",
            json!({"volumeAccessGroupID": g, "volumes": [v2, v1]})
        ),
        "xAlreadyInVolumeAccessGroup"
    );
    assert_eq!(
        sh.cluster.lock().unwrap().groups[&g].volumes,
        [v1],
        "nothing added"
    );
    ok(
        &sh,
        "AddVolumesToVolumeAccessGroup",
        json!({"volumeAccessGroupID": g, "volumes": [v2]}),
    );
    let vol = &ok(&sh, "ListVolumes", json!({"volumeIDs": [v2]}))["volumes"][0];
    assert_eq!(vol["volumeAccessGroups"], json!([g]));
    assert_eq!(
        err_name(
            &sh,
            "AddVolumesToVolumeAccessGroup",
            json!({"volumeAccessGroupID": 99, "volumes": [v2]})
        ),
        "xVolumeAccessGroupIDDoesNotExist"
    );
    assert_eq!(
        err_name(
            &sh,
            "AddVolumesToVolumeAccessGroup",
            json!({"volumeAccessGroupID": g, "volumes": [99]})
        ),
        "xVolumeIDDoesNotExist"
    );
    ok(&sh, "DeleteVolume", json!({"volumeID": v2}));
    let r = ok(
        &sh,
        "ListVolumeAccessGroups",
        json!({"startVolumeAccessGroupID": g}),
    );
    assert_eq!(r["volumeAccessGroups"][0]["deletedVolumes"], json!([v2]));
    ok(
        &sh,
        "RemoveVolumesFromVolumeAccessGroup",
        json!({"volumeAccessGroupID": g, "volumes": [v1]}),
    );
    assert_eq!(
        err_name(
            &sh,
            "RemoveVolumesFromVolumeAccessGroup",
            json!({"volumeAccessGroupID": g, "volumes": [v1]})
        ),
        "xNotInVolumeAccessGroup"
    );
    ok(
        &sh,
        "AddInitiatorsToVolumeAccessGroup",
        json!({"volumeAccessGroupID": g, "initiators": ["iqn.x:2"]}),
    );
    assert_eq!(
        err_name(
            &sh,
            "AddInitiatorsToVolumeAccessGroup",
            json!({"volumeAccessGroupID": g, "initiators": ["host1"]})
        ),
        "xInvalidParameter"
    );
    assert_eq!(sh.cluster.lock().unwrap().groups[&g].initiators.len(), 2);
    assert_eq!(
        err_name(&sh, "CreateVolumeAccessGroup", json!({"initiators": []})),
        "xInvalidParameter"
    );
}

#[test]
fn cluster_reads() {
    let sh = sim();
    let a = account(&sh, "a");
    volume(&sh, a, "v", GB);
    let c = ok(&sh, "GetClusterCapacity", json!({}))["clusterCapacity"].clone();
    assert_eq!(c["maxProvisionedSpace"], 10 * GB);
    assert_eq!(c["provisionedSpace"], GB);
    assert_eq!(c["maxIOPS"], 20_000);
    assert!(c["timestamp"].is_string());
    let i = ok(&sh, "GetClusterInfo", json!({}))["clusterInfo"].clone();
    assert_eq!(i["svip"], "127.0.0.1");
    assert_eq!(i["mvip"], "127.0.0.1");
    let q = ok(&sh, "GetDefaultQoS", json!({}));
    assert_eq!(
        (
            q["minIOPS"].clone(),
            q["maxIOPS"].clone(),
            q["burstIOPS"].clone()
        ),
        (json!(50), json!(15000), json!(15000))
    );
    let h = ok(&sh, "GetClusterHardwareInfo", json!({}));
    assert!(h["clusterHardwareInfo"]["nodes"]["1"]["serial"].is_string());
    let v = ok(&sh, "GetClusterVersionInfo", json!({}));
    assert_eq!(v["clusterAPIVersion"], "12.3");
}

#[test]
fn fault_injection_by_method() {
    let r = FailRule::parse("CloneVolume:1:xSliceNotRegistered").unwrap();
    assert_eq!(
        (r.method.as_str(), r.rate, r.name.as_str()),
        ("CloneVolume", 1.0, "xSliceNotRegistered")
    );
    assert_eq!(FailRule::parse("*:0.5").unwrap().name, "xDBConnectionLoss");
    for bad in ["x", "x:2", ":1", "x:0.5:oops", "x:1:xA:3", "x:y"] {
        assert!(FailRule::parse(bad).is_err(), "{bad}");
    }
    let sh = sim();
    let a = account(&sh, "a");
    *sh.fail.lock().unwrap() = vec![FailRule::parse("CreateVolume:1:xNotReadyForIO").unwrap()];
    let r = send(
        &sh,
        "8.0",
        "CreateVolume",
        json!({"name": "v", "accountID": a, "totalSize": GB,
        "enable512e": true, "qos": {}, "attributes": {}}),
    );
    assert_eq!(r["error"]["name"], "xNotReadyForIO");
    assert_eq!(r["error"]["code"], 500);
    assert!(r["error"]["message"].as_str().unwrap().contains("injected"));
    assert!(sh.cluster.lock().unwrap().volumes.is_empty());
    ok(&sh, "ListActiveVolumes", json!({}));
    *sh.fail.lock().unwrap() = vec![FailRule::parse("CreateVolume:0").unwrap()];
    volume(&sh, a, "v", GB);
    assert_eq!(sh.calls.lock().unwrap()["CreateVolume"], 2);
}

#[test]
fn state_survives_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sf.json");
    let o = SimOptions {
        state: Some(path.clone()),
        ..opts()
    };
    let (a, v, uid) = {
        let sh = shared(&o).unwrap();
        let a = account(&sh, "a");
        let v = volume(&sh, a, "keep", GB);
        ok(&sh, "CreateSnapshot", json!({"volumeID": v, "name": "s"}));
        ok(&sh, "CloneVolume", json!({"volumeID": v, "name": "c"}));
        let uid = sh.cluster.lock().unwrap().unique_id.clone();
        (a, v, uid)
    };
    let on_disk: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    assert_eq!(on_disk["format"], 1);
    let sh = shared(&o).unwrap();
    let c = sh.cluster.lock().unwrap().clone();
    assert_eq!(c.unique_id, uid);
    assert_eq!(c.volumes[&v].name, "keep");
    assert_eq!(c.volumes.len(), 2);
    assert_eq!(c.snapshots.len(), 1);
    assert_eq!(c.asyncs.len(), 1);
    assert_eq!(
        c.volumes[&(v + 1)].hidden_polls,
        2,
        "the clone is still pending"
    );
    let secret = c.accounts[&a].initiator_secret.clone();
    drop(c);
    let acct = ok(&sh, "GetAccountByID", json!({"accountID": a}))["account"].clone();
    assert_eq!(acct["initiatorSecret"], secret);
    assert_eq!(volume(&sh, a, "next", GB), v + 2, "ids continue");
    std::fs::write(&path, b"{}").unwrap();
    assert!(matches!(shared(&o), Err(SimError::State { .. })));
}

#[tokio::test]
async fn http_auth_paths_and_content_types() {
    let sim = SolidFireSim::start(SimOptions {
        cluster: ClusterSpec {
            tenant: Some("trident".into()),
            ..opts().cluster
        },
        ..opts()
    })
    .await
    .unwrap();
    let client = crate::net::client();
    let body = r#"{"method":"GetAccountByName","params":{"username":"trident"},"id":321}"#;
    let r = client
        .post(sim.endpoint("8.0"))
        .basic_auth("admin", Some("wrong"))
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 401);
    let r = client
        .post(sim.endpoint("8.0"))
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 401, "no credentials");
    let r = client
        .post(format!("{}/api/v1", sim.url()))
        .basic_auth(DEFAULT_USERNAME, Some(DEFAULT_PASSWORD))
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 404);
    let r = client
        .post(sim.endpoint("8.0"))
        .basic_auth(DEFAULT_USERNAME, Some(DEFAULT_PASSWORD))
        .header("Content-Type", "json-rpc")
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["id"], 321);
    assert_eq!(v["result"]["account"]["username"], "trident");
    let r = client
        .post(sim.endpoint("8.0"))
        .basic_auth(DEFAULT_USERNAME, Some(DEFAULT_PASSWORD))
        .body(r#"{"method":"GetAccountByName","params":{"username":"nobody"},"id":1}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200, "API errors are HTTP 200");
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["error"]["name"], "xUnknownAccount");
    assert_eq!(sim.calls("GetAccountByName"), 2);
    sim.stop().await;
}

#[test]
fn command_line_options() {
    use crate::sim::cli::{Cli, Command};
    use clap::Parser;
    let parse = |args: &[&str]| {
        let cli = Cli::try_parse_from([&["storch-sim", "solidfire"], args].concat())
            .map_err(|e| e.to_string())?;
        match cli.command {
            Command::Solidfire(a) => a.options(),
            _ => unreachable!(),
        }
    };
    let o = parse(&[
        "--capacity",
        "2TiB",
        "--tenant",
        "trident",
        "--svip",
        "10.0.0.2:3260",
        "--fail",
        "CloneVolume:0.5:xNotReadyForIO",
        "--page-size",
        "3",
        "--clone-polls",
        "4",
    ])
    .unwrap();
    assert_eq!(o.cluster.capacity, 2 << 40);
    assert_eq!(o.cluster.tenant.as_deref(), Some("trident"));
    assert_eq!(o.cluster.max_iops, DEFAULT_MAX_IOPS);
    assert_eq!(o.fail[0].name, "xNotReadyForIO");
    assert_eq!((o.tuning.page_cap, o.tuning.clone_polls), (3, 4));
    assert_eq!(o.username, DEFAULT_USERNAME);
    assert!(parse(&[]).unwrap_err().contains("--capacity"), "required");
    assert!(parse(&["--capacity", "lots"]).is_err());
    assert!(parse(&["--capacity", "1TiB", "--svip", "10.0.0.2"]).is_err());
    assert!(parse(&["--capacity", "1TiB", "--max-iops", "10"]).is_err());
    assert!(parse(&["--capacity", "1TiB", "--fail", "CloneVolume"]).is_err());
}
