//! What the ONTAP variants share: FlexVol create specs, rollback, the shrink check, snapshots
//! and the FlexClone step of a clone (ontap-nas and ontap-san). `nas.rs`, `san.rs` and
//! `economy.rs` import this file, never each other (`flexgroup.rs`, a flavour of ontap-nas,
//! also reuses `nas.rs`).

use super::wire::VolumeCreate;
use super::{
    Discovered, OntapDriver, VolumeOptions, clone_snapshot_name, not_found, now_ms,
    ontap_internal_name,
};
use crate::drivers::{CloneRequest, DriverError, DriverResult, SnapshotInfo};
use crate::wire::zapi::errno;

/// Every ontap-nas-economy pool FlexVol name starts with this (ontap-nas listings skip them).
pub const POOL_NAME_ROOT: &str = "trident_qtree_pool_";

pub(super) fn flexvol_create(
    name: &str,
    aggregates: Vec<String>,
    size: u64,
    o: &VolumeOptions,
) -> VolumeCreate {
    VolumeCreate {
        name: name.to_string(),
        aggregates,
        size,
        space_reserve: o.space_reserve.clone(),
        snapshot_policy: o.snapshot_policy.clone(),
        snapshot_reserve: o.snapshot_reserve.clone(),
        export_policy: Some(o.export_policy.clone()),
        unix_permissions: Some(o.unix_permissions.clone()),
        security_style: o.security_style.clone(),
        encrypt: o.encryption,
        comment: super::adopt::mark(name),
        junction_path: None,
        snapdir: None,
    }
}

/// `spec` as a NAS volume: mounted at `/<name>`, its `.snapshot` directory hidden unless
/// `snapshotDir` says otherwise.
pub(super) fn nas_mounted(spec: VolumeCreate, o: &VolumeOptions) -> VolumeCreate {
    VolumeCreate {
        junction_path: Some(format!("/{}", spec.name)),
        snapdir: (!o.snapshot_dir).then_some(false),
        ..spec
    }
}

/// Best-effort removal of a volume this call created and could not finish.
pub(super) async fn rollback(drv: &OntapDriver, d: &Discovered, name: &str, flexgroup: bool) {
    if let Err(e) = drv.api().volume_destroy(&d.svm, name, flexgroup).await {
        tracing::warn!(volume = %name, error = %e, "could not remove a half-created volume");
    }
}

/// The name prefix all of this backend's volumes share.
pub(super) fn name_prefix(drv: &OntapDriver) -> String {
    ontap_internal_name(&drv.cfg.prefix, "")
}

/// Volumes only grow.
pub(super) fn check_grow(name: &str, current: u64, wanted: u64) -> DriverResult<()> {
    if wanted < current {
        return Err(DriverError::Invalid(format!(
            "requested size {wanted} is smaller than the current size {current} of volume \
             {name}: volumes cannot shrink"
        )));
    }
    Ok(())
}

async fn require_volume(drv: &OntapDriver, d: &Discovered, name: &str) -> DriverResult<()> {
    match drv.api().volume(&d.svm, name, None).await? {
        Some(_) => Ok(()),
        None => Err(not_found(name)),
    }
}

pub(super) async fn create_snapshot(
    drv: &OntapDriver,
    d: &Discovered,
    volume: &str,
    snapshot: &str,
) -> DriverResult<SnapshotInfo> {
    require_volume(drv, d, volume).await?;
    drv.api().snapshot_create(&d.svm, volume, snapshot).await?;
    let snaps = drv.api().snapshots(&d.svm, volume).await?;
    let s = snaps.iter().find(|s| s.name == snapshot);
    Ok(SnapshotInfo {
        name: snapshot.to_string(),
        volume_internal_name: volume.to_string(),
        created_ms: s
            .map(|s| s.access_time * 1000)
            .filter(|t| *t > 0)
            .unwrap_or_else(now_ms),
        size_bytes: s.map(|s| s.total_kib * 1024).unwrap_or(0),
    })
}

pub(super) async fn list_snapshots(
    drv: &OntapDriver,
    d: &Discovered,
    volume: &str,
) -> DriverResult<Vec<SnapshotInfo>> {
    require_volume(drv, d, volume).await?;
    let snaps = drv.api().snapshots(&d.svm, volume).await?;
    Ok(snaps
        .into_iter()
        .map(|s| SnapshotInfo {
            name: s.name,
            volume_internal_name: s.volume,
            created_ms: s.access_time * 1000,
            size_bytes: s.total_kib * 1024,
        })
        .collect())
}

/// A FlexClone of the source FlexVol (ontap-nas and ontap-san), from the given snapshot or a
/// new one named after the current time. Returns the clone's merged options: the variant then
/// mounts it (NAS) or maps its LUN (SAN), and splits it when `splitOnClone` says so.
pub(super) async fn clone_flexvol(
    drv: &OntapDriver,
    d: &Discovered,
    req: &CloneRequest,
) -> DriverResult<VolumeOptions> {
    let c = drv.api();
    let name = &req.internal_name;
    let source_name = &req.source_internal_name;
    let source = c
        .volume(&d.svm, source_name, Some("flexvol"))
        .await?
        .ok_or_else(|| DriverError::NotFound(format!("source volume {source_name} not found")))?;
    let o = drv.volume_options(&req.config, &Default::default())?;
    let space_reserve = if req.config.space_reserve.trim().is_empty() {
        if source.space_guarantee.is_empty() {
            o.space_reserve.clone()
        } else {
            source.space_guarantee.clone()
        }
    } else {
        o.space_reserve.clone()
    };
    let snapshot = match req.source_snapshot.as_deref().filter(|s| !s.is_empty()) {
        Some(s) => s.to_string(),
        None => {
            let s = clone_snapshot_name(std::time::SystemTime::now());
            match c.snapshot_create(&d.svm, source_name, &s).await {
                Ok(()) => {}
                // Two clones within one second share the snapshot.
                Err(e) if e.is_duplicate() => {}
                Err(e) => return Err(e.into()),
            }
            s
        }
    };
    match c
        .clone_create(&d.svm, name, source_name, &snapshot, &space_reserve)
        .await
    {
        Ok(()) => {}
        Err(e) if e.is_not_found() => {
            return Err(DriverError::NotFound(format!(
                "snapshot {snapshot} does not exist in volume {source_name}"
            )));
        }
        Err(e)
            if e.is_errno(&[errno::EINTERNALERROR])
                && e.reason().contains("Failed to load job") =>
        {
            // The clone may have been made anyway: look before giving up.
            let mut made = false;
            for attempt in 0..10u32 {
                if c.volume(&d.svm, name, None).await?.is_some() {
                    made = true;
                    break;
                }
                tokio::time::sleep(std::time::Duration::from_millis(50 << attempt.min(5))).await;
            }
            if !made {
                return Err(e.into());
            }
        }
        Err(e) => return Err(e.into()),
    }
    // A FlexClone inherits its parent's comment: mark it as this volume.
    if let Err(e) = c
        .volume_set_comment(&d.svm, name, &super::adopt::mark(name))
        .await
    {
        rollback(drv, d, name, false).await;
        return Err(e.into());
    }
    Ok(o)
}
