//! NodeStageVolume and NodeUnstageVolume. Only iSCSI volumes are staged: login, wait for the
//! LUN, then either a filesystem (made when the device is empty) mounted on the staging path,
//! or, for raw block, the device node bound onto `STAGING/block`. What is staged where is read
//! back from the host, so a repeated call finds its own work and another volume's is refused.

use std::path::{Path, PathBuf};

use tonic::Status;

use super::host::{MountPoint, PathKind, Probe, by_path, dev_string, mount_at};
use super::volume::{Attach, ChapNeed, IscsiVolume, NodeVolume};
use super::{BLOCK_FILE, Cap, NodeService, absolute, capability, host_status, required};
use crate::csi::convert::{DEFAULT_FS, unsupported};
use crate::csi::proto::{
    NodeStageVolumeRequest, NodeStageVolumeResponse, NodeUnstageVolumeRequest,
    NodeUnstageVolumeResponse,
};

/// The filesystems storch makes and grows.
pub const FILESYSTEMS: [&str; 2] = ["ext4", "xfs"];

/// `FAILED_PRECONDITION` when the volume cannot serve the capability (spec §6: stage and
/// publish); the reasons are `convert::unsupported`'s, shared with the controller.
pub(crate) fn check_supported(volume: &NodeVolume, cap: &Cap) -> Result<(), Status> {
    let fs = volume.fs_type.as_deref().unwrap_or_default();
    match unsupported(Some(volume.attachment()), fs, &cap.wanted) {
        Some(why) => Err(Status::failed_precondition(format!(
            "volume_capability: {why}"
        ))),
        None => Ok(()),
    }
}

/// The filesystem a mount capability gets: its own `fs_type`, else the volume's, else ext4.
fn fs_type(cap: &Cap, volume: &NodeVolume) -> Result<String, Status> {
    let (field, fs) = match (&cap.wanted.fs_type, &volume.fs_type) {
        (Some(fs), _) => ("volume_capability.mount.fs_type", fs.clone()),
        (None, Some(fs)) => ("volume_context.\"storch.io/fsType\"", fs.clone()),
        (None, None) => ("", DEFAULT_FS.to_string()),
    };
    if FILESYSTEMS.contains(&fs.as_str()) {
        Ok(fs)
    } else {
        Err(super::invalid(
            field,
            format!("{fs:?} is not a filesystem storch makes (ext4, xfs)"),
        ))
    }
}

impl NodeService {
    pub(super) async fn stage(
        &self,
        req: NodeStageVolumeRequest,
    ) -> Result<NodeStageVolumeResponse, Status> {
        let id = required("volume_id", &req.volume_id)?;
        let staging = absolute("staging_target_path", &req.staging_target_path)?;
        let cap = capability("volume_capability", req.volume_capability.as_ref())?;
        let _claim = self.in_flight.claim(format!("volume:{id}"))?;
        let volume = NodeVolume::read(&req.volume_context, &req.publish_context, &req.secrets)?;
        check_supported(&volume, &cap)?;
        let lun = match &volume.attach {
            Attach::Iscsi(lun) => lun,
            Attach::Local { path } => {
                // Bound at publish; a directory that is not on this node is an unknown volume.
                self.local_dir(path).await?;
                return Ok(NodeStageVolumeResponse {});
            }
            // Mounted at publish.
            Attach::Nfs { .. } => return Ok(NodeStageVolumeResponse {}),
        };
        let fs = match cap.wanted.block {
            true => None,
            false => Some(fs_type(&cap, &volume)?),
        };
        let block_file = staging.join(BLOCK_FILE);
        let mounts = self.host.mounts().await.map_err(host_status)?;
        let staged_dir = mount_at(&mounts, &staging).cloned();
        let staged_block = mount_at(&mounts, &block_file).is_some();
        if staged_dir.is_some() || staged_block {
            return self
                .check_staged(lun, &cap, fs.as_deref(), staged_dir.as_ref(), &staging)
                .await
                .map(|()| NodeStageVolumeResponse {});
        }
        let device = self.attach_lun(lun).await?;
        if self.host.path_kind(&staging).await.map_err(host_status)? != Some(PathKind::Dir) {
            self.host.make_dir(&staging).await.map_err(host_status)?;
        }
        match fs {
            None => {
                self.host
                    .make_file(&block_file)
                    .await
                    .map_err(host_status)?;
                if let Err(e) = self.host.bind_mount(&device, &block_file, false).await {
                    let _ = self.host.remove(&block_file).await;
                    return Err(host_status(e));
                }
            }
            Some(fs) => {
                self.make_fs(&device, &fs).await?;
                let mut options = cap.mount_flags.clone();
                if cap.reader_only {
                    options.push("ro".into());
                }
                if fs == "xfs" {
                    // Clones and snapshots of one volume share the filesystem's UUID.
                    options.push("nouuid".into());
                }
                let source = device.to_string_lossy();
                self.host
                    .mount(&source, &staging, &fs, &options)
                    .await
                    .map_err(host_status)?;
            }
        }
        tracing::info!(volume = id, staging = %staging.display(), "volume staged");
        Ok(NodeStageVolumeResponse {})
    }

