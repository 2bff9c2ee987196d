//! Growing a volume.

use std::sync::Arc;

use super::lookup::{driver, driver_failure, online};
use crate::actors::error::CoreError;
use crate::actors::messages::ResizeVolume;
use crate::actors::shared::Shared;
use crate::drivers::StorageDriver;
use crate::events::{Event, VolumeEvent};

/// Grows the volume on the array, then `VolumeResized` (a retry after a crash in between is
/// harmless: resizing to the same size again is idempotent). A size outside the driver's
/// [`crate::drivers::SizeLimits`] is refused first (`OutOfRange`), the array untouched.
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
    let failed = |e| driver_failure(e, format!("resizing volume {name} failed"));
    let driver = driver(shared, &pool.backend).map_err(failed)?;
    // A size the driver cannot make is bad input, refused before the array is asked.
    if let Err(why) = driver.size_limits().check(msg.size.bytes()) {
        return Err(CoreError::OutOfRange(format!(
            "size: volume {name} cannot grow to {} on backend {}: {why}",
            msg.size.as_str(),
            pool.backend
        )));
    }
    driver
        .resize(&internal, msg.size.bytes())
        .await
        .map_err(failed)?;
    let ev = VolumeEvent::Resized {
        size: msg.size.as_str().to_string(),
        size_bytes: msg.size.bytes(),
    };
    shared
        .append(&msg.ctx.request_id, vec![Event::volume(name, ev)])
        .await?;
    Ok(())
}
