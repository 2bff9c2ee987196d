//! One actor per backend: builds and initialises its driver (with retries), and decides the
//! backend's commands (add, update, delete) and records them. Every driver call, the actor's
//! own included, goes through the backend's [`LimitedDriver`] (its concurrency limit).

use std::sync::Arc;

use actix::prelude::*;

use super::drift::{self, DriftReport, ReconcileBackend};
use super::error::{CoreError, RequestCtx};
use super::messages::{DeleteBackend, PreparedBackend, StopBackend, UpdateBackend};
use super::shared::{BackendSlot, BackendStatus, Shared, now_ms, retry_delay, write};
use crate::drivers::{Discovery, DriverError, LimitedDriver, SizeLimits, StorageDriver, limit};
use crate::events::{BackendEvent, Event, Health, Noticed, Observation, VolumeEvent};
use crate::projections::{BackendState, VolumeState};

pub(crate) struct BackendActor {
    name: String,
    /// The full config (secrets included, memory only) to build the driver from, until built.
    rebuild: Option<serde_json::Value>,
    status: Arc<BackendStatus>,
    shared: Arc<Shared>,
    init_attempts: u32,
    /// The topology of the config just built from the log, to record once discovered.
    topology: Option<Vec<crate::model::Segment>>,
    /// One drift reconciliation of this backend at a time.
    drift: super::drift::DriftLock,
}

/// Where a backend actor gets its driver.
pub(crate) enum DriverSource {
    /// Built and discovered just now (added or updated over the API): online at once.
    Ready(Arc<LimitedDriver>),
    /// A config from the log (secrets merged back): built and discovered by the actor, with
    /// retries, while the backend shows `initializing`/`failed`.
    Build(serde_json::Value),
    /// The recorded config cannot be used at all (e.g. its secrets cannot be unsealed).
    Broken(String),
}

/// Starts a backend actor and registers it.
pub(crate) fn start(shared: &Arc<Shared>, name: &str, source: DriverSource) {
    let (status, rebuild) = match source {
        DriverSource::Ready(driver) => {
            (BackendStatus::new(BackendState::Online, Some(driver)), None)
        }
        DriverSource::Build(doc) => (
            BackendStatus::new(BackendState::Initializing, None),
            Some(doc),
        ),
        DriverSource::Broken(why) => (BackendStatus::new(BackendState::Failed(why), None), None),
    };
    let status = Arc::new(status);
    let actor = BackendActor {
        name: name.to_string(),
        rebuild,
        status: status.clone(),
        shared: shared.clone(),
        init_attempts: 0,
        topology: None,
        drift: Default::default(),
    };
    let addr = actix::Actor::start_in_arbiter(&shared.arbiter, move |_| actor);
    let slot = BackendSlot {
        update: addr.clone().recipient(),
        delete: addr.clone().recipient(),
        stop: addr.clone().recipient(),
        reconcile: addr.recipient(),
        status,
    };
    write(&shared.backends).insert(name.to_string(), slot);
}

fn driver_error(e: DriverError) -> CoreError {
    match e {
        DriverError::Invalid(m) | DriverError::Unsupported(m) => CoreError::Invalid(m),
        other => CoreError::Failed(other.to_string()),
    }
}

/// Who wrote a backend config: what it may point at depends on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Origin {
    /// A client over the API: local pools only below the operator's roots.
    Api,
    /// The operator's own `serve --config` file.
    Operator,
}

/// Builds a backend config's driver behind its concurrency limit and discovers the array
/// (through the limit); nothing is recorded yet.
pub(crate) async fn prepare(
    shared: &Shared,
    doc: serde_json::Value,
    origin: Origin,
) -> Result<PreparedBackend, CoreError> {
    if !doc.is_object() {
        return Err(CoreError::Invalid(
            "invalid config format: a backend config must be a JSON or YAML object".into(),
        ));
    }
    crate::drivers::check_pool_count(&doc, None).map_err(driver_error)?;
    let mut redacted = doc.clone();
    let secrets = crate::secrets::split(&mut redacted);
    let built = crate::drivers::build_driver(&doc).map_err(driver_error)?;
    if built.driver.driver_name() == crate::drivers::local::DRIVER_NAME {
        check_local_pools(shared, &doc, &built.common, origin)?;
    }
    let limit = limit::concurrency_limit(&doc).map_err(CoreError::Invalid)?;
    let driver_name = built.driver.driver_name().to_string();
    let label = built.common.backend_name.as_deref().unwrap_or(&driver_name);
    let mut driver = LimitedDriver::new(label, built.driver.clone(), limit);
    let topology = built.common.supported_topologies.clone();
    let discovery = driver.discover().await.map_err(|e| {
        CoreError::Failed(format!(
            "problem initializing storage driver '{driver_name}': {e}"
        ))
    })?;
    crate::model::validate_name("backendName", &discovery.backend_name)
        .map_err(|e| CoreError::Invalid(e.to_string()))?;
    crate::drivers::check_pool_count(&doc, Some(discovery.pools.len())).map_err(driver_error)?;
    if discovery.backend_name != label {
        // Metrics and spans name the backend; its name was known only now.
        driver = LimitedDriver::new(&discovery.backend_name, built.driver, limit);
    }
    Ok(PreparedBackend {
        name: discovery.backend_name.clone(),
        driver: Arc::new(driver),
        driver_name,
        redacted: redacted.to_string(),
        sealed: shared.secrets.seal(&secrets),
        discovery,
        topology,
    })
}

