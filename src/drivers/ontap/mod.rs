//! The ONTAP drivers over ZAPI (XML over HTTPS) or REST (`/api`, JSON), one driver logic over
//! both: `ontap-nas`, `ontap-nas-economy`, `ontap-nas-flexgroup` and `ontap-san`.
//!
//! Files (the ZAPI codec itself is `crate::wire::zapi`, shared with the simulator):
//! - `mod.rs`: the driver, its volume options and the trait impl, which dispatches to the variant.
//! - `config.rs`: the backend config (`useREST`, `maxConcurrentRequests` among it).
//! - `api.rs`: the [`api::OntapApi`] trait the variants call, and the per-LIF request cap.
//! - `client.rs`: the ZAPI transport (POST, paging, jobs, retries, errno classes) and the one
//!   error type of both APIs.
//! - `calls.rs`: `OntapApi` over ZAPI.
//! - `rest.rs`: the REST transport (paging by `_links.next`, jobs, error bodies);
//!   `rest_calls.rs`: `OntapApi` over REST (`rest_san.rs`: its SAN lookups); `rest_wire.rs`:
//!   its JSON, codes and the REST-or-ZAPI choice.
//! - `wire.rs`: the driver's records and request specs (and their ZAPI encoding).
//! - `discovery.rs`: the API choice, version, SVM, aggregates, LIFs, iSCSI target; the pools.
//! - `flexvol.rs`: what the variants share (FlexVol specs, rollback, snapshots, FlexClones).
//! - `nas.rs`, `economy.rs`, `flexgroup.rs`, `san.rs`: one per variant; they import
//!   `flexvol.rs`, never each other (flexgroup reuses ontap-nas's FlexVol-style calls).
//!
//! What is where on the array:
//! - ontap-nas: one FlexVol per volume, in the pool's aggregate, mounted at `/<name>`.
//! - ontap-nas-economy: one qtree per volume, in FlexVols named
//!   `trident_qtree_pool_<prefix>_<10 letters>` that the driver creates, grows, shrinks and
//!   prunes; a tree quota holds each qtree's size.
//! - ontap-nas-flexgroup: one FlexGroup per volume over the SVM's aggregates; one pool named
//!   after the SVM.
//! - ontap-san: one FlexVol per volume holding the LUN `/vol/<name>/lun0`, mapped to the
//!   backend's igroup (created when missing), or with `perNodeIgroups` published per host
//!   through an igroup per node (`san.rs`).

mod adopt;
pub mod api;
mod calls;
pub mod client;
pub mod config;
mod discovery;
mod economy;
mod flexgroup;
mod flexvol;
mod nas;
pub mod rest;
mod rest_calls;
mod rest_san;
pub mod rest_wire;
mod san;
pub mod wire;

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use async_trait::async_trait;
use serde_json::{Value, json};

use self::api::OntapApi;
use self::client::ZapiClient;
use self::config::{OntapConfig, Variant, go_bool};
use self::rest::RestClient;
use super::{
    CloneRequest, CommonConfig, CreateRequest, Discovery, DriverError, DriverResult, HostAccess,
    PlannedVolume, PublishContext, SnapshotInfo, StorageDriver, VolumeInfo,
};
use crate::model::{AccessInfo, Protocol, Request, VolumeConfig};

pub use self::config::MIN_VOLUME_BYTES;
pub use self::discovery::{Aggregate, Discovered, ENCRYPTION_ONTAPI, MIN_ONTAPI};
pub use self::san::flexvol_bytes as san_flexvol_bytes;

/// One ONTAP backend.
pub struct OntapDriver {
    cfg: OntapConfig,
    common: CommonConfig,
    zapi: Arc<ZapiClient>,
    rest: Arc<RestClient>,
    /// The API chosen at discovery (`useREST` and the array's version).
    chosen: RwLock<Option<Arc<dyn OntapApi>>>,
    /// The choice fell back to ZAPI because REST did not answer: ask again at the next
    /// discovery, so one transient failure does not pin a REST-only array to ZAPI.
    reprobe: std::sync::atomic::AtomicBool,
    discovered: RwLock<Option<Arc<Discovered>>>,
    /// Serialises economy FlexVol management (choose, grow, shrink, prune).
    eco_lock: tokio::sync::Mutex<()>,
}

