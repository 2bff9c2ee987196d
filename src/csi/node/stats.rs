//! NodeGetVolumeStats and NodeExpandVolume. A volume is found by its path: a path that does
//! not exist is `NOT_FOUND`; a path that exists but has nothing mounted, or whose device is
//! gone, is reported with an abnormal `volume_condition` (kubelet turns it into a pod event).

use std::path::{Path, PathBuf};

use tonic::Status;

use super::host::{IscsiDevice, MountPoint, PathKind, Probe, dev_string, mount_at};
use super::{NodeService, host_status, required};
use crate::csi::convert::Range;
use crate::csi::proto::volume_usage::Unit;
use crate::csi::proto::{
    NodeExpandVolumeRequest, NodeExpandVolumeResponse, NodeGetVolumeStatsRequest,
    NodeGetVolumeStatsResponse, VolumeCondition, VolumeUsage,
};

fn usage(unit: Unit, total: u64, used: u64, available: u64) -> VolumeUsage {
    let int = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
    VolumeUsage {
        available: int(available),
        total: int(total),
        used: int(used),
        unit: unit as i32,
    }
}

fn condition(abnormal: bool, message: String) -> Option<VolumeCondition> {
    Some(VolumeCondition { abnormal, message })
}

impl NodeService {
    /// The path of a stats or expand request, and what is there; `NOT_FOUND` when nothing is
    /// (a relative path is never looked up).
    async fn volume_path(&self, value: &str) -> Result<(PathBuf, PathKind), Status> {
        let path = PathBuf::from(required("volume_path", value)?);
        let kind = match path.is_absolute() {
            true => self.host.path_kind(&path).await.map_err(host_status)?,
            false => None,
        };
        let kind = kind.ok_or_else(|| {
            Status::not_found(format!("no volume at {} on this node", path.display()))
        })?;
        Ok((path, kind))
    }

    pub(super) async fn stats(
        &self,
        req: NodeGetVolumeStatsRequest,
    ) -> Result<NodeGetVolumeStatsResponse, Status> {
        required("volume_id", &req.volume_id)?;
        let (path, kind) = self.volume_path(&req.volume_path).await?;
        let mounts = self.host.mounts().await.map_err(host_status)?;
        let Some(m) = mount_at(&mounts, &path) else {
            return Ok(NodeGetVolumeStatsResponse {
                usage: Vec::new(),
                volume_condition: condition(
                    true,
                    format!("nothing is mounted at {}", path.display()),
                ),
            });
        };
        if let PathKind::Block { .. } = kind {
            return Ok(match self.host.device_size(&path).await {
                Ok(size) => NodeGetVolumeStatsResponse {
                    usage: vec![usage(Unit::Bytes, size, 0, 0)],
                    volume_condition: condition(false, "the device is there".into()),
                },
                Err(e) => NodeGetVolumeStatsResponse {
                    usage: Vec::new(),
                    volume_condition: condition(true, format!("the device is gone: {e}")),
                },
            });
        }
        if m.source.starts_with("/dev/")
            && self
                .host
                .path_kind(Path::new(&m.source))
                .await
                .map_err(host_status)?
                .is_none()
        {
            return Ok(NodeGetVolumeStatsResponse {
                usage: Vec::new(),
                volume_condition: condition(true, format!("the device {} is gone", m.source)),
            });
        }
        Ok(match self.host.statvfs(&path).await {
            Ok(s) => NodeGetVolumeStatsResponse {
                usage: vec![
                    usage(Unit::Bytes, s.total_bytes, s.used_bytes, s.available_bytes),
                    usage(
                        Unit::Inodes,
                        s.total_inodes,
                        s.used_inodes,
                        s.available_inodes,
                    ),
                ],
                volume_condition: condition(false, "mounted".into()),
            },
            Err(e) => NodeGetVolumeStatsResponse {
                usage: Vec::new(),
                volume_condition: condition(true, format!("the filesystem fails: {e}")),
            },
        })
    }

    pub(super) async fn expand(
        &self,
        req: NodeExpandVolumeRequest,
    ) -> Result<NodeExpandVolumeResponse, Status> {
        let id = required("volume_id", &req.volume_id)?;
        let range = Range::parse("capacity_range", req.capacity_range.as_ref())?;
        let (path, kind) = self.volume_path(&req.volume_path).await?;
        let mounts = self.host.mounts().await.map_err(host_status)?;
        let m = mount_at(&mounts, &path).cloned().ok_or_else(|| {
            Status::not_found(format!(
                "the volume is not staged or published at {}",
                path.display()
            ))
        })?;
        let _claim = self.in_flight.claim(format!("volume:{id}"))?;
        let size = match kind {
            PathKind::Block { rdev } => {
                self.rescan(&dev_string(rdev)).await?;
                self.host.device_size(&path).await.map_err(host_status)?
            }
            _ => self.grow(&path, &m).await?,
        };
        if range.required.is_some_and(|r| size < r) {
            return Err(Status::out_of_range(format!(
                "the device is {size} bytes after a rescan, below required_bytes {}; expand \
                 the volume on its backend first",
                range.required.unwrap_or_default()
            )));
        }
        if let Some(limit) = range.limit.filter(|l| size > *l) {
            return Err(Status::out_of_range(format!(
                "the volume is {size} bytes already, above limit_bytes {limit}"
            )));
        }
        tracing::info!(volume = id, path = %path.display(), size, "volume expanded on the node");
        Ok(NodeExpandVolumeResponse {
            capacity_bytes: i64::try_from(size).unwrap_or(i64::MAX),
        })
    }

    /// Grows the filesystem mounted at `path` when it is on an iSCSI LUN (after a rescan) and
    /// returns its device's size; an NFS or local volume has nothing to grow on the node and
    /// reports its filesystem's size.
    async fn grow(&self, path: &Path, m: &MountPoint) -> Result<u64, Status> {
        let Some(lun) = self.rescan(&m.dev).await? else {
            let stats = self.host.statvfs(path).await.map_err(host_status)?;
            return Ok(stats.total_bytes);
        };
        let fs = match self.host.blkid(&lun.device).await.map_err(host_status)? {
            Probe::Filesystem(fs) if ["ext4", "ext3", "xfs"].contains(&fs.as_str()) => fs,
            other => {
                return Err(Status::invalid_argument(format!(
                    "volume_path: the volume holds {other:?}; storch grows ext3, ext4 and xfs"
                )));
            }
        };
        self.host
            .grow_fs(&lun.device, &fs, path)
            .await
            .map_err(host_status)?;
        self.host
            .device_size(&lun.device)
            .await
            .map_err(host_status)
    }

    /// Rescans the sessions of the target whose LUN has device number `dev`; `None` when no
    /// iSCSI LUN has it.
    async fn rescan(&self, dev: &str) -> Result<Option<IscsiDevice>, Status> {
        let devices = self.host.iscsi_devices().await.map_err(host_status)?;
        let mut found = None;
        for d in devices {
            let kind = self.host.path_kind(&d.device).await.map_err(host_status)?;
            if matches!(kind, Some(PathKind::Block { rdev }) if dev_string(rdev) == dev) {
                found = Some(d);
                break;
            }
        }
        let Some(lun) = found else { return Ok(None) };
        for s in self.host.iscsi_sessions().await.map_err(host_status)? {
            if s.iqn == lun.iqn {
                self.host
                    .iscsi_rescan(&s.portal, &s.iqn)
                    .await
                    .map_err(host_status)?;
            }
        }
        Ok(Some(lun))
    }
}
