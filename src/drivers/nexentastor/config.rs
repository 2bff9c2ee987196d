//! The `nexentastor-iscsi` backend config: the seed CSI driver's keys, spelled as the seed
//! spells them (`restIp`, `defaultVolumeGroup`, `useChapAuth`, …), plus storch's common keys.
//! Unlike the Trident drivers, an unknown key is an error naming it (a misspelt seed key would
//! otherwise be silently dropped). Errors never echo a value: `password` and `chapSecret` are
//! secrets (sealed by `crate::secrets`, whose key rule covers both).
//!
//! [`expand_map`] turns the seed's whole `nexentastor_map` file into one backend config per
//! entry; `storch serve --config` and `storch create backend -f` both use it.

use serde_json::{Map, Value, json};

use super::DRIVER_NAME;
use crate::drivers::config::{
    Secret, as_object, field, opt_str, parse_bool, trusted_ca, wrong_type,
};
use crate::drivers::{DriverError, DriverResult};
use crate::model::Request;
use crate::net::TlsOptions;

/// The port of the REST API when `restIp` gives none (HTTPS).
pub const DEFAULT_REST_PORT: u16 = 8443;

/// The iSCSI port of the data address.
pub const ISCSI_PORT: u16 = 3260;

/// LUNs per dynamic target when `numOfLunsPerTarget` is not given (the seed's default).
pub const DEFAULT_LUNS_PER_TARGET: u32 = 256;

/// The host group LUNs are mapped to when `defaultHostGroup` is not given.
pub const DEFAULT_HOST_GROUP: &str = "all";

/// The shortest CHAP secret the iSCSI initiators accept.
pub const MIN_CHAP_SECRET: usize = 12;

/// The top-level key of the seed's map file.
pub const MAP_KEY: &str = "nexentastor_map";

/// Every key a backend config may have (seed keys, then storch's common ones).
const KNOWN_KEYS: &[&str] = &[
    "restIp",
    "username",
    "password",
    "defaultDataIp",
    "defaultVolumeGroup",
    "defaultTargetGroup",
    "defaultTarget",
    "defaultHostGroup",
    "sparseVolume",
    "dynamicTargetLunAllocation",
    "numOfLunsPerTarget",
    "useChapAuth",
    "chapUser",
    "chapSecret",
    "zone",
    "supportedTopologies",
    "insecureSkipVerify",
    "iSCSITimeout",
    "mountPointPermissions",
    "trustedCACertificate",
    "volumeGroups",
    "version",
    "storageDriverName",
    "backendName",
    "storagePrefix",
    "defaults",
    "concurrencyLimit",
    "debug",
    "debugTraceFlags",
    "disableDelete",
];

/// How a volume is provisioned and mapped: the backend's defaults, overridden per class.
#[derive(Debug, Clone, PartialEq)]
pub struct VolumeSettings {
    /// `pool/volumeGroup`: the storch pool.
    pub volume_group: String,
    pub data_ip: String,
    pub target_group: String,
    pub target: String,
    pub host_group: String,
    pub sparse: bool,
    pub dynamic: bool,
    pub luns_per_target: u32,
    pub use_chap: bool,
    pub chap_user: String,
    pub chap_secret: Option<Secret>,
}

/// The parsed config. `Debug` never shows the password or the CHAP secret.
#[derive(Debug, Clone)]
pub struct NexentaConfig {
    /// `https://host:port` of each endpoint of the HA cluster, in order.
    pub endpoints: Vec<String>,
    pub username: String,
    pub password: Secret,
    /// The backend's defaults (`volume_group` is `defaultVolumeGroup`).
    pub defaults: VolumeSettings,
    /// The volume groups this backend may use: `defaultVolumeGroup`, then `volumeGroups`.
    pub volume_groups: Vec<String>,
    pub zone: Option<String>,
    pub tls: TlsOptions,
    /// `iSCSITimeout` (seconds), for the hosts' iSCSI sessions.
    pub iscsi_timeout: Option<u64>,
    /// `mountPointPermissions` (octal), for the hosts' mount points.
    pub mount_point_permissions: Option<String>,
}

