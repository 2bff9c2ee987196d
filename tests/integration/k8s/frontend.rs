//! The Kubernetes frontend against the fake API server (`support::fake_kube`): a core and the
//! frontend in this process, talking real HTTP to the fake, with the fake's PV binder playing
//! kube-controller-manager. Trident's sample manifests, default classes, clones, every
//! annotation, Retain and Delete, delete retries, watch restarts, Lease holders.

use std::path::Path;
use std::time::Duration;

use crate::support::fake_kube::FakeKube;
use crate::support::kube_env::{Env, Node, WAIT, class_yaml, pvc_yaml};
use crate::support::*;
use k8s_openapi::api::storage::v1::StorageClass;
use kube::Api;
use kube::api::DeleteParams;
use serde_json::{Value, json};
use storch::actors::{RequestCtx, VolumeState};

// ---------------------------------------------------------------------------------------------

/// Trident's sample StorageClasses and PVCs, unchanged, on the ONTAP simulator: bound PVs
/// with NFS sources, the gold class on the SSD aggregate only, a clone, every annotation.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trident_samples_become_bound_nfs_pvs_on_ontap() {
    let env = Env::start().await;
    let sim = crate::support::ontap::sim_in(env.dir.path(), Default::default()).await;
    env.add_backend(crate::support::ontap::backend(&sim, "ontap-nas", json!({})))
        .await;
    for f in ["storage-class-basic.yaml", "storage-class-gold.yaml"] {
        env.create_sample(f).await;
    }
    eventually("both classes in storch", async || {
        env.core().list_storage_classes().unwrap() == ["basic", "gold"]
    })
    .await;

    env.create_sample("pvc-basic.yaml").await;
    let pv = env.bound("default", "basic").await;
    let name = env.volume_name("default", "basic");
    assert_eq!(pv["metadata"]["name"], name.as_str());
    let volume = env.core().get_volume(&name).unwrap();
    assert_eq!(volume.state, VolumeState::Online);
    assert_eq!(volume.config.storage_class, "basic");
    // The claim's bytes, stored canonical.
    assert_eq!(volume.config.size, "1Gi");
    let access = &volume.config.access_information;
    assert!(!access.nfs_server_ip.is_empty(), "{access:?}");
    assert_eq!(
        pv["spec"]["nfs"],
        json!({"server": access.nfs_server_ip, "path": access.nfs_path})
    );
    assert_eq!(pv["spec"]["capacity"], json!({"storage": "1Gi"}));
    assert_eq!(pv["spec"]["accessModes"], json!(["ReadWriteOnce"]));
    assert_eq!(pv["spec"]["storageClassName"], "basic");
    assert_eq!(pv["spec"]["persistentVolumeReclaimPolicy"], "Delete");
    assert_eq!(pv["spec"]["claimRef"]["name"], "basic");
    assert_eq!(pv["spec"]["claimRef"]["namespace"], "default");
    assert_eq!(
        pv["spec"]["claimRef"]["uid"],
        env.pvc("default", "basic")["metadata"]["uid"]
    );
    assert_eq!(
        pv["metadata"]["annotations"],
        json!({"volume.beta.kubernetes.io/storage-class": "basic",
               "pv.kubernetes.io/provisioned-by": "netapp.io/trident"})
    );
    let note = env
        .event("PersistentVolumeClaim/basic", "ProvisioningSuccess")
        .await;
    assert_eq!(
        note,
        "Kubernetes frontend provisioned a volume and a PV for the PVC."
    );
    // The FlexVol is on the array.
    let flexvol = &volume.config.internal_name;
    assert!(
        crate::support::ontap::array_volumes(&sim, "svm1").contains(flexvol),
        "{flexvol} not on the array"
    );

    // The clone sample: a clone of basic's volume on the same backend.
    env.create_sample("pvc-clone.yaml").await;
    env.bound("default", "basic-clone").await;
    let clone = env
        .core()
        .get_volume(&env.volume_name("default", "basic-clone"))
        .unwrap();
    assert_eq!(clone.config.clone_source_volume, name);
    assert_eq!(clone.backend, volume.backend);

    // Every annotation, on the gold class: SSD aggregate, thin, options on the FlexVol.
    env.create_sample("pvc-annotations.yaml").await;
    let pv = env.bound("default", "annotated").await;
    let annotated = env
        .core()
        .get_volume(&env.volume_name("default", "annotated"))
        .unwrap();
    let c = &annotated.config;
    assert_eq!(annotated.pool, "aggr1", "gold lands on the SSD aggregate");
    assert_eq!(c.protocol.as_str(), "file");
    assert_eq!(c.snapshot_policy, "default");
    assert_eq!(c.export_policy, "default");
    assert_eq!(c.snapshot_directory, "true");
    assert_eq!(c.unix_permissions, "0755");
    assert_eq!(c.block_size, "4096");
    assert_eq!(c.file_system, "ext4");
    assert_eq!(c.split_on_clone, "false");
    assert_eq!(c.access_mode, "ReadWriteMany");
    assert_eq!(c.size, "5Gi", "the claim's bytes, stored canonical");
    assert_eq!(pv["spec"]["persistentVolumeReclaimPolicy"], "Retain");
    let array = sim.array();
    let flexvol = &array.svms["svm1"].volumes[&c.internal_name];
    assert_eq!(flexvol.unix_permissions, "0755", "{flexvol:?}");
    assert_eq!(flexvol.snapshot_policy, "default", "{flexvol:?}");
    drop(array);
    env.stop().await;
}

