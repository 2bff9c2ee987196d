//! The `eseries-iscsi` driver over the SANtricity Web Services Proxy's REST API (NetApp
//! E-Series).
//!
//! Files:
//! - `mod.rs`: the driver, discovery (registration, array status, pools, host type, host
//!   group, iSCSI target, what the array can do beyond Trident) and the trait impl, with the
//!   options it runs the conformance suite with ([`conformance_options`]).
//! - `volumes.rs`: create (with the proxy's "422 but created" habit), mapping, destroy,
//!   resize (expand), clone (volume copy job) and the access info.
//! - `publish.rs`: per-host access (publish, unpublish): a host per node and the volume's
//!   mapping moved to it.
//! - `config.rs`: the backend config (Trident's file; unknown keys refused).
//! - `client.rs`: the HTTP transport, SANtricity error bodies and their classes.
//! - `wire.rs`: the request bodies and objects.
//! - `tests.rs`: unit tests (config, names, error classes, offers).
//!
//! What is where on the array: the proxy knows the array by its controller addresses (the
//! driver registers it, or finds it registered, and keeps the proxy's array password
//! current). One thick volume per storch volume, in a pool whose label matches
//! `poolNameSearchPattern`, named [`eseries_internal_name`], with meta tags recording that
//! storch made it and storch's name for it. Each volume is mapped to the host group
//! `accessGroupName` (created when missing) with the LUN the array picks; hosts attach over
//! iSCSI to the target's portal on `hostDataIP`. A publish to a node outside that group moves
//! the volume's mapping to the node's host (`publish.rs`).

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
use base64::Engine;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use self::client::{ProxyClient, ProxyError, system_path};
use self::config::{EseriesConfig, MIN_VOLUME_BYTES};
use self::wire::{
    CreateHostGroup, Host, HostGroup, HostType, Pool, StorageSystem, StoredPassword, TargetSettings,
};
use super::conformance::{ConformanceOptions, Support};
use super::locks::NameLocks;
use super::{
    Attachment, CloneRequest, CommonConfig, CreateRequest, Discovery, DriverError, DriverResult,
    HostAccess, PublishContext, SnapshotInfo, StorageDriver, VolumeInfo,
};
use crate::model::{AccessInfo, Offer, PoolInfo, Protocol};

/// The `storageDriverName`.
pub const DRIVER_NAME: &str = "eseries-iscsi";

/// How its volumes attach.
pub const ATTACHMENT: Attachment = Attachment::Iscsi;

/// The iSCSI port when the array's portal does not say.
const ISCSI_PORT: u16 = 3260;

/// What discovery learnt from the proxy and the array.
#[derive(Debug, Clone)]
pub struct Discovered {
    pub backend_name: String,
    /// The proxy's id for the array.
    pub system_id: String,
    pub serial_numbers: Vec<String>,
    /// Every pool of the array: reference → label (volumes name their pool by reference).
    pub pool_labels: BTreeMap<String, String>,
    /// This backend's pools (online, label matching the pattern), by label.
    pub pools: BTreeMap<String, Pool>,
    pub host_group_ref: String,
    pub host_type_index: i64,
    pub target_iqn: String,
    /// `hostDataIP:port`.
    pub portal: String,
    /// The array has volume copy jobs (clones).
    pub copy_jobs: bool,
}

impl Discovered {
    /// The path of an array-scoped resource.
    pub fn path(&self, rest: &str) -> String {
        system_path(&self.system_id, rest)
    }
}

/// One E-Series backend.
pub struct EseriesDriver {
    cfg: EseriesConfig,
    common: CommonConfig,
    client: ProxyClient,
    discovered: RwLock<Option<Arc<Discovered>>>,
    /// The array answers a duplicate label with the same 422 as its "created anyway" habit:
    /// creates, clones and destroys of one name take turns (within this process), so a
    /// concurrent create finds the first one's volume instead of adopting it.
    names: NameLocks,
}

impl std::fmt::Debug for EseriesDriver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EseriesDriver")
            .field("proxy", &self.cfg.base_url)
            .field(
                "controllers",
                &[&self.cfg.controller_a, &self.cfg.controller_b],
            )
            .field("credentials", &"<redacted>")
            .finish_non_exhaustive()
    }
}

