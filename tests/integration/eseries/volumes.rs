//! Pools and volumes: the pool objects, volume create with the proxy's request checks,
//! labels, units, segment sizes, data assurance, space accounting, reads and deletes.

use serde_json::{Value, json};

use super::sim::*;

const LONG: &str = "trident_K3w1cQ9sT2mAbcdEfgh12";

#[tokio::test]
async fn pools_are_volume_groups_and_disk_pools() {
    let a = Sys::start(&[]).await;
    let pools = a.get("/storage-pools/").await.as_array().unwrap().clone();
    assert_eq!(pools.len(), 3);
    for p in &pools {
        assert!(is_ref(&p["volumeGroupRef"], "04"), "{p}");
        assert_eq!(p["id"], p["volumeGroupRef"]);
        for k in ["freeSpace", "totalRaidedSpace", "usedSpace"] {
            assert!(p[k].is_string(), "{k} in {p}");
        }
    }
    let by = |l: &str| pools.iter().find(|p| p["label"] == l).unwrap().clone();
    let (ssd, ddp, off) = (by("vg_ssd"), by("ddp_hdd"), by("vg_off"));
    assert_eq!(ssd["driveMediaType"], "ssd");
    assert_eq!(ssd["raidLevel"], "raid6");
    assert_eq!(ssd["diskPool"], false);
    assert_eq!(ssd["protectionInformationCapable"], true);
    assert_eq!(ssd["offline"], false);
    assert_eq!(ddp["driveMediaType"], "hdd");
    assert_eq!(ddp["diskPool"], true);
    assert_eq!(ddp["raidLevel"], "raidDiskPool");
    assert_eq!(ddp["protectionInformationCapable"], false);
    assert_eq!(ddp["freeSpace"], (20 * GIB).to_string());
    assert_eq!(off["offline"], true);
    let r = ssd["volumeGroupRef"].as_str().unwrap();
    let one = a.get(&format!("/storage-pools/{r}")).await;
    assert_eq!(one["label"], "vg_ssd");
    let nosuch = format!("/storage-pools/04{}", "0".repeat(38));
    a.refused("GET", &nosuch, None, 404, "notFound").await;
}

#[tokio::test]
async fn a_created_volume_shows_what_it_was_given() {
    let a = Sys::start(&[]).await;
    let ssd = a.pool("vg_ssd").await;
    let v = create(&a.sim, &a.id, &ssd, LONG, 1).await;
    assert!(is_ref(&v["volumeRef"], "02"), "{v}");
    assert_eq!(v["label"], LONG, "30 characters");
    assert_eq!(v["capacity"], GIB.to_string());
    assert_eq!(v["totalSizeInBytes"], GIB.to_string());
    assert_eq!(v["segmentSize"], 131072);
    assert_eq!(v["volumeGroupRef"], ssd.as_str());
    assert_eq!(v["mapped"], false);
    assert_eq!(v["listOfMappings"], json!([]));
    assert_eq!(v["metadata"], json!([{"key": "storch", "value": LONG}]));
    assert_eq!(v["action"], "none");
    assert_eq!(v["worldWideName"].as_str().unwrap().len(), 32);
    let r = v["volumeRef"].as_str().unwrap();
    assert_eq!(a.get(&format!("/volumes/{r}/")).await, v, "read back alike");

    let body = json!({"poolId": ssd, "name": "g", "sizeUnit": "gb", "size": 2,
                      "segSize": 0, "dataAssuranceEnabled": true});
    let v = a.ok("POST", "/volumes", body, 200).await;
    assert_eq!(v["capacity"], (2 * GIB).to_string());
    assert_eq!(v["segmentSize"], 131072, "0 lets the array choose");
    assert_eq!(v["dataAssurance"], true);
    assert_eq!(v["metadata"], json!([]));
    let body = json!({"poolId": ssd, "name": "b", "sizeUnit": "bytes", "size": 1000,
                      "segSize": 64});
    let v = a.ok("POST", "/volumes", body, 200).await;
    assert_eq!(v["capacity"], "1024", "whole 512-byte blocks");
    assert_eq!(v["segmentSize"], 65536);
    assert_eq!(a.names().await, [LONG, "g", "b"]);
}

