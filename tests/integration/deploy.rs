//! The deployment files: every YAML document in `deploy/*.yaml` and `examples/kubernetes/*.yaml`
//! parses into its k8s-openapi type (strictly: a field the type does not know fails), and the
//! Helm chart in `deploy/helm/storch`, rendered by the small Go-template renderer below, gives
//! the same install. The checks are the ones that matter for running storch: probes, a
//! non-root read-only container, resources, the data dir on a PVC, least-privilege RBAC and
//! container flags that `storch serve --help` knows.

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

/// Runs the real binary with a container's args (its file paths moved into a temp dir with a
/// real certificate, key and token, and `--port=0`) outside a cluster: clap and the settings
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

// ---------------------------------------------------------------------------------------------
// The install: what must hold for the plain manifests and for every chart rendering

/// The cluster-wide rules storch needs, and nothing more: (apiGroup, resource) → verbs.
fn expected_cluster_rules() -> BTreeMap<(String, String), BTreeSet<String>> {
    let mut m = BTreeMap::new();
    let mut put = |g: &str, r: &str, verbs: &[&str]| {
        m.insert(
            (g.to_string(), r.to_string()),
            verbs.iter().map(|v| v.to_string()).collect(),
        );
    };
    put(
        "storage.k8s.io",
        "storageclasses",
        &["get", "list", "watch"],
    );
    put("", "persistentvolumeclaims", &["get", "list", "watch"]);
    put(
        "",
        "persistentvolumes",
        &["get", "list", "watch", "create", "delete"],
    );
    put("", "persistentvolumes/status", &["update", "patch"]);
    put("", "events", &["create", "patch"]);
    put("events.k8s.io", "events", &["create", "patch"]);
    m
}

/// The Role's rules; `replicated` (etcd) adds the pods' role labels.
fn expected_namespaced_rules(replicated: bool) -> BTreeMap<(String, String), BTreeSet<String>> {
    let mut m = BTreeMap::new();
    let to_set = |v: &[&str]| v.iter().map(|v| v.to_string()).collect::<BTreeSet<_>>();
    m.insert(
        ("coordination.k8s.io".into(), "leases".into()),
        to_set(&["get", "create", "update", "patch"]),
    );
    m.insert(
        ("".into(), "secrets".into()),
        to_set(&["create", "get", "update", "patch"]),
    );
    if replicated {
        m.insert(("".into(), "pods".into()), to_set(&["get", "patch"]));
    }
    m
}

/// Flattens rules to (group, resource) → verbs, refusing wildcards, resourceNames and
/// non-resource URLs.
fn flatten_rules(
    rules: &[rbac::PolicyRule],
    what: &str,
) -> BTreeMap<(String, String), BTreeSet<String>> {
    let mut m: BTreeMap<(String, String), BTreeSet<String>> = BTreeMap::new();
    for rule in rules {
        assert!(
            rule.non_resource_urls.is_none(),
            "{what}: non-resource URLs"
        );
        assert!(rule.resource_names.is_none(), "{what}: resourceNames");
        let groups = rule.api_groups.clone().unwrap_or_default();
        let resources = rule.resources.clone().unwrap_or_default();
        assert!(!groups.is_empty() && !resources.is_empty() && !rule.verbs.is_empty());
        for word in groups.iter().chain(&resources).chain(&rule.verbs) {
            assert!(!word.contains('*'), "{what}: wildcard {word:?} in {rule:?}");
        }
        for g in &groups {
            for r in &resources {
                m.entry((g.clone(), r.clone()))
                    .or_default()
                    .extend(rule.verbs.iter().cloned());
            }
        }
    }
    m
}

fn one<'a, T>(
    objects: &'a [Object],
    pick: impl Fn(&'a Object) -> Option<&'a T>,
    kind: &str,
) -> &'a T {
    let found: Vec<&T> = objects.iter().filter_map(pick).collect();
    assert_eq!(
        found.len(),
        1,
        "expected exactly one {kind}, found {}",
        found.len()
    );
    found[0]
}

/// [`one`] for one variant of [`Object`].
macro_rules! one {
    ($objects:expr, $variant:ident, $kind:expr) => {
        one(
            $objects,
            |o| match o {
                Object::$variant(x) => Some(x),
                _ => None,
            },
            $kind,
        )
    };
}

/// The `--flag` of an argument (`--flag=value` or `--flag`), if it is one.
fn flag_name(arg: &str) -> Option<&str> {
    arg.starts_with("--")
        .then(|| arg.split('=').next().unwrap())
}

/// The value of `--flag=value` or `--flag value` in `args`.
fn flag_value<'a>(args: &'a [String], flag: &str) -> Option<&'a str> {
    let eq = format!("{flag}=");
    args.iter().enumerate().find_map(|(i, a)| {
        if let Some(v) = a.strip_prefix(&eq) {
            Some(v)
        } else if a == flag {
            args.get(i + 1).map(String::as_str)
        } else {
            None
        }
    })
}

struct Install<'a> {
    /// The Deployment's or (replicated) the StatefulSet's pod template.
    template: &'a core::PodTemplateSpec,
    args: Vec<String>,
}

impl Install<'_> {
    /// The workload's pod spec.
    fn pod(&self) -> &core::PodSpec {
        self.template.spec.as_ref().unwrap()
    }
}

/// How the install keeps its data: one Deployment and its PVC, or (etcd replication) a
/// StatefulSet with a claim template per instance.
enum Workload<'a> {
    Single {
        deployment: &'a apps::Deployment,
        pvc: &'a core::PersistentVolumeClaim,
    },
    Replicated(&'a apps::StatefulSet),
}

/// The workload, checked: exactly one, with the replicas and update strategy its data allows.
fn workload<'a>(objects: &'a [Object], what: &str) -> Workload<'a> {
    let sets: Vec<&apps::StatefulSet> = objects
        .iter()
        .filter_map(|o| match o {
            Object::StatefulSet(s) => Some(s),
            _ => None,
        })
        .collect();
    if sets.is_empty() {
        let deployment = one!(objects, Deployment, "Deployment");
        let spec = deployment.spec.as_ref().unwrap();
        assert_eq!(
            spec.replicas,
            Some(1),
            "{what}: one replica (the data dir is RWO)"
        );
        assert_eq!(
            spec.strategy.as_ref().and_then(|s| s.type_.as_deref()),
            Some("Recreate"),
            "{what}: Recreate strategy"
        );
        let pvc = one!(objects, PersistentVolumeClaim, "PersistentVolumeClaim");
        return Workload::Single { deployment, pvc };
    }
    assert_eq!(sets.len(), 1, "{what}: one StatefulSet");
    assert!(
        !objects
            .iter()
            .any(|o| matches!(o, Object::Deployment(_) | Object::PersistentVolumeClaim(_))),
        "{what}: a StatefulSet and a Deployment or a shared PVC"
    );
    let spec = sets[0].spec.as_ref().unwrap();
    assert!(spec.replicas.is_some_and(|r| r >= 1), "{what}: replicas");
    assert_eq!(
        spec.pod_management_policy.as_deref(),
        Some("Parallel"),
        "{what}: podManagementPolicy"
    );
    Workload::Replicated(sets[0])
}

impl<'a> Workload<'a> {
    fn template(&self) -> &'a core::PodTemplateSpec {
        match self {
            Workload::Single { deployment, .. } => &deployment.spec.as_ref().unwrap().template,
            Workload::Replicated(s) => &s.spec.as_ref().unwrap().template,
        }
    }

    fn selector(&self) -> BTreeMap<String, String> {
        let selector = match self {
            Workload::Single { deployment, .. } => &deployment.spec.as_ref().unwrap().selector,
            Workload::Replicated(s) => &s.spec.as_ref().unwrap().selector,
        };
        selector.match_labels.clone().unwrap_or_default()
    }
}

