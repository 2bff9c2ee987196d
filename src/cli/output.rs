//! Printing results: tridentctl's `{"items":[…]}` JSON (indented 2) and its YAML form, one
//! name per line, and bordered tables with upper-case headers (as tablewriter draws them).

use std::io::Write;

use serde_json::{Value, json};

use super::client_args::OutputFormat;
use super::error::{CliError, CliResult};
use crate::model::{format_size, parse_size};

/// A table: headers and rows of cells.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Table {
    headers: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    pub fn new<S: Into<String>>(headers: impl IntoIterator<Item = S>) -> Table {
        Table {
            headers: headers.into_iter().map(Into::into).collect(),
            rows: Vec::new(),
        }
    }

    /// Adds a row; cells beyond the headers are dropped, missing ones are empty.
    pub fn row<S: Into<String>>(&mut self, cells: impl IntoIterator<Item = S>) {
        let mut row: Vec<String> = cells
            .into_iter()
            .map(|c| c.into().replace(['\n', '\r'], " "))
            .collect();
        row.resize(self.headers.len(), String::new());
        self.rows.push(row);
    }

    /// ```text
    /// +------+--------+
    /// | NAME | DRIVER |
    /// +------+--------+
    /// | lab  | fake   |
    /// +------+--------+
    /// ```
    pub fn render(&self) -> String {
        let width = |s: &str| s.chars().count();
        let mut widths: Vec<usize> = self.headers.iter().map(|h| width(h)).collect();
        for row in &self.rows {
            for (w, cell) in widths.iter_mut().zip(row) {
                *w = (*w).max(width(cell));
            }
        }
        let rule: String = widths.iter().fold("+".to_string(), |mut s, w| {
            s.push_str(&"-".repeat(w + 2));
            s.push('+');
            s
        });
        let line = |cells: &[String]| {
            let mut s = "|".to_string();
            for (cell, w) in cells.iter().zip(&widths) {
                s.push(' ');
                s.push_str(cell);
                s.push_str(&" ".repeat(w - width(cell) + 1));
                s.push('|');
            }
            s
        };
        let mut out = String::new();
        for l in [&rule, &line(&self.headers), &rule] {
            out.push_str(l);
            out.push('\n');
        }
        for row in &self.rows {
            out.push_str(&line(row));
            out.push('\n');
        }
        if !self.rows.is_empty() {
            out.push_str(&rule);
            out.push('\n');
        }
        out
    }
}

/// A document as indented JSON (2 spaces) with a final newline.
pub fn json_text(doc: &Value) -> String {
    let mut s = serde_json::to_string_pretty(doc).expect("a JSON value always serializes");
    s.push('\n');
    s
}

/// A document as YAML (keys sorted, as the JSON value keeps them).
pub fn yaml_text(doc: &Value) -> CliResult<String> {
    serde_saphyr::to_string(doc).map_err(|e| CliError::Input(format!("could not write YAML: {e}")))
}

/// `{"items":[…]}` as JSON or YAML.
pub fn items_doc(format: OutputFormat, items: &[Value]) -> CliResult<String> {
    let doc = json!({ "items": items });
    match format {
        OutputFormat::Yaml => yaml_text(&doc),
        _ => Ok(json_text(&doc)),
    }
}

/// The kinds of objects the REST API lists, and how each is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Backend,
    StorageClass,
    Volume,
    Snapshot,
    /// A backend's pool, as the backend shows it plus `backend` (`get pool`).
    Pool,
    /// An array volume no storch volume claims (`get orphans`).
    Orphan,
}

impl Kind {
    /// The object's name, as `-o name` prints it.
    pub fn name_of(self, item: &Value) -> String {
        match self {
            Kind::Backend => text(item, &["name"]),
            Kind::StorageClass | Kind::Volume => text(item, &["Config", "name"]),
            Kind::Orphan => format!(
                "{}/{}",
                text(item, &["backend"]),
                text(item, &["internalName"])
            ),
            Kind::Snapshot | Kind::Pool => {
                let owner = if self == Kind::Snapshot {
                    "volume"
                } else {
                    "backend"
                };
                format!("{}/{}", text(item, &[owner]), text(item, &["name"]))
            }
        }
    }

