//! The Controller service. Each RPC checks its input (a refusal names the field and changes
//! nothing), then calls the core exactly as REST and Kubernetes do: a CSI CreateVolume is one
//! `VolumeRequest`, CreateSnapshot one `SnapshotRequest`, ControllerExpandVolume one
//! `ResizeRequest`. Volumes here; snapshots in `snapshots`.

use std::collections::HashMap;

use tonic::{Request, Response, Status};

use super::convert::{self, Parameters, Range, Wanted};
use super::proto::controller_server::Controller;
use super::proto::controller_service_capability::{self, rpc};
use super::proto::*;
use super::status::{InFlight, from_core, invalid, missing, observed};
use super::topology;
use crate::actors::{Core, CoreError, OUTSIDE_TOPOLOGY, RequestCtx};
use crate::drivers::{Attachment, attachment};
use crate::model::{ResizeRequest, VolumeConfig, VolumeRequest};
use crate::projections::{VolumeState, VolumeView};

/// The Controller service on the core.
#[derive(Debug, Clone)]
pub struct ControllerService {
    pub(super) core: Core,
    pub(super) in_flight: InFlight,
}

/// The capabilities the Controller offers, the same whatever the backends (a pool that
/// cannot take snapshots or clones refuses them per request).
///
/// PUBLISH_UNPUBLISH_VOLUME (and PUBLISH_READONLY) is always offered: a publish works on every
/// backend — the array grants the node's host access where it needs a grant per host
/// (`StorageDriver::needs_publish`: igroups, access groups, host mappings), and on every
/// backend the log records the publication, which keeps a single-node volume on one node
/// (FAILED_PRECONDITION), fills `published_node_ids` (LIST_VOLUMES_PUBLISHED_NODES) and keeps
/// a published volume from being deleted. The sidecars read capabilities once at start, so
/// they cannot follow the backends added later; the CSIDriver object therefore needs
/// `attachRequired: true`.
pub const CAPABILITIES: [rpc::Type; 12] = [
    rpc::Type::CreateDeleteVolume,
    rpc::Type::PublishUnpublishVolume,
    rpc::Type::ListVolumes,
    rpc::Type::GetCapacity,
    rpc::Type::CreateDeleteSnapshot,
    rpc::Type::ListSnapshots,
    rpc::Type::CloneVolume,
    rpc::Type::PublishReadonly,
    rpc::Type::ExpandVolume,
    rpc::Type::ListVolumesPublishedNodes,
    rpc::Type::VolumeCondition,
    rpc::Type::GetVolume,
];

impl ControllerService {
    pub fn new(core: Core) -> ControllerService {
        ControllerService {
            core,
            in_flight: InFlight::default(),
        }
    }

