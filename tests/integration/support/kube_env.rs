//! A core and the Kubernetes frontend in this process on the fake API server
//! (`support::fake_kube`), for the tests of `k8s::*` that drive storch through Kubernetes
//! objects: [`Env`] (the fake, a kube client for the test's own writes, one storch), [`Node`]
//! (one more storch on the same fake), and the YAML of claims and classes.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use crate::support::fake_kube::FakeKube;
use crate::support::start;
use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use k8s_openapi::api::storage::v1::StorageClass;
use kube::Api;
use kube::api::{DeleteParams, PostParams};
use serde_json::Value;
use storch::actors::{Core, CoreRuntime, RequestCtx};
use storch::k8s::{Frontend, KubeOptions, KubeSource};

/// How long a test waits for the frontend to act (a deadline for a hang, not a measure).
pub const WAIT: Duration = Duration::from_secs(20);

/// A core with a frontend on the fake API server.
pub struct Node {
    pub runtime: CoreRuntime,
    pub frontend: Frontend,
}

impl Node {
    pub async fn start(dir: &Path, kube: &FakeKube, identity: &str) -> Node {
        Node::start_with(dir, kube, identity, |_| {}).await
    }

    /// [`Node::start`] with the options changed by `tune`.
    pub async fn start_with(
        dir: &Path,
        kube: &FakeKube,
        identity: &str,
        tune: impl FnOnce(&mut KubeOptions),
    ) -> Node {
        let runtime = start(dir).await;
        let mut opts = KubeOptions::new(KubeSource::ApiServer(kube.url.clone()));
        opts.identity = Some(identity.to_string());
        opts.namespace = Some("storch".into());
        opts.node_name = Some("node-1".into());
        opts.lease_duration = Duration::from_secs(2);
        tune(&mut opts);
        let frontend = Frontend::start(runtime.core(), opts)
            .await
            .expect("frontend starts");
        Node { runtime, frontend }
    }

    pub fn core(&self) -> Core {
        self.runtime.core()
    }

    pub async fn stop(self) {
        self.frontend.shutdown().await;
        self.runtime.shutdown().await;
    }
}

/// The fake API server, a kube client for the test's own writes, and one storch.
pub struct Env {
    pub kube: FakeKube,
    pub client: kube::Client,
    pub node: Node,
    pub dir: tempfile::TempDir,
}

impl Env {
    pub async fn start() -> Env {
        Env::start_with(|_| {}).await
    }

    /// [`Env::start`] with storch's frontend options changed by `tune`.
    pub async fn start_with(tune: impl FnOnce(&mut KubeOptions)) -> Env {
        let kube = FakeKube::start().await;
        let client = kube.client();
        let dir = tempfile::tempdir().unwrap();
        let node = Node::start_with(&dir.path().join("a"), &kube, "storch-a", tune).await;
        Env {
            kube,
            client,
            node,
            dir,
        }
    }

    pub fn core(&self) -> Core {
        self.node.core()
    }

    pub async fn add_backend(&self, doc: Value) {
        self.core()
            .add_backend(&RequestCtx::random(), doc)
            .await
            .expect("backend added");
    }

    /// Creates the objects of a YAML manifest (one or more documents) as `kubectl create`.
    pub async fn create(&self, yaml: &str) {
        for doc in yaml.split("\n---") {
            if doc.trim().is_empty() {
                continue;
            }
            let value = storch::yaml::parse(doc).expect("valid YAML");
            match value["kind"].as_str() {
                Some("StorageClass") => {
                    let sc: StorageClass = serde_json::from_value(value).unwrap();
                    Api::<StorageClass>::all(self.client.clone())
                        .create(&PostParams::default(), &sc)
                        .await
                        .unwrap();
                }
                Some("PersistentVolumeClaim") => {
                    let pvc: PersistentVolumeClaim = serde_json::from_value(value).unwrap();
                    let ns = pvc.metadata.namespace.clone().unwrap_or("default".into());
                    Api::<PersistentVolumeClaim>::namespaced(self.client.clone(), &ns)
                        .create(&PostParams::default(), &pvc)
                        .await
                        .unwrap();
                }
                other => panic!("unexpected kind {other:?}"),
            }
        }
    }

    pub async fn create_sample(&self, file: &str) {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("examples/kubernetes")
            .join(file);
        self.create(&std::fs::read_to_string(path).unwrap()).await;
    }

    pub async fn delete_pvc(&self, ns: &str, name: &str) {
        Api::<PersistentVolumeClaim>::namespaced(self.client.clone(), ns)
            .delete(name, &DeleteParams::default())
            .await
            .unwrap();
    }

    pub fn pvc(&self, ns: &str, name: &str) -> Value {
        self.kube
            .get("persistentvolumeclaims", Some(ns), name)
            .unwrap_or_else(|| panic!("no PVC {ns}/{name}"))
    }