    /// `NOT_FOUND` unless a local volume's directory is on this node.
    pub(super) async fn local_dir(&self, path: &Path) -> Result<(), Status> {
        match self.host.path_kind(path).await.map_err(host_status)? {
            Some(PathKind::Dir) => Ok(()),
            _ => Err(Status::not_found(format!(
                "the volume's directory {} is not on this node",
                path.display()
            ))),
        }
    }

    /// Something is staged already: the same LUN with the same access is success, anything
    /// else `ALREADY_EXISTS`.
    async fn check_staged(
        &self,
        lun: &IscsiVolume,
        cap: &Cap,
        fs: Option<&str>,
        staged_dir: Option<&MountPoint>,
        staging: &Path,
    ) -> Result<(), Status> {
        let taken = |why: String| {
            Err(Status::already_exists(format!(
                "{} is staged already {why}",
                staging.display()
            )))
        };
        let want = self.lun_dev(lun).await?;
        let (have, access) = match staged_dir {
            Some(m) => (Some(m.dev.clone()), "mount"),
            None => {
                let kind = self.host.path_kind(&staging.join(BLOCK_FILE)).await;
                match kind.map_err(host_status)? {
                    Some(PathKind::Block { rdev }) => (Some(dev_string(rdev)), "block"),
                    _ => (None, "block"),
                }
            }
        };
        if want.is_none() || have != want {
            return taken("with another volume".into());
        }
        let wanted_access = if cap.wanted.block { "block" } else { "mount" };
        if access != wanted_access {
            return taken(format!("for {access} access, not {wanted_access}"));
        }
        if let (Some(m), Some(fs)) = (staged_dir, fs) {
            if m.fstype != fs {
                return taken(format!("with {}, not {fs}", m.fstype));
            }
            if m.readonly != cap.reader_only {
                return taken("with another read-only setting".into());
            }
        }
        Ok(())
    }

    /// The device number (`major:minor`) of the LUN when the host sees it.
    async fn lun_dev(&self, lun: &IscsiVolume) -> Result<Option<String>, Status> {
        let devices = self.host.iscsi_devices().await.map_err(host_status)?;
        let Some(d) = devices
            .iter()
            .find(|d| d.iqn == lun.iqn && d.lun == lun.lun)
        else {
            return Ok(None);
        };
        match self.host.path_kind(&d.device).await.map_err(host_status)? {
            Some(PathKind::Block { rdev }) => Ok(Some(dev_string(rdev))),
            _ => Ok(None),
        }
    }

    /// Logs in through every portal without a session and waits for the LUN's device.
    async fn attach_lun(&self, lun: &IscsiVolume) -> Result<PathBuf, Status> {
        let sessions = self.host.iscsi_sessions().await.map_err(host_status)?;
        let mut logged_in = lun
            .portals
            .iter()
            .any(|p| sessions.iter().any(|s| s.portal == *p && s.iqn == lun.iqn));
        let mut first_error = None;
        for portal in &lun.portals {
            if sessions
                .iter()
                .any(|s| s.portal == *portal && s.iqn == lun.iqn)
            {
                continue;
            }
            let chap = match &lun.chap {
                ChapNeed::None => None,
                ChapNeed::Given(chap) => Some(chap),
                ChapNeed::Missing { username } => {
                    return Err(Status::unauthenticated(format!(
                        "the volume's target uses CHAP (user {username:?}); secrets.{} is missing",
                        super::volume::CHAP_SECRET
                    )));
                }
            };
            let login = match self.host.iscsi_discover(portal).await {
                Ok(()) => self.host.iscsi_login(portal, &lun.iqn, chap).await,
                Err(e) => Err(e),
            };
            match login {
                Ok(()) => logged_in = true,
                Err(e) => {
                    tracing::warn!(portal = %portal, iqn = %lun.iqn, error = %e, "iSCSI login failed");
                    first_error.get_or_insert(e);
                }
            }
        }
        if !logged_in && let Some(e) = first_error {
            return Err(host_status(e));
        }
        let links: Vec<PathBuf> = lun
            .portals
            .iter()
            .map(|p| by_path(p, &lun.iqn, lun.lun))
            .collect();
        let timeout = self.options.device_timeout;
        match self.host.wait_for_device(&links, timeout).await {
            Ok(Some(device)) => Ok(device),
            Ok(None) => Err(Status::deadline_exceeded(format!(
                "LUN {} of {} did not appear within {}",
                lun.lun,
                lun.iqn,
                humantime::format_duration(timeout)
            ))),
            Err(e) => Err(host_status(e)),
        }
    }