    /// A volume as CSI shows it, with how it attaches (from its backend's driver).
    pub(super) fn csi_volume(
        &self,
        view: &VolumeView,
    ) -> Result<(Volume, Option<Attachment>), Status> {
        let driver = self
            .core
            .get_backend(&view.backend)
            .map(|b| b.driver)
            .map_err(from_core)?;
        let config = &view.config;
        let how = attachment(&driver, &config.access_information);
        let content_source = if !config.clone_source_snapshot.is_empty() {
            Some(volume_content_source::Type::Snapshot(
                volume_content_source::SnapshotSource {
                    snapshot_id: convert::snapshot_id(
                        &config.clone_source_volume,
                        &config.clone_source_snapshot,
                    ),
                },
            ))
        } else if !config.clone_source_volume.is_empty() {
            Some(volume_content_source::Type::Volume(
                volume_content_source::VolumeSource {
                    volume_id: config.clone_source_volume.clone(),
                },
            ))
        } else {
            None
        };
        let volume = Volume {
            capacity_bytes: size_of(config) as i64,
            volume_id: config.name.clone(),
            volume_context: convert::volume_context(&view.backend, &driver, config, how),
            content_source: content_source.map(|t| VolumeContentSource { r#type: Some(t) }),
            accessible_topology: topology::accessible(&view.topology),
        };
        Ok((volume, how))
    }

    async fn create_volume(
        &self,
        req: CreateVolumeRequest,
    ) -> Result<CreateVolumeResponse, Status> {
        if req.name.is_empty() {
            return Err(missing("name"));
        }
        if req.name.len() > 128 || req.name.chars().any(char::is_control) {
            return Err(invalid(
                "name",
                "must be at most 128 bytes without control characters",
            ));
        }
        let (wanted, range, params) = check_create(&req)?;
        let topology = topology::requirement(
            "accessibility_requirements",
            req.accessibility_requirements.as_ref(),
        )?;
        let source = self.content_source(req.volume_content_source.as_ref())?;
        let name = convert::object_name(&req.name);
        let _claim = self.in_flight.claim(format!("volume:{name}"))?;
        let fs_type = wanted
            .fs_type
            .clone()
            .or_else(|| params.class.fs_type.clone())
            .unwrap_or_else(|| convert::DEFAULT_FS.to_string());
        match self.core.get_volume(&name) {
            Ok(existing) => {
                let answer =
                    self.existing(&existing, &params, &wanted, &range, &fs_type, &source)?;
                if let Some(t) = &topology
                    && !t.admits(&existing.topology)
                {
                    return Err(Status::already_exists(format!(
                        "volume {name} exists but is not reachable from the requested topology"
                    )));
                }
                return Ok(CreateVolumeResponse {
                    volume: Some(answer),
                });
            }
            Err(CoreError::NotFound(_)) => {}
            Err(e) => return Err(from_core(e)),
        }
        let size = match &source {
            Some(s) => {
                if range.limit.is_some_and(|l| s.size > l) {
                    return Err(Status::out_of_range(format!(
                        "capacity_range.limit_bytes: the source holds {} bytes, more than the limit",
                        s.size
                    )));
                }
                None
            }
            None => Some(range.size()?),
        };
        self.ensure_class(&params).await?;
        let config = VolumeConfig {
            version: "1".into(),
            name: name.clone(),
            size: size.map(|s| s.to_string()).unwrap_or_default(),
            protocol: wanted.protocol(),
            storage_class: params.class.config.name.clone(),
            access_mode: wanted.access_mode.as_str().to_string(),
            file_system: fs_type,
            clone_source_volume: source
                .as_ref()
                .map(|s| s.volume.clone())
                .unwrap_or_default(),
            clone_source_snapshot: source
                .as_ref()
                .and_then(|s| s.snapshot.clone())
                .unwrap_or_default(),
            ..VolumeConfig::default()
        };
        let mut request =
            VolumeRequest::parse(config).map_err(|e| Status::invalid_argument(e.to_string()))?;
        if let Some(t) = topology {
            request = request.with_topology(t);
        }
        let ctx = request_ctx("CreateVolume", params.claim.as_ref());
        let mut view = self
            .core
            .add_volume(&ctx, request)
            .await
            .map_err(|e| match e {
                // Other nodes may reach a pool: the scheduler may pick again (spec §11).
                CoreError::Failed(m) if m.starts_with(OUTSIDE_TOPOLOGY) => {
                    Status::resource_exhausted(m)
                }
                e => from_core(e),
            })?;
        // A clone has its source's size; a larger request grows it before the answer.
        if let (Some(_), Some(required)) = (&source, range.required)
            && size_of(&view.config) < required
        {
            let grow = Range {
                required: Some(required),
                limit: range.limit,
            }
            .size()?;
            let resize = ResizeRequest::parse(&name, &grow.to_string())
                .map_err(|e| Status::invalid_argument(e.to_string()))?;
            view = self
                .core
                .resize_volume(&ctx, &resize)
                .await
                .map_err(from_core)?;
        }
        let (volume, _) = self.csi_volume(&view)?;
        Ok(CreateVolumeResponse {
            volume: Some(volume),
        })
    }

    /// The answer to a repeated CreateVolume: the same volume when the arguments agree,
    /// `ALREADY_EXISTS` when they do not, `ABORTED` while it is still being made or deleted.
    fn existing(
        &self,
        view: &VolumeView,
        params: &Parameters,
        wanted: &Wanted,
        range: &Range,
        fs_type: &str,
        source: &Option<Source>,
    ) -> Result<Volume, Status> {
        let name = &view.config.name;
        if view.state != VolumeState::Online {
            return Err(Status::aborted(format!(
                "volume {name} is {}; retry later",
                view.state.as_str()
            )));
        }
        let (volume, how) = self.csi_volume(view)?;
        let config = &view.config;
        let mut conflicts = Vec::new();
        // A clone takes its source's class and file system, whatever the request's
        // parameters say; the source decides whether it is the same volume.
        let clone = !config.clone_source_volume.is_empty();
        if !clone && config.storage_class != params.class.config.name {
            conflicts.push("other parameters".to_string());
        }
        if !range.admits(size_of(config)) {
            conflicts.push(format!(
                "a size of {} bytes outside capacity_range",
                size_of(config)
            ));
        }
        if let Some(why) = convert::unsupported(how, &config.file_system, wanted) {
            conflicts.push(why);
        }
        if !clone && how == Some(Attachment::Iscsi) && config.file_system != fs_type {
            conflicts.push(format!("file system {}", config.file_system));
        }
        let same_source = match source {
            None => config.clone_source_volume.is_empty(),
            Some(s) => {
                config.clone_source_volume == s.volume
                    && config.clone_source_snapshot == s.snapshot.clone().unwrap_or_default()
            }
        };
        if !same_source {
            conflicts.push("another volume_content_source".into());
        }
        if conflicts.is_empty() {
            Ok(volume)
        } else {
            Err(Status::already_exists(format!(
                "volume {name} exists with {}",
                conflicts.join(", ")
            )))
        }
    }

    /// A content source resolved: `NOT_FOUND` for a snapshot or volume storch does not have.
    fn content_source(
        &self,
        source: Option<&VolumeContentSource>,
    ) -> Result<Option<Source>, Status> {
        let Some(source) = source else {
            return Ok(None);
        };
        match &source.r#type {
            None => Err(invalid("volume_content_source", "needs snapshot or volume")),
            Some(volume_content_source::Type::Snapshot(s)) => {
                if s.snapshot_id.is_empty() {
                    return Err(missing("volume_content_source.snapshot.snapshot_id"));
                }
                let not_found =
                    || Status::not_found(format!("snapshot {} was not found", s.snapshot_id));
                let (volume, snapshot) =
                    convert::parse_snapshot_id(&s.snapshot_id).ok_or_else(not_found)?;
                let found = self
                    .core
                    .get_snapshot(volume, snapshot)
                    .map_err(|e| match e {
                        CoreError::NotFound(_) => not_found(),
                        e => from_core(e),
                    })?;
                if found.created_ms.is_none() {
                    return Err(Status::aborted(format!(
                        "snapshot {} is still being cut",
                        s.snapshot_id
                    )));
                }
                Ok(Some(Source {
                    volume: volume.to_string(),
                    snapshot: Some(snapshot.to_string()),
                    size: found.size_bytes,
                }))
            }
            Some(volume_content_source::Type::Volume(v)) => {
                if v.volume_id.is_empty() {
                    return Err(missing("volume_content_source.volume.volume_id"));
                }
                let view = self.core.get_volume(&v.volume_id).map_err(from_core)?;
                Ok(Some(Source {
                    volume: v.volume_id.clone(),
                    snapshot: None,
                    size: size_of(&view.config),
                }))
            }
        }
    }

    /// Adds the class the parameters mean, unless it exists.
    async fn ensure_class(&self, params: &Parameters) -> Result<(), Status> {
        let name = &params.class.config.name;
        match self.core.get_storage_class(name) {
            Ok(_) => return Ok(()),
            Err(CoreError::NotFound(_)) => {}
            Err(e) => return Err(from_core(e)),
        }
        let ctx = RequestCtx::new(format!("csi:class/{name}"));
        match self
            .core
            .add_storage_class(&ctx, params.class.config.clone())
            .await
        {
            Ok(_) | Err(CoreError::AlreadyExists(_)) => Ok(()),
            Err(e) => Err(from_core(e)),
        }
    }

    async fn delete_volume(
        &self,
        req: DeleteVolumeRequest,
    ) -> Result<DeleteVolumeResponse, Status> {
        if req.volume_id.is_empty() {
            return Err(missing("volume_id"));
        }
        let _claim = self.in_flight.claim(format!("volume:{}", req.volume_id))?;
        // A volume's snapshots live inside it on every array storch drives: deleting it would
        // take them along, so it stays until they are deleted (spec §5.3).
        match self.core.list_snapshots(Some(&req.volume_id)) {
            Ok(snapshots) if !snapshots.is_empty() => {
                return Err(Status::failed_precondition(format!(
                    "volume {} has {} snapshot(s), which would be lost with it; delete them first",
                    req.volume_id,
                    snapshots.len()
                )));
            }
            Ok(_) | Err(CoreError::NotFound(_)) => {}
            Err(e) => return Err(from_core(e)),
        }
        let ctx = request_ctx("DeleteVolume", None);
        match self.core.delete_volume(&ctx, &req.volume_id).await {
            Ok(()) | Err(CoreError::NotFound(_)) => Ok(DeleteVolumeResponse {}),
            Err(e) => Err(from_core(e)),
        }
    }

    fn validate(
        &self,
        req: ValidateVolumeCapabilitiesRequest,
    ) -> Result<ValidateVolumeCapabilitiesResponse, Status> {
        if req.volume_id.is_empty() {
            return Err(missing("volume_id"));
        }
        if req.volume_capabilities.is_empty() {
            return Err(missing("volume_capabilities"));
        }
        let mut wanted = Vec::new();
        for (i, cap) in req.volume_capabilities.iter().enumerate() {
            wanted.push(convert::capability(
                &format!("volume_capabilities[{i}]"),
                cap,
            )?);
        }
        let view = self.core.get_volume(&req.volume_id).map_err(from_core)?;
        let (volume, how) = self.csi_volume(&view)?;
        let mut refusals: Vec<String> = wanted
            .iter()
            .enumerate()
            .filter_map(|(i, w)| {
                convert::unsupported(how, &view.config.file_system, w)
                    .map(|why| format!("volume_capabilities[{i}]: {why}"))
            })
            .collect();
        if !req.parameters.is_empty() {
            let params = Parameters::read(&req.parameters)?;
            if params.class.config.name != view.config.storage_class {
                refusals.push("parameters: the volume was made with other parameters".into());
            }
        }
        if !req.mutable_parameters.is_empty() {
            refusals.push("mutable_parameters: MODIFY_VOLUME is not offered".into());
        }
        for (k, v) in &req.volume_context {
            if k.starts_with("storch.io/") && volume.volume_context.get(k) != Some(v) {
                refusals.push(format!("volume_context: {k} differs from the volume's"));
            }
        }
        if !refusals.is_empty() {
            return Ok(ValidateVolumeCapabilitiesResponse {
                confirmed: None,
                message: refusals.join("; "),
            });
        }
        Ok(ValidateVolumeCapabilitiesResponse {
            confirmed: Some(validate_volume_capabilities_response::Confirmed {
                volume_context: req.volume_context,
                volume_capabilities: req.volume_capabilities,
                parameters: req.parameters,
                mutable_parameters: HashMap::new(),
            }),
            message: String::new(),
        })
    }

    /// Volumes by id, paged: every volume that exists (not those being made or deleted), with
    /// the nodes it is published to and its condition.
    fn list_volumes(&self, req: ListVolumesRequest) -> Result<ListVolumesResponse, Status> {
        let names = self.core.list_volumes().map_err(from_core)?;
        let (page, next_token) =
            convert::page(names, |n| n.as_str(), &req.starting_token, req.max_entries)?;
        let mut entries = Vec::with_capacity(page.len());
        for name in page {
            let view = match self.core.get_volume(&name) {
                Ok(v) if !matches!(v.state, VolumeState::Creating | VolumeState::Deleting) => v,
                Ok(_) | Err(CoreError::NotFound(_)) => continue,
                Err(e) => return Err(from_core(e)),
            };
            let (volume, _) = self.csi_volume(&view)?;
            entries.push(list_volumes_response::Entry {
                volume: Some(volume),
                status: Some(self.list_status(&view)),
            });
        }
        Ok(ListVolumesResponse {
            entries,
            next_token,
        })
    }

    /// The free space of the pools a create with these parameters and capabilities would
    /// try (placement's filters, as `storch explain` shows them).
    async fn get_capacity(&self, req: GetCapacityRequest) -> Result<GetCapacityResponse, Status> {
        let protocol = if req.volume_capabilities.is_empty() {
            crate::model::Protocol::Any
        } else {
            convert::wanted("volume_capabilities", &req.volume_capabilities)?.protocol()
        };
        let topology =
            topology::capacity_segment("accessible_topology", req.accessible_topology.as_ref())?;
        let params = Parameters::read(&req.parameters)?;
        self.ensure_class(&params).await?;
        let explanation = self
            .core
            .explain_in(&params.class.config.name, protocol, None, topology.as_ref())
            .map_err(from_core)?;
        let mut total: u64 = 0;
        let mut largest: u64 = 0;
        for pool in explanation.pools.iter().filter(|p| p.candidate) {
            let free = self
                .core
                .get_backend(&pool.backend)
                .ok()
                .and_then(|b| b.pools.into_iter().find(|p| p.name == pool.pool))
                .and_then(|p| p.free_bytes)
                .unwrap_or(0);
            total = total.saturating_add(free);
            largest = largest.max(free);
        }
        Ok(GetCapacityResponse {
            available_capacity: total.min(i64::MAX as u64) as i64,
            maximum_volume_size: Some(largest.min(i64::MAX as u64) as i64),
            minimum_volume_size: None,
        })
    }

    async fn expand(
        &self,
        req: ControllerExpandVolumeRequest,
    ) -> Result<ControllerExpandVolumeResponse, Status> {
        if req.volume_id.is_empty() {
            return Err(missing("volume_id"));
        }
        let Some(range) = req.capacity_range.as_ref() else {
            return Err(missing("capacity_range"));
        };
        let range = Range::parse("capacity_range", Some(range))?;
        if range.required.is_none() && range.limit.is_none() {
            return Err(invalid(
                "capacity_range",
                "needs required_bytes or limit_bytes",
            ));
        }
        let wanted = req
            .volume_capability
            .as_ref()
            .map(|c| convert::capability("volume_capability", c))
            .transpose()?;
        let _claim = self.in_flight.claim(format!("volume:{}", req.volume_id))?;
        let mut view = self.core.get_volume(&req.volume_id).map_err(from_core)?;
        let (_, how) = self.csi_volume(&view)?;
        if let Some(w) = &wanted
            && let Some(why) = convert::unsupported(how, &view.config.file_system, w)
        {
            return Err(invalid("volume_capability", why));
        }
        let current = size_of(&view.config);
        if range.required.is_some_and(|r| r > current) {
            let size = range.size()?;
            let resize = ResizeRequest::parse(&req.volume_id, &size.to_string())
                .map_err(|e| Status::invalid_argument(e.to_string()))?;
            let ctx = request_ctx("ControllerExpandVolume", None);
            view = self
                .core
                .resize_volume(&ctx, &resize)
                .await
                .map_err(from_core)?;
        }
        Ok(ControllerExpandVolumeResponse {
            capacity_bytes: size_of(&view.config) as i64,
            // A LUN needs a rescan and its file system a grow on the node; an export or a
            // local directory shows the new size at once.
            node_expansion_required: how == Some(Attachment::Iscsi),
        })
    }
}

/// The capabilities, capacity range and parameters of a CreateVolume, checked; mutable
/// parameters must be empty (MODIFY_VOLUME is not offered).
fn check_create(req: &CreateVolumeRequest) -> Result<(Wanted, Range, Parameters), Status> {
    let wanted = convert::wanted("volume_capabilities", &req.volume_capabilities)?;
    let range = Range::parse("capacity_range", req.capacity_range.as_ref())?;
    if !req.mutable_parameters.is_empty() {
        return Err(invalid(
            "mutable_parameters",
            "MODIFY_VOLUME is not offered",
        ));
    }
    Ok((wanted, range, Parameters::read(&req.parameters)?))
}

/// A resolved content source.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Source {
    volume: String,
    snapshot: Option<String>,
    size: u64,
}

