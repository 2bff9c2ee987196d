//! Storage classes: Trident's `StorageClassConfig` wire shape and matching of pools
//! (docs/trident-contract.md#storage-class-config and
//! docs/trident-contract.md#matching-a-pool-to-a-class).

use std::collections::BTreeMap;
use std::fmt;

use regex::{Regex, RegexBuilder};
use serde::de::Error as _;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::attributes::{clip, json_kind};
use super::{PoolInfo, Request};

/// `backend regex → [pool regex]`, as in `storagePools`, `additionalStoragePools`,
/// `excludeStoragePools`.
pub type PoolSelector = BTreeMap<String, Vec<String>>;

/// A storage class as clients send and receive it. `attributes` hold typed requests, written
/// back as strings; `requiredStorage` is read as an alias of `additionalStoragePools`.
#[derive(Debug, Clone, PartialEq, Default, bincode::Encode, bincode::Decode)]
pub struct StorageClassConfig {
    pub version: String,
    pub name: String,
    pub attributes: BTreeMap<String, Request>,
    pub storage_pools: PoolSelector,
    pub additional_storage_pools: PoolSelector,
    pub exclude_storage_pools: PoolSelector,
}

/// The JSON keys of the three pool lists, as they appear in errors.
const STORAGE_POOLS: &str = "storagePools";
const ADDITIONAL_STORAGE_POOLS: &str = "additionalStoragePools";
const EXCLUDE_STORAGE_POOLS: &str = "excludeStoragePools";
/// The 17.x name of `additionalStoragePools`, accepted on input only.
const REQUIRED_STORAGE: &str = "requiredStorage";

impl StorageClassConfig {
    /// Parses a REST body; errors read like Trident's (`invalid JSON: …`,
    /// `unrecognized storage attribute: X`) and name the field.
    pub fn from_json(body: &[u8]) -> Result<StorageClassConfig, String> {
        let value: Value =
            serde_json::from_slice(body).map_err(|e| format!("invalid JSON: {e}"))?;
        StorageClassConfig::from_value(value).map_err(|e| format!("invalid JSON: {e}"))
    }

    /// Builds a class from an already-decoded JSON document
    /// (docs/trident-contract.md#storage-class-config). Errors have no `invalid JSON: ` prefix;
    /// [`StorageClassConfig::from_json`] adds it.
    ///
    /// Like Go's decoder, unknown keys are ignored and `null` counts as absent. Unlike it, keys
    /// are matched case-sensitively.
    pub fn from_value(value: Value) -> Result<StorageClassConfig, String> {
        let Value::Object(mut obj) = value else {
            return Err(format!(
                "a storage class must be a JSON object, got {}",
                json_kind(&value)
            ));
        };
        let mut take = |key: &str| match obj.remove(key) {
            Some(Value::Null) | None => None,
            Some(v) => Some(v),
        };
        let version = take_string("version", take("version"))?;
        let name = take_string("name", take("name"))?;
        let attributes = take_attributes(take("attributes"))?;
        let storage_pools = take_selector(STORAGE_POOLS, take(STORAGE_POOLS))?;
        let additional = take(ADDITIONAL_STORAGE_POOLS);
        let required = take(REQUIRED_STORAGE);
        let additional_storage_pools = match (additional, required) {
            (Some(v), _) => take_selector(ADDITIONAL_STORAGE_POOLS, Some(v))?,
            (None, required) => {
                let sel = take_selector(REQUIRED_STORAGE, required)?;
                // Check the patterns here, where errors can still name the key the client
                // used: the class only remembers them as additionalStoragePools.
                let mut budget = usize::MAX;
                CompiledSelector::compile(REQUIRED_STORAGE, &sel, &mut budget)?;
                sel
            }
        };
        let exclude_storage_pools =
            take_selector(EXCLUDE_STORAGE_POOLS, take(EXCLUDE_STORAGE_POOLS))?;
        Ok(StorageClassConfig {
            version: if version.is_empty() {
                "1".to_string()
            } else {
                version
            },
            name,
            attributes,
            storage_pools,
            additional_storage_pools,
            exclude_storage_pools,
        })
    }
}

fn take_string(key: &str, value: Option<Value>) -> Result<String, String> {
    match value {
        None => Ok(String::new()),
        Some(Value::String(s)) => Ok(s),
        Some(other) => Err(format!("{key} must be a string, got {}", json_kind(&other))),
    }
}

fn take_object(key: &str, value: Option<Value>) -> Result<Map<String, Value>, String> {
    match value {
        None => Ok(Map::new()),
        Some(Value::Object(m)) => Ok(m),
        Some(other) => Err(format!(
            "{key} must be an object, got {}",
            json_kind(&other)
        )),
    }
}

