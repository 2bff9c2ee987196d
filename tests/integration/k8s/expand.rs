//! PVC expansion through the frontend: a bound claim whose request grows in a class with
//! `allowVolumeExpansion` grows on the array, then its PV and its status (NFS: capacity;
//! iSCSI with a file system: `FileSystemResizePending` for the kubelet); a shrink, or growth
//! in a class without `allowVolumeExpansion`, gets a Warning and changes nothing.

use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use crate::support::kube_env::{Env, WAIT, class_yaml, pvc_yaml};
use crate::support::*;

use super::frontend::fake;

const GIB: u64 = 1 << 30;

/// A storch with a fake backend of `protocol` and class `elastic` (`allowVolumeExpansion:
/// true` when `allow`), with a bound 1Gi claim `data`.
async fn bound_claim(protocol: &str, allow: bool) -> Env {
    let env = Env::start().await;
    let mut backend = fake(env.dir.path(), "f1", json!({}));
    backend["protocol"] = json!(protocol);
    env.add_backend(backend).await;
    let mut class = class_yaml("elastic", "storch.io/storch", "  media: ssd\n", "");
    if allow {
        class.push_str("allowVolumeExpansion: true\n");
    }
    env.create(&class).await;
    eventually("elastic in storch", async || {
        env.core().list_storage_classes().unwrap() == ["elastic"]
    })
    .await;
    env.create(&pvc_yaml("data", Some("elastic"), "")).await;
    env.bound("default", "data").await;
    env
}

fn claims(env: &Env) -> Api<PersistentVolumeClaim> {
    Api::namespaced(env.client.clone(), "default")
}

/// `kubectl patch` of the claim's request.
async fn request(env: &Env, size: &str) -> Result<PersistentVolumeClaim, kube::Error> {
    let patch = json!({"spec": {"resources": {"requests": {"storage": size}}}});
    claims(env)
        .patch("data", &PatchParams::default(), &Patch::Merge(&patch))
        .await
}

/// The same with a PUT (`kubectl replace`), for when PATCHes are made to fail; `label` also
/// adds a label of that name.
async fn replace_request(env: &Env, size: &str, label: Option<&str>) {
    let api = claims(env);
    let mut pvc = api.get("data").await.unwrap();
    let requests = &mut pvc
        .spec
        .as_mut()
        .unwrap()
        .resources
        .as_mut()
        .unwrap()
        .requests;
    requests
        .get_or_insert_default()
        .insert("storage".into(), Quantity(size.into()));
    if let Some(label) = label {
        pvc.metadata
            .labels
            .get_or_insert_default()
            .insert(label.into(), "yes".into());
    }
    api.replace("data", &PostParams::default(), &pvc)
        .await
        .unwrap();
}

fn volume_bytes(env: &Env) -> u64 {
    let name = env.volume_name("default", "data");
    storch::model::parse_size(&env.core().get_volume(&name).unwrap().config.size).unwrap()
}

fn pv_capacity(env: &Env) -> Value {
    env.pv(&env.volume_name("default", "data")).unwrap()["spec"]["capacity"]["storage"].clone()
}

fn claim_status(env: &Env) -> Value {
    env.pvc("default", "data")["status"].clone()
}

