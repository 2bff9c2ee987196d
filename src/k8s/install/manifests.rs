//! The objects `storch install` applies, built from [`Settings`]: the same objects as the Helm
//! chart in `deploy/helm/storch` renders for release `storch` with the matching values, plus
//! the Namespace(s) the chart leaves to `--namespace`. A test (`deploy::generate`) renders the
//! chart with the real helm for several settings and requires equality object by object; the one difference is the `app.kubernetes.io/managed-by` label ([`MANAGED_BY`]
//! instead of `Helm`), which is how `storch uninstall` finds what install made.

use serde_json::{Map, Value, json};

/// The release name: every object is named after it, as the chart names them.
pub const RELEASE: &str = "storch";
/// The chart's name, version and appVersion (`deploy/helm/storch/Chart.yaml`).
pub const CHART_NAME: &str = "storch";
pub const CHART_VERSION: &str = "0.1.0";
pub const APP_VERSION: &str = "0.1.0";
/// The `app.kubernetes.io/managed-by` label of what `storch install` writes, and its field
/// manager for server-side apply.
pub const MANAGED_BY: &str = "storch-install";
/// The label whose value is [`MANAGED_BY`].
pub const MANAGED_BY_LABEL: &str = "app.kubernetes.io/managed-by";
/// The Secret with the shared secrets key of a replicated install (`etcd.secretsKeySecret`).
pub const SECRETS_KEY_SECRET: &str = "storch-secrets-key";
/// The chart's default Secrets for TLS and the API token.
pub const TLS_SECRET: &str = "storch-tls";
pub const TOKEN_SECRET: &str = "storch-token";

const CSI_IMAGES: [(&str, &str); 6] = [
    (
        "provisioner",
        "registry.k8s.io/sig-storage/csi-provisioner:v6.3.0",
    ),
    (
        "attacher",
        "registry.k8s.io/sig-storage/csi-attacher:v4.11.0",
    ),
    (
        "snapshotter",
        "registry.k8s.io/sig-storage/csi-snapshotter:v8.6.0",
    ),
    ("resizer", "registry.k8s.io/sig-storage/csi-resizer:v2.1.0"),
    (
        "nodeDriverRegistrar",
        "registry.k8s.io/sig-storage/csi-node-driver-registrar:v2.17.0",
    ),
    (
        "livenessprobe",
        "registry.k8s.io/sig-storage/livenessprobe:v2.19.0",
    ),
];
const CSI_DRIVER: &str = "csi.storch.io";
const KUBELET_DIR: &str = "/var/lib/kubelet";
const CSI_HEALTH_PORT: u16 = 9838;

/// What an install is made of. Everything else is the chart's default.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    pub namespace: String,
    /// `REPOSITORY[:TAG]`; no tag means the chart's appVersion.
    pub image_repository: String,
    pub image_tag: String,
    /// The data PVC's size (`persistence.size`).
    pub volume_size: String,
    /// The data PVC's class (`persistence.storageClassName`); `None`: the cluster's default.
    pub volume_class: Option<String>,
    /// etcd members: replicated instances in a StatefulSet, with the secrets key Secret
    /// [`SECRETS_KEY_SECRET`].
    pub etcd_endpoints: Vec<String>,
    /// The CSI driver, its node plugin in the namespace [`Settings::csi_node_namespace`].
    pub csi: bool,
}

impl Settings {
    /// The defaults of the chart in `namespace`.
    pub fn new(namespace: &str) -> Settings {
        Settings {
            namespace: namespace.to_string(),
            image_repository: "storch".into(),
            image_tag: String::new(),
            volume_size: "2Gi".into(),
            volume_class: None,
            etcd_endpoints: Vec::new(),
            csi: false,
        }
    }

