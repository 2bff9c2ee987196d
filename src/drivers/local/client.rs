//! The pools on disk: opening a pool, the volume and snapshot objects under it, the metadata
//! file's durable writes and recovery of interrupted calls at start.

use super::config::Media;
use super::wire::{Kind, MetadataOut, Phase, VolumeRecord};
use super::{
    DRIVER_NAME, IMAGE_SUFFIX, METADATA_FILE, METADATA_FORMAT, METADATA_TMP, SNAPSHOTS_DIR,
    VOLUMES_DIR, config, fs, media,
};
use crate::drivers::{DriverError, DriverResult, VolumeInfo};
use crate::model::{AccessInfo, Offer};
use std::collections::BTreeMap;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::path::PathBuf;

/// An opened pool.
#[derive(Debug)]
pub(super) struct Pool {
    pub(super) name: String,
    /// The canonical path of the directory.
    pub(super) path: PathBuf,
    /// The directory, opened once: everything below it is reached from here.
    pub(super) root: OwnedFd,
    pub(super) media: Media,
    /// `configured`, or how detection found the media.
    pub(super) media_source: String,
    pub(super) capacity: Option<u64>,
}

impl Pool {
    /// Opens `volumes/` or `snapshots/` (never through a symbolic link), creating it when
    /// `create`. `Ok(None)` when missing and not created.
    pub(super) fn subdir(&self, name: &str, create: bool) -> DriverResult<Option<OwnedFd>> {
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
    pub(super) fn io(&self, what: &str, e: io::Error) -> DriverError {
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

    pub(super) fn offers(&self) -> BTreeMap<String, Offer> {
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

    pub(super) fn access(&self, name: &str, kind: Kind) -> AccessInfo {
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

    /// Whether a recorded volume is still on disk: a directory or image removed by hand is
    /// not (drift reconciliation shows it missing). An error other than "not found" keeps it
    /// (a volume is never reported gone on a doubt).
    pub(super) fn on_disk(&self, name: &str, kind: Kind) -> bool {
        let path = self.path.join(VOLUMES_DIR).join(object_name(name, kind));
        // Whatever is there now (even something planted in its place, which the volume's
        // operations refuse) keeps it: only an absent entry is gone.
        match path.symlink_metadata() {
            Ok(_) => true,
            Err(e) => e.kind() != io::ErrorKind::NotFound,
        }
    }

    pub(super) fn info(&self, name: &str, v: &VolumeRecord) -> VolumeInfo {
        VolumeInfo {
            internal_name: name.to_string(),
            pool: self.name.clone(),
            size_bytes: v.size_bytes,
            access: self.access(name, v.protocol),
        }
    }

    /// Total and free bytes, given what is recorded in the pool.
    pub(super) fn space(&self, allocated: u64) -> DriverResult<(u64, u64)> {
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
    pub(super) fn persist(&self, records: &BTreeMap<String, VolumeRecord>) -> DriverResult<()> {
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
    pub(super) fn remove_volume(&self, name: &str, kind: Kind) -> DriverResult<()> {
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
    pub(super) fn remove_snapshot(&self, name: &str, snap: &str) -> DriverResult<()> {
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
    pub(super) fn make_volume(
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
    pub(super) fn copy_volume(
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
    pub(super) fn copy_to_snapshot(
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
    pub(super) fn clear_stray_snapshots(&self, name: &str) -> DriverResult<()> {
        if let Some(snaps) = self.subdir(SNAPSHOTS_DIR, false)?
            && fs::remove_tree(snaps.as_fd(), name)
                .map_err(|e| self.io(&format!("remove stale snapshots of {name}"), e))?
        {
            fs::sync_dir(snaps.as_fd()).map_err(|e| self.io("sync snapshots/", e))?;
        }
        Ok(())
    }

    /// `AlreadyExists` from the filesystem: something unrecorded is in the way.
    pub(super) fn already_there(&self, what: &str, obj: &str, e: io::Error) -> DriverError {
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

pub(super) fn missing(what: &str) -> DriverError {
    DriverError::Other(format!("{what} is missing from the pool directory"))
}

/// The entry of a volume in `volumes/`.
pub(super) fn object_name(name: &str, kind: Kind) -> String {
    match kind {
        Kind::File => name.to_string(),
        Kind::Block => format!("{name}{IMAGE_SUFFIX}"),
    }
}

/// Opens (creating when missing) one configured pool.
pub(super) fn open_pool(pc: &config::PoolConfig, earlier: &[Pool]) -> DriverResult<Pool> {
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
    check_initialised(&field, &path)?;
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

/// A pool's directory must be empty or storch's: one with the metadata file, or holding only
/// what opening a pool makes (`volumes`, `snapshots`, the metadata file's temporary).
fn check_initialised(field: &str, path: &std::path::Path) -> DriverResult<()> {
    let entries = std::fs::read_dir(path)
        .map_err(|e| DriverError::Other(format!("{field}: cannot list {}: {e}", path.display())))?;
    let mut foreign = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| {
            DriverError::Other(format!("{field}: cannot list {}: {e}", path.display()))
        })?;
        let name = entry.file_name();
        if name == METADATA_FILE {
            return Ok(());
        }
        if name != VOLUMES_DIR && name != SNAPSHOTS_DIR && name != METADATA_TMP {
            foreign.push(name.to_string_lossy().into_owned());
        }
    }
    if foreign.is_empty() {
        return Ok(());
    }
    foreign.sort();
    let more = if foreign.len() > 3 { ", …" } else { "" };
    foreign.truncate(3);
    Err(DriverError::Invalid(format!(
        "invalid value for {field}: {} is not empty (it holds {}{more}) and storch did not \
         initialise it ({METADATA_FILE} is missing); use an empty or new directory",
        path.display(),
        foreign.join(", ")
    )))
}

/// Rolls back creates and finishes deletes that a stop interrupted. What cannot be removed
/// stays recorded as deleting (a destroy retries it).
pub(super) fn recover(
    pool: &Pool,
    records: &mut BTreeMap<String, VolumeRecord>,
) -> DriverResult<()> {
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
