//! ontap-san: one FlexVol per volume holding one LUN, `/vol/<name>/lun0`, mapped to the
//! backend's igroup (created at discovery when missing). Access info carries the target IQN,
//! the portals (all iSCSI data LIFs, or only `dataLIF`) and the LUN id.

use std::collections::BTreeMap;

use super::client::OntapError;
use super::flexvol::{check_grow, clone_flexvol, flexvol_create, name_prefix, rollback};
use super::{Discovered, OntapDriver, VolumeOptions, not_found};
use crate::drivers::{CloneRequest, CreateRequest, DriverError, DriverResult, VolumeInfo};
use crate::model::AccessInfo;

/// The LUN of a volume.
pub fn lun_path(volume: &str) -> String {
    format!("/vol/{volume}/lun0")
}

/// ONTAP makes a LUN a whole number of cylinders (255 heads × 63 sectors × 512 bytes), so a
/// LUN is up to this much larger than asked: a 1 GiB LUN is 1,077,511,680 bytes.
const LUN_CYLINDER: u64 = 255 * 63 * 512;

/// Room a LUN's FlexVol keeps beyond the LUN, in percent: for LUN metadata and so that a thin
/// LUN that fills up never takes a FlexVol of exactly its size offline.
const HEADROOM_PCT: u64 = 10;

/// ONTAP's snapshot reserve when none is configured: 0 without a snapshot policy, else 5 %.
fn default_snapshot_reserve(policy: &str) -> u64 {
    if policy == "none" { 0 } else { 5 }
}

/// The FlexVol size that holds a LUN asked for as `lun_bytes`, rounded up by ONTAP, with its
/// headroom, outside the snapshot reserve (`reserve_pct` of the FlexVol).
pub fn flexvol_bytes(lun_bytes: u64, reserve_pct: u64) -> u64 {
    let lun = lun_bytes.saturating_add(LUN_CYLINDER);
    let with_headroom = lun.saturating_mul(100 + HEADROOM_PCT).div_ceil(100);
    let usable_pct = 100u64.saturating_sub(reserve_pct.min(90));
    with_headroom.saturating_mul(100).div_ceil(usable_pct)
}

pub(super) fn access(drv: &OntapDriver, d: &Discovered, lun_id: i32) -> AccessInfo {
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
    let reserve = match &o.snapshot_reserve {
        Some(r) => r.trim().parse().map_err(|_| {
            DriverError::Invalid(format!("invalid value for snapshotReserve: {r:?}"))
        })?,
        None => default_snapshot_reserve(&o.snapshot_policy),
    };
    let size = flexvol_bytes(req.size_bytes, reserve);
    let mut spec = flexvol_create(name, vec![aggr.name.clone()], size, o);
    // A LUN's FlexVol is not exported and has no NFS permissions; its reserve is explicit,
    // since its size is computed from it. Thickness is the FlexVol's space guarantee: the
    // LUN itself is never space-reserved.
    spec.export_policy = None;
    spec.unix_permissions = None;
    spec.snapshot_reserve = Some(reserve.to_string());
    drv.api().volume_create(&d.svm, &spec, false).await?;
    let path = lun_path(name);
    let finish = async {
        let size = drv.api().lun_create(&d.svm, &path, req.size_bytes).await?;
        let id = drv
            .api()
            .lun_map(&d.svm, &path, &drv.cfg.igroup_name)
            .await?;
        Ok::<_, OntapError>((size, id))
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
                .api()
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
    let c = drv.api();
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
    let c = drv.api();
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
    drv.api()
        .lun_destroy(&d.svm, &lun_path(name), &drv.cfg.igroup_name)
        .await?;
    drv.api()
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
    let c = drv.api();
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
    let reserve = vol
        .snapshot_reserve
        .unwrap_or_else(|| default_snapshot_reserve(&vol.snapshot_policy));
    let needed = flexvol_bytes(size, reserve);
    if vol.size < needed {
        c.volume_set_size(&d.svm, name, needed, false).await?;
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
    let c = drv.api();
    let name = &req.internal_name;
    let finish = async {
        c.lun_map(&d.svm, &lun_path(name), &drv.cfg.igroup_name)
            .await?;
        if o.split_on_clone {
            c.clone_split_start(&d.svm, name).await?;
        }
        Ok::<_, OntapError>(())
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flexvol_holds_the_rounded_lun_its_headroom_and_the_snapshot_reserve() {
        const GIB: u64 = 1 << 30;
        // ONTAP's 1 GiB LUN (1,077,511,680 bytes) plus 10 % fits outside a 10 % reserve.
        let v = flexvol_bytes(GIB, 10);
        assert!(v / 10 * 9 >= 1_077_511_680 / 10 * 11, "{v}");
        // A tiny LUN rounds up by most of a cylinder.
        assert!(flexvol_bytes(20 << 20, 0) >= 3 * LUN_CYLINDER);
        // The reserve is capped as ONTAP caps it (90 %).
        assert_eq!(flexvol_bytes(GIB, 95), flexvol_bytes(GIB, 90));
    }
}
