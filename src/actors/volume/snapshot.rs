//! Snapshots of a volume: create (adopting one an interrupted attempt left), delete, and
//! finishing those a crash interrupted.

use std::sync::Arc;

use super::lookup::{driver, driver_failure, online, require_offer};
use crate::actors::error::CoreError;
use crate::actors::messages::{CreateSnapshot, DeleteSnapshot};
use crate::actors::shared::Shared;
use crate::drivers::{DriverError, StorageDriver};
use crate::events::{Event, VolumeEvent};
use crate::model::PoolRef;
use crate::projections::VolumeRecord;

/// `SnapshotRequested` → driver → `SnapshotCreated` | `SnapshotCreationFailed`.
pub(super) async fn create_snapshot(
    shared: &Arc<Shared>,
    name: &str,
    msg: CreateSnapshot,
) -> Result<(), CoreError> {
    let (rec, pool) = online(shared, name)?;
    if rec.snapshots().contains_key(&msg.snapshot) {
        return Err(CoreError::AlreadyExists(format!(
            "snapshot {} of volume {name} already exists",
            msg.snapshot
        )));
    }
    require_offer(shared, &pool, "snapshots")?;
    let rid = &msg.ctx.request_id;
    let requested = VolumeEvent::SnapshotRequested {
        snapshot: msg.snapshot.clone(),
    };
    shared
        .append(rid, vec![Event::volume(name, requested)])
        .await?;
    finish_snapshot(shared, name, rid, &rec, &pool, &msg.snapshot).await
}

async fn finish_snapshot(
    shared: &Shared,
    name: &str,
    rid: &str,
    rec: &VolumeRecord,
    pool: &PoolRef,
    snapshot: &str,
) -> Result<(), CoreError> {
    let internal = rec.config().internal_name;
    let made = async {
        let driver = driver(shared, &pool.backend)?;
        match driver.create_snapshot(&internal, snapshot).await {
            // Adopt a snapshot that the array already has (an interrupted earlier attempt).
            Err(
                e @ (DriverError::AlreadyExists(_)
                | DriverError::Unavailable(_)
                | DriverError::Other(_)),
            ) => match driver.list_snapshots(&internal).await {
                Ok(list) => list.into_iter().find(|s| s.name == snapshot).ok_or(e),
                Err(_) => Err(e),
            },
            made => made,
        }
    }
    .await;
    match made {
        Ok(info) => {
            let ev = VolumeEvent::SnapshotCreated {
                snapshot: snapshot.into(),
                created_ms: info.created_ms,
                size_bytes: info.size_bytes,
            };
            shared.append(rid, vec![Event::volume(name, ev)]).await?;
            Ok(())
        }
        Err(e) if e.is_retryable() => Err(CoreError::Unavailable(format!(
            "snapshot {snapshot} of volume {name}: {e}; it is retried in the background"
        ))),
        Err(e) => {
            let ev = VolumeEvent::SnapshotCreationFailed {
                snapshot: snapshot.into(),
                error: e.to_string(),
            };
            shared.append(rid, vec![Event::volume(name, ev)]).await?;
            Err(driver_failure(
                e,
                format!("creating snapshot {snapshot} of volume {name} failed"),
            ))
        }
    }
}

/// Idempotent destroy on the array, then `SnapshotDeleted`.
pub(super) async fn delete_snapshot(
    shared: &Arc<Shared>,
    name: &str,
    msg: DeleteSnapshot,
) -> Result<(), CoreError> {
    let (rec, pool) = online(shared, name)?;
    if !rec.snapshots().contains_key(&msg.snapshot) {
        return Err(CoreError::NotFound(format!(
            "snapshot {} of volume {name} not found",
            msg.snapshot
        )));
    }
    let internal = rec.config().internal_name;
    let deleted = async {
        let driver = driver(shared, &pool.backend)?;
        driver.delete_snapshot(&internal, &msg.snapshot).await
    };
    deleted.await.map_err(|e| {
        driver_failure(
            e,
            format!("deleting snapshot {} of volume {name} failed", msg.snapshot),
        )
    })?;
    let ev = VolumeEvent::SnapshotDeleted {
        snapshot: msg.snapshot,
    };
    shared
        .append(&msg.ctx.request_id, vec![Event::volume(name, ev)])
        .await?;
    Ok(())
}

/// Finishes snapshots whose intent was recorded but whose outcome was not.
pub(super) async fn reconcile_snapshots(
    shared: &Arc<Shared>,
    name: &str,
    rec: &VolumeRecord,
) -> bool {
    let pool = PoolRef::new(rec.backend(), rec.pool());
    let mut retry = false;
    for (snap, s) in rec.snapshots() {
        if s.created_ms.is_none()
            && let Err(CoreError::Unavailable(_)) =
                finish_snapshot(shared, name, "reconcile", rec, &pool, snap).await
        {
            retry = true;
        }
    }
    retry
}