/// The array-side name (docs/trident-contract.md#internal-names): the storage prefix and 22
/// characters of unpadded base64url of a UUID, as Trident names E-Series volumes, at most 30
/// characters (the array's limit). Trident draws a random UUID per volume; storch derives
/// it (SHA-256 of the volume name, marked as a version 8 UUID) because it recomputes the name
/// when it recovers an interrupted create or delete.
pub fn eseries_internal_name(prefix: &str, volume_name: &str) -> String {
    let digest = Sha256::digest(format!("storch/eseries-iscsi/{volume_name}").as_bytes());
    let mut id = [0u8; 16];
    id.copy_from_slice(&digest[..16]);
    id[6] = (id[6] & 0x0f) | 0x80; // version 8: custom
    id[8] = (id[8] & 0x3f) | 0x80; // RFC 4122 variant
    let encoded = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(id);
    format!("{prefix}{encoded}")
}

/// The conformance options this driver passes with: 1 MiB minimum, thick pools with exact
/// free space, no snapshots, and clones and resize only where the array can.
pub fn conformance_options(size_bytes: u64) -> ConformanceOptions {
    ConformanceOptions {
        size_bytes,
        min_size_bytes: Some(MIN_VOLUME_BYTES),
        snapshots: Support::Optional,
        clones: Support::Optional,
        resize: Support::Optional,
        ..ConformanceOptions::default()
    }
}

impl EseriesDriver {
    /// Parses the E-Series part of a backend config. Contacts nothing.
    pub fn from_config(doc: &Value, common: &CommonConfig) -> DriverResult<EseriesDriver> {
        let cfg = EseriesConfig::parse(doc, common)?;
        let client = ProxyClient::new(&cfg)?;
        Ok(EseriesDriver {
            cfg,
            common: common.clone(),
            client,
            discovered: RwLock::new(None),
            names: NameLocks::default(),
        })
    }

    /// Replaces the client's retry policy (tests).
    pub fn tune_client(mut self, retry: crate::net::RetryPolicy) -> Self {
        self.client = self.client.with_retry(retry);
        self
    }

    pub fn config(&self) -> &EseriesConfig {
        &self.cfg
    }

    /// The discovery, from cache or from the array.
    async fn ctx(&self) -> DriverResult<Arc<Discovered>> {
        let cached = self
            .discovered
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        match cached {
            Some(d) => Ok(d),
            None => self.run_discovery().await,
        }
    }

    async fn run_discovery(&self) -> DriverResult<Arc<Discovered>> {
        let system = self.register().await?;
        let d0 = Discovered {
            backend_name: self
                .common
                .backend_name
                .clone()
                .unwrap_or_else(|| self.cfg.default_backend_name()),
            system_id: system.id.clone(),
            serial_numbers: Some(system.chassis_serial_number.clone())
                .filter(|s| !s.is_empty())
                .into_iter()
                .collect(),
            pool_labels: BTreeMap::new(),
            pools: BTreeMap::new(),
            host_group_ref: String::new(),
            host_type_index: 0,
            target_iqn: String::new(),
            portal: String::new(),
            copy_jobs: false,
        };
        let mut d = self.read_pools(d0).await?;
        d.host_type_index = self.host_type_index(&d).await?;
        d.host_group_ref = self.host_group(&d).await?;
        self.check_hosts(&d).await?;
        (d.target_iqn, d.portal) = self.target(&d).await?;
        d.copy_jobs = self.has_copy_jobs(&d).await?;
        let d = Arc::new(d);
        *self.discovered.write().unwrap_or_else(|e| e.into_inner()) = Some(d.clone());
        Ok(d)
    }

    /// Registers the array with the proxy by its controllers (or finds it registered),
    /// brings the proxy's array password up to date, and checks the array is reachable.
    async fn register(&self) -> DriverResult<StorageSystem> {
        let mut controllers = vec![self.cfg.controller_a.clone()];
        if self.cfg.controller_b != self.cfg.controller_a {
            controllers.push(self.cfg.controller_b.clone());
        }
        let password = Some(self.cfg.password_array.expose()).filter(|p| !p.is_empty());
        let reg = self.client.register(&controllers, password).await?;
        if reg.id.is_empty() {
            return Err(DriverError::Other(
                "SANtricity POST /storage-systems: the answer has no array id".into(),
            ));
        }
        let path = system_path(&reg.id, "");
        let mut system: StorageSystem = self.client.get(&path).await?;
        if system.password_status == "invalid" {
            let Some(pw) = password else {
                return Err(DriverError::Invalid(format!(
                    "the proxy holds no valid password for array {} (passwordStatus invalid): \
                     set passwordArray",
                    controllers.join(",")
                )));
            };
            // Registered before with another password: give the proxy the configured one.
            tracing::info!(array = %reg.id, "updating the array password the proxy holds");
            let body = StoredPassword {
                stored_password: pw.to_string(),
            };
            self.client.post::<_, Value>(&path, &body).await?;
            system = self.client.get(&path).await?;
            if system.password_status == "invalid" {
                return Err(DriverError::Invalid(format!(
                    "array {} rejects passwordArray (passwordStatus invalid)",
                    controllers.join(",")
                )));
            }
        }
        match system.status.as_str() {
            "offline" | "neverContacted" => Err(DriverError::Unavailable(format!(
                "array {} ({}) is {} for the proxy; check the controllers' addresses and the \
                 network between the proxy and the array",
                controllers.join(","),
                reg.id,
                system.status
            ))),
            status => {
                if status != "optimal" {
                    tracing::warn!(array = %reg.id, status, "the array needs attention");
                }
                if system.id.is_empty() {
                    system.id = reg.id;
                }
                Ok(system)
            }
        }
    }

