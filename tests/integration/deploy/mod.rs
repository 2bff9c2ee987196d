//! The deployment files: every YAML document in `deploy/*.yaml`, `deploy/csi/*.yaml`,
//! `examples/kubernetes/*.yaml` and `examples/csi/*.yaml` parses into its k8s-openapi type
//! (strictly: a field the type does not know fails), and the Helm chart in
//! `deploy/helm/storch`, linted and rendered by the real helm for every values set, gives the
//! same install. The checks are the ones that matter for running storch: probes, a non-root
//! read-only container, resources, the data dir on a PVC, least-privilege RBAC, container
//! flags that `storch serve --help` knows, and for CSI the sidecars on storch's socket and a
//! node plugin the kubelet can use.

// First: the `one!` macro it defines is used by the modules after it.
#[macro_use]
mod install;

mod csi;
mod csi_checks;
mod examples_csi;
mod generate;
mod helm;
mod manifests;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use k8s_openapi::api::apps::v1 as apps;
use k8s_openapi::api::coordination::v1 as coordination;
use k8s_openapi::api::core::v1 as core;
use k8s_openapi::api::rbac::v1 as rbac;
use k8s_openapi::api::storage::v1 as storage;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use csi_checks::*;
use helm::*;
use install::*;
use manifests::plain_objects;

// ---------------------------------------------------------------------------------------------
// Loading and strict typing

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The `*.yaml` files directly in `dir`, sorted by name (the order `kubectl apply -f` uses).
fn yaml_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file() && p.extension().is_some_and(|x| x == "yaml" || x == "yml"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no YAML files in {}", dir.display());
    files
}

/// The documents of a multi-document YAML text: split on lines that are exactly `---`;
/// documents with nothing but comments and blank lines are dropped (as kubectl and Helm do).
fn yaml_documents(text: &str, what: &str) -> Vec<Value> {
    let mut docs = Vec::new();
    let mut chunks = vec![String::new()];
    for line in text.lines() {
        if line == "---" {
            chunks.push(String::new());
        } else {
            let chunk = chunks.last_mut().unwrap();
            chunk.push_str(line);
            chunk.push('\n');
        }
    }
    for (i, chunk) in chunks.iter().enumerate() {
        let empty = chunk
            .lines()
            .all(|l| l.trim().is_empty() || l.trim_start().starts_with('#'));
        if empty {
            continue;
        }
        let doc: Value = serde_saphyr::from_str(chunk)
            .unwrap_or_else(|e| panic!("{what}, document {}: bad YAML: {e}\n{chunk}", i + 1));
        assert!(doc.is_object(), "{what}, document {}: not a mapping", i + 1);
        docs.push(doc);
    }
    docs
}

/// Differences between a document and its round trip through a k8s-openapi type: a field
/// missing from the output is one the type does not know (k8s-openapi ignores unknown fields),
/// so a misspelled field is caught here. `null` in the input counts as absent.
fn compare(input: &Value, output: &Value, path: &str, diffs: &mut Vec<String>) {
    match (input, output) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, v) in a {
                let p = format!("{path}.{k}");
                match b.get(k) {
                    None if v.is_null() => {}
                    None => diffs.push(format!("{p}: unknown field")),
                    Some(w) => compare(v, w, &p, diffs),
                }
            }
            for (k, w) in b {
                if !a.contains_key(k) {
                    diffs.push(format!("{path}.{k}: added by the type ({w})"));
                }
            }
        }
        (Value::Array(a), Value::Array(b)) if a.len() == b.len() => {
            for (i, (v, w)) in a.iter().zip(b).enumerate() {
                compare(v, w, &format!("{path}[{i}]"), diffs);
            }
        }
        (a, b) if a == b => {}
        (a, b) => diffs.push(format!("{path}: {a} became {b}")),
    }
}

fn typed<T: DeserializeOwned + Serialize>(doc: &Value, what: &str) -> T {
    let object: T = serde_json::from_value(doc.clone())
        .unwrap_or_else(|e| panic!("{what}: not a valid {}: {e}", std::any::type_name::<T>()));
    let back = serde_json::to_value(&object).unwrap();
    let mut diffs = Vec::new();
    compare(doc, &back, "", &mut diffs);
    assert!(
        diffs.is_empty(),
        "{what}: the document does not round-trip through {}:\n  {}",
        std::any::type_name::<T>(),
        diffs.join("\n  ")
    );
    object
}

