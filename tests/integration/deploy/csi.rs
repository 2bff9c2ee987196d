//! The CSI driver's objects: `deploy/csi/` applied after `deploy/`, and the chart with
//! `csi.enabled`. `deploy/csi/` is the chart's rendering (release and namespace `storch`,
//! node plugin in `storch-csi-node`) but for Helm's own labels and the per-release names of
//! cluster objects: the chart is the source, and a test keeps the plain files equal to it.

use super::*;

/// `kubectl apply -f deploy/ && kubectl apply -f deploy/csi/`: deploy/csi's objects, the
/// Deployment replacing deploy/'s of the same name.
fn plain_csi_install() -> Vec<Object> {
    let mut objects = plain_objects();
    let csi: Vec<Object> = load_dir(&repo().join("deploy/csi"))
        .into_iter()
        .flat_map(|(_, o)| o)
        .collect();
    for o in csi {
        if let Object::Deployment(d) = &o {
            let before = objects.len();
            objects.retain(
                |x| !matches!(x, Object::Deployment(p) if p.metadata.name == d.metadata.name),
            );
            assert_eq!(
                objects.len() + 1,
                before,
                "deploy/csi replaces deploy/'s Deployment"
            );
        }
        objects.push(o);
    }
    objects
}

#[test]
fn deploy_csi_makes_a_csi_install_after_deploy() {
    let objects = plain_csi_install();
    let csi = check_csi(&objects, "storch", NODE_NS, "deploy/ + deploy/csi/");
    assert_eq!(csi.driver.metadata.name.as_deref(), Some("csi.storch.io"));
    assert_eq!(csi.nodes.len(), 1);
    let storch = storch_container(csi.controller, "deploy/csi");
    assert_eq!(
        flag_value(args(storch), "--csi-endpoint"),
        Some("unix:///csi/csi.sock")
    );
    // The node plugin's namespace admits privileged pods; storch's stays restricted.
    let namespaces: BTreeMap<String, BTreeMap<String, String>> = objects
        .iter()
        .filter_map(|o| match o {
            Object::Namespace(n) => Some((n.metadata.name.clone()?, n.metadata.labels.clone()?)),
            _ => None,
        })
        .collect();
    let enforce = |ns: &str| namespaces[ns]["pod-security.kubernetes.io/enforce"].as_str();
    assert_eq!(enforce("storch"), "restricted");
    assert_eq!(enforce(NODE_NS), "privileged");
    // The CSI Deployment is deploy/'s with only the CSI parts added.
    let plain = plain_objects();
    let mut base = one!(&plain, Deployment, "Deployment").clone();
    let mut with_csi = one!(&objects, Deployment, "Deployment").clone();
    let strip = |d: &mut apps::Deployment| {
        let pod = d.spec.as_mut().unwrap().template.spec.as_mut().unwrap();
        pod.containers.retain(|c| c.name == "storch");
        let c = &mut pod.containers[0];
        c.args
            .as_mut()
            .unwrap()
            .retain(|a| !a.starts_with("--csi-"));
        c.volume_mounts
            .as_mut()
            .unwrap()
            .retain(|m| m.name != "csi-socket");
        pod.volumes
            .as_mut()
            .unwrap()
            .retain(|v| v.name != "csi-socket");
    };
    strip(&mut base);
    strip(&mut with_csi);
    assert_eq!(
        with_csi, base,
        "deploy/csi/50-deployment.yaml drifted from deploy/50-deployment.yaml"
    );
}

/// Helm's own labels, and the per-release part of cluster objects' names (`<release>-<ns>-`,
/// here `storch-storch-`), which the plain manifests do not have.
fn without_helm(v: &Value) -> Value {
    const HELM_LABELS: [&str; 4] = [
        "app.kubernetes.io/instance",
        "app.kubernetes.io/version",
        "app.kubernetes.io/managed-by",
        "helm.sh/chart",
    ];
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(k, _)| !HELM_LABELS.contains(&k.as_str()))
                .map(|(k, v)| (k.clone(), without_helm(v)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(without_helm).collect()),
        Value::String(s) => Value::String(s.replace("storch-storch-", "storch-")),
        other => other.clone(),
    }
}

