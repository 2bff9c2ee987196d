//! Volume access groups: list (paged), create, add and remove volumes, add initiators.
//! A call that names a volume already in (or not in) the group changes nothing.

use serde_json::{Value, json};

use super::volumes::active;
use super::{Ctx, Fail, Params, R, done, fail, names};
use crate::sim::solidfire::state::{AccessGroup, Cluster, take};

/// The most volumes (and initiators) one group holds.
pub const MAX_MEMBERS: usize = 2000;

fn group_json(c: &Cluster, id: u64, g: &AccessGroup) -> Value {
    let (deleted, live): (Vec<u64>, Vec<u64>) = g
        .volumes
        .iter()
        .partition(|v| c.volumes.get(v).is_some_and(|v| v.status == "deleted"));
    let ids: Vec<u64> = (1..=g.initiators.len() as u64).collect();
    json!({
        "volumeAccessGroupID": id,
        "name": g.name,
        "initiators": g.initiators,
        "initiatorIDs": ids,
        "volumes": live,
        "deletedVolumes": deleted,
        "attributes": g.attributes,
    })
}

fn group(c: &Cluster, id: u64) -> Result<&AccessGroup, Fail> {
    c.groups.get(&id).ok_or_else(|| {
        fail(
            names::VAG_ID_DOES_NOT_EXIST,
            format!("VolumeAccessGroupID {id} does not exist."),
        )
    })
}

fn check_initiators(list: &[String]) -> Result<(), Fail> {
    for i in list {
        if !(i.starts_with("iqn.") || i.starts_with("eui.") || i.starts_with("naa.")) {
            return Err(fail(
                names::INVALID_PARAMETER,
                format!("Invalid value for parameter initiators: {i:?} is not an iSCSI name"),
            ));
        }
    }
    Ok(())
}

fn check_volumes(c: &Cluster, ids: &[u64]) -> Result<(), Fail> {
    ids.iter().try_for_each(|v| active(c, *v).map(|_| ()))
}

fn too_many(n: usize) -> Result<(), Fail> {
    if n > MAX_MEMBERS {
        return Err(fail(
            names::EXCEEDED_LIMIT,
            format!(
                "A volume access group holds at most {MAX_MEMBERS} volumes and initiators each."
            ),
        ));
    }
    Ok(())
}

pub(super) fn list(ctx: &mut Ctx<'_>, p: &Params<'_>) -> R {
    let start = p.opt_u64("startVolumeAccessGroupID")?.unwrap_or(0);
    let cap = ctx.tuning.page_cap.max(1);
    let limit = match p.opt_u64("limit")? {
        Some(0) => {
            return Err(fail(
                names::INVALID_PARAMETER,
                "Invalid value for parameter limit: 0",
            ));
        }
        l => l.map_or(cap, |l| (l as usize).min(cap)),
    };
    let c = &*ctx.c;
    let out: Vec<Value> = c
        .groups
        .range(start..)
        .take(limit)
        .map(|(id, g)| group_json(c, *id, g))
        .collect();
    Ok(json!({ "volumeAccessGroups": out }))
}

pub(super) fn create(ctx: &mut Ctx<'_>, p: &Params<'_>) -> R {
    let name = p.str("name")?;
    if name.is_empty() || name.len() > 64 {
        return Err(fail(
            names::INVALID_PARAMETER,
            "Invalid value for parameter name: 1 to 64 characters",
        ));
    }
    let initiators = p.opt_strs("initiators")?.unwrap_or_default();
    check_initiators(&initiators)?;
    let mut volumes = p.opt_ids("volumes")?.unwrap_or_default();
    check_volumes(ctx.c, &volumes)?;
    volumes.dedup();
    too_many(volumes.len().max(initiators.len()))?;
    let attributes = p.attributes()?;
    let id = take(&mut ctx.c.next.group);
    let g = AccessGroup {
        name: name.to_string(),
        initiators,
        volumes,
        attributes,
    };
    let out = group_json(ctx.c, id, &g);
    ctx.c.groups.insert(id, g);
    ctx.dirty = true;
    Ok(json!({ "volumeAccessGroupID": id, "volumeAccessGroup": out }))
}

pub(super) fn add_volumes(ctx: &mut Ctx<'_>, p: &Params<'_>) -> R {
    let gid = p.id("volumeAccessGroupID")?;
    let ids = p.ids("volumes")?;
    let g = group(ctx.c, gid)?;
    check_volumes(ctx.c, &ids)?;
    if let Some(v) = ids.iter().find(|v| g.volumes.contains(v)) {
        return Err(fail(
            names::ALREADY_IN_VAG,
            format!("VolumeID {v} is already in volume access group {gid}."),
        ));
    }
    too_many(g.volumes.len() + ids.len())?;
    let g = ctx.c.groups.get_mut(&gid).expect("checked above");
    for v in ids {
        if !g.volumes.contains(&v) {
            g.volumes.push(v);
        }
    }
    ctx.dirty = true;
    let g = ctx.c.groups[&gid].clone();
    Ok(json!({ "volumeAccessGroup": group_json(ctx.c, gid, &g) }))
}

pub(super) fn remove_volumes(ctx: &mut Ctx<'_>, p: &Params<'_>) -> R {
    let gid = p.id("volumeAccessGroupID")?;
    let ids = p.ids("volumes")?;
    let g = group(ctx.c, gid)?;
    if let Some(v) = ids.iter().find(|v| !g.volumes.contains(v)) {
        return Err(fail(
            names::NOT_IN_VAG,
            format!("VolumeID {v} is not in volume access group {gid}."),
        ));
    }
    if let Some(g) = ctx.c.groups.get_mut(&gid) {
        g.volumes.retain(|v| !ids.contains(v));
    }
    ctx.dirty = true;
    done()
}

pub(super) fn add_initiators(ctx: &mut Ctx<'_>, p: &Params<'_>) -> R {
    let gid = p.id("volumeAccessGroupID")?;
    let list = p.opt_strs("initiators")?.ok_or_else(|| {
        fail(
            names::INVALID_PARAMETER,
            "Missing required parameter: initiators",
        )
    })?;
    check_initiators(&list)?;
    let g = group(ctx.c, gid)?;
    too_many(g.initiators.len() + list.len())?;
    if let Some(g) = ctx.c.groups.get_mut(&gid) {
        for i in list {
            if !g.initiators.contains(&i) {
                g.initiators.push(i);
            }
        }
    }
    ctx.dirty = true;
    done()
}