    /// Sets the image from `REPOSITORY[:TAG]`.
    pub fn set_image(&mut self, image: &str) -> Result<(), String> {
        let image = image.trim();
        if image.is_empty() || image.contains('@') || image.contains(char::is_whitespace) {
            return Err(format!(
                "--image {image:?}: expected REPOSITORY[:TAG] (a digest is not supported)"
            ));
        }
        let last = image.rsplit('/').next().unwrap_or(image);
        match last.rsplit_once(':') {
            Some((_, tag)) if !tag.is_empty() => {
                self.image_repository = image[..image.len() - tag.len() - 1].to_string();
                self.image_tag = tag.to_string();
            }
            Some(_) => return Err(format!("--image {image:?}: the tag after ':' is empty")),
            None => {
                self.image_repository = image.to_string();
                self.image_tag.clear();
            }
        }
        Ok(())
    }

    pub fn replicated(&self) -> bool {
        !self.etcd_endpoints.is_empty()
    }

    /// The image as the container gets it.
    pub fn image(&self) -> String {
        let tag = if self.image_tag.is_empty() {
            APP_VERSION
        } else {
            &self.image_tag
        };
        format!("{}:{tag}", self.image_repository)
    }

    /// The node plugin's namespace: its own, which admits privileged pods (storch's own
    /// enforces the `restricted` profile).
    pub fn csi_node_namespace(&self) -> String {
        format!("{}-csi-node", self.namespace)
    }

    /// The data PVC's name (single instance) or the claim template's PVC name prefix.
    pub fn data_pvc(&self) -> String {
        format!("{RELEASE}-data")
    }
}

fn selector_labels() -> Value {
    json!({"app.kubernetes.io/name": CHART_NAME, "app.kubernetes.io/instance": RELEASE})
}

fn labels() -> Value {
    let mut l = selector_labels();
    let m = l.as_object_mut().unwrap();
    m.insert("app.kubernetes.io/version".into(), json!(APP_VERSION));
    m.insert(MANAGED_BY_LABEL.into(), json!(MANAGED_BY));
    m.insert(
        "helm.sh/chart".into(),
        json!(format!("{CHART_NAME}-{CHART_VERSION}")),
    );
    l
}

fn labels_with(extra: &[(&str, &str)]) -> Value {
    let mut l = labels();
    for (k, v) in extra {
        l[*k] = json!(v);
    }
    l
}

fn meta(name: &str, namespace: Option<&str>, labels: Value) -> Value {
    let mut m = json!({"name": name});
    if let Some(ns) = namespace {
        m["namespace"] = json!(ns);
    }
    m["labels"] = labels;
    m
}

fn object(api_version: &str, kind: &str, metadata: Value, rest: Value) -> Value {
    let mut o = Map::new();
    o.insert("apiVersion".into(), json!(api_version));
    o.insert("kind".into(), json!(kind));
    o.insert("metadata".into(), metadata);
    if let Value::Object(rest) = rest {
        o.extend(rest);
    }
    Value::Object(o)
}

fn rule(group: &str, resources: &[&str], verbs: &[&str]) -> Value {
    json!({"apiGroups": [group], "resources": resources, "verbs": verbs})
}

const RBAC: &str = "rbac.authorization.k8s.io/v1";

fn binding(
    kind: &str,
    name: &str,
    namespace: Option<&str>,
    labels: Value,
    role: &str,
    s: &Settings,
) -> Value {
    let role_kind = kind.trim_end_matches("Binding");
    object(
        RBAC,
        kind,
        meta(name, namespace, labels),
        json!({
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": role},
            "subjects": [{"kind": "ServiceAccount", "name": RELEASE, "namespace": s.namespace}],
        }),
    )
}

