//! The solidfire-san driver passes the shared driver conformance suite against the in-process
//! Element simulator over TLS: with QoS types and the `trident` access group (512e), and
//! without types over CHAP (native 4K), with small list pages, clones that stay invisible and
//! running for a few polls, and new volumes that show up late.

use crate::support::solidfire::*;
use serde_json::json;
use storch::drivers::StorageDriver;
use storch::drivers::conformance::{self, ConformanceOptions};
use storch::sim::solidfire::{SolidFireSim, Tuning};

async fn sim(dir: &std::path::Path) -> SolidFireSim {
    let tuning = Tuning {
        page_cap: 3,
        clone_polls: 2,
        create_polls: 1,
    };
    sf_sim_in(dir, 64 * GIB, None, tuning).await
}

fn opts() -> ConformanceOptions {
    ConformanceOptions {
        size_bytes: GIB,
        min_size_bytes: Some(storch::drivers::solidfire::MIN_VOLUME_BYTES),
        concurrency: 8,
        ..ConformanceOptions::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn solidfire_san_with_qos_types_and_the_trident_group() {
    let dir = tempfile::tempdir().unwrap();
    let sim = sim(dir.path()).await;
    let d = sf_driver(
        &sf_backend_ok(
            &sim,
            json!({"TenantName": "conformance", "Types": [
                {"Type": "Bronze", "Qos": {"minIOPS": 1000, "maxIOPS": 2000, "burstIOPS": 4000}},
                {"Type": "Gold", "Qos": {"minIOPS": 6000, "maxIOPS": 8000, "burstIOPS": 10000}},
            ]}),
        ),
        4,
    );
    conformance::run(&d, "Gold", &opts()).await;
    assert!(d.list_volumes().await.unwrap().is_empty());
    assert!(
        sim.cluster().volumes.is_empty(),
        "the suite cleans up, purged"
    );
    assert_eq!(d.external_config()["UseCHAP"], false);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn solidfire_san_default_pool_over_chap_native_4k() {
    let dir = tempfile::tempdir().unwrap();
    let sim = sim(dir.path()).await;
    let d = sf_driver(
        &sf_backend_ok(
            &sim,
            json!({"TenantName": "conformance", "UseCHAP": true, "DefaultBlockSize": 4096}),
        ),
        4,
    );
    conformance::run(&d, "SolidFire-default", &opts()).await;
    assert!(
        sim.cluster().volumes.is_empty(),
        "the suite cleans up, purged"
    );
    // CHAP: the tenant account (created by the driver) and its secrets.
    let info = d
        .create(&storch::drivers::testing::req(
            "chap-1",
            "SolidFire-default",
            GIB,
        ))
        .await
        .unwrap();
    assert_eq!(info.access.iscsi_username, "conformance");
    assert!(info.access.iscsi_initiator_secret.len() >= 12);
    assert!(info.access.iscsi_vags.is_empty());
    let c = sim.cluster();
    let v = c.volumes.values().next().unwrap();
    assert!(!v.enable512e, "DefaultBlockSize 4096 is native 4K");
    d.destroy("chap-1").await.unwrap();
}
