//! The config file of `storch serve --config FILE`: server settings plus the backends and
//! storage classes storch should have (declarative configuration, applied at start and on
//! SIGHUP).
//!
//! ```yaml
//! server:            # every key optional; command-line flags win over the file
//!   dataDir: ./storch-data
//!   address: 127.0.0.1
//!   port: 8000
//!   logFormat: text  # or json
//! backends:          # backend configs exactly as for POST /trident/v1/backend
//!   - {version: 1, storageDriverName: local, backendName: local, pools: {...}}
//! storageClasses:    # storage classes exactly as for POST /trident/v1/storageclass
//!   - {name: fast, attributes: {media: ssd}}
//! ```
//!
//! The NexentaStor CSI driver's whole `nexentastor_map` file is accepted too: one
//! `nexentastor-iscsi` backend per entry, named after it (see `drivers::nexentastor::config`).

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::actors::{Declared, backend_entry};
use crate::model::StorageClassConfig;

/// The `server` section.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServerSection {
    pub data_dir: Option<PathBuf>,
    pub address: Option<String>,
    pub port: Option<u16>,
    pub log_format: Option<String>,
}

/// A parsed, validated config file.
#[derive(Debug, Clone, PartialEq)]
pub struct FileConfig {
    pub path: PathBuf,
    pub server: ServerSection,
    pub backends: Vec<Value>,
    pub storage_classes: Vec<StorageClassConfig>,
    /// One per entry with fields storch ignores (the backend configs and storage classes are
    /// Trident-shaped: unknown fields are accepted, as Trident did, and named here), each
    /// naming the file, the entry and the fields; `serve` logs them each time it applies the
    /// file.
    pub warnings: Vec<String>,
}

/// A config file problem: names the file, the entry and the field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}: {message}")]
pub struct ConfigError {
    pub file: String,
    pub message: String,
}

impl FileConfig {
    /// Reads and validates `path`.
    pub fn from_file(path: &Path) -> Result<FileConfig, ConfigError> {
        let err = |message: String| ConfigError {
            file: path.display().to_string(),
            message,
        };
        let text = std::fs::read_to_string(path).map_err(|e| err(format!("cannot read: {e}")))?;
        FileConfig::parse(path, &text).map_err(err)
    }

    /// Parses the text of a config file (`path` only names it).
    pub fn parse(path: &Path, text: &str) -> Result<FileConfig, String> {
        let doc = crate::yaml::parse(text)?;
        // The seed CSI driver's `nexentastor_map` file: one backend per entry.
        if let Some(backends) = crate::drivers::nexentastor::expand_map(&doc) {
            let mut backends = backends?;
            absolute_backend_paths(&mut backends)?;
            return FileConfig {
                path: path.to_path_buf(),
                server: ServerSection::default(),
                warnings: ignored(path, &backends, &[], &[]),
                backends,
                storage_classes: Vec::new(),
            }
            .checked();
        }
        let doc = match doc {
            Value::Null => serde_json::Map::new(),
            Value::Object(map) => map,
            other => return Err(format!("expected a mapping at the top, found {other}")),
        };
        for key in doc.keys() {
            if !matches!(key.as_str(), "server" | "backends" | "storageClasses") {
                return Err(format!(
                    "unknown key {key:?} (expected server, backends, storageClasses)"
                ));
            }
        }
        let server = match doc.get("server") {
            None | Some(Value::Null) => ServerSection::default(),
            Some(Value::Object(s)) => parse_server(s)?,
            Some(_) => return Err("server: expected a mapping".into()),
        };
        let list = |key: &str| -> Result<Vec<Value>, String> {
            match doc.get(key) {
                None | Some(Value::Null) => Ok(Vec::new()),
                Some(Value::Array(items)) => Ok(items.clone()),
                Some(_) => Err(format!("{key}: expected a list")),
            }
        };
        let mut backends = list("backends")?;
        absolute_backend_paths(&mut backends)?;
        let (storage_classes, class_fields): (Vec<_>, Vec<_>) = list("storageClasses")?
            .into_iter()
            .enumerate()
            .map(|(i, v)| {
                StorageClassConfig::from_value_reporting(v)
                    .map_err(|e| format!("storageClasses[{i}]: {e}"))
            })
            .collect::<Result<Vec<_>, _>>()?
            .into_iter()
            .unzip();
        FileConfig {
            path: path.to_path_buf(),
            server,
            warnings: ignored(path, &backends, &storage_classes, &class_fields),
            backends,
            storage_classes,
        }
        .checked()
    }

