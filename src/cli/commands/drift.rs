//! `get orphans`, `import volume` and `reconcile backend`, over the REST API.

use serde_json::{Value, json};

use super::client::Ctx;
use super::objects::take;
use crate::cli::client_args::{ImportKind, OutputFormat, ReconcileKind};
use crate::cli::error::{CliError, CliResult};
use crate::cli::output::{Kind, json_text, yaml_text};

/// `get orphans`: the orphans of every backend; backends that could not be listed are named
/// on stderr.
pub async fn get_orphans(ctx: &Ctx) -> CliResult<()> {
    let what = || "could not list orphaned volumes".to_string();
    let url = ctx.rest.url(&["orphan"]);
    let mut doc = ctx
        .rest
        .get(url.clone())
        .await
        .map_err(|e| CliError::rest(what(), e))?;
    let orphans = match take(&mut doc, "orphans", &url).map_err(|e| CliError::rest(what(), e))? {
        Value::Array(items) => items,
        _ => Vec::new(),
    };
    if let Some(Value::Object(unlisted)) = doc.get("unlisted") {
        for (backend, why) in unlisted {
            eprintln!(
                "backend {backend} was not listed: {}",
                why.as_str().unwrap_or_default()
            );
        }
    }
    ctx.print(Kind::Orphan, &orphans)
}

/// `import volume BACKEND INTERNAL_NAME` (or a volume handle) `--name N --class C`.
pub async fn import(ctx: &Ctx, kind: ImportKind) -> CliResult<()> {
    let ImportKind::Volume {
        backend,
        internal_name,
        name,
        class,
        no_manage,
    } = kind;
    let mut body = json!({ "name": name, "storageClass": class, "noManage": no_manage });
    match internal_name {
        Some(internal) => {
            body["backend"] = json!(backend);
            body["internalName"] = json!(internal);
        }
        None => body["volumeHandle"] = json!(backend),
    }
    let what = || format!("could not import volume {name}");
    let url = ctx.rest.url(&["volume", "import"]);
    let mut doc = ctx
        .rest
        .post(url.clone(), &body)
        .await
        .map_err(|e| CliError::rest(what(), e))?;
    let volume = take(&mut doc, "volume", &url).map_err(|e| CliError::rest(what(), e))?;
    ctx.print(Kind::Volume, &[volume])
}

/// `reconcile backend NAME`: what the comparison found (a summary, or the report as JSON or
/// YAML).
pub async fn reconcile(ctx: &Ctx, kind: ReconcileKind) -> CliResult<()> {
    let ReconcileKind::Backend { name } = kind;
    let what = || format!("could not reconcile backend {name}");
    let url = ctx.rest.url(&["backend", &name, "reconcile"]);
    let mut doc = ctx
        .rest
        .post(url.clone(), &json!({}))
        .await
        .map_err(|e| CliError::rest(what(), e))?;
    let report = take(&mut doc, "reconcile", &url).map_err(|e| CliError::rest(what(), e))?;
    match ctx.format {
        OutputFormat::Json => ctx.write(&json_text(&report)),
        OutputFormat::Yaml => ctx.write(&yaml_text(&report)?),
        _ => ctx.write(&summary(&report)),
    }
}

/// `backend B: 12 volumes on the array; missing: a, b; found: none; changed: none; 1 orphan`.
fn summary(report: &Value) -> String {
    let names = |key: &str| match report.get(key).and_then(Value::as_array) {
        Some(items) if !items.is_empty() => items
            .iter()
            .map(|v| v.as_str().unwrap_or_default())
            .collect::<Vec<_>>()
            .join(", "),
        _ => "none".to_string(),
    };
    let orphans = report
        .get("orphans")
        .and_then(Value::as_array)
        .map_or(0, Vec::len);
    format!(
        "backend {}: {} volumes on the array; missing: {}; found: {}; changed: {}; orphans: {orphans}\n",
        report
            .get("backend")
            .and_then(Value::as_str)
            .unwrap_or_default(),
        report.get("listed").and_then(Value::as_u64).unwrap_or(0),
        names("missing"),
        names("found"),
        names("changed"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_summary_names_what_changed() {
        let r = json!({"backend":"b","listed":3,"missing":["v1","v2"],"found":[],"changed":["v3"],"orphans":[{}]});
        assert_eq!(
            summary(&r),
            "backend b: 3 volumes on the array; missing: v1, v2; found: none; changed: v3; orphans: 1\n"
        );
    }
}
