//! Helpers shared by the drivers' tests (unit tests, the conformance suite and the integration
//! tests of each family): request builders, capacity, config merging.

use std::collections::BTreeMap;

use serde_json::Value;

use super::{CloneRequest, CreateRequest, DriverError, StorageDriver};
use crate::model::VolumeConfig;

/// A create of `size` bytes in `pool`, with an empty volume config and no class requests.
pub fn req(name: &str, pool: &str, size: u64) -> CreateRequest {
    CreateRequest {
        internal_name: name.to_string(),
        pool: pool.to_string(),
        size_bytes: size,
        config: VolumeConfig::default(),
        requests: BTreeMap::new(),
    }
}

/// A clone of `source` (from `snap` when given), with an empty volume config.
pub fn clone_req(name: &str, source: &str, snap: Option<&str>) -> CloneRequest {
    CloneRequest {
        internal_name: name.to_string(),
        source_internal_name: source.to_string(),
        source_snapshot: snap.map(str::to_string),
        config: VolumeConfig::default(),
    }
}

/// The free bytes a fresh discovery reports for `pool`.
pub async fn free(d: &dyn StorageDriver, pool: &str) -> u64 {
    d.discover().await.unwrap().free_bytes[pool]
}

/// `doc` with the top-level fields of `extra` merged over it (both JSON objects).
pub fn merged(mut doc: Value, extra: Value) -> Value {
    if let (Value::Object(d), Value::Object(e)) = (&mut doc, extra) {
        d.extend(e);
    }
    doc
}

/// The class of a driver error as a short name, for tables of expected classes.
pub fn class_name(e: &DriverError) -> &'static str {
    match e {
        DriverError::NotFound(_) => "not_found",
        DriverError::AlreadyExists(_) => "exists",
        DriverError::Conflict(_) => "conflict",
        DriverError::Unsupported(_) => "unsupported",
        DriverError::Unavailable(_) => "unavailable",
        DriverError::Invalid(_) => "invalid",
        DriverError::Other(_) => "other",
    }
}
