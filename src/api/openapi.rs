//! The OpenAPI 3 document of the whole REST API, generated from the handlers'
//! `#[utoipa::path]` attributes and the DTOs' `ToSchema` derives, served at `/openapi.json`.
//!
//! A test checks that every route of the router's table is in the document and the other way
//! round. Model types (volume and class configs, offers) are described here by doc-only
//! mirrors; a test checks the volume mirror against the real type's JSON keys.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use serde::Serialize;
use utoipa::openapi::security::{Http, HttpAuthScheme, SecurityScheme};
use utoipa::{Modify, OpenApi, ToSchema};

use super::dto;
use super::handlers::{backend, drift, events, health, snapshot, storage_class, volume};
use super::ui::handlers as ui;

#[derive(OpenApi)]
#[openapi(
    info(
        title = "storch",
        description = "A storage orchestrator speaking NetApp Trident 18.07's REST API, plus \
                       storch's own routes (snapshots, resize, placement explanations, events, \
                       health, metrics). When the server has a token, every route except \
                       /livez and /readyz needs `Authorization: Bearer <token>` (401 otherwise). \
                       Every error body is the operation's envelope with its payload emptied, \
                       plus `error`; every response carries an `X-Request-Id`.",
        license(name = "Apache-2.0"),
    ),
    paths(
        super::handlers::version,
        super::handlers::version_legacy,
        backend::list,
        backend::add,
        backend::get,
        backend::update,
        backend::delete,
        volume::list,
        volume::add,
        volume::get,
        volume::delete,
        volume::resize,
        snapshot::create,
        snapshot::get,
        snapshot::list_of_volume,
        snapshot::list_all,
        snapshot::delete,
        storage_class::list,
        storage_class::add,
        storage_class::get,
        storage_class::delete,
        storage_class::explain,
        events::list,
        drift::orphans,
        drift::import,
        drift::reconcile,
        backend::set_state,
        health::livez,
        health::readyz,
        health::metrics,
        health::openapi,
        ui::overview,
        ui::volumes,
        ui::volume,
        ui::storage_classes,
        ui::verify_log,
    ),
    components(schemas(dto::ErrorResponse, OfferDoc, AccessInfoDoc)),
    modifiers(&BearerAuth),
    security(("bearer" = [])),
    tags(
        (name = "trident", description = "NetApp Trident 18.07's routes and shapes"),
        (name = "storch", description = "storch's own routes"),
        (name = "operations", description = "Probes, metrics and this document"),
    ),
)]
pub struct ApiDoc;

/// Declares the `bearer` security scheme the document refers to.
struct BearerAuth;

impl Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(Http::new(HttpAuthScheme::Bearer)),
        );
    }
}

/// The document, with storch's version.
pub fn document() -> utoipa::openapi::OpenApi {
    let mut doc = ApiDoc::openapi();
    doc.info.version = env!("CARGO_PKG_VERSION").to_string();
    doc
}

/// The document as JSON, built once.
pub fn document_json() -> Vec<u8> {
    static JSON: OnceLock<Vec<u8>> = OnceLock::new();
    JSON.get_or_init(|| {
        serde_json::to_vec_pretty(&document()).unwrap_or_else(|e| {
            tracing::error!(error = %e, "cannot encode the OpenAPI document");
            b"{}".to_vec()
        })
    })
    .clone()
}

// ---------------------------------------------------------------------------------------------
// Doc-only descriptions of model types (the model does not depend on utoipa).

/// Trident's `VolumeConfig`. Every scalar is a string; `size` is kept exactly as given
/// (`1Gi`, `10G`, `1073741824`). storch fills `version`, `internalName` and
/// `accessInformation`; CHAP secrets show as `<redacted>`.
#[allow(dead_code)]
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct VolumeConfigDoc {
    version: String,
    name: String,
    internal_name: String,
    size: String,
    /// `file`, `block` or `""` (any; decided by accessMode and the class).
    protocol: String,
    space_reserve: String,
    security_style: String,
    snapshot_policy: Option<String>,
    export_policy: Option<String>,
    snapshot_directory: Option<String>,
    unix_permissions: Option<String>,
    storage_class: Option<String>,
    /// `ReadWriteOnce`, `ReadOnlyMany`, `ReadWriteMany` or `""`.
    access_mode: Option<String>,
    access_information: AccessInfoDoc,
    block_size: String,
    file_system: String,
    encryption: String,
    /// Create the volume as a clone of this one.
    clone_source_volume: String,
    clone_source_volume_internal: String,
    /// With `cloneSourceVolume`: clone from this snapshot of it.
    clone_source_snapshot: String,
    split_on_clone: String,
    qos: Option<String>,
    #[serde(rename = "type")]
    qos_type: Option<String>,
}

/// How a host reaches a volume (NFS or iSCSI fields; empty ones are left out).
#[allow(dead_code)]
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AccessInfoDoc {
    iscsi_target_portal: Option<String>,
    iscsi_portals: Option<Vec<String>>,
    iscsi_target_iqn: Option<String>,
    iscsi_lun_number: Option<i32>,
    iscsi_interface: Option<String>,
    iscsi_igroup: Option<String>,
    iscsi_vags: Option<Vec<i64>>,
    iscsi_username: Option<String>,
    iscsi_initiator_secret: Option<String>,
    iscsi_target_secret: Option<String>,
    #[serde(rename = "nfsServerIp")]
    nfs_server_ip: Option<String>,
    nfs_path: Option<String>,
}

