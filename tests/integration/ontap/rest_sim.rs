//! The simulator's ONTAP REST API (`/api`, docs/wire-notes.md#the-rest-simulator) driven with
//! raw HTTPS requests: every resource's create/list/get/patch/delete, paging at a small page,
//! `fields=`, async jobs, the error codes of wire-protocols.md §5.6, ZAPI and REST over one
//! array, `--api` switching and persistence across a restart of the binary.

use crate::support::ontap::*;
use crate::support::sim_process::SimProcess;
use serde_json::{Value, json};
use storch::sim::ontap::{AggregateSpec, FailRule, SimOptions, UserScope};

#[tokio::test]
async fn cluster_svms_aggregates_interfaces_and_auth() {
    let dir = tempfile::tempdir().unwrap();
    let (_sim, rest) = rest_sim(
        dir.path(),
        SimOptions {
            aggregates: AggregateSpec::parse_list("aggr1:ssd:10TiB,aggr2:hdd:50TiB:no-nve")
                .unwrap(),
            ontap_version: Some([9, 15, 1]),
            ..SimOptions::default()
        },
    )
    .await;
    let c = rest.get("/cluster?fields=**").await;
    assert_eq!(
        c["version"],
        json!({"full": c["version"]["full"], "generation": 9, "major": 15, "minor": 1})
    );
    assert_eq!(
        (c["san_optimized"].clone(), c["disaggregated"].clone()),
        (json!(false), json!(false))
    );
    let v = rest.get("/cluster?fields=version.generation").await;
    assert_eq!(v["version"], json!({"generation": 9}));
    assert!(
        v.get("san_optimized").is_none(),
        "only what fields= asks, plus keys: {v}"
    );
    let e = rest
        .refused("GET", "/cluster?fields=no_such_field", None, 400, "2")
        .await;
    assert_eq!(e["target"], "fields");
    let v = rest
        .get("/cluster?fields=version,no_such_field&ignore_unknown_fields=true")
        .await;
    assert_eq!(v["version"]["major"], 15);

    let svms = rest.get("/svm/svms?name=svm1&fields=").await;
    assert_eq!(svms["num_records"], 1);
    let rec = svms["records"][0].as_object().unwrap();
    let mut keys: Vec<&String> = rec.keys().collect();
    keys.sort();
    assert_eq!(
        keys,
        ["name", "uuid"],
        "an empty fields= returns the keys only"
    );
    let none = rest.get("/svm/svms?name=nope&fields=").await;
    assert_eq!(
        (none["num_records"].clone(), none["records"].clone()),
        (json!(0), json!([]))
    );
    let svm = rest
        .get(&format!("/svm/svms/{}", rest.svm_uuid().await))
        .await;
    let aggrs: Vec<&str> = svm["aggregates"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["name"].as_str().unwrap())
        .collect();
    assert_eq!(aggrs, ["aggr1", "aggr2"]);

    let a = rest
        .get("/storage/aggregates?name=*&fields=block_storage.storage_type,is_nve_capable,space.block_storage.size")
        .await;
    let got: Vec<(Value, Value, Value)> = a["records"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["name"].clone(),
                r["block_storage"]["storage_type"].clone(),
                r["is_nve_capable"].clone(),
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            (json!("aggr1"), json!("ssd"), json!(true)),
            (json!("aggr2"), json!("hdd"), json!(false))
        ]
    );
    assert_eq!(
        a["records"][1]["space"]["block_storage"]["size"],
        50u64 << 40
    );

    let svm_uuid = rest.svm_uuid().await;
    let lifs = rest
        .get(&format!(
            "/network/ip/interfaces?svm.uuid={svm_uuid}&services=data_nfs&fields=ip.address,state"
        ))
        .await;
    let got: Vec<(Value, Value)> = lifs["records"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["ip"]["address"].clone(), r["state"].clone()))
        .collect();
    assert_eq!(
        got,
        [
            (json!("192.0.2.10"), json!("up")),
            (json!("192.0.2.19"), json!("down"))
        ]
    );
    let up = rest
        .get("/network/ip/interfaces?services=data_iscsi&state=up&fields=ip.address")
        .await;
    assert_eq!(up["num_records"], 2);
    let iscsi = rest
        .get(&format!("/protocols/san/iscsi/services?svm.uuid={svm_uuid}&return_records=true&fields=target.name,enabled"))
        .await;
    assert!(
        iscsi["records"][0]["target"]["name"]
            .as_str()
            .unwrap()
            .starts_with("iqn.1992-08.com.netapp:sn.")
    );
    let one = rest
        .get(&format!(
            "/protocols/san/iscsi/services/{svm_uuid}?fields=target.name"
        ))
        .await;
    assert_eq!(one["target"]["name"], iscsi["records"][0]["target"]["name"]);
    let nodes = rest.get("/cluster/nodes?fields=serial_number").await;
    assert_eq!(nodes["records"][0]["serial_number"], "4082368-50-7");

    // Authentication, unknown paths and methods.
    let mut bad = Rest::of(&_sim);
    bad.password = "wrong".into();
    let (s, v) = bad.call("GET", "/cluster", None).await;
    assert_eq!(s, 401, "{v}");
    rest.refused("GET", "/storage/nothing", None, 404, "4")
        .await;
    rest.refused("PUT", "/storage/volumes", None, 405, "3")
        .await;
}

