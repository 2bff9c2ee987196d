//! Host types, hosts, host groups, LUN mappings (lowest free LUN, conflicts, one mapping per
//! volume, unmap, deleting a mapped volume) and the iSCSI target.

use serde_json::{Value, json};

use super::sim::*;

/// The index of linux_dm_mp's host type (code `LnxALUA`).
async fn linux(a: &Sys) -> u64 {
    let types = a.get("/host-types").await;
    types
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["code"] == "LnxALUA")
        .unwrap_or_else(|| panic!("LnxALUA in {types}"))["index"]
        .as_u64()
        .unwrap()
}

fn host_body(name: &str, host_type: u64, iqn: &str, group: Option<&str>) -> Value {
    let mut b = json!({"name": name, "hostType": {"index": host_type},
                       "ports": [{"type": "iscsi", "port": iqn, "label": format!("{name}_1")}]});
    if let Some(g) = group {
        b["groupId"] = json!(g);
    }
    b
}

async fn group(a: &Sys, name: &str) -> String {
    let g = a
        .ok(
            "POST",
            "/host-groups",
            json!({"name": name, "hosts": []}),
            201,
        )
        .await;
    assert!(is_ref(&g["clusterRef"], "85"), "{g}");
    g["clusterRef"].as_str().unwrap().to_string()
}

async fn host(a: &Sys, name: &str, iqn: &str, group: Option<&str>) -> String {
    let body = host_body(name, linux(a).await, iqn, group);
    let h = a.ok("POST", "/hosts", body, 201).await;
    assert!(is_ref(&h["hostRef"], "84"), "{h}");
    h["hostRef"].as_str().unwrap().to_string()
}

fn map(volume: &str, target: &str, lun: Option<u32>) -> Value {
    let mut b = json!({"mappableObjectId": volume, "targetId": target});
    if let Some(l) = lun {
        b["lun"] = json!(l);
    }
    b
}

#[tokio::test]
async fn hosts_and_host_groups() {
    let a = Sys::start(&[]).await;
    let lnx = linux(&a).await;
    let g = group(&a, "trident").await;
    a.refused(
        "POST",
        "/host-groups",
        Some(json!({"name": "trident"})),
        422,
        "duplicateLabel",
    )
    .await;
    a.refused(
        "POST",
        "/host-groups",
        Some(json!({"name": "g".repeat(31)})),
        422,
        "invalidLabel",
    )
    .await;
    assert_eq!(
        a.get(&format!("/host-groups/{g}")).await["label"],
        "trident"
    );
    let iqn = "iqn.1993-08.org.debian:01:aa";
    let h = a
        .ok(
            "POST",
            "/hosts",
            host_body("node1", lnx, iqn, Some(&g)),
            201,
        )
        .await;
    assert_eq!(h["clusterRef"], g.as_str());
    assert_eq!(h["hostTypeIndex"], lnx);
    assert_eq!(h["initiators"][0]["nodeName"]["iscsiNodeName"], iqn);
    assert_eq!(h["initiators"][0]["nodeName"]["ioInterfaceType"], "iscsi");
    assert_eq!(h["hostSidePorts"][0]["address"], iqn);
    assert_eq!(h["hostSidePorts"][0]["label"], "node1_1");
    let r = h["hostRef"].as_str().unwrap();
    assert_eq!(a.get(&format!("/hosts/{r}")).await, h);
    let other = a
        .ok(
            "POST",
            "/hosts",
            host_body("node2", lnx, "iqn.2020-01.io.x:bb", None),
            201,
        )
        .await;
    assert_eq!(other["clusterRef"], NULL_REF, "in no group");
    let mut body = host_body("node4", lnx, "iqn.2020-01.io.x:4", None);
    body["groupId"] = json!("");
    let h4 = a.ok("POST", "/hosts", body, 201).await;
    assert_eq!(h4["clusterRef"], NULL_REF, "an empty groupId is no group");
    let no_group = format!("85{}", "1".repeat(38));
    let refused = [
        (
            host_body("node1", lnx, "iqn.2020-01.io.x:new", None),
            "duplicateLabel",
        ),
        (host_body("node3", lnx, iqn, None), "duplicatePort"),
        (
            host_body("node3", lnx, "iqn.2020-01.io.x:3", Some(&no_group)),
            "notFound",
        ),
        (
            host_body("node3", 9999, "iqn.2020-01.io.x:3", None),
            "invalidInput",
        ),
        (json!({"name": "node3"}), "invalidInput"),
        (
            host_body(&"n".repeat(31), lnx, "iqn.2020-01.io.x:3", None),
            "invalidLabel",
        ),
        (
            json!({"name": "node3", "hostType": {"index": lnx},
                "ports": [{"type": "scsi", "port": "x"}]}),
            "invalidInput",
        ),
        (host_body("node3", lnx, "iqn.x:3", None), "invalidInput"),
        (host_body("node3", lnx, "node3", None), "invalidInput"),
    ];
    for (body, retcode) in refused {
        a.refused("POST", "/hosts", Some(body), 422, retcode).await;
    }
    assert_eq!(a.get("/hosts").await.as_array().unwrap().len(), 3);
    let (s, _) = a.call("DELETE", &format!("/host-groups/{g}"), None).await;
    assert_eq!(s, 204);
    assert_eq!(a.get(&format!("/hosts/{r}")).await["clusterRef"], NULL_REF);
    let (s, _) = a.call("DELETE", &format!("/hosts/{r}"), None).await;
    assert_eq!(s, 204);
    a.refused("GET", &format!("/hosts/{r}"), None, 404, "notFound")
        .await;
}

