//! One actor per backend: owns the driver, limits concurrent driver calls, initialises the
//! driver (with retries) and records pool changes.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use actix::prelude::*;
use tokio::sync::Semaphore;
use tracing::Instrument;

use super::handle::BackendState;
use super::shared::{BackendStatus, Shared, write};
use crate::drivers::{
    CloneRequest, CreateRequest, DriverError, SnapshotInfo, StorageDriver, VolumeInfo,
};
use crate::events::{BackendEvent, Event};

/// Concurrent driver calls per backend, unless its config says `concurrencyLimit`.
pub(crate) const DEFAULT_BACKEND_LIMIT: usize = 32;

/// The most concurrent driver calls a backend config may ask for.
const MAX_BACKEND_LIMIT: u64 = 10_000;

/// The backend config's `concurrencyLimit` (a storch extension): how many driver calls may run
/// on the array at once; the rest queue in the backend's actor.
pub(crate) fn concurrency_limit(doc: &serde_json::Value) -> Result<usize, String> {
    match doc.get("concurrencyLimit") {
        None | Some(serde_json::Value::Null) => Ok(DEFAULT_BACKEND_LIMIT),
        Some(v) => v
            .as_u64()
            .filter(|n| (1..=MAX_BACKEND_LIMIT).contains(n))
            .map(|n| n as usize)
            .ok_or_else(|| {
                format!("invalid value for concurrencyLimit: expected an integer from 1 to {MAX_BACKEND_LIMIT}")
            }),
    }
}

/// A driver operation, run under the backend's concurrency limit.
#[derive(Debug)]
pub(crate) enum DriverCall {
    Create(CreateRequest),
    Clone(CloneRequest),
    Get(String),
    Destroy(String),
    Resize(String, u64),
    CreateSnapshot(String, String),
    ListSnapshots(String),
    DeleteSnapshot(String, String),
}

impl DriverCall {
    fn kind(&self) -> &'static str {
        match self {
            DriverCall::Create(_) => "create",
            DriverCall::Clone(_) => "clone",
            DriverCall::Get(_) => "get",
            DriverCall::Destroy(_) => "destroy",
            DriverCall::Resize(..) => "resize",
            DriverCall::CreateSnapshot(..) => "create_snapshot",
            DriverCall::ListSnapshots(_) => "list_snapshots",
            DriverCall::DeleteSnapshot(..) => "delete_snapshot",
        }
    }
}

#[derive(Debug)]
pub(crate) enum CallOutput {
    Volume(VolumeInfo),
    MaybeVolume(Option<VolumeInfo>),
    Snapshot(SnapshotInfo),
    Snapshots(Vec<SnapshotInfo>),
    Done,
}

#[derive(Message)]
#[rtype(result = "Result<CallOutput, DriverError>")]
pub(crate) struct Call(pub DriverCall);

/// Stops the actor (backend purged or replaced).
#[derive(Message)]
#[rtype(result = "()")]
pub(crate) struct Stop;

impl Handler<Stop> for BackendActor {
    type Result = ();

    fn handle(&mut self, _msg: Stop, ctx: &mut Self::Context) {
        ctx.stop();
    }
}

pub(crate) struct BackendActor {
    name: String,
    /// The full config (secrets included, memory only) to build the driver from, until built.
    rebuild: Option<serde_json::Value>,
    status: Arc<BackendStatus>,
    limit: Arc<Semaphore>,
    shared: Arc<Shared>,
    init_attempts: u32,
}

impl BackendActor {
    /// `status` starts `Online` for a driver discovered just now (added over the API), or
    /// `Initializing` for a backend from the log, whose driver is discovered in `started` with
    /// retries. `driver` is `None` when the recorded config no longer builds (shown failed).
    pub fn new(
        name: String,
        status: Arc<BackendStatus>,
        shared: Arc<Shared>,
        rebuild: Option<serde_json::Value>,
    ) -> BackendActor {
        BackendActor {
            name,
            rebuild,
            limit: Arc::new(Semaphore::new(status.limit)),
            status,
            shared,
            init_attempts: 0,
        }
    }

