//! The `storch-sim eseries` binary spoken to over real HTTP(S) with raw requests: Basic auth,
//! registration and array passwords, the storage system object, pools, volumes and their
//! request checks, hosts, host groups, host types, LUN mappings, the iSCSI target, expansion
//! and volume copy jobs (on arrays with and without those features), an offline array,
//! injected faults (including "422 but created") and the state surviving a restart.

use serde_json::{Value, json};

use crate::support::eseries::{CONTROLLERS, EseriesSim};

const GIB: u64 = 1 << 30;
const NULL_REF: &str = "0000000000000000000000000000000000000000";
const POOLS: &str =
    "vg_ssd:ssd:10GiB:raid6,ddp_hdd:hdd:20GiB:raidDiskPool:no-da,vg_off:hdd:5GiB:offline";

/// Checks an error answer: its status and the proxy's error body with `retcode`.
fn assert_error(got: &(u16, Value), status: u16, retcode: &str) {
    let (s, body) = got;
    assert_eq!(*s, status, "{body}");
    assert_eq!(body["retcode"], retcode, "{body}");
    for k in ["errorMessage", "localizedMessage", "codeType"] {
        assert!(body[k].is_string(), "{k} in {body}");
    }
}

fn is_ref(v: &Value, prefix: &str) -> bool {
    v.as_str().is_some_and(|s| {
        s.len() == 40 && s.starts_with(prefix) && s.chars().all(|c| c.is_ascii_hexdigit())
    })
}

/// `path` below the registered system.
fn sys(id: &str, path: &str) -> String {
    format!("/storage-systems/{id}{path}")
}

/// A started simulator with the test pools, registered: the handle and the system id.
async fn registered(dir: &std::path::Path, tls: bool, extra: &[&str]) -> (EseriesSim, String) {
    let mut args = vec!["--pools", POOLS, "--array-password", "arraypw"];
    args.extend_from_slice(extra);
    let sim = EseriesSim::start(dir, tls, &args);
    let id = sim.register("arraypw").await;
    (sim, id)
}

async fn pool_ref(sim: &EseriesSim, id: &str, label: &str) -> String {
    let (_, pools) = sim.request("GET", &sys(id, "/storage-pools"), None).await;
    pools
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["label"] == label)
        .unwrap_or_else(|| panic!("pool {label} in {pools}"))["volumeGroupRef"]
        .as_str()
        .unwrap()
        .to_string()
}

fn create_body(pool: &str, name: &str, gib: u64) -> Value {
    json!({"poolId": pool, "name": name, "sizeUnit": "kb", "size": gib * 1024 * 1024,
           "segSize": 128, "metaTags": [{"key": "storch", "value": name}]})
}

async fn create(sim: &EseriesSim, id: &str, pool: &str, name: &str, gib: u64) -> Value {
    let (s, v) = sim
        .request(
            "POST",
            &sys(id, "/volumes"),
            Some(&create_body(pool, name, gib)),
        )
        .await;
    assert_eq!(s, 200, "create {name}: {v}");
    v
}