/// A local config's pools against the operator's roots (for the API), storch's own files and
/// every other local backend's pools, before the driver creates anything.
fn check_local_pools(
    shared: &Shared,
    doc: &serde_json::Value,
    common: &crate::drivers::CommonConfig,
    origin: Origin,
) -> Result<(), CoreError> {
    use crate::drivers::local::{LocalConfig, roots};
    let cfg = LocalConfig::parse(doc, common).map_err(driver_error)?;
    let mut taken = Vec::new();
    shared.projection.read(|s| {
        for (name, rec) in &s.backends {
            if rec.driver != crate::drivers::local::DRIVER_NAME || *name == cfg.backend_name {
                continue;
            }
            let Ok(other) = serde_json::from_str::<serde_json::Value>(&rec.config) else {
                continue;
            };
            let Ok(common) = crate::drivers::CommonConfig::parse(&other) else {
                continue;
            };
            if let Ok(other) = LocalConfig::parse(&other, &common) {
                for pool in other.pools {
                    taken.push((name.to_string(), pool.name, pool.path));
                }
            }
        }
    });
    let opts = &shared.opts;
    let mut reserved = vec![opts.data_dir.join("log")];
    reserved.push(
        opts.secrets_key
            .clone()
            .unwrap_or_else(|| opts.data_dir.join(crate::secrets::KEY_FILE)),
    );
    let rules = roots::PoolRules {
        roots: (origin == Origin::Api).then(|| opts.allowed_local_roots()),
        reserved,
        taken,
    };
    roots::check(&cfg, &rules).map_err(driver_error)
}

/// Records a new backend and starts its actor; the caller holds `admin` and has checked the
/// name is new.
pub(crate) async fn add(
    shared: &Arc<Shared>,
    ctx: &RequestCtx,
    prepared: PreparedBackend,
) -> Result<String, CoreError> {
    let name = prepared.name.clone();
    let held = shared.projection.read(|s| s.backends.len());
    if held >= crate::drivers::MAX_BACKENDS {
        return Err(CoreError::Invalid(format!(
            "storch holds {held} backends, the most it takes ({}); delete one first",
            crate::drivers::MAX_BACKENDS
        )));
    }
    let mut events = vec![
        Event::backend(
            &name,
            BackendEvent::Added {
                driver: prepared.driver_name.clone(),
                config: prepared.redacted.clone(),
                secrets: prepared.sealed.clone(),
            },
        ),
        Event::backend(
            &name,
            BackendEvent::PoolsDiscovered {
                protocol: prepared.discovery.protocol,
                pools: prepared.discovery.pools.clone(),
            },
        ),
        Event::backend(
            &name,
            BackendEvent::Observed(Box::new(online(&prepared.driver, &prepared.discovery))),
        ),
    ];
    if !prepared.topology.is_empty() {
        let segments = prepared.topology.clone();
        events.push(Event::backend(
            &name,
            BackendEvent::TopologyDeclared { segments },
        ));
    }
    shared.append(&ctx.request_id, events).await?;
    start(shared, &name, DriverSource::Ready(prepared.driver));
    super::class::rematch_all(shared).await;
    tracing::info!(backend = %name, "backend added");
    Ok(name)
}

