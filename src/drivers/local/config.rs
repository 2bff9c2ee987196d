//! The local driver's backend config: parsing and validation only, no filesystem access (the
//! pool directories are created and checked on first use, see `LocalDriver::discover`).

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use super::DRIVER_NAME;
use crate::drivers::config::{as_object, field, json_type, opt_str, wrong_type};
use crate::drivers::{CommonConfig, DriverError, DriverResult};
use crate::model::Protocol;
use crate::model::attributes::clip;

/// The internal-name prefix when `storagePrefix` is absent (or `null` / `{}`).
pub const DEFAULT_PREFIX: &str = "storch-";

/// The longest `storagePrefix` accepted.
pub const MAX_PREFIX_LEN: usize = 64;

/// The directory permissions of a new file volume when neither the volume's `unixPermissions`
/// nor `defaults.unixPermissions` gives them.
pub const DEFAULT_UNIX_PERMISSIONS: u32 = 0o755;

/// The keys a pool object may have.
const POOL_KEYS: [&str; 3] = ["path", "media", "capacity"];

/// The `media` a pool offers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Media {
    Ssd,
    Hdd,
    Hybrid,
}

impl Media {
    pub fn as_str(self) -> &'static str {
        match self {
            Media::Ssd => "ssd",
            Media::Hdd => "hdd",
            Media::Hybrid => "hybrid",
        }
    }

    pub fn parse(s: &str) -> Option<Media> {
        match s {
            "ssd" => Some(Media::Ssd),
            "hdd" => Some(Media::Hdd),
            "hybrid" => Some(Media::Hybrid),
            _ => None,
        }
    }
}

/// One configured pool.
#[derive(Debug, Clone, PartialEq)]
pub struct PoolConfig {
    pub name: String,
    /// Absolute, as configured (symlinks in it are the administrator's and are followed once,
    /// when the pool is opened).
    pub path: PathBuf,
    /// `media` from the config; `None`: detected.
    pub media: Option<Media>,
    /// `capacity` in bytes; `None`: the filesystem's size.
    pub capacity: Option<u64>,
}

/// The whole parsed config.
#[derive(Debug, Clone, PartialEq)]
pub struct LocalConfig {
    pub backend_name: String,
    /// Whether `backend_name` was derived from the host name (no `backendName`).
    pub backend_name_derived: bool,
    /// `storagePrefix` as configured (the three states of [`CommonConfig::storage_prefix`]).
    pub storage_prefix: Option<String>,
    /// The prefix actually used: `storagePrefix`, else [`DEFAULT_PREFIX`].
    pub prefix: String,
    /// `protocol`: `Any` (the default) lets each volume choose.
    pub protocol: Protocol,
    pub default_size_bytes: u64,
    /// `defaults.spaceReserve: volume`: volumes are thick unless their request says otherwise.
    pub default_thick: bool,
    /// `defaults.unixPermissions`.
    pub default_unix_permissions: u32,
    /// Sorted by name.
    pub pools: Vec<PoolConfig>,
}

impl LocalConfig {
    /// Parses the driver's part of a backend config whose common part is already parsed.
    pub fn parse(doc: &Value, common: &CommonConfig) -> DriverResult<LocalConfig> {
        let obj = as_object(doc)?;

        let (backend_name, backend_name_derived) = match &common.backend_name {
            Some(b) => (b.clone(), false),
            None => (default_backend_name(&host_name()), true),
        };

        let prefix = match &common.storage_prefix {
            None => DEFAULT_PREFIX.to_string(),
            Some(p) => {
                check_prefix(p)?;
                p.clone()
            }
        };

        let protocol = match opt_str(obj, "protocol")? {
            None => Protocol::Any,
            Some(p) => Protocol::parse(p).ok_or_else(|| {
                DriverError::Invalid(format!(
                    "invalid value for protocol: {:?} is not one of file, block or \"\"",
                    clip(p)
                ))
            })?,
        };

        let defaults = match field(obj, "defaults") {
            None | Some(Value::Null) => None,
            Some(Value::Object(m)) => Some(m),
            Some(other) => return Err(wrong_type("defaults", "an object", Some(other))),
        };
        let default_thick = match defaults.map(|d| opt_str(d, "spaceReserve")).transpose()? {
            None | Some(None) | Some(Some("")) | Some(Some("none")) => false,
            Some(Some("volume")) => true,
            Some(Some(other)) => {
                return Err(DriverError::Invalid(format!(
                    "invalid value for defaults.spaceReserve: {:?} is not one of none or volume",
                    clip(other)
                )));
            }
        };
        let default_unix_permissions = match defaults
            .map(|d| opt_str(d, "unixPermissions"))
            .transpose()?
        {
            None | Some(None) | Some(Some("")) => DEFAULT_UNIX_PERMISSIONS,
            Some(Some(p)) => parse_unix_permissions(p).map_err(|e| {
                DriverError::Invalid(format!("invalid value for defaults.unixPermissions: {e}"))
            })?,
        };

        let pools = parse_pools(obj)?;

        Ok(LocalConfig {
            backend_name,
            backend_name_derived,
            storage_prefix: common.storage_prefix.clone(),
            prefix,
            protocol,
            default_size_bytes: common.default_size_bytes,
            default_thick,
            default_unix_permissions,
            pools,
        })
    }
}

