//! The real `storch serve --kubeconfig` binary against the fake API server: SIGKILLed in the
//! middle of provisioning and restarted (as a new pod, so after the old Lease expires), and a
//! killed leader replaced by its standby.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::support::fake_kube::FakeKube;
use crate::support::*;
use rand::RngExt;
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(30);

/// A config file with one fake backend whose array is persisted in `dir/array.json` and
/// answers every call after `latency`.
fn config_file(dir: &Path, latency: &str) -> PathBuf {
    let mut backend = fake_backend("f1", "file", &[("p1", ssd())]);
    backend["statePath"] = json!(dir.join("array.json"));
    backend["latency"] = json!(latency);
    let path = dir.join("storch.yaml");
    let doc = json!({"backends": [backend]});
    std::fs::write(&path, serde_json::to_string_pretty(&doc).unwrap()).unwrap();
    path
}

fn serve(data: &Path, config: &Path, kubeconfig: &Path, identity: &str) -> Server {
    Server::start_with(
        data,
        &[
            "--config",
            config.to_str().unwrap(),
            "--kubeconfig",
            kubeconfig.to_str().unwrap(),
            "--k8s-identity",
            identity,
            "--k8s-lease-duration",
            "2s",
            "--k8s-node-name",
            "node-1",
        ],
        &[("RUST_LOG", "info,storch=debug")],
    )
}

fn storage_class() -> Value {
    json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
           "metadata": {"name": "fast"}, "provisioner": "netapp.io/trident",
           "parameters": {"media": "ssd"}})
}

fn claim(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
           "metadata": {"name": name, "namespace": "default",
                        "uid": uuid::Uuid::new_v4().to_string()},
           "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "fast",
                    "resources": {"requests": {"storage": "1Gi"}}}})
}

/// The internal names of the volumes the fake array (state file) holds.
fn array_volumes(dir: &Path) -> Vec<String> {
    let Ok(text) = std::fs::read_to_string(dir.join("array.json")) else {
        return Vec::new();
    };
    let state: Value = serde_json::from_str(&text).unwrap();
    let mut names: Vec<String> = state["volumes"]
        .as_object()
        .map(|m| m.keys().cloned().collect())
        .unwrap_or_default();
    names.sort();
    names
}

