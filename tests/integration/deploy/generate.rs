//! `storch install --generate-yaml`: the objects `storch install` applies are the chart's for
//! the same settings (rendered by the real helm), object by object, but for the
//! `app.kubernetes.io/managed-by` label (`storch-install`, how `storch uninstall` finds them)
//! and the Namespaces the chart leaves to `--namespace`; every file parses strictly into its
//! k8s-openapi type, and the install passes the same checks as the chart's.

use super::*;

/// Runs `storch install --generate-yaml DIR ARGS…` and returns the documents it wrote, in
/// file order.
fn generate(args: &[&str]) -> Vec<Value> {
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("manifests");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_storch"))
        .args(["install", "--generate-yaml"])
        .arg(&out_dir)
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "storch install --generate-yaml {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut docs = Vec::new();
    for file in yaml_files(&out_dir) {
        let text = std::fs::read_to_string(&file).unwrap();
        let what = file.file_name().unwrap().to_string_lossy().into_owned();
        let found = yaml_documents(&text, &what);
        assert_eq!(found.len(), 1, "{what}: one object per file");
        object(&found[0], &what); // strictly typed
        docs.push(found[0].clone());
    }
    docs
}

fn key(doc: &Value) -> (String, String, String) {
    let s = |p: &str| {
        doc.pointer(p)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    (s("/kind"), s("/metadata/namespace"), s("/metadata/name"))
}

/// The document with its managed-by label taken out, after checking it says `by`.
fn without_manager(doc: &Value, by: &str) -> Value {
    let mut doc = doc.clone();
    let labels = doc["metadata"]["labels"].as_object_mut().unwrap();
    assert_eq!(
        labels.remove("app.kubernetes.io/managed-by"),
        Some(json!(by)),
        "{:?}",
        key(&doc)
    );
    doc
}

/// `storch install -n NS ARGS` against `helm template storch -n NS` with `values`.
fn same_as_chart(ns: &str, args: &[&str], values: Value, namespaces: &[(&str, &str)]) {
    let mut argv = vec!["-n", ns];
    argv.extend(args);
    let generated = generate(&argv);
    let files = crate::support::helm::template(&helm::chart_dir(), "storch", ns, &values)
        .unwrap_or_else(|e| panic!("helm template {values}: {e}"));
    let mut chart: BTreeMap<_, _> = BTreeMap::new();
    for (name, text) in files.iter().filter(|(n, _)| n.ends_with(".yaml")) {
        for doc in yaml_documents(text, name) {
            chart.insert(key(&doc), without_manager(&doc, "Helm"));
        }
    }
    let mut seen_namespaces = Vec::new();
    for doc in &generated {
        let k = key(doc);
        if k.0 == "Namespace" {
            // Pod Security as deploy/00-namespace.yaml (restricted) and deploy/csi's
            // node namespace (privileged).
            let profile = doc["metadata"]["labels"]["pod-security.kubernetes.io/enforce"].clone();
            seen_namespaces.push((k.2.clone(), profile.as_str().unwrap_or("").to_string()));
            continue;
        }
        let theirs = chart
            .remove(&k)
            .unwrap_or_else(|| panic!("{args:?}: {k:?} is not in the chart's render"));
        let ours = without_manager(doc, "storch-install");
        assert!(
            ours == theirs,
            "{args:?}: {k:?} differs from the chart's:\nours:  {ours}\nchart: {theirs}"
        );
    }
    assert!(
        chart.is_empty(),
        "{args:?}: missing from storch install: {:?}",
        chart.keys()
    );
    let want: Vec<(String, String)> = namespaces
        .iter()
        .map(|(n, p)| (n.to_string(), p.to_string()))
        .collect();
    assert_eq!(seen_namespaces, want, "{args:?}");
    // The whole install passes the checks the chart's passes.
    let objects: Vec<Object> = generated
        .iter()
        .enumerate()
        .map(|(i, d)| object(d, &format!("document {i}")))
        .collect();
    if !args.contains(&"--csi") {
        check_install(&objects, ns, &format!("storch install {args:?}"));
    } else {
        check_csi(
            &objects,
            ns,
            &format!("{ns}-csi-node"),
            &format!("storch install {args:?}"),
        );
    }
}

#[test]
fn generated_yaml_is_the_charts_render_with_the_defaults() {
    same_as_chart("storch", &[], json!({}), &[("storch", "restricted")]);
}

#[test]
fn generated_yaml_is_the_charts_render_with_image_and_volume() {
    same_as_chart(
        "lab",
        &[
            "--image",
            "registry.example.com:5000/team/storch:v2",
            "--volume-size",
            "5Gi",
            "--volume-class",
            "standard",
        ],
        json!({
            "image": {"repository": "registry.example.com:5000/team/storch", "tag": "v2"},
            "persistence": {"size": "5Gi", "storageClassName": "standard"},
        }),
        &[("lab", "restricted")],
    );
}

#[test]
fn generated_yaml_is_the_charts_render_replicated_and_with_csi() {
    let endpoints = json!(["http://etcd-0.etcd:2379", "http://etcd-1.etcd:2379"]);
    same_as_chart(
        "ha",
        &[
            "--etcd-endpoints",
            "http://etcd-0.etcd:2379,http://etcd-1.etcd:2379",
        ],
        json!({"etcd": {"endpoints": endpoints, "secretsKeySecret": "storch-secrets-key"}}),
        &[("ha", "restricted")],
    );
    same_as_chart(
        "c",
        &["--csi"],
        json!({"csi": {"enabled": true, "node": {"namespace": "c-csi-node"}}}),
        &[("c", "restricted"), ("c-csi-node", "privileged")],
    );
    same_as_chart(
        "both",
        &[
            "--csi",
            "--etcd-endpoints",
            "http://etcd:2379",
            "--image",
            "storch:dev",
        ],
        json!({
            "etcd": {"endpoints": ["http://etcd:2379"], "secretsKeySecret": "storch-secrets-key"},
            "csi": {"enabled": true, "node": {"namespace": "both-csi-node"}},
            "image": {"repository": "storch", "tag": "dev"},
        }),
        &[("both", "restricted"), ("both-csi-node", "privileged")],
    );
}

#[test]
fn generate_yaml_refuses_bad_settings_naming_them() {
    for (args, word) in [
        (&["--image", "storch@sha256:00"][..], "--image"),
        (&["--volume-size", "lots"], "--volume-size"),
        (&["--etcd-endpoints", "etcd:2379"], "--etcd-endpoints"),
        (&["-n", "Not_A_Namespace"], "--namespace"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_storch"))
            .args(["install", "--generate-yaml"])
            .arg(dir.path().join("m"))
            .args(args)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && stderr.contains(word),
            "{args:?}: {stderr}"
        );
        assert!(!dir.path().join("m").exists(), "{args:?}: wrote files");
    }
}
