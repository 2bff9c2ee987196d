//! `version [--client]`: storch's version of the server and of this client, tridentctl's
//! table and JSON shape (plus the Trident API version storch speaks).

use serde_json::{Value, json};

use super::client::Ctx;
use crate::api::TRIDENT_VERSION;
use crate::cli::client_args::OutputFormat;
use crate::cli::error::{CliError, CliResult};
use crate::cli::output::{Table, emit, json_text, yaml_text};

const CLIENT_VERSION: &str = env!("CARGO_PKG_VERSION");

pub async fn run(ctx: &Ctx) -> CliResult<()> {
    let doc = ctx
        .rest
        .get(ctx.rest.url(&["version"]))
        .await
        .map_err(|e| CliError::rest("could not get server version", e))?;
    let trident = doc
        .get("version")
        .and_then(Value::as_str)
        .unwrap_or_default();
    // A Trident server has no storchVersion: show its own version then.
    let server = doc
        .get("storchVersion")
        .and_then(Value::as_str)
        .unwrap_or(trident);
    let server = version_object(server, trident);
    ctx.write(&render(ctx.format, Some(&server))?)
}

pub fn client_only(format: OutputFormat) -> CliResult<()> {
    emit(&mut std::io::stdout().lock(), &render(format, None)?).map(|_| ())
}

fn render(format: OutputFormat, server: Option<&Value>) -> CliResult<String> {
    let client = version_object(CLIENT_VERSION, TRIDENT_VERSION);
    let mut doc = json!({ "client": client });
    if let Some(server) = server {
        doc["server"] = server.clone();
    }
    let field = |v: &Value, key: &str| v[key].as_str().unwrap_or_default().to_string();
    match format {
        OutputFormat::Json => Ok(json_text(&doc)),
        OutputFormat::Yaml => yaml_text(&doc),
        OutputFormat::Name => Ok(server
            .into_iter()
            .chain([&client])
            .map(|v| field(v, "version") + "\n")
            .collect()),
        OutputFormat::Table | OutputFormat::Wide => {
            let wide = format == OutputFormat::Wide;
            let mut headers = Vec::new();
            let mut row = Vec::new();
            for (who, v) in server
                .map(|s| ("SERVER", s))
                .into_iter()
                .chain([("CLIENT", &client)])
            {
                headers.push(format!("{who} VERSION"));
                row.push(field(v, "version"));
                if wide {
                    headers.push(format!("{who} TRIDENT API VERSION"));
                    row.push(field(v, "tridentVersion"));
                }
            }
            let mut table = Table::new(headers);
            table.row(row);
            Ok(table.render())
        }
    }
}

/// tridentctl's version object: the parts of a semantic version, plus the Trident API version.
fn version_object(version: &str, trident: &str) -> Value {
    let (rest, build) = version.split_once('+').unwrap_or((version, ""));
    let (core, pre) = rest.split_once('-').unwrap_or((rest, ""));
    let mut parts = core.split('.').map(|p| p.parse::<u64>().unwrap_or(0));
    json!({
        "version": version,
        "majorVersion": parts.next().unwrap_or(0),
        "minorVersion": parts.next().unwrap_or(0),
        "patchVersion": parts.next().unwrap_or(0),
        "preRelease": pre,
        "buildMetadata": build,
        "apiVersion": "1",
        "tridentVersion": trident,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions() {
        let v = version_object("1.2.3-rc.1+abc", "18.07.0");
        assert_eq!(v["majorVersion"], 1);
        assert_eq!(v["minorVersion"], 2);
        assert_eq!(v["patchVersion"], 3);
        assert_eq!(v["preRelease"], "rc.1");
        assert_eq!(v["buildMetadata"], "abc");
        let t = render(OutputFormat::Table, None).unwrap();
        assert!(t.contains("| CLIENT VERSION |"), "{t}");
        assert!(t.contains(&format!("| {CLIENT_VERSION} ")), "{t}");
        let server = version_object("9.9.9", "18.07.0");
        let t = render(OutputFormat::Wide, Some(&server)).unwrap();
        assert!(
            t.contains("| SERVER VERSION | SERVER TRIDENT API VERSION | CLIENT VERSION |"),
            "{t}"
        );
        let doc: Value =
            serde_json::from_str(&render(OutputFormat::Json, Some(&server)).unwrap()).unwrap();
        assert_eq!(doc["server"]["version"], "9.9.9");
        assert_eq!(doc["client"]["version"], CLIENT_VERSION);
    }
}