#[tokio::test]
async fn an_svm_user_is_refused_cluster_resources() {
    let dir = tempfile::tempdir().unwrap();
    let (_sim, rest) = rest_sim(
        dir.path(),
        SimOptions {
            scope: UserScope::Svm("svm1".into()),
            ..SimOptions::default()
        },
    )
    .await;
    rest.refused("GET", "/storage/aggregates", None, 403, "13003")
        .await;
    let svms = rest.get("/svm/svms?fields=aggregates").await;
    assert_eq!(svms["num_records"], 1);
    assert_eq!(svms["records"][0]["aggregates"][0]["name"], "aggr1");
}

#[tokio::test]
async fn volumes_jobs_patches_and_errors() {
    let dir = tempfile::tempdir().unwrap();
    let (sim, rest) = rest_sim(
        dir.path(),
        SimOptions {
            aggregates: AggregateSpec::parse_list("aggr1:ssd:10TiB,aggr2:hdd:50TiB:no-nve")
                .unwrap(),
            tuning: storch::sim::ontap::Tuning {
                page_cap: 3,
                async_polls: 2,
            },
            ..SimOptions::default()
        },
    )
    .await;
    let body = json!({"name": "storch_v1", "svm": {"name": "svm1"}, "aggregates": [{"name": "aggr1"}],
        "size": 2u64 << 30, "style": "flexvol", "state": "online", "guarantee": {"type": "none"},
        "snapshot_policy": {"name": "none"}, "comment": "storch:abc",
        "nas": {"security_style": "unix", "unix_permissions": 755, "export_policy": {"name": "default"}}});
    let (s, v) = rest
        .call("POST", "/storage/volumes", Some(body.clone()))
        .await;
    assert_eq!(s, 202, "{v}");
    let href = v["job"]["_links"]["self"]["href"]
        .as_str()
        .unwrap()
        .to_string();
    let states: Vec<String> = {
        let mut out = Vec::new();
        for _ in 0..3 {
            out.push(
                rest.get(&format!("{href}?fields=state")).await["state"]
                    .as_str()
                    .unwrap()
                    .to_string(),
            );
        }
        out
    };
    assert_eq!(
        states,
        ["running", "running", "success"],
        "running for --async-polls polls"
    );
    let done = rest.get(&format!("{href}?fields=**")).await;
    assert_eq!(
        (done["state"].clone(), done["code"].clone()),
        (json!("success"), json!(0))
    );

    let uuid = rest.volume_uuid("storch_v1").await;
    let v = rest
        .get(
            "/storage/volumes?name=storch_*&style=flexvol&fields=size,comment,nas.unix_permissions",
        )
        .await;
    let r = &v["records"][0];
    assert_eq!(
        (
            r["size"].clone(),
            r["comment"].clone(),
            r["nas"]["unix_permissions"].clone()
        ),
        (json!(2u64 << 30), json!("storch:abc"), json!(755))
    );
    let full = rest.get(&format!("/storage/volumes/{uuid}")).await;
    assert_eq!(full["aggregates"][0]["name"], "aggr1");
    assert_eq!(full["guarantee"]["type"], "none");

    // Errors of a create, each changing nothing.
    rest.refused(
        "POST",
        "/storage/volumes",
        Some(body.clone()),
        409,
        "917526",
    )
    .await;
    let with = |k: &str, val: Value| {
        let mut b = body.clone();
        b["name"] = json!("storch_v2");
        b[k] = val;
        b
    };
    rest.refused(
        "POST",
        "/storage/volumes",
        Some(with("aggregates", json!([{"name": "nope"}]))),
        404,
        "917508",
    )
    .await;
    rest.refused(
        "POST",
        "/storage/volumes",
        Some(with("name", json!("2bad"))),
        400,
        "917887",
    )
    .await;
    rest.refused(
        "POST",
        "/storage/volumes",
        Some(with("name", json!("a".repeat(204)))),
        400,
        "917886",
    )
    .await;
    let e = rest
        .refused(
            "POST",
            "/storage/volumes",
            Some(with("colour", json!("red"))),
            400,
            "2",
        )
        .await;
    assert_eq!(e["target"], "colour", "an unknown field is named");
    let e = rest
        .refused(
            "POST",
            "/storage/volumes",
            Some(with("svm", json!({"name": "nope"}))),
            404,
            "2621462",
        )
        .await;
    assert_eq!(e["target"], "svm");
    let thick = with("guarantee", json!({"type": "volume"}));
    let mut huge = thick.clone();
    huge["size"] = json!(11u64 << 40);
    rest.refused("POST", "/storage/volumes", Some(huge), 400, "28")
        .await;
    let mut nve = with("aggregates", json!([{"name": "aggr2"}]));
    nve["encryption"] = json!({"enabled": true});
    rest.refused("POST", "/storage/volumes", Some(nve), 400, "13001")
        .await;
    let mut small = body.clone();
    small["name"] = json!("storch_small");
    small["size"] = json!(1 << 20);
    rest.refused("POST", "/storage/volumes", Some(small), 400, "2")
        .await;
    assert_eq!(
        rest.get("/storage/volumes?name=storch_*&fields=").await["num_records"],
        1
    );

    // One concern per PATCH.
    let path = format!("/storage/volumes/{uuid}");
    rest.job_ok("PATCH", &path, Some(json!({"size": 3u64 << 30})))
        .await;
    for (patch, field, want) in [
        (json!({"comment": "changed"}), "comment", json!("changed")),
        (
            json!({"nas": {"path": "/storch_v1"}}),
            "nas.path",
            json!("/storch_v1"),
        ),
        (
            json!({"nas": {"unix_permissions": 700}}),
            "nas.unix_permissions",
            json!(700),
        ),
        (
            json!({"snapshot_directory_access_enabled": false}),
            "snapshot_directory_access_enabled",
            json!(false),
        ),
        (
            json!({"quota": {"enabled": true}}),
            "quota.enabled",
            json!(true),
        ),
        (json!({"nas": {"path": ""}}), "nas.path", json!("")),
    ] {
        let (s, v) = rest.call("PATCH", &path, Some(patch.clone())).await;
        assert_eq!(s, 200, "{patch}: {v}");
        let got = rest.get(&format!("{path}?fields={field}")).await;
        let mut cur = &got;
        for p in field.split('.') {
            cur = &cur[p];
        }
        assert_eq!(*cur, want, "{patch}");
    }
    assert_eq!(
        rest.get(&format!("{path}?fields=size")).await["size"],
        3u64 << 30
    );
    let e = rest
        .refused("PATCH", &path, Some(json!({"colour": "red"})), 400, "2")
        .await;
    assert_eq!(e["target"], "colour");
    rest.refused(
        "PATCH",
        &path,
        Some(json!({"nas": {"export_policy": {"name": "nope"}}})),
        400,
        "13001",
    )
    .await;
    rest.refused("PATCH", &path, Some(json!({"size": 1})), 400, "917534")
        .await;
    rest.refused(
        "GET",
        "/storage/volumes/00000000-0000-0000-0000-000000000000",
        None,
        404,
        "4",
    )
    .await;

    rest.job_ok("DELETE", &path, None).await;
    rest.refused("GET", &path, None, 404, "4").await;
    assert!(!sim.array().svms["svm1"].volumes.contains_key("storch_v1"));
}

