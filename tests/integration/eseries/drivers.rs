//! The eseries-iscsi driver's error cases against the `storch-sim eseries` binary: wrong proxy
//! and array passwords (and an array password changed while registered), no pool matching the
//! pattern, an offline array, the proxy's "422 but created" habit on create and on map with
//! and without storch's tags, and a mapping the array refuses: each with a clear error and
//! nothing of storch's left behind.

use serde_json::{Value, json};
use storch::drivers::eseries::EseriesDriver;
use storch::drivers::testing::req;
use storch::drivers::{CommonConfig, DriverError, StorageDriver};
use storch::net::RetryPolicy;

use crate::support::eseries::EseriesSim;

const GIB: u64 = 1 << 30;
const POOLS: &str = "pool_ssd:ssd:64GiB,pool_hdd:hdd:64GiB:raidDiskPool";

pub(super) use crate::support::eseries::es_backend as backend;

pub(super) fn driver(sim: &EseriesSim, extra: Value) -> EseriesDriver {
    let doc = backend(sim, extra);
    let common = CommonConfig::parse(&doc).unwrap();
    EseriesDriver::from_config(&doc, &common)
        .unwrap()
        .tune_client(RetryPolicy {
            max_attempts: 2,
            base_delay: std::time::Duration::from_millis(1),
            max_delay: std::time::Duration::from_millis(2),
        })
}

fn sim(dir: &std::path::Path, args: &[&str]) -> EseriesSim {
    let mut all = vec!["--pools", POOLS];
    all.extend_from_slice(args);
    EseriesSim::start(dir, false, &all)
}

/// The array's volume labels and its number of mappings.
pub(super) async fn on_array(sim: &EseriesSim) -> (Vec<String>, usize) {
    let (_, systems) = sim.request("GET", "/storage-systems", None).await;
    let Some(id) = systems[0]["id"].as_str() else {
        return (Vec::new(), 0);
    };
    let (_, vols) = sim
        .request("GET", &format!("/storage-systems/{id}/volumes"), None)
        .await;
    let (_, maps) = sim
        .request(
            "GET",
            &format!("/storage-systems/{id}/volume-mappings"),
            None,
        )
        .await;
    let labels = vols
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["label"].as_str().unwrap().to_string())
        .collect();
    (labels, maps.as_array().map_or(0, Vec::len))
}

#[tokio::test]
async fn wrong_passwords_are_named_and_register_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let sim = sim(dir.path(), &["--array-password", "right"]);
    match driver(&sim, json!({"password": "wrong-canary"}))
        .discover()
        .await
    {
        Err(DriverError::Invalid(m)) => {
            assert!(
                m.contains("401") && m.contains("username and password"),
                "{m}"
            );
            assert!(!m.contains("canary"), "{m}");
        }
        other => panic!("{other:?}"),
    }
    let (_, systems) = sim.request("GET", "/storage-systems", None).await;
    assert_eq!(systems, json!([]), "nothing registered");
    match driver(&sim, json!({"passwordArray": "wrong-canary"}))
        .discover()
        .await
    {
        Err(DriverError::Invalid(m)) => {
            assert!(m.contains("passwordArray"), "{m}");
            assert!(!m.contains("canary"), "{m}");
        }
        other => panic!("{other:?}"),
    }
    driver(&sim, json!({"passwordArray": "right"}))
        .discover()
        .await
        .unwrap();
}

#[tokio::test]
async fn a_changed_array_password_is_given_to_the_proxy() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("eseries.json");
    let state_arg = state.to_str().unwrap();
    {
        let sim = sim(
            dir.path(),
            &["--array-password", "old", "--state", state_arg],
        );
        driver(&sim, json!({"passwordArray": "old"}))
            .discover()
            .await
            .unwrap();
    }
    // The array's password changed; the proxy still holds the old one.
    let sim = sim(
        dir.path(),
        &["--array-password", "new", "--state", state_arg],
    );
    let d = driver(&sim, json!({"passwordArray": "new"}));
    d.discover().await.unwrap();
    let name = d.internal_name("after-change");
    d.create(&req(&name, "pool_ssd", GIB)).await.unwrap();
    d.destroy(&name).await.unwrap();
}

#[tokio::test]
async fn no_matching_pool_and_an_offline_array_are_clear() {
    let dir = tempfile::tempdir().unwrap();
    let sim1 = sim(dir.path(), &[]);
    match driver(&sim1, json!({"poolNameSearchPattern": "^gold"}))
        .discover()
        .await
    {
        Err(DriverError::Invalid(m)) => {
            assert!(
                m.contains("poolNameSearchPattern") && m.contains("pool_ssd"),
                "{m}"
            )
        }
        other => panic!("{other:?}"),
    }
    let sim2 = sim(dir.path(), &["--offline"]);
    match driver(&sim2, json!({})).discover().await {
        Err(e @ DriverError::Unavailable(_)) => assert!(e.is_retryable(), "{e}"),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn a_422_create_that_made_the_volume_is_adopted_when_tagged() {
    let dir = tempfile::tempdir().unwrap();
    let sim = sim(
        dir.path(),
        &[
            "--fail",
            "POST@volumes:1:422/after",
            "--fail",
            "POST@volume-mappings:1:422/after",
        ],
    );
    let d = driver(&sim, json!({}));
    let name = d.internal_name("quirk");
    let info = d.create(&req(&name, "pool_ssd", GIB)).await.unwrap();
    assert!(info.access.iscsi_lun_number > 0, "{info:?}");
    assert_eq!(d.get(&name).await.unwrap().unwrap().access, info.access);
    d.destroy(&name).await.unwrap();
    assert_eq!(on_array(&sim).await, (vec![], 0));
}

#[tokio::test]
async fn a_422_create_without_storchs_tags_is_reported_and_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let sim = sim(dir.path(), &["--fail", "POST@volumes:1:422/untagged"]);
    let d = driver(&sim, json!({}));
    let name = d.internal_name("untagged");
    match d.create(&req(&name, "pool_ssd", GIB)).await {
        Err(e) => assert!(e.to_string().contains("422"), "{e}"),
        Ok(v) => panic!("adopted a volume without storch's tags: {v:?}"),
    }
    // Not storch's: invisible, never deleted, its name refused.
    assert_eq!(d.get(&name).await.unwrap(), None);
    d.destroy(&name).await.unwrap();
    assert_eq!(on_array(&sim).await, (vec![name.clone()], 0));
    match d.create(&req(&name, "pool_ssd", GIB)).await {
        Err(DriverError::AlreadyExists(m)) => assert!(m.contains("did not make"), "{m}"),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn a_refused_mapping_leaves_nothing_behind() {
    let dir = tempfile::tempdir().unwrap();
    let sim = sim(dir.path(), &["--fail", "POST@volume-mappings:1:422"]);
    let d = driver(&sim, json!({}));
    let name = d.internal_name("unmappable");
    match d.create(&req(&name, "pool_ssd", GIB)).await {
        Err(e) => assert!(e.to_string().contains("422"), "{e}"),
        Ok(v) => panic!("{v:?}"),
    }
    assert_eq!(on_array(&sim).await, (vec![], 0));
}