/// `{"<attr>":"<string>"}` → typed requests. Every value must be a JSON string.
fn take_attributes(value: Option<Value>) -> Result<BTreeMap<String, Request>, String> {
    let mut out = BTreeMap::new();
    for (name, v) in take_object("attributes", value)? {
        let Value::String(s) = v else {
            return Err(format!(
                "unable to unmarshal map: attributes.{} must be a JSON string (e.g. \"true\" or \
                 \"1500\"), got {}",
                clip(&name),
                json_kind(&v)
            ));
        };
        let request = Request::parse(&name, &s)?;
        out.insert(name, request);
    }
    Ok(out)
}

/// `{"<backend regex>":["<pool regex>",…]}`, pool lists sorted.
fn take_selector(key: &str, value: Option<Value>) -> Result<PoolSelector, String> {
    let mut out = PoolSelector::new();
    for (backend, pools) in take_object(key, value)? {
        let list = match pools {
            Value::Null => Vec::new(),
            Value::Array(items) => items
                .into_iter()
                .map(|item| match item {
                    Value::String(s) => Ok(s),
                    other => Err(format!(
                        "{key}.{}: pool patterns must be strings, got {}",
                        clip(&backend),
                        json_kind(&other)
                    )),
                })
                .collect::<Result<Vec<_>, _>>()?,
            other => {
                return Err(format!(
                    "{key}.{} must be a list of pool patterns, got {}",
                    clip(&backend),
                    json_kind(&other)
                ));
            }
        };
        out.insert(backend, sorted(list));
    }
    Ok(out)
}

fn sorted(mut list: Vec<String>) -> Vec<String> {
    list.sort();
    list
}

/// The wire form written out: fixed key order, empty maps omitted, pool lists sorted.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ClassOut<'a> {
    version: &'a str,
    name: &'a str,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    attributes: BTreeMap<&'a str, String>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    storage_pools: BTreeMap<&'a str, Vec<&'a str>>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    additional_storage_pools: BTreeMap<&'a str, Vec<&'a str>>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    exclude_storage_pools: BTreeMap<&'a str, Vec<&'a str>>,
}

fn selector_out(sel: &PoolSelector) -> BTreeMap<&str, Vec<&str>> {
    sel.iter()
        .map(|(backend, pools)| {
            let mut pools: Vec<&str> = pools.iter().map(String::as_str).collect();
            pools.sort_unstable();
            (backend.as_str(), pools)
        })
        .collect()
}

impl Serialize for StorageClassConfig {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        ClassOut {
            version: if self.version.is_empty() {
                "1"
            } else {
                &self.version
            },
            name: &self.name,
            attributes: self
                .attributes
                .iter()
                .map(|(k, v)| (k.as_str(), v.to_string()))
                .collect(),
            storage_pools: selector_out(&self.storage_pools),
            additional_storage_pools: selector_out(&self.additional_storage_pools),
            exclude_storage_pools: selector_out(&self.exclude_storage_pools),
        }
        .serialize(s)
    }
}

impl<'de> Deserialize<'de> for StorageClassConfig {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(d)?;
        StorageClassConfig::from_value(value).map_err(D::Error::custom)
    }
}

/// The longest pattern accepted in a pool selector, in bytes.
pub const MAX_PATTERN_LEN: usize = 1024;
/// The most patterns (backend and pool patterns together) one class may hold.
pub const MAX_PATTERNS_PER_CLASS: usize = 256;
/// Compiled-program and lazy-DFA cache limits of one pattern, in bytes. Ordinary selectors
/// need a few KiB; `\w+` about 64 KiB; a counted Unicode class such as `\w{1,63}` several MiB
/// and is refused.
pub const PATTERN_SIZE_LIMIT: usize = 1024 * 1024;
/// The deepest nesting of groups and repetitions in one pattern.
const PATTERN_NEST_LIMIT: u32 = 64;

/// One pool list with its patterns compiled.
#[derive(Debug, Clone)]
struct CompiledSelector {
    entries: Vec<(Regex, Vec<Regex>)>,
}

impl CompiledSelector {
    fn compile(list: &str, sel: &PoolSelector, budget: &mut usize) -> Result<Self, String> {
        let mut entries = Vec::with_capacity(sel.len());
        for (backend, pools) in sel {
            let backend_re = compile_pattern(list, "backend", backend, budget)?;
            let pool_res = pools
                .iter()
                .map(|p| compile_pattern(list, "pool", p, budget))
                .collect::<Result<Vec<_>, _>>()?;
            entries.push((backend_re, pool_res));
        }
        Ok(CompiledSelector { entries })
    }

    fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Some entry's backend pattern matches the backend and one of its pool patterns matches
    /// the pool. Unanchored, like Go's `MatchString`.
    fn matches(&self, backend: &str, pool: &str) -> bool {
        self.entries.iter().any(|(backend_re, pool_res)| {
            backend_re.is_match(backend) && pool_res.iter().any(|re| re.is_match(pool))
        })
    }
}

