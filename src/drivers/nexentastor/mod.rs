//! The `nexentastor-iscsi` driver: iSCSI block volumes (zvols) on NexentaStor 5 appliances
//! (or HA pairs) over their REST API (spec/wire-protocols.md §4).
//!
//! Files:
//! - `mod.rs`: the driver, discovery (one pool per volume group) and the trait impl.
//! - `publish.rs`: per-host access (a host group per node, a LUN mapping to it).
//! - `volumes.rs`: zvols, LUN mappings (fixed or dynamic targets), snapshots, clones and the
//!   iSCSI access info.
//! - `config.rs`: the backend config (the seed's keys) and the seed's map file.
//! - `client.rs`: sessions, HA failover, job polling, paging and error codes.
//! - `wire.rs`: the typed objects.
//! - `tests.rs`: unit tests (config, map file, names, error classes).
//!
//! Volume groups are read, never created. Pre-provisioned volumes (the seed's
//! `configName:pool/volumeGroup/volume` handle) are left to volume import, which is built for
//! every driver at once (issue 19): this driver adopts only volumes storch planned.

pub mod client;
pub mod config;
pub mod publish;
mod volumes;
pub mod wire;

#[cfg(test)]
mod tests;

use std::collections::BTreeMap;

use async_trait::async_trait;
use serde_json::{Value, json};

use self::client::NefClient;
use self::config::NexentaConfig;
use self::volumes::CLONE_SNAPSHOT_PREFIX;
use self::wire::{VolumeGroup, item};
use super::{
    Attachment, CloneRequest, CommonConfig, CreateRequest, Discovery, DriverError, DriverResult,
    HostAccess, PlannedVolume, PublishContext, SnapshotInfo, StorageDriver, VolumeInfo,
};
use crate::model::{AccessInfo, Offer, PoolInfo, Protocol};

pub use self::config::expand_map;

/// The `storageDriverName`.
pub const DRIVER_NAME: &str = "nexentastor-iscsi";

/// How its volumes attach.
pub const ATTACHMENT: Attachment = Attachment::Iscsi;

/// The base of dynamic target names when the config names no `defaultTarget`.
pub const DEFAULT_DYNAMIC_TARGET: &str = "iqn.2005-07.com.nexenta:01:storch";

/// The base of dynamic target group names when the config names no `defaultTargetGroup`.
pub const DEFAULT_DYNAMIC_TARGET_GROUP: &str = "storch-tg";

/// One NexentaStor backend.
pub struct NexentaDriver {
    cfg: NexentaConfig,
    common: CommonConfig,
    client: NefClient,
    /// Target allocation and LUN mapping take turns (within this process).
    alloc: tokio::sync::Mutex<()>,
}

impl std::fmt::Debug for NexentaDriver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NexentaDriver")
            .field("endpoints", &self.cfg.endpoints)
            .field("credentials", &"<redacted>")
            .finish_non_exhaustive()
    }
}

impl NexentaDriver {
    /// Parses the NexentaStor part of a backend config. Contacts nothing.
    pub fn from_config(doc: &Value, common: &CommonConfig) -> DriverResult<NexentaDriver> {
        let cfg = NexentaConfig::parse(doc)?;
        let client = NefClient::new(
            cfg.endpoints.clone(),
            cfg.username.clone(),
            cfg.password.clone(),
            &cfg.tls,
        )?;
        Ok(NexentaDriver {
            cfg,
            common: common.clone(),
            client,
            alloc: tokio::sync::Mutex::new(()),
        })
    }

    /// Replaces the client's page size and job bound (tests).
    pub fn tune_client(mut self, page_size: usize, job_timeout: std::time::Duration) -> Self {
        self.client = self.client.tuned(page_size, job_timeout);
        self
    }

    pub fn config(&self) -> &NexentaConfig {
        &self.cfg
    }

    /// The endpoint requests go to first (the one that answered last).
    pub fn active_endpoint(&self) -> &str {
        self.client.active_endpoint()
    }

    fn backend_name(&self) -> String {
        self.common
            .backend_name
            .clone()
            .unwrap_or_else(|| self.cfg.default_backend_name())
    }

