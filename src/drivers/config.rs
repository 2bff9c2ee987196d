//! The common part of every backend config (docs/trident-contract.md#backend-config).
//!
//! Keys are matched like Go's `encoding/json` does: an exact match first, else a
//! case-insensitive one (`StorageDriverName` is accepted for `storageDriverName`). Unknown keys
//! are ignored, and named: every parser reads through [`field`], which notes what it read while
//! [`recording`] runs, so `registry::ignored_keys` knows the keys no parser read. Error
//! messages name the field and never echo a value that could be a secret.

use serde_json::{Map, Value};

use crate::drivers::DriverError;
use crate::model::Segment;

/// The only backend config version there is.
pub const CONFIG_VERSION: u32 = 1;

/// `defaults.size` when the config does not give one: `1G`, binary (1 GiB).
pub const DEFAULT_VOLUME_SIZE: &str = "1G";

/// Parsed common settings. Secrets are not here: see `crate::secrets`.
#[derive(Debug, Clone, PartialEq)]
pub struct CommonConfig {
    pub version: u32,
    pub storage_driver_name: String,
    pub backend_name: Option<String>,
    /// `None`: driver default; `Some("")`: no prefix; `Some(p)`: prefix `p`.
    pub storage_prefix: Option<String>,
    /// `defaults.size` in bytes (default 1 GiB).
    pub default_size_bytes: u64,
    /// `supportedTopologies`: the topology segments the backend's pools are reachable from
    /// (empty: from everywhere). Each is a map of topology labels, e.g.
    /// `{"topology.kubernetes.io/zone": "z1"}`.
    pub supported_topologies: Vec<Segment>,
}

impl CommonConfig {
    /// Validates and parses the common settings from a backend config document.
    ///
    /// Fields that Trident 18.07 ignores with a warning (`debug`, `disableDelete`) are logged at
    /// warn level; [`CommonConfig::warnings`] returns the same messages for callers that want to
    /// show them.
    pub fn parse(doc: &serde_json::Value) -> Result<CommonConfig, crate::drivers::DriverError> {
        let obj = as_object(doc)?;

        let version = match field(obj, "version") {
            None | Some(Value::Null) => 0,
            Some(Value::Number(n)) if n.is_i64() || n.is_u64() => n
                .as_i64()
                .map(i128::from)
                .or(n.as_u64().map(i128::from))
                .unwrap_or_default(),
            Some(other) => return Err(wrong_type("version", "an integer", Some(other))),
        };
        if version != i128::from(CONFIG_VERSION) {
            return Err(DriverError::Invalid(format!(
                "unexpected config file version; found {version}, expected {CONFIG_VERSION}"
            )));
        }

        let storage_driver_name = match opt_str(obj, "storageDriverName")? {
            Some(name) if !name.is_empty() => name.to_string(),
            _ => {
                return Err(DriverError::Invalid(
                    "missing storage driver name in configuration file".to_string(),
                ));
            }
        };

        let backend_name = match opt_str(obj, "backendName")? {
            Some("") | None => None,
            Some(name) => {
                crate::model::validate_name("backendName", name)
                    .map_err(|e| DriverError::Invalid(e.to_string()))?;
                Some(name.to_string())
            }
        };

        let storage_prefix = match field(obj, "storagePrefix") {
            None | Some(Value::Null) => None,
            Some(Value::Object(m)) if m.is_empty() => None,
            Some(Value::String(s)) => Some(s.clone()),
            Some(_) => {
                return Err(DriverError::Invalid(
                    "invalid value for storage prefix (storagePrefix must be a string, {} or null)"
                        .to_string(),
                ));
            }
        };

        let default_size_bytes = parse_default_size(obj)?;
        let supported_topologies = parse_topologies(obj)?;

        for warning in Self::warnings(doc) {
            tracing::warn!(driver = %storage_driver_name, "{warning}");
        }

        Ok(CommonConfig {
            version: CONFIG_VERSION,
            storage_driver_name,
            backend_name,
            storage_prefix,
            default_size_bytes,
            supported_topologies,
        })
    }

