//! The `solidfire-san` driver over the Element JSON-RPC API (NetApp SolidFire).
//!
//! Files:
//! - `mod.rs`: the driver, discovery (tenant account, capacity, default QoS, access groups,
//!   one pool per QoS type) and the trait impl.
//! - `volumes.rs`: volume, snapshot and clone operations and the iSCSI access info.
//! - `publish.rs`: per-host access (publish, unpublish) through volume access groups, and
//!   when a backend needs it.
//! - `config.rs`: the backend config (Trident's file, Go field case).
//! - `client.rs`: the JSON-RPC transport, Element error classes, paging, async polling and
//!   the typed calls.
//! - `wire.rs`: the typed params and results.
//! - `tests.rs`: unit tests (config, names, error classes).
//!
//! What is where on the array: one Element volume per storch volume, in the tenant account
//! (`TenantName`, created when missing), named by [`solidfire_internal_name`], with the QoS of
//! its pool's type, and attributes recording storch's name and that storch made it. Volumes
//! attach over iSCSI: the volume's IQN on the SVIP portal, LUN 0, through the configured
//! volume access groups or CHAP with the account's secrets; with access groups, a publish
//! puts the host's initiator in a group with the volume (`publish.rs`).

pub mod client;
pub mod config;
pub mod publish;
mod volumes;
pub mod wire;

#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use async_trait::async_trait;
use serde_json::{Value, json};

use self::client::ElementClient;
use self::config::{DEFAULT_POOL, DEFAULT_POOL_IOPS, SolidFireConfig};
use self::wire::{Account, Qos};
use super::locks::NameLocks;
use super::{
    Attachment, CloneRequest, CommonConfig, CreateRequest, Discovery, DriverError, DriverResult,
    HostAccess, PlannedVolume, PublishContext, SnapshotInfo, StorageDriver, VolumeInfo,
};
use crate::model::{AccessInfo, Offer, PoolInfo, Protocol};

pub use self::config::{MAX_VOLUME_BYTES, MIN_VOLUME_BYTES};

/// The `storageDriverName`.
pub const DRIVER_NAME: &str = "solidfire-san";

/// How its volumes attach.
pub const ATTACHMENT: Attachment = Attachment::Iscsi;

/// The access group Trident looks for when none is configured and CHAP is off.
pub const DEFAULT_ACCESS_GROUP: &str = "trident";

/// What discovery learnt from the cluster.
#[derive(Debug, Clone)]
pub struct Discovered {
    pub backend_name: String,
    pub account: Account,
    /// The volume access groups volumes are added to (empty with CHAP).
    pub access_groups: Vec<i64>,
    pub use_chap: bool,
    /// The cluster's default QoS, when the cluster has `GetDefaultQoS`.
    pub default_qos: Option<Qos>,
    /// The nodes' serial numbers (shown as `serialNumbers`).
    pub serial_numbers: Vec<String>,
}

/// One SolidFire backend.
pub struct SolidFireDriver {
    cfg: SolidFireConfig,
    common: CommonConfig,
    client: ElementClient,
    discovered: RwLock<Option<Arc<Discovered>>>,
    /// Element names are not unique: creates, clones and destroys of one name take turns
    /// (within this process), so that a concurrent create finds the first one's volume.
    names: NameLocks,
}

impl std::fmt::Debug for SolidFireDriver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SolidFireDriver")
            .field("endpoint", &self.cfg.url)
            .field("tenant", &self.cfg.tenant_name)
            .field("credentials", &"<redacted>")
            .finish_non_exhaustive()
    }
}

/// The array-side name (docs/trident-contract.md#internal-names): no prefix; `_` and `.`
/// become `-`, then `--` collapses to `-` (one pass).
pub fn solidfire_internal_name(name: &str) -> String {
    name.replace(['_', '.'], "-").replace("--", "-")
}

impl SolidFireDriver {
    /// Parses the SolidFire part of a backend config. Contacts nothing.
    pub fn from_config(doc: &Value, common: &CommonConfig) -> DriverResult<SolidFireDriver> {
        let cfg = SolidFireConfig::parse(doc, common)?;
        let client = ElementClient::new(&cfg)?;
        Ok(SolidFireDriver {
            cfg,
            common: common.clone(),
            client,
            discovered: RwLock::new(None),
            names: NameLocks::default(),
        })
    }

