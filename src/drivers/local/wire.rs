//! The metadata file (`storch-local.json`): the records of volumes and snapshots, and reading
//! them back.

use super::client::Pool;
use super::{
    DRIVER_NAME, METADATA_FILE, METADATA_FORMAT, check_internal_name, check_snapshot_name, fs,
    now_ms,
};
use crate::drivers::{DriverError, DriverResult};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::os::fd::AsFd;

/// How a volume is stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(super) enum Kind {
    /// A directory.
    File,
    /// An image file.
    Block,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(super) enum Provisioning {
    Thin,
    Thick,
}

/// Where a recorded object is in its life. `Creating` and `Deleting` are written before the
/// disk is touched, so that a restart can roll back or finish.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(super) enum Phase {
    Creating,
    Ready,
    Deleting,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct VolumeRecord {
    pub(super) protocol: Kind,
    pub(super) size_bytes: u64,
    pub(super) provisioning: Provisioning,
    pub(super) created_ms: u64,
    pub(super) state: Phase,
    /// `<volume>` or `<volume>@<snapshot>` this volume was cloned from (informational).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) clone_source: Option<String>,
    #[serde(default)]
    pub(super) snapshots: BTreeMap<String, SnapshotRecord>,
    /// A call that excludes every other (create, destroy, block resize) is running.
    #[serde(skip)]
    pub(super) busy: bool,
    /// Calls reading the volume's data (a clone from it, a snapshot of it) are running.
    #[serde(skip)]
    pub(super) readers: u32,
}

impl VolumeRecord {
    pub(super) fn new(kind: Kind, size: u64, provisioning: Provisioning) -> VolumeRecord {
        VolumeRecord {
            protocol: kind,
            size_bytes: size,
            provisioning,
            created_ms: now_ms(),
            state: Phase::Creating,
            clone_source: None,
            snapshots: BTreeMap::new(),
            busy: true,
            readers: 0,
        }
    }

    /// The bytes the pool's accounting counts for this volume and its snapshots.
    pub(super) fn allocated(&self) -> u64 {
        self.snapshots
            .values()
            .fold(self.size_bytes, |sum, s| sum.saturating_add(s.size_bytes))
    }

    /// Whether the volume exists for callers (a create still running does not).
    pub(super) fn visible(&self) -> bool {
        self.state != Phase::Creating
    }

    pub(super) fn thick(&self) -> bool {
        self.provisioning == Provisioning::Thick
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct SnapshotRecord {
    pub(super) created_ms: u64,
    pub(super) size_bytes: u64,
    pub(super) state: Phase,
    /// Being created or deleted.
    #[serde(skip)]
    pub(super) busy: bool,
    /// Clones from this snapshot are running.
    #[serde(skip)]
    pub(super) readers: u32,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct MetadataFile {
    pub(super) format: u32,
    pub(super) driver: String,
    #[serde(default)]
    pub(super) volumes: BTreeMap<String, VolumeRecord>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct MetadataOut<'a> {
    pub(super) format: u32,
    pub(super) driver: &'a str,
    pub(super) volumes: &'a BTreeMap<String, VolumeRecord>,
}

/// Reads a pool's metadata file; a missing file is an empty pool.
pub(super) fn load_records(pool: &Pool) -> DriverResult<BTreeMap<String, VolumeRecord>> {
    let Some(bytes) = fs::read_file(pool.root.as_fd(), METADATA_FILE)
        .map_err(|e| pool.io(&format!("read {METADATA_FILE}"), e))?
    else {
        return Ok(BTreeMap::new());
    };
    let bad = |why: String| {
        DriverError::Other(format!(
            "local pool {} ({}): {METADATA_FILE}: {why}",
            pool.name,
            pool.path.display()
        ))
    };
    let file: MetadataFile = serde_json::from_slice(&bytes)
        .map_err(|e| bad(format!("not a local driver metadata file: {e}")))?;
    if file.format != METADATA_FORMAT || file.driver != DRIVER_NAME {
        return Err(bad(format!(
            "format {} of driver {:?} is not supported (expected format {METADATA_FORMAT} of \
             driver {DRIVER_NAME:?})",
            file.format, file.driver
        )));
    }
    for (name, v) in &file.volumes {
        check_internal_name("internalName", name)
            .map_err(|e| bad(format!("refusing a recorded volume name: {e}")))?;
        for snap in v.snapshots.keys() {
            check_snapshot_name(snap)
                .map_err(|e| bad(format!("refusing a recorded snapshot name: {e}")))?;
        }
    }
    Ok(file.volumes)
}
