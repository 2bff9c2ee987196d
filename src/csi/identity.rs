//! The Identity service: who the plugin is, what it offers, and whether it is ready.

use std::sync::Arc;

use tonic::{Request, Response, Status};

use super::proto::identity_server::Identity;
use super::proto::plugin_capability::{self, service, volume_expansion};
use super::proto::{
    GetPluginCapabilitiesRequest, GetPluginCapabilitiesResponse, GetPluginInfoRequest,
    GetPluginInfoResponse, PluginCapability, ProbeRequest, ProbeResponse,
};
use super::status::observed;
use crate::actors::{Core, Readiness};

/// What every service of this plugin shares.
#[derive(Debug)]
pub struct Plugin {
    /// The core whose readiness Probe reports; `None` for the node plugin, which has no core
    /// and is ready once it serves.
    core: Option<Core>,
    driver_name: String,
}

impl Plugin {
    pub fn new(core: Core, driver_name: String) -> Plugin {
        Plugin {
            core: Some(core),
            driver_name,
        }
    }

    /// The node plugin's (`storch csi node`): no core, always ready.
    pub fn node(driver_name: String) -> Plugin {
        Plugin {
            core: None,
            driver_name,
        }
    }
}

#[derive(Debug, Clone)]
pub struct IdentityService {
    pub plugin: Arc<Plugin>,
}

/// The plugin capabilities, the same from the controller and the node plugin (spec §3.1):
/// the Controller service, VOLUME_ACCESSIBILITY_CONSTRAINTS and
/// online expansion (the arrays grow a volume in place while it is in use). Topology is
/// offered whatever the backends declare, since every instance must answer the same: a volume
/// on a backend without `supportedTopologies` answers an empty `accessible_topology`
/// (reachable from everywhere), one on a backend with them only the pools' segments.
pub fn plugin_capabilities() -> Vec<PluginCapability> {
    let service = |t: service::Type| PluginCapability {
        r#type: Some(plugin_capability::Type::Service(
            plugin_capability::Service { r#type: t as i32 },
        )),
    };
    vec![
        service(service::Type::ControllerService),
        service(service::Type::VolumeAccessibilityConstraints),
        PluginCapability {
            r#type: Some(plugin_capability::Type::VolumeExpansion(
                plugin_capability::VolumeExpansion {
                    r#type: volume_expansion::Type::Online as i32,
                },
            )),
        },
    ]
}

#[tonic::async_trait]
impl Identity for IdentityService {
    async fn get_plugin_info(
        &self,
        _request: Request<GetPluginInfoRequest>,
    ) -> Result<Response<GetPluginInfoResponse>, Status> {
        observed("GetPluginInfo", async {
            Ok(GetPluginInfoResponse {
                name: self.plugin.driver_name.clone(),
                vendor_version: env!("CARGO_PKG_VERSION").to_string(),
                manifest: Default::default(),
            })
        })
        .await
    }

    async fn get_plugin_capabilities(
        &self,
        _request: Request<GetPluginCapabilitiesRequest>,
    ) -> Result<Response<GetPluginCapabilitiesResponse>, Status> {
        observed("GetPluginCapabilities", async {
            Ok(GetPluginCapabilitiesResponse {
                capabilities: plugin_capabilities(),
            })
        })
        .await
    }

    /// The node plugin (no core) is ready once it serves. The controller: ready once the core
    /// takes commands; `ready: false` while the log replays and on a
    /// standby (it serves no commands); `FAILED_PRECONDITION` when start-up failed for good.
    /// A slow or offline backend never fails the probe.
    async fn probe(
        &self,
        _request: Request<ProbeRequest>,
    ) -> Result<Response<ProbeResponse>, Status> {
        observed("Probe", async {
            let Some(core) = &self.plugin.core else {
                return Ok(ProbeResponse { ready: Some(true) });
            };
            let ready = match core.readiness() {
                Readiness::Ready => true,
                Readiness::Replaying | Readiness::Standby { .. } => false,
                Readiness::Failed(why) => {
                    return Err(Status::failed_precondition(format!(
                        "storch failed to start: {why}"
                    )));
                }
            };
            Ok(ProbeResponse { ready: Some(ready) })
        })
        .await
    }
}
