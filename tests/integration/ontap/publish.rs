//! ontap-san's per-host publish (`perNodeIgroups`, for the CSI frontend) against the
//! simulator over both APIs: an igroup per node holding its initiator, a LUN map with the LUN
//! number in the publish context, idempotent publish and unpublish, the node's igroup removed
//! with its last map; and the Trident 18.07 mode (the backend's igroup at create) unchanged.

use crate::support::ontap::*;
use serde_json::json;
use storch::drivers::testing::req;
use storch::drivers::{DriverError, HostAccess, PublishContext, StorageDriver};
use storch::sim::ontap::SimOptions;
use storch::sim::ontap::state::Igroup;

const IQN1: &str = "iqn.1993-08.org.debian:01:node1";
const IQN2: &str = "iqn.1993-08.org.debian:01:node2";
const IQN3: &str = "iqn.1993-08.org.debian:01:node3";

fn host(node: &str, iqn: Option<&str>) -> HostAccess {
    HostAccess {
        node: node.to_string(),
        iscsi_initiator: iqn.map(str::to_string),
    }
}

fn lun_number(n: u32) -> PublishContext {
    PublishContext::from([("iscsiLunNumber".to_string(), n.to_string())])
}

/// The maps of a volume's LUN on the array: igroup → LUN number.
fn maps(sim: &storch::sim::ontap::OntapSim, volume: &str) -> Vec<(String, u32)> {
    sim.array().svms["svm1"].luns[&format!("/vol/{volume}/lun0")]
        .maps
        .iter()
        .map(|(g, n)| (g.clone(), *n))
        .collect()
}

fn igroup(sim: &storch::sim::ontap::OntapSim, name: &str) -> Option<Igroup> {
    sim.array().svms["svm1"].igroups.get(name).cloned()
}

async fn per_node_igroups_publish_each_host(api: Api) {
    let dir = tempfile::tempdir().unwrap();
    let sim = sim_in(dir.path(), api.sim_options(SimOptions::default())).await;
    let d = driver(&backend(&sim, "ontap-san", json!({"perNodeIgroups": true})));
    assert!(d.needs_publish());
    discover(&d).await;
    assert!(
        sim.array().svms["svm1"].igroups.is_empty(),
        "no backend igroup: hosts get their own"
    );
    let a = d.create(&req("trident_pa", "aggr1", GIB)).await.unwrap();
    d.create(&req("trident_pb", "aggr1", GIB)).await.unwrap();
    assert!(
        maps(&sim, "trident_pa").is_empty(),
        "nothing mapped at create"
    );
    assert_eq!(a.access.iscsi_igroup, "");

    // The first publish makes the node's igroup with its initiator and maps the LUN there.
    let node1 = host("node1", Some(IQN1));
    let ctx = d.publish("trident_pa", &node1).await.unwrap();
    assert_eq!(ctx, lun_number(0));
    let g = igroup(&sim, "storch-node1").expect("the node's igroup");
    assert_eq!(g.initiators, [IQN1]);
    assert_eq!((g.kind.as_str(), g.os_type.as_str()), ("iscsi", "linux"));
    assert_eq!(maps(&sim, "trident_pa"), [("storch-node1".to_string(), 0)]);
    // Again: the same answer, nothing added.
    assert_eq!(
        d.publish("trident_pa", &node1).await.unwrap(),
        lun_number(0)
    );
    assert_eq!(igroup(&sim, "storch-node1").unwrap().initiators, [IQN1]);
    // A second volume on the same node gets the next number in that igroup.
    assert_eq!(
        d.publish("trident_pb", &node1).await.unwrap(),
        lun_number(1)
    );
    // Another node: its own igroup, numbers counted there.
    let node2 = host("node2", Some(IQN2));
    assert_eq!(
        d.publish("trident_pa", &node2).await.unwrap(),
        lun_number(0)
    );
    assert_eq!(
        maps(&sim, "trident_pa"),
        [
            ("storch-node1".to_string(), 0),
            ("storch-node2".to_string(), 0)
        ]
    );
    // A node igroup that exists with another initiator gets this host's added.
    sim.with_array(|a| {
        let svm = a.svms.get_mut("svm1").unwrap();
        let mut g = svm.igroups["storch-node1"].clone();
        g.uuid = "5e1f0000-0000-4000-8000-00000000beef".into();
        g.initiators = vec!["iqn.2001-04.com.example:old".into()];
        svm.igroups.insert("storch-node3".into(), g);
    });
    let node3 = host("node3", Some(IQN3));
    assert_eq!(
        d.publish("trident_pa", &node3).await.unwrap(),
        lun_number(0)
    );
    assert_eq!(
        igroup(&sim, "storch-node3").unwrap().initiators,
        ["iqn.2001-04.com.example:old", IQN3]
    );

    // Refusals name what is wrong and change nothing.
    let before = sim.array();
    let e = d
        .publish("trident_pa", &host("node4", None))
        .await
        .unwrap_err();
    assert!(
        matches!(&e, DriverError::Invalid(m) if m.contains("node4") && m.contains("initiator")),
        "{e}"
    );
    let e = d.publish("trident_none", &node1).await.unwrap_err();
    assert!(matches!(&e, DriverError::NotFound(_)), "{e}");
    assert_eq!(sim.array().svms["svm1"], before.svms["svm1"]);

    // Unpublish: the map goes; the igroup stays while it maps another LUN.
    d.unpublish("trident_pa", &node1).await.unwrap();
    assert!(
        !maps(&sim, "trident_pa")
            .iter()
            .any(|(g, _)| g == "storch-node1")
    );
    assert!(igroup(&sim, "storch-node1").is_some());
    d.unpublish("trident_pb", &node1).await.unwrap();
    assert!(igroup(&sim, "storch-node1").is_none(), "its last map went");
    // Again, and for a host that never had it, and a volume that is gone: success.
    d.unpublish("trident_pb", &node1).await.unwrap();
    d.unpublish("trident_pb", &node2).await.unwrap();
    d.unpublish("trident_none", &node2).await.unwrap();

    // Destroying a volume still published unmaps it and removes the igroups it leaves empty.
    d.destroy("trident_pa").await.unwrap();
    let arr = sim.array();
    assert!(!arr.svms["svm1"].luns.contains_key("/vol/trident_pa/lun0"));
    assert!(
        arr.svms["svm1"].igroups.is_empty(),
        "{:?}",
        arr.svms["svm1"].igroups
    );
    d.destroy("trident_pb").await.unwrap();
}

