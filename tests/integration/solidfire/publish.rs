//! Per-host access on SolidFire against the `storch-sim solidfire` binary: the shared publish
//! checks over volume access groups, a node whose initiator the administrator put in the
//! configured group, CHAP backends (nothing to publish), and the simulator keeping Element's
//! group rules (one group per initiator, 64 initiators, initiator names, unknown parameters).

use async_trait::async_trait;
use serde_json::{Value, json};
use storch::drivers::conformance::{
    self, AccessProbe, ConformanceOptions, PublishOptions, Support, iscsi_host,
};
use storch::drivers::solidfire::SolidFireDriver;
use storch::drivers::testing::req;
use storch::drivers::{CommonConfig, DriverError, HostAccess, StorageDriver};
use storch::sim::solidfire::{Cluster, DEFAULT_PASSWORD, DEFAULT_USERNAME};

use crate::support::sim_process::SimProcess;

const GIB: u64 = 1 << 30;

fn sim(dir: &std::path::Path) -> SimProcess {
    SimProcess::spawn(
        dir,
        "solidfire",
        &["--capacity", "100GiB", "--svip", "10.0.0.2:3260"],
    )
}

fn driver(sim: &SimProcess, extra: Value) -> SolidFireDriver {
    let mut doc = json!({
        "version": 1, "storageDriverName": "solidfire-san",
        "Endpoint": format!("https://{DEFAULT_USERNAME}:{DEFAULT_PASSWORD}@{}/json-rpc/8.0", sim.addr),
        "SVIP": "10.0.0.2:3260", "TenantName": "publish",
        "trustedCACertificate": sim.ca_pem(),
    });
    for (k, v) in extra.as_object().unwrap() {
        doc[k] = v.clone();
    }
    let common = CommonConfig::parse(&doc).unwrap();
    SolidFireDriver::from_config(&doc, &common).unwrap()
}

/// Groups storch made, and groups holding one of `initiators`.
struct Probe<'a> {
    sim: &'a SimProcess,
    initiators: Vec<String>,
}