    /// Makes `fs` on an empty device; a device that holds `fs` already is used as it is, one
    /// that holds anything else is refused.
    async fn make_fs(&self, device: &Path, fs: &str) -> Result<(), Status> {
        match self.host.blkid(device).await.map_err(host_status)? {
            Probe::Empty => self.host.mkfs(device, fs).await.map_err(host_status),
            Probe::Filesystem(have) if have == fs => Ok(()),
            Probe::Filesystem(have) => Err(Status::failed_precondition(format!(
                "the volume holds a {have} filesystem; the capability asks for {fs}"
            ))),
            Probe::Other(what) => Err(Status::failed_precondition(format!(
                "the volume holds {what}; storch formats only empty devices"
            ))),
        }
    }

    pub(super) async fn unstage(
        &self,
        req: NodeUnstageVolumeRequest,
    ) -> Result<NodeUnstageVolumeResponse, Status> {
        let id = required("volume_id", &req.volume_id)?;
        let staging = absolute("staging_target_path", &req.staging_target_path)?;
        let _claim = self.in_flight.claim(format!("volume:{id}"))?;
        let block_file = staging.join(BLOCK_FILE);
        let mounts = self.host.mounts().await.map_err(host_status)?;
        let dev = if mount_at(&mounts, &block_file).is_some() {
            let kind = self
                .host
                .path_kind(&block_file)
                .await
                .map_err(host_status)?;
            self.host.unmount(&block_file).await.map_err(host_status)?;
            match kind {
                Some(PathKind::Block { rdev }) => Some(dev_string(rdev)),
                _ => None,
            }
        } else if let Some(m) = mount_at(&mounts, &staging) {
            let dev = m.dev.clone();
            self.host.unmount(&staging).await.map_err(host_status)?;
            Some(dev)
        } else {
            None
        };
        if self
            .host
            .path_kind(&block_file)
            .await
            .map_err(host_status)?
            .is_some()
        {
            self.host.remove(&block_file).await.map_err(host_status)?;
        }
        if let Some(dev) = dev {
            self.log_out_if_unused(&dev).await?;
        }
        tracing::info!(volume = id, staging = %staging.display(), "volume unstaged");
        Ok(NodeUnstageVolumeResponse {})
    }

    /// After an unstage of the LUN with device number `dev`: when no mount uses a LUN of its
    /// target any more, logs out of every session to that target. Only device binds
    /// (devtmpfs, tmpfs) are looked at beyond the mount table, so a hung NFS mount never
    /// blocks an unstage.
    async fn log_out_if_unused(&self, dev: &str) -> Result<(), Status> {
        let devices = self.host.iscsi_devices().await.map_err(host_status)?;
        let mut numbered = Vec::new();
        for d in devices {
            if let Some(PathKind::Block { rdev }) =
                self.host.path_kind(&d.device).await.map_err(host_status)?
            {
                numbered.push((d, dev_string(rdev)));
            }
        }
        let Some(iqn) = numbered
            .iter()
            .find(|(_, n)| n == dev)
            .map(|(d, _)| d.iqn.clone())
        else {
            return Ok(());
        };
        let of_target: Vec<&String> = numbered
            .iter()
            .filter(|(d, _)| d.iqn == iqn)
            .map(|(_, n)| n)
            .collect();
        for m in self.host.mounts().await.map_err(host_status)? {
            if of_target.contains(&&m.dev) {
                return Ok(());
            }
            if matches!(m.fstype.as_str(), "devtmpfs" | "tmpfs")
                && let Some(PathKind::Block { rdev }) =
                    self.host.path_kind(&m.target).await.map_err(host_status)?
                && of_target.contains(&&dev_string(rdev))
            {
                return Ok(());
            }
        }
        for s in self.host.iscsi_sessions().await.map_err(host_status)? {
            if s.iqn == iqn {
                self.host
                    .iscsi_logout(&s.portal, &s.iqn)
                    .await
                    .map_err(host_status)?;
            }
        }
        tracing::info!(iqn = %iqn, "logged out of an iSCSI target no staged volume uses");
        Ok(())
    }
}
