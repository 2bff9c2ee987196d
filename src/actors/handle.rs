//! `Core`: the handle every frontend (REST, CLI server side, Kubernetes, benchmarks) uses.
//! It hides the actix addresses; commands go to actors, reads come from the projection.

use std::collections::BTreeMap;

use std::sync::Arc;

use super::shared::{BackendSlot, BackendStatus, ClassSlot, Shared, observe, read, write};
use crate::events::{BackendEvent, Event, StorageClassEvent, VolumeEvent};
use crate::model::{
    Offer, Protocol, ResizeRequest, SnapshotRequest, StorageClassConfig, VolumeConfig,
    VolumeRequest,
};
pub use crate::projections::VolumeState;

/// Who asked, for the events a command causes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestCtx {
    /// A uuid per REST request (or `config`, `boot`, `k8s/<uid>`).
    pub request_id: String,
}

impl RequestCtx {
    pub fn new(request_id: impl Into<String>) -> Self {
        RequestCtx {
            request_id: request_id.into(),
        }
    }

    /// A fresh random request id.
    pub fn random() -> Self {
        RequestCtx::new(uuid::Uuid::new_v4().to_string())
    }
}

/// Errors of core commands and reads, classified for the frontends (HTTP mapping lives in
/// `api::error`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CoreError {
    /// Replay is not finished (HTTP 503).
    #[error("storch is initializing, please try again later")]
    NotReady,
    /// A standby refuses writes (HTTP 503); the leader's identity.
    #[error("this storch instance is a standby and takes no writes; the leader is {0}")]
    Standby(String),
    /// Start-up failed for good (HTTP 500).
    #[error("storch initialization failed; {0}")]
    BootstrapFailed(String),
    /// HTTP 404.
    #[error("{0}")]
    NotFound(String),
    /// A duplicate name (HTTP 409).
    #[error("{0}")]
    AlreadyExists(String),
    /// Bad input; the message names the field (HTTP 400).
    #[error("{0}")]
    Invalid(String),
    /// The request is valid but cannot be carried out now or here, e.g. every pool failed
    /// (HTTP 400 as Trident; the message says why per pool).
    #[error("{0}")]
    Failed(String),
    /// The log refuses writes or an actor is gone (HTTP 503).
    #[error("{0}")]
    Unavailable(String),
    /// A bug or an unexpected failure (HTTP 500; details only in the server log).
    #[error("internal error: {0}")]
    Internal(String),
}

impl From<crate::model::RequestError> for CoreError {
    fn from(e: crate::model::RequestError) -> Self {
        CoreError::Invalid(e.to_string())
    }
}

/// Start-up state of the core.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Readiness {
    Replaying,
    Ready,
    /// Replicated through etcd and not the leader: reads are served from the replicated
    /// projection, writes are refused with the leader's name.
    Standby {
        leader: String,
    },
    Failed(String),
}

/// A backend's health as its actor last saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BackendState {
    /// Driver initialising (at boot).
    Initializing,
    Online,
    /// Deleted by a user while it still has volumes.
    Offline,
    /// The driver failed to initialise or stopped answering; retried with backoff.
    Failed(String),
}

