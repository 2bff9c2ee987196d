//! Pools and volumes: create (with the proxy's request checks), list, read, delete, and
//! dynamic volume expansion with progress.
//!
//! A volume holds its size in its pool (thick); a create or expansion that does not fit the
//! pool's free space is 422. Sizes round up to whole 512-byte blocks. `segSize` (KiB) is one of
//! 8 to 512 (a power of two; 0 or absent means 128); disk pools take only 128. Labels are
//! unique among the array's volumes. Deleting a mapped volume drops its mapping; deleting a
//! volume in a running copy job is 422.

use serde_json::{Value, json};

use super::mappings::mapping_json;
use super::{
    Ctx, Fail, R, Req, bytes, check_label, invalid, no_content, not_found, ok, refuse, retcodes,
};
use crate::sim::eseries::state::{Array, Expansion, Pool, Volume, prefix};

/// Segment sizes a volume may have, in KiB.
pub const SEGMENT_SIZES_KIB: &[u64] = &[8, 16, 32, 64, 128, 256, 512];
const DEFAULT_SEGMENT_KIB: u64 = 128;
const BLOCK: u64 = 512;

pub fn pool_json(a: &Array, r: &str, p: &Pool) -> Value {
    let used = a.pool_used(r);
    let free = a.pool_free(r);
    let disk_pool = p.disk_pool();
    let pool_data = if disk_pool {
        json!({"reconstructionReservedDriveCount": 1,
               "reconstructionReservedAmt": "0", "poolUtilizationWarningThreshold": 85,
               "poolUtilizationCriticalThreshold": 95, "backgroundOperationPriority": "low"})
    } else {
        Value::Null
    };
    json!({
        "volumeGroupRef": r,
        "id": r,
        "label": p.label,
        "name": p.label,
        "sequenceNum": p.sequence,
        "worldWideName": format!("600A0980{}{:08X}", &a.wwn[8..24], p.sequence),
        "raidLevel": p.raid,
        "diskPool": disk_pool,
        "freeSpace": free.to_string(),
        "usedSpace": used.to_string(),
        "totalRaidedSpace": p.size.to_string(),
        "largestFreeExtentSize": free.to_string(),
        "driveMediaType": p.media,
        "drivePhysicalType": "sas",
        "driveBlockFormat": "allNative",
        "offline": p.offline,
        "isInaccessible": p.offline,
        "state": "complete",
        "raidStatus": if p.offline { "failed" } else { "optimal" },
        "securityType": "none",
        "protectionInformationCapable": p.da_capable,
        "protectionInformationCapabilities": {
            "protectionInformationCapable": p.da_capable,
            "protectionType": if p.da_capable { "type2Protection" } else { "type0Protection" },
        },
        "volumeGroupData": {
            "type": if disk_pool { "diskPool" } else { "unknown" },
            "diskPoolData": pool_data,
        },
        "spindleSpeedMatch": true,
        "reservedSpaceAllocated": true,
    })
}

pub(super) fn pools(ctx: &mut Ctx<'_>, _: &Req<'_>) -> R {
    let a = &ctx.p.array;
    ok(a.pools.iter().map(|(r, p)| pool_json(a, r, p)).collect())
}

pub(super) fn pool(ctx: &mut Ctx<'_>, req: &Req<'_>) -> R {
    let a = &ctx.p.array;
    let r = req.arg(0);
    let p = a.pools.get(r).ok_or_else(|| not_found("storage pool", r))?;
    ok(pool_json(a, r, p))
}