    pub fn table(self, items: &[Value], wide: bool) -> Table {
        match self {
            Kind::Backend => backend_table(items, wide),
            Kind::StorageClass => class_table(items),
            Kind::Volume => volume_table(items, wide),
            Kind::Snapshot => snapshot_table(items),
            Kind::Pool => pool_table(items, wide),
            Kind::Orphan => orphan_table(items),
        }
    }

    /// The objects in `format`.
    pub fn render(self, format: OutputFormat, items: &[Value]) -> CliResult<String> {
        match format {
            OutputFormat::Json | OutputFormat::Yaml => items_doc(format, items),
            OutputFormat::Name => Ok(items
                .iter()
                .map(|i| self.name_of(i) + "\n")
                .collect::<String>()),
            OutputFormat::Table | OutputFormat::Wide => {
                Ok(self.table(items, format == OutputFormat::Wide).render())
            }
        }
    }
}

fn backend_table(items: &[Value], wide: bool) -> Table {
    let mut headers = vec!["NAME", "DRIVER", "STATE", "USER STATE", "VOLUMES"];
    if wide {
        headers.extend(["PROTOCOL", "POOLS"]);
    }
    let mut table = Table::new(headers);
    for b in items {
        let state = match text(b, &["state"]) {
            s if s.is_empty() => match b.get("online") {
                Some(Value::Bool(false)) => "offline".to_string(),
                _ => "online".to_string(),
            },
            s => s,
        };
        let mut row = vec![
            text(b, &["name"]),
            text(b, &["config", "storageDriverName"]),
            state,
            // A server from before suspension shows none.
            match text(b, &["userState"]) {
                s if s.is_empty() => "normal".to_string(),
                s => s,
            },
            count(b, &["volumes"]),
        ];
        if wide {
            row.extend([text(b, &["protocol"]), count(b, &["storage"])]);
        }
        table.row(row);
    }
    table
}

fn class_table(items: &[Value]) -> Table {
    let mut table = Table::new(["NAME", "POOLS"]);
    for sc in items {
        let pools = match sc.get("storage") {
            Some(Value::Object(backends)) => backends
                .values()
                .map(|p| p.as_array().map_or(0, Vec::len))
                .sum::<usize>()
                .to_string(),
            _ => String::new(),
        };
        table.row([text(sc, &["Config", "name"]), pools]);
    }
    table
}

fn volume_table(items: &[Value], wide: bool) -> Table {
    let headers: &[&str] = if wide {
        &[
            "NAME",
            "INTERNAL NAME",
            "SIZE",
            "STORAGE CLASS",
            "PROTOCOL",
            "BACKEND",
            "POOL",
            "ACCESS MODE",
            "STATE",
        ]
    } else {
        &[
            "NAME",
            "SIZE",
            "STORAGE CLASS",
            "PROTOCOL",
            "BACKEND",
            "POOL",
            "STATE",
        ]
    };
    let mut table = Table::new(headers.iter().copied());
    for v in items {
        let name = text(v, &["Config", "name"]);
        let size = human_size(&text(v, &["Config", "size"]));
        let class = text(v, &["Config", "storageClass"]);
        let protocol = text(v, &["Config", "protocol"]);
        // A clone's `pool` is empty (as in Trident); `placedPool` is where it lives.
        let placed = text(v, &["placedPool"]);
        let (backend, pool, state) = (
            text(v, &["backend"]),
            if placed.is_empty() {
                text(v, &["pool"])
            } else {
                placed
            },
            text(v, &["state"]),
        );
        if wide {
            table.row([
                name,
                text(v, &["Config", "internalName"]),
                size,
                class,
                protocol,
                backend,
                pool,
                text(v, &["Config", "accessMode"]),
                state,
            ]);
        } else {
            table.row([name, size, class, protocol, backend, pool, state]);
        }
    }
    table
}

