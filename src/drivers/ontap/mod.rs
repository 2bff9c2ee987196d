//! The ONTAP drivers over ZAPI (XML over HTTPS): `ontap-nas`, `ontap-nas-economy`,
//! `ontap-nas-flexgroup` and `ontap-san`.
//!
//! Files: `config.rs` (the backend config), `xml.rs` (the wire format), `client.rs` (the ZAPI
//! client, typed calls, errno classes), one file per variant (`nas.rs`, `economy.rs`,
//! `flexgroup.rs`, `san.rs`); this file holds the shared discovery and the trait impl, which
//! dispatches to the variant.
//!
//! What is where on the array:
//! - ontap-nas: one FlexVol per volume, in the pool's aggregate, mounted at `/<name>`.
//! - ontap-nas-economy: one qtree per volume, in FlexVols named
//!   `trident_qtree_pool_<prefix>_<10 letters>` that the driver creates, grows, shrinks and
//!   prunes; a tree quota holds each qtree's size.
//! - ontap-nas-flexgroup: one FlexGroup per volume over the SVM's aggregates; one pool named
//!   after the SVM.
//! - ontap-san: one FlexVol per volume holding the LUN `/vol/<name>/lun0`, mapped to the
//!   backend's igroup (created when missing).

pub mod client;
pub mod config;
pub mod economy;
pub mod flexgroup;
pub mod nas;
pub mod san;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, RwLock};

use async_trait::async_trait;
use serde_json::{Value, json};

use self::client::{ZapiClient, ZapiError};
use self::config::{OntapConfig, Variant, go_bool};
use super::{
    CloneRequest, CommonConfig, CreateRequest, Discovery, DriverError, DriverResult, SnapshotInfo,
    StorageDriver, VolumeInfo,
};
use crate::model::{AccessInfo, Offer, PoolInfo, Protocol, Request, VolumeConfig};
use crate::wire::zapi::{Node, errno};

pub use self::config::MIN_VOLUME_BYTES;

/// The oldest ONTAPI the drivers accept: 1.30 (ONTAP 8.3).
pub const MIN_ONTAPI: (u32, u32) = (1, 30);

/// The ONTAPI version that brought volume encryption (ONTAP 9.1).
pub const ENCRYPTION_ONTAPI: (u32, u32) = (1, 110);

/// What discovery learnt about the array; every volume operation works from it.
#[derive(Debug, Clone, PartialEq)]
pub struct Discovered {
    pub svm: String,
    pub ontapi: (u32, u32),
    /// The pools' aggregates (all of the SVM's, or the configured one), sorted by name.
    pub aggregates: Vec<Aggregate>,
    /// NAS: the NFS data LIF; SAN: the first iSCSI LIF.
    pub data_lif: String,
    /// SAN: every iSCSI portal used (one when `dataLIF` is set).
    pub iscsi_portals: Vec<String>,
    /// SAN: the target IQN.
    pub iqn: String,
    pub backend_name: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Aggregate {
    pub name: String,
    /// `hdd`, `hybrid` or `ssd` when the array says so.
    pub media: Option<String>,
    pub available: u64,
    pub nve_capable: bool,
}

/// One ONTAP backend.
pub struct OntapDriver {
    cfg: OntapConfig,
    common: CommonConfig,
    client: ZapiClient,
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
/// defaults are merged (trident-compat §3.6).
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
        let client = ZapiClient::new(&cfg)?;
        Ok(OntapDriver {
            cfg,
            common: common.clone(),
            client,
            discovered: RwLock::new(None),
            eco_lock: tokio::sync::Mutex::new(()),
        })
    }

    /// Replaces the ZAPI client's retry policy and page size (tests).
    pub fn tune_client(
        mut self,
        retry: crate::drivers::http::RetryPolicy,
        page_size: u32,
    ) -> OntapDriver {
        self.client = self.client.with_retry(retry).with_page_size(page_size);
        self
    }

    pub fn config(&self) -> &OntapConfig {
        &self.cfg
    }

    pub fn variant(&self) -> Variant {
        self.cfg.variant
    }

    /// The last discovery, running one when there is none yet.
    pub async fn ctx(&self) -> DriverResult<Arc<Discovered>> {
        if let Some(d) = self
            .discovered
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
        {
            return Ok(d);
        }
        self.run_discovery().await
    }

    fn svm_hint(&self) -> Option<String> {
        self.discovered
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .map(|d| d.svm.clone())
            .or_else(|| self.cfg.svm.clone())
    }

    async fn run_discovery(&self) -> DriverResult<Arc<Discovered>> {
        let d = Arc::new(self.discover_array().await?);
        *self.discovered.write().unwrap_or_else(|e| e.into_inner()) = Some(d.clone());
        Ok(d)
    }

