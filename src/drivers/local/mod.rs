//! The `local` driver: volumes on this host's filesystems (storch issue 4). A file volume is a
//! directory, a block volume an image file; snapshots and clones are reflinks where the
//! filesystem can make them and copies elsewhere.
//!
//! # Config
//!
//! ```json
//! {"version": 1, "storageDriverName": "local", "backendName": "optional",
//!  "storagePrefix": "optional", "protocol": "" | "file" | "block",
//!  "pools": {"fast": {"path": "/srv/storch/fast", "media": "ssd", "capacity": "500Gi"},
//!            "bulk": {"path": "/srv/storch/bulk"}},
//!  "defaults": {"size": "1G", "spaceReserve": "none" | "volume", "unixPermissions": "0755"}}
//! ```
//!
//! - `backendName`: absent or empty → `local_<hostname>` (characters of the host name other
//!   than ASCII letters, digits, `.`, `-`, `_` become `_`; plain `local` without a host name).
//!   Give one explicitly when the host name may change: the backend is known by its name.
//! - `pools` (required, at least one): each pool is a directory.
//!   - `path` (required): absolute. Created with its parents when missing; a path that exists
//!     and is not a directory is refused. Symbolic links in the configured path itself are
//!     followed once, when the pool is opened; nothing below it is ever reached through one.
//!     Two pools must not be the same directory or nested in each other. A directory that
//!     exists, is not empty and was not initialised by storch (no `storch-local.json`, and
//!     entries other than `volumes` and `snapshots`) is refused. A config that comes over the
//!     API must also put every pool below a root the operator allows (`serve --local-root`,
//!     by default the data dir), away from the event log and from every other local
//!     backend's pools (`roots.rs`); the operator's `serve --config` file is trusted.
//!   - `media`: `ssd`, `hdd` or `hybrid`; absent → detected from the block device under the
//!     directory (see `media.rs`: `/sys/block/<disk>/queue/rotational`, `0` → ssd, `1` → hdd;
//!     no block device, as on tmpfs or overlay → ssd). How it was found is shown by GET backend
//!     (`mediaSource`).
//!   - `capacity`: a size (`"500Gi"`, `"1TB"`) or a number of bytes. With it, the pool's total
//!     is the capacity and its free bytes are the capacity less what volumes and snapshots
//!     are recorded to hold. Without it, the total is the filesystem's size (`statvfs`) and the
//!     free bytes are the smaller of the filesystem's available bytes and its size less what is
//!     recorded. Recorded sizes count in full: a sparse (thin) image counts its whole size.
//!   - Unknown keys in a pool are refused (typos would otherwise pass silently).
//! - `protocol`: `""` (the default) lets each volume choose through its own `protocol`
//!   (`block` → an image file; `file` or `""` → a directory); `file` or `block` forces one.
//! - `defaults.size`: the size of a volume created with size 0 (default 1G).
//! - `defaults.spaceReserve`: `volume` makes volumes thick unless their storage class requests
//!   `provisioningType=thin`; `none` (the default) thin.
//! - `defaults.unixPermissions`: octal mode of new file-volume directories (default `0755`); a
//!   volume's own `unixPermissions` wins.
//!
//! Every error names the field (`invalid value for pools.fast.path: …`). The config is only
//! parsed when the driver is built; the directories are opened, created and checked on the
//! first call (`discover` when a backend is added), off the async runtime.
//!
//! # Internal names
//!
//! `<prefix><volume name>`, where the prefix is `storagePrefix` when given (`""` for none) and
//! [`config::DEFAULT_PREFIX`] (`storch-`) when absent, `null` or `{}`. Internal names and
//! snapshot names must be safe path segments: non-empty, no `/`, `\`, NUL or control
//! characters, not `.` or `..`, and at most [`MAX_INTERNAL_NAME_LEN`] bytes (so that `.img`
//! still fits a 255-byte segment); anything else is `Invalid`. A prefix with such characters is
//! refused in the config.
//!
//! # On disk
//!
//! ```text
//! <pool path>/
//!   storch-local.json            metadata (written atomically: temp, fsync, rename, fsync dir)
//!   volumes/<internal>           file volume: a directory
//!   volumes/<internal>.img       block volume: an image file of exactly the volume's size
//!   snapshots/<internal>/<snap>  a snapshot: a directory or an image file like its volume
//! ```
//!
//! The metadata file records, per volume: protocol, size, thin or thick, creation time, clone
//! source, snapshots (size, creation time) and a state. It is the source of truth: a volume
//! exists when it is recorded. Entries in `volumes/` that are not recorded are left alone; a
//! create over one fails with `Conflict`. Every mutation is recorded before it touches the disk
//! (`creating`, `deleting`) and again when done, and each changed directory is fsynced; on
//! start, interrupted creates are rolled back and interrupted deletes finished.
//!
//! Thin images are sparse (`set_len`); thick ones are allocated (`fallocate`, or zeros written
//! where the filesystem cannot). Thin or thick: the storage class's `provisioningType` request,
//! else the volume's `spaceReserve` (`volume` → thick), else `defaults.spaceReserve`. A thick
//! file volume records the choice but nothing is preallocated, and a directory's size is not
//! enforced (it is what the pool's accounting counts). Resize grows an image (allocating the
//! new part when thick) or a directory's recorded size; shrinking is `Invalid`.
//!
//! Snapshots and clones copy the volume: `FICLONE` reflinks per file where the filesystem
//! supports them (btrfs, XFS), otherwise a copy that keeps holes. Directory trees are copied
//! without following symbolic links (links are copied as links), keeping modes and, as root,
//! owners; devices, FIFOs and sockets are skipped; trees nested deeper than 256 levels are not
//! copied (the clone or snapshot fails cleanly), though they are removed whatever their depth. A snapshot of a volume in use is a copy taken file by file, not an atomic
//! point in time. Snapshots count against the pool like volumes (they are full copies, or
//! reflinks that may come apart), and go with their volume.
//!
//! # Safety
//!
//! Nothing from a request reaches a path without being checked as a single safe segment, and
//! everything below a pool's root (the root is opened once and kept open) is reached with
//! `openat`-style calls and `O_NOFOLLOW`: a symbolic link planted as `volumes`, `snapshots`,
//! a volume's directory or image, a snapshot directory, or the metadata file is refused (or,
//! when removing, only the link is removed). Names read back from the metadata file are
//! checked the same way.
//!
//! All filesystem work runs in `tokio::task::spawn_blocking`. Concurrent calls on one driver
//! are safe; a call that finds its volume in the middle of another call that excludes it (a
//! destroy during a clone from it, a resize during a snapshot, …) fails with `Unavailable`
//! (retryable). Two drivers (backends) must not share a pool directory.
//!
//! # Files
//!
//! - `mod.rs`: the driver, the trait impl and its conformance run.
//! - `config.rs`: the backend config.
//! - `state.rs`: every volume by pool, and the checks a call makes against it.
//! - `ops.rs`: the operations, blocking (run on `spawn_blocking`).
//! - `client.rs`: the pools on disk: opening, volume and snapshot objects, recovery.
//! - `wire.rs`: the metadata file's records and reading them back.
//! - `fs.rs`: `openat`-style filesystem calls that never follow a link.
//! - `media.rs`: detecting a pool's media from `/sys/block`.
//! - `roots.rs`: where pools may live (below the operator's roots, apart from storch's files
//!   and from other backends' pools), checked before anything is created.
//! - `tests.rs`: the unit tests.

