//! State shared by the actors and the `Core` handle: the projection, the runtime status of
//! backends, the class index and the volume actor directory.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Mutex, RwLock};

use actix::{Addr, ArbiterHandle};

use super::backend::BackendActor;
use super::class::StorageClassActor;
use super::handle::{BackendState, CoreError, CoreOptions, Readiness};
use super::volume::VolumeActor;
use crate::events::Event;
use crate::log::{Appender, EventLog, NewEvent};
use crate::model::{PoolRef, Protocol};
use crate::projections::Projection;
use crate::secrets::SecretBox;

/// What the rest of the core can see of one backend actor without messaging it.
#[derive(Debug)]
pub(crate) struct BackendStatus {
    pub state: RwLock<BackendState>,
    /// The driver, once built (a backend from the log builds it in its actor, with retries).
    /// An update starts a new actor with a new status.
    driver: RwLock<Option<Arc<dyn crate::drivers::StorageDriver>>>,
    /// Free bytes per pool, as last discovered and adjusted by creates/deletes.
    pub free_bytes: RwLock<BTreeMap<String, u64>>,
    /// Driver calls waiting for a concurrency permit.
    pub queued: AtomicUsize,
    /// Driver calls running.
    pub in_flight: AtomicUsize,
    /// Creates planned onto this backend first whose intent is still being made durable:
    /// counted so that a burst planned before any of its calls reached an actor spreads
    /// instead of all seeing the same idle backends.
    pub planned: AtomicUsize,
    /// Driver calls allowed at once (`concurrencyLimit`).
    pub limit: usize,
}

impl BackendStatus {
    pub fn new(
        state: BackendState,
        driver: Option<Arc<dyn crate::drivers::StorageDriver>>,
        limit: usize,
    ) -> BackendStatus {
        BackendStatus {
            state: RwLock::new(state),
            driver: RwLock::new(driver),
            free_bytes: RwLock::new(BTreeMap::new()),
            queued: AtomicUsize::new(0),
            in_flight: AtomicUsize::new(0),
            planned: AtomicUsize::new(0),
            limit: limit.max(1),
        }
    }

    /// Driver calls running, waiting or planned, per permit, in 1/1024ths: how busy the
    /// array is relative to what it may take at once.
    pub fn load(&self) -> usize {
        let outstanding = self.queued.load(std::sync::atomic::Ordering::Relaxed)
            + self.in_flight.load(std::sync::atomic::Ordering::Relaxed)
            + self.planned.load(std::sync::atomic::Ordering::Relaxed);
        outstanding.saturating_mul(1024) / self.limit
    }

    pub fn state(&self) -> BackendState {
        read(&self.state).clone()
    }

    pub fn driver(&self) -> Option<Arc<dyn crate::drivers::StorageDriver>> {
        read(&self.driver).clone()
    }

    pub fn set_driver(&self, driver: Arc<dyn crate::drivers::StorageDriver>) {
        *write(&self.driver) = Some(driver);
    }

    pub fn set_state(&self, state: BackendState) {
        *write(&self.state) = state;
    }
}

#[derive(Clone)]
pub(crate) struct BackendSlot {
    pub addr: Addr<BackendActor>,
    pub status: Arc<BackendStatus>,
}

#[derive(Clone)]
pub(crate) struct ClassSlot {
    pub addr: Addr<StorageClassActor>,
    /// Pools of online backends that match, as last computed by the class actor.
    pub matched: Arc<BTreeSet<PoolRef>>,
}

pub(crate) struct Shared {
    pub opts: CoreOptions,
    /// Taken (and so closed) at shutdown.
    pub log: RwLock<Option<Arc<EventLog>>>,
    pub projection: Arc<Projection>,
    pub secrets: SecretBox,
    pub arbiter: ArbiterHandle,
    pub readiness: RwLock<Readiness>,
    /// Taken at shutdown so the log writer can finish.
    pub appender: RwLock<Option<Appender>>,
    pub backends: RwLock<HashMap<String, BackendSlot>>,
    pub classes: RwLock<HashMap<String, ClassSlot>>,
    pub volumes: Mutex<HashMap<String, Addr<VolumeActor>>>,
    /// Committed envelopes, for `Core::follow`.
    pub followers: tokio::sync::broadcast::Sender<Arc<crate::log::Envelope>>,
    /// Serialises backend and storage-class commands (rare; volumes never take it).
    pub admin: tokio::sync::Mutex<()>,
}

