//! A volume its array lost, through Kubernetes: once reconciliation records it missing, its
//! bound claim gets a `VolumeMissing` Warning; the claim, its PV and the volume stay.

use serde_json::json;

use crate::support::kube_env::{Env, pvc_yaml};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_whose_volume_went_missing_gets_a_warning() {
    let env = Env::start().await;
    let pool = env.dir.path().join("pools/fast");
    std::fs::create_dir_all(&pool).unwrap();
    env.add_backend(
        json!({"version": 1, "storageDriverName": "local", "backendName": "local",
               "pools": {"fast": {"path": pool, "media": "ssd"}}}),
    )
    .await;
    env.create_sample("storage-class-local.yaml").await;
    env.create(&pvc_yaml("data", None, "")).await;
    let pv = env.bound("default", "data").await;
    let name = pv["metadata"]["name"].as_str().unwrap().to_string();
    let path = pv["spec"]["local"]["path"].as_str().unwrap().to_string();

    std::fs::remove_dir_all(&path).unwrap();
    let report = env.core().reconcile_backend("local").await.unwrap();
    assert_eq!(report.missing, std::slice::from_ref(&name));
    let note = env
        .event("PersistentVolumeClaim/data", "VolumeMissing")
        .await;
    assert!(note.contains(&name), "{note}");
    let warning = env
        .events()
        .into_iter()
        .find(|(r, _, why, _)| r == "PersistentVolumeClaim/data" && why == "VolumeMissing")
        .unwrap();
    assert_eq!(warning.1, "Warning");

    assert!(env.pv(&name).is_some(), "the PV stays");
    assert_eq!(env.pvc("default", "data")["status"]["phase"], "Bound");
    assert!(env.core().get_volume(&name).is_ok(), "the volume stays");
    env.stop().await;
}
