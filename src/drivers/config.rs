//! The common part of every backend config (trident-compat §2.1).

/// Parsed common settings. Secrets are not here: see `crate::secrets`.
#[derive(Debug, Clone, PartialEq)]
pub struct CommonConfig {
    pub version: u32,
    pub storage_driver_name: String,
    pub backend_name: Option<String>,
    /// `None`: driver default; `Some("")`: no prefix; `Some(p)`: prefix `p`.
    pub storage_prefix: Option<String>,
    /// `defaults.size` in bytes (default 1 GiB).
    pub default_size_bytes: u64,
}

impl CommonConfig {
    /// Validates and parses the common settings from a backend config document.
    pub fn parse(doc: &serde_json::Value) -> Result<CommonConfig, crate::drivers::DriverError> {
        let _ = doc;
        todo!()
    }
}
