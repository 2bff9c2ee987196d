//! What must hold for storch's CSI driver, wherever it comes from (`deploy/csi/` or the
//! chart): the CSIDriver, the sidecars next to storch on its socket with their RBAC, and the
//! node plugin the kubelet uses.

use super::*;

/// The namespace of the plain manifests' node plugin.
pub(super) const NODE_NS: &str = "storch-csi-node";

/// The sidecar images, pinned (spec/csi.md §16: the versions current Trident ships together).
const SIDECAR_IMAGES: [(&str, &str); 6] = [
    ("csi-provisioner", "v6.3.0"),
    ("csi-attacher", "v4.11.0"),
    ("csi-resizer", "v2.1.0"),
    ("csi-snapshotter", "v8.6.0"),
    ("csi-node-driver-registrar", "v2.17.0"),
    ("livenessprobe", "v2.19.0"),
];

/// The flags of `storch csi node`.
pub(super) const NODE_FLAGS: [&str; 6] = [
    "--endpoint",
    "--node-id",
    "--zone",
    "--driver-name",
    "--max-volumes",
    "--iscsi-initiator",
];

type Rules = BTreeMap<(String, String), BTreeSet<String>>;

fn rules(list: &[(&str, &[&str], &[&str])]) -> Rules {
    let mut m = Rules::new();
    for (group, resources, verbs) in list {
        for r in *resources {
            m.entry((group.to_string(), r.to_string()))
                .or_default()
                .extend(verbs.iter().map(|v| v.to_string()));
        }
    }
    m
}

const READ: &[&str] = &["get", "list", "watch"];
const EVENTS: &[&str] = &["list", "watch", "create", "update", "patch"];

/// Each controller sidecar's cluster-wide rules: what its documentation lists for the features
/// storch uses, no secrets, no wildcards.
fn expected_sidecar_rules(sidecar: &str) -> Rules {
    match sidecar {
        "provisioner" => rules(&[
            (
                "",
                &["persistentvolumes"],
                &["get", "list", "watch", "create", "patch", "delete"],
            ),
            (
                "",
                &["persistentvolumeclaims"],
                &["get", "list", "watch", "update"],
            ),
            ("storage.k8s.io", &["storageclasses", "csinodes"], READ),
            ("storage.k8s.io", &["volumeattachments"], READ),
            ("", &["events"], EVENTS),
            ("", &["nodes"], READ),
            (
                "snapshot.storage.k8s.io",
                &["volumesnapshots", "volumesnapshotcontents"],
                &["get", "list"],
            ),
        ]),
        "attacher" => rules(&[
            (
                "",
                &["persistentvolumes"],
                &["get", "list", "watch", "patch"],
            ),
            ("storage.k8s.io", &["csinodes"], READ),
            (
                "storage.k8s.io",
                &["volumeattachments"],
                &["get", "list", "watch", "patch"],
            ),
            ("storage.k8s.io", &["volumeattachments/status"], &["patch"]),
        ]),
        "snapshotter" => rules(&[
            ("", &["events"], EVENTS),
            ("snapshot.storage.k8s.io", &["volumesnapshotclasses"], READ),
            (
                "snapshot.storage.k8s.io",
                &["volumesnapshotcontents"],
                &["get", "list", "watch", "update", "patch"],
            ),
            (
                "snapshot.storage.k8s.io",
                &["volumesnapshotcontents/status"],
                &["update", "patch"],
            ),
        ]),
        "resizer" => rules(&[
            (
                "",
                &["persistentvolumes"],
                &["get", "list", "watch", "patch"],
            ),
            ("", &["persistentvolumeclaims"], READ),
            ("", &["persistentvolumeclaims/status"], &["patch"]),
            ("", &["events"], EVENTS),
            ("storage.k8s.io", &["volumeattributesclasses"], READ),
        ]),
        other => panic!("no sidecar {other}"),
    }
}

