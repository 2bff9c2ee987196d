//! Volume, snapshot and clone operations, and the iSCSI access info of a volume.
//!
//! Element volume names are not unique: a volume is found by name among the account's
//! *active* volumes (all pages) whose attributes say storch made them; more than one is an
//! error. Volumes storch did not make are invisible to it: never returned, adopted, changed
//! or deleted (a create of their name is refused).

use std::time::Duration;

use serde_json::{Value, json};

use super::config::DEFAULT_POOL;
use super::wire::{
    CloneVolumeParams, CreateSnapshotParams, CreateVolumeParams, ModifyVolumeParams, Qos, Snapshot,
    Volume, parse_time_ms,
};
use super::{Discovered, SolidFireDriver};
use crate::drivers::{
    CloneRequest, CreateRequest, DriverError, DriverResult, SnapshotInfo, VolumeInfo,
};
use crate::model::{AccessInfo, VolumeConfig};

/// The attribute key under which storch records itself.
pub const ATTR_KEY: &str = "storch";

/// How long a new volume may take to show up in `ListVolumes`.
const VISIBLE_TIMEOUT: Duration = Duration::from_secs(30);

/// One MiB: the granularity the cluster rounds sizes to.
const MIB: u64 = 1 << 20;

/// Whether storch created this volume (its attributes say so).
pub fn is_ours(v: &Volume) -> bool {
    v.attributes
        .get(ATTR_KEY)
        .and_then(|s| s.get("createdBy"))
        .and_then(Value::as_str)
        == Some("storch")
}

/// The attributes storch writes on a volume it makes.
fn attributes(internal_name: &str, config: &VolumeConfig, pool: &str, qos: Option<Qos>) -> Value {
    let display = if config.name.is_empty() {
        internal_name
    } else {
        config.name.as_str()
    };
    let qos = qos
        .map(|q| format!("{},{},{}", q.min_iops, q.max_iops, q.burst_iops))
        .unwrap_or_default();
    let mut attrs = json!({
        "docker-name": display,
        ATTR_KEY: {"name": internal_name, "createdBy": "storch", "pool": pool, "qos": qos},
    });
    if !config.file_system.is_empty() {
        attrs["fstype"] = Value::String(config.file_system.clone());
    }
    attrs
}

/// The active volumes named `name` in the account: storch's (at most one) and how many
/// others (volumes storch did not make, which it never uses, adopts or deletes).
pub struct Lookup {
    pub ours: Option<Volume>,
    pub others: usize,
}

pub async fn lookup(drv: &SolidFireDriver, d: &Discovered, name: &str) -> DriverResult<Lookup> {
    let all = drv.client.volumes(d.account.account_id).await?;
    let (ours, others): (Vec<Volume>, Vec<Volume>) = all
        .into_iter()
        .filter(|v| v.is_active() && v.name == name)
        .partition(is_ours);
    if ours.len() > 1 {
        return Err(DriverError::Other(format!(
            "ambiguous volume name {name}: {} active volumes of account {} made by storch \
             have it",
            ours.len(),
            d.account.username
        )));
    }
    Ok(Lookup {
        ours: ours.into_iter().next(),
        others: others.len(),
    })
}

/// storch's active volume named `name`, if any.
pub async fn find(
    drv: &SolidFireDriver,
    d: &Discovered,
    name: &str,
) -> DriverResult<Option<Volume>> {
    Ok(lookup(drv, d, name).await?.ours)
}

pub async fn find_or_not_found(
    drv: &SolidFireDriver,
    d: &Discovered,
    name: &str,
) -> DriverResult<Volume> {
    find(drv, d, name)
        .await?
        .ok_or_else(|| DriverError::NotFound(format!("volume {name} not found")))
}

impl SolidFireDriver {
    /// The volume as the trait reports it.
    pub(super) fn info(&self, d: &Discovered, v: &Volume) -> VolumeInfo {
        VolumeInfo {
            internal_name: v.name.clone(),
            pool: self.pool_of(v),
            size_bytes: v.total_size,
            access: self.access(d, v),
        }
    }

    /// The pool recorded in the attributes when it is one of this backend's, else the QoS
    /// type whose QoS the volume has, else the first type (or the default pool).
    fn pool_of(&self, v: &Volume) -> String {
        let recorded = v
            .attributes
            .get(ATTR_KEY)
            .and_then(|s| s.get("pool"))
            .and_then(Value::as_str);
        let Some(types) = &self.cfg.types else {
            return DEFAULT_POOL.to_string();
        };
        if let Some(p) = recorded
            && types.iter().any(|t| t.name == p)
        {
            return p.to_string();
        }
        types
            .iter()
            .find(|t| t.qos == v.qos)
            .or(types.first())
            .map(|t| t.name.clone())
            .unwrap_or_default()
    }