async fn volume_names(sim: &EseriesSim, id: &str) -> Vec<String> {
    let (s, vols) = sim.request("GET", &sys(id, "/volumes"), None).await;
    assert_eq!(s, 200, "{vols}");
    vols.as_array()
        .unwrap()
        .iter()
        .map(|v| v["label"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test]
async fn registration_auth_and_the_storage_system() {
    let dir = tempfile::tempdir().unwrap();
    let sim = EseriesSim::start(
        dir.path(),
        true,
        &["--pools", POOLS, "--array-password", "arraypw"],
    );
    let reg = json!({"controllerAddresses": CONTROLLERS, "password": "arraypw"});
    let (s, _) = sim
        .request_as(
            Some(("admin", "wrong")),
            "POST",
            "/storage-systems",
            Some(&reg),
        )
        .await;
    assert_eq!(s, 401);
    let (s, _) = sim.request_as(None, "GET", "/storage-systems", None).await;
    assert_eq!(s, 401, "no credentials");
    let (host, port) = sim.host_port();
    assert_eq!(host, "127.0.0.1");
    assert_ne!(port, 0);
    assert!(sim.url.starts_with("https://"));
    assert!(
        sim.ca_pem()
            .unwrap()
            .starts_with("-----BEGIN CERTIFICATE-----")
    );
    let (s, about) = sim
        .request_as(None, "GET", "/devmgr/utils/about", None)
        .await;
    assert_eq!(s, 200, "about needs no credentials");
    assert_eq!(about["runningAsProxy"], true);

    let bad = json!({"controllerAddresses": CONTROLLERS, "password": "nope"});
    let got = sim.request("POST", "/storage-systems", Some(&bad)).await;
    assert_error(&got, 422, "authFailPassword");
    let (_, list) = sim.request("GET", "/storage-systems", None).await;
    assert_eq!(list, json!([]), "a refused registration registers nothing");

    let (s, first) = sim.request("POST", "/storage-systems", Some(&reg)).await;
    assert_eq!(s, 201, "{first}");
    assert_eq!(first["alreadyExists"], false);
    let id = first["id"].as_str().unwrap().to_string();
    let (s, again) = sim.request("POST", "/storage-systems/", Some(&reg)).await;
    assert_eq!(s, 200, "a trailing slash, already registered: {again}");
    assert_eq!(again["id"], id.as_str());
    assert_eq!(again["alreadyExists"], true);
    let swapped =
        json!({"controllerAddresses": [CONTROLLERS[1], CONTROLLERS[0]], "password": "arraypw"});
    let (s, v) = sim
        .request("POST", "/storage-systems", Some(&swapped))
        .await;
    assert_eq!((s, v["id"].as_str()), (200, Some(id.as_str())));
    for missing in [
        json!({"password": "arraypw"}),
        json!({"controllerAddresses": []}),
    ] {
        let got = sim
            .request("POST", "/storage-systems", Some(&missing))
            .await;
        assert_error(&got, 422, "invalidInput");
    }

    let (s, system) = sim
        .request("GET", &format!("/storage-systems/{id}/"), None)
        .await;
    assert_eq!(s, 200, "{system}");
    assert_eq!(system["id"], id.as_str());
    assert_eq!(system["status"], "optimal");
    assert_eq!(system["passwordStatus"], "valid");
    assert!(
        system["chassisSerialNumber"]
            .as_str()
            .is_some_and(|s| !s.is_empty())
    );
    assert_eq!(
        system["freePoolSpace"],
        json!(30 * GIB),
        "online pools only: {system}"
    );
    assert_eq!(system["freePoolSpaceAsString"], (30 * GIB).to_string());
    assert_eq!(system["usedPoolSpaceAsString"], "0");
    assert_eq!(system["wwn"].as_str().unwrap().len(), 32);

    let got = sim.request("GET", "/storage-systems/nosuch", None).await;
    assert_error(&got, 404, "notFound");
    let got = sim
        .request("GET", "/storage-systems/nosuch/volumes", None)
        .await;
    assert_error(&got, 404, "notFound");
    let got = sim.request("GET", &sys(&id, "/frobnicators"), None).await;
    assert_error(&got, 404, "notFound");
    let (s, _) = sim
        .request("PUT", &sys(&id, "/volumes"), Some(&json!({})))
        .await;
    assert_eq!(s, 405);

    // Addresses that are not the array's register but never reach it.
    let other = json!({"controllerAddresses": ["192.0.2.1", "192.0.2.2"], "password": "x"});
    let (s, v) = sim.request("POST", "/storage-systems", Some(&other)).await;
    assert_eq!(s, 201, "{v}");
    let other_id = v["id"].as_str().unwrap();
    let (_, o) = sim
        .request("GET", &format!("/storage-systems/{other_id}"), None)
        .await;
    assert_eq!(o["status"], "neverContacted");
    let got = sim
        .request("GET", &sys(other_id, "/storage-pools"), None)
        .await;
    assert_error(&got, 424, "storageSystemOffline");
    let (s, _) = sim
        .request("DELETE", &format!("/storage-systems/{other_id}"), None)
        .await;
    assert_eq!(s, 204);
    let (_, list) = sim.request("GET", "/storage-systems", None).await;
    assert_eq!(list.as_array().unwrap().len(), 1);
}

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

#[tokio::test]
async fn hosts_groups_mappings_and_the_iscsi_target() {
    let dir = tempfile::tempdir().unwrap();
    let (sim, id) = registered(
        dir.path(),
        false,
        &["--portals", "10.0.1.10,10.0.1.11,10.0.1.12"],
    )
    .await;
    let ssd = pool_ref(&sim, &id, "vg_ssd").await;
    let (s, types) = sim.request("GET", &sys(&id, "/host-types"), None).await;
    assert_eq!(s, 200);
    let lnx = types
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["code"] == "LnxALUA")
        .expect("linux_dm_mp's code")["index"]
        .as_u64()
        .unwrap();

    let (s, g) = sim
        .request(
            "POST",
            &sys(&id, "/host-groups"),
            Some(&json!({"name": "trident", "hosts": []})),
        )
        .await;
    assert_eq!(s, 201, "{g}");
    assert!(is_ref(&g["clusterRef"], "85"), "{g}");
    let group = g["clusterRef"].as_str().unwrap().to_string();
    let got = sim
        .request(
            "POST",
            &sys(&id, "/host-groups"),
            Some(&json!({"name": "trident"})),
        )
        .await;
    assert_error(&got, 422, "duplicateLabel");
    let (s, one) = sim
        .request("GET", &sys(&id, &format!("/host-groups/{group}")), None)
        .await;
    assert_eq!((s, one["label"].as_str()), (200, Some("trident")));

    let host_body = |name: &str, iqn: &str, group: Option<&str>| {
        let mut b = json!({"name": name, "hostType": {"index": lnx},
                           "ports": [{"type": "iscsi", "port": iqn, "label": format!("{name}_1")}]});
        if let Some(g) = group {
            b["groupId"] = json!(g);
        }
        b
    };
    let (s, h1) = sim
        .request(
            "POST",
            &sys(&id, "/hosts"),
            Some(&host_body(
                "node1",
                "iqn.1993-08.org.debian:01:aa",
                Some(&group),
            )),
        )
        .await;
    assert_eq!(s, 201, "{h1}");
    assert!(is_ref(&h1["hostRef"], "84"), "{h1}");
    assert_eq!(h1["clusterRef"], group.as_str());
    assert_eq!(h1["hostTypeIndex"], lnx);
    assert_eq!(
        h1["initiators"][0]["nodeName"]["iscsiNodeName"],
        "iqn.1993-08.org.debian:01:aa"
    );
    assert_eq!(h1["initiators"][0]["nodeName"]["ioInterfaceType"], "iscsi");
    assert_eq!(
        h1["hostSidePorts"][0]["address"],
        "iqn.1993-08.org.debian:01:aa"
    );
    let h1 = h1["hostRef"].as_str().unwrap().to_string();
    let (s, h2) = sim
        .request(
            "POST",
            &sys(&id, "/hosts"),
            Some(&host_body("node2", "iqn.1993-08.org.debian:01:bb", None)),
        )
        .await;
    assert_eq!(s, 201);
    assert_eq!(h2["clusterRef"], NULL_REF, "in no group");
    let h2 = h2["hostRef"].as_str().unwrap().to_string();
    let refused = [
        (host_body("node1", "iqn.x:new", None), "duplicateLabel"),
        (
            host_body("node3", "iqn.1993-08.org.debian:01:aa", None),
            "duplicatePort",
        ),
        (
            host_body("node3", "iqn.x:3", Some(&format!("85{}", "1".repeat(38)))),
            "notFound",
        ),
        (
            json!({"name": "node3", "hostType": {"index": 9999}}),
            "invalidInput",
        ),
        (json!({"name": "node3"}), "invalidInput"),
        (
            json!({"name": "n".repeat(31), "hostType": {"index": lnx}}),
            "invalidLabel",
        ),
        (
            json!({"name": "node3", "hostType": {"index": lnx}, "ports": [{"type": "scsi", "port": "x"}]}),
            "invalidInput",
        ),
    ];
    for (body, retcode) in refused {
        assert_error(
            &sim.request("POST", &sys(&id, "/hosts"), Some(&body)).await,
            422,
            retcode,
        );
    }
    let (_, hosts) = sim.request("GET", &sys(&id, "/hosts"), None).await;
    assert_eq!(hosts.as_array().unwrap().len(), 2, "refusals add nothing");

    let vols: Vec<String> = {
        let mut out = Vec::new();
        for n in ["m1", "m2", "m3", "m4"] {
            out.push(
                create(&sim, &id, &ssd, n, 1).await["volumeRef"]
                    .as_str()
                    .unwrap()
                    .to_string(),
            );
        }
        out
    };
    let map = |vol: &str, target: &str, lun: Option<u32>| {
        let mut b = json!({"mappableObjectId": vol, "targetId": target});
        if let Some(l) = lun {
            b["lun"] = json!(l);
        }
        b
    };
    let (s, m1) = sim
        .request(
            "POST",
            &sys(&id, "/volume-mappings"),
            Some(&map(&vols[0], &group, None)),
        )
        .await;
    assert_eq!(s, 200, "{m1}");
    assert!(is_ref(&m1["lunMappingRef"], "88"), "{m1}");
    assert_eq!(m1["lun"], 1, "the lowest free non-zero LUN");
    assert_eq!(m1["type"], "cluster");
    assert_eq!(m1["mapRef"], group.as_str());
    assert_eq!(m1["volumeRef"], vols[0].as_str());
    let (_, m2) = sim
        .request(
            "POST",
            &sys(&id, "/volume-mappings"),
            Some(&map(&vols[1], &h1, None)),
        )
        .await;
    assert_eq!(m2["lun"], 2, "a host in the group sees the group's LUNs");
    assert_eq!(m2["type"], "host");
    let got = sim
        .request(
            "POST",
            &sys(&id, "/volume-mappings"),
            Some(&map(&vols[2], &group, Some(2))),
        )
        .await;
    assert_error(&got, 422, "lunInUse");
    let got = sim
        .request(
            "POST",
            &sys(&id, "/volume-mappings"),
            Some(&map(&vols[0], &h2, None)),
        )
        .await;
    assert_error(&got, 422, "volumeAlreadyMapped");
    let got = sim
        .request(
            "POST",
            &sys(&id, "/volume-mappings"),
            Some(&map(&vols[0], &group, None)),
        )
        .await;
    assert_error(&got, 422, "volumeAlreadyMapped");
    let got = sim
        .request(
            "POST",
            &sys(&id, "/volume-mappings"),
            Some(&map(&vols[2], &format!("84{}", "2".repeat(38)), None)),
        )
        .await;
    assert_error(&got, 422, "notFound");
    let got = sim
        .request(
            "POST",
            &sys(&id, "/volume-mappings"),
            Some(&map(&vols[2], &h2, Some(256))),
        )
        .await;
    assert_error(&got, 422, "invalidInput");
    let (s, m3) = sim
        .request(
            "POST",
            &sys(&id, "/volume-mappings"),
            Some(&map(&vols[2], &h2, Some(2))),
        )
        .await;
    assert_eq!(
        (s, m3["lun"].as_u64()),
        (200, Some(2)),
        "another host's LUNs are its own: {m3}"
    );
    let (s, m0) = sim
        .request(
            "POST",
            &sys(&id, "/volume-mappings"),
            Some(&map(&vols[3], &h2, Some(0))),
        )
        .await;
    assert_eq!(
        (s, m0["lun"].as_u64()),
        (200, Some(0)),
        "LUN 0 when asked: {m0}"
    );

    let (_, v) = sim
        .request("GET", &sys(&id, &format!("/volumes/{}", vols[0])), None)
        .await;
    assert_eq!(v["mapped"], true);
    assert_eq!(v["listOfMappings"][0]["lun"], 1);
    assert_eq!(v["listOfMappings"][0]["lunMappingRef"], m1["lunMappingRef"]);
    let (_, all) = sim
        .request("GET", &sys(&id, "/volume-mappings"), None)
        .await;
    assert_eq!(all.as_array().unwrap().len(), 4);

    // Unmap: the volume is unmapped and its LUN free again.
    let m1ref = m1["lunMappingRef"].as_str().unwrap();
    let (s, _) = sim
        .request(
            "DELETE",
            &sys(&id, &format!("/volume-mappings/{m1ref}")),
            None,
        )
        .await;
    assert_eq!(s, 204);
    assert_error(
        &sim.request("GET", &sys(&id, &format!("/volume-mappings/{m1ref}")), None)
            .await,
        404,
        "notFound",
    );
    assert_error(
        &sim.request(
            "DELETE",
            &sys(&id, &format!("/volume-mappings/{m1ref}")),
            None,
        )
        .await,
        404,
        "notFound",
    );
    let (_, v) = sim
        .request("GET", &sys(&id, &format!("/volumes/{}", vols[0])), None)
        .await;
    assert_eq!(
        (v["mapped"].as_bool(), v["listOfMappings"].clone()),
        (Some(false), json!([]))
    );
    let (_, again) = sim
        .request(
            "POST",
            &sys(&id, "/volume-mappings"),
            Some(&map(&vols[0], &group, None)),
        )
        .await;
    assert_eq!(again["lun"], 1);

    // Deleting a mapped volume succeeds and drops its mapping.
    let (s, _) = sim
        .request("DELETE", &sys(&id, &format!("/volumes/{}", vols[1])), None)
        .await;
    assert_eq!(s, 204);
    let (_, all) = sim
        .request("GET", &sys(&id, "/volume-mappings"), None)
        .await;
    assert!(
        all.as_array()
            .unwrap()
            .iter()
            .all(|m| m["volumeRef"] != vols[1].as_str()),
        "{all}"
    );
    assert_eq!(all.as_array().unwrap().len(), 3);

    let (s, t) = sim
        .request("GET", &sys(&id, "/iscsi/target-settings"), None)
        .await;
    assert_eq!(s, 200, "{t}");
    let (_, system) = sim.request("GET", &sys(&id, ""), None).await;
    let wwn = system["wwn"].as_str().unwrap().to_lowercase();
    assert_eq!(
        t["nodeName"]["iscsiNodeName"],
        format!("iqn.1992-01.com.lsi:2365.{wwn}")
    );
    assert_eq!(t["nodeName"]["ioInterfaceType"], "iscsi");
    let portals = t["portals"].as_array().unwrap();
    assert_eq!(portals.len(), 3);
    assert_eq!(portals[0]["ipAddress"]["ipv4Address"], "10.0.1.10");
    assert_eq!(portals[0]["ipAddress"]["addressType"], "ipv4");
    assert_eq!(portals[0]["tcpListenPort"], 3260);
    let tags: Vec<u64> = portals
        .iter()
        .map(|p| p["groupTag"].as_u64().unwrap())
        .collect();
    assert_eq!(tags, [1, 2, 1], "portals per controller");
}

async fn wait_expanded(sim: &EseriesSim, id: &str, vref: &str) -> Value {
    let path = sys(id, &format!("/volumes/{vref}/expand"));
    let mut seen = Vec::new();
    loop {
        let (s, p) = sim.request("GET", &path, None).await;
        assert_eq!(s, 200, "{p}");
        seen.push(p["percentComplete"].as_u64().unwrap());
        if p["action"] == "none" {
            assert_eq!(p["percentComplete"], 100);
            return json!(seen);
        }
        assert_eq!(p["action"], "remappingDve");
        assert!(seen.len() < 10, "the expansion never completes: {seen:?}");
    }
}

#[tokio::test]
async fn expansion_and_volume_copy_where_the_array_supports_them() {
    let dir = tempfile::tempdir().unwrap();
    let (sim, id) = registered(
        dir.path(),
        false,
        &["--expand-polls", "3", "--copy-polls", "2"],
    )
    .await;
    let ssd = pool_ref(&sim, &id, "vg_ssd").await;
    let (_, caps) = sim.request("GET", &sys(&id, "/capabilities"), None).await;
    let caps_list = caps["capabilities"].as_array().unwrap();
    assert!(
        caps_list.contains(&json!("volumeCopy"))
            && caps_list.contains(&json!("dynamicVolumeExpansion")),
        "{caps}"
    );
    let src = create(&sim, &id, &ssd, "src", 1).await["volumeRef"]
        .as_str()
        .unwrap()
        .to_string();

    let expand = |size: u64, unit: &str| json!({"expansionSize": size, "sizeUnit": unit});
    let epath = sys(&id, &format!("/volumes/{src}/expand"));
    assert_error(
        &sim.request("POST", &epath, Some(&expand(1, "gb"))).await,
        422,
        "invalidInput",
    );
    assert_error(
        &sim.request("POST", &epath, Some(&expand(2, "GB"))).await,
        422,
        "invalidInput",
    );
    assert_error(
        &sim.request("POST", &epath, Some(&json!({"expansionSize": 2})))
            .await,
        422,
        "invalidInput",
    );
    assert_error(
        &sim.request("POST", &epath, Some(&expand(11, "gb"))).await,
        422,
        "insufficientCapacity",
    );
    let (_, idle) = sim.request("GET", &epath, None).await;
    assert_eq!(idle["action"], "none");
    let (s, v) = sim
        .request("POST", &epath, Some(&expand(2 * 1024 * 1024, "kb")))
        .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["action"], "remappingDve");
    assert_error(
        &sim.request("POST", &epath, Some(&expand(3, "gb"))).await,
        422,
        "operationInProgress",
    );
    let (_, p) = sim
        .request("GET", &sys(&id, &format!("/storage-pools/{ssd}")), None)
        .await;
    assert_eq!(
        p["usedSpace"],
        (2 * GIB).to_string(),
        "the pool's space is taken at once"
    );
    assert_eq!(wait_expanded(&sim, &id, &src).await, json!([33, 66, 100]));
    let (_, v) = sim
        .request("GET", &sys(&id, &format!("/volumes/{src}")), None)
        .await;
    assert_eq!(v["capacity"], (2 * GIB).to_string());
    let nosuch = format!("02{}", "0".repeat(38));
    assert_error(
        &sim.request("GET", &sys(&id, &format!("/volumes/{nosuch}/expand")), None)
            .await,
        404,
        "notFound",
    );

    // A clone: a target at least as large, then a copy job that completes.
    let small = create(&sim, &id, &ssd, "small", 1).await["volumeRef"]
        .as_str()
        .unwrap()
        .to_string();
    let dst = create(&sim, &id, &ssd, "dst", 2).await["volumeRef"]
        .as_str()
        .unwrap()
        .to_string();
    let job = |s: &str, t: &str| json!({"sourceId": s, "targetId": t, "copyPriority": "priority2"});
    let jobs = sys(&id, "/volume-copy-jobs");
    assert_error(
        &sim.request("POST", &jobs, Some(&job(&src, &small))).await,
        422,
        "illegalParam",
    );
    assert_error(
        &sim.request("POST", &jobs, Some(&job(&src, &nosuch))).await,
        422,
        "notFound",
    );
    assert_error(
        &sim.request("POST", &jobs, Some(&json!({"sourceId": src})))
            .await,
        422,
        "invalidInput",
    );
    assert_error(
        &sim.request(
            "POST",
            &jobs,
            Some(&json!({"sourceId": src, "targetId": dst, "copyPriority": "urgent"})),
        )
        .await,
        422,
        "invalidInput",
    );
    let (s, j) = sim.request("POST", &jobs, Some(&job(&src, &dst))).await;
    assert_eq!(s, 200, "{j}");
    assert!(is_ref(&j["volcopyRef"], "18"), "{j}");
    assert_eq!(j["status"], "inProgress");
    assert_eq!(
        (j["sourceVolume"].as_str(), j["targetVolume"].as_str()),
        (Some(src.as_str()), Some(dst.as_str()))
    );
    let jref = j["volcopyRef"].as_str().unwrap().to_string();
    assert_error(
        &sim.request("POST", &jobs, Some(&job(&small, &dst))).await,
        422,
        "operationInProgress",
    );
    assert_error(
        &sim.request("DELETE", &sys(&id, &format!("/volumes/{dst}")), None)
            .await,
        422,
        "operationInProgress",
    );
    let jpath = sys(&id, &format!("/volume-copy-jobs/{jref}"));
    let mut statuses = Vec::new();
    loop {
        let (s, j) = sim.request("GET", &jpath, None).await;
        assert_eq!(s, 200, "{j}");
        statuses.push(j["status"].as_str().unwrap().to_string());
        if j["status"] == "complete" {
            assert_eq!(j["percentComplete"], 100);
            assert_ne!(j["copyCompleteTime"], "0");
            break;
        }
        assert!(statuses.len() < 10, "{statuses:?}");
    }
    assert_eq!(statuses, ["inProgress", "complete"]);
    // Re-copy and stop through the control endpoint.
    let control = |c: &str| {
        sys(
            &id,
            &format!("/volume-copy-jobs-control/{jref}?control={c}"),
        )
    };
    let (s, j) = sim.request("POST", &control("start"), None).await;
    assert_eq!((s, j["status"].as_str()), (200, Some("inProgress")), "{j}");
    let (s, j) = sim.request("POST", &control("stop"), None).await;
    assert_eq!((s, j["status"].as_str()), (200, Some("stopped")), "{j}");
    assert_error(
        &sim.request("POST", &control("stop"), None).await,
        422,
        "illegalParam",
    );
    assert_error(
        &sim.request("POST", &control("pause"), None).await,
        422,
        "invalidInput",
    );
    let (_, list) = sim.request("GET", &jobs, None).await;
    assert_eq!(list.as_array().unwrap().len(), 1);
    let (s, _) = sim.request("DELETE", &jpath, None).await;
    assert_eq!(s, 204);
    assert_error(&sim.request("GET", &jpath, None).await, 404, "notFound");
    let (s, _) = sim
        .request("DELETE", &sys(&id, &format!("/volumes/{dst}")), None)
        .await;
    assert_eq!(s, 204, "no copy job holds it any more");
}

