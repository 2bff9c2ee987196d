//! `Core`: the handle every frontend (REST, CLI server side, Kubernetes, benchmarks) uses.
//! It hides the actix addresses; commands go to actors, reads come from the projection.

use std::collections::BTreeMap;

use crate::model::{Offer, Protocol, StorageClassConfig, VolumeConfig};

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

/// Start-up state of the core.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Readiness {
    Replaying,
    Ready,
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

/// A volume's lifecycle state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VolumeState {
    /// Intent recorded, placement in progress (or to be reconciled after a crash).
    Creating,
    Online,
    /// Delete requested; retried with backoff until the array confirms.
    Deleting,
}

impl VolumeState {
    pub fn as_str(self) -> &'static str {
        match self {
            VolumeState::Creating => "creating",
            VolumeState::Online => "online",
            VolumeState::Deleting => "deleting",
        }
    }
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

/// The handle to the running core. Cheap to clone.
#[derive(Clone)]
pub struct Core {
    _private: (),
}

#[allow(unused_variables)]
impl Core {
    pub fn readiness(&self) -> Readiness {
        todo!()
    }

    /// Adds a backend from its config document (JSON value; YAML is converted by the caller).
    /// An existing name is an update. Returns the backend name.
    pub async fn add_backend(
        &self,
        ctx: &RequestCtx,
        doc: serde_json::Value,
    ) -> Result<String, CoreError> {
        todo!()
    }

    /// Updates backend `name`; returns the (possibly new) name.
    pub async fn update_backend(
        &self,
        ctx: &RequestCtx,
        name: &str,
        doc: serde_json::Value,
    ) -> Result<String, CoreError> {
        todo!()
    }

    /// Deletes a backend without volumes, or takes one with volumes offline.
    pub async fn delete_backend(&self, ctx: &RequestCtx, name: &str) -> Result<(), CoreError> {
        todo!()
    }

    pub fn get_backend(&self, name: &str) -> Result<BackendView, CoreError> {
        todo!()
    }

    /// Names of online backends, sorted.
    pub fn list_backends(&self) -> Result<Vec<String>, CoreError> {
        todo!()
    }

    pub async fn add_storage_class(
        &self,
        ctx: &RequestCtx,
        config: StorageClassConfig,
    ) -> Result<String, CoreError> {
        todo!()
    }

    pub async fn delete_storage_class(
        &self,
        ctx: &RequestCtx,
        name: &str,
    ) -> Result<(), CoreError> {
        todo!()
    }

    pub fn get_storage_class(&self, name: &str) -> Result<StorageClassView, CoreError> {
        todo!()
    }

    pub fn list_storage_classes(&self) -> Result<Vec<String>, CoreError> {
        todo!()
    }

    /// Creates a volume (or a clone when `cloneSourceVolume` is set); returns it once the
    /// outcome is durable.
    pub async fn add_volume(
        &self,
        ctx: &RequestCtx,
        config: VolumeConfig,
    ) -> Result<VolumeView, CoreError> {
        todo!()
    }

    pub async fn delete_volume(&self, ctx: &RequestCtx, name: &str) -> Result<(), CoreError> {
        todo!()
    }

    pub fn get_volume(&self, name: &str) -> Result<VolumeView, CoreError> {
        todo!()
    }

    pub fn list_volumes(&self) -> Result<Vec<String>, CoreError> {
        todo!()
    }
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
}

impl Default for CoreOptions {
    fn default() -> Self {
        CoreOptions {
            data_dir: "storch-data".into(),
            durability: crate::log::Durability::Flush,
            volume_idle: std::time::Duration::from_secs(30),
            checkpoint_every: 10_000,
        }
    }
}

/// The running core: its handle plus what is needed to stop it cleanly.
pub struct CoreRuntime {
    _private: (),
}

impl CoreRuntime {
    /// Opens the log and starts the actors; replay runs in the background (reads answer
    /// `NotReady` until it is done). Fails at once if the data dir cannot be opened or is held
    /// by another process. Must be called inside a multi-thread tokio runtime.
    pub async fn start(opts: CoreOptions) -> Result<CoreRuntime, CoreError> {
        let _ = opts;
        todo!()
    }

    pub fn core(&self) -> Core {
        todo!()
    }

    /// Stops accepting commands, lets in-flight work finish, stops the actors, flushes the log.
    pub async fn shutdown(self) {
        todo!()
    }
}