    /// iSCSI: the volume's IQN on the SVIP portal, LUN 0; the access groups, or CHAP with
    /// the account's secrets.
    fn access(&self, d: &Discovered, v: &Volume) -> AccessInfo {
        let mut a = AccessInfo {
            iscsi_target_portal: self.cfg.svip.clone(),
            iscsi_target_iqn: v.iqn.clone(),
            iscsi_lun_number: 0,
            iscsi_interface: self.cfg.initiator_iface.clone(),
            ..AccessInfo::default()
        };
        if d.use_chap {
            a.iscsi_username = d.account.username.clone();
            a.iscsi_initiator_secret = d.account.initiator_secret.clone();
            a.iscsi_target_secret = d.account.target_secret.clone();
        } else {
            a.iscsi_vags = d.access_groups.clone();
        }
        a
    }

    /// Waits until volume `id` is listed (the cluster may take a moment), bounded.
    async fn wait_visible(&self, d: &Discovered, id: i64) -> DriverResult<Volume> {
        let started = std::time::Instant::now();
        let mut attempt = 0;
        loop {
            if let Some(v) = self.client.volume(d.account.account_id, id).await? {
                return Ok(v);
            }
            if started.elapsed() > VISIBLE_TIMEOUT {
                return Err(DriverError::Unavailable(format!(
                    "volume {id} was created but did not show up within {VISIBLE_TIMEOUT:?}"
                )));
            }
            attempt += 1;
            let delay =
                crate::net::backoff(attempt, Duration::from_millis(20), Duration::from_secs(2));
            tokio::time::sleep(delay).await;
        }
    }

    /// Adds a new volume to the access groups; on failure deletes it (nothing left behind).
    async fn grant(&self, d: &Discovered, v: &Volume) -> DriverResult<()> {
        if d.use_chap {
            return Ok(());
        }
        for g in &d.access_groups {
            if let Err(e) = self.client.add_to_group(*g, vec![v.volume_id]).await {
                if let Err(undo) = self.client.delete_volume(v.volume_id).await {
                    tracing::warn!(volume = %v.name, error = %undo, "cannot delete the volume after a failed access group add");
                }
                return Err(e.into());
            }
        }
        Ok(())
    }

    /// `Conflict` when `bytes` more do not fit in the cluster's provisionable space.
    async fn check_fits(&self, bytes: u64) -> DriverResult<()> {
        let free = self.free_bytes().await?;
        if bytes > free {
            return Err(DriverError::Conflict(format!(
                "not enough space on the SolidFire cluster: {bytes} bytes requested, {free} \
                 provisionable"
            )));
        }
        Ok(())
    }
}

/// 512e unless the volume or the backend asks for native 4K.
fn enable512e(drv: &SolidFireDriver, config: &VolumeConfig) -> bool {
    match config.block_size.trim() {
        "4096" => false,
        "512" => true,
        _ => drv.cfg.default_block_size != 4096,
    }
}

fn qos_value(qos: Option<Qos>) -> Value {
    // An empty object: the cluster's default QoS.
    qos.map(|q| serde_json::to_value(q).unwrap_or_else(|_| json!({})))
        .unwrap_or_else(|| json!({}))
}

pub async fn create(
    drv: &SolidFireDriver,
    d: &Discovered,
    req: &CreateRequest,
) -> DriverResult<VolumeInfo> {
    drv.check_size(req.size_bytes)?;
    let qos = drv.plan_qos(d, &req.pool, &req.config)?;
    let name = &req.internal_name;
    existing(drv, d, name, |v| {
        size_matches(v.total_size, req.size_bytes) && qos.is_none_or(|q| q == v.qos)
    })
    .await?;
    drv.check_fits(req.size_bytes).await?;
    let params = CreateVolumeParams {
        name: name.clone(),
        account_id: d.account.account_id,
        total_size: req.size_bytes,
        enable512e: enable512e(drv, &req.config),
        qos: qos_value(qos),
        attributes: attributes(name, &req.config, &req.pool, qos),
    };
    let id = drv.client.create_volume(&params).await?;
    let v = drv.wait_visible(d, id).await?;
    drv.grant(d, &v).await?;
    Ok(drv.info(d, &v))
}

/// Refuses a name that is taken: by storch's volume as planned (`AlreadyExists`: the caller
/// may adopt it, an interrupted create), by storch's volume made otherwise (`Conflict`: never
/// adopted), or by a volume storch did not make (`AlreadyExists`; `get` does not show it).
async fn existing(
    drv: &SolidFireDriver,
    d: &Discovered,
    name: &str,
    as_planned: impl Fn(&Volume) -> bool,
) -> DriverResult<()> {
    let found = lookup(drv, d, name).await?;
    match (found.ours, found.others) {
        (Some(v), _) if as_planned(&v) => Err(DriverError::AlreadyExists(format!(
            "volume {name} already exists (volume {}, made by storch as planned: an \
             interrupted create)",
            v.volume_id
        ))),
        (Some(v), _) => Err(DriverError::Conflict(format!(
            "volume {name} already exists (volume {}, made by storch with another size or \
             QoS); it is not adopted",
            v.volume_id
        ))),
        (None, 0) => Ok(()),
        (None, n) => Err(DriverError::AlreadyExists(format!(
            "{n} volume(s) named {name} that storch did not make exist in account {}; storch \
             does not use them",
            d.account.username
        ))),
    }
}