#[tokio::test]
async fn an_array_without_the_features_refuses_expand_and_copy() {
    let dir = tempfile::tempdir().unwrap();
    let (sim, id) = registered(dir.path(), false, &["--features", "none"]).await;
    let ssd = pool_ref(&sim, &id, "vg_ssd").await;
    let (_, caps) = sim.request("GET", &sys(&id, "/capabilities"), None).await;
    let list = caps["capabilities"].as_array().unwrap();
    assert!(
        !list.contains(&json!("volumeCopy")) && !list.contains(&json!("dynamicVolumeExpansion")),
        "{caps}"
    );
    assert!(
        caps["featureStates"]
            .as_array()
            .unwrap()
            .iter()
            .all(|f| f["isEnabled"] == false),
        "{caps}"
    );
    let a = create(&sim, &id, &ssd, "a", 1).await["volumeRef"]
        .as_str()
        .unwrap()
        .to_string();
    let b = create(&sim, &id, &ssd, "b", 1).await["volumeRef"]
        .as_str()
        .unwrap()
        .to_string();
    let epath = sys(&id, &format!("/volumes/{a}/expand"));
    let body = json!({"expansionSize": 2, "sizeUnit": "gb"});
    assert_error(
        &sim.request("POST", &epath, Some(&body)).await,
        422,
        "featureNotSupported",
    );
    assert_error(
        &sim.request("GET", &epath, None).await,
        422,
        "featureNotSupported",
    );
    let jobs = sys(&id, "/volume-copy-jobs");
    assert_error(
        &sim.request("POST", &jobs, Some(&json!({"sourceId": a, "targetId": b})))
            .await,
        422,
        "featureNotSupported",
    );
    assert_error(
        &sim.request("GET", &jobs, None).await,
        422,
        "featureNotSupported",
    );
    let (_, v) = sim
        .request("GET", &sys(&id, &format!("/volumes/{a}")), None)
        .await;
    assert_eq!(v["capacity"], GIB.to_string());

    // Only copy: expansion still refused.
    drop(sim);
    let (sim, id) = registered(dir.path(), false, &["--features", "copy"]).await;
    let (_, caps) = sim.request("GET", &sys(&id, "/capabilities"), None).await;
    assert!(
        caps["capabilities"]
            .as_array()
            .unwrap()
            .contains(&json!("volumeCopy"))
    );
    let (s, _) = sim
        .request("GET", &sys(&id, "/volume-copy-jobs"), None)
        .await;
    assert_eq!(s, 200);
}