fn fake_class(name: &str, params: &str, meta: &str) -> String {
    class_yaml(name, "storch.io/storch", params, meta)
}

/// A fake backend (file protocol) with one SSD pool, persisted in `dir`.
pub(super) fn fake(dir: &Path, name: &str, extra: Value) -> Value {
    let mut doc = fake_backend(name, "file", &[("p1", ssd())]);
    doc["statePath"] = json!(dir.join(format!("{name}.json")));
    for (k, v) in extra.as_object().unwrap() {
        doc[k] = v.clone();
    }
    doc
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn default_classes_selectors_and_foreign_classes() {
    let env = Env::start().await;
    env.add_backend(fake(env.dir.path(), "f1", json!({}))).await;
    // A class of another provisioner and its claim: not ours.
    env.create(&class_yaml(
        "ebs",
        "kubernetes.io/aws-ebs",
        "  type: gp2\n",
        "",
    ))
    .await;
    // The beta default annotation counts.
    env.create(&fake_class(
        "fast",
        "  media: ssd\n",
        "  annotations:\n    storageclass.beta.kubernetes.io/is-default-class: \"true\"\n",
    ))
    .await;
    eventually("fast in storch", async || {
        env.core().list_storage_classes().unwrap() == ["fast"]
    })
    .await;
    env.create(&pvc_yaml("no-class", None, "")).await;
    env.create(&pvc_yaml("foreign", Some("ebs"), "")).await;
    env.create(&pvc_yaml("not-dynamic", Some("\"\""), "")).await;
    env.create(&pvc_yaml("named", Some("fast"), "")).await;
    let pv = env.bound("default", "no-class").await;
    assert_eq!(pv["spec"]["storageClassName"], "fast");
    assert_eq!(
        pv["metadata"]["annotations"]["pv.kubernetes.io/provisioned-by"],
        "storch.io/storch"
    );
    env.bound("default", "named").await;

    // A claim with a selector is refused with a reason.
    let mut with_selector = pvc_yaml("picky", Some("fast"), "");
    with_selector.push_str("  selector:\n    matchLabels:\n      tier: gold\n");
    env.create(&with_selector).await;
    let note = env
        .event("PersistentVolumeClaim/picky", "IgnoredClaim")
        .await;
    assert!(note.contains("selector"), "{note}");

    // Two defaults (the GA annotation counts too): a claim without a class is refused.
    env.create(&fake_class(
        "fast2",
        "  media: ssd\n",
        "  annotations:\n    storageclass.kubernetes.io/is-default-class: \"true\"\n",
    ))
    .await;
    eventually("fast2 in storch", async || {
        env.core().list_storage_classes().unwrap() == ["fast", "fast2"]
    })
    .await;
    env.create(&pvc_yaml("ambiguous", None, "")).await;
    let note = env
        .event("PersistentVolumeClaim/ambiguous", "IgnoredClaim")
        .await;
    assert!(note.contains("fast, fast2"), "{note}");

    // A claim pre-bound by hand to a PV of the user's choice is left to the binder.
    let mut pre_bound = pvc_yaml("pre-bound", Some("fast"), "");
    pre_bound.push_str("  volumeName: hand-made-pv\n");
    env.create(&pre_bound).await;
    env.create(&pvc_yaml("after-pre-bound", Some("fast"), ""))
        .await;
    env.bound("default", "after-pre-bound").await;

    // Nothing was made for the foreign, empty-class, selector, ambiguous or pre-bound claims.
    for name in ["foreign", "not-dynamic", "picky", "ambiguous", "pre-bound"] {
        let v = env.volume_name("default", name);
        assert!(env.core().get_volume(&v).is_err(), "{name} got a volume");
        assert!(env.pv(&v).is_none(), "{name} got a PV");
        assert_eq!(env.pvc("default", name)["status"]["phase"], "Pending");
    }
    assert_eq!(env.core().list_volumes().unwrap().len(), 3);
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clone_rules_same_namespace_and_same_class() {
    let env = Env::start().await;
    env.add_backend(fake(env.dir.path(), "f1", json!({}))).await;
    env.create(&fake_class("fast", "  media: ssd\n", "")).await;
    env.create(&fake_class("other", "  backendType: fake\n", ""))
        .await;
    eventually("classes", async || {
        env.core().list_storage_classes().unwrap().len() == 2
    })
    .await;
    env.create(&pvc_yaml("src", Some("fast"), "")).await;
    env.bound("default", "src").await;
    let src = env.volume_name("default", "src");

    let clone_of = |source: &str| {
        format!(
            "  annotations:\n    trident.netapp.io/cloneFromPVC: {source}\n    trident.netapp.io/splitOnClone: \"true\"\n"
        )
    };
    env.create(&pvc_yaml("copy", Some("fast"), &clone_of("src")))
        .await;
    env.bound("default", "copy").await;
    let copy = env
        .core()
        .get_volume(&env.volume_name("default", "copy"))
        .unwrap();
    assert_eq!(copy.config.clone_source_volume, src);
    assert_eq!(copy.config.split_on_clone, "true");

    env.create(&pvc_yaml("elsewhere", Some("fast"), &clone_of("missing")))
        .await;
    let note = env
        .event("PersistentVolumeClaim/elsewhere", "ProvisioningFailed")
        .await;
    assert!(
        note.contains("cloning from a PVC requires both PVCs be in the same namespace"),
        "{note}"
    );
    env.create(&pvc_yaml("mismatch", Some("other"), &clone_of("src")))
        .await;
    let note = env
        .event("PersistentVolumeClaim/mismatch", "ProvisioningFailed")
        .await;
    assert!(
        note.contains("cloning from a PVC requires matching storage classes"),
        "{note}"
    );
    assert_eq!(env.core().list_volumes().unwrap().len(), 2);
    env.stop().await;
}

/// Delete PVs: the volume goes, then the PV; Retain PVs and their volumes stay; a failing
/// delete marks the PV Failed, is reported, and is retried with backoff until it works.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reclaim_delete_retain_and_retried_deletes() {
    let env = Env::start().await;
    let dir = env.dir.path().to_path_buf();
    env.add_backend(fake(
        &dir,
        "f1",
        json!({"failDestroy": "the array is busy"}),
    ))
    .await;
    env.create(&fake_class("fast", "  media: ssd\n", "")).await;
    env.create(
        &class_yaml("kept", "netapp.io/trident", "  media: ssd\n", "")
            .replace("parameters:", "reclaimPolicy: Retain\nparameters:"),
    )
    .await;
    eventually("classes", async || {
        env.core().list_storage_classes().unwrap().len() == 2
    })
    .await;
    env.create(&pvc_yaml("scratch", Some("fast"), "")).await;
    env.create(&pvc_yaml("precious", Some("kept"), "")).await;
    env.create(&pvc_yaml(
        "annotated",
        Some("fast"),
        "  annotations:\n    trident.netapp.io/reclaimPolicy: Retain\n",
    ))
    .await;
    for name in ["scratch", "precious", "annotated"] {
        env.bound("default", name).await;
    }
    let scratch = env.volume_name("default", "scratch");
    let precious = env.volume_name("default", "precious");
    let annotated = env.volume_name("default", "annotated");
    assert_eq!(
        env.pv(&precious).unwrap()["spec"]["persistentVolumeReclaimPolicy"],
        "Retain"
    );
    assert_eq!(
        env.pv(&annotated).unwrap()["spec"]["persistentVolumeReclaimPolicy"],
        "Retain"
    );
    // Each PV is recorded in the log (`VolumeBound`); the reclaim of a Delete PV still
    // deletes its volume (the PV controller's path, not the sweep's).
    for v in [&scratch, &precious, &annotated] {
        eventually("the PV recorded", async || {
            env.core().get_volume(v).unwrap().bound
        })
        .await;
    }
    for name in ["scratch", "precious", "annotated"] {
        env.delete_pvc("default", name).await;
    }
    // The array refuses: the PV is marked Failed with the reason, and a Warning is sent.
    let note = env
        .event(&format!("PersistentVolume/{scratch}"), "FailedVolumeDelete")
        .await;
    assert!(note.contains("the array is busy"), "{note}");
    env.kube
        .wait_for(
            |k| {
                k.get("persistentvolumes", None, &scratch)
                    .is_some_and(|pv| {
                        pv["status"]["phase"] == "Failed"
                            && pv["status"]["message"]
                                .as_str()
                                .is_some_and(|m| m.contains("the array is busy"))
                    })
            },
            WAIT,
            "the PV marked Failed",
        )
        .await;
    // The array recovers: the retried delete goes through, then the PV goes.
    env.core()
        .update_backend(&RequestCtx::random(), "f1", fake(&dir, "f1", json!({})))
        .await
        .unwrap();
    env.kube
        .wait_for(
            |k| k.get("persistentvolumes", None, &scratch).is_none(),
            Duration::from_secs(60),
            "the PV deleted after the retried volume delete",
        )
        .await;
    assert!(env.core().get_volume(&scratch).is_err());
    // Retain: PVs Released, volumes kept.
    for v in [&precious, &annotated] {
        env.kube
            .wait_for(
                |k| {
                    k.get("persistentvolumes", None, v)
                        .is_some_and(|pv| pv["status"]["phase"] == "Released")
                },
                WAIT,
                "Retain PV released",
            )
            .await;
        assert_eq!(env.core().get_volume(v).unwrap().state, VolumeState::Online);
    }
    // Deleting a Retain PV never deletes its volume.
    env.kube.remove("persistentvolumes", None, &precious);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        env.core().get_volume(&precious).unwrap().state,
        VolumeState::Online
    );
    env.stop().await;
}

