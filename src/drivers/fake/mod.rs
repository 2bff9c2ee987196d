//! The `fake` driver: an in-memory array for tests and benchmarks
//! (docs/trident-contract.md#the-fake-driver), with latency and failure injection and an optional
//! fsynced state file.
//!
//! # Config
//!
//! ```json
//! {"version": 1, "storageDriverName": "fake", "backendName": "optional",
//!  "protocol": "file" | "block" | "", "instanceName": "fake1",
//!  "pools": {"pool1": {"attributes": {"media": {"offer": ["ssd"]}}, "sizeBytes": 107374182400}},
//!  "defaults": {"size": "1G"},
//!  "username": "optional", "password": "optional"}
//! ```
//!
//! - Every pool needs an `attributes` object (it may be `{}`); attribute names must be
//!   registered (`crate::model::attributes`). `backendType=[fake]` is added to every pool.
//!   `sizeBytes` is the pool's capacity (absent: 0).
//! - The backend name is `backendName`, else `instanceName`; one of them is required.
//!   Serial numbers are `["<instanceName>_SN"]`.
//! - `username` / `password` stand for array credentials: accepted, and never shown by
//!   `external_config`, `Debug` or any error message.
//! - Internal names are always `trident-<name>`: like Trident's fake, the driver ignores
//!   `storagePrefix` for names (it is still shown in `external_config`).
//!
//! # Test and benchmark knobs (storch extensions)
//!
//! - `latency`: the time every array call (every async trait method) takes before it runs.
//!   - `"0ms"` (the default): no delay and no timer at all.
//!   - a fixed duration in humantime syntax: `"10ms"`, `"1s"`, `"fixed:10ms"`.
//!   - `"lognormal:<median>"`: a lognormal distribution with that median and σ = 0.5
//!     ([`DEFAULT_LOGNORMAL_SIGMA`]). With σ = 0.5 the mean is 1.13 × median, p90 1.9 ×,
//!     p99 3.2 × and p99.9 4.7 ×. `"lognormal:<median>:<sigma>"` chooses σ (0 to 5). A sample
//!     is capped at 100 × the median.
//! - `failureRate`: a number from 0.0 to 1.0, the probability that a create or clone fails
//!   with `Unavailable` (retryable) before touching the array. 0.0 never fails, 1.0 always.
//! - `failPools`: `{"<pool>": "<message>"}`: every create or clone on that pool fails with
//!   `Other(<message>)`. The pools must be configured.
//! - `useCHAP`: `true` gives block volumes CHAP credentials in their access information (user
//!   `fake-chap-<instanceName>`, fixed initiator and target secrets), as a SAN array with
//!   CHAP would; for tests of what frontends do with them.
//! - `failDestroy`: `"<message>"`: every destroy of a volume the array holds fails with
//!   `Unavailable(<message>)` (retryable), as on an array that refuses deletes for a while;
//!   update the backend without it (with a `statePath`, so the volumes survive) to recover.
//! - `statePath`: a file where the fake array keeps its volumes, snapshots and the remaining
//!   capacity of each pool, so the array outlives the process. It is read when the driver is
//!   built (a missing file is an empty array) and rewritten after every mutation before the
//!   call returns `Ok`: temp file `<statePath>.tmp`, fsync, rename, fsync of the directory.
//!   A temp file left behind by a crash is ignored. The file belongs to one `instanceName`,
//!   and every pool holding a volume must still be configured. If a write fails, the call
//!   returns `Other` but its change stays in memory, like an array whose answer was lost; the
//!   next successful write includes it. Two drivers must not share a state file at once.
//! - `limitVolumeSize`: a size (`"10Gi"`), the largest volume the array makes, as Trident's
//!   option of that name on its ONTAP and Element drivers: a create or a resize above it is
//!   refused (placement and the core check the driver's `size_limits` first).
//! - `perHostAccess`: `true` makes the array grant access per host, as an array with an
//!   access group per host does: `needs_publish` is true, `publish` grants a host (a block
//!   volume needs the host's iSCSI initiator and gets the lowest LUN number free among that
//!   host's mappings; the context has `accessGroup` and `iscsiLunNumber`), `unpublish`
//!   revokes. Grants are kept with the volume (and in the state file). Default `false`:
//!   every host reaches every volume and publish does nothing.
//!
//! The hot path (no latency, no statePath) is one uncontended mutex and the few allocations
//! the returned `VolumeInfo` needs.
//!
//! Files:
//! - `mod.rs`: the driver, the trait impl and its conformance run.
//! - `config.rs`: the knobs, the pools, building the driver from a config.
//! - `client.rs`: the array's contents (one mutex) and the state file's durable writes.
//! - `wire.rs`: the state file's shape, encoding and loading.
//! - `publish.rs`: `perHostAccess` grants.
//! - `tests.rs`: the unit tests.

