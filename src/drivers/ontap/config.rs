//! The ONTAP backend config (docs/trident-contract.md#backend-config): one shape for all four
//! drivers.
//!
//! Keys match like Go's JSON decoder (exact, else case-insensitive); unknown keys are ignored.
//! Errors name the field and never echo a value (a password could be anywhere).

use std::time::Duration;

use serde_json::{Map, Value};

pub use crate::drivers::config::{Secret, go_bool};
use crate::drivers::config::{as_object, field, opt_str, parse_bool, trusted_ca, wrong_type};
use crate::drivers::{Attachment, CommonConfig, DriverError, DriverResult};
use crate::net::TlsOptions;

/// The smallest ONTAP volume (FlexVol, LUN, qtree quota): 20 MiB.
pub const MIN_VOLUME_BYTES: u64 = 20 << 20;

/// The default storage prefix of the ONTAP drivers (k8s / CSI contexts).
pub const DEFAULT_PREFIX: &str = "trident_";

/// The default igroup of ontap-san.
pub const DEFAULT_IGROUP: &str = "trident";

/// How many qtrees an economy FlexVol holds before a new one is made (Trident's limit).
pub const DEFAULT_QTREES_PER_FLEXVOL: usize = 200;

/// Default timeout of one ZAPI call.
pub const DEFAULT_API_TIMEOUT: Duration = Duration::from_secs(30);

/// Requests in flight per management LIF, REST and ZAPI together (Trident's cap).
pub const DEFAULT_MAX_CONCURRENT_REQUESTS: usize = 20;

/// Which of the four drivers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Variant {
    Nas,
    NasEconomy,
    NasFlexgroup,
    San,
}

impl Variant {
    pub fn from_driver_name(name: &str) -> Option<Variant> {
        match name {
            "ontap-nas" => Some(Variant::Nas),
            "ontap-nas-economy" => Some(Variant::NasEconomy),
            "ontap-nas-flexgroup" => Some(Variant::NasFlexgroup),
            "ontap-san" => Some(Variant::San),
            _ => None,
        }
    }

    pub fn driver_name(self) -> &'static str {
        match self {
            Variant::Nas => "ontap-nas",
            Variant::NasEconomy => "ontap-nas-economy",
            Variant::NasFlexgroup => "ontap-nas-flexgroup",
            Variant::San => "ontap-san",
        }
    }

    pub fn is_san(self) -> bool {
        self == Variant::San
    }

    /// How this variant's volumes attach: iSCSI for ontap-san, NFS for the others.
    pub fn attachment(self) -> Attachment {
        if self.is_san() {
            Attachment::Iscsi
        } else {
            Attachment::Nfs
        }
    }

    /// The default backend name's prefix (`ontapnas_<dataLIF>` …).
    pub fn default_name_prefix(self) -> &'static str {
        match self {
            Variant::Nas | Variant::NasFlexgroup => "ontapnas_",
            Variant::NasEconomy => "ontapnaseco_",
            Variant::San => "ontapsan_",
        }
    }
}

/// Per-volume defaults (`defaults` object).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Defaults {
    pub space_reserve: String,
    pub snapshot_policy: String,
    /// Percent; `None` leaves the array default (0 when the policy is `none`).
    pub snapshot_reserve: Option<String>,
    pub unix_permissions: String,
    pub snapshot_dir: bool,
    pub export_policy: String,
    pub security_style: String,
    pub split_on_clone: bool,
    pub file_system_type: String,
    pub encryption: bool,
}

impl Default for Defaults {
    fn default() -> Self {
        Defaults {
            space_reserve: "none".into(),
            snapshot_policy: "none".into(),
            snapshot_reserve: None,
            unix_permissions: "---rwxrwxrwx".into(),
            snapshot_dir: false,
            export_policy: "default".into(),
            security_style: "unix".into(),
            split_on_clone: false,
            file_system_type: "ext4".into(),
            encryption: false,
        }
    }
}