    /// The storch name of a claim.
    pub fn volume_name(&self, ns: &str, name: &str) -> String {
        crate::support::fake_kube::claim_volume_name(&self.kube, ns, name)
    }

    pub fn pv(&self, name: &str) -> Option<Value> {
        self.kube.get("persistentvolumes", None, name)
    }

    /// Waits until `f` holds for PV `name` (`None` while there is none).
    pub async fn wait_for_pv(&self, name: &str, what: &str, f: impl Fn(Option<Value>) -> bool) {
        self.kube
            .wait_for(|k| f(k.get("persistentvolumes", None, name)), WAIT, what)
            .await;
    }

    /// Waits until the claim is Bound to a PV and returns the PV.
    pub async fn bound(&self, ns: &str, name: &str) -> Value {
        self.kube
            .wait_for(
                |k| {
                    k.get("persistentvolumeclaims", Some(ns), name)
                        .is_some_and(|p| p["status"]["phase"] == "Bound")
                },
                WAIT,
                &format!("PVC {ns}/{name} bound; events: {:#?}", self.events()),
            )
            .await;
        let pv_name = self.pvc(ns, name)["spec"]["volumeName"]
            .as_str()
            .unwrap()
            .to_string();
        self.pv(&pv_name).expect("the bound PV exists")
    }

    /// The CHAP Secret `name` in storch's namespace, its data decoded; asserts that it exists
    /// and is of type `kubernetes.io/iscsi-chap`.
    pub fn chap_secret(&self, name: &str) -> BTreeMap<String, String> {
        use base64::Engine;
        let secret = self
            .kube
            .get("secrets", Some("storch"), name)
            .expect("the CHAP secret");
        assert_eq!(secret["type"], "kubernetes.io/iscsi-chap");
        let decode = |b64: &Value| {
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(b64.as_str().expect("base64 text"))
                .expect("base64");
            String::from_utf8(bytes).expect("UTF-8")
        };
        secret["data"]
            .as_object()
            .expect("data")
            .iter()
            .map(|(k, v)| (k.clone(), decode(v)))
            .collect()
    }

    /// Every event as (regarding kind/name, type, reason, note).
    pub fn events(&self) -> Vec<(String, String, String, String)> {
        self.kube
            .list("events.events.k8s.io", None)
            .into_iter()
            .map(|e| {
                (
                    format!(
                        "{}/{}",
                        e["regarding"]["kind"].as_str().unwrap_or_default(),
                        e["regarding"]["name"].as_str().unwrap_or_default()
                    ),
                    e["type"].as_str().unwrap_or_default().to_string(),
                    e["reason"].as_str().unwrap_or_default().to_string(),
                    e["note"].as_str().unwrap_or_default().to_string(),
                )
            })
            .collect()
    }

    /// Waits for an event about `regarding` (`Kind/name`) with `reason`; returns its note.
    pub async fn event(&self, regarding: &str, reason: &str) -> String {
        let find = |env: &Env| {
            env.events()
                .into_iter()
                .find(|(r, _, why, _)| r == regarding && why == reason)
        };
        for _ in 0..1000 {
            if let Some((_, _, _, note)) = find(self) {
                return note;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        panic!(
            "no {reason} event for {regarding}; events: {:#?}",
            self.events()
        );
    }

    /// Stops storch and starts it again on the same data, as `identity`.
    pub async fn restart(self, identity: &str) -> Env {
        self.restart_with(identity, |_| {}, |_| {}).await
    }

    /// [`Env::restart`], with `meanwhile` run on the fake while storch is stopped (the cluster
    /// going on without it) and the new storch's options changed by `tune`.
    pub async fn restart_with(
        self,
        identity: &str,
        meanwhile: impl FnOnce(&FakeKube),
        tune: impl FnOnce(&mut KubeOptions),
    ) -> Env {
        let Env {
            kube,
            client,
            node,
            dir,
        } = self;
        node.stop().await;
        meanwhile(&kube);
        let node = Node::start_with(&dir.path().join("a"), &kube, identity, tune).await;
        Env {
            kube,
            client,
            node,
            dir,
        }
    }

    pub async fn stop(self) {
        self.node.stop().await;
        self.kube.shutdown().await;
        drop(self.dir);
    }
}

pub fn pvc_yaml(name: &str, class: Option<&str>, extra_meta: &str) -> String {
    let class = class
        .map(|c| format!("  storageClassName: {c}\n"))
        .unwrap_or_default();
    format!(
        "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata:\n  name: {name}\n  namespace: default\n{extra_meta}spec:\n  accessModes: [ReadWriteOnce]\n{class}  resources:\n    requests:\n      storage: 1Gi\n"
    )
}

pub fn class_yaml(name: &str, provisioner: &str, params: &str, extra_meta: &str) -> String {
    format!(
        "apiVersion: storage.k8s.io/v1\nkind: StorageClass\nmetadata:\n  name: {name}\n{extra_meta}provisioner: {provisioner}\nparameters:\n{params}"
    )
}
