//! The SANtricity Web Services (v2 REST) encodings the driver uses (docs/wire-notes.md,
//! E-Series section): request bodies, the objects it reads, and the error body. Field names
//! are SANtricity's (`volumeRef`, `freeSpace`, …); objects ignore fields the driver does not
//! read. 64-bit quantities arrive as JSON strings (some releases send numbers): both parse.
//!
//! Several objects carry their reference twice (`volumeRef` and `id`, `label` and `name`); the
//! driver reads the SANtricity name and falls back to the generic one.

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

/// The null reference: 40 zeros (a host in no group has it as its `clusterRef`).
pub const NULL_REF: &str = "0000000000000000000000000000000000000000";

/// A SANtricity error body (404, 422 and others): `errorMessage`, `localizedMessage`,
/// `retcode` (a string: a SYMbol name like `authFailPassword` or a number like `"30"`) and
/// `codeType` (symbol | webservice | systemerror | devicemgrerror).
#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ErrorBody {
    #[serde(default)]
    pub error_message: String,
    #[serde(default)]
    pub localized_message: String,
    #[serde(default, deserialize_with = "string_or_number")]
    pub retcode: String,
    #[serde(default)]
    pub code_type: String,
}

impl ErrorBody {
    /// The most useful message: `errorMessage`, else `localizedMessage`.
    pub fn message(&self) -> &str {
        if self.error_message.is_empty() {
            &self.localized_message
        } else {
            &self.error_message
        }
    }
}

/// `POST /storage-systems`: register an array with the proxy by its controller addresses.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RegisterRequest {
    pub controller_addresses: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub password: Option<String>,
}

/// The answer to a registration: the system id, and whether it was registered before.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RegisterResponse {
    pub id: String,
    #[serde(default)]
    pub already_exists: bool,
}

/// `POST /storage-systems/{id}`: the password the proxy keeps for the array.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StoredPassword {
    pub stored_password: String,
}

/// The storage system as the proxy sees it.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StorageSystem {
    #[serde(default)]
    pub id: String,
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub wwn: String,
    /// optimal | needsattn | offline | neverContacted | …
    #[serde(default)]
    pub status: String,
    /// valid | invalid | unknown
    #[serde(default)]
    pub password_status: String,
    #[serde(default)]
    pub chassis_serial_number: String,
    #[serde(default)]
    pub fw_version: String,
}

/// A volume group or Dynamic Disk Pool.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Pool {
    #[serde(default)]
    pub volume_group_ref: String,
    #[serde(default)]
    pub id: String,
    #[serde(default)]
    pub label: String,
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub raid_level: String,
    #[serde(default, deserialize_with = "u64_string")]
    pub free_space: u64,
    #[serde(default, deserialize_with = "u64_string")]
    pub total_raided_space: u64,
    /// hdd | ssd | …
    #[serde(default)]
    pub drive_media_type: String,
    #[serde(default)]
    pub offline: bool,
    #[serde(default)]
    pub disk_pool: bool,
    #[serde(default)]
    pub protection_information_capable: bool,
}

impl Pool {
    pub fn reference(&self) -> &str {
        first(&self.volume_group_ref, &self.id)
    }
    pub fn label(&self) -> &str {
        first(&self.label, &self.name)
    }
}

/// One `{key, value}` meta tag (sent as `metaTags`, read back as `metadata`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tag {
    pub key: String,
    #[serde(default)]
    pub value: String,
}

impl Tag {
    pub fn new(key: &str, value: &str) -> Tag {
        Tag {
            key: key.to_string(),
            value: value.to_string(),
        }
    }
}

/// `POST /volumes`: a thick volume.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CreateVolume {
    pub pool_id: String,
    pub name: String,
    pub size_unit: &'static str,
    pub size: u64,
    /// KiB.
    pub seg_size: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data_assurance_enabled: Option<bool>,
    pub meta_tags: Vec<Tag>,
}

/// A volume.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Volume {
    #[serde(default)]
    pub volume_ref: String,
    #[serde(default)]
    pub id: String,
    #[serde(default)]
    pub label: String,
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub world_wide_name: String,
    #[serde(default, deserialize_with = "u64_string")]
    pub capacity: u64,
    #[serde(default)]
    pub volume_group_ref: String,
    #[serde(default)]
    pub status: String,
    #[serde(default)]
    pub mapped: bool,
    #[serde(default, deserialize_with = "null_as_empty")]
    pub list_of_mappings: Vec<Mapping>,
    #[serde(default, deserialize_with = "null_as_empty")]
    pub metadata: Vec<Tag>,
    #[serde(default)]
    pub action: String,
}