#[test]
fn deploy_csi_is_the_chart_with_csi_enabled() {
    let files = render(json!({"csi": {"enabled": true, "node": {"namespace": NODE_NS}}}))
        .unwrap_or_else(|e| panic!("{e}"));
    let key = |doc: &Value| -> (String, String) {
        (
            doc["kind"].as_str().unwrap().to_string(),
            doc["metadata"]["name"].as_str().unwrap().to_string(),
        )
    };
    let mut chart = BTreeMap::new();
    for (name, text) in &files {
        for doc in yaml_documents(text, name) {
            let mut doc = without_helm(&doc);
            let csi = doc["metadata"]["labels"]["app.kubernetes.io/component"]
                .as_str()
                .is_some_and(|c| c.starts_with("csi-"));
            if doc["kind"] == "Deployment" {
                // The chart names its provisioners and lease explicitly (helm.rs checks them).
                let c = &mut doc["spec"]["template"]["spec"]["containers"][0];
                assert_eq!(c["name"], "storch");
                c["args"].as_array_mut().unwrap().retain(|a| {
                    let a = a.as_str().unwrap();
                    !a.starts_with("--k8s-provisioner=") && !a.starts_with("--k8s-lease-")
                });
            } else if !csi {
                continue;
            }
            chart.insert(key(&doc), doc);
        }
    }
    let mut plain = BTreeMap::new();
    for path in yaml_files(&repo().join("deploy/csi")) {
        let text = std::fs::read_to_string(&path).unwrap();
        for doc in yaml_documents(&text, &path.display().to_string()) {
            if doc["kind"] != "Namespace" {
                plain.insert(key(&doc), doc);
            }
        }
    }
    assert_eq!(
        chart.keys().collect::<Vec<_>>(),
        plain.keys().collect::<Vec<_>>(),
        "deploy/csi/ and the chart's CSI objects"
    );
    for (k, doc) in &plain {
        let mut diffs = Vec::new();
        compare(doc, &chart[k], "", &mut diffs);
        assert!(
            diffs.is_empty(),
            "deploy/csi {k:?} differs from `helm template --set csi.enabled=true` (fix the chart \
             or the file):\n  {}",
            diffs.join("\n  ")
        );
    }
}

#[test]
fn helm_chart_without_csi_renders_no_csi_object() {
    let objects = rendered_objects(&render(json!({})).unwrap());
    for o in &objects {
        assert!(
            !matches!(o, Object::CSIDriver(_) | Object::DaemonSet(_)),
            "csi.enabled is false by default: {o:?}"
        );
    }
    let install = check_install(&objects, "storch", "helm chart");
    assert_eq!(install.pod().containers.len(), 1);
    assert!(flag_value(&install.args, "--csi-endpoint").is_none());
}

#[test]
fn helm_chart_with_csi_enabled_in_the_release_namespace() {
    let objects = rendered_objects(&render(json!({"csi": {"enabled": true}})).unwrap());
    let csi = check_csi(&objects, "storch", "storch", "helm chart with csi");
    assert_eq!(
        csi.nodes[0].metadata.name.as_deref(),
        Some("storch-csi-node")
    );
}

#[test]
fn helm_chart_with_csi_and_etcd_runs_the_sidecars_on_every_instance() {
    let mut values = replicated_values();
    merge(&mut values, &json!({"csi": {"enabled": true}}));
    let objects = rendered_objects(&render(values).unwrap_or_else(|e| panic!("{e}")));
    // check_csi: --leader-election on every sidecar, capacity owned by the StatefulSet (level
    // 1, no ReplicaSets read).
    let csi = check_csi(&objects, "storch", "storch", "helm chart with csi and etcd");
    for sidecar in CSI_SIDECARS {
        let c = container(csi.controller, sidecar, "csi and etcd");
        assert_eq!(
            flag_value(args(c), "--leader-election-namespace"),
            Some("$(NAMESPACE)"),
            "{sidecar}"
        );
        let ns = c.env.iter().flatten().find(|e| e.name == "NAMESPACE");
        let field = ns.and_then(|e| e.value_from.as_ref()?.field_ref.as_ref());
        assert_eq!(
            field.map(|f| f.field_path.as_str()),
            Some("metadata.namespace"),
            "{sidecar}"
        );
    }
}