impl std::fmt::Debug for OntapDriver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OntapDriver")
            .field("driver", &self.cfg.variant.driver_name())
            .field("managementLIF", &self.cfg.management_lif)
            .field("svm", &self.cfg.svm)
            .field("credentials", &"<redacted>")
            .finish_non_exhaustive()
    }
}

/// The per-volume options after the volume config, the class's requests and the backend
/// defaults are merged (docs/trident-contract.md#how-requests-shape-a-volume).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VolumeOptions {
    pub space_reserve: String,
    pub snapshot_policy: String,
    pub snapshot_reserve: Option<String>,
    pub unix_permissions: String,
    pub snapshot_dir: bool,
    pub export_policy: String,
    pub security_style: String,
    pub encryption: bool,
    pub split_on_clone: bool,
}

impl OntapDriver {
    /// Parses the ONTAP part of a backend config. Contacts nothing.
    pub fn from_config(doc: &Value, common: &CommonConfig) -> DriverResult<OntapDriver> {
        let cfg = OntapConfig::parse(doc, common)?;
        let zapi = Arc::new(ZapiClient::new(&cfg)?);
        let rest = Arc::new(RestClient::new(&cfg)?);
        Ok(OntapDriver {
            cfg,
            common: common.clone(),
            zapi,
            rest,
            chosen: RwLock::new(None),
            reprobe: std::sync::atomic::AtomicBool::new(false),
            discovered: RwLock::new(None),
            eco_lock: tokio::sync::Mutex::new(()),
        })
    }

    /// Replaces both clients' retry policy and page size (tests).
    pub fn tune_client(mut self, retry: crate::net::RetryPolicy, page_size: u32) -> OntapDriver {
        let zapi = ZapiClient::new(&self.cfg).expect("the config built a client before");
        let rest = RestClient::new(&self.cfg).expect("the config built a client before");
        self.zapi = Arc::new(zapi.with_retry(retry).with_page_size(page_size));
        self.rest = Arc::new(rest.with_retry(retry).with_page_size(page_size));
        self
    }

    /// The API in use: the one chosen at discovery; before that, REST only when `useREST` is
    /// true.
    pub(crate) fn api(&self) -> Arc<dyn OntapApi> {
        if let Some(a) = self
            .chosen
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
        {
            return a;
        }
        if self.cfg.use_rest == Some(true) {
            self.rest.clone()
        } else {
            self.zapi.clone()
        }
    }

