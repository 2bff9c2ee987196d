//! ontap-nas: one FlexVol per volume, mounted at `/<name>`. Get, list, destroy and resize
//! serve ontap-nas-flexgroup too (a FlexGroup is one volume, in the `flexgroup` style); what
//! ontap-san and ontap-nas-economy share with it is in `flexvol.rs`.

use super::client::OntapError;
use super::config::Variant;
use super::flexvol::{
    POOL_NAME_ROOT, check_grow, clone_flexvol, flexvol_create, name_prefix, nas_mounted, rollback,
};
use super::wire::VolumeRecord;
use super::{Discovered, OntapDriver, VolumeOptions, not_found};
use crate::drivers::{CloneRequest, CreateRequest, DriverError, DriverResult, VolumeInfo};

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

pub(super) async fn create(
    drv: &OntapDriver,
    d: &Discovered,
    req: &CreateRequest,
    o: &VolumeOptions,
) -> DriverResult<VolumeInfo> {
    let aggr = drv.aggregate(d, &req.pool)?;
    let name = &req.internal_name;
    let spec = nas_mounted(
        flexvol_create(name, vec![aggr.name.clone()], req.size_bytes, o),
        o,
    );
    drv.api().volume_create(&d.svm, &spec, false).await?;
    // From here on the volume is ours: undo it if the rest fails.
    if let Err(e) = drv.api().volume_create_finish(&d.svm, &spec, false).await {
        rollback(drv, d, name, false).await;
        return Err(e.into());
    }
    get(drv, d, name)
        .await?
        .ok_or_else(|| DriverError::Other(format!("volume {name} vanished after its create")))
}

pub(super) async fn get(
    drv: &OntapDriver,
    d: &Discovered,
    name: &str,
) -> DriverResult<Option<VolumeInfo>> {
    let v = drv.api().volume(&d.svm, name, Some(style(drv))).await?;
    Ok(v.map(|v| info(drv, d, &v)))
}

pub(super) async fn list(drv: &OntapDriver, d: &Discovered) -> DriverResult<Vec<VolumeInfo>> {
    let prefix = name_prefix(drv);
    let vols = drv
        .api()
        .volumes(&d.svm, &format!("{prefix}*"), Some(style(drv)))
        .await?;
    Ok(vols
        .iter()
        .filter(|v| {
            v.name.starts_with(&prefix) && !v.is_root && !v.name.starts_with(POOL_NAME_ROOT)
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
    drv.api()
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
        .api()
        .volume(&d.svm, name, Some(style(drv)))
        .await?
        .ok_or_else(|| not_found(name))?;
    check_grow(name, v.size, size)?;
    if size == v.size {
        return Ok(());
    }
    drv.api()
        .volume_set_size(&d.svm, name, size, flexgroup)
        .await
        .map_err(Into::into)
}

/// A FlexClone of the source FlexVol, mounted at `/<name>`, split when `splitOnClone` says so.
pub(super) async fn clone(
    drv: &OntapDriver,
    d: &Discovered,
    req: &CloneRequest,
) -> DriverResult<VolumeInfo> {
    let o = clone_flexvol(drv, d, req).await?;
    let c = drv.api();
    let name = &req.internal_name;
    let finish = async {
        c.volume_mount(&d.svm, name, &format!("/{name}")).await?;
        if o.split_on_clone {
            c.clone_split_start(&d.svm, name).await?;
        }
        Ok::<_, OntapError>(())
    };
    if let Err(e) = finish.await {
        rollback(drv, d, name, false).await;
        return Err(e.into());
    }
    get(drv, d, name)
        .await?
        .ok_or_else(|| DriverError::Other(format!("clone {name} vanished after its create")))
}
