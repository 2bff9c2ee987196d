//! Pure translations between Kubernetes objects and storch's model
//! (docs/trident-contract.md#kubernetes-frontend): StorageClass → storch class, PVC → volume
//! config, volume → PV. No I/O; unit-tested below.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    ISCSIPersistentVolumeSource, LocalVolumeSource, NFSVolumeSource, NodeSelector,
    NodeSelectorRequirement, NodeSelectorTerm, ObjectReference, PersistentVolume,
    PersistentVolumeClaim, PersistentVolumeSpec, SecretReference, VolumeNodeAffinity,
};
use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::drivers::{Attachment, attachment};
use crate::model::{ClassParameters, StorageClassConfig, VolumeConfig, class_from_parameters};

/// The prefix of the PVC annotations Trident reads.
pub const ANNOTATION_PREFIX: &str = "trident.netapp.io/";
/// The GA and beta default-class annotations; both count.
pub const DEFAULT_CLASS: &str = "storageclass.kubernetes.io/is-default-class";
pub const DEFAULT_CLASS_BETA: &str = "storageclass.beta.kubernetes.io/is-default-class";
/// The beta class annotation on a PVC (wins over `spec.storageClassName`) and on a PV.
pub const CLASS_ANNOTATION: &str = "volume.beta.kubernetes.io/storage-class";
/// Who provisioned a PV.
pub const PROVISIONED_BY: &str = "pv.kubernetes.io/provisioned-by";
/// The file system when neither the PVC nor the class names one.
pub const DEFAULT_FS: &str = "ext4";

/// What the frontend keeps of a StorageClass besides the storch class.
#[derive(Debug, Clone, PartialEq)]
pub struct FrontendClass {
    /// The provisioner name the class uses (written into the PVs' `provisioned-by`).
    pub provisioner: String,
    pub fs_type: Option<String>,
    pub mount_options: Vec<String>,
    /// `Delete` when the class does not say.
    pub reclaim_policy: String,
    pub is_default: bool,
    /// `allowVolumeExpansion`: whether its claims may grow.
    pub allow_expansion: bool,
    pub config: StorageClassConfig,
}

/// Translates a StorageClass of one of `provisioners` (`Ok(None)` for other provisioners).
/// Parameters become attribute requests, except `fsType` (kept by the frontend), the pool
/// lists in `backend:pool1,pool2;backend2:pool3` form, and `requiredStorage` (an alias of
/// `additionalStoragePools`). Errors name the parameter.
pub fn storage_class(
    sc: &StorageClass,
    provisioners: &[String],
) -> Result<Option<FrontendClass>, String> {
    if !provisioners.contains(&sc.provisioner) {
        return Ok(None);
    }
    let name = sc.metadata.name.clone().unwrap_or_default();
    let ClassParameters { config, fs_type } =
        class_from_parameters(&name, sc.parameters.iter().flatten())?;
    let annotations = sc.metadata.annotations.as_ref();
    let is_default = [DEFAULT_CLASS, DEFAULT_CLASS_BETA]
        .iter()
        .any(|a| annotations.and_then(|m| m.get(*a)).map(String::as_str) == Some("true"));
    Ok(Some(FrontendClass {
        provisioner: sc.provisioner.clone(),
        fs_type,
        mount_options: sc.mount_options.clone().unwrap_or_default(),
        reclaim_policy: sc
            .reclaim_policy
            .clone()
            .unwrap_or_else(|| "Delete".to_string()),
        is_default,
        allow_expansion: sc.allow_volume_expansion == Some(true),
        config,
    }))
}

/// The storch volume (and PV) name of a claim: `<namespace>-<name>-<first 5 of the uid with
/// '-', '_', ' ', ',' removed>`.
pub fn unique_name(pvc: &PersistentVolumeClaim) -> String {
    let uid: String = pvc
        .metadata
        .uid
        .as_deref()
        .unwrap_or_default()
        .chars()
        .filter(|c| !matches!(c, '-' | '_' | ' ' | ','))
        .take(5)
        .collect();
    format!(
        "{}-{}-{uid}",
        pvc.metadata.namespace.as_deref().unwrap_or("default"),
        pvc.metadata.name.as_deref().unwrap_or_default()
    )
}

