//! The CSI Node service of `storch csi node` (spec §6): the process kubelet calls on every node.
//! It keeps no state of its own and never talks to the storch server: what a volume is comes
//! from the contexts the controller wrote (`volume`), what is staged or published where comes
//! from the host itself (its mount table, sessions and devices), and every host action goes
//! through one seam, [`host::HostOps`] (`real` on a host, `fake` in tests).
//!
//! - iSCSI volumes are staged: login (CHAP from `secrets`), wait for the LUN, format it when
//!   empty, mount it on the staging path — or, for raw block, bind the device node onto
//!   `STAGING/block`. Each publish binds the staged path (or device) onto the target.
//! - NFS and local volumes need no staging (NodeStage succeeds without host action): publish
//!   mounts the export, or binds the local directory, onto the target.
//! - `stage`, `publish`, `stats`: the RPCs; errors follow spec §8.

pub mod fake;
pub mod host;
mod publish;
pub mod real;
mod stage;
mod stats;
pub mod volume;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tonic::{Request, Response, Status};

use self::host::{HostError, HostErrorKind, HostOps};
use super::convert::{self, Wanted};
use super::identity::{IdentityService, Plugin};
use super::proto::node_server::{Node, NodeServer};
use super::proto::node_service_capability::{Rpc, Type as CapType, rpc};
use super::proto::volume_capability::AccessType;
use super::proto::volume_capability::access_mode::Mode;
use super::proto::*;
use super::status::{InFlight, invalid, missing, observed};
use super::{CsiError, CsiServer};
use crate::drivers::HostAccess;

/// The topology key of `--zone` (Kubernetes' well-known zone label).
pub const ZONE_KEY: &str = "topology.kubernetes.io/zone";
/// The file in a staging directory that a raw block volume's device node is bound onto.
pub const BLOCK_FILE: &str = "block";
/// How long a stage waits for a LUN to appear after the login, by default.
pub const DEFAULT_DEVICE_TIMEOUT: Duration = Duration::from_secs(30);
/// The longest `--device-timeout` taken (a stage call must end while kubelet still waits).
pub const MAX_DEVICE_TIMEOUT: Duration = Duration::from_secs(600);

/// How `storch csi node` runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeOptions {
    pub socket: PathBuf,
    pub driver_name: String,
    /// The node's name and iSCSI initiator: its node id.
    pub host: HostAccess,
    pub zone: Option<String>,
    /// `max_volumes_per_node` (0: no limit from the plugin).
    pub max_volumes: i64,
    pub device_timeout: Duration,
}

/// Serves Identity and Node on the socket of `options`, acting on the host through `host`.
pub fn start(options: NodeOptions, host: Arc<dyn HostOps>) -> Result<CsiServer, CsiError> {
    let identity = IdentityService {
        plugin: Arc::new(Plugin::node(options.driver_name.clone())),
    };
    let socket = options.socket.clone();
    let router = tonic::transport::Server::builder()
        .add_service(super::proto::identity_server::IdentityServer::new(identity))
        .add_service(NodeServer::new(NodeService::new(options, host)));
    CsiServer::serve(socket, router, "Identity and Node")
}

/// The Node service.
#[derive(Debug, Clone)]
pub struct NodeService {
    host: Arc<dyn HostOps>,
    options: Arc<NodeOptions>,
    in_flight: InFlight,
}

impl NodeService {
    pub fn new(options: NodeOptions, host: Arc<dyn HostOps>) -> NodeService {
        NodeService {
            host,
            options: Arc::new(options),
            in_flight: InFlight::default(),
        }
    }

    fn info(&self) -> NodeGetInfoResponse {
        let o = &self.options;
        NodeGetInfoResponse {
            node_id: super::node_id::format(&o.host),
            max_volumes_per_node: o.max_volumes,
            accessible_topology: o.zone.as_ref().map(|z| Topology {
                segments: [(ZONE_KEY.to_string(), z.clone())].into(),
            }),
        }
    }
}

/// The node capabilities: staging (iSCSI needs it), stats with the volume condition, and
/// expansion.
pub fn capabilities() -> Vec<NodeServiceCapability> {
    [
        rpc::Type::StageUnstageVolume,
        rpc::Type::GetVolumeStats,
        rpc::Type::ExpandVolume,
        rpc::Type::VolumeCondition,
    ]
    .into_iter()
    .map(|t| NodeServiceCapability {
        r#type: Some(CapType::Rpc(Rpc { r#type: t as i32 })),
    })
    .collect()
}