pub(crate) fn read<T>(l: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    l.read().unwrap_or_else(|e| e.into_inner())
}

pub(crate) fn write<T>(l: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    l.write().unwrap_or_else(|e| e.into_inner())
}

impl Shared {
    /// For commands: only a ready leader (or a core without replication) takes them.
    pub fn ensure_ready(&self) -> Result<(), CoreError> {
        match &*read(&self.readiness) {
            Readiness::Ready => Ok(()),
            Readiness::Replaying => Err(CoreError::NotReady),
            Readiness::Standby { leader } => Err(CoreError::Standby(leader.clone())),
            Readiness::Failed(why) => Err(CoreError::BootstrapFailed(why.clone())),
        }
    }

    /// For reads: a standby answers them from its replicated projection.
    pub fn ensure_readable(&self) -> Result<(), CoreError> {
        match &*read(&self.readiness) {
            Readiness::Standby { .. } => Ok(()),
            _ => self.ensure_ready(),
        }
    }

    /// The leader's identity while this instance is a standby.
    pub fn standby_leader(&self) -> Option<String> {
        match &*read(&self.readiness) {
            Readiness::Standby { leader } => Some(leader.clone()),
            _ => None,
        }
    }

    /// Appends events as one atomic batch and waits until they are durable and applied.
    pub async fn append(&self, request_id: &str, events: Vec<Event>) -> Result<u64, CoreError> {
        let appender = read(&self.appender).clone().ok_or(CoreError::NotReady)?;
        let batch = events.iter().map(NewEvent::from).collect();
        let started = std::time::Instant::now();
        let result = appender.append(request_id, batch).await;
        metrics::histogram!("storch_log_append_seconds").record(started.elapsed().as_secs_f64());
        let seqs = result.map_err(|e| {
            tracing::error!(error = %e, "event log append failed");
            CoreError::Unavailable(format!("the event log refuses writes: {e}"))
        })?;
        Ok(seqs.last().copied().unwrap_or(0))
    }

    pub fn log(&self) -> Option<Arc<EventLog>> {
        read(&self.log).clone()
    }

    pub fn backend(&self, name: &str) -> Option<BackendSlot> {
        read(&self.backends).get(name).cloned()
    }

    /// Classes each pool belongs to (sorted), for backend views.
    pub fn classes_of_pools(&self) -> HashMap<PoolRef, Vec<String>> {
        let mut out: HashMap<PoolRef, Vec<String>> = HashMap::new();
        let classes = read(&self.classes);
        let mut names: Vec<&String> = classes.keys().collect();
        names.sort();
        for name in names {
            for pool in classes[name].matched.iter() {
                out.entry(pool.clone()).or_default().push(name.clone());
            }
        }
        out
    }

    /// Counts a create planned onto `backend` in its load until the guard is dropped.
    pub fn planned(&self, backend: &str) -> Option<Planned> {
        read(&self.backends)
            .get(backend)
            .map(|slot| Planned::new(slot.status.clone()))
    }

    /// The placement policy: candidate pools = class pools ∩ protocol ∩ backend online ∩
    /// free capacity, shuffled with `seed`, then ordered by their backend's load (calls running
    /// and queued per permit; a stable sort, so the shuffle decides among equals). An idle
    /// system places at random, as Trident does; a busy one sends new work to the array with
    /// free permits instead of queueing it behind another's (the order is recorded in
    /// `PlacementPlanned`, so replay and reconciliation never recompute it).
    pub fn plan_placement(
        &self,
        class: &str,
        protocol: Protocol,
        size_bytes: u64,
        seed: u64,
    ) -> Result<Vec<PoolRef>, CoreError> {
        let matched = match read(&self.classes).get(class) {
            Some(slot) => slot.matched.clone(),
            None => {
                return Err(CoreError::Invalid(format!(
                    "unknown storage class: {class}"
                )));
            }
        };
        let mut candidates = Vec::with_capacity(matched.len());
        self.projection.read(|state| {
            let backends = read(&self.backends);
            for pool in matched.iter() {
                let Some(rec) = state.backends.get(&pool.backend) else {
                    continue;
                };
                if !rec.online || !serves(rec.protocol, protocol) {
                    continue;
                }
                let Some(slot) = backends.get(&pool.backend) else {
                    continue;
                };
                if slot.status.state() != BackendState::Online {
                    continue;
                }
                let free = read(&slot.status.free_bytes).get(&pool.pool).copied();
                if free.is_some_and(|f| f < size_bytes) {
                    continue;
                }
                candidates.push(pool.clone());
            }
        });
        if candidates.is_empty() {
            return Err(CoreError::Failed(format!(
                "no available backends for storage class {class}; {}",
                explain_hint(class)
            )));
        }
        shuffle(&mut candidates, seed);
        let backends = read(&self.backends);
        candidates.sort_by_cached_key(|p| backends.get(&p.backend).map_or(0, |b| b.status.load()));
        Ok(candidates)
    }
}

