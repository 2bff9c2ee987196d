//! Pools, volume groups (read only), zvols, snapshots and clones.
//!
//! A zvol lives directly in a volume group (`pool/vg/name`). Thick zvols (`sparseVolume`
//! false) reserve their size in the pool; sparse ones and clones reserve nothing. The size is
//! a multiple of the block size (a power of two from 512 B to 128 KiB); it only grows.
//! Deleting a zvol with a LUN mapping is EBUSY, with snapshots and without `snapshots=true`
//! EBUSY, with a snapshot that has clones EEXIST. A snapshot with clones cannot be deleted
//! (EEXIST). Promote moves the origin's older snapshots to the clone, as ZFS does.

use serde_json::{Value, json};

use super::{Ctx, Fail, R, Req, busy, codes, created, done, exists, invalid, not_found};
use crate::sim::nexentastor::state::{Appliance, Op, Snapshot, Zvol, valid_component};

const COMPRESSION: &[&str] = &[
    "on", "off", "lz4", "lzjb", "zle", "gzip", "gzip-1", "gzip-2", "gzip-3", "gzip-4", "gzip-5",
    "gzip-6", "gzip-7", "gzip-8", "gzip-9",
];
const DEFAULT_COMPRESSION: &str = "lz4";
const MIN_BLOCK: u64 = 512;
const MAX_BLOCK: u64 = 128 * 1024;

fn now() -> String {
    humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string()
}

fn pool_json(a: &Appliance, name: &str) -> Value {
    let size = a.pools.get(name).map_or(0, |p| p.size);
    json!({
        "poolName": name,
        "health": "ONLINE",
        "status": "ONLINE",
        "bytesTotal": size,
        "bytesAllocated": a.pool_used(name),
        "bytesAvailable": a.pool_free(name),
    })
}

pub(super) fn pools(ctx: &mut Ctx<'_>, req: &Req<'_>) -> R {
    let name = req.query.get("poolName");
    let items = ctx
        .a
        .pools
        .keys()
        .filter(|p| name.is_none_or(|n| n == p.as_str()))
        .map(|p| pool_json(ctx.a, p))
        .collect();
    req.page(ctx, &["poolName"], items)
}

pub(super) fn pool(ctx: &mut Ctx<'_>, req: &Req<'_>) -> R {
    let name = req.arg(0);
    if !ctx.a.pools.contains_key(name) {
        return Err(not_found("pool", name));
    }
    req.one(pool_json(ctx.a, name))
}

fn group_json(a: &Appliance, path: &str) -> Value {
    let g = &a.volume_groups[path];
    json!({
        "path": path,
        "name": path.rsplit('/').next().unwrap_or_default(),
        "pool": g.pool,
        "parent": g.pool,
        "volumeBlockSize": g.block_size,
        "bytesAvailable": a.pool_free(&g.pool),
        "bytesUsed": a.used_below(path),
    })
}

/// Whether an item's `key` passes the filter named `key` (absent: every item passes).
fn pass(req: &Req<'_>, key: &str, v: &Value) -> bool {
    req.query
        .get(key)
        .is_none_or(|want| v[key].as_str() == Some(want))
}

fn filtered(req: &Req<'_>, keys: &[&str], items: impl Iterator<Item = Value>) -> Vec<Value> {
    items
        .filter(|v| keys.iter().all(|k| pass(req, k, v)))
        .collect()
}

pub(super) fn volume_groups(ctx: &mut Ctx<'_>, req: &Req<'_>) -> R {
    const KEYS: &[&str] = &["path", "pool", "parent", "name"];
    let all = ctx.a.volume_groups.keys().map(|p| group_json(ctx.a, p));
    let items = filtered(req, KEYS, all);
    req.page(ctx, KEYS, items)
}

pub(super) fn volume_group(ctx: &mut Ctx<'_>, req: &Req<'_>) -> R {
    let path = req.arg(0);
    if !ctx.a.volume_groups.contains_key(path) {
        return Err(not_found("volume group", path));
    }
    req.one(group_json(ctx.a, path))
}

fn volume_json(a: &Appliance, path: &str, v: &Zvol) -> Value {
    let (parent, name) = path.rsplit_once('/').unwrap_or(("", path));
    let pool = Appliance::pool_of(path);
    json!({
        "path": path,
        "name": name,
        "parent": parent,
        "pool": pool,
        "volumeSize": v.size,
        "volumeBlockSize": v.block_size,
        "sparseVolume": v.sparse,
        "compressionMode": v.compression,
        "bytesAvailable": a.pool_free(pool) + if v.sparse { 0 } else { v.size },
        "bytesUsed": if v.sparse { 0 } else { v.size },
        "bytesReferenced": 0,
        "originalSnapshot": v.origin.clone().unwrap_or_default(),
        "creationTime": v.created,
    })
}

