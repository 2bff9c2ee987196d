//! The `eseries-iscsi` backend config (docs/trident-contract.md#backend-config): Trident's
//! file unchanged (`webProxyHostname`, `webProxyPort`, `webProxyUseHTTP`,
//! `webProxyVerifyTLS`, `username`, `password`, `controllerA`, `controllerB`,
//! `passwordArray`, `hostDataIP` (or the legacy `hostData_IP`), `poolNameSearchPattern`,
//! `hostType`, `accessGroupName`, `storagePrefix`), plus storch's `trustedCACertificate`,
//! `apiTimeout`, `jobTimeout` and `offerClones`.
//!
//! Keys match like Go's JSON decoder (exact, else case-insensitive). Unlike Trident, a key
//! this driver does not know is refused, naming it: a misspelt `hostDataIp_` would otherwise
//! be dropped silently. Errors name the field and never echo a value (both passwords are
//! secrets; `crate::secrets` seals them out of the stored document).

use std::net::IpAddr;
use std::time::Duration;

use serde_json::{Map, Value};

use crate::drivers::config::{
    Secret, as_object, field, opt_str, parse_bool, parse_duration, trusted_ca, wrong_type,
};
use crate::drivers::{CommonConfig, DriverError, DriverResult};
use crate::net::TlsOptions;

/// The default storage prefix (Trident's, k8s context).
pub const DEFAULT_PREFIX: &str = "trident_";

/// The array's limit on object names (volumes, hosts, host groups).
pub const MAX_LABEL_LEN: usize = 30;

/// The length of the name part Trident generates: a UUID in unpadded base64url.
pub const NAME_ID_LEN: usize = 22;

/// The smallest volume (Trident's E-Series minimum): 1 MiB.
pub const MIN_VOLUME_BYTES: u64 = 1 << 20;

/// The host group volumes are mapped to when `accessGroupName` is not given.
pub const DEFAULT_ACCESS_GROUP: &str = "trident";

/// The host type when `hostType` is not given.
pub const DEFAULT_HOST_TYPE: &str = "linux_dm_mp";

/// Default timeout of one proxy call.
pub const DEFAULT_API_TIMEOUT: Duration = Duration::from_secs(30);

/// Default bound on waiting for a volume copy or an expansion.
pub const DEFAULT_JOB_TIMEOUT: Duration = Duration::from_secs(600);

/// Trident's friendly host type names and the array's codes for them (the `code` of
/// `GET /host-types`). A `hostType` outside this table is taken as a code itself.
pub const HOST_TYPES: &[(&str, &str)] = &[
    ("linux_dm_mp", "LnxALUA"),
    ("linux_atto", "LnxTPGSALUA"),
    ("vmware", "VmwTPGSALUA"),
    ("windows", "W2KNETNCL"),
];

/// Every key the driver reads (compared case-insensitively): the common ones, Trident's
/// E-Series ones and storch's extensions.
const KNOWN_KEYS: &[&str] = &[
    "version",
    "storageDriverName",
    "backendName",
    "storagePrefix",
    "defaults",
    "supportedTopologies",
    "debug",
    "debugTraceFlags",
    "disableDelete",
    "concurrencyLimit",
    "webProxyHostname",
    "webProxyPort",
    "webProxyUseHTTP",
    "webProxyVerifyTLS",
    "username",
    "password",
    "controllerA",
    "controllerB",
    "passwordArray",
    "hostDataIP",
    "hostData_IP",
    "poolNameSearchPattern",
    "hostType",
    "accessGroupName",
    "trustedCACertificate",
    "apiTimeout",
    "jobTimeout",
    "offerClones",
];

/// The parsed config. `Debug` never shows a password.
#[derive(Debug, Clone)]
pub struct EseriesConfig {
    pub web_proxy_hostname: String,
    pub web_proxy_port: u16,
    pub use_http: bool,
    /// `https://host:port/devmgr/v2` (or `http://`).
    pub base_url: String,
    pub username: String,
    pub password: Secret,
    pub controller_a: String,
    pub controller_b: String,
    /// The array's password, given to the proxy at registration; empty when none.
    pub password_array: Secret,
    pub host_data_ip: IpAddr,
    pub pool_pattern: regex::Regex,
    pub host_type: String,
    pub access_group_name: String,
    /// The effective storage prefix (`trident_` when not configured).
    pub prefix: String,
    pub tls: TlsOptions,
    /// storch extension: timeout of one proxy call (default 30 s).
    pub api_timeout: Duration,
    /// storch extension: how long a clone's copy job or an expansion may run (default 10 min).
    pub job_timeout: Duration,
    /// storch extension: pools offer `clones=true` when the array has volume copy jobs
    /// (default false: Trident's `clones=false`, so the core refuses clones before the driver).
    pub offer_clones: bool,
}