/// A create takes the volume's junction (`nas.path`) and snapshot directory
/// (`snapshot_directory_access_enabled`) and applies both in its job, for a FlexVol, a
/// FlexGroup and a clone alike; a wrong value or a field the create does not take (`quota`,
/// set by a PATCH; a clone's `size`) is refused naming it, and makes nothing.
#[tokio::test]
async fn a_create_takes_its_junction_and_snapshot_directory() {
    let dir = tempfile::tempdir().unwrap();
    let (sim, rest) = rest_sim(dir.path(), SimOptions::default()).await;
    let svm = rest.svm_uuid().await;
    let flexvol = json!({"name": "storch_j1", "svm": {"uuid": svm}, "aggregates": [{"name": "aggr1"}],
        "size": 1u64 << 30, "style": "flexvol", "snapshot_directory_access_enabled": false,
        "nas": {"path": "/storch_j1", "security_style": "unix"}});
    let flexgroup = json!({"name": "storch_j2", "svm": {"uuid": svm},
        "aggregates": [{"name": "aggr1"}, {"name": "aggr2"}], "size": 4u64 << 30,
        "style": "flexgroup", "snapshot_directory_access_enabled": false, "nas": {"path": "/storch_j2"}});
    let clone = json!({"name": "storch_j3", "svm": {"uuid": svm},
        "clone": {"parent_volume": {"name": "storch_j1"}, "is_flexclone": true},
        "snapshot_directory_access_enabled": false, "nas": {"path": "/storch_j3"}});
    for body in [flexvol.clone(), flexgroup, clone.clone()] {
        rest.job_ok("POST", "/storage/volumes", Some(body.clone()))
            .await;
        let name = body["name"].as_str().unwrap();
        let v = rest
            .get(&format!(
                "/storage/volumes?name={name}&fields=nas.path,snapshot_directory_access_enabled"
            ))
            .await;
        let r = &v["records"][0];
        assert_eq!(
            (
                r["nas"]["path"].clone(),
                r["snapshot_directory_access_enabled"].clone()
            ),
            (json!(format!("/{name}")), json!(false)),
            "{name}"
        );
    }
    let patches: u64 = sim
        .call_counts()
        .iter()
        .filter(|(k, _)| k.starts_with("PATCH "))
        .map(|(_, n)| n)
        .sum();
    assert_eq!(patches, 0);

    let with = |k: &str, val: Value| {
        let mut b = flexvol.clone();
        b["name"] = json!("storch_j4");
        b[k] = val;
        b
    };
    for (field, bad) in [
        ("snapshot_directory_access_enabled", json!("no")),
        ("quota", json!({"enabled": true})),
    ] {
        let e = rest
            .refused("POST", "/storage/volumes", Some(with(field, bad)), 400, "2")
            .await;
        assert!(
            e["target"].as_str().unwrap().starts_with(field),
            "{field}: {e}"
        );
    }
    // A clone has its parent's size: the create of one does not take it.
    let mut sized = clone.clone();
    sized["name"] = json!("storch_j4");
    sized["size"] = json!(1u64 << 30);
    let e = rest
        .refused("POST", "/storage/volumes", Some(sized), 400, "2")
        .await;
    assert_eq!(e["target"], "size");
    assert_eq!(
        array_volumes(&sim, "svm1"),
        ["storch_j1", "storch_j2", "storch_j3"]
    );
}