/// Everything that must hold for a storch install in namespace `ns`: a single one or, with a
/// StatefulSet, a replicated one. Returns the pod template and its container's args for
/// further checks.
fn check_install<'a>(objects: &'a [Object], ns: &str, what: &str) -> Install<'a> {
    // Namespaced objects are in `ns`.
    for o in objects {
        let meta = match o {
            Object::ServiceAccount(x) => &x.metadata,
            Object::Service(x) => &x.metadata,
            Object::PersistentVolumeClaim(x) => &x.metadata,
            Object::Deployment(x) => &x.metadata,
            Object::StatefulSet(x) => &x.metadata,
            Object::Role(x) => &x.metadata,
            Object::RoleBinding(x) => &x.metadata,
            Object::Secret(_) | Object::ConfigMap(_) | Object::Lease(_) => {
                panic!("{what}: unexpected object {o:?}")
            }
            _ => continue,
        };
        assert_eq!(
            meta.namespace.as_deref(),
            Some(ns),
            "{what}: {:?} namespace",
            meta.name
        );
    }

    let workload = workload(objects, what);
    let replicated = matches!(workload, Workload::Replicated(_));
    let sa = one!(objects, ServiceAccount, "ServiceAccount");
    let sa_name = sa.metadata.name.clone().unwrap();

    // RBAC: exactly the rules needed, no secrets cluster-wide, bound to the service account.
    let cr = one!(objects, ClusterRole, "ClusterRole");
    assert!(cr.aggregation_rule.is_none());
    let cluster_rules = flatten_rules(cr.rules.as_deref().unwrap_or_default(), "ClusterRole");
    assert!(
        cluster_rules.keys().all(|(_, r)| !r.starts_with("secrets")),
        "{what}: the ClusterRole grants a verb on secrets"
    );
    assert_eq!(
        cluster_rules,
        expected_cluster_rules(),
        "{what}: ClusterRole rules"
    );
    let role = one!(objects, Role, "Role");
    let ns_rules = flatten_rules(role.rules.as_deref().unwrap_or_default(), "Role");
    assert_eq!(
        ns_rules,
        expected_namespaced_rules(replicated),
        "{what}: Role rules"
    );

    let subjects_ok = |subjects: &Option<Vec<rbac::Subject>>| {
        let s = subjects.as_deref().unwrap_or_default();
        s.len() == 1
            && s[0].kind == "ServiceAccount"
            && s[0].name == sa_name
            && s[0].namespace.as_deref() == Some(ns)
    };
    let crb = one!(objects, ClusterRoleBinding, "ClusterRoleBinding");
    assert_eq!(crb.role_ref.kind, "ClusterRole");
    assert_eq!(crb.role_ref.api_group, "rbac.authorization.k8s.io");
    assert_eq!(Some(&crb.role_ref.name), cr.metadata.name.as_ref());
    assert!(
        subjects_ok(&crb.subjects),
        "{what}: ClusterRoleBinding subjects"
    );
    let rb = one!(objects, RoleBinding, "RoleBinding");
    assert_eq!(rb.role_ref.kind, "Role");
    assert_eq!(Some(&rb.role_ref.name), role.metadata.name.as_ref());
    assert!(subjects_ok(&rb.subjects), "{what}: RoleBinding subjects");

    // The data PVC (or each instance's, from the claim template).
    let pvc = match &workload {
        Workload::Single { pvc, .. } => *pvc,
        Workload::Replicated(s) => {
            let claims = s.spec.as_ref().unwrap().volume_claim_templates.as_deref();
            assert_eq!(
                claims.map(<[_]>::len),
                Some(1),
                "{what}: one claim template"
            );
            &claims.unwrap()[0]
        }
    };
    let pvc_spec = pvc.spec.as_ref().unwrap();
    assert_eq!(
        pvc_spec.access_modes.as_deref(),
        Some(&["ReadWriteOnce".to_string()][..])
    );
    let requests = pvc_spec
        .resources
        .as_ref()
        .and_then(|r| r.requests.as_ref());
    assert!(
        requests.is_some_and(|r| r.contains_key("storage")),
        "{what}: PVC size"
    );

    // The pods.
    let template = workload.template();
    let pod_labels = template
        .metadata
        .as_ref()
        .and_then(|m| m.labels.clone())
        .unwrap_or_default();
    let selector = workload.selector();
    assert!(!selector.is_empty() && selector.iter().all(|(k, v)| pod_labels.get(k) == Some(v)));
    let pod = template.spec.as_ref().unwrap();
    assert_eq!(pod.service_account_name.as_deref(), Some(sa_name.as_str()));
    assert_eq!(pod.containers.len(), 1);
    assert!(pod.init_containers.is_none() && pod.host_network.is_none() && pod.host_pid.is_none());
    let c = &pod.containers[0];

    // Probes on /livez and /readyz over HTTPS, on the API port; replicated, a caught-up
    // standby is Ready (`?standby=ok`), or a rolling update would wait for it forever.
    let port_names: BTreeMap<String, i32> = c
        .ports
        .iter()
        .flatten()
        .map(|p| (p.name.clone().unwrap_or_default(), p.container_port))
        .collect();
    assert_eq!(
        port_names.get("api"),
        Some(&8000),
        "{what}: container port api = 8000"
    );
    let readyz = if replicated {
        "/readyz?standby=ok"
    } else {
        "/readyz"
    };
    for (probe, path) in [(&c.liveness_probe, "/livez"), (&c.readiness_probe, readyz)] {
        let get = probe
            .as_ref()
            .and_then(|p| p.http_get.as_ref())
            .unwrap_or_else(|| panic!("{what}: no HTTP probe for {path}"));
        assert_eq!(get.path.as_deref(), Some(path));
        assert_eq!(
            get.scheme.as_deref(),
            Some("HTTPS"),
            "{what}: {path} probe scheme"
        );
        use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
        let port = match &get.port {
            IntOrString::Int(p) => *p,
            IntOrString::String(name) => port_names[name],
        };
        assert_eq!(port, 8000, "{what}: {path} probe port");
    }

    // Non-root, read-only root filesystem, no privilege escalation, no capabilities, seccomp.
    let psc = pod.security_context.clone().unwrap_or_default();
    let sc = c.security_context.clone().unwrap_or_default();
    assert_eq!(
        sc.run_as_non_root.or(psc.run_as_non_root),
        Some(true),
        "{what}: runAsNonRoot"
    );
    assert_eq!(
        sc.run_as_user.or(psc.run_as_user),
        Some(65532),
        "{what}: runAsUser"
    );
    assert_eq!(
        sc.read_only_root_filesystem,
        Some(true),
        "{what}: readOnlyRootFilesystem"
    );
    assert_eq!(
        sc.allow_privilege_escalation,
        Some(false),
        "{what}: allowPrivilegeEscalation"
    );
    assert_ne!(sc.privileged, Some(true));
    let caps = sc.capabilities.clone().unwrap_or_default();
    assert_eq!(
        caps.drop,
        Some(vec!["ALL".to_string()]),
        "{what}: capabilities drop ALL"
    );
    assert!(caps.add.is_none(), "{what}: capabilities added");
    let seccomp = sc.seccomp_profile.clone().or(psc.seccomp_profile.clone());
    assert_eq!(
        seccomp.map(|s| s.type_),
        Some("RuntimeDefault".to_string()),
        "{what}: seccomp"
    );

    // Resource requests (and limits).
    let res = c.resources.clone().unwrap_or_default();
    let req = res.requests.unwrap_or_default();
    assert!(
        req.contains_key("cpu") && req.contains_key("memory"),
        "{what}: resource requests"
    );
    assert!(
        res.limits.unwrap_or_default().contains_key("memory"),
        "{what}: memory limit"
    );

    // The args: `serve --in-cluster`, flags that `storch serve --help` lists, TLS and a token
    // on the non-loopback address.
    let args = c.args.clone().unwrap_or_default();
    assert!(
        c.command.is_none(),
        "{what}: the image's entrypoint runs storch"
    );
    assert_eq!(
        args.first().map(String::as_str),
        Some("serve"),
        "{what}: args"
    );
    assert!(
        args.iter().any(|a| a == "--in-cluster"),
        "{what}: --in-cluster"
    );
    let (help_flags, help_env) = serve_help();
    let unknown: Vec<&str> = args
        .iter()
        .filter_map(|a| flag_name(a))
        .filter(|f| !help_flags.contains(*f))
        .collect();
    let env_names: Vec<&str> = c.env.iter().flatten().map(|e| e.name.as_str()).collect();
    let unknown_env: Vec<&&str> = env_names
        .iter()
        .filter(|n| n.starts_with("STORCH_") && !help_env.contains(**n))
        .collect();
    assert!(
        unknown.is_empty() && unknown_env.is_empty(),
        "{what}: `storch serve --help` does not list the flags {unknown:?} / env {unknown_env:?}"
    );
    let address = flag_value(&args, "--address").unwrap_or("127.0.0.1");
    assert_eq!(address, "0.0.0.0", "{what}: listen on the pod's addresses");
    assert!(
        !args.iter().any(|a| a.starts_with("--insecure-listen")),
        "{what}: --insecure-listen"
    );
    check_binary_accepts(&args, what);

    // Downward API: the pod name (lease identity) and the node name.
    for (var, field) in [
        ("STORCH_POD_NAME", "metadata.name"),
        ("STORCH_NODE_NAME", "spec.nodeName"),
    ] {
        let e = c
            .env
            .iter()
            .flatten()
            .find(|e| e.name == var)
            .unwrap_or_else(|| panic!("{what}: env {var}"));
        let got = e
            .value_from
            .as_ref()
            .and_then(|v| v.field_ref.as_ref())
            .map(|f| f.field_path.as_str());
        assert_eq!(got, Some(field), "{what}: {var} from the downward API");
    }

    // Volumes: the data dir on the PVC, /tmp on an emptyDir, TLS and token files from
    // read-only Secret mounts.
    let volumes: BTreeMap<&str, &core::Volume> = pod
        .volumes
        .iter()
        .flatten()
        .map(|v| (v.name.as_str(), v))
        .collect();
    let mounts = c.volume_mounts.clone().unwrap_or_default();
    let volume_at = |path: &str| -> (core::VolumeMount, core::Volume) {
        let m = mounts
            .iter()
            .filter(|m| Path::new(path).starts_with(&m.mount_path))
            .max_by_key(|m| m.mount_path.len())
            .unwrap_or_else(|| panic!("{what}: nothing mounted at {path}"));
        (m.clone(), volumes[m.name.as_str()].clone())
    };
    let data_dir = flag_value(&args, "--data-dir").expect("--data-dir");
    if replicated {
        let m = mounts
            .iter()
            .filter(|m| Path::new(data_dir).starts_with(&m.mount_path))
            .max_by_key(|m| m.mount_path.len())
            .unwrap_or_else(|| panic!("{what}: nothing mounted at {data_dir}"));
        assert_eq!(
            Some(&m.name),
            pvc.metadata.name.as_ref(),
            "{what}: the data dir is on the instance's claim"
        );
        assert!(
            !volumes.contains_key(m.name.as_str()),
            "{what}: a pod volume hides the claim template {}",
            m.name
        );
    } else {
        let (_, data) = volume_at(data_dir);
        assert_eq!(
            data.persistent_volume_claim
                .as_ref()
                .map(|p| p.claim_name.as_str()),
            pvc.metadata.name.as_deref(),
            "{what}: the data dir is on the PVC"
        );
    }
    let (_, tmp) = volume_at("/tmp/x");
    assert!(tmp.empty_dir.is_some(), "{what}: /tmp is an emptyDir");
    let secret_files: &[&str] = if replicated {
        &[
            "--tls-cert",
            "--tls-key",
            "--auth-token-file",
            "--secrets-key-file",
        ]
    } else {
        &["--tls-cert", "--tls-key", "--auth-token-file"]
    };
    assert_eq!(
        flag_value(&args, "--secrets-key-file").is_some(),
        replicated,
        "{what}: --secrets-key-file, shared by replicated instances only"
    );
    for flag in secret_files {
        let file = flag_value(&args, flag).unwrap_or_else(|| panic!("{what}: {flag}"));
        let (mount, vol) = volume_at(file);
        assert_eq!(
            mount.read_only,
            Some(true),
            "{what}: {flag} mount is read-only"
        );
        let secret = vol
            .secret
            .as_ref()
            .unwrap_or_else(|| panic!("{what}: {flag} is not from a Secret"));
        assert!(secret.secret_name.as_ref().is_some_and(|n| !n.is_empty()));
    }
    for m in &mounts {
        if let Some(v) = volumes.get(m.name.as_str()) {
            assert!(v.host_path.is_none(), "{what}: hostPath volume {}", m.name);
        }
    }

    // The Service: ClusterIP by default, port 8000 onto the API port of these pods; with
    // replication, of the pod labelled leader only (the pods carry no role label: each
    // instance labels its own pod at run time).
    let svc_spec = service_of(objects);
    let mut svc_selector = svc_spec.selector.clone().unwrap_or_default();
    if replicated {
        assert_eq!(
            svc_selector.remove("storch.io/role").as_deref(),
            Some("leader"),
            "{what}: the Service selects the etcd leader"
        );
        assert!(!pod_labels.contains_key("storch.io/role"));
    }
    assert!(
        !svc_selector.is_empty()
            && svc_selector
                .iter()
                .all(|(k, v)| pod_labels.get(k) == Some(v))
    );
    let ports = svc_spec.ports.as_deref().unwrap_or_default();
    assert_eq!(ports.len(), 1);
    use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
    assert_eq!(
        ports[0].target_port,
        Some(IntOrString::String("api".into()))
    );

    // Replicated: the StatefulSet's governing Service is headless and finds every instance.
    if let Workload::Replicated(set) = &workload {
        let name = set.spec.as_ref().unwrap().service_name.as_deref();
        let headless = objects
            .iter()
            .find_map(|o| match o {
                Object::Service(s) if s.metadata.name.as_deref() == name => s.spec.as_ref(),
                _ => None,
            })
            .unwrap_or_else(|| panic!("{what}: no Service {name:?} for the StatefulSet"));
        assert_eq!(
            headless.cluster_ip.as_deref(),
            Some("None"),
            "{what}: headless"
        );
        let sel = headless.selector.clone().unwrap_or_default();
        assert!(!sel.is_empty() && sel.iter().all(|(k, v)| pod_labels.get(k) == Some(v)));
    }

    Install { template, args }
}