pub(super) fn volumes(ctx: &mut Ctx<'_>, req: &Req<'_>) -> R {
    const KEYS: &[&str] = &["path", "parent", "pool", "name"];
    let all = ctx.a.volumes.iter().map(|(p, v)| volume_json(ctx.a, p, v));
    let items = filtered(req, KEYS, all);
    req.page(ctx, KEYS, items)
}

fn zvol<'a>(a: &'a Appliance, path: &str) -> Result<&'a Zvol, Fail> {
    a.volumes.get(path).ok_or_else(|| not_found("volume", path))
}

pub(super) fn volume(ctx: &mut Ctx<'_>, req: &Req<'_>) -> R {
    let v = zvol(ctx.a, req.arg(0))?;
    req.one(volume_json(ctx.a, req.arg(0), v))
}

fn check_compression(c: &str) -> Result<(), Fail> {
    if COMPRESSION.contains(&c) {
        return Ok(());
    }
    Err(invalid(format!(
        "compressionMode {c:?} is not one of {}",
        COMPRESSION.join(", ")
    )))
}

pub(super) fn create_volume(ctx: &mut Ctx<'_>, req: &Req<'_>) -> R {
    req.query.allow(&[])?;
    let f = req.fields(&[
        "path",
        "volumeSize",
        "volumeBlockSize",
        "sparseVolume",
        "compressionMode",
    ])?;
    let path = f.str("path")?.to_string();
    f.required("volumeSize")?;
    let size = f.opt_u64("volumeSize")?.unwrap_or_default();
    let group = path.rsplit_once('/').map(|(g, _)| g).unwrap_or_default();
    let block_size = match f.opt_u64("volumeBlockSize")? {
        Some(b) => b,
        None => ctx
            .a
            .volume_groups
            .get(group)
            .map_or(crate::sim::nexentastor::state::DEFAULT_BLOCK_SIZE, |g| {
                g.block_size
            }),
    };
    let compression = f
        .opt_str("compressionMode")?
        .unwrap_or(DEFAULT_COMPRESSION)
        .to_string();
    let sparse = f.opt_bool("sparseVolume")?.unwrap_or(false);
    ctx.start(Op::CreateVolume {
        path,
        size,
        block_size,
        sparse,
        compression,
    })
}

/// Checks a new zvol's path: `pool/vg/name` in an existing volume group, free.
fn check_new_path(a: &Appliance, path: &str) -> Result<(), Fail> {
    let parts: Vec<&str> = path.split('/').collect();
    if parts.len() != 3 || !parts.iter().all(|p| valid_component(p)) {
        return Err(invalid(format!(
            "path {path:?}: a volume is pool/volumeGroup/name, each letters, digits and _ - . :"
        )));
    }
    let group = format!("{}/{}", parts[0], parts[1]);
    if !a.volume_groups.contains_key(&group) {
        return Err(not_found("volume group", &group));
    }
    if a.volumes.contains_key(path) {
        return Err(exists("volume", path));
    }
    Ok(())
}

fn check_size(size: u64, block_size: u64) -> Result<(), Fail> {
    if size == 0 || !size.is_multiple_of(block_size) {
        return Err(invalid(format!(
            "volumeSize {size} is not a positive multiple of the block size {block_size}"
        )));
    }
    Ok(())
}

fn check_space(a: &Appliance, path: &str, grow: u64) -> Result<(), Fail> {
    let pool = Appliance::pool_of(path);
    let free = a.pool_free(pool);
    if grow > free {
        return Err(Fail::new(
            codes::ENOSPC,
            format!("pool {pool:?} has {free} bytes free, {grow} are needed"),
        ));
    }
    Ok(())
}

fn apply_create(a: &mut Appliance, op: &Op) -> R {
    let Op::CreateVolume {
        path,
        size,
        block_size,
        sparse,
        compression,
    } = op
    else {
        unreachable!("apply_create takes CreateVolume");
    };
    check_new_path(a, path)?;
    if !block_size.is_power_of_two() || !(MIN_BLOCK..=MAX_BLOCK).contains(block_size) {
        return Err(invalid(format!(
            "volumeBlockSize {block_size} is not a power of two from {MIN_BLOCK} to {MAX_BLOCK}"
        )));
    }
    check_size(*size, *block_size)?;
    check_compression(compression)?;
    if !sparse {
        check_space(a, path, *size)?;
    }
    a.volumes.insert(
        path.clone(),
        Zvol {
            size: *size,
            block_size: *block_size,
            sparse: *sparse,
            compression: compression.clone(),
            origin: None,
            created: now(),
        },
    );
    created()
}