async fn storch_volumes(client: &reqwest::Client, server: &Server) -> Vec<String> {
    let r: Value = client
        .get(format!("{}/trident/v1/volume", server.url))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let mut names: Vec<String> = r["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect();
    names.sort();
    names
}

fn volume_name(kube: &FakeKube, name: &str) -> String {
    crate::support::fake_kube::claim_volume_name(kube, "default", name)
}

fn bound(kube: &FakeKube, name: &str) -> bool {
    kube.get("persistentvolumeclaims", Some("default"), name)
        .is_some_and(|p| p["status"]["phase"] == "Bound")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_in_the_middle_of_provisioning_neither_loses_nor_doubles_a_claim() {
    let _heavy = crate::support::heavy();
    let kube = FakeKube::start().await;
    let tmp = tempfile::tempdir().unwrap();
    let kubeconfig = kube.kubeconfig(tmp.path());
    let config = config_file(tmp.path(), "150ms");
    let data = tmp.path().join("data");
    let client = storch::net::client();
    kube.put("storageclasses", storage_class());
    let rounds = crate::support::rounds("STORCH_K8S_CRASH_ROUNDS", 3);
    let mut claims = Vec::new();
    for round in 0..rounds {
        // A new pod each time: it must wait for the old pod's Lease to expire.
        let mut server = serve(&data, &config, &kubeconfig, &format!("storch-{round}"));
        server.wait_ready(&client).await;
        for i in 0..4 {
            let name = format!("r{round}-{i}");
            kube.put("persistentvolumeclaims", claim(&name));
            claims.push(name);
        }
        // A new pod leads once the old pod's Lease has expired.
        let identity = format!("storch-{round}");
        kube.wait_for(
            |k| {
                k.get("leases", Some("storch"), "storch-leader")
                    .is_some_and(|l| l["spec"]["holderIdentity"] == identity.as_str())
            },
            WAIT,
            "the new pod leads",
        )
        .await;
        if round == 0 {
            // Once deterministically while a create is in flight (the array answers after
            // 150 ms), then at random moments.
            let creating = async {
                loop {
                    for name in &claims {
                        let v = volume_name(&kube, name);
                        if let Ok(r) = client
                            .get(format!("{}/trident/v1/volume/{v}", server.url))
                            .send()
                            .await
                            && let Ok(body) = r.json::<Value>().await
                            && body["volume"]["state"] == "creating"
                        {
                            return;
                        }
                    }
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
            };
            tokio::time::timeout(WAIT, creating)
                .await
                .expect("a create in flight");
        } else {
            let delay = rand::rng().random_range(0..1500);
            tokio::time::sleep(Duration::from_millis(delay)).await;
        }
        server.kill();
    }
    let mut server = serve(&data, &config, &kubeconfig, "storch-final");
    server.wait_ready(&client).await;
    kube.wait_for(
        |k| claims.iter().all(|c| bound(k, c)),
        WAIT,
        "every claim bound after the restarts",
    )
    .await;
    let mut want: Vec<String> = claims.iter().map(|c| volume_name(&kube, c)).collect();
    want.sort();
    // Exactly one volume per claim, in storch and on the array; one PV each.
    let internal: Vec<String> = want.iter().map(|v| format!("trident-{v}")).collect();
    eventually("storch and the array agree", async || {
        array_volumes(tmp.path()) == internal
    })
    .await;
    assert_eq!(storch_volumes(&client, &server).await, want);
    let mut pvs: Vec<String> = kube
        .list("persistentvolumes", None)
        .iter()
        .map(|pv| pv["metadata"]["name"].as_str().unwrap().to_string())
        .collect();
    pvs.sort();
    assert_eq!(pvs, want);
    server.stop();
    kube.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_leader_is_replaced_once_its_lease_expires() {
    let _heavy = crate::support::heavy();
    let kube = FakeKube::start().await;
    let tmp = tempfile::tempdir().unwrap();
    let kubeconfig = kube.kubeconfig(tmp.path());
    let client = storch::net::client();
    let mut servers = Vec::new();
    for id in ["a", "b"] {
        let dir = tmp.path().join(id);
        std::fs::create_dir_all(&dir).unwrap();
        let config = config_file(&dir, "0ms");
        let server = serve(
            &dir.join("data"),
            &config,
            &kubeconfig,
            &format!("storch-{id}"),
        );
        server.wait_ready(&client).await;
        servers.push((dir, server));
    }
    kube.put("storageclasses", storage_class());
    kube.put("persistentvolumeclaims", claim("first"));
    kube.wait_for(|k| bound(k, "first"), WAIT, "first bound")
        .await;
    let lease = kube.get("leases", Some("storch"), "storch-leader").unwrap();
    let holder = lease["spec"]["holderIdentity"]
        .as_str()
        .unwrap()
        .to_string();
    let leader = if holder == "storch-a" { 0 } else { 1 };
    let first = volume_name(&kube, "first");
    assert_eq!(storch_volumes(&client, &servers[leader].1).await, [first]);
    assert!(
        storch_volumes(&client, &servers[1 - leader].1)
            .await
            .is_empty()
    );

    servers[leader].1.kill();
    kube.put("persistentvolumeclaims", claim("second"));
    kube.wait_for(|k| bound(k, "second"), WAIT, "second bound by the standby")
        .await;
    let second = volume_name(&kube, "second");
    let standby = &servers[1 - leader];
    assert_eq!(array_volumes(&standby.0), [format!("trident-{second}")]);
    assert_eq!(storch_volumes(&client, &standby.1).await, [second]);
    let lease = kube.get("leases", Some("storch"), "storch-leader").unwrap();
    assert_ne!(lease["spec"]["holderIdentity"], holder.as_str());
    assert!(
        lease["spec"]["leaseTransitions"].as_i64().unwrap() >= 1,
        "{lease}"
    );
    for (_, mut server) in servers {
        if server.child.try_wait().unwrap().is_none() {
            server.stop();
        }
    }
    kube.shutdown().await;
}