/// The clients' Service: the one that is not headless.
fn service_of(objects: &[Object]) -> &core::ServiceSpec {
    one(
        objects,
        |o| match o {
            Object::Service(s) if s.spec.as_ref()?.cluster_ip.as_deref() != Some("None") => {
                s.spec.as_ref()
            }
            _ => None,
        },
        "client Service",
    )
}

/// The Secrets a pod mounts.
fn secret_volumes(pod: &core::PodSpec) -> BTreeSet<&str> {
    pod.volumes
        .iter()
        .flatten()
        .filter_map(|v| v.secret.as_ref()?.secret_name.as_deref())
        .collect()
}

fn pvc_of(objects: &[Object]) -> &core::PersistentVolumeClaimSpec {
    one!(objects, PersistentVolumeClaim, "PVC")
        .spec
        .as_ref()
        .unwrap()
}

// ---------------------------------------------------------------------------------------------
// Plain manifests

fn plain_objects() -> Vec<Object> {
    load_dir(&repo().join("deploy"))
        .into_iter()
        .flat_map(|(_, o)| o)
        .collect()
}

#[test]
fn plain_manifests_parse_and_make_a_safe_install() {
    let objects = plain_objects();
    let ns = one!(&objects, Namespace, "Namespace");
    assert_eq!(ns.metadata.name.as_deref(), Some("storch"));
    let install = check_install(&objects, "storch", "deploy/");
    let spec = service_of(&objects);
    assert_eq!(spec.type_.as_deref(), Some("ClusterIP"));
    assert_eq!(spec.ports.as_ref().unwrap()[0].port, 8000);
    assert_eq!(
        pvc_of(&objects).storage_class_name,
        None,
        "the cluster's default class"
    );
    // The Secrets are created by hand, never shipped.
    let pod = install.pod();
    let secrets = secret_volumes(pod);
    assert_eq!(secrets, BTreeSet::from(["storch-tls", "storch-token"]));
    assert_eq!(
        flag_value(&install.args, "--tls-cert"),
        Some("/etc/storch/tls/tls.crt")
    );
}

#[test]
fn the_namespace_comes_first_for_kubectl_apply() {
    let files = load_dir(&repo().join("deploy"));
    assert!(
        matches!(files[0].1[0], Object::Namespace(_)),
        "{} is applied first",
        files[0].0
    );
}

// ---------------------------------------------------------------------------------------------
// Examples

const TRIDENT_PVC_ANNOTATIONS: &[&str] = &[
    "protocol",
    "snapshotPolicy",
    "exportPolicy",
    "snapshotDirectory",
    "unixPermissions",
    "blockSize",
    "fileSystem",
    "cloneFromPVC",
    "splitOnClone",
    "reclaimPolicy",
];

#[test]
fn kubernetes_examples_parse_and_use_trident_parameters() {
    let files = load_dir(&repo().join("examples/kubernetes"));
    let mut classes = BTreeMap::new();
    let mut claims = BTreeMap::new();
    for (name, objects) in &files {
        for o in objects {
            match o {
                Object::StorageClass(sc) => {
                    classes.insert(
                        sc.metadata.name.clone().unwrap(),
                        (name.clone(), sc.clone()),
                    );
                }
                Object::PersistentVolumeClaim(pvc) => {
                    claims.insert(
                        pvc.metadata.name.clone().unwrap(),
                        (name.clone(), pvc.clone()),
                    );
                }
                other => panic!("{name}: unexpected object {other:?}"),
            }
        }
    }
    assert_eq!(
        classes.keys().map(String::as_str).collect::<Vec<_>>(),
        ["basic", "gold", "local"]
    );

    // Every class parameter is one storch's Kubernetes frontend takes: a pool list, fsType,
    // or a storage attribute request that storch parses (trident-compat §5.1, §3.2).
    let mut defaults = 0;
    for (name, (file, sc)) in &classes {
        assert!(
            ["netapp.io/trident", "storch.io/storch"].contains(&sc.provisioner.as_str()),
            "{file}: provisioner {}",
            sc.provisioner
        );
        let params = sc.parameters.clone().unwrap_or_default();
        assert!(params.contains_key("backendType"), "{file}: backendType");
        for (k, v) in &params {
            if [
                "fsType",
                "requiredStorage",
                "additionalStoragePools",
                "excludeStoragePools",
                "storagePools",
            ]
            .contains(&k.as_str())
            {
                continue;
            }
            storch::model::Request::parse(k, v).unwrap_or_else(|e| panic!("{file}: {k}: {e}"));
        }
        let annotations = sc.metadata.annotations.clone().unwrap_or_default();
        if annotations
            .get("storageclass.kubernetes.io/is-default-class")
            .map(String::as_str)
            == Some("true")
        {
            defaults += 1;
            assert_eq!(name, "local");
        }
        assert!(!annotations.contains_key("storageclass.beta.kubernetes.io/is-default-class"));
    }
    assert_eq!(defaults, 1, "one default class");
    assert_eq!(classes["local"].1.provisioner, "storch.io/storch");
    assert_eq!(
        classes["basic"].1.parameters.as_ref().unwrap()["backendType"],
        "ontap-nas"
    );

    let mut seen = BTreeSet::new();
    for (name, (file, pvc)) in &claims {
        let spec = pvc.spec.as_ref().unwrap();
        let class = spec
            .storage_class_name
            .as_deref()
            .unwrap_or_else(|| panic!("{file}: class"));
        assert!(classes.contains_key(class), "{file}: unknown class {class}");
        assert!(
            spec.resources
                .as_ref()
                .and_then(|r| r.requests.as_ref())
                .is_some_and(|r| r.contains_key("storage")),
            "{file}: a claim without a storage request is ignored"
        );
        let annotations = pvc.metadata.annotations.clone().unwrap_or_default();
        for (k, v) in &annotations {
            let Some(short) = k.strip_prefix("trident.netapp.io/") else {
                continue;
            };
            assert!(
                TRIDENT_PVC_ANNOTATIONS.contains(&short),
                "{file}: unknown annotation {k}"
            );
            seen.insert(short.to_string());
            match short {
                "protocol" => assert!(storch::model::Protocol::parse(v).is_some(), "{file}: {k}"),
                "reclaimPolicy" => assert!(["Retain", "Delete"].contains(&v.as_str())),
                "snapshotDirectory" | "splitOnClone" => {
                    assert!(["true", "false"].contains(&v.as_str()))
                }
                "cloneFromPVC" => {
                    let (_, source) = claims
                        .get(v)
                        .unwrap_or_else(|| panic!("{file}: no PVC {v}"));
                    assert_eq!(
                        source.metadata.namespace, pvc.metadata.namespace,
                        "{file}: same namespace"
                    );
                    assert_eq!(
                        source.spec.as_ref().unwrap().storage_class_name.as_deref(),
                        Some(class)
                    );
                }
                _ => {}
            }
        }
        if name == "annotated" {
            let all: BTreeSet<&str> = annotations
                .keys()
                .filter_map(|k| k.strip_prefix("trident.netapp.io/"))
                .collect();
            let want: BTreeSet<&str> = TRIDENT_PVC_ANNOTATIONS
                .iter()
                .copied()
                .filter(|a| *a != "cloneFromPVC")
                .collect();
            assert_eq!(all, want, "{file}: every annotation but cloneFromPVC");
        }
    }
    assert_eq!(
        seen.len(),
        TRIDENT_PVC_ANNOTATIONS.len(),
        "every annotation is shown: {seen:?}"
    );
    assert_eq!(
        claims["basic"]
            .1
            .spec
            .as_ref()
            .unwrap()
            .access_modes
            .as_deref(),
        Some(&["ReadWriteOnce".to_string()][..])
    );
}

// ---------------------------------------------------------------------------------------------
// The Helm chart

fn chart_dir() -> PathBuf {
    repo().join("deploy/helm/storch")
}

fn default_values() -> Value {
    let text = std::fs::read_to_string(chart_dir().join("values.yaml")).unwrap();
    serde_saphyr::from_str(&text).unwrap()
}

/// Helm's merge of `--set`/`-f` values: maps merge key by key, anything else is replaced.
fn merge(base: &mut Value, over: &Value) {
    match (base, over) {
        (Value::Object(b), Value::Object(o)) => {
            for (k, v) in o {
                merge(b.entry(k.clone()).or_insert(Value::Null), v);
            }
        }
        (b, o) => *b = o.clone(),
    }
}

