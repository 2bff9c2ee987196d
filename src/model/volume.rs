//! Volume configuration in Trident's `storage.VolumeConfig` wire shape, protocols and access modes.

use serde::{Deserialize, Serialize};

/// The protocol a volume is served with. `Any` is Trident's `""`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, bincode::Encode, bincode::Decode)]
pub enum Protocol {
    File,
    Block,
    #[default]
    Any,
}

impl Protocol {
    pub fn as_str(self) -> &'static str {
        match self {
            Protocol::File => "file",
            Protocol::Block => "block",
            Protocol::Any => "",
        }
    }

    /// Parses Trident's protocol strings (`file`, `block`, `""`); case-sensitive like Trident.
    pub fn parse(s: &str) -> Option<Protocol> {
        match s {
            "file" => Some(Protocol::File),
            "block" => Some(Protocol::Block),
            "" => Some(Protocol::Any),
            _ => None,
        }
    }
}

impl std::fmt::Display for Protocol {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for Protocol {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Protocol {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Protocol::parse(&s).ok_or_else(|| {
            serde::de::Error::custom(format!(
                "{s} is an unsupported protocol; acceptable values: file, block, \"\""
            ))
        })
    }
}

/// Kubernetes-style access modes; `Unset` is Trident's `""`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AccessMode {
    ReadWriteOnce,
    ReadOnlyMany,
    ReadWriteMany,
    #[default]
    Unset,
}

impl AccessMode {
    pub fn parse(s: &str) -> Option<AccessMode> {
        match s {
            "ReadWriteOnce" => Some(AccessMode::ReadWriteOnce),
            "ReadOnlyMany" => Some(AccessMode::ReadOnlyMany),
            "ReadWriteMany" => Some(AccessMode::ReadWriteMany),
            "" => Some(AccessMode::Unset),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            AccessMode::ReadWriteOnce => "ReadWriteOnce",
            AccessMode::ReadOnlyMany => "ReadOnlyMany",
            AccessMode::ReadWriteMany => "ReadWriteMany",
            AccessMode::Unset => "",
        }
    }
}

/// The protocol table of Trident 18.07 (`getProtocol`): ReadWriteMany forces `file` when the
/// protocol is open and refuses `block`; every other combination keeps the requested protocol.
pub fn resolve_protocol(mode: AccessMode, requested: Protocol) -> Result<Protocol, String> {
    match (mode, requested) {
        (AccessMode::ReadWriteMany, Protocol::Block) => {
            Err("incompatible access mode (ReadWriteMany) and protocol (block)".to_string())
        }
        (AccessMode::ReadWriteMany, Protocol::Any) => Ok(Protocol::File),
        (_, p) => Ok(p),
    }
}

fn is_empty(s: &str) -> bool {
    s.is_empty()
}

/// How a host reaches a volume: Trident's flattened iSCSI + NFS access information, plus the
/// local path for volumes on this host. Every key is omitted when empty.
#[derive(
    Debug, Clone, PartialEq, Default, Serialize, Deserialize, bincode::Encode, bincode::Decode,
)]
#[serde(default, rename_all = "camelCase")]
pub struct AccessInfo {
    #[serde(skip_serializing_if = "is_empty")]
    pub iscsi_target_portal: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub iscsi_portals: Vec<String>,
    #[serde(skip_serializing_if = "is_empty")]
    pub iscsi_target_iqn: String,
    #[serde(skip_serializing_if = "is_zero")]
    pub iscsi_lun_number: i32,
    #[serde(skip_serializing_if = "is_empty")]
    pub iscsi_interface: String,
    #[serde(skip_serializing_if = "is_empty")]
    pub iscsi_igroup: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub iscsi_vags: Vec<i64>,
    #[serde(skip_serializing_if = "is_empty")]
    pub iscsi_username: String,
    /// CHAP secrets: sealed in events, redacted in API output (see `crate::secrets`).
    #[serde(skip_serializing_if = "is_empty")]
    pub iscsi_initiator_secret: String,
    #[serde(skip_serializing_if = "is_empty")]
    pub iscsi_target_secret: String,
    #[serde(rename = "nfsServerIp", skip_serializing_if = "is_empty")]
    pub nfs_server_ip: String,
    #[serde(skip_serializing_if = "is_empty")]
    pub nfs_path: String,
    /// storch extension: the path of the volume on this host (local driver).
    #[serde(skip_serializing_if = "is_empty")]
    pub local_path: String,
}

fn is_zero(n: &i32) -> bool {
    *n == 0
}

/// Trident's `storage.VolumeConfig`, JSON keys exact. Every scalar is a string on the wire;
/// `size` is kept exactly as the client gave it.
#[derive(
    Debug, Clone, PartialEq, Default, Serialize, Deserialize, bincode::Encode, bincode::Decode,
)]
#[serde(default, rename_all = "camelCase")]
pub struct VolumeConfig {
    pub version: String,
    pub name: String,
    pub internal_name: String,
    pub size: String,
    pub protocol: Protocol,
    pub space_reserve: String,
    pub security_style: String,
    #[serde(skip_serializing_if = "is_empty")]
    pub snapshot_policy: String,
    #[serde(skip_serializing_if = "is_empty")]
    pub export_policy: String,
    #[serde(skip_serializing_if = "is_empty")]
    pub snapshot_directory: String,
    #[serde(skip_serializing_if = "is_empty")]
    pub unix_permissions: String,
    #[serde(skip_serializing_if = "is_empty")]
    pub storage_class: String,
    #[serde(skip_serializing_if = "is_empty")]
    pub access_mode: String,
    pub access_information: AccessInfo,
    pub block_size: String,
    pub file_system: String,
    pub encryption: String,
    pub clone_source_volume: String,
    pub clone_source_volume_internal: String,
    pub clone_source_snapshot: String,
    pub split_on_clone: String,
    #[serde(skip_serializing_if = "is_empty")]
    pub qos: String,
    #[serde(rename = "type", skip_serializing_if = "is_empty")]
    pub qos_type: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protocol_table() {
        use AccessMode::*;
        use Protocol::*;
        assert_eq!(resolve_protocol(ReadWriteOnce, Block), Ok(Block));
        assert_eq!(resolve_protocol(ReadOnlyMany, Any), Ok(Any));
        assert_eq!(resolve_protocol(ReadOnlyMany, Block), Ok(Block));
        assert_eq!(resolve_protocol(ReadWriteMany, Any), Ok(File));
        assert_eq!(resolve_protocol(ReadWriteMany, File), Ok(File));
        assert!(resolve_protocol(ReadWriteMany, Block).is_err());
        assert_eq!(resolve_protocol(Unset, Block), Ok(Block));
    }

    #[test]
    fn volume_config_wire_shape() {
        let cfg: VolumeConfig =
            serde_json::from_str(r#"{"name":"v","size":"1GB","protocol":"file","unknown":1}"#)
                .unwrap();
        assert_eq!(cfg.size, "1GB");
        let out = serde_json::to_value(&cfg).unwrap();
        assert_eq!(out["accessInformation"], serde_json::json!({}));
        assert!(out.get("snapshotPolicy").is_none());
        assert_eq!(out["cloneSourceVolume"], "");
        assert!(serde_json::from_str::<VolumeConfig>(r#"{"snapshotDirectory":false}"#).is_err());
    }
}
