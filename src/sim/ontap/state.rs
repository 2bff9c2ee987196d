//! The simulated array: aggregates, SVMs, and what each SVM holds. Plain data (serde), so it is
//! also the `--state` file format.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The state file format version.
pub const FORMAT: u32 = 1;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Array {
    pub format: u32,
    pub cluster: String,
    pub ontapi_major: u32,
    pub ontapi_minor: u32,
    pub serial: String,
    pub aggregates: BTreeMap<String, Aggregate>,
    pub svms: BTreeMap<String, Svm>,
    /// Source of uuids, serials and job ids.
    pub next_id: u64,
    #[serde(default)]
    pub jobs: BTreeMap<u64, Job>,
    /// The ONTAP release (`9.15.1`) `GET /api/cluster` reports; `None` (older state files):
    /// derived from the ONTAPI version (see [`Array::release`]).
    #[serde(default)]
    pub release: Option<[u32; 3]>,
    /// Objects made over REST that collection GETs do not list yet: uuid → collection reads
    /// left (ONTAP's eventual visibility after a job; not persisted).
    #[serde(skip)]
    pub unlisted: BTreeMap<String, u32>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Aggregate {
    /// `hdd`, `hybrid`, `ssd`, `vmdisk`…
    pub media: String,
    pub size: u64,
    pub nve_capable: bool,
    pub node: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Svm {
    pub uuid: String,
    pub aggregates: Vec<String>,
    pub lifs: Vec<Lif>,
    /// The iSCSI target name; empty when the SVM has no iSCSI service.
    pub iqn: String,
    pub volumes: BTreeMap<String, Volume>,
    pub luns: BTreeMap<String, Lun>,
    pub igroups: BTreeMap<String, Igroup>,
    pub export_policies: BTreeMap<String, Vec<ExportRule>>,
    /// Destroyed volumes ONTAP keeps for `retention_hours`, by their queue name
    /// `<name>_<dsid>`: that name stays taken and their aggregate space stays held until
    /// they expire or are purged.
    #[serde(default)]
    pub recovery_queue: BTreeMap<String, QueuedVolume>,
    /// `volume-delete-retention-hours`; 0 destroys at once.
    #[serde(default = "default_retention_hours")]
    pub retention_hours: u64,
}

fn default_retention_hours() -> u64 {
    12
}

/// A destroyed volume in the recovery queue.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QueuedVolume {
    /// The name it had.
    pub original: String,
    /// When it was destroyed (epoch seconds).
    pub deleted: u64,
    pub volume: Volume,
}

impl Svm {
    /// Drops the recovery-queue entries whose retention has passed.
    pub fn expire_recovery_queue(&mut self, now: u64) {
        let keep = self.retention_hours.saturating_mul(3600);
        self.recovery_queue
            .retain(|_, q| q.deleted.saturating_add(keep) > now);
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Lif {
    pub name: String,
    pub address: String,
    pub protocols: Vec<String>,
    pub up: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Volume {
    /// `flexvol` or `flexgroup`.
    pub style: String,
    pub aggregates: Vec<String>,
    pub size: u64,
    /// `none` (thin) or `volume` (thick).
    pub space_guarantee: String,
    /// `online` or `offline`.
    pub state: String,
    pub junction: Option<String>,
    pub export_policy: String,
    pub snapshot_policy: String,
    pub snapshot_reserve: u64,
    pub unix_permissions: String,
    pub security_style: String,
    pub snapdir: bool,
    pub encrypt: bool,
    pub comment: String,
    pub is_root: bool,
    pub uuid: String,
    pub created: u64,
    /// Bytes reserved per aggregate (thick volumes reserve their size).
    pub alloc: BTreeMap<String, u64>,
    pub snapshots: BTreeMap<String, Snapshot>,
    /// (parent volume, parent snapshot) of an unsplit FlexClone.
    pub clone_parent: Option<(String, String)>,
    pub qtrees: BTreeMap<String, Qtree>,
    /// Tree quota rules: target (`/vol/v/q`) → disk limit in KiB.
    pub quotas: BTreeMap<String, u64>,
    pub quota_on: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Snapshot {
    pub access_time: u64,
    pub total_kib: u64,
    pub uuid: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Qtree {
    pub id: u64,
    pub mode: String,
    pub security_style: String,
    pub export_policy: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Lun {
    pub size: u64,
    pub serial: String,
    pub uuid: String,
    pub online: bool,
    pub ostype: String,
    pub space_reserved: bool,
    /// The LUN's comment (ZAPI `comment`, REST `comment`).
    #[serde(default)]
    pub comment: String,
    /// igroup → LUN id.
    pub maps: BTreeMap<String, u32>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Igroup {
    pub kind: String,
    pub os_type: String,
    pub uuid: String,
    pub initiators: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExportRule {
    pub index: u32,
    pub client_match: String,
    pub protocols: Vec<String>,
    pub ro_rule: Vec<String>,
    pub rw_rule: Vec<String>,
    pub superuser: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Job {
    pub description: String,
    pub vserver: String,
    /// Polls that still answer `running`.
    pub polls_left: u32,
    /// The errno and message the job fails with once it ends; `None`: it succeeds.
    #[serde(default)]
    pub error: Option<(u32, String)>,
}

/// An aggregate as `--aggregates` gives it: `name:media:size`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AggregateSpec {
    pub name: String,
    pub media: String,
    pub size: u64,
    /// Whether the aggregate can hold NVE-encrypted volumes (`is-nve-capable`).
    pub nve_capable: bool,
}

impl AggregateSpec {
    /// `aggr1:ssd:10TiB`, or `aggr1:ssd:10TiB:no-nve` for an aggregate that cannot encrypt.
    pub fn parse(s: &str) -> Result<AggregateSpec, String> {
        let parts: Vec<&str> = s.trim().split(':').collect();
        let (name, media, size, nve_capable) = match parts.as_slice() {
            [name, media, size] => (*name, *media, *size, true),
            [name, media, size, "nve"] => (*name, *media, *size, true),
            [name, media, size, "no-nve"] => (*name, *media, *size, false),
            _ => {
                return Err(format!(
                    "{s:?}: expected NAME:MEDIA:SIZE[:nve|:no-nve], e.g. aggr1:ssd:10TiB"
                ));
            }
        };
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(format!("{s:?}: aggregate names are letters, digits and _"));
        }
        if !matches!(media, "hdd" | "ssd" | "hybrid" | "vmdisk" | "lun") {
            return Err(format!(
                "{s:?}: media is one of hdd, ssd, hybrid, vmdisk, lun"
            ));
        }
        let size = crate::model::parse_size(size).map_err(|e| format!("{s:?}: {e}"))?;
        Ok(AggregateSpec {
            name: name.to_string(),
            media: media.to_string(),
            size,
            nve_capable,
        })
    }

    /// A comma-separated list.
    pub fn parse_list(s: &str) -> Result<Vec<AggregateSpec>, String> {
        s.split(',')
            .filter(|p| !p.trim().is_empty())
            .map(AggregateSpec::parse)
            .collect()
    }
}

impl Array {
    /// A fresh array: one SVM holding every aggregate, an NFS LIF, two iSCSI LIFs, an iSCSI
    /// target, the `default` export policy (one `0.0.0.0/0` rule) and a root volume.
    pub fn new(svm: &str, aggregates: &[AggregateSpec], ontapi: (u32, u32)) -> Array {
        let mut a = Array {
            format: FORMAT,
            cluster: "sim-cluster".into(),
            ontapi_major: ontapi.0,
            ontapi_minor: ontapi.1,
            serial: "4082368-50-7".into(),
            aggregates: aggregates
                .iter()
                .map(|s| {
                    (
                        s.name.clone(),
                        Aggregate {
                            media: s.media.clone(),
                            size: s.size,
                            nve_capable: s.nve_capable,
                            node: "sim-01".into(),
                        },
                    )
                })
                .collect(),
            svms: BTreeMap::new(),
            next_id: 1,
            jobs: BTreeMap::new(),
            release: None,
            unlisted: BTreeMap::new(),
        };
        a.add_svm(svm, 0);
        a
    }

    /// Adds an SVM with every aggregate assigned; `n` picks distinct LIF addresses.
    pub fn add_svm(&mut self, name: &str, n: u8) {
        let uuid = self.uuid();
        let root_name = format!("{}_root", name.replace('-', "_"));
        let root = Volume {
            style: "flexvol".into(),
            aggregates: self.aggregates.keys().take(1).cloned().collect(),
            size: 1 << 30,
            space_guarantee: "none".into(),
            state: "online".into(),
            junction: Some("/".into()),
            export_policy: "default".into(),
            snapshot_policy: "none".into(),
            snapshot_reserve: 5,
            unix_permissions: "---rwxr-xr-x".into(),
            security_style: "unix".into(),
            snapdir: true,
            encrypt: false,
            comment: String::new(),
            is_root: true,
            uuid: self.uuid(),
            created: now_secs(),
            alloc: BTreeMap::new(),
            snapshots: BTreeMap::new(),
            clone_parent: None,
            qtrees: BTreeMap::new(),
            quotas: BTreeMap::new(),
            quota_on: false,
        };
        let default_rule = ExportRule {
            index: 1,
            client_match: "0.0.0.0/0".into(),
            protocols: vec!["any".into()],
            ro_rule: vec!["any".into()],
            rw_rule: vec!["any".into()],
            superuser: vec!["any".into()],
        };
        let svm = Svm {
            uuid,
            aggregates: self.aggregates.keys().cloned().collect(),
            lifs: vec![
                Lif {
                    name: format!("{name}_nfs_lif1"),
                    address: format!("192.0.2.{}", 10 + n * 10),
                    protocols: vec!["nfs".into(), "cifs".into()],
                    up: true,
                },
                Lif {
                    name: format!("{name}_iscsi_lif1"),
                    address: format!("192.0.2.{}", 11 + n * 10),
                    protocols: vec!["iscsi".into()],
                    up: true,
                },
                Lif {
                    name: format!("{name}_iscsi_lif2"),
                    address: format!("192.0.2.{}", 12 + n * 10),
                    protocols: vec!["iscsi".into()],
                    up: true,
                },
                Lif {
                    name: format!("{name}_nfs_lif_down"),
                    address: format!("192.0.2.{}", 19 + n * 10),
                    protocols: vec!["nfs".into()],
                    up: false,
                },
            ],
            iqn: format!(
                "iqn.1992-08.com.netapp:sn.{:032x}:vs.{}",
                u128::from(self.next_id) * 0x9e37_79b9_7f4a_7c15,
                3 + u32::from(n)
            ),
            volumes: BTreeMap::from([(root_name, root)]),
            luns: BTreeMap::new(),
            igroups: BTreeMap::new(),
            export_policies: BTreeMap::from([("default".to_string(), vec![default_rule])]),
            recovery_queue: BTreeMap::new(),
            retention_hours: default_retention_hours(),
        };
        self.svms.insert(name.to_string(), svm);
    }

    /// The ONTAP release: as configured, else the one matching the ONTAPI version (ONTAPI
    /// 1.MN0+P is ONTAP 9.(MN-10).P: 1.180 is 9.8.0, 1.251 is 9.15.1).
    pub fn release(&self) -> [u32; 3] {
        self.release.unwrap_or_else(|| {
            let m = self.ontapi_minor;
            [9, (m / 10).saturating_sub(10), m % 10]
        })
    }

    pub fn id(&mut self) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        id
    }

    pub fn uuid(&mut self) -> String {
        let id = self.id();
        format!("5e1f0000-0000-4000-8000-{id:012x}")
    }

    /// Bytes reserved on an aggregate by every volume of every SVM, those in a recovery queue
    /// included (until they expire).
    pub fn used(&self, aggr: &str) -> u64 {
        let now = now_secs();
        self.svms
            .values()
            .flat_map(|s| {
                let keep = s.retention_hours.saturating_mul(3600);
                let queued = s
                    .recovery_queue
                    .values()
                    .filter(move |q| q.deleted.saturating_add(keep) > now)
                    .map(|q| &q.volume);
                s.volumes.values().chain(queued)
            })
            .filter_map(|v| v.alloc.get(aggr))
            .sum()
    }

    /// Free bytes of an aggregate.
    pub fn available(&self, aggr: &str) -> u64 {
        self.aggregates
            .get(aggr)
            .map(|a| a.size.saturating_sub(self.used(aggr)))
            .unwrap_or(0)
    }

    /// Plans reserving `bytes` over `aggrs` in order (greedy): per-aggregate amounts, or
    /// `None` when they do not fit.
    pub fn plan_alloc(&self, aggrs: &[String], bytes: u64) -> Option<BTreeMap<String, u64>> {
        let mut left = bytes;
        let mut out = BTreeMap::new();
        for a in aggrs {
            if left == 0 {
                break;
            }
            let take = self.available(a).min(left);
            if take > 0 {
                out.insert(a.clone(), take);
                left -= take;
            }
        }
        (left == 0).then_some(out)
    }
}

pub fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aggregate_specs() {
        let l = AggregateSpec::parse_list("aggr1:ssd:10TiB,aggr2:hdd:50TiB").unwrap();
        assert_eq!(l[0].name, "aggr1");
        assert_eq!(l[0].size, 10 << 40);
        assert_eq!(l[1].media, "hdd");
        assert!(AggregateSpec::parse("a:tape:1G").is_err());
        assert!(AggregateSpec::parse("a:ssd").is_err());
        assert!(AggregateSpec::parse("a b:ssd:1G").is_err());
        assert!(AggregateSpec::parse("a:ssd:lots").is_err());
    }

    #[test]
    fn greedy_allocation() {
        let a = Array::new(
            "svm1",
            &AggregateSpec::parse_list("a1:ssd:10G,a2:ssd:10G").unwrap(),
            (1, 180),
        );
        let aggrs = vec!["a1".to_string(), "a2".to_string()];
        let p = a.plan_alloc(&aggrs, 15 << 30).unwrap();
        assert_eq!(p["a1"], 10 << 30);
        assert_eq!(p["a2"], 5 << 30);
        assert!(a.plan_alloc(&aggrs, (20 << 30) + 1).is_none());
    }
}