/// The provisioner's namespaced rules with `--enable-capacity`: its CSIStorageCapacity
/// objects, and the owner chain it walks (a Deployment's pod → ReplicaSet; a StatefulSet's pod
/// names it directly).
fn expected_capacity_rules(replicated: bool) -> Rules {
    let mut list: Vec<(&str, &[&str], &[&str])> = vec![
        (
            "storage.k8s.io",
            &["csistoragecapacities"],
            &[
                "get", "list", "watch", "create", "update", "patch", "delete",
            ],
        ),
        ("", &["pods"], &["get"]),
    ];
    if !replicated {
        list.push(("apps", &["replicasets"], &["get"]));
    }
    rules(&list)
}

/// What the CSI driver is, as rendered: the checks below return it for further asserts.
pub(super) struct Csi<'a> {
    pub(super) driver: &'a storage::CSIDriver,
    pub(super) controller: &'a core::PodSpec,
    pub(super) nodes: Vec<&'a apps::DaemonSet>,
}

pub(super) fn container<'a>(pod: &'a core::PodSpec, name: &str, what: &str) -> &'a core::Container {
    pod.containers
        .iter()
        .find(|c| c.name == name)
        .unwrap_or_else(|| panic!("{what}: no container {name}"))
}

pub(super) fn args(c: &core::Container) -> &[String] {
    c.args.as_deref().unwrap_or_default()
}

/// The socket a `unix:///PATH` endpoint or a bare path names.
fn socket_path(endpoint: &str) -> &str {
    endpoint.strip_prefix("unix://").unwrap_or(endpoint)
}

/// The pod volume mounted at the directory of `path` in `c`, and the mount.
fn mount_of<'a>(
    pod: &'a core::PodSpec,
    c: &'a core::Container,
    path: &str,
    what: &str,
) -> (&'a core::VolumeMount, &'a core::Volume) {
    let m = c
        .volume_mounts
        .iter()
        .flatten()
        .filter(|m| Path::new(path).starts_with(&m.mount_path))
        .max_by_key(|m| m.mount_path.len())
        .unwrap_or_else(|| panic!("{what}: {}: nothing mounted at {path}", c.name));
    let v = pod
        .volumes
        .iter()
        .flatten()
        .find(|v| v.name == m.name)
        .unwrap_or_else(|| panic!("{what}: no volume {}", m.name));
    (m, v)
}

/// An image `registry.k8s.io/sig-storage/NAME:TAG` with the pinned tag.
fn check_sidecar_image(c: &core::Container, name: &str, what: &str) {
    let tag = SIDECAR_IMAGES
        .iter()
        .find(|(n, _)| *n == name)
        .unwrap_or_else(|| panic!("no pinned image {name}"))
        .1;
    assert_eq!(
        c.image.as_deref(),
        Some(format!("registry.k8s.io/sig-storage/{name}:{tag}").as_str()),
        "{what}: {} image",
        c.name
    );
}

/// The sidecar `name` (image `image`) of `pod`, checked: the pinned image, no privilege, on
/// `socket` (`--csi-address`) in the volume `socket_volume`. Returns its args.
fn socket_sidecar<'a>(
    pod: &'a core::PodSpec,
    name: &str,
    image: &str,
    socket: &str,
    socket_volume: &str,
    what: &str,
) -> &'a [String] {
    let c = container(pod, name, what);
    check_sidecar_image(c, image, what);
    check_unprivileged_sidecar(c, what);
    assert!(
        c.command.is_none(),
        "{what}: {name} runs its image's entrypoint"
    );
    let a = args(c);
    assert_eq!(
        flag_value(a, "--csi-address"),
        Some(socket),
        "{what}: {name} on the plugin's socket"
    );
    let (_, v) = mount_of(pod, c, socket, what);
    assert_eq!(v.name, socket_volume, "{what}: {name}'s socket volume");
    a
}

