//! Read models: pure folds over committed events. No I/O, no actix, no drivers.
//!
//! One writer (the log's commit sink) applies events under a write lock; readers take the
//! read lock briefly and copy out what they need. `State` is also what a checkpoint holds.
//!
//! - `views`: the read views the core hands to frontends (backends, classes, volumes,
//!   snapshots, explanations), built from the state plus what only the running core knows.
//! - `replay`: restore (newest checkpoint, then the tail); `state_codec`, `config_codec`: the
//!   checkpoint encoding.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::num::NonZeroU64;
use std::sync::Arc;

use serde::Serialize;

use crate::events::{BackendEvent, Event, Observation, StorageClassEvent, VolumeEvent};
use crate::model::{
    PoolInfo, PoolRef, Protocol, Publication, Sealed, Segment, StorageClassConfig, VolumeConfig,
};

mod config_codec;
mod drift;
mod replay;
mod state_codec;
mod views;

pub use replay::{replay, restore};
pub use views::{
    BackendState, BackendView, Explanation, PoolExplanation, PoolView, SnapshotView,
    StorageClassView, VolumeView,
};

/// A volume's lifecycle state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, bincode::Encode, bincode::Decode)]
pub enum VolumeState {
    /// Intent recorded, placement in progress (or to be reconciled after a crash).
    Creating,
    Online,
    /// Delete requested; retried with backoff until the array confirms.
    Deleting,
    // Variants are only ever appended (bincode encodes the variant index in checkpoints).
    /// Created, but its array no longer holds it (noticed by reconciliation); back to
    /// `Online` when it reappears. Nothing deletes it on that basis.
    Missing,
}

impl VolumeState {
    pub fn as_str(self) -> &'static str {
        match self {
            VolumeState::Creating => "creating",
            VolumeState::Online => "online",
            VolumeState::Deleting => "deleting",
            VolumeState::Missing => "missing",
        }
    }
}

/// Its bincode (in a checkpoint) leaves `volumes` out: the state codec stores each backend's
/// volume set after the volume table, as indices into it.
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
    /// Its volumes (created ones), by name; each name is the one the state's volume map holds.
    pub volumes: VolumeNames,
    /// The declarative config file that manages it, if any.
    pub declared_by: Option<String>,
    /// Where its pools are reachable from (empty: everywhere).
    pub topology: Vec<Segment>,
    /// Suspended by an operator: placement skips its pools (its volumes are still served).
    pub suspended: bool,
    /// What the leader last observed of its driver (`BackendObserved`), its free bytes
    /// adjusted by the volumes created, resized and deleted since; `None` until recorded (a
    /// log from a build that did not record it, or since an update).
    pub observed: Option<Observation>,
}

impl BackendRecord {
    /// Whether `observed` says something the last recording (its free bytes as adjusted
    /// since) does not: only then is it recorded. The time it was observed aside, so a retry
    /// that fails the same way, or a restart that finds what the log says, records nothing.
    pub fn observation_differs(&self, observed: &Observation) -> bool {
        self.observed.as_ref().is_none_or(|last| {
            last.health != observed.health
                || last.free_bytes != observed.free_bytes
                || last.config != observed.config
                || (last.min_bytes, last.max_bytes) != (observed.min_bytes, observed.max_bytes)
        })
    }
}

