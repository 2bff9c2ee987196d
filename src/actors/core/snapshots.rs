//! Snapshots: create and delete go to the volume's actor; reads.

use super::Core;
use crate::actors::error::{CoreError, RequestCtx, observe};
use crate::actors::messages::{CreateSnapshot, DeleteSnapshot};
use crate::actors::volume;
use crate::model::SnapshotRequest;
use crate::projections::SnapshotView;

impl Core {
    /// Takes a snapshot of a volume; refused where the volume's pool does not offer snapshots.
    pub async fn create_snapshot(
        &self,
        ctx: &RequestCtx,
        request: &SnapshotRequest,
    ) -> Result<SnapshotView, CoreError> {
        let started = std::time::Instant::now();
        let result = async {
            self.shared.ensure_ready()?;
            let volume = &request.volume;
            volume::send(&self.shared, volume, || CreateSnapshot {
                ctx: ctx.clone(),
                snapshot: request.snapshot.clone(),
            })
            .await??;
            self.get_snapshot(volume, &request.snapshot)
        }
        .await;
        observe("create_snapshot", started, &result);
        result
    }

    pub async fn delete_snapshot(
        &self,
        ctx: &RequestCtx,
        volume: &str,
        snapshot: &str,
    ) -> Result<(), CoreError> {
        let started = std::time::Instant::now();
        let result = async {
            self.shared.ensure_ready()?;
            volume::send(&self.shared, volume, || DeleteSnapshot {
                ctx: ctx.clone(),
                snapshot: snapshot.to_string(),
            })
            .await?
        }
        .await;
        observe("delete_snapshot", started, &result);
        result
    }

    pub fn get_snapshot(&self, volume: &str, snapshot: &str) -> Result<SnapshotView, CoreError> {
        self.list_snapshots(Some(volume))?
            .into_iter()
            .find(|s| s.name == snapshot)
            .ok_or_else(|| {
                CoreError::NotFound(format!("snapshot {snapshot} of volume {volume} not found"))
            })
    }

    /// Snapshots of one volume, or of every volume; sorted by volume, then name.
    pub fn list_snapshots(&self, volume: Option<&str>) -> Result<Vec<SnapshotView>, CoreError> {
        self.shared.ensure_readable()?;
        self.shared
            .projection
            .read(|s| s.snapshot_views(volume))
            .ok_or_else(|| {
                let name = volume.unwrap_or_default();
                CoreError::NotFound(format!("volume {name} was not found"))
            })
    }
}
