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
    if msg.size.bytes() < rec.size_bytes {
        return Err(CoreError::Invalid(format!(
            "size: volume {name} is {} bytes; shrinking to {} is not supported",
            rec.size_bytes,
            msg.size.bytes()
        )));
    }
    if msg.size.bytes() == rec.size_bytes {
        return Ok(());
    }
    let internal = rec.config().internal_name;
    async {
        driver(shared, &pool.backend)?
            .resize(&internal, msg.size.bytes())
            .await
    }
    .await
    .map_err(|e| driver_failure(e, format!("resizing volume {name} failed")))?;
    let ev = VolumeEvent::Resized {
        size: msg.size.as_str().to_string(),
        size_bytes: msg.size.bytes(),
    };
    shared
        .append(&msg.ctx.request_id, vec![Event::volume(name, ev)])
        .await?;
    Ok(())
}
