//! The `solidfire-san` backend config (docs/trident-contract.md#backend-config): Trident's
//! file unchanged. Its keys have no JSON tags in Trident, so they are written in Go field case
//! (`EndPoint`, `SVIP`, `TenantName`, …) and matched like Go's decoder does (exact, else
//! case-insensitive). Unknown keys are ignored. Errors name the field and never echo a value:
//! the endpoint carries the cluster admin's password.

use std::time::Duration;

use serde_json::{Map, Value};

use super::wire::Qos;
use crate::drivers::config::{
    Secret, as_object, field, opt_str, parse_bool, parse_duration, trusted_ca, wrong_type,
};
use crate::drivers::{CommonConfig, DriverError, DriverResult};
use crate::net::{TlsOptions, Url};

/// The lowest Element API version the driver speaks; lower configured versions are raised
/// to it, as Trident does.
pub const MIN_API_VERSION: &str = "8.0";

/// The smallest volume (Trident's SolidFire minimum): 1,000,000,000 bytes.
pub const MIN_VOLUME_BYTES: u64 = 1_000_000_000;

/// The largest volume Element makes: 16 TiB.
pub const MAX_VOLUME_BYTES: u64 = 16 << 40;

/// The pool of a backend without `Types`.
pub const DEFAULT_POOL: &str = "SolidFire-default";

/// The IOPS range the default pool offers (Trident's).
pub const DEFAULT_POOL_IOPS: (i64, i64) = (1000, 10_000);

/// Default timeout of one Element call.
pub const DEFAULT_API_TIMEOUT: Duration = Duration::from_secs(30);

/// Default bound on waiting for an async clone.
pub const DEFAULT_CLONE_TIMEOUT: Duration = Duration::from_secs(300);

/// The most volume access groups a backend may name (Trident's limit).
pub const MAX_ACCESS_GROUPS: usize = 4;

/// One `Types` entry: a QoS class, and the pool of that name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QosType {
    pub name: String,
    pub qos: Qos,
}

/// The parsed config. `Debug` never shows the password.
#[derive(Debug, Clone)]
pub struct SolidFireConfig {
    /// `https://host[:port]/json-rpc/<version>`: the endpoint without credentials.
    pub url: String,
    /// The API version in the URL (after raising to [`MIN_API_VERSION`]).
    pub api_version: String,
    pub username: String,
    pub password: Secret,
    /// `ip:port` of the storage VIP: the iSCSI portal.
    pub svip: String,
    pub tenant_name: String,
    pub initiator_iface: String,
    /// `None` when the config has no `Types` (or an empty list): the default pool.
    pub types: Option<Vec<QosType>>,
    pub access_groups: Vec<i64>,
    pub use_chap: bool,
    /// 512 (512e, the default) or 4096 (native 4K).
    pub default_block_size: u32,
    pub legacy_name_prefix: String,
    /// `limitVolumeSize`: the largest volume this backend makes.
    pub limit_volume_size: Option<u64>,
    pub tls: TlsOptions,
    /// storch extension: timeout of one Element call (default 30 s).
    pub api_timeout: Duration,
    /// storch extension: how long to wait for an async clone (default 300 s).
    pub clone_timeout: Duration,
}

