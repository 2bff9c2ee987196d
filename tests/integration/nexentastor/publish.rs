//! Per-host publish of nexentastor-iscsi volumes against the in-process simulator: with an
//! admin's host group as `defaultHostGroup`, a publish puts the host's initiator into
//! `storch-host-<node>` and maps the zvol to it (LUN in the publish context), idempotently; an
//! unpublish removes that mapping and the group once unused, and a second unpublish, or one of
//! a volume already gone, succeeds. A volume mapped to `All` needs nothing; an initiator in
//! another (not storch's) group is refused naming it; a host without initiator is refused.
//! The simulator's own rules behind this: one host group per initiator, one mapping per reach.

use serde_json::json;
use storch::drivers::testing::req;
use storch::drivers::{DriverError, HostAccess, StorageDriver};

use super::sim::Nx;
use crate::support::nexentastor::esc;

const GIB: u64 = super::sim::GIB;
const IQN1: &str = "iqn.1993-08.org.debian:01:node1";
const IQN2: &str = "iqn.1993-08.org.debian:01:node2";
const ADMIN: &str = "iqn.1993-08.org.debian:01:admin";

fn host(node: &str, iqn: Option<&str>) -> HostAccess {
    HostAccess {
        node: node.into(),
        iscsi_initiator: iqn.map(str::to_string),
    }
}

fn driver(nx: &Nx, extra: serde_json::Value) -> storch::drivers::nexentastor::NexentaDriver {
    let extra =
        storch::drivers::testing::merged(json!({"dynamicTargetLunAllocation": true}), extra);
    super::conformance::sim_driver(&nx.sim.url, &nx.sim.ca_pem(), extra)
}

/// The volume's mappings as (host group, LUN), sorted.
async fn mappings_of(nx: &Nx, vol: &str) -> Vec<(String, u64)> {
    let v = nx
        .get(&format!("/san/lunMappings?volume={}", esc(vol)))
        .await;
    let mut out: Vec<(String, u64)> = v["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["hostGroup"].as_str().unwrap().to_string(),
                m["lun"].as_u64().unwrap(),
            )
        })
        .collect();
    out.sort();
    out
}