    fn driver(&self) -> Result<Arc<dyn StorageDriver>, DriverError> {
        match (self.status.driver(), self.status.state()) {
            (Some(d), BackendState::Online | BackendState::Offline) => Ok(d),
            (_, BackendState::Failed(why)) => Err(DriverError::Unavailable(format!(
                "backend {} is not available: {why}",
                self.name
            ))),
            _ => Err(DriverError::Unavailable(format!(
                "backend {} is still initializing",
                self.name
            ))),
        }
    }

    /// Shows the backend failed and tries again later (exponential backoff).
    fn retry_init(&mut self, ctx: &mut Context<Self>, e: DriverError) {
        self.init_attempts += 1;
        let delay = backoff(self.init_attempts);
        tracing::warn!(backend = %self.name, error = %e, retry_in = ?delay,
            "backend failed to initialise");
        self.status.set_state(BackendState::Failed(e.to_string()));
        ctx.run_later(delay, |act, ctx| act.initialise(ctx));
    }

    fn initialise(&mut self, ctx: &mut Context<Self>) {
        if self.status.driver().is_none()
            && let Some(doc) = &self.rebuild
        {
            match crate::drivers::build_driver(doc) {
                Ok(built) => {
                    self.status.set_driver(built.driver);
                    self.rebuild = None;
                }
                Err(e) => return self.retry_init(ctx, e),
            }
        }
        let Some(driver) = self.status.driver() else {
            return;
        };
        let shared = self.shared.clone();
        let name = self.name.clone();
        let fut = async move {
            let discovery = driver.discover().await?;
            record_discovery(&shared, &name, &discovery).await;
            report_unknown_volumes(&shared, &name, &*driver).await;
            Ok::<_, DriverError>(discovery)
        };
        ctx.spawn(fut.into_actor(self).map(|res, act, ctx| match res {
            Ok(discovery) => {
                act.init_attempts = 0;
                *write(&act.status.free_bytes) = discovery.free_bytes;
                let online = act
                    .shared
                    .projection
                    .read(|s| s.backends.get(&act.name).map(|b| b.online))
                    .unwrap_or(true);
                act.status.set_state(if online {
                    BackendState::Online
                } else {
                    BackendState::Offline
                });
                tracing::info!(backend = %act.name, "backend initialised");
                let shared = act.shared.clone();
                ctx.spawn(async move { super::class::rematch_all(&shared).await }.into_actor(act));
            }
            Err(e) => act.retry_init(ctx, e),
        }));
    }
}

/// Records the discovered pools when they differ from what the log holds.
pub(crate) async fn record_discovery(
    shared: &Shared,
    name: &str,
    discovery: &crate::drivers::Discovery,
) {
    let changed = shared.projection.read(|s| {
        s.backends
            .get(name)
            .is_some_and(|b| b.pools != discovery.pools || b.protocol != discovery.protocol)
    });
    if changed {
        let ev = Event::backend(
            name,
            BackendEvent::PoolsDiscovered {
                protocol: discovery.protocol,
                pools: discovery.pools.clone(),
            },
        );
        if let Err(e) = shared.append("discovery", vec![ev]).await {
            tracing::warn!(backend = %name, error = %e, "could not record discovered pools");
        }
    }
}

/// Logs array volumes of this backend that the log does not know (orphans). They are never
/// deleted automatically: an operator decides.
async fn report_unknown_volumes(shared: &Shared, name: &str, driver: &dyn StorageDriver) {
    let Ok(on_array) = driver.list_volumes().await else {
        return;
    };
    let known: std::collections::HashSet<String> = shared.projection.read(|s| {
        s.volumes
            .iter()
            .filter(|(_, v)| {
                v.backend() == name || v.candidates().iter().any(|p| p.backend == name)
            })
            .map(|(vol, v)| {
                let internal = v.config().internal_name;
                if internal.is_empty() {
                    driver.internal_name(vol)
                } else {
                    internal
                }
            })
            .collect()
    });
    let unknown: Vec<&str> = on_array
        .iter()
        .map(|v| v.internal_name.as_str())
        .filter(|n| !known.contains(*n))
        .collect();
    if !unknown.is_empty() {
        tracing::warn!(backend = %name, count = unknown.len(), volumes = ?unknown,
            "the array holds volumes the event log does not know");
    }
}

