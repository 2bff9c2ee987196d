//! The install: what must hold for the plain manifests and for every chart rendering.

use super::*;

/// The cluster-wide rules storch needs, and nothing more: (apiGroup, resource) → verbs.
pub(super) fn expected_cluster_rules() -> BTreeMap<(String, String), BTreeSet<String>> {
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
pub(super) fn expected_namespaced_rules(
    replicated: bool,
) -> BTreeMap<(String, String), BTreeSet<String>> {
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
pub(super) fn flatten_rules(
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

pub(super) fn one<'a, T>(
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

/// [`one`] for one variant of [`Object`], among storch's own objects (not the CSI ones:
/// [`is_csi`]).
macro_rules! own {
    ($objects:expr, $variant:ident, $kind:expr) => {
        one(
            $objects,
            |o| match o {
                Object::$variant(x) if !is_csi(&x.metadata) => Some(x),
                _ => None,
            },
            $kind,
        )
    };
}

/// Whether an object belongs to the CSI driver (`app.kubernetes.io/component: csi-…`), checked
/// by `csi_checks::check_csi` rather than [`check_install`].
pub(super) fn is_csi(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> bool {
    meta.labels
        .as_ref()
        .and_then(|l| l.get("app.kubernetes.io/component"))
        .is_some_and(|c| c.starts_with("csi-"))
}

/// The `--flag` of an argument (`--flag=value` or `--flag`), if it is one.
pub(super) fn flag_name(arg: &str) -> Option<&str> {
    arg.starts_with("--")
        .then(|| arg.split('=').next().unwrap())
}

/// The value of `--flag=value` or `--flag value` in `args`.
pub(super) fn flag_value<'a>(args: &'a [String], flag: &str) -> Option<&'a str> {
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

pub(super) struct Install<'a> {
    /// The Deployment's or (replicated) the StatefulSet's pod template.
    pub(super) template: &'a core::PodTemplateSpec,
    pub(super) args: Vec<String>,
}

impl Install<'_> {
    /// The workload's pod spec.
    pub(super) fn pod(&self) -> &core::PodSpec {
        self.template.spec.as_ref().unwrap()
    }
}

/// How the install keeps its data: one Deployment and its PVC, or (etcd replication) a
/// StatefulSet with a claim template per instance.
pub(super) enum Workload<'a> {
    Single {
        deployment: &'a apps::Deployment,
        pvc: &'a core::PersistentVolumeClaim,
    },
    Replicated(&'a apps::StatefulSet),
}

/// The workload, checked: exactly one, with the replicas and update strategy its data allows.
pub(super) fn workload<'a>(objects: &'a [Object], what: &str) -> Workload<'a> {
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
    pub(super) fn template(&self) -> &'a core::PodTemplateSpec {
        match self {
            Workload::Single { deployment, .. } => &deployment.spec.as_ref().unwrap().template,
            Workload::Replicated(s) => &s.spec.as_ref().unwrap().template,
        }
    }

    pub(super) fn selector(&self) -> BTreeMap<String, String> {
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
pub(super) fn check_install<'a>(objects: &'a [Object], ns: &str, what: &str) -> Install<'a> {
    // Namespaced objects are in `ns` (the CSI ones: `csi_checks::check_csi`).
    for o in objects {
        let meta = match o {
            Object::DaemonSet(x) => &x.metadata,
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
        if is_csi(meta) {
            continue;
        }
        assert_eq!(
            meta.namespace.as_deref(),
            Some(ns),
            "{what}: {:?} namespace",
            meta.name
        );
    }

    let workload = workload(objects, what);
    let replicated = matches!(workload, Workload::Replicated(_));
    let sa = own!(objects, ServiceAccount, "ServiceAccount");
    let sa_name = sa.metadata.name.clone().unwrap();

    // RBAC: exactly the rules needed, no secrets cluster-wide, bound to the service account.
    let cr = own!(objects, ClusterRole, "ClusterRole");
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
    let role = own!(objects, Role, "Role");
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
    let crb = own!(objects, ClusterRoleBinding, "ClusterRoleBinding");
    assert_eq!(crb.role_ref.kind, "ClusterRole");
    assert_eq!(crb.role_ref.api_group, "rbac.authorization.k8s.io");
    assert_eq!(Some(&crb.role_ref.name), cr.metadata.name.as_ref());
    assert!(
        subjects_ok(&crb.subjects),
        "{what}: ClusterRoleBinding subjects"
    );
    let rb = own!(objects, RoleBinding, "RoleBinding");
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
    assert!(pod.init_containers.is_none() && pod.host_network.is_none() && pod.host_pid.is_none());
    // storch, and with CSI its sidecars (checked by `csi_checks::check_csi`).
    let c = storch_container(pod, what);
    for other in pod.containers.iter().filter(|o| o.name != "storch") {
        assert!(
            CSI_SIDECARS.contains(&other.name.as_str()),
            "{what}: container {} is neither storch nor a CSI sidecar",
            other.name
        );
    }

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

/// The CSI sidecars that run next to storch in its pod.
pub(super) const CSI_SIDECARS: [&str; 4] = [
    "csi-provisioner",
    "csi-attacher",
    "csi-resizer",
    "csi-snapshotter",
];

/// The container named `storch` of a pod.
pub(super) fn storch_container<'a>(pod: &'a core::PodSpec, what: &str) -> &'a core::Container {
    pod.containers
        .iter()
        .find(|c| c.name == "storch")
        .unwrap_or_else(|| panic!("{what}: no container named storch"))
}

/// The clients' Service: the one that is not headless.
pub(super) fn service_of(objects: &[Object]) -> &core::ServiceSpec {
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
pub(super) fn secret_volumes(pod: &core::PodSpec) -> BTreeSet<&str> {
    pod.volumes
        .iter()
        .flatten()
        .filter_map(|v| v.secret.as_ref()?.secret_name.as_deref())
        .collect()
}

/// A claim's requested storage (`resources.requests.storage`).
pub(super) fn requested_storage(spec: &core::PersistentVolumeClaimSpec) -> &str {
    let requests = spec.resources.as_ref().and_then(|r| r.requests.as_ref());
    &requests.expect("resources.requests")["storage"].0
}

pub(super) fn pvc_of(objects: &[Object]) -> &core::PersistentVolumeClaimSpec {
    one!(objects, PersistentVolumeClaim, "PVC")
        .spec
        .as_ref()
        .unwrap()
}
