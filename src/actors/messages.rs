//! The messages actors take. The registry in `shared` holds a `Recipient` per message, so
//! senders never name an actor type.

use actix::Message;

use super::error::{CoreError, RequestCtx};
use crate::model::{RequestedSize, VolumeRequest};

/// Stops a backend actor (backend purged or replaced).
#[derive(Message)]
#[rtype(result = "()")]
pub(crate) struct StopBackend;

/// Recompute a storage class's matched pools from the projection.
#[derive(Message)]
#[rtype(result = "()")]
pub(crate) struct Rematch;

/// Create a volume (or a clone): intent → plan → attempts → outcome.
#[derive(Message)]
#[rtype(result = "Result<(), CoreError>")]
pub(crate) struct CreateVolume {
    pub ctx: RequestCtx,
    pub request: VolumeRequest,
}

#[derive(Message)]
#[rtype(result = "Result<(), CoreError>")]
pub(crate) struct DeleteVolume {
    pub ctx: RequestCtx,
}

/// Finish what a crash interrupted: an open create intent, a pending delete or snapshot.
#[derive(Message)]
#[rtype(result = "()")]
pub(crate) struct Reconcile;

#[derive(Message)]
#[rtype(result = "Result<(), CoreError>")]
pub(crate) struct CreateSnapshot {
    pub ctx: RequestCtx,
    pub snapshot: String,
}

#[derive(Message)]
#[rtype(result = "Result<(), CoreError>")]
pub(crate) struct DeleteSnapshot {
    pub ctx: RequestCtx,
    pub snapshot: String,
}

#[derive(Message)]
#[rtype(result = "Result<(), CoreError>")]
pub(crate) struct ResizeVolume {
    pub ctx: RequestCtx,
    pub size: RequestedSize,
}

/// Make a volume available to a host (and record it); see `Core::publish_volume`.
#[derive(Message)]
#[rtype(result = "Result<(), CoreError>")]
pub(crate) struct PublishVolume {
    pub ctx: RequestCtx,
    pub request: super::core::PublishRequest,
}

/// Take a host's access to a volume away (every host's when `node` is `None`).
#[derive(Message)]
#[rtype(result = "Result<(), CoreError>")]
pub(crate) struct UnpublishVolume {
    pub ctx: RequestCtx,
    pub node: Option<super::core::UnpublishNode>,
}

/// Record that a consumer took the volume, unless one did before; see `Core::bind_volume`.
#[derive(Message)]
#[rtype(result = "Result<bool, CoreError>")]
pub(crate) struct BindVolume {
    pub ctx: RequestCtx,
    pub to: String,
}

/// A backend config built (its driver behind its concurrency limit) and discovered, not yet
/// recorded.
pub(crate) struct PreparedBackend {
    pub name: String,
    pub driver: std::sync::Arc<crate::drivers::LimitedDriver>,
    pub driver_name: String,
    /// The config without secrets (JSON text) and the secrets sealed.
    pub redacted: String,
    pub sealed: Option<crate::model::Sealed>,
    pub discovery: crate::drivers::Discovery,
    /// Where its pools are reachable from (from the config; empty: everywhere).
    pub topology: Vec<crate::model::Segment>,
}

/// Replace a backend's config (possibly renaming it); its actor decides and records it.
#[derive(Message)]
#[rtype(result = "Result<String, CoreError>")]
pub(crate) struct UpdateBackend {
    pub ctx: RequestCtx,
    pub prepared: PreparedBackend,
}

/// Delete a backend without volumes, or take one with volumes offline.
#[derive(Message)]
#[rtype(result = "Result<(), CoreError>")]
pub(crate) struct DeleteBackend {
    pub ctx: RequestCtx,
}
