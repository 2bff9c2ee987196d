//! Lookups the volume operations share: the volume's record, its backend's driver (behind
//! the backend's concurrency limit), the pool's offers, and how driver refusals reach a client.

use std::sync::Arc;

use crate::actors::error::CoreError;
use crate::actors::shared::Shared;
use crate::drivers::{DriverError, LimitedDriver, StorageDriver};
use crate::model::{Offer, PoolRef};
use crate::projections::{VolumeRecord, VolumeState};

/// Refuses an operation the volume's pool does not offer (`snapshots`, `clones`): a pool that
/// offers `false` refuses here; a pool that says nothing about it leaves it to the driver
/// (Trident never checked, and fake pools often omit these offers).
pub(super) fn require_offer(
    shared: &Shared,
    pool: &PoolRef,
    attribute: &str,
) -> Result<(), CoreError> {
    let offer = shared.projection.read(|s| {
        s.backends
            .get(&pool.backend)
            .and_then(|b| b.pools.iter().find(|p| p.name == pool.pool))
            .map(|p| p.offers.get(attribute).cloned())
    });
    match offer {
        Some(Some(Offer::Bool(false))) => Err(CoreError::Failed(format!(
            "pool {} of backend {} does not offer {attribute}",
            pool.pool, pool.backend
        ))),
        _ => Ok(()),
    }
}

pub(super) fn record(shared: &Shared, name: &str) -> Option<VolumeRecord> {
    shared.projection.read(|s| s.volumes.get(name).cloned())
}

/// The driver of a backend that takes calls now; its calls wait for the backend's permits.
pub(super) fn driver(shared: &Shared, backend: &str) -> Result<Arc<LimitedDriver>, DriverError> {
    shared
        .backend(backend)
        .ok_or_else(|| DriverError::Unavailable(format!("backend {backend} is not running")))?
        .status
        .usable_driver(backend)
}

/// The array-side name of a volume on a backend (docs/trident-contract.md#internal-names).
pub(super) fn internal_name(
    shared: &Shared,
    backend: &str,
    volume: &str,
) -> Result<String, DriverError> {
    shared
        .backend(backend)
        .and_then(|slot| slot.status.driver().map(|d| d.internal_name(volume)))
        .ok_or_else(|| DriverError::Unavailable(format!("backend {backend} is not running")))
}

/// The volume, which must be online, and where it lives.
pub(super) fn online(shared: &Shared, name: &str) -> Result<(VolumeRecord, PoolRef), CoreError> {
    let rec = record(shared, name)
        .ok_or_else(|| CoreError::NotFound(format!("volume {name} was not found")))?;
    if rec.state != VolumeState::Online {
        return Err(CoreError::Failed(format!(
            "volume {name} is {}; try again when it is online",
            rec.state.as_str()
        )));
    }
    let pool = PoolRef::new(rec.backend(), rec.pool());
    Ok((rec, pool))
}

/// Maps a driver refusal to the error a client sees.
pub(super) fn driver_failure(e: DriverError, what: String) -> CoreError {
    match e {
        DriverError::NotFound(m) => CoreError::NotFound(format!("{what}: {m}")),
        DriverError::AlreadyExists(m) => CoreError::AlreadyExists(format!("{what}: {m}")),
        DriverError::Invalid(m) => CoreError::Invalid(format!("{what}: {m}")),
        DriverError::Unavailable(m) => CoreError::Unavailable(format!("{what}: {m}")),
        other => CoreError::Failed(format!("{what}: {other}")),
    }
}
