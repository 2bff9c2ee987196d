//! The actors: the only module that imports actix. Everyone else uses [`Core`].

pub mod handle;

pub use handle::{
    BackendState, BackendView, Core, CoreError, CoreOptions, CoreRuntime, PoolView, Readiness,
    RequestCtx, StorageClassView, VolumeState, VolumeView,
};