/// Resource requests, a memory limit, and (unless privileged) no privilege at all.
fn check_unprivileged_sidecar(c: &core::Container, what: &str) {
    let res = c.resources.clone().unwrap_or_default();
    let req = res.requests.unwrap_or_default();
    assert!(
        req.contains_key("cpu") && req.contains_key("memory"),
        "{what}: {} requests",
        c.name
    );
    assert!(
        res.limits.unwrap_or_default().contains_key("memory"),
        "{what}: {} memory limit",
        c.name
    );
    let sc = c.security_context.clone().unwrap_or_default();
    assert_eq!(
        sc.allow_privilege_escalation,
        Some(false),
        "{what}: {}",
        c.name
    );
    assert_eq!(
        sc.read_only_root_filesystem,
        Some(true),
        "{what}: {}",
        c.name
    );
    assert_ne!(sc.privileged, Some(true), "{what}: {}", c.name);
    let caps = sc.capabilities.unwrap_or_default();
    assert_eq!(
        caps.drop,
        Some(vec!["ALL".to_string()]),
        "{what}: {}",
        c.name
    );
    assert!(caps.add.is_none(), "{what}: {}", c.name);
    for m in c.volume_mounts.iter().flatten() {
        assert!(
            m.mount_propagation.is_none(),
            "{what}: {} propagates mounts",
            c.name
        );
    }
}

/// Everything that must hold for storch's CSI driver: the CSIDriver, the sidecars next to
/// storch (namespace `ns`) on its socket with their RBAC, and the node plugin (namespace
/// `node_ns`). `objects` is a whole install, checked by `check_install` too.
pub(super) fn check_csi<'a>(objects: &'a [Object], ns: &str, node_ns: &str, what: &str) -> Csi<'a> {
    let install = check_install(objects, ns, what);
    let pod: &'a core::PodSpec = install.template.spec.as_ref().unwrap();
    let replicated = matches!(workload(objects, what), Workload::Replicated(_));
    let storch = storch_container(pod, what);
    let driver = one!(objects, CSIDriver, "CSIDriver");
    let name = driver.metadata.name.clone().unwrap();
    storch::csi::convert::check_driver_name(&name).unwrap();

    // storch serves CSI on a socket in a volume every sidecar mounts; the driver name is the
    // CSIDriver's.
    let endpoint = flag_value(args(storch), "--csi-endpoint")
        .unwrap_or_else(|| panic!("{what}: storch has no --csi-endpoint"));
    assert!(endpoint.starts_with("unix:///") && endpoint.ends_with(".sock"));
    assert_eq!(
        flag_value(args(storch), "--csi-driver-name"),
        Some(name.as_str()),
        "{what}: --csi-driver-name"
    );
    let socket = socket_path(endpoint);
    let (_, socket_volume) = mount_of(pod, storch, socket, what);
    assert!(
        socket_volume.empty_dir.is_some(),
        "{what}: the socket's volume is an emptyDir"
    );
    let names: BTreeSet<&str> = pod.containers.iter().map(|c| c.name.as_str()).collect();
    let mut want: BTreeSet<&str> = CSI_SIDECARS.into_iter().collect();
    want.insert("storch");
    assert_eq!(names, want, "{what}: the controller's containers");
    for sidecar in CSI_SIDECARS {
        let a = socket_sidecar(pod, sidecar, sidecar, socket, &socket_volume.name, what);
        assert_eq!(
            a.iter().any(|x| x == "--leader-election"),
            replicated,
            "{what}: {sidecar}: --leader-election exactly when several instances run it"
        );
    }
    let provisioner = args(container(pod, "csi-provisioner", what));
    for flag in ["--extra-create-metadata", "--feature-gates=Topology=true"] {
        assert!(
            provisioner.iter().any(|a| a == flag),
            "{what}: provisioner {flag}"
        );
    }
    let snapshotter = args(container(pod, "csi-snapshotter", what));
    assert!(snapshotter.iter().any(|a| a == "--extra-create-metadata"));
    let capacity = provisioner.iter().any(|a| a == "--enable-capacity");
    if capacity {
        let level = if replicated { "1" } else { "2" };
        assert_eq!(
            flag_value(provisioner, "--capacity-ownerref-level"),
            Some(level),
            "{what}: CSIStorageCapacity owned by storch's workload"
        );
    }

    // The CSIDriver.
    let spec = &driver.spec;
    assert_eq!(spec.attach_required, Some(true), "{what}: attachRequired");
    assert_eq!(
        spec.pod_info_on_mount,
        Some(false),
        "{what}: podInfoOnMount"
    );
    assert_eq!(
        spec.fs_group_policy.as_deref(),
        Some("ReadWriteOnceWithFSType"),
        "{what}: fsGroupPolicy"
    );
    assert_eq!(
        spec.storage_capacity,
        Some(capacity),
        "{what}: storageCapacity exactly when the provisioner publishes capacity"
    );
    assert_eq!(
        spec.volume_lifecycle_modes.as_deref(),
        Some(&["Persistent".to_string()][..])
    );
    assert!(spec.requires_republish.is_none() && spec.token_requests.is_none());

    check_csi_rbac(objects, ns, replicated, capacity, what);
    let nodes = check_node_plugin(objects, node_ns, &name, what);
    Csi {
        driver,
        controller: pod,
        nodes,
    }
}