#[derive(Debug, Clone)]
#[allow(clippy::large_enum_variant)]
#[allow(dead_code)] // Secret, ConfigMap and Lease parse, and check_install refuses them
enum Object {
    Namespace(core::Namespace),
    ServiceAccount(core::ServiceAccount),
    Secret(core::Secret),
    ConfigMap(core::ConfigMap),
    Service(core::Service),
    PersistentVolumeClaim(core::PersistentVolumeClaim),
    Deployment(apps::Deployment),
    StatefulSet(apps::StatefulSet),
    DaemonSet(apps::DaemonSet),
    CSIDriver(storage::CSIDriver),
    ClusterRole(rbac::ClusterRole),
    ClusterRoleBinding(rbac::ClusterRoleBinding),
    Role(rbac::Role),
    RoleBinding(rbac::RoleBinding),
    StorageClass(storage::StorageClass),
    Lease(coordination::Lease),
}

/// A document as its k8s-openapi type, chosen by `apiVersion` and `kind`; any other kind
/// fails.
fn object(doc: &Value, what: &str) -> Object {
    let api = doc["apiVersion"].as_str().unwrap_or_default();
    let kind = doc["kind"].as_str().unwrap_or_default();
    match (api, kind) {
        ("v1", "Namespace") => Object::Namespace(typed(doc, what)),
        ("v1", "ServiceAccount") => Object::ServiceAccount(typed(doc, what)),
        ("v1", "Secret") => Object::Secret(typed(doc, what)),
        ("v1", "ConfigMap") => Object::ConfigMap(typed(doc, what)),
        ("v1", "Service") => Object::Service(typed(doc, what)),
        ("v1", "PersistentVolumeClaim") => Object::PersistentVolumeClaim(typed(doc, what)),
        ("apps/v1", "Deployment") => Object::Deployment(typed(doc, what)),
        ("apps/v1", "StatefulSet") => Object::StatefulSet(typed(doc, what)),
        ("apps/v1", "DaemonSet") => Object::DaemonSet(typed(doc, what)),
        ("storage.k8s.io/v1", "CSIDriver") => Object::CSIDriver(typed(doc, what)),
        ("rbac.authorization.k8s.io/v1", "ClusterRole") => Object::ClusterRole(typed(doc, what)),
        ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding") => {
            Object::ClusterRoleBinding(typed(doc, what))
        }
        ("rbac.authorization.k8s.io/v1", "Role") => Object::Role(typed(doc, what)),
        ("rbac.authorization.k8s.io/v1", "RoleBinding") => Object::RoleBinding(typed(doc, what)),
        ("storage.k8s.io/v1", "StorageClass") => Object::StorageClass(typed(doc, what)),
        ("coordination.k8s.io/v1", "Lease") => Object::Lease(typed(doc, what)),
        _ => panic!("{what}: unknown kind {kind:?} (apiVersion {api:?})"),
    }
}

fn objects_in(text: &str, what: &str) -> Vec<Object> {
    yaml_documents(text, what)
        .iter()
        .enumerate()
        .map(|(i, d)| object(d, &format!("{what} #{}", i + 1)))
        .collect()
}

fn load_dir(dir: &Path) -> Vec<(String, Vec<Object>)> {
    yaml_files(dir)
        .into_iter()
        .map(|path| {
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            let text = std::fs::read_to_string(&path).unwrap();
            let objects = objects_in(&text, &name);
            assert!(!objects.is_empty(), "{name}: no documents");
            (name, objects)
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// What `storch serve` accepts

/// The `--flags` and `STORCH_*` environment variables `storch serve --help` lists.
fn serve_help() -> &'static (BTreeSet<String>, BTreeSet<String>) {
    static HELP: OnceLock<(BTreeSet<String>, BTreeSet<String>)> = OnceLock::new();
    HELP.get_or_init(|| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_storch"))
            .args(["serve", "--help"])
            .output()
            .expect("run storch serve --help");
        assert!(out.status.success(), "storch serve --help failed");
        let text = String::from_utf8(out.stdout).unwrap();
        let words = |prefix: &str| -> BTreeSet<String> {
            text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '-' || c == '_'))
                .filter(|w| w.starts_with(prefix) && w.len() > prefix.len())
                .map(str::to_string)
                .collect()
        };
        (words("--"), words("STORCH_"))
    })
}