mod client;
pub mod config;
mod fs;
mod media;
mod ops;
pub mod roots;
mod state;
mod wire;

#[cfg(test)]
mod tests;

use std::sync::{Arc, Mutex, OnceLock};
use std::time::{SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use serde_json::{Map, Value, json};

pub use config::{LocalConfig, Media};

use self::client::Pool;
use self::state::State;
use super::{
    Attachment, CloneRequest, CommonConfig, CreateRequest, Discovery, DriverError, DriverResult,
    SnapshotInfo, StorageDriver, VolumeInfo,
};
use crate::model::{AccessInfo, VolumeConfig};

/// The `storageDriverName` of this driver.
pub const DRIVER_NAME: &str = "local";

/// How local volumes attach: by their path on this host, file or block alike.
pub const ATTACHMENT: Attachment = Attachment::LocalPath;

/// The smallest volume the driver makes: 1 MiB.
pub const MIN_VOLUME_BYTES: u64 = 1 << 20;

/// The longest internal name: a path segment holds 255 bytes, and block images add `.img`.
pub const MAX_INTERNAL_NAME_LEN: usize = 255 - IMAGE_SUFFIX.len();

/// The per-pool metadata file, in the pool's directory.
pub const METADATA_FILE: &str = "storch-local.json";
const METADATA_TMP: &str = "storch-local.json.tmp";
/// Where volumes live in a pool.
pub const VOLUMES_DIR: &str = "volumes";
/// Where snapshots live in a pool: one directory per volume.
pub const SNAPSHOTS_DIR: &str = "snapshots";
/// The suffix of block volume images.
pub const IMAGE_SUFFIX: &str = ".img";
/// The version of the metadata file format.
const METADATA_FORMAT: u32 = 1;

// ---- the driver ----

/// The local driver. Build it with [`LocalDriver::new`] or through `build_driver`.
pub struct LocalDriver {
    inner: Arc<Inner>,
}

struct Inner {
    cfg: LocalConfig,
    /// Set once every pool is open and its metadata loaded.
    pools: OnceLock<Vec<Pool>>,
    /// Held while opening the pools.
    opening: Mutex<()>,
    state: Mutex<State>,
}

impl std::fmt::Debug for LocalDriver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalDriver")
            .field("backend_name", &self.inner.cfg.backend_name)
            .field(
                "pools",
                &self
                    .inner
                    .cfg
                    .pools
                    .iter()
                    .map(|p| (&p.name, &p.path))
                    .collect::<Vec<_>>(),
            )
            .field("open", &self.inner.pools.get().is_some())
            .finish_non_exhaustive()
    }
}