fn orphan_table(items: &[Value]) -> Table {
    let mut table = Table::new(["BACKEND", "INTERNAL NAME", "POOL", "SIZE"]);
    for o in items {
        table.row([
            text(o, &["backend"]),
            text(o, &["internalName"]),
            text(o, &["pool"]),
            human_size(&text(o, &["size"])),
        ]);
    }
    table
}

fn snapshot_table(items: &[Value]) -> Table {
    let mut table = Table::new(["VOLUME", "NAME", "SIZE", "CREATED", "STATE"]);
    for s in items {
        table.row([
            text(s, &["volume"]),
            text(s, &["name"]),
            bytes(s, "sizeBytes"),
            text(s, &["created"]),
            text(s, &["state"]),
        ]);
    }
    table
}

fn pool_table(items: &[Value], wide: bool) -> Table {
    let mut headers = vec!["BACKEND", "POOL", "FREE", "OFFERS"];
    if wide {
        headers.push("STORAGE CLASSES");
    }
    let mut table = Table::new(headers);
    for p in items {
        let mut row = vec![
            text(p, &["backend"]),
            text(p, &["name"]),
            bytes(p, "freeBytes"),
            offers(p.get("storageAttributes")),
        ];
        if wide {
            let classes: Vec<String> = p
                .get("storageClasses")
                .and_then(Value::as_array)
                .map(|c| {
                    c.iter()
                        .filter_map(Value::as_str)
                        .map(str::to_string)
                        .collect()
                })
                .unwrap_or_default();
            row.push(classes.join(","));
        }
        table.row(row);
    }
    table
}

/// A pool's offers in one line, in attribute order: `IOPS=1000-2000 media=ssd,hdd
/// snapshots=true`.
fn offers(attributes: Option<&Value>) -> String {
    let Some(Value::Object(attributes)) = attributes else {
        return String::new();
    };
    let one = |v: &Value| match v {
        Value::Array(values) => values.iter().map(one_value).collect::<Vec<_>>().join(","),
        other => one_value(other),
    };
    attributes
        .iter()
        .map(|(name, offer)| {
            let value = match (offer.get("offer"), offer.get("min"), offer.get("max")) {
                (Some(o), _, _) => one(o),
                (None, Some(min), Some(max)) => format!("{}-{}", one_value(min), one_value(max)),
                _ => one_value(offer),
            };
            format!("{name}={value}")
        })
        .collect::<Vec<_>>()
        .join(" ")
}