/// The parsed ONTAP config. `Debug` never shows the password.
#[derive(Debug, Clone)]
pub struct OntapConfig {
    pub variant: Variant,
    /// As configured (shown by GET backend).
    pub management_lif: String,
    /// `host`, `host:port`, `[v6]` or `[v6]:port`: the authority of the ZAPI URL.
    pub authority: String,
    pub data_lif: Option<String>,
    pub svm: Option<String>,
    pub username: String,
    pub password: Secret,
    pub igroup_name: String,
    /// storch extension `perNodeIgroups` (ontap-san): LUNs are not mapped at create but
    /// published per host, each node through its own igroup `<igroupName or storch>-<node>`.
    pub per_node_igroups: bool,
    /// The first part of per-node igroup names: `igroupName` when set, else `storch`.
    pub igroup_base: String,
    pub aggregate: Option<String>,
    pub tls: TlsOptions,
    pub defaults: Defaults,
    /// The effective storage prefix (`trident_` when not configured).
    pub prefix: String,
    pub nfs_mount_options: String,
    /// storch extension: qtrees per economy FlexVol (default 200).
    pub qtrees_per_flexvol: usize,
    /// storch extension: timeout of one ZAPI call (default 30 s).
    pub api_timeout: Duration,
    /// `useREST`: unset (chosen by the array's version), or forced.
    pub use_rest: Option<bool>,
    /// storch extension `maxConcurrentRequests`: requests in flight per management LIF.
    pub max_concurrent_requests: usize,
}

impl OntapConfig {
    pub fn parse(doc: &Value, common: &CommonConfig) -> DriverResult<OntapConfig> {
        let obj = as_object(doc)?;
        let variant = Variant::from_driver_name(&common.storage_driver_name).ok_or_else(|| {
            DriverError::Invalid(format!(
                "{} is not an ONTAP driver",
                common.storage_driver_name
            ))
        })?;

        let management_lif = match opt_str(obj, "managementLIF")? {
            Some(s) if !s.trim().is_empty() => s.trim().to_string(),
            _ => {
                return Err(DriverError::Invalid(
                    "missing managementLIF: the ONTAP management address is required".into(),
                ));
            }
        };
        let authority = parse_authority(&management_lif)?;

        let non_empty = |key: &'static str| -> DriverResult<Option<String>> {
            Ok(opt_str(obj, key)?
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_string))
        };
        let data_lif = non_empty("dataLIF")?;
        let svm = non_empty("svm")?;
        let aggregate = non_empty("aggregate")?;
        let username = opt_str(obj, "username")?.unwrap_or_default().to_string();
        let password = Secret::new(opt_str(obj, "password")?.unwrap_or_default());
        if username.is_empty() {
            return Err(DriverError::Invalid(
                "missing username: ONTAP backends need username and password".into(),
            ));
        }
        let configured_igroup = non_empty("igroupName")?;
        let igroup_base = configured_igroup
            .clone()
            .unwrap_or_else(|| "storch".to_string());
        let igroup_name = configured_igroup.unwrap_or_else(|| DEFAULT_IGROUP.into());
        let per_node_igroups = match field(obj, "perNodeIgroups") {
            None | Some(Value::Null) => false,
            Some(v) => parse_bool("perNodeIgroups", v)?,
        };
        if per_node_igroups && variant != Variant::San {
            return Err(DriverError::Invalid(format!(
                "perNodeIgroups is for ontap-san only, not {}",
                variant.driver_name()
            )));
        }
        let nfs_mount_options =
            non_empty("nfsMountOptions")?.unwrap_or_else(|| "-o nfsvers=3".into());

        let verify = match field(obj, "tlsVerify") {
            None | Some(Value::Null) => true,
            Some(v) => parse_bool("tlsVerify", v)?,
        };
        let trusted_ca_pem = trusted_ca(obj)?;
        if !verify {
            tracing::warn!(
                driver = variant.driver_name(),
                managementLIF = %management_lif,
                "tlsVerify is false: the array's certificate is not checked"
            );
        }

        let defaults = parse_defaults(obj)?;

        let qtrees_per_flexvol = match field(obj, "qtreesPerFlexvol") {
            None | Some(Value::Null) => DEFAULT_QTREES_PER_FLEXVOL,
            Some(Value::Number(n)) if n.as_u64().is_some_and(|n| (1..=10_000).contains(&n)) => {
                n.as_u64().unwrap_or(1) as usize
            }
            Some(_) => {
                return Err(DriverError::Invalid(
                    "invalid value for qtreesPerFlexvol: expected an integer from 1 to 10000"
                        .into(),
                ));
            }
        };
        let api_timeout = match opt_str(obj, "apiTimeout")? {
            None => DEFAULT_API_TIMEOUT,
            Some(s) => humantime::parse_duration(s.trim())
                .ok()
                .filter(|d| !d.is_zero())
                .ok_or_else(|| {
                    DriverError::Invalid(
                        "invalid value for apiTimeout: expected a duration such as 30s".into(),
                    )
                })?,
        };

        let use_rest = match field(obj, "useREST") {
            None | Some(Value::Null) => None,
            Some(v) => Some(parse_bool("useREST", v)?),
        };
        let max_concurrent_requests = match field(obj, "maxConcurrentRequests") {
            None | Some(Value::Null) => DEFAULT_MAX_CONCURRENT_REQUESTS,
            Some(Value::Number(n)) if n.as_u64().is_some_and(|n| (1..=1000).contains(&n)) => {
                n.as_u64().unwrap_or(1) as usize
            }
            Some(_) => {
                return Err(DriverError::Invalid(
                    "invalid value for maxConcurrentRequests: expected an integer from 1 to 1000"
                        .into(),
                ));
            }
        };

        let prefix = common
            .storage_prefix
            .clone()
            .unwrap_or_else(|| DEFAULT_PREFIX.to_string());

        Ok(OntapConfig {
            variant,
            management_lif,
            authority,
            data_lif,
            svm,
            username,
            password,
            igroup_name,
            per_node_igroups,
            igroup_base,
            aggregate,
            tls: TlsOptions {
                verify,
                trusted_ca_pem,
            },
            defaults,
            prefix,
            nfs_mount_options,
            qtrees_per_flexvol,
            api_timeout,
            use_rest,
            max_concurrent_requests,
        })
    }

    /// The REST API's base URL (paths such as `/storage/volumes` follow it).
    pub fn rest_base(&self) -> String {
        format!("https://{}/api", self.authority)
    }

    /// The ZAPI endpoint.
    pub fn url(&self) -> String {
        format!(
            "https://{}/servlets/netapp.servlets.admin.XMLrequest_filer",
            self.authority
        )
    }
}

