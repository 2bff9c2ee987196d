//! The one seam between the Node service and the host: every file, mount, iSCSI, block-device
//! and filesystem action the service takes goes through [`HostOps`]. `real` runs the host's
//! tools (`mount`, `umount`, `iscsiadm`, `blkid`, `mkfs.*`, `resize2fs`, `xfs_growfs`) and reads
//! `/proc/self/mountinfo` and `/dev/disk/by-path`; `fake` keeps a model of a host and records
//! every call, for tests.

use std::path::{Path, PathBuf};
use std::time::Duration;

use async_trait::async_trait;

/// What a path is (symlinks followed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathKind {
    Dir,
    File,
    /// A block device node, with its device number.
    Block {
        rdev: u64,
    },
    Other,
}

/// One entry of the mount table (`/proc/self/mountinfo`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MountPoint {
    /// Where it is mounted.
    pub target: PathBuf,
    /// The mount source as the kernel shows it: a device (`/dev/sdb`), `server:/path`, …
    pub source: String,
    pub fstype: String,
    pub readonly: bool,
    /// The filesystem's device number (`major:minor`).
    pub dev: String,
    /// The directory (or file) of that filesystem mounted here: `/` for a whole filesystem,
    /// the source path for a bind mount.
    pub root: String,
}

impl MountPoint {
    /// What is visible at the mount: the same for a filesystem and every bind of it.
    pub fn origin(&self) -> Origin {
        Origin {
            dev: self.dev.clone(),
            root: self.root.clone(),
        }
    }
}

/// What a mount shows: a filesystem (`dev`) and the path inside it (`root`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Origin {
    pub dev: String,
    pub root: String,
}

/// `major:minor` of a device number, as mountinfo writes it.
pub fn dev_string(rdev: u64) -> String {
    format!(
        "{}:{}",
        rustix::fs::major(rdev as rustix::fs::Dev),
        rustix::fs::minor(rdev as rustix::fs::Dev)
    )
}

/// What the host sees at `path`: the filesystem of the deepest mount holding it, and the path
/// inside that filesystem. `None` when no mount holds it (never on a real host: `/` does).
pub fn origin_of(mounts: &[MountPoint], path: &Path) -> Option<Origin> {
    let holder = holder(mounts, path)?;
    let rest = path.strip_prefix(&holder.target).ok()?;
    let root = Path::new(&holder.root).join(rest);
    Some(Origin {
        dev: holder.dev.clone(),
        root: root.to_string_lossy().into_owned(),
    })
}

/// The mount whose filesystem holds `path`: the deepest (and, among equals, the topmost)
/// mount point above it.
pub fn holder<'a>(mounts: &'a [MountPoint], path: &Path) -> Option<&'a MountPoint> {
    mounts
        .iter()
        .rev()
        .filter(|m| path.starts_with(&m.target))
        .max_by_key(|m| m.target.components().count())
}

/// The topmost mount at exactly `path`.
pub fn mount_at<'a>(mounts: &'a [MountPoint], path: &Path) -> Option<&'a MountPoint> {
    mounts.iter().rev().find(|m| m.target == path)
}

/// CHAP credentials for an iSCSI login: one-way (the initiator proves itself to the target),
/// and mutual when the target's own credentials are given too.
#[derive(Clone, PartialEq, Eq)]
pub struct Chap {
    pub username: String,
    pub secret: String,
    /// The target's username and secret, for mutual CHAP.
    pub target: Option<(String, String)>,
}

impl std::fmt::Debug for Chap {
    /// Names the users, never a secret.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Chap")
            .field("username", &self.username)
            .field("target_username", &self.target.as_ref().map(|t| &t.0))
            .finish_non_exhaustive()
    }
}

/// One iSCSI session: a target logged in through one portal.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Session {
    /// `address:port`
    pub portal: String,
    pub iqn: String,
}

/// One iSCSI LUN the host sees (`/dev/disk/by-path/ip-PORTAL-iscsi-IQN-lun-N`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IscsiDevice {
    pub portal: String,
    pub iqn: String,
    pub lun: u32,
    /// The device the link resolves to (`/dev/sdb`).
    pub device: PathBuf,
}

