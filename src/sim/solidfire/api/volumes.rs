//! Volumes: create, list (paged by `startVolumeID`/`limit`), modify, delete, purge.
//!
//! Sizes round up to a whole MiB; a volume is at least 1 GB (10^9 bytes) and at most 16 TiB;
//! every volume not purged counts against the cluster's capacity. QoS: an empty or partial
//! `qos` takes the cluster default for what it leaves out; then 50 ≤ minIOPS ≤ 15000,
//! 100 ≤ maxIOPS, burstIOPS ≤ the cluster's max IOPS, and min ≤ max ≤ burst.

use serde_json::{Value, json};

use super::accounts::check_account;
use super::{Ctx, Fail, Params, R, done, fail, names};
use crate::sim::solidfire::state::{Cluster, DEFAULT_QOS, Qos, Volume, now_iso, take};

pub const MIN_SIZE: u64 = 1_000_000_000;
pub const MAX_SIZE: u64 = 16 << 40;
const MIB: u64 = 1 << 20;
const ACCESS: &[&str] = &[
    "readWrite",
    "readOnly",
    "locked",
    "replicationTarget",
    "snapMirrorTarget",
];

pub(super) fn volume_json(c: &Cluster, id: u64, v: &Volume) -> Value {
    let uid = hex::encode(c.unique_id.as_bytes());
    let groups: Vec<u64> = c
        .groups
        .iter()
        .filter(|(_, g)| g.volumes.contains(&id))
        .map(|(gid, _)| *gid)
        .collect();
    let purge_time = if v.status == "deleted" {
        v.delete_time.clone()
    } else {
        String::new()
    };
    json!({
        "volumeID": id,
        "name": v.name,
        "accountID": v.account_id,
        "createTime": v.create_time,
        "status": v.status,
        "access": v.access,
        "enable512e": v.enable512e,
        "blockSize": 4096,
        "totalSize": v.total_size,
        "iqn": c.iqn(id, v),
        "scsiEUIDeviceID": format!("{uid}{id:08x}f47acc0100000000"),
        "scsiNAADeviceID": format!("6f47acc100000000{uid}{id:08x}"),
        "qos": {
            "minIOPS": v.qos.min,
            "maxIOPS": v.qos.max,
            "burstIOPS": v.qos.burst,
            "burstTime": 60,
            "curve": {"4096": 100, "8192": 160, "16384": 270, "32768": 500,
                      "65536": 1000, "131072": 1950, "262144": 3900, "524288": 7600,
                      "1048576": 15000},
        },
        "volumeAccessGroups": groups,
        "volumePairs": [],
        "deleteTime": v.delete_time,
        "purgeTime": purge_time,
        "sliceCount": 1,
        "virtualVolumeID": null,
        "attributes": v.attributes,
        "volumeUUID": format!("5f1d0001-0000-4000-8000-{id:012x}"),
        "qosPolicyID": null,
        "enableSnapMirrorReplication": false,
        "lastAccessTime": null,
    })
}

/// An existing, not deleted volume, or xVolumeIDDoesNotExist.
pub(super) fn active(c: &Cluster, id: u64) -> Result<&Volume, Fail> {
    c.volumes
        .get(&id)
        .filter(|v| v.status == "active")
        .ok_or_else(|| missing(id))
}

pub(super) fn missing(id: u64) -> Fail {
    fail(
        names::VOLUME_ID_DOES_NOT_EXIST,
        format!("VolumeID {id} does not exist."),
    )
}

/// A size as Element keeps it (rounded up to a MiB), within the volume limits.
pub(super) fn check_size(name: &str, bytes: u64) -> Result<u64, Fail> {
    if !(MIN_SIZE..=MAX_SIZE).contains(&bytes) {
        return Err(fail(
            names::INVALID_PARAMETER,
            format!(
                "Invalid value for parameter {name}: {bytes} is not between {MIN_SIZE} and {MAX_SIZE} bytes"
            ),
        ));
    }
    Ok(bytes.div_ceil(MIB) * MIB)
}

/// Refuses growing the provisioned space by `more` bytes past the capacity.
pub(super) fn check_space(c: &Cluster, more: u64) -> Result<(), Fail> {
    let used = c.provisioned();
    if used.saturating_add(more) > c.capacity {
        return Err(fail(
            names::INSUFFICIENT_SPACE,
            format!(
                "Not enough space: {more} bytes asked, {} of {} bytes free",
                c.capacity.saturating_sub(used),
                c.capacity
            ),
        ));
    }
    Ok(())
}

