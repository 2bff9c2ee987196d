//! ontap-nas: one FlexVol per volume, mounted at `/<name>`. The FlexVol-level operations
//! (get, destroy, resize, snapshots, clones) are shared with ontap-nas-flexgroup (a FlexGroup is
//! one volume too) and ontap-san (whose LUN lives in its own FlexVol).

use super::client::{VolumeCreate, VolumeRecord, ZapiError};
use super::config::Variant;
use super::{
    Discovered, OntapDriver, VolumeOptions, clone_snapshot_name, not_found, now_ms,
    ontap_internal_name,
};
use crate::drivers::{
    CloneRequest, CreateRequest, DriverError, DriverResult, SnapshotInfo, VolumeInfo,
};
use crate::wire::zapi::errno;

/// The volume style a variant keeps its volumes in.
pub(super) fn style(drv: &OntapDriver) -> &'static str {
    if drv.variant() == Variant::NasFlexgroup {
        "flexgroup"
    } else {
        "flexvol"
    }
}

/// The pool a volume record belongs to.
pub(super) fn pool_of(drv: &OntapDriver, d: &Discovered, v: &VolumeRecord) -> String {
    if drv.variant() == Variant::NasFlexgroup {
        d.svm.clone()
    } else {
        v.aggregate.clone()
    }
}

fn info(drv: &OntapDriver, d: &Discovered, v: &VolumeRecord) -> VolumeInfo {
    let junction = if v.junction.is_empty() {
        format!("/{}", v.name)
    } else {
        v.junction.clone()
    };
    VolumeInfo {
        internal_name: v.name.clone(),
        pool: pool_of(drv, d, v),
        size_bytes: v.size,
        access: drv.nfs_access(d, &junction),
    }
}

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
        comment: String::new(),
        junction_path: None,
    }
}

pub(super) async fn create(
    drv: &OntapDriver,
    d: &Discovered,
    req: &CreateRequest,
    o: &VolumeOptions,
) -> DriverResult<VolumeInfo> {
    let aggr = drv.aggregate(d, &req.pool)?;
    let name = &req.internal_name;
    let spec = flexvol_create(name, vec![aggr.name.clone()], req.size_bytes, o);
    drv.client.volume_create(&d.svm, &spec, false).await?;
    // From here on the volume is ours: undo it if the rest fails.
    let finish = async {
        drv.client
            .volume_mount(&d.svm, name, &format!("/{name}"))
            .await?;
        if !o.snapshot_dir {
            drv.client.volume_set_snapdir(&d.svm, name, false).await?;
        }
        Ok::<_, ZapiError>(())
    };
    if let Err(e) = finish.await {
        rollback(drv, d, name, false).await;
        return Err(e.into());
    }
    get(drv, d, name)
        .await?
        .ok_or_else(|| DriverError::Other(format!("volume {name} vanished after its create")))
}

/// Best-effort removal of a volume this call created and could not finish.
pub(super) async fn rollback(drv: &OntapDriver, d: &Discovered, name: &str, flexgroup: bool) {
    if let Err(e) = drv.client.volume_destroy(&d.svm, name, flexgroup).await {
        tracing::warn!(volume = %name, error = %e, "could not remove a half-created volume");
    }
}

pub(super) async fn get(
    drv: &OntapDriver,
    d: &Discovered,
    name: &str,
) -> DriverResult<Option<VolumeInfo>> {
    let v = drv.client.volume(&d.svm, name, Some(style(drv))).await?;
    Ok(v.map(|v| info(drv, d, &v)))
}

/// The name prefix all of this backend's volumes share.
pub(super) fn name_prefix(drv: &OntapDriver) -> String {
    ontap_internal_name(&drv.cfg.prefix, "")
}

pub(super) async fn list(drv: &OntapDriver, d: &Discovered) -> DriverResult<Vec<VolumeInfo>> {
    let prefix = name_prefix(drv);
    let vols = drv
        .client
        .volumes(&d.svm, &format!("{prefix}*"), Some(style(drv)))
        .await?;
    Ok(vols
        .iter()
        .filter(|v| {
            v.name.starts_with(&prefix)
                && !v.is_root
                && !v.name.starts_with(super::economy::POOL_NAME_ROOT)
        })
        .map(|v| info(drv, d, v))
        .collect())
}

pub(super) async fn destroy(
    drv: &OntapDriver,
    d: &Discovered,
    name: &str,
    flexgroup: bool,
) -> DriverResult<()> {
    drv.client
        .volume_destroy(&d.svm, name, flexgroup)
        .await
        .map_err(Into::into)
}

pub(super) async fn resize(
    drv: &OntapDriver,
    d: &Discovered,
    name: &str,
    size: u64,
    flexgroup: bool,
) -> DriverResult<()> {
    let v = drv
        .client
        .volume(&d.svm, name, Some(style(drv)))
        .await?
        .ok_or_else(|| not_found(name))?;
    check_grow(name, v.size, size)?;
    if size == v.size {
        return Ok(());
    }
    drv.client
        .volume_set_size(&d.svm, name, size, flexgroup)
        .await
        .map_err(Into::into)
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
    match drv.client.volume(&d.svm, name, None).await? {
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
    drv.client.snapshot_create(&d.svm, volume, snapshot).await?;
    let snaps = drv.client.snapshots(&d.svm, volume).await?;
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
    let snaps = drv.client.snapshots(&d.svm, volume).await?;
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
/// new one named after the current time; mounted (NAS) or its LUN mapped (SAN); split when
/// `splitOnClone` says so.
pub(super) async fn clone(
    drv: &OntapDriver,
    d: &Discovered,
    req: &CloneRequest,
) -> DriverResult<VolumeInfo> {
    let c = &drv.client;
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
                Err(e) if e.is_errno(&[errno::EEXIST]) => {}
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
        Err(e) if e.is_errno(&[errno::EOBJECTNOTFOUND]) => {
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
    let finish = async {
        if drv.variant().is_san() {
            c.lun_map(&d.svm, &super::san::lun_path(name), &drv.cfg.igroup_name)
                .await?;
        } else {
            c.volume_mount(&d.svm, name, &format!("/{name}")).await?;
        }
        if o.split_on_clone {
            c.clone_split_start(&d.svm, name).await?;
        }
        Ok::<_, ZapiError>(())
    };
    if let Err(e) = finish.await {
        if drv.variant().is_san() {
            let _ = c
                .lun_destroy(&d.svm, &super::san::lun_path(name), &drv.cfg.igroup_name)
                .await;
        }
        rollback(drv, d, name, false).await;
        return Err(e.into());
    }
    let got = if drv.variant().is_san() {
        super::san::get(drv, d, name).await?
    } else {
        get(drv, d, name).await?
    };
    got.ok_or_else(|| DriverError::Other(format!("clone {name} vanished after its create")))
}
