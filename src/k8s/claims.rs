//! The PVC controller (leader only): provisions a volume and its PV for each pending claim
//! of one of our classes, cleans up after claims bound elsewhere or lost.
//!
//! Restart-safe by construction: the volume and PV names are derived from the claim, so a
//! reconcile after a crash finds what the last one did — a PV (done), a volume still being
//! created (the core finishes it at boot; wait), an online volume without a PV (write it) —
//! and never provisions twice. A PV written or found is recorded in the log once
//! (`Ctx::record_pv`), so that the sweep never takes its volume for an orphan.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{DeleteParams, PostParams};
use kube::runtime::controller::{self, Action, Controller};
use kube::runtime::watcher;
use kube::{Api, ResourceExt};
use tokio::sync::watch;

use super::translate::{self, ClaimClass, FrontendClass};
use super::{Ctx, ReconcileError, is_conflict, is_not_found};
use crate::actors::{CoreError, RequestCtx, VolumeState};
use crate::model::VolumeRequest;

/// Re-examine every claim this often even without a change (a safety net, not the retry).
const RESYNC: Duration = Duration::from_secs(300);
/// How often to look again at a volume another operation holds (creating, deleting).
const IN_FLIGHT: Duration = Duration::from_millis(500);

/// The PVC controller; its store is the sweep's view of claims.
pub(super) fn controller(
    ctx: &Ctx,
    class_changes: watch::Receiver<u64>,
) -> Controller<PersistentVolumeClaim> {
    let api: Api<PersistentVolumeClaim> = Api::all(ctx.client.clone());
    let classes = futures::stream::unfold(class_changes, |mut rx| async move {
        rx.changed().await.ok()?;
        Some(((), rx))
    });
    Controller::new(api, watcher::Config::default()).reconcile_all_on(classes)
}

pub(super) async fn run(
    controller: Controller<PersistentVolumeClaim>,
    ctx: Arc<Ctx>,
    quit: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) {
    controller
        .graceful_shutdown_on(quit)
        .run(reconcile, error_policy, ctx.clone())
        .for_each(|result| {
            match result {
                // A claim deleted while a retry was pending: its retry state goes with it.
                Err(controller::Error::ObjectNotFound(gone)) => ctx.succeeded(&format!(
                    "pvc/{}/{}",
                    gone.namespace.as_deref().unwrap_or_default(),
                    gone.name
                )),
                Err(e) => tracing::debug!(error = %e, "PVC controller"),
                Ok(_) => {}
            }
            std::future::ready(())
        })
        .await;
}

pub(super) fn key(pvc: &PersistentVolumeClaim) -> String {
    format!(
        "pvc/{}/{}",
        pvc.namespace().unwrap_or_default(),
        pvc.name_any()
    )
}

fn error_policy(pvc: Arc<PersistentVolumeClaim>, e: &ReconcileError, ctx: Arc<Ctx>) -> Action {
    let delay = ctx.backoff(&key(&pvc));
    tracing::warn!(claim = %key(&pvc), error = %e, retry_in = ?delay, "claim not reconciled");
    Action::requeue(delay)
}

async fn reconcile(
    pvc: Arc<PersistentVolumeClaim>,
    ctx: Arc<Ctx>,
) -> Result<Action, ReconcileError> {
    let action = reconcile_claim(&pvc, &ctx).await?;
    ctx.succeeded(&key(&pvc));
    Ok(action)
}

pub(super) fn reference(
    pvc: &PersistentVolumeClaim,
) -> k8s_openapi::api::core::v1::ObjectReference {
    translate::reference_of("PersistentVolumeClaim", "v1", &pvc.metadata)
}

