//! The Helm chart, rendered by the real helm (`support::helm`) for every values set and
//! linted with it: it gives the install of the plain manifests; its values and their README
//! table.

use super::*;

pub(super) fn chart_dir() -> PathBuf {
    repo().join("deploy/helm/storch")
}

pub(super) fn default_values() -> Value {
    let text = std::fs::read_to_string(chart_dir().join("values.yaml")).unwrap();
    serde_saphyr::from_str(&text).unwrap()
}

/// Helm's merge of `--set`/`-f` values: maps merge key by key, anything else is replaced.
pub(super) fn merge(base: &mut Value, over: &Value) {
    match (base, over) {
        (Value::Object(b), Value::Object(o)) => {
            for (k, v) in o {
                merge(b.entry(k.clone()).or_insert(Value::Null), v);
            }
        }
        (b, o) => *b = o.clone(),
    }
}

/// Renders the chart with the real helm, as `helm template storch --namespace storch` with
/// `overrides` as a values file (merged into values.yaml by helm: maps key by key, `null`
/// removes a default). A values set that renders must also pass `helm lint --strict`.
pub(super) fn render(overrides: Value) -> Result<BTreeMap<String, String>, String> {
    let files = crate::support::helm::template(&chart_dir(), "storch", "storch", &overrides)?;
    if let Err(e) = crate::support::helm::lint(&chart_dir(), "storch", &overrides) {
        panic!("helm lint --strict refuses values that render ({overrides}):\n{e}");
    }
    Ok(files)
}

pub(super) fn rendered_objects(files: &BTreeMap<String, String>) -> Vec<Object> {
    files
        .iter()
        .filter(|(name, _)| name.ends_with(".yaml"))
        .flat_map(|(name, text)| objects_in(text, &format!("templates/{name}")))
        .collect()
}

pub(super) fn container_args(objects: &[Object]) -> Vec<String> {
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
    let notes = crate::support::helm::notes(&chart_dir(), "storch", "storch", &json!({}))
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        notes.contains("netapp.io/trident") && notes.contains("https://storch.storch.svc:8000"),
        "{notes}"
    );
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
pub(super) fn replicated_values() -> Value {
    json!({"etcd": {
        "endpoints": ["http://etcd-0.etcd:2379", "http://etcd-1.etcd:2379"],
        "secretsKeySecret": "storch-secrets-key",
    }})
}

pub(super) fn statefulset_of(objects: &[Object]) -> &apps::StatefulSetSpec {
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
    assert_eq!(requested_storage(claim_spec), "2Gi");

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
    assert_eq!(requested_storage(claim), "10Gi");
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
    assert_eq!(requested_storage(pvc), "10Gi");
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

/// helm renders a value that values.yaml does not declare as empty: every `.Values.a.b` a
/// template reads must be declared (and so documented: `readme_documents_every_value`).
#[test]
fn templates_read_only_declared_values() {
    let values = default_values();
    let reads = regex::Regex::new(r"\.Values((?:\.[A-Za-z_][A-Za-z0-9_]*)+)").unwrap();
    let mut seen = 0;
    for entry in std::fs::read_dir(chart_dir().join("templates")).unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        for read in reads.captures_iter(&text) {
            seen += 1;
            let mut at = &values;
            for key in read[1][1..].split('.') {
                match at.as_object() {
                    // Below a declared map of the user's (resources, nodeSelector, …): theirs.
                    Some(m) if m.is_empty() => break,
                    Some(m) => {
                        at = m.get(key).unwrap_or_else(|| {
                            panic!(
                                "{}: .Values{} is not declared in values.yaml",
                                path.display(),
                                &read[1]
                            )
                        })
                    }
                    None => break,
                }
            }
        }
    }
    assert!(seen > 20, "found only {seen} value reads");
}

/// values.schema.json: a misspelled or unknown value, or one of the wrong kind, is refused
/// naming it, instead of being ignored.
#[test]
fn helm_chart_refuses_unknown_values_naming_them() {
    for (values, named) in [
        (json!({"csi": {"enabeld": true}}), "'enabeld'"),
        (json!({"replica": 2}), "'replica'"),
        (
            json!({"etcd": {"endpoint": "http://etcd:2379"}}),
            "'endpoint'",
        ),
        (json!({"service": {"port": 0}}), "/service/port"),
        (json!({"logFormat": "yaml"}), "/logFormat"),
        (json!({"csi": {"enabled": "yes"}}), "/csi/enabled"),
    ] {
        let err = render(values.clone()).unwrap_err();
        assert!(
            err.contains("schema") && err.contains(named),
            "{values}: {err}"
        );
    }
}
