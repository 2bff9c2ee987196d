//! The wire shapes of the REST API (docs/trident-contract.md#response-envelopes and
//! docs/trident-contract.md#object-shapes), owned by the API and built from the core's views. Keys
//! are Trident's, including the capital `Config` of volumes and storage classes; storch's additions
//! (`state`, capacities, `storchVersion`) are extra keys, which Trident clients ignore. storch's
//! own routes (snapshots, explanations, events, health) have their shapes here too. Every type
//! derives `ToSchema` for the OpenAPI document; fields of model types are described by the doc-only
//! types in [`super::openapi`].

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::actors::{
    BackendView, EventRecord, Explanation, PoolExplanation, PoolView, SnapshotView,
    StorageClassView, VolumeView,
};
use crate::model::{Offer, Protocol, StorageClassConfig, VolumeConfig};

use super::TRIDENT_VERSION;
use super::openapi::{OfferDoc, StorageClassConfigDoc, VolumeConfigDoc};

/// `GET /trident/version`, `GET /trident/v1/version`.
#[derive(Debug, Serialize, ToSchema)]
pub struct VersionResponse {
    /// The Trident version this API speaks.
    #[schema(value_type = String)]
    pub version: &'static str,
    #[serde(rename = "storchVersion")]
    #[schema(value_type = String)]
    pub storch_version: &'static str,
}

impl VersionResponse {
    pub fn current() -> Self {
        VersionResponse {
            version: TRIDENT_VERSION,
            storch_version: env!("CARGO_PKG_VERSION"),
        }
    }
}