async fn reconcile_claim(pvc: &PersistentVolumeClaim, ctx: &Ctx) -> Result<Action, ReconcileError> {
    if pvc.metadata.deletion_timestamp.is_some() || translate::requested(pvc).is_none() {
        return Ok(Action::await_change());
    }
    let sync = ctx.class_sync.read().await;
    let class = match translate::claim_class(pvc) {
        ClaimClass::ExplicitlyNone => {
            tracing::debug!(claim = %key(pvc), "storageClassName is \"\": not for dynamic provisioning");
            return Ok(Action::await_change());
        }
        ClaimClass::Named(name) => match ctx.class(&name) {
            Some(class) => class,
            // Another provisioner's class, or one we have not seen yet (a class change
            // re-examines every claim).
            None => return Ok(Action::await_change()),
        },
        ClaimClass::Default => {
            let defaults = ctx.default_classes();
            match defaults.as_slice() {
                [] => return Ok(Action::await_change()),
                [one] => one.clone(),
                several => {
                    if phase(pvc) == "Pending" {
                        let names: Vec<&str> =
                            several.iter().map(|c| c.config.name.as_str()).collect();
                        ctx.event(
                            &reference(pvc),
                            true,
                            "IgnoredClaim",
                            "Provision",
                            format!(
                                "the claim names no storage class and several are default ({}); \
                                 name one in spec.storageClassName",
                                names.join(", ")
                            ),
                        )
                        .await;
                    }
                    return Ok(Action::await_change());
                }
            }
        }
    };
    drop(sync);
    let name = translate::unique_name(pvc);
    match phase(pvc) {
        "Pending" => {
            let pre_bound = pvc.spec.as_ref().and_then(|s| s.volume_name.as_deref());
            if pre_bound.is_some_and(|v| !v.is_empty() && v != name) {
                // Bound by hand to a PV of the user's choice: not for dynamic provisioning.
                return Ok(Action::await_change());
            }
            if pvc.spec.as_ref().is_some_and(|s| s.selector.is_some()) {
                ctx.event(
                    &reference(pvc),
                    true,
                    "IgnoredClaim",
                    "Provision",
                    "storch does not provision claims with a selector".into(),
                )
                .await;
                return Ok(Action::await_change());
            }
            provision(pvc, &class, &name, ctx).await
        }
        "Bound" => {
            let bound_to = pvc.spec.as_ref().and_then(|s| s.volume_name.as_deref());
            if bound_to.is_some_and(|v| v != name) {
                clean_up_unused(pvc, &name, ctx).await?;
            } else if bound_to == Some(name.as_str()) {
                super::expand::reconcile(pvc, &class, &name, ctx).await?;
            }
            Ok(Action::requeue(RESYNC))
        }
        "Lost" => {
            if translate::annotation(pvc, "reclaimPolicy") == Some("Retain") {
                return Ok(Action::await_change());
            }
            delete_lost(pvc, &name, ctx).await
        }
        _ => Ok(Action::requeue(RESYNC)),
    }
}

fn phase(pvc: &PersistentVolumeClaim) -> &str {
    pvc.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("Pending")
}