/// One volume, kept small: a million of them live in memory (72 bytes, boxed in
/// [`Volumes`]). The hot fields are plain — among them what the dashboard filters and sorts
/// by (its class, interned; its protocol; when it was created), so that a pass over every
/// volume decodes no config; the Trident config (with its access information) is kept in a
/// compact encoding that skips empty fields and is decoded on demand
/// ([`VolumeRecord::config`]); where it lives is an interned `PoolRef`; what only matters
/// while a placement or a delete is under way, and snapshots, sit behind one optional box.
#[derive(Debug, Clone, PartialEq)]
pub struct VolumeRecord {
    /// The compact encoding (`config_codec`) of the config as requested, then completed
    /// (internal name, protocol, access info without secrets) when created.
    config: Box<[u8]>,
    pub size_bytes: u64,
    pub state: VolumeState,
    pub orphaned: bool,
    /// The config's protocol (as requested, then as created).
    pub protocol: Protocol,
    /// The config's storage class; `None` for none. Shared by every volume of that class.
    class: Option<Arc<str>>,
    /// Unix milliseconds of the commit of its `VolumeCreated` (or `VolumeImported`); `None`
    /// until created.
    created_ms: Option<NonZeroU64>,
    /// A consumer took it (`VolumeBound`). A plain flag, not an extra: nearly every volume a
    /// frontend provisions gets one, and it fits beside `orphaned` in the record's padding.
    bound: bool,
    /// Where the array put it; `None` until created. Shared by every volume of that pool.
    placed: Option<Arc<PoolRef>>,
    /// `None` when all of its fields are empty (the common case, an online volume).
    extra: Option<Box<VolumeExtra>>,
}

/// The rarely set part of a volume record.
#[derive(Debug, Clone, Default, PartialEq, bincode::Encode, bincode::Decode)]
struct VolumeExtra {
    /// Snapshots by name.
    snapshots: BTreeMap<String, SnapshotRecord>,
    access_secrets: Option<Sealed>,
    /// The placement plan, in order (only while creating).
    candidates: Vec<PoolRef>,
    /// Candidates already tried and failed during this placement.
    failed: Vec<(PoolRef, String)>,
    last_error: Option<String>,
    delete_attempts: u32,
    /// The hosts it is published to, by node id.
    publications: BTreeMap<String, Publication>,
    /// Imported with `--no-manage`: a delete forgets it, never destroys it.
    unmanaged: bool,
}

static NO_SNAPSHOTS: BTreeMap<String, SnapshotRecord> = BTreeMap::new();
static NO_PUBLICATIONS: BTreeMap<String, Publication> = BTreeMap::new();

impl VolumeRecord {
    fn new(config: &VolumeConfig, size_bytes: u64, class: Option<Arc<str>>) -> VolumeRecord {
        VolumeRecord {
            config: config_codec::encode(config),
            size_bytes,
            state: VolumeState::Creating,
            orphaned: false,
            bound: false,
            protocol: config.protocol,
            class,
            created_ms: None,
            placed: None,
            extra: None,
        }
    }

    /// Its storage class (the config's, without decoding it); empty for none.
    pub fn class(&self) -> &str {
        self.class.as_deref().unwrap_or("")
    }

    /// Unix milliseconds of the commit that recorded it created (or imported); `None` while
    /// it is being created.
    pub fn created_ms(&self) -> Option<u64> {
        self.created_ms.map(NonZeroU64::get)
    }

    /// The config as requested, completed when created (decoded: call it once per use).
    pub fn config(&self) -> VolumeConfig {
        match config_codec::decode(&self.config) {
            Some(config) => config,
            // Only this build encodes it (checkpoints of other formats are refused), so this
            // cannot happen short of memory corruption.
            None => {
                tracing::error!("a volume record's config does not decode");
                VolumeConfig::default()
            }
        }
    }

    /// Whether `text` occurs anywhere in the encoded config: a cheap test before decoding it
    /// (false means no field holds `text`; true means decode and look).
    pub fn config_may_contain(&self, text: &str) -> bool {
        let needle = text.as_bytes();
        needle.is_empty() || self.config.windows(needle.len()).any(|w| w == needle)
    }

    fn update_config(&mut self, f: impl FnOnce(&mut VolumeConfig)) {
        let mut config = self.config();
        f(&mut config);
        self.config = config_codec::encode(&config);
    }

    /// The backend and pool the array put it on; `None` until created.
    pub fn placement(&self) -> Option<&PoolRef> {
        self.placed.as_deref()
    }

    /// Empty until created.
    pub fn backend(&self) -> &str {
        self.placed.as_ref().map_or("", |p| p.backend.as_str())
    }

    /// Empty until created (and for clones, as Trident shows them).
    pub fn pool(&self) -> &str {
        self.placed.as_ref().map_or("", |p| p.pool.as_str())
    }

