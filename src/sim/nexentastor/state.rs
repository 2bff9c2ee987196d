//! The simulated NexentaStor 5 appliance: pools, volume groups, zvols, snapshots, iSCSI
//! targets, target groups, host groups, LUN mappings, remote initiators and asynchronous jobs.
//! Plain data (serde), so it is also the `--state` file format that the two instances of an
//! HA pair share.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The state file format version.
pub const FORMAT: u32 = 1;

/// Finished jobs kept for late polls; older ones are forgotten.
pub const KEPT_JOBS: usize = 1000;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Appliance {
    pub format: u32,
    /// The appliance's `system.guid` (also in the cluster's name).
    pub guid: String,
    /// Pools by name.
    pub pools: BTreeMap<String, Pool>,
    /// Volume groups by path (`pool/vg`).
    pub volume_groups: BTreeMap<String, VolumeGroup>,
    /// zvols by path (`pool/vg/name`).
    pub volumes: BTreeMap<String, Zvol>,
    /// Snapshots by path (`pool/vg/name@snap`).
    pub snapshots: BTreeMap<String, Snapshot>,
    /// iSCSI targets by name (IQN).
    pub targets: BTreeMap<String, Target>,
    /// Target groups: name → member target names.
    pub target_groups: BTreeMap<String, Vec<String>>,
    /// Host groups: name → member initiator names.
    pub host_groups: BTreeMap<String, Vec<String>>,
    /// LUN mappings by id.
    pub lun_mappings: BTreeMap<String, LunMapping>,
    /// CHAP credentials of initiators, by initiator name.
    pub remote_initiators: BTreeMap<String, RemoteInitiator>,
    /// Asynchronous jobs by id.
    pub jobs: BTreeMap<String, Job>,
    /// The last number used in an id.
    pub counter: u64,
    /// The last transaction group number (snapshot `creationTxg`, orders snapshots).
    pub txg: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Pool {
    /// Usable bytes.
    pub size: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VolumeGroup {
    pub pool: String,
    pub block_size: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Zvol {
    pub size: u64,
    pub block_size: u64,
    /// Thin: reserves nothing in the pool; thick reserves `size`.
    pub sparse: bool,
    pub compression: String,
    /// The snapshot this zvol is a clone of.
    pub origin: Option<String>,
    pub created: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Snapshot {
    pub txg: u64,
    pub created: String,
    /// The zvol's size when the snapshot was taken (a clone's size).
    pub volume_size: u64,
    pub block_size: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Portal {
    pub address: String,
    pub port: u16,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Target {
    pub alias: String,
    pub portals: Vec<Portal>,
    /// `none` or `chap`.
    pub authentication: String,
    pub chap_user: String,
    pub chap_secret: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LunMapping {
    pub volume: String,
    pub target_group: String,
    pub host_group: String,
    pub lun: u32,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RemoteInitiator {
    pub chap_user: String,
    pub chap_secret: String,
}

/// A long operation answered 202: it runs when its last running poll has been answered.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Job {
    pub op: Op,
    /// Polls still answered 202.
    pub polls_left: u32,
    /// The answer once it ran: HTTP status and body (None: empty).
    pub outcome: Option<(u16, Option<Value>)>,
}

/// What an asynchronous job does.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Op {
    CreateVolume {
        path: String,
        size: u64,
        block_size: u64,
        sparse: bool,
        compression: String,
    },
    DeleteVolume {
        path: String,
        snapshots: bool,
    },
    DeleteSnapshot {
        path: String,
    },
    Clone {
        snapshot: String,
        target: String,
    },
}

/// A volume group of a new appliance: `POOL/VG:SIZE` (SIZE is the pool's).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VolumeGroupSpec {
    pub pool: String,
    pub group: String,
    pub pool_size: u64,
}

impl VolumeGroupSpec {
    /// `POOL/VG:SIZE,…`; volume groups of one pool name the same size.
    pub fn parse_list(s: &str) -> Result<Vec<VolumeGroupSpec>, String> {
        let mut out: Vec<VolumeGroupSpec> = Vec::new();
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let bad =
                |why: &str| format!("--volume-groups {part:?}: {why} (expected POOL/VG:SIZE)");
            let (path, size) = part.rsplit_once(':').ok_or_else(|| bad("missing :SIZE"))?;
            let (pool, group) = path.split_once('/').ok_or_else(|| bad("missing /VG"))?;
            for name in [pool, group] {
                if !valid_component(name) {
                    return Err(bad("names are letters, digits and _ - . : (not empty)"));
                }
            }
            let pool_size = crate::model::parse_size(size).map_err(|e| bad(&e))?;
            if pool_size == 0 {
                return Err(bad("the pool size is 0"));
            }
            if out.iter().any(|v| v.pool == pool && v.group == group) {
                return Err(bad("named twice"));
            }
            if out
                .iter()
                .any(|v| v.pool == pool && v.pool_size != pool_size)
            {
                return Err(bad(
                    "volume groups of one pool must name the same pool size",
                ));
            }
            out.push(VolumeGroupSpec {
                pool: pool.into(),
                group: group.into(),
                pool_size,
            });
        }
        if out.is_empty() {
            return Err("--volume-groups: at least one POOL/VG:SIZE is needed".into());
        }
        Ok(out)
    }
}

/// A ZFS dataset name component: letters, digits, `_ - . :`, not empty.
pub fn valid_component(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 255
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | ':'))
}

/// The dataset block size a volume group gives its zvols when the create names none.
pub const DEFAULT_BLOCK_SIZE: u64 = 8192;

impl Appliance {
    pub fn new(groups: &[VolumeGroupSpec]) -> Appliance {
        let mut a = Appliance {
            format: FORMAT,
            guid: format!("{:032X}", rand::random::<u128>()),
            pools: BTreeMap::new(),
            volume_groups: BTreeMap::new(),
            volumes: BTreeMap::new(),
            snapshots: BTreeMap::new(),
            targets: BTreeMap::new(),
            target_groups: BTreeMap::new(),
            host_groups: BTreeMap::new(),
            lun_mappings: BTreeMap::new(),
            remote_initiators: BTreeMap::new(),
            jobs: BTreeMap::new(),
            counter: 0,
            txg: 1,
        };
        for g in groups {
            a.pools
                .entry(g.pool.clone())
                .or_insert(Pool { size: g.pool_size });
            a.volume_groups.insert(
                format!("{}/{}", g.pool, g.group),
                VolumeGroup {
                    pool: g.pool.clone(),
                    block_size: DEFAULT_BLOCK_SIZE,
                },
            );
        }
        a
    }

    /// A new id: `counter` in hex, 16 digits.
    pub fn next_id(&mut self) -> String {
        self.counter += 1;
        format!("{:016x}", self.counter)
    }

    /// The pool a dataset path is in (its first component).
    pub fn pool_of(path: &str) -> &str {
        path.split(['/', '@']).next().unwrap_or_default()
    }

    /// Bytes the pool's zvols reserve (thick zvols hold their whole size).
    pub fn pool_used(&self, pool: &str) -> u64 {
        self.volumes
            .iter()
            .filter(|(p, v)| Self::pool_of(p) == pool && !v.sparse)
            .map(|(_, v)| v.size)
            .sum()
    }

    pub fn pool_free(&self, pool: &str) -> u64 {
        let size = self.pools.get(pool).map_or(0, |p| p.size);
        size.saturating_sub(self.pool_used(pool))
    }

    /// Bytes the zvols below `parent/` reserve.
    pub fn used_below(&self, parent: &str) -> u64 {
        let prefix = format!("{parent}/");
        self.volumes
            .iter()
            .filter(|(p, v)| p.starts_with(&prefix) && !v.sparse)
            .map(|(_, v)| v.size)
            .sum()
    }

    /// The zvols cloned from `snapshot`.
    pub fn clones_of(&self, snapshot: &str) -> Vec<String> {
        self.volumes
            .iter()
            .filter(|(_, v)| v.origin.as_deref() == Some(snapshot))
            .map(|(p, _)| p.clone())
            .collect()
    }

    /// The snapshots of dataset `path`, oldest first.
    pub fn snapshots_of(&self, path: &str) -> Vec<String> {
        let prefix = format!("{path}@");
        let mut s: Vec<(&String, &Snapshot)> = self
            .snapshots
            .iter()
            .filter(|(p, _)| p.starts_with(&prefix))
            .collect();
        s.sort_by_key(|(_, snap)| snap.txg);
        s.into_iter().map(|(p, _)| p.clone()).collect()
    }

    /// The host group name `All` (any case) stands for every initiator; it always exists.
    pub fn is_all(name: &str) -> bool {
        name.eq_ignore_ascii_case("all")
    }

    /// Forgets the oldest finished jobs beyond [`KEPT_JOBS`].
    pub fn prune_jobs(&mut self) {
        let finished: Vec<String> = self
            .jobs
            .iter()
            .filter(|(_, j)| j.outcome.is_some())
            .map(|(id, _)| id.clone())
            .collect();
        for id in finished
            .iter()
            .take(finished.len().saturating_sub(KEPT_JOBS))
        {
            self.jobs.remove(id);
        }
    }
}
