//! The fake driver's config: the knobs (latency, failures, CHAP, state file), the pools and
//! the building of a [`FakeDriver`] from a backend config.

use std::collections::{BTreeSet, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Map, Value};

use super::client::{ArrayState, Persister};
use super::wire::load_state;
use super::{DEFAULT_LOGNORMAL_SIGMA, DRIVER_NAME, FakeDriver};
use crate::drivers::config::{as_object, field, json_type, opt_str, wrong_type};
use crate::drivers::{CommonConfig, DriverError, DriverResult};
use crate::model::{Offer, PoolInfo, Protocol};

/// How long each array call takes (the `latency` knob).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Latency {
    None,
    Fixed(Duration),
    LogNormal { median: Duration, sigma: f64 },
}

impl Latency {
    /// Parses `0ms`, `10ms`, `fixed:10ms`, `lognormal:200ms`, `lognormal:200ms:0.8`.
    pub fn parse(s: &str) -> Result<Latency, String> {
        let s = s.trim();
        let duration = |d: &str| {
            humantime::parse_duration(d.trim())
                .map_err(|e| format!("{d:?} is not a duration such as 10ms ({e})"))
        };
        if let Some(rest) = s.strip_prefix("lognormal:") {
            let (median, sigma) = match rest.split_once(':') {
                Some((m, sg)) => {
                    let sigma: f64 = sg
                        .trim()
                        .parse()
                        .map_err(|_| format!("lognormal sigma {sg:?} is not a number"))?;
                    if !(0.0..=5.0).contains(&sigma) {
                        return Err(format!("lognormal sigma {sigma} is not between 0 and 5"));
                    }
                    (duration(m)?, sigma)
                }
                None => (duration(rest)?, DEFAULT_LOGNORMAL_SIGMA),
            };
            if median.is_zero() {
                return Ok(Latency::None);
            }
            return Ok(Latency::LogNormal { median, sigma });
        }
        let d = duration(s.strip_prefix("fixed:").unwrap_or(s))?;
        Ok(if d.is_zero() {
            Latency::None
        } else {
            Latency::Fixed(d)
        })
    }

    /// One delay, or `None` for no delay.
    pub fn sample(&self) -> Option<Duration> {
        match *self {
            Latency::None => None,
            Latency::Fixed(d) => Some(d),
            Latency::LogNormal { median, sigma } => {
                // Box–Muller: u1 in (0, 1], so ln(u1) is finite.
                let u1 = 1.0 - rand::random::<f64>();
                let u2 = rand::random::<f64>();
                let z = (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos();
                let factor = (sigma * z).exp().min(100.0);
                Some(median.mul_f64(factor))
            }
        }
    }
}

/// A credential from the config: kept, never shown.
#[derive(Clone)]
pub(super) struct Secret(#[allow(dead_code)] String);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("<redacted>")
    }
}

#[derive(Debug)]
pub(super) struct Pool {
    /// Name, offers (with `backendType`) and configured capacity, as discovered.
    pub(super) info: PoolInfo,
    pub(super) size_bytes: u64,
    /// `failPools` message for this pool.
    pub(super) fail: Option<String>,
}

impl FakeDriver {
    /// Parses a whole fake backend config (common part included).
    pub fn new(doc: &Value) -> DriverResult<FakeDriver> {
        let common = CommonConfig::parse(doc)?;
        Self::from_config(doc, &common)
    }

    /// Builds the driver from a backend config whose common part is already parsed. Loads the
    /// state file when `statePath` is set; contacts nothing else.
    pub fn from_config(doc: &Value, common: &CommonConfig) -> DriverResult<FakeDriver> {
        let cfg = FakeConfig::parse(doc, common)?;
        let mut state = ArrayState {
            free: cfg.pools.iter().map(|p| p.size_bytes).collect(),
            ..ArrayState::default()
        };
        if let Some(p) = &cfg.persister {
            load_state(
                p,
                &cfg.instance_name,
                &cfg.pools,
                &cfg.pool_index,
                &mut state,
            )?;
        }
        Ok(FakeDriver {
            cfg,
            storage_prefix: common.storage_prefix.clone(),
            default_size_bytes: common.default_size_bytes,
            state: Mutex::new(state),
        })
    }
}