/// Which class a claim asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClaimClass {
    /// A class by name (annotation first, then `spec.storageClassName`).
    Named(String),
    /// `storageClassName: ""`: explicitly no dynamic provisioning.
    ExplicitlyNone,
    /// Nothing given: the default class applies.
    Default,
}

pub fn claim_class(pvc: &PersistentVolumeClaim) -> ClaimClass {
    if let Some(a) = pvc
        .metadata
        .annotations
        .as_ref()
        .and_then(|m| m.get(CLASS_ANNOTATION))
        && !a.is_empty()
    {
        return ClaimClass::Named(a.clone());
    }
    match pvc
        .spec
        .as_ref()
        .and_then(|s| s.storage_class_name.as_deref())
    {
        Some("") => ClaimClass::ExplicitlyNone,
        Some(name) => ClaimClass::Named(name.to_string()),
        None => ClaimClass::Default,
    }
}

/// The claim's storage request, if any.
pub fn requested(pvc: &PersistentVolumeClaim) -> Option<&Quantity> {
    pvc.spec
        .as_ref()?
        .resources
        .as_ref()?
        .requests
        .as_ref()?
        .get("storage")
}

/// A PVC annotation of Trident's (`trident.netapp.io/<key>`).
pub fn annotation<'a>(pvc: &'a PersistentVolumeClaim, key: &str) -> Option<&'a str> {
    pvc.metadata
        .annotations
        .as_ref()?
        .get(&format!("{ANNOTATION_PREFIX}{key}"))
        .map(String::as_str)
}

/// A Kubernetes quantity in bytes, rounded up (`1Gi`, `500M`, `1.5Gi`, `1e9`, `100m`).
pub fn quantity_bytes(q: &str) -> Result<u64, String> {
    let s = q.trim();
    let bad = || format!("{q:?} is not a valid quantity");
    // Binary suffixes first: `Mi` must not be read as `M` followed by junk.
    const SUFFIXES: [(&str, f64); 13] = [
        ("Ki", 1024.0),
        ("Mi", 1048576.0),
        ("Gi", 1073741824.0),
        ("Ti", 1099511627776.0),
        ("Pi", 1125899906842624.0),
        ("Ei", 1152921504606846976.0),
        ("k", 1e3),
        ("M", 1e6),
        ("G", 1e9),
        ("T", 1e12),
        ("P", 1e15),
        ("E", 1e18),
        ("m", 1e-3),
    ];
    let (number, factor) = SUFFIXES
        .iter()
        .find_map(|(suffix, factor)| s.strip_suffix(suffix).map(|n| (n, *factor)))
        .unwrap_or((s, 1.0));
    if number.is_empty()
        || !number
            .chars()
            .all(|c| c.is_ascii_digit() || matches!(c, '.' | 'e' | 'E' | '+' | '-'))
    {
        return Err(bad());
    }
    let value: f64 = number.parse().map_err(|_| bad())?;
    let bytes = (value * factor).ceil();
    if !bytes.is_finite() || bytes < 0.0 || bytes >= u64::MAX as f64 {
        return Err(bad());
    }
    Ok(bytes as u64)
}

/// Trident's access-mode rule: several modes are `ReadWriteMany`, none is `""`.
fn access_mode(pvc: &PersistentVolumeClaim) -> String {
    let modes = pvc
        .spec
        .as_ref()
        .and_then(|s| s.access_modes.clone())
        .unwrap_or_default();
    match modes.as_slice() {
        [] => String::new(),
        [one] => one.clone(),
        _ => "ReadWriteMany".to_string(),
    }
}