/// A claim whose pools all fail gets an event naming each pool and why; it is retried with
/// backoff (not just at a resync) and provisioned once the array recovers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failures_name_each_pool_and_are_retried() {
    let env = Env::start().await;
    let dir = env.dir.path().to_path_buf();
    let mut broken = fake_backend("f1", "file", &[("p1", ssd()), ("p2", ssd())]);
    broken["statePath"] = json!(dir.join("f1.json"));
    broken["failPools"] = json!({"p1": "p1 is on fire", "p2": "p2 is flooded"});
    env.add_backend(broken.clone()).await;
    env.create(&fake_class("fast", "  media: ssd\n", "")).await;
    eventually("class", async || {
        env.core().list_storage_classes().unwrap().len() == 1
    })
    .await;
    env.create(&pvc_yaml("unlucky", Some("fast"), "")).await;
    let note = env
        .event("PersistentVolumeClaim/unlucky", "ProvisioningFailed")
        .await;
    for want in ["p1", "p1 is on fire", "p2", "p2 is flooded"] {
        assert!(note.contains(want), "{want} missing from {note}");
    }
    // A class no pool matches: the event says, pool by pool, what each lacks.
    env.add_backend(fake_backend("slow", "file", &[("disks", hdd())]))
        .await;
    env.create(&fake_class(
        "archive",
        "  media: hdd\n  provisioningType: thin\n",
        "",
    ))
    .await;
    eventually("archive", async || {
        env.core().get_storage_class("archive").is_ok()
    })
    .await;
    env.create(&pvc_yaml("nowhere", Some("archive"), "")).await;
    let note = env
        .event("PersistentVolumeClaim/nowhere", "ProvisioningFailed")
        .await;
    for want in [
        "pools not used",
        "f1/p1",
        "slow/disks",
        "provisioningType",
        "media",
    ] {
        assert!(note.contains(want), "{want} missing from {note}");
    }
    let mut fixed = broken;
    fixed.as_object_mut().unwrap().remove("failPools");
    env.core()
        .update_backend(&RequestCtx::random(), "f1", fixed)
        .await
        .unwrap();
    env.bound("default", "unlucky").await;
    env.stop().await;
}