    /// `"rest"` or `"zapi"` once discovery has chosen.
    pub fn chosen_api(&self) -> Option<&'static str> {
        self.chosen
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .map(|a| a.api_name())
    }

    pub fn config(&self) -> &OntapConfig {
        &self.cfg
    }

    pub fn variant(&self) -> Variant {
        self.cfg.variant
    }

    /// Merges the volume config, the class's requests and the backend defaults.
    pub fn volume_options(
        &self,
        config: &VolumeConfig,
        requests: &BTreeMap<String, Request>,
    ) -> DriverResult<VolumeOptions> {
        let d = &self.cfg.defaults;
        let pick = |v: &str, default: &str| {
            if v.trim().is_empty() {
                default.to_string()
            } else {
                v.trim().to_string()
            }
        };
        let flag = |field: &str, v: &str, default: bool| -> DriverResult<bool> {
            if v.trim().is_empty() {
                return Ok(default);
            }
            go_bool(v.trim()).ok_or_else(|| {
                DriverError::Invalid(format!("invalid value for {field}: not a boolean"))
            })
        };
        let requested_reserve = match requests.get("provisioningType") {
            Some(Request::String(s)) if s == "thin" => Some("none"),
            Some(Request::String(s)) if s == "thick" => Some("volume"),
            _ => None,
        };
        let space_reserve = if config.space_reserve.trim().is_empty() {
            requested_reserve.unwrap_or(&d.space_reserve).to_string()
        } else {
            config.space_reserve.trim().to_string()
        };
        if space_reserve != "none" && space_reserve != "volume" {
            return Err(DriverError::Invalid(
                "invalid value for spaceReserve: expected none or volume".into(),
            ));
        }
        let requested_encryption = matches!(requests.get("encryption"), Some(Request::Bool(true)));
        let encryption = flag(
            "encryption",
            &config.encryption,
            requested_encryption || d.encryption,
        )?;
        let snapshot_policy = pick(&config.snapshot_policy, &d.snapshot_policy);
        let snapshot_reserve = if snapshot_policy == "none" {
            Some("0".to_string())
        } else {
            d.snapshot_reserve.clone()
        };
        Ok(VolumeOptions {
            space_reserve,
            snapshot_reserve,
            snapshot_policy,
            unix_permissions: pick(&config.unix_permissions, &d.unix_permissions),
            snapshot_dir: flag(
                "snapshotDirectory",
                &config.snapshot_directory,
                d.snapshot_dir,
            )?,
            export_policy: pick(&config.export_policy, &d.export_policy),
            security_style: pick(&config.security_style, &d.security_style),
            encryption,
            split_on_clone: flag("splitOnClone", &config.split_on_clone, d.split_on_clone)?,
        })
    }

    /// The aggregate named by a pool, or `Invalid`.
    fn aggregate<'a>(&self, d: &'a Discovered, pool: &str) -> DriverResult<&'a Aggregate> {
        d.aggregates.iter().find(|a| a.name == pool).ok_or_else(|| {
            DriverError::Invalid(format!(
                "pool {pool} is not an aggregate of SVM {} on this backend",
                d.svm
            ))
        })
    }

    fn check_size(&self, size: u64) -> DriverResult<()> {
        self.size_limits().check(size).map_err(DriverError::Invalid)
    }

    fn nfs_access(&self, d: &Discovered, path: &str) -> AccessInfo {
        AccessInfo {
            nfs_server_ip: d.data_lif.clone(),
            nfs_path: path.to_string(),
            ..AccessInfo::default()
        }
    }

    fn unsupported(&self, what: &str) -> DriverError {
        DriverError::Unsupported(format!(
            "{what} is not supported by {}",
            self.cfg.variant.driver_name()
        ))
    }
}

/// The array-side name (docs/trident-contract.md#internal-names): `<prefix>-<name>` (bare name for
/// an empty prefix), then `-` and `.` become `_` and `__` collapses to `_` (one pass).
pub fn ontap_internal_name(prefix: &str, name: &str) -> String {
    let joined = if prefix.is_empty() {
        name.to_string()
    } else {
        format!("{prefix}-{name}")
    };
    joined.replace(['-', '.'], "_").replace("__", "_")
}

/// `YYYYMMDDTHHMMSSZ` (UTC), the name of the snapshot a clone is made from when none is given.
pub fn clone_snapshot_name(now: std::time::SystemTime) -> String {
    let secs = now
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}{month:02}{day:02}T{:02}{:02}{:02}Z",
        rem / 3600,
        (rem / 60) % 60,
        rem % 60
    )
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// Unix permissions as ONTAP's qtree `mode` wants them (octal): `---rwxr-xr-x` → `0755`;
/// octal input is kept.
pub fn permissions_to_octal(p: &str) -> String {
    let p = p.trim();
    if p.chars().all(|c| c.is_ascii_digit()) && !p.is_empty() {
        return p.to_string();
    }
    let bits: Vec<char> = p.chars().rev().take(9).collect();
    if bits.len() < 9 {
        return "0777".into();
    }
    let mut mode = 0u32;
    for (i, c) in bits.iter().enumerate() {
        if *c != '-' {
            mode |= 1 << i;
        }
    }
    format!("{mode:04o}")
}