/// The volume config for a claim of `class`. `clone_source` is the storch name of the
/// `cloneFromPVC` source, already resolved by the caller. Errors name the field or annotation.
pub fn volume_config(
    pvc: &PersistentVolumeClaim,
    class: &FrontendClass,
    clone_source: Option<String>,
) -> Result<VolumeConfig, String> {
    let request = requested(pvc).ok_or("spec.resources.requests.storage is missing")?;
    let bytes =
        quantity_bytes(&request.0).map_err(|e| format!("spec.resources.requests.storage: {e}"))?;
    let ann = |key: &str| annotation(pvc, key).unwrap_or_default().to_string();
    let protocol = match annotation(pvc, "protocol") {
        None => crate::model::Protocol::Any,
        Some(p) => crate::model::Protocol::parse(p).ok_or_else(|| {
            format!("annotation {ANNOTATION_PREFIX}protocol: {p:?} is not file, block or empty")
        })?,
    };
    // A raw block claim asks for a block volume and has no file system.
    let block = super::block::wants_block(pvc)?;
    let protocol = match block {
        true => super::block::protocol(protocol)?,
        false => protocol,
    };
    let file_system = match block {
        true => String::new(),
        false => annotation(pvc, "fileSystem")
            .filter(|f| !f.is_empty())
            .map(str::to_string)
            .or_else(|| class.fs_type.clone())
            .unwrap_or_else(|| DEFAULT_FS.to_string()),
    };
    let split = ann("splitOnClone");
    if !split.is_empty() && split.parse::<bool>().is_err() {
        return Err(format!(
            "annotation {ANNOTATION_PREFIX}splitOnClone: {split:?} is not true or false"
        ));
    }
    Ok(VolumeConfig {
        version: "1".into(),
        name: unique_name(pvc),
        size: bytes.to_string(),
        protocol,
        storage_class: class.config.name.clone(),
        access_mode: access_mode(pvc),
        snapshot_policy: ann("snapshotPolicy"),
        export_policy: ann("exportPolicy"),
        snapshot_directory: ann("snapshotDirectory"),
        unix_permissions: ann("unixPermissions"),
        block_size: ann("blockSize"),
        file_system,
        clone_source_volume: clone_source.unwrap_or_default(),
        split_on_clone: split,
        ..VolumeConfig::default()
    })
}

/// The reclaim policy of a claim's PV: the class's, unless the PVC annotation
/// `trident.netapp.io/reclaimPolicy` says otherwise.
pub fn reclaim_policy(pvc: &PersistentVolumeClaim, class: &FrontendClass) -> String {
    match annotation(pvc, "reclaimPolicy") {
        Some(p) if !p.is_empty() => p.to_string(),
        _ => class.reclaim_policy.clone(),
    }
}

/// What the PV writer needs to know about the provisioned volume.
#[derive(Debug, Clone)]
pub struct Provisioned<'a> {
    pub config: &'a VolumeConfig,
    /// The backend's driver name: with the access info, `drivers::attachment` says how the
    /// volume attaches, which decides the PV source type.
    pub driver: &'a str,
    pub backend: &'a str,
    /// The node this storch runs on (for the local driver's node affinity).
    pub node: Option<&'a str>,
    /// The namespace CHAP secrets live in.
    pub namespace: &'a str,
}

/// The name of a backend's CHAP secret: `trident-chap-<backend>-<user>`, lowercase, with `_`
/// and `.` as `-`.
pub fn chap_secret_name(backend: &str, user: &str) -> String {
    format!("trident-chap-{backend}-{user}")
        .to_lowercase()
        .replace(['_', '.'], "-")
}