fn compile_pattern(
    list: &str,
    kind: &str,
    pattern: &str,
    budget: &mut usize,
) -> Result<Regex, String> {
    let refuse = |why: String| format!("{list}: {kind} pattern {:?} {why}", clip(pattern));
    if *budget == 0 {
        return Err(format!(
            "{list}: the class has more than {MAX_PATTERNS_PER_CLASS} backend and pool patterns"
        ));
    }
    *budget -= 1;
    if pattern.len() > MAX_PATTERN_LEN {
        return Err(refuse(format!("is longer than {MAX_PATTERN_LEN} bytes")));
    }
    RegexBuilder::new(pattern)
        .size_limit(PATTERN_SIZE_LIMIT)
        .dfa_size_limit(PATTERN_SIZE_LIMIT)
        .nest_limit(PATTERN_NEST_LIMIT)
        .build()
        .map_err(|e| refuse(describe_regex_error(&e)))
}

/// A one-line reason from the regex crate's (multi-line, caret-drawing) error.
fn describe_regex_error(e: &regex::Error) -> String {
    match e {
        regex::Error::Syntax(text) => {
            let reason = text
                .lines()
                .find_map(|l| l.trim().strip_prefix("error: "))
                .unwrap_or_else(|| text.lines().last().unwrap_or("syntax error"));
            format!("is not a valid regular expression: {reason}")
        }
        regex::Error::CompiledTooBig(limit) => {
            format!(
                "is too expensive: it compiles to more than {limit} bytes (counted repetitions \
                 of Unicode classes such as \\w{{1,63}} are large; try [A-Za-z0-9_] instead)"
            )
        }
        other => format!("is not a valid regular expression: {other}"),
    }
}

/// A class with its pool-selector regexes compiled once. Build it with
/// [`CompiledClass::compile`].
#[derive(Debug, Clone)]
pub struct CompiledClass {
    /// The class as given. Matching uses the patterns compiled from it by `compile`: changing
    /// the pool lists here afterwards has no effect on `check` (compile a new class instead).
    pub config: StorageClassConfig,
    storage_pools: CompiledSelector,
    additional_storage_pools: CompiledSelector,
    exclude_storage_pools: CompiledSelector,
}

/// Why a pool is or is not a member of a class, for explanations.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PoolVerdict {
    Match,
    /// Listed in `additionalStoragePools`.
    MatchAdditional,
    /// Listed in `excludeStoragePools`.
    Excluded,
    /// Not in `additionalStoragePools`, and the class has nothing else to match with.
    NotInAdditional,
    /// An attribute request the pool fails: (attribute, requested, offered or None).
    AttributeMismatch {
        attribute: String,
        requested: String,
        offered: Option<String>,
    },
    /// `storagePools` is set and the pool is not in it.
    NotInStoragePools,
}

impl PoolVerdict {
    pub fn is_match(&self) -> bool {
        matches!(self, PoolVerdict::Match | PoolVerdict::MatchAdditional)
    }
}

impl fmt::Display for PoolVerdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PoolVerdict::Match => f.write_str("matches the class's attributes and storagePools"),
            PoolVerdict::MatchAdditional => f.write_str("listed in additionalStoragePools"),
            PoolVerdict::Excluded => f.write_str("listed in excludeStoragePools"),
            PoolVerdict::NotInAdditional => f.write_str(
                "not listed in additionalStoragePools, and the class has no attributes or \
                 storagePools",
            ),
            PoolVerdict::AttributeMismatch {
                attribute,
                requested,
                offered: Some(offered),
            } => {
                write!(
                    f,
                    "{attribute}: requested {requested}, the pool offers {offered}"
                )
            }
            PoolVerdict::AttributeMismatch {
                attribute,
                requested,
                offered: None,
            } => {
                write!(
                    f,
                    "{attribute}: requested {requested}, the pool does not offer it"
                )
            }
            PoolVerdict::NotInStoragePools => f.write_str("not listed in storagePools"),
        }
    }
}

impl CompiledClass {
    /// Compiles the class; a regex over the size limit or invalid is an error naming the list.
    pub fn compile(config: StorageClassConfig) -> Result<CompiledClass, String> {
        let mut budget = MAX_PATTERNS_PER_CLASS;
        let storage_pools =
            CompiledSelector::compile(STORAGE_POOLS, &config.storage_pools, &mut budget)?;
        let additional_storage_pools = CompiledSelector::compile(
            ADDITIONAL_STORAGE_POOLS,
            &config.additional_storage_pools,
            &mut budget,
        )?;
        let exclude_storage_pools = CompiledSelector::compile(
            EXCLUDE_STORAGE_POOLS,
            &config.exclude_storage_pools,
            &mut budget,
        )?;
        Ok(CompiledClass {
            config,
            storage_pools,
            additional_storage_pools,
            exclude_storage_pools,
        })
    }

