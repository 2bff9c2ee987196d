//! The eseries-iscsi driver passes the shared driver conformance suite against the
//! `storch-sim eseries` binary: over TLS with the simulator's certificate trusted, where the
//! array has expansion and volume copy (both must then work), and over plain HTTP on an array
//! with neither (refused as "not supported by this array"), with an array password and a
//! host group the driver creates. Nothing is left on the array afterwards.

use serde_json::{Value, json};
use storch::drivers::conformance;
use storch::drivers::conformance::Support;
use storch::drivers::eseries::{EseriesDriver, conformance_options};
use storch::drivers::testing::{clone_req, req};
use storch::drivers::{CommonConfig, DriverError, StorageDriver};

use crate::support::eseries::{CONTROLLERS, EseriesSim};

const GIB: u64 = 1 << 30;
const POOLS: &str = "pool_ssd:ssd:64GiB:raid6,pool_hdd:hdd:64GiB:raidDiskPool,scratch:ssd:8GiB";

fn backend(sim: &EseriesSim, extra: Value) -> Value {
    let (host, port) = sim.host_port();
    let mut doc = json!({
        "version": 1, "storageDriverName": "eseries-iscsi",
        "webProxyHostname": host, "webProxyPort": port.to_string(),
        "username": "admin", "password": "eseries123",
        "controllerA": CONTROLLERS[0], "controllerB": CONTROLLERS[1],
        "hostDataIP": "10.0.1.10", "poolNameSearchPattern": "^pool_",
    });
    for (k, v) in extra.as_object().unwrap() {
        doc[k] = v.clone();
    }
    doc
}

fn driver(doc: &Value) -> EseriesDriver {
    let common = CommonConfig::parse(doc).unwrap();
    EseriesDriver::from_config(doc, &common).unwrap()
}

/// Volumes and mappings the array holds, through the proxy.
async fn leftovers(sim: &EseriesSim) -> (Vec<Value>, Vec<Value>) {
    let (_, systems) = sim.request("GET", "/storage-systems", None).await;
    let id = systems[0]["id"].as_str().expect("registered").to_string();
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
    let list = |v: Value| v.as_array().cloned().unwrap_or_default();
    (list(vols), list(maps))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eseries_iscsi_over_tls_with_expand_and_copy() {
    let dir = tempfile::tempdir().unwrap();
    let sim = EseriesSim::start(dir.path(), true, &["--pools", POOLS]);
    let doc = backend(
        &sim,
        json!({"webProxyVerifyTLS": true, "trustedCACertificate": sim.ca_pem().unwrap()}),
    );
    let d = driver(&doc);
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
    let (vols, maps) = leftovers(&sim).await;
    assert!(vols.is_empty() && maps.is_empty(), "{vols:?} {maps:?}");
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
    let doc = backend(
        &sim,
        json!({"webProxyUseHTTP": true, "passwordArray": "array-pw",
            "accessGroupName": "storch_hosts", "storagePrefix": "st_"}),
    );
    let d = driver(&doc);
    conformance::run(&d, "pool_ssd", &conformance_options(GIB)).await;
    let (vols, maps) = leftovers(&sim).await;
    assert!(vols.is_empty() && maps.is_empty(), "{vols:?} {maps:?}");

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
    let (vols, maps) = leftovers(&sim).await;
    assert!(vols.is_empty() && maps.is_empty(), "{vols:?} {maps:?}");
}