pub fn volume_json(a: &Array, r: &str, v: &Volume) -> Value {
    let pool = a.pools.get(&v.pool);
    let mappings: Vec<Value> = a
        .mappings
        .iter()
        .filter(|(_, m)| m.volume == r)
        .map(|(mr, m)| mapping_json(a, mr, m))
        .collect();
    let metadata: Vec<Value> = v
        .metadata
        .iter()
        .map(|(k, val)| json!({"key": k, "value": val}))
        .collect();
    let offline = pool.is_some_and(|p| p.offline);
    let cache = json!({
        "cwob": false, "enterpriseCacheDump": false, "mirrorActive": true,
        "mirrorEnable": true, "readCacheActive": true, "readCacheEnable": true,
        "writeCacheActive": true, "writeCacheEnable": true,
        "cacheFlushModifier": "flush10Sec", "readAheadMultiplier": 1,
    });
    let perms = json!({
        "mapToLUN": true, "snapShot": true, "format": true, "reconfigure": true,
        "mirrorPrimary": true, "mirrorSecondary": true, "copySource": a.features.copy,
        "copyTarget": a.features.copy, "readable": true, "writable": true,
        "rollback": true, "mirrorSync": true, "newImage": true,
        "allowDVE": a.features.expand, "allowDSS": true, "concatVolumeMember": false,
        "flashReadCache": true, "asyncMirrorPrimary": true,
        "asyncMirrorSecondary": true, "protectionInformation": v.data_assurance,
    });
    json!({
        "volumeRef": r,
        "id": r,
        "label": v.label,
        "name": v.label,
        "worldWideName": v.wwn,
        "wwn": v.wwn,
        "extendedUniqueIdentifier": "",
        "capacity": v.capacity.to_string(),
        "totalSizeInBytes": v.capacity.to_string(),
        "segmentSize": v.segment_size,
        "volumeGroupRef": v.pool,
        "raidLevel": pool.map_or("raid6", |p| p.raid.as_str()),
        "diskPool": pool.is_some_and(Pool::disk_pool),
        "blkSize": BLOCK,
        "blkSizePhysical": BLOCK,
        "status": if offline { "failed" } else { "optimal" },
        "offline": offline,
        "mapped": !mappings.is_empty(),
        "listOfMappings": mappings,
        "metadata": metadata,
        "action": if v.expansion.is_some() { "remappingDve" } else { "none" },
        "preferredControllerId": v.controller,
        "currentManager": v.controller,
        "preferredManager": v.controller,
        "dataAssurance": v.data_assurance,
        "protectionType": if v.data_assurance { "type2Protection" } else { "type0Protection" },
        "thinProvisioned": false,
        "objectType": "volume",
        "volumeUse": "standardVolume",
        "volumeFull": false,
        "flashCached": false,
        "mgmtClientAttribute": 0,
        "perms": perms,
        "cache": cache,
    })
}

/// One read of a volume: a running expansion counts it as a progress poll.
fn poll_expansion(ctx: &mut Ctx<'_>, r: &str) {
    let Some(v) = ctx.p.array.volumes.get_mut(r) else {
        return;
    };
    if let Some(e) = &mut v.expansion {
        e.polls_left = e.polls_left.saturating_sub(1);
        if e.polls_left == 0 {
            v.capacity = e.target;
            v.expansion = None;
        }
        ctx.dirty = true;
    }
}

pub(super) fn list(ctx: &mut Ctx<'_>, _: &Req<'_>) -> R {
    let expanding: Vec<String> = ctx
        .p
        .array
        .volumes
        .iter()
        .filter(|(_, v)| v.expansion.is_some())
        .map(|(r, _)| r.clone())
        .collect();
    for r in expanding {
        poll_expansion(ctx, &r);
    }
    let a = &ctx.p.array;
    ok(a.volumes
        .iter()
        .map(|(r, v)| volume_json(a, r, v))
        .collect())
}

fn volume<'a>(a: &'a Array, r: &str) -> Result<&'a Volume, Fail> {
    a.volumes.get(r).ok_or_else(|| not_found("volume", r))
}

pub(super) fn get(ctx: &mut Ctx<'_>, req: &Req<'_>) -> R {
    let r = req.arg(0);
    volume(&ctx.p.array, r)?;
    poll_expansion(ctx, r);
    let a = &ctx.p.array;
    ok(volume_json(a, r, &a.volumes[r]))
}

