//! The plain manifests, the Kubernetes examples and the Dockerfile.

use super::*;

pub(super) fn plain_objects() -> Vec<Object> {
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
    // or a storage attribute request that storch parses
    // (docs/trident-contract.md#storageclass-translation and
    // docs/trident-contract.md#request-values).
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
    // The node plugin (`storch csi node`, same image) formats, grows and mounts volumes and logs
    // in to iSCSI targets and NFS exports with these.
    for tool in [
        "e2fsprogs",
        "xfsprogs",
        "open-iscsi",
        "nfs-common",
        "util-linux",
        "mount",
    ] {
        assert!(
            text.split_whitespace().any(|w| w == tool),
            "the image lacks {tool}"
        );
    }
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
    // build.rs compiles proto/csi.proto (the CSI messages).
    for needed in [
        "Cargo.toml",
        "Cargo.lock",
        "build.rs",
        "proto",
        "src",
        "benches",
    ] {
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
        "kubectl apply -f deploy/csi/",
        "csi.enabled=true",
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
