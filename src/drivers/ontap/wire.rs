//! The ONTAP driver's own ZAPI encodings: the records it reads (volumes, snapshots, qtrees),
//! the volume query and the create spec it sends. The codec itself is `crate::wire::zapi`.

use crate::wire::zapi::Node;

/// The fields of a `volume-attributes` record the drivers read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VolumeRecord {
    pub name: String,
    /// `flexvol` or `flexgroup`.
    pub style: String,
    pub aggregate: String,
    pub aggregates: Vec<String>,
    pub size: u64,
    pub junction: String,
    pub state: String,
    pub space_guarantee: String,
    pub snapshot_policy: String,
    pub snapshot_reserve: Option<u64>,
    pub snapdir: Option<bool>,
    pub export_policy: String,
    pub unix_permissions: String,
    pub security_style: String,
    pub encrypt: bool,
    pub comment: String,
    pub is_root: bool,
    pub clone_parent: Option<(String, String)>,
}

impl VolumeRecord {
    pub fn from_node(n: &Node) -> VolumeRecord {
        let parent = n.str_at("volume-clone-attributes/volume-clone-parent-attributes/name");
        VolumeRecord {
            name: n.str_at("volume-id-attributes/name").to_string(),
            style: n.str_at("volume-id-attributes/style-extended").to_string(),
            aggregate: n
                .str_at("volume-id-attributes/containing-aggregate-name")
                .to_string(),
            aggregates: n.list_at("volume-id-attributes/aggr-list"),
            size: n.u64_at("volume-space-attributes/size").unwrap_or(0),
            junction: n.str_at("volume-id-attributes/junction-path").to_string(),
            state: n.str_at("volume-state-attributes/state").to_string(),
            space_guarantee: n
                .str_at("volume-space-attributes/space-guarantee")
                .to_string(),
            snapshot_policy: n
                .str_at("volume-snapshot-attributes/snapshot-policy")
                .to_string(),
            snapshot_reserve: n.u64_at("volume-space-attributes/percentage-snapshot-reserve"),
            snapdir: n.bool_at("volume-snapshot-attributes/snapdir-access-enabled"),
            export_policy: n.str_at("volume-export-attributes/policy").to_string(),
            unix_permissions: n
                .str_at("volume-security-attributes/volume-security-unix-attributes/permissions")
                .to_string(),
            security_style: n.str_at("volume-security-attributes/style").to_string(),
            encrypt: n.bool_at("encrypt").unwrap_or(false),
            comment: n.str_at("volume-id-attributes/comment").to_string(),
            is_root: n
                .bool_at("volume-state-attributes/is-vserver-root")
                .unwrap_or(false),
            clone_parent: (!parent.is_empty()).then(|| {
                (
                    parent.to_string(),
                    n.str_at(
                        "volume-clone-attributes/volume-clone-parent-attributes/snapshot-name",
                    )
                    .to_string(),
                )
            }),
        }
    }
}

/// A snapshot record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotRecord {
    pub name: String,
    pub volume: String,
    /// Epoch seconds.
    pub access_time: u64,
    /// KiB.
    pub total_kib: u64,
    pub busy: bool,
}

/// A qtree record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QtreeRecord {
    pub volume: String,
    pub qtree: String,
}

/// Everything `volume-create` (FlexVol) or `volume-create-async` (FlexGroup) takes here.
#[derive(Debug, Clone, Default)]
pub struct VolumeCreate {
    pub name: String,
    /// One aggregate for a FlexVol; every aggregate of a FlexGroup.
    pub aggregates: Vec<String>,
    pub size: u64,
    pub space_reserve: String,
    pub snapshot_policy: String,
    pub snapshot_reserve: Option<String>,
    pub export_policy: Option<String>,
    pub unix_permissions: Option<String>,
    pub security_style: String,
    pub encrypt: bool,
    pub comment: String,
    /// Where the volume is mounted (`/<name>`); `None` leaves it unmounted (a LUN's FlexVol).
    pub junction_path: Option<String>,
    /// Whether clients see the `.snapshot` directory; `None` keeps the array's default.
    pub snapdir: Option<bool>,
}

/// The query that selects volumes by name (exact, or `prefix*`) and optionally style.
pub(super) fn volume_query(name: &str, style: Option<&str>) -> Node {
    let mut id = Node::new("volume-id-attributes").with_leaf("name", name);
    if let Some(s) = style {
        id.push(Node::leaf("style-extended", s));
    }
    Node::new("volume-attributes").with(id)
}