/// Parameter changes are applied (unlike Trident), deleted classes leave storch, and a bad
/// class is reported on the object without holding up the others.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn class_changes_deletes_and_bad_classes() {
    let env = Env::start().await;
    env.add_backend(fake(env.dir.path(), "f1", json!({}))).await;
    env.create(&fake_class("fast", "  media: ssd\n", "")).await;
    env.create(&fake_class(
        "bad",
        "  media: floppy\n  nonsense: \"1\"\n",
        "",
    ))
    .await;
    env.create(&fake_class(
        "pools",
        "  storagePools: \"f1:p1\"\n  excludeStoragePools: \"f1:p9\"\n",
        "",
    ))
    .await;
    eventually("fast and pools", async || {
        env.core().list_storage_classes().unwrap() == ["fast", "pools"]
    })
    .await;
    let note = env.event("StorageClass/bad", "InvalidStorageClass").await;
    // The first bad parameter is named: `media` takes hdd, hybrid or ssd.
    assert!(note.contains("floppy") && note.contains("media"), "{note}");
    let pools = env.core().get_storage_class("pools").unwrap();
    assert_eq!(pools.pools["f1"], ["p1"]);

    // Change fast's parameters: applied.
    let mut sc = env.kube.get("storageclasses", None, "fast").unwrap();
    sc["parameters"] = json!({"media": "hdd"});
    env.kube.put("storageclasses", sc);
    eventually("fast updated", async || {
        env.core()
            .get_storage_class("fast")
            .is_ok_and(|c| c.pools.is_empty())
    })
    .await;
    // Delete it: gone from storch.
    Api::<StorageClass>::all(env.client.clone())
        .delete("fast", &DeleteParams::default())
        .await
        .unwrap();
    eventually("fast deleted", async || {
        env.core().list_storage_classes().unwrap() == ["pools"]
    })
    .await;
    env.stop().await;
}