#[tokio::test]
async fn flexgroups_snapshots_and_clones() {
    let dir = tempfile::tempdir().unwrap();
    let (_sim, rest) = rest_sim(dir.path(), SimOptions::default()).await;
    let svm = rest.svm_uuid().await;
    let fg = json!({"name": "storch_fg", "svm": {"uuid": svm}, "aggregates": [{"name": "aggr1"}, {"name": "aggr2"}],
        "style": "flexgroup", "size": 4u64 << 30, "constituents_per_aggregate": 2, "guarantee": {"type": "none"}});
    rest.job_ok("POST", "/storage/volumes", Some(fg)).await;
    let v = rest
        .get("/storage/volumes?style=flexgroup&fields=aggregates.name")
        .await;
    assert_eq!(
        v["records"][0]["aggregates"],
        json!([{"name": "aggr1"}, {"name": "aggr2"}])
    );
    let fg_uuid = v["records"][0]["uuid"].as_str().unwrap().to_string();
    rest.job_ok(
        "PATCH",
        &format!("/storage/volumes/{fg_uuid}"),
        Some(json!({"size": 5u64 << 30})),
    )
    .await;
    rest.job_ok("DELETE", &format!("/storage/volumes/{fg_uuid}"), None)
        .await;

    let parent = rest.make_volume("storch_parent", 1 << 30).await;
    let snaps = format!("/storage/volumes/{parent}/snapshots");
    rest.job_ok(
        "POST",
        &snaps,
        Some(json!({"name": "snap1", "svm": {"uuid": svm}})),
    )
    .await;
    rest.refused("POST", &snaps, Some(json!({"name": "snap1"})), 409, "1")
        .await;
    let list = rest
        .get(&format!("{snaps}?fields=name,create_time&name=snap1"))
        .await;
    assert_eq!(list["num_records"], 1);
    let snap_uuid = list["records"][0]["uuid"].as_str().unwrap().to_string();
    assert!(
        list["records"][0]["create_time"]
            .as_str()
            .unwrap()
            .ends_with('Z')
    );
    assert_eq!(
        rest.get(&format!("{snaps}/{snap_uuid}")).await["name"],
        "snap1"
    );

    let clone = json!({"name": "storch_clone", "svm": {"uuid": svm},
        "clone": {"parent_volume": {"name": "storch_parent"}, "parent_snapshot": {"name": "snap1"}, "is_flexclone": true}});
    rest.job_ok("POST", "/storage/volumes?return_records=true", Some(clone))
        .await;
    let orphan = json!({"name": "storch_orphan", "svm": {"uuid": svm}, "clone": {"parent_volume": {"name": "nope"}}});
    rest.refused("POST", "/storage/volumes", Some(orphan), 404, "524601")
        .await;
    let kids = rest
        .get("/storage/volumes?clone.parent_volume.name=storch_parent&clone.parent_snapshot.name=snap1&fields=name")
        .await;
    assert_eq!(kids["records"][0]["name"], "storch_clone");

    rest.refused(
        "DELETE",
        &format!("/storage/volumes/{parent}"),
        None,
        409,
        "524615",
    )
    .await;
    let j = rest
        .job("DELETE", &format!("{snaps}/{snap_uuid}"), None)
        .await;
    assert_eq!(
        (j["state"].clone(), j["code"].clone()),
        (json!("failure"), json!(1638555)),
        "{j}"
    );
    assert_eq!(j["error"]["code"], "1638555");

    let clone_uuid = rest.volume_uuid("storch_clone").await;
    let (s, _) = rest
        .call(
            "PATCH",
            &format!("/storage/volumes/{clone_uuid}"),
            Some(json!({"clone": {"split_initiated": true}})),
        )
        .await;
    assert_eq!(s, 200);
    rest.job_ok("DELETE", &format!("{snaps}/{snap_uuid}"), None)
        .await;
    rest.refused("DELETE", &format!("{snaps}/{snap_uuid}"), None, 404, "4")
        .await;
    rest.job_ok("DELETE", &format!("/storage/volumes/{parent}"), None)
        .await;
    rest.job_ok("DELETE", &format!("/storage/volumes/{clone_uuid}"), None)
        .await;
}