mod client;
mod config;
mod publish;
#[cfg(test)]
mod tests;
mod wire;

use std::sync::{Mutex, MutexGuard};
use std::time::{SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use serde_json::{Map, Value, json};

use self::client::{ArrayState, Snapshot, Volume};
use self::config::check_name;
use super::{
    Attachment, CloneRequest, CreateRequest, Discovery, DriverError, DriverResult, HostAccess,
    PublishContext, SnapshotInfo, StorageDriver, VolumeInfo,
};
use crate::model::{AccessInfo, Protocol};

pub use self::config::{FakeConfig, Latency};

/// The `storageDriverName` of this driver.
pub const DRIVER_NAME: &str = "fake";

/// The smallest volume the fake array makes: 1 MiB.
pub const MIN_VOLUME_BYTES: u64 = 1 << 20;

/// σ of `latency: "lognormal:<median>"` when none is given.
pub const DEFAULT_LOGNORMAL_SIGMA: f64 = 0.5;

/// Access information the fake hands out (TEST-NET-1 addresses, as Trident's fake).
pub const NFS_SERVER_IP: &str = "192.0.2.1";
pub const ISCSI_TARGET_PORTAL: &str = "192.0.2.1";
pub const ISCSI_PORTAL: &str = "192.0.2.2";
pub const ISCSI_TARGET_IQN: &str = "iqn.2017-06.com.netapp:fake";

/// The fake array. Build it with [`FakeDriver::new`] or through `build_driver`.
pub struct FakeDriver {
    cfg: FakeConfig,
    storage_prefix: Option<String>,
    default_size_bytes: u64,
    state: Mutex<ArrayState>,
}

impl std::fmt::Debug for FakeDriver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FakeDriver")
            .field("backend_name", &self.cfg.backend_name)
            .field("instance_name", &self.cfg.instance_name)
            .field("protocol", &self.cfg.protocol)
            .field(
                "pools",
                &self
                    .cfg
                    .pools
                    .iter()
                    .map(|p| &p.info.name)
                    .collect::<Vec<_>>(),
            )
            .field("latency", &self.cfg.latency)
            .field("failure_rate", &self.cfg.failure_rate)
            .field("state_path", &self.cfg.persister.as_ref().map(|p| &p.path))
            .field("credentials", &"<redacted>")
            .finish_non_exhaustive()
    }
}

impl FakeDriver {
    /// The backend name: `backendName`, else `instanceName`.
    pub fn backend_name(&self) -> &str {
        &self.cfg.backend_name
    }