impl Volume {
    pub fn reference(&self) -> &str {
        first(&self.volume_ref, &self.id)
    }
    pub fn label(&self) -> &str {
        first(&self.label, &self.name)
    }
    /// The value of meta tag `key`.
    pub fn tag(&self, key: &str) -> Option<&str> {
        self.metadata
            .iter()
            .find(|t| t.key == key)
            .map(|t| t.value.as_str())
    }
    /// Whether every tag of `tags` is on the volume with the same value.
    pub fn has_tags(&self, tags: &[Tag]) -> bool {
        tags.iter()
            .all(|t| self.tag(&t.key) == Some(t.value.as_str()))
    }
}

/// `POST /volume-mappings`: map a volume to a host or host group; without `lun` the array
/// chooses.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MapRequest {
    pub mappable_object_id: String,
    pub target_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lun: Option<i32>,
}

/// A LUN mapping.
#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Mapping {
    #[serde(default)]
    pub lun_mapping_ref: String,
    #[serde(default)]
    pub id: String,
    #[serde(default)]
    pub lun: i32,
    #[serde(default)]
    pub volume_ref: String,
    /// The host or host group the volume is mapped to.
    #[serde(default)]
    pub map_ref: String,
    /// host | cluster | all
    #[serde(rename = "type", default)]
    pub kind: String,
}

impl Mapping {
    pub fn reference(&self) -> &str {
        first(&self.lun_mapping_ref, &self.id)
    }
}

/// One entry of `GET /host-types`.
#[derive(Debug, Clone, Deserialize)]
pub struct HostType {
    pub index: i64,
    #[serde(default)]
    pub code: String,
    #[serde(default)]
    pub name: String,
}

/// A host (only what the driver checks).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Host {
    #[serde(default)]
    pub host_ref: String,
    #[serde(default)]
    pub id: String,
    #[serde(default)]
    pub cluster_ref: String,
    #[serde(default)]
    pub label: String,
    #[serde(default)]
    pub host_type_index: i64,
    #[serde(default, deserialize_with = "null_as_empty")]
    pub initiators: Vec<Initiator>,
    #[serde(default, deserialize_with = "null_as_empty")]
    pub host_side_ports: Vec<HostSidePort>,
}

impl Host {
    pub fn reference(&self) -> &str {
        first(&self.host_ref, &self.id)
    }

    /// Whether one of the host's iSCSI initiators is `iqn` (iSCSI names compare
    /// case-insensitively).
    pub fn has_iscsi_initiator(&self, iqn: &str) -> bool {
        let initiators = self.initiators.iter().filter_map(|i| {
            (i.node_name.io_interface_type == "iscsi").then_some(&i.node_name.iscsi_node_name)
        });
        let ports = self
            .host_side_ports
            .iter()
            .filter(|p| p.kind == "iscsi")
            .map(|p| &p.address);
        initiators.chain(ports).any(|n| n.eq_ignore_ascii_case(iqn))
    }
}

/// One initiator of a host.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Initiator {
    #[serde(default)]
    pub initiator_ref: String,
    #[serde(default)]
    pub label: String,
    #[serde(default)]
    pub node_name: InitiatorName,
}

/// `nodeName{ioInterfaceType, iscsiNodeName}`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InitiatorName {
    #[serde(default)]
    pub io_interface_type: String,
    #[serde(default, deserialize_with = "string_or_null")]
    pub iscsi_node_name: String,
}

/// One `hostSidePorts` entry.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct HostSidePort {
    #[serde(rename = "type", default)]
    pub kind: String,
    #[serde(default)]
    pub address: String,
    #[serde(default)]
    pub label: String,
}

/// `POST /hosts`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CreateHost {
    pub name: String,
    pub host_type: HostTypeIndex,
    pub ports: Vec<HostPort>,
}

/// `{"index": n}`.
#[derive(Debug, Serialize)]
pub struct HostTypeIndex {
    pub index: i64,
}

/// One port of a new host: `{type, port, label}`.
#[derive(Debug, Serialize)]
pub struct HostPort {
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub port: String,
    pub label: String,
}

/// A host group.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HostGroup {
    #[serde(default)]
    pub cluster_ref: String,
    #[serde(default)]
    pub id: String,
    #[serde(default)]
    pub label: String,
    #[serde(default)]
    pub name: String,
}

impl HostGroup {
    pub fn reference(&self) -> &str {
        first(&self.cluster_ref, &self.id)
    }
    pub fn label(&self) -> &str {
        first(&self.label, &self.name)
    }
}

/// `POST /host-groups`.
#[derive(Debug, Serialize)]
pub struct CreateHostGroup {
    pub name: String,
    pub hosts: Vec<String>,
}

