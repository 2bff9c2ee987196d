//! Virtual volume actors: one per volume while it has work, activated on demand through the
//! directory in `Shared::volumes` and stopped when idle. A volume's state lives in the
//! projection, so an actor can be dropped and re-created at any time; the actor exists to
//! serialise every operation on one volume (create, delete, reconcile).

use std::sync::Arc;
use std::time::{Duration, Instant};

use actix::prelude::*;
use tracing::Instrument;

use super::backend::{Call, CallOutput, DriverCall, backoff};
use super::handle::{CoreError, RequestCtx};
use super::shared::Shared;
use crate::drivers::{CloneRequest, CreateRequest, DriverError, VolumeInfo};
use crate::events::{BackendEvent, Event, VolumeEvent};
use crate::model::{Offer, PoolRef, Protocol, VolumeConfig};
use crate::projections::{VolumeRecord, VolumeState};

#[derive(Message)]
#[rtype(result = "Result<(), CoreError>")]
pub(crate) struct CreateVolume {
    pub ctx: RequestCtx,
    pub config: VolumeConfig,
    pub size_bytes: u64,
}

#[derive(Message)]
#[rtype(result = "Result<(), CoreError>")]
pub(crate) struct DeleteVolume {
    pub ctx: RequestCtx,
}

/// Finish what a crash interrupted: an open create intent or a pending delete.
#[derive(Message)]
#[rtype(result = "()")]
pub(crate) struct Reconcile;

pub(crate) struct VolumeActor {
    name: String,
    shared: Arc<Shared>,
    last_active: Instant,
    /// A retry (delete or reconcile) is scheduled: stay alive.
    retry_pending: bool,
    attempts: u32,
}

impl VolumeActor {
    fn touch(&mut self) {
        self.last_active = Instant::now();
    }

    fn schedule_retry(&mut self, ctx: &mut Context<Self>) {
        self.attempts += 1;
        self.retry_pending = true;
        let delay = backoff(self.attempts);
        ctx.run_later(delay, |act, ctx| {
            act.retry_pending = false;
            ctx.notify(Reconcile);
        });
    }
}

impl Actor for VolumeActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        let idle = self.shared.opts.volume_idle;
        ctx.run_interval(idle.max(Duration::from_millis(10)) / 2, move |act, ctx| {
            if act.retry_pending || act.last_active.elapsed() < idle {
                return;
            }
            let me = ctx.address();
            let mut dir = act.shared.volumes.lock().unwrap_or_else(|e| e.into_inner());
            if dir.get(&act.name).is_some_and(|a| *a == me) {
                dir.remove(&act.name);
            }
            drop(dir);
            ctx.stop();
        });
    }
}

/// Sends a message to the volume's actor, activating it if needed; retries once per stale
/// address (an actor that stopped between lookup and send).
pub(crate) async fn send<M>(
    shared: &Arc<Shared>,
    name: &str,
    make: impl Fn() -> M,
) -> Result<M::Result, CoreError>
where
    M: Message + Send + 'static,
    M::Result: Send,
    VolumeActor: Handler<M>,
{
    for _ in 0..8 {
        let addr = activate(shared, name);
        match addr.send(make()).await {
            Ok(r) => return Ok(r),
            Err(_) => {
                let mut dir = shared.volumes.lock().unwrap_or_else(|e| e.into_inner());
                if dir.get(name).is_some_and(|a| *a == addr) {
                    dir.remove(name);
                }
            }
        }
    }
    Err(CoreError::Unavailable(format!(
        "volume {name} is busy; try again"
    )))
}

/// The live actor for `name`, started in the actor arbiter if there is none.
pub(crate) fn activate(shared: &Arc<Shared>, name: &str) -> Addr<VolumeActor> {
    let mut dir = shared.volumes.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(a) = dir.get(name)
        && a.connected()
    {
        return a.clone();
    }
    let actor = VolumeActor {
        name: name.to_string(),
        shared: shared.clone(),
        last_active: Instant::now(),
        retry_pending: false,
        attempts: 0,
    };
    let addr = VolumeActor::start_in_arbiter(&shared.arbiter, move |_| actor);
    dir.insert(name.to_string(), addr.clone());
    addr
}

impl Handler<DeleteVolume> for VolumeActor {
    type Result = AtomicResponse<Self, Result<(), CoreError>>;

