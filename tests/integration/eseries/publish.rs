//! Per-host access on E-Series against the `storch-sim eseries` binary: the shared publish
//! checks (a volume on one host at a time: the array's one mapping per volume), the mapping
//! moved from the host group to the node's host and back, a LUN the host already uses (then
//! in the publish context), a host the administrator put in the group (left as it is), and
//! the simulator refusing bad host ports, taken ports and LUNs out of range.

use async_trait::async_trait;
use serde_json::{Value, json};
use storch::drivers::StorageDriver;
use storch::drivers::conformance::{
    self, AccessProbe, ConformanceOptions, PublishOptions, Support, iscsi_host,
};
use storch::drivers::eseries::publish::{LUN_KEY, host_label};
use storch::drivers::testing::req;

use super::drivers::driver;
use crate::support::eseries::EseriesSim;

const GIB: u64 = 1 << 30;
const POOLS: &str = "pool_ssd:ssd:64GiB";

fn sim(dir: &std::path::Path) -> EseriesSim {
    EseriesSim::start(dir, false, &["--pools", POOLS])
}

async fn system(sim: &EseriesSim) -> String {
    let (_, systems) = sim.request("GET", "/storage-systems", None).await;
    systems[0]["id"].as_str().expect("registered").to_string()
}

async fn get(sim: &EseriesSim, rest: &str) -> Value {
    let id = system(sim).await;
    let (status, v) = sim
        .request("GET", &format!("/storage-systems/{id}{rest}"), None)
        .await;
    assert_eq!(status, 200, "GET {rest}: {v}");
    v
}

async fn post(sim: &EseriesSim, rest: &str, body: Value) -> (u16, Value) {
    let id = system(sim).await;
    sim.request("POST", &format!("/storage-systems/{id}{rest}"), Some(&body))
        .await
}

/// Hosts and mappings to hosts (what publishes make; the host group's mappings are the
/// volumes' resting state).
struct Probe<'a>(&'a EseriesSim);

#[async_trait]
impl AccessProbe for Probe<'_> {
    async fn leftovers(&self) -> Vec<String> {
        let hosts = get(self.0, "/hosts").await;
        let maps = get(self.0, "/volume-mappings").await;
        let hosts = hosts
            .as_array()
            .unwrap()
            .iter()
            .map(|h| format!("host {}", h["label"]));
        let maps = maps
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| m["type"] == "host")
            .map(|m| format!("mapping {} to host {}", m["volumeRef"], m["mapRef"]));
        hosts.chain(maps).collect()
    }
}