    /// Snapshots by name.
    pub fn snapshots(&self) -> &BTreeMap<String, SnapshotRecord> {
        self.extra.as_ref().map_or(&NO_SNAPSHOTS, |e| &e.snapshots)
    }

    /// The hosts it is published to, by node id.
    pub fn publications(&self) -> &BTreeMap<String, Publication> {
        self.extra
            .as_ref()
            .map_or(&NO_PUBLICATIONS, |e| &e.publications)
    }

    pub fn access_secrets(&self) -> Option<&Sealed> {
        self.extra.as_ref().and_then(|e| e.access_secrets.as_ref())
    }

    /// The placement plan, in order; empty once the outcome is known.
    pub fn candidates(&self) -> &[PoolRef] {
        self.extra.as_ref().map_or(&[], |e| &e.candidates)
    }

    /// Candidates already tried and failed during this placement.
    pub fn failed(&self) -> &[(PoolRef, String)] {
        self.extra.as_ref().map_or(&[], |e| &e.failed)
    }

    pub fn last_error(&self) -> Option<&str> {
        self.extra.as_ref().and_then(|e| e.last_error.as_deref())
    }

    pub fn delete_attempts(&self) -> u32 {
        self.extra.as_ref().map_or(0, |e| e.delete_attempts)
    }

    /// Whether a consumer took it (`VolumeBound`): a Kubernetes PV was written for it.
    pub fn bound(&self) -> bool {
        self.bound
    }

    /// Whether storch may destroy it on the array (false: imported with `--no-manage`).
    pub fn managed(&self) -> bool {
        !self.extra.as_ref().is_some_and(|e| e.unmanaged)
    }

    /// Changes the rarely set fields; the box goes away when they are all empty again.
    fn update_extra(&mut self, f: impl FnOnce(&mut VolumeExtra)) {
        let mut extra = self.extra.take().unwrap_or_default();
        f(&mut extra);
        if *extra != VolumeExtra::default() {
            self.extra = Some(extra);
        }
    }
}

/// The shared `PoolRef`s and class names volume records point at: one allocation per pool
/// or class, not strings per volume. A cache, not state: it is not encoded (decoding a state
/// rebuilds it) and always compares equal.
#[derive(Debug, Clone, Default)]
pub struct Interned {
    pools: HashSet<Arc<PoolRef>>,
    classes: HashSet<Arc<str>>,
}

impl Interned {
    /// The shared copy of `pool` (copied only the first time it is seen).
    fn intern(&mut self, pool: &PoolRef) -> Arc<PoolRef> {
        if let Some(p) = self.pools.get(pool) {
            return p.clone();
        }
        let p = Arc::new(pool.clone());
        self.pools.insert(p.clone());
        p
    }

    /// The shared copy of the class name `class`; `None` for none (empty).
    fn intern_class(&mut self, class: &str) -> Option<Arc<str>> {
        if class.is_empty() {
            return None;
        }
        if let Some(c) = self.classes.get(class) {
            return Some(c.clone());
        }
        let c: Arc<str> = Arc::from(class);
        self.classes.insert(c.clone());
        Some(c)
    }

    /// Forgets pools and classes no volume points at any more.
    fn prune(&mut self) {
        self.pools.retain(|p| Arc::strong_count(p) > 1);
        self.classes.retain(|c| Arc::strong_count(c) > 1);
    }
}

impl PartialEq for Interned {
    fn eq(&self, _: &Interned) -> bool {
        true
    }
}

/// A backend's volume names: the same `Arc<str>`s the volume map's keys are, so a name is
/// stored once. Read it as `&str`s.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VolumeNames(BTreeSet<Arc<str>>);

impl VolumeNames {
    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn contains(&self, name: &str) -> bool {
        self.0.contains(name)
    }

    /// Sorted.
    pub fn iter(&self) -> impl Iterator<Item = &str> {
        self.0.iter().map(|n| &**n)
    }
}

impl<'a> IntoIterator for &'a VolumeNames {
    type Item = &'a str;
    type IntoIter =
        std::iter::Map<std::collections::btree_set::Iter<'a, Arc<str>>, fn(&Arc<str>) -> &str>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.iter().map(|n| &**n)
    }
}