/// A fake backend config, parsed: everything the driver takes from it but the state file.
pub struct FakeConfig {
    pub(super) backend_name: String,
    pub(super) instance_name: String,
    pub(super) protocol: Protocol,
    /// Sorted by name.
    pub(super) pools: Vec<Pool>,
    pub(super) pool_index: HashMap<String, usize>,
    pub(super) latency: Latency,
    pub(super) failure_rate: f64,
    /// `failDestroy` message.
    pub(super) fail_destroy: Option<String>,
    /// `useCHAP`.
    pub(super) chap: bool,
    /// `perHostAccess`.
    pub(super) per_host_access: bool,
    /// `limitVolumeSize`: the largest volume, if limited.
    pub(super) limit_volume_size: Option<u64>,
    // Kept as an array driver keeps its credentials; the fake never sends them anywhere.
    #[allow(dead_code)]
    username: Option<Secret>,
    #[allow(dead_code)]
    password: Option<Secret>,
    pub(super) persister: Option<Arc<Persister>>,
}

impl FakeConfig {
    /// Parses the driver's part of a backend config whose common part is already parsed;
    /// reads no file.
    pub fn parse(doc: &Value, common: &CommonConfig) -> DriverResult<FakeConfig> {
        let obj = as_object(doc)?;
        let protocol = parse_protocol(obj)?;
        let instance_name = opt_str(obj, "instanceName")?
            .unwrap_or_default()
            .to_string();
        let backend_name = backend_name(common, &instance_name)?;
        let mut pools = parse_pools(obj)?;
        let pool_index: HashMap<String, usize> = pools
            .iter()
            .enumerate()
            .map(|(i, p)| (p.info.name.clone(), i))
            .collect();
        let latency = parse_latency(obj)?;
        let failure_rate = parse_failure_rate(obj)?;
        apply_fail_pools(obj, &mut pools, &pool_index)?;
        Ok(FakeConfig {
            instance_name,
            backend_name,
            protocol,
            pools,
            pool_index,
            latency,
            failure_rate,
            fail_destroy: parse_fail_destroy(obj)?,
            chap: parse_flag(obj, "useCHAP")?,
            per_host_access: parse_flag(obj, "perHostAccess")?,
            limit_volume_size: parse_limit(obj)?,
            username: opt_str(obj, "username")?.map(|s| Secret(s.to_string())),
            password: opt_str(obj, "password")?.map(|s| Secret(s.to_string())),
            persister: parse_state_path(obj)?,
        })
    }
}

fn parse_protocol(obj: &Map<String, Value>) -> DriverResult<Protocol> {
    match opt_str(obj, "protocol")? {
        None => Ok(Protocol::Any),
        Some(p) => Protocol::parse(p).ok_or_else(|| {
            DriverError::Invalid(format!(
                "invalid value for protocol: {p:?} is not one of file, block or \"\""
            ))
        }),
    }
}

/// `backendName`, else `instanceName`; one of them is required.
fn backend_name(common: &CommonConfig, instance_name: &str) -> DriverResult<String> {
    match (&common.backend_name, instance_name) {
        (Some(b), _) => Ok(b.clone()),
        (None, "") => Err(DriverError::Invalid(
            "the fake driver needs backendName or instanceName to name the backend".to_string(),
        )),
        (None, i) => {
            crate::model::validate_name("instanceName", i)
                .map_err(|e| DriverError::Invalid(e.to_string()))?;
            Ok(i.to_string())
        }
    }
}

fn parse_latency(obj: &Map<String, Value>) -> DriverResult<Latency> {
    match opt_str(obj, "latency")? {
        None => Ok(Latency::None),
        Some(s) => Latency::parse(s)
            .map_err(|e| DriverError::Invalid(format!("invalid value for latency: {e}"))),
    }
}

fn parse_failure_rate(obj: &Map<String, Value>) -> DriverResult<f64> {
    match field(obj, "failureRate") {
        None | Some(Value::Null) => Ok(0.0),
        Some(Value::Number(n)) => {
            let r = n.as_f64().unwrap_or(f64::NAN);
            if !(0.0..=1.0).contains(&r) {
                return Err(DriverError::Invalid(format!(
                    "invalid value for failureRate: {r} is not between 0.0 and 1.0"
                )));
            }
            Ok(r)
        }
        Some(other) => Err(wrong_type("failureRate", "a number", Some(other))),
    }
}