    /// Every pool's label, and this backend's: online, label matching the pattern.
    async fn read_pools(&self, mut d: Discovered) -> DriverResult<Discovered> {
        let pools: Vec<Pool> = self.client.get(&d.path("/storage-pools")).await?;
        for p in pools {
            d.pool_labels
                .insert(p.reference().to_string(), p.label().to_string());
            if p.offline || !self.cfg.pool_pattern.is_match(p.label()) {
                continue;
            }
            if d.pools.contains_key(p.label()) {
                tracing::warn!(
                    pool = p.label(),
                    "two pools share a label; the first is used"
                );
                continue;
            }
            d.pools.insert(p.label().to_string(), p);
        }
        if d.pools.is_empty() {
            let labels: Vec<&str> = d.pool_labels.values().map(String::as_str).collect();
            return Err(DriverError::Invalid(format!(
                "no online storage pool of array {} matches poolNameSearchPattern {} (pools: \
                 {})",
                d.system_id,
                self.cfg.pool_pattern.as_str(),
                if labels.is_empty() {
                    "none".to_string()
                } else {
                    labels.join(", ")
                }
            )));
        }
        Ok(d)
    }

    /// The index of the configured host type (`hostType`, Trident's name or the array's code).
    async fn host_type_index(&self, d: &Discovered) -> DriverResult<i64> {
        let types: Vec<HostType> = self.client.get(&d.path("/host-types")).await?;
        let code = self.cfg.host_type_code();
        types
            .iter()
            .find(|t| t.code.eq_ignore_ascii_case(code))
            .map(|t| t.index)
            .ok_or_else(|| {
                let codes: Vec<&str> = types.iter().map(|t| t.code.as_str()).collect();
                DriverError::Invalid(format!(
                    "invalid value for hostType: the array has no host type {code} (known \
                     names: {}; the array's codes: {})",
                    config::HOST_TYPES
                        .iter()
                        .map(|(n, _)| *n)
                        .collect::<Vec<_>>()
                        .join(", "),
                    codes.join(", ")
                ))
            })
    }

    /// The host group named `accessGroupName`, created when missing.
    async fn host_group(&self, d: &Discovered) -> DriverResult<String> {
        let name = &self.cfg.access_group_name;
        let find = || async {
            let groups: Vec<HostGroup> = self.client.get(&d.path("/host-groups")).await?;
            Ok::<_, ProxyError>(
                groups
                    .into_iter()
                    .find(|g| g.label() == name)
                    .map(|g| g.reference().to_string()),
            )
        };
        if let Some(r) = find().await? {
            return Ok(r);
        }
        tracing::info!(group = %name, "creating the host group");
        let body = CreateHostGroup {
            name: name.clone(),
            hosts: Vec::new(),
        };
        match self
            .client
            .post::<_, HostGroup>(&d.path("/host-groups"), &body)
            .await
        {
            Ok((_, g)) if !g.reference().is_empty() => Ok(g.reference().to_string()),
            Ok(_) => find().await?.ok_or_else(|| {
                DriverError::Other(format!("host group {name} was created but is not listed"))
            }),
            // Made meanwhile by someone else.
            Err(e) if e.status() == Some(422) => find().await?.ok_or_else(|| e.into()),
            Err(e) => Err(e.into()),
        }
    }

    /// Warns about hosts of the group whose host type is not the configured one, and about an
    /// empty group (its volumes are mapped, but no host sees them).
    async fn check_hosts(&self, d: &Discovered) -> DriverResult<()> {
        let hosts: Vec<Host> = self.client.get(&d.path("/hosts")).await?;
        let members: Vec<&Host> = hosts
            .iter()
            .filter(|h| h.cluster_ref == d.host_group_ref)
            .collect();
        if members.is_empty() {
            tracing::warn!(group = %self.cfg.access_group_name, "the host group has no hosts yet: add the nodes' initiators to it");
        }
        for h in members
            .iter()
            .filter(|h| h.host_type_index != d.host_type_index)
        {
            tracing::warn!(host = %h.label, index = h.host_type_index, want = d.host_type_index, host_type = %self.cfg.host_type, "a host of the host group has another host type");
        }
        Ok(())
    }