    fn lock(&self) -> MutexGuard<'_, ArrayState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    async fn delay(&self) {
        if let Some(d) = self.cfg.latency.sample() {
            tokio::time::sleep(d).await;
        }
    }

    fn inject_failure(&self) -> DriverResult<()> {
        if self.cfg.failure_rate > 0.0 && rand::random::<f64>() < self.cfg.failure_rate {
            return Err(DriverError::Unavailable(format!(
                "fake array {}: injected failure (failureRate {})",
                self.cfg.backend_name, self.cfg.failure_rate
            )));
        }
        Ok(())
    }

    fn pool_failure(&self, pool: usize) -> DriverResult<()> {
        match &self.cfg.pools[pool].fail {
            Some(msg) => Err(DriverError::Other(msg.clone())),
            None => Ok(()),
        }
    }

    /// How a new volume is served: the backend's protocol, else the requested one, else file.
    fn volume_protocol(&self, requested: Protocol) -> Protocol {
        match (self.cfg.protocol, requested) {
            (Protocol::Any, Protocol::Block) => Protocol::Block,
            (Protocol::Any, _) => Protocol::File,
            (p, _) => p,
        }
    }

    fn info(&self, name: &str, v: &Volume) -> VolumeInfo {
        VolumeInfo {
            internal_name: name.to_string(),
            pool: self.cfg.pools[v.pool].info.name.clone(),
            size_bytes: v.size_bytes,
            access: self.access(name, v.protocol),
        }
    }

    /// Changes a volume the array holds (`change` says whether it changed anything) and makes
    /// the change durable; a volume the array does not hold is success, unchanged.
    async fn change_if_held(
        &self,
        internal_name: &str,
        change: impl FnOnce(&mut Volume) -> bool,
    ) -> DriverResult<()> {
        self.delay().await;
        let pending = {
            let mut guard = self.lock();
            let st = &mut *guard;
            let Some(v) = st.volumes.get_mut(internal_name) else {
                return Ok(());
            };
            if !change(v) {
                return Ok(());
            }
            self.commit(st)
        };
        self.persist(pending).await
    }

    /// Checks the size and the pool's room, then takes the bytes.
    fn reserve(&self, free: &mut [u64], pool: usize, size: u64, name: &str) -> DriverResult<()> {
        let available = free[pool];
        if available < size {
            return Err(DriverError::Conflict(format!(
                "requested volume {name} is too large: {size} bytes requested, {available} bytes \
                 available in pool {}",
                self.cfg.pools[pool].info.name
            )));
        }
        free[pool] = available - size;
        Ok(())
    }
}

/// The CHAP secrets of `useCHAP` block volumes.
pub const CHAP_INITIATOR_SECRET: &str = "fake-initiator-secret";
pub const CHAP_TARGET_SECRET: &str = "fake-target-secret";

impl FakeDriver {
    fn access(&self, internal_name: &str, protocol: Protocol) -> AccessInfo {
        let mut access = access(internal_name, protocol);
        if self.cfg.chap && protocol == Protocol::Block {
            access.iscsi_username = format!("fake-chap-{}", self.cfg.instance_name);
            access.iscsi_initiator_secret = CHAP_INITIATOR_SECRET.to_string();
            access.iscsi_target_secret = CHAP_TARGET_SECRET.to_string();
        }
        access
    }
}

/// How a fake volume attaches: iSCSI when its access info names a target, else NFS.
pub fn attachment(access: &AccessInfo) -> Attachment {
    if access.iscsi_target_iqn.is_empty() {
        Attachment::Nfs
    } else {
        Attachment::Iscsi
    }
}