/// Every object of the install, in the order they are applied (namespaces first, the
/// workloads after what they use).
pub fn objects(s: &Settings) -> Vec<Value> {
    let ns = s.namespace.as_str();
    let cluster_name = format!("{RELEASE}-{ns}");
    let mut out = Vec::new();
    out.push(namespace(ns, "restricted"));
    if s.csi {
        out.push(namespace(&s.csi_node_namespace(), "privileged"));
    }
    out.push(object(
        "v1",
        "ServiceAccount",
        meta(RELEASE, Some(ns), labels()),
        json!({}),
    ));
    if s.csi {
        out.push(object(
            "v1",
            "ServiceAccount",
            meta(
                &format!("{RELEASE}-csi-node"),
                Some(&s.csi_node_namespace()),
                labels_with(&[("app.kubernetes.io/component", "csi-node")]),
            ),
            json!({"automountServiceAccountToken": false}),
        ));
    }
    out.push(object(
        RBAC,
        "ClusterRole",
        meta(&cluster_name, None, labels()),
        json!({"rules": [
            rule("storage.k8s.io", &["storageclasses"], &["get", "list", "watch"]),
            rule("", &["persistentvolumeclaims"], &["get", "list", "watch"]),
            rule("", &["persistentvolumes"], &["get", "list", "watch", "create", "delete"]),
            rule("", &["persistentvolumes/status"], &["update", "patch"]),
            {"apiGroups": ["", "events.k8s.io"], "resources": ["events"], "verbs": ["create", "patch"]},
        ]}),
    ));
    out.push(binding(
        "ClusterRoleBinding",
        &cluster_name,
        None,
        labels(),
        &cluster_name,
        s,
    ));
    let mut role_rules = vec![
        rule(
            "coordination.k8s.io",
            &["leases"],
            &["get", "create", "update", "patch"],
        ),
        rule("", &["secrets"], &["create", "get", "update", "patch"]),
    ];
    if s.replicated() {
        role_rules.push(rule("", &["pods"], &["get", "patch"]));
    }
    out.push(object(
        RBAC,
        "Role",
        meta(RELEASE, Some(ns), labels()),
        json!({ "rules": role_rules }),
    ));
    out.push(binding(
        "RoleBinding",
        RELEASE,
        Some(ns),
        labels(),
        RELEASE,
        s,
    ));
    if s.csi {
        out.extend(csi_rbac(s, &cluster_name));
    }
    if !s.replicated() {
        let mut spec = json!({"accessModes": ["ReadWriteOnce"]});
        if let Some(class) = &s.volume_class {
            spec["storageClassName"] = json!(class);
        }
        spec["resources"] = json!({"requests": {"storage": s.volume_size}});
        out.push(object(
            "v1",
            "PersistentVolumeClaim",
            meta(&s.data_pvc(), Some(ns), labels()),
            json!({ "spec": spec }),
        ));
    }
    let mut service_selector = selector_labels();
    if s.replicated() {
        service_selector["storch.io/role"] = json!("leader");
        out.push(object(
            "v1",
            "Service",
            meta(&format!("{RELEASE}-headless"), Some(ns), labels()),
            json!({"spec": {
                "clusterIP": "None",
                "publishNotReadyAddresses": true,
                "selector": selector_labels(),
                "ports": [{"name": "api", "port": 8000, "targetPort": "api", "protocol": "TCP"}],
            }}),
        ));
    }
    out.push(object(
        "v1",
        "Service",
        meta(RELEASE, Some(ns), labels()),
        json!({"spec": {
            "type": "ClusterIP",
            "selector": service_selector,
            "ports": [{"name": "api", "port": 8000, "targetPort": "api", "protocol": "TCP"}],
        }}),
    ));
    out.push(workload(s));
    if s.csi {
        out.push(node_daemonset(s));
        out.push(object(
            "storage.k8s.io/v1",
            "CSIDriver",
            meta(
                CSI_DRIVER,
                None,
                labels_with(&[("app.kubernetes.io/component", "csi-controller")]),
            ),
            json!({"spec": {
                "attachRequired": true,
                "podInfoOnMount": false,
                "fsGroupPolicy": "ReadWriteOnceWithFSType",
                "storageCapacity": true,
                "volumeLifecycleModes": ["Persistent"],
            }}),
        ));
    }
    out
}

/// A namespace with a Pod Security profile enforced (as `deploy/00-namespace.yaml` and
/// `deploy/csi/00-namespace.yaml`).
fn namespace(name: &str, profile: &str) -> Value {
    let mut l = labels();
    l["pod-security.kubernetes.io/enforce"] = json!(profile);
    l["pod-security.kubernetes.io/warn"] = json!(profile);
    object("v1", "Namespace", meta(name, None, l), json!({}))
}

