//! Adoption: a create that failed ambiguously (a lost answer, errno 17) or was cut short by a
//! crash may have left its volume on the array. storch takes such a volume over only when it
//! carries storch's mark for this very name (written in the volume comment at create) and
//! matches the plan (style, aggregate, size); anything else is a name conflict and is left
//! exactly as it is. An ontap-san volume whose LUN was not made or mapped yet is finished.

use serde_json::{Value, json};

use super::economy;
use super::san::{self, lun_path};
use super::wire::VolumeRecord;
use super::{Discovered, OntapDriver, Variant};
use crate::drivers::{DriverError, DriverResult, PlannedVolume, VolumeInfo};

/// The key under which storch marks the volumes it makes (a volume comment is free text;
/// Trident keeps JSON there too).
const MARK_KEY: &str = "storch";

/// The comment storch writes on a FlexVol or FlexGroup it makes.
pub fn mark(name: &str) -> String {
    json!({ MARK_KEY: {"createdBy": "storch", "name": name} }).to_string()
}

/// Whether `comment` is storch's mark for the volume `name`.
pub fn is_marked(comment: &str, name: &str) -> bool {
    let Ok(v) = serde_json::from_str::<Value>(comment) else {
        return false;
    };
    let m = &v[MARK_KEY];
    m["createdBy"] == "storch" && m["name"] == name
}

fn not_ours(name: &str, what: &str) -> DriverError {
    DriverError::AlreadyExists(format!(
        "{what} {name} already exists on the array but storch did not create it (its comment \
         carries no storch mark for this name): a name conflict; storch leaves it alone"
    ))
}

fn differs(
    name: &str,
    field: &str,
    found: impl std::fmt::Display,
    planned: impl std::fmt::Display,
) -> DriverError {
    DriverError::Conflict(format!(
        "volume {name} was made by storch but differs from the plan: {field} is {found}, \
         planned {planned}; it is not adopted"
    ))
}

pub(super) async fn adopt(
    drv: &OntapDriver,
    d: &Discovered,
    planned: &PlannedVolume,
) -> DriverResult<Option<VolumeInfo>> {
    let name = planned.internal_name();
    if drv.variant() == Variant::NasEconomy {
        return adopt_qtree(drv, d, planned).await;
    }
    let style = super::nas::style(drv);
    let Some(v) = drv.api().volume(&d.svm, name, None).await? else {
        return Ok(None);
    };
    check_flexvol(drv, d, planned, &v, style)?;
    if !is_marked(&v.comment, name) {
        // A FlexClone made before its mark was written still names its planned parent.
        let PlannedVolume::Clone(req) = planned else {
            return Err(not_ours(name, "volume"));
        };
        match &v.clone_parent {
            Some((parent, _)) if *parent == req.source_internal_name => {
                drv.api()
                    .volume_set_comment(&d.svm, name, &mark(name))
                    .await?;
            }
            _ => return Err(not_ours(name, "volume")),
        }
    }
    match drv.variant() {
        Variant::San => finish_lun(drv, d, planned, &v).await.map(Some),
        _ => super::nas::get(drv, d, name).await,
    }
}

/// The style, pool and size of a FlexVol or FlexGroup found under a planned name.
fn check_flexvol(
    drv: &OntapDriver,
    d: &Discovered,
    planned: &PlannedVolume,
    v: &VolumeRecord,
    style: &str,
) -> DriverResult<()> {
    let name = planned.internal_name();
    if !v.style.is_empty() && v.style != style {
        return Err(differs(name, "style", &v.style, style));
    }
    let PlannedVolume::Create(req) = planned else {
        // A clone takes its parent's aggregate and size.
        return Ok(());
    };
    let pool = super::nas::pool_of(drv, d, v);
    if pool != req.pool {
        return Err(differs(name, "pool", pool, &req.pool));
    }
    let size = match drv.variant() {
        Variant::San => san::flexvol_bytes(req.size_bytes, v.snapshot_reserve.unwrap_or(0)),
        _ => req.size_bytes,
    };
    if v.size != size {
        return Err(differs(name, "size", v.size, size));
    }
    Ok(())
}

/// ontap-san: the volume's LUN, made and mapped when the interrupted create did not get that
/// far.
async fn finish_lun(
    drv: &OntapDriver,
    d: &Discovered,
    planned: &PlannedVolume,
    v: &VolumeRecord,
) -> DriverResult<VolumeInfo> {
    let name = planned.internal_name();
    let c = drv.api();
    let path = lun_path(name);
    let size = match c.luns(&d.svm, &path).await?.get(&path).copied() {
        Some(size) => size,
        None => match planned {
            PlannedVolume::Create(req) => c.lun_create(&d.svm, &path, req.size_bytes).await?,
            PlannedVolume::Clone(_) => {
                return Err(DriverError::Conflict(format!(
                    "clone {name} has no LUN {path}; it is not adopted"
                )));
            }
        },
    };
    let id = match drv.cfg.per_node_igroups {
        false => c.lun_map(&d.svm, &path, &drv.cfg.igroup_name).await?,
        true => 0,
    };
    Ok(VolumeInfo {
        internal_name: name.to_string(),
        pool: v.aggregate.clone(),
        size_bytes: size,
        access: san::access(drv, d, id),
    })
}

/// ontap-nas-economy: a qtree in one of storch's pool FlexVols, with the planned quota.
async fn adopt_qtree(
    drv: &OntapDriver,
    d: &Discovered,
    planned: &PlannedVolume,
) -> DriverResult<Option<VolumeInfo>> {
    let name = planned.internal_name();
    let Some(found) = economy::locate(drv, d, name).await? else {
        return Ok(None);
    };
    if !is_marked(&found.flexvol.comment, &found.flexvol.name) {
        return Err(not_ours(name, "qtree"));
    }
    if let PlannedVolume::Create(req) = planned {
        if found.flexvol.aggregate != req.pool {
            return Err(differs(name, "pool", &found.flexvol.aggregate, &req.pool));
        }
        let size = economy::quota_bytes(req.size_bytes);
        if found.size != size {
            return Err(differs(name, "size", found.size, size));
        }
    }
    economy::get(drv, d, name).await
}