/// `10.0.0.1`, `10.0.0.1:8443`, `host`, `host:443`, `fd00::1`, `[fd00::1]`, `[fd00::1]:443`.
pub fn parse_authority(lif: &str) -> DriverResult<String> {
    let bad = |why: &str| {
        DriverError::Invalid(format!(
            "invalid value for managementLIF: {why} (expected an address or host name, with \
             an optional :port)"
        ))
    };
    if lif.contains('/') || lif.contains('@') || lif.contains(char::is_whitespace) {
        return Err(bad("it must not contain '/', '@' or spaces"));
    }
    if let Some(rest) = lif.strip_prefix('[') {
        let (host, after) = rest.split_once(']').ok_or_else(|| bad("unclosed '['"))?;
        host.parse::<std::net::Ipv6Addr>()
            .map_err(|_| bad("not an IPv6 address inside [ ]"))?;
        if after.is_empty() {
            return Ok(format!("[{host}]"));
        }
        let port = after
            .strip_prefix(':')
            .ok_or_else(|| bad("junk after ']'"))?;
        check_port(port).map_err(|_| bad("bad port"))?;
        return Ok(format!("[{host}]:{port}"));
    }
    if lif.parse::<std::net::Ipv6Addr>().is_ok() {
        return Ok(format!("[{lif}]"));
    }
    match lif.split_once(':') {
        Some((host, port)) => {
            if host.is_empty() {
                return Err(bad("empty host"));
            }
            check_port(port).map_err(|_| bad("bad port"))?;
            Ok(format!("{host}:{port}"))
        }
        None => Ok(lif.to_string()),
    }
}