/// The `qos` parameter over `base`, checked against the cluster's limits.
pub(super) fn qos(c: &Cluster, p: &Params<'_>, base: Qos) -> Result<Qos, Fail> {
    let Some(o) = p.opt_object("qos")? else {
        return Ok(base);
    };
    let bad = |m: String| fail(names::INVALID_PARAMETER, m);
    let mut q = base;
    for (k, v) in o {
        let n = v
            .as_u64()
            .ok_or_else(|| p.wrong(&format!("qos.{k}"), "an integer"))?;
        match k.as_str() {
            "minIOPS" => q.min = n,
            "maxIOPS" => q.max = n,
            "burstIOPS" => q.burst = n,
            "burstTime" => {}
            _ => return Err(bad(format!("Unrecognized parameter \"qos.{k}\""))),
        }
    }
    let range = |name: &str, v: u64, lo: u64, hi: u64| {
        if (lo..=hi).contains(&v) {
            Ok(())
        } else {
            Err(bad(format!(
                "Invalid value for parameter qos.{name}: {v} is not between {lo} and {hi}"
            )))
        }
    };
    range("minIOPS", q.min, 50, 15_000.min(c.max_iops))?;
    range("maxIOPS", q.max, 100, c.max_iops)?;
    range("burstIOPS", q.burst, 100, c.max_iops)?;
    if q.min > q.max || q.max > q.burst {
        return Err(bad(format!(
            "Invalid value for parameter qos: minIOPS {} <= maxIOPS {} <= burstIOPS {} does not hold",
            q.min, q.max, q.burst
        )));
    }
    Ok(q)
}

pub(super) fn access(p: &Params<'_>) -> Result<Option<String>, Fail> {
    match p.opt_str("access")? {
        None => Ok(None),
        Some(a) if ACCESS.contains(&a) => Ok(Some(a.to_string())),
        Some(a) => Err(fail(
            names::INVALID_PARAMETER,
            format!("Invalid value for parameter access: {a:?}"),
        )),
    }
}

pub(super) fn check_name(name: &str) -> Result<(), Fail> {
    let ok = (1..=64).contains(&name.len())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-');
    if ok {
        Ok(())
    } else {
        Err(fail(
            names::INVALID_PARAMETER,
            format!(
                "Invalid value for parameter name: {name:?} (1 to 64 letters, digits and dashes)"
            ),
        ))
    }
}

pub(super) fn create(ctx: &mut Ctx<'_>, p: &Params<'_>) -> R {
    let name = p.str("name")?;
    check_name(name)?;
    let account = check_account(ctx.c, p.id("accountID")?)?;
    let size = check_size("totalSize", p.u64("totalSize")?)?;
    let enable512e = p.bool("enable512e")?;
    let qos = qos(ctx.c, p, DEFAULT_QOS)?;
    let attributes = p.attributes()?;
    let access = access(p)?.unwrap_or_else(|| "readWrite".into());
    check_space(ctx.c, size)?;
    let hidden_polls = ctx.tuning.create_polls;
    let (id, out) = insert(
        ctx,
        Volume {
            name: name.to_string(),
            account_id: account,
            create_time: now_iso(),
            status: "active".into(),
            delete_time: String::new(),
            access,
            enable512e,
            total_size: size,
            qos,
            attributes,
            hidden_polls,
        },
    );
    Ok(json!({ "volumeID": id, "volume": out }))
}

/// Adds a volume whose checks passed: its id and JSON.
pub(super) fn insert(ctx: &mut Ctx<'_>, v: Volume) -> (u64, Value) {
    let id = take(&mut ctx.c.next.volume);
    let out = volume_json(ctx.c, id, &v);
    ctx.c.volumes.insert(id, v);
    ctx.dirty = true;
    (id, out)
}

/// Volumes that pass `keep`, from `start` on, at most `limit` (capped by `cap`), leaving out
/// those still hidden; every hidden volume then counts one poll.
fn page(
    ctx: &mut Ctx<'_>,
    start: u64,
    limit: Option<u64>,
    cap: usize,
    keep: impl Fn(u64, &Volume) -> bool,
) -> Value {
    let cap = cap.max(1);
    let limit = limit.map_or(cap, |l| (l as usize).min(cap));
    let c = &*ctx.c;
    let out: Vec<Value> = c
        .volumes
        .range(start..)
        .filter(|(id, v)| v.hidden_polls == 0 && keep(**id, v))
        .take(limit)
        .map(|(id, v)| volume_json(c, *id, v))
        .collect();
    for v in ctx.c.volumes.values_mut().filter(|v| v.hidden_polls > 0) {
        v.hidden_polls -= 1;
        ctx.dirty = true;
    }
    json!({ "volumes": out })
}

fn limit(p: &Params<'_>) -> Result<Option<u64>, Fail> {
    match p.opt_u64("limit")? {
        Some(0) => Err(fail(
            names::INVALID_PARAMETER,
            "Invalid value for parameter limit: 0",
        )),
        l => Ok(l),
    }
}

