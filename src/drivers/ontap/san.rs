//! ontap-san: one FlexVol per volume holding one LUN, `/vol/<name>/lun0`, mapped to the
//! backend's igroup (created at discovery when missing). Access info carries the target IQN,
//! the portals (all iSCSI data LIFs, or only `dataLIF`) and the LUN id.

use std::collections::BTreeMap;

use super::client::ZapiError;
use super::flexvol::{check_grow, clone_flexvol, flexvol_create, name_prefix, rollback};
use super::{Discovered, OntapDriver, VolumeOptions, not_found};
use crate::drivers::{CloneRequest, CreateRequest, DriverError, DriverResult, VolumeInfo};
use crate::model::AccessInfo;

/// The LUN of a volume.
pub fn lun_path(volume: &str) -> String {
    format!("/vol/{volume}/lun0")
}

fn access(drv: &OntapDriver, d: &Discovered, lun_id: i32) -> AccessInfo {
    AccessInfo {
        iscsi_target_portal: d.iscsi_portals.first().cloned().unwrap_or_default(),
        iscsi_portals: d.iscsi_portals.iter().skip(1).cloned().collect(),
        iscsi_target_iqn: d.iqn.clone(),
        iscsi_lun_number: lun_id,
        iscsi_interface: "default".into(),
        iscsi_igroup: drv.cfg.igroup_name.clone(),
        ..AccessInfo::default()
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
    let mut spec = flexvol_create(name, vec![aggr.name.clone()], req.size_bytes, o);
    // A LUN's FlexVol is not exported and has no NFS permissions.
    spec.export_policy = None;
    spec.unix_permissions = None;
    drv.client.volume_create(&d.svm, &spec, false).await?;
    let path = lun_path(name);
    let finish = async {
        let size = drv
            .client
            .lun_create(&d.svm, &path, req.size_bytes, o.space_reserve == "volume")
            .await?;
        let id = drv
            .client
            .lun_map(&d.svm, &path, &drv.cfg.igroup_name)
            .await?;
        Ok::<_, ZapiError>((size, id))
    };
    match finish.await {
        Ok((size, id)) => Ok(VolumeInfo {
            internal_name: name.clone(),
            pool: aggr.name.clone(),
            size_bytes: size,
            access: access(drv, d, id),
        }),
        Err(e) => {
            let _ = drv
                .client
                .lun_destroy(&d.svm, &path, &drv.cfg.igroup_name)
                .await;
            rollback(drv, d, name, false).await;
            Err(e.into())
        }
    }
}

pub(super) async fn get(
    drv: &OntapDriver,
    d: &Discovered,
    name: &str,
) -> DriverResult<Option<VolumeInfo>> {
    let c = &drv.client;
    let Some(vol) = c.volume(&d.svm, name, Some("flexvol")).await? else {
        return Ok(None);
    };
    let path = lun_path(name);
    let luns = c.luns(&d.svm, &path).await?;
    let Some(size) = luns.get(&path).copied() else {
        // A FlexVol without its LUN (a create cut short): report the FlexVol.
        return Ok(Some(VolumeInfo {
            internal_name: name.to_string(),
            pool: vol.aggregate,
            size_bytes: vol.size,
            access: access(drv, d, 0),
        }));
    };
    let id = c
        .lun_id(&d.svm, &path, &drv.cfg.igroup_name)
        .await?
        .unwrap_or(0);
    Ok(Some(VolumeInfo {
        internal_name: name.to_string(),
        pool: vol.aggregate,
        size_bytes: size,
        access: access(drv, d, id),
    }))
}

pub(super) async fn list(drv: &OntapDriver, d: &Discovered) -> DriverResult<Vec<VolumeInfo>> {
    let prefix = name_prefix(drv);
    let c = &drv.client;
    let vols = c
        .volumes(&d.svm, &format!("{prefix}*"), Some("flexvol"))
        .await?;
    let luns: BTreeMap<String, u64> = c.luns(&d.svm, &format!("/vol/{prefix}*")).await?;
    let mut out = Vec::new();
    for v in vols.iter().filter(|v| v.name.starts_with(&prefix)) {
        let path = lun_path(&v.name);
        let Some(size) = luns.get(&path) else {
            continue;
        };
        let id = c
            .lun_id(&d.svm, &path, &drv.cfg.igroup_name)
            .await?
            .unwrap_or(0);
        out.push(VolumeInfo {
            internal_name: v.name.clone(),
            pool: v.aggregate.clone(),
            size_bytes: *size,
            access: access(drv, d, id),
        });
    }
    Ok(out)
}

pub(super) async fn destroy(drv: &OntapDriver, d: &Discovered, name: &str) -> DriverResult<()> {
    drv.client
        .lun_destroy(&d.svm, &lun_path(name), &drv.cfg.igroup_name)
        .await?;
    drv.client
        .volume_destroy(&d.svm, name, false)
        .await
        .map_err(Into::into)
}

pub(super) async fn resize(
    drv: &OntapDriver,
    d: &Discovered,
    name: &str,
    size: u64,
) -> DriverResult<()> {
    let c = &drv.client;
    let vol = c
        .volume(&d.svm, name, Some("flexvol"))
        .await?
        .ok_or_else(|| not_found(name))?;
    let path = lun_path(name);
    let current = c
        .luns(&d.svm, &path)
        .await?
        .get(&path)
        .copied()
        .ok_or_else(|| DriverError::NotFound(format!("LUN {path} not found")))?;
    check_grow(name, current, size)?;
    if size == current {
        return Ok(());
    }
    if vol.size < size {
        c.volume_set_size(&d.svm, name, size, false).await?;
    }
    c.lun_resize(&d.svm, &path, size).await.map_err(Into::into)
}

/// A FlexClone of the source FlexVol with its LUN mapped to the backend's igroup, split when
/// `splitOnClone` says so.
pub(super) async fn clone(
    drv: &OntapDriver,
    d: &Discovered,
    req: &CloneRequest,
) -> DriverResult<VolumeInfo> {
    let o = clone_flexvol(drv, d, req).await?;
    let c = &drv.client;
    let name = &req.internal_name;
    let finish = async {
        c.lun_map(&d.svm, &lun_path(name), &drv.cfg.igroup_name)
            .await?;
        if o.split_on_clone {
            c.clone_split_start(&d.svm, name).await?;
        }
        Ok::<_, ZapiError>(())
    };
    if let Err(e) = finish.await {
        let _ = c
            .lun_destroy(&d.svm, &lun_path(name), &drv.cfg.igroup_name)
            .await;
        rollback(drv, d, name, false).await;
        return Err(e.into());
    }
    get(drv, d, name)
        .await?
        .ok_or_else(|| DriverError::Other(format!("clone {name} vanished after its create")))
}