async fn provision(
    pvc: &PersistentVolumeClaim,
    class: &FrontendClass,
    name: &str,
    ctx: &Ctx,
) -> Result<Action, ReconcileError> {
    let pvs: Api<PersistentVolume> = Api::all(ctx.client.clone());
    if let Some(pv) = pvs.get_opt(name).await? {
        let claim_uid = pv
            .spec
            .as_ref()
            .and_then(|s| s.claim_ref.as_ref())
            .and_then(|r| r.uid.as_deref());
        if claim_uid == pvc.metadata.uid.as_deref() {
            // Provisioned before (its record may have failed); binding is the PV controller's
            // job.
            ctx.record_pv(name).await?;
            return Ok(Action::requeue(RESYNC));
        }
        return Ok(fail(
            pvc,
            ctx,
            false,
            format!("a PV named {name} already exists for another claim"),
        )
        .await);
    }
    let volume = match ctx.core.get_volume(name) {
        Ok(v) => v,
        Err(CoreError::NotFound(_)) => match create_volume(pvc, class, name, ctx).await? {
            Some(v) => v,
            None => return Ok(Action::await_change()),
        },
        Err(e) => return Err(e.into()),
    };
    match volume.state {
        VolumeState::Online => {}
        // A create in flight (e.g. resumed at boot) or a delete: look again soon.
        VolumeState::Creating | VolumeState::Deleting => return Ok(Action::requeue(IN_FLIGHT)),
        // Its array lost it: no PV for it until it is back (the drift task warns on the claim).
        VolumeState::Missing => return Ok(Action::requeue(RESYNC)),
    }
    let backend = ctx.core.get_backend(&volume.backend)?;
    let provisioned = translate::Provisioned {
        config: &volume.config,
        driver: &backend.driver,
        backend: &volume.backend,
        node: ctx.opts.node_name.as_deref(),
        namespace: &ctx.namespace,
    };
    let pv = match translate::persistent_volume(pvc, class, &provisioned) {
        Ok(pv) => pv,
        Err(why) => {
            // The volume can never be given to Kubernetes: delete it, as Trident does.
            let why = match ctx.core.delete_volume(&request(pvc), name).await {
                Ok(()) | Err(CoreError::NotFound(_)) => why,
                Err(e) => format!("{why} => {e}"),
            };
            return Ok(fail(pvc, ctx, true, why).await);
        }
    };
    let access = &volume.config.access_information;
    if !access.iscsi_username.is_empty() {
        let secret = translate::chap_secret_name(&volume.backend, &access.iscsi_username);
        if let Err(e) = write_chap_secret(ctx, &secret, name, access).await {
            let what = format!("its CHAP Secret {}/{secret}", ctx.namespace);
            return Err(refused(pvc, ctx, name, &what, e).await);
        }
    }
    match pvs.create(&PostParams::default(), &pv).await {
        Ok(_) => {}
        Err(e) if is_conflict(&e) => return Ok(Action::requeue(IN_FLIGHT)),
        // The volume stays: the next try writes the PV for it.
        Err(e) => return Err(refused(pvc, ctx, name, &format!("its PV {name}"), e.into()).await),
    }
    // A failure is retried with backoff, and the retry finds the PV written (above).
    ctx.record_pv(name).await?;
    tracing::info!(claim = %key(pvc), volume = %name, backend = %volume.backend, pool = %volume.pool, "provisioned");
    ctx.event(
        &reference(pvc),
        false,
        "ProvisioningSuccess",
        "Provision",
        "Kubernetes frontend provisioned a volume and a PV for the PVC.".into(),
    )
    .await;
    Ok(Action::requeue(RESYNC))
}

pub(super) fn request(pvc: &PersistentVolumeClaim) -> RequestCtx {
    RequestCtx::new(format!(
        "k8s:pvc/{}/{}/{}",
        pvc.namespace().unwrap_or_default(),
        pvc.name_any(),
        pvc.metadata.uid.as_deref().unwrap_or_default()
    ))
}

/// Creates the claim's volume. `Ok(None)` when the claim itself is wrong (reported on it;
/// retried when it changes).
async fn create_volume(
    pvc: &PersistentVolumeClaim,
    class: &FrontendClass,
    name: &str,
    ctx: &Ctx,
) -> Result<Option<crate::actors::VolumeView>, ReconcileError> {
    let clone_source = match translate::annotation(pvc, "cloneFromPVC").filter(|s| !s.is_empty()) {
        None => None,
        Some(source) => match clone_source(pvc, source, class, ctx).await? {
            Ok(v) => Some(v),
            // The source claim may still appear or change: retried with backoff.
            Err(why) => {
                ctx.event(
                    &reference(pvc),
                    false,
                    "ProvisioningFailed",
                    "Provision",
                    why.clone(),
                )
                .await;
                return Err(ReconcileError::Other(why));
            }
        },
    };
    let wanted = match translate::volume_config(pvc, class, clone_source)
        .and_then(|c| VolumeRequest::parse(c).map_err(|e| e.to_string()))
    {
        Ok(r) => r,
        Err(why) => {
            fail(pvc, ctx, false, why).await;
            return Ok(None);
        }
    };
    if let Some(why) = refuse_block(pvc, class, ctx) {
        fail(pvc, ctx, true, why).await;
        return Ok(None);
    }
    let (protocol, size) = (wanted.protocol(), wanted.size_bytes());
    match ctx.core.add_volume(&request(pvc), wanted).await {
        Ok(v) => Ok(Some(v)),
        // Made concurrently (or resumed at boot): the caller looks at its state.
        Err(CoreError::AlreadyExists(_)) => Ok(Some(ctx.core.get_volume(name)?)),
        Err(CoreError::Invalid(why) | CoreError::OutOfRange(why)) => {
            fail(pvc, ctx, false, why).await;
            Ok(None)
        }
        Err(e) => {
            let mut note = e.to_string();
            if matches!(e, CoreError::Failed(_)) {
                // The core names the pools it tried; add the others and why they were not.
                note.push_str(&unused_pools(ctx, &class.config.name, protocol, size));
            }
            // A backend still initialising is a wait, not a failure: retried with backoff.
            let reason = match e {
                CoreError::Starting(_) => "WaitingForBackend",
                _ => "ProvisioningFailed",
            };
            ctx.event(&reference(pvc), false, reason, "Provision", note)
                .await;
            Err(e.into())
        }
    }
}