    fn handle(&mut self, msg: DeleteVolume, _ctx: &mut Self::Context) -> Self::Result {
        self.touch();
        let shared = self.shared.clone();
        let name = self.name.clone();
        AtomicResponse::new(Box::pin(
            {
                let span = tracing::info_span!("volume", volume = %name, request_id = %msg.ctx.request_id, op = "delete");
                async move { delete(&shared, &name, &msg.ctx.request_id).await }.instrument(span)
            }
                .into_actor(self)
                .map(|res, act, ctx| {
                    act.touch();
                    match res {
                        Ok(()) => act.attempts = 0,
                        Err(DeleteError::Retry(e)) => {
                            if !act.retry_pending {
                                act.schedule_retry(ctx);
                            }
                            return Err(e);
                        }
                        Err(DeleteError::Final(e)) => return Err(e),
                    }
                    Ok(())
                }),
        ))
    }
}

impl Handler<Reconcile> for VolumeActor {
    type Result = AtomicResponse<Self, ()>;

    fn handle(&mut self, _msg: Reconcile, _ctx: &mut Self::Context) -> Self::Result {
        self.touch();
        let shared = self.shared.clone();
        let name = self.name.clone();
        AtomicResponse::new(Box::pin(
            {
                let span = tracing::info_span!("volume", volume = %name, request_id = "reconcile", op = "reconcile");
                async move { reconcile(&shared, &name).await }.instrument(span)
            }
                .into_actor(self)
                .map(|retry, act, ctx| {
                    act.touch();
                    if retry {
                        if !act.retry_pending {
                            act.schedule_retry(ctx);
                        }
                    } else {
                        act.attempts = 0;
                    }
                }),
        ))
    }
}

/// Refuses an operation the volume's pool does not offer (`snapshots`, `clones`): a pool that
/// offers `false` refuses here; a pool that says nothing about it leaves it to the driver
/// (Trident never checked, and fake pools often omit these offers).
fn require_offer(shared: &Shared, pool: &PoolRef, attribute: &str) -> Result<(), CoreError> {
    let offer = shared.projection.read(|s| {
        s.backends
            .get(&pool.backend)
            .and_then(|b| b.pools.iter().find(|p| p.name == pool.pool))
            .map(|p| p.offers.get(attribute).cloned())
    });
    match offer {
        Some(Some(Offer::Bool(false))) => Err(CoreError::Failed(format!(
            "pool {} of backend {} does not offer {attribute}",
            pool.pool, pool.backend
        ))),
        _ => Ok(()),
    }
}

fn record(shared: &Shared, name: &str) -> Option<VolumeRecord> {
    shared.projection.read(|s| s.volumes.get(name).cloned())
}

async fn call(shared: &Shared, backend: &str, c: DriverCall) -> Result<CallOutput, DriverError> {
    let slot = shared
        .backend(backend)
        .ok_or_else(|| DriverError::Unavailable(format!("backend {backend} is not running")))?;
    slot.addr
        .send(Call(c))
        .await
        .map_err(|_| DriverError::Unavailable(format!("backend {backend} is not running")))?
}

/// The array-side name of a volume on a backend (trident-compat §4.8).
fn internal_name(shared: &Shared, backend: &str, volume: &str) -> Result<String, DriverError> {
    shared
        .backend(backend)
        .and_then(|slot| slot.status.driver().map(|d| d.internal_name(volume)))
        .ok_or_else(|| DriverError::Unavailable(format!("backend {backend} is not running")))
}

async fn create_volume(
    shared: &Arc<Shared>,
    name: &str,
    msg: CreateVolume,
) -> Result<(), CoreError> {
    create(shared, name, &msg.ctx, msg.config, msg.size_bytes).await
}

