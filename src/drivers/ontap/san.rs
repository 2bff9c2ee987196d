//! ontap-san: one FlexVol per volume holding one LUN, `/vol/<name>/lun0`. Access info carries
//! the target IQN, the portals (all iSCSI data LIFs, or only `dataLIF`) and the LUN id.
//!
//! Two ways hosts reach a LUN:
//! - the backend's igroup (`igroupName`, created at discovery when missing), which every LUN
//!   is mapped to at create, as in Trident 18.07: every host in that igroup sees every LUN,
//!   so nothing is published per host;
//! - with `perNodeIgroups: true` (for the CSI frontend), nothing is mapped at create: a
//!   publish puts the host's initiator in its node's igroup `<igroupName or storch>-<node>`
//!   (created when missing) and maps the LUN there; an unpublish unmaps it and destroys the
//!   node's igroup once no map is left.

use std::collections::BTreeMap;

use super::client::OntapError;
use super::flexvol::{check_grow, clone_flexvol, flexvol_create, name_prefix, rollback};
use super::{Discovered, OntapDriver, VolumeOptions, not_found};
use crate::drivers::{
    CloneRequest, CreateRequest, DriverError, DriverResult, HostAccess, PublishContext, VolumeInfo,
};
use crate::model::AccessInfo;

/// The publish context key of the LUN number the host's map got.
pub use crate::drivers::PUBLISH_LUN_KEY as LUN_NUMBER_KEY;

/// ONTAP's longest igroup name.
const MAX_IGROUP_NAME: usize = 96;

/// The igroup of `node`: `<base>-<node>`; a name too long for ONTAP keeps the start of the
/// node name and a hash of the whole, so that two nodes never share an igroup.
pub fn node_igroup(base: &str, node: &str) -> String {
    let full = format!("{base}-{node}");
    if full.len() <= MAX_IGROUP_NAME {
        return full;
    }
    // FNV-1a 64: stable across releases and platforms.
    let hash = node.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    let tail = format!("-{hash:016x}");
    let keep = MAX_IGROUP_NAME.saturating_sub(tail.len());
    let mut head: String = full.chars().take(keep).collect();
    while head.ends_with(['-', '.']) {
        head.pop();
    }
    format!("{head}{tail}")
}

/// The igroup every LUN is mapped to at create, `None` with per-node igroups.
fn create_igroup(drv: &OntapDriver) -> Option<&str> {
    (!drv.cfg.per_node_igroups).then_some(drv.cfg.igroup_name.as_str())
}

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
        iscsi_igroup: create_igroup(drv).unwrap_or_default().to_string(),
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
        let id = match create_igroup(drv) {
            Some(g) => drv.api().lun_map(&d.svm, &path, g).await?,
            None => 0,
        };
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
            let _ = drv.api().lun_destroy(&d.svm, &path).await;
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
    let id = lun_number(drv, d, &path).await?;
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
        let id = lun_number(drv, d, &path).await?;
        out.push(VolumeInfo {
            internal_name: v.name.clone(),
            pool: v.aggregate.clone(),
            size_bytes: *size,
            access: access(drv, d, id),
        });
    }
    Ok(out)
}

/// The LUN number in the backend's igroup (0 with per-node igroups: each host's number is in
/// its publish context).
async fn lun_number(drv: &OntapDriver, d: &Discovered, path: &str) -> DriverResult<i32> {
    Ok(match create_igroup(drv) {
        Some(g) => drv.api().lun_id(&d.svm, path, g).await?.unwrap_or(0),
        None => 0,
    })
}

/// Unmaps the LUN from every igroup (a host it is still published to loses it), destroys it
/// and its FlexVol, and the per-node igroups it leaves without maps.
pub(super) async fn destroy(drv: &OntapDriver, d: &Discovered, name: &str) -> DriverResult<()> {
    let c = drv.api();
    let groups = c.lun_destroy(&d.svm, &lun_path(name)).await?;
    c.volume_destroy(&d.svm, name, false).await?;
    if drv.cfg.per_node_igroups {
        let node_prefix = format!("{}-", drv.cfg.igroup_base);
        for g in groups.iter().filter(|g| g.starts_with(&node_prefix)) {
            c.igroup_destroy_unmapped(&d.svm, g).await?;
        }
    }
    Ok(())
}

