//! Storage drivers: one async trait, one module per array family.
//!
//! Drivers know `model` types (and, for arrays, reqwest and quick-xml); they never see events,
//! actors or the log. Actors turn driver results into events. Errors are classified by what the
//! caller can do with them.
//!
//! Files:
//! - `mod.rs`: the trait, its request and result types, [`DriverError`], [`Attachment`].
//! - `config.rs`: the common backend config fields and the JSON field helpers.
//! - `registry.rs`: which family serves which `storageDriverName`, and how its volumes attach.
//! - `conformance/`: the suite every driver runs.
//! - `testing.rs`: helpers shared by the drivers' tests.
//! - `locks.rs`: one async lock per volume name, for arrays that cannot make a create atomic.
//! - `fake/`, `local/`, `ontap/`, `solidfire/`, `eseries/`, `nexentastor/`: one folder per family,
//!   each with `mod.rs` (the trait impl
//!   and its conformance run), `config.rs`, `client.rs` (array I/O), `wire.rs` (encodings)
//!   and what the family needs beyond that.

pub mod config;
pub mod eseries;
pub mod fake;
pub mod limit;
pub mod local;
pub(crate) mod locks;
pub mod nexentastor;
pub mod ontap;
pub mod registry;
pub mod solidfire;

pub mod conformance;
pub mod testing;

use std::collections::BTreeMap;

use async_trait::async_trait;

use crate::model::{AccessInfo, PoolInfo, Protocol, Request, VolumeConfig};

pub use config::CommonConfig;
pub use limit::LimitedDriver;
pub use registry::{BuiltDriver, attachment, build_driver, ignored_keys};

/// The most pools one backend may have, configured or discovered (a large ONTAP cluster has a
/// few hundred aggregates): every pool is shown in the backend's answer, placement, explain
/// and the metrics.
pub const MAX_POOLS_PER_BACKEND: usize = 1024;

/// The most backends storch holds (offline ones with volumes included): each has its own
/// actor, driver and metric series.
pub const MAX_BACKENDS: usize = 512;

/// Refuses a config listing more than [`MAX_POOLS_PER_BACKEND`] pools under `pools` (before the
/// driver is built, so nothing is made for them), or a discovery that found more.
pub fn check_pool_count(doc: &serde_json::Value, discovered: Option<usize>) -> DriverResult<()> {
    let configured = doc.as_object().and_then(|o| {
        o.iter()
            .find(|(k, _)| k.eq_ignore_ascii_case("pools"))
            .and_then(|(_, v)| match v {
                serde_json::Value::Object(m) => Some(m.len()),
                serde_json::Value::Array(a) => Some(a.len()),
                _ => None,
            })
    });
    match (configured, discovered) {
        (Some(n), _) if n > MAX_POOLS_PER_BACKEND => Err(DriverError::Invalid(format!(
            "invalid value for pools: {n} pools, more than the {MAX_POOLS_PER_BACKEND} a backend \
             may have"
        ))),
        (_, Some(n)) if n > MAX_POOLS_PER_BACKEND => Err(DriverError::Invalid(format!(
            "the array has {n} pools, more than the {MAX_POOLS_PER_BACKEND} a backend may have; \
             narrow the backend to fewer (e.g. its aggregate or pool list)"
        ))),
        _ => Ok(()),
    }
}

/// A driver error, classified by what the caller can do about it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DriverError {
    /// The object does not exist on the array.
    #[error("{0}")]
    NotFound(String),
    /// An object with that name already exists on the array.
    #[error("{0}")]
    AlreadyExists(String),
    /// The operation conflicts with the object's state (e.g. not enough free space, busy).
    #[error("{0}")]
    Conflict(String),
    /// The driver or pool cannot do this at all.
    #[error("{0}")]
    Unsupported(String),
    /// The array is unreachable or busy; retrying later may succeed.
    #[error("{0}")]
    Unavailable(String),
    /// The configuration or request is invalid; the message names the field.
    #[error("{0}")]
    Invalid(String),
    /// Anything else.
    #[error("{0}")]
    Other(String),
}

impl DriverError {
    /// Whether retrying the same call later may succeed.
    pub fn is_retryable(&self) -> bool {
        matches!(self, DriverError::Unavailable(_))
    }
}

pub type DriverResult<T> = Result<T, DriverError>;

