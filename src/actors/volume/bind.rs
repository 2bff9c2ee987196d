//! Recording that a consumer took a volume (`VolumeBound`): once, the first time. Serialised
//! with the volume's other operations, so two frontends' reconciles that see the same consumer
//! at once record it once.

use std::sync::Arc;

use super::lookup::record;
use crate::actors::error::CoreError;
use crate::actors::messages::BindVolume;
use crate::actors::shared::Shared;
use crate::events::{Event, VolumeEvent};

/// Appends `VolumeBound` unless the volume is bound already; true when it did.
pub(super) async fn bind(
    shared: &Arc<Shared>,
    name: &str,
    msg: BindVolume,
) -> Result<bool, CoreError> {
    let rec = record(shared, name)
        .ok_or_else(|| CoreError::NotFound(format!("volume {name} was not found")))?;
    if rec.bound() {
        return Ok(false);
    }
    let ev = Event::volume(name, VolumeEvent::Bound { to: msg.to });
    shared.append(&msg.ctx.request_id, vec![ev]).await?;
    Ok(true)
}