#[async_trait]
impl StorageDriver for OntapDriver {
    fn driver_name(&self) -> &'static str {
        self.cfg.variant.driver_name()
    }

    fn external_config(&self) -> Value {
        let d = self
            .discovered
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let svm = d
            .as_ref()
            .map(|d| d.svm.clone())
            .or_else(|| self.cfg.svm.clone())
            .unwrap_or_default();
        let data_lif = d
            .as_ref()
            .map(|d| d.data_lif.clone())
            .or_else(|| self.cfg.data_lif.clone())
            .unwrap_or_default();
        json!({
            "version": 1,
            "storageDriverName": self.cfg.variant.driver_name(),
            "storagePrefix": self.common.storage_prefix,
            "serialNumbers": [],
            "managementLIF": self.cfg.management_lif,
            "dataLIF": data_lif,
            "igroupName": self.cfg.igroup_name,
            "perNodeIgroups": self.cfg.per_node_igroups,
            "svm": svm,
            "useREST": self.cfg.use_rest,
            "api": self.chosen_api(),
        })
    }

    fn internal_name(&self, volume_name: &str) -> String {
        ontap_internal_name(&self.cfg.prefix, volume_name)
    }

    fn size_limits(&self) -> super::SizeLimits {
        super::SizeLimits::at_least(MIN_VOLUME_BYTES)
    }

    async fn discover(&self) -> DriverResult<Discovery> {
        if self.cfg.variant == Variant::NasEconomy {
            // Prune empty pool FlexVols first, so that their bytes show as free.
            if let Ok(d) = self.ctx().await {
                let _guard = self.eco_lock.lock().await;
                economy::prune(self, &d).await?;
            }
        }
        let d = self.run_discovery().await?;
        let (pools, free_bytes) = self.pools(&d);
        Ok(Discovery {
            backend_name: d.backend_name.clone(),
            protocol: if self.cfg.variant.is_san() {
                Protocol::Block
            } else {
                Protocol::File
            },
            pools,
            free_bytes,
        })
    }

    async fn create(&self, req: &CreateRequest) -> DriverResult<VolumeInfo> {
        let d = self.ctx().await?;
        self.check_size(req.size_bytes)?;
        let opts = self.volume_options(&req.config, &req.requests)?;
        match self.cfg.variant {
            Variant::Nas => nas::create(self, &d, req, &opts).await,
            Variant::NasEconomy => economy::create(self, &d, req, &opts).await,
            Variant::NasFlexgroup => flexgroup::create(self, &d, req, &opts).await,
            Variant::San => san::create(self, &d, req, &opts).await,
        }
    }

    async fn clone_volume(&self, req: &CloneRequest) -> DriverResult<VolumeInfo> {
        let d = self.ctx().await?;
        match self.cfg.variant {
            Variant::Nas => nas::clone(self, &d, req).await,
            Variant::San => san::clone(self, &d, req).await,
            Variant::NasEconomy | Variant::NasFlexgroup => Err(self.unsupported("cloning")),
        }
    }

    async fn get(&self, internal_name: &str) -> DriverResult<Option<VolumeInfo>> {
        let d = self.ctx().await?;
        match self.cfg.variant {
            Variant::Nas | Variant::NasFlexgroup => nas::get(self, &d, internal_name).await,
            Variant::NasEconomy => economy::get(self, &d, internal_name).await,
            Variant::San => san::get(self, &d, internal_name).await,
        }
    }

    async fn adopt(&self, planned: &PlannedVolume) -> DriverResult<Option<VolumeInfo>> {
        let d = self.ctx().await?;
        adopt::adopt(self, &d, planned).await
    }

    async fn destroy(&self, internal_name: &str) -> DriverResult<()> {
        let d = self.ctx().await?;
        match self.cfg.variant {
            Variant::Nas => nas::destroy(self, &d, internal_name, false).await,
            Variant::NasFlexgroup => nas::destroy(self, &d, internal_name, true).await,
            Variant::NasEconomy => economy::destroy(self, &d, internal_name).await,
            Variant::San => san::destroy(self, &d, internal_name).await,
        }
    }

    async fn resize(&self, internal_name: &str, size_bytes: u64) -> DriverResult<()> {
        let d = self.ctx().await?;
        match self.cfg.variant {
            Variant::Nas => nas::resize(self, &d, internal_name, size_bytes, false).await,
            Variant::NasFlexgroup => nas::resize(self, &d, internal_name, size_bytes, true).await,
            Variant::NasEconomy => economy::resize(self, &d, internal_name, size_bytes).await,
            Variant::San => san::resize(self, &d, internal_name, size_bytes).await,
        }
    }

    async fn create_snapshot(
        &self,
        internal_name: &str,
        snapshot: &str,
    ) -> DriverResult<SnapshotInfo> {
        if self.cfg.variant == Variant::NasEconomy {
            return Err(self.unsupported("snapshots"));
        }
        let d = self.ctx().await?;
        flexvol::create_snapshot(self, &d, internal_name, snapshot).await
    }

    async fn list_snapshots(&self, internal_name: &str) -> DriverResult<Vec<SnapshotInfo>> {
        if self.cfg.variant == Variant::NasEconomy {
            return Err(self.unsupported("snapshots"));
        }
        let d = self.ctx().await?;
        flexvol::list_snapshots(self, &d, internal_name).await
    }

    async fn delete_snapshot(&self, internal_name: &str, snapshot: &str) -> DriverResult<()> {
        if self.cfg.variant == Variant::NasEconomy {
            return Err(self.unsupported("snapshots"));
        }
        let d = self.ctx().await?;
        self.api()
            .snapshot_delete(&d.svm, internal_name, snapshot)
            .await
            .map_err(Into::into)
    }

    async fn list_volumes(&self) -> DriverResult<Vec<VolumeInfo>> {
        let d = self.ctx().await?;
        match self.cfg.variant {
            Variant::Nas | Variant::NasFlexgroup => nas::list(self, &d).await,
            Variant::NasEconomy => economy::list(self, &d).await,
            Variant::San => san::list(self, &d).await,
        }
    }

    async fn access_info(&self, internal_name: &str) -> DriverResult<AccessInfo> {
        match self.get(internal_name).await? {
            Some(v) => Ok(v.access),
            None => Err(not_found(internal_name)),
        }
    }

    /// Only ontap-san with `perNodeIgroups`: otherwise every host the backend's igroup (or
    /// export policy) lets in reaches every volume, as in Trident 18.07.
    fn needs_publish(&self) -> bool {
        self.cfg.variant == Variant::San && self.cfg.per_node_igroups
    }

    async fn publish(
        &self,
        internal_name: &str,
        host: &HostAccess,
    ) -> DriverResult<PublishContext> {
        if !self.needs_publish() {
            return Ok(PublishContext::new());
        }
        let d = self.ctx().await?;
        san::publish(self, &d, internal_name, host).await
    }

    async fn unpublish(&self, internal_name: &str, host: &HostAccess) -> DriverResult<()> {
        if !self.needs_publish() {
            return Ok(());
        }
        let d = self.ctx().await?;
        san::unpublish(self, &d, internal_name, host).await
    }
}