/// A volume's size in bytes, from its recorded size (0 when it does not parse).
fn size_of(config: &VolumeConfig) -> u64 {
    crate::model::parse_size(&config.size).unwrap_or(0)
}

/// Who asked: `csi:pvc/NS/NAME/<uuid>` when the external-provisioner passes the claim,
/// otherwise `csi:<method>/<uuid>`.
pub(super) fn request_ctx(method: &str, claim: Option<&(String, String)>) -> RequestCtx {
    let id = uuid::Uuid::new_v4();
    RequestCtx::new(match claim {
        Some((ns, name)) => format!("csi:pvc/{ns}/{name}/{id}"),
        None => format!("csi:{method}/{id}"),
    })
}

fn unimplemented(method: &str) -> Status {
    Status::unimplemented(format!(
        "{method} is not offered by storch (see ControllerGetCapabilities)"
    ))
}

#[tonic::async_trait]
impl Controller for ControllerService {
    async fn create_volume(
        &self,
        r: Request<CreateVolumeRequest>,
    ) -> Result<Response<CreateVolumeResponse>, Status> {
        observed("CreateVolume", self.create_volume(r.into_inner())).await
    }

    async fn delete_volume(
        &self,
        r: Request<DeleteVolumeRequest>,
    ) -> Result<Response<DeleteVolumeResponse>, Status> {
        observed("DeleteVolume", self.delete_volume(r.into_inner())).await
    }

