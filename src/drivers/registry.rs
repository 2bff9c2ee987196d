//! Which driver serves which `storageDriverName`.

use std::sync::Arc;

use super::{DriverError, StorageDriver};

/// A driver built from a backend config, with the backend name it reports.
#[derive(Debug, Clone)]
pub struct BuiltDriver {
    pub driver: Arc<dyn StorageDriver>,
    pub common: super::CommonConfig,
}

/// Builds the driver named by the config's `storageDriverName`. Does not contact the array;
/// `discover` does. Errors name the field (`unknown storage driver: X`, …).
pub fn build_driver(doc: &serde_json::Value) -> Result<BuiltDriver, DriverError> {
    let _ = doc;
    todo!()
}
