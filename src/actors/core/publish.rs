//! Publishing volumes to hosts (CSI ControllerPublish/Unpublish): commands go to the volume's
//! actor, which serialises them with every other operation on the volume.

use super::Core;
use crate::actors::error::{CoreError, RequestCtx, observe};
use crate::actors::messages::{PublishVolume, UnpublishVolume};
use crate::actors::volume;
use crate::drivers::HostAccess;
use crate::model::Publication;

/// A publish as the core takes it: the host, and how it will use the volume.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublishRequest {
    /// The frontend's identity of the host (the CSI node id); publications are keyed by it.
    pub node_id: String,
    pub host: HostAccess,
    /// How the host uses the volume, in the frontend's canonical words; a repeat with other
    /// words (or another `readonly`) is refused.
    pub capability: String,
    /// Whether that use allows other hosts at the same time.
    pub multi_node: bool,
    pub readonly: bool,
}

/// One host to unpublish: by node id, and the host itself when the frontend could read it
/// (so a grant the log lost is revoked too).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnpublishNode {
    pub node_id: String,
    pub host: Option<HostAccess>,
}

impl Core {
    /// Makes `volume` available to a host: the array grants it access where it needs a grant
    /// per host. Idempotent: a repeat as published returns the same publication. Refuses an
    /// unknown volume (`NotFound`), another use on that host (`AlreadyExists`) and a second
    /// host while either use is single-node (`Failed`).
    pub async fn publish_volume(
        &self,
        ctx: &RequestCtx,
        volume: &str,
        request: PublishRequest,
    ) -> Result<Publication, CoreError> {
        let started = std::time::Instant::now();
        let result = async {
            self.shared.ensure_ready()?;
            self.known(volume)?;
            let node_id = request.node_id.clone();
            volume::send(&self.shared, volume, || PublishVolume {
                ctx: ctx.clone(),
                request: request.clone(),
            })
            .await??;
            self.shared
                .projection
                .read(|s| {
                    s.volumes
                        .get(volume)
                        .and_then(|v| v.publications().get(&node_id).cloned())
                })
                .ok_or_else(|| {
                    CoreError::NotFound(format!("volume {volume} was deleted meanwhile"))
                })
        }
        .await;
        observe("publish_volume", started, &result);
        result
    }

    /// Takes a host's access away (every host's when `node` is `None`). An unknown volume or
    /// a host without access is success.
    pub async fn unpublish_volume(
        &self,
        ctx: &RequestCtx,
        volume: &str,
        node: Option<UnpublishNode>,
    ) -> Result<(), CoreError> {
        let started = std::time::Instant::now();
        let result = async {
            self.shared.ensure_ready()?;
            if self.known(volume).is_err() {
                return Ok(());
            }
            volume::send(&self.shared, volume, || UnpublishVolume {
                ctx: ctx.clone(),
                node: node.clone(),
            })
            .await?
        }
        .await;
        observe("unpublish_volume", started, &result);
        result
    }

    fn known(&self, volume: &str) -> Result<(), CoreError> {
        if self
            .shared
            .projection
            .read(|s| s.volumes.contains_key(volume))
        {
            Ok(())
        } else {
            Err(CoreError::NotFound(format!(
                "volume {volume} was not found"
            )))
        }
    }
}
