//! Volumes: create, refusals, paged lists, modify, delete and purge.

use serde_json::{Value, json};

use super::*;

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
    assert!(sh.store.lock().volumes.is_empty());
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
    let c = sh.store.lock();
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