/// The backend name when `backendName` is absent: `local_<hostname>`, with every character of
/// the host name other than ASCII letters, digits, `.`, `-` and `_` replaced by `_`, cut to the
/// longest name allowed; plain `local` when there is no host name.
pub fn default_backend_name(host: &str) -> String {
    let host: String = host
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_') {
                c
            } else {
                '_'
            }
        })
        .collect();
    let mut name = if host.is_empty() {
        DRIVER_NAME.to_string()
    } else {
        format!("{DRIVER_NAME}_{host}")
    };
    // Only ASCII is left, so any byte index is a character boundary.
    name.truncate(crate::model::MAX_NAME_LEN);
    name
}

fn host_name() -> String {
    rustix::system::uname()
        .nodename()
        .to_string_lossy()
        .into_owned()
}

/// A prefix becomes part of every internal name, so it must be path-segment safe by itself.
fn check_prefix(p: &str) -> DriverResult<()> {
    let bad = |why: &str| {
        Err(DriverError::Invalid(format!(
            "invalid value for storagePrefix: {why}"
        )))
    };
    if p.len() > MAX_PREFIX_LEN {
        return bad(&format!("longer than {MAX_PREFIX_LEN} bytes"));
    }
    for c in p.chars() {
        match c {
            '/' => return bad("must not contain '/'"),
            '\\' => return bad("must not contain '\\'"),
            '\0' => return bad("must not contain NUL"),
            c if c.is_control() => return bad("must not contain control characters"),
            _ => {}
        }
    }
    Ok(())
}

/// Parses octal permissions such as `0755`, `755` or `0o2775` (at most `07777`).
pub fn parse_unix_permissions(s: &str) -> Result<u32, String> {
    let digits = s.strip_prefix("0o").unwrap_or(s);
    if digits.is_empty() || digits.len() > 5 || !digits.bytes().all(|b| (b'0'..=b'7').contains(&b))
    {
        return Err(format!(
            "{:?} is not octal permissions such as 0755",
            clip(s)
        ));
    }
    let mode = u32::from_str_radix(digits, 8).map_err(|e| e.to_string())?;
    if mode > 0o7777 {
        return Err(format!("{:?} is larger than 07777", clip(s)));
    }
    Ok(mode)
}

fn parse_pools(obj: &Map<String, Value>) -> DriverResult<Vec<PoolConfig>> {
    let pools = match field(obj, "pools") {
        None | Some(Value::Null) => None,
        Some(Value::Object(m)) => Some(m),
        Some(other) => return Err(wrong_type("pools", "an object", Some(other))),
    };
    let Some(pools) = pools.filter(|m| !m.is_empty()) else {
        return Err(DriverError::Invalid(
            "missing pools: the local driver needs at least one pool, e.g. \
             {\"pools\": {\"default\": {\"path\": \"/var/lib/storch/local\"}}}"
                .to_string(),
        ));
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
        for key in pool.keys() {
            if !POOL_KEYS.iter().any(|k| k.eq_ignore_ascii_case(key)) {
                return Err(DriverError::Invalid(format!(
                    "invalid value for pools.{name}: unknown field {:?} (a local pool has path, \
                     media and capacity)",
                    clip(key)
                )));
            }
        }
        let path = match field(pool, "path") {
            None | Some(Value::Null) => {
                return Err(DriverError::Invalid(format!(
                    "missing pools.{name}.path: every local pool needs the directory it lives in"
                )));
            }
            Some(Value::String(p)) => parse_path(name, p)?,
            Some(other) => {
                return Err(wrong_type(
                    &format!("pools.{name}.path"),
                    "a string",
                    Some(other),
                ));
            }
        };
        let media = match field(pool, "media") {
            None | Some(Value::Null) => None,
            Some(Value::String(m)) if m.is_empty() => None,
            Some(Value::String(m)) => Some(Media::parse(m).ok_or_else(|| {
                DriverError::Invalid(format!(
                    "invalid value for pools.{name}.media: {:?} is not one of ssd, hdd or hybrid",
                    clip(m)
                ))
            })?),
            Some(other) => {
                return Err(wrong_type(
                    &format!("pools.{name}.media"),
                    "a string",
                    Some(other),
                ));
            }
        };
        let capacity = match field(pool, "capacity") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(crate::model::parse_size(s).map_err(|e| {
                DriverError::Invalid(format!("invalid value for pools.{name}.capacity: {e}"))
            })?),
            Some(Value::Number(n)) if n.is_u64() => n.as_u64(),
            Some(other) => {
                return Err(DriverError::Invalid(format!(
                    "invalid value for pools.{name}.capacity: expected a size such as \"100Gi\" \
                     or a number of bytes, found {}",
                    json_type(other)
                )));
            }
        };
        if capacity == Some(0) {
            return Err(DriverError::Invalid(format!(
                "invalid value for pools.{name}.capacity: must be greater than zero"
            )));
        }
        out.push(PoolConfig {
            name: name.clone(),
            path,
            media,
            capacity,
        });
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

fn parse_path(pool: &str, p: &str) -> DriverResult<PathBuf> {
    let bad = |why: String| {
        Err(DriverError::Invalid(format!(
            "invalid value for pools.{pool}.path: {why}"
        )))
    };
    if p.is_empty() {
        return bad("must not be empty".to_string());
    }
    if p.contains('\0') {
        return bad("must not contain NUL".to_string());
    }
    let path = Path::new(p);
    if !path.is_absolute() {
        return bad(format!("{:?} is not an absolute path", clip(p)));
    }
    if path.parent().is_none() {
        return bad("must not be the root directory".to_string());
    }
    Ok(path.to_path_buf())
}