#[tokio::test]
async fn mappings_take_the_lowest_free_lun_and_refuse_conflicts() {
    let a = Sys::start(&[]).await;
    let ssd = a.pool("vg_ssd").await;
    let g = group(&a, "trident").await;
    let h1 = host(&a, "node1", "iqn.2020-01.io.x:1", Some(&g)).await;
    let h2 = host(&a, "node2", "iqn.2020-01.io.x:2", None).await;
    let mut v = Vec::new();
    for n in ["m1", "m2", "m3", "m4"] {
        v.push(a.volume(&ssd, n, 1).await);
    }
    let m1 = a
        .ok("POST", "/volume-mappings", map(&v[0], &g, None), 200)
        .await;
    assert!(is_ref(&m1["lunMappingRef"], "88"), "{m1}");
    assert_eq!(m1["lun"], 1, "the lowest free non-zero LUN");
    assert_eq!(m1["type"], "cluster");
    assert_eq!(m1["mapRef"], g.as_str());
    assert_eq!(m1["volumeRef"], v[0].as_str());
    let m2 = a
        .ok("POST", "/volume-mappings", map(&v[1], &h1, None), 200)
        .await;
    assert_eq!(m2["lun"], 2, "a host in the group sees the group's LUNs");
    assert_eq!(m2["type"], "host");
    let nobody = format!("84{}", "2".repeat(38));
    let refused = [
        (map(&v[2], &g, Some(2)), "lunInUse"),
        (map(&v[0], &h2, None), "volumeAlreadyMapped"),
        (map(&v[0], &g, None), "volumeAlreadyMapped"),
        (map(&v[2], &nobody, None), "notFound"),
        (map(&nobody, &h2, None), "notFound"),
        (map(&v[2], &h2, Some(256)), "invalidInput"),
        (json!({"mappableObjectId": v[2]}), "invalidInput"),
    ];
    for (body, retcode) in refused {
        a.refused("POST", "/volume-mappings", Some(body), 422, retcode)
            .await;
    }
    let m3 = a
        .ok("POST", "/volume-mappings", map(&v[2], &h2, Some(2)), 200)
        .await;
    assert_eq!(m3["lun"], 2, "another host's LUNs are its own");
    let m0 = a
        .ok("POST", "/volume-mappings", map(&v[3], &h2, Some(0)), 200)
        .await;
    assert_eq!(m0["lun"], 0, "LUN 0 when asked");
    let vol = a.get(&format!("/volumes/{}", v[0])).await;
    assert_eq!(vol["mapped"], true);
    assert_eq!(vol["listOfMappings"], json!([m1]));
    let r = m1["lunMappingRef"].as_str().unwrap();
    assert_eq!(a.get(&format!("/volume-mappings/{r}")).await, m1);
    assert_eq!(a.get("/volume-mappings").await.as_array().unwrap().len(), 4);
}

