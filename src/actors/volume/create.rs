//! Creating a volume (or a clone): intent → plan → attempts → outcome, and finishing a create
//! a crash interrupted.

use std::sync::Arc;

use super::lookup::{driver, internal_name, record, require_offer};
use crate::actors::error::{CoreError, RequestCtx};
use crate::actors::messages::CreateVolume;
use crate::actors::placement::{self, Planned};
use crate::actors::shared::Shared;
use crate::drivers::{
    CloneRequest, CreateRequest, DriverError, PlannedVolume, StorageDriver, VolumeInfo,
};
use crate::events::{Event, VolumeEvent};
use crate::model::{PoolRef, Protocol, TopologyRequirement, VolumeConfig, VolumeRequest};
use crate::projections::{VolumeRecord, VolumeState};

pub(super) async fn create_volume(
    shared: &Arc<Shared>,
    name: &str,
    msg: CreateVolume,
) -> Result<(), CoreError> {
    create(shared, name, &msg.ctx, msg.request).await
}

/// intent → plan → attempts → outcome; returns once the outcome is durable.
async fn create(
    shared: &Arc<Shared>,
    name: &str,
    ctx: &RequestCtx,
    request: VolumeRequest,
) -> Result<(), CoreError> {
    if record(shared, name).is_some() {
        return Err(CoreError::AlreadyExists(format!(
            "volume {name} already exists"
        )));
    }
    // A clone's size comes from its source; any other request has one.
    let size = request
        .size_bytes()
        .filter(|_| request.clone_source().is_none());
    let topology = request.topology().cloned();
    let mut config = request.into_config();
    config.version = "1".to_string();
    config.access_information = Default::default();
    let seed: u64 = rand::random();
    let (config, size_bytes, candidates) = if let Some(size_bytes) = size {
        let candidates = placement::plan(
            shared,
            &config.storage_class,
            config.protocol,
            size_bytes,
            seed,
            topology.as_ref(),
        )?;
        (config, size_bytes, candidates)
    } else {
        clone_plan(shared, config, topology.as_ref())?
    };
    // Until the intent is durable and the call reaches the backend, the plan's first choice
    // counts in that backend's load (concurrent plans see it).
    let planned = candidates
        .first()
        .and_then(|p| Planned::onto(shared, &p.backend));
    // A name every candidate array would refuse is bad input, not a placement failure.
    let shortest = candidates
        .iter()
        .filter_map(|p| internal_name(shared, &p.backend, name).ok())
        .map(|n| n.len())
        .min()
        .unwrap_or(0);
    if shortest > crate::model::MAX_NAME_LEN {
        return Err(CoreError::Invalid(format!(
            "name is too long: the array-side name would be {shortest} bytes, at most {} are allowed",
            crate::model::MAX_NAME_LEN
        )));
    }
    let events = vec![
        Event::volume(
            name,
            VolumeEvent::Requested {
                config: Box::new(config.clone()),
                size_bytes,
            },
        ),
        Event::volume(
            name,
            VolumeEvent::PlacementPlanned {
                candidates: candidates.clone(),
                seed,
            },
        ),
    ];
    shared.append(&ctx.request_id, events).await?;
    drop(planned);
    place(
        shared,
        name,
        &ctx.request_id,
        &config,
        size_bytes,
        &candidates,
    )
    .await
}

/// A clone: a deep copy of the source's config with the request's clone fields, on the
/// source's pool (docs/trident-contract.md#clones).
fn clone_plan(
    shared: &Shared,
    request: VolumeConfig,
    topology: Option<&TopologyRequirement>,
) -> Result<(VolumeConfig, u64, Vec<PoolRef>), CoreError> {
    let source_name = request.clone_source_volume.clone();
    let source = record(shared, &source_name)
        .filter(|s| s.state == VolumeState::Online)
        .ok_or_else(|| CoreError::NotFound(format!("source volume not found: {source_name}")))?;
    if source.orphaned {
        tracing::warn!(source = %source_name, "cloning an orphaned volume");
    }
    let mut config = source.config();
    config.name = request.name;
    config.split_on_clone = request.split_on_clone;
    config.clone_source_volume = source_name;
    config.clone_source_volume_internal = std::mem::take(&mut config.internal_name);
    config.clone_source_snapshot = request.clone_source_snapshot;
    config.qos = request.qos;
    config.qos_type = request.qos_type;
    config.access_information = Default::default();
    config.version = "1".to_string();
    if !config.clone_source_snapshot.is_empty()
        && source
            .snapshots()
            .get(&config.clone_source_snapshot)
            .is_none_or(|s| s.created_ms.is_none())
    {
        return Err(CoreError::NotFound(format!(
            "snapshot {} of volume {} not found",
            config.clone_source_snapshot, config.clone_source_volume
        )));
    }
    let pool = PoolRef::new(source.backend(), source.pool());
    require_offer(shared, &pool, "clones")?;
    let segments = shared.projection.read(|s| {
        s.backends
            .get(&pool.backend)
            .map(|b| b.topology.clone())
            .unwrap_or_default()
    });
    if let Some(why) = placement::outside(&segments, topology) {
        return Err(CoreError::Failed(format!(
            "{}: a clone lives on its source's pool {pool}, {why}",
            placement::OUTSIDE_TOPOLOGY
        )));
    }
    Ok((config, source.size_bytes, vec![pool]))
}

