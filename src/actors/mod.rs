//! The actors: the only module that imports actix. Everyone else uses [`Core`].
//!
//! - `core/`: `Core`, the handle; one file per resource (backends, classes, volumes, …).
//! - `error`: `CoreError` and `RequestCtx`.
//! - `options`: `CoreOptions`.
//! - `messages`: the messages actors take.
//! - `shared`: the registry of live actors (by recipient), backend status, readiness.
//! - `placement`: the placement policy (plan, shuffle, load ordering, explain hints).
//! - `backend`: one actor per backend (driver init with retries; add, update, delete).
//! - `class`: one actor per storage class (matched pools).
//! - `volume/`: virtual volume actors (create, delete, snapshots, resize, reconcile).
//! - `drift`: comparing each backend with its array (missing volumes, changes, orphans).
//! - `declared`: declarative config (apply a declaration of backends and classes).
//! - `audit`: events, follow, health, stats; the log's commit sink.
//! - `runtime`: start-up, reconciliation of pending work, shutdown.
//! - `standby`: start-up with etcd replication (follow the leader until elected).
//! - `replay`: replay of the log and checkpoints, for `runtime` and `standby`.

mod audit;
mod backend;
mod class;
mod core;
mod declared;
mod drift;
mod error;
mod messages;
mod options;
mod placement;
mod replay;
mod runtime;
mod shared;
mod standby;
mod volume;

pub use self::core::dashboard;
pub use self::core::{Core, Orphans, PublishRequest, UnpublishNode};
pub use crate::projections::{
    BackendState, BackendView, Explanation, PoolExplanation, PoolView, SnapshotView,
    StorageClassView, VolumeState, VolumeView,
};
pub use audit::{BackendStats, EventFilter, EventRecord, Health, PoolStats, Stats};
pub use declared::{ApplyReport, Declared, backend_entry};
pub use drift::{DriftReport, Orphan};
pub use error::{CoreError, RequestCtx};
pub use options::CoreOptions;
pub use placement::OUTSIDE_TOPOLOGY;
pub use runtime::CoreRuntime;
pub use shared::Readiness;
