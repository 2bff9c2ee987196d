//! The simulated Web Services Proxy and the one E-Series array behind it: registrations,
//! pools, volumes, hosts, host groups, LUN mappings, expansions and volume copy jobs. Plain
//! data (serde), so it is also the `--state` file format.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The state file format version.
pub const FORMAT: u32 = 1;

/// The null ref: 40 zeros (a host in no group has it as `clusterRef`).
pub const NULL_REF: &str = "0000000000000000000000000000000000000000";

/// Ref prefixes (docs/wire-notes.md#the-e-series-simulator): the first four come from refs
/// seen on real arrays; controller and copy-pair prefixes are the simulator's choice.
pub mod prefix {
    pub const VOLUME: &str = "02";
    pub const POOL: &str = "04";
    pub const CONTROLLER: &str = "07";
    pub const COPY_JOB: &str = "18";
    pub const HOST: &str = "84";
    pub const HOST_GROUP: &str = "85";
    pub const INITIATOR: &str = "89";
    pub const MAPPING: &str = "88";
    pub const TARGET: &str = "90";
}

/// The proxy: the storage systems registered with it and the array it can reach.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Proxy {
    pub format: u32,
    /// Registered storage systems by id.
    pub systems: BTreeMap<String, Registration>,
    pub array: Array,
}

/// One registered storage system.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Registration {
    pub controller_addresses: Vec<String>,
    /// The array password the proxy keeps for it.
    pub stored_password: String,
    /// Whether these addresses are the simulated array's (others are never reachable).
    pub reachable: bool,
    pub wwn: Option<String>,
}

/// The simulated array.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Array {
    pub name: String,
    /// 32 upper-case hex digits.
    pub wwn: String,
    pub serial: String,
    /// Management addresses of controllers A and B.
    pub controllers: Vec<String>,
    /// iSCSI portals (`IP`), spread over the controllers.
    pub portals: Vec<String>,
    /// The array's own password (set from `--array-password` at every start).
    pub password: String,
    /// Set from `--offline` at every start (or by a test).
    pub offline: bool,
    /// Set from `--features` at every start (or by a test).
    pub features: Features,
    pub pools: BTreeMap<String, Pool>,
    pub volumes: BTreeMap<String, Volume>,
    pub hosts: BTreeMap<String, Host>,
    pub groups: BTreeMap<String, HostGroup>,
    pub mappings: BTreeMap<String, Mapping>,
    pub copy_jobs: BTreeMap<String, CopyJob>,
    /// The last number used in a ref.
    pub counter: u64,
}

/// What the array supports beyond Trident 18.07's calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Features {
    /// `POST/GET …/volumes/{ref}/expand`.
    pub expand: bool,
    /// `…/volume-copy-jobs` and `…/volume-copy-jobs-control`.
    pub copy: bool,
}

impl Features {
    pub const ALL: Features = Features {
        expand: true,
        copy: true,
    };