    /// The file as a whole, checked as applying it will check it (so a bad file stops the
    /// start and a bad reload changes nothing): nothing contacts an array here.
    fn checked(self) -> Result<FileConfig, String> {
        self.declared().check()?;
        Ok(self)
    }

    /// The declaration to hand to `Core::apply_declared`.
    pub fn declared(&self) -> Declared {
        Declared {
            source: self.path.display().to_string(),
            backends: self.backends.clone(),
            storage_classes: self.storage_classes.clone(),
        }
    }
}

/// The file's warnings: per backend config the keys its driver ignores, per storage class the
/// fields it ignores (`class_fields[i]` for `classes[i]`), one line per entry.
fn ignored(
    path: &Path,
    backends: &[Value],
    classes: &[StorageClassConfig],
    class_fields: &[Vec<String>],
) -> Vec<String> {
    let line = |entry: String, fields: Vec<String>| {
        (!fields.is_empty()).then(|| {
            let fields = crate::model::ignored_warnings(fields).join("; ");
            format!("{}: {entry}: {fields}", path.display())
        })
    };
    let backends = backends
        .iter()
        .enumerate()
        .filter_map(|(i, b)| line(backend_entry(i, b), crate::drivers::ignored_keys(b)));
    let classes = classes
        .iter()
        .zip(class_fields)
        .enumerate()
        .filter_map(|(i, (c, fields))| {
            line(format!("storageClasses[{i}] ({})", c.name), fields.clone())
        });
    backends.chain(classes).collect()
}

/// Makes the paths of every backend config of a file absolute.
fn absolute_backend_paths(backends: &mut [Value]) -> Result<(), String> {
    for (i, b) in backends.iter_mut().enumerate() {
        let at = backend_entry(i, b);
        if !b.is_object() {
            return Err(format!("{at}: expected a backend config mapping"));
        }
        absolute_paths(b).map_err(|e| format!("{at}: {e}"))?;
    }
    Ok(())
}

/// Makes the file paths of a backend config absolute (relative to the current directory), so
/// the recorded config means the same thing whatever directory storch is restarted from:
/// `pools.*.path` of the local driver and `statePath` of the fake one.
fn absolute_paths(backend: &mut Value) -> Result<(), String> {
    let cwd =
        std::env::current_dir().map_err(|e| format!("cannot read the current directory: {e}"))?;
    let fix = |v: &mut Value| {
        if let Value::String(p) = v
            && Path::new(p.as_str()).is_relative()
        {
            *p = cwd.join(p.as_str()).display().to_string();
        }
    };
    if let Some(p) = backend.get_mut("statePath") {
        fix(p);
    }
    if backend.get("storageDriverName").and_then(Value::as_str) == Some("local")
        && let Some(Value::Object(pools)) = backend.get_mut("pools")
    {
        for pool in pools.values_mut() {
            if let Some(p) = pool.get_mut("path") {
                fix(p);
            }
        }
    }
    Ok(())
}