/// Why a raw block claim cannot be provisioned in its class (none of the class's backends
/// serves block), if it cannot.
fn refuse_block(pvc: &PersistentVolumeClaim, class: &FrontendClass, ctx: &Ctx) -> Option<String> {
    if !super::block::wants_block(pvc).unwrap_or(false) {
        return None;
    }
    let view = ctx.core.get_storage_class(&class.config.name).ok()?;
    let backends: Vec<(String, crate::model::Protocol)> = view
        .pools
        .keys()
        .filter_map(|b| ctx.core.get_backend(b).ok())
        .map(|b| (b.name, b.protocol))
        .collect();
    super::block::refuse_class(&class.config.name, &backends)
}

/// `; pools not used: backend/pool: reason, …; …` for every pool of every backend that a
/// create of this class would not try (empty when every pool was a candidate).
fn unused_pools(
    ctx: &Ctx,
    class: &str,
    protocol: crate::model::Protocol,
    size: Option<u64>,
) -> String {
    let Ok(explanation) = ctx.core.explain(class, protocol, size) else {
        return String::new();
    };
    let unused: Vec<String> = explanation
        .pools
        .iter()
        .filter(|p| !p.candidate)
        .map(|p| format!("{}/{}: {}", p.backend, p.pool, p.reasons.join(", ")))
        .collect();
    if unused.is_empty() {
        String::new()
    } else {
        format!("; pools not used: {}", unused.join("; "))
    }
}

/// The storch name of the `cloneFromPVC` source: a claim in the same namespace, of the same
/// class. `Ok(Err(why))` when the annotation cannot be honoured.
async fn clone_source(
    pvc: &PersistentVolumeClaim,
    source: &str,
    class: &FrontendClass,
    ctx: &Ctx,
) -> Result<Result<String, String>, ReconcileError> {
    let namespace = pvc.namespace().unwrap_or_default();
    let api: Api<PersistentVolumeClaim> = Api::namespaced(ctx.client.clone(), &namespace);
    let Some(src) = api.get_opt(source).await? else {
        return Ok(Err(format!(
            "cloning from a PVC requires both PVCs be in the same namespace: there is no PVC \
             {source} in {namespace}"
        )));
    };
    let same_class = match translate::claim_class(&src) {
        ClaimClass::Named(n) => n == class.config.name,
        ClaimClass::Default => class.is_default,
        ClaimClass::ExplicitlyNone => false,
    };
    if !same_class {
        return Ok(Err(format!(
            "cloning from a PVC requires matching storage classes: {source} is not of class {}",
            class.config.name
        )));
    }
    Ok(Ok(translate::unique_name(&src)))
}

/// The volume is made but Kubernetes refused an object written for it (its CHAP Secret, its
/// PV): reported on the claim as a Warning, so that it does not stay Pending without a word;
/// the error is returned to be retried with backoff, and the volume stays for the next try.
async fn refused(
    pvc: &PersistentVolumeClaim,
    ctx: &Ctx,
    volume: &str,
    what: &str,
    e: ReconcileError,
) -> ReconcileError {
    ctx.event(
        &reference(pvc),
        true,
        "ProvisioningFailed",
        "Provision",
        format!("volume {volume} is made, but writing {what} failed: {e}; retrying with backoff"),
    )
    .await;
    e
}