/// `GET /iscsi/target-settings` (only what the driver reads).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TargetSettings {
    #[serde(default)]
    pub node_name: NodeName,
    #[serde(default, deserialize_with = "null_as_empty")]
    pub portals: Vec<Portal>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeName {
    #[serde(default)]
    pub iscsi_node_name: String,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Portal {
    #[serde(default)]
    pub ip_address: IpAddress,
    #[serde(default)]
    pub tcp_listen_port: u16,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct IpAddress {
    #[serde(default)]
    pub address_type: String,
    #[serde(default)]
    pub ipv4_address: String,
    #[serde(default)]
    pub ipv6_address: String,
}

/// `POST /volumes/{ref}/expand`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Expand {
    /// The new size of the volume, in `size_unit`.
    pub expansion_size: u64,
    pub size_unit: &'static str,
}

/// `GET /volumes/{ref}/expand`: `action` `none` when no expansion runs.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExpandProgress {
    #[serde(default)]
    pub percent_complete: i64,
    #[serde(default)]
    pub action: String,
}

/// `POST /volume-copy-jobs`: copy a volume onto another (the job starts when made).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CreateCopyJob {
    pub source_id: String,
    pub target_id: String,
    pub copy_priority: &'static str,
    pub target_write_protected: bool,
    pub online_copy: bool,
}

/// A volume copy pair.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CopyJob {
    #[serde(default)]
    pub volcopy_ref: String,
    #[serde(default)]
    pub id: String,
    /// inProgress | complete | pending | failed | halted | …
    #[serde(default)]
    pub status: String,
    #[serde(default)]
    pub source_volume: String,
    #[serde(default)]
    pub target_volume: String,
}

impl CopyJob {
    pub fn reference(&self) -> &str {
        first(&self.volcopy_ref, &self.id)
    }
}

fn first<'a>(a: &'a str, b: &'a str) -> &'a str {
    if a.is_empty() { b } else { a }
}

/// A 64-bit quantity: a JSON string of digits (SANtricity's usual form) or a number.
fn u64_string<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    match Value::deserialize(d)? {
        Value::Null => Ok(0),
        Value::Number(n) => n
            .as_u64()
            .ok_or_else(|| serde::de::Error::custom(format!("expected a byte count, found {n}"))),
        Value::String(s) => s
            .trim()
            .parse()
            .map_err(|_| serde::de::Error::custom(format!("expected a byte count, found {s:?}"))),
        other => Err(serde::de::Error::custom(format!(
            "expected a byte count, found {other}"
        ))),
    }
}

/// A string, or a number turned into one (`retcode`).
fn string_or_number<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    Ok(match Value::deserialize(d)? {
        Value::String(s) => s,
        Value::Null => String::new(),
        other => other.to_string(),
    })
}

/// A string that may be `null`.
fn string_or_null<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    Ok(Option::<String>::deserialize(d)?.unwrap_or_default())
}

/// A list that may be `null`.
fn null_as_empty<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Vec<T>, D::Error> {
    Ok(Option::<Vec<T>>::deserialize(d)?.unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn sizes_parse_from_strings_and_numbers() {
        let p: Pool = serde_json::from_value(json!({
            "volumeGroupRef": "04000000600A098000A4B28D00003E605F2E6C8A", "label": "pool_a",
            "freeSpace": "1073741824", "totalRaidedSpace": 2147483648u64,
            "driveMediaType": "ssd", "offline": false, "extra": {"ignored": true},
        }))
        .unwrap();
        assert_eq!(p.free_space, 1 << 30);
        assert_eq!(p.total_raided_space, 2 << 30);
        assert_eq!(p.reference(), "04000000600A098000A4B28D00003E605F2E6C8A");
        assert_eq!(p.label(), "pool_a");
        assert!(serde_json::from_value::<Pool>(json!({"freeSpace": "lots"})).is_err());
    }

    #[test]
    fn volumes_read_refs_tags_and_mappings() {
        let v: Volume = serde_json::from_value(json!({
            "id": "02000000600A0980", "name": "trident_x", "capacity": "1073741824",
            "listOfMappings": [{"lunMappingRef": "8800", "lun": 3, "mapRef": "8500",
                "type": "cluster", "volumeRef": "02000000600A0980"}],
            "metadata": [{"key": "createdBy", "value": "storch"}],
        }))
        .unwrap();
        assert_eq!(v.reference(), "02000000600A0980");
        assert_eq!(v.label(), "trident_x");
        assert_eq!(v.list_of_mappings[0].lun, 3);
        assert_eq!(v.list_of_mappings[0].kind, "cluster");
        assert_eq!(v.tag("createdBy"), Some("storch"));
        assert!(v.has_tags(&[Tag::new("createdBy", "storch")]));
        assert!(!v.has_tags(&[Tag::new("createdBy", "someone")]));
        let v: Volume =
            serde_json::from_value(json!({"listOfMappings": null, "metadata": null})).unwrap();
        assert!(v.list_of_mappings.is_empty() && v.metadata.is_empty());
    }

    #[test]
    fn error_bodies_keep_retcode_strings_and_numbers() {
        let e: ErrorBody = serde_json::from_value(json!({
            "errorMessage": "", "localizedMessage": "bad password", "retcode": 30,
            "codeType": "symbol"
        }))
        .unwrap();
        assert_eq!(e.retcode, "30");
        assert_eq!(e.message(), "bad password");
    }
}
