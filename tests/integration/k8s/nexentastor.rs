//! NexentaStor through Kubernetes: a `nexentastor-iscsi` backend on the `storch-sim
//! nexentastor` binary, storch's Kubernetes frontend on the fake API server
//! (`support::kube_env`). A StorageClass whose parameters carry the seed's class keys
//! (`volumeGroup`, `useChapAuth`, `chapUser`, `chapSecret`) gives iSCSI PVs on the appliance's
//! target with the class's CHAP in a `kubernetes.io/iscsi-chap` Secret: a file-system claim
//! gets `fsType`, a `volumeMode: Block` claim a raw block PV without one. A Block claim of a
//! class of NFS backends is refused with a Warning naming `spec.volumeMode`, and nothing is
//! made.

use serde_json::{Value, json};
use storch::sim::nexentastor::{DEFAULT_PASSWORD, DEFAULT_USERNAME};

use crate::support::kube_env::{Env, class_yaml, pvc_yaml};
use crate::support::nexentastor::{NexentaSim, esc};
use crate::support::*;

const CANARY: &str = "k8s-class-chap-9031";

fn block_pvc(name: &str, class: &str) -> String {
    pvc_yaml(name, Some(class), "").replace("spec:\n", "spec:\n  volumeMode: Block\n")
}

/// The zvol's one LUN mapping on the appliance.
async fn mapping(sim: &NexentaSim, zvol: &str) -> Value {
    let (_, m) = sim
        .request(
            "GET",
            &format!("/san/lunMappings?volume={}", esc(zvol)),
            None,
        )
        .await;
    let list = m["data"].as_array().cloned().unwrap_or_default();
    let [one] = list.as_slice() else {
        panic!("one mapping of {zvol}: {m}");
    };
    one.clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn class_chap_claims_become_iscsi_pvs_file_system_and_raw_block() {
    let env = Env::start().await;
    let sim = NexentaSim::start(
        env.dir.path(),
        &["--volume-groups", "tank/csi:100GiB,tank/b:100GiB"],
    );
    env.add_backend(json!({
        "version": 1, "storageDriverName": "nexentastor-iscsi", "backendName": "nx",
        "restIp": sim.url, "username": DEFAULT_USERNAME, "password": DEFAULT_PASSWORD,
        "defaultDataIp": "192.0.2.40", "defaultVolumeGroup": "tank/csi", "volumeGroups": ["tank/b"],
        "dynamicTargetLunAllocation": true, "trustedCACertificate": sim.ca_pem(),
    }))
    .await;
    let params = format!(
        "  backendType: nexentastor-iscsi\n  volumeGroup: tank/b\n  useChapAuth: \"true\"\n  \
         chapUser: k8s\n  chapSecret: {CANARY}\n  fsType: xfs\n"
    );
    env.create(&class_yaml("nx-chap", "netapp.io/trident", &params, ""))
        .await;
    eventually("the class in storch", async || {
        env.core().list_storage_classes().unwrap().len() == 1
    })
    .await;
    env.create(&pvc_yaml("fs", Some("nx-chap"), "")).await;
    env.create(&block_pvc("raw", "nx-chap")).await;

    for (claim, block) in [("fs", false), ("raw", true)] {
        let pv = env.bound("default", claim).await;
        let name = env.volume_name("default", claim);
        let view = env.core().get_volume(&name).unwrap();
        assert_eq!(
            (view.backend.as_str(), view.pool.as_str()),
            ("nx", "tank/b")
        );
        let m = mapping(&sim, &format!("tank/b/{}", view.config.internal_name)).await;
        let (_, g) = sim
            .request(
                "GET",
                &format!("/san/targetgroups/{}", m["targetGroup"].as_str().unwrap()),
                None,
            )
            .await;
        let iscsi = &pv["spec"]["iscsi"];
        assert!(pv["spec"]["nfs"].is_null(), "{pv}");
        assert_eq!(iscsi["targetPortal"], "192.0.2.40:3260", "{pv}");
        assert_eq!(iscsi["iqn"], g["members"][0], "{pv}");
        assert_eq!(iscsi["lun"], m["lun"], "the LUN the appliance chose");
        assert_eq!(iscsi["chapAuthSession"], true, "{pv}");
        assert_eq!(
            iscsi["secretRef"],
            json!({"name": "trident-chap-nx-k8s", "namespace": "storch"})
        );
        if block {
            assert_eq!(pv["spec"]["volumeMode"], "Block", "{pv}");
            assert!(
                iscsi["fsType"].is_null(),
                "a raw device has no fsType: {pv}"
            );
        } else {
            assert!(pv["spec"]["volumeMode"].is_null() || pv["spec"]["volumeMode"] == "Filesystem");
            assert_eq!(iscsi["fsType"], "xfs", "{pv}");
        }
    }
    // The target asks for the class's CHAP user; the Secret holds the class's secret.
    let data = env.chap_secret("trident-chap-nx-k8s");
    assert_eq!(data["node.session.auth.username"], "k8s");
    assert_eq!(data["node.session.auth.password"], CANARY);
    let (_, targets) = sim.request("GET", "/san/iscsi/targets", None).await;
    assert!(
        targets["data"]
            .as_array()
            .unwrap()
            .iter()
            .all(|t| t["authentication"] == "chap" && t["chapUser"] == "k8s"),
        "{targets}"
    );
    // Nowhere else in clear: the class and the volumes as storch shows them.
    let class = env.core().get_storage_class("nx-chap").unwrap();
    let shown = serde_json::to_string(&class.config).unwrap();
    assert!(
        !shown.contains(CANARY) && shown.contains("<redacted>"),
        "{shown}"
    );

    // Reclaim Delete: the claims' deletion empties the volume group.
    for claim in ["fs", "raw"] {
        env.delete_pvc("default", claim).await;
    }
    eventually("the zvols gone", async || {
        sim.zvols("tank/b").await.is_empty()
    })
    .await;
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_block_claim_of_an_nfs_class_is_refused_naming_volume_mode() {
    let env = Env::start().await;
    env.add_backend(fake_backend("nas", "file", &[("p1", ssd())]))
        .await;
    env.create(&class_yaml(
        "files",
        "netapp.io/trident",
        "  media: ssd\n",
        "",
    ))
    .await;
    eventually("the class in storch", async || {
        env.core().list_storage_classes().unwrap().len() == 1
    })
    .await;
    env.create(&block_pvc("raw", "files")).await;
    let note = env
        .event("PersistentVolumeClaim/raw", "ProvisioningFailed")
        .await;
    assert!(
        note.contains("spec.volumeMode") && note.contains("nas"),
        "{note}"
    );
    let warned = env
        .events()
        .into_iter()
        .any(|(r, kind, _, n)| r == "PersistentVolumeClaim/raw" && kind == "Warning" && n == note);
    assert!(warned, "a Warning: {:#?}", env.events());
    assert!(
        env.core().list_volumes().unwrap().is_empty(),
        "nothing made"
    );
    assert!(env.kube.list("persistentvolumes", None).is_empty());
    // The same claim as a file system is provisioned.
    env.create(&pvc_yaml("files", Some("files"), "")).await;
    env.bound("default", "files").await;
    env.stop().await;
}