#[tokio::test]
async fn volume_creates_the_proxy_refuses_change_nothing() {
    let a = Sys::start(&[]).await;
    let (ssd, ddp, off) = (
        a.pool("vg_ssd").await,
        a.pool("ddp_hdd").await,
        a.pool("vg_off").await,
    );
    a.volume(&ssd, "taken", 1).await;
    let base = create_body(&ssd, "v2", 1);
    let with = |k: &str, val: Value| {
        let mut b = base.clone();
        b[k] = val;
        b
    };
    let without = |k: &str| {
        let mut b = base.clone();
        b.as_object_mut().unwrap().remove(k);
        b
    };
    let cases = [
        (with("sizeUnit", json!("KiB")), "invalidInput", "sizeUnit"),
        (
            with("sizeUnit", json!("gigabytes")),
            "invalidInput",
            "sizeUnit",
        ),
        (without("sizeUnit"), "invalidInput", "sizeUnit"),
        (without("size"), "invalidInput", "size"),
        (without("name"), "invalidInput", "name"),
        (without("poolId"), "invalidInput", "poolId"),
        (with("size", json!("1048576")), "invalidInput", "size"),
        (with("size", json!(0)), "invalidInput", "size"),
        (with("size", json!(1.5)), "invalidInput", "size"),
        (
            with("size", json!(3_000_000_000u64)),
            "invalidInput",
            "size",
        ),
        (with("color", json!("red")), "invalidInput", "color"),
        (with("name", json!("a".repeat(31))), "invalidLabel", "name"),
        (with("name", json!("")), "invalidLabel", "name"),
        (with("name", json!("taken")), "duplicateLabel", "taken"),
        (with("segSize", json!(100)), "invalidInput", "segSize"),
        (
            with("poolId", json!(format!("04{}", "1".repeat(38)))),
            "notFound",
            "poolId",
        ),
        (with("poolId", json!(off)), "poolOffline", "vg_off"),
        (
            with("metaTags", json!([{"key": "k"}])),
            "invalidInput",
            "metaTags",
        ),
        (
            with("metaTags", json!({"k": "v"})),
            "invalidInput",
            "metaTags",
        ),
        (
            with("owningControllerId", json!("07nope")),
            "invalidInput",
            "owningControllerId",
        ),
    ];
    for (body, retcode, named) in cases {
        let err = a
            .refused("POST", "/volumes", Some(body), 422, retcode)
            .await;
        let msg = err["errorMessage"].as_str().unwrap();
        assert!(msg.contains(named), "{named}: {msg}");
    }
    a.refused("POST", "/volumes", None, 422, "invalidInput")
        .await;
    let mut seg = create_body(&ddp, "v3", 1);
    seg["segSize"] = json!(256);
    a.refused("POST", "/volumes", Some(seg), 422, "illegalParam")
        .await;
    let mut da = create_body(&ddp, "v3", 1);
    da["dataAssuranceEnabled"] = json!(true);
    a.refused("POST", "/volumes", Some(da), 422, "illegalParam")
        .await;
    assert_eq!(a.names().await, ["taken"]);
    let p = a.get(&format!("/storage-pools/{ssd}")).await;
    assert_eq!(p["usedSpace"], GIB.to_string());
}