impl Serialize for VolumeNames {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.iter())
    }
}

/// Encodes nothing: see [`BackendRecord`] (the state codec stores the set).
impl bincode::Encode for VolumeNames {
    fn encode<E: bincode::enc::Encoder>(
        &self,
        _: &mut E,
    ) -> Result<(), bincode::error::EncodeError> {
        Ok(())
    }
}

/// Decodes to an empty set, which the state codec then fills.
impl<Context> bincode::Decode<Context> for VolumeNames {
    fn decode<D: bincode::de::Decoder<Context = Context>>(
        _: &mut D,
    ) -> Result<Self, bincode::error::DecodeError> {
        Ok(VolumeNames::default())
    }
}

bincode::impl_borrow_decode!(VolumeNames);

/// Every volume by name. Each record is boxed, so the hash table's empty buckets cost 24
/// bytes (the name and a pointer) rather than a whole record; each name is an `Arc<str>`
/// shared with its backend's [`VolumeNames`]. Read by `&str`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Volumes(HashMap<Arc<str>, Box<VolumeRecord>>);

impl Volumes {
    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn get(&self, name: &str) -> Option<&VolumeRecord> {
        self.0.get(name).map(|v| &**v)
    }

    pub fn get_key_value(&self, name: &str) -> Option<(&str, &VolumeRecord)> {
        self.0.get_key_value(name).map(|(n, v)| (&**n, &**v))
    }

    pub fn contains_key(&self, name: &str) -> bool {
        self.0.contains_key(name)
    }

    /// In no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &VolumeRecord)> {
        self.0.iter().map(|(n, v)| (&**n, &**v))
    }

    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.0.keys().map(|n| &**n)
    }

    pub fn values(&self) -> impl Iterator<Item = &VolumeRecord> {
        self.0.values().map(|v| &**v)
    }
}

impl std::ops::Index<&str> for Volumes {
    type Output = VolumeRecord;

    fn index(&self, name: &str) -> &VolumeRecord {
        self.get(name).unwrap_or_else(|| panic!("no volume {name}"))
    }
}

#[derive(Debug, Clone, PartialEq, bincode::Encode, bincode::Decode)]
pub struct SnapshotRecord {
    /// `None` while the snapshot is being made (intent recorded, outcome not yet).
    pub created_ms: Option<u64>,
    pub size_bytes: u64,
}

/// Everything the log says, folded.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct State {
    /// The sequence of the last applied event.
    pub head: u64,
    pub backends: BTreeMap<String, BackendRecord>,
    pub classes: BTreeMap<String, StorageClassConfig>,
    /// Classes managed by a declarative config file: name → file.
    pub declared_classes: BTreeMap<String, String>,
    pub volumes: Volumes,
    interned: Interned,
}

/// Prefixes an encoded `State`. A state before format 2 began with the varint of its head,
/// whose first byte is never 0xFF, so an older checkpoint is refused, never misread.
const STATE_MAGIC: u8 = 0xFF;
/// 2: compact volume records (encoded config, interned placement, optional extras).
/// 3: the config in `config_codec` (empty fields skipped), snapshots among the extras.
/// 4: `state_codec`: the volume table in chunks decoded in parallel, placements as indices
///    into a pool table, backends' volume sets as indices into the volume table.
/// 5: a backend's topology; a volume's publications and whether it is managed (import
/// `--no-manage`), among its extras.
/// 6: whether a backend is suspended.
/// 7: whether a volume is bound (`VolumeBound`), after `orphaned`; a volume's class (as an
/// index into a class table), protocol and creation time; what the leader last observed of a
/// backend (health, free bytes, external config).
const STATE_FORMAT: u8 = 7;

