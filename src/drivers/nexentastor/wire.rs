//! The NexentaStor 5 REST (NEF) encodings storch reads and writes
//! (spec/wire-protocols.md §4): collections, error bodies, job links, and the objects of the
//! block driver (volume groups, zvols, snapshots, iSCSI targets, target groups, host groups,
//! LUN mappings). Unknown fields are ignored; sizes are JSON integers (bytes).

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// `{"data":[…], "links":[…]}`: one page of a collection.
#[derive(Debug, Clone, Deserialize)]
pub struct Collection {
    #[serde(default)]
    pub data: Vec<Value>,
    #[serde(default)]
    pub links: Vec<Link>,
}

impl Collection {
    /// Whether the appliance says more items follow (`rel: next`).
    pub fn has_next(&self) -> bool {
        self.links.iter().any(|l| l.rel == "next")
    }
}

/// A link of a collection or a 202 answer.
#[derive(Debug, Clone, Deserialize)]
pub struct Link {
    #[serde(default)]
    pub rel: String,
    #[serde(default)]
    pub href: String,
}

/// The `monitor` href of a 202 body (`/jobStatus/<id>`), if any.
pub fn monitor_href(body: &Value) -> Option<String> {
    let links: Vec<Link> = serde_json::from_value(body.get("links")?.clone()).ok()?;
    links
        .into_iter()
        .find(|l| l.rel == "monitor" && !l.href.is_empty())
        .map(|l| l.href)
}

/// An error answer: `{"name", "message", "code", "source"?}`.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct ErrorBody {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub message: String,
    #[serde(default)]
    pub code: String,
}

/// `POST /auth/login` answer.
#[derive(Debug, Clone, Deserialize)]
pub struct LoginAnswer {
    #[serde(default)]
    pub token: String,
}

/// `storage/volumeGroups` item.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VolumeGroup {
    pub path: String,
    #[serde(default)]
    pub bytes_available: u64,
    #[serde(default)]
    pub bytes_used: u64,
}

/// `storage/volumes` item: a zvol.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Zvol {
    pub path: String,
    #[serde(default)]
    pub volume_size: u64,
    #[serde(default)]
    pub volume_block_size: Option<u64>,
    #[serde(default)]
    pub sparse_volume: Option<bool>,
}

/// `POST storage/volumes` body.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CreateZvol<'a> {
    pub path: &'a str,
    pub volume_size: u64,
    pub sparse_volume: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub volume_block_size: Option<u64>,
}

/// `storage/snapshots` item.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Snapshot {
    pub path: String,
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub parent: String,
    #[serde(default)]
    pub creation_time: String,
    #[serde(default)]
    pub clones: Vec<String>,
}

impl Snapshot {
    /// The snapshot's name: `name`, else what follows `@` in its path.
    pub fn short_name(&self) -> &str {
        if !self.name.is_empty() {
            return &self.name;
        }
        self.path.split_once('@').map(|(_, s)| s).unwrap_or("")
    }

    /// The dataset it belongs to: `parent`, else what precedes `@` in its path.
    pub fn dataset(&self) -> &str {
        if !self.parent.is_empty() {
            return &self.parent;
        }
        self.path.split_once('@').map(|(d, _)| d).unwrap_or("")
    }

    /// `creationTime` (ISO-8601) as unix milliseconds; 0 when it does not parse.
    pub fn created_ms(&self) -> u64 {
        humantime::parse_rfc3339_weak(self.creation_time.trim_end_matches('Z'))
            .or_else(|_| humantime::parse_rfc3339(&self.creation_time))
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0)
    }
}

/// An iSCSI portal of a target.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Portal {
    pub address: String,
    #[serde(default = "default_port")]
    pub port: u16,
}

fn default_port() -> u16 {
    3260
}

/// `san/iscsi/targets` item.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Target {
    pub name: String,
    #[serde(default)]
    pub authentication: String,
    #[serde(default)]
    pub chap_user: String,
    #[serde(default)]
    pub portals: Vec<Portal>,
}

/// `san/targetgroups` item.
#[derive(Debug, Clone, Deserialize)]
pub struct TargetGroup {
    pub name: String,
    #[serde(default)]
    pub members: Vec<String>,
}

/// `san/hostgroups` item.
#[derive(Debug, Clone, Deserialize)]
pub struct HostGroup {
    pub name: String,
    /// Initiator names (an initiator belongs to one host group at most).
    #[serde(default)]
    pub members: Vec<String>,
}

/// `san/lunMappings` item.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LunMapping {
    pub id: String,
    #[serde(default)]
    pub volume: String,
    #[serde(default)]
    pub target_group: String,
    #[serde(default)]
    pub host_group: String,
    #[serde(default)]
    pub lun: i64,
}

/// Percent-escapes one path segment (dataset paths become one segment: `pool%2Fvg%2Fvol`).
/// Everything but RFC 3986's unreserved characters is escaped.
pub fn escape(segment: &str) -> String {
    let mut out = String::with_capacity(segment.len());
    for b in segment.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Decodes `T` from a collection item, naming the resource when it does not fit.
pub fn item<T: serde::de::DeserializeOwned>(what: &str, v: Value) -> Result<T, String> {
    serde_json::from_value(v).map_err(|e| format!("unreadable {what} in the answer: {e}"))
}