/// The cluster rounds sizes up to a whole MiB at most.
fn size_matches(actual: u64, planned: u64) -> bool {
    actual >= planned && actual - planned < MIB
}

pub async fn clone(
    drv: &SolidFireDriver,
    d: &Discovered,
    req: &CloneRequest,
) -> DriverResult<VolumeInfo> {
    let source = find_or_not_found(drv, d, &req.source_internal_name).await?;
    let name = &req.internal_name;
    existing(drv, d, name, |v| {
        v.attributes
            .get(ATTR_KEY)
            .and_then(|a| a.get("pool"))
            .and_then(Value::as_str)
            == Some(drv.pool_of(&source).as_str())
    })
    .await?;
    let snapshot_id = match &req.source_snapshot {
        None => None,
        Some(snap) => {
            let snaps = drv.client.snapshots(source.volume_id).await?;
            let s = snaps.iter().find(|s| &s.name == snap).ok_or_else(|| {
                DriverError::NotFound(format!(
                    "snapshot {snap} of volume {} not found",
                    req.source_internal_name
                ))
            })?;
            Some(s.snapshot_id)
        }
    };
    let pool = drv.pool_of(&source);
    let requested_qos = if req.config.qos.trim().is_empty() && req.config.qos_type.trim().is_empty()
    {
        None
    } else {
        drv.plan_qos(d, &pool, &req.config)?
    };
    drv.check_fits(source.total_size).await?;
    let params = CloneVolumeParams {
        volume_id: source.volume_id,
        name: name.clone(),
        snapshot_id,
        attributes: attributes(name, &req.config, &pool, requested_qos.or(Some(source.qos))),
    };
    let id = drv.client.clone_volume(&params).await?;
    let mut v = drv.wait_visible(d, id).await?;
    if let Some(q) = requested_qos
        && q != v.qos
    {
        let modify = ModifyVolumeParams {
            volume_id: id,
            total_size: None,
            qos: Some(q),
        };
        if let Err(e) = drv.client.modify_volume(&modify).await {
            let _ = drv.client.delete_volume(id).await;
            return Err(e.into());
        }
        v.qos = q;
    }
    drv.grant(d, &v).await?;
    Ok(drv.info(d, &v))
}

pub async fn destroy(drv: &SolidFireDriver, d: &Discovered, name: &str) -> DriverResult<()> {
    let found = lookup(drv, d, name).await?;
    let Some(v) = found.ours else {
        if found.others > 0 {
            tracing::warn!(volume = %name, others = found.others, "volumes of that name that storch did not make are left alone");
        }
        return Ok(());
    };
    Ok(drv.client.delete_volume(v.volume_id).await?)
}

pub async fn resize(
    drv: &SolidFireDriver,
    d: &Discovered,
    name: &str,
    size_bytes: u64,
) -> DriverResult<()> {
    let v = find_or_not_found(drv, d, name).await?;
    if size_bytes < v.total_size {
        if v.total_size - size_bytes < MIB {
            return Ok(()); // the size the cluster rounded to
        }
        return Err(DriverError::Invalid(format!(
            "volume {name} is {} bytes; SolidFire volumes cannot shrink to {size_bytes}",
            v.total_size
        )));
    }
    if size_bytes == v.total_size {
        return Ok(());
    }
    drv.check_size(size_bytes)?;
    drv.check_fits(size_bytes - v.total_size).await?;
    let modify = ModifyVolumeParams {
        volume_id: v.volume_id,
        total_size: Some(size_bytes),
        qos: None,
    };
    Ok(drv.client.modify_volume(&modify).await?)
}

pub async fn create_snapshot(
    drv: &SolidFireDriver,
    d: &Discovered,
    name: &str,
    snapshot: &str,
) -> DriverResult<SnapshotInfo> {
    let v = find_or_not_found(drv, d, name).await?;
    let snaps = drv.client.snapshots(v.volume_id).await?;
    if snaps.iter().any(|s| s.name == snapshot) {
        return Err(DriverError::AlreadyExists(format!(
            "snapshot {snapshot} of volume {name} already exists"
        )));
    }
    let params = CreateSnapshotParams {
        volume_id: v.volume_id,
        name: snapshot.to_string(),
        attributes: json!({ATTR_KEY: {"createdBy": "storch"}}),
    };
    let id = drv.client.create_snapshot(&params).await?;
    let snaps = drv.client.snapshots(v.volume_id).await?;
    Ok(match snaps.iter().find(|s| s.snapshot_id == id) {
        Some(s) => snapshot_info(name, s),
        None => SnapshotInfo {
            name: snapshot.to_string(),
            volume_internal_name: name.to_string(),
            created_ms: super::now_ms(),
            size_bytes: v.total_size,
        },
    })
}

pub fn snapshot_info(volume: &str, s: &Snapshot) -> SnapshotInfo {
    SnapshotInfo {
        name: s.name.clone(),
        volume_internal_name: volume.to_string(),
        created_ms: parse_time_ms(&s.create_time).unwrap_or(0),
        size_bytes: s.total_size,
    }
}
