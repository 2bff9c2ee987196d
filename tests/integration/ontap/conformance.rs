//! Every ONTAP driver passes the shared driver conformance suite against the in-process
//! simulator (over TLS, with small iterator pages so that paging is exercised), once over ZAPI
//! and once over REST.

use crate::support::ontap::*;
use serde_json::json;
use storch::drivers::StorageDriver;
use storch::drivers::conformance::{self, ConformanceOptions, Support};
use storch::sim::ontap::{SimOptions, Tuning};

fn opts() -> ConformanceOptions {
    ConformanceOptions {
        size_bytes: 256 * MIB,
        min_size_bytes: Some(20 * MIB),
        concurrency: 8,
        ..ConformanceOptions::default()
    }
}

fn small_pages() -> SimOptions {
    SimOptions {
        tuning: Tuning {
            page_cap: 5,
            async_polls: 2,
        },
        ..SimOptions::default()
    }
}

async fn ontap_nas_thick(api: Api) {
    let dir = tempfile::tempdir().unwrap();
    let sim = sim_in(dir.path(), api.sim_options(small_pages())).await;
    let d = driver(&backend(
        &sim,
        "ontap-nas",
        json!({"defaults": {"spaceReserve": "volume"}}),
    ));
    conformance::run(&d, "aggr1", &opts()).await;
    assert!(d.list_volumes().await.unwrap().is_empty());
    assert!(
        array_volumes(&sim, "svm1").is_empty(),
        "the suite cleans up"
    );
}

async fn ontap_nas_thin_on_hdd(api: Api) {
    let dir = tempfile::tempdir().unwrap();
    let sim = sim_in(dir.path(), api.sim_options(small_pages())).await;
    let d = driver(&backend(
        &sim,
        "ontap-nas",
        json!({"storagePrefix": "conf-"}),
    ));
    // Thin volumes reserve nothing on the aggregate: no capacity accounting to check.
    let o = ConformanceOptions {
        capacity: false,
        ..opts()
    };
    conformance::run(&d, "aggr2", &o).await;
    assert!(array_volumes(&sim, "svm1").is_empty());
}

async fn ontap_san_thick(api: Api) {
    let dir = tempfile::tempdir().unwrap();
    let sim = sim_in(dir.path(), api.sim_options(small_pages())).await;
    let d = driver(&backend(
        &sim,
        "ontap-san",
        json!({"defaults": {"spaceReserve": "volume"}}),
    ));
    // The LUN's FlexVol (no snapshot policy, so no reserve) takes more than the LUN.
    let o = ConformanceOptions {
        footprint: Some(|n| storch::drivers::ontap::san_flexvol_bytes(n, 0)),
        ..opts()
    };
    conformance::run(&d, "aggr1", &o).await;
    let a = sim.array();
    assert!(a.svms["svm1"].luns.is_empty());
    assert!(array_volumes(&sim, "svm1").is_empty());
    assert!(
        a.svms["svm1"].igroups.contains_key("trident"),
        "igroup created"
    );
}

async fn ontap_nas_economy_thick(api: Api) {
    let dir = tempfile::tempdir().unwrap();
    let sim = sim_in(dir.path(), api.sim_options(small_pages())).await;
    let d = driver(&backend(
        &sim,
        "ontap-nas-economy",
        json!({"defaults": {"spaceReserve": "volume"}, "qtreesPerFlexvol": 3}),
    ));
    let o = ConformanceOptions {
        snapshots: Support::Optional,
        clones: Support::Optional,
        ..opts()
    };
    conformance::run(&d, "aggr1", &o).await;
    assert!(d.list_volumes().await.unwrap().is_empty());
    assert!(
        array_volumes(&sim, "svm1").is_empty(),
        "empty pool FlexVols are pruned: {:?}",
        array_volumes(&sim, "svm1")
    );
}

async fn ontap_nas_flexgroup_thick(api: Api) {
    let dir = tempfile::tempdir().unwrap();
    let sim = sim_in(dir.path(), api.sim_options(small_pages())).await;
    let d = driver(&backend(
        &sim,
        "ontap-nas-flexgroup",
        json!({"defaults": {"spaceReserve": "volume"}}),
    ));
    let o = ConformanceOptions {
        clones: Support::Optional,
        ..opts()
    };
    conformance::run(&d, "svm1", &o).await;
    assert!(array_volumes(&sim, "svm1").is_empty());
}

crate::over_both_apis!(
    ontap_nas_thick,
    ontap_nas_thin_on_hdd,
    ontap_san_thick,
    ontap_nas_economy_thick,
    ontap_nas_flexgroup_thick,
);