#[tokio::test]
async fn an_offline_array_answers_424() {
    let dir = tempfile::tempdir().unwrap();
    let sim = EseriesSim::start(dir.path(), false, &["--offline", "--array-password", "pw"]);
    let reg = json!({"controllerAddresses": CONTROLLERS, "password": "unchecked"});
    let (s, v) = sim.request("POST", "/storage-systems", Some(&reg)).await;
    assert_eq!(s, 201, "registered without reaching the array: {v}");
    let id = v["id"].as_str().unwrap();
    let (_, system) = sim
        .request("GET", &format!("/storage-systems/{id}"), None)
        .await;
    assert_eq!(system["status"], "offline");
    assert_eq!(system["passwordStatus"], "unknown");
    for path in [
        "/storage-pools",
        "/volumes",
        "/hosts",
        "/iscsi/target-settings",
    ] {
        assert_error(
            &sim.request("GET", &sys(id, path), None).await,
            424,
            "storageSystemOffline",
        );
    }
    let got = sim
        .request("POST", &sys(id, "/volumes"), Some(&json!({})))
        .await;
    assert_error(&got, 424, "storageSystemOffline");
}

#[tokio::test]
async fn injected_faults_before_and_after_the_request() {
    let dir = tempfile::tempdir().unwrap();
    let (sim, id) = registered(
        dir.path(),
        false,
        &[
            "--fail",
            "POST@volumes:1:422/after",
            "--fail",
            "POST@volume-mappings:1:422/after",
            "--fail",
            "GET@host-types:1",
            "--fail",
            "DELETE@volumes/*:1:500",
        ],
    )
    .await;
    let ssd = pool_ref(&sim, &id, "vg_ssd").await;
    let got = sim
        .request(
            "POST",
            &sys(&id, "/volumes"),
            Some(&create_body(&ssd, "spurious", 1)),
        )
        .await;
    assert_error(&got, 422, "injectedFault");
    let (_, vols) = sim.request("GET", &sys(&id, "/volumes"), None).await;
    let v = vols
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["label"] == "spurious")
        .expect("created anyway");
    assert_eq!(
        v["metadata"],
        json!([{"key": "storch", "value": "spurious"}]),
        "with its tags"
    );
    let vref = v["volumeRef"].as_str().unwrap().to_string();
    let got = sim
        .request(
            "POST",
            &sys(&id, "/volumes"),
            Some(&create_body(&ssd, "spurious", 1)),
        )
        .await;
    assert_error(&got, 422, "duplicateLabel");

    let (_, g) = sim
        .request(
            "POST",
            &sys(&id, "/host-groups"),
            Some(&json!({"name": "trident"})),
        )
        .await;
    let group = g["clusterRef"].as_str().unwrap();
    let got = sim
        .request(
            "POST",
            &sys(&id, "/volume-mappings"),
            Some(&json!({"mappableObjectId": vref, "targetId": group})),
        )
        .await;
    assert_error(&got, 422, "injectedFault");
    let (_, v) = sim
        .request("GET", &sys(&id, &format!("/volumes/{vref}")), None)
        .await;
    assert_eq!(v["listOfMappings"][0]["lun"], 1, "mapped anyway: {v}");

    assert_error(
        &sim.request("GET", &sys(&id, "/host-types"), None).await,
        424,
        "injectedFault",
    );
    assert_error(
        &sim.request("DELETE", &sys(&id, &format!("/volumes/{vref}")), None)
            .await,
        500,
        "injectedFault",
    );
    assert_eq!(
        volume_names(&sim, &id).await,
        ["spurious"],
        "a fault before the request changes nothing"
    );
    drop(sim);

    // "422 but created" without the tags.
    let (sim, id) = registered(
        dir.path(),
        false,
        &["--fail", "POST@volumes:1:422/untagged"],
    )
    .await;
    let ssd = pool_ref(&sim, &id, "vg_ssd").await;
    let got = sim
        .request(
            "POST",
            &sys(&id, "/volumes"),
            Some(&create_body(&ssd, "bare", 1)),
        )
        .await;
    assert_error(&got, 422, "injectedFault");
    let (_, vols) = sim.request("GET", &sys(&id, "/volumes"), None).await;
    assert_eq!(vols[0]["label"], "bare");
    assert_eq!(vols[0]["metadata"], json!([]), "created without its tags");
    // A request the array refuses is refused as such, not answered with the fault.
    let got = sim
        .request(
            "POST",
            &sys(&id, "/volumes"),
            Some(&create_body(&ssd, "bare", 1)),
        )
        .await;
    assert_error(&got, 422, "duplicateLabel");
    drop(sim);

    // Faults on registration and everywhere, and an offline array by fault.
    let sim = EseriesSim::start(
        dir.path(),
        false,
        &["--fail", "POST@storage-systems:1:424", "--fail", "**:0"],
    );
    let body = json!({"controllerAddresses": CONTROLLERS, "password": ""});
    assert_error(
        &sim.request("POST", "/storage-systems", Some(&body)).await,
        424,
        "injectedFault",
    );
    let (_, list) = sim.request("GET", "/storage-systems", None).await;
    assert_eq!(list, json!([]));
}

