//! The simulated Element cluster: accounts, volumes, snapshots, volume access groups and
//! async handles. Plain data (serde), so it is also the `--state` file format.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The state file format version.
pub const FORMAT: u32 = 1;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Cluster {
    pub format: u32,
    pub name: String,
    /// Four lower-case letters; IQNs and SCSI device ids derive from it.
    pub unique_id: String,
    pub uuid: String,
    pub mvip: String,
    /// `IP:PORT` of the iSCSI portal.
    pub svip: String,
    /// Bytes that volumes may provision in total (deleted-but-not-purged ones count).
    pub capacity: u64,
    /// The cluster's IOPS ceiling: the highest maxIOPS/burstIOPS a volume may ask for.
    pub max_iops: u64,
    pub accounts: BTreeMap<u64, Account>,
    pub volumes: BTreeMap<u64, Volume>,
    pub snapshots: BTreeMap<u64, Snapshot>,
    pub groups: BTreeMap<u64, AccessGroup>,
    pub asyncs: BTreeMap<u64, AsyncJob>,
    /// The next id of each kind (Element numbers each kind from 1).
    pub next: NextIds,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NextIds {
    pub account: u64,
    pub volume: u64,
    pub snapshot: u64,
    pub group: u64,
    pub handle: u64,
    pub clone: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Account {
    pub username: String,
    pub initiator_secret: String,
    pub target_secret: String,
    pub attributes: Value,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Qos {
    pub min: u64,
    pub max: u64,
    pub burst: u64,
}

/// The cluster's default QoS (what an empty `qos` object means).
pub const DEFAULT_QOS: Qos = Qos {
    min: 50,
    max: 15000,
    burst: 15000,
};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Volume {
    pub name: String,
    pub account_id: u64,
    pub create_time: String,
    /// `active` or `deleted`.
    pub status: String,
    pub delete_time: String,
    pub access: String,
    pub enable512e: bool,
    pub total_size: u64,
    pub qos: Qos,
    /// Kept verbatim, as the client sent it.
    pub attributes: Value,
    /// List calls (and GetAsyncResult polls of its clone job) that still leave the volume out:
    /// a new volume or clone becomes visible only after this many polls.
    #[serde(default)]
    pub hidden_polls: u32,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Snapshot {
    pub volume_id: u64,
    pub name: String,
    pub create_time: String,
    pub total_size: u64,
    pub checksum: String,
    pub retention: String,
    pub enable_remote_replication: bool,
    pub attributes: Value,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AccessGroup {
    pub name: String,
    pub initiators: Vec<String>,
    /// Member volume ids (active and deleted; answers split them).
    pub volumes: Vec<u64>,
    pub attributes: Value,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AsyncJob {
    /// `Clone`.
    pub result_type: String,
    pub create_time: String,
    pub volume_id: u64,
    pub clone_id: u64,
}

/// How a fresh cluster is made.
#[derive(Debug, Clone, PartialEq)]
pub struct ClusterSpec {
    pub mvip: String,
    pub svip: String,
    pub capacity: u64,
    pub max_iops: u64,
    /// An account that exists from the start (the driver creates it when missing).
    pub tenant: Option<String>,
}

impl Cluster {
    /// A fresh cluster: no volumes, the optional tenant account, and one volume access group
    /// named `trident` (the group Trident looks for when none is configured).
    pub fn new(spec: &ClusterSpec) -> Cluster {
        let mut c = Cluster {
            format: FORMAT,
            name: "sim-element".into(),
            unique_id: random_letters(4),
            uuid: format!(
                "5f1d0000-0000-4000-8000-{:012x}",
                rand::random::<u64>() >> 16
            ),
            mvip: spec.mvip.clone(),
            svip: spec.svip.clone(),
            capacity: spec.capacity,
            max_iops: spec.max_iops,
            accounts: BTreeMap::new(),
            volumes: BTreeMap::new(),
            snapshots: BTreeMap::new(),
            groups: BTreeMap::new(),
            asyncs: BTreeMap::new(),
            next: NextIds {
                account: 1,
                volume: 1,
                snapshot: 1,
                group: 1,
                handle: 1,
                clone: 1,
            },
        };
        if let Some(t) = &spec.tenant {
            c.add_account(t, None, None, Value::Object(Default::default()));
        }
        let id = take(&mut c.next.group);
        c.groups.insert(
            id,
            AccessGroup {
                name: "trident".into(),
                initiators: Vec::new(),
                volumes: Vec::new(),
                attributes: Value::Object(Default::default()),
            },
        );
        c
    }

    /// Adds an account, generating the secrets not given; returns its id.
    pub fn add_account(
        &mut self,
        username: &str,
        initiator: Option<String>,
        target: Option<String>,
        attributes: Value,
    ) -> u64 {
        let id = take(&mut self.next.account);
        self.accounts.insert(
            id,
            Account {
                username: username.to_string(),
                initiator_secret: initiator.unwrap_or_else(chap_secret),
                target_secret: target.unwrap_or_else(chap_secret),
                attributes,
            },
        );
        id
    }

    /// Bytes provisioned by every volume that is not purged.
    pub fn provisioned(&self) -> u64 {
        self.volumes.values().map(|v| v.total_size).sum()
    }

    /// The volume's IQN: `iqn.2010-01.com.solidfire:<uniqueID>.<lower-cased name>.<id>`.
    pub fn iqn(&self, id: u64, v: &Volume) -> String {
        format!(
            "iqn.2010-01.com.solidfire:{}.{}.{id}",
            self.unique_id,
            v.name.to_lowercase()
        )
    }
}

/// Returns the counter's value and advances it.
pub fn take(counter: &mut u64) -> u64 {
    let id = *counter;
    *counter += 1;
    id
}

/// A CHAP secret: 12 to 16 printable characters (letters and digits).
pub fn chap_secret() -> String {
    const CHARS: &[u8] = b"ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnpqrstuvwxyz23456789";
    let len = 12 + (rand::random::<u32>() % 5) as usize;
    (0..len)
        .map(|_| CHARS[rand::random::<u32>() as usize % CHARS.len()] as char)
        .collect()
}

fn random_letters(n: usize) -> String {
    (0..n)
        .map(|_| (b'a' + (rand::random::<u32>() % 26) as u8) as char)
        .collect()
}

/// Now, as Element writes times: `2016-11-22T15:40:16Z`.
pub fn now_iso() -> String {
    humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_12_to_16_printable_chars() {
        for _ in 0..200 {
            let s = chap_secret();
            assert!((12..=16).contains(&s.len()), "{s}");
            assert!(s.chars().all(|c| c.is_ascii_graphic()), "{s}");
        }
    }

    #[test]
    fn fresh_cluster_has_the_tenant_and_the_trident_group() {
        let c = Cluster::new(&ClusterSpec {
            mvip: "127.0.0.1".into(),
            svip: "127.0.0.1:3260".into(),
            capacity: 1 << 40,
            max_iops: 200_000,
            tenant: Some("trident".into()),
        });
        assert_eq!(c.accounts[&1].username, "trident");
        assert_eq!(c.groups[&1].name, "trident");
        assert_eq!(c.unique_id.len(), 4);
        assert!(now_iso().ends_with('Z'));
    }
}