    async fn controller_publish_volume(
        &self,
        r: Request<ControllerPublishVolumeRequest>,
    ) -> Result<Response<ControllerPublishVolumeResponse>, Status> {
        observed("ControllerPublishVolume", self.publish(r.into_inner())).await
    }

    async fn controller_unpublish_volume(
        &self,
        r: Request<ControllerUnpublishVolumeRequest>,
    ) -> Result<Response<ControllerUnpublishVolumeResponse>, Status> {
        observed("ControllerUnpublishVolume", self.unpublish(r.into_inner())).await
    }

    async fn validate_volume_capabilities(
        &self,
        r: Request<ValidateVolumeCapabilitiesRequest>,
    ) -> Result<Response<ValidateVolumeCapabilitiesResponse>, Status> {
        observed("ValidateVolumeCapabilities", async {
            self.validate(r.into_inner())
        })
        .await
    }

    async fn list_volumes(
        &self,
        r: Request<ListVolumesRequest>,
    ) -> Result<Response<ListVolumesResponse>, Status> {
        observed("ListVolumes", async { self.list_volumes(r.into_inner()) }).await
    }

    async fn get_capacity(
        &self,
        r: Request<GetCapacityRequest>,
    ) -> Result<Response<GetCapacityResponse>, Status> {
        observed("GetCapacity", self.get_capacity(r.into_inner())).await
    }