    /// Warnings about fields that are accepted but ignored (`debug`, `disableDelete`).
    pub fn warnings(doc: &serde_json::Value) -> Vec<String> {
        let Some(obj) = doc.as_object() else {
            return Vec::new();
        };
        let mut out = Vec::new();
        if field(obj, "debug").is_some() {
            out.push(
                "the debug field is ignored; use debugTraceFlags or the log level".to_string(),
            );
        }
        if field(obj, "disableDelete").is_some() {
            out.push("the disableDelete field is ignored".to_string());
        }
        out
    }
}

/// `supportedTopologies`: a list of label maps (string values), each checked as CSI checks a
/// topology segment; duplicates are dropped. Errors name the element and the label.
fn parse_topologies(obj: &Map<String, Value>) -> Result<Vec<Segment>, DriverError> {
    const FIELD: &str = "supportedTopologies";
    let items = match field(obj, FIELD) {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Array(items)) => items,
        Some(other) => {
            return Err(wrong_type(
                FIELD,
                "a list of topology label maps",
                Some(other),
            ));
        }
    };
    let mut out: Vec<Segment> = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let at = format!("{FIELD}[{i}]");
        let Value::Object(labels) = item else {
            return Err(wrong_type(&at, "a map of topology labels", Some(item)));
        };
        let mut segment = Segment::new();
        for (k, v) in labels {
            let Value::String(v) = v else {
                return Err(wrong_type(&format!("{at}.{k}"), "a string", Some(v)));
            };
            segment.insert(k.clone(), v.clone());
        }
        crate::model::topology::check_segment(&at, &segment)
            .map_err(|e| DriverError::Invalid(format!("invalid value for {e}")))?;
        if !out.contains(&segment) {
            out.push(segment);
        }
    }
    Ok(out)
}

fn parse_default_size(obj: &Map<String, Value>) -> Result<u64, DriverError> {
    let defaults = match field(obj, "defaults") {
        None | Some(Value::Null) => None,
        Some(Value::Object(m)) => Some(m),
        Some(other) => return Err(wrong_type("defaults", "an object", Some(other))),
    };
    let size = match defaults.and_then(|d| field(d, "size")) {
        None | Some(Value::Null) => DEFAULT_VOLUME_SIZE,
        Some(Value::String(s)) if s.trim().is_empty() => DEFAULT_VOLUME_SIZE,
        Some(Value::String(s)) => s.as_str(),
        Some(other) => return Err(wrong_type("defaults.size", "a string", Some(other))),
    };
    crate::model::parse_size(size)
        .map_err(|e| DriverError::Invalid(format!("invalid value for defaults.size: {e}")))
}

// ---- small JSON helpers shared by the drivers ----

/// The document as an object, or an error saying a backend config must be one.
pub(crate) fn as_object(doc: &Value) -> Result<&Map<String, Value>, DriverError> {
    doc.as_object().ok_or_else(|| {
        DriverError::Invalid(format!(
            "invalid backend config: expected a JSON object, found {}",
            json_type(doc)
        ))
    })
}

/// Looks up `key` the way Go's `encoding/json` does: exact match first, then case-insensitive.
/// Every lookup is noted while [`recording`] runs on this thread.
pub(crate) fn field<'a>(obj: &'a Map<String, Value>, key: &str) -> Option<&'a Value> {
    let found = obj.get(key).or_else(|| {
        obj.iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(key))
            .map(|(_, v)| v)
    });
    READS.with(|reads| {
        if let Some(reads) = reads.borrow_mut().as_mut() {
            reads.objects.insert(address(obj));
            if let Some(v) = found {
                reads.found.insert(address(v));
            }
        }
    });
    found
}

/// Keys that every backend config may have though no parser reads them: Trident's
/// `debugTraceFlags` (storch's log level says what is logged).
const ACCEPTED_KEYS: &[&str] = &["debugTraceFlags"];

thread_local! {
    /// The lookups [`field`] made on this thread while [`recording`] runs.
    static READS: std::cell::RefCell<Option<Reads>> = const { std::cell::RefCell::new(None) };
}

/// What the [`field`] lookups of a parse touched: the objects they looked in and the values
/// they found, by address in the document parsed (which outlives the recording unchanged).
#[derive(Debug, Default)]
pub(crate) struct Reads {
    objects: std::collections::HashSet<usize>,
    found: std::collections::HashSet<usize>,
}

