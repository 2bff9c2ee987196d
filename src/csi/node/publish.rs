//! NodePublishVolume and NodeUnpublishVolume: the staged path (iSCSI mount), the staged device
//! node (iSCSI block, onto a file), the NFS export or the local directory onto the target,
//! read-only when asked. What is published where is read back from the mount table: the same
//! volume with the same read-only setting at the target is success, anything else there is
//! `ALREADY_EXISTS`, and a single-node volume published at another target is
//! `FAILED_PRECONDITION` (spec §6).

use std::path::{Path, PathBuf};

use tonic::Status;

use super::host::{MountPoint, Origin, mount_at, origin_of};
use super::stage::check_supported;
use super::volume::{Attach, NodeVolume, nfs_source};
use super::{BLOCK_FILE, NodeService, absolute, capability, host_status, required};
use crate::csi::proto::{
    NodePublishVolumeRequest, NodePublishVolumeResponse, NodeUnpublishVolumeRequest,
    NodeUnpublishVolumeResponse,
};

/// At most this many mounts stacked on one target are taken off by an unpublish.
const MAX_STACKED: usize = 8;

/// What a publish puts on the target.
#[derive(Debug)]
enum Source {
    /// A bind of this path, which shows `Origin`.
    Bind(PathBuf, Origin),
    /// An NFS mount of `server:/path`.
    Nfs(String),
}

impl Source {
    /// Whether `m` shows this source.
    fn shown_by(&self, m: &MountPoint) -> bool {
        match self {
            Source::Bind(_, origin) => m.origin() == *origin,
            Source::Nfs(export) => m.source == *export && m.fstype.starts_with("nfs"),
        }
    }
}

impl NodeService {
    pub(super) async fn publish(
        &self,
        req: NodePublishVolumeRequest,
    ) -> Result<NodePublishVolumeResponse, Status> {
        let id = required("volume_id", &req.volume_id)?;
        let target = absolute("target_path", &req.target_path)?;
        let cap = capability("volume_capability", req.volume_capability.as_ref())?;
        if req.staging_target_path.is_empty() {
            return Err(Status::failed_precondition(
                "staging_target_path: is required (the plugin has STAGE_UNSTAGE_VOLUME)",
            ));
        }
        let staging = absolute("staging_target_path", &req.staging_target_path)?;
        let _claim = self.in_flight.claim(format!("volume:{id}"))?;
        let volume = NodeVolume::read(&req.volume_context, &req.publish_context, &req.secrets)?;
        check_supported(&volume, &cap)?;
        let readonly = req.readonly || cap.reader_only;
        let mounts = self.host.mounts().await.map_err(host_status)?;
        let source = self
            .source(&volume, cap.wanted.block, &staging, &mounts)
            .await?;
        if let Some(m) = mount_at(&mounts, &target) {
            if source.shown_by(m) && m.readonly == readonly {
                return Ok(NodePublishVolumeResponse {});
            }
            return Err(Status::already_exists(format!(
                "{} is published already with another volume or read-only setting",
                target.display()
            )));
        }
        if cap.single_node {
            let own = |p: &Path| p == target || p == staging || p == staging.join(BLOCK_FILE);
            let local = match &source {
                Source::Bind(path, _) => Some(path.clone()),
                Source::Nfs(_) => None,
            };
            if let Some(other) = mounts.iter().find(|m| {
                !own(&m.target) && local.as_deref() != Some(&*m.target) && source.shown_by(m)
            }) {
                return Err(Status::failed_precondition(format!(
                    "the volume is published at {} already; its single-node access mode allows \
                     one target path",
                    other.target.display()
                )));
            }
        }
        self.put(
            &source,
            &target,
            cap.wanted.block,
            readonly,
            &cap.mount_flags,
        )
        .await?;
        tracing::info!(volume = id, target = %target.display(), readonly, "volume published");
        Ok(NodePublishVolumeResponse {})
    }

    /// What goes onto the target; `FAILED_PRECONDITION` when an iSCSI volume is not staged,
    /// `NOT_FOUND` when a local volume's directory is gone.
    async fn source(
        &self,
        volume: &NodeVolume,
        block: bool,
        staging: &Path,
        mounts: &[MountPoint],
    ) -> Result<Source, Status> {
        let not_staged = || {
            Status::failed_precondition(format!(
                "the volume is not staged at {} (NodeStageVolume first)",
                staging.display()
            ))
        };
        Ok(match &volume.attach {
            Attach::Iscsi(_) if block => {
                let file = staging.join(BLOCK_FILE);
                let m = mount_at(mounts, &file).ok_or_else(not_staged)?;
                Source::Bind(file, m.origin())
            }
            Attach::Iscsi(_) => {
                let m = mount_at(mounts, staging).ok_or_else(not_staged)?;
                Source::Bind(staging.to_path_buf(), m.origin())
            }
            Attach::Local { path } => {
                self.local_dir(path).await?;
                let origin = origin_of(mounts, path).ok_or_else(|| {
                    Status::internal(format!("no filesystem holds {}", path.display()))
                })?;
                Source::Bind(path.clone(), origin)
            }
            Attach::Nfs { server, path } => Source::Nfs(nfs_source(server, path)),
        })
    }

    /// Creates the target (a file for block, a directory otherwise) and mounts the source on
    /// it; a failed mount removes the target again.
    async fn put(
        &self,
        source: &Source,
        target: &Path,
        block: bool,
        readonly: bool,
        mount_flags: &[String],
    ) -> Result<(), Status> {
        let created = if block {
            self.host.make_file(target).await
        } else {
            self.host.make_dir(target).await
        };
        created.map_err(host_status)?;
        let mounted = match source {
            Source::Bind(path, _) => self.host.bind_mount(path, target, readonly).await,
            Source::Nfs(export) => {
                let mut options = mount_flags.to_vec();
                if readonly {
                    options.push("ro".into());
                }
                self.host.mount(export, target, "nfs", &options).await
            }
        };
        if let Err(e) = mounted {
            let _ = self.host.remove(target).await;
            return Err(host_status(e));
        }
        Ok(())
    }

    pub(super) async fn unpublish(
        &self,
        req: NodeUnpublishVolumeRequest,
    ) -> Result<NodeUnpublishVolumeResponse, Status> {
        let id = required("volume_id", &req.volume_id)?;
        let target = absolute("target_path", &req.target_path)?;
        let _claim = self.in_flight.claim(format!("volume:{id}"))?;
        for _ in 0..MAX_STACKED {
            let mounts = self.host.mounts().await.map_err(host_status)?;
            if mount_at(&mounts, &target).is_none() {
                break;
            }
            self.host.unmount(&target).await.map_err(host_status)?;
        }
        let mounts = self.host.mounts().await.map_err(host_status)?;
        if mount_at(&mounts, &target).is_some() {
            return Err(Status::internal(format!(
                "{} still has mounts after {MAX_STACKED} unmounts",
                target.display()
            )));
        }
        self.host.remove(&target).await.map_err(host_status)?;
        tracing::info!(volume = id, target = %target.display(), "volume unpublished");
        Ok(NodeUnpublishVolumeResponse {})
    }
}