impl BackendState {
    pub fn as_str(&self) -> &'static str {
        match self {
            BackendState::Initializing => "initializing",
            BackendState::Online => "online",
            BackendState::Offline => "offline",
            BackendState::Failed(_) => "failed",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct PoolView {
    pub name: String,
    /// Sorted names of the classes this pool belongs to.
    pub storage_classes: Vec<String>,
    pub offers: BTreeMap<String, Offer>,
    pub total_bytes: Option<u64>,
    pub free_bytes: Option<u64>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct BackendView {
    pub name: String,
    pub driver: String,
    pub protocol: Protocol,
    /// The external config (common part plus driver fields), never secrets.
    pub config: serde_json::Value,
    pub pools: Vec<PoolView>,
    /// `false` once deleted by a user (Trident's `online`).
    pub online: bool,
    pub state: BackendState,
    /// Sorted volume names.
    pub volumes: Vec<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct StorageClassView {
    pub config: StorageClassConfig,
    /// backend → sorted pool names.
    pub pools: BTreeMap<String, Vec<String>>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct VolumeView {
    /// Secrets in `accessInformation` are redacted.
    pub config: VolumeConfig,
    pub backend: String,
    pub pool: String,
    pub orphaned: bool,
    pub state: VolumeState,
    /// The last delete failure, while deleting.
    pub last_error: Option<String>,
}

/// Settings of the core.
#[derive(Debug, Clone)]
pub struct CoreOptions {
    /// Where the event log (and secrets key) live.
    pub data_dir: std::path::PathBuf,
    pub durability: crate::log::Durability,
    /// A volume actor stops after this long without messages.
    pub volume_idle: std::time::Duration,
    /// Write a projection checkpoint after this many events.
    pub checkpoint_every: u64,
    /// Replicate the log through etcd (leader election, standbys).
    pub replication: Option<Arc<crate::replication::Node>>,
    /// The key that seals secrets in the log; `None`: `data_dir/secret.key`, created if
    /// missing.
    pub secrets_key: Option<std::path::PathBuf>,
}

impl Default for CoreOptions {
    fn default() -> Self {
        CoreOptions {
            data_dir: "storch-data".into(),
            durability: crate::log::Durability::Flush,
            volume_idle: std::time::Duration::from_secs(30),
            checkpoint_every: 10_000,
            replication: None,
            secrets_key: None,
        }
    }
}

/// The handle to the running core. Cheap to clone.
#[derive(Clone)]
pub struct Core {
    pub(crate) shared: Arc<Shared>,
}

impl std::fmt::Debug for Core {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Core").finish_non_exhaustive()
    }
}

/// A backend config built and discovered, not yet recorded.
pub(super) struct PreparedBackend {
    pub(super) name: String,
    driver: Arc<dyn crate::drivers::StorageDriver>,
    driver_name: String,
    /// The config without secrets (JSON text) and the secrets sealed.
    redacted: String,
    sealed: Option<crate::model::Sealed>,
    discovery: crate::drivers::Discovery,
    /// Concurrent driver calls allowed (`concurrencyLimit`).
    limit: usize,
}

fn driver_error(e: crate::drivers::DriverError) -> CoreError {
    use crate::drivers::DriverError as D;
    match e {
        D::Invalid(m) | D::Unsupported(m) => CoreError::Invalid(m),
        other => CoreError::Failed(other.to_string()),
    }
}

impl Core {
    /// Adds a backend from its config document (JSON value; YAML is converted by the caller).
    /// An existing name is an update. Returns the backend name.
    pub async fn add_backend(
        &self,
        ctx: &RequestCtx,
        doc: serde_json::Value,
    ) -> Result<String, CoreError> {
        let started = std::time::Instant::now();
        let result = self.add_backend_impl(ctx, doc).await;
        observe("add_backend", started, &result);
        result
    }

    /// Updates backend `name`; returns the (possibly new) name.
    pub async fn update_backend(
        &self,
        ctx: &RequestCtx,
        name: &str,
        doc: serde_json::Value,
    ) -> Result<String, CoreError> {
        let started = std::time::Instant::now();
        let result = self.update_backend_impl(ctx, name, doc).await;
        observe("update_backend", started, &result);
        result
    }

    /// Deletes a backend without volumes, or takes one with volumes offline.
    pub async fn delete_backend(&self, ctx: &RequestCtx, name: &str) -> Result<(), CoreError> {
        let started = std::time::Instant::now();
        let result = self.delete_backend_impl(ctx, name).await;
        observe("delete_backend", started, &result);
        result
    }

    pub async fn add_storage_class(
        &self,
        ctx: &RequestCtx,
        config: StorageClassConfig,
    ) -> Result<String, CoreError> {
        let started = std::time::Instant::now();
        let result = self.add_storage_class_impl(ctx, config).await;
        observe("add_storage_class", started, &result);
        result
    }

    pub async fn delete_storage_class(
        &self,
        ctx: &RequestCtx,
        name: &str,
    ) -> Result<(), CoreError> {
        let started = std::time::Instant::now();
        let result = self.delete_storage_class_impl(ctx, name).await;
        observe("delete_storage_class", started, &result);
        result
    }

    /// Creates a volume (or a clone when `cloneSourceVolume` is set); returns it once the
    /// outcome is durable.
    pub async fn add_volume(
        &self,
        ctx: &RequestCtx,
        request: VolumeRequest,
    ) -> Result<VolumeView, CoreError> {
        let started = std::time::Instant::now();
        let result = self.add_volume_impl(ctx, request).await;
        observe("create_volume", started, &result);
        result
    }

    pub async fn delete_volume(&self, ctx: &RequestCtx, name: &str) -> Result<(), CoreError> {
        let started = std::time::Instant::now();
        let result = self.delete_volume_impl(ctx, name).await;
        observe("delete_volume", started, &result);
        result
    }

    /// Takes a snapshot of a volume; refused where the volume's pool does not offer snapshots.
    pub async fn create_snapshot(
        &self,
        ctx: &RequestCtx,
        request: &SnapshotRequest,
    ) -> Result<SnapshotView, CoreError> {
        let started = std::time::Instant::now();
        let result = self.create_snapshot_impl(ctx, request).await;
        observe("create_snapshot", started, &result);
        result
    }

    pub async fn delete_snapshot(
        &self,
        ctx: &RequestCtx,
        volume: &str,
        snapshot: &str,
    ) -> Result<(), CoreError> {
        let started = std::time::Instant::now();
        let result = self.delete_snapshot_impl(ctx, volume, snapshot).await;
        observe("delete_snapshot", started, &result);
        result
    }

    /// Grows a volume to the requested size (stored verbatim).
    pub async fn resize_volume(
        &self,
        ctx: &RequestCtx,
        request: &ResizeRequest,
    ) -> Result<VolumeView, CoreError> {
        let started = std::time::Instant::now();
        let result = self.resize_volume_impl(ctx, request).await;
        observe("resize_volume", started, &result);
        result
    }

    pub fn readiness(&self) -> Readiness {
        read(&self.shared.readiness).clone()
    }

    /// Waits until the core takes commands (replay done and, with etcd replication, this
    /// instance leads): `Ok` when ready, `Err(why)` when start-up failed for good.
    pub async fn wait_ready(&self) -> Result<(), String> {
        loop {
            match self.readiness() {
                Readiness::Ready => return Ok(()),
                Readiness::Failed(why) => return Err(why),
                Readiness::Replaying => {
                    tokio::time::sleep(std::time::Duration::from_millis(1)).await
                }
                // A standby may wait for days: look less often.
                Readiness::Standby { .. } => {
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await
                }
            }
        }
    }

    pub(super) async fn prepare_backend(
        &self,
        doc: serde_json::Value,
    ) -> Result<PreparedBackend, CoreError> {
        if !doc.is_object() {
            return Err(CoreError::Invalid(
                "invalid config format: a backend config must be a JSON or YAML object".into(),
            ));
        }
        let mut redacted = doc.clone();
        let secrets = crate::secrets::split(&mut redacted);
        let built = crate::drivers::build_driver(&doc).map_err(driver_error)?;
        let limit = super::backend::concurrency_limit(&doc).map_err(CoreError::Invalid)?;
        let driver_name = built.driver.driver_name().to_string();
        let discovery = built.driver.discover().await.map_err(|e| {
            CoreError::Failed(format!(
                "problem initializing storage driver '{driver_name}': {e}"
            ))
        })?;
        crate::model::validate_name("backendName", &discovery.backend_name)
            .map_err(|e| CoreError::Invalid(e.to_string()))?;
        Ok(PreparedBackend {
            name: discovery.backend_name.clone(),
            driver: built.driver,
            driver_name,
            redacted: redacted.to_string(),
            sealed: self.shared.secrets.seal(&secrets),
            limit,
            discovery,
        })
    }

    async fn add_backend_impl(
        &self,
        ctx: &RequestCtx,
        doc: serde_json::Value,
    ) -> Result<String, CoreError> {
        self.shared.ensure_ready()?;
        let prepared = self.prepare_backend(doc).await?;
        let _admin = self.shared.admin.lock().await;
        self.add_locked(ctx, prepared).await
    }

    /// Adds (or, for an existing name, updates) a prepared backend; the caller holds `admin`.
    pub(super) async fn add_locked(
        &self,
        ctx: &RequestCtx,
        prepared: PreparedBackend,
    ) -> Result<String, CoreError> {
        let exists = self
            .shared
            .projection
            .read(|s| s.backends.contains_key(&prepared.name));
        if exists {
            let name = prepared.name.clone();
            return self.update_locked(ctx, &name, prepared).await;
        }
        let name = prepared.name.clone();
        let events = vec![
            Event::backend(
                &name,
                BackendEvent::Added {
                    driver: prepared.driver_name.clone(),
                    config: prepared.redacted.clone(),
                    secrets: prepared.sealed.clone(),
                },
            ),
            Event::backend(
                &name,
                BackendEvent::PoolsDiscovered {
                    protocol: prepared.discovery.protocol,
                    pools: prepared.discovery.pools.clone(),
                },
            ),
        ];
        self.shared.append(&ctx.request_id, events).await?;
        start_backend(
            &self.shared,
            &name,
            DriverSource::Ready(prepared.driver, prepared.discovery, prepared.limit),
        );
        super::class::rematch_all(&self.shared).await;
        tracing::info!(backend = %name, "backend added");
        Ok(name)
    }

    async fn update_backend_impl(
        &self,
        ctx: &RequestCtx,
        name: &str,
        doc: serde_json::Value,
    ) -> Result<String, CoreError> {
        self.shared.ensure_ready()?;
        if !self
            .shared
            .projection
            .read(|s| s.backends.contains_key(name))
        {
            return Err(CoreError::NotFound(format!("backend {name} was not found")));
        }
        let prepared = self.prepare_backend(doc).await?;
        let _admin = self.shared.admin.lock().await;
        self.update_locked(ctx, name, prepared).await
    }

    async fn update_locked(
        &self,
        ctx: &RequestCtx,
        name: &str,
        prepared: PreparedBackend,
    ) -> Result<String, CoreError> {
        let Some(old) = self
            .shared
            .projection
            .read(|s| s.backends.get(name).cloned())
        else {
            return Err(CoreError::NotFound(format!("backend {name} was not found")));
        };
        if old.driver != prepared.driver_name {
            return Err(CoreError::Invalid(format!(
                "cannot update the backend as the old backend is of type {} and the new backend is of type {}",
                old.driver, prepared.driver_name
            )));
        }
        let new_name = prepared.name.clone();
        let mut events = Vec::new();
        if new_name != name {
            if self
                .shared
                .projection
                .read(|s| s.backends.contains_key(&new_name))
            {
                return Err(CoreError::AlreadyExists(format!(
                    "backend {new_name} already exists"
                )));
            }
            events.push(Event::backend(
                name,
                BackendEvent::Renamed {
                    to: new_name.clone(),
                },
            ));
        }
        events.push(Event::backend(
            &new_name,
            BackendEvent::Updated {
                driver: prepared.driver_name.clone(),
                config: prepared.redacted.clone(),
                secrets: prepared.sealed.clone(),
            },
        ));
        if old.pools != prepared.discovery.pools || old.protocol != prepared.discovery.protocol {
            events.push(Event::backend(
                &new_name,
                BackendEvent::PoolsDiscovered {
                    protocol: prepared.discovery.protocol,
                    pools: prepared.discovery.pools.clone(),
                },
            ));
        }
        // Trident's orphan check: is each volume still on the array the new config points at?
        for vol in &old.volumes {
            let Some(rec) = self.shared.projection.read(|s| s.volumes.get(vol).cloned()) else {
                continue;
            };
            let found = prepared.driver.get(&rec.config().internal_name).await;
            let orphaned = matches!(found, Ok(None));
            if orphaned != rec.orphaned {
                events.push(Event::volume(
                    vol,
                    VolumeEvent::OrphanedChanged { orphaned },
                ));
            }
        }
        self.shared.append(&ctx.request_id, events).await?;
        stop_backend(&self.shared, name);
        start_backend(
            &self.shared,
            &new_name,
            DriverSource::Ready(prepared.driver, prepared.discovery, prepared.limit),
        );
        super::class::rematch_all(&self.shared).await;
        tracing::info!(backend = %new_name, "backend updated");
        Ok(new_name)
    }

    async fn delete_backend_impl(&self, ctx: &RequestCtx, name: &str) -> Result<(), CoreError> {
        self.shared.ensure_ready()?;
        let _admin = self.shared.admin.lock().await;
        self.delete_locked(ctx, name).await
    }

    /// Deletes a backend without volumes, or takes one with volumes offline; the caller holds
    /// `admin`.
    pub(super) async fn delete_locked(
        &self,
        ctx: &RequestCtx,
        name: &str,
    ) -> Result<(), CoreError> {
        let in_use = self.shared.projection.read(|s| {
            s.backends.get(name).map(|b| {
                !b.volumes.is_empty()
                    || s.volumes.values().any(|v| {
                        v.state == VolumeState::Creating
                            && v.candidates().iter().any(|p| p.backend == name)
                    })
            })
        });
        match in_use {
            None => return Err(CoreError::NotFound(format!("backend {name} not found"))),
            Some(false) => {
                self.shared
                    .append(
                        &ctx.request_id,
                        vec![Event::backend(name, BackendEvent::Purged)],
                    )
                    .await?;
                stop_backend(&self.shared, name);
            }
            Some(true) => {
                self.shared
                    .append(
                        &ctx.request_id,
                        vec![Event::backend(name, BackendEvent::Offlined)],
                    )
                    .await?;
                if let Some(slot) = self.shared.backend(name)
                    && slot.status.state() == BackendState::Online
                {
                    slot.status.set_state(BackendState::Offline);
                }
            }
        }
        super::class::rematch_all(&self.shared).await;
        Ok(())
    }

    pub fn get_backend(&self, name: &str) -> Result<BackendView, CoreError> {
        self.shared.ensure_readable()?;
        let rec = self
            .shared
            .projection
            .read(|s| s.backends.get(name).cloned())
            .ok_or_else(|| CoreError::NotFound(format!("backend {name} was not found")))?;
        let slot = self.shared.backend(name);
        let classes = self.shared.classes_of_pools();
        let free = slot
            .as_ref()
            .map(|s| read(&s.status.free_bytes).clone())
            .unwrap_or_default();
        let pools = rec
            .pools
            .iter()
            .map(|p| PoolView {
                name: p.name.clone(),
                storage_classes: classes
                    .get(&crate::model::PoolRef::new(name, p.name.clone()))
                    .cloned()
                    .unwrap_or_default(),
                offers: p.offers.clone(),
                total_bytes: p.total_bytes,
                free_bytes: free.get(&p.name).copied(),
            })
            .collect();
        let config = slot
            .as_ref()
            .and_then(|s| s.status.driver().map(|d| d.external_config()))
            .unwrap_or_else(|| serde_json::from_str(&rec.config).unwrap_or_default());
        let state = match slot {
            Some(s) if !rec.online && s.status.state() == BackendState::Online => {
                BackendState::Offline
            }
            Some(s) => s.status.state(),
            None if self.shared.standby_leader().is_some() => {
                BackendState::Failed("not run here: this instance is a standby".into())
            }
            None => BackendState::Failed("backend actor is not running".into()),
        };
        Ok(BackendView {
            name: name.to_string(),
            driver: rec.driver,
            protocol: rec.protocol,
            config,
            pools,
            online: rec.online,
            state,
            volumes: rec.volumes.iter().map(String::from).collect(),
        })
    }

    /// Names of online backends, sorted.
    pub fn list_backends(&self) -> Result<Vec<String>, CoreError> {
        self.shared.ensure_readable()?;
        Ok(self.shared.projection.read(|s| {
            s.backends
                .iter()
                .filter(|(_, b)| b.online)
                .map(|(n, _)| n.clone())
                .collect()
        }))
    }

    async fn add_storage_class_impl(
        &self,
        ctx: &RequestCtx,
        config: StorageClassConfig,
    ) -> Result<String, CoreError> {
        self.shared.ensure_ready()?;
        crate::model::validate_name("name", &config.name)
            .map_err(|e| CoreError::Invalid(e.to_string()))?;
        let compiled = Arc::new(
            crate::model::CompiledClass::compile(config.clone()).map_err(CoreError::Invalid)?,
        );
        let _admin = self.shared.admin.lock().await;
        self.add_class_locked(ctx, config, compiled).await
    }

    /// Adds a validated class; the caller holds `admin`.
    pub(super) async fn add_class_locked(
        &self,
        ctx: &RequestCtx,
        config: StorageClassConfig,
        compiled: Arc<crate::model::CompiledClass>,
    ) -> Result<String, CoreError> {
        let name = config.name.clone();
        if self
            .shared
            .projection
            .read(|s| s.classes.contains_key(&name))
        {
            return Err(CoreError::AlreadyExists(format!(
                "storage class {name} already exists"
            )));
        }
        self.shared
            .append(
                &ctx.request_id,
                vec![Event::class(&name, StorageClassEvent::Added { config })],
            )
            .await?;
        start_class(&self.shared, &name, compiled);
        Ok(name)
    }

    async fn delete_storage_class_impl(
        &self,
        ctx: &RequestCtx,
        name: &str,
    ) -> Result<(), CoreError> {
        self.shared.ensure_ready()?;
        let _admin = self.shared.admin.lock().await;
        self.delete_class_locked(ctx, name).await
    }

    /// Deletes a class; the caller holds `admin`.
    pub(super) async fn delete_class_locked(
        &self,
        ctx: &RequestCtx,
        name: &str,
    ) -> Result<(), CoreError> {
        if !self
            .shared
            .projection
            .read(|s| s.classes.contains_key(name))
        {
            return Err(CoreError::NotFound(format!(
                "storage class {name} not found"
            )));
        }
        self.shared
            .append(
                &ctx.request_id,
                vec![Event::class(name, StorageClassEvent::Deleted)],
            )
            .await?;
        write(&self.shared.classes).remove(name);
        Ok(())
    }

    pub fn get_storage_class(&self, name: &str) -> Result<StorageClassView, CoreError> {
        self.shared.ensure_readable()?;
        let config = self
            .shared
            .projection
            .read(|s| s.classes.get(name).cloned())
            .ok_or_else(|| CoreError::NotFound(format!("storage class {name} was not found")))?;
        let mut pools: BTreeMap<String, Vec<String>> = BTreeMap::new();
        if let Some(slot) = read(&self.shared.classes).get(name) {
            for p in slot.matched.iter() {
                pools
                    .entry(p.backend.clone())
                    .or_default()
                    .push(p.pool.clone());
            }
        }
        Ok(StorageClassView { config, pools })
    }

    pub fn list_storage_classes(&self) -> Result<Vec<String>, CoreError> {
        self.shared.ensure_readable()?;
        Ok(self
            .shared
            .projection
            .read(|s| s.classes.keys().cloned().collect()))
    }

    async fn add_volume_impl(
        &self,
        ctx: &RequestCtx,
        request: VolumeRequest,
    ) -> Result<VolumeView, CoreError> {
        self.shared.ensure_ready()?;
        let size_bytes = request.size_bytes().unwrap_or(0);
        let config = request.into_config();
        let name = config.name.clone();
        super::volume::send(&self.shared, &name, || super::volume::CreateVolume {
            ctx: ctx.clone(),
            config: config.clone(),
            size_bytes,
        })
        .await??;
        self.volume_view(&name)
    }

    async fn delete_volume_impl(&self, ctx: &RequestCtx, name: &str) -> Result<(), CoreError> {
        self.shared.ensure_ready()?;
        if !self
            .shared
            .projection
            .read(|s| s.volumes.contains_key(name))
        {
            return Err(CoreError::NotFound(format!("volume {name} not found")));
        }
        super::volume::send(&self.shared, name, || super::volume::DeleteVolume {
            ctx: ctx.clone(),
        })
        .await?
    }

    pub fn get_volume(&self, name: &str) -> Result<VolumeView, CoreError> {
        self.shared.ensure_readable()?;
        self.volume_view(name)
    }

    fn volume_view(&self, name: &str) -> Result<VolumeView, CoreError> {
        let rec = self
            .shared
            .projection
            .read(|s| s.volumes.get(name).cloned())
            .ok_or_else(|| CoreError::NotFound(format!("volume {name} was not found")))?;
        let mut config = rec.config();
        if rec.access_secrets().is_some() {
            config.access_information.iscsi_initiator_secret = crate::secrets::REDACTED.into();
            config.access_information.iscsi_target_secret = crate::secrets::REDACTED.into();
        }
        // Trident shows clones with an empty pool.
        let pool = if config.clone_source_volume.is_empty() {
            rec.pool().to_string()
        } else {
            String::new()
        };
        Ok(VolumeView {
            config,
            backend: rec.backend().to_string(),
            pool,
            orphaned: rec.orphaned,
            state: rec.state,
            last_error: rec.last_error().map(str::to_string),
        })
    }

    /// The CHAP secrets of a volume's access information, unsealed (`iscsiInitiatorSecret`,
    /// `iscsiTargetSecret`; empty when it has none). Only for frontends that must hand them
    /// to a host, like the Kubernetes frontend's CHAP Secret; never for API output.
    pub fn volume_access_secrets(
        &self,
        name: &str,
    ) -> Result<BTreeMap<String, serde_json::Value>, CoreError> {
        self.shared.ensure_readable()?;
        let sealed = self
            .shared
            .projection
            .read(|s| s.volumes.get(name).map(|v| v.access_secrets().cloned()))
            .ok_or_else(|| CoreError::NotFound(format!("volume {name} was not found")))?;
        match sealed {
            None => Ok(BTreeMap::new()),
            Some(sealed) => self
                .shared
                .secrets
                .unseal(&sealed)
                .map_err(|e| CoreError::Internal(format!("volume {name}: {e}"))),
        }
    }

    pub fn list_volumes(&self) -> Result<Vec<String>, CoreError> {
        self.shared.ensure_readable()?;
        let mut names: Vec<String> = self
            .shared
            .projection
            .read(|s| s.volumes.keys().map(String::from).collect());
        names.sort();
        Ok(names)
    }
}

/// A snapshot of a volume.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotView {
    pub volume: String,
    pub name: String,
    /// Unix milliseconds; `None` while it is being made.
    pub created_ms: Option<u64>,
    pub size_bytes: u64,
}

/// Why one pool would or would not take a volume of a class.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolExplanation {
    pub backend: String,
    pub pool: String,
    /// Whether a create would try this pool now.
    pub candidate: bool,
    /// Every reason it would not (empty for candidates); the class verdict comes first.
    pub reasons: Vec<String>,
}

/// The placement explanation for a class: every pool of every backend.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Explanation {
    pub storage_class: String,
    pub protocol: Protocol,
    pub size_bytes: Option<u64>,
    pub pools: Vec<PoolExplanation>,
}

impl Core {
    async fn create_snapshot_impl(
        &self,
        ctx: &RequestCtx,
        request: &SnapshotRequest,
    ) -> Result<SnapshotView, CoreError> {
        self.shared.ensure_ready()?;
        let volume = &request.volume;
        super::volume::send(&self.shared, volume, || super::volume::CreateSnapshot {
            ctx: ctx.clone(),
            snapshot: request.snapshot.clone(),
        })
        .await??;
        self.get_snapshot(volume, &request.snapshot)
    }