/// The volume's one mapping: (type, LUN).
async fn mapping_of(sim: &EseriesSim, label: &str) -> (String, i64) {
    let vols = get(sim, "/volumes").await;
    let v = vols
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["label"] == label)
        .unwrap_or_else(|| panic!("volume {label}"));
    let m = &v["listOfMappings"][0];
    (
        m["type"].as_str().unwrap_or("none").into(),
        m["lun"].as_i64().unwrap_or(-1),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn publish_checks_pass_with_a_host_per_node() {
    let dir = tempfile::tempdir().unwrap();
    let sim = sim(dir.path());
    let d = driver(&sim, json!({}));
    d.discover().await.unwrap();
    assert!(d.needs_publish());
    let opts = ConformanceOptions {
        size_bytes: GIB,
        ..ConformanceOptions::default()
    };
    let p = PublishOptions::new("es", Support::Optional);
    conformance::check_publish(&d, "pool_ssd", &opts, &p, &Probe(&sim)).await;
    let vols = get(&sim, "/volumes").await;
    assert!(vols.as_array().unwrap().is_empty(), "{vols}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_mapping_moves_to_the_node_and_back() {
    let dir = tempfile::tempdir().unwrap();
    let sim = sim(dir.path());
    let d = driver(&sim, json!({"hostType": "linux_atto"}));
    let a = d.internal_name("pvc-a");
    let b = d.internal_name("pvc-b");
    let info_a = d.create(&req(&a, "pool_ssd", GIB)).await.unwrap();
    let info_b = d.create(&req(&b, "pool_ssd", GIB)).await.unwrap();
    let lun_a = i64::from(info_a.access.iscsi_lun_number);
    let lun_b = i64::from(info_b.access.iscsi_lun_number);
    assert_eq!(mapping_of(&sim, &a).await, ("cluster".into(), lun_a));

    let node = "worker-1.example.com";
    let w1 = iscsi_host(node, "iqn.1993-08.org.debian:01:w1");
    let ctx = d.publish(&a, &w1).await.unwrap();
    assert_eq!(
        ctx[LUN_KEY],
        lun_a.to_string(),
        "the group's LUN, free on the host"
    );
    assert_eq!(mapping_of(&sim, &a).await, ("host".into(), lun_a));
    let hosts = get(&sim, "/hosts").await;
    let h = &hosts[0];
    assert_eq!(h["label"], host_label(node));
    assert_eq!(h["label"], "storch_worker-1_example_com");
    assert_eq!(h["hostTypeIndex"], 27, "linux_atto is LnxTPGSALUA");
    assert_eq!(
        h["hostSidePorts"][0]["address"],
        "iqn.1993-08.org.debian:01:w1"
    );

    // Another volume mapped to the host at b's LUN: b gets another LUN on the host, and the
    // context says which.
    let (status, foreign) = post(
        &sim,
        "/volumes",
        json!({"poolId": get(&sim, "/storage-pools").await[0]["volumeGroupRef"],
               "name": "foreign", "sizeUnit": "gb", "size": 1, "segSize": 128}),
    )
    .await;
    assert_eq!(status, 200, "{foreign}");
    let (status, m) = post(
        &sim,
        "/volume-mappings",
        json!({"mappableObjectId": foreign["volumeRef"], "targetId": h["hostRef"], "lun": lun_b}),
    )
    .await;
    assert_eq!(status, 200, "{m}");
    let ctx = d.publish(&b, &w1).await.unwrap();
    let on_host: i64 = ctx[LUN_KEY].parse().unwrap();
    assert_ne!(on_host, lun_b);
    assert_eq!(mapping_of(&sim, &b).await, ("host".into(), on_host));
    assert_eq!(d.publish(&b, &w1).await.unwrap(), ctx, "idempotent");

    // One mapping per volume: a second node is refused while the first has it.
    let w2 = iscsi_host("worker-2", "iqn.1993-08.org.debian:01:w2");
    assert!(matches!(
        d.publish(&a, &w2).await,
        Err(storch::drivers::DriverError::Conflict(_))
    ));
    assert_eq!(mapping_of(&sim, &a).await, ("host".into(), lun_a));

    for v in [&a, &b] {
        d.unpublish(v, &w1).await.unwrap();
    }
    assert_eq!(
        mapping_of(&sim, &a).await,
        ("cluster".into(), lun_a),
        "back"
    );
    assert_eq!(mapping_of(&sim, &b).await.0, "cluster");
    let hosts = get(&sim, "/hosts").await;
    assert_eq!(
        hosts.as_array().unwrap().len(),
        1,
        "worker-1's host stays while the foreign volume is mapped to it; the refused publish \
         made none for worker-2: {hosts}"
    );
    for v in [&a, &b] {
        d.destroy(v).await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_in_the_group_reaches_the_volume_through_it() {
    let dir = tempfile::tempdir().unwrap();
    let sim = sim(dir.path());
    let d = driver(&sim, json!({}));
    let a = d.internal_name("pvc-g");
    let info = d.create(&req(&a, "pool_ssd", GIB)).await.unwrap();
    let groups = get(&sim, "/host-groups").await;
    let iqn = "iqn.2005-03.org.open-iscsi:in-group";
    let (status, h) = post(
        &sim,
        "/hosts",
        json!({"name": "admin_host", "hostType": {"index": 28}, "groupId": groups[0]["clusterRef"],
               "ports": [{"type": "iscsi", "port": iqn, "label": "admin_host_1"}]}),
    )
    .await;
    assert_eq!(status, 201, "{h}");
    let node = iscsi_host("in-group", iqn);
    assert!(
        d.publish(&a, &node).await.unwrap().is_empty(),
        "through the group"
    );
    d.unpublish(&a, &node).await.unwrap();
    assert_eq!(
        mapping_of(&sim, &a).await,
        ("cluster".into(), i64::from(info.access.iscsi_lun_number))
    );
    let hosts = get(&sim, "/hosts").await;
    assert_eq!(
        hosts[0]["label"], "admin_host",
        "the administrator's host stays"
    );
    d.destroy(&a).await.unwrap();
}

#[tokio::test]
async fn the_simulator_refuses_bad_ports_taken_ports_and_luns_out_of_range() {
    let dir = tempfile::tempdir().unwrap();
    let sim = sim(dir.path());
    let d = driver(&sim, json!({}));
    let a = d.internal_name("pvc-s");
    d.create(&req(&a, "pool_ssd", GIB)).await.unwrap();
    let port = |p: &str| json!([{"type": "iscsi", "port": p, "label": "p1"}]);
    let (status, _) = post(
        &sim,
        "/hosts",
        json!({"name": "h1", "hostType": {"index": 28}, "ports": port("iqn.2020-01.io.x:h1")}),
    )
    .await;
    assert_eq!(status, 201);
    let cases = [
        (
            json!({"name": "h2", "hostType": {"index": 28}, "ports": port("worker-2")}),
            "invalidInput",
        ),
        (
            json!({"name": "h2", "hostType": {"index": 28}, "ports": port("IQN.2020-01.io.x:H1")}),
            "duplicatePort",
        ),
        (
            json!({"name": "h1", "hostType": {"index": 28}}),
            "duplicateLabel",
        ),
        (
            json!({"name": "h2", "hostType": {"index": 28}, "color": "red"}),
            "invalidInput",
        ),
    ];
    for (body, retcode) in cases {
        let (status, v) = post(&sim, "/hosts", body.clone()).await;
        assert_eq!(
            (status, v["retcode"].as_str()),
            (422, Some(retcode)),
            "{body}: {v}"
        );
    }
    let hosts = get(&sim, "/hosts").await;
    assert_eq!(
        hosts.as_array().unwrap().len(),
        1,
        "refusals changed nothing"
    );
    let vols = get(&sim, "/volumes").await;
    let (status, v) = post(
        &sim,
        "/volume-mappings",
        json!({"mappableObjectId": vols[0]["volumeRef"], "targetId": hosts[0]["hostRef"], "lun": 256}),
    )
    .await;
    assert_eq!(status, 422, "{v}");
    d.destroy(&a).await.unwrap();
}