fn csi_rbac(s: &Settings, cluster_name: &str) -> Vec<Value> {
    let ns = s.namespace.as_str();
    let component = || labels_with(&[("app.kubernetes.io/component", "csi-controller")]);
    let sidecars: [(&str, Vec<Value>); 4] = [
        (
            "provisioner",
            vec![
                rule(
                    "",
                    &["persistentvolumes"],
                    &["get", "list", "watch", "create", "patch", "delete"],
                ),
                rule(
                    "",
                    &["persistentvolumeclaims"],
                    &["get", "list", "watch", "update"],
                ),
                rule(
                    "storage.k8s.io",
                    &["storageclasses"],
                    &["get", "list", "watch"],
                ),
                rule(
                    "",
                    &["events"],
                    &["list", "watch", "create", "update", "patch"],
                ),
                rule(
                    "snapshot.storage.k8s.io",
                    &["volumesnapshots", "volumesnapshotcontents"],
                    &["get", "list"],
                ),
                rule("storage.k8s.io", &["csinodes"], &["get", "list", "watch"]),
                rule("", &["nodes"], &["get", "list", "watch"]),
                rule(
                    "storage.k8s.io",
                    &["volumeattachments"],
                    &["get", "list", "watch"],
                ),
            ],
        ),
        (
            "attacher",
            vec![
                rule(
                    "",
                    &["persistentvolumes"],
                    &["get", "list", "watch", "patch"],
                ),
                rule("storage.k8s.io", &["csinodes"], &["get", "list", "watch"]),
                rule(
                    "storage.k8s.io",
                    &["volumeattachments"],
                    &["get", "list", "watch", "patch"],
                ),
                rule("storage.k8s.io", &["volumeattachments/status"], &["patch"]),
            ],
        ),
        (
            "snapshotter",
            vec![
                rule(
                    "",
                    &["events"],
                    &["list", "watch", "create", "update", "patch"],
                ),
                rule(
                    "snapshot.storage.k8s.io",
                    &["volumesnapshotclasses"],
                    &["get", "list", "watch"],
                ),
                rule(
                    "snapshot.storage.k8s.io",
                    &["volumesnapshotcontents"],
                    &["get", "list", "watch", "update", "patch"],
                ),
                rule(
                    "snapshot.storage.k8s.io",
                    &["volumesnapshotcontents/status"],
                    &["update", "patch"],
                ),
            ],
        ),
        (
            "resizer",
            vec![
                rule(
                    "",
                    &["persistentvolumes"],
                    &["get", "list", "watch", "patch"],
                ),
                rule("", &["persistentvolumeclaims"], &["get", "list", "watch"]),
                rule("", &["persistentvolumeclaims/status"], &["patch"]),
                rule(
                    "",
                    &["events"],
                    &["list", "watch", "create", "update", "patch"],
                ),
                rule(
                    "storage.k8s.io",
                    &["volumeattributesclasses"],
                    &["get", "list", "watch"],
                ),
            ],
        ),
    ];
    let mut out = Vec::new();
    for (sidecar, rules) in sidecars {
        let name = format!("{cluster_name}-csi-{sidecar}");
        out.push(object(
            RBAC,
            "ClusterRole",
            meta(&name, None, component()),
            json!({ "rules": rules }),
        ));
        out.push(binding(
            "ClusterRoleBinding",
            &name,
            None,
            component(),
            &name,
            s,
        ));
    }
    let mut rules = vec![
        rule(
            "storage.k8s.io",
            &["csistoragecapacities"],
            &[
                "get", "list", "watch", "create", "update", "patch", "delete",
            ],
        ),
        rule("", &["pods"], &["get"]),
    ];
    if !s.replicated() {
        rules.push(rule("apps", &["replicasets"], &["get"]));
    }
    let name = format!("{RELEASE}-csi-provisioner");
    out.push(object(
        RBAC,
        "Role",
        meta(&name, Some(ns), component()),
        json!({ "rules": rules }),
    ));
    out.push(binding(
        "RoleBinding",
        &name,
        Some(ns),
        component(),
        &name,
        s,
    ));
    out
}

