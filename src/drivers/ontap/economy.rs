//! ontap-nas-economy: one qtree per volume inside a pool of FlexVols the driver manages.
//!
//! - Pool FlexVols are named `trident_qtree_pool_<prefix>_<10 random A–Z>` (`__` collapsed),
//!   exported through `trident_qtree_pool_export_policy` (a `0.0.0.0/0` rule) and mounted at
//!   `/<flexvol>`; a qtree's NFS path is `/<flexvol>/<qtree>`.
//! - A FlexVol's size is the sum of its qtrees' sizes: a create grows the chosen FlexVol by the
//!   new qtree's size (so thick pools account capacity exactly), a destroy shrinks it, and a
//!   FlexVol left empty is destroyed (pruned) at once; discovery prunes any left by a crash.
//! - A qtree goes into a FlexVol of the requested aggregate whose space reserve, snapshot
//!   policy and encryption match, holding fewer than `qtreesPerFlexvol` qtrees (200); else a
//!   new FlexVol is made.
//! - Each qtree's size is a tree quota (`disk-limit` in KiB) followed by `quota-resize`.
//! - Snapshots and clones are not supported. All FlexVol management runs under one lock.

use std::collections::BTreeMap;

use super::client::OntapError;
use super::flexvol::{POOL_NAME_ROOT, check_grow};
use super::wire::{QtreeRecord, VolumeCreate, VolumeRecord};
use super::{Discovered, OntapDriver, VolumeOptions, not_found, permissions_to_octal};
use crate::drivers::{CreateRequest, DriverError, DriverResult, VolumeInfo};

/// The export policy of the pool FlexVols.
pub const EXPORT_POLICY: &str = "trident_qtree_pool_export_policy";

/// Qtree names are limited to 64 characters.
pub const MAX_QTREE_NAME: usize = 64;

/// The pool FlexVol name prefix of a storage prefix: `trident_qtree_pool_<prefix>_` with
/// `-`/`.` → `_` and `__` collapsed.
pub fn pool_prefix(storage_prefix: &str) -> String {
    format!("{POOL_NAME_ROOT}{storage_prefix}_")
        .replace(['-', '.'], "_")
        .replace("__", "_")
}

fn new_pool_name(storage_prefix: &str) -> String {
    let suffix: String = (0..10)
        .map(|_| char::from(b'A' + (rand::random::<u8>() % 26)))
        .collect();
    format!("{}{suffix}", pool_prefix(storage_prefix))
}

/// A qtree's size as its quota holds it. Quotas are in KiB: sizes are kept whole KiB so that
/// FlexVol sizes add up exactly.
pub(super) fn quota_bytes(size: u64) -> u64 {
    size.div_ceil(1024) * 1024
}

/// Where a qtree lives.
pub(super) struct Located {
    pub flexvol: VolumeRecord,
    pub size: u64,
}

fn quota_target(flexvol: &str, qtree: &str) -> String {
    format!("/vol/{flexvol}/{qtree}")
}

pub(super) async fn locate(
    drv: &OntapDriver,
    d: &Discovered,
    name: &str,
) -> DriverResult<Option<Located>> {
    let prefix = pool_prefix(&drv.cfg.prefix);
    let c = drv.api();
    let qtrees = c.qtrees(&d.svm, &format!("{prefix}*"), Some(name)).await?;
    let Some(q) = qtrees.into_iter().find(|q| q.qtree == name) else {
        return Ok(None);
    };
    let Some(flexvol) = c.volume(&d.svm, &q.volume, Some("flexvol")).await? else {
        return Ok(None);
    };
    let quotas = c.tree_quotas(&d.svm, &q.volume).await?;
    let size = quotas
        .get(&quota_target(&q.volume, name))
        .copied()
        .unwrap_or(0);
    Ok(Some(Located { flexvol, size }))
}

fn info(
    d: &Discovered,
    drv: &OntapDriver,
    flexvol: &VolumeRecord,
    qtree: &str,
    size: u64,
) -> VolumeInfo {
    let junction = if flexvol.junction.is_empty() {
        format!("/{}", flexvol.name)
    } else {
        flexvol.junction.clone()
    };
    VolumeInfo {
        internal_name: qtree.to_string(),
        pool: flexvol.aggregate.clone(),
        size_bytes: size,
        access: drv.nfs_access(d, &format!("{}/{qtree}", junction.trim_end_matches('/'))),
    }
}