impl NexentaConfig {
    pub fn parse(doc: &Value) -> DriverResult<NexentaConfig> {
        let obj = as_object(doc)?;
        for key in obj.keys() {
            if !KNOWN_KEYS.contains(&key.as_str()) {
                return Err(DriverError::Invalid(format!(
                    "unknown key {key} in a {DRIVER_NAME} backend config (the seed's keys are \
                     restIp, username, password, defaultDataIp, defaultVolumeGroup, …)"
                )));
            }
        }
        let endpoints = parse_rest_ip(required(obj, "restIp", "the REST endpoints")?)?;
        let username = required(obj, "username", "the appliance user")?.to_string();
        let password = Secret::new(required(obj, "password", "the appliance password")?);
        let volume_group = required(obj, "defaultVolumeGroup", "the volume group (pool/vg)")?;
        check_volume_group("defaultVolumeGroup", volume_group)?;
        let dynamic = flag(obj, "dynamicTargetLunAllocation", false)?;
        let defaults = VolumeSettings {
            volume_group: volume_group.to_string(),
            data_ip: required(obj, "defaultDataIp", "the iSCSI data address")?.to_string(),
            target_group: text(obj, "defaultTargetGroup")?,
            target: text(obj, "defaultTarget")?,
            host_group: match text(obj, "defaultHostGroup")? {
                s if s.is_empty() => DEFAULT_HOST_GROUP.to_string(),
                s => s,
            },
            sparse: flag(obj, "sparseVolume", true)?,
            dynamic,
            luns_per_target: luns_per_target(field(obj, "numOfLunsPerTarget"))?
                .unwrap_or(DEFAULT_LUNS_PER_TARGET),
            use_chap: flag(obj, "useChapAuth", false)?,
            chap_user: text(obj, "chapUser")?,
            chap_secret: chap_secret(field(obj, "chapSecret"), "chapSecret")?,
        };
        check_settings(&defaults, "")?;
        let mut volume_groups = vec![defaults.volume_group.clone()];
        match field(obj, "volumeGroups") {
            None | Some(Value::Null) => {}
            Some(Value::Array(items)) => {
                for (i, v) in items.iter().enumerate() {
                    let key = format!("volumeGroups[{i}]");
                    let s = v
                        .as_str()
                        .ok_or_else(|| wrong_type(&key, "a string", Some(v)))?;
                    check_volume_group(&key, s)?;
                    if !volume_groups.iter().any(|g| g == s) {
                        volume_groups.push(s.to_string());
                    }
                }
            }
            Some(other) => return Err(wrong_type("volumeGroups", "a list", Some(other))),
        }
        let verify = !flag(obj, "insecureSkipVerify", false)?;
        let trusted_ca_pem = trusted_ca(obj)?;
        if !verify {
            tracing::warn!(endpoints = ?endpoints, "insecureSkipVerify is true: the appliance's certificate is not checked");
        }
        Ok(NexentaConfig {
            endpoints,
            username,
            password,
            defaults,
            volume_groups,
            zone: Some(text(obj, "zone")?).filter(|z| !z.is_empty()),
            tls: TlsOptions {
                verify,
                trusted_ca_pem,
            },
            iscsi_timeout: match field(obj, "iSCSITimeout") {
                None | Some(Value::Null) => None,
                Some(v) => Some(positive_int("iSCSITimeout", v)?),
            },
            mount_point_permissions: parse_permissions(obj)?,
        })
    }

    /// Where the backend's volumes are reachable from: the seed's `zone` as the label
    /// `topology.kubernetes.io/zone` (what `storch csi node --zone` reports), or the common
    /// `supportedTopologies` (`common`); giving both is refused.
    pub fn topology(
        &self,
        common: &[crate::model::Segment],
    ) -> DriverResult<Vec<crate::model::Segment>> {
        use crate::model::topology::{ZONE_KEY, check_value};
        match &self.zone {
            None => Ok(common.to_vec()),
            Some(_) if !common.is_empty() => Err(DriverError::Invalid(
                "zone and supportedTopologies: give one of them (zone z is                  supportedTopologies [{\"topology.kubernetes.io/zone\": z}])"
                    .into(),
            )),
            Some(zone) => {
                check_value(zone)
                    .map_err(|e| DriverError::Invalid(format!("invalid value for zone: {e}")))?;
                Ok(vec![[(ZONE_KEY.to_string(), zone.clone())].into()])
            }
        }
    }

    /// The backend name when `backendName` is not given: `nexentastor_<first host>`.
    pub fn default_backend_name(&self) -> String {
        let host = self.endpoints[0]
            .trim_start_matches("https://")
            .trim_start_matches("http://");
        let host = host.rsplit_once(':').map(|(h, _)| h).unwrap_or(host);
        format!("nexentastor_{}", host.trim_matches(['[', ']']))
    }