impl EseriesConfig {
    pub fn parse(doc: &Value, common: &CommonConfig) -> DriverResult<EseriesConfig> {
        let obj = as_object(doc)?;
        refuse_unknown_keys(obj)?;
        let required = |key: &'static str, what: &str| -> DriverResult<String> {
            match opt_str(obj, key)? {
                Some(s) if !s.trim().is_empty() => Ok(s.trim().to_string()),
                _ => Err(DriverError::Invalid(format!(
                    "missing {key}: {what} is required"
                ))),
            }
        };
        let web_proxy_hostname = required(
            "webProxyHostname",
            "the address of the SANtricity Web Services Proxy",
        )?;
        check_address("webProxyHostname", &web_proxy_hostname)?;
        let use_http = opt_bool(obj, "webProxyUseHTTP")?.unwrap_or(false);
        let web_proxy_port = parse_port(obj, use_http)?;
        let controller_a = required("controllerA", "the address of controller A")?;
        let controller_b = required(
            "controllerB",
            "the address of controller B (controllerA again for a simplex array)",
        )?;
        check_address("controllerA", &controller_a)?;
        check_address("controllerB", &controller_b)?;
        let host_data_ip = parse_host_data_ip(obj)?;
        let username = opt_str(obj, "username")?.unwrap_or_default().to_string();
        if username.is_empty() {
            return Err(DriverError::Invalid(
                "missing username: the Web Services Proxy user is required".into(),
            ));
        }
        let password = Secret::new(opt_str(obj, "password")?.unwrap_or_default());
        let password_array = Secret::new(opt_str(obj, "passwordArray")?.unwrap_or_default());
        let pattern = opt_str(obj, "poolNameSearchPattern")?
            .filter(|s| !s.is_empty())
            .unwrap_or(".+");
        let pool_pattern = regex::Regex::new(pattern).map_err(|_| {
            DriverError::Invalid(
                "invalid value for poolNameSearchPattern: not a regular expression".into(),
            )
        })?;
        let host_type = opt_str(obj, "hostType")?
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .unwrap_or(DEFAULT_HOST_TYPE)
            .to_string();
        if host_type.chars().any(char::is_whitespace) {
            return Err(DriverError::Invalid(
                "invalid value for hostType: expected a host type name such as linux_dm_mp".into(),
            ));
        }
        let access_group_name = opt_str(obj, "accessGroupName")?
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .unwrap_or(DEFAULT_ACCESS_GROUP)
            .to_string();
        check_label("accessGroupName", &access_group_name, MAX_LABEL_LEN)?;
        let prefix = common
            .storage_prefix
            .clone()
            .unwrap_or_else(|| DEFAULT_PREFIX.to_string());
        if !prefix.is_empty() {
            check_label("storagePrefix", &prefix, MAX_LABEL_LEN - NAME_ID_LEN)?;
        }
        let base_scheme = if use_http { "http" } else { "https" };
        let host = if web_proxy_hostname.contains(':') {
            format!("[{web_proxy_hostname}]")
        } else {
            web_proxy_hostname.clone()
        };
        Ok(EseriesConfig {
            base_url: format!("{base_scheme}://{host}:{web_proxy_port}/devmgr/v2"),
            tls: parse_tls(obj, use_http, &web_proxy_hostname)?,
            web_proxy_hostname,
            web_proxy_port,
            use_http,
            username,
            password,
            controller_a,
            controller_b,
            password_array,
            host_data_ip,
            pool_pattern,
            host_type,
            access_group_name,
            prefix,
            api_timeout: parse_duration(obj, "apiTimeout", DEFAULT_API_TIMEOUT)?,
            job_timeout: parse_duration(obj, "jobTimeout", DEFAULT_JOB_TIMEOUT)?,
            offer_clones: opt_bool(obj, "offerClones")?.unwrap_or(false),
        })
    }

    /// The backend name when `backendName` is not given: `eseries_<hostDataIP>`.
    pub fn default_backend_name(&self) -> String {
        format!("eseries_{}", self.host_data_ip)
    }

    /// The array's code for the configured host type: Trident's table, else the value itself.
    pub fn host_type_code(&self) -> &str {
        HOST_TYPES
            .iter()
            .find(|(name, _)| *name == self.host_type)
            .map(|(_, code)| *code)
            .unwrap_or(&self.host_type)
    }
}

fn refuse_unknown_keys(obj: &Map<String, Value>) -> DriverResult<()> {
    for key in obj.keys() {
        if !KNOWN_KEYS.iter().any(|k| k.eq_ignore_ascii_case(key)) {
            return Err(DriverError::Invalid(format!(
                "unknown field {key} in an eseries-iscsi backend config (known fields: {})",
                KNOWN_KEYS[4..].join(", ")
            )));
        }
    }
    Ok(())
}

