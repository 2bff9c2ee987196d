//! The actors: the only module that imports actix. Everyone else uses [`Core`].
//!
//! - `backend`: one actor per backend (driver, concurrency limit, init with retries).
//! - `class`: one actor per storage class (matched pools).
//! - `volume`: virtual volume actors (create, delete, reconcile), activated on demand.
//! - `shared`: what actors and the handle share; the placement policy (scheduler).
//! - `handle`: `Core`, the handle; `runtime`: start-up, replay, shutdown; `standby`: start-up
//!   with etcd replication (follow the leader until elected).

mod audit;
mod backend;
mod class;
mod declared;
pub mod handle;
mod runtime;
mod shared;
mod standby;
mod volume;

pub use audit::{BackendStats, EventFilter, EventRecord, Health, PoolStats, Stats};
pub use declared::{ApplyReport, Declared};
pub use handle::{
    BackendState, BackendView, Core, CoreError, CoreOptions, Explanation, PoolExplanation,
    PoolView, Readiness, RequestCtx, SnapshotView, StorageClassView, VolumeState, VolumeView,
};
pub use runtime::CoreRuntime;
