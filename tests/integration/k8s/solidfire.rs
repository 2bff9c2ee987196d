//! SolidFire through Kubernetes: a `solidfire-san` backend pointed at the in-process Element
//! simulator (`support::solidfire`), storch's Kubernetes frontend on the fake API server
//! (`support::kube_env`). Claims of the lab's IOPS classes become bound iSCSI PVs on the
//! volume's target; CHAP backends get a `kubernetes.io/iscsi-chap` Secret holding exactly the
//! account's secrets (shown nowhere else), access-group backends put the volume in the group;
//! `cloneFromPVC` is an Element clone; reclaim Delete deletes and purges, Retain keeps; an IOPS
//! no type offers and a wrong array password are clear errors that leave nothing behind; a
//! Secret or PV Kubernetes refuses is reported on the claim and retried.
//!
//! PVC expansion is not tested: the frontend does not resize volumes when a claim grows.

use std::collections::BTreeMap;

use serde_json::{Value, json};
use storch::actors::VolumeState;
use storch::sim::solidfire::{Cluster, SolidFireSim, Tuning, state::Volume};

use crate::support::http::{TestServer, get, post};
use crate::support::kube_env::{Env, class_yaml, pvc_yaml};
use crate::support::solidfire::*;
use crate::support::*;

const TENANT: &str = "lab";

/// The lab's three QoS types: (type, minIOPS, maxIOPS, burstIOPS).
const TYPES: [(&str, u64, u64, u64); 3] = [
    ("Bronze", 1000, 2000, 4000),
    ("Silver", 4000, 6000, 8000),
    ("Gold", 6000, 8000, 10000),
];

/// A simulator that pages lists two volumes at a time and hides new volumes and clones for a
/// few polls, as a busy cluster does.
async fn sim(env: &Env) -> SolidFireSim {
    let tuning = Tuning {
        page_cap: 2,
        clone_polls: 3,
        create_polls: 2,
    };
    sf_sim_in(env.dir.path(), 100 * GIB, None, tuning).await
}

/// Backend `sf` with the lab's types in tenant `lab`; `extra` merged in.
fn backend(sim: &SolidFireSim, extra: Value) -> Value {
    let types: Vec<Value> = TYPES
        .iter()
        .map(|(t, min, max, burst)| {
            json!({"Type": t, "Qos": {"minIOPS": min, "maxIOPS": max, "burstIOPS": burst}})
        })
        .collect();
    let mut doc = json!({"backendName": "sf", "TenantName": TENANT, "Types": types});
    for (k, v) in extra.as_object().unwrap() {
        doc[k] = v.clone();
    }
    sf_backend_ok(sim, doc)
}

/// The lab's class `solidfire-<name>`: Trident's provisioner, `backendType` and `IOPS`.
fn lab_class(name: &str, iops: &str, extra: &str) -> String {
    class_yaml(
        &format!("solidfire-{name}"),
        "netapp.io/trident",
        &format!("  backendType: solidfire-san\n  IOPS: \"{iops}\"\n{extra}"),
        "",
    )
}

/// Adds the bronze, silver (fsType xfs) and gold classes and waits until storch has them.
async fn lab_classes(env: &Env) {
    env.create(&lab_class("bronze", "1500", "")).await;
    env.create(&lab_class("silver", "5000", "  fsType: xfs\n"))
        .await;
    env.create(&lab_class("gold", "7000", "")).await;
    eventually("the lab's classes in storch", async || {
        env.core().list_storage_classes().unwrap().len() == 3
    })
    .await;
}

/// storch on the fake API server with backend `sf` (CHAP) on a fresh simulator and the lab's
/// classes.
async fn chap_lab() -> (Env, SolidFireSim) {
    let env = Env::start().await;
    let sim = sim(&env).await;
    env.add_backend(backend(&sim, json!({"UseCHAP": true})))
        .await;
    lab_classes(&env).await;
    (env, sim)
}