/// Watches that end, and a history compacted past the watchers' position (410 Gone): the
/// frontend relists and misses nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_restarts_and_410_gone_lose_nothing() {
    let env = Env::start().await;
    env.add_backend(fake(env.dir.path(), "f1", json!({}))).await;
    env.create(&fake_class("fast", "  media: ssd\n", "")).await;
    env.create(&pvc_yaml("before", Some("fast"), "")).await;
    env.bound("default", "before").await;
    let pvc_watches = |kube: &FakeKube| {
        kube.requests()
            .into_iter()
            .filter(|r| r.watch && r.resource.as_deref() == Some("persistentvolumeclaims"))
            .count()
    };
    let pvc_lists = |kube: &FakeKube| {
        kube.requests()
            .into_iter()
            .filter(|r| {
                r.method == "GET"
                    && !r.watch
                    && r.name.is_none()
                    && r.resource.as_deref() == Some("persistentvolumeclaims")
            })
            .count()
    };
    // A watch that ends: resumed from where it was.
    for round in 0..2 {
        let before = pvc_watches(&env.kube);
        env.kube.close_watches();
        env.kube
            .wait_for(|k| pvc_watches(k) > before, WAIT, "the PVC watch resumed")
            .await;
        let name = format!("resumed-{round}");
        env.create(&pvc_yaml(&name, Some("fast"), "")).await;
        env.bound("default", &name).await;
    }
    // Changes while the watchers cannot come back, then a history compacted past their
    // position: the resumed watch gets 410 Gone and the watcher relists.
    for round in 0..2 {
        let lists = pvc_lists(&env.kube);
        env.kube.fail("WATCH", "*", usize::MAX, 500);
        env.kube.close_watches();
        let name = format!("missed-{round}");
        env.create(&pvc_yaml(&name, Some("fast"), "")).await;
        env.kube.compact();
        env.kube.clear_failures();
        env.bound("default", &name).await;
        assert!(pvc_lists(&env.kube) > lists, "the PVC watcher relisted");
    }
    assert_eq!(env.core().list_volumes().unwrap().len(), 5);
    env.stop().await;
}

