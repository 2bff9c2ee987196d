//! The wire shapes of the dashboard's read endpoints (`/storch/v1/…`). Each is built from a
//! `actors::dashboard` read; nothing here carries a secret (backend configs are left out,
//! volume access secrets are redacted by the view).

use std::collections::BTreeMap;

use serde::Serialize;
use utoipa::ToSchema;

use crate::actors::dashboard::{
    Alert, BackendOverview, ClassOverview, Overview, Spread, VolumeDetail, VolumePage, VolumeRow,
};
use crate::api::dto::{
    EventExternal, ExplanationExternal, PoolExternal, SnapshotExternal, VolumeExternal, rfc3339_ms,
};
use crate::log::VerifyReport;
use crate::model::StorageClassConfig;

/// `GET /storch/v1/overview`.
#[derive(Debug, Serialize, ToSchema)]
pub struct OverviewResponse {
    pub overview: OverviewExternal,
}

/// Backends, pools, totals and alerts.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct OverviewExternal {
    /// The sequence of the last event this instance has applied.
    pub head: u64,
    /// The leader's identity, when this instance is an etcd standby (reads only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub standby_of: Option<String>,
    pub backends: Vec<BackendSummary>,
    pub totals: Totals,
    /// Failed backends, volumes being deleted, volumes missing on their array.
    pub alerts: Vec<AlertExternal>,
}

/// Sums over every backend and volume.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Totals {
    pub backends: u64,
    pub pools: u64,
    pub storage_classes: u64,
    pub volumes: u64,
    /// State (`creating`, `online`, `deleting`, `missing`) → count.
    pub volumes_by_state: BTreeMap<String, u64>,
    pub snapshots: u64,
    /// Capacity of the pools that report one.
    pub total_bytes: u64,
    /// Bytes of the volumes storch created.
    pub used_bytes: u64,
    /// Bytes of creates under way.
    pub planned_bytes: u64,
    /// Free bytes the pools report.
    pub free_bytes: u64,
}

/// A backend on the overview.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct BackendSummary {
    pub name: String,
    pub driver: String,
    /// `file`, `block` or `""` (any).
    pub protocol: String,
    /// `initializing`, `online`, `offline` or `failed`.
    pub state: String,
    /// Why it failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state_reason: Option<String>,
    pub online: bool,
    /// Volumes storch created on it.
    pub volumes: u64,
    pub pools: Vec<PoolSummary>,
}

/// A pool on the overview: its attributes and capacity, and how storch uses it.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PoolSummary {
    #[serde(flatten)]
    pub pool: PoolExternal,
    /// Bytes of the volumes storch created here.
    pub used_bytes: u64,
    /// Bytes of creates under way that try this pool next.
    pub planned_bytes: u64,
    /// Volumes storch created here.
    pub volumes: u64,
}

/// Something to look at.
#[derive(Debug, Serialize, ToSchema)]
pub struct AlertExternal {
    /// `backend_failed`, `volume_deleting` or `volume_missing`.
    pub kind: String,
    pub count: u64,
    /// Up to 20 of the objects concerned, sorted.
    pub names: Vec<String>,
    pub message: String,
}

/// `GET /storch/v1/volumes`: one page of the volume table.
#[derive(Debug, Serialize, ToSchema)]
pub struct VolumeTableResponse {
    /// Volumes matching the filters, over all pages.
    pub matched: u64,
    /// Every volume.
    pub total: u64,
    pub offset: usize,
    pub limit: usize,
    pub volumes: Vec<VolumeRowExternal>,
}

/// A row of the volume table.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct VolumeRowExternal {
    pub name: String,
    pub storage_class: String,
    /// Empty until created.
    pub backend: String,
    pub pool: String,
    pub size_bytes: u64,
    pub state: String,
    /// `file`, `block` or `""` (not decided yet).
    pub protocol: String,
    /// The source volume of a clone.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub clone_of: String,
    /// When its creation (or import) was committed (RFC 3339, UTC, milliseconds); `null`
    /// while it is being created.
    pub created: Option<String>,
}

