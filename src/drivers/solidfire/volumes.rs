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

/// Whether storch created this volume: its attributes say storch made it, under this name.
pub fn is_ours(v: &Volume) -> bool {
    let ours = v.attributes.get(ATTR_KEY);
    let field = |k: &str| ours.and_then(|s| s.get(k)).and_then(Value::as_str);
    field("createdBy") == Some("storch") && field("name") == Some(v.name.as_str())
}

/// What a create or clone planned, to compare with storch's volume found under its name.
pub struct Plan {
    pub account_id: i64,
    /// `None` for a clone (it takes its source's size).
    pub total_size: Option<u64>,
    /// `None`: the cluster's default, unknown to this backend (not compared).
    pub qos: Option<Qos>,
    /// `None` for a clone (it takes its source's block size).
    pub enable512e: Option<bool>,
    pub pool: String,
}

impl Plan {
    /// What `create` of `req` makes.
    pub fn create(
        drv: &SolidFireDriver,
        d: &Discovered,
        req: &CreateRequest,
    ) -> DriverResult<Plan> {
        Ok(Plan {
            account_id: d.account.account_id,
            total_size: Some(req.size_bytes),
            qos: drv.plan_qos(d, &req.pool, &req.config)?,
            enable512e: Some(enable512e(drv, &req.config)),
            pool: req.pool.clone(),
        })
    }

    /// What a clone of `source` into `pool` makes: the source's block size and QoS, or
    /// the QoS the clone's config asks for.
    pub fn clone(d: &Discovered, source: &Volume, pool: &str, qos: Option<Qos>) -> Plan {
        Plan {
            account_id: d.account.account_id,
            total_size: None,
            qos: Some(qos.unwrap_or(source.qos)),
            enable512e: Some(source.enable512e),
            pool: pool.to_string(),
        }
    }

    /// The first field in which storch's volume `v` differs from the plan, as a message.
    pub fn mismatch(&self, v: &Volume) -> Option<String> {
        let differs =
            |field: &str, actual: &dyn std::fmt::Display, planned: &dyn std::fmt::Display| {
                Some(format!("its {field} is {actual}, planned {planned}"))
            };
        if v.account_id != self.account_id {
            return differs("accountID", &v.account_id, &self.account_id);
        }
        if let Some(size) = self.total_size
            && !size_matches(v.total_size, size)
        {
            return differs("totalSize", &v.total_size, &size);
        }
        if let Some(q) = self.qos {
            let pairs = [
                ("qos.minIOPS", v.qos.min_iops, q.min_iops),
                ("qos.maxIOPS", v.qos.max_iops, q.max_iops),
                ("qos.burstIOPS", v.qos.burst_iops, q.burst_iops),
            ];
            if let Some((field, actual, planned)) = pairs.iter().find(|(_, a, p)| a != p) {
                return differs(field, actual, planned);
            }
        }
        if let Some(e) = self.enable512e
            && v.enable512e != e
        {
            return differs("enable512e", &v.enable512e, &e);
        }
        let pool = recorded_pool(v).unwrap_or_default();
        if pool != self.pool {
            return differs(
                "pool (in its attributes)",
                &format!("{pool:?}"),
                &format!("{:?}", self.pool),
            );
        }
        None
    }
}