/// A claim of `size` on `class`.
fn claim(name: &str, class: &str, size: &str, extra_meta: &str) -> String {
    pvc_yaml(name, Some(class), extra_meta).replace("storage: 1Gi", &format!("storage: {size}"))
}

/// The volume named `name` on the array (active or deleted-not-purged), with its id.
fn on_array(c: &Cluster, name: &str) -> Option<(u64, Volume)> {
    c.volumes
        .iter()
        .find(|(_, v)| v.name == name)
        .map(|(id, v)| (*id, v.clone()))
}

fn tenant_id(c: &Cluster) -> u64 {
    *c.accounts
        .iter()
        .find(|(_, a)| a.username == TENANT)
        .expect("the tenant account")
        .0
}

/// Checks the PV's iSCSI source against the array: SVIP portal, the volume's IQN, LUN 0.
/// Returns the source and the array volume's id.
fn check_iscsi(sim: &SolidFireSim, env: &Env, pv: &Value, claim: &str) -> (Value, u64) {
    let name = env.volume_name("default", claim);
    assert_eq!(pv["metadata"]["name"], name.as_str());
    let internal = env.core().get_volume(&name).unwrap().config.internal_name;
    let c = sim.cluster();
    let (id, v) = on_array(&c, &internal).unwrap_or_else(|| panic!("{internal} not on the array"));
    assert_eq!(v.status, "active");
    let iscsi = pv["spec"]["iscsi"].clone();
    assert!(pv["spec"]["nfs"].is_null(), "{pv}");
    assert_eq!(iscsi["targetPortal"], SVIP);
    assert_eq!(iscsi["iqn"], c.iqn(id, &v));
    assert_eq!(iscsi["lun"], 0);
    (iscsi, id)
}

/// The account's one CHAP Secret in storch's namespace holds exactly the tenant account's
/// initiator and target secrets as the array has them.
fn check_chap_secret(env: &Env, sim: &SolidFireSim) {
    let c = sim.cluster();
    let account = &c.accounts[&tenant_id(&c)];
    let data = env.chap_secret(&format!("trident-chap-sf-{TENANT}"));
    let mut want = BTreeMap::new();
    for prefix in ["discovery.sendtargets.auth", "node.session.auth"] {
        for (key, value) in [
            ("username", TENANT),
            ("password", account.initiator_secret.as_str()),
            ("username_in", TENANT),
            ("password_in", account.target_secret.as_str()),
        ] {
            want.insert(format!("{prefix}.{key}"), value.to_string());
        }
    }
    assert_eq!(data, want, "exactly the account's secrets");
    assert_eq!(env.kube.list("secrets", Some("storch")).len(), 1);
}

/// Everything storch's REST API shows about backends, volumes and events.
async fn rest_output(rest: &TestServer) -> String {
    let client = reqwest::Client::new();
    let mut out = Vec::new();
    for path in [
        "/trident/v1/backend",
        "/trident/v1/volume",
        "/trident/v1/events",
    ] {
        out.push(get(&client, &rest.url(path)).await.json);
    }
    for v in out[1]["volumes"].as_array().cloned().unwrap_or_default() {
        let v = v.as_str().unwrap();
        out.push(
            get(&client, &rest.url(&format!("/trident/v1/volume/{v}")))
                .await
                .json,
        );
    }
    out.push(get(&client, &rest.url("/trident/v1/backend/sf")).await.json);
    serde_json::to_string(&out).unwrap()
}

