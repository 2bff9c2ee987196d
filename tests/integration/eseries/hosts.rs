//! Host types, hosts, host groups, LUN mappings (lowest free LUN, conflicts, one mapping per
//! volume, unmap, deleting a mapped volume) and the iSCSI target.

use serde_json::json;

use super::sim::*;

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