impl LocalDriver {
    /// Parses a whole local backend config (common part included).
    pub fn new(doc: &Value) -> DriverResult<LocalDriver> {
        let common = CommonConfig::parse(doc)?;
        Self::from_config(doc, &common)
    }

    /// Builds the driver from a backend config whose common part is already parsed. Touches no
    /// file: the pools are opened on the first call.
    pub fn from_config(doc: &Value, common: &CommonConfig) -> DriverResult<LocalDriver> {
        let cfg = LocalConfig::parse(doc, common)?;
        Ok(LocalDriver {
            inner: Arc::new(Inner {
                cfg,
                pools: OnceLock::new(),
                opening: Mutex::new(()),
                state: Mutex::new(State::default()),
            }),
        })
    }

    /// The backend name: `backendName`, else `local_<hostname>`.
    pub fn backend_name(&self) -> &str {
        &self.inner.cfg.backend_name
    }

    /// Runs `f` on a blocking thread.
    async fn run<T, F>(&self, f: F) -> DriverResult<T>
    where
        F: FnOnce(&Inner) -> DriverResult<T> + Send + 'static,
        T: Send + 'static,
    {
        let inner = Arc::clone(&self.inner);
        match tokio::task::spawn_blocking(move || f(&inner)).await {
            Ok(r) => r,
            Err(e) => Err(DriverError::Other(format!(
                "local driver: filesystem task failed: {e}"
            ))),
        }
    }
}

fn check_internal_name(field: &'static str, name: &str) -> DriverResult<()> {
    crate::model::validate_name(field, name).map_err(|e| DriverError::Invalid(e.to_string()))?;
    if name.len() > MAX_INTERNAL_NAME_LEN {
        return Err(DriverError::Invalid(format!(
            "{field} is longer than {MAX_INTERNAL_NAME_LEN} bytes (the local driver's names are \
             path segments of at most 255 bytes, {IMAGE_SUFFIX} included)"
        )));
    }
    Ok(())
}