/// Host group name → members.
async fn host_groups(nx: &Nx) -> std::collections::BTreeMap<String, serde_json::Value> {
    let v = nx.get("/san/hostgroups").await;
    v["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| {
            (
                g["name"].as_str().unwrap().to_string(),
                g["members"].clone(),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn publish_maps_per_host_and_unpublish_takes_it_back() {
    let nx = Nx::start(&[]);
    for (name, member) in [("ops", ADMIN), ("other", IQN2)] {
        let body = json!({"name": name, "members": [member]});
        nx.ok("POST", "/san/hostgroups", Some(body), 201).await;
    }
    let d = driver(&nx, json!({"defaultHostGroup": "ops"}));
    assert!(d.needs_publish());
    d.discover().await.unwrap();
    d.create(&req("v1", "tank/csi", GIB)).await.unwrap();
    assert_eq!(
        mappings_of(&nx, "tank/csi/v1").await,
        [("ops".to_string(), 0)]
    );

    let ctx = d.publish("v1", &host("node1", Some(IQN1))).await.unwrap();
    let lun = ctx["iscsiLunNumber"].clone();
    assert_eq!(
        mappings_of(&nx, "tank/csi/v1").await,
        [
            ("ops".to_string(), 0),
            ("storch-host-node1".to_string(), lun.parse::<u64>().unwrap())
        ]
    );
    assert_eq!(host_groups(&nx).await["storch-host-node1"], json!([IQN1]));
    // Idempotent: the same answer, nothing added.
    assert_eq!(
        d.publish("v1", &host("node1", Some(IQN1))).await.unwrap(),
        ctx
    );
    assert_eq!(mappings_of(&nx, "tank/csi/v1").await.len(), 2);
    // The admin's own group already reaches the volume: its LUN, nothing added.
    let admin = d.publish("v1", &host("ops1", Some(ADMIN))).await.unwrap();
    assert_eq!(admin["iscsiLunNumber"], "0");
    // An initiator in a group that is not storch's and does not reach the volume: refused.
    match d.publish("v1", &host("node2", Some(IQN2))).await {
        Err(DriverError::Conflict(m)) => assert!(m.contains("other") && m.contains(IQN2), "{m}"),
        other => panic!("expected a conflict, got {other:?}"),
    }
    match d.publish("v1", &host("node3", None)).await {
        Err(DriverError::Invalid(m)) => assert!(m.contains("node3"), "{m}"),
        other => panic!("expected a refusal, got {other:?}"),
    }
    assert!(matches!(
        d.publish("nope", &host("node1", Some(IQN1))).await,
        Err(DriverError::NotFound(_))
    ));
    // A second volume published to the same host shares its group.
    d.create(&req("v2", "tank/csi", GIB)).await.unwrap();
    d.publish("v2", &host("node1", Some(IQN1))).await.unwrap();

    d.unpublish("v1", &host("node1", Some(IQN1))).await.unwrap();
    assert_eq!(
        mappings_of(&nx, "tank/csi/v1").await,
        [("ops".to_string(), 0)]
    );
    assert!(
        host_groups(&nx).await.contains_key("storch-host-node1"),
        "v2 still uses it"
    );
    d.unpublish("v1", &host("node1", Some(IQN1))).await.unwrap();
    d.unpublish("v2", &host("node1", Some(IQN1))).await.unwrap();
    assert!(!host_groups(&nx).await.contains_key("storch-host-node1"));
    // Gone volumes and hosts never published: success.
    d.unpublish("nope", &host("node9", Some(IQN1)))
        .await
        .unwrap();
    d.unpublish("v2", &host("node3", None)).await.unwrap();
    // A delete of a published volume takes its host's group along.
    d.publish("v2", &host("node1", Some(IQN1))).await.unwrap();
    d.destroy("v2").await.unwrap();
    d.destroy("v1").await.unwrap();
    let left = nx.get("/san/lunMappings").await;
    assert_eq!(left["data"], json!([]), "{left}");
    assert_eq!(
        host_groups(&nx).await.keys().collect::<Vec<_>>(),
        ["ops", "other"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_volume_mapped_to_all_needs_no_host_mapping() {
    let nx = Nx::start(&[]);
    let d = driver(&nx, json!({}));
    d.discover().await.unwrap();
    d.create(&req("v1", "tank/csi", GIB)).await.unwrap();
    let ctx = d.publish("v1", &host("node1", Some(IQN1))).await.unwrap();
    assert_eq!(ctx["iscsiLunNumber"], "0");
    assert_eq!(
        mappings_of(&nx, "tank/csi/v1").await,
        [("all".to_string(), 0)]
    );
    assert!(host_groups(&nx).await.is_empty());
    d.unpublish("v1", &host("node1", Some(IQN1))).await.unwrap();
    assert_eq!(
        mappings_of(&nx, "tank/csi/v1").await,
        [("all".to_string(), 0)]
    );
}

#[tokio::test]
async fn an_initiator_is_in_one_host_group_and_a_volume_mapped_once_per_reach() {
    let nx = Nx::start(&[]);
    let hg = |n: &str, m: &str| Some(json!({"name": n, "members": [m]}));
    nx.ok("POST", "/san/hostgroups", hg("hg1", IQN1), 201).await;
    nx.refused("POST", "/san/hostgroups", hg("hg2", IQN1), 409, "EEXIST")
        .await;
    nx.ok("POST", "/san/hostgroups", hg("hg2", IQN2), 201).await;
    nx.refused(
        "PUT",
        "/san/hostgroups/hg2",
        Some(json!({"members": [IQN2, IQN1]})),
        409,
        "EEXIST",
    )
    .await;
    // Its own group may be written again with it.
    nx.ok(
        "PUT",
        "/san/hostgroups/hg1",
        Some(json!({"members": [IQN1]})),
        200,
    )
    .await;
    let t = "iqn.2005-07.com.nexenta:01:t";
    nx.ok("POST", "/san/iscsi/targets", Some(json!({"name": t})), 201)
        .await;
    nx.ok(
        "POST",
        "/san/targetgroups",
        Some(json!({"name": "tg", "members": [t]})),
        201,
    )
    .await;
    nx.zvol("tank/csi/v", GIB, true).await;
    let map = |tg: &str, hg: &str| {
        Some(json!({"volume": "tank/csi/v", "targetGroup": tg, "hostGroup": hg}))
    };
    nx.ok("POST", "/san/lunMappings", map("tg", "hg1"), 201)
        .await;
    nx.ok("POST", "/san/lunMappings", map("tg", "hg2"), 201)
        .await;
    // All overlaps every host group, so it reaches hg1 again.
    nx.refused("POST", "/san/lunMappings", map("tg", "All"), 409, "EEXIST")
        .await;
    nx.refused("POST", "/san/lunMappings", map("All", "hg1"), 409, "EEXIST")
        .await;
}
