//! What the actors and the `Core` handle share: the registry of live actors (by recipient,
//! so no file names another's actor type), the runtime status of backends, the readiness and
//! the event log's appender.

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Mutex, RwLock};

use actix::{ArbiterHandle, Message, Recipient};

use super::error::CoreError;
use super::messages::{
    BindVolume, CreateSnapshot, CreateVolume, DeleteBackend, DeleteSnapshot, DeleteVolume,
    PublishVolume, Reconcile, Rematch, ResizeVolume, StopBackend, UnpublishVolume, UpdateBackend,
};
use super::options::CoreOptions;
use crate::drivers::{DriverError, LimitedDriver};
use crate::events::Event;
use crate::log::{Appender, EventLog, NewEvent};
use crate::model::PoolRef;
use crate::projections::{BackendState, Projection};
use crate::secrets::SecretBox;

/// Start-up state of the core.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Readiness {
    Replaying,
    Ready,
    /// Replicated through etcd and not the leader: reads are served from the replicated
    /// projection, writes are refused with the leader's name.
    Standby {
        leader: String,
    },
    Failed(String),
}

/// What the rest of the core can see of one backend actor without messaging it.
#[derive(Debug)]
pub(crate) struct BackendStatus {
    state: RwLock<BackendState>,
    /// The driver behind the backend's concurrency limit, once built (a backend from the log
    /// builds it in its actor, with retries). An update starts a new actor with a new status.
    driver: RwLock<Option<Arc<LimitedDriver>>>,
    /// Creates planned onto this backend first whose intent is still being made durable:
    /// counted so that a burst planned before any of its calls reached the driver spreads
    /// instead of all seeing the same idle backends.
    pub planned: AtomicUsize,
}

impl BackendStatus {
    pub fn new(state: BackendState, driver: Option<Arc<LimitedDriver>>) -> BackendStatus {
        BackendStatus {
            state: RwLock::new(state),
            driver: RwLock::new(driver),
            planned: AtomicUsize::new(0),
        }
    }

    pub fn state(&self) -> BackendState {
        read(&self.state).clone()
    }

    pub fn set_state(&self, state: BackendState) {
        *write(&self.state) = state;
    }

    pub fn driver(&self) -> Option<Arc<LimitedDriver>> {
        read(&self.driver).clone()
    }

    pub fn set_driver(&self, driver: Arc<LimitedDriver>) {
        *write(&self.driver) = Some(driver);
    }

    /// The driver, if the backend takes calls now (online, or offline for its volumes).
    pub fn usable_driver(&self, backend: &str) -> Result<Arc<LimitedDriver>, DriverError> {
        match (self.driver(), self.state()) {
            (Some(d), BackendState::Online | BackendState::Offline) => Ok(d),
            (_, BackendState::Failed(why)) => Err(DriverError::Unavailable(format!(
                "backend {backend} is not available: {why}"
            ))),
            _ => Err(DriverError::Unavailable(format!(
                "backend {backend} is still initializing"
            ))),
        }
    }
}

#[derive(Clone)]
pub(crate) struct BackendSlot {
    pub update: Recipient<UpdateBackend>,
    pub delete: Recipient<DeleteBackend>,
    pub stop: Recipient<StopBackend>,
    pub reconcile: Recipient<super::drift::ReconcileBackend>,
    pub status: Arc<BackendStatus>,
}

#[derive(Clone)]
pub(crate) struct ClassSlot {
    pub rematch: Recipient<Rematch>,
    /// Pools of online backends that match, as last computed by the class actor.
    pub matched: Arc<BTreeSet<PoolRef>>,
}

/// A live volume actor, by the messages it takes.
#[derive(Clone)]
pub(crate) struct VolumeRecipients {
    pub create: Recipient<CreateVolume>,
    pub delete: Recipient<DeleteVolume>,
    pub reconcile: Recipient<Reconcile>,
    pub create_snapshot: Recipient<CreateSnapshot>,
    pub delete_snapshot: Recipient<DeleteSnapshot>,
    pub resize: Recipient<ResizeVolume>,
    pub publish: Recipient<PublishVolume>,
    pub unpublish: Recipient<UnpublishVolume>,
    pub bind: Recipient<BindVolume>,
    pub check_on_array: Recipient<super::drift::CheckOnArray>,
    pub import: Recipient<super::drift::ImportVolume>,
}