/// The IOPS classes pick the QoS type; each claim becomes a bound iSCSI PV on the volume's
/// target, with CHAP and a Secret holding exactly the tenant account's secrets as the array
/// has them; the secrets appear nowhere else (REST shows `<redacted>`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn iops_claims_become_iscsi_pvs_with_the_accounts_chap_secret() {
    let (env, sim) = chap_lab().await;
    let rest = TestServer::serving(env.core(), Default::default()).await;
    env.create(&claim("db", "solidfire-silver", "2Gi", ""))
        .await;
    env.create(&claim("logs", "solidfire-bronze", "1Gi", ""))
        .await;
    let c = sim.cluster();
    let account = &c.accounts[&tenant_id(&c)];
    let secret_name = format!("trident-chap-sf-{TENANT}");
    for (claim, size, pool, fs) in [
        ("db", 2 * GIB, "Silver", "xfs"),
        ("logs", GIB, "Bronze", "ext4"),
    ] {
        let pv = env.bound("default", claim).await;
        let (iscsi, id) = check_iscsi(&sim, &env, &pv, claim);
        assert_eq!(iscsi["fsType"], fs, "{claim}");
        assert_eq!(iscsi["chapAuthDiscovery"], true, "{claim}");
        assert_eq!(iscsi["chapAuthSession"], true, "{claim}");
        assert_eq!(
            iscsi["secretRef"],
            json!({"name": secret_name, "namespace": "storch"})
        );
        let want_size = if size == GIB { "1Gi" } else { "2Gi" };
        assert_eq!(pv["spec"]["capacity"], json!({"storage": want_size}));
        assert_eq!(pv["spec"]["accessModes"], json!(["ReadWriteOnce"]));
        let volume = env
            .core()
            .get_volume(&env.volume_name("default", claim))
            .unwrap();
        assert_eq!(
            (volume.backend.as_str(), volume.pool.as_str()),
            ("sf", pool)
        );
        // On the array: in the tenant account, of the claim's size, with the type's QoS.
        let v = &sim.cluster().volumes[&id];
        assert_eq!(v.account_id, tenant_id(&c), "{claim}");
        assert_eq!(v.total_size, size, "{claim}");
        let (_, min, max, burst) = TYPES.iter().find(|t| t.0 == pool).unwrap();
        assert_eq!((v.qos.min, v.qos.max, v.qos.burst), (*min, *max, *burst));
    }
    // One Secret for the account, holding exactly its secrets as the array has them.
    check_chap_secret(&env, &sim);
    // The REST API redacts them; nothing else shows them (nor the array's password).
    let client = reqwest::Client::new();
    let name = env.volume_name("default", "db");
    let shown = get(&client, &rest.url(&format!("/trident/v1/volume/{name}"))).await;
    let access = &shown.json["volume"]["Config"]["accessInformation"];
    assert_eq!(access["iscsiUsername"], TENANT, "{}", shown.json);
    assert_eq!(access["iscsiInitiatorSecret"], "<redacted>");
    assert_eq!(access["iscsiTargetSecret"], "<redacted>");
    let everything_but_the_secret = [
        rest_output(&rest).await,
        serde_json::to_string(&env.kube.list("persistentvolumes", None)).unwrap(),
        serde_json::to_string(&env.kube.list("events.events.k8s.io", None)).unwrap(),
        format!("{:?}", env.core().list_volumes()),
    ]
    .join(" ");
    for secret in [
        account.initiator_secret.as_str(),
        account.target_secret.as_str(),
        storch::sim::solidfire::DEFAULT_PASSWORD,
    ] {
        assert!(
            !everything_but_the_secret.contains(secret),
            "{secret} leaked"
        );
    }
    rest.stop().await;
    env.stop().await;
    sim.stop().await;
}

/// Without CHAP, with `AccessGroups`: the volume joins the group on the array, and the PV has
/// no CHAP and no Secret.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn access_group_volumes_join_the_group_and_get_no_secret() {
    let env = Env::start().await;
    let sim = sim(&env).await;
    let group = sim.with_cluster(|c| {
        let id = storch::sim::solidfire::state::take(&mut c.next.group);
        let mut g = c.groups.values().next().unwrap().clone();
        g.name = "k8s-nodes".into();
        g.initiators = vec!["iqn.1993-08.org.debian:01:node1".into()];
        c.groups.insert(id, g);
        id
    });
    env.add_backend(backend(
        &sim,
        json!({"UseCHAP": false, "AccessGroups": [group]}),
    ))
    .await;
    lab_classes(&env).await;
    env.create(&claim("web", "solidfire-gold", "1Gi", "")).await;
    let pv = env.bound("default", "web").await;
    let (iscsi, id) = check_iscsi(&sim, &env, &pv, "web");
    for key in ["secretRef", "chapAuthDiscovery", "chapAuthSession"] {
        assert!(iscsi[key].is_null(), "{key} in {iscsi}");
    }
    assert_eq!(iscsi["fsType"], "ext4");
    let c = sim.cluster();
    assert_eq!(c.groups[&group].volumes, [id], "the volume is in the group");
    let trident_group = c.groups.iter().find(|(_, g)| g.name == "trident").unwrap();
    assert!(
        trident_group.1.volumes.is_empty(),
        "only the configured group"
    );
    assert!(env.kube.list("secrets", Some("storch")).is_empty());
    env.stop().await;
    sim.stop().await;
}