impl State {
    /// Applies one event, committed at `time_ms` (its envelope's commit time, Unix
    /// milliseconds: replay gives the same time as the live fold did). Never fails: events are
    /// facts; an event about an object the state does not know is ignored (it can only come
    /// from a log written by a buggy build, and is reported by `storch events verify`, not
    /// here).
    pub fn apply(&mut self, seq: u64, time_ms: u64, event: &Event) {
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
                    self.interned.prune();
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
            Event::Volume { name, event } => self.apply_volume(name, time_ms, event),
            // A note for the audit trail; the state is what the records before it made.
            Event::Log { .. } => {}
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
                        volumes: VolumeNames::default(),
                        declared_by: None,
                        topology: Vec::new(),
                        suspended: false,
                        observed: None,
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
                    // What was observed ran the old config (the update's batch records the
                    // new driver's observation after this).
                    b.observed = None;
                }
            }
            BackendEvent::Renamed { to } => {
                if let Some(b) = self.backends.remove(name) {
                    for v in &b.volumes.0 {
                        if let Some(vol) = self.volumes.0.get_mut(&**v) {
                            let pool = vol.pool().to_string();
                            vol.placed = Some(self.interned.intern(&PoolRef::new(to, pool)));
                        }
                    }
                    self.backends.insert(to.clone(), b);
                    self.interned.prune();
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
                self.interned.prune();
            }
            BackendEvent::Declared { source } => {
                if let Some(b) = self.backends.get_mut(name) {
                    b.declared_by = source.clone();
                }
            }
            BackendEvent::TopologyDeclared { segments } => {
                if let Some(b) = self.backends.get_mut(name) {
                    b.topology = segments.clone();
                }
            }
            BackendEvent::Suspended | BackendEvent::Resumed => {
                if let Some(b) = self.backends.get_mut(name) {
                    b.suspended = matches!(event, BackendEvent::Suspended);
                }
            }
            BackendEvent::Observed(observation) => {
                if let Some(b) = self.backends.get_mut(name) {
                    b.observed = Some((**observation).clone());
                }
            }
        }
    }

    /// Takes `bytes` from (or, `release`, gives them back to) the recorded free bytes of the
    /// pool `at`, as the leader's driver calls change them: a create or clone takes its size,
    /// a resize its growth, a destroy gives its size back. A pool whose free bytes were not
    /// recorded stays unknown.
    fn adjust_free(&mut self, at: Option<&PoolRef>, bytes: u64, release: bool) {
        let Some(at) = at else { return };
        let Some(free) = self
            .backends
            .get_mut(&at.backend)
            .and_then(|b| b.observed.as_mut())
            .and_then(|o| o.free_bytes.get_mut(&at.pool))
        else {
            return;
        };
        *free = if release {
            free.saturating_add(bytes)
        } else {
            free.saturating_sub(bytes)
        };
    }

    fn apply_volume(&mut self, name: &str, time_ms: u64, event: &VolumeEvent) {
        if let VolumeEvent::Drift(d @ crate::events::DriftEvent::Imported { .. }) = event {
            return self.apply_drift(name, time_ms, d);
        }
        if let VolumeEvent::Requested { config, size_bytes } = event {
            let class = self.interned.intern_class(&config.storage_class);
            self.volumes.0.insert(
                name.into(),
                Box::new(VolumeRecord::new(config, *size_bytes, class)),
            );
            return;
        }
        let Some(vol) = self.volumes.0.get_mut(name) else {
            return;
        };
        match event {
            VolumeEvent::Requested { .. } => unreachable!("handled above"),
            VolumeEvent::PlacementPlanned { candidates, .. } => vol.update_extra(|x| {
                x.candidates = candidates.clone();
                x.failed = Vec::new();
            }),
            VolumeEvent::PlacementAttemptFailed { pool, error } => {
                vol.update_extra(|x| x.failed.push((pool.clone(), error.clone())));
            }
            VolumeEvent::Created {
                pool,
                internal_name,
                protocol,
                access,
                secrets,
                adopted,
            } => {
                // An adopted volume was on the array already: the driver took nothing now.
                let taken = if *adopted { 0 } else { vol.size_bytes };
                vol.state = VolumeState::Online;
                vol.placed = Some(self.interned.intern(pool));
                vol.protocol = *protocol;
                // An adoption after a create that seemed to fail keeps the first time.
                if vol.created_ms.is_none() {
                    vol.created_ms = NonZeroU64::new(time_ms);
                }
                vol.update_config(|c| {
                    c.internal_name = internal_name.clone();
                    c.protocol = *protocol;
                    c.access_information = (**access).clone();
                });
                // The plan only matters until the outcome: give its memory back.
                vol.update_extra(|x| {
                    x.access_secrets = secrets.clone();
                    x.candidates = Vec::new();
                    x.failed = Vec::new();
                });
                if let Some(b) = self.backends.get_mut(&pool.backend)
                    && let Some((name, _)) = self.volumes.0.get_key_value(name)
                {
                    b.volumes.0.insert(name.clone());
                }
                self.adjust_free(Some(pool), taken, false);
            }
            VolumeEvent::CreationFailed { .. } => {
                self.volumes.0.remove(name);
            }
            VolumeEvent::DeleteRequested => {
                vol.state = VolumeState::Deleting;
            }
            VolumeEvent::DeleteFailed { error, attempt } => vol.update_extra(|x| {
                x.last_error = Some(error.clone());
                x.delete_attempts = *attempt;
            }),
            VolumeEvent::Deleted => {
                let Some(vol) = self.volumes.0.remove(name) else {
                    return;
                };
                if let Some(b) = self.backends.get_mut(vol.backend()) {
                    b.volumes.0.remove(name);
                }
                // An unmanaged volume is forgotten, not destroyed: its array keeps the bytes.
                if vol.managed() {
                    self.adjust_free(vol.placement(), vol.size_bytes, true);
                }
            }
            VolumeEvent::OrphanedChanged { orphaned } => {
                vol.orphaned = *orphaned;
            }
            VolumeEvent::SnapshotRequested { snapshot } => vol.update_extra(|x| {
                x.snapshots.insert(
                    snapshot.clone(),
                    SnapshotRecord {
                        created_ms: None,
                        size_bytes: 0,
                    },
                );
            }),
            VolumeEvent::SnapshotCreated {
                snapshot,
                created_ms,
                size_bytes,
            } => vol.update_extra(|x| {
                x.snapshots.insert(
                    snapshot.clone(),
                    SnapshotRecord {
                        created_ms: Some(*created_ms),
                        size_bytes: *size_bytes,
                    },
                );
            }),
            VolumeEvent::SnapshotCreationFailed { snapshot, .. }
            | VolumeEvent::SnapshotDeleted { snapshot } => vol.update_extra(|x| {
                x.snapshots.remove(snapshot);
            }),
            VolumeEvent::Resized { size, size_bytes } => {
                let growth = size_bytes.saturating_sub(vol.size_bytes);
                let at = vol.placed.clone();
                vol.update_config(|c| c.size = size.clone());
                vol.size_bytes = *size_bytes;
                self.adjust_free(at.as_deref(), growth, false);
            }
            VolumeEvent::Published {
                node_id,
                publication,
            } => vol.update_extra(|x| {
                x.publications
                    .insert(node_id.clone(), (**publication).clone());
            }),
            VolumeEvent::Unpublished { node_id } => vol.update_extra(|x| {
                x.publications.remove(node_id);
            }),
            VolumeEvent::Drift(d) => self.apply_drift(name, time_ms, d),
            VolumeEvent::Bound { .. } => vol.bound = true,
        }
    }

    /// Encodes the state for a checkpoint: the format, then [`state_codec`]'s layout.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = vec![STATE_MAGIC, STATE_FORMAT];
        state_codec::encode(self, &mut out);
        out
    }

    /// Decodes what [`State::encode`] wrote (the volume table on all cores); refuses another
    /// format (an older checkpoint: the caller replays the whole log instead).
    pub fn decode(bytes: &[u8]) -> Result<State, String> {
        match bytes {
            [STATE_MAGIC, STATE_FORMAT, body @ ..] => state_codec::decode(body),
            [STATE_MAGIC, format, ..] => Err(format!(
                "state format {format}, this build reads format {STATE_FORMAT}"
            )),
            _ => Err(format!(
                "not a state of format {STATE_FORMAT} (an older checkpoint)"
            )),
        }
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
                Ok(event) => state.apply(env.seq, env.time_ms, &event),
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

#[cfg(test)]
mod tests;