pub(super) async fn get(
    drv: &OntapDriver,
    d: &Discovered,
    name: &str,
) -> DriverResult<Option<VolumeInfo>> {
    Ok(locate(drv, d, name)
        .await?
        .map(|l| info(d, drv, &l.flexvol, name, l.size)))
}

pub(super) async fn list(drv: &OntapDriver, d: &Discovered) -> DriverResult<Vec<VolumeInfo>> {
    let prefix = pool_prefix(&drv.cfg.prefix);
    let pattern = format!("{prefix}*");
    let c = drv.api();
    let flexvols: BTreeMap<String, VolumeRecord> = c
        .volumes(&d.svm, &pattern, Some("flexvol"))
        .await?
        .into_iter()
        .map(|v| (v.name.clone(), v))
        .collect();
    let qtrees = c.qtrees(&d.svm, &pattern, None).await?;
    let quotas = c.tree_quotas(&d.svm, &pattern).await?;
    Ok(qtrees
        .iter()
        .filter(|q| !q.qtree.starts_with("deleted_"))
        .filter_map(|q| {
            let f = flexvols.get(&q.volume)?;
            let size = quotas
                .get(&quota_target(&q.volume, &q.qtree))
                .copied()
                .unwrap_or(0);
            Some(info(d, drv, f, &q.qtree, size))
        })
        .collect())
}

/// The pool FlexVols and how many qtrees each holds.
async fn pool_flexvols(
    drv: &OntapDriver,
    d: &Discovered,
) -> Result<Vec<(VolumeRecord, usize)>, OntapError> {
    let prefix = pool_prefix(&drv.cfg.prefix);
    let pattern = format!("{prefix}*");
    let c = drv.api();
    let vols = c.volumes(&d.svm, &pattern, Some("flexvol")).await?;
    let qtrees: Vec<QtreeRecord> = c.qtrees(&d.svm, &pattern, None).await?;
    Ok(vols
        .into_iter()
        .filter(|v| v.name.starts_with(&prefix))
        .map(|v| {
            let n = qtrees.iter().filter(|q| q.volume == v.name).count();
            (v, n)
        })
        .collect())
}

pub(super) async fn create(
    drv: &OntapDriver,
    d: &Discovered,
    req: &CreateRequest,
    o: &VolumeOptions,
) -> DriverResult<VolumeInfo> {
    let name = &req.internal_name;
    if name.len() > MAX_QTREE_NAME {
        return Err(DriverError::Invalid(format!(
            "volume name {name} is longer than {MAX_QTREE_NAME} characters, the qtree limit"
        )));
    }
    let aggr = drv.aggregate(d, &req.pool)?;
    let size = quota_bytes(req.size_bytes);
    let c = drv.api();
    let _guard = drv.eco_lock.lock().await;

    if locate(drv, d, name).await?.is_some() {
        return Err(DriverError::AlreadyExists(format!(
            "volume {name} already exists"
        )));
    }
    let candidates = pool_flexvols(drv, d).await?;
    let chosen = candidates.into_iter().find(|(v, n)| {
        v.aggregate == aggr.name
            && *n < drv.cfg.qtrees_per_flexvol
            && v.space_guarantee == o.space_reserve
            && v.snapshot_policy == o.snapshot_policy
            && v.encrypt == o.encryption
            && v.state != "offline"
    });
    let (flexvol, old_size, created) = match chosen {
        Some((v, _)) => {
            c.volume_set_size(&d.svm, &v.name, v.size + size, false)
                .await?;
            (v.name, v.size, false)
        }
        None => {
            let fv = new_pool_name(&drv.cfg.prefix);
            let spec = VolumeCreate {
                name: fv.clone(),
                aggregates: vec![aggr.name.clone()],
                size,
                space_reserve: o.space_reserve.clone(),
                snapshot_policy: o.snapshot_policy.clone(),
                snapshot_reserve: Some("0".into()),
                export_policy: Some(EXPORT_POLICY.into()),
                unix_permissions: Some("---rwxrwxrwx".into()),
                security_style: o.security_style.clone(),
                encrypt: o.encryption,
                comment: super::adopt::mark(&fv),
                junction_path: Some(format!("/{fv}")),
                snapdir: Some(false),
            };
            c.volume_create(&d.svm, &spec, false).await?;
            let setup = async {
                c.volume_create_finish(&d.svm, &spec, false).await?;
                c.quota_on(&d.svm, &fv).await
            };
            if let Err(e) = setup.await {
                let _ = c.volume_destroy(&d.svm, &fv, false).await;
                return Err(e.into());
            }
            (fv, 0, true)
        }
    };
    let make = async {
        c.qtree_create(
            &d.svm,
            &flexvol,
            name,
            &permissions_to_octal(&o.unix_permissions),
            &o.security_style,
            &o.export_policy,
        )
        .await?;
        c.tree_quota_set(&d.svm, &flexvol, name, size).await
    };
    if let Err(e) = make.await {
        let _ = c.qtree_delete(&d.svm, &flexvol, name).await;
        let undo = if created {
            c.volume_destroy(&d.svm, &flexvol, false).await
        } else {
            c.volume_set_size(&d.svm, &flexvol, old_size, false).await
        };
        if let Err(u) = undo {
            tracing::warn!(flexvol = %flexvol, error = %u, "could not undo a FlexVol change");
        }
        return Err(e.into());
    }
    let fv = c
        .volume(&d.svm, &flexvol, Some("flexvol"))
        .await?
        .ok_or_else(|| DriverError::Other(format!("FlexVol {flexvol} vanished")))?;
    Ok(info(d, drv, &fv, name, size))
}