/// `cloneFromPVC`: an Element clone of the source volume (CloneVolume, waited for while the
/// cluster still runs it), bound to its own PV on its own target.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clone_from_pvc_is_an_element_clone_with_its_own_pv() {
    let (env, sim) = chap_lab().await;
    env.create(&claim("src", "solidfire-silver", "2Gi", ""))
        .await;
    let src_pv = env.bound("default", "src").await;
    let (src_iscsi, src_id) = check_iscsi(&sim, &env, &src_pv, "src");
    env.create(&claim(
        "copy",
        "solidfire-silver",
        "2Gi",
        "  annotations:\n    trident.netapp.io/cloneFromPVC: src\n",
    ))
    .await;
    let pv = env.bound("default", "copy").await;
    let (iscsi, id) = check_iscsi(&sim, &env, &pv, "copy");
    assert_ne!(id, src_id);
    assert_ne!(iscsi["iqn"], src_iscsi["iqn"]);
    assert_ne!(pv["metadata"]["name"], src_pv["metadata"]["name"]);
    assert_eq!(iscsi["secretRef"], src_iscsi["secretRef"]);
    let copy = env
        .core()
        .get_volume(&env.volume_name("default", "copy"))
        .unwrap();
    assert_eq!(
        copy.config.clone_source_volume,
        env.volume_name("default", "src")
    );
    // Made by CloneVolume (not CreateVolume), polled until the cluster finished it.
    assert_eq!(sim.calls("CloneVolume"), 1);
    assert_eq!(sim.calls("CreateVolume"), 1);
    assert!(sim.calls("GetAsyncResult") >= 1, "the clone was waited for");
    let c = sim.cluster();
    let (source, clone) = (&c.volumes[&src_id], &c.volumes[&id]);
    assert_eq!(clone.status, "active");
    assert_eq!(clone.account_id, source.account_id);
    assert_eq!(clone.total_size, source.total_size);
    assert_eq!(clone.qos, source.qos);
    env.stop().await;
    sim.stop().await;
}

/// Reclaim Delete: deleting the claim deletes and purges the volume on the array, then the PV
/// goes. Retain: the PV is Released and the volume stays active on the array.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reclaim_delete_purges_the_volume_and_retain_keeps_it() {
    let (env, sim) = chap_lab().await;
    env.create(&claim("scratch", "solidfire-bronze", "1Gi", ""))
        .await;
    env.create(&claim(
        "keep",
        "solidfire-bronze",
        "1Gi",
        "  annotations:\n    trident.netapp.io/reclaimPolicy: Retain\n",
    ))
    .await;
    let mut ids = Vec::new();
    for name in ["scratch", "keep"] {
        let pv = env.bound("default", name).await;
        ids.push(check_iscsi(&sim, &env, &pv, name).1);
    }
    let (scratch, keep) = (
        env.volume_name("default", "scratch"),
        env.volume_name("default", "keep"),
    );
    for name in ["scratch", "keep"] {
        env.delete_pvc("default", name).await;
    }
    env.wait_for_pv(&scratch, "the Delete PV deleted after its volume", |pv| {
        pv.is_none()
    })
    .await;
    assert!(env.core().get_volume(&scratch).is_err());
    let c = sim.cluster();
    assert!(
        !c.volumes.contains_key(&ids[0]),
        "deleted and purged: {:?}",
        c.volumes.get(&ids[0])
    );
    assert_eq!(sim.calls("DeleteVolume"), 1);
    assert_eq!(sim.calls("PurgeDeletedVolume"), 1);
    env.wait_for_pv(&keep, "the Retain PV released", |pv| {
        pv.is_some_and(|pv| pv["status"]["phase"] == "Released")
    })
    .await;
    assert_eq!(
        env.core().get_volume(&keep).unwrap().state,
        VolumeState::Online
    );
    assert_eq!(sim.cluster().volumes[&ids[1]].status, "active");
    env.stop().await;
    sim.stop().await;
}