/// Renders the chart as `helm template storch --namespace storch` would, with `overrides`
/// merged into the default values. Returns the rendered files (NOTES.txt included).
fn render(overrides: Value) -> Result<BTreeMap<String, String>, String> {
    let mut values = default_values();
    merge(&mut values, &overrides);
    let chart_yaml: Value =
        serde_saphyr::from_str(&std::fs::read_to_string(chart_dir().join("Chart.yaml")).unwrap())
            .unwrap();
    // Helm's .Chart fields are Chart.yaml's keys, capitalised (name → .Chart.Name).
    let chart: serde_json::Map<String, Value> = chart_yaml
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| {
            let mut c = k.chars();
            let first = c.next().unwrap().to_ascii_uppercase();
            (format!("{first}{}", c.as_str()), v.clone())
        })
        .collect();
    let root = json!({
        "Values": values,
        "Chart": chart,
        "Release": {"Name": "storch", "Namespace": "storch", "Service": "Helm",
                    "IsInstall": true, "IsUpgrade": false, "Revision": 1},
    });
    let mut sources = BTreeMap::new();
    for entry in std::fs::read_dir(chart_dir().join("templates")).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        sources.insert(name, std::fs::read_to_string(&path).unwrap());
    }
    let templates = gotmpl::Templates::parse(&sources)?;
    let (out, missing) = templates.render_all(&root)?;
    if !missing.is_empty() {
        return Err(format!(
            "templates read values that values.yaml does not have: {missing:?}"
        ));
    }
    Ok(out)
}

fn rendered_objects(files: &BTreeMap<String, String>) -> Vec<Object> {
    files
        .iter()
        .filter(|(name, _)| name.ends_with(".yaml"))
        .flat_map(|(name, text)| objects_in(text, &format!("templates/{name}")))
        .collect()
}

fn container_args(objects: &[Object]) -> Vec<String> {
    let d = one!(objects, Deployment, "Deployment");
    d.spec
        .as_ref()
        .unwrap()
        .template
        .spec
        .as_ref()
        .unwrap()
        .containers[0]
        .args
        .clone()
        .unwrap()
}

#[test]
fn helm_chart_renders_the_same_install_as_the_plain_manifests() {
    let files = render(json!({})).unwrap_or_else(|e| panic!("{e}"));
    for (name, text) in &files {
        assert!(!text.contains("<no value>"), "{name}: <no value>");
    }
    assert!(files["NOTES.txt"].contains("netapp.io/trident"));
    let objects = rendered_objects(&files);
    let install = check_install(&objects, "storch", "helm chart");

    // The same kinds as deploy/ (the namespace is the release's: helm --create-namespace).
    let kinds = |objects: &[Object]| -> Vec<String> {
        let mut k: Vec<String> = objects
            .iter()
            .map(|o| format!("{o:?}").split('(').next().unwrap().to_string())
            .collect();
        k.sort();
        k
    };
    let plain = plain_objects();
    let mut plain_kinds = kinds(&plain);
    plain_kinds.retain(|k| k != "Namespace");
    assert_eq!(kinds(&objects), plain_kinds);

    // The same container, but for the explicit provisioner and lease flags.
    let plain_args = container_args(&plain);
    let extra: Vec<&String> = install
        .args
        .iter()
        .filter(|a| !plain_args.contains(a))
        .collect();
    assert_eq!(
        extra,
        [
            "--k8s-provisioner=netapp.io/trident",
            "--k8s-provisioner=storch.io/storch",
            "--k8s-lease-name=storch-leader",
            "--k8s-lease-duration=15s",
        ]
    );
    assert!(plain_args.iter().all(|a| install.args.contains(a)));
    let pod = |o: &[Object]| {
        let d = one!(o, Deployment, "Deployment");
        let mut pod = d.spec.as_ref().unwrap().template.spec.clone().unwrap();
        pod.containers[0].args = None;
        pod.volumes.as_mut().unwrap().iter_mut().for_each(|v| {
            if let Some(p) = v.persistent_volume_claim.as_mut() {
                p.claim_name = String::new();
            }
        });
        pod
    };
    assert_eq!(
        pod(&objects),
        pod(&plain),
        "the chart's pod spec drifted from deploy/50-deployment.yaml"
    );
    let image = pod(&objects).containers[0].image.clone().unwrap();
    assert_eq!(image, "storch:0.1.0");

    let spec = service_of(&objects);
    assert_eq!(spec.type_.as_deref(), Some("ClusterIP"));
    assert_eq!(spec.ports.as_ref().unwrap()[0].port, 8000);
    assert_eq!(pvc_of(&objects).storage_class_name, None);
}

/// Values for the replicated install: two etcd members and the shared key's Secret.
fn replicated_values() -> Value {
    json!({"etcd": {
        "endpoints": ["http://etcd-0.etcd:2379", "http://etcd-1.etcd:2379"],
        "secretsKeySecret": "storch-secrets-key",
    }})
}

fn statefulset_of(objects: &[Object]) -> &apps::StatefulSetSpec {
    one!(objects, StatefulSet, "StatefulSet")
        .spec
        .as_ref()
        .unwrap()
}

#[test]
fn helm_chart_with_etcd_endpoints_renders_replicated_instances() {
    let files = render(replicated_values()).unwrap_or_else(|e| panic!("{e}"));
    for (name, text) in &files {
        assert!(!text.contains("<no value>"), "{name}: <no value>");
    }
    let objects = rendered_objects(&files);
    // check_install: no Deployment or shared PVC, Parallel, one claim template per
    // instance for the data dir, the key from a read-only Secret mount, readiness on
    // `/readyz?standby=ok`, the Service on the leader, a headless Service, pods get/patch in
    // the Role (and nothing more anywhere), the binary starting with these args on a real etcd.
    let install = check_install(&objects, "storch", "helm chart with etcd");

    let spec = statefulset_of(&objects);
    assert_eq!(spec.replicas, Some(2), "two instances by default");
    assert_eq!(spec.service_name.as_deref(), Some("storch-headless"));
    let claim = &spec.volume_claim_templates.as_ref().unwrap()[0];
    assert_eq!(claim.metadata.name.as_deref(), Some("data"));
    let claim_spec = claim.spec.as_ref().unwrap();
    assert_eq!(claim_spec.storage_class_name, None);
    assert_eq!(
        claim_spec
            .resources
            .as_ref()
            .unwrap()
            .requests
            .as_ref()
            .unwrap()["storage"]
            .0,
        "2Gi"
    );

    let args = &install.args;
    for (flag, want) in [
        (
            "--etcd-endpoints",
            "http://etcd-0.etcd:2379,http://etcd-1.etcd:2379",
        ),
        ("--etcd-prefix", "/storch"),
        ("--etcd-lease-ttl", "10s"),
        ("--secrets-key-file", "/etc/storch/secrets-key/secret.key"),
        ("--data-dir", "/var/lib/storch"),
    ] {
        assert_eq!(flag_value(args, flag), Some(want), "{flag} in {args:?}");
    }
    assert!(
        flag_value(args, "--etcd-identity").is_none(),
        "the identity is the pod name (STORCH_POD_NAME)"
    );

    // The shared key: the Secret's `secret.key`, read-only, where --secrets-key-file points.
    let pod = install.pod();
    let key_volume = pod
        .volumes
        .iter()
        .flatten()
        .find(|v| v.name == "secrets-key")
        .and_then(|v| v.secret.as_ref())
        .expect("the secrets key volume");
    assert_eq!(
        key_volume.secret_name.as_deref(),
        Some("storch-secrets-key")
    );
    let items = key_volume.items.as_deref().unwrap_or_default();
    assert_eq!(
        items
            .iter()
            .map(|i| (i.key.as_str(), i.path.as_str()))
            .collect::<Vec<_>>(),
        [("secret.key", "secret.key")]
    );
    let c = &pod.containers[0];
    let mount = c
        .volume_mounts
        .iter()
        .flatten()
        .find(|m| m.name == "secrets-key")
        .unwrap();
    assert_eq!(
        (mount.mount_path.as_str(), mount.read_only),
        ("/etc/storch/secrets-key", Some(true))
    );
    assert_eq!(
        c.liveness_probe
            .as_ref()
            .unwrap()
            .http_get
            .as_ref()
            .unwrap()
            .path
            .as_deref(),
        Some("/livez"),
        "liveness does not change"
    );

    // The Service: the chart's selector labels and the leader's role.
    let selector = service_of(&objects).selector.clone().unwrap();
    assert_eq!(
        selector,
        BTreeMap::from([
            ("app.kubernetes.io/name".to_string(), "storch".to_string()),
            (
                "app.kubernetes.io/instance".to_string(),
                "storch".to_string()
            ),
            ("storch.io/role".to_string(), "leader".to_string()),
        ])
    );

    // Instances prefer different nodes, unless `affinity` says otherwise.
    let spread = pod
        .affinity
        .as_ref()
        .and_then(|a| a.pod_anti_affinity.as_ref())
        .and_then(|a| {
            a.preferred_during_scheduling_ignored_during_execution
                .as_deref()
        })
        .expect("a preferred pod anti-affinity");
    let term = &spread[0].pod_affinity_term;
    assert_eq!(term.topology_key, "kubernetes.io/hostname");
    assert_eq!(
        term.label_selector.as_ref().unwrap().match_labels.as_ref(),
        Some(
            &selector
                .iter()
                .filter(|(k, _)| *k != "storch.io/role")
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        )
    );

    // The rest of the pod is the single instance's.
    let single = rendered_objects(&render(json!({})).unwrap());
    let single = check_install(&single, "storch", "helm chart");
    let normalized = |pod: &core::PodSpec| {
        let mut pod = pod.clone();
        let c = &mut pod.containers[0];
        c.args = None;
        c.readiness_probe
            .as_mut()
            .unwrap()
            .http_get
            .as_mut()
            .unwrap()
            .path = None;
        c.volume_mounts
            .as_mut()
            .unwrap()
            .retain(|m| m.name != "secrets-key");
        pod.volumes
            .as_mut()
            .unwrap()
            .retain(|v| v.name != "secrets-key" && v.name != "data");
        pod.affinity = None;
        pod
    };
    assert_eq!(normalized(pod), normalized(single.pod()));
    let single_args: Vec<&String> = single.args.iter().collect();
    let etcd_args: Vec<&String> = args.iter().filter(|a| !single_args.contains(a)).collect();
    assert_eq!(
        etcd_args.len(),
        4,
        "only the etcd flags are added: {etcd_args:?}"
    );
}

