//! `examples/csi/`: every document parses strictly (k8s-openapi for the core and storage
//! kinds; the snapshot CRDs, which k8s-openapi does not have, as JSON with every field
//! checked), every class's parameters are ones storch's readers accept, and the claims,
//! snapshots and PVs refer to each other as Kubernetes needs.

use std::collections::HashMap;

use super::*;

const DRIVER: &str = "csi.storch.io";

/// A VolumeSnapshotClass or VolumeSnapshot (snapshot.storage.k8s.io/v1), checked field by
/// field against the CRDs' schema as far as storch's examples use it.
#[derive(Debug)]
enum Snapshot {
    Class {
        name: String,
        driver: String,
    },
    Snapshot {
        name: String,
        namespace: String,
        class: String,
        claim: String,
    },
}

/// `v`'s keys, all of them among `allowed` (what the CRD's schema has at that place).
fn only_keys<'a>(v: &'a Value, allowed: &[&str], what: &str) -> &'a serde_json::Map<String, Value> {
    let m = v
        .as_object()
        .unwrap_or_else(|| panic!("{what}: not a mapping"));
    for k in m.keys() {
        assert!(allowed.contains(&k.as_str()), "{what}: unknown field {k}");
    }
    m
}

fn string(v: &Value, key: &str, what: &str) -> String {
    v.get(key)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| panic!("{what}: {key} must be a non-empty string"))
        .to_string()
}

fn snapshot_object(doc: &Value, what: &str) -> Snapshot {
    let meta = |doc: &Value, namespaced: bool| {
        let m = &doc["metadata"];
        only_keys(
            m,
            &["name", "namespace", "labels", "annotations"],
            &format!("{what}.metadata"),
        );
        assert_eq!(
            m.get("namespace").is_some(),
            namespaced,
            "{what}: metadata.namespace"
        );
        string(m, "name", &format!("{what}.metadata"))
    };
    match doc["kind"].as_str() {
        Some("VolumeSnapshotClass") => {
            only_keys(
                doc,
                &[
                    "apiVersion",
                    "kind",
                    "metadata",
                    "driver",
                    "deletionPolicy",
                    "parameters",
                ],
                what,
            );
            let policy = string(doc, "deletionPolicy", what);
            assert!(
                ["Delete", "Retain"].contains(&policy.as_str()),
                "{what}: deletionPolicy {policy}"
            );
            if let Some(p) = doc.get("parameters") {
                let p = p
                    .as_object()
                    .unwrap_or_else(|| panic!("{what}: parameters"));
                for k in p.keys() {
                    assert!(
                        k.starts_with(storch::csi::convert::RESERVED_PREFIX),
                        "{what}: parameter {k}: storch reads no snapshot class parameter of its own"
                    );
                }
            }
            Snapshot::Class {
                name: meta(doc, false),
                driver: string(doc, "driver", what),
            }
        }
        Some("VolumeSnapshot") => {
            only_keys(doc, &["apiVersion", "kind", "metadata", "spec"], what);
            let spec = &doc["spec"];
            only_keys(
                spec,
                &["volumeSnapshotClassName", "source"],
                &format!("{what}.spec"),
            );
            let source = &spec["source"];
            let s = only_keys(
                source,
                &["persistentVolumeClaimName", "volumeSnapshotContentName"],
                &format!("{what}.spec.source"),
            );
            assert_eq!(
                s.len(),
                1,
                "{what}: spec.source names exactly one of its two fields"
            );
            Snapshot::Snapshot {
                name: meta(doc, true),
                namespace: string(&doc["metadata"], "namespace", what),
                class: string(spec, "volumeSnapshotClassName", what),
                claim: string(source, "persistentVolumeClaimName", what),
            }
        }
        other => panic!("{what}: unknown snapshot kind {other:?}"),
    }
}

/// Every example object.
#[derive(Debug, Default)]
struct Examples {
    classes: BTreeMap<String, storage::StorageClass>,
    claims: BTreeMap<String, core::PersistentVolumeClaim>,
    volumes: BTreeMap<String, core::PersistentVolume>,
    pods: Vec<core::Pod>,
    snapshot_classes: BTreeMap<String, String>,
    snapshots: BTreeMap<String, (String, String, String)>,
}

fn load_examples() -> Examples {
    let mut ex = Examples::default();
    for path in yaml_files(&repo().join("examples/csi")) {
        let file = path.file_name().unwrap().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(&path).unwrap();
        for (i, doc) in yaml_documents(&text, &file).iter().enumerate() {
            let what = format!("examples/csi/{file} #{}", i + 1);
            match (doc["apiVersion"].as_str(), doc["kind"].as_str()) {
                (Some("snapshot.storage.k8s.io/v1"), _) => match snapshot_object(doc, &what) {
                    Snapshot::Class { name, driver } => {
                        ex.snapshot_classes.insert(name, driver);
                    }
                    Snapshot::Snapshot {
                        name,
                        namespace,
                        class,
                        claim,
                    } => {
                        ex.snapshots.insert(name, (namespace, class, claim));
                    }
                },
                (Some("v1"), Some("PersistentVolume")) => {
                    let pv: core::PersistentVolume = typed(doc, &what);
                    ex.volumes.insert(pv.metadata.name.clone().unwrap(), pv);
                }
                (Some("v1"), Some("Pod")) => ex.pods.push(typed(doc, &what)),
                _ => match object(doc, &what) {
                    Object::StorageClass(sc) => {
                        ex.classes.insert(sc.metadata.name.clone().unwrap(), sc);
                    }
                    Object::PersistentVolumeClaim(pvc) => {
                        ex.claims.insert(pvc.metadata.name.clone().unwrap(), pvc);
                    }
                    other => panic!("{what}: unexpected object {other:?}"),
                },
            }
        }
    }
    ex
}

