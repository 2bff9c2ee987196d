//! Read models: pure folds over committed events. No I/O, no actix, no drivers.
//!
//! One writer (the log's commit sink) applies events under a write lock; readers take the
//! read lock briefly and copy out what they need. `State` is also what a checkpoint holds.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::events::{BackendEvent, Event, StorageClassEvent, VolumeEvent};
use crate::model::{PoolInfo, PoolRef, Protocol, Sealed, StorageClassConfig, VolumeConfig};

/// A volume's lifecycle state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, bincode::Encode, bincode::Decode)]
pub enum VolumeState {
    /// Intent recorded, placement in progress (or to be reconciled after a crash).
    Creating,
    Online,
    /// Delete requested; retried with backoff until the array confirms.
    Deleting,
}

impl VolumeState {
    pub fn as_str(self) -> &'static str {
        match self {
            VolumeState::Creating => "creating",
            VolumeState::Online => "online",
            VolumeState::Deleting => "deleting",
        }
    }
}

#[derive(Debug, Clone, PartialEq, bincode::Encode, bincode::Decode)]
pub struct BackendRecord {
    pub driver: String,
    /// The config document without secrets (JSON text).
    pub config: String,
    pub secrets: Option<Sealed>,
    pub protocol: Protocol,
    pub pools: Vec<PoolInfo>,
    /// Trident's `online`: false once a user deleted it while it still had volumes.
    pub online: bool,
    pub volumes: BTreeSet<String>,
    /// The declarative config file that manages it, if any.
    pub declared_by: Option<String>,
}

#[derive(Debug, Clone, PartialEq, bincode::Encode, bincode::Decode)]
pub struct VolumeRecord {
    /// The config as requested, then completed (internal name, protocol, access info without
    /// secrets) when created.
    pub config: VolumeConfig,
    pub size_bytes: u64,
    pub state: VolumeState,
    /// Empty until created. `pool` is where the array put it (the API shows clones with an
    /// empty pool, as Trident does).
    pub backend: String,
    pub pool: String,
    pub access_secrets: Option<Sealed>,
    /// The placement plan, in order.
    pub candidates: Vec<PoolRef>,
    /// Candidates already tried and failed during this placement.
    pub failed: Vec<(PoolRef, String)>,
    pub orphaned: bool,
    pub last_error: Option<String>,
    pub delete_attempts: u32,
    /// Snapshots by name.
    pub snapshots: BTreeMap<String, SnapshotRecord>,
}

#[derive(Debug, Clone, PartialEq, bincode::Encode, bincode::Decode)]
pub struct SnapshotRecord {
    /// `None` while the snapshot is being made (intent recorded, outcome not yet).
    pub created_ms: Option<u64>,
    pub size_bytes: u64,
}

/// Everything the log says, folded.
#[derive(Debug, Clone, Default, PartialEq, bincode::Encode, bincode::Decode)]
pub struct State {
    /// The sequence of the last applied event.
    pub head: u64,
    pub backends: BTreeMap<String, BackendRecord>,
    pub classes: BTreeMap<String, StorageClassConfig>,
    /// Classes managed by a declarative config file: name → file.
    pub declared_classes: BTreeMap<String, String>,
    pub volumes: HashMap<String, VolumeRecord>,
}

impl State {
    /// Applies one event. Never fails: events are facts; an event about an object the state
    /// does not know is ignored (it can only come from a log written by a buggy build, and is
    /// reported by `storch events verify`, not here).
    pub fn apply(&mut self, seq: u64, event: &Event) {
        self.head = seq;
        match event {
            Event::Backend { name, event } => self.apply_backend(name, event),
            Event::StorageClass { name, event } => match event {
                StorageClassEvent::Added { config } | StorageClassEvent::Updated { config } => {
                    self.classes.insert(name.clone(), config.clone());
                }
                StorageClassEvent::Deleted => {
                    self.classes.remove(name);
                    self.declared_classes.remove(name);
                }
                StorageClassEvent::Declared { source } => match source {
                    Some(src) => {
                        self.declared_classes.insert(name.clone(), src.clone());
                    }
                    None => {
                        self.declared_classes.remove(name);
                    }
                },
            },
            Event::Volume { name, event } => self.apply_volume(name, event),
        }
    }

    fn apply_backend(&mut self, name: &str, event: &BackendEvent) {
        match event {
            BackendEvent::Added {
                driver,
                config,
                secrets,
            } => {
                self.backends.insert(
                    name.to_string(),
                    BackendRecord {
                        driver: driver.clone(),
                        config: config.clone(),
                        secrets: secrets.clone(),
                        protocol: Protocol::Any,
                        pools: Vec::new(),
                        online: true,
                        volumes: BTreeSet::new(),
                        declared_by: None,
                    },
                );
            }
            BackendEvent::Updated {
                driver,
                config,
                secrets,
            } => {
                if let Some(b) = self.backends.get_mut(name) {
                    b.driver = driver.clone();
                    b.config = config.clone();
                    b.secrets = secrets.clone();
                    b.online = true;
                }
            }
            BackendEvent::Renamed { to } => {
                if let Some(b) = self.backends.remove(name) {
                    for v in &b.volumes {
                        if let Some(vol) = self.volumes.get_mut(v) {
                            vol.backend = to.clone();
                        }
                    }
                    self.backends.insert(to.clone(), b);
                }
            }
            BackendEvent::PoolsDiscovered { protocol, pools } => {
                if let Some(b) = self.backends.get_mut(name) {
                    b.protocol = *protocol;
                    b.pools = pools.clone();
                }
            }
            BackendEvent::Offlined => {
                if let Some(b) = self.backends.get_mut(name) {
                    b.online = false;
                }
            }
            BackendEvent::Purged => {
                self.backends.remove(name);
            }
            BackendEvent::Declared { source } => {
                if let Some(b) = self.backends.get_mut(name) {
                    b.declared_by = source.clone();
                }
            }
        }
    }