#[tokio::test]
async fn collections_page_filter_and_project() {
    let dir = tempfile::tempdir().unwrap();
    let (_sim, rest) = rest_sim(dir.path(), SimOptions::default()).await;
    for i in 0..7 {
        rest.make_volume(&format!("pg_{i}"), 100 << 20).await;
    }
    let (all, pages) = rest
        .all("/storage/volumes?name=pg_*&max_records=2&fields=size")
        .await;
    assert_eq!(pages, [2, 2, 2, 1]);
    let names: Vec<&str> = all.iter().map(|r| r["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        ["pg_0", "pg_1", "pg_2", "pg_3", "pg_4", "pg_5", "pg_6"]
    );
    assert!(
        all.iter()
            .all(|r| r["size"] == (100u64 << 20) && r.get("comment").is_none())
    );
    let (_, pages) = rest.all("/storage/volumes?name=pg_*&max_records=50").await;
    assert_eq!(
        pages,
        [3, 3, 1],
        "pages are capped at the simulator's page size"
    );
    let (others, _) = rest.all("/storage/volumes?name=!pg_*&fields=").await;
    assert_eq!(others.len(), 1, "only the root volume: {others:?}");
    let (some, _) = rest.all("/storage/volumes?name=pg_1|pg_5").await;
    assert_eq!(some.len(), 2);
    rest.refused("GET", "/storage/volumes?colour=red", None, 400, "2")
        .await;
    rest.refused("GET", "/storage/volumes?max_records=0", None, 400, "2")
        .await;
}

#[tokio::test]
async fn qtrees_and_quota_rules() {
    let dir = tempfile::tempdir().unwrap();
    let (_sim, rest) = rest_sim(dir.path(), SimOptions::default()).await;
    let svm = rest.svm_uuid().await;
    let vol = rest.make_volume("storch_eco", 1 << 30).await;
    let q = json!({"name": "qt1", "volume": {"name": "storch_eco"}, "svm": {"uuid": svm},
                   "unix_permissions": 750, "export_policy": {"name": "default"}, "security_style": "unix"});
    let (s, v) = rest
        .call(
            "POST",
            "/storage/qtrees?return_records=true",
            Some(q.clone()),
        )
        .await;
    assert_eq!(s, 201, "{v}");
    let id = v["records"][0]["id"].as_u64().unwrap();
    assert_eq!(v["records"][0]["unix_permissions"], 750);
    rest.refused("POST", "/storage/qtrees", Some(q.clone()), 409, "1")
        .await;
    let mut nov = q.clone();
    nov["volume"] = json!({"name": "nope"});
    rest.refused("POST", "/storage/qtrees", Some(nov), 404, "917927")
        .await;
    let list = rest
        .get(&format!(
            "/storage/qtrees?svm.uuid={svm}&volume.name=storch_eco&fields=name,id"
        ))
        .await;
    let got: Vec<(Value, Value)> = list["records"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["name"].clone(), r["id"].clone()))
        .collect();
    assert_eq!(
        got,
        [(json!(""), json!(0)), (json!("qt1"), json!(id))],
        "the volume's own qtree 0 comes first"
    );
    let qpath = format!("/storage/qtrees/{vol}/{id}");
    assert_eq!(rest.get(&qpath).await["name"], "qt1");
    let (s, _) = rest
        .call("PATCH", &qpath, Some(json!({"name": "qt2"})))
        .await;
    assert_eq!(s, 200);
    assert_eq!(rest.get(&qpath).await["name"], "qt2");

    let rule = json!({"volume": {"name": "storch_eco"}, "qtree": {"name": "qt2"}, "type": "tree",
                      "svm": {"uuid": svm}, "space": {"hard_limit": 1u64 << 30}});
    let (s, v) = rest
        .call("POST", "/storage/quota/rules", Some(rule.clone()))
        .await;
    assert_eq!(s, 201, "{v}");
    rest.refused("POST", "/storage/quota/rules", Some(rule), 409, "1")
        .await;
    let rules = rest
        .get(&format!("/storage/quota/rules?svm.uuid={svm}&volume.name=storch_eco&qtree.name=qt2&type=tree&fields=uuid,space.hard_limit"))
        .await;
    assert_eq!(rules["records"][0]["space"]["hard_limit"], 1u64 << 30);
    let ruuid = rules["records"][0]["uuid"].as_str().unwrap().to_string();
    let (s, _) = rest
        .call(
            "PATCH",
            &format!("/storage/quota/rules/{ruuid}"),
            Some(json!({"space": {"hard_limit": 2u64 << 30}})),
        )
        .await;
    assert_eq!(s, 200);
    assert_eq!(
        rest.get(&format!("/storage/quota/rules/{ruuid}")).await["space"]["hard_limit"],
        2u64 << 30
    );
    let (s, _) = rest
        .call("DELETE", &format!("/storage/quota/rules/{ruuid}"), None)
        .await;
    assert_eq!(s, 200);
    rest.refused(
        "DELETE",
        &format!("/storage/quota/rules/{ruuid}"),
        None,
        404,
        "4",
    )
    .await;

    rest.job_ok("DELETE", &qpath, None).await;
    rest.refused("DELETE", &qpath, None, 404, "5242927").await;
}