fn field_env(name: &str, path: &str) -> Value {
    json!({"name": name, "valueFrom": {"fieldRef": {"fieldPath": path}}})
}

fn restricted_container_security() -> Value {
    json!({
        "runAsNonRoot": true, "runAsUser": 65532, "runAsGroup": 65532,
        "readOnlyRootFilesystem": true, "allowPrivilegeEscalation": false,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    })
}

fn sidecar_security() -> Value {
    json!({"readOnlyRootFilesystem": true, "allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]}})
}

fn csi_image(key: &str) -> &'static str {
    CSI_IMAGES
        .iter()
        .find(|(k, _)| *k == key)
        .map(|(_, i)| *i)
        .unwrap()
}

/// The sidecars next to storch with `--csi` (the chart's `storch.csiSidecars`).
fn sidecars(s: &Settings) -> Vec<Value> {
    let replicated = s.replicated();
    let common = |mut c: Value| {
        c["resources"] =
            json!({"requests": {"cpu": "10m", "memory": "32Mi"}, "limits": {"memory": "256Mi"}});
        c["securityContext"] = sidecar_security();
        c["volumeMounts"] = json!([{"name": "csi-socket", "mountPath": "/csi"}]);
        c
    };
    let leader_args = [
        "--leader-election",
        "--leader-election-namespace=$(NAMESPACE)",
    ];
    let mut args = vec![
        "--csi-address=/csi/csi.sock".to_string(),
        "--timeout=60s".into(),
        "--extra-create-metadata".into(),
        "--feature-gates=Topology=true".into(),
        "--enable-capacity".into(),
        format!(
            "--capacity-ownerref-level={}",
            if replicated { 1 } else { 2 }
        ),
    ];
    if replicated {
        args.extend(leader_args.map(String::from));
    }
    let mut out = vec![common(json!({
        "name": "csi-provisioner",
        "image": csi_image("provisioner"),
        "imagePullPolicy": "IfNotPresent",
        "args": args,
        "env": [field_env("NAMESPACE", "metadata.namespace"), field_env("POD_NAME", "metadata.name")],
    }))];
    // The chart ranges over a dict: its keys in sorted order.
    for (name, key, extra) in [
        ("csi-attacher", "attacher", None),
        (
            "csi-resizer",
            "resizer",
            Some("--handle-volume-inuse-error=false"),
        ),
        (
            "csi-snapshotter",
            "snapshotter",
            Some("--extra-create-metadata"),
        ),
    ] {
        let mut args = vec!["--csi-address=/csi/csi.sock", "--timeout=60s"];
        args.extend(extra);
        let mut c = json!({
            "name": name,
            "image": csi_image(key),
            "imagePullPolicy": "IfNotPresent",
        });
        if replicated {
            args.extend(leader_args);
            c["args"] = json!(args);
            c["env"] = json!([field_env("NAMESPACE", "metadata.namespace")]);
        } else {
            c["args"] = json!(args);
        }
        out.push(common(c));
    }
    out
}

/// The pod template of the Deployment or the StatefulSet (the chart's `storch.podTemplate`).
fn pod_template(s: &Settings) -> Value {
    let replicated = s.replicated();
    let mut args: Vec<String> = [
        "serve",
        "--in-cluster",
        "--data-dir=/var/lib/storch",
        "--address=0.0.0.0",
        "--log-format=json",
        "--tls-cert=/etc/storch/tls/tls.crt",
        "--tls-key=/etc/storch/tls/tls.key",
        "--auth-token-file=/etc/storch/token/token",
        "--k8s-provisioner=netapp.io/trident",
        "--k8s-provisioner=storch.io/storch",
        "--k8s-lease-name=storch-leader",
        "--k8s-lease-duration=15s",
    ]
    .map(String::from)
    .to_vec();
    if replicated {
        args.push(format!("--etcd-endpoints={}", s.etcd_endpoints.join(",")));
        args.push("--etcd-prefix=/storch".into());
        args.push("--etcd-lease-ttl=10s".into());
        args.push("--secrets-key-file=/etc/storch/secrets-key/secret.key".into());
    }
    if s.csi {
        args.push("--csi-endpoint=unix:///csi/csi.sock".into());
        args.push(format!("--csi-driver-name={CSI_DRIVER}"));
    }
    let probe = |path: &str, period: u32, failures: u32| {
        json!({"httpGet": {"path": path, "port": "api", "scheme": "HTTPS"},
               "periodSeconds": period, "timeoutSeconds": 5, "failureThreshold": failures})
    };
    let mut mounts = vec![
        json!({"name": "data", "mountPath": "/var/lib/storch"}),
        json!({"name": "tls", "mountPath": "/etc/storch/tls", "readOnly": true}),
        json!({"name": "token", "mountPath": "/etc/storch/token", "readOnly": true}),
    ];
    if replicated {
        mounts.push(json!({"name": "secrets-key", "mountPath": "/etc/storch/secrets-key", "readOnly": true}));
    }
    mounts.push(json!({"name": "tmp", "mountPath": "/tmp"}));
    if s.csi {
        mounts.push(json!({"name": "csi-socket", "mountPath": "/csi"}));
    }
    let storch = json!({
        "name": "storch",
        "image": s.image(),
        "imagePullPolicy": "IfNotPresent",
        "args": args,
        "env": [field_env("STORCH_POD_NAME", "metadata.name"), field_env("STORCH_NODE_NAME", "spec.nodeName")],
        "ports": [{"name": "api", "containerPort": 8000, "protocol": "TCP"}],
        "livenessProbe": probe("/livez", 10, 6),
        "readinessProbe": probe(if replicated { "/readyz?standby=ok" } else { "/readyz" }, 5, 3),
        "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"cpu": "1", "memory": "512Mi"}},
        "securityContext": restricted_container_security(),
        "volumeMounts": mounts,
    });
    let mut containers = vec![storch];
    if s.csi {
        containers.extend(sidecars(s));
    }
    let mut volumes = Vec::new();
    if !replicated {
        volumes.push(json!({"name": "data", "persistentVolumeClaim": {"claimName": s.data_pvc()}}));
    }
    volumes.push(json!({"name": "tls", "secret": {"secretName": TLS_SECRET, "defaultMode": 288}}));
    volumes
        .push(json!({"name": "token", "secret": {"secretName": TOKEN_SECRET, "defaultMode": 288}}));
    if replicated {
        volumes.push(json!({"name": "secrets-key", "secret": {
            "secretName": SECRETS_KEY_SECRET, "defaultMode": 288,
            "items": [{"key": "secret.key", "path": "secret.key"}]}}));
    }
    volumes.push(json!({"name": "tmp", "emptyDir": {"sizeLimit": "64Mi"}}));
    if s.csi {
        volumes.push(json!({"name": "csi-socket", "emptyDir": {"sizeLimit": "1Mi"}}));
    }
    let mut spec = json!({
        "serviceAccountName": RELEASE,
        "securityContext": {
            "runAsNonRoot": true, "runAsUser": 65532, "runAsGroup": 65532, "fsGroup": 65532,
            "fsGroupChangePolicy": "OnRootMismatch", "seccompProfile": {"type": "RuntimeDefault"},
        },
    });
    if replicated {
        spec["affinity"] = json!({"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{
            "weight": 100,
            "podAffinityTerm": {"topologyKey": "kubernetes.io/hostname",
                                "labelSelector": {"matchLabels": selector_labels()}},
        }]}});
    }
    spec["containers"] = json!(containers);
    spec["volumes"] = json!(volumes);
    json!({"metadata": {"labels": selector_labels()}, "spec": spec})
}