    /// Version check, SVM, aggregates and their media, data LIFs, iSCSI target.
    async fn discover_array(&self) -> DriverResult<Discovered> {
        let c = &self.client;
        let ontapi = c.ontapi_version().await.map_err(init_error)?;
        if ontapi < MIN_ONTAPI {
            return Err(DriverError::Invalid(format!(
                "ONTAP {}.{} is too old: ONTAPI {}.{} (ONTAP 8.3) or later is required",
                ontapi.0, ontapi.1, MIN_ONTAPI.0, MIN_ONTAPI.1
            )));
        }

        let svm = match self.svm_hint() {
            Some(s) => s,
            None => self.derive_svm().await?,
        };

        // The SVM and its aggregates.
        let q = Node::new("vserver-info").with_leaf("vserver-name", &svm);
        let records = c
            .iter("vserver-get-iter", Some(q), None, None)
            .await
            .map_err(init_error)?;
        let records: Vec<&Node> = records
            .iter()
            .filter(|r| r.str_at("vserver-name") == svm)
            .collect();
        let [record] = records.as_slice() else {
            return Err(DriverError::Invalid(format!(
                "could not find SVM {svm} (check the backend's svm and credentials)"
            )));
        };
        let mut aggregates: Vec<Aggregate> = record
            .at("vserver-aggr-info-list")
            .map(|l| {
                l.children_named("vserver-aggr-info")
                    .map(|a| Aggregate {
                        name: a.str_at("aggr-name").to_string(),
                        media: None,
                        available: a.u64_at("aggr-availsize").unwrap_or(0),
                        nve_capable: false,
                    })
                    .collect()
            })
            .unwrap_or_default();
        aggregates.sort_by(|a, b| a.name.cmp(&b.name));
        if let Some(want) = &self.cfg.aggregate {
            aggregates.retain(|a| &a.name == want);
            if aggregates.is_empty() {
                return Err(DriverError::Invalid(format!(
                    "aggregate {want} is not assigned to SVM {svm}"
                )));
            }
        }
        if aggregates.is_empty() {
            return Err(DriverError::Invalid(format!(
                "SVM {svm} has no aggregates assigned"
            )));
        }

        // Media type and encryption capability, where this user may read them.
        match c
            .iter("vserver-show-aggr-get-iter", None, None, Some(&svm))
            .await
        {
            Ok(records) => {
                for r in &records {
                    let name = r.str_at("aggregate-name");
                    if let Some(a) = aggregates.iter_mut().find(|a| a.name == name) {
                        a.media = match r.str_at("aggregate-type") {
                            m @ ("hdd" | "hybrid" | "ssd") => Some(m.to_string()),
                            _ => None,
                        };
                        a.nve_capable = r.bool_at("is-nve-capable").unwrap_or(false);
                    }
                }
            }
            Err(e) if e.is_errno(&[errno::EAPINOTFOUND, errno::EAPIPRIVILEGE]) => {
                tracing::info!(svm = %svm, "cannot read aggregate types; pools get no media");
            }
            Err(e) => return Err(init_error(e)),
        }

        // Data LIFs.
        let protocol = if self.cfg.variant.is_san() {
            "iscsi"
        } else {
            "nfs"
        };
        let lifs = self.data_lifs(&svm, protocol).await?;
        let (data_lif, iscsi_portals, iqn) = if self.cfg.variant.is_san() {
            let portals = match &self.cfg.data_lif {
                Some(lif) => {
                    if !lifs.contains(lif) {
                        return Err(DriverError::Invalid(format!(
                            "dataLIF {lif} is not an iSCSI data LIF of SVM {svm}"
                        )));
                    }
                    vec![lif.clone()]
                }
                None => lifs.clone(),
            };
            let r = c
                .call(&Node::new("iscsi-node-get-name"), Some(&svm))
                .await
                .map_err(|e| {
                    DriverError::Invalid(format!(
                        "SVM {svm} has no usable iSCSI service: {}",
                        e.into_driver()
                    ))
                })?;
            let iqn = r.str_at("node-name").to_string();
            c.ensure_igroup(&svm, &self.cfg.igroup_name)
                .await
                .map_err(init_error)?;
            (portals[0].clone(), portals, iqn)
        } else {
            let lif = match &self.cfg.data_lif {
                Some(lif) => {
                    let is_ip = lif.parse::<std::net::IpAddr>().is_ok();
                    if is_ip && !lifs.contains(lif) {
                        return Err(DriverError::Invalid(format!(
                            "dataLIF {lif} is not an NFS data LIF of SVM {svm}"
                        )));
                    }
                    lif.clone()
                }
                None => lifs[0].clone(),
            };
            (lif, Vec::new(), String::new())
        };

        if self.cfg.variant == Variant::NasEconomy {
            c.ensure_export_policy(&svm, economy::EXPORT_POLICY, "0.0.0.0/0")
                .await
                .map_err(init_error)?;
        }

        let backend_name = match &self.common.backend_name {
            Some(n) => n.clone(),
            None => format!("{}{}", self.cfg.variant.default_name_prefix(), data_lif),
        };
        Ok(Discovered {
            svm,
            ontapi,
            aggregates,
            data_lif,
            iscsi_portals,
            iqn,
            backend_name,
        })
    }

