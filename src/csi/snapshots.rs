//! The Controller's snapshot RPCs. A CSI snapshot is a storch snapshot of one volume; its id
//! is `<volume>/<snapshot>` (`convert::snapshot_id`), enough to find both.

use tonic::Status;

use super::controller::{ControllerService, request_ctx};
use super::convert;
use super::proto::{
    CreateSnapshotRequest, CreateSnapshotResponse, DeleteSnapshotRequest, DeleteSnapshotResponse,
    ListSnapshotsRequest, ListSnapshotsResponse, Snapshot, list_snapshots_response,
};
use super::status::{from_core, missing};
use crate::actors::CoreError;
use crate::model::SnapshotRequest;
use crate::projections::SnapshotView;

/// A snapshot as CSI shows it. storch records a snapshot once the array has cut it, so it is
/// ready to use as soon as it is listed.
fn csi_snapshot(view: &SnapshotView) -> Snapshot {
    let created = view.created_ms.unwrap_or(0);
    Snapshot {
        size_bytes: view.size_bytes.min(i64::MAX as u64) as i64,
        snapshot_id: convert::snapshot_id(&view.volume, &view.name),
        source_volume_id: view.volume.clone(),
        creation_time: Some(prost_types::Timestamp {
            seconds: (created / 1000) as i64,
            nanos: ((created % 1000) * 1_000_000) as i32,
        }),
        ready_to_use: view.created_ms.is_some(),
        group_snapshot_id: String::new(),
    }
}

impl ControllerService {
    /// Idempotent by name: the same name on the same volume answers the snapshot again; on
    /// another volume it is `ALREADY_EXISTS`.
    pub(super) async fn create_snapshot(
        &self,
        req: CreateSnapshotRequest,
    ) -> Result<CreateSnapshotResponse, Status> {
        if req.name.is_empty() {
            return Err(missing("name"));
        }
        if req.source_volume_id.is_empty() {
            return Err(missing("source_volume_id"));
        }
        let name = convert::object_name(&req.name);
        let _claim = self.in_flight.claim(format!("snapshot:{name}"))?;
        let all = self.core.list_snapshots(None).map_err(from_core)?;
        if let Some(found) = all.iter().find(|s| s.name == name) {
            if found.volume != req.source_volume_id {
                return Err(Status::already_exists(format!(
                    "snapshot {} exists for volume {}",
                    req.name, found.volume
                )));
            }
            if found.created_ms.is_none() {
                return Err(Status::aborted(format!(
                    "snapshot {} is still being cut",
                    req.name
                )));
            }
            return Ok(CreateSnapshotResponse {
                snapshot: Some(csi_snapshot(found)),
            });
        }
        self.core
            .get_volume(&req.source_volume_id)
            .map_err(from_core)?;
        let _volume = self
            .in_flight
            .claim(format!("volume:{}", req.source_volume_id))?;
        let request = SnapshotRequest::parse(&req.source_volume_id, "name", &name)
            .map_err(|e| Status::invalid_argument(e.to_string()))?;
        let ctx = request_ctx("CreateSnapshot", None);
        let view = self
            .core
            .create_snapshot(&ctx, &request)
            .await
            .map_err(from_core)?;
        Ok(CreateSnapshotResponse {
            snapshot: Some(csi_snapshot(&view)),
        })
    }

    /// An unknown id, or the snapshot of a volume that is gone, is already deleted: OK.
    pub(super) async fn delete_snapshot(
        &self,
        req: DeleteSnapshotRequest,
    ) -> Result<DeleteSnapshotResponse, Status> {
        if req.snapshot_id.is_empty() {
            return Err(missing("snapshot_id"));
        }
        let Some((volume, snapshot)) = convert::parse_snapshot_id(&req.snapshot_id) else {
            return Ok(DeleteSnapshotResponse {});
        };
        let _claim = self.in_flight.claim(format!("snapshot:{snapshot}"))?;
        let ctx = request_ctx("DeleteSnapshot", None);
        match self.core.delete_snapshot(&ctx, volume, snapshot).await {
            Ok(()) | Err(CoreError::NotFound(_)) => Ok(DeleteSnapshotResponse {}),
            Err(e) => Err(from_core(e)),
        }
    }

    /// Every cut snapshot, narrowed by `snapshot_id` and `source_volume_id` (a filter that
    /// matches nothing is an empty list), paged by id.
    pub(super) fn list_snapshots(
        &self,
        req: ListSnapshotsRequest,
    ) -> Result<ListSnapshotsResponse, Status> {
        let mut all: Vec<SnapshotView> =
            match (req.source_volume_id.as_str(), req.snapshot_id.as_str()) {
                ("", "") => self.core.list_snapshots(None),
                (volume, "") => self.core.list_snapshots(Some(volume)),
                (_, id) => match convert::parse_snapshot_id(id) {
                    Some((volume, _)) => self.core.list_snapshots(Some(volume)),
                    None => Ok(Vec::new()),
                },
            }
            .or_else(|e| match e {
                CoreError::NotFound(_) => Ok(Vec::new()),
                e => Err(from_core(e)),
            })?;
        all.retain(|s| {
            s.created_ms.is_some()
                && (req.snapshot_id.is_empty()
                    || convert::snapshot_id(&s.volume, &s.name) == req.snapshot_id)
                && (req.source_volume_id.is_empty() || s.volume == req.source_volume_id)
        });
        let mut entries: Vec<Snapshot> = all.iter().map(csi_snapshot).collect();
        entries.sort_by(|a, b| a.snapshot_id.cmp(&b.snapshot_id));
        let (page, next_token) = convert::page(
            entries,
            |s| s.snapshot_id.as_str(),
            &req.starting_token,
            req.max_entries,
        )?;
        Ok(ListSnapshotsResponse {
            entries: page
                .into_iter()
                .map(|s| list_snapshots_response::Entry { snapshot: Some(s) })
                .collect(),
            next_token,
        })
    }
}