    /// Replaces the client's retry policy and page size (tests).
    pub fn tune_client(mut self, retry: crate::net::RetryPolicy, page_size: u32) -> Self {
        self.client = self.client.with_retry(retry).with_page_size(page_size);
        self
    }

    pub fn config(&self) -> &SolidFireConfig {
        &self.cfg
    }

    /// The discovery, from cache or from the cluster.
    async fn ctx(&self) -> DriverResult<Arc<Discovered>> {
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

    async fn run_discovery(&self) -> DriverResult<Arc<Discovered>> {
        let account = self.tenant().await?;
        let default_qos = self.client.default_qos().await?;
        let (access_groups, use_chap) = self.access_control().await?;
        let serial_numbers = self.client.serial_numbers().await?;
        let d = Arc::new(Discovered {
            backend_name: self
                .common
                .backend_name
                .clone()
                .unwrap_or_else(|| self.cfg.default_backend_name()),
            account,
            access_groups,
            use_chap,
            default_qos,
            serial_numbers,
        });
        *self.discovered.write().unwrap_or_else(|e| e.into_inner()) = Some(d.clone());
        Ok(d)
    }

    /// The tenant account, created when missing (`GetAccountByName`, `AddAccount`).
    async fn tenant(&self) -> DriverResult<Account> {
        let name = &self.cfg.tenant_name;
        if let Some(a) = self.client.account_by_name(name).await? {
            return Ok(a);
        }
        tracing::info!(tenant = %name, "creating the SolidFire tenant account");
        let id = match self.client.add_account(name).await {
            Ok(id) => id,
            // Created meanwhile by someone else: read it.
            Err(e) if e.is_name(&["xDuplicateUsername"]) => {
                return self
                    .client
                    .account_by_name(name)
                    .await?
                    .ok_or_else(|| DriverError::Other(format!("{e}")));
            }
            Err(e) => return Err(e.into()),
        };
        Ok(self.client.account_by_id(id).await?)
    }

    /// Which access groups volumes join, or CHAP (Trident's rules): configured groups must
    /// exist; with none and CHAP off, the group named `trident`, else CHAP.
    async fn access_control(&self) -> DriverResult<(Vec<i64>, bool)> {
        if self.cfg.use_chap {
            return Ok((Vec::new(), true));
        }
        let groups = self.client.access_groups().await?;
        if !self.cfg.access_groups.is_empty() {
            for id in &self.cfg.access_groups {
                if !groups.iter().any(|g| g.id == *id) {
                    return Err(DriverError::Invalid(format!(
                        "invalid value for AccessGroups: volume access group {id} does not exist \
                         on the cluster"
                    )));
                }
            }
            return Ok((self.cfg.access_groups.clone(), false));
        }
        match groups.iter().find(|g| g.name == DEFAULT_ACCESS_GROUP) {
            Some(g) => Ok((vec![g.id], false)),
            None => {
                tracing::info!(
                    "no AccessGroups configured and no access group named trident: using CHAP"
                );
                Ok((Vec::new(), true))
            }
        }
    }

    /// The pools: one per QoS type (pool name = type name), or the default pool.
    fn pools(&self) -> Vec<PoolInfo> {
        let offers = |min: i64, max: i64| {
            let mut o = BTreeMap::new();
            o.insert("backendType".to_string(), Offer::strings([DRIVER_NAME]));
            o.insert("media".to_string(), Offer::strings(["ssd"]));
            o.insert("IOPS".to_string(), Offer::Int { min, max });
            o.insert("snapshots".to_string(), Offer::Bool(true));
            o.insert("clones".to_string(), Offer::Bool(true));
            o.insert("encryption".to_string(), Offer::Bool(false));
            o.insert("provisioningType".to_string(), Offer::strings(["thin"]));
            o
        };
        match &self.cfg.types {
            Some(types) => types
                .iter()
                .map(|t| PoolInfo {
                    name: t.name.clone(),
                    offers: offers(t.qos.min_iops, t.qos.max_iops),
                    total_bytes: None,
                })
                .collect(),
            None => vec![PoolInfo {
                name: DEFAULT_POOL.to_string(),
                offers: offers(DEFAULT_POOL_IOPS.0, DEFAULT_POOL_IOPS.1),
                total_bytes: None,
            }],
        }
    }

    /// The QoS a volume in `pool` gets: the volume config's `qos` string, else its `type`,
    /// else the pool's type; the default pool uses the cluster's default QoS.
    fn plan_qos(
        &self,
        d: &Discovered,
        pool: &str,
        config: &crate::model::VolumeConfig,
    ) -> DriverResult<Option<Qos>> {
        if !config.qos.trim().is_empty() {
            return Qos::parse_triple(&config.qos).map(Some).ok_or_else(|| {
                DriverError::Invalid(
                    "invalid value for qos: expected minIOPS,maxIOPS,burstIOPS with \
                     min <= max <= burst"
                        .into(),
                )
            });
        }
        let type_name = match config.qos_type.trim() {
            "" => pool,
            t => t,
        };
        if let Some(t) = self.cfg.qos_type(type_name) {
            return Ok(Some(t.qos));
        }
        if self.cfg.types.is_none() && type_name == DEFAULT_POOL {
            return Ok(d.default_qos);
        }
        if config.qos_type.trim().is_empty() {
            Err(DriverError::Invalid(format!(
                "pool {pool} is not a QoS type of this backend"
            )))
        } else {
            Err(DriverError::Invalid(format!(
                "invalid value for type: specified type {type_name} not found"
            )))
        }
    }

    fn check_size(&self, size: u64) -> DriverResult<()> {
        self.size_limits()
            .check(size)
            .map_err(|e| match self.cfg.limit_volume_size {
                Some(l) if size > l && l < MAX_VOLUME_BYTES => {
                    DriverError::Invalid(format!("{e} (the backend's limitVolumeSize)"))
                }
                _ => DriverError::Invalid(e),
            })
    }

    /// Free bytes the cluster can still provision.
    async fn free_bytes(&self) -> DriverResult<u64> {
        let c = self.client.cluster_capacity().await?;
        Ok(c.max_provisioned_space.saturating_sub(c.provisioned_space))
    }
}

#[async_trait]
impl StorageDriver for SolidFireDriver {
    fn driver_name(&self) -> &'static str {
        DRIVER_NAME
    }