/// A storage class (Trident's `storageclass.Config`): attribute requests are strings
/// (`"media":"ssd"`, `"IOPS":"1000"`, `"snapshots":"true"`); pool selectors map a backend name
/// to pool-name regexes.
#[allow(dead_code)]
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct StorageClassConfigDoc {
    version: Option<String>,
    name: String,
    attributes: Option<BTreeMap<String, String>>,
    storage_pools: Option<BTreeMap<String, Vec<String>>>,
    /// Also read as `requiredStorage` (Trident 17.x).
    additional_storage_pools: Option<BTreeMap<String, Vec<String>>>,
    exclude_storage_pools: Option<BTreeMap<String, Vec<String>>>,
    /// Driver parameters (e.g. NexentaStor's `volumeGroup`, `chapSecret`): passed to the
    /// driver of the chosen pool, never matched; secret ones are shown as `<redacted>`.
    parameters: Option<BTreeMap<String, String>>,
}

/// What a pool offers for one attribute: `{"offer":true}`, `{"offer":["ssd"]}` or
/// `{"min":N,"max":M}`.
#[allow(dead_code)]
#[derive(Serialize, ToSchema)]
#[serde(untagged)]
pub enum OfferDoc {
    Bool { offer: bool },
    Strings { offer: Vec<String> },
    Range { min: i64, max: i64 },
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use serde_json::Value;

    use super::*;
    use crate::model::{AccessInfo, VolumeConfig};

    fn doc_json() -> Value {
        serde_json::from_slice(&document_json()).unwrap()
    }

    #[test]
    fn every_route_is_documented_and_nothing_else() {
        let doc = doc_json();
        let paths = doc["paths"].as_object().expect("paths");
        let mut in_doc = BTreeSet::new();
        for (path, item) in paths {
            for (method, _) in item.as_object().unwrap() {
                if matches!(
                    method.as_str(),
                    "get" | "post" | "put" | "delete" | "patch" | "head"
                ) {
                    in_doc.insert((method.to_uppercase(), path.clone()));
                }
            }
        }
        let in_router: BTreeSet<(String, String)> = super::super::route_list()
            .into_iter()
            .map(|(m, p)| (m.to_string(), p.to_string()))
            .collect();
        let missing: Vec<_> = in_router.difference(&in_doc).collect();
        assert!(
            missing.is_empty(),
            "routes missing from the document: {missing:?}"
        );
        let extra: Vec<_> = in_doc.difference(&in_router).collect();
        assert!(extra.is_empty(), "documented but not routed: {extra:?}");
    }

    #[test]
    fn the_document_is_openapi_3_with_storchs_version_and_schemas() {
        let doc = doc_json();
        assert!(
            doc["openapi"].as_str().unwrap().starts_with("3."),
            "{}",
            doc["openapi"]
        );
        assert_eq!(doc["info"]["version"], env!("CARGO_PKG_VERSION"));
        let schemas = doc["components"]["schemas"].as_object().unwrap();
        for name in [
            "VolumeResponse",
            "VolumeExternal",
            "VolumeConfigDoc",
            "SnapshotResponse",
            "SnapshotExternal",
            "ExplanationResponse",
            "EventListResponse",
            "EventExternal",
            "StatusResponse",
            "ErrorResponse",
            "BackendResponse",
            "StorageClassResponse",
        ] {
            assert!(schemas.contains_key(name), "schema {name} missing");
        }
        assert_eq!(
            doc["components"]["securitySchemes"]["bearer"]["scheme"],
            "bearer"
        );
        // Probes need no token.
        assert_eq!(
            doc["paths"]["/livez"]["get"]["security"],
            serde_json::json!([{}])
        );
        assert_eq!(
            doc["paths"]["/readyz"]["get"]["security"],
            serde_json::json!([{}])
        );
    }

    /// Every key a fully filled `VolumeConfig` serialises to is described by the mirror.
    #[test]
    fn the_volume_config_mirror_has_every_key() {
        let filled = VolumeConfig {
            version: "1".into(),
            name: "v".into(),
            internal_name: "i".into(),
            size: "1G".into(),
            space_reserve: "x".into(),
            security_style: "x".into(),
            snapshot_policy: "x".into(),
            export_policy: "x".into(),
            snapshot_directory: "x".into(),
            unix_permissions: "x".into(),
            storage_class: "x".into(),
            access_mode: "x".into(),
            access_information: AccessInfo::default(),
            block_size: "x".into(),
            file_system: "x".into(),
            encryption: "x".into(),
            clone_source_volume: "x".into(),
            clone_source_volume_internal: "x".into(),
            clone_source_snapshot: "x".into(),
            split_on_clone: "x".into(),
            qos: "x".into(),
            qos_type: "x".into(),
            ..VolumeConfig::default()
        };
        let keys: BTreeSet<String> = serde_json::to_value(&filled)
            .unwrap()
            .as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect();
        let doc = doc_json();
        let props: BTreeSet<String> = doc["components"]["schemas"]["VolumeConfigDoc"]["properties"]
            .as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect();
        assert_eq!(keys, props);
    }
}