    /// Trident 18.07 pool matching (docs/trident-contract.md#matching-a-pool-to-a-class), with the
    /// reason: exclude → additional → (attributes ∧ storagePools).
    pub fn check(&self, backend: &str, pool: &PoolInfo) -> PoolVerdict {
        // 1. Excluded pools never match.
        if self.exclude_storage_pools.matches(backend, &pool.name) {
            return PoolVerdict::Excluded;
        }
        // 2. Additional pools always match; a class made only of them matches nothing else.
        if !self.additional_storage_pools.is_empty() {
            if self.additional_storage_pools.matches(backend, &pool.name) {
                return PoolVerdict::MatchAdditional;
            }
            if self.config.attributes.is_empty() && self.storage_pools.is_empty() {
                return PoolVerdict::NotInAdditional;
            }
        }
        // 3. Every requested attribute, in name order so the first failure is stable.
        for (attribute, requested) in &self.config.attributes {
            let offer = pool.offers.get(attribute);
            if !offer.is_some_and(|o| o.matches(requested)) {
                return PoolVerdict::AttributeMismatch {
                    attribute: attribute.clone(),
                    requested: requested.to_string(),
                    offered: offer.map(ToString::to_string),
                };
            }
        }
        // 4. storagePools, when set.
        if !self.storage_pools.is_empty() && !self.storage_pools.matches(backend, &pool.name) {
            return PoolVerdict::NotInStoragePools;
        }
        PoolVerdict::Match
    }