    fn external_config(&self) -> Value {
        let types: Vec<Value> = self
            .cfg
            .types
            .iter()
            .flatten()
            .map(|t| json!({"Type": t.name, "QOS": t.qos}))
            .collect();
        let d = self
            .discovered
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let (groups, chap, serials) = match &d {
            Some(d) => (
                d.access_groups.clone(),
                d.use_chap,
                d.serial_numbers.clone(),
            ),
            None => (
                self.cfg.access_groups.clone(),
                self.cfg.use_chap,
                Vec::new(),
            ),
        };
        json!({
            "version": 1,
            "storageDriverName": DRIVER_NAME,
            "storagePrefix": "",
            "serialNumbers": serials,
            "TenantName": self.cfg.tenant_name,
            "EndPoint": self.cfg.url,
            "SVIP": self.cfg.svip,
            "InitiatorIFace": self.cfg.initiator_iface,
            "Types": types,
            "AccessGroups": groups,
            "UseCHAP": chap,
            "DefaultBlockSize": self.cfg.default_block_size,
        })
    }

    fn internal_name(&self, volume_name: &str) -> String {
        solidfire_internal_name(volume_name)
    }

    /// Element's limits (1 GB to 16 TiB), the maximum lowered by `limitVolumeSize`.
    fn size_limits(&self) -> super::SizeLimits {
        let max = self
            .cfg
            .limit_volume_size
            .map_or(MAX_VOLUME_BYTES, |l| l.min(MAX_VOLUME_BYTES));
        super::SizeLimits {
            min_bytes: MIN_VOLUME_BYTES,
            max_bytes: Some(max),
        }
    }

    async fn discover(&self) -> DriverResult<Discovery> {
        let d = self.run_discovery().await?;
        let free = self.free_bytes().await?;
        let pools = self.pools();
        let free_bytes = pools.iter().map(|p| (p.name.clone(), free)).collect();
        Ok(Discovery {
            backend_name: d.backend_name.clone(),
            protocol: Protocol::Block,
            pools,
            free_bytes,
        })
    }

    async fn create(&self, req: &CreateRequest) -> DriverResult<VolumeInfo> {
        let d = self.ctx().await?;
        let _turn = self.names.lock(&req.internal_name).await;
        volumes::create(self, &d, req).await
    }

    async fn clone_volume(&self, req: &CloneRequest) -> DriverResult<VolumeInfo> {
        let d = self.ctx().await?;
        let _turn = self.names.lock(&req.internal_name).await;
        volumes::clone(self, &d, req).await
    }