#[tokio::test]
async fn state_survives_a_restart_and_a_changed_array_password_is_updated() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("es.json");
    let state_arg = state.to_str().unwrap();
    let args = |pw: &'static str| {
        vec![
            "--pools",
            POOLS,
            "--state",
            state_arg,
            "--array-password",
            pw,
        ]
    };
    let sim = EseriesSim::start(dir.path(), true, &args("first"));
    let id = sim.register("first").await;
    let ssd = pool_ref(&sim, &id, "vg_ssd").await;
    let vref = create(&sim, &id, &ssd, "kept", 1).await["volumeRef"]
        .as_str()
        .unwrap()
        .to_string();
    let (_, g) = sim
        .request(
            "POST",
            &sys(&id, "/host-groups"),
            Some(&json!({"name": "trident"})),
        )
        .await;
    let group = g["clusterRef"].as_str().unwrap().to_string();
    let (s, m) = sim
        .request(
            "POST",
            &sys(&id, "/volume-mappings"),
            Some(&json!({"mappableObjectId": vref, "targetId": group})),
        )
        .await;
    assert_eq!(s, 200, "{m}");
    let (_, before) = sim.request("GET", &sys(&id, ""), None).await;
    drop(sim);
    let on_disk: Value = serde_json::from_slice(&std::fs::read(&state).unwrap()).unwrap();
    assert_eq!(on_disk["format"], 1);
    assert_eq!(on_disk["array"]["volumes"][&vref]["label"], "kept");

    // Same password: everything is there, refs and serial unchanged.
    let sim = EseriesSim::start(dir.path(), true, &args("first"));
    let (_, after) = sim.request("GET", &sys(&id, ""), None).await;
    assert_eq!(after["chassisSerialNumber"], before["chassisSerialNumber"]);
    assert_eq!(after["wwn"], before["wwn"]);
    let (_, v) = sim
        .request("GET", &sys(&id, &format!("/volumes/{vref}")), None)
        .await;
    assert_eq!(v["label"], "kept");
    assert_eq!(v["listOfMappings"][0]["mapRef"], group.as_str());
    assert_eq!(sim.register("first").await, id, "already registered");
    drop(sim);

    // The array's password changed: the proxy's copy is invalid until re-registered.
    let sim = EseriesSim::start(dir.path(), true, &args("second"));
    let (_, system) = sim.request("GET", &sys(&id, ""), None).await;
    assert_eq!(system["passwordStatus"], "invalid");
    assert_error(
        &sim.request("GET", &sys(&id, "/volumes"), None).await,
        422,
        "authFailPassword",
    );
    let stale = json!({"controllerAddresses": CONTROLLERS, "password": "first"});
    assert_error(
        &sim.request("POST", "/storage-systems", Some(&stale)).await,
        422,
        "authFailPassword",
    );
    let fresh = json!({"controllerAddresses": CONTROLLERS, "password": "second"});
    let (s, v) = sim.request("POST", "/storage-systems/", Some(&fresh)).await;
    assert_eq!((s, v["id"].as_str()), (200, Some(id.as_str())), "{v}");
    let (_, system) = sim.request("GET", &sys(&id, ""), None).await;
    assert_eq!(system["passwordStatus"], "valid");
    assert_eq!(volume_names(&sim, &id).await, ["kept"]);
    drop(sim);
    let sim = EseriesSim::start(dir.path(), true, &args("second"));
    assert_eq!(
        volume_names(&sim, &id).await,
        ["kept"],
        "the new password was persisted"
    );

    // POST /storage-systems/{id} {storedPassword} checks and updates it too.
    let got = sim
        .request(
            "POST",
            &format!("/storage-systems/{id}"),
            Some(&json!({"storedPassword": "wrong"})),
        )
        .await;
    assert_error(&got, 422, "authFailPassword");
    let (s, _) = sim
        .request(
            "POST",
            &format!("/storage-systems/{id}"),
            Some(&json!({"storedPassword": "second"})),
        )
        .await;
    assert_eq!(s, 200);
    drop(sim);
    std::fs::write(&state, b"{}").unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_storch-sim"))
        .args(["eseries", "--listen", "127.0.0.1:0", "--state", state_arg])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("state file"),
        "{out:?}"
    );
}

#[test]
fn bad_command_lines_are_refused() {
    for args in [
        vec!["--pools", "p:tape:1GiB"],
        vec!["--pools", ""],
        vec!["--controllers", "a,b,c"],
        vec!["--controllers", "a,a"],
        vec!["--portals", "not-an-ip"],
        vec!["--features", "snapshots"],
        vec!["--fail", "volumes"],
        vec!["--fail", "volumes:2"],
        vec!["--fail", "volumes:1:200"],
        vec!["--fail", "volumes:1:422/later"],
        vec!["--fail", "FETCH@volumes:1"],
    ] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_storch-sim"))
            .args(["eseries", "--listen", "127.0.0.1:0"])
            .args(&args)
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        assert!(!out.status.success(), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(args[0]), "{args:?}: {err}");
    }
}