    async fn delete_snapshot_impl(
        &self,
        ctx: &RequestCtx,
        volume: &str,
        snapshot: &str,
    ) -> Result<(), CoreError> {
        self.shared.ensure_ready()?;
        super::volume::send(&self.shared, volume, || super::volume::DeleteSnapshot {
            ctx: ctx.clone(),
            snapshot: snapshot.to_string(),
        })
        .await?
    }

    pub fn get_snapshot(&self, volume: &str, snapshot: &str) -> Result<SnapshotView, CoreError> {
        self.list_snapshots(Some(volume))?
            .into_iter()
            .find(|s| s.name == snapshot)
            .ok_or_else(|| {
                CoreError::NotFound(format!("snapshot {snapshot} of volume {volume} not found"))
            })
    }

    /// Snapshots of one volume, or of every volume; sorted by volume, then name.
    pub fn list_snapshots(&self, volume: Option<&str>) -> Result<Vec<SnapshotView>, CoreError> {
        self.shared.ensure_readable()?;
        let mut out: Vec<SnapshotView> = self.shared.projection.read(|s| {
            let views = |name: &str, v: &crate::projections::VolumeRecord| {
                v.snapshots()
                    .iter()
                    .map(|(snap, r)| SnapshotView {
                        volume: name.to_string(),
                        name: snap.clone(),
                        created_ms: r.created_ms,
                        size_bytes: r.size_bytes,
                    })
                    .collect::<Vec<_>>()
            };
            match volume {
                Some(name) => s
                    .volumes
                    .get_key_value(name)
                    .map(|(n, v)| views(n, v))
                    .ok_or_else(|| CoreError::NotFound(format!("volume {name} was not found"))),
                None => Ok(s.volumes.iter().flat_map(|(n, v)| views(n, v)).collect()),
            }
        })?;
        out.sort_by(|a, b| (&a.volume, &a.name).cmp(&(&b.volume, &b.name)));
        Ok(out)
    }

