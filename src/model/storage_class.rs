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
use super::{PoolInfo, Request, Sealed};

mod codec;
pub mod driver_parameters;
mod parameters;
pub use driver_parameters::{DriverParameter, ParamKind};
pub use parameters::{ClassParameters, class_from_parameters};

/// `backend regex → [pool regex]`, as in `storagePools`, `additionalStoragePools`,
/// `excludeStoragePools`.
pub type PoolSelector = BTreeMap<String, Vec<String>>;

/// A storage class as clients send and receive it. `attributes` hold typed requests, written
/// back as strings; `requiredStorage` is read as an alias of `additionalStoragePools`.
/// `parameters` are driver parameters ([`driver_parameters`]): passed to the driver, never
/// matched against offers. Its bincode form is schema 1's (see `codec`).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct StorageClassConfig {
    pub version: String,
    pub name: String,
    pub attributes: BTreeMap<String, Request>,
    pub storage_pools: PoolSelector,
    pub additional_storage_pools: PoolSelector,
    pub exclude_storage_pools: PoolSelector,
    /// Driver parameters by name. In a recorded class, secret ones show
    /// [`driver_parameters::REDACTED`] and their values are in `sealed`.
    pub parameters: BTreeMap<String, String>,
    /// The secret parameters' values, sealed (`crate::secrets::seal_class`).
    pub sealed: Option<Sealed>,
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
        StorageClassConfig::from_value_reporting(value).map(|(config, _)| config)
    }

    /// [`StorageClassConfig::from_value`], also answering the top-level keys it ignored
    /// (sorted), so that a frontend can say which (`warnings`).
    pub fn from_value_reporting(value: Value) -> Result<(StorageClassConfig, Vec<String>), String> {
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
        let parameters = take_parameters(take("parameters"))?;
        driver_parameters::check_parameters(&parameters, backend_type(&attributes))?;
        let ignored: Vec<String> = obj.keys().cloned().collect();
        let config = StorageClassConfig {
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
            parameters,
            sealed: None,
        };
        Ok((config, ignored))
    }

    /// Whether a parameter's value is secret (sealed in events, redacted in output).
    pub fn is_secret_parameter(name: &str) -> bool {
        driver_parameters::is_secret_parameter(name)
    }
}

/// The driver a class asks for with `backendType`, if any.
fn backend_type(attributes: &BTreeMap<String, Request>) -> Option<&str> {
    match attributes.get("backendType") {
        Some(Request::String(d)) => Some(d),
        _ => None,
    }
}

/// `{"<parameter>":"<string>"}`: driver parameters, every value a JSON string.
fn take_parameters(value: Option<Value>) -> Result<BTreeMap<String, String>, String> {
    let mut out = BTreeMap::new();
    for (name, v) in take_object("parameters", value)? {
        let Value::String(s) = v else {
            return Err(format!(
                "parameters.{} must be a JSON string, got {}",
                clip(&name),
                json_kind(&v)
            ));
        };
        out.insert(name, s);
    }
    Ok(out)
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
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    parameters: BTreeMap<&'a str, &'a str>,
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
            // Secret parameters never leave in clear, whatever the config holds.
            parameters: self
                .parameters
                .iter()
                .map(|(k, v)| {
                    let v = if Self::is_secret_parameter(k) {
                        driver_parameters::REDACTED
                    } else {
                        v.as_str()
                    };
                    (k.as_str(), v)
                })
                .collect(),
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
    /// The pool's driver does not take a class parameter, or the parameter selects another
    /// pool: (parameter, why).
    ParameterRefused {
        parameter: String,
        reason: String,
    },
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
            PoolVerdict::ParameterRefused { parameter, reason } => {
                write!(f, "parameters.{parameter}: {reason}")
            }
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
        // 1b. The pool's driver must take every driver parameter, and a parameter that
        // selects a pool must name this one.
        if !self.config.parameters.is_empty() {
            let driver = match pool.offers.get("backendType") {
                Some(super::Offer::Strings(d)) if d.len() == 1 => d.iter().next(),
                _ => None,
            };
            if let Some((parameter, reason)) = driver_parameters::pool_refusal(
                &self.config.parameters,
                driver.map(String::as_str),
                &pool.name,
            ) {
                return PoolVerdict::ParameterRefused { parameter, reason };
            }
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
mod tests;
