//! Shared value types: the leaf of the dependency graph.
//!
//! Everything here is plain data with no I/O. Types that appear on the Trident wire carry the
//! exact Trident JSON shape through serde attributes; types that go into events also derive
//! bincode's native `Encode`/`Decode`, which ignores serde attributes (bincode cannot encode
//! `skip_serializing_if` through serde).

pub mod attributes;
pub mod handle;
pub mod page;
pub mod publication;
pub mod request;
pub mod size;
pub mod storage_class;
pub mod topology;
pub mod user_state;
pub mod volume;

pub use attributes::{AttrType, Offer, Request, json_kind};
pub use handle::{ImportRequest, VolumeHandle};
pub use publication::Publication;
pub use request::{
    RequestError, RequestedSize, ResizeRequest, SnapshotRequest, VolumeRequest, ignored_warnings,
    quote,
};
pub use size::{canonical_size, format_size, parse_size, parse_size_strict};
pub use storage_class::{
    ClassParameters, CompiledClass, PoolSelector, PoolVerdict, StorageClassConfig,
    class_from_parameters,
};
pub use topology::{Segment, TopologyRequirement};
pub use user_state::UserState;
pub use volume::{AccessInfo, AccessMode, Protocol, VolumeConfig};

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The longest object name accepted anywhere (backend, storage class, volume, pool).
pub const MAX_NAME_LEN: usize = 253;

/// A pool on a backend, as its driver discovered it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, bincode::Encode, bincode::Decode)]
pub struct PoolInfo {
    pub name: String,
    /// Attribute name → what the pool offers (always includes `backendType`).
    pub offers: BTreeMap<String, Offer>,
    /// Total capacity in bytes, where the driver knows it.
    pub total_bytes: Option<u64>,
}

/// A (backend, pool) pair: the unit placement chooses between.
#[derive(
    Debug,
    Clone,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    bincode::Encode,
    bincode::Decode,
)]
pub struct PoolRef {
    pub backend: String,
    pub pool: String,
}

impl PoolRef {
    pub fn new(backend: impl Into<String>, pool: impl Into<String>) -> Self {
        PoolRef {
            backend: backend.into(),
            pool: pool.into(),
        }
    }
}

impl std::fmt::Display for PoolRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.backend, self.pool)
    }
}

/// Secrets sealed with the data dir's key (ChaCha20-Poly1305): what events carry instead of
/// passwords. Opened only by `crate::secrets`.
#[derive(Debug, Clone, PartialEq, Eq, bincode::Encode, bincode::Decode)]
pub struct Sealed {
    pub nonce: [u8; 12],
    pub ciphertext: Vec<u8>,
}

/// Audits show that secrets exist, never what they are.
impl Serialize for Sealed {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str("<sealed>")
    }
}

/// Why a name was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    #[error("{field} must not be empty")]
    Empty { field: &'static str },
    #[error("{field} is longer than {max} bytes")]
    TooLong { field: &'static str, max: usize },
    #[error("{field} must not contain {what}")]
    BadChar {
        field: &'static str,
        what: &'static str,
    },
    #[error("{field} must not be \".\" or \"..\"")]
    Dots { field: &'static str },
}

/// Checks an object name: non-empty, at most [`MAX_NAME_LEN`] bytes, no `/`, `\`, NUL or other
/// control characters, and not `.` or `..`. Names become path segments and array object names,
/// so this is the one gate every frontend uses.
pub fn validate_name(field: &'static str, name: &str) -> Result<(), NameError> {
    if name.is_empty() {
        return Err(NameError::Empty { field });
    }
    if name.len() > MAX_NAME_LEN {
        return Err(NameError::TooLong {
            field,
            max: MAX_NAME_LEN,
        });
    }
    if name == "." || name == ".." {
        return Err(NameError::Dots { field });
    }
    for c in name.chars() {
        let what = match c {
            '/' => "'/'",
            '\\' => "'\\'",
            '\0' => "NUL",
            c if c.is_control() => "control characters",
            _ => continue,
        };
        return Err(NameError::BadChar { field, what });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert!(validate_name("name", "vol-1").is_ok());
        assert!(validate_name("name", "").is_err());
        assert!(validate_name("name", "a/b").is_err());
        assert!(validate_name("name", "..").is_err());
        assert!(validate_name("name", "a\0b").is_err());
        assert!(validate_name("name", &"x".repeat(254)).is_err());
        assert!(validate_name("name", &"x".repeat(253)).is_ok());
    }
}
