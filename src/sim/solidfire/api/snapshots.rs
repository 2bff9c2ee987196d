//! Snapshots of a volume: at most 32 per volume; `snapshotID: 0` and `retention: ""` (what
//! Trident 18.07 sends) mean none.

use serde_json::{Value, json};

use super::volumes::active;
use super::{Ctx, Fail, Params, R, done, fail, names};
use crate::sim::solidfire::state::{Cluster, Snapshot, now_iso, take};

pub const MAX_PER_VOLUME: usize = 32;

pub(super) fn snapshot_json(id: u64, s: &Snapshot) -> Value {
    json!({
        "snapshotID": id,
        "volumeID": s.volume_id,
        "name": s.name,
        "checksum": s.checksum,
        "status": "done",
        "totalSize": s.total_size,
        "groupID": 0,
        "createTime": s.create_time,
        "attributes": s.attributes,
        "enableRemoteReplication": s.enable_remote_replication,
        "expirationTime": null,
        "expirationReason": "None",
        "retention": s.retention,
        "snapshotUUID": format!("5f1d0002-0000-4000-8000-{id:012x}"),
        "virtualVolumeID": null,
        "remoteStatuses": [],
    })
}

/// A snapshot, or xSnapshotIDDoesNotExist.
pub(super) fn existing(c: &Cluster, id: u64) -> Result<&Snapshot, Fail> {
    c.snapshots.get(&id).ok_or_else(|| {
        fail(
            names::SNAPSHOT_ID_DOES_NOT_EXIST,
            format!("SnapshotID {id} does not exist."),
        )
    })
}

fn retention(p: &Params<'_>) -> Result<String, Fail> {
    let r = p.opt_str("retention")?.unwrap_or_default();
    let ok = r.is_empty() || {
        let parts: Vec<&str> = r.split(':').collect();
        parts.len() == 3
            && parts
                .iter()
                .all(|x| !x.is_empty() && x.chars().all(|c| c.is_ascii_digit()))
    };
    if ok {
        Ok(r.to_string())
    } else {
        Err(fail(
            names::INVALID_PARAMETER,
            format!("Invalid value for parameter retention: {r:?} (HH:mm:ss)"),
        ))
    }
}

pub(super) fn create(ctx: &mut Ctx<'_>, p: &Params<'_>) -> R {
    let vid = p.id("volumeID")?;
    let size = active(ctx.c, vid)?.total_size;
    let now = now_iso();
    let name = p.opt_str("name")?.unwrap_or(&now).to_string();
    if name.is_empty() || name.len() > 255 {
        return Err(fail(
            names::INVALID_PARAMETER,
            "Invalid value for parameter name: 1 to 255 characters",
        ));
    }
    if let Some(sid) = p.opt_u64("snapshotID")?
        && sid != 0
    {
        existing(ctx.c, sid)?;
    }
    let enable_remote_replication = p.opt_bool("enableRemoteReplication")?.unwrap_or(false);
    let retention = retention(p)?;
    let attributes = p.attributes()?;
    let s = Snapshot {
        volume_id: vid,
        name,
        create_time: now,
        total_size: size,
        checksum: checksum(),
        retention,
        enable_remote_replication,
        attributes,
    };
    let checksum = s.checksum.clone();
    let (id, out) = add(ctx, s)?;
    Ok(json!({ "snapshotID": id, "checksum": checksum, "snapshot": out }))
}

fn checksum() -> String {
    format!("0x{:016x}", rand::random::<u64>())
}

/// Adds a snapshot unless its volume has [`MAX_PER_VOLUME`] already: its id and JSON.
fn add(ctx: &mut Ctx<'_>, s: Snapshot) -> Result<(u64, Value), Fail> {
    let vid = s.volume_id;
    let count = ctx
        .c
        .snapshots
        .values()
        .filter(|s| s.volume_id == vid)
        .count();
    if count >= MAX_PER_VOLUME {
        return Err(fail(
            names::MAX_SNAPSHOTS_PER_VOLUME,
            format!("VolumeID {vid} already has {MAX_PER_VOLUME} snapshots."),
        ));
    }
    let id = take(&mut ctx.c.next.snapshot);
    let out = snapshot_json(id, &s);
    ctx.c.snapshots.insert(id, s);
    ctx.dirty = true;
    Ok((id, out))
}

pub(super) fn list(ctx: &mut Ctx<'_>, p: &Params<'_>) -> R {
    let vid = p.opt_u64("volumeID")?;
    if let Some(v) = vid {
        active(ctx.c, v)?;
    }
    let out: Vec<Value> = ctx
        .c
        .snapshots
        .iter()
        .filter(|(_, s)| vid.is_none_or(|v| s.volume_id == v))
        .map(|(id, s)| snapshot_json(*id, s))
        .collect();
    Ok(json!({ "snapshots": out }))
}

pub(super) fn delete(ctx: &mut Ctx<'_>, p: &Params<'_>) -> R {
    let id = p.id("snapshotID")?;
    existing(ctx.c, id)?;
    ctx.c.snapshots.remove(&id);
    ctx.dirty = true;
    done()
}

/// Makes the volume's content the snapshot's; with `saveCurrentState` the content before is
/// kept as a new snapshot (named by `name`, default its create time) whose id is answered.
pub(super) fn rollback(ctx: &mut Ctx<'_>, p: &Params<'_>) -> R {
    let vid = p.id("volumeID")?;
    let size = active(ctx.c, vid)?.total_size;
    let sid = p.id("snapshotID")?;
    let s = existing(ctx.c, sid)?;
    if s.volume_id != vid {
        return Err(fail(
            names::INVALID_PARAMETER,
            format!(
                "Invalid value for parameter snapshotID: snapshot {sid} is not of volume {vid}"
            ),
        ));
    }
    let before = s.checksum.clone();
    let save = p.bool("saveCurrentState")?;
    let now = now_iso();
    let name = p.opt_str("name")?.unwrap_or(&now).to_string();
    let attributes = p.attributes()?;
    if !save {
        return Ok(json!({ "checksum": before, "snapshotID": 0 }));
    }
    let saved = Snapshot {
        name,
        create_time: now,
        total_size: size,
        checksum: checksum(),
        retention: String::new(),
        enable_remote_replication: false,
        attributes,
        ..s.clone()
    };
    let (id, out) = add(ctx, saved)?;
    Ok(json!({ "checksum": before, "snapshotID": id, "snapshot": out }))
}