/// `metaTags`: an array of `{key, value}` strings.
fn meta_tags(v: Option<&Vec<Value>>) -> Result<Vec<(String, String)>, Fail> {
    let bad = || {
        invalid("Invalid value for field metaTags: expected [{\"key\": string, \"value\": string}]")
    };
    v.into_iter()
        .flatten()
        .map(|t| {
            let o = t.as_object().ok_or_else(bad)?;
            if o.keys().any(|k| k != "key" && k != "value") {
                return Err(bad());
            }
            let key = o
                .get("key")
                .and_then(Value::as_str)
                .filter(|k| !k.is_empty());
            let value = o.get("value").and_then(Value::as_str);
            match (key, value) {
                (Some(k), Some(v)) => Ok((k.to_string(), v.to_string())),
                _ => Err(bad()),
            }
        })
        .collect()
}

fn segment_size(seg: Option<u64>, pool: &Pool) -> Result<u64, Fail> {
    let kib = match seg {
        None | Some(0) => DEFAULT_SEGMENT_KIB,
        Some(k) => k,
    };
    if !SEGMENT_SIZES_KIB.contains(&kib) {
        return Err(invalid(format!(
            "Invalid value for field segSize: {kib} (KiB: 8, 16, 32, 64, 128, 256 or 512)"
        )));
    }
    if pool.disk_pool() && kib != DEFAULT_SEGMENT_KIB {
        return Err(refuse(
            "illegalParam",
            format!(
                "Disk pool {:?} takes only a 128 KiB segment size",
                pool.label
            ),
        ));
    }
    Ok(kib * 1024)
}

/// Refuses `more` bytes in a pool that is offline or has less free.
fn check_pool_space(a: &Array, pool: &str, more: u64) -> Result<(), Fail> {
    let p = &a.pools[pool];
    if p.offline {
        return Err(refuse(
            retcodes::POOL_OFFLINE,
            format!("Storage pool {:?} is offline", p.label),
        ));
    }
    let free = a.pool_free(pool);
    if more > free {
        return Err(refuse(
            retcodes::NO_SPACE,
            format!(
                "Storage pool {:?} has {free} bytes free, {more} are needed",
                p.label
            ),
        ));
    }
    Ok(())
}

pub(super) fn create(ctx: &mut Ctx<'_>, req: &Req<'_>) -> R {
    let f = req.fields(&[
        "poolId",
        "name",
        "sizeUnit",
        "size",
        "segSize",
        "dataAssuranceEnabled",
        "owningControllerId",
        "metaTags",
    ])?;
    let name = f.str("name")?;
    check_label("name", name)?;
    let pool_id = f.str("poolId")?;
    let size = bytes(&f, "size")?.div_ceil(BLOCK) * BLOCK;
    let seg = f.opt_u64("segSize")?;
    let da = f.opt_bool("dataAssuranceEnabled")?.unwrap_or(false);
    let owner = f.opt_str("owningControllerId")?;
    let mut tags = meta_tags(f.opt_array("metaTags")?)?;
    let a = &ctx.p.array;
    let pool = a.pools.get(pool_id).ok_or_else(|| {
        refuse(
            retcodes::NOT_FOUND,
            format!("Invalid value for field poolId: no storage pool {pool_id:?}"),
        )
    })?;
    let segment_size = segment_size(seg, pool)?;
    if da && !pool.da_capable {
        return Err(refuse(
            "illegalParam",
            format!(
                "Storage pool {:?} cannot hold data assurance volumes",
                pool.label
            ),
        ));
    }
    let controllers = a.controller_refs();
    let controller = match owner {
        Some(c) if controllers.iter().any(|x| x == c) => c.to_string(),
        Some(c) => {
            return Err(invalid(format!(
                "Invalid value for field owningControllerId: no controller {c:?}"
            )));
        }
        None => controllers[a.volumes.len() % controllers.len()].clone(),
    };
    if a.volumes.values().any(|v| v.label == name) {
        return Err(refuse(
            retcodes::DUPLICATE_LABEL,
            format!("A volume named {name:?} already exists"),
        ));
    }
    check_pool_space(a, pool_id, size)?;
    if ctx.drop_tags {
        tags.clear();
    }
    let a = ctx.a();
    let r = a.new_ref(prefix::VOLUME);
    let wwn = format!("600A0980{}{:08X}", &a.wwn[8..24], a.counter);
    let v = Volume {
        label: name.to_string(),
        pool: pool_id.to_string(),
        capacity: size,
        reserved: size,
        segment_size,
        data_assurance: da,
        controller,
        wwn,
        metadata: tags,
        expansion: None,
    };
    let out = volume_json(a, &r, &v);
    a.volumes.insert(r, v);
    ctx.dirty = true;
    ok(out)
}