pub(super) async fn destroy(drv: &OntapDriver, d: &Discovered, name: &str) -> DriverResult<()> {
    let c = drv.api();
    let _guard = drv.eco_lock.lock().await;
    let Some(l) = locate(drv, d, name).await? else {
        return Ok(());
    };
    let fv = &l.flexvol.name;
    c.qtree_delete(&d.svm, fv, name).await?;
    c.tree_quota_delete(&d.svm, fv, name).await?;
    let left = c
        .qtrees(&d.svm, fv, None)
        .await?
        .into_iter()
        .filter(|q| q.volume == *fv)
        .count();
    if left == 0 {
        c.volume_destroy(&d.svm, fv, false).await?;
    } else if l.size > 0 {
        let new = l
            .flexvol
            .size
            .saturating_sub(l.size)
            .max(super::MIN_VOLUME_BYTES);
        c.volume_set_size(&d.svm, fv, new, false).await?;
    }
    Ok(())
}

pub(super) async fn resize(
    drv: &OntapDriver,
    d: &Discovered,
    name: &str,
    size: u64,
) -> DriverResult<()> {
    let c = drv.api();
    let _guard = drv.eco_lock.lock().await;
    let l = locate(drv, d, name).await?.ok_or_else(|| not_found(name))?;
    let size = size.div_ceil(1024) * 1024;
    check_grow(name, l.size, size)?;
    if size == l.size {
        return Ok(());
    }
    let fv = &l.flexvol.name;
    c.volume_set_size(&d.svm, fv, l.flexvol.size + (size - l.size), false)
        .await?;
    if let Err(e) = c.tree_quota_set(&d.svm, fv, name, size).await {
        let _ = c.volume_set_size(&d.svm, fv, l.flexvol.size, false).await;
        return Err(e.into());
    }
    Ok(())
}

/// Destroys pool FlexVols that hold no qtree (left by a crash between a qtree's delete and
/// its FlexVol's). The caller holds the economy lock.
pub(super) async fn prune(drv: &OntapDriver, d: &Discovered) -> DriverResult<()> {
    for (v, n) in pool_flexvols(drv, d).await? {
        if n == 0 {
            tracing::info!(flexvol = %v.name, "pruning an empty economy FlexVol");
            drv.api().volume_destroy(&d.svm, &v.name, false).await?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pool_names() {
        assert_eq!(pool_prefix("trident_"), "trident_qtree_pool_trident_");
        assert_eq!(pool_prefix(""), "trident_qtree_pool_");
        assert_eq!(pool_prefix("my-pre"), "trident_qtree_pool_my_pre_");
        let n = new_pool_name("trident_");
        assert!(n.starts_with("trident_qtree_pool_trident_"), "{n}");
        let suffix = &n["trident_qtree_pool_trident_".len()..];
        assert_eq!(suffix.len(), 10);
        assert!(suffix.chars().all(|c| c.is_ascii_uppercase()));
    }
}
