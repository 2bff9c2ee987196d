//! The eseries-iscsi driver passes the shared driver conformance suite against the
//! `storch-sim eseries` binary: over TLS with the simulator's certificate trusted, where the
//! array has expansion and volume copy (both must then work), and over plain HTTP on an array
//! with neither (refused as "not supported by this array"), with an array password and a
//! host group the driver creates. Nothing is left on the array afterwards.

use serde_json::json;
use storch::drivers::conformance;
use storch::drivers::conformance::Support;
use storch::drivers::eseries::conformance_options;
use storch::drivers::testing::{clone_req, req};
use storch::drivers::{DriverError, StorageDriver};

use super::drivers::{driver, on_array};
use crate::support::eseries::EseriesSim;

const GIB: u64 = 1 << 30;
const POOLS: &str = "pool_ssd:ssd:64GiB:raid6,pool_hdd:hdd:64GiB:raidDiskPool,scratch:ssd:8GiB";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eseries_iscsi_over_tls_with_expand_and_copy() {
    let dir = tempfile::tempdir().unwrap();
    let sim = EseriesSim::start(dir.path(), true, &["--pools", POOLS]);
    let d = driver(&sim, json!({"webProxyVerifyTLS": true}));
    let disc = d.discover().await.unwrap();
    let names: Vec<&str> = disc.pools.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["pool_hdd", "pool_ssd"]);
    let opts = conformance::ConformanceOptions {
        clones: Support::Required,
        resize: Support::Required,
        concurrency: 8,
        ..conformance_options(GIB)
    };
    conformance::run(&d, "pool_ssd", &opts).await;
    conformance::run(&d, "pool_hdd", &opts).await;
    assert!(d.list_volumes().await.unwrap().is_empty());
    assert_eq!(
        on_array(&sim).await,
        (vec![], 0),
        "nothing left on the array"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eseries_iscsi_over_http_without_features_and_with_an_array_password() {
    let dir = tempfile::tempdir().unwrap();
    let sim = EseriesSim::start(
        dir.path(),
        false,
        &[
            "--pools",
            POOLS,
            "--features",
            "none",
            "--array-password",
            "array-pw",
        ],
    );
    let d = driver(
        &sim,
        json!({"passwordArray": "array-pw", "accessGroupName": "storch_hosts",
            "storagePrefix": "st_"}),
    );
    conformance::run(&d, "pool_ssd", &conformance_options(GIB)).await;
    assert_eq!(
        on_array(&sim).await,
        (vec![], 0),
        "nothing left on the array"
    );

    let name = d.internal_name("pvc-features");
    assert!(name.starts_with("st_") && name.len() == 25, "{name}");
    let info = d.create(&req(&name, "pool_ssd", GIB)).await.unwrap();
    assert_eq!(info.access.iscsi_target_portal, "10.0.1.10:3260");
    assert!(
        info.access.iscsi_lun_number > 0,
        "the array picks a non-zero LUN"
    );
    match d.resize(&name, 2 * GIB).await {
        Err(DriverError::Unsupported(m)) => {
            assert!(m.contains("not supported by this array"), "{m}")
        }
        other => panic!("{other:?}"),
    }
    match d.clone_volume(&clone_req("st_copy", &name, None)).await {
        Err(DriverError::Unsupported(m)) => {
            assert!(m.contains("not supported by this array"), "{m}")
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(d.get(&name).await.unwrap().unwrap().size_bytes, GIB);
    d.destroy(&name).await.unwrap();
    assert_eq!(
        on_array(&sim).await,
        (vec![], 0),
        "nothing left on the array"
    );
}