/// `POST /backend`, `POST /backend/{name}`, `POST /volume` (the key is `backend` for all).
#[derive(Debug, Serialize, ToSchema)]
pub struct BackendNameResponse {
    pub backend: String,
    /// The fields of the request body that were ignored (Trident-shaped bodies accept
    /// unknown fields, as Trident did, and say which here); absent when none were.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

/// `POST /storageclass`.
#[derive(Debug, Serialize, ToSchema)]
pub struct StorageClassNameResponse {
    #[serde(rename = "storageClass")]
    pub storage_class: String,
    /// As in [`BackendNameResponse`].
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

/// `GET /backend`.
#[derive(Debug, Serialize, ToSchema)]
pub struct BackendListResponse {
    pub backends: Vec<String>,
}

/// `GET /volume`.
#[derive(Debug, Serialize, ToSchema)]
pub struct VolumeListResponse {
    pub volumes: Vec<String>,
    /// Only when the list was cut at `limit`: the token that asks for the next page
    /// (`?continue=…`); absent on the last page.
    #[serde(rename = "continue", skip_serializing_if = "Option::is_none")]
    pub next: Option<String>,
}

/// `GET /storageclass`.
#[derive(Debug, Serialize, ToSchema)]
pub struct StorageClassListResponse {
    #[serde(rename = "storageClasses")]
    pub storage_classes: Vec<String>,
}

/// `DELETE …`: `{}`.
#[derive(Debug, Serialize, ToSchema)]
pub struct EmptyResponse {}

/// `GET /backend/{name}`.
#[derive(Debug, Serialize, ToSchema)]
pub struct BackendResponse {
    pub backend: BackendExternal,
}

/// `GET /volume/{name}`.
#[derive(Debug, Serialize, ToSchema)]
pub struct VolumeResponse {
    pub volume: VolumeExternal,
}

/// `GET /storageclass/{name}`.
#[derive(Debug, Serialize, ToSchema)]
pub struct StorageClassResponse {
    #[serde(rename = "storageClass")]
    pub storage_class: StorageClassExternal,
}

/// Trident's `BackendExternal`, plus `state` (and `stateReason` when failed) and `userState`.
#[derive(Debug, Serialize, ToSchema)]
pub struct BackendExternal {
    pub name: String,
    /// `file`, `block` or `""` (any).
    #[schema(value_type = String)]
    pub protocol: Protocol,
    pub config: serde_json::Value,
    /// Pool name → pool.
    pub storage: BTreeMap<String, PoolExternal>,
    pub online: bool,
    pub volumes: Vec<String>,
    /// storch: `initializing`, `online`, `offline`, `failed`, or on a standby `unknown` (its
    /// leader has not recorded it yet).
    #[schema(value_type = String)]
    pub state: &'static str,
    /// storch: why the backend failed (or is `unknown`).
    #[serde(rename = "stateReason", skip_serializing_if = "Option::is_none")]
    pub state_reason: Option<String>,
    /// storch: what an operator decided, `normal` or `suspended` (no new volumes land there;
    /// its volumes are still served). Apart from `state`, its health.
    #[serde(rename = "userState")]
    #[schema(value_type = String)]
    pub user_state: &'static str,
    /// storch: when the leader recorded what `config` and the pools' `freeBytes` say, and, on
    /// a standby, `state` (RFC 3339, UTC, milliseconds); the free bytes are adjusted since by
    /// the volumes created, resized and deleted. Absent until the leader recorded it.
    #[serde(rename = "observedAt", skip_serializing_if = "Option::is_none")]
    pub observed_at: Option<String>,
}

/// A pool inside [`BackendExternal`], plus its capacity where known.
#[derive(Debug, Serialize, ToSchema)]
pub struct PoolExternal {
    pub name: String,
    #[serde(rename = "storageClasses")]
    pub storage_classes: Vec<String>,
    #[serde(rename = "storageAttributes")]
    #[schema(value_type = BTreeMap<String, OfferDoc>)]
    pub storage_attributes: BTreeMap<String, Offer>,
    /// storch: capacity in bytes.
    #[serde(rename = "totalBytes", skip_serializing_if = "Option::is_none")]
    pub total_bytes: Option<u64>,
    /// storch: free space in bytes.
    #[serde(rename = "freeBytes", skip_serializing_if = "Option::is_none")]
    pub free_bytes: Option<u64>,
    /// storch: the topology segments the pool is reachable from (its backend's
    /// `supportedTopologies`); absent: from everywhere.
    #[serde(rename = "supportedTopologies", skip_serializing_if = "Vec::is_empty")]
    pub supported_topologies: Vec<BTreeMap<String, String>>,
}

/// Trident's `VolumeExternal` (capital `Config`), plus `state` (and `lastError` while a
/// delete keeps failing).
#[derive(Debug, Serialize, ToSchema)]
pub struct VolumeExternal {
    #[serde(rename = "Config")]
    #[schema(value_type = VolumeConfigDoc)]
    pub config: VolumeConfig,
    pub backend: String,
    /// Empty for a clone, as in Trident.
    pub pool: String,
    /// storch: the pool the volume lives on, a clone's too.
    #[serde(rename = "placedPool")]
    pub placed_pool: String,
    pub orphaned: bool,
    /// storch: `creating`, `online`, `deleting` or `missing` (its array no longer holds it).
    #[schema(value_type = String)]
    pub state: &'static str,
    #[serde(rename = "lastError", skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// storch: the node ids of the hosts it is published to (CSI ControllerPublishVolume);
    /// absent when none.
    #[serde(rename = "publishedNodes", skip_serializing_if = "Vec::is_empty")]
    pub published_nodes: Vec<String>,
    /// storch: present (false) for a volume imported with `noManage` (a delete forgets it).
    #[serde(skip_serializing_if = "is_true")]
    pub managed: bool,
}

fn is_true(b: &bool) -> bool {
    *b
}

/// Trident's `StorageClassExternal` (capital `Config`).
#[derive(Debug, Serialize, ToSchema)]
pub struct StorageClassExternal {
    #[serde(rename = "Config")]
    #[schema(value_type = StorageClassConfigDoc)]
    pub config: StorageClassConfig,
    /// Backend → sorted pool names.
    pub storage: BTreeMap<String, Vec<String>>,
}

/// Every error body: the operation's envelope with its payload emptied (`""`, `null` or
/// `[]` under the operation's key, e.g. `{"volume":null,"error":…}`), plus `error`.
#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorResponse {
    pub error: String,
}

/// `POST /volume/{volume}/snapshot` body.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SnapshotRequest {
    /// The snapshot's name (unique per volume).
    #[serde(default)]
    pub name: String,
}

/// `POST /backend/{backend}/state` body.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BackendStateRequest {
    /// `suspended` (no new volumes land on the backend) or `normal`.
    #[serde(default)]
    pub state: String,
}

/// `POST /volume/{volume}/resize` body.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ResizeRequest {
    /// The new size, e.g. `2Gi`, `10G` or bytes; stored canonical (`2Gi`). Volumes only grow.
    #[serde(default)]
    pub size: String,
}

