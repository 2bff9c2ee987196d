//! ControllerPublishVolume / ControllerUnpublishVolume and ControllerGetVolume: a publish is
//! one `Core::publish_volume` (the array grants the node's host access where it needs a grant
//! per host, and the log records the publication); a volume's status is its published nodes
//! and its condition.
//!
//! Node ids are `storch csi node`'s (`crate::csi::node_id`): `NAME` or `NAME,IQN`. The
//! controller keeps no node registry, so "unknown node" (NOT_FOUND) means an id storch's node
//! plugin cannot have reported; one longer than the spec's 256 bytes is INVALID_ARGUMENT.

use tonic::Status;

use super::controller::{ControllerService, request_ctx};
use super::proto::*;
use super::status::{from_core, invalid, missing};
use super::{convert, node_id};
use crate::actors::{CoreError, PublishRequest, UnpublishNode};
use crate::projections::{BackendState, VolumeState, VolumeView};

/// The prefix of the keys storch writes into `volume_context` and `publish_context`.
const CONTEXT_PREFIX: &str = "storch.io/";

impl ControllerService {
    pub(super) async fn publish(
        &self,
        req: ControllerPublishVolumeRequest,
    ) -> Result<ControllerPublishVolumeResponse, Status> {
        if req.volume_id.is_empty() {
            return Err(missing("volume_id"));
        }
        if req.node_id.is_empty() {
            return Err(missing("node_id"));
        }
        let Some(cap) = req.volume_capability.as_ref() else {
            return Err(missing("volume_capability"));
        };
        if req.node_id.len() > node_id::MAX_NODE_ID_BYTES {
            return Err(invalid(
                "node_id",
                format!("at most {} bytes", node_id::MAX_NODE_ID_BYTES),
            ));
        }
        let wanted = convert::capability("volume_capability", cap)?;
        let capability = convert::capability_words(cap);
        let _claim = self.in_flight.claim(format!("volume:{}", req.volume_id))?;
        let view = self.core.get_volume(&req.volume_id).map_err(from_core)?;
        let host = node_id::parse(&req.node_id).map_err(|why| {
            Status::not_found(format!(
                "node_id {:?}: no node storch's node plugin reports has this id ({why}); node \
                 ids are NAME or NAME,IQN",
                req.node_id
            ))
        })?;
        let (_, how) = self.csi_volume(&view)?;
        if let Some(why) = convert::unsupported(how, &view.config.file_system, &wanted) {
            return Err(invalid("volume_capability", why));
        }
        let request = PublishRequest {
            node_id: req.node_id,
            host,
            capability,
            multi_node: wanted.multi_node(),
            readonly: req.readonly,
        };
        let ctx = request_ctx("ControllerPublishVolume", None);
        let publication = self
            .core
            .publish_volume(&ctx, &req.volume_id, request)
            .await
            .map_err(from_core)?;
        Ok(ControllerPublishVolumeResponse {
            publish_context: publication
                .context
                .into_iter()
                .map(|(k, v)| (format!("{CONTEXT_PREFIX}{k}"), v))
                .collect(),
        })
    }

    /// Unknown volume, unknown node or a node without access: success. An empty `node_id`
    /// unpublishes from every node.
    pub(super) async fn unpublish(
        &self,
        req: ControllerUnpublishVolumeRequest,
    ) -> Result<ControllerUnpublishVolumeResponse, Status> {
        if req.volume_id.is_empty() {
            return Err(missing("volume_id"));
        }
        let _claim = self.in_flight.claim(format!("volume:{}", req.volume_id))?;
        let node = (!req.node_id.is_empty()).then(|| UnpublishNode {
            host: node_id::parse(&req.node_id).ok(),
            node_id: req.node_id,
        });
        let ctx = request_ctx("ControllerUnpublishVolume", None);
        match self.core.unpublish_volume(&ctx, &req.volume_id, node).await {
            Ok(()) | Err(CoreError::NotFound(_)) => Ok(ControllerUnpublishVolumeResponse {}),
            Err(e) => Err(from_core(e)),
        }
    }

    pub(super) fn get_volume(
        &self,
        req: ControllerGetVolumeRequest,
    ) -> Result<ControllerGetVolumeResponse, Status> {
        if req.volume_id.is_empty() {
            return Err(missing("volume_id"));
        }
        let view = self.core.get_volume(&req.volume_id).map_err(from_core)?;
        let (volume, _) = self.csi_volume(&view)?;
        Ok(ControllerGetVolumeResponse {
            volume: Some(volume),
            status: Some(controller_get_volume_response::VolumeStatus {
                published_node_ids: view.published.keys().cloned().collect(),
                volume_condition: Some(self.condition(&view)),
            }),
        })
    }

    /// A ListVolumes entry's status: the nodes it is published to and its condition.
    pub(super) fn list_status(&self, view: &VolumeView) -> list_volumes_response::VolumeStatus {
        list_volumes_response::VolumeStatus {
            published_node_ids: view.published.keys().cloned().collect(),
            volume_condition: Some(self.condition(view)),
        }
    }

    /// Abnormal while the volume is not online (being made or deleted, or missing from its
    /// array) or its backend is not running normally; the message says which.
    fn condition(&self, view: &VolumeView) -> VolumeCondition {
        let name = &view.config.name;
        let backend = &view.backend;
        let abnormal = |message: String| VolumeCondition {
            abnormal: true,
            message,
        };
        if view.state != VolumeState::Online {
            let why = view
                .last_error
                .as_deref()
                .map(|e| format!(": {e}"))
                .unwrap_or_default();
            return abnormal(format!("volume {name} is {}{why}", view.state.as_str()));
        }
        if view.orphaned {
            return abnormal(format!(
                "volume {name} is missing from the array of backend {backend}"
            ));
        }
        match self.core.get_backend(backend).map(|b| b.state) {
            Ok(BackendState::Online | BackendState::Offline) => VolumeCondition {
                abnormal: false,
                message: format!("volume {name} is online on backend {backend}"),
            },
            Ok(BackendState::Failed(why)) => abnormal(format!(
                "backend {backend} of volume {name} has failed: {why}"
            )),
            Ok(BackendState::Initializing) => abnormal(format!(
                "backend {backend} of volume {name} is still initializing"
            )),
            Ok(state @ BackendState::Unrecorded) => abnormal(format!(
                "backend {backend} of volume {name} is {}: {}",
                state.as_str(),
                state.reason().unwrap_or_default()
            )),
            Err(e) => abnormal(format!("backend {backend} of volume {name}: {e}")),
        }
    }
}