fn check_snapshot_name(name: &str) -> DriverResult<()> {
    crate::model::validate_name("snapshot name", name)
        .map_err(|e| DriverError::Invalid(e.to_string()))
}

/// The local driver stores data as it is written: an encrypted volume is refused.
fn check_encryption(config: &VolumeConfig) -> DriverResult<()> {
    if matches!(
        config.encryption.as_str(),
        "1" | "t" | "T" | "TRUE" | "true" | "True"
    ) {
        return Err(DriverError::Unsupported(
            "the local driver does not encrypt volumes (encryption=false)".to_string(),
        ));
    }
    Ok(())
}

fn not_found(name: &str) -> DriverError {
    DriverError::NotFound(format!("volume {name} not found"))
}

fn already_exists(name: &str) -> DriverError {
    DriverError::AlreadyExists(format!("volume {name} already exists"))
}

fn busy(name: &str) -> DriverError {
    DriverError::Unavailable(format!(
        "volume {name} is busy with another operation; try again"
    ))
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

#[async_trait]
impl StorageDriver for LocalDriver {
    fn driver_name(&self) -> &'static str {
        DRIVER_NAME
    }

    fn external_config(&self) -> Value {
        let cfg = &self.inner.cfg;
        let opened = self.inner.pools.get();
        let pools: Map<String, Value> = cfg
            .pools
            .iter()
            .enumerate()
            .map(|(i, pc)| {
                let mut pool = json!({
                    "path": pc.path.to_string_lossy(),
                    "media": pc.media.map(Media::as_str),
                    "capacity": pc.capacity,
                });
                if let Some(p) = opened.and_then(|ps| ps.get(i)) {
                    pool["resolvedPath"] = json!(p.path.to_string_lossy());
                    pool["media"] = json!(p.media.as_str());
                    pool["mediaSource"] = json!(p.media_source);
                }
                (pc.name.clone(), pool)
            })
            .collect();
        json!({
            "version": 1,
            "storageDriverName": DRIVER_NAME,
            "backendName": cfg.backend_name,
            "storagePrefix": cfg.storage_prefix,
            "protocol": cfg.protocol.as_str(),
            "pools": pools,
            "defaults": {
                "size": crate::model::format_size(cfg.default_size_bytes),
                "spaceReserve": if cfg.default_thick { "volume" } else { "none" },
                "unixPermissions": format!("{:04o}", cfg.default_unix_permissions),
            },
        })
    }

    fn internal_name(&self, volume_name: &str) -> String {
        format!("{}{volume_name}", self.inner.cfg.prefix)
    }

    fn size_limits(&self) -> super::SizeLimits {
        super::SizeLimits::at_least(MIN_VOLUME_BYTES)
    }

    async fn discover(&self) -> DriverResult<Discovery> {
        self.run(|d| d.discover()).await
    }

    async fn create(&self, req: &CreateRequest) -> DriverResult<VolumeInfo> {
        let req = req.clone();
        self.run(move |d| d.create(&req)).await
    }

    async fn clone_volume(&self, req: &CloneRequest) -> DriverResult<VolumeInfo> {
        let req = req.clone();
        self.run(move |d| d.clone_volume(&req)).await
    }

    async fn get(&self, internal_name: &str) -> DriverResult<Option<VolumeInfo>> {
        let name = internal_name.to_string();
        self.run(move |d| d.get(&name)).await
    }

    async fn destroy(&self, internal_name: &str) -> DriverResult<()> {
        let name = internal_name.to_string();
        self.run(move |d| d.destroy(&name)).await
    }

    async fn resize(&self, internal_name: &str, size_bytes: u64) -> DriverResult<()> {
        let name = internal_name.to_string();
        self.run(move |d| d.resize(&name, size_bytes)).await
    }

    async fn create_snapshot(
        &self,
        internal_name: &str,
        snapshot: &str,
    ) -> DriverResult<SnapshotInfo> {
        let (name, snap) = (internal_name.to_string(), snapshot.to_string());
        self.run(move |d| d.create_snapshot(&name, &snap)).await
    }

    async fn list_snapshots(&self, internal_name: &str) -> DriverResult<Vec<SnapshotInfo>> {
        let name = internal_name.to_string();
        self.run(move |d| d.list_snapshots(&name)).await
    }

    async fn delete_snapshot(&self, internal_name: &str, snapshot: &str) -> DriverResult<()> {
        let (name, snap) = (internal_name.to_string(), snapshot.to_string());
        self.run(move |d| d.delete_snapshot(&name, &snap)).await
    }

    async fn list_volumes(&self) -> DriverResult<Vec<VolumeInfo>> {
        self.run(|d| d.list_volumes()).await
    }

    async fn access_info(&self, internal_name: &str) -> DriverResult<AccessInfo> {
        let name = internal_name.to_string();
        self.run(move |d| d.access_info(&name)).await
    }
}

