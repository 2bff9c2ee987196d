//! Read views of the state, as the core hands them to frontends. Queries are answered here,
//! from the projection; what only the running core knows (a backend's runtime state, its free
//! bytes, the pools each class matches) is passed in.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use super::{State, VolumeRecord, VolumeState};
use crate::events::{Health, Observation};
use crate::model::{
    CompiledClass, Offer, PoolRef, Protocol, Publication, Segment, StorageClassConfig, UserState,
    VolumeConfig,
};

/// A backend's health: as its actor sees it on the instance that runs it, as the leader
/// recorded it (`BackendObserved`) on a standby.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BackendState {
    /// Driver initialising (at boot).
    Initializing,
    Online,
    /// Deleted by a user while it still has volumes.
    Offline,
    /// The driver failed to initialise or stopped answering; retried with backoff.
    Failed(String),
    /// Not run here (a standby) and its leader has recorded nothing of it yet (a log from a
    /// build that did not record it, or an update not yet observed).
    Unrecorded,
}

impl BackendState {
    pub fn as_str(&self) -> &'static str {
        match self {
            BackendState::Initializing => "initializing",
            BackendState::Online => "online",
            BackendState::Offline => "offline",
            BackendState::Failed(_) => "failed",
            BackendState::Unrecorded => "unknown",
        }
    }

    /// Why it is not online, where there is more to say than its name.
    pub fn reason(&self) -> Option<&str> {
        match self {
            BackendState::Failed(why) => Some(why),
            BackendState::Unrecorded => Some(NOT_RECORDED),
            _ => None,
        }
    }

    /// The health the leader recorded, `Unrecorded` without a recording.
    pub fn recorded(observed: Option<&Observation>) -> BackendState {
        match observed.map(|o| &o.health) {
            Some(Health::Online) => BackendState::Online,
            Some(Health::Failed { reason }) => BackendState::Failed(reason.clone()),
            None => BackendState::Unrecorded,
        }
    }
}

/// The reason of [`BackendState::Unrecorded`].
pub const NOT_RECORDED: &str = "not yet recorded by the leader";

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
    /// When the leader recorded what `config`, the free bytes and (on a standby) `state` say
    /// (Unix milliseconds); `None` until it did.
    pub observed_ms: Option<u64>,
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
    /// Backend `name` as shown to users. `live`: its health as the actor running it sees it
    /// (`None` where it does not run, on a standby: as the leader recorded it). The external
    /// config, the free bytes and the size limits are the leader's recording (the free bytes
    /// adjusted since), the same on every instance; the pools' classes are matched here.
    pub fn backend_view(&self, name: &str, live: Option<BackendState>) -> Option<BackendView> {
        let rec = self.backends.get(name)?;
        let observed = rec.observed.as_ref();
        let classes = self.classes_of_pools();
        let pools = rec
            .pools
            .iter()
            .map(|p| PoolView {
                name: p.name.clone(),
                storage_classes: classes
                    .get(&PoolRef::new(name, p.name.clone()))
                    .cloned()
                    .unwrap_or_default(),
                offers: p.offers.clone(),
                total_bytes: p.total_bytes,
                free_bytes: observed.and_then(|o| o.free_bytes.get(&p.name).copied()),
                topology: rec.topology.clone(),
            })
            .collect();
        let config = observed
            .and_then(|o| o.config.as_deref())
            .unwrap_or(&rec.config);
        let state = match live.unwrap_or_else(|| BackendState::recorded(observed)) {
            BackendState::Online if !rec.online => BackendState::Offline,
            state => state,
        };
        Some(BackendView {
            name: name.to_string(),
            driver: rec.driver.clone(),
            protocol: rec.protocol,
            config: serde_json::from_str(config).unwrap_or_default(),
            pools,
            online: rec.online,
            state,
            volumes: rec.volumes.iter().map(String::from).collect(),
            user_state: if rec.suspended {
                UserState::Suspended
            } else {
                UserState::Normal
            },
            observed_ms: observed.map(|o| o.observed_ms),
        })
    }

    /// Pools of online backends that `class` matches
    /// (docs/trident-contract.md#matching-a-pool-to-a-class; offline backends' pools leave
    /// every class). The class actors and the read views both match through this.
    pub fn matching_pools(&self, class: &CompiledClass) -> BTreeSet<PoolRef> {
        self.backends
            .iter()
            .filter(|(_, b)| b.online)
            .flat_map(|(name, b)| {
                b.pools
                    .iter()
                    .filter(|p| class.matches(name, p))
                    .map(|p| PoolRef::new(name.clone(), p.name.clone()))
            })
            .collect()
    }

    /// Every class, compiled (a recorded class always compiles; one that does not is left out
    /// with an error logged).
    fn compiled_classes(&self) -> impl Iterator<Item = (&str, CompiledClass)> {
        self.classes.iter().filter_map(|(name, config)| {
            match CompiledClass::compile(config.clone()) {
                Ok(compiled) => Some((name.as_str(), compiled)),
                Err(e) => {
                    tracing::error!(class = %name, error = %e, "a recorded class does not compile");
                    None
                }
            }
        })
    }

    /// The classes each pool belongs to (sorted).
    pub fn classes_of_pools(&self) -> HashMap<PoolRef, Vec<String>> {
        let mut out: HashMap<PoolRef, Vec<String>> = HashMap::new();
        for (name, compiled) in self.compiled_classes() {
            for pool in self.matching_pools(&compiled) {
                out.entry(pool).or_default().push(name.to_string());
            }
        }
        out
    }

    /// Class `name` with the pools it matches now.
    pub fn class_view(&self, name: &str) -> Option<StorageClassView> {
        let config = self.classes.get(name)?.clone();
        let mut pools: BTreeMap<String, Vec<String>> = BTreeMap::new();
        let matched = CompiledClass::compile(config.clone())
            .map(|compiled| self.matching_pools(&compiled))
            .unwrap_or_default();
        for p in matched {
            pools.entry(p.backend).or_default().push(p.pool);
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