impl SolidFireConfig {
    pub fn parse(doc: &Value, _common: &CommonConfig) -> DriverResult<SolidFireConfig> {
        let obj = as_object(doc)?;
        let endpoint = match opt_str(obj, "EndPoint")? {
            Some(s) if !s.trim().is_empty() => s.trim(),
            _ => {
                return Err(DriverError::Invalid(
                    "missing EndPoint: the Element API endpoint \
                     (https://user:password@MVIP/json-rpc/VERSION) is required"
                        .into(),
                ));
            }
        };
        let ep = parse_endpoint(endpoint)?;
        let required = |key: &'static str, what: &str| -> DriverResult<String> {
            match opt_str(obj, key)? {
                Some(s) if !s.trim().is_empty() => Ok(s.trim().to_string()),
                _ => Err(DriverError::Invalid(format!(
                    "missing {key}: {what} is required"
                ))),
            }
        };
        let svip = required("SVIP", "the storage VIP (ip:port)")?;
        let tenant_name = required("TenantName", "the tenant account name")?;
        let initiator_iface = opt_str(obj, "InitiatorIFace")?
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .unwrap_or("default")
            .to_string();
        let legacy_name_prefix = opt_str(obj, "LegacyNamePrefix")?
            .unwrap_or("netappdvp-")
            .to_string();
        let use_chap = match field(obj, "UseCHAP") {
            None | Some(Value::Null) => false,
            Some(v) => parse_bool("UseCHAP", v)?,
        };
        let default_block_size = match field(obj, "DefaultBlockSize") {
            None | Some(Value::Null) => 512,
            Some(Value::Number(n)) if n.as_u64() == Some(512) => 512,
            Some(Value::Number(n)) if n.as_u64() == Some(4096) => 4096,
            Some(_) => {
                return Err(DriverError::Invalid(
                    "invalid value for DefaultBlockSize: expected 512 or 4096".into(),
                ));
            }
        };
        let verify = match field(obj, "tlsVerify") {
            None | Some(Value::Null) => true,
            Some(v) => parse_bool("tlsVerify", v)?,
        };
        let trusted_ca_pem = trusted_ca(obj)?;
        if !verify {
            tracing::warn!(endpoint = %ep.url, "tlsVerify is false: the cluster's certificate is not checked");
        }
        Ok(SolidFireConfig {
            url: ep.url,
            api_version: ep.version,
            username: ep.username,
            password: ep.password,
            svip,
            tenant_name,
            initiator_iface,
            types: parse_types(obj)?,
            access_groups: parse_access_groups(obj)?,
            use_chap,
            default_block_size,
            legacy_name_prefix,
            limit_volume_size: parse_limit(obj)?,
            tls: TlsOptions {
                verify,
                trusted_ca_pem,
            },
            api_timeout: parse_duration(obj, "apiTimeout", DEFAULT_API_TIMEOUT)?,
            clone_timeout: parse_duration(obj, "cloneTimeout", DEFAULT_CLONE_TIMEOUT)?,
        })
    }

    /// The backend name when `backendName` is not given: `solidfire_<SVIP host>`.
    pub fn default_backend_name(&self) -> String {
        let host = self.svip.split(':').next().unwrap_or_default();
        format!("solidfire_{host}")
    }

    /// The QoS type named `name`, if the config has `Types`.
    pub fn qos_type(&self, name: &str) -> Option<&QosType> {
        self.types.as_ref()?.iter().find(|t| t.name == name)
    }
}

/// The endpoint split into its parts.
#[derive(Debug, Clone)]
pub struct Endpoint {
    pub url: String,
    pub version: String,
    pub username: String,
    pub password: Secret,
}

/// `https://user:password@host[:port]/json-rpc/<digits.>`: credentials percent-decoded,
/// versions below 8.0 raised to 8.0.
pub fn parse_endpoint(s: &str) -> DriverResult<Endpoint> {
    let bad = |why: &str| {
        DriverError::Invalid(format!(
            "invalid value for EndPoint: {why} (expected https://user:password@MVIP/json-rpc/VERSION)"
        ))
    };
    let url = Url::parse(s).map_err(|_| bad("not a URL"))?;
    if url.scheme() != "https" {
        return Err(bad("the scheme must be https"));
    }
    let host = url.host_str().filter(|h| !h.is_empty());
    let Some(host) = host else {
        return Err(bad("no host"));
    };
    let username = percent_decode(url.username());
    let password = percent_decode(url.password().unwrap_or_default());
    if username.is_empty() {
        return Err(bad("no user name before '@'"));
    }
    let path = url.path().trim_end_matches('/');
    let version = path
        .strip_prefix("/json-rpc/")
        .filter(|v| !v.is_empty() && v.chars().all(|c| c.is_ascii_digit() || c == '.'))
        .ok_or_else(|| bad("the path must be /json-rpc/<version>"))?;
    let version = if version_less(version, MIN_API_VERSION) {
        MIN_API_VERSION.to_string()
    } else {
        version.to_string()
    };
    let authority = match url.port() {
        Some(p) => format!("{host}:{p}"),
        None => host.to_string(),
    };
    Ok(Endpoint {
        url: format!("https://{authority}/json-rpc/{version}"),
        version,
        username,
        password: Secret::new(password),
    })
}

/// Whether dotted version `a` is below `b` (numerically, part by part).
pub fn version_less(a: &str, b: &str) -> bool {
    let parts = |v: &str| -> Vec<u64> { v.split('.').map(|p| p.parse().unwrap_or(0)).collect() };
    let (mut a, mut b) = (parts(a), parts(b));
    let n = a.len().max(b.len());
    a.resize(n, 0);
    b.resize(n, 0);
    a < b
}

