//! One volume against its array (drift reconciliation), and import: adopting an array volume
//! under this actor's volume name. Both run on the volume's actor, serialised with its create,
//! delete and resize.

use std::sync::Arc;

use super::lookup::{driver, driver_failure, record};
use crate::actors::drift::{CheckOnArray, ImportVolume, change, owners};
use crate::actors::error::CoreError;
use crate::actors::shared::{Shared, now_ms, read};
use crate::drivers::StorageDriver;
use crate::events::{DriftEvent, Event, VolumeEvent};
use crate::model::{ImportRequest, PoolRef, Protocol, VolumeConfig};
use crate::projections::VolumeState;

/// Looks the volume up on its array and records what differs: `VolumeMissing` when the array
/// lacks it, `VolumeFound` when a missing one is back, `VolumeChangedOnArray` when its size or
/// pool moved. A lookup that fails changes nothing.
pub(super) async fn check(
    shared: &Arc<Shared>,
    name: &str,
    msg: CheckOnArray,
) -> Result<Option<&'static str>, CoreError> {
    let Some(rec) = record(shared, name) else {
        return Ok(None);
    };
    if !matches!(rec.state, VolumeState::Online | VolumeState::Missing) {
        return Ok(None);
    }
    let internal = rec.config().internal_name;
    let found = async { driver(shared, rec.backend())?.get(&internal).await }
        .await
        .map_err(|e| {
            CoreError::Unavailable(format!("looking up volume {name} on its array failed: {e}"))
        })?;
    let how = msg.how;
    let mut events = Vec::new();
    match (&found, rec.state) {
        (None, VolumeState::Online) => events.push(DriftEvent::Missing {
            noticed_at: now_ms(),
            how,
        }),
        (Some(_), VolumeState::Missing) => events.push(DriftEvent::Found {
            noticed_at: now_ms(),
            how,
        }),
        _ => {}
    }
    if let Some(info) = &found
        && let Some((size_bytes, pool)) = change(rec.size_bytes, rec.pool(), info)
    {
        events.push(DriftEvent::ChangedOnArray {
            size_bytes,
            pool,
            how,
        });
    }
    let Some(first) = events.first().map(DriftEvent::kind) else {
        return Ok(None);
    };
    for e in &events {
        tracing::warn!(volume = %name, backend = %rec.backend(), "{}", e.summary(name));
    }
    let events = events
        .into_iter()
        .map(|d| Event::volume(name, VolumeEvent::Drift(d)))
        .collect();
    shared.append(&msg.ctx.request_id, events).await?;
    Ok(Some(first))
}

/// Adopts the array volume the request names under `name`. The same import again answers as
/// the first did; a name taken by another volume, an array volume another storch volume owns
/// (409), an unknown backend or array volume (404) and a class that does not match the
/// volume's pool (400, naming `storageClass`) are refused and change nothing.
pub(super) async fn import(
    shared: &Arc<Shared>,
    name: &str,
    msg: ImportVolume,
) -> Result<bool, CoreError> {
    let req = &msg.request;
    let backend = &req.handle.backend;
    if let Some(rec) = record(shared, name) {
        let same = rec.backend() == backend.as_str()
            && rec.config().internal_name == req.handle.internal_name
            && rec.config().storage_class == req.storage_class
            && rec.managed() == req.managed;
        if same {
            return Ok(false);
        }
        return Err(CoreError::AlreadyExists(format!(
            "volume {name} already exists"
        )));
    }
    if !shared.projection.read(|s| s.backends.contains_key(backend)) {
        return Err(CoreError::NotFound(format!(
            "backend {backend} was not found"
        )));
    }
    let driver = driver(shared, backend)
        .map_err(|e| driver_failure(e, format!("importing volume {}", req.handle.internal_name)))?;
    if let Some(owner) = owners(shared, backend, &*driver).get(&req.handle.internal_name) {
        return Err(CoreError::AlreadyExists(format!(
            "volume {} of backend {backend} is already owned by storch volume {owner}",
            req.handle.internal_name
        )));
    }
    let not_found = || {
        CoreError::NotFound(format!(
            "volume {} was not found on backend {backend}",
            req.handle.internal_name
        ))
    };
    let info = driver
        .get(&req.handle.internal_name)
        .await
        .map_err(|e| driver_failure(e, format!("looking up volume {}", req.handle.internal_name)))?
        .ok_or_else(not_found)?;
    if req.handle.pool.as_ref().is_some_and(|p| *p != info.pool) {
        return Err(not_found());
    }
    let pool = PoolRef::new(backend.clone(), info.pool.clone());
    check_class(shared, req, &pool)?;
    let mut access = info.access;
    let secrets = shared
        .secrets
        .seal(&crate::secrets::split_access(&mut access));
    let protocol = match shared
        .projection
        .read(|s| s.backends.get(backend).map(|b| b.protocol))
    {
        Some(Protocol::Any) | None => Protocol::File,
        Some(p) => p,
    };
    let config = VolumeConfig {
        version: "1".to_string(),
        name: name.to_string(),
        internal_name: info.internal_name.clone(),
        size: info.size_bytes.to_string(),
        protocol,
        storage_class: req.storage_class.clone(),
        ..VolumeConfig::default()
    };
    let ev = DriftEvent::Imported {
        config: Box::new(config),
        size_bytes: info.size_bytes,
        pool,
        protocol,
        access: Box::new(access),
        secrets,
        managed: req.managed,
    };
    tracing::info!(volume = %name, %backend, internal = %info.internal_name, managed = req.managed, "importing a volume");
    shared
        .append(
            &msg.ctx.request_id,
            vec![Event::volume(name, VolumeEvent::Drift(ev))],
        )
        .await?;
    Ok(true)
}

/// The class must exist and match the volume's pool.
fn check_class(shared: &Shared, req: &ImportRequest, pool: &PoolRef) -> Result<(), CoreError> {
    let class = &req.storage_class;
    let matched = read(&shared.classes).get(class).map(|c| c.matched.clone());
    let Some(matched) = matched else {
        return Err(CoreError::Invalid(format!(
            "storageClass: storage class {class} was not found"
        )));
    };
    if !matched.contains(pool) {
        return Err(CoreError::Invalid(format!(
            "storageClass: storage class {class} does not match pool {} of backend {} where the volume is",
            pool.pool, pool.backend
        )));
    }
    Ok(())
}