/// The host's initiator, required to publish a LUN.
fn initiator_of<'a>(drv: &OntapDriver, host: &'a HostAccess) -> DriverResult<&'a str> {
    host.iscsi_initiator
        .as_deref()
        .filter(|i| !i.trim().is_empty())
        .ok_or_else(|| {
            DriverError::Invalid(format!(
                "host {} has no iSCSI initiator name: {} publishes a LUN to a node's \
                 initiator (a CSI node id NAME,IQN)",
                host.node,
                drv.cfg.variant.driver_name()
            ))
        })
}

/// Gives `host` the volume's LUN: its node's igroup (made when missing) gets the host's
/// initiator, and the LUN a map there. Returns the LUN number of that map.
pub(super) async fn publish(
    drv: &OntapDriver,
    d: &Discovered,
    name: &str,
    host: &HostAccess,
) -> DriverResult<PublishContext> {
    let initiator = initiator_of(drv, host)?;
    let c = drv.api();
    let path = lun_path(name);
    if !c.luns(&d.svm, &path).await?.contains_key(&path) {
        return Err(DriverError::NotFound(format!(
            "volume {name} has no LUN {path} to publish"
        )));
    }
    let igroup = node_igroup(&drv.cfg.igroup_base, &host.node);
    c.ensure_igroup(&d.svm, &igroup).await?;
    c.igroup_add(&d.svm, &igroup, initiator)
        .await
        .map_err(|e| {
            DriverError::Invalid(format!(
                "cannot add initiator {initiator} of host {} to igroup {igroup}: {}",
                host.node,
                e.into_driver()
            ))
        })?;
    let id = c.lun_map(&d.svm, &path, &igroup).await?;
    Ok(PublishContext::from([(
        LUN_NUMBER_KEY.to_string(),
        id.to_string(),
    )]))
}

/// Takes the LUN from `host`'s igroup, and the igroup away once it maps nothing; a host
/// without the map, or a volume already gone, is success.
pub(super) async fn unpublish(
    drv: &OntapDriver,
    d: &Discovered,
    name: &str,
    host: &HostAccess,
) -> DriverResult<()> {
    let c = drv.api();
    let igroup = node_igroup(&drv.cfg.igroup_base, &host.node);
    c.lun_unmap(&d.svm, &lun_path(name), &igroup).await?;
    c.igroup_destroy_unmapped(&d.svm, &igroup).await?;
    Ok(())
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

/// A FlexClone of the source FlexVol with its LUN mapped to the backend's igroup (unless hosts
/// get per-node igroups), split when
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
        if let Some(g) = create_igroup(drv) {
            c.lun_map(&d.svm, &lun_path(name), g).await?;
        }
        if o.split_on_clone {
            c.clone_split_start(&d.svm, name).await?;
        }
        Ok::<_, OntapError>(())
    };
    if let Err(e) = finish.await {
        let _ = c.lun_destroy(&d.svm, &lun_path(name)).await;
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
    fn node_igroups_fit_ontaps_names() {
        assert_eq!(node_igroup("storch", "worker-1"), "storch-worker-1");
        let long = "n".repeat(200);
        let a = node_igroup("storch", &long);
        let b = node_igroup("storch", &format!("{long}x"));
        assert!(
            a.len() <= MAX_IGROUP_NAME && b.len() <= MAX_IGROUP_NAME,
            "{a}"
        );
        assert_ne!(a, b, "nodes sharing a long prefix keep their own igroups");
        assert!(a.starts_with("storch-nnn"));
        assert_eq!(a, node_igroup("storch", &long), "stable");
    }

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