#[test]
fn helm_chart_csi_values_reach_the_objects() {
    let objects = rendered_objects(
        &render(json!({"csi": {
            "enabled": true,
            "driverName": "csi.example.com",
            "storageCapacity": false,
            "kubeletDir": "/var/data/kubelet",
            "node": {"namespace": "storage-nodes", "zones": ["zone-a", "zone-b"], "maxVolumes": 64,
                     "healthPort": 9901},
        }}))
        .unwrap_or_else(|e| panic!("{e}")),
    );
    // check_csi: the driver name everywhere, no capacity anywhere, the node plugins in their
    // namespace on the kubelet dir given, each zone's on its nodes.
    let csi = check_csi(
        &objects,
        "storch",
        "storage-nodes",
        "helm chart with csi values",
    );
    assert_eq!(csi.driver.metadata.name.as_deref(), Some("csi.example.com"));
    let zones: Vec<(String, String)> = csi
        .nodes
        .iter()
        .map(|d| {
            let pod = d.spec.as_ref().unwrap().template.spec.as_ref().unwrap();
            let a = args(&pod.containers[0]);
            assert_eq!(flag_value(a, "--max-volumes"), Some("64"));
            assert_eq!(
                flag_value(args(&pod.containers[2]), "--http-endpoint"),
                Some(":9901")
            );
            (
                d.metadata.name.clone().unwrap(),
                flag_value(a, "--zone").unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        zones,
        [
            ("storch-csi-node-zone-a".to_string(), "zone-a".to_string()),
            ("storch-csi-node-zone-b".to_string(), "zone-b".to_string())
        ]
    );
}

#[test]
fn helm_chart_refuses_bad_csi_values_naming_them() {
    let with = |node: Value| render(json!({"csi": {"enabled": true, "node": node}}));
    for zone in ["Zone_A", "-a", ""] {
        let err = with(json!({"zones": ["zone-a", zone]})).unwrap_err();
        assert!(
            err.contains("csi.node.zones") && err.contains(&format!("{zone:?}")),
            "{err}"
        );
    }
    let err = with(json!({"maxVolumes": -1})).unwrap_err();
    assert!(err.contains("csi.node.maxVolumes must be 0"), "{err}");
    let err = render(json!({"csi": {"enabled": true, "driverName": ""}})).unwrap_err();
    assert!(err.contains("csi.driverName is required"), "{err}");
}

/// The flags the node plugin's DaemonSet may use are the ones `storch csi node --help` lists.
#[test]
fn node_plugin_flags_are_the_binarys() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_storch"))
        .args(["csi", "node", "--help"])
        .output()
        .expect("run storch csi node --help");
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "storch csi node --help: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    for flag in NODE_FLAGS {
        assert!(
            help.contains(flag),
            "storch csi node --help does not list {flag}:\n{help}"
        );
    }
}

/// The node plugin starts with the plain DaemonSet's args (the node name the downward API
/// gives, the socket moved into a temp dir): it listens on the socket rather than refusing
/// them.
#[test]
fn node_plugin_starts_with_the_daemonsets_args() {
    let objects = plain_csi_install();
    let set = one!(&objects, DaemonSet, "DaemonSet");
    let pod = set.spec.as_ref().unwrap().template.spec.as_ref().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("csi.sock");
    let argv: Vec<String> = args(container(pod, "storch", "deploy/csi"))
        .iter()
        .map(|a| match flag_name(a) {
            Some("--endpoint") => format!("--endpoint=unix://{}", socket.display()),
            _ => a.replace("$(NODE_NAME)", "node-1"),
        })
        .collect();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_storch"))
        .args(&argv)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start storch csi node");
    // Listening, or exited: either ends the wait.
    let mut exited = None;
    tokio::runtime::Runtime::new()
        .unwrap()
        .block_on(crate::support::eventually(
            "storch csi node to listen on its socket or exit",
            async || {
                exited = child.try_wait().unwrap();
                socket.exists() || exited.is_some()
            },
        ));
    child.kill().ok();
    child.wait().ok();
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).ok();
    assert!(
        exited.is_none(),
        "storch {} exited ({exited:?}) instead of listening:\n{stderr}",
        argv.join(" ")
    );
}