pub(super) fn list_for_account(ctx: &mut Ctx<'_>, p: &Params<'_>) -> R {
    let account = check_account(ctx.c, p.id("accountID")?)?;
    let start = p.opt_u64("startVolumeID")?.unwrap_or(0);
    let limit = limit(p)?;
    p.opt_bool("includeVirtualVolumes")?;
    // Not capped by the page size: the method answers every volume of the account.
    Ok(page(ctx, start, limit, usize::MAX, |_, v| {
        v.account_id == account
    }))
}

pub(super) fn list(ctx: &mut Ctx<'_>, p: &Params<'_>) -> R {
    let start = p.opt_u64("startVolumeID")?.unwrap_or(0);
    let limit = limit(p)?;
    let status = p.opt_str("volumeStatus")?;
    if let Some(s) = status
        && !matches!(s, "creating" | "snapshotting" | "active" | "deleted")
    {
        return Err(fail(
            names::INVALID_PARAMETER,
            format!("Invalid value for parameter volumeStatus: {s:?}"),
        ));
    }
    let accounts = p.opt_ids("accounts")?;
    let name = p.opt_str("volumeName")?;
    let ids = p.opt_ids("volumeIDs")?;
    p.opt_bool("isPaired")?;
    p.opt_bool("includeVirtualVolumes")?;
    let cap = ctx.tuning.page_cap;
    Ok(page(ctx, start, limit, cap, |id, v| {
        status.is_none_or(|s| v.status == s)
            && accounts.as_ref().is_none_or(|a| a.contains(&v.account_id))
            && name.is_none_or(|n| v.name == n)
            && ids.as_ref().is_none_or(|i| i.contains(&id))
    }))
}

pub(super) fn list_active(ctx: &mut Ctx<'_>, p: &Params<'_>) -> R {
    let start = p.opt_u64("startVolumeID")?.unwrap_or(0);
    let limit = limit(p)?;
    p.opt_bool("includeVirtualVolumes")?;
    let cap = ctx.tuning.page_cap;
    Ok(page(ctx, start, limit, cap, |_, v| v.status == "active"))
}

pub(super) fn list_deleted(ctx: &mut Ctx<'_>, p: &Params<'_>) -> R {
    p.opt_bool("includeVirtualVolumes")?;
    Ok(page(ctx, 0, None, usize::MAX, |_, v| v.status == "deleted"))
}

pub(super) fn modify(ctx: &mut Ctx<'_>, p: &Params<'_>) -> R {
    let id = p.id("volumeID")?;
    let v = active(ctx.c, id)?.clone();
    let qos = qos(ctx.c, p, v.qos)?;
    let size = match p.opt_u64("totalSize")? {
        None => v.total_size,
        Some(s) => {
            let s = check_size("totalSize", s)?;
            if s < v.total_size {
                return Err(fail(
                    names::INVALID_PARAMETER,
                    format!(
                        "Invalid value for parameter totalSize: volumes only grow ({s} < {})",
                        v.total_size
                    ),
                ));
            }
            s
        }
    };
    let attributes = match p.opt_object("attributes")? {
        Some(o) => Value::Object(o.clone()),
        None => v.attributes.clone(),
    };
    let access = access(p)?.unwrap_or(v.access.clone());
    let account = match p.opt_u64("accountID")? {
        Some(a) => check_account(ctx.c, a)?,
        None => v.account_id,
    };
    check_space(ctx.c, size - v.total_size)?;
    let new = Volume {
        qos,
        total_size: size,
        attributes,
        access,
        account_id: account,
        ..v
    };
    let out = volume_json(ctx.c, id, &new);
    ctx.c.volumes.insert(id, new);
    ctx.dirty = true;
    Ok(json!({ "volume": out }))
}

pub(super) fn delete(ctx: &mut Ctx<'_>, p: &Params<'_>) -> R {
    let id = p.id("volumeID")?;
    let v = ctx.c.volumes.get_mut(&id).ok_or_else(|| missing(id))?;
    // Deleting a deleted volume again answers as the first delete did (the simulator's
    // choice; real Element's behaviour is unverified).
    if v.status == "active" {
        v.status = "deleted".into();
        v.delete_time = now_iso();
        ctx.dirty = true;
    }
    let v = v.clone();
    Ok(json!({ "volume": volume_json(ctx.c, id, &v) }))
}

pub(super) fn purge(ctx: &mut Ctx<'_>, p: &Params<'_>) -> R {
    let id = p.id("volumeID")?;
    let v = ctx.c.volumes.get(&id).ok_or_else(|| missing(id))?;
    if v.status != "deleted" {
        return Err(fail(
            names::VOLUME_NOT_DELETED,
            format!("VolumeID {id} is not deleted; DeleteVolume it first."),
        ));
    }
    ctx.c.volumes.remove(&id);
    ctx.c.snapshots.retain(|_, s| s.volume_id != id);
    for g in ctx.c.groups.values_mut() {
        g.volumes.retain(|v| *v != id);
    }
    ctx.dirty = true;
    done()
}