/// Reports a failure on the claim. `warning` once a PV was built (Trident's rule). The
/// claim is not retried until it changes: retrying cannot fix what it asks for.
async fn fail(pvc: &PersistentVolumeClaim, ctx: &Ctx, warning: bool, why: String) -> Action {
    tracing::warn!(claim = %key(pvc), %why, "provisioning failed");
    ctx.event(
        &reference(pvc),
        warning,
        "ProvisioningFailed",
        "Provision",
        why,
    )
    .await;
    Action::await_change()
}

/// The CHAP Secret `name` a SAN PV points to (created or updated in storch's namespace).
async fn write_chap_secret(
    ctx: &Ctx,
    name: &str,
    volume: &str,
    access: &crate::model::AccessInfo,
) -> Result<(), ReconcileError> {
    let secrets = ctx.core.volume_access_secrets(volume)?;
    let text = |k: &str| {
        secrets
            .get(k)
            .and_then(|v| v.as_str())
            .unwrap_or_default()
            .to_string()
    };
    let (user, initiator, target) = (
        access.iscsi_username.clone(),
        text("iscsiInitiatorSecret"),
        text("iscsiTargetSecret"),
    );
    let mut data = BTreeMap::new();
    for prefix in ["discovery.sendtargets.auth", "node.session.auth"] {
        for (k, v) in [
            ("username", &user),
            ("password", &initiator),
            ("username_in", &user),
            ("password_in", &target),
        ] {
            data.insert(format!("{prefix}.{k}"), ByteString(v.clone().into_bytes()));
        }
    }
    let secret = Secret {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            namespace: Some(ctx.namespace.clone()),
            ..ObjectMeta::default()
        },
        type_: Some("kubernetes.io/iscsi-chap".into()),
        data: Some(data),
        ..Secret::default()
    };
    let api: Api<Secret> = Api::namespaced(ctx.client.clone(), &ctx.namespace);
    match api.create(&PostParams::default(), &secret).await {
        Ok(_) => Ok(()),
        Err(e) if is_conflict(&e) => {
            let mut current = api.get(name).await?;
            current.type_ = secret.type_;
            current.data = secret.data;
            api.replace(name, &PostParams::default(), &current).await?;
            Ok(())
        }
        Err(e) => Err(e.into()),
    }
}

/// A claim bound to another PV: our volume and PV for it, if any, are not needed.
async fn clean_up_unused(
    pvc: &PersistentVolumeClaim,
    name: &str,
    ctx: &Ctx,
) -> Result<(), ReconcileError> {
    // The local check first: most claims bound elsewhere were never ours, and this runs at
    // every resync of every bound claim. (A PV of ours always comes after its volume.)
    if ctx.core.get_volume(name).is_err() {
        return Ok(());
    }
    let pvs: Api<PersistentVolume> = Api::all(ctx.client.clone());
    let ours = pvs.get_opt(name).await?.filter(|pv| {
        pv.spec
            .as_ref()
            .and_then(|s| s.claim_ref.as_ref())
            .and_then(|r| r.uid.as_deref())
            == pvc.metadata.uid.as_deref()
    });
    tracing::info!(claim = %key(pvc), volume = %name, "the claim is bound to another PV: deleting ours");
    match ctx.core.delete_volume(&request(pvc), name).await {
        Ok(()) | Err(CoreError::NotFound(_)) => {}
        Err(e) => return Err(e.into()),
    }
    if ours.is_some() {
        match pvs.delete(name, &DeleteParams::default()).await {
            Ok(_) => {}
            Err(e) if is_not_found(&e) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

/// A Lost claim (its PV is gone): delete the volume unless the claim says Retain.
async fn delete_lost(
    pvc: &PersistentVolumeClaim,
    name: &str,
    ctx: &Ctx,
) -> Result<Action, ReconcileError> {
    match ctx.core.delete_volume(&request(pvc), name).await {
        Ok(()) => {
            ctx.event(
                &reference(pvc),
                false,
                "VolumeDelete",
                "Delete",
                format!("volume {name} of the lost claim deleted"),
            )
            .await;
            Ok(Action::await_change())
        }
        Err(CoreError::NotFound(_)) => Ok(Action::await_change()),
        Err(e) => {
            ctx.event(
                &reference(pvc),
                true,
                "FailedVolumeDelete",
                "Delete",
                format!("volume {name} of the lost claim: {e}"),
            )
            .await;
            Err(e.into())
        }
    }
}