    /// The settings of one volume: the backend's defaults overridden by the class's
    /// parameters (`volumeGroup`, `dataIp`, `targetGroup`, `target`, `hostGroup`,
    /// `sparseVolume`, `dynamicTargetLunAllocation`, `numOfLunsPerTarget`, `useChapAuth`,
    /// `chapUser`, `chapSecret`) and `provisioningType` (thin → sparse). Errors name the
    /// parameter.
    pub fn settings(
        &self,
        pool: &str,
        requests: &std::collections::BTreeMap<String, Request>,
    ) -> DriverResult<VolumeSettings> {
        let mut s = self.defaults.clone();
        s.volume_group = pool.to_string();
        for (key, req) in requests {
            let value = match req {
                Request::String(v) => Value::String(v.clone()),
                Request::Bool(b) => Value::Bool(*b),
                Request::Int(i) => json!(i),
            };
            let name = format!("parameters.{key}");
            let string = || {
                value
                    .as_str()
                    .map(str::to_string)
                    .ok_or_else(|| wrong_type(&name, "a string", Some(&value)))
            };
            let boolean = || parse_bool(&name, &value);
            match key.as_str() {
                "volumeGroup" => {
                    let vg = string()?;
                    if vg != pool {
                        return Err(DriverError::Invalid(format!(
                            "invalid value for {name}: the volume is placed in pool {pool}, not \
                             {vg}"
                        )));
                    }
                }
                "dataIp" => s.data_ip = string()?,
                "targetGroup" => s.target_group = string()?,
                "target" => s.target = string()?,
                "hostGroup" => s.host_group = string()?,
                "sparseVolume" => s.sparse = boolean()?,
                "dynamicTargetLunAllocation" => s.dynamic = boolean()?,
                "numOfLunsPerTarget" => {
                    s.luns_per_target = luns_per_target(Some(&value))
                        .map_err(|_| {
                            DriverError::Invalid(format!(
                                "invalid value for {name}: expected a positive integer"
                            ))
                        })?
                        .unwrap_or(s.luns_per_target)
                }
                "useChapAuth" => s.use_chap = boolean()?,
                "chapUser" => s.chap_user = string()?,
                "chapSecret" => s.chap_secret = chap_secret(Some(&value), &name)?,
                "provisioningType" => match string()?.as_str() {
                    "thin" => s.sparse = true,
                    "thick" => s.sparse = false,
                    _ => {
                        return Err(DriverError::Invalid(format!(
                            "invalid value for {name}: expected thin or thick"
                        )));
                    }
                },
                // Matching attributes (media, snapshots, …): the pool already offers them.
                _ => {}
            }
        }
        check_settings(&s, "parameters.")?;
        Ok(s)
    }
}

fn required<'a>(
    obj: &'a Map<String, Value>,
    key: &'static str,
    what: &str,
) -> DriverResult<&'a str> {
    match opt_str(obj, key)? {
        Some(s) if !s.trim().is_empty() => Ok(s.trim()),
        _ => Err(DriverError::Invalid(format!(
            "missing {key}: {what} is required"
        ))),
    }
}

fn text(obj: &Map<String, Value>, key: &'static str) -> DriverResult<String> {
    Ok(opt_str(obj, key)?.unwrap_or_default().trim().to_string())
}

fn flag(obj: &Map<String, Value>, key: &'static str, default: bool) -> DriverResult<bool> {
    match field(obj, key) {
        None | Some(Value::Null) => Ok(default),
        Some(v) => parse_bool(key, v),
    }
}

fn positive_int(key: &str, v: &Value) -> DriverResult<u64> {
    let n = match v {
        Value::Number(n) => n.as_u64(),
        Value::String(s) => s.trim().parse::<u64>().ok(),
        _ => None,
    };
    n.filter(|n| *n > 0).ok_or_else(|| {
        DriverError::Invalid(format!(
            "invalid value for {key}: expected a positive integer"
        ))
    })
}

fn luns_per_target(v: Option<&Value>) -> DriverResult<Option<u32>> {
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(v) => positive_int("numOfLunsPerTarget", v)?
            .try_into()
            .map(Some)
            .map_err(|_| {
                DriverError::Invalid(
                    "invalid value for numOfLunsPerTarget: expected a positive integer".into(),
                )
            }),
    }
}

fn chap_secret(v: Option<&Value>, key: &str) -> DriverResult<Option<Secret>> {
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if s.is_empty() => Ok(None),
        Some(Value::String(s)) => {
            if s.chars().count() < MIN_CHAP_SECRET {
                return Err(DriverError::Invalid(format!(
                    "invalid value for {key}: a CHAP secret has at least {MIN_CHAP_SECRET} \
                     characters"
                )));
            }
            Ok(Some(Secret::new(s.clone())))
        }
        Some(other) => Err(wrong_type(key, "a string", Some(other))),
    }
}

/// `pool/volumeGroup`: exactly two non-empty parts.
fn check_volume_group(key: &str, vg: &str) -> DriverResult<()> {
    let parts: Vec<&str> = vg.split('/').collect();
    if parts.len() != 2 || parts.iter().any(|p| p.is_empty() || !dataset_chars(p)) {
        return Err(DriverError::Invalid(format!(
            "invalid value for {key}: expected pool/volumeGroup"
        )));
    }
    Ok(())
}

/// The characters a ZFS dataset name part may have.
pub fn dataset_chars(s: &str) -> bool {
    s.chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | ':'))
}

