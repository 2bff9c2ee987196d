//! E-Series through Kubernetes: an `eseries-iscsi` backend on the `storch-sim eseries` binary,
//! storch's Kubernetes frontend on the fake API server (`support::kube_env`). A claim becomes
//! a bound iSCSI PV on the array's target (its IQN, the `hostDataIP` portal, the LUN the array
//! chose for the mapping to the host group), without CHAP; a deleted claim (reclaim Delete)
//! unmaps and deletes the volume on the array.

use serde_json::{Value, json};

use crate::support::eseries::{CONTROLLERS, EseriesSim};
use crate::support::kube_env::{Env, class_yaml, pvc_yaml};
use crate::support::*;

const PORTAL: &str = "10.0.1.10";

fn backend(sim: &EseriesSim) -> Value {
    let (host, port) = sim.host_port();
    json!({
        "version": 1, "storageDriverName": "eseries-iscsi", "backendName": "es",
        "webProxyHostname": host, "webProxyPort": port.to_string(),
        "trustedCACertificate": sim.ca_pem().expect("a TLS simulator"),
        "username": "admin", "password": storch::sim::eseries::DEFAULT_PASSWORD,
        "controllerA": CONTROLLERS[0], "controllerB": CONTROLLERS[1],
        "passwordArray": "", "hostDataIP": PORTAL,
    })
}

/// The array's volumes (through the proxy) with their mappings.
async fn array_volumes(sim: &EseriesSim) -> Vec<Value> {
    let id = sim.register("").await;
    let (status, v) = sim
        .request("GET", &format!("/storage-systems/{id}/volumes"), None)
        .await;
    assert_eq!(status, 200, "{v}");
    v.as_array().cloned().unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_becomes_an_iscsi_pv_on_the_arrays_target_and_its_delete_empties_the_array() {
    let env = Env::start().await;
    let sim = EseriesSim::start(env.dir.path(), true, &[]);
    env.add_backend(backend(&sim)).await;
    env.create(&class_yaml(
        "eseries-ssd",
        "netapp.io/trident",
        "  backendType: eseries-iscsi\n  media: ssd\n  fsType: xfs\n",
        "",
    ))
    .await;
    eventually("the class in storch", async || {
        env.core().list_storage_classes().unwrap().len() == 1
    })
    .await;
    env.create(&pvc_yaml("data", Some("eseries-ssd"), "")).await;
    let pv = env.bound("default", "data").await;

    let volumes = array_volumes(&sim).await;
    let [v] = volumes.as_slice() else {
        panic!("one volume on the array: {volumes:?}");
    };
    let name = env.volume_name("default", "data");
    let view = env.core().get_volume(&name).unwrap();
    assert_eq!(v["label"], view.config.internal_name.as_str());
    assert_eq!(
        (view.backend.as_str(), view.pool.as_str()),
        ("es", "pool_ssd")
    );
    let mapping = &v["listOfMappings"][0];
    let id = sim.register("").await;
    let (_, target) = sim
        .request(
            "GET",
            &format!("/storage-systems/{id}/iscsi/target-settings"),
            None,
        )
        .await;

    let iscsi = &pv["spec"]["iscsi"];
    assert!(pv["spec"]["nfs"].is_null(), "{pv}");
    assert_eq!(iscsi["targetPortal"], format!("{PORTAL}:3260"), "{pv}");
    assert_eq!(iscsi["iqn"], target["nodeName"]["iscsiNodeName"], "{pv}");
    assert_eq!(iscsi["lun"], mapping["lun"], "the LUN the array chose");
    assert_eq!(iscsi["fsType"], "xfs");
    assert!(
        iscsi["secretRef"].is_null() && iscsi["chapAuthSession"].is_null(),
        "{pv}"
    );
    assert_eq!(pv["spec"]["capacity"], json!({"storage": "1Gi"}));

    // Reclaim Delete: the claim's deletion unmaps and deletes the volume on the array.
    env.delete_pvc("default", "data").await;
    eventually("the volume gone from the array", async || {
        array_volumes(&sim).await.is_empty()
    })
    .await;
    env.wait_for_pv(&name, "the PV deleted", |pv| pv.is_none())
        .await;
}
