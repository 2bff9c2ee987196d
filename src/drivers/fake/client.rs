//! The fake array itself: its contents behind one mutex, and the state file's durable writes.

use std::collections::{BTreeMap, HashMap};
use std::fs;
use std::io::Write;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

use super::FakeDriver;
use crate::drivers::{DriverError, DriverResult};
use crate::model::Protocol;

/// The fake array's contents: one mutex around all of it.
#[derive(Debug, Default)]
pub(super) struct ArrayState {
    /// Remaining bytes per pool, indexed like `FakeDriver::pools`.
    pub(super) free: Vec<u64>,
    pub(super) volumes: HashMap<String, Volume>,
    /// Bumped on every mutation when persisting; orders state-file writes.
    pub(super) generation: u64,
}

#[derive(Debug, Clone)]
pub(super) struct Volume {
    pub(super) pool: usize,
    pub(super) size_bytes: u64,
    /// `File` or `Block`: how the volume is served.
    pub(super) protocol: Protocol,
    pub(super) snapshots: Vec<Snapshot>,
    /// `perHostAccess`: the hosts granted access, by node name.
    pub(super) hosts: BTreeMap<String, Grant>,
}

/// One host's access to a volume (`perHostAccess`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Grant {
    /// The host's iSCSI initiator (block volumes need one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) initiator: Option<String>,
    /// The LUN number the volume has in this host's mappings (block volumes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) lun: Option<u32>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Snapshot {
    pub(super) name: String,
    pub(super) created_ms: u64,
    pub(super) size_bytes: u64,
}

/// Writes the state file atomically; writes are ordered by generation.
#[derive(Debug)]
pub(super) struct Persister {
    pub(super) path: PathBuf,
    pub(super) tmp: PathBuf,
    pub(super) dir: PathBuf,
    /// The generation last written.
    pub(super) written: Mutex<u64>,
}

impl Persister {
    pub(super) fn new(path: PathBuf) -> Persister {
        let mut tmp = path.clone().into_os_string();
        tmp.push(".tmp");
        let dir = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        Persister {
            path,
            tmp: PathBuf::from(tmp),
            dir,
            written: Mutex::new(0),
        }
    }

    /// Writes `bytes` unless a newer generation is already on disk (it includes this one).
    pub(super) fn write(&self, generation: u64, bytes: &[u8]) -> std::io::Result<()> {
        let mut written = self.written.lock().unwrap_or_else(|e| e.into_inner());
        if generation <= *written {
            return Ok(());
        }
        let mut f = fs::File::create(&self.tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        drop(f);
        fs::rename(&self.tmp, &self.path)?;
        fs::File::open(&self.dir)?.sync_all()?;
        *written = generation;
        Ok(())
    }
}

/// A state write to do after the mutex is released.
pub(super) struct Pending {
    pub(super) generation: u64,
    pub(super) bytes: Vec<u8>,
}

impl FakeDriver {
    /// Records a mutation; with a state file, returns the bytes to write once unlocked.
    pub(super) fn commit(&self, st: &mut ArrayState) -> Option<Pending> {
        self.cfg.persister.as_ref()?;
        st.generation += 1;
        Some(Pending {
            generation: st.generation,
            bytes: self.encode_state(st),
        })
    }

    /// Makes a mutation durable before the call returns.
    pub(super) async fn persist(&self, pending: Option<Pending>) -> DriverResult<()> {
        let (Some(pending), Some(persister)) = (pending, &self.cfg.persister) else {
            return Ok(());
        };
        let persister = Arc::clone(persister);
        let result = tokio::task::spawn_blocking(move || {
            persister.write(pending.generation, &pending.bytes)
        })
        .await;
        match result {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(DriverError::Other(format!(
                "fake array {}: cannot write its state file: {e}",
                self.cfg.backend_name
            ))),
            Err(e) => Err(DriverError::Other(format!(
                "fake array {}: state file writer failed: {e}",
                self.cfg.backend_name
            ))),
        }
    }
}