pub(super) fn update_volume(ctx: &mut Ctx<'_>, req: &Req<'_>) -> R {
    req.query.allow(&[])?;
    let path = req.arg(0);
    let f = req.fields(&["volumeSize", "compressionMode"])?;
    let size = f.opt_u64("volumeSize")?;
    let compression = f.opt_str("compressionMode")?;
    let v = zvol(ctx.a, path)?.clone();
    if let Some(c) = compression {
        check_compression(c)?;
    }
    if let Some(size) = size {
        check_size(size, v.block_size)?;
        if size < v.size {
            return Err(invalid(format!(
                "volumeSize {size} is smaller than the volume's {}; volumes only grow",
                v.size
            )));
        }
        if !v.sparse {
            check_space(ctx.a, path, size - v.size)?;
        }
    }
    let vol = ctx.a.volumes.get_mut(path).expect("checked above");
    if let Some(size) = size {
        vol.size = size;
    }
    if let Some(c) = compression {
        vol.compression = c.to_string();
    }
    ctx.dirty = true;
    done()
}

pub(super) fn delete_volume(ctx: &mut Ctx<'_>, req: &Req<'_>) -> R {
    req.query.allow(&["snapshots"])?;
    let snapshots = req.query.bool("snapshots")?.unwrap_or(false);
    ctx.start(Op::DeleteVolume {
        path: req.arg(0).to_string(),
        snapshots,
    })
}

fn apply_delete(a: &mut Appliance, path: &str, with_snapshots: bool) -> R {
    zvol(a, path)?;
    if let Some(id) = a
        .lun_mappings
        .iter()
        .find(|(_, m)| m.volume == path)
        .map(|(id, _)| id)
    {
        return Err(busy(format!(
            "volume {path:?} is mapped (LUN mapping {id}); remove the mapping first"
        )));
    }
    let snaps = a.snapshots_of(path);
    if let Some(s) = snaps.iter().find(|s| !a.clones_of(s).is_empty()) {
        return Err(Fail::new(
            codes::EEXIST,
            format!("volume {path:?} has snapshot {s:?} with dependent clones"),
        ));
    }
    if !snaps.is_empty() && !with_snapshots {
        return Err(busy(format!(
            "volume {path:?} has {} snapshots; delete them or pass snapshots=true",
            snaps.len()
        )));
    }
    for s in snaps {
        a.snapshots.remove(&s);
    }
    a.volumes.remove(path);
    done()
}

pub(super) fn promote(ctx: &mut Ctx<'_>, req: &Req<'_>) -> R {
    req.query.allow(&[])?;
    if req.body.is_some() {
        req.fields(&[])?;
    }
    let clone = req.arg(0).to_string();
    let origin = zvol(ctx.a, &clone)?
        .origin
        .clone()
        .ok_or_else(|| invalid(format!("volume {clone:?} is not a clone")))?;
    let (source, _) = origin.split_once('@').expect("a snapshot path");
    let cut = ctx.a.snapshots[&origin].txg;
    let moved: Vec<String> = ctx
        .a
        .snapshots_of(source)
        .into_iter()
        .filter(|s| ctx.a.snapshots[s].txg <= cut)
        .collect();
    let renamed = |s: &str| format!("{clone}@{}", s.split_once('@').map_or(s, |(_, n)| n));
    if let Some(s) = moved
        .iter()
        .find(|s| ctx.a.snapshots.contains_key(&renamed(s)))
    {
        return Err(exists("snapshot", &renamed(s)));
    }
    let source_origin = ctx.a.volumes[source].origin.clone();
    for s in &moved {
        let snap = ctx.a.snapshots.remove(s).expect("listed above");
        ctx.a.snapshots.insert(renamed(s), snap);
        for v in ctx.a.volumes.values_mut() {
            if v.origin.as_deref() == Some(s.as_str()) {
                v.origin = Some(renamed(s));
            }
        }
    }
    if let Some(v) = ctx.a.volumes.get_mut(&clone) {
        v.origin = source_origin;
    }
    if let Some(v) = ctx.a.volumes.get_mut(source) {
        v.origin = Some(renamed(&origin));
    }
    ctx.dirty = true;
    done()
}

fn snapshot_json(a: &Appliance, path: &str, s: &Snapshot) -> Value {
    let (parent, name) = path.split_once('@').unwrap_or((path, ""));
    json!({
        "path": path,
        "name": name,
        "parent": parent,
        "pool": Appliance::pool_of(path),
        "creationTime": s.created,
        "creationTxg": s.txg.to_string(),
        "clones": a.clones_of(path),
        "bytesReferenced": 0,
    })
}