/// The PV for a claim and its volume (docs/trident-contract.md#pv-creation).
pub fn persistent_volume(
    pvc: &PersistentVolumeClaim,
    class: &FrontendClass,
    volume: &Provisioned<'_>,
) -> Result<PersistentVolume, String> {
    let access = &volume.config.access_information;
    let block = super::block::wants_block(pvc)?;
    if block {
        super::block::check_attachment(attachment(volume.driver, access), volume.driver)?;
    }
    let fs_type = Some(volume.config.file_system.clone()).filter(|f| !f.is_empty() && !block);
    let mut spec = PersistentVolumeSpec::default();
    let nfs = || {
        Some(NFSVolumeSource {
            server: access.nfs_server_ip.clone(),
            path: access.nfs_path.clone(),
            read_only: None,
        })
    };
    let iscsi = || {
        let chap = !access.iscsi_username.is_empty();
        Some(ISCSIPersistentVolumeSource {
            target_portal: access.iscsi_target_portal.clone(),
            portals: Some(access.iscsi_portals.clone()).filter(|p| !p.is_empty()),
            iqn: access.iscsi_target_iqn.clone(),
            lun: access.iscsi_lun_number,
            iscsi_interface: Some(access.iscsi_interface.clone()).filter(|i| !i.is_empty()),
            fs_type: fs_type.clone(),
            chap_auth_discovery: chap.then_some(true),
            chap_auth_session: chap.then_some(true),
            secret_ref: chap.then(|| SecretReference {
                name: Some(chap_secret_name(volume.backend, &access.iscsi_username)),
                namespace: Some(volume.namespace.to_string()),
            }),
            ..ISCSIPersistentVolumeSource::default()
        })
    };
    match attachment(volume.driver, access) {
        Some(Attachment::Nfs) => spec.nfs = nfs(),
        Some(Attachment::Iscsi) => spec.iscsi = iscsi(),
        Some(Attachment::LocalPath) => {
            let node = volume.node.ok_or(
                "the local driver's volumes are on this node, but its name is unknown: \
                 give --k8s-node-name (or STORCH_NODE_NAME from the downward API)",
            )?;
            spec.local = Some(LocalVolumeSource {
                path: access.local_path.clone(),
                fs_type: None,
            });
            spec.node_affinity = Some(VolumeNodeAffinity {
                required: Some(NodeSelector {
                    node_selector_terms: vec![NodeSelectorTerm {
                        match_expressions: Some(vec![NodeSelectorRequirement {
                            key: "kubernetes.io/hostname".into(),
                            operator: "In".into(),
                            values: Some(vec![node.to_string()]),
                        }]),
                        match_fields: None,
                    }],
                }),
            });
        }
        None => {
            return Err(format!(
                "unrecognized volume type by Kubernetes (driver {})",
                volume.driver
            ));
        }
    }
    let pvc_spec = pvc.spec.clone().unwrap_or_default();
    spec.access_modes = pvc_spec.access_modes.clone();
    spec.volume_mode = pvc_spec.volume_mode.clone();
    spec.capacity = requested(pvc).map(|q| BTreeMap::from([("storage".to_string(), q.clone())]));
    spec.claim_ref = Some(ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("PersistentVolumeClaim".into()),
        namespace: pvc.metadata.namespace.clone(),
        name: pvc.metadata.name.clone(),
        uid: pvc.metadata.uid.clone(),
        ..ObjectReference::default()
    });
    spec.persistent_volume_reclaim_policy = Some(reclaim_policy(pvc, class));
    spec.storage_class_name = Some(class.config.name.clone());
    spec.mount_options = Some(class.mount_options.clone()).filter(|m| !m.is_empty());
    Ok(PersistentVolume {
        metadata: ObjectMeta {
            name: Some(volume.config.name.clone()),
            annotations: Some(BTreeMap::from([
                (CLASS_ANNOTATION.to_string(), class.config.name.clone()),
                (PROVISIONED_BY.to_string(), class.provisioner.clone()),
            ])),
            ..ObjectMeta::default()
        },
        spec: Some(spec),
        status: None,
    })
}