    pub fn matches(&self, backend: &str, pool: &PoolInfo) -> bool {
        self.check(backend, pool).is_match()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Offer;
    use serde_json::json;

    fn parse(v: Value) -> StorageClassConfig {
        StorageClassConfig::from_json(v.to_string().as_bytes()).unwrap()
    }

    fn class(v: Value) -> CompiledClass {
        CompiledClass::compile(parse(v)).unwrap()
    }

    fn req(name: &str, value: &str) -> Request {
        Request::parse(name, value).unwrap()
    }

    #[test]
    fn parses_a_full_class() {
        let cfg = parse(json!({
            "version": "1",
            "name": "gold",
            "attributes": {"snapshots": "T", "IOPS": "1500", "media": "ssd"},
            "storagePools": {"ontap.*": ["aggr2", "aggr1"]},
            "additionalStoragePools": {"sf": ["gold"]},
            "excludeStoragePools": {"ontap-old": [".*"]},
            "someFutureKey": 1,
        }));
        assert_eq!(cfg.version, "1");
        assert_eq!(cfg.name, "gold");
        assert_eq!(cfg.attributes["snapshots"], Request::Bool(true));
        assert_eq!(cfg.attributes["IOPS"], Request::Int(1500));
        assert_eq!(cfg.attributes["media"], Request::String("ssd".into()));
        assert_eq!(cfg.storage_pools["ontap.*"], ["aggr1", "aggr2"]);
        assert_eq!(cfg.additional_storage_pools["sf"], ["gold"]);
        assert_eq!(cfg.exclude_storage_pools["ontap-old"], [".*"]);
    }

    #[test]
    fn defaults_and_nulls() {
        let cases = [
            (json!({}), "1", ""),
            (json!({"version": ""}), "1", ""),
            (json!({"version": null, "name": null}), "1", ""),
            (json!({"version": "2", "name": "x"}), "2", "x"),
            (json!({"name": ""}), "1", ""),
        ];
        for (wire, version, name) in cases {
            let cfg = parse(wire.clone());
            assert_eq!(
                (cfg.version.as_str(), cfg.name.as_str()),
                (version, name),
                "{wire}"
            );
        }
        let cfg = parse(json!({
            "attributes": null, "storagePools": null, "excludeStoragePools": {"b": null}
        }));
        assert!(cfg.attributes.is_empty() && cfg.storage_pools.is_empty());
        assert_eq!(cfg.exclude_storage_pools["b"], Vec::<String>::new());
    }

    #[test]
    fn parse_errors() {
        let cases: &[(&str, &str)] = &[
            (r#"{"name":"#, "invalid JSON: EOF while parsing"),
            ("", "invalid JSON: "),
            (
                "[]",
                "invalid JSON: a storage class must be a JSON object, got a list",
            ),
            (
                "null",
                "invalid JSON: a storage class must be a JSON object, got null",
            ),
            (
                r#"{"attributes":{"snapshots":true}}"#,
                "invalid JSON: unable to unmarshal map: attributes.snapshots must be a JSON string",
            ),
            (
                r#"{"attributes":{"IOPS":1500}}"#,
                "invalid JSON: unable to unmarshal map: attributes.IOPS must be a JSON string",
            ),
            (
                r#"{"attributes":{"speed":"fast"}}"#,
                "invalid JSON: unrecognized storage attribute: speed",
            ),
            (
                r#"{"attributes":{"Snapshots":"true"}}"#,
                "invalid JSON: unrecognized storage attribute: Snapshots",
            ),
            (
                r#"{"attributes":{"storagePools":"x"}}"#,
                "invalid JSON: unrecognized storage attribute: storagePools",
            ),
            (
                r#"{"attributes":{"snapshots":"yes"}}"#,
                "invalid JSON: storage attribute value (yes) doesn't match the specified type (bool)",
            ),
            (
                r#"{"attributes":{"IOPS":"1.5k"}}"#,
                "invalid JSON: storage attribute value (1.5k) doesn't match the specified type (int)",
            ),
            (
                r#"{"attributes":["snapshots"]}"#,
                "invalid JSON: attributes must be an object",
            ),
            (
                r#"{"version":1}"#,
                "invalid JSON: version must be a string, got a number",
            ),
            (
                r#"{"name":false}"#,
                "invalid JSON: name must be a string, got a boolean",
            ),
            (
                r#"{"storagePools":["a"]}"#,
                "invalid JSON: storagePools must be an object, got a list",
            ),
            (
                r#"{"storagePools":{"b":"p"}}"#,
                "invalid JSON: storagePools.b must be a list of pool patterns, got a string",
            ),
            (
                r#"{"additionalStoragePools":{"b":[1]}}"#,
                "invalid JSON: additionalStoragePools.b: pool patterns must be strings, got a number",
            ),
            (
                r#"{"requiredStorage":{"b":[true]}}"#,
                "invalid JSON: requiredStorage.b: pool patterns must be strings",
            ),
            (
                r#"{"excludeStoragePools":7}"#,
                "invalid JSON: excludeStoragePools must be an object, got a number",
            ),
        ];
        for (body, want) in cases {
            let err = StorageClassConfig::from_json(body.as_bytes()).unwrap_err();
            assert!(err.starts_with(want), "{body}: {err}");
        }
        // Also through plain serde.
        assert!(
            serde_json::from_str::<StorageClassConfig>(r#"{"attributes":{"x":"1"}}"#)
                .unwrap_err()
                .to_string()
                .contains("unrecognized storage attribute: x")
        );
    }

    #[test]
    fn required_storage_is_an_alias_of_additional() {
        let cases = [
            // Absent or null additionalStoragePools: requiredStorage is used.
            (json!({"requiredStorage": {"b": ["p"]}}), Some("p")),
            (
                json!({"requiredStorage": {"b": ["p"]}, "additionalStoragePools": null}),
                Some("p"),
            ),
            // Present (even empty): requiredStorage is ignored.
            (
                json!({"requiredStorage": {"b": ["p"]}, "additionalStoragePools": {"b": ["q"]}}),
                Some("q"),
            ),
            (
                json!({"requiredStorage": {"b": ["p"]}, "additionalStoragePools": {}}),
                None,
            ),
            (
                json!({"requiredStorage": "garbage", "additionalStoragePools": {}}),
                None,
            ),
        ];
        for (wire, want) in cases {
            let cfg = parse(wire.clone());
            let got = cfg.additional_storage_pools.get("b").map(|l| l[0].as_str());
            assert_eq!(got, want, "{wire}");
            let out = serde_json::to_value(&cfg).unwrap();
            assert!(out.get("requiredStorage").is_none(), "{wire}");
        }
    }

    #[test]
    fn output_is_normalised() {
        let cfg = parse(json!({
            "name": "n",
            "attributes": {"snapshots": "True", "clones": "0", "IOPS": "+0100", "media": "ssd"},
            "storagePools": {"b": ["z", "a", "m"]},
            "requiredStorage": {"sf": ["y", "x"]},
            "excludeStoragePools": {},
        }));
        let out = serde_json::to_string(&cfg).unwrap();
        assert_eq!(
            out,
            concat!(
                r#"{"version":"1","name":"n","#,
                r#""attributes":{"IOPS":"100","clones":"false","media":"ssd","snapshots":"true"},"#,
                r#""storagePools":{"b":["a","m","z"]},"#,
                r#""additionalStoragePools":{"sf":["x","y"]}}"#
            )
        );
        // An empty class writes only version and name.
        assert_eq!(
            serde_json::to_string(&parse(json!({"name": "e"}))).unwrap(),
            r#"{"version":"1","name":"e"}"#
        );
        // Hand-built configs are normalised on the way out too.
        let mut raw = StorageClassConfig {
            name: "h".into(),
            ..Default::default()
        };
        raw.exclude_storage_pools
            .insert("b".into(), vec!["2".into(), "1".into()]);
        assert_eq!(
            serde_json::to_string(&raw).unwrap(),
            r#"{"version":"1","name":"h","excludeStoragePools":{"b":["1","2"]}}"#
        );
    }

    #[test]
    fn round_trips() {
        let cfg = parse(json!({
            "name": "rt",
            "attributes": {"encryption": "t", "provisioningType": "thin", "IOPS": "-3"},
            "storagePools": {"a": ["1"]},
            "additionalStoragePools": {"b": ["2", "1"]},
            "excludeStoragePools": {"c": []},
        }));
        let text = serde_json::to_vec(&cfg).unwrap();
        assert_eq!(StorageClassConfig::from_json(&text).unwrap(), cfg);
        assert_eq!(
            serde_json::from_slice::<StorageClassConfig>(&text).unwrap(),
            cfg
        );
        let bc = bincode::config::standard();
        let bytes = bincode::encode_to_vec(&cfg, bc).unwrap();
        let (back, _): (StorageClassConfig, _) = bincode::decode_from_slice(&bytes, bc).unwrap();
        assert_eq!(back, cfg);
    }

    fn pool(name: &str, offers: &[(&str, Offer)]) -> PoolInfo {
        PoolInfo {
            name: name.to_string(),
            offers: offers
                .iter()
                .map(|(k, v)| (k.to_string(), v.clone()))
                .collect(),
            total_bytes: None,
        }
    }

    fn mismatch(attribute: &str, requested: &str, offered: Option<&str>) -> PoolVerdict {
        PoolVerdict::AttributeMismatch {
            attribute: attribute.into(),
            requested: requested.into(),
            offered: offered.map(Into::into),
        }
    }

    #[test]
    fn pool_matching_order() {
        use PoolVerdict::*;
        let rich = pool(
            "aggr1",
            &[
                ("snapshots", Offer::Bool(true)),
                ("clones", Offer::Bool(false)),
                (
                    "IOPS",
                    Offer::Int {
                        min: 100,
                        max: 5000,
                    },
                ),
                ("media", Offer::strings(["ssd"])),
                ("provisioningType", Offer::strings(["thin", "thick"])),
                ("backendType", Offer::strings(["ontap-nas"])),
            ],
        );
        let bare = pool("p1", &[]);
        let aggr10 = pool("aggr10", &[]);
        let cases: Vec<(&str, Value, &str, &PoolInfo, PoolVerdict)> = vec![
            // An empty class matches every pool.
            ("empty", json!({}), "any", &rich, Match),
            ("empty, no offers", json!({}), "any", &bare, Match),
            // Attributes only (docs/trident-contract.md#matching-one-offer per type).
            (
                "bool true/true",
                json!({"attributes": {"snapshots": "true"}}),
                "b",
                &rich,
                Match,
            ),
            (
                "bool true/false",
                json!({"attributes": {"snapshots": "false"}}),
                "b",
                &rich,
                Match,
            ),
            (
                "bool false/false",
                json!({"attributes": {"clones": "false"}}),
                "b",
                &rich,
                Match,
            ),
            (
                "bool false/true",
                json!({"attributes": {"clones": "true"}}),
                "b",
                &rich,
                mismatch("clones", "true", Some("false")),
            ),
            (
                "int inside",
                json!({"attributes": {"IOPS": "5000"}}),
                "b",
                &rich,
                Match,
            ),
            (
                "int above",
                json!({"attributes": {"IOPS": "5001"}}),
                "b",
                &rich,
                mismatch("IOPS", "5001", Some("[100, 5000]")),
            ),
            (
                "string in set",
                json!({"attributes": {"provisioningType": "thick"}}),
                "b",
                &rich,
                Match,
            ),
            (
                "string case",
                json!({"attributes": {"media": "SSD"}}),
                "b",
                &rich,
                mismatch("media", "SSD", Some("{ssd}")),
            ),
            (
                "not offered",
                json!({"attributes": {"encryption": "false"}}),
                "b",
                &rich,
                mismatch("encryption", "false", None),
            ),
            (
                "first failure in name order",
                json!({"attributes": {"media": "hdd", "snapshots": "true", "IOPS": "1"}}),
                "b",
                &rich,
                mismatch("IOPS", "1", Some("[100, 5000]")),
            ),
            (
                "all attributes match",
                json!({"attributes": {"media": "ssd", "snapshots": "1", "IOPS": "100",
                                      "backendType": "ontap-nas"}}),
                "b",
                &rich,
                Match,
            ),
            // storagePools only.
            (
                "pools hit",
                json!({"storagePools": {"fast.*": ["aggr1"]}}),
                "fast-ontap",
                &rich,
                Match,
            ),
            (
                "pools miss pool",
                json!({"storagePools": {"fast.*": ["aggr2"]}}),
                "fast-ontap",
                &rich,
                NotInStoragePools,
            ),
            (
                "pools miss backend",
                json!({"storagePools": {"fast.*": ["aggr1"]}}),
                "slow",
                &rich,
                NotInStoragePools,
            ),
            (
                "pools unanchored",
                json!({"storagePools": {"slow": ["aggr"]}}),
                "myslower",
                &aggr10,
                Match,
            ),
            (
                "pools anchored",
                json!({"storagePools": {"^slow$": ["aggr"]}}),
                "myslower",
                &aggr10,
                NotInStoragePools,
            ),
            (
                "pools entry with no pool patterns",
                json!({"storagePools": {".*": []}}),
                "b",
                &bare,
                NotInStoragePools,
            ),
            (
                "pools second entry",
                json!({"storagePools": {"x": [".*"], "b": ["p"]}}),
                "b",
                &bare,
                Match,
            ),
            // Attributes and storagePools: both must hold; the attribute reason comes first.
            (
                "attrs and pools both fail",
                json!({"attributes": {"media": "hdd"}, "storagePools": {"x": ["y"]}}),
                "b",
                &rich,
                mismatch("media", "hdd", Some("{ssd}")),
            ),
            (
                "attrs pass, pools fail",
                json!({"attributes": {"media": "ssd"}, "storagePools": {"x": ["y"]}}),
                "b",
                &rich,
                NotInStoragePools,
            ),
            (
                "attrs and pools pass",
                json!({"attributes": {"media": "ssd"}, "storagePools": {"b": ["aggr"]}}),
                "b",
                &rich,
                Match,
            ),
            // additionalStoragePools only.
            (
                "additional hit",
                json!({"additionalStoragePools": {"b1": ["p1"]}}),
                "b1",
                &bare,
                MatchAdditional,
            ),
            (
                "additional miss",
                json!({"additionalStoragePools": {"b1": ["p1"]}}),
                "b2",
                &bare,
                NotInAdditional,
            ),
            (
                "requiredStorage hit",
                json!({"requiredStorage": {"b1": ["p1"]}}),
                "b1",
                &bare,
                MatchAdditional,
            ),
            // Additional with attributes: additional wins, otherwise attributes decide.
            (
                "additional beats failing attributes",
                json!({"attributes": {"media": "hdd"}, "additionalStoragePools": {"b1": ["p1"]}}),
                "b1",
                &bare,
                MatchAdditional,
            ),
            (
                "additional miss, attributes match",
                json!({"attributes": {"media": "ssd"}, "additionalStoragePools": {"other": ["x"]}}),
                "b",
                &rich,
                Match,
            ),
            (
                "additional miss, attributes fail",
                json!({"attributes": {"media": "hdd"}, "additionalStoragePools": {"other": ["x"]}}),
                "b",
                &rich,
                mismatch("media", "hdd", Some("{ssd}")),
            ),
            (
                "additional miss, storagePools hit",
                json!({"storagePools": {"b": ["aggr1"]}, "additionalStoragePools": {"o": ["x"]}}),
                "b",
                &rich,
                Match,
            ),
            (
                "additional miss, storagePools miss",
                json!({"storagePools": {"b": ["zzz"]}, "additionalStoragePools": {"o": ["x"]}}),
                "b",
                &rich,
                NotInStoragePools,
            ),
            // excludeStoragePools beats everything.
            (
                "exclude beats additional",
                json!({"additionalStoragePools": {"b1": ["p1"]}, "excludeStoragePools": {"b": ["p"]}}),
                "b1",
                &bare,
                Excluded,
            ),
            (
                "exclude beats matching attributes",
                json!({"attributes": {"snapshots": "true"}, "excludeStoragePools": {".*": ["aggr1"]}}),
                "b",
                &rich,
                Excluded,
            ),
            (
                "exclude only, hit",
                json!({"excludeStoragePools": {"b": ["p1"]}}),
                "b",
                &bare,
                Excluded,
            ),
            (
                "exclude only, miss",
                json!({"excludeStoragePools": {"b": ["p2"]}}),
                "b",
                &bare,
                Match,
            ),
            (
                "exclude backend hit but pool miss",
                json!({"excludeStoragePools": {"b": ["zzz"]}, "additionalStoragePools": {"b": ["p1"]}}),
                "b",
                &bare,
                MatchAdditional,
            ),
        ];
        for (what, wire, backend, pool, want) in cases {
            let class = class(wire);
            let got = class.check(backend, pool);
            assert_eq!(got, want, "{what}");
            assert_eq!(class.matches(backend, pool), want.is_match(), "{what}");
        }
    }

    #[test]
    fn type_mismatch_never_matches() {
        // Only a hand-built config can hold a request of the wrong type.
        let mut cfg = StorageClassConfig::default();
        cfg.attributes
            .insert("snapshots".into(), Request::String("true".into()));
        let class = CompiledClass::compile(cfg).unwrap();
        let p = pool("p", &[("snapshots", Offer::Bool(true))]);
        assert_eq!(
            class.check("b", &p),
            mismatch("snapshots", "true", Some("true"))
        );
        assert_eq!(req("IOPS", "7"), Request::Int(7));
    }

    #[test]
    fn compile_refuses_bad_patterns() {
        let long = "a".repeat(MAX_PATTERN_LEN + 1);
        let cases: Vec<(Value, &str)> = vec![
            (
                json!({"storagePools": {"b(": ["p"]}}),
                "storagePools: backend pattern \"b(\" is not a valid regular expression: unclosed group",
            ),
            (
                json!({"storagePools": {"b": ["[z-a]"]}}),
                "storagePools: pool pattern \"[z-a]\" is not a valid regular expression",
            ),
            (
                json!({"additionalStoragePools": {"b": ["*"]}}),
                "additionalStoragePools: pool pattern \"*\" is not a valid regular expression",
            ),
            (
                json!({"excludeStoragePools": {"b": ["p", "\\"]}}),
                "excludeStoragePools: pool pattern \"\\\\\" is not a valid regular expression",
            ),
            (
                json!({"storagePools": {long.clone(): ["p"]}}),
                "is longer than 1024 bytes",
            ),
            (
                json!({"storagePools": {"b": [long]}}),
                "storagePools: pool pattern \"aaaa",
            ),
            (
                json!({"storagePools": {"b": ["\\w{1,63}"]}}),
                "is too expensive",
            ),
            (
                json!({"excludeStoragePools": {"b": ["((a{100}){100}){100}"]}}),
                "is too expensive",
            ),
            (
                json!({"storagePools": {"b": ["(".repeat(100) + &")".repeat(100)]}}),
                "storagePools: pool pattern",
            ),
        ];
        // requiredStorage patterns are checked when the class is parsed, naming that key.
        let err =
            StorageClassConfig::from_value(json!({"requiredStorage": {"(?<": ["p"]}})).unwrap_err();
        assert!(
            err.contains("requiredStorage: backend pattern \"(?<\" is not a valid"),
            "{err}"
        );
        for (wire, want) in cases {
            let err = CompiledClass::compile(parse(wire.clone())).unwrap_err();
            assert!(err.contains(want), "{wire}: {err}");
            assert!(!err.contains('\n'), "{wire}: one line please: {err}");
            assert!(err.len() < 400, "{wire}: {err}");
        }
        // Reasonable patterns compile.
        for p in [
            ".*",
            "\\w+",
            "(?i)^aggr[0-9]{1,3}$",
            "ontap-(nas|san)",
            "[A-Za-z0-9_]{1,63}",
        ] {
            assert!(
                CompiledClass::compile(parse(json!({"storagePools": {p: [p]}}))).is_ok(),
                "{p}"
            );
        }
    }

    #[test]
    fn compile_caps_the_number_of_patterns() {
        let pools: Vec<String> = (0..MAX_PATTERNS_PER_CLASS)
            .map(|i| format!("p{i}"))
            .collect();
        // One backend pattern plus MAX pool patterns is one too many.
        let err = CompiledClass::compile(parse(json!({"storagePools": {"b": pools}}))).unwrap_err();
        assert!(err.contains("more than 256"), "{err}");
        let ok: Vec<String> = pools_upto(MAX_PATTERNS_PER_CLASS - 1);
        assert!(CompiledClass::compile(parse(json!({"storagePools": {"b": ok}}))).is_ok());
    }

    fn pools_upto(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("p{i}")).collect()
    }

    #[test]
    fn verdict_display() {
        let cases = [
            (
                mismatch("IOPS", "6000", Some("[100, 5000]")),
                "IOPS: requested 6000, the pool offers [100, 5000]",
            ),
            (
                mismatch("media", "ssd", None),
                "media: requested ssd, the pool does not offer it",
            ),
            (PoolVerdict::Excluded, "listed in excludeStoragePools"),
            (PoolVerdict::NotInStoragePools, "not listed in storagePools"),
        ];
        for (verdict, want) in cases {
            assert_eq!(verdict.to_string(), want);
        }
        assert!(PoolVerdict::Match.is_match() && PoolVerdict::MatchAdditional.is_match());
        for v in [
            PoolVerdict::Excluded,
            PoolVerdict::NotInAdditional,
            PoolVerdict::NotInStoragePools,
        ] {
            assert!(!v.is_match());
        }
    }

    proptest::proptest! {
        #[test]
        fn from_json_never_panics(body in proptest::collection::vec(proptest::num::u8::ANY, 0..200)) {
            let _ = StorageClassConfig::from_json(&body);
        }

        #[test]
        fn compile_never_panics(pattern in "\\PC{0,30}") {
            let mut cfg = StorageClassConfig::default();
            cfg.storage_pools.insert(pattern.clone(), vec![pattern]);
            if let Ok(class) = CompiledClass::compile(cfg) {
                let _ = class.check("backend", &pool("pool", &[]));
            }
        }
    }
}
