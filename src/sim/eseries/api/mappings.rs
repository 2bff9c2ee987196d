//! LUN mappings and the iSCSI target.
//!
//! A volume has at most one mapping, to a host or a host group. The LUNs a host sees are its
//! own mappings' and its group's; a group's are its own and its hosts'. A LUN given in the
//! request must be free among those (0 to 255); without one the lowest free LUN from 1 is
//! chosen.

use serde_json::{Value, json};

use super::{Ctx, R, Req, no_content, not_found, ok, refuse, retcodes};
use crate::sim::eseries::state::{Array, Mapping, NULL_REF, prefix};

pub const MAX_LUN: u32 = 255;

pub fn mapping_json(a: &Array, r: &str, m: &Mapping) -> Value {
    let kind = if a.groups.contains_key(&m.target) {
        "cluster"
    } else {
        "host"
    };
    let ssid = u64::from_str_radix(&m.volume[m.volume.len() - 4..], 16).unwrap_or(0);
    json!({
        "lunMappingRef": r,
        "id": r,
        "lun": m.lun,
        "ssid": ssid,
        "perms": 15,
        "volumeRef": m.volume,
        "type": kind,
        "mapRef": m.target,
    })
}

pub(super) fn list(ctx: &mut Ctx<'_>, _: &Req<'_>) -> R {
    let a = &ctx.p.array;
    ok(a.mappings
        .iter()
        .map(|(r, m)| mapping_json(a, r, m))
        .collect())
}

pub(super) fn get(ctx: &mut Ctx<'_>, req: &Req<'_>) -> R {
    let a = &ctx.p.array;
    let r = req.arg(0);
    let m = a
        .mappings
        .get(r)
        .ok_or_else(|| not_found("volume mapping", r))?;
    ok(mapping_json(a, r, m))
}

/// The LUNs taken for a mapping to `target`.
fn luns_seen(a: &Array, target: &str) -> Vec<u32> {
    let related: Vec<&str> = match a.hosts.get(target) {
        Some(h) if h.group != NULL_REF => vec![target, h.group.as_str()],
        Some(_) => vec![target],
        None => std::iter::once(target)
            .chain(
                a.hosts
                    .iter()
                    .filter(|(_, h)| h.group == target)
                    .map(|(r, _)| r.as_str()),
            )
            .collect(),
    };
    a.mappings
        .values()
        .filter(|m| related.contains(&m.target.as_str()))
        .map(|m| m.lun)
        .collect()
}

pub(super) fn create(ctx: &mut Ctx<'_>, req: &Req<'_>) -> R {
    let f = req.fields(&["mappableObjectId", "targetId", "lun"])?;
    let volume = f.str("mappableObjectId")?;
    let target = f.str("targetId")?;
    let lun = f.opt_u64("lun")?;
    let a = &ctx.p.array;
    if !a.volumes.contains_key(volume) {
        return Err(refuse(
            retcodes::NOT_FOUND,
            format!("Invalid value for field mappableObjectId: no volume {volume:?}"),
        ));
    }
    if !a.hosts.contains_key(target) && !a.groups.contains_key(target) {
        return Err(refuse(
            retcodes::NOT_FOUND,
            format!("Invalid value for field targetId: no host or host group {target:?}"),
        ));
    }
    if let Some((r, _)) = a.mapping_of(volume) {
        return Err(refuse(
            retcodes::ALREADY_MAPPED,
            format!("Volume {volume} is already mapped ({r})"),
        ));
    }
    let taken = luns_seen(a, target);
    let lun = match lun {
        Some(l) if l > MAX_LUN as u64 => {
            return Err(super::invalid(format!(
                "Invalid value for field lun: {l} (0 to {MAX_LUN})"
            )));
        }
        Some(l) if taken.contains(&(l as u32)) => {
            return Err(refuse(
                retcodes::LUN_IN_USE,
                format!("LUN {l} is already in use for {target}"),
            ));
        }
        Some(l) => l as u32,
        None => (1..=MAX_LUN)
            .find(|l| !taken.contains(l))
            .ok_or_else(|| refuse(retcodes::LUN_IN_USE, format!("No LUN is free for {target}")))?,
    };
    let a = ctx.a();
    let r = a.new_ref(prefix::MAPPING);
    let m = Mapping {
        volume: volume.to_string(),
        target: target.to_string(),
        lun,
    };
    let out = mapping_json(a, &r, &m);
    a.mappings.insert(r, m);
    ctx.dirty = true;
    ok(out)
}

pub(super) fn delete(ctx: &mut Ctx<'_>, req: &Req<'_>) -> R {
    let r = req.arg(0);
    ctx.a()
        .mappings
        .remove(r)
        .ok_or_else(|| not_found("volume mapping", r))?;
    ctx.dirty = true;
    no_content()
}

/// `GET …/iscsi/target-settings`: the array's one target, its IQN and a portal per `--portals`
/// address, spread over the controllers (`groupTag` 1 for A, 2 for B).
pub(super) fn target(ctx: &mut Ctx<'_>, _: &Req<'_>) -> R {
    let a = &ctx.p.array;
    let n = a.controllers.len().max(1);
    let portals: Vec<Value> = a
        .portals
        .iter()
        .enumerate()
        .map(|(i, ip)| {
            json!({"groupTag": i % n + 1,
                   "ipAddress": {"addressType": "ipv4", "ipv4Address": ip},
                   "tcpListenPort": 3260})
        })
        .collect();
    ok(json!({
        "targetRef": format!("{}000000{}{:016X}", prefix::TARGET, &a.wwn[8..24], 1),
        "nodeName": {"ioInterfaceType": "iscsi", "iscsiNodeName": a.iqn(), "remoteNodeWWN": null},
        "alias": {"ioInterfaceType": "iscsi", "iscsiAlias": a.name},
        "configuredAuthMethods": {"authMethodData": [{"authMethod": "none", "chapSecret": null}]},
        "portals": portals,
    }))
}