/// The pool storch recorded in a volume's attributes.
fn recorded_pool(v: &Volume) -> Option<&str> {
    v.attributes
        .get(ATTR_KEY)
        .and_then(|s| s.get("pool"))
        .and_then(Value::as_str)
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

/// The volumes named `name` in the account: storch's active one (at most one), storch's
/// deleted but not yet purged ones, and how many active others (volumes storch did not make,
/// which it never uses, adopts or deletes).
pub struct Lookup {
    pub ours: Option<Volume>,
    pub deleted: Vec<Volume>,
    pub others: usize,
}

pub async fn lookup(drv: &SolidFireDriver, d: &Discovered, name: &str) -> DriverResult<Lookup> {
    let all = drv.client.volumes(d.account.account_id).await?;
    let (mine, others): (Vec<Volume>, Vec<Volume>) = all
        .into_iter()
        .filter(|v| v.name == name)
        .partition(is_ours);
    let (ours, deleted): (Vec<Volume>, Vec<Volume>) = mine.into_iter().partition(Volume::is_active);
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
        deleted: deleted
            .into_iter()
            .filter(|v| v.status == "deleted")
            .collect(),
        others: others.iter().filter(|v| v.is_active()).count(),
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
    existing(drv, d, name, &Plan::create(drv, d, req)?).await?;
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

/// A clone's pool (its source's) and the QoS its volume config asks for, if any.
fn clone_qos(
    drv: &SolidFireDriver,
    d: &Discovered,
    source: &Volume,
    req: &CloneRequest,
) -> DriverResult<(String, Option<Qos>)> {
    let pool = drv.pool_of(source);
    if req.config.qos.trim().is_empty() && req.config.qos_type.trim().is_empty() {
        return Ok((pool, None));
    }
    let qos = drv.plan_qos(d, &pool, &req.config)?;
    Ok((pool, qos))
}

/// What a clone of `req` makes, when its source is storch's volume `source`.
pub async fn clone_plan(
    drv: &SolidFireDriver,
    d: &Discovered,
    req: &CloneRequest,
) -> DriverResult<Option<Plan>> {
    let Some(source) = find(drv, d, &req.source_internal_name).await? else {
        return Ok(None);
    };
    let (pool, qos) = clone_qos(drv, d, &source, req)?;
    Ok(Some(Plan::clone(d, &source, &pool, qos)))
}

/// Refuses a name that is taken: by storch's volume as planned (`AlreadyExists`: the caller
/// may adopt it, an interrupted create), by storch's volume made otherwise (`Conflict` naming
/// the field: never adopted), or by a volume storch did not make (`AlreadyExists`; `get` does
/// not show it).
async fn existing(
    drv: &SolidFireDriver,
    d: &Discovered,
    name: &str,
    plan: &Plan,
) -> DriverResult<()> {
    match adoptable(drv, d, name, plan).await? {
        None => Ok(()),
        Some(v) => Err(DriverError::AlreadyExists(format!(
            "volume {name} already exists (volume {}, made by storch as planned: an \
             interrupted create)",
            v.volume_id
        ))),
    }
}

/// storch's volume named `name` when it is as planned; `None` when the name is free. A
/// volume storch did not make is refused (`AlreadyExists`), storch's volume made otherwise
/// too (`Conflict`, naming the field); neither is changed.
async fn adoptable(
    drv: &SolidFireDriver,
    d: &Discovered,
    name: &str,
    plan: &Plan,
) -> DriverResult<Option<Volume>> {
    let found = lookup(drv, d, name).await?;
    match (found.ours, found.others) {
        (Some(v), _) => match plan.mismatch(&v) {
            None => Ok(Some(v)),
            Some(why) => Err(DriverError::Conflict(format!(
                "volume {name} already exists (volume {}, made by storch) but {why}; it is not \
                 adopted and left as it is",
                v.volume_id
            ))),
        },
        (None, 0) => Ok(None),
        (None, n) => Err(DriverError::AlreadyExists(format!(
            "{n} volume(s) named {name} that storch did not make exist in account {}; storch \
             does not use, adopt or delete them",
            d.account.username
        ))),
    }
}

/// The volume an interrupted create or clone left, adopted when it is storch's and as
/// planned; an adopted volume joins the access groups the interrupted create had not added
/// it to yet.
pub async fn adopt(
    drv: &SolidFireDriver,
    d: &Discovered,
    name: &str,
    plan: &Plan,
) -> DriverResult<Option<VolumeInfo>> {
    let Some(v) = adoptable(drv, d, name, plan).await? else {
        return Ok(None);
    };
    if !d.use_chap {
        for g in &d.access_groups {
            if !v.volume_access_groups.contains(g) {
                drv.client.add_to_group(*g, vec![v.volume_id]).await?;
            }
        }
    }
    Ok(Some(drv.info(d, &v)))
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
    let (pool, requested_qos) = clone_qos(drv, d, &source, req)?;
    existing(drv, d, name, &Plan::clone(d, &source, &pool, requested_qos)).await?;
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

/// Deletes and purges storch's volume `name`; also purges storch's volumes of that name a
/// delete interrupted between `DeleteVolume` and `PurgeDeletedVolume` left deleted (they
/// still hold the cluster's space until it purges them itself, hours later).
pub async fn destroy(drv: &SolidFireDriver, d: &Discovered, name: &str) -> DriverResult<()> {
    let found = lookup(drv, d, name).await?;
    if found.others > 0 {
        tracing::warn!(volume = %name, others = found.others, "volumes of that name that storch did not make are left alone");
    }
    for v in &found.deleted {
        drv.client.purge_deleted_volume(v.volume_id).await?;
    }
    match found.ours {
        Some(v) => {
            drv.client.delete_volume(v.volume_id).await?;
            super::publish::forget_volume(drv, &v.volume_access_groups).await
        }
        None => Ok(()),
    }
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