    /// The target IQN and the portal on `hostDataIP`.
    async fn target(&self, d: &Discovered) -> DriverResult<(String, String)> {
        let t: TargetSettings = self.client.get(&d.path("/iscsi/target-settings")).await?;
        let iqn = t.node_name.iscsi_node_name.clone();
        if iqn.is_empty() {
            return Err(DriverError::Other(format!(
                "array {} reports no iSCSI target name",
                d.system_id
            )));
        }
        let ip = self.cfg.host_data_ip;
        let matches = |a: &str| a.parse::<std::net::IpAddr>().is_ok_and(|x| x == ip);
        let portal = t
            .portals
            .iter()
            .find(|p| matches(&p.ip_address.ipv4_address) || matches(&p.ip_address.ipv6_address));
        let Some(portal) = portal else {
            let known: Vec<String> = t
                .portals
                .iter()
                .map(|p| match p.ip_address.ipv4_address.as_str() {
                    "" => p.ip_address.ipv6_address.clone(),
                    v4 => v4.to_string(),
                })
                .collect();
            return Err(DriverError::Invalid(format!(
                "invalid value for hostDataIP: {ip} is not an iSCSI portal of array {} \
                 (portals: {})",
                d.system_id,
                known.join(", ")
            )));
        };
        let port = match portal.tcp_listen_port {
            0 => ISCSI_PORT,
            p => p,
        };
        let addr = match ip {
            std::net::IpAddr::V4(v4) => format!("{v4}:{port}"),
            std::net::IpAddr::V6(v6) => format!("[{v6}]:{port}"),
        };
        Ok((iqn, addr))
    }

    /// Whether the array makes volume copies. The proxy publishes no feature list for it
    /// (nothing in the wire spec), so the driver asks the resource itself: the array's list of
    /// copy jobs answers when it has them; 404 (the array id was just confirmed, so the
    /// resource is what is missing) or a 422 saying "not supported" means it has not. Learnt
    /// at discovery, so an unable array refuses a clone before any call.
    async fn has_copy_jobs(&self, d: &Discovered) -> DriverResult<bool> {
        match self
            .client
            .get::<Vec<Value>>(&d.path("/volume-copy-jobs"))
            .await
        {
            Ok(_) => Ok(true),
            Err(e) if e.is_unsupported_feature() => Ok(false),
            Err(e) => Err(e.into()),
        }
    }

    /// The pools with Trident's offers; `clones=true` only when the file opts in
    /// (`offerClones`) and the array has volume copy jobs.
    fn pool_infos(&self, d: &Discovered) -> Vec<PoolInfo> {
        if self.cfg.offer_clones && !d.copy_jobs {
            tracing::warn!(array = %d.system_id, "offerClones: the array has no volume copy jobs; its pools offer clones=false");
        }
        let clones = self.cfg.offer_clones && d.copy_jobs;
        d.pools.values().map(|p| pool_info(p, clones)).collect()
    }

    /// The pool named `label`, or `Invalid`.
    fn pool<'a>(&self, d: &'a Discovered, label: &str) -> DriverResult<&'a Pool> {
        d.pools.get(label).ok_or_else(|| {
            DriverError::Invalid(format!(
                "pool {label} is not a pool of this backend (pools: {})",
                d.pools.keys().cloned().collect::<Vec<_>>().join(", ")
            ))
        })
    }
}

/// A pool with Trident's offers: `media` from the drive type (only hdd or ssd), thick, no
/// snapshots or encryption, and no clones unless `clones` (storch's opt-in).
pub fn pool_info(p: &Pool, clones: bool) -> PoolInfo {
    let mut offers = BTreeMap::new();
    offers.insert("backendType".to_string(), Offer::strings([DRIVER_NAME]));
    if let media @ ("hdd" | "ssd") = p.drive_media_type.as_str() {
        offers.insert("media".to_string(), Offer::strings([media]));
    }
    offers.insert("snapshots".to_string(), Offer::Bool(false));
    offers.insert("clones".to_string(), Offer::Bool(clones));
    offers.insert("encryption".to_string(), Offer::Bool(false));
    offers.insert("provisioningType".to_string(), Offer::strings(["thick"]));
    PoolInfo {
        name: p.label().to_string(),
        offers,
        total_bytes: Some(p.total_raided_space).filter(|b| *b > 0),
    }
}