    async fn resize_volume_impl(
        &self,
        ctx: &RequestCtx,
        request: &ResizeRequest,
    ) -> Result<VolumeView, CoreError> {
        self.shared.ensure_ready()?;
        let name = &request.volume;
        super::volume::send(&self.shared, name, || super::volume::ResizeVolume {
            ctx: ctx.clone(),
            size: request.size.as_str().to_string(),
            size_bytes: request.size.bytes(),
        })
        .await??;
        self.volume_view(name)
    }

    /// For every pool of every backend: would a create in `class` (with `protocol` and `size`)
    /// try it, and if not, why.
    pub fn explain(
        &self,
        class: &str,
        protocol: Protocol,
        size_bytes: Option<u64>,
    ) -> Result<Explanation, CoreError> {
        self.shared.ensure_readable()?;
        let config = self
            .shared
            .projection
            .read(|s| s.classes.get(class).cloned())
            .ok_or_else(|| CoreError::NotFound(format!("storage class {class} was not found")))?;
        let compiled = crate::model::CompiledClass::compile(config).map_err(CoreError::Internal)?;
        let backends = self.shared.projection.read(|s| s.backends.clone());
        let mut pools = Vec::new();
        for (name, rec) in &backends {
            let slot = self.shared.backend(name);
            let free = slot
                .as_ref()
                .map(|s| read(&s.status.free_bytes).clone())
                .unwrap_or_default();
            let state = slot.as_ref().map(|s| s.status.state());
            for pool in &rec.pools {
                let mut reasons = Vec::new();
                let verdict = compiled.check(name, pool);
                if !verdict.is_match() {
                    reasons.push(verdict.to_string());
                }
                if !rec.online {
                    reasons.push(format!(
                        "backend {name} is offline (deleted while it still has volumes)"
                    ));
                } else {
                    match &state {
                        Some(BackendState::Online) => {}
                        Some(BackendState::Failed(why)) => {
                            reasons.push(format!("backend {name} has failed: {why}"))
                        }
                        Some(other) => {
                            reasons.push(format!("backend {name} is {}", other.as_str()))
                        }
                        None => reasons.push(format!("backend {name} is not running")),
                    }
                }
                if !super::shared::serves(rec.protocol, protocol) {
                    reasons.push(format!(
                        "protocol mismatch: the class was asked for {protocol}, backend {name} serves {}",
                        if rec.protocol == Protocol::Any { "any" } else { rec.protocol.as_str() }
                    ));
                }
                if let (Some(size), Some(free)) = (size_bytes, free.get(&pool.name))
                    && *free < size
                {
                    reasons.push(format!(
                        "not enough free capacity: {} requested, {} free",
                        crate::model::format_size(size),
                        crate::model::format_size(*free)
                    ));
                }
                pools.push(PoolExplanation {
                    backend: name.clone(),
                    pool: pool.name.clone(),
                    candidate: reasons.is_empty(),
                    reasons,
                });
            }
        }
        Ok(Explanation {
            storage_class: class.to_string(),
            protocol,
            size_bytes,
            pools,
        })
    }
}

/// Where a backend actor gets its driver.
pub(crate) enum DriverSource {
    /// Built and discovered just now (added or updated over the API): online at once.
    /// The last field is the concurrency limit.
    Ready(
        Arc<dyn crate::drivers::StorageDriver>,
        crate::drivers::Discovery,
        usize,
    ),
    /// A config from the log (secrets merged back): built and discovered by the actor, with
    /// retries, while the backend shows `initializing`/`failed`.
    Build(serde_json::Value),
    /// The recorded config cannot be used at all (e.g. its secrets cannot be unsealed).
    Broken(String),
}

/// Starts a backend actor and registers it.
pub(crate) fn start_backend(shared: &Arc<Shared>, name: &str, source: DriverSource) {
    let (status, rebuild) = match source {
        DriverSource::Ready(driver, discovery, limit) => {
            let status = BackendStatus::new(BackendState::Online, Some(driver), limit);
            *write(&status.free_bytes) = discovery.free_bytes;
            (status, None)
        }
        DriverSource::Build(doc) => {
            let limit = super::backend::concurrency_limit(&doc)
                .unwrap_or(super::backend::DEFAULT_BACKEND_LIMIT);
            (
                BackendStatus::new(BackendState::Initializing, None, limit),
                Some(doc),
            )
        }
        DriverSource::Broken(why) => (
            BackendStatus::new(
                BackendState::Failed(why),
                None,
                super::backend::DEFAULT_BACKEND_LIMIT,
            ),
            None,
        ),
    };
    let status = Arc::new(status);
    let actor = super::backend::BackendActor::new(
        name.to_string(),
        status.clone(),
        shared.clone(),
        rebuild,
    );
    let addr = actix::Actor::start_in_arbiter(&shared.arbiter, move |_| actor);
    write(&shared.backends).insert(name.to_string(), BackendSlot { addr, status });
}

/// Stops and unregisters a backend actor (in-flight calls finish on their own).
pub(crate) fn stop_backend(shared: &Shared, name: &str) {
    if let Some(slot) = write(&shared.backends).remove(name) {
        slot.addr.do_send(super::backend::Stop);
    }
}

/// Starts a storage class actor with its matched pools computed.
pub(crate) fn start_class(
    shared: &Arc<Shared>,
    name: &str,
    compiled: Arc<crate::model::CompiledClass>,
) {
    let matched = Arc::new(super::class::matching_pools(shared, &compiled));
    let actor = super::class::StorageClassActor {
        name: name.to_string(),
        compiled,
        shared: shared.clone(),
    };
    let addr = actix::Actor::start_in_arbiter(&shared.arbiter, move |_| actor);
    write(&shared.classes).insert(name.to_string(), ClassSlot { addr, matched });
}