/// intent → plan → attempts → outcome; returns once the outcome is durable.
async fn create(
    shared: &Arc<Shared>,
    name: &str,
    ctx: &RequestCtx,
    mut config: VolumeConfig,
    size_bytes: u64,
) -> Result<(), CoreError> {
    if record(shared, name).is_some() {
        return Err(CoreError::AlreadyExists(format!(
            "volume {name} already exists"
        )));
    }
    config.version = "1".to_string();
    config.access_information = Default::default();
    let seed: u64 = rand::random();
    let (config, size_bytes, candidates) = if config.clone_source_volume.is_empty() {
        let candidates =
            shared.plan_placement(&config.storage_class, config.protocol, size_bytes, seed)?;
        (config, size_bytes, candidates)
    } else {
        clone_plan(shared, config)?
    };
    // Until the intent is durable and the call reaches the backend, the plan's first choice
    // counts in that backend's load (concurrent plans see it).
    let planned = candidates.first().and_then(|p| shared.planned(&p.backend));
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
/// source's pool (trident-compat §4.10).
fn clone_plan(
    shared: &Shared,
    request: VolumeConfig,
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
        super::shared::explain_hint(&config.storage_class)
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
    let online = shared
        .projection
        .read(|s| s.backends.get(&pool.backend).map(|b| b.online));
    if online != Some(true) {
        return Err(DriverError::Unavailable(format!(
            "backend {} is offline; no new volumes land there",
            pool.backend
        )));
    }
    let internal = internal_name(shared, &pool.backend, name)?;
    let requests = if config.storage_class.is_empty() {
        Default::default()
    } else {
        shared
            .projection
            .read(|s| {
                s.classes
                    .get(&config.storage_class)
                    .map(|c| c.attributes.clone())
            })
            .unwrap_or_default()
    };
    let c = if config.clone_source_volume.is_empty() {
        DriverCall::Create(CreateRequest {
            internal_name: internal.clone(),
            pool: pool.pool.clone(),
            size_bytes,
            config: config.clone(),
            requests,
        })
    } else {
        DriverCall::Clone(CloneRequest {
            internal_name: internal.clone(),
            source_internal_name: config.clone_source_volume_internal.clone(),
            source_snapshot: Some(config.clone_source_snapshot.clone()).filter(|s| !s.is_empty()),
            config: config.clone(),
        })
    };
    match call(shared, &pool.backend, c).await {
        Ok(CallOutput::Volume(info)) => Ok((info, false)),
        Ok(other) => Err(DriverError::Other(format!(
            "unexpected driver answer {other:?}"
        ))),
        Err(
            e @ (DriverError::AlreadyExists(_)
            | DriverError::Unavailable(_)
            | DriverError::Other(_)),
        ) => match call(shared, &pool.backend, DriverCall::Get(internal)).await {
            Ok(CallOutput::MaybeVolume(Some(info))) => Ok((info, true)),
            _ => Err(e),
        },
        Err(e) => Err(e),
    }
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

enum DeleteError {
    /// Recorded as `VolumeDeleteFailed`; the actor retries with backoff.
    Retry(CoreError),
    Final(CoreError),
}

impl From<CoreError> for DeleteError {
    fn from(e: CoreError) -> Self {
        DeleteError::Final(e)
    }
}

/// `VolumeDeleteRequested` → idempotent destroy → `VolumeDeleted` (and the backend purged if
/// it was offline and this was its last volume).
async fn delete(shared: &Arc<Shared>, name: &str, request_id: &str) -> Result<(), DeleteError> {
    let rec = record(shared, name)
        .ok_or_else(|| CoreError::NotFound(format!("volume {name} not found")))?;
    if rec.state != VolumeState::Deleting {
        let ev = Event::volume(name, VolumeEvent::DeleteRequested);
        shared.append(request_id, vec![ev]).await?;
    }
    // Where the volume may be: its backend, or while creating every planned candidate's.
    let mut backends: Vec<String> = if rec.backend().is_empty() {
        rec.candidates().iter().map(|p| p.backend.clone()).collect()
    } else {
        vec![rec.backend().to_string()]
    };
    let recorded_internal = rec.config().internal_name;
    backends.dedup();
    for backend in &backends {
        let result = async {
            let internal = if rec.backend() == backend && !recorded_internal.is_empty() {
                recorded_internal.clone()
            } else {
                internal_name(shared, backend, name)?
            };
            call(shared, backend, DriverCall::Destroy(internal)).await
        }
        .await;
        if let Err(e) = result {
            let attempt = rec.delete_attempts() + 1;
            let error = format!("deleting volume {name} on backend {backend} failed: {e}");
            let ev = Event::volume(
                name,
                VolumeEvent::DeleteFailed {
                    error: error.clone(),
                    attempt,
                },
            );
            shared.append(request_id, vec![ev]).await?;
            tracing::warn!(volume = %name, %backend, error = %e, attempt, "volume delete failed; will retry");
            return Err(DeleteError::Retry(CoreError::Failed(format!(
                "{error}; storch keeps retrying in the background"
            ))));
        }
    }
    let mut events = vec![Event::volume(name, VolumeEvent::Deleted)];
    let purge = shared.projection.read(|s| {
        s.backends
            .get(rec.backend())
            .is_some_and(|b| !b.online && b.volumes.len() == 1 && b.volumes.contains(name))
    });
    if purge {
        events.push(Event::backend(rec.backend(), BackendEvent::Purged));
    }
    shared.append(request_id, events).await?;
    if purge {
        super::handle::stop_backend(shared, rec.backend());
    }
    Ok(())
}

/// Completes an interrupted create or delete. Returns true when it must be retried later
/// (a backend is not available yet).
async fn reconcile(shared: &Arc<Shared>, name: &str) -> bool {
    let Some(rec) = record(shared, name) else {
        return false;
    };
    match rec.state {
        VolumeState::Online => reconcile_snapshots(shared, name, &rec).await,
        VolumeState::Deleting => delete(shared, name, "reconcile").await.is_err(),
        VolumeState::Creating => match reconcile_create(shared, name, &rec).await {
            Ok(()) => false,
            Err(e) => {
                tracing::info!(volume = %name, error = %e, "reconciling an interrupted create; will retry");
                true
            }
        },
    }
}

async fn reconcile_create(
    shared: &Arc<Shared>,
    name: &str,
    rec: &VolumeRecord,
) -> Result<(), CoreError> {
    let config = rec.config();
    // Adopt the volume if any planned pool's backend already holds it.
    for pool in rec.candidates() {
        let found = async {
            let internal = internal_name(shared, &pool.backend, name)?;
            call(shared, &pool.backend, DriverCall::Get(internal)).await
        }
        .await;
        match found {
            Ok(CallOutput::MaybeVolume(Some(info))) => {
                tracing::info!(volume = %name, backend = %pool.backend, "adopting a volume created before a restart");
                return record_created(shared, name, "reconcile", &config, pool, info, true).await;
            }
            Ok(_) => {}
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
    pub size: String,
    pub size_bytes: u64,
}

/// Runs a one-shot operation atomically on the actor (no retries of its own).
macro_rules! atomic_op {
    ($msg:ty, $run:expr) => {
        impl Handler<$msg> for VolumeActor {
            type Result = AtomicResponse<Self, Result<(), CoreError>>;

            fn handle(&mut self, msg: $msg, _ctx: &mut Self::Context) -> Self::Result {
                self.touch();
                let shared = self.shared.clone();
                let name = self.name.clone();
                AtomicResponse::new(Box::pin(
                    {
                        let span = tracing::info_span!("volume", volume = %name,
                            request_id = %msg.ctx.request_id, op = stringify!($run));
                        async move { $run(&shared, &name, msg).await }.instrument(span)
                    }
                        .into_actor(self)
                        .map(|res, act, _| {
                            act.touch();
                            res
                        }),
                ))
            }
        }
    };
}

atomic_op!(CreateVolume, create_volume);
atomic_op!(CreateSnapshot, create_snapshot);
atomic_op!(DeleteSnapshot, delete_snapshot);
atomic_op!(ResizeVolume, resize);

/// The volume, which must be online, and where it lives.
fn online(shared: &Shared, name: &str) -> Result<(VolumeRecord, PoolRef), CoreError> {
    let rec = record(shared, name)
        .ok_or_else(|| CoreError::NotFound(format!("volume {name} was not found")))?;
    if rec.state != VolumeState::Online {
        return Err(CoreError::Failed(format!(
            "volume {name} is {}; try again when it is online",
            rec.state.as_str()
        )));
    }
    let pool = PoolRef::new(rec.backend(), rec.pool());
    Ok((rec, pool))
}

/// `SnapshotRequested` → driver → `SnapshotCreated` | `SnapshotCreationFailed`.
async fn create_snapshot(
    shared: &Arc<Shared>,
    name: &str,
    msg: CreateSnapshot,
) -> Result<(), CoreError> {
    let (rec, pool) = online(shared, name)?;
    if rec.snapshots().contains_key(&msg.snapshot) {
        return Err(CoreError::AlreadyExists(format!(
            "snapshot {} of volume {name} already exists",
            msg.snapshot
        )));
    }
    require_offer(shared, &pool, "snapshots")?;
    let rid = &msg.ctx.request_id;
    let requested = VolumeEvent::SnapshotRequested {
        snapshot: msg.snapshot.clone(),
    };
    shared
        .append(rid, vec![Event::volume(name, requested)])
        .await?;
    finish_snapshot(shared, name, rid, &rec, &pool, &msg.snapshot).await
}

async fn finish_snapshot(
    shared: &Shared,
    name: &str,
    rid: &str,
    rec: &VolumeRecord,
    pool: &PoolRef,
    snapshot: &str,
) -> Result<(), CoreError> {
    let internal = rec.config().internal_name;
    let made = call(
        shared,
        &pool.backend,
        DriverCall::CreateSnapshot(internal.clone(), snapshot.into()),
    )
    .await;
    let made = match made {
        Ok(CallOutput::Snapshot(info)) => Ok(info),
        Ok(other) => Err(DriverError::Other(format!(
            "unexpected driver answer {other:?}"
        ))),
        // Adopt a snapshot that the array already has (an interrupted earlier attempt).
        Err(
            e @ (DriverError::AlreadyExists(_)
            | DriverError::Unavailable(_)
            | DriverError::Other(_)),
        ) => match call(shared, &pool.backend, DriverCall::ListSnapshots(internal)).await {
            Ok(CallOutput::Snapshots(list)) => {
                list.into_iter().find(|s| s.name == snapshot).ok_or(e)
            }
            _ => Err(e),
        },
        Err(e) => Err(e),
    };
    match made {
        Ok(info) => {
            let ev = VolumeEvent::SnapshotCreated {
                snapshot: snapshot.into(),
                created_ms: info.created_ms,
                size_bytes: info.size_bytes,
            };
            shared.append(rid, vec![Event::volume(name, ev)]).await?;
            Ok(())
        }
        Err(e) if e.is_retryable() => Err(CoreError::Unavailable(format!(
            "snapshot {snapshot} of volume {name}: {e}; it is retried in the background"
        ))),
        Err(e) => {
            let ev = VolumeEvent::SnapshotCreationFailed {
                snapshot: snapshot.into(),
                error: e.to_string(),
            };
            shared.append(rid, vec![Event::volume(name, ev)]).await?;
            Err(driver_failure(
                e,
                format!("creating snapshot {snapshot} of volume {name} failed"),
            ))
        }
    }
}

/// Maps a driver refusal to the error a client sees.
fn driver_failure(e: DriverError, what: String) -> CoreError {
    match e {
        DriverError::NotFound(m) => CoreError::NotFound(format!("{what}: {m}")),
        DriverError::AlreadyExists(m) => CoreError::AlreadyExists(format!("{what}: {m}")),
        DriverError::Invalid(m) => CoreError::Invalid(format!("{what}: {m}")),
        DriverError::Unavailable(m) => CoreError::Unavailable(format!("{what}: {m}")),
        other => CoreError::Failed(format!("{what}: {other}")),
    }
}

/// Idempotent destroy on the array, then `SnapshotDeleted`.
async fn delete_snapshot(
    shared: &Arc<Shared>,
    name: &str,
    msg: DeleteSnapshot,
) -> Result<(), CoreError> {
    let (rec, pool) = online(shared, name)?;
    if !rec.snapshots().contains_key(&msg.snapshot) {
        return Err(CoreError::NotFound(format!(
            "snapshot {} of volume {name} not found",
            msg.snapshot
        )));
    }
    let c = DriverCall::DeleteSnapshot(rec.config().internal_name, msg.snapshot.clone());
    call(shared, &pool.backend, c).await.map_err(|e| {
        driver_failure(
            e,
            format!("deleting snapshot {} of volume {name} failed", msg.snapshot),
        )
    })?;
    let ev = VolumeEvent::SnapshotDeleted {
        snapshot: msg.snapshot,
    };
    shared
        .append(&msg.ctx.request_id, vec![Event::volume(name, ev)])
        .await?;
    Ok(())
}

/// Grows the volume on the array, then `VolumeResized` (a retry after a crash in between is
/// harmless: resizing to the same size again is idempotent).
async fn resize(shared: &Arc<Shared>, name: &str, msg: ResizeVolume) -> Result<(), CoreError> {
    let (rec, pool) = online(shared, name)?;
    if msg.size_bytes < rec.size_bytes {
        return Err(CoreError::Invalid(format!(
            "size: volume {name} is {} bytes; shrinking to {} is not supported",
            rec.size_bytes, msg.size_bytes
        )));
    }
    if msg.size_bytes == rec.size_bytes {
        return Ok(());
    }
    let c = DriverCall::Resize(rec.config().internal_name, msg.size_bytes);
    call(shared, &pool.backend, c)
        .await
        .map_err(|e| driver_failure(e, format!("resizing volume {name} failed")))?;
    let ev = VolumeEvent::Resized {
        size: msg.size,
        size_bytes: msg.size_bytes,
    };
    shared
        .append(&msg.ctx.request_id, vec![Event::volume(name, ev)])
        .await?;
    Ok(())
}

/// Finishes snapshots whose intent was recorded but whose outcome was not.
async fn reconcile_snapshots(shared: &Arc<Shared>, name: &str, rec: &VolumeRecord) -> bool {
    let pool = PoolRef::new(rec.backend(), rec.pool());
    let mut retry = false;
    for (snap, s) in rec.snapshots() {
        if s.created_ms.is_none()
            && let Err(CoreError::Unavailable(_)) =
                finish_snapshot(shared, name, "reconcile", rec, &pool, snap).await
        {
            retry = true;
        }
    }
    retry
}