/// A snapshot of a volume.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct SnapshotExternal {
    pub volume: String,
    pub name: String,
    /// When the array made it (RFC 3339, UTC, milliseconds); `null` while it is being made.
    pub created: Option<String>,
    #[serde(rename = "sizeBytes")]
    pub size_bytes: u64,
    /// `creating` or `online`.
    #[schema(value_type = String)]
    pub state: &'static str,
}

/// `POST /volume/{volume}/snapshot`, `GET /volume/{volume}/snapshot/{snapshot}`.
#[derive(Debug, Serialize, ToSchema)]
pub struct SnapshotResponse {
    pub snapshot: SnapshotExternal,
}

/// `GET /volume/{volume}/snapshot`, `GET /snapshot`: sorted by volume, then name.
#[derive(Debug, Serialize, ToSchema)]
pub struct SnapshotListResponse {
    pub snapshots: Vec<SnapshotExternal>,
    /// Only when the list was cut at `limit`: the token that asks for the next page
    /// (`?continue=…`); absent on the last page.
    #[serde(rename = "continue", skip_serializing_if = "Option::is_none")]
    pub next: Option<String>,
}

/// Why one pool would or would not take a volume of the class.
#[derive(Debug, Serialize, ToSchema)]
pub struct PoolExplanationExternal {
    pub backend: String,
    pub pool: String,
    /// Whether a create would try this pool now.
    pub candidate: bool,
    /// Every reason it would not (empty for candidates); the class verdict comes first.
    pub reasons: Vec<String>,
}

/// A placement explanation: every pool of every backend, for one class.
#[derive(Debug, Serialize, ToSchema)]
pub struct ExplanationExternal {
    #[serde(rename = "storageClass")]
    pub storage_class: String,
    /// `file`, `block` or `""` (any).
    #[schema(value_type = String)]
    pub protocol: Protocol,
    /// The size asked about, if any.
    #[serde(rename = "sizeBytes")]
    pub size_bytes: Option<u64>,
    pub pools: Vec<PoolExplanationExternal>,
}

/// `GET /storageclass/{storageClass}/explain`.
#[derive(Debug, Serialize, ToSchema)]
pub struct ExplanationResponse {
    pub explanation: ExplanationExternal,
    /// Only when the list was cut at `limit`: the token that asks for the next page
    /// (`?continue=…`); absent on the last page.
    #[serde(rename = "continue", skip_serializing_if = "Option::is_none")]
    pub next: Option<String>,
}

/// A committed event, as listed by `GET /events` (and one per line when following).
#[derive(Debug, Serialize, ToSchema)]
pub struct EventExternal {
    /// The event's sequence number in the log (from 1, gapless).
    pub seq: u64,
    /// Commit time (RFC 3339, UTC, milliseconds).
    pub time: String,
    /// The event's id (UUID v7).
    pub id: String,
    /// The request that caused it (`boot`, `reconcile`, or a REST request id).
    #[serde(rename = "requestId")]
    pub request_id: String,
    /// E.g. `VolumeCreated`.
    pub kind: String,
    /// `volume/NAME`, `backend/NAME` or `storageclass/NAME`.
    pub stream: String,
    /// One line for people.
    pub summary: String,
    /// Hex SHA-256 of the record, chained to the previous one.
    pub hash: String,
    /// The event's fields (`{"name":…, "event":{…}}`); secrets show as `<sealed>`.
    #[schema(value_type = Object)]
    pub event: serde_json::Value,
}

/// `GET /events`.
#[derive(Debug, Serialize, ToSchema)]
pub struct EventListResponse {
    pub events: Vec<EventExternal>,
    /// Only when the list was cut at `limit`: the token that asks for the next page
    /// (`?continue=…`); absent on the last page.
    #[serde(rename = "continue", skip_serializing_if = "Option::is_none")]
    pub next: Option<String>,
}

/// `GET /livez`, and `GET /readyz` when ready: `{"status":"ok"}`.
#[derive(Debug, Serialize, ToSchema)]
pub struct StatusResponse {
    /// `ok`; from `/readyz` also `unavailable` or `standby` (an etcd standby), with `reasons`.
    #[schema(value_type = String)]
    pub status: &'static str,
    /// Why storch is not ready (only from `/readyz`, only when not ready).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub reasons: Vec<String>,
}