/// The Deployment (one storch) or the StatefulSet (replicated through etcd).
fn workload(s: &Settings) -> Value {
    let ns = Some(s.namespace.as_str());
    if !s.replicated() {
        return object(
            "apps/v1",
            "Deployment",
            meta(RELEASE, ns, labels()),
            json!({"spec": {
                "replicas": 1,
                "strategy": {"type": "Recreate"},
                "selector": {"matchLabels": selector_labels()},
                "template": pod_template(s),
            }}),
        );
    }
    let mut claim_spec = json!({"accessModes": ["ReadWriteOnce"]});
    if let Some(class) = &s.volume_class {
        claim_spec["storageClassName"] = json!(class);
    }
    claim_spec["resources"] = json!({"requests": {"storage": s.volume_size}});
    object(
        "apps/v1",
        "StatefulSet",
        meta(RELEASE, ns, labels()),
        json!({"spec": {
            "replicas": 2,
            "serviceName": format!("{RELEASE}-headless"),
            "podManagementPolicy": "Parallel",
            "updateStrategy": {"type": "RollingUpdate"},
            "selector": {"matchLabels": selector_labels()},
            "template": pod_template(s),
            "volumeClaimTemplates": [{
                "apiVersion": "v1",
                "kind": "PersistentVolumeClaim",
                "metadata": {"name": "data", "labels": selector_labels()},
                "spec": claim_spec,
            }],
        }}),
    )
}