#[test]
fn helm_chart_with_etcd_endpoints_takes_its_values() {
    let mut values = replicated_values();
    merge(
        &mut values,
        &json!({
            // One endpoint as a plain string, as `--set etcd.endpoints=URL` gives it.
            "etcd": {"endpoints": "http://etcd.db:2379", "prefix": "/prod/storch", "leaseTTL": "20s",
                     "secretsKeySecret": "my-key"},
            "replicas": 3,
            "persistence": {"size": "10Gi", "storageClassName": "fast-ssd"},
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [
                    {"key": "storage", "operator": "Exists"}]}]}}},
            "extraArgs": ["--port=8000"],
        }),
    );
    let objects = rendered_objects(&render(values).unwrap_or_else(|e| panic!("{e}")));
    let install = check_install(&objects, "storch", "helm chart with etcd and overrides");
    let spec = statefulset_of(&objects);
    assert_eq!(spec.replicas, Some(3));
    let claim = spec.volume_claim_templates.as_ref().unwrap()[0]
        .spec
        .as_ref()
        .unwrap();
    assert_eq!(claim.storage_class_name.as_deref(), Some("fast-ssd"));
    assert_eq!(
        claim.resources.as_ref().unwrap().requests.as_ref().unwrap()["storage"].0,
        "10Gi"
    );
    let args = &install.args;
    assert_eq!(
        flag_value(args, "--etcd-endpoints"),
        Some("http://etcd.db:2379")
    );
    assert_eq!(flag_value(args, "--etcd-prefix"), Some("/prod/storch"));
    assert_eq!(flag_value(args, "--etcd-lease-ttl"), Some("20s"));
    assert_eq!(args.last().map(String::as_str), Some("--port=8000"));
    let affinity = install.pod().affinity.as_ref().unwrap();
    assert!(
        affinity.node_affinity.is_some() && affinity.pod_anti_affinity.is_none(),
        "the given affinity replaces the default spread"
    );
    let secrets = secret_volumes(install.pod());
    assert_eq!(
        secrets,
        BTreeSet::from(["storch-tls", "storch-token", "my-key"])
    );
}

#[test]
fn helm_chart_refuses_bad_replication_values_naming_them() {
    let with = |over: Value| {
        let mut values = replicated_values();
        merge(&mut values, &over);
        render(values)
    };
    for over in [
        json!({"etcd": {"secretsKeySecret": ""}}),
        json!({"etcd": {"secretsKeySecret": null}}),
    ] {
        let err = with(over).unwrap_err();
        assert!(
            err.contains("etcd.secretsKeySecret is required with etcd.endpoints")
                && err.contains("secret.key"),
            "{err}"
        );
    }
    for replicas in [json!(0), json!(-1), json!("two")] {
        let err = with(json!({"replicas": replicas})).unwrap_err();
        assert!(
            err.contains("replicas must be a whole number of at least 1"),
            "{err}"
        );
    }
    let err = with(json!({"etcd": {"prefix": ""}})).unwrap_err();
    assert!(err.contains("etcd.prefix is required"), "{err}");
    let err = with(json!({"etcd": {"leaseTTL": ""}})).unwrap_err();
    assert!(err.contains("etcd.leaseTTL is required"), "{err}");
    // One replica of a replicated storch is allowed (etcd still fences it).
    let objects = rendered_objects(&with(json!({"replicas": 1})).unwrap());
    assert_eq!(statefulset_of(&objects).replicas, Some(1));

    // Without etcd, several replicas would share one log: refused; 1 is the single one.
    let err = render(json!({"replicas": 3})).unwrap_err();
    assert!(
        err.contains("replicas is set, but without etcd.endpoints storch runs as one instance"),
        "{err}"
    );
    let objects = rendered_objects(&render(json!({"replicas": 1})).unwrap());
    check_install(&objects, "storch", "helm chart with replicas 1");
}

#[test]
fn helm_chart_requires_the_secrets() {
    let err = render(json!({"tls": {"secretName": ""}})).unwrap_err();
    assert!(err.contains("tls.secretName is required"), "{err}");
    let err = render(json!({"auth": {"tokenSecretName": null}})).unwrap_err();
    assert!(err.contains("auth.tokenSecretName is required"), "{err}");
}

