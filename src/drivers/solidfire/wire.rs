//! The Element JSON-RPC encodings the driver uses: the request envelope, typed params and
//! results (docs/wire-notes.md, Element section). Field names are Element's (`volumeID`,
//! `minIOPS`, …); results ignore fields the driver does not read, so newer clusters' extra
//! fields do not matter.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// `{"method", "params", "id"}`.
#[derive(Debug, Serialize)]
pub struct Request<'a, P: Serialize> {
    pub method: &'a str,
    pub params: &'a P,
    pub id: u64,
}

/// `{"id", "result"}` or `{"id", "error"}`.
#[derive(Debug, Deserialize)]
pub struct Response {
    #[serde(default)]
    pub result: Option<Value>,
    #[serde(default)]
    pub error: Option<ErrorBody>,
}

/// An Element error object.
#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
pub struct ErrorBody {
    #[serde(default)]
    pub code: i64,
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub message: String,
}

/// A QoS setting.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Qos {
    #[serde(rename = "minIOPS", default)]
    pub min_iops: i64,
    #[serde(rename = "maxIOPS", default)]
    pub max_iops: i64,
    #[serde(rename = "burstIOPS", default)]
    pub burst_iops: i64,
}

impl Qos {
    /// `min,max,burst`, the volume config's `qos` string.
    pub fn parse_triple(s: &str) -> Option<Qos> {
        let parts: Vec<i64> = s
            .split(',')
            .map(|p| p.trim().parse().ok())
            .collect::<Option<Vec<i64>>>()?;
        match parts[..] {
            [min, max, burst] if 0 < min && min <= max && max <= burst => Some(Qos {
                min_iops: min,
                max_iops: max,
                burst_iops: burst,
            }),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
pub struct Account {
    #[serde(rename = "accountID")]
    pub account_id: i64,
    #[serde(default)]
    pub username: String,
    #[serde(rename = "initiatorSecret", default)]
    pub initiator_secret: String,
    #[serde(rename = "targetSecret", default)]
    pub target_secret: String,
}

#[derive(Debug, Deserialize)]
pub struct AccountResult {
    pub account: Account,
}

#[derive(Debug, Deserialize)]
pub struct AddAccountResult {
    #[serde(rename = "accountID")]
    pub account_id: i64,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Volume {
    #[serde(rename = "volumeID")]
    pub volume_id: i64,
    #[serde(default)]
    pub name: String,
    #[serde(rename = "accountID", default)]
    pub account_id: i64,
    #[serde(default)]
    pub status: String,
    #[serde(rename = "totalSize", default)]
    pub total_size: u64,
    #[serde(default)]
    pub enable512e: bool,
    #[serde(default)]
    pub iqn: String,
    #[serde(default)]
    pub qos: Qos,
    #[serde(default)]
    pub attributes: Value,
    #[serde(rename = "volumeAccessGroups", default)]
    pub volume_access_groups: Vec<i64>,
}

impl Volume {
    pub fn is_active(&self) -> bool {
        self.status == "active"
    }
}

#[derive(Debug, Deserialize)]
pub struct VolumesResult {
    #[serde(default)]
    pub volumes: Vec<Volume>,
}

#[derive(Debug, Serialize)]
pub struct ListVolumesParams {
    pub accounts: Vec<i64>,
    #[serde(rename = "startVolumeID", skip_serializing_if = "Option::is_none")]
    pub start_volume_id: Option<i64>,
    pub limit: u32,
}

#[derive(Debug, Serialize)]
pub struct CreateVolumeParams {
    pub name: String,
    #[serde(rename = "accountID")]
    pub account_id: i64,
    #[serde(rename = "totalSize")]
    pub total_size: u64,
    pub enable512e: bool,
    pub qos: Value,
    pub attributes: Value,
}

#[derive(Debug, Deserialize)]
pub struct VolumeIdResult {
    #[serde(rename = "volumeID")]
    pub volume_id: i64,
}

#[derive(Debug, Serialize)]
pub struct CloneVolumeParams {
    #[serde(rename = "volumeID")]
    pub volume_id: i64,
    pub name: String,
    #[serde(rename = "snapshotID", skip_serializing_if = "Option::is_none")]
    pub snapshot_id: Option<i64>,
    pub attributes: Value,
}

#[derive(Debug, Deserialize)]
pub struct CloneVolumeResult {
    #[serde(rename = "volumeID")]
    pub volume_id: i64,
    #[serde(rename = "asyncHandle", default)]
    pub async_handle: Option<i64>,
}

#[derive(Debug, Serialize)]
pub struct ModifyVolumeParams {
    #[serde(rename = "volumeID")]
    pub volume_id: i64,
    #[serde(rename = "totalSize", skip_serializing_if = "Option::is_none")]
    pub total_size: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub qos: Option<Qos>,
}

#[derive(Debug, Serialize)]
pub struct VolumeIdParams {
    #[serde(rename = "volumeID")]
    pub volume_id: i64,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Snapshot {
    #[serde(rename = "snapshotID")]
    pub snapshot_id: i64,
    #[serde(rename = "volumeID", default)]
    pub volume_id: i64,
    #[serde(default)]
    pub name: String,
    #[serde(rename = "totalSize", default)]
    pub total_size: u64,
    #[serde(rename = "createTime", default)]
    pub create_time: String,
}

#[derive(Debug, Deserialize)]
pub struct SnapshotsResult {
    #[serde(default)]
    pub snapshots: Vec<Snapshot>,
}

#[derive(Debug, Serialize)]
pub struct CreateSnapshotParams {
    #[serde(rename = "volumeID")]
    pub volume_id: i64,
    pub name: String,
    pub attributes: Value,
}

#[derive(Debug, Deserialize)]
pub struct SnapshotIdResult {
    #[serde(rename = "snapshotID")]
    pub snapshot_id: i64,
}

#[derive(Debug, Serialize)]
pub struct SnapshotIdParams {
    #[serde(rename = "snapshotID")]
    pub snapshot_id: i64,
}

#[derive(Debug, Clone, Deserialize)]
pub struct AccessGroup {
    #[serde(rename = "volumeAccessGroupID")]
    pub id: i64,
    #[serde(default)]
    pub name: String,
    /// The initiators' names (IQNs).
    #[serde(default)]
    pub initiators: Vec<String>,
    /// Member volume ids (active ones; deleted ones are listed apart).
    #[serde(default)]
    pub volumes: Vec<i64>,
    #[serde(default)]
    pub attributes: Value,
}

/// `CreateVolumeAccessGroup`.
#[derive(Debug, Serialize)]
pub struct CreateGroupParams {
    pub name: String,
    pub initiators: Vec<String>,
    pub volumes: Vec<i64>,
    pub attributes: Value,
}

#[derive(Debug, Deserialize)]
pub struct GroupIdResult {
    #[serde(rename = "volumeAccessGroupID")]
    pub group_id: i64,
}

/// `DeleteVolumeAccessGroup`.
#[derive(Debug, Serialize)]
pub struct DeleteGroupParams {
    #[serde(rename = "volumeAccessGroupID")]
    pub group_id: i64,
    #[serde(rename = "deleteOrphanInitiators")]
    pub delete_orphan_initiators: bool,
}

#[derive(Debug, Deserialize)]
pub struct AccessGroupsResult {
    #[serde(rename = "volumeAccessGroups", default)]
    pub groups: Vec<AccessGroup>,
}

#[derive(Debug, Serialize)]
pub struct AddToGroupParams {
    #[serde(rename = "volumeAccessGroupID")]
    pub group_id: i64,
    pub volumes: Vec<i64>,
}

#[derive(Debug, Clone, Copy, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterCapacity {
    #[serde(default)]
    pub max_provisioned_space: u64,
    #[serde(default)]
    pub provisioned_space: u64,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterCapacityResult {
    pub cluster_capacity: ClusterCapacity,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AsyncResultParams {
    pub async_handle: i64,
}

/// `GetAsyncResult`: `status` "running" or "complete", then `result` or `error`.
#[derive(Debug, Deserialize)]
pub struct AsyncResult {
    #[serde(default)]
    pub status: String,
    #[serde(default)]
    pub error: Option<ErrorBody>,
}

/// No params.
#[derive(Debug, Serialize)]
pub struct Empty {}

/// `createTime` (`2016-11-22T15:40:16Z`, optional fraction) → unix milliseconds.
pub fn parse_time_ms(s: &str) -> Option<u64> {
    let s = s.trim().strip_suffix('Z')?;
    let (date, time) = s.split_once('T')?;
    let mut d = date.split('-').map(|p| p.parse::<i64>().ok());
    let (y, m, day) = (d.next()??, d.next()??, d.next()??);
    let (hms, frac) = time.split_once('.').unwrap_or((time, ""));
    let mut t = hms.split(':').map(|p| p.parse::<i64>().ok());
    let (hh, mm, ss) = (t.next()??, t.next()??, t.next()??);
    if !(1..=12).contains(&m) || !(1..=31).contains(&day) {
        return None;
    }
    // Days from civil (Howard Hinnant's algorithm).
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let ms_frac: i64 = format!("{frac:0<3}")[..3].parse().unwrap_or(0);
    let secs = days * 86_400 + hh * 3600 + mm * 60 + ss;
    u64::try_from(secs * 1000 + ms_frac).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times() {
        assert_eq!(parse_time_ms("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(
            parse_time_ms("2016-11-22T15:40:16Z"),
            Some(1_479_829_216_000)
        );
        assert_eq!(
            parse_time_ms("2016-11-22T15:40:16.25Z"),
            Some(1_479_829_216_250)
        );
        assert_eq!(parse_time_ms("yesterday"), None);
        assert_eq!(parse_time_ms(""), None);
    }

    #[test]
    fn qos_triples() {
        assert_eq!(
            Qos::parse_triple("100, 200,300"),
            Some(Qos {
                min_iops: 100,
                max_iops: 200,
                burst_iops: 300
            })
        );
        assert_eq!(Qos::parse_triple("300,200,100"), None);
        assert_eq!(Qos::parse_triple("1,2"), None);
        assert_eq!(Qos::parse_triple("a,b,c"), None);
    }

    #[test]
    fn spec_example_create_volume() {
        let p = CreateVolumeParams {
            name: "pvc-3c9e".into(),
            account_id: 7,
            total_size: 1_073_741_824,
            enable512e: true,
            qos: serde_json::json!({"minIOPS":1000,"maxIOPS":5000,"burstIOPS":8000}),
            attributes: serde_json::json!({"docker-name":"pvc-3c9e","fstype":"ext4"}),
        };
        let req = Request {
            method: "CreateVolume",
            params: &p,
            id: 321,
        };
        let v = serde_json::to_value(&req).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"method":"CreateVolume","id":321,"params":{"name":"pvc-3c9e",
             "accountID":7, "totalSize":1073741824,"enable512e":true,
             "qos":{"minIOPS":1000,"maxIOPS":5000,"burstIOPS":8000},
             "attributes":{"docker-name":"pvc-3c9e","fstype":"ext4"}}})
        );
        let r: Response = serde_json::from_str(r#"{"id":321,"result":{"volumeID":42}}"#).unwrap();
        let id: VolumeIdResult = serde_json::from_value(r.result.unwrap()).unwrap();
        assert_eq!(id.volume_id, 42);
        let e: Response = serde_json::from_str(
            r#"{"id":17,"error":{"code":500,"name":"xVolumeIDDoesNotExist","message":"VolumeID 999 does not exist."}}"#,
        )
        .unwrap();
        assert_eq!(e.error.unwrap().name, "xVolumeIDDoesNotExist");
    }
}
