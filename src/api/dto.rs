//! The wire shapes of the REST API (trident-compat §1.3, §1.5), owned by the API and built
//! from the core's views. Keys are Trident's, including the capital `Config` of volumes and
//! storage classes; storch's additions (`state`, capacities, `storchVersion`) are extra keys,
//! which Trident clients ignore.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::actors::{BackendState, BackendView, PoolView, StorageClassView, VolumeView};
use crate::model::{Offer, Protocol, StorageClassConfig, VolumeConfig};

use super::TRIDENT_VERSION;

/// `GET /trident/version`, `GET /trident/v1/version`.
#[derive(Debug, Serialize)]
pub struct VersionResponse {
    pub version: &'static str,
    #[serde(rename = "storchVersion")]
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
#[derive(Debug, Serialize)]
pub struct BackendNameResponse {
    pub backend: String,
}

/// `POST /storageclass`.
#[derive(Debug, Serialize)]
pub struct StorageClassNameResponse {
    #[serde(rename = "storageClass")]
    pub storage_class: String,
}

/// `GET /backend`.
#[derive(Debug, Serialize)]
pub struct BackendListResponse {
    pub backends: Vec<String>,
}

/// `GET /volume`.
#[derive(Debug, Serialize)]
pub struct VolumeListResponse {
    pub volumes: Vec<String>,
}

/// `GET /storageclass`.
#[derive(Debug, Serialize)]
pub struct StorageClassListResponse {
    #[serde(rename = "storageClasses")]
    pub storage_classes: Vec<String>,
}

/// `DELETE …`: `{}`.
#[derive(Debug, Serialize)]
pub struct EmptyResponse {}

/// `GET /backend/{name}`.
#[derive(Debug, Serialize)]
pub struct BackendResponse {
    pub backend: BackendExternal,
}

/// `GET /volume/{name}`.
#[derive(Debug, Serialize)]
pub struct VolumeResponse {
    pub volume: VolumeExternal,
}

/// `GET /storageclass/{name}`.
#[derive(Debug, Serialize)]
pub struct StorageClassResponse {
    #[serde(rename = "storageClass")]
    pub storage_class: StorageClassExternal,
}

/// Trident's `BackendExternal`, plus `state` (and `stateReason` when failed).
#[derive(Debug, Serialize)]
pub struct BackendExternal {
    pub name: String,
    pub protocol: Protocol,
    pub config: serde_json::Value,
    /// Pool name → pool.
    pub storage: BTreeMap<String, PoolExternal>,
    pub online: bool,
    pub volumes: Vec<String>,
    /// storch: `initializing`, `online`, `offline` or `failed`.
    pub state: &'static str,
    /// storch: why the backend failed.
    #[serde(rename = "stateReason", skip_serializing_if = "Option::is_none")]
    pub state_reason: Option<String>,
}

/// A pool inside [`BackendExternal`], plus its capacity where known.
#[derive(Debug, Serialize)]
pub struct PoolExternal {
    pub name: String,
    #[serde(rename = "storageClasses")]
    pub storage_classes: Vec<String>,
    #[serde(rename = "storageAttributes")]
    pub storage_attributes: BTreeMap<String, Offer>,
    /// storch: capacity in bytes.
    #[serde(rename = "totalBytes", skip_serializing_if = "Option::is_none")]
    pub total_bytes: Option<u64>,
    /// storch: free space in bytes.
    #[serde(rename = "freeBytes", skip_serializing_if = "Option::is_none")]
    pub free_bytes: Option<u64>,
}

/// Trident's `VolumeExternal` (capital `Config`), plus `state` (and `lastError` while a
/// delete keeps failing).
#[derive(Debug, Serialize)]
pub struct VolumeExternal {
    #[serde(rename = "Config")]
    pub config: VolumeConfig,
    pub backend: String,
    pub pool: String,
    pub orphaned: bool,
    /// storch: `creating`, `online` or `deleting`.
    pub state: &'static str,
    #[serde(rename = "lastError", skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
}

/// Trident's `StorageClassExternal` (capital `Config`).
#[derive(Debug, Serialize)]
pub struct StorageClassExternal {
    #[serde(rename = "Config")]
    pub config: StorageClassConfig,
    /// Backend → sorted pool names.
    pub storage: BTreeMap<String, Vec<String>>,
}

impl From<PoolView> for PoolExternal {
    fn from(p: PoolView) -> Self {
        PoolExternal {
            name: p.name,
            storage_classes: p.storage_classes,
            storage_attributes: p.offers,
            total_bytes: p.total_bytes,
            free_bytes: p.free_bytes,
        }
    }
}

impl From<BackendView> for BackendExternal {
    fn from(b: BackendView) -> Self {
        let state = b.state.as_str();
        let state_reason = match b.state {
            BackendState::Failed(reason) => Some(reason),
            _ => None,
        };
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
        }
    }
}

impl From<VolumeView> for VolumeExternal {
    fn from(v: VolumeView) -> Self {
        VolumeExternal {
            config: v.config,
            backend: v.backend,
            pool: v.pool,
            orphaned: v.orphaned,
            state: v.state.as_str(),
            last_error: v.last_error,
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
                },
                PoolView {
                    name: "p2".into(),
                    storage_classes: vec![],
                    offers: BTreeMap::new(),
                    total_bytes: None,
                    free_bytes: None,
                },
            ],
            online: true,
            state: BackendState::Online,
            volumes: vec!["v1".into(), "v2".into()],
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
            orphaned: false,
            state: VolumeState::Online,
            last_error: None,
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
    }

    #[test]
    fn deleting_volume_shows_its_last_error() {
        let view = VolumeView {
            config: VolumeConfig::default(),
            backend: "b".into(),
            pool: String::new(),
            orphaned: true,
            state: VolumeState::Deleting,
            last_error: Some("array busy".into()),
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
                backend: "b".into()
            })
            .unwrap(),
            json!({"backend": "b"})
        );
        assert_eq!(
            serde_json::to_value(StorageClassNameResponse {
                storage_class: "s".into()
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
                volumes: vec!["a".into()]
            })
            .unwrap(),
            json!({"volumes": ["a"]})
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
}