/// The keys `csi::convert::volume_context` may put in a volume's context, whatever it
/// attaches as.
fn volume_context_keys() -> BTreeSet<String> {
    use storch::drivers::Attachment;
    let mut config: storch::model::VolumeConfig = serde_json::from_value(json!({
        "version": "1", "name": "v", "internalName": "i", "size": "1073741824",
        "protocol": "file", "fileSystem": "ext4",
    }))
    .unwrap();
    let a = &mut config.access_information;
    a.nfs_server_ip = "192.0.2.1".into();
    a.nfs_path = "/p".into();
    a.iscsi_target_portal = "192.0.2.1:3260".into();
    a.iscsi_portals = vec!["192.0.2.2:3260".into()];
    a.iscsi_target_iqn = "iqn.x".into();
    a.iscsi_lun_number = 1;
    a.iscsi_interface = "default".into();
    a.iscsi_username = "u".into();
    a.local_path = "/l".into();
    [Attachment::Nfs, Attachment::Iscsi, Attachment::LocalPath]
        .into_iter()
        .flat_map(|att| {
            storch::csi::convert::volume_context("b", "d", &config, Some(att)).into_keys()
        })
        .collect()
}

#[test]
fn csi_examples_parse_and_refer_to_each_other() {
    let ex = load_examples();
    // Every class is the CSI driver's, and its parameters are ones storch reads: the CSI
    // reader (CreateVolume, GetCapacity) and the StorageClass reader both accept them.
    for (name, sc) in &ex.classes {
        assert_eq!(sc.provisioner, DRIVER, "{name}: provisioner");
        let params: HashMap<String, String> = sc
            .parameters
            .clone()
            .unwrap_or_default()
            .into_iter()
            .collect();
        assert!(
            params.contains_key("backendType"),
            "{name}: backendType selects the driver"
        );
        storch::csi::convert::Parameters::read(&params).unwrap_or_else(|e| {
            panic!(
                "{name}: the CSI parameter reader refuses it: {}",
                e.message()
            )
        });
        let own: BTreeMap<&String, &String> = params
            .iter()
            .filter(|(k, _)| !storch::csi::convert::is_sidecar_key(k))
            .collect();
        storch::model::class_from_parameters(name, own)
            .unwrap_or_else(|e| panic!("{name}: class_from_parameters refuses it: {e}"));
        for k in params
            .keys()
            .filter(|k| storch::csi::convert::is_sidecar_key(k))
        {
            assert_eq!(
                k, "csi.storage.k8s.io/fstype",
                "{name}: {k} (storch's classes carry no secret)"
            );
        }
    }
    let drivers: BTreeSet<&str> = ex
        .classes
        .values()
        .map(|sc| sc.parameters.as_ref().unwrap()["backendType"].as_str())
        .collect();
    assert_eq!(
        drivers,
        BTreeSet::from([
            "ontap-nas",
            "ontap-san",
            "solidfire-san",
            "eseries-iscsi",
            "nexentastor-iscsi",
            "local",
            "fake"
        ]),
        "a class for each driver"
    );

    // Topology: a class limited to a zone, provisioned where the pod goes.
    let zoned = &ex.classes["storch-zone-a"];
    assert_eq!(
        zoned.volume_binding_mode.as_deref(),
        Some("WaitForFirstConsumer")
    );
    let terms = zoned.allowed_topologies.as_deref().unwrap();
    let expr = &terms[0].match_label_expressions.as_deref().unwrap()[0];
    assert_eq!(
        (expr.key.as_str(), expr.values.as_slice()),
        ("topology.kubernetes.io/zone", &["zone-a".to_string()][..])
    );

    // Snapshots: the class is the driver's, the snapshot names a claim of the examples.
    assert_eq!(
        ex.snapshot_classes
            .get("storch-snapshots")
            .map(String::as_str),
        Some(DRIVER)
    );
    let (ns, class, claim) = &ex.snapshots["nginx-dynamic-snapshot"];
    assert!(ex.snapshot_classes.contains_key(class));
    let source = &ex.claims[claim];
    assert_eq!(source.metadata.namespace.as_ref(), Some(ns));

    // Claims: a known class; restored and cloned claims name an existing source in their
    // namespace, of the same class, no smaller.
    let size = |pvc: &core::PersistentVolumeClaim| {
        let q = requested_storage(pvc.spec.as_ref().unwrap());
        storch::model::parse_size(q).unwrap_or_else(|e| panic!("{q}: {e}"))
    };
    let mut sources = BTreeSet::new();
    for (name, pvc) in &ex.claims {
        let spec = pvc.spec.as_ref().unwrap();
        let class = spec
            .storage_class_name
            .as_deref()
            .unwrap_or_else(|| panic!("{name}: class"));
        assert!(
            ex.classes.contains_key(class),
            "{name}: unknown class {class}"
        );
        let Some(source) = &spec.data_source else {
            continue;
        };
        let (from, from_class) = match (source.api_group.as_deref(), source.kind.as_str()) {
            (Some("snapshot.storage.k8s.io"), "VolumeSnapshot") => {
                let (sns, _, sclaim) = &ex.snapshots[&source.name];
                assert_eq!(
                    Some(sns),
                    pvc.metadata.namespace.as_ref(),
                    "{name}: same namespace"
                );
                (&ex.claims[sclaim], "snapshot")
            }
            (None, "PersistentVolumeClaim") => (&ex.claims[&source.name], "clone"),
            other => panic!("{name}: dataSource {other:?}"),
        };
        assert_eq!(from.metadata.namespace, pvc.metadata.namespace, "{name}");
        assert_eq!(
            from.spec.as_ref().unwrap().storage_class_name.as_deref(),
            Some(class),
            "{name}"
        );
        assert!(size(pvc) >= size(from), "{name}: smaller than its source");
        sources.insert(from_class);
    }
    assert_eq!(sources, BTreeSet::from(["clone", "snapshot"]));

    // Raw block: a Block claim of an iSCSI class, used as a device by a pod.
    let block = &ex.claims["raw-block"];
    let block_spec = block.spec.as_ref().unwrap();
    assert_eq!(block_spec.volume_mode.as_deref(), Some("Block"));
    let block_class = &ex.classes[block_spec.storage_class_name.as_deref().unwrap()];
    assert!(block_class.parameters.as_ref().unwrap()["backendType"].ends_with("-iscsi"));
    let pod = ex
        .pods
        .iter()
        .find(|p| p.metadata.name.as_deref() == Some("raw-block"))
        .unwrap();
    let pod_spec = pod.spec.as_ref().unwrap();
    let device = &pod_spec.containers[0].volume_devices.as_deref().unwrap()[0];
    let volume = pod_spec
        .volumes
        .iter()
        .flatten()
        .find(|v| v.name == device.name)
        .unwrap();
    assert_eq!(
        volume.persistent_volume_claim.as_ref().unwrap().claim_name,
        "raw-block"
    );

    // A pre-provisioned PV: the driver's, by volumeHandle, with a context the controller
    // could have answered, bound by its claim.
    let pv = &ex.volumes["nginx-existing"];
    let pv_spec = pv.spec.as_ref().unwrap();
    let csi = pv_spec.csi.as_ref().unwrap();
    assert_eq!(csi.driver, DRIVER);
    storch::model::validate_name("volumeHandle", &csi.volume_handle).unwrap();
    let known = volume_context_keys();
    for k in csi.volume_attributes.as_ref().unwrap().keys() {
        assert!(
            known.contains(k),
            "{k} is not a key of storch's volume_context: {known:?}"
        );
    }
    assert_eq!(
        pv_spec.persistent_volume_reclaim_policy.as_deref(),
        Some("Retain")
    );
    let claim = &ex.claims["nginx-existing"];
    let claim_spec = claim.spec.as_ref().unwrap();
    assert_eq!(claim_spec.volume_name, pv.metadata.name);
    assert_eq!(claim_spec.storage_class_name, pv_spec.storage_class_name);
    assert_eq!(claim_spec.access_modes, pv_spec.access_modes);
}

#[test]
fn snapshot_objects_are_checked_field_by_field() {
    let parse = |yaml: &str| {
        let yaml = yaml.to_string();
        std::panic::catch_unwind(move || {
            let doc = &yaml_documents(&yaml, "inline")[0];
            format!("{:?}", snapshot_object(doc, "inline"))
        })
    };
    let class = "apiVersion: snapshot.storage.k8s.io/v1\nkind: VolumeSnapshotClass\nmetadata: {name: c}\ndriver: d\ndeletionPolicy: Delete\n";
    assert!(parse(class).is_ok());
    for bad in [
        class.replace("driver:", "drivr:"),
        class.replace("Delete", "Keep"),
        class.replace("metadata: {name: c}", "metadata: {name: c, namespace: x}"),
        "apiVersion: snapshot.storage.k8s.io/v1\nkind: VolumeSnapshot\nmetadata: {name: s, namespace: n}\nspec: {volumeSnapshotClassName: c, source: {persistentVolumeClaim: p}}\n".into(),
        "apiVersion: snapshot.storage.k8s.io/v1\nkind: VolumeSnapshotContent\nmetadata: {name: s}\n".into(),
    ] {
        assert!(parse(&bad).is_err(), "accepted:\n{bad}");
    }
}