/// One ClusterRole and binding per controller sidecar to storch's ServiceAccount, the
/// provisioner's Role with capacity, and nothing for the node plugin.
fn check_csi_rbac(objects: &[Object], ns: &str, replicated: bool, capacity: bool, what: &str) {
    let sa = own!(objects, ServiceAccount, "ServiceAccount");
    let storch_sa = (sa.metadata.name.clone().unwrap(), ns.to_string());
    let bound_to_storch = |subjects: &Option<Vec<rbac::Subject>>| {
        let s = subjects.as_deref().unwrap_or_default();
        s.len() == 1
            && s[0].kind == "ServiceAccount"
            && (
                s[0].name.clone(),
                s[0].namespace.clone().unwrap_or_default(),
            ) == storch_sa
    };
    let csi_roles: Vec<&rbac::ClusterRole> = objects
        .iter()
        .filter_map(|o| match o {
            Object::ClusterRole(r) if is_csi(&r.metadata) => Some(r),
            _ => None,
        })
        .collect();
    assert_eq!(
        csi_roles.len(),
        4,
        "{what}: one ClusterRole per controller sidecar"
    );
    for sidecar in ["provisioner", "attacher", "snapshotter", "resizer"] {
        let suffix = format!("-csi-{sidecar}");
        let role = csi_roles
            .iter()
            .find(|r| r.metadata.name.as_deref().unwrap().ends_with(&suffix))
            .unwrap_or_else(|| panic!("{what}: no ClusterRole for the {sidecar}"));
        let got = flatten_rules(role.rules.as_deref().unwrap_or_default(), &suffix);
        assert_eq!(
            got,
            expected_sidecar_rules(sidecar),
            "{what}: {sidecar} rules"
        );
        assert!(role.aggregation_rule.is_none());
        let binding = objects
            .iter()
            .find_map(|o| match o {
                Object::ClusterRoleBinding(b)
                    if b.role_ref.name == *role.metadata.name.as_ref().unwrap() =>
                {
                    Some(b)
                }
                _ => None,
            })
            .unwrap_or_else(|| panic!("{what}: the {sidecar}'s ClusterRole is not bound"));
        assert_eq!(binding.role_ref.kind, "ClusterRole");
        assert!(
            bound_to_storch(&binding.subjects),
            "{what}: the {sidecar} runs in storch's pod, as its ServiceAccount"
        );
    }
    let roles: Vec<&rbac::Role> = objects
        .iter()
        .filter_map(|o| match o {
            Object::Role(r) if is_csi(&r.metadata) => Some(r),
            _ => None,
        })
        .collect();
    if capacity {
        assert_eq!(roles.len(), 1, "{what}: the provisioner's Role");
        let role = roles[0];
        assert_eq!(role.metadata.namespace.as_deref(), Some(ns));
        let got = flatten_rules(role.rules.as_deref().unwrap_or_default(), "Role");
        assert_eq!(
            got,
            expected_capacity_rules(replicated),
            "{what}: capacity rules"
        );
        let binding = objects
            .iter()
            .find_map(|o| match o {
                Object::RoleBinding(b)
                    if b.role_ref.name == *role.metadata.name.as_ref().unwrap() =>
                {
                    Some(b)
                }
                _ => None,
            })
            .expect("the provisioner's Role is bound");
        assert_eq!(binding.metadata.namespace.as_deref(), Some(ns));
        assert!(bound_to_storch(&binding.subjects));
    } else {
        assert!(roles.is_empty(), "{what}: a CSI Role without capacity");
    }
    // Every binding of a CSI object names storch's ServiceAccount (none the node plugin's).
    for o in objects {
        let subjects = match o {
            Object::ClusterRoleBinding(b) if is_csi(&b.metadata) => &b.subjects,
            Object::RoleBinding(b) if is_csi(&b.metadata) => &b.subjects,
            _ => continue,
        };
        assert!(bound_to_storch(subjects), "{what}: {o:?}");
    }
}