fn not_found(name: &str) -> DriverError {
    DriverError::NotFound(format!("volume {name} not found"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn internal_names_follow_trident() {
        assert_eq!(
            ontap_internal_name("trident_", "default-basic-6cb6b"),
            "trident_default_basic_6cb6b"
        );
        assert_eq!(
            ontap_internal_name("alternate-trident", "default-basic-6cb6b"),
            "alternate_trident_default_basic_6cb6b"
        );
        assert_eq!(ontap_internal_name("", "a.b-c"), "a_b_c");
        assert_eq!(ontap_internal_name("trident_", "x__y"), "trident_x_y");
        // One non-overlapping pass, like Go's strings.Replace.
        assert_eq!(ontap_internal_name("", "a___b"), "a__b");
    }

    #[test]
    fn clone_snapshot_names() {
        let t = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_700_000_000);
        assert_eq!(clone_snapshot_name(t), "20231114T221320Z");
        assert_eq!(
            clone_snapshot_name(std::time::UNIX_EPOCH),
            "19700101T000000Z"
        );
        let leap = std::time::UNIX_EPOCH + std::time::Duration::from_secs(951_825_600);
        assert_eq!(clone_snapshot_name(leap), "20000229T120000Z");
    }

    #[test]
    fn octal_permissions() {
        assert_eq!(permissions_to_octal("---rwxrwxrwx"), "0777");
        assert_eq!(permissions_to_octal("---rwxr-xr-x"), "0755");
        assert_eq!(permissions_to_octal("rwxr-x---"), "0750");
        assert_eq!(permissions_to_octal("0700"), "0700");
    }

    fn driver(extra: Value) -> OntapDriver {
        let mut doc = json!({"version": 1, "storageDriverName": "ontap-nas",
            "managementLIF": "127.0.0.1:1", "username": "u", "password": "p"});
        for (k, v) in extra.as_object().unwrap() {
            doc[k] = v.clone();
        }
        let common = CommonConfig::parse(&doc).unwrap();
        OntapDriver::from_config(&doc, &common).unwrap()
    }

    #[test]
    fn options_precedence() {
        let d = driver(
            json!({"defaults": {"spaceReserve": "volume", "snapshotPolicy": "default",
            "snapshotReserve": "10", "exportPolicy": "pol"}}),
        );
        let mut requests = BTreeMap::new();
        let cfg = VolumeConfig::default();
        // Defaults.
        let o = d.volume_options(&cfg, &requests).unwrap();
        assert_eq!(o.space_reserve, "volume");
        assert_eq!(o.snapshot_reserve.as_deref(), Some("10"));
        assert_eq!(o.export_policy, "pol");
        assert!(!o.encryption);
        // The class's requests beat the defaults.
        requests.insert(
            "provisioningType".to_string(),
            Request::String("thin".into()),
        );
        requests.insert("encryption".to_string(), Request::Bool(true));
        let o = d.volume_options(&cfg, &requests).unwrap();
        assert_eq!(o.space_reserve, "none");
        assert!(o.encryption);
        // The volume config beats both.
        let cfg = VolumeConfig {
            space_reserve: "volume".into(),
            encryption: "false".into(),
            snapshot_policy: "none".into(),
            snapshot_directory: "true".into(),
            ..VolumeConfig::default()
        };
        let o = d.volume_options(&cfg, &requests).unwrap();
        assert_eq!(o.space_reserve, "volume");
        assert!(!o.encryption);
        assert!(o.snapshot_dir);
        // Policy none means no snapshot reserve.
        assert_eq!(o.snapshot_reserve.as_deref(), Some("0"));
        let bad = VolumeConfig {
            split_on_clone: "perhaps".into(),
            ..VolumeConfig::default()
        };
        assert!(matches!(
            d.volume_options(&bad, &requests),
            Err(DriverError::Invalid(_))
        ));
    }

    #[test]
    fn external_config_has_no_secrets() {
        let d = driver(json!({"password": "s3cr3t-pw", "svm": "svm1"}));
        let ext = d.external_config().to_string();
        assert!(!ext.contains("s3cr3t-pw"), "{ext}");
        assert!(!format!("{d:?}").contains("s3cr3t-pw"));
        assert_eq!(d.external_config()["svm"], "svm1");
        assert_eq!(d.external_config()["managementLIF"], "127.0.0.1:1");
        assert_eq!(d.external_config()["storagePrefix"], Value::Null);
    }
}