/// A create planned onto a backend first, counted in its load until dropped (once the call
/// is handed to the backend's actor, which counts it from then on).
pub(crate) struct Planned(Arc<BackendStatus>);

impl Planned {
    pub fn new(status: Arc<BackendStatus>) -> Planned {
        status
            .planned
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Planned(status)
    }
}

impl Drop for Planned {
    fn drop(&mut self) {
        self.0
            .planned
            .fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
    }
}

/// Records how long a core operation took and how it ended
/// (`storch_operation_duration_seconds{operation, outcome}`).
pub(crate) fn observe<T>(
    operation: &'static str,
    started: std::time::Instant,
    result: &Result<T, CoreError>,
) {
    let outcome = match result {
        Ok(_) => "ok",
        Err(CoreError::NotFound(_)) => "not_found",
        Err(CoreError::AlreadyExists(_)) => "conflict",
        Err(CoreError::Invalid(_)) => "invalid",
        Err(CoreError::Failed(_)) => "failed",
        Err(CoreError::NotReady | CoreError::Unavailable(_)) => "unavailable",
        Err(CoreError::Standby(_)) => "standby",
        Err(CoreError::BootstrapFailed(_) | CoreError::Internal(_)) => "error",
    };
    metrics::histogram!("storch_operation_duration_seconds", "operation" => operation, "outcome" => outcome)
        .record(started.elapsed().as_secs_f64());
}

/// Whether a backend serving `backend` can take a volume asking for `wanted`: either side
/// may be `Any` (a local or fake backend with no fixed protocol serves both).
pub(crate) fn serves(backend: Protocol, wanted: Protocol) -> bool {
    backend == Protocol::Any || wanted == Protocol::Any || backend == wanted
}

/// Where a failed create points the user.
pub(crate) fn explain_hint(class: &str) -> String {
    format!(
        "`storch explain storageclass {class}` (GET /trident/v1/storageclass/{class}/explain) \
         shows why each pool was or was not used"
    )
}

/// Fisher–Yates with splitmix64: reproducible from the seed recorded in `PlacementPlanned`,
/// whatever the version of the `rand` crate.
pub(crate) fn shuffle<T>(items: &mut [T], seed: u64) {
    let mut x = seed;
    let mut next = || {
        x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = x;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    };
    for i in (1..items.len()).rev() {
        let j = (next() % (i as u64 + 1)) as usize;
        items.swap(i, j);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shuffle_is_a_reproducible_permutation() {
        let mut a: Vec<u32> = (0..50).collect();
        let mut b = a.clone();
        shuffle(&mut a, 42);
        shuffle(&mut b, 42);
        assert_eq!(a, b);
        let mut sorted = a.clone();
        sorted.sort();
        assert_eq!(sorted, (0..50).collect::<Vec<_>>());
        let mut c: Vec<u32> = (0..50).collect();
        shuffle(&mut c, 43);
        assert_ne!(a, c);
    }

    #[test]
    fn shuffle_is_roughly_uniform() {
        // Each of 4 items should land first about a quarter of the time.
        let mut first = [0u32; 4];
        for seed in 0..4000u64 {
            let mut v = [0usize, 1, 2, 3];
            shuffle(&mut v, seed.wrapping_mul(0x2545_F491_4F6C_DD1D));
            first[v[0]] += 1;
        }
        for n in first {
            assert!((800..1200).contains(&n), "{first:?}");
        }
    }
}