/// A reference to an object for Kubernetes Events.
pub fn reference_of(
    kind: &str,
    api_version: &str,
    meta: &ObjectMeta,
) -> k8s_openapi::api::core::v1::ObjectReference {
    ObjectReference {
        api_version: Some(api_version.into()),
        kind: Some(kind.into()),
        name: meta.name.clone(),
        namespace: meta.namespace.clone(),
        uid: meta.uid.clone(),
        resource_version: meta.resource_version.clone(),
        ..ObjectReference::default()
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{PersistentVolumeClaimSpec, VolumeResourceRequirements};

    use super::*;
    use crate::model::{AccessInfo, Protocol};
    use serde_json::json;

    fn names() -> Vec<String> {
        vec!["netapp.io/trident".into(), "storch.io/storch".into()]
    }

    fn sc(params: &[(&str, &str)]) -> StorageClass {
        StorageClass {
            metadata: ObjectMeta {
                name: Some("gold".into()),
                ..ObjectMeta::default()
            },
            provisioner: "netapp.io/trident".into(),
            parameters: Some(
                params
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            ),
            ..StorageClass::default()
        }
    }

    fn pvc(annotations: &[(&str, &str)], modes: &[&str], size: &str) -> PersistentVolumeClaim {
        PersistentVolumeClaim {
            metadata: ObjectMeta {
                name: Some("basic".into()),
                namespace: Some("default".into()),
                uid: Some("6cb6b-1d2e-4f00-9a4b-0123456789ab".into()),
                annotations: Some(
                    annotations
                        .iter()
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .collect(),
                ),
                ..ObjectMeta::default()
            },
            spec: Some(PersistentVolumeClaimSpec {
                access_modes: Some(modes.iter().map(|m| m.to_string()).collect()),
                resources: Some(VolumeResourceRequirements {
                    requests: Some(BTreeMap::from([(
                        "storage".to_string(),
                        Quantity(size.into()),
                    )])),
                    limits: None,
                }),
                storage_class_name: Some("gold".into()),
                ..PersistentVolumeClaimSpec::default()
            }),
            status: None,
        }
    }

    #[test]
    fn classes_of_other_provisioners_are_not_ours() {
        let mut c = sc(&[]);
        c.provisioner = "kubernetes.io/aws-ebs".into();
        assert_eq!(storage_class(&c, &names()), Ok(None));
    }

    #[test]
    fn class_parameters_become_attributes_and_pool_lists() {
        let c = sc(&[
            ("backendType", "ontap-nas"),
            ("media", "ssd"),
            ("snapshots", "true"),
            ("fsType", "xfs"),
            ("storagePools", "nas1:aggr1,aggr2;nas2:aggr3"),
            ("requiredStorage", "san:aggr9"),
            ("excludeStoragePools", "nas1:aggr2"),
        ]);
        let f = storage_class(&c, &names()).unwrap().unwrap();
        assert_eq!(f.fs_type.as_deref(), Some("xfs"));
        assert_eq!(f.reclaim_policy, "Delete");
        assert!(!f.is_default);
        let cfg = &f.config;
        assert_eq!(cfg.name, "gold");
        assert_eq!(
            cfg.attributes.keys().collect::<Vec<_>>(),
            ["backendType", "media", "snapshots"]
        );
        assert_eq!(cfg.storage_pools["nas1"], ["aggr1", "aggr2"]);
        assert_eq!(cfg.storage_pools["nas2"], ["aggr3"]);
        assert_eq!(cfg.additional_storage_pools["san"], ["aggr9"]);
        assert_eq!(cfg.exclude_storage_pools["nas1"], ["aggr2"]);
    }

    #[test]
    fn bad_class_parameters_name_the_parameter() {
        for (params, want) in [
            (vec![("storagePools", "nas1")], "parameters.storagePools"),
            (vec![("storagePools", "nas1:")], "parameters.storagePools"),
            (
                vec![("excludeStoragePools", ":a")],
                "parameters.excludeStoragePools",
            ),
            (
                vec![("additionalStoragePools", "a:b;")],
                "additionalStoragePools",
            ),
            (vec![("nonsense", "1")], "nonsense"),
            (vec![("IOPS", "many")], "IOPS"),
        ] {
            let err = storage_class(&sc(&params), &names()).unwrap_err();
            assert!(err.contains(want), "{params:?}: {err}");
        }
    }

    #[test]
    fn both_default_annotations_count() {
        for key in [DEFAULT_CLASS, DEFAULT_CLASS_BETA] {
            let mut c = sc(&[]);
            c.metadata.annotations = Some(BTreeMap::from([(key.to_string(), "true".into())]));
            assert!(
                storage_class(&c, &names()).unwrap().unwrap().is_default,
                "{key}"
            );
        }
    }

    #[test]
    fn unique_names_take_five_uid_characters_without_separators() {
        let mut p = pvc(&[], &[], "1Gi");
        assert_eq!(unique_name(&p), "default-basic-6cb6b");
        p.metadata.uid = Some("a-b_c d,e-f-g".into());
        assert_eq!(unique_name(&p), "default-basic-abcde");
    }

    #[test]
    fn the_class_comes_from_the_annotation_then_the_spec() {
        let mut p = pvc(&[], &[], "1Gi");
        assert_eq!(claim_class(&p), ClaimClass::Named("gold".into()));
        p.metadata.annotations = Some(BTreeMap::from([(
            CLASS_ANNOTATION.to_string(),
            "silver".to_string(),
        )]));
        assert_eq!(claim_class(&p), ClaimClass::Named("silver".into()));
        p.metadata.annotations = None;
        p.spec.as_mut().unwrap().storage_class_name = Some(String::new());
        assert_eq!(claim_class(&p), ClaimClass::ExplicitlyNone);
        p.spec.as_mut().unwrap().storage_class_name = None;
        assert_eq!(claim_class(&p), ClaimClass::Default);
    }

    #[test]
    fn quantities() {
        for (q, want) in [
            ("1Gi", 1 << 30),
            ("1G", 1_000_000_000),
            ("1.5Gi", 3 << 29),
            ("500M", 500_000_000),
            ("1e9", 1_000_000_000),
            ("1024", 1024),
            ("100Ki", 102_400),
            ("1500m", 2),
            ("2Ti", 2 << 40),
        ] {
            assert_eq!(quantity_bytes(q), Ok(want), "{q}");
        }
        for q in ["", "Gi", "1GB", "-1Gi", "abc", "1 Gi x"] {
            assert!(quantity_bytes(q).is_err(), "{q}");
        }
    }

    fn class() -> FrontendClass {
        storage_class(&sc(&[("fsType", "xfs")]), &names())
            .unwrap()
            .unwrap()
    }

    #[test]
    fn every_annotation_reaches_the_volume_config() {
        let p = pvc(
            &[
                ("trident.netapp.io/protocol", "file"),
                ("trident.netapp.io/snapshotPolicy", "default"),
                ("trident.netapp.io/exportPolicy", "k8s"),
                ("trident.netapp.io/snapshotDirectory", "true"),
                ("trident.netapp.io/unixPermissions", "0755"),
                ("trident.netapp.io/blockSize", "4096"),
                ("trident.netapp.io/fileSystem", "ext3"),
                ("trident.netapp.io/splitOnClone", "true"),
            ],
            &["ReadWriteOnce"],
            "2Gi",
        );
        let v = volume_config(&p, &class(), Some("default-src-12345".into())).unwrap();
        assert_eq!(v.name, "default-basic-6cb6b");
        assert_eq!(v.size, (2u64 << 30).to_string());
        assert_eq!(v.protocol, Protocol::File);
        assert_eq!(v.storage_class, "gold");
        assert_eq!(v.access_mode, "ReadWriteOnce");
        assert_eq!(v.snapshot_policy, "default");
        assert_eq!(v.export_policy, "k8s");
        assert_eq!(v.snapshot_directory, "true");
        assert_eq!(v.unix_permissions, "0755");
        assert_eq!(v.block_size, "4096");
        assert_eq!(v.file_system, "ext3");
        assert_eq!(v.split_on_clone, "true");
        assert_eq!(v.clone_source_volume, "default-src-12345");
    }

    #[test]
    fn file_system_priority_and_access_modes() {
        let c = class();
        let v = volume_config(&pvc(&[], &[], "1Gi"), &c, None).unwrap();
        assert_eq!(v.file_system, "xfs", "the class's fsType");
        assert_eq!(v.access_mode, "");
        let mut plain = c.clone();
        plain.fs_type = None;
        let v = volume_config(
            &pvc(&[], &["ReadWriteOnce", "ReadOnlyMany"], "1Gi"),
            &plain,
            None,
        )
        .unwrap();
        assert_eq!(v.file_system, "ext4");
        assert_eq!(v.access_mode, "ReadWriteMany");
    }

    #[test]
    fn bad_annotations_name_the_annotation() {
        for (key, value) in [
            ("trident.netapp.io/protocol", "nfs"),
            ("trident.netapp.io/splitOnClone", "maybe"),
        ] {
            let err = volume_config(&pvc(&[(key, value)], &[], "1Gi"), &class(), None).unwrap_err();
            assert!(err.contains(key), "{err}");
        }
        let err = volume_config(&pvc(&[], &[], "lots"), &class(), None).unwrap_err();
        assert!(err.contains("spec.resources.requests.storage"), "{err}");
    }

    fn provisioned<'a>(config: &'a VolumeConfig, driver: &'a str) -> Provisioned<'a> {
        Provisioned {
            config,
            driver,
            backend: "san_1.a",
            node: Some("node-1"),
            namespace: "storch",
        }
    }

    #[test]
    fn pv_shape_for_nfs() {
        let p = pvc(&[], &["ReadWriteMany"], "1Gi");
        let mut c = class();
        c.mount_options = vec!["nfsvers=4.1".into()];
        c.reclaim_policy = "Retain".into();
        let mut v = volume_config(&p, &c, None).unwrap();
        v.access_information = AccessInfo {
            nfs_server_ip: "10.0.0.1".into(),
            nfs_path: "/trident_x".into(),
            ..AccessInfo::default()
        };
        let pv = persistent_volume(&p, &c, &provisioned(&v, "ontap-nas")).unwrap();
        let json = serde_json::to_value(&pv).unwrap();
        assert_eq!(json["metadata"]["name"], "default-basic-6cb6b");
        assert_eq!(
            json["metadata"]["annotations"],
            json!({CLASS_ANNOTATION: "gold", PROVISIONED_BY: "netapp.io/trident"})
        );
        let spec = &json["spec"];
        assert_eq!(
            spec["nfs"],
            json!({"server": "10.0.0.1", "path": "/trident_x"})
        );
        assert_eq!(spec["capacity"], json!({"storage": "1Gi"}));
        assert_eq!(spec["accessModes"], json!(["ReadWriteMany"]));
        assert_eq!(spec["claimRef"]["name"], "basic");
        assert_eq!(spec["claimRef"]["namespace"], "default");
        assert_eq!(spec["claimRef"]["uid"], "6cb6b-1d2e-4f00-9a4b-0123456789ab");
        assert_eq!(spec["persistentVolumeReclaimPolicy"], "Retain");
        assert_eq!(spec["storageClassName"], "gold");
        assert_eq!(spec["mountOptions"], json!(["nfsvers=4.1"]));
        // the PVC annotation beats the class
        let p = pvc(&[("trident.netapp.io/reclaimPolicy", "Delete")], &[], "1Gi");
        let pv = persistent_volume(&p, &c, &provisioned(&v, "ontap-nas")).unwrap();
        assert_eq!(
            pv.spec.unwrap().persistent_volume_reclaim_policy.as_deref(),
            Some("Delete")
        );
    }

    #[test]
    fn pv_shape_for_iscsi_with_chap() {
        let p = pvc(&[], &["ReadWriteOnce"], "1Gi");
        let c = class();
        let mut v = volume_config(&p, &c, None).unwrap();
        v.access_information = AccessInfo {
            iscsi_target_portal: "10.0.0.2:3260".into(),
            iscsi_portals: vec!["10.0.0.3:3260".into()],
            iscsi_target_iqn: "iqn.1992-08.com.netapp:sn.1".into(),
            iscsi_lun_number: 3,
            iscsi_interface: "default".into(),
            iscsi_username: "User_1".into(),
            ..AccessInfo::default()
        };
        // Both iSCSI drivers (the attachment comes from drivers::attachment).
        for driver in ["ontap-san", "solidfire-san"] {
            let pv = persistent_volume(&p, &c, &provisioned(&v, driver)).unwrap();
            let json = serde_json::to_value(&pv).unwrap();
            assert!(json["spec"]["nfs"].is_null(), "{driver}");
            assert_eq!(
                json["spec"]["iscsi"],
                json!({
                    "targetPortal": "10.0.0.2:3260",
                    "portals": ["10.0.0.3:3260"],
                    "iqn": "iqn.1992-08.com.netapp:sn.1",
                    "lun": 3,
                    "iscsiInterface": "default",
                    "fsType": "xfs",
                    "chapAuthDiscovery": true,
                    "chapAuthSession": true,
                    "secretRef": {"name": "trident-chap-san-1-a-user-1", "namespace": "storch"},
                }),
                "{driver}"
            );
        }
    }

    #[test]
    fn pv_shape_for_local_and_unknown_drivers() {
        let p = pvc(&[], &["ReadWriteOnce"], "1Gi");
        let c = class();
        let mut v = volume_config(&p, &c, None).unwrap();
        v.access_information.local_path = "/pools/fast/volumes/x".into();
        let pv = persistent_volume(&p, &c, &provisioned(&v, "local")).unwrap();
        let json = serde_json::to_value(&pv).unwrap();
        assert_eq!(
            json["spec"]["local"],
            json!({"path": "/pools/fast/volumes/x"})
        );
        assert_eq!(
            json["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"][0]["matchExpressions"][0],
            json!({"key": "kubernetes.io/hostname", "operator": "In", "values": ["node-1"]})
        );
        let mut no_node = provisioned(&v, "local");
        no_node.node = None;
        assert!(
            persistent_volume(&p, &c, &no_node)
                .unwrap_err()
                .contains("--k8s-node-name")
        );
        let err = persistent_volume(&p, &c, &provisioned(&v, "tape")).unwrap_err();
        assert!(err.contains("unrecognized volume type"), "{err}");
    }
}