/// A claim bound to someone else's PV gets storch's volume and PV cleaned up; a Lost claim's
/// volume is deleted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claims_bound_elsewhere_and_lost_claims_are_cleaned_up() {
    let env = Env::start().await;
    env.add_backend(fake(env.dir.path(), "f1", json!({}))).await;
    env.create(&fake_class("fast", "  media: ssd\n", "")).await;
    env.kube.set_binder(false);
    env.create(&pvc_yaml("raced", Some("fast"), "")).await;
    let name = env.volume_name("default", "raced");
    env.kube
        .wait_for(
            |k| k.get("persistentvolumes", None, &name).is_some(),
            WAIT,
            "storch's PV",
        )
        .await;
    // Another PV won the race: the claim is bound to it.
    let mut pvc = env.pvc("default", "raced");
    pvc["spec"]["volumeName"] = json!("someone-elses-pv");
    pvc["status"]["phase"] = json!("Bound");
    env.kube.put("persistentvolumeclaims", pvc);
    env.kube
        .wait_for(
            |k| k.get("persistentvolumes", None, &name).is_none(),
            WAIT,
            "storch's unused PV deleted",
        )
        .await;
    eventually("unused volume deleted", async || {
        env.core().get_volume(&name).is_err()
    })
    .await;

    env.kube.set_binder(true);
    env.create(&pvc_yaml("lost", Some("fast"), "")).await;
    env.bound("default", "lost").await;
    let lost = env.volume_name("default", "lost");
    // Its PV vanishes (the binder marks the claim Lost).
    env.kube.remove("persistentvolumes", None, &lost);
    env.kube
        .wait_for(
            |k| {
                k.get("persistentvolumeclaims", Some("default"), "lost")
                    .is_some_and(|p| p["status"]["phase"] == "Lost")
            },
            WAIT,
            "claim Lost",
        )
        .await;
    eventually("lost claim's volume deleted", async || {
        env.core().get_volume(&lost).is_err()
    })
    .await;
    env.event("PersistentVolumeClaim/lost", "VolumeDelete")
        .await;
    env.stop().await;
}

/// Two replicas: only the Lease holder provisions; when it stops, the other takes over.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_lease_holder_provisions() {
    let env = Env::start().await;
    let b = Node::start(&env.dir.path().join("b"), &env.kube, "storch-b").await;
    for core in [env.core(), b.core()] {
        core.add_backend(
            &RequestCtx::random(),
            fake_backend("f1", "file", &[("p1", ssd())]),
        )
        .await
        .unwrap();
    }
    env.create(&fake_class("fast", "  media: ssd\n", "")).await;
    // Both replicas keep the classes (a standby stays warm).
    eventually("classes on both", async || {
        env.core().list_storage_classes().unwrap() == ["fast"]
            && b.core().list_storage_classes().unwrap() == ["fast"]
    })
    .await;
    for i in 0..4 {
        env.create(&pvc_yaml(&format!("c{i}"), Some("fast"), ""))
            .await;
    }
    for i in 0..4 {
        env.bound("default", &format!("c{i}")).await;
    }
    let holder = env
        .kube
        .get("leases", Some("storch"), "storch-leader")
        .unwrap()["spec"]["holderIdentity"]
        .as_str()
        .unwrap()
        .to_string();
    let (leader, standby) = if holder == "storch-a" {
        (env.core(), b.core())
    } else {
        assert_eq!(holder, "storch-b");
        (b.core(), env.core())
    };
    assert_eq!(leader.list_volumes().unwrap().len(), 4);
    assert!(
        standby.list_volumes().unwrap().is_empty(),
        "the standby provisioned"
    );

    // The leader stops (and gives the Lease up): the other takes over.
    let (env, survivor) = if holder == "storch-a" {
        let Env {
            kube,
            client,
            node,
            dir,
        } = env;
        node.stop().await;
        (
            Env {
                kube,
                client,
                node: b,
                dir,
            },
            "storch-b",
        )
    } else {
        b.stop().await;
        (env, "storch-a")
    };
    env.create(&pvc_yaml("after", Some("fast"), "")).await;
    env.bound("default", "after").await;
    let lease = env
        .kube
        .get("leases", Some("storch"), "storch-leader")
        .unwrap();
    assert_eq!(lease["spec"]["holderIdentity"], survivor);
    assert!(
        lease["spec"]["leaseTransitions"].as_i64().unwrap() >= 1,
        "{lease}"
    );
    assert_eq!(env.core().list_volumes().unwrap().len(), 1);
    env.stop().await;
}