#[test]
fn helm_chart_values_reach_the_objects() {
    let files = render(json!({
        "image": {"repository": "registry.example.com/storch", "tag": "0.1.0-rc1", "pullPolicy": "Always"},
        "provisioners": ["netapp.io/trident", "storch.io/storch", "example.com/gold"],
        "logFormat": "text",
        "tls": {"secretName": "my-tls"},
        "auth": {"tokenSecretName": "my-token"},
        "persistence": {"size": "10Gi", "storageClassName": "fast-ssd"},
        "service": {"type": "NodePort", "port": 443},
        "lease": {"name": "my-lease", "duration": "30s"},
        "resources": {"requests": {"cpu": "250m", "memory": "256Mi"}, "limits": {"memory": "1Gi"}},
        "nodeSelector": {"kubernetes.io/os": "linux", "node-role.kubernetes.io/storage": ""},
        "tolerations": [{"key": "storage", "operator": "Exists", "effect": "NoSchedule"}],
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [
                {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64", "arm64"]}]}]}}},
        "extraArgs": ["--port=8000"],
    }))
    .unwrap_or_else(|e| panic!("{e}"));
    let objects = rendered_objects(&files);
    let install = check_install(&objects, "storch", "helm chart with overrides");
    let args = &install.args;
    for want in [
        "--k8s-provisioner=netapp.io/trident",
        "--k8s-provisioner=storch.io/storch",
        "--k8s-provisioner=example.com/gold",
        "--log-format=text",
        "--k8s-lease-name=my-lease",
        "--k8s-lease-duration=30s",
        "--port=8000",
    ] {
        assert!(args.contains(&want.to_string()), "{want} not in {args:?}");
    }
    assert_eq!(
        args.last().map(String::as_str),
        Some("--port=8000"),
        "extraArgs come last"
    );
    let pod = install.pod();
    let c = &pod.containers[0];
    assert_eq!(
        c.image.as_deref(),
        Some("registry.example.com/storch:0.1.0-rc1")
    );
    assert_eq!(c.image_pull_policy.as_deref(), Some("Always"));
    let res = c.resources.as_ref().unwrap();
    assert_eq!(res.requests.as_ref().unwrap()["cpu"].0, "250m");
    assert_eq!(res.limits.as_ref().unwrap()["memory"].0, "1Gi");
    // Values merge key by key, as in Helm: the default cpu limit stays.
    assert_eq!(res.limits.as_ref().unwrap()["cpu"].0, "1");
    let ns = pod.node_selector.as_ref().unwrap();
    assert_eq!(ns["kubernetes.io/os"], "linux");
    assert_eq!(ns["node-role.kubernetes.io/storage"], "");
    let t = &pod.tolerations.as_ref().unwrap()[0];
    assert_eq!(
        (t.key.as_deref(), t.operator.as_deref()),
        (Some("storage"), Some("Exists"))
    );
    let terms = &pod
        .affinity
        .as_ref()
        .unwrap()
        .node_affinity
        .as_ref()
        .unwrap()
        .required_during_scheduling_ignored_during_execution
        .as_ref()
        .unwrap()
        .node_selector_terms;
    assert_eq!(
        terms[0].match_expressions.as_ref().unwrap()[0]
            .values
            .as_ref()
            .unwrap(),
        &["amd64", "arm64"]
    );
    let secrets = secret_volumes(pod);
    assert_eq!(secrets, BTreeSet::from(["my-tls", "my-token"]));

    let pvc = pvc_of(&objects);
    assert_eq!(pvc.storage_class_name.as_deref(), Some("fast-ssd"));
    assert_eq!(
        pvc.resources.as_ref().unwrap().requests.as_ref().unwrap()["storage"].0,
        "10Gi"
    );
    let svc = service_of(&objects);
    assert_eq!(svc.type_.as_deref(), Some("NodePort"));
    assert_eq!(svc.ports.as_ref().unwrap()[0].port, 443);
}

#[test]
fn helm_chart_names_cluster_objects_per_release_namespace() {
    let objects = rendered_objects(&render(json!({})).unwrap());
    let cr = one!(&objects, ClusterRole, "ClusterRole");
    assert_eq!(cr.metadata.name.as_deref(), Some("storch-storch"));
    let labels = cr.metadata.labels.as_ref().unwrap();
    assert_eq!(labels["app.kubernetes.io/managed-by"], "Helm");
    assert_eq!(labels["helm.sh/chart"], "storch-0.1.0");
    assert_eq!(labels["app.kubernetes.io/version"], "0.1.0");
}

// ---------------------------------------------------------------------------------------------
// Dockerfile and README

#[test]
fn dockerfile_builds_the_binary_and_runs_it_unprivileged() {
    let text = std::fs::read_to_string(repo().join("deploy/Dockerfile")).unwrap();
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.starts_with('#'))
        .collect();
    let froms: Vec<&str> = lines
        .iter()
        .filter(|l| l.starts_with("FROM "))
        .copied()
        .collect();
    assert_eq!(
        froms,
        [
            "FROM rust:1.95-bookworm AS build",
            "FROM debian:bookworm-slim"
        ]
    );
    assert!(text.contains("cargo build --release --locked --bin storch"));
    assert!(text.contains("ca-certificates"));
    assert!(lines.contains(&"USER 65532:65532"));
    assert!(lines.contains(&r#"ENTRYPOINT ["/usr/local/bin/storch"]"#));
    assert!(lines.contains(&r#"CMD ["serve", "--in-cluster"]"#));
    // Everything the build stage copies exists, and is enough for `cargo build` (every
    // directory a declared target lives in).
    for l in lines
        .iter()
        .filter(|l| l.starts_with("COPY ") && !l.contains("--from="))
    {
        let parts: Vec<&str> = l.split_whitespace().collect();
        for src in &parts[1..parts.len() - 1] {
            assert!(
                repo().join(src).exists(),
                "COPY {src}: not in the repository"
            );
        }
    }
    for needed in ["Cargo.toml", "Cargo.lock", "src", "benches"] {
        assert!(
            lines
                .iter()
                .any(|l| l.starts_with("COPY ") && l.split_whitespace().any(|w| w == needed)),
            "the Dockerfile does not copy {needed}"
        );
    }
}

/// Every leaf of values.yaml, as `a.b.c`.
fn value_paths(v: &Value, prefix: &str, out: &mut Vec<String>) {
    match v {
        Value::Object(m) if !m.is_empty() && prefix != "resources" => {
            for (k, v) in m {
                let p = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                value_paths(v, &p, out);
            }
        }
        _ => out.push(prefix.to_string()),
    }
}

#[test]
fn readme_documents_every_value() {
    let readme = std::fs::read_to_string(repo().join("deploy/README.md")).unwrap();
    let mut paths = Vec::new();
    value_paths(&default_values(), "", &mut paths);
    for p in paths {
        assert!(
            readme.contains(&format!("`{p}`")),
            "deploy/README.md does not describe `{p}`"
        );
    }
    for needle in [
        "create secret tls storch-tls",
        "create secret generic storch-token --from-file=token=",
        "create secret generic storch-secrets-key --from-file=secret.key",
        "/readyz?standby=ok",
        "helm install",
        "kubectl apply -f deploy/",
    ] {
        assert!(
            readme.contains(needle),
            "deploy/README.md does not mention {needle:?}"
        );
    }
}

#[test]
fn strict_parsing_catches_misspelled_fields_and_unknown_kinds() {
    let parse = |yaml: &str| {
        let yaml = yaml.to_string();
        std::panic::catch_unwind(move || objects_in(&yaml, "inline").len())
    };
    let good = "apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: a\n  namespace: b\n";
    assert_eq!(parse(good).ok(), Some(1));
    assert_eq!(parse(&format!("# c\n---\n{good}---\n{good}")).ok(), Some(2));
    for bad in [
        "apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: a\n  namespce: b\n",
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: a}\nspec:\n  replica: 1\n  selector: {}\n  template: {}\n",
        "apiVersion: v1\nkind: Service\nmetadata: {name: a}\nspec:\n  ports: [{port: \"x\"}]\n",
        "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\n",
        "apiVersion: v2\nkind: ServiceAccount\nmetadata: {name: a}\n",
    ] {
        assert!(parse(bad).is_err(), "accepted:\n{bad}");
    }
}

// ---------------------------------------------------------------------------------------------
// The renderer itself

#[test]
fn renderer_follows_go_template_semantics() {
    let render1 = |src: &str, dot: Value| -> Result<String, String> {
        let t = gotmpl::Templates::parse(&BTreeMap::from([("t".to_string(), src.to_string())]))?;
        Ok(t.render_all(&dot)?.0.remove("t").unwrap())
    };
    let v = json!({"a": "x", "n": 0, "list": ["p", "q"], "map": {"k": "v", "b": 2}, "empty": [], "s": "a\"b"});
    let cases: &[(&str, &str)] = &[
        ("a {{ .a }} b", "a x b"),
        ("a\n  {{- .a -}}\n  b", "axb"),
        ("{{ if .n }}yes{{ else }}no{{ end }}", "no"),
        (
            "{{ if .empty }}1{{ else if .list }}2{{ else }}3{{ end }}",
            "2",
        ),
        ("{{ range .list }}[{{ . }}]{{ end }}", "[p][q]"),
        ("{{ range .empty }}x{{ else }}none{{ end }}", "none"),
        (
            "{{ with .map }}{{ .k }}{{ end }}{{ with .missing }}x{{ end }}",
            "v",
        ),
        ("{{ range .list }}{{ $.a }}{{ end }}", "xx"),
        (
            "{{ .s | quote }} {{ 5 | quote }} {{ quote .missing }}",
            r#""a\"b" "5" "#,
        ),
        (
            "{{ .missing | default \"d\" }} {{ .a | default \"d\" }} {{ default 3 .n }}",
            "d x 3",
        ),
        ("{{ toYaml .map }}", "b: 2\nk: v"),
        ("x:{{ toYaml .list | nindent 2 }}", "x:\n  - p\n  - q"),
        ("{{ \"a\\nb\" | indent 2 }}", "  a\n  b"),
        ("{{/* a comment */}}c", "c"),
        (
            "{{ define \"h\" }}<{{ .a }}>{{ end }}{{ include \"h\" . }}{{ include \"h\" (.map) }}",
            "<x><>",
        ),
        ("{{ toYaml (dict) }}", ""),
        (
            "{{ kindIs \"invalid\" .missing }} {{ kindIs \"invalid\" .n }} {{ kindIs \"slice\" .list }}",
            "true false true",
        ),
        ("{{ if not .n }}0{{ end }}{{ if not .a }}x{{ end }}", "0"),
        (
            "{{ int 2.7 }} {{ int \"3\" }} {{ int \"x\" }} {{ int .missing }}",
            "2 3 0 0",
        ),
        (
            "{{ lt (int .n) 1 }} {{ lt 2 1 }} {{ ne 1 1 }} {{ ne .a \"y\" }}",
            "true false false true",
        ),
        (
            "{{ join \",\" .list }} {{ join \",\" .a }} {{ join \",\" .empty }}.",
            "p,q x .",
        ),
    ];
    for (src, want) in cases {
        if src.contains("dict") {
            assert!(render1(src, v.clone()).unwrap_err().contains("dict"));
            continue;
        }
        assert_eq!(render1(src, v.clone()).as_deref(), Ok(*want), "{src}");
    }
    assert_eq!(
        render1("{{ required \"need x\" .x }}", v.clone()).unwrap_err(),
        "t: need x"
    );
    assert_eq!(
        render1("{{ fail \"no\" }}", v.clone()).unwrap_err(),
        "t: no"
    );
    for (src, why) in [
        ("{{ .missing.deeper }}", "nil pointer evaluating"),
        ("{{ if .a }}", "unclosed if"),
        ("{{ lt .a 1 }}", "lt of a string"),
        ("{{ int .list }}", "int of a list"),
        ("{{ kindIs \"int\" .n }}", "numeric kinds"),
        ("{{ .list }}", "a list is not printed"),
    ] {
        assert!(render1(src, v.clone()).is_err(), "{why}: {src}");
    }
}

/// The smallest Go text/template renderer that covers what the chart uses: text with `{{- -}}`
/// trimming and comments; `if`/`else if`/`else`, `with`/`else`, `range`/`else` (over lists
/// and maps, dot = element); `define` + `include`; pipelines with `.Field.Chains`, `$`,
/// string/number/bool literals and parenthesised sub-pipelines; and the sprig/Helm functions
/// `toYaml`, `nindent`, `indent`, `quote`, `default`, `required`, `fail`, `not`, `int`, `lt`,
/// `ne` (integers; `ne` also strings), `join` (sprig's, a list or one value) and `kindIs` (not
/// for numbers). Anything else is an
/// error, so the chart cannot drift out of this subset unnoticed. Values are JSON values
/// (as Helm's are: YAML decoded into Go's interface{}); a missing map key is nil, printed as
/// "" (Helm), and a field of nil is an error (Go).
mod gotmpl {
    use serde_json::Value;
    use std::cell::RefCell;
    use std::collections::{BTreeMap, BTreeSet};

    #[derive(Debug, Clone)]
    enum Arg {
        Field { dollar: bool, path: Vec<String> },
        Lit(Value),
        Func(String),
        Sub(Vec<Vec<Arg>>),
    }
    type Pipe = Vec<Vec<Arg>>;

    #[derive(Debug)]
    enum Node {
        Text(String),
        Out(Pipe),
        If(Vec<(Pipe, Vec<Node>)>, Vec<Node>),
        With(Pipe, Vec<Node>, Vec<Node>),
        Range(Pipe, Vec<Node>, Vec<Node>),
    }

    enum Item {
        Text(String),
        Action(String),
    }

    enum Stop {
        Eof,
        End,
        Else(Option<Pipe>),
    }

    pub struct Templates {
        files: BTreeMap<String, Vec<Node>>,
        defines: BTreeMap<String, Vec<Node>>,
    }

    /// Splits a template into text and actions, applying `{{- ` and ` -}}` trimming and
    /// dropping comments.
    fn lex(src: &str) -> Result<Vec<Item>, String> {
        let mut items = Vec::new();
        let mut rest = src;
        let mut trim_next = false;
        loop {
            let Some(open) = rest.find("{{") else {
                let text = if trim_next { rest.trim_start() } else { rest };
                items.push(Item::Text(text.to_string()));
                return Ok(items);
            };
            let mut text = &rest[..open];
            if trim_next {
                text = text.trim_start();
            }
            let mut after = &rest[open + 2..];
            if after.starts_with('-') && after[1..].starts_with(char::is_whitespace) {
                text = text.trim_end();
                after = &after[1..];
            }
            items.push(Item::Text(text.to_string()));
            let close = find_close(after).ok_or("unclosed action")?;
            let mut inner = &after[..close];
            trim_next = false;
            if inner.ends_with('-') && inner[..inner.len() - 1].ends_with(char::is_whitespace) {
                inner = &inner[..inner.len() - 1];
                trim_next = true;
            }
            let inner = inner.trim();
            if !(inner.starts_with("/*") && inner.ends_with("*/")) {
                items.push(Item::Action(inner.to_string()));
            }
            rest = &after[close + 2..];
        }
    }

    /// The offset of the `}}` that closes an action, skipping string literals.
    fn find_close(s: &str) -> Option<usize> {
        let b = s.as_bytes();
        let mut i = 0;
        while i < b.len() {
            match b[i] {
                b'"' => {
                    i += 1;
                    while i < b.len() && b[i] != b'"' {
                        i += if b[i] == b'\\' { 2 } else { 1 };
                    }
                }
                b'`' => {
                    i += 1;
                    while i < b.len() && b[i] != b'`' {
                        i += 1;
                    }
                }
                b'}' if b.get(i + 1) == Some(&b'}') => return Some(i),
                _ => {}
            }
            i += 1;
        }
        None
    }

    #[derive(Debug, Clone, PartialEq)]
    enum Tok {
        Bar,
        Open,
        Close,
        Str(String),
        Word(String),
    }

    fn tokens(s: &str) -> Result<Vec<Tok>, String> {
        let mut out = Vec::new();
        let mut chars = s.chars().peekable();
        while let Some(&c) = chars.peek() {
            match c {
                c if c.is_whitespace() => {
                    chars.next();
                }
                '|' => {
                    chars.next();
                    out.push(Tok::Bar);
                }
                '(' => {
                    chars.next();
                    out.push(Tok::Open);
                }
                ')' => {
                    chars.next();
                    out.push(Tok::Close);
                }
                '"' => {
                    // Go's interpreted string literal: the escapes a chart needs.
                    chars.next();
                    let mut lit = String::new();
                    loop {
                        match chars.next().ok_or("unterminated string")? {
                            '"' => break,
                            '\\' => match chars.next().ok_or("unterminated string")? {
                                'n' => lit.push('\n'),
                                't' => lit.push('\t'),
                                '\\' => lit.push('\\'),
                                '"' => lit.push('"'),
                                e => return Err(format!("unsupported escape \\{e}")),
                            },
                            c => lit.push(c),
                        }
                    }
                    out.push(Tok::Str(lit));
                }
                '`' => {
                    chars.next();
                    let lit: String = chars.by_ref().take_while(|&c| c != '`').collect();
                    out.push(Tok::Str(lit));
                }
                _ => {
                    let mut w = String::new();
                    while let Some(&c) = chars.peek() {
                        if c.is_whitespace() || "|()\"`".contains(c) {
                            break;
                        }
                        w.push(c);
                        chars.next();
                    }
                    out.push(Tok::Word(w));
                }
            }
        }
        Ok(out)
    }

    fn parse_pipe(toks: &[Tok], pos: &mut usize) -> Result<Pipe, String> {
        let mut pipe = vec![parse_cmd(toks, pos)?];
        while toks.get(*pos) == Some(&Tok::Bar) {
            *pos += 1;
            pipe.push(parse_cmd(toks, pos)?);
        }
        Ok(pipe)
    }

    fn parse_cmd(toks: &[Tok], pos: &mut usize) -> Result<Vec<Arg>, String> {
        let mut cmd = Vec::new();
        while let Some(t) = toks.get(*pos) {
            *pos += 1;
            cmd.push(match t {
                Tok::Bar | Tok::Close => {
                    *pos -= 1;
                    break;
                }
                Tok::Open => {
                    let sub = parse_pipe(toks, pos)?;
                    if toks.get(*pos) != Some(&Tok::Close) {
                        return Err("missing )".into());
                    }
                    *pos += 1;
                    Arg::Sub(sub)
                }
                Tok::Str(s) => Arg::Lit(Value::String(s.clone())),
                Tok::Word(w) => word(w)?,
            });
        }
        if cmd.is_empty() {
            return Err("empty command".into());
        }
        Ok(cmd)
    }

    fn word(w: &str) -> Result<Arg, String> {
        let fields = |s: &str| -> Vec<String> {
            s.split('.')
                .filter(|p| !p.is_empty())
                .map(str::to_string)
                .collect()
        };
        Ok(match w {
            "true" => Arg::Lit(Value::Bool(true)),
            "false" => Arg::Lit(Value::Bool(false)),
            "nil" => Arg::Lit(Value::Null),
            _ if w.starts_with('.') => Arg::Field {
                dollar: false,
                path: fields(w),
            },
            _ if w == "$" || w.starts_with("$.") => Arg::Field {
                dollar: true,
                path: fields(&w[1..]),
            },
            _ if w.starts_with('$') => return Err(format!("variables are not supported: {w}")),
            _ if w.starts_with(|c: char| c.is_ascii_digit() || c == '-') => {
                Arg::Lit(serde_json::from_str(w).map_err(|_| format!("bad number {w}"))?)
            }
            _ if w.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') => {
                Arg::Func(w.to_string())
            }
            _ => return Err(format!("bad word {w:?}")),
        })
    }

    fn pipe_of(s: &str) -> Result<Pipe, String> {
        let toks = tokens(s)?;
        let mut pos = 0;
        let pipe = parse_pipe(&toks, &mut pos)?;
        if pos != toks.len() {
            return Err(format!("unexpected {:?} in {s:?}", toks[pos]));
        }
        Ok(pipe)
    }

    struct Parser<'a> {
        items: std::slice::Iter<'a, Item>,
        defines: &'a mut BTreeMap<String, Vec<Node>>,
    }

    impl Parser<'_> {
        fn list(&mut self) -> Result<(Vec<Node>, Stop), String> {
            let mut nodes = Vec::new();
            while let Some(item) = self.items.next() {
                let a = match item {
                    Item::Text(t) => {
                        nodes.push(Node::Text(t.clone()));
                        continue;
                    }
                    Item::Action(a) => a.as_str(),
                };
                let (kw, rest) = a.split_once(char::is_whitespace).unwrap_or((a, ""));
                match kw {
                    "end" => return Ok((nodes, Stop::End)),
                    "else" if rest.is_empty() => return Ok((nodes, Stop::Else(None))),
                    "else" => {
                        let cond = rest
                            .strip_prefix("if ")
                            .ok_or(format!("unsupported {a:?}"))?;
                        return Ok((nodes, Stop::Else(Some(pipe_of(cond)?))));
                    }
                    "if" => {
                        let mut branches = Vec::new();
                        let mut cond = pipe_of(rest)?;
                        loop {
                            let (body, end) = self.list()?;
                            branches.push((cond, body));
                            match end {
                                Stop::Else(Some(c)) => cond = c,
                                Stop::Else(None) => {
                                    let otherwise = self.closed()?;
                                    nodes.push(Node::If(branches, otherwise));
                                    break;
                                }
                                Stop::End => {
                                    nodes.push(Node::If(branches, Vec::new()));
                                    break;
                                }
                                Stop::Eof => return Err("unclosed if".into()),
                            }
                        }
                    }
                    "with" | "range" => {
                        let p = pipe_of(rest)?;
                        let (body, end) = self.list()?;
                        let otherwise = match end {
                            Stop::End => Vec::new(),
                            Stop::Else(None) => self.closed()?,
                            Stop::Else(Some(_)) => return Err(format!("else if in {kw}")),
                            Stop::Eof => return Err(format!("unclosed {kw}")),
                        };
                        nodes.push(if kw == "with" {
                            Node::With(p, body, otherwise)
                        } else {
                            Node::Range(p, body, otherwise)
                        });
                    }
                    "define" => {
                        let name = match tokens(rest)?.as_slice() {
                            [Tok::Str(name)] => name.clone(),
                            _ => return Err(format!("bad define {rest:?}")),
                        };
                        let body = self.closed()?;
                        self.defines.insert(name, body);
                    }
                    "template" | "block" | "break" | "continue" => {
                        return Err(format!("{kw} is not supported by this renderer"));
                    }
                    _ => nodes.push(Node::Out(pipe_of(a)?)),
                }
            }
            Ok((nodes, Stop::Eof))
        }

        /// A list that must end with `{{ end }}`.
        fn closed(&mut self) -> Result<Vec<Node>, String> {
            match self.list()? {
                (nodes, Stop::End) => Ok(nodes),
                _ => Err("missing {{ end }}".into()),
            }
        }
    }

    fn truthy(v: &Value) -> bool {
        match v {
            Value::Null => false,
            Value::Bool(b) => *b,
            Value::Number(n) => n.as_f64() != Some(0.0),
            Value::String(s) => !s.is_empty(),
            Value::Array(a) => !a.is_empty(),
            Value::Object(m) => !m.is_empty(),
        }
    }

    fn strval(v: &Value) -> Result<String, String> {
        match v {
            Value::String(s) => Ok(s.clone()),
            Value::Number(n) => Ok(n.to_string()),
            Value::Bool(b) => Ok(b.to_string()),
            Value::Null => Ok(String::new()),
            other => Err(format!("cannot print {other} as text")),
        }
    }

    /// sprig's `int` (cast.ToInt): integers as they are, floats truncated, numeric strings
    /// parsed, booleans 0/1, nil and other strings 0; lists and maps are refused (Helm gives
    /// 0; nothing in the chart passes one).
    fn to_int(v: &Value) -> Result<i64, String> {
        Ok(match v {
            Value::Number(n) => n
                .as_i64()
                .unwrap_or_else(|| n.as_f64().unwrap_or(0.0) as i64),
            Value::String(s) => s.trim().parse().unwrap_or(0),
            Value::Bool(b) => i64::from(*b),
            Value::Null => 0,
            other => return Err(format!("int: cannot convert {other}")),
        })
    }

    fn int(v: &Value) -> Result<usize, String> {
        v.as_u64()
            .map(|n| n as usize)
            .ok_or(format!("not a count: {v}"))
    }

    /// YAML for a value, as Helm's toYaml writes it: block style, keys sorted, sequences not
    /// indented under their key, strings quoted when they would not read back as strings.
    fn to_yaml(v: &Value, indent: usize, out: &mut String) {
        let pad = " ".repeat(indent);
        match v {
            Value::Object(m) if !m.is_empty() => {
                let mut keys: Vec<&String> = m.keys().collect();
                keys.sort();
                for k in keys {
                    let v = &m[k];
                    let key = scalar(&Value::String(k.clone()));
                    match v {
                        Value::Object(x) if !x.is_empty() => {
                            out.push_str(&format!("{pad}{key}:\n"));
                            to_yaml(v, indent + 2, out);
                        }
                        Value::Array(x) if !x.is_empty() => {
                            out.push_str(&format!("{pad}{key}:\n"));
                            to_yaml(v, indent, out);
                        }
                        _ => out.push_str(&format!("{pad}{key}: {}\n", scalar(v))),
                    }
                }
            }
            Value::Array(a) if !a.is_empty() => {
                for item in a {
                    let mut sub = String::new();
                    to_yaml(item, indent + 2, &mut sub);
                    out.push_str(&format!("{pad}- {}", &sub[indent + 2..]));
                }
            }
            _ => out.push_str(&format!("{pad}{}\n", scalar(v))),
        }
    }

    fn scalar(v: &Value) -> String {
        match v {
            Value::Object(_) => "{}".into(),
            Value::Array(_) => "[]".into(),
            Value::String(s) => {
                let plain = s.starts_with(|c: char| c.is_ascii_alphabetic() || c == '/')
                    && s.chars()
                        .all(|c| c.is_ascii_alphanumeric() || "-_./".contains(c))
                    && !["true", "false", "yes", "no", "on", "off", "y", "n", "null"]
                        .contains(&s.to_ascii_lowercase().as_str());
                if plain {
                    s.clone()
                } else {
                    Value::String(s.clone()).to_string()
                }
            }
            other => other.to_string(),
        }
    }

    struct Exec<'a> {
        t: &'a Templates,
        root: &'a Value,
        missing: RefCell<BTreeSet<String>>,
    }

    impl Exec<'_> {
        fn nodes(
            &self,
            nodes: &[Node],
            dot: &Value,
            out: &mut String,
            depth: usize,
        ) -> Result<(), String> {
            if depth > 50 {
                return Err("include nested too deeply".into());
            }
            for node in nodes {
                match node {
                    Node::Text(t) => out.push_str(t),
                    Node::Out(p) => out.push_str(&strval(&self.pipe(p, dot, depth)?)?),
                    Node::If(branches, otherwise) => {
                        let mut done = false;
                        for (cond, body) in branches {
                            if truthy(&self.pipe(cond, dot, depth)?) {
                                self.nodes(body, dot, out, depth)?;
                                done = true;
                                break;
                            }
                        }
                        if !done {
                            self.nodes(otherwise, dot, out, depth)?;
                        }
                    }
                    Node::With(p, body, otherwise) => {
                        let v = self.pipe(p, dot, depth)?;
                        if truthy(&v) {
                            self.nodes(body, &v, out, depth)?;
                        } else {
                            self.nodes(otherwise, dot, out, depth)?;
                        }
                    }
                    Node::Range(p, body, otherwise) => {
                        let items: Vec<Value> = match self.pipe(p, dot, depth)? {
                            Value::Array(a) => a,
                            Value::Object(m) => {
                                let sorted: BTreeMap<String, Value> = m.into_iter().collect();
                                sorted.into_values().collect()
                            }
                            Value::Null => Vec::new(),
                            other => return Err(format!("range over {other}")),
                        };
                        if items.is_empty() {
                            self.nodes(otherwise, dot, out, depth)?;
                        }
                        for item in &items {
                            self.nodes(body, item, out, depth)?;
                        }
                    }
                }
            }
            Ok(())
        }

        fn pipe(&self, pipe: &Pipe, dot: &Value, depth: usize) -> Result<Value, String> {
            let mut prev = None;
            for cmd in pipe {
                prev = Some(self.cmd(cmd, dot, prev, depth)?);
            }
            Ok(prev.unwrap_or(Value::Null))
        }

        fn cmd(
            &self,
            cmd: &[Arg],
            dot: &Value,
            piped: Option<Value>,
            depth: usize,
        ) -> Result<Value, String> {
            let Arg::Func(name) = &cmd[0] else {
                if cmd.len() > 1 || piped.is_some() {
                    return Err(format!(
                        "can't give an argument to a non-function {:?}",
                        cmd[0]
                    ));
                }
                return self.arg(&cmd[0], dot, depth);
            };
            let mut args = cmd[1..]
                .iter()
                .map(|a| self.arg(a, dot, depth))
                .collect::<Result<Vec<_>, _>>()?;
            args.extend(piped);
            let n = args.len();
            let arity = |want: usize| {
                if n == want {
                    Ok(())
                } else {
                    Err(format!("{name}: wants {want} arguments, got {n}"))
                }
            };
            Ok(match name.as_str() {
                "include" => {
                    arity(2)?;
                    let tname = args[0].as_str().ok_or("include: name must be a string")?;
                    let body = self
                        .t
                        .defines
                        .get(tname)
                        .ok_or(format!("no template {tname:?}"))?;
                    let mut out = String::new();
                    self.nodes(body, &args[1], &mut out, depth + 1)?;
                    Value::String(out)
                }
                "toYaml" => {
                    arity(1)?;
                    let mut out = String::new();
                    to_yaml(&args[0], 0, &mut out);
                    Value::String(out.trim_end_matches('\n').to_string())
                }
                "indent" | "nindent" => {
                    arity(2)?;
                    let pad = " ".repeat(int(&args[0])?);
                    let s = format!(
                        "{pad}{}",
                        strval(&args[1])?.replace('\n', &format!("\n{pad}"))
                    );
                    Value::String(if name == "nindent" {
                        format!("\n{s}")
                    } else {
                        s
                    })
                }
                "quote" => {
                    let quoted = args
                        .iter()
                        .filter(|a| !a.is_null())
                        .map(|a| Ok(Value::String(strval(a)?).to_string()))
                        .collect::<Result<Vec<_>, String>>()?;
                    Value::String(quoted.join(" "))
                }
                "default" => {
                    if n == 0 || n > 2 {
                        return Err("default: wants 1 or 2 arguments".into());
                    }
                    match args.get(1) {
                        Some(v) if truthy(v) => v.clone(),
                        _ => args[0].clone(),
                    }
                }
                "required" => {
                    arity(2)?;
                    match &args[1] {
                        Value::Null => return Err(strval(&args[0])?),
                        Value::String(s) if s.is_empty() => return Err(strval(&args[0])?),
                        v => v.clone(),
                    }
                }
                "fail" => {
                    arity(1)?;
                    return Err(strval(&args[0])?);
                }
                "not" => {
                    arity(1)?;
                    Value::Bool(!truthy(&args[0]))
                }
                "kindIs" => {
                    arity(2)?;
                    // Go's reflect kinds, but the numeric ones: a number is float64 from
                    // YAML and int64 from --set in Helm, so asking for one is refused.
                    let want = args[0].as_str().unwrap_or_default();
                    if !["invalid", "string", "bool", "slice", "map"].contains(&want) {
                        return Err(format!("kindIs {want:?}: not in this renderer's subset"));
                    }
                    let kind = match &args[1] {
                        Value::Null => "invalid",
                        Value::String(_) => "string",
                        Value::Bool(_) => "bool",
                        Value::Array(_) => "slice",
                        Value::Object(_) => "map",
                        Value::Number(_) => "number",
                    };
                    Value::Bool(want == kind)
                }
                "int" => {
                    arity(1)?;
                    Value::from(to_int(&args[0])?)
                }
                "lt" | "ne" => {
                    arity(2)?;
                    let (a, b) = (&args[0], &args[1]);
                    match (a.as_i64(), b.as_i64(), name.as_str()) {
                        (Some(a), Some(b), "lt") => Value::Bool(a < b),
                        (Some(a), Some(b), _) => Value::Bool(a != b),
                        (None, None, "ne") if a.is_string() && b.is_string() => Value::Bool(a != b),
                        _ => return Err(format!("{name}: incompatible types {a} and {b}")),
                    }
                }
                "join" => {
                    arity(2)?;
                    let sep = args[0]
                        .as_str()
                        .ok_or("join: the separator must be a string")?;
                    // sprig's strslice: a list's non-nil items, or the one value.
                    let items = match &args[1] {
                        Value::Array(a) => a
                            .iter()
                            .filter(|v| !v.is_null())
                            .map(strval)
                            .collect::<Result<Vec<_>, _>>()?,
                        Value::Null => Vec::new(),
                        v => vec![strval(v)?],
                    };
                    Value::String(items.join(sep))
                }
                _ => {
                    return Err(format!(
                        "function {name:?} not defined (not in this renderer's subset)"
                    ));
                }
            })
        }

        fn arg(&self, arg: &Arg, dot: &Value, depth: usize) -> Result<Value, String> {
            match arg {
                Arg::Lit(v) => Ok(v.clone()),
                Arg::Sub(p) => self.pipe(p, dot, depth),
                Arg::Func(f) => Err(format!("function {f} used as a value")),
                Arg::Field { dollar, path } => {
                    let base = if *dollar { self.root } else { dot };
                    let mut cur = base.clone();
                    for (i, seg) in path.iter().enumerate() {
                        cur = match cur {
                            Value::Object(mut m) => match m.remove(seg) {
                                Some(v) => v,
                                None => {
                                    if std::ptr::eq(base, self.root) && path[0] == "Values" {
                                        self.missing.borrow_mut().insert(path[..=i].join("."));
                                    }
                                    Value::Null
                                }
                            },
                            Value::Null => {
                                return Err(format!(
                                    "nil pointer evaluating .{}",
                                    path[..=i].join(".")
                                ));
                            }
                            other => return Err(format!("can't evaluate field {seg} in {other}")),
                        };
                    }
                    Ok(cur)
                }
            }
        }
    }

    impl Templates {
        /// Parses every file; `define`s from all files are shared (as in Helm).
        pub fn parse(sources: &BTreeMap<String, String>) -> Result<Templates, String> {
            let mut defines = BTreeMap::new();
            let mut files = BTreeMap::new();
            for (name, src) in sources {
                let items = lex(src).map_err(|e| format!("{name}: {e}"))?;
                let mut p = Parser {
                    items: items.iter(),
                    defines: &mut defines,
                };
                match p.list().map_err(|e| format!("{name}: {e}"))? {
                    (nodes, Stop::Eof) => {
                        files.insert(name.clone(), nodes);
                    }
                    _ => {
                        return Err(format!(
                            "{name}: unexpected {{{{ end }}}} or {{{{ else }}}}"
                        ));
                    }
                }
            }
            Ok(Templates { files, defines })
        }

        /// Renders every file not starting with `_` (Helm's partials) with `root` as dot.
        /// Returns the outputs and the `.Values` paths read that do not exist.
        pub fn render_all(
            &self,
            root: &Value,
        ) -> Result<(BTreeMap<String, String>, BTreeSet<String>), String> {
            let exec = Exec {
                t: self,
                root,
                missing: RefCell::new(BTreeSet::new()),
            };
            let mut out = BTreeMap::new();
            for (name, nodes) in self.files.iter().filter(|(n, _)| !n.starts_with('_')) {
                let mut text = String::new();
                exec.nodes(nodes, root, &mut text, 0)
                    .map_err(|e| format!("{name}: {e}"))?;
                out.insert(name.clone(), text);
            }
            Ok((out, exec.missing.into_inner()))
        }
    }
}

#[test]
#[ignore = "prints the rendered chart: cargo test --test integration deploy:: -- --ignored --nocapture"]
fn print_rendered_chart() {
    for (name, text) in render(json!({})).unwrap() {
        println!("# ---- {name}\n{text}");
    }
}