/// `GET /storch/v1/volumes/{volume}`.
#[derive(Debug, Serialize, ToSchema)]
pub struct VolumeDetailResponse {
    pub volume: VolumeDetailExternal,
}

/// A volume with its placement, snapshots and clones (its history: `GET /trident/v1/events`).
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct VolumeDetailExternal {
    #[serde(flatten)]
    pub volume: VolumeExternal,
    pub size_bytes: u64,
    /// When its creation (or import) was committed (RFC 3339, UTC, milliseconds); `null`
    /// while it is being created.
    pub created: Option<String>,
    /// While creating: the pools still to try, in order.
    pub candidates: Vec<PoolName>,
    /// While creating: the pools tried and why each failed.
    pub failed_attempts: Vec<AttemptExternal>,
    /// Failed delete attempts so far.
    pub delete_attempts: u32,
    pub snapshots: Vec<SnapshotExternal>,
    /// Volumes cloned from this one.
    pub clones: Vec<String>,
    /// Every event of the volume, oldest first (as `GET /trident/v1/events?object=volume/NAME`).
    pub history: Vec<EventExternal>,
}

/// A pool of a backend.
#[derive(Debug, Serialize, ToSchema)]
pub struct PoolName {
    pub backend: String,
    pub pool: String,
}

/// A placement attempt that failed.
#[derive(Debug, Serialize, ToSchema)]
pub struct AttemptExternal {
    pub backend: String,
    pub pool: String,
    pub reason: String,
}

/// `GET /storch/v1/storageclasses`.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClassOverviewResponse {
    pub storage_classes: Vec<ClassOverviewExternal>,
}

/// A class: its config, every pool with whether it matches and why not, where its volumes are.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClassOverviewExternal {
    pub name: String,
    #[schema(value_type = crate::api::openapi::StorageClassConfigDoc)]
    pub config: StorageClassConfig,
    /// For a create of any protocol and size.
    pub explanation: ExplanationExternal,
    /// Created volumes by pool.
    pub spread: Vec<SpreadExternal>,
    /// Volumes of the class still being created.
    pub unplaced: u64,
}

/// How many of a class's volumes one pool holds.
#[derive(Debug, Serialize, ToSchema)]
pub struct SpreadExternal {
    pub backend: String,
    pub pool: String,
    pub volumes: u64,
    pub bytes: u64,
}

/// `GET /storch/v1/log/verify`.
#[derive(Debug, Serialize, ToSchema)]
pub struct VerifyResponse {
    pub verification: VerifyExternal,
}

/// The hash chain walked from the first record.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct VerifyExternal {
    /// No bad record.
    pub ok: bool,
    /// Records that checked out.
    pub events: u64,
    /// The highest sequence stored.
    pub head_seq: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_bad: Option<BadRecord>,
}

/// The first record that did not check out.
#[derive(Debug, Serialize, ToSchema)]
pub struct BadRecord {
    pub seq: u64,
    pub reason: String,
}

impl From<Overview> for OverviewExternal {
    fn from(o: Overview) -> Self {
        let pools = o.backends.iter().map(|b| b.pools.len() as u64).sum();
        OverviewExternal {
            head: o.head,
            standby_of: o.standby_of,
            totals: Totals {
                backends: o.backends.len() as u64,
                pools,
                storage_classes: o.classes,
                volumes: o.volumes,
                volumes_by_state: o
                    .volumes_by_state
                    .into_iter()
                    .map(|(k, v)| (k.to_string(), v))
                    .collect(),
                snapshots: o.snapshots,
                total_bytes: o.total_bytes,
                used_bytes: o.used_bytes,
                planned_bytes: o.planned_bytes,
                free_bytes: o.free_bytes,
            },
            backends: o.backends.into_iter().map(BackendSummary::from).collect(),
            alerts: o.alerts.into_iter().map(AlertExternal::from).collect(),
        }
    }
}

