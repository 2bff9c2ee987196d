//! Objects that go away: volumes whose claims went before their PVs were written (the sweep),
//! PVs deleted by hand, and the controllers' retry state of deleted claims.

use std::time::Duration;

use crate::support::kube_env::{Env, class_yaml, pvc_yaml};
use crate::support::*;
use serde_json::json;
use storch::actors::VolumeState;

use super::frontend::fake;

/// A storch with a 1 s orphan grace, a fake file backend and class `fast` with `policy`.
async fn env_with_class(policy: &str) -> Env {
    let env = Env::start_with(|o| o.orphan_grace = Duration::from_secs(1)).await;
    env.add_backend(fake(env.dir.path(), "f1", json!({}))).await;
    let mut class = class_yaml("fast", "storch.io/storch", "  media: ssd\n", "");
    class.push_str(&format!("reclaimPolicy: {policy}\n"));
    env.create(&class).await;
    eventually("fast in storch", async || {
        env.core().list_storage_classes().unwrap() == ["fast"]
    })
    .await;
    env
}

/// Waits until the sweep has finished `n` more passes than now.
async fn sweeps(env: &Env, n: u64) {
    let from = env.node.frontend.stats().sweeps;
    eventually(&format!("{n} sweep passes"), async || {
        env.node.frontend.stats().sweeps >= from + n
    })
    .await;
}

/// Its claim's volume is made, every PV write fails: returns the volume's name and the uid.
async fn volume_without_pv(env: &Env, claim: &str) -> (String, String) {
    env.create(&pvc_yaml(claim, Some("fast"), "")).await;
    let name = env.volume_name("default", claim);
    eventually("the volume online", async || {
        env.core()
            .get_volume(&name)
            .is_ok_and(|v| v.state == VolumeState::Online)
    })
    .await;
    env.event(
        &format!("PersistentVolumeClaim/{claim}"),
        "ProvisioningFailed",
    )
    .await;
    let uid = env.pvc("default", claim)["metadata"]["uid"]
        .as_str()
        .unwrap()
        .to_string();
    (name, uid)
}

/// The race: a claim deleted between its volume's create and its PV's write. Its volume goes
/// after the grace (class Delete), with an event naming the claim and its uid; a new claim
/// of the same name is another owner and keeps its own volume; a volume whose claim is alive
/// is never swept, however long its PV takes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_deleted_before_its_pv_was_written_loses_its_volume() {
    let env = env_with_class("Delete").await;
    env.kube.fail("POST", "persistentvolumes", 100_000, 500);
    let (old, uid) = volume_without_pv(&env, "racy").await;
    // Alive, without a PV, for several graces: kept.
    sweeps(&env, 12).await;
    assert!(
        env.core().get_volume(&old).is_ok(),
        "a live claim's volume was swept"
    );

    env.delete_pvc("default", "racy").await;
    env.kube.clear_failures();
    // The same name again: another uid, another volume, bound.
    env.create(&pvc_yaml("racy", Some("fast"), "")).await;
    env.bound("default", "racy").await;
    let new = env.volume_name("default", "racy");
    assert_ne!(new, old);

    eventually("the orphan deleted", async || {
        env.core().get_volume(&old).is_err()
    })
    .await;
    let note = env
        .event("PersistentVolumeClaim/racy", "OrphanedVolumeDeleted")
        .await;
    assert!(note.contains(&old) && note.contains(&uid), "{note}");
    // The log says why: the delete came from the sweep, for that claim.
    let deleted = env
        .core()
        .events(storch::actors::EventFilter {
            object: Some(format!("volume/{old}")),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_iter()
        .find(|e| e.kind == "VolumeDeleteRequested")
        .expect("a delete request in the log");
    assert_eq!(deleted.request_id, format!("k8s:orphan/default/racy/{uid}"));
    // The new claim's volume is untouched.
    sweeps(&env, 8).await;
    assert_eq!(
        env.core().get_volume(&new).unwrap().state,
        VolumeState::Online
    );
    assert!(env.pv(&new).is_some());
    env.stop().await;
}

/// With reclaim policy Retain the orphan stays, and an event says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_orphan_of_a_retain_class_is_kept_and_reported() {
    let env = env_with_class("Retain").await;
    env.kube.fail("POST", "persistentvolumes", 100_000, 500);
    let (name, uid) = volume_without_pv(&env, "keep").await;
    env.delete_pvc("default", "keep").await;
    let note = env
        .event("PersistentVolumeClaim/keep", "OrphanedVolumeRetained")
        .await;
    assert!(
        note.contains(&name) && note.contains(&uid) && note.contains("Retain"),
        "{note}"
    );
    sweeps(&env, 8).await;
    assert_eq!(
        env.core().get_volume(&name).unwrap().state,
        VolumeState::Online
    );
    env.stop().await;
}

/// A PV deleted by hand (a Retain one, its claim gone) never makes its volume an orphan,
/// even in a class whose policy is Delete.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pv_deleted_by_hand_never_deletes_its_volume() {
    let env = env_with_class("Delete").await;
    let retain = "  annotations:\n    trident.netapp.io/reclaimPolicy: Retain\n";
    env.create(&pvc_yaml("kept", Some("fast"), retain)).await;
    let pv = env.bound("default", "kept").await;
    assert_eq!(pv["spec"]["persistentVolumeReclaimPolicy"], "Retain");
    let name = env.volume_name("default", "kept");
    env.delete_pvc("default", "kept").await;
    env.wait_for_pv(&name, "the PV released", |pv| {
        pv.is_some_and(|pv| pv["status"]["phase"] == "Released")
    })
    .await;
    env.kube.remove("persistentvolumes", None, &name);
    sweeps(&env, 12).await;
    assert_eq!(
        env.core().get_volume(&name).unwrap().state,
        VolumeState::Online
    );
    env.stop().await;
}

/// Claims that keep failing have retry state; deleting them removes it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleted_claims_leave_no_retry_state() {
    let env = env_with_class("Delete").await;
    let clone_of_missing = "  annotations:\n    trident.netapp.io/cloneFromPVC: missing\n";
    for i in 0..10 {
        env.create(&pvc_yaml(&format!("c{i}"), Some("fast"), clone_of_missing))
            .await;
    }
    eventually("ten claims retrying", async || {
        env.node.frontend.stats().retrying == 10
    })
    .await;
    for i in 0..10 {
        env.delete_pvc("default", &format!("c{i}")).await;
    }
    eventually("no retry state left", async || {
        env.node.frontend.stats().retrying == 0
    })
    .await;
    assert!(env.core().list_volumes().unwrap().is_empty());
    env.stop().await;
}