    fn apply_volume(&mut self, name: &str, event: &VolumeEvent) {
        if let VolumeEvent::Requested { config, size_bytes } = event {
            let config: &VolumeConfig = config;
            self.volumes.insert(
                name.to_string(),
                VolumeRecord {
                    config: config.clone(),
                    size_bytes: *size_bytes,
                    state: VolumeState::Creating,
                    backend: String::new(),
                    pool: String::new(),
                    access_secrets: None,
                    candidates: Vec::new(),
                    failed: Vec::new(),
                    orphaned: false,
                    last_error: None,
                    delete_attempts: 0,
                    snapshots: BTreeMap::new(),
                },
            );
            return;
        }
        let Some(vol) = self.volumes.get_mut(name) else {
            return;
        };
        match event {
            VolumeEvent::Requested { .. } => unreachable!("handled above"),
            VolumeEvent::PlacementPlanned { candidates, .. } => {
                vol.candidates = candidates.clone();
                vol.failed.clear();
            }
            VolumeEvent::PlacementAttemptFailed { pool, error } => {
                vol.failed.push((pool.clone(), error.clone()));
            }
            VolumeEvent::Created {
                pool,
                internal_name,
                protocol,
                access,
                secrets,
                ..
            } => {
                vol.state = VolumeState::Online;
                vol.backend = pool.backend.clone();
                vol.pool = pool.pool.clone();
                vol.config.internal_name = internal_name.clone();
                vol.config.protocol = *protocol;
                vol.config.access_information = (**access).clone();
                vol.access_secrets = secrets.clone();
                // The plan only matters until the outcome: give its memory back (`clear`
                // would keep the buffer, ~50 B per candidate pool, for every online volume).
                vol.candidates = Vec::new();
                vol.failed = Vec::new();
                if let Some(b) = self.backends.get_mut(&pool.backend) {
                    b.volumes.insert(name.to_string());
                }
            }
            VolumeEvent::CreationFailed { .. } => {
                self.volumes.remove(name);
            }
            VolumeEvent::DeleteRequested => {
                vol.state = VolumeState::Deleting;
            }
            VolumeEvent::DeleteFailed { error, attempt } => {
                vol.last_error = Some(error.clone());
                vol.delete_attempts = *attempt;
            }
            VolumeEvent::Deleted => {
                if let Some(vol) = self.volumes.remove(name)
                    && let Some(b) = self.backends.get_mut(&vol.backend)
                {
                    b.volumes.remove(name);
                }
            }
            VolumeEvent::OrphanedChanged { orphaned } => {
                vol.orphaned = *orphaned;
            }
            VolumeEvent::SnapshotRequested { snapshot } => {
                vol.snapshots.insert(
                    snapshot.clone(),
                    SnapshotRecord {
                        created_ms: None,
                        size_bytes: 0,
                    },
                );
            }
            VolumeEvent::SnapshotCreated {
                snapshot,
                created_ms,
                size_bytes,
            } => {
                vol.snapshots.insert(
                    snapshot.clone(),
                    SnapshotRecord {
                        created_ms: Some(*created_ms),
                        size_bytes: *size_bytes,
                    },
                );
            }
            VolumeEvent::SnapshotCreationFailed { snapshot, .. }
            | VolumeEvent::SnapshotDeleted { snapshot } => {
                vol.snapshots.remove(snapshot);
            }
            VolumeEvent::Resized { size, size_bytes } => {
                vol.config.size = size.clone();
                vol.size_bytes = *size_bytes;
            }
        }
    }

    /// Encodes the state for a checkpoint.
    pub fn encode(&self) -> Vec<u8> {
        bincode::encode_to_vec(self, bincode::config::standard())
            .expect("encoding to a Vec cannot fail")
    }

    pub fn decode(bytes: &[u8]) -> Result<State, String> {
        bincode::decode_from_slice(bytes, bincode::config::standard())
            .map(|(s, _)| s)
            .map_err(|e| e.to_string())
    }
}

/// The live read model, fed by the log's commit sink; the readers' source.
#[derive(Debug, Default)]
pub struct Projection {
    state: std::sync::RwLock<State>,
}

impl Projection {
    pub fn new(state: State) -> Projection {
        Projection {
            state: std::sync::RwLock::new(state),
        }
    }

    /// Runs `f` with the current state under the read lock. Keep `f` short.
    pub fn read<R>(&self, f: impl FnOnce(&State) -> R) -> R {
        f(&self.state.read().unwrap_or_else(|e| e.into_inner()))
    }

    /// Replaces the whole state (after replay).
    pub fn replace(&self, state: State) {
        *self.state.write().unwrap_or_else(|e| e.into_inner()) = state;
    }

    /// Applies committed envelopes in order.
    pub fn apply_envelopes(&self, batch: &[crate::log::Envelope]) {
        let mut state = self.state.write().unwrap_or_else(|e| e.into_inner());
        for env in batch {
            match crate::events::decode(env.schema, &env.payload) {
                Ok(event) => state.apply(env.seq, &event),
                // The writer only commits what this build encoded; this cannot happen short
                // of memory corruption. Keep the head moving and say so.
                Err(e) => {
                    tracing::error!(seq = env.seq, error = %e, "committed event does not decode");
                    state.head = env.seq;
                }
            }
        }
    }
}
