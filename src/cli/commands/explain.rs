//! `explain storageclass NAME`: every pool of every backend, whether a volume of the class
//! would be tried there, and why not.

use serde_json::Value;

use super::client::Ctx;
use crate::cli::client_args::{ExplainKind, OutputFormat};
use crate::cli::error::{CliError, CliResult, RestError};
use crate::cli::output::{Table, human_size, items_doc, text};

pub async fn run(ctx: &Ctx, kind: ExplainKind) -> CliResult<()> {
    let ExplainKind::StorageClass {
        name,
        protocol,
        size,
        topology,
    } = kind;
    let what = || format!("could not explain storage class {name}");
    let mut url = ctx.rest.url(&["storageclass", &name, "explain"]);
    {
        let mut query = url.query_pairs_mut();
        if let Some(p) = protocol {
            query.append_pair("protocol", p.as_str());
        }
        if let Some(s) = &size {
            query.append_pair("size", s);
        }
        if let Some(t) = &topology {
            query.append_pair("topology", t);
        }
    }
    let mut doc = ctx
        .rest
        .get(url.clone())
        .await
        .map_err(|e| CliError::rest(what(), e))?;
    let explanation = match doc.get_mut("explanation").map(Value::take) {
        Some(e @ Value::Object(_)) => e,
        _ => {
            return Err(CliError::rest(
                what(),
                RestError::BadResponse {
                    url: url.to_string(),
                    detail: "there is no \"explanation\" in the answer".into(),
                },
            ));
        }
    };
    ctx.write(&render(ctx.format, &explanation)?)
}

fn pools(explanation: &Value) -> &[Value] {
    explanation
        .get("pools")
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

fn is_candidate(pool: &Value) -> bool {
    pool.get("candidate").and_then(Value::as_bool) == Some(true)
}

/// Tables: a summary line, then BACKEND, POOL, CANDIDATE, REASONS. `name`: the candidate
/// pools as BACKEND/POOL.
fn render(format: OutputFormat, explanation: &Value) -> CliResult<String> {
    let pools = pools(explanation);
    match format {
        OutputFormat::Json | OutputFormat::Yaml => {
            items_doc(format, std::slice::from_ref(explanation))
        }
        OutputFormat::Name => Ok(pools
            .iter()
            .filter(|p| is_candidate(p))
            .map(|p| format!("{}/{}\n", text(p, &["backend"]), text(p, &["pool"])))
            .collect()),
        OutputFormat::Table | OutputFormat::Wide => {
            let mut table = Table::new(["BACKEND", "POOL", "CANDIDATE", "REASONS"]);
            for p in pools {
                let reasons: Vec<&str> = p
                    .get("reasons")
                    .and_then(Value::as_array)
                    .map(|r| r.iter().filter_map(Value::as_str).collect())
                    .unwrap_or_default();
                table.row([
                    text(p, &["backend"]),
                    text(p, &["pool"]),
                    if is_candidate(p) { "yes" } else { "no" }.to_string(),
                    reasons.join("; "),
                ]);
            }
            let protocol = match text(explanation, &["protocol"]) {
                p if p.is_empty() => "any".to_string(),
                p => p,
            };
            let size = match explanation.get("sizeBytes").and_then(Value::as_u64) {
                Some(bytes) => format!(", size {}", human_size(&bytes.to_string())),
                None => String::new(),
            };
            let candidates = pools.iter().filter(|p| is_candidate(p)).count();
            Ok(format!(
                "storage class {} (protocol {protocol}{size}): {candidates} of {} pools are \
                 candidates\n{}",
                text(explanation, &["storageClass"]),
                pools.len(),
                table.render()
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn explanation_table_and_names() {
        let e = json!({"storageClass": "gold", "protocol": "file", "sizeBytes": 1073741824u64,
        "pools": [
            {"backend": "lab", "pool": "fast", "candidate": true, "reasons": []},
            {"backend": "lab", "pool": "slow", "candidate": false,
             "reasons": ["media: hdd does not offer ssd", "backend lab is offline"]},
        ]});
        let t = render(OutputFormat::Table, &e).unwrap();
        assert!(
            t.starts_with("storage class gold (protocol file, size 1 GiB): 1 of 2 pools"),
            "{t}"
        );
        assert!(t.contains("| lab     | fast | yes       |"), "{t}");
        assert!(
            t.contains("| no        | media: hdd does not offer ssd; backend lab is offline |"),
            "{t}"
        );
        assert_eq!(render(OutputFormat::Name, &e).unwrap(), "lab/fast\n");
        let doc: Value = serde_json::from_str(&render(OutputFormat::Json, &e).unwrap()).unwrap();
        assert_eq!(doc["items"][0], e);
    }
}