    /// The only data SVM these credentials see.
    async fn derive_svm(&self) -> DriverResult<String> {
        let q = Node::new("vserver-info").with_leaf("vserver-type", "data");
        let records = self
            .client
            .iter("vserver-get-iter", Some(q), None, None)
            .await
            .map_err(init_error)?;
        let names: BTreeSet<&str> = records
            .iter()
            .filter(|r| matches!(r.str_at("vserver-type"), "data" | ""))
            .map(|r| r.str_at("vserver-name"))
            .collect();
        match names.len() {
            1 => Ok(names.into_iter().next().unwrap_or_default().to_string()),
            0 => Err(DriverError::Invalid(
                "cannot derive the SVM: the credentials see no data SVM; set svm".into(),
            )),
            n => Err(DriverError::Invalid(format!(
                "cannot derive the SVM: the credentials see {n} data SVMs; set svm"
            ))),
        }
    }

    /// Addresses of the SVM's data LIFs that are up and serve `protocol`.
    async fn data_lifs(&self, svm: &str, protocol: &str) -> DriverResult<Vec<String>> {
        let records = self
            .client
            .iter(
                "net-interface-get-iter",
                Some(Node::new("net-interface-info")),
                None,
                Some(svm),
            )
            .await
            .map_err(init_error)?;
        let lifs: Vec<String> = records
            .iter()
            .filter(|r| {
                let vs = r.str_at("vserver");
                (vs.is_empty() || vs == svm)
                    && r.str_at("operational-status") == "up"
                    && r.list_at("data-protocols").iter().any(|p| p == protocol)
            })
            .map(|r| r.str_at("address").to_string())
            .collect();
        if lifs.is_empty() {
            return Err(DriverError::Invalid(format!(
                "SVM {svm}: no data LIFs meet the provided criteria (protocol {protocol}, up)"
            )));
        }
        Ok(lifs)
    }

    fn pools(&self, d: &Discovered) -> (Vec<PoolInfo>, BTreeMap<String, u64>) {
        let v = self.cfg.variant;
        let backend_type = Offer::Strings(BTreeSet::from([v.driver_name().to_string()]));
        if v == Variant::NasFlexgroup {
            let mut offers = BTreeMap::new();
            offers.insert("backendType".to_string(), backend_type);
            offers.insert("snapshots".to_string(), Offer::Bool(true));
            offers.insert("clones".to_string(), Offer::Bool(false));
            let nve = d.ontapi >= ENCRYPTION_ONTAPI && d.aggregates.iter().any(|a| a.nve_capable);
            offers.insert("encryption".to_string(), Offer::Bool(nve));
            let free = d.aggregates.iter().map(|a| a.available).sum();
            let pool = PoolInfo {
                name: d.svm.clone(),
                offers,
                total_bytes: None,
            };
            return (vec![pool], BTreeMap::from([(d.svm.clone(), free)]));
        }
        let features = v != Variant::NasEconomy;
        let mut pools = Vec::new();
        let mut free = BTreeMap::new();
        for a in &d.aggregates {
            let mut offers = BTreeMap::new();
            offers.insert("backendType".to_string(), backend_type.clone());
            offers.insert("snapshots".to_string(), Offer::Bool(features));
            offers.insert("clones".to_string(), Offer::Bool(features));
            offers.insert(
                "encryption".to_string(),
                Offer::Bool(d.ontapi >= ENCRYPTION_ONTAPI),
            );
            offers.insert(
                "provisioningType".to_string(),
                Offer::strings(["thick", "thin"]),
            );
            if let Some(m) = &a.media {
                offers.insert("media".to_string(), Offer::strings([m.as_str()]));
            }
            pools.push(PoolInfo {
                name: a.name.clone(),
                offers,
                total_bytes: None,
            });
            free.insert(a.name.clone(), a.available);
        }
        (pools, free)
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
        if size < MIN_VOLUME_BYTES {
            return Err(DriverError::Invalid(format!(
                "requested volume size ({size} bytes) is too small; the minimum volume size is \
                 {MIN_VOLUME_BYTES} bytes (20 MiB)"
            )));
        }
        Ok(())
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

/// The array-side name (trident-compat §4.8): `<prefix>-<name>` (bare name for an empty
/// prefix), then `-` and `.` become `_` and `__` collapses to `_` (one pass).
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

/// Errors while contacting the array at start-up: transport problems stay retryable.
fn init_error(e: ZapiError) -> DriverError {
    e.into_driver()
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
            "svm": svm,
        })
    }

    fn internal_name(&self, volume_name: &str) -> String {
        ontap_internal_name(&self.cfg.prefix, volume_name)
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
            Variant::Nas | Variant::San => nas::clone(self, &d, req).await,
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
        nas::create_snapshot(self, &d, internal_name, snapshot).await
    }

    async fn list_snapshots(&self, internal_name: &str) -> DriverResult<Vec<SnapshotInfo>> {
        if self.cfg.variant == Variant::NasEconomy {
            return Err(self.unsupported("snapshots"));
        }
        let d = self.ctx().await?;
        nas::list_snapshots(self, &d, internal_name).await
    }

    async fn delete_snapshot(&self, internal_name: &str, snapshot: &str) -> DriverResult<()> {
        if self.cfg.variant == Variant::NasEconomy {
            return Err(self.unsupported("snapshots"));
        }
        let d = self.ctx().await?;
        self.client
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