/// The local driver through Kubernetes: the sample default class, a claim without a class,
/// and a `local` PV pinned to storch's node whose path is a real directory.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_volumes_become_local_pvs_pinned_to_the_node() {
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
    assert_eq!(pv["spec"]["storageClassName"], "local");
    assert_eq!(
        pv["metadata"]["annotations"]["pv.kubernetes.io/provisioned-by"],
        "storch.io/storch"
    );
    let path = pv["spec"]["local"]["path"].as_str().unwrap();
    assert!(Path::new(path).is_dir(), "{path} is a directory");
    assert!(Path::new(path).starts_with(&pool), "{path} is in the pool");
    assert_eq!(
        pv["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"][0]["matchExpressions"][0],
        json!({"key": "kubernetes.io/hostname", "operator": "In", "values": ["node-1"]})
    );
    // Released with Delete: the directory goes with the volume.
    env.delete_pvc("default", "data").await;
    let name = pv["metadata"]["name"].as_str().unwrap().to_string();
    env.kube
        .wait_for(
            |k| k.get("persistentvolumes", None, &name).is_none(),
            WAIT,
            "the local PV deleted",
        )
        .await;
    assert!(!Path::new(path).exists(), "{path} removed");
    env.stop().await;
}

/// A SAN volume with CHAP: an `iscsi` PV pointing at a `trident-chap-…` Secret in storch's
/// namespace that holds the credentials; the secrets appear nowhere else.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chap_volumes_get_an_iscsi_pv_and_a_chap_secret() {
    let env = Env::start().await;
    let mut san = fake_backend("san_1", "block", &[("p1", ssd())]);
    san["useCHAP"] = json!(true);
    env.add_backend(san).await;
    env.create(&fake_class("blocks", "  media: ssd\n", ""))
        .await;
    env.create(&pvc_yaml(
        "db",
        Some("blocks"),
        "  annotations:\n    trident.netapp.io/protocol: block\n    trident.netapp.io/fileSystem: xfs\n",
    ))
    .await;
    let pv = env.bound("default", "db").await;
    let iscsi = &pv["spec"]["iscsi"];
    assert_eq!(iscsi["iqn"], storch::drivers::fake::ISCSI_TARGET_IQN);
    assert_eq!(
        iscsi["targetPortal"],
        storch::drivers::fake::ISCSI_TARGET_PORTAL
    );
    assert_eq!(iscsi["fsType"], "xfs");
    assert_eq!(iscsi["chapAuthDiscovery"], true);
    assert_eq!(iscsi["chapAuthSession"], true);
    let secret_name = "trident-chap-san-1-fake-chap-san-1";
    assert_eq!(
        iscsi["secretRef"],
        json!({"name": secret_name, "namespace": "storch"})
    );
    let secret = env.chap_secret(secret_name);
    let data = |key: &str| secret.get(key).unwrap_or_else(|| panic!("{key}")).clone();
    for prefix in ["discovery.sendtargets.auth", "node.session.auth"] {
        assert_eq!(data(&format!("{prefix}.username")), "fake-chap-san_1");
        assert_eq!(
            data(&format!("{prefix}.password")),
            storch::drivers::fake::CHAP_INITIATOR_SECRET
        );
        assert_eq!(data(&format!("{prefix}.username_in")), "fake-chap-san_1");
        assert_eq!(
            data(&format!("{prefix}.password_in")),
            storch::drivers::fake::CHAP_TARGET_SECRET
        );
    }
    // Nowhere else: not in the PV, not in the API's view of the volume, not in any event.
    let everything_but_the_secret = [
        serde_json::to_string(&env.kube.list("persistentvolumes", None)).unwrap(),
        serde_json::to_string(&env.kube.list("events.events.k8s.io", None)).unwrap(),
        format!(
            "{:?}",
            env.core()
                .get_volume(&env.volume_name("default", "db"))
                .unwrap()
        ),
    ]
    .join(" ");
    for secret in [
        storch::drivers::fake::CHAP_INITIATOR_SECRET,
        storch::drivers::fake::CHAP_TARGET_SECRET,
    ] {
        assert!(
            !everything_but_the_secret.contains(secret),
            "{secret} leaked"
        );
    }
    env.stop().await;
}