fn address<T>(r: &T) -> usize {
    std::ptr::from_ref(r) as usize
}

/// Runs `f` (a parse of a backend config, synchronous) and returns what its lookups read.
pub(crate) fn recording<T>(f: impl FnOnce() -> T) -> (T, Reads) {
    /// Ends the recording, also when `f` panics.
    struct Stop;
    impl Drop for Stop {
        fn drop(&mut self) {
            let _ = READS.try_with(|reads| reads.borrow_mut().take());
        }
    }
    READS.with(|reads| *reads.borrow_mut() = Some(Reads::default()));
    let stop = Stop;
    let out = f();
    let reads = READS.with(|reads| reads.borrow_mut().take());
    drop(stop);
    (out, reads.unwrap_or_default())
}

impl Reads {
    /// The keys of `doc` that no lookup read, by path (`fooBar`, `defaults.fooBar`,
    /// `Types[1].zzz`), in the order of the document's maps. Only objects a parser looked in
    /// by key are judged; a map read whole (pools by name, labels, attributes) is not, but the
    /// objects inside it are. [`ACCEPTED_KEYS`] at the top are never unread.
    pub(crate) fn unread(&self, doc: &Value) -> Vec<String> {
        let mut out = Vec::new();
        if let Value::Object(top) = doc {
            let known = |k: &str| ACCEPTED_KEYS.iter().any(|a| a.eq_ignore_ascii_case(k));
            for (k, v) in top.iter().filter(|(k, _)| !known(k)) {
                self.judge(self.objects.contains(&address(top)), k.clone(), v, &mut out);
            }
        }
        out
    }

    /// `value` at `path`, an entry of an object that was looked in (`judged`) or not.
    fn judge(&self, judged: bool, path: String, value: &Value, out: &mut Vec<String>) {
        if judged && !self.found.contains(&address(value)) {
            out.push(path);
            return;
        }
        match value {
            Value::Object(m) => {
                let judged = self.objects.contains(&address(m));
                for (k, v) in m {
                    self.judge(judged, format!("{path}.{k}"), v, out);
                }
            }
            Value::Array(items) => {
                for (i, v) in items.iter().enumerate() {
                    self.judge(false, format!("{path}[{i}]"), v, out);
                }
            }
            _ => {}
        }
    }
}

/// An optional string field; `null` counts as absent; another type is an error naming the field.
pub(crate) fn opt_str<'a>(
    obj: &'a Map<String, Value>,
    key: &'static str,
) -> Result<Option<&'a str>, DriverError> {
    match field(obj, key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.as_str())),
        Some(other) => Err(wrong_type(key, "a string", Some(other))),
    }
}

/// `trustedCACertificate`: a PEM certificate (bundle) to trust besides the system's, or
/// `None` when absent or empty.
pub(crate) fn trusted_ca(obj: &Map<String, Value>) -> Result<Option<String>, DriverError> {
    let pem = opt_str(obj, "trustedCACertificate")?
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string);
    if let Some(pem) = &pem
        && !pem.contains("-----BEGIN CERTIFICATE-----")
    {
        return Err(DriverError::Invalid(
            "invalid value for trustedCACertificate: expected a PEM certificate".into(),
        ));
    }
    Ok(pem)
}

/// A credential: kept, sent only in the Authorization header, never shown.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(s: impl Into<String>) -> Secret {
        Secret(s.into())
    }
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("<redacted>")
    }
}

/// Go's `strconv.ParseBool`.
pub fn go_bool(s: &str) -> Option<bool> {
    match s {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
        _ => None,
    }
}

/// A boolean field: a JSON boolean or a Go-style boolean string; errors name the field.
pub(crate) fn parse_bool(key: &str, v: &Value) -> Result<bool, DriverError> {
    match v {
        Value::Bool(b) => Ok(*b),
        Value::String(s) => go_bool(s).ok_or_else(|| {
            DriverError::Invalid(format!("invalid value for {key}: expected a boolean"))
        }),
        other => Err(wrong_type(key, "a boolean", Some(other))),
    }
}

