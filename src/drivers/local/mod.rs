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
//!     Two pools must not be the same directory or nested in each other.
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

pub mod config;
mod fs;
mod media;

#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, HashMap};
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::{SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

pub use config::{LocalConfig, Media};

use super::{
    Attachment, CloneRequest, CommonConfig, CreateRequest, Discovery, DriverError, DriverResult,
    SnapshotInfo, StorageDriver, VolumeInfo,
};
use crate::model::{AccessInfo, Offer, PoolInfo, Protocol, Request, VolumeConfig};

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

// ---- records (the metadata file) ----

/// How a volume is stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
enum Kind {
    /// A directory.
    File,
    /// An image file.
    Block,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
enum Provisioning {
    Thin,
    Thick,
}

/// Where a recorded object is in its life. `Creating` and `Deleting` are written before the
/// disk is touched, so that a restart can roll back or finish.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
enum Phase {
    Creating,
    Ready,
    Deleting,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct VolumeRecord {
    protocol: Kind,
    size_bytes: u64,
    provisioning: Provisioning,
    created_ms: u64,
    state: Phase,
    /// `<volume>` or `<volume>@<snapshot>` this volume was cloned from (informational).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    clone_source: Option<String>,
    #[serde(default)]
    snapshots: BTreeMap<String, SnapshotRecord>,
    /// A call that excludes every other (create, destroy, block resize) is running.
    #[serde(skip)]
    busy: bool,
    /// Calls reading the volume's data (a clone from it, a snapshot of it) are running.
    #[serde(skip)]
    readers: u32,
}

impl VolumeRecord {
    fn new(kind: Kind, size: u64, provisioning: Provisioning) -> VolumeRecord {
        VolumeRecord {
            protocol: kind,
            size_bytes: size,
            provisioning,
            created_ms: now_ms(),
            state: Phase::Creating,
            clone_source: None,
            snapshots: BTreeMap::new(),
            busy: true,
            readers: 0,
        }
    }

    /// The bytes the pool's accounting counts for this volume and its snapshots.
    fn allocated(&self) -> u64 {
        self.snapshots
            .values()
            .fold(self.size_bytes, |sum, s| sum.saturating_add(s.size_bytes))
    }

    /// Whether the volume exists for callers (a create still running does not).
    fn visible(&self) -> bool {
        self.state != Phase::Creating
    }

    fn thick(&self) -> bool {
        self.provisioning == Provisioning::Thick
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct SnapshotRecord {
    created_ms: u64,
    size_bytes: u64,
    state: Phase,
    /// Being created or deleted.
    #[serde(skip)]
    busy: bool,
    /// Clones from this snapshot are running.
    #[serde(skip)]
    readers: u32,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct MetadataFile {
    format: u32,
    driver: String,
    #[serde(default)]
    volumes: BTreeMap<String, VolumeRecord>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct MetadataOut<'a> {
    format: u32,
    driver: &'a str,
    volumes: &'a BTreeMap<String, VolumeRecord>,
}

// ---- runtime state ----

/// An opened pool.
#[derive(Debug)]
struct Pool {
    name: String,
    /// The canonical path of the directory.
    path: PathBuf,
    /// The directory, opened once: everything below it is reached from here.
    root: OwnedFd,
    media: Media,
    /// `configured`, or how detection found the media.
    media_source: String,
    capacity: Option<u64>,
}

impl Pool {
    /// Opens `volumes/` or `snapshots/` (never through a symbolic link), creating it when
    /// `create`. `Ok(None)` when missing and not created.
    fn subdir(&self, name: &str, create: bool) -> DriverResult<Option<OwnedFd>> {
        let what = || format!("open {name}/");
        if create {
            let (fd, created) =
                fs::ensure_dir(self.root.as_fd(), name).map_err(|e| self.io(&what(), e))?;
            if created {
                fs::sync_dir(self.root.as_fd()).map_err(|e| self.io(&what(), e))?;
            }
            Ok(Some(fd))
        } else {
            fs::open_dir(self.root.as_fd(), name).map_err(|e| self.io(&what(), e))
        }
    }

    /// An error about this pool: the class follows the I/O error (no space → `Conflict`).
    fn io(&self, what: &str, e: io::Error) -> DriverError {
        let msg = format!(
            "local pool {} ({}): {what}: {e}",
            self.name,
            self.path.display()
        );
        match e.kind() {
            io::ErrorKind::StorageFull
            | io::ErrorKind::QuotaExceeded
            | io::ErrorKind::AlreadyExists => DriverError::Conflict(msg),
            _ => DriverError::Other(msg),
        }
    }

    fn offers(&self) -> BTreeMap<String, Offer> {
        BTreeMap::from([
            ("backendType".to_string(), Offer::strings([DRIVER_NAME])),
            ("media".to_string(), Offer::strings([self.media.as_str()])),
            (
                "provisioningType".to_string(),
                Offer::strings(["thin", "thick"]),
            ),
            ("snapshots".to_string(), Offer::Bool(true)),
            ("clones".to_string(), Offer::Bool(true)),
            ("encryption".to_string(), Offer::Bool(false)),
        ])
    }

    fn access(&self, name: &str, kind: Kind) -> AccessInfo {
        let path = self
            .path
            .join(VOLUMES_DIR)
            .join(object_name(name, kind))
            .to_string_lossy()
            .into_owned();
        match kind {
            Kind::File => AccessInfo {
                nfs_path: path.clone(),
                local_path: path,
                ..AccessInfo::default()
            },
            Kind::Block => AccessInfo {
                local_path: path,
                ..AccessInfo::default()
            },
        }
    }

    fn info(&self, name: &str, v: &VolumeRecord) -> VolumeInfo {
        VolumeInfo {
            internal_name: name.to_string(),
            pool: self.name.clone(),
            size_bytes: v.size_bytes,
            access: self.access(name, v.protocol),
        }
    }

    /// Total and free bytes, given what is recorded in the pool.
    fn space(&self, allocated: u64) -> DriverResult<(u64, u64)> {
        match self.capacity {
            Some(cap) => Ok((cap, cap.saturating_sub(allocated))),
            None => {
                let (total, avail) =
                    fs::fs_space(self.root.as_fd()).map_err(|e| self.io("statvfs", e))?;
                Ok((total, avail.min(total.saturating_sub(allocated))))
            }
        }
    }

    /// Writes the pool's metadata file.
    fn persist(&self, records: &BTreeMap<String, VolumeRecord>) -> DriverResult<()> {
        let out = MetadataOut {
            format: METADATA_FORMAT,
            driver: DRIVER_NAME,
            volumes: records,
        };
        let bytes = serde_json::to_vec_pretty(&out)
            .map_err(|e| DriverError::Other(format!("cannot encode metadata: {e}")))?;
        fs::write_atomic(self.root.as_fd(), METADATA_FILE, METADATA_TMP, &bytes)
            .map_err(|e| self.io(&format!("write {METADATA_FILE}"), e))
    }

    /// Removes a volume's snapshots and its directory or image. Succeeds when already gone.
    fn remove_volume(&self, name: &str, kind: Kind) -> DriverResult<()> {
        let what = format!("remove volume {name}");
        if let Some(snaps) = self.subdir(SNAPSHOTS_DIR, false)? {
            let removed = fs::remove_tree(snaps.as_fd(), name).map_err(|e| self.io(&what, e))?;
            if removed {
                fs::sync_dir(snaps.as_fd()).map_err(|e| self.io(&what, e))?;
            }
        }
        if let Some(vols) = self.subdir(VOLUMES_DIR, false)? {
            let removed = fs::remove_tree(vols.as_fd(), &object_name(name, kind))
                .map_err(|e| self.io(&what, e))?;
            if removed {
                fs::sync_dir(vols.as_fd()).map_err(|e| self.io(&what, e))?;
            }
        }
        Ok(())
    }

    /// Removes one snapshot. Succeeds when already gone.
    fn remove_snapshot(&self, name: &str, snap: &str) -> DriverResult<()> {
        let what = format!("remove snapshot {snap} of volume {name}");
        let Some(snaps) = self.subdir(SNAPSHOTS_DIR, false)? else {
            return Ok(());
        };
        let Some(dir) = fs::open_dir(snaps.as_fd(), name).map_err(|e| self.io(&what, e))? else {
            return Ok(());
        };
        if fs::remove_tree(dir.as_fd(), snap).map_err(|e| self.io(&what, e))? {
            fs::sync_dir(dir.as_fd()).map_err(|e| self.io(&what, e))?;
        }
        Ok(())
    }

    /// Makes a new, empty volume. Anything already at its path is left alone (`Conflict`).
    fn make_volume(
        &self,
        name: &str,
        kind: Kind,
        size: u64,
        thick: bool,
        mode: u32,
    ) -> DriverResult<()> {
        let what = format!("create volume {name}");
        let vols = self
            .subdir(VOLUMES_DIR, true)?
            .ok_or_else(|| missing(VOLUMES_DIR))?;
        self.clear_stray_snapshots(name)?;
        let obj = object_name(name, kind);
        match kind {
            Kind::File => fs::make_dir(vols.as_fd(), &obj, mode),
            Kind::Block => fs::create_image(vols.as_fd(), &obj, size, thick),
        }
        .map_err(|e| self.already_there(&what, &obj, e))?;
        fs::sync_dir(vols.as_fd()).map_err(|e| self.io(&what, e))
    }

    /// Copies a volume (or one of its snapshots) into a new volume.
    fn copy_volume(
        &self,
        source: &str,
        snapshot: Option<&str>,
        name: &str,
        kind: Kind,
        thick: bool,
    ) -> DriverResult<()> {
        let what = match snapshot {
            None => format!("clone volume {source} to {name}"),
            Some(s) => format!("clone snapshot {s} of volume {source} to {name}"),
        };
        let vols = self
            .subdir(VOLUMES_DIR, true)?
            .ok_or_else(|| missing(VOLUMES_DIR))?;
        self.clear_stray_snapshots(name)?;
        let obj = object_name(name, kind);
        let copied = match snapshot {
            None => fs::copy(vols.as_fd(), &object_name(source, kind), vols.as_fd(), &obj),
            Some(s) => {
                let snaps = self
                    .subdir(SNAPSHOTS_DIR, false)?
                    .ok_or_else(|| missing(SNAPSHOTS_DIR))?;
                let dir = fs::open_dir(snaps.as_fd(), source)
                    .map_err(|e| self.io(&what, e))?
                    .ok_or_else(|| missing(&format!("{SNAPSHOTS_DIR}/{source}")))?;
                fs::copy(dir.as_fd(), s, vols.as_fd(), &obj)
            }
        }
        .map_err(|e| self.already_there(&what, &obj, e))?;
        tracing::debug!(
            volume = name,
            source,
            reflinked = copied.reflinked,
            copied = copied.copied,
            "local driver: clone made"
        );
        if thick && kind == Kind::Block {
            fs::allocate_image(vols.as_fd(), &obj).map_err(|e| {
                let _ = fs::remove_tree(vols.as_fd(), &obj);
                self.io(&what, e)
            })?;
        }
        fs::sync_dir(vols.as_fd()).map_err(|e| self.io(&what, e))
    }

    /// Copies a volume into `snapshots/<name>/<snap>`.
    fn copy_to_snapshot(
        &self,
        name: &str,
        snap: &str,
        kind: Kind,
        thick: bool,
    ) -> DriverResult<()> {
        let what = format!("snapshot volume {name} as {snap}");
        let vols = self
            .subdir(VOLUMES_DIR, false)?
            .ok_or_else(|| missing(VOLUMES_DIR))?;
        let snaps = self
            .subdir(SNAPSHOTS_DIR, true)?
            .ok_or_else(|| missing(SNAPSHOTS_DIR))?;
        let (dir, created) = fs::ensure_dir(snaps.as_fd(), name).map_err(|e| self.io(&what, e))?;
        if created {
            fs::sync_dir(snaps.as_fd()).map_err(|e| self.io(&what, e))?;
        }
        fs::copy(vols.as_fd(), &object_name(name, kind), dir.as_fd(), snap)
            .map_err(|e| self.already_there(&what, snap, e))?;
        if thick && kind == Kind::Block {
            fs::allocate_image(dir.as_fd(), snap).map_err(|e| {
                let _ = fs::remove_tree(dir.as_fd(), snap);
                self.io(&what, e)
            })?;
        }
        fs::sync_dir(dir.as_fd()).map_err(|e| self.io(&what, e))
    }

    /// Snapshots left in `snapshots/<name>` by an earlier volume of that name are not
    /// recorded (they went with it): remove them before a new volume takes the name.
    fn clear_stray_snapshots(&self, name: &str) -> DriverResult<()> {
        if let Some(snaps) = self.subdir(SNAPSHOTS_DIR, false)?
            && fs::remove_tree(snaps.as_fd(), name)
                .map_err(|e| self.io(&format!("remove stale snapshots of {name}"), e))?
        {
            fs::sync_dir(snaps.as_fd()).map_err(|e| self.io("sync snapshots/", e))?;
        }
        Ok(())
    }

    /// `AlreadyExists` from the filesystem: something unrecorded is in the way.
    fn already_there(&self, what: &str, obj: &str, e: io::Error) -> DriverError {
        if e.kind() == io::ErrorKind::AlreadyExists {
            DriverError::Conflict(format!(
                "local pool {} ({}): {what}: {obj} already exists but is not recorded as a \
                 volume of this backend; remove it or use another name",
                self.name,
                self.path.display()
            ))
        } else {
            self.io(what, e)
        }
    }
}

fn missing(what: &str) -> DriverError {
    DriverError::Other(format!("{what} is missing from the pool directory"))
}

/// The entry of a volume in `volumes/`.
fn object_name(name: &str, kind: Kind) -> String {
    match kind {
        Kind::File => name.to_string(),
        Kind::Block => format!("{name}{IMAGE_SUFFIX}"),
    }
}

/// Every volume, by pool.
#[derive(Debug, Default)]
struct State {
    /// Indexed like the opened pools.
    pools: Vec<BTreeMap<String, VolumeRecord>>,
    /// Volume name → pool index.
    index: HashMap<String, usize>,
}

impl State {
    fn find(&self, name: &str) -> Option<(usize, &VolumeRecord)> {
        let &pi = self.index.get(name)?;
        self.pools[pi].get(name).map(|v| (pi, v))
    }

    fn find_mut(&mut self, name: &str) -> Option<(usize, &mut VolumeRecord)> {
        let &pi = self.index.get(name)?;
        self.pools[pi].get_mut(name).map(|v| (pi, v))
    }

    fn insert(&mut self, pi: usize, name: &str, v: VolumeRecord) {
        self.index.insert(name.to_string(), pi);
        self.pools[pi].insert(name.to_string(), v);
    }

    fn remove(&mut self, name: &str) -> Option<VolumeRecord> {
        let pi = self.index.remove(name)?;
        self.pools[pi].remove(name)
    }

    fn allocated(&self, pi: usize) -> u64 {
        self.pools[pi]
            .values()
            .fold(0u64, |sum, v| sum.saturating_add(v.allocated()))
    }

    /// Gives back the read slot a clone took on its source.
    fn release(&mut self, source: &str, snapshot: Option<&str>) {
        if let Some((_, v)) = self.find_mut(source) {
            match snapshot.and_then(|s| v.snapshots.get_mut(s)) {
                Some(s) => s.readers = s.readers.saturating_sub(1),
                None => v.readers = v.readers.saturating_sub(1),
            }
        }
    }
}

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

impl Inner {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The opened pools, opening them on first use.
    fn ready(&self) -> DriverResult<&[Pool]> {
        if let Some(p) = self.pools.get() {
            return Ok(p);
        }
        let _opening = self.opening.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(p) = self.pools.get() {
            return Ok(p);
        }
        let (pools, state) = self.open_pools()?;
        *self.lock() = state;
        Ok(self.pools.get_or_init(|| pools))
    }

    fn open_pools(&self) -> DriverResult<(Vec<Pool>, State)> {
        let mut pools: Vec<Pool> = Vec::with_capacity(self.cfg.pools.len());
        let mut state = State::default();
        for (pi, pc) in self.cfg.pools.iter().enumerate() {
            let pool = open_pool(pc, &pools)?;
            let mut records = load_records(&pool)?;
            recover(&pool, &mut records)?;
            for name in records.keys() {
                if let Some(&other) = state.index.get(name) {
                    return Err(DriverError::Other(format!(
                        "volume {name} is recorded in both pool {} and pool {}",
                        pools[other].name, pool.name
                    )));
                }
                state.index.insert(name.clone(), pi);
            }
            state.pools.push(records);
            pools.push(pool);
        }
        Ok((pools, state))
    }

    fn pool<'a>(&self, pools: &'a [Pool], name: &str) -> DriverResult<(usize, &'a Pool)> {
        if name.is_empty() {
            return Err(DriverError::Invalid(
                "no pool specified for the volume".to_string(),
            ));
        }
        pools
            .iter()
            .enumerate()
            .find(|(_, p)| p.name == name)
            .ok_or_else(|| {
                DriverError::Invalid(format!(
                    "pool {name} does not exist on local backend {}",
                    self.cfg.backend_name
                ))
            })
    }

    /// Refuses what does not fit in the pool's free bytes.
    fn check_fits(
        &self,
        pool: &Pool,
        st: &State,
        pi: usize,
        need: u64,
        what: &str,
    ) -> DriverResult<()> {
        let (_, free) = pool.space(st.allocated(pi))?;
        if need > free {
            return Err(DriverError::Conflict(format!(
                "{what} is too large: {need} bytes requested, {free} bytes available in pool {}",
                pool.name
            )));
        }
        Ok(())
    }

    /// How a new volume is stored: the backend's protocol, else the volume's, else file.
    fn kind_for(&self, requested: Protocol) -> Kind {
        match (self.cfg.protocol, requested) {
            (Protocol::Block, _) | (Protocol::Any, Protocol::Block) => Kind::Block,
            _ => Kind::File,
        }
    }

    /// Thin or thick: the class's `provisioningType` request, else the volume's
    /// `spaceReserve`, else `defaults.spaceReserve`.
    fn provisioning(
        &self,
        requests: &BTreeMap<String, Request>,
        config: &VolumeConfig,
    ) -> DriverResult<Provisioning> {
        match requests.get("provisioningType") {
            Some(Request::String(s)) if s == "thick" => return Ok(Provisioning::Thick),
            Some(Request::String(s)) if s == "thin" => return Ok(Provisioning::Thin),
            Some(other) => {
                return Err(DriverError::Invalid(format!(
                    "invalid value for provisioningType: {:?} is not thin or thick",
                    crate::model::attributes::clip(&other.to_string())
                )));
            }
            None => {}
        }
        match config.space_reserve.as_str() {
            "volume" => Ok(Provisioning::Thick),
            "none" => Ok(Provisioning::Thin),
            "" if self.cfg.default_thick => Ok(Provisioning::Thick),
            "" => Ok(Provisioning::Thin),
            other => Err(DriverError::Invalid(format!(
                "invalid value for spaceReserve: {:?} is not none or volume",
                crate::model::attributes::clip(other)
            ))),
        }
    }

    fn unix_permissions(&self, config: &VolumeConfig) -> DriverResult<u32> {
        if config.unix_permissions.is_empty() {
            return Ok(self.cfg.default_unix_permissions);
        }
        config::parse_unix_permissions(&config.unix_permissions)
            .map_err(|e| DriverError::Invalid(format!("invalid value for unixPermissions: {e}")))
    }

    // ---- operations (blocking) ----

    fn discover(&self) -> DriverResult<Discovery> {
        let pools = self.ready()?;
        let allocated: Vec<u64> = {
            let st = self.lock();
            (0..pools.len()).map(|pi| st.allocated(pi)).collect()
        };
        let mut infos = Vec::with_capacity(pools.len());
        let mut free_bytes = BTreeMap::new();
        for (pool, allocated) in pools.iter().zip(allocated) {
            let (total, free) = pool.space(allocated)?;
            infos.push(PoolInfo {
                name: pool.name.clone(),
                offers: pool.offers(),
                total_bytes: Some(total),
            });
            free_bytes.insert(pool.name.clone(), free);
        }
        Ok(Discovery {
            backend_name: self.cfg.backend_name.clone(),
            protocol: self.cfg.protocol,
            pools: infos,
            free_bytes,
        })
    }

    fn create(&self, req: &CreateRequest) -> DriverResult<VolumeInfo> {
        let pools = self.ready()?;
        let name = req.internal_name.as_str();
        check_internal_name("internalName", name)?;
        let (pi, pool) = self.pool(pools, &req.pool)?;
        let size = if req.size_bytes == 0 {
            self.cfg.default_size_bytes
        } else {
            req.size_bytes
        };
        if size < MIN_VOLUME_BYTES {
            return Err(DriverError::Invalid(format!(
                "requested volume size ({size} bytes) is too small; the minimum volume size is \
                 {MIN_VOLUME_BYTES} bytes (1 MiB)"
            )));
        }
        check_encryption(&req.config)?;
        let kind = self.kind_for(req.config.protocol);
        let provisioning = self.provisioning(&req.requests, &req.config)?;
        // Directories only: an image file is always 0600.
        let mode = match kind {
            Kind::File => self.unix_permissions(&req.config)?,
            Kind::Block => 0o600,
        };
        {
            let mut st = self.lock();
            if st.index.contains_key(name) {
                return Err(already_exists(name));
            }
            self.check_fits(pool, &st, pi, size, &format!("requested volume {name}"))?;
            st.insert(pi, name, VolumeRecord::new(kind, size, provisioning));
            if let Err(e) = pool.persist(&st.pools[pi]) {
                st.remove(name);
                return Err(e);
            }
        }
        let made = pool.make_volume(name, kind, size, provisioning == Provisioning::Thick, mode);
        self.finish_create(pool, pi, name, made)
    }

    /// Records the end of a create or clone: ready, or forgotten after a failure.
    fn finish_create(
        &self,
        pool: &Pool,
        pi: usize,
        name: &str,
        made: DriverResult<()>,
    ) -> DriverResult<VolumeInfo> {
        let mut guard = self.lock();
        let st = &mut *guard;
        match made {
            Ok(()) => {
                let Some((_, v)) = st.find_mut(name) else {
                    return Err(DriverError::Other(format!(
                        "volume {name} vanished while being created"
                    )));
                };
                v.state = Phase::Ready;
                v.busy = false;
                let info = pool.info(name, v);
                pool.persist(&st.pools[pi])?;
                tracing::debug!(volume = name, pool = %pool.name, "local driver: volume created");
                Ok(info)
            }
            Err(e) => {
                st.remove(name);
                if let Err(pe) = pool.persist(&st.pools[pi]) {
                    // Still recorded as creating on disk: rolled back on the next start.
                    tracing::warn!(volume = name, error = %pe, "local driver: cannot record a failed create");
                }
                Err(e)
            }
        }
    }

    fn clone_volume(&self, req: &CloneRequest) -> DriverResult<VolumeInfo> {
        let pools = self.ready()?;
        let name = req.internal_name.as_str();
        let source = req.source_internal_name.as_str();
        let snapshot = req.source_snapshot.as_deref();
        check_internal_name("internalName", name)?;
        check_internal_name("cloneSourceVolumeInternal", source)?;
        if let Some(s) = snapshot {
            check_snapshot_name(s)?;
        }
        check_encryption(&req.config)?;
        let (pi, kind, thick) = {
            let mut guard = self.lock();
            let st = &mut *guard;
            if st.index.contains_key(name) {
                return Err(already_exists(name));
            }
            let Some((pi, src)) = st.find(source).filter(|(_, v)| v.state == Phase::Ready) else {
                return Err(DriverError::NotFound(format!(
                    "source volume {source} not found"
                )));
            };
            if src.busy {
                return Err(busy(source));
            }
            let size = match snapshot {
                None => src.size_bytes,
                Some(s) => match src.snapshots.get(s) {
                    Some(snap) if snap.state == Phase::Ready => snap.size_bytes,
                    _ => {
                        return Err(DriverError::NotFound(format!(
                            "snapshot {s} of volume {source} not found"
                        )));
                    }
                },
            };
            let mut record = VolumeRecord::new(src.protocol, size, src.provisioning);
            record.clone_source = Some(match snapshot {
                None => source.to_string(),
                Some(s) => format!("{source}@{s}"),
            });
            let (kind, thick) = (src.protocol, src.thick());
            let pool = &pools[pi];
            self.check_fits(pool, st, pi, size, &format!("clone {name}"))?;
            if let Some((_, src)) = st.find_mut(source) {
                match snapshot.and_then(|s| src.snapshots.get_mut(s)) {
                    Some(s) => s.readers += 1,
                    None => src.readers += 1,
                }
            }
            st.insert(pi, name, record);
            if let Err(e) = pool.persist(&st.pools[pi]) {
                st.remove(name);
                st.release(source, snapshot);
                return Err(e);
            }
            (pi, kind, thick)
        };
        let pool = &pools[pi];
        let made = pool.copy_volume(source, snapshot, name, kind, thick);
        self.lock().release(source, snapshot);
        self.finish_create(pool, pi, name, made)
    }

    fn get(&self, name: &str) -> DriverResult<Option<VolumeInfo>> {
        let pools = self.ready()?;
        check_internal_name("internalName", name)?;
        let st = self.lock();
        Ok(st
            .find(name)
            .filter(|(_, v)| v.visible())
            .map(|(pi, v)| pools[pi].info(name, v)))
    }

    fn destroy(&self, name: &str) -> DriverResult<()> {
        let pools = self.ready()?;
        check_internal_name("internalName", name)?;
        let (pi, kind, previous) = {
            let mut guard = self.lock();
            let st = &mut *guard;
            let Some((pi, v)) = st.find_mut(name) else {
                return Ok(());
            };
            if v.busy || v.readers > 0 || v.snapshots.values().any(|s| s.busy || s.readers > 0) {
                return Err(busy(name));
            }
            let previous = v.state;
            v.state = Phase::Deleting;
            v.busy = true;
            let kind = v.protocol;
            if let Err(e) = pools[pi].persist(&st.pools[pi]) {
                if let Some((_, v)) = st.find_mut(name) {
                    v.state = previous;
                    v.busy = false;
                }
                return Err(e);
            }
            (pi, kind, previous)
        };
        let pool = &pools[pi];
        let removed = pool.remove_volume(name, kind);
        let mut st = self.lock();
        match removed {
            Ok(()) => {
                st.remove(name);
                pool.persist(&st.pools[pi])?;
                tracing::debug!(volume = name, pool = %pool.name, ?previous, "local driver: volume destroyed");
                Ok(())
            }
            Err(e) => {
                // Stays recorded as deleting: a later destroy (or the next start) finishes.
                if let Some((_, v)) = st.find_mut(name) {
                    v.busy = false;
                }
                Err(e)
            }
        }
    }

    fn resize(&self, name: &str, size: u64) -> DriverResult<()> {
        let pools = self.ready()?;
        check_internal_name("internalName", name)?;
        let (pi, old, thick) = {
            let mut guard = self.lock();
            let st = &mut *guard;
            let Some((pi, v)) = st.find(name).filter(|(_, v)| v.state == Phase::Ready) else {
                return Err(not_found(name));
            };
            let pool = &pools[pi];
            if v.busy || (v.protocol == Kind::Block && v.readers > 0) {
                return Err(busy(name));
            }
            let old = v.size_bytes;
            if size < old {
                return Err(DriverError::Invalid(format!(
                    "cannot shrink volume {name} from {old} to {size} bytes"
                )));
            }
            if size == old {
                return Ok(());
            }
            self.check_fits(pool, st, pi, size - old, &format!("growing volume {name}"))?;
            let Some((_, v)) = st.find_mut(name) else {
                return Err(not_found(name));
            };
            // The new size is taken now, so that concurrent creates see it.
            v.size_bytes = size;
            if v.protocol == Kind::File {
                // A directory's size is only what the pool's accounting counts.
                if let Err(e) = pool.persist(&st.pools[pi]) {
                    if let Some((_, v)) = st.find_mut(name) {
                        v.size_bytes = old;
                    }
                    return Err(e);
                }
                return Ok(());
            }
            v.busy = true;
            (pi, old, v.thick())
        };
        let pool = &pools[pi];
        let grown = pool
            .subdir(VOLUMES_DIR, false)
            .and_then(|d| d.ok_or_else(|| missing(VOLUMES_DIR)))
            .and_then(|vols| {
                fs::grow_image(vols.as_fd(), &object_name(name, Kind::Block), size, thick)
                    .map_err(|e| pool.io(&format!("grow volume {name}"), e))
            });
        let mut guard = self.lock();
        let st = &mut *guard;
        if let Some((_, v)) = st.find_mut(name) {
            v.busy = false;
            if grown.is_err() {
                v.size_bytes = old;
            }
        }
        grown?;
        pool.persist(&st.pools[pi])
    }

    fn create_snapshot(&self, name: &str, snap: &str) -> DriverResult<SnapshotInfo> {
        let pools = self.ready()?;
        check_internal_name("internalName", name)?;
        check_snapshot_name(snap)?;
        let (pi, kind, thick, record) = {
            let mut guard = self.lock();
            let st = &mut *guard;
            let Some((pi, v)) = st.find(name).filter(|(_, v)| v.state == Phase::Ready) else {
                return Err(not_found(name));
            };
            let pool = &pools[pi];
            if v.busy {
                return Err(busy(name));
            }
            if v.snapshots.contains_key(snap) {
                return Err(DriverError::AlreadyExists(format!(
                    "snapshot {snap} of volume {name} already exists"
                )));
            }
            let size = v.size_bytes;
            self.check_fits(
                pool,
                st,
                pi,
                size,
                &format!("snapshot {snap} of volume {name}"),
            )?;
            let record = SnapshotRecord {
                created_ms: now_ms(),
                size_bytes: size,
                state: Phase::Creating,
                busy: true,
                readers: 0,
            };
            let Some((_, v)) = st.find_mut(name) else {
                return Err(not_found(name));
            };
            let (kind, thick) = (v.protocol, v.thick());
            v.readers += 1;
            v.snapshots.insert(snap.to_string(), record.clone());
            if let Err(e) = pool.persist(&st.pools[pi]) {
                if let Some((_, v)) = st.find_mut(name) {
                    v.readers -= 1;
                    v.snapshots.remove(snap);
                }
                return Err(e);
            }
            (pi, kind, thick, record)
        };
        let pool = &pools[pi];
        let made = pool.copy_to_snapshot(name, snap, kind, thick);
        let mut guard = self.lock();
        let st = &mut *guard;
        let Some((_, v)) = st.find_mut(name) else {
            return Err(not_found(name));
        };
        v.readers = v.readers.saturating_sub(1);
        match made {
            Ok(()) => {
                if let Some(s) = v.snapshots.get_mut(snap) {
                    s.state = Phase::Ready;
                    s.busy = false;
                }
                pool.persist(&st.pools[pi])?;
                Ok(SnapshotInfo {
                    name: snap.to_string(),
                    volume_internal_name: name.to_string(),
                    created_ms: record.created_ms,
                    size_bytes: record.size_bytes,
                })
            }
            Err(e) => {
                v.snapshots.remove(snap);
                if let Err(pe) = pool.persist(&st.pools[pi]) {
                    tracing::warn!(volume = name, snapshot = snap, error = %pe, "local driver: cannot record a failed snapshot");
                }
                Err(e)
            }
        }
    }

    fn list_snapshots(&self, name: &str) -> DriverResult<Vec<SnapshotInfo>> {
        self.ready()?;
        check_internal_name("internalName", name)?;
        let st = self.lock();
        let Some((_, v)) = st.find(name).filter(|(_, v)| v.visible()) else {
            return Err(not_found(name));
        };
        let mut out: Vec<SnapshotInfo> = v
            .snapshots
            .iter()
            .filter(|(_, s)| s.state == Phase::Ready)
            .map(|(snap, s)| SnapshotInfo {
                name: snap.clone(),
                volume_internal_name: name.to_string(),
                created_ms: s.created_ms,
                size_bytes: s.size_bytes,
            })
            .collect();
        out.sort_by(|a, b| (a.created_ms, &a.name).cmp(&(b.created_ms, &b.name)));
        Ok(out)
    }

    fn delete_snapshot(&self, name: &str, snap: &str) -> DriverResult<()> {
        let pools = self.ready()?;
        check_internal_name("internalName", name)?;
        check_snapshot_name(snap)?;
        let pi = {
            let mut guard = self.lock();
            let st = &mut *guard;
            let Some((pi, v)) = st.find_mut(name) else {
                return Ok(());
            };
            let volume_busy = v.busy;
            let Some(s) = v.snapshots.get_mut(snap) else {
                return Ok(());
            };
            if volume_busy || s.busy || s.readers > 0 {
                return Err(busy(&format!("{name}@{snap}")));
            }
            let previous = s.state;
            s.state = Phase::Deleting;
            s.busy = true;
            if let Err(e) = pools[pi].persist(&st.pools[pi]) {
                if let Some(s) = st
                    .find_mut(name)
                    .and_then(|(_, v)| v.snapshots.get_mut(snap))
                {
                    s.state = previous;
                    s.busy = false;
                }
                return Err(e);
            }
            pi
        };
        let pool = &pools[pi];
        let removed = pool.remove_snapshot(name, snap);
        let mut guard = self.lock();
        let st = &mut *guard;
        let Some((_, v)) = st.find_mut(name) else {
            return removed;
        };
        match removed {
            Ok(()) => {
                v.snapshots.remove(snap);
                pool.persist(&st.pools[pi])
            }
            Err(e) => {
                if let Some(s) = v.snapshots.get_mut(snap) {
                    s.busy = false;
                }
                Err(e)
            }
        }
    }

    fn list_volumes(&self) -> DriverResult<Vec<VolumeInfo>> {
        let pools = self.ready()?;
        let st = self.lock();
        let mut out: Vec<VolumeInfo> = st
            .pools
            .iter()
            .enumerate()
            .flat_map(|(pi, records)| {
                records
                    .iter()
                    .filter(|(_, v)| v.visible())
                    .map(move |(name, v)| pools[pi].info(name, v))
            })
            .collect();
        out.sort_by(|a, b| a.internal_name.cmp(&b.internal_name));
        Ok(out)
    }

    fn access_info(&self, name: &str) -> DriverResult<AccessInfo> {
        let pools = self.ready()?;
        check_internal_name("internalName", name)?;
        let st = self.lock();
        st.find(name)
            .filter(|(_, v)| v.visible())
            .map(|(pi, v)| pools[pi].access(name, v.protocol))
            .ok_or_else(|| not_found(name))
    }
}

/// Opens (creating when missing) one configured pool.
fn open_pool(pc: &config::PoolConfig, earlier: &[Pool]) -> DriverResult<Pool> {
    let field = format!("pools.{}.path", pc.name);
    let shown = pc.path.display();
    match std::fs::metadata(&pc.path) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => {
            return Err(DriverError::Invalid(format!(
                "invalid value for {field}: {shown} exists and is not a directory"
            )));
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            std::fs::create_dir_all(&pc.path)
                .map_err(|e| DriverError::Other(format!("{field}: cannot create {shown}: {e}")))?;
            if let Some(parent) = pc.path.parent()
                && let Ok(dir) = std::fs::File::open(parent)
            {
                let _ = dir.sync_all();
            }
        }
        Err(e) => {
            return Err(DriverError::Other(format!(
                "{field}: cannot access {shown}: {e}"
            )));
        }
    }
    let path = std::fs::canonicalize(&pc.path)
        .map_err(|e| DriverError::Other(format!("{field}: cannot resolve {shown}: {e}")))?;
    if let Some(other) = earlier
        .iter()
        .find(|o| path.starts_with(&o.path) || o.path.starts_with(&path))
    {
        return Err(DriverError::Invalid(format!(
            "invalid value for {field}: {} overlaps pool {} ({})",
            path.display(),
            other.name,
            other.path.display()
        )));
    }
    let root = fs::open_root(&path)
        .map_err(|e| DriverError::Other(format!("{field}: cannot open {shown}: {e}")))?;
    let (media, media_source) = match pc.media {
        Some(m) => (m, "configured".to_string()),
        None => {
            let d = media::detect(root.as_fd(), &path);
            (d.media, d.how)
        }
    };
    let pool = Pool {
        name: pc.name.clone(),
        path,
        root,
        media,
        media_source,
        capacity: pc.capacity,
    };
    pool.subdir(VOLUMES_DIR, true)?;
    pool.subdir(SNAPSHOTS_DIR, true)?;
    tracing::info!(
        pool = %pool.name,
        path = %pool.path.display(),
        media = pool.media.as_str(),
        media_source = %pool.media_source,
        "local driver: pool opened"
    );
    Ok(pool)
}

/// Reads a pool's metadata file; a missing file is an empty pool.
fn load_records(pool: &Pool) -> DriverResult<BTreeMap<String, VolumeRecord>> {
    let Some(bytes) = fs::read_file(pool.root.as_fd(), METADATA_FILE)
        .map_err(|e| pool.io(&format!("read {METADATA_FILE}"), e))?
    else {
        return Ok(BTreeMap::new());
    };
    let bad = |why: String| {
        DriverError::Other(format!(
            "local pool {} ({}): {METADATA_FILE}: {why}",
            pool.name,
            pool.path.display()
        ))
    };
    let file: MetadataFile = serde_json::from_slice(&bytes)
        .map_err(|e| bad(format!("not a local driver metadata file: {e}")))?;
    if file.format != METADATA_FORMAT || file.driver != DRIVER_NAME {
        return Err(bad(format!(
            "format {} of driver {:?} is not supported (expected format {METADATA_FORMAT} of \
             driver {DRIVER_NAME:?})",
            file.format, file.driver
        )));
    }
    for (name, v) in &file.volumes {
        check_internal_name("internalName", name)
            .map_err(|e| bad(format!("refusing a recorded volume name: {e}")))?;
        for snap in v.snapshots.keys() {
            check_snapshot_name(snap)
                .map_err(|e| bad(format!("refusing a recorded snapshot name: {e}")))?;
        }
    }
    Ok(file.volumes)
}

/// Rolls back creates and finishes deletes that a stop interrupted. What cannot be removed
/// stays recorded as deleting (a destroy retries it).
fn recover(pool: &Pool, records: &mut BTreeMap<String, VolumeRecord>) -> DriverResult<()> {
    let mut changed = false;
    let mut gone = Vec::new();
    for (name, v) in records.iter_mut() {
        if v.state != Phase::Ready {
            match pool.remove_volume(name, v.protocol) {
                Ok(()) => gone.push(name.clone()),
                Err(e) => {
                    tracing::warn!(volume = %name, error = %e, "local driver: cannot clean up an interrupted operation");
                    changed |= v.state != Phase::Deleting;
                    v.state = Phase::Deleting;
                }
            }
            continue;
        }
        let mut gone_snaps = Vec::new();
        for (snap, s) in v.snapshots.iter_mut() {
            if s.state == Phase::Ready {
                continue;
            }
            match pool.remove_snapshot(name, snap) {
                Ok(()) => gone_snaps.push(snap.clone()),
                Err(e) => {
                    tracing::warn!(volume = %name, snapshot = %snap, error = %e, "local driver: cannot clean up an interrupted snapshot operation");
                    changed |= s.state != Phase::Deleting;
                    s.state = Phase::Deleting;
                }
            }
        }
        for snap in gone_snaps {
            v.snapshots.remove(&snap);
            changed = true;
        }
    }
    for name in gone {
        records.remove(&name);
        changed = true;
    }
    if changed {
        pool.persist(records)?;
    }
    Ok(())
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
