//! Deleting a volume: `VolumeDeleteRequested` → idempotent destroy → `VolumeDeleted`.

use std::sync::Arc;

use super::lookup::{driver, internal_name, record};
use crate::actors::error::CoreError;
use crate::actors::shared::Shared;
use crate::drivers::StorageDriver;
use crate::events::{BackendEvent, Event, VolumeEvent};
use crate::projections::VolumeState;

pub(super) enum DeleteError {
    /// Recorded as `VolumeDeleteFailed`; the actor retries with backoff.
    Retry(CoreError),
    Final(CoreError),
}

impl From<CoreError> for DeleteError {
    fn from(e: CoreError) -> Self {
        DeleteError::Final(e)
    }
}

/// `VolumeDeleteRequested` → idempotent destroy → `VolumeDeleted` (and the backend purged if
/// it was offline and this was its last volume).
pub(super) async fn delete(
    shared: &Arc<Shared>,
    name: &str,
    request_id: &str,
) -> Result<(), DeleteError> {
    let rec = record(shared, name)
        .ok_or_else(|| CoreError::NotFound(format!("volume {name} not found")))?;
    if rec.state != VolumeState::Deleting {
        // A host may still be using it (spec: a volume in use is refused, unchanged).
        let hosts: Vec<&str> = rec.publications().keys().map(String::as_str).collect();
        if !hosts.is_empty() {
            return Err(DeleteError::Final(CoreError::Failed(format!(
                "volume {name} is published to {}; unpublish it first",
                hosts.join(", ")
            ))));
        }
        let ev = Event::volume(name, VolumeEvent::DeleteRequested);
        shared.append(request_id, vec![ev]).await?;
    }
    // Where the volume may be: its backend, or while creating every planned candidate's.
    let mut backends: Vec<String> = if rec.backend().is_empty() {
        rec.candidates().iter().map(|p| p.backend.clone()).collect()
    } else {
        vec![rec.backend().to_string()]
    };
    let recorded_internal = rec.config().internal_name;
    backends.dedup();
    // Imported with --no-manage: storch forgets it and leaves the array's volume alone.
    if !rec.managed() {
        tracing::info!(volume = %name, internal = %recorded_internal, "forgetting an unmanaged volume; the array keeps it");
        backends.clear();
    }
    for backend in &backends {
        let result = async {
            let internal = if rec.backend() == backend && !recorded_internal.is_empty() {
                recorded_internal.clone()
            } else {
                internal_name(shared, backend, name)?
            };
            driver(shared, backend)?.destroy(&internal).await
        }
        .await;
        if let Err(e) = result {
            let attempt = rec.delete_attempts() + 1;
            let error = format!("deleting volume {name} on backend {backend} failed: {e}");
            let ev = Event::volume(
                name,
                VolumeEvent::DeleteFailed {
                    error: error.clone(),
                    attempt,
                },
            );
            shared.append(request_id, vec![ev]).await?;
            tracing::warn!(volume = %name, %backend, error = %e, attempt, "volume delete failed; will retry");
            return Err(DeleteError::Retry(CoreError::Failed(format!(
                "{error}; storch keeps retrying in the background"
            ))));
        }
    }
    let mut events = vec![Event::volume(name, VolumeEvent::Deleted)];
    let purge = shared.projection.read(|s| {
        s.backends
            .get(rec.backend())
            .is_some_and(|b| !b.online && b.volumes.len() == 1 && b.volumes.contains(name))
    });
    if purge {
        events.push(Event::backend(rec.backend(), BackendEvent::Purged));
    }
    shared.append(request_id, events).await?;
    if purge {
        shared.stop_backend(rec.backend());
    }
    Ok(())
}