#[tokio::test]
async fn luns_igroups_and_maps() {
    let dir = tempfile::tempdir().unwrap();
    let (_sim, rest) = rest_sim(dir.path(), SimOptions::default()).await;
    let svm = rest.svm_uuid().await;
    rest.make_volume("storch_san", 2 << 30).await;
    let lun = json!({"name": "/vol/storch_san/lun0", "os_type": "linux", "space": {"size": 1u64 << 30,
        "guarantee": {"requested": false}}, "svm": {"uuid": svm}, "comment": "storch:abc"});
    let (s, v) = rest
        .call(
            "POST",
            "/storage/luns?return_records=true",
            Some(lun.clone()),
        )
        .await;
    assert_eq!(s, 201, "{v}");
    assert_eq!(v["num_records"], 1);
    let l = &v["records"][0];
    assert_eq!(
        l["space"]["size"], 1_077_511_680u64,
        "rounded up to whole cylinders"
    );
    assert_eq!(l["comment"], "storch:abc");
    let lun_uuid = l["uuid"].as_str().unwrap().to_string();
    rest.refused("POST", "/storage/luns", Some(lun.clone()), 409, "5374242")
        .await;
    let mut big = lun.clone();
    big["name"] = json!("/vol/storch_san/lun1");
    big["space"]["size"] = json!(2u64 << 30);
    rest.refused("POST", "/storage/luns", Some(big.clone()), 400, "28")
        .await;
    big["name"] = json!("/vol/nope/lun1");
    rest.refused("POST", "/storage/luns", Some(big.clone()), 404, "917927")
        .await;
    big["name"] = json!("/vol/storch_san/tiny");
    big["space"]["size"] = json!(0);
    let found = rest
        .get("/storage/luns?name=/vol/storch_san/*&fields=serial_number,space.size,comment")
        .await;
    assert_eq!(found["num_records"], 1);
    assert_eq!(
        found["records"][0]["serial_number"].as_str().unwrap().len(),
        12
    );
    let (s, _) = rest
        .call(
            "PATCH",
            &format!("/storage/luns/{lun_uuid}"),
            Some(json!({"comment": "c2"})),
        )
        .await;
    assert_eq!(s, 200);
    let (s, v) = rest
        .call(
            "PATCH",
            &format!("/storage/luns/{lun_uuid}"),
            Some(json!({"space": {"size": 1_500_000_000u64}})),
        )
        .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(
        rest.get(&format!("/storage/luns/{lun_uuid}?fields=comment"))
            .await["comment"],
        "c2"
    );

    let ig = json!({"name": "storch-node-3", "protocol": "iscsi", "os_type": "linux", "svm": {"uuid": svm}});
    let (s, v) = rest
        .call(
            "POST",
            "/protocols/san/igroups?return_records=true",
            Some(ig.clone()),
        )
        .await;
    assert_eq!((s, v["num_records"].clone()), (201, json!(1)), "{v}");
    let ig_uuid = v["records"][0]["uuid"].as_str().unwrap().to_string();
    rest.refused("POST", "/protocols/san/igroups", Some(ig), 409, "5374023")
        .await;
    let inits = format!("/protocols/san/igroups/{ig_uuid}/initiators");
    let iqn = "iqn.1993-08.org.debian:01:abc";
    let (s, _) = rest.call("POST", &inits, Some(json!({"name": iqn}))).await;
    assert_eq!(s, 201);
    rest.refused("POST", &inits, Some(json!({"name": iqn})), 409, "5374035")
        .await;
    let g = rest
        .get("/protocols/san/igroups?name=storch-node-3&fields=initiators")
        .await;
    assert_eq!(g["records"][0]["initiators"], json!([{"name": iqn}]));

    let map = json!({"igroup": {"name": "storch-node-3"}, "lun": {"name": "/vol/storch_san/lun0"}, "svm": {"uuid": svm}});
    let (s, v) = rest
        .call(
            "POST",
            "/protocols/san/lun-maps?return_records=true",
            Some(map.clone()),
        )
        .await;
    assert_eq!(s, 201, "{v}");
    assert_eq!(
        v["records"][0]["logical_unit_number"], 0,
        "ONTAP picks the number"
    );
    rest.refused("POST", "/protocols/san/lun-maps", Some(map), 409, "1254207")
        .await;
    let bad_map = json!({"igroup": {"name": "storch-node-3"}, "lun": {"name": "/vol/storch_san/none"}, "svm": {"uuid": svm}});
    rest.refused(
        "POST",
        "/protocols/san/lun-maps",
        Some(bad_map),
        404,
        "1254201",
    )
    .await;
    let maps = rest
        .get("/protocols/san/lun-maps?lun.name=/vol/storch_san/lun0&igroup.name=storch-node-3&fields=svm,lun,igroup,logical-unit-number")
        .await;
    assert_eq!(maps["records"][0]["logical_unit_number"], 0);

    rest.refused(
        "DELETE",
        &format!("/storage/luns/{lun_uuid}"),
        None,
        409,
        "1254197",
    )
    .await;
    rest.refused(
        "DELETE",
        &format!("/protocols/san/igroups/{ig_uuid}"),
        None,
        409,
        "1254213",
    )
    .await;
    let unmap = format!("/protocols/san/lun-maps/{lun_uuid}/{ig_uuid}");
    assert_eq!(rest.call("DELETE", &unmap, None).await.0, 200);
    rest.refused("DELETE", &unmap, None, 404, "5374922").await;
    assert_eq!(
        rest.call("DELETE", &format!("{inits}/{iqn}"), None).await.0,
        200
    );
    assert_eq!(
        rest.call("DELETE", &format!("/storage/luns/{lun_uuid}"), None)
            .await
            .0,
        200
    );
    rest.refused(
        "DELETE",
        &format!("/storage/luns/{lun_uuid}"),
        None,
        404,
        "5374875",
    )
    .await;
    assert_eq!(
        rest.call("DELETE", &format!("/protocols/san/igroups/{ig_uuid}"), None)
            .await
            .0,
        200
    );
    rest.refused(
        "DELETE",
        &format!("/protocols/san/igroups/{ig_uuid}"),
        None,
        404,
        "5374852",
    )
    .await;
    rest.refused("POST", "/storage/luns", Some(big), 400, "5374124")
        .await;
}