fn opt_bool(obj: &Map<String, Value>, key: &str) -> DriverResult<Option<bool>> {
    match field(obj, key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => parse_bool(key, v).map(Some),
    }
}

/// `webProxyPort`: a string (Trident's type) or a number, 1–65535; 8443 for HTTPS and 8080
/// for HTTP when absent.
fn parse_port(obj: &Map<String, Value>, use_http: bool) -> DriverResult<u16> {
    let bad = || {
        DriverError::Invalid(
            "invalid value for webProxyPort: expected a port from 1 to 65535".into(),
        )
    };
    let port = match field(obj, "webProxyPort") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) if s.trim().is_empty() => None,
        Some(Value::String(s)) => Some(s.trim().parse::<u16>().map_err(|_| bad())?),
        Some(Value::Number(n)) => Some(
            n.as_u64()
                .and_then(|p| u16::try_from(p).ok())
                .ok_or_else(bad)?,
        ),
        Some(other) => return Err(wrong_type("webProxyPort", "a port number", Some(other))),
    };
    match port {
        Some(0) => Err(bad()),
        Some(p) => Ok(p),
        None if use_http => Ok(8080),
        None => Ok(8443),
    }
}

fn parse_host_data_ip(obj: &Map<String, Value>) -> DriverResult<IpAddr> {
    let value = match opt_str(obj, "hostDataIP")? {
        Some(s) if !s.trim().is_empty() => s.trim(),
        _ => match field(obj, "hostData_IP") {
            Some(Value::String(s)) if !s.trim().is_empty() => s.trim(),
            None | Some(Value::Null) | Some(Value::String(_)) => {
                return Err(DriverError::Invalid(
                    "missing hostDataIP: the array's iSCSI data address for this host is \
                     required"
                        .into(),
                ));
            }
            Some(other) => return Err(wrong_type("hostData_IP", "a string", Some(other))),
        },
    };
    value.parse().map_err(|_| {
        DriverError::Invalid("invalid value for hostDataIP: expected an IP address".into())
    })
}

/// Trident's default is not to check the proxy's certificate: kept when the file says
/// nothing, with a warning. `webProxyVerifyTLS: true` checks against the system roots, or
/// against `trustedCACertificate` when given (which alone also turns checking on).
fn parse_tls(obj: &Map<String, Value>, use_http: bool, host: &str) -> DriverResult<TlsOptions> {
    let verify = opt_bool(obj, "webProxyVerifyTLS")?;
    let trusted_ca_pem = trusted_ca(obj)?;
    if use_http {
        if verify == Some(true) || trusted_ca_pem.is_some() {
            return Err(DriverError::Invalid(
                "invalid value for webProxyUseHTTP: plain HTTP has no certificate to verify; \
                 drop webProxyVerifyTLS/trustedCACertificate or use HTTPS"
                    .into(),
            ));
        }
        tracing::warn!(webProxyHostname = %host, "webProxyUseHTTP is true: the proxy and array passwords cross the network unencrypted");
        return Ok(TlsOptions {
            verify: false,
            trusted_ca_pem: None,
        });
    }
    let verify = match (verify, &trusted_ca_pem) {
        (Some(false), Some(_)) => {
            return Err(DriverError::Invalid(
                "invalid value for webProxyVerifyTLS: false contradicts trustedCACertificate"
                    .into(),
            ));
        }
        (Some(v), _) => v,
        (None, Some(_)) => true,
        (None, None) => {
            tracing::warn!(webProxyHostname = %host, "webProxyVerifyTLS is not set: the proxy's certificate is not checked (Trident's default); set webProxyVerifyTLS or trustedCACertificate");
            false
        }
    };
    if !verify {
        tracing::warn!(webProxyHostname = %host, "the proxy's certificate is not checked");
    }
    Ok(TlsOptions {
        verify,
        trusted_ca_pem,
    })
}

/// A host name or IP address: non-empty, no spaces, no scheme or path.
fn check_address(key: &str, value: &str) -> DriverResult<()> {
    if value
        .chars()
        .any(|c| c.is_whitespace() || c == '/' || c == '@')
    {
        return Err(DriverError::Invalid(format!(
            "invalid value for {key}: expected a host name or IP address"
        )));
    }
    Ok(())
}

/// An array object name: at most `max` characters of letters, digits, `_` and `-`.
fn check_label(key: &str, value: &str, max: usize) -> DriverResult<()> {
    if value.len() > max
        || !value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    {
        return Err(DriverError::Invalid(format!(
            "invalid value for {key}: at most {max} letters, digits, '_' or '-' (E-Series names \
             are limited to {MAX_LABEL_LEN} characters)"
        )));
    }
    Ok(())
}