#[tokio::test]
async fn pool_space_reads_and_deletes() {
    let a = Sys::start(&[]).await;
    let (ssd, ddp) = (a.pool("vg_ssd").await, a.pool("ddp_hdd").await);
    let first = a.volume(&ssd, "one", 1).await;
    a.volume(&ssd, "two", 2).await;
    let free = |p: &Value| p["freeSpace"].as_str().unwrap().parse::<u64>().unwrap();
    let p = a.get(&format!("/storage-pools/{ssd}")).await;
    assert_eq!(free(&p), 7 * GIB);
    assert_eq!(p["usedSpace"], (3 * GIB).to_string());
    a.refused(
        "POST",
        "/volumes",
        Some(create_body(&ssd, "big", 8)),
        422,
        "insufficientCapacity",
    )
    .await;
    a.volume(&ssd, "fits", 7).await;
    a.volume(&ddp, "all", 20).await;
    a.refused(
        "POST",
        "/volumes",
        Some(create_body(&ddp, "full", 1)),
        422,
        "insufficientCapacity",
    )
    .await;
    let system = a.get("").await;
    assert_eq!(system["freePoolSpace"], 0);
    assert_eq!(system["usedPoolSpace"], json!(30 * GIB));

    let nosuch = format!("/volumes/02{}", "0".repeat(38));
    a.refused("GET", &nosuch, None, 404, "notFound").await;
    a.refused("DELETE", &nosuch, None, 404, "notFound").await;
    let (s, _) = a.call("DELETE", &format!("/volumes/{first}"), None).await;
    assert_eq!(s, 204);
    let path = format!("/volumes/{first}");
    a.refused("GET", &path, None, 404, "notFound").await;
    a.refused("DELETE", &path, None, 404, "notFound").await;
    let p = a.get(&format!("/storage-pools/{ssd}")).await;
    assert_eq!(free(&p), GIB, "space given back");
    assert_eq!(a.get("").await["freePoolSpaceAsString"], GIB.to_string());
    assert_eq!(a.names().await, ["two", "fits", "all"]);
}

#[tokio::test]
async fn a_volume_is_renamed_and_retagged() {
    let a = Sys::start(&[]).await;
    let ssd = a.pool("vg_ssd").await;
    let v = a.volume(&ssd, "old", 1).await;
    a.volume(&ssd, "other", 1).await;
    let path = format!("/volumes/{v}");
    let body = json!({"metaTags": [{"key": "storch", "value": "new"},
                                   {"key": "fstype", "value": "ext4"}]});
    let got = a.ok("POST", &path, body, 200).await;
    assert_eq!(
        got["metadata"],
        json!([{"key": "storch", "value": "new"}, {"key": "fstype", "value": "ext4"}]),
        "replaced by key, added otherwise"
    );
    let got = a.ok("POST", &path, json!({"name": "renamed"}), 200).await;
    assert_eq!(got["label"], "renamed");
    assert_eq!(got["metadata"].as_array().unwrap().len(), 2, "tags kept");
    let got = a
        .ok(
            "POST",
            &path,
            json!({"removeAllTags": true, "metaTags": [{"key": "k", "value": "v"}]}),
            200,
        )
        .await;
    assert_eq!(got["metadata"], json!([{"key": "k", "value": "v"}]));
    a.refused(
        "POST",
        &path,
        Some(json!({"name": "other"})),
        422,
        "duplicateLabel",
    )
    .await;
    a.refused(
        "POST",
        &path,
        Some(json!({"name": "x".repeat(31)})),
        422,
        "invalidLabel",
    )
    .await;
    a.refused("POST", &path, Some(json!({"size": 2})), 422, "invalidInput")
        .await;
    let gone = format!("/volumes/02{}", "0".repeat(38));
    a.refused("POST", &gone, Some(json!({"name": "n"})), 404, "notFound")
        .await;
    assert_eq!(a.names().await, ["renamed", "other"]);
    // An empty owningControllerId counts as absent.
    let mut body = create_body(&ssd, "owner", 1);
    body["owningControllerId"] = json!("");
    let v = a.ok("POST", "/volumes", body, 200).await;
    assert!(is_ref(&v["preferredControllerId"], "07"), "{v}");
}
