//! The solidfire-san driver under the core, in-process against the Element simulator: the
//! hands-on lab's IOPS classes choose the QoS type pools, the volume carries its pool's QoS on
//! the array and iSCSI access with sealed CHAP secrets, a delete purges it, and a create
//! adopts what an interrupted attempt left only as planned.

use crate::support::solidfire::*;
use crate::support::*;
use serde_json::json;
use storch::actors::RequestCtx;
use storch::model::{StorageClassConfig, VolumeConfig};
use storch::sim::solidfire::Tuning;

fn ctx() -> RequestCtx {
    RequestCtx::random()
}

/// The hands-on lab's backend on `sim`: tenant `lab`, CHAP, the three QoS types.
fn lab_backend(sim: &storch::sim::solidfire::SolidFireSim) -> serde_json::Value {
    sf_backend_ok(
        sim,
        json!({"backendName": "sf", "TenantName": "lab", "UseCHAP": true, "Types": [
            {"Type": "Bronze", "Qos": {"minIOPS": 1000, "maxIOPS": 2000, "burstIOPS": 4000}},
            {"Type": "Silver", "Qos": {"minIOPS": 4000, "maxIOPS": 6000, "burstIOPS": 8000}},
            {"Type": "Gold", "Qos": {"minIOPS": 6000, "maxIOPS": 8000, "burstIOPS": 10000}},
        ]}),
    )
}

/// Adds `backend` (named `sf`) and the lab's classes `solidfire-bronze/silver/gold`.
async fn add_lab(core: &storch::actors::Core, backend: serde_json::Value) {
    assert_eq!(core.add_backend(&ctx(), backend).await.unwrap(), "sf");
    for (name, iops) in [("bronze", "1500"), ("silver", "5000"), ("gold", "7000")] {
        let class = json!({"name": format!("solidfire-{name}"),
            "attributes": {"IOPS": iops, "backendType": "solidfire-san"}});
        core.add_storage_class(
            &ctx(),
            StorageClassConfig::from_json(class.to_string().as_bytes()).unwrap(),
        )
        .await
        .unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn iops_classes_pick_the_qos_type_and_the_array_gets_its_qos() {
    let dir = tempfile::tempdir().unwrap();
    let sim = sf_sim_in(dir.path(), 100 * GIB, None, Tuning::default()).await;
    let rt = start(&dir.path().join("core")).await;
    let core = rt.core();
    add_lab(&core, lab_backend(&sim)).await;
    for (class, pool, min) in [("bronze", "Bronze", 1000), ("gold", "Gold", 6000)] {
        let v = add_volume(
            &core,
            &ctx(),
            VolumeConfig {
                name: format!("vol_{class}"),
                size: "1Gi".into(),
                storage_class: format!("solidfire-{class}"),
                ..VolumeConfig::default()
            },
        )
        .await
        .unwrap();
        assert_eq!((v.backend.as_str(), v.pool.as_str()), ("sf", pool));
        let a = &v.config.access_information;
        assert_eq!(v.config.internal_name, format!("vol-{class}"));
        assert!(
            a.iscsi_target_iqn.contains(&format!("vol-{class}")),
            "{a:?}"
        );
        assert_eq!(a.iscsi_target_portal, SVIP);
        assert_eq!(a.iscsi_username, "lab");
        let c = sim.cluster();
        let on_array = c
            .volumes
            .values()
            .find(|x| x.name == format!("vol-{class}"))
            .unwrap();
        assert_eq!(on_array.qos.min, min);
    }
    core.delete_volume(&ctx(), "vol_bronze").await.unwrap();
    core.delete_volume(&ctx(), "vol_gold").await.unwrap();
    assert!(sim.cluster().volumes.is_empty(), "deleted and purged");
    rt.shutdown().await;
}

/// `examples/backend-solidfire.json`, with its `Endpoint` pointed at the simulator, is a working
/// backend: one pool per QoS type, the credentials kept out of what the backend shows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_example_backend_file_works_against_the_simulator() {
    let dir = tempfile::tempdir().unwrap();
    let sim = sf_sim_in(dir.path(), 100 * GIB, None, Tuning::default()).await;
    let rt = start(&dir.path().join("core")).await;
    let core = rt.core();
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/backend-solidfire.json");
    let mut doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    doc["Endpoint"] = json!(sim.backend_endpoint("8.0"));
    doc["trustedCACertificate"] = json!(sim.ca_pem().unwrap());
    let name = core.add_backend(&ctx(), doc).await.unwrap();
    let view = core.get_backend(&name).unwrap();
    let pools: Vec<&str> = view.pools.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(pools, ["Bronze", "Silver", "Gold"]);
    let shown = view.config.to_string();
    assert!(
        !shown.contains(storch::sim::solidfire::DEFAULT_PASSWORD),
        "{shown}"
    );
    rt.shutdown().await;
}

/// A create that finds the volume an earlier, interrupted attempt left: storch's volume as
/// planned is adopted (no second volume), storch's volume of another size is refused with the
/// field named and left as it is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupted_create_is_adopted_only_as_planned() {
    use storch::drivers::StorageDriver;
    use storch::drivers::testing::req;
    let dir = tempfile::tempdir().unwrap();
    let sim = sf_sim_in(dir.path(), 100 * GIB, None, Tuning::default()).await;
    let rt = start(&dir.path().join("core")).await;
    let core = rt.core();
    let backend = lab_backend(&sim);
    // What earlier attempts left on the array, made by the same driver.
    let earlier = sf_driver(&backend, 100);
    earlier.create(&req("pvc-b", "Gold", GIB)).await.unwrap();
    earlier
        .create(&req("pvc-a", "Gold", 2 * GIB))
        .await
        .unwrap();
    add_lab(&core, backend).await;
    let volume = |name: &str| VolumeConfig {
        name: name.into(),
        size: "1Gi".into(),
        storage_class: "solidfire-gold".into(),
        ..VolumeConfig::default()
    };
    let adopted = add_volume(&core, &ctx(), volume("pvc_b")).await.unwrap();
    assert_eq!(adopted.config.internal_name, "pvc-b");
    let err = add_volume(&core, &ctx(), volume("pvc_a"))
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("totalSize is 2147483648, planned 1073741824") && err.contains("not adopted"),
        "{err}"
    );
    assert_eq!(sim.calls("CreateVolume"), 2, "no volume made twice");
    let c = sim.cluster();
    let sizes: Vec<(&str, u64)> = c
        .volumes
        .values()
        .map(|v| (v.name.as_str(), v.total_size))
        .collect();
    assert_eq!(
        sizes,
        [("pvc-b", GIB), ("pvc-a", 2 * GIB)],
        "left as they were"
    );
    rt.shutdown().await;
}
