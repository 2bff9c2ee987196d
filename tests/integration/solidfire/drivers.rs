//! The solidfire-san driver against the in-process Element simulator, beyond the conformance
//! suite: the error cases (wrong password, unknown tenant, QoS beyond the cluster,
//! a clone of a missing snapshot, a full array, an injected clone fault) each with a clear
//! class and message and nothing left on the array; a tenant with many volumes read through
//! capped pages.

use crate::support::solidfire::*;
use serde_json::{Value, json};
use storch::drivers::solidfire::SolidFireDriver;
use storch::drivers::testing::{clone_req, req};
use storch::drivers::{DriverError, StorageDriver};
use storch::sim::solidfire::{DEFAULT_PASSWORD as PW, FailRule, SolidFireSim, Tuning};

async fn sim_in(dir: &std::path::Path, page_cap: usize) -> SolidFireSim {
    let tuning = Tuning {
        page_cap,
        clone_polls: 2,
        create_polls: 1,
    };
    sf_sim_in(dir, 40 * GIB, Some("existing"), tuning).await
}

/// Gold, and a type beyond the cluster's 100 000 IOPS.
fn backend(sim: &SolidFireSim, password: &str, extra: Value) -> Value {
    let mut doc = sf_backend(
        sim,
        password,
        json!({"TenantName": "existing", "Types": [
            {"Type": "Gold", "Qos": {"minIOPS": 6000, "maxIOPS": 8000, "burstIOPS": 10000}},
            {"Type": "Ludicrous", "Qos": {"minIOPS": 10000, "maxIOPS": 150000, "burstIOPS": 150000}},
        ]}),
    );
    for (k, v) in extra.as_object().unwrap() {
        doc[k] = v.clone();
    }
    doc
}

fn driver(doc: &Value) -> SolidFireDriver {
    sf_driver(doc, 50)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_password_is_a_clear_invalid() {
    let dir = tempfile::tempdir().unwrap();
    let sim = sim_in(dir.path(), 100).await;
    let d = driver(&backend(&sim, "wrong-canary", json!({})));
    match d.discover().await {
        Err(DriverError::Invalid(m)) => {
            assert!(m.contains("401") && m.contains("EndPoint"), "{m}");
            assert!(!m.contains("canary"), "{m}");
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_tenant_is_created_with_chap_secrets() {
    let dir = tempfile::tempdir().unwrap();
    let sim = sim_in(dir.path(), 100).await;
    let d = driver(&backend(
        &sim,
        PW,
        json!({"TenantName": "newcomer", "UseCHAP": true}),
    ));
    d.discover().await.unwrap();
    let c = sim.cluster();
    assert!(c.accounts.values().any(|a| a.username == "newcomer"));
    let v = d.create(&req("v1", "Gold", GIB)).await.unwrap();
    assert_eq!(v.access.iscsi_username, "newcomer");
    assert!(!v.access.iscsi_target_secret.is_empty());
    // A second driver finds the account instead of adding it again.
    let again = driver(&backend(
        &sim,
        PW,
        json!({"TenantName": "newcomer", "UseCHAP": true}),
    ));
    again.discover().await.unwrap();
    let n = sim
        .cluster()
        .accounts
        .values()
        .filter(|a| a.username == "newcomer")
        .count();
    assert_eq!(n, 1);
    d.destroy("v1").await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn qos_beyond_the_cluster_is_invalid_and_leaves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let sim = sim_in(dir.path(), 100).await;
    let d = driver(&backend(&sim, PW, json!({})));
    match d.create(&req("fast", "Ludicrous", GIB)).await {
        Err(DriverError::Invalid(m)) => assert!(m.contains("CreateVolume"), "{m}"),
        other => panic!("{other:?}"),
    }
    assert!(sim.cluster().volumes.is_empty());
    assert_eq!(d.get("fast").await.unwrap(), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clone_of_a_missing_snapshot_and_a_full_array_leave_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let sim = sim_in(dir.path(), 100).await;
    let d = driver(&backend(&sim, PW, json!({})));
    d.create(&req("src", "Gold", GIB)).await.unwrap();
    match d
        .clone_volume(&clone_req("copy", "src", Some("nope")))
        .await
    {
        Err(DriverError::NotFound(m)) => assert!(m.contains("nope"), "{m}"),
        other => panic!("{other:?}"),
    }
    match d.create(&req("huge", "Gold", 39 * GIB + 1)).await {
        Err(DriverError::Conflict(m)) => assert!(m.contains("space"), "{m}"),
        other => panic!("{other:?}"),
    }
    match d.resize("src", 41 * GIB).await {
        Err(DriverError::Conflict(m)) => assert!(m.contains("space"), "{m}"),
        other => panic!("{other:?}"),
    }
    let names: Vec<String> = sim
        .cluster()
        .volumes
        .values()
        .map(|v| v.name.clone())
        .collect();
    assert_eq!(names, ["src"]);
    d.destroy("src").await.unwrap();
    assert!(sim.cluster().volumes.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_injected_clone_fault_is_retried_then_reported_leaving_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let sim = sim_in(dir.path(), 100).await;
    let d = driver(&backend(&sim, PW, json!({})));
    d.create(&req("src", "Gold", GIB)).await.unwrap();
    sim.set_fail_rules(vec![
        FailRule::parse("CloneVolume:1:xSliceNotRegistered").unwrap(),
    ]);
    match d.clone_volume(&clone_req("copy", "src", None)).await {
        Err(DriverError::Unavailable(m)) => assert!(m.contains("xSliceNotRegistered"), "{m}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        sim.calls("CloneVolume"),
        3,
        "retried up to the policy's attempts"
    );
    sim.set_fail_rules(vec![]);
    let c = d
        .clone_volume(&clone_req("copy", "src", None))
        .await
        .unwrap();
    assert_eq!(c.pool, "Gold");
    d.destroy("copy").await.unwrap();
    d.destroy("src").await.unwrap();
    assert!(sim.cluster().volumes.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_volumes_are_read_through_capped_pages() {
    let dir = tempfile::tempdir().unwrap();
    let sim = sim_in(dir.path(), 4).await;
    let d = driver(&backend(&sim, PW, json!({})));
    for i in 0..23 {
        d.create(&req(&format!("v{i}"), "Gold", 1_000_000_000))
            .await
            .unwrap();
    }
    let listed = d.list_volumes().await.unwrap();
    assert_eq!(listed.len(), 23);
    assert!(d.get("v22").await.unwrap().is_some());
    for i in 0..23 {
        d.destroy(&format!("v{i}")).await.unwrap();
    }
    assert!(sim.cluster().volumes.is_empty());
}
