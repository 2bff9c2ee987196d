//! PVC expansion (run by the PVC controller for a claim bound to our PV): the claim's request
//! is compared with the capacity its PV gives Kubernetes.
//!
//! - Larger, in a class with `allowVolumeExpansion: true`: the volume grows on its array
//!   through the core (the resize REST `resize` uses), then the PV's `spec.capacity`, then the
//!   claim's status, with events (`Resizing`, then `VolumeResizeSuccessful` or
//!   `FileSystemResizeRequired`).
//! - Larger, in a class without it, or smaller (no volume shrinks): a Warning
//!   (`VolumeResizeFailed`) and nothing changes.
//!
//! Status as Kubernetes' external resizer leaves it: for NFS, local and raw block volumes
//! `status.capacity` becomes the new size; for an iSCSI volume with a file system the claim
//! gets the condition `FileSystemResizePending` and keeps its old `status.capacity`, so that
//! the kubelet grows the file system when a pod mounts it next and records the capacity then.
//! Each step is idempotent: a reconcile after a crash or a failed write finishes the rest.

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use kube::api::{Patch, PatchParams};
use kube::{Api, ResourceExt};
use serde_json::{Value, json};

use super::claims::{key, reference, request};
use super::translate::{self, FrontendClass};
use super::{Ctx, ReconcileError};
use crate::actors::CoreError;
use crate::model::ResizeRequest;

/// The condition a claim carries while its file system waits for the kubelet.
const FS_PENDING: &str = "FileSystemResizePending";
/// The condition of an expansion in progress (dropped when it is done).
const RESIZING: &str = "Resizing";