/// Unix milliseconds as RFC 3339 (UTC, milliseconds): `2026-01-02T03:04:05.678Z`.
pub fn rfc3339_ms(unix_ms: u64) -> String {
    let t = std::time::UNIX_EPOCH + std::time::Duration::from_millis(unix_ms);
    humantime::format_rfc3339_millis(t).to_string()
}

impl From<SnapshotView> for SnapshotExternal {
    fn from(s: SnapshotView) -> Self {
        SnapshotExternal {
            volume: s.volume,
            name: s.name,
            created: s.created_ms.map(rfc3339_ms),
            size_bytes: s.size_bytes,
            state: if s.created_ms.is_some() {
                "online"
            } else {
                "creating"
            },
        }
    }
}

impl From<PoolExplanation> for PoolExplanationExternal {
    fn from(p: PoolExplanation) -> Self {
        PoolExplanationExternal {
            backend: p.backend,
            pool: p.pool,
            candidate: p.candidate,
            reasons: p.reasons,
        }
    }
}

impl From<Explanation> for ExplanationExternal {
    fn from(e: Explanation) -> Self {
        ExplanationExternal {
            storage_class: e.storage_class,
            protocol: e.protocol,
            size_bytes: e.size_bytes,
            pools: e.pools.into_iter().map(Into::into).collect(),
        }
    }
}

impl EventExternal {
    /// The wire form of a record; `event` is its JSON rendering (secrets are sealed in events
    /// and render as `<sealed>`).
    pub fn from_record(r: EventRecord) -> Result<EventExternal, serde_json::Error> {
        Ok(EventExternal {
            summary: r.summary(),
            event: serde_json::to_value(&r.event)?,
            seq: r.seq,
            time: rfc3339_ms(r.time_ms),
            id: r.id.to_string(),
            request_id: r.request_id,
            kind: r.kind,
            stream: r.stream,
            hash: r.hash,
        })
    }
}

impl From<PoolView> for PoolExternal {
    fn from(p: PoolView) -> Self {
        PoolExternal {
            name: p.name,
            storage_classes: p.storage_classes,
            storage_attributes: p.offers,
            total_bytes: p.total_bytes,
            free_bytes: p.free_bytes,
            supported_topologies: p.topology,
        }
    }
}

impl From<BackendView> for BackendExternal {
    fn from(b: BackendView) -> Self {
        let state = b.state.as_str();
        let state_reason = b.state.reason().map(str::to_string);
        BackendExternal {
            name: b.name,
            protocol: b.protocol,
            config: b.config,
            storage: b
                .pools
                .into_iter()
                .map(|p| (p.name.clone(), PoolExternal::from(p)))
                .collect(),
            online: b.online,
            volumes: b.volumes,
            state,
            state_reason,
            user_state: b.user_state.as_str(),
            observed_at: b.observed_ms.map(rfc3339_ms),
        }
    }
}

impl From<VolumeView> for VolumeExternal {
    fn from(v: VolumeView) -> Self {
        VolumeExternal {
            config: v.config,
            backend: v.backend,
            pool: v.pool,
            placed_pool: v.placed_pool,
            orphaned: v.orphaned,
            state: v.state.as_str(),
            last_error: v.last_error,
            published_nodes: v.published.into_keys().collect(),
            managed: v.managed,
        }
    }
}