    /// `expand,copy`, a subset, or `none`.
    pub fn parse(s: &str) -> Result<Features, String> {
        let mut f = Features {
            expand: false,
            copy: false,
        };
        if s.trim() == "none" {
            return Ok(f);
        }
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            match part {
                "expand" => f.expand = true,
                "copy" => f.copy = true,
                other => {
                    return Err(format!(
                        "--features: unknown feature {other:?} (expand, copy or none)"
                    ));
                }
            }
        }
        Ok(f)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Pool {
    pub label: String,
    /// `hdd` or `ssd`.
    pub media: String,
    /// raid0, raid1, raid5, raid6 or raidDiskPool.
    pub raid: String,
    /// Usable bytes.
    pub size: u64,
    pub offline: bool,
    /// Whether volumes in it may have data assurance.
    pub da_capable: bool,
    pub sequence: u64,
}

impl Pool {
    pub fn disk_pool(&self) -> bool {
        self.raid == "raidDiskPool"
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Volume {
    pub label: String,
    pub pool: String,
    /// Bytes the volume reports.
    pub capacity: u64,
    /// Bytes the volume holds in its pool (more than `capacity` while an expansion runs).
    pub reserved: u64,
    /// Segment size in bytes.
    pub segment_size: u64,
    pub data_assurance: bool,
    /// The owning controller's ref.
    pub controller: String,
    pub wwn: String,
    /// `[key, value]` pairs, as sent in `metaTags`.
    pub metadata: Vec<(String, String)>,
    pub expansion: Option<Expansion>,
}

/// A running dynamic volume expansion.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Expansion {
    /// The size the volume grows to.
    pub target: u64,
    /// Polls left before it completes.
    pub polls_left: u32,
    pub polls_total: u32,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Host {
    pub label: String,
    pub host_type: u64,
    /// The host group's ref, or [`NULL_REF`].
    pub group: String,
    pub ports: Vec<HostPort>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HostPort {
    pub kind: String,
    pub address: String,
    pub label: String,
    pub initiator_ref: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HostGroup {
    pub label: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Mapping {
    pub volume: String,
    /// A host's or host group's ref.
    pub target: String,
    pub lun: u32,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CopyJob {
    pub source: String,
    pub target: String,
    pub priority: String,
    pub target_write_protected: bool,
    pub online_copy: bool,
    /// inProgress, complete or stopped.
    pub status: String,
    pub start_time: u64,
    pub complete_time: Option<u64>,
    pub polls_left: u32,
    pub polls_total: u32,
}

/// A pool of a new array: `NAME:MEDIA:SIZE[:RAID][:offline][:no-da]`.
#[derive(Debug, Clone, PartialEq)]
pub struct PoolSpec {
    pub name: String,
    pub media: String,
    pub size: u64,
    pub raid: String,
    pub offline: bool,
    pub da_capable: bool,
}

pub const RAID_LEVELS: &[&str] = &["raid0", "raid1", "raid3", "raid5", "raid6", "raidDiskPool"];

impl PoolSpec {
    pub fn parse(s: &str) -> Result<PoolSpec, String> {
        let bad = |why: &str| {
            format!("--pools {s:?}: {why} (expected NAME:MEDIA:SIZE[:RAID][:offline][:no-da])")
        };
        let parts: Vec<&str> = s.trim().split(':').collect();
        let [name, media, size, rest @ ..] = parts.as_slice() else {
            return Err(bad("too few fields"));
        };
        if name.is_empty() || name.len() > 30 {
            return Err(bad("a pool name is 1 to 30 characters"));
        }
        if !matches!(*media, "hdd" | "ssd") {
            return Err(bad("media is hdd or ssd"));
        }
        let size = crate::model::parse_size(size).map_err(|e| bad(&e.to_string()))?;
        let mut spec = PoolSpec {
            name: name.to_string(),
            media: media.to_string(),
            size,
            raid: "raid6".into(),
            offline: false,
            da_capable: true,
        };
        for r in rest {
            match *r {
                "offline" => spec.offline = true,
                "no-da" => spec.da_capable = false,
                r if RAID_LEVELS.contains(&r) => spec.raid = r.to_string(),
                r => return Err(bad(&format!("unknown field {r:?}"))),
            }
        }
        Ok(spec)
    }

    /// A comma-separated list; names must differ.
    pub fn parse_list(s: &str) -> Result<Vec<PoolSpec>, String> {
        let pools = s
            .split(',')
            .filter(|p| !p.trim().is_empty())
            .map(PoolSpec::parse)
            .collect::<Result<Vec<_>, _>>()?;
        if pools.is_empty() {
            return Err("--pools: at least one pool is needed".into());
        }
        for (i, p) in pools.iter().enumerate() {
            if pools[..i].iter().any(|q| q.name == p.name) {
                return Err(format!("--pools: pool {:?} is named twice", p.name));
            }
        }
        Ok(pools)
    }
}

/// How a fresh array is made, and the settings applied at every start.
#[derive(Debug, Clone, PartialEq)]
pub struct ArraySpec {
    pub pools: Vec<PoolSpec>,
    pub controllers: Vec<String>,
    pub portals: Vec<String>,
    pub password: String,
    pub offline: bool,
    pub features: Features,
}

impl Proxy {
    pub fn new(spec: &ArraySpec) -> Proxy {
        let wwn = format!(
            "600A0980{:016X}{:08X}",
            rand::random::<u64>(),
            rand::random::<u32>()
        );
        let mut array = Array {
            name: "sim-eseries".into(),
            serial: format!("0216{:08}", rand::random::<u32>() % 100_000_000),
            wwn,
            controllers: spec.controllers.clone(),
            portals: spec.portals.clone(),
            password: spec.password.clone(),
            offline: spec.offline,
            features: spec.features,
            pools: BTreeMap::new(),
            volumes: BTreeMap::new(),
            hosts: BTreeMap::new(),
            groups: BTreeMap::new(),
            mappings: BTreeMap::new(),
            copy_jobs: BTreeMap::new(),
            counter: 0,
        };
        for (i, p) in spec.pools.iter().enumerate() {
            let r = array.new_ref(prefix::POOL);
            array.pools.insert(
                r,
                Pool {
                    label: p.name.clone(),
                    media: p.media.clone(),
                    raid: p.raid.clone(),
                    size: p.size,
                    offline: p.offline,
                    da_capable: p.da_capable,
                    sequence: i as u64 + 1,
                },
            );
        }
        Proxy {
            format: FORMAT,
            systems: BTreeMap::new(),
            array,
        }
    }

    /// Applies the settings that hold from start to start (`--array-password`, `--offline`,
    /// `--features`) to a loaded proxy.
    pub fn apply(&mut self, spec: &ArraySpec) {
        self.array.password = spec.password.clone();
        self.array.offline = spec.offline;
        self.array.features = spec.features;
    }
}

impl Array {
    /// A fresh 40-hex ref: 2-digit kind prefix, six zeros, 16 digits of the array's WWN and a
    /// 16-digit counter.
    pub fn new_ref(&mut self, kind: &str) -> String {
        self.counter += 1;
        format!("{kind}000000{}{:016X}", &self.wwn[8..24], self.counter)
    }

    /// The controller refs (A, B).
    pub fn controller_refs(&self) -> Vec<String> {
        (1..=self.controllers.len().max(1))
            .map(|i| format!("{}000000{}{i:016X}", prefix::CONTROLLER, &self.wwn[8..24]))
            .collect()
    }

    /// Bytes the volumes of a pool hold.
    pub fn pool_used(&self, pool: &str) -> u64 {
        self.volumes
            .values()
            .filter(|v| v.pool == pool)
            .map(|v| v.reserved)
            .sum()
    }

    pub fn pool_free(&self, pool: &str) -> u64 {
        self.pools
            .get(pool)
            .map_or(0, |p| p.size.saturating_sub(self.pool_used(pool)))
    }

    /// The target IQN: `iqn.1992-01.com.lsi:2365.<wwn>` (lower case).
    pub fn iqn(&self) -> String {
        format!("iqn.1992-01.com.lsi:2365.{}", self.wwn.to_lowercase())
    }

    /// The mapping of a volume, if any.
    pub fn mapping_of(&self, volume: &str) -> Option<(&String, &Mapping)> {
        self.mappings.iter().find(|(_, m)| m.volume == volume)
    }

    /// Removes a volume with its mapping and its finished copy pairs.
    pub fn remove_volume(&mut self, r: &str) {
        self.volumes.remove(r);
        self.mappings.retain(|_, m| m.volume != r);
        self.copy_jobs.retain(|_, j| j.source != r && j.target != r);
    }
}

/// Seconds since the epoch.
pub fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pool_specs() {
        let p = PoolSpec::parse("ddp1:ssd:2TiB:raidDiskPool:no-da").unwrap();
        assert_eq!(
            (p.name.as_str(), p.media.as_str(), p.size, p.raid.as_str()),
            ("ddp1", "ssd", 2 << 40, "raidDiskPool")
        );
        assert!(!p.da_capable && !p.offline);
        let p = PoolSpec::parse("vg:hdd:1GiB:offline").unwrap();
        assert_eq!(p.raid, "raid6");
        assert!(p.offline && p.da_capable);
        for bad in [
            "x",
            "x:hdd",
            "x:tape:1GiB",
            "x:ssd:lots",
            "x:ssd:1GiB:raid9",
            ":ssd:1GiB",
        ] {
            assert!(PoolSpec::parse(bad).is_err(), "{bad}");
        }
        assert!(PoolSpec::parse_list("a:ssd:1GiB,a:hdd:1GiB").is_err());
        assert!(PoolSpec::parse_list("").is_err());
        assert_eq!(
            PoolSpec::parse_list("a:ssd:1GiB,b:hdd:1GiB").unwrap().len(),
            2
        );
    }

    #[test]
    fn refs_are_40_hex_with_their_prefix() {
        let mut p = Proxy::new(&ArraySpec {
            pools: PoolSpec::parse_list("a:ssd:1GiB").unwrap(),
            controllers: vec!["10.0.0.1".into(), "10.0.0.2".into()],
            portals: vec!["10.0.1.1".into()],
            password: String::new(),
            offline: false,
            features: Features::ALL,
        });
        let r = p.array.new_ref(prefix::VOLUME);
        assert_eq!(r.len(), 40);
        assert!(r.starts_with("02000000"));
        assert!(r.chars().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(r, p.array.new_ref(prefix::VOLUME));
        assert!(
            p.array
                .pools
                .keys()
                .all(|k| k.starts_with("04") && k.len() == 40)
        );
        assert_eq!(p.array.controller_refs().len(), 2);
        assert!(
            p.array
                .iqn()
                .starts_with("iqn.1992-01.com.lsi:2365.600a0980")
        );
        assert_eq!(
            Features::parse("none").unwrap(),
            Features {
                expand: false,
                copy: false
            }
        );
        assert_eq!(Features::parse("copy,expand").unwrap(), Features::ALL);
        assert!(Features::parse("snapshots").is_err());
    }
}