    /// `GET storage/volumeGroups?path=` of one volume group; missing is an error naming it.
    async fn volume_group(&self, path: &str) -> DriverResult<VolumeGroup> {
        let q = [
            ("path", path.to_string()),
            ("fields", "path,bytesAvailable,bytesUsed".to_string()),
        ];
        let list = self
            .client
            .list("storage/volumeGroups", &q)
            .await
            .map_err(DriverError::from)?;
        for v in list {
            let g: VolumeGroup = item("volume group", v).map_err(DriverError::Other)?;
            if g.path == path {
                return Ok(g);
            }
        }
        let key = if path == self.cfg.defaults.volume_group {
            "defaultVolumeGroup"
        } else {
            "volumeGroups"
        };
        Err(DriverError::Invalid(format!(
            "invalid value for {key}: volume group {path} does not exist on the appliance \
             (storch never creates volume groups)"
        )))
    }

    fn pool(&self, g: &VolumeGroup) -> PoolInfo {
        let mut offers = BTreeMap::new();
        offers.insert("backendType".to_string(), Offer::strings([DRIVER_NAME]));
        offers.insert("snapshots".to_string(), Offer::Bool(true));
        offers.insert("clones".to_string(), Offer::Bool(true));
        offers.insert("encryption".to_string(), Offer::Bool(false));
        offers.insert(
            "provisioningType".to_string(),
            Offer::strings(["thin", "thick"]),
        );
        if let Some(zone) = &self.cfg.zone {
            offers.insert("zone".to_string(), Offer::strings([zone.as_str()]));
        }
        PoolInfo {
            name: g.path.clone(),
            offers,
            total_bytes: Some(g.bytes_available.saturating_add(g.bytes_used)),
        }
    }

    /// The settings of a create: the pool must be one of the backend's volume groups.
    fn settings_for(&self, req: &CreateRequest) -> DriverResult<config::VolumeSettings> {
        if !self.cfg.volume_groups.contains(&req.pool) {
            return Err(DriverError::Invalid(format!(
                "pool {} is not a volume group of this backend",
                req.pool
            )));
        }
        self.cfg.settings(&req.pool, &req.requests)
    }

    /// Maps a new zvol and reports it; on failure deletes it (nothing left behind).
    async fn finish(
        &self,
        path: &str,
        s: &config::VolumeSettings,
        name: &str,
    ) -> DriverResult<VolumeInfo> {
        let mapped = async {
            let m = self.map(path, s).await?;
            let mut access = self.access_of(&m).await?;
            if s.use_chap
                && let Some(secret) = &s.chap_secret
            {
                access.iscsi_username = s.chap_user.clone();
                access.iscsi_initiator_secret = secret.expose().to_string();
            }
            let z = self.zvol(path).await?.ok_or_else(|| {
                DriverError::Other(format!("zvol {path} vanished while being mapped"))
            })?;
            Ok(self.volume_info(&z, access))
        }
        .await;
        if mapped.is_err()
            && let Err(undo) = self.delete_zvol(path).await
        {
            tracing::warn!(volume = %name, error = %undo, "cannot delete the zvol after a failed mapping");
        }
        mapped
    }

    /// The clone's source zvol and the snapshot path it is cloned from (the temporary one
    /// for a clone from a volume).
    async fn clone_source(&self, req: &CloneRequest) -> DriverResult<(String, String)> {
        let src = self.find_or_not_found(&req.source_internal_name).await?;
        let snap = match &req.source_snapshot {
            Some(s) => format!("{}@{s}", src.path),
            None => format!("{}@{CLONE_SNAPSHOT_PREFIX}{}", src.path, req.internal_name),
        };
        Ok((src.path, snap))
    }

    fn vg_of(path: &str) -> &str {
        path.rsplit_once('/').map(|(vg, _)| vg).unwrap_or("")
    }
}

/// The array-side name: the storage prefix (none by default) and the volume name, with
/// characters a ZFS dataset cannot have replaced by `-`.
pub fn nexenta_internal_name(prefix: &str, name: &str) -> String {
    format!("{prefix}{name}")
        .chars()
        .map(|c| {
            if config::dataset_chars(&c.to_string()) {
                c
            } else {
                '-'
            }
        })
        .collect()
}

