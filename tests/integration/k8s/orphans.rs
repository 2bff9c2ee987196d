//! Objects that go away: volumes whose claims went before their PVs were written (the sweep),
//! PVs deleted by hand (also while storch was stopped: the log records each volume's PV), and
//! the controllers' retry state of deleted claims.

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

/// The request ids of volume `name`'s `VolumeBound` records in the log.
async fn bindings(env: &Env, name: &str) -> Vec<String> {
    let filter = storch::actors::EventFilter {
        object: Some(format!("volume/{name}")),
        ..Default::default()
    };
    let events = env.core().events(filter).await.unwrap();
    events
        .into_iter()
        .filter(|e| e.kind == "VolumeBound")
        .map(|e| e.request_id)
        .collect()
}

/// Waits until the log records volume `name`'s PV, and checks it does so once.
async fn recorded(env: &Env, name: &str) {
    eventually("the PV recorded in the log", async || {
        !bindings(env, name).await.is_empty()
    })
    .await;
    assert_eq!(bindings(env, name).await, [format!("k8s:pv/{name}")]);
}

/// Stops storch; meanwhile injected failures end, `claims` are deleted, then PV `pv` (so
/// Released first, as a Retain PV of a deleted claim); starts it again with a 1 s grace.
async fn restart_without(env: Env, identity: &str, claims: &[&str], pv: &str) -> Env {
    env.restart_with(
        identity,
        |kube| {
            kube.clear_failures();
            for claim in claims {
                kube.remove("persistentvolumeclaims", Some("default"), claim);
            }
            let released = kube.get("persistentvolumes", None, pv).unwrap();
            assert_eq!(released["status"]["phase"], "Released");
            kube.remove("persistentvolumes", None, pv);
        },
        |o| o.orphan_grace = Duration::from_secs(1),
    )
    .await
}

/// Volume `name` of the deleted claim `claim`, whose PV is gone but recorded in the log, is
/// kept, the claim told why, and its PV recorded once; returns the event's note.
async fn kept_as_bound(env: &Env, claim: &str, name: &str) -> String {
    let note = env
        .event(
            &format!("PersistentVolumeClaim/{claim}"),
            "OrphanedVolumeRetained",
        )
        .await;
    assert!(
        note.contains(name) && note.contains("recorded in the log"),
        "{note}"
    );
    sweeps(env, 8).await;
    assert_eq!(
        env.core().get_volume(name).unwrap().state,
        VolumeState::Online
    );
    assert_eq!(bindings(env, name).await, [format!("k8s:pv/{name}")]);
    note
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

/// The log records a volume's PV (once), so a storch restarted after the PV was deleted by
/// hand (and its claim) still keeps the volume, with an event saying why; a volume that never
/// had a PV is swept as before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pv_deleted_while_storch_was_stopped_never_deletes_its_volume() {
    let env = env_with_class("Delete").await;
    let retain = "  annotations:\n    trident.netapp.io/reclaimPolicy: Retain\n";
    env.create(&pvc_yaml("kept", Some("fast"), retain)).await;
    env.bound("default", "kept").await;
    let kept = env.volume_name("default", "kept");
    let kept_uid = env.pvc("default", "kept")["metadata"]["uid"]
        .as_str()
        .unwrap()
        .to_string();
    recorded(&env, &kept).await;
    assert!(env.core().get_volume(&kept).unwrap().bound);
    // The control: a claim whose PV is never written.
    env.kube.fail("POST", "persistentvolumes", 100_000, 500);
    let (racy, _) = volume_without_pv(&env, "racy").await;
    // Both claims deleted and the Released PV deleted by hand while storch is stopped.
    let env = restart_without(env, "storch-b", &["racy", "kept"], &kept).await;
    eventually("the control orphan swept", async || {
        env.core().get_volume(&racy).is_err()
    })
    .await;
    env.event("PersistentVolumeClaim/racy", "OrphanedVolumeDeleted")
        .await;
    assert!(bindings(&env, &racy).await.is_empty());
    let note = kept_as_bound(&env, "kept", &kept).await;
    assert!(note.contains(&kept_uid), "{note}");
    env.stop().await;
}

/// A PV written by a storch from before the log recorded PVs (a volume without
/// `VolumeBound`) is recorded at the first reconcile after an upgrade, and protects its
/// volume from then on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pv_written_before_pvs_were_recorded_is_recorded_at_boot() {
    let env = env_with_class("Delete").await;
    env.kube.fail("POST", "persistentvolumes", 100_000, 500);
    let (name, uid) = volume_without_pv(&env, "old").await;
    assert!(bindings(&env, &name).await.is_empty());
    // The PV as the old storch wrote it: the log knows nothing of it.
    let pv = json!({
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {
            "name": name,
            "annotations": {"pv.kubernetes.io/provisioned-by": "storch.io/storch"},
        },
        "spec": {
            "capacity": {"storage": "1Gi"},
            "accessModes": ["ReadWriteOnce"],
            "persistentVolumeReclaimPolicy": "Retain",
            "storageClassName": "fast",
            "claimRef": {
                "apiVersion": "v1",
                "kind": "PersistentVolumeClaim",
                "namespace": "default",
                "name": "old",
                "uid": uid,
            },
            "nfs": {"server": "192.0.2.1", "path": format!("/trident-{name}")},
        },
    });
    let env = env
        .restart_with(
            "storch-b",
            |kube| {
                kube.clear_failures();
                kube.put("persistentvolumes", pv);
            },
            |o| o.orphan_grace = Duration::from_secs(1),
        )
        .await;
    env.bound("default", "old").await;
    recorded(&env, &name).await;
    let env = restart_without(env, "storch-c", &["old"], &name).await;
    kept_as_bound(&env, "old", &name).await;
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