/// `failPools`: a message per configured pool.
fn apply_fail_pools(
    obj: &Map<String, Value>,
    pools: &mut [Pool],
    pool_index: &HashMap<String, usize>,
) -> DriverResult<()> {
    match field(obj, "failPools") {
        None | Some(Value::Null) => Ok(()),
        Some(Value::Object(m)) => {
            for (pool, msg) in m {
                let Some(&i) = pool_index.get(pool) else {
                    return Err(DriverError::Invalid(format!(
                        "invalid value for failPools: pool {pool:?} is not configured"
                    )));
                };
                let Value::String(msg) = msg else {
                    return Err(wrong_type(
                        &format!("failPools.{pool}"),
                        "a string",
                        Some(msg),
                    ));
                };
                pools[i].fail = Some(msg.clone());
            }
            Ok(())
        }
        Some(other) => Err(wrong_type("failPools", "an object", Some(other))),
    }
}

fn parse_fail_destroy(obj: &Map<String, Value>) -> DriverResult<Option<String>> {
    match field(obj, "failDestroy") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(m)) => Ok(Some(m.clone())),
        Some(other) => Err(wrong_type("failDestroy", "a string", Some(other))),
    }
}

/// A boolean knob (`useCHAP`, `perHostAccess`), false when absent.
fn parse_flag(obj: &Map<String, Value>, key: &'static str) -> DriverResult<bool> {
    match field(obj, key) {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(other) => Err(wrong_type(key, "a boolean", Some(other))),
    }
}

/// `limitVolumeSize`: a size at least the smallest volume.
fn parse_limit(obj: &Map<String, Value>) -> DriverResult<Option<u64>> {
    let Some(s) = opt_str(obj, "limitVolumeSize")? else {
        return Ok(None);
    };
    let limit = crate::model::parse_size(s)
        .map_err(|e| DriverError::Invalid(format!("invalid value for limitVolumeSize: {e}")))?;
    if limit < super::MIN_VOLUME_BYTES {
        return Err(DriverError::Invalid(format!(
            "invalid value for limitVolumeSize: below the smallest volume ({} bytes)",
            super::MIN_VOLUME_BYTES
        )));
    }
    Ok(Some(limit))
}

fn parse_state_path(obj: &Map<String, Value>) -> DriverResult<Option<Arc<Persister>>> {
    match opt_str(obj, "statePath")? {
        None => Ok(None),
        Some("") => Err(DriverError::Invalid(
            "invalid value for statePath: must not be empty".to_string(),
        )),
        Some(p) => Ok(Some(Arc::new(Persister::new(PathBuf::from(p))))),
    }
}

pub(super) fn check_name(field: &'static str, name: &str) -> DriverResult<()> {
    crate::model::validate_name(field, name).map_err(|e| DriverError::Invalid(e.to_string()))
}

fn parse_pools(obj: &Map<String, Value>) -> DriverResult<Vec<Pool>> {
    let pools = match field(obj, "pools") {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Object(m)) => m,
        Some(other) => return Err(wrong_type("pools", "an object", Some(other))),
    };
    let mut out = Vec::with_capacity(pools.len());
    for (name, pool) in pools {
        crate::model::validate_name("pool name", name)
            .map_err(|e| DriverError::Invalid(format!("invalid value for pools: {e}")))?;
        let Value::Object(pool) = pool else {
            return Err(wrong_type(
                &format!("pools.{name}"),
                "an object",
                Some(pool),
            ));
        };
        let mut offers = match field(pool, "attributes") {
            None | Some(Value::Null) => {
                return Err(DriverError::Invalid(format!(
                    "missing pools.{name}.attributes: every fake pool needs an attributes \
                     object (it may be {{}})"
                )));
            }
            Some(v @ Value::Object(_)) => {
                crate::model::attributes::parse_offers(v).map_err(|e| {
                    DriverError::Invalid(format!("invalid value for pools.{name}.attributes: {e}"))
                })?
            }
            Some(other) => {
                return Err(wrong_type(
                    &format!("pools.{name}.attributes"),
                    "an object",
                    Some(other),
                ));
            }
        };
        offers.insert(
            "backendType".to_string(),
            Offer::Strings(BTreeSet::from([DRIVER_NAME.to_string()])),
        );
        let size_bytes = match field(pool, "sizeBytes") {
            None | Some(Value::Null) => 0,
            Some(Value::Number(n)) if n.is_u64() => n.as_u64().unwrap_or_default(),
            Some(other) => {
                return Err(DriverError::Invalid(format!(
                    "invalid value for pools.{name}.sizeBytes: expected a non-negative integer, \
                     found {}",
                    json_type(other)
                )));
            }
        };
        out.push(Pool {
            info: PoolInfo {
                name: name.clone(),
                offers,
                total_bytes: Some(size_bytes),
            },
            size_bytes,
            fail: None,
        });
    }
    out.sort_by(|a, b| a.info.name.cmp(&b.info.name));
    Ok(out)
}