    async fn controller_get_capabilities(
        &self,
        _r: Request<ControllerGetCapabilitiesRequest>,
    ) -> Result<Response<ControllerGetCapabilitiesResponse>, Status> {
        observed("ControllerGetCapabilities", async {
            let capabilities = CAPABILITIES
                .iter()
                .map(|t| ControllerServiceCapability {
                    r#type: Some(controller_service_capability::Type::Rpc(
                        controller_service_capability::Rpc { r#type: *t as i32 },
                    )),
                })
                .collect();
            Ok(ControllerGetCapabilitiesResponse { capabilities })
        })
        .await
    }

    async fn create_snapshot(
        &self,
        r: Request<CreateSnapshotRequest>,
    ) -> Result<Response<CreateSnapshotResponse>, Status> {
        observed("CreateSnapshot", self.create_snapshot(r.into_inner())).await
    }

    async fn delete_snapshot(
        &self,
        r: Request<DeleteSnapshotRequest>,
    ) -> Result<Response<DeleteSnapshotResponse>, Status> {
        observed("DeleteSnapshot", self.delete_snapshot(r.into_inner())).await
    }

    async fn list_snapshots(
        &self,
        r: Request<ListSnapshotsRequest>,
    ) -> Result<Response<ListSnapshotsResponse>, Status> {
        observed("ListSnapshots", async {
            self.list_snapshots(r.into_inner())
        })
        .await
    }

    async fn get_snapshot(
        &self,
        _r: Request<GetSnapshotRequest>,
    ) -> Result<Response<GetSnapshotResponse>, Status> {
        observed("GetSnapshot", async { Err(unimplemented("GetSnapshot")) }).await
    }

    async fn controller_expand_volume(
        &self,
        r: Request<ControllerExpandVolumeRequest>,
    ) -> Result<Response<ControllerExpandVolumeResponse>, Status> {
        observed("ControllerExpandVolume", self.expand(r.into_inner())).await
    }

    async fn controller_get_volume(
        &self,
        r: Request<ControllerGetVolumeRequest>,
    ) -> Result<Response<ControllerGetVolumeResponse>, Status> {
        observed("ControllerGetVolume", async {
            self.get_volume(r.into_inner())
        })
        .await
    }

    async fn controller_modify_volume(
        &self,
        _r: Request<ControllerModifyVolumeRequest>,
    ) -> Result<Response<ControllerModifyVolumeResponse>, Status> {
        observed("ControllerModifyVolume", async {
            Err(unimplemented("ControllerModifyVolume"))
        })
        .await
    }
}