pub(super) fn snapshots(ctx: &mut Ctx<'_>, req: &Req<'_>) -> R {
    let recursive = req.query.bool("recursive")?.unwrap_or(false);
    let parent = req.query.get("parent");
    let below = parent.map(|p| format!("{p}/"));
    let items = ctx
        .a
        .snapshots
        .iter()
        .map(|(p, s)| snapshot_json(ctx.a, p, s))
        .filter(|v| {
            let of = v["parent"].as_str().unwrap_or_default();
            parent.is_none_or(|p| of == p)
                || (recursive && below.as_deref().is_some_and(|b| of.starts_with(b)))
        })
        .filter(|v| pass(req, "path", v) && pass(req, "name", v))
        .collect();
    req.page(ctx, &["parent", "recursive", "path", "name"], items)
}

fn snap<'a>(a: &'a Appliance, path: &str) -> Result<&'a Snapshot, Fail> {
    a.snapshots
        .get(path)
        .ok_or_else(|| not_found("snapshot", path))
}

pub(super) fn snapshot(ctx: &mut Ctx<'_>, req: &Req<'_>) -> R {
    let path = req.arg(0);
    if !path.contains('@') {
        return Err(invalid(format!(
            "{path:?} is not a snapshot path (dataset@name)"
        )));
    }
    let s = snap(ctx.a, path)?;
    req.one(snapshot_json(ctx.a, path, s))
}

pub(super) fn create_snapshot(ctx: &mut Ctx<'_>, req: &Req<'_>) -> R {
    req.query.allow(&[])?;
    let f = req.fields(&["path"])?;
    let path = f.str("path")?;
    let (dataset, name) = path
        .split_once('@')
        .ok_or_else(|| invalid(format!("path {path:?}: a snapshot path is dataset@name")))?;
    if !valid_component(name) {
        return Err(invalid(format!(
            "snapshot name {name:?}: letters, digits and _ - . : (not empty)"
        )));
    }
    let v = zvol(ctx.a, dataset)?.clone();
    if ctx.a.snapshots.contains_key(path) {
        return Err(exists("snapshot", path));
    }
    ctx.a.txg += 1;
    let snapshot = Snapshot {
        txg: ctx.a.txg,
        created: now(),
        volume_size: v.size,
        block_size: v.block_size,
    };
    ctx.a.snapshots.insert(path.to_string(), snapshot);
    ctx.dirty = true;
    created()
}

pub(super) fn delete_snapshot(ctx: &mut Ctx<'_>, req: &Req<'_>) -> R {
    req.query.allow(&[])?;
    ctx.start(Op::DeleteSnapshot {
        path: req.arg(0).to_string(),
    })
}

fn apply_delete_snapshot(a: &mut Appliance, path: &str) -> R {
    snap(a, path)?;
    let clones = a.clones_of(path);
    if !clones.is_empty() {
        return Err(Fail::new(
            codes::EEXIST,
            format!(
                "snapshot {path:?} has dependent clones: {}",
                clones.join(", ")
            ),
        ));
    }
    a.snapshots.remove(path);
    done()
}

pub(super) fn clone(ctx: &mut Ctx<'_>, req: &Req<'_>) -> R {
    req.query.allow(&[])?;
    let f = req.fields(&["targetPath"])?;
    ctx.start(Op::Clone {
        snapshot: req.arg(0).to_string(),
        target: f.str("targetPath")?.to_string(),
    })
}

fn apply_clone(a: &mut Appliance, snapshot: &str, target: &str) -> R {
    let s = snap(a, snapshot)?.clone();
    check_new_path(a, target)?;
    a.volumes.insert(
        target.to_string(),
        Zvol {
            size: s.volume_size,
            block_size: s.block_size,
            sparse: true,
            compression: DEFAULT_COMPRESSION.into(),
            origin: Some(snapshot.to_string()),
            created: now(),
        },
    );
    created()
}

/// Runs an operation that may be a job (`Ctx::start`): its checks and its change.
pub(super) fn apply(a: &mut Appliance, op: &Op) -> R {
    match op {
        Op::CreateVolume { .. } => apply_create(a, op),
        Op::DeleteVolume { path, snapshots } => apply_delete(a, path, *snapshots),
        Op::DeleteSnapshot { path } => apply_delete_snapshot(a, path),
        Op::Clone { snapshot, target } => apply_clone(a, snapshot, target),
    }
}