/// Tries the candidates in order (skipping ones already failed), recording each outcome.
async fn place(
    shared: &Arc<Shared>,
    name: &str,
    request_id: &str,
    config: &VolumeConfig,
    size_bytes: u64,
    candidates: &[PoolRef],
) -> Result<(), CoreError> {
    let already_failed = record(shared, name)
        .map(|r| r.failed().to_vec())
        .unwrap_or_default();
    let mut errors: Vec<String> = already_failed
        .iter()
        .map(|(p, e)| attempt_error(name, p, e))
        .collect();
    for pool in candidates {
        if already_failed.iter().any(|(p, _)| p == pool) {
            continue;
        }
        match attempt(shared, name, config, size_bytes, pool).await {
            Ok((info, adopted)) => {
                return record_created(shared, name, request_id, config, pool, info, adopted).await;
            }
            Err(e) => {
                let msg = e.to_string();
                errors.push(attempt_error(name, pool, &msg));
                let ev = Event::volume(
                    name,
                    VolumeEvent::PlacementAttemptFailed {
                        pool: pool.clone(),
                        error: msg,
                    },
                );
                shared.append(request_id, vec![ev]).await?;
            }
        }
    }
    let ev = Event::volume(
        name,
        VolumeEvent::CreationFailed {
            errors: errors.clone(),
        },
    );
    shared.append(request_id, vec![ev]).await?;
    Err(CoreError::Failed(format!(
        "encountered error(s) in creating the volume: {}; {}",
        errors.join(", "),
        placement::explain_hint(&config.storage_class)
    )))
}

fn attempt_error(name: &str, pool: &PoolRef, error: &str) -> String {
    format!(
        "[Failed to create volume {name} on storage pool {} from backend {}: {error}]",
        pool.pool, pool.backend
    )
}

/// One attempt on one pool. A create that reports an error but left the volume on the array
/// (a timeout that succeeded, a duplicate from an interrupted attempt) is adopted.
async fn attempt(
    shared: &Shared,
    name: &str,
    config: &VolumeConfig,
    size_bytes: u64,
    pool: &PoolRef,
) -> Result<(VolumeInfo, bool), DriverError> {
    let (online, suspended) = shared
        .projection
        .read(|s| {
            s.backends
                .get(&pool.backend)
                .map(|b| (b.online, b.suspended))
        })
        .unwrap_or((false, false));
    if !online {
        return Err(DriverError::Unavailable(format!(
            "backend {} is offline; no new volumes land there",
            pool.backend
        )));
    }
    // A clone lives on its source's pool, so a suspended backend still makes its volumes'
    // clones; a plan made before the suspension is not carried out there.
    if suspended && config.clone_source_volume.is_empty() {
        return Err(DriverError::Unavailable(format!(
            "backend {} is {}",
            pool.backend,
            placement::SUSPENDED
        )));
    }
    let planned = planned_volume(shared, name, config, size_bytes, pool)?;
    let driver = driver(shared, &pool.backend)?;
    let created = match &planned {
        PlannedVolume::Create(req) => driver.create(req).await,
        PlannedVolume::Clone(req) => driver.clone_volume(req).await,
    };
    match created {
        Ok(info) => Ok((info, false)),
        Err(
            e @ (DriverError::AlreadyExists(_)
            | DriverError::Unavailable(_)
            | DriverError::Other(_)),
        ) => match driver.adopt(&planned).await {
            Ok(Some(info)) => Ok((info, true)),
            // The volume found is not storch's or not as planned: that refusal says why.
            Err(refused @ (DriverError::AlreadyExists(_) | DriverError::Conflict(_))) => {
                Err(refused)
            }
            _ => Err(e),
        },
        Err(e) => Err(e),
    }
}

