//! Pools and volumes: the pool objects, volume create with the proxy's request checks,
//! labels, units, segment sizes, data assurance, space accounting, reads and deletes.

use serde_json::{Value, json};

use super::sim::*;

#[tokio::test]
async fn pools_and_volumes_keep_the_arrays_rules() {
    let dir = tempfile::tempdir().unwrap();
    let (sim, id) = registered(dir.path(), false, &[]).await;
    let (s, pools) = sim.request("GET", &sys(&id, "/storage-pools/"), None).await;
    assert_eq!(s, 200);
    let pools = pools.as_array().unwrap().clone();
    assert_eq!(pools.len(), 3);
    for p in &pools {
        assert!(is_ref(&p["volumeGroupRef"], "04"), "{p}");
        assert_eq!(p["id"], p["volumeGroupRef"]);
        assert!(
            p["freeSpace"].is_string() && p["totalRaidedSpace"].is_string(),
            "{p}"
        );
        assert!(p["usedSpace"].is_string());
    }
    let by = |l: &str| pools.iter().find(|p| p["label"] == l).unwrap().clone();
    assert_eq!(by("vg_ssd")["driveMediaType"], "ssd");
    assert_eq!(by("vg_ssd")["raidLevel"], "raid6");
    assert_eq!(by("vg_ssd")["diskPool"], false);
    assert_eq!(by("vg_ssd")["protectionInformationCapable"], true);
    assert_eq!(by("ddp_hdd")["diskPool"], true);
    assert_eq!(by("ddp_hdd")["raidLevel"], "raidDiskPool");
    assert_eq!(by("ddp_hdd")["protectionInformationCapable"], false);
    assert_eq!(by("ddp_hdd")["freeSpace"], (20 * GIB).to_string());
    assert_eq!(by("vg_off")["offline"], true);
    let ssd = by("vg_ssd")["volumeGroupRef"].as_str().unwrap().to_string();
    let ddp = by("ddp_hdd")["volumeGroupRef"]
        .as_str()
        .unwrap()
        .to_string();
    let off = by("vg_off")["volumeGroupRef"].as_str().unwrap().to_string();
    let (s, one) = sim
        .request("GET", &sys(&id, &format!("/storage-pools/{ssd}")), None)
        .await;
    assert_eq!((s, one["label"].as_str()), (200, Some("vg_ssd")));
    let got = sim
        .request(
            "GET",
            &sys(&id, &format!("/storage-pools/04{}", "0".repeat(38))),
            None,
        )
        .await;
    assert_error(&got, 404, "notFound");

    let v = create(&sim, &id, &ssd, "trident_K3w1cQ9sT2mAbcdEfgh12", 1).await;
    assert!(is_ref(&v["volumeRef"], "02"), "{v}");
    assert_eq!(v["label"], "trident_K3w1cQ9sT2mAbcdEfgh12");
    assert_eq!(v["capacity"], GIB.to_string());
    assert_eq!(v["totalSizeInBytes"], GIB.to_string());
    assert_eq!(v["segmentSize"], 131072);
    assert_eq!(v["volumeGroupRef"], ssd.as_str());
    assert_eq!(v["mapped"], false);
    assert_eq!(v["listOfMappings"], json!([]));
    assert_eq!(
        v["metadata"],
        json!([{"key": "storch", "value": "trident_K3w1cQ9sT2mAbcdEfgh12"}])
    );
    assert_eq!(v["action"], "none");
    assert_eq!(v["worldWideName"].as_str().unwrap().len(), 32);
    let vref = v["volumeRef"].as_str().unwrap().to_string();

    // Refusals: 422 with the error body, naming the field, and nothing created.
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
        (with("segSize", json!(100)), "invalidInput", "segSize"),
        (
            with("poolId", json!(format!("04{}", "1".repeat(38)))),
            "notFound",
            "poolId",
        ),
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
    for (body, retcode, field) in cases {
        let got = sim
            .request("POST", &sys(&id, "/volumes"), Some(&body))
            .await;
        assert_error(&got, 422, retcode);
        assert!(
            got.1["errorMessage"].as_str().unwrap().contains(field),
            "{field}: {}",
            got.1
        );
    }
    let (s, _) = sim.request("POST", &sys(&id, "/volumes"), None).await;
    assert_eq!(s, 422, "no body");
    let mut ddp_seg = create_body(&ddp, "v3", 1);
    ddp_seg["segSize"] = json!(256);
    assert_error(
        &sim.request("POST", &sys(&id, "/volumes"), Some(&ddp_seg))
            .await,
        422,
        "illegalParam",
    );
    let mut da = create_body(&ddp, "v3", 1);
    da["dataAssuranceEnabled"] = json!(true);
    assert_error(
        &sim.request("POST", &sys(&id, "/volumes"), Some(&da)).await,
        422,
        "illegalParam",
    );
    let got = sim
        .request(
            "POST",
            &sys(&id, "/volumes"),
            Some(&create_body(&ssd, "trident_K3w1cQ9sT2mAbcdEfgh12", 1)),
        )
        .await;
    assert_error(&got, 422, "duplicateLabel");
    let got = sim
        .request(
            "POST",
            &sys(&id, "/volumes"),
            Some(&create_body(&off, "v4", 1)),
        )
        .await;
    assert_error(&got, 422, "poolOffline");
    assert_eq!(
        volume_names(&sim, &id).await,
        ["trident_K3w1cQ9sT2mAbcdEfgh12"]
    );

    // Other units, segment sizes, data assurance where the pool allows it; 30 characters.
    let (s, v) = sim
        .request(
            "POST",
            &sys(&id, "/volumes"),
            Some(&json!({"poolId": ssd, "name": "x".repeat(30),
            "sizeUnit": "gb", "size": 2, "segSize": 0, "dataAssuranceEnabled": true})),
        )
        .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["capacity"], (2 * GIB).to_string());
    assert_eq!(v["segmentSize"], 131072, "0 lets the array choose");
    assert_eq!(v["dataAssurance"], true);
    assert_eq!(v["metadata"], json!([]));
    let (s, v) = sim
        .request(
            "POST",
            &sys(&id, "/volumes"),
            Some(&json!({"poolId": ssd, "name": "b",
            "sizeUnit": "bytes", "size": 1000, "segSize": 64})),
        )
        .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["capacity"], "1024", "whole 512-byte blocks");
    assert_eq!(v["segmentSize"], 65536);

    // Space: the pool's free space shrinks; a volume that does not fit is refused.
    let (_, p) = sim
        .request("GET", &sys(&id, &format!("/storage-pools/{ssd}")), None)
        .await;
    let free: u64 = p["freeSpace"].as_str().unwrap().parse().unwrap();
    assert_eq!(free, 10 * GIB - 3 * GIB - 1024);
    let got = sim
        .request(
            "POST",
            &sys(&id, "/volumes"),
            Some(&create_body(&ssd, "big", 7)),
        )
        .await;
    assert_error(&got, 422, "insufficientCapacity");
    create(&sim, &id, &ddp, "fits", 20).await;
    let got = sim
        .request(
            "POST",
            &sys(&id, "/volumes"),
            Some(&create_body(&ddp, "full", 1)),
        )
        .await;
    assert_error(&got, 422, "insufficientCapacity");

    let (s, one) = sim
        .request("GET", &sys(&id, &format!("/volumes/{vref}/")), None)
        .await;
    assert_eq!((s, one["volumeRef"].as_str()), (200, Some(vref.as_str())));
    let nosuch = format!("02{}", "0".repeat(38));
    assert_error(
        &sim.request("GET", &sys(&id, &format!("/volumes/{nosuch}")), None)
            .await,
        404,
        "notFound",
    );
    let (s, _) = sim
        .request("DELETE", &sys(&id, &format!("/volumes/{vref}")), None)
        .await;
    assert_eq!(s, 204);
    assert_error(
        &sim.request("DELETE", &sys(&id, &format!("/volumes/{vref}")), None)
            .await,
        404,
        "notFound",
    );
    assert_error(
        &sim.request("GET", &sys(&id, &format!("/volumes/{vref}")), None)
            .await,
        404,
        "notFound",
    );
    let (_, p) = sim
        .request("GET", &sys(&id, &format!("/storage-pools/{ssd}")), None)
        .await;
    assert_eq!(p["freeSpace"], (free + GIB).to_string(), "space given back");
    let (_, system) = sim.request("GET", &sys(&id, ""), None).await;
    assert_eq!(system["usedPoolSpace"], json!(2 * GIB + 1024 + 20 * GIB));
}
