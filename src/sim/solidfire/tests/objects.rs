//! Accounts, snapshots, clones, access groups and cluster reads.

use serde_json::json;

use super::*;

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
    assert_eq!(sh.store.lock().accounts.len(), 2);
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
        sh.store.lock().snapshots.is_empty(),
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
    let c = sh.store.lock().volumes[&clone].clone();
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
    assert_eq!(
        err_name(&sh, "ListVolumeAccessGroups", json!({"limit": 0})),
        "xInvalidParameter"
    );
    assert_eq!(r["volumeAccessGroups"][0]["volumes"], json!([v1]));
    assert_eq!(
        err_name(
            &sh,
            "AddVolumesToVolumeAccessGroup",
            json!({"volumeAccessGroupID": g, "volumes": [v2, v1]})
        ),
        "xAlreadyInVolumeAccessGroup"
    );
    assert_eq!(sh.store.lock().groups[&g].volumes, [v1], "nothing added");
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
        json!({"volumeAccessGroupID": g, "initiators": ["iqn.2020-01.io.x:2"]}),
    );
    for bad in ["host1", "iqn.x:2", "iqn.2020-01.io.x:UPPER"] {
        assert_eq!(
            err_name(
                &sh,
                "AddInitiatorsToVolumeAccessGroup",
                json!({"volumeAccessGroupID": g, "initiators": [bad]})
            ),
            "xInvalidParameter",
            "{bad}"
        );
    }
    assert_eq!(sh.store.lock().groups[&g].initiators.len(), 2);
    assert_eq!(
        err_name(&sh, "CreateVolumeAccessGroup", json!({"initiators": []})),
        "xInvalidParameter"
    );
    // One group per initiator; a deleted group frees its initiators.
    assert_eq!(
        err_name(
            &sh,
            "CreateVolumeAccessGroup",
            json!({"name": "again", "initiators": ["iqn.2020-01.io.x:2"]})
        ),
        "xInitiatorExists"
    );
    ok(
        &sh,
        "DeleteVolumeAccessGroup",
        json!({"volumeAccessGroupID": g, "deleteOrphanInitiators": true}),
    );
    assert_eq!(
        err_name(
            &sh,
            "DeleteVolumeAccessGroup",
            json!({"volumeAccessGroupID": g})
        ),
        "xVolumeAccessGroupIDDoesNotExist"
    );
    ok(
        &sh,
        "CreateVolumeAccessGroup",
        json!({"name": "again", "initiators": ["iqn.2020-01.io.x:2"]}),
    );
}

#[test]
fn access_group_limits() {
    let sh = sim();
    let a = account(&sh, "a");
    let v = volume(&sh, a, "v", GB);
    let many = |n: usize, tag: &str| -> Vec<String> {
        (0..n)
            .map(|i| format!("iqn.2020-01.io.x:{tag}-{i}"))
            .collect()
    };
    assert_eq!(
        err_name(
            &sh,
            "CreateVolumeAccessGroup",
            json!({"name": "big", "initiators": many(65, "a")})
        ),
        "xExceededLimit"
    );
    let g = ok(
        &sh,
        "CreateVolumeAccessGroup",
        json!({"name": "full", "initiators": many(64, "b")}),
    )["volumeAccessGroupID"]
        .as_u64()
        .unwrap();
    assert_eq!(
        err_name(
            &sh,
            "AddInitiatorsToVolumeAccessGroup",
            json!({"volumeAccessGroupID": g, "initiators": many(1, "c")})
        ),
        "xExceededLimit"
    );
    // A volume is in at most 64 groups (the trident group is one of none here).
    for i in 0..64 {
        ok(
            &sh,
            "CreateVolumeAccessGroup",
            json!({"name": format!("g{i}"), "volumes": [v]}),
        );
    }
    assert_eq!(
        err_name(
            &sh,
            "CreateVolumeAccessGroup",
            json!({"name": "one-too-many", "volumes": [v]})
        ),
        "xExceededLimit"
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