fn access(internal_name: &str, protocol: Protocol) -> AccessInfo {
    match protocol {
        Protocol::Block => AccessInfo {
            iscsi_target_portal: ISCSI_TARGET_PORTAL.to_string(),
            iscsi_portals: vec![ISCSI_PORTAL.to_string()],
            iscsi_target_iqn: ISCSI_TARGET_IQN.to_string(),
            iscsi_lun_number: 0,
            ..AccessInfo::default()
        },
        _ => AccessInfo {
            nfs_server_ip: NFS_SERVER_IP.to_string(),
            nfs_path: format!("/{internal_name}"),
            ..AccessInfo::default()
        },
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

fn not_found(name: &str) -> DriverError {
    DriverError::NotFound(format!("volume {name} not found"))
}

#[async_trait]
impl StorageDriver for FakeDriver {
    fn driver_name(&self) -> &'static str {
        DRIVER_NAME
    }

    fn external_config(&self) -> Value {
        let st = self.lock();
        let pools: Map<String, Value> = self
            .cfg
            .pools
            .iter()
            .zip(&st.free)
            .map(|(p, free)| {
                let attributes = serde_json::to_value(&p.info.offers).unwrap_or(Value::Null);
                (
                    p.info.name.clone(),
                    json!({"attributes": attributes, "sizeBytes": free}),
                )
            })
            .collect();
        drop(st);
        let mut config = json!({
            "version": 1,
            "storageDriverName": DRIVER_NAME,
            "storagePrefix": self.storage_prefix,
            "serialNumbers": [format!("{}_SN", self.cfg.instance_name)],
            "protocol": self.cfg.protocol.as_str(),
            "pools": pools,
            "InstanceName": self.cfg.instance_name,
        });
        // storch's knob, shown only when set: Trident's shape otherwise.
        if self.cfg.per_host_access {
            config["perHostAccess"] = json!(true);
        }
        if let Some(limit) = self.cfg.limit_volume_size {
            config["limitVolumeSize"] = json!(crate::model::canonical_size(limit));
        }
        config
    }

    fn internal_name(&self, volume_name: &str) -> String {
        format!("trident-{volume_name}")
    }

    fn size_limits(&self) -> super::SizeLimits {
        super::SizeLimits {
            min_bytes: MIN_VOLUME_BYTES,
            max_bytes: self.cfg.limit_volume_size,
        }
    }

    async fn discover(&self) -> DriverResult<Discovery> {
        self.delay().await;
        let free_bytes = {
            let st = self.lock();
            self.cfg
                .pools
                .iter()
                .zip(&st.free)
                .map(|(p, f)| (p.info.name.clone(), *f))
                .collect()
        };
        Ok(Discovery {
            backend_name: self.cfg.backend_name.clone(),
            protocol: self.cfg.protocol,
            pools: self.cfg.pools.iter().map(|p| p.info.clone()).collect(),
            free_bytes,
        })
    }

    async fn create(&self, req: &CreateRequest) -> DriverResult<VolumeInfo> {
        self.delay().await;
        self.inject_failure()?;
        if req.pool.is_empty() {
            return Err(DriverError::Invalid(
                "no pool specified for the volume".to_string(),
            ));
        }
        let Some(&pool) = self.cfg.pool_index.get(&req.pool) else {
            return Err(DriverError::Invalid(format!(
                "pool {} does not exist on fake array {}",
                req.pool, self.cfg.backend_name
            )));
        };
        self.pool_failure(pool)?;
        check_name("internalName", &req.internal_name)?;
        let size = if req.size_bytes == 0 {
            self.default_size_bytes
        } else {
            req.size_bytes
        };
        self.size_limits()
            .check(size)
            .map_err(DriverError::Invalid)?;
        let volume = Volume {
            pool,
            size_bytes: size,
            protocol: self.volume_protocol(req.config.protocol),
            snapshots: Vec::new(),
            hosts: Default::default(),
        };
        let info = self.info(&req.internal_name, &volume);
        let pending = {
            let mut guard = self.lock();
            let st = &mut *guard;
            if st.volumes.contains_key(&req.internal_name) {
                return Err(DriverError::AlreadyExists(format!(
                    "volume {} already exists",
                    req.internal_name
                )));
            }
            self.reserve(&mut st.free, pool, size, &req.internal_name)?;
            st.volumes.insert(req.internal_name.clone(), volume);
            self.commit(st)
        };
        self.persist(pending).await?;
        Ok(info)
    }

    async fn clone_volume(&self, req: &CloneRequest) -> DriverResult<VolumeInfo> {
        self.delay().await;
        self.inject_failure()?;
        check_name("internalName", &req.internal_name)?;
        let (info, pending) = {
            let mut guard = self.lock();
            let st = &mut *guard;
            if st.volumes.contains_key(&req.internal_name) {
                return Err(DriverError::AlreadyExists(format!(
                    "volume {} already exists",
                    req.internal_name
                )));
            }
            let Some(source) = st.volumes.get(&req.source_internal_name) else {
                return Err(DriverError::NotFound(format!(
                    "source volume {} not found",
                    req.source_internal_name
                )));
            };
            let size = match &req.source_snapshot {
                None => source.size_bytes,
                Some(snap) => source
                    .snapshots
                    .iter()
                    .find(|s| &s.name == snap)
                    .map(|s| s.size_bytes)
                    .ok_or_else(|| {
                        DriverError::NotFound(format!(
                            "snapshot {snap} of volume {} not found",
                            req.source_internal_name
                        ))
                    })?,
            };
            let volume = Volume {
                pool: source.pool,
                size_bytes: size,
                protocol: source.protocol,
                snapshots: Vec::new(),
                hosts: Default::default(),
            };
            self.pool_failure(volume.pool)?;
            self.reserve(&mut st.free, volume.pool, size, &req.internal_name)?;
            let info = self.info(&req.internal_name, &volume);
            st.volumes.insert(req.internal_name.clone(), volume);
            (info, self.commit(st))
        };
        self.persist(pending).await?;
        Ok(info)
    }

    async fn get(&self, internal_name: &str) -> DriverResult<Option<VolumeInfo>> {
        self.delay().await;
        let st = self.lock();
        Ok(st
            .volumes
            .get(internal_name)
            .map(|v| self.info(internal_name, v)))
    }

    async fn destroy(&self, internal_name: &str) -> DriverResult<()> {
        self.delay().await;
        let pending = {
            let mut guard = self.lock();
            let st = &mut *guard;
            if !st.volumes.contains_key(internal_name) {
                return Ok(());
            }
            if let Some(msg) = &self.cfg.fail_destroy {
                return Err(DriverError::Unavailable(msg.clone()));
            }
            let Some(v) = st.volumes.remove(internal_name) else {
                return Ok(());
            };
            st.free[v.pool] = st.free[v.pool].saturating_add(v.size_bytes);
            self.commit(st)
        };
        self.persist(pending).await
    }

    async fn resize(&self, internal_name: &str, size_bytes: u64) -> DriverResult<()> {
        self.delay().await;
        let pending = {
            let mut guard = self.lock();
            let st = &mut *guard;
            let Some(v) = st.volumes.get_mut(internal_name) else {
                return Err(not_found(internal_name));
            };
            if size_bytes < v.size_bytes {
                return Err(DriverError::Invalid(format!(
                    "cannot shrink volume {internal_name} from {} to {size_bytes} bytes",
                    v.size_bytes
                )));
            }
            if size_bytes == v.size_bytes {
                return Ok(());
            }
            self.size_limits()
                .check(size_bytes)
                .map_err(DriverError::Invalid)?;
            let grow = size_bytes - v.size_bytes;
            self.reserve(&mut st.free, v.pool, grow, internal_name)?;
            v.size_bytes = size_bytes;
            self.commit(st)
        };
        self.persist(pending).await
    }

    async fn create_snapshot(
        &self,
        internal_name: &str,
        snapshot: &str,
    ) -> DriverResult<SnapshotInfo> {
        self.delay().await;
        check_name("snapshot name", snapshot)?;
        let (info, pending) = {
            let mut guard = self.lock();
            let st = &mut *guard;
            let Some(v) = st.volumes.get_mut(internal_name) else {
                return Err(not_found(internal_name));
            };
            if v.snapshots.iter().any(|s| s.name == snapshot) {
                return Err(DriverError::AlreadyExists(format!(
                    "snapshot {snapshot} of volume {internal_name} already exists"
                )));
            }
            let snap = Snapshot {
                name: snapshot.to_string(),
                created_ms: now_ms(),
                size_bytes: v.size_bytes,
            };
            let info = SnapshotInfo {
                name: snap.name.clone(),
                volume_internal_name: internal_name.to_string(),
                created_ms: snap.created_ms,
                size_bytes: snap.size_bytes,
            };
            v.snapshots.push(snap);
            (info, self.commit(st))
        };
        self.persist(pending).await?;
        Ok(info)
    }

    async fn list_snapshots(&self, internal_name: &str) -> DriverResult<Vec<SnapshotInfo>> {
        self.delay().await;
        let st = self.lock();
        let v = st
            .volumes
            .get(internal_name)
            .ok_or_else(|| not_found(internal_name))?;
        Ok(v.snapshots
            .iter()
            .map(|s| SnapshotInfo {
                name: s.name.clone(),
                volume_internal_name: internal_name.to_string(),
                created_ms: s.created_ms,
                size_bytes: s.size_bytes,
            })
            .collect())
    }

    async fn delete_snapshot(&self, internal_name: &str, snapshot: &str) -> DriverResult<()> {
        self.change_if_held(internal_name, |v| {
            let i = v.snapshots.iter().position(|s| s.name == snapshot);
            i.map(|i| v.snapshots.remove(i)).is_some()
        })
        .await
    }

    async fn list_volumes(&self) -> DriverResult<Vec<VolumeInfo>> {
        self.delay().await;
        let mut out: Vec<VolumeInfo> = {
            let st = self.lock();
            st.volumes
                .iter()
                .map(|(name, v)| self.info(name, v))
                .collect()
        };
        out.sort_by(|a, b| a.internal_name.cmp(&b.internal_name));
        Ok(out)
    }

    async fn access_info(&self, internal_name: &str) -> DriverResult<AccessInfo> {
        self.delay().await;
        let st = self.lock();
        let v = st
            .volumes
            .get(internal_name)
            .ok_or_else(|| not_found(internal_name))?;
        Ok(self.access(internal_name, v.protocol))
    }

    fn needs_publish(&self) -> bool {
        self.cfg.per_host_access
    }

    async fn publish(
        &self,
        internal_name: &str,
        host: &HostAccess,
    ) -> DriverResult<PublishContext> {
        if !self.cfg.per_host_access {
            return Ok(PublishContext::new());
        }
        self.grant(internal_name, host).await
    }

    async fn unpublish(&self, internal_name: &str, host: &HostAccess) -> DriverResult<()> {
        if !self.cfg.per_host_access {
            return Ok(());
        }
        self.revoke(internal_name, host).await
    }
}

#[cfg(test)]
mod conformance_run {
    use serde_json::json;

    use super::tests::{GIB, MIB, cfg, driver, state_cfg};
    use super::*;
    use crate::drivers::conformance::{self, ConformanceOptions};
    use crate::drivers::testing::free;

    fn conformance_opts() -> ConformanceOptions {
        ConformanceOptions {
            min_size_bytes: Some(MIN_VOLUME_BYTES),
            size_bytes: 256 * MIB,
            ..ConformanceOptions::default()
        }
    }

    #[tokio::test]
    async fn conformance_file() {
        let d = driver(json!({}));
        conformance::run(&d, "p1", &conformance_opts()).await;
        assert!(
            d.list_volumes().await.unwrap().is_empty(),
            "the suite cleans up"
        );
        assert_eq!(free(&d, "p1").await, 10 * GIB);
        // A small pool with the concurrency check off.
        let opts = ConformanceOptions {
            concurrency: 0,
            ..conformance_opts()
        };
        conformance::run(&d, "p2", &opts).await;
        assert_eq!(free(&d, "p2").await, GIB);
    }

    #[tokio::test]
    async fn conformance_block() {
        let d = driver(json!({"protocol": "block"}));
        conformance::run(&d, "p1", &conformance_opts()).await;
    }

    #[tokio::test]
    async fn conformance_with_state_file() {
        let dir = tempfile::tempdir().unwrap();
        let d = FakeDriver::new(&state_cfg(&dir.path().join("s.json"))).unwrap();
        conformance::run(
            &d,
            "p1",
            &ConformanceOptions {
                concurrency: 4,
                ..conformance_opts()
            },
        )
        .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn conformance_through_build_driver_with_latency() {
        let built =
            crate::drivers::build_driver(&cfg(json!({"latency": "lognormal:1ms"}))).unwrap();
        conformance::run(built.driver.as_ref(), "p1", &conformance_opts()).await;
    }
}
