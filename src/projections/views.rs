//! Read views of the state, as the core hands them to frontends. Queries are answered here,
//! from the projection; what only the running core knows (a backend's runtime state, its free
//! bytes, the pools each class matches) is passed in.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use super::{State, VolumeRecord, VolumeState};
use crate::model::{
    Offer, PoolRef, Protocol, Publication, Segment, StorageClassConfig, UserState, VolumeConfig,
};

/// A backend's health as its actor last saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BackendState {
    /// Driver initialising (at boot).
    Initializing,
    Online,
    /// Deleted by a user while it still has volumes.
    Offline,
    /// The driver failed to initialise or stopped answering; retried with backoff.
    Failed(String),
}

impl BackendState {
    pub fn as_str(&self) -> &'static str {
        match self {
            BackendState::Initializing => "initializing",
            BackendState::Online => "online",
            BackendState::Offline => "offline",
            BackendState::Failed(_) => "failed",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct PoolView {
    pub name: String,
    /// Sorted names of the classes this pool belongs to.
    pub storage_classes: Vec<String>,
    pub offers: BTreeMap<String, Offer>,
    pub total_bytes: Option<u64>,
    pub free_bytes: Option<u64>,
    /// Where the pool is reachable from (its backend's topology; empty: everywhere).
    pub topology: Vec<Segment>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct BackendView {
    pub name: String,
    pub driver: String,
    pub protocol: Protocol,
    /// The external config (common part plus driver fields), never secrets.
    pub config: serde_json::Value,
    pub pools: Vec<PoolView>,
    /// `false` once deleted by a user (Trident's `online`).
    pub online: bool,
    pub state: BackendState,
    /// Sorted volume names.
    pub volumes: Vec<String>,
    /// What an operator decided: `Suspended` takes no new volumes.
    pub user_state: UserState,
}

/// What the running core knows of a backend beyond the log.
#[derive(Debug, Clone)]
pub struct BackendRuntime {
    /// As its actor last saw it (online is shown offline once a user deleted it).
    pub state: BackendState,
    pub free_bytes: BTreeMap<String, u64>,
    /// The driver's external config, when the driver is built (else the recorded one).
    pub config: Option<serde_json::Value>,
    /// Classes each pool belongs to (sorted).
    pub classes: HashMap<PoolRef, Vec<String>>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct StorageClassView {
    pub config: StorageClassConfig,
    /// backend → sorted pool names.
    pub pools: BTreeMap<String, Vec<String>>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct VolumeView {
    /// Secrets in `accessInformation` are redacted.
    pub config: VolumeConfig,
    pub backend: String,
    /// Empty for a clone, as Trident shows it; `placed_pool` is where it is.
    pub pool: String,
    /// The pool the volume lives on (a clone's too).
    pub placed_pool: String,
    pub orphaned: bool,
    pub state: VolumeState,
    /// The last delete failure, while deleting.
    pub last_error: Option<String>,
    /// The hosts it is published to, by node id.
    pub published: BTreeMap<String, Publication>,
    /// Where it is reachable from (its backend's topology; empty: everywhere).
    pub topology: Vec<Segment>,
    /// False for a volume imported with `--no-manage` (a delete forgets it).
    pub managed: bool,
    /// A consumer took it (`VolumeBound`, e.g. a Kubernetes PV was written for it).
    pub bound: bool,
}

/// A snapshot of a volume.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotView {
    pub volume: String,
    pub name: String,
    /// Unix milliseconds; `None` while it is being made.
    pub created_ms: Option<u64>,
    pub size_bytes: u64,
}

/// Why one pool would or would not take a volume of a class.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolExplanation {
    pub backend: String,
    pub pool: String,
    /// Whether a create would try this pool now.
    pub candidate: bool,
    /// Every reason it would not (empty for candidates); the class verdict comes first.
    pub reasons: Vec<String>,
}

/// The placement explanation for a class: every pool of every backend.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Explanation {
    pub storage_class: String,
    pub protocol: Protocol,
    pub size_bytes: Option<u64>,
    pub pools: Vec<PoolExplanation>,
}

impl State {
    /// Backend `name` as shown to users.
    pub fn backend_view(&self, name: &str, runtime: BackendRuntime) -> Option<BackendView> {
        let rec = self.backends.get(name)?;
        let pools = rec
            .pools
            .iter()
            .map(|p| PoolView {
                name: p.name.clone(),
                storage_classes: runtime
                    .classes
                    .get(&PoolRef::new(name, p.name.clone()))
                    .cloned()
                    .unwrap_or_default(),
                offers: p.offers.clone(),
                total_bytes: p.total_bytes,
                free_bytes: runtime.free_bytes.get(&p.name).copied(),
                topology: rec.topology.clone(),
            })
            .collect();
        let config = runtime
            .config
            .unwrap_or_else(|| serde_json::from_str(&rec.config).unwrap_or_default());
        let state = match runtime.state {
            BackendState::Online if !rec.online => BackendState::Offline,
            state => state,
        };
        Some(BackendView {
            name: name.to_string(),
            driver: rec.driver.clone(),
            protocol: rec.protocol,
            config,
            pools,
            online: rec.online,
            state,
            volumes: rec.volumes.iter().map(String::from).collect(),
            user_state: if rec.suspended {
                UserState::Suspended
            } else {
                UserState::Normal
            },
        })
    }

    /// Class `name` with the pools it matches now.
    pub fn class_view(
        &self,
        name: &str,
        matched: Option<&BTreeSet<PoolRef>>,
    ) -> Option<StorageClassView> {
        let config = self.classes.get(name)?.clone();
        let mut pools: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for p in matched.into_iter().flatten() {
            pools
                .entry(p.backend.clone())
                .or_default()
                .push(p.pool.clone());
        }
        Some(StorageClassView { config, pools })
    }

    /// Volume `name`, its access secrets redacted.
    pub fn volume_view(&self, name: &str) -> Option<VolumeView> {
        let rec = self.volumes.get(name)?;
        let mut config = rec.config();
        if rec.access_secrets().is_some() {
            config.access_information.iscsi_initiator_secret = crate::secrets::REDACTED.into();
            config.access_information.iscsi_target_secret = crate::secrets::REDACTED.into();
        }
        // Trident shows clones with an empty pool.
        let pool = if config.clone_source_volume.is_empty() {
            rec.pool().to_string()
        } else {
            String::new()
        };
        Some(VolumeView {
            config,
            backend: rec.backend().to_string(),
            pool,
            placed_pool: rec.pool().to_string(),
            orphaned: rec.orphaned,
            state: rec.state,
            last_error: rec.last_error().map(str::to_string),
            published: rec.publications().clone(),
            topology: self
                .backends
                .get(rec.backend())
                .map(|b| b.topology.clone())
                .unwrap_or_default(),
            managed: rec.managed(),
            bound: rec.bound(),
        })
    }

    /// Snapshots of one volume (`None` if it does not exist), or of every volume; sorted by
    /// volume, then name.
    pub fn snapshot_views(&self, volume: Option<&str>) -> Option<Vec<SnapshotView>> {
        let views = |name: &str, v: &VolumeRecord| {
            v.snapshots()
                .iter()
                .map(|(snap, r)| SnapshotView {
                    volume: name.to_string(),
                    name: snap.clone(),
                    created_ms: r.created_ms,
                    size_bytes: r.size_bytes,
                })
                .collect::<Vec<_>>()
        };
        let mut out = match volume {
            Some(name) => self.volumes.get_key_value(name).map(|(n, v)| views(n, v))?,
            None => self.volumes.iter().flat_map(|(n, v)| views(n, v)).collect(),
        };
        out.sort_by(|a, b| (&a.volume, &a.name).cmp(&(&b.volume, &b.name)));
        Some(out)
    }
}