/// A class asking for IOPS no QoS type offers: the claim stays Pending with an event naming
/// each pool and why it was not used; nothing is made on the array, in storch or in Kubernetes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn iops_no_type_offers_leave_the_claim_pending_with_the_reason() {
    let (env, sim) = chap_lab().await;
    env.create(&lab_class("platinum", "50000", "")).await;
    eventually("the class in storch", async || {
        env.core().get_storage_class("solidfire-platinum").is_ok()
    })
    .await;
    env.create(&claim("fast", "solidfire-platinum", "1Gi", ""))
        .await;
    let note = env
        .event("PersistentVolumeClaim/fast", "ProvisioningFailed")
        .await;
    for want in [
        "no available backends for storage class solidfire-platinum",
        "pools not used",
        "sf/Bronze: IOPS: requested 50000, the pool offers [1000, 2000]",
        "sf/Silver: IOPS: requested 50000, the pool offers [4000, 6000]",
        "sf/Gold: IOPS: requested 50000, the pool offers [6000, 8000]",
    ] {
        assert!(note.contains(want), "{want} missing from {note}");
    }
    let name = env.volume_name("default", "fast");
    assert_eq!(env.pvc("default", "fast")["status"]["phase"], "Pending");
    assert!(env.pv(&name).is_none());
    assert!(env.core().get_volume(&name).is_err());
    assert_eq!(sim.calls("CreateVolume"), 0);
    assert!(sim.cluster().volumes.is_empty());
    assert!(env.kube.list("secrets", Some("storch")).is_empty());
    env.stop().await;
    sim.stop().await;
}

/// A wrong array password: the backend is refused with a clear error (that does not show the
/// password) and nothing is added, in storch or on the array; a claim of a SolidFire class
/// stays Pending with the reason.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_array_password_is_a_clear_error_and_leaves_nothing() {
    let env = Env::start().await;
    let sim = sim(&env).await;
    let rest = TestServer::serving(env.core(), Default::default()).await;
    let client = reqwest::Client::new();
    let mut doc = backend(&sim, json!({"UseCHAP": true}));
    doc["Endpoint"] = json!(
        doc["Endpoint"]
            .as_str()
            .unwrap()
            .replace(storch::sim::solidfire::DEFAULT_PASSWORD, "wrong-canary-pw")
    );
    let refused = post(&client, &rest.url("/trident/v1/backend"), doc).await;
    assert_eq!(refused.status, 400, "{:?}", refused.json);
    let error = refused.json["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("rejected the credentials (HTTP 401)") && error.contains("EndPoint"),
        "{error}"
    );
    assert!(!error.contains("wrong-canary-pw"), "{error}");
    let backends = get(&client, &rest.url("/trident/v1/backend")).await;
    assert_eq!(backends.json["backends"], json!([]));
    assert!(env.core().list_backends().unwrap().is_empty());
    assert_eq!(sim.calls("AddAccount"), 0);
    assert!(sim.cluster().accounts.is_empty());

    lab_classes(&env).await;
    env.create(&claim("db", "solidfire-gold", "1Gi", "")).await;
    let note = env
        .event("PersistentVolumeClaim/db", "ProvisioningFailed")
        .await;
    assert!(
        note.contains("no available backends for storage class solidfire-gold"),
        "{note}"
    );
    assert_eq!(env.pvc("default", "db")["status"]["phase"], "Pending");
    assert!(sim.cluster().volumes.is_empty());
    assert!(env.kube.list("persistentvolumes", None).is_empty());
    assert!(env.kube.list("secrets", Some("storch")).is_empty());
    let shown = rest_output(&rest).await;
    assert!(!shown.contains("wrong-canary-pw"), "{shown}");
    rest.stop().await;
    env.stop().await;
    sim.stop().await;
}