#[tokio::test]
async fn export_policies_and_rules() {
    let dir = tempfile::tempdir().unwrap();
    let (_sim, rest) = rest_sim(dir.path(), SimOptions::default()).await;
    let svm = rest.svm_uuid().await;
    let (s, v) = rest
        .call(
            "POST",
            "/protocols/nfs/export-policies",
            Some(json!({"name": "storch_p", "svm": {"uuid": svm}})),
        )
        .await;
    assert_eq!(s, 201, "{v}");
    rest.refused(
        "POST",
        "/protocols/nfs/export-policies",
        Some(json!({"name": "storch_p", "svm": {"uuid": svm}})),
        409,
        "1",
    )
    .await;
    let p = rest
        .get(&format!(
            "/protocols/nfs/export-policies?svm.uuid={svm}&name=storch_p&fields="
        ))
        .await;
    let id = p["records"][0]["id"].as_u64().unwrap();
    let rules = format!("/protocols/nfs/export-policies/{id}/rules");
    let rule = json!({"clients": [{"match": "10.0.0.1"}], "protocols": ["nfs"], "ro_rule": ["any"],
                      "rw_rule": ["any"], "superuser": ["any"]});
    let (s, v) = rest.call("POST", &rules, Some(rule.clone())).await;
    assert_eq!(s, 201, "{v}");
    rest.refused("POST", &rules, Some(rule.clone()), 409, "1704070")
        .await;
    rest.refused(
        "POST",
        "/protocols/nfs/export-policies/1/rules",
        Some(rule),
        404,
        "1703954",
    )
    .await;
    let list = rest.get(&format!("{rules}?fields=clients")).await;
    assert_eq!(
        list["records"][0]["clients"],
        json!([{"match": "10.0.0.1"}])
    );
    let index = list["records"][0]["index"].as_u64().unwrap();

    let vol = rest.make_volume("storch_exp", 100 << 20).await;
    let (s, _) = rest
        .call(
            "PATCH",
            &format!("/storage/volumes/{vol}"),
            Some(json!({"nas": {"export_policy": {"name": "storch_p"}}})),
        )
        .await;
    assert_eq!(s, 200);
    rest.refused(
        "DELETE",
        &format!("/protocols/nfs/export-policies/{id}"),
        None,
        409,
        "1703945",
    )
    .await;
    assert_eq!(
        rest.call("DELETE", &format!("{rules}/{index}"), None)
            .await
            .0,
        200
    );
    rest.refused("DELETE", &format!("{rules}/{index}"), None, 404, "4")
        .await;
    rest.job_ok("DELETE", &format!("/storage/volumes/{vol}"), None)
        .await;
    assert_eq!(
        rest.call(
            "DELETE",
            &format!("/protocols/nfs/export-policies/{id}"),
            None
        )
        .await
        .0,
        200
    );
}

#[tokio::test]
async fn zapi_and_rest_share_one_array() {
    let dir = tempfile::tempdir().unwrap();
    let (_sim, rest) = rest_sim(dir.path(), SimOptions::default()).await;
    let out = zapi(
        &rest,
        "<volume-create><volume>from_zapi</volume><containing-aggr-name>aggr1</containing-aggr-name>\
         <size>1g</size><volume-comment>z</volume-comment></volume-create>",
    )
    .await;
    assert!(
        out.contains("status='passed'") || out.contains("status=\"passed\""),
        "{out}"
    );
    let v = rest
        .get("/storage/volumes?name=from_zapi&fields=comment,size")
        .await;
    assert_eq!(
        (
            v["records"][0]["comment"].clone(),
            v["records"][0]["size"].clone()
        ),
        (json!("z"), json!(1u64 << 30))
    );
    rest.make_volume("from_rest", 1 << 30).await;
    let out = zapi(
        &rest,
        "<volume-get-iter><query><volume-attributes><volume-id-attributes><name>from_rest</name>\
         </volume-id-attributes></volume-attributes></query></volume-get-iter>",
    )
    .await;
    assert!(out.contains("<num-records>1</num-records>"), "{out}");
    // A duplicate made over one API is refused over the other.
    let body = json!({"name": "from_zapi", "svm": {"name": "svm1"}, "aggregates": [{"name": "aggr1"}], "size": 1u64 << 30});
    rest.refused("POST", "/storage/volumes", Some(body), 409, "917526")
        .await;
    let out = zapi(&rest, "<system-get-version/>").await;
    assert!(out.contains("NetApp Release 9.8.0"), "{out}");
}

