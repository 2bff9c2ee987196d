//! Growing a volume.

use std::sync::Arc;

use super::lookup::{driver, driver_failure, online};
use crate::actors::error::CoreError;
use crate::actors::messages::ResizeVolume;
use crate::actors::shared::Shared;
use crate::drivers::StorageDriver;
use crate::events::{Event, VolumeEvent};

/// Grows the volume on the array, then `VolumeResized` (a retry after a crash in between is
/// harmless: resizing to the same size again is idempotent).
pub(super) async fn resize(
    shared: &Arc<Shared>,
    name: &str,
    msg: ResizeVolume,
) -> Result<(), CoreError> {
    let (rec, pool) = online(shared, name)?;
    if msg.size_bytes < rec.size_bytes {
        return Err(CoreError::Invalid(format!(
            "size: volume {name} is {} bytes; shrinking to {} is not supported",
            rec.size_bytes, msg.size_bytes
        )));
    }
    if msg.size_bytes == rec.size_bytes {
        return Ok(());
    }
    let internal = rec.config().internal_name;
    async {
        driver(shared, &pool.backend)?
            .resize(&internal, msg.size_bytes)
            .await
    }
    .await
    .map_err(|e| driver_failure(e, format!("resizing volume {name} failed")))?;
    let ev = VolumeEvent::Resized {
        size: msg.size,
        size_bytes: msg.size_bytes,
    };
    shared
        .append(&msg.ctx.request_id, vec![Event::volume(name, ev)])
        .await?;
    Ok(())
}