/// Events about the claim with `reason`, oldest first.
fn notes(env: &Env, reason: &str) -> Vec<String> {
    env.events()
        .into_iter()
        .filter(|(r, _, why, _)| r == "PersistentVolumeClaim/data" && why == reason)
        .map(|(_, _, _, note)| note)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_nfs_claim_grows_on_the_array_then_its_pv_and_status() {
    let env = bound_claim("file", true).await;
    request(&env, "3Gi").await.unwrap();
    env.kube
        .wait_for(
            |k| {
                k.get("persistentvolumeclaims", Some("default"), "data")
                    .is_some_and(|p| p["status"]["capacity"]["storage"] == "3Gi")
            },
            WAIT,
            "the claim's capacity 3Gi",
        )
        .await;
    assert_eq!(volume_bytes(&env), 3 * GIB);
    assert_eq!(pv_capacity(&env), "3Gi");
    let status = claim_status(&env);
    assert_eq!(status["phase"], "Bound");
    assert!(
        status["conditions"].as_array().is_none_or(|c| c.is_empty()),
        "{status}"
    );
    env.event("PersistentVolumeClaim/data", "Resizing").await;
    let note = env
        .event("PersistentVolumeClaim/data", "VolumeResizeSuccessful")
        .await;
    assert!(note.contains("3Gi"), "{note}");
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_iscsi_file_system_claim_waits_for_the_kubelet() {
    let env = bound_claim("block", true).await;
    assert!(env.pv(&env.volume_name("default", "data")).unwrap()["spec"]["iscsi"].is_object());
    request(&env, "2Gi").await.unwrap();
    env.kube
        .wait_for(
            |k| {
                k.get("persistentvolumeclaims", Some("default"), "data")
                    .is_some_and(|p| {
                        p["status"]["conditions"].as_array().is_some_and(|c| {
                            c.iter().any(|c| c["type"] == "FileSystemResizePending")
                        })
                    })
            },
            WAIT,
            "FileSystemResizePending",
        )
        .await;
    assert_eq!(volume_bytes(&env), 2 * GIB);
    assert_eq!(pv_capacity(&env), "2Gi");
    // The kubelet records the new capacity once it grew the file system.
    assert_eq!(claim_status(&env)["capacity"]["storage"], "1Gi");
    let note = env
        .event("PersistentVolumeClaim/data", "FileSystemResizeRequired")
        .await;
    assert!(note.contains("kubelet"), "{note}");
    env.stop().await;
}

/// Growth in a class without `allowVolumeExpansion` (which the apiserver's admission plugin
/// refuses, but which storch sees where that plugin is disabled, or when the class changed
/// after the edit): a Warning, and nothing changes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn growth_in_a_class_without_allow_volume_expansion_changes_nothing() {
    let env = bound_claim("file", false).await;
    // The apiserver refuses the edit.
    match request(&env, "2Gi").await {
        Err(kube::Error::Api(s)) => assert_eq!(s.code, 403, "{s:?}"),
        other => panic!("expected 403, got {other:?}"),
    }
    // Without the admission plugin the claim says 2Gi.
    let mut pvc = env.pvc("default", "data");
    pvc["spec"]["resources"]["requests"]["storage"] = json!("2Gi");
    env.kube.put("persistentvolumeclaims", pvc);
    let note = env
        .event("PersistentVolumeClaim/data", "VolumeResizeFailed")
        .await;
    assert!(note.contains("allowVolumeExpansion"), "{note}");
    assert_eq!(volume_bytes(&env), GIB);
    assert_eq!(pv_capacity(&env), "1Gi");
    assert_eq!(claim_status(&env)["capacity"]["storage"], "1Gi");
    assert!(notes(&env, "Resizing").is_empty());
    env.stop().await;
}

/// A request lowered below what the PV has (the apiserver allows it while it stays above
/// `status.capacity`, here because the claim's status could not be written yet): a Warning,
/// nothing shrinks; the status is finished once it can be written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shrink_gets_a_warning_and_changes_nothing() {
    let env = bound_claim("file", true).await;
    env.kube
        .fail("PATCH", "persistentvolumeclaims", 1_000_000, 500);
    replace_request(&env, "3Gi", None).await;
    env.wait_for_pv(&env.volume_name("default", "data"), "the PV at 3Gi", |pv| {
        pv.is_some_and(|pv| pv["spec"]["capacity"]["storage"] == "3Gi")
    })
    .await;
    assert_eq!(claim_status(&env)["capacity"]["storage"], "1Gi");
    replace_request(&env, "2Gi", None).await;
    let note = env
        .event("PersistentVolumeClaim/data", "VolumeResizeFailed")
        .await;
    assert!(note.contains("does not shrink"), "{note}");
    assert_eq!(volume_bytes(&env), 3 * GIB);
    assert_eq!(pv_capacity(&env), "3Gi");
    assert_eq!(
        env.pvc("default", "data")["spec"]["resources"]["requests"]["storage"],
        "2Gi"
    );
    // Status writes work again; a change of the claim brings it back now, not at its retry.
    env.kube.clear_failures();
    replace_request(&env, "2Gi", Some("touched")).await;
    env.kube
        .wait_for(
            |k| {
                k.get("persistentvolumeclaims", Some("default"), "data")
                    .is_some_and(|p| p["status"]["capacity"]["storage"] == "3Gi")
            },
            WAIT,
            "the claim's status finished at 3Gi",
        )
        .await;
    assert_eq!(volume_bytes(&env), 3 * GIB);
    env.stop().await;
}