/// Exponential backoff: 1 s, 2 s, 4 s … capped at 60 s.
pub(crate) fn backoff(attempt: u32) -> Duration {
    Duration::from_secs(1u64 << attempt.saturating_sub(1).min(6)).min(Duration::from_secs(60))
}

impl Actor for BackendActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        ctx.set_mailbox_capacity(1024);
        if self.status.state() == BackendState::Initializing {
            self.initialise(ctx);
        }
    }
}

impl Handler<Call> for BackendActor {
    type Result = ResponseFuture<Result<CallOutput, DriverError>>;

    fn handle(&mut self, Call(call): Call, _ctx: &mut Self::Context) -> Self::Result {
        let driver = self.driver();
        let limit = self.limit.clone();
        let status = self.status.clone();
        let backend = self.name.clone();
        Box::pin(async move {
            let driver = driver?;
            status.queued.fetch_add(1, Ordering::Relaxed);
            let queued_at = std::time::Instant::now();
            let permit = limit.acquire_owned().await;
            status.queued.fetch_sub(1, Ordering::Relaxed);
            metrics::histogram!("storch_backend_queue_seconds")
                .record(queued_at.elapsed().as_secs_f64());
            let _permit = permit.map_err(|_| DriverError::Unavailable("backend stopped".into()))?;
            status.in_flight.fetch_add(1, Ordering::Relaxed);
            let kind = call.kind();
            let started = std::time::Instant::now();
            let span = tracing::debug_span!("driver", %backend, call = kind);
            let out = run_call(&*driver, call, &status).instrument(span).await;
            status.in_flight.fetch_sub(1, Ordering::Relaxed);
            let outcome = if out.is_ok() { "ok" } else { "error" };
            metrics::histogram!("storch_driver_call_seconds", "backend" => backend.clone(),
                "call" => kind, "outcome" => outcome)
            .record(started.elapsed().as_secs_f64());
            if let Err(e) = &out {
                tracing::debug!(%backend, call = kind, error = %e, "driver call failed");
            }
            out
        })
    }
}

async fn run_call(
    driver: &dyn StorageDriver,
    call: DriverCall,
    status: &BackendStatus,
) -> Result<CallOutput, DriverError> {
    Ok(match call {
        DriverCall::Create(req) => {
            let info = driver.create(&req).await?;
            adjust_free(status, &info.pool, info.size_bytes, false);
            CallOutput::Volume(info)
        }
        DriverCall::Clone(req) => {
            let info = driver.clone_volume(&req).await?;
            adjust_free(status, &info.pool, info.size_bytes, false);
            CallOutput::Volume(info)
        }
        DriverCall::Get(name) => CallOutput::MaybeVolume(driver.get(&name).await?),
        DriverCall::Destroy(name) => {
            let existing = driver.get(&name).await.ok().flatten();
            driver.destroy(&name).await?;
            if let Some(info) = existing {
                adjust_free(status, &info.pool, info.size_bytes, true);
            }
            CallOutput::Done
        }
        DriverCall::Resize(name, size) => {
            let before = driver.get(&name).await.ok().flatten();
            driver.resize(&name, size).await?;
            if let Some(info) = before {
                adjust_free(
                    status,
                    &info.pool,
                    size.saturating_sub(info.size_bytes),
                    false,
                );
            }
            CallOutput::Done
        }
        DriverCall::CreateSnapshot(vol, snap) => {
            CallOutput::Snapshot(driver.create_snapshot(&vol, &snap).await?)
        }
        DriverCall::ListSnapshots(vol) => CallOutput::Snapshots(driver.list_snapshots(&vol).await?),
        DriverCall::DeleteSnapshot(vol, snap) => {
            driver.delete_snapshot(&vol, &snap).await?;
            CallOutput::Done
        }
    })
}

fn adjust_free(status: &BackendStatus, pool: &str, bytes: u64, release: bool) {
    if let Some(free) = write(&status.free_bytes).get_mut(pool) {
        *free = if release {
            free.saturating_add(bytes)
        } else {
            free.saturating_sub(bytes)
        };
    }
}