fn one_value(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The value at `path` as text: strings as they are, numbers and booleans written out,
/// anything else (or nothing) empty.
pub fn text(v: &Value, path: &[&str]) -> String {
    let mut at = v;
    for key in path {
        match at.get(key) {
            Some(next) => at = next,
            None => return String::new(),
        }
    }
    match at {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        Value::Bool(b) => b.to_string(),
        _ => String::new(),
    }
}

/// The byte count at `key` in IEC units (`2 GiB`); empty when there is none.
fn bytes(v: &Value, key: &str) -> String {
    v.get(key)
        .and_then(Value::as_u64)
        .map(format_size)
        .unwrap_or_default()
}

/// The length of the array or object at `path`, as text.
fn count(v: &Value, path: &[&str]) -> String {
    let at = path.iter().try_fold(v, |at, key| at.get(key));
    match at {
        Some(Value::Array(a)) => a.len().to_string(),
        Some(Value::Object(o)) => o.len().to_string(),
        _ => "0".to_string(),
    }
}

/// A size as the client gave it (`1Gi`, `1073741824`) in IEC units; unparsable ones as given.
pub fn human_size(raw: &str) -> String {
    if raw.is_empty() {
        return String::new();
    }
    parse_size(raw)
        .map(format_size)
        .unwrap_or_else(|_| raw.to_string())
}

/// Writes to stdout. A reader that went away (`storch get volume | head -1`) is not an error:
/// `Ok(false)` tells a streaming caller to stop.
pub fn emit(out: &mut impl Write, text: &str) -> CliResult<bool> {
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(false),
        Err(e) => Err(CliError::Output(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_are_bordered_and_aligned() {
        let mut t = Table::new(["NAME", "VOLUMES"]);
        t.row(["lab", "2"]);
        t.row(["longer-name"]);
        assert_eq!(
            t.render(),
            "+-------------+---------+\n\
             | NAME        | VOLUMES |\n\
             +-------------+---------+\n\
             | lab         | 2       |\n\
             | longer-name |         |\n\
             +-------------+---------+\n"
        );
        assert_eq!(
            Table::new(["NAME"]).render(),
            "+------+\n| NAME |\n+------+\n"
        );
    }

    #[test]
    fn items_and_names() {
        let vols = vec![json!({"Config": {"name": "v1", "size": "1Gi"}})];
        assert_eq!(
            Kind::Volume.render(OutputFormat::Name, &vols).unwrap(),
            "v1\n"
        );
        let doc: Value =
            serde_json::from_str(&Kind::Volume.render(OutputFormat::Json, &vols).unwrap()).unwrap();
        assert_eq!(doc["items"][0]["Config"]["name"], "v1");
        let yaml = Kind::Volume.render(OutputFormat::Yaml, &vols).unwrap();
        assert!(yaml.contains("items:"), "{yaml}");
        assert!(yaml.contains("name: v1"), "{yaml}");
        let table = Kind::Volume.render(OutputFormat::Table, &vols).unwrap();
        assert!(table.contains("| v1   | 1 GiB |"), "{table}");
    }

    #[test]
    fn sizes() {
        assert_eq!(human_size("1Gi"), "1 GiB");
        assert_eq!(human_size("1073741824"), "1 GiB");
        assert_eq!(human_size("lots"), "lots");
        assert_eq!(human_size(""), "");
    }

    #[test]
    fn pools_show_their_offers_on_one_line() {
        let pools = vec![
            json!({"backend": "sf", "name": "Gold", "freeBytes": 1u64 << 40,
            "storageClasses": ["gold", "fast"],
            "storageAttributes": {"IOPS": {"min": 7000, "max": 9000},
                "media": {"offer": ["ssd", "hybrid"]}, "snapshots": {"offer": true}}}),
        ];
        let t = Kind::Pool.table(&pools, true).render();
        assert!(
            t.contains(
                "| sf      | Gold | 1 TiB | IOPS=7000-9000 media=ssd,hybrid snapshots=true \
                 | gold,fast       |"
            ),
            "{t}"
        );
        assert_eq!(
            Kind::Pool.render(OutputFormat::Name, &pools).unwrap(),
            "sf/Gold\n"
        );
        let t = Kind::Pool.table(&[json!({"name": "p"})], false).render();
        assert!(t.contains("|         | p    |      |        |"), "{t}");
    }

    #[test]
    fn backend_state_falls_back_to_online() {
        let items = vec![
            json!({"name": "a", "config": {"storageDriverName": "fake"}, "online": false, "volumes": ["v"]}),
            json!({"name": "b", "state": "failed", "volumes": []}),
        ];
        let t = Kind::Backend.table(&items, true).render();
        assert!(
            t.contains("| a    | fake   | offline | normal     | 1       |"),
            "{t}"
        );
        assert!(
            t.contains("| b    |        | failed  | normal     | 0       |"),
            "{t}"
        );
        assert!(t.contains("PROTOCOL") && t.contains("POOLS"), "{t}");
    }

    #[test]
    fn a_suspended_backend_says_so_in_its_own_column() {
        let items = vec![json!({"name": "a", "config": {"storageDriverName": "fake"},
            "state": "online", "userState": "suspended", "volumes": ["v"]})];
        let t = Kind::Backend.table(&items, false).render();
        assert!(
            t.contains("| NAME | DRIVER | STATE  | USER STATE | VOLUMES |"),
            "{t}"
        );
        assert!(
            t.contains("| a    | fake   | online | suspended  | 1       |"),
            "{t}"
        );
    }
}
