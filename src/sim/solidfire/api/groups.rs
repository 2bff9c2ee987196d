//! Volume access groups: list (paged), create, delete, add and remove volumes, add
//! initiators.
//!
//! Element's rules (its API reference, CreateVolumeAccessGroup and the initiator object): a
//! group holds at most 64 initiators and 2000 volumes; an initiator belongs to one group at a
//! time; a volume is in at most 64 groups (the HCI documentation's figure; one older API page
//! reads "four"). An iSCSI initiator name is `iqn.YYYY-MM` followed by lower-case letters,
//! digits, `.`, `:` or `-`. Group names are 1 to 64 characters and need not be unique.
//! A call that names a volume already in (or not in) the group is refused with
//! xAlreadyInVolumeAccessGroup (xNotInVolumeAccessGroup) and changes nothing.

use serde_json::{Value, json};

use super::volumes::active;
use super::{Ctx, Fail, Params, R, done, fail, names};
use crate::sim::solidfire::state::{AccessGroup, Cluster, take};

/// The most initiators one group holds.
pub const MAX_INITIATORS: usize = 64;
/// The most volumes one group holds.
pub const MAX_VOLUMES: usize = 2000;
/// The most groups one volume is in.
pub const MAX_GROUPS_PER_VOLUME: usize = 64;

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

/// An initiator name Element accepts: `iqn.YYYY-MM` then lower-case letters, digits, `.`, `:`
/// or `-`; or an `eui.` / `naa.` name of hex digits.
fn valid_initiator(i: &str) -> bool {
    if let Some(rest) = i.strip_prefix("iqn.") {
        let b = rest.as_bytes();
        let date = b.len() >= 7
            && b[..4].iter().all(u8::is_ascii_digit)
            && b[4] == b'-'
            && b[5..7].iter().all(u8::is_ascii_digit);
        return date
            && rest[7..].bytes().all(|c| {
                c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, b'.' | b':' | b'-')
            });
    }
    match i.strip_prefix("eui.").or_else(|| i.strip_prefix("naa.")) {
        Some(hex) => !hex.is_empty() && hex.bytes().all(|c| c.is_ascii_hexdigit()),
        None => false,
    }
}

/// Checks the names and that none of them is in a group other than `own` already; returns
/// them without repeats.
fn check_initiators(c: &Cluster, own: Option<u64>, list: &[&str]) -> Result<Vec<String>, Fail> {
    let mut out: Vec<String> = Vec::new();
    for i in list {
        if !valid_initiator(i) {
            return Err(fail(
                names::INVALID_PARAMETER,
                format!(
                    "Invalid value for parameter initiators: {i:?} is not an iSCSI name \
                     (iqn.YYYY-MM followed by lower-case letters, digits, '.', ':' or '-')"
                ),
            ));
        }
        if let Some((gid, _)) = c
            .groups
            .iter()
            .find(|(gid, g)| Some(**gid) != own && g.initiators.iter().any(|x| x == i))
        {
            return Err(fail(
                names::INITIATOR_EXISTS,
                format!(
                    "Initiator {i} already belongs to volume access group {gid}; an initiator \
                     can be in one volume access group only."
                ),
            ));
        }
        if !out.iter().any(|x| x == i) {
            out.push(i.to_string());
        }
    }
    Ok(out)
}

/// Checks that the volumes are active and that each can join one more group.
fn check_volumes(c: &Cluster, ids: &[u64]) -> Result<(), Fail> {
    for v in ids {
        active(c, *v)?;
        let n = c.groups.values().filter(|g| g.volumes.contains(v)).count();
        if n >= MAX_GROUPS_PER_VOLUME {
            return Err(fail(
                names::EXCEEDED_LIMIT,
                format!(
                    "VolumeID {v} is in {n} volume access groups; a volume is in at most \
                     {MAX_GROUPS_PER_VOLUME}."
                ),
            ));
        }
    }
    Ok(())
}

/// Refuses a group that would hold more than Element's limits.
fn too_many(initiators: usize, volumes: usize) -> Result<(), Fail> {
    if initiators > MAX_INITIATORS {
        return Err(fail(
            names::EXCEEDED_LIMIT,
            format!("A volume access group holds at most {MAX_INITIATORS} initiators."),
        ));
    }
    if volumes > MAX_VOLUMES {
        return Err(fail(
            names::EXCEEDED_LIMIT,
            format!("A volume access group holds at most {MAX_VOLUMES} volumes."),
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
    let initiators = check_initiators(ctx.c, None, &initiators)?;
    let mut volumes = p.opt_ids("volumes")?.unwrap_or_default();
    volumes.sort_unstable();
    volumes.dedup();
    check_volumes(ctx.c, &volumes)?;
    too_many(initiators.len(), volumes.len())?;
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
    if let Some(v) = ids.iter().find(|v| g.volumes.contains(v)) {
        return Err(fail(
            names::ALREADY_IN_VAG,
            format!("VolumeID {v} is already in volume access group {gid}."),
        ));
    }
    check_volumes(ctx.c, &ids)?;
    too_many(g.initiators.len(), g.volumes.len() + ids.len())?;
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
    p.required("initiators")?;
    let list = p.opt_strs("initiators")?.unwrap_or_default();
    let g = group(ctx.c, gid)?;
    let list = check_initiators(ctx.c, Some(gid), &list)?;
    let new = list.iter().filter(|i| !g.initiators.contains(i)).count();
    too_many(g.initiators.len() + new, g.volumes.len())?;
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

/// `DeleteVolumeAccessGroup`: the group goes; its volumes stay (they lose only this group's
/// access). `deleteOrphanInitiators` and `force` are accepted (the simulator keeps no
/// initiator objects apart from the groups, nor virtual networks).
pub(super) fn delete(ctx: &mut Ctx<'_>, p: &Params<'_>) -> R {
    let gid = p.id("volumeAccessGroupID")?;
    p.opt_bool("deleteOrphanInitiators")?;
    p.opt_bool("force")?;
    group(ctx.c, gid)?;
    ctx.c.groups.remove(&gid);
    ctx.dirty = true;
    done()
}
