//! The nexentastor-iscsi driver passes the shared driver conformance suite against the
//! in-process NexentaStor simulator over TLS: with fixed targets and with dynamic target
//! allocation over CHAP, with small collection pages and jobs that stay running for a poll.

use std::time::Duration;

use serde_json::{Value, json};
use storch::drivers::conformance::{self, ConformanceOptions};
use storch::drivers::nexentastor::NexentaDriver;
use storch::drivers::{CommonConfig, StorageDriver};
use storch::sim::nexentastor::{DEFAULT_PASSWORD, NexentaSim, SimOptions, Tuning, VolumeGroupSpec};

const GIB: u64 = 1 << 30;

async fn sim(dir: &std::path::Path) -> NexentaSim {
    NexentaSim::start(SimOptions {
        tls: true,
        cert_out: Some(dir.join("nx.pem")),
        volume_groups: VolumeGroupSpec::parse_list("tank/csi:64GiB").unwrap(),
        tuning: Tuning {
            page_cap: 3,
            job_polls: 2,
        },
        ..SimOptions::default()
    })
    .await
    .unwrap()
}

/// A driver on the simulator(s) at `rest_ip` (trusting `ca_pem`): volume group `tank/csi`,
/// data address 192.0.2.40, small pages; `extra` merged over that.
pub(super) fn sim_driver(rest_ip: &str, ca_pem: &str, extra: Value) -> NexentaDriver {
    let doc = json!({
        "version": 1, "storageDriverName": "nexentastor-iscsi", "backendName": "nx",
        "restIp": rest_ip, "username": "admin", "password": DEFAULT_PASSWORD,
        "defaultDataIp": "192.0.2.40", "defaultVolumeGroup": "tank/csi",
        "trustedCACertificate": ca_pem,
    });
    let doc = storch::drivers::testing::merged(doc, extra);
    let common = CommonConfig::parse(&doc).unwrap();
    NexentaDriver::from_config(&doc, &common)
        .unwrap()
        .tune_client(2, Duration::from_secs(30))
}

fn driver(sim: &NexentaSim, extra: Value) -> NexentaDriver {
    let fixed = json!({"defaultTarget": "iqn.2005-07.com.nexenta:01:conformance",
        "defaultTargetGroup": "conformance-tg"});
    let doc = storch::drivers::testing::merged(fixed, extra);
    sim_driver(&sim.url(), sim.ca_pem().unwrap(), doc)
}

fn opts() -> ConformanceOptions {
    ConformanceOptions {
        size_bytes: GIB,
        concurrency: 6,
        ..ConformanceOptions::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nexentastor_iscsi_with_a_fixed_target() {
    let dir = tempfile::tempdir().unwrap();
    let sim = sim(dir.path()).await;
    // Thick zvols reserve their size: the suite's capacity checks apply.
    let d = driver(&sim, json!({"sparseVolume": false}));
    conformance::run(&d, "tank/csi", &opts()).await;
    assert!(d.list_volumes().await.unwrap().is_empty());
    let a = sim.appliance();
    assert!(
        a.volumes.is_empty() && a.lun_mappings.is_empty(),
        "the suite cleans up"
    );
    sim.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nexentastor_iscsi_dynamic_targets_over_chap() {
    let dir = tempfile::tempdir().unwrap();
    let sim = sim(dir.path()).await;
    let d = driver(
        &sim,
        json!({"dynamicTargetLunAllocation": true, "numOfLunsPerTarget": 2,
            "useChapAuth": true, "chapUser": "storch", "chapSecret": "chap-secret-123"}),
    );
    // Sparse zvols reserve nothing (the pool may be overcommitted): no capacity checks.
    let sparse = ConformanceOptions {
        capacity: false,
        ..opts()
    };
    conformance::run(&d, "tank/csi", &sparse).await;
    let a = sim.appliance();
    assert!(
        a.volumes.is_empty() && a.lun_mappings.is_empty(),
        "the suite cleans up"
    );
    assert!(
        a.target_groups.is_empty(),
        "empty dynamic target groups are removed: {:?}",
        a.target_groups
    );
    sim.stop().await;
}