fn parse_server(s: &serde_json::Map<String, Value>) -> Result<ServerSection, String> {
    let mut out = ServerSection::default();
    for (key, v) in s {
        let text = || {
            v.as_str()
                .map(str::to_string)
                .ok_or_else(|| format!("server.{key}: expected a string"))
        };
        match key.as_str() {
            "dataDir" => out.data_dir = Some(PathBuf::from(text()?)),
            "address" => out.address = Some(text()?),
            "logFormat" => {
                let f = text()?;
                if f != "text" && f != "json" {
                    return Err(format!("server.logFormat: {f:?} is not text or json"));
                }
                out.log_format = Some(f);
            }
            "port" => {
                let port = v
                    .as_u64()
                    .and_then(|p| u16::try_from(p).ok())
                    .ok_or_else(|| "server.port: expected a port number (0-65535)".to_string())?;
                out.port = Some(port);
            }
            other => {
                return Err(format!(
                    "server.{other}: unknown key (expected dataDir, address, port, logFormat)"
                ));
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<FileConfig, String> {
        FileConfig::parse(Path::new("storch.yaml"), text)
    }

    #[test]
    fn full_file() {
        let c = parse(
            "server:\n  dataDir: /tmp/d\n  port: 9000\n  logFormat: json\nbackends:\n  - {version: 1, storageDriverName: fake, instanceName: f, pools: {p: {attributes: {}, sizeBytes: 1000000000}}}\nstorageClasses:\n  - {name: fast, attributes: {media: ssd}}\n",
        )
        .unwrap();
        assert_eq!(c.server.port, Some(9000));
        assert_eq!(c.server.data_dir, Some(PathBuf::from("/tmp/d")));
        assert_eq!(c.backends.len(), 1);
        assert_eq!(c.storage_classes[0].name, "fast");
        assert_eq!(c.declared().source, "storch.yaml");
        assert_eq!(parse("").unwrap().backends.len(), 0);
    }

    #[test]
    fn relative_paths_become_absolute() {
        let c = parse(
            "backends:\n  - {version: 1, storageDriverName: local, backendName: l, pools: {a: {path: ./x/a}, b: {path: /abs}}}\n  - {version: 1, storageDriverName: fake, instanceName: f, statePath: s.json, pools: {p: {attributes: {}, sizeBytes: 1000000000}}}\n",
        )
        .unwrap();
        let cwd = std::env::current_dir().unwrap();
        assert_eq!(
            c.backends[0]["pools"]["a"]["path"],
            cwd.join("./x/a").display().to_string()
        );
        assert_eq!(c.backends[0]["pools"]["b"]["path"], "/abs");
        assert_eq!(
            c.backends[1]["statePath"],
            cwd.join("s.json").display().to_string()
        );
    }

    #[test]
    fn the_example_file_is_valid() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/local.yaml");
        let c = FileConfig::from_file(&path).unwrap();
        assert_eq!(c.backends.len(), 1);
        let names: Vec<&str> = c.storage_classes.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["fast", "bulk", "any"]);
        for b in &c.backends {
            crate::drivers::build_driver(b).unwrap();
        }
    }

    #[test]
    fn ignored_fields_are_named_per_entry() {
        let c = parse(
            "backends:\n  - {version: 1, storageDriverName: fake, backendName: f, instanceName: f, colour: red, pools: {p: {attributes: {}, sizeBytes: 1000000000, size: 1Gi}}, password: hunter2-canary}\n  - {version: 1, storageDriverName: fake, instanceName: g, pools: {}}\nstorageClasses:\n  - {name: fast, provisioner: x, attributes: {media: ssd}}\n  - {name: slow}\n",
        )
        .unwrap();
        assert_eq!(
            c.warnings,
            [
                "storch.yaml: backends[0] (f): unknown field \"colour\" was ignored; unknown field \"pools.p.size\" was ignored",
                "storch.yaml: storageClasses[0] (fast): unknown field \"provisioner\" was ignored",
            ]
        );
        assert!(!c.warnings.concat().contains("hunter2"));
        assert!(parse("backends: []\n").unwrap().warnings.is_empty());
    }

    #[test]
    fn errors_name_the_entry_and_field() {
        for (text, needle) in [
            ("server:\n  port: 70000\n", "server.port"),
            ("server:\n  logFormat: xml\n", "server.logFormat"),
            ("server:\n  colour: red\n", "server.colour"),
            ("backends: {}\n", "backends: expected a list"),
            ("backends:\n  - 3\n", "backends[0]"),
            (
                "backends:\n  - {version: 1, storageDriverName: nope}\n",
                "backends[0]: unknown storage driver",
            ),
            (
                "storageClasses:\n  - {name: x, attributes: {media: 1}}\n",
                "storageClasses[0]",
            ),
            (
                "storageClasses:\n  - {name: x, attributes: {colour: red}}\n",
                "storageClasses[0]",
            ),
            (
                "backends:\n  - {version: 1, storageDriverName: fake, backendName: b, protocol: file, pools: {p: {size: 1Gi, attributes: {}}}}\n  - {version: 1, storageDriverName: fake, backendName: b, protocol: file, pools: {p: {size: 1Gi, attributes: {}}}}\n",
                "backends[1] (b): backend b is declared twice",
            ),
            (
                "storageClasses:\n  - {name: x}\n  - {name: x}\n",
                "storageClasses[1]: storage class x is declared twice",
            ),
            (
                "storageClasses:\n  - {name: bad/name}\n",
                "storageClasses[0]: name",
            ),
            (
                "storageClasses:\n  - {name: x, storagePools: {b: [\"(\"]}}\n",
                "storageClasses[0] (x)",
            ),
            ("extra: 1\n", "unknown key \"extra\""),
            ("a: [\n", "line"),
        ] {
            let err = parse(text).unwrap_err();
            assert!(err.contains(needle), "{text:?}: {err}");
        }
    }
}