#[cfg(test)]
mod conformance_run {
    use std::os::fd::AsFd;

    use serde_json::json;

    use super::tests::{Area, GIB, MIB};
    use super::*;
    use crate::drivers::conformance::{self, ConformanceOptions};
    use crate::drivers::testing::{free, req};

    fn conformance_opts() -> ConformanceOptions {
        ConformanceOptions {
            min_size_bytes: Some(MIN_VOLUME_BYTES),
            size_bytes: 8 * MIB,
            ..ConformanceOptions::default()
        }
    }

    #[tokio::test]
    async fn conformance_file() {
        let a = Area::new();
        let d = a.driver(json!({}));
        conformance::run(&d, "p1", &conformance_opts()).await;
        assert!(d.list_volumes().await.unwrap().is_empty());
        assert_eq!(free(&d, "p1").await, GIB);
        let left: Vec<_> = std::fs::read_dir(a.pool("p1").join(VOLUMES_DIR))
            .unwrap()
            .collect();
        assert!(left.is_empty(), "volumes left on disk: {left:?}");
    }

    #[tokio::test]
    async fn conformance_block_thin() {
        let a = Area::new();
        let d = a.driver(json!({"protocol": "block"}));
        conformance::run(&d, "p1", &conformance_opts()).await;
        assert_eq!(free(&d, "p1").await, GIB);
    }

    #[tokio::test]
    async fn conformance_block_thick() {
        let a = Area::new();
        let d = a.driver(json!({"protocol": "block", "defaults": {"spaceReserve": "volume"}}));
        conformance::run(&d, "p1", &conformance_opts()).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn conformance_through_build_driver() {
        let a = Area::new();
        let mut doc = a.cfg(json!({}));
        doc.as_object_mut().unwrap().remove("storagePrefix");
        let built = crate::drivers::build_driver(&doc).unwrap();
        assert_eq!(built.driver.driver_name(), "local");
        assert_eq!(built.driver.internal_name("v"), "storch-v");
        conformance::run(built.driver.as_ref(), "p1", &conformance_opts()).await;
    }

    #[tokio::test]
    async fn conformance_without_a_capacity_cap() {
        // The filesystem's free space moves with everything else on the host: no exact checks.
        let a = Area::new();
        let d = a.driver(json!({"pools": {"p1": {"path": a.pool("p1")}}}));
        conformance::run(
            &d,
            "p1",
            &ConformanceOptions {
                capacity: false,
                ..conformance_opts()
            },
        )
        .await;
        let disc = d.discover().await.unwrap();
        let (total, _) = fs::fs_space(
            fs::open_root(&a.pool("p1"))
                .as_ref()
                .map(AsFd::as_fd)
                .unwrap(),
        )
        .unwrap();
        assert_eq!(disc.pools[0].total_bytes, Some(total));
        // More than the filesystem holds does not fit.
        assert!(matches!(
            d.create(&req("huge", "p1", total + 1)).await,
            Err(DriverError::Conflict(_))
        ));
    }
}