#[async_trait]
impl StorageDriver for EseriesDriver {
    fn driver_name(&self) -> &'static str {
        DRIVER_NAME
    }

    fn external_config(&self) -> Value {
        let serials = self
            .discovered
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .map(|d| d.serial_numbers.clone())
            .unwrap_or_default();
        json!({
            "version": 1,
            "storageDriverName": DRIVER_NAME,
            "storagePrefix": self.cfg.prefix,
            "serialNumbers": serials,
            "Username": self.cfg.username,
            "ControllerA": self.cfg.controller_a,
            "ControllerB": self.cfg.controller_b,
            "HostDataIP": self.cfg.host_data_ip.to_string(),
        })
    }

    fn internal_name(&self, volume_name: &str) -> String {
        eseries_internal_name(&self.cfg.prefix, volume_name)
    }

    fn size_limits(&self) -> super::SizeLimits {
        super::SizeLimits::at_least(MIN_VOLUME_BYTES)
    }

    async fn discover(&self) -> DriverResult<Discovery> {
        let d = self.run_discovery().await?;
        let free_bytes = d
            .pools
            .iter()
            .map(|(label, p)| (label.clone(), p.free_space))
            .collect();
        Ok(Discovery {
            backend_name: d.backend_name.clone(),
            protocol: Protocol::Block,
            pools: self.pool_infos(&d),
            free_bytes,
        })
    }

    async fn create(&self, req: &CreateRequest) -> DriverResult<VolumeInfo> {
        volumes::check_request(req)?;
        let d = self.ctx().await?;
        let _turn = self.names.lock(&req.internal_name).await;
        volumes::create(self, &d, req).await
    }

    async fn clone_volume(&self, req: &CloneRequest) -> DriverResult<VolumeInfo> {
        let d = self.ctx().await?;
        if !d.copy_jobs {
            return Err(DriverError::Unsupported(format!(
                "clones are not supported by this array ({}): it has no volume copy jobs",
                d.system_id
            )));
        }
        if req.source_snapshot.is_some() {
            return Err(DriverError::Unsupported(
                "clones from snapshots are not supported: eseries-iscsi makes no snapshots".into(),
            ));
        }
        let _turn = self.names.lock(&req.internal_name).await;
        volumes::clone(self, &d, req).await
    }

    async fn get(&self, internal_name: &str) -> DriverResult<Option<VolumeInfo>> {
        let d = self.ctx().await?;
        volumes::get(self, &d, internal_name).await
    }

    async fn destroy(&self, internal_name: &str) -> DriverResult<()> {
        let d = self.ctx().await?;
        let _turn = self.names.lock(internal_name).await;
        volumes::destroy(self, &d, internal_name).await
    }

    async fn resize(&self, internal_name: &str, size_bytes: u64) -> DriverResult<()> {
        let d = self.ctx().await?;
        let _turn = self.names.lock(internal_name).await;
        volumes::resize(self, &d, internal_name, size_bytes).await
    }

    async fn create_snapshot(
        &self,
        internal_name: &str,
        _snapshot: &str,
    ) -> DriverResult<SnapshotInfo> {
        let d = self.ctx().await?;
        volumes::find_or_not_found(self, &d, internal_name).await?;
        Err(DriverError::Unsupported(
            "snapshots are not supported by eseries-iscsi (as in Trident)".into(),
        ))
    }

    /// Trident's answer: no snapshots (a missing volume is `NotFound`).
    async fn list_snapshots(&self, internal_name: &str) -> DriverResult<Vec<SnapshotInfo>> {
        let d = self.ctx().await?;
        volumes::find_or_not_found(self, &d, internal_name).await?;
        Ok(Vec::new())
    }

    /// No snapshot exists, so every one is already gone.
    async fn delete_snapshot(&self, _internal_name: &str, _snapshot: &str) -> DriverResult<()> {
        Ok(())
    }

    async fn list_volumes(&self) -> DriverResult<Vec<VolumeInfo>> {
        let d = self.ctx().await?;
        volumes::list(self, &d).await
    }

    async fn access_info(&self, internal_name: &str) -> DriverResult<AccessInfo> {
        let d = self.ctx().await?;
        let v = volumes::find_or_not_found(self, &d, internal_name).await?;
        Ok(self.access(&d, &v))
    }

    /// Always: a node's initiator sees nothing until a host for it exists on the array (see
    /// `publish.rs`).
    fn needs_publish(&self) -> bool {
        true
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