/// The events of an update of backend `name` to `prepared`, decided against the log: type
/// unchanged, a rename to a free name, pools rediscovered, and Trident's orphan check (is each
/// volume still on the array the new config points at?), asked through the new driver.
async fn decide_update(
    shared: &Shared,
    name: &str,
    prepared: &PreparedBackend,
) -> Result<Vec<Event>, CoreError> {
    let Some(old) = shared.projection.read(|s| s.backends.get(name).cloned()) else {
        return Err(CoreError::NotFound(format!("backend {name} was not found")));
    };
    if old.driver != prepared.driver_name {
        return Err(CoreError::Invalid(format!(
            "cannot update the backend as the old backend is of type {} and the new backend is of type {}",
            old.driver, prepared.driver_name
        )));
    }
    let new_name = prepared.name.clone();
    if new_name != name {
        return Err(CoreError::Invalid(format!(
            "backendName {new_name} differs from the backend {name} being updated: an update \
             does not rename a backend"
        )));
    }
    let mut events = Vec::new();
    events.push(Event::backend(
        &new_name,
        BackendEvent::Updated {
            driver: prepared.driver_name.clone(),
            config: prepared.redacted.clone(),
            secrets: prepared.sealed.clone(),
        },
    ));
    if old.pools != prepared.discovery.pools || old.protocol != prepared.discovery.protocol {
        events.push(Event::backend(
            &new_name,
            BackendEvent::PoolsDiscovered {
                protocol: prepared.discovery.protocol,
                pools: prepared.discovery.pools.clone(),
            },
        ));
    }
    if old.topology != prepared.topology {
        let segments = prepared.topology.clone();
        events.push(Event::backend(
            &new_name,
            BackendEvent::TopologyDeclared { segments },
        ));
    }
    // `Updated` forgets what was observed of the old config.
    let observed = online(&prepared.driver, &prepared.discovery);
    events.push(Event::backend(
        &new_name,
        BackendEvent::Observed(Box::new(observed)),
    ));
    let mut unreached = Vec::new();
    for vol in &old.volumes {
        let Some(rec) = shared.projection.read(|s| s.volumes.get(vol).cloned()) else {
            continue;
        };
        let found = prepared.driver.get(&rec.config().internal_name).await;
        let orphaned = matches!(found, Ok(None));
        if orphaned && !rec.orphaned {
            unreached.push(vol.to_string());
        } else if orphaned != rec.orphaned {
            events.push(Event::volume(
                vol,
                VolumeEvent::OrphanedChanged { orphaned },
            ));
        }
    }
    if !unreached.is_empty() {
        return Err(CoreError::Failed(format!(
            "the new config of backend {name} does not reach {} of its volumes ({}): an \
             update must not orphan them; nothing changed",
            unreached.len(),
            unreached.join(", ")
        )));
    }
    Ok(events)
}

async fn update(
    shared: Arc<Shared>,
    name: String,
    mut msg: UpdateBackend,
) -> Result<String, CoreError> {
    // The same config again (e.g. re-adding a backend taken offline) keeps the running
    // driver: a new one may not know what the running one does (a fake without statePath).
    if same_config(&shared, &name, &msg.prepared)
        && let Some(running) = shared.backend(&name).and_then(|s| s.status.driver())
    {
        // Online with this very config (a re-post whose name the driver derives): nothing
        // to record, and the running driver stays.
        let online = shared
            .projection
            .read(|s| s.backends.get(&name).is_some_and(|b| b.online));
        if online && msg.prepared.name == name {
            return Ok(name);
        }
        msg.prepared.driver = running;
    }
    let events = decide_update(&shared, &name, &msg.prepared).await?;
    shared.append(&msg.ctx.request_id, events).await?;
    let new_name = msg.prepared.name.clone();
    shared.stop_backend(&name);
    start(&shared, &new_name, DriverSource::Ready(msg.prepared.driver));
    super::class::rematch_all(&shared).await;
    tracing::info!(backend = %new_name, "backend updated");
    Ok(new_name)
}

/// Whether `prepared` holds the config backend `name` was recorded with (secrets included).
fn same_config(shared: &Shared, name: &str, prepared: &PreparedBackend) -> bool {
    let Some(rec) = shared.projection.read(|s| s.backends.get(name).cloned()) else {
        return false;
    };
    let parse = |t: &str| serde_json::from_str::<serde_json::Value>(t).ok();
    let unseal = |s: &Option<crate::model::Sealed>| match s {
        Some(sealed) => shared.secrets.unseal(sealed).ok(),
        None => Some(Default::default()),
    };
    parse(&rec.config).is_some()
        && parse(&rec.config) == parse(&prepared.redacted)
        && unseal(&rec.secrets).is_some()
        && unseal(&rec.secrets) == unseal(&prepared.sealed)
}

