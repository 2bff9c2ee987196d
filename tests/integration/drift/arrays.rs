//! The drift scenarios against every driver's array: the fake (with and without its state
//! file), local directories, the ONTAP simulator over ZAPI and REST (FlexVols, qtrees, LUNs,
//! FlexGroups), and the SolidFire, E-Series and NexentaStor simulators.

use std::path::Path;

use serde_json::json;
use storch::sim::ontap::SimOptions;

use super::{
    Array, destroyed_while_stopped_is_missing_after_restart, found_again_and_resized_on_the_array,
};
use crate::support::ontap::{Api, backend as ontap_backend, sim_in};
use crate::support::*;

fn fake_with_state(dir: &Path) -> Array {
    let mut backend = fake_backend("st", "file", &[("p1", ssd())]);
    backend["statePath"] = json!(dir.join("fake-array.json"));
    Array {
        backend,
        class: json!({"media": "ssd"}),
        size: "1Gi",
    }
}

fn local(dir: &Path) -> Array {
    let backend = json!({"version": 1, "storageDriverName": "local", "backendName": "local",
        "pools": {"fast": {"path": dir.join("pools/fast"), "media": "ssd"}}});
    Array {
        backend,
        class: json!({"media": "ssd"}),
        size: "8Mi",
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fake_with_a_state_file() {
    let dir = tempfile::tempdir().unwrap();
    destroyed_while_stopped_is_missing_after_restart(fake_with_state(dir.path())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_directories() {
    let dir = tempfile::tempdir().unwrap();
    destroyed_while_stopped_is_missing_after_restart(local(dir.path())).await;
}

/// A local volume's directory removed by hand is missing; made again by hand, it is found.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_directory_removed_and_made_again() {
    let dir = tempfile::tempdir().unwrap();
    let array = local(dir.path());
    let rt = super::start_core(&dir.path().join("core")).await;
    let core = rt.core();
    let backend = super::add_backend_and_class(&core, array.backend, array.class).await;
    let v = super::add(&core, "home", array.size).await;
    let path = v.config.access_information.local_path.clone();
    std::fs::remove_dir_all(&path).unwrap();
    let report = core.reconcile_backend(&backend).await.unwrap();
    assert_eq!(report.missing, ["home"], "{report:?}");
    std::fs::create_dir(&path).unwrap();
    let report = core.reconcile_backend(&backend).await.unwrap();
    assert_eq!(report.found, ["home"], "{report:?}");
    assert_eq!(
        super::state(&core, "home"),
        storch::actors::VolumeState::Online
    );
    assert_eq!(
        super::kinds(&core, "home").await[3..],
        ["VolumeMissing", "VolumeFound"]
    );
    rt.shutdown().await;
}

async fn ontap(api: Api, driver: &str) {
    let dir = tempfile::tempdir().unwrap();
    let sim = sim_in(dir.path(), api.sim_options(SimOptions::default())).await;
    let array = Array {
        backend: ontap_backend(&sim, driver, json!({"backendName": "ontap"})),
        class: json!({"backendType": driver}),
        size: "1Gi",
    };
    destroyed_while_stopped_is_missing_after_restart(array).await;
}

async fn ontap_nas(api: Api) {
    ontap(api, "ontap-nas").await
}

async fn ontap_nas_economy(api: Api) {
    ontap(api, "ontap-nas-economy").await
}

async fn ontap_nas_flexgroup(api: Api) {
    ontap(api, "ontap-nas-flexgroup").await
}

async fn ontap_san(api: Api) {
    ontap(api, "ontap-san").await
}

async fn ontap_nas_found_again_and_grown(api: Api) {
    let dir = tempfile::tempdir().unwrap();
    let sim = sim_in(dir.path(), api.sim_options(SimOptions::default())).await;
    let array = Array {
        backend: ontap_backend(&sim, "ontap-nas", json!({"backendName": "ontap"})),
        class: json!({"backendType": "ontap-nas"}),
        size: "1Gi",
    };
    found_again_and_resized_on_the_array(array).await;
}

crate::over_both_apis!(
    ontap_nas,
    ontap_nas_economy,
    ontap_nas_flexgroup,
    ontap_san,
    ontap_nas_found_again_and_grown
);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn solidfire() {
    use crate::support::solidfire::{sf_backend_ok, sf_sim_in};
    let dir = tempfile::tempdir().unwrap();
    let sim = sf_sim_in(
        dir.path(),
        100 * (1 << 30),
        None,
        storch::sim::solidfire::Tuning::default(),
    )
    .await;
    let backend = sf_backend_ok(
        &sim,
        json!({"backendName": "sf", "TenantName": "drift", "Types": [
            {"Type": "Gold", "Qos": {"minIOPS": 6000, "maxIOPS": 8000, "burstIOPS": 10000}}]}),
    );
    let array = Array {
        backend,
        class: json!({"backendType": "solidfire-san"}),
        size: "1Gi",
    };
    destroyed_while_stopped_is_missing_after_restart(array).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eseries() {
    use crate::support::eseries::EseriesSim;
    let dir = tempfile::tempdir().unwrap();
    let sim = EseriesSim::start(
        dir.path(),
        true,
        &[
            "--pools",
            "pool_ssd:ssd:64GiB",
            "--array-password",
            "array-secret-canary",
        ],
    );
    let array = Array {
        backend: crate::eseries::core::example(&sim),
        class: json!({"media": "ssd", "backendType": "eseries-iscsi"}),
        size: "1Gi",
    };
    destroyed_while_stopped_is_missing_after_restart(array).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nexentastor() {
    let dir = tempfile::tempdir().unwrap();
    let sim = crate::support::nexentastor::NexentaSim::start(dir.path(), &[]);
    let array = Array {
        backend: super::import::nexenta_backend(&sim),
        class: json!({"backendType": "nexentastor-iscsi"}),
        size: "1Gi",
    };
    destroyed_while_stopped_is_missing_after_restart(array).await;
}