/// Grows the claim's volume if its request grew; see the module documentation.
pub(super) async fn reconcile(
    pvc: &PersistentVolumeClaim,
    class: &FrontendClass,
    name: &str,
    ctx: &Ctx,
) -> Result<(), ReconcileError> {
    let Some(requested) = translate::requested(pvc) else {
        return Ok(());
    };
    let pvs: Api<PersistentVolume> = Api::all(ctx.client.clone());
    let Some(pv) = pvs.get_opt(name).await? else {
        // Gone: the claim is about to be Lost, which is handled there.
        return Ok(());
    };
    let spec = pv.spec.clone().unwrap_or_default();
    let claim_uid = spec.claim_ref.as_ref().and_then(|r| r.uid.as_deref());
    if claim_uid != pvc.metadata.uid.as_deref() {
        return Ok(());
    }
    let Some(capacity) = spec
        .capacity
        .as_ref()
        .and_then(|c| c.get("storage"))
        .cloned()
    else {
        return Ok(());
    };
    let (want, have) = match (
        translate::quantity_bytes(&requested.0),
        translate::quantity_bytes(&capacity.0),
    ) {
        (Ok(w), Ok(h)) => (w, h),
        (Err(why), _) => {
            warn(pvc, ctx, format!("spec.resources.requests.storage: {why}")).await;
            return Ok(());
        }
        (_, Err(why)) => {
            warn(pvc, ctx, format!("the capacity of PV {name}: {why}")).await;
            return Ok(());
        }
    };
    let file_system = needs_fs_resize(&pv);
    if want < have {
        warn(
            pvc,
            ctx,
            format!(
                "the claim asks for {} but its volume {name} has {}: storch does not shrink \
                 volumes; nothing changed",
                requested.0, capacity.0
            ),
        )
        .await;
        return finish_status(pvc, &capacity, file_system, ctx).await;
    }
    if want == have {
        return finish_status(pvc, &capacity, file_system, ctx).await;
    }
    if !class.allow_expansion {
        warn(
            pvc,
            ctx,
            format!(
                "the claim asks for {} but its volume {name} has {}: storage class {} does not \
                 allow volume expansion (allowVolumeExpansion); nothing changed",
                requested.0, capacity.0, class.config.name
            ),
        )
        .await;
        return Ok(());
    }
    let claims: Api<PersistentVolumeClaim> =
        Api::namespaced(ctx.client.clone(), &pvc.namespace().unwrap_or_default());
    // The volume may be larger already: a resize that stopped before the PV was written, or
    // one made through the REST API.
    let volume = ctx.core.get_volume(name)?;
    let size = crate::model::parse_size(&volume.config.size).unwrap_or(0);
    if size < want {
        ctx.event(
            &reference(pvc),
            false,
            "Resizing",
            "Resize",
            format!("storch is resizing volume {name} to {}", requested.0),
        )
        .await;
        let resize = ResizeRequest::parse(name, &want.to_string())
            .map_err(|e| ReconcileError::Other(e.to_string()))?;
        if let Err(e) = ctx.core.resize_volume(&request(pvc), &resize).await {
            tracing::warn!(claim = %key(pvc), volume = %name, error = %e, "resize failed");
            warn(pvc, ctx, format!("resizing volume {name} failed: {e}")).await;
            // Retrying cannot fix a refused size; a change of the claim brings it back.
            return match e {
                CoreError::Invalid(_) | CoreError::OutOfRange(_) => Ok(()),
                e => Err(e.into()),
            };
        }
    }
    let patch = json!({"spec": {"capacity": {"storage": requested.0}}});
    pvs.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    tracing::info!(claim = %key(pvc), volume = %name, size = %requested.0, "volume expanded");
    if file_system {
        let conditions = conditions(pvc, Some(FS_PENDING));
        let patch = json!({"status": {"conditions": conditions}});
        claims
            .patch_status(
                &pvc.name_any(),
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await?;
        ctx.event(
            &reference(pvc),
            false,
            "FileSystemResizeRequired",
            "Resize",
            format!(
                "volume {name} is {} on its array; the kubelet grows its file system when a \
                 pod mounts it next",
                requested.0
            ),
        )
        .await;
    } else {
        let conditions = conditions(pvc, None);
        let patch =
            json!({"status": {"capacity": {"storage": requested.0}, "conditions": conditions}});
        claims
            .patch_status(
                &pvc.name_any(),
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await?;
        ctx.event(
            &reference(pvc),
            false,
            "VolumeResizeSuccessful",
            "Resize",
            format!("volume {name} resized to {}", requested.0),
        )
        .await;
    }
    Ok(())
}

/// Finishes the status of an expansion whose PV was written but not the claim's status (a
/// failed write, a crash): `capacity` is the PV's.
async fn finish_status(
    pvc: &PersistentVolumeClaim,
    capacity: &k8s_openapi::apimachinery::pkg::api::resource::Quantity,
    file_system: bool,
    ctx: &Ctx,
) -> Result<(), ReconcileError> {
    let status = pvc.status.as_ref();
    let Some(recorded) = status
        .and_then(|s| s.capacity.as_ref())
        .and_then(|c| c.get("storage"))
    else {
        return Ok(());
    };
    let (Ok(recorded), Ok(pv)) = (
        translate::quantity_bytes(&recorded.0),
        translate::quantity_bytes(&capacity.0),
    ) else {
        return Ok(());
    };
    if recorded >= pv {
        return Ok(());
    }
    let pending = status
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == FS_PENDING));
    let patch = match (file_system, pending) {
        // The kubelet's turn.
        (true, true) => return Ok(()),
        (true, false) => json!({"status": {"conditions": conditions(pvc, Some(FS_PENDING))}}),
        (false, _) => json!({"status": {"capacity": {"storage": capacity.0},
                                        "conditions": conditions(pvc, None)}}),
    };
    let claims: Api<PersistentVolumeClaim> =
        Api::namespaced(ctx.client.clone(), &pvc.namespace().unwrap_or_default());
    claims
        .patch_status(
            &pvc.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await?;
    Ok(())
}

/// Whether the node must grow a file system after the array grew the volume: an iSCSI PV
/// mounted with a file system (not a raw block one).
fn needs_fs_resize(pv: &PersistentVolume) -> bool {
    let Some(spec) = pv.spec.as_ref() else {
        return false;
    };
    spec.iscsi.is_some() && spec.volume_mode.as_deref() != Some("Block")
}

/// The claim's conditions without the expansion ones, plus `add` (a merge patch replaces the
/// whole list).
fn conditions(pvc: &PersistentVolumeClaim, add: Option<&str>) -> Vec<Value> {
    let mut out: Vec<Value> = pvc
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .filter(|c| c.type_ != FS_PENDING && c.type_ != RESIZING)
        .filter_map(|c| serde_json::to_value(c).ok())
        .collect();
    if let Some(kind) = add {
        out.push(json!({
            "type": kind,
            "status": "True",
            "lastTransitionTime": humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string(),
            "message": "Waiting for user to (re-)start a pod to finish file system resize of volume on node.",
        }));
    }
    out
}

/// A Warning on the claim about its size; nothing else is done.
async fn warn(pvc: &PersistentVolumeClaim, ctx: &Ctx, why: String) {
    tracing::warn!(claim = %key(pvc), %why, "claim not resized");
    ctx.event(&reference(pvc), true, "VolumeResizeFailed", "Resize", why)
        .await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{
        ISCSIPersistentVolumeSource, NFSVolumeSource, PersistentVolumeClaimCondition,
        PersistentVolumeClaimStatus, PersistentVolumeSpec,
    };

    fn pv(iscsi: bool, mode: Option<&str>) -> PersistentVolume {
        PersistentVolume {
            spec: Some(PersistentVolumeSpec {
                iscsi: iscsi.then(ISCSIPersistentVolumeSource::default),
                nfs: (!iscsi).then(NFSVolumeSource::default),
                volume_mode: mode.map(str::to_string),
                ..PersistentVolumeSpec::default()
            }),
            ..PersistentVolume::default()
        }
    }

    #[test]
    fn only_iscsi_file_systems_wait_for_the_kubelet() {
        assert!(needs_fs_resize(&pv(true, None)));
        assert!(needs_fs_resize(&pv(true, Some("Filesystem"))));
        assert!(!needs_fs_resize(&pv(true, Some("Block"))));
        assert!(!needs_fs_resize(&pv(false, None)));
    }

    #[test]
    fn expansion_conditions_are_replaced_and_others_kept() {
        let condition = |t: &str| PersistentVolumeClaimCondition {
            type_: t.into(),
            status: "True".into(),
            ..PersistentVolumeClaimCondition::default()
        };
        let pvc = PersistentVolumeClaim {
            status: Some(PersistentVolumeClaimStatus {
                conditions: Some(vec![
                    condition(RESIZING),
                    condition("ModifyingVolume"),
                    condition(FS_PENDING),
                ]),
                ..PersistentVolumeClaimStatus::default()
            }),
            ..PersistentVolumeClaim::default()
        };
        let types = |c: Vec<Value>| -> Vec<String> {
            c.iter()
                .map(|c| c["type"].as_str().unwrap().to_string())
                .collect()
        };
        assert_eq!(types(conditions(&pvc, None)), ["ModifyingVolume"]);
        assert_eq!(
            types(conditions(&pvc, Some(FS_PENDING))),
            ["ModifyingVolume", FS_PENDING]
        );
    }
}