/// An optional duration field (`30s`, `2m`): `default` when absent; zero or unreadable is an
/// error naming the field.
pub(crate) fn parse_duration(
    obj: &Map<String, Value>,
    key: &'static str,
    default: std::time::Duration,
) -> Result<std::time::Duration, DriverError> {
    match opt_str(obj, key)? {
        None => Ok(default),
        Some(s) => humantime::parse_duration(s.trim())
            .ok()
            .filter(|d| !d.is_zero())
            .ok_or_else(|| {
                DriverError::Invalid(format!(
                    "invalid value for {key}: expected a duration such as 30s"
                ))
            }),
    }
}

/// `invalid value for <field>: expected <what>, found <type>`. Never echoes the value.
pub(crate) fn wrong_type(field: &str, expected: &str, found: Option<&Value>) -> DriverError {
    let found = found.map(json_type).unwrap_or("nothing");
    DriverError::Invalid(format!(
        "invalid value for {field}: expected {expected}, found {found}"
    ))
}

/// The JSON type name of a value, for error messages.
pub(crate) fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "an integer",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn invalid(doc: Value) -> String {
        match CommonConfig::parse(&doc) {
            Err(DriverError::Invalid(msg)) => msg,
            other => panic!("expected Invalid for {doc}, got {other:?}"),
        }
    }

    #[test]
    fn minimal_config_gets_defaults() {
        let c = CommonConfig::parse(&json!({"version": 1, "storageDriverName": "fake"})).unwrap();
        assert_eq!(
            c,
            CommonConfig {
                version: 1,
                storage_driver_name: "fake".into(),
                backend_name: None,
                storage_prefix: None,
                default_size_bytes: 1 << 30,
                supported_topologies: Vec::new(),
            }
        );
    }

    #[test]
    fn supported_topologies_are_checked_strictly() {
        let doc =
            |t: Value| json!({"version": 1, "storageDriverName": "fake", "supportedTopologies": t});
        let c = CommonConfig::parse(&doc(json!([
            {"topology.kubernetes.io/zone": "z1", "topology.kubernetes.io/region": "r1"},
            {"topology.kubernetes.io/zone": "z2"},
            {"topology.kubernetes.io/zone": "z2"},
        ])))
        .unwrap();
        assert_eq!(c.supported_topologies.len(), 2, "the duplicate is dropped");
        assert_eq!(
            c.supported_topologies[1]["topology.kubernetes.io/zone"],
            "z2"
        );
        assert!(
            CommonConfig::parse(&doc(json!(null)))
                .unwrap()
                .supported_topologies
                .is_empty()
        );
        for (bad, names) in [
            (json!({"zone": "z1"}), "supportedTopologies:"),
            (json!(["z1"]), "supportedTopologies[0]:"),
            (json!([{}]), "supportedTopologies[0]:"),
            (json!([{"zone": 1}]), "supportedTopologies[0].zone:"),
            (
                json!([{"zone": "z1"}, {"Bad Key": "z"}]),
                "supportedTopologies[1]:",
            ),
            (
                json!([{"topology.kubernetes.io/zone": "-z"}]),
                "supportedTopologies[0].topology.kubernetes.io/zone:",
            ),
        ] {
            let msg = invalid(doc(bad.clone()));
            assert!(msg.contains(names), "{bad}: {msg}");
        }
    }

    #[test]
    fn full_config() {
        let c = CommonConfig::parse(&json!({
            "version": 1,
            "storageDriverName": "ontap-nas",
            "backendName": "nas1",
            "storagePrefix": "x",
            "defaults": {"size": "2Gi", "spaceReserve": "none"},
            "unknownField": {"whatever": [1, 2]},
        }))
        .unwrap();
        assert_eq!(c.storage_driver_name, "ontap-nas");
        assert_eq!(c.backend_name.as_deref(), Some("nas1"));
        assert_eq!(c.storage_prefix.as_deref(), Some("x"));
        assert_eq!(c.default_size_bytes, 2 << 30);
    }

    #[test]
    fn keys_match_case_insensitively_like_go() {
        let c = CommonConfig::parse(&json!({
            "Version": 1,
            "StorageDriverName": "fake",
            "BACKENDNAME": "b",
            "Defaults": {"Size": "1M"},
        }))
        .unwrap();
        assert_eq!(c.storage_driver_name, "fake");
        assert_eq!(c.backend_name.as_deref(), Some("b"));
        assert_eq!(c.default_size_bytes, 1 << 20);
        // An exact match wins over a case-insensitive one.
        let c = CommonConfig::parse(&json!({
            "version": 1, "storageDriverName": "fake", "backendname": "a", "backendName": "b"
        }))
        .unwrap();
        assert_eq!(c.backend_name.as_deref(), Some("b"));
    }

    #[test]
    fn version() {
        assert_eq!(
            invalid(json!({"version": 2, "storageDriverName": "fake"})),
            "unexpected config file version; found 2, expected 1"
        );
        assert_eq!(
            invalid(json!({"storageDriverName": "fake"})),
            "unexpected config file version; found 0, expected 1"
        );
        assert_eq!(
            invalid(json!({"version": -3, "storageDriverName": "fake"})),
            "unexpected config file version; found -3, expected 1"
        );
        let msg = invalid(json!({"version": "1", "storageDriverName": "fake"}));
        assert!(msg.contains("version") && msg.contains("integer"), "{msg}");
        let msg = invalid(json!({"version": 1.5, "storageDriverName": "fake"}));
        assert!(msg.contains("version"), "{msg}");
    }

    #[test]
    fn storage_driver_name() {
        for doc in [
            json!({"version": 1}),
            json!({"version": 1, "storageDriverName": ""}),
            json!({"version": 1, "storageDriverName": null}),
        ] {
            assert_eq!(
                invalid(doc),
                "missing storage driver name in configuration file"
            );
        }
        let msg = invalid(json!({"version": 1, "storageDriverName": 7}));
        assert!(
            msg.contains("storageDriverName") && msg.contains("string"),
            "{msg}"
        );
    }

    #[test]
    fn backend_name() {
        let c = CommonConfig::parse(
            &json!({"version": 1, "storageDriverName": "fake", "backendName": ""}),
        )
        .unwrap();
        assert_eq!(c.backend_name, None);
        let msg = invalid(json!({"version": 1, "storageDriverName": "fake", "backendName": 1}));
        assert!(msg.contains("backendName"), "{msg}");
        let msg = invalid(json!({"version": 1, "storageDriverName": "fake", "backendName": "a/b"}));
        assert!(msg.contains("backendName"), "{msg}");
        let msg = invalid(json!({"version": 1, "storageDriverName": "fake", "backendName": ".."}));
        assert!(msg.contains("backendName"), "{msg}");
    }

    #[test]
    fn storage_prefix_three_states() {
        let parse = |p: Value| {
            CommonConfig::parse(
                &json!({"version": 1, "storageDriverName": "fake", "storagePrefix": p}),
            )
        };
        let absent =
            CommonConfig::parse(&json!({"version": 1, "storageDriverName": "fake"})).unwrap();
        assert_eq!(absent.storage_prefix, None);
        assert_eq!(parse(json!(null)).unwrap().storage_prefix, None);
        assert_eq!(parse(json!({})).unwrap().storage_prefix, None);
        assert_eq!(
            parse(json!("")).unwrap().storage_prefix.as_deref(),
            Some("")
        );
        assert_eq!(
            parse(json!("abc_")).unwrap().storage_prefix.as_deref(),
            Some("abc_")
        );
        for bad in [json!(5), json!(true), json!(["a"]), json!({"a": 1})] {
            match parse(bad.clone()) {
                Err(DriverError::Invalid(msg)) => {
                    assert!(msg.starts_with("invalid value for storage prefix"), "{msg}");
                    assert!(msg.contains("storagePrefix"), "{msg}");
                }
                other => panic!("{bad}: {other:?}"),
            }
        }
    }

    #[test]
    fn defaults_size() {
        let parse = |d: Value| {
            CommonConfig::parse(&json!({"version": 1, "storageDriverName": "fake", "defaults": d}))
        };
        assert_eq!(parse(json!({})).unwrap().default_size_bytes, 1 << 30);
        assert_eq!(parse(json!(null)).unwrap().default_size_bytes, 1 << 30);
        assert_eq!(
            parse(json!({"size": ""})).unwrap().default_size_bytes,
            1 << 30
        );
        assert_eq!(
            parse(json!({"size": "1G"})).unwrap().default_size_bytes,
            1 << 30
        );
        assert_eq!(
            parse(json!({"size": "1GB"})).unwrap().default_size_bytes,
            1_000_000_000
        );
        assert_eq!(
            parse(json!({"size": "100"})).unwrap().default_size_bytes,
            100
        );
        for bad in [
            json!({"size": "1.5G"}),
            json!({"size": "lots"}),
            json!({"size": 5}),
        ] {
            match parse(bad.clone()) {
                Err(DriverError::Invalid(msg)) => assert!(msg.contains("defaults.size"), "{msg}"),
                other => panic!("{bad}: {other:?}"),
            }
        }
        match parse(json!("1G")) {
            Err(DriverError::Invalid(msg)) => assert!(msg.contains("defaults"), "{msg}"),
            other => panic!("{other:?}"),
        }
        // A size at the top level is not a default (ignored like any unknown field).
        let c =
            CommonConfig::parse(&json!({"version": 1, "storageDriverName": "fake", "size": "5G"}))
                .unwrap();
        assert_eq!(c.default_size_bytes, 1 << 30);
    }

    #[test]
    fn ignored_fields_warn() {
        let doc = json!({"version": 1, "storageDriverName": "fake", "debug": true, "disableDelete": true});
        assert!(CommonConfig::parse(&doc).is_ok());
        let w = CommonConfig::warnings(&doc);
        assert_eq!(w.len(), 2);
        assert!(
            w[0].contains("debug") && w[1].contains("disableDelete"),
            "{w:?}"
        );
        assert!(CommonConfig::warnings(&json!({"version": 1})).is_empty());
    }

    /// Reads `doc` as a small parser would: `name` and `defaults.size` by key, `labels` whole,
    /// each `items[i].id` by key.
    fn unread(doc: &Value) -> Vec<String> {
        let ((), reads) = recording(|| {
            let obj = doc.as_object().unwrap();
            field(obj, "name");
            field(obj, "labels");
            if let Some(Value::Object(d)) = field(obj, "defaults") {
                field(d, "size");
            }
            if let Some(Value::Array(items)) = field(obj, "items") {
                for item in items.iter().filter_map(Value::as_object) {
                    field(item, "id");
                }
            }
        });
        reads.unread(doc)
    }

    #[test]
    fn the_recording_names_every_key_no_lookup_read() {
        assert!(unread(&json!({"name": "a"})).is_empty());
        let doc = json!({
            "name": "a",
            "nmae": "typo",
            "labels": {"any": "thing", "nested": {"x": 1}},
            "defaults": {"size": "1Gi", "sizee": "2Gi"},
            "items": [{"id": 1}, {"id": 2, "zzz": true}, "not an object"],
            "debugTraceFlags": {"api": true},
            "extra": {"deep": {"er": 1}},
        });
        assert_eq!(
            unread(&doc),
            ["defaults.sizee", "extra", "items[1].zzz", "nmae"]
        );
    }

    #[test]
    fn the_recording_matches_keys_as_the_lookups_do() {
        // Read under another case: not ignored.
        assert!(unread(&json!({"NAME": "a", "Defaults": {"SIZE": "1"}})).is_empty());
        // Two spellings of one key: the exact one is read, the other is ignored.
        assert_eq!(unread(&json!({"name": "a", "Name": "b"})), ["Name"]);
    }

    #[test]
    fn lookups_outside_a_recording_note_nothing() {
        let doc = json!({"name": "a"});
        let obj = doc.as_object().unwrap();
        field(obj, "name");
        let (_, reads) = recording(|| field(obj, "other"));
        assert_eq!(reads.unread(&doc), ["name"]);
        // A recording that panicked ends all the same.
        let caught = std::panic::catch_unwind(|| recording(|| panic!("parse bug")));
        assert!(caught.is_err());
        READS.with(|r| assert!(r.borrow().is_none()));
    }

    #[test]
    fn not_an_object() {
        for doc in [json!([]), json!("x"), json!(null), json!(1)] {
            let msg = invalid(doc);
            assert!(msg.contains("JSON object"), "{msg}");
        }
    }
}