/// The node plugin's DaemonSets (one, or one per zone): `storch csi node` on the socket the
/// registrar announces to the kubelet, privileged with the kubelet's directory mounted
/// Bidirectional, a liveness probe through livenessprobe, and a ServiceAccount without token.
fn check_node_plugin<'a>(
    objects: &'a [Object],
    node_ns: &str,
    driver: &str,
    what: &str,
) -> Vec<&'a apps::DaemonSet> {
    let sets: Vec<&apps::DaemonSet> = objects
        .iter()
        .filter_map(|o| match o {
            Object::DaemonSet(d) => Some(d),
            _ => None,
        })
        .collect();
    assert!(!sets.is_empty(), "{what}: no node plugin DaemonSet");
    let node_sa = objects
        .iter()
        .find_map(|o| match o {
            Object::ServiceAccount(s) if is_csi(&s.metadata) => Some(s),
            _ => None,
        })
        .unwrap_or_else(|| panic!("{what}: the node plugin's ServiceAccount"));
    assert_eq!(node_sa.metadata.namespace.as_deref(), Some(node_ns));
    assert_eq!(node_sa.automount_service_account_token, Some(false));
    for set in &sets {
        let what = format!(
            "{what}: DaemonSet {}",
            set.metadata.name.as_deref().unwrap()
        );
        let what = what.as_str();
        assert_eq!(set.metadata.namespace.as_deref(), Some(node_ns), "{what}");
        let spec = set.spec.as_ref().unwrap();
        let template = &spec.template;
        let labels = template
            .metadata
            .as_ref()
            .and_then(|m| m.labels.clone())
            .unwrap_or_default();
        let selector = spec.selector.match_labels.clone().unwrap_or_default();
        assert!(!selector.is_empty() && selector.iter().all(|(k, v)| labels.get(k) == Some(v)));
        let pod = template.spec.as_ref().unwrap();
        assert_eq!(pod.service_account_name, node_sa.metadata.name, "{what}");
        assert_eq!(pod.automount_service_account_token, Some(false), "{what}");
        assert_eq!(
            pod.host_network,
            Some(true),
            "{what}: iscsiadm reaches iscsid"
        );
        assert!(
            pod.tolerations
                .iter()
                .flatten()
                .any(|t| t.operator.as_deref() == Some("Exists") && t.key.is_none()),
            "{what}: runs on every node"
        );
        let names: Vec<&str> = pod.containers.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(
            names,
            ["storch", "node-driver-registrar", "liveness-probe"],
            "{what}"
        );

        // storch csi node, on the socket, as this node.
        let c = container(pod, "storch", what);
        let a = args(c);
        assert_eq!(&a[..2], ["csi", "node"], "{what}: storch csi node");
        for flag in a[2..].iter() {
            let f = flag_name(flag).unwrap_or_else(|| panic!("{what}: argument {flag}"));
            assert!(
                NODE_FLAGS.contains(&f),
                "{what}: storch csi node has no {f}"
            );
        }
        assert_eq!(flag_value(a, "--driver-name"), Some(driver), "{what}");
        assert_eq!(flag_value(a, "--node-id"), Some("$(NODE_NAME)"), "{what}");
        let node_name = c
            .env
            .iter()
            .flatten()
            .find(|e| e.name == "NODE_NAME")
            .and_then(|e| e.value_from.as_ref()?.field_ref.as_ref());
        assert_eq!(
            node_name.map(|f| f.field_path.as_str()),
            Some("spec.nodeName"),
            "{what}"
        );
        let zone = flag_value(a, "--zone");
        let node_selector = pod.node_selector.clone().unwrap_or_default();
        assert_eq!(
            node_selector
                .get("topology.kubernetes.io/zone")
                .map(String::as_str),
            zone,
            "{what}: a zone's plugin runs on that zone's nodes only"
        );
        let endpoint = flag_value(a, "--endpoint").expect("--endpoint");
        assert!(endpoint.starts_with("unix:///") && endpoint.ends_with(".sock"));
        let socket = socket_path(endpoint);
        let (_, socket_volume) = mount_of(pod, c, socket, what);
        let host_socket_dir = socket_volume
            .host_path
            .as_ref()
            .unwrap_or_else(|| panic!("{what}: the socket is not on the host"))
            .path
            .clone();
        let sc = c.security_context.clone().unwrap_or_default();
        assert_eq!(sc.privileged, Some(true), "{what}: privileged");
        assert_eq!(
            sc.run_as_user,
            Some(0),
            "{what}: root (the image's user is 65532)"
        );

        // The kubelet's directory, Bidirectional: the mounts made here reach the kubelet.
        let kubelet_dir = host_socket_dir
            .strip_suffix(&format!("/plugins/{driver}"))
            .unwrap_or_else(|| {
                panic!("{what}: socket dir {host_socket_dir} is not KUBELET/plugins/{driver}")
            });
        let (m, v) = mount_of(pod, c, &format!("{kubelet_dir}/pods"), what);
        assert_eq!(
            m.mount_path, kubelet_dir,
            "{what}: the kubelet dir at its host path"
        );
        assert_eq!(
            m.mount_propagation.as_deref(),
            Some("Bidirectional"),
            "{what}"
        );
        assert_eq!(
            v.host_path.as_ref().map(|h| h.path.as_str()),
            Some(kubelet_dir)
        );
        for (path, propagation) in [("/dev", Some("HostToContainer")), ("/etc/iscsi", None)] {
            let (m, v) = mount_of(pod, c, path, what);
            assert_eq!(m.mount_path, path, "{what}");
            assert_eq!(
                m.mount_propagation.as_deref(),
                propagation,
                "{what}: {path}"
            );
            assert_eq!(
                v.host_path.as_ref().map(|h| h.path.as_str()),
                Some(path),
                "{what}"
            );
        }

        // The registrar announces the same socket, by its host path, in the kubelet's
        // registry.
        let ra = socket_sidecar(
            pod,
            "node-driver-registrar",
            "csi-node-driver-registrar",
            socket,
            &socket_volume.name,
            what,
        );
        let file = Path::new(socket).file_name().unwrap().to_str().unwrap();
        assert_eq!(
            flag_value(ra, "--kubelet-registration-path"),
            Some(format!("{host_socket_dir}/{file}").as_str()),
            "{what}: the registration path is the socket on the host"
        );
        let r = container(pod, "node-driver-registrar", what);
        let (_, registry) = mount_of(pod, r, "/registration/x", what);
        assert_eq!(
            registry.host_path.as_ref().map(|h| h.path.clone()),
            Some(format!("{kubelet_dir}/plugins_registry")),
            "{what}: the kubelet's plugin registry"
        );

        // livenessprobe on the socket is the plugin's liveness probe.
        let la = socket_sidecar(
            pod,
            "liveness-probe",
            "livenessprobe",
            socket,
            &socket_volume.name,
            what,
        );
        let port: i32 = flag_value(la, "--http-endpoint")
            .and_then(|e| e.rsplit(':').next())
            .and_then(|p| p.parse().ok())
            .expect("--http-endpoint=:PORT");
        let probe = c
            .liveness_probe
            .as_ref()
            .and_then(|p| p.http_get.as_ref())
            .unwrap_or_else(|| panic!("{what}: no liveness probe"));
        assert_eq!(probe.path.as_deref(), Some("/healthz"));
        use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
        let probe_port = match &probe.port {
            IntOrString::Int(p) => *p,
            IntOrString::String(n) => {
                c.ports
                    .iter()
                    .flatten()
                    .find(|p| p.name.as_deref() == Some(n))
                    .expect("named port")
                    .container_port
            }
        };
        assert_eq!(
            probe_port, port,
            "{what}: the liveness probe asks livenessprobe"
        );
    }
    sets
}