/// A backend file's `Endpoint` for `username`/`password` on the MVIP `address`:
/// `https://USER:PASSWORD@ADDRESS/json-rpc/VERSION`, both credentials percent-encoded.
pub fn endpoint_url(username: &str, password: &str, address: &str, version: &str) -> String {
    let escape = |s: &str| -> String {
        s.bytes()
            .map(|b| match b {
                b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                    (b as char).to_string()
                }
                _ => format!("%{b:02X}"),
            })
            .collect()
    };
    format!(
        "https://{}:{}@{address}/json-rpc/{version}",
        escape(username),
        escape(password)
    )
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && let (Some(h), Some(l)) = (hex(bytes[i + 1]), hex(bytes[i + 2]))
        {
            out.push((h * 16 + l) as u8);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn parse_types(obj: &Map<String, Value>) -> DriverResult<Option<Vec<QosType>>> {
    let list = match field(obj, "Types") {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::Array(a)) if a.is_empty() => return Ok(None),
        Some(Value::Array(a)) => a,
        Some(other) => return Err(wrong_type("Types", "a list", Some(other))),
    };
    let mut out: Vec<QosType> = Vec::new();
    for (i, item) in list.iter().enumerate() {
        let Some(t) = item.as_object() else {
            return Err(wrong_type(&format!("Types[{i}]"), "an object", Some(item)));
        };
        let name = match field(t, "Type") {
            Some(Value::String(s)) if !s.trim().is_empty() => s.trim().to_string(),
            _ => {
                return Err(DriverError::Invalid(format!(
                    "missing Types[{i}].Type: each QoS type needs a name"
                )));
            }
        };
        if out.iter().any(|o| o.name == name) {
            return Err(DriverError::Invalid(format!(
                "invalid value for Types[{i}].Type: the type {name} is listed twice"
            )));
        }
        let qos = match field(t, "Qos") {
            Some(Value::Object(q)) => parse_qos(&format!("Types[{i}].Qos"), q)?,
            other => return Err(wrong_type(&format!("Types[{i}].Qos"), "an object", other)),
        };
        out.push(QosType { name, qos });
    }
    Ok(Some(out))
}

fn parse_qos(path: &str, q: &Map<String, Value>) -> DriverResult<Qos> {
    let get = |key: &str| -> DriverResult<i64> {
        match field(q, key) {
            Some(Value::Number(n)) if n.as_i64().is_some_and(|v| v > 0) => {
                Ok(n.as_i64().unwrap_or_default())
            }
            other => Err(wrong_type(
                &format!("{path}.{key}"),
                "a positive integer",
                other,
            )),
        }
    };
    let qos = Qos {
        min_iops: get("minIOPS")?,
        max_iops: get("maxIOPS")?,
        burst_iops: get("burstIOPS")?,
    };
    if !(qos.min_iops <= qos.max_iops && qos.max_iops <= qos.burst_iops) {
        return Err(DriverError::Invalid(format!(
            "invalid value for {path}: expected minIOPS <= maxIOPS <= burstIOPS"
        )));
    }
    Ok(qos)
}

fn parse_access_groups(obj: &Map<String, Value>) -> DriverResult<Vec<i64>> {
    let list = match field(obj, "AccessGroups") {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Array(a)) => a,
        Some(other) => {
            return Err(wrong_type(
                "AccessGroups",
                "a list of integers",
                Some(other),
            ));
        }
    };
    let ids = list
        .iter()
        .map(|v| v.as_i64().filter(|n| *n > 0))
        .collect::<Option<Vec<i64>>>()
        .ok_or_else(|| {
            DriverError::Invalid(
                "invalid value for AccessGroups: expected a list of volume access group ids".into(),
            )
        })?;
    if ids.len() > MAX_ACCESS_GROUPS {
        return Err(DriverError::Invalid(format!(
            "invalid value for AccessGroups: at most {MAX_ACCESS_GROUPS} volume access groups"
        )));
    }
    Ok(ids)
}

fn parse_limit(obj: &Map<String, Value>) -> DriverResult<Option<u64>> {
    match opt_str(obj, "limitVolumeSize")? {
        None => Ok(None),
        Some(s) if s.trim().is_empty() => Ok(None),
        Some(s) => crate::model::parse_size(s.trim())
            .map(Some)
            .map_err(|e| DriverError::Invalid(format!("invalid value for limitVolumeSize: {e}"))),
    }
}