/// The create or clone of `name` on `pool` as planned: what an attempt asks the driver for,
/// and what a volume found there must match to be adopted.
fn planned_volume(
    shared: &Shared,
    name: &str,
    config: &VolumeConfig,
    size_bytes: u64,
    pool: &PoolRef,
) -> Result<PlannedVolume, DriverError> {
    let internal_name = internal_name(shared, &pool.backend, name)?;
    if !config.clone_source_volume.is_empty() {
        return Ok(PlannedVolume::Clone(CloneRequest {
            internal_name,
            source_internal_name: config.clone_source_volume_internal.clone(),
            source_snapshot: Some(config.clone_source_snapshot.clone()).filter(|s| !s.is_empty()),
            config: config.clone(),
        }));
    }
    let class = shared
        .projection
        .read(|s| s.classes.get(&config.storage_class).cloned())
        .unwrap_or_default();
    // The class's driver parameters go to the driver with its attribute requests (their
    // names never collide: a parameter is never a registered attribute).
    let parameters = crate::secrets::class_parameters(&shared.secrets, &class)
        .map_err(|e| DriverError::Other(format!("storage class {}: {e}", class.name)))?;
    let mut requests = class.attributes;
    requests.extend(
        parameters
            .into_iter()
            .map(|(k, v)| (k, crate::model::Request::String(v))),
    );
    Ok(PlannedVolume::Create(CreateRequest {
        internal_name,
        pool: pool.pool.clone(),
        size_bytes,
        config: config.clone(),
        requests,
    }))
}

async fn record_created(
    shared: &Shared,
    name: &str,
    request_id: &str,
    config: &VolumeConfig,
    pool: &PoolRef,
    info: VolumeInfo,
    adopted: bool,
) -> Result<(), CoreError> {
    let mut access = info.access;
    let secrets = shared
        .secrets
        .seal(&crate::secrets::split_access(&mut access));
    // An open request takes the backend's protocol; a backend without a fixed one (local,
    // fake with protocol "") makes such a volume a file volume, as its drivers do.
    let protocol = match config.protocol {
        Protocol::Any => match shared
            .projection
            .read(|s| s.backends.get(&pool.backend).map(|b| b.protocol))
        {
            Some(Protocol::Any) | None => Protocol::File,
            Some(p) => p,
        },
        p => p,
    };
    let pool = PoolRef::new(pool.backend.clone(), info.pool.clone());
    let ev = Event::volume(
        name,
        VolumeEvent::Created {
            pool,
            internal_name: info.internal_name,
            protocol,
            access: Box::new(access),
            secrets,
            adopted,
        },
    );
    shared.append(request_id, vec![ev]).await?;
    Ok(())
}

pub(super) async fn reconcile_create(
    shared: &Arc<Shared>,
    name: &str,
    rec: &VolumeRecord,
) -> Result<(), CoreError> {
    let config = rec.config();
    // Adopt the volume if any planned pool's backend already holds it as planned.
    for pool in rec.candidates() {
        let found = async {
            let planned = planned_volume(shared, name, &config, rec.size_bytes, pool)?;
            driver(shared, &pool.backend)?.adopt(&planned).await
        }
        .await;
        match found {
            Ok(Some(info)) => {
                tracing::info!(volume = %name, backend = %pool.backend, "adopting a volume created before a restart");
                return record_created(shared, name, "reconcile", &config, pool, info, true).await;
            }
            Ok(_) => {}
            // A volume of that name that is not storch's, or not as planned, stays as it is;
            // placement's attempt on that pool records the refusal.
            Err(e @ (DriverError::AlreadyExists(_) | DriverError::Conflict(_))) => {
                tracing::warn!(volume = %name, backend = %pool.backend, error = %e, "not adopting the volume found");
            }
            Err(e) => {
                return Err(CoreError::Unavailable(format!(
                    "backend {} cannot be asked about volume {name}: {e}",
                    pool.backend
                )));
            }
        }
    }
    // Nowhere: placement continues with the candidates not yet tried.
    match place(
        shared,
        name,
        "reconcile",
        &config,
        rec.size_bytes,
        rec.candidates(),
    )
    .await
    {
        Ok(()) | Err(CoreError::Failed(_)) => Ok(()),
        Err(e) => Err(e),
    }
}