impl From<StorageClassView> for StorageClassExternal {
    fn from(s: StorageClassView) -> Self {
        StorageClassExternal {
            config: s.config,
            storage: s.pools,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;
    use crate::actors::BackendState;
    use crate::actors::VolumeState;
    use crate::model::AccessInfo;
    use serde_json::json;

    fn backend_view() -> BackendView {
        BackendView {
            name: "nas1".into(),
            driver: "fake".into(),
            protocol: Protocol::File,
            config: json!({"version": 1, "storageDriverName": "fake", "storagePrefix": null}),
            pools: vec![
                PoolView {
                    name: "p1".into(),
                    storage_classes: vec!["bronze".into(), "gold".into()],
                    offers: BTreeMap::from([
                        ("snapshots".to_string(), Offer::Bool(true)),
                        ("IOPS".to_string(), Offer::Int { min: 10, max: 100 }),
                        (
                            "media".to_string(),
                            Offer::Strings(BTreeSet::from(["ssd".to_string()])),
                        ),
                    ]),
                    total_bytes: Some(100),
                    free_bytes: Some(40),
                    topology: vec![BTreeMap::from([(
                        "topology.kubernetes.io/zone".to_string(),
                        "z1".to_string(),
                    )])],
                },
                PoolView {
                    name: "p2".into(),
                    storage_classes: vec![],
                    offers: BTreeMap::new(),
                    total_bytes: None,
                    free_bytes: None,
                    topology: Vec::new(),
                },
            ],
            online: true,
            state: BackendState::Online,
            volumes: vec!["v1".into(), "v2".into()],
            user_state: crate::model::UserState::Normal,
            observed_ms: Some(1_767_323_045_678),
        }
    }

    #[test]
    fn backend_shape() {
        let out = serde_json::to_value(BackendResponse {
            backend: backend_view().into(),
        })
        .unwrap();
        let b = &out["backend"];
        assert_eq!(b["name"], "nas1");
        assert_eq!(b["protocol"], "file");
        assert_eq!(b["config"]["storageDriverName"], "fake");
        assert_eq!(b["online"], true);
        assert_eq!(b["volumes"], json!(["v1", "v2"]));
        assert_eq!(b["state"], "online");
        assert!(b.get("stateReason").is_none());
        assert_eq!(b["userState"], "normal");
        assert_eq!(b["observedAt"], "2026-01-02T03:04:05.678Z");
        assert_eq!(b["storage"]["p1"]["name"], "p1");
        assert_eq!(
            b["storage"]["p1"]["storageClasses"],
            json!(["bronze", "gold"])
        );
        assert_eq!(
            b["storage"]["p1"]["storageAttributes"],
            json!({
                "snapshots": {"offer": true},
                "IOPS": {"min": 10, "max": 100},
                "media": {"offer": ["ssd"]},
            })
        );
        assert_eq!(b["storage"]["p1"]["totalBytes"], 100);
        assert_eq!(b["storage"]["p1"]["freeBytes"], 40);
        assert_eq!(
            b["storage"]["p1"]["supportedTopologies"],
            json!([{"topology.kubernetes.io/zone": "z1"}])
        );
        assert_eq!(
            b["storage"]["p2"],
            json!({"name": "p2", "storageClasses": [], "storageAttributes": {}})
        );
    }

    #[test]
    fn failed_backend_shows_its_reason() {
        let mut view = backend_view();
        view.state = BackendState::Failed("connection refused".into());
        view.online = true;
        let out = serde_json::to_value(BackendExternal::from(view)).unwrap();
        assert_eq!(out["state"], "failed");
        assert_eq!(out["stateReason"], "connection refused");
        let mut view = backend_view();
        view.state = BackendState::Offline;
        view.online = false;
        let out = serde_json::to_value(BackendExternal::from(view)).unwrap();
        assert_eq!(out["state"], "offline");
        assert_eq!(out["online"], false);
        // On a standby, before its leader recorded anything of it.
        let mut view = backend_view();
        view.state = BackendState::Unrecorded;
        view.observed_ms = None;
        let out = serde_json::to_value(BackendExternal::from(view)).unwrap();
        assert_eq!(out["state"], "unknown");
        assert_eq!(out["stateReason"], "not yet recorded by the leader");
        assert!(out.get("observedAt").is_none());
    }

    #[test]
    fn a_suspended_backend_keeps_tridents_fields_and_says_so_in_user_state() {
        let mut view = backend_view();
        view.user_state = crate::model::UserState::Suspended;
        let out = serde_json::to_value(BackendExternal::from(view)).unwrap();
        assert_eq!(out["userState"], "suspended");
        assert_eq!(
            out["online"], true,
            "Trident's field is about deletion only"
        );
        assert_eq!(out["state"], "online", "its health is apart");
    }

    #[test]
    fn volume_shape_has_capital_config() {
        let view = VolumeView {
            config: VolumeConfig {
                version: "1".into(),
                name: "v1".into(),
                internal_name: "trident_v1".into(),
                size: "1GB".into(),
                protocol: Protocol::File,
                storage_class: "gold".into(),
                access_information: AccessInfo {
                    nfs_server_ip: "10.0.0.1".into(),
                    nfs_path: "/trident_v1".into(),
                    ..Default::default()
                },
                ..Default::default()
            },
            backend: "nas1".into(),
            pool: "p1".into(),
            placed_pool: "p1".into(),
            orphaned: false,
            state: VolumeState::Online,
            last_error: None,
            published: BTreeMap::new(),
            topology: Vec::new(),
            managed: true,
            bound: false,
        };
        let out = serde_json::to_value(VolumeResponse {
            volume: view.into(),
        })
        .unwrap();
        let v = &out["volume"];
        assert!(v.get("config").is_none());
        assert_eq!(v["Config"]["name"], "v1");
        assert_eq!(v["Config"]["internalName"], "trident_v1");
        assert_eq!(v["Config"]["size"], "1GB");
        assert_eq!(v["Config"]["protocol"], "file");
        assert_eq!(v["Config"]["storageClass"], "gold");
        assert_eq!(
            v["Config"]["accessInformation"],
            json!({"nfsServerIp": "10.0.0.1", "nfsPath": "/trident_v1"})
        );
        assert_eq!(v["backend"], "nas1");
        assert_eq!(v["pool"], "p1");
        assert_eq!(v["orphaned"], false);
        assert_eq!(v["state"], "online");
        assert!(v.get("lastError").is_none());
        assert!(v.get("publishedNodes").is_none());
    }

    #[test]
    fn deleting_volume_shows_its_last_error() {
        let view = VolumeView {
            config: VolumeConfig::default(),
            backend: "b".into(),
            pool: String::new(),
            placed_pool: "p".into(),
            orphaned: true,
            state: VolumeState::Deleting,
            last_error: Some("array busy".into()),
            published: BTreeMap::new(),
            topology: Vec::new(),
            managed: true,
            bound: false,
        };
        let out = serde_json::to_value(VolumeExternal::from(view)).unwrap();
        assert_eq!(out["state"], "deleting");
        assert_eq!(out["lastError"], "array busy");
        assert_eq!(out["orphaned"], true);
        assert_eq!(out["pool"], "");
    }

    #[test]
    fn storage_class_shape_has_capital_config() {
        let config = StorageClassConfig::from_json(
            br#"{"version":"1","name":"gold","attributes":{"snapshots":"true"}}"#,
        )
        .unwrap();
        let view = StorageClassView {
            config,
            pools: BTreeMap::from([("nas1".to_string(), vec!["p1".to_string(), "p2".to_string()])]),
        };
        let out = serde_json::to_value(StorageClassResponse {
            storage_class: view.into(),
        })
        .unwrap();
        let sc = &out["storageClass"];
        assert!(sc.get("config").is_none());
        assert_eq!(sc["Config"]["name"], "gold");
        assert_eq!(sc["Config"]["version"], "1");
        assert_eq!(sc["Config"]["attributes"]["snapshots"], "true");
        assert_eq!(sc["storage"], json!({"nas1": ["p1", "p2"]}));
    }

    #[test]
    fn small_envelopes() {
        let v = serde_json::to_value(VersionResponse::current()).unwrap();
        assert_eq!(v["version"], "18.07.0");
        assert_eq!(v["storchVersion"], env!("CARGO_PKG_VERSION"));
        assert_eq!(
            serde_json::to_value(BackendNameResponse {
                backend: "b".into(),
                warnings: Vec::new(),
            })
            .unwrap(),
            json!({"backend": "b"})
        );
        assert_eq!(
            serde_json::to_value(StorageClassNameResponse {
                storage_class: "s".into(),
                warnings: Vec::new(),
            })
            .unwrap(),
            json!({"storageClass": "s"})
        );
        assert_eq!(
            serde_json::to_value(BackendListResponse { backends: vec![] }).unwrap(),
            json!({"backends": []})
        );
        assert_eq!(
            serde_json::to_value(VolumeListResponse {
                volumes: vec!["a".into()],
                next: None,
            })
            .unwrap(),
            json!({"volumes": ["a"]})
        );
        assert_eq!(
            serde_json::to_value(VolumeListResponse {
                volumes: vec!["a".into()],
                next: Some("a".into()),
            })
            .unwrap(),
            json!({"volumes": ["a"], "continue": "a"})
        );
        assert_eq!(
            serde_json::to_value(StorageClassListResponse {
                storage_classes: vec![]
            })
            .unwrap(),
            json!({"storageClasses": []})
        );
        assert_eq!(serde_json::to_value(EmptyResponse {}).unwrap(), json!({}));
    }

    #[test]
    fn snapshot_shape() {
        let made = SnapshotView {
            volume: "v1".into(),
            name: "s1".into(),
            created_ms: Some(1_767_323_045_678),
            size_bytes: 1 << 30,
        };
        let out = serde_json::to_value(SnapshotResponse {
            snapshot: made.into(),
        })
        .unwrap();
        assert_eq!(
            out,
            json!({"snapshot": {"volume": "v1", "name": "s1",
                "created": "2026-01-02T03:04:05.678Z", "sizeBytes": 1u64 << 30,
                "state": "online"}})
        );
        let making = SnapshotView {
            volume: "v1".into(),
            name: "s2".into(),
            created_ms: None,
            size_bytes: 0,
        };
        let out = serde_json::to_value(SnapshotExternal::from(making)).unwrap();
        assert_eq!(out["created"], serde_json::Value::Null);
        assert_eq!(out["state"], "creating");
    }

    #[test]
    fn explanation_shape() {
        let e = Explanation {
            storage_class: "gold".into(),
            protocol: Protocol::Block,
            size_bytes: Some(10),
            pools: vec![PoolExplanation {
                backend: "b".into(),
                pool: "p".into(),
                candidate: false,
                reasons: vec!["why".into()],
            }],
        };
        let out = serde_json::to_value(ExplanationResponse {
            explanation: e.into(),
            next: None,
        })
        .unwrap();
        assert_eq!(
            out,
            json!({"explanation": {"storageClass": "gold", "protocol": "block",
                "sizeBytes": 10, "pools": [{"backend": "b", "pool": "p",
                "candidate": false, "reasons": ["why"]}]}})
        );
    }

    #[test]
    fn status_shape() {
        let ok = StatusResponse {
            status: "ok",
            reasons: vec![],
        };
        assert_eq!(serde_json::to_value(ok).unwrap(), json!({"status": "ok"}));
        assert_eq!(rfc3339_ms(0), "1970-01-01T00:00:00.000Z");
    }
}

/// `POST /volume/import` body: the array volume (`backend` and `internalName`, or a
/// `volumeHandle` `BACKEND:POOL/VOLUME`), the storch name and class it gets.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ImportVolumeRequest {
    #[serde(default)]
    pub backend: String,
    #[serde(default)]
    pub internal_name: String,
    /// Instead of `backend` and `internalName`: `BACKEND:VOLUME` or `BACKEND:POOL/VOLUME`
    /// (the NexentaStor seed's `configName:pool/volumeGroup/volume`).
    #[serde(default)]
    pub volume_handle: String,
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub storage_class: String,
    /// Track the volume without ever destroying it: a delete forgets it.
    #[serde(default)]
    pub no_manage: bool,
}

/// An array volume no storch volume claims.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct OrphanExternal {
    pub backend: String,
    pub internal_name: String,
    pub pool: String,
    /// Bytes.
    pub size: String,
}