/// The node plugin's DaemonSet (the chart's `storch.csiNodeDaemonSet`, no zones).
fn node_daemonset(s: &Settings) -> Value {
    let socket_dir = format!("{KUBELET_DIR}/plugins/{CSI_DRIVER}");
    let mut match_labels = selector_labels();
    match_labels["app.kubernetes.io/component"] = json!("csi-node");
    let small = |cpu: &str, mem: &str, limit: &str| json!({"requests": {"cpu": cpu, "memory": mem}, "limits": {"memory": limit}});
    let plugin = json!({
        "name": "storch",
        "image": s.image(),
        "imagePullPolicy": "IfNotPresent",
        "args": ["csi", "node", "--endpoint=unix:///csi/csi.sock", "--node-id=$(NODE_NAME)",
                 format!("--driver-name={CSI_DRIVER}")],
        "env": [field_env("NODE_NAME", "spec.nodeName")],
        "ports": [{"name": "healthz", "containerPort": CSI_HEALTH_PORT, "protocol": "TCP"}],
        "livenessProbe": {"httpGet": {"path": "/healthz", "port": "healthz"},
                          "periodSeconds": 10, "timeoutSeconds": 5, "failureThreshold": 5},
        "resources": small("10m", "64Mi", "256Mi"),
        "securityContext": {"privileged": true, "runAsUser": 0, "runAsGroup": 0},
        "volumeMounts": [
            {"name": "socket-dir", "mountPath": "/csi"},
            {"name": "kubelet-dir", "mountPath": KUBELET_DIR, "mountPropagation": "Bidirectional"},
            {"name": "dev", "mountPath": "/dev", "mountPropagation": "HostToContainer"},
            {"name": "sys", "mountPath": "/sys", "mountPropagation": "HostToContainer"},
            {"name": "iscsi-config", "mountPath": "/etc/iscsi"},
        ],
    });
    let registrar = json!({
        "name": "node-driver-registrar",
        "image": csi_image("nodeDriverRegistrar"),
        "imagePullPolicy": "IfNotPresent",
        "args": ["--csi-address=/csi/csi.sock", format!("--kubelet-registration-path={socket_dir}/csi.sock")],
        "resources": small("10m", "16Mi", "64Mi"),
        "securityContext": sidecar_security(),
        "volumeMounts": [{"name": "socket-dir", "mountPath": "/csi"},
                         {"name": "registration-dir", "mountPath": "/registration"}],
    });
    let liveness = json!({
        "name": "liveness-probe",
        "image": csi_image("livenessprobe"),
        "imagePullPolicy": "IfNotPresent",
        "args": ["--csi-address=/csi/csi.sock", format!("--http-endpoint=:{CSI_HEALTH_PORT}"), "--probe-timeout=3s"],
        "resources": small("10m", "16Mi", "64Mi"),
        "securityContext": sidecar_security(),
        "volumeMounts": [{"name": "socket-dir", "mountPath": "/csi"}],
    });
    let host = |name: &str, path: &str, kind: &str| json!({"name": name, "hostPath": {"path": path, "type": kind}});
    object(
        "apps/v1",
        "DaemonSet",
        meta(
            &format!("{RELEASE}-csi-node"),
            Some(&s.csi_node_namespace()),
            labels_with(&[("app.kubernetes.io/component", "csi-node")]),
        ),
        json!({"spec": {
            "selector": {"matchLabels": match_labels},
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1}},
            "template": {
                "metadata": {"labels": match_labels},
                "spec": {
                    "serviceAccountName": format!("{RELEASE}-csi-node"),
                    "automountServiceAccountToken": false,
                    "hostNetwork": true,
                    "dnsPolicy": "ClusterFirstWithHostNet",
                    "priorityClassName": "system-node-critical",
                    "tolerations": [{"operator": "Exists"}],
                    "containers": [plugin, registrar, liveness],
                    "volumes": [
                        host("socket-dir", &socket_dir, "DirectoryOrCreate"),
                        host("registration-dir", &format!("{KUBELET_DIR}/plugins_registry"), "Directory"),
                        host("kubelet-dir", KUBELET_DIR, "Directory"),
                        host("dev", "/dev", "Directory"),
                        host("sys", "/sys", "Directory"),
                        host("iscsi-config", "/etc/iscsi", "DirectoryOrCreate"),
                    ],
                },
            },
        }}),
    )
}

