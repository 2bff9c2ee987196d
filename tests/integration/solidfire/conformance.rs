//! The solidfire-san driver passes the shared driver conformance suite against the in-process
//! Element simulator over TLS: with QoS types and the `trident` access group (512e), and
//! without types over CHAP (native 4K), with small list pages, clones that stay invisible and
//! running for a few polls, and new volumes that show up late.

use serde_json::{Value, json};
use storch::drivers::conformance::{self, ConformanceOptions};
use storch::drivers::solidfire::SolidFireDriver;
use storch::drivers::{CommonConfig, StorageDriver};
use storch::sim::solidfire::{ClusterSpec, SimOptions, SolidFireSim, Tuning};

const GIB: u64 = 1 << 30;

async fn sim_in(dir: &std::path::Path) -> SolidFireSim {
    SolidFireSim::start(SimOptions {
        tls: true,
        cert_out: Some(dir.join("sf.pem")),
        cluster: ClusterSpec {
            mvip: "127.0.0.1".into(),
            svip: "10.0.0.2:3260".into(),
            capacity: 64 * GIB,
            max_iops: 200_000,
            tenant: None,
        },
        tuning: Tuning {
            page_cap: 3,
            clone_polls: 2,
            create_polls: 1,
        },
        ..SimOptions::default()
    })
    .await
    .expect("simulator starts")
}

fn backend(sim: &SolidFireSim, extra: Value) -> Value {
    let endpoint = format!(
        "https://{}:{}@{}/json-rpc/8.0",
        storch::sim::solidfire::DEFAULT_USERNAME,
        storch::sim::solidfire::DEFAULT_PASSWORD,
        sim.addr()
    );
    let mut doc = json!({
        "version": 1, "storageDriverName": "solidfire-san",
        "Endpoint": endpoint, "SVIP": "10.0.0.2:3260", "TenantName": "conformance",
        "trustedCACertificate": sim.ca_pem().expect("a TLS simulator"),
    });
    for (k, v) in extra.as_object().unwrap() {
        doc[k] = v.clone();
    }
    doc
}

fn driver(doc: &Value) -> SolidFireDriver {
    let common = CommonConfig::parse(doc).unwrap();
    SolidFireDriver::from_config(doc, &common)
        .unwrap()
        .tune_client(
            storch::net::RetryPolicy {
                max_attempts: 4,
                base_delay: std::time::Duration::from_millis(5),
                max_delay: std::time::Duration::from_millis(20),
            },
            4,
        )
}

fn opts() -> ConformanceOptions {
    ConformanceOptions {
        size_bytes: GIB,
        min_size_bytes: Some(storch::drivers::solidfire::MIN_VOLUME_BYTES),
        concurrency: 8,
        ..ConformanceOptions::default()
    }
}

/// Volumes still on the simulated cluster (active or deleted-not-purged).
fn left_on_array(sim: &SolidFireSim) -> usize {
    sim.cluster().volumes.len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn solidfire_san_with_qos_types_and_the_trident_group() {
    let dir = tempfile::tempdir().unwrap();
    let sim = sim_in(dir.path()).await;
    let d = driver(&backend(
        &sim,
        json!({"Types": [
            {"Type": "Bronze", "Qos": {"minIOPS": 1000, "maxIOPS": 2000, "burstIOPS": 4000}},
            {"Type": "Gold", "Qos": {"minIOPS": 6000, "maxIOPS": 8000, "burstIOPS": 10000}},
        ]}),
    ));
    conformance::run(&d, "Gold", &opts()).await;
    assert!(d.list_volumes().await.unwrap().is_empty());
    assert_eq!(left_on_array(&sim), 0, "the suite cleans up, purged");
    assert_eq!(d.external_config()["UseCHAP"], false);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn solidfire_san_default_pool_over_chap_native_4k() {
    let dir = tempfile::tempdir().unwrap();
    let sim = sim_in(dir.path()).await;
    let d = driver(&backend(
        &sim,
        json!({"UseCHAP": true, "DefaultBlockSize": 4096}),
    ));
    conformance::run(&d, "SolidFire-default", &opts()).await;
    assert_eq!(left_on_array(&sim), 0, "the suite cleans up, purged");
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