impl VolumeRecipients {
    pub fn connected(&self) -> bool {
        self.reconcile.connected()
    }

    /// Whether both reach the same actor.
    pub fn same(&self, other: &VolumeRecipients) -> bool {
        self.reconcile == other.reconcile
    }
}

/// A message a volume actor takes: picks its recipient.
pub(crate) trait VolumeMessage: Message<Result: Send> + Send + Sized + 'static {
    fn recipient(to: &VolumeRecipients) -> &Recipient<Self>;
}

macro_rules! volume_message {
    ($msg:ty, $field:ident) => {
        impl VolumeMessage for $msg {
            fn recipient(to: &VolumeRecipients) -> &Recipient<Self> {
                &to.$field
            }
        }
    };
}

volume_message!(CreateVolume, create);
volume_message!(DeleteVolume, delete);
volume_message!(Reconcile, reconcile);
volume_message!(CreateSnapshot, create_snapshot);
volume_message!(DeleteSnapshot, delete_snapshot);
volume_message!(ResizeVolume, resize);
volume_message!(PublishVolume, publish);
volume_message!(UnpublishVolume, unpublish);
volume_message!(BindVolume, bind);
volume_message!(super::drift::CheckOnArray, check_on_array);
volume_message!(super::drift::ImportVolume, import);

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
    pub volumes: Mutex<HashMap<String, VolumeRecipients>>,
    /// Committed envelopes, for `Core::follow`.
    pub followers: tokio::sync::broadcast::Sender<Arc<crate::log::Envelope>>,
    /// Each stream's sequences in the log, for `Core::events` by object.
    pub streams: super::audit::StreamIndex,
    /// Serialises backend and storage-class commands (rare; volumes never take it).
    pub admin: tokio::sync::Mutex<()>,
    /// A config file is to be applied and has not been yet (readiness waits for it).
    pub config_pending: std::sync::atomic::AtomicBool,
    /// The log was cut back at start (`--truncate-corrupt-tail`): the event saying so, to be
    /// appended once the writer runs.
    pub cut_back: Mutex<Option<crate::events::LogEvent>>,
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
            use crate::log::LogError;
            // A full disk is logged once, by the log, when it turns short and when it is not.
            if !matches!(e, LogError::DiskFull { .. }) {
                tracing::error!(error = %e, "event log append failed");
            }
            // A leader whose log takes no writes gives the leadership up, so that a standby
            // takes over now rather than when the lease runs out (never: it is renewed).
            if let (LogError::Poisoned(_) | LogError::DiskFull { .. }, Some(node)) =
                (&e, &self.opts.replication)
            {
                let node = node.clone();
                let reason = format!("its event log takes no writes: {}", e.public_reason());
                tokio::spawn(async move { node.step_down(reason).await });
            }
            CoreError::LogUnavailable(e.public_reason())
        })?;
        Ok(seqs.last().copied().unwrap_or(0))
    }

    pub fn log(&self) -> Option<Arc<EventLog>> {
        read(&self.log).clone()
    }

    pub fn backend(&self, name: &str) -> Option<BackendSlot> {
        read(&self.backends).get(name).cloned()
    }

    /// Stops and unregisters a backend actor (in-flight calls finish on their own).
    pub fn stop_backend(&self, name: &str) {
        if let Some(slot) = write(&self.backends).remove(name) {
            slot.stop.do_send(StopBackend);
        }
    }
}

/// The wall clock in Unix milliseconds (for what an event says was noticed or observed when).
pub(crate) fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// How long an actor waits before retrying failed work (a backend's driver start, a volume's
/// delete): 1 s, 2 s, 4 s … capped at 60 s.
pub(crate) fn retry_delay(attempt: u32) -> std::time::Duration {
    crate::net::backoff(
        attempt,
        std::time::Duration::from_secs(1),
        std::time::Duration::from_secs(60),
    )
}
