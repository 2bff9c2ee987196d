//! Publishing a volume to a host and taking it away (CSI ControllerPublish/Unpublish): the
//! array grants or revokes the host's access where it needs a grant per host
//! (`StorageDriver::needs_publish`), then `VolumePublished` / `VolumeUnpublished` record it.
//! A crash between the two leaves a grant the log does not know; the caller's retry repeats
//! the (idempotent) driver call and records it then.

use std::sync::Arc;

use super::lookup::{driver, driver_failure, online, record};
use crate::actors::error::CoreError;
use crate::actors::messages::{PublishVolume, UnpublishVolume};
use crate::actors::shared::Shared;
use crate::drivers::{HostAccess, StorageDriver};
use crate::events::{Event, VolumeEvent};
use crate::model::Publication;

/// The host a publication was granted to.
pub(crate) fn host_of(p: &Publication) -> HostAccess {
    HostAccess {
        node: p.node.clone(),
        iscsi_initiator: p.iscsi_initiator.clone(),
    }
}

/// Grants the host access, unless it already has it as asked (then nothing changes); refuses
/// another use on that host (`AlreadyExists`) and a second host while either use is
/// single-node (`Failed`).
pub(super) async fn publish(
    shared: &Arc<Shared>,
    name: &str,
    msg: PublishVolume,
) -> Result<(), CoreError> {
    let (rec, pool) = online(shared, name)?;
    let req = msg.request;
    if let Some(existing) = rec.publications().get(&req.node_id) {
        if existing.capability == req.capability && existing.readonly == req.readonly {
            return Ok(());
        }
        return Err(CoreError::AlreadyExists(format!(
            "volume {name} is already published to {} as {}{}; unpublish it before publishing \
             it as {}{}",
            req.node_id,
            existing.capability,
            if existing.readonly { " read-only" } else { "" },
            req.capability,
            if req.readonly { " read-only" } else { "" },
        )));
    }
    let exclusive: Vec<&str> = rec
        .publications()
        .iter()
        .filter(|(_, p)| !(p.multi_node && req.multi_node))
        .map(|(id, _)| id.as_str())
        .collect();
    if !exclusive.is_empty() {
        return Err(CoreError::Failed(format!(
            "volume {name} is published to {} and {} cannot share it ({}); unpublish it there \
             first",
            exclusive.join(", "),
            req.node_id,
            if req.multi_node {
                "it was published for one node only"
            } else {
                "a single-node use was asked for"
            },
        )));
    }
    let internal = rec.config().internal_name;
    let host = req.host;
    let context = async {
        let driver = driver(shared, &pool.backend)?;
        if driver.needs_publish() {
            driver.publish(&internal, &host).await
        } else {
            Ok(Default::default())
        }
    }
    .await
    .map_err(|e| driver_failure(e, format!("publishing volume {name} to {}", req.node_id)))?;
    let publication = Publication {
        node: host.node,
        iscsi_initiator: host.iscsi_initiator,
        capability: req.capability,
        multi_node: req.multi_node,
        readonly: req.readonly,
        context,
    };
    let ev = VolumeEvent::Published {
        node_id: req.node_id,
        publication: Box::new(publication),
    };
    shared
        .append(&msg.ctx.request_id, vec![Event::volume(name, ev)])
        .await?;
    Ok(())
}

/// Revokes one host's access (or every host's); a volume or a host without access is
/// success. A host the log does not know, but the caller names, is still revoked on the array
/// (a grant a crash left unrecorded).
pub(super) async fn unpublish(
    shared: &Arc<Shared>,
    name: &str,
    msg: UnpublishVolume,
) -> Result<(), CoreError> {
    let Some(rec) = record(shared, name) else {
        return Ok(());
    };
    let targets: Vec<(String, Option<HostAccess>, bool)> = match msg.node {
        None => rec
            .publications()
            .iter()
            .map(|(id, p)| (id.clone(), Some(host_of(p)), true))
            .collect(),
        Some(node) => match rec.publications().get(&node.node_id) {
            Some(p) => vec![(node.node_id, Some(host_of(p)), true)],
            None => vec![(node.node_id, node.host, false)],
        },
    };
    let internal = rec.config().internal_name;
    for (node_id, host, recorded) in targets {
        if let Some(host) = host.filter(|_| !rec.backend().is_empty() && !internal.is_empty()) {
            async {
                let driver = driver(shared, rec.backend())?;
                if driver.needs_publish() {
                    driver.unpublish(&internal, &host).await?;
                }
                Ok(())
            }
            .await
            .map_err(|e| driver_failure(e, format!("unpublishing volume {name} from {node_id}")))?;
        }
        if recorded {
            let ev = Event::volume(name, VolumeEvent::Unpublished { node_id });
            shared.append(&msg.ctx.request_id, vec![ev]).await?;
        }
    }
    Ok(())
}