    async fn get(&self, internal_name: &str) -> DriverResult<Option<VolumeInfo>> {
        let d = self.ctx().await?;
        let found = volumes::find(self, &d, internal_name).await?;
        Ok(found.map(|v| self.info(&d, &v)))
    }

    async fn adopt(&self, planned: &PlannedVolume) -> DriverResult<Option<VolumeInfo>> {
        let d = self.ctx().await?;
        let name = planned.internal_name();
        let _turn = self.names.lock(name).await;
        let plan = match planned {
            PlannedVolume::Create(req) => volumes::Plan::create(self, &d, req)?,
            PlannedVolume::Clone(req) => match volumes::clone_plan(self, &d, req).await? {
                Some(plan) => plan,
                // Without its source a clone cannot be compared: only a lookup says whether
                // one was made (never adopted blindly).
                None => {
                    return match volumes::find(self, &d, name).await? {
                        None => Ok(None),
                        Some(v) => Err(DriverError::Conflict(format!(
                            "volume {name} exists (volume {}, made by storch) but its clone \
                             source {} is gone, so it cannot be checked against the plan; it \
                             is not adopted and left as it is",
                            v.volume_id, req.source_internal_name
                        ))),
                    };
                }
            },
        };
        volumes::adopt(self, &d, name, &plan).await
    }

    async fn destroy(&self, internal_name: &str) -> DriverResult<()> {
        let d = self.ctx().await?;
        let _turn = self.names.lock(internal_name).await;
        volumes::destroy(self, &d, internal_name).await
    }

    async fn resize(&self, internal_name: &str, size_bytes: u64) -> DriverResult<()> {
        let d = self.ctx().await?;
        volumes::resize(self, &d, internal_name, size_bytes).await
    }

    async fn create_snapshot(
        &self,
        internal_name: &str,
        snapshot: &str,
    ) -> DriverResult<SnapshotInfo> {
        let d = self.ctx().await?;
        volumes::create_snapshot(self, &d, internal_name, snapshot).await
    }

    async fn list_snapshots(&self, internal_name: &str) -> DriverResult<Vec<SnapshotInfo>> {
        let d = self.ctx().await?;
        let v = volumes::find_or_not_found(self, &d, internal_name).await?;
        let snaps = self.client.snapshots(v.volume_id).await?;
        Ok(snaps
            .iter()
            .map(|s| volumes::snapshot_info(internal_name, s))
            .collect())
    }

    async fn delete_snapshot(&self, internal_name: &str, snapshot: &str) -> DriverResult<()> {
        let d = self.ctx().await?;
        let Some(v) = volumes::find(self, &d, internal_name).await? else {
            return Ok(());
        };
        let snaps = self.client.snapshots(v.volume_id).await?;
        for s in snaps.iter().filter(|s| s.name == snapshot) {
            self.client.delete_snapshot(s.snapshot_id).await?;
        }
        Ok(())
    }

    async fn list_volumes(&self) -> DriverResult<Vec<VolumeInfo>> {
        let d = self.ctx().await?;
        let all = self.client.volumes(d.account.account_id).await?;
        Ok(all
            .iter()
            .filter(|v| v.is_active() && volumes::is_ours(v))
            .map(|v| self.info(&d, v))
            .collect())
    }

    async fn access_info(&self, internal_name: &str) -> DriverResult<AccessInfo> {
        let d = self.ctx().await?;
        let v = volumes::find_or_not_found(self, &d, internal_name).await?;
        Ok(self.info(&d, &v).access)
    }

    /// With volume access groups, yes; over CHAP, no (see `publish.rs`). Before discovery
    /// the config decides (`UseCHAP`); discovery may still fall back to CHAP when no group is
    /// configured and none is named `trident`.
    fn needs_publish(&self) -> bool {
        match &*self.discovered.read().unwrap_or_else(|e| e.into_inner()) {
            Some(d) => !d.use_chap,
            None => !self.cfg.use_chap,
        }
    }

    async fn publish(
        &self,
        internal_name: &str,
        host: &HostAccess,
    ) -> DriverResult<PublishContext> {
        let d = self.ctx().await?;
        publish::publish(self, &d, internal_name, host).await
    }

    async fn unpublish(&self, internal_name: &str, host: &HostAccess) -> DriverResult<()> {
        let d = self.ctx().await?;
        publish::unpublish(self, &d, internal_name, host).await
    }
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}