#[tokio::test]
async fn unmapping_and_deleting_a_mapped_volume() {
    let a = Sys::start(&[]).await;
    let ssd = a.pool("vg_ssd").await;
    let g = group(&a, "trident").await;
    let (v1, v2) = (a.volume(&ssd, "a", 1).await, a.volume(&ssd, "b", 1).await);
    let m1 = a
        .ok("POST", "/volume-mappings", map(&v1, &g, None), 200)
        .await;
    let m2 = a
        .ok("POST", "/volume-mappings", map(&v2, &g, None), 200)
        .await;
    assert_eq!((m1["lun"].as_u64(), m2["lun"].as_u64()), (Some(1), Some(2)));
    let path = format!("/volume-mappings/{}", m1["lunMappingRef"].as_str().unwrap());
    let (s, _) = a.call("DELETE", &path, None).await;
    assert_eq!(s, 204);
    a.refused("GET", &path, None, 404, "notFound").await;
    a.refused("DELETE", &path, None, 404, "notFound").await;
    let vol = a.get(&format!("/volumes/{v1}")).await;
    assert_eq!(vol["mapped"], false);
    assert_eq!(vol["listOfMappings"], json!([]));
    let again = a
        .ok("POST", "/volume-mappings", map(&v1, &g, None), 200)
        .await;
    assert_eq!(again["lun"], 1, "its LUN was free again");

    let (s, _) = a.call("DELETE", &format!("/volumes/{v2}"), None).await;
    assert_eq!(s, 204, "a mapped volume can be deleted");
    let all = a.get("/volume-mappings").await;
    assert_eq!(all, json!([again]), "its mapping went with it");
}

#[tokio::test]
async fn the_iscsi_target_has_the_arrays_iqn_and_a_portal_per_port() {
    let a = Sys::start(&["--portals", "10.0.1.10,10.0.1.11,10.0.1.12"]).await;
    let t = a.get("/iscsi/target-settings").await;
    let wwn = a.get("").await["wwn"].as_str().unwrap().to_lowercase();
    assert_eq!(
        t["nodeName"]["iscsiNodeName"],
        format!("iqn.1992-01.com.lsi:2365.{wwn}")
    );
    assert_eq!(t["nodeName"]["ioInterfaceType"], "iscsi");
    let portals = t["portals"].as_array().unwrap();
    let ips: Vec<&str> = portals
        .iter()
        .map(|p| p["ipAddress"]["ipv4Address"].as_str().unwrap())
        .collect();
    assert_eq!(ips, ["10.0.1.10", "10.0.1.11", "10.0.1.12"]);
    assert!(
        portals
            .iter()
            .all(|p| p["ipAddress"]["addressType"] == "ipv4" && p["tcpListenPort"] == 3260)
    );
    let tags: Vec<u64> = portals
        .iter()
        .map(|p| p["groupTag"].as_u64().unwrap())
        .collect();
    assert_eq!(tags, [1, 2, 1], "portals spread over controllers A and B");
}

#[tokio::test]
async fn host_groups_a_new_array_starts_with() {
    let a = Sys::start(&["--host-groups", "trident,backup"]).await;
    let groups = a.get("/host-groups").await;
    let labels: Vec<&str> = groups
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["label"].as_str().unwrap())
        .collect();
    assert_eq!(labels, ["trident", "backup"]);
    assert!(
        groups
            .as_array()
            .unwrap()
            .iter()
            .all(|g| is_ref(&g["clusterRef"], "85"))
    );
    a.refused(
        "POST",
        "/host-groups",
        Some(json!({"name": "trident"})),
        422,
        "duplicateLabel",
    )
    .await;
    assert_eq!(
        Sys::start(&[]).await.get("/host-groups").await,
        json!([]),
        "none by default"
    );
}