fn check_port(p: &str) -> Result<u16, ()> {
    p.parse::<u16>().ok().filter(|p| *p > 0).ok_or(())
}

fn parse_defaults(obj: &Map<String, Value>) -> DriverResult<Defaults> {
    let mut d = Defaults::default();
    let defaults = match field(obj, "defaults") {
        None | Some(Value::Null) => return Ok(d),
        Some(Value::Object(m)) => m,
        Some(other) => return Err(wrong_type("defaults", "an object", Some(other))),
    };
    let text = |key: &'static str| -> DriverResult<Option<String>> {
        match field(defaults, key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) if s.trim().is_empty() => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.trim().to_string())),
            Some(Value::Number(n)) => Ok(Some(n.to_string())),
            Some(Value::Bool(b)) => Ok(Some(b.to_string())),
            Some(other) => Err(wrong_type(
                &format!("defaults.{key}"),
                "a string",
                Some(other),
            )),
        }
    };
    let boolean = |key: &'static str| -> DriverResult<Option<bool>> {
        match text(key)? {
            None => Ok(None),
            Some(s) => go_bool(&s).map(Some).ok_or_else(|| {
                DriverError::Invalid(format!("invalid value for defaults.{key}: not a boolean"))
            }),
        }
    };
    if let Some(v) = text("spaceReserve")? {
        if v != "none" && v != "volume" {
            return Err(DriverError::Invalid(
                "invalid value for defaults.spaceReserve: expected none or volume".into(),
            ));
        }
        d.space_reserve = v;
    }
    if let Some(v) = text("snapshotPolicy")? {
        d.snapshot_policy = v;
    }
    if let Some(v) = text("snapshotReserve")? {
        if !v.parse::<u8>().is_ok_and(|p| p <= 90) {
            return Err(DriverError::Invalid(
                "invalid value for defaults.snapshotReserve: expected a percentage from 0 to 90"
                    .into(),
            ));
        }
        d.snapshot_reserve = Some(v);
    }
    if let Some(v) = text("unixPermissions")? {
        d.unix_permissions = v;
    }
    if let Some(v) = boolean("snapshotDir")? {
        d.snapshot_dir = v;
    }
    if let Some(v) = text("exportPolicy")? {
        d.export_policy = v;
    }
    if let Some(v) = text("securityStyle")? {
        if !matches!(v.as_str(), "unix" | "ntfs" | "mixed") {
            return Err(DriverError::Invalid(
                "invalid value for defaults.securityStyle: expected unix, ntfs or mixed".into(),
            ));
        }
        d.security_style = v;
    }
    if let Some(v) = boolean("splitOnClone")? {
        d.split_on_clone = v;
    }
    if let Some(v) = text("fileSystemType")? {
        d.file_system_type = v;
    }
    if let Some(v) = boolean("encryption")? {
        d.encryption = v;
    }
    Ok(d)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn parse(extra: Value) -> DriverResult<OntapConfig> {
        let mut doc = json!({
            "version": 1, "storageDriverName": "ontap-nas",
            "managementLIF": "10.0.0.1", "username": "admin", "password": "hunter2",
        });
        for (k, v) in extra.as_object().unwrap() {
            doc[k] = v.clone();
        }
        let common = CommonConfig::parse(&doc)?;
        OntapConfig::parse(&doc, &common)
    }

    fn invalid(extra: Value) -> String {
        match parse(extra) {
            Err(DriverError::Invalid(m)) => m,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn defaults_follow_trident() {
        let c = parse(json!({})).unwrap();
        assert_eq!(c.variant, Variant::Nas);
        assert_eq!(c.defaults, Defaults::default());
        assert_eq!(c.defaults.unix_permissions, "---rwxrwxrwx");
        assert_eq!(c.prefix, "trident_");
        assert_eq!(c.igroup_name, "trident");
        assert!(!c.per_node_igroups);
        assert_eq!(c.igroup_base, "storch");
        assert!(c.tls.verify);
        assert_eq!(c.svm, None);
        assert_eq!(c.data_lif, None);
        assert_eq!(
            c.url(),
            "https://10.0.0.1/servlets/netapp.servlets.admin.XMLrequest_filer"
        );
    }

    #[test]
    fn storage_prefix_states() {
        assert_eq!(
            parse(json!({"storagePrefix": null})).unwrap().prefix,
            "trident_"
        );
        assert_eq!(
            parse(json!({"storagePrefix": {}})).unwrap().prefix,
            "trident_"
        );
        assert_eq!(parse(json!({"storagePrefix": ""})).unwrap().prefix, "");
        assert_eq!(parse(json!({"storagePrefix": "x"})).unwrap().prefix, "x");
        assert!(invalid(json!({"storagePrefix": 3})).contains("storage prefix"));
    }

    #[test]
    fn management_lif_forms() {
        for (lif, want) in [
            ("10.0.0.1", "10.0.0.1"),
            ("10.0.0.1:8443", "10.0.0.1:8443"),
            ("filer.example.com", "filer.example.com"),
            ("filer:443", "filer:443"),
            ("fd00::1", "[fd00::1]"),
            ("[fd00::1]", "[fd00::1]"),
            ("[fd00::1]:443", "[fd00::1]:443"),
        ] {
            assert_eq!(parse_authority(lif).unwrap(), want, "{lif}");
        }
        for bad in [
            "[fd00::1", "[nope]:1", "a:b", "a:0", "a:70000", "http://x", "u@x", ":80",
        ] {
            assert!(parse_authority(bad).is_err(), "{bad}");
        }
        assert!(invalid(json!({"managementLIF": ""})).contains("managementLIF"));
    }

    #[test]
    fn defaults_object() {
        let c = parse(json!({"defaults": {
            "spaceReserve": "volume", "snapshotPolicy": "default", "snapshotReserve": "10",
            "unixPermissions": "0755", "snapshotDir": "true", "exportPolicy": "p1",
            "securityStyle": "mixed", "splitOnClone": "true", "encryption": "true",
            "fileSystemType": "xfs", "size": "2G"}}))
        .unwrap();
        assert_eq!(c.defaults.space_reserve, "volume");
        assert_eq!(c.defaults.snapshot_reserve.as_deref(), Some("10"));
        assert!(c.defaults.snapshot_dir && c.defaults.split_on_clone && c.defaults.encryption);
        assert_eq!(c.defaults.security_style, "mixed");
        assert!(invalid(json!({"defaults": {"spaceReserve": "some"}})).contains("spaceReserve"));
        assert!(invalid(json!({"defaults": {"splitOnClone": "maybe"}})).contains("splitOnClone"));
        assert!(
            invalid(json!({"defaults": {"snapshotReserve": "95"}})).contains("snapshotReserve")
        );
        // Top-level keys are not defaults.
        let c = parse(json!({"spaceReserve": "volume"})).unwrap();
        assert_eq!(c.defaults.space_reserve, "none");
    }

    #[test]
    fn tls_options() {
        let c = parse(json!({"tlsVerify": false})).unwrap();
        assert!(!c.tls.verify);
        let c = parse(json!({"trustedCACertificate": "-----BEGIN CERTIFICATE-----\nx\n-----END CERTIFICATE-----\n"})).unwrap();
        assert!(c.tls.trusted_ca_pem.is_some());
        assert!(invalid(json!({"trustedCACertificate": "abc"})).contains("trustedCACertificate"));
        assert!(invalid(json!({"tlsVerify": "perhaps"})).contains("tlsVerify"));
    }

    #[test]
    fn password_never_shows() {
        let c = parse(json!({})).unwrap();
        let dbg = format!("{c:?}");
        assert!(!dbg.contains("hunter2"), "{dbg}");
        let msg = invalid(json!({"username": ""}));
        assert!(!msg.contains("hunter2"));
    }
}