/// The copy job that keeps a volume busy, if any.
pub(super) fn in_running_copy(a: &Array, r: &str) -> bool {
    a.copy_jobs
        .values()
        .any(|j| j.status == "inProgress" && (j.source == r || j.target == r))
}

pub(super) fn delete(ctx: &mut Ctx<'_>, req: &Req<'_>) -> R {
    let r = req.arg(0);
    volume(&ctx.p.array, r)?;
    if in_running_copy(&ctx.p.array, r) {
        return Err(refuse(
            retcodes::BUSY,
            format!("Volume {r} is in a volume copy that is in progress"),
        ));
    }
    ctx.a().remove_volume(r);
    ctx.dirty = true;
    no_content()
}

fn expand_supported(a: &Array) -> Result<(), Fail> {
    if a.features.expand {
        Ok(())
    } else {
        Err(refuse(
            retcodes::NOT_SUPPORTED,
            "This storage array does not support dynamic volume expansion",
        ))
    }
}

fn progress_json(v: &Volume) -> Value {
    match &v.expansion {
        Some(e) => {
            let total = e.polls_total.max(1);
            let done = total - e.polls_left.min(total);
            json!({"percentComplete": done * 100 / total,
                   "timeToCompletion": e.polls_left, "action": "remappingDve"})
        }
        None => json!({"percentComplete": 100, "timeToCompletion": 0, "action": "none"}),
    }
}

/// `POST …/volumes/{ref}/expand` `{expansionSize, sizeUnit}`: grows the volume to
/// `expansionSize` (its new total size). The pool's space is taken at once; the volume reports
/// its new capacity once the expansion completes.
pub(super) fn expand(ctx: &mut Ctx<'_>, req: &Req<'_>) -> R {
    let a = &ctx.p.array;
    expand_supported(a)?;
    let r = req.arg(0);
    let v = volume(a, r)?;
    let f = req.fields(&["expansionSize", "sizeUnit"])?;
    let target = bytes(&f, "expansionSize")?.div_ceil(BLOCK) * BLOCK;
    if target <= v.capacity {
        return Err(invalid(format!(
            "Invalid value for field expansionSize: {target} bytes is not more than the volume's {} bytes",
            v.capacity
        )));
    }
    if v.expansion.is_some() || in_running_copy(a, r) {
        return Err(refuse(
            retcodes::BUSY,
            format!("Volume {r} has an operation in progress"),
        ));
    }
    check_pool_space(a, &v.pool, target - v.reserved)?;
    let polls = ctx.tuning.expand_polls;
    let a = ctx.a();
    let v = a.volumes.get_mut(r).expect("checked above");
    v.reserved = target;
    if polls == 0 {
        v.capacity = target;
    } else {
        v.expansion = Some(Expansion {
            target,
            polls_left: polls,
            polls_total: polls,
        });
    }
    ctx.dirty = true;
    let a = &ctx.p.array;
    ok(volume_json(a, r, &a.volumes[r]))
}

/// `GET …/volumes/{ref}/expand`: one progress poll.
pub(super) fn expand_progress(ctx: &mut Ctx<'_>, req: &Req<'_>) -> R {
    expand_supported(&ctx.p.array)?;
    let r = req.arg(0);
    volume(&ctx.p.array, r)?;
    poll_expansion(ctx, r);
    ok(progress_json(&ctx.p.array.volumes[r]))
}