#[async_trait]
impl AccessProbe for Probe<'_> {
    async fn leftovers(&self) -> Vec<String> {
        let c: Cluster = self.sim.array();
        c.groups
            .iter()
            .filter(|(_, g)| {
                g.attributes.get("storch").is_some()
                    || g.initiators.iter().any(|i| self.initiators.contains(i))
            })
            .map(|(id, g)| format!("group {id} {} {:?} {:?}", g.name, g.initiators, g.volumes))
            .collect()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn publish_checks_pass_over_volume_access_groups() {
    let dir = tempfile::tempdir().unwrap();
    let sim = sim(dir.path());
    let d = driver(&sim, json!({}));
    d.discover().await.unwrap();
    assert!(d.needs_publish(), "the trident group: access groups");
    let opts = ConformanceOptions {
        size_bytes: GIB,
        ..ConformanceOptions::default()
    };
    let p = PublishOptions::new("sf", Support::Required);
    let probe = Probe {
        sim: &sim,
        initiators: p
            .hosts
            .iter()
            .filter_map(|h| h.iscsi_initiator.clone())
            .collect(),
    };
    conformance::check_publish(&d, "SolidFire-default", &opts, &p, &probe).await;
    let c: Cluster = sim.array();
    assert!(c.volumes.is_empty(), "every volume destroyed and purged");
    assert_eq!(c.groups.len(), 1, "only the trident group is left");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_publish_makes_one_group_per_node_and_unpublish_removes_it() {
    let dir = tempfile::tempdir().unwrap();
    let sim = sim(dir.path());
    let d = driver(&sim, json!({}));
    for n in ["v1", "v2"] {
        d.create(&req(n, "SolidFire-default", GIB)).await.unwrap();
    }
    // Upper case in the node's IQN: Element keeps initiators in lower case.
    let w1 = iscsi_host("worker-1", "iqn.1993-08.org.debian:01:ABC");
    assert!(d.publish("v1", &w1).await.unwrap().is_empty());
    d.publish("v2", &w1).await.unwrap();
    let c: Cluster = sim.array();
    let (_, g) = c
        .groups
        .iter()
        .find(|(_, g)| g.name == "storch-worker-1")
        .expect("a group for the node");
    assert_eq!(g.initiators, ["iqn.1993-08.org.debian:01:abc"]);
    assert_eq!(g.volumes.len(), 2, "both volumes in the node's one group");
    assert_eq!(g.attributes["storch"]["node"], "worker-1");

    d.unpublish("v1", &w1).await.unwrap();
    let c: Cluster = sim.array();
    assert!(
        c.groups.values().any(|g| g.name == "storch-worker-1"),
        "the group stays while it holds v2"
    );
    d.unpublish("v2", &w1).await.unwrap();
    let c: Cluster = sim.array();
    assert!(!c.groups.values().any(|g| g.name == "storch-worker-1"));
    // Created volumes are in the trident group (Trident's create) before, during and after.
    let trident = c.groups.values().find(|g| g.name == "trident").unwrap();
    assert_eq!(trident.volumes.len(), 2);
    for n in ["v1", "v2"] {
        d.destroy(n).await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_already_in_the_configured_group_is_left_as_it_is() {
    let dir = tempfile::tempdir().unwrap();
    let sim = sim(dir.path());
    let c = rpc_client(&sim);
    let iqn = "iqn.2005-03.org.open-iscsi:admin-node";
    let d = driver(&sim, json!({}));
    d.create(&req("v1", "SolidFire-default", GIB))
        .await
        .unwrap();
    let before: Cluster = sim.array();
    let trident = *before.groups.keys().next().unwrap();
    ok(
        &c,
        &sim,
        "AddInitiatorsToVolumeAccessGroup",
        json!({"volumeAccessGroupID": trident, "initiators": [iqn]}),
    )
    .await;
    let node = iscsi_host("admin-node", iqn);
    d.publish("v1", &node).await.unwrap();
    d.unpublish("v1", &node).await.unwrap();
    let after: Cluster = sim.array();
    assert_eq!(after.groups.len(), 1, "no group made for the node");
    assert_eq!(after.groups[&trident].initiators, [iqn]);
    assert_eq!(
        after.groups[&trident].volumes.len(),
        1,
        "the volume stays in the configured group"
    );
    d.destroy("v1").await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chap_backends_need_no_publish_and_a_missing_initiator_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let sim = sim(dir.path());
    let chap = driver(&sim, json!({"UseCHAP": true}));
    assert!(!chap.needs_publish());
    chap.create(&req("c1", "SolidFire-default", GIB))
        .await
        .unwrap();
    let no_iqn = HostAccess {
        node: "w".into(),
        iscsi_initiator: None,
    };
    assert!(chap.publish("c1", &no_iqn).await.unwrap().is_empty());
    chap.unpublish("c1", &no_iqn).await.unwrap();
    let c: Cluster = sim.array();
    assert_eq!(c.groups.len(), 1, "CHAP touches no group");
    chap.destroy("c1").await.unwrap();

    let vag = driver(&sim, json!({"AccessGroups": [1]}));
    assert!(vag.needs_publish());
    vag.create(&req("g1", "SolidFire-default", GIB))
        .await
        .unwrap();
    match vag.publish("g1", &no_iqn).await {
        Err(DriverError::Invalid(m)) => {
            assert!(m.contains("node_id") && m.contains("\"w\""), "{m}")
        }
        other => panic!("{other:?}"),
    }
    vag.destroy("g1").await.unwrap();
}

#[tokio::test]
async fn the_simulator_keeps_element_group_rules() {
    let dir = tempfile::tempdir().unwrap();
    let sim = sim(dir.path());
    let c = rpc_client(&sim);
    let iqn = "iqn.1993-08.org.debian:01:one";
    let first = ok(
        &c,
        &sim,
        "CreateVolumeAccessGroup",
        json!({"name": "a", "initiators": [iqn]}),
    )
    .await;
    let gid = first["volumeAccessGroupID"].as_u64().unwrap();
    let cases = [
        (
            "CreateVolumeAccessGroup",
            json!({"name": "b", "initiators": [iqn]}),
            "xInitiatorExists",
        ),
        (
            "CreateVolumeAccessGroup",
            json!({"name": "c", "initiators": ["iqn.1993-08.org.debian:01:UPPER"]}),
            "xInvalidParameter",
        ),
        (
            "CreateVolumeAccessGroup",
            json!({"name": "d", "initiators": ["worker-1"]}),
            "xInvalidParameter",
        ),
        (
            "CreateVolumeAccessGroup",
            json!({"name": "e", "initiators": (0..65).map(|i| format!("iqn.2020-01.io.x:{i}")).collect::<Vec<_>>()}),
            "xExceededLimit",
        ),
        (
            "DeleteVolumeAccessGroup",
            json!({"volumeAccessGroupID": 999}),
            "xVolumeAccessGroupIDDoesNotExist",
        ),
        (
            "DeleteVolumeAccessGroup",
            json!({"volumeAccessGroupID": gid, "purge": true}),
            "xInvalidParameter",
        ),
        (
            "RemoveVolumesFromVolumeAccessGroup",
            json!({"volumeAccessGroupID": gid, "volumes": [7]}),
            "xNotInVolumeAccessGroup",
        ),
    ];
    for (method, params, name) in cases {
        let body = call(&c, &sim, method, params.clone()).await;
        assert_eq!(body["error"]["name"], name, "{method} {params}: {body}");
        assert_eq!(body["error"]["code"], 500);
    }
    let c2: Cluster = sim.array();
    assert_eq!(c2.groups.len(), 2, "refused calls changed nothing");
    ok(
        &c,
        &sim,
        "DeleteVolumeAccessGroup",
        json!({"volumeAccessGroupID": gid, "deleteOrphanInitiators": true}),
    )
    .await;
    // The initiator is free again.
    ok(
        &c,
        &sim,
        "CreateVolumeAccessGroup",
        json!({"name": "b", "initiators": [iqn]}),
    )
    .await;
}

fn rpc_client(sim: &SimProcess) -> reqwest::Client {
    let tls = storch::net::TlsOptions {
        verify: true,
        trusted_ca_pem: Some(sim.ca_pem()),
    };
    storch::net::build_client(&tls, std::time::Duration::from_secs(30)).unwrap()
}

async fn call(c: &reqwest::Client, sim: &SimProcess, method: &str, params: Value) -> Value {
    c.post(format!("https://{}/json-rpc/8.0", sim.addr))
        .basic_auth(DEFAULT_USERNAME, Some(DEFAULT_PASSWORD))
        .body(json!({"method": method, "params": params, "id": 1}).to_string())
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

async fn ok(c: &reqwest::Client, sim: &SimProcess, method: &str, params: Value) -> Value {
    let body = call(c, sim, method, params).await;
    assert!(body.get("error").is_none(), "{method}: {body}");
    body["result"].clone()
}

/// Canned answers: the host's initiator in a group that is full (Element's xExceededLimit) →
/// `Conflict` naming the volume and node; no group holding it → one made with the lower-cased
/// initiator, the volume and storch's attributes.
#[tokio::test]
async fn canned_a_full_group_is_a_conflict_and_a_new_group_is_made_as_asked() {
    use super::canned::{
        backend, canned, discovery, driver_with, err, listings, ok, params_of, vol,
    };
    let w1 = iscsi_host("w1", "iqn.1993-08.org.debian:01:W1");
    let group = |initiators: Value| {
        ok(
            json!({"volumeAccessGroups": [{"volumeAccessGroupID": 6, "name": "full",
            "initiators": initiators, "initiatorIDs": [1], "volumes": [1, 2],
            "deletedVolumes": [], "attributes": {}}]}),
        )
    };
    let empty = ok(json!({"volumeAccessGroups": []}));

    let mut answers = discovery();
    answers.extend(listings(1, vec![vol(9, "pv-1", true)]));
    answers.push((
        "ListVolumeAccessGroups",
        200,
        group(json!(["iqn.1993-08.org.debian:01:w1"])),
    ));
    answers.push(("ListVolumeAccessGroups", 200, empty.clone()));
    answers.push((
        "AddVolumesToVolumeAccessGroup",
        200,
        err(
            "xExceededLimit",
            "A volume access group holds at most 2000 volumes.",
        ),
    ));
    let c = canned(answers).await;
    let d = driver_with(&backend(&c, json!({})), 10);
    match d.publish("pv-1", &w1).await {
        Err(DriverError::Conflict(m)) => assert!(
            m.contains("pv-1") && m.contains("w1") && m.contains("xExceededLimit"),
            "{m}"
        ),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        params_of(&c, "AddVolumesToVolumeAccessGroup"),
        [json!({"volumeAccessGroupID": 6, "volumes": [9]})]
    );

    let mut answers = discovery();
    answers.extend(listings(1, vec![vol(9, "pv-1", true)]));
    answers.push((
        "ListVolumeAccessGroups",
        200,
        group(json!(["iqn.2000-01.io.other:x"])),
    ));
    answers.push(("ListVolumeAccessGroups", 200, empty));
    answers.push((
        "CreateVolumeAccessGroup",
        200,
        ok(json!({"volumeAccessGroupID": 7})),
    ));
    let c = canned(answers).await;
    let d = driver_with(&backend(&c, json!({})), 10);
    assert!(d.publish("pv-1", &w1).await.unwrap().is_empty());
    assert_eq!(
        params_of(&c, "CreateVolumeAccessGroup"),
        [
            json!({"name": "storch-w1", "initiators": ["iqn.1993-08.org.debian:01:w1"],
            "volumes": [9], "attributes": {"storch": {"createdBy": "storch", "node": "w1"}}})
        ]
    );
}