/// What a set of settings needs: fixed targets without dynamic allocation, a CHAP user and
/// secret with CHAP.
fn check_settings(s: &VolumeSettings, prefix: &str) -> DriverResult<()> {
    if !s.dynamic {
        for (key, v) in [("Target", &s.target), ("TargetGroup", &s.target_group)] {
            if v.is_empty() {
                let key = if prefix.is_empty() {
                    format!("default{key}")
                } else {
                    format!("{prefix}{}", key.to_ascii_lowercase())
                };
                return Err(DriverError::Invalid(format!(
                    "missing {key}: needed unless dynamicTargetLunAllocation is true"
                )));
            }
        }
    }
    if s.use_chap {
        if s.chap_user.is_empty() {
            return Err(DriverError::Invalid(format!(
                "missing {prefix}chapUser: needed when useChapAuth is true"
            )));
        }
        if s.chap_secret.is_none() {
            return Err(DriverError::Invalid(format!(
                "missing {prefix}chapSecret: needed when useChapAuth is true"
            )));
        }
    }
    Ok(())
}

fn parse_permissions(obj: &Map<String, Value>) -> DriverResult<Option<String>> {
    let Some(p) = opt_str(obj, "mountPointPermissions")?
        .map(str::trim)
        .filter(|s| !s.is_empty())
    else {
        return Ok(None);
    };
    if p.len() > 4 || !p.chars().all(|c| ('0'..='7').contains(&c)) {
        return Err(DriverError::Invalid(
            "invalid value for mountPointPermissions: expected octal permissions such as 0750"
                .into(),
        ));
    }
    Ok(Some(p.to_string()))
}

/// `restIp`: comma-separated `https://host[:port]` (or bare `host[:port]`, HTTPS assumed).
pub fn parse_rest_ip(s: &str) -> DriverResult<Vec<String>> {
    let mut out = Vec::new();
    for (i, part) in s.split(',').map(str::trim).enumerate() {
        let bad = |why: &str| {
            DriverError::Invalid(format!(
                "invalid value for restIp (endpoint {}): {why} (expected https://host:port, \
                 comma-separated)",
                i + 1
            ))
        };
        if part.is_empty() {
            return Err(bad("empty"));
        }
        let with_scheme = if part.contains("://") {
            part.to_string()
        } else {
            format!("https://{part}")
        };
        let url = crate::net::Url::parse(&with_scheme).map_err(|_| bad("not a URL"))?;
        if url.scheme() != "https" && url.scheme() != "http" {
            return Err(bad("the scheme must be https or http"));
        }
        let host = url
            .host_str()
            .filter(|h| !h.is_empty())
            .ok_or_else(|| bad("no host"))?;
        if !url.username().is_empty() || url.password().is_some() {
            return Err(bad("credentials belong in username and password"));
        }
        if !url.path().trim_matches('/').is_empty() || url.query().is_some() {
            return Err(bad("no path expected"));
        }
        let port = url.port().unwrap_or(DEFAULT_REST_PORT);
        let ep = format!("{}://{host}:{port}", url.scheme());
        if !out.contains(&ep) {
            out.push(ep);
        }
    }
    Ok(out)
}

/// The seed's `nexentastor_map` file as backend configs: `None` when `doc` is not one, else
/// one config per entry, named after it (unless the entry names itself with `backendName`).
/// Errors name the entry.
pub fn expand_map(doc: &Value) -> Option<Result<Vec<Value>, String>> {
    let obj = doc.as_object()?;
    let map = obj.get(MAP_KEY)?;
    Some(expand(obj, map))
}

fn expand(obj: &Map<String, Value>, map: &Value) -> Result<Vec<Value>, String> {
    if let Some(other) = obj.keys().find(|k| k.as_str() != MAP_KEY) {
        return Err(format!(
            "unknown key {other:?} next to {MAP_KEY} (the map file holds only {MAP_KEY})"
        ));
    }
    let Some(entries) = map.as_object().filter(|m| !m.is_empty()) else {
        return Err(format!(
            "{MAP_KEY}: expected a mapping of backend names to appliance configs"
        ));
    };
    let mut out = Vec::new();
    for (name, entry) in entries {
        let Some(fields) = entry.as_object() else {
            return Err(format!(
                "{MAP_KEY}.{name}: expected a mapping of config keys"
            ));
        };
        crate::model::validate_name("backendName", name)
            .map_err(|e| format!("{MAP_KEY}.{name}: {e}"))?;
        let mut doc = json!({
            "version": 1,
            "storageDriverName": DRIVER_NAME,
            "backendName": name,
        });
        for (k, v) in fields {
            doc[k] = v.clone();
        }
        out.push(doc);
    }
    Ok(out)
}