impl From<BackendOverview> for BackendSummary {
    fn from(b: BackendOverview) -> Self {
        let v = b.view;
        let state_reason = v.state.reason().map(str::to_string);
        let mut usage: BTreeMap<String, _> =
            b.pools.into_iter().map(|p| (p.pool.clone(), p)).collect();
        BackendSummary {
            name: v.name,
            driver: v.driver,
            protocol: v.protocol.as_str().to_string(),
            state: v.state.as_str().to_string(),
            state_reason,
            online: v.online,
            volumes: v.volumes.len() as u64,
            pools: v
                .pools
                .into_iter()
                .map(|p| {
                    let u = usage.remove(&p.name);
                    PoolSummary {
                        pool: p.into(),
                        used_bytes: u.as_ref().map_or(0, |u| u.used_bytes),
                        planned_bytes: u.as_ref().map_or(0, |u| u.planned_bytes),
                        volumes: u.as_ref().map_or(0, |u| u.volumes),
                    }
                })
                .collect(),
        }
    }
}

impl From<Alert> for AlertExternal {
    fn from(a: Alert) -> Self {
        AlertExternal {
            kind: a.kind.to_string(),
            count: a.count,
            names: a.names,
            message: a.message,
        }
    }
}

impl From<VolumeRow> for VolumeRowExternal {
    fn from(r: VolumeRow) -> Self {
        VolumeRowExternal {
            name: r.name,
            storage_class: r.class,
            backend: r.backend,
            pool: r.pool,
            size_bytes: r.size_bytes,
            state: r.state.as_str().to_string(),
            protocol: r.protocol.as_str().to_string(),
            clone_of: r.clone_of,
            created: r.created_ms.map(rfc3339_ms),
        }
    }
}

impl VolumeTableResponse {
    pub fn new(page: VolumePage, offset: usize, limit: usize) -> Self {
        VolumeTableResponse {
            matched: page.matched,
            total: page.total,
            offset,
            limit,
            volumes: page.rows.into_iter().map(Into::into).collect(),
        }
    }
}

impl From<VolumeDetail> for VolumeDetailExternal {
    fn from(d: VolumeDetail) -> Self {
        VolumeDetailExternal {
            volume: d.view.into(),
            size_bytes: d.size_bytes,
            created: d.created_ms.map(rfc3339_ms),
            candidates: d
                .candidates
                .into_iter()
                .map(|(backend, pool)| PoolName { backend, pool })
                .collect(),
            failed_attempts: d
                .failed
                .into_iter()
                .map(|a| AttemptExternal {
                    backend: a.backend,
                    pool: a.pool,
                    reason: a.reason,
                })
                .collect(),
            delete_attempts: d.delete_attempts,
            snapshots: d.snapshots.into_iter().map(Into::into).collect(),
            clones: d.clones,
            history: Vec::new(),
        }
    }
}

impl From<ClassOverview> for ClassOverviewExternal {
    fn from(c: ClassOverview) -> Self {
        ClassOverviewExternal {
            name: c.config.name.clone(),
            config: c.config,
            explanation: c.explanation.into(),
            spread: c.spread.into_iter().map(SpreadExternal::from).collect(),
            unplaced: c.unplaced,
        }
    }
}

impl From<Spread> for SpreadExternal {
    fn from(s: Spread) -> Self {
        SpreadExternal {
            backend: s.backend,
            pool: s.pool,
            volumes: s.volumes,
            bytes: s.bytes,
        }
    }
}

impl From<VerifyReport> for VerifyExternal {
    fn from(r: VerifyReport) -> Self {
        VerifyExternal {
            ok: r.first_bad.is_none(),
            events: r.events,
            head_seq: r.head_seq,
            first_bad: r.first_bad.map(|(seq, reason)| BadRecord { seq, reason }),
        }
    }
}