/// What a driver reports about its backend after initialisation.
#[derive(Debug, Clone, PartialEq)]
pub struct Discovery {
    /// The backend name: `backendName`, or the driver's derived default.
    pub backend_name: String,
    pub protocol: Protocol,
    pub pools: Vec<PoolInfo>,
    /// Free bytes per pool, where known (changes with every create; not an event).
    pub free_bytes: BTreeMap<String, u64>,
}

/// How a host attaches a volume: the kind of source a frontend writes for it (a Kubernetes
/// PV's `nfs`, `iscsi` or `local`). Each family says which of its volumes use which;
/// [`attachment`] derives it from what is stored for a volume.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Attachment {
    /// An NFS export: `nfsServerIp` and `nfsPath`.
    Nfs,
    /// An iSCSI target and LUN: portals, IQN, LUN number, CHAP user.
    Iscsi,
    /// A path on the host storch runs on: `localPath`.
    LocalPath,
}

/// A volume as the array holds it.
#[derive(Debug, Clone, PartialEq)]
pub struct VolumeInfo {
    pub internal_name: String,
    pub pool: String,
    pub size_bytes: u64,
    pub access: AccessInfo,
}

/// A snapshot as the array holds it.
#[derive(Debug, Clone, PartialEq)]
pub struct SnapshotInfo {
    pub name: String,
    pub volume_internal_name: String,
    /// Creation time, unix milliseconds.
    pub created_ms: u64,
    pub size_bytes: u64,
}

/// Everything a driver needs to create one volume.
#[derive(Debug, Clone)]
pub struct CreateRequest {
    pub internal_name: String,
    pub pool: String,
    pub size_bytes: u64,
    /// The volume config (options such as snapshotPolicy, unixPermissions, encryption).
    pub config: VolumeConfig,
    /// The storage class's attribute requests (e.g. provisioningType thin → no space reserve),
    /// and its driver parameters as strings, secrets in clear (the driver's own, declared in
    /// `model::storage_class::driver_parameters`; placement only picks pools whose driver
    /// takes them).
    pub requests: BTreeMap<String, Request>,
}

/// A clone of an existing volume, optionally from one of its snapshots.
#[derive(Debug, Clone)]
pub struct CloneRequest {
    pub internal_name: String,
    pub source_internal_name: String,
    pub source_snapshot: Option<String>,
    pub config: VolumeConfig,
}

/// A create or clone as it was planned: what [`StorageDriver::adopt`] compares an array
/// volume found under its name with.
#[derive(Debug, Clone)]
pub enum PlannedVolume {
    Create(CreateRequest),
    Clone(CloneRequest),
}

impl PlannedVolume {
    pub fn internal_name(&self) -> &str {
        match self {
            PlannedVolume::Create(r) => &r.internal_name,
            PlannedVolume::Clone(r) => &r.internal_name,
        }
    }
}

/// A host that a volume is published to (CSI `ControllerPublishVolume`): the node's name and,
/// when it attaches over iSCSI, its initiator name. See `crate::csi::node_id` for how a CSI
/// node id carries both.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct HostAccess {
    pub node: String,
    /// The host's iSCSI initiator IQN, when it has one.
    pub iscsi_initiator: Option<String>,
}

/// What a publish tells the host beyond the volume's access info (the CSI `publish_context`),
/// e.g. the LUN number the volume got in the host's own mapping. Keys are without prefix.
pub type PublishContext = BTreeMap<String, String>;

/// The publish context key of the LUN number a host sees a volume at, when its own mapping
/// gives it one (the node plugin reads it as `storch.io/iscsiLunNumber`, over the volume's).
pub const PUBLISH_LUN_KEY: &str = "iscsiLunNumber";

/// The volume sizes a driver makes: at least `min_bytes`, at most `max_bytes` where it has a
/// maximum. Placement leaves out pools whose driver refuses a size, and a create no pool can
/// take is refused before anything is recorded; the drivers check the same limits again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SizeLimits {
    pub min_bytes: u64,
    pub max_bytes: Option<u64>,
}

impl SizeLimits {
    /// Any size above zero.
    pub const ANY: SizeLimits = SizeLimits {
        min_bytes: 1,
        max_bytes: None,
    };

    /// At least `min_bytes`, no maximum.
    pub const fn at_least(min_bytes: u64) -> SizeLimits {
        SizeLimits {
            min_bytes,
            max_bytes: None,
        }
    }

