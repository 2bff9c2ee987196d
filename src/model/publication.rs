//! A volume's publication to a host (CSI `ControllerPublishVolume`), as the log records it.

use std::collections::BTreeMap;

use serde::Serialize;

/// A volume made available to one host. Recorded by node id (the frontend's identity of the
/// host); at most one per node id and volume.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, bincode::Encode, bincode::Decode)]
#[serde(rename_all = "camelCase")]
pub struct Publication {
    /// The host's name.
    pub node: String,
    /// The host's iSCSI initiator, when it has one.
    pub iscsi_initiator: Option<String>,
    /// How the host uses the volume, in the frontend's canonical words (CSI:
    /// `mount/ext4/SINGLE_NODE_WRITER`, `block/MULTI_NODE_READER_ONLY`); a repeat with other
    /// words is a conflict.
    pub capability: String,
    /// Whether that use lets other hosts have the volume at the same time.
    pub multi_node: bool,
    pub readonly: bool,
    /// What the array's grant tells the host (the driver's publish context, keys without
    /// prefix).
    pub context: BTreeMap<String, String>,
}