/// The stable path of a LUN seen through a portal.
pub fn by_path(portal: &str, iqn: &str, lun: u32) -> PathBuf {
    PathBuf::from(format!(
        "/dev/disk/by-path/ip-{portal}-iscsi-{iqn}-lun-{lun}"
    ))
}

/// Reads a `/dev/disk/by-path` entry name back (`None` for other entries and partitions).
pub fn parse_by_path(name: &str) -> Option<(String, String, u32)> {
    let rest = name.strip_prefix("ip-")?;
    let (portal, rest) = rest.split_once("-iscsi-")?;
    let (iqn, lun) = rest.rsplit_once("-lun-")?;
    let lun = lun.parse().ok()?;
    (!portal.is_empty() && !iqn.is_empty()).then(|| (portal.to_string(), iqn.to_string(), lun))
}

/// What `blkid` finds on a device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Probe {
    /// Nothing: safe to format.
    Empty,
    /// A filesystem of this type.
    Filesystem(String),
    /// Something else (a partition table, a RAID member, …): never formatted.
    Other(String),
}

/// `statvfs` of a mounted filesystem, in bytes and inodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FsStats {
    pub total_bytes: u64,
    pub available_bytes: u64,
    pub used_bytes: u64,
    pub total_inodes: u64,
    pub available_inodes: u64,
    pub used_inodes: u64,
}

/// How a host action failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostErrorKind {
    /// The path or device is not there.
    NotFound,
    /// An iSCSI login refused the CHAP credentials.
    AuthFailed,
    /// The tool ran and failed, or could not run.
    Failed,
}

/// A failed host action. The message never holds a secret: tools are named, their arguments
/// are not repeated.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct HostError {
    pub kind: HostErrorKind,
    pub message: String,
}

impl HostError {
    pub fn failed(message: impl Into<String>) -> HostError {
        HostError {
            kind: HostErrorKind::Failed,
            message: message.into(),
        }
    }

    pub fn not_found(message: impl Into<String>) -> HostError {
        HostError {
            kind: HostErrorKind::NotFound,
            message: message.into(),
        }
    }

    /// An I/O error on `path` while doing `what`.
    pub fn io(what: &str, path: &Path, e: &std::io::Error) -> HostError {
        let kind = if e.kind() == std::io::ErrorKind::NotFound {
            HostErrorKind::NotFound
        } else {
            HostErrorKind::Failed
        };
        HostError {
            kind,
            message: format!("{what} {}: {e}", path.display()),
        }
    }
}

pub type HostResult<T> = Result<T, HostError>;

/// Every host action of the Node service. Each is idempotent where the host allows it.
#[async_trait]
pub trait HostOps: Send + Sync + std::fmt::Debug {
    /// What `path` is; `None` when nothing is there.
    async fn path_kind(&self, path: &Path) -> HostResult<Option<PathKind>>;
    /// Creates the directory `path` (its parent must exist); one already there is success.
    async fn make_dir(&self, path: &Path) -> HostResult<()>;
    /// Creates the empty file `path` (its parent must exist); one already there is success.
    async fn make_file(&self, path: &Path) -> HostResult<()>;
    /// Removes the file or empty directory `path`; nothing there is success.
    async fn remove(&self, path: &Path) -> HostResult<()>;

    /// The mount table, in mount order.
    async fn mounts(&self) -> HostResult<Vec<MountPoint>>;
    /// `mount -t FSTYPE [-o OPTIONS] SOURCE TARGET`.
    async fn mount(
        &self,
        source: &str,
        target: &Path,
        fstype: &str,
        options: &[String],
    ) -> HostResult<()>;
    /// A bind mount of `source` (a directory or a file, e.g. a device node) on `target`,
    /// remounted read-only when asked.
    async fn bind_mount(&self, source: &Path, target: &Path, readonly: bool) -> HostResult<()>;
    /// `umount TARGET` (the topmost mount there).
    async fn unmount(&self, target: &Path) -> HostResult<()>;