    /// Why `size` is outside the limits, if it is (the driver's and placement's one wording).
    pub fn check(&self, size: u64) -> Result<(), String> {
        use crate::model::format_size;
        if size < self.min_bytes {
            return Err(format!(
                "requested volume size ({size} bytes) is too small; the minimum volume size is \
                 {} bytes ({})",
                self.min_bytes,
                format_size(self.min_bytes)
            ));
        }
        if let Some(max) = self.max_bytes
            && size > max
        {
            return Err(format!(
                "requested volume size ({size} bytes) is too large; the maximum volume size is \
                 {max} bytes ({})",
                format_size(max)
            ));
        }
        Ok(())
    }
}

/// One array family. Every method is idempotent where the array allows it: `destroy` of a
/// volume already gone succeeds; `create` of a name that exists fails with `AlreadyExists`
/// (the caller decides whether to adopt it).
#[async_trait]
pub trait StorageDriver: Send + Sync + std::fmt::Debug {
    /// The `storageDriverName` this driver implements, e.g. `fake`.
    fn driver_name(&self) -> &'static str;

    /// The config as shown by GET backend: common part plus driver fields, never secrets.
    fn external_config(&self) -> serde_json::Value;

    /// The array-side name for a volume (docs/trident-contract.md#internal-names).
    fn internal_name(&self, volume_name: &str) -> String;

    /// The volume sizes this backend makes (checked by placement before anything is
    /// recorded). The default takes any size.
    fn size_limits(&self) -> SizeLimits {
        SizeLimits::ANY
    }

    /// Contacts the array: pools, their offers and capacity.
    async fn discover(&self) -> DriverResult<Discovery>;

    async fn create(&self, req: &CreateRequest) -> DriverResult<VolumeInfo>;
    async fn clone_volume(&self, req: &CloneRequest) -> DriverResult<VolumeInfo>;
    /// `Ok(None)` when the volume does not exist.
    async fn get(&self, internal_name: &str) -> DriverResult<Option<VolumeInfo>>;
    /// The volume an interrupted create or clone left under the planned name, to adopt:
    /// `Ok(None)` when there is none; a refusal when the array's volume is not storch's
    /// (`AlreadyExists`) or differs from the plan (`Conflict`, naming the field). A refused
    /// volume is left exactly as it is. The default trusts `get` (drivers whose names are
    /// unique and whose volumes carry nothing to compare).
    async fn adopt(&self, planned: &PlannedVolume) -> DriverResult<Option<VolumeInfo>> {
        self.get(planned.internal_name()).await
    }
    /// Idempotent: a volume already gone is success.
    async fn destroy(&self, internal_name: &str) -> DriverResult<()>;
    async fn resize(&self, internal_name: &str, size_bytes: u64) -> DriverResult<()>;
    async fn create_snapshot(
        &self,
        internal_name: &str,
        snapshot: &str,
    ) -> DriverResult<SnapshotInfo>;
    async fn list_snapshots(&self, internal_name: &str) -> DriverResult<Vec<SnapshotInfo>>;
    /// Idempotent: a snapshot already gone is success.
    async fn delete_snapshot(&self, internal_name: &str, snapshot: &str) -> DriverResult<()>;
    /// Every volume this backend manages (for orphan checks).
    async fn list_volumes(&self) -> DriverResult<Vec<VolumeInfo>>;
    async fn access_info(&self, internal_name: &str) -> DriverResult<AccessInfo>;

    /// Whether a host must be granted access to a volume before it can attach it (an igroup,
    /// volume access group, host mapping or host group per host). `false`: every host the
    /// backend lets in reaches every volume (NFS exports, local paths, a shared igroup).
    fn needs_publish(&self) -> bool {
        false
    }
    /// Grants `host` access to the volume. Idempotent: publishing to a host that already has
    /// access returns the same context. A volume that does not exist is `NotFound`.
    async fn publish(
        &self,
        _internal_name: &str,
        _host: &HostAccess,
    ) -> DriverResult<PublishContext> {
        Ok(PublishContext::new())
    }
    /// Takes `host`'s access away. Idempotent: a host without access, or a volume already
    /// gone, is success.
    async fn unpublish(&self, _internal_name: &str, _host: &HostAccess) -> DriverResult<()> {
        Ok(())
    }
}