/// Purges a backend without volumes (nor creates that may land there), or takes one with
/// volumes offline.
async fn delete(
    shared: Arc<Shared>,
    name: String,
    status: Arc<BackendStatus>,
    ctx: RequestCtx,
) -> Result<(), CoreError> {
    let in_use = shared.projection.read(|s| {
        s.backends.get(&name).map(|b| {
            !b.volumes.is_empty()
                || s.volumes.values().any(|v| {
                    v.state == VolumeState::Creating
                        && v.candidates().iter().any(|p| p.backend == name)
                })
        })
    });
    match in_use {
        None => return Err(CoreError::NotFound(format!("backend {name} not found"))),
        Some(false) => {
            let ev = Event::backend(&name, BackendEvent::Purged);
            shared.append(&ctx.request_id, vec![ev]).await?;
            shared.stop_backend(&name);
        }
        Some(true) => {
            let ev = Event::backend(&name, BackendEvent::Offlined);
            shared.append(&ctx.request_id, vec![ev]).await?;
            if status.state() == BackendState::Online {
                status.set_state(BackendState::Offline);
            }
        }
    }
    super::class::rematch_all(&shared).await;
    Ok(())
}

impl Handler<UpdateBackend> for BackendActor {
    type Result = AtomicResponse<Self, Result<String, CoreError>>;

    fn handle(&mut self, msg: UpdateBackend, _ctx: &mut Self::Context) -> Self::Result {
        let fut = update(self.shared.clone(), self.name.clone(), msg);
        AtomicResponse::new(Box::pin(fut.into_actor(self)))
    }
}

impl Handler<DeleteBackend> for BackendActor {
    type Result = AtomicResponse<Self, Result<(), CoreError>>;

    fn handle(&mut self, msg: DeleteBackend, _ctx: &mut Self::Context) -> Self::Result {
        let fut = delete(
            self.shared.clone(),
            self.name.clone(),
            self.status.clone(),
            msg.ctx,
        );
        AtomicResponse::new(Box::pin(fut.into_actor(self)))
    }
}

impl Handler<ReconcileBackend> for BackendActor {
    type Result = ResponseFuture<Result<DriftReport, CoreError>>;

    fn handle(&mut self, msg: ReconcileBackend, _ctx: &mut Self::Context) -> Self::Result {
        let (shared, name) = (self.shared.clone(), self.name.clone());
        let (status, lock) = (self.status.clone(), self.drift.clone());
        Box::pin(async move { drift::run(&shared, &name, &status, &lock, msg.how, true).await })
    }
}

impl Handler<StopBackend> for BackendActor {
    type Result = ();

    fn handle(&mut self, _msg: StopBackend, ctx: &mut Self::Context) {
        ctx.stop();
    }
}

impl BackendActor {
    /// Compares the backend with its array now (its start), then every `reconcile_interval`.
    fn start_drift(&mut self, ctx: &mut Context<Self>) {
        let run = |act: &mut Self, how| {
            let (shared, name) = (act.shared.clone(), act.name.clone());
            let (status, lock) = (act.status.clone(), act.drift.clone());
            async move {
                // A run already under way (or asked for) covers this one.
                let _ = drift::run(&shared, &name, &status, &lock, how, false).await;
            }
        };
        // The comparison at start is retried (with backoff) until one completes: a listing
        // that fails changes nothing, and the periodic one may be off.
        let (shared, name) = (self.shared.clone(), self.name.clone());
        let (status, lock) = (self.status.clone(), self.drift.clone());
        let at_start = async move {
            for attempt in 1..=10 {
                let done = drift::run(&shared, &name, &status, &lock, Noticed::Start, true).await;
                if done.is_ok_and(|report| report.unchecked.is_empty()) {
                    return;
                }
                tokio::time::sleep(retry_delay(attempt)).await;
            }
        };
        ctx.spawn(at_start.into_actor(self));
        let every = self.shared.opts.reconcile_interval;
        if !every.is_zero() {
            ctx.run_interval(every, move |act, ctx| {
                ctx.spawn(run(act, Noticed::Periodic).into_actor(act));
            });
        }
    }

    /// Shows the backend failed and tries again later (exponential backoff).
    fn retry_init(&mut self, ctx: &mut Context<Self>, e: DriverError) {
        self.init_attempts += 1;
        let delay = retry_delay(self.init_attempts);
        tracing::warn!(backend = %self.name, error = %e, retry_in = ?delay,
            "backend failed to initialise");
        self.status.set_state(BackendState::Failed(e.to_string()));
        self.record_failure(ctx, e.to_string());
        ctx.run_later(delay, |act, ctx| act.initialise(ctx));
    }