#[tokio::test]
async fn injected_rest_faults_sync_and_through_jobs() {
    let dir = tempfile::tempdir().unwrap();
    let (sim, rest) = rest_sim(dir.path(), SimOptions::default()).await;
    let body = json!({"name": "storch_f", "svm": {"name": "svm1"}, "aggregates": [{"name": "aggr1"}], "size": 1u64 << 30});
    sim.set_fail_rules(vec![
        FailRule::parse("POST@storage/volumes:1:409/13107405").unwrap(),
    ]);
    rest.refused(
        "POST",
        "/storage/volumes",
        Some(body.clone()),
        409,
        "13107405",
    )
    .await;
    sim.set_fail_rules(vec![FailRule::parse("volume-create:1").unwrap()]);
    rest.job_ok("POST", "/storage/volumes", Some(body)).await;
    let uuid = rest.volume_uuid("storch_f").await;
    sim.set_fail_rules(vec![
        FailRule::parse("DELETE@storage/volumes/*:1:job/524486").unwrap(),
    ]);
    let j = rest
        .job("DELETE", &format!("/storage/volumes/{uuid}"), None)
        .await;
    assert_eq!(
        (j["state"].clone(), j["code"].clone()),
        (json!("failure"), json!(524486)),
        "{j}"
    );
    assert_eq!(
        rest.volume_uuid("storch_f").await,
        uuid,
        "a failed job changed nothing"
    );
    sim.set_fail_rules(vec![FailRule::parse("GET@cluster:1:403/6").unwrap()]);
    rest.refused("GET", "/cluster", None, 403, "6").await;
    // Busy twice, then the volume frees up.
    sim.set_fail_rules(vec![
        FailRule::parse("DELETE@storage/volumes/*:1:409/524486:2").unwrap(),
    ]);
    let del = format!("/storage/volumes/{uuid}");
    rest.refused("DELETE", &del, None, 409, "524486").await;
    rest.refused("DELETE", &del, None, 409, "524486").await;
    rest.job_ok(
        "DELETE",
        &format!("/storage/volumes/{uuid}?return_timeout=0"),
        None,
    )
    .await;
    assert_eq!(
        sim.most_concurrent_requests(),
        1,
        "one request at a time so far"
    );
    assert!(sim.calls("POST /api/storage/volumes") >= 2);
    for bad in [
        "POST@:1",
        "POST@x:2",
        "POST@x:1:abc",
        "POST@x:1:200/5",
        "POST@x:1:409",
        "POST@x:1:409/1:0",
        "POST@x:1:409/1:2:3",
    ] {
        assert!(FailRule::parse(bad).is_err(), "{bad}");
    }
}

#[test]
fn api_switching_and_persistence_with_the_binary() {
    let dir = tempfile::tempdir().unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    {
        let sim = SimProcess::spawn(dir.path(), "ontap", &["--api", "rest"]);
        let rest = Rest::new(&sim.addr, &sim.ca_pem());
        rt.block_on(async {
            let c = rest.get("/cluster?fields=version").await;
            assert_eq!(
                (c["version"]["major"].clone(), c["version"]["minor"].clone()),
                (json!(15), json!(1))
            );
            let (s, _) = rest.call("POST", storch::sim::ontap::SERVLET, None).await;
            assert_eq!(s, 404, "ZAPI is switched off");
            rest.make_volume("kept", 1 << 30).await;
        });
    }
    {
        let sim = SimProcess::spawn(dir.path(), "ontap", &["--api", "zapi"]);
        let rest = Rest::new(&sim.addr, &sim.ca_pem());
        rt.block_on(async {
            let (s, _) = rest.call("GET", "/cluster", None).await;
            assert_eq!(s, 404, "REST is switched off");
            let out = zapi(&rest, "<volume-get-iter><query><volume-attributes><volume-id-attributes><name>kept</name></volume-id-attributes></volume-attributes></query></volume-get-iter>").await;
            assert!(out.contains("<num-records>1</num-records>"), "the REST volume survived the restart: {out}");
        });
    }
    let sim = SimProcess::spawn(
        dir.path(),
        "ontap",
        &["--api", "both", "--ontap-version", "9.16.1"],
    );
    let rest = Rest::new(&sim.addr, &sim.ca_pem());
    rt.block_on(async {
        rest.volume_uuid("kept").await;
        // The state file keeps the release of the array it was made with.
        assert_eq!(
            rest.get("/cluster?fields=version").await["version"]["major"],
            15
        );
    });
}

#[tokio::test]
async fn new_objects_show_up_in_lookups_after_a_while() {
    let dir = tempfile::tempdir().unwrap();
    let (_sim, rest) = rest_sim(
        dir.path(),
        SimOptions {
            visible_after: 2,
            ..SimOptions::default()
        },
    )
    .await;
    let body = json!({"name": "late", "svm": {"name": "svm1"}, "aggregates": [{"name": "aggr1"}],
                      "size": 1u64 << 30});
    rest.job_ok("POST", "/storage/volumes", Some(body.clone()))
        .await;
    for _ in 0..2 {
        let v = rest.get("/storage/volumes?name=late&fields=").await;
        assert_eq!(v["num_records"], 0, "not listed yet: {v}");
    }
    // A second create meanwhile is still a duplicate.
    rest.refused("POST", "/storage/volumes", Some(body), 409, "917526")
        .await;
    rest.volume_uuid("late").await;
}