async fn per_node_igroups_are_named_after_igroup_name(api: Api) {
    let dir = tempfile::tempdir().unwrap();
    let sim = sim_in(dir.path(), api.sim_options(SimOptions::default())).await;
    let d = driver(&backend(
        &sim,
        "ontap-san",
        json!({"perNodeIgroups": true, "igroupName": "k8s"}),
    ));
    discover(&d).await;
    d.create(&req("trident_pc", "aggr2", GIB)).await.unwrap();
    let long = format!("{}.cluster.example.com", "worker-".repeat(20));
    for n in ["worker-1", long.as_str()] {
        d.publish("trident_pc", &host(n, Some(IQN1))).await.unwrap();
    }
    let names: Vec<String> = sim.array().svms["svm1"].igroups.keys().cloned().collect();
    assert_eq!(names.len(), 2);
    assert!(names.contains(&"k8s-worker-1".to_string()), "{names:?}");
    assert!(
        names.iter().all(|n| n.starts_with("k8s-") && n.len() <= 96),
        "{names:?}"
    );
    for n in ["worker-1", long.as_str()] {
        d.unpublish("trident_pc", &host(n, None)).await.unwrap();
    }
    assert!(sim.array().svms["svm1"].igroups.is_empty());
    d.destroy("trident_pc").await.unwrap();
}

/// Without `perNodeIgroups`, ontap-san keeps Trident 18.07's way: the LUN is mapped to the
/// backend's igroup at create, and there is nothing to publish.
async fn the_backend_igroup_needs_no_publish(api: Api) {
    let dir = tempfile::tempdir().unwrap();
    let sim = sim_in(dir.path(), api.sim_options(SimOptions::default())).await;
    let d = driver(&backend(&sim, "ontap-san", json!({})));
    assert!(!d.needs_publish());
    discover(&d).await;
    d.create(&req("trident_pd", "aggr1", GIB)).await.unwrap();
    assert_eq!(maps(&sim, "trident_pd"), [("trident".to_string(), 0)]);
    let node1 = host("node1", Some(IQN1));
    assert_eq!(
        d.publish("trident_pd", &node1).await.unwrap(),
        PublishContext::new()
    );
    d.unpublish("trident_pd", &node1).await.unwrap();
    assert_eq!(sim.array().svms["svm1"].igroups.len(), 1);
    d.destroy("trident_pd").await.unwrap();
}

crate::over_both_apis!(
    per_node_igroups_publish_each_host,
    per_node_igroups_are_named_after_igroup_name,
    the_backend_igroup_needs_no_publish,
);

#[tokio::test]
async fn per_node_igroups_is_for_ontap_san_only() {
    let dir = tempfile::tempdir().unwrap();
    let sim = sim_in(dir.path(), SimOptions::default()).await;
    for driver_name in ["ontap-nas", "ontap-nas-economy", "ontap-nas-flexgroup"] {
        let doc = backend(&sim, driver_name, json!({"perNodeIgroups": true}));
        let common = storch::drivers::CommonConfig::parse(&doc).unwrap();
        let e = storch::drivers::ontap::OntapDriver::from_config(&doc, &common).unwrap_err();
        assert!(
            matches!(&e, DriverError::Invalid(m) if m.contains("perNodeIgroups")),
            "{e}"
        );
    }
    let doc = backend(&sim, "ontap-san", json!({"perNodeIgroups": "maybe"}));
    let common = storch::drivers::CommonConfig::parse(&doc).unwrap();
    let e = storch::drivers::ontap::OntapDriver::from_config(&doc, &common).unwrap_err();
    assert!(
        matches!(&e, DriverError::Invalid(m) if m.contains("perNodeIgroups")),
        "{e}"
    );
}