/// Runs the real binary with a container's args (its file paths and CSI socket moved into a
/// temp dir with a real certificate, key and token, and `--port=0`) outside a cluster: clap and the settings
/// checks must accept the combination (exit code 2 and a usage message are what a bad
/// combination gives). Whatever happens after that (no in-cluster config here) is not this
/// test's business; a server still running after a few seconds is stopped.
///
/// Replicated args (`--etcd-endpoints`) get a real etcd on loopback and a real secrets key
/// instead: then the core must start with them (boot, election) and the run end only at the
/// Kubernetes frontend, which needs a pod.
fn check_binary_accepts(args: &[String], what: &str) {
    let etcd = flag_value(args, "--etcd-endpoints").map(|_| {
        tokio::runtime::Runtime::new()
            .unwrap()
            .block_on(crate::support::etcd::Etcd::start())
    });
    let dir = tempfile::tempdir().unwrap();
    let made = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    let file = |name: &str, text: &str| {
        let p = dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        p.to_string_lossy().into_owned()
    };
    let cert = file("tls.crt", &made.cert.pem());
    let key = file("tls.key", &made.signing_key.serialize_pem());
    let token = file("token", "0123456789abcdef0123456789abcdef\n");
    let secrets_key = dir.path().join("secret.key");
    std::fs::write(&secrets_key, [7u8; 32]).unwrap();
    let secrets_key = secrets_key.to_string_lossy().into_owned();
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    let data = dir.path().join("data").to_string_lossy().into_owned();
    let mut argv: Vec<String> = args
        .iter()
        .map(|a| match flag_name(a) {
            Some("--data-dir") => format!("--data-dir={data}"),
            Some("--tls-cert") => format!("--tls-cert={cert}"),
            Some("--tls-key") => format!("--tls-key={key}"),
            Some("--auth-token-file") => format!("--auth-token-file={token}"),
            Some("--secrets-key-file") => format!("--secrets-key-file={secrets_key}"),
            Some("--etcd-endpoints") => {
                format!("--etcd-endpoints={}", etcd.as_ref().unwrap().endpoint)
            }
            Some("--port") => "--port=0".to_string(),
            Some("--csi-endpoint") => {
                format!("--csi-endpoint=unix://{}/csi.sock", dir.path().display())
            }
            _ => a.clone(),
        })
        .collect();
    if flag_value(&argv, "--port").is_none() {
        argv.push("--port=0".into());
    }
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_storch"));
    cmd.args(&argv)
        .env("STORCH_POD_NAME", "storch-test-pod")
        .env("STORCH_NODE_NAME", "test-node")
        .env_remove("KUBERNETES_SERVICE_HOST")
        .env_remove("KUBERNETES_SERVICE_PORT")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped());
    for (k, _) in std::env::vars() {
        if k.starts_with("STORCH_") && k != "STORCH_POD_NAME" && k != "STORCH_NODE_NAME" {
            cmd.env_remove(k);
        }
    }
    let mut child = cmd.spawn().expect("start storch");
    let patience = if etcd.is_some() { 30 } else { 3 };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(patience);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if std::time::Instant::now() > deadline {
            child.kill().ok();
            child.wait().ok();
            break None;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).ok();
    if let Some(status) = status {
        assert!(
            status.code() != Some(2) && !stderr.contains("Usage:"),
            "{what}: `storch {}` is refused ({status}):\n{stderr}",
            argv.join(" ")
        );
    }
    if etcd.is_some() {
        assert!(
            status.is_some() && stderr.contains("could not start the Kubernetes frontend"),
            "{what}: `storch {}` did not get as far as the Kubernetes frontend ({status:?}):\n{stderr}",
            argv.join(" ")
        );
    }
}