/// Kubernetes refuses the CHAP Secret (storch's Role lacks `secrets` in its namespace, say):
/// the claim gets a Warning naming the Secret and the refusal instead of staying Pending
/// without a word; the write is retried (here by a restarted storch, which opens the sealed
/// secrets again), and once allowed the claim binds to the one volume made (never a second).
/// The same for a refused PV.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_chap_secret_is_reported_on_the_claim_and_retried() {
    let (env, sim) = chap_lab().await;
    env.kube.fail("POST", "secrets", usize::MAX, 403);
    env.create(&claim("db", "solidfire-gold", "1Gi", "")).await;
    let note = env
        .event("PersistentVolumeClaim/db", "ProvisioningFailed")
        .await;
    for want in [
        "CHAP Secret",
        &format!("trident-chap-sf-{TENANT}"),
        "injected failure 403",
        "retrying",
    ] {
        assert!(note.contains(want), "{want} missing from {note}");
    }
    assert!(env.pv(&env.volume_name("default", "db")).is_none());
    // storch restarts meanwhile: the CHAP secrets it sealed are opened again from its data.
    let env = env.restart("storch-a2").await;
    env.kube.clear_failures();
    let pv = env.bound("default", "db").await;
    check_iscsi(&sim, &env, &pv, "db");
    check_chap_secret(&env, &sim);
    assert_eq!(sim.calls("CreateVolume"), 1);
    assert_eq!(sim.cluster().volumes.len(), 1);

    // The same for a refused PV.
    env.kube.fail("POST", "persistentvolumes", usize::MAX, 403);
    env.create(&claim("db2", "solidfire-gold", "1Gi", "")).await;
    let note = env
        .event("PersistentVolumeClaim/db2", "ProvisioningFailed")
        .await;
    let pv_name = env.volume_name("default", "db2");
    let its_pv = format!("its PV {pv_name}");
    for want in [its_pv.as_str(), "injected failure 403", "retrying"] {
        assert!(note.contains(want), "{want} missing from {note}");
    }
    env.kube.clear_failures();
    let pv = env.bound("default", "db2").await;
    check_iscsi(&sim, &env, &pv, "db2");
    assert_eq!(sim.calls("CreateVolume"), 2);
    assert_eq!(sim.cluster().volumes.len(), 2);
    env.stop().await;
    sim.stop().await;
}

/// A claim whose storch name is longer than the 64 characters Element allows for a volume
/// name: a clear event with the array's reason, nothing on the array, and the claim Pending.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_name_too_long_for_element_is_refused_with_the_reason() {
    let (env, sim) = chap_lab().await;
    let long = format!("data-{}", "x".repeat(60));
    env.create(&claim(&long, "solidfire-gold", "1Gi", "")).await;
    let note = env
        .event(
            &format!("PersistentVolumeClaim/{long}"),
            "ProvisioningFailed",
        )
        .await;
    let internal = env.volume_name("default", &long);
    for want in [
        format!("Failed to create volume {internal} on storage pool Gold from backend sf"),
        "xInvalidParameter".to_string(),
        "(1 to 64 letters, digits and dashes)".to_string(),
    ] {
        assert!(note.contains(&want), "{want} missing from {note}");
    }
    assert_eq!(env.pvc("default", &long)["status"]["phase"], "Pending");
    assert!(env.pv(&internal).is_none());
    assert!(env.core().get_volume(&internal).is_err());
    assert!(sim.cluster().volumes.is_empty());
    env.stop().await;
    sim.stop().await;
}
