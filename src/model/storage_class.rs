//! Storage classes: Trident's `StorageClassConfig` wire shape and matching of pools
//! (trident-compat.md §2.2 and §3.4).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{PoolInfo, Request};

/// `backend regex → [pool regex]`, as in `storagePools`, `additionalStoragePools`,
/// `excludeStoragePools`.
pub type PoolSelector = BTreeMap<String, Vec<String>>;

/// A storage class as clients send and receive it. `attributes` hold typed requests, written
/// back as strings; `requiredStorage` is read as an alias of `additionalStoragePools`.
#[derive(Debug, Clone, PartialEq, Default, bincode::Encode, bincode::Decode)]
pub struct StorageClassConfig {
    pub version: String,
    pub name: String,
    pub attributes: BTreeMap<String, Request>,
    pub storage_pools: PoolSelector,
    pub additional_storage_pools: PoolSelector,
    pub exclude_storage_pools: PoolSelector,
}

impl StorageClassConfig {
    /// Parses a REST body; errors read like Trident's (`invalid JSON: …`,
    /// `unrecognized storage attribute: X`) and name the field.
    pub fn from_json(body: &[u8]) -> Result<StorageClassConfig, String> {
        let _ = body;
        todo!()
    }
}

impl Serialize for StorageClassConfig {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let _ = s;
        todo!()
    }
}

impl<'de> Deserialize<'de> for StorageClassConfig {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let _ = d;
        todo!()
    }
}

/// A class with its pool-selector regexes compiled once.
#[derive(Debug, Clone)]
pub struct CompiledClass {
    pub config: StorageClassConfig,
}

/// Why a pool is or is not a member of a class, for explanations.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PoolVerdict {
    Match,
    /// Listed in `additionalStoragePools`.
    MatchAdditional,
    /// Listed in `excludeStoragePools`.
    Excluded,
    /// Not in `additionalStoragePools`, and the class has nothing else to match with.
    NotInAdditional,
    /// An attribute request the pool fails: (attribute, requested, offered or None).
    AttributeMismatch {
        attribute: String,
        requested: String,
        offered: Option<String>,
    },
    /// `storagePools` is set and the pool is not in it.
    NotInStoragePools,
}

impl PoolVerdict {
    pub fn is_match(&self) -> bool {
        matches!(self, PoolVerdict::Match | PoolVerdict::MatchAdditional)
    }
}

impl CompiledClass {
    /// Compiles the class; a regex over the size limit or invalid is an error naming the list.
    pub fn compile(config: StorageClassConfig) -> Result<CompiledClass, String> {
        let _ = config;
        todo!()
    }

    /// Trident 18.07 pool matching (§3.4), with the reason.
    pub fn check(&self, backend: &str, pool: &PoolInfo) -> PoolVerdict {
        let _ = (backend, pool);
        todo!()
    }

    pub fn matches(&self, backend: &str, pool: &PoolInfo) -> bool {
        self.check(backend, pool).is_match()
    }
}
