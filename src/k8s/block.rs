//! Raw block claims (`spec.volumeMode: Block`): the volume is asked for over a block protocol
//! and its PV carries `volumeMode: Block` and no `fsType`. Only iSCSI volumes can be raw
//! block devices: a claim whose class can place it on no block backend, or whose volume
//! attaches over NFS or a local path, is refused naming `spec.volumeMode`. Pure; unit-tested
//! below.

use k8s_openapi::api::core::v1::PersistentVolumeClaim;

use crate::drivers::Attachment;
use crate::model::Protocol;

/// The field errors name.
pub const FIELD: &str = "spec.volumeMode";

/// Whether the claim asks for a raw block device: `Block`; `Filesystem` or nothing is a
/// file system; anything else is an error naming the field.
pub fn wants_block(pvc: &PersistentVolumeClaim) -> Result<bool, String> {
    match pvc.spec.as_ref().and_then(|s| s.volume_mode.as_deref()) {
        None | Some("Filesystem") => Ok(false),
        Some("Block") => Ok(true),
        Some(other) => Err(format!("{FIELD}: {other:?} is not Filesystem or Block")),
    }
}

/// The protocol of a block claim: block, unless the claim's `protocol` annotation asks for
/// file, which is refused.
pub fn protocol(annotated: Protocol) -> Result<Protocol, String> {
    match annotated {
        Protocol::File => Err(format!(
            "{FIELD}: Block is a raw iSCSI device, but the claim's protocol annotation asks \
             for file"
        )),
        _ => Ok(Protocol::Block),
    }
}

/// Refuses a block claim's volume unless it attaches over iSCSI.
pub fn check_attachment(attachment: Option<Attachment>, driver: &str) -> Result<(), String> {
    match attachment {
        Some(Attachment::Iscsi) => Ok(()),
        Some(Attachment::Nfs) => Err(format!(
            "{FIELD}: Block is only for iSCSI volumes; driver {driver} attaches this volume \
             over NFS"
        )),
        Some(Attachment::LocalPath) => Err(format!(
            "{FIELD}: Block is only for iSCSI volumes; driver {driver} attaches this volume as \
             a local path"
        )),
        None => Err(format!(
            "{FIELD}: Block is only for iSCSI volumes; driver {driver} is unknown"
        )),
    }
}

/// Why a block claim of `class` cannot be placed, when none of the backends of the class's
/// pools serves block (`backends`: name and protocol of each).
pub fn refuse_class(class: &str, backends: &[(String, Protocol)]) -> Option<String> {
    if backends
        .iter()
        .any(|(_, p)| matches!(p, Protocol::Block | Protocol::Any))
    {
        return None;
    }
    let names: Vec<&str> = backends.iter().map(|(n, _)| n.as_str()).collect();
    Some(format!(
        "{FIELD}: Block is a raw iSCSI device, but storage class {class} has no block pools \
         (its backends: {}); use a class of iSCSI backends or volumeMode Filesystem",
        if names.is_empty() {
            "none".to_string()
        } else {
            names.join(", ")
        }
    ))
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::PersistentVolumeClaimSpec;

    use super::*;

    fn claim(mode: Option<&str>) -> PersistentVolumeClaim {
        PersistentVolumeClaim {
            spec: Some(PersistentVolumeClaimSpec {
                volume_mode: mode.map(str::to_string),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn modes() {
        assert!(!wants_block(&claim(None)).unwrap());
        assert!(!wants_block(&claim(Some("Filesystem"))).unwrap());
        assert!(wants_block(&claim(Some("Block"))).unwrap());
        let e = wants_block(&claim(Some("block"))).unwrap_err();
        assert!(e.starts_with("spec.volumeMode"), "{e}");
        assert_eq!(protocol(Protocol::Any), Ok(Protocol::Block));
        assert!(
            protocol(Protocol::File)
                .unwrap_err()
                .contains("spec.volumeMode")
        );
    }

    #[test]
    fn only_iscsi_attaches_raw() {
        assert!(check_attachment(Some(Attachment::Iscsi), "ontap-san").is_ok());
        let e = check_attachment(Some(Attachment::Nfs), "ontap-nas").unwrap_err();
        assert!(
            e.contains("spec.volumeMode") && e.contains("ontap-nas"),
            "{e}"
        );
        assert!(check_attachment(Some(Attachment::LocalPath), "local").is_err());
        let nfs = [("nas".to_string(), Protocol::File)];
        let e = refuse_class("gold", &nfs).unwrap();
        assert!(e.contains("spec.volumeMode") && e.contains("nas"), "{e}");
        assert!(refuse_class("gold", &[("san".to_string(), Protocol::Block)]).is_none());
    }

    /// The NexentaStor example: its StorageClass carries the seed's class parameters as
    /// driver parameters, and its raw block claim asks for a block volume without a file
    /// system.
    #[test]
    fn the_nexentastor_kubernetes_example() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("examples/nexentastor/storageclass-kubernetes.yaml");
        let text = std::fs::read_to_string(path).unwrap();
        let docs: Vec<serde_json::Value> = text
            .split("\n---")
            .map(|d| crate::yaml::parse(d).unwrap())
            .collect();
        let sc = serde_json::from_value(docs[0].clone()).unwrap();
        let class = crate::k8s::translate::storage_class(&sc, &["netapp.io/trident".into()])
            .unwrap()
            .unwrap();
        assert_eq!(
            class.config.parameters["volumeGroup"],
            "csiPool/csiVolumeGroup"
        );
        assert!(class.config.parameters.contains_key("chapSecret"));
        let pvc: PersistentVolumeClaim = serde_json::from_value(docs[1].clone()).unwrap();
        let v = crate::k8s::translate::volume_config(&pvc, &class, None).unwrap();
        assert_eq!(v.protocol, Protocol::Block);
        assert_eq!(v.file_system, "");
    }
}