/// A volume capability as the node uses it.
#[derive(Debug, Clone)]
pub(crate) struct Cap {
    pub wanted: Wanted,
    /// SINGLE_NODE_READER_ONLY or MULTI_NODE_READER_ONLY: mounted read-only.
    pub reader_only: bool,
    /// One target path at a time (SINGLE_NODE_WRITER, SINGLE_NODE_READER_ONLY).
    pub single_node: bool,
    pub mount_flags: Vec<String>,
}

/// Reads a REQUIRED capability (`convert::capability`'s rules); errors name the field.
pub(crate) fn capability(field: &str, cap: Option<&VolumeCapability>) -> Result<Cap, Status> {
    let cap = cap.ok_or_else(|| missing(field))?;
    let wanted = convert::capability(field, cap)?;
    let mode = cap.access_mode.as_ref().map(|m| m.mode());
    let mount_flags = match &cap.access_type {
        Some(AccessType::Mount(m)) => m.mount_flags.clone(),
        _ => Vec::new(),
    };
    if let Some(bad) = mount_flags
        .iter()
        .position(|f| f.is_empty() || f.contains(','))
    {
        return Err(invalid(
            &format!("{field}.mount.mount_flags[{bad}]"),
            "must be one non-empty mount option without ','",
        ));
    }
    Ok(Cap {
        wanted,
        reader_only: matches!(
            mode,
            Some(Mode::SingleNodeReaderOnly | Mode::MultiNodeReaderOnly)
        ),
        single_node: matches!(
            mode,
            Some(Mode::SingleNodeWriter | Mode::SingleNodeReaderOnly)
        ),
        mount_flags,
    })
}

/// A REQUIRED string field.
pub(crate) fn required<'a>(field: &str, value: &'a str) -> Result<&'a str, Status> {
    if value.is_empty() {
        Err(missing(field))
    } else {
        Ok(value)
    }
}

/// A REQUIRED absolute path.
pub(crate) fn absolute(field: &str, value: &str) -> Result<PathBuf, Status> {
    let path = Path::new(required(field, value)?);
    if !path.is_absolute() {
        return Err(invalid(field, "must be an absolute path"));
    }
    Ok(path.to_path_buf())
}

/// A host failure as a status: refused CHAP credentials are `UNAUTHENTICATED`, the rest
/// `INTERNAL` with what failed.
pub(crate) fn host_status(e: HostError) -> Status {
    match e.kind {
        HostErrorKind::AuthFailed => Status::unauthenticated(e.message),
        HostErrorKind::NotFound | HostErrorKind::Failed => Status::internal(e.message),
    }
}

#[tonic::async_trait]
impl Node for NodeService {
    async fn node_stage_volume(
        &self,
        request: Request<NodeStageVolumeRequest>,
    ) -> Result<Response<NodeStageVolumeResponse>, Status> {
        observed("NodeStageVolume", self.stage(request.into_inner())).await
    }

    async fn node_unstage_volume(
        &self,
        request: Request<NodeUnstageVolumeRequest>,
    ) -> Result<Response<NodeUnstageVolumeResponse>, Status> {
        observed("NodeUnstageVolume", self.unstage(request.into_inner())).await
    }

    async fn node_publish_volume(
        &self,
        request: Request<NodePublishVolumeRequest>,
    ) -> Result<Response<NodePublishVolumeResponse>, Status> {
        observed("NodePublishVolume", self.publish(request.into_inner())).await
    }

    async fn node_unpublish_volume(
        &self,
        request: Request<NodeUnpublishVolumeRequest>,
    ) -> Result<Response<NodeUnpublishVolumeResponse>, Status> {
        observed("NodeUnpublishVolume", self.unpublish(request.into_inner())).await
    }

    async fn node_get_volume_stats(
        &self,
        request: Request<NodeGetVolumeStatsRequest>,
    ) -> Result<Response<NodeGetVolumeStatsResponse>, Status> {
        observed("NodeGetVolumeStats", self.stats(request.into_inner())).await
    }

    async fn node_expand_volume(
        &self,
        request: Request<NodeExpandVolumeRequest>,
    ) -> Result<Response<NodeExpandVolumeResponse>, Status> {
        observed("NodeExpandVolume", self.expand(request.into_inner())).await
    }

    async fn node_get_capabilities(
        &self,
        _request: Request<NodeGetCapabilitiesRequest>,
    ) -> Result<Response<NodeGetCapabilitiesResponse>, Status> {
        observed("NodeGetCapabilities", async {
            Ok(NodeGetCapabilitiesResponse {
                capabilities: capabilities(),
            })
        })
        .await
    }

    async fn node_get_info(
        &self,
        _request: Request<NodeGetInfoRequest>,
    ) -> Result<Response<NodeGetInfoResponse>, Status> {
        observed("NodeGetInfo", async { Ok(self.info()) }).await
    }
}