    /// Records that the driver failed to start, unless the log already says so with this
    /// reason (a retry that fails the same way records nothing).
    fn record_failure(&mut self, ctx: &mut Context<Self>, reason: String) {
        let limits = self
            .status
            .driver()
            .map_or(SizeLimits::ANY, |d| d.size_limits());
        let failed = observation(Health::Failed { reason }, &limits, Default::default(), None);
        let (shared, name) = (self.shared.clone(), self.name.clone());
        ctx.spawn(async move { record(&shared, &name, None, failed).await }.into_actor(self));
    }

    fn initialise(&mut self, ctx: &mut Context<Self>) {
        if self.status.driver().is_none()
            && let Some(doc) = &self.rebuild
        {
            match crate::drivers::build_driver(doc) {
                Ok(built) => {
                    self.topology = Some(built.common.supported_topologies.clone());
                    let limit = limit::concurrency_limit(doc).unwrap_or(limit::DEFAULT_LIMIT);
                    let driver = LimitedDriver::new(&self.name, built.driver, limit);
                    self.status.set_driver(Arc::new(driver));
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
        let topology = self.topology.take();
        let fut = async move {
            let discovery = driver.discover().await?;
            record(
                &shared,
                &name,
                Some(&discovery),
                online(&driver, &discovery),
            )
            .await;
            if let Some(segments) = topology {
                record_topology(&shared, &name, segments).await;
            }
            Ok::<_, DriverError>(())
        };
        ctx.spawn(fut.into_actor(self).map(|res, act, ctx| match res {
            Ok(()) => {
                act.init_attempts = 0;
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
                act.start_drift(ctx);
                let shared = act.shared.clone();
                ctx.spawn(async move { super::class::rematch_all(&shared).await }.into_actor(act));
            }
            Err(e) => act.retry_init(ctx, e),
        }));
    }
}

/// What to record of a driver whose discovery just answered.
fn online(driver: &LimitedDriver, discovery: &Discovery) -> Observation {
    let config = Some(driver.external_config().to_string());
    let free = discovery.free_bytes.clone();
    observation(Health::Online, &driver.size_limits(), free, config)
}

fn observation(
    health: Health,
    limits: &SizeLimits,
    free_bytes: std::collections::BTreeMap<String, u64>,
    config: Option<String>,
) -> Observation {
    Observation {
        health,
        observed_ms: now_ms(),
        free_bytes,
        config,
        min_bytes: limits.min_bytes,
        max_bytes: limits.max_bytes,
    }
}

/// Records, in one batch, the discovered pools when they differ from what the log holds and
/// what was observed when it differs from the last recording (its free bytes as adjusted
/// since; the time aside), so that a standby answers as this leader does.
async fn record(shared: &Shared, name: &str, discovery: Option<&Discovery>, observed: Observation) {
    let events = shared.projection.read(|s| {
        let Some(b) = s.backends.get(name) else {
            return Vec::new();
        };
        let mut events = Vec::new();
        if let Some(d) = discovery
            && (b.pools != d.pools || b.protocol != d.protocol)
        {
            events.push(Event::backend(
                name,
                BackendEvent::PoolsDiscovered {
                    protocol: d.protocol,
                    pools: d.pools.clone(),
                },
            ));
        }
        if b.observation_differs(&observed) {
            events.push(Event::backend(
                name,
                BackendEvent::Observed(Box::new(observed)),
            ));
        }
        events
    });
    if events.is_empty() {
        return;
    }
    if let Err(e) = shared.append("discovery", events).await {
        tracing::warn!(backend = %name, error = %e, "could not record what was observed of the backend");
    }
}

/// Records the topology of a config from the log when the log's differs (a backend recorded
/// by a build that did not read `supportedTopologies`).
async fn record_topology(shared: &Shared, name: &str, segments: Vec<crate::model::Segment>) {
    let changed = shared
        .projection
        .read(|s| s.backends.get(name).is_some_and(|b| b.topology != segments));
    if changed {
        let ev = Event::backend(name, BackendEvent::TopologyDeclared { segments });
        if let Err(e) = shared.append("discovery", vec![ev]).await {
            tracing::warn!(backend = %name, error = %e, "could not record the backend's topology");
        }
    }
}

impl Actor for BackendActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        ctx.set_mailbox_capacity(1024);
        match self.status.state() {
            BackendState::Initializing => self.initialise(ctx),
            // Added or updated over the API just now: compared with its array from now on.
            BackendState::Online => self.start_drift(ctx),
            // The recorded config cannot be used: recorded once, as a failure to start.
            BackendState::Failed(why) => self.record_failure(ctx, why),
            _ => {}
        }
    }
}
