//! The fake array's state file: its JSON shape, encoding and loading.

use std::collections::{BTreeMap, HashMap};
use std::fs;

use serde::{Deserialize, Serialize};

use super::FakeDriver;
use super::client::{ArrayState, Grant, Persister, Snapshot, Volume};
use super::config::Pool;
use crate::drivers::{DriverError, DriverResult};
use crate::model::Protocol;

/// The version of the state file format.
const STATE_FORMAT: u32 = 1;

/// The state file, as written and read.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct StateFile {
    format: u32,
    instance_name: String,
    pools: BTreeMap<String, PoolRecord>,
    volumes: BTreeMap<String, VolumeRecord>,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct PoolRecord {
    total_bytes: u64,
    free_bytes: u64,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct VolumeRecord {
    pool: String,
    size_bytes: u64,
    protocol: Protocol,
    #[serde(default)]
    snapshots: Vec<Snapshot>,
    /// `perHostAccess`: the hosts granted access, by node name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    hosts: BTreeMap<String, Grant>,
}

impl FakeDriver {
    pub(super) fn encode_state(&self, st: &ArrayState) -> Vec<u8> {
        let file = StateFile {
            format: STATE_FORMAT,
            instance_name: self.cfg.instance_name.clone(),
            pools: self
                .cfg
                .pools
                .iter()
                .zip(&st.free)
                .map(|(p, free)| {
                    let record = PoolRecord {
                        total_bytes: p.size_bytes,
                        free_bytes: *free,
                    };
                    (p.info.name.clone(), record)
                })
                .collect(),
            volumes: st
                .volumes
                .iter()
                .map(|(name, v)| {
                    let record = VolumeRecord {
                        pool: self.cfg.pools[v.pool].info.name.clone(),
                        size_bytes: v.size_bytes,
                        protocol: v.protocol,
                        snapshots: v.snapshots.clone(),
                        hosts: v.hosts.clone(),
                    };
                    (name.clone(), record)
                })
                .collect(),
        };
        // Plain data with string keys: serialising cannot fail.
        serde_json::to_vec_pretty(&file).unwrap_or_default()
    }
}

/// Reads the state file into `state`. A missing file is an empty array; the temp file is never
/// read.
pub(super) fn load_state(
    p: &Persister,
    instance_name: &str,
    pools: &[Pool],
    pool_index: &HashMap<String, usize>,
    state: &mut ArrayState,
) -> DriverResult<()> {
    let path = p.path.display();
    let invalid = |msg: String| DriverError::Invalid(format!("invalid statePath {path}: {msg}"));
    if !p.dir.is_dir() {
        return Err(invalid(format!(
            "directory {} does not exist",
            p.dir.display()
        )));
    }
    let bytes = match fs::read(&p.path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(invalid(format!("cannot read it: {e}"))),
    };
    let file: StateFile = serde_json::from_slice(&bytes)
        .map_err(|e| invalid(format!("not a fake array state file: {e}")))?;
    if file.format != STATE_FORMAT {
        return Err(invalid(format!(
            "state file format {} is not supported (expected {STATE_FORMAT})",
            file.format
        )));
    }
    if file.instance_name != instance_name {
        return Err(invalid(format!(
            "it belongs to fake instance {:?}, not {instance_name:?}",
            file.instance_name
        )));
    }
    let mut used = vec![0u64; pools.len()];
    for (name, v) in file.volumes {
        let Some(&pool) = pool_index.get(&v.pool) else {
            return Err(invalid(format!(
                "volume {name} is in pool {}, which is not configured",
                v.pool
            )));
        };
        used[pool] = used[pool].saturating_add(v.size_bytes);
        let protocol = if v.protocol == Protocol::Block {
            Protocol::Block
        } else {
            Protocol::File
        };
        state.volumes.insert(
            name,
            Volume {
                pool,
                size_bytes: v.size_bytes,
                protocol,
                snapshots: v.snapshots,
                hosts: v.hosts,
            },
        );
    }
    for (i, pool) in pools.iter().enumerate() {
        // What the array had used stays used, even if the configured size changed.
        let used = match file.pools.get(&pool.info.name) {
            Some(r) => r.total_bytes.saturating_sub(r.free_bytes),
            None => used[i],
        };
        state.free[i] = pool.size_bytes.saturating_sub(used);
    }
    Ok(())
}