#[async_trait]
impl StorageDriver for NexentaDriver {
    fn driver_name(&self) -> &'static str {
        DRIVER_NAME
    }

    fn external_config(&self) -> Value {
        let d = &self.cfg.defaults;
        json!({
            "version": 1,
            "storageDriverName": DRIVER_NAME,
            "storagePrefix": self.common.storage_prefix.clone().unwrap_or_default(),
            "restIp": self.cfg.endpoints.join(","),
            "username": self.cfg.username,
            "defaultDataIp": d.data_ip,
            "defaultVolumeGroup": d.volume_group,
            "volumeGroups": self.cfg.volume_groups,
            "defaultTargetGroup": d.target_group,
            "defaultTarget": d.target,
            "defaultHostGroup": d.host_group,
            "sparseVolume": d.sparse,
            "dynamicTargetLunAllocation": d.dynamic,
            "numOfLunsPerTarget": d.luns_per_target,
            "useChapAuth": d.use_chap,
            "chapUser": d.chap_user,
            "zone": self.cfg.zone.clone().unwrap_or_default(),
            "insecureSkipVerify": !self.cfg.tls.verify,
            "iSCSITimeout": self.cfg.iscsi_timeout,
            "mountPointPermissions": self.cfg.mount_point_permissions,
        })
    }

    fn internal_name(&self, volume_name: &str) -> String {
        nexenta_internal_name(
            self.common.storage_prefix.as_deref().unwrap_or(""),
            volume_name,
        )
    }

    /// A zvol of any size: the appliance rounds it up to whole 8 KiB blocks.
    fn size_limits(&self) -> super::SizeLimits {
        super::SizeLimits::ANY
    }

    async fn discover(&self) -> DriverResult<Discovery> {
        let mut pools = Vec::new();
        let mut free_bytes = BTreeMap::new();
        for vg in &self.cfg.volume_groups {
            let g = self.volume_group(vg).await?;
            free_bytes.insert(g.path.clone(), g.bytes_available);
            pools.push(self.pool(&g));
        }
        Ok(Discovery {
            backend_name: self.backend_name(),
            protocol: Protocol::Block,
            pools,
            free_bytes,
        })
    }

    async fn create(&self, req: &CreateRequest) -> DriverResult<VolumeInfo> {
        let s = self.settings_for(req)?;
        let path = format!("{}/{}", req.pool, req.internal_name);
        self.create_zvol(&path, req.size_bytes, s.sparse).await?;
        self.finish(&path, &s, &req.internal_name).await
    }

    async fn clone_volume(&self, req: &CloneRequest) -> DriverResult<VolumeInfo> {
        let (src, snap) = self.clone_source(req).await?;
        let vg = Self::vg_of(&src).to_string();
        let path = format!("{vg}/{}", req.internal_name);
        let temporary = req.source_snapshot.is_none();
        if temporary {
            self.make_snapshot(&snap, true).await?;
        } else if self.snapshot(&snap).await?.is_none() {
            return Err(DriverError::NotFound(format!(
                "snapshot {} of volume {} not found",
                req.source_snapshot.as_deref().unwrap_or_default(),
                req.source_internal_name
            )));
        }
        let p = format!("storage/snapshots/{}/clone", wire::escape(&snap));
        if let Err(e) = self.client.post(&p, &json!({"targetPath": path})).await {
            if temporary && let Err(undo) = self.remove_snapshot(&snap).await {
                tracing::warn!(snapshot = %snap, error = %undo, "cannot delete the clone's snapshot");
            }
            return Err(e.into());
        }
        let s = self.cfg.settings(&vg, &BTreeMap::new())?;
        let info = self.finish(&path, &s, &req.internal_name).await;
        if info.is_err() && temporary {
            self.drop_clone_snapshot(&vg, &req.internal_name).await;
        }
        info
    }

    async fn get(&self, internal_name: &str) -> DriverResult<Option<VolumeInfo>> {
        match self.find(internal_name).await? {
            Some(z) => Ok(Some(self.info(&z).await?)),
            None => Ok(None),
        }
    }

    async fn adopt(&self, planned: &PlannedVolume) -> DriverResult<Option<VolumeInfo>> {
        let name = planned.internal_name();
        let (path, s) = match planned {
            PlannedVolume::Create(req) => {
                let s = self.settings_for(req)?;
                let path = format!("{}/{}", req.pool, req.internal_name);
                let Some(z) = self.zvol(&path).await? else {
                    return Ok(None);
                };
                let planned = volumes::rounded(req.size_bytes);
                if z.volume_size != planned {
                    return Err(DriverError::Conflict(format!(
                        "volume {name} exists but its volumeSize is {}, planned {planned}; it is \
                         not adopted and left as it is",
                        z.volume_size
                    )));
                }
                if let Some(sparse) = z.sparse_volume
                    && sparse != s.sparse
                {
                    return Err(DriverError::Conflict(format!(
                        "volume {name} exists but its sparseVolume is {sparse}, planned {}; it \
                         is not adopted and left as it is",
                        s.sparse
                    )));
                }
                (path, s)
            }
            PlannedVolume::Clone(req) => {
                let (src, snap) = match self.clone_source(req).await {
                    Ok(x) => x,
                    Err(DriverError::NotFound(_)) => {
                        return match self.find(name).await? {
                            None => Ok(None),
                            Some(_) => Err(DriverError::Conflict(format!(
                                "volume {name} exists but its clone source {} is gone, so it \
                                 cannot be checked against the plan; it is not adopted and left \
                                 as it is",
                                req.source_internal_name
                            ))),
                        };
                    }
                    Err(e) => return Err(e),
                };
                let vg = Self::vg_of(&src).to_string();
                let path = format!("{vg}/{name}");
                if self.zvol(&path).await?.is_none() {
                    return Ok(None);
                }
                let is_clone = self
                    .snapshot(&snap)
                    .await?
                    .is_some_and(|s| s.clones.iter().any(|c| c == &path));
                if !is_clone {
                    return Err(DriverError::Conflict(format!(
                        "volume {name} exists but is not a clone of {snap}; it is not adopted \
                         and left as it is"
                    )));
                }
                (path, self.cfg.settings(&vg, &BTreeMap::new())?)
            }
        };
        self.finish(&path, &s, name).await.map(Some)
    }

    async fn destroy(&self, internal_name: &str) -> DriverResult<()> {
        let Some(z) = self.find(internal_name).await? else {
            return Ok(());
        };
        self.delete_zvol(&z.path).await?;
        self.drop_clone_snapshot(Self::vg_of(&z.path), internal_name)
            .await;
        Ok(())
    }

    async fn resize(&self, internal_name: &str, size_bytes: u64) -> DriverResult<()> {
        let z = self.find_or_not_found(internal_name).await?;
        self.resize_zvol(&z, size_bytes).await
    }

    async fn create_snapshot(
        &self,
        internal_name: &str,
        snapshot: &str,
    ) -> DriverResult<SnapshotInfo> {
        let z = self.find_or_not_found(internal_name).await?;
        if !config::dataset_chars(snapshot) || snapshot.is_empty() {
            return Err(DriverError::Invalid(format!(
                "invalid snapshot name {snapshot:?}: letters, digits, '-', '_', '.', ':' only"
            )));
        }
        let s = self
            .make_snapshot(&format!("{}@{snapshot}", z.path), false)
            .await?;
        Ok(self.snapshot_info(internal_name, &s, z.volume_size))
    }

    async fn list_snapshots(&self, internal_name: &str) -> DriverResult<Vec<SnapshotInfo>> {
        let z = self.find_or_not_found(internal_name).await?;
        let snaps = self.snapshots_of(&z.path).await?;
        Ok(snaps
            .iter()
            .filter(|s| !s.short_name().starts_with(CLONE_SNAPSHOT_PREFIX))
            .map(|s| self.snapshot_info(internal_name, s, z.volume_size))
            .collect())
    }

    async fn delete_snapshot(&self, internal_name: &str, snapshot: &str) -> DriverResult<()> {
        let Some(z) = self.find(internal_name).await? else {
            return Ok(());
        };
        self.remove_snapshot(&format!("{}@{snapshot}", z.path))
            .await
    }

    async fn list_volumes(&self) -> DriverResult<Vec<VolumeInfo>> {
        let prefix = self.common.storage_prefix.clone().unwrap_or_default();
        let mut out = Vec::new();
        for vg in &self.cfg.volume_groups {
            let q = [
                ("parent", vg.clone()),
                ("fields", "path,volumeSize".to_string()),
            ];
            let list = self.client.list("storage/volumes", &q).await?;
            for v in list {
                let z: wire::Zvol = item("volume", v).map_err(DriverError::Other)?;
                let ours = z
                    .path
                    .strip_prefix(vg.as_str())
                    .and_then(|rest| rest.strip_prefix('/'))
                    .is_some_and(|name| !name.contains('/') && name.starts_with(&prefix));
                if ours {
                    out.push(self.info(&z).await?);
                }
            }
        }
        Ok(out)
    }

    fn needs_publish(&self) -> bool {
        true
    }

    async fn publish(
        &self,
        internal_name: &str,
        host: &HostAccess,
    ) -> DriverResult<PublishContext> {
        self.grant(internal_name, host).await
    }

    async fn unpublish(&self, internal_name: &str, host: &HostAccess) -> DriverResult<()> {
        self.revoke(internal_name, host).await
    }

    async fn access_info(&self, internal_name: &str) -> DriverResult<AccessInfo> {
        let z = self.find_or_not_found(internal_name).await?;
        match self.mappings_of(&z.path).await?.into_iter().next() {
            Some(m) => self.access_of(&m).await,
            None => Err(DriverError::NotFound(format!(
                "volume {internal_name} has no LUN mapping"
            ))),
        }
    }
}