    /// SendTargets discovery on a portal (records the targets it offers).
    async fn iscsi_discover(&self, portal: &str) -> HostResult<()>;
    /// Logs in to `iqn` through `portal`, with CHAP when given; a session already there is
    /// success. Refused credentials are `HostErrorKind::AuthFailed`.
    async fn iscsi_login(&self, portal: &str, iqn: &str, chap: Option<&Chap>) -> HostResult<()>;
    /// Logs out of `iqn` through `portal` and forgets the record; no session is success.
    async fn iscsi_logout(&self, portal: &str, iqn: &str) -> HostResult<()>;
    /// The sessions the host has.
    async fn iscsi_sessions(&self) -> HostResult<Vec<Session>>;
    /// Rescans a session's LUNs (their sizes after an expansion).
    async fn iscsi_rescan(&self, portal: &str, iqn: &str) -> HostResult<()>;
    /// The iSCSI LUNs the host sees.
    async fn iscsi_devices(&self) -> HostResult<Vec<IscsiDevice>>;
    /// Waits (polling, at most `timeout`) until one of `links` exists and returns the device
    /// it resolves to; `None` when none appeared in time.
    async fn wait_for_device(
        &self,
        links: &[PathBuf],
        timeout: Duration,
    ) -> HostResult<Option<PathBuf>>;

    /// What is on a device.
    async fn blkid(&self, device: &Path) -> HostResult<Probe>;
    /// Makes a filesystem of `fstype` (ext4, xfs) on an empty device.
    async fn mkfs(&self, device: &Path, fstype: &str) -> HostResult<()>;
    /// Grows the `fstype` filesystem of `device`, mounted at `mounted_at`, to the device's
    /// size (`resize2fs DEVICE`, `xfs_growfs MOUNTPOINT`).
    async fn grow_fs(&self, device: &Path, fstype: &str, mounted_at: &Path) -> HostResult<()>;
    /// Bytes and inodes of the filesystem holding `path`.
    async fn statvfs(&self, path: &Path) -> HostResult<FsStats>;
    /// The size in bytes of a block device (or a node bound onto a file).
    async fn device_size(&self, device: &Path) -> HostResult<u64>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn by_path_names_round_trip() {
        let p = by_path("10.0.0.1:3260", "iqn.2010-10.org.x:vol-lun-1", 3);
        let name = p.file_name().unwrap().to_str().unwrap();
        assert_eq!(
            parse_by_path(name),
            Some((
                "10.0.0.1:3260".into(),
                "iqn.2010-10.org.x:vol-lun-1".into(),
                3
            ))
        );
        assert_eq!(parse_by_path(&format!("{name}-part1")), None);
        assert_eq!(parse_by_path("pci-0000:00:1f.2-ata-1"), None);
    }

    #[test]
    fn the_origin_of_a_path_is_its_deepest_mount() {
        let m = |target: &str, dev: &str, root: &str| MountPoint {
            target: target.into(),
            source: "x".into(),
            fstype: "ext4".into(),
            readonly: false,
            dev: dev.into(),
            root: root.into(),
        };
        let mounts = [m("/", "254:0", "/"), m("/var/lib", "8:16", "/data")];
        assert_eq!(
            origin_of(&mounts, Path::new("/var/lib/x")).unwrap(),
            Origin {
                dev: "8:16".into(),
                root: "/data/x".into()
            }
        );
        assert_eq!(origin_of(&mounts, Path::new("/srv")).unwrap().dev, "254:0");
        assert!(mount_at(&mounts, Path::new("/var/lib")).is_some());
        assert!(mount_at(&mounts, Path::new("/var")).is_none());
        let chap = Chap {
            username: "u".into(),
            secret: "s3cr3t".into(),
            target: Some(("t".into(), "t0p".into())),
        };
        let shown = format!("{chap:?}");
        assert!(
            !shown.contains("s3cr3t") && !shown.contains("t0p"),
            "{shown}"
        );
    }
}