/// `GET /orphan`.
#[derive(Debug, Serialize, ToSchema)]
pub struct OrphanListResponse {
    pub orphans: Vec<OrphanExternal>,
    /// Backends that could not be listed now → why.
    pub unlisted: BTreeMap<String, String>,
}

/// `POST /backend/{backend}/reconcile`: what the comparison with the array found.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReconcileReport {
    pub backend: String,
    /// Volumes the array listed.
    pub listed: usize,
    /// Volumes looked up one by one (suspects of the listing).
    pub checked: usize,
    pub missing: Vec<String>,
    pub found: Vec<String>,
    pub changed: Vec<String>,
    pub orphans: Vec<OrphanExternal>,
}

/// `POST /backend/{backend}/reconcile`.
#[derive(Debug, Serialize, ToSchema)]
pub struct ReconcileResponse {
    pub reconcile: ReconcileReport,
}

impl From<crate::actors::Orphan> for OrphanExternal {
    fn from(o: crate::actors::Orphan) -> Self {
        OrphanExternal {
            backend: o.backend,
            internal_name: o.internal_name,
            pool: o.pool,
            size: o.size_bytes.to_string(),
        }
    }
}

impl From<crate::actors::DriftReport> for ReconcileReport {
    fn from(r: crate::actors::DriftReport) -> Self {
        ReconcileReport {
            backend: r.backend,
            listed: r.listed,
            checked: r.checked,
            missing: r.missing,
            found: r.found,
            changed: r.changed,
            orphans: r.orphans.into_iter().map(Into::into).collect(),
        }
    }
}