/// `kind/name` (`namespace/kind/name` for namespaced objects), for messages.
pub fn describe(obj: &Value) -> String {
    let kind = obj["kind"].as_str().unwrap_or("?");
    let name = obj["metadata"]["name"].as_str().unwrap_or("?");
    match obj["metadata"]["namespace"].as_str() {
        Some(ns) => format!("{kind} {ns}/{name}"),
        None => format!("{kind} {name}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn images_split_at_the_tag() {
        let mut s = Settings::new("storch");
        assert_eq!(s.image(), "storch:0.1.0");
        s.set_image("registry.example.com:5000/team/storch:v2")
            .unwrap();
        assert_eq!(s.image_repository, "registry.example.com:5000/team/storch");
        assert_eq!(s.image_tag, "v2");
        s.set_image("registry.example.com:5000/storch").unwrap();
        assert_eq!(s.image(), "registry.example.com:5000/storch:0.1.0");
        for bad in ["", "storch:", "storch@sha256:00", "a b"] {
            assert!(s.set_image(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn the_objects_follow_the_settings() {
        let mut s = Settings::new("lab");
        let kinds = |s: &Settings| objects(s).iter().map(describe).collect::<Vec<_>>();
        let plain = kinds(&s);
        assert!(
            plain.contains(&"Deployment lab/storch".to_string()),
            "{plain:?}"
        );
        assert!(plain.contains(&"PersistentVolumeClaim lab/storch-data".to_string()));
        assert_eq!(plain[0], "Namespace lab");
        s.etcd_endpoints = vec!["http://etcd:2379".into()];
        s.csi = true;
        let all = kinds(&s);
        assert!(
            all.contains(&"StatefulSet lab/storch".to_string()),
            "{all:?}"
        );
        assert!(!all.iter().any(|k| k.starts_with("PersistentVolumeClaim")));
        assert!(all.contains(&"DaemonSet lab-csi-node/storch-csi-node".to_string()));
        assert!(all.contains(&"CSIDriver csi.storch.io".to_string()));
        for obj in objects(&s) {
            assert_eq!(
                obj["metadata"]["labels"][MANAGED_BY_LABEL],
                MANAGED_BY,
                "{}",
                describe(&obj)
            );
        }
    }
}
